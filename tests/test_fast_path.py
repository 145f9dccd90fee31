"""The small-call paths: calls with the common argument types (exact ints and
floats, plain float32/float64 ndarrays, a cached encoding) are served by the
kernel's fast paths without the general validation.  They must give bitwise the
results of the general path, which the same calls with other argument spellings
(NumPy scalars, lists, an int base) take, and decline whatever they do not
handle so that the general path raises its documented errors."""

import numpy as np
import pytest
from rules import LLAMA31

import fastpe
from fastpe import kernel


def slow(v):
    """The same value, spelled so that the fast paths decline it."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    return v


TABLES = [
    dict(seq_len=1, d_model=512, offset=1000),
    dict(seq_len=64, d_model=512),
    dict(seq_len=300, d_model=96, offset=-77, dtype=np.float64),
    dict(seq_len=5, d_model=33, layout="split", dtype="float64"),
    dict(seq_len=40, d_model=20, convention="fairseq", offset=-3),
    dict(seq_len=7, d_model=320, convention="diffusers"),
    dict(seq_len=3, d_model=16, base=500.0, num_threads=1),
    dict(seq_len=0, d_model=8),
]


@pytest.mark.parametrize("kw", TABLES)
def test_table_fast_equals_general(kw):
    fastpe.sinusoidal(**kw)  # caches the encoding
    args = dict(kw)
    S, D = args.pop("seq_len"), args.pop("d_model")
    fast = kernel.table(
        S,
        D,
        args.get("base", 10000.0),
        args.get("offset", 0),
        args.get("dtype"),
        args.get("layout", "interleaved"),
        None,
        args.get("num_threads"),
        args.get("convention", "vaswani"),
    )
    assert fast is not None, "the fast path declined a common call"
    general = fastpe.sinusoidal(slow(S), slow(D), **{k: slow(v) for k, v in args.items()})
    assert fast.dtype == general.dtype and fast.shape == general.shape
    np.testing.assert_array_equal(fast, general)
    # into out=: a column window of a wider matrix, and a plain array
    wide = np.full((S, D + 9), 5.0, fast.dtype)
    assert fastpe.sinusoidal(S, D, out=wide[:, 4 : 4 + D], **args) is not None
    np.testing.assert_array_equal(wide[:, 4 : 4 + D], general)
    assert (wide[:, :4] == 5).all() and (wide[:, 4 + D :] == 5).all()


@pytest.mark.parametrize(
    "positions",
    [
        np.array([999.5, 800.25, 600.0, 1.0, 0.0, 2.5, 3.75, 100.125]),
        np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 7 - 30,
        np.array(12.5),
    ],
)
@pytest.mark.parametrize("convention", ["vaswani", "diffusers"])
def test_at_fast_equals_general(positions, convention):
    fastpe.sinusoidal_at(positions, 320, convention=convention)
    fast = kernel.table_at(positions, 320, 10000.0, None, "interleaved", None, None, convention)
    assert fast is not None
    general = fastpe.sinusoidal_at(positions.tolist(), np.int64(320), convention=convention)
    np.testing.assert_array_equal(fast, general)
    out = np.zeros((*positions.shape, 320), np.float64)
    assert fastpe.sinusoidal_at(positions, 320, convention=convention, out=out) is out
    np.testing.assert_array_equal(
        out, fastpe.sinusoidal_at(positions.tolist(), 320, convention=convention, dtype=np.float64)
    )


@pytest.mark.parametrize("shape", [(1, 1, 4096), (2, 5, 8), (3, 4, 2, 16), (4, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_fast_equals_general(shape, dtype):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(shape).astype(dtype)
    a = x0.copy()
    fastpe.add_to(a, offset=1000, scale=2.0)  # caches; then the fast path
    b = x0.copy()
    assert kernel.add(b, 1000, None, 2.0, 10000.0, "interleaved", None, "vaswani") is b
    c = x0.copy()
    fastpe.add_to(c, offset=np.int64(1000), scale=np.float64(2.0))
    np.testing.assert_array_equal(b, c)
    np.testing.assert_array_equal(a, c)


def test_add_fast_path_on_a_column_window():
    x = np.zeros((2, 6, 40), np.float32)
    fastpe.add_to(x[:, :, 8:24], offset=3)
    fastpe.add_to(x[:, :, 8:24], offset=3)
    y = np.zeros((2, 6, 16), np.float32)
    fastpe.add_to(y, offset=np.int64(3))
    fastpe.add_to(y, offset=np.int64(3))
    np.testing.assert_array_equal(x[:, :, 8:24], y)
    assert not x[:, :, :8].any() and not x[:, :, 24:].any()


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: fastpe.sinusoidal(-1, 512), ValueError, "seq_len must be a non-negative"),
        (lambda: fastpe.sinusoidal(True, 512), TypeError, "seq_len must be an integer, got bool"),
        (lambda: fastpe.sinusoidal(3, 512, offset=2**70), ValueError, "every position within"),
        (lambda: fastpe.sinusoidal(3, 512, num_threads=0), ValueError, "num_threads"),
        (lambda: fastpe.sinusoidal(3, 512, dtype=np.complex64), TypeError, "dtype"),
        (
            lambda: fastpe.sinusoidal(3, 512, out=np.zeros((3, 512), np.float32)[:, ::-1]),
            ValueError,
            "last axis",
        ),
        (
            lambda: fastpe.sinusoidal(3, 512, out=np.zeros((3, 512)), dtype=np.float32),
            TypeError,
            "dtype",
        ),
        (lambda: fastpe.sinusoidal_at([np.nan], 512), ValueError, "finite"),
        (lambda: fastpe.add_to(np.zeros((1, 1, 512), np.complex64)), TypeError, "dtype"),
        (lambda: fastpe.add_to(np.zeros((1, 1, 512)), scale=float("inf")), ValueError, "scale"),
    ],
)
def test_declined_calls_raise_the_documented_errors(call, exc, match):
    fastpe.sinusoidal(1, 512)  # the encoding is cached
    with pytest.raises(exc, match=match):
        call()


def test_read_only_out_is_refused_by_the_general_path():
    fastpe.sinusoidal(1, 512)
    out = np.zeros((1, 512), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        fastpe.sinusoidal(1, 512, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d_model", [8, 512, 4096])
def test_decoding_steps_reuse_anchors_bitwise(dtype, d_model):
    """Consecutive one-row calls share their block's anchor through the
    encoding's anchor cache; every row must still be the table's row."""
    table = fastpe.sinusoidal(700, d_model, offset=-100, dtype=dtype)
    row = np.empty((1, d_model), dtype)
    x = np.zeros((1, 1, d_model), dtype)
    for k in [*list(range(-100, 600, 3)), 0, 599, -100, 37, 38, 37]:
        fastpe.sinusoidal(1, d_model, offset=k, out=row)
        np.testing.assert_array_equal(row[0], table[k + 100])
        x[:] = 0
        fastpe.add_to(x, offset=k)
        np.testing.assert_array_equal(x[0, 0], table[k + 100])


def test_concurrent_steps_on_one_encoding():
    import threading

    table = fastpe.sinusoidal(5000, 512, dtype=np.float64)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        row = np.empty((1, 512))
        for k in rng.integers(0, 5000, 400):
            k = int(k)
            fastpe.sinusoidal(1, 512, offset=k, out=row)
            if not np.array_equal(row[0], table[k]):
                errors.append(k)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:5]


ROPES = [
    dict(shape=(1, 32, 1, 128), offset=100000),  # a decoding step
    dict(shape=(2, 4, 9, 64), offset=-5, seq_axis=-2, layout="interleaved"),
    dict(shape=(2, 9, 4, 64), offset=7, seq_axis=1, dtype=np.float64),
    dict(shape=(3, 5, 32), offset=0, seq_axis=-2, k_heads=None),
    dict(shape=(5, 2, 3, 16), offset=11, seq_axis=0),  # the sequence axis first
    dict(shape=(1, 2, 6, 80), head_dim=64, offset=3),  # head_dim shorter than the rows
    dict(
        shape=(1, 8, 4, 128),
        offset=20000,
        rope_parameters=LLAMA31,
    ),
    dict(shape=(1, 4, 3, 64), offset=2, rope_parameters={"partial_rotary_factor": 0.5}),
    # KV-cache decoding of a batch: one offset per sequence; left padding: position ids
    dict(shape=(4, 8, 1, 64), offset=np.array([0, 17, 99999, 5])),
    dict(shape=(3, 5, 2, 32), offset=np.array([7, 0, 300]), seq_axis=1),
    dict(shape=(2, 4, 5, 64), positions=np.array([[0, 0, 1, 2, 3], [5, 6, 7, 8, 9]])),
    dict(shape=(2, 4, 5, 64), positions=np.array([3, 1, 4, 1, 5]), layout="interleaved"),
    # a model's own frequencies (its float32 inv_freq buffer), and float64 ones
    # rotating half of each head
    dict(
        shape=(1, 32, 1, 128),
        offset=100000,
        inv_freq=(1.0 / 10000.0 ** (np.arange(0, 128, 2) / 128)).astype(np.float32),
    ),
    dict(shape=(2, 4, 3, 64), offset=5, inv_freq=np.geomspace(1.0, 1e-3, 16)),
]


@pytest.mark.parametrize("kw", ROPES)
def test_apply_rope_fast_equals_general(kw, rng):
    kw = dict(kw)
    shape, dtype = kw.pop("shape"), kw.pop("dtype", np.float32)
    k_shape = list(shape)
    if kw.pop("k_heads", True) and len(shape) == 4 and kw.get("seq_axis", -2) in (-2, 2):
        k_shape[1] = 2 if shape[1] % 2 == 0 else shape[1]  # grouped-query: fewer heads
    q0 = rng.standard_normal(shape).astype(dtype)
    k0 = rng.standard_normal(k_shape).astype(dtype)
    fastpe.apply_rope(q0.copy(), k0.copy(), **kw)  # plans the frequencies
    args = [kw.get(n) for n in ("rope_parameters", "head_dim")]
    args += [kw.get("offset", 0), kw.get("positions")]
    args += [kw.get("seq_axis", -2), kw.get("layout", "half")]
    args += [None, "float32", kw.get("inv_freq"), None, None]  # max_position_embeddings ..
    q, k = q0.copy(), k0.copy()
    assert kernel.rope_apply(q, k, *args) is not None, "the fast path declined a common call"
    # the general path: the same call with NumPy-scalar or list spellings
    gq, gk = q0.copy(), k0.copy()
    slow_kw = {n: v.tolist() if isinstance(v, np.ndarray) else slow(v) for n, v in kw.items()}
    if "offset" in kw and np.ndim(kw["offset"]) == 0:
        slow_kw["offset"] = np.array(kw["offset"])
    spelled = [slow_kw.get(n) for n in ("rope_parameters", "head_dim")]
    spelled += [slow_kw.get("offset", 0), slow_kw.get("positions")]
    assert kernel.rope_apply(gq, gk, *spelled, *args[4:]) is None
    fastpe.apply_rope(gq, gk, **slow_kw)
    np.testing.assert_array_equal(q, gq)
    np.testing.assert_array_equal(k, gk)
    assert not np.array_equal(q, q0) or np.all(kw.get("offset", 1) == 0)


@pytest.mark.parametrize(
    "change",
    [
        dict(rope_parameters={"rope_theta": 5000.0}),  # another rule: not planned yet
        dict(q=np.broadcast_to(np.zeros((1, 1, 3, 8), np.float32), (2, 2, 3, 8))),  # read-only
        dict(q=np.zeros((2, 2, 3, 8), np.int32)),
        dict(offset=2**60),  # beyond the exact reduction
        dict(offset=np.array([0, 2**60])),
        dict(offset=np.array([0])),  # one offset as an array: the general path broadcasts
        dict(offset=np.array([0, 1], np.int32)),
        dict(positions=np.array([0, 1, 2**60])),
        dict(positions=np.array([0, 1, 2]), offset=1),
        dict(positions=np.array([0.0, 1.0, 2.0])),
        dict(positions=np.arange(6)[::2]),  # not contiguous
        dict(positions=[0, 1, 2]),
        dict(num_threads=0),
        dict(layout="split"),
        dict(inv_freq=[1.0, 0.5, 0.25, 0.125]),
        dict(inv_freq=np.ones(8)[::2]),
        dict(inv_freq=np.ones(4, np.int64)),
        dict(inv_freq=np.ones(4), rope_parameters={}),
        dict(attention_factor=2.0),
    ],
)
def test_apply_rope_fast_path_declines(change):
    q = np.zeros((2, 2, 3, 8), np.float32)
    fastpe.apply_rope(q.copy())  # the default rule for head_dim 8, planned
    args = dict(
        q=q.copy(),
        k=None,
        rope_parameters=None,
        head_dim=None,
        offset=0,
        positions=None,
        seq_axis=-2,
        layout="half",
        max_position_embeddings=None,
        precision="float32",
        inv_freq=None,
        attention_factor=None,
        num_threads=None,
    )
    assert kernel.rope_apply(**args) is not None  # the call it changes is served
    args.update(change)
    assert kernel.rope_apply(**args) is None


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(q=np.zeros((2, 2, 3, 8), np.float32)[..., ::-1]),
            "q's last axis must be contiguous, got strides (192, 96, 32, -4)",
        ),
        (
            dict(k=np.zeros((2, 2, 4, 8), np.float32)),
            "q and k must agree on the batch and sequence axes, got (2, 2, 3, 8) and (2, 2, 4, 8)",
        ),
        (dict(seq_axis=-1), "seq_axis=-1 is not an axis of q before its last"),
        (dict(head_dim=16), "q's last axis (8) is shorter than head_dim=16"),
        (
            dict(offset=np.array([[0], [1]])),
            "offset must be an int or one per batch entry (2), got shape (2, 1)",
        ),
        (dict(positions=np.array([0, 1])), "positions must have shape (3,) or (2, 3), got (2,)"),
        (
            dict(positions=np.array([[0, 1, 2]] * 3)),  # 3 rows for a batch of 2
            "positions must have shape (3,) or (2, 3), got (3, 3)",
        ),
    ],
)
def test_apply_rope_fast_path_refuses_as_the_general_path(change, message):
    """With a plan cached, a bad q, k, positions or offset is refused by the
    library's one check, the general path's: the same message, nothing declined."""
    q = np.zeros((2, 2, 3, 8), np.float32)
    fastpe.apply_rope(q.copy())  # the default rule for head_dim 8, planned
    fastpe.apply_rope(np.zeros((1, 1, 1, 16)))  # and 16
    args = dict(q=q.copy(), k=None, rope_parameters=None, head_dim=None, offset=0)
    args.update(positions=None, seq_axis=-2, layout="half", max_position_embeddings=None)
    args.update(precision="float32", inv_freq=None, attention_factor=None, num_threads=None)
    args.update(change)
    with pytest.raises(ValueError) as fast:
        kernel.rope_apply(**args)
    kernel.rope_args.clear()
    with pytest.raises(ValueError) as general:
        fastpe.apply_rope(args.pop("q"), **args)
    assert str(fast.value) == str(general.value) == message


def test_apply_rope_plans_follow_the_callers_inv_freq():
    """An inv_freq plan is keyed by the array's values: changing it in place is
    another plan."""
    w = np.array([1.0, 0.1, 0.01, 0.001])
    fastpe.apply_rope(np.ones((1, 1, 1, 8)), offset=10, inv_freq=w)
    w *= 3.0
    got = fastpe.apply_rope(np.ones((1, 1, 1, 8)), offset=10, inv_freq=w)
    want = fastpe.apply_rope(np.ones((1, 1, 1, 8)), offset=10, inv_freq=w.tolist())
    np.testing.assert_array_equal(got, want)
    assert kernel.rope_plan_key(None, 8, None, "float32", w) != kernel.rope_plan_key(
        None, 8, None, "float32", w.astype(np.float32)
    )


def test_apply_rope_plans_follow_the_callers_dict():
    """A plan is keyed by the dict's values: changing the dict is another plan."""
    params = {"rope_type": "linear", "factor": 2.0}
    q = np.ones((1, 1, 1, 8))
    fastpe.apply_rope(q, offset=10, rope_parameters=params)
    params["factor"] = 4.0
    got = fastpe.apply_rope(np.ones((1, 1, 1, 8)), offset=10, rope_parameters=params)
    want = fastpe.apply_rope(
        np.ones((1, 1, 1, 8)), offset=np.int64(10), rope_parameters=dict(params)
    )
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, q)
    # a value of another type is another key (True is not 1 to the rules)
    assert kernel.rope_plan_key({"truncate": True}, 8, None, "float32") != kernel.rope_plan_key(
        {"truncate": 1}, 8, None, "float32"
    )
    assert kernel.rope_plan_key({"long_factor": [1.0]}, 8, None, "float32") is None


CACHES = [
    dict(seq_len=1, offset=100000),  # a decoding step
    dict(seq_len=300, offset=-40, layout="interleaved"),
    dict(seq_len=7, dtype=np.float64, rope_parameters={"partial_rotary_factor": 0.5}),
    dict(positions=np.array([0, 0, 1, 2, 3, 70000])),  # left padding, then a far token
    dict(
        seq_len=5000,
        offset=3,
        rope_parameters={"rope_type": "yarn", "factor": 4.0},
        max_position_embeddings=2048,
    ),
    dict(seq_len=3, inv_freq=(1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64)).astype(np.float32)),
    dict(seq_len=4, offset=1, out="window"),  # into column windows of wider arrays
]


def _cache_args(kw):
    names = ("rope_parameters", "seq_len", "offset", "positions", "layout", "dtype")
    names += ("max_position_embeddings", "precision", "inv_freq", "attention_factor", "out")
    names += ("num_threads",)
    defaults = dict(offset=0, layout="half", precision="float32")
    return [kw.get(n, defaults.get(n)) for n in names]


@pytest.mark.parametrize("kw", CACHES)
def test_rope_cache_fast_equals_general(kw):
    kw = dict(kw)
    head_dim = 64
    fastpe.rope_cache(head_dim, **{k: v for k, v in kw.items() if k != "out"})  # plans it
    if kw.get("out") == "window":
        wide = [np.full((kw["seq_len"], 70), 5.0, np.float32) for _ in range(2)]
        kw["out"] = tuple(w[:, 3:67] for w in wide)
    fast = kernel.rope_cache_fast(head_dim, *_cache_args(kw))
    assert fast is not None, "the fast path declined a common call"
    # the general path: the same call with NumPy-scalar or list spellings
    slow_kw = {n: v.tolist() if isinstance(v, np.ndarray) else slow(v) for n, v in kw.items()}
    slow_kw.pop("out", None)
    assert kernel.rope_cache_fast(np.int64(head_dim), *_cache_args(slow_kw)) is None
    general = fastpe.rope_cache(np.int64(head_dim), **slow_kw)
    for f, g in zip(fast, general, strict=True):
        assert f.dtype == g.dtype
        np.testing.assert_array_equal(f, g)
    if "out" in kw:
        assert fast is kw["out"]
        assert all((w[:, :3] == 5).all() and (w[:, 67:] == 5).all() for w in wide)


@pytest.mark.parametrize(
    "change",
    [
        dict(rope_parameters={"rope_theta": 5000.0}),  # another rule: not planned yet
        dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}),
        dict(attention_factor=2.0),
        dict(layout="split"),
        dict(dtype=np.float16),
        dict(dtype="bfloat16"),
        dict(num_threads=0),
        dict(seq_len=0),
        dict(seq_len=np.int64(3)),
        dict(offset=2**60),  # beyond the exact reduction
        dict(seq_len=None, positions=np.array([0, 1, 2**60])),
        dict(seq_len=None, positions=np.array([[0, 1, 2]])),  # 2-D: the general path
        dict(seq_len=None, positions=np.array([0, 1, 2], np.int32)),
        dict(seq_len=None, positions=[0.0, 1.0, 2.0]),  # (a list of ints: converted)
        dict(seq_len=None, positions=np.array([0, 1, 2]), offset=1),
        dict(seq_len=10**7),  # a big request: the general path checks memory
        dict(out=(np.empty((3, 8), np.float32), np.empty((3, 8), np.float64))),
        dict(out=(np.empty((3, 8), np.float32), np.empty((4, 8), np.float32))),
        dict(out=(np.empty((3, 8), np.float32), np.empty((3, 9), np.float32))),
        dict(out=[np.empty((3, 8), np.float32), np.empty((3, 8), np.float32)]),
        dict(out=(np.empty((3, 8), np.float32),) * 2),  # the same array twice
        # (a dtype that out does not have: the general path raises)
        dict(out=(np.empty((3, 8), np.float32), np.empty((3, 8), np.float32)), dtype=np.float64),
        dict(out=(np.empty((3, 16), np.float32)[:, ::2], np.empty((3, 8), np.float32))),
    ],
)
def test_rope_cache_fast_path_declines(change):
    fastpe.rope_cache(8, seq_len=3)  # the default rule for head_dim 8, planned
    kw = dict(seq_len=3)
    assert kernel.rope_cache_fast(8, *_cache_args(kw)) is not None  # the call it changes
    kw.update(change)
    assert kernel.rope_cache_fast(8, *_cache_args(kw)) is None


def test_failed_rope_calls_plan_nothing():
    rule = {"rope_theta": 1234.5}
    # An empty memo, so that no eviction can hide a conversion (it holds 4096 at most).
    saved = dict(kernel.rope_args)
    kernel.rope_args.clear()
    try:
        with pytest.raises(ValueError):
            fastpe.rope_cache(8, rule, seq_len=3, out=(np.empty((3, 8)), np.empty((2, 8))))
        q = np.zeros((1, 1, 3, 8), np.float32)
        with pytest.raises(ValueError):
            fastpe.apply_rope(q, q[:, :, :2].copy(), rope_parameters=rule)  # lengths disagree
        assert kernel.rope_args == {}
        fastpe.rope_cache(8, rule, seq_len=3)  # and a call that succeeds plans the rule
        assert len(kernel.rope_args) == 1
    finally:
        kernel.rope_args.clear()
        kernel.rope_args.update(saved)


def test_rope_cache_fast_path_declines_when_cos_and_sin_overlap():
    fastpe.rope_cache(8, seq_len=3)
    buf = np.zeros((4, 8), np.float32)
    before = buf.copy()
    assert kernel.rope_cache_fast(8, *_cache_args(dict(seq_len=3, out=(buf[:3], buf[1:])))) is None
    np.testing.assert_array_equal(buf, before)  # nothing written
    with pytest.raises(ValueError, match="share memory"):
        fastpe.rope_cache(8, seq_len=3, out=(buf[:3], buf[1:]))


# rope_cache with multi-axis positions (sections): a decoding step's cos and sin
AXES_CACHES = [
    dict(positions=np.array([[100000, 7, 9]]), sections=(16, 24, 24)),  # a decoding step
    dict(
        positions=np.arange(64 * 3).reshape(64, 3) * 37 % 5000,
        sections=[24, 20, 20],
        section_layout="interleaved",
        layout="interleaved",
    ),
    dict(
        positions=np.array([[0, 0, 0], [5, 70000, 3]]),
        sections=(16, 8, 8),
        rope_parameters={"rope_type": "yarn", "factor": 4.0},
        max_position_embeddings=2048,
        head_dim=64,
    ),
    dict(
        positions=np.array([[0, 0, 0], [5, 70000, 3]]),
        sections=(16, 8, 8),
        rope_parameters={"rope_type": "yarn", "factor": 4.0},
        max_position_embeddings=2048,
        head_dim=64,
        dtype=np.float64,
    ),
    dict(positions=np.array([[1, 2], [3, 4], [-5, 6]]), sections=(32, 32), dtype="float64"),
    dict(
        positions=np.array([[3, 1, 4]]),
        sections=(8, 12, 12),
        inv_freq=(1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64)).astype(np.float32),
        head_dim=64,
    ),
]


def _axes_cache_args(kw):
    names = ("rope_parameters", "seq_len", "offset", "positions", "sections", "section_layout")
    names += ("layout", "dtype", "max_position_embeddings", "precision", "inv_freq")
    names += ("attention_factor", "out", "num_threads")
    defaults = dict(offset=0, section_layout="contiguous", layout="half", precision="float32")
    return [kw.get(n, defaults.get(n)) for n in names]


@pytest.mark.parametrize("kw", AXES_CACHES)
def test_rope_cache_axes_fast_equals_general(kw):
    kw = dict(kw)
    head_dim = kw.pop("head_dim", 128)
    fastpe.rope_cache(head_dim, **kw)  # plans it
    fast = kernel.rope_cache_axes_fast(head_dim, *_axes_cache_args(kw))
    assert fast is not None, "the fast path declined a common call"
    # the general path: the same call with NumPy-scalar or list spellings
    slow_kw = {n: v.tolist() if isinstance(v, np.ndarray) else slow(v) for n, v in kw.items()}
    slow_kw["sections"] = np.array(kw["sections"])
    assert kernel.rope_cache_axes_fast(np.int64(head_dim), *_axes_cache_args(slow_kw)) is None
    general = fastpe.rope_cache(np.int64(head_dim), **slow_kw)
    # and through the public function, which takes the fast path
    public = fastpe.rope_cache(head_dim, **kw)
    for f, g, p in zip(fast, general, public, strict=True):
        assert f.dtype == g.dtype == p.dtype and f.shape == g.shape == p.shape
        np.testing.assert_array_equal(f.view(np.uint8), g.view(np.uint8))
        np.testing.assert_array_equal(p.view(np.uint8), g.view(np.uint8))


def test_rope_cache_axes_fast_path_takes_apply_ropes_plan():
    rule = {"rope_theta": 4321.0}
    pos = np.array([[1, 2, 3]])
    assert (
        kernel.rope_cache_axes_fast(
            64, *_axes_cache_args(dict(rope_parameters=rule, positions=pos, sections=(8, 12, 12)))
        )
        is None
    )
    q = np.zeros((1, 1, 1, 64), np.float32)
    fastpe.apply_rope(q, rope_parameters=rule, positions=pos, sections=(8, 12, 12))
    kw = dict(rope_parameters=rule, positions=pos, sections=(8, 12, 12))
    fast = kernel.rope_cache_axes_fast(64, *_axes_cache_args(kw))
    assert fast is not None
    for f, g in zip(fast, fastpe.rope_cache(np.int64(64), **kw), strict=True):
        np.testing.assert_array_equal(f, g)


AXES_BASE = dict(positions=np.array([[1, 2, 3], [4, 5, 6]]), sections=(2, 1, 1))


@pytest.mark.parametrize(
    "change",
    [
        dict(rope_parameters={"rope_theta": 5000.0}),  # another rule: not planned yet
        dict(rope_parameters={"rope_type": "dynamic", "factor": 2.0}),
        dict(rope_parameters=[None, None, None]),  # one rule per axis
        dict(attention_factor=2.0),
        dict(sections=(2, 1, 2)),  # sections the library refuses: the general path explains
        dict(sections=(2, 2, 0), section_layout="interleaved"),  # (axis 1 cannot interleave)
        dict(sections=np.array([2, 1, 1])),
        dict(sections=(np.int64(2), 1, 1)),
        dict(section_layout=None),
        dict(layout="split"),
        dict(dtype=np.float16),
        dict(dtype="bfloat16"),
        dict(num_threads=0),
        dict(seq_len=2),
        dict(offset=1),
        dict(offset=np.int64(0)),
        dict(positions=np.array([[0, 2**60, 0]])),  # beyond the exact reduction
        dict(positions=np.array([[[1, 2, 3]]])),  # 3-D: the general path
        dict(positions=np.array([1, 2, 3])),  # 1-D: one token of shape ()
        dict(positions=np.zeros((0, 3), np.int64)),
        dict(positions=np.array([[1, 2]])),  # the wrong number of axes
        dict(positions=np.array([[1, 2, 3]], np.int32)),
        dict(positions=np.array([[1, 2, 3, 0], [4, 5, 6, 0]])[:, :3]),  # not C-contiguous
        dict(positions=[[1, 2, 3]]),
        dict(positions=np.array([[1.5, 2, 3]])),  # fractional: the general path's
        dict(positions=np.zeros((10**6, 3), np.int64)),  # a big request: memory checks
        dict(out=(np.empty((2, 8), np.float32), np.empty((2, 8), np.float32))),
    ],
)
def test_rope_cache_axes_fast_path_declines(change):
    fastpe.rope_cache(8, **AXES_BASE)  # planned
    kw = dict(AXES_BASE)
    assert kernel.rope_cache_axes_fast(8, *_axes_cache_args(kw)) is not None  # the call it changes
    kw.update(change)
    assert kernel.rope_cache_axes_fast(8, *_axes_cache_args(kw)) is None


@pytest.mark.parametrize(
    "change, exc, match",
    [
        (dict(positions=np.array([[1, 2]])), ValueError, r"shape \(\.\.\., 3\)"),
        (dict(positions=np.array([[0, 2**60, 0]])), ValueError, r"positions\[\.\.\., 1\]"),
        (dict(seq_len=2), ValueError, "seq_len and offset do not apply"),
        (dict(offset=1), ValueError, "seq_len and offset do not apply"),
        (dict(sections=(2, 1, 2)), ValueError, "sections must sum"),
        (dict(section_layout="spiral"), ValueError, "section_layout"),
        (dict(layout="split"), ValueError, "layout"),
        (dict(dtype=np.int32), TypeError, "dtype"),
        (dict(num_threads=-3), ValueError, "num_threads"),
        (dict(positions=np.array([[np.nan, 2, 3]])), ValueError, "positions"),
        (dict(positions=np.array([[1j, 2, 3]])), TypeError, "positions"),
    ],
)
def test_planned_axes_caches_keep_the_general_errors(change, exc, match):
    fastpe.rope_cache(8, **AXES_BASE)  # planned: the same call with a change still fails so
    before = dict(kernel.rope_args)
    with pytest.raises(exc, match=match):
        fastpe.rope_cache(8, **{**AXES_BASE, **change})
    assert kernel.rope_args == before  # and remembers no conversion


def test_apply_rope_is_compiled_with_the_general_paths_signature():
    """The public apply_rope is the compiled front; it reports, and takes, the
    parameters of the Python function it wraps, with the same defaults."""
    import inspect

    from fastpe import _rope_apply

    front, general = fastpe.apply_rope, fastpe.apply_rope.__wrapped__
    assert front is _rope_apply.apply_rope and front is not general
    assert inspect.isfunction(general) and not inspect.isfunction(front)
    assert front.__name__ == "apply_rope" and front.__doc__ == general.__doc__
    assert inspect.signature(front) == inspect.signature(general)
    # the front's own parameters: the general path's, one for one, with its defaults
    own = inspect.signature(front, follow_wrapped=False).parameters.values()
    theirs = inspect.signature(general).parameters.values()
    assert [(p.name, p.kind, p.default) for p in own] == [
        (p.name, p.kind, p.default) for p in theirs
    ]


@pytest.fixture
def front_calls():
    general = fastpe.apply_rope.__wrapped__
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return general(*args, **kwargs)

    kernel.rope_front(spy)
    try:
        yield calls
    finally:
        kernel.rope_front(general)
    assert fastpe.apply_rope.__wrapped__ is general


def _reference(q, positions, half):
    """A float64 NumPy rotation of q (..., seq, d) by the default frequencies
    (float32, as transformers computes them), at exact float64 angles."""
    d = q.shape[-1]
    inv = np.float32(1.0) / np.float32(10000.0) ** (np.arange(0, d, 2, dtype=np.float32) / d)
    inv = inv.astype(np.float64)
    ang = np.asarray(positions, np.float64)[:, None] * inv
    c, s = np.cos(ang), np.sin(ang)
    x = q.astype(np.float64)
    if half:
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


STEPS = [
    dict(offset=100000),
    dict(offset=7, layout="interleaved"),
    dict(offset=np.array([3, 900])),
    dict(positions=np.array([[5], [2]])),
    dict(offset=12, head_dim=8, num_threads=1, seq_axis=2, precision="float32"),
]


@pytest.mark.parametrize("kw", STEPS)
@pytest.mark.parametrize("with_k", [False, True])
def test_apply_rope_front_equals_general(kw, with_k, front_calls):
    """A decoding step served by the compiled front gives the bits of the general
    path (the same call with the plans forgotten), never calling it, and both
    agree with a NumPy float64 rotation."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 1, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 1, 8)).astype(np.float32)
    args = (q.copy(), k.copy()) if with_k else (q.copy(),)
    fastpe.apply_rope(*args, **kw)  # plans the rule
    front_calls.clear()
    fast = fastpe.apply_rope(*((q.copy(), k.copy()) if with_k else (q.copy(),)), **kw)
    assert front_calls == [], "the front handed a common step to the general path"
    kernel.rope_args.clear()
    general = fastpe.apply_rope.__wrapped__(
        *((q.copy(), k.copy()) if with_k else (q.copy(),)), **kw
    )
    fast = fast if with_k else (fast,)
    general = general if with_k else (general,)
    if "positions" in kw:
        pos = [np.asarray(kw["positions"])[b, 0] for b in range(2)]
    else:
        pos = np.broadcast_to(kw["offset"], (2,))
    for f, g, x in zip(fast, general, (q, k), strict=False):
        np.testing.assert_array_equal(f, g)
        for b in range(2):
            want = _reference(x[b], [pos[b]], kw.get("layout", "half") == "half")
            np.testing.assert_allclose(f[b], want, rtol=2e-7, atol=2e-7)


@pytest.mark.parametrize(
    "call",
    [
        lambda f, q: f(q, offset=None),
        lambda f, q: f(q, layout="split"),
        lambda f, q: f(q, seq_axis=3),
        lambda f, q: f(q, head_dim=9),
        lambda f, q: f(q, offset=2**63),
        lambda f, q: f(q, q),
        lambda f, q: f(q.astype(np.int32)),
        lambda f, q: f(q, offset=1, positions=np.array([0])),
        lambda f, q: f(q, bogus=1),
        lambda f, q: f(q, None, 3),
        lambda f, q: f(),
        lambda f, q: f(q, k=q.copy(), section_layout="diagonal", sections=[2, 2]),
    ],
)
def test_apply_rope_front_raises_the_general_paths_errors(call):
    q = np.ones((1, 2, 1, 8), np.float32)
    fastpe.apply_rope(q.copy())  # planned: the front tries its fast path first
    general = fastpe.apply_rope.__wrapped__
    with pytest.raises((TypeError, ValueError)) as want:
        call(general, q.copy())
    seen = q.copy()
    with pytest.raises(want.type) as got:
        call(fastpe.apply_rope, seen)
    if "positional argument" not in str(want.value):  # (Cython words these its own way)
        assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(seen, q)  # nothing rotated on error


@pytest.mark.parametrize(
    "kw",
    [
        dict(sections=[2, 2], positions=np.zeros((1, 2), np.int64)),
        dict(rope_parameters=[None, None], sections=[2, 2], positions=np.zeros((1, 2), np.int64)),
        dict(offset=np.int64(3)),
        dict(attention_factor=1.0),
    ],
)
def test_apply_rope_front_hands_other_calls_on(kw, front_calls):
    q = np.ones((1, 2, 1, 8), np.float32)
    fastpe.apply_rope(q.copy())
    front_calls.clear()
    fastpe.apply_rope(q.copy(), **kw)
    assert len(front_calls) == 1
    assert {n: v for n, v in front_calls[0].items() if n in kw} == kw


@pytest.mark.parametrize("value, exc", [("bad", ValueError), (b"contiguous", TypeError)])
def test_section_layout_is_checked_without_sections_cold_and_planned(value, exc):
    """section_layout has no effect without sections, but a misspelt one is refused
    by the fast paths as by the general ones, before anything is written."""
    w = 10000.0 ** (-np.arange(4) / 4)
    q = np.ones((1, 2, 3, 8), np.float32)
    for planned in (False, True):
        if planned:
            fastpe.apply_rope(q.copy(), inv_freq=w)
            fastpe.rope_cache(8, inv_freq=w, seq_len=3)
        before = q.copy()
        with pytest.raises(exc, match="section_layout"):
            fastpe.apply_rope(q, inv_freq=w, section_layout=value)
        np.testing.assert_array_equal(q, before)
        with pytest.raises(exc, match="section_layout"):
            fastpe.rope_cache(8, inv_freq=w, seq_len=3, section_layout=value)
    fastpe.apply_rope(q, inv_freq=w, section_layout="interleaved")  # a valid one: no effect
    ref = before.copy()
    fastpe.apply_rope(ref, inv_freq=w)
    np.testing.assert_array_equal(q, ref)


def test_correctly_rounded_is_checked_on_the_small_call_path_too():
    """The small-call paths take only the bools themselves; anything else goes to
    the general path, which converts it (NumPy's bool) or refuses it, warm or cold."""
    row = np.empty((1, 512), np.float32)
    fastpe.sinusoidal(1, 512, offset=1000, out=row)  # (cached: the small-call path is warm)
    want = fastpe.sinusoidal(1, 512, offset=1000, correctly_rounded=True)
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="correctly_rounded"):
            fastpe.sinusoidal(1, 512, offset=1000, out=row, correctly_rounded=bad)
        with pytest.raises(TypeError, match="correctly_rounded"):
            fastpe.sinusoidal_at([1000], 512, out=row, correctly_rounded=bad)
        with pytest.raises(TypeError, match="correctly_rounded"):
            fastpe.add_to(np.zeros((1, 512), np.float32), offset=1000, correctly_rounded=bad)
    args = (1, 512, 10000.0, 1000, None, "interleaved", row, None, "vaswani")
    assert kernel.table(*args, 1) is None
    got = fastpe.sinusoidal(1, 512, offset=1000, out=row, correctly_rounded=np.True_)
    np.testing.assert_array_equal(got, want)
