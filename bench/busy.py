"""A default-threads call on a busy machine against the same call on one thread.

    python bench/busy.py [--rounds 3] [--calls 20] [--states idle,19,0]

Each kind of call (a table into out=, add_to, apply_rope on q and k with
positions before heads, rope_cache) on one thread and with the default team
(num_threads=None), on the machine as it is ("idle": no load added) and beside
one busy-looping process per two cores at nice 19 and, separately, at nice 0;
this script starts and stops those processes.  Rounds alternate the one-thread
and the default block; medians and maxima over all calls.  Self-contained (no
fastpe._bench), so it times old builds as well as new ones.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import fastpe

SPIN = "import os, sys\nos.nice(int(sys.argv[1]))\nwhile True:\n    pass\n"


def calls():
    rng = np.random.default_rng(0)
    out = np.empty((4096, 1024), np.float32)
    x = rng.standard_normal((8, 2048, 1024), dtype=np.float32)
    q = rng.standard_normal((1, 4096, 32, 128), dtype=np.float32)
    k = rng.standard_normal((1, 4096, 32, 128), dtype=np.float32)
    return {
        "table 4096x1024 f32 out=": lambda nt: fastpe.sinusoidal(
            4096, 1024, out=out, num_threads=nt
        ),
        "add_to (8,2048,1024) f32": lambda nt: fastpe.add_to(x, num_threads=nt),
        "apply_rope q,k (1,4096,32,128)": lambda nt: fastpe.apply_rope(
            q, k, seq_axis=1, num_threads=nt
        ),
        "rope_cache 128 x 16384": lambda nt: fastpe.rope_cache(128, seq_len=16384, num_threads=nt),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20, help="calls per block")
    ap.add_argument("--states", default="idle,19,0", help="idle and/or niceness values")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = max(1, cores // 2)
    fns = calls()
    print(f"fastpe {fastpe.__version__}  {cores} cores  {count} busy loop(s) per busy state")
    print(f"{'state':<8} {'call':<32} {'1 thread ms':>16} {'default ms':>16} {'ratio':>6}")
    for state in args.states.split(","):
        procs = []
        if state != "idle":
            procs = [subprocess.Popen([sys.executable, "-c", SPIN, state]) for _ in range(count)]
        try:
            time.sleep(0.5)
            for name, fn in fns.items():
                times = {1: [], None: []}
                fn(1)
                fn(None)
                for _ in range(args.rounds):
                    for nt in (1, None):
                        for _ in range(args.calls):
                            t0 = time.perf_counter()
                            fn(nt)
                            times[nt].append(time.perf_counter() - t0)
                one, dflt = (np.array(times[k]) * 1e3 for k in (1, None))
                print(
                    f"{state:<8} {name:<32} {np.median(one):7.2f} / {one.max():6.1f} "
                    f"{np.median(dflt):7.2f} / {dflt.max():6.1f} "
                    f"{np.median(dflt) / np.median(one):6.2f}",
                    flush=True,
                )
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
