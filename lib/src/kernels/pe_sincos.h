/*
 * Accurate sin/cos of a position times a frequency, and the rotations that
 * carry them to neighbouring positions.
 *
 * P[k, .] needs sin/cos(k * w_i).  Two error sources dominate naive code:
 *   1. rounding the angle k*w to a double (error ~ k*w*2^-53, 1e-10 at k=1e6),
 *   2. one libm call per element (slow: ~10-20 ns).
 * fastpe keeps each frequency in double-double, measured in *turns*
 * (f_i = w_i / 2pi), so the exact product k*f_i splits into an integer number
 * of quarter turns (dropped after taking the quadrant) and a small remainder
 * that is accurate to ~2^-100.  sin/cos of that remainder come from short
 * polynomials (no libm, branch-free, vectorisable).
 */
#ifndef FASTPE_PE_SINCOS_H
#define FASTPE_PE_SINCOS_H

#include "pe_dd.h"

/* |K * f| (in turns) must stay below this for the quarter-turn reduction to be
 * exact; the Python layer and the C API check positions against it. */
#define PE_MAX_TURNS 35184372088832.0 /* 2^45 */

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
    double *fh;  /* high part of f_i (turns) */
    double *fhh; /* Veltkamp split of fh: fh = fhh + fhl, each half 26 bits */
    double *fhl;
    double *fl; /* low part of f_i */
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
    pe_dd step = pe_dd_div_d(lb, -denom); /* ln q = -ln(base)/denom */
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

/* Frequencies given one by one (radians per position, each an exact double:
 * RoPE's scaled families are not geometric), in turns as double-double. */
PE_INLINE void pe_freqs_list(pe_freq fr, int64_t nf, const double *w) {
    const pe_dd inv2pi = {PE_INV2PI_HI, PE_INV2PI_LO};
    for (int64_t i = 0; i < nf; i++) {
        pe_dd f = pe_dd_mul_d(inv2pi, w[i]);
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
#define PE_S3  (-1.0 / 6.0)
#define PE_S5  (1.0 / 120.0)
#define PE_S7  (-1.0 / 5040.0)
#define PE_S9  (1.0 / 362880.0)
#define PE_S11 (-1.0 / 39916800.0)
#define PE_S13 (1.0 / 6227020800.0)
#define PE_S15 (-1.0 / 1307674368000.0)
#define PE_S17 (1.0 / 355687428096000.0)
#define PE_C2  (-1.0 / 2.0)
#define PE_C4  (1.0 / 24.0)
#define PE_C6  (-1.0 / 720.0)
#define PE_C8  (1.0 / 40320.0)
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
PE_INLINE void pe_sincos_reduce(double K, double Kh, double Kl, double fh, double fhh, double fhl,
                                double fl, double *x_out, double *xl_out, uint64_t *q_out) {
    /* t = K * f exactly enough: Dekker product with pre-split halves. */
    double ph = K * fh;
    double pl = ((Kh * fhh - ph) + Kh * fhl + Kl * fhh) + Kl * fhl;
    pl += K * fl;
    /* quarter turns: u = 4t; n = nearest integer (exact for |u| < 2^51) */
    double u = 4.0 * ph;
    double un = u + PE_MAGIC;
    double n = un - PE_MAGIC;
    pe_dd v = pe_two_sum(u - n, 4.0 * pl); /* u - n is exact */
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
    *sq_out =
        x * z *
        (PE_S3 +
         z * (PE_S5 +
              z * (PE_S7 + z * (PE_S9 + z * (PE_S11 + z * (PE_S13 + z * (PE_S15 + z * PE_S17)))))));
    *cm_out =
        z *
        (PE_C2 +
         z * (PE_C4 +
              z * (PE_C6 +
                   z * (PE_C8 +
                        z * (PE_C10 + z * (PE_C12 + z * (PE_C14 + z * (PE_C16 + z * PE_C18))))))));
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
    bs ^= (r & 2) << 62;              /* negate sin for r = 2, 3 */
    bc ^= ((r ^ (r << 1)) & 2) << 62; /* negate cos for r = 1, 2 */
    memcpy(&s, &bs, sizeof s);
    memcpy(&c, &bc, sizeof c);
    *s_out = s;
    *c_out = c;
    /* cos-1: exact polynomial value in quadrant 0 (small angles lose nothing) */
    *cm1_out = (r == 0) ? cm0 : c - 1.0;
}

PE_INLINE void pe_sincos_turns(double K, double Kh, double Kl, double fh, double fhh, double fhl,
                               double fl, double *s_out, double *c_out, double *cm1_out) {
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
PE_TARGET_CLONES PE_MAYBE_UNUSED static void pe_sincos_row(double K, pe_freq fr, int64_t nf,
                                                           double *PE_RESTRICT s,
                                                           double *PE_RESTRICT c,
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
/* Composing rotations                                                       */
/* ------------------------------------------------------------------------- */
/* (m, s) = (m1, s1) o (m0, s0), i.e. the rotation by t1 + t0, rotations kept as
 * (cos t - 1, sin t) (pe_rows.h says why). */
PE_TARGET_CLONES PE_MAYBE_UNUSED static void
pe_compose(int64_t nf, const double *PE_RESTRICT m1, const double *PE_RESTRICT s1,
           const double *PE_RESTRICT m0, const double *PE_RESTRICT s0, double *PE_RESTRICT m,
           double *PE_RESTRICT s) {
    for (int64_t i = 0; i < nf; i++) {
        double c1 = 1.0 + m1[i];
        m[i] = m1[i] + (c1 * m0[i] - s1[i] * s0[i]);
        s[i] = s1[i] + (s1[i] * m0[i] + c1 * s0[i]);
    }
}

#endif /* FASTPE_PE_SINCOS_H */
