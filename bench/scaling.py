"""Thread scaling: each kind of call on 1, 2, 4, ... threads and with the default team.

    python bench/scaling.py [--rounds 3] [--calls 10] [--states idle,19]

The calls of bench/busy.py (a table into out=, add_to, apply_rope on q and k,
rope_cache), each timed with num_threads = 1, 2, 4, ... up to the usable cores,
and with num_threads=None twice: the default team as shipped (sized by the cores
other processes left idle) and with that sizing switched off (every usable core).
"idle" is the machine as it is; a number is a niceness, with one busy-looping
process per two cores started and stopped by this script.  Rounds alternate the
team sizes; medians in ms, and each median's speed-up over one thread.
"""

import argparse
import subprocess
import sys
import time

import numpy as np
from busy import SPIN, calls

import fastpe

kernel = fastpe.kernel


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10, help="calls per block")
    ap.add_argument("--states", default="idle", help="idle and/or niceness values")
    args = ap.parse_args()
    cores = kernel.usable_cpus()
    teams = [1]
    while teams[-1] * 2 <= cores:
        teams.append(teams[-1] * 2)
    if teams[-1] != cores:
        teams.append(cores)
    sizes = [*teams, "default", "all cores"]
    fns = calls()
    print(f"fastpe {fastpe.__version__}  {cores} usable cores  teams {teams}")
    for state in args.states.split(","):
        procs = []
        if state != "idle":
            n = max(1, cores // 2)
            procs = [subprocess.Popen([sys.executable, "-c", SPIN, state]) for _ in range(n)]
        try:
            time.sleep(0.5)
            print(f"\n{state}: default team now {kernel.default_team()} threads")
            print(f"{'call':<32} " + " ".join(f"{s!s:>15}" for s in sizes))
            for name, fn in fns.items():
                times = {s: [] for s in sizes}

                def once(s):
                    if s == "all cores":
                        old = kernel._set_idle_teams(False)
                        try:
                            fn(None)
                        finally:
                            kernel._set_idle_teams(old)
                    else:
                        fn(None if s == "default" else s)

                for s in sizes:
                    once(s)
                for _ in range(args.rounds):
                    for s in sizes:
                        for _ in range(args.calls):
                            t0 = time.perf_counter()
                            once(s)
                            times[s].append(time.perf_counter() - t0)
                med = {s: float(np.median(times[s])) * 1e3 for s in sizes}
                cells = [f"{med[s]:7.2f} ({med[1] / med[s]:4.1f}x)" for s in sizes]
                print(f"{name:<32} " + " ".join(f"{c:>15}" for c in cells), flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
