/*
 * The vector makers of one 16-bit format's AVX-512 writers, included by
 * pe_v512.c once per format: PE_V512_HSFX names it (its 32 halves come from
 * pe_v512_halves_<HSFX>), PE_V512_HINLINE is the target they are built for.
 * No include guard, on purpose.
 */
#define PE_HV_CAT_(a, b) a##_##b
#define PE_HV_CAT(a, b)  PE_HV_CAT_(a, b)
#define PE_HV_HALVES     PE_HV_CAT(pe_v512_halves, PE_V512_HSFX)
#define PE_HV_FN(kind)   PE_V512_CAT3(pe_v512_vectors, kind, PE_V512_HSFX)

/* interleaved: 16 frequencies = 32 entries of each row */
PE_V512_HINLINE void PE_HV_FN(interleaved)(int64_t i, PE_V512_ARGS, __m512i *v0, __m512i *v1,
                                           __m512i *v2, __m512i *v3) {
    /* from [s0..s7 c0..c7 s8..s15 c8..c15] to s0 c0 s1 c1 ... */
    static const uint16_t ix[32] = {0,  8,  1,  9,  2,  10, 3,  11, 4,  12, 5,  13, 6,  14, 7,  15,
                                    16, 24, 17, 25, 18, 26, 19, 27, 20, 28, 21, 29, 22, 30, 23, 31};
    __m512i idx = _mm512_loadu_si512((const void *)ix);
    __m512d sp0, cp0, sm0, cm0, sp1, cp1, sm1, cm1;
    pe_v512_rotate(i, As, Ac, Tm, Ts, &sp0, &cp0, &sm0, &cm0);
    pe_v512_rotate(i + 8, As, Ac, Tm, Ts, &sp1, &cp1, &sm1, &cm1);
    *v0 = _mm512_permutexvar_epi16(idx, PE_HV_HALVES(sp0, cp0, sp1, cp1));
    *v2 = _mm512_permutexvar_epi16(idx, PE_HV_HALVES(sm0, cm0, sm1, cm1));
    *v1 = *v3 = *v0;
}

/* split: 32 frequencies = 32 entries of each destination */
PE_V512_HINLINE void PE_HV_FN(split)(int64_t i, PE_V512_ARGS, __m512i *v0, __m512i *v1, __m512i *v2,
                                     __m512i *v3) {
    __m512d sp[4], cp[4], sm[4], cm[4];
    for (int q = 0; q < 4; q++)
        pe_v512_rotate(i + 8 * q, As, Ac, Tm, Ts, &sp[q], &cp[q], &sm[q], &cm[q]);
    *v0 = PE_HV_HALVES(sp[0], sp[1], sp[2], sp[3]);
    *v1 = PE_HV_HALVES(cp[0], cp[1], cp[2], cp[3]);
    *v2 = PE_HV_HALVES(sm[0], sm[1], sm[2], sm[3]);
    *v3 = PE_HV_HALVES(cm[0], cm[1], cm[2], cm[3]);
}

#undef PE_HV_FN
#undef PE_HV_HALVES
#undef PE_HV_CAT
#undef PE_HV_CAT_
#undef PE_V512_HINLINE
#undef PE_V512_HSFX
