"""The RoPE rules' parameters are checked once, by the library's rule
(lib/src/rope_rules.c): the binding only converts Python values (types, dict
keys, None) and turns the library's error detail, which names the field, the
element and the bound, into the message that names the key as written
(``rope_parameters['beta_fast']``) with the value given.  RoPE calls raise the
same message cold (nothing cached) and warm (a cached plan)."""

import re
import tracemalloc

import numpy as np
import pytest
from rules import LLAMA3_8K, LONGROPE4, YARN4K

import fastpe
from fastpe import kernel

NAN = float("nan")


def _refusal(head_dim, params, **kw):
    with pytest.raises((TypeError, ValueError)) as info:
        fastpe.rope_frequencies(head_dim, params, **kw)
    return info.type, str(info.value)


# (arguments, the library's field, element, message)
REFUSED = [
    ((1, None), "head_dim", -1, "head_dim must be an integer >= 2, got 1"),
    ((2**70, None), "head_dim", -1, f"head_dim must be an integer <= {2**31}, got {2**70}"),
    (
        (64, {"rope_theta": -1}),
        "rope_theta",
        -1,
        "rope_parameters['rope_theta'] must be finite and > 0, got -1",
    ),
    (
        (64, {"partial_rotary_factor": 1.5}),
        "partial_rotary_factor",
        -1,
        "rope_parameters['partial_rotary_factor'] must be <= 1, got 1.5",
    ),
    (
        (64, {"partial_rotary_factor": 0.01}),
        "rotary_dim",
        -1,
        "the rotary dimension int(head_dim * partial_rotary_factor) = 0 must be even and at "
        "least 2",
    ),
    (
        (64, {**YARN4K, "beta_fast": NAN}),
        "beta_fast",
        -1,
        "rope_parameters['beta_fast'] must be finite and > 0, got nan",
    ),
    (
        (64, {**YARN4K, "mscale": float("inf")}),
        "mscale",
        -1,
        "rope_parameters['mscale'] must be finite, got inf",
    ),
    (
        (64, {**YARN4K, "original_max_position_embeddings": 0}),
        "original_max_position_embeddings",
        -1,
        "rope_parameters['original_max_position_embeddings'] must be an integer >= 1, got 0",
    ),
    (
        (64, {"rope_type": "yarn", "factor": 4.0}),
        "original_max_position_embeddings",
        -1,
        "rope_type='yarn' needs original_max_position_embeddings (in rope_parameters) or "
        "max_position_embeddings",
    ),
    (
        (64, {"rope_type": "linear"}),
        "factor",
        -1,
        "rope_type='linear' needs rope_parameters['factor']",
    ),
    (
        (64, {**LLAMA3_8K, "high_freq_factor": 0.5}),
        "high_freq_factor",
        -1,
        "rope_type='llama3' needs rope_parameters['high_freq_factor'] >= "
        "rope_parameters['low_freq_factor'], got 0.5 and 1.0",
    ),
    (
        (8, {**LONGROPE4, "short_factor": [1.0, -1, 1.0, 1.0]}),
        "short_factor",
        1,
        "rope_parameters['short_factor'][1] must be finite and > 0, got -1",
    ),
    (
        (8, {**LONGROPE4, "long_factor": [1.0] * 3}),
        "long_factor",
        -1,
        "rope_parameters['long_factor'] must have rotary_dim / 2 = 4 entries, got 3",
    ),
    (
        (64, {"rope_type": "dynamic", "factor": 2.0}),
        "max_position_embeddings",
        -1,
        "rope_type='dynamic' needs max_position_embeddings",
    ),
]


@pytest.mark.parametrize("args, field, index, message", REFUSED)
def test_rule_refusals_come_from_the_library_detail(args, field, index, message):
    kind, msg = _refusal(*args)
    assert kind is ValueError and msg == message
    code, argument, got_index, _, _ = kernel._last_error()
    assert code != 0 and argument == field and got_index == index


def test_types_stay_the_bindings():
    """What the library cannot see: Python types, None, and lists that are not lists."""
    assert _refusal(64, {**YARN4K, "beta_fast": "32"}) == (
        TypeError,
        "rope_parameters['beta_fast'] must be a real number, got str '32'",
    )
    assert _refusal(64, {"rope_theta": None}) == (
        ValueError,
        "rope_type='default' needs rope_parameters['rope_theta']",
    )
    assert _refusal(8, {**LONGROPE4, "long_factor": 5}) == (
        TypeError,
        "rope_parameters['long_factor'] must be a list of 4 numbers, got int",
    )
    assert _refusal(8, {**LONGROPE4, "long_factor": [1.0, 2.0, "3", 4.0]})[1].startswith(
        "rope_parameters['long_factor'][2] must be a real number"
    )


def test_a_nan_given_is_refused_not_read_as_absent():
    # (the struct's "absent" is NaN: a NaN given must not become the default)
    for key in ("rope_theta", "partial_rotary_factor"):
        assert "got nan" in _refusal(64, {key: NAN})[1]
    assert "got nan" in _refusal(64, {**YARN4K, "beta_slow": NAN})[1]


def _message(call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return info.type, str(info.value)


@pytest.mark.parametrize("head_dim", [16, 18])
def test_cold_and_warm_rope_calls_raise_the_same_message(head_dim):
    """The first call takes the general path, later ones a cached plan: one
    check, so one message."""
    x = np.ones((1, 3, 2, head_dim), np.float32)
    calls = [
        lambda: fastpe.rope_cache(head_dim, seq_len=-1),
        lambda: fastpe.rope_cache(head_dim, seq_len=2, offset=2**62),
        lambda: fastpe.rope_cache(head_dim, positions=np.array([0, 2**62])),
        lambda: fastpe.rope_cache(head_dim, seq_len=2, layout="diagonal"),
        lambda: fastpe.rope_cache(head_dim, {**YARN4K, "beta_fast": -1}, seq_len=2),
        lambda: fastpe.apply_rope(x, offset=2**62),
        lambda: fastpe.apply_rope(x, positions=np.array([0, 1, 2**62])),
        lambda: fastpe.apply_rope(x, layout="diagonal"),
        lambda: fastpe.apply_rope(x, rope_parameters={**YARN4K, "beta_fast": -1}),
    ]
    for call in calls:
        kernel.encoders.clear()
        kernel.rope_args.clear()
        cold = _message(call)
        fastpe.rope_cache(head_dim, seq_len=1)  # plans cached now
        fastpe.apply_rope(x)
        assert _message(call) == cold


def test_sections_are_laid_out_and_refused_by_the_library():
    """The columns of each axis are fastpe_rope_section_axes'; an interleaving it
    cannot give is named by its axis (the detail's index)."""
    from fastpe._rope_axes import _axis_columns

    assert [c.tolist() for c in _axis_columns((2, 1, 1), "interleaved")] == [[0, 3], [1], [2]]
    assert [c.tolist() for c in _axis_columns((2, 1, 1), "contiguous")] == [[0, 1], [2], [3]]
    kind, msg = _message(
        lambda: fastpe.rope_cache(
            128,
            positions=np.zeros((1, 3), np.int64),
            sections=(16, 24, 24),
            section_layout="interleaved",
        )
    )
    assert kind is ValueError and msg == (
        "sections=[16, 24, 24] cannot be interleaved over 64 frequencies: axis 1 needs "
        "1 + n_axes * (sections[1] - 1) = 70 < 64"
    )
    assert kernel._last_error()[1:3] == ("sections", 1)


def test_more_frequencies_than_the_default_buffer():
    """Beyond 2**20 frequencies the library's refusal of the buffer's capacity
    (its detail: the frequencies needed) sizes a second call."""
    w, attention = fastpe.rope_frequencies(2**21 + 4)
    assert w.shape == (2**20 + 2,) and w[0] == 1.0 and attention == 1.0
    assert np.all(np.isfinite(w)) and np.all(np.diff(w) < 0)


def _misaligned(shape):
    """A writable float32 array one byte off its dtype's alignment."""
    raw = np.zeros(int(np.prod(shape)) * 4 + 1, np.uint8)
    return np.frombuffer(raw.data, np.float32, int(np.prod(shape)), offset=1).reshape(shape)


def _overlapping_rows():
    return np.lib.stride_tricks.as_strided(np.zeros((3, 8), np.float32), (2, 3, 8), (0, 32, 4))


X = (1, 2, 3, 8)  # (batch, heads, seq, head_dim)

# (q, k, keywords, message): every refusal of apply_rope's arrays, all made by
# the library's pe_rope_check_arrays
ARRAY_REFUSALS = [
    (lambda: _misaligned(X), None, {}, "q must be aligned to its dtype"),
    (
        lambda: np.zeros(8, np.float32),
        None,
        {},
        "q must have shape (..., seq, ..., head_dim), got (8,)",
    ),
    (
        lambda: np.zeros((1, 2, 3, 16), np.float32)[..., ::2],
        None,
        {},
        "q's last axis must be contiguous, got strides (384, 192, 64, 8)",
    ),
    (
        _overlapping_rows,
        None,
        {},
        "q's rows overlap (strides (0, 32, 4)): it cannot be rotated in place",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: _misaligned(X),
        {},
        "k must be aligned to its dtype",
    ),
    (
        lambda: np.zeros(X, np.float32),
        _overlapping_rows,
        {},
        "k's rows overlap (strides (0, 32, 4)): it cannot be rotated in place",
    ),
    (
        lambda: np.zeros(X, np.float32),
        None,
        {"head_dim": 1},
        "head_dim must be an integer >= 2, got 1",
    ),
    (
        lambda: np.zeros(X, np.float32),
        None,
        {"head_dim": 2**70},
        f"head_dim must be an integer <= {2**31}, got {2**70}",
    ),
    (
        lambda: np.zeros(X, np.float32),
        None,
        {"head_dim": 16},
        "q's last axis (8) is shorter than head_dim=16",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: np.zeros((1, 2, 3, 4), np.float32),
        {},
        "k's last axis (4) is shorter than head_dim=8",
    ),
    (
        lambda: np.zeros(X, np.float32),
        None,
        {"seq_axis": -1},
        "seq_axis=-1 is not an axis of q before its last",
    ),
    (
        lambda: np.zeros(X, np.float32),
        None,
        {"seq_axis": 4},
        "seq_axis=4 is not an axis of q before its last",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: np.zeros((2, 3, 8), np.float32),
        {"seq_axis": 2},
        "seq_axis=2 is not an axis of k before its last",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: np.zeros((1, 1, 2, 3, 8), np.float32),
        {},
        "q (and k) must have shape (..., seq, ..., head_dim), the same number of axes",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: np.zeros((1, 2, 4, 8), np.float32),
        {},
        "q and k must agree on the batch and sequence axes, got (1, 2, 3, 8) and (1, 2, 4, 8)",
    ),
    (
        lambda: np.zeros(X, np.float32),
        lambda: np.zeros((2, 2, 3, 8), np.float32),
        {},
        "q and k must agree on the batch and sequence axes, got (1, 2, 3, 8) and (2, 2, 3, 8)",
    ),
]


def _plan_everything():
    for hd in (8, 16):
        fastpe.apply_rope(np.zeros((1, 1, 1, hd), np.float32), head_dim=hd)
        fastpe.apply_rope(
            np.zeros((1, 1, 1, hd), np.float32), positions=np.zeros((1, 3), np.int64),
            sections=(hd // 8, hd // 8, hd // 4) if hd == 16 else (1, 1, 2), head_dim=hd,
        )  # fmt: skip


def _cold_and_warm(refused, *warm_up):
    """(cold, warm): ``refused()``'s message with nothing cached (the general path),
    then again once plans are cached (the small-call paths), by _plan_everything and
    the ``warm_up`` calls."""
    kernel.encoders.clear()
    kernel.rope_args.clear()
    kernel._c_plans(clear=True)
    cold = refused()
    _plan_everything()
    for call in warm_up:
        call()
    return cold, refused()


@pytest.mark.parametrize("sections", [False, True])
@pytest.mark.parametrize("make_q, make_k, kw, message", ARRAY_REFUSALS)
def test_array_refusals_cold_and_warm(make_q, make_k, kw, message, sections):
    """Each refusal of q and k: the same ValueError and message on the first call
    (the general path) and with a cached plan (the fast path), q and k untouched."""
    if sections:
        kw = {**kw, "positions": np.zeros((3, 3), np.int64), "sections": (1, 1, 2)}

    def call():
        q = make_q()
        k = None if make_k is None else make_k()
        before = [np.array(a, copy=True) for a in (q, k) if a is not None]
        with pytest.raises(ValueError) as info:
            fastpe.apply_rope(q, k, **kw)
        for a, b in zip([a for a in (q, k) if a is not None], before, strict=True):
            np.testing.assert_array_equal(a, b)
        return str(info.value)

    cold, warm = _cold_and_warm(call)
    assert warm == cold == message


def test_array_refusal_detail():
    """The message comes from the library's error detail, which C callers read
    through fastpe_last_error: argument, axis, value and bound."""
    q, k = np.zeros(X, np.float32), np.zeros((1, 2, 4, 8), np.float32)
    with pytest.raises(ValueError):
        fastpe.apply_rope(q, k)
    assert kernel._last_error() == (2, "k", 2, 4.0, 3.0)  # FASTPE_ESIZE at k's axis 2
    with pytest.raises(ValueError):
        fastpe.apply_rope(q, head_dim=16)
    assert kernel._last_error() == (2, "q", 3, 8.0, 16.0)
    with pytest.raises(ValueError):
        fastpe.apply_rope(_overlapping_rows())
    assert kernel._last_error() == (3, "q", 0, 0.0, 32.0)  # FASTPE_ESTRIDE: axis 0 steps 0 < 32
    with pytest.raises(ValueError):
        fastpe.apply_rope(q, q[:, 1:])
    assert kernel._last_error()[:2] == (9, "k")  # FASTPE_EOVERLAP


@pytest.mark.parametrize("warm", [False, True])
def test_q_and_k_overlap_is_decided_on_elements(warm):
    """q and k as views of one buffer are refused exactly when they share an
    element (numpy.shares_memory decides the same), whatever their interleaving:
    a fused QKV projection's q and k are rotated as separate arrays are."""
    rng = np.random.default_rng(7)
    buf = np.zeros((2, 3, 5, 40), np.float32)
    if warm:
        fastpe.apply_rope(np.zeros((1, 1, 1, 8), np.float32))
    tried = set()
    for _ in range(300):
        views = []
        for _ in range(2):
            c0 = int(rng.integers(0, 32))
            step = int(rng.choice([1, 2, -1]))
            rows = buf[:, :: int(rng.integers(1, 3)), ::step][..., c0 : c0 + 8]
            views.append(rows[:, :1] if rng.integers(2) else rows)
        q, k = views
        if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
            continue
        shared = bool(np.shares_memory(q, k))
        tried.add(shared)
        if shared:
            with pytest.raises(ValueError, match=r"^q and k must not share memory$"):
                fastpe.apply_rope(q, k)
        else:
            buf[...] = rng.standard_normal(buf.shape)
            q2, k2 = q.copy(), k.copy()
            fastpe.apply_rope(q, k, offset=3)
            fastpe.apply_rope(q2, k2, offset=3)
            np.testing.assert_array_equal(q, q2)
            np.testing.assert_array_equal(k, k2)
    assert tried == {False, True}


@pytest.mark.parametrize("warm", [False, True])
def test_cos_and_sin_overlap_is_decided_on_elements(warm):
    """rope_cache's out: cos and sin views of one buffer are refused exactly when
    they share an element (as numpy.shares_memory decides), cold and warm."""
    rng = np.random.default_rng(11)
    buf = np.zeros((2, 3, 24), np.float32)
    positions = np.arange(6, dtype=np.int64).reshape(2, 3)
    want = fastpe.rope_cache(8, positions=positions)
    kernel.rope_args.clear()
    if warm:
        fastpe.rope_cache(8, seq_len=1)
    tried = set()
    for _ in range(200):
        c0, c1 = (int(c) for c in rng.integers(0, 17, 2))
        cos = buf[..., c0 : c0 + 8]
        sin = buf[:: int(rng.choice([1, -1])), :, c1 : c1 + 8]
        shared = bool(np.shares_memory(cos, sin))
        tried.add(shared)
        if shared:
            with pytest.raises(ValueError, match=r"^out's cos and sin must not share memory$"):
                fastpe.rope_cache(8, positions=positions, out=(cos, sin))
        else:
            fastpe.rope_cache(8, positions=positions, out=(cos, sin))
            np.testing.assert_array_equal(cos, want[0])
            np.testing.assert_array_equal(sin, want[1])
    assert tried == {False, True}
    with pytest.raises(ValueError, match=r"^out's cos and sin must not share memory$"):
        fastpe.rope_cache(8, seq_len=3, out=(buf[0, :, :8], buf[0, :, 7:15]))
    assert kernel._last_error()[:2] == (9, "sin")  # FASTPE_EOVERLAP


def test_rows_accepted_never_share_an_element():
    """Random strided layouts of q over one buffer: whenever the library accepts
    them, no two rows share an element (the rotation in place is well defined),
    and broadcast axes are always refused."""
    rng = np.random.default_rng(5)
    base = np.zeros(4096, np.float32)
    accepted = refused = 0
    for _ in range(400):
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), 4)
        strides = (int(rng.integers(-40, 41)) * 4, int(rng.integers(-40, 41)) * 4, 4)
        span = sum(abs(st) * (n - 1) for n, st in zip(shape, strides, strict=True))
        q = np.lib.stride_tricks.as_strided(base[2048 - span // 4 :], shape, strides)
        try:
            kernel.rope_check_arrays(q, None, None, 0)
        except ValueError as exc:
            assert "rows overlap" in str(exc)
            refused += 1
            continue
        accepted += 1
        rows = [q[i, j] for i in range(shape[0]) for j in range(shape[1])]
        for a in range(len(rows)):
            for b in range(a):
                assert not np.shares_memory(rows[a], rows[b]), (shape, strides)
    assert accepted > 50 and refused > 50


def test_a_fused_projection_prompt_rotates_as_copies():
    """q, k and v of one (batch, seq, 3 * heads * head_dim) buffer: q and k are
    views whose address ranges interleave; each rotated as its copy is."""
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((2, 64, 3 * 4 * 16)).astype(np.float32)
    q = qkv[..., : 4 * 16].reshape(2, 64, 4, 16)
    k = qkv[..., 4 * 16 : 8 * 16].reshape(2, 64, 4, 16)
    q2, k2 = q.copy(), k.copy()
    v = qkv[..., 8 * 16 :].copy()
    for _ in range(2):  # cold, then a cached plan
        fastpe.apply_rope(q, k, seq_axis=1, offset=5)
        fastpe.apply_rope(q2, k2, seq_axis=1, offset=5)
        np.testing.assert_array_equal(q, q2)
        np.testing.assert_array_equal(k, k2)
    np.testing.assert_array_equal(qkv[..., 8 * 16 :], v)


B = (2, 2, 3, 8)  # a batch of 2

# (keywords, message): apply_rope's positions and offsets, checked by the library's
# pe_rope_check_tokens
TOKEN_REFUSALS = [
    ({"positions": np.array([0, 1])}, "positions must have shape (3,) or (2, 3), got (2,)"),
    (
        {"positions": np.zeros((3, 3), np.int64)},
        "positions must have shape (3,) or (2, 3), got (3, 3)",
    ),
    (
        {"positions": np.zeros((1, 1, 3), np.int64)},
        "positions must have shape (3,) or (2, 3), got (1, 1, 3)",
    ),
    ({"positions": np.array([0.5, 1.0])}, "positions must have shape (3,) or (2, 3), got (2,)"),
    (
        {"offset": np.array([[0], [1]])},
        "offset must be an int or one per batch entry (2), got shape (2, 1)",
    ),
    (
        {"offset": np.array([0, 1, 2])},
        "offset must be an int or one per batch entry (2), got shape (3,)",
    ),
    ({"offset": np.array([0, 2**62 + 1])}, "offset must stay within +-2**62"),
    ({"offset": -(2**62) - 1}, "offset must stay within +-2**62"),
]


@pytest.mark.parametrize("kw, message", TOKEN_REFUSALS)
def test_token_refusals_cold_and_warm(kw, message):
    def call():
        q = np.ones(B, np.float32)
        with pytest.raises(ValueError) as info:
            fastpe.apply_rope(q, **kw)
        assert (q == 1).all()
        return str(info.value)

    cold, warm = _cold_and_warm(call)
    assert warm == cold == message


def test_token_refusal_detail():
    q = np.ones(B, np.float32)
    with pytest.raises(ValueError):
        fastpe.apply_rope(q, offset=np.array([0, 2**62 + 1]))
    assert kernel._last_error() == (6, "offset", 1, float(2**62 + 1), float(2**62))
    with pytest.raises(ValueError):
        fastpe.apply_rope(q, positions=np.zeros((3, 3), np.int64))
    assert kernel._last_error() == (2, "positions", -1, 2.0, 3.0)  # ndim 2, seq 3


def test_token_span():
    """The span the rules see (dynamic RoPE: the largest position + 1)."""
    assert kernel.rope_check_tokens(np.array([[4, -2, 9]]), None, 1, 3) == (-2, 9)
    assert kernel.rope_check_tokens(np.array([0.5, 7.25]), None, 1, 2) == (0.5, 7.25)
    assert kernel.rope_check_tokens(None, np.array([3, 10]), 2, 4) == (3, 13)
    assert kernel.rope_check_tokens(None, np.array(2**62), 1, 1) == (2**62, 2**62)
    assert kernel.rope_check_tokens(None, np.array([5, 6]), 2, 0) == (0, -1)


def _strided(shape, strides, dtype=np.float32):
    """An array of ``shape`` and byte ``strides`` from the middle of a buffer of
    fives (negative strides stay inside it)."""
    base = np.full(4096, 5, dtype)
    return np.lib.stride_tricks.as_strided(base[2048:], shape, strides)


def _misaligned(shape):
    raw = np.zeros(4 * int(np.prod(shape)) + 1, np.uint8)
    return raw[1:].view(np.float32).reshape(shape)


def _pair(make):
    return lambda: (make(), np.full((2, 3, 8), 5, np.float32))


# (the out rope_cache(8, positions=(2, 3) ids, **kw) is given, error type, message)
OUT_REFUSALS = [
    (
        lambda: (np.zeros((2, 3, 9), np.float32), np.zeros((2, 3, 8), np.float32)),
        {},
        ValueError,
        "out must have shape (2, 3, 8), got (2, 3, 9)",
    ),
    (
        lambda: (np.zeros((2, 3, 8), np.float32), np.zeros((3, 8), np.float32)),
        {},
        ValueError,
        "out must have shape (2, 3, 8), got (3, 8)",
    ),
    (
        _pair(lambda: _misaligned((2, 3, 8))),
        {},
        ValueError,
        "out must be aligned to its dtype (got a misaligned buffer)",
    ),
    (
        _pair(lambda: np.full((2, 3, 16), 5, np.float32)[..., ::2]),
        {},
        ValueError,
        "out's last axis must be contiguous (stride 4), got strides (192, 64, 8)",
    ),
    (
        _pair(lambda: _strided((2, 3, 8), (96, 16, 4))),
        {},
        ValueError,
        "out's rows must not overlap or run backwards (row stride >= 32 bytes), got strides "
        "(96, 16, 4)",
    ),
    (
        _pair(lambda: _strided((2, 3, 8), (96, -32, 4))),
        {},
        ValueError,
        "out's rows must not overlap or run backwards (row stride >= 32 bytes), got strides "
        "(96, -32, 4)",
    ),
    (  # a broadcast outer axis: both sequences would land in the same rows
        _pair(lambda: _strided((2, 3, 8), (0, 32, 4))),
        {},
        ValueError,
        "out's cos rows overlap (strides (0, 32, 4))",
    ),
    (  # (sin's, reported the same way)
        lambda: _pair(lambda: _strided((2, 3, 8), (64, 32, 4)))()[::-1],
        {},
        ValueError,
        "out's sin rows overlap (strides (64, 32, 4))",
    ),
    (
        lambda: (np.full((2, 3, 8), 5, np.float32),) * 2,
        {},
        ValueError,
        "out's cos and sin must not share memory",
    ),
    (
        _pair(lambda: np.full((2, 3, 8), 5, np.float32)),
        {"dtype": np.float64},
        TypeError,
        "out has dtype float32 but dtype=float64 was requested",
    ),
]


@pytest.mark.parametrize("make_out, kw, kind, message", OUT_REFUSALS)
def test_out_refusals_cold_and_warm(make_out, kw, kind, message):
    """rope_cache's out, checked by the library (pe_check_out): the same type and
    message cold (nothing cached) and warm (a cached plan, where the small-call
    path declines to the same check), out left as it was."""
    positions = np.arange(6, dtype=np.int64).reshape(2, 3)

    def call():
        out = make_out()
        before = [np.array(o, copy=True) for o in out]
        with pytest.raises(kind) as info:
            fastpe.rope_cache(8, positions=positions, out=out, **kw)
        for o, b in zip(out, before, strict=True):
            np.testing.assert_array_equal(o, b)
        return str(info.value)

    cold, warm = _cold_and_warm(
        call,
        lambda: fastpe.rope_cache(8, positions=positions),
        lambda: fastpe.rope_cache(8, seq_len=3),
    )
    assert warm == cold == message


def test_out_refusal_detail():
    """The detail a C caller reads: the array, the axis, its stride and the span
    inside it (a broadcast axis repeats rows of 32 bytes)."""
    with pytest.raises(ValueError):
        kernel.check_out(_strided((2, 3, 8), (0, 32, 4)), None, (2, 3, 8))
    assert kernel._last_error() == (3, "out", 0, 0.0, 32.0)  # FASTPE_ESTRIDE
    with pytest.raises(ValueError):
        kernel.check_out(np.zeros((2, 3, 8), np.float32), np.zeros((2, 3, 7)), (2, 3, 8))
    assert kernel._last_error() == (2, "sin", 2, 7.0, 8.0)  # FASTPE_ESIZE


def test_table_out_with_a_broadcast_axis_is_refused():
    """The tables' out goes through the same check: a stride-0 outer axis would
    write two sequences into one set of rows."""
    out = _strided((2, 3, 8), (0, 64, 8), np.float64)
    with pytest.raises(ValueError, match=r"^out's rows overlap \(strides \(0, 64, 8\)\)$"):
        fastpe.sinusoidal_at(np.arange(6).reshape(2, 3), 8, out=out)
    assert (out == 5).all()


@pytest.mark.parametrize("dtype", [np.float32, "float64", np.dtype(np.float32)])
def test_rope_cache_with_dtype_and_out_takes_the_small_call_path(dtype):
    """A dtype that agrees with out: the small-call path writes the same bits as
    the general path; one that does not raises the same TypeError cold and warm."""
    dt = np.dtype(dtype)
    fastpe.rope_cache(8, seq_len=3)  # the default rule for head_dim 8, planned
    args = [None, 3, 0, None, "half", dtype, None, "float32", None, None]
    out = (np.full((3, 8), 5, dt), np.full((3, 8), 5, dt))
    assert kernel.rope_cache_fast(8, *args, out, None) is out
    want = fastpe.rope_cache(np.int64(8), seq_len=3, dtype=dt)  # (the general path)
    for o, w in zip(out, want, strict=True):
        np.testing.assert_array_equal(o, w)
    other = np.float64 if dt == np.float32 else np.float32
    bad = (np.full((3, 8), 5, other), np.full((3, 8), 5, other))
    assert kernel.rope_cache_fast(8, *args, bad, None) is None
    messages = set()
    for clear in (True, False):
        if clear:
            kernel.encoders.clear()
            kernel.rope_args.clear()
        with pytest.raises(TypeError) as info:
            fastpe.rope_cache(8, seq_len=3, dtype=dtype, out=bad)
        messages.add(str(info.value))
        assert all((b == 5).all() for b in bad)
    assert len(messages) == 1


W2 = np.array([[1.0, 0.5], [0.25, 0.125]])  # per-head frequencies: 2 heads of 2
FINITE = "positions must be finite (got NaN or inf)"
WITHIN = r"positions must stay within \+-\d+ for these frequencies \(exact angle reduction\)"
# (the call, with positions built fresh each time; the expected message, a regex)
POSITION_REFUSALS = [
    (lambda p: fastpe.rope_cache(8, positions=p), [0.5, np.nan], f"^{re.escape(FINITE)}$"),
    (lambda p: fastpe.rope_cache(8, positions=p), [0.5, -np.inf], f"^{re.escape(FINITE)}$"),
    (lambda p: fastpe.rope_cache(8, positions=p), [0.5, 1e300], f"^{WITHIN}; got up to 1e\\+300$"),
    (lambda p: fastpe.rope_cache(8, positions=p), [3, 2**62], f"^{WITHIN}; got up to {2**62}$"),
    (
        lambda p: fastpe.apply_rope(np.ones(B, np.float32), positions=p),
        [0.0, np.inf, 1.0],
        f"^{re.escape(FINITE)}$",
    ),
    (
        lambda p: fastpe.apply_rope(np.ones(B, np.float32), positions=p),
        [0, 1, -(2**61)],
        f"^{WITHIN}; got up to {2**61}$",
    ),
    (  # a scalar offset: the small-call path declines through the same check
        lambda p: fastpe.apply_rope(np.ones(B, np.float32), offset=int(p[0])),
        [2**61],
        f"^{WITHIN}; got up to {2**61 + 2}$",
    ),
    (  # multi-axis: a coordinate of one axis
        lambda p: fastpe.rope_cache(16, positions=p, sections=(2, 2, 4)),
        [[0, 0, 0], [1.0, np.nan, 2.0]],
        f"^{re.escape(FINITE)}$",
    ),
    (
        lambda p: fastpe.rope_cache(16, positions=p, sections=(2, 2, 4)),
        [[0, 0, 0], [1, 2**60, 2]],
        r"^positions\[\.\.\., 1\] must stay within \+-\d+ for the frequencies of axis 1 "
        rf"\(exact angle reduction\); got up to {2**60}$",
    ),
    (  # multi-axis rotation: the small-call path declines through the same check
        lambda p: fastpe.apply_rope(np.ones(B, np.float32), positions=p, sections=(1, 1, 2)),
        [[0, 0, 0], [1, 2**60, 2], [2, 2, 2]],
        r"^positions\[\.\.\., 1\] must stay within \+-\d+ for the frequencies of axis 1 "
        rf"\(exact angle reduction\); got up to {2**60}$",
    ),
    (  # per-head frequencies
        lambda p: fastpe.rope_cache(4, inv_freq=W2, positions=p),
        [0, 2**60],
        f"^{WITHIN}; got up to {2**60}$",
    ),
]


def _positions_refused_cold_and_warm(call, given, message):
    """call(positions) refused with the same message cold and warm (the warm
    calls plan one and three axes), a copy of ``given`` each time, left untouched."""

    def refused():
        p = given.copy()
        with pytest.raises(ValueError, match=message) as info:
            call(p)
        np.testing.assert_array_equal(p, given)
        return str(info.value)

    cold, warm = _cold_and_warm(
        refused,
        lambda: fastpe.rope_cache(8, seq_len=3),
        lambda: fastpe.rope_cache(16, positions=np.zeros((1, 3), np.int64), sections=(2, 2, 4)),
    )
    assert warm == cold


@pytest.mark.parametrize("call, given, message", POSITION_REFUSALS)
def test_position_refusals_cold_and_warm(call, given, message):
    """Positions that are not finite, or beyond the exact reduction of their
    frequencies, refused by the library's checks (pe_rope_check_tokens,
    pe_rope_check_span) with the same type and message cold and warm, the
    positions untouched."""
    _positions_refused_cold_and_warm(call, np.array(given), message)


def test_position_refusal_detail():
    """The detail a C caller reads: the first position that is not finite, its
    index; a span beyond the reduction, its extreme and the bound."""
    with pytest.raises(ValueError):
        fastpe.rope_cache(8, positions=np.array([0.5, 2.0, np.inf]))
    code, arg, index, value, limit = kernel._last_error()
    assert (code, arg, index, value, limit) == (6, "positions", 2, np.inf, np.finfo(float).max)
    with pytest.raises(ValueError):
        fastpe.rope_cache(8, positions=np.array([7, -(2**60), 3]))
    code, arg, index, value, limit = kernel._last_error()
    assert (code, arg, index, value) == (6, "positions", -1, -float(2**60))
    assert 2**40 < limit < 2**60


def test_a_list_of_positions_takes_the_small_call_path():
    """rope_cache(..., positions=[777]), a decoding step: a short list of ints is
    converted on the small-call path into the same checked library call, with the
    general path's bits; other lists are left to the general path's conversion."""
    fastpe.rope_cache(8, seq_len=3)  # the default rule for head_dim 8, planned
    args = [None, None, 0]
    rest = ["half", None, None, "float32", None, None, None, None]
    for given in ([777], [5, -3, 2**40], list(range(64))):
        fast = kernel.rope_cache_fast(8, *args, given, *rest)
        assert fast is not None
        want = fastpe.rope_cache(np.int64(8), positions=np.array(given))  # the general path
        for f, w in zip(fast, want, strict=True):
            assert f.dtype == w.dtype
            np.testing.assert_array_equal(f, w)
    for given in ([], [True], [1.0], [[1]], [np.int64(1)], [2**63], [2**62 + 1], [0] * 65):
        assert kernel.rope_cache_fast(8, *args, given, *rest) is None, given
    kernel.encoders.clear()
    kernel.rope_args.clear()
    with pytest.raises(ValueError, match=f"^{WITHIN}") as cold:
        fastpe.rope_cache(8, positions=[1, 2**60])
    fastpe.rope_cache(8, seq_len=3)
    with pytest.raises(ValueError, match=f"^{WITHIN}") as warm:
        fastpe.rope_cache(8, positions=[1, 2**60])
    assert str(cold.value) == str(warm.value)


ESIZE, ERANGE = 2, 6
# (keywords of rope_cache, exception type, message): seq_len and offset converted by
# the binding (types), their ranges checked by the library (pe_rope_check_tokens)
LENGTH_REFUSALS = [
    ({"seq_len": -1}, ValueError, "seq_len must be a non-negative integer, got -1"),
    ({"seq_len": np.int64(-3)}, ValueError, "seq_len must be a non-negative integer, got -3"),
    ({"seq_len": -(2**70)}, ValueError, f"seq_len must be a non-negative integer, got {-(2**70)}"),
    (
        {"seq_len": 2**62 + 1},
        ValueError,
        f"seq_len must be an integer <= {2**62}, got {2**62 + 1}",
    ),
    ({"seq_len": 2**70}, ValueError, f"seq_len must be an integer <= {2**62}, got {2**70}"),
    (
        {"seq_len": 2, "offset": 2**62 + 1},
        ValueError,
        f"offset must be an integer <= {2**62}, got {2**62 + 1}",
    ),
    (
        {"seq_len": 2, "offset": -(2**70)},
        ValueError,
        f"offset must be an integer >= -{2**62}, got {-(2**70)}",
    ),
    ({"seq_len": 1.5}, TypeError, "seq_len must be an integer, got float 1.5"),
    ({"seq_len": 2, "offset": True}, TypeError, "offset must be an integer, got bool True"),
]
# the paths of rope_cache that take seq_len: a rule, listed and per-head frequencies, xPos
LENGTH_PATHS = [
    {},
    {"inv_freq": np.array([1.0, 0.5])},
    {"inv_freq": W2},
    {"xpos_scale_base": 512.0},
]


@pytest.mark.parametrize("extra", LENGTH_PATHS)
@pytest.mark.parametrize("kw, kind, message", LENGTH_REFUSALS)
def test_length_refusals_cold_and_warm(kw, kind, message, extra):
    """seq_len and offset beyond their range: one check, the library's, on the
    general path and on the small-call path alike; the caller's out untouched."""

    def refused():
        out = (np.full((2, 4), 5, np.float32), np.full((2, 4), 5, np.float32))
        with pytest.raises(kind) as info:
            fastpe.rope_cache(4, **kw, **extra, out=None if extra else out)
        assert all((o == 5).all() for o in out)
        return str(info.value)

    cold, warm = _cold_and_warm(
        refused,
        lambda: fastpe.rope_cache(4, seq_len=2, **extra),
        lambda: fastpe.rope_cache(4, seq_len=2, out=(np.empty((2, 4)), np.empty((2, 4)))),
    )
    assert cold == warm == message


def test_length_refusal_detail():
    """The detail a C caller reads: the length or offset refused, its bound."""
    for clear in (True, False):
        if clear:
            kernel.encoders.clear()
            kernel.rope_args.clear()
        with pytest.raises(ValueError):
            fastpe.rope_cache(8, seq_len=-5)
        assert kernel._last_error() == (ESIZE, "seq_len", -1, -5.0, 0.0)
        with pytest.raises(ValueError):
            fastpe.rope_cache(8, seq_len=2**62 + 2**11)
        assert kernel._last_error() == (ESIZE, "seq_len", -1, float(2**62 + 2**11), float(2**62))
        with pytest.raises(ValueError):
            fastpe.rope_cache(8, seq_len=3, offset=-(2**62) - 2**11)
        assert kernel._last_error() == (ERANGE, "offset", -1, -float(2**62 + 2**11), float(2**62))
        fastpe.rope_cache(8, seq_len=3)
    # the largest length and offsets the check accepts (the frequencies' reduction
    # then refuses such positions, naming them)
    kernel.rope_check_seq(2**62, 0)
    kernel.rope_check_seq(0, -(2**62))
    kernel.rope_check_seq(1, 2**62)


BEYOND = f"positions must stay within \\+-2\\*\\*62, got {2**62 + 1}"
# integer positions beyond +-2^62: (the call, positions, message regex)
ID_REFUSALS = [
    (lambda p: fastpe.rope_cache(8, positions=p), np.array([3, 2**62 + 1]), f"^{BEYOND}$"),
    (lambda p: fastpe.rope_cache(8, positions=p), [3, 2**62 + 1], f"^{BEYOND}$"),
    (
        lambda p: fastpe.rope_cache(8, positions=p),
        np.array([[0, 1], [2, -(2**62) - 1]]),
        f"^positions must stay within \\+-2\\*\\*62, got {-(2**62) - 1}$",
    ),
    (lambda p: fastpe.rope_cache(8, positions=p), np.array([2**62 + 1], np.uint64), f"^{BEYOND}$"),
    (
        lambda p: fastpe.rope_cache(8, positions=p),
        np.array([1, 2**64 - 1], np.uint64),
        f"^positions must stay within \\+-2\\*\\*62, got {2**64 - 1}$",
    ),
    (  # a rule that depends on the length: the position is named, not the length
        lambda p: fastpe.rope_cache(
            8, {"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=16, positions=p
        ),
        np.array([2**63 - 1]),
        f"^positions must stay within \\+-2\\*\\*62, got {2**63 - 1}$",
    ),
    (
        lambda p: fastpe.apply_rope(np.ones(B, np.float32), positions=p),
        np.array([0, 2**62 + 1, 1]),
        f"^{BEYOND}$",
    ),
    (
        lambda p: fastpe.rope_cache(16, positions=p, sections=(2, 2, 4)),
        np.array([[0, 0, 0], [1, 2**62 + 1, 2]]),
        f"^{BEYOND}$",
    ),
    (
        lambda p: fastpe.rope_cache(4, inv_freq=W2, positions=p),
        np.array([0, 2**62 + 1]),
        f"^{BEYOND}$",
    ),
]


@pytest.mark.parametrize("call, given, message", ID_REFUSALS)
def test_id_refusals_cold_and_warm(call, given, message):
    """Integer position ids beyond +-2^62 (of any integer type: uint64 converted
    by the binding, the range the library's token check's), the same message cold and
    warm, the positions untouched."""
    _positions_refused_cold_and_warm(call, given, message)


def test_id_refusal_detail():
    with pytest.raises(ValueError):
        fastpe.apply_rope(
            np.ones(B, np.float32), positions=np.array([[0, 1, 2], [3, 2**62 + 2**11, 5]])
        )
    assert kernel._last_error() == (ERANGE, "positions", 4, float(2**62 + 2**11), float(2**62))
    with pytest.raises(ValueError):
        fastpe.rope_cache(
            16, positions=np.array([[0, 0, 0], [1, -(2**63), 2]]), sections=(2, 2, 4)
        )
    assert kernel._last_error() == (ERANGE, "positions", 4, -float(2**63), float(2**62))


WMIX = np.array([[1.0, 0.5], [0.25, 0.125]])  # mixed axes: 2 axes of 2 frequencies
# multi-axis positions of the wrong shape: (the call, positions given, message)
AXES_SHAPE_REFUSALS = [
    (
        lambda p: fastpe.rope_cache(16, positions=p, sections=(2, 2, 4)),
        np.zeros((4, 2), np.int64),
        "positions must have shape (..., 3) for sections=[2, 2, 4] (one coordinate per axis), "
        "got (4, 2)",
    ),
    (
        lambda p: fastpe.apply_rope(
            np.ones((2, 3, 16), np.float32), positions=p, sections=(2, 2, 4)
        ),
        np.zeros((4, 3), np.int64),
        "positions must have shape (3, 3) or (2, 3, 3) for sections=[2, 2, 4] (one coordinate "
        "per axis), got (4, 3)",
    ),
    (
        lambda p: fastpe.apply_rope(
            np.ones((2, 3, 16), np.float32), positions=p, sections=(2, 2, 4)
        ),
        np.zeros((3, 3, 3), np.float64),
        "positions must have shape (3, 3) or (2, 3, 3) for sections=[2, 2, 4] (one coordinate "
        "per axis), got (3, 3, 3)",
    ),
    (
        lambda p: fastpe.rope_cache(8, inv_freq=WMIX, positions=p, section_layout="mixed"),
        np.zeros((4, 3), np.int64),
        "positions must have shape (..., 2) for inv_freq of 2 axes, got (4, 3)",
    ),
    (
        lambda p: fastpe.apply_rope(
            np.ones((2, 3, 8), np.float32), inv_freq=WMIX, positions=p, section_layout="mixed"
        ),
        np.zeros((4, 2), np.int64),
        "positions must have shape (3, 2) or (2, 3, 2) for inv_freq of 2 axes, got (4, 2)",
    ),
]


@pytest.mark.parametrize("call, given, message", AXES_SHAPE_REFUSALS)
def test_multi_axis_shape_refusals_cold_and_warm(call, given, message):
    """Multi-axis and mixed-axes positions of the wrong shape, refused by the
    library's check (pe_rope_check_axes_tokens) with the same message cold and
    warm, nothing written."""

    def refused():
        p = given.copy()
        with pytest.raises(ValueError) as info:
            call(p)
        np.testing.assert_array_equal(p, given)
        return str(info.value)

    cold, warm = _cold_and_warm(
        refused,
        lambda: fastpe.rope_cache(16, positions=np.zeros((1, 3), np.int64), sections=(2, 2, 4)),
        lambda: fastpe.apply_rope(
            np.ones((2, 3, 16), np.float32),
            positions=np.zeros((3, 3), np.int64),
            sections=(2, 2, 4),
        ),
    )
    assert warm == cold == message


def test_multi_axis_position_detail():
    """The detail of a multi-axis refusal: the flat index of the coordinate that
    is not finite; the last axis's length against the number of axes."""
    with pytest.raises(ValueError):
        fastpe.rope_cache(
            16, positions=np.array([[0, 1, 2], [3, np.inf, 5.0]]), sections=(2, 2, 4)
        )
    assert kernel._last_error()[:3] == (6, "positions", 4)
    with pytest.raises(ValueError):
        fastpe.rope_cache(16, positions=np.zeros((4, 2), np.int64), sections=(2, 2, 4))
    assert kernel._last_error() == (2, "positions", 1, 2.0, 3.0)
    assert kernel.rope_check_axes_tokens(np.array([[4, -2], [1, 7]]), 2, -1, -1, "") == (
        [1, -2],
        [4, 7],
    )


P3 = np.zeros((2, 3), np.int64)
# (the call, the message, the library's detail (argument, index, value, limit)): the
# sections' range and sum, checked by the library's fastpe_rope_section_axes
SECTION_REFUSALS = [
    (
        lambda: fastpe.rope_cache(16, positions=P3, sections=(2, 2, 3)),
        "sections must sum to the number of frequencies, rotary_dim / 2 = 8, got "
        "sections=[2, 2, 3] (sum 7)",
        ("sections", -1, 7.0, 8.0),
    ),
    (
        lambda: fastpe.rope_cache(16, positions=P3, sections=(2, -2, 8)),
        "sections[1] must be a non-negative integer, got -2",
        ("sections", 1, -2.0, 0.0),
    ),
    (
        lambda: fastpe.rope_cache(16, positions=P3, sections=(2**70, 2, 2)),
        f"sections[0] must be an integer <= {2**31}, got {2**70}",
        ("sections", 0, float(2**63), float(2**31)),
    ),
    (
        lambda: fastpe.rope_cache(16, [None] * 3, positions=P3, sections=(np.int64(-1), 5, 4)),
        "sections[0] must be a non-negative integer, got -1",
        ("sections", 0, -1.0, 0.0),
    ),
    (
        lambda: fastpe.apply_rope(np.ones((1, 2, 2, 16)), positions=P3[:2], sections=(3, 2, 2)),
        "sections must sum to the number of frequencies, rotary_dim / 2 = 8, got "
        "sections=[3, 2, 2] (sum 7)",
        ("sections", -1, 7.0, 8.0),
    ),
]


@pytest.mark.parametrize("call, message, detail", SECTION_REFUSALS)
def test_section_refusals_cold_and_warm(call, message, detail):
    """The sections' range and sum are the library's checks (one message cold and
    warm), its detail naming the section or, for the sum, the sum and the
    frequencies."""

    def refused():
        with pytest.raises(ValueError) as info:
            call()
        assert kernel._last_error()[1:] == detail
        return str(info.value)

    cold, warm = _cold_and_warm(
        refused,
        lambda: fastpe.rope_cache(16, positions=P3, sections=(2, 2, 4)),
        lambda: fastpe.rope_cache(16, [None] * 3, positions=P3, sections=(2, 2, 4)),
    )
    assert cold == warm == message


@pytest.mark.parametrize(
    "sections, message",
    [
        ((2**31 + 1, 5, 4), f"sections[0] must be an integer <= {2**31}, got {2**31 + 1}"),
        ((2**30, 2**30, 2**30), f"{3 * 2**30} frequencies rotate {6 * 2**30} dims"),
        ((3, 3, 3), "9 frequencies rotate 18 dims, more than head_dim=16"),
    ],
)
def test_per_axis_sections_refused_before_their_arrays(sections, message):
    """With a rule per axis the sections give the number of frequencies: sections too
    large for head_dim are refused before any array of that many entries (an earlier
    build allocated 8 GiB for the first case before the library refused it)."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=re.escape(message)):
            fastpe.rope_cache(16, [{"rope_theta": 10000.0}] * 3, positions=P3, sections=sections)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**24
