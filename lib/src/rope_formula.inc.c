/*
 * The float64 rules' formulas (docs/rope.md), written once for a number type
 * and included twice by rope_rules.c: NUM = pe_dd, the fast evaluation, and
 * NUM = pe_mp, the exact path taken where the fast value is too close to a
 * rounding boundary to round.  The includer defines NUM, FN(name) and the
 * operations N_FROM (of a double), N_ADD, N_NEG, N_MUL, N_DIV, N_LT, N_HI (the
 * leading double), N_EXP (|t| < 746), N_LOG (of a positive NUM), N_TWO_PI and N_EPS(t),
 * the relative error bound of exp(t) for a t computed from a base's log; the
 * file undefines them at its end, ready for the next number type.
 */

/* ln of the power's base: theta's, or, dynamic, that of the real scaled base
 * theta (factor L / mpe - (factor - 1))^(d / (d - 2)). */
static NUM FN(ln_base)(const rule *R) {
    NUM d, scale;
    if (R->type != FASTPE_ROPE_DYNAMIC)
        return N_LOG(N_FROM(R->theta));
    d = N_FROM((double)R->dim);
    scale = N_ADD(N_DIV(N_MUL(N_FROM(R->factor), N_FROM(R->len)), N_FROM(R->mpe)),
                  N_NEG(N_ADD(N_FROM(R->factor), N_FROM(-1.0))));
    return N_ADD(N_LOG(N_FROM(R->theta0)), N_MUL(N_DIV(d, N_ADD(d, N_FROM(-2.0))), N_LOG(scale)));
}

/* Frequency i before its rounding (*w), with its relative error bound (*eps),
 * or W_UNUSABLE / W_EDGE with the value a refusal reports (*out). */
static int FN(frequency)(const rule *R, NUM ln_base, int64_t i, NUM *wout, double *eps,
                         double *out) {
    /* w = base^(-2i/d) = exp(t) */
    NUM t = N_MUL(N_NEG(N_DIV(N_FROM((double)(2 * i)), N_FROM((double)R->dim))), ln_base);
    NUM w;
    double th = N_HI(t);
    if (th > 709.8) { /* beyond DBL_MAX */
        *out = INFINITY;
        return W_UNUSABLE;
    }
    w = th < -745.2 ? N_FROM(0.0) : N_EXP(t); /* below half the least subnormal */
    *eps = N_EPS(th);
    switch (R->type) {
    case FASTPE_ROPE_LINEAR:
        w = N_DIV(w, N_FROM(R->factor));
        break;
    case FASTPE_ROPE_LONGROPE:
        w = N_DIV(w, N_FROM(R->fac[i]));
        break;
    case FASTPE_ROPE_YARN: {
        /* w (1 - ramp) + (w / factor) ramp, ramp = clip((i - low) / (high - low)) */
        NUM ramp = N_DIV(N_ADD(N_FROM((double)i), N_FROM(-R->low)),
                         N_ADD(N_FROM(R->high), N_FROM(-R->low)));
        if (isnan(N_HI(ramp))) {
            *out = NAN;
            return W_UNUSABLE;
        }
        if (N_LT(ramp, N_FROM(0.0)))
            ramp = N_FROM(0.0);
        else if (N_LT(N_FROM(1.0), ramp))
            ramp = N_FROM(1.0);
        w = N_ADD(N_MUL(w, N_ADD(N_FROM(1.0), N_NEG(ramp))),
                  N_MUL(N_DIV(w, N_FROM(R->factor)), ramp));
        /* the weights' sum 1 - ramp (1 - 1/factor) is at least 1/factor */
        *eps *= 2.0 + R->factor;
        break;
    }
    case FASTPE_ROPE_LLAMA3: {
        NUM two_pi = N_TWO_PI;
        NUM L = N_FROM(R->old_len), wavelen = N_DIV(two_pi, w);
        if (N_LT(wavelen, N_DIV(L, N_FROM(R->high))))
            break;
        if (N_LT(N_DIV(L, N_FROM(R->low)), wavelen)) {
            w = N_DIV(w, N_FROM(R->factor));
            break;
        }
        if (R->high == R->low)
            return W_EDGE;
        {
            /* smooth = (L / wavelen - low) / (high - low); w / factor + smooth w (1 - 1/factor) */
            NUM smooth = N_DIV(N_ADD(N_DIV(L, wavelen), N_FROM(-R->low)),
                               N_ADD(N_FROM(R->high), N_FROM(-R->low)));
            NUM kept = N_MUL(smooth, w);
            NUM divided = N_DIV(N_MUL(N_ADD(N_FROM(1.0), N_NEG(smooth)), w), N_FROM(R->factor));
            w = N_ADD(divided, kept);
            /* smooth's absolute error, about eps L / wavelen / (high - low), counts
             * up to factor times in the sum, which is at least w / factor */
            *eps *= 4.0 + 4.0 * R->factor * R->high / (R->high - R->low);
        }
        break;
    }
    default:
        break;
    }
    *wout = w;
    return W_USABLE;
}

#include "pe_num_end.inc.h"
#undef N_LT
#undef N_TWO_PI
#undef N_EPS
