/*
 * The skeleton of the AVX-512 writers, included by pe_v512.c once per layout
 * (PE_V512_SPLIT 0: interleaved, 1: split) and type (PE_V512_TYPE: float32,
 * float64, or a 16-bit format, named by PE_V512_HSFX).  No include guard, on
 * purpose.  What differs between the four is
 * only how a block of rotated frequencies becomes output vectors (the
 * pe_v512_vectors_* functions) and how many of them a row takes.
 *
 * A writer stores a head block at frequency 0 under a mask (the entries before
 * the first 64-byte boundary), whole blocks with full stores (streaming stores
 * if `stream`), and a tail block at the last whole-block position under a mask
 * (the entries after the last full block; it recomputes a few entries of the
 * previous block, with the same bits, and does not store them).  Masked stores
 * touch only their lanes, so nothing outside the row is written.
 *
 * `rows` is a constant at every call, so the skeleton is inlined and what a
 * call does not store is compiled away:
 *   PE_V512_PAIR:  the mirrored pair, d0/d1 at +t and d2/d3 at -t;
 *   PE_V512_PLUS, PE_V512_MINUS: one row, d0/d1, the +t or the -t half of the
 *                  pair (d2/d3 must be d0/d1; they are never stored).  A row of
 *                  sign sg is the half of that sign: multiplying by sg = +-1 is
 *                  exact, so those are the bits of PE_SIN / PE_COS.
 * Interleaved rows have one destination each (d0, d2; d1 = d0 and d3 = d2),
 * split rows two (sines d0, d2; cosines d1, d3).
 */
#if PE_V512_TYPE == PE_V512_T_F64
#define PE_T               double
#define PE_V               __m512d
#define PE_STOREU(p, x)    _mm512_storeu_pd(p, x)
#define PE_STREAM(p, x)    _mm512_stream_pd(p, x)
#define PE_MSTORE(p, k, x) _mm512_mask_storeu_pd(p, k, x)
#define PE_SFX             f64
#define PE_LSFX            f64
#define PE_LANES           8
#define PE_MASK            __mmask8
#define PE_ALL             0xFFu
#define PE_SK_INLINE       PE_V512_INLINE
#define PE_SK_TARGET       "avx512f"
#elif PE_V512_TYPE == PE_V512_T_F32
#define PE_T               float
#define PE_V               __m512
#define PE_STOREU(p, x)    _mm512_storeu_ps(p, x)
#define PE_STREAM(p, x)    _mm512_stream_ps(p, x)
#define PE_MSTORE(p, k, x) _mm512_mask_storeu_ps(p, k, x)
#define PE_SFX             f32
#define PE_LSFX            f32
#define PE_LANES           16
#define PE_MASK            __mmask16
#define PE_ALL             0xFFFFu
#define PE_SK_INLINE       PE_V512_INLINE
#define PE_SK_TARGET       "avx512f"
#else /* float16 or bfloat16: 32 lanes of uint16_t bits */
#define PE_T               uint16_t
#define PE_V               __m512i
#define PE_STOREU(p, x)    _mm512_storeu_si512((void *)(p), x)
#define PE_STREAM(p, x)    _mm512_stream_si512((void *)(p), x)
#define PE_MSTORE(p, k, x) _mm512_mask_storeu_epi16((void *)(p), k, x)
#define PE_SFX             PE_V512_HSFX
#define PE_LSFX            h16
#define PE_LANES           32
#define PE_MASK            __mmask32
#define PE_ALL             0xFFFFFFFFu
#ifdef PE_V512_HTARGET /* the AVX512_BF16 instance */
#define PE_SK_INLINE PE_V512_BF16_INLINE
#define PE_SK_TARGET "avx512f,avx512bw,avx512bf16"
#else
#define PE_SK_INLINE PE_V512_BW_INLINE
#define PE_SK_TARGET "avx512f,avx512bw"
#endif
#endif
#if PE_V512_SPLIT
#define PE_KIND split
#define PE_E    1 /* entries per frequency and destination */
#define PE_NDST 2 /* destinations per row */
#define PE_NV   1 /* vectors per destination and block */
#else
#define PE_KIND interleaved
#define PE_E    2
#define PE_NDST 1
#define PE_NV   (PE_V512_TYPE == PE_V512_T_F64 ? 2 : 1)
#endif
#define PE_F        (PE_NV * PE_LANES / PE_E) /* frequencies per block */
#define PE_FN(name) PE_V512_CAT3(pe_v512_##name, PE_KIND, PE_SFX)

/* One vector to p: a streaming store, or a plain one. */
PE_SK_INLINE void PE_FN(put)(PE_T *p, PE_V x, int stream) {
    if (stream)
        PE_STREAM(p, x);
    else
        PE_STOREU(p, x);
}

/* The block at frequency i: v0, v1 for +t and v2, v3 for -t (one row: the
 * half of its sign in v0, v1). */
PE_SK_INLINE void PE_FN(block)(int64_t i, int rows, PE_V512_ARGS, PE_V *v0, PE_V *v1, PE_V *v2,
                               PE_V *v3) {
    PE_FN(vectors)(i, As, Ac, Tm, Ts, v0, v1, v2, v3);
    if (rows == PE_V512_MINUS) {
        *v0 = *v2;
        *v1 = *v3;
    }
}

/* The first cnt entries of one row (destinations a, b) from x, y. */
PE_SK_INLINE void PE_FN(head)(PE_T *a, PE_T *b, int64_t cnt, int al, PE_V x, PE_V y) {
    PE_MASK k;
    if (al) {
        PE_V512_CAT3(pe_v512, head_line, PE_LSFX)(a, cnt, x);
        if (PE_NDST == 2)
            PE_V512_CAT3(pe_v512, head_line, PE_LSFX)(b, cnt, y);
    } else {
        k = (PE_MASK)((1u << cnt) - 1u);
        PE_MSTORE(a, k, x);
        if (PE_NDST == 2)
            PE_MSTORE(b, k, y);
    }
}

/* A whole block of one row at entry o. */
PE_SK_INLINE void PE_FN(whole)(PE_T *a, PE_T *b, int64_t o, PE_V x, PE_V y, int stream) {
    PE_FN(put)(a + o, x, stream);
    if (PE_NDST == 2)
        PE_FN(put)(b + o, y, stream);
    else if (PE_NV == 2)
        PE_FN(put)(a + o + PE_LANES, y, stream);
}

/* The block at entry o of one row from its lane L on (the lanes before L are
 * already written). */
PE_SK_INLINE void PE_FN(tail)(PE_T *a, PE_T *b, int64_t o, int64_t L, int al, PE_V x, PE_V y) {
#if PE_NV == 2
    PE_MASK k0, k1;
    if (al) {
        pe_v512_tail2_line_f64(a + o + L, L, x, y);
    } else {
        k0 = (PE_MASK)(L < PE_LANES ? (PE_ALL << L) & PE_ALL : 0u);
        k1 = (PE_MASK)(L < PE_LANES ? PE_ALL : (PE_ALL << (L - PE_LANES)) & PE_ALL);
        PE_MSTORE(a + o, k0, x);
        PE_MSTORE(a + o + PE_LANES, k1, y);
    }
    (void)b;
#else
    PE_MASK k;
    if (al) {
        PE_V512_CAT3(pe_v512, tail_line, PE_LSFX)(a + o + L, L, x);
        if (PE_NDST == 2)
            PE_V512_CAT3(pe_v512, tail_line, PE_LSFX)(b + o + L, L, y);
    } else {
        k = (PE_MASK)((PE_ALL << L) & PE_ALL);
        PE_MSTORE(a + o, k, x);
        if (PE_NDST == 2)
            PE_MSTORE(b + o, k, y);
    }
#endif
}

/* The skeleton: n frequencies of one row or of the mirrored pair; 0 if it
 * cannot take them (see pe_v512.h). */
PE_SK_INLINE int PE_FN(rows)(PE_T *d0, PE_T *d1, PE_T *d2, PE_T *d3, int rows, int64_t n,
                             PE_V512_ARGS, int stream) {
    const int two = rows == PE_V512_PAIR;
    PE_V v0, v1, v2, v3;
    int64_t h, v, i, t0, L;
    int al;
    if (n < PE_F)
        return 0;
    h = pe_head(d0, PE_E * sizeof(PE_T), n);
    al = pe_aligned64(d0 + PE_E * h, d1 + PE_E * h, d2 + PE_E * h, d3 + PE_E * h);
    if (stream && !al)
        return 0;
    if (h > 0) {
        PE_FN(block)(0, rows, As, Ac, Tm, Ts, &v0, &v1, &v2, &v3);
        PE_FN(head)(d0, d1, PE_E * h, al, v0, v1);
        if (two)
            PE_FN(head)(d2, d3, PE_E * h, al, v2, v3);
    }
    v = h + (n - h) / PE_F * PE_F;
    for (i = h; i < v; i += PE_F) {
        PE_FN(block)(i, rows, As, Ac, Tm, Ts, &v0, &v1, &v2, &v3);
        PE_FN(whole)(d0, d1, PE_E * i, v0, v1, stream);
        if (two)
            PE_FN(whole)(d2, d3, PE_E * i, v2, v3, stream);
    }
    if (v < n) {
        t0 = n - PE_F;
        PE_FN(block)(t0, rows, As, Ac, Tm, Ts, &v0, &v1, &v2, &v3);
        L = PE_E * (v - t0); /* the first lane to store */
        PE_FN(tail)(d0, d1, PE_E * t0, L, al, v0, v1);
        if (two)
            PE_FN(tail)(d2, d3, PE_E * t0, L, al, v2, v3);
    }
    return 1;
}

/* The entry points (pe_v512.h): the mirrored pair, and one row as the +t or -t
 * half of a pair.  Each pins `rows` to a constant. */
__attribute__((target(PE_SK_TARGET))) int PE_FN(pair)(PE_T *p0, PE_T *p1, PE_T *m0, PE_T *m1,
                                                      int64_t n, PE_V512_ARGS, int stream) {
    return PE_FN(rows)(p0, p1, m0, m1, PE_V512_PAIR, n, As, Ac, Tm, Ts, stream);
}

__attribute__((target(PE_SK_TARGET))) int PE_FN(row)(PE_T *r0, PE_T *r1, int64_t n, PE_V512_ARGS,
                                                     double sg) {
    if (sg > 0.0)
        return PE_FN(rows)(r0, r1, r0, r1, PE_V512_PLUS, n, As, Ac, Tm, Ts, 0);
    return PE_FN(rows)(r0, r1, r0, r1, PE_V512_MINUS, n, As, Ac, Tm, Ts, 0);
}

#undef PE_FN
#undef PE_F
#undef PE_NV
#undef PE_NDST
#undef PE_E
#undef PE_KIND
#undef PE_ALL
#undef PE_MASK
#undef PE_LANES
#undef PE_SFX
#undef PE_LSFX
#undef PE_STOREU
#undef PE_STREAM
#undef PE_MSTORE
#undef PE_SK_INLINE
#undef PE_SK_TARGET
#undef PE_V
#undef PE_T
#undef PE_V512_SPLIT
#undef PE_V512_TYPE
