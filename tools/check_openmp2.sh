#!/usr/bin/env bash
# The kernel must build against an OpenMP 2.0 runtime (MSVC's vcomp, which the
# Windows wheels link): compile the generated C and the C library's sources
# (lib/sources.txt) with an omp.h that declares only
# the OpenMP 2.0 API and _OPENMP = 200203, so that any newer omp_* call is an
# implicit declaration, which is an error here.  The check first proves it
# bites: with _OPENMP = 200805 (3.0) the guarded omp_get_thread_limit() call is
# compiled in and must fail.
#   bash tools/check_openmp2.sh [python]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
CC=${CC:-gcc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/inc"
cat > "$work/inc/omp.h" <<'H'
/* The OpenMP 2.0 C API (the whole of it, as MSVC's vcomp provides). */
typedef void *omp_lock_t;
typedef void *omp_nest_lock_t;
void omp_set_num_threads(int);
int omp_get_num_threads(void);
int omp_get_max_threads(void);
int omp_get_thread_num(void);
int omp_get_num_procs(void);
int omp_in_parallel(void);
void omp_set_dynamic(int);
int omp_get_dynamic(void);
void omp_set_nested(int);
int omp_get_nested(void);
void omp_init_lock(omp_lock_t *);
void omp_destroy_lock(omp_lock_t *);
void omp_set_lock(omp_lock_t *);
void omp_unset_lock(omp_lock_t *);
int omp_test_lock(omp_lock_t *);
void omp_init_nest_lock(omp_nest_lock_t *);
void omp_destroy_nest_lock(omp_nest_lock_t *);
void omp_set_nest_lock(omp_nest_lock_t *);
void omp_unset_nest_lock(omp_nest_lock_t *);
int omp_test_nest_lock(omp_nest_lock_t *);
double omp_get_wtime(void);
double omp_get_wtick(void);
H
"$PY" -m cython -3 -X boundscheck=False -X wraparound=False -X cdivision=True \
    -X freethreading_compatible=True -I src src/fastpe/kernel.pyx -o "$work/kernel.c"
pyinc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
mapfile -t libsrc < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' lib/sources.txt)
compile() {  # _OPENMP value -> exit status of syntax-only compiles (all of them run)
    local rc=0 f
    : > "$work/err-$1.txt"
    for f in "$work/kernel.c" "${libsrc[@]}"; do
        "$CC" -fsyntax-only -std=c11 -D_GNU_SOURCE -D_OPENMP="$1" \
            -Werror=implicit-function-declaration -I"$work/inc" -I"$pyinc" -Isrc/fastpe \
            -Ilib/include -Ilib/src "$f" 2>> "$work/err-$1.txt" || rc=1
    done
    return $rc
}
if compile 200805; then
    echo "check_openmp2: the check does not bite (an OpenMP 3.0 call compiled against 2.0 declarations)" >&2
    exit 1
fi
grep -q "omp_get_thread_limit" "$work/err-200805.txt" || {
    echo "check_openmp2: unexpected failure with _OPENMP=200805:" >&2; cat "$work/err-200805.txt" >&2; exit 1; }
if ! compile 200203; then
    echo "check_openmp2: the kernel uses OpenMP API beyond 2.0 (MSVC's vcomp cannot link it):" >&2
    grep -E "error|implicit" "$work/err-200203.txt" >&2 || cat "$work/err-200203.txt" >&2
    exit 1
fi
echo "check_openmp2: the kernel compiles against the OpenMP 2.0 API (and the check bites on 3.0 calls)"
