#!/usr/bin/env bash
# Build fastpe into a venv and run the main job: a table plus the NumPy comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "setuptools>=70" wheel "Cython>=3.0.10" numpy
"$VENV/bin/python" -m pip install -q --no-build-isolation . >/dev/null
VPY=$(cd "$VENV" && pwd)/bin/python
cd /tmp   # run against the installed package, not the source tree
"$VPY" - <<'PY'
import time, numpy as np, fastpe
print(fastpe.build_info())
def med(f, n=7):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return float(np.median(ts))
for S, D in [(512, 512), (4096, 1024)]:
    tf = med(lambda: fastpe.sinusoidal(S, D, dtype=np.float64))
    tn = med(lambda: fastpe.reference(S, D))
    print(f"{S}x{D} float64: fastpe {tf*1e3:.2f} ms, NumPy reference {tn*1e3:.2f} ms, ratio {tn/tf:.1f}x")
PY
