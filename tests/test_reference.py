"""The NumPy reference is only an oracle if it is itself right: check it against
the seed's worked table and against mpmath."""

import numpy as np
import pytest
from truth import SEED_TABLE, abs_errors, exact_values

import fastpe


def test_reference_matches_seed_table():
    np.testing.assert_allclose(fastpe.reference(4, 4, base=100), SEED_TABLE, atol=5e-9, rtol=0)


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d_model", [1, 2, 5, 16, 33])
def test_reference_matches_mpmath(layout, d_model):
    P = fastpe.reference(50, d_model, offset=3, layout=layout)
    k, j = np.meshgrid(np.arange(50), np.arange(d_model), indexing="ij")
    exact = exact_values(k.ravel() + 3, j.ravel(), d_model, layout=layout)
    assert abs_errors(P.ravel(), exact).max() < 1e-14


def test_reference_dtype_and_empty():
    assert fastpe.reference(3, 4, dtype=np.float32).dtype == np.float32
    assert fastpe.reference(0, 7).shape == (0, 7)


def test_reference_validates_like_the_api():
    with pytest.raises(ValueError, match="seq_len"):
        fastpe.reference(-1, 4)
    with pytest.raises(ValueError, match="layout"):
        fastpe.reference(2, 4, layout="zigzag")
