/*
 * Accurate float64 rows: the anchor and table rows kept as double-double
 * (hi + lo), the rotation formed with exact products, each entry rounded once
 * to double, and a rounding test that tells the entries whose rounding the
 * error bound leaves undecided (they go to pe_f64_exact).
 *
 * Error bound (absolute, on the double-double value v of an entry):
 *   - angle: the reduction (pe_sincos_reduce) forms K*f with an error below
 *     2^-104 |K f| turns, the frequency in turns is within 2^-96 of the
 *     convention's value (relative; pe_freqs, pe_freqs_list), and the angle
 *     x + xl in radians is within 2^-105 of the reduced one: in all, at most
 *     2^-103 + 2^-93 |K f| radians (2 pi 2^-96 < 2^-93.3, 2 pi 2^-104 < 2^-101).
 *   - sin, cos of x + xl (|x| <= pi/4 + 2^-50): Taylor series to x^27 and
 *     x^28 (the first term left out is below 2^-112), the terms above x^17 and
 *     x^18 in double (each below 2^-54 of the sum, so their rounding costs under
 *     2^-107), the rest in double-double (under 2^-103 in all): sin and cos
 *     within e = 2^-102 + 2^-93 |K f| of the exact ones.
 *   - rotation sA (cos t) + cA sin t with errors eA in sA, cA and eT in
 *     cos t - 1, sin t: at most eA (|cos t| + |sin t|) + eT (|sA| + |cA|)
 *     <= 2 eA + 1.5 eT; the products As_hi*Tm_hi, Ac_hi*Ts_hi are exact, the
 *     seven low terms (each below 2^-51) cost under 2^-99 when summed, the two
 *     products of low parts left out under 2^-104 each.
 *   So |v - exact| <= E = 2^-96 + 2^-90 (|K| + B) |f| for frequency f in
 *   turns (|t f| <= B |f| for a table row; a factor 2 of headroom taken
 *   everywhere).
 * Rounding test: r = fl(v) is the correctly rounded double of v; it is also
 * that of the exact entry when rounding v - E and v + E gives r both times
 * (rounding is monotone).  The probes are formed as r + (e -+ d) with
 * e = v - r exact (two_sum) and d = E + 2^-104 |r| (which covers the probes'
 * own rounding, at most 2^-106 |r|).
 */
#ifndef FASTPE_PE_ROWS_DD_H
#define FASTPE_PE_ROWS_DD_H

#include "pe_sincos.h"
#include "pe_spec.h"

/* Every call inside these loops inlined (the double-double helpers are too
 * long for the compiler's own limits, and a call per entry keeps the loops
 * scalar). */
#if defined(__GNUC__) || defined(__clang__)
#define PE_DD_FLAT __attribute__((flatten))
#else
#define PE_DD_FLAT
#endif

/* 1/k! in double-double (hi, lo), signed as in the sin/cos series: exact
 * fractions rounded twice (python fractions), each printed in the shortest
 * form that reads back as the same double. */
#define PE_DS3H  (-0.16666666666666666)
#define PE_DS3L  (-9.25185853854297e-18)
#define PE_DS5H  0.008333333333333333
#define PE_DS5L  1.1564823173178714e-19
#define PE_DS7H  (-0.0001984126984126984)
#define PE_DS7L  (-1.7209558293420705e-22)
#define PE_DS9H  2.7557319223985893e-06
#define PE_DS9L  (-1.858393274046472e-22)
#define PE_DS11H (-2.505210838544172e-08)
#define PE_DS11L 1.448814070935912e-24
#define PE_DS13H 1.6059043836821613e-10
#define PE_DS13L 1.2585294588752098e-26
#define PE_DS15H (-7.647163731819816e-13)
#define PE_DS15L (-7.03872877733453e-30)
#define PE_DS17  2.8114572543455206e-15
#define PE_DS19  (-8.22063524662433e-18)
#define PE_DS21  1.9572941063391263e-20
#define PE_DS23  (-3.868170170630684e-23)
#define PE_DS25  6.446950284384474e-26
#define PE_DS27  (-9.183689863795546e-29)
#define PE_DC2H  (-0.5)
#define PE_DC4H  0.041666666666666664
#define PE_DC4L  2.3129646346357427e-18
#define PE_DC6H  (-0.001388888888888889)
#define PE_DC6L  5.300543954373577e-20
#define PE_DC8H  2.48015873015873e-05
#define PE_DC8L  2.1511947866775882e-23
#define PE_DC10H (-2.755731922398589e-07)
#define PE_DC10L (-2.3767714622250297e-23)
#define PE_DC12H 2.08767569878681e-09
#define PE_DC12L (-1.20734505911326e-25)
#define PE_DC14H (-1.1470745597729725e-11)
#define PE_DC14L (-2.0655512752830745e-28)
#define PE_DC16H 4.779477332387385e-14
#define PE_DC16L 4.399205485834081e-31
#define PE_DC18  (-1.5619206968586225e-16)
#define PE_DC20  4.110317623312165e-19
#define PE_DC22  (-8.896791392450574e-22)
#define PE_DC24  1.6117375710961184e-24
#define PE_DC26  (-2.4795962632247976e-27)
#define PE_DC28  3.279889237069838e-30

/* One Horner step p <- c + z p in double-double. */
PE_INLINE pe_dd pe_dd_horner(pe_dd p, pe_dd z, double ch, double cl) {
    pe_dd c = {ch, cl};
    return pe_dd_add(c, pe_dd_mul(p, z));
}

/* sin, cos (and cos - 1) of 2 pi K f in double-double, f = fh + fl turns (the
 * bound above).  cm1 keeps its relative accuracy in the first quadrant, where
 * it is small (a table row's cos t - 1). */
PE_INLINE void pe_sincos_dd_turns(double K, double Kh, double Kl, double fh, double fhh, double fhl,
                                  double fl, pe_dd *s_out, pe_dd *c_out, pe_dd *cm1_out) {
    double x, xl;
    uint64_t q;
    pe_sincos_reduce(K, Kh, Kl, fh, fhh, fhl, fl, &x, &xl, &q);
    pe_dd X = {x, xl};
    pe_dd z = pe_two_prod(x, x);
    z.lo += 2.0 * x * xl;
    z = pe_fast_two_sum(z.hi, z.lo);
    double zh = z.hi;
    double ts =
        PE_DS17 + zh * (PE_DS19 + zh * (PE_DS21 + zh * (PE_DS23 + zh * (PE_DS25 + zh * PE_DS27))));
    double tc =
        PE_DC18 + zh * (PE_DC20 + zh * (PE_DC22 + zh * (PE_DC24 + zh * (PE_DC26 + zh * PE_DC28))));
    pe_dd ps = pe_dd_from(ts), pc = pe_dd_from(tc);
    ps = pe_dd_horner(ps, z, PE_DS15H, PE_DS15L);
    ps = pe_dd_horner(ps, z, PE_DS13H, PE_DS13L);
    ps = pe_dd_horner(ps, z, PE_DS11H, PE_DS11L);
    ps = pe_dd_horner(ps, z, PE_DS9H, PE_DS9L);
    ps = pe_dd_horner(ps, z, PE_DS7H, PE_DS7L);
    ps = pe_dd_horner(ps, z, PE_DS5H, PE_DS5L);
    ps = pe_dd_horner(ps, z, PE_DS3H, PE_DS3L);
    pc = pe_dd_horner(pc, z, PE_DC16H, PE_DC16L);
    pc = pe_dd_horner(pc, z, PE_DC14H, PE_DC14L);
    pc = pe_dd_horner(pc, z, PE_DC12H, PE_DC12L);
    pc = pe_dd_horner(pc, z, PE_DC10H, PE_DC10L);
    pc = pe_dd_horner(pc, z, PE_DC8H, PE_DC8L);
    pc = pe_dd_horner(pc, z, PE_DC6H, PE_DC6L);
    pc = pe_dd_horner(pc, z, PE_DC4H, PE_DC4L);
    pc = pe_dd_horner(pc, z, PE_DC2H, 0.0);
    pe_dd s0 = pe_dd_add(X, pe_dd_mul(X, pe_dd_mul(z, ps))); /* x + x z P(z) */
    pe_dd cm0 = pe_dd_mul(z, pc);                            /* z Q(z) = cos x - 1 */
    pe_dd c0 = pe_dd_add(pe_dd_from(1.0), cm0);
    /* the quadrant r by selects and exact sign products (no branches, so the
       loops over the columns vectorise): r = 1, 3 swap sin and cos, r = 2, 3
       negate sin, r = 1, 2 negate cos */
    int r = (int)(q & 3);
    double sgs = 1.0 - (double)(r & 2), sgc = 1.0 - (double)((r ^ (r << 1)) & 2);
    pe_dd s, c;
    s.hi = sgs * ((r & 1) ? c0.hi : s0.hi);
    s.lo = sgs * ((r & 1) ? c0.lo : s0.lo);
    c.hi = sgc * ((r & 1) ? s0.hi : c0.hi);
    c.lo = sgc * ((r & 1) ? s0.lo : c0.lo);
    pe_dd m = pe_dd_add(c, pe_dd_from(-1.0));
    *s_out = s;
    *c_out = c;
    cm1_out->hi = r == 0 ? cm0.hi : m.hi;
    cm1_out->lo = r == 0 ? cm0.lo : m.lo;
}

/* The row of position K in double-double: sines (sh, sl), cosines (ch, cl). */
PE_TARGET_CLONES PE_MAYBE_UNUSED PE_DD_FLAT static void
pe_sincos_row_dd(double K, pe_freq fr, int64_t nf, double *PE_RESTRICT sh, double *PE_RESTRICT sl,
                 double *PE_RESTRICT ch, double *PE_RESTRICT cl) {
    const double *PE_RESTRICT fh = fr.fh, *PE_RESTRICT fhh = fr.fhh;
    const double *PE_RESTRICT fhl = fr.fhl, *PE_RESTRICT fl = fr.fl;
    double Kh, Kl;
    pe_split(K, &Kh, &Kl);
    PE_IVDEP
    for (int64_t i = 0; i < nf; i++) {
        pe_dd s, c, m;
        pe_sincos_dd_turns(K, Kh, Kl, fh[i], fhh[i], fhl[i], fl[i], &s, &c, &m);
        sh[i] = s.hi;
        sl[i] = s.lo;
        ch[i] = c.hi;
        cl[i] = c.lo;
    }
}

/* The low parts (ml, sl) that make table row a (m = cos t - 1, s = sin t, as
 * composed: the other types' bits) its double-double value: the difference to
 * the high part is exact (they agree to a few ulps), the low part's rounding
 * below 2^-104 of the entry. */
PE_TARGET_CLONES PE_MAYBE_UNUSED PE_DD_FLAT static void pe_table_row_dd(double a, pe_freq fr,
                                                                        int64_t nf, const double *m,
                                                                        const double *s, double *ml,
                                                                        double *sl) {
    double Kh, Kl;
    pe_split(a, &Kh, &Kl);
    PE_IVDEP
    for (int64_t i = 0; i < nf; i++) {
        pe_dd sd, cd, md;
        pe_sincos_dd_turns(a, Kh, Kl, fr.fh[i], fr.fhh[i], fr.fhl[i], fr.fl[i], &sd, &cd, &md);
        ml[i] = (md.hi - m[i]) + md.lo;
        sl[i] = (sd.hi - s[i]) + sd.lo;
    }
}

/* The factor of |f| in the bound E of the header, for rows at positions within
 * B of K. */
PE_INLINE double pe_dd_bound(double K, double B) {
    return 8.077935669463161e-28 /* 2^-90 */ * (fabs(K) + B);
}

/* What the accurate writers read: the anchor (sin, cos at a block centre) and
 * one table row (cos t - 1, sin t), each as hi and lo parts. */
typedef struct {
    const double *sh, *sl, *ch, *cl; /* anchor */
    const double *mh, *ml, *th, *tl; /* table row */
    const double *f;                 /* the frequencies (turns, high parts) */
    double E1;                       /* the error bound is 2^-96 + E1 |f| */
} pe_ddrot;

/* The exact product a*b = hi + lo.  Its low part is unique, so a fused
 * multiply-add (one instruction) gives the same bits as Dekker's product
 * (pe_two_prod, 17 operations): the FMA where the compiler emits one inline
 * -- GCC's x86-64 clones (the AVX2 and AVX-512 ones run on every CPU that has
 * it; the baseline clone calls libm's fma, exact but slow, on older CPUs),
 * targets with FMA -- and Dekker elsewhere. */
#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA) ||                      \
    (defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) &&      \
     defined(__GLIBC__) && !defined(FASTPE_NO_CLONES) && !defined(__SANITIZE_ADDRESS__))
PE_INLINE pe_dd pe_dd_prod(double a, double b) {
    pe_dd r;
    r.hi = a * b;
    r.lo = __builtin_fma(a, b, -r.hi);
    return r;
}
#else
#define pe_dd_prod pe_two_prod
#endif

/* One entry: the double-double A + (P + Q) + low rounded once, und set when
 * the rounding test fails. */
PE_INLINE double pe_dd_round(double Ah, double Ph, double Qh, double low, double E, int *und) {
    pe_dd s = pe_two_sum(Ph, Qh);
    pe_dd t = pe_two_sum(Ah, s.hi);
    double lo = t.lo + (s.lo + low);
    pe_dd n = pe_two_sum(t.hi, lo);
    double d = E + 4.930380657631324e-32 /* 2^-104 */ * fabs(n.hi);
    double a = n.hi + (n.lo - d), b = n.hi + (n.lo + d);
    *und |= a != b;
    return n.hi;
}

/* pe_dd_round of the entry times a (a finite double, the attention factor of a
 * RoPE cache): the double-double n times a formed to 2^-104 relative (a*n.hi
 * exact, a*n.lo rounded, their sum rounded), its bound |a| E, the probes'
 * margin 2^-101 |m| for those roundings and theirs, and 2^-1073 for the low
 * parts lost below the subnormals. */
PE_INLINE double pe_dd_round_scaled(double Ah, double Ph, double Qh, double low, double E, double a,
                                    int *und) {
    pe_dd s = pe_two_sum(Ph, Qh);
    pe_dd t = pe_two_sum(Ah, s.hi);
    double lo = t.lo + (s.lo + low);
    pe_dd n = pe_two_sum(t.hi, lo);
    pe_dd p = pe_two_prod(a, n.hi);
    pe_dd m = pe_two_sum(p.hi, p.lo + a * n.lo);
    double d = fabs(a) * E + 3.944304526105059e-31 /* 2^-101 */ * fabs(m.hi) +
               9.881312916824931e-324 /* 2^-1073 */;
    double x = m.hi + (m.lo - d), y = m.hi + (m.lo + d);
    *und |= x != y;
    return m.hi;
}

/* Frequency i of the rows at +t (sp, cp) and -t (sm, cm); one of the two when
 * only one is wanted (the other is computed and dropped). */
PE_INLINE void pe_dd_at(const pe_ddrot *R, int64_t i, double *sp, double *cp, double *sm,
                        double *cm, int *und) {
    double sh = R->sh[i], sl = R->sl[i], ch = R->ch[i], cl = R->cl[i];
    double mh = R->mh[i], ml = R->ml[i], th = R->th[i], tl = R->tl[i];
    double E = 1.262177448353619e-29 /* 2^-96 */ + R->E1 * fabs(R->f[i]);
    pe_dd p1 = pe_dd_prod(sh, mh); /* sA (cos t - 1) */
    pe_dd p2 = pe_dd_prod(ch, th); /* cA sin t */
    pe_dd p3 = pe_dd_prod(ch, mh); /* cA (cos t - 1) */
    pe_dd p4 = pe_dd_prod(sh, th); /* sA sin t */
    double l1 = p1.lo + (sh * ml + sl * mh), l2 = p2.lo + (ch * tl + cl * th);
    double l3 = p3.lo + (ch * ml + cl * mh), l4 = p4.lo + (sh * tl + sl * th);
    *sp = pe_dd_round(sh, p1.hi, p2.hi, sl + (l1 + l2), E, und);
    *cp = pe_dd_round(ch, p3.hi, -p4.hi, cl + (l3 - l4), E, und);
    *sm = pe_dd_round(sh, p1.hi, -p2.hi, sl + (l1 - l2), E, und);
    *cm = pe_dd_round(ch, p3.hi, p4.hi, cl + (l3 + l4), E, und);
}

/* A + (P + Q) + low as a normalised double-double, unrounded (pe_dd_round's
 * sum): within E of the exact entry, with 2^-104 of it for the low part's own
 * rounding (the bound the adds use). */
PE_INLINE pe_dd pe_dd_sum4(double Ah, double Ph, double Qh, double low) {
    pe_dd s = pe_two_sum(Ph, Qh);
    pe_dd t = pe_two_sum(Ah, s.hi);
    return pe_two_sum(t.hi, t.lo + (s.lo + low));
}

/* Frequency i of the row at sg t (sg +1 or -1) unrounded: its sine (*s) and
 * cosine (*c) as double-double, for the correctly rounded adds; returns E,
 * their error bound (the header's). */
PE_INLINE double pe_dd_val(const pe_ddrot *R, int64_t i, double sg, pe_dd *s, pe_dd *c) {
    double sh = R->sh[i], sl = R->sl[i], ch = R->ch[i], cl = R->cl[i];
    double mh = R->mh[i], ml = R->ml[i], th = R->th[i], tl = R->tl[i];
    pe_dd p1 = pe_dd_prod(sh, mh), p2 = pe_dd_prod(ch, th);
    pe_dd p3 = pe_dd_prod(ch, mh), p4 = pe_dd_prod(sh, th);
    double l1 = p1.lo + (sh * ml + sl * mh), l2 = p2.lo + (ch * tl + cl * th);
    double l3 = p3.lo + (ch * ml + cl * mh), l4 = p4.lo + (sh * tl + sl * th);
    *s = pe_dd_sum4(sh, p1.hi, sg * p2.hi, sl + (l1 + sg * l2));
    *c = pe_dd_sum4(ch, p3.hi, -sg * p4.hi, cl + (l3 - sg * l4));
    return 1.262177448353619e-29 /* 2^-96 */ + R->E1 * fabs(R->f[i]);
}

/* Frequencies lo .. hi-1 of the rows at +t (ps, pc) and -t (ms, mc) written
 * at the given element steps (interleaved: 2, split: 1); a NULL row is not
 * stored.  Returns whether some entry's rounding was left undecided. */
PE_DD_FLAT static int pe_dd_span(const pe_ddrot *R, int64_t lo, int64_t hi, double *ps, double *pc,
                                 double *ms, double *mc, int64_t step) {
    int und = 0;
    for (int64_t i = lo; i < hi; i++) {
        double a, b, c, d;
        pe_dd_at(R, i, &a, &b, &c, &d, &und);
        if (ps != NULL) {
            ps[i * step] = a;
            pc[i * step] = b;
        }
        if (ms != NULL) {
            ms[i * step] = c;
            mc[i * step] = d;
        }
    }
    return und;
}

/* The same for both rows of a mirrored pair, interleaved (rp, rm) or split
 * ((sp, cp), (sm, cm)): fixed steps and no tests in the loop, so it vectorises. */
PE_TARGET_CLONES
PE_DD_FLAT static int pe_dd_pairs2(const pe_ddrot *R, int64_t n, double *PE_RESTRICT rp,
                                   double *PE_RESTRICT rm) {
    int und = 0;
    const pe_ddrot r = *R; /* (fields in registers: no reload after each store) */
    PE_IVDEP
    for (int64_t i = 0; i < n; i++)
        pe_dd_at(&r, i, &rp[2 * i], &rp[2 * i + 1], &rm[2 * i], &rm[2 * i + 1], &und);
    return und;
}

PE_TARGET_CLONES
PE_DD_FLAT static int pe_dd_split2(const pe_ddrot *R, int64_t n, double *PE_RESTRICT sp,
                                   double *PE_RESTRICT cp, double *PE_RESTRICT sm,
                                   double *PE_RESTRICT cm) {
    int und = 0;
    const pe_ddrot r = *R;
    PE_IVDEP
    for (int64_t i = 0; i < n; i++)
        pe_dd_at(&r, i, &sp[i], &cp[i], &sm[i], &cm[i], &und);
    return und;
}

/* The rows at +t (rp) and -t (rm) of a spec's layout, either NULL: every
 * encoded column (pe_row_rest's too; the zero column is the caller's).
 * Returns whether some entry was left undecided. */
PE_INLINE int pe_dd_rows(double *rp, double *rm, const pe_spec *sp, const pe_ddrot *R) {
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        int und = rp != NULL && rm != NULL ? pe_dd_pairs2(R, sp->npairs, rp, rm)
                                           : pe_dd_span(R, 0, sp->npairs, rp, rp ? rp + 1 : NULL,
                                                        rm, rm ? rm + 1 : NULL, 2);
        if (sp->lone_sin) {
            double a, b, c, d;
            pe_dd_at(R, sp->npairs, &a, &b, &c, &d, &und);
            if (rp != NULL)
                rp[sp->d - 1] = a;
            if (rm != NULL)
                rm[sp->d - 1] = c;
        }
        return und;
    }
    int64_t n = pe_split_pairs(sp);
    int und =
        rp != NULL && rm != NULL
            ? pe_dd_split2(R, n, rp + sp->s_off, rp + sp->c_off, rm + sp->s_off, rm + sp->c_off)
            : pe_dd_span(R, 0, n, rp ? rp + sp->s_off : NULL, rp ? rp + sp->c_off : NULL,
                         rm ? rm + sp->s_off : NULL, rm ? rm + sp->c_off : NULL, 1);
    for (int64_t i = n; i < sp->ns || i < sp->nc; i++) {
        double a, b, c, d;
        pe_dd_at(R, i, &a, &b, &c, &d, &und);
        if (i < sp->ns) {
            if (rp != NULL)
                rp[sp->s_off + i] = a;
            if (rm != NULL)
                rm[sp->s_off + i] = c;
        }
        if (i < sp->nc) {
            if (rp != NULL)
                rp[sp->c_off + i] = b;
            if (rm != NULL)
                rm[sp->c_off + i] = d;
        }
    }
    return und;
}

/* The exact value of entry (K, frequency i, sine or cosine) of a spec, rounded
 * to double, for the entries whose rounding pe_dd_round left undecided: r is
 * the double-double's rounding (fill.c). */
PE_HIDDEN double pe_f64_exact(const pe_spec *sp, double K, int64_t i, int cosine, double r,
                              double scale);

/* Entry by entry again for a row at K (rotation of sign sg) that had an
 * undecided entry: each undecided one (every one if all) from pe_f64_exact.  Row 0 is exact as
 * it is (sines 0, cosines 1: the zero sines fail the test only because a
 * probe either side of 0 rounds to a different double).  A scale other than 1
 * (the entries times it, rounded once): every entry of the row, which the row
 * writers left unscaled, rewritten from pe_dd_round_scaled or pe_f64_exact. */
PE_MAYBE_UNUSED static void pe_dd_fix(double *row, const pe_spec *sp, const pe_ddrot *R, double sg,
                                      double K, int all, double scale) {
    int inter = sp->layout == PE_LAYOUT_INTERLEAVED;
    int64_t nfreq = pe_row_freqs(sp);
    if (K == 0.0) {
        if (scale != 1.0) { /* sines 0, cosines 1: the products are exact */
            for (int64_t i = 0; i < nfreq; i++) {
                if (inter && i < sp->npairs)
                    row[2 * i + 1] *= scale;
                else if (!inter && i < sp->nc)
                    row[sp->c_off + i] *= scale;
            }
        }
        return;
    }
    for (int64_t i = 0; i < nfreq; i++) {
        double v[2];
        int und[2] = {0, 0};
        int64_t at[2];
        {
            double sh = R->sh[i], sl = R->sl[i], ch = R->ch[i], cl = R->cl[i];
            double mh = R->mh[i], ml = R->ml[i], th = R->th[i], tl = R->tl[i];
            double E = 1.262177448353619e-29 /* 2^-96 */ + R->E1 * fabs(R->f[i]);
            pe_dd p1 = pe_two_prod(sh, mh), p2 = pe_two_prod(ch, th);
            pe_dd p3 = pe_two_prod(ch, mh), p4 = pe_two_prod(sh, th);
            double l1 = p1.lo + (sh * ml + sl * mh), l2 = p2.lo + (ch * tl + cl * th);
            double l3 = p3.lo + (ch * ml + cl * mh), l4 = p4.lo + (sh * tl + sl * th);
            if (scale != 1.0) {
                double g = sg > 0 ? 1.0 : -1.0;
                v[0] =
                    pe_dd_round_scaled(sh, p1.hi, g * p2.hi, sl + (l1 + g * l2), E, scale, &und[0]);
                v[1] = pe_dd_round_scaled(ch, p3.hi, -g * p4.hi, cl + (l3 - g * l4), E, scale,
                                          &und[1]);
            } else if (sg > 0) {
                v[0] = pe_dd_round(sh, p1.hi, p2.hi, sl + (l1 + l2), E, &und[0]);
                v[1] = pe_dd_round(ch, p3.hi, -p4.hi, cl + (l3 - l4), E, &und[1]);
            } else {
                v[0] = pe_dd_round(sh, p1.hi, -p2.hi, sl + (l1 - l2), E, &und[0]);
                v[1] = pe_dd_round(ch, p3.hi, p4.hi, cl + (l3 + l4), E, &und[1]);
            }
        }
        pe_freq_columns(sp, i, at);
        for (int k = 0; k < 2; k++) {
            if (at[k] >= 0 && (und[k] || all))
                row[at[k]] = pe_f64_exact(sp, K, i, k, v[k], scale);
            else if (at[k] >= 0 && scale != 1.0)
                row[at[k]] = v[k];
        }
    }
}

#endif /* FASTPE_PE_ROWS_DD_H */
