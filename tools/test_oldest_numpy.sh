#!/usr/bin/env bash
# The suite against the oldest NumPy fastpe declares (pyproject: numpy>=1.23), in a
# venv of its own (the main venv has the newest).  Optional extras (dask, torch,
# matplotlib) are left out: their own floors are newer.
#   bash tools/test_oldest_numpy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
NUMPY=${FASTPE_OLDEST_NUMPY:-1.23.5}
VENV=$(mktemp -d)/venv
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "numpy==$NUMPY" "setuptools>=77" wheel "Cython>=3.1" \
    "pytest>=7" "hypothesis>=6" "mpmath>=1.3" "threadpoolctl>=3" "pytest-benchmark>=4"
rm -rf build src/fastpe/kernel.c
"$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall . >/dev/null
"$VENV/bin/python" -c "import numpy, fastpe; print('NumPy', numpy.__version__, '| fastpe', fastpe.__version__)"
"$VENV/bin/python" -m pytest tests -q -p no:cacheprovider
rm -rf "$(dirname "$VENV")"
