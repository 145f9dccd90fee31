/*
 * The rows of RoPE's cos and sin caches from the [sin | cos] angle table, per
 * entry type: included by rope.c with CROW_T (the element type), CROW_SFX (f32,
 * f64, f16, bf16) and CROW_STORE(v) (a float64 rounded once into CROW_T) defined.
 */
#define CROW_FN(name) PE_CAT(name, CROW_SFX)

/* Row r of the cos and sin caches from row r of the [sin | cos] table: rt in the
 * cache's type, or dt in float64 with the attention factor a still to apply (one
 * rounding from the float64 product).  Frequency i goes to two places of a row:
 * i and nf + i (half), or 2i and 2i + 1 (interleaved). */
PE_INLINE void CROW_FN(pe_rope_cache_row)(CROW_T *cos, CROW_T *sin, int64_t r, int64_t row_stride,
                                          int64_t nf, int half, const CROW_T *rt, const double *dt,
                                          double a) {
    int64_t step = half ? 1 : 2;
    int64_t dup = half ? nf : 1;
    CROW_T *c = cos + r * row_stride;
    CROW_T *s = sin + r * row_stride;
    if (rt != NULL) {
        rt += r * 2 * nf;
        for (int64_t i = 0; i < nf; i++) {
            int64_t j = i * step;
            CROW_T vs = rt[i], vc = rt[nf + i];
            s[j] = vs;
            s[j + dup] = vs;
            c[j] = vc;
            c[j + dup] = vc;
        }
    } else {
        dt += r * 2 * nf;
        for (int64_t i = 0; i < nf; i++) {
            int64_t j = i * step;
            s[j] = CROW_STORE(dt[i] * a);
            c[j] = CROW_STORE(dt[nf + i] * a);
            s[j + dup] = s[j];
            c[j + dup] = c[j];
        }
    }
}

#undef CROW_FN
#undef CROW_T
#undef CROW_SFX
#undef CROW_STORE
