"""fastpe.add_to next to its memory limit: ``np.add(x, tab, out=x)`` with the
table ``tab`` (x's dtype) computed beforehand, one read and one write of x.

For x of shape (32, 2048, 1024) and (8, 512, 256), float32, float64, float16
and bfloat16, on 1 and 2 threads, three forms of the same positions:
``offset=0``, ``positions=np.arange(S)[None]`` (a broadcast row) and per-sequence
offsets (``offset=[0, 7, 14, ...]``).  Medians of repeats, in ms.

    python bench/add_to.py                      # this interpreter's fastpe
    python bench/add_to.py --compare OLD_PYTHON # alternated with another build
    python bench/add_to.py --large --runs 5 --compare OLD_PYTHON
                                                # (32, 2048, 1024) float32/float64 only

With ``--compare``, this script runs three times under each interpreter,
alternating (old, new, old, ...), and prints the medians of the three runs' medians
and the ratios new / np.add and new / old.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import timeit

import numpy as np

SHAPES = [(32, 2048, 1024), (8, 512, 256)]
DTYPES = ["float32", "float64", "float16", "bfloat16"]
FORMS = ["offset", "positions", "offsets"]


def _dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def median_ms(fn, repeat):
    fn()  # warm up
    return float(np.median(timeit.repeat(fn, number=1, repeat=repeat))) * 1e3


def measure(quick=False, shapes=SHAPES, dtypes=DTYPES):
    """{key: ms} for every shape, dtype, thread count and form in this process."""
    import fastpe

    res = {}
    for shape in shapes:
        nseq, seq_len, d = shape
        repeat = 3 if quick else (7 if nseq * seq_len * d > 2**24 else 25)
        for dn in dtypes:
            dt = _dtype(dn)
            x = np.random.default_rng(0).standard_normal(shape).astype(dt)
            tab = fastpe.sinusoidal(seq_len, d, dtype=np.float64).astype(dt)
            ar = np.arange(seq_len)[None]
            offs = np.arange(nseq) * 7
            key = f"{shape}|{dn}"
            for nt in (1, 2):
                res[f"{key}|{nt}|np.add"] = median_ms(lambda: np.add(x, tab, out=x), repeat)
                calls = {
                    "offset": lambda: fastpe.add_to(x, num_threads=nt),
                    "positions": lambda: fastpe.add_to(x, positions=ar, num_threads=nt),
                    "offsets": lambda: fastpe.add_to(x, offset=offs, num_threads=nt),
                }
                for form in FORMS:
                    res[f"{key}|{nt}|{form}"] = median_ms(calls[form], repeat)
    return res


def table(new, old=None, shapes=SHAPES, dtypes=DTYPES):
    print("ms, medians; ratio = add_to / np.add(x, tab, out=x) of the same run")
    head = f"{'shape':16} {'dtype':9} {'thr':>3} {'np.add':>7}"
    for form in FORMS:
        head += f" {form:>9} {'ratio':>5}"
        if old is not None:
            head += f" {'old':>7} {'new/old':>7}"
    print(head)
    for shape in shapes:
        for dn in dtypes:
            for nt in (1, 2):
                k = f"{shape}|{dn}|{nt}|"
                ref = new[k + "np.add"]
                line = f"{shape!s:16} {dn:9} {nt:>3} {ref:7.2f}"
                for form in FORMS:
                    t = new[k + form]
                    line += f" {t:9.2f} {t / ref:5.2f}"
                    if old is not None:
                        line += f" {old[k + form]:7.2f} {t / old[k + form]:7.2f}"
                print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="OLD_PYTHON", help="alternate with this interpreter")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--json", action="store_true", help="print the raw medians as JSON")
    ap.add_argument("--large", action="store_true", help="the large x, float32 and float64 only")
    args = ap.parse_args()
    shapes, dtypes = (SHAPES[:1], DTYPES[:2]) if args.large else (SHAPES, DTYPES)
    if args.compare is None:
        res = measure(args.quick, shapes, dtypes)
        if args.json:
            print(json.dumps(res))
        else:
            table(res, None, shapes, dtypes)
        return 0
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    cmd = [__file__, "--json"] + (["--quick"] if args.quick else [])
    cmd += ["--large"] if args.large else []
    for i in range(args.runs):
        for which, py in (("old", args.compare), ("new", sys.executable)):
            out = subprocess.run([py, *cmd], check=True, capture_output=True, text=True).stdout
            runs[which].append(json.loads(out.strip().splitlines()[-1]))
            print(f"run {i + 1} {which} done", file=sys.stderr)
    med = {w: {k: float(np.median([r[k] for r in rs])) for k in rs[0]} for w, rs in runs.items()}
    import fastpe

    print(f"fastpe {fastpe.__version__}, {args.runs} alternated runs of each build")
    table(med["new"], med["old"], shapes, dtypes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
