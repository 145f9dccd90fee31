"""sinusoidal_2d: the 2-D grid encodings of MAE and timm."""

from __future__ import annotations

import numpy as np
import pytest
from truth import exact_entry

import fastpe

F64 = np.float64

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
    np.testing.assert_array_equal(
        fastpe.sinusoidal_2d(7, 7, 64),
        fastpe.sinusoidal_2d(7, 7, 64, dtype=F64).astype(np.float32),
    )


def test_2d_empty_grid():
    assert fastpe.sinusoidal_2d(0, 4, 8).shape == (0, 8)
    assert fastpe.sinusoidal_2d(0, 10**12, 8).shape == (0, 8)  # allocated a table before
    P = fastpe.sinusoidal_2d(4, 0, 8, cls_token=True)
    assert P.shape == (1, 8) and not P.any()


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(d_model=6), ValueError, "multiple of 4"),
        (dict(d_model=2), ValueError, "multiple of 4"),
        (dict(d_model=0), ValueError, "d_model"),
        (dict(d_model=8.0), TypeError, "d_model"),
        (dict(grid_h=-1), ValueError, "grid_h"),
        (dict(grid_w=2.5), TypeError, "grid_w"),
        (dict(convention="vaswani"), ValueError, "convention"),
        (dict(convention=None), TypeError, "convention"),
        (dict(cls_token="yes"), TypeError, "cls_token"),
        (dict(interleave_sin_cos=True), ValueError, "timm"),  # ignored before
        (dict(reverse_coord=True), ValueError, "timm"),
        (dict(base=0.0), ValueError, "base"),
        (dict(dtype=np.complex64), TypeError, "dtype"),
        (dict(num_threads=0), ValueError, "num_threads"),
        (dict(grid_h=10**6, grid_w=10**6, d_model=2**20), MemoryError, "memory"),
    ],
)
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
