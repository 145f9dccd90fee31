/*
 * The RoPE cache and rotation entry points for one entry type: included by
 * rope.c with ROPE_T (the element type), ROPE_SFX (f32, f64, f16, bf16) and
 * ROPE_KIND (PE_KIND_*) defined.  Every check comes before anything is
 * written, in the order of the capsule's functions (their error codes).
 */
#define ROPE_FN(name) PE_CAT(name, ROPE_SFX)

/* cos and sin rows 0 .. n-1 from the [sin | cos] table rt (entries of the output
 * type) or dt (float64, times the attention factor a). */
static void ROPE_FN(rope_cache_rows)(ROPE_T *cos, ROPE_T *sin, int64_t n, int64_t row_stride,
                                     int64_t nf, int half, const ROPE_T *rt, const double *dt,
                                     double a, int num_threads) {
    /* on as many threads as the fill: a thread's rows are still in its cache */
    int nt = pe_threads(num_threads, n, 2 * nf, -1);
    int64_t r;
    if (nt == 1) {
        for (r = 0; r < n; r++)
            ROPE_FN(pe_rope_cache_row)(cos, sin, r, row_stride, nf, half, rt, dt, a);
    } else {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (r = 0; r < n; r++)
            ROPE_FN(pe_rope_cache_row)(cos, sin, r, row_stride, nf, half, rt, dt, a);
    }
}

static int ROPE_FN(rope_cache_body)(const fastpe_rope *h, ROPE_T *cos, ROPE_T *sin, int64_t n,
                                    int64_t row_stride, const int64_t *positions, int64_t offset,
                                    int layout, int num_threads) {
    pe_rows rq;
    ROPE_T *rt = NULL;
    double *dt = NULL;
    int64_t nf, W;
    int err = rope_check(h), half;
    if (err == FASTPE_OK)
        err = pe_check_rounding(h->rounding, ROPE_KIND, "rope");
    if (err != FASTPE_OK)
        return err;
    if (n < 0)
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n, 0.0);
    if (layout != FASTPE_LAYOUT_INTERLEAVED && layout != FASTPE_LAYOUT_SPLIT)
        return pe_fail(FASTPE_ELAYOUT, "layout", -1, (double)layout, NAN);
    if (n == 0)
        return FASTPE_OK;
    nf = h->sp.nf;
    W = 2 * nf;
    half = layout == FASTPE_LAYOUT_SPLIT;
    if (cos == NULL || sin == NULL)
        return pe_fail(FASTPE_ENULL, cos == NULL ? "cos" : "sin", -1, NAN, NAN);
    if (row_stride < W && n > 1)
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride, (double)W);
    if (n > (INT64_MAX / 16) / W)
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n, (double)((INT64_MAX / 16) / W));
    /* (a one-row cache never uses its stride, whatever it is) */
    if (n > 1 && row_stride > (INT64_MAX / 16) / (n - 1))
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride,
                       (double)((INT64_MAX / 16) / (n - 1)));
    if (n == 1)
        row_stride = 0;
    if (pe_rope_rows_meet((const char *)cos, (const char *)sin, n,
                          row_stride * (int64_t)sizeof(ROPE_T), W * (int64_t)sizeof(ROPE_T)))
        return pe_fail(FASTPE_EOVERLAP, "sin", -1, NAN, NAN);
    err = rope_positions(h, &rq, 1, n, positions, offset);
    if (err != FASTPE_OK)
        return err;
    /* (correctly rounded: the fill applies the attention factor, one rounding) */
    rq.accurate = h->rounding == PE_ROUND_CORRECT;
    rq.scale = rq.accurate ? h->attention : 1.0;
    rq.lows = rq.accurate ? pe_rope_lows((struct fastpe_rope *)h) : NULL; /* (kept: see there) */
    /* as fastpe.rope_cache: each entry rounded once into the output type, from
       float64 when the attention factor is still to be applied */
    if (h->attention == 1.0 || rq.accurate) {
        rt = (ROPE_T *)malloc((size_t)(n * W) * sizeof(ROPE_T));
        if (rt == NULL)
            return FASTPE_ENOMEM;
        err = pe_fill_run(rt, ROPE_KIND, W, &h->sp, &rq, num_threads, h->plan, NULL, NULL, NULL);
    } else {
        dt = (double *)malloc((size_t)(n * W) * sizeof(double));
        if (dt == NULL)
            return FASTPE_ENOMEM;
        err = pe_fill_run(dt, PE_KIND_F64, W, &h->sp, &rq, num_threads, h->plan, NULL, NULL, NULL);
    }
    if (err == FASTPE_OK)
        ROPE_FN(rope_cache_rows)(cos, sin, n, row_stride, nf, half, rt, dt, h->attention,
                                 num_threads);
    free(rt);
    free(dt);
    return err;
}

int ROPE_FN(fastpe_rope_cache)(const fastpe_rope *h, ROPE_T *cos, ROPE_T *sin, int64_t n,
                               int64_t row_stride, const int64_t *positions, int64_t offset,
                               int layout, int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno,
                         ROPE_FN(rope_cache_body)(h, cos, sin, n, row_stride, positions, offset,
                                                  layout, num_threads));
}

/* R for the rows (b, s, h) of x, after the checks of fastpe_rope_apply_* up to
 * the positions' (in their order); FASTPE_OK with R->m = 0: nothing to rotate. */
static int ROPE_FN(rope_rows3)(pe_rope_rows *R, ROPE_T *x, int64_t batch, int64_t seq,
                               int64_t heads, int64_t stride_batch, int64_t stride_seq,
                               int64_t stride_head, int layout, int64_t nf, double attention) {
    int64_t W = 2 * nf;
    int64_t n3[3], st[3];
    int err;
    R->m = 0;
    if (batch < 0)
        return pe_fail(FASTPE_ESIZE, "batch", -1, (double)batch, 0.0);
    if (seq < 0)
        return pe_fail(FASTPE_ESIZE, "seq", -1, (double)seq, 0.0);
    if (heads < 0)
        return pe_fail(FASTPE_ESIZE, "heads", -1, (double)heads, 0.0);
    if (layout != FASTPE_LAYOUT_INTERLEAVED && layout != FASTPE_LAYOUT_SPLIT)
        return pe_fail(FASTPE_ELAYOUT, "layout", -1, (double)layout, NAN);
    if (batch == 0 || seq == 0 || heads == 0)
        return FASTPE_OK;
    if (x == NULL)
        return pe_fail(FASTPE_ENULL, "x", -1, NAN, NAN);
    if (batch > (INT64_MAX / 16) / seq || batch * seq > (INT64_MAX / 16) / heads ||
        batch * seq > (INT64_MAX / 16) / W) /* (the rows together: named by their count) */
        return pe_fail(FASTPE_ESIZE, "batch", -1, (double)batch, NAN);
    /* rotated in place: no two rows' rotated entries may share an element */
    n3[0] = batch, n3[1] = seq, n3[2] = heads;
    st[0] = stride_batch, st[1] = stride_seq, st[2] = stride_head;
    err = rope_rows_disjoint(n3, st, 3, W, rope_stride_names); /* (naming the one at fault) */
    if (err != FASTPE_OK)
        return err;
    /* the stride of an axis of one row is never used: 0, so that nothing below
       scales an arbitrary value (it may be INT64_MIN) */
    stride_batch = batch > 1 ? stride_batch : 0;
    stride_seq = seq > 1 ? stride_seq : 0;
    stride_head = heads > 1 ? stride_head : 0;
    {
        /* rows in the order of their memory: (batch, heads, seq) when heads are the
           outer axis, else (batch, seq, heads) */
        int64_t ah = stride_head >= 0 ? stride_head : -stride_head;
        int64_t as = stride_seq >= 0 ? stride_seq : -stride_seq;
        R->base = (char *)x;
        R->m = 3;
        R->shape[0] = batch, R->strides[0] = stride_batch * (int64_t)sizeof(ROPE_T);
        if (ah > as) {
            R->sa = 2;
            R->shape[1] = heads, R->strides[1] = stride_head * (int64_t)sizeof(ROPE_T);
        } else {
            R->sa = 1;
            R->shape[2] = heads, R->strides[2] = stride_head * (int64_t)sizeof(ROPE_T);
        }
        R->shape[R->sa] = seq, R->strides[R->sa] = stride_seq * (int64_t)sizeof(ROPE_T);
        R->kind = ROPE_KIND;
        R->half = layout == FASTPE_LAYOUT_SPLIT;
        R->S = seq;
        R->nf = nf;
        R->attention = attention;
    }
    return FASTPE_OK;
}

static int ROPE_FN(rope_apply_body)(const fastpe_rope *h, ROPE_T *x, int64_t batch, int64_t seq,
                                    int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                    int64_t stride_head, const int64_t *positions, int64_t offset,
                                    int layout, int num_threads) {
    pe_rows rq;
    pe_rope_rows R;
    pe_rope_rows *Rs = &R;
    int err = rope_check(h);
    if (err == FASTPE_OK) /* (every rounding: the correct one by pe_rope_run_cr) */
        err = pe_check_rounding(h->rounding, ROPE_KIND, "rope");
    if (err != FASTPE_OK)
        return err;
    err = ROPE_FN(rope_rows3)(&R, x, batch, seq, heads, stride_batch, stride_seq, stride_head,
                              layout, h->sp.nf, h->attention);
    if (err != FASTPE_OK || R.m == 0)
        return err;
    err = rope_positions(h, &rq, batch, seq, positions, offset);
    if (err != FASTPE_OK)
        return err;
    R.per_batch = rq.nseq > 1;
    if (h->rounding == PE_ROUND_CORRECT)
        return pe_rope_run_cr(&Rs, 1, &h->sp, &rq, num_threads, NULL, NULL);
    return pe_rope_run(&Rs, 1, &h->sp, &rq, num_threads, h->plan, NULL, NULL, NULL);
}

int ROPE_FN(fastpe_rope_apply)(const fastpe_rope *h, ROPE_T *x, int64_t batch, int64_t seq,
                               int64_t heads, int64_t stride_batch, int64_t stride_seq,
                               int64_t stride_head, const int64_t *positions, int64_t offset,
                               int layout, int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(
        saved_errno, ROPE_FN(rope_apply_body)(h, x, batch, seq, heads, stride_batch, stride_seq,
                                              stride_head, positions, offset, layout, num_threads));
}

static int ROPE_FN(rope_cache_axes_body)(const fastpe_rope *h, ROPE_T *cos, ROPE_T *sin, int64_t n,
                                         int64_t row_stride, const int64_t *positions, int layout,
                                         int num_threads) {
    pe_rope_axis ax[PE_ROPE_MAX_AXES];
    ROPE_T *rt = NULL;
    double *dt = NULL;
    int64_t nf, W;
    int nax = 0, err = rope_check_axes(h), accurate;
    if (err == FASTPE_OK)
        err = pe_check_rounding(h->rounding, ROPE_KIND, "rope");
    if (err != FASTPE_OK)
        return err;
    if (n < 0)
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n, 0.0);
    if (layout != FASTPE_LAYOUT_INTERLEAVED && layout != FASTPE_LAYOUT_SPLIT)
        return pe_fail(FASTPE_ELAYOUT, "layout", -1, (double)layout, NAN);
    if (n == 0)
        return FASTPE_OK;
    nf = h->sp.nf;
    W = 2 * nf;
    if (cos == NULL || sin == NULL)
        return pe_fail(FASTPE_ENULL, cos == NULL ? "cos" : "sin", -1, NAN, NAN);
    if (row_stride < W && n > 1)
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride, (double)W);
    if (n > (INT64_MAX / 16) / W / PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n,
                       (double)((INT64_MAX / 16) / W / PE_ROPE_MAX_AXES));
    /* (a one-row cache never uses its stride, whatever it is) */
    if (n > 1 && row_stride > (INT64_MAX / 16) / (n - 1))
        return pe_fail(FASTPE_ESTRIDE, "row_stride", -1, (double)row_stride,
                       (double)((INT64_MAX / 16) / (n - 1)));
    if (n == 1)
        row_stride = 0;
    if (pe_rope_rows_meet((const char *)cos, (const char *)sin, n,
                          row_stride * (int64_t)sizeof(ROPE_T), W * (int64_t)sizeof(ROPE_T)))
        return pe_fail(FASTPE_EOVERLAP, "sin", -1, NAN, NAN);
    err = rope_axes_of(h, ax, &nax, positions, n);
    if (err != FASTPE_OK)
        return err;
    accurate = h->rounding == PE_ROUND_CORRECT;
    for (int i = 0; i < nax; i++) {
        ax[i].rq.accurate = accurate;
        ax[i].rq.scale = accurate ? h->attention : 1.0;
    }
    /* as fastpe.rope_cache: each entry rounded once into the output type, from
       float64 when the attention factor is still to be applied */
    if (h->attention == 1.0 || accurate) {
        rt = (ROPE_T *)malloc((size_t)(n * W) * sizeof(ROPE_T));
        if (rt == NULL)
            return FASTPE_ENOMEM;
        err = pe_rope_table_axes(rt, ROPE_KIND, nf, n, ax, nax, num_threads, NULL, NULL);
    } else {
        dt = (double *)malloc((size_t)(n * W) * sizeof(double));
        if (dt == NULL)
            return FASTPE_ENOMEM;
        err = pe_rope_table_axes(dt, PE_KIND_F64, nf, n, ax, nax, num_threads, NULL, NULL);
    }
    if (err == FASTPE_OK)
        ROPE_FN(rope_cache_rows)(cos, sin, n, row_stride, nf, layout == FASTPE_LAYOUT_SPLIT, rt, dt,
                                 h->attention, num_threads);
    free(rt);
    free(dt);
    return err;
}

int ROPE_FN(fastpe_rope_cache_axes)(const fastpe_rope *h, ROPE_T *cos, ROPE_T *sin, int64_t n,
                                    int64_t row_stride, const int64_t *positions, int layout,
                                    int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(
        saved_errno,
        ROPE_FN(rope_cache_axes_body)(h, cos, sin, n, row_stride, positions, layout, num_threads));
}

static int ROPE_FN(rope_apply_axes_body)(const fastpe_rope *h, ROPE_T *x, int64_t batch,
                                         int64_t seq, int64_t heads, int64_t stride_batch,
                                         int64_t stride_seq, int64_t stride_head,
                                         const int64_t *positions, int layout, int num_threads) {
    pe_rope_axis ax[PE_ROPE_MAX_AXES];
    pe_rope_rows R;
    pe_rope_rows *Rs = &R;
    int nax = 0, err = rope_check_axes(h);
    if (err == FASTPE_OK)
        err = pe_check_rounding(h->rounding, 0, "rope");
    if (err != FASTPE_OK)
        return err;
    err = ROPE_FN(rope_rows3)(&R, x, batch, seq, heads, stride_batch, stride_seq, stride_head,
                              layout, h->sp.nf, h->attention);
    if (err != FASTPE_OK || R.m == 0)
        return err;
    if (batch * seq > (INT64_MAX / 16) / PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "batch", -1, (double)batch, NAN);
    err = rope_axes_of(h, ax, &nax, positions, batch * seq);
    if (err != FASTPE_OK)
        return err;
    R.per_batch = batch > 1;
    return pe_rope_run_axes(&Rs, 1, h->sp.nf, batch * seq, ax, nax, num_threads, NULL, NULL);
}

int ROPE_FN(fastpe_rope_apply_axes)(const fastpe_rope *h, ROPE_T *x, int64_t batch, int64_t seq,
                                    int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                    int64_t stride_head, const int64_t *positions, int layout,
                                    int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, ROPE_FN(rope_apply_axes_body)(
                                          h, x, batch, seq, heads, stride_batch, stride_seq,
                                          stride_head, positions, layout, num_threads));
}

#undef ROPE_FN
#undef ROPE_T
#undef ROPE_SFX
#undef ROPE_KIND
