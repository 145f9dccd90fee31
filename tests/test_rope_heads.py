"""Per-head frequencies, mixed axes (RoPE-Mixed) and xPos in rope_cache and apply_rope.

The truths: a per-head rotation equals, bit for bit, one 1-axis call per head with that
head's frequencies; a mixed-axes angle is the exact sum of each axis's exact angle
(against mpmath); xPos multiplies each rotated pair of q by ``zeta_i ** power`` and of
k by its inverse (a float64 NumPy rotation written here)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpe

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None


@pytest.fixture(autouse=True)
def _keep_rope_plans():
    """The 1-axis reference calls plan their frequencies; put the plans back."""
    saved = [(d, dict(d)) for d in (fastpe.kernel.rope_args,)]
    yield
    for d, was in saved:
        d.clear()
        d.update(was)


def bits(x):
    return np.ascontiguousarray(x).view(np.uint8)


def head_freqs(rng, heads, nf):
    """Distinct per-head bands, as a trained model's would be."""
    base = 10000.0 ** (-np.arange(nf) / nf)
    return base[None] * rng.uniform(0.5, 2.0, size=(heads, 1))


def rotate_ref(x, cos, sin, half=True):
    """x rotated in float64 by cos/sin broadcastable to x[..., :nf]."""
    x = x.astype(np.float64)
    nf = cos.shape[-1]
    out = x.copy()
    if half:
        x1, x2 = x[..., :nf], x[..., nf : 2 * nf]
        out[..., :nf] = x1 * cos - x2 * sin
        out[..., nf : 2 * nf] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., 0 : 2 * nf : 2], x[..., 1 : 2 * nf : 2]
        out[..., 0 : 2 * nf : 2] = x1 * cos - x2 * sin
        out[..., 1 : 2 * nf : 2] = x2 * cos + x1 * sin
    return out


DTYPES = ["float64", "float32", "float16"] + (["bfloat16"] if BF16 is not None else [])


# ------------------------------------------------------------------ per-head frequencies


@settings(max_examples=40, deadline=None)
@given(
    heads=st.integers(1, 5),
    nf=st.integers(1, 9),
    extra=st.integers(0, 3),
    seq=st.integers(1, 13),
    batch=st.integers(1, 3),
    first=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    layout=st.sampled_from(["half", "interleaved"]),
    where=st.sampled_from(["offset", "offsets", "positions", "batch positions"]),
    with_k=st.booleans(),
    threads=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**16),
)
def test_per_head_equals_one_call_per_head(
    heads, nf, extra, seq, batch, first, dtype, layout, where, with_k, threads, seed
):
    rng = np.random.default_rng(seed)
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    w = head_freqs(rng, heads, nf)
    d = 2 * nf + extra
    shape = (batch, seq, heads, d) if first else (batch, heads, seq, d)
    sa = 1 if first else 2
    q = rng.standard_normal(shape).astype(dt)
    k = rng.standard_normal(shape).astype(dt)
    kw = {
        "offset": {"offset": int(rng.integers(-(2**30), 2**30))},
        "offsets": {"offset": rng.integers(0, 2**20, size=batch)},
        "positions": {"positions": rng.integers(-(2**20), 2**20, size=seq)},
        "batch positions": {"positions": rng.integers(0, 2**20, size=(batch, seq))},
    }[where]
    q1, k1 = q.copy(), k.copy()
    fastpe.apply_rope(
        q1, k1 if with_k else None, inv_freq=w, seq_axis=sa, layout=layout,
        num_threads=threads, **kw,
    )  # fmt: skip
    hax = 2 if first else 1
    for h in range(heads):
        qh, kh = np.take(q, h, axis=hax).copy(), np.take(k, h, axis=hax).copy()
        fastpe.apply_rope(
            qh, kh if with_k else None, inv_freq=w[h], seq_axis=sa - (0 if first else 1),
            layout=layout, **kw,
        )  # fmt: skip
        assert np.array_equal(bits(np.take(q1, h, axis=hax)), bits(qh)), h
        if with_k:
            assert np.array_equal(bits(np.take(k1, h, axis=hax)), bits(kh)), h
    if not with_k:
        assert np.array_equal(bits(k1), bits(k))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_per_head_cache_equals_one_cache_per_head(dtype, layout):
    rng = np.random.default_rng(4)
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    w = head_freqs(rng, 3, 8)
    pos = rng.integers(-(2**20), 2**20, size=(2, 5))
    cos, sin = fastpe.rope_cache(16, inv_freq=w, positions=pos, layout=layout, dtype=dt)
    assert cos.shape == sin.shape == (3, 2, 5, 16) and cos.dtype == dt
    for h in range(3):
        c1, s1 = fastpe.rope_cache(16, inv_freq=w[h], positions=pos, layout=layout, dtype=dt)
        assert np.array_equal(bits(cos[h]), bits(c1)) and np.array_equal(bits(sin[h]), bits(s1))
    one, _ = fastpe.rope_cache(16, inv_freq=w[:1], seq_len=7)
    assert one.shape == (1, 7, 16)  # (a heads axis of one)
    c2, _ = fastpe.rope_cache(16, inv_freq=w, seq_len=7, offset=3)
    assert c2.shape == (3, 7, 16)
    assert np.array_equal(c2[1], fastpe.rope_cache(16, inv_freq=w[1], seq_len=7, offset=3)[0])


def test_per_head_vs_float64_numpy():
    """Independent values: each head rotated by NumPy's cos/sin of its own angles
    (exact: the frequencies are powers of two, the positions small)."""
    rng = np.random.default_rng(9)
    w = 2.0 ** -rng.integers(0, 12, size=(4, 6)).astype(np.float64)
    q = rng.standard_normal((2, 4, 10, 12))
    q1 = q.copy()
    fastpe.apply_rope(q1, inv_freq=w, offset=7)
    ang = (7 + np.arange(10))[None, :, None] * w[:, None, :]  # (heads, seq, nf)
    ref = rotate_ref(q, np.cos(ang), np.sin(ang))
    assert np.max(np.abs(q1 - ref)) <= 4e-16 * np.max(np.abs(q))


def test_negative_frequencies_turn_the_other_way():
    """A learned frequency may be negative: the angle of -w at p is that of w at -p."""
    rng = np.random.default_rng(7)
    w = head_freqs(rng, 3, 4)
    sign = np.where(rng.random(w.shape) < 0.5, -1.0, 1.0)
    q = rng.standard_normal((1, 3, 6, 8))
    q1, q2 = q.copy(), q.copy()
    p = rng.integers(0, 2**20, size=6)
    fastpe.apply_rope(q1, inv_freq=w * sign, positions=p)
    for h in range(3):
        for i in range(4):
            one = q2[:, h][..., [i, 4 + i]].copy()
            pp = p if sign[h, i] > 0 else -p
            fastpe.apply_rope(one, inv_freq=w[h, i : i + 1], positions=pp)
            q2[:, h, :, i], q2[:, h, :, 4 + i] = one[..., 0], one[..., 1]
    assert np.array_equal(q1, q2)


def test_per_head_3d_heads_first():
    """(heads, seq, head_dim) without a batch axis: axis 0 is the heads."""
    rng = np.random.default_rng(2)
    w = head_freqs(rng, 3, 4)
    q = rng.standard_normal((3, 6, 8))
    q1 = q.copy()
    fastpe.apply_rope(q1, inv_freq=w, positions=np.arange(6) * 5)
    for h in range(3):
        qh = q[h].copy()
        fastpe.apply_rope(qh, inv_freq=w[h], positions=np.arange(6) * 5)
        assert np.array_equal(q1[h], qh)


# ------------------------------------------------------------------ mixed axes


def mixed_freqs(rng, n_axes, heads, nf):
    """RoPE-Mixed's frequencies: per-head bands rotated by a random angle (timm's
    init_random_2d_freqs, written here in float64)."""
    mag = 10.0 ** (-np.arange(0, nf // 2) / (nf // 2))
    out = np.empty((n_axes, heads, nf))
    for h in range(heads):
        t = rng.uniform(0, 2 * np.pi)
        out[0, h] = np.concatenate([mag * np.cos(t), mag * np.cos(t + np.pi / 2)])
        out[1 % n_axes, h] = np.concatenate([mag * np.sin(t), mag * np.sin(t + np.pi / 2)])
    return np.abs(out)


def test_mixed_cache_vs_mpmath_far_positions():
    mpmath.mp.dps = 40
    rng = np.random.default_rng(5)
    w = mixed_freqs(rng, 2, 1, 16)[:, 0]
    pos = rng.integers(-(2**20), 2**20 + 1, size=(8, 2))
    pos[0] = (2**20, -(2**20))
    cos, sin = fastpe.rope_cache(
        32, inv_freq=w, positions=pos, section_layout="mixed", dtype=np.float64
    )
    assert cos.shape == (8, 32)
    worst = 0.0
    for t in range(8):
        for i in range(16):
            ang = sum(mpmath.mpf(int(pos[t, a])) * mpmath.mpf(float(w[a, i])) for a in range(2))
            worst = max(worst, abs(cos[t, i] - mpmath.cos(ang)), abs(sin[t, i] - mpmath.sin(ang)))
            assert cos[t, i] == cos[t, 16 + i]
    assert worst <= 1e-15, worst


def test_mixed_three_axes_vs_mpmath():
    mpmath.mp.dps = 40
    rng = np.random.default_rng(6)
    w = rng.uniform(0, 1, size=(3, 5))
    pos = rng.integers(-(2**20), 2**20 + 1, size=(6, 3))
    cos, sin = fastpe.rope_cache(
        10, inv_freq=w, positions=pos, section_layout="mixed", dtype=np.float64
    )
    for t in range(6):
        for i in range(5):
            ang = sum(mpmath.mpf(int(pos[t, a])) * mpmath.mpf(float(w[a, i])) for a in range(3))
            assert abs(cos[t, i] - mpmath.cos(ang)) <= 1e-15
            assert abs(sin[t, i] - mpmath.sin(ang)) <= 1e-15


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mixed_apply_per_head_vs_float64_numpy(layout, dtype):
    rng = np.random.default_rng(12)
    w = mixed_freqs(rng, 2, 4, 8)
    pos = np.stack(np.meshgrid(np.arange(5), np.arange(6), indexing="ij"), -1).reshape(-1, 2)
    q = rng.standard_normal((2, 4, 30, 16)).astype(dtype)
    k = rng.standard_normal((2, 4, 30, 16)).astype(dtype)
    q1, k1 = q.copy(), k.copy()
    fastpe.apply_rope(q1, k1, inv_freq=w, positions=pos, section_layout="mixed", layout=layout)
    ang = np.einsum("ta,ahf->htf", pos.astype(np.float64), w)  # (heads, seq, nf)
    for x, x1 in ((q, q1), (k, k1)):
        ref = rotate_ref(x, np.cos(ang), np.sin(ang), half=layout == "half")
        tol = 1e-14 if dtype == "float64" else 2.0**-23 * 4
        assert np.max(np.abs(x1 - ref)) <= tol


def test_mixed_one_axis_equals_plain_rope():
    """A single axis mixes nothing: the 1-axis rotation, bit for bit."""
    rng = np.random.default_rng(1)
    w = head_freqs(rng, 1, 6)
    p = rng.integers(0, 2**20, size=(9,))
    c1, s1 = fastpe.rope_cache(12, inv_freq=w, positions=p[:, None], section_layout="mixed")
    c2, s2 = fastpe.rope_cache(12, inv_freq=w[0], positions=p)
    assert np.array_equal(c1, c2) and np.array_equal(s1, s2)


# ------------------------------------------------------------------ xPos


def xpos_ref(q, k, w, pos, base, center, half):
    nf = w.size
    d = 2 * nf
    zeta = (np.arange(0, d, 2) + 0.4 * d) / (1.4 * d)
    power = (pos.astype(np.float64) - center) / base
    scale = zeta[None] ** power[:, None]
    ang = pos[:, None].astype(np.float64) * w[None]
    cos, sin = np.cos(ang), np.sin(ang)
    return (
        rotate_ref(q, cos * scale, sin * scale, half),
        rotate_ref(k, cos / scale, sin / scale, half),
    )


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("center", [None, 3.5])
def test_xpos_vs_float64_numpy(layout, dtype, center):
    rng = np.random.default_rng(3)
    w = 2.0 ** -np.arange(8.0)
    q = rng.standard_normal((2, 3, 33, 16)).astype(dtype)
    k = rng.standard_normal((2, 3, 33, 16)).astype(dtype)
    q1, k1 = q.copy(), k.copy()
    fastpe.apply_rope(
        q1, k1, inv_freq=w, layout=layout, offset=4, xpos_scale_base=32.0, xpos_center=center
    )
    c = 33 // 2 if center is None else center
    rq, rk = xpos_ref(q, k, w, 4 + np.arange(33), 32.0, c, layout == "half")
    tol = 1e-14 if dtype == "float64" else 2.0**-23 * 8
    assert np.max(np.abs(q1 - rq)) <= tol
    assert np.max(np.abs(k1 - rk)) <= tol


def test_xpos_keeps_relative_scores():
    """q_m . k_n depends on m - n only (xPos's purpose): scores along a diagonal agree."""
    rng = np.random.default_rng(0)
    v = rng.standard_normal(16)
    q = np.tile(v, (1, 1, 40, 1))
    k = np.tile(rng.standard_normal(16), (1, 1, 40, 1))
    fastpe.apply_rope(q, k, rope_parameters={"rope_theta": 100.0}, xpos_scale_base=16)
    s = q[0, 0] @ k[0, 0].T
    diag = np.diagonal(s, offset=-3)
    assert np.max(np.abs(diag - diag[0])) <= 1e-12


def test_xpos_cache_scales():
    w = 2.0 ** -np.arange(4.0)
    cos, sin, scale = fastpe.rope_cache(
        8, inv_freq=w, seq_len=10, offset=2, xpos_scale_base=5.0, layout="interleaved",
        dtype=np.float64,
    )  # fmt: skip
    assert cos.shape == sin.shape == scale.shape == (10, 8)
    zeta = (np.arange(0, 8, 2) + 3.2) / 11.2
    ref = zeta[None] ** ((2 + np.arange(10.0) - 5)[:, None] / 5.0)
    assert np.max(np.abs(scale[:, 0::2] - ref) / ref) <= 4e-16
    assert np.array_equal(scale[:, 0::2], scale[:, 1::2])
    c0, _ = fastpe.rope_cache(8, inv_freq=w, seq_len=10, offset=2, layout="interleaved")
    assert np.array_equal(cos.astype(np.float32), c0)


# ------------------------------------------------------------------ errors, nothing written


MIX = {"inv_freq": np.ones((2, 4)), "section_layout": "mixed"}
P2 = np.ones((5, 2), np.int64)


def _qk(heads=4, kheads=4):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((1, heads, 5, 8)).astype(np.float32),
        rng.standard_normal((1, kheads, 5, 8)).astype(np.float32),
    )


@pytest.mark.parametrize(
    ("kwargs", "exc", "name", "kheads"),
    [
        ({"inv_freq": np.ones((3, 4))}, ValueError, "inv_freq", 4),  # heads mismatch
        ({"inv_freq": np.ones((4, 4))}, ValueError, "inv_freq", 2),  # GQA
        ({"inv_freq": np.ones((1, 4))}, ValueError, "inv_freq", 4),  # one head's row, 4 heads
        ({**MIX, "inv_freq": np.ones((2, 3, 4)), "positions": P2}, ValueError, "inv_freq", 4),
        ({"inv_freq": np.ones((4, 5))}, ValueError, "head_dim", 4),  # 10 dims > 8
        ({"inv_freq": np.ones((4, 0))}, ValueError, "inv_freq", 4),
        ({"inv_freq": np.full((4, 4), np.nan)}, ValueError, "inv_freq", 4),
        ({"inv_freq": np.full((4, 4), -np.inf)}, ValueError, "inv_freq", 4),
        ({"inv_freq": np.ones((2, 2, 2, 4))}, TypeError, "inv_freq", 4),
        ({"inv_freq": np.ones((4, 4)), "rope_parameters": {}}, ValueError, "rope_parameters", 4),
        ({**MIX, "positions": np.ones((5, 3), int)}, ValueError, "positions", 4),
        ({**MIX, "positions": P2, "sections": [2, 2]}, ValueError, "sections", 4),
        (MIX, ValueError, "positions", 4),
        ({"inv_freq": np.ones(4), "section_layout": "mixed"}, TypeError, "inv_freq", 4),
        ({**MIX, "positions": P2, "offset": 3}, ValueError, "offset", 4),
        ({"inv_freq": np.ones(4), "xpos_scale_base": 0.0}, ValueError, "xpos_scale_base", 4),
        ({"inv_freq": np.ones(4), "xpos_scale_base": -1}, ValueError, "xpos_scale_base", 4),
        ({"inv_freq": np.ones(4), "xpos_scale_base": np.inf}, ValueError, "xpos_scale_base", 4),
        ({"inv_freq": np.ones(4), "xpos_scale_base": "a"}, TypeError, "xpos_scale_base", 4),
        (
            {"inv_freq": np.ones(4), "xpos_scale_base": 8, "xpos_center": np.nan},
            ValueError, "xpos_center", 4,
        ),
        ({"inv_freq": np.ones(4), "xpos_center": 2}, ValueError, "xpos_center", 4),
        ({"inv_freq": np.ones((4, 4)), "offset": 2**62}, ValueError, "positions", 4),
    ],
)  # fmt: skip
def test_invalid_is_refused_and_nothing_written(kwargs, exc, name, kheads):
    q, k = _qk(kheads=kheads)
    q0, k0 = q.copy(), k.copy()
    with pytest.raises(exc, match=name):
        fastpe.apply_rope(q, k, **kwargs)
    assert np.array_equal(q, q0) and np.array_equal(k, k0)


def test_xpos_needs_k():
    q, _ = _qk()
    q0 = q.copy()
    with pytest.raises(ValueError, match="xpos_scale_base needs k"):
        fastpe.apply_rope(q, inv_freq=np.ones(4), xpos_scale_base=8)
    assert np.array_equal(q, q0)


def test_mixed_positions_range_checked_per_axis():
    q, k = _qk()
    q0 = q.copy()
    pos = np.zeros((5, 2), np.int64)
    pos[2, 1] = 2**62
    with pytest.raises(ValueError, match=r"positions\[\.\.\., 1\]"):
        fastpe.apply_rope(q, k, inv_freq=np.ones((2, 4)), positions=pos, section_layout="mixed")
    assert np.array_equal(q, q0)


def test_cache_refusals():
    with pytest.raises(ValueError, match="sections"):
        fastpe.rope_cache(
            8, inv_freq=np.ones((2, 4)), positions=np.ones((3, 2), int), section_layout="mixed",
            sections=[2, 2],
        )  # fmt: skip
    with pytest.raises(ValueError, match="positions"):
        fastpe.rope_cache(
            8, inv_freq=np.ones((2, 4)), positions=np.ones((3, 3), int), section_layout="mixed"
        )
    with pytest.raises(ValueError, match="xpos_scale_base"):
        fastpe.rope_cache(8, inv_freq=np.ones(4), seq_len=3, xpos_scale_base=np.nan)


@pytest.mark.parametrize("case", ["mixed", "xpos", "heads"])
def test_thread_count_does_not_change_bits(case):
    rng = np.random.default_rng(21)
    q = rng.standard_normal((3, 4, 97, 24)).astype(np.float32)
    k = rng.standard_normal((3, 4, 97, 24)).astype(np.float32)
    kw = {
        "mixed": {
            "inv_freq": mixed_freqs(rng, 2, 4, 12),
            "section_layout": "mixed",
            "positions": rng.integers(0, 2**20, size=(3, 97, 2)),
        },
        "xpos": {"inv_freq": 2.0 ** -np.arange(12.0), "xpos_scale_base": 50, "offset": [1, 5, 9]},
        "heads": {"inv_freq": head_freqs(rng, 4, 12), "offset": [3, 2**40, 7]},
    }[case]
    results = []
    for threads in (1, 2, 3):
        q1, k1 = q.copy(), k.copy()
        fastpe.apply_rope(q1, k1, num_threads=threads, **kw)
        results.append((bits(q1), bits(k1)))
    for r in results[1:]:
        assert np.array_equal(r[0], results[0][0]) and np.array_equal(r[1], results[0][1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_head_cache_attention_factor_and_out(dtype):
    """With an attention factor (the float64 table path) and into ``out``: still one
    1-axis cache per head, bit for bit."""
    rng = np.random.default_rng(8)
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    w = head_freqs(rng, 2, 4)
    out = (np.full((2, 6, 8), 7, dt), np.full((2, 6, 8), 7, dt))
    got = fastpe.rope_cache(8, inv_freq=w, seq_len=6, attention_factor=0.7, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    for h in range(2):
        c1, s1 = fastpe.rope_cache(8, inv_freq=w[h], seq_len=6, attention_factor=0.7, dtype=dt)
        assert np.array_equal(bits(out[0][h]), bits(c1)) and np.array_equal(
            bits(out[1][h]), bits(s1)
        )
