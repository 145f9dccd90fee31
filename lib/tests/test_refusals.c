/*
 * Every refusal of the public API, one row each: the call, the code it must
 * return and the error detail it must leave (argument, index, value, limit),
 * read with fastpe_last_error right after the call.  Then the overlap rule of
 * the *_positions_* fills, the same for the table and the spec functions:
 * decided on elements, so positions stored in the gaps between rows (row_stride
 * > d_model) are legal and give the rows of a separate copy.
 *     fastpe_test_refusals
 */
#include <fastpe/fastpe.h>

#include "check.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* a limit (or value) that depends on the frequencies (the exact reduction's
   bound): any finite number > 0 */
#define POSITIVE (-1.2345e-300)
#define W40      ((double)((int64_t)1 << 40))
#define SPAN     ((double)(INT64_MAX / 16))

static int same(double got, double want) {
    if (want == POSITIVE)
        return isfinite(got) && got > 0.0;
    return (isnan(got) && isnan(want)) || got == want;
}

static int rows_run;

/* One row of the table: `got` returned by the call `what` at `line`. */
static void row(const char *what, int line, int got, int code, const char *argument, int64_t index,
                double value, double limit) {
    fastpe_error e;
    int ret = fastpe_last_error(&e);
    rows_run++;
    CHECK(got == code, "line %d, %s: returned %d, want %d", line, what, got, code);
    CHECK(ret == code && e.code == code, "line %d, %s: detail code %d, want %d", line, what, e.code,
          code);
    CHECK(e.argument != NULL && strcmp(e.argument, argument) == 0,
          "line %d, %s: argument %s, want %s", line, what, e.argument ? e.argument : "(null)",
          argument);
    CHECK(e.index == index, "line %d, %s: index %lld, want %lld", line, what, (long long)e.index,
          (long long)index);
    CHECK(same(e.value, value), "line %d, %s: value %.17g, want %.17g", line, what, e.value, value);
    CHECK(same(e.limit, limit), "line %d, %s: limit %.17g, want %.17g", line, what, e.limit, limit);
}

#define ROW(call, code, argument, index, value, limit)                                             \
    row(#call, __LINE__, (call), code, argument, index, value, limit)

static float xf[64 * 16];
static double xd[64 * 16];
static uint16_t xh[64 * 16];

/* fastpe_fill_*, fastpe_add_*, fastpe_fill_positions_*, fastpe_add_positions_*,
 * fastpe_fill_poll: the Vaswani table's checks (one for all of them). */
static void table_rows(void) {
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    const double big = (double)((int64_t)1 << 60);
    double pos[4] = {0.0, 1.0, 2.0, 3.0};
    ROW(fastpe_fill_f32(xf, -3, 16, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "seq_len", -1, -3.0, 0.0);
    ROW(fastpe_fill_f64(xd, 4, 0, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "d_model", -1, 0.0, 1.0);
    ROW(fastpe_fill_f16(xh, 4, -5, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "d_model", -1, -5.0, 1.0);
    ROW(fastpe_fill_bf16(xh, 4, ((int64_t)1 << 40) + 1, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "d_model",
        -1, W40 + 1.0, W40);
    ROW(fastpe_fill_f32(NULL, 4, 16, 16, 1e4, 0, IL, 1), FASTPE_ENULL, "out", -1, NAN, NAN);
    ROW(fastpe_fill_f64(xd, 4, 16, 15, 1e4, 0, IL, 1), FASTPE_ESTRIDE, "row_stride", -1, 15.0,
        16.0);
    ROW(fastpe_fill_f32(xf, 3, 8, INT64_MAX / 2, 1e4, 0, IL, 1), FASTPE_ESTRIDE, "row_stride", -1,
        (double)(INT64_MAX / 2), (double)((INT64_MAX / 16 - 8) / 2));
    ROW(fastpe_fill_f64(xd, 4, 16, 16, 0.0, 0, IL, 1), FASTPE_EBASE, "base", -1, 0.0, 0.0);
    ROW(fastpe_fill_f64(xd, 4, 16, 16, NAN, 0, IL, 1), FASTPE_EBASE, "base", -1, NAN, 0.0);
    ROW(fastpe_fill_f32(xf, 4, 16, 16, INFINITY, 0, IL, 1), FASTPE_EBASE, "base", -1, INFINITY,
        0.0);
    ROW(fastpe_fill_f64(xd, 4, 16, 16, 1e4, 0, 2, 1), FASTPE_ELAYOUT, "layout", -1, 2.0, NAN);
    ROW(fastpe_fill_f64(xd, 4, 16, 16, 1e4, (int64_t)1 << 60, IL, 1), FASTPE_ERANGE, "offset", -1,
        big + 3.0, POSITIVE);
    /* (one offset for all is an argument even with no rows) */
    ROW(fastpe_fill_f32(xf, 0, 16, 16, 1e4, -((int64_t)1 << 60), IL, 1), FASTPE_ERANGE, "offset",
        -1, big, POSITIVE);
    ROW(fastpe_fill_poll(xd, 4, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_EINVAL, "dtype", -1,
        4.0, 3.0);
    ROW(fastpe_fill_poll(xd, -1, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_EINVAL, "dtype", -1,
        -1.0, 3.0);
    ROW(fastpe_fill_poll(NULL, 1, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_ENULL, "out", -1,
        NAN, NAN);
    /* fastpe_fill_poll_ex: its rounding after the dtype, then the table's checks */
    ROW(fastpe_fill_poll_ex(xd, 1, 4, 16, 16, 1e4, 0, IL, 2, 1, NULL, NULL), FASTPE_EINVAL,
        "rounding", -1, 2.0, 1.0);
    ROW(fastpe_fill_poll_ex(xd, 1, 4, 16, 16, 1e4, 0, IL, -1, 1, NULL, NULL), FASTPE_EINVAL,
        "rounding", -1, -1.0, 1.0);
    ROW(fastpe_fill_poll_ex(xd, 7, 4, 16, 16, 1e4, 0, IL, 2, 1, NULL, NULL), FASTPE_EINVAL, "dtype",
        -1, 7.0, 3.0);
    ROW(fastpe_fill_poll_ex(NULL, 1, 4, 16, 16, 1e4, 0, IL, 1, 1, NULL, NULL), FASTPE_ENULL, "out",
        -1, NAN, NAN);
    ROW(fastpe_fill_poll_ex(xd, 1, 4, 16, 16, 1e4, (int64_t)1 << 60, IL, 1, 1, NULL, NULL),
        FASTPE_ERANGE, "offset", -1, big + 3.0, POSITIVE);
    ROW(fastpe_add_f32(xf, -1, 4, 16, 16, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE, "nseq", -1, -1.0, 0.0);
    ROW(fastpe_add_f64(xd, 2, -4, 16, 16, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE, "seq_len", -1, -4.0,
        0.0);
    ROW(fastpe_add_f16(xh, INT64_MAX, 49, 8, 8, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE, "nseq", -1,
        (double)INT64_MAX, (double)(INT64_MAX / 49));
    ROW(fastpe_add_bf16(xh, 2, 4, 16, 16, 1e4, 0, INFINITY, IL, 1), FASTPE_ESCALE, "scale", -1,
        INFINITY, NAN);
    ROW(fastpe_add_f64(xd, 2, 4, 16, 16, 1e4, 0, NAN, IL, 1), FASTPE_ESCALE, "scale", -1, NAN, NAN);
    ROW(fastpe_add_f32(xf, 2, 2, 8, INT64_MAX / 3, 1e4, 0, 1.0, IL, 1), FASTPE_ESTRIDE,
        "row_stride", -1, (double)(INT64_MAX / 3), (double)((INT64_MAX / 16 - 8) / 3));
    ROW(fastpe_fill_positions_f32(xf, -2, 16, 16, pos, 1e4, IL, 1), FASTPE_ESIZE, "n", -1, -2.0,
        0.0);
    ROW(fastpe_fill_positions_f64(xd, 4, 16, 16, NULL, 1e4, IL, 1), FASTPE_ENULL, "positions", -1,
        NAN, NAN);
    ROW(fastpe_add_positions_f32(NULL, 4, 16, 16, pos, 1e4, 1.0, IL, 1), FASTPE_ENULL, "out", -1,
        NAN, NAN);
    ROW(fastpe_add_positions_f64(xd, 4, 16, 16, pos, 1e4, -INFINITY, IL, 1), FASTPE_ESCALE, "scale",
        -1, -INFINITY, NAN);
    pos[2] = NAN;
    ROW(fastpe_fill_positions_f64(xd, 4, 16, 16, pos, 1e4, IL, 1), FASTPE_ERANGE, "positions", 2,
        NAN, POSITIVE);
    pos[2] = -1e300;
    ROW(fastpe_add_positions_f32(xf, 4, 16, 16, pos, 1e4, 1.0, IL, 1), FASTPE_ERANGE, "positions",
        2, -1e300, POSITIVE);
    pos[2] = 2.0;
    /* positions inside the rows written: the first such element named */
    ROW(fastpe_fill_positions_f64(xd, 4, 16, 16, xd + 40, 1e4, IL, 1), FASTPE_EOVERLAP, "positions",
        0, NAN, NAN);
    ROW(fastpe_fill_positions_f64(xd + 64, 4, 16, 16, xd + 62, 1e4, IL, 1), FASTPE_EOVERLAP,
        "positions", 2, NAN, NAN);
    /* (float rows over doubles: positions 8 bytes into row 0) */
    ROW(fastpe_add_positions_f32((float *)(void *)xd, 4, 16, 16, xd + 1, 1e4, 1.0, IL, 1),
        FASTPE_EOVERLAP, "positions", 0, NAN, NAN);
}

/* fastpe_knobs_preset and the spec handle's fills. */
static void spec_rows(void) {
    fastpe_knobs k;
    double pos[4] = {0.0, 1.0, 2.0, 3.0};
    ROW(fastpe_knobs_preset(NULL, &k), FASTPE_ENULL, "name", -1, NAN, NAN);
    ROW(fastpe_knobs_preset("vaswani", NULL), FASTPE_ENULL, "knobs", -1, NAN, NAN);
    ROW(fastpe_knobs_preset("bogus", &k), FASTPE_EINVAL, "name", -1, NAN, NAN);
    fastpe_spec *s = fastpe_spec_from_name("fairseq", 16);
    fastpe_spec *gone = fastpe_spec_from_name("vaswani", 16);
    CHECK(s != NULL && gone != NULL, "spec handles");
    if (s == NULL || gone == NULL)
        return;
    fastpe_spec_free(gone);
    ROW(fastpe_spec_fill_f32(NULL, xf, 4, 16, 0, 1), FASTPE_ENULL, "spec", -1, NAN, NAN);
    ROW(fastpe_spec_fill_f64(gone, xd, 4, 16, 0, 1), FASTPE_EHANDLE, "spec", -1, NAN, NAN);
    ROW(fastpe_spec_add_f16(gone, xh, 1, 4, 16, 0, 1.0, 1), FASTPE_EHANDLE, "spec", -1, NAN, NAN);
    ROW(fastpe_spec_fill_positions_f32(NULL, xf, 4, 16, pos, 1), FASTPE_ENULL, "spec", -1, NAN,
        NAN);
    ROW(fastpe_spec_fill_f32(s, xf, -1, 16, 0, 1), FASTPE_ESIZE, "seq_len", -1, -1.0, 0.0);
    ROW(fastpe_spec_fill_f64(s, NULL, 4, 16, 0, 1), FASTPE_ENULL, "out", -1, NAN, NAN);
    ROW(fastpe_spec_fill_f16(s, xh, 4, 15, 0, 1), FASTPE_ESTRIDE, "row_stride", -1, 15.0, 16.0);
    ROW(fastpe_spec_fill_bf16(s, xh, 3, INT64_MAX / 2, 0, 1), FASTPE_ESTRIDE, "row_stride", -1,
        (double)(INT64_MAX / 2), (double)((INT64_MAX / 16 - 16) / 2));
    ROW(fastpe_spec_fill_f64(s, xd, 4, 16, INT64_MAX - 1, 1), FASTPE_ERANGE, "offset", -1,
        (double)INT64_MAX, POSITIVE);
    ROW(fastpe_spec_fill_f32(s, xf, 0, 16, INT64_MIN, 1), FASTPE_ERANGE, "offset", -1,
        -(double)INT64_MIN, POSITIVE);
    ROW(fastpe_spec_add_f32(s, xf, -2, 4, 16, 0, 1.0, 1), FASTPE_ESIZE, "nseq", -1, -2.0, 0.0);
    ROW(fastpe_spec_add_f64(s, xd, 2, -4, 16, 0, 1.0, 1), FASTPE_ESIZE, "seq_len", -1, -4.0, 0.0);
    ROW(fastpe_spec_add_f16(s, xh, INT64_MAX, 49, 16, 0, 1.0, 1), FASTPE_ESIZE, "nseq", -1,
        (double)INT64_MAX, (double)(INT64_MAX / 49));
    ROW(fastpe_spec_add_bf16(s, xh, 2, 4, 16, 0, NAN, 1), FASTPE_ESCALE, "scale", -1, NAN, NAN);
    ROW(fastpe_spec_add_f32(s, NULL, 2, 4, 16, 0, 1.0, 1), FASTPE_ENULL, "out", -1, NAN, NAN);
    ROW(fastpe_spec_fill_positions_f32(s, xf, -3, 16, pos, 1), FASTPE_ESIZE, "n", -1, -3.0, 0.0);
    ROW(fastpe_spec_fill_positions_f64(s, xd, 4, 16, NULL, 1), FASTPE_ENULL, "positions", -1, NAN,
        NAN);
    ROW(fastpe_spec_fill_positions_f64(s, NULL, 4, 16, pos, 1), FASTPE_ENULL, "out", -1, NAN, NAN);
    ROW(fastpe_spec_fill_positions_f32(s, xf, 4, 8, pos, 1), FASTPE_ESTRIDE, "row_stride", -1, 8.0,
        16.0);
    pos[3] = INFINITY;
    ROW(fastpe_spec_fill_positions_f64(s, xd, 4, 16, pos, 1), FASTPE_ERANGE, "positions", 3,
        INFINITY, POSITIVE);
    pos[3] = 3.0;
    ROW(fastpe_spec_fill_positions_f64(s, xd, 4, 16, xd + 33, 1), FASTPE_EOVERLAP, "positions", 0,
        NAN, NAN);
    /* correct rounding: tables and adds of every type */
    ROW(fastpe_spec_set_rounding(s, 7), FASTPE_EINVAL, "rounding", -1, 7.0, NAN);
    ROW(fastpe_spec_set_rounding(NULL, 1), FASTPE_ENULL, "spec", -1, NAN, NAN);
    ROW(fastpe_spec_set_rounding(gone, 1), FASTPE_EHANDLE, "spec", -1, NAN, NAN);
    CHECK(fastpe_spec_set_rounding(s, FASTPE_ROUND_CORRECT) == FASTPE_OK, "correct rounding");
    CHECK(fastpe_spec_add_f64(s, xd, 1, 4, 16, 0, 1.0, 1) == FASTPE_OK, "correct add, float64");
    CHECK(fastpe_spec_add_f32(s, xf, 1, 4, 16, 0, 1.0, 1) == FASTPE_OK, "correct add, float32");
    ROW(fastpe_spec_add_f64(s, xd, 1, 4, 15, 0, 1.0, 1), FASTPE_ESTRIDE, "row_stride", -1, 15.0,
        16.0);
    ROW(fastpe_spec_fill_f64(s, xd, 4, 15, 0, 1), FASTPE_ESTRIDE, "row_stride", -1, 15.0, 16.0);
    fastpe_spec_free(s);
}

/* The RoPE handles: their caches, rotations, sections and rounding. */
static void rope_rows(void) {
    const int HALF = FASTPE_LAYOUT_SPLIT;
    double w[4] = {1.0, 0.1, 0.01, 0.001};
    int64_t pos[3] = {0, 1, 2}, pos2[6] = {0, 0, 1, 1, 2, 2}, sections[2] = {2, 2};
    int32_t axis[4] = {0, 0, 1, 1};
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 4, 1.0);
    fastpe_rope *ha = fastpe_rope_from_axes(w, 4, axis, 2, 1.0);
    fastpe_rope *gone = fastpe_rope_from_frequencies(w, 4, 1.0);
    CHECK(h != NULL && ha != NULL && gone != NULL, "rope handles");
    if (h == NULL || ha == NULL || gone == NULL)
        return;
    fastpe_rope_free(gone);
    ROW(fastpe_rope_cache_f32(NULL, xf, xf + 64, 3, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "rope", -1,
        NAN, NAN);
    ROW(fastpe_rope_cache_f64(gone, xd, xd + 64, 3, 8, NULL, 0, HALF, 1), FASTPE_EHANDLE, "rope",
        -1, NAN, NAN);
    ROW(fastpe_rope_cache_f16(ha, xh, xh + 64, 3, 8, NULL, 0, HALF, 1), FASTPE_EINVAL, "rope", -1,
        2.0, 1.0);
    ROW(fastpe_rope_cache_bf16(h, xh, xh + 64, -1, 8, NULL, 0, HALF, 1), FASTPE_ESIZE, "n", -1,
        -1.0, 0.0);
    ROW(fastpe_rope_cache_f32(h, xf, xf + 64, 3, 8, NULL, 0, 4, 1), FASTPE_ELAYOUT, "layout", -1,
        4.0, NAN);
    ROW(fastpe_rope_cache_f32(h, NULL, xf + 64, 3, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "cos", -1,
        NAN, NAN);
    ROW(fastpe_rope_cache_f32(h, xf, NULL, 3, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "sin", -1, NAN,
        NAN);
    ROW(fastpe_rope_cache_f64(h, xd, xd + 64, 3, 7, NULL, 0, HALF, 1), FASTPE_ESTRIDE, "row_stride",
        -1, 7.0, 8.0);
    ROW(fastpe_rope_cache_f32(h, xf, xf + 4, 3, 8, NULL, 0, HALF, 1), FASTPE_EOVERLAP, "sin", -1,
        NAN, NAN);
    pos[2] = INT64_MAX / 2;
    ROW(fastpe_rope_cache_f32(h, xf, xf + 64, 3, 8, pos, 0, HALF, 1), FASTPE_ERANGE, "positions", 2,
        (double)(INT64_MAX / 2), POSITIVE);
    pos[2] = 2;
    ROW(fastpe_rope_apply_f32(NULL, xf, 1, 3, 1, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "rope",
        -1, NAN, NAN);
    ROW(fastpe_rope_apply_f64(h, xd, -1, 3, 1, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ESIZE, "batch",
        -1, -1.0, 0.0);
    ROW(fastpe_rope_apply_f16(h, xh, 1, -3, 1, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ESIZE, "seq", -1,
        -3.0, 0.0);
    ROW(fastpe_rope_apply_bf16(h, xh, 1, 3, -2, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ESIZE, "heads",
        -1, -2.0, 0.0);
    ROW(fastpe_rope_apply_f32(h, NULL, 1, 3, 1, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "x", -1,
        NAN, NAN);
    /* rows that overlap: the stride at fault, with its value (and what it must reach) */
    ROW(fastpe_rope_apply_f32(h, xf, 1, 3, 1, 24, 4, 8, NULL, 0, HALF, 1), FASTPE_ESTRIDE,
        "stride_seq", -1, 4.0, 8.0);
    ROW(fastpe_rope_apply_f32(h, xf, 1, 2, 2, 24, 16, -4, NULL, 0, HALF, 1), FASTPE_ESTRIDE,
        "stride_head", -1, -4.0, 8.0);
    ROW(fastpe_rope_apply_f32(h, xf, 2, 3, 1, 10, 8, 8, NULL, 0, HALF, 1), FASTPE_ESTRIDE,
        "stride_batch", -1, 10.0, 24.0);
    ROW(fastpe_rope_apply_f64(h, xd, 2, 3, 1, 0, 8, 8, NULL, 0, HALF, 1), FASTPE_ESTRIDE,
        "stride_batch", -1, 0.0, 8.0);
    ROW(fastpe_rope_apply_f32(h, xf, 1, 3, 1, 24, INT64_MAX / 4, 8, NULL, 0, HALF, 1),
        FASTPE_ESTRIDE, "stride_seq", -1, (double)(INT64_MAX / 4), (double)(INT64_MAX / 16 / 2));
    ROW(fastpe_rope_apply_f32(h, xf, 1, 3, 1, 24, 8, 8, NULL, INT64_MAX / 2, HALF, 1),
        FASTPE_ERANGE, "offset", -1, (double)(INT64_MAX / 2) + 2.0, POSITIVE);
    ROW(fastpe_rope_cache_axes_f32(h, xf, xf + 64, 3, 8, NULL, HALF, 1), FASTPE_ENULL, "positions",
        -1, NAN, NAN);
    ROW(fastpe_rope_cache_axes_f64(gone, xd, xd + 64, 3, 8, pos2, HALF, 1), FASTPE_EHANDLE, "rope",
        -1, NAN, NAN);
    ROW(fastpe_rope_apply_axes_f32(ha, xf, 1, 3, 1, 24, 8, 8, pos2, 9, 1), FASTPE_ELAYOUT, "layout",
        -1, 9.0, NAN);
    ROW(fastpe_rope_section_axes(NULL, 2, FASTPE_SECTIONS_CONTIGUOUS, axis, 4), FASTPE_ENULL,
        "sections", -1, NAN, NAN);
    ROW(fastpe_rope_section_axes(sections, 2, 5, axis, 4), FASTPE_EINVAL, "section_layout", -1, 5.0,
        NAN);
    sections[1] = 3;
    ROW(fastpe_rope_section_axes(sections, 2, FASTPE_SECTIONS_CONTIGUOUS, axis, 4), FASTPE_ESIZE,
        "sections", -1, 5.0, 4.0);
    ROW(fastpe_rope_set_rounding(h, -1), FASTPE_EINVAL, "rounding", -1, -1.0, NAN);
    ROW(fastpe_rope_set_rounding(NULL, 0), FASTPE_ENULL, "rope", -1, NAN, NAN);
    ROW(fastpe_rope_set_rounding(gone, 0), FASTPE_EHANDLE, "rope", -1, NAN, NAN);
    CHECK(fastpe_rope_set_rounding(h, FASTPE_ROUND_CORRECT) == FASTPE_OK, "correct rounding");
    /* (the rotations honour it: fastpe_rope_apply_axes_* do not yet, and refuse it) */
    CHECK(fastpe_rope_apply_f64(h, xd, 1, 3, 1, 24, 8, 8, NULL, 0, HALF, 1) == FASTPE_OK,
          "correct rotation");
    CHECK(fastpe_rope_set_rounding(ha, FASTPE_ROUND_CORRECT) == FASTPE_OK, "correct axes");
    ROW(fastpe_rope_apply_axes_f64(ha, xd, 1, 3, 1, 24, 8, 8, pos2, HALF, 1), FASTPE_EINVAL, "rope",
        -1, 1.0, NAN);
    fastpe_rope_free(h);
    fastpe_rope_free(ha);
}

/* Positions stored in the gap between out's rows (row_stride > d_model: the
 * entries after row 0) are legal for the table and the spec fills alike, leave
 * the positions as they were and give the rows of a separate copy of them;
 * positions running on into row 1 are refused, naming the first one inside it. */
static int fill_at(int pass, int f64, void *out, int64_t n, int64_t d, int64_t stride,
                   const double *pos, fastpe_spec *s) {
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    if (pass == 0)
        return f64 ? fastpe_fill_positions_f64((double *)out, n, d, stride, pos, 1e4, IL, 1)
                   : fastpe_fill_positions_f32((float *)out, n, d, stride, pos, 1e4, IL, 1);
    return f64 ? fastpe_spec_fill_positions_f64(s, (double *)out, n, stride, pos, 1)
               : fastpe_spec_fill_positions_f32(s, (float *)out, n, stride, pos, 1);
}

static void gap_positions(void) {
    enum { N = 3, D = 4 };
    static const double pos[N] = {3.0, -7.5, 100.25};
    /* entries every `stride` (f64: 8, four doubles free after each row; f32: 12,
       eight floats = four doubles free): doubles so that the gap is aligned */
    static double mem[64], want64[N * D];
    static float want32[N * D];
    fastpe_spec *s = fastpe_spec_from_name("vaswani", D);
    CHECK(s != NULL, "spec");
    if (s == NULL)
        return;
    for (int pass = 0; pass < 2; pass++) {
        for (int f64 = 0; f64 < 2; f64++) {
            const char *what = pass == 0 ? "table" : "spec";
            const int64_t stride = f64 ? 8 : 12, item = f64 ? 8 : 4;
            double *gap = (double *)(void *)((char *)mem + D * item); /* after row 0 */
            void *ref = f64 ? (void *)want64 : (void *)want32;
            int err = fill_at(pass, f64, ref, N, D, D, pos, s);
            CHECK(err == FASTPE_OK, "%s f64=%d: the reference rows (%d)", what, f64, err);
            memset(mem, 0, sizeof(mem));
            memcpy(gap, pos, sizeof(pos));
            err = fill_at(pass, f64, mem, N, D, stride, gap, s);
            CHECK(err == FASTPE_OK, "%s f64=%d: positions in the gap refused (%d)", what, f64, err);
            CHECK(memcmp(gap, pos, sizeof(pos)) == 0, "%s f64=%d: the positions changed", what,
                  f64);
            for (int r = 0; r < N; r++)
                CHECK(memcmp((char *)mem + r * stride * item, (char *)ref + r * D * item,
                             (size_t)(D * item)) == 0,
                      "%s f64=%d: row %d differs from the separate positions' row", what, f64, r);
            /* one double further on: the last position lies in row 1 */
            memcpy(gap + 2, pos, sizeof(pos));
            ROW(fill_at(pass, f64, mem, N, D, stride, gap + 2, s), FASTPE_EOVERLAP, "positions", 2,
                NAN, NAN);
        }
    }
    fastpe_spec_free(s);
}

/* The plain fills remember the last frequencies' position limit (per thread): a
 * call of other frequencies must still get its own.  Vaswani's largest frequency
 * is 1 for any base above 1 and base^(-7/8) > 1.8 for base 0.5 (d_model 16), so
 * an offset just inside base 1e4's limit is refused with base 0.5 however the
 * calls alternate, and base 1e-310 (d_model 64: frequencies beyond 1e290) is
 * refused too. */
static void limit_rows(void) {
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    fastpe_error e;
    double limit;
    int64_t k;
    CHECK(fastpe_fill_f64(xd, 1, 16, 16, 1e4, (int64_t)1 << 60, IL, 1) == FASTPE_ERANGE,
          "offset 2^60 refused");
    fastpe_last_error(&e);
    limit = e.limit;
    CHECK(limit > 1e6 && limit < 1e18, "the limit %g", limit);
    k = (int64_t)(limit * 0.9);
    for (int i = 0; i < 3; i++) {
        CHECK(fastpe_fill_f64(xd, 1, 16, 16, 1e4, k, IL, 1) == FASTPE_OK, "base 1e4 at 0.9 limit");
        ROW(fastpe_fill_f64(xd, 1, 16, 16, 0.5, k, IL, 1), FASTPE_ERANGE, "offset", -1, (double)k,
            POSITIVE);
        ROW(fastpe_fill_f32(xf, 1, 64, 64, 1e-310, 0, IL, 1), FASTPE_EBASE, "base", -1, 1e-310,
            NAN);
        CHECK(fastpe_fill_f32(xf, 1, 16, 16, 1e4, k, IL, 1) == FASTPE_OK, "base 1e4 again");
    }
}

int main(void) {
    limit_rows();
    table_rows();
    spec_rows();
    rope_rows();
    gap_positions();
    if (failures)
        fprintf(stderr, "%d failures in %d rows\n", failures, rows_run);
    else
        printf("fastpe_test_refusals: ok (%d rows)\n", rows_run);
    return failures != 0;
}
