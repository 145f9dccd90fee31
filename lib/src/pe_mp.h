/*
 * A small binary floating point of 256 bits: the exact path behind fastpe's
 * correctly rounded functions.  The double-double evaluations decide the
 * rounding of all but about one value in 2^36 (pe_crmath.h); the rest are
 * evaluated again here, with an error about 2^-200 relative, and rounded
 * from the bits themselves.
 *
 * Only integer arithmetic on 32-bit limbs (64-bit products), so the bits are
 * the same with every compiler and CPU.  Every operation truncates; the error
 * bounds in the comments count those truncations.  Not fast (a pow is tens of
 * microseconds): it runs only where the fast path cannot decide.
 */
#ifndef FASTPE_PE_MP_H
#define FASTPE_PE_MP_H

#include <stdint.h>

#include "kernels/pe_dd.h"

#define PE_MP_LIMBS 8
#define PE_MP_BITS  (32 * PE_MP_LIMBS)

/* (-1)^neg * m * 2^e, m a PE_MP_BITS-bit integer (limbs least significant
 * first) with its top bit set, or zero (every limb 0, neg 0). */
typedef struct {
    int neg;
    int64_t e;
    uint32_t m[PE_MP_LIMBS];
} pe_mp;

PE_HIDDEN pe_mp pe_mp_from(double x);
PE_HIDDEN pe_mp pe_mp_from_dd(pe_dd x);
PE_HIDDEN pe_mp pe_mp_neg(pe_mp a);
PE_HIDDEN pe_mp pe_mp_add(pe_mp a, pe_mp b);
PE_HIDDEN pe_mp pe_mp_sub(pe_mp a, pe_mp b);
PE_HIDDEN pe_mp pe_mp_mul(pe_mp a, pe_mp b);
PE_HIDDEN pe_mp pe_mp_div(pe_mp a, pe_mp b); /* b != 0 */
PE_HIDDEN pe_mp pe_mp_ldexp(pe_mp a, int64_t k);
/* -1, 0, 1 as a <, ==, > b */
PE_HIDDEN int pe_mp_cmp(pe_mp a, pe_mp b);
/* The nearest double (ties to even). */
PE_HIDDEN double pe_mp_to_double(pe_mp a);
/* pi, truncated (relative error below 2^-255). */
PE_HIDDEN pe_mp pe_mp_pi(void);
/* e^x for |x| < 746, relative error below 2^-230 (beyond: what the
 * caller's range checks leave out). */
PE_HIDDEN pe_mp pe_mp_exp(pe_mp x);
/* ln(x), x > 0, with an absolute error below 2^-228 + |k| 2^-255, k the
 * exponent of x (x in [2^k, 2^(k+1))). */
PE_HIDDEN pe_mp pe_mp_log(pe_mp x);

/* sin and cos of 2 pi t, t in turns (|t| < 2^45, fastpe's position limit):
 * reduced by the nearest quarter turn (the subtraction exact to 2^-200), the
 * remainder times pi/2 (relative error 2^-253) by the series (absolute error
 * below 2^-245).  With t's own error: absolute error below
 * 2 pi |t| 2^-252 + 2^-198 + (t's error) 2 pi. */
PE_HIDDEN void pe_mp_sincos_turns(pe_mp t, pe_mp *s, pe_mp *c);

/* v rounded to nearest (ties to even) with prec significant bits, the least
 * exponent of a subnormal emin (53, -1074: double; 24, -149: float), as a
 * double (exact; beyond the format's range the caller's conversion makes the
 * infinity).  *decided: whether every real within eps |v| of v rounds the
 * same (eps 0: v is exact). */
PE_HIDDEN double pe_mp_round(pe_mp v, int prec, int emin, double eps, int *decided);

#endif /* FASTPE_PE_MP_H */
