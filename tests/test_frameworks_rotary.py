"""Optional: apply_rope and rope_cache against rotary-embedding-torch (xPos, learned and
per-head frequencies) and timm's RoPE-Mixed (``get_mixed_freqs``), their own code.

Each test skips where its framework does not import (CI: ``tools/test_frameworks.sh``
with the pinned ``requirements-frameworks.txt``).  The framework run on float64
tensors (where it allows: rotary-embedding-torch computes xPos's ``zeta`` in float32 at
construction, so the float64 runs get the float64 ``zeta`` put back) must agree with
fastpe's float64 within 1e-13 plus its own rounding of the angle; its float32 output
with fastpe's float32 within its float32 error.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_frameworks import _import

import fastpe

F32_EPS = 2.0**-23


def f64_tol(max_angle, scale=1.0):
    """1e-13 plus the framework's own rounding of each angle (half an ulp), times the
    largest value it multiplies."""
    return (1e-13 + 2.0**-53 * float(max_angle)) * scale


def f32_tol(max_angle, scale=1.0):
    """The framework's float32 error: its angle rounded (an ulp of the largest angle)
    and a few roundings in the rotation, relative to the values."""
    return (8 * F32_EPS + F32_EPS * float(max_angle)) * scale


@pytest.fixture
def ret():
    return _import("rotary_embedding_torch")


def _exact_zeta(rot, torch):
    """The float64 zeta rotary-embedding-torch would compute in float64."""
    dim = 2 * rot.freqs.numel()
    rot.scale = (torch.arange(0, dim, 2, dtype=torch.float64) + 0.4 * dim) / (1.4 * dim)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"freqs_for": "lang"},
        {"freqs_for": "lang", "theta": 500.0},
        {"freqs_for": "lang", "theta_rescale_factor": 4.0},
        {"freqs_for": "pixel", "max_freq": 64},
        {"freqs_for": "constant", "num_freqs": 16},
    ],
)
@pytest.mark.parametrize("seq_before_head_dim", [False, True])
@pytest.mark.parametrize("offset", [0, 100])
def test_rotate_queries_or_keys(ret, kwargs, seq_before_head_dim, offset):
    torch = _import("torch")
    rot = ret.RotaryEmbedding(dim=32, seq_before_head_dim=seq_before_head_dim, **kwargs)
    shape = (2, 40, 3, 48) if seq_before_head_dim else (2, 3, 40, 48)
    sa = -3 if seq_before_head_dim else -2
    g = torch.Generator().manual_seed(1)
    q32 = torch.randn(shape, generator=g)
    w = rot.freqs.detach()  # the library's own float32 frequencies, exactly
    max_angle = float(w.max()) * (offset + 40)
    # float64: the library on float64 tensors and frequencies
    rot64 = ret.RotaryEmbedding(dim=32, seq_before_head_dim=seq_before_head_dim, **kwargs)
    rot64 = rot64.double()
    q64 = q32.double()
    ref64 = rot64.rotate_queries_or_keys(q64, offset=offset)
    mine64 = q64.clone()
    fastpe.apply_rope(mine64, inv_freq=w, layout="interleaved", seq_axis=sa, offset=offset)
    assert float((ref64 - mine64).abs().max()) <= f64_tol(max_angle, 4.0)
    # float32: the library's own float32 result
    ref32 = rot.rotate_queries_or_keys(q32, offset=offset)
    mine32 = q32.clone()
    fastpe.apply_rope(mine32, inv_freq=w, layout="interleaved", seq_axis=sa, offset=offset)
    assert float((ref32 - mine32).abs().max()) <= f32_tol(max_angle, 4.0)
    # and fastpe's float32 is the float64 result rounded once
    assert torch.equal(mine32, mine64.float())


def test_learned_freq_parameter_as_inv_freq(ret):
    """learned_freq: the trained parameter (here: perturbed) passed as inv_freq."""
    torch = _import("torch")
    rot = ret.RotaryEmbedding(dim=16, learned_freq=True)
    with torch.no_grad():
        rot.freqs.mul_(torch.linspace(0.5, 1.5, 8))
    q = torch.randn(1, 2, 30, 16, dtype=torch.float64)
    rot64 = ret.RotaryEmbedding(dim=16, learned_freq=True).double()
    with torch.no_grad():
        rot64.freqs.copy_(rot.freqs.double())
    ref = rot64.rotate_queries_or_keys(q).detach()
    mine = q.clone()
    fastpe.apply_rope(mine, inv_freq=rot.freqs, layout="interleaved")
    assert float((ref - mine).abs().max()) <= f64_tol(30 * float(rot.freqs.detach().max()), 4.0)


@pytest.mark.parametrize("seq", [1, 37, 256])
@pytest.mark.parametrize("scale_base", [512, 64])
@pytest.mark.parametrize("seq_before_head_dim", [False, True])
def test_rotate_queries_and_keys_xpos(ret, seq, scale_base, seq_before_head_dim):
    torch = _import("torch")
    kw = {"use_xpos": True, "xpos_scale_base": scale_base}
    rot = ret.RotaryEmbedding(dim=32, seq_before_head_dim=seq_before_head_dim, **kw)
    shape = (2, seq, 4, 64) if seq_before_head_dim else (2, 4, seq, 64)
    sa = -3 if seq_before_head_dim else -2
    g = torch.Generator().manual_seed(seq)
    q32, k32 = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    w = rot.freqs.detach()
    max_angle = float(w.max()) * seq
    # the largest xPos factor multiplies the error bound
    top = float(((np.arange(0, 32, 2) + 12.8) / 44.8).min() ** (-(seq / 2) / scale_base))
    rot64 = ret.RotaryEmbedding(dim=32, seq_before_head_dim=seq_before_head_dim, **kw).double()
    _exact_zeta(rot64, torch)
    rq, rk = rot64.rotate_queries_and_keys(q32.double(), k32.double())
    mq, mk = q32.double(), k32.double()
    fastpe.apply_rope(
        mq, mk, inv_freq=w, layout="interleaved", seq_axis=sa, xpos_scale_base=scale_base
    )
    assert float((rq - mq).abs().max()) <= f64_tol(max_angle, 4.0 * top)
    assert float((rk - mk).abs().max()) <= f64_tol(max_angle, 4.0 * top)
    rq32, rk32 = rot.rotate_queries_and_keys(q32, k32)
    mq32, mk32 = q32.clone(), k32.clone()
    fastpe.apply_rope(
        mq32, mk32, inv_freq=w, layout="interleaved", seq_axis=sa, xpos_scale_base=scale_base
    )
    assert float((rq32 - mq32).abs().max()) <= f32_tol(max_angle, 4.0 * top)
    assert float((rk32 - mk32).abs().max()) <= f32_tol(max_angle, 4.0 * top)
    assert torch.equal(mq32, mq.float()) and torch.equal(mk32, mk.float())


def test_xpos_cache_scales_are_get_scale(ret):
    torch = _import("torch")
    rot = ret.RotaryEmbedding(dim=32, use_xpos=True, xpos_scale_base=64).double()
    _exact_zeta(rot, torch)
    t = torch.arange(50, dtype=torch.float64)
    ref = rot.get_scale(t).numpy()
    _, _, scale = fastpe.rope_cache(
        32, inv_freq=rot.freqs.detach(), seq_len=50, layout="interleaved",
        xpos_scale_base=64, dtype=np.float64,
    )  # fmt: skip
    assert np.max(np.abs(scale - ref) / ref) <= 1e-14


# ---------------------------------------------------------------- timm RoPE-Mixed


@pytest.fixture
def timm_sincos():
    return _import("timm.layers.pos_embed_sincos", alone=True)


@pytest.mark.parametrize("shape", [(7, 9), (16, 16)])
def test_timm_get_mixed_freqs(timm_sincos, shape):
    torch = _import("torch")
    m = timm_sincos
    torch.manual_seed(0)
    freqs = m.init_random_2d_freqs(32, 2, 4, dtype=torch.float64)  # (2, depth, heads, 16)
    t_x, t_y = m.get_mixed_grid(list(shape), grid_indexing="xy", dtype=torch.float64)
    pos = torch.stack([t_x, t_y], -1).long().numpy()
    # the frameworks's formula in float64 (its get_mixed_freqs computes in float32)
    ang = t_x[:, None] * freqs[0][..., None, :] + t_y[:, None] * freqs[1][..., None, :]
    max_angle = float(ang.abs().max())
    emb32 = m.get_mixed_freqs(freqs.float(), t_x.float(), t_y.float())  # [sin | cos]
    for layer in range(2):
        cos, sin = fastpe.rope_cache(
            32, inv_freq=freqs[:, layer], positions=pos, section_layout="mixed",
            layout="interleaved", dtype=np.float64,
        )  # fmt: skip
        assert cos.shape == (4, pos.shape[0], 32)
        a = ang[layer].numpy()
        ref_s = np.repeat(np.sin(a), 2, -1)
        ref_c = np.repeat(np.cos(a), 2, -1)
        assert np.max(np.abs(sin - ref_s)) <= f64_tol(max_angle, 2.0)
        assert np.max(np.abs(cos - ref_c)) <= f64_tol(max_angle, 2.0)
        s32, c32 = emb32[layer].chunk(2, -1)
        fc, fs = fastpe.rope_cache(
            32, inv_freq=freqs[:, layer].float(), positions=pos, section_layout="mixed",
            layout="interleaved",
        )  # fmt: skip
        assert np.max(np.abs(fs - s32.numpy())) <= f32_tol(max_angle, 2.0)
        assert np.max(np.abs(fc - c32.numpy())) <= f32_tol(max_angle, 2.0)


def test_timm_rotary_embedding_mixed_forward(timm_sincos):
    """RotaryEmbeddingMixed's embedding applied by timm's apply_rot_embed_cat, against
    fastpe's apply_rope of the same q and k with the module's frequencies."""
    torch = _import("torch")
    m = timm_sincos
    torch.manual_seed(3)
    rope = m.RotaryEmbeddingMixed(dim=64 * 4, depth=3, num_heads=4, feat_shape=[12, 10])
    rope.eval()
    emb = rope.get_embed().detach()  # (depth, heads, N, 2 * head_dim)
    n = 120
    pos = torch.stack([rope.t_x, rope.t_y], -1).long().numpy()
    for layer in range(3):
        q = torch.randn(2, 4, n, 64)
        k = torch.randn(2, 4, n, 64)
        rq = m.apply_rot_embed_cat(q, emb[layer])
        rk = m.apply_rot_embed_cat(k, emb[layer])
        fastpe.apply_rope(
            q, k, inv_freq=rope.freqs.detach()[:, layer], positions=pos,
            section_layout="mixed", layout="interleaved",
        )  # fmt: skip
        max_angle = float(pos.max()) * float(rope.freqs.detach().abs().max()) * 2
        scale = float(max(q.abs().max(), k.abs().max())) * 2
        assert float((rq - q).abs().max()) <= f32_tol(max_angle, scale)
        assert float((rk - k).abs().max()) <= f32_tol(max_angle, scale)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_torch_half_tensors_per_head_in_place(dtype):
    """Per-head frequencies on torch bfloat16/float16 tensors, rotated in place: the
    bits of the same rotation of NumPy arrays of the same values."""
    torch = _import("torch")
    ml_dtypes = _import("ml_dtypes")
    tdt = getattr(torch, dtype)
    ndt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 9, 3, 16, generator=g).to(tdt)
    w = 10000.0 ** (-np.arange(8) / 8) * np.array([[0.5], [1.0], [2.0]])
    qn = q.view(torch.int16).numpy().view(ndt).copy()
    same = fastpe.apply_rope(q, inv_freq=w, seq_axis=1, offset=1000)
    assert same is q
    fastpe.apply_rope(qn, inv_freq=w, seq_axis=1, offset=1000)
    assert np.array_equal(q.view(torch.int16).numpy(), qn.view(np.int16))
