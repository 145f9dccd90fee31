"""fastpe.apply_rope: q and k of shape (1, 32, 4096, 128) float32 rotated in place,
next to one np.copyto pass over each and (with torch and transformers installed)
transformers' apply_rotary_pos_emb given the cache, on the same thread count; one
decoding step (seq 1, 32 heads, head_dim 128, offset 100000), the same step given a
model's inv_freq array, a batch of four at their own offsets, and one step's cos/sin
cache.  Medians of repeats.

    python bench/rope_apply.py
"""

import timeit

import numpy as np

import fastpe


def median(fn, number, repeat=7):
    return float(np.median(timeit.repeat(fn, number=number, repeat=repeat))) / number


def main():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 32, 4096, 128)).astype(np.float32)
    k = rng.standard_normal((1, 32, 4096, 128)).astype(np.float32)
    dq, dk = np.empty_like(q), np.empty_like(k)
    fastpe.apply_rope(q, k, offset=0)  # warm up (frequencies, encoding, pages)
    t_rope = median(lambda: fastpe.apply_rope(q, k, offset=0), 3)
    t_copy = median(lambda: (np.copyto(dq, q), np.copyto(dk, k)), 3)
    print(f"threads: {fastpe.build_info()['max_threads']}")
    print(f"apply_rope q, k (1, 32, 4096, 128) float32: {t_rope * 1e3:.2f} ms")
    print(
        f"np.copyto q, k:                             {t_copy * 1e3:.2f} ms "
        f"(apply_rope / copyto = {t_rope / t_copy:.2f})"
    )
    q1 = rng.standard_normal((1, 32, 1, 128)).astype(np.float32)
    k1 = rng.standard_normal((1, 32, 1, 128)).astype(np.float32)
    t1 = median(lambda: fastpe.apply_rope(q1, k1, offset=100000), 200)
    print(f"one decoding step, q and k (1, 32, 1, 128) at 100000: {t1 * 1e6:.1f} us")
    # the same step with a model's own frequencies (its float32 inv_freq buffer)
    inv_freq = (1.0 / 10000.0 ** (np.arange(0, 128, 2) / 128)).astype(np.float32)
    t_inv = median(lambda: fastpe.apply_rope(q1, k1, offset=100000, inv_freq=inv_freq), 200)
    print(f"the same step given inv_freq (float32 ndarray): {t_inv * 1e6:.1f} us")
    # a decoding step's cos and sin for a model that applies them itself
    pos1 = np.array([100000], np.int64)
    t_cache = median(lambda: fastpe.rope_cache(128, positions=pos1), 200)
    print(f"rope_cache(128, positions=[100000]) (one step's cos, sin): {t_cache * 1e6:.1f} us")
    qb = rng.standard_normal((4, 32, 1, 128)).astype(np.float32)
    kb = rng.standard_normal((4, 8, 1, 128)).astype(np.float32)
    lengths = np.array([17, 4000, 100000, 523])  # a KV cache per sequence
    tb = median(lambda: fastpe.apply_rope(qb, kb, offset=lengths), 200)
    print(f"a batch of 4 decoding steps at their own offsets (GQA k: 8 heads): {tb * 1e6:.1f} us")
    try:
        import torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        print("transformers' apply_rotary_pos_emb: not installed (pip install torch transformers)")
        return
    torch.set_num_threads(fastpe.build_info()["max_threads"])
    tq, tk = torch.from_numpy(q.copy()), torch.from_numpy(k.copy())
    cos, sin = (torch.from_numpy(a)[None] for a in fastpe.rope_cache(128, seq_len=4096))
    t_tr = median(lambda: apply_rotary_pos_emb(tq, tk, cos, sin), 3)
    t_fp = median(lambda: fastpe.apply_rope(tq, tk, offset=0), 3)
    print(
        f"transformers apply_rotary_pos_emb (cache given, {torch.get_num_threads()} threads): "
        f"{t_tr * 1e3:.2f} ms; fastpe on the same tensors in place {t_fp * 1e3:.2f} ms "
        f"({t_tr / t_fp:.1f}x)"
    )


if __name__ == "__main__":
    main()
