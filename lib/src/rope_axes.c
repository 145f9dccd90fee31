/*
 * Multi-axis RoPE (Qwen2-VL's mrope, 2-D and 3-D RoPE): each frequency follows
 * one coordinate of its token.  Each axis's angle rows are filled as a plain
 * encoding of its own frequencies, then scattered into the columns of the full
 * [sin | cos] row; the rotation is pe_rope_rotate's.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

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
    int64_t W = 2 * nf, nrows = pe_rope_rows_total(R, nR);
    double *table;
    int err;
    if (nrows < 0)
        return FASTPE_ESIZE;
    if (nrows == 0 || ntab == 0 || W == 0)
        return FASTPE_OK;
    table = (double *)malloc((size_t)(ntab * W) * sizeof(double));
    if (table == NULL)
        return FASTPE_ENOMEM;
    err = pe_rope_table_axes(table, PE_KIND_F64, nf, ntab, ax, n_axes, num_threads, poll, poll_ctx);
    if (err == FASTPE_OK)
        err = pe_rope_rotate_by(R, nR, table, nrows, W, num_threads, poll, poll_ctx);
    free(table);
    return err;
}
