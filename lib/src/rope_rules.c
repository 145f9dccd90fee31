/*
 * The RoPE rules of transformers' ROPE_INIT_FUNCTIONS, the only implementation
 * (fastpe.rope_frequencies calls it): every check of the values a rule
 * computes, and the frequencies, the same bits on every machine (no libm
 * transcendental function, no FMA: fastpe's own correctly rounded log and
 * pow, pe_crmath.h).
 *
 * precision float64: each frequency is the exact real number of the rule's
 * formula (docs/rope.md), evaluated in double-double and rounded once.
 *
 * precision float32: the framework's tensor steps, in its order: every
 * Python scalar is rounded to float32 where torch casts it, and each
 * elementary operation of float32 operands is rounded to float32.  +, -, *
 * and / are computed in double and rounded once (rnd): for two float32
 * operands the double result rounded to float is the float32 result (double
 * has more than 2 * 24 + 2 bits).  The power is the correctly rounded float32
 * power of the float32 operands.
 *
 * Both precisions share the scalar steps transformers computes with Python
 * floats (the attention factors, yarn's ramp ends, dynamic's base), each
 * operation rounded to double, log and pow correctly rounded.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"
#include "pe_crmath.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* as fastpe._rope.MAX_FREQUENCY */
#define MAX_FREQUENCY 1e280
#define PI            3.141592653589793 /* math.pi */
#define TWO_PI        6.283185307179586 /* 2 * math.pi, one rounding */

void fastpe_rope_params_init(fastpe_rope_params *p) {
    if (p == NULL)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->rope_type = FASTPE_ROPE_DEFAULT;
    p->precision = FASTPE_PRECISION_FLOAT32;
    p->rope_theta = p->partial_rotary_factor = p->factor = p->attention_factor = NAN;
    p->beta_fast = p->beta_slow = p->mscale = p->mscale_all_dim = NAN;
    p->low_freq_factor = p->high_freq_factor = NAN;
    p->truncate = -1;
    p->short_factor = p->long_factor = NULL;
    p->short_factor_len = p->long_factor_len = 0;
    p->original_max_position_embeddings = FASTPE_ROPE_UNSET;
    p->max_position_embeddings = FASTPE_ROPE_UNSET;
    p->seq_len = FASTPE_ROPE_UNSET;
}

/* The values a rule computes with, every check passed. */
typedef struct {
    int type;
    int f32;                 /* the float32 steps */
    int64_t dim;             /* rotary_dim */
    double theta;            /* the base of the power (dynamic: the scaled base) */
    double theta0, len, mpe; /* dynamic: rope_theta, the length and mpe it scales by */
    double factor;           /* linear, llama3, yarn: the divisor of the frequencies */
    double low, high;        /* llama3: the freq factors; yarn: the ramp's ends */
    double old_len;          /* llama3: original_max_position_embeddings */
    const double *fac;       /* longrope: the chosen per-pair factors */
    double attention;
    pe_dd ln_theta; /* float64: dd_ln_base, ln of the base (dynamic: the real scaled one) */
    pe_rule_detail *why;
    pe_pow32_fn pow32; /* NULL: pe_powf_cr */
    void *pow_ctx;
    const float *powers; /* pow32's, by index */
    pe_dd ln_theta32;    /* float32: ln of the base rounded to float32 */
} rule;

/* A refusal of values each valid but not together, with its reason (and, for a
 * frequency, its index and value); the error detail names what the values gave
 * (the computed attention_factor, the ramp, the scaled base, the frequency). */
static int refuse(rule *R, int code, int reason, int64_t index, double value) {
    static const char *const what[] = {NULL,         "attention_factor", "ramp",
                                       "rope_theta", "inv_freq",         "inv_freq"};
    pe_fail(code, what[reason], index, value, NAN);
    if (R->why != NULL) {
        R->why->reason = reason;
        R->why->index = index;
        R->why->value = value;
    }
    return code;
}

/* One operation's result in the rule's precision. */
static double rnd(const rule *R, double x) { return R->f32 ? (double)(float)x : x; }

/* A finite number > 0 (as fastpe._validate.as_base). */
static int positive(double v) { return isfinite(v) && v > 0.0; }

/* A parameter refused, named as its field of fastpe_rope_params in the error
 * detail; limit: the bound it broke (0: "finite and > 0", NaN: none). */
static int bad(const char *field, double value, double limit) {
    return pe_fail(FASTPE_EINVAL, field, -1, value, limit);
}

/* A field that must be a finite number > 0. */
static int need_positive(const char *field, double v) {
    return positive(v) ? FASTPE_OK : bad(field, v, 0.0);
}

#define ABSENT(v)   isnan(v)
#define ABSENT_I(v) ((v) == FASTPE_ROPE_UNSET)

enum {
    K_FACTOR = 1 << 0,
    K_ATTENTION = 1 << 1,
    K_BETA_FAST = 1 << 2,
    K_BETA_SLOW = 1 << 3,
    K_MSCALE = 1 << 4,
    K_MSCALE_ALL = 1 << 5,
    K_LOW = 1 << 6,
    K_HIGH = 1 << 7,
    K_TRUNCATE = 1 << 8,
    K_SHORT = 1 << 9,
    K_LONG = 1 << 10,
    K_ORIGINAL = 1 << 11
};

/* The keys each rule reads besides rope_theta and partial_rotary_factor
 * (fastpe._rope._KEYS). */
static const int keys_of[6] = {
    0,
    K_FACTOR,
    K_FACTOR,
    K_FACTOR | K_ATTENTION | K_BETA_FAST | K_BETA_SLOW | K_MSCALE | K_MSCALE_ALL | K_TRUNCATE |
        K_ORIGINAL,
    K_FACTOR | K_ATTENTION | K_SHORT | K_LONG | K_ORIGINAL,
    K_FACTOR | K_LOW | K_HIGH | K_ORIGINAL,
};

static int keys_given(const fastpe_rope_params *p) {
    return (ABSENT(p->factor) ? 0 : K_FACTOR) | (ABSENT(p->attention_factor) ? 0 : K_ATTENTION) |
           (ABSENT(p->beta_fast) ? 0 : K_BETA_FAST) | (ABSENT(p->beta_slow) ? 0 : K_BETA_SLOW) |
           (ABSENT(p->mscale) ? 0 : K_MSCALE) | (ABSENT(p->mscale_all_dim) ? 0 : K_MSCALE_ALL) |
           (ABSENT(p->low_freq_factor) ? 0 : K_LOW) | (ABSENT(p->high_freq_factor) ? 0 : K_HIGH) |
           (p->truncate == -1 ? 0 : K_TRUNCATE) | (p->short_factor == NULL ? 0 : K_SHORT) |
           (p->long_factor == NULL ? 0 : K_LONG) |
           (ABSENT_I(p->original_max_position_embeddings) ? 0 : K_ORIGINAL);
}

/* original_max_position_embeddings, or max_position_embeddings (already checked). */
static int original_len(const fastpe_rope_params *p, int64_t *out) {
    int64_t v = p->original_max_position_embeddings;
    if (ABSENT_I(v))
        v = p->max_position_embeddings;
    if (ABSENT_I(v)) /* (the limit 1: neither length given) */
        return bad("original_max_position_embeddings", NAN, 1.0);
    if (v < 1)
        return bad("original_max_position_embeddings", (double)v, 1.0);
    *out = v;
    return FASTPE_OK;
}

/* factor, or max_position_embeddings / original_max_position_embeddings
 * (fastpe._rope._context_factor; the quotient is correctly rounded for lengths
 * up to 2^53, as Python's int / int). */
static int context_factor(const fastpe_rope_params *p, int64_t old_len, double *out) {
    if (!ABSENT(p->factor)) {
        *out = p->factor;
        return need_positive("factor", p->factor);
    }
    if (ABSENT_I(p->max_position_embeddings)) /* (neither given) */
        return bad("factor", NAN, 0.0);
    *out = (double)p->max_position_embeddings / (double)old_len;
    return FASTPE_OK;
}

/* A finite number (> 0 when pos), or dflt when absent; field names it. */
static int optional(const char *field, double v, int pos, double dflt, double *out) {
    if (ABSENT(v)) {
        *out = dflt;
        return FASTPE_OK;
    }
    if (!(pos ? positive(v) : isfinite(v)))
        return bad(field, v, pos ? 0.0 : NAN);
    *out = v;
    return FASTPE_OK;
}

static double get_mscale(double scale, double m) {
    return scale <= 1.0 ? 1.0 : 0.1 * m * pe_log_cr(scale) + 1.0;
}

static int yarn(const fastpe_rope_params *p, rule *R, int64_t old_len) {
    /* (zeros only for the compiler: each is set or the call has returned) */
    double factor = 0, attention = 0, mscale = 0, mscale_all = 0, beta_fast = 0, beta_slow = 0;
    double low, high, d;
    int err = context_factor(p, old_len, &factor);
    if (err == FASTPE_OK)
        err = optional("attention_factor", p->attention_factor, 1, NAN, &attention);
    if (err == FASTPE_OK)
        err = optional("mscale", p->mscale, 0, 0.0, &mscale);
    if (err == FASTPE_OK)
        err = optional("mscale_all_dim", p->mscale_all_dim, 0, 0.0, &mscale_all);
    if (err != FASTPE_OK)
        return err;
    if (isnan(attention)) {
        if (mscale != 0.0 && mscale_all != 0.0) {
            double num = get_mscale(factor, mscale), den = get_mscale(factor, mscale_all);
            attention = den != 0.0 ? num / den : INFINITY;
        } else {
            attention = get_mscale(factor, 1.0);
        }
        if (!positive(attention))
            return refuse(R, FASTPE_EINVAL, PE_RULE_ATTENTION, -1, attention);
    }
    err = optional("beta_fast", p->beta_fast, 1, 32.0, &beta_fast);
    if (err == FASTPE_OK)
        err = optional("beta_slow", p->beta_slow, 1, 1.0, &beta_slow);
    if (err != FASTPE_OK)
        return err;
    /* the dimension of a number of rotations: a log of 0 or a theta of 1 give
     * a non-finite ramp, refused (Python's math errors) */
    d = (double)R->dim;
    low = d * pe_log_cr((double)old_len / (beta_fast * 2 * PI)) / (2 * pe_log_cr(R->theta));
    high = d * pe_log_cr((double)old_len / (beta_slow * 2 * PI)) / (2 * pe_log_cr(R->theta));
    if (!(isfinite(low) && isfinite(high)))
        return refuse(R, FASTPE_EINVAL, PE_RULE_RAMP, -1, NAN);
    if (p->truncate != -1 && p->truncate != 0 && p->truncate != 1)
        return bad("truncate", (double)p->truncate, 1.0);
    if (p->truncate != 0) {
        low = floor(low);
        high = ceil(high);
    }
    /* Python's max(low, 0) and min(high, dim - 1): the first unless the second is
     * strictly beyond it */
    if (0.0 > low)
        low = 0.0;
    if (d - 1 < high)
        high = d - 1;
    if (low == high)
        high += 0.001; /* the framework's guard against a zero-width ramp */
    R->factor = factor;
    R->low = low;
    R->high = high;
    R->attention = attention;
    return FASTPE_OK;
}

static int longrope(const fastpe_rope_params *p, rule *R, int64_t old_len) {
    double factor = 0, attention = 0; /* (set or returned before use, as in yarn) */
    int64_t n = R->dim / 2;
    int err = context_factor(p, old_len, &factor);
    if (err == FASTPE_OK)
        err = optional("attention_factor", p->attention_factor, 1, NAN, &attention);
    if (err != FASTPE_OK)
        return err;
    if (isnan(attention)) {
        if (factor <= 1.0)
            attention = 1.0;
        else if (old_len == 1) /* ln(1) = 0 */
            return refuse(R, FASTPE_EINVAL, PE_RULE_ATTENTION, -1, INFINITY);
        else
            attention = sqrt(1 + pe_log_cr(factor) / pe_log_cr((double)old_len));
    }
    /* each list whole (its length: value, rotary_dim / 2: limit), then the next */
    for (int k = 0; k < 2; k++) {
        const char *field = k == 0 ? "short_factor" : "long_factor";
        const double *f = k == 0 ? p->short_factor : p->long_factor;
        int64_t len = k == 0 ? p->short_factor_len : p->long_factor_len;
        if (f == NULL)
            return pe_fail(FASTPE_EINVAL, field, -1, NAN, (double)n);
        if (len != n)
            return pe_fail(FASTPE_EINVAL, field, -1, (double)len, (double)n);
        for (int64_t i = 0; i < n; i++) {
            if (!positive(f[i]))
                return pe_fail(FASTPE_EINVAL, field, i, f[i], 0.0);
        }
    }
    R->fac = !ABSENT_I(p->seq_len) && p->seq_len > old_len ? p->long_factor : p->short_factor;
    R->attention = attention;
    return FASTPE_OK;
}

static int dynamic(const fastpe_rope_params *p, rule *R) {
    double factor = p->factor, scale, base, L, mpe, d = (double)R->dim;
    if (!positive(factor))
        return bad("factor", factor, 0.0);
    if (ABSENT_I(p->max_position_embeddings))
        return bad("max_position_embeddings", NAN, 1.0);
    if (R->dim == 2) /* the base's exponent d / (d - 2) is undefined */
        return bad("rotary_dim", 2.0, 4.0);
    mpe = (double)p->max_position_embeddings;
    L = !ABSENT_I(p->seq_len) && p->seq_len > p->max_position_embeddings ? (double)p->seq_len : mpe;
    /* at least 1 exactly, but a huge factor cancels it to 0 or below */
    scale = (factor * L / mpe) - (factor - 1);
    base = scale > 0 ? R->theta * pe_pow_cr(scale, d / (d - 2)) : NAN;
    if (!(isfinite(base) && base > 0))
        return refuse(R, FASTPE_EBASE, PE_RULE_BASE, -1, base);
    /* float64: the real scaled base, from these (dd_ln_base) */
    R->theta0 = R->theta;
    R->factor = factor;
    R->len = L;
    R->mpe = mpe;
    R->theta = base;
    return FASTPE_OK;
}

/* Every value of the rule checked, in fastpe.rope_frequencies' order. */
static int resolve(const fastpe_rope_params *p, int64_t head_dim, rule *R) {
    int err;
    int64_t old_len = 0;
    int extra;
    if (p->size != sizeof(fastpe_rope_params))
        return bad("size", (double)p->size, (double)sizeof(fastpe_rope_params));
    if (head_dim < 2)
        return pe_fail(FASTPE_ESIZE, "head_dim", -1, (double)head_dim, 2.0);
    if (head_dim > ((int64_t)1 << 31))
        return pe_fail(FASTPE_ESIZE, "head_dim", -1, (double)head_dim, (double)((int64_t)1 << 31));
    if (p->rope_type < FASTPE_ROPE_DEFAULT || p->rope_type > FASTPE_ROPE_LLAMA3)
        return bad("rope_type", (double)p->rope_type, (double)FASTPE_ROPE_LLAMA3);
    /* a key the rule does not read: the lowest such K_* bit is the detail's index */
    extra = keys_given(p) & ~keys_of[p->rope_type];
    if (extra) {
        int bit = 0;
        while (!(extra & (1 << bit)))
            bit++;
        return pe_fail(FASTPE_EINVAL, "rope_type", bit, (double)p->rope_type, NAN);
    }
    if (p->precision != FASTPE_PRECISION_FLOAT32 && p->precision != FASTPE_PRECISION_FLOAT64)
        return bad("precision", (double)p->precision, (double)FASTPE_PRECISION_FLOAT64);
    {
        rule keep = *R;
        memset(R, 0, sizeof(*R));
        R->why = keep.why;
        R->pow32 = keep.pow32;
        R->pow_ctx = keep.pow_ctx;
        R->powers = NULL;
    }
    R->type = p->rope_type;
    R->f32 = p->precision == FASTPE_PRECISION_FLOAT32;
    R->attention = 1.0;
    R->theta = ABSENT(p->rope_theta) ? 10000.0 : p->rope_theta;
    if (!positive(R->theta))
        return bad("rope_theta", R->theta, 0.0);
    if (!ABSENT(p->partial_rotary_factor) && !positive(p->partial_rotary_factor))
        return bad("partial_rotary_factor", p->partial_rotary_factor, 0.0);
    if (!ABSENT(p->partial_rotary_factor) && p->partial_rotary_factor > 1.0)
        return bad("partial_rotary_factor", p->partial_rotary_factor, 1.0);
    R->dim = ABSENT(p->partial_rotary_factor)
                 ? head_dim
                 : (int64_t)((double)head_dim * p->partial_rotary_factor);
    if (R->dim < 2 || R->dim % 2) /* (the limit: the least rotary dimension) */
        return bad("rotary_dim", (double)R->dim, 2.0);
    if (!ABSENT_I(p->max_position_embeddings) && p->max_position_embeddings < 1)
        return bad("max_position_embeddings", (double)p->max_position_embeddings, 1.0);
    if (!ABSENT_I(p->seq_len) && p->seq_len < 0)
        return bad("seq_len", (double)p->seq_len, 0.0);
    switch (R->type) {
    case FASTPE_ROPE_LINEAR:
        R->factor = p->factor;
        return need_positive("factor", R->factor);
    case FASTPE_ROPE_LLAMA3:
        err = original_len(p, &old_len);
        if (err != FASTPE_OK)
            return err;
        R->factor = p->factor;
        R->low = p->low_freq_factor;
        R->high = p->high_freq_factor;
        if ((err = need_positive("factor", R->factor)) != FASTPE_OK ||
            (err = need_positive("low_freq_factor", R->low)) != FASTPE_OK ||
            (err = need_positive("high_freq_factor", R->high)) != FASTPE_OK)
            return err;
        if (R->high < R->low) /* (the limit: low_freq_factor) */
            return bad("high_freq_factor", R->high, R->low);
        R->old_len = (double)old_len;
        return FASTPE_OK;
    case FASTPE_ROPE_DYNAMIC:
        return dynamic(p, R);
    case FASTPE_ROPE_YARN:
        err = original_len(p, &old_len);
        return err != FASTPE_OK ? err : yarn(p, R, old_len);
    case FASTPE_ROPE_LONGROPE:
        err = original_len(p, &old_len);
        return err != FASTPE_OK ? err : longrope(p, R, old_len);
    default:
        return FASTPE_OK;
    }
}

/* Within what the kernel takes (fastpe._rope._Params.check_frequencies). */
static int usable(double w) { return w >= 0.0 && w <= MAX_FREQUENCY; }

enum { W_USABLE, W_UNUSABLE, W_EDGE };

/* dd comparisons of normalised values */
static int dd_lt(pe_dd a, pe_dd b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }

/* Frequency i in float32, torch's steps, or -1 where a step's frequencies are
 * refused. */
static double exponent32(const rule *R, int64_t i) {
    return rnd(R, rnd(R, (double)(2 * i)) / rnd(R, (double)R->dim));
}

static int frequency32(const rule *R, int64_t i, double *out) {
    double pw = R->powers != NULL ? (double)R->powers[i]
                                  : (double)pe_powf_cr_ln((float)R->theta, R->ln_theta32,
                                                          (float)exponent32(R, i));
    double inv, wavelen, inv_l, smooth, s;
    switch (R->type) {
    case FASTPE_ROPE_YARN: {
        double extrapolation = rnd(R, 1.0 / pw);
        double interpolation = rnd(R, 1.0 / rnd(R, rnd(R, R->factor) * pw));
        double ramp = rnd(R, rnd(R, rnd(R, (double)i) - rnd(R, R->low)) / rnd(R, R->high - R->low));
        double extra;
        /* np.clip: NaN stays NaN (then refused) */
        if (ramp < 0.0)
            ramp = 0.0;
        else if (ramp > 1.0)
            ramp = 1.0;
        extra = rnd(R, 1.0 - ramp);
        inv = rnd(R, rnd(R, interpolation * rnd(R, 1.0 - extra)) + rnd(R, extrapolation * extra));
        *out = inv;
        return usable(inv) ? W_USABLE : W_UNUSABLE;
    }
    case FASTPE_ROPE_LONGROPE:
        inv = rnd(R, 1.0 / rnd(R, rnd(R, R->fac[i]) * pw));
        *out = inv;
        return usable(inv) ? W_USABLE : W_UNUSABLE;
    default:
        break;
    }
    inv = rnd(R, 1.0 / pw);
    *out = inv;
    if (!usable(inv))
        return W_UNUSABLE;
    if (R->type == FASTPE_ROPE_LINEAR) {
        inv = rnd(R, inv / rnd(R, R->factor));
    } else if (R->type == FASTPE_ROPE_LLAMA3) {
        /* wavelengths shorter than old_len / high stay, longer than old_len / low
         * are divided by factor, those between are blended */
        double low_wavelen = R->old_len / R->low, high_wavelen = R->old_len / R->high;
        wavelen = rnd(R, rnd(R, 1.0 / inv) * rnd(R, TWO_PI));
        inv_l = wavelen > rnd(R, low_wavelen) ? rnd(R, inv / rnd(R, R->factor)) : inv;
        if (!(wavelen < rnd(R, high_wavelen)) && !(wavelen > rnd(R, low_wavelen))) {
            /* equal factors: only a wavelength exactly on the edge is here, whose
             * blend is 0/0: refused */
            if (R->high == R->low)
                return W_EDGE;
            smooth = rnd(R, rnd(R, 1.0 / wavelen) * rnd(R, R->old_len));
            smooth = rnd(R, rnd(R, smooth - rnd(R, R->low)) / rnd(R, R->high - R->low));
            s = rnd(R, rnd(R, rnd(R, 1.0 - smooth) * inv_l) / rnd(R, R->factor));
            inv = rnd(R, s + rnd(R, smooth * inv_l));
        } else {
            inv = inv_l;
        }
    }
    *out = inv;
    return usable(inv) ? W_USABLE : W_UNUSABLE;
}

/* The float64 formulas, in double-double and on the exact path. */
#include "pe_num.inc.h"
#define N_LT     dd_lt
#define N_TWO_PI pe_dd_add(pe_dd_from(4.0 * PE_PIO2_HI), pe_dd_from(4.0 * PE_PIO2_LO))
#define N_EPS(t) (PE_POW_EPS(t) * 2.0)
#include "rope_formula.inc.c"

static int mp_lt(pe_mp a, pe_mp b) { return pe_mp_cmp(a, b) < 0; }

/* |t| error: |2i/d| (2^-228 + 2^-245) from the log (three logs for dynamic's
 * base), exp's 2^-230 */
#define PE_NUM_MP
#include "pe_num.inc.h"
#define N_LT     mp_lt
#define N_TWO_PI pe_mp_ldexp(pe_mp_pi(), 1)
#define N_EPS(t) ldexp(1.0, -220)
#include "rope_formula.inc.c"

/* Frequency i in float64: the rule's real formula in double-double, rounded
 * once, or, where that rounding is undecided, on the exact path (the error
 * bounds: pe_crmath.h, docs/rope.md); -1 / -2 as frequency32. */
static int frequency64(const rule *R, int64_t i, double *out) {
    pe_dd w;
    double eps;
    int decided, f = dd_frequency(R, R->ln_theta, i, &w, &eps, out);
    if (f != W_USABLE)
        return f;
    *out = pe_round_double(w, eps, &decided);
    if (!decided) {
        pe_mp wm;
        f = mp_frequency(R, mp_ln_base(R), i, &wm, &eps, out);
        if (f != W_USABLE)
            return f;
        *out = pe_round_exact(wm, 53, -1074, eps);
    }
    return usable(*out) ? W_USABLE : W_UNUSABLE;
}

static int frequency(const rule *R, int64_t i, double *out) {
    return R->f32 ? frequency32(R, i, out) : frequency64(R, i, out);
}

/* Every frequency checked, then written (nothing written on a refusal). */
static int frequencies(rule *R, double *out) {
    int64_t n = R->dim / 2;
    double *w;
    int err = FASTPE_OK;
    if (R->pow32 != NULL && R->f32) {
        float *e = (float *)malloc((size_t)n * sizeof(float));
        float *pw = (float *)malloc((size_t)n * sizeof(float));
        err = FASTPE_ENOMEM;
        if (e != NULL && pw != NULL) {
            for (int64_t i = 0; i < n; i++)
                e[i] = (float)exponent32(R, i);
            R->pow32(R->pow_ctx, (float)R->theta, e, pw, n);
            R->powers = pw;
            R->pow32 = NULL;
            err = frequencies(R, out);
            R->powers = NULL;
        }
        free(e);
        free(pw);
        return err;
    }
    if (R->f32) {
        float t = (float)R->theta;
        R->ln_theta32 = t > 0.0f && isfinite(t) ? pe_dd_log((double)t) : pe_dd_from(NAN);
    } else {
        R->ln_theta = dd_ln_base(R);
    }
    w = (double *)malloc((size_t)n * sizeof(double));
    if (w == NULL)
        return FASTPE_ENOMEM;
    for (int64_t i = 0; i < n && err == FASTPE_OK; i++) {
        int f = frequency(R, i, &w[i]);
        if (f != W_USABLE)
            err = refuse(R, FASTPE_EBASE, f == W_EDGE ? PE_RULE_EDGE : PE_RULE_FREQUENCY, i, w[i]);
    }
    if (err == FASTPE_OK)
        memcpy(out, w, (size_t)n * sizeof(double));
    free(w);
    return err;
}

int pe_rope_rule(const fastpe_rope_params *p, int64_t head_dim, double *inv_freq, int64_t capacity,
                 int64_t *nf, double *attention_factor, pe_rule_detail *why, pe_pow32_fn pow32,
                 void *pow_ctx) {
    rule R;
    int err;
    if (why != NULL) {
        why->reason = PE_RULE_ARGUMENT;
        why->index = -1;
        why->value = NAN;
    }
    if (p == NULL || inv_freq == NULL || nf == NULL || attention_factor == NULL)
        return pe_fail(FASTPE_ENULL,
                       p == NULL          ? "p"
                       : inv_freq == NULL ? "inv_freq"
                       : nf == NULL       ? "nf"
                                          : "attention_factor",
                       -1, NAN, NAN);
    R.why = why;
    R.pow32 = pow32;
    R.pow_ctx = pow_ctx;
    R.powers = NULL;
    err = resolve(p, head_dim, &R);
    if (err != FASTPE_OK)
        return err;
    if (capacity < R.dim / 2) /* (the limit: the frequencies to write) */
        return pe_fail(FASTPE_ESIZE, "capacity", -1, (double)capacity, (double)(R.dim / 2));
    err = frequencies(&R, inv_freq);
    if (err != FASTPE_OK)
        return err;
    *nf = R.dim / 2;
    *attention_factor = R.attention;
    return FASTPE_OK;
}

int fastpe_rope_frequencies(const fastpe_rope_params *p, int64_t head_dim, double *inv_freq,
                            int64_t capacity, int64_t *nf, double *attention_factor) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, pe_rope_rule(p, head_dim, inv_freq, capacity, nf,
                                                   attention_factor, NULL, NULL, NULL));
}

/* The rule p for head_dim, checked: its *nf frequencies (*w, malloc'd; NULL on a
 * refusal) and attention factor, as every handle and plan of a rule takes them. */
static int rule_list(const fastpe_rope_params *p, int64_t head_dim, double **w, int64_t *nf,
                     double *attention) {
    rule R;
    int err;
    *w = NULL;
    R.why = NULL;
    R.pow32 = NULL;
    R.pow_ctx = NULL;
    R.powers = NULL;
    err = resolve(p, head_dim, &R);
    if (err != FASTPE_OK)
        return err;
    *w = (double *)malloc((size_t)(R.dim / 2) * sizeof(double));
    if (*w == NULL)
        return FASTPE_ENOMEM;
    err = frequencies(&R, *w);
    if (err != FASTPE_OK) {
        free(*w);
        *w = NULL;
        return err;
    }
    *nf = R.dim / 2;
    *attention = R.attention;
    return FASTPE_OK;
}

static int rope_from_params(const fastpe_rope_params *p, int64_t head_dim, fastpe_rope **rope) {
    double *w, attention;
    int64_t nf;
    int err;
    if (rope == NULL)
        return pe_fail(FASTPE_ENULL, "rope", -1, NAN, NAN);
    *rope = NULL;
    if (p == NULL)
        return pe_fail(FASTPE_ENULL, "p", -1, NAN, NAN);
    err = rule_list(p, head_dim, &w, &nf, &attention);
    if (err == FASTPE_OK) {
        *rope = fastpe_rope_from_frequencies(w, nf, attention);
        if (*rope == NULL)
            err = FASTPE_ENOMEM;
    }
    free(w);
    return err;
}

int fastpe_rope_from_params(const fastpe_rope_params *p, int64_t head_dim, fastpe_rope **rope) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, rope_from_params(p, head_dim, rope));
}

/* The plan cache's key of a rule's parameters for head_dim: every field the
 * rule reads, each as its 8 bytes (doubles by their bits: a NaN or -0.0 the
 * caller wrote is a key of its own, never a wrong hit), then the factor lists'
 * values.  Written into key (capacity cap words); the words needed. */
#define RULE_KEY_WORDS 22
static size_t rule_key(const fastpe_rope_params *p, int64_t head_dim, uint64_t *key, size_t cap) {
    const double d[10] = {p->rope_theta,      p->partial_rotary_factor,
                          p->factor,          p->attention_factor,
                          p->beta_fast,       p->beta_slow,
                          p->mscale,          p->mscale_all_dim,
                          p->low_freq_factor, p->high_freq_factor};
    const int64_t ns = p->short_factor != NULL ? p->short_factor_len : -1;
    const int64_t nl = p->long_factor != NULL ? p->long_factor_len : -1;
    const size_t n = RULE_KEY_WORDS + (size_t)(ns > 0 ? ns : 0) + (size_t)(nl > 0 ? nl : 0);
    const int64_t ints[12] = {PE_PLAN_ROPE_RULE,
                              head_dim,
                              (int64_t)p->size,
                              p->rope_type,
                              p->precision,
                              p->truncate,
                              ns,
                              nl,
                              p->original_max_position_embeddings,
                              p->max_position_embeddings,
                              p->seq_len,
                              0};
    if (n > cap)
        return n;
    memcpy(key, ints, sizeof(ints));
    memcpy(key + 12, d, sizeof(d));
    if (ns > 0)
        memcpy(key + RULE_KEY_WORDS, p->short_factor, (size_t)ns * 8);
    if (nl > 0)
        memcpy(key + RULE_KEY_WORDS + (ns > 0 ? ns : 0), p->long_factor, (size_t)nl * 8);
    return n;
}

const pe_rope_plan *pe_rope_plan_rule(const fastpe_rope_params *p, int64_t head_dim, int *slot) {
    uint64_t stack[RULE_KEY_WORDS + 64], *key = stack;
    const pe_rope_plan *pl = NULL;
    size_t n;
    int64_t nf;
    double *w, attention;
    *slot = -1;
    if (p == NULL)
        return NULL;
    n = rule_key(p, head_dim, stack, sizeof(stack) / 8);
    if (n > sizeof(stack) / 8) { /* (longrope's lists beyond 64 values) */
        key = (uint64_t *)malloc(n * 8);
        if (key == NULL)
            return NULL;
        rule_key(p, head_dim, key, n);
    }
    pl = (const pe_rope_plan *)pe_plans_find(key, n * 8, slot);
    if (pl == NULL && rule_list(p, head_dim, &w, &nf, &attention) == FASTPE_OK) {
        pl = pe_rope_plan_add(key, n * 8, w, nf, attention, slot);
        free(w);
    }
    if (key != stack)
        free(key);
    return pl;
}

const pe_rope_axes_plan *pe_rope_plan_axes_rule(const fastpe_rope_params *p, int64_t head_dim,
                                                const int64_t *sections, int n_axes,
                                                int section_layout, int *slot) {
    uint64_t stack[3 + PE_ROPE_MAX_AXES + RULE_KEY_WORDS + 64], *key = stack;
    const size_t cap = sizeof(stack) / 8;
    const pe_rope_axes_plan *pl = NULL;
    int head;
    int64_t nf;
    double *w, attention;
    size_t n;
    *slot = -1;
    if (p == NULL)
        return NULL;
    /* the sections' words, then the rule's as pe_rope_plan_rule keys it */
    head = pe_rope_axes_key(key, sections, n_axes, section_layout);
    if (head < 0)
        return NULL;
    n = (size_t)head + rule_key(p, head_dim, key + head, cap - (size_t)head);
    if (n > cap) { /* (longrope's lists) */
        key = (uint64_t *)malloc(n * 8);
        if (key == NULL)
            return NULL;
        memcpy(key, stack, (size_t)head * 8);
        rule_key(p, head_dim, key + head, n - (size_t)head);
    }
    pl = (const pe_rope_axes_plan *)pe_plans_find(key, n * 8, slot);
    /* (the rule's frequencies straight from the rule: a plan of the whole list, an
       entry of its own, would never be read) */
    if (pl == NULL && rule_list(p, head_dim, &w, &nf, &attention) == FASTPE_OK) {
        pl = pe_rope_plan_axes_add(key, n * 8, w, nf, attention, sections, n_axes, section_layout,
                                   slot);
        free(w);
    }
    if (key != stack)
        free(key);
    return pl;
}
