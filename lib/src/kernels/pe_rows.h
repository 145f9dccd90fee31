/*
 * The row writers: each output row is its block's anchor (sin, cos at the
 * block centre) rotated by a table row, one complex multiply per frequency.
 *
 * Rotations are kept as (cos t - 1, sin t): for small t the first is tiny and
 * carries full relative precision, where cos t itself would round it away.
 * Rotating an anchor angle A by a table angle t:
 *   sin(A + t) = sA + (sA*(cos t - 1) + cA*sin t)
 *   cos(A + t) = cA + (cA*(cos t - 1) - sA*sin t)
 * The bracket is small when t is small, so its rounding error is too.
 *
 * Per frequency, four loads give two outputs (a per-column formulation needs
 * four loads per output and is load-port bound); the mirrored writers (the
 * "2" functions) give four outputs -- rows c+t and c-t -- from the same four
 * loads and four products.
 *
 * Each loop first writes the few entries before the first 64-byte boundary of
 * its (first) destination, one at a time, so the vector loop's stores never
 * straddle two cache lines (NumPy's large arrays start 16 bytes past a page
 * boundary; docs/performance.md has the measurements).  The head and the
 * vector loop perform the same operations, so the bits do not depend on the
 * alignment.
 *
 * The writers are the same for float32, float64, float16 and bfloat16 rows:
 * pe_rows.inc.h is their one definition, included once per type below.  The
 * 16-bit rows are computed in double like the others and rounded once
 * (pe_half.h).
 */
#ifndef FASTPE_PE_ROWS_H
#define FASTPE_PE_ROWS_H

#include "pe_half.h"
#include "pe_spec.h"
#include "pe_v512.h"

/* Rotated sine / cosine of frequency i: the formulas above, for a table angle
 * of sign sg (+1 or -1: sin(-t) = -sin t, cos(-t) - 1 = cos t - 1).  Rows are
 * grouped around a central anchor, so one table row serves the rows at +t and
 * -t; multiplying by sg = +-1 is exact, so a row written alone (pe_row) and the
 * same row written as half of a mirrored pair (pe_row2) have identical bits. */
#define PE_SIN(i) (As[i] + (As[i] * Tm[i] + Ac[i] * (Ts[i] * sg)))
#define PE_COS(i) (Ac[i] + (Ac[i] * Tm[i] - As[i] * (Ts[i] * sg)))

/* pe_rows.inc.h names its functions NAME_SUFFIX (pe_row_f32, pe_row_f64, ...). */
#define PE_CAT_(a, b) a##_##b
#define PE_CAT(a, b)  PE_CAT_(a, b)
#define PE_FN(name)   PE_CAT(name, PE_SUFFIX)

#define PE_T       float
#define PE_SUFFIX  f32
#define PE_PUT(v)  ((float)(v))
#define PE_GET(v)  ((double)(v))
#define PE_V512_ON pe_v512
#include "pe_rows.inc.h"

#define PE_T       double
#define PE_SUFFIX  f64
#define PE_PUT(v)  ((double)(v))
#define PE_GET(v)  (v)
#define PE_V512_ON pe_v512
#include "pe_rows.inc.h"

#define PE_T       uint16_t
#define PE_SUFFIX  f16
#define PE_PUT(v)  pe_f64_to_f16(v)
#define PE_GET(v)  ((double)pe_f16_to_f32(v))
#define PE_V512_ON pe_v512_h16
#include "pe_rows.inc.h"

#define PE_T       uint16_t
#define PE_SUFFIX  bf16
#define PE_PUT(v)  pe_f64_to_bf16(v)
#define PE_GET(v)  ((double)pe_bf16_to_f32(v))
#define PE_V512_ON pe_v512_h16
#include "pe_rows.inc.h"

#endif /* FASTPE_PE_ROWS_H */
