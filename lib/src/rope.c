/*
 * RoPE's second step: every row of q or k rotated in place by its token's row of
 * the angle table (sin | cos of nf frequencies, filled by the fill driver like
 * any encoding), the threads splitting the rows.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"
#include "kernels/pe_v512.h"

#define ROT_T        float
#define ROT_SFX      f32
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#include "rope_rows.inc.c"

#if PE_HAVE_V512
/* the same rotations compiled for AVX-512F, used where pe_v512 is set */
#define ROT_V512     __attribute__((target("avx512f,prefer-vector-width=512")))
#define ROT_T        float
#define ROT_SFX      f32_v512
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#define ROT_ATTR     ROT_V512
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64_v512
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#define ROT_ATTR     ROT_V512
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16_v512
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#define ROT_ATTR     ROT_V512
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16_v512
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#define ROT_ATTR     ROT_V512
#define ROT_CACHE    0
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
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64_avx2
#define ROT_PAIRS    0
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#define ROT_ATTR     ROT_AVX2
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16_avx2
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#define ROT_ATTR     ROT_AVX2
#define ROT_CACHE    0
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16_avx2
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#define ROT_ATTR     ROT_AVX2
#define ROT_CACHE    0
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
 * operations, hence the same bits. */
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

static int64_t rope_nrows(const pe_rope_rows *R) {
    int64_t n = 1;
    for (int j = 0; j < R->m; j++)
        n *= R->shape[j];
    return n;
}

/* Rows r0 .. r1-1 (C order of the leading axes), walked with an odometer: no
 * division per row. */
static void rotate_range(const pe_rope_rows *R, rot_fn fn, int64_t r0, int64_t r1) {
    int64_t idx[PE_ROPE_MAX_AXES];
    int64_t rem = r0, off = 0;
    if (r0 >= r1)
        return;
    for (int j = R->m - 1; j >= 0; j--) {
        idx[j] = rem % R->shape[j];
        rem /= R->shape[j];
        off += idx[j] * R->strides[j];
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = (R->per_batch ? idx[0] * R->S : 0) + idx[R->sa];
        const double *angles = R->table + t * 2 * R->nf;
        fn(R->base + off, angles, angles + R->nf, R->nf, R->attention);
        for (int j = R->m - 1; j >= 0; j--) {
            idx[j] += 1;
            off += R->strides[j];
            if (idx[j] < R->shape[j])
                break;
            off -= R->shape[j] * R->strides[j];
            idx[j] = 0;
        }
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
        int64_t n = rope_nrows(Rs[i]);
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

/* The angle table of rq's positions (one fill: into a stack buffer when small),
 * then every row of R[0] .. R[nR-1] by it on one team, polling between chunks of
 * both.  The R[i].table fields are set here and cleared before returning. */
int pe_rope_run(pe_rope_rows *const *R, int nR, const pe_spec *sp, const pe_rows *rq,
                int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                void *poll_ctx) {
    int64_t W = 2 * sp->nf, ntab = rq->nseq * rq->S, nrows = 0;
    double small[512];
    double *table = small;
    int i, err;
    if (nR < 1 || nR > 2)
        return FASTPE_ESIZE;
    for (i = 0; i < nR; i++)
        nrows += rope_nrows(R[i]);
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
    if (err == FASTPE_OK) {
        for (i = 0; i < nR; i++)
            R[i]->table = table;
        err = pe_rope_rotate((const pe_rope_rows *const *)R, nR,
                             pe_threads(num_threads, nrows, W, -1), poll, poll_ctx);
        for (i = 0; i < nR; i++)
            R[i]->table = NULL;
    }
    if (table != small)
        free(table);
    return err;
}

/* Row r of each axis's compact table (sin | cos of its na frequencies) into
 * its columns of the full row: entries copied as they are (already rounded). */
#define PE_SCATTER_ROWS(T)                                                                         \
    for (int64_t r = r0; r < r1; r++) {                                                            \
        T *dst = (T *)table + r * 2 * nf;                                                          \
        for (int a = 0; a < n_axes; a++) {                                                         \
            int64_t na = ax[a].sp->nf;                                                             \
            if (compact[a] == NULL)                                                                \
                continue;                                                                          \
            const T *src = (const T *)compact[a] + r * 2 * na;                                     \
            const int64_t *cols = ax[a].cols;                                                      \
            for (int64_t j = 0; j < na; j++) {                                                     \
                dst[cols[j]] = src[j];                                                             \
                dst[nf + cols[j]] = src[na + j];                                                   \
            }                                                                                      \
        }                                                                                          \
    }

static void rope_scatter(void *table, int sz, int64_t nf, void *const *compact,
                         const pe_rope_axis *ax, int n_axes, int64_t r0, int64_t r1) {
    if (sz == 8) {
        PE_SCATTER_ROWS(double)
    } else if (sz == 4) {
        PE_SCATTER_ROWS(float)
    } else {
        PE_SCATTER_ROWS(uint16_t)
    }
}
#undef PE_SCATTER_ROWS

/* Rows r0 .. r1-1 of the table: each axis's fill of those rows (one thread),
 * straight into the table or into its compact rows and then placed. */
static int rope_axes_rows(void *table, int kind, int sz, int64_t nf, void *const *compact,
                          const pe_rope_axis *ax, int n_axes, int64_t r0, int64_t r1,
                          int num_threads, pe_poll_fn poll, void *poll_ctx) {
    int err = FASTPE_OK, scatter = 0;
    for (int a = 0; a < n_axes && err == FASTPE_OK; a++) {
        int64_t na = ax[a].sp->nf;
        pe_rows rq = ax[a].rq; /* the rows r0 .. r1-1 (positions flattened: psb = S pss) */
        if (na == 0)
            continue;
        rq.nseq = 1;
        rq.S = r1 - r0;
        if (ax[a].rq.pos_f != NULL) /* fractional positions (float64) */
            rq.pos_f = ax[a].rq.pos_f + r0 * ax[a].rq.pss;
        else
            rq.pos_i = ax[a].rq.pos_i + r0 * ax[a].rq.pss;
        rq.psb = 0;
        if (ax[a].wide != NULL) /* its columns are one run: straight into the table */
            err = pe_fill_run((char *)table + (size_t)(r0 * 2 * nf) * (size_t)sz, kind, 2 * nf,
                              ax[a].wide, &rq, num_threads, ax[a].plan, ax[a].ac, poll, poll_ctx);
        else {
            scatter = 1;
            err = pe_fill_run((char *)compact[a] + (size_t)(r0 * 2 * na) * (size_t)sz, kind, 2 * na,
                              ax[a].sp, &rq, num_threads, ax[a].plan, ax[a].ac, poll, poll_ctx);
        }
    }
    if (err == FASTPE_OK && scatter)
        rope_scatter(table, sz, nf, compact, ax, n_axes, r0, r1);
    return err;
}

int pe_rope_table_axes(void *table, int kind, int64_t nf, int64_t ntab, const pe_rope_axis *ax,
                       int n_axes, int num_threads, pe_poll_fn poll, void *poll_ctx) {
    /* each axis's rows are a fill of its own frequencies (the bits of a 1-axis
       table of them, whatever rows a call covers): the fill's row writers stay
       the one code path that computes an angle.  The threads split the tokens in
       ONE parallel region, each filling its rows of every axis. */
    void *compact[PE_ROPE_MAX_AXES];
    int sz = kind == PE_KIND_F64 ? 8 : kind == PE_KIND_F32 ? 4 : 2;
    int a, err = FASTPE_OK, nt;
    int64_t total = 0, other = 0;
    char *buf = NULL;
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES)
        return FASTPE_ESIZE;
    if (ntab == 0 || nf == 0)
        return FASTPE_OK;
    for (a = 0; a < n_axes; a++) {
        if (ax[a].rq.nseq * ax[a].rq.S != ntab ||
            (ax[a].rq.nseq > 1 && ax[a].rq.psb != ax[a].rq.S * ax[a].rq.pss))
            return FASTPE_ESIZE;
        total += ax[a].sp->nf;
        if (ax[a].wide == NULL)
            other += ax[a].sp->nf;
    }
    if (total != nf)
        return FASTPE_ESIZE;
    if (other > 0) {
        buf = (char *)malloc((size_t)(ntab * 2 * other) * (size_t)sz);
        if (buf == NULL)
            return FASTPE_ENOMEM;
    }
    other = 0;
    for (a = 0; a < n_axes; a++) {
        compact[a] = NULL;
        if (ax[a].wide == NULL && ax[a].sp->nf > 0) {
            compact[a] = buf + (size_t)(ntab * 2 * other) * (size_t)sz;
            other += ax[a].sp->nf;
        }
    }
    nt = pe_threads(num_threads, ntab, 2 * nf, -1);
    if (nt <= 1) {
        err = rope_axes_rows(table, kind, sz, nf, compact, ax, n_axes, 0, ntab, 1, poll, poll_ctx);
    } else {
        int t;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
        for (t = 0; t < nt; t++) {
            /* (only the calling thread, thread 0, may poll) */
            int e = rope_axes_rows(table, kind, sz, nf, compact, ax, n_axes, t * ntab / nt,
                                   (t + 1) * ntab / nt, 1, t == 0 ? poll : NULL, poll_ctx);
            if (e != FASTPE_OK) {
#pragma omp critical(pe_rope_axes_err)
                err = e;
            }
        }
    }
    free(buf);
    return err;
}

int pe_rope_run_axes(pe_rope_rows *const *R, int nR, int64_t nf, int64_t ntab,
                     const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                     void *poll_ctx) {
    int64_t W = 2 * nf, nrows = 0;
    double *table;
    int i, err;
    if (nR < 1 || nR > 2)
        return FASTPE_ESIZE;
    for (i = 0; i < nR; i++)
        nrows += rope_nrows(R[i]);
    if (nrows == 0 || ntab == 0 || W == 0)
        return FASTPE_OK;
    table = (double *)malloc((size_t)(ntab * W) * sizeof(double));
    if (table == NULL)
        return FASTPE_ENOMEM;
    err = pe_rope_table_axes(table, PE_KIND_F64, nf, ntab, ax, n_axes, num_threads, poll, poll_ctx);
    if (err == FASTPE_OK) {
        for (i = 0; i < nR; i++)
            R[i]->table = table;
        err = pe_rope_rotate((const pe_rope_rows *const *)R, nR,
                             pe_threads(num_threads, nrows, W, -1), poll, poll_ctx);
        for (i = 0; i < nR; i++)
            R[i]->table = NULL;
    }
    free(table);
    return err;
}

/* ---- the RoPE handles ------------------------------------------------------
 * A handle is the encoding fastpe._rope._encoder compiles for ("rope", w): the
 * [sin | cos] rows of nf listed frequencies, with its own copy of them and of
 * its plan, so that the cache and the rotation give fastpe.rope_cache's and
 * fastpe.apply_rope's bits. */

/* as fastpe._rope.MAX_FREQUENCY: a larger frequency overflows the angles */
#define MAX_FREQUENCY 1e280
/* as fastpe.kernel.PLAN_MAX_BYTES: larger plans are prepared per call */
#define PLAN_MAX_BYTES ((double)(4 << 20))

static fastpe_rope *rope_from_frequencies_body(const double *inv_freq, int64_t nf,
                                               double attention_factor) {
    struct fastpe_rope *h;
    int64_t B;
    pe_init();
    if (inv_freq == NULL || nf < 1 || nf > ((int64_t)1 << 31))
        return NULL;
    if (!(isfinite(attention_factor) && attention_factor > 0.0))
        return NULL;
    for (int64_t i = 0; i < nf; i++) {
        if (!(inv_freq[i] >= 0.0 && inv_freq[i] <= MAX_FREQUENCY))
            return NULL;
    }
    h = (struct fastpe_rope *)pe_shell_alloc(PE_SHELL_ROPE, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->w = (double *)malloc((size_t)nf * sizeof(double));
    if (h->w == NULL) {
        pe_shell_free(PE_SHELL_ROPE, h);
        return NULL;
    }
    memcpy(h->w, inv_freq, (size_t)nf * sizeof(double));
    /* kernel_spec(2 nf, nf, layout=1, ns=nf, c_off=nf, nc=nf, frequencies=w) */
    h->sp.d = 2 * nf;
    h->sp.nf = nf;
    h->sp.w0 = 1.0;
    h->sp.base = 1.0;
    h->sp.denom = 1.0;
    h->sp.layout = PE_LAYOUT_SPLIT;
    h->sp.zero_col = -1;
    h->sp.s_off = 0;
    h->sp.ns = nf;
    h->sp.c_off = nf;
    h->sp.nc = nf;
    h->sp.wlist = h->w;
    h->attention = attention_factor;
    h->max_position = pe_max_position(&h->sp);
    B = pe_block_rows(nf);
    if ((double)pe_plan_doubles(nf, B) * 8.0 <= PLAN_MAX_BYTES) {
        h->plan = (double *)malloc(pe_plan_doubles(nf, B) * sizeof(double));
        if (h->plan == NULL ||
            pe_prepare(h->plan, &h->sp, 0, B, pe_threads(0, B, nf, -1)) != FASTPE_OK) {
            free(h->plan);
            free(h->w);
            pe_shell_free(PE_SHELL_ROPE, h);
            return NULL;
        }
    }
    h->magic = PE_ROPE_MAGIC;
    return h;
}

fastpe_rope *fastpe_rope_from_frequencies(const double *inv_freq, int64_t nf,
                                          double attention_factor) {
    int saved_errno = errno;
    fastpe_rope *r = rope_from_frequencies_body(inv_freq, nf, attention_factor);
    errno = saved_errno;
    return r;
}

void fastpe_rope_free(fastpe_rope *h) {
    if (h != NULL && (h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC)) {
        if (h->magic == PE_ROPE_AXES_MAGIC) {
            for (int a = 0; a < h->n_axes; a++) {
                free(h->axes[a].w);
                free(h->axes[a].plan);
                free(h->axes[a].cols);
            }
            free(h->axes);
        }
        h->magic = 0;
        free(h->w);
        free(h->plan);
        pe_shell_free(PE_SHELL_ROPE, h);
    }
}

int64_t fastpe_rope_rotary_dim(const fastpe_rope *h) {
    return h != NULL && (h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC) ? 2 * h->sp.nf
                                                                                      : -1;
}

/* The [sin | cos] spec of the nf frequencies w (fastpe._rope._encoder's), with
 * its plan when it is small enough to keep (else *plan = NULL); 0 or an error. */
static int rope_spec(pe_spec *sp, double *w, int64_t nf, double **plan) {
    int64_t B;
    memset(sp, 0, sizeof(*sp));
    /* kernel_spec(2 nf, nf, layout=1, ns=nf, c_off=nf, nc=nf, frequencies=w) */
    sp->d = 2 * nf;
    sp->nf = nf;
    sp->w0 = 1.0;
    sp->base = 1.0;
    sp->denom = 1.0;
    sp->layout = PE_LAYOUT_SPLIT;
    sp->zero_col = -1;
    sp->s_off = 0;
    sp->ns = nf;
    sp->c_off = nf;
    sp->nc = nf;
    sp->wlist = w;
    *plan = NULL;
    B = pe_block_rows(nf);
    if ((double)pe_plan_doubles(nf, B) * 8.0 <= PLAN_MAX_BYTES) {
        *plan = (double *)malloc(pe_plan_doubles(nf, B) * sizeof(double));
        if (*plan == NULL)
            return FASTPE_ENOMEM;
        if (pe_prepare(*plan, sp, 0, B, pe_threads(0, B, nf, -1)) != FASTPE_OK) {
            free(*plan);
            *plan = NULL;
            return FASTPE_ENOMEM;
        }
    }
    return FASTPE_OK;
}

static fastpe_rope *rope_from_axes_body(const double *inv_freq, int64_t nf, const int32_t *axis,
                                        int n_axes, double attention_factor) {
    struct fastpe_rope *h;
    int a;
    pe_init();
    if (axis == NULL || n_axes < 1 || n_axes > PE_ROPE_MAX_AXES || inv_freq == NULL || nf < 1 ||
        nf > ((int64_t)1 << 31))
        return NULL;
    for (int64_t i = 0; i < nf; i++) {
        if (axis[i] < 0 || axis[i] >= n_axes)
            return NULL;
    }
    h = fastpe_rope_from_frequencies(inv_freq, nf, attention_factor);
    if (h == NULL)
        return NULL;
    h->axes = (pe_rope_axis_data *)calloc((size_t)n_axes, sizeof(pe_rope_axis_data));
    if (h->axes == NULL) {
        fastpe_rope_free(h);
        return NULL;
    }
    h->magic = PE_ROPE_AXES_MAGIC; /* (from here fastpe_rope_free frees the axes) */
    h->n_axes = n_axes;
    for (a = 0; a < n_axes; a++) {
        pe_rope_axis_data *d = &h->axes[a];
        int64_t na = 0;
        for (int64_t i = 0; i < nf; i++)
            na += axis[i] == a;
        d->max_position = HUGE_VAL;
        if (na == 0)
            continue;
        d->w = (double *)malloc((size_t)na * sizeof(double));
        d->cols = (int64_t *)malloc((size_t)na * sizeof(int64_t));
        if (d->w == NULL || d->cols == NULL)
            break;
        na = 0;
        for (int64_t i = 0; i < nf; i++) {
            if (axis[i] == a) {
                d->w[na] = inv_freq[i];
                d->cols[na++] = i;
            }
        }
        if (rope_spec(&d->sp, d->w, na, &d->plan) != FASTPE_OK)
            break;
        d->max_position = pe_max_position(&d->sp);
        /* one run of columns: its rows straight into the table (as the binding) */
        d->has_wide = d->cols[na - 1] - d->cols[0] == na - 1;
        d->wide = d->sp;
        d->wide.d = 2 * nf;
        d->wide.s_off = d->cols[0];
        d->wide.c_off = nf + d->cols[0];
    }
    if (a < n_axes) {
        fastpe_rope_free(h);
        return NULL;
    }
    return h;
}

fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                   int n_axes, double attention_factor) {
    int saved_errno = errno;
    fastpe_rope *r = rope_from_axes_body(inv_freq, nf, axis, n_axes, attention_factor);
    errno = saved_errno;
    return r;
}

int fastpe_rope_n_axes(const fastpe_rope *h) {
    if (h == NULL)
        return -1;
    return h->magic == PE_ROPE_AXES_MAGIC ? h->n_axes : h->magic == PE_ROPE_MAGIC ? 1 : -1;
}

int fastpe_rope_section_axes(const int64_t *sections, int n_axes, int section_layout, int32_t *axis,
                             int64_t nf) {
    int64_t total = 0;
    if (sections == NULL || axis == NULL)
        return FASTPE_ENULL;
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES)
        return FASTPE_ESIZE;
    if (section_layout != FASTPE_SECTIONS_CONTIGUOUS &&
        section_layout != FASTPE_SECTIONS_INTERLEAVED)
        return FASTPE_EINVAL;
    for (int a = 0; a < n_axes; a++) {
        if (sections[a] < 0 || sections[a] > ((int64_t)1 << 31))
            return FASTPE_ESIZE;
        total += sections[a];
    }
    if (total != nf)
        return FASTPE_ESIZE;
    if (section_layout == FASTPE_SECTIONS_INTERLEAVED) {
        /* column i (r = i % n_axes >= 1, i < n_axes * sections[r]) takes axis r,
           every other column axis 0; each axis must get sections[a] columns */
        for (int a = 1; a < n_axes; a++) {
            if (sections[a] > 0 && a + (int64_t)n_axes * (sections[a] - 1) >= nf)
                return FASTPE_EINVAL;
        }
        for (int64_t i = 0; i < nf; i++) {
            int r = (int)(i % n_axes);
            axis[i] = r >= 1 && i < (int64_t)n_axes * sections[r] ? r : 0;
        }
    } else {
        int64_t i = 0;
        for (int a = 0; a < n_axes; a++) {
            for (int64_t j = 0; j < sections[a]; j++)
                axis[i++] = a;
        }
    }
    return FASTPE_OK;
}

/* ax[0 .. *nax-1]: the axes of h (a plain handle: one axis, its whole list) for
 * ntab tokens of positions[t * n_axes + a], their range checked. */
static int rope_axes_of(const struct fastpe_rope *h, pe_rope_axis *ax, int *nax,
                        const int64_t *positions, int64_t ntab) {
    int n = h->magic == PE_ROPE_AXES_MAGIC ? h->n_axes : 1, k = 0;
    if (positions == NULL)
        return FASTPE_ENULL;
    for (int64_t i = 0; i < ntab * n; i++) {
        double limit =
            n == 1 && h->magic == PE_ROPE_MAGIC ? h->max_position : h->axes[i % n].max_position;
        if (fabs((double)positions[i]) > limit)
            return FASTPE_ERANGE;
    }
    for (int a = 0; a < n; a++) {
        pe_rope_axis *x = &ax[k];
        if (h->magic == PE_ROPE_MAGIC) {
            x->sp = x->wide = &h->sp;
            x->plan = h->plan;
            x->cols = NULL;
        } else if (h->axes[a].sp.nf > 0) {
            x->sp = &h->axes[a].sp;
            x->wide = h->axes[a].has_wide ? &h->axes[a].wide : NULL;
            x->plan = h->axes[a].plan;
            x->cols = h->axes[a].cols;
        } else {
            continue;
        }
        x->ac = NULL;
        pe_init_rows(&x->rq, 1, ntab, 0, 0);
        x->rq.pos_i = positions + a;
        x->rq.pss = n;
        x->rq.psb = ntab * n;
        x->rq.fresh = 1;
        k++;
    }
    *nax = k;
    return FASTPE_OK;
}

/* rq for the angle rows of nseq x S tokens (positions[b*S + s], or offset + s
 * for every sequence when positions is NULL), their range checked. */
static int rope_positions(const struct fastpe_rope *h, pe_rows *rq, int64_t nseq, int64_t S,
                          const int64_t *positions, int64_t offset) {
    if (positions == NULL) {
        if (pe_extent(offset, S) > h->max_position)
            return FASTPE_ERANGE;
        nseq = 1;
    } else {
        for (int64_t i = 0; i < nseq * S; i++) {
            if (fabs((double)positions[i]) > h->max_position)
                return FASTPE_ERANGE;
        }
    }
    pe_init_rows(rq, nseq, S, 0, 0);
    rq->offset = positions == NULL ? offset : 0;
    rq->pos_i = positions;
    rq->psb = S;
    rq->pss = 1;
    rq->fresh = 1;
    return FASTPE_OK;
}

/* Whether n rows of width bytes every stride bytes (stride >= width, or n == 1)
 * from a and from b share a byte: decided exactly, so that the two halves of
 * one buffer's rows (cos and sin side by side) are disjoint.  Row i of b meets
 * row j of a iff |d + (i - j) stride| < width, d = b - a: at most two
 * differences t = i - j in -(n-1) .. n-1 can qualify. */
static int rows_meet(const char *a, const char *b, int64_t n, int64_t stride, int64_t width) {
    int64_t d = (int64_t)((uintptr_t)b - (uintptr_t)a);
    int64_t t0;
    if (n <= 1 || stride == 0)
        return -width < d && d < width;
    t0 = pe_floordiv(-width - d, stride) + 1; /* the smallest t with d + t stride > -width */
    for (int64_t t = t0; t < t0 + 2; t++) {
        if (-(n - 1) <= t && t <= n - 1) {
            int64_t e = d + t * stride;
            if (-width < e && e < width)
                return 1;
        }
    }
    return 0;
}

/* Whether the rows of a rotation (m <= 3 axes of n[i] rows at st[i] elements,
 * each row w elements wide) share no element: FASTPE_OK, else FASTPE_ESTRIDE.  Axes
 * of one row are dropped first (their stride is never used, and may be anything,
 * INT64_MIN included); every product and sum below is bounded before it is
 * formed, so no argument can overflow the check.  Decided on elements: nested
 * strides (each axis stepping over everything the axes inside it span) are
 * accepted at once; otherwise rows i and j meet iff some difference vector
 * d != 0 (|d_k| < n_k) has |sum d_k st_k| < w, searched exactly over the two
 * axes with the fewest differences, the third solved for (at most two
 * candidates, as in rows_meet).  A search beyond ROPE_OVERLAP_WORK steps is not
 * run and the layout refused: real layouts are nested, or small. */
#define ROPE_OVERLAP_WORK ((int64_t)1 << 22)
static int rope_rows_disjoint(const int64_t *n_in, const int64_t *st_in, int m, int64_t w) {
    /* whole layouts must fit in INT64_MAX / 16 elements: byte offsets (entries of
       at most 8 bytes) then fit in int64 with room to spare */
    const int64_t lim = INT64_MAX / 16;
    int64_t n[3], st[3], span = w;
    int k = 0;
    for (int i = 0; i < m; i++) {
        if (n_in[i] <= 1)
            continue;
        int64_t q = lim / (n_in[i] - 1);
        if (st_in[i] > q || st_in[i] < -q)
            return FASTPE_ESTRIDE;
        n[k] = n_in[i];
        st[k] = st_in[i] >= 0 ? st_in[i] : -st_in[i];
        if (st[k] < w) /* one step along this axis lands inside the row */
            return FASTPE_ESTRIDE;
        span += st[k] * (n[k] - 1);
        if (span > lim)
            return FASTPE_ESTRIDE;
        k++;
    }
    for (int i = 0; i < k; i++) { /* sort by stride (at most three entries) */
        for (int j = 0; j + 1 < k - i; j++) {
            if (st[j] > st[j + 1]) {
                int64_t ts = st[j], tn = n[j];
                st[j] = st[j + 1], n[j] = n[j + 1];
                st[j + 1] = ts, n[j + 1] = tn;
            }
        }
    }
    int nested = 1;
    span = w;
    for (int i = 0; i < k; i++) {
        nested = nested && st[i] >= span;
        span += st[i] * (n[i] - 1);
    }
    if (nested)
        return FASTPE_OK;
    if (k < 2)
        return FASTPE_ESTRIDE; /* (one axis: nested iff its stride >= w, seen above) */
    /* solve for the axis with the most rows; walk the other one or two */
    int big = 0;
    for (int i = 1; i < k; i++)
        big = n[i] > n[big] ? i : big;
    int64_t na = 1, sa = 0, nb = 1, sb = 0, sc = st[big], nc = n[big];
    for (int i = 0, seen = 0; i < k; i++) {
        if (i == big)
            continue;
        if (seen++ == 0)
            na = n[i], sa = st[i];
        else
            nb = n[i], sb = st[i];
    }
    if ((2 * na - 1) > ROPE_OVERLAP_WORK / (2 * nb - 1))
        return FASTPE_ESTRIDE;
    /* d and -d meet alike: da >= 0 (and db >= 0 when da == 0) covers every pair */
    for (int64_t da = 0; da < na; da++) {
        for (int64_t db = da == 0 ? 0 : -(nb - 1); db < nb; db++) {
            int64_t e = da * sa + db * sb;            /* |e| <= span: no overflow */
            int64_t t0 = pe_floordiv(-w - e, sc) + 1; /* the least dc with e + dc sc > -w */
            for (int64_t dc = t0; dc < t0 + 2; dc++) {
                if (dc <= -nc || dc >= nc || (da == 0 && db == 0 && dc == 0))
                    continue;
                int64_t f = e + dc * sc;
                if (-w < f && f < w)
                    return FASTPE_ESTRIDE;
            }
        }
    }
    return FASTPE_OK;
}

static int rope_check(const struct fastpe_rope *h) {
    if (h == NULL)
        return FASTPE_ENULL;
    if (h->magic == PE_ROPE_AXES_MAGIC) /* positions of one axis for several */
        return FASTPE_EINVAL;
    return h->magic == PE_ROPE_MAGIC ? FASTPE_OK : PE_EHANDLE;
}

/* The entry points of multi-axis positions take either kind of handle. */
static int rope_check_axes(const struct fastpe_rope *h) {
    if (h == NULL)
        return FASTPE_ENULL;
    return h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC ? FASTPE_OK : PE_EHANDLE;
}

#define ROPE_T    float
#define ROPE_SFX  f32
#define ROPE_KIND PE_KIND_F32
#include "rope_api.inc.c"

#define ROPE_T    double
#define ROPE_SFX  f64
#define ROPE_KIND PE_KIND_F64
#include "rope_api.inc.c"

#define ROPE_T    uint16_t
#define ROPE_SFX  f16
#define ROPE_KIND PE_KIND_F16
#include "rope_api.inc.c"

#define ROPE_T    uint16_t
#define ROPE_SFX  bf16
#define ROPE_KIND PE_KIND_BF16
#include "rope_api.inc.c"
