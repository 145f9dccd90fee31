"""Optional: fastpe.rope_presets against the vision and multimodal frameworks' own code.

Each test skips where its framework does not import (CI: ``tools/test_frameworks.sh``
with the pinned ``requirements-frameworks.txt``).  Three things are compared:

- the frequencies: a preset's float32 ones are the framework's own ``inv_freq`` to
  the bit once torch's float32 power stands in for the correctly rounded one
  fastpe uses (the presets' own steps and the library's rules, as tests/test_rope.py
  does), and within a
  few ulps without it;
- the cos/sin each framework builds, with its own layout code run on float64
  angles, against the preset expanded by :func:`expand` (the layout rules written
  out here, independently of fastpe's kernel): within 1e-13;
- the position ids: :func:`fastpe.rope_presets.qwen_vl_position_ids` against the
  model's ``get_rope_index``, and each preset's ``grid`` against the grid the
  framework builds (through the cos/sin above).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_frameworks import _import

import fastpe
from fastpe import rope_presets

F64 = np.float64


def float32_ulps(a, b):
    a = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    return np.abs(a - np.asarray(b, np.float32).view(np.int32).astype(np.int64))


def f64_tol(max_angle):
    """1e-13 plus a float64 framework's own error: it rounds each angle
    ``position * frequency`` once (half an ulp, 2**-53 relative), fastpe does not."""
    return 1e-13 + 2.0**-53 * float(max_angle)


def axis_of_pairs(preset):
    """The position axis each rotary pair follows, from the preset's sections."""
    n = len(preset.inv_freq)
    if preset.sections is None:
        return np.zeros(n, dtype=int)
    if preset.section_layout == "contiguous":
        return np.repeat(np.arange(len(preset.sections)), preset.sections)
    s = preset.sections  # Qwen3-VL: H at i % 3 == 1 below 3*s[1], W at i % 3 == 2 below 3*s[2]
    i = np.arange(n)
    return np.where(
        (i % 3 == 1) & (i < 3 * s[1]), 1, np.where((i % 3 == 2) & (i < 3 * s[2]), 2, 0)
    )


def expand(preset, positions):
    """float64 (cos, sin) of shape (tokens, rotary_dim) in the preset's layout."""
    pos = np.asarray(positions, dtype=F64)
    pos = pos[:, None] if pos.ndim == 1 else pos
    angle = pos[:, axis_of_pairs(preset)] * preset.inv_freq
    full = (
        np.concatenate([angle, angle], axis=-1)
        if preset.layout == "half"
        else np.repeat(angle, 2, axis=-1)
    )
    a = preset.attention_factor
    return np.cos(full) * a, np.sin(full) * a


@pytest.fixture
def torch_pow(monkeypatch):
    """torch's own power (float32 or float64, as the step's precision) inside
    fastpe's frequency steps, in place of the correctly rounded one."""
    torch = _import("torch")
    from test_rope import with_torch_power

    from fastpe import kernel

    def pow_(base, e):  # one tensor of exponents, as timm's expressions
        return (float(base) ** torch.from_numpy(e.copy())).numpy()

    timm_rule = kernel._timm_frequencies
    monkeypatch.setattr(
        kernel, "_timm_frequencies", lambda *a, **kw: timm_rule(*a, **kw, pow32=pow_)
    )
    with_torch_power(monkeypatch)


class _Outer:
    """Stands in for ``torch`` in diffusers' embeddings module: records the
    frequencies each ``torch.outer(pos, freqs)`` gets, and runs everything else."""

    def __init__(self, torch):
        self._torch = torch
        self.freqs: list = []

    def outer(self, pos, freqs):
        self.freqs.append(freqs.clone())
        return self._torch.outer(pos, freqs)

    def __getattr__(self, name):
        return getattr(self._torch, name)


def diffusers_freqs(call):
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    rec = _Outer(torch)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(emb, "torch", rec)
        call()
    return [f.numpy() for f in rec.freqs]


def float64_get_1d(monkeypatch):
    """diffusers' get_1d_rotary_pos_embed with float64 positions and frequencies and
    no float32 rounding of its cos/sin (the real forms end in ``.float()``): the
    complex form in float64, laid out as the real forms lay it out."""
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    original = emb.get_1d_rotary_pos_embed

    def get_1d(
        dim,
        pos,
        theta=10000.0,
        use_real=False,
        linear_factor=1.0,
        ntk_factor=1.0,
        repeat_interleave_real=True,
        freqs_dtype=None,
    ):
        pos = torch.as_tensor(np.asarray(pos, dtype=F64)) if not isinstance(pos, int) else pos
        pos = pos.double() if isinstance(pos, torch.Tensor) else pos
        cis = original(
            dim,
            pos,
            theta=theta,
            use_real=False,
            linear_factor=linear_factor,
            ntk_factor=ntk_factor,
            freqs_dtype=torch.float64,
        )
        assert cis.dtype == torch.complex128
        if not use_real:
            return cis
        c, s = cis.real, cis.imag
        if repeat_interleave_real:
            return c.repeat_interleave(2, dim=1), s.repeat_interleave(2, dim=1)
        return torch.cat([c, c], dim=-1), torch.cat([s, s], dim=-1)

    monkeypatch.setattr(emb, "get_1d_rotary_pos_embed", get_1d)
    return emb


# ---------------------------------------------------------------- transformers: Qwen-VL


def qwen_text_config(family, **kw):
    tr = _import("transformers")
    cls = {
        "qwen2_vl": tr.Qwen2VLTextConfig,
        "qwen2_5_vl": tr.Qwen2_5_VLTextConfig,
        "qwen3_vl": tr.Qwen3VLTextConfig,
    }[family]
    return cls(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=64,
        **kw,
    )


def qwen_rotary(family, config):
    m = {
        "qwen2_vl": "transformers.models.qwen2_vl.modeling_qwen2_vl",
        "qwen2_5_vl": "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl",
        "qwen3_vl": "transformers.models.qwen3_vl.modeling_qwen3_vl",
    }[family]
    mod = _import(m)
    cls = {
        "qwen2_vl": "Qwen2VLRotaryEmbedding",
        "qwen2_5_vl": "Qwen2_5_VLRotaryEmbedding",
        "qwen3_vl": "Qwen3VLTextRotaryEmbedding",
    }[family]
    return getattr(mod, cls)(config)


QWEN_CASES = [
    ("qwen2_vl", {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [4, 6, 6]}),
    ("qwen2_vl", {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 4, 4]}),
    ("qwen2_5_vl", {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [4, 6, 6]}),
    (
        "qwen3_vl",
        {
            "rope_type": "default",
            "rope_theta": 5000000.0,
            "mrope_section": [6, 5, 5],
            "mrope_interleaved": True,
        },
    ),
    ("qwen3_vl", {"rope_type": "default", "rope_theta": 500000.0, "mrope_section": [8, 4, 4]}),
]


def qwen_preset(family, config, **kw):
    return (rope_presets.qwen3_vl if family == "qwen3_vl" else rope_presets.qwen2_vl)(config, **kw)


@pytest.mark.parametrize("family, params", QWEN_CASES)
def test_qwen_vl_frequencies_are_the_models(family, params, torch_pow):
    config = qwen_text_config(family, rope_parameters=dict(params))
    theirs = qwen_rotary(family, config).inv_freq.numpy()
    p = qwen_preset(family, config)
    np.testing.assert_array_equal(p.inv_freq, theirs)
    assert p.sections == tuple(params["mrope_section"])


@pytest.mark.parametrize("family, params", QWEN_CASES)
def test_qwen_vl_frequencies_within_two_ulps_with_the_correct_power(family, params):
    config = qwen_text_config(family, rope_parameters=dict(params))
    theirs = qwen_rotary(family, config).inv_freq.numpy()
    assert np.all(float32_ulps(qwen_preset(family, config).inv_freq, theirs) <= 2)


@pytest.mark.parametrize("family, params", QWEN_CASES)
def test_qwen_vl_cos_sin_match_the_models_layout_in_float64(family, params, rng):
    """The model's own recomposition (contiguous or interleaved sections, then the
    rotate_half duplication) applied to float64 angles of random 3-axis positions."""
    torch = _import("torch")
    config = qwen_text_config(family, rope_parameters=dict(params))
    rot = qwen_rotary(family, config)
    p = qwen_preset(family, config, precision="float64")
    pos = rng.integers(0, 2**20, size=(3, 1, 37))
    freqs = torch.from_numpy(pos[..., None].astype(F64)) * torch.from_numpy(p.inv_freq.copy())
    cos = rot.recomposition_frequencies(freqs.cos()).numpy()[0]
    sin = rot.recomposition_frequencies(freqs.sin()).numpy()[0]
    ours = expand(p, pos[:, 0].T)
    np.testing.assert_allclose(ours[0], cos, atol=1e-13, rtol=0)
    np.testing.assert_allclose(ours[1], sin, atol=1e-13, rtol=0)


@pytest.mark.parametrize("family, params", QWEN_CASES)
def test_qwen_vl_float32_module_within_its_own_error(family, params, rng):
    """The module's float32 forward (its rounding of position * inv_freq) against
    the preset's exact angles: off by at most the float32 rounding of the angle."""
    torch = _import("torch")
    config = qwen_text_config(family, rope_parameters=dict(params))
    rot = qwen_rotary(family, config)
    p = qwen_preset(family, config)
    pos = rng.integers(0, 4096, size=(3, 1, 29))
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = (t.numpy()[0] for t in rot(x, torch.from_numpy(pos)))
    ours = expand(p, pos[:, 0].T)
    tol = 2.0**-24 * (1 + 2 * 4096)
    np.testing.assert_allclose(ours[0], cos, atol=tol, rtol=0)
    np.testing.assert_allclose(ours[1], sin, atol=tol, rtol=0)


def test_qwen_vl_from_a_full_config_and_a_config_json_dict():
    tr = _import("transformers")
    config = tr.Qwen2VLConfig(
        text_config=dict(
            hidden_size=64,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=64,
            num_hidden_layers=1,
            vocab_size=64,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": [4, 6, 6],
            },
        )
    )
    a = rope_presets.qwen2_vl(config)
    b = rope_presets.qwen2_vl(config.to_dict())
    np.testing.assert_array_equal(a.inv_freq, b.inv_freq)
    assert a == b._replace(inv_freq=a.inv_freq)
    theirs = qwen_rotary("qwen2_vl", config.text_config).inv_freq.numpy()
    assert np.all(float32_ulps(a.inv_freq, theirs) <= 2)


# ---------------------------------------------------------------- Qwen-VL position ids


def tiny_qwen_vl_model(family):
    torch = _import("torch")
    tr = _import("transformers")
    torch.manual_seed(0)
    text = dict(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=128,
    )
    cfg_cls, model_cls, vision = {
        "qwen2_vl": (
            tr.Qwen2VLConfig,
            tr.Qwen2VLModel,
            dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, spatial_merge_size=2),
        ),
        "qwen2_5_vl": (
            tr.Qwen2_5_VLConfig,
            tr.Qwen2_5_VLModel,
            dict(
                depth=1,
                hidden_size=32,
                out_hidden_size=64,
                num_heads=2,
                intermediate_size=32,
                spatial_merge_size=2,
                tokens_per_second=3,
            ),
        ),
        "qwen3_vl": (
            tr.Qwen3VLConfig,
            tr.Qwen3VLModel,
            dict(
                depth=1,
                hidden_size=32,
                out_hidden_size=64,
                num_heads=2,
                intermediate_size=32,
                spatial_merge_size=2,
            ),
        ),
    }[family]
    return model_cls(cfg_cls(text_config=text, vision_config=vision)).eval()


def token_types(rng, runs, batch_pad):
    """Rows of text/image/video runs ([(kind, n), ...]) with left padding."""
    rows = [np.concatenate([np.full(n, k) for k, n in r]) for r in runs]
    seq = max(map(len, rows)) + batch_pad
    types = np.zeros((len(rows), seq), dtype=np.int64)
    mask = np.zeros((len(rows), seq), dtype=np.int64)
    for i, r in enumerate(rows):
        types[i, seq - len(r) :] = r
        mask[i, seq - len(r) :] = 1
    return types, mask


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl"])
def test_qwen_vl_position_ids_are_get_rope_index(family, rng):
    torch = _import("torch")
    model = tiny_qwen_vl_model(family)
    images = np.array([[1, 4, 6], [1, 8, 2], [1, 6, 6]])
    videos = np.array([[3, 4, 4], [2, 2, 6]])
    n = lambda g: int(g[0] * (g[1] // 2) * (g[2] // 2))  # noqa: E731
    runs = [
        [(0, 5), (1, n(images[0])), (0, 3), (2, n(videos[0])), (0, 2)],
        [(0, 2), (1, n(images[1])), (0, 7), (1, n(images[2])), (2, n(videos[1])), (0, 1)],
    ]
    types, mask = token_types(rng, runs, 3)
    kw = {}
    ours_kw = {}
    if family == "qwen2_5_vl":
        kw["second_per_grid_ts"] = torch.tensor([0.5, 1.7])
        ours_kw["video_time_intervals"] = (3 * kw["second_per_grid_ts"]).tolist()
    if family == "qwen3_vl":
        ours_kw["split_video_frames"] = True
        # Qwen3-VL frames are separate runs: timestamps between them in the real prompts
        runs = [
            [(0, 5), (1, n(images[0])), (0, 3)] + [(2, 4), (0, 1)] * 3 + [(0, 2)],
            [(0, 2), (1, n(images[1])), (0, 7), (1, n(images[2]))] + [(2, 3), (0, 1)] * 2,
        ]
        types, mask = token_types(rng, runs, 3)
    ids = torch.from_numpy(rng.integers(3, 100, size=types.shape))
    with torch.no_grad():
        pos, deltas = model.get_rope_index(
            ids,
            torch.from_numpy(types).int(),
            image_grid_thw=torch.from_numpy(images),
            video_grid_thw=torch.from_numpy(videos),
            attention_mask=torch.from_numpy(mask),
            **kw,
        )
    ours, ours_d = rope_presets.qwen_vl_position_ids(
        types,
        image_grid_thw=images,
        video_grid_thw=videos,
        attention_mask=mask,
        spatial_merge_size=2,
        **ours_kw,
    )
    np.testing.assert_array_equal(ours, pos.numpy().transpose(1, 2, 0))
    np.testing.assert_array_equal(ours_d, deltas.numpy())


# ---------------------------------------------------------------- Pixtral


@pytest.mark.parametrize("head_dim, theta", [(64, 10000.0), (16, 1000.0), (88, 77777.0)])
def test_pixtral_frequencies_and_layout(head_dim, theta, torch_pow, rng):
    torch = _import("torch")
    tr = _import("transformers")
    m = _import("transformers.models.pixtral.modeling_pixtral")
    config = tr.PixtralVisionConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        rope_parameters={"rope_type": "axial", "rope_theta": theta},
    )
    rot = m.PixtralVisionRotaryEmbedding(config)
    p = rope_presets.pixtral(config)
    np.testing.assert_array_equal(p.inv_freq, rot.inv_freq.numpy())
    pos = rng.integers(0, 2**20, size=(41, 2))
    exact = rope_presets.pixtral(config, precision="float64")
    freqs = torch.from_numpy(pos[..., None].astype(F64)) * torch.from_numpy(exact.inv_freq.copy())
    ours = expand(exact, pos)
    np.testing.assert_allclose(
        ours[0], rot.recomposition_frequencies(freqs.cos()).numpy(), atol=1e-13, rtol=0
    )
    np.testing.assert_allclose(
        ours[1], rot.recomposition_frequencies(freqs.sin()).numpy(), atol=1e-13, rtol=0
    )
    # the model's own position ids for a 5 x 7 patch grid are the preset's grid
    assert p.grid((5, 7)).shape == (35, 2)
    h, w = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(p.grid((5, 7)), np.stack([h.ravel(), w.ravel()], 1))


# ---------------------------------------------------------------- diffusers


ONE_D = [
    dict(dim=16),
    dict(dim=64, theta=500.0, linear_factor=2.5, ntk_factor=3.0),
    dict(dim=6, theta=10000.0, use_real=True),
    dict(dim=32, use_real=True, repeat_interleave_real=False, ntk_factor=1.7),
    dict(dim=128, theta=1e6, use_real=True, linear_factor=0.3),
]


@pytest.mark.parametrize("kw", ONE_D)
def test_diffusers_1d_frequencies(kw, torch_pow, monkeypatch):
    emb = _import("diffusers.models.embeddings")
    (theirs,) = diffusers_freqs(lambda: emb.get_1d_rotary_pos_embed(pos=5, **kw))
    p = rope_presets.diffusers_1d(**kw)
    np.testing.assert_array_equal(p.inv_freq, theirs)


@pytest.mark.parametrize("kw", ONE_D)
def test_diffusers_1d_frequencies_within_three_ulps_with_the_correct_power(kw, monkeypatch):
    emb = _import("diffusers.models.embeddings")
    (theirs,) = diffusers_freqs(lambda: emb.get_1d_rotary_pos_embed(pos=5, **kw))
    assert np.all(float32_ulps(rope_presets.diffusers_1d(**kw).inv_freq, theirs) <= 3)


@pytest.mark.parametrize("kw", ONE_D)
def test_diffusers_1d_cos_sin_float64_and_rope_cache(kw, monkeypatch, rng, torch_pow):
    """Their function with float64 positions and frequencies against the preset,
    and fastpe.rope_cache (one axis: today's API) against both."""
    torch = _import("torch")
    emb = float64_get_1d(monkeypatch)
    pos = rng.integers(0, 2**20, size=53)
    out = emb.get_1d_rotary_pos_embed(pos=pos.astype(F64), **kw)
    p = rope_presets.diffusers_1d(**kw, precision="float64")
    cos, sin = expand(p, pos)
    # the preset's float64 frequencies are correctly rounded, theirs two float64
    # steps: an ulp apart, times the position
    atol = 1e-13 + 2 * pos.max() * p.inv_freq.max() * 2.0**-52
    if kw.get("use_real"):
        np.testing.assert_allclose(cos, out[0].numpy(), atol=atol, rtol=0)
        np.testing.assert_allclose(sin, out[1].numpy(), atol=atol, rtol=0)
    else:  # the complex form pairs (2j, 2j+1): the interleaved layout
        assert p.layout == "interleaved"
        np.testing.assert_allclose(cos[:, ::2], out.real.numpy(), atol=atol, rtol=0)
        np.testing.assert_allclose(sin[:, ::2], out.imag.numpy(), atol=atol, rtol=0)
    # fastpe's angles are exact; the framework rounds position * frequency once
    fc, fs = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=F64, **p.kwargs())
    tol = f64_tol(pos.max() * p.inv_freq.max())
    np.testing.assert_allclose(fc, cos, atol=tol, rtol=0)
    np.testing.assert_allclose(fs, sin, atol=tol, rtol=0)
    del torch


@pytest.mark.parametrize("embed_dim, grid", [(64, (6, 9)), (16, (3, 3)), (88, (1, 5))])
def test_diffusers_2d_frequencies_grid_and_layout(embed_dim, grid, torch_pow, monkeypatch):
    emb = _import("diffusers.models.embeddings")
    crops = ((0, 0), grid)
    freqs = diffusers_freqs(
        lambda: emb.get_2d_rotary_pos_embed(embed_dim, crops, grid, use_real=True)
    )
    p = rope_presets.diffusers_2d(embed_dim)
    np.testing.assert_array_equal(p.inv_freq, np.concatenate(freqs))
    emb = float64_get_1d(monkeypatch)
    cos, sin = emb.get_2d_rotary_pos_embed(embed_dim, crops, grid, use_real=True)
    exact = rope_presets.diffusers_2d(embed_dim, precision="float64")
    ours = expand(exact, exact.grid(grid))
    np.testing.assert_allclose(ours[0], cos.numpy(), atol=1e-13, rtol=0)
    np.testing.assert_allclose(ours[1], sin.numpy(), atol=1e-13, rtol=0)


@pytest.mark.parametrize("embed_dim, thw", [(64, (4, 3, 5)), (128, (2, 6, 2)), (16, (1, 1, 3))])
def test_cogvideox_3d_frequencies_grid_and_layout(embed_dim, thw, torch_pow, monkeypatch):
    emb = _import("diffusers.models.embeddings")
    t, h, w = thw
    crops = ((0, 0), (h, w))
    freqs = diffusers_freqs(lambda: emb.get_3d_rotary_pos_embed(embed_dim, crops, (h, w), t))
    p = rope_presets.cogvideox_3d(embed_dim)
    np.testing.assert_array_equal(p.inv_freq, np.concatenate(freqs))
    emb = float64_get_1d(monkeypatch)
    cos, sin = emb.get_3d_rotary_pos_embed(embed_dim, crops, (h, w), t)
    exact = rope_presets.cogvideox_3d(embed_dim, precision="float64")
    ours = expand(exact, exact.grid(thw))
    np.testing.assert_allclose(ours[0], cos.numpy(), atol=1e-13, rtol=0)
    np.testing.assert_allclose(ours[1], sin.numpy(), atol=1e-13, rtol=0)


@pytest.mark.parametrize(
    "theta, axes_dim", [(10000, [16, 56, 56]), (2000, [8, 12, 12]), (256, [32, 32])]
)
def test_flux_pos_embed(theta, axes_dim, monkeypatch, rng, torch_pow):
    """FluxPosEmbed computes its frequencies in float64 on the CPU: the preset's
    default (correctly rounded) is within a few ulps of them (two float64 steps), its
    cos/sin within 1e-13 plus those ulps times the position before their float32
    rounding and within one float32 rounding after it."""
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    fm = _import("diffusers.models.transformers.transformer_flux")
    ids = rng.integers(0, 2**12, size=(31, len(axes_dim)))
    layer = fm.FluxPosEmbed(theta, axes_dim)
    freqs = diffusers_freqs(lambda: layer(torch.from_numpy(ids)))
    p = rope_presets.flux(theta, axes_dim)
    # theirs: the exponent 2i/d rounded to float64 moves theta ** x by up to
    # ln(theta) ulps, the power and the reciprocal round once each
    ulps = 2 + math.ceil(math.log(theta))
    np.testing.assert_array_max_ulp(p.inv_freq, np.concatenate(freqs), maxulp=ulps)
    atol = 1e-13 + ulps * ids.max() * p.inv_freq.max() * 2.0**-52
    cos32, sin32 = layer(torch.from_numpy(ids))
    emb = float64_get_1d(monkeypatch)
    monkeypatch.setattr(fm, "get_1d_rotary_pos_embed", emb.get_1d_rotary_pos_embed)
    cos, sin = layer(torch.from_numpy(ids))
    ours = expand(p, ids)
    np.testing.assert_allclose(ours[0], cos.numpy(), atol=atol, rtol=0)
    np.testing.assert_allclose(ours[1], sin.numpy(), atol=atol, rtol=0)
    np.testing.assert_allclose(ours[0], cos32.numpy(), atol=2.0**-24, rtol=0)
    np.testing.assert_allclose(ours[1], sin32.numpy(), atol=2.0**-24, rtol=0)


# ---------------------------------------------------------------- rope_cache, apply_rope


def check_cache(p, positions, cos64, sin64, cos32=None, sin32=None, p64=None):
    """fastpe.rope_cache with the preset against the framework's cos/sin: float64
    within 1e-13 plus the framework's rounding of the angle; float32 within the
    framework's own float32 error (test_frameworks.f32_tol).  ``p64``: the preset
    whose frequencies the float64 run used, where they are not ``p``'s."""
    from test_frameworks import f32_tol

    pos = np.asarray(positions)
    p32, p = p, (p if p64 is None else p64)
    max_angle = float(pos.max(initial=0)) * float(p.inv_freq.max()) * p.attention_factor
    fc, fs = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=F64, **p.kwargs())
    np.testing.assert_allclose(fc, cos64, atol=f64_tol(max_angle), rtol=0)
    np.testing.assert_allclose(fs, sin64, atol=f64_tol(max_angle), rtol=0)
    if cos32 is not None:
        c, s = fastpe.rope_cache(p32.rotary_dim, positions=pos, **p32.kwargs())
        assert c.dtype == np.float32
        np.testing.assert_allclose(c, cos32, atol=f32_tol(max_angle), rtol=0)
        np.testing.assert_allclose(s, sin32, atol=f32_tol(max_angle), rtol=0)


def check_apply(p, positions, apply64, apply32, rng, heads=(4, 2), p64=None):
    """fastpe.apply_rope (float32, in place) with the preset against the framework's
    apply function run in float64 on the same float32 inputs (one rounding apart:
    2 float32 ulps of the largest output) and in float32 (its own error).  ``p64``:
    the preset the float64 run's frequencies are, where they are not ``p``'s."""
    from test_frameworks import f32_tol

    torch = _import("torch")
    pos = np.asarray(positions)
    angle = float(pos.max()) * float(p.inv_freq.max())
    seq = pos.shape[0]
    q = rng.standard_normal((1, heads[0], seq, p.rotary_dim)).astype(np.float32)
    k = rng.standard_normal((1, heads[1], seq, p.rotary_dim)).astype(np.float32)
    q64, k64 = apply64(torch.from_numpy(q.astype(F64)), torch.from_numpy(k.astype(F64)))
    q32, k32 = apply32(torch.from_numpy(q.copy()), torch.from_numpy(k.copy()))
    q2, k2 = q.copy(), k.copy()
    fastpe.apply_rope(q, k, positions=pos, **p.kwargs())
    fastpe.apply_rope(q2, k2, positions=pos, **(p if p64 is None else p64).kwargs())
    for ours, ours64, t64, t32 in ((q, q2, q64, q32), (k, k2, k64, k32)):
        big = float(np.abs(t64.numpy()).max())
        np.testing.assert_allclose(ours64, t64.numpy(), atol=2 * 2.0**-24 * big, rtol=0)
        np.testing.assert_allclose(ours, t32.numpy(), atol=4 * f32_tol(angle) * big, rtol=0)


@pytest.mark.parametrize("family, params", QWEN_CASES)
def test_qwen_vl_fastpe_cache_and_apply(family, params, rng, torch_pow):
    """The preset in rope_cache/apply_rope against the model's rotary module (its
    float32 forward, and its recomposition on float64 angles) and the model's
    apply_rotary_pos_emb, for a text + image + text prompt's position ids."""
    torch = _import("torch")
    mod = _import(
        {
            "qwen2_vl": "transformers.models.qwen2_vl.modeling_qwen2_vl",
            "qwen2_5_vl": "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl",
            "qwen3_vl": "transformers.models.qwen3_vl.modeling_qwen3_vl",
        }[family]
    )
    config = qwen_text_config(family, rope_parameters=dict(params))
    rot = qwen_rotary(family, config)
    p = qwen_preset(family, config)
    types = np.array([[0] * 7 + [1] * 24 + [0] * 5])
    pos, _ = rope_presets.qwen_vl_position_ids(types, image_grid_thw=[[2, 6, 8]])
    pos = pos[0]
    pt = torch.from_numpy(pos.T[:, None, :].copy())
    freqs = pt[..., None].double() * torch.from_numpy(p.inv_freq.copy())
    cos64 = rot.recomposition_frequencies(freqs.cos())
    sin64 = rot.recomposition_frequencies(freqs.sin())
    cos32, sin32 = rot(torch.zeros(1), pt)
    check_cache(p, pos, cos64.numpy()[0], sin64.numpy()[0], cos32.numpy()[0], sin32.numpy()[0])

    def apply(cos, sin):
        return lambda q, k: mod.apply_rotary_pos_emb(q, k, cos, sin)

    check_apply(p, pos, apply(cos64, sin64), apply(cos32, sin32), rng)


def test_pixtral_fastpe_cache_and_apply(rng, torch_pow):
    torch = _import("torch")
    tr = _import("transformers")
    m = _import("transformers.models.pixtral.modeling_pixtral")
    config = tr.PixtralVisionConfig(
        hidden_size=128, num_attention_heads=2, rope_parameters={"rope_type": "axial"}
    )
    rot = m.PixtralVisionRotaryEmbedding(config)
    p = rope_presets.pixtral(config)
    pos = p.grid((6, 9))
    freqs = torch.from_numpy(pos[..., None].astype(F64)) * torch.from_numpy(p.inv_freq.copy())
    cos64 = rot.recomposition_frequencies(freqs.cos())
    sin64 = rot.recomposition_frequencies(freqs.sin())
    cos32, sin32 = rot(torch.zeros(1), torch.from_numpy(pos))
    check_cache(p, pos, cos64.numpy(), sin64.numpy(), cos32.numpy(), sin32.numpy())

    def apply(cos, sin):
        return lambda q, k: m.apply_rotary_pos_emb(q, k, cos[None], sin[None])

    check_apply(p, pos, apply(cos64, sin64), apply(cos32, sin32), rng)


def diffusers_apply(cos, sin):
    emb = _import("diffusers.models.embeddings")
    return lambda q, k: tuple(
        emb.apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1) for x in (q, k)
    )


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda **kw: rope_presets.diffusers_2d(64, **kw), (6, 9)),
        (lambda **kw: rope_presets.cogvideox_3d(64, **kw), (3, 4, 5)),
        (lambda **kw: rope_presets.flux(10000, [16, 24, 24], **kw), (1, 7, 6)),
    ],
    ids=["2d", "cogvideox", "flux"],
)
def test_diffusers_fastpe_cache_and_apply(make, shape, monkeypatch, rng, torch_pow, request):
    """The preset's grid and kwargs in rope_cache/apply_rope against diffusers'
    own cos/sin (float32, and with float64 frequencies and angles) and its
    apply_rotary_emb."""
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    fm = _import("diffusers.models.transformers.transformer_flux")
    family = request.node.callspec.id
    p = make()
    p64 = make(precision="float64")
    pos = p.grid(shape)

    def framework():
        if family == "2d":
            return emb.get_2d_rotary_pos_embed(64, ((0, 0), shape), shape, use_real=True)
        if family == "cogvideox":
            return emb.get_3d_rotary_pos_embed(64, ((0, 0), shape[1:]), shape[1:], shape[0])
        return fm.FluxPosEmbed(10000, [16, 24, 24])(torch.from_numpy(pos))

    cos32, sin32 = framework()
    emb64 = float64_get_1d(monkeypatch)
    monkeypatch.setattr(fm, "get_1d_rotary_pos_embed", emb64.get_1d_rotary_pos_embed)
    cos64, sin64 = framework()
    assert cos64.dtype == torch.float64
    check_cache(p, pos, cos64.numpy(), sin64.numpy(), cos32.numpy(), sin32.numpy(), p64)
    check_apply(p, pos, diffusers_apply(cos64, sin64), diffusers_apply(cos32, sin32), rng, p64=p64)


# ---------------------------------------------------------------- a model end to end


def fastpe_rotary(preset):
    """A stand-in for a Qwen-VL text model's rotary embedding: cos and sin from
    fastpe.rope_cache with the preset, for the (3, batch, seq) position ids the
    model passes (text-only calls pass (batch, seq))."""
    torch = _import("torch")

    class FastpeRotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x, position_ids):
            if position_ids.ndim == 2:
                position_ids = position_ids.expand(3, -1, -1)
            pos = position_ids.permute(1, 2, 0).contiguous().numpy()
            cos, sin = fastpe.rope_cache(preset.rotary_dim, positions=pos, **preset.kwargs())
            self.calls += 1
            return torch.from_numpy(cos).to(x.dtype), torch.from_numpy(sin).to(x.dtype)

    return FastpeRotary()


def tiny_qwen2_vl_lm():
    torch = _import("torch")
    tr = _import("transformers")
    torch.manual_seed(0)
    config = tr.Qwen2VLConfig(
        text_config=dict(
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=128,
            num_hidden_layers=2,
            vocab_size=256,
            max_position_embeddings=512,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": [2, 3, 3],
            },
        ),
        vision_config=dict(
            depth=1,
            embed_dim=32,
            hidden_size=64,
            num_heads=2,
            patch_size=2,
            spatial_merge_size=2,
            in_channels=3,
            temporal_patch_size=2,
        ),
        image_token_id=250,
        vision_start_token_id=251,
        vision_end_token_id=252,
    )
    return tr.Qwen2VLForConditionalGeneration(config).eval(), config


def test_tiny_qwen2_vl_with_fastpe_rotary_end_to_end():
    """A randomly initialised Qwen2-VL, run on an image + text prompt with its own
    rotary embedding and then with fastpe's from the preset: logits within float32
    tolerance, and the same greedy tokens."""
    torch = _import("torch")
    model, config = tiny_qwen2_vl_lm()
    rng = np.random.default_rng(5)
    grid = np.array([[1, 8, 12]])  # 96 patches, merged by 2 x 2 into 24 image tokens
    n_img = 24
    text1, text2 = rng.integers(0, 200, 6), rng.integers(0, 200, 5)
    ids = np.concatenate([text1, [251], [250] * n_img, [252], text2])[None]
    types = (ids == 250).astype(np.int32)
    pixels = rng.standard_normal((96, 3 * 2 * 2 * 2)).astype(np.float32)
    inputs = dict(
        input_ids=torch.from_numpy(ids),
        mm_token_type_ids=torch.from_numpy(types),
        pixel_values=torch.from_numpy(pixels),
        image_grid_thw=torch.from_numpy(grid),
        attention_mask=torch.ones(ids.shape, dtype=torch.long),
    )
    gen = dict(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        logits = model(**inputs).logits.numpy()
        tokens = model.generate(**inputs, **gen).numpy()
        lm = model.model.language_model
        own = lm.rotary_emb
        lm.rotary_emb = fastpe_rotary(rope_presets.qwen2_vl(config))
        try:
            ours = model(**inputs).logits.numpy()
            ours_tokens = model.generate(**inputs, **gen).numpy()
        finally:
            calls = lm.rotary_emb.calls
            lm.rotary_emb = own
    assert calls == 1 + 8  # the forward, then generate: the prompt and 7 more steps
    np.testing.assert_allclose(ours, logits, atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(ours_tokens, tokens)
    assert tokens.shape[1] == ids.shape[1] + 8


def test_qwen2_5_vl_video_times_are_float32_products(rng):
    """Qwen2.5-VL's frame times int(f * tokens_per_second * second_per_grid_t) are
    float32 products in torch: 10 * 0.7 gives 6, not 7."""
    torch = _import("torch")
    model = tiny_qwen_vl_model("qwen2_5_vl")  # tokens_per_second=3
    seconds = torch.tensor([0.7 / 3, 0.1, 0.3, 1.1 / 3])
    videos = np.array([[11, 2, 2]] * 4)
    types = np.array([[0, 0] + ([2] * 11 + [0]) * 4])
    ids = torch.from_numpy(rng.integers(3, 100, size=types.shape))
    pos, _ = model.get_rope_index(
        ids,
        torch.from_numpy(types).int(),
        video_grid_thw=torch.from_numpy(videos),
        second_per_grid_ts=seconds,
    )
    intervals = (3 * seconds).tolist()  # the model's float32 product, as Python floats
    ours, _ = rope_presets.qwen_vl_position_ids(
        types, video_grid_thw=videos, video_time_intervals=intervals
    )
    np.testing.assert_array_equal(ours, pos.numpy().transpose(1, 2, 0))
    exact = [int(f * x) for x in intervals for f in range(11)]
    assert exact != [int(np.float32(f) * np.float32(x)) for x in intervals for f in range(11)]
