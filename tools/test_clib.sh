#!/usr/bin/env bash
# The C library without Python: CMake builds (static and shared with each compiler here,
# serial with gcc), ctest (digests against lib/tests/digests.txt, the API's contract), install
# to a prefix that is then MOVED, C and C++ consumers through find_package and
# pkg-config, the shared library's symbols and dependencies, ThreadSanitizer on
# threads sharing the plan cache (serial build), and the extension module's
# exports when a Python is given; ASan + UBSan over the C tests, and the
# libFuzzer target for a bounded time (tools/fuzz_clib.sh).
#   bash tools/test_clib.sh [python]
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
PY=${1:-}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
JOBS=$(nproc 2>/dev/null || echo 2)
fail() { echo "test_clib: $*" >&2; exit 1; }

# The header's functions: what the shared library must export, no more, no less.
grep -oE '^FASTPE_API [^(]*\bfastpe_[a-z0-9_]+\(' lib/include/fastpe/fastpe.h \
    | sed -E 's/.*\b(fastpe_[a-z0-9_]+)\($/\1/' | sort > "$WORK/header-api.txt"
[ -s "$WORK/header-api.txt" ] || fail "no FASTPE_API functions found in the header"

compilers=(gcc)
command -v clang > /dev/null && compilers+=(clang)

# The CMake builds below compile from a copy of the library's sources, with each build
# folder beside it, through ccache where installed: the compile commands then name the
# same relative paths as the README's build (tests/test_readme.py) and as earlier runs,
# so an identical compile is a cache hit wherever the tree lies.  FASTPE_NO_CCACHE=1
# turns that off.
LIBSRC=$WORK/src
mkdir -p "$LIBSRC"
cp CMakeLists.txt VERSION "$LIBSRC/"
tar --exclude='build*' --exclude=__pycache__ --exclude='*.so' -cf - lib | tar -C "$LIBSRC" -xf -
if [ "${FASTPE_NO_CCACHE:-0}" != 1 ] && command -v ccache > /dev/null; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
    export CCACHE_BASEDIR=$WORK CCACHE_NOHASHDIR=1
fi

build() {  # name cc cmake-args... -> configure, build, ctest, install, move, consume
    local name=$1 cc=$2; shift 2
    # the C++ twin of cc: fastpe.pc carries this compiler's own OpenMP flag
    local cxx=c++
    [ "$cc" = clang ] && cxx=clang++
    local b="$LIBSRC/build-$name" p="$WORK/prefix-$name" t=$SECONDS
    echo "== $name ($cc)"
    CC=$cc cmake -S "$LIBSRC" -B "$b" -DCMAKE_BUILD_TYPE=Release "$@" > "$b.log" 2>&1 \
        || { cat "$b.log"; fail "$name: cmake failed"; }
    cmake --build "$b" -j "$JOBS" > "$b-build.log" 2>&1 \
        || { cat "$b-build.log"; fail "$name: build failed"; }
    (cd "$b" && ctest --output-on-failure) || fail "$name: ctest failed"
    if grep -q avx512f /proc/cpuinfo 2> /dev/null; then
        FASTPE_AVX512=0 "$b/lib/tests/fastpe_digest" "$SRC/lib/tests/digests.txt" \
            || fail "$name: the portable writers' digests differ"
    fi
    cmake --install "$b" --prefix "$p" > /dev/null
    mv "$p" "$p-moved"          # relocatable: nothing may point at the old prefix
    p="$p-moved"
    # find_package(fastpe), C and C++
    CC=$cc CXX=$cxx cmake -S "$SRC/lib/tests/consumer" -B "$b-consumer" -DCMAKE_PREFIX_PATH="$p" \
        -DCMAKE_BUILD_TYPE=Release > "$b-consumer.log" 2>&1 \
        || { cat "$b-consumer.log"; fail "$name: find_package(fastpe) failed"; }
    cmake --build "$b-consumer" > "$b-consumer-build.log" 2>&1 \
        || { cat "$b-consumer-build.log"; fail "$name: the find_package consumers do not build"; }
    LD_LIBRARY_PATH="$p/lib:$p/lib64" "$b-consumer/consumer_c"
    LD_LIBRARY_PATH="$p/lib:$p/lib64" "$b-consumer/consumer_cxx"
    # pkg-config (--static for the static library: its OpenMP and libm come along)
    local pcdir static=""
    pcdir=$(dirname "$(find "$p" -name fastpe.pc | head -n 1)")
    [ -e "$p/lib/libfastpe.a" ] || [ -e "$p/lib64/libfastpe.a" ] && static=--static
    # shellcheck disable=SC2046
    $cc -std=c11 -o "$b/pc_c" "$SRC/lib/tests/consumer/main.c" \
        $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs $static fastpe) -lm \
        || fail "$name: the pkg-config C consumer does not build"
    # shellcheck disable=SC2046
    $cxx -o "$b/pc_cxx" "$SRC/lib/tests/consumer/main.cpp" \
        $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs $static fastpe) \
        || fail "$name: the pkg-config C++ consumer does not build"
    LD_LIBRARY_PATH="$p/lib:$p/lib64" "$b/pc_c"
    LD_LIBRARY_PATH="$p/lib:$p/lib64" "$b/pc_cxx"
    # the release number of the pc file and of the CMake package is VERSION's
    local want pcv cmv
    want=$(tr -d '[:space:]' < "$SRC/VERSION")
    pcv=$(PKG_CONFIG_PATH="$pcdir" pkg-config --modversion fastpe)
    cmv=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$(find "$p" -name fastpeConfigVersion.cmake)")
    [ "$pcv" = "$want" ] && [ "$cmv" = "$want" ] \
        || fail "$name: versions differ: VERSION $want, fastpe.pc $pcv, CMake package $cmv"
    LAST_PREFIX=$p
    echo "-- $name: $((SECONDS - t)) s"
}

for cc in "${compilers[@]}"; do
    build "static-$cc" "$cc"
    # (the serial build once, with the first compiler: OpenMP is what differs, not the compiler)
    [ "$cc" != "${compilers[0]}" ] || build "serial-$cc" "$cc" -DFASTPE_OPENMP=OFF
    build "shared-$cc" "$cc" -DBUILD_SHARED_LIBS=ON
    so=$(find "$LAST_PREFIX" -name 'libfastpe.so.*.*' | head -n 1)
    [ -n "$so" ] || fail "no libfastpe.so installed"
    echo "-- $so"
    readelf -d "$so" | grep -q 'SONAME.*\[libfastpe\.so\.1\]' || fail "SONAME is not libfastpe.so.1"
    needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    echo "   NEEDED: $needed"
    for lib in $needed; do
        case $lib in
            libc.so.*|libm.so.*|libgomp.so.*|libomp.so*|libpthread.so.*|ld-linux*) ;;
            *) fail "unexpected dependency $lib" ;;
        esac
    done
    if nm -D --undefined-only "$so" | grep -qE ' _?Py'; then fail "libfastpe references Python"; fi
    nm -D --defined-only "$so" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort \
        > "$WORK/exported.txt"
    diff -u "$WORK/header-api.txt" "$WORK/exported.txt" \
        || fail "the exported symbols are not the header's functions"
    echo "   exports the header's $(wc -l < "$WORK/header-api.txt") functions, nothing else"
done

# The library's files call each other in layers, never in a circle (tools/tu_calls.py:
# which object file uses which one's symbols).
echo "== calls between the library's files"
python3 tools/tu_calls.py "$WORK/tu-calls" > "$WORK/tu-calls.log" \
    || { cat "$WORK/tu-calls.log"; fail "the library's files call each other in a circle"; }
tail -n 1 "$WORK/tu-calls.log"

# (no ifunc clones: their resolvers run before TSan's runtime is ready)
echo "== ThreadSanitizer: threads sharing the plan cache (serial build)"
CC=gcc cmake -S "$LIBSRC" -B "$LIBSRC/build-tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFASTPE_OPENMP=OFF -DCMAKE_C_FLAGS="-fsanitize=thread -g -DFASTPE_NO_CLONES" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" > "$WORK/tsan.log" 2>&1 \
    || { cat "$WORK/tsan.log"; fail "tsan: cmake failed"; }
cmake --build "$LIBSRC/build-tsan" -j "$JOBS" --target fastpe_test_api > "$WORK/tsan-build.log" 2>&1 \
    || { cat "$WORK/tsan-build.log"; fail "tsan: build failed"; }
TSAN_OPTIONS="halt_on_error=1" setarch "$(uname -m)" -R "$LIBSRC/build-tsan/lib/tests/fastpe_test_api" threads \
    || fail "ThreadSanitizer found a race (or a fill differed)"

# ASan + UBSan over the C tests (the hostile cases at the ends of int64 among
# them): any report aborts the test that made it.
echo "== ASan + UBSan: the C tests (OpenMP build)"
CC=gcc cmake -S "$LIBSRC" -B "$LIBSRC/build-asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -g" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > "$WORK/asan.log" 2>&1 \
    || { cat "$WORK/asan.log"; fail "asan: cmake failed"; }
cmake --build "$LIBSRC/build-asan" -j "$JOBS" > "$WORK/asan-build.log" 2>&1 \
    || { cat "$WORK/asan-build.log"; fail "asan: build failed"; }
# (100 forks beside a busy thread, not 600: each costs ~50 ms under ASan; the six
# builds above ran 600 each)
(cd "$LIBSRC/build-asan" && FASTPE_TEST_FORKS=100 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ctest --output-on-failure) \
    || fail "a C test failed under ASan + UBSan"

# libFuzzer over the public API, bounded (FASTPE_FUZZ_SECONDS, default 25; longer hunts:
# tools/fuzz_clib.sh with more seconds)
echo "== libFuzzer: lib/fuzz/fuzz_api.c"
bash "$SRC/tools/fuzz_clib.sh" "${FASTPE_FUZZ_SECONDS:-25}" || fail "the fuzz target failed"

if [ -n "$PY" ]; then
    echo "== the extension module"
    ext=$("$PY" -c "import fastpe.kernel as k; print(k.__file__)")
    exports=$(nm -D --defined-only "$ext" | awk '$2 == "T" {print $3}' | tr '\n' ' ')
    [ "$exports" = "PyInit_kernel " ] || fail "$ext exports more than PyInit_kernel: $exports"
    if readelf -d "$ext" | grep -q 'libfastpe'; then fail "$ext links a libfastpe.so"; fi
    # (no dynamic fastpe_* symbol at all: every call into the library is direct, no PLT)
    if nm -D "$ext" | grep -q ' fastpe_'; then fail "$ext has dynamic fastpe_* symbols"; fi
    echo "   $ext exports PyInit_kernel only and links no libfastpe"
fi
echo "test_clib: all checks passed"
