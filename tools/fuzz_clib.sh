#!/usr/bin/env bash
# libFuzzer over libfastpe's public API (lib/fuzz/fuzz_api.c) under ASan + UBSan,
# for a bounded time, from the corpus kept in lib/fuzz/corpus (new inputs go to
# a scratch folder; FASTPE_FUZZ_KEEP=1 merges them into the kept corpus).
#   bash tools/fuzz_clib.sh [seconds]          (default 45)
# Needs clang with libFuzzer and an OpenMP runtime for clang (libomp-dev);
# without them it says so and exits 0 unless FASTPE_FUZZ_REQUIRED=1.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-45}
CC=${FUZZ_CC:-clang}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
skip() {
    echo "fuzz_clib: $*" >&2
    [ "${FASTPE_FUZZ_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
}
command -v "$CC" > /dev/null || skip "no $CC: libFuzzer run skipped"
mapfile -t SOURCES < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' lib/sources.txt | grep -v '^$')
OMP=-fopenmp
echo 'int main(void){return 0;}' > "$WORK/omp.c"
if ! "$CC" -fopenmp "$WORK/omp.c" -o "$WORK/omp" 2> /dev/null; then
    [ "${FASTPE_FUZZ_REQUIRED:-0}" = 1 ] && { echo "fuzz_clib: $CC has no OpenMP" >&2; exit 1; }
    echo "fuzz_clib: $CC has no OpenMP runtime: fuzzing the serial build" >&2
    OMP=""
fi
echo "== building the fuzz target ($CC, ASan + UBSan${OMP:+, OpenMP})"
# (the library's own floating-point flags, as CMakeLists.txt sets them)
# shellcheck disable=SC2086
"$CC" -O1 -g -std=c11 -D_GNU_SOURCE $OMP -ffp-contract=off -fno-fast-math -fno-math-errno \
    -fno-trapping-math -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Ilib/include -Ilib/src "${SOURCES[@]}" lib/fuzz/fuzz_api.c \
    -o "$WORK/fuzz_api" -lm -lpthread 2> "$WORK/build.log" \
    || { cat "$WORK/build.log"; skip "$CC could not build a libFuzzer target"; }
mkdir -p "$WORK/new"
echo "== fuzzing for ${SECONDS_TO_RUN}s from lib/fuzz/corpus ($(ls lib/fuzz/corpus | wc -l) inputs)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$WORK/fuzz_api" -max_total_time="$SECONDS_TO_RUN" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$WORK/" "$WORK/new" lib/fuzz/corpus \
    > "$WORK/fuzz.log" 2>&1 || {
    tail -n 60 "$WORK/fuzz.log"
    for a in "$WORK"/crash-* "$WORK"/timeout-* "$WORK"/leak-*; do
        [ -e "$a" ] && { echo "reproducer (hex):"; od -An -tx1 "$a" | head -n 8; }
    done
    echo "fuzz_clib: the fuzz target failed" >&2
    exit 1
}
grep -E '^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+.*DONE' "$WORK/fuzz.log" || true
if [ "${FASTPE_FUZZ_KEEP:-0}" = 1 ]; then
    "$WORK/fuzz_api" -merge=1 lib/fuzz/corpus "$WORK/new" > /dev/null 2>&1
    echo "   corpus now $(ls lib/fuzz/corpus | wc -l) inputs"
fi
echo "fuzz_clib: no failures"
