"""Where a compiled graph's call of fastpe::rope_cache spends its time, for one
decoding step's position: the dispatcher's trip into a Python kernel that does
nothing (an operator of the same schema), the same trip into fastpe's kernel,
fastpe's implementation called directly, and an aten operator for scale.
Medians of rounds of perf_counter_ns loops.

    OMP_NUM_THREADS=1 python bench/torch_dispatch.py
"""

from __future__ import annotations

import time

import numpy as np
import torch

import fastpe.torch as ft


def per_call_us(fn, number=5000, rounds=7):
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        times.append((time.perf_counter_ns() - t0) / number / 1e3)
    return float(np.median(times))


def main():
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters={"rope_theta": 10000.0})
    pos = torch.tensor([[2048]])
    args = (pos, 0, 0, rot._w, 1.0, "half", torch.float32)
    done = (torch.empty(1, 1, 16), torch.empty(1, 1, 16))
    lib = torch.library.Library("fastpe_bench", "DEF")
    lib.define(
        "noop(Tensor? positions, SymInt seq_len, int offset, float[] inv_freq, "
        "float attention_factor, str layout, ScalarType dtype) -> (Tensor, Tensor)"
    )
    lib.impl("noop", lambda *a: done, "CompositeExplicitAutograd")
    rows = [
        ("dispatcher -> Python kernel doing nothing", lambda: torch.ops.fastpe_bench.noop(*args)),
        ("dispatcher -> fastpe::rope_cache", lambda: torch.ops.fastpe.rope_cache.default(*args)),
        ("fastpe's implementation, called directly", lambda: ft._cache_impl(*args)),
        ("RotaryEmbedding, eager", lambda: rot(pos, pos)),
        ("aten add (for scale)", lambda: torch.ops.aten.add.Tensor(pos, pos)),
    ]
    print(f"torch {torch.__version__}, one thread, one position, head_dim 16")
    for what, fn in rows:
        print(f"{what:<44} {per_call_us(fn):7.2f} us")


if __name__ == "__main__":
    main()
