"""Fractional (float) positions in fastpe.rope_cache and fastpe.apply_rope: the
fractional grids of vision models (EVA-02's rescaled patch grid, pixel bands on
linspace(-1, 1), DINOv3's normalised patch centres).  Angles against mpmath, float
positions holding integers against the integer positions bitwise, the rotation
against rotate_half / rotate_every_two on float64 caches, and the argument checks."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import fastpe

mpmath.mp.dps = 40

try:
    import ml_dtypes

    BF16: list = [ml_dtypes.bfloat16]
except ImportError:  # pragma: no cover
    BF16 = []

DTYPES = [np.float16, *BF16, np.float32, np.float64]
THETA = {"rope_theta": 10000.0}


def mp_cos_sin(pos, w):
    """cos and sin of each exact product pos[i] * w[j] (both float64), 40 digits."""
    c = np.empty((len(pos), len(w)))
    s = np.empty_like(c)
    for i, p in enumerate(pos):
        for j, f in enumerate(w):
            a = mpmath.mpf(float(p)) * mpmath.mpf(float(f))
            c[i, j], s[i, j] = float(mpmath.cos(a)), float(mpmath.sin(a))
    return c, s


def fractional(n, top, seed):
    rng = np.random.default_rng(seed)
    p = rng.uniform(-top, top, n)
    p[:3] = [top - 0.5, -top + 0.25, 0.5]
    return p


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_float64_angles_against_mpmath(layout):
    pos = fractional(24, 2.0**20, 1)
    w, _ = fastpe.rope_frequencies(32, THETA, precision="float64")
    c, s = fastpe.rope_cache(
        32, THETA, positions=pos, precision="float64", dtype=np.float64, layout=layout
    )
    rc, rs = mp_cos_sin(pos, w)
    if layout == "half":
        got_c, got_s = c[:, :16], s[:, :16]
        assert np.array_equal(c[:, 16:], got_c) and np.array_equal(s[:, 16:], got_s)
    else:
        got_c, got_s = c[:, 0::2], s[:, 0::2]
        assert np.array_equal(c[:, 1::2], got_c) and np.array_equal(s[:, 1::2], got_s)
    np.testing.assert_allclose(got_c, rc, rtol=0, atol=1e-15)
    np.testing.assert_allclose(got_s, rs, rtol=0, atol=1e-15)


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
def test_float64_multi_axis_angles_against_mpmath(section_layout):
    # three axes, each with its own base, positions up to 2**20 on every axis
    rules = [{"rope_theta": 10000.0}, {"rope_theta": 100.0}, {"rope_theta": 7.5}]
    sections = [4, 4, 4]
    pos = np.stack([fractional(10, 2.0**20, a) for a in range(3)], -1).astype(np.float32)
    c, s = fastpe.rope_cache(
        24,
        rules,
        positions=pos,
        sections=sections,
        section_layout=section_layout,
        precision="float64",
        dtype=np.float64,
    )
    from fastpe._rope_axes import _axis_columns  # the documented column order of each axis

    cols = _axis_columns(tuple(sections), section_layout)
    for a, rule in enumerate(rules):
        w, _ = fastpe.rope_frequencies(8, rule, precision="float64")
        rc, rs = mp_cos_sin(pos[:, a].astype(np.float64), w)
        np.testing.assert_allclose(c[:, cols[a]], rc, rtol=0, atol=1e-15)
        np.testing.assert_allclose(s[:, cols[a]], rs, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("fdtype", [np.float16, np.float32, np.float64])
def test_integer_valued_floats_give_the_integers_bitwise(dtype, layout, fdtype):
    ids = np.array([[0, 1, 2, 700, -5, 2047], [3, 3, 0, -2048, 9, 64]])
    rules = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}
    kw = dict(precision="float64", layout=layout, max_position_embeddings=512)
    ci, si = fastpe.rope_cache(64, rules, positions=ids, dtype=dtype, **kw)
    cf, sf = fastpe.rope_cache(64, rules, positions=ids.astype(fdtype), dtype=dtype, **kw)
    assert np.array_equal(ci.view(np.uint8), cf.view(np.uint8))
    assert np.array_equal(si.view(np.uint8), sf.view(np.uint8))
    # multi-axis
    grid = np.stack([ids, ids[::-1] // 3], -1)
    ka = dict(sections=[10, 6], section_layout="interleaved", layout=layout)
    ci, si = fastpe.rope_cache(32, THETA, positions=grid, dtype=dtype, **ka)
    cf, sf = fastpe.rope_cache(32, THETA, positions=grid.astype(fdtype), dtype=dtype, **ka)
    assert np.array_equal(ci.view(np.uint8), cf.view(np.uint8))
    assert np.array_equal(si.view(np.uint8), sf.view(np.uint8))
    # apply_rope, q and k (grouped-query), both paths
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 6, 64)).astype(dtype)
    k = rng.standard_normal((2, 2, 6, 64)).astype(dtype)
    qi, ki, qf, kf = q.copy(), k.copy(), q.copy(), k.copy()
    fastpe.apply_rope(qi, ki, rope_parameters=rules, positions=ids, **kw)
    fastpe.apply_rope(qf, kf, rope_parameters=rules, positions=ids.astype(fdtype), **kw)
    assert np.array_equal(qi.view(np.uint8), qf.view(np.uint8))
    assert np.array_equal(ki.view(np.uint8), kf.view(np.uint8))
    qi, qf = q[..., :32].copy(), q[..., :32].copy()
    fastpe.apply_rope(qi, positions=grid, **ka)
    fastpe.apply_rope(qf, positions=grid.astype(fdtype), **ka)
    assert np.array_equal(qi.view(np.uint8), qf.view(np.uint8))


def rotate(x, c, s, layout):
    """transformers' rotate_half / GPT-J's rotate_every_two rotation, in float64."""
    if layout == "half":
        h = x.shape[-1] // 2
        r = np.concatenate([-x[..., h:], x[..., :h]], -1)
    else:
        r = np.empty_like(x)
        r[..., 0::2], r[..., 1::2] = -x[..., 1::2], x[..., 0::2]
    return x * c + r * s


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("axes", [1, 2])
def test_apply_fractional_matches_the_rotation_by_the_caches(dtype, layout, axes):
    rng = np.random.default_rng(axes)
    seq = 9
    if axes == 1:
        pos = rng.uniform(-300, 300, (2, seq))  # one row per batch entry
        kw: dict = {}
    else:
        pos = rng.uniform(-1, 1, (seq, 2)) * 37.5  # one grid for the batch
        kw = dict(sections=[6, 10], rope_parameters=[THETA, {"rope_theta": 100.0}])
    c, s = fastpe.rope_cache(
        32, positions=pos, dtype=np.float64, precision="float64", layout=layout, **kw
    )
    q = rng.standard_normal((2, 3, seq, 40)).astype(dtype)  # 8 dims past rotary_dim
    want = q.astype(np.float64)
    cc, ss = (c[:, None], s[:, None]) if axes == 1 else (c, s)
    want[..., :32] = rotate(want[..., :32], cc, ss, layout)
    got = fastpe.apply_rope(
        q.copy(), head_dim=32, positions=pos, precision="float64", layout=layout, **kw
    )
    assert np.array_equal(got[..., 32:], q[..., 32:])
    # each entry rounded once from the float64 result: within half an ulp of q's dtype
    # (np.finfo for NumPy's types: ml_dtypes is optional, and absent in the oldest-NumPy job)
    eps = float(
        (np.finfo if dtype in (np.float16, np.float32, np.float64) else ml_dtypes.finfo)(dtype).eps
    )
    err = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 2.0**-14)
    assert err.max() <= eps * 0.5 + 1e-15


def test_fractional_positions_beside_integers_and_repeated_calls():
    # a fractional position between two integers: its own angles, not its neighbours'
    c, _ = fastpe.rope_cache(8, positions=[2.0, 2.5, 3.0], dtype=np.float64, precision="float64")
    w, _ = fastpe.rope_frequencies(8, None, precision="float64")
    np.testing.assert_allclose(c[1, :4], np.cos(2.5 * w), rtol=0, atol=2e-16)
    assert not np.array_equal(c[1], c[0]) and not np.array_equal(c[1], c[2])
    # repeated calls (planned frequencies: the small-call path declines float positions)
    pos = np.array([0.25, 1.75, 9.5])
    first = fastpe.rope_cache(8, THETA, positions=pos)
    again = fastpe.rope_cache(8, THETA, positions=pos)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    q1 = np.ones((1, 1, 3, 8), np.float32)
    q2 = q1.copy()
    fastpe.apply_rope(q1, rope_parameters=THETA, positions=pos)
    fastpe.apply_rope(q2, rope_parameters=THETA, positions=pos)
    assert np.array_equal(q1, q2)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("axes", [1, 2])
def test_nonfinite_positions_are_refused_with_nothing_written(bad, axes):
    kw: dict = {} if axes == 1 else dict(sections=[2, 2])
    pos = np.array([0.5, 1.0, bad]) if axes == 1 else np.array([[0.5, 1.0], [bad, 2.0]])
    keep = pos.copy()
    with pytest.raises(ValueError, match="positions must be finite"):
        fastpe.rope_cache(8, positions=pos, **kw)
    q = np.ones((1, 2, pos.shape[0], 8), np.float32)
    out = (np.zeros((pos.shape[0], 8)), np.zeros((pos.shape[0], 8)))
    with pytest.raises(ValueError, match="positions must be finite"):
        fastpe.rope_cache(8, positions=pos, out=out, **kw)
    with pytest.raises(ValueError, match="positions must be finite"):
        fastpe.apply_rope(q, positions=pos, **kw)
    assert np.all(q == 1) and not out[0].any() and not out[1].any()
    assert np.array_equal(pos, keep, equal_nan=True)


def test_offsets_stay_integers_and_large_fractions_are_checked():
    q = np.ones((1, 1, 2, 8), np.float32)
    with pytest.raises(TypeError, match="offset"):
        fastpe.apply_rope(q, offset=0.5)
    with pytest.raises(TypeError, match="offset"):
        fastpe.apply_rope(q, offset=np.array([1.5]))
    with pytest.raises(ValueError, match="offset"):
        fastpe.rope_cache(8, positions=[0.5], offset=2)
    with pytest.raises(ValueError, match="positions"):
        fastpe.apply_rope(q, positions=[0.5, 1e300])
    assert np.all(q == 1)


@pytest.mark.parametrize("p", [3.0, np.float32(3.0), np.array(3.0)])
def test_a_scalar_float_position_keeps_the_integer_scalars_shape(p):
    """A 0-d float position gives 0-d caches' shape (rotary_dim,), bitwise the
    integer's, as a 0-d integer position does."""
    cos, sin = fastpe.rope_cache(16, positions=p)
    icos, isin = fastpe.rope_cache(16, positions=3)
    assert cos.shape == icos.shape == (16,)
    np.testing.assert_array_equal(cos, icos)
    np.testing.assert_array_equal(sin, isin)


@pytest.mark.parametrize("axes", [1, 2])
def test_fractional_positions_do_not_depend_on_the_thread_count(axes):
    # 1001 tokens (not a multiple of the thread counts): each thread's rows read their
    # own positions
    rng = np.random.default_rng(7)
    if axes == 1:
        pos = rng.uniform(-5000, 5000, 1001)
        kw: dict = {}
    else:
        pos = rng.uniform(-1, 1, (1001, 2)) * 300
        kw = dict(sections=[12, 20], rope_parameters=[THETA, {"rope_theta": 100.0}])
    one = fastpe.rope_cache(64, positions=pos, num_threads=1, **kw)
    q = rng.standard_normal((2, 3, 1001, 64)).astype(np.float32)
    q1 = fastpe.apply_rope(q.copy(), positions=pos, num_threads=1, **kw)
    for nt in (2, 3, 4):
        many = fastpe.rope_cache(64, positions=pos, num_threads=nt, **kw)
        assert all(np.array_equal(a, b) for a, b in zip(one, many, strict=True))
        qn = fastpe.apply_rope(q.copy(), positions=pos, num_threads=nt, **kw)
        assert np.array_equal(q1, qn)
