"""The RoPE rules' parameters are checked once, by the library's rule
(lib/src/rope_rules.c): the binding only converts Python values (types, dict
keys, None) and turns the library's error detail, which names the field, the
element and the bound, into the message that names the key as written
(``rope_parameters['beta_fast']``) with the value given.  RoPE calls raise the
same message cold (nothing cached) and warm (a cached plan)."""

import numpy as np
import pytest

import fastpe
from fastpe import kernel

NAN = float("nan")
YARN4K = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
LLAMA3_8K = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
LONGROPE4 = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [1.0] * 4,
    "original_max_position_embeddings": 4096,
    "factor": 2.0,
}


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

    kernel.encoders.clear()
    kernel.rope_args.clear()
    cold = call()
    _plan_everything()
    assert call() == cold == message


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

    kernel.encoders.clear()
    kernel.rope_args.clear()
    cold = call()
    _plan_everything()
    assert call() == cold == message


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
