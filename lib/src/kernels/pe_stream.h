/*
 * Streaming (non-temporal) stores and write prefetches: how finished rows
 * reach memory when a table outgrows the caches, and how the fused add
 * warms the rows it is about to visit.
 */
#ifndef FASTPE_PE_STREAM_H
#define FASTPE_PE_STREAM_H

#include "pe_platform.h"

/*
 * Streaming (non-temporal) copy of a finished row to its destination.  A table
 * larger than the caches is written once and not read back by the filler: plain
 * stores first read every destination line into the cache (read-for-ownership),
 * doubling the memory traffic; streaming stores skip that read.  SSE2 is the
 * x86-64 baseline, so every x86-64 build has them; elsewhere this is memcpy.
 * pe_stream_fence() must follow a thread's last streaming store (they are weakly
 * ordered) before other threads may read the rows.
 */
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define PE_HAVE_STREAM 1
PE_INLINE void pe_stream_copy(void *dst, const void *src, size_t n) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
        _mm_stream_si128((__m128i *)(d + 16), _mm_loadu_si128((const __m128i *)(s + 16)));
        _mm_stream_si128((__m128i *)(d + 32), _mm_loadu_si128((const __m128i *)(s + 32)));
        _mm_stream_si128((__m128i *)(d + 48), _mm_loadu_si128((const __m128i *)(s + 48)));
    }
    for (; n >= 16; n -= 16, d += 16, s += 16)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    memcpy(d, s, n);
}
PE_INLINE void pe_stream_fence(void) { _mm_sfence(); }
#else
#define PE_HAVE_STREAM 0
PE_INLINE void pe_stream_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
PE_INLINE void pe_stream_fence(void) {}
#endif

/* Ask for the lines of [p, p+n) ahead of a write.  The fused add visits one row
 * of each sequence in turn (rows far apart in x); hardware prefetchers follow a
 * stream only within a page, so each jump would start cold (docs/performance.md
 * has the measurement). */
PE_INLINE void pe_prefetch_write(const void *p, size_t n) {
#if defined(__GNUC__) || defined(__clang__)
    const char *c = (const char *)p;
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch(c + k, 1, 3);
#else
    (void)p;
    (void)n;
#endif
}

#endif /* FASTPE_PE_STREAM_H */
