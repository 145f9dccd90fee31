"""Where a second thread starts to pay: one fill on 1 thread vs on all threads.

    python bench/serial_threshold.py

Tables (mirrored rows, ~0.1-0.2 ns per entry) and fractional positions (one
accurate evaluation per row), float32 out=, medians of 41 calls each made
(a) back to back and (b) after 2 ms of idle time, as between the steps of a
model: the team's workers then sleep, and waking them costs from microseconds
to milliseconds on a virtual machine.  The kernel runs fills below a work
threshold on the calling thread (kernel.pyx, _serial_below); this prints the
ratios it was set from.
"""

import time

import numpy as np

import fastpe


def median_us(call, gap):
    times = []
    for _ in range(41):
        if gap:
            time.sleep(gap)
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def main() -> None:
    threads = fastpe.build_info()["max_threads"]
    print(f"threads available: {threads}")
    if threads < 2:
        print("one usable core: nothing to compare")
        return
    cases = []
    for S in (16, 64, 128, 256, 512, 1024, 4096):
        cases.append(
            (
                f"table {S}x512",
                S * 512,
                np.empty((S, 512), np.float32),
                lambda out, nt, S=S: fastpe.sinusoidal(S, 512, out=out, num_threads=nt),
            )
        )
    for S in (8, 32, 128):
        pos = np.arange(S) + 0.5
        cases.append(
            (
                f"fractional positions {S}x512",
                S * (512 + 16 * 256),
                np.empty((S, 512), np.float32),
                lambda out, nt, pos=pos: fastpe.sinusoidal_at(pos, 512, out=out, num_threads=nt),
            )
        )
    print(
        f"{'call':<30} {'work':>8}  {'back to back: 1 / n threads (us)':>34}  "
        f"{'after 2 ms idle: 1 / n threads (us)':>36}"
    )
    for name, work, out, call in cases:
        row = []
        for gap in (0.0, 0.002):
            one = median_us(lambda: call(out, 1), gap)
            many = median_us(lambda: call(out, threads), gap)
            row.append(f"{one:9.1f} / {many:9.1f}  ({one / many:4.2f}x)")
        print(f"{name:<30} {work:>8}  {row[0]:>34}  {row[1]:>36}")


if __name__ == "__main__":
    main()
