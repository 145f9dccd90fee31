"""C API 1.3: RoPE handles, the cos/sin cache and the rotation in place, and the
float16/bfloat16 outputs of every kind of call, called
through the capsule's table with ctypes -- the pointers a C extension gets from
import_fastpe() -- and compared bitwise with fastpe.rope_cache / fastpe.apply_rope
(tested against mpmath and the published formulas in test_rope.py)."""

import ctypes
import re
import threading
from typing import ClassVar

import numpy as np
import pytest
import test_capi_specs as capi_specs
from rules import LLAMA31

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS
i64, dbl, cint, vp, cp = (
    ctypes.c_int64,
    ctypes.c_double,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_char_p,
)
# the constructors need the GIL and raise Python exceptions (PYFUNCTYPE); the rest
# run without it (CFUNCTYPE releases it)
ROPE_NEW = ctypes.PYFUNCTYPE(vp, ctypes.py_object, i64, i64, i64, cp)
ROPE_FREQS = ctypes.PYFUNCTYPE(vp, vp, i64, dbl)
ROPE_FREE = ctypes.CFUNCTYPE(None, vp)
ROPE_DIM = ctypes.CFUNCTYPE(i64, vp)
ROPE_CACHE = ctypes.CFUNCTYPE(cint, vp, vp, vp, i64, i64, vp, i64, cint, cint)
ROPE_APPLY = ctypes.CFUNCTYPE(cint, vp, vp, i64, i64, i64, i64, i64, i64, vp, i64, cint, cint)

LAYOUT = {"half": C["FASTPE_LAYOUT_SPLIT"], "interleaved": C["FASTPE_LAYOUT_INTERLEAVED"]}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}


FILL = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, dbl, i64, cint, cint)
ADD = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, i64, dbl, i64, dbl, cint, cint)


class Table(capi_specs.Table):
    """fastpe_api_t up to ABI 1.3."""

    _fields_: ClassVar = [
        ("rope_new", ROPE_NEW),
        ("rope_from_frequencies", ROPE_FREQS),
        ("rope_free", ROPE_FREE),
        ("rope_rotary_dim", ROPE_DIM),
        ("rope_cache_f32", ROPE_CACHE),
        ("rope_cache_f64", ROPE_CACHE),
        ("rope_apply_f32", ROPE_APPLY),
        ("rope_apply_f64", ROPE_APPLY),
        ("fill_f16", FILL),
        ("fill_bf16", FILL),
        ("add_f16", ADD),
        ("add_bf16", ADD),
        ("spec_fill_f16", capi_specs.SPEC_FILL),
        ("spec_fill_bf16", capi_specs.SPEC_FILL),
        ("spec_add_f16", capi_specs.SPEC_ADD),
        ("spec_add_bf16", capi_specs.SPEC_ADD),
        ("rope_cache_f16", ROPE_CACHE),
        ("rope_cache_bf16", ROPE_CACHE),
        ("rope_apply_f16", ROPE_APPLY),
        ("rope_apply_bf16", ROPE_APPLY),
    ]


@pytest.fixture(scope="module")
def t():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))
    assert (table.abi_major, table.abi_minor) == kernel.C_API_VERSION >= (1, 3)
    assert table.size >= ctypes.sizeof(Table)
    return table


@pytest.fixture
def rope(t):
    made = []

    def make(params=None, head_dim=128, mpe=0, seq_len=-1, precision=None):
        h = t.rope_new(params, head_dim, mpe, seq_len, precision)
        made.append(h)
        return h

    yield make
    for h in made:
        t.rope_free(h)


def p(a):
    return a.ctypes.data if a is not None else None


def cache(t, h, n, dtype, layout, positions=None, offset=0, stride=None, threads=0):
    W = t.rope_rotary_dim(h)
    stride = stride or W
    cos, sin = np.full((n, stride), 7.0, dtype), np.full((n, stride), 7.0, dtype)
    fn = t.rope_cache_f32 if dtype == np.float32 else t.rope_cache_f64
    err = fn(h, p(cos), p(sin), n, stride, p(positions), offset, LAYOUT[layout], threads)
    return err, cos, sin


def apply(t, h, x, seq_axis, positions=None, offset=0, layout="half", threads=0):
    """x: (batch, heads, seq, d) for seq_axis=2, (batch, seq, heads, d) for 1."""
    b = x.shape[0]
    if seq_axis == 2:
        heads, seq = x.shape[1], x.shape[2]
        sb, sh, ss = (s // x.itemsize for s in x.strides[:3])
    else:
        seq, heads = x.shape[1], x.shape[2]
        sb, ss, sh = (s // x.itemsize for s in x.strides[:3])
    fn = t.rope_apply_f32 if x.dtype == np.float32 else t.rope_apply_f64
    return fn(h, p(x), b, seq, heads, sb, ss, sh, p(positions), offset, LAYOUT[layout], threads)


@pytest.mark.parametrize("params", [None, LLAMA31, YARN, {"partial_rotary_factor": 0.5}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cache_is_rope_cache_bitwise(t, rope, params, dtype, layout):
    h = rope(params, 128, 4096)
    w, _ = fastpe.rope_frequencies(128, params, max_position_embeddings=4096)
    assert t.rope_rotary_dim(h) == 2 * w.size
    err, cos, sin = cache(t, h, 50, dtype, layout, offset=99990)
    assert err == C["FASTPE_OK"]
    want = fastpe.rope_cache(
        128,
        params,
        seq_len=50,
        offset=99990,
        max_position_embeddings=4096,
        dtype=dtype,
        layout=layout,
    )
    np.testing.assert_array_equal(cos, want[0])
    np.testing.assert_array_equal(sin, want[1])
    # explicit positions, rows at a wider stride: only the rotary entries written
    pos = np.array([5, 0, 123456, 5, 77], np.int64)
    W = 2 * w.size
    err, cos, sin = cache(t, h, 5, dtype, layout, positions=pos, stride=W + 3)
    assert err == C["FASTPE_OK"]
    want = fastpe.rope_cache(
        128, params, positions=pos, max_position_embeddings=4096, dtype=dtype, layout=layout
    )
    np.testing.assert_array_equal(cos[:, :W], want[0])
    np.testing.assert_array_equal(sin[:, :W], want[1])
    assert np.all(cos[:, W:] == 7.0) and np.all(sin[:, W:] == 7.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seq_axis", [1, 2])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("threads", [1, 2])
def test_apply_is_apply_rope_bitwise(t, rope, rng, dtype, seq_axis, layout, threads):
    h = rope(LLAMA31, 64)
    shape = (3, 4, 6, 80) if seq_axis == 2 else (3, 6, 4, 80)  # head_dim 80 > rotary 64
    x0 = rng.standard_normal(shape).astype(dtype)
    pos = rng.integers(0, 200000, size=(3, 6)).astype(np.int64)
    for kw in (dict(offset=100000), dict(positions=pos)):
        x = x0.copy()
        assert apply(t, h, x, seq_axis, layout=layout, threads=threads, **kw) == C["FASTPE_OK"]
        want = fastpe.apply_rope(
            x0.copy(), rope_parameters=LLAMA31, head_dim=64, seq_axis=seq_axis, layout=layout, **kw
        )
        np.testing.assert_array_equal(x, want)
        np.testing.assert_array_equal(x[..., 64:], x0[..., 64:])


def test_apply_strided_view_and_frequencies_handle(t, rng):
    w, att = fastpe.rope_frequencies(32, YARN)
    h = t.rope_from_frequencies(p(w), w.size, att)
    try:
        base = rng.standard_normal((2, 10, 3, 40))
        x = base[:, ::2, :, 4:36]  # (batch, seq, heads, 32), every stride uneven
        want = fastpe.apply_rope(
            np.array(x), inv_freq=w, attention_factor=att, seq_axis=1, offset=9
        )
        before = base.copy()
        sb, ss, sh = (s // 8 for s in x.strides[:3])
        err = t.rope_apply_f64(h, p(base) + 4 * 8, 2, 5, 3, sb, ss, sh, None, 9, LAYOUT["half"], 0)
        assert err == C["FASTPE_OK"]
        np.testing.assert_array_equal(x, want)
        untouched = np.ones(base.shape, bool)
        untouched[:, ::2, :, 4:36] = False
        np.testing.assert_array_equal(base[untouched], before[untouched])
    finally:
        t.rope_free(h)


def test_errors_leave_buffers_untouched(t, rope):
    h = rope(None, 8)
    x = np.ones((1, 2, 3, 8), np.float32)
    cos, sin = np.full((3, 8), 7.0, np.float32), np.full((3, 8), 7.0, np.float32)
    far = np.array([0, 1, -(2**60)])  # (named: alive while the C function reads it)
    L = LAYOUT["half"]
    cases = [
        (lambda: t.rope_apply_f32(None, p(x), 1, 3, 2, 48, 8, 24, None, 0, L, 0), "FASTPE_ENULL"),
        (lambda: t.rope_apply_f32(h, None, 1, 3, 2, 48, 8, 24, None, 0, L, 0), "FASTPE_ENULL"),
        (lambda: t.rope_apply_f32(h, p(x), -1, 3, 2, 48, 8, 24, None, 0, L, 0), "FASTPE_ESIZE"),
        (lambda: t.rope_apply_f32(h, p(x), 1, 3, 2, 48, 8, 24, None, 0, 7, 0), "FASTPE_ELAYOUT"),
        # heads at stride 0 (a broadcast): rotating in place would turn rows twice
        (lambda: t.rope_apply_f32(h, p(x), 1, 3, 2, 48, 8, 0, None, 0, L, 0), "FASTPE_ESTRIDE"),
        (lambda: t.rope_apply_f32(h, p(x), 1, 3, 2, 48, 4, 24, None, 0, L, 0), "FASTPE_ESTRIDE"),
        (
            lambda: t.rope_apply_f32(h, p(x), 1, 3, 2, 48, 8, 24, None, 2**60, L, 0),
            "FASTPE_ERANGE",
        ),
        (
            lambda: t.rope_apply_f32(h, p(x), 1, 3, 2, 48, 8, 24, p(far), 0, L, 0),
            "FASTPE_ERANGE",
        ),
        (lambda: t.rope_cache_f32(None, p(cos), p(sin), 3, 8, None, 0, L, 0), "FASTPE_ENULL"),
        (lambda: t.rope_cache_f32(h, p(cos), None, 3, 8, None, 0, L, 0), "FASTPE_ENULL"),
        (lambda: t.rope_cache_f32(h, p(cos), p(sin), -3, 8, None, 0, L, 0), "FASTPE_ESIZE"),
        (lambda: t.rope_cache_f32(h, p(cos), p(sin), 3, 7, None, 0, L, 0), "FASTPE_ESTRIDE"),
        (lambda: t.rope_cache_f32(h, p(cos), p(cos) + 4, 3, 8, None, 0, L, 0), "FASTPE_EOVERLAP"),
        (lambda: t.rope_cache_f32(h, p(cos), p(sin), 3, 8, None, 0, 2, 0), "FASTPE_ELAYOUT"),
        (lambda: t.rope_cache_f32(h, p(cos), p(sin), 3, 8, None, -(2**62), L, 0), "FASTPE_ERANGE"),
    ]
    for call, code in cases:
        assert call() == C[code], code
        assert np.all(x == 1.0) and np.all(cos == 7.0) and np.all(sin == 7.0), code
    # nothing to do: OK, nothing written, NULL buffers welcome
    assert t.rope_apply_f32(h, None, 0, 3, 2, 48, 8, 24, None, 0, L, 0) == C["FASTPE_OK"]
    assert t.rope_cache_f64(h, None, None, 0, 8, None, 0, L, 0) == C["FASTPE_OK"]
    assert t.rope_rotary_dim(None) == -1


def test_constructors_raise_the_python_apis_errors(t):
    with pytest.raises(ValueError, match="rope_type"):
        t.rope_new({"rope_type": "nope"}, 64, 0, -1, None)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        t.rope_new({"rope_type": "dynamic", "factor": 2.0}, 64, 0, -1, None)
    with pytest.raises(ValueError, match="precision"):
        t.rope_new(None, 64, 0, -1, b"float16")
    with pytest.raises(ValueError, match="even"):
        t.rope_new(None, 7, 0, -1, None)
    w = np.array([1.0, np.nan])
    with pytest.raises(ValueError, match="inv_freq"):
        t.rope_from_frequencies(p(w), 2, 1.0)
    with pytest.raises(TypeError, match="NULL"):
        t.rope_from_frequencies(None, 2, 1.0)
    ones = np.ones(2)
    with pytest.raises(ValueError, match="attention_factor"):
        t.rope_from_frequencies(p(ones), 2, 0.0)


def test_dynamic_rule_follows_seq_len_and_precision(t, rope):
    """rope_new passes seq_len and precision to the rule: its cache is the one of
    a handle made from fastpe.rope_frequencies' result for the same arguments."""
    params = {"rope_type": "dynamic", "factor": 2.0}
    seen = []
    for seq_len, precision in ((-1, None), (8000, None), (8000, b"float64")):
        err, cos, _ = cache(
            t, rope(params, 64, 4096, seq_len, precision), 4, np.float64, "half", offset=7000
        )
        assert err == C["FASTPE_OK"]
        w, _ = fastpe.rope_frequencies(
            64,
            params,
            max_position_embeddings=4096,
            seq_len=None if seq_len < 0 else seq_len,
            precision="float32" if precision is None else precision.decode(),
        )
        err, want, _ = cache(t, rope_of(t, w), 4, np.float64, "half", offset=7000)
        np.testing.assert_array_equal(cos, want)
        seen.append(cos)
    assert not np.array_equal(seen[0], seen[1]) and not np.array_equal(seen[1], seen[2])


def rope_of(t, w, attention=1.0):
    h = t.rope_from_frequencies(p(w), w.size, attention)
    _handles.append(h)
    return h


_handles: list = []


@pytest.fixture(autouse=True, scope="module")
def _free_handles(t):
    yield
    for h in _handles:
        t.rope_free(h)


def test_one_handle_from_many_threads(t, rope, rng):
    h = rope(LLAMA31, 128)
    x0 = rng.standard_normal((1, 32, 1, 128)).astype(np.float32)
    want = [
        fastpe.apply_rope(x0.copy(), rope_parameters=LLAMA31, offset=1000 + i) for i in range(8)
    ]
    got = [x0.copy() for _ in range(8)]
    codes = [None] * 8

    def run(i):
        for _ in range(50):
            x = x0.copy()
            codes[i] = apply(t, h, x, 2, offset=1000 + i)
        got[i] = x

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert codes == [C["FASTPE_OK"]] * 8
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


# ---------------------------------------------------------------- 16-bit outputs

HALVES = [("f16", np.float16), ("bf16", "bfloat16")]


def _bits(a):
    return a.view(np.uint16)


@pytest.mark.parametrize("sfx, dtype", HALVES)
def test_16_bit_fills_and_adds_are_the_python_functions_bitwise(t, rng, sfx, dtype):
    if dtype == "bfloat16":
        dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    inter, split = C["FASTPE_LAYOUT_INTERLEAVED"], C["FASTPE_LAYOUT_SPLIT"]
    out = np.zeros((30, 72), np.uint16)  # 64 columns of a wider slab
    assert getattr(t, f"fill_{sfx}")(p(out), 30, 64, 72, 500.0, 99990, split, 0) == C["FASTPE_OK"]
    want = fastpe.sinusoidal(30, 64, base=500.0, offset=99990, layout="split", dtype=dtype)
    assert np.array_equal(out[:, :64], _bits(want)) and not out[:, 64:].any()
    x0 = rng.standard_normal((3, 5, 48)).astype(dtype)
    x = x0.copy()
    err = getattr(t, f"add_{sfx}")(p(x), 3, 5, 48, 48, 10000.0, 7, 0.5, inter, 0)
    assert err == C["FASTPE_OK"]
    assert np.array_equal(_bits(x), _bits(fastpe.add_to(x0.copy(), offset=7, scale=0.5)))
    h = t.spec_new("diffusers", 32)
    try:
        out = np.zeros((6, 32), np.uint16)
        assert getattr(t, f"spec_fill_{sfx}")(h, p(out), 6, 32, 40, 0) == C["FASTPE_OK"]
        want = fastpe.sinusoidal(6, 32, offset=40, convention="diffusers", dtype=dtype)
        assert np.array_equal(out, _bits(want))
        x0 = rng.standard_normal((2, 6, 32)).astype(dtype)
        x = x0.copy()
        assert getattr(t, f"spec_add_{sfx}")(h, p(x), 2, 6, 32, 3, 2.0, 0) == C["FASTPE_OK"]
        want = fastpe.add_to(x0.copy(), offset=3, scale=2.0, convention="diffusers")
        assert np.array_equal(_bits(x), _bits(want))
        # the float32 checks: a bad stride is refused, nothing written
        assert getattr(t, f"spec_fill_{sfx}")(h, p(out), 6, 31, 40, 0) == C["FASTPE_ESTRIDE"]
        assert np.array_equal(
            out, _bits(fastpe.sinusoidal(6, 32, offset=40, convention="diffusers", dtype=dtype))
        )
    finally:
        t.spec_free(h)
    assert getattr(t, f"fill_{sfx}")(p(out), 3, 8, 8, -1.0, 0, inter, 0) == C["FASTPE_EBASE"]


@pytest.mark.parametrize("sfx, dtype", HALVES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_16_bit_rope_is_the_python_functions_bitwise(t, rope, rng, sfx, dtype, layout):
    if dtype == "bfloat16":
        dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    h = rope(YARN, 64)  # an attention factor: rounded once from float64 as well
    cos, sin = np.zeros((9, 64), np.uint16), np.zeros((9, 64), np.uint16)
    err = getattr(t, f"rope_cache_{sfx}")(h, p(cos), p(sin), 9, 64, None, 500, LAYOUT[layout], 0)
    assert err == C["FASTPE_OK"]
    want = fastpe.rope_cache(64, YARN, seq_len=9, offset=500, dtype=dtype, layout=layout)
    assert np.array_equal(cos, _bits(want[0])) and np.array_equal(sin, _bits(want[1]))
    x0 = rng.standard_normal((2, 4, 5, 64)).astype(dtype)  # (batch, heads, seq, head_dim)
    x = x0.copy()
    pos = rng.integers(0, 10**5, (2, 5)).astype(np.int64)
    err = getattr(t, f"rope_apply_{sfx}")(
        h, p(x), 2, 5, 4, 4 * 5 * 64, 64, 5 * 64, p(pos), 0, LAYOUT[layout], 0
    )
    assert err == C["FASTPE_OK"]
    want = fastpe.apply_rope(x0.copy(), rope_parameters=YARN, positions=pos, layout=layout)
    assert np.array_equal(_bits(x), _bits(want))


HUGE_FREQUENCY = np.array([1e300])  # (alive for the whole call: the C function reads it)


@pytest.mark.parametrize(
    "make, key",
    [
        (lambda t: t.rope_new({"rope_theta": 1e-300}, 64, 0, -1, None), "rope_theta"),
        (
            lambda t: t.rope_new({"rope_type": "linear", "factor": 1e-300}, 64, 0, -1, None),
            "factor",
        ),
        (lambda t: t.rope_from_frequencies(p(HUGE_FREQUENCY), 1, 1.0), "inv_freq"),
    ],
)
def test_constructors_refuse_overflowing_frequencies_by_name(t, make, key):
    # (they reached the kernel before, which printed its internal spec)
    with pytest.raises(ValueError, match=re.escape(key)) as info:
        make(t)
    assert "kernel spec" not in str(info.value)
