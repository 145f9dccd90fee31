"""Accuracy of fastpe.sinusoidal against mpmath at high precision.

Contract: float64 entries are never worse than the NumPy float64 formula and
within 1e-15 of the exact value for positions below 2^24 and widths
up to 8192; float32 entries are within 2^-24 and almost always correctly rounded.
"""

import numpy as np
import pytest
from truth import SEED_TABLE, abs_errors, exact_values

import fastpe

BASES = [10000.0, 100.0, 2.0, 1e6, 0.5]


def test_seed_worked_table():
    P = fastpe.sinusoidal(4, 4, base=100, dtype=np.float64)
    np.testing.assert_allclose(P, SEED_TABLE, atol=5e-9, rtol=0)
    P32 = fastpe.sinusoidal(4, 4, base=100)
    assert P32.dtype == np.float32
    np.testing.assert_allclose(P32, SEED_TABLE, atol=6e-8, rtol=0)


def _sample(rng, seq_len, d_model, n):
    return rng.integers(0, seq_len, n), rng.integers(0, d_model, n)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("layout", ["interleaved", "split"])
def test_float64_never_worse_than_numpy(rng, base, layout):
    """Over a grid of widths 1..4096 and positions 0..2^20 (a table from 0 and one
    at an offset), fastpe's max error is at most NumPy's, and at most 1e-15.

    (Entry by entry, NumPy's libm can be closer at small exact angles -- e.g.
    sin(k) in column 0 is correctly rounded there -- while fastpe's error is a
    few units of 2^-53 everywhere; NumPy's grows like k * 2^-53.)"""
    seq_len = 300
    err, err_np = [], []
    for d_model in (1, 2, 3, 64, 511, 4096):
        for offset in (0, 2**20 - seq_len):
            P = fastpe.sinusoidal(
                seq_len, d_model, base=base, offset=offset, dtype=np.float64, layout=layout
            )
            R = fastpe.reference(seq_len, d_model, base=base, offset=offset, layout=layout)
            rows, cols = _sample(rng, seq_len, d_model, 100)
            exact = exact_values(rows + offset, cols, d_model, base=base, layout=layout)
            err.append(abs_errors(P[rows, cols], exact).max())
            err_np.append(abs_errors(R[rows, cols], exact).max())
    assert max(err) <= max(err_np), (err, err_np)
    assert max(err) <= 1e-15, err


def test_float64_long_table_to_2_20(rng):
    """Positions up to 2^20 reached by a long table (not only by offset)."""
    seq_len, d_model = 2**20, 16
    P = fastpe.sinusoidal(seq_len, d_model, dtype=np.float64)
    rows = np.concatenate([rng.integers(0, seq_len, 400), np.arange(seq_len - 50, seq_len)])
    cols = rng.integers(0, d_model, rows.size)
    exact = exact_values(rows, cols, d_model)
    assert abs_errors(P[rows, cols], exact).max() <= 1e-15


@pytest.mark.parametrize("d_model", [8192, 1000, 7])
def test_float64_within_1e15_below_2_24(rng, d_model):
    """The float64 bound: <= 1e-15 for every position below 2^24, widths up to 8192."""
    offsets = [0, 2**12, 2**18 + 11, 2**24 - 64]
    errs = []
    for off in offsets:
        P = fastpe.sinusoidal(64, d_model, offset=off, dtype=np.float64)
        rows, cols = _sample(rng, 64, d_model, 300)
        exact = exact_values(rows + off, cols, d_model)
        errs.append(abs_errors(P[rows, cols], exact).max())
    assert max(errs) <= 1e-15, errs


@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_float32_within_2_pow_minus_24(rng, base):
    d_model = 256
    for off in [0, 2**16, 2**20 - 64]:
        P = fastpe.sinusoidal(64, d_model, offset=off, base=base)
        rows, cols = _sample(rng, 64, d_model, 600)
        exact = exact_values(rows + off, cols, d_model, base=base)
        assert abs_errors(P[rows, cols], exact).max() <= 2.0**-24


def test_float32_correctly_rounded(rng):
    """>= 99.999% of sampled float32 entries equal the correctly rounded value.
    (The exact value is rounded by mpmath -> float64 -> float32; the double
    rounding can only matter within 2^-53 relative of a float32 tie, and such
    samples are counted as correct either way below.)"""
    import mpmath

    n_total = 0
    n_wrong = 0
    for d_model, off in [(512, 0), (1024, 2**20), (64, 2**23), (4096, 12345)]:
        P = fastpe.sinusoidal(128, d_model, offset=off)
        rows, cols = _sample(rng, 128, d_model, 5000)
        exact = exact_values(rows + off, cols, d_model, dps=30)
        for v, e in zip(P[rows, cols], exact, strict=False):
            n_total += 1
            lo = np.float32(float(e))
            if v == lo:
                continue
            # v differs from the float64-then-float32 rounding: is it a near-tie?
            ulp = float(np.spacing(np.float32(abs(float(e)))))
            frac = abs(float((e - mpmath.mpf(float(lo))) / ulp))
            if abs(frac - 0.5) > 1e-6:
                n_wrong += 1
    assert n_total == 20000
    assert n_wrong / n_total <= 1e-5, n_wrong


def test_huge_offset_still_exact(rng):
    """Far beyond where float64 angles fail: position ~1e12."""
    off = 10**12
    P = fastpe.sinusoidal(8, 64, offset=off, dtype=np.float64)
    rows, cols = _sample(rng, 8, 64, 200)
    exact = exact_values(rows + off, cols, 64)
    assert abs_errors(P[rows, cols], exact).max() <= 1e-15
