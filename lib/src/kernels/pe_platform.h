/*
 * Compiler portability for the fastpe C core: inline and restrict spellings,
 * the x86-64 function clones of the hot loops, the visibility of what the
 * core's two compilation units share, and the one alignment helper both use.
 */
#ifndef FASTPE_PE_PLATFORM_H
#define FASTPE_PE_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#if defined(_MSC_VER)
#define PE_INLINE   static __inline
#define PE_RESTRICT __restrict
#else
#define PE_INLINE   static inline
#define PE_RESTRICT __restrict__
#endif

/* A header's non-inline static function (kept out of line for its target
 * clones) that some of the files including the header do not call: no
 * -Wunused-function there. */
#if defined(__GNUC__)
#define PE_MAYBE_UNUSED __attribute__((unused))
#else
#define PE_MAYBE_UNUSED
#endif

/* Functions and state shared by kernel.c and pe_v512.c: kept out of the
 * extension's exported symbols, so calls between them need no PLT. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#define PE_HIDDEN __attribute__((visibility("hidden")))
#else
#define PE_HIDDEN
#endif

/*
 * Wheels target baseline x86-64 (SSE2).  On glibc x86-64 with GCC the hot
 * loops are also compiled for AVX2 and AVX-512 and picked at load time (ifunc).
 * Every clone performs the same IEEE operations in the same order (no FMA
 * contraction), so all of them produce bitwise identical results.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&       \
    defined(__GLIBC__) && !defined(FASTPE_NO_CLONES) && !defined(__SANITIZE_ADDRESS__)
#define PE_TARGET_CLONES                                                                           \
    __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define PE_TARGET_CLONES
#endif

/* "No loop-carried dependences" for the row loops: GCC does not reliably apply
 * restrict to pointers copied out of a struct (or after inlining), and the
 * alias checks it would then need exceed its limit, leaving the loop scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#define PE_IVDEP _Pragma("GCC ivdep")
#else
#define PE_IVDEP
#endif

/* How many units of `unit` bytes from p to the next 64-byte boundary (at most
 * n; 0 when p is not a multiple of `unit`): the head a row writer stores on its
 * own, so that its vector stores never straddle two cache lines. */
PE_INLINE int64_t pe_head(const void *p, size_t unit, int64_t n) {
    size_t m = (size_t)((uintptr_t)p & 63);
    int64_t h = (m % unit) ? 0 : (int64_t)(((64 - m) & 63) / unit);
    return h < n ? h : n;
}

/* A hint that the line at address a will soon be read and written, kept out of
 * the outer caches (the fused add's x: each line is visited once).  A hint
 * never faults, so a line past the end of x is harmless; the address is an
 * integer so that no out-of-bounds pointer is formed. */
#define PE_ADD_AHEAD 1024
PE_INLINE void pe_prefetch_x(uintptr_t a) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch((const void *)a, 1, 0);
#else
    (void)a;
#endif
}

#endif /* FASTPE_PE_PLATFORM_H */
