"""sinusoidal_at (rows at arbitrary positions, fractional too) and fairseq_positions."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from conventions_ref import make_positions_ref

import fastpe

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
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(k.astype(F64), d, dtype=dtype, convention=conv), got
    )


@pytest.mark.parametrize(
    "int_dtype", [np.int8, np.int16, np.int32, np.uint16, np.uint64, np.int64]
)
def test_every_integer_dtype(int_dtype):
    k = np.array([0, 3, 100], dtype=int_dtype)
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(k, 16), fastpe.sinusoidal(101, 16)[[0, 3, 100]]
    )


def test_scalar_and_0d_positions_give_a_vector():
    row = fastpe.sinusoidal(8, 10)[7]
    for k in (7, np.int64(7), np.array(7), 7.0, np.float32(7.0)):
        got = fastpe.sinusoidal_at(k, 10)
        assert got.shape == (10,)
        np.testing.assert_array_equal(got, row)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4, 2)])
def test_empty_positions(shape):
    got = fastpe.sinusoidal_at(np.zeros(shape, np.int64), 6)
    assert got.shape == (*shape, 6) and got.dtype == np.float32


def test_lists_and_negative_and_noncontiguous_positions():
    P = fastpe.sinusoidal(41, 8, offset=-20, dtype=F64)
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at([[-20, 0], [5, 20]], 8, dtype=F64), P[[[0, 20], [25, 40]]]
    )
    k = np.arange(-20, 21)[::-3]
    np.testing.assert_array_equal(fastpe.sinusoidal_at(k, 8, dtype=F64), P[k + 20])
    big = np.arange(-20, 21).reshape(1, -1).T[::2, 0]  # a strided view
    np.testing.assert_array_equal(fastpe.sinusoidal_at(big, 8, dtype=F64), P[big + 20])


# float positions: within 1e-15 of mpmath at the float64 value of the position ...
FLOAT_POSITIONS = [
    0.5,
    0.1,
    1e-9,
    3.25,
    999.999,
    12345.678,
    65535.5,
    1e5 + 0.3,
    -7.77,
    2.0**-30,
    0.3333333333333333,
]


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
        delta = abs(mpmath.mpf(text) - mpmath.mpf(k))  # the position's own rounding
        for j in range(d):
            i = j // 2
            w = mpmath.power(10000, -mpmath.mpf(2 * i) / d)
            x = mpmath.mpf(text) * w
            e = mpmath.sin(x) if j % 2 == 0 else mpmath.cos(x)
            err = abs(mpmath.mpf(float(got[j])) - e)
            assert err <= 1e-15 + delta * w, (j, float(err), float(delta * w))


def test_float32_positions_are_used_exactly():
    k = np.float32(0.1)  # 0.100000001490116...
    got = fastpe.sinusoidal_at(k, 4, dtype=F64)
    with mpmath.workdps(40):
        np.testing.assert_allclose(got[0], float(mpmath.sin(mpmath.mpf(float(k)))), atol=1e-16)


@pytest.mark.parametrize(
    "bad, exc",
    [
        ([np.nan], ValueError),
        ([1.0, np.inf], ValueError),
        (-np.inf, ValueError),
        ([True, False], TypeError),
        (np.array([1], dtype=object), TypeError),
        ([1 + 2j], TypeError),
        (["3"], TypeError),
        (None, TypeError),
        ([[1], [1, 2]], TypeError),
        (np.array(["2020"], "M8[s]"), TypeError),
        (np.array([3], "m8[s]"), TypeError),
        (np.array([2**64 - 1], np.uint64), ValueError),
        ([1e300], ValueError),
        ([2**62], ValueError),
    ],
)
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
    wide = np.zeros((4, 30), dtype)  # rows strided: column window
    fastpe.sinusoidal_at(np.arange(4), 12, out=wide[:, 5:17])
    np.testing.assert_array_equal(wide[:, 5:17], fastpe.sinusoidal(4, 12, dtype=dtype))
    assert not wide[:, :5].any() and not wide[:, 17:].any()
    vec = np.zeros(12, dtype)
    assert fastpe.sinusoidal_at(3, 12, out=vec) is vec
    with pytest.raises(ValueError, match="shape"):
        fastpe.sinusoidal_at(k, 12, out=np.zeros((4, 12), dtype))
    with pytest.raises(TypeError, match="dtype"):
        fastpe.sinusoidal_at(k, 12, out=out, dtype=np.float32 if dtype == F64 else F64)


# ---------------------------------------------------------------- fairseq_positions


@pytest.mark.parametrize("padding_idx", [0, 1, 2, -1])
def test_fairseq_positions_rule(padding_idx):
    rng = np.random.default_rng(padding_idx + 10)
    tokens = rng.integers(-1, 4, size=(5, 13))
    np.testing.assert_array_equal(
        fastpe.fairseq_positions(tokens, padding_idx), make_positions_ref(tokens, padding_idx)
    )


def test_fairseq_positions_examples():
    tokens = [[1, 1, 7, 8, 9], [7, 8, 1, 9, 1]]
    np.testing.assert_array_equal(
        fastpe.fairseq_positions(tokens), [[1, 1, 2, 3, 4], [2, 3, 1, 4, 1]]
    )
    # 1-D and 3-D token arrays count along the last axis
    np.testing.assert_array_equal(fastpe.fairseq_positions([5, 1, 5]), [2, 1, 3])
    assert fastpe.fairseq_positions(np.zeros((2, 3, 4), np.int32)).shape == (2, 3, 4)


@pytest.mark.parametrize(
    "tokens, padding_idx, exc, match",
    [
        ([1.0, 2.0], 1, TypeError, "tokens"),
        ([True], 1, TypeError, "tokens"),
        (5, 1, ValueError, "tokens"),  # 0-d gave shape (1,) before
        ([1, 2], 1.0, TypeError, "padding_idx"),
        ([1, 2], 2**63 - 1, ValueError, "padding_idx"),  # wrapped around before
        ([1, 2], 2**70, ValueError, "padding_idx"),
    ],
)
def test_fairseq_positions_bad(tokens, padding_idx, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.fairseq_positions(tokens, padding_idx)
