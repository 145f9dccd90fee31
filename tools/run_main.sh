#!/usr/bin/env bash
# The main job, from scratch: build fastpe into a venv, then print the side-by-side
# comparison with the NumPy formulas (medians, ratios, and errors against mpmath).
#   bash tools/run_main.sh            # quick run (~20 s); FULL=1 for the full table
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "setuptools>=77" wheel "Cython>=3.1" numpy mpmath
rm -rf build src/fastpe/kernel.c
"$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall . >/dev/null
FASTPE_BIN=$(cd "$VENV" && pwd)/bin/fastpe
cd /tmp   # run against the installed package, not the source tree
if [ "${FULL:-0}" = 1 ]; then "$FASTPE_BIN" bench; else "$FASTPE_BIN" bench --quick; fi
