/*
 * What a table looks like: the frequency ladder of a convention and where each
 * frequency's sine and cosine go in an output row.  Every convention in use is
 * one of these column maps (see fastpe/_conventions.py):
 *   interleaved: sin_i at col 2i, cos_i at col 2i+1 for i < npairs, then an
 *                optional lone sine (Vaswani, odd d) at col d-1;
 *   split:       sin_i at col s_off+i (i < ns), cos_i at col c_off+i (i < nc)
 *                ([sin | cos] or, flipped, [cos | sin]);
 *   zero_col >= 0: that column is 0 (conventions that pad an odd width).
 */
#ifndef FASTPE_PE_SPEC_H
#define FASTPE_PE_SPEC_H

#include "pe_sincos.h"

#define PE_LAYOUT_INTERLEAVED 0
#define PE_LAYOUT_SPLIT       1

/* The largest |position| whatever the frequencies: integer positions and the
 * block centres they are encoded around must be exact in a double, with room
 * to spare (2^52; the frequencies usually set a lower limit, PE_MAX_TURNS). */
#define PE_MAX_POSITION PE_TWO52

typedef struct {
    int64_t d;              /* output width */
    int64_t nf;             /* number of frequencies */
    double w0, base, denom; /* w_i = w0 * base^(-i/denom) */
    const double *wlist;    /* or, when not NULL: w_i = wlist[i] (radians per position) */
    int layout;
    int64_t npairs;               /* interleaved */
    int lone_sin;                 /* interleaved: sin_{npairs} at col d-1 */
    int64_t s_off, ns, c_off, nc; /* split */
    int64_t zero_col;             /* -1: none */
} pe_spec;

/* The Vaswani spec: w_i = base^(-2i/d); odd d -> a lone sine of the next
 * frequency (interleaved) or one more column in the sine block (split). */
PE_INLINE pe_spec pe_spec_vaswani(int64_t d, double base, int layout) {
    pe_spec sp;
    sp.d = d;
    sp.nf = (d + 1) / 2;
    sp.w0 = 1.0;
    sp.base = base;
    sp.denom = 0.5 * (double)d;
    sp.layout = layout;
    sp.npairs = d / 2;
    sp.lone_sin = (int)(d & 1);
    sp.s_off = 0;
    sp.ns = sp.nf;
    sp.c_off = sp.nf;
    sp.nc = d / 2;
    sp.zero_col = -1;
    sp.wlist = NULL;
    return sp;
}

/* Largest frequency of a spec, in turns (|K| * this must stay < PE_MAX_TURNS). */
PE_INLINE double pe_spec_max_turns(const pe_spec *sp) {
    if (sp->wlist != NULL) {
        double m = 0.0;
        for (int64_t i = 0; i < sp->nf; i++)
            m = fabs(sp->wlist[i]) > m ? fabs(sp->wlist[i]) : m;
        return m * PE_INV2PI_HI * (1.0 + 1e-12);
    }
    /* w_i = w0 exp(-i lb); fastpe's own log and exp (libm's differ between
     * machines, and so would the positions accepted at the limit) */
    double lb = pe_dd_log(sp->base).hi / sp->denom;
    double e = lb < 0.0 ? -lb * (double)(sp->nf - 1) : 0.0;
    double g = e > 709.0 ? INFINITY : pe_dd_exp(pe_dd_from(e)).hi;
    return fabs(sp->w0) * g * PE_INV2PI_HI * (1.0 + 1e-12);
}

/* The frequencies with a column in a row (a sine, a cosine or both). */
PE_INLINE int64_t pe_row_freqs(const pe_spec *sp) {
    return sp->layout == PE_LAYOUT_INTERLEAVED ? sp->npairs + (sp->lone_sin ? 1 : 0)
                                               : (sp->ns > sp->nc ? sp->ns : sp->nc);
}

/* The columns of frequency i's sine (at[0]) and cosine (at[1]) in a row, -1
 * where the row has none. */
PE_INLINE void pe_freq_columns(const pe_spec *sp, int64_t i, int64_t at[2]) {
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        at[0] = i < sp->npairs ? 2 * i : sp->d - 1;
        at[1] = i < sp->npairs ? 2 * i + 1 : -1;
    } else {
        at[0] = i < sp->ns ? sp->s_off + i : -1;
        at[1] = i < sp->nc ? sp->c_off + i : -1;
    }
}

/* The number of frequencies whose sine and cosine both have a column in a
 * split row (the vector writers' share; pe_row_rest writes the others). */
PE_INLINE int64_t pe_split_pairs(const pe_spec *sp) { return sp->ns < sp->nc ? sp->ns : sp->nc; }

#endif /* FASTPE_PE_SPEC_H */
