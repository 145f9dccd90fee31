"""How the rows reach memory: plain vs streaming stores, AVX-512 vs portable writers,
64-byte aligned vs NumPy's own alignment.

    python bench/store_paths.py [--quick]

out= fills of N x 1024 tables into an existing array (the case the streaming
thresholds are for), medians of repeated calls in ms.  Every variant writes the
same bits (the test suite checks that); only the time differs.  The switches are
the kernel's test hooks: _set_stream_bytes (0: always stream, inf: never) and
_set_avx512_writers.  docs/performance.md explains what each comparison shows.
"""

import sys
import time

import numpy as np

import fastpe
from fastpe import kernel


def median_ms(call, repeats):
    call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def aligned(shape, dtype):
    """An array whose data starts on a 64-byte boundary (NumPy's large arrays start
    16 bytes past one)."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off : off + n].view(dtype).reshape(shape)


def main() -> None:
    quick = "--quick" in sys.argv
    repeats = 5 if quick else 21
    sizes_mib = (8, 32) if quick else (8, 32, 64, 128)
    print(
        f"fastpe {fastpe.__version__}, {fastpe.build_info()['max_threads']} threads, "
        f"AVX-512 writers built: {kernel._avx512_writers_built}, "
        f"streaming: {kernel.streaming_stores()}"
    )
    print(
        f"{'dtype':8} {'MiB':>4} {'plain':>8} {'stream':>8} {'portable':>9} "
        f"{'aligned':>8}   (ms, median of {repeats})"
    )
    old_stream = kernel._set_stream_bytes(float("inf"))
    old_v512 = kernel._set_avx512_writers(True)
    try:
        for dtype in (np.float64, np.float32):
            for mib in sizes_mib:
                rows = (mib << 20) // (1024 * np.dtype(dtype).itemsize)
                out = np.empty((rows, 1024), dtype)

                def fill(buf=out):
                    fastpe.sinusoidal(rows, 1024, dtype=dtype, out=buf)

                kernel._set_stream_bytes(float("inf"))
                plain = median_ms(fill, repeats)
                kernel._set_stream_bytes(0.0)
                stream = median_ms(fill, repeats)
                kernel._set_avx512_writers(False)
                portable = median_ms(fill, repeats)
                kernel._set_avx512_writers(True)
                al = aligned((rows, 1024), dtype)
                aligned_ms = median_ms(lambda: fill(al), repeats)
                print(
                    f"{np.dtype(dtype).name:8} {mib:4d} {plain:8.2f} {stream:8.2f} "
                    f"{portable:9.2f} {aligned_ms:8.2f}"
                )
    finally:
        kernel._set_stream_bytes(old_stream)
        kernel._set_avx512_writers(old_v512)


if __name__ == "__main__":
    main()
