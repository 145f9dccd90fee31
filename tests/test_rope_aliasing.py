"""RoPE calls whose arrays share one buffer: positions or offsets kept in q's memory,
q and k as disjoint views of a fused QKV projection, cos and sin side by side, an
empty q beside a full k.  Each call must give the result of the same call on
separate copies, or refuse when two outputs really share an element; the C
functions likewise (through the capsule, as a C extension calls them)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import test_capi_rope as capi
from rules import LLAMA31

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS


def _ids_in(host, values):
    """An int64 view of the first bytes of the float array ``host`` holding ``values``."""
    ids = host.reshape(-1).view(np.int64)[: len(values)]
    ids[:] = values
    return ids


def _primed(params=None, head_dim=8):
    """Plan the frequencies so that the small-call path takes the next calls."""
    fastpe.apply_rope(np.zeros((1, 1, 1, head_dim)), rope_parameters=params)


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("where", ["positions", "positions_2d", "offset"])
@pytest.mark.parametrize("host", ["q", "k"])
def test_positions_kept_in_q_or_k_give_every_tensor_its_angles(warm, where, host):
    kernel.rope_args.clear()
    if warm:
        _primed()
    q = np.zeros((2, 1, 4, 8))
    k = np.ones((2, 1, 4, 8))
    values = [3, 1, 2, 5] if where == "positions" else [3, 1, 2, 5, 7, 0, 4, 6]
    if where == "offset":
        values = [7, 100]
    ids = _ids_in(q if host == "q" else k, values)
    if where == "positions_2d":
        ids = ids.reshape(2, 4)
    kw = {"offset" if where == "offset" else "positions": ids}
    want_q, want_k = q.copy(), k.copy()
    fastpe.apply_rope(want_q, want_k, **{n: v.copy() for n, v in kw.items()})
    fastpe.apply_rope(q, k, **kw)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(k, want_k)


@pytest.mark.parametrize("empty", ["q", "k"])
@pytest.mark.parametrize("warm", [False, True])
def test_an_empty_tensor_leaves_the_other_rotated(empty, warm):
    kernel.rope_args.clear()
    if warm:
        _primed()
    full = np.ones((1, 1, 4, 8))
    none = np.zeros((1, 0, 4, 8))
    want = fastpe.apply_rope(full.copy(), offset=5)
    q, k = (none, full) if empty == "q" else (full, none)
    fastpe.apply_rope(q, k, offset=5)
    np.testing.assert_array_equal(full, want)
    assert not np.array_equal(full, np.ones_like(full))


def test_an_empty_torch_tensor_is_accepted_as_numpy_arrays_are():
    torch = pytest.importorskip("torch")
    k = torch.ones((1, 1, 4, 8))
    fastpe.apply_rope(torch.zeros((1, 0, 4, 8)), k, offset=5)
    want = fastpe.apply_rope(np.ones((1, 1, 4, 8), np.float32), offset=5)
    np.testing.assert_array_equal(k.numpy(), want)
    assert fastpe.sinusoidal(0, 8, out=torch.zeros((0, 8))).shape == (0, 8)


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_fused_qkv_views_are_rotated_like_copies(warm, layout, rng):
    kernel.rope_args.clear()
    if warm:
        _primed(LLAMA31, 16)
    qkv = rng.standard_normal((2, 5, 3, 4, 16)).astype(np.float32)  # (batch, seq, 3, heads, d)
    q, k = qkv[:, :, 0], qkv[:, :, 1]
    v0 = qkv[:, :, 2].copy()
    want_q, want_k = q.copy(), k.copy()
    kw = {"rope_parameters": LLAMA31, "seq_axis": 1, "layout": layout, "offset": 9}
    fastpe.apply_rope(want_q, want_k, **kw)
    fastpe.apply_rope(q, k, **kw)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(k, want_k)
    np.testing.assert_array_equal(qkv[:, :, 2], v0)


def test_column_halves_of_one_array_are_rotated_like_copies(rng):
    x = rng.standard_normal((1, 2, 3, 16))
    want_q, want_k = x[..., :8].copy(), x[..., 8:].copy()
    fastpe.apply_rope(want_q, want_k, offset=4)
    fastpe.apply_rope(x[..., :8], x[..., 8:], offset=4)
    np.testing.assert_array_equal(x[..., :8], want_q)
    np.testing.assert_array_equal(x[..., 8:], want_k)


@pytest.mark.parametrize(
    "views",
    [
        lambda x: (x[..., :8], x[..., 4:12]),  # columns that overlap
        lambda x: (x[..., :8], x[..., :8]),  # the same view twice
        lambda x: (x[:, :, :2, :8], x[:, :, 2:0:-1, :8]),  # one row in common, reversed
    ],
)
def test_q_and_k_sharing_an_element_are_refused_untouched(views):
    x = np.arange(1 * 2 * 3 * 16, dtype=np.float64).reshape(1, 2, 3, 16)
    q, k = views(x)
    before = x.copy()
    with pytest.raises(ValueError, match="q and k must not share memory"):
        fastpe.apply_rope(q, k, offset=4)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rope_cache_into_side_by_side_halves_of_one_buffer(warm, dtype):
    kernel.rope_args.clear()
    if warm:
        fastpe.rope_cache(8, seq_len=1)
    buf = np.full((6, 16), 7.0, dtype)
    want = fastpe.rope_cache(8, seq_len=6, offset=3, dtype=dtype)
    got = fastpe.rope_cache(8, seq_len=6, offset=3, out=(buf[:, :8], buf[:, 8:]))
    assert got[0].base is buf and got[1].base is buf
    np.testing.assert_array_equal(buf[:, :8], want[0])
    np.testing.assert_array_equal(buf[:, 8:], want[1])
    with pytest.raises(ValueError, match="cos and sin must not share memory"):
        fastpe.rope_cache(8, seq_len=5, out=(buf[:5, :8], buf[1:, :8]))


@pytest.mark.parametrize("value", [None, "3", 2.5, [None]])
def test_offset_that_is_not_integers_is_refused_cold_and_warm(value):
    for warm in (False, True):
        kernel.rope_args.clear()
        if warm:
            _primed()
        q = np.ones((1, 1, 2, 8))
        with pytest.raises(TypeError, match="offset"):
            fastpe.apply_rope(q, offset=value)
        np.testing.assert_array_equal(q, 1.0)


def test_offset_none_is_refused_in_a_fresh_process_and_after_a_warm_call():
    # a fresh interpreter: nothing planned, no state from the tests before
    code = textwrap.dedent(
        """
        import numpy as np, fastpe
        outcomes = []
        for _ in range(2):
            try:
                fastpe.apply_rope(np.ones((1, 1, 2, 8)), offset=None)
                outcomes.append("returned")
            except TypeError as exc:
                outcomes.append("TypeError" if "offset" in str(exc) else repr(exc))
            fastpe.apply_rope(np.ones((1, 1, 2, 8)))  # plans the default rule
        print(outcomes)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['TypeError', 'TypeError']"


# ------------------------------------------------------------ the C functions


@pytest.fixture(scope="module")
def t():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return capi.Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))


@pytest.fixture
def handle(t):
    w = np.array([1.0, 0.25, 0.0625])  # rotary_dim 6
    h = t.rope_from_frequencies(w.ctypes.data, w.size, 1.0)
    yield h
    t.rope_free(h)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("stride", [6, 7, 11, 12, 13])
def test_c_cache_overlap_is_decided_on_elements(t, handle, n, stride):
    # every placement of sin against cos in one buffer, near and far: refused
    # exactly when NumPy finds a shared element, else the rows of separate arrays
    W = 6
    span = (n - 1) * stride + W
    ref_cos = np.empty((n, stride), np.float32)
    ref_sin = np.empty((n, stride), np.float32)
    L = capi.LAYOUT["half"]
    assert (
        t.rope_cache_f32(handle, capi.p(ref_cos), capi.p(ref_sin), n, stride, None, 2, L, 1) == 0
    )
    for d in range(-span - 2, span + 3):
        buf = np.full(3 * span + 8, 7.0, np.float32)
        c0, s0 = span + 4, span + 4 + d

        def rows(at, buf=buf):
            return np.lib.stride_tricks.as_strided(buf[at:], (n, W), (4 * stride, 4))

        cos, sin = rows(c0), rows(s0)
        shared = np.shares_memory(cos, sin)
        before = buf.copy()
        err = t.rope_cache_f32(
            handle, buf.ctypes.data + 4 * c0, buf.ctypes.data + 4 * s0, n, stride, None, 2, L, 1
        )
        if shared:
            assert err == C["FASTPE_EOVERLAP"], (n, stride, d)
            np.testing.assert_array_equal(buf, before)
        else:
            assert err == C["FASTPE_OK"], (n, stride, d)
            np.testing.assert_array_equal(rows(c0), ref_cos[:, :W])
            np.testing.assert_array_equal(rows(s0), ref_sin[:, :W])


def test_c_rotation_reads_positions_kept_in_x_before_writing(t, handle):
    # the positions are read into the angle table before any row is rotated
    x = np.linspace(-1, 1, 4 * 6).reshape(1, 4, 1, 6)
    ids = _ids_in(x, [3, 1, 2, 5])
    want, ids_apart = x.copy(), ids.copy()
    L = capi.LAYOUT["half"]
    args = (1, 4, 1, 6, 6, 6)
    assert t.rope_apply_f64(handle, capi.p(want), *args, capi.p(ids_apart), 0, L, 1) == 0
    assert t.rope_apply_f64(handle, capi.p(x), *args, capi.p(ids), 0, L, 1) == 0
    np.testing.assert_array_equal(x, want)
