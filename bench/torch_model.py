"""A tiny Llama (2 layers, hidden 64, 4 heads of 16, float32), original and patched
with fastpe.torch.patch_model, side by side on the same threads: the rotary module
(cos, sin) and the whole forward, for one decoding step (one token after a KV cache
of PROMPT tokens) and a PROMPT-token prompt, eager, compiled (inductor) and, for
the rotary part and module, exported (torch.export, the program's module run as it
is, and compiled).
Also transformers' apply_rotary_pos_emb next to fastpe.torch's.  Medians of rounds
that alternate the two models.  Compiled and exported, the patched rotary module
reads its table of cos and sin (RotaryEmbedding's table_size: the config's
max_position_embeddings).

    OMP_NUM_THREADS=1 python bench/torch_model.py --threads 1
    python bench/torch_model.py --threads 2 --no-compile
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import numpy as np
import torch
import transformers
from transformers.models.llama import modeling_llama

import fastpe
import fastpe.torch as ft


def timed(fn, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def side_by_side(fns, number, rounds=21):
    """Median seconds per call of each function, the rounds interleaved."""
    for fn in fns:
        fn()  # warm up (compile, caches)
    times = [[] for _ in fns]
    for _ in range(rounds):
        for t, fn in zip(times, fns, strict=True):
            t.append(timed(fn, number))
    return [float(np.median(t)) for t in times]


def report(what, t_orig, t_ours, unit=1e6, name="us"):
    print(
        f"{what:<44} original {t_orig * unit:9.1f} {name}   fastpe {t_ours * unit:9.1f} {name}"
        f"   ratio {t_orig / t_ours:5.2f}x"
    )


class _Call(torch.nn.Module):
    """A function as a module, for torch.export."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def exported(fn, example_args):
    """fn exported with torch.export for these arguments' shapes and dtypes (the
    positions' values are free), run as the exported program's module."""
    module = fn if isinstance(fn, torch.nn.Module) else _Call(fn)
    return torch.export.export(module, example_args).module()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if os.environ.get("OMP_NUM_THREADS") != str(args.threads):
        print(f"(set OMP_NUM_THREADS={args.threads} too, so fastpe uses as many threads)")
    print(
        f"torch {torch.__version__} | transformers {transformers.__version__} | fastpe "
        f"{fastpe.__version__} | torch threads {torch.get_num_threads()} | fastpe threads "
        f"{fastpe.build_info()['max_threads']}"
    )
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=4 * args.prompt,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    patched = copy.deepcopy(model)
    print("patched:", ft.patch_model(patched))
    rot_o, rot_p = model.model.rotary_emb, patched.model.rotary_emb
    n = args.prompt
    ids = torch.randint(0, 128, (1, n))
    x = torch.zeros(1)
    step_pos = torch.tensor([[n]])
    prompt_pos = torch.arange(n)[None]

    modes = [("eager", lambda m, a: m)]
    if not args.no_compile:
        modes.append(("compiled", lambda m, a: torch.compile(m, fullgraph=True)))
        modes.append(("exported", exported))
        modes.append(
            ("exported, compiled", lambda m, a: torch.compile(exported(m, a), fullgraph=True))
        )

    def rotary_part(rot):
        # the model's rotary work in one forward: cos and sin once, then q and k
        # of each layer rotated with them
        def run(x, pos, qs, ks):
            cos, sin = rot(x, pos)
            apply = modeling_llama.apply_rotary_pos_emb
            return [apply(qs[i], ks[i], cos, sin) for i in range(len(qs))]

        return run

    with torch.no_grad():
        for seq, number in ((1, 200), (n, 20)):
            pos = step_pos if seq == 1 else prompt_pos
            qs = [torch.randn(1, 4, seq, 16) for _ in range(config.num_hidden_layers)]
            ks = [torch.randn(1, 2, seq, 16) for _ in range(config.num_hidden_layers)]
            what = "decoding step" if seq == 1 else f"{n}-token prompt"
            for mode, wrap in modes:
                part_args = (x, pos, qs, ks)
                fo, fp = wrap(rotary_part(rot_o), part_args), wrap(rotary_part(rot_p), part_args)
                t = side_by_side([lambda: fo(x, pos, qs, ks), lambda: fp(x, pos, qs, ks)], number)
                report(f"rotary part, {what} ({mode})", *t)
                ro, rp = wrap(rot_o, (x, pos)), wrap(rot_p, (x, pos))
                t = side_by_side([lambda: ro(x, pos), lambda: rp(x, pos)], number)
                report(f"rotary module alone, {what} ({mode})", *t)

        # the rotation given cos and sin (one layer's q and k)
        for seq in (1, n):
            q, k = torch.randn(1, 4, seq, 16), torch.randn(1, 2, seq, 16)
            cos, sin = rot_o(x, torch.arange(seq)[None])
            for mode, wrap in modes[:2]:
                fo = wrap(modeling_llama.apply_rotary_pos_emb, None)
                fp = wrap(ft.apply_rotary_pos_emb, None)
                number = 200 if seq == 1 else 20
                t = side_by_side([lambda: fo(q, k, cos, sin), lambda: fp(q, k, cos, sin)], number)
                report(f"apply_rotary_pos_emb, seq {seq} ({mode})", *t)

        # whole forwards: a prompt, and one token after a KV cache of the prompt
        for mode, wrap in modes[:2]:
            mo, mp = wrap(model, None), wrap(patched, None)
            t = side_by_side(
                [lambda: mo(ids, use_cache=False), lambda: mp(ids, use_cache=False)], 3, 9
            )
            report(f"forward, {n}-token prompt ({mode})", *t, 1e3, "ms")
        caches = []
        for m in (model, patched):
            cache = transformers.DynamicCache(config=config)
            m(ids, past_key_values=cache, use_cache=True)
            caches.append(cache)
        tok = torch.tensor([[5]])

        def step(m, cache):
            m(tok, past_key_values=cache, position_ids=step_pos, use_cache=True)
            cache.crop(-1)  # back to the prompt: every step sees the same cache

        for mode, wrap in modes[:2]:
            mo, mp = wrap(model, None), wrap(patched, None)
            t = side_by_side([lambda: step(mo, caches[0]), lambda: step(mp, caches[1])], 50)
            report(f"forward, decoding step with KV cache ({mode})", *t)


if __name__ == "__main__":
    main()
