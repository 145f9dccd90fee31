/*
 * Double-double arithmetic: a value is an unevaluated sum hi + lo of two
 * doubles (~106 bits), built from error-free transformations (two_sum,
 * two_prod) that need IEEE rounding of every operation.  Hence: never
 * -ffast-math (it may legally delete the error terms), and -ffp-contract=off
 * (an FMA would change the bits between machines).
 */
#ifndef FASTPE_PE_DD_H
#define FASTPE_PE_DD_H

#include <math.h>

#include "pe_platform.h"

/* Constants in double-double (hi + lo), from mpmath at 300 bits. */
#define PE_INV2PI_HI 0.15915494309189535      /* 0x1.45f306dc9c883p-3 */
#define PE_INV2PI_LO (-9.839338337591243e-18) /* -0x1.6b01ec5417056p-57 */
#define PE_PIO2_HI   1.5707963267948966       /* 0x1.921fb54442d18p+0 */
#define PE_PIO2_LO   6.123233995736766e-17    /* 0x1.1a62633145c07p-54 */
#define PE_LN2_HI    0.6931471805599453       /* 0x1.62e42fefa39efp-1 */
#define PE_LN2_LO    2.3190468138462996e-17   /* 0x1.abc9e3b39803fp-56 */
/* Veltkamp splitter 2^27+1: splits a double into two 26-bit halves. */
#define PE_SPLITTER 134217729.0
/* 2^52: from here on the spacing of doubles is 1, so x + 1.5*2^52 rounds x to
 * the nearest integer (and stores it in the low bits of the sum). */
#define PE_TWO52 4503599627370496.0
#define PE_MAGIC (1.5 * PE_TWO52)

typedef struct {
    double hi, lo;
} pe_dd;

PE_INLINE pe_dd pe_two_sum(double a, double b) {
    pe_dd r;
    double s = a + b;
    double bb = s - a;
    r.hi = s;
    r.lo = (a - (s - bb)) + (b - bb);
    return r;
}

/* requires |a| >= |b| (or a == 0) */
PE_INLINE pe_dd pe_fast_two_sum(double a, double b) {
    pe_dd r;
    double s = a + b;
    r.hi = s;
    r.lo = b - (s - a);
    return r;
}

PE_INLINE void pe_split(double a, double *hi, double *lo) {
    double t = PE_SPLITTER * a;
    *hi = t - (t - a);
    *lo = a - *hi;
}

/* Exact product a*b = hi + lo (Dekker; no FMA needed, so no slow fma() emulation
 * on baseline x86-64 and identical results everywhere). */
PE_INLINE pe_dd pe_two_prod(double a, double b) {
    double ah, al, bh, bl;
    pe_dd r;
    pe_split(a, &ah, &al);
    pe_split(b, &bh, &bl);
    r.hi = a * b;
    r.lo = ((ah * bh - r.hi) + ah * bl + al * bh) + al * bl;
    return r;
}

PE_INLINE pe_dd pe_dd_add(pe_dd a, pe_dd b) {
    pe_dd s = pe_two_sum(a.hi, b.hi);
    pe_dd t = pe_two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = pe_fast_two_sum(s.hi, s.lo);
    s.lo += t.lo;
    return pe_fast_two_sum(s.hi, s.lo);
}

PE_INLINE pe_dd pe_dd_mul(pe_dd a, pe_dd b) {
    pe_dd p = pe_two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return pe_fast_two_sum(p.hi, p.lo);
}

PE_INLINE pe_dd pe_dd_mul_d(pe_dd a, double b) {
    pe_dd p = pe_two_prod(a.hi, b);
    p.lo += a.lo * b;
    return pe_fast_two_sum(p.hi, p.lo);
}

PE_INLINE pe_dd pe_dd_div_d(pe_dd a, double b) {
    double q1 = a.hi / b;
    pe_dd p = pe_two_prod(q1, b);
    pe_dd r = pe_two_sum(a.hi, -p.hi);
    r.lo = r.lo - p.lo + a.lo;
    double q2 = (r.hi + r.lo) / b;
    return pe_fast_two_sum(q1, q2);
}

PE_INLINE pe_dd pe_dd_from(double a) {
    pe_dd r;
    r.hi = a;
    r.lo = 0.0;
    return r;
}

PE_INLINE pe_dd pe_dd_neg(pe_dd a) {
    a.hi = -a.hi;
    a.lo = -a.lo;
    return a;
}

/* expm1 of a double-double, |r| <= 0.36: the Taylor series of expm1(r / 512)
 * (10 terms reach 2^-110), then 9 squarings in expm1 form (2s + s^2), so the
 * result keeps its relative accuracy for r near 0. */
PE_INLINE pe_dd pe_dd_expm1_small(pe_dd r) {
    r.hi *= 1.0 / 512.0;
    r.lo *= 1.0 / 512.0;
    pe_dd term = r, s = r;
    for (int k = 2; k <= 11; k++) {
        term = pe_dd_div_d(pe_dd_mul(term, r), (double)k);
        s = pe_dd_add(s, term);
    }
    for (int k = 0; k < 9; k++) {
        pe_dd two_s = {2.0 * s.hi, 2.0 * s.lo};
        s = pe_dd_add(two_s, pe_dd_mul(s, s));
    }
    return s;
}

/* exp of a double-double, |x| < ~709: argument reduction by ln2, then expm1. */
PE_INLINE pe_dd pe_dd_exp(pe_dd x) {
    const pe_dd ln2 = {PE_LN2_HI, PE_LN2_LO};
    double n = nearbyint(x.hi / PE_LN2_HI);
    pe_dd s = pe_dd_expm1_small(pe_dd_add(x, pe_dd_mul_d(ln2, -n)));
    s = pe_dd_add(pe_dd_from(1.0), s);
    s.hi = ldexp(s.hi, (int)n);
    s.lo = ldexp(s.lo, (int)n);
    return s;
}

/* ln(m) to about 2^-60 for m in [sqrt(1/2), sqrt(2)): 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| < 0.172, 13 terms of its odd series.  Only + - * /
 * of doubles, so the seed is the same on every machine (libm's log is not). */
PE_INLINE double pe_log_seed(double m) {
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = 1.0 / 25.0;
    for (int k = 23; k >= 1; k -= 2)
        p = p * s2 + 1.0 / (double)k;
    return 2.0 * s * p;
}

/* Natural log of a positive finite double, to double-double (relative error
 * below 2^-100): a = m * 2^e with m in [sqrt(1/2), sqrt(2)), then one Newton
 * step y <- y + m exp(-y) - 1 from the seed, its correction formed as
 * (m - 1) + m expm1(-y) (m - 1 is exact), so ln(m) keeps its relative accuracy
 * for m near 1.  Working on m keeps every intermediate small (on a itself,
 * exp(-y) = 1/a overflows the Veltkamp split for a below ~1e-300). */
PE_INLINE pe_dd pe_dd_log(double a) {
    int ex;
    double m = frexp(a, &ex);
    const pe_dd ln2 = {PE_LN2_HI, PE_LN2_LO};
    if (m < 0.7071067811865476) { /* sqrt(1/2), rounded: either side is fine */
        m *= 2.0;
        ex -= 1;
    }
    double y0 = pe_log_seed(m);
    pe_dd t = pe_dd_add(pe_dd_mul_d(pe_dd_expm1_small(pe_dd_from(-y0)), m), pe_dd_from(m - 1.0));
    pe_dd y = pe_dd_add(pe_dd_from(y0), t);
    return pe_dd_add(y, pe_dd_mul_d(ln2, (double)ex));
}

#endif /* FASTPE_PE_DD_H */
