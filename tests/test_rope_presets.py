"""fastpe.rope_presets without the frameworks: each family's float64 frequencies
against mpmath, the sections and layouts against the families' published
descriptions (written out here), the grid helpers against position lists written
by hand, and the argument checks.  The comparisons with the frameworks' own code
are in test_frameworks_vision.py."""

from __future__ import annotations

import contextlib
import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rules import LLAMA4

import fastpe
from fastpe import rope_presets as rp

mpmath.mp.dps = 40


def mp_ladder(dim, theta, linear=1):
    """``theta ** (-2i / dim) / linear`` for i < dim / 2, in 40 digits."""
    t = mpmath.mpf(theta)
    return [t ** (-mpmath.mpf(2 * i) / dim) / mpmath.mpf(linear) for i in range(dim // 2)]


def assert_mp_close(w, ref, rel=1e-15):
    ref = np.array([float(x) for x in ref])
    assert w.shape == ref.shape
    np.testing.assert_allclose(w, ref, rtol=rel, atol=0)


def qwen_config(**rope):
    return {
        "text_config": {
            "hidden_size": 256,
            "num_attention_heads": 2,
            "max_position_embeddings": 4096,
            "rope_parameters": rope,
        }
    }


# ---------------------------------------------------------------- float64 vs mpmath


@pytest.mark.parametrize("theta, sections", [(1e6, [16, 24, 24]), (10000.0, [8, 28, 28])])
def test_qwen2_vl_float64_frequencies_and_sections(theta, sections):
    p = rp.qwen2_vl(
        qwen_config(rope_type="default", rope_theta=theta, mrope_section=sections),
        precision="float64",
    )
    assert_mp_close(p.inv_freq, mp_ladder(128, theta))
    assert p.sections == tuple(sections)
    assert (p.section_layout, p.layout, p.attention_factor, p.rotary_dim) == (
        "contiguous",
        "half",
        1.0,
        128,
    )


def test_qwen2_vl_old_mrope_spelling_and_top_level_theta():
    # checkpoints before rope_parameters: rope_scaling {"type": "mrope"} and rope_theta beside it
    cfg = {
        "hidden_size": 256,
        "num_attention_heads": 2,
        "rope_theta": 1e6,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    }
    p = rp.qwen2_vl(cfg, precision="float64")
    assert_mp_close(p.inv_freq, mp_ladder(128, 1e6))


def test_qwen2_vl_scaled_rule_passes_through():
    cfg = qwen_config(rope_type="linear", rope_theta=1e6, factor=4.0, mrope_section=[16, 24, 24])
    p = rp.qwen2_vl(cfg, precision="float64")
    assert_mp_close(p.inv_freq, mp_ladder(128, 1e6, 4))


def test_qwen3_vl_interleaved_default_sections():
    cfg = {
        "head_dim": 128,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_interleaved": True},
    }
    p = rp.qwen3_vl(cfg, precision="float64")
    assert p.sections == (24, 20, 20) and p.section_layout == "interleaved"
    assert_mp_close(p.inv_freq, mp_ladder(128, 5e6))


def test_pixtral_float64_rows_then_columns():
    p = rp.pixtral(
        {
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0},
        },
        precision="float64",
    )
    ladder = mp_ladder(64, 10000.0)
    assert_mp_close(p.inv_freq, ladder[0::2] + ladder[1::2])
    assert p.sections == (16, 16) and p.axes == ("h", "w") and p.layout == "half"


@pytest.mark.parametrize(
    "theta, linear, ntk", [(10000.0, 1.0, 1.0), (500.0, 2.5, 3.0), (1e6, 0.3, 1.7)]
)
def test_diffusers_1d_float64(theta, linear, ntk):
    p = rp.diffusers_1d(64, theta=theta, linear_factor=linear, ntk_factor=ntk, precision="float64")
    assert_mp_close(p.inv_freq, mp_ladder(64, theta * ntk, linear))
    assert p.sections is None and p.layout == "interleaved"
    assert rp.diffusers_1d(8, use_real=True, repeat_interleave_real=False).layout == "half"
    assert rp.diffusers_1d(8, use_real=True).layout == "interleaved"


def test_diffusers_1d_precision_follows_freqs_dtype():
    a = rp.diffusers_1d(64, freqs_dtype="float64")
    np.testing.assert_array_equal(a.inv_freq, rp.diffusers_1d(64, precision="float64").inv_freq)
    b = rp.diffusers_1d(64)
    assert not np.array_equal(a.inv_freq, b.inv_freq)
    np.testing.assert_array_equal(b.inv_freq, b.inv_freq.astype(np.float32))


def test_diffusers_2d_and_cogvideox_float64():
    p = rp.diffusers_2d(64, precision="float64")
    assert_mp_close(p.inv_freq, mp_ladder(32, 10000.0) * 2)
    assert p.sections == (16, 16) and p.axes == ("w", "h") and p.layout == "interleaved"
    c = rp.cogvideox_3d(64, precision="float64")  # 16 time, 24 height, 24 width dims
    assert_mp_close(c.inv_freq, mp_ladder(16, 1e4) + mp_ladder(24, 1e4) + mp_ladder(24, 1e4))
    assert c.sections == (8, 12, 12) and c.axes == ("t", "h", "w")


def test_flux_float64_by_default():
    p = rp.flux(10000, [16, 56, 56])
    assert_mp_close(p.inv_freq, mp_ladder(16, 1e4) + mp_ladder(56, 1e4) + mp_ladder(56, 1e4))
    assert p.sections == (8, 28, 28) and p.layout == "interleaved"
    f32 = rp.flux(10000, [16, 56, 56], precision="float32").inv_freq
    np.testing.assert_array_equal(f32, f32.astype(np.float32))


# ---------------------------------------------------------------- the description


def test_preset_is_immutable_and_kwargs_splat():
    p = rp.qwen2_vl(qwen_config(rope_type="default", rope_theta=1e6, mrope_section=[16, 24, 24]))
    with pytest.raises(ValueError):
        p.inv_freq[0] = 1.0
    with pytest.raises(AttributeError):
        p.sections = (1, 2)  # type: ignore[misc]
    kw = p.kwargs()
    assert kw["sections"] == (16, 24, 24) and kw["section_layout"] == "contiguous"
    assert kw["layout"] == "half" and kw["inv_freq"] is p.inv_freq
    one = rp.diffusers_1d(16).kwargs()
    assert "sections" not in one and "section_layout" not in one


@pytest.mark.parametrize(
    "kw", [dict(dim=16), dict(dim=32, use_real=True, repeat_interleave_real=False)]
)
def test_one_axis_preset_in_rope_cache_and_apply_rope(kw, rng):
    """One axis needs no sections: today's rope_cache and apply_rope take it, and
    give the angles position * frequency in the preset's layout."""
    p = rp.diffusers_1d(**kw)
    pos = rng.integers(0, 5000, size=40)
    cos, sin = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=np.float64, **p.kwargs())
    angle = pos[:, None] * p.inv_freq
    full = np.repeat(angle, 2, 1) if p.layout == "interleaved" else np.concatenate([angle] * 2, 1)
    np.testing.assert_allclose(cos, np.cos(full), atol=1e-12, rtol=0)
    np.testing.assert_allclose(sin, np.sin(full), atol=1e-12, rtol=0)
    q = rng.standard_normal((1, 2, 40, p.rotary_dim))
    x = q.copy()
    fastpe.apply_rope(x, positions=pos, **p.kwargs())
    if p.layout == "interleaved":
        a, b = q[..., 0::2], q[..., 1::2]
        c, s = np.cos(angle), np.sin(angle)
        np.testing.assert_allclose(x[..., 0::2], a * c - b * s, atol=1e-12)
        np.testing.assert_allclose(x[..., 1::2], b * c + a * s, atol=1e-12)
    else:
        h = p.rotary_dim // 2
        a, b = q[..., :h], q[..., h:]
        c, s = np.cos(angle), np.sin(angle)
        np.testing.assert_allclose(x[..., :h], a * c - b * s, atol=1e-12)
        np.testing.assert_allclose(x[..., h:], b * c + a * s, atol=1e-12)


# ---------------------------------------------------------------- grids and position ids


def test_grid_positions_by_hand():
    g = rp.grid_positions((2, 2, 3), leading=2)
    expect = [[0, 0, 0], [1, 1, 1]] + [
        [2 + t, 2 + h, 2 + w] for t in range(2) for h in range(2) for w in range(3)
    ]
    np.testing.assert_array_equal(g, expect)
    assert g.dtype == np.int64 and g.flags.c_contiguous
    np.testing.assert_array_equal(rp.grid_positions((3,), start=5), [[5], [6], [7]])
    np.testing.assert_array_equal(rp.grid_positions((0, 4)), np.zeros((0, 2)))


def test_preset_grid_orders_the_axes():
    d2 = rp.diffusers_2d(16)
    np.testing.assert_array_equal(d2.grid((2, 3)), [[w, h] for h in range(2) for w in range(3)])
    np.testing.assert_array_equal(rp.diffusers_1d(8).grid((4,)), [0, 1, 2, 3])
    with pytest.raises(ValueError, match="shape must have 2 sizes"):
        d2.grid((1, 2, 3))


def test_qwen_vl_position_ids_by_hand():
    # 2 text, an image of grid (1, 4, 6) merged by 2 -> 1 x 2 x 3 = 6 tokens, 2 text
    types = np.array([[0, 0, 1, 1, 1, 1, 1, 1, 0, 0]])
    pos, delta = rp.qwen_vl_position_ids(types, image_grid_thw=[[1, 4, 6]])
    img = [[2, 2 + h, 2 + w] for h in range(2) for w in range(3)]
    # text resumes at 2 + max(4, 6) // 2 = 5
    expect = [[0, 0, 0], [1, 1, 1], *img, [5, 5, 5], [6, 6, 6]]
    np.testing.assert_array_equal(pos[0], expect)
    assert delta.tolist() == [[7 - 10]]
    # left padding: masked tokens get 0, the rest as without them
    padded = np.concatenate([[[0, 0]], types], axis=1)
    mask = np.array([[0, 0] + [1] * 10])
    pos2, delta2 = rp.qwen_vl_position_ids(padded, image_grid_thw=[[1, 4, 6]], attention_mask=mask)
    np.testing.assert_array_equal(pos2[0], [[0, 0, 0]] * 2 + expect)
    assert delta2.tolist() == delta.tolist()


def test_qwen_vl_video_time_intervals_by_hand():
    # a video of 3 frames, 2 x 2 patches merged to 1 x 1: times int(f * 1.5)
    types = np.array([[0, 2, 2, 2]])
    pos, _ = rp.qwen_vl_position_ids(types, video_grid_thw=[[3, 2, 2]], video_time_intervals=[1.5])
    np.testing.assert_array_equal(pos[0], [[0, 0, 0], [1, 1, 1], [2, 1, 1], [4, 1, 1]])
    pos3, _ = rp.qwen_vl_position_ids(
        np.array([[2, 0, 2, 0, 2]]), video_grid_thw=[[3, 2, 2]], split_video_frames=True
    )
    np.testing.assert_array_equal(pos3[0], [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]])


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: rp.qwen2_vl(qwen_config(rope_theta=1e6, mrope_section=[16, 24, 23])),
            r"mrope_section.*sum to rotary_dim / 2 = 64, got 63",
        ),
        (lambda: rp.qwen2_vl(qwen_config(rope_theta=1e6, mrope_section="16,24,24")), "list"),
        (
            lambda: rp.qwen2_vl(qwen_config(rope_theta=-1.0, mrope_section=[16, 24, 24])),
            "rope_theta",
        ),
        (lambda: rp.qwen2_vl(42), "config must be"),
        (
            lambda: rp.qwen2_vl(qwen_config(mrope_section=[16, 24, 24]), precision="float16"),
            "precision",
        ),
        (lambda: rp.diffusers_1d(7), "dim must be even, got 7"),
        (lambda: rp.diffusers_1d(8, theta=0.0), r"theta must be finite and > 0, got 0\.0"),
        (lambda: rp.diffusers_1d(8, linear_factor=float("nan")), "linear_factor"),
        (lambda: rp.diffusers_1d(8, ntk_factor=-2), "ntk_factor"),
        (lambda: rp.diffusers_1d(8, theta=1e300, ntk_factor=1e300), "theta \\* ntk_factor"),
        (lambda: rp.diffusers_1d(8, freqs_dtype="float16"), "freqs_dtype"),
        (lambda: rp.diffusers_1d(8, use_real=1), "use_real must be True or False"),
        (lambda: rp.diffusers_2d(18), "embed_dim must be a multiple of 4, got 18"),
        (lambda: rp.cogvideox_3d(24), "must be even"),
        (lambda: rp.flux(10000, [16, 57]), "axes_dim\\[1\\] must be even, got 57"),
        (lambda: rp.flux(10000, []), "axes_dim must have 1 to 3 entries"),
        (lambda: rp.flux(10000, 16), "axes_dim must be a list"),
        (lambda: rp.pixtral({"hidden_size": 36, "num_attention_heads": 2}), "multiple of 4"),
        (lambda: rp.grid_positions((2, -1)), r"shape\[1\]"),
        (lambda: rp.grid_positions((2, 2), leading=-1), "leading"),
        (lambda: rp.grid_positions((2, 2.0)), "integer"),
        (
            lambda: rp.qwen_vl_position_ids(np.array([[0, 1, 1]]), image_grid_thw=[[1, 2, 2]]),
            "run of 2 image tokens does not match",
        ),
        (lambda: rp.qwen_vl_position_ids(np.array([[0, 1]])), "image_grid_thw has 0 grids"),
        (lambda: rp.qwen_vl_position_ids(np.array([[0, 3]])), "entries must be 0"),
        (lambda: rp.qwen_vl_position_ids(np.array([0, 1])), "2-D integer array"),
        (
            lambda: rp.qwen_vl_position_ids(np.array([[0, 0]]), attention_mask=[[1]]),
            "attention_mask must have",
        ),
        (
            lambda: rp.qwen_vl_position_ids(
                np.array([[2]]), video_grid_thw=[[1, 2, 2]], video_time_intervals=[1.0, 2.0]
            ),
            "one entry per video",
        ),
    ],
)
def test_refusals_name_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_caller_config_is_not_modified():
    cfg = qwen_config(type="mrope", rope_theta=1e6, mrope_section=[16, 24, 24])
    before = repr(cfg)
    rp.qwen2_vl(cfg)
    assert repr(cfg) == before


def test_qwen2_vl_yarn_keeps_its_attention_factor():
    cfg = qwen_config(
        rope_type="yarn",
        rope_theta=1e6,
        factor=4.0,
        original_max_position_embeddings=1024,
        mrope_section=[16, 24, 24],
    )
    p = rp.qwen2_vl(cfg, precision="float64")
    assert p.attention_factor == pytest.approx(0.1 * np.log(4.0) + 1.0, rel=1e-15)
    assert p.kwargs()["attention_factor"] == p.attention_factor
    w = np.array([float(x) for x in mp_ladder(128, 1e6)])
    # YaRN keeps the fastest pairs and divides the slowest by the factor
    assert p.inv_freq[0] == pytest.approx(w[0], rel=1e-15)
    assert p.inv_freq[-1] == pytest.approx(w[-1] / 4.0, rel=1e-15)


# ---------------------------------------------------------------- hostile arguments

HOSTILE = st.sampled_from(
    [
        None,
        "x",
        -1,
        0,
        1,
        3,
        2**70,
        float("nan"),
        float("inf"),
        -0.5,
        1e300,
        True,
        [],
        [1, 2],
        {},
        {"rope_theta": "x"},
        object(),
        np.array([[1, 2]]),
        np.float32(2.5),
        (1, 2, 3),
    ]
)


def _config():
    return {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "rope_parameters": {"rope_theta": 1e6, "mrope_section": [4, 6, 6]},
    }


CALLS = {
    "qwen2_vl": (rp.qwen2_vl, {"config": _config(), "precision": "float32"}),
    "qwen3_vl": (rp.qwen3_vl, {"config": _config(), "precision": "float64"}),
    "pixtral": (rp.pixtral, {"config": {"hidden_size": 64, "num_attention_heads": 2}}),
    "diffusers_1d": (
        rp.diffusers_1d,
        {
            "dim": 16,
            "theta": 100.0,
            "use_real": True,
            "linear_factor": 2.0,
            "ntk_factor": 1.5,
            "repeat_interleave_real": False,
            "freqs_dtype": "float32",
            "precision": "float64",
        },
    ),
    "diffusers_2d": (rp.diffusers_2d, {"embed_dim": 32, "use_real": True}),
    "cogvideox_3d": (rp.cogvideox_3d, {"embed_dim": 64, "theta": 10.0}),
    "flux": (rp.flux, {"theta": 10000, "axes_dim": [8, 12, 12]}),
    "grid_positions": (rp.grid_positions, {"shape": (2, 3), "leading": 1, "start": 4}),
    "qwen_vl_position_ids": (
        rp.qwen_vl_position_ids,
        {
            "mm_token_type_ids": np.array([[0, 1, 1, 2, 2, 2]]),
            "image_grid_thw": [[1, 2, 4]],
            "video_grid_thw": [[3, 2, 2]],
            "attention_mask": np.ones((1, 6)),
            "spatial_merge_size": 2,
            "video_time_intervals": [1.5],
        },
    ),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@given(data=st.data())
@settings(max_examples=80, deadline=None)
def test_hostile_arguments_are_value_or_type_errors(name, data):
    """Any argument replaced by a hostile value: the call succeeds or raises a
    ValueError/TypeError (never another exception), and the config passed is
    left as it was."""
    fn, valid = CALLS[name]
    key = data.draw(st.sampled_from(sorted(valid)))
    kw = dict(valid, **{key: data.draw(HOSTILE)})
    before = repr(kw)
    with contextlib.suppress(ValueError, TypeError):
        fn(**kw)
    assert repr(kw) == before


# ---------------------------------------------------------------- timm (float64 vs mpmath)


@pytest.mark.parametrize("max_res", [224, 256, 100])
@pytest.mark.parametrize("linear", [True, False])
def test_timm_pixel_bands_float64_against_mpmath(max_res, linear):
    nb = 12
    p = rp.timm_rotary(48, max_res=max_res, linear_bands=linear, precision="float64")
    t = [mpmath.mpf(i) / (nb - 1) for i in range(nb)]
    if linear:  # linspace(1, max_res / 2) * pi
        ref = [(1 + (mpmath.mpf(max_res) / 2 - 1) * x) * mpmath.pi for x in t]
    else:  # 2 ** linspace(0, log2(max_res) - 1) * pi
        ref = [2 ** ((mpmath.log(max_res, 2) - 1) * x) * mpmath.pi for x in t]
    assert_mp_close(p.inv_freq[:nb], ref, rel=5e-16)
    assert np.array_equal(p.inv_freq[nb:], p.inv_freq[:nb])
    assert (p.sections, p.layout, p.axes) == ((nb, nb), "interleaved", ("h", "w"))


def test_timm_language_bands_and_dinov3_periods_against_mpmath():
    p = rp.timm_rotary(64, temperature=100.0, in_pixels=False, precision="float64")
    # 1 / temperature ** (i / (dim // 4))
    assert_mp_close(p.inv_freq[:16], [mpmath.mpf(100) ** (-mpmath.mpf(i) / 16) for i in range(16)])
    d = rp.timm_dinov3(64, precision="float64")  # 2 pi / 100 ** (2i / 32)
    ref = [2 * mpmath.pi / mpmath.mpf(100) ** (mpmath.mpf(2 * i) / 32) for i in range(16)]
    assert_mp_close(d.inv_freq[:16], ref, rel=5e-16)
    assert (d.sections, d.layout) == ((16, 16), "half")
    d = rp.timm_dinov3(32, None, 0.5, 64.0, rotate_half=False, precision="float64")
    ref = [2 * mpmath.pi / (mpmath.mpf(0.5) * 128 ** (mpmath.mpf(i) / 7)) for i in range(8)]
    assert_mp_close(d.inv_freq[:8], ref, rel=5e-16)
    assert d.layout == "interleaved"


def test_timm_positions_float64_written_out():
    # pixel: linspace(-1, 1, 5) on rows, linspace(-1, 1, 3) on columns, row-major
    g = rp.timm_positions([5, 3], precision="float64")
    rows, cols = [-1, -0.5, 0, 0.5, 1], [-1, 0, 1]
    assert g.tolist() == [[r, c] for r in rows for c in cols]
    # index grid with EVA-02's rescaling to a 16 x 16 reference, offset 0.5, xy order
    g = rp.timm_positions(
        [3, 2], in_pixels=False, ref_feat_shape=[16, 16], grid_offset=0.5, grid_indexing="xy"
    )
    want = [[(c + 0.5) / 2 * 16, (r + 0.5) / 3 * 16] for r in range(3) for c in range(2)]
    np.testing.assert_allclose(g, want, rtol=1e-7)
    g64 = rp.timm_positions(
        [3, 2],
        in_pixels=False,
        ref_feat_shape=[16, 16],
        grid_offset=0.5,
        grid_indexing="xy",
        precision="float64",
    )
    assert g64.tolist() == [[float(x) for x in row] for row in want]
    # DINOv3's centred coordinates: ((i + 0.5) / n) * 2 - 1, by the larger side ("max")
    g = rp.timm_positions(
        [2, 4], grid_type="centered", normalize_coords="max", precision="float64"
    )
    want = [[(r + 0.5) / 4 * 2 - 1, (c + 0.5) / 4 * 2 - 1] for r in range(2) for c in range(4)]
    assert g.tolist() == want


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: rp.timm_rotary(2), ValueError, "dim"),
        (lambda: rp.timm_rotary(64, max_res=0), ValueError, "max_res"),
        (lambda: rp.timm_rotary(64, in_pixels=False, temperature=-1.0), ValueError, "temperature"),
        (lambda: rp.timm_rotary(64, n_axes=4), ValueError, "n_axes"),
        (lambda: rp.timm_rotary(64, precision="float16"), ValueError, "precision"),
        (lambda: rp.timm_dinov3(64, None), ValueError, "temperature"),
        (lambda: rp.timm_dinov3(64, None, 0.0, 10.0), ValueError, "min_period"),
        (lambda: rp.timm_positions([0, 3]), ValueError, "feat_shape"),
        (lambda: rp.timm_positions([3, 3, 3, 3]), ValueError, "feat_shape"),
        (lambda: rp.timm_positions("ab"), TypeError, "feat_shape"),
        (lambda: rp.timm_positions([3, 3], grid_type="polar"), ValueError, "grid_type"),
        (lambda: rp.timm_positions([3, 3], grid_indexing="yx"), ValueError, "grid_indexing"),
        (lambda: rp.timm_positions([3, 3], ref_feat_shape=[4]), ValueError, "ref_feat_shape"),
        (lambda: rp.timm_positions([3, 3], grid_offset=float("nan")), ValueError, "grid_offset"),
        (
            lambda: rp.timm_positions([3], grid_type="centered", normalize_coords="mean"),
            ValueError,
            "normalize_coords",
        ),
    ],
)
def test_timm_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------- HunyuanVideo, Lumina, Allegro


def test_hunyuan_video_lumina2_and_allegro_float64_against_mpmath():
    p = rp.hunyuan_video(2, 1, [16, 56, 56], precision="float64")  # theta 256 by default
    ref = mp_ladder(16, 256) + mp_ladder(56, 256) + mp_ladder(56, 256)
    assert_mp_close(p.inv_freq, ref)
    assert (p.sections, p.layout, p.axes) == ((8, 28, 28), "interleaved", ("t", "h", "w"))
    p = rp.lumina2(10000, [32, 32, 32])  # float64 by default, as the module on the CPU
    assert_mp_close(p.inv_freq, mp_ladder(32, 10000) * 3)
    for a, p in enumerate(rp.allegro(96, precision="float64")):
        assert_mp_close(p.inv_freq, mp_ladder(32, 10000))
        assert (p.sections, p.layout, p.axes) == (None, "half", ("thw"[a],))


def test_lumina_next_2d_pairs_alternate_row_and_column():
    p = rp.lumina_next_2d(32, linear_factor=2.0, ntk_factor=3.0, precision="float64")
    # get_1d_rotary_pos_embed(16, ...): 1 / (10000 * 3) ** (2i / 16) / 2, each twice
    w = mp_ladder(16, 30000, linear=2)
    assert_mp_close(p.inv_freq, [x for x in w for _ in (0, 1)])
    assert (p.sections, p.section_layout, p.layout) == ((8, 8), "interleaved", "interleaved")
    # pair 2j follows the row, pair 2j + 1 the column
    pos = np.array([[3.0, 0.0], [0.0, 5.0]])
    c, _ = fastpe.rope_cache(32, positions=pos, dtype=np.float64, **p.kwargs())
    np.testing.assert_allclose(c[0, 0::4], np.cos(3.0 * p.inv_freq[0::2]), atol=1e-15)
    np.testing.assert_allclose(c[0, 2::4], 1.0)
    np.testing.assert_allclose(c[1, 2::4], np.cos(5.0 * p.inv_freq[1::2]), atol=1e-15)
    np.testing.assert_allclose(c[1, 0::4], 1.0)


def test_allegro_positions_written_out():
    pos = rp.allegro_positions((2, 3), 2, (2.0, 1.0, 3.0), precision="float64")
    want = [[t / 2, r, c / 3] for t in range(2) for r in range(2) for c in range(3)]
    assert pos.tolist() == want
    pos32 = rp.allegro_positions((2, 3), 2, (2.0, 1.0, 3.0))
    assert pos32.tolist() == [[float(np.float32(x)) for x in row] for row in want]


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: rp.hunyuan_video(0, 1, [8, 8, 8]), ValueError, "patch_size"),
        (lambda: rp.hunyuan_video(2, 1, [8, 8]), ValueError, "rope_dim"),
        (lambda: rp.hunyuan_video(2, 1, [8, 7, 8]), ValueError, "rope_dim"),
        (lambda: rp.lumina_next_2d(30), ValueError, "embed_dim"),
        (lambda: rp.lumina_next_2d(32, ntk_factor=0.0), ValueError, "ntk_factor"),
        (lambda: rp.lumina2(10000, [32, 32, 32], [300, 512]), ValueError, "axes_lens"),
        (lambda: rp.allegro(100), ValueError, "embed_dim"),
        (lambda: rp.allegro_positions((2, 2), 2, (1.0, 0.0, 1.0)), ValueError, "interpolation"),
        (lambda: rp.allegro_positions((2,), 2), ValueError, "grid_size"),
    ],
)
def test_diffusers_video_presets_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------- Gemma 3, Llama 4


def test_gemma3_from_a_config_json_dict():
    cfg = {
        "head_dim": 64,
        "max_position_embeddings": 131072,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        },
    }
    p = rp.gemma3({"text_config": cfg}, precision="float64")
    assert_mp_close(p["sliding_attention"].inv_freq, mp_ladder(64, 10000))
    assert_mp_close(p["full_attention"].inv_freq, mp_ladder(64, 1e6, linear=8))
    assert all(x.layout == "half" and x.sections is None for x in p.values())
    with pytest.raises(ValueError, match="full_attention"):
        rp.gemma3({**cfg, "rope_parameters": {"sliding_attention": {"rope_theta": 1e4}}})
    with pytest.raises(TypeError, match="layer_types"):
        rp.gemma3({"head_dim": 64})


def test_llama4_equal_factors_and_layers_without_rope():
    cfg = {"head_dim": 128, "num_hidden_layers": 4, "no_rope_layers": [1, 1, 0, 1]}
    layers = rp.llama4({**cfg, "rope_parameters": LLAMA4}, precision="float64")
    assert [x is None for x in layers] == [False, False, True, False]
    # wavelengths 2 pi / w above 8192 / 1 are divided by 16, the others kept
    ladder = [float(x) for x in mp_ladder(128, 500000)]
    want = [w / 16 if 2 * math.pi / w > 8192 else w for w in ladder]
    np.testing.assert_allclose(layers[0].inv_freq, want, rtol=1e-15)
    assert layers[0].layout == "interleaved"
    with pytest.raises(ValueError, match="no_rope_layers"):
        rp.llama4({**cfg, "no_rope_layers": [1, 0], "rope_parameters": LLAMA4})


def test_kwargs_leave_out_an_attention_factor_of_one_and_keep_the_same_result():
    """kwargs() leaves out attention_factor=1 (what inv_freq implies), so a decoding
    step with a preset's arguments takes the fast path, with the bits of the explicit
    factor's general path."""
    from fastpe import kernel

    p = rp.qwen2_vl(qwen_config(type="mrope", rope_theta=1e6, mrope_section=[16, 24, 24]))
    assert p.attention_factor == 1.0 and "attention_factor" not in p.kwargs()
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 4, 1, 128)).astype(np.float32)
    pos = np.array([[7, 3, 5]], np.int64)
    ref = fastpe.apply_rope(q.copy(), positions=pos, **p.kwargs(), attention_factor=1.0)
    fastpe.apply_rope(q.copy(), positions=pos, **p.kwargs())  # plans
    got = q.copy()
    args = (got, None, None, None, 0, pos, p.sections, p.section_layout, -2, p.layout,
            None, "float32", p.inv_freq, None, None)  # fmt: skip
    assert kernel.rope_apply_axes(*args) is not None  # served by the fast path
    np.testing.assert_array_equal(got, ref)
