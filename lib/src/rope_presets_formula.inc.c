/*
 * The float64 timm rules' formulas (pe_presets.h, docs/rope.md), written once
 * for a number type and included twice by rope_presets.c: NUM = pe_dd, the
 * fast evaluation, and NUM = pe_mp, the exact path taken where the fast value
 * is too close to a rounding boundary to round.  The includer defines NUM,
 * FN(name), N_FROM (of a double), N_ADD, N_NEG, N_MUL, N_DIV, N_HI (the
 * leading double), N_EXP (|t| < 746), N_LOG (of a positive NUM), N_PI, N_LN2,
 * N_EPS_LIN (the linear rule's relative error bound) and N_EPS(s), that of
 * exp(t) for a t built from logs whose magnitudes sum to s; the file undefines
 * them at its end.
 */

/* Frequency i of a float64 rule before its rounding (*w), with its relative
 * error bound (*eps); W_INF or W_ZERO where it is beyond the doubles' range. */
static int FN(value)(const preset *P, int64_t i, NUM *w, double *eps) {
    const double m = (double)P->m, di = (double)i;
    NUM t, la, lb;
    double th;
    if (P->kind == PE_TIMM_PIXEL_LINEAR) {
        /* pi ((m - i) / m + max_res i / (2m)): two terms >= 0 (no cancellation),
         * neither beyond max_res / 2 (no overflow before the product with pi) */
        NUM a = N_DIV(N_FROM(m - di), N_FROM(m));
        NUM b = N_MUL(N_FROM(P->x), N_DIV(N_FROM(di), N_FROM(2.0 * m)));
        *w = N_MUL(N_ADD(a, b), N_PI);
        *eps = N_EPS_LIN;
        return isfinite(N_HI(*w)) ? W_OK : W_INF;
    }
    /* the rest are exp(t), the constant factor (pi, 2 pi) inside t as its log,
     * so that the range checks below are those of the value itself */
    la = N_LOG(N_FROM(P->x));
    switch (P->kind) {
    case PE_TIMM_PIXEL_LOG: /* (i / m) (ln max_res - ln 2) + ln pi */
        lb = N_LOG(N_PI);
        t = N_ADD(N_MUL(N_DIV(N_FROM(di), N_FROM(m)), N_ADD(la, N_NEG(N_LN2))), lb);
        break;
    case PE_TIMM_DINO_TEMP: /* -(2i / half) ln temperature + ln 2pi */
        lb = N_LOG(N_ADD(N_PI, N_PI));
        t = N_ADD(N_NEG(N_MUL(N_DIV(N_FROM(2.0 * di), N_FROM((double)P->half)), la)), lb);
        break;
    default: { /* DINO_PERIODS: -((i / m) ln hi + ((m - i) / m) ln lo) + ln 2pi */
        NUM lh = N_LOG(N_FROM(P->y));
        lb = N_LOG(N_ADD(N_PI, N_PI));
        t = N_ADD(N_MUL(N_DIV(N_FROM(di), N_FROM(m)), lh),
                  N_MUL(N_DIV(N_FROM(m - di), N_FROM(m)), la));
        t = N_ADD(N_NEG(t), lb);
        la = N_ADD(N_FROM(fabs(N_HI(la))), N_FROM(fabs(N_HI(lh)))); /* (for the bound) */
        break;
    }
    }
    th = N_HI(t);
    if (th > 709.8) /* beyond DBL_MAX */
        return W_INF;
    if (th < -745.2) /* below half the least subnormal */
        return W_ZERO;
    *w = N_EXP(t);
    /* the weights of the logs are at most 1; ln 2 and ln 2pi below 2 */
    *eps = N_EPS(fabs(N_HI(la)) + 2.0);
    return W_OK;
}

#include "pe_num_end.inc.h"
#undef N_LN2
#undef N_EPS_LIN
#undef N_EPS
