/* fastpe's own correctly rounded log and pow (pe_crmath.h). */
#include "pe_crmath.h"
#include "pe_sys.h"

#include <float.h>

static PE_RELAXED(uint64_t) undecided;

uint64_t pe_cr_undecided(void) { return (uint64_t)pe_relaxed_load(&undecided); }

static void count_undecided(void) {
    /* a relaxed load and store: an increment lost to a race only undercounts a
     * statistic, and the pair is portable where fetch-add is not */
    pe_relaxed_store(&undecided, pe_relaxed_load(&undecided) + 1);
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

/* The double a dd rounds to and whether every value within eps of it does. */
static double round_double(pe_dd v, double eps, int *decided) {
    pe_dd n = pe_two_sum(v.hi, v.lo);
    /* the probes' own rounding (2^-53 of d) is covered by the margin */
    double d = eps * (1.0 + 9.094947017729282e-13 /* 2^-40 */) * fabs(n.hi);
    double a = n.hi + (n.lo - d), b = n.hi + (n.lo + d);
    /* below 2^-1000 the double-double's low part may have lost bits */
    *decided = a == b && (fabs(n.hi) >= 9.332636185032189e-302 /* 2^-1000 */ || n.hi == 0.0);
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

static float round_float(pe_dd v, double eps, int *decided) {
    pe_dd n = pe_two_sum(v.hi, v.lo);
    double d = eps * (1.0 + 9.094947017729282e-13 /* 2^-40 */) * fabs(n.hi);
    float a = dd_to_float(pe_two_sum(n.hi, n.lo - d));
    float b = dd_to_float(pe_two_sum(n.hi, n.lo + d));
    *decided = a == b && (fabs(n.hi) >= 9.332636185032189e-302 /* 2^-1000 */ || n.hi == 0.0);
    return dd_to_float(n);
}

double pe_round_double(pe_dd v, double eps) {
    int decided;
    double r = round_double(v, eps, &decided);
    if (!decided && isfinite(r))
        count_undecided();
    return r;
}

float pe_round_float(pe_dd v, double eps) {
    int decided;
    float r = round_float(v, eps, &decided);
    if (!decided && isfinite(r))
        count_undecided();
    return r;
}

double pe_log_cr(double x) {
    if (isnan(x) || x < 0.0)
        return NAN;
    if (x == 0.0)
        return -INFINITY;
    if (isinf(x) || x == 1.0)
        return x == 1.0 ? 0.0 : x;
    return pe_round_double(pe_dd_log(x), 3.1554436208840472e-30 /* 2^-98 */);
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

double pe_pow_cr(double x, double y) {
    double r, t;
    if (x < 0.0)
        return NAN; /* not needed by the rules */
    if (pow_special(x, y, &r))
        return r;
    pe_dd v = pe_pow_dd(x, y, &t);
    return pe_round_double(v, PE_POW_EPS(t));
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
    return pe_round_float(pe_dd_exp(l), PE_POW_EPS(l.hi));
}

float pe_powf_cr(float x, float y) {
    double r, t;
    if (x < 0.0f)
        return NAN;
    if (pow_special((double)x, (double)y, &r))
        return (float)r;
    pe_dd v = pe_pow_dd((double)x, (double)y, &t);
    return pe_round_float(v, PE_POW_EPS(t));
}
