#!/usr/bin/env bash
# The suite on the oldest Python and NumPy fastpe declares (pyproject:
# requires-python >=3.10, numpy>=1.23), in a venv of its own (the main venv has the
# newest).  Optional extras (dask, torch, matplotlib) are left out: their own
# floors are newer.
#   bash tools/test_oldest_numpy.sh
#   FASTPE_OLDEST_PYTHON=/path/to/python3.10 bash tools/test_oldest_numpy.sh
# FASTPE_TEST_MARK=core: only the tests marked so (tests/conftest.py), not the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# Python 3.10 on purpose, not the caller's PYTHON: NumPy 1.23.5 has wheels for
# CPython 3.8-3.11 only, and 3.10 is the floor users may have.
NUMPY=${FASTPE_OLDEST_NUMPY:-1.23.5}
find_python() {
    if [ -n "${FASTPE_OLDEST_PYTHON:-}" ]; then echo "$FASTPE_OLDEST_PYTHON"; return; fi
    if python3.10 -c '' 2>/dev/null; then echo python3.10; return; fi
    # pyenv's shim exists even where 3.10 is not the selected version
    if command -v pyenv >/dev/null 2>&1; then
        for p in "$(pyenv root)"/versions/3.10*/bin/python3.10; do
            if [ -x "$p" ]; then echo "$p"; return; fi
        done
    fi
    return 1
}
PY=$(find_python) || {
    echo "test_oldest_numpy.sh: no Python 3.10 found; install it or set FASTPE_OLDEST_PYTHON" >&2
    exit 2
}
VENV=$(mktemp -d)/venv
source tools/venv.sh
new_venv "$PY" "$VENV"
# --only-binary numpy: a NumPy this old cannot be built by today's compilers, so a
# missing wheel must fail here rather than start a long source build.
"$VENV/bin/python" -m pip install -q --only-binary=numpy "numpy==$NUMPY" "setuptools>=77" wheel \
    "Cython>=3.1" "pytest>=7" "pytest-timeout>=2.1" "hypothesis>=6" "mpmath>=1.3" \
    "threadpoolctl>=3" "pytest-benchmark>=4"
bash tools/install_tree.sh "$VENV/bin/python"
"$VENV/bin/python" -c "import sys, numpy, fastpe; print('Python', sys.version.split()[0], '| NumPy', numpy.__version__, '| fastpe', fastpe.__version__)"
"$VENV/bin/python" -m pytest ${FASTPE_TEST_MARK:+-m "$FASTPE_TEST_MARK"} tests -q \
    -p no:cacheprovider
rm -rf "$(dirname "$VENV")"
