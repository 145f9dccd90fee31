/*
 * RoPE's second step: every row of q or k rotated in place by its token's row of
 * the angle table (sin | cos of nf frequencies, filled by the fill driver like
 * any encoding), the threads splitting the rows.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#define ROT_T        float
#define ROT_SFX      f32
#define ROT_LOAD(v)  ((double)(v))
#define ROT_STORE(v) ((float)(v))
#include "rope_rows.inc.c"

#define ROT_T        double
#define ROT_SFX      f64
#define ROT_LOAD(v)  (v)
#define ROT_STORE(v) (v)
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      f16
#define ROT_LOAD(v)  ((double)pe_f16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_f16(v)
#include "rope_rows.inc.c"

#define ROT_T        uint16_t
#define ROT_SFX      bf16
#define ROT_LOAD(v)  ((double)pe_bf16_to_f32(v))
#define ROT_STORE(v) pe_f64_to_bf16(v)
#include "rope_rows.inc.c"

/* Rows r0 .. r1-1 (C order of the leading axes), walked with an odometer: no
 * division per row. */
static void rotate_range(const pe_rope_rows *R, int64_t r0, int64_t r1) {
    int64_t idx[PE_ROPE_MAX_AXES];
    int64_t rem = r0, off = 0;
    for (int j = R->m - 1; j >= 0; j--) {
        idx[j] = rem % R->shape[j];
        rem /= R->shape[j];
        off += idx[j] * R->strides[j];
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = (R->per_batch ? idx[0] * R->S : 0) + idx[R->sa];
        const double *angles = R->table + t * 2 * R->nf;
        char *row = R->base + off;
        switch (R->kind) {
        case PE_KIND_F32:
            pe_rotate_row_f32((float *)row, angles, angles + R->nf, R->nf, R->half, R->attention);
            break;
        case PE_KIND_F64:
            pe_rotate_row_f64((double *)row, angles, angles + R->nf, R->nf, R->half, R->attention);
            break;
        case PE_KIND_F16:
            pe_rotate_row_f16((uint16_t *)row, angles, angles + R->nf, R->nf, R->half,
                              R->attention);
            break;
        default:
            pe_rotate_row_bf16((uint16_t *)row, angles, angles + R->nf, R->nf, R->half,
                               R->attention);
            break;
        }
        for (int j = R->m - 1; j >= 0; j--) {
            idx[j] += 1;
            off += R->strides[j];
            if (idx[j] < R->shape[j])
                break;
            off -= R->shape[j] * R->strides[j];
            idx[j] = 0;
        }
    }
}

void pe_rotate_rows(const pe_rope_rows *R, int64_t r0, int64_t r1, int nt) {
    int64_t n = r1 - r0;
    int t;
    if (nt <= 1) { /* on the calling thread: no parallel region for small calls */
        rotate_range(R, r0, r1);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static, 1)
    for (t = 0; t < nt; t++)
        rotate_range(R, r0 + t * n / nt, r0 + (t + 1) * n / nt);
}

int pe_rope_rotate(const pe_rope_rows *R, int64_t nrows, int nt, pe_poll_fn poll, void *poll_ctx) {
    /* in chunks of about pe_chunk_entries entries, polling between them, as a
       long fill does */
    int64_t W = 2 * R->nf;
    int64_t chunk = pe_chunk_entries();
    int64_t step = poll == NULL ? nrows : (W < chunk ? chunk / W : 1);
    int64_t r0 = 0;
    while (r0 < nrows) {
        int64_t r1 = step < nrows - r0 ? r0 + step : nrows;
        pe_rotate_rows(R, r0, r1, nt);
        r0 = r1;
        if (r0 < nrows && poll != NULL && poll(poll_ctx) != 0)
            return PE_EINTR;
    }
    return FASTPE_OK;
}
