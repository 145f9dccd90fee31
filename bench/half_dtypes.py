"""16-bit tables against float32 ones, ratios from one run (medians).

    python bench/half_dtypes.py [--threads N] [--repeat R]

For 4096x1024 and 16384x1024: a new array and out= for float32, float16 and
bfloat16 (when ml_dtypes is installed), and float32 followed by .astype(float16).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fastpe


def median_ms(fn, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=31)
    a = ap.parse_args()
    dtypes = [("float16", np.dtype(np.float16))]
    try:
        import ml_dtypes

        dtypes.append(("bfloat16", np.dtype(ml_dtypes.bfloat16)))
    except ImportError:
        pass
    nt = a.threads
    print(f"fastpe {fastpe.__version__}, numpy {np.__version__}, num_threads={nt}")
    for S in (4096, 16384):
        D = 1024
        o32 = np.empty((S, D), np.float32)
        f32_new = median_ms(lambda: fastpe.sinusoidal(S, D, num_threads=nt), a.repeat)
        f32_out = median_ms(lambda: fastpe.sinusoidal(S, D, out=o32, num_threads=nt), a.repeat)
        cast = median_ms(
            lambda: fastpe.sinusoidal(S, D, num_threads=nt).astype(np.float16), a.repeat
        )
        print(
            f"{S}x{D} float32: new {f32_new:.2f} ms, out= {f32_out:.2f} ms; "
            f"float32 + astype(float16) {cast:.2f} ms"
        )
        for name, dt in dtypes:
            o = np.empty((S, D), dt)
            new = median_ms(lambda: fastpe.sinusoidal(S, D, dtype=dt, num_threads=nt), a.repeat)
            out = median_ms(lambda: fastpe.sinusoidal(S, D, out=o, num_threads=nt), a.repeat)
            print(
                f"  {name:8s} new {new:.2f} ms ({new / f32_new:.2f}x float32, "
                f"{new / cast:.2f}x the cast), out= {out:.2f} ms ({out / f32_out:.2f}x)"
            )


if __name__ == "__main__":
    main()
