#!/usr/bin/env bash
# The main job, from scratch: build fastpe into a venv, then print the side-by-side
# comparison with the NumPy formulas (medians, ratios, and errors against mpmath),
# ending with a short summary of what this machine measured.
#   bash tools/run_main.sh            # quick run; FULL=1 for the full table
# About a minute from a fresh clone (52 s on a loaded 2-core machine: the build, then
# ~20 s of measurements); the full table takes several minutes.
# The speed ratios are this machine's under its present load, stated without a verdict
# (a quiet reference machine's figures: docs/performance.md).  The exit status is
# non-zero only when a result is wrong: an error against mpmath beyond the bound the
# tests assert, or tables that differ between out=, one thread and all threads.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_VENV:-.venv}
source tools/venv.sh
use_venv "${PYTHON:-python3}" "$VENV"
"$VENV/bin/python" -m pip install -q "setuptools>=77" wheel "Cython>=3.1" numpy mpmath
bash tools/install_tree.sh "$VENV/bin/python"
FASTPE_BIN=$(cd "$VENV" && pwd)/bin/fastpe
cd /tmp   # run against the installed package, not the source tree
rc=0
if [ "${FULL:-0}" = 1 ]; then "$FASTPE_BIN" bench || rc=$?; else "$FASTPE_BIN" bench --quick || rc=$?; fi
if [ "$rc" -ne 0 ]; then
    echo "run_main.sh: fastpe bench found a wrong result (exit $rc; the lines marked WRONG above)" >&2
fi
exit "$rc"
