/*
 * The row writers of one element type, PE_T (float, double, or the uint16_t
 * bits of a half), named with PE_SUFFIX (f32, f64, f16, bf16): included once
 * per type by pe_rows.h, which defines both, PE_PUT (a double to one stored
 * entry, rounded once), PE_GET (a stored entry's value as a double) and
 * PE_V512_ON (whether the AVX-512 writers of the type are in use), and PE_FN,
 * PE_SIN, PE_COS.  No include guard, on purpose.
 */

/* One row of interleaved pairs, rotated by a table angle of sign sg. */
PE_TARGET_CLONES
static void PE_FN(pe_pairs)(PE_T *PE_RESTRICT row, int64_t np, const double *PE_RESTRICT As,
                            const double *PE_RESTRICT Ac, const double *PE_RESTRICT Tm,
                            const double *PE_RESTRICT Ts, double sg) {
    int64_t h = pe_head(row, 2 * sizeof(PE_T), np), i;
    for (i = 0; i < h; i++) {
        row[2 * i] = PE_PUT(PE_SIN(i));
        row[2 * i + 1] = PE_PUT(PE_COS(i));
    }
    for (i = h; i < np; i++) {
        row[2 * i] = PE_PUT(PE_SIN(i));
        row[2 * i + 1] = PE_PUT(PE_COS(i));
    }
}

/* Pair i of the mirrored interleaved rows rp (+t) and rm (-t). */
PE_INLINE void PE_FN(pe_pairs2_at)(PE_T *PE_RESTRICT rp, PE_T *PE_RESTRICT rm, int64_t i,
                                   const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,
                                   const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts) {
    double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i];
    double p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
    rp[2 * i] = PE_PUT(As[i] + (p1 + p2));
    rp[2 * i + 1] = PE_PUT(Ac[i] + (p3 - p4));
    rm[2 * i] = PE_PUT(As[i] + (p1 - p2));
    rm[2 * i + 1] = PE_PUT(Ac[i] + (p3 + p4));
}

PE_TARGET_CLONES
static void PE_FN(pe_pairs2)(PE_T *PE_RESTRICT rp, PE_T *PE_RESTRICT rm, int64_t np,
                             const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,
                             const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts) {
    int64_t h = pe_head(rp, 2 * sizeof(PE_T), np), i;
    for (i = 0; i < h; i++)
        PE_FN(pe_pairs2_at)(rp, rm, i, As, Ac, Tm, Ts);
    for (i = h; i < np; i++)
        PE_FN(pe_pairs2_at)(rp, rm, i, As, Ac, Tm, Ts);
}

/* One split row: sines to rs, cosines to rc. */
PE_TARGET_CLONES
static void PE_FN(pe_split)(PE_T *PE_RESTRICT rs, PE_T *PE_RESTRICT rc, int64_t n,
                            const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,
                            const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts, double sg) {
    int64_t h = pe_head(rs, sizeof(PE_T), n), i;
    for (i = 0; i < h; i++) {
        rs[i] = PE_PUT(PE_SIN(i));
        rc[i] = PE_PUT(PE_COS(i));
    }
    for (i = h; i < n; i++) {
        rs[i] = PE_PUT(PE_SIN(i));
        rc[i] = PE_PUT(PE_COS(i));
    }
}

/* Frequency i of the mirrored split rows (rsp, rcp) at +t and (rsm, rcm) at -t. */
PE_INLINE void PE_FN(pe_split2_at)(PE_T *PE_RESTRICT rsp, PE_T *PE_RESTRICT rcp,
                                   PE_T *PE_RESTRICT rsm, PE_T *PE_RESTRICT rcm, int64_t i,
                                   const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,
                                   const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts) {
    double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i];
    double p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
    rsp[i] = PE_PUT(As[i] + (p1 + p2));
    rcp[i] = PE_PUT(Ac[i] + (p3 - p4));
    rsm[i] = PE_PUT(As[i] + (p1 - p2));
    rcm[i] = PE_PUT(Ac[i] + (p3 + p4));
}

PE_TARGET_CLONES
static void PE_FN(pe_split2)(PE_T *PE_RESTRICT rsp, PE_T *PE_RESTRICT rcp, PE_T *PE_RESTRICT rsm,
                             PE_T *PE_RESTRICT rcm, int64_t n, const double *PE_RESTRICT As,
                             const double *PE_RESTRICT Ac, const double *PE_RESTRICT Tm,
                             const double *PE_RESTRICT Ts) {
    int64_t h = pe_head(rsp, sizeof(PE_T), n), i;
    for (i = 0; i < h; i++)
        PE_FN(pe_split2_at)(rsp, rcp, rsm, rcm, i, As, Ac, Tm, Ts);
    for (i = h; i < n; i++)
        PE_FN(pe_split2_at)(rsp, rcp, rsm, rcm, i, As, Ac, Tm, Ts);
}

/* The few columns the vector loops leave: an odd width's lone sine, the longer
 * block of a split layout, the no-encoding column.  `zero` is what that column
 * gets: 0.0, or -0.0 in a row that will be added (x + -0.0 == x for every x,
 * including x = -0.0). */
PE_INLINE void PE_FN(pe_row_rest)(PE_T *row, const pe_spec *sp, double zero, const double *As,
                                  const double *Ac, const double *Tm, const double *Ts, double sg) {
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        if (sp->lone_sin)
            row[sp->d - 1] = PE_PUT(PE_SIN(sp->npairs));
    } else {
        int64_t n = pe_split_pairs(sp);
        for (int64_t i = n; i < sp->ns; i++)
            row[sp->s_off + i] = PE_PUT(PE_SIN(i));
        for (int64_t i = n; i < sp->nc; i++)
            row[sp->c_off + i] = PE_PUT(PE_COS(i));
    }
    if (sp->zero_col >= 0)
        row[sp->zero_col] = PE_PUT(zero);
}

/* One row by the AVX-512 writers, all but the columns pe_row_rest writes: 1 if
 * done, 0 if the caller must write it another way. */
PE_INLINE int PE_FN(pe_row1_v512)(PE_T *row, const pe_spec *sp, const double *As, const double *Ac,
                                  const double *Tm, const double *Ts, double sg) {
#if PE_HAVE_V512
    if (!PE_V512_ON)
        return 0;
    if (sp->layout == PE_LAYOUT_INTERLEAVED)
        return PE_FN(pe_v512_row_interleaved)(row, row, sp->npairs, As, Ac, Tm, Ts, sg);
    return PE_FN(pe_v512_row_split)(row + sp->s_off, row + sp->c_off, pe_split_pairs(sp), As, Ac,
                                    Tm, Ts, sg);
#else
    (void)row;
    (void)sp;
    (void)As;
    (void)Ac;
    (void)Tm;
    (void)Ts;
    (void)sg;
    return 0;
#endif
}

/* Rows rp (+t) and rm (-t) by the AVX-512 writers, streaming stores if stream;
 * 1 if done, 0 if the caller must write them another way. */
PE_INLINE int PE_FN(pe_row2_v512)(PE_T *rp, PE_T *rm, const pe_spec *sp, const double *As,
                                  const double *Ac, const double *Tm, const double *Ts,
                                  int stream) {
#if PE_HAVE_V512
    int ok;
    if (!PE_V512_ON)
        return 0;
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        ok = PE_FN(pe_v512_pair_interleaved)(rp, rp, rm, rm, sp->npairs, As, Ac, Tm, Ts, stream);
    } else {
        ok = PE_FN(pe_v512_pair_split)(rp + sp->s_off, rp + sp->c_off, rm + sp->s_off,
                                       rm + sp->c_off, pe_split_pairs(sp), As, Ac, Tm, Ts, stream);
    }
    if (!ok)
        return 0;
    PE_FN(pe_row_rest)(rp, sp, 0.0, As, Ac, Tm, Ts, 1.0);
    PE_FN(pe_row_rest)(rm, sp, 0.0, As, Ac, Tm, Ts, -1.0);
    return 1;
#else
    (void)rp;
    (void)rm;
    (void)sp;
    (void)As;
    (void)Ac;
    (void)Tm;
    (void)Ts;
    (void)stream;
    return 0;
#endif
}

/* One row: the anchor (As, Ac) rotated by the table row (Tm, Ts*sg), by the
 * AVX-512 writer where there is one (same bits). */
PE_INLINE void PE_FN(pe_row)(PE_T *row, const pe_spec *sp, double zero, const double *As,
                             const double *Ac, const double *Tm, const double *Ts, double sg) {
    if (!PE_FN(pe_row1_v512)(row, sp, As, Ac, Tm, Ts, sg)) {
        if (sp->layout == PE_LAYOUT_INTERLEAVED) {
            PE_FN(pe_pairs)(row, sp->npairs, As, Ac, Tm, Ts, sg);
        } else {
            PE_FN(pe_split)(row + sp->s_off, row + sp->c_off, pe_split_pairs(sp), As, Ac, Tm, Ts,
                            sg);
        }
    }
    PE_FN(pe_row_rest)(row, sp, zero, As, Ac, Tm, Ts, sg);
}

/* Two rows: rp rotated by +t, rm by -t (bitwise what pe_row gives each). */
PE_INLINE void PE_FN(pe_row2)(PE_T *rp, PE_T *rm, const pe_spec *sp, double zero, const double *As,
                              const double *Ac, const double *Tm, const double *Ts) {
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        PE_FN(pe_pairs2)(rp, rm, sp->npairs, As, Ac, Tm, Ts);
    } else {
        PE_FN(pe_split2)(rp + sp->s_off, rp + sp->c_off, rm + sp->s_off, rm + sp->c_off,
                         pe_split_pairs(sp), As, Ac, Tm, Ts);
    }
    PE_FN(pe_row_rest)(rp, sp, zero, As, Ac, Tm, Ts, 1.0);
    PE_FN(pe_row_rest)(rm, sp, zero, As, Ac, Tm, Ts, -1.0);
}

/* A row whose encoding is all zeros (fairseq's padding position). */
PE_INLINE void PE_FN(pe_zero_row)(PE_T *row, int64_t d, double zero) {
    for (int64_t x = 0; x < d; x++)
        row[x] = PE_PUT(zero);
}

/* The fused add: x = x*scale + pe, pe a finished row in double, so x is rounded
 * once (the same value a float64 table added in float64 would give).  Four
 * lines of x at a time, first asking for the four lines PE_ADD_AHEAD bytes on:
 * with pe coming from L2 (a blocked add), the hardware prefetchers alone leave
 * the loop waiting on x (docs/performance.md). */
PE_TARGET_CLONES PE_MAYBE_UNUSED static void
PE_FN(pe_add_row)(PE_T *PE_RESTRICT x, const double *PE_RESTRICT pe, int64_t n, double scale) {
    const int64_t chunk = 256 / (int64_t)sizeof(PE_T);
    int64_t h = pe_head(x, sizeof(PE_T), n), i, k, e;
    for (i = 0; i < h; i++)
        x[i] = PE_PUT(PE_GET(x[i]) * scale + pe[i]);
    for (; i < n; i = e) {
        e = n - i > chunk ? i + chunk : n;
        for (k = 0; k < 256; k += 64)
            pe_prefetch_x((uintptr_t)(x + i) + PE_ADD_AHEAD + (uintptr_t)k);
        for (k = i; k < e; k++)
            x[k] = PE_PUT(PE_GET(x[k]) * scale + pe[k]);
    }
}

#undef PE_T
#undef PE_SUFFIX
#undef PE_PUT
#undef PE_GET
#undef PE_V512_ON
