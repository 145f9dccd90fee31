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

#undef ROT_FN
#undef ROT_T
#undef ROT_SFX
#undef ROT_LOAD
#undef ROT_STORE
