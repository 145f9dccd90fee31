/*
 * The public entry points of the Vaswani table (include/fastpe/fastpe.h):
 * argument checks, then ONE fill through the shared plan cache.  The Python
 * module's capsule table points at these same functions.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <stdlib.h>

/* ---- the plan cache -------------------------------------------------------
 * Callers run from any thread, so their plans live in a small table keyed by
 * what a plan depends on (nf, w0, base, denom), guarded by a mutex, each entry
 * reference-counted so that eviction never frees a plan a fill is using. */

#define CPLANS            8 /* entries; each at most 4 MiB */
#define CPLAN_MAX_DOUBLES 524288

typedef struct {
    int64_t nf;
    double w0, base, denom;
    double *mem;   /* NULL: a free slot */
    int64_t refs;  /* fills using it now */
    uint64_t used; /* LRU stamp */
} pe_cplan;

static pe_cplan cplans[CPLANS];
static uint64_t cplan_clock = 0;
static pe_mutex cplan_lock = PE_MUTEX_INIT;

PE_INLINE int cplan_is(const pe_cplan *e, const pe_spec *sp) {
    /* (specs with a frequency list never reach this cache) */
    return e->mem != NULL && sp->wlist == NULL && e->nf == sp->nf && e->w0 == sp->w0 &&
           e->base == sp->base && e->denom == sp->denom;
}

/* A plan for sp: cached (*slot >= 0; release it with cplan_release), or, when
 * the cache cannot hold it, NULL (*slot -1: the fill prepares its own). */
static const double *cplan_acquire(const pe_spec *sp, int num_threads, int *slot, int *err) {
    int i, victim = -1;
    int64_t B = pe_block_rows(sp->nf);
    size_t n = pe_plan_doubles(sp->nf, B);
    double *mem;
    *slot = -1;
    *err = FASTPE_OK;
    if (n > CPLAN_MAX_DOUBLES || sp->wlist != NULL)
        return NULL;
    pe_mutex_lock(&cplan_lock);
    for (i = 0; i < CPLANS; i++) {
        if (cplan_is(&cplans[i], sp)) {
            cplans[i].refs += 1;
            cplans[i].used = ++cplan_clock;
            pe_mutex_unlock(&cplan_lock);
            *slot = i;
            return cplans[i].mem;
        }
    }
    pe_mutex_unlock(&cplan_lock);
    /* build outside the lock (tens of microseconds); a racing thread may build
       the same plan, and then one of the two is kept */
    mem = (double *)malloc(n * sizeof(double));
    if (mem == NULL) {
        *err = FASTPE_ENOMEM;
        return NULL;
    }
    *err = pe_prepare(mem, sp, 0, B, pe_threads(num_threads, B, sp->nf, -1));
    if (*err != FASTPE_OK) {
        free(mem);
        return NULL;
    }
    pe_mutex_lock(&cplan_lock);
    for (i = 0; i < CPLANS; i++) {
        if (cplan_is(&cplans[i], sp)) { /* another thread was first */
            cplans[i].refs += 1;
            pe_mutex_unlock(&cplan_lock);
            free(mem);
            *slot = i;
            return cplans[i].mem;
        }
        if (cplans[i].mem == NULL) { /* a free slot first, else the LRU idle one */
            if (victim < 0 || cplans[victim].mem != NULL)
                victim = i;
        } else if (cplans[i].refs == 0 && (victim < 0 || (cplans[victim].mem != NULL &&
                                                          cplans[i].used < cplans[victim].used))) {
            victim = i;
        }
    }
    if (victim < 0) { /* every entry in use: keep it private */
        pe_mutex_unlock(&cplan_lock);
        free(mem);
        return NULL;
    }
    free(cplans[victim].mem);
    cplans[victim].mem = mem;
    cplans[victim].nf = sp->nf;
    cplans[victim].w0 = sp->w0;
    cplans[victim].base = sp->base;
    cplans[victim].denom = sp->denom;
    cplans[victim].refs = 1;
    cplans[victim].used = ++cplan_clock;
    pe_mutex_unlock(&cplan_lock);
    *slot = victim;
    return mem;
}

static void cplan_release(int slot) {
    if (slot >= 0) {
        pe_mutex_lock(&cplan_lock);
        cplans[slot].refs -= 1;
        pe_mutex_unlock(&cplan_lock);
    }
}

void pe_plan_cache_lock(int take) {
    if (take)
        pe_mutex_lock(&cplan_lock);
    else
        pe_mutex_unlock(&cplan_lock);
}

void pe_plan_cache_release(void) {
    pe_mutex_lock(&cplan_lock);
    for (int i = 0; i < CPLANS; i++) {
        if (cplans[i].mem != NULL && cplans[i].refs == 0) { /* (a running fill keeps its plan) */
            free(cplans[i].mem);
            cplans[i].mem = NULL;
        }
    }
    pe_mutex_unlock(&cplan_lock);
}

int pe_plan_cache_snapshot(double *out, int n) {
    int k = 0;
    pe_mutex_lock(&cplan_lock);
    for (int i = 0; i < CPLANS && k < n; i++) {
        if (cplans[i].mem != NULL) {
            out[5 * k] = (double)cplans[i].nf;
            out[5 * k + 1] = cplans[i].w0;
            out[5 * k + 2] = cplans[i].base;
            out[5 * k + 3] = cplans[i].denom;
            out[5 * k + 4] = (double)cplans[i].refs;
            k++;
        }
    }
    pe_mutex_unlock(&cplan_lock);
    return k;
}

int pe_fill_cached(void *out, int kind, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                   int num_threads) {
    int slot, err;
    const double *plan;
    if (rq->nseq * rq->S == 0)
        return FASTPE_OK;
    plan = cplan_acquire(sp, num_threads, &slot, &err);
    if (err != FASTPE_OK)
        return err;
    err = pe_fill_run(out, kind, row_stride, sp, rq, num_threads, plan, NULL, NULL, NULL);
    cplan_release(slot);
    return err;
}

/* ---- argument checks ------------------------------------------------------
 * Written once: the public entry points below and the Python binding (through
 * pe_fill_checked) run these same checks, and each failure names its argument
 * in the error detail (status.c). */

/* [lo, hi) = the bytes of an nseq x S array of 8-byte entries at strides (sb,
 * ss) entries; 0 when it is empty. */
static int strided_span(const void *p, int64_t nseq, int64_t S, int64_t sb, int64_t ss,
                        const char **lo, const char **hi) {
    double a = 0.0, b = 0.0; /* (in double: strides of a broadcast may be anything) */
    if (nseq <= 0 || S <= 0)
        return 0;
    double eb = (double)(nseq - 1) * (double)sb, es = (double)(S - 1) * (double)ss;
    a += eb < 0 ? eb : 0.0;
    b += eb > 0 ? eb : 0.0;
    a += es < 0 ? es : 0.0;
    b += es > 0 ? es : 0.0;
    *lo = (const char *)p + (ptrdiff_t)(a * 8.0);
    *hi = (const char *)p + (ptrdiff_t)(b * 8.0) + 8;
    return 1;
}

/* FASTPE_EOVERLAP (naming `name`) when an input array intersects the rows written. */
static int check_input_overlap(const char *olo, const char *ohi, const void *p, int64_t nseq,
                               int64_t S, int64_t sb, int64_t ss, const char *name) {
    const char *lo, *hi;
    if (p != NULL && strided_span(p, nseq, S, sb, ss, &lo, &hi) && lo < ohi && olo < hi)
        return pe_fail(FASTPE_EOVERLAP, name, -1, NAN, NAN);
    return FASTPE_OK;
}

int pe_check_fill(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                  const pe_rows *rq, const char *n_name) {
    const int64_t nseq = rq->nseq, S = rq->S;
    int64_t rows;
    /* widths beyond 2^40 cannot be a real buffer, and would overflow the scratch size */
    if (nseq < 0)
        return pe_fail(FASTPE_ESIZE, "nseq", -1, (double)nseq, 0.0);
    if (S < 0)
        return pe_fail(FASTPE_ESIZE, n_name, -1, (double)S, 0.0);
    if (sp->d < 1)
        return pe_fail(FASTPE_ESIZE, "d_model", -1, (double)sp->d, 1.0);
    if (sp->d > PE_MAX_WIDTH)
        return pe_fail(FASTPE_ESIZE, "d_model", -1, (double)sp->d, (double)PE_MAX_WIDTH);
    if (S > 0 && nseq > INT64_MAX / S)
        return pe_fail(FASTPE_ESIZE, "nseq", -1, (double)nseq, (double)(INT64_MAX / S));
    rows = nseq * S;
    if (out == NULL && rows > 0 && kind != 0)
        return pe_fail(FASTPE_ENULL, "out", -1, NAN, NAN);
    /* (rows > 1 of one sequence, or one row of several: either would overlap) */
    if (kind != 0 && rows > 1 && row_stride < sp->d)
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride, (double)sp->d);
    if (kind != 0 && !pe_span_ok(rows, row_stride, sp->d))
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride,
                       (double)((INT64_MAX / 16 - sp->d) / (rows > 1 ? rows - 1 : 1)));
    /* any finite base > 0 (a base so small that the frequencies overflow: below) */
    if (sp->wlist == NULL && !(isfinite(sp->base) && sp->base > 0.0))
        return pe_fail(FASTPE_EBASE, "base", -1, sp->base, 0.0);
    if (sp->layout != FASTPE_LAYOUT_INTERLEAVED && sp->layout != FASTPE_LAYOUT_SPLIT)
        return pe_fail(FASTPE_ELAYOUT, "layout", -1, (double)sp->layout, NAN);
    if (rq->add && !isfinite(rq->scale))
        return pe_fail(FASTPE_ESCALE, "scale", -1, rq->scale, NAN);
    if (!pe_frequencies_finite(sp))
        return pe_fail(FASTPE_EBASE, "base", -1, sp->base, NAN);
    if (rq->pos_f != NULL && (rq->offs != NULL || rq->offset != 0))
        return pe_fail(FASTPE_EINVAL, "offset", -1, (double)rq->offset, 0.0);
    /* |positions| * f_max must stay below 2^45 turns (exact quarter-turn
       reduction); this also keeps offset + position far from int64 overflow.
       One offset for all is checked even with no rows (it is an argument all
       the same); an offset and an integer position count apart. */
    const double limit = pe_max_position(sp);
    if (rq->offs == NULL && rq->pos_f == NULL && rq->pos_i == NULL) {
        double k = pe_extent(rq->offset, S);
        return k <= limit ? FASTPE_OK : pe_fail(FASTPE_ERANGE, "offset", -1, k, limit);
    }
    if (rows > 0 && kind != 0) {
        /* inputs inside the rows to be written would be read after being overwritten */
        const size_t itemsize = kind == PE_KIND_F64 ? 8 : (kind == PE_KIND_F32 ? 4 : 2);
        const char *olo = (const char *)out;
        const char *ohi = olo + (size_t)((rows - 1) * row_stride + sp->d) * itemsize;
        const void *pos = rq->pos_f != NULL ? (const void *)rq->pos_f : (const void *)rq->pos_i;
        int err = check_input_overlap(olo, ohi, pos, nseq, S, rq->psb, rq->pss, "positions");
        if (err == FASTPE_OK)
            err = check_input_overlap(olo, ohi, rq->offs, 1, nseq, 0, rq->offs_stride, "offset");
        if (err != FASTPE_OK)
            return err;
    }
    for (int64_t b = 0; b < nseq; b++) {
        const int64_t off = rq->offs != NULL ? rq->offs[b * rq->offs_stride] : rq->offset;
        if (rq->pos_f != NULL) {
            const double *p = rq->pos_f + b * rq->psb;
            for (int64_t t = 0; t < S; t++) {
                if (!(fabs(p[t * rq->pss]) <= limit))
                    return pe_fail(FASTPE_ERANGE, "positions", b * S + t, p[t * rq->pss], limit);
            }
        } else if (rq->pos_i != NULL) {
            const int64_t *p = rq->pos_i + b * rq->psb;
            for (int64_t t = 0; t < S; t++) {
                double k = fabs((double)off) + fabs((double)p[t * rq->pss]);
                if (!(k <= limit))
                    return pe_fail(FASTPE_ERANGE, "positions", b * S + t,
                                   (double)off + (double)p[t * rq->pss], limit);
            }
        } else {
            double k = pe_extent(off, S);
            if (!(k <= limit))
                return pe_fail(FASTPE_ERANGE, "offset", b * S, k, limit); /* (its first row) */
        }
    }
    return FASTPE_OK;
}

int pe_fill_checked(void *out, int kind, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                    int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                    void *poll_ctx) {
    int slot = -1, err = pe_check_fill(out, kind, row_stride, sp, rq, "seq_len");
    if (err != FASTPE_OK || rq->nseq * rq->S == 0)
        return pe_settle(err);
    if (plan == NULL) {
        plan = cplan_acquire(sp, num_threads, &slot, &err);
        if (err != FASTPE_OK)
            return pe_settle(err);
    }
    err = pe_fill_run(out, kind, row_stride, sp, rq, num_threads, plan, ac, poll, poll_ctx);
    cplan_release(slot);
    return pe_settle(err);
}

/* The Vaswani spec of d_model, its width kept as given: a width outside
 * 1 .. 2^40 is pe_check_fill's to refuse, never one to compute the columns of
 * ((d + 1) / 2 overflows at INT64_MAX). */
static pe_spec vaswani(int64_t d_model, double base, int layout) {
    pe_spec sp =
        pe_spec_vaswani(d_model >= 1 && d_model <= PE_MAX_WIDTH ? d_model : 1, base, layout);
    sp.d = d_model;
    return sp;
}

static int fill_table_body(void *out, int kind, int64_t seq_len, int64_t d_model,
                           int64_t row_stride, double base, int64_t offset, int layout,
                           int num_threads, pe_poll_fn poll, void *ctx) {
    pe_init();
    pe_spec sp = vaswani(d_model, base, layout);
    pe_rows rq;
    pe_init_rows(&rq, 1, seq_len, 0, 0);
    rq.offset = offset;
    int err = pe_check_fill(out, kind, row_stride, &sp, &rq, "seq_len");
    if (err != FASTPE_OK || seq_len == 0)
        return err;
    if (poll != NULL) /* (a poll callback runs on its own plan: no cache entry held meanwhile) */
        return pe_fill_run(out, kind, row_stride, &sp, &rq, num_threads, NULL, NULL, poll, ctx);
    return pe_fill_cached(out, kind, row_stride, &sp, &rq, num_threads);
}

static int fill_table(void *out, int kind, int64_t seq_len, int64_t d_model, int64_t row_stride,
                      double base, int64_t offset, int layout, int num_threads, pe_poll_fn poll,
                      void *ctx) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, fill_table_body(out, kind, seq_len, d_model, row_stride, base,
                                                      offset, layout, num_threads, poll, ctx));
}

static int add_table_body(void *x, int kind, int64_t nseq, int64_t seq_len, int64_t d_model,
                          int64_t row_stride, double base, int64_t offset, double scale, int layout,
                          int num_threads) {
    pe_init();
    pe_spec sp = vaswani(d_model, base, layout);
    pe_rows rq;
    pe_init_rows(&rq, nseq, seq_len, 0, 0);
    rq.offset = offset;
    rq.add = 1;
    rq.scale = scale;
    int err = pe_check_fill(x, kind, row_stride, &sp, &rq, "seq_len");
    if (err != FASTPE_OK)
        return err;
    return pe_fill_cached(x, kind, row_stride, &sp, &rq, num_threads);
}

static int add_table(void *x, int kind, int64_t nseq, int64_t seq_len, int64_t d_model,
                     int64_t row_stride, double base, int64_t offset, double scale, int layout,
                     int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, add_table_body(x, kind, nseq, seq_len, d_model, row_stride,
                                                     base, offset, scale, layout, num_threads));
}

static int at_positions_body(void *out, int kind, int64_t n, int64_t d_model, int64_t row_stride,
                             const double *positions, double base, int layout, int add,
                             double scale, int num_threads) {
    pe_init();
    if (positions == NULL && n > 0)
        return pe_fail(FASTPE_ENULL, "positions", -1, NAN, NAN);
    pe_spec sp = vaswani(d_model, base, layout);
    pe_rows rq;
    pe_init_rows(&rq, 1, n, 0, 0);
    rq.pos_f = positions;
    rq.pss = 1;
    rq.add = add;
    rq.scale = scale;
    int err = pe_check_fill(out, kind, row_stride, &sp, &rq, "n");
    if (err != FASTPE_OK)
        return err;
    return pe_fill_cached(out, kind, row_stride, &sp, &rq, num_threads);
}

static int at_positions(void *out, int kind, int64_t n, int64_t d_model, int64_t row_stride,
                        const double *positions, double base, int layout, int add, double scale,
                        int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno,
                         at_positions_body(out, kind, n, d_model, row_stride, positions, base,
                                           layout, add, scale, num_threads));
}

/* ---- the exported functions ----------------------------------------------- */

FASTPE_API int fastpe_fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_F32, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL);
}

FASTPE_API int fastpe_fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_F64, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL);
}

FASTPE_API int fastpe_fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_F16, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL);
}

FASTPE_API int fastpe_fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                                double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_BF16, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL);
}

FASTPE_API int fastpe_fill_poll(void *out, int dtype, int64_t seq_len, int64_t d_model,
                                int64_t row_stride, double base, int64_t offset, int layout,
                                int num_threads, fastpe_poll_fn poll, void *ctx) {
    static const int kinds[4] = {PE_KIND_F32, PE_KIND_F64, PE_KIND_F16, PE_KIND_BF16};
    if (dtype < 0 || dtype > 3)
        return pe_keep_errno(errno, pe_fail(FASTPE_EINVAL, "dtype", -1, (double)dtype, 3.0));
    return fill_table(out, kinds[dtype], seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, poll, ctx);
}

FASTPE_API int fastpe_add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads) {
    return add_table(x, PE_KIND_F32, nseq, seq_len, d_model, row_stride, base, offset, scale,
                     layout, num_threads);
}

FASTPE_API int fastpe_add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads) {
    return add_table(x, PE_KIND_F64, nseq, seq_len, d_model, row_stride, base, offset, scale,
                     layout, num_threads);
}

FASTPE_API int fastpe_add_f16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads) {
    return add_table(x, PE_KIND_F16, nseq, seq_len, d_model, row_stride, base, offset, scale,
                     layout, num_threads);
}

FASTPE_API int fastpe_add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                               int64_t row_stride, double base, int64_t offset, double scale,
                               int layout, int num_threads) {
    return add_table(x, PE_KIND_BF16, nseq, seq_len, d_model, row_stride, base, offset, scale,
                     layout, num_threads);
}

FASTPE_API int fastpe_fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                                         const double *positions, double base, int layout,
                                         int num_threads) {
    return at_positions(out, PE_KIND_F32, n, d_model, row_stride, positions, base, layout, 0, 1.0,
                        num_threads);
}

FASTPE_API int fastpe_fill_positions_f64(double *out, int64_t n, int64_t d_model,
                                         int64_t row_stride, const double *positions, double base,
                                         int layout, int num_threads) {
    return at_positions(out, PE_KIND_F64, n, d_model, row_stride, positions, base, layout, 0, 1.0,
                        num_threads);
}

FASTPE_API int fastpe_add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                                        const double *positions, double base, double scale,
                                        int layout, int num_threads) {
    return at_positions(x, PE_KIND_F32, n, d_model, row_stride, positions, base, layout, 1, scale,
                        num_threads);
}

FASTPE_API int fastpe_add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                                        const double *positions, double base, double scale,
                                        int layout, int num_threads) {
    return at_positions(x, PE_KIND_F64, n, d_model, row_stride, positions, base, layout, 1, scale,
                        num_threads);
}

const char *pe_strerror(int code) {
    switch (code) {
    case FASTPE_OK:
        return "success";
    case FASTPE_ENULL:
        return "out is NULL";
    case FASTPE_ESIZE:
        return "seq_len must be >= 0 and d_model >= 1";
    case FASTPE_ESTRIDE:
        return "row_stride must be >= d_model";
    case FASTPE_EBASE:
        return "base must be finite and > 0";
    case FASTPE_ELAYOUT:
        return "unknown layout";
    case FASTPE_ERANGE:
        return "positions too large for an exact angle reduction";
    case FASTPE_ENOMEM:
        return "could not allocate kernel scratch memory";
    case FASTPE_ESCALE:
        return "scale must be finite";
    case FASTPE_EOVERLAP:
        return "positions overlap the rows being written";
    case FASTPE_EINTR:
        return "interrupted by the poll callback";
    case FASTPE_EINVAL:
        return "an argument is outside its documented values";
    case FASTPE_EHANDLE:
        return "not a live fastpe_spec or fastpe_rope handle";
    default:
        return "unknown fastpe error code";
    }
}

FASTPE_API const char *fastpe_strerror(int code) { return pe_strerror(code); }
