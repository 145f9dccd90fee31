"""Optional: fastpe.rope_presets' timm and further diffusers families against the
frameworks' own code (timm's ``timm.layers.pos_embed_sincos``, loaded without timm's
package ``__init__``, which needs torchvision; diffusers' HunyuanVideo, Lumina and
Allegro rotary code; transformers' Gemma 3 and Llama 4 rotary modules).  Skips where
a framework does not import (CI: ``tools/test_frameworks.sh`` with the pinned
``requirements-frameworks.txt``).

- the frequencies: a preset's float32 bands/periods are timm's buffers to the bit
  (torch's float32 power standing in for the correctly rounded one, as in
  test_frameworks_vision.py);
- the coordinates: :func:`fastpe.rope_presets.timm_positions` is timm's
  ``_build_grid`` to the bit;
- timm's ``get_embed()`` (float32) against fastpe's caches, within timm's own float32
  error; timm's formulas on float64 tensors against the float64 presets, within
  1e-13; ``apply_rot_embed_cat`` on q and k against :func:`fastpe.apply_rope`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from rules import LLAMA4, LLAMA31
from test_frameworks import _import
from test_frameworks_vision import (  # noqa: F401
    diffusers_freqs,
    f64_tol,
    float32_ulps,
    float64_get_1d,
    torch_pow,
)

import fastpe
from fastpe import rope_presets as rp

F64 = np.float64


def timm():
    _import("torch")
    return _import("timm.layers.pos_embed_sincos", alone=True)


def f32_err(angles):
    """timm's float32 error: its angle ``grid * band`` rounded in float32 (half an ulp
    of the angle, after the grid's and band's own roundings), then sin/cos."""
    return 4e-7 + 3 * 2.0**-24 * float(np.max(np.abs(angles), initial=1.0))


# constructor arguments: bands, and the grid arguments of timm_positions
ROTARY = [
    dict(in_pixels=True),
    dict(in_pixels=True, linear_bands=True, max_res=256),
    dict(in_pixels=True, rotate_half=True),
    dict(in_pixels=False, temperature=10000),
    dict(in_pixels=False, temperature=100.0, ref_feat_shape=[16, 16]),  # EVA-02
    dict(in_pixels=False, grid_offset=0.5, grid_indexing="xy", rotate_half=True),
    dict(in_pixels=True, grid_indexing="xy", ref_feat_shape=[14, 10]),
    dict(in_pixels=False, grid_type="centered", normalize_coords="min"),
]
BAND_KEYS = ("max_res", "temperature", "in_pixels", "linear_bands", "rotate_half")
GRID_KEYS = (
    "in_pixels",
    "grid_type",
    "ref_feat_shape",
    "grid_offset",
    "grid_indexing",
    "normalize_coords",
)


def split(kw):
    return (
        {k: v for k, v in kw.items() if k in BAND_KEYS},
        {k: v for k, v in kw.items() if k in GRID_KEYS},
    )


@pytest.mark.parametrize("kw", ROTARY)
@pytest.mark.parametrize("dim", [64, 32, 72])
def test_timm_rotary_bands_are_timms(kw, dim, torch_pow):  # noqa: F811
    m = timm()
    bands_kw, _ = split(kw)
    mod = m.RotaryEmbeddingCat(dim, **kw)
    p = rp.timm_rotary(dim, **bands_kw)
    nb = dim // 4
    assert p.sections == (nb, nb) and p.section_layout == "contiguous"
    assert p.layout == ("half" if kw.get("rotate_half") else "interleaved")
    want = mod.bands.numpy().astype(F64)
    assert np.array_equal(p.inv_freq, np.tile(want, 2))


@pytest.mark.parametrize("kw", ROTARY)
@pytest.mark.parametrize("shape", [[7, 5], [16, 16], [9, 33], [1, 4]])
def test_timm_positions_are_build_grid(kw, shape):
    m = timm()
    _, grid_kw = split(kw)
    grid_type = grid_kw.pop("grid_type", None) or ("pixel" if kw["in_pixels"] else "index")
    grid_kw.pop("in_pixels")
    want = m._build_grid(shape, grid_type=grid_type, **grid_kw).reshape(-1, 2).numpy()
    got = rp.timm_positions(shape, grid_type=grid_type, **grid_kw)
    assert got.dtype == F64 and got.shape == (math.prod(shape), 2)
    assert np.array_equal(got, want.astype(F64))


@pytest.mark.parametrize("kw", ROTARY)
def test_timm_rotary_get_embed_float32_and_apply(kw, rng):
    m = timm()
    torch = _import("torch")
    dim, shape = 64, [12, 10]
    bands_kw, grid_kw = split(kw)
    half = bool(kw.get("rotate_half"))
    p = rp.timm_rotary(dim, **bands_kw)
    pos = rp.timm_positions(shape, **grid_kw)
    angles = pos[:, np.repeat([0, 1], dim // 4)] * p.inv_freq
    # RotaryEmbedding: separate sin and cos (a cached feat_shape); Cat: [sin | cos]
    sin_t, cos_t = m.RotaryEmbedding(dim, feat_shape=shape, **kw).get_embed()
    emb = m.RotaryEmbeddingCat(dim, **kw).eval().get_embed(shape)
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
    assert c.shape == (len(pos), dim) and c.dtype == np.float32
    tol = f32_err(angles)
    for got, want in ((s, sin_t), (c, cos_t), (s, emb[:, :dim]), (c, emb[:, dim:])):
        err = np.abs(got.astype(F64) - want.numpy().astype(F64)).max()
        assert err <= tol, f"{err:.3g} > {tol:.3g}"
    # the rotation: q (batch, heads, tokens, dim), k grouped; timm rotates by its embedding
    q = rng.standard_normal((2, 3, len(pos), dim)).astype(np.float32)
    k = rng.standard_normal((2, 1, len(pos), dim)).astype(np.float32)
    want_q = m.apply_rot_embed_cat(torch.from_numpy(q), emb, half=half).numpy()
    want_k = m.apply_rot_embed_cat(torch.from_numpy(k), emb, half=half).numpy()
    fastpe.apply_rope(q, k, positions=pos, **p.kwargs())
    bound = 2 * tol * np.abs(np.concatenate([q, k], 1)).max() + 1e-6
    assert np.abs(q - want_q).max() <= bound
    assert np.abs(k - want_k).max() <= bound


def timm_bands64(torch, dim, in_pixels=True, max_res=224, temperature=10000, linear_bands=False):
    """timm's _build_bands written out on float64 tensors (timm's builds float32)."""
    nb = dim // 4
    if not in_pixels:
        exp = torch.arange(0, nb, 1, dtype=torch.int64).to(torch.float64) / nb
        return 1.0 / (temperature**exp)
    if linear_bands:
        bands = torch.linspace(1.0, max_res / 2, nb, dtype=torch.float64)
    else:
        bands = 2 ** torch.linspace(0, math.log(max_res, 2) - 1, nb, dtype=torch.float64)
    return bands * torch.pi


@pytest.mark.parametrize("kw", ROTARY)
def test_timm_rotary_float64_against_its_formulas(kw, rng):
    m = timm()
    torch = _import("torch")
    dim, shape = 48, [9, 11]
    bands_kw, grid_kw = split(kw)
    half = bool(kw.get("rotate_half"))
    p = rp.timm_rotary(dim, **bands_kw, precision="float64")
    b64 = timm_bands64(torch, dim, **{k: v for k, v in bands_kw.items() if k != "rotate_half"})
    # (its float64 formula rounds linspace and the power: a few ulps from exact)
    np.testing.assert_allclose(p.inv_freq[: dim // 4], b64.numpy(), rtol=2e-15, atol=0)
    # timm's embedding from float64 bands (its grid stays float32: timm_positions' default)
    sin_t, cos_t = m.build_rotary_pos_embed(
        shape,
        bands=b64,
        dim=dim,
        in_pixels=kw["in_pixels"],
        ref_feat_shape=kw.get("ref_feat_shape"),
        grid_offset=kw.get("grid_offset", 0.0),
        grid_indexing=kw.get("grid_indexing", "ij"),
        rotate_half=half,
        dtype=torch.float64,
        grid_type=kw.get("grid_type"),
        normalize_coords=kw.get("normalize_coords", "separate"),
    )
    pos = rp.timm_positions(shape, **grid_kw)
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=F64, **p.kwargs())
    tol = f64_tol(np.abs(pos).max() * p.inv_freq.max())
    np.testing.assert_allclose(s, sin_t.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(c, cos_t.numpy(), rtol=0, atol=tol)
    q = rng.standard_normal((1, 2, len(pos), dim))
    emb = torch.cat([sin_t, cos_t], -1)
    want = m.apply_rot_embed_cat(torch.from_numpy(q), emb, half=half).numpy()
    fastpe.apply_rope(q, positions=pos, precision="float64", **p.kwargs())
    np.testing.assert_allclose(q, want, rtol=0, atol=8 * tol)


DINO = [
    dict(),
    dict(temperature=10000.0, normalize_coords="max"),
    dict(temperature=None, min_period=0.5, max_period=64.0, normalize_coords="min"),
    dict(rotate_half=False, grid_offset=0.25, grid_indexing="xy"),
    # training-time augmentations: no effect in eval mode
    dict(shift_coords=0.5, jitter_coords=1.5, rescale_coords=2.0),
]
DINO_BANDS = ("temperature", "min_period", "max_period", "rotate_half")


@pytest.mark.parametrize("kw", DINO)
@pytest.mark.parametrize("shape", [[14, 14], [9, 16]])
def test_timm_dinov3_eval(kw, shape, rng, torch_pow):  # noqa: F811
    m = timm()
    torch = _import("torch")
    dim = 64
    mod = m.RotaryEmbeddingDinoV3(dim, **kw).eval()
    p = rp.timm_dinov3(dim, **{k: v for k, v in kw.items() if k in DINO_BANDS})
    assert p.sections == (16, 16)
    assert p.layout == ("half" if kw.get("rotate_half", True) else "interleaved")
    # frequencies: 2 pi / timm's float32 periods
    assert np.array_equal(p.inv_freq[:16], 2 * math.pi / mod.periods.numpy().astype(F64))
    pos = rp.timm_positions(
        shape,
        grid_type="centered",
        grid_offset=kw.get("grid_offset", 0.0),
        grid_indexing=kw.get("grid_indexing", "ij"),
        normalize_coords=kw.get("normalize_coords", "separate"),
    )
    emb = mod.get_embed(shape)
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
    tol = f32_err(np.abs(pos).max() * p.inv_freq.max())
    assert np.abs(s - emb[:, :dim].numpy()).max() <= tol
    assert np.abs(c - emb[:, dim:].numpy()).max() <= tol
    q = rng.standard_normal((1, 4, len(pos), dim)).astype(np.float32)
    want = m.apply_rot_embed_cat(torch.from_numpy(q), emb, half=p.layout == "half").numpy()
    fastpe.apply_rope(q, positions=pos, **p.kwargs())
    assert np.abs(q - want).max() <= 2 * tol * 5 + 1e-6


@pytest.mark.parametrize("kw", DINO[:4])
def test_timm_dinov3_float64_against_its_formulas(kw):
    m = timm()
    torch = _import("torch")
    dim, shape = 64, [10, 7]
    mod = m.RotaryEmbeddingDinoV3(dim, **kw).eval()
    # timm's _compute_periods written out on float64 tensors, in its buffer
    nb = dim // 4
    if kw.get("min_period") is not None:
        e = torch.linspace(0, 1, nb, dtype=torch.float64)
        periods = kw["min_period"] * ((kw["max_period"] / kw["min_period"]) ** e)
    else:
        e = 2.0 * torch.arange(nb, dtype=torch.float64) / (dim // 2)
        periods = kw.get("temperature", 100.0) ** e
    mod.register_buffer("periods", periods, persistent=False)
    emb = mod.get_embed(shape).numpy()  # its float32 coordinates, then float64 throughout
    assert emb.dtype == F64
    p = rp.timm_dinov3(
        dim, **{k: v for k, v in kw.items() if k in DINO_BANDS}, precision="float64"
    )
    np.testing.assert_allclose(p.inv_freq[:nb], 2 * math.pi / periods.numpy(), rtol=2e-15)
    pos = rp.timm_positions(
        shape,
        grid_type="centered",
        grid_offset=kw.get("grid_offset", 0.0),
        grid_indexing=kw.get("grid_indexing", "ij"),
        normalize_coords=kw.get("normalize_coords", "separate"),
    )
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=F64, **p.kwargs())
    tol = f64_tol(np.abs(pos).max() * p.inv_freq.max())
    np.testing.assert_allclose(s, emb[:, :dim], rtol=0, atol=tol)
    np.testing.assert_allclose(c, emb[:, dim:], rtol=0, atol=tol)


# ---------------------------------------------------------------- diffusers


def hunyuan_module():
    return _import("diffusers.models.transformers.transformer_hunyuan_video")


@pytest.mark.parametrize(
    "patch, rope_dim, theta, latent",
    [((2, 1), [16, 56, 56], None, (5, 12, 10)), ((1, 2), [8, 12, 12], 10000.0, (4, 3, 7))],
)
def test_hunyuan_video(patch, rope_dim, theta, latent, rng, torch_pow, monkeypatch):  # noqa: F811
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    hv = hunyuan_module()
    p_s, p_t = patch
    th = {} if theta is None else {"theta": theta}  # None: both defaults
    mod = hv.HunyuanVideoRotaryPosEmbed(p_s, p_t, rope_dim, **th)
    x = torch.zeros(1, 2, *latent)
    freqs = diffusers_freqs(lambda: mod(x))  # the frequencies of each axis, t, h, w
    p = rp.hunyuan_video(p_s, p_t, rope_dim, **th)
    assert np.array_equal(p.inv_freq, np.concatenate(freqs))
    cos_t, sin_t = mod(x)
    t, h, w = latent
    pos = p.grid((t // p_t, h // p_s, w // p_s))
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
    tol = f32_err(pos.max() * p.inv_freq.max())
    assert np.abs(c - cos_t.numpy()).max() <= tol
    assert np.abs(s - sin_t.numpy()).max() <= tol
    # the rotation: diffusers' apply_rotary_emb (use_real, pairs (2j, 2j+1)) in float64
    q = rng.standard_normal((1, 2, len(pos), p.rotary_dim)).astype(np.float32)
    want = emb.apply_rotary_emb(
        torch.from_numpy(q).double(), (cos_t.double(), sin_t.double()), use_real=True
    ).numpy()
    fastpe.apply_rope(q, positions=pos, **p.kwargs())
    assert np.abs(q - want).max() <= 2 * tol * np.abs(q).max() + 1e-6
    # float64: its get_1d_rotary_pos_embed with float64 frequencies and angles
    e64 = float64_get_1d(monkeypatch)
    monkeypatch.setattr(hv, "get_1d_rotary_pos_embed", e64.get_1d_rotary_pos_embed)
    cos64, sin64 = mod(x)
    p64 = rp.hunyuan_video(p_s, p_t, rope_dim, **th, precision="float64")
    c, s = fastpe.rope_cache(p64.rotary_dim, positions=pos, dtype=F64, **p64.kwargs())
    tol = f64_tol(pos.max() * p64.inv_freq.max())
    np.testing.assert_allclose(c, cos64.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(s, sin64.numpy(), rtol=0, atol=tol)


@pytest.mark.parametrize(
    "embed_dim, hw, lf, ntk",
    [(64, (6, 5), 1.0, 1.0), (96, (4, 9), 2.0, 3.0), (8, (3, 3), 0.5, 1.0)],
)
def test_lumina_next_2d(embed_dim, hw, lf, ntk, rng, torch_pow):  # noqa: F811
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    freqs = diffusers_freqs(
        lambda: emb.get_2d_rotary_pos_embed_lumina(
            embed_dim, *hw, linear_factor=lf, ntk_factor=ntk
        )
    )
    p = rp.lumina_next_2d(embed_dim, linear_factor=lf, ntk_factor=ntk)
    assert np.array_equal(p.inv_freq[0::2], freqs[0]) and np.array_equal(
        p.inv_freq[1::2], freqs[1]
    )
    cis = emb.get_2d_rotary_pos_embed_lumina(embed_dim, *hw, linear_factor=lf, ntk_factor=ntk)
    cis = cis.reshape(hw[0] * hw[1], -1)
    pos = p.grid(hw)
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
    tol = f32_err(pos.max() * p.inv_freq.max())
    assert np.abs(c[:, 0::2] - cis.real.numpy()).max() <= tol
    assert np.abs(s[:, 0::2] - cis.imag.numpy()).max() <= tol
    assert np.array_equal(c[:, 0::2], c[:, 1::2])
    # the rotation: the complex product Lumina applies (pairs (2j, 2j+1)), in complex128
    q = rng.standard_normal((1, 2, len(pos), embed_dim)).astype(np.float32)
    qc = torch.view_as_complex(torch.from_numpy(q).double().reshape(1, 2, len(pos), -1, 2))
    want = torch.view_as_real(qc * cis.to(torch.complex128)).flatten(3).numpy()
    fastpe.apply_rope(q, positions=pos, **p.kwargs())
    assert np.abs(q - want).max() <= 2 * tol * np.abs(q).max() + 1e-6


@pytest.mark.parametrize("theta, axes_dim", [(10000, [32, 32, 32]), (256, [16, 24, 24])])
def test_lumina2_float64(theta, axes_dim, rng):
    torch = _import("torch")
    l2 = _import("diffusers.models.transformers.transformer_lumina2")
    mod = l2.Lumina2RotaryPosEmbed(theta, axes_dim, [300, 512, 512], patch_size=2)
    cap = 5  # caption tokens (i, 0, 0), then the image's (cap, row, column)
    ids = [[i, 0, 0] for i in range(cap)] + [[cap, r, c] for r in range(7) for c in range(9)]
    ids_t = torch.tensor([ids], dtype=torch.int32)
    cis = mod._get_freqs_cis(ids_t)[0]
    assert cis.dtype == torch.complex128
    p = rp.lumina2(theta, axes_dim)
    pos = np.array(ids, dtype=np.int64)
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, dtype=F64, **p.kwargs())
    tol = f64_tol(pos.max() * p.inv_freq.max())
    np.testing.assert_allclose(c[:, 0::2], cis.real.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(s[:, 0::2], cis.imag.numpy(), rtol=0, atol=tol)


@pytest.mark.parametrize(
    "embed_dim, grid, frames, scale",
    [
        (96, (4, 5), 3, (1.0, 1.0, 1.0)),
        (96, (6, 4), 5, (2.0, 1.5, 3.0)),
        (36, (3, 3), 2, (0.5, 2, 2)),
    ],
)
def test_allegro(embed_dim, grid, frames, scale, rng, torch_pow, monkeypatch):  # noqa: F811
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")

    def call():
        return emb.get_3d_rotary_pos_embed_allegro(
            embed_dim, ((0, 0), grid), grid, frames, interpolation_scale=scale
        )

    freqs = diffusers_freqs(call)
    presets = rp.allegro(embed_dim)
    d = embed_dim // 3
    for p, f in zip(presets, freqs, strict=True):
        assert np.array_equal(p.inv_freq, f) and p.layout == "half"
    ft, fh, fw, gt, gh, gw = call()
    ids = torch.cartesian_prod(gt.long(), gh.long(), gw.long()).reshape(-1, 3).T.reshape(3, 1, -1)
    pos = rp.allegro_positions(grid, frames, scale)
    assert pos.shape == (frames * grid[0] * grid[1], 3)
    q = rng.standard_normal((1, 2, len(pos), embed_dim)).astype(np.float32)
    want = emb.apply_rotary_emb_allegro(torch.from_numpy(q), (ft, fh, fw), ids).numpy()
    for a, p in enumerate(presets):
        fastpe.apply_rope(q[..., a * d : (a + 1) * d], positions=pos[:, a], **p.kwargs())
    tol = f32_err(pos.max() * presets[0].inv_freq.max())
    assert np.abs(q - want).max() <= 2 * tol * np.abs(q).max() + 1e-6
    # float64: diffusers' tables with float64 frequencies and angles at the exact positions
    e64 = float64_get_1d(monkeypatch)
    p64 = rp.allegro(embed_dim, precision="float64")
    pos64 = rp.allegro_positions(grid, frames, scale, precision="float64")
    for a, (n, sc) in enumerate(zip((frames, *grid), scale, strict=True)):
        cos, sin = e64.get_1d_rotary_pos_embed(
            d, np.arange(n) / sc, theta=10000, use_real=True, repeat_interleave_real=False
        )
        c, s = fastpe.rope_cache(d, positions=pos64[:, a], dtype=F64, **p64[a].kwargs())
        idx = ids[a, 0].numpy()
        tol = f64_tol(pos64[:, a].max() * p64[a].inv_freq.max())
        np.testing.assert_allclose(c, cos.numpy()[idx], rtol=0, atol=tol)
        np.testing.assert_allclose(s, sin.numpy()[idx], rtol=0, atol=tol)


# ---------------------------------------------------------------- transformers: per-layer rules


def gemma3_config(rope):
    tr = _import("transformers")
    return tr.Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        intermediate_size=64,
        num_hidden_layers=6,
        vocab_size=64,
        rope_parameters=rope,
    )


GEMMA3 = [
    {  # Gemma 3 4B and larger: linear factor 8 on the global layers
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
    },
    None,  # the config's defaults (1B: no scaling)
]


@pytest.mark.parametrize("rope", GEMMA3)
def test_gemma3_layer_types(rope, rng, torch_pow):  # noqa: F811
    torch = _import("torch")
    g3 = _import("transformers.models.gemma3.modeling_gemma3")
    cfg = gemma3_config(rope)
    mod = g3.Gemma3RotaryEmbedding(cfg)
    presets = rp.gemma3(cfg)
    assert set(presets) == set(cfg.layer_types) == {"sliding_attention", "full_attention"}
    pos = np.arange(0, 3000, 7)
    x = torch.zeros(1, dtype=torch.float32)
    for t, p in presets.items():
        assert np.array_equal(p.inv_freq, getattr(mod, f"{t}_inv_freq").numpy())
        assert p.layout == "half"
        cos_t, sin_t = mod(x, torch.from_numpy(pos)[None], t)
        c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
        tol = f32_err(pos.max() * p.inv_freq.max())
        assert np.abs(c - cos_t[0].numpy()).max() <= tol
        assert np.abs(s - sin_t[0].numpy()).max() <= tol
        q = rng.standard_normal((1, 2, len(pos), 32)).astype(np.float32)
        k = rng.standard_normal((1, 1, len(pos), 32)).astype(np.float32)
        wq, wk = g3.apply_rotary_pos_emb(
            torch.from_numpy(q).double(),
            torch.from_numpy(k).double(),
            cos_t.double(),
            sin_t.double(),
        )
        fastpe.apply_rope(q, k, positions=pos, **p.kwargs())
        bound = 2 * tol * max(np.abs(q).max(), np.abs(k).max()) + 1e-6
        assert np.abs(q - wq.numpy()).max() <= bound and np.abs(k - wk.numpy()).max() <= bound
    # the global layers' rule is not the local one's
    assert not np.array_equal(
        presets["full_attention"].inv_freq, presets["sliding_attention"].inv_freq
    )


@pytest.mark.parametrize("rope", [LLAMA4, LLAMA31])
def test_llama4_layers_and_complex_rotation(rope, rng, torch_pow):  # noqa: F811
    torch = _import("torch")
    tr = _import("transformers")
    l4 = _import("transformers.models.llama4.modeling_llama4")
    cfg = tr.Llama4TextConfig(
        hidden_size=256,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=128,
        intermediate_size=64,
        intermediate_size_mlp=64,
        num_hidden_layers=8,
        vocab_size=64,
        rope_parameters=rope,
        max_position_embeddings=100000,
    )
    mod = l4.Llama4TextRotaryEmbedding(cfg)
    layers = rp.llama4(cfg)
    # the layers that rotate are the model's (its attention's use_rope)
    uses = [bool(l4.Llama4TextAttention(cfg, i).use_rope) for i in range(8)]
    assert [p is not None for p in layers] == uses and not all(uses)
    p = next(x for x in layers if x is not None)
    assert np.array_equal(p.inv_freq, mod.inv_freq.numpy()) and p.layout == "interleaved"
    pos = np.arange(0, 60000, 997)
    cis = mod(torch.zeros(1), torch.from_numpy(pos)[None])  # (1, seq, head_dim / 2) complex
    c, s = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())
    tol = f32_err(pos.max() * p.inv_freq.max())
    assert np.abs(c[:, 0::2] - cis[0].real.numpy()).max() <= tol
    assert np.abs(s[:, 0::2] - cis[0].imag.numpy()).max() <= tol
    # apply_rotary_emb on (batch, seq, heads, head_dim), complex128 products
    q = rng.standard_normal((1, len(pos), 2, 128)).astype(np.float32)
    k = rng.standard_normal((1, len(pos), 1, 128)).astype(np.float32)
    wq, wk = l4.apply_rotary_emb(
        torch.from_numpy(q).double(), torch.from_numpy(k).double(), cis.to(torch.complex128)
    )
    fastpe.apply_rope(q, k, positions=pos, seq_axis=1, **p.kwargs())
    bound = 2 * tol * max(np.abs(q).max(), np.abs(k).max()) + 1e-6
    assert np.abs(q - wq.numpy()).max() <= bound and np.abs(k - wk.numpy()).max() <= bound
