/*
 * The AVX-512 row writers, a compilation unit of its own: the only code built
 * with AVX-512 instructions (GCC `target` attributes), entered only after
 * pe_v512_init has seen AVX-512F on the CPU.  They write the mirrored rows
 * c+t and c-t, and the rows written alone, instead of the compiler-vectorised
 * loops of pe_rows.inc.h:
 *   - the few entries before the first 64-byte boundary (and after the last
 *     whole vector) are one vector block stored under a mask, neither a scalar
 *     loop nor a buffer and a copy (both measurably slower on NumPy's arrays,
 *     which start 16 bytes past a page boundary);
 *   - with streaming stores, the rows go straight from registers to memory (no
 *     row buffer, no copy): for tables that outgrow the last-level cache that
 *     is most of the time of a fill.
 * docs/performance.md has the figures.  The vector code performs the IEEE
 * operations of pe_pairs2_at / pe_split2_at in the same order (no FMA: built
 * with -ffp-contract=off), so the bits are those of the portable loops (a row
 * alone is one half of a pair: see PE_V512_PAIR below).
 */
#include "pe_v512.h"

#if PE_HAVE_V512
#include <immintrin.h>

static int pe_v512_cpu = 0;   /* the CPU has AVX-512F */
int pe_v512 = 0;

void pe_v512_init(void) {
    __builtin_cpu_init();
    pe_v512_cpu = pe_v512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
}

int pe_v512_set(int on) {
    int old = pe_v512;
    pe_v512 = on && pe_v512_cpu;
    return old;
}

#define PE_V512_CORE(i, X)                                                                \
    __m512d as##X = _mm512_loadu_pd(As + (i)), ac##X = _mm512_loadu_pd(Ac + (i));         \
    __m512d tm##X = _mm512_loadu_pd(Tm + (i)), ts##X = _mm512_loadu_pd(Ts + (i));         \
    __m512d p1##X = _mm512_mul_pd(as##X, tm##X), p2##X = _mm512_mul_pd(ac##X, ts##X);     \
    __m512d p3##X = _mm512_mul_pd(ac##X, tm##X), p4##X = _mm512_mul_pd(as##X, ts##X);     \
    __m512d sp##X = _mm512_add_pd(as##X, _mm512_add_pd(p1##X, p2##X));                    \
    __m512d cp##X = _mm512_add_pd(ac##X, _mm512_sub_pd(p3##X, p4##X));                    \
    __m512d sm##X = _mm512_add_pd(as##X, _mm512_sub_pd(p1##X, p2##X));                    \
    __m512d cm##X = _mm512_add_pd(ac##X, _mm512_add_pd(p3##X, p4##X));
#define PE_V512_ARGS const double *As, const double *Ac, const double *Tm, const double *Ts

PE_INLINE int pe_aligned64(const void *a, const void *b, const void *c, const void *d) {
    return ((((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 63) == 0);
}

/*
 * Each writer: a head block at frequency 0 stored under a mask (the entries
 * before the first 64-byte boundary), whole blocks with aligned full stores
 * (streaming stores if `stream`), and a tail block at the last whole-block position
 * stored under a mask (the entries after the last full block; it recomputes a few
 * entries of the previous block, with the same bits, and does not store them).
 * Masked stores touch only their lanes, so nothing outside the row is written.
 */
#define PE_V512_STORE(kind, dst, vec, stream)                                             \
    do {                                                                                  \
        if (stream)                                                                       \
            _mm512_stream_##kind(dst, vec);                                               \
        else                                                                              \
            _mm512_storeu_##kind(dst, vec);                                               \
    } while (0)

/* Line-local partial stores, for destinations whose whole blocks are 64-byte
 * aligned: the head (lanes 0..cnt-1 of v to p[0..cnt), p + cnt on a boundary)
 * and the tail (lanes L.. of v to p[0..), p on a boundary) each go into one
 * cache line.  A masked store at an unaligned address spans two lines, and in a
 * streaming fill that costs about as much as the whole row: the second,
 * masked-off line is still fetched, then evicted again by the streaming stores
 * that follow. */
__attribute__((target("avx512f")))
static inline void pe_head_ps(float *p, int64_t cnt, __m512 v) {
    int off = (int)(16 - cnt);
    __m512i idx = _mm512_sub_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32(off));
    _mm512_mask_storeu_ps(p - off, (__mmask16)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_ps(idx, v));
}
__attribute__((target("avx512f")))
static inline void pe_tail_ps(float *p, int64_t L, __m512 v) {
    __m512i idx = _mm512_add_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)L));
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << (16 - L)) - 1u), _mm512_permutexvar_ps(idx, v));
}
__attribute__((target("avx512f")))
static inline void pe_head_pd(double *p, int64_t cnt, __m512d v) {
    int off = (int)(8 - cnt);
    __m512i idx = _mm512_sub_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm512_set1_epi64(off));
    _mm512_mask_storeu_pd(p - off, (__mmask8)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_pd(idx, v));
}
/* tail of the 16 lanes [a | b] from lane L (L >= 1): to p[0..16-L), p aligned */
__attribute__((target("avx512f")))
static inline void pe_tail2_pd(double *p, int64_t L, __m512d a, __m512d b) {
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    int64_t n = 16 - L;
    __m512d lo = _mm512_permutex2var_pd(a, _mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
    _mm512_mask_storeu_pd(p, (__mmask8)(n >= 8 ? 0xFFu : (1u << n) - 1u), lo);
    if (n > 8) {
        __m512d hi = _mm512_permutexvar_pd(_mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
        _mm512_mask_storeu_pd(p + 8, (__mmask8)((1u << (n - 8)) - 1u), hi);
    }
}
__attribute__((target("avx512f")))
static inline void pe_tail_pd(double *p, int64_t L, __m512d v) {
    __m512i idx = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm512_set1_epi64(L));
    _mm512_mask_storeu_pd(p, (__mmask8)((1u << (8 - L)) - 1u), _mm512_permutexvar_pd(idx, v));
}

/*
 * Each layout and dtype has one skeleton for both of its uses.  `rows` is a
 * constant at every call, so the skeleton is inlined and what a call does not
 * store is compiled away:
 *   PE_V512_PAIR:  the mirrored pair, rp at +t and rm at -t;
 *   PE_V512_PLUS, PE_V512_MINUS: one row, rp, the +t or the -t half of the pair
 *                  (rm must be rp; it is never stored).  A row of sign sg is the
 *                  half of that sign: multiplying by sg = +-1 is exact, so those
 *                  are the bits of PE_SIN / PE_COS.
 */
#define PE_V512_PAIR 0
#define PE_V512_PLUS 1
#define PE_V512_MINUS 2
#define PE_V512_SKELETON static inline __attribute__((always_inline, target("avx512f")))

/* interleaved float32: a block is 8 frequencies = 16 floats of each row */
PE_V512_SKELETON
int pe_v512_pairs_f32(float *rp, float *rm, int rows, int64_t np, PE_V512_ARGS, int stream) {
    const __m512i ix = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const int two = rows == PE_V512_PAIR;
    __m512 p, m;
    __mmask16 k;
    int64_t h, v, i, t0;
    int al;
    if (np < 8)
        return 0;
    h = pe_head(rp, 2 * sizeof(float), np);
    al = pe_aligned64(rp + 2 * h, rm + 2 * h, rp + 2 * h, rm + 2 * h);
    if (stream && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        p = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sp0)), ix,      \
                                   _mm512_castps256_ps512(_mm512_cvtpd_ps(cp0)));         \
        m = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sm0)), ix,      \
                                   _mm512_castps256_ps512(_mm512_cvtpd_ps(cm0)));         \
        if (rows == PE_V512_MINUS)                                                        \
            p = m;                                                                        \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_ps(rp, 2 * h, p);
            if (two)
                pe_head_ps(rm, 2 * h, m);
        } else {
            k = (__mmask16)((1u << (2 * h)) - 1u);
            _mm512_mask_storeu_ps(rp, k, p);
            if (two)
                _mm512_mask_storeu_ps(rm, k, m);
        }
    }
    v = h + (np - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(ps, rp + 2 * i, p, stream);
        if (two)
            PE_V512_STORE(ps, rm + 2 * i, m, stream);
    }
    if (v < np) {
        t0 = np - 8;
        PE_BLK(t0)
        if (al) {
            pe_tail_ps(rp + 2 * v, 2 * (v - t0), p);
            if (two)
                pe_tail_ps(rm + 2 * v, 2 * (v - t0), m);
        } else {
            k = (__mmask16)((0xFFFFu << (2 * (v - t0))) & 0xFFFFu);
            _mm512_mask_storeu_ps(rp + 2 * t0, k, p);
            if (two)
                _mm512_mask_storeu_ps(rm + 2 * t0, k, m);
        }
    }
#undef PE_BLK
    return 1;
}

/* interleaved float64: a block is 8 frequencies = 16 doubles (two vectors) */
PE_V512_SKELETON
int pe_v512_pairs_f64(double *rp, double *rm, int rows, int64_t np, PE_V512_ARGS, int stream) {
    const __m512i lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    const int two = rows == PE_V512_PAIR;
    __m512d p0, p1, m0, m1;
    __mmask8 k0, k1;
    int64_t h, v, i, t0, L;
    int al;
    if (np < 8)
        return 0;
    h = pe_head(rp, 2 * sizeof(double), np);
    al = pe_aligned64(rp + 2 * h, rm + 2 * h, rp + 2 * h, rm + 2 * h);
    if (stream && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        p0 = _mm512_permutex2var_pd(sp0, lo, cp0);                                        \
        p1 = _mm512_permutex2var_pd(sp0, hi, cp0);                                        \
        m0 = _mm512_permutex2var_pd(sm0, lo, cm0);                                        \
        m1 = _mm512_permutex2var_pd(sm0, hi, cm0);                                        \
        if (rows == PE_V512_MINUS) {                                                      \
            p0 = m0;                                                                      \
            p1 = m1;                                                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_pd(rp, 2 * h, p0);
            if (two)
                pe_head_pd(rm, 2 * h, m0);
        } else {
            k0 = (__mmask8)((1u << (2 * h)) - 1u);
            _mm512_mask_storeu_pd(rp, k0, p0);
            if (two)
                _mm512_mask_storeu_pd(rm, k0, m0);
        }
    }
    v = h + (np - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(pd, rp + 2 * i, p0, stream);
        PE_V512_STORE(pd, rp + 2 * i + 8, p1, stream);
        if (two) {
            PE_V512_STORE(pd, rm + 2 * i, m0, stream);
            PE_V512_STORE(pd, rm + 2 * i + 8, m1, stream);
        }
    }
    if (v < np) {
        t0 = np - 8;
        PE_BLK(t0)
        L = 2 * (v - t0);               /* first lane to store, of 16 */
        if (al) {
            pe_tail2_pd(rp + 2 * v, L, p0, p1);
            if (two)
                pe_tail2_pd(rm + 2 * v, L, m0, m1);
        } else {
            k0 = (__mmask8)(L < 8 ? (0xFFu << L) & 0xFFu : 0u);
            k1 = (__mmask8)(L < 8 ? 0xFFu : (0xFFu << (L - 8)) & 0xFFu);
            _mm512_mask_storeu_pd(rp + 2 * t0, k0, p0);
            _mm512_mask_storeu_pd(rp + 2 * t0 + 8, k1, p1);
            if (two) {
                _mm512_mask_storeu_pd(rm + 2 * t0, k0, m0);
                _mm512_mask_storeu_pd(rm + 2 * t0 + 8, k1, m1);
            }
        }
    }
#undef PE_BLK
    return 1;
}

__attribute__((target("avx512f")))
static inline __m512 pe_v512_cat(__m512d a, __m512d b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(a))),
        _mm256_castps_pd(_mm512_cvtpd_ps(b)), 1));
}

/* split float32: a block is 16 frequencies = 16 floats in each of the four
 * destinations (d0/d1 sines/cosines of rp, d2/d3 of rm; one row: d2 = d0,
 * d3 = d1, never stored) */
PE_V512_SKELETON
int pe_v512_split_f32(float *d0, float *d1, float *d2, float *d3, int rows, int64_t n,
                      PE_V512_ARGS, int stream) {
    const int two = rows == PE_V512_PAIR;
    __m512 a, b, c, d;
    __mmask16 k;
    int64_t h, v, i, t0;
    int al;
    if (n < 16)
        return 0;
    h = pe_head(d0, sizeof(float), n);
    al = pe_aligned64(d0 + h, d1 + h, d2 + h, d3 + h);
    if (stream && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        PE_V512_CORE((i) + 8, 1)                                                          \
        a = pe_v512_cat(sp0, sp1);                                                        \
        b = pe_v512_cat(cp0, cp1);                                                        \
        c = pe_v512_cat(sm0, sm1);                                                        \
        d = pe_v512_cat(cm0, cm1);                                                        \
        if (rows == PE_V512_MINUS) {                                                      \
            a = c;                                                                        \
            b = d;                                                                        \
        }                                                                                 \
    }
#define PE_MSTORE(off, k)                                                                 \
    {                                                                                     \
        _mm512_mask_storeu_ps(d0 + (off), k, a);                                          \
        _mm512_mask_storeu_ps(d1 + (off), k, b);                                          \
        if (two) {                                                                        \
            _mm512_mask_storeu_ps(d2 + (off), k, c);                                      \
            _mm512_mask_storeu_ps(d3 + (off), k, d);                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_ps(d0, h, a);
            pe_head_ps(d1, h, b);
            if (two) {
                pe_head_ps(d2, h, c);
                pe_head_ps(d3, h, d);
            }
        } else {
            k = (__mmask16)((1u << h) - 1u);
            PE_MSTORE(0, k)
        }
    }
    v = h + (n - h) / 16 * 16;
    for (i = h; i < v; i += 16) {
        PE_BLK(i)
        PE_V512_STORE(ps, d0 + i, a, stream);
        PE_V512_STORE(ps, d1 + i, b, stream);
        if (two) {
            PE_V512_STORE(ps, d2 + i, c, stream);
            PE_V512_STORE(ps, d3 + i, d, stream);
        }
    }
    if (v < n) {
        t0 = n - 16;
        PE_BLK(t0)
        if (al) {
            pe_tail_ps(d0 + v, v - t0, a);
            pe_tail_ps(d1 + v, v - t0, b);
            if (two) {
                pe_tail_ps(d2 + v, v - t0, c);
                pe_tail_ps(d3 + v, v - t0, d);
            }
        } else {
            k = (__mmask16)((0xFFFFu << (v - t0)) & 0xFFFFu);
            PE_MSTORE(t0, k)
        }
    }
#undef PE_MSTORE
#undef PE_BLK
    return 1;
}

/* split float64: a block is 8 frequencies = 8 doubles in each destination */
PE_V512_SKELETON
int pe_v512_split_f64(double *d0, double *d1, double *d2, double *d3, int rows, int64_t n,
                      PE_V512_ARGS, int stream) {
    const int two = rows == PE_V512_PAIR;
    __m512d a, b, c, d;
    __mmask8 k;
    int64_t h, v, i, t0;
    int al;
    if (n < 8)
        return 0;
    h = pe_head(d0, sizeof(double), n);
    al = pe_aligned64(d0 + h, d1 + h, d2 + h, d3 + h);
    if (stream && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        a = sp0;                                                                          \
        b = cp0;                                                                          \
        c = sm0;                                                                          \
        d = cm0;                                                                          \
        if (rows == PE_V512_MINUS) {                                                      \
            a = c;                                                                        \
            b = d;                                                                        \
        }                                                                                 \
    }
#define PE_MSTORE(off, k)                                                                 \
    {                                                                                     \
        _mm512_mask_storeu_pd(d0 + (off), k, a);                                          \
        _mm512_mask_storeu_pd(d1 + (off), k, b);                                          \
        if (two) {                                                                        \
            _mm512_mask_storeu_pd(d2 + (off), k, c);                                      \
            _mm512_mask_storeu_pd(d3 + (off), k, d);                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_pd(d0, h, a);
            pe_head_pd(d1, h, b);
            if (two) {
                pe_head_pd(d2, h, c);
                pe_head_pd(d3, h, d);
            }
        } else {
            k = (__mmask8)((1u << h) - 1u);
            PE_MSTORE(0, k)
        }
    }
    v = h + (n - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(pd, d0 + i, a, stream);
        PE_V512_STORE(pd, d1 + i, b, stream);
        if (two) {
            PE_V512_STORE(pd, d2 + i, c, stream);
            PE_V512_STORE(pd, d3 + i, d, stream);
        }
    }
    if (v < n) {
        t0 = n - 8;
        PE_BLK(t0)
        if (al) {
            pe_tail_pd(d0 + v, v - t0, a);
            pe_tail_pd(d1 + v, v - t0, b);
            if (two) {
                pe_tail_pd(d2 + v, v - t0, c);
                pe_tail_pd(d3 + v, v - t0, d);
            }
        } else {
            k = (__mmask8)((0xFFu << (v - t0)) & 0xFFu);
            PE_MSTORE(t0, k)
        }
    }
#undef PE_MSTORE
#undef PE_BLK
    return 1;
}

/* The entry points (declared in pe_v512.h): the mirrored pair, and one row of
 * sign sg as the +t or -t half of a pair.  Each pins `rows` to a constant, so
 * its inlined skeleton keeps only the stores it makes. */
__attribute__((target("avx512f")))
int pe_v512_pairs2_f32(float *rp, float *rm, int64_t np, PE_V512_ARGS, int stream) {
    return pe_v512_pairs_f32(rp, rm, PE_V512_PAIR, np, As, Ac, Tm, Ts, stream);
}

__attribute__((target("avx512f")))
int pe_v512_pairs2_f64(double *rp, double *rm, int64_t np, PE_V512_ARGS, int stream) {
    return pe_v512_pairs_f64(rp, rm, PE_V512_PAIR, np, As, Ac, Tm, Ts, stream);
}

__attribute__((target("avx512f")))
int pe_v512_pairs1_f32(float *row, int64_t np, PE_V512_ARGS, double sg) {
    if (sg > 0.0)
        return pe_v512_pairs_f32(row, row, PE_V512_PLUS, np, As, Ac, Tm, Ts, 0);
    return pe_v512_pairs_f32(row, row, PE_V512_MINUS, np, As, Ac, Tm, Ts, 0);
}

__attribute__((target("avx512f")))
int pe_v512_pairs1_f64(double *row, int64_t np, PE_V512_ARGS, double sg) {
    if (sg > 0.0)
        return pe_v512_pairs_f64(row, row, PE_V512_PLUS, np, As, Ac, Tm, Ts, 0);
    return pe_v512_pairs_f64(row, row, PE_V512_MINUS, np, As, Ac, Tm, Ts, 0);
}

__attribute__((target("avx512f")))
int pe_v512_split2_f32(float *d0, float *d1, float *d2, float *d3, int64_t n, PE_V512_ARGS,
                       int stream) {
    return pe_v512_split_f32(d0, d1, d2, d3, PE_V512_PAIR, n, As, Ac, Tm, Ts, stream);
}

__attribute__((target("avx512f")))
int pe_v512_split2_f64(double *d0, double *d1, double *d2, double *d3, int64_t n,
                       PE_V512_ARGS, int stream) {
    return pe_v512_split_f64(d0, d1, d2, d3, PE_V512_PAIR, n, As, Ac, Tm, Ts, stream);
}

__attribute__((target("avx512f")))
int pe_v512_split1_f32(float *rs, float *rc, int64_t n, PE_V512_ARGS, double sg) {
    if (sg > 0.0)
        return pe_v512_split_f32(rs, rc, rs, rc, PE_V512_PLUS, n, As, Ac, Tm, Ts, 0);
    return pe_v512_split_f32(rs, rc, rs, rc, PE_V512_MINUS, n, As, Ac, Tm, Ts, 0);
}

__attribute__((target("avx512f")))
int pe_v512_split1_f64(double *rs, double *rc, int64_t n, PE_V512_ARGS, double sg) {
    if (sg > 0.0)
        return pe_v512_split_f64(rs, rc, rs, rc, PE_V512_PLUS, n, As, Ac, Tm, Ts, 0);
    return pe_v512_split_f64(rs, rc, rs, rc, PE_V512_MINUS, n, As, Ac, Tm, Ts, 0);
}

#else /* no AVX-512 writers in this build: the switch stays off */

int pe_v512 = 0;

void pe_v512_init(void) {}

int pe_v512_set(int on) {
    (void)on;
    return 0;
}

#endif
