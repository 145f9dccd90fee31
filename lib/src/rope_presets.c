/*
 * timm's rotary frequency rules (pe_presets.h), the only implementation
 * (fastpe.rope_presets calls it): the same bits on every machine, no libm
 * transcendental function and no FMA (fastpe's own correctly rounded log and
 * pow, pe_crmath.h).
 *
 * precision float64: each frequency is the real number of the rule's formula
 * (docs/rope.md; the exponents i / m and 2i / half exact rationals, pi exact),
 * evaluated in double-double and rounded once, or on the exact path where
 * that rounding is undecided.
 *
 * precision float32: timm's torch steps in its order, each rounded to float32
 * as rope_rules.c rounds them (in double, then once to float); the powers the
 * correctly rounded float32 ones; 2 pi / period, DINOv3's frequency, the
 * float64 quotient of timm's float32 period (its angle 2 pi c / period is
 * exact in fastpe).
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"
#include "pe_presets.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PI     3.141592653589793 /* math.pi, torch.pi */
#define TWO_PI 6.283185307179586 /* 2 * math.pi, one rounding */

typedef struct {
    int kind;
    int64_t m, half; /* max(n - 1, 1); DINO_TEMP: dim // 2 */
    double x, y;
} preset;

enum { W_OK, W_INF, W_ZERO };

/* One float32 operation's result from its double one. */
static double rnd(double v) { return (double)(float)v; }

void pe_linspace_f32(double start, double end, int64_t steps, float *out) {
    const double a = (double)(float)start, b = (double)(float)end;
    double step;
    int64_t i;
    if (steps < 1 || out == NULL)
        return;
    if (steps == 1) {
        out[0] = (float)a;
        return;
    }
    /* torch: (end - start) / (steps - 1) in float32, the count cast to float */
    step = rnd(rnd(b - a) / rnd((double)(steps - 1)));
    for (i = 0; i < steps; i++) {
        int decided;
        /* the product of two floats is exact in double, the sum exact in
         * double-double; rounded once to float as the fused multiply-add */
        pe_dd v = i < steps / 2 ? pe_two_sum(a, step * rnd((double)i))
                                : pe_two_sum(b, -step * rnd((double)(steps - 1 - i)));
        out[i] = pe_round_float(v, 0.0, &decided);
    }
}

/* The float64 formulas, in double-double and on the exact path. */
#include "pe_num.inc.h"
#define N_LN2     pe_dd_add(pe_dd_from(PE_LN2_HI), pe_dd_from(PE_LN2_LO))
#define N_EPS_LIN 1.2621774483536189e-29 /* 2^-96 */
#define N_EPS(s)  (5.048709793414476e-29 /* 2^-94 */ * (1.0 + (s)))
#include "rope_presets_formula.inc.c"

/* ln's absolute error 2^-228 + |k| 2^-255 per log (weights at most 1), exp's
 * 2^-230 relative, each product's and quotient's 2^-254 */
#define PE_NUM_MP
#include "pe_num.inc.h"
#define N_LN2     pe_mp_log(pe_mp_from(2.0))
#define N_EPS_LIN ldexp(1.0, -240)
#define N_EPS(s)  ldexp(1.0, -220)
#include "rope_presets_formula.inc.c"

static double beyond(int f) { return f == W_INF ? INFINITY : 0.0; }

/* Frequency i in float64: rounded once from double-double, or from the exact
 * path where that rounding is undecided. */
static double value64(const preset *P, int64_t i) {
    pe_dd w;
    pe_mp wm;
    double eps, r;
    int decided, f = dd_value(P, i, &w, &eps);
    if (f != W_OK)
        return beyond(f);
    r = pe_round_double(w, eps, &decided);
    if (decided)
        return r;
    f = mp_value(P, i, &wm, &eps);
    return f != W_OK ? beyond(f) : pe_round_exact(wm, 53, -1074, eps);
}

/* The float32 powers base^e[k], correctly rounded, or pow32's. */
static void powers32(float base, const float *e, float *out, int64_t n, pe_pow32_fn pow32,
                     void *ctx) {
    pe_dd ln;
    if (pow32 != NULL) {
        pow32(ctx, base, e, out, n);
        return;
    }
    ln = base > 0.0f && isfinite(base) ? pe_dd_log((double)base) : pe_dd_from(NAN);
    for (int64_t k = 0; k < n; k++)
        out[k] = pe_powf_cr_ln(base, ln, e[k]);
}

/* The n frequencies in float32, timm's steps (its torch expressions in the
 * comments); FASTPE_ENOMEM or FASTPE_OK. */
static int values32(const preset *P, int64_t n, double *out, pe_pow32_fn pow32, void *ctx) {
    float *e = (float *)malloc((size_t)n * sizeof(float));
    float *pw = (float *)malloc((size_t)n * sizeof(float));
    int64_t i;
    if (e == NULL || pw == NULL) {
        free(e);
        free(pw);
        return FASTPE_ENOMEM;
    }
    switch (P->kind) {
    case PE_TIMM_PIXEL_LINEAR: /* linspace(1.0, max_res / 2, n) * torch.pi */
        pe_linspace_f32(1.0, P->x / 2, n, e);
        for (i = 0; i < n; i++)
            out[i] = rnd((double)e[i] * rnd(PI));
        break;
    case PE_TIMM_PIXEL_LOG: /* 2 ** linspace(0, math.log(max_res, 2) - 1, n) * torch.pi */
        pe_linspace_f32(0.0, pe_log_cr(P->x) / pe_log_cr(2.0) - 1.0, n, e);
        powers32(2.0f, e, pw, n, pow32, ctx);
        for (i = 0; i < n; i++)
            out[i] = rnd((double)pw[i] * rnd(PI));
        break;
    case PE_TIMM_DINO_TEMP: /* temperature ** (2.0 * arange(n) / (dim // 2)) */
        for (i = 0; i < n; i++)
            e[i] = (float)(rnd(2.0 * rnd((double)i)) / rnd((double)P->half));
        powers32((float)P->x, e, pw, n, pow32, ctx);
        for (i = 0; i < n; i++)
            out[i] = TWO_PI / (double)pw[i];
        break;
    default: /* DINO_PERIODS: min_period * ((max_period / min_period) ** linspace(0, 1, n)) */
        pe_linspace_f32(0.0, 1.0, n, e);
        powers32((float)(P->y / P->x), e, pw, n, pow32, ctx);
        for (i = 0; i < n; i++)
            out[i] = TWO_PI / rnd(rnd(P->x) * (double)pw[i]);
        break;
    }
    free(e);
    free(pw);
    return FASTPE_OK;
}

/* A finite number > 0 (as fastpe._validate.as_base). */
static int positive(double v) { return isfinite(v) && v > 0.0; }

static int check(int kind, int precision, int64_t n, int64_t half, double x, double y) {
    static const char *const x_name[] = {"max_res", "max_res", "temperature", "temperature",
                                         "min_period"};
    if (kind < PE_TIMM_PIXEL_LINEAR || kind > PE_TIMM_DINO_PERIODS)
        return pe_fail(FASTPE_EINVAL, "kind", -1, (double)kind, (double)PE_TIMM_DINO_PERIODS);
    if (precision != FASTPE_PRECISION_FLOAT32 && precision != FASTPE_PRECISION_FLOAT64)
        return pe_fail(FASTPE_EINVAL, "precision", -1, (double)precision,
                       (double)FASTPE_PRECISION_FLOAT64);
    if (n < 1)
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n, 1.0);
    if (n > ((int64_t)1 << 30))
        return pe_fail(FASTPE_ESIZE, "n", -1, (double)n, (double)((int64_t)1 << 30));
    /* (2i / half <= 1: the temperature's powers stay within its own range) */
    if (kind == PE_TIMM_DINO_TEMP && (half < 2 * n - 1 || half > ((int64_t)1 << 31)))
        return pe_fail(FASTPE_EINVAL, "half", -1, (double)half, (double)(2 * n - 1));
    if (!positive(x))
        return pe_fail(FASTPE_EINVAL, x_name[kind], -1, x, 0.0);
    if (kind == PE_TIMM_DINO_PERIODS && !positive(y))
        return pe_fail(FASTPE_EINVAL, "max_period", -1, y, 0.0);
    return FASTPE_OK;
}

int pe_timm_frequencies(int kind, int precision, int64_t n, int64_t half, double x, double y,
                        double *out, pe_rule_detail *why, pe_pow32_fn pow32, void *pow_ctx) {
    preset P;
    double *w;
    int64_t i;
    int err;
    if (why != NULL) {
        why->reason = PE_RULE_ARGUMENT;
        why->index = -1;
        why->value = NAN;
    }
    if (out == NULL)
        return pe_fail(FASTPE_ENULL, "out", -1, NAN, NAN);
    err = check(kind, precision, n, half, x, y);
    if (err != FASTPE_OK)
        return err;
    if (kind == PE_TIMM_LANGUAGE) {
        /* 1 / temperature ** (arange(n) / n): transformers' default rule of
         * head_dim 2n, whose exponents 2i / 2n round as i / n does */
        fastpe_rope_params p;
        int64_t nf;
        double attention;
        fastpe_rope_params_init(&p);
        p.rope_theta = x;
        p.precision = precision;
        return pe_rope_rule(&p, 2 * n, out, n, &nf, &attention, why, pow32, pow_ctx);
    }
    P.kind = kind;
    P.m = n > 1 ? n - 1 : 1;
    P.half = half;
    P.x = x;
    P.y = y;
    w = (double *)malloc((size_t)n * sizeof(double));
    if (w == NULL)
        return FASTPE_ENOMEM;
    if (precision == FASTPE_PRECISION_FLOAT32) {
        err = values32(&P, n, w, pow32, pow_ctx);
    } else {
        for (i = 0; i < n; i++)
            w[i] = value64(&P, i);
    }
    /* every frequency finite, and the pixel bands >= 0, DINOv3's > 0 (its
     * periods finite and > 0) */
    for (i = 0; i < n && err == FASTPE_OK; i++) {
        int dino = kind == PE_TIMM_DINO_TEMP || kind == PE_TIMM_DINO_PERIODS;
        if (!(isfinite(w[i]) && (dino ? w[i] > 0.0 : w[i] >= 0.0))) {
            err = pe_fail(FASTPE_EBASE, "inv_freq", i, w[i], NAN);
            if (why != NULL) {
                why->reason = PE_RULE_FREQUENCY;
                why->index = i;
                why->value = w[i];
            }
        }
    }
    if (err == FASTPE_OK)
        memcpy(out, w, (size_t)n * sizeof(double));
    free(w);
    return err;
}
