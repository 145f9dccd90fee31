/*
 * The AVX-512 row writers (pe_v512.c): declarations, and the switch that says
 * whether they are in use.  Where the CPU has AVX-512F (checked once, by
 * pe_v512_init) the rows are written by these instead of the
 * compiler-vectorised loops of pe_rows.inc.h, with the same bits.  Each writer
 * returns 0 when it cannot take a row (a row shorter than one vector block, or,
 * with streaming stores, destinations that one head cannot align together); the
 * caller then uses the portable path.
 */
#ifndef FASTPE_PE_V512_H
#define FASTPE_PE_V512_H

#include "pe_platform.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(FASTPE_NO_AVX512_WRITERS)
#define PE_HAVE_V512 1
#else
#define PE_HAVE_V512 0
#endif

/* 1 while the AVX-512 writers are in use: set by pe_v512_init where the CPU
 * has AVX-512F; pe_v512_set switches them (returns the old setting; tests and
 * measurements, not while a fill runs).  Always 0 where PE_HAVE_V512 is 0. */
PE_HIDDEN extern int pe_v512;
PE_HIDDEN void pe_v512_init(void);
PE_HIDDEN int pe_v512_set(int on);

#if PE_HAVE_V512
/* The mirrored pair rp (+t), rm (-t), streaming stores if stream; and one row
 * of sign sg (plain stores: a streamed single row goes through a buffer).
 * Interleaved rows (np frequency pairs), then split rows (n frequencies,
 * sines to d0/d2 and cosines to d1/d3, or to rs and rc). */
PE_HIDDEN int pe_v512_pairs2_f32(float *rp, float *rm, int64_t np, const double *As,
                                 const double *Ac, const double *Tm, const double *Ts,
                                 int stream);
PE_HIDDEN int pe_v512_pairs2_f64(double *rp, double *rm, int64_t np, const double *As,
                                 const double *Ac, const double *Tm, const double *Ts,
                                 int stream);
PE_HIDDEN int pe_v512_pairs1_f32(float *row, int64_t np, const double *As, const double *Ac,
                                 const double *Tm, const double *Ts, double sg);
PE_HIDDEN int pe_v512_pairs1_f64(double *row, int64_t np, const double *As, const double *Ac,
                                 const double *Tm, const double *Ts, double sg);
PE_HIDDEN int pe_v512_split2_f32(float *d0, float *d1, float *d2, float *d3, int64_t n,
                                 const double *As, const double *Ac, const double *Tm,
                                 const double *Ts, int stream);
PE_HIDDEN int pe_v512_split2_f64(double *d0, double *d1, double *d2, double *d3, int64_t n,
                                 const double *As, const double *Ac, const double *Tm,
                                 const double *Ts, int stream);
PE_HIDDEN int pe_v512_split1_f32(float *rs, float *rc, int64_t n, const double *As,
                                 const double *Ac, const double *Tm, const double *Ts,
                                 double sg);
PE_HIDDEN int pe_v512_split1_f64(double *rs, double *rc, int64_t n, const double *As,
                                 const double *Ac, const double *Tm, const double *Ts,
                                 double sg);
#endif

#endif /* FASTPE_PE_V512_H */
