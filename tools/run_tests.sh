#!/usr/bin/env bash
# Set up from scratch and run the test suite on both builds of the kernel:
# the OpenMP build and the forced-serial build (FASTPE_DISABLE_OPENMP=1).
#   bash tools/run_tests.sh                 # venv in .venv (reused if present)
#   FASTPE_VENV=/tmp/v bash tools/run_tests.sh
#   bash tools/run_tests.sh -m core         # pytest arguments in place of "tests"
# Both suites run even when the first fails; the last lines say what each build ran and
# passed, and the exit status is non-zero when either build or either suite failed.
# The serial suite leaves out what no build can change (see SAME_IN_BOTH) and runs the
# Hypothesis properties on fewer examples (the "repeat" profile).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_VENV:-.venv}
PY=${PYTHON:-python3}
PYTEST_ARGS=("$@")
[ ${#PYTEST_ARGS[@]} -gt 0 ] || PYTEST_ARGS=(tests)

source tools/venv.sh
use_venv "$PY" "$VENV"
"$VENV/bin/python" -m pip install -q -r requirements-dev.txt
# A development venv's editable install is put back at the end, so that later
# pytest runs there test src/ and not the copy installed below.
editable=
if "$VENV/bin/python" -m pip show fastpe 2>/dev/null | grep -q '^Editable project location'; then
    editable=1
fi

LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
# The README's C library build (tests/test_readme.py) runs in each suite, from a copy of
# the sources in a temporary folder: through ccache, where installed, the second build
# costs a link (the compile commands name the same paths relative to the build folder).
if [ -z "${CMAKE_C_COMPILER_LAUNCHER:-}" ] && [ "${FASTPE_NO_CCACHE:-0}" != 1 ] &&
    command -v ccache > /dev/null; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
    CCACHE_BASEDIR=$(cd "${TMPDIR:-/tmp}" && pwd -P)
    export CCACHE_BASEDIR CCACHE_NOHASHDIR=1
fi
SUMMARY=()
FAILED=0
suite() {  # name expect-openmp FASTPE_DISABLE_OPENMP-value [pytest options]: build, suite
    local name=$1 expect=$2 serial=$3 rc=0 counts
    shift 3
    echo "== $name build${serial:+ (FASTPE_DISABLE_OPENMP=1)}"
    if ! FASTPE_DISABLE_OPENMP=$serial bash tools/install_tree.sh "$VENV/bin/python" ||
        ! "$VENV/bin/python" -c "import fastpe; print(fastpe.build_info())"; then
        SUMMARY+=("$name build: the build FAILED (no tests ran)")
        FAILED=1
        return
    fi
    FASTPE_EXPECT_OPENMP=$expect "$VENV/bin/python" -m pytest "${PYTEST_ARGS[@]}" "$@" -q \
        -p no:cacheprovider 2>&1 | tee "$LOG/$name.txt" || rc=$?
    # pytest -q's closing line ("12 passed, 3 skipped in 9.87s"), without its timing
    counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error|skipped|deselected)|no tests ran' \
        "$LOG/$name.txt" | tail -n 1 | sed -E 's/^=+ //; s/ in [0-9.]+s.*$//; s/ =+$//' || true)
    [ "$rc" -eq 0 ] || FAILED=1
    SUMMARY+=("$name build: ${counts:-no summary from pytest} ($([ "$rc" -eq 0 ] && echo passed ||
        echo "FAILED, pytest exit $rc"))")
}

# The values that must be the same on every machine (the RoPE rules, the C library's
# digests), once more with NumPy's SIMD loops off: a value that came from them would
# change here, on any host.
no_simd() {
    local rc=0 feats counts
    feats=$("$VENV/bin/python" -c "import numpy as np; m = getattr(np, '_core', None) or np.core
print(' '.join(m._multiarray_umath.__cpu_dispatch__))")
    echo "== NumPy's SIMD dispatch off (NPY_DISABLE_CPU_FEATURES=\"$feats\")"
    NPY_DISABLE_CPU_FEATURES=$feats "$VENV/bin/python" -m pytest tests/test_rope_truth.py \
        tests/test_clib.py tests/test_clib_rules.py tests/test_rope.py -q -p no:cacheprovider \
        2>&1 | tee "$LOG/no_simd.txt" || rc=$?
    counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error|skipped)' "$LOG/no_simd.txt" |
        tail -n 1 | sed -E 's/^=+ //; s/ in [0-9.]+s.*$//; s/ =+$//' || true)
    [ "$rc" -eq 0 ] || FAILED=1
    SUMMARY+=("without NumPy's SIMD: ${counts:-no summary from pytest} ($([ "$rc" -eq 0 ] &&
        echo passed || echo "FAILED, pytest exit $rc"))")
}

# The serial build first: the OpenMP build, tested last, is the one left installed
# (tools/test_clib.sh checks its exports), without a third build.  The serial suite
# leaves out what no build of the extension can change, which the OpenMP suite runs
# (13 s of CPU with ccache warm, twice that cold): the README's C library section,
# built with CMake without Python, and mypy over the typed examples, the .pyi stubs and
# the compiled module (one .pyx, no compile-time branch in what it exports).  Its
# Hypothesis properties run the shorter "repeat" profile (tests/conftest.py): the
# OpenMP build's run covers the generated argument space with the "ci" profile.
SAME_IN_BOTH=(
    --deselect "tests/test_readme.py::test_shell_section_runs[C and C++ (libfastpe, no Python)]"
    --deselect tests/test_typing.py
)
HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-repeat} suite serial 0 1 "${SAME_IN_BOTH[@]}"
suite OpenMP 1 ""
no_simd

if [ -n "$editable" ]; then
    echo "== leave the OpenMP build installed, editable as it was"
    bash tools/install_tree.sh "$VENV/bin/python" -e || FAILED=1
fi

echo
echo "== run_tests.sh: pytest ${PYTEST_ARGS[*]}"
for line in "${SUMMARY[@]}"; do
    echo "   $line"
done
if [ "$FAILED" -eq 0 ]; then
    echo "   result: OK (both builds passed)"
else
    echo "   result: FAILED"
    exit 1
fi
