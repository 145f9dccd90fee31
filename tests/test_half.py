"""float16 and bfloat16 outputs: every entry the correct rounding of the exact
value, rounded once (never a rounding of a float32 rounding).

The truths here are independent of fastpe's conversion: the halfway points
between consecutive 16-bit values and their neighbours, whose correct rounding
is known by construction; NumPy's float64 -> float16 cast (rounded once, from
the double); a bfloat16 rounding of the float64 bits written below; mpmath.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from truth import exact_entry

import fastpe
from fastpe import kernel

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

# (name, bfloat16?, largest finite bits, value of the pattern after it: the
# overflow threshold's other side)
FORMATS = [("float16", False, 0x7BFF, 2.0**16), ("bfloat16", True, 0x7F7F, 2.0**128)]


def _values(bits, bf):
    """The float64 values of 16-bit patterns (finite ones)."""
    bits = np.asarray(bits, np.uint16)
    if bf:
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.view(np.float16).astype(np.float64)


def _round(x, bf):
    out = np.empty(x.size, np.uint16)
    kernel.round_to_half(np.ascontiguousarray(x, np.float64).ravel(), out, bf)
    return out


@pytest.mark.parametrize("name,bf,top,beyond", FORMATS)
def test_every_halfway_point_and_its_neighbours(name, bf, top, beyond):
    # a < b consecutive (bits i, i+1), both signs, subnormals and the overflow
    # threshold included: the midpoint goes to the even pattern, anything
    # above it (by one double ulp, or by far less than a float ulp) to b,
    # anything below to a; a and b themselves are exact
    lo = np.arange(0, top + 1, dtype=np.uint32)
    a = _values(lo, bf)
    b = np.append(a[1:], beyond)
    mid = (a + b) / 2  # exact in double
    even_is_b = (lo & 1) == 1
    for sign in (1.0, -1.0):
        sb = np.uint16(0x8000 if sign < 0 else 0)
        bits_a = lo.astype(np.uint16) | sb
        bits_b = (lo + 1).astype(np.uint16) | sb
        cases = [
            (a, bits_a),
            (mid, np.where(even_is_b, bits_b, bits_a)),
            (np.nextafter(mid, np.inf), bits_b),
            (np.nextafter(mid, -np.inf), bits_a),
            (mid * (1 + 2.0**-40), bits_b),  # within a float ulp of the midpoint
            (mid * (1 - 2.0**-40), bits_a),
        ]
        for x, want in cases:
            got = _round(sign * x, bf)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (name, sign, x[bad[:3]], got[bad[:3]], want[bad[:3]])


@pytest.mark.parametrize("name,bf,top,beyond", FORMATS)
def test_special_values(name, bf, top, beyond):
    inf, nan = (0x7F80, 0x7FC0) if bf else (0x7C00, 0x7E00)
    x = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e300, -1e300, 1e-300, -1e-300])
    want = [inf, inf | 0x8000, nan, nan | 0x8000, 0, 0x8000, inf, inf | 0x8000, 0, 0x8000]
    assert _round(x, bf).tolist() == want


def test_float16_agrees_with_numpy_on_random_doubles():
    rng = np.random.default_rng(5)
    x = np.concatenate(
        [
            rng.standard_normal(200_000) * 10.0 ** rng.integers(-9, 6, 200_000),
            rng.uniform(-1, 1, 100_000),
        ]
    )
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(_round(x, False), want)


def _bf16_reference(x):
    """float64 -> bfloat16 rounded to nearest even from the double's own bits:
    normal range: keep sign, exponent and 7 mantissa bits, round on the 45 bits
    below; below 2^-126: the nearest multiple of 2^-133 (the subnormal grid), ties
    to even (np.rint of an exact scaling)."""
    x = np.ascontiguousarray(x, np.float64)
    u = x.view(np.uint64)
    r = (u + np.uint64(2**44 - 1) + ((u >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)
    out = (r << np.uint64(45)).view(np.float64)
    tiny = np.abs(x) < 2.0**-126
    out[tiny] = np.rint(x[tiny] * 2.0**133) * 2.0**-133
    return out


def _tables(dtype, **kw):
    cases = [
        dict(seq_len=700, d_model=130, offset=-40),
        dict(seq_len=300, d_model=1024, offset=355 - 150),  # sin(355) ~ -3e-5: subnormal half
        dict(seq_len=300, d_model=64, base=1e6),  # sin(k * 1e-6): subnormal halves near 0
        dict(seq_len=200, d_model=33, layout="split", offset=10**6),
        dict(seq_len=100, d_model=48, convention="tensor2tensor"),
        # lowest frequency ~1e-40: float-subnormal sines, bfloat16 subnormals (which
        # AVX512_BF16's conversion would flush to zero)
        dict(seq_len=1000, d_model=64, base=2e41),
    ]
    for c in cases:
        yield (
            c,
            fastpe.sinusoidal(dtype=dtype, **c, **kw),
            fastpe.sinusoidal(dtype=np.float64, **c),
        )


# the AVX-512 writers with AVX512_BF16's conversion (where the CPU has it), with
# their integer rounding, and the portable loops
@pytest.mark.parametrize("avx512, bf16hw", [(True, True), (True, False), (False, False)])
def test_tables_are_the_float64_table_rounded_once(avx512, bf16hw):
    old = kernel._set_avx512_writers(avx512)
    kernel._set_avx512_bf16(bf16hw)
    try:
        for c, t16, t64 in _tables(np.float16):
            assert np.array_equal(t16.view(np.uint16), t64.astype(np.float16).view(np.uint16)), c
        for c, tb, t64 in _tables(BF16):
            assert tb.dtype == BF16
            assert np.array_equal(tb.astype(np.float64), _bf16_reference(t64)), c
    finally:
        kernel._set_avx512_writers(old)


@pytest.mark.parametrize("avx512, bf16hw", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("dtype, tie", [(np.float16, 2.0**-25), ("bfloat16", 2.0**-134)])
def test_entries_just_above_a_halfway_point_round_up(avx512, bf16hw, dtype, tie):
    # sin(k * w) = k * w for these tiny w: just above the halfway points of the
    # smallest subnormals, by far less than a float's precision, so a conversion
    # that loses the bits below float (a double rounding) lands on the tie instead
    dtype = np.dtype(dtype) if dtype == np.float16 else BF16
    w = np.full(64, tie) * (1 + 2.0**-30 * np.arange(1, 65))
    pos = np.arange(1, 40)
    kw = dict(inv_freq=w, positions=pos, dtype=np.float64)
    _, s64 = fastpe.rope_cache(128, **kw)
    old = kernel._set_avx512_writers(avx512)
    kernel._set_avx512_bf16(bf16hw)
    try:
        _, s = fastpe.rope_cache(128, **{**kw, "dtype": dtype})
    finally:
        kernel._set_avx512_writers(old)
    want = _bf16_reference(s64) if dtype == BF16 else s64.astype(np.float16).astype(np.float64)
    assert np.array_equal(s.astype(np.float64), want)
    # the trap is there: rounding through float32 first gets some entries wrong
    assert (s64.astype(np.float32).astype(dtype).astype(np.float64) != want).sum() > 100


def test_subnormal_and_zero_crossing_entries_are_exercised():
    t = fastpe.sinusoidal(300, 64, base=1e6, dtype=np.float16)
    v = np.abs(t.astype(np.float64))
    assert ((v > 0) & (v < 2.0**-14)).sum() > 10
    b = fastpe.sinusoidal(1000, 64, base=2e41, dtype=BF16).view(np.uint16)
    assert (((b & 0x7F80) == 0) & ((b & 0x7FFF) != 0)).sum() > 100


def _correct(entries, exact, dtype):
    """Whether each entry is the value nearest the exact one (mpf)."""
    ok = []
    for v, e in zip(entries, exact, strict=True):
        v = float(v)
        if dtype == BF16:
            bits = int(np.array(v, np.float32).view(np.uint32)) >> 16
            lo, hi = _values([bits - 1], True)[0], _values([bits + 1], True)[0]
        else:
            lo, hi = (float(np.nextafter(np.float16(v), np.float16(s))) for s in (-np.inf, np.inf))
        err = abs(mpmath.mpf(v) - e)
        ok.append(err <= abs(mpmath.mpf(lo) - e) and err <= abs(mpmath.mpf(hi) - e))
    return np.array(ok)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_entries_against_mpmath(dtype):
    rng = np.random.default_rng(11)
    S, D, off = 4000, 96, 12345
    t = fastpe.sinusoidal(S, D, offset=off, dtype=dtype)
    ks, js = rng.integers(0, S, 600), rng.integers(0, D, 600)
    exact = [exact_entry(off + int(k), int(j), D) for k, j in zip(ks, js, strict=True)]
    ok = _correct(t[ks, js], exact, np.dtype(dtype))
    assert ok.mean() >= 0.99999, np.flatnonzero(~ok)[:5]


def test_add_to_rounds_once_from_double():
    rng = np.random.default_rng(3)
    for dtype, ref in ((np.float16, lambda v: v.astype(np.float16)), (BF16, _bf16_reference)):
        x = rng.standard_normal((3, 50, 40)).astype(dtype)
        x0 = x.astype(np.float64)
        fastpe.add_to(x, offset=7, scale=0.75)
        want = x0 * 0.75 + fastpe.sinusoidal(50, 40, offset=7, dtype=np.float64)
        assert np.array_equal(x.astype(np.float64), np.asarray(ref(want), np.float64))


def test_add_to_half_special_values():
    x = np.array([[np.inf, -np.inf, np.nan, 65504.0]], np.float16)
    fastpe.add_to(x, scale=1.0)
    assert np.isposinf(x[0, 0]) and np.isneginf(x[0, 1]) and np.isnan(x[0, 2])
    assert x[0, 3] == 65504  # 65504 + cos(0): below the overflow threshold 65520
    y = np.array([[40000.0, -40000.0]], np.float16)
    fastpe.add_to(y, scale=2.0)  # beyond it: inf, as rounding to nearest says
    assert np.isposinf(y[0, 0]) and np.isneginf(y[0, 1])


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_every_public_function_takes_the_16_bit_types(dtype):
    dt = np.dtype(np.float16) if dtype is np.float16 else BF16
    assert fastpe.sinusoidal(5, 8, dtype=dtype).dtype == dt
    assert fastpe.sinusoidal_at([0.5, 3], 8, dtype=dtype).dtype == dt
    assert fastpe.sinusoidal_2d(3, 4, 16, dtype=dtype).dtype == dt
    cos, sin = fastpe.rope_cache(16, seq_len=5, dtype=dtype)
    assert cos.dtype == sin.dtype == dt
    out = np.zeros((5, 8), dt)
    assert fastpe.sinusoidal(5, 8, out=out) is out
    want = fastpe.sinusoidal(5, 8, dtype=dtype)
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))
    t2d = fastpe.sinusoidal_2d(3, 4, 16, dtype=dtype).astype(np.float64)
    ref = fastpe.sinusoidal_2d(3, 4, 16, dtype=np.float64)
    assert np.array_equal(t2d, fastpe.sinusoidal_2d(3, 4, 16, dtype=dtype).astype(np.float64))
    assert np.max(np.abs(t2d - ref)) <= 2.0**-8


def test_rope_cache_with_attention_factor_rounds_once():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    c64, s64 = fastpe.rope_cache(64, params, seq_len=50, dtype=np.float64)
    c16, s16 = fastpe.rope_cache(64, params, seq_len=50, dtype=np.float16)
    cb, sb = fastpe.rope_cache(64, params, seq_len=50, dtype="bfloat16")
    assert np.array_equal(c16, c64.astype(np.float16))
    assert np.array_equal(s16, s64.astype(np.float16))
    assert np.array_equal(cb.astype(np.float64), _bf16_reference(c64))
    assert np.array_equal(sb.astype(np.float64), _bf16_reference(s64))


def test_torch_16_bit_tensors_filled_in_place():
    torch = pytest.importorskip("torch")
    t = torch.empty(5, 8, dtype=torch.float16)
    assert fastpe.sinusoidal(5, 8, out=t) is t
    assert np.array_equal(t.numpy(), fastpe.sinusoidal(5, 8, dtype=np.float16))
    b = torch.empty(5, 8, dtype=torch.bfloat16)
    assert fastpe.sinusoidal(5, 8, out=b, dtype="bfloat16") is b
    want = fastpe.sinusoidal(5, 8, dtype="bfloat16").view(np.uint16)
    assert np.array_equal(b.view(torch.int16).numpy().view(np.uint16), want)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    "where", [dict(offset=100000), dict(offset=np.array([3, 70000])), dict(positions=[5, 0, 9])]
)
def test_apply_rope_rotates_16_bit_q_and_k_rounding_once(rng, layout, where):
    """float16/bfloat16 q and k rotated in place: each entry the rounding of the
    float64 rotation of the same (exactly widened) values, once."""
    q0 = rng.standard_normal((2, 4, 3, 64))
    k0 = rng.standard_normal((2, 2, 3, 64))
    kw = dict(rope_parameters={"rope_type": "linear", "factor": 2.0}, layout=layout, **where)
    for dtype, round_ in ((np.float16, lambda x: x.astype(np.float16)), (BF16, None)):
        q, k = q0.astype(dtype), k0.astype(dtype)
        wq, wk = fastpe.apply_rope(q.astype(np.float64), k.astype(np.float64), **kw)
        assert fastpe.apply_rope(q, k, **kw) == (q, k)
        for got, want in ((q, wq), (k, wk)):
            if round_ is not None:
                assert np.array_equal(got.view(np.uint16), round_(want).view(np.uint16))
            else:
                assert np.array_equal(got.astype(np.float64), _bf16_reference(want))


def test_apply_rope_16_bit_small_call_path_is_the_general_one(rng):
    q0 = rng.standard_normal((1, 8, 1, 128)).astype(np.float16)
    fastpe.apply_rope(q0.copy(), offset=7)  # plans the default rule
    args = [None, None, 12345, None, -2, "half", None, "float32", None, None, None]
    fast = q0.copy()
    assert kernel.rope_apply(fast, None, *args) is not None
    general = fastpe.apply_rope(q0.copy(), offset=np.int64(12345))
    assert np.array_equal(fast.view(np.uint16), general.view(np.uint16))


def test_apply_rope_torch_16_bit_tensors_in_place():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((1, 4, 3, 32))
    for tdt, dtype in ((torch.float16, np.float16), (torch.bfloat16, BF16)):
        t = torch.from_numpy(x).to(tdt)
        want = fastpe.apply_rope(t.to(torch.float32).numpy().astype(dtype), offset=1000)
        assert fastpe.apply_rope(t, offset=1000) is t
        assert np.array_equal(t.view(torch.int16).numpy().view(np.uint16), want.view(np.uint16))
