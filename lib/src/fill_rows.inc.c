/*
 * The fill driver's per-type part, included by fill.c once per entry type
 * (float32, float64, float16, bfloat16) with DRV_T (the element type),
 * DRV_SFX (the row writers' suffix: f32, f64, f16, bf16) and DRV_FN(name)
 * defined.  One definition, so the four types cannot drift apart.
 *
 * Integer positions K use the block decomposition K = c + j: an accurately
 * evaluated anchor row at the centre c of K's block (pe_centre), rotated by
 * table row |j| (sign of j); position 0 is evaluated directly (exact).  Every
 * entry is a pure function of (K, column): no dependence on the thread count,
 * on the chunk a row came in, or on the path (mirrored pair, single row,
 * explicit positions) that wrote it.  Non-integer positions are evaluated
 * directly.
 */

#define DRV_W(name) PE_CAT(name, DRV_SFX)

#if !DRV_DD
/*
 * The correctly rounded 16/32-bit rows (rq->accurate): a writer of their own,
 * so the default writers' code and bits stay as they are.  Each entry's double
 * v is computed as the default writers compute it, then tested: where v - e
 * and v + e (e its error bound) round to the same entry, every real number
 * between them does too (rounding is monotonic), the real value among them, so
 * that entry is the correctly rounded one; else (about one entry in 2^22 for
 * float32, far fewer for the halves) the entry comes from the exact path
 * (pe_entry_exact, counted by pe_cr_exact_runs).
 *
 * The bound: a sine v = As + (As Tm + Ac Ts) (a cosine alike, As and Ac
 * swapped) is within PE_CR_ROT_ERR (|As| + |Ac Ts|) + dl of the real sine of
 * its angle.  With u = 2^-53: the anchor's sine and cosine are within 2u of
 * their own size plus the angle's error (pe_sincos.h: the polynomial and the
 * final sum, each rounded once), the table's within 3u (one composition of two
 * such rows), the products and the two sums add u each of |As Tm| <= 2|As|,
 * |Ac Ts| and |v| <= 3|As| + |Ac Ts|: below 16u (|As| + |Ac Ts|) in all.
 * 32u leaves a factor of two, which also covers the rounding of v - e and
 * v + e.  dl = (|anchor| + |j|) ferr bounds what the angles' own error adds
 * (0 at position 0, evaluated exactly).
 */
#ifndef PE_CR_ROT_ERR
#define PE_CR_ROT_ERR 3.552713678800501e-15 /* 2^-48 */
#endif

/* Entry (i, cosine) of the row at position K: v (error bound e) times the
 * fill's factor, rounded once. */
PE_INLINE DRV_T DRV_FN(cr_entry)(const pe_ctx *c, double v, double e, double K, int64_t i,
                                 int cosine) {
    const pe_spec *sp = c->sp;
    if (c->scale != 1.0) {
        /* the product's own rounding: half an ulp of it, with room */
        v *= c->scale;
        e = e * fabs(c->scale) * (1.0 + 9.094947017729282e-13 /* 2^-40 */) +
            fabs(v) * 2.220446049250313e-16 /* 2^-52 */;
    }
    if (DRV_BITS(DRV_PUT(v - e)) == DRV_BITS(DRV_PUT(v + e)) && !pe_cr_forced())
        return DRV_PUT(v);
    return DRV_PUT(pe_entry_exact(K, i, sp->w0, sp->base, sp->denom, sp->wlist, cosine, c->scale,
                                  DRV_PREC, DRV_EMIN));
}

/* Frequencies 0 .. n-1 of a row, tested: sines to rs, cosines to rc, step
 * entries apart, each the rounding of its double; nonzero where one of them is
 * undecided (then cr_row writes the row again).  Branch-free, so the compiler
 * can vectorise it. */
PE_TARGET_CLONES
static unsigned DRV_FN(cr_run)(DRV_T *PE_RESTRICT rs, DRV_T *PE_RESTRICT rc, int64_t step,
                               int64_t n, const double *PE_RESTRICT As,
                               const double *PE_RESTRICT Ac, const double *PE_RESTRICT Tm,
                               const double *PE_RESTRICT Ts, double sg, double dl) {
    unsigned f = 0;
    for (int64_t i = 0; i < n; i++) {
        double vs = PE_SIN(i), vc = PE_COS(i);
        double es = PE_CR_ROT_ERR * (fabs(As[i]) + fabs(Ac[i] * Ts[i])) + dl;
        double ec = PE_CR_ROT_ERR * (fabs(Ac[i]) + fabs(As[i] * Ts[i])) + dl;
        rs[i * step] = DRV_PUT(vs);
        rc[i * step] = DRV_PUT(vc);
        f |= (unsigned)(DRV_BITS(DRV_PUT(vs - es)) ^ DRV_BITS(DRV_PUT(vs + es))) |
             (unsigned)(DRV_BITS(DRV_PUT(vc - ec)) ^ DRV_BITS(DRV_PUT(vc + ec)));
    }
    return f;
}

/* The row at position K: the anchor (As, Ac) rotated by the table row (Tm,
 * Ts sg), every entry tested; dl the angles' error (above).  The paired
 * frequencies go through cr_run; the rest (an odd width's lone sine, a split
 * layout's longer half), a row cr_run flagged, a factor other than 1 and the
 * forced exact path entry by entry. */
static void DRV_FN(cr_row)(DRV_T *row, const pe_ctx *c, double K, const double *As,
                           const double *Ac, const double *Tm, const double *Ts, double sg,
                           double dl, double zero) {
    const pe_spec *sp = c->sp;
    int inter = sp->layout == PE_LAYOUT_INTERLEAVED;
    int64_t ns = inter ? sp->npairs + (sp->lone_sin ? 1 : 0) : sp->ns;
    int64_t nc = inter ? sp->npairs : sp->nc, i, first = 0;
    if (c->scale == 1.0 && !pe_cr_forced()) {
        int64_t n = inter ? sp->npairs : pe_split_pairs(sp);
        unsigned f =
            inter ? DRV_FN(cr_run)(row, row + 1, 2, n, As, Ac, Tm, Ts, sg, dl)
                  : DRV_FN(cr_run)(row + sp->s_off, row + sp->c_off, 1, n, As, Ac, Tm, Ts, sg, dl);
        first = f != 0 ? 0 : n;
    }
    for (i = first; i < ns; i++) {
        double e = PE_CR_ROT_ERR * (fabs(As[i]) + fabs(Ac[i] * Ts[i])) + dl;
        int64_t col = inter ? (i < sp->npairs ? 2 * i : sp->d - 1) : sp->s_off + i;
        row[col] = DRV_FN(cr_entry)(c, PE_SIN(i), e, K, i, 0);
    }
    for (i = first; i < nc; i++) {
        double e = PE_CR_ROT_ERR * (fabs(Ac[i]) + fabs(As[i] * Ts[i])) + dl;
        int64_t col = inter ? 2 * i + 1 : sp->c_off + i;
        row[col] = DRV_FN(cr_entry)(c, PE_COS(i), e, K, i, 1);
    }
    if (sp->zero_col >= 0)
        row[sp->zero_col] = DRV_PUT(zero);
}
#endif

#if DRV_DD
/* The accurate rows at centre + a (rp) and centre - a (rm), either NULL, of
 * the double-double anchor in ev (pe_rows_dd.h); pos: the centre or a
 * position within a block of it. */
static void DRV_FN(write_dd)(double *rp, double *rm, const pe_ctx *c, const double *ev, int64_t a,
                             double pos, double zero) {
    pe_ddrot R = pe_ddrot_of(c, ev, a, pos);
    /* (the forced exact path: every entry through it, for the tests; a factor
       other than 1: every entry from the fix-up, which applies it) */
    int all = pe_cr_forced();
    if (pe_dd_rows(rp, rm, c->sp, &R) || all || c->scale != 1.0) {
        if (rp != NULL)
            pe_dd_fix(rp, c->sp, &R, 1.0, a == 0 ? pos : pos + (double)a, all, c->scale);
        if (rm != NULL)
            pe_dd_fix(rm, c->sp, &R, -1.0, pos - (double)a, all, c->scale);
    }
    if (c->sp->zero_col >= 0) {
        if (rp != NULL)
            rp[c->sp->zero_col] = zero;
        if (rm != NULL)
            rm[c->sp->zero_col] = zero;
    }
}
#endif

/*
 * The correctly rounded add (c->cradd): x scale + P rounded once into x's
 * type, P an entry of pe_acc_row's double-double row (within E of the exact
 * one).  The product x scale is exact as a double-double (pe_dd_prod) while
 * |x|, |scale| <= 2^995 and |x scale| >= 2^-960 (or 0); it is summed with P by
 * two exact sums and two rounded ones, each off by at most 2^-53 of its
 * result (2^-52 taken).  Where the probes n - d and n + d round to the same
 * entry, every real number between them does too, the exact sum among them,
 * so that entry is the correctly rounded one; d covers the bound and the
 * probes' own roundings (2^-104 of n for float64, 2^-51 for the narrower
 * types, whose probes are doubles rounded again).  An exact 0 (x scale = -P,
 * both exact) gets the sign IEEE addition gives it; the rest (undecided, out
 * of that range) take the exact path.  x not finite: the double sum.
 */
#if DRV_DD
#define DRV_CRA_MARGIN 4.930380657631324e-32 /* 2^-104 */
#else
#define DRV_CRA_MARGIN 4.440892098500626e-16 /* 2^-51 */
#endif

/* Entries 0 .. n-1 of a row of x (xs) into res, each tested; nonzero where
 * one is undecided.  Branch-free, so the compiler can vectorise it. */
PE_TARGET_CLONES
static unsigned DRV_FN(cra_run)(DRV_T *PE_RESTRICT res, const DRV_T *PE_RESTRICT xs, int64_t n,
                                double scale, const double *PE_RESTRICT hi,
                                const double *PE_RESTRICT lo, const double *PE_RESTRICT er) {
    unsigned f = 0;
    for (int64_t k = 0; k < n; k++) {
        double x = DRV_GET(xs[k]), h = hi[k];
        pe_dd p = pe_dd_prod(x, scale);
        int ok =
            (fabs(x) <= 3.3484643974570854e+299 /* 2^995 */) &
            (fabs(scale) <= 3.3484643974570854e+299) &
            ((fabs(p.hi) >= 1.0261342003245941e-289 /* 2^-960 */) | (x == 0.0) | (scale == 0.0));
        pe_dd s1 = pe_two_sum(p.hi, h);
        double t = p.lo + lo[k], s2 = s1.lo + t;
        pe_dd n2 = pe_two_sum(s1.hi, s2);
        double err = er[k] + 2.220446049250313e-16 /* 2^-52 */ * (fabs(t) + fabs(s2));
        double d = err * (1.0 + 9.094947017729282e-13 /* 2^-40 */) + DRV_CRA_MARGIN * fabs(n2.hi);
        int zero = (n2.hi == 0.0) & (err == 0.0) & (t == 0.0) & (s2 == 0.0);
        DRV_T r = zero ? DRV_PUT(p.hi + h) : DRV_PUT(n2.hi);
        unsigned u = (unsigned)(DRV_BITS(DRV_PUT(n2.hi + (n2.lo - d))) !=
                                DRV_BITS(DRV_PUT(n2.hi + (n2.lo + d)))) |
                     (unsigned)((n2.hi == 0.0) & !zero);
        res[k] = ok ? r : DRV_PUT(x * scale + h);
        /* (x out of range but finite: the exact path) */
        f |= ((unsigned)(ok & !zero) & u) | (unsigned)(!ok & (fabs(x) <= DBL_MAX));
    }
    return f;
}

/* Row x (position K; none: no encoding) of a correctly rounded add, P's row
 * in hi, lo, er (pe_acc_row), res a row of scratch: the row tested as a whole,
 * then, where an entry was undecided (or the exact path is forced), entry by
 * entry with the undecided ones from pe_add_exact. */
static void DRV_FN(cra_row)(DRV_T *x, const pe_ctx *c, const double *hi, const double *lo,
                            const double *er, double K, int none, DRV_T *res) {
    const pe_spec *sp = c->sp;
    double scale = c->rq->scale;
    int64_t D = sp->d;
    int forced = pe_cr_forced();
    if (DRV_FN(cra_run)(res, x, D, scale, hi, lo, er) == 0 && !forced) {
        memcpy(x, res, (size_t)D * sizeof(DRV_T));
        return;
    }
    for (int64_t k = 0; k < D; k++) {
        DRV_T r;
        double xv = DRV_GET(x[k]);
        if (DRV_FN(cra_run)(&r, &x[k], 1, scale, hi + k, lo + k, er + k) != 0 ||
            (forced && fabs(xv) <= DBL_MAX)) {
            int64_t i = 0;
            int entry = none ? -1 : pe_col_entry(sp, k, &i);
            r = DRV_PUT(pe_add_exact(xv, scale, K, i, sp->w0, sp->base, sp->denom, sp->wlist, entry,
                                     DRV_PREC, DRV_EMIN));
        }
        x[k] = r;
    }
}
#undef DRV_CRA_MARGIN

/* Row at centre + j of the anchor in ev: rotated by table row |j|, sign of j
 * (through buf when streaming); pos: its position. */
PE_INLINE void DRV_FN(write_one)(DRV_T *dest, const pe_ctx *c, const double *ev, int64_t j,
                                 DRV_T *buf, int stream, double zero, double pos) {
    int64_t a = j >= 0 ? j : -j;
    DRV_T *row = stream ? buf : dest;
    double sg = j >= 0 ? 1.0 : -1.0;
#if DRV_DD
    if (c->dd) {
        DRV_FN(write_dd)(j >= 0 ? row : NULL, j >= 0 ? NULL : row, c, ev, a, pos, zero);
    } else
#else
    if (c->cr) {
        DRV_FN(cr_row)(row, c, pos + (double)j, ev, ev + c->nf, c->Tm + a * c->nf,
                       c->Ts + a * c->nf, sg, (fabs(pos) + (double)a) * c->ferr, zero);
    } else
#endif
        DRV_W(pe_row)(row, c->sp, zero, ev, ev + c->nf, c->Tm + a * c->nf, c->Ts + a * c->nf, sg);
    (void)pos;
    if (stream)
        pe_stream_copy(dest, row, (size_t)c->sp->d * sizeof(DRV_T));
}

/* The row of integer position K, alone.  Position 0 is evaluated directly, so
 * it is exact (sines 0, cosines 1), not the rotation of its block's anchor (ev
 * then no longer holds an anchor: *cached is reset). */
PE_INLINE void DRV_FN(write_at)(DRV_T *dest, const pe_ctx *c, int64_t K, double *ev,
                                int64_t *cached, DRV_T *buf, int stream, double zero) {
    if (K == 0) {
        pe_direct_row(c, 0.0, ev);
        *cached = INT64_MIN;
        DRV_FN(write_one)(dest, c, ev, 0, buf, stream, zero, 0.0);
        return;
    }
    pe_anchor_row(c, K, ev, cached);
    DRV_FN(write_one)(dest, c, ev, K - *cached, buf, stream, zero, (double)*cached);
}

/* The encoding of the position of row (b, s) -> row.  ev: this thread's
 * anchor scratch (3 nf), *cached: the anchor position it holds. */
PE_INLINE void DRV_FN(encode_row)(DRV_T *row, const pe_ctx *c, int64_t b, int64_t s, double *ev,
                                  int64_t *cached, double zero) {
    const pe_rows *rq = c->rq;
    int64_t K;
    if (rq->pos_f != NULL) {
        double Kf = rq->pos_f[b * rq->psb + s * rq->pss];
        if (Kf != floor(Kf)) {
            /* a fractional position: evaluate the row directly, then "rotate" it
               by table row 0, which is exactly (0, 0) */
            pe_direct_row(c, Kf, ev);
            *cached = INT64_MIN;
            DRV_FN(write_one)(row, c, ev, 0, NULL, 0, zero, Kf);
            return;
        }
        K = (int64_t)Kf;
    } else {
        K = pe_int_position(rq, b, s);
    }
    if (rq->has_zero_pos && K == rq->zero_pos) {
        DRV_W(pe_zero_row)(row, c->sp->d, zero);
        return;
    }
    DRV_FN(write_at)(row, c, K, ev, cached, NULL, 0, zero);
}

/* Rows rp (centre + j) and rm (centre - j), j > 0. */
PE_INLINE void DRV_FN(write_pair)(DRV_T *out, int64_t row_stride, int64_t rp, int64_t rm,
                                  const pe_ctx *c, const double *ev, int64_t j, DRV_T *buf,
                                  int stream) {
    int64_t D = c->sp->d;
    const double *Tm = c->Tm + j * c->nf;
    const double *Ts = c->Ts + j * c->nf;
#if DRV_DD
    if (c->dd) {
        double *p = stream ? buf : out + rp * row_stride;
        double *m = stream ? buf + D : out + rm * row_stride;
        DRV_FN(write_dd)(p, m, c, ev, j, (double)(rp + c->rq->offset - j), 0.0);
        if (stream) {
            pe_stream_copy(out + rp * row_stride, p, (size_t)D * sizeof(DRV_T));
            pe_stream_copy(out + rm * row_stride, m, (size_t)D * sizeof(DRV_T));
        }
        return;
    }
#else
    if (c->cr) {
        double centre = (double)(rp + c->rq->offset - j), dl = (fabs(centre) + (double)j) * c->ferr;
        DRV_T *p = stream ? buf : out + rp * row_stride;
        DRV_T *m = stream ? buf + D : out + rm * row_stride;
        DRV_FN(cr_row)(p, c, centre + (double)j, ev, ev + c->nf, Tm, Ts, 1.0, dl, 0.0);
        DRV_FN(cr_row)(m, c, centre - (double)j, ev, ev + c->nf, Tm, Ts, -1.0, dl, 0.0);
        if (stream) {
            pe_stream_copy(out + rp * row_stride, p, (size_t)D * sizeof(DRV_T));
            pe_stream_copy(out + rm * row_stride, m, (size_t)D * sizeof(DRV_T));
        }
        return;
    }
#endif
    /* the AVX-512 writers where the CPU has them (streaming: straight from registers) */
    if (DRV_W(pe_row2_v512)(out + rp * row_stride, out + rm * row_stride, c->sp, ev, ev + c->nf, Tm,
                            Ts, stream))
        return;
    DRV_T *p = stream ? buf : out + rp * row_stride;
    DRV_T *m = stream ? buf + D : out + rm * row_stride;
    DRV_W(pe_row2)(p, m, c->sp, 0.0, ev, ev + c->nf, Tm, Ts);
    if (stream) {
        pe_stream_copy(out + rp * row_stride, p, (size_t)D * sizeof(DRV_T));
        pe_stream_copy(out + rm * row_stride, m, (size_t)D * sizeof(DRV_T));
    }
}

/* Contiguous rows 0..N-1 (positions off + r), block by block.  Rows centre+j
 * and centre-j share their table row and its four products, so they are written
 * together (bitwise as if alone).  Within a block the rows are taken in the
 * order centre, (centre+1, centre-1), (centre+2, centre-2), ..., centre-B/2;
 * blocks follow each other in memory order, so a block's first unit (a pair or a
 * single row) has the index "rows before the block".  This thread writes the
 * units whose index is in lo .. hi-1: the threads split the work into equal row
 * counts without splitting a pair (which would leave two single rows). */
static void DRV_FN(fill_blocks)(DRV_T *out, int64_t row_stride, const pe_ctx *c, int64_t off,
                                int64_t N, int64_t lo, int64_t hi, double *ev, int64_t *cached,
                                DRV_T *buf, int stream) {
    int64_t B = c->B;
    int64_t H = c->B / 2;
    int64_t centre = pe_centre(off + lo, B); /* the block holding row lo */
    while (centre - H <= off + N - 1) {
        int64_t first = centre - H > off ? centre - H : off; /* its positions in the fill */
        int64_t last = centre + H - 1 < off + N - 1 ? centre + H - 1 : off + N - 1;
        int64_t idx = first - off;
        if (idx >= hi)
            break;
        for (int64_t j = 0; j < H + 1; j++) {
            int has_p = j < H && first <= centre + j && centre + j <= last;
            int has_m = j > 0 && first <= centre - j && centre - j <= last;
            if (!(has_p || has_m))
                continue;
            if (idx >= hi)
                break;
            if (idx >= lo) {
                if (has_p && has_m) {
                    pe_anchor_row(c, centre, ev, cached);
                    DRV_FN(write_pair)(out, row_stride, centre + j - off, centre - j - off, c, ev,
                                       j, buf, stream);
                } else {
                    int64_t K = has_p ? centre + j : centre - j;
                    DRV_FN(write_at)(out + (K - off) * row_stride, c, K, ev, cached, buf, stream,
                                     0.0);
                }
            }
            idx += (has_p && has_m) ? 2 : 1;
        }
        centre += B;
    }
}

/* The blocked add of units u_lo .. u_hi-1, each unit one (block, sequence)
 * pair: a block's rows are encoded once into blk (float64, in L2) and added to
 * the part of every sequence of the range that uses it, so x is read and written
 * in long contiguous runs.  Consecutive units of one block share its rows. */
static void DRV_FN(add_blocked)(DRV_T *out, int64_t row_stride, pe_fill *f, int64_t u_lo,
                                int64_t u_hi, double *ev, int64_t *cached, double *blk) {
    const pe_ctx *c = &f->c;
    const pe_rows *rq = c->rq;
    const pe_spec *sp = c->sp;
    int64_t D = sp->d, S = rq->S, nb = f->nb;
    int64_t lo = 0, hi = f->nblk - 1, n, u = u_lo;
    /* the block holding unit u_lo: the last n with cum[n] <= u_lo */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (f->cum[mid] <= u_lo)
            lo = mid;
        else
            hi = mid - 1;
    }
    for (n = lo; u < u_hi; n++) {
        int64_t end = f->cum[n + 1] < u_hi ? f->cum[n + 1] : u_hi;
        int64_t i0 = f->act[n] + (u - f->cum[n]), i1 = f->act[n] + (end - f->cum[n]);
        int64_t k0 = f->blk[n] * nb;
        /* the coordinates these sequences use in the block (their starts are sorted) */
        int64_t first = pe_add_start(f, i0), last = pe_add_start(f, i1 - 1) + S;
        int64_t c0 = first > k0 ? first : k0, c1 = last < k0 + nb ? last : k0 + nb;
        if (f->blocked == PE_BLK_POS) {
            /* as a table is written (mirrored pairs), then what an added row has
               beyond a table row: -0.0 (x + -0.0 == x) where no encoding goes */
            pe_drv_fill_blocks_f64(blk, D, c, c0, c1 - c0, 0, c1 - c0, ev, cached, NULL, 0);
            if (sp->zero_col >= 0) {
                for (int64_t r = 0; r < c1 - c0; r++)
                    blk[r * D + sp->zero_col] = -0.0;
            }
            if (rq->has_zero_pos && c0 <= rq->zero_pos && rq->zero_pos < c1)
                pe_zero_row_f64(blk + (rq->zero_pos - c0) * D, D, -0.0);
        } else {
            for (int64_t r = c0; r < c1; r++)
                pe_drv_encode_row_f64(blk + (r - c0) * D, c, 0, r, ev, cached, -0.0);
        }
        for (int64_t i = i0; i < i1; i++) {
            int64_t st = pe_add_start(f, i), b = pe_add_seq(f, i);
            int64_t r0 = st > c0 ? st : c0, r1 = st + S < c1 ? st + S : c1;
            /* each row's address from its index: a pointer stepped past the last
               row would leave the buffer (one row may have any stride) */
            for (int64_t r = r0; r < r1; r++)
                DRV_W(pe_add_row)(out + (b * S + (r - st)) * row_stride, blk + (r - c0) * D, D,
                                  rq->scale);
        }
        u = end;
    }
}

/* Units u_lo .. u_hi-1 of a fill, written by thread t (its scratch).  The
 * fused add (rq->add) encodes a row into a per-thread float64 buffer (it stays
 * in L1), then adds it to x (x rounded once); rows that several sequences
 * share (or consecutive rows of one) are added by blocks (add_blocked). */
static void DRV_FN(fill_part)(DRV_T *out, int64_t row_stride, pe_fill *f, int64_t u_lo,
                              int64_t u_hi, int t) {
    const pe_ctx *c = &f->c;
    const pe_rows *rq = f->c.rq;
    int64_t D = c->sp->d;
    int64_t nf = c->nf;
    int64_t S = rq->S;
    int stream = f->stream;
    /* consecutive rows in one block share the anchor, which is evaluated once
       (thread 0 may start with one already in its scratch: see pe_anchor_cache) */
    int64_t cached = t == 0 ? f->seed : INT64_MIN;
    double *ev = f->scratch + f->per_thread * t;
    double *buf = ev + 4 * nf;
    if (!rq->add && f->contiguous) {
        DRV_FN(fill_blocks)(out, row_stride, c, rq->offset, rq->S, u_lo, u_hi, ev, &cached,
                            (DRV_T *)buf, stream);
        if (stream)
            pe_stream_fence(); /* streaming stores are weakly ordered */
    } else if (!rq->add) {
        for (int64_t r = u_lo; r < u_hi; r++) {
            int64_t b = r / S;
            DRV_T *dest = out + r * row_stride;
            if (stream) {
                DRV_FN(encode_row)((DRV_T *)buf, c, b, r - b * S, ev, &cached, 0.0);
                pe_stream_copy(dest, buf, (size_t)D * sizeof(DRV_T));
            } else {
                DRV_FN(encode_row)(dest, c, b, r - b * S, ev, &cached, 0.0);
            }
        }
        if (stream)
            pe_stream_fence();
    } else if (c->cradd) {
        /* when every sequence has the same positions, unit u is step u / nseq
           of sequence u % nseq: each step's row is evaluated once for all */
        int shared = rq->offs == NULL && ((rq->pos_i == NULL && rq->pos_f == NULL) || rq->psb == 0);
        int64_t nseq = rq->nseq, last = -1;
        double *hl = buf + D, *er = buf + 2 * D, K = 0.0;
        int none = 0;
        for (int64_t u = u_lo; u < u_hi; u++) {
            int64_t b = shared ? u % nseq : u / S, s = shared ? u / nseq : u % S;
            if (!shared || s != last)
                pe_acc_row(buf, hl, er, c, b, s, ev, &cached, &K, &none);
            last = s;
            DRV_FN(cra_row)(out + (b * S + s) * row_stride, c, buf, hl, er, K, none,
                            (DRV_T *)(buf + 3 * D));
        }
    } else if (f->blocked) {
        DRV_FN(add_blocked)(out, row_stride, f, u_lo, u_hi, ev, &cached, buf);
    } else {
        for (int64_t r = u_lo; r < u_hi; r++) {
            int64_t b = r / S;
            pe_drv_encode_row_f64(buf, c, b, r - b * S, ev, &cached, -0.0);
            DRV_W(pe_add_row)(out + r * row_stride, buf, D, rq->scale);
        }
    }
    if (t == 0)
        f->last = cached;
}

/* Units u0 .. u1-1 of a prepared fill (all of them, or one chunk of a long
 * fill), each thread a contiguous range of them. */
static void DRV_FN(fill_units)(DRV_T *out, int64_t row_stride, pe_fill *f, int64_t u0, int64_t u1) {
    int64_t n = u1 - u0;
    int nt = f->nt;
    if (n <= 0)
        return;
    if (nt > n)
        nt = (int)n;
    if (nt == 1) { /* on the calling thread: no parallel region to enter for small fills */
        DRV_FN(fill_part)(out, row_stride, f, u0, u1, 0);
        return;
    }
    int t;
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (t = 0; t < nt; t++)
        DRV_FN(fill_part)(out, row_stride, f, u0 + t * n / nt, u0 + (t + 1) * n / nt, t);
}

#undef DRV_W
#undef DRV_T
#undef DRV_SFX
#undef DRV_DD
#undef DRV_PUT
#undef DRV_GET
#undef DRV_BITS
#undef DRV_PREC
#undef DRV_EMIN
