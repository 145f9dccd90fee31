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
 * alone is one half of a pair: see pe_v512_rows.inc.c).
 */
#include "pe_v512.h"

#if PE_HAVE_V512
#include <immintrin.h>

static int pe_v512_cpu = 0;      /* the CPU has AVX-512F */
static int pe_v512_bw_cpu = 0;   /* ... and AVX-512BW (16-bit lanes) */
static int pe_v512_bf16_cpu = 0; /* ... and AVX512_BF16 (vcvtne2ps2bf16) */
int pe_v512 = 0;
int pe_v512_h16 = 0;
static int pe_v512_bf16hw = 0; /* bfloat16 rows through vcvtne2ps2bf16 */

void pe_v512_init(void) {
    __builtin_cpu_init();
    pe_v512_cpu = pe_v512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
    pe_v512_bw_cpu = pe_v512_h16 = pe_v512_cpu && __builtin_cpu_supports("avx512bw");
    pe_v512_bf16_cpu = pe_v512_bf16hw = pe_v512_bw_cpu && __builtin_cpu_supports("avx512bf16");
}

int pe_v512_set(int on) {
    int old = pe_v512;
    pe_v512 = on && pe_v512_cpu;
    pe_v512_h16 = on && pe_v512_bw_cpu;
    pe_v512_bf16hw = on && pe_v512_bf16_cpu;
    return old;
}

int pe_v512_bf16hw_set(int on) {
    int old = pe_v512_bf16hw;
    pe_v512_bf16hw = on && pe_v512_bf16_cpu;
    return old;
}

/* Inlined into the writers: they are the only callers.  The 16-bit writers
 * also need AVX-512BW (16-bit lanes: masked stores, permutes). */
#define PE_V512_INLINE    static inline __attribute__((always_inline, target("avx512f")))
#define PE_V512_BW_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw")))
#define PE_V512_BF16_INLINE                                                                        \
    static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512bf16")))
#define PE_V512_CAT3_(a, b, c) a##_##b##_##c
#define PE_V512_CAT3(a, b, c)  PE_V512_CAT3_(a, b, c)

/* The rotation of 8 frequencies from i: the sines and cosines of the rows at +t
 * (sp, cp) and -t (sm, cm), the operations of pe_pairs2_at / pe_split2_at in
 * their order. */
PE_V512_INLINE void pe_v512_rotate(int64_t i, PE_V512_ARGS, __m512d *sp, __m512d *cp, __m512d *sm,
                                   __m512d *cm) {
    __m512d as = _mm512_loadu_pd(As + i), ac = _mm512_loadu_pd(Ac + i);
    __m512d tm = _mm512_loadu_pd(Tm + i), ts = _mm512_loadu_pd(Ts + i);
    __m512d p1 = _mm512_mul_pd(as, tm), p2 = _mm512_mul_pd(ac, ts);
    __m512d p3 = _mm512_mul_pd(ac, tm), p4 = _mm512_mul_pd(as, ts);
    *sp = _mm512_add_pd(as, _mm512_add_pd(p1, p2));
    *cp = _mm512_add_pd(ac, _mm512_sub_pd(p3, p4));
    *sm = _mm512_add_pd(as, _mm512_sub_pd(p1, p2));
    *cm = _mm512_add_pd(ac, _mm512_add_pd(p3, p4));
}

PE_INLINE int pe_aligned64(const void *a, const void *b, const void *c, const void *d) {
    return ((((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 63) == 0);
}

/* Line-local partial stores, for destinations whose whole blocks are 64-byte
 * aligned: the head (lanes 0..cnt-1 of v to p[0..cnt), p + cnt on a boundary)
 * and the tail (lanes L.. of v to p[0..), p on a boundary) each go into one
 * cache line.  A masked store at an unaligned address spans two lines, and in a
 * streaming fill that costs about as much as the whole row: the second,
 * masked-off line is still fetched, then evicted again by the streaming stores
 * that follow. */
PE_V512_INLINE void pe_v512_head_line_f32(float *p, int64_t cnt, __m512 v) {
    int off = (int)(16 - cnt);
    __m512i idx =
        _mm512_sub_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(off));
    _mm512_mask_storeu_ps(p - off, (__mmask16)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_ps(idx, v));
}
PE_V512_INLINE void pe_v512_tail_line_f32(float *p, int64_t L, __m512 v) {
    __m512i idx =
        _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32((int)L));
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << (16 - L)) - 1u), _mm512_permutexvar_ps(idx, v));
}
PE_V512_INLINE void pe_v512_head_line_f64(double *p, int64_t cnt, __m512d v) {
    int off = (int)(8 - cnt);
    __m512i idx =
        _mm512_sub_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(off));
    _mm512_mask_storeu_pd(p - off, (__mmask8)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_pd(idx, v));
}
/* tail of the 16 lanes [a | b] from lane L (L >= 1): to p[0..16-L), p aligned */
PE_V512_INLINE void pe_v512_tail2_line_f64(double *p, int64_t L, __m512d a, __m512d b) {
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    int64_t n = 16 - L;
    __m512d lo = _mm512_permutex2var_pd(a, _mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
    _mm512_mask_storeu_pd(p, (__mmask8)(n >= 8 ? 0xFFu : (1u << n) - 1u), lo);
    if (n > 8) {
        __m512d hi = _mm512_permutexvar_pd(_mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
        _mm512_mask_storeu_pd(p + 8, (__mmask8)((1u << (n - 8)) - 1u), hi);
    }
}
PE_V512_INLINE void pe_v512_tail_line_f64(double *p, int64_t L, __m512d v) {
    __m512i idx = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi64(L));
    _mm512_mask_storeu_pd(p, (__mmask8)((1u << (8 - L)) - 1u), _mm512_permutexvar_pd(idx, v));
}

/*
 * What differs between the four writers is how a block of rotated frequencies
 * becomes vectors of output: v0, v1 for the row at +t and v2, v3 for the row at
 * -t.  Interleaved rows have one destination per row (float64 fills two
 * vectors of it, float32 one: v1, v3 unused); split rows have two, sines (v0,
 * v2) and cosines (v1, v3).
 */
/* interleaved float32: 8 frequencies = 16 floats of each row */
PE_V512_INLINE
void pe_v512_vectors_interleaved_f32(int64_t i, PE_V512_ARGS, __m512 *v0, __m512 *v1, __m512 *v2,
                                     __m512 *v3) {
    const __m512i ix = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512d sp, cp, sm, cm;
    pe_v512_rotate(i, As, Ac, Tm, Ts, &sp, &cp, &sm, &cm);
    *v0 = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sp)), ix,
                                 _mm512_castps256_ps512(_mm512_cvtpd_ps(cp)));
    *v2 = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sm)), ix,
                                 _mm512_castps256_ps512(_mm512_cvtpd_ps(cm)));
    *v1 = *v3 = *v0;
}

/* interleaved float64: 8 frequencies = 16 doubles (two vectors) of each row */
PE_V512_INLINE
void pe_v512_vectors_interleaved_f64(int64_t i, PE_V512_ARGS, __m512d *v0, __m512d *v1, __m512d *v2,
                                     __m512d *v3) {
    const __m512i lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    __m512d sp, cp, sm, cm;
    pe_v512_rotate(i, As, Ac, Tm, Ts, &sp, &cp, &sm, &cm);
    *v0 = _mm512_permutex2var_pd(sp, lo, cp);
    *v1 = _mm512_permutex2var_pd(sp, hi, cp);
    *v2 = _mm512_permutex2var_pd(sm, lo, cm);
    *v3 = _mm512_permutex2var_pd(sm, hi, cm);
}

/* float32 lanes [a | b] of two float64 vectors */
PE_V512_INLINE __m512 pe_v512_cat(__m512d a, __m512d b) {
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(a))),
                           _mm256_castps_pd(_mm512_cvtpd_ps(b)), 1));
}

/* split float32: 16 frequencies = 16 floats of each destination */
PE_V512_INLINE
void pe_v512_vectors_split_f32(int64_t i, PE_V512_ARGS, __m512 *v0, __m512 *v1, __m512 *v2,
                               __m512 *v3) {
    __m512d sp0, cp0, sm0, cm0, sp1, cp1, sm1, cm1;
    pe_v512_rotate(i, As, Ac, Tm, Ts, &sp0, &cp0, &sm0, &cm0);
    pe_v512_rotate(i + 8, As, Ac, Tm, Ts, &sp1, &cp1, &sm1, &cm1);
    *v0 = pe_v512_cat(sp0, sp1);
    *v1 = pe_v512_cat(cp0, cp1);
    *v2 = pe_v512_cat(sm0, sm1);
    *v3 = pe_v512_cat(cm0, cm1);
}

/* split float64: 8 frequencies = 8 doubles of each destination */
PE_V512_INLINE
void pe_v512_vectors_split_f64(int64_t i, PE_V512_ARGS, __m512d *v0, __m512d *v1, __m512d *v2,
                               __m512d *v3) {
    pe_v512_rotate(i, As, Ac, Tm, Ts, v0, v1, v2, v3);
}

/*
 * The 16-bit writers: 32 entries (64 bytes) per vector.  The doubles are
 * rounded to float with round-to-odd (pe_f32_odd's bits), then to the half to
 * nearest even: by vcvtps2ph for float16 (pe_f32_to_f16's bits, subnormals and
 * NaN included); for bfloat16 by vcvtne2ps2bf16 where the CPU has AVX512_BF16,
 * else by integer arithmetic (see pe_v512_halves_bf16hw).
 */
/* float32 lanes [a | b] of two float64 vectors, rounded to odd */
PE_V512_INLINE __m512 pe_v512_odd(__m512d a, __m512d b) {
    __m256 ta = _mm512_cvt_roundpd_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 tb = _mm512_cvt_roundpd_ps(b, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask8 ka = _mm512_cmp_pd_mask(_mm512_cvtps_pd(ta), a, _CMP_NEQ_UQ);
    __mmask8 kb = _mm512_cmp_pd_mask(_mm512_cvtps_pd(tb), b, _CMP_NEQ_UQ);
    __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_castps_si256(ta)),
                                   _mm256_castps_si256(tb), 1);
    __mmask16 k = (__mmask16)((unsigned)ka | ((unsigned)kb << 8));
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(t, k, t, _mm512_set1_epi32(1)));
}

/* The same bits as pe_v512_odd with fewer conversions, where every float is
 * normal (or zero, inf, NaN): truncating to float drops the low 29 bits of a
 * double's significand, so setting bit 29 (the float's last) where any of them
 * is set, then truncating, rounds to odd.  Below FLT_MIN the truncation drops
 * more bits than those and the last bit can be wrong: float16 does not see it
 * (such floats round to zero), bfloat16 checks for them.  A NaN may lose the
 * last payload bit pe_v512_odd sets, which no half keeps. */
PE_V512_INLINE __m512 pe_v512_odd_normal(__m512d a, __m512d b) {
    const __m512i low = _mm512_set1_epi64(0x1fffffff), last = _mm512_set1_epi64(0x20000000);
    __m512i ua = _mm512_castpd_si512(a), ub = _mm512_castpd_si512(b);
    __m256 ta, tb;
    ua = _mm512_mask_or_epi64(ua, _mm512_test_epi64_mask(ua, low), ua, last);
    ub = _mm512_mask_or_epi64(ub, _mm512_test_epi64_mask(ub, low), ub, last);
    ta = _mm512_cvt_roundpd_ps(_mm512_castsi512_pd(ua), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    tb = _mm512_cvt_roundpd_ps(_mm512_castsi512_pd(ub), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_castps_si256(ta)),
                                                  _mm256_castps_si256(tb), 1));
}

/* 16 floats to 16 halves (bf: bfloat16, else float16), to nearest even */
PE_V512_INLINE __m256i pe_v512_half(__m512 f, int bf) {
    __m512i u, r, q;
    __mmask16 nan;
    if (!bf)
        return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    u = _mm512_castps_si512(f);
    q = _mm512_srli_epi32(u, 16);
    r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                         _mm512_and_si512(q, _mm512_set1_epi32(1)));
    r = _mm512_srli_epi32(r, 16);
    nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(q, _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

/* 32 halves: those of f0, then those of f1 */
PE_V512_INLINE __m512i pe_v512_join(__m512 f0, __m512 f1, int bf) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(pe_v512_half(f0, bf)), pe_v512_half(f1, bf),
                              1);
}

/* The line-local partial stores of the 16-bit lanes (see the float32 ones). */
PE_V512_BW_INLINE __m512i pe_v512_iota16(int add) {
    static const uint16_t iota[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                      11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                      22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    return _mm512_add_epi16(_mm512_loadu_si512((const void *)iota), _mm512_set1_epi16((short)add));
}
PE_V512_BW_INLINE void pe_v512_head_line_h16(uint16_t *p, int64_t cnt, __m512i v) {
    int off = (int)(32 - cnt);
    _mm512_mask_storeu_epi16((void *)(p - off), (__mmask32)(((1u << cnt) - 1u) << off),
                             _mm512_permutexvar_epi16(pe_v512_iota16(-off), v));
}
PE_V512_BW_INLINE void pe_v512_tail_line_h16(uint16_t *p, int64_t L, __m512i v) {
    _mm512_mask_storeu_epi16((void *)p, (__mmask32)((1u << (32 - L)) - 1u),
                             _mm512_permutexvar_epi16(pe_v512_iota16((int)L), v));
}

/* Whether a block of floats from pe_v512_odd_normal holds one below FLT_MIN (a
 * truncation never rounds up to FLT_MIN, so this finds every lane it may have
 * got wrong; zero counts too: a row at position 0). */
PE_V512_INLINE int pe_v512_any_tiny(__m512 f0, __m512 f1) {
    const __m512 tiny = _mm512_set1_ps(1.17549435e-38f); /* FLT_MIN */
    return (_mm512_cmp_ps_mask(_mm512_abs_ps(f0), tiny, _CMP_LT_OQ) |
            _mm512_cmp_ps_mask(_mm512_abs_ps(f1), tiny, _CMP_LT_OQ)) != 0;
}

/* 32 halves of the 32 doubles [a | b | c | d], per format.  bfloat16 keeps
 * float's exponent range, so a block with a float subnormal takes the exact
 * pe_v512_odd; through AVX512_BF16 that is needed anyway: vcvtne2ps2bf16
 * rounds to nearest even as pe_f32_to_bf16 does (NaN made quiet the same way)
 * but reads float subnormals as zero. */
PE_V512_INLINE __m512i pe_v512_halves_f16(__m512d a, __m512d b, __m512d c, __m512d d) {
    return pe_v512_join(pe_v512_odd_normal(a, b), pe_v512_odd_normal(c, d), 0);
}
PE_V512_INLINE __m512i pe_v512_halves_bf16i(__m512d a, __m512d b, __m512d c, __m512d d) {
    __m512 f0 = pe_v512_odd_normal(a, b), f1 = pe_v512_odd_normal(c, d);
    if (pe_v512_any_tiny(f0, f1))
        return pe_v512_join(pe_v512_odd(a, b), pe_v512_odd(c, d), 1);
    return pe_v512_join(f0, f1, 1);
}
PE_V512_BF16_INLINE __m512i pe_v512_halves_bf16hw(__m512d a, __m512d b, __m512d c, __m512d d) {
    __m512 f0 = pe_v512_odd_normal(a, b), f1 = pe_v512_odd_normal(c, d);
    if (pe_v512_any_tiny(f0, f1))
        return pe_v512_join(pe_v512_odd(a, b), pe_v512_odd(c, d), 1);
    return (__m512i)_mm512_cvtne2ps_pbh(f1, f0); /* f0's words first */
}

/* The vector makers of the 16-bit writers, one template per format. */
#define PE_V512_HSFX    f16
#define PE_V512_HINLINE PE_V512_BW_INLINE
#include "pe_v512_h16vec.inc.c"
#define PE_V512_HSFX    bf16i
#define PE_V512_HINLINE PE_V512_BW_INLINE
#include "pe_v512_h16vec.inc.c"
#define PE_V512_HSFX    bf16hw
#define PE_V512_HINLINE PE_V512_BF16_INLINE
#include "pe_v512_h16vec.inc.c"

/* What a call of the skeleton writes (see pe_v512_rows.inc.c). */
#define PE_V512_PAIR  0
#define PE_V512_PLUS  1
#define PE_V512_MINUS 2

/* The writers: one skeleton, pe_v512_rows.inc.c, per layout and type. */
#define PE_V512_T_F32 0
#define PE_V512_T_F64 1
#define PE_V512_T_H16 2
#define PE_V512_SPLIT 0
#define PE_V512_TYPE  PE_V512_T_F32
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 0
#define PE_V512_TYPE  PE_V512_T_F64
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 1
#define PE_V512_TYPE  PE_V512_T_F32
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 1
#define PE_V512_TYPE  PE_V512_T_F64
#include "pe_v512_rows.inc.c"
#define PE_V512_HSFX  f16
#define PE_V512_SPLIT 0
#define PE_V512_TYPE  PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 1
#define PE_V512_TYPE  PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#undef PE_V512_HSFX
/* bfloat16: the integer rounding, and the AVX512_BF16 instruction (pe_v512_halves_bf16hw) */
PE_V512_H16_PROTOS(bf16i)
PE_V512_H16_PROTOS(bf16hw)
#define PE_V512_HSFX  bf16i
#define PE_V512_SPLIT 0
#define PE_V512_TYPE  PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 1
#define PE_V512_TYPE  PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#undef PE_V512_HSFX
#define PE_V512_HSFX    bf16hw
#define PE_V512_HTARGET 1 /* built for AVX512_BF16 */
#define PE_V512_SPLIT   0
#define PE_V512_TYPE    PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#define PE_V512_SPLIT 1
#define PE_V512_TYPE  PE_V512_T_H16
#include "pe_v512_rows.inc.c"
#undef PE_V512_HSFX
#undef PE_V512_HTARGET

/* The bfloat16 entry points: through AVX512_BF16 where the CPU has it. */
int pe_v512_pair_interleaved_bf16(uint16_t *p0, uint16_t *p1, uint16_t *m0, uint16_t *m1, int64_t n,
                                  PE_V512_ARGS, int stream) {
    return pe_v512_bf16hw
               ? pe_v512_pair_interleaved_bf16hw(p0, p1, m0, m1, n, As, Ac, Tm, Ts, stream)
               : pe_v512_pair_interleaved_bf16i(p0, p1, m0, m1, n, As, Ac, Tm, Ts, stream);
}
int pe_v512_row_interleaved_bf16(uint16_t *r0, uint16_t *r1, int64_t n, PE_V512_ARGS, double sg) {
    return pe_v512_bf16hw ? pe_v512_row_interleaved_bf16hw(r0, r1, n, As, Ac, Tm, Ts, sg)
                          : pe_v512_row_interleaved_bf16i(r0, r1, n, As, Ac, Tm, Ts, sg);
}
int pe_v512_pair_split_bf16(uint16_t *p0, uint16_t *p1, uint16_t *m0, uint16_t *m1, int64_t n,
                            PE_V512_ARGS, int stream) {
    return pe_v512_bf16hw ? pe_v512_pair_split_bf16hw(p0, p1, m0, m1, n, As, Ac, Tm, Ts, stream)
                          : pe_v512_pair_split_bf16i(p0, p1, m0, m1, n, As, Ac, Tm, Ts, stream);
}
int pe_v512_row_split_bf16(uint16_t *r0, uint16_t *r1, int64_t n, PE_V512_ARGS, double sg) {
    return pe_v512_bf16hw ? pe_v512_row_split_bf16hw(r0, r1, n, As, Ac, Tm, Ts, sg)
                          : pe_v512_row_split_bf16i(r0, r1, n, As, Ac, Tm, Ts, sg);
}

#else /* no AVX-512 writers in this build: the switch stays off */

int pe_v512 = 0;
int pe_v512_h16 = 0;

void pe_v512_init(void) {}

int pe_v512_set(int on) {
    (void)on;
    return 0;
}

int pe_v512_bf16hw_set(int on) {
    (void)on;
    return 0;
}

#endif
