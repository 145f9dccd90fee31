"""Where a second thread starts to pay: one fill on 1 thread vs on all threads.

    python bench/serial_threshold.py

For tables (mirrored rows, ~0.1 ns per entry) and for fractional positions (one
accurate evaluation per row, ~2-3 ns per entry), float32 out=, medians of
interleaved batches.  The kernel runs fills below a work threshold on the
calling thread (kernel.pyx, SERIAL_BELOW); this prints the ratios it was set from.
"""

import numpy as np

import fastpe
from fastpe._bench import _interleaved_medians


def main() -> None:
    threads = fastpe.build_info()["max_threads"]
    print(f"threads available: {threads}")
    if threads < 2:
        print("one usable core: nothing to compare")
        return
    print(f"{'call':<34} {'entries':>9} {'1 thread us':>12} {f'{threads} threads us':>13} {'ratio':>6}")
    cases = []
    for S in (16, 32, 64, 128, 256, 512, 1024):
        cases.append((f"table {S}x512", S * 512, np.empty((S, 512), np.float32),
                      lambda out, nt, S=S: fastpe.sinusoidal(S, 512, out=out, num_threads=nt)))
    for S in (2, 4, 8, 16, 32, 64):
        pos = np.arange(S) + 0.5
        cases.append((f"fractional positions {S}x512", S * 512, np.empty((S, 512), np.float32),
                      lambda out, nt, pos=pos: fastpe.sinusoidal_at(pos, 512, out=out,
                                                                     num_threads=nt)))
    for name, entries, out, call in cases:
        med = _interleaved_medians({"1": lambda: call(out, 1),
                                    "n": lambda: call(out, threads)}, 41)
        print(f"{name:<34} {entries:>9} {med['1'] * 1e6:>12.2f} {med['n'] * 1e6:>13.2f} "
              f"{med['1'] / med['n']:>6.2f}")


if __name__ == "__main__":
    main()
