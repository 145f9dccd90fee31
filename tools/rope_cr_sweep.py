"""Random rope_cache calls, every float64 entry against mpmath (256 bits) rounded
once: how many the cache gets wrong, with and without ``correctly_rounded=True``.

    python tools/rope_cr_sweep.py [--calls N] [--seed S] [--default]

Each call draws a head_dim, a rule (default, theta 5e5, llama3, linear, yarn with
its attention factor) at either precision or random ``inv_freq`` (1e-8 .. 10, an
attention factor 0.5 .. 2 in half the calls), 1-5 positions up to +-2^4 .. 2^31,
fractional ones in three calls of ten.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import mpmath
import numpy as np

import fastpe
from fastpe import kernel as _kernel

RULES: list[dict[str, Any] | None] = [
    None,
    {"rope_theta": 500000.0},
    {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
]


def rounded(pos: np.ndarray, w: np.ndarray, a: float) -> tuple[np.ndarray, np.ndarray]:
    """a cos and a sin of every exact pos[r] * w[i], rounded once to float64."""
    c = np.empty((pos.size, w.size))
    s = np.empty_like(c)
    for r, k in enumerate(pos.tolist()):
        for i, f in enumerate(w.tolist()):
            with mpmath.workprec(256):
                x = mpmath.mpf(k) * mpmath.mpf(f)
                cx, sx = a * mpmath.cos(x), a * mpmath.sin(x)
            # mpmath rounds to nearest-even at 53 bits (normal range: |sin| here
            # is never below 2^-1022 but for frequencies the sweep does not draw)
            with mpmath.workprec(53):
                c[r, i], s[r, i] = float(+cx), float(+sx)
    return c, s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--default", action="store_true", help="the default float64 path")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = bad = 0
    undecided = _kernel._f64_undecided()
    t0 = time.perf_counter()
    for _ in range(args.calls):
        hd = int(rng.choice([8, 16, 32, 64, 128]))
        precision = str(rng.choice(["float32", "float64"]))
        kw: dict[str, Any] = {"precision": precision}
        params = None
        if rng.integers(0, 3) == 0:
            w = 10.0 ** rng.uniform(-8, 1, hd // 2)
            kw["inv_freq"] = w
            a = float(rng.uniform(0.5, 2.0)) if rng.random() < 0.5 else 1.0
            kw["attention_factor"] = a
        else:
            params = RULES[int(rng.integers(0, len(RULES)))]
            w, a = fastpe.rope_frequencies(hd, params, precision=precision)
        m = int(rng.integers(1, 6))
        top = 2 ** int(rng.integers(4, 32))
        pos = rng.integers(-top, top, m).astype(np.float64)
        if rng.random() < 0.3:
            pos = pos + rng.uniform(-1, 1, m)
        cos, sin = fastpe.rope_cache(
            hd,
            params,
            positions=pos,
            dtype=np.float64,
            correctly_rounded=not args.default,
            **kw,
        )
        oc, os_ = rounded(pos, w, a)
        nf = w.size
        for got, want in ((cos, oc), (sin, os_)):
            bad += int((got[:, :nf] != want).sum())
            n += want.size
    print(
        f"{'default' if args.default else 'correctly_rounded=True'}: {n} entries, "
        f"{bad} not correctly rounded, {_kernel._f64_undecided() - undecided} left to the "
        f"exact path, {time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
