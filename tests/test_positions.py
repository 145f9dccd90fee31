"""Arbitrary positions: sinusoidal_at, the fused add_to, fairseq_positions, sinusoidal_2d."""

from __future__ import annotations

import tracemalloc

import mpmath
import numpy as np
import pytest

import fastpe
from conventions_ref import make_positions_ref
from truth import exact_entry

F64 = np.float64

# ---------------------------------------------------------------- sinusoidal_at


@pytest.mark.parametrize("conv", ["vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj"])
@pytest.mark.parametrize("dtype", [np.float32, F64])
@pytest.mark.parametrize("d", [1, 2, 7, 64, 129])
def test_integer_positions_are_bitwise_table_rows(conv, dtype, d):
    if conv == "gptj" and d % 2:
        return
    P = fastpe.sinusoidal(400, d, offset=-150, dtype=dtype, convention=conv)
    rng = np.random.default_rng(d)
    k = rng.integers(-150, 250, size=(3, 5, 7))
    got = fastpe.sinusoidal_at(k, d, dtype=dtype, convention=conv)
    assert got.shape == (3, 5, 7, d) and got.dtype == dtype
    np.testing.assert_array_equal(got, P[k + 150])
    # integral values given as floats take the same path
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k.astype(F64), d, dtype=dtype,
                                                       convention=conv), got)


@pytest.mark.parametrize("int_dtype", [np.int8, np.int16, np.int32, np.uint16, np.uint64, np.int64])
def test_every_integer_dtype(int_dtype):
    k = np.array([0, 3, 100], dtype=int_dtype)
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k, 16), fastpe.sinusoidal(101, 16)[[0, 3, 100]])


def test_scalar_and_0d_positions_give_a_vector():
    row = fastpe.sinusoidal(8, 10)[7]
    for k in (7, np.int64(7), np.array(7), 7.0, np.float32(7.0)):
        got = fastpe.sinusoidal_at(k, 10)
        assert got.shape == (10,)
        np.testing.assert_array_equal(got, row)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_empty_positions(shape):
    got = fastpe.sinusoidal_at(np.zeros(shape, np.int64), 6)
    assert got.shape == shape + (6,) and got.dtype == np.float32


def test_lists_and_negative_and_noncontiguous_positions():
    P = fastpe.sinusoidal(41, 8, offset=-20, dtype=F64)
    np.testing.assert_array_equal(fastpe.sinusoidal_at([[-20, 0], [5, 20]], 8, dtype=F64),
                                  P[[[0, 20], [25, 40]]])
    k = np.arange(-20, 21)[::-3]
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k, 8, dtype=F64), P[k + 20])
    big = np.arange(-20, 21).reshape(1, -1).T[::2, 0]    # a strided view
    np.testing.assert_array_equal(fastpe.sinusoidal_at(big, 8, dtype=F64), P[big + 20])


# float positions: within 1e-15 of mpmath at the float64 value of the position ...
FLOAT_POSITIONS = [0.5, 0.1, 1e-9, 3.25, 999.999, 12345.678, 65535.5, 1e5 + 0.3, -7.77,
                   2.0**-30, 0.3333333333333333]


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d", [6, 64])
def test_float_positions_vs_mpmath(layout, d):
    got = fastpe.sinusoidal_at(np.array(FLOAT_POSITIONS), d, layout=layout, dtype=F64)
    worst = 0.0
    with mpmath.workdps(40):
        for r, k in enumerate(FLOAT_POSITIONS):
            for j in range(d):
                e = _exact_float_entry(k, j, d, layout)
                worst = max(worst, float(abs(mpmath.mpf(float(got[r, j])) - e)))
    assert worst <= 1e-15, worst


def _exact_float_entry(k, j, d, layout, base=10000.0):
    from truth import column_map

    i, is_sin = column_map(d, layout)[j]
    x = mpmath.mpf(k) * mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * i) / d)
    return mpmath.sin(x) if is_sin else mpmath.cos(x)


# ... and, for decimal timesteps, within 1e-15 + what rounding the decimal to float64 implies
@pytest.mark.parametrize("text", ["0.1", "0.3", "981.7", "12345.678", "99999.999"])
def test_decimal_timesteps_error_is_only_the_positions_rounding(text):
    d = 32
    k = float(text)
    got = fastpe.sinusoidal_at(k, d, dtype=F64)
    with mpmath.workdps(40):
        delta = abs(mpmath.mpf(text) - mpmath.mpf(k))      # the position's own rounding
        for j in range(d):
            i = j // 2
            w = mpmath.power(10000, -mpmath.mpf(2 * i) / d)
            x = mpmath.mpf(text) * w
            e = mpmath.sin(x) if j % 2 == 0 else mpmath.cos(x)
            err = abs(mpmath.mpf(float(got[j])) - e)
            assert err <= 1e-15 + delta * w, (j, float(err), float(delta * w))


def test_float32_positions_are_used_exactly():
    k = np.float32(0.1)                       # 0.100000001490116...
    got = fastpe.sinusoidal_at(k, 4, dtype=F64)
    with mpmath.workdps(40):
        np.testing.assert_allclose(got[0], float(mpmath.sin(mpmath.mpf(float(k)))), atol=1e-16)


@pytest.mark.parametrize("bad, exc", [
    ([np.nan], ValueError), ([1.0, np.inf], ValueError), (-np.inf, ValueError),
    ([True, False], TypeError), (np.array([1], dtype=object), TypeError), ([1 + 2j], TypeError),
    (["3"], TypeError), (None, TypeError), ([[1], [1, 2]], TypeError),
    (np.array(["2020"], "M8[s]"), TypeError), (np.array([3], "m8[s]"), TypeError),
    (np.array([2**64 - 1], np.uint64), ValueError), ([1e300], ValueError), ([2**62], ValueError),
])
def test_bad_positions_refused(bad, exc):
    with pytest.raises(exc, match="positions"):
        fastpe.sinusoidal_at(bad, 8)


def test_position_limit_is_the_tables():
    lim = fastpe.kernel.max_position(10000.0, 8)
    fastpe.sinusoidal_at([lim, -lim], 8)
    with pytest.raises(ValueError, match="positions"):
        fastpe.sinusoidal_at([lim + 1], 8)


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_sinusoidal_at_out(dtype):
    k = np.array([[1, 5], [9, 2]])
    out = np.full((2, 2, 12), np.nan, dtype)
    assert fastpe.sinusoidal_at(k, 12, out=out) is out
    np.testing.assert_array_equal(out, fastpe.sinusoidal_at(k, 12, dtype=dtype))
    wide = np.zeros((4, 30), dtype)                              # rows strided: column window
    fastpe.sinusoidal_at(np.arange(4), 12, out=wide[:, 5:17])
    np.testing.assert_array_equal(wide[:, 5:17], fastpe.sinusoidal(4, 12, dtype=dtype))
    assert not wide[:, :5].any() and not wide[:, 17:].any()
    vec = np.zeros(12, dtype)
    assert fastpe.sinusoidal_at(3, 12, out=vec) is vec
    with pytest.raises(ValueError, match="shape"):
        fastpe.sinusoidal_at(k, 12, out=np.zeros((4, 12), dtype))
    with pytest.raises(TypeError, match="dtype"):
        fastpe.sinusoidal_at(k, 12, out=out, dtype=np.float32 if dtype == F64 else F64)


def test_sinusoidal_at_thread_count_independent():
    rng = np.random.default_rng(1)
    k = np.concatenate([rng.integers(-5000, 5000, 997), rng.uniform(-5000, 5000, 97)])
    ref = fastpe.sinusoidal_at(k, 101, dtype=F64, num_threads=1)
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k, 101, dtype=F64, num_threads=2), ref)
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k, 101, dtype=F64, num_threads=3), ref)


# ---------------------------------------------------------------- add_to


def expected_add(x, positions, scale=1.0, conv="vaswani"):
    """x*scale + PE in float64, rounded once to x's dtype (what add_to promises)."""
    pe = fastpe.sinusoidal_at(positions, x.shape[-1], dtype=F64, convention=conv)
    return (x.astype(F64) * scale + pe).astype(x.dtype)


def random_x(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, F64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 22.627416997969522, -3.0, 0.0])
@pytest.mark.parametrize("d", [1, 7, 64])
def test_add_to_default_positions_bitwise(dtype, scale, d):
    x = random_x((3, 11, d), dtype)
    expect = expected_add(x, np.broadcast_to(np.arange(11), (3, 11)), scale)
    assert fastpe.add_to(x, scale=scale) is x
    np.testing.assert_array_equal(x, expect)


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_scalar_offset(dtype):
    x = random_x((2, 5, 16), dtype)
    expect = expected_add(x, np.broadcast_to(np.arange(40, 45), (2, 5)))
    fastpe.add_to(x, offset=40)
    np.testing.assert_array_equal(x, expect)


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_per_sequence_offsets_kv_cache(dtype):
    x = random_x((4, 6, 10), dtype)
    cache = np.array([0, 17, 3, 250])
    expect = expected_add(x, cache[:, None] + np.arange(6))
    fastpe.add_to(x, offset=cache)
    np.testing.assert_array_equal(x, expect)
    # offsets for a (2, 3, S, d) batch: one per sequence, broadcast from (3,) or (2, 1)
    y = random_x((2, 3, 4, 8), dtype, 1)
    off = np.array([[5, 6, 7], [8, 9, 10]])
    expect = expected_add(y, off[..., None] + np.arange(4))
    fastpe.add_to(y, offset=off)
    np.testing.assert_array_equal(y, expect)
    z = random_x((2, 3, 4, 8), dtype, 2)
    expect = expected_add(z, np.array([1, 2, 3])[None, :, None] + np.arange(4))
    fastpe.add_to(z, offset=[1, 2, 3])
    np.testing.assert_array_equal(z, expect)


def test_add_to_positions_shared_and_per_sequence():
    x = random_x((3, 5, 12), F64)
    p = np.array([4, 0, 9, 9, 2])                                   # (S,): every sequence
    expect = expected_add(x, np.broadcast_to(p, (3, 5)))
    fastpe.add_to(x, positions=p)
    np.testing.assert_array_equal(x, expect)
    y = random_x((3, 5, 12), F64, 1)
    P = np.arange(15).reshape(3, 5) * 7                             # (B, S)
    expect = expected_add(y, P + 100)
    fastpe.add_to(y, positions=P, offset=100)                      # integer positions + offset
    np.testing.assert_array_equal(y, expect)
    z = random_x((3, 5, 12), F64, 2)
    expect = expected_add(z, P + np.array([1, 2, 3])[:, None])
    fastpe.add_to(z, positions=P, offset=[1, 2, 3])
    np.testing.assert_array_equal(z, expect)


def test_add_to_packed_sequences_restart_at_zero():
    # three documents of lengths 3, 5, 2 packed into one row of 10 tokens
    lengths = [3, 5, 2]
    pos = np.concatenate([np.arange(n) for n in lengths])
    x = random_x((1, 10, 32), np.float32)
    expect = expected_add(x, pos[None])
    fastpe.add_to(x, positions=pos)
    np.testing.assert_array_equal(x, expect)
    table = fastpe.sinusoidal(5, 32, dtype=F64)
    x0 = np.zeros((10, 32))
    fastpe.add_to(x0, positions=pos)
    np.testing.assert_array_equal(x0[3:8], table)          # the second document starts at 0


def test_add_to_left_padding():
    # left-padded batch: real tokens count from 0 after the padding; padding rows
    # get any position (here 0): they are masked downstream
    pad = np.array([0, 3, 1])
    S = 6
    pos = np.maximum(np.arange(S)[None, :] - pad[:, None], 0)
    x = random_x((3, S, 16), np.float32)
    expect = expected_add(x, pos)
    fastpe.add_to(x, positions=pos)
    np.testing.assert_array_equal(x, expect)
    # the same through per-sequence negative offsets: position s - pad
    y = np.zeros((3, S, 16))
    fastpe.add_to(y, offset=-pad)
    for b in range(3):
        np.testing.assert_array_equal(y[b], fastpe.sinusoidal(S, 16, offset=-pad[b], dtype=F64))


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_float_positions(dtype):
    t = np.array([[0.5, 1.25, 999.9], [3.0, 0.0, 7.75]])
    x = random_x((2, 3, 20), dtype)
    expect = expected_add(x, t, scale=2.0, conv="diffusers")
    fastpe.add_to(x, positions=t, scale=2.0, convention="diffusers")
    np.testing.assert_array_equal(x, expect)
    with pytest.raises(ValueError, match="offset"):
        fastpe.add_to(x, positions=t, offset=3)
    with pytest.raises(ValueError, match="offset"):
        fastpe.add_to(x, positions=t, offset=[0, 1])


def test_add_to_column_slice_and_2d():
    wide = random_x((2, 9, 40), np.float32)
    before = wide.copy()
    view = wide[:, :, 8:24]
    expect = expected_add(view, np.broadcast_to(np.arange(3, 12), (2, 9)))
    assert fastpe.add_to(view, offset=3) is view
    np.testing.assert_array_equal(wide[:, :, 8:24], expect)
    np.testing.assert_array_equal(wide[:, :, :8], before[:, :, :8])
    np.testing.assert_array_equal(wide[:, :, 24:], before[:, :, 24:])
    x2 = random_x((9, 16), F64)                                   # one (S, d) sequence
    expect = expected_add(x2, np.arange(9))
    fastpe.add_to(x2)
    np.testing.assert_array_equal(x2, expect)


def test_add_to_fairseq_padding_rows_get_no_encoding():
    tokens = np.array([[1, 1, 5, 6], [7, 8, 9, 1]])
    x = random_x((2, 4, 8), F64)
    before = x.copy()
    fastpe.add_to(x, positions=fastpe.fairseq_positions(tokens), scale=2.0, convention="fairseq")
    np.testing.assert_array_equal(x[tokens == 1], 2.0 * before[tokens == 1])


@pytest.mark.parametrize("conv,d", [("tensor2tensor", 9), ("fairseq", 9), ("vaswani", 33)])
@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_shared_positions_match_the_row_by_row_path(conv, d, dtype):
    # positions shared by every sequence take a path that encodes each row once
    # for all of them; per-sequence offsets go row by row: the same bits, signs
    # of zero included
    x = random_x((5, 70, d), dtype)
    x[0, :, :] = -0.0
    x[1, 1, :] = -0.0
    for nt in (1, 2):
        a, b = x.copy(), x.copy()
        fastpe.add_to(a, convention=conv, scale=0.5, num_threads=nt)
        fastpe.add_to(b, offset=np.zeros(5, np.int64), convention=conv, scale=0.5,
                      num_threads=nt)
        assert a.tobytes() == b.tobytes()
    shared, per_seq = a, b
    table = fastpe.sinusoidal(70, d, convention=conv, dtype=F64)
    # the data does put -0.0 where the encoding is an exact zero (zero column,
    # fairseq's padding row, sin 0), the case where the paths could differ
    none = np.broadcast_to(table == 0, x.shape) & np.signbit(x)
    expect = (x.astype(F64) * 0.5 + table).astype(dtype)
    assert np.array_equal(shared, expect) and np.array_equal(per_seq, expect)
    assert none.any()


def test_add_to_thread_count_independent():
    x = random_x((3, 97, 101), np.float32)
    off = np.array([0, 1000, -77])
    results = []
    for nt in (1, 2, 3):
        y = x.copy()
        fastpe.add_to(y, offset=off, num_threads=nt)
        results.append(y)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


@pytest.mark.parametrize("make, exc, match", [
    (lambda: np.zeros((3, 8))[:, ::2], ValueError, "contiguous"),           # strided last axis
    (lambda: np.zeros((8, 3, 4)).transpose(1, 0, 2), ValueError, "stride"),  # rows not uniform
    (lambda: np.zeros((4, 8), np.float16), TypeError, "dtype"),
    (lambda: np.zeros((4, 8), np.int32), TypeError, "dtype"),
    (lambda: np.zeros((4, 8)).astype(">f8"), TypeError, "dtype"),
    (lambda: np.zeros(8), ValueError, "shape"),
    (lambda: np.zeros((4, 0)), ValueError, "d_model"),
    (lambda: np.zeros((4, 8)).tolist(), TypeError, "ndarray"),
])
def test_add_to_refuses_bad_x(make, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.add_to(make())


def test_add_to_refuses_read_only():
    x = np.zeros((4, 8))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        fastpe.add_to(x)


@pytest.mark.parametrize("kw, exc, match", [
    (dict(offset=1.5), TypeError, "offset"),
    (dict(offset=[1.5, 2.0]), TypeError, "offset"),
    (dict(offset=[1, 2, 3]), ValueError, "offset"),
    (dict(offset=[True, False]), TypeError, "offset"),
    (dict(positions=np.arange(4)), ValueError, "positions"),
    (dict(positions=[[0, 1, 2]] * 3), ValueError, "positions"),
    (dict(positions=[np.nan, 0, 1]), ValueError, "positions"),
    (dict(positions=["a", "b", "c"]), TypeError, "positions"),
    (dict(scale=np.nan), ValueError, "scale"),
    (dict(scale=10**400), ValueError, "scale"),            # OverflowError before
    (dict(scale="2"), TypeError, "scale"),
    (dict(scale=True), TypeError, "scale"),
    (dict(offset=10**15), ValueError, "positions"),
])
def test_add_to_bad_arguments_leave_x_untouched(kw, exc, match):
    x = random_x((2, 3, 8), np.float32)
    before = x.copy()
    with pytest.raises(exc, match=match):
        fastpe.add_to(x, **kw)
    np.testing.assert_array_equal(x, before)


def test_add_to_empty_x_still_checks_its_arguments():
    x = np.zeros((0, 5, 8))
    assert fastpe.add_to(x, offset=[]) is x
    with pytest.raises(TypeError, match="positions"):       # returned silently before
        fastpe.add_to(x, positions="abc")
    with pytest.raises(TypeError, match="offset"):
        fastpe.add_to(x, offset=1.5)


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("kw", [
    dict(positions=np.arange(512)),                          # (S,), broadcast to every sequence
    dict(offset=np.arange(8) * 100),                         # per-sequence offsets
    dict(positions=np.arange(512), offset=np.arange(8)),     # both
])
def test_add_to_allocates_no_temporary_the_size_of_x(kw):
    x = np.ones((8, 512, 256), np.float32)
    fastpe.add_to(x.copy(), **kw)                             # warm up (imports, caches)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base_current, _ = tracemalloc.get_traced_memory()
        fastpe.add_to(x, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    extra = peak - base_current
    assert extra < 0.05 * x.nbytes, f"peak extra {extra} bytes for x of {x.nbytes} bytes"


def test_numpy_equivalent_does_allocate_so_the_probe_works():
    # the probe sees NumPy's temporaries: table[positions] is the size of x
    x = np.ones((8, 512, 256), np.float32)
    table = fastpe.sinusoidal(512, 256)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base_current, _ = tracemalloc.get_traced_memory()
        x += table[np.broadcast_to(np.arange(512), (8, 512))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - base_current >= 0.9 * x.nbytes


# ---------------------------------------------------------------- fairseq_positions


@pytest.mark.parametrize("padding_idx", [0, 1, 2, -1])
def test_fairseq_positions_rule(padding_idx):
    rng = np.random.default_rng(padding_idx + 10)
    tokens = rng.integers(-1, 4, size=(5, 13))
    np.testing.assert_array_equal(fastpe.fairseq_positions(tokens, padding_idx),
                                  make_positions_ref(tokens, padding_idx))


def test_fairseq_positions_examples():
    tokens = [[1, 1, 7, 8, 9], [7, 8, 1, 9, 1]]
    np.testing.assert_array_equal(fastpe.fairseq_positions(tokens),
                                  [[1, 1, 2, 3, 4], [2, 3, 1, 4, 1]])
    # 1-D and 3-D token arrays count along the last axis
    np.testing.assert_array_equal(fastpe.fairseq_positions([5, 1, 5]), [2, 1, 3])
    assert fastpe.fairseq_positions(np.zeros((2, 3, 4), np.int32)).shape == (2, 3, 4)


@pytest.mark.parametrize("tokens, padding_idx, exc, match", [
    ([1.0, 2.0], 1, TypeError, "tokens"),
    ([True], 1, TypeError, "tokens"),
    (5, 1, ValueError, "tokens"),                          # 0-d gave shape (1,) before
    ([1, 2], 1.0, TypeError, "padding_idx"),
    ([1, 2], 2**63 - 1, ValueError, "padding_idx"),        # wrapped around before
    ([1, 2], 2**70, ValueError, "padding_idx"),
])
def test_fairseq_positions_bad(tokens, padding_idx, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.fairseq_positions(tokens, padding_idx)


# ---------------------------------------------------------------- sinusoidal_2d


@pytest.mark.parametrize("conv", ["mae", "timm"])
@pytest.mark.parametrize("cls_token", [False, True])
def test_2d_shapes_and_cls_row(conv, cls_token):
    P = fastpe.sinusoidal_2d(3, 5, 16, convention=conv, cls_token=cls_token)
    assert P.shape == (cls_token + 15, 16) and P.dtype == np.float32
    if cls_token:
        assert not P[0].any()
        np.testing.assert_array_equal(P[1:], fastpe.sinusoidal_2d(3, 5, 16, convention=conv))
    assert fastpe.sinusoidal_2d(3, 5, 16, convention=conv, dtype=F64).dtype == F64


def test_2d_float32_is_the_float64_table_rounded_once():
    np.testing.assert_array_equal(fastpe.sinusoidal_2d(7, 7, 64),
                                  fastpe.sinusoidal_2d(7, 7, 64, dtype=F64).astype(np.float32))


def test_2d_empty_grid():
    assert fastpe.sinusoidal_2d(0, 4, 8).shape == (0, 8)
    assert fastpe.sinusoidal_2d(0, 10**12, 8).shape == (0, 8)      # allocated a table before
    P = fastpe.sinusoidal_2d(4, 0, 8, cls_token=True)
    assert P.shape == (1, 8) and not P.any()


@pytest.mark.parametrize("kw, exc, match", [
    (dict(d_model=6), ValueError, "multiple of 4"),
    (dict(d_model=2), ValueError, "multiple of 4"),
    (dict(d_model=0), ValueError, "d_model"),
    (dict(d_model=8.0), TypeError, "d_model"),
    (dict(grid_h=-1), ValueError, "grid_h"),
    (dict(grid_w=2.5), TypeError, "grid_w"),
    (dict(convention="vaswani"), ValueError, "convention"),
    (dict(convention=None), TypeError, "convention"),
    (dict(cls_token="yes"), TypeError, "cls_token"),
    (dict(interleave_sin_cos=True), ValueError, "timm"),        # ignored before
    (dict(reverse_coord=True), ValueError, "timm"),
    (dict(base=0.0), ValueError, "base"),
    (dict(dtype=np.float16), TypeError, "dtype"),
    (dict(num_threads=0), ValueError, "num_threads"),
    (dict(grid_h=10**6, grid_w=10**6, d_model=2**20), MemoryError, "memory"),
])
def test_2d_bad_arguments(kw, exc, match):
    args = dict(grid_h=3, grid_w=4, d_model=8)
    args.update(kw)
    with pytest.raises(exc, match=match):
        fastpe.sinusoidal_2d(args.pop("grid_h"), args.pop("grid_w"), args.pop("d_model"), **args)


def test_2d_exact_entry():
    # one entry against mpmath: token (h=2, w=3) of a 4x5 grid, MAE layout, d=8
    P = fastpe.sinusoidal_2d(4, 5, 8, dtype=F64)
    row = P[2 * 5 + 3]
    # first half: [sin | cos] of w=3 at frequencies 10000^(-k/2), k < 2 (a width-4 table)
    # (absolute error of a couple of float64 ulps of 1.0, like every entry: the
    # row is its block's anchor rotated, so small entries are not relatively exact)
    for j in range(4):
        assert abs(row[j] - float(exact_entry(3, j, 4, layout="split"))) <= 5e-16
        assert abs(row[4 + j] - float(exact_entry(2, j, 4, layout="split"))) <= 5e-16
