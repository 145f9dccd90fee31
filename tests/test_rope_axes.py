"""Multi-axis RoPE positions (M-RoPE, axial 2-D/3-D): rope_cache and apply_rope with
``sections``.  The truth: frequency i of a token rotates by positions[t, a(i)] * w[i],
so every multi-axis result must equal, bit for bit, the 1-axis result of that
frequency at that axis's position; and the values against mpmath and a float64
NumPy rotation written here."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

import fastpe

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    BF16 = None

THETA = {"rope_theta": 1e6}


@pytest.fixture(autouse=True)
def _keep_rope_plans():
    """The many 1-axis reference calls here plan their frequencies for the small-call
    paths; the plans are put back as they were, so that tests counting them stay
    independent of the order they run in."""
    saved = [(d, dict(d)) for d in (fastpe.kernel.rope_args,)]
    yield
    for d, was in saved:
        d.clear()
        d.update(was)


W128, _ = fastpe.rope_frequencies(128, THETA)


def bits(x):
    """The bytes of x (equal bits, -0.0 told from 0.0)."""
    return np.ascontiguousarray(x).view(np.uint8)


def axis_of(sections, section_layout):
    """a(i) for each frequency, written from the layouts' definitions."""
    n, nf = len(sections), sum(sections)
    if section_layout == "contiguous":
        return np.repeat(np.arange(n), sections)
    # transformers' Qwen3-VL apply_interleaved_mrope: freqs_t[..., r : n*s_r : n] = axis r
    a = np.zeros(nf, np.int64)
    for r in range(1, n):
        a[r : n * sections[r] : n] = r
    return a


def rotate_ref(x, cos, sin, half=True):
    """x rotated by float64 cos/sin of shape broadcastable to x[..., :2nf], in float64."""
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


def positions_grid(rng, shape, n_axes, far=False):
    hi = 2**20 if far else 5000
    return rng.integers(-hi if far else 0, hi + 1, size=(*shape, n_axes))


CASES = [
    ((16, 24, 24), "contiguous"),  # Qwen2-VL / Qwen2.5-VL (head_dim 128)
    ((24, 20, 20), "interleaved"),  # Qwen3-VL
    ((32, 32), "contiguous"),  # axial 2-D
    ((0, 40, 24), "contiguous"),  # an axis without frequencies
    ((64,), "contiguous"),  # one axis: plain RoPE
    ((30, 17, 17), "interleaved"),
]


# ------------------------------------------------------------------ the bitwise truth


@pytest.mark.parametrize(("sections", "section_layout"), CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_cache_equals_one_axis_calls(sections, section_layout, dtype, layout):
    if dtype == "bfloat16":
        if BF16 is None:
            pytest.skip("ml_dtypes not installed")
        dtype = BF16
    rng = np.random.default_rng(len(sections) * 7 + sum(sections))
    pos = positions_grid(rng, (3, 5), len(sections), far=True)
    cos, sin = fastpe.rope_cache(
        128,
        THETA,
        positions=pos,
        sections=sections,
        section_layout=section_layout,
        layout=layout,
        dtype=dtype,
    )
    assert cos.shape == sin.shape == (3, 5, 128)
    a = axis_of(sections, section_layout)
    for i in range(64):
        c1, s1 = fastpe.rope_cache(
            2, inv_freq=W128[i : i + 1], positions=pos[..., a[i]], dtype=dtype
        )
        cols = (i, 64 + i) if layout == "half" else (2 * i, 2 * i + 1)
        for j in cols:
            assert np.array_equal(bits(cos[..., j]), bits(c1[..., 0])), (i, j)
            assert np.array_equal(bits(sin[..., j]), bits(s1[..., 0])), (i, j)


@pytest.mark.parametrize(("sections", "section_layout"), CASES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_apply_equals_one_axis_rotation_per_section(sections, section_layout, layout, dtype):
    """Each axis's pairs, gathered into their own tensor and rotated by apply_rope with
    that axis's frequencies and positions (1 axis), give the multi-axis bits."""
    rng = np.random.default_rng(11)
    pos = positions_grid(rng, (2, 9), len(sections), far=True)
    q = rng.standard_normal((2, 4, 9, 136)).astype(dtype)  # (untouched tail past 128)
    k = rng.standard_normal((2, 2, 9, 136)).astype(dtype)
    q1, k1 = q.copy(), k.copy()
    fastpe.apply_rope(
        q1,
        k1,
        rope_parameters=THETA,
        head_dim=128,
        positions=pos,
        sections=sections,
        section_layout=section_layout,
        layout=layout,
    )
    a = axis_of(sections, section_layout)
    for x, x1 in ((q, q1), (k, k1)):
        assert np.array_equal(x1[..., 128:], x[..., 128:])
        for ax in range(len(sections)):
            f = np.flatnonzero(a == ax)
            if not f.size:
                continue
            if layout == "half":
                idx = np.concatenate([f, 64 + f])
            else:
                idx = np.stack([2 * f, 2 * f + 1], -1).reshape(-1)
            part = np.ascontiguousarray(x[..., idx])
            fastpe.apply_rope(part, inv_freq=W128[f], positions=pos[..., ax], layout=layout)
            assert np.array_equal(bits(x1[..., idx]), bits(part)), ax


@pytest.mark.parametrize(("sections", "section_layout"), CASES[:3])
def test_apply_same_coordinates_is_one_axis_rope(sections, section_layout):
    """Every axis at the same position: the 1-axis rotation, whatever the sections."""
    rng = np.random.default_rng(3)
    p = rng.integers(0, 2**20, size=(2, 7))
    q = rng.standard_normal((2, 7, 3, 128)).astype(np.float32)
    q1, q2 = q.copy(), q.copy()
    pos = np.repeat(p[..., None], len(sections), -1)
    fastpe.apply_rope(
        q1, rope_parameters=THETA, positions=pos, sections=sections,
        section_layout=section_layout, seq_axis=1,
    )  # fmt: skip
    fastpe.apply_rope(q2, rope_parameters=THETA, positions=p, seq_axis=1)
    assert np.array_equal(q1, q2)


# ------------------------------------------------------------------ independent values


def test_cache_vs_mpmath_far_positions():
    mpmath.mp.dps = 40
    sections = (16, 24, 24)
    rng = np.random.default_rng(5)
    pos = rng.integers(-(2**20), 2**20 + 1, size=(6, 3))
    pos[0] = 2**20
    cos, sin = fastpe.rope_cache(128, THETA, positions=pos, sections=sections, dtype=np.float64)
    a = axis_of(sections, "contiguous")
    worst = 0.0
    for t in range(pos.shape[0]):
        for i in range(64):
            ang = mpmath.mpf(int(pos[t, a[i]])) * mpmath.mpf(float(W128[i]))
            worst = max(worst, abs(cos[t, i] - mpmath.cos(ang)), abs(sin[t, i] - mpmath.sin(ang)))
    assert worst <= 1e-15, worst


@pytest.mark.parametrize(("sections", "section_layout"), CASES[:2])
def test_apply_vs_float64_numpy_rotation(sections, section_layout):
    """The rotated q against the formula in float64 with NumPy's cos/sin of the angle
    (exact here: positions * w for w a power of two is exact in float64)."""
    rng = np.random.default_rng(8)
    nf = sum(sections)
    w = 2.0 ** -rng.integers(0, 20, size=nf).astype(np.float64)
    pos = rng.integers(0, 2**20, size=(5, len(sections)))
    q = rng.standard_normal((1, 3, 5, 2 * nf))
    q1 = q.copy()
    fastpe.apply_rope(
        q1, inv_freq=w, positions=pos, sections=sections, section_layout=section_layout
    )
    ang = pos[:, axis_of(sections, section_layout)] * w  # (5, nf), exact
    ref = rotate_ref(q, np.cos(ang), np.sin(ang))
    np.testing.assert_allclose(q1, ref, rtol=0, atol=4e-16 * np.abs(q).max() * 4)


@pytest.mark.parametrize(
    ("model", "sections", "section_layout"),
    [("qwen2_vl", (16, 24, 24), "contiguous"), ("qwen3_vl", (24, 20, 20), "interleaved")],
)
def test_layouts_match_transformers(model, sections, section_layout):
    """Each layout against transformers' own rotary embedding of the model family."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib

    mod = importlib.import_module(f"transformers.models.{model}.modeling_{model}")
    if model == "qwen2_vl":
        cfg_cls = importlib.import_module(f"transformers.models.{model}").Qwen2VLTextConfig
        rot_cls = mod.Qwen2VLRotaryEmbedding
    else:
        cfg_cls = importlib.import_module(f"transformers.models.{model}").Qwen3VLTextConfig
        rot_cls = mod.Qwen3VLTextRotaryEmbedding
    cfg = cfg_cls(
        hidden_size=256,
        num_attention_heads=2,
        head_dim=128,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": list(sections),
        },
    )
    rot = rot_cls(cfg)
    rng = np.random.default_rng(2)
    pos = rng.integers(0, 3000, size=(3, 1, 11))  # (t/h/w, batch, seq), the framework's order
    inv = rot.inv_freq.double().numpy()
    cos, sin = fastpe.rope_cache(
        128,
        inv_freq=inv,
        positions=np.moveaxis(pos, 0, -1),
        sections=sections,
        section_layout=section_layout,
        dtype=np.float64,
    )
    # the framework's layout step on float64 angles: the same values
    ang = torch.from_numpy(pos)[..., None].double() * torch.from_numpy(inv)
    for got, f in ((cos, torch.cos), (sin, torch.sin)):
        want = rot.recomposition_frequencies(f(ang)).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # its whole float32 forward: within float32's angle error at these positions
    cos_t, sin_t = rot(torch.zeros(1, 11, 256), torch.from_numpy(pos))
    np.testing.assert_allclose(cos, cos_t.double().numpy(), rtol=0, atol=3000 * 2**-23)
    np.testing.assert_allclose(sin, sin_t.double().numpy(), rtol=0, atol=3000 * 2**-23)


def test_contiguous_matches_qwen2vl_mrope_formula():
    """Qwen2-VL's apply_multimodal_rotary_pos_emb, restated: the cos of 3 axes split
    by mrope_section * 2 over the half-split width, chunk i taken from axis i % 3."""
    sections = [16, 24, 24]
    rng = np.random.default_rng(4)
    pos = rng.integers(0, 4000, size=(3, 7))  # (t/h/w, seq)
    emb = pos[..., None] * W128  # (3, seq, 64)
    emb = np.concatenate([emb, emb], -1)
    cos3 = np.cos(emb)
    chunks = np.split(cos3, np.cumsum(sections * 2)[:-1], axis=-1)
    ref = np.concatenate([c[i % 3] for i, c in enumerate(chunks)], -1)
    cos, _ = fastpe.rope_cache(128, THETA, positions=pos.T, sections=sections, dtype=np.float64)
    np.testing.assert_allclose(cos, ref, rtol=0, atol=1e-12)


# ------------------------------------------------------------------ per-axis rules


def test_per_axis_rules():
    rules = [{"rope_theta": 100.0}, {"rope_theta": 10000.0}, None]
    sections = (8, 12, 12)
    pos = np.random.default_rng(1).integers(0, 500, size=(4, 3))
    w = np.concatenate(
        [fastpe.rope_frequencies(2 * s, r)[0] for s, r in zip(sections, rules, strict=True)]
    )
    a = fastpe.rope_cache(64, rules, positions=pos, sections=sections)
    b = fastpe.rope_cache(64, inv_freq=w, positions=pos, sections=sections)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    q = np.random.default_rng(2).standard_normal((4, 2, 64))
    q1, q2 = q.copy(), q.copy()
    fastpe.apply_rope(q1, rope_parameters=rules, positions=pos, sections=sections, seq_axis=0)
    fastpe.apply_rope(q2, inv_freq=w, positions=pos, sections=sections, seq_axis=0)
    assert np.array_equal(q1, q2)


def test_per_axis_rules_interleaved_take_their_columns_in_order():
    rules = [{"rope_theta": 100.0}, {"rope_theta": 10000.0}]
    sections = (6, 4)
    pos = np.array([[3, 7], [11, 2]])
    a = axis_of(sections, "interleaved")
    w = np.empty(10)
    for ax, (s, r) in enumerate(zip(sections, rules, strict=True)):
        w[a == ax] = fastpe.rope_frequencies(2 * s, r)[0]
    got = fastpe.rope_cache(
        20, rules, positions=pos, sections=sections, section_layout="interleaved"
    )
    want = fastpe.rope_cache(
        20, inv_freq=w, positions=pos, sections=sections, section_layout="interleaved"
    )
    assert all(np.array_equal(x, y) for x, y in zip(got, want, strict=True))


def test_attention_factor():
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    pos = np.array([[1, 2], [30, 4]])
    # one rule: its factor for all frequencies
    c, _ = fastpe.rope_cache(32, yarn, positions=pos, sections=(8, 8), dtype=np.float64)
    w, att = fastpe.rope_frequencies(32, yarn)
    c0, _ = fastpe.rope_cache(32, inv_freq=w, positions=pos, sections=(8, 8), dtype=np.float64)
    assert att != 1.0 and np.array_equal(c, c0 * att)
    # per-axis rules with different factors: refused unless attention_factor is given
    with pytest.raises(ValueError, match="attention_factor"):
        fastpe.rope_cache(32, [yarn, None], positions=pos, sections=(8, 8))
    c2, _ = fastpe.rope_cache(
        32, [yarn, None], positions=pos, sections=(8, 8), attention_factor=2.0, dtype=np.float64
    )
    wy = fastpe.rope_frequencies(16, yarn)[0]
    w2 = np.concatenate([wy, fastpe.rope_frequencies(16)[0]])
    c3, _ = fastpe.rope_cache(32, inv_freq=w2, positions=pos, sections=(8, 8), dtype=np.float64)
    assert np.array_equal(c2, c3 * 2.0)


# ------------------------------------------------------------------ the guarantees


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
def test_threads_give_identical_bits(section_layout):
    """Any thread count, and the table rows any thread fills, give the same bits (per
    batch positions on sizes the thread counts do not divide)."""
    sections = (16, 24, 24) if section_layout == "contiguous" else (24, 20, 20)
    rng = np.random.default_rng(9)
    pos = rng.integers(0, 2**20, size=(3, 97, 3))
    q = rng.standard_normal((3, 5, 97, 128)).astype(np.float32)
    kw = {"sections": sections, "section_layout": section_layout}
    outs = []
    for nt in (1, 2, 3):
        x = q.copy()
        fastpe.apply_rope(x, rope_parameters=THETA, positions=pos, num_threads=nt, **kw)
        c = fastpe.rope_cache(128, THETA, positions=pos, num_threads=nt, **kw)
        outs.append((x, *c))
    for o in outs[1:]:
        assert all(np.array_equal(x, y) for x, y in zip(o, outs[0], strict=True))
    cos, sin = fastpe.rope_cache(128, THETA, positions=pos, dtype=np.float64, **kw)
    ref = rotate_ref(q, cos[:, None, :, :64], sin[:, None, :, :64]).astype(np.float32)
    assert np.array_equal(outs[0][0], ref)


def test_length_dependent_rules_are_not_planned():
    """dynamic's frequencies depend on the largest position: each call gets its own."""
    rule = {"rope_type": "dynamic", "factor": 4.0}
    q = np.ones((2, 64), np.float64)
    for top in (10, 5000):
        pos = np.array([[1, 2], [top, 3]], np.int64)
        x = q.copy()
        fastpe.apply_rope(
            x, rope_parameters=rule, positions=pos, sections=(16, 16), seq_axis=0,
            max_position_embeddings=100,
        )  # fmt: skip
        cos, sin = fastpe.rope_cache(
            64, rule, positions=pos, sections=(16, 16), max_position_embeddings=100,
            dtype=np.float64,
        )  # fmt: skip
        assert np.array_equal(x, rotate_ref(q, cos[:, :32], sin[:, :32]))


def test_gqa_batch_positions_strides_and_seq_axis():
    rng = np.random.default_rng(12)
    sections = (16, 24, 24)
    pos = rng.integers(0, 9000, size=(2, 6, 3))
    base_q = rng.standard_normal((2, 6, 8, 260))
    q = base_q[:, :, ::2, 2:130]  # (batch, seq, heads, head_dim), strided
    k = rng.standard_normal((2, 6, 2, 128)).astype(np.float32)
    q0, k0 = q.copy(), k.copy()
    fastpe.apply_rope(q, k, rope_parameters=THETA, positions=pos, sections=sections, seq_axis=-3)
    cos, sin = fastpe.rope_cache(128, THETA, positions=pos, sections=sections, dtype=np.float64)
    cq, sq = cos[:, :, None, :64], sin[:, :, None, :64]
    assert np.array_equal(q, rotate_ref(q0, cq, sq))
    assert np.array_equal(k, rotate_ref(k0, cq, sq).astype(np.float32))
    # one row of positions for every batch entry
    q2 = base_q[:, :, :, :128].copy()
    q3 = q2.copy()
    fastpe.apply_rope(q2, rope_parameters=THETA, positions=pos[0], sections=sections, seq_axis=1)
    fastpe.apply_rope(
        q3, rope_parameters=THETA, positions=np.stack([pos[0], pos[0]]), sections=sections,
        seq_axis=1,
    )  # fmt: skip
    assert np.array_equal(q2, q3)


def test_bfloat16_and_float16():
    if BF16 is None:
        pytest.skip("ml_dtypes not installed")
    rng = np.random.default_rng(13)
    pos = rng.integers(0, 9000, size=(5, 2))
    for dt in (BF16, np.dtype(np.float16)):
        q = rng.standard_normal((2, 5, 64)).astype(dt)
        q0 = q.copy()
        fastpe.apply_rope(q, rope_parameters=THETA, positions=pos, sections=(10, 22))
        cos, sin = fastpe.rope_cache(64, THETA, positions=pos, sections=(10, 22), dtype=np.float64)
        ref = rotate_ref(q0.astype(np.float64), cos[:, :32], sin[:, :32]).astype(dt)
        assert np.array_equal(q.view(np.uint16), ref.view(np.uint16))


def test_torch_tensors_in_place():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(14)
    pos = rng.integers(0, 9000, size=(5, 3))
    q = torch.randn(1, 2, 5, 128, dtype=torch.bfloat16)
    ref = q.float().numpy().astype(BF16) if BF16 is not None else None
    out = fastpe.apply_rope(
        q, rope_parameters=THETA, positions=torch.from_numpy(pos), sections=(16, 24, 24)
    )
    assert out is q
    if ref is not None:
        fastpe.apply_rope(ref, rope_parameters=THETA, positions=pos, sections=(16, 24, 24))
        assert np.array_equal(q.view(torch.int16).numpy().view(np.uint16), ref.view(np.uint16))


def test_positions_aliasing_q_are_read_first():
    rng = np.random.default_rng(15)
    buf = np.zeros((1, 6, 32), np.float64)
    ids = buf.view(np.int64)
    ids[0, :, 0:2] = rng.integers(0, 50, size=(6, 2))  # positions stored in q's first entries
    pos = ids[0, :, 0:2]
    want = buf.copy()
    fastpe.apply_rope(want, rope_parameters=THETA, positions=pos.copy(), sections=(6, 10))
    fastpe.apply_rope(buf, rope_parameters=THETA, positions=pos, sections=(6, 10))
    assert np.array_equal(buf.view(np.uint8), want.view(np.uint8))


def test_out_and_empty():
    pos = np.arange(12).reshape(4, 3)
    out = (np.full((4, 128), 7.0), np.full((4, 128), 7.0))
    got = fastpe.rope_cache(128, THETA, positions=pos, sections=(16, 24, 24), out=out)
    assert got is out
    want = fastpe.rope_cache(128, THETA, positions=pos, sections=(16, 24, 24), dtype=np.float64)
    assert np.array_equal(out[0], want[0]) and np.array_equal(out[1], want[1])
    c, _ = fastpe.rope_cache(
        128, THETA, positions=np.zeros((0, 3), np.int64), sections=(16, 24, 24)
    )
    assert c.shape == (0, 128)
    q = np.zeros((1, 0, 128), np.float32)
    fastpe.apply_rope(q, positions=np.zeros((0, 3), np.int64), sections=(16, 24, 24))


def test_planned_rule_does_not_leak_into_multi_axis_calls():
    """A rule planned by a 1-axis call (the small-call paths) still rotates multi-axis
    positions by their axes."""
    pos1 = np.array([5, 6], np.int64)
    q = np.ones((2, 128), np.float32)
    fastpe.apply_rope(q.copy(), rope_parameters=THETA, positions=pos1, seq_axis=0)
    fastpe.rope_cache(128, THETA, positions=pos1)
    pos = np.array([[5, 100, 7], [6, 200, 9]], np.int64)
    a, b = q.copy(), q.copy()
    fastpe.apply_rope(a, rope_parameters=THETA, positions=pos, sections=(16, 24, 24), seq_axis=0)
    cos, sin = fastpe.rope_cache(
        128, THETA, positions=pos, sections=(16, 24, 24), dtype=np.float64
    )
    assert np.array_equal(a, rotate_ref(b, cos[:, :64], sin[:, :64]).astype(np.float32))


# ------------------------------------------------------------------ refusals


POS3 = np.zeros((4, 3), np.int64)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"sections": (16, 24, 23)}, ValueError, "sum"),
        ({"sections": (16, 24, 25)}, ValueError, "sum"),
        ({"sections": (16, -1, 49)}, ValueError, r"sections\[1\]"),
        ({"sections": (16, 24.0, 24)}, TypeError, r"sections\[1\]"),
        ({"sections": (16, True, 47)}, TypeError, r"sections\[1\]"),
        ({"sections": "abc"}, TypeError, "sections"),
        ({"sections": 64}, TypeError, "sections"),
        ({"sections": ()}, ValueError, "sections"),
        ({"sections": (32, 32)}, ValueError, r"positions must have shape \(\.\.\., 2\)"),
        ({"sections": (16, 24, 24), "section_layout": "chunked"}, ValueError, "section_layout"),
        ({"sections": (16, 24, 24), "section_layout": "interleaved"}, ValueError, "interleaved"),
        ({"sections": (16, 24, 24), "positions": None}, ValueError, "positions"),
        ({"sections": (16, 24, 24), "positions": POS3 + np.nan}, ValueError, "positions"),
        (
            {"sections": (16, 24, 24), "rope_parameters": [None, None]},
            ValueError,
            "one rule per axis",
        ),
        (
            {"sections": (16, 24, 24), "rope_parameters": [None, None, 3]},
            TypeError,
            r"rope_parameters\[2\]",
        ),
        (
            {"sections": (16, 24, 24), "rope_parameters": [None, {"rope_theta": -1.0}, None]},
            ValueError,
            r"rope_parameters\[1\]",
        ),
        (
            {
                "sections": (16, 24, 24),
                "rope_parameters": [None, {"partial_rotary_factor": 0.5}, None],
            },
            ValueError,
            r"rope_parameters\[1\]",
        ),
        (
            {"sections": (16, 24, 24), "rope_parameters": [None] * 3, "inv_freq": W128},
            ValueError,
            "not both",
        ),
        ({"sections": (16, 24, 24), "inv_freq": W128[:60]}, ValueError, "sum"),
        ({"sections": (16, 24, 24), "head_dim": 64}, ValueError, "sum"),
        (
            {"sections": (16, 24, 24), "positions": np.array([[0, 0, 2**60]])},
            ValueError,
            r"positions\[\.\.\., 2\]",
        ),
        ({"rope_parameters": [None, None]}, TypeError, "sections"),
    ],
)
@pytest.mark.parametrize("fn", ["cache", "apply"])
def test_refusals_write_nothing(kwargs, exc, match, fn):
    kw = {"positions": POS3, **kwargs}
    head_dim = kw.pop("head_dim", 128)
    if fn == "cache":
        out = (np.full((4, 128), 7.0), np.full((4, 128), 7.0))
        pos = kw["positions"]
        if pos is not None and getattr(pos, "ndim", 0) == 2 and pos.shape[0] != 4:
            out = (np.full((pos.shape[0], 128), 7.0), np.full((pos.shape[0], 128), 7.0))
        with pytest.raises(exc, match=match):
            fastpe.rope_cache(head_dim, kw.pop("rope_parameters", None), out=out, **kw)
        assert (out[0] == 7.0).all() and (out[1] == 7.0).all()
    else:
        pos = kw["positions"]
        seq = pos.shape[0] if pos is not None else 4
        q = np.full((2, seq, 128), 7.0)
        k = np.full((2, seq, 128), 7.0)
        with pytest.raises(exc, match=match):
            fastpe.apply_rope(q, k, head_dim=head_dim, **kw)
        assert (q == 7.0).all() and (k == 7.0).all()


def test_seq_len_and_offset_refused():
    with pytest.raises(ValueError, match="seq_len"):
        fastpe.rope_cache(128, seq_len=4, sections=(16, 24, 24))
    with pytest.raises(ValueError, match="offset"):
        fastpe.rope_cache(128, positions=POS3, offset=3, sections=(16, 24, 24))
    q = np.full((1, 4, 128), 7.0)
    with pytest.raises(ValueError, match="offset"):
        fastpe.apply_rope(q, positions=POS3, offset=3, sections=(16, 24, 24))
    with pytest.raises(ValueError, match="offset"):
        fastpe.apply_rope(q, positions=POS3, offset=np.array([1]), sections=(16, 24, 24))
    with pytest.raises(ValueError, match="positions must have shape"):
        fastpe.apply_rope(q, positions=np.zeros((5, 3), np.int64), sections=(16, 24, 24))
    with pytest.raises(ValueError, match="positions must have shape"):
        fastpe.apply_rope(q, positions=np.zeros((3, 4, 3), np.int64), sections=(16, 24, 24))
    assert (q == 7.0).all()


# ------------------------------------------------------------------ the small-call path


def _axes_args(q, k=None, **kw):
    a = {
        "rope_parameters": THETA,
        "head_dim": None,
        "offset": 0,
        "positions": None,
        "sections": (16, 24, 24),
        "section_layout": "contiguous",
        "seq_axis": -2,
        "layout": "half",
        "max_position_embeddings": None,
        "precision": "float32",
        "inv_freq": None,
        "attention_factor": None,
        "num_threads": None,
    }
    a.update(kw)
    return (q, k, *a.values())


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
def test_small_call_path_gives_the_general_bits(section_layout):
    sections = (16, 24, 24) if section_layout == "contiguous" else (24, 20, 20)
    rng = np.random.default_rng(21)
    q = rng.standard_normal((1, 16, 1, 128)).astype(np.float32)
    k = rng.standard_normal((1, 4, 1, 128)).astype(np.float32)
    pos = np.array([[100000, 17, 33]], np.int64)
    kw = {"positions": pos, "sections": sections, "section_layout": section_layout}
    fastpe.kernel.rope_args.clear()
    assert fastpe.kernel.rope_apply_axes(*_axes_args(q.copy(), k.copy(), **kw)) is None
    q1, k1 = q.copy(), k.copy()
    fastpe.apply_rope(q1, k1, rope_parameters=THETA, **kw)  # the general path, which plans
    q2, k2 = q.copy(), k.copy()
    assert fastpe.kernel.rope_apply_axes(*_axes_args(q2, k2, **kw)) == (q2, k2)
    assert np.array_equal(q1, q2) and np.array_equal(k1, k2)
    cos, sin = fastpe.rope_cache(128, THETA, positions=pos, **kw_cache(kw), dtype=np.float64)
    assert np.array_equal(q2, rotate_ref(q, cos[:, :64], sin[:, :64]).astype(np.float32))


def kw_cache(kw):
    return {k: v for k, v in kw.items() if k != "positions"}


@pytest.mark.parametrize(
    "change",
    [
        {"positions": np.array([[0, 0, 2**60]], np.int64)},  # beyond axis 2's reduction
        {"positions": np.array([[0, 0]], np.int64)},
        {"positions": np.array([[0, 0, 1, 2]], np.int64)},
        {"positions": np.array([[0, 0, 1]], np.int32)},
        {"positions": np.array([[0.0, 0.0, 1.0]])},
        {"positions": [[0, 0, 1]]},
        {"positions": np.array([[0, 5, 0, 6, 0, 7]], np.int64)[:, ::2]},
        {"sections": (16, 24, 25)},
        {"sections": (16, True, 47)},
        {"sections": (16, 24, 24.0)},
        {"sections": np.array([16, 24, 24])},
        {"section_layout": "interleaved"},
        {"offset": 1},
        {"offset": np.array([0])},
        {"layout": "rotate_half"},
        {"attention_factor": 1.0},
        {"head_dim": 64},
        {"num_threads": 0},
        {"rope_parameters": [THETA, THETA, THETA]},
    ],
)
def test_small_call_path_declines(change):
    q = np.zeros((1, 2, 1, 128), np.float32)
    base = {"positions": np.array([[5, 6, 7]], np.int64)}
    fastpe.apply_rope(q, rope_parameters=THETA, sections=(16, 24, 24), **base)  # planned
    assert fastpe.kernel.rope_apply_axes(*_axes_args(q, **base)) is not None
    kw = {**base, **change}
    assert fastpe.kernel.rope_apply_axes(*_axes_args(q, **kw)) is None


def test_small_call_path_refuses_what_the_general_path_refuses():
    """A planned call with a bad q is refused by the same library check, with the
    same message, as the general path's."""
    q = np.zeros((1, 2, 1, 128), np.float32)
    base = {"positions": np.array([[5, 6, 7]], np.int64)}
    fastpe.apply_rope(q, rope_parameters=THETA, sections=(16, 24, 24), **base)  # planned
    with pytest.raises(ValueError) as fast:
        fastpe.kernel.rope_apply_axes(*_axes_args(q, **base, seq_axis=-1))
    fastpe.kernel.rope_args.clear()
    with pytest.raises(ValueError) as general:
        fastpe.apply_rope(q, rope_parameters=THETA, sections=(16, 24, 24), seq_axis=-1, **base)
    assert (
        str(fast.value) == str(general.value) == "seq_axis=-1 is not an axis of q before its last"
    )


def test_small_call_path_declines_positions_in_q():
    buf = np.zeros((1, 1, 1, 128), np.float64)
    pos = buf.reshape(-1)[:3].view(np.int64).reshape(1, 3)
    pos[:] = [[5, 6, 7]]
    fastpe.apply_rope(
        buf.copy(), rope_parameters=THETA, positions=pos.copy(), sections=(16, 24, 24)
    )
    assert fastpe.kernel.rope_apply_axes(*_axes_args(buf.copy(), positions=pos.copy())) is not None
    # (buf unchanged: pos still holds the same valid positions)
    assert fastpe.kernel.rope_apply_axes(*_axes_args(buf, positions=pos)) is None


def test_planned_calls_refuse_as_before():
    q = np.full((1, 2, 1, 128), 7.0, np.float32)
    ok = np.array([[5, 6, 7]], np.int64)
    cases = [
        ({"positions": np.array([[0, 0, 2**60]], np.int64)}, ValueError),
        ({"positions": np.array([[0, 0]], np.int64)}, ValueError),
        ({"sections": (16, 24, 25)}, ValueError),
        ({"offset": 1}, ValueError),
    ]
    errors = []
    for planned in (False, True):
        if planned:
            fastpe.apply_rope(q.copy(), rope_parameters=THETA, positions=ok, sections=(16, 24, 24))
        else:
            fastpe.kernel.rope_args.clear()
        for change, exc in cases:
            kw = {"positions": ok, "sections": (16, 24, 24), **change}
            with pytest.raises(exc) as info:
                fastpe.apply_rope(q, rope_parameters=THETA, **kw)
            errors.append(str(info.value))
    assert errors[: len(cases)] == errors[len(cases) :]
    assert (q == 7.0).all()


# ------------------------------------------------------------------ the C library

E = {
    "ok": 0,
    "null": 1,
    "size": 2,
    "stride": 3,
    "layout": 5,
    "range": 6,
    "overlap": 9,
    "inval": 11,
}
LAYOUT_CODE = {"contiguous": 0, "interleaved": 1}


@pytest.mark.parametrize(("sections", "section_layout"), CASES)
def test_c_section_axes(sections, section_layout):
    err, axis = fastpe.kernel._rope_section_axes_native(
        sections, LAYOUT_CODE[section_layout], sum(sections)
    )
    assert err == 0 and np.array_equal(axis, axis_of(sections, section_layout))


@pytest.mark.parametrize(
    ("sections", "layout", "nf", "code"),
    [
        ((16, 24, 24), 0, 63, "size"),
        ((16, -1, 49), 0, 64, "size"),
        ((16, 24, 24), 2, 64, "inval"),
        ((16, 24, 24), 1, 64, "inval"),  # axis 2 would get 21 of its 24
        ((), 0, 0, "null"),
    ],
)
def test_c_section_axes_refusals_write_nothing(sections, layout, nf, code):
    err, axis = fastpe.kernel._rope_section_axes_native(sections, layout, nf)
    assert err == E[code] and (axis == -1).all()


def _c_axis(sections, section_layout):
    return axis_of(sections, section_layout).astype(np.int32)


@pytest.mark.parametrize(("sections", "section_layout"), CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("attention", [1.0, 1.25])
def test_c_cache_axes_is_rope_cache(sections, section_layout, dtype, layout, attention):
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("ml_dtypes not installed")
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(31)
    pos = positions_grid(rng, (13,), len(sections), far=True)
    kw = {"sections": sections, "section_layout": section_layout, "layout": layout}
    want = fastpe.rope_cache(
        128, inv_freq=W128, positions=pos, dtype=dt, attention_factor=attention, **kw
    )
    # rows at a stride wider than rotary_dim, cos and sin side by side in one buffer
    buf = np.zeros((13, 300), dt)
    cos, sin = buf[:, :128], buf[:, 150:278]
    bits_view = np.uint16 if dtype == "bfloat16" else dt
    err = fastpe.kernel._rope_axes_native(
        W128, _c_axis(sections, section_layout), attention, pos, "cache",
        cos.view(bits_view), sin.view(bits_view), bfloat16=dtype == "bfloat16",
        half=layout == "half",
    )  # fmt: skip
    assert err == 0
    assert np.array_equal(bits(cos), bits(want[0])) and np.array_equal(bits(sin), bits(want[1]))
    assert (buf[:, 128:150] == 0).all() and (buf[:, 278:] == 0).all()


@pytest.mark.parametrize(("sections", "section_layout"), CASES[:3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("axes", ["bhsd", "bshd"])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_c_apply_axes_is_apply_rope(sections, section_layout, dtype, axes, layout):
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("ml_dtypes not installed")
    dt = BF16 if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(32)
    batch, seq, heads = 3, 7, 4
    pos = positions_grid(rng, (batch, seq), len(sections), far=True)
    shape = (batch, heads, seq, 136) if axes == "bhsd" else (batch, seq, heads, 136)
    x = rng.standard_normal(shape).astype(dt)
    want = x.copy()
    fastpe.apply_rope(
        want, inv_freq=W128, head_dim=128, positions=pos, sections=sections,
        section_layout=section_layout, layout=layout, seq_axis=2 if axes == "bhsd" else 1,
    )  # fmt: skip
    got = x.copy()
    st = [s // got.itemsize for s in got.strides]
    sb, ss, sh = (st[0], st[2], st[1]) if axes == "bhsd" else (st[0], st[1], st[2])
    err = fastpe.kernel._rope_axes_native(
        W128, _c_axis(sections, section_layout), 1.0, pos, "apply",
        got.view(np.uint16) if dtype == "bfloat16" else got, bfloat16=dtype == "bfloat16",
        half=layout == "half", batch=batch, seq=seq, heads=heads, sb=sb, ss=ss, sh=sh,
    )  # fmt: skip
    assert err == 0 and np.array_equal(bits(got), bits(want))


def test_c_plain_handles_and_kinds():
    pos = np.arange(10, dtype=np.int64)
    want = fastpe.rope_cache(128, inv_freq=W128, positions=pos, dtype=np.float64)
    cos, sin = np.zeros((10, 128)), np.zeros((10, 128))
    # a plain handle takes the multi-axis entry points as one axis
    assert fastpe.kernel._rope_axes_native(W128, None, 1.0, pos, "cache", cos, sin) == 0
    assert np.array_equal(cos, want[0]) and np.array_equal(sin, want[1])
    assert fastpe.kernel._rope_axes_native(W128, None, 1.0, pos, "n_axes", cos) == 1
    ax = _c_axis((16, 24, 24), "contiguous")
    assert fastpe.kernel._rope_axes_native(W128, ax, 1.0, pos, "n_axes", cos) == 3
    # a multi-axis handle refuses the 1-axis entry points
    c2, s2 = np.full((10, 128), 7.0), np.full((10, 128), 7.0)
    assert fastpe.kernel._rope_axes_native(W128, ax, 1.0, pos, "cache1", c2, s2) == E["inval"]
    assert (c2 == 7.0).all() and (s2 == 7.0).all()
    # handles refused: an axis out of range, a bad frequency or attention factor
    assert fastpe.kernel._rope_axes_native(W128, ax - 1, 1.0, pos, "n_axes", cos) == -1
    assert fastpe.kernel._rope_axes_native(-W128, ax, 1.0, pos, "n_axes", cos) == -1
    assert fastpe.kernel._rope_axes_native(W128, ax, 0.0, pos, "n_axes", cos) == -1


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"positions": None}, "null"),
        ({"positions": np.array([[0, 0, 2**60]] * 4)}, "range"),
        ({"row_stride": 100}, "stride"),
        ({"n": -5}, "size"),
        ({"overlap": True}, "overlap"),
    ],
)
def test_c_cache_axes_refusals_write_nothing(change, code):
    ax = _c_axis((16, 24, 24), "contiguous")
    pos = change.get("positions", np.zeros((4, 3), np.int64))
    buf = np.full((4, 400), 7.0)
    cos, sin = buf[:, :128], buf[:, (64 if change.get("overlap") else 200) :][:, :128]
    kw = {k: v for k, v in change.items() if k in ("row_stride", "n")}
    err = fastpe.kernel._rope_axes_native(W128, ax, 1.0, pos, "cache", cos, sin, **kw)
    assert err == E[code] and (buf == 7.0).all()


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"positions": None}, "null"),
        ({"positions": np.array([[0, 2**60, 0]] * 6)}, "range"),
        ({"ss": 64}, "stride"),
        ({"batch": -1}, "size"),
    ],
)
def test_c_apply_axes_refusals_write_nothing(change, code):
    ax = _c_axis((16, 24, 24), "contiguous")
    x = np.full((2, 3, 1, 128), 7.0)
    kw = {"batch": 2, "seq": 3, "heads": 1, "sb": 384, "ss": 128, "sh": 128}
    kw.update({k: v for k, v in change.items() if k != "positions"})
    pos = change.get("positions", np.zeros((6, 3), np.int64))
    err = fastpe.kernel._rope_axes_native(W128, ax, 1.0, pos, "apply", x, **kw)
    assert err == E[code] and (x == 7.0).all()
