"""fastpe.apply_rope: q and k of shape (1, 32, 4096, 128) float32 rotated in place,
next to one np.copyto pass over each and (with torch and transformers installed)
transformers' apply_rotary_pos_emb given the cache, on the same thread count; one
decoding step (seq 1, 32 heads, head_dim 128, offset 100000), the same step given a
model's inv_freq array, a batch of four at their own offsets, and one step's cos/sin
cache.  Medians of repeats.

    python bench/rope_apply.py
    python bench/rope_apply.py --layouts   # only the table of layouts below
    python bench/rope_apply.py --step      # only the decoding step, in loops of calls
    python bench/rope_apply.py --axes      # only multi-axis positions against 1-axis ones
    python bench/rope_apply.py --axes-cache  # only rope_cache's small calls with sections
    python bench/rope_apply.py --frameworks  # only multi-axis apply_rope against frameworks
    python bench/rope_apply.py --heads     # only per-head frequencies against shared ones

Multi-axis positions (--axes): q and k (1, 16, 4096, 128) float32 rotated by positions
(4096, 3) with sections (16, 24, 24) (Qwen2-VL's M-RoPE) and by positions (4096,) (one
axis), the two alternating, on 1 and 2 threads; then one decoding step, q and k
(1, 16, 1, 128), by positions (1, 3) and by positions (1,), in loops of calls.

rope_cache with sections (--axes-cache): one decoding step's cos and sin, positions
(1, 3), and 64 tokens', positions (64, 3), sections (16, 24, 24), head_dim 128,
float32, next to the same calls with positions (1,) and (64,) (one axis), in loops
of calls, seven loops, medians.

The frameworks (--frameworks): q and k (1, 16, 4096, 128) float32 (a 4 x 32 x 32
video grid, or a 64 x 64 image for Flux) rotated by fastpe.apply_rope in place with
each family's preset (fastpe.rope_presets) against the framework's own code on the
same tensors and thread count (torch.set_num_threads = num_threads, 1 and 2): its
cos/sin from the position ids followed by its apply, and its apply alone (cos/sin
given); Qwen2-VL (transformers' Qwen2VLRotaryEmbedding and its apply), Qwen3-VL
(interleaved M-RoPE, Qwen3VLTextRotaryEmbedding), CogVideoX (diffusers'
get_3d_rotary_pos_embed + apply_rotary_emb) and Flux (FluxPosEmbed(10000, [16, 56,
56]) + apply_rotary_emb).  The three alternate, seven times; medians and ratios.
A framework that is not installed is skipped.

The decoding step alone: loops of 100000 calls (time.perf_counter_ns for the wall
time and time.thread_time_ns for this thread's CPU time, which leaves out the time
other work on a shared machine holds the core), seven loops, medians.

The table of layouts: q and k of 4096 positions x 128 float32, 32 heads each and
32 / 8 (grouped-query attention), heads before positions (batch, heads, seq, dim)
and positions before heads (batch, seq, heads, dim), half-split and interleaved,
on 1 and 2 threads, each next to np.copyto of q and k into preallocated arrays
(one read and one write of each: the memory limit of a pass in place).  Only the
public API is used, so the same script times another build of fastpe: run it
with each build's python in turn to compare them.
"""

import sys
import time
import timeit

import numpy as np

import fastpe


def median(fn, number, repeat=7):
    return float(np.median(timeit.repeat(fn, number=number, repeat=repeat))) / number


def layouts(repeat=7):
    """One line per case: threads, heads, axes, pairs, apply_rope and copy medians."""
    rng = np.random.default_rng(0)
    print(f"fastpe {fastpe.__version__}, {fastpe.build_info()['max_threads']} threads max")
    for kv_heads in (32, 8):
        for axes in ("bhsd", "bshd"):
            shape = {"bhsd": lambda h: (1, h, 4096, 128), "bshd": lambda h: (1, 4096, h, 128)}
            q = rng.standard_normal(shape[axes](32)).astype(np.float32)
            k = rng.standard_normal(shape[axes](kv_heads)).astype(np.float32)
            dq, dk = np.empty_like(q), np.empty_like(k)
            sa = 2 if axes == "bhsd" else 1
            for threads in (1, 2):
                t_copy = median(lambda: (np.copyto(dq, q), np.copyto(dk, k)), 1, repeat)
                for layout in ("half", "interleaved"):

                    def rope(layout=layout, threads=threads):
                        fastpe.apply_rope(q, k, layout=layout, seq_axis=sa, num_threads=threads)

                    rope()  # warm up (frequencies, table, pages)
                    t = median(rope, 1, repeat)
                    print(
                        f"layout threads={threads} q=32 k={kv_heads} {axes} {layout:11s} "
                        f"apply_rope {t * 1e3:6.2f} ms  copyto {t_copy * 1e3:6.2f} ms  "
                        f"ratio {t / t_copy:.2f}"
                    )


def step(calls=100_000, loops=7):
    """A decoding step, q and k and then q alone, at one position, then q and k
    at consecutive positions: wall and CPU medians per call."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 32, 1, 128)).astype(np.float32)
    k = rng.standard_normal((1, 32, 1, 128)).astype(np.float32)
    apply_rope = fastpe.apply_rope
    print(f"fastpe {fastpe.__version__}")
    # (the last case advances the position each call, as consecutive tokens do)
    for name, args, step in (("q and k", (q, k), 0), ("q alone", (q,), 0),
                             ("q and k, offsets 100000..", (q, k), 1)):  # fmt: skip
        apply_rope(*args, offset=100000)  # warm up (frequencies, anchors)
        wall, cpu = [], []
        for _ in range(loops):
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            if step:
                for i in range(100000, 100000 + calls):
                    apply_rope(*args, offset=i)
            else:
                for _ in range(calls):
                    apply_rope(*args, offset=100000)
            cpu.append((time.thread_time_ns() - c0) / calls / 1e3)
            wall.append((time.perf_counter_ns() - t0) / calls / 1e3)
        print(
            f"step {name} (1, 32, 1, 128) float32 at 100000: wall {np.median(wall):.2f} us, "
            f"cpu {np.median(cpu):.2f} us (min {min(cpu):.2f})"
        )


def axes(repeat=25, calls=20_000, loops=7):
    """Multi-axis against 1-axis positions, the same tensors and threads."""
    rng = np.random.default_rng(0)
    sections = (16, 24, 24)
    q = rng.standard_normal((1, 16, 4096, 128)).astype(np.float32)
    k = rng.standard_normal((1, 16, 4096, 128)).astype(np.float32)
    pos1 = np.arange(100, 4196, dtype=np.int64)
    # a video's patches after 100 text tokens, as Qwen2-VL numbers them: (t, h, w) of
    # a 4 x 32 x 32 grid, each plus 100
    t, h, w = np.meshgrid(np.arange(4), np.arange(32), np.arange(32), indexing="ij")
    grid = 100 + np.stack([t.ravel(), h.ravel(), w.ravel()], -1).astype(np.int64)
    print(f"fastpe {fastpe.__version__}, {fastpe.build_info()['max_threads']} threads max")
    for (threads, name), pos3 in zip(
        ((1, "grid"), (2, "grid"), (1, "random")),
        (grid, grid, rng.integers(0, 4096, size=(4096, 3))),
        strict=True,
    ):

        def one(threads=threads):
            fastpe.apply_rope(q, k, positions=pos1, num_threads=threads)

        def three(threads=threads):
            fastpe.apply_rope(q, k, positions=pos3, sections=sections, num_threads=threads)

        one(), three()  # warm up (frequencies, pages)
        t1, t3 = [], []
        for _ in range(repeat):  # alternating: both see the same machine
            t1.append(timeit.timeit(one, number=1))
            t3.append(timeit.timeit(three, number=1))
        m1, m3 = np.median(t1), np.median(t3)
        print(
            f"axes threads={threads} q, k (1, 16, 4096, 128) float32: positions (4096,) "
            f"{m1 * 1e3:.2f} ms, positions (4096, 3) ({name}) sections {sections} "
            f"{m3 * 1e3:.2f} ms, "
            f"ratio {m3 / m1:.3f}"
        )
    q1 = rng.standard_normal((1, 16, 1, 128)).astype(np.float32)
    k1 = rng.standard_normal((1, 16, 1, 128)).astype(np.float32)
    p1 = np.array([100000], np.int64)
    p3 = np.array([[100000, 17, 33]], np.int64)
    apply_rope = fastpe.apply_rope
    kw1 = {"positions": p1}
    kw3 = {"positions": p3, "sections": sections}
    res = {}
    for _ in range(loops):
        for name, kw in (("1", kw1), ("3", kw3)):
            apply_rope(q1, k1, **kw)
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                apply_rope(q1, k1, **kw)
            res.setdefault(name, []).append((time.perf_counter_ns() - t0) / calls / 1e3)
    m1, m3 = np.median(res["1"]), np.median(res["3"])
    print(
        f"axes step q, k (1, 16, 1, 128) float32: positions (1,) {m1:.2f} us, "
        f"positions (1, 3) {m3:.2f} us, ratio {m3 / m1:.3f}"
    )


def axes_cache(calls=20_000, loops=7):
    """rope_cache with sections against one axis: per-call medians, small calls."""
    rng = np.random.default_rng(0)
    sections = (16, 24, 24)
    rule = {"rope_theta": 1000000.0}
    rope_cache = fastpe.rope_cache
    print(f"fastpe {fastpe.__version__}")
    for n in (1, 64):
        p3 = rng.integers(0, 100000, size=(n, 3))
        p1 = np.ascontiguousarray(p3[:, 0])
        kw1 = {"positions": p1}
        kw3 = {"positions": p3, "sections": sections}
        res = {}
        for _ in range(loops):
            for name, kw in (("1", kw1), ("3", kw3)):
                rope_cache(128, rule, **kw)  # (planned)
                t0 = time.perf_counter_ns()
                for _ in range(calls):
                    rope_cache(128, rule, **kw)
                res.setdefault(name, []).append((time.perf_counter_ns() - t0) / calls / 1e3)
        m1, m3 = np.median(res["1"]), np.median(res["3"])
        print(
            f"axes-cache rope_cache(128) float32: positions ({n},) {m1:.2f} us, "
            f"positions ({n}, 3) sections {sections} {m3:.2f} us, ratio {m3 / m1:.2f}"
        )


def _framework_cases(torch):
    """(name, preset, positions, cos/sin from ids, apply given cos/sin), for the
    frameworks that import."""
    from fastpe import rope_presets

    cases = []
    video = (4, 32, 32)
    try:
        import transformers.models.qwen2_vl.modeling_qwen2_vl as q2
        import transformers.models.qwen3_vl.modeling_qwen3_vl as q3
        from transformers import Qwen2VLTextConfig, Qwen3VLTextConfig
    except ImportError:
        print("transformers' Qwen2-VL / Qwen3-VL: not installed (pip install torch transformers)")
    else:
        for name, mod, cfg_cls, rot_cls, make, sections in (
            (
                "Qwen2-VL",
                q2,
                Qwen2VLTextConfig,
                "Qwen2VLRotaryEmbedding",
                "qwen2_vl",
                [16, 24, 24],
            ),
            (
                "Qwen3-VL",
                q3,
                Qwen3VLTextConfig,
                "Qwen3VLTextRotaryEmbedding",
                "qwen3_vl",
                [24, 20, 20],
            ),
        ):
            cfg = cfg_cls(
                hidden_size=2048,
                num_attention_heads=16,
                head_dim=128,
                rope_parameters={
                    "rope_type": "default",
                    "rope_theta": 1e6,
                    "mrope_section": sections,
                },
            )
            rot = getattr(mod, rot_cls)(cfg)
            preset = getattr(rope_presets, make)(cfg)
            pos = 100 + preset.grid(video)  # after 100 text tokens
            ids = torch.from_numpy(np.ascontiguousarray(pos.T[:, None, :]))  # (3, batch, seq)
            # (transformers before 5 recomposed the sections in the apply instead)
            multi = getattr(mod, "apply_multimodal_rotary_pos_emb", None)

            def apply(q, k, cs, mod=mod, multi=multi, sections=sections):
                if multi is not None:
                    return multi(q, k, cs[0], cs[1], sections)
                return mod.apply_rotary_pos_emb(q, k, cs[0], cs[1])

            cases.append((name, preset, pos, lambda q, rot=rot, ids=ids: rot(q, ids), apply))
    try:
        import diffusers.models.embeddings as emb
        import diffusers.models.transformers.transformer_flux as fm
    except ImportError:
        print("diffusers: not installed (pip install torch diffusers)")
    else:

        def diffusers_apply(q, k, cs):
            return tuple(
                emb.apply_rotary_emb(x, cs, use_real=True, use_real_unbind_dim=-1) for x in (q, k)
            )

        preset = rope_presets.cogvideox_3d(128)
        cases.append(
            (
                "CogVideoX",
                preset,
                preset.grid(video),
                lambda q: emb.get_3d_rotary_pos_embed(
                    128, ((0, 0), video[1:]), video[1:], video[0]
                ),
                diffusers_apply,
            )
        )
        preset = rope_presets.flux(10000, [16, 56, 56])
        pos = preset.grid((1, 64, 64))
        layer, ids = fm.FluxPosEmbed(10000, [16, 56, 56]), torch.from_numpy(pos)
        cases.append(("Flux", preset, pos, lambda q: layer(ids), diffusers_apply))
    return cases


def frameworks(repeat=7):
    """fastpe.apply_rope with sections against each framework's own rotary path."""
    try:
        import torch
    except ImportError:
        print("torch: not installed; no framework to compare with")
        return
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.standard_normal((1, 16, 4096, 128)).astype(np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 16, 4096, 128)).astype(np.float32))
    print(f"fastpe {fastpe.__version__}, torch {torch.__version__}")
    for name, preset, pos, cos_sin, apply in _framework_cases(torch):
        kw = preset.kwargs()
        for threads in (1, 2):
            torch.set_num_threads(threads)

            def ours(kw=kw, pos=pos, threads=threads):
                fastpe.apply_rope(q, k, positions=pos, num_threads=threads, **kw)

            cs = cos_sin(q)

            def theirs(apply=apply, cos_sin=cos_sin):
                apply(q, k, cos_sin(q))

            def theirs_given(apply=apply, cs=cs):
                apply(q, k, cs)

            ours(), theirs(), theirs_given()  # warm up (frequencies, pages)
            t = {"fastpe": [], "full": [], "apply": []}
            with torch.inference_mode():
                for _ in range(repeat):  # alternating: all see the same machine
                    t["fastpe"].append(timeit.timeit(ours, number=1))
                    t["full"].append(timeit.timeit(theirs, number=1))
                    t["apply"].append(timeit.timeit(theirs_given, number=1))
            m = {key: float(np.median(v)) * 1e3 for key, v in t.items()}
            print(
                f"frameworks {name:9s} threads={threads} q, k (1, 16, 4096, 128) float32: "
                f"fastpe {m['fastpe']:6.2f} ms; framework cos/sin + apply {m['full']:6.2f} ms "
                f"({m['full'] / m['fastpe']:4.1f}x), apply alone {m['apply']:6.2f} ms "
                f"({m['apply'] / m['fastpe']:4.1f}x)"
            )


def heads(repeat=15, runs=3):
    """Per-head frequencies (inv_freq of shape (16, 64)) against one shared row, the same
    q and k (1, 16, 4096, 128) float32 and threads, alternating; ``runs`` medians."""
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 16, 4096, 128)).astype(np.float32)
    k = rng.standard_normal((1, 16, 4096, 128)).astype(np.float32)
    w1 = 10000.0 ** (-np.arange(64) / 64)
    wh = w1[None] * np.linspace(0.5, 2.0, 16)[:, None]
    print(f"fastpe {fastpe.__version__}, {fastpe.build_info()['max_threads']} threads max")
    for threads in (1, 2):

        def shared(threads=threads):
            fastpe.apply_rope(q, k, inv_freq=w1, num_threads=threads)

        def per_head(threads=threads):
            fastpe.apply_rope(q, k, inv_freq=wh, num_threads=threads)

        shared(), per_head()  # warm up (frequencies, pages)
        for run in range(runs):
            t1, th = [], []
            for _ in range(repeat):  # alternating: both see the same machine
                t1.append(timeit.timeit(shared, number=1))
                th.append(timeit.timeit(per_head, number=1))
            m1, mh = np.median(t1), np.median(th)
            print(
                f"heads threads={threads} run {run + 1}: q, k (1, 16, 4096, 128) float32, "
                f"inv_freq (64,) {m1 * 1e3:.2f} ms, inv_freq (16, 64) {mh * 1e3:.2f} ms, "
                f"ratio {mh / m1:.3f}"
            )


def main():
    if "--axes-cache" in sys.argv[1:]:
        axes_cache()
        return
    if "--frameworks" in sys.argv[1:]:
        frameworks()
        return
    if "--heads" in sys.argv[1:]:
        heads()
        return
    if "--axes" in sys.argv[1:]:
        axes()
        return
    if "--layouts" in sys.argv[1:]:
        layouts()
        return
    if "--step" in sys.argv[1:]:
        step()
        return
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
