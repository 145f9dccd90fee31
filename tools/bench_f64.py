"""Side-by-side float64 timings of two fastpe builds: run once per build with the
same arguments (alternating runs on a busy machine), min and median of many; a
build with ``correctly_rounded=`` also times those rows.

    python tools/bench_f64.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fastpe


def timed(fn, repeat: int) -> tuple[float, float]:
    fn()  # warm: plans, caches, pages of out
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    out = np.empty((4096, 1024))
    pos8 = np.linspace(0.0, 999.0, 8)
    one = np.array([12345])
    cos = np.empty((1, 128))
    sin = np.empty((1, 128))
    step = [4000]
    pcos, psin = np.empty((4096, 128)), np.empty((4096, 128))

    def decode(**kw: bool) -> None:
        step[0] += 1  # a decoding step: the next position each call
        fastpe.rope_cache(
            128,
            positions=np.array([step[0]]),
            dtype=np.float64,
            precision="float64",
            out=(cos, sin),
            **kw,
        )

    def prefill(**kw: bool) -> None:
        fastpe.rope_cache(
            128, seq_len=4096, dtype=np.float64, precision="float64", out=(pcos, psin), **kw
        )

    cases = {
        "table 4096x1024 out= 1 thread": lambda: fastpe.sinusoidal(
            4096, 1024, dtype=np.float64, out=out, num_threads=1
        ),
        "table 4096x1024 out= default threads": lambda: fastpe.sinusoidal(
            4096, 1024, dtype=np.float64, out=out
        ),
        "one row d=1024 (sinusoidal_at)": lambda: fastpe.sinusoidal_at(
            one, 1024, dtype=np.float64
        ),
        "8 timesteps d=1024 (sinusoidal_at)": lambda: fastpe.sinusoidal_at(
            pos8, 1024, dtype=np.float64
        ),
        "rope_cache decoding step d=128": decode,
        "rope_cache prefill 4096 d=128": prefill,
    }
    try:  # the correctly rounded float64 rows, where this build has them
        fastpe.sinusoidal(1, 2, dtype=np.float64, correctly_rounded=True)
        cr = {"dtype": np.float64, "correctly_rounded": True}
        cases.update(
            {
                "CR table 4096x1024 out= 1 thread": lambda: fastpe.sinusoidal(
                    4096, 1024, out=out, num_threads=1, **cr
                ),
                "CR table 4096x1024 out= default threads": lambda: fastpe.sinusoidal(
                    4096, 1024, out=out, **cr
                ),
                "CR one row d=1024 (sinusoidal_at)": lambda: fastpe.sinusoidal_at(one, 1024, **cr),
                "CR 8 timesteps d=1024 (sinusoidal_at)": lambda: fastpe.sinusoidal_at(
                    pos8, 1024, **cr
                ),
            }
        )
    except TypeError:
        pass
    try:  # the same for rope_cache's
        fastpe.rope_cache(2, seq_len=1, dtype=np.float64, correctly_rounded=True)
        cases["CR rope_cache decoding step d=128"] = lambda: decode(correctly_rounded=True)
        cases["CR rope_cache prefill 4096 d=128"] = lambda: prefill(correctly_rounded=True)
    except TypeError:
        pass
    for name, fn in cases.items():
        lo, med = timed(fn, args.repeat)
        print(f"{name:40s} min {lo * 1e6:10.1f} us  median {med * 1e6:10.1f} us")


if __name__ == "__main__":
    main()
