/*
 * One RoPE row rotated in place, per entry type: included by rope_rotate.c with ROT_T
 * (the element type), ROT_SFX (f32, f64, f16, bf16), ROT_LOAD(x) and
 * ROT_STORE(v) defined (ROT_ATTR optional; ROT_PAIRS 0 leaves out the interleaved
 * loop and ROT_HALF 0 the half-split one, where one is written by hand).  Each pair
 * (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) in float64, rounded once into the
 * row's type.
 */
#define ROT_FN(name) PE_CAT(name, ROT_SFX)

/* The rotation of one row, a loop per layout so that the compiler vectorises
 * it (restrict: the table is other memory, and the halves of a row are
 * disjoint).  ROT_ATTR, when defined, is a target attribute: the same loops
 * compiled for another instruction set, the same IEEE operations in the same
 * order (no FMA: -ffp-contract=off), hence the same bits. */
#ifndef ROT_ATTR
#define ROT_ATTR
#endif
#if !defined(ROT_HALF) || ROT_HALF
static ROT_ATTR void ROT_FN(pe_rot_half)(char *row, const double *PE_RESTRICT sn,
                                         const double *PE_RESTRICT cs, int64_t nf, double a) {
    ROT_T *PE_RESTRICT x1p = (ROT_T *)row;
    ROT_T *PE_RESTRICT x2p = (ROT_T *)row + nf;
    if (a == 1.0) { /* c * 1.0 == c exactly: two multiplies fewer, the same bits */
        for (int64_t i = 0; i < nf; i++) {
            double x1 = ROT_LOAD(x1p[i]);
            double x2 = ROT_LOAD(x2p[i]);
            x1p[i] = ROT_STORE(x1 * cs[i] - x2 * sn[i]);
            x2p[i] = ROT_STORE(x2 * cs[i] + x1 * sn[i]);
        }
        return;
    }
    for (int64_t i = 0; i < nf; i++) {
        double x1 = ROT_LOAD(x1p[i]);
        double x2 = ROT_LOAD(x2p[i]);
        double c = cs[i] * a;
        double s = sn[i] * a;
        x1p[i] = ROT_STORE(x1 * c - x2 * s);
        x2p[i] = ROT_STORE(x2 * c + x1 * s);
    }
}

#endif

#if !defined(ROT_PAIRS) || ROT_PAIRS
static ROT_ATTR void ROT_FN(pe_rot_pairs)(char *row, const double *PE_RESTRICT sn,
                                          const double *PE_RESTRICT cs, int64_t nf, double a) {
    ROT_T *PE_RESTRICT x = (ROT_T *)row;
    if (a == 1.0) { /* as in pe_rot_half */
        for (int64_t i = 0; i < nf; i++) {
            double x1 = ROT_LOAD(x[2 * i]);
            double x2 = ROT_LOAD(x[2 * i + 1]);
            x[2 * i] = ROT_STORE(x1 * cs[i] - x2 * sn[i]);
            x[2 * i + 1] = ROT_STORE(x2 * cs[i] + x1 * sn[i]);
        }
        return;
    }
    for (int64_t i = 0; i < nf; i++) {
        double x1 = ROT_LOAD(x[2 * i]);
        double x2 = ROT_LOAD(x[2 * i + 1]);
        double c = cs[i] * a;
        double s = sn[i] * a;
        x[2 * i] = ROT_STORE(x1 * c - x2 * s);
        x[2 * i + 1] = ROT_STORE(x2 * c + x1 * s);
    }
}
#endif

#ifdef ROT_CR
/* Entry a (u C + w S) of pair i at position K, correctly rounded (the test and
 * bound above pe_crr). */
static ROT_T ROT_FN(pe_crr_entry)(const pe_crr *X, double K, int64_t i, double u, double w,
                                  double ch, double cl, double sh, double sl, double et) {
    double pa, pb;
    if (u == 0.0 && w == 0.0) /* exactly 0 (of either sign: +0) */
        return ROT_STORE(0.0);
    if (crr_probes(u, w, ch, cl, sh, sl, et, X->a, ROT_MARGIN, &pa, &pb) && isfinite(pa) &&
        isfinite(pb) && !pe_cr_forced()) {
        ROT_T ra = ROT_STORE(pa), rb = ROT_STORE(pb);
        if (memcmp(&ra, &rb, sizeof ra) == 0)
            return ra;
    }
    if (!(isfinite(u) && isfinite(w))) /* as the default rotation: IEEE operations */
        return ROT_STORE(u * (ch * X->a) + w * (sh * X->a));
    {
        const pe_spec *sp = X->sp;
        return ROT_STORE(pe_rot_exact(K, i, sp->w0, sp->base, sp->denom, sp->wlist, u, w, X->a,
                                      ROT_PREC, ROT_EMIN));
    }
}

/* Pairs i0 .. i0+n-1 of a row at position K into out (r1, r2 of pair i at 2i,
 * 2i+1), each the rounding of its lower probe; nonzero where one of them is not
 * decided (then pe_rot_cr takes those pairs entry by entry).  Branch-free and
 * every call inlined, so that the compiler can vectorise it. */
PE_INLINE uint64_t ROT_FN(pe_crr_run)(ROT_T *PE_RESTRICT out, const ROT_T *PE_RESTRICT x,
                                      int64_t step, int64_t gap, const double *PE_RESTRICT tr,
                                      int64_t nf, int64_t i0, int64_t n, double K,
                                      const double *PE_RESTRICT f, double a) {
    uint64_t flag = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t i = i0 + j;
        double x1 = ROT_LOAD(x[i * step]), x2 = ROT_LOAD(x[i * step + gap]);
        double sh = tr[i], sl = tr[nf + i], ch = tr[2 * nf + i], cl = tr[3 * nf + i];
        double et = K != 0.0 ? 0x1p-99 + 0x1p-90 * fabs(K * f[i]) : 0.0;
        double a1, b1, a2, b2;
        int ok = crr_probes(x1, -x2, ch, cl, sh, sl, et, a, ROT_MARGIN, &a1, &b1) &
                 crr_probes(x2, x1, ch, cl, sh, sl, et, a, ROT_MARGIN, &a2, &b2);
        ROT_T r1 = ROT_STORE(a1), r2 = ROT_STORE(a2);
        out[2 * j] = r1;
        out[2 * j + 1] = r2;
        flag |= (ROT_BITS(r1) ^ ROT_BITS(ROT_STORE(b1))) |
                (ROT_BITS(r2) ^ ROT_BITS(ROT_STORE(b2))) | (uint64_t)(ok == 0) |
                (uint64_t)!(fabs(a1) <= DBL_MAX && fabs(b1) <= DBL_MAX) |
                (uint64_t)!(fabs(a2) <= DBL_MAX && fabs(b2) <= DBL_MAX);
    }
    return flag;
}

/* One row rotated at position K, correctly rounded; tr: its angles as sin hi,
 * sin lo, cos hi, cos lo (nf each).  Blocks of pairs through pe_crr_run, a
 * block it flags (or every pair, where the exact path is forced) entry by
 * entry. */
PE_TARGET_CLONES
PE_DD_FLAT static void ROT_FN(pe_rot_cr)(char *row, const double *tr, double K, const pe_crr *X,
                                         int half, int64_t nf) {
    enum { CH = 64 };
    ROT_T *x = (ROT_T *)row, out[2 * CH];
    int64_t step = half ? 1 : 2, gap = half ? nf : 1;
    int forced = pe_cr_forced();
    for (int64_t i0 = 0; i0 < nf; i0 += CH) {
        int64_t n = nf - i0 < CH ? nf - i0 : CH;
        /* (the layouts' steps as constants: unit-stride loads for the half split) */
        uint64_t flag = forced ? 1
                        : half ? ROT_FN(pe_crr_run)(out, x, 1, nf, tr, nf, i0, n, K, X->f, X->a)
                               : ROT_FN(pe_crr_run)(out, x, 2, 1, tr, nf, i0, n, K, X->f, X->a);
        if (flag == 0) {
            for (int64_t j = 0; j < n; j++) {
                x[(i0 + j) * step] = out[2 * j];
                x[(i0 + j) * step + gap] = out[2 * j + 1];
            }
            continue;
        }
        for (int64_t i = i0; i < i0 + n; i++) {
            double x1 = ROT_LOAD(x[i * step]), x2 = ROT_LOAD(x[i * step + gap]);
            double sh = tr[i], sl = tr[nf + i], ch = tr[2 * nf + i], cl = tr[3 * nf + i];
            double et = K != 0.0 ? 0x1p-99 + 0x1p-90 * fabs(K * X->f[i]) : 0.0;
            ROT_T r1 = ROT_FN(pe_crr_entry)(X, K, i, x1, -x2, ch, cl, sh, sl, et);
            ROT_T r2 = ROT_FN(pe_crr_entry)(X, K, i, x2, x1, ch, cl, sh, sl, et);
            x[i * step] = r1;
            x[i * step + gap] = r2;
        }
    }
}
#endif
#undef ROT_PREC
#undef ROT_BITS
#undef ROT_EMIN
#undef ROT_MARGIN
#undef ROT_ATTR

#undef ROT_FN
#undef ROT_T
#undef ROT_SFX
#undef ROT_LOAD
#undef ROT_STORE
#undef ROT_PAIRS
#undef ROT_HALF
