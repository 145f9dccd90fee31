#!/usr/bin/env bash
# Build the kernel with the sanitizers (FASTPE_SANITIZE in setup.py) and run the test
# suite under each build.  Any sanitizer report fails the script.
#   bash tools/sanitize.sh [ubsan|asan|all]        (default all)
#     ubsan: UBSan alone, the serial build, the whole suite (the runtime is light: no
#            preload, Python's own allocator)
#     asan:  ASan+UBSan, the OpenMP build, the core subset (-m core, tests/conftest.py);
#            FASTPE_SAN_MARK="" runs the whole suite there too
#   FASTPE_SAN_VENV=/tmp/vsan HYPOTHESIS_PROFILE=ci bash tools/sanitize.sh asan
# The venv is its own (a sanitized fastpe must not end up in the dev venv).
# Hypothesis runs with the short "sanitizers" profile by default (tests/conftest.py):
# under ASan every call is several times slower, and the full profile runs in the normal job.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${FASTPE_SAN_VENV:-$(mktemp -d)/venv}
PY=${PYTHON:-python3}
CC=${CC:-gcc}
PARTS=${1:-all}
case $PARTS in ubsan | asan | all) ;; *) echo "usage: sanitize.sh [ubsan|asan|all]" >&2; exit 2 ;; esac
MARK=${FASTPE_SAN_MARK-core}
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-sanitizers}

source tools/venv.sh
use_venv "$PY" "$VENV"
"$VENV/bin/python" -m pip install -q -r requirements-dev.txt

# The interpreter is not instrumented, so the ASan runtime has to be loaded
# first; the UBSan runtime comes in as a dependency of the extension.
ASAN_LIB=$("$CC" -print-file-name=libasan.so)
if [ ! -e "$ASAN_LIB" ]; then
    echo "sanitize.sh: $CC has no libasan.so ($ASAN_LIB); install libasan" >&2
    exit 2
fi
# detect_leaks=0: CPython never frees everything at exit, so LeakSanitizer
# reports noise; leaks are tested by tests/test_leaks.py instead.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
LOG=$(mktemp)

build() {  # $1: the FASTPE_SANITIZE value; $2: the runtime the extension must link
    FASTPE_SANITIZE=$1 bash tools/install_tree.sh "$VENV/bin/python"
    # (located without importing it: that needs the preload; no `ldd | grep -q`,
    # which under pipefail fails whenever grep closes the pipe early)
    local deps
    deps=$(ldd "$VENV"/lib/python3*/site-packages/fastpe/kernel*.so)
    case "$deps" in
        *"$2"*) ;;
        *) echo "sanitize.sh: the extension is not linked with $2:" >&2; echo "$deps" >&2; exit 1 ;;
    esac
}

# Left out here, since tools/run_tests.sh runs them on both builds and ASan sees little
# of them: mypy over the stubs and typed examples (tests/test_typing.py), and the README's
# shell sections (tests/test_readme.py), which build the C library and an extension with
# the system's compilers, unsanitized; the sanitized kernel called from a compiled
# extension is tests/test_capi.py and tests/test_cython_api.py.  Under ASan these took
# about 110 s of CPU on the 2-core machine.
SKIP=(--deselect tests/test_typing.py --deselect tests/test_readme.py::test_shell_section_runs)

run() {  # $1: expected openmp (0/1); $2: a pytest -m expression, or nothing; $3: preload
    # PYTHONMALLOC=malloc under ASan: Python objects come from malloc, so ASan sees them too.
    LD_PRELOAD="$3" PYTHONMALLOC=${3:+malloc} FASTPE_EXPECT_OPENMP="$1" \
        "$VENV/bin/python" -m pytest ${2:+-m "$2"} tests "${SKIP[@]}" -q -p no:cacheprovider \
        2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "sanitize.sh: test run failed (rc=$rc)" >&2; exit 1; }
}

# Each build under a sanitizer: the serial one under UBSan (whole suite), the OpenMP one
# under ASan+UBSan (the threads' rows, partitions and scratch, where memory errors hide).
if [ "$PARTS" != asan ]; then
    echo "== UBSan, serial build (FASTPE_DISABLE_OPENMP=1), the whole suite"
    FASTPE_DISABLE_OPENMP=1 build undefined libubsan
    run 0 "" ""
fi
if [ "$PARTS" != ubsan ]; then
    echo "== ASan+UBSan, OpenMP build${MARK:+, -m $MARK}"
    build 1 libasan
    run 1 "$MARK" "$ASAN_LIB"
fi

# Belt and braces: a report in a subprocess whose failure a test tolerated.
if grep -Eq "ERROR: AddressSanitizer|runtime error:|SUMMARY: (Address|UndefinedBehavior)Sanitizer" "$LOG"; then
    echo "sanitize.sh: sanitizer reports found:" >&2
    grep -E "ERROR: AddressSanitizer|runtime error:|SUMMARY:" "$LOG" >&2
    exit 1
fi
rm -f "$LOG"
echo "sanitize.sh: no sanitizer reports"
