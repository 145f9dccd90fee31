"""apply_rope's rows walked in blocks of positions (every head's rows at a block
of positions while their cos/sin stay in the cache), q and k in one pass: every
entry bitwise the float64 rotation by rope_cache's float64 cos/sin, rounded once
into q's dtype, whatever the layout, the positions, the thread count, the walk
(blocked or one pass per head) and the row loops (AVX-512 or portable).

The truth is NumPy: ``x1*c - x2*s`` and ``x2*c + x1*s`` in float64 (no fused
multiply-add), then one rounding (NumPy's float64 -> float16/float32 casts; a
bfloat16 rounding of the double's own bits, written here).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import fastpe
from fastpe import kernel

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
PARTIAL = {"partial_rotary_factor": 0.5}


def bf16_round(x):
    """float64 -> bfloat16, to nearest even, from the double's bits (normal range)."""
    u = np.ascontiguousarray(x, np.float64).view(np.uint64)
    r = (u + np.uint64(2**44 - 1) + ((u >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)
    return (r << np.uint64(45)).view(np.float64).astype(BF16)


def round_once(v, dtype):
    return bf16_round(v) if dtype == BF16 else v.astype(dtype)


def reference(x0, ids, head_dim, params, layout, sa):
    """x0 rotated: float64 arithmetic, one rounding; ids (batch or 1, seq) positions."""
    cos, sin = fastpe.rope_cache(
        head_dim, params, positions=ids, layout=layout, dtype=np.float64
    )  # (rows of ids, seq, rotary_dim), the attention factor applied in float64
    nf = cos.shape[-1] // 2
    j1 = np.arange(nf) if layout == "half" else 2 * np.arange(nf)
    j2 = j1 + nf if layout == "half" else j1 + 1
    c, s = cos[..., j1], sin[..., j1]
    if sa == 1:  # (batch, seq, heads, dim): one cos row for every head
        c, s = c[:, :, None], s[:, :, None]
    else:  # (batch, heads, seq, dim)
        c, s = c[:, None], s[:, None]
    x = x0.astype(np.float64)
    out = x0.copy()
    x1, x2 = x[..., j1], x[..., j2]
    out[..., j1] = round_once(x1 * c - x2 * s, x0.dtype)
    out[..., j2] = round_once(x2 * c + x1 * s, x0.dtype)
    return out


def token_ids(batch, seq, pos):
    """apply_rope's arguments for one way of giving positions, and the (batch or
    1, seq) position ids they mean."""
    if pos == "offset":
        return {"offset": 7}, 7 + np.arange(seq)[None]
    if pos == "offsets":
        offs = np.array([3, 90000, 12][:batch])
        return {"offset": offs}, offs[:, None] + np.arange(seq)
    if pos == "ids":
        ids = (np.arange(seq) * 3 + 5)[::-1].copy()
        return {"positions": ids}, ids[None]
    ids = np.random.default_rng(batch + seq).integers(0, 70000, (batch, seq))
    return {"positions": ids}, ids  # one row per sequence (left padding and the like)


def make(shape, dtype, rng):
    return rng.standard_normal(shape).astype(dtype)


def check(q, k, sa, head_dim, params, layout, kw, ids, threads):
    q0, k0 = q.copy(), k.copy()
    fastpe.apply_rope(
        q, k, rope_parameters=params, seq_axis=sa, layout=layout, num_threads=threads, **kw
    )
    what = f"{q.shape} {k.shape} {q.dtype} sa={sa} {params} {layout} {kw} threads={threads}"
    for got, x0 in ((q, q0), (k, k0)):
        want = reference(x0, ids, head_dim, params, layout, sa)
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), what


@pytest.fixture(params=["blocked", "per head"])
def walk(request):
    old = kernel._set_rope_blocked(request.param == "blocked")
    yield request.param
    kernel._set_rope_blocked(old)


@pytest.fixture(params=["wide", "portable"])
def loops(request):
    """The AVX-512 or AVX2 row loops (where the CPU has them), or the portable ones."""
    old = kernel._set_rope_wide(request.param == "wide")
    yield request.param
    kernel._set_rope_wide(old)


@pytest.mark.parametrize("dtype", [np.dtype(t) for t in ("f4", "f8", "f2")] + [BF16], ids=str)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_every_layout_and_position_form_is_the_float64_rotation(dtype, layout, walk, loops):
    """GQA (5 q heads, 3 k heads), a sequence of several blocks with a partial last
    one (150 positions of 64 dims: blocks of 64 positions or fewer), batch 3."""
    rng = np.random.default_rng(11)
    cases = itertools.product((1, 2), ("offset", "offsets", "ids", "ids2d"))
    for (sa, pos), threads in zip(cases, itertools.cycle((1, 2, 3)), strict=False):
        kw, ids = token_ids(3, 150, pos)
        q, k = (make((3, 150, h, 64) if sa == 1 else (3, h, 150, 64), dtype, rng) for h in (5, 3))
        check(q, k, sa, 64, None, layout, kw, ids, threads)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_partial_rotary_attention_factor_strided_and_fused(layout, threads, walk):
    rng = np.random.default_rng(12)
    # partial rotary: 32 of 64 dims rotate, the rest are kept
    q, k = make((2, 4, 130, 64), np.float32, rng), make((2, 2, 130, 64), np.float32, rng)
    kw, ids = token_ids(2, 130, "offsets")
    check(q, k, 2, 64, PARTIAL, layout, kw, ids, threads)
    # yarn: cos and sin times its attention factor
    q, k = make((1, 70, 6, 32), np.float64, rng), make((1, 70, 2, 32), np.float64, rng)
    kw, ids = token_ids(1, 70, "ids")
    check(q, k, 1, 32, YARN, layout, kw, ids, threads)
    # strided views: every other position of a longer buffer, heads reversed
    base = make((2, 6, 260, 40), np.float32, rng)
    q = base[:, ::-1, ::2, 4:36]
    k = make((2, 3, 130, 96), np.float32, rng)[..., 8:40]
    before = base.copy()
    kw, ids = token_ids(2, 130, "offset")
    check(q, k, 2, 32, None, layout, kw, ids, threads)
    untouched = np.ones(base.shape, bool)
    untouched[:, :, ::2, 4:36] = False
    assert np.array_equal(base[untouched], before[untouched])
    # a fused QKV projection: q and k are slices of one (batch, seq, 3 heads, dim) buffer
    qkv = make((2, 90, 12, 32), np.float16, rng)
    v0 = qkv[:, :, 8:].copy()
    kw, ids = token_ids(2, 90, "ids2d")
    check(qkv[:, :, :4], qkv[:, :, 4:8], 1, 32, None, layout, kw, ids, threads)
    assert np.array_equal(qkv[:, :, 8:], v0)


@pytest.mark.parametrize("threads", [1, 3])
def test_decoding_steps_and_long_prompts(threads, walk, loops):
    """One position (a decoding step: fewer blocks than threads), a batch of steps
    at their own offsets, and a prompt of 2100 positions of 128 dims (several blocks
    of 256, the last one partial)."""
    rng = np.random.default_rng(13)
    q, k = make((1, 32, 1, 128), np.float32, rng), make((1, 8, 1, 128), np.float32, rng)
    check(q, k, 2, 128, None, "half", {"offset": 100000}, np.array([[100000]]), threads)
    q, k = make((4, 32, 1, 128), np.float32, rng), make((4, 8, 1, 128), np.float32, rng)
    offs = np.array([17, 4000, 100000, 523])
    check(q, k, 2, 128, None, "interleaved", {"offset": offs}, offs[:, None], threads)
    q, k = make((1, 3, 2100, 128), np.float32, rng), make((1, 2, 2100, 128), np.float32, rng)
    check(q, k, 2, 128, None, "half", {"offset": 0}, np.arange(2100)[None], threads)
    # one position in views: rows not evenly spaced (the first 3 heads of 5 in each of
    # 2 sequences), rows evenly spaced with gaps (every other head), the rest untouched
    base = make((2, 5, 1, 128), np.float32, rng)
    kbase = make((2, 6, 1, 128), np.float64, rng)
    for layout in ("half", "interleaved"):
        before, kbefore = base.copy(), kbase.copy()
        check(
            base[:, :3], kbase[:, ::2], 2, 128, None, layout, {"offset": 4097}, [[4097]], threads
        )
        assert np.array_equal(base[:, 3:], before[:, 3:])
        assert np.array_equal(kbase[:, 1::2], kbefore[:, 1::2])


def test_q_alone_and_k_of_another_dtype_take_the_general_path_bitwise():
    rng = np.random.default_rng(14)
    q = make((2, 3, 100, 64), np.float32, rng)
    k = make((2, 1, 100, 64), np.float64, rng)
    check(q, k, 2, 64, None, "half", {"offset": 5}, 5 + np.arange(100)[None], 2)
    q = make((2, 3, 100, 64), BF16, rng)
    q0 = q.copy()
    fastpe.apply_rope(q, offset=9, layout="interleaved")
    want = reference(q0, 9 + np.arange(100)[None], 64, None, "interleaved", 2)
    assert np.array_equal(q.view(np.uint16), want.view(np.uint16))
