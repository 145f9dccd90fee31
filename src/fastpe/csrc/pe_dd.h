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

/* exp of a double-double, |x| < ~700.  Argument reduction by ln2 and 2^-9,
 * Taylor series of expm1, then 9 squarings in expm1 form (2s + s^2). */
PE_INLINE pe_dd pe_dd_exp(pe_dd x) {
    const pe_dd ln2 = {PE_LN2_HI, PE_LN2_LO};
    double n = nearbyint(x.hi / PE_LN2_HI);
    pe_dd r = pe_dd_add(x, pe_dd_mul_d(ln2, -n));
    r.hi *= 1.0 / 512.0;
    r.lo *= 1.0 / 512.0;
    /* expm1(r) = r + r^2/2! + ... ; |r| < 7e-4 so 10 terms reach 2^-110 */
    pe_dd term = r, s = r;
    for (int k = 2; k <= 11; k++) {
        term = pe_dd_div_d(pe_dd_mul(term, r), (double)k);
        s = pe_dd_add(s, term);
    }
    for (int k = 0; k < 9; k++) {
        pe_dd two_s = {2.0 * s.hi, 2.0 * s.lo};
        s = pe_dd_add(two_s, pe_dd_mul(s, s));
    }
    pe_dd one = {1.0, 0.0};
    s = pe_dd_add(one, s);
    s.hi = ldexp(s.hi, (int)n);
    s.lo = ldexp(s.lo, (int)n);
    return s;
}

/* natural log of a positive finite double, to double-double: a = m * 2^e with
 * m in [0.5, 1), then one Newton step y <- y + m*exp(-y) - 1 doubles the 53
 * correct bits of libm's log(m).  (Working on m keeps exp(-y) <= 2: on a itself,
 * exp(-y) = 1/a overflows the Veltkamp split for a below ~1e-300, which gave NaN
 * frequencies for base = 2.2e-308; found by the fuzz target.) */
PE_INLINE pe_dd pe_dd_log(double a) {
    int ex;
    double m = frexp(a, &ex);
    const pe_dd ln2 = {PE_LN2_HI, PE_LN2_LO};
    pe_dd y = {log(m), 0.0};
    pe_dd my = {-y.hi, -y.lo};
    pe_dd e = pe_dd_mul_d(pe_dd_exp(my), m);
    pe_dd minus_one = {-1.0, 0.0};
    y = pe_dd_add(y, pe_dd_add(e, minus_one));
    return pe_dd_add(y, pe_dd_mul_d(ln2, (double)ex));
}

#endif /* FASTPE_PE_DD_H */
