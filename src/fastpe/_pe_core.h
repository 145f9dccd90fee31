/*
 * fastpe numeric core: double-double arithmetic, an accurate sin/cos of an
 * exactly represented angle, and the per-row writers used by kernel.pyx.
 *
 * Why the design looks like this
 * ------------------------------
 * P[k, .] needs sin/cos(k * w_i).  Two error sources dominate naive code:
 *   1. rounding the angle k*w to a double (error ~ k*w*2^-53, 1e-10 at k=1e6),
 *   2. one libm call per element (slow: ~10-20 ns).
 * fastpe keeps each frequency in double-double, measured in *turns*
 * (f_i = w_i / 2pi), so the exact product k*f_i splits into an integer number
 * of quarter turns (dropped after taking the quadrant) and a small remainder
 * that is accurate to ~2^-100.  sin/cos of that remainder come from short
 * polynomials (no libm, branch-free, vectorisable).
 *
 * Only a few of those accurate evaluations are done per call: rows are grouped
 * into blocks of B rows (positions mB .. mB+B-1) around centres c = mB + B/2;
 * for every block the "anchor" e^{i*c*w} is evaluated accurately (and position 0,
 * to be exact, on its own), and every row c+j of the block is
 * the anchor rotated by the table entry e^{i*j*w} (also accurate; j < 0 uses
 * the entry for |j| with the sine negated), one complex multiply per pair.
 * Rows c+j and c-j share that multiply's four products.  The error does not
 * grow with k (unlike a running recurrence).  Table entries are kept as
 * (cos-1, sin) so small rotations lose nothing.
 *
 * Everything here must be compiled WITHOUT -ffast-math (it may legally delete
 * the error terms) and with -ffp-contract=off (so results are bitwise the same
 * with and without FMA hardware).  Results depend only on (position, column),
 * never on the thread partition, so any thread count gives identical bits.
 */
#ifndef FASTPE_PE_CORE_H
#define FASTPE_PE_CORE_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#if defined(_MSC_VER)
#define PE_INLINE static __inline
#define PE_RESTRICT __restrict
#else
#define PE_INLINE static inline
#define PE_RESTRICT __restrict__
#endif

/* ------------------------------------------------------------------------- */
/* Constants in double-double (hi + lo), from mpmath at 300 bits.            */
/* ------------------------------------------------------------------------- */
#define PE_INV2PI_HI 0.15915494309189535       /* 0x1.45f306dc9c883p-3 */
#define PE_INV2PI_LO (-9.839338337591243e-18)  /* -0x1.6b01ec5417056p-57 */
#define PE_PIO2_HI 1.5707963267948966          /* 0x1.921fb54442d18p+0 */
#define PE_PIO2_LO 6.123233995736766e-17       /* 0x1.1a62633145c07p-54 */
#define PE_LN2_HI 0.6931471805599453           /* 0x1.62e42fefa39efp-1 */
#define PE_LN2_LO 2.3190468138462996e-17       /* 0x1.abc9e3b39803fp-56 */
/* Veltkamp splitter 2^27+1 and the round-to-nearest-integer "magic" 1.5*2^52. */
#define PE_SPLITTER 134217729.0
#define PE_MAGIC 6755399441055744.0

/* |K * f| (in turns) must stay below this for the quarter-turn reduction to be
 * exact; the Python layer and the C API check positions against it. */
#define PE_MAX_TURNS 35184372088832.0          /* 2^45 */

/*
 * Wheels target baseline x86-64 (SSE2).  On glibc x86-64 with GCC the two hot
 * loops are also compiled for AVX2 and AVX-512 and picked at load time (ifunc).
 * Every clone performs the same IEEE operations in the same order (no FMA
 * contraction), so all of them produce bitwise identical results.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && defined(__GLIBC__) && !defined(FASTPE_NO_CLONES) && !defined(__SANITIZE_ADDRESS__)
#define PE_TARGET_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define PE_TARGET_CLONES
#endif

/* "No loop-carried dependences" for the row loops: GCC does not reliably apply
 * restrict to pointers copied out of a struct (or after inlining), and the
 * alias checks it would then need exceed its limit, leaving the loop scalar. */
#if defined(__GNUC__) && !defined(__clang__)
#define PE_IVDEP _Pragma("GCC ivdep")
#else
#define PE_IVDEP
#endif

typedef struct { double hi, lo; } pe_dd;

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

/* ------------------------------------------------------------------------- */
/* Frequencies                                                               */
/* ------------------------------------------------------------------------- */
/*
 * A geometric frequency ladder, w_i = w0 * exp(-i * ln(base) / denom), stored
 * in turns (w_i / 2pi) as double-double.  This one shape covers every
 * convention in use (Vaswani: denom = d/2; tensor2tensor/fairseq: h-1;
 * diffusers: h - shift), so new conventions only change (w0, base, denom).
 * The high part is pre-split (Veltkamp) so the per-element product K*f_hi is
 * exact with four multiplications.
 */
/* Structure of arrays (not an array of structs) so the evaluator's loop over i
 * reads each field with unit stride and vectorises without shuffles. */
typedef struct {
    double *fh;   /* high part of f_i (turns) */
    double *fhh;  /* Veltkamp split of fh: fh = fhh + fhl, each half 26 bits */
    double *fhl;
    double *fl;   /* low part of f_i */
} pe_freq;

/* Lay out a pe_freq over nf*4 doubles of caller memory. */
PE_INLINE pe_freq pe_freq_view(double *mem, int64_t nf) {
    pe_freq fr;
    fr.fh = mem;
    fr.fhh = mem + nf;
    fr.fhl = mem + 2 * nf;
    fr.fl = mem + 3 * nf;
    return fr;
}

PE_INLINE void pe_freqs(pe_freq fr, int64_t nf, double w0, double base, double denom) {
    const pe_dd inv2pi = {PE_INV2PI_HI, PE_INV2PI_LO};
    pe_dd lb = pe_dd_log(base);
    pe_dd step = pe_dd_div_d(lb, -denom);         /* ln q = -ln(base)/denom */
    pe_dd q = pe_dd_exp(step);
    pe_dd f0 = pe_dd_mul_d(inv2pi, w0);
    pe_dd f = f0;
    /* Re-anchor every 64 steps with an independent exp so the chained product's
     * rounding (~2^-104 per step) cannot accumulate over thousands of columns. */
    for (int64_t i = 0; i < nf; i++) {
        if (i > 0) {
            if ((i & 63) == 0) {
                pe_dd e = pe_dd_exp(pe_dd_mul_d(step, (double)i));
                f = pe_dd_mul(f0, e);
            } else {
                f = pe_dd_mul(f, q);
            }
        }
        fr.fh[i] = f.hi;
        fr.fl[i] = f.lo;
        pe_split(f.hi, &fr.fhh[i], &fr.fhl[i]);
    }
}

/* ------------------------------------------------------------------------- */
/* Accurate sin/cos at an exact position                                     */
/* ------------------------------------------------------------------------- */
/*
 * Taylor coefficients 1/n! (|x| <= pi/4 * 1.05 after reduction: the first
 * omitted term x^19/19! < 2e-19, far below 2^-53).  Plain Taylor instead of a
 * minimax fit: a few more terms, but coefficients anyone can check.
 */
#define PE_S3 (-1.0 / 6.0)
#define PE_S5 (1.0 / 120.0)
#define PE_S7 (-1.0 / 5040.0)
#define PE_S9 (1.0 / 362880.0)
#define PE_S11 (-1.0 / 39916800.0)
#define PE_S13 (1.0 / 6227020800.0)
#define PE_S15 (-1.0 / 1307674368000.0)
#define PE_S17 (1.0 / 355687428096000.0)
#define PE_C2 (-1.0 / 2.0)
#define PE_C4 (1.0 / 24.0)
#define PE_C6 (-1.0 / 720.0)
#define PE_C8 (1.0 / 40320.0)
#define PE_C10 (-1.0 / 3628800.0)
#define PE_C12 (1.0 / 479001600.0)
#define PE_C14 (-1.0 / 87178291200.0)
#define PE_C16 (1.0 / 20922789888000.0)
#define PE_C18 (-1.0 / 6402373705728000.0)

/*
 * sin, cos and cos-1 of 2*pi*K*f where f = fr->fh + fr->fl, K a double
 * (an integer position, or any real position).  Absolute error <= ~1 ulp of
 * 1.0 for |K*f| < PE_MAX_TURNS.  Branch-free so loops over i vectorise.
 *
 * Three stages, each its own loop in pe_sincos_row: the reduction of K*f to an
 * angle x + xl (radians, |x| <= ~pi/4) and a quarter-turn count q; the two
 * polynomials in x; the low-part correction and the move to q's quadrant.  As
 * one loop, the body is a single dependency chain of ~50 operations, too long
 * for the out-of-order window to overlap enough iterations to keep the FP
 * units busy; each stage's chain is short enough.
 */
PE_INLINE void pe_sincos_reduce(double K, double Kh, double Kl,
                                double fh, double fhh, double fhl, double fl,
                                double *x_out, double *xl_out, uint64_t *q_out) {
    /* t = K * f exactly enough: Dekker product with pre-split halves. */
    double ph = K * fh;
    double pl = ((Kh * fhh - ph) + Kh * fhl + Kl * fhh) + Kl * fhl;
    pl += K * fl;
    /* quarter turns: u = 4t; n = nearest integer (exact for |u| < 2^51) */
    double u = 4.0 * ph;
    double un = u + PE_MAGIC;
    double n = un - PE_MAGIC;
    pe_dd v = pe_two_sum(u - n, 4.0 * pl);   /* u - n is exact */
    /* a second rounding keeps |v| <= 1/2 even when pl is as large as ulp(ph) */
    double vn = v.hi + PE_MAGIC;
    double n2 = vn - PE_MAGIC;
    v.hi -= n2;
    v = pe_fast_two_sum(v.hi, v.lo);
    /* angle a = v * pi/2 as double-double */
    pe_dd a = pe_two_prod(v.hi, PE_PIO2_HI);
    a.lo += v.hi * PE_PIO2_LO + v.lo * PE_PIO2_HI;
    a = pe_fast_two_sum(a.hi, a.lo);
    *x_out = a.hi;
    *xl_out = a.lo;
    /* The quadrant (n + n2) mod 4, read off the rounded sums: un and vn lie in
     * [2^52, 2^53), where the spacing is 1, so their bit patterns are those of
     * 1.5*2^52 (low bits 0) plus n and n2.  Integer ops, off the FP adders. */
    uint64_t bu, bv;
    memcpy(&bu, &un, sizeof bu);
    memcpy(&bv, &vn, sizeof bv);
    *q_out = bu + bv;
}

/* The polynomials: sq = sin(x) - x and cm = cos(x) - 1. */
PE_INLINE void pe_sincos_poly(double x, double *sq_out, double *cm_out) {
    double z = x * x;
    *sq_out = x * z * (PE_S3 + z * (PE_S5 + z * (PE_S7 + z * (PE_S9 + z * (PE_S11 +
              z * (PE_S13 + z * (PE_S15 + z * PE_S17)))))));
    *cm_out = z * (PE_C2 + z * (PE_C4 + z * (PE_C6 + z * (PE_C8 + z * (PE_C10 +
              z * (PE_C12 + z * (PE_C14 + z * (PE_C16 + z * PE_C18))))))));
}

/*
 * sin, cos, cos-1 of (x + xl) + r*pi/2, r = q mod 4, from the polynomials at x.
 * r = 1 swaps sin and cos (cos negated), r = 2 negates both, r = 3 swaps them
 * (sin negated).  The negations flip the sign bit (which is what IEEE negation
 * does) with an integer xor, no compare needed.
 */
PE_INLINE void pe_sincos_finish(double x, double xl, double sq, double cm, uint64_t q,
                                double *s_out, double *c_out, double *cm1_out) {
    /* The low part of the angle enters to first order (sin(x+e) ~ sin x + e cos x),
     * added to the small terms first so the big term x or 1 is rounded only once. */
    double s0 = x + (sq + xl * (1.0 + cm));
    double cm0 = cm - xl * (x + sq);
    double c0 = 1.0 + cm0;
    uint64_t r = q & 3;
    double s = (r & 1) ? c0 : s0;
    double c = (r & 1) ? s0 : c0;
    uint64_t bs, bc;
    memcpy(&bs, &s, sizeof bs);
    memcpy(&bc, &c, sizeof bc);
    bs ^= (r & 2) << 62;                /* negate sin for r = 2, 3 */
    bc ^= ((r ^ (r << 1)) & 2) << 62;   /* negate cos for r = 1, 2 */
    memcpy(&s, &bs, sizeof s);
    memcpy(&c, &bc, sizeof c);
    *s_out = s;
    *c_out = c;
    /* cos-1: exact polynomial value in quadrant 0 (small angles lose nothing) */
    *cm1_out = (r == 0) ? cm0 : c - 1.0;
}

PE_INLINE void pe_sincos_turns(double K, double Kh, double Kl,
                               double fh, double fhh, double fhl, double fl,
                               double *s_out, double *c_out, double *cm1_out) {
    double x, xl, sq, cm;
    uint64_t q;
    pe_sincos_reduce(K, Kh, Kl, fh, fhh, fhl, fl, &x, &xl, &q);
    pe_sincos_poly(x, &sq, &cm);
    pe_sincos_finish(x, xl, sq, cm, q, s_out, c_out, cm1_out);
}

/* Chunk of the staged row evaluation: its intermediates stay in L1 between
 * the stages. */
#define PE_SINCOS_CHUNK 256

/* sin/cos (and cos-1) of 2*pi*K*f_i for i in [0, nf): pe_sincos_turns along a
 * row, stage by stage per chunk.  The reduction's x, xl, q are parked in s, c,
 * cm1 (overwritten in place by the last stage), the polynomials on the stack. */
PE_TARGET_CLONES
static void pe_sincos_row(double K, pe_freq fr, int64_t nf,
                          double *PE_RESTRICT s, double *PE_RESTRICT c,
                          double *PE_RESTRICT cm1) {
    const double *PE_RESTRICT fh = fr.fh;
    const double *PE_RESTRICT fhh = fr.fhh;
    const double *PE_RESTRICT fhl = fr.fhl;
    const double *PE_RESTRICT fl = fr.fl;
    double sq[PE_SINCOS_CHUNK], cm[PE_SINCOS_CHUNK];
    double Kh, Kl;
    pe_split(K, &Kh, &Kl);
    for (int64_t i0 = 0; i0 < nf; i0 += PE_SINCOS_CHUNK) {
        int64_t m = nf - i0 < PE_SINCOS_CHUNK ? nf - i0 : PE_SINCOS_CHUNK;
        double *PE_RESTRICT x = s + i0, *PE_RESTRICT xl = c + i0, *PE_RESTRICT qd = cm1 + i0;
        PE_IVDEP
        for (int64_t j = 0; j < m; j++) {
            int64_t i = i0 + j;
            uint64_t q;
            pe_sincos_reduce(K, Kh, Kl, fh[i], fhh[i], fhl[i], fl[i], &x[j], &xl[j], &q);
            memcpy(&qd[j], &q, sizeof q);
        }
        PE_IVDEP
        for (int64_t j = 0; j < m; j++) {
            pe_sincos_poly(x[j], &sq[j], &cm[j]);
        }
        PE_IVDEP
        for (int64_t j = 0; j < m; j++) {
            uint64_t q;
            memcpy(&q, &qd[j], sizeof q);
            pe_sincos_finish(x[j], xl[j], sq[j], cm[j], q, &x[j], &xl[j], &qd[j]);
        }
    }
}

/* ------------------------------------------------------------------------- */
/* Composing rotations, and the row writers (the hot loop)                   */
/* ------------------------------------------------------------------------- */
/*
 * Rotations are kept as (cos t - 1, sin t): for small t the first is tiny and
 * carries full relative precision, where cos t itself would round it away.
 * Rotating an anchor angle A by a table angle t:
 *   sin(A + t) = sA + (sA*(cos t - 1) + cA*sin t)
 *   cos(A + t) = cA + (cA*(cos t - 1) - sA*sin t)
 * The bracket is small when t is small, so its rounding error is too.
 */

/* (m, s) = (m1, s1) o (m0, s0), i.e. the rotation by t1 + t0. */
PE_TARGET_CLONES
static void pe_compose(int64_t nf, const double *PE_RESTRICT m1, const double *PE_RESTRICT s1,
                          const double *PE_RESTRICT m0, const double *PE_RESTRICT s0,
                          double *PE_RESTRICT m, double *PE_RESTRICT s) {
    for (int64_t i = 0; i < nf; i++) {
        double c1 = 1.0 + m1[i];
        m[i] = m1[i] + (c1 * m0[i] - s1[i] * s0[i]);
        s[i] = s1[i] + (s1[i] * m0[i] + c1 * s0[i]);
    }
}

/*
 * Where each frequency's sine and cosine go in an output row.  Every
 * convention in use is one of these (see fastpe/_conventions.py):
 *   interleaved: sin_i at col 2i, cos_i at col 2i+1 for i < npairs, then an
 *                optional lone sine (Vaswani, odd d) at col d-1;
 *   split:       sin_i at col s_off+i (i < ns), cos_i at col c_off+i (i < nc)
 *                ([sin | cos] or, flipped, [cos | sin]);
 *   zero_col >= 0: that column is 0 (conventions that pad an odd width).
 */
#define PE_LAYOUT_INTERLEAVED 0
#define PE_LAYOUT_SPLIT 1

typedef struct {
    int64_t d;        /* output width */
    int64_t nf;       /* number of frequencies */
    double w0, base, denom;   /* w_i = w0 * base^(-i/denom) */
    int layout;
    int64_t npairs;   /* interleaved */
    int lone_sin;     /* interleaved: sin_{npairs} at col d-1 */
    int64_t s_off, ns, c_off, nc;   /* split */
    int64_t zero_col; /* -1: none */
} pe_spec;

/* Rotated sine / cosine of frequency i: the formulas above, for a table angle
 * of sign sg (+1 or -1: sin(-t) = -sin t, cos(-t) - 1 = cos t - 1).  Rows are
 * grouped around a central anchor, so one table row serves the rows at +t and
 * -t; multiplying by sg = +-1 is exact, so a row written alone (pe_row) and the
 * same row written as half of a mirrored pair (pe_row2) have identical bits. */
#define PE_SIN(i) (As[i] + (As[i] * Tm[i] + Ac[i] * (Ts[i] * sg)))
#define PE_COS(i) (Ac[i] + (Ac[i] * Tm[i] - As[i] * (Ts[i] * sg)))

/*
 * The hot loops.  Per frequency pair, four loads give two outputs (a
 * per-column formulation needs four loads per output and is load-port bound);
 * the mirrored writers (2) give four outputs -- rows c+t and c-t -- from the
 * same four loads and four products.
 *
 * Each loop first writes the few entries before the first 64-byte boundary of
 * its (first) destination, one at a time, so the vector loop's stores never
 * straddle two cache lines.  That matters: NumPy's large arrays start 16 bytes
 * past a page boundary, and split stores measured 1.2-2x slower (C harness,
 * 2 threads, 4096x1024 float32: 0.50 ms aligned vs 0.62-0.70 ms at +16 bytes).
 * The head and the vector loop perform the same operations, so the bits do
 * not depend on the alignment.
 */
PE_INLINE int64_t pe_head(const void *p, size_t unit, int64_t n) {
    size_t m = (size_t)((uintptr_t)p & 63);
    int64_t h = (m % unit) ? 0 : (int64_t)(((64 - m) & 63) / unit);
    return h < n ? h : n;
}
#define PE_PAIRS_BODY(T, i)                                                               \
    row[2 * (i)] = (T)PE_SIN(i);                                                          \
    row[2 * (i) + 1] = (T)PE_COS(i);
#define PE_PAIRS2_BODY(T, i)                                                              \
    {                                                                                     \
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i];                                    \
        double p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];                                    \
        rp[2 * (i)] = (T)(As[i] + (p1 + p2));                                             \
        rp[2 * (i) + 1] = (T)(Ac[i] + (p3 - p4));                                         \
        rm[2 * (i)] = (T)(As[i] + (p1 - p2));                                             \
        rm[2 * (i) + 1] = (T)(Ac[i] + (p3 + p4));                                         \
    }
#define PE_SPLIT_BODY(T, i)                                                               \
    rs[i] = (T)PE_SIN(i);                                                                 \
    rc[i] = (T)PE_COS(i);
#define PE_SPLIT2_BODY(T, i)                                                              \
    {                                                                                     \
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i];                                    \
        double p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];                                    \
        rsp[i] = (T)(As[i] + (p1 + p2));                                                  \
        rcp[i] = (T)(Ac[i] + (p3 - p4));                                                  \
        rsm[i] = (T)(As[i] + (p1 - p2));                                                  \
        rcm[i] = (T)(Ac[i] + (p3 + p4));                                                  \
    }
#define PE_DEFINE_ROW_WRITERS(T, SUFFIX)                                                  \
PE_TARGET_CLONES                                                                          \
static void pe_pairs_##SUFFIX(T *PE_RESTRICT row, int64_t np,                             \
        const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,                       \
        const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts, double sg) {          \
    int64_t h = pe_head(row, 2 * sizeof(T), np), i;                                       \
    for (i = 0; i < h; i++) { PE_PAIRS_BODY(T, i) }                                       \
    for (i = h; i < np; i++) { PE_PAIRS_BODY(T, i) }                                      \
}                                                                                         \
PE_TARGET_CLONES                                                                          \
static void pe_pairs2_##SUFFIX(T *PE_RESTRICT rp, T *PE_RESTRICT rm, int64_t np,          \
        const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,                       \
        const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts) {                     \
    int64_t h = pe_head(rp, 2 * sizeof(T), np), i;                                        \
    for (i = 0; i < h; i++) PE_PAIRS2_BODY(T, i)                                          \
    for (i = h; i < np; i++) PE_PAIRS2_BODY(T, i)                                         \
}                                                                                         \
PE_TARGET_CLONES                                                                          \
static void pe_split_##SUFFIX(T *PE_RESTRICT rs, T *PE_RESTRICT rc, int64_t n,            \
        const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,                       \
        const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts, double sg) {          \
    int64_t h = pe_head(rs, sizeof(T), n), i;                                             \
    for (i = 0; i < h; i++) { PE_SPLIT_BODY(T, i) }                                       \
    for (i = h; i < n; i++) { PE_SPLIT_BODY(T, i) }                                       \
}                                                                                         \
PE_TARGET_CLONES                                                                          \
static void pe_split2_##SUFFIX(T *PE_RESTRICT rsp, T *PE_RESTRICT rcp,                    \
        T *PE_RESTRICT rsm, T *PE_RESTRICT rcm, int64_t n,                                \
        const double *PE_RESTRICT As, const double *PE_RESTRICT Ac,                       \
        const double *PE_RESTRICT Tm, const double *PE_RESTRICT Ts) {                     \
    int64_t h = pe_head(rsp, sizeof(T), n), i;                                            \
    for (i = 0; i < h; i++) PE_SPLIT2_BODY(T, i)                                          \
    for (i = h; i < n; i++) PE_SPLIT2_BODY(T, i)                                          \
}                                                                                         \
/* The few columns the vector loops leave: an odd width's lone sine, the longer           \
 * block of a split layout, the no-encoding column.  `zero` is what that column           \
 * gets: 0.0, or -0.0 in a row that will be added (x + -0.0 == x for every x,             \
 * including x = -0.0). */                                                                \
PE_INLINE void pe_row_rest_##SUFFIX(T *row, const pe_spec *sp, double zero,               \
        const double *As, const double *Ac, const double *Tm, const double *Ts,           \
        double sg) {                                                                      \
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {                                            \
        if (sp->lone_sin)                                                                 \
            row[sp->d - 1] = (T)PE_SIN(sp->npairs);                                       \
    } else {                                                                              \
        int64_t n = sp->ns < sp->nc ? sp->ns : sp->nc;                                    \
        for (int64_t i = n; i < sp->ns; i++)                                              \
            row[sp->s_off + i] = (T)PE_SIN(i);                                            \
        for (int64_t i = n; i < sp->nc; i++)                                              \
            row[sp->c_off + i] = (T)PE_COS(i);                                            \
    }                                                                                     \
    if (sp->zero_col >= 0)                                                                \
        row[sp->zero_col] = (T)zero;                                                      \
}                                                                                         \
/* One row: the anchor (As, Ac) rotated by the table row (Tm, Ts*sg), by the             \
 * AVX-512 writer where there is one (same bits). */                                      \
PE_INLINE void pe_row_##SUFFIX(T *row, const pe_spec *sp, double zero,                    \
        const double *As, const double *Ac, const double *Tm, const double *Ts,           \
        double sg) {                                                                      \
    if (!pe_row1_v512_##SUFFIX(row, sp, As, Ac, Tm, Ts, sg)) {                            \
        if (sp->layout == PE_LAYOUT_INTERLEAVED) {                                        \
            pe_pairs_##SUFFIX(row, sp->npairs, As, Ac, Tm, Ts, sg);                       \
        } else {                                                                          \
            int64_t n = sp->ns < sp->nc ? sp->ns : sp->nc;                                \
            pe_split_##SUFFIX(row + sp->s_off, row + sp->c_off, n, As, Ac, Tm, Ts, sg);   \
        }                                                                                 \
    }                                                                                     \
    pe_row_rest_##SUFFIX(row, sp, zero, As, Ac, Tm, Ts, sg);                              \
}                                                                                         \
/* Two rows: rp rotated by +t, rm by -t (bitwise what pe_row gives each). */              \
PE_INLINE void pe_row2_##SUFFIX(T *rp, T *rm, const pe_spec *sp, double zero,             \
        const double *As, const double *Ac, const double *Tm, const double *Ts) {         \
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {                                            \
        pe_pairs2_##SUFFIX(rp, rm, sp->npairs, As, Ac, Tm, Ts);                           \
    } else {                                                                              \
        int64_t n = sp->ns < sp->nc ? sp->ns : sp->nc;                                    \
        pe_split2_##SUFFIX(rp + sp->s_off, rp + sp->c_off, rm + sp->s_off,                \
                           rm + sp->c_off, n, As, Ac, Tm, Ts);                            \
    }                                                                                     \
    pe_row_rest_##SUFFIX(rp, sp, zero, As, Ac, Tm, Ts, 1.0);                              \
    pe_row_rest_##SUFFIX(rm, sp, zero, As, Ac, Tm, Ts, -1.0);                             \
}                                                                                         \
/* A row whose encoding is all zeros (fairseq's padding position). */                    \
PE_INLINE void pe_zero_row_##SUFFIX(T *row, int64_t d, double zero) {                     \
    for (int64_t x = 0; x < d; x++) row[x] = (T)zero;                                     \
}                                                                                         \
/* The fused add: x = x*scale + pe, pe a finished row in double, so x is rounded          \
 * once (the same value a float64 table added in float64 would give). */                 \
PE_TARGET_CLONES                                                                          \
static void pe_add_row_##SUFFIX(T *PE_RESTRICT x, const double *PE_RESTRICT pe,           \
        int64_t n, double scale) {                                                        \
    int64_t h = pe_head(x, sizeof(T), n), i;                                              \
    for (i = 0; i < h; i++)                                                               \
        x[i] = (T)((double)x[i] * scale + pe[i]);                                         \
    for (i = h; i < n; i++)                                                               \
        x[i] = (T)((double)x[i] * scale + pe[i]);                                         \
}

/*
 * Streaming (non-temporal) copy of a finished row to its destination.  A table
 * larger than the caches is written once and not read back by the filler: plain
 * stores first read every destination line into the cache (read-for-ownership),
 * doubling the memory traffic; streaming stores skip that read.  SSE2 is the
 * x86-64 baseline, so every x86-64 build has them; elsewhere this is memcpy.
 * pe_stream_fence() must follow a thread's last streaming store (they are weakly
 * ordered) before other threads may read the rows.
 */
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define PE_HAVE_STREAM 1
PE_INLINE void pe_stream_copy(void *dst, const void *src, size_t n) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
        _mm_stream_si128((__m128i *)(d + 16), _mm_loadu_si128((const __m128i *)(s + 16)));
        _mm_stream_si128((__m128i *)(d + 32), _mm_loadu_si128((const __m128i *)(s + 32)));
        _mm_stream_si128((__m128i *)(d + 48), _mm_loadu_si128((const __m128i *)(s + 48)));
    }
    for (; n >= 16; n -= 16, d += 16, s += 16)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    memcpy(d, s, n);
}
PE_INLINE void pe_stream_fence(void) { _mm_sfence(); }
#else
#define PE_HAVE_STREAM 0
PE_INLINE void pe_stream_copy(void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
PE_INLINE void pe_stream_fence(void) {}
#endif

/* Ask for the lines of [p, p+n) ahead of a write.  The fused add visits one row
 * of each sequence in turn (rows far apart in x); hardware prefetchers follow a
 * stream only within a page, so each jump would start cold.  Measured: 1 thread,
 * x of (32, 2048, 1024) float32: 32.8 -> 26.8 ms, the speed of NumPy's x *= s. */
PE_INLINE void pe_prefetch_write(const void *p, size_t n) {
#if defined(__GNUC__) || defined(__clang__)
    const char *c = (const char *)p;
    for (size_t k = 0; k < n; k += 64)
        __builtin_prefetch(c + k, 1, 3);
#else
    (void)p;
    (void)n;
#endif
}

/*
 * AVX-512 row writers.  Where the CPU has AVX-512F (checked once, pe_v512_init)
 * the mirrored rows c+t and c-t, and the rows written alone, are written by
 * these instead of the compiler-vectorised loops above:
 *   - the few entries before the first 64-byte boundary (and after the last
 *     whole vector) are one vector block stored under a mask, not a scalar
 *     loop (which cost ~10% of a 1024-wide row) nor a buffer and a copy
 *     (streaming 16384x1024 out=: 3.1 -> 2.4 ms float32, 5.8 -> 4.2 ms
 *     float64 was the gap between a NumPy array and a 64-byte aligned one);
 *   - with nt, the rows go straight from registers to memory with non-temporal
 *     stores (no row buffer, no copy): for tables that outgrow the last-level
 *     cache that is the whole game (C harness, 2 threads, 32768x1024 float32,
 *     128 MiB: 4.9 ms vs 9.2 ms through a row buffer, 9.2 ms plain).
 * The vector code performs the IEEE operations of PE_PAIRS2_BODY /
 * PE_SPLIT2_BODY in the same order (no FMA: built with -ffp-contract=off), so
 * the bits are those of the portable loops (a row alone is one half of a pair:
 * see PE_V512_PAIR below).  Functions return 0 when they cannot take a row (no
 * AVX-512F, a row shorter than one vector block, or, for nt, destinations that
 * one head cannot align together); the caller then uses the portable path.
 */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(FASTPE_NO_AVX512_WRITERS)
#include <immintrin.h>
#define PE_HAVE_V512 1
static int pe_v512_cpu = 0, pe_v512 = 0;
static void pe_v512_init(void) {
    __builtin_cpu_init();
    pe_v512_cpu = pe_v512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
}

#define PE_V512_CORE(i, X)                                                                \
    __m512d as##X = _mm512_loadu_pd(As + (i)), ac##X = _mm512_loadu_pd(Ac + (i));         \
    __m512d tm##X = _mm512_loadu_pd(Tm + (i)), ts##X = _mm512_loadu_pd(Ts + (i));         \
    __m512d p1##X = _mm512_mul_pd(as##X, tm##X), p2##X = _mm512_mul_pd(ac##X, ts##X);     \
    __m512d p3##X = _mm512_mul_pd(ac##X, tm##X), p4##X = _mm512_mul_pd(as##X, ts##X);     \
    __m512d sp##X = _mm512_add_pd(as##X, _mm512_add_pd(p1##X, p2##X));                    \
    __m512d cp##X = _mm512_add_pd(ac##X, _mm512_sub_pd(p3##X, p4##X));                    \
    __m512d sm##X = _mm512_add_pd(as##X, _mm512_sub_pd(p1##X, p2##X));                    \
    __m512d cm##X = _mm512_add_pd(ac##X, _mm512_add_pd(p3##X, p4##X));
#define PE_V512_ARGS const double *As, const double *Ac, const double *Tm, const double *Ts

PE_INLINE int pe_aligned64(const void *a, const void *b, const void *c, const void *d) {
    return ((((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 63) == 0);
}

/*
 * Each writer: a head block at frequency 0 stored under a mask (the entries
 * before the first 64-byte boundary), whole blocks with aligned full stores
 * (streaming if nt), and a tail block at the last whole-block position stored
 * under a mask (the entries after the last full block; it recomputes a few
 * entries of the previous block, with the same bits, and does not store them).
 * Masked stores touch only their lanes, so nothing outside the row is written.
 */
#define PE_V512_STORE(kind, dst, vec, nt)                                                 \
    do {                                                                                  \
        if (nt)                                                                           \
            _mm512_stream_##kind(dst, vec);                                               \
        else                                                                              \
            _mm512_storeu_##kind(dst, vec);                                               \
    } while (0)

/* Line-local partial stores, for destinations whose whole blocks are 64-byte
 * aligned: the head (lanes 0..cnt-1 of v to p[0..cnt), p + cnt on a boundary)
 * and the tail (lanes L.. of v to p[0..), p on a boundary) each go into one
 * cache line.  A masked store at an unaligned address spans two lines, and in a
 * streaming fill that costs more than the whole row (measured 16384x1024
 * float32: 4.5 vs 2.3 ms): the second, masked-off line is still fetched, then
 * evicted again by the streaming stores that follow. */
__attribute__((target("avx512f")))
static inline void pe_head_ps(float *p, int64_t cnt, __m512 v) {
    int off = (int)(16 - cnt);
    __m512i idx = _mm512_sub_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32(off));
    _mm512_mask_storeu_ps(p - off, (__mmask16)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_ps(idx, v));
}
__attribute__((target("avx512f")))
static inline void pe_tail_ps(float *p, int64_t L, __m512 v) {
    __m512i idx = _mm512_add_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)L));
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << (16 - L)) - 1u), _mm512_permutexvar_ps(idx, v));
}
__attribute__((target("avx512f")))
static inline void pe_head_pd(double *p, int64_t cnt, __m512d v) {
    int off = (int)(8 - cnt);
    __m512i idx = _mm512_sub_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm512_set1_epi64(off));
    _mm512_mask_storeu_pd(p - off, (__mmask8)(((1u << cnt) - 1u) << off),
                          _mm512_permutexvar_pd(idx, v));
}
/* tail of the 16 lanes [a | b] from lane L (L >= 1): to p[0..16-L), p aligned */
__attribute__((target("avx512f")))
static inline void pe_tail2_pd(double *p, int64_t L, __m512d a, __m512d b) {
    __m512i iota = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    int64_t n = 16 - L;
    __m512d lo = _mm512_permutex2var_pd(a, _mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
    _mm512_mask_storeu_pd(p, (__mmask8)(n >= 8 ? 0xFFu : (1u << n) - 1u), lo);
    if (n > 8) {
        __m512d hi = _mm512_permutexvar_pd(_mm512_add_epi64(iota, _mm512_set1_epi64(L)), b);
        _mm512_mask_storeu_pd(p + 8, (__mmask8)((1u << (n - 8)) - 1u), hi);
    }
}
__attribute__((target("avx512f")))
static inline void pe_tail_pd(double *p, int64_t L, __m512d v) {
    __m512i idx = _mm512_add_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0),
                                   _mm512_set1_epi64(L));
    _mm512_mask_storeu_pd(p, (__mmask8)((1u << (8 - L)) - 1u), _mm512_permutexvar_pd(idx, v));
}

/*
 * Each layout and dtype has one skeleton for both of its uses.  `rows` is a
 * constant at every call, so the skeleton is inlined and what a call does not
 * store is compiled away:
 *   PE_V512_PAIR:  the mirrored pair, rp at +t and rm at -t;
 *   PE_V512_PLUS, PE_V512_MINUS: one row, rp, the +t or the -t half of the pair
 *                  (rm must be rp; it is never stored).  A row of sign sg is the
 *                  half of that sign: multiplying by sg = +-1 is exact, so those
 *                  are the bits of PE_SIN / PE_COS.
 */
#define PE_V512_PAIR 0
#define PE_V512_PLUS 1
#define PE_V512_MINUS 2
#define PE_V512_SKELETON static inline __attribute__((always_inline, target("avx512f")))

/* interleaved float32: a block is 8 frequencies = 16 floats of each row */
PE_V512_SKELETON
int pe_v512_pairs_f32(float *rp, float *rm, int rows, int64_t np, PE_V512_ARGS, int nt) {
    const __m512i ix = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const int two = rows == PE_V512_PAIR;
    __m512 p, m;
    __mmask16 k;
    int64_t h, v, i, t0;
    int al;
    if (np < 8)
        return 0;
    h = pe_head(rp, 2 * sizeof(float), np);
    if (h >= 8)
        h = 0;
    al = pe_aligned64(rp + 2 * h, rm + 2 * h, rp + 2 * h, rm + 2 * h);
    if (nt && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        p = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sp0)), ix,      \
                                   _mm512_castps256_ps512(_mm512_cvtpd_ps(cp0)));         \
        m = _mm512_permutex2var_ps(_mm512_castps256_ps512(_mm512_cvtpd_ps(sm0)), ix,      \
                                   _mm512_castps256_ps512(_mm512_cvtpd_ps(cm0)));         \
        if (rows == PE_V512_MINUS)                                                        \
            p = m;                                                                        \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_ps(rp, 2 * h, p);
            if (two)
                pe_head_ps(rm, 2 * h, m);
        } else {
            k = (__mmask16)((1u << (2 * h)) - 1u);
            _mm512_mask_storeu_ps(rp, k, p);
            if (two)
                _mm512_mask_storeu_ps(rm, k, m);
        }
    }
    v = h + (np - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(ps, rp + 2 * i, p, nt);
        if (two)
            PE_V512_STORE(ps, rm + 2 * i, m, nt);
    }
    if (v < np) {
        t0 = np - 8;
        PE_BLK(t0)
        if (al) {
            pe_tail_ps(rp + 2 * v, 2 * (v - t0), p);
            if (two)
                pe_tail_ps(rm + 2 * v, 2 * (v - t0), m);
        } else {
            k = (__mmask16)((0xFFFFu << (2 * (v - t0))) & 0xFFFFu);
            _mm512_mask_storeu_ps(rp + 2 * t0, k, p);
            if (two)
                _mm512_mask_storeu_ps(rm + 2 * t0, k, m);
        }
    }
#undef PE_BLK
    return 1;
}

/* interleaved float64: a block is 8 frequencies = 16 doubles (two vectors) */
PE_V512_SKELETON
int pe_v512_pairs_f64(double *rp, double *rm, int rows, int64_t np, PE_V512_ARGS, int nt) {
    const __m512i lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
    const __m512i hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
    const int two = rows == PE_V512_PAIR;
    __m512d p0, p1, m0, m1;
    __mmask8 k0, k1;
    int64_t h, v, i, t0, L;
    int al;
    if (np < 8)
        return 0;
    h = pe_head(rp, 2 * sizeof(double), np);
    if (h >= 4)
        h = 0;
    al = pe_aligned64(rp + 2 * h, rm + 2 * h, rp + 2 * h, rm + 2 * h);
    if (nt && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        p0 = _mm512_permutex2var_pd(sp0, lo, cp0);                                        \
        p1 = _mm512_permutex2var_pd(sp0, hi, cp0);                                        \
        m0 = _mm512_permutex2var_pd(sm0, lo, cm0);                                        \
        m1 = _mm512_permutex2var_pd(sm0, hi, cm0);                                        \
        if (rows == PE_V512_MINUS) {                                                      \
            p0 = m0;                                                                      \
            p1 = m1;                                                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_pd(rp, 2 * h, p0);
            if (two)
                pe_head_pd(rm, 2 * h, m0);
        } else {
            k0 = (__mmask8)((1u << (2 * h)) - 1u);
            _mm512_mask_storeu_pd(rp, k0, p0);
            if (two)
                _mm512_mask_storeu_pd(rm, k0, m0);
        }
    }
    v = h + (np - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(pd, rp + 2 * i, p0, nt);
        PE_V512_STORE(pd, rp + 2 * i + 8, p1, nt);
        if (two) {
            PE_V512_STORE(pd, rm + 2 * i, m0, nt);
            PE_V512_STORE(pd, rm + 2 * i + 8, m1, nt);
        }
    }
    if (v < np) {
        t0 = np - 8;
        PE_BLK(t0)
        L = 2 * (v - t0);               /* first lane to store, of 16 */
        if (al) {
            pe_tail2_pd(rp + 2 * v, L, p0, p1);
            if (two)
                pe_tail2_pd(rm + 2 * v, L, m0, m1);
        } else {
            k0 = (__mmask8)(L < 8 ? (0xFFu << L) & 0xFFu : 0u);
            k1 = (__mmask8)(L < 8 ? 0xFFu : (0xFFu << (L - 8)) & 0xFFu);
            _mm512_mask_storeu_pd(rp + 2 * t0, k0, p0);
            _mm512_mask_storeu_pd(rp + 2 * t0 + 8, k1, p1);
            if (two) {
                _mm512_mask_storeu_pd(rm + 2 * t0, k0, m0);
                _mm512_mask_storeu_pd(rm + 2 * t0 + 8, k1, m1);
            }
        }
    }
#undef PE_BLK
    return 1;
}

__attribute__((target("avx512f")))
static inline __m512 pe_v512_cat(__m512d a, __m512d b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(a))),
        _mm256_castps_pd(_mm512_cvtpd_ps(b)), 1));
}

/* split float32: a block is 16 frequencies = 16 floats in each of the four
 * destinations (d0/d1 sines/cosines of rp, d2/d3 of rm; one row: d2 = d0,
 * d3 = d1, never stored) */
PE_V512_SKELETON
int pe_v512_split_f32(float *d0, float *d1, float *d2, float *d3, int rows, int64_t n,
                      PE_V512_ARGS, int nt) {
    const int two = rows == PE_V512_PAIR;
    __m512 a, b, c, d;
    __mmask16 k;
    int64_t h, v, i, t0;
    int al;
    if (n < 16)
        return 0;
    h = pe_head(d0, sizeof(float), n);
    if (h >= 16)
        h = 0;
    al = pe_aligned64(d0 + h, d1 + h, d2 + h, d3 + h);
    if (nt && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        PE_V512_CORE((i) + 8, 1)                                                          \
        a = pe_v512_cat(sp0, sp1);                                                        \
        b = pe_v512_cat(cp0, cp1);                                                        \
        c = pe_v512_cat(sm0, sm1);                                                        \
        d = pe_v512_cat(cm0, cm1);                                                        \
        if (rows == PE_V512_MINUS) {                                                      \
            a = c;                                                                        \
            b = d;                                                                        \
        }                                                                                 \
    }
#define PE_MSTORE(off, k)                                                                 \
    {                                                                                     \
        _mm512_mask_storeu_ps(d0 + (off), k, a);                                          \
        _mm512_mask_storeu_ps(d1 + (off), k, b);                                          \
        if (two) {                                                                        \
            _mm512_mask_storeu_ps(d2 + (off), k, c);                                      \
            _mm512_mask_storeu_ps(d3 + (off), k, d);                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_ps(d0, h, a);
            pe_head_ps(d1, h, b);
            if (two) {
                pe_head_ps(d2, h, c);
                pe_head_ps(d3, h, d);
            }
        } else {
            k = (__mmask16)((1u << h) - 1u);
            PE_MSTORE(0, k)
        }
    }
    v = h + (n - h) / 16 * 16;
    for (i = h; i < v; i += 16) {
        PE_BLK(i)
        PE_V512_STORE(ps, d0 + i, a, nt);
        PE_V512_STORE(ps, d1 + i, b, nt);
        if (two) {
            PE_V512_STORE(ps, d2 + i, c, nt);
            PE_V512_STORE(ps, d3 + i, d, nt);
        }
    }
    if (v < n) {
        t0 = n - 16;
        PE_BLK(t0)
        if (al) {
            pe_tail_ps(d0 + v, v - t0, a);
            pe_tail_ps(d1 + v, v - t0, b);
            if (two) {
                pe_tail_ps(d2 + v, v - t0, c);
                pe_tail_ps(d3 + v, v - t0, d);
            }
        } else {
            k = (__mmask16)((0xFFFFu << (v - t0)) & 0xFFFFu);
            PE_MSTORE(t0, k)
        }
    }
#undef PE_MSTORE
#undef PE_BLK
    return 1;
}

/* split float64: a block is 8 frequencies = 8 doubles in each destination */
PE_V512_SKELETON
int pe_v512_split_f64(double *d0, double *d1, double *d2, double *d3, int rows, int64_t n,
                      PE_V512_ARGS, int nt) {
    const int two = rows == PE_V512_PAIR;
    __m512d a, b, c, d;
    __mmask8 k;
    int64_t h, v, i, t0;
    int al;
    if (n < 8)
        return 0;
    h = pe_head(d0, sizeof(double), n);
    if (h >= 8)
        h = 0;
    al = pe_aligned64(d0 + h, d1 + h, d2 + h, d3 + h);
    if (nt && !al)
        return 0;
#define PE_BLK(i)                                                                         \
    {                                                                                     \
        PE_V512_CORE(i, 0)                                                                \
        a = sp0;                                                                          \
        b = cp0;                                                                          \
        c = sm0;                                                                          \
        d = cm0;                                                                          \
        if (rows == PE_V512_MINUS) {                                                      \
            a = c;                                                                        \
            b = d;                                                                        \
        }                                                                                 \
    }
#define PE_MSTORE(off, k)                                                                 \
    {                                                                                     \
        _mm512_mask_storeu_pd(d0 + (off), k, a);                                          \
        _mm512_mask_storeu_pd(d1 + (off), k, b);                                          \
        if (two) {                                                                        \
            _mm512_mask_storeu_pd(d2 + (off), k, c);                                      \
            _mm512_mask_storeu_pd(d3 + (off), k, d);                                      \
        }                                                                                 \
    }
    if (h > 0) {
        PE_BLK(0)
        if (al) {
            pe_head_pd(d0, h, a);
            pe_head_pd(d1, h, b);
            if (two) {
                pe_head_pd(d2, h, c);
                pe_head_pd(d3, h, d);
            }
        } else {
            k = (__mmask8)((1u << h) - 1u);
            PE_MSTORE(0, k)
        }
    }
    v = h + (n - h) / 8 * 8;
    for (i = h; i < v; i += 8) {
        PE_BLK(i)
        PE_V512_STORE(pd, d0 + i, a, nt);
        PE_V512_STORE(pd, d1 + i, b, nt);
        if (two) {
            PE_V512_STORE(pd, d2 + i, c, nt);
            PE_V512_STORE(pd, d3 + i, d, nt);
        }
    }
    if (v < n) {
        t0 = n - 8;
        PE_BLK(t0)
        if (al) {
            pe_tail_pd(d0 + v, v - t0, a);
            pe_tail_pd(d1 + v, v - t0, b);
            if (two) {
                pe_tail_pd(d2 + v, v - t0, c);
                pe_tail_pd(d3 + v, v - t0, d);
            }
        } else {
            k = (__mmask8)((0xFFu << (v - t0)) & 0xFFu);
            PE_MSTORE(t0, k)
        }
    }
#undef PE_MSTORE
#undef PE_BLK
    return 1;
}

/* The entry points: pairs (2), streaming stores if nt, and one row of sign sg (1),
 * plain stores (a streamed single row is copied from a buffer by the caller). */
#define PE_DEFINE_V512_WRITERS(T, SUFFIX)                                                 \
__attribute__((target("avx512f")))                                                        \
static int pe_v512_pairs2_##SUFFIX(T *rp, T *rm, int64_t np, PE_V512_ARGS, int nt) {      \
    return pe_v512_pairs_##SUFFIX(rp, rm, PE_V512_PAIR, np, As, Ac, Tm, Ts, nt);          \
}                                                                                         \
__attribute__((target("avx512f")))                                                        \
static int pe_v512_pairs1_##SUFFIX(T *row, int64_t np, PE_V512_ARGS, double sg) {         \
    if (sg > 0.0)                                                                         \
        return pe_v512_pairs_##SUFFIX(row, row, PE_V512_PLUS, np, As, Ac, Tm, Ts, 0);     \
    return pe_v512_pairs_##SUFFIX(row, row, PE_V512_MINUS, np, As, Ac, Tm, Ts, 0);        \
}                                                                                         \
__attribute__((target("avx512f")))                                                        \
static int pe_v512_split2_##SUFFIX(T *d0, T *d1, T *d2, T *d3, int64_t n, PE_V512_ARGS,   \
                                   int nt) {                                              \
    return pe_v512_split_##SUFFIX(d0, d1, d2, d3, PE_V512_PAIR, n, As, Ac, Tm, Ts, nt);   \
}                                                                                         \
__attribute__((target("avx512f")))                                                        \
static int pe_v512_split1_##SUFFIX(T *rs, T *rc, int64_t n, PE_V512_ARGS, double sg) {    \
    if (sg > 0.0)                                                                         \
        return pe_v512_split_##SUFFIX(rs, rc, rs, rc, PE_V512_PLUS, n, As, Ac, Tm, Ts, 0); \
    return pe_v512_split_##SUFFIX(rs, rc, rs, rc, PE_V512_MINUS, n, As, Ac, Tm, Ts, 0);   \
}
PE_DEFINE_V512_WRITERS(float, f32)
PE_DEFINE_V512_WRITERS(double, f64)
#else
#define PE_HAVE_V512 0
static const int pe_v512_cpu = 0, pe_v512 = 0;
static void pe_v512_init(void) {}
#endif

/* Tests and measurements: turn the AVX-512 writers off (0) or back on where the
 * CPU has them (1); returns the old setting.  Not while a fill runs. */
static int pe_v512_set(int on) {
    int old = pe_v512;
#if PE_HAVE_V512
    pe_v512 = on && pe_v512_cpu;
#else
    (void)on;
#endif
    return old;
}

/* One row by the AVX-512 writers, all but the columns pe_row_rest writes: 1 if
 * done, 0 if the caller must write it another way. */
#if PE_HAVE_V512
#define PE_DEFINE_V512_ROW1(T, SUFFIX)                                                    \
PE_INLINE int pe_row1_v512_##SUFFIX(T *row, const pe_spec *sp, const double *As,          \
        const double *Ac, const double *Tm, const double *Ts, double sg) {                \
    int64_t n;                                                                            \
    if (!pe_v512)                                                                         \
        return 0;                                                                         \
    if (sp->layout == PE_LAYOUT_INTERLEAVED)                                              \
        return pe_v512_pairs1_##SUFFIX(row, sp->npairs, As, Ac, Tm, Ts, sg);              \
    n = sp->ns < sp->nc ? sp->ns : sp->nc;                                                \
    return pe_v512_split1_##SUFFIX(row + sp->s_off, row + sp->c_off, n, As, Ac, Tm, Ts,   \
                                   sg);                                                   \
}
#else
#define PE_DEFINE_V512_ROW1(T, SUFFIX)                                                    \
PE_INLINE int pe_row1_v512_##SUFFIX(T *row, const pe_spec *sp, const double *As,          \
        const double *Ac, const double *Tm, const double *Ts, double sg) {                \
    (void)row; (void)sp; (void)As; (void)Ac; (void)Tm; (void)Ts; (void)sg;                \
    return 0;                                                                             \
}
#endif
PE_DEFINE_V512_ROW1(float, f32)
PE_DEFINE_V512_ROW1(double, f64)

/* The row writers (after the AVX-512 ones: pe_row tries those first). */
PE_DEFINE_ROW_WRITERS(float, f32)
PE_DEFINE_ROW_WRITERS(double, f64)

/* Rows rp (+t) and rm (-t) by the AVX-512 writers, non-temporal stores if nt;
 * 1 if done, 0 if the caller must write them another way. */
#if PE_HAVE_V512
#define PE_DEFINE_V512_ROW2(T, SUFFIX)                                                    \
PE_INLINE int pe_row2_v512_##SUFFIX(T *rp, T *rm, const pe_spec *sp, const double *As,    \
        const double *Ac, const double *Tm, const double *Ts, int nt) {                   \
    int ok;                                                                               \
    if (!pe_v512)                                                                         \
        return 0;                                                                         \
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {                                            \
        ok = pe_v512_pairs2_##SUFFIX(rp, rm, sp->npairs, As, Ac, Tm, Ts, nt);             \
    } else {                                                                              \
        int64_t n = sp->ns < sp->nc ? sp->ns : sp->nc;                                    \
        ok = pe_v512_split2_##SUFFIX(rp + sp->s_off, rp + sp->c_off, rm + sp->s_off,      \
                                     rm + sp->c_off, n, As, Ac, Tm, Ts, nt);              \
    }                                                                                     \
    if (!ok)                                                                              \
        return 0;                                                                         \
    pe_row_rest_##SUFFIX(rp, sp, 0.0, As, Ac, Tm, Ts, 1.0);                               \
    pe_row_rest_##SUFFIX(rm, sp, 0.0, As, Ac, Tm, Ts, -1.0);                              \
    return 1;                                                                             \
}
#else
#define PE_DEFINE_V512_ROW2(T, SUFFIX)                                                    \
PE_INLINE int pe_row2_v512_##SUFFIX(T *rp, T *rm, const pe_spec *sp, const double *As,    \
        const double *Ac, const double *Tm, const double *Ts, int nt) {                   \
    (void)rp; (void)rm; (void)sp; (void)As; (void)Ac; (void)Tm; (void)Ts; (void)nt;       \
    return 0;                                                                             \
}
#endif
PE_DEFINE_V512_ROW2(float, f32)
PE_DEFINE_V512_ROW2(double, f64)

/* The Vaswani spec: w_i = base^(-2i/d); odd d -> a lone sine of the next
 * frequency (interleaved) or one more column in the sine block (split). */
PE_INLINE pe_spec pe_spec_vaswani(int64_t d, double base, int layout) {
    pe_spec sp;
    sp.d = d;
    sp.nf = (d + 1) / 2;
    sp.w0 = 1.0;
    sp.base = base;
    sp.denom = 0.5 * (double)d;
    sp.layout = layout;
    sp.npairs = d / 2;
    sp.lone_sin = (int)(d & 1);
    sp.s_off = 0;
    sp.ns = sp.nf;
    sp.c_off = sp.nf;
    sp.nc = d / 2;
    sp.zero_col = -1;
    return sp;
}

/* Largest frequency of a spec, in turns (|K| * this must stay < PE_MAX_TURNS). */
PE_INLINE double pe_spec_max_turns(const pe_spec *sp) {
    double lb = log(sp->base) / sp->denom;     /* w_i = w0 exp(-i lb) */
    double e = lb < 0.0 ? -lb * (double)(sp->nf - 1) : 0.0;
    return fabs(sp->w0) * exp(e) * 0.15915494309189535 * (1.0 + 1e-12);
}

#endif /* FASTPE_PE_CORE_H */
