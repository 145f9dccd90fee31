/*
 * One RoPE row rotated in place, per entry type: included by rope.c with ROT_T
 * (the element type), ROT_SFX (f32, f64, f16, bf16), ROT_LOAD(x) and
 * ROT_STORE(v) defined (ROT_ATTR optional; ROT_CACHE 0 leaves out the cache rows, for
 * a second compilation of the rotations; ROT_PAIRS 0 the interleaved loop and
 * ROT_HALF 0 the half-split one, where one is written by hand).  Each pair
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

#if !defined(ROT_CACHE) || ROT_CACHE
/* Row r of the cos and sin caches from row r of the [sin | cos] table: rt in the
 * cache's type, or dt in float64 with the attention factor a still to apply (one
 * rounding from the float64 product).  Frequency i goes to two places of a row:
 * i and nf + i (half), or 2i and 2i + 1 (interleaved). */
PE_INLINE void ROT_FN(pe_rope_cache_row)(ROT_T *cos, ROT_T *sin, int64_t r, int64_t row_stride,
                                         int64_t nf, int half, const ROT_T *rt, const double *dt,
                                         double a) {
    int64_t step = half ? 1 : 2;
    int64_t dup = half ? nf : 1;
    ROT_T *c = cos + r * row_stride;
    ROT_T *s = sin + r * row_stride;
    if (rt != NULL) {
        rt += r * 2 * nf;
        for (int64_t i = 0; i < nf; i++) {
            int64_t j = i * step;
            ROT_T vs = rt[i], vc = rt[nf + i];
            s[j] = vs;
            s[j + dup] = vs;
            c[j] = vc;
            c[j + dup] = vc;
        }
    } else {
        dt += r * 2 * nf;
        for (int64_t i = 0; i < nf; i++) {
            int64_t j = i * step;
            s[j] = ROT_STORE(dt[i] * a);
            c[j] = ROT_STORE(dt[nf + i] * a);
            s[j + dup] = s[j];
            c[j + dup] = c[j];
        }
    }
}

#endif

#undef ROT_FN
#undef ROT_T
#undef ROT_SFX
#undef ROT_LOAD
#undef ROT_STORE
#undef ROT_CACHE
#undef ROT_PAIRS
#undef ROT_HALF
