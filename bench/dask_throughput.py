"""Throughput of fastpe.dask on a local Dask cluster vs the single-process calls.

    python bench/dask_throughput.py [--table-gb 2] [--add-gb 1] [--chunk-mb 64] [--repeat 5]

Needs `pip install 'fastpe[dask]'`.  Prints GB/s (10^9 bytes of output per
second, median of --repeat runs) for

  table: fastpe.sinusoidal vs fastpe.dask.sinusoidal, a float32 table of
         --table-gb in row chunks of --chunk-mb at d_model=1024: first the whole
         table in one call (held in memory; a new array, whose page faults are
         part of the cost, and into a reused out=), then with every block reduced to a
         checksum where it is made (single process: chunk by chunk, the checksum
         on one thread), so no path ships or holds the table;
  add:   fastpe.add_to (in place, one call on the whole array) vs
         fastpe.dask.add_to on the same data (x made and persisted on the
         workers first; the timed step persists the result there: each task
         copies its block and adds in the copy).

The cluster is a LocalCluster of --workers processes x 1 thread on loopback,
with num_threads=1 per task (the oversubscription rule); the single-process rows
use every core (num_threads=None) and one thread.  The checksums of both paths
are compared: the numbers are for bitwise-equal results.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

import fastpe


def _checksum(block: np.ndarray) -> np.ndarray:
    return block.view(np.uint32).sum(dtype=np.uint64).reshape((1,) * block.ndim)


def _median_time(fn, repeat: int) -> tuple[float, object]:
    """Median wall time of ``repeat`` runs after one warm-up run."""
    times, result = [], fn()
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table-gb", type=float, default=2.0)
    ap.add_argument("--add-gb", type=float, default=1.0)
    ap.add_argument("--chunk-mb", type=float, default=64.0)
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    import dask
    import dask.array as da
    import distributed

    import fastpe.dask as fd

    d = args.d_model
    row_bytes = d * 4
    step = max(1, int(args.chunk_mb * 2**20) // row_bytes)
    rows = max(step, int(args.table_gb * 2**30) // row_bytes // step * step)
    table_bytes = rows * row_bytes
    print(
        f"# fastpe {fastpe.__version__}, dask {dask.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    print(f"# command: python {' '.join(sys.argv)}")
    results = []

    def report(what: str, path: str, seconds: float, nbytes: int) -> None:
        results.append((what, path, nbytes / seconds / 1e9))
        print(
            f"{what:6s} {path:58s} {nbytes / seconds / 1e9:7.2f} GB/s  ({seconds:.3f} s)",
            flush=True,
        )

    # ------------------------------------------------------------ the table
    print(
        f"# table: ({rows}, {d}) float32 = {table_bytes / 1e9:.2f} GB in "
        f"{rows // step} row chunks of {step * row_bytes / 2**20:.0f} MiB"
    )

    def table_local(nt):
        return np.array(
            [
                _checksum(fastpe.sinusoidal(step, d, offset=r, num_threads=nt))[0, 0]
                for r in range(0, rows, step)
            ]
        )

    cores = fastpe.build_info()["max_threads"]
    t, _ = _median_time(lambda: fastpe.sinusoidal(rows, d), args.repeat)
    report("table", f"fastpe.sinusoidal, whole, new array, 1 proc x {cores} thr", t, table_bytes)
    whole = np.empty((rows, d), np.float32)
    t, _ = _median_time(lambda: fastpe.sinusoidal(rows, d, out=whole), args.repeat)
    report("table", f"fastpe.sinusoidal, whole, into out=, 1 proc x {cores} thr", t, table_bytes)
    whole = None  # (the table's memory back before the next measurements)
    t, want = _median_time(lambda: table_local(None), args.repeat)
    report("table", f"+checksums, 1 process x {cores} threads", t, table_bytes)
    t, _ = _median_time(lambda: table_local(1), args.repeat)
    report("table", "+checksums, 1 process x 1 thread", t, table_bytes)

    P = fd.sinusoidal(rows, d, chunks=(step, -1))
    sums = P.map_blocks(_checksum, chunks=((1,) * (rows // step), (1,)), dtype=np.uint64)
    t, got = _median_time(
        lambda: sums.compute(scheduler="threads", num_workers=args.workers), args.repeat
    )
    assert np.array_equal(got[:, 0], want)
    report(
        "table", f"+checksums, fastpe.dask, threaded scheduler x {args.workers}", t, table_bytes
    )

    with (
        distributed.LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        t, got = _median_time(lambda: c.compute(sums).result(), args.repeat)
        assert np.array_equal(got[:, 0], want)
        report(
            "table",
            f"+checksums, fastpe.dask, LocalCluster {args.workers} procs x 1 thread",
            t,
            table_bytes,
        )

        # ------------------------------------------------------------ the add
        seq, nseq = 512, max(1, int(args.add_gb * 2**30) // (512 * row_bytes))
        add_bytes = nseq * seq * row_bytes
        bseq = max(1, step // seq)
        print(
            f"# add: x of shape ({nseq}, {seq}, {d}) float32 = {add_bytes / 1e9:.2f} GB, "
            f"chunks of {bseq} sequences ({bseq * seq * row_bytes / 2**20:.0f} MiB), "
            "per-sequence offsets, scale=32"
        )
        # x is made on the workers and persisted there; the single process gets a copy.
        x = da.random.default_rng(0).standard_normal(
            (nseq, seq, d), dtype=np.float32, chunks=(bseq, seq, d)
        )
        x = c.persist(x)
        distributed.wait(x)
        xn = x.compute()
        offs = np.random.default_rng(1).integers(0, 100_000, nseq)

        def add_local_timed(nt):
            """In place on a fresh copy each run (the copy is not timed); one warm-up."""
            times = []
            for _ in range(args.repeat + 1):
                xl = xn.copy()
                t0 = time.perf_counter()
                fastpe.add_to(xl, offset=offs, scale=32.0, num_threads=nt)
                times.append(time.perf_counter() - t0)
            return statistics.median(times[1:]), xl

        t, xl = add_local_timed(None)
        report("add", f"fastpe.add_to in place, 1 process x {cores} threads", t, add_bytes)
        want = np.array([_checksum(xl[i : i + bseq])[0, 0, 0] for i in range(0, nseq, bseq)])
        del xl
        t, _ = add_local_timed(1)
        report("add", "fastpe.add_to in place, 1 process x 1 thread", t, add_bytes)

        y = fd.add_to(x, offset=offs, scale=32.0)
        ysums = y.map_blocks(
            _checksum, chunks=((1,) * len(x.chunks[0]), (1,), (1,)), dtype=np.uint64
        )
        assert np.array_equal(c.compute(ysums).result()[:, 0, 0], want)

        runs = iter(range(1, 10**6))

        def add_dask():
            # The result is made and kept on the workers (a new array: each task
            # copies its block), then released.  Each run asks for another scale
            # (same work, new graph keys): resubmitting the keys being released
            # from the previous run would race with that release.
            r = c.persist(fd.add_to(x, offset=offs, scale=32.0 + next(runs)))
            distributed.wait(r)
            del r

        t, _ = _median_time(add_dask, args.repeat)
        report(
            "add",
            f"fastpe.dask.add_to, LocalCluster {args.workers} procs x 1 thread",
            t,
            add_bytes,
        )
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
