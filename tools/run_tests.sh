#!/usr/bin/env bash
# Set up from scratch and run the test suite on both builds of the kernel:
# the OpenMP build and the forced-serial build (FASTPE_DISABLE_OPENMP=1).
#   bash tools/run_tests.sh            # venv in .venv (reused if present)
#   FASTPE_VENV=/tmp/v bash tools/run_tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_VENV:-.venv}
PY=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r requirements-dev.txt
# A development venv's editable install is put back at the end, so that later
# pytest runs there test src/ and not the copy installed below.
editable=
if "$VENV/bin/python" -m pip show fastpe 2>/dev/null | grep -q '^Editable project location'; then
    editable=1
fi

build() {  # build + install the package from this tree, no build isolation
    rm -rf build src/fastpe/kernel.c
    "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall . \
        >/dev/null
}

echo "== OpenMP build"
build
"$VENV/bin/python" -c "import fastpe; print(fastpe.build_info())"
FASTPE_EXPECT_OPENMP=1 "$VENV/bin/python" -m pytest tests -q -p no:cacheprovider

echo "== serial build (FASTPE_DISABLE_OPENMP=1)"
FASTPE_DISABLE_OPENMP=1 build
"$VENV/bin/python" -c "import fastpe; print(fastpe.build_info())"
FASTPE_EXPECT_OPENMP=0 "$VENV/bin/python" -m pytest tests -q -p no:cacheprovider

if [ -n "$editable" ]; then
    echo "== leave the OpenMP build installed, editable as it was"
    rm -rf build src/fastpe/kernel.c
    "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall -e . \
        >/dev/null
else
    echo "== leave the OpenMP build installed"
    build
fi
