"""Independent float64 re-implementations of each framework's published
sinusoidal-encoding code (source paths cited per function), for the tests.

Written from the frameworks' source in plain NumPy, the way each framework
computes -- never by calling fastpe.  A float64 formula rounds the angle
``k * w_i`` (and ``w_i`` itself, through ``exp``/``power``), so its own error is
about ``|angle| * few * 2**-53``; :func:`ref_tol` allows for exactly that.
"""

from __future__ import annotations

import math

import numpy as np

F64 = np.float64


def ref_tol(angles) -> float:
    """Error budget of a float64 formula whose largest angle is max|angles|:
    the angle and w_i each carry a few ulps (exp/power of an argument up to ~10)."""
    return 1e-15 + 16 * 2.0**-53 * float(np.max(np.abs(angles), initial=1.0))


def close(got, ref, angles):
    got = np.asarray(got, dtype=F64)
    assert got.shape == ref.shape
    err = np.max(np.abs(got - ref), initial=0.0)
    assert err <= ref_tol(angles), f"max |fastpe - ref| = {err:.3g} > {ref_tol(angles):.3g}"


# ---------------------------------------------------------------- the re-implementations


# diffusion timesteps: integers and fractions up to 999
TIMESTEPS = np.array([0.0, 0.25, 1.0, 7.5, 63.0, 500.123, 999.0, 981.0])


def vaswani_ref(pos, d, base=10000.0, layout="interleaved"):
    """HF DistilBERT/XLM ``_create_sinusoidal_embeddings``
    (transformers/models/distilbert/modeling_distilbert.py): column j holds
    pos / base**(2*(j//2)/d), sine on even j, cosine on odd j -- the seeds'
    formula column by column, so an odd width ends in a sine.  Marian's split
    layout (transformers/models/marian/modeling_marian.py, create_weight) puts
    the even columns (ceil(d/2) of them) first, then the odd ones."""
    pos = np.asarray(pos, dtype=F64)
    j = np.arange(d)
    angle = pos[..., None] / np.power(base, 2.0 * (j // 2) / d)
    table = np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    if layout == "split":
        table = np.concatenate([table[..., 0::2], table[..., 1::2]], axis=-1)
    return table, angle


def pytorch_tutorial_ref(max_len, d):
    """pytorch/tutorials beginner_source/transformer_tutorial.py PositionalEncoding:
    div_term = exp(arange(0, d, 2) * (-ln(10000)/d)); pe[:, 0::2] = sin(pos*div),
    pe[:, 1::2] = cos(pos*div) (even d only: odd d fails to broadcast there)."""
    pos = np.arange(max_len, dtype=F64)[:, None]
    div = np.exp(np.arange(0, d, 2, dtype=F64) * (-math.log(10000.0) / d))
    pe = np.zeros((max_len, d))
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div)
    return pe, pos * div


def t2t_ref(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    """tensor2tensor/layers/common_attention.py get_timing_signal_1d: positions
    start_index + range(length); num_timescales = channels // 2;
    log_increment = ln(max/min) / max(num_timescales - 1, 1);
    inv_timescales = min * exp(range(n) * -log_increment); [sin | cos], then a
    zero column padded on the right when channels is odd."""
    position = np.arange(length, dtype=F64) + start_index
    n = channels // 2
    inc = math.log(float(max_timescale) / float(min_timescale)) / max(n - 1, 1)
    inv = min_timescale * np.exp(np.arange(n, dtype=F64) * -inc)
    scaled = position[:, None] * inv[None, :]
    signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
    signal = np.pad(signal, [[0, 0], [0, channels % 2]])
    return signal, scaled


def fairseq_ref(num_embeddings, d, padding_idx=None):
    """fairseq/modules/sinusoidal_positional_embedding.py get_embedding:
    emb = ln(10000)/(half-1); exp(arange(half) * -emb); row p = p * that;
    [sin | cos]; zero column for odd d; row padding_idx all zeros.  (Same
    formula in HF FSMT, transformers/models/fsmt/modeling_fsmt.py.)"""
    half = d // 2
    step = math.log(10000) / (half - 1)
    freqs = np.exp(np.arange(half, dtype=F64) * -step)
    ang = np.arange(num_embeddings, dtype=F64)[:, None] * freqs[None, :]
    emb = np.concatenate([np.sin(ang), np.cos(ang)], axis=1)
    if d % 2 == 1:
        emb = np.concatenate([emb, np.zeros((num_embeddings, 1))], axis=1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb, ang


def make_positions_ref(tokens, padding_idx):
    """fairseq/utils.py make_positions: mask = tokens != pad;
    (cumsum(mask, dim=1) * mask) + padding_idx."""
    tokens = np.asarray(tokens)
    mask = (tokens != padding_idx).astype(np.int64)
    return np.cumsum(mask, axis=1) * mask + padding_idx


def diffusers_ref(
    timesteps, d, flip_sin_to_cos=False, downscale_freq_shift=1.0, scale=1.0, max_period=10000
):
    """diffusers/src/diffusers/models/embeddings.py get_timestep_embedding:
    exponent = -ln(max_period) * arange(half) / (half - downscale_freq_shift);
    emb = timesteps[:, None] * exp(exponent); emb = scale * emb; [sin | cos];
    flip_sin_to_cos swaps the halves to [cos | sin]; odd d: zero column on the right."""
    t = np.asarray(timesteps, dtype=F64)
    half = d // 2
    exponent = -math.log(max_period) * np.arange(half, dtype=F64) / (half - downscale_freq_shift)
    emb = scale * (t[:, None] * np.exp(exponent)[None, :])
    out = np.concatenate([np.sin(emb), np.cos(emb)], axis=-1)
    if flip_sin_to_cos:
        out = np.concatenate([out[:, half:], out[:, :half]], axis=-1)
    if d % 2 == 1:
        out = np.pad(out, [(0, 0), (0, 1)])
    return out, emb


def gptj_ref(num_pos, dim, base=10000.0):
    """transformers/models/gptj/modeling_gptj.py create_sinusoidal_positions:
    inv_freq = 1 / base**(arange(0, dim, 2) / dim); table = [sin | cos] of
    outer(arange(num_pos), inv_freq)."""
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2, dtype=F64) / dim)
    inp = np.arange(num_pos, dtype=F64)[:, None] * inv_freq
    return np.concatenate([np.sin(inp), np.cos(inp)], axis=1), inp


def llama_freqs_cis_ref(dim, end, theta=10000.0, start_pos=0):
    """meta-llama/llama llama/model.py precompute_freqs_cis: freqs = 1/theta**(
    arange(0, dim, 2)[:dim//2]/dim); outer(arange(end), freqs); polar(1, .) --
    complex cos + i sin, sliced [start_pos:start_pos+seqlen] in the forward."""
    freqs = 1.0 / theta ** (np.arange(0, dim, 2, dtype=F64)[: dim // 2] / dim)
    ang = np.outer(np.arange(end, dtype=F64), freqs)[start_pos:]
    return np.cos(ang) + 1j * np.sin(ang), ang


def mae_ref(embed_dim, grid_size, cls_token=False):
    """facebookresearch/mae util/pos_embed.py get_2d_sincos_pos_embed: grid =
    meshgrid(grid_w, grid_h) ("w goes first"); the first half of the width
    encodes grid[0] (the column coordinate), the second half grid[1]; each half
    is get_1d_sincos_pos_embed_from_grid: omega = 1/10000**(arange(D/2)/(D/2))
    with D the half width, [sin | cos] of outer(pos, omega); cls_token
    prepends a zero row.  Float64 (its grid is float32 but holds small integers)."""
    g = np.arange(grid_size, dtype=F64)
    col, row = np.meshgrid(g, g)  # col varies along w, row along h

    def one_d(dim, pos):
        omega = 1.0 / 10000 ** (np.arange(dim // 2, dtype=F64) / (dim / 2.0))
        out = np.outer(pos.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1), out

    e_w, a_w = one_d(embed_dim // 2, col)
    e_h, a_h = one_d(embed_dim // 2, row)
    emb = np.concatenate([e_w, e_h], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros((1, embed_dim)), emb], axis=0)
    return emb, np.concatenate([a_w, a_h], axis=1)


def timm_ref(feat_shape, dim, temperature=10000.0, reverse_coord=False, interleave_sin_cos=False):
    """timm/layers/pos_embed_sincos.py build_sincos2d_pos_embed: bands =
    1/temperature**(arange(dim/4)/(dim/4)); feat_shape reversed with
    reverse_coord; ij grid of the (possibly reversed) shape, flattened (first
    axis outer); pos2 = grid[..., None] * bands; stack [sin, cos] on dim 1 ->
    [sin_a | sin_b | cos_a | cos_b], or on dim 2 (interleave_sin_cos) ->
    [sin_a | cos_a | sin_b | cos_b], a/b the first/second grid axis."""
    pos_dim = dim // 4
    bands = 1.0 / temperature ** (np.arange(pos_dim, dtype=F64) / pos_dim)
    if reverse_coord:
        feat_shape = feat_shape[::-1]
    grid = np.stack(np.meshgrid(*[np.arange(s, dtype=F64) for s in feat_shape], indexing="ij"))
    n = int(np.prod(feat_shape))
    grid = grid.reshape(2, n).T  # (N, 2)
    pos2 = grid[:, :, None] * bands[None, None, :]  # (N, 2, pos_dim)
    stacked = np.stack([np.sin(pos2), np.cos(pos2)], axis=2 if interleave_sin_cos else 1)
    return stacked.reshape(n, dim), pos2


def knob_ref(positions, d, conv):
    """Any fastpe.Convention from the meaning of its knobs (see fastpe._conventions):
    w_i = position_scale * base**(-i/denominator), i < nf; sines and cosines
    placed by ``layout``; odd widths per ``odd``; rows at ``padding_idx`` zero.
    Returns (table, angles), in float64."""
    pos = np.asarray(positions, dtype=F64)
    h = d // 2
    nf = (d + 1) // 2 if conv.odd == "sin" else h
    denom = {
        "d/2": d / 2,
        "h": h,
        "h-1": h - 1,
        "max(h-1,1)": max(h - 1, 1),
        "h-shift": h - conv.shift,
    }[conv.denominator]
    if nf <= 1:
        denom = 1.0  # a single frequency is w_0 = position_scale, whatever the denominator
    w = conv.position_scale * np.power(conv.base, -np.arange(nf, dtype=F64) / denom)
    ang = pos[..., None] * w
    s, c = np.sin(ang), np.cos(ang[..., :h])
    out = np.zeros((*pos.shape, d))
    if conv.layout == "interleaved":
        out[..., 0 : 2 * h : 2] = s[..., :h]
        out[..., 1 : 2 * h : 2] = c
        if nf > h:
            out[..., 2 * h] = s[..., h]
    elif conv.layout == "split":
        out[..., :nf] = s
        out[..., nf : nf + h] = c
    else:  # split_cos_first
        out[..., :h] = c
        out[..., h : h + nf] = s
    if conv.padding_idx is not None:
        out[pos == conv.padding_idx] = 0.0
    return out, ang
