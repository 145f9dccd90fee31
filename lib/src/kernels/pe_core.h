/*
 * fastpe's C core, as kernel.pyx sees it (start reading here).
 *
 * Only a few accurate evaluations (pe_sincos.h) are done per call: rows are
 * grouped into blocks of B rows (positions mB .. mB+B-1) around centres
 * c = mB + B/2; for every block the "anchor" e^{i*c*w} is evaluated accurately
 * (and position 0, to be exact, on its own), and every row c+j of the block is
 * the anchor rotated by the table entry e^{i*j*w} (also accurate; j < 0 uses
 * the entry for |j| with the sine negated), one complex multiply per pair
 * (pe_rows.h).  Rows c+j and c-j share that multiply's four products.  The
 * error does not grow with k (unlike a running recurrence).  Table entries are
 * kept as (cos-1, sin) so small rotations lose nothing.
 *
 * The files, by job:
 *   pe_platform.h   compiler portability, the row-alignment helper
 *   pe_dd.h         double-double arithmetic and its constants
 *   pe_sincos.h     frequencies, accurate sin/cos rows, composed rotations
 *   pe_spec.h       a convention's frequencies and column map (pe_spec)
 *   pe_rows.h       the portable row writers, from the per-type template
 *                   pe_rows.inc.h
 *   pe_stream.h     streaming stores and write prefetches
 *   pe_v512.h/.c    the AVX-512 row writers and their CPU dispatch (the one
 *                   compilation unit besides kernel.c, and the only mutable
 *                   state of the C core), from one skeleton, pe_v512_rows.inc.c
 *
 * Everything here must be compiled WITHOUT -ffast-math and with
 * -ffp-contract=off (see pe_dd.h).  Results depend only on (position, column),
 * never on the thread partition, so any thread count gives identical bits.
 */
#ifndef FASTPE_PE_CORE_H
#define FASTPE_PE_CORE_H

#include "pe_rows.h"
#include "pe_rows_dd.h"
#include "pe_stream.h"

#endif /* FASTPE_PE_CORE_H */
