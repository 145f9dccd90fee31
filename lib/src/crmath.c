/* fastpe's own correctly rounded log and pow (pe_crmath.h). */
#include "pe_crmath.h"
#include "pe_sys.h"

#include <float.h>

static PE_RELAXED(uint64_t) undecided, exact_runs;
static PE_RELAXED(int) forced;

uint64_t pe_cr_undecided(void) { return (uint64_t)pe_relaxed_load(&undecided); }
uint64_t pe_cr_exact_runs(void) { return (uint64_t)pe_relaxed_load(&exact_runs); }

int pe_cr_force_exact(int on) {
    int was = pe_relaxed_load(&forced);
    pe_relaxed_store(&forced, on != 0);
    return was;
}

int pe_cr_forced(void) { return pe_relaxed_load(&forced); }

/* a relaxed load and store: an increment lost to a race only undercounts a
 * statistic, and the pair is portable where fetch-add is not */
#define COUNT(c) pe_relaxed_store(&(c), pe_relaxed_load(&(c)) + 1)

double pe_round_exact(pe_mp v, int prec, int emin, double eps) {
    int decided;
    double r = pe_mp_round(v, prec, emin, eps, &decided);
    COUNT(exact_runs);
    if (!decided)
        COUNT(undecided);
    return r;
}

pe_dd pe_dd_div(pe_dd a, pe_dd b) {
    /* q1 = a / b, then one correction: q2 = (a - q1 b) / b */
    double q1 = a.hi / b.hi;
    pe_dd r = pe_dd_add(a, pe_dd_neg(pe_dd_mul_d(b, q1)));
    double q2 = r.hi / b.hi;
    return pe_two_sum(q1, q2);
}

pe_dd pe_log_dd(pe_dd x) {
    /* ln(hi + lo) = ln(hi) + ln(1 + lo/hi), the second lo/hi to 2^-106 */
    return pe_dd_add(pe_dd_log(x.hi), pe_dd_from(x.lo / x.hi));
}

pe_dd pe_pow_dd(double x, double y, double *t) {
    pe_dd l = pe_dd_mul_d(pe_dd_log(x), y);
    *t = l.hi;
    if (l.hi > 709.8) /* beyond DBL_MAX */
        return pe_dd_from(INFINITY);
    if (l.hi < -745.2) /* below half the least subnormal */
        return pe_dd_from(0.0);
    return pe_dd_exp(l);
}

double pe_round_double(pe_dd v, double eps, int *decided) {
    pe_dd n = pe_two_sum(v.hi, v.lo);
    /* the probes' own rounding (2^-53 of d) is covered by the margin */
    double d = eps * (1.0 + 9.094947017729282e-13 /* 2^-40 */) * fabs(n.hi);
    double a = n.hi + (n.lo - d), b = n.hi + (n.lo + d);
    /* below 2^-1000 the double-double's low part may have lost bits */
    *decided = a == b && (fabs(n.hi) >= 9.332636185032189e-302 /* 2^-1000 */ || n.hi == 0.0) &&
               !pe_relaxed_load(&forced);
    return n.hi;
}

/* A normalised dd rounded to float exactly: float midpoints are doubles, and
 * |lo| < half a double ulp of hi, so (float)hi is right unless hi is itself a
 * midpoint, where lo's sign decides. */
static float dd_to_float(pe_dd n) {
    float f = (float)n.hi;
    double err = n.hi - (double)f;
    if (err != 0.0 && n.lo != 0.0 && isfinite(f)) {
        float g = nextafterf(f, err > 0 ? INFINITY : -INFINITY); /* the other neighbour */
        if ((double)g - n.hi == err) {                           /* hi is the midpoint of f and g */
            if ((n.lo > 0) == (g > f))
                f = g;
        }
    }
    return f;
}

float pe_round_float(pe_dd v, double eps, int *decided) {
    pe_dd n = pe_two_sum(v.hi, v.lo);
    double d = eps * (1.0 + 9.094947017729282e-13 /* 2^-40 */) * fabs(n.hi);
    float a = dd_to_float(pe_two_sum(n.hi, n.lo - d));
    float b = dd_to_float(pe_two_sum(n.hi, n.lo + d));
    *decided = a == b && (fabs(n.hi) >= 9.332636185032189e-302 /* 2^-1000 */ || n.hi == 0.0) &&
               !pe_relaxed_load(&forced);
    return dd_to_float(n);
}

double pe_log_cr(double x) {
    if (isnan(x) || x < 0.0)
        return NAN;
    if (x == 0.0)
        return -INFINITY;
    if (isinf(x) || x == 1.0)
        return x == 1.0 ? 0.0 : x;
    {
        int decided, k;
        double r = pe_round_double(pe_dd_log(x), 3.1554436208840472e-30 /* 2^-98 */, &decided);
        pe_mp l;
        if (decided)
            return r;
        /* absolute error 2^-228 + |k| 2^-255 (pe_mp.h), |ln x| >= 2^-54 */
        l = pe_mp_log(pe_mp_from(x));
        frexp(x, &k);
        return pe_round_exact(l, 53, -1074,
                              ldexp(1.0 + ldexp(fabs((double)k), -27), -228) / fabs(r));
    }
}

/* C's pow for the special operands (x >= 0): 1 if y == 0 or x == 1, else 0 or
 * inf at the ends; 0 when not special. */
static int pow_special(double x, double y, double *r) {
    if (isnan(x) || isnan(y)) {
        *r = (y == 0.0 || x == 1.0) ? 1.0 : NAN;
        return 1;
    }
    if (y == 0.0 || x == 1.0) {
        *r = 1.0;
        return 1;
    }
    if (x == 0.0 || isinf(x)) {
        *r = (x == 0.0) == (y > 0) ? 0.0 : INFINITY;
        return 1;
    }
    if (isinf(y)) {
        *r = (x > 1.0) == (y > 0) ? INFINITY : 0.0;
        return 1;
    }
    return 0;
}

/* x^y on the exact path, x > 0 finite: exp(y ln x), t = y ln x with an
 * absolute error below |y| (2^-228 + 2^-245) + |t| 2^-255, exp's own below
 * 2^-230 (where |t| < 746; beyond +-1000 the power is inf or 0 in every
 * format). */
static double pow_exact(double x, double y, int prec, int emin) {
    pe_mp t = pe_mp_mul(pe_mp_from(y), pe_mp_log(pe_mp_from(x)));
    double th = pe_mp_to_double(t);
    if (th > 1000.0)
        return INFINITY;
    if (th < -1000.0)
        return 0.0;
    return pe_round_exact(pe_mp_exp(t), prec, emin, ldexp(1.0 + fabs(y), -221));
}

double pe_pow_cr(double x, double y) {
    double r, t;
    int decided;
    if (x < 0.0)
        return NAN; /* not needed by the rules */
    if (pow_special(x, y, &r))
        return r;
    pe_dd v = pe_pow_dd(x, y, &t);
    r = pe_round_double(v, PE_POW_EPS(t), &decided);
    return decided ? r : pow_exact(x, y, 53, -1074);
}

float pe_powf_cr_ln(float x, pe_dd ln_x, float y) {
    double r;
    pe_dd l;
    if (x < 0.0f)
        return NAN;
    if (pow_special((double)x, (double)y, &r))
        return (float)r;
    l = pe_dd_mul_d(ln_x, (double)y);
    if (l.hi > 709.8)
        return INFINITY;
    if (l.hi < -745.2)
        return 0.0f;
    {
        int decided;
        float f = pe_round_float(pe_dd_exp(l), PE_POW_EPS(l.hi), &decided);
        return decided ? f : (float)pow_exact((double)x, (double)y, 24, -149);
    }
}

float pe_powf_cr(float x, float y) {
    /* (the log is read only for x > 0 finite: the other bases are special) */
    return pe_powf_cr_ln(x, x > 0.0f && isfinite(x) ? pe_dd_log((double)x) : pe_dd_from(NAN), y);
}

/* The sine and cosine of entry i's angle at position K as pe_entry_exact
 * defines it (the angle not 0: the callers' case), unrounded; returns their
 * absolute error bound. */
static double angle_sincos(double K, int64_t i, double w0, double base, double denom,
                           const double *wl, pe_mp *s, pe_mp *c) {
    pe_mp w;
    double eps_w = 0.0, tabs;
    if (wl != NULL) {
        w = pe_mp_from(wl[i]);
    } else if (i == 0) {
        w = pe_mp_from(w0);
    } else {
        /* w0 exp(e ln base), e = -i / denom: ln's absolute error 2^-228 + |k|
         * 2^-255 (|k| <= 1075) times |e|, exp's relative 2^-230, the products'
         * and the quotient's 2^-254 each */
        pe_mp e = pe_mp_div(pe_mp_from(-(double)i), pe_mp_from(denom));
        pe_mp l = pe_mp_log(pe_mp_from(base));
        w = pe_mp_mul(pe_mp_from(w0), pe_mp_exp(pe_mp_mul(l, e)));
        eps_w = fabs((double)i / denom) * ldexp(1.0, -227) + ldexp(1.0, -229);
    }
    /* t = K w / 2pi, relative error eps_w + 2^-250 */
    {
        pe_mp t = pe_mp_mul(pe_mp_from(K), pe_mp_div(w, pe_mp_ldexp(pe_mp_pi(), 1)));
        tabs = fabs(pe_mp_to_double(t));
        pe_mp_sincos_turns(t, s, c);
    }
    /* pe_mp.h: 2 pi |t| (its relative error + 2^-252) + 2^-198, with room */
    return 6.3 * tabs * (eps_w + ldexp(1.0, -249)) + ldexp(1.0, -197);
}

/* Entry i (cosine: its cosine, else its sine) as angle_sincos gives it, with
 * *err its absolute error bound. */
static pe_mp entry_mp(double K, int64_t i, double w0, double base, double denom, const double *wl,
                      int cosine, double *err) {
    pe_mp s, c;
    *err = angle_sincos(K, i, w0, base, denom, wl, &s, &c);
    return cosine ? c : s;
}

/* Whether entry i's angle is exactly 0 at K (its sine 0, its cosine 1). */
static int angle_zero(double K, int64_t i, double w0, const double *wl) {
    return K == 0.0 || (wl != NULL && wl[i] == 0.0) || (wl == NULL && w0 == 0.0);
}

double pe_entry_exact(double K, int64_t i, double w0, double base, double denom, const double *wl,
                      int cosine, double scale, int prec, int emin) {
    pe_mp v;
    double vabs, err, rel;
    if (angle_zero(K, i, w0, wl))
        return cosine ? scale : 0.0; /* (scale: a double already) */
    v = entry_mp(K, i, w0, base, denom, wl, cosine, &err);
    vabs = fabs(pe_mp_to_double(v));
    rel = vabs > 0.0 ? err / vabs : 1.0;
    if (scale != 1.0) { /* the product's own truncation: below 2^-254 relative */
        v = pe_mp_mul(v, pe_mp_from(scale));
        rel += ldexp(1.0, -250);
    }
    return pe_round_exact(v, prec, emin, rel);
}

double pe_rot_exact(double K, int64_t i, double w0, double base, double denom, const double *wl,
                    double u, double w, double scale, int prec, int emin) {
    pe_mp s, c, v;
    double err, vabs, rel;
    if (angle_zero(K, i, w0, wl)) {
        /* an angle of exactly 0: scale u, one product of two doubles (exact here) */
        return pe_round_exact(pe_mp_mul(pe_mp_from(u), pe_mp_from(scale)), prec, emin, 0.0);
    }
    /* u cos + w sin: the inputs are exact, the products and the sum truncate
       below 2^-250 of their sizes (the 2^-197 beside sin's and cos's bound) */
    err = angle_sincos(K, i, w0, base, denom, wl, &s, &c) + ldexp(1.0, -197);
    err *= fabs(u) + fabs(w);
    v = pe_mp_add(pe_mp_mul(pe_mp_from(u), c), pe_mp_mul(pe_mp_from(w), s));
    vabs = fabs(pe_mp_to_double(v));
    /* (zero only where the angle is 0 or u = w = 0: tan of a nonzero rational
       multiple of a double is irrational; an undecided rounding is counted) */
    rel = vabs > 0.0 ? err / vabs : 1.0;
    if (scale != 1.0) {
        v = pe_mp_mul(v, pe_mp_from(scale));
        rel += ldexp(1.0, -250);
    }
    return pe_round_exact(v, prec, emin, rel);
}

double pe_add_exact(double x, double scale, double K, int64_t i, double w0, double base,
                    double denom, const double *wl, int entry, int prec, int emin) {
    pe_mp v, p = pe_mp_from(0.0);
    double perr = 0.0, pd = -0.0, big, err, sabs;
    if (entry >= 0) {
        if (angle_zero(K, i, w0, wl)) {
            pd = entry ? 1.0 : 0.0;
            p = pe_mp_from(pd);
        } else {
            p = entry_mp(K, i, w0, base, denom, wl, entry, &perr);
            pd = pe_mp_to_double(p);
        }
    }
    if (!isfinite(x))
        return x * scale + pd; /* (infinities and NaN as the double sum has them) */
    /* x scale is exact in 256 bits (106 at most); the sum drops bits below
       the larger operand's last one: 2^-254 of it, with room */
    v = pe_mp_mul(pe_mp_from(x), pe_mp_from(scale));
    big = fabs(pe_mp_to_double(v)) > fabs(pd) ? fabs(pe_mp_to_double(v)) : fabs(pd);
    v = pe_mp_add(v, p);
    if (!isfinite(big)) /* (|x scale| beyond the doubles: P's part is below 2^-900 of it) */
        return pe_round_exact(v, prec, emin, ldexp(1.0, -250));
    err = perr + ldexp(big, -253);
    sabs = fabs(pe_mp_to_double(v));
    if (perr == 0.0 && sabs == 0.0 && pe_mp_cmp(v, pe_mp_from(0.0)) == 0) {
        /* an exact 0 (x scale = -P, P exact: a sum that cancels to 0 dropped
           no bits), with the sign IEEE addition gives it, from the two exact
           addends in double */
        COUNT(exact_runs);
        return x * scale + pd;
    }
    return pe_round_exact(v, prec, emin, sabs > 0.0 ? err / sabs : 1.0);
}
