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
/* 1 while the 16-bit writers are in use: pe_v512 and AVX-512BW (set with it). */
PE_HIDDEN extern int pe_v512_h16;
PE_HIDDEN void pe_v512_init(void);
PE_HIDDEN int pe_v512_set(int on);
/* Whether bfloat16 rows use AVX512_BF16's conversion where the CPU has it (on by
 * default; the same bits either way: for tests).  Returns the old setting. */
PE_HIDDEN int pe_v512_bf16hw_set(int on);

#if PE_HAVE_V512
/* The anchor (As, Ac) and the table row (Tm, Ts) a writer rotates. */
#define PE_V512_ARGS const double *As, const double *Ac, const double *Tm, const double *Ts

/* The mirrored pair, streaming stores if stream: the row at +t to p0/p1, the row
 * at -t to m0/m1; and one row of sign sg, to r0/r1 (plain stores: a streamed
 * single row goes through a buffer).  Interleaved rows: n frequency pairs, one
 * destination per row (pass it twice: p1 = p0, m1 = m0, r1 = r0); split rows:
 * n frequencies, sines to p0, m0, r0 and cosines to p1, m1, r1.  One prototype
 * per layout and type, all made by the one skeleton in pe_v512_rows.inc.c. */
PE_HIDDEN int pe_v512_pair_interleaved_f32(float *p0, float *p1, float *m0, float *m1, int64_t n,
                                           PE_V512_ARGS, int stream);
PE_HIDDEN int pe_v512_row_interleaved_f32(float *r0, float *r1, int64_t n, PE_V512_ARGS, double sg);
PE_HIDDEN int pe_v512_pair_split_f32(float *p0, float *p1, float *m0, float *m1, int64_t n,
                                     PE_V512_ARGS, int stream);
PE_HIDDEN int pe_v512_row_split_f32(float *r0, float *r1, int64_t n, PE_V512_ARGS, double sg);
PE_HIDDEN int pe_v512_pair_interleaved_f64(double *p0, double *p1, double *m0, double *m1,
                                           int64_t n, PE_V512_ARGS, int stream);
PE_HIDDEN int pe_v512_row_interleaved_f64(double *r0, double *r1, int64_t n, PE_V512_ARGS,
                                          double sg);
PE_HIDDEN int pe_v512_pair_split_f64(double *p0, double *p1, double *m0, double *m1, int64_t n,
                                     PE_V512_ARGS, int stream);
PE_HIDDEN int pe_v512_row_split_f64(double *r0, double *r1, int64_t n, PE_V512_ARGS, double sg);
/* float16 and bfloat16 rows, as uint16_t bits (pe_half.h's rounding) */
#define PE_V512_H16_PROTOS(sfx)                                                                    \
    PE_HIDDEN int pe_v512_pair_interleaved_##sfx(uint16_t *p0, uint16_t *p1, uint16_t *m0,         \
                                                 uint16_t *m1, int64_t n, PE_V512_ARGS,            \
                                                 int stream);                                      \
    PE_HIDDEN int pe_v512_row_interleaved_##sfx(uint16_t *r0, uint16_t *r1, int64_t n,             \
                                                PE_V512_ARGS, double sg);                          \
    PE_HIDDEN int pe_v512_pair_split_##sfx(uint16_t *p0, uint16_t *p1, uint16_t *m0, uint16_t *m1, \
                                           int64_t n, PE_V512_ARGS, int stream);                   \
    PE_HIDDEN int pe_v512_row_split_##sfx(uint16_t *r0, uint16_t *r1, int64_t n, PE_V512_ARGS,     \
                                          double sg);
PE_V512_H16_PROTOS(f16)
PE_V512_H16_PROTOS(bf16)
#endif

#endif /* FASTPE_PE_V512_H */
