/*
 * One RoPE row rotated in place, per entry type: included by rope.c with ROT_T
 * (the element type), ROT_SFX (f32, f64, f16, bf16), ROT_LOAD(x) and
 * ROT_STORE(v) defined.  Each pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) in
 * float64, rounded once into the row's type.
 */
#define ROT_FN(name) PE_CAT(name, ROT_SFX)

PE_INLINE void ROT_FN(pe_rotate_row)(ROT_T *x, const double *sn, const double *cs, int64_t nf,
                                     int half, double a) {
    for (int64_t i = 0; i < nf; i++) {
        int64_t j1 = half ? i : 2 * i;
        int64_t j2 = half ? i + nf : 2 * i + 1;
        double x1 = ROT_LOAD(x[j1]);
        double x2 = ROT_LOAD(x[j2]);
        double c = cs[i] * a;
        double s = sn[i] * a;
        x[j1] = ROT_STORE(x1 * c - x2 * s);
        x[j2] = ROT_STORE(x2 * c + x1 * s);
    }
}

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

#undef ROT_FN
#undef ROT_T
#undef ROT_SFX
#undef ROT_LOAD
#undef ROT_STORE
