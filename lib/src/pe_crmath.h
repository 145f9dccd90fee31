/*
 * fastpe's own correctly rounded elementary functions (log, pow) and the
 * rounding of double-double values: the numbers the RoPE rules are made of,
 * the same bits on every CPU, OS and compiler (libm's log and pow differ
 * between platforms, NumPy's SIMD power between CPUs).
 *
 * A value is evaluated in double-double with a known relative error bound
 * eps, then rounded once: where every real number within eps of it rounds to
 * the same float, that float is the correctly rounded result.  Otherwise the
 * value is too close to a rounding boundary to decide: about one call in 2^36
 * for random operands at eps = 2^-90, but far more often for rational values
 * such as 10000^(-1/4) / 3.2 = 1/32 - 2^-59 + 2^-113 (one of ~6,000 generated
 * rule frequencies).  Those are evaluated again on the exact path (pe_mp.h,
 * an error near 2^-220) and rounded from its bits; pe_cr_exact_runs() counts
 * them, and pe_cr_undecided() what even that path could not decide (an exact
 * value within 2^-200 of a boundary: none known).
 */
#ifndef FASTPE_PE_CRMATH_H
#define FASTPE_PE_CRMATH_H

#include <stdint.h>

#include "kernels/pe_dd.h"
#include "pe_mp.h"

/* The relative error bound of pe_pow_dd's value, exp(t) with t = y ln x. */
#define PE_POW_EPS(t) (1.2621774483536189e-29 /* 2^-96 */ * (1.0 + fabs(t)))

/* x^y = exp(y ln x) in double-double for finite x > 0 (*t: y ln x); +inf or 0
 * beyond the doubles' range. */
PE_HIDDEN pe_dd pe_pow_dd(double x, double y, double *t);
/* ln(x) of a double-double x > 0. */
PE_HIDDEN pe_dd pe_log_dd(pe_dd x);
/* a / b in double-double. */
PE_HIDDEN pe_dd pe_dd_div(pe_dd a, pe_dd b);
/* v rounded once to double / float, given its relative error bound eps;
 * *decided is 0 where a real number within eps of v rounds otherwise (or
 * where the exact path is forced, pe_cr_force_exact). */
PE_HIDDEN double pe_round_double(pe_dd v, double eps, int *decided);
PE_HIDDEN float pe_round_float(pe_dd v, double eps, int *decided);
/* The exact path's v (relative error bound eps) rounded with prec bits and
 * least subnormal exponent emin (pe_mp_round), counted. */
PE_HIDDEN double pe_round_exact(pe_mp v, int prec, int emin, double eps);
/* Correctly rounded ln(x) (NaN below 0, -inf at 0, as C's log). */
PE_HIDDEN double pe_log_cr(double x);
/* Correctly rounded x^y for x >= 0 (the special values of C's pow). */
PE_HIDDEN double pe_pow_cr(double x, double y);
PE_HIDDEN float pe_powf_cr(float x, float y);
/* pe_powf_cr with ln_x = pe_dd_log(x) given (x > 0 finite; a rule's base, once). */
PE_HIDDEN float pe_powf_cr_ln(float x, pe_dd ln_x, float y);
/* A table entry on the exact path: sin (cosine 0) or cos of 2 pi K f_i, with
 * f_i the real frequency i in turns, w0 base^(-i/denom) / 2pi, or, when wl is
 * not NULL, wl[i] / 2pi (wl[i] radians per position, the exact float64), times
 * scale (a finite double), rounded once to prec bits with least subnormal
 * exponent emin (pe_mp_round), returned as the double of that value (counted
 * as a run of the exact path).  |K f_i| < 2^45 (the position limit). */
PE_HIDDEN double pe_entry_exact(double K, int64_t i, double w0, double base, double denom,
                                const double *wl, int cosine, double scale, int prec, int emin);
/* One rotated RoPE entry on the exact path: scale (u cos t + w sin t), t the
 * angle of pe_entry_exact's (K, i, w0, base, denom, wl), u and w finite doubles
 * (a rotated pair's entries, one negated), rounded once as there (counted). */
PE_HIDDEN double pe_rot_exact(double K, int64_t i, double w0, double base, double denom,
                              const double *wl, double u, double w, double scale, int prec,
                              int emin);
/* x scale + P rounded once to prec bits with least subnormal exponent emin
 * (pe_mp_round), P the entry as pe_entry_exact defines it (entry 1: the
 * cosine, 0: the sine) or none (entry -1: x scale alone, added to -0.0), as
 * the double of that value, counted as a run of the exact path.  An exact sum
 * of 0 has the sign IEEE addition gives it (-0 only for x scale = -0 and no
 * entry); x not finite: the double sum x scale + P. */
PE_HIDDEN double pe_add_exact(double x, double scale, double K, int64_t i, double w0, double base,
                              double denom, const double *wl, int entry, int prec, int emin);
/* Whether the exact path is forced (pe_cr_force_exact). */
PE_HIDDEN int pe_cr_forced(void);
/* Since the library was loaded: how many values took the exact path, and how
 * many roundings even that path could not decide (see above). */
PE_HIDDEN uint64_t pe_cr_exact_runs(void);
PE_HIDDEN uint64_t pe_cr_undecided(void);
/* Nonzero: every rounding takes the exact path (the tests check that both
 * paths give the same bits); returns the previous setting. */
PE_HIDDEN int pe_cr_force_exact(int on);

/* Why a RoPE rule refused its parameters (the binding's messages name the
 * parameters behind each reason). */
enum {
    PE_RULE_ARGUMENT,  /* a parameter itself (a code of fastpe_rope_frequencies) */
    PE_RULE_ATTENTION, /* an attention factor not finite and > 0 (value) */
    PE_RULE_RAMP,      /* yarn's ramp ends not finite */
    PE_RULE_BASE,      /* dynamic's scaled base not finite and > 0 (value) */
    PE_RULE_FREQUENCY, /* a frequency outside [0, 1e280] (index, value) */
    PE_RULE_EDGE       /* llama3, equal factors: a wavelength on the edge (index) */
};
typedef struct {
    int reason;
    int64_t index;
    double value;
} pe_rule_detail;

/* float32 powers base^e[i] in place of the correctly rounded ones, all of a
 * rule's at once (the tests give torch's, one tensor as the framework
 * evaluates it, to check the other float32 steps against torch to the bit). */
typedef void (*pe_pow32_fn)(void *ctx, float base, const float *e, float *out, int64_t n);

struct fastpe_rope_params;
/* fastpe_rope_frequencies, and why it refused (why may be NULL); pow32 NULL:
 * the correctly rounded power. */
PE_HIDDEN int pe_rope_rule(const struct fastpe_rope_params *p, int64_t head_dim, double *inv_freq,
                           int64_t capacity, int64_t *nf, double *attention_factor,
                           pe_rule_detail *why, pe_pow32_fn pow32, void *pow_ctx);

#endif /* FASTPE_PE_CRMATH_H */
