#!/usr/bin/env bash
# The linters, zero findings allowed: ruff (lint and format), cython-lint, clang-format
# for the C sources, mypy over src/.  Installs the pinned linters into a venv of their
# own (requirements-lint.txt); .pre-commit-config.yaml runs the same commands.
#   bash tools/lint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${FASTPE_LINT_VENV:-$(mktemp -d)/venv}
[ -x "$VENV/bin/ruff" ] || {
    source tools/venv.sh
    new_venv "$PY" "$VENV"
    "$VENV/bin/python" -m pip install -q -r requirements-lint.txt numpy
}
export PATH="$VENV/bin:$PATH"
PYFILES=(src tests bench tools docs setup.py)
CFILES=(lib/src/kernels/*.h lib/src/kernels/*.c src/fastpe/include/fastpe.h tools/*.c bench/*.c
        lib/src/*.c lib/src/*.h lib/include/fastpe/*.h lib/tests/*.c lib/tests/consumer/*.c* lib/fuzz/*.c
        tests/ext/*.c tools/wine/*.c tools/wine/*.h)
echo "== ruff check";   ruff check "${PYFILES[@]}"
echo "== ruff format";  ruff format --check "${PYFILES[@]}"
echo "== cython-lint";  cython-lint --max-line-length 100 src/fastpe/*.pyx src/fastpe/*.pxd \
                            src/fastpe/*.pxi tests/ext/*.pyx
echo "== clang-format"; clang-format --dry-run --Werror "${CFILES[@]}"
echo "== mypy";         mypy
echo "lint: no findings"
