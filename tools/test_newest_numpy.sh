#!/usr/bin/env bash
# The suite on the newest NumPy on PyPI, pre-releases included, so that a change in
# an upcoming NumPy (a deprecation is an error here: pyproject's filterwarnings)
# shows up before its release does.  Runs in a venv of its own; optional extras
# (dask, torch, matplotlib) are left out, the main job covers them.
#   bash tools/test_newest_numpy.sh
#   FASTPE_WHEEL=dist/fastpe-...whl bash tools/test_newest_numpy.sh   # reuse a built wheel
# FASTPE_WHEEL must match PYTHON's version; without it fastpe is built from this tree.
# FASTPE_TEST_MARK=core: only the tests marked so (tests/conftest.py), not the whole suite.
# The kernel does not use NumPy's C API, so one wheel serves every NumPy.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
VENV=$WORK/venv
source tools/venv.sh
new_venv "$PY" "$VENV"
# --only-binary numpy: a pre-release without a wheel for this Python is skipped
# for the newest one that has a wheel, instead of a long source build.
"$VENV/bin/python" -m pip install -q --pre -U --only-binary=numpy numpy
"$VENV/bin/python" -m pip install -q "pytest>=7" "pytest-timeout>=2.1" "hypothesis>=6" \
    "mpmath>=1.3" "threadpoolctl>=3" "pytest-benchmark>=4"
if [ -n "${FASTPE_WHEEL:-}" ]; then
    "$VENV/bin/python" -m pip install -q --no-deps "$FASTPE_WHEEL"
else
    "$VENV/bin/python" -m pip install -q "setuptools>=77" wheel "Cython>=3.1"
    bash tools/install_tree.sh "$VENV/bin/python"
fi
"$VENV/bin/python" -c "import sys, numpy, fastpe; print('Python', sys.version.split()[0], '| NumPy', numpy.__version__, '| fastpe', fastpe.__version__)"
# (pyproject's --import-mode=importlib and the src/ layout: the installed fastpe is
# the one imported, never the sources)
"$VENV/bin/python" -m pytest ${FASTPE_TEST_MARK:+-m "$FASTPE_TEST_MARK"} tests -q \
    -p no:cacheprovider
