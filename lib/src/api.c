/*
 * The public entry points of the Vaswani table (include/fastpe/fastpe.h):
 * argument checks, then ONE fill through the library's plan cache.  The Python
 * module's capsule table points at these same functions.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <stdlib.h>

/* ---- the plans of tables ---------------------------------------------------
 * A table's plan depends on (nf, w0, base, denom) only: specs of equal
 * frequencies share it through the library's plan cache (plans.c). */

#define TABLE_PLAN_MAX_DOUBLES 524288 /* 4 MiB: larger plans are prepared per fill */

typedef struct {
    int64_t tag; /* PE_PLAN_TABLE */
    int64_t nf;
    double w0, base, denom;
} table_key;

/* (every field 8 bytes: no padding, so the bytes are the fields) */
PE_INLINE table_key table_key_of(const pe_spec *sp) {
    table_key k;
    k.tag = PE_PLAN_TABLE;
    k.nf = sp->nf;
    k.w0 = sp->w0;
    k.base = sp->base;
    k.denom = sp->denom;
    return k;
}

static void table_plan_drop(void *v) { free(v); }

/* A plan for sp: cached (*slot >= 0; give it back with pe_plans_release), or
 * NULL when the cache has none to give (*slot -1: the fill prepares its own),
 * or when it could not be kept (then *owned is the caller's to free). */
static const double *table_plan(const pe_spec *sp, int num_threads, int *slot, double **owned,
                                int *err) {
    int64_t B = pe_block_rows(sp->nf);
    size_t n = pe_plan_doubles(sp->nf, B);
    table_key k;
    double *mem;
    *slot = -1;
    *owned = NULL;
    *err = FASTPE_OK;
    if (n > TABLE_PLAN_MAX_DOUBLES || sp->wlist != NULL) /* (listed frequencies: per fill) */
        return NULL;
    k = table_key_of(sp);
    mem = (double *)pe_plans_find(&k, sizeof(k), slot);
    if (mem != NULL)
        return mem;
    /* built outside the lock (tens of microseconds); a racing thread may build
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
    mem = (double *)pe_plans_add(&k, sizeof(k), mem, n * sizeof(double), table_plan_drop, slot);
    if (*slot < 0)
        *owned = mem;
    return mem;
}

static void table_lows_drop(void *v) { free(v); }

/* The low parts of plan's table rows (pe_plan_lows), for a correctly rounded
 * float64 fill: kept in the plan cache beside the plan, under the plan's key
 * with its own tag (a plan is a function of its key, and so are its low
 * parts), and counted in the cache's bytes.  Held (*slot >= 0; give it back
 * with pe_plans_release), or the caller's to free (*owned), or NULL: the fill
 * then evaluates the rows it needs.  A fill of a few rows (at most a quarter
 * of the table's B/2 + 1) does that when nothing is kept yet: it needs about as
 * many table rows as it has rows, and making every one would cost a one-row
 * call 60 times its own; a longer fill makes and keeps them, at most four times
 * what it would evaluate anyway. */
static const double *table_lows(const pe_spec *sp, const pe_rows *rq, int kind, const double *plan,
                                int *slot, double **owned) {
    int64_t H;
    table_key k;
    double *lows;
    *slot = -1;
    *owned = NULL;
    /* (only the accurate float64 writers read them; listed frequencies have no key) */
    if (!rq->accurate || rq->add || kind != PE_KIND_F64 || plan == NULL || rq->lows != NULL ||
        sp->wlist != NULL)
        return NULL;
    k = table_key_of(sp);
    k.tag = PE_PLAN_TABLE_LOWS;
    lows = (double *)pe_plans_find(&k, sizeof(k), slot);
    if (lows != NULL)
        return lows;
    H = pe_block_rows(sp->nf) / 2;
    if (rq->nseq * rq->S <= (H + 1) / 4)
        return NULL;
    /* made outside the lock (hundreds of microseconds); a racing thread may make
       the same, and then one copy is kept */
    lows = pe_plan_lows(sp, plan);
    if (lows == NULL)
        return NULL;
    lows =
        (double *)pe_plans_add(&k, sizeof(k), lows, (size_t)(2 * (H + 1) * sp->nf) * sizeof(double),
                               table_lows_drop, slot);
    if (*slot < 0)
        *owned = lows;
    return lows;
}

/* A fill of plan with the kept low parts of its rows where it can use them. */
static int fill_with_lows(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                          const pe_rows *rq, int num_threads, const double *plan,
                          pe_anchor_cache *ac, pe_poll_fn poll, void *poll_ctx) {
    int slot, err;
    double *owned;
    pe_rows r;
    /* (the common fill, not a correctly rounded float64 one, goes straight on:
       a one-row call's time is a few hundred instructions of setup) */
    if (!rq->accurate || kind != PE_KIND_F64)
        return pe_fill_run(out, kind, row_stride, sp, rq, num_threads, plan, ac, poll, poll_ctx);
    const double *lows = table_lows(sp, rq, kind, plan, &slot, &owned);
    if (lows != NULL) {
        r = *rq;
        r.lows = lows;
        rq = &r;
    }
    err = pe_fill_run(out, kind, row_stride, sp, rq, num_threads, plan, ac, poll, poll_ctx);
    pe_plans_release(slot);
    free(owned);
    return err;
}

typedef struct {
    double *out;
    int n, k;
} table_visit;

static void table_visit_one(void *ctx, const void *key, size_t len, int64_t refs) {
    table_visit *t = (table_visit *)ctx;
    table_key k;
    if (len != sizeof(k) || t->k >= t->n)
        return;
    memcpy(&k, key, sizeof(k));
    if (k.tag != PE_PLAN_TABLE)
        return;
    t->out[5 * t->k] = (double)k.nf;
    t->out[5 * t->k + 1] = k.w0;
    t->out[5 * t->k + 2] = k.base;
    t->out[5 * t->k + 3] = k.denom;
    t->out[5 * t->k + 4] = (double)refs;
    t->k += 1;
}

int pe_plan_cache_snapshot(double *out, int n) {
    table_visit t;
    t.out = out;
    t.n = n;
    t.k = 0;
    pe_plans_visit(table_visit_one, &t);
    return t.k;
}

int pe_fill_cached(void *out, int kind, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                   int num_threads) {
    int slot, err;
    double *owned;
    const double *plan;
    if (rq->nseq * rq->S == 0)
        return FASTPE_OK;
    plan = table_plan(sp, num_threads, &slot, &owned, &err);
    if (err != FASTPE_OK)
        return err;
    err = fill_with_lows(out, kind, row_stride, sp, rq, num_threads, plan, NULL, NULL, NULL);
    pe_plans_release(slot);
    free(owned);
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

/* The rows a fill writes: rows of width bytes, stride bytes apart (stride >=
 * width when rows > 1), the first at lo. */
typedef struct {
    uintptr_t lo;
    int64_t rows, stride, width;
} written_rows;

/* Whether the 8 bytes at p meet a row of o.  Rows ascend and never meet, so
 * only the last row starting at or below p's last byte can hold it. */
static int meets_rows(const written_rows *o, const char *p) {
    int64_t t = (int64_t)((uintptr_t)p - o->lo), i;
    if (t + 7 < 0)
        return 0;
    i = o->rows > 1 ? (t + 7) / o->stride : 0;
    i = i < o->rows - 1 ? i : o->rows - 1;
    return i * o->stride + o->width > t;
}

/* FASTPE_EOVERLAP (naming `name` and the element) when an element of an input
 * array lies inside a row written: decided on elements, not on address ranges,
 * so inputs stored between the rows (row_stride > d_model) are disjoint from
 * them.  Arrays apart from the rows are told at once; the others element by
 * element (the positions' range check reads each of them anyway). */
static int check_input_overlap(const written_rows *o, const void *p, int64_t nseq, int64_t S,
                               int64_t sb, int64_t ss, const char *name) {
    const char *lo, *hi;
    const uintptr_t ohi = o->lo + (uintptr_t)((o->rows - 1) * o->stride + o->width);
    if (p == NULL || !strided_span(p, nseq, S, sb, ss, &lo, &hi) || (uintptr_t)lo >= ohi ||
        (uintptr_t)hi <= o->lo)
        return FASTPE_OK;
    for (int64_t b = 0; b < nseq; b++) {
        for (int64_t t = 0; t < S; t++) {
            if (meets_rows(o, (const char *)p + 8 * (b * sb + t * ss)))
                return pe_fail(FASTPE_EOVERLAP, name, b * S + t, NAN, NAN);
        }
    }
    return FASTPE_OK;
}

/* Thread-local storage in each toolchain the library builds with (as status.c's
 * error detail). */
#if defined(_MSC_VER) && !defined(__clang__)
#define PE_API_TLS __declspec(thread)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PE_API_TLS _Thread_local
#else
#define PE_API_TLS __thread
#endif

/* The frequency checks of the last spec without a bound of its own that this
 * thread checked: whether its frequencies are finite and the largest position
 * they allow (pe_max_position: a double-double log and exp, most of a one-row
 * fastpe_fill_* call), kept for the next call of equal frequencies.  Per
 * thread: no lock, and nothing a fork() could leave half written for another
 * thread. */
typedef struct {
    int64_t nf; /* 0: empty */
    double w0, base, denom;
    int finite;
    double limit;
} limit_memo;
static PE_API_TLS limit_memo last_limit = {0, 0.0, 0.0, 0.0, 0, 0.0};

static int same_bits(double a, double b) { return memcmp(&a, &b, sizeof(a)) == 0; }

static const limit_memo *spec_limit(const pe_spec *sp) {
    limit_memo *m = &last_limit;
    /* (compared by their bits: -0.0 is not 0.0 here, as a zero denominator's sign
       is the sign of an infinite exponent) */
    if (sp->wlist == NULL && m->nf == sp->nf && m->nf != 0 && same_bits(m->w0, sp->w0) &&
        same_bits(m->base, sp->base) && same_bits(m->denom, sp->denom))
        return m;
    m->nf = 0;
    m->finite = pe_frequencies_finite(sp);
    m->limit = m->finite ? pe_max_position(sp) : NAN;
    if (sp->wlist == NULL) {
        m->w0 = sp->w0;
        m->base = sp->base;
        m->denom = sp->denom;
        m->nf = sp->nf;
    }
    return m;
}

int pe_check_fill(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                  const pe_rows *rq, const char *n_name) {
    return pe_check_fill_within(out, kind, row_stride, sp, rq, n_name, NAN);
}

int pe_check_fill_within(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                         const pe_rows *rq, const char *n_name, double max_position) {
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
    /* (one sequence always fits: no division on the one-row calls' path) */
    if (S > 0 && nseq > 1 && nseq > INT64_MAX / S)
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
    /* (a known bound is a spec handle's: its frequencies were checked when it was made) */
    const limit_memo *known = isnan(max_position) ? spec_limit(sp) : NULL;
    if (known != NULL && !known->finite)
        return pe_fail(FASTPE_EBASE, "base", -1, sp->base, NAN);
    if (rq->pos_f != NULL && (rq->offs != NULL || rq->offset != 0))
        return pe_fail(FASTPE_EINVAL, "offset", -1, (double)rq->offset, 0.0);
    /* |positions| * f_max must stay below 2^45 turns (exact quarter-turn
       reduction); this also keeps offset + position far from int64 overflow.
       One offset for all is checked even with no rows (it is an argument all
       the same); an offset and an integer position count apart. */
    const double limit = known != NULL ? known->limit : max_position;
    if (rq->offs == NULL && rq->pos_f == NULL && rq->pos_i == NULL) {
        double k = pe_extent(rq->offset, S);
        return k <= limit ? FASTPE_OK : pe_fail(FASTPE_ERANGE, "offset", -1, k, limit);
    }
    if (rows > 0 && kind != 0) {
        /* inputs inside the rows to be written would be read after being overwritten */
        const int64_t itemsize = kind == PE_KIND_F64 ? 8 : (kind == PE_KIND_F32 ? 4 : 2);
        /* (the stride of a single row is never used, and may be anything) */
        const written_rows o = {(uintptr_t)out, rows, rows > 1 ? row_stride * itemsize : 0,
                                sp->d * itemsize};
        const void *pos = rq->pos_f != NULL ? (const void *)rq->pos_f : (const void *)rq->pos_i;
        int err = check_input_overlap(&o, pos, nseq, S, rq->psb, rq->pss, "positions");
        if (err == FASTPE_OK)
            err = check_input_overlap(&o, rq->offs, 1, nseq, 0, rq->offs_stride, "offset");
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
                    void *poll_ctx, double max_position) {
    int slot = -1,
        err = pe_check_fill_within(out, kind, row_stride, sp, rq, "seq_len", max_position);
    double *owned = NULL;
    if (err != FASTPE_OK || rq->nseq * rq->S == 0)
        return pe_settle(err);
    if (plan == NULL) {
        plan = table_plan(sp, num_threads, &slot, &owned, &err);
        if (err != FASTPE_OK)
            return pe_settle(err);
    }
    err = fill_with_lows(out, kind, row_stride, sp, rq, num_threads, plan, ac, poll, poll_ctx);
    if (slot >= 0 || owned != NULL) {
        pe_plans_release(slot);
        free(owned);
    }
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
                           int num_threads, pe_poll_fn poll, void *ctx, int accurate) {
    pe_init();
    pe_spec sp = vaswani(d_model, base, layout);
    pe_rows rq;
    pe_init_rows(&rq, 1, seq_len, 0, 0);
    rq.offset = offset;
    rq.accurate = accurate;
    int err = pe_check_fill(out, kind, row_stride, &sp, &rq, "seq_len");
    if (err != FASTPE_OK || seq_len == 0)
        return err;
    if (poll != NULL) /* (a poll callback runs on its own plan: no cache entry held meanwhile) */
        return pe_fill_run(out, kind, row_stride, &sp, &rq, num_threads, NULL, NULL, poll, ctx);
    return pe_fill_cached(out, kind, row_stride, &sp, &rq, num_threads);
}

static int fill_table(void *out, int kind, int64_t seq_len, int64_t d_model, int64_t row_stride,
                      double base, int64_t offset, int layout, int num_threads, pe_poll_fn poll,
                      void *ctx, int accurate) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno,
                         fill_table_body(out, kind, seq_len, d_model, row_stride, base, offset,
                                         layout, num_threads, poll, ctx, accurate));
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
                      num_threads, NULL, NULL, 0);
}

FASTPE_API int fastpe_fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_F64, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL, 0);
}

FASTPE_API int fastpe_fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_F16, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL, 0);
}

FASTPE_API int fastpe_fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                                double base, int64_t offset, int layout, int num_threads) {
    return fill_table(out, PE_KIND_BF16, seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, NULL, NULL, 0);
}

FASTPE_API int fastpe_fill_poll_ex(void *out, int dtype, int64_t seq_len, int64_t d_model,
                                   int64_t row_stride, double base, int64_t offset, int layout,
                                   int rounding, int num_threads, fastpe_poll_fn poll, void *ctx) {
    static const int kinds[4] = {PE_KIND_F32, PE_KIND_F64, PE_KIND_F16, PE_KIND_BF16};
    if (dtype < 0 || dtype > 3)
        return pe_keep_errno(errno, pe_fail(FASTPE_EINVAL, "dtype", -1, (double)dtype, 3.0));
    if (rounding != PE_ROUND_DEFAULT && rounding != PE_ROUND_CORRECT)
        return pe_keep_errno(errno, pe_fail(FASTPE_EINVAL, "rounding", -1, (double)rounding,
                                            (double)PE_ROUND_CORRECT));
    return fill_table(out, kinds[dtype], seq_len, d_model, row_stride, base, offset, layout,
                      num_threads, poll, ctx, rounding == PE_ROUND_CORRECT);
}

FASTPE_API int fastpe_fill_poll(void *out, int dtype, int64_t seq_len, int64_t d_model,
                                int64_t row_stride, double base, int64_t offset, int layout,
                                int num_threads, fastpe_poll_fn poll, void *ctx) {
    return fastpe_fill_poll_ex(out, dtype, seq_len, d_model, row_stride, base, offset, layout,
                               PE_ROUND_DEFAULT, num_threads, poll, ctx);
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
