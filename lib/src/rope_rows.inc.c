/*
 * One RoPE row rotated in place, per entry type: included by rope_rotate.c with ROT_T
 * (the element type), ROT_SFX (f32, f64, f16, bf16), ROT_LOAD(x) and
 * ROT_STORE(v) defined (ROT_ATTR optional; ROT_PAIRS 0 leaves out the interleaved
 * loop and ROT_HALF 0 the half-split one, where one is written by hand).  Each pair
 * (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) in float64, rounded once into the
 * row's type.
 */
#define ROT_FN(name) PE_CAT(name, ROT_SFX)

/* The rotation of one row, a loop per layout so that the compiler vectorises
 * it (restrict: the table is other memory, and the halves of a row are
 * disjoint).  ROT_ATTR, when defined, is a target attribute: the same loops
 * compiled for another instruction set, the same IEEE operations in the same
 * order (no FMA: -ffp-contract=off), hence the same bits. */
#ifndef ROT_ATTR
#define ROT_ATTR
#endif
#if !defined(ROT_HALF) || ROT_HALF
static ROT_ATTR void ROT_FN(pe_rot_half)(char *row, const double *PE_RESTRICT sn,
                                         const double *PE_RESTRICT cs, int64_t nf, double a) {
    ROT_T *PE_RESTRICT x1p = (ROT_T *)row;
    ROT_T *PE_RESTRICT x2p = (ROT_T *)row + nf;
    if (a == 1.0) { /* c * 1.0 == c exactly: two multiplies fewer, the same bits */
        for (int64_t i = 0; i < nf; i++) {
            double x1 = ROT_LOAD(x1p[i]);
            double x2 = ROT_LOAD(x2p[i]);
            x1p[i] = ROT_STORE(x1 * cs[i] - x2 * sn[i]);
            x2p[i] = ROT_STORE(x2 * cs[i] + x1 * sn[i]);
        }
        return;
    }
    for (int64_t i = 0; i < nf; i++) {
        double x1 = ROT_LOAD(x1p[i]);
        double x2 = ROT_LOAD(x2p[i]);
        double c = cs[i] * a;
        double s = sn[i] * a;
        x1p[i] = ROT_STORE(x1 * c - x2 * s);
        x2p[i] = ROT_STORE(x2 * c + x1 * s);
    }
}

#endif

#if !defined(ROT_PAIRS) || ROT_PAIRS
static ROT_ATTR void ROT_FN(pe_rot_pairs)(char *row, const double *PE_RESTRICT sn,
                                          const double *PE_RESTRICT cs, int64_t nf, double a) {
    ROT_T *PE_RESTRICT x = (ROT_T *)row;
    if (a == 1.0) { /* as in pe_rot_half */
        for (int64_t i = 0; i < nf; i++) {
            double x1 = ROT_LOAD(x[2 * i]);
            double x2 = ROT_LOAD(x[2 * i + 1]);
            x[2 * i] = ROT_STORE(x1 * cs[i] - x2 * sn[i]);
            x[2 * i + 1] = ROT_STORE(x2 * cs[i] + x1 * sn[i]);
        }
        return;
    }
    for (int64_t i = 0; i < nf; i++) {
        double x1 = ROT_LOAD(x[2 * i]);
        double x2 = ROT_LOAD(x[2 * i + 1]);
        double c = cs[i] * a;
        double s = sn[i] * a;
        x[2 * i] = ROT_STORE(x1 * c - x2 * s);
        x[2 * i + 1] = ROT_STORE(x2 * c + x1 * s);
    }
}
#endif
#undef ROT_ATTR

#undef ROT_FN
#undef ROT_T
#undef ROT_SFX
#undef ROT_LOAD
#undef ROT_STORE
#undef ROT_PAIRS
#undef ROT_HALF
