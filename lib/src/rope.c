/*
 * RoPE's second step: every row of q or k rotated in place by its token's row of
 * the angle table (sin | cos of nf frequencies, filled by the fill driver like
 * any encoding), the threads splitting the rows.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

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

/* Rows r0 .. r1-1 (C order of the leading axes), walked with an odometer: no
 * division per row. */
static void rotate_range(const pe_rope_rows *R, int64_t r0, int64_t r1) {
    int64_t idx[PE_ROPE_MAX_AXES];
    int64_t rem = r0, off = 0;
    for (int j = R->m - 1; j >= 0; j--) {
        idx[j] = rem % R->shape[j];
        rem /= R->shape[j];
        off += idx[j] * R->strides[j];
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = (R->per_batch ? idx[0] * R->S : 0) + idx[R->sa];
        const double *angles = R->table + t * 2 * R->nf;
        char *row = R->base + off;
        switch (R->kind) {
        case PE_KIND_F32:
            pe_rotate_row_f32((float *)row, angles, angles + R->nf, R->nf, R->half, R->attention);
            break;
        case PE_KIND_F64:
            pe_rotate_row_f64((double *)row, angles, angles + R->nf, R->nf, R->half, R->attention);
            break;
        case PE_KIND_F16:
            pe_rotate_row_f16((uint16_t *)row, angles, angles + R->nf, R->nf, R->half,
                              R->attention);
            break;
        default:
            pe_rotate_row_bf16((uint16_t *)row, angles, angles + R->nf, R->nf, R->half,
                               R->attention);
            break;
        }
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

void pe_rotate_rows(const pe_rope_rows *R, int64_t r0, int64_t r1, int nt) {
    int64_t n = r1 - r0;
    int t;
    if (nt <= 1) { /* on the calling thread: no parallel region for small calls */
        rotate_range(R, r0, r1);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (t = 0; t < nt; t++)
        rotate_range(R, r0 + t * n / nt, r0 + (t + 1) * n / nt);
}

int pe_rope_rotate(const pe_rope_rows *R, int64_t nrows, int nt, pe_poll_fn poll, void *poll_ctx) {
    /* in chunks of about pe_chunk_entries entries, polling between them, as a
       long fill does */
    int64_t W = 2 * R->nf;
    int64_t chunk = pe_chunk_entries();
    int64_t step = poll == NULL ? nrows : (W < chunk ? chunk / W : 1);
    int64_t r0 = 0;
    while (r0 < nrows) {
        int64_t r1 = step < nrows - r0 ? r0 + step : nrows;
        pe_rotate_rows(R, r0, r1, nt);
        r0 = r1;
        if (r0 < nrows && poll != NULL && poll(poll_ctx) != 0)
            return PE_EINTR;
    }
    return FASTPE_OK;
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

fastpe_rope *fastpe_rope_from_frequencies(const double *inv_freq, int64_t nf,
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
    h = (struct fastpe_rope *)calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->w = (double *)malloc((size_t)nf * sizeof(double));
    if (h->w == NULL) {
        free(h);
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
            free(h);
            return NULL;
        }
    }
    h->magic = PE_ROPE_MAGIC;
    return h;
}

void fastpe_rope_free(fastpe_rope *h) {
    if (h != NULL && h->magic == PE_ROPE_MAGIC) {
        h->magic = 0;
        free(h->w);
        free(h->plan);
        free(h);
    }
}

int64_t fastpe_rope_rotary_dim(const fastpe_rope *h) {
    return h != NULL && h->magic == PE_ROPE_MAGIC ? 2 * h->sp.nf : -1;
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

static int rope_check(const struct fastpe_rope *h) {
    if (h == NULL)
        return FASTPE_ENULL;
    return h->magic == PE_ROPE_MAGIC ? FASTPE_OK : PE_EHANDLE;
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
