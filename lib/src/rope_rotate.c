/*
 * RoPE's second step: every row of q or k rotated in place by its token's row of
 * the angle table (sin | cos of nf frequencies, filled by the fill driver like
 * any encoding), the threads splitting the rows.
 */
#include "pe_crmath.h"
#include "pe_lib.h"
#include "fastpe/fastpe.h"
#include "kernels/pe_rows_dd.h"
#include "kernels/pe_v512.h"

#include <float.h>
#include <string.h>

/*
 * The correctly rounded rotation (a handle's FASTPE_ROUND_CORRECT): each entry
 * a (u cos t + w sin t), (u, w) = (x1, -x2) or (x2, x1), the input entries
 * exact, rounded once into the row's type.  cos t and sin t come as
 * double-double (pe_sincos_row_dd: within et = 2^-102 + 2^-93 |K f| of the real
 * ones, f the frequency in turns; taken here as 2^-99 + 2^-90 |K f|); the
 * products u ch, w sh are exact (FMA or Dekker), the low terms' and the sums'
 * roundings stay below 2^-101 (|u| + |w|), products that underflow lose below
 * 2^-1074 each.  So the double-double v is within
 *     E = (|u| + |w|) (et + 2^-100) + 2^-1068
 * of the exact entry (times |a| after the factor, formed as
 * pe_dd_round_scaled does, with 2^-101 |v| more).  The probes v - d and v + d
 * (d: E plus what their own two roundings can move them: 2^-101 |v| for
 * float64, whose test is pe_dd_round's, 2^-50 |v| for the narrower types, which
 * round the probe doubles once more) rounding to the same entry decide it
 * (rounding is monotonic); otherwise, and for inputs beyond 2^990 in size (the
 * exact products' range), the entry comes from pe_rot_exact (counted).
 */
typedef struct {
    const pe_spec *sp;
    const double *f; /* the frequencies in turns (high parts), for et */
    double a;        /* the attention factor */
} pe_crr;

/* u (ch + cl) + w (sh + sl) as double-double (the bound above). */
PE_INLINE pe_dd crr_dot(double u, double w, double ch, double cl, double sh, double sl) {
    pe_dd p = pe_dd_prod(u, ch), q = pe_dd_prod(w, sh);
    pe_dd s = pe_two_sum(p.hi, q.hi);
    double lo = s.lo + ((p.lo + q.lo) + (u * cl + w * sl));
    return pe_two_sum(s.hi, lo);
}

/* The probes of entry a (u C + w S) into pa, pb (doubles), margin: the share of
 * |v| that covers their own rounding; 0 where the inputs are beyond the fast
 * path (too large, or not finite), whose probes are then meaningless.  No
 * branch, so that the loops calling it vectorise. */
PE_INLINE int crr_probes(double u, double w, double ch, double cl, double sh, double sl, double et,
                         double a, double margin, double *pa, double *pb) {
    double m = fabs(u) + fabs(w), E, d;
    pe_dd n = crr_dot(u, w, ch, cl, sh, sl);
    /* (et 0: position 0, where cos 1 and sin 0 are exact and so is v; a pair of
       zeros: v is exactly 0.  Zero padding and the first token's zero entries are
       decided here rather than on the exact path) */
    E = et > 0.0 ? m * (et + 0x1p-100) + (m > 0.0 ? 0x1p-1068 : 0.0) : 0.0;
    if (a != 1.0) {
        pe_dd p = pe_dd_prod(a, n.hi);
        n = pe_two_sum(p.hi, p.lo + a * n.lo);
        E = fabs(a) * E + 0x1p-101 * fabs(n.hi) + (m > 0.0 ? 0x1p-1068 : 0.0);
    }
    d = E + margin * fabs(n.hi);
    *pa = n.hi + (n.lo - d);
    *pb = n.hi + (n.lo + d);
    return m <= 0x1p990; /* (0 for NaN and infinity too) */
}

PE_INLINE uint64_t crr_f64_bits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

#define ROT_CR 1

#define ROT_T        float
#define ROT_SFX      f32
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#define ROT_BITS(v)  ((uint64_t)pe_f32_bits(v))
#define ROT_PREC     24
#define ROT_EMIN     (-149)
#define ROT_MARGIN   0x1p-50
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#define ROT_BITS(v)  crr_f64_bits(v)
#define ROT_PREC     53
#define ROT_EMIN     (-1074)
#define ROT_MARGIN   0x1p-101
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#define ROT_BITS(v)  ((uint64_t)(v))
#define ROT_PREC     11
#define ROT_EMIN     (-24)
#define ROT_MARGIN   0x1p-50
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#define ROT_BITS(v)  ((uint64_t)(v))
#define ROT_PREC     8
#define ROT_EMIN     (-133)
#define ROT_MARGIN   0x1p-50
#include "rope_rows.inc.c"
#undef ROT_CR

#if PE_HAVE_V512
/* the same rotations compiled for AVX-512F, used where pe_v512 is set; clang
 * ignores a target string that names the vector width (with a warning), so it
 * compiles them as the portable loops, as it always has */
#if defined(__clang__)
#define ROT_V512
#else
#define ROT_V512 __attribute__((target("avx512f,prefer-vector-width=512")))
#endif
#define ROT_T        float
#define ROT_SFX      f32_v512
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#define ROT_ATTR     ROT_V512
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64_v512
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#define ROT_ATTR     ROT_V512
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16_v512
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#define ROT_ATTR     ROT_V512
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16_v512
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#define ROT_ATTR     ROT_V512
#include "rope_rows.inc.c"
#endif

#if PE_HAVE_V512
/* and for AVX2, used where the CPU has it but not AVX-512F */
#define ROT_AVX2     __attribute__((target("avx2")))
#define ROT_T        float
#define ROT_SFX      f32_avx2
#define ROT_PAIRS    0
#define ROT_HALF     0
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#define ROT_ATTR     ROT_AVX2
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64_avx2
#define ROT_PAIRS    0
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#define ROT_ATTR     ROT_AVX2
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16_avx2
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#define ROT_ATTR     ROT_AVX2
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16_avx2
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#define ROT_ATTR     ROT_AVX2
#include "rope_rows.inc.c"
#endif

#if PE_HAVE_V512
#include <immintrin.h>

/* Interleaved rows by hand for AVX2: the compiler's loops pull each pair apart
 * and back; here a pair stays in place, and (x1 c, x2 c) and (x2 s, x1 s)
 * combine in one addsub into (x1 c - x2 s, x2 c + x1 s): the portable loop's
 * IEEE operations, hence its bits.  Each (c0, c0, c1, c1) is a 128-bit
 * broadcast from memory and an in-lane permute: a lane-crossing permute costs
 * two cycles a time on AMD, which bound the loop. */
static ROT_AVX2 inline __m256d pe_dup2(const double *p) {
    return _mm256_permute_pd(_mm256_broadcast_pd((const __m128d *)p), 0xC);
}

static ROT_AVX2 void pe_rot_pairs_f32_avx2(char *row, const double *PE_RESTRICT sn,
                                           const double *PE_RESTRICT cs, int64_t nf, double a) {
    float *PE_RESTRICT x = (float *)row;
    const __m256d va = _mm256_set1_pd(a);
    const int one = a == 1.0; /* c * 1.0 == c exactly: the multiplies skipped */
    int64_t i = 0;
    for (; i + 4 <= nf; i += 4) { /* four pairs: eight floats */
        __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * i));
        __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * i + 4));
        __m256d clo = pe_dup2(cs + i), chi = pe_dup2(cs + i + 2);
        __m256d slo = pe_dup2(sn + i), shi = pe_dup2(sn + i + 2);
        if (!one) {
            clo = _mm256_mul_pd(clo, va);
            chi = _mm256_mul_pd(chi, va);
            slo = _mm256_mul_pd(slo, va);
            shi = _mm256_mul_pd(shi, va);
        }
        __m256d rlo = _mm256_addsub_pd(_mm256_mul_pd(lo, clo),
                                       _mm256_mul_pd(_mm256_permute_pd(lo, 0x5), slo));
        __m256d rhi = _mm256_addsub_pd(_mm256_mul_pd(hi, chi),
                                       _mm256_mul_pd(_mm256_permute_pd(hi, 0x5), shi));
        _mm_storeu_ps(x + 2 * i, _mm256_cvtpd_ps(rlo));
        _mm_storeu_ps(x + 2 * i + 4, _mm256_cvtpd_ps(rhi));
    }
    for (; i < nf; i++) {
        double x1 = x[2 * i], x2 = x[2 * i + 1];
        double c = cs[i] * a, s = sn[i] * a;
        x[2 * i] = (float)(x1 * c - x2 * s);
        x[2 * i + 1] = (float)(x2 * c + x1 * s);
    }
}

/* The same rows given each cos and sin twice, (c0, c0, c1, c1, ...): the
 * blocked walk writes an angle row so once for all the rows that use it, and
 * the four loads and four shuffles that duplicate them here per row become
 * four plain loads (a fifth less time where the rows are in cache).  The same
 * operations, hence the same bits.  A copy of the loop above on purpose: with
 * their common step in a shared inline function, gcc -O3 compiles both loops
 * differently, and these are the measured ones. */
static ROT_AVX2 void pe_rot_pairs_f32_dup_avx2(char *row, const double *PE_RESTRICT sd,
                                               const double *PE_RESTRICT cd, int64_t nf, double a) {
    float *PE_RESTRICT x = (float *)row;
    const __m256d va = _mm256_set1_pd(a);
    const int one = a == 1.0; /* c * 1.0 == c exactly: the multiplies skipped */
    int64_t i = 0;
    for (; i + 4 <= nf; i += 4) { /* four pairs: eight floats */
        __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * i));
        __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + 2 * i + 4));
        __m256d clo = _mm256_loadu_pd(cd + 2 * i), chi = _mm256_loadu_pd(cd + 2 * i + 4);
        __m256d slo = _mm256_loadu_pd(sd + 2 * i), shi = _mm256_loadu_pd(sd + 2 * i + 4);
        if (!one) {
            clo = _mm256_mul_pd(clo, va);
            chi = _mm256_mul_pd(chi, va);
            slo = _mm256_mul_pd(slo, va);
            shi = _mm256_mul_pd(shi, va);
        }
        __m256d rlo = _mm256_addsub_pd(_mm256_mul_pd(lo, clo),
                                       _mm256_mul_pd(_mm256_permute_pd(lo, 0x5), slo));
        __m256d rhi = _mm256_addsub_pd(_mm256_mul_pd(hi, chi),
                                       _mm256_mul_pd(_mm256_permute_pd(hi, 0x5), shi));
        _mm_storeu_ps(x + 2 * i, _mm256_cvtpd_ps(rlo));
        _mm_storeu_ps(x + 2 * i + 4, _mm256_cvtpd_ps(rhi));
    }
    for (; i < nf; i++) {
        double x1 = x[2 * i], x2 = x[2 * i + 1];
        double c = cd[2 * i] * a, s = sd[2 * i] * a;
        x[2 * i] = (float)(x1 * c - x2 * s);
        x[2 * i + 1] = (float)(x2 * c + x1 * s);
    }
}

/* sin | cos of an angle row, each entry twice, into d (4 nf doubles). */
static ROT_AVX2 void rope_dup_row(double *PE_RESTRICT d, const double *PE_RESTRICT ang,
                                  int64_t nf) {
    int64_t i = 0;
    for (; i + 2 <= nf; i += 2) {
        _mm256_storeu_pd(d + 2 * i, pe_dup2(ang + i));
        _mm256_storeu_pd(d + 2 * nf + 2 * i, pe_dup2(ang + nf + i));
    }
    for (; i < nf; i++) {
        d[2 * i] = d[2 * i + 1] = ang[i];
        d[2 * nf + 2 * i] = d[2 * nf + 2 * i + 1] = ang[nf + i];
    }
}

/* Half-split float32 rows by hand for AVX2: four floats at a time widened
 * straight from memory and narrowed straight into it (the compiler's loop
 * splits and joins 256-bit halves, and the conversions are what limit a row);
 * the portable loop's IEEE operations, hence its bits. */
static ROT_AVX2 void pe_rot_half_f32_avx2(char *row, const double *PE_RESTRICT sn,
                                          const double *PE_RESTRICT cs, int64_t nf, double a) {
    float *PE_RESTRICT x1p = (float *)row;
    float *PE_RESTRICT x2p = (float *)row + nf;
    const __m256d va = _mm256_set1_pd(a);
    const int one = a == 1.0; /* c * 1.0 == c exactly: the multiplies skipped */
    int64_t i = 0;
    for (; i + 4 <= nf; i += 4) {
        __m256d x1 = _mm256_cvtps_pd(_mm_loadu_ps(x1p + i));
        __m256d x2 = _mm256_cvtps_pd(_mm_loadu_ps(x2p + i));
        __m256d c4 = _mm256_loadu_pd(cs + i), s4 = _mm256_loadu_pd(sn + i);
        if (!one) {
            c4 = _mm256_mul_pd(c4, va);
            s4 = _mm256_mul_pd(s4, va);
        }
        _mm_storeu_ps(x1p + i,
                      _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_mul_pd(x1, c4), _mm256_mul_pd(x2, s4))));
        _mm_storeu_ps(x2p + i,
                      _mm256_cvtpd_ps(_mm256_add_pd(_mm256_mul_pd(x2, c4), _mm256_mul_pd(x1, s4))));
    }
    for (; i < nf; i++) {
        double x1 = x1p[i], x2 = x2p[i];
        double c = cs[i] * a, s = sn[i] * a;
        x1p[i] = (float)(x1 * c - x2 * s);
        x2p[i] = (float)(x2 * c + x1 * s);
    }
}

static ROT_AVX2 void pe_rot_pairs_f64_avx2(char *row, const double *PE_RESTRICT sn,
                                           const double *PE_RESTRICT cs, int64_t nf, double a) {
    double *PE_RESTRICT x = (double *)row;
    const __m256d va = _mm256_set1_pd(a);
    const int one = a == 1.0; /* c * 1.0 == c exactly: the multiplies skipped */
    int64_t i = 0;
    for (; i + 4 <= nf; i += 4) { /* four pairs: eight doubles */
        __m256d clo = pe_dup2(cs + i), chi = pe_dup2(cs + i + 2);
        __m256d slo = pe_dup2(sn + i), shi = pe_dup2(sn + i + 2);
        if (!one) {
            clo = _mm256_mul_pd(clo, va);
            chi = _mm256_mul_pd(chi, va);
            slo = _mm256_mul_pd(slo, va);
            shi = _mm256_mul_pd(shi, va);
        }
        __m256d lo = _mm256_loadu_pd(x + 2 * i);
        __m256d hi = _mm256_loadu_pd(x + 2 * i + 4);
        _mm256_storeu_pd(x + 2 * i,
                         _mm256_addsub_pd(_mm256_mul_pd(lo, clo),
                                          _mm256_mul_pd(_mm256_permute_pd(lo, 0x5), slo)));
        _mm256_storeu_pd(x + 2 * i + 4,
                         _mm256_addsub_pd(_mm256_mul_pd(hi, chi),
                                          _mm256_mul_pd(_mm256_permute_pd(hi, 0x5), shi)));
    }
    for (; i < nf; i++) {
        double x1 = x[2 * i], x2 = x[2 * i + 1];
        double c = cs[i] * a, s = sn[i] * a;
        x[2 * i] = x1 * c - x2 * s;
        x[2 * i + 1] = x2 * c + x1 * s;
    }
}
#endif

typedef void (*rot_fn)(char *row, const double *sn, const double *cs, int64_t nf, double a);

/* 1: the rows walked in blocks of positions (below); 0: in the C order of their
 * axes, as one pass per head.  The same bits either way: for tests. */
static int rope_blocked = 1;

int pe_rope_set_blocked(int on) {
    int old = rope_blocked;
    rope_blocked = on != 0;
    return old;
}

/* 1: the rows rotated by the AVX-512 or AVX2 loops where the CPU has them; 0:
 * by the portable ones.  The same bits either way: for tests. */
static int rope_wide = 1;

int pe_rope_set_wide(int on) {
    int old = rope_wide;
    rope_wide = on != 0;
    return old;
}

static rot_fn rot_choose(const pe_rope_rows *R) {
#if PE_HAVE_V512
    /* (the CPU's features were read by pe_init, through pe_v512_init) */
    int avx2 = __builtin_cpu_supports("avx2");
    if (rope_wide && pe_v512) {
        switch (R->kind) {
        case PE_KIND_F32:
            return R->half ? pe_rot_half_f32_v512 : pe_rot_pairs_f32_v512;
        case PE_KIND_F64:
            return R->half ? pe_rot_half_f64_v512 : pe_rot_pairs_f64_v512;
        case PE_KIND_F16:
            return R->half ? pe_rot_half_f16_v512 : pe_rot_pairs_f16_v512;
        default:
            return R->half ? pe_rot_half_bf16_v512 : pe_rot_pairs_bf16_v512;
        }
    }
    if (rope_wide && avx2) {
        switch (R->kind) {
        case PE_KIND_F32:
            return R->half ? pe_rot_half_f32_avx2 : pe_rot_pairs_f32_avx2;
        case PE_KIND_F64:
            return R->half ? pe_rot_half_f64_avx2 : pe_rot_pairs_f64_avx2;
        case PE_KIND_F16:
            return R->half ? pe_rot_half_f16_avx2 : pe_rot_pairs_f16_avx2;
        default:
            return R->half ? pe_rot_half_bf16_avx2 : pe_rot_pairs_bf16_avx2;
        }
    }
#endif
    switch (R->kind) {
    case PE_KIND_F32:
        return R->half ? pe_rot_half_f32 : pe_rot_pairs_f32;
    case PE_KIND_F64:
        return R->half ? pe_rot_half_f64 : pe_rot_pairs_f64;
    case PE_KIND_F16:
        return R->half ? pe_rot_half_f16 : pe_rot_pairs_f16;
    default:
        return R->half ? pe_rot_half_bf16 : pe_rot_pairs_bf16;
    }
}

/* Rows of at most this many pairs take the duplicated angles in the blocked walk
 * (their buffer is on the stack). */
#define ROPE_DUP_MAX 256

/* The rotation taking duplicated angles (sin, sin | cos, cos of each frequency)
 * for R's rows, or NULL. */
static rot_fn rot_choose_dup(const pe_rope_rows *R) {
#if PE_HAVE_V512
    if (rope_wide && !pe_v512 && __builtin_cpu_supports("avx2") && R->kind == PE_KIND_F32 &&
        !R->half && R->nf <= ROPE_DUP_MAX)
        return pe_rot_pairs_f32_dup_avx2;
#else
    (void)R;
#endif
    return NULL;
}

#if !PE_HAVE_V512
/* (never called: no rotation takes duplicated angles without the AVX2 loops) */
static void rope_dup_row(double *d, const double *ang, int64_t nf) {
    (void)d;
    (void)ang;
    (void)nf;
}
#endif

/* An odometer over the rows of R in C order of the leading axes: no division
 * per row.  walk_start sets idx and returns the offset of row r0; walk_next
 * moves both to the next row. */
static inline int64_t walk_start(const pe_rope_rows *R, int64_t r0, int64_t *idx) {
    int64_t rem = r0, off = 0;
    for (int j = R->m - 1; j >= 0; j--) {
        idx[j] = rem % R->shape[j];
        rem /= R->shape[j];
        off += idx[j] * R->strides[j];
    }
    return off;
}

static inline int64_t walk_next(const pe_rope_rows *R, int64_t *idx, int64_t off) {
    for (int j = R->m - 1; j >= 0; j--) {
        idx[j] += 1;
        off += R->strides[j];
        if (idx[j] < R->shape[j])
            break;
        off -= R->shape[j] * R->strides[j];
        idx[j] = 0;
    }
    return off;
}

/* The table row of the token at idx. */
static inline int64_t walk_token(const pe_rope_rows *R, const int64_t *idx) {
    return (R->per_batch ? idx[0] * R->S : 0) + idx[R->sa];
}

/* Rows r0 .. r1-1 (C order of the leading axes). */
static void rotate_range(const pe_rope_rows *R, rot_fn fn, int64_t r0, int64_t r1) {
    int64_t idx[PE_ROPE_MAX_AXES];
    int64_t off;
    if (r0 >= r1)
        return;
    off = walk_start(R, r0, idx);
    for (int64_t r = r0; r < r1; r++) {
        const double *angles = R->table + walk_token(R, idx) * 2 * R->nf;
        fn(R->base + off, angles, angles + R->nf, R->nf, R->attention);
        off = walk_next(R, idx, off);
    }
}

/* The rows of sequence b (when per_batch) at positions s0 .. s1-1, in the C
 * order of their axes: every head's rows at these positions while their angles
 * (s1 - s0 rows of the table) stay in the cache, rather than one pass over the
 * whole table per head. */
/* heads walked together (at most) in the heads-first layout */
#define ROPE_GROUP 8
static void rotate_block(const pe_rope_rows *R, rot_fn fn, rot_fn dup, int64_t b, int64_t s0,
                         int64_t s1) {
    int64_t lo[PE_ROPE_MAX_AXES], hi[PE_ROPE_MAX_AXES], idx[PE_ROPE_MAX_AXES];
    double dbuf[4 * ROPE_DUP_MAX]; /* an angle row duplicated, for dup */
    int64_t nf = R->nf;
    int64_t off = 0, W = 2 * R->nf, inner, ist;
    int m = R->m, last = R->m - 1, j;
    const double *tb = R->table + (R->per_batch ? b * R->S : 0) * W;
    for (j = 0; j < m; j++) {
        lo[j] = 0;
        hi[j] = R->shape[j];
    }
    lo[R->sa] = s0, hi[R->sa] = s1;
    if (R->per_batch)
        lo[0] = b, hi[0] = b + 1;
    for (j = 0; j < m; j++) {
        if (hi[j] <= lo[j])
            return;
        idx[j] = lo[j];
        off += lo[j] * R->strides[j];
    }
    inner = hi[last] - lo[last];
    ist = R->strides[last];
    for (;;) {
        if (last == R->sa) {
            /* positions innermost in memory (heads first): up to ROPE_GROUP heads
               walk the block's positions side by side, each angle row read once
               for all of them; long streams, as many as a prefetcher follows */
            char *rows[ROPE_GROUP];
            int g, ng = 0;
            const double *ang = tb + s0 * W;
            for (;;) {
                rows[ng++] = R->base + off;
                for (j = last - 1; j >= 0; j--) {
                    idx[j] += 1;
                    off += R->strides[j];
                    if (idx[j] < hi[j])
                        break;
                    off -= (hi[j] - lo[j]) * R->strides[j];
                    idx[j] = lo[j];
                }
                if (j < 0 || ng == ROPE_GROUP)
                    break;
            }
            for (int64_t i = 0; i < inner; i++, ang += W) {
                if (dup != NULL) {
                    rope_dup_row(dbuf, ang, nf);
                    for (g = 0; g < ng; g++)
                        dup(rows[g] + i * ist, dbuf, dbuf + 2 * nf, nf, R->attention);
                    continue;
                }
                for (g = 0; g < ng; g++)
                    fn(rows[g] + i * ist, ang, ang + nf, nf, R->attention);
            }
            if (j < 0)
                return;
            continue;
        } else {
            char *row = R->base + off;
            const double *ang = tb + idx[R->sa] * W;
            if (dup != NULL && inner > 1) {
                rope_dup_row(dbuf, ang, nf);
                for (int64_t i = 0; i < inner; i++, row += ist)
                    dup(row, dbuf, dbuf + 2 * nf, nf, R->attention);
            } else {
                for (int64_t i = 0; i < inner; i++, row += ist)
                    fn(row, ang, ang + nf, nf, R->attention);
            }
        }
        for (j = last - 1; j >= 0; j--) {
            idx[j] += 1;
            off += R->strides[j];
            if (idx[j] < hi[j])
                break;
            off -= (hi[j] - lo[j]) * R->strides[j];
            idx[j] = lo[j];
        }
        if (j < 0)
            return;
    }
}

/* One rotation of up to two tensors (q and k) by one table.  Blocked: the work
 * is nb x nblk units (a sequence when the table has one per sequence, and a
 * block of PB positions), each rotating every row of each tensor at those
 * positions; else rows split evenly (few positions: decoding steps). */
typedef struct {
    const pe_rope_rows *R[2];
    rot_fn fn[2];
    rot_fn dup[2]; /* the blocked walk's rotation by duplicated angles, or NULL */
    int64_t nrows[2];
    int n;
    int blocked;
    int64_t nblk, PB;
} rope_job;

static void job_part(const rope_job *J, int64_t u0, int64_t u1) {
    for (int i = 0; i < J->n; i++) {
        const pe_rope_rows *R = J->R[i];
        if (!J->blocked) {
            rotate_range(R, J->fn[i], u0 * J->nrows[i] / J->nblk, u1 * J->nrows[i] / J->nblk);
            continue;
        }
        for (int64_t u = u0; u < u1; u++) {
            int64_t b = u / J->nblk, s0 = (u % J->nblk) * J->PB;
            int64_t s1 = s0 + J->PB < R->S ? s0 + J->PB : R->S;
            rotate_block(R, J->fn[i], J->dup[i], b, s0, s1);
        }
    }
}

/* Units 0 .. U-1 on nt threads in ONE parallel region (each region costs a
 * wait for every team thread, milliseconds on a busy machine), each thread a
 * contiguous share taken `step` units at a time.  The calling thread (thread 0
 * of the team) polls between its steps; a stop it sees ends every thread's
 * share at its next step. */
static int job_run(const rope_job *J, int64_t U, int64_t step, int nt, pe_poll_fn poll,
                   void *poll_ctx) {
    volatile int stop = 0;
    int t;
    if (nt > U)
        nt = (int)U;
    if (nt <= 1) { /* on the calling thread: no parallel region */
        for (int64_t u0 = 0; u0 < U; u0 += step) {
            job_part(J, u0, step < U - u0 ? u0 + step : U);
            if (u0 + step < U && poll != NULL && poll(poll_ctx) != 0)
                return PE_EINTR;
        }
        return FASTPE_OK;
    }
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (t = 0; t < nt; t++) {
        int64_t a = t * U / nt, b = (t + 1) * U / nt;
        for (int64_t u0 = a; u0 < b && !stop; u0 += step) {
            job_part(J, u0, step < b - u0 ? u0 + step : b);
            if (t == 0 && u0 + step < b && poll != NULL && poll(poll_ctx) != 0) {
                stop = 1;
#pragma omp flush
            }
        }
    }
    return stop ? PE_EINTR : FASTPE_OK;
}

/* The byte step between consecutive rows of R when they are evenly spaced in
 * their C order (any step when there is one row); 0 when they are not. */
static int64_t rope_even_step(const pe_rope_rows *R) {
    int64_t step = 0, next = 0;
    for (int j = R->m - 1; j >= 0; j--) {
        if (R->shape[j] == 1)
            continue;
        if (step == 0)
            step = R->strides[j];
        else if (R->strides[j] != next)
            return 0;
        next = R->strides[j] * R->shape[j];
    }
    return step != 0 ? step : 1;
}

int pe_rope_rotate(const pe_rope_rows *const *Rs, int nR, int nt, pe_poll_fn poll, void *poll_ctx) {
    rope_job J;
    int64_t W, nb, U, total = 0, step;
    int i;
    if (nR < 1 || nR > 2)
        return FASTPE_ESIZE;
    J.n = 0;
    for (i = 0; i < nR; i++) {
        int64_t n = pe_rope_nrows(Rs[i]);
        if (n > 0) {
            J.R[J.n] = Rs[i];
            J.fn[J.n] = rot_choose(Rs[i]);
            J.dup[J.n] = rot_choose_dup(Rs[i]);
            J.nrows[J.n] = n;
            total += n;
            J.n++;
        }
    }
    if (J.n == 0 || J.R[0]->S == 0 || J.R[0]->nf == 0)
        return FASTPE_OK;
    if (nt <= 1 && J.R[0]->S == 1 && !J.R[0]->per_batch) {
        /* one angle row for every row (a decoding step) on one thread: evenly
           spaced rows in a plain loop, without the walk's bookkeeping per row */
        for (i = 0; i < J.n; i++) {
            const pe_rope_rows *R = J.R[i];
            int64_t st = rope_even_step(R);
            if (st == 0) {
                rotate_range(R, J.fn[i], 0, J.nrows[i]);
                continue;
            }
            for (int64_t r = 0; r < J.nrows[i]; r++)
                J.fn[i](R->base + r * st, R->table, R->table + R->nf, R->nf, R->attention);
        }
        return FASTPE_OK;
    }
    W = 2 * J.R[0]->nf;
    nb = J.R[0]->per_batch ? J.R[0]->shape[0] : 1;
    /* blocks of about 256 KiB of angles (in L2 while every head uses them; much
       smaller blocks measured slower: short streams restart the prefetcher),
       smaller while that leaves fewer than 4 blocks per thread */
    J.PB = ((int64_t)256 << 10) / (W * (int64_t)sizeof(double));
    if (J.PB < 1)
        J.PB = 1;
    if (nb * J.R[0]->S < 4 * (int64_t)nt)
        J.PB = 1; /* where the halving below ends, without its divisions (a decoding step) */
    while (J.PB > 1 && nb * ((J.R[0]->S + J.PB - 1) / J.PB) < 4 * (int64_t)nt)
        J.PB = (J.PB + 1) / 2;
    J.nblk = (J.R[0]->S + J.PB - 1) / J.PB;
    U = nb * J.nblk;
    J.blocked = rope_blocked && (U > 1 || nt <= 1) && U >= nt;
    if (!J.blocked) { /* units: rows, in as many equal parts as threads */
        J.nblk = U = nt > 1 ? nt : 1;
    }
    /* in steps of about pe_chunk_entries entries, polling between them, as a
       long fill does */
    step = U;
    if (poll != NULL && J.blocked) {
        double s = (double)pe_chunk_entries() / ((double)total / (double)U * (double)W);
        step = s >= (double)U ? U : s >= 1.0 ? (int64_t)s : 1;
    }
    return job_run(&J, U, step, nt, poll, poll_ctx);
}

int64_t pe_rope_rows_total(pe_rope_rows *const *R, int nR) {
    int64_t n = 0;
    if (nR < 1 || nR > 2)
        return -1;
    for (int i = 0; i < nR; i++)
        n += pe_rope_nrows(R[i]);
    return n;
}

int pe_rope_rotate_by(pe_rope_rows *const *R, int nR, const double *table, int64_t nrows, int64_t W,
                      int num_threads, pe_poll_fn poll, void *poll_ctx) {
    int i, err;
    for (i = 0; i < nR; i++)
        R[i]->table = table;
    err = pe_rope_rotate((const pe_rope_rows *const *)R, nR, pe_threads(num_threads, nrows, W, -1),
                         poll, poll_ctx);
    for (i = 0; i < nR; i++)
        R[i]->table = NULL;
    return err;
}

/* The angle table of rq's positions (one fill: into a stack buffer when small),
 * then every row of R[0] .. R[nR-1] by it on one team, polling between chunks of
 * both.  The R[i].table fields are set here and cleared before returning. */
int pe_rope_run(pe_rope_rows *const *R, int nR, const pe_spec *sp, const pe_rows *rq,
                int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                void *poll_ctx) {
    int64_t W = 2 * sp->nf, ntab = rq->nseq * rq->S, nrows = pe_rope_rows_total(R, nR);
    double small[512];
    double *table = small;
    int err;
    if (nrows < 0)
        return FASTPE_ESIZE;
    if (nrows == 0 || ntab == 0 || W == 0)
        return FASTPE_OK;
    if (ntab > (int64_t)(sizeof(small) / sizeof(double)) / W) {
        table = (double *)malloc((size_t)(ntab * W) * sizeof(double));
        if (table == NULL)
            return FASTPE_ENOMEM;
    }
    /* one position (a decoding step): its row without the fill's setup, same bits */
    err = ntab == 1 ? pe_fill_one_f64(table, sp, rq, plan, ac) : PE_EINVAL;
    if (err == PE_EINVAL)
        err = pe_fill_run(table, PE_KIND_F64, W, sp, rq, num_threads, plan, ac, poll, poll_ctx);
    if (err == FASTPE_OK)
        err = pe_rope_rotate_by(R, nR, table, nrows, W, num_threads, poll, poll_ctx);
    if (table != small)
        free(table);
    return err;
}

/* Position of table row r (sequence b = r / S, step s), as the fill reads it. */
static double crr_position(const pe_rows *rq, int64_t r) {
    int64_t b = r / rq->S, s = r - b * rq->S;
    if (rq->pos_f != NULL)
        return rq->pos_f[b * rq->psb + s * rq->pss];
    return (double)((rq->offs != NULL ? rq->offs[b * rq->offs_stride] : rq->offset) +
                    (rq->pos_i != NULL ? rq->pos_i[b * rq->psb + s * rq->pss] : s));
}

typedef void (*crr_fn)(char *row, const double *tr, double K, const pe_crr *X, int half,
                       int64_t nf);

static crr_fn crr_choose(int kind) {
    switch (kind) {
    case PE_KIND_F32:
        return pe_rot_cr_f32;
    case PE_KIND_F64:
        return pe_rot_cr_f64;
    case PE_KIND_F16:
        return pe_rot_cr_f16;
    default:
        return pe_rot_cr_bf16;
    }
}

/* Rows r0 .. r1-1 of R (C order), correctly rounded: rotate_range's walk, with
 * table rows of 4 nf doubles and their positions K. */
static void crr_range(const pe_rope_rows *R, const pe_crr *X, const double *tab, const double *Ks,
                      int64_t r0, int64_t r1) {
    int64_t idx[PE_ROPE_MAX_AXES];
    int64_t off;
    crr_fn fn = crr_choose(R->kind);
    if (r0 >= r1)
        return;
    off = walk_start(R, r0, idx);
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = walk_token(R, idx);
        fn(R->base + off, tab + t * 4 * R->nf, Ks[t], X, R->half, R->nf);
        off = walk_next(R, idx, off);
    }
}

int pe_rope_run_cr(pe_rope_rows *const *R, int nR, const pe_spec *sp, const pe_rows *rq,
                   int num_threads, pe_poll_fn poll, void *poll_ctx) {
    int64_t nf = sp->nf, ntab = rq->nseq * rq->S, nrows = pe_rope_rows_total(R, nR), total;
    int64_t step, done = 0, r;
    double *mem, *fmem, *tab, *Ks;
    pe_freq fr;
    pe_crr X;
    int nt, err = FASTPE_OK;
    if (nrows < 0)
        return FASTPE_ESIZE;
    if (nrows == 0 || ntab == 0 || nf == 0)
        return FASTPE_OK;
    /* the frequencies (4 nf), then per table row its position and its angles */
    mem = (double *)malloc((size_t)(4 * nf + ntab * (4 * nf + 1)) * sizeof(double));
    if (mem == NULL)
        return FASTPE_ENOMEM;
    fmem = mem;
    Ks = mem + 4 * nf;
    tab = Ks + ntab;
    fr = pe_freq_view(fmem, nf);
    if (sp->wlist != NULL)
        pe_freqs_list(fr, nf, sp->wlist);
    else
        pe_freqs(fr, nf, sp->w0, sp->base, sp->denom);
    for (r = 0; r < ntab; r++)
        Ks[r] = crr_position(rq, r);
    nt = pe_threads(num_threads, ntab, 4 * nf, -1);
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (r = 0; r < ntab; r++) {
            double *t = tab + r * 4 * nf;
            pe_sincos_row_dd(Ks[r], fr, nf, t, t + nf, t + 2 * nf, t + 3 * nf);
        }
    } else {
        for (r = 0; r < ntab; r++) {
            double *t = tab + r * 4 * nf;
            pe_sincos_row_dd(Ks[r], fr, nf, t, t + nf, t + 2 * nf, t + 3 * nf);
        }
    }
    X.sp = sp;
    X.f = fr.fh;
    X.a = R[0]->attention;
    /* the rows of every tensor in one numbering, in steps of about
       pe_chunk_entries entries (polling between them), each split evenly */
    total = nrows;
    nt = pe_threads(num_threads, total, 2 * nf, -1);
    step = pe_chunk_entries() / (2 * nf);
    if (poll == NULL || step >= total)
        step = total;
    if (step < 1)
        step = 1;
    while (done < total && err == FASTPE_OK) {
        int64_t lo = done, hi = total - done > step ? done + step : total;
        int t, n = hi - lo < nt ? (int)(hi - lo) : nt;
#pragma omp parallel for num_threads(n > 1 ? n : 1) schedule(static, 1) if (n > 1)
        for (t = 0; t < n; t++) {
            int64_t a = lo + t * (hi - lo) / n, b = lo + (t + 1) * (hi - lo) / n, base = 0;
            for (int i = 0; i < nR; i++) {
                int64_t ni = pe_rope_nrows(R[i]);
                int64_t u0 = a > base ? a : base, u1 = b < base + ni ? b : base + ni;
                if (u0 < u1)
                    crr_range(R[i], &X, tab, Ks, u0 - base, u1 - base);
                base += ni;
            }
        }
        done = hi;
        if (done < total && poll != NULL && poll(poll_ctx) != 0)
            err = PE_EINTR;
    }
    free(mem);
    return err;
}
