/*
 * The library's contract from C, with no Python: every bad argument gives its
 * code and leaves the buffers untouched; a long fill stops through the poll
 * callback (rows done stay written, the rest untouched); a fork after a
 * parallel fill works in the child; threads share the plan cache (run under
 * ThreadSanitizer by tools/test_clib.sh, in the serial build).
 *     fastpe_test_api [errors|specs|rope|rules|poll|fork|threads]...   (no argument: all)
 */
#ifdef Py_PYTHON_H
#error "the C library's tests must not include Python.h"
#endif
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <fastpe/fastpe.h>

#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

enum { N = 64 * 16 };
static unsigned char buf[N * 8], pristine[N * 8];
static double posbuf[64];

static void arm(void) {
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = pristine[i] = (unsigned char)(0xA5 ^ i);
}

/* got == want, and not one byte of buf changed */
static void expect(int got, int want, const char *what) {
    CHECK(got == want, "%s: got %d (%s), want %d (%s)", what, got, fastpe_strerror(got), want,
          fastpe_strerror(want));
    CHECK(memcmp(buf, pristine, sizeof(buf)) == 0, "%s: the buffer was modified", what);
}

static void test_errors(void) {
    float *f = (float *)buf;
    double *d = (double *)buf;
    uint16_t *h = (uint16_t *)buf;
    const double nan = NAN, inf = INFINITY;
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    for (int i = 0; i < 64; i++)
        posbuf[i] = i;

    arm(), expect(fastpe_fill_f32(NULL, 4, 16, 16, 1e4, 0, IL, 1), FASTPE_ENULL, "fill NULL");
    arm(), expect(fastpe_fill_f32(f, -1, 16, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "seq_len < 0");
    arm(), expect(fastpe_fill_f64(d, 4, 0, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "d_model 0");
    arm(), expect(fastpe_fill_f64(d, 1, ((int64_t)1 << 40) + 1, 0, 1e4, 0, IL, 1), FASTPE_ESIZE,
                  "d_model > 2^40");
    arm(), expect(fastpe_fill_f16(h, 4, 16, 15, 1e4, 0, IL, 1), FASTPE_ESTRIDE, "stride < d");
    arm(), expect(fastpe_fill_bf16(h, 4, 16, 16, 0.0, 0, IL, 1), FASTPE_EBASE, "base 0");
    arm(), expect(fastpe_fill_f32(f, 4, 16, 16, -2.0, 0, IL, 1), FASTPE_EBASE, "base < 0");
    arm(), expect(fastpe_fill_f32(f, 4, 16, 16, nan, 0, IL, 1), FASTPE_EBASE, "base NaN");
    arm(), expect(fastpe_fill_f32(f, 4, 16, 16, inf, 0, IL, 1), FASTPE_EBASE, "base inf");
    arm(), expect(fastpe_fill_f32(f, 4, 64, 64, 1e-310, 0, IL, 1), FASTPE_EBASE,
                  "base whose frequencies overflow");
    arm(), expect(fastpe_fill_f32(f, 4, 16, 16, 1e4, 0, 2, 1), FASTPE_ELAYOUT, "layout 2");
    arm(), expect(fastpe_fill_f32(f, 4, 16, 16, 1e4, 0, -1, 1), FASTPE_ELAYOUT, "layout -1");
    arm(), expect(fastpe_fill_f64(d, 4, 16, 16, 1e4, INT64_MAX - 2, IL, 1), FASTPE_ERANGE,
                  "offset near INT64_MAX");
    arm(), expect(fastpe_fill_f64(d, 4, 16, 16, 1e4, INT64_MIN, IL, 1), FASTPE_ERANGE,
                  "offset INT64_MIN");
    arm(), expect(fastpe_fill_poll(buf, 4, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_EINVAL,
                  "dtype 4");
    arm(), expect(fastpe_fill_poll(buf, -1, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_EINVAL,
                  "dtype -1");

    arm(), expect(fastpe_add_f32(f, -1, 4, 16, 16, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE, "nseq < 0");
    arm(), expect(fastpe_add_f64(d, 2, 4, 16, 16, 1e4, 0, nan, IL, 1), FASTPE_ESCALE, "scale NaN");
    arm(), expect(fastpe_add_f16(h, 2, 4, 16, 16, 1e4, 0, inf, IL, 1), FASTPE_ESCALE, "scale inf");
    arm(), expect(fastpe_add_bf16(h, 2, 1, 16, 8, 1e4, 0, 1.0, IL, 1), FASTPE_ESTRIDE,
                  "add: sequences overlap");
    arm(),
        expect(fastpe_add_bf16(NULL, 2, 4, 16, 16, 1e4, 0, 1.0, IL, 1), FASTPE_ENULL, "add NULL");
    arm(), expect(fastpe_add_f32(f, INT64_MAX / 2, 4, 16, 16, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE,
                  "add: rows beyond int64");

    arm(), expect(fastpe_fill_positions_f32(f, 4, 16, 16, NULL, 1e4, IL, 1), FASTPE_ENULL,
                  "positions NULL");
    posbuf[2] = nan;
    arm(), expect(fastpe_fill_positions_f64(d, 4, 16, 16, posbuf, 1e4, IL, 1), FASTPE_ERANGE,
                  "position NaN");
    posbuf[2] = 1e300;
    arm(), expect(fastpe_add_positions_f64(d, 4, 16, 16, posbuf, 1e4, 1.0, IL, 1), FASTPE_ERANGE,
                  "position too large");
    posbuf[2] = 2;
    arm(), expect(fastpe_add_positions_f32(f, 4, 16, 16, posbuf, 1e4, nan, IL, 1), FASTPE_ESCALE,
                  "add_positions scale NaN");
    /* positions inside the rows to be written */
    arm(), expect(fastpe_fill_positions_f64(d, 4, 16, 16, d + 8, 1e4, IL, 1), FASTPE_EOVERLAP,
                  "positions overlap the rows");

    for (int code = 0; code <= 12; code++)
        CHECK(fastpe_strerror(code) != NULL && fastpe_strerror(code)[0] != 0, "strerror(%d)", code);
    CHECK(strcmp(fastpe_strerror(FASTPE_EINTR), fastpe_strerror(999)) != 0, "EINTR has a text");
    CHECK(strcmp(fastpe_strerror(-5), fastpe_strerror(999)) == 0, "unknown codes share a text");
}

static void test_specs(void) {
    fastpe_knobs k;
    fastpe_spec *h = NULL, *bad = (fastpe_spec *)posbuf;
    float *f = (float *)buf;
    double *d = (double *)buf;
    uint16_t *u = (uint16_t *)buf;
    memset(posbuf, 0, sizeof(posbuf)); /* not a spec: its magic word is 0 */

    CHECK(fastpe_knobs_preset("nope", &k) == FASTPE_EINVAL, "unknown preset");
    CHECK(fastpe_knobs_preset(NULL, &k) == FASTPE_ENULL, "NULL preset name");
    CHECK(fastpe_spec_from_name("nope", 8) == NULL, "from_name of an unknown name");
    CHECK(fastpe_spec_from_name("gptj", 7) == NULL, "gptj at an odd width");
    CHECK(fastpe_spec_from_knobs(8, 1e4, "d/2", 0, 1, "diagonal", "sin", 0, 0) == NULL,
          "from_knobs with an unknown layout");
    CHECK(fastpe_spec_from_knobs(8, 1e4, NULL, 0, 1, "split", "sin", 0, 0) == NULL,
          "from_knobs with a NULL denominator");
    CHECK(fastpe_spec_d_model(NULL) == -1 && fastpe_spec_d_model(bad) == -1, "d_model of no spec");

    struct {
        const char *what;
        int knob, want;
        double value;
    } cases[] = {
        {"base 0", 0, FASTPE_EBASE, 0.0},
        {"base NaN", 0, FASTPE_EBASE, NAN},
        {"base whose frequencies overflow", 0, FASTPE_EBASE, 1e-310},
        {"position_scale > 1e280", 1, FASTPE_EINVAL, 1e281},
        {"position_scale 0", 1, FASTPE_EINVAL, 0.0},
        {"shift inf", 2, FASTPE_EINVAL, INFINITY},
        {"denominator 5", 3, FASTPE_EINVAL, 5},
        {"columns 3", 4, FASTPE_EINVAL, 3},
        {"odd -1", 5, FASTPE_EINVAL, -1},
        {"size 0", 6, FASTPE_EINVAL, 0},
        {"h - shift <= 0 with several frequencies", 7, FASTPE_EINVAL, 40.0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fastpe_knobs_preset("vaswani", &k);
        switch (cases[i].knob) {
        case 0:
            k.base = cases[i].value;
            break;
        case 1:
            k.position_scale = cases[i].value;
            break;
        case 2:
            k.shift = cases[i].value;
            break;
        case 3:
            k.denominator = (int)cases[i].value;
            break;
        case 4:
            k.columns = (int)cases[i].value;
            break;
        case 5:
            k.odd = (int)cases[i].value;
            break;
        case 6:
            k.size = 0;
            break;
        default:
            k.denominator = FASTPE_DENOM_H_MINUS_SHIFT;
            k.shift = cases[i].value;
            break;
        }
        h = (fastpe_spec *)&k; /* must be overwritten with NULL */
        int err = fastpe_spec_create(&k, 64, &h);
        CHECK(err == cases[i].want && h == NULL, "%s: got %d (%s), want %d", cases[i].what, err,
              fastpe_strerror(err), cases[i].want);
    }
    fastpe_knobs_preset("vaswani", &k);
    CHECK(fastpe_spec_create(&k, 0, &h) == FASTPE_ESIZE && h == NULL, "d_model 0");
    CHECK(fastpe_spec_create(NULL, 8, &h) == FASTPE_ENULL, "NULL knobs");
    CHECK(fastpe_spec_create(&k, 8, NULL) == FASTPE_ENULL, "NULL out");

    /* the fills' checks, with a live handle (fairseq: row 1 all zeros) */
    CHECK(fastpe_knobs_preset("fairseq", &k) == FASTPE_OK && fastpe_spec_create(&k, 16, &h) == 0,
          "fairseq spec");
    CHECK(fastpe_spec_d_model(h) == 16, "d_model");
    arm(), expect(fastpe_spec_fill_f32(NULL, f, 4, 16, 0, 1), FASTPE_ENULL, "spec NULL");
    arm(), expect(fastpe_spec_fill_f32(bad, f, 4, 16, 0, 1), FASTPE_EHANDLE, "not a spec");
    arm(), expect(fastpe_spec_add_bf16(bad, u, 1, 4, 16, 0, 1.0, 1), FASTPE_EHANDLE,
                  "add: not a spec");
    arm(), expect(fastpe_spec_fill_positions_f64(bad, d, 4, 16, posbuf, 1), FASTPE_EHANDLE,
                  "positions: not a spec");
    arm(), expect(fastpe_spec_fill_f64(h, d, -1, 16, 0, 1), FASTPE_ESIZE, "spec seq_len < 0");
    arm(), expect(fastpe_spec_fill_f16(h, u, 4, 15, 0, 1), FASTPE_ESTRIDE, "spec stride");
    arm(), expect(fastpe_spec_fill_bf16(h, NULL, 4, 16, 0, 1), FASTPE_ENULL, "spec out NULL");
    arm(), expect(fastpe_spec_fill_f32(h, f, 4, 16, INT64_MAX - 9, 1), FASTPE_ERANGE,
                  "spec offset too large");
    arm(), expect(fastpe_spec_add_f64(h, d, 2, 4, 16, 0, NAN, 1), FASTPE_ESCALE, "spec scale");
    arm(), expect(fastpe_spec_add_f16(h, u, -1, 4, 16, 0, 1.0, 1), FASTPE_ESIZE, "spec nseq");
    arm(), expect(fastpe_spec_fill_positions_f64(h, d, 4, 16, d + 3, 1), FASTPE_EOVERLAP,
                  "spec positions overlap the rows");
    for (int i = 0; i < 64; i++)
        posbuf[i] = i;
    posbuf[1] = NAN;
    arm(), expect(fastpe_spec_fill_positions_f32(h, f, 4, 16, posbuf, 1), FASTPE_ERANGE,
                  "spec position NaN");
    /* and a good fill: row 1 (the padding position) is all zeros, row 2 is not */
    CHECK(fastpe_spec_fill_f64(h, d, 4, 16, 0, 1) == FASTPE_OK, "spec fill");
    int zeros = 1, nonzero = 0;
    for (int c = 0; c < 16; c++) {
        zeros = zeros && d[16 + c] == 0.0;
        nonzero = nonzero || d[32 + c] != 0.0;
    }
    CHECK(zeros && nonzero, "fairseq's padding row");
    fastpe_spec_free(h);
    fastpe_spec_free(NULL);
    fastpe_spec_free(bad); /* not a spec: left alone */
}

static void test_rope(void) {
    float *f = (float *)buf;
    double *d = (double *)buf;
    uint16_t *u = (uint16_t *)buf;
    static const double w[3] = {1.0, 0.5, 0.25};
    static uint64_t junk[16]; /* zeros: no live handle's magic */
    const fastpe_rope *bad = (const fastpe_rope *)(void *)junk;
    const int SP = FASTPE_LAYOUT_SPLIT, IL = FASTPE_LAYOUT_INTERLEAVED;
    int64_t ipos[64];
    fastpe_rope *h;

    /* the constructor: NULL for every argument outside its values */
    const double neg[2] = {1.0, -1e-300}, big[2] = {1.0, 1e281}, nan2[2] = {NAN, 1.0};
    CHECK(fastpe_rope_from_frequencies(NULL, 3, 1.0) == NULL, "inv_freq NULL");
    CHECK(fastpe_rope_from_frequencies(w, 0, 1.0) == NULL, "nf 0");
    CHECK(fastpe_rope_from_frequencies(w, -1, 1.0) == NULL, "nf < 0");
    CHECK(fastpe_rope_from_frequencies(w, ((int64_t)1 << 31) + 1, 1.0) == NULL, "nf > 2^31");
    CHECK(fastpe_rope_from_frequencies(neg, 2, 1.0) == NULL, "a frequency < 0");
    CHECK(fastpe_rope_from_frequencies(big, 2, 1.0) == NULL, "a frequency > 1e280");
    CHECK(fastpe_rope_from_frequencies(nan2, 2, 1.0) == NULL, "a frequency NaN");
    CHECK(fastpe_rope_from_frequencies(w, 3, 0.0) == NULL, "attention_factor 0");
    CHECK(fastpe_rope_from_frequencies(w, 3, -1.0) == NULL, "attention_factor < 0");
    CHECK(fastpe_rope_from_frequencies(w, 3, NAN) == NULL, "attention_factor NaN");
    CHECK(fastpe_rope_from_frequencies(w, 3, INFINITY) == NULL, "attention_factor inf");
    h = fastpe_rope_from_frequencies(w, 3, 1.0);
    CHECK(h != NULL, "a handle from 3 frequencies");
    if (h == NULL)
        return;
    CHECK(fastpe_rope_rotary_dim(h) == 6, "rotary_dim");
    CHECK(fastpe_rope_rotary_dim(NULL) == -1 && fastpe_rope_rotary_dim(bad) == -1,
          "rotary_dim of no handle");

    /* the cache's checks, in the capsule's order */
    for (int i = 0; i < 64; i++)
        ipos[i] = i;
    arm(), expect(fastpe_rope_cache_f32(NULL, f, f + 64, 4, 6, NULL, 0, SP, 1), FASTPE_ENULL,
                  "cache: handle NULL");
    arm(), expect(fastpe_rope_cache_f32(bad, f, f + 64, 4, 6, NULL, 0, SP, 1), FASTPE_EHANDLE,
                  "cache: not a handle");
    arm(), expect(fastpe_rope_cache_f64(h, d, d + 64, -1, 6, NULL, 0, SP, 1), FASTPE_ESIZE,
                  "cache: n < 0");
    arm(), expect(fastpe_rope_cache_f64(h, NULL, NULL, -1, 6, NULL, 0, 2, 1), FASTPE_ESIZE,
                  "cache: n < 0 comes before the layout and the pointers");
    arm(), expect(fastpe_rope_cache_f16(h, u, u + 64, 4, 6, NULL, 0, 2, 1), FASTPE_ELAYOUT,
                  "cache: layout 2");
    arm(), expect(fastpe_rope_cache_f16(h, NULL, NULL, 0, 6, NULL, 0, SP, 1), FASTPE_OK,
                  "cache: n 0 writes nothing");
    arm(), expect(fastpe_rope_cache_bf16(h, u, NULL, 4, 6, NULL, 0, IL, 1), FASTPE_ENULL,
                  "cache: sin NULL");
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 64, 4, 5, NULL, 0, SP, 1), FASTPE_ESTRIDE,
                  "cache: row_stride < rotary_dim");
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 64, INT64_MAX / 8, 6, NULL, 0, SP, 1),
                  FASTPE_ESIZE, "cache: rows beyond int64");
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 5, 4, 6, NULL, 0, SP, 1), FASTPE_EOVERLAP,
                  "cache: sin's first row inside cos's");
    arm(), expect(fastpe_rope_cache_f64(h, d + 18, d, 4, 6, NULL, 0, SP, 1), FASTPE_EOVERLAP,
                  "cache: cos's first row inside sin's last");
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 21, 4, 6, NULL, 0, SP, 1), FASTPE_EOVERLAP,
                  "cache: sin's first row across cos's last");
    arm(), expect(fastpe_rope_cache_f32(h, f + 3, f, 1, 6, NULL, 0, SP, 1), FASTPE_EOVERLAP,
                  "cache: one row each, half shared");
    /* side by side in one buffer (stride 12, sin at +6): disjoint, accepted */
    CHECK(fastpe_rope_cache_f32(h, f, f + 6, 4, 12, NULL, 0, SP, 1) == FASTPE_OK,
          "cache: cos and sin interleaved by rows");
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 64, 4, 6, NULL, INT64_MAX - 2, SP, 1),
                  FASTPE_ERANGE, "cache: offset too large");
    ipos[2] = INT64_MIN;
    arm(), expect(fastpe_rope_cache_f32(h, f, f + 64, 4, 6, ipos, 0, SP, 1), FASTPE_ERANGE,
                  "cache: a position too large");
    ipos[2] = 2;

    /* the rotation's checks */
    arm(), expect(fastpe_rope_apply_f32(NULL, f, 1, 4, 2, 48, 12, 6, NULL, 0, SP, 1), FASTPE_ENULL,
                  "apply: handle NULL");
    arm(), expect(fastpe_rope_apply_f32(bad, f, 1, 4, 2, 48, 12, 6, NULL, 0, SP, 1), FASTPE_EHANDLE,
                  "apply: not a handle");
    arm(), expect(fastpe_rope_apply_f64(h, d, 1, -4, 2, 48, 12, 6, NULL, 0, SP, 1), FASTPE_ESIZE,
                  "apply: seq < 0");
    arm(), expect(fastpe_rope_apply_f64(h, d, 1, 4, 2, 48, 12, 6, NULL, 0, 7, 1), FASTPE_ELAYOUT,
                  "apply: layout 7");
    arm(), expect(fastpe_rope_apply_f16(h, NULL, 0, 4, 2, 48, 12, 6, NULL, 0, SP, 1), FASTPE_OK,
                  "apply: batch 0 rotates nothing");
    arm(), expect(fastpe_rope_apply_f16(h, NULL, 1, 4, 2, 48, 12, 6, NULL, 0, SP, 1), FASTPE_ENULL,
                  "apply: x NULL");
    arm(), expect(fastpe_rope_apply_bf16(h, u, 1, 4, 2, 48, 12, 5, NULL, 0, IL, 1), FASTPE_ESTRIDE,
                  "apply: heads 5 apart, rows of 6");
    arm(), expect(fastpe_rope_apply_bf16(h, u, 2, 4, 2, 40, 12, 6, NULL, 0, IL, 1), FASTPE_ESTRIDE,
                  "apply: sequences overlap");
    arm(), expect(fastpe_rope_apply_f32(h, f, 2, 4, 2, 0, 12, 6, NULL, 0, SP, 1), FASTPE_ESTRIDE,
                  "apply: stride_batch 0 with 2 sequences");
    arm(), expect(fastpe_rope_apply_f32(h, f, INT64_MAX / 4, 4, 2, 48, 12, 6, NULL, 0, SP, 1),
                  FASTPE_ESIZE, "apply: rows beyond int64");
    arm(), expect(fastpe_rope_apply_f32(h, f, 1, 4, 2, 48, 12, 6, NULL, INT64_MIN, SP, 1),
                  FASTPE_ERANGE, "apply: offset too large");
    ipos[5] = INT64_MAX;
    arm(), expect(fastpe_rope_apply_f64(h, d, 2, 4, 1, 24, 6, 6, ipos, 0, SP, 1), FASTPE_ERANGE,
                  "apply: a position of the second sequence too large");
    /* negative strides are fine: rows in reverse order */
    CHECK(fastpe_rope_apply_f32(h, f + 42, 1, 4, 2, 48, -12, 6, NULL, 0, SP, 1) == FASTPE_OK,
          "apply: negative stride_seq");
    fastpe_rope_free(h);

    /* values against libm (a few ulps: both are within 1 ulp of the truth): one
       frequency 1, attention 0.5 give cos(k)/2 and sin(k)/2, and the rotation
       of (1, 0) by position k is (cos k, sin k)/2 */
    h = fastpe_rope_from_frequencies(w, 1, 0.5);
    CHECK(h != NULL, "a handle from 1 frequency");
    if (h == NULL)
        return;
    CHECK(fastpe_rope_cache_f64(h, d, d + 16, 8, 2, NULL, -3, IL, 1) == FASTPE_OK, "cache");
    for (int r = 0; r < 8; r++) {
        double k = r - 3;
        CHECK(fabs(d[2 * r] - 0.5 * cos(k)) < 3e-16 && d[2 * r + 1] == d[2 * r], "cos(%g)", k);
        CHECK(fabs(d[16 + 2 * r] - 0.5 * sin(k)) < 3e-16 && d[17 + 2 * r] == d[16 + 2 * r],
              "sin(%g)", k);
    }
    for (int r = 0; r < 8; r++)
        d[2 * r] = 1.0, d[2 * r + 1] = 0.0;
    CHECK(fastpe_rope_apply_f64(h, d, 1, 8, 1, 16, 2, 2, NULL, 5, SP, 1) == FASTPE_OK, "apply");
    for (int r = 0; r < 8; r++) {
        double k = r + 5;
        CHECK(fabs(d[2 * r] - 0.5 * cos(k)) < 3e-16 && fabs(d[2 * r + 1] - 0.5 * sin(k)) < 3e-16,
              "rotation at %g", k);
    }
    fastpe_rope_free(h);
    fastpe_rope_free(NULL);
    fastpe_rope_free((fastpe_rope *)(void *)junk); /* not a handle: left alone */
}

/* The RoPE rules: each refusal its code, nothing written (the frequencies, nf
 * and the attention factor all live in buf). */
static int rules(const fastpe_rope_params *p, int64_t head_dim, int64_t capacity) {
    return fastpe_rope_frequencies(p, head_dim, (double *)buf, capacity, (int64_t *)(buf + 4096),
                                   (double *)(buf + 4104));
}

static void test_rules(void) {
    fastpe_rope_params p, q;
    const double ones[4] = {1.0, 1.0, 1.0, 1.0}, zero4[4] = {1.0, 0.0, 1.0, 1.0};
    double w[64], w64[32], att = 0.0;
    int64_t nf = 0;
    fastpe_rope *h, *g;
    for (int code = 1; code <= FASTPE_EHANDLE; code++)
        CHECK(strcmp(fastpe_strerror(code), fastpe_strerror(-1)) != 0, "no message for %d", code);
    fastpe_rope_params_init(NULL); /* ignored */
    fastpe_rope_params_init(&p);
    CHECK(p.size == sizeof(p) && p.rope_type == FASTPE_ROPE_DEFAULT && isnan(p.rope_theta) &&
              p.seq_len == FASTPE_ROPE_UNSET && p.truncate == -1 && p.short_factor == NULL,
          "the initialiser's values");
#define RULE(setup, head_dim, code, what)                                                          \
    do {                                                                                           \
        fastpe_rope_params_init(&q);                                                               \
        setup;                                                                                     \
        arm(), expect(rules(&q, head_dim, 64), code, what);                                        \
    } while (0)
    arm(), expect(rules(NULL, 64, 64), FASTPE_ENULL, "params NULL");
    arm(),
        expect(fastpe_rope_frequencies(&p, 64, NULL, 64, &nf, &att), FASTPE_ENULL, "inv_freq NULL");
    arm(), expect(fastpe_rope_frequencies(&p, 64, (double *)buf, 64, NULL, &att), FASTPE_ENULL,
                  "nf NULL");
    arm(), expect(fastpe_rope_frequencies(&p, 64, (double *)buf, 64, &nf, NULL), FASTPE_ENULL,
                  "attention_factor NULL");
    arm(), expect(rules(&p, 64, 31), FASTPE_ESIZE, "capacity < nf");
    RULE(q.size = 0, 64, FASTPE_EINVAL, "size 0");
    RULE(q.size = sizeof(q) + 8, 64, FASTPE_EINVAL, "a size this library does not know");
    RULE((void)0, 1, FASTPE_ESIZE, "head_dim 1");
    RULE((void)0, ((int64_t)1 << 31) + 2, FASTPE_ESIZE, "head_dim > 2^31");
    RULE((void)0, 7, FASTPE_EINVAL, "odd rotary_dim");
    RULE(q.partial_rotary_factor = 0.01, 64, FASTPE_EINVAL, "rotary_dim 0");
    RULE(q.partial_rotary_factor = 1.5, 64, FASTPE_EINVAL, "partial_rotary_factor > 1");
    RULE(q.rope_type = -1, 64, FASTPE_EINVAL, "rope_type -1");
    RULE(q.rope_type = 6, 64, FASTPE_EINVAL, "rope_type 6");
    RULE(q.precision = 2, 64, FASTPE_EINVAL, "precision 2");
    RULE(q.rope_theta = 0.0, 64, FASTPE_EINVAL, "rope_theta 0");
    RULE(q.rope_theta = -INFINITY, 64, FASTPE_EINVAL, "rope_theta -inf");
    RULE(q.rope_theta = 1e-300, 64, FASTPE_EBASE, "frequencies past 1e280");
    RULE(q.factor = 2.0, 64, FASTPE_EINVAL, "a key the default rule does not take");
    RULE(q.mscale = 0.0, 64, FASTPE_EINVAL, "mscale 0 is a key given");
    RULE(q.max_position_embeddings = 0, 64, FASTPE_EINVAL, "max_position_embeddings 0");
    RULE(q.seq_len = -1, 64, FASTPE_EINVAL, "seq_len -1");
    RULE(q.rope_type = FASTPE_ROPE_LINEAR, 64, FASTPE_EINVAL, "linear without factor");
    RULE((q.rope_type = FASTPE_ROPE_LINEAR, q.factor = -2.0), 64, FASTPE_EINVAL, "factor < 0");
    RULE((q.rope_type = FASTPE_ROPE_LINEAR, q.factor = 2.0, q.truncate = 1), 64, FASTPE_EINVAL,
         "truncate outside yarn");
    RULE((q.rope_type = FASTPE_ROPE_LINEAR, q.factor = 2.0, q.original_max_position_embeddings = 8),
         64, FASTPE_EINVAL, "original_max_position_embeddings outside its rules");
    RULE((q.rope_type = FASTPE_ROPE_DYNAMIC, q.factor = 2.0), 64, FASTPE_EINVAL,
         "dynamic without max_position_embeddings");
    RULE((q.rope_type = FASTPE_ROPE_DYNAMIC, q.factor = 2.0, q.max_position_embeddings = 8), 2,
         FASTPE_EINVAL, "dynamic at rotary_dim 2");
    RULE((q.rope_type = FASTPE_ROPE_DYNAMIC, q.factor = 1e300, q.max_position_embeddings = 8), 64,
         FASTPE_EBASE, "dynamic's base cancels to 0");
    RULE((q.rope_type = FASTPE_ROPE_LLAMA3, q.factor = 8.0, q.low_freq_factor = 1.0,
          q.high_freq_factor = 4.0),
         64, FASTPE_EINVAL, "llama3 without a length");
    RULE((q.rope_type = FASTPE_ROPE_LLAMA3, q.factor = 8.0, q.low_freq_factor = 1.0,
          q.high_freq_factor = 0.5, q.original_max_position_embeddings = 8192),
         64, FASTPE_EINVAL, "llama3 high_freq_factor < low_freq_factor");
    RULE((q.rope_type = FASTPE_ROPE_LLAMA3, q.factor = 8.0, q.low_freq_factor = 1.0,
          q.high_freq_factor = 4.0, q.original_max_position_embeddings = -5),
         64, FASTPE_EINVAL, "original_max_position_embeddings < 1");
    RULE((q.rope_type = FASTPE_ROPE_YARN, q.original_max_position_embeddings = 4096), 64,
         FASTPE_EINVAL, "yarn without factor or max_position_embeddings");
    RULE((q.rope_type = FASTPE_ROPE_YARN, q.factor = 4.0, q.original_max_position_embeddings = 4096,
          q.truncate = 2),
         64, FASTPE_EINVAL, "truncate 2");
    RULE((q.rope_type = FASTPE_ROPE_YARN, q.factor = 4.0, q.original_max_position_embeddings = 4096,
          q.rope_theta = 1.0),
         64, FASTPE_EINVAL, "yarn with theta 1 (ln theta = 0)");
    RULE((q.rope_type = FASTPE_ROPE_YARN, q.factor = 4.0, q.original_max_position_embeddings = 4096,
          q.beta_slow = 0.0),
         64, FASTPE_EINVAL, "beta_slow 0");
    RULE((q.rope_type = FASTPE_ROPE_YARN, q.factor = 4.0, q.original_max_position_embeddings = 4096,
          q.mscale = INFINITY),
         64, FASTPE_EINVAL, "mscale inf");
    RULE((q.rope_type = FASTPE_ROPE_LONGROPE, q.factor = 2.0, q.short_factor = ones,
          q.short_factor_len = 4, q.long_factor = ones, q.long_factor_len = 3,
          q.original_max_position_embeddings = 4096),
         8, FASTPE_EINVAL, "long_factor of the wrong length");
    RULE((q.rope_type = FASTPE_ROPE_LONGROPE, q.factor = 2.0, q.short_factor = ones,
          q.short_factor_len = 4, q.original_max_position_embeddings = 4096),
         8, FASTPE_EINVAL, "longrope without long_factor");
    RULE((q.rope_type = FASTPE_ROPE_LONGROPE, q.factor = 2.0, q.short_factor = zero4,
          q.short_factor_len = 4, q.long_factor = ones, q.long_factor_len = 4,
          q.original_max_position_embeddings = 4096),
         8, FASTPE_EINVAL, "a short_factor entry 0");
    RULE((q.rope_type = FASTPE_ROPE_LONGROPE, q.factor = 2.0, q.short_factor = ones,
          q.short_factor_len = 4, q.long_factor = ones, q.long_factor_len = 4,
          q.original_max_position_embeddings = 1),
         8, FASTPE_EINVAL, "longrope's attention factor at original length 1");
#undef RULE

    /* the default rule in float64: theta^(-2i/d), to a few ulps; in float32, float values */
    p.precision = FASTPE_PRECISION_FLOAT64;
    CHECK(fastpe_rope_frequencies(&p, 64, w64, 32, &nf, &att) == FASTPE_OK && nf == 32 &&
              att == 1.0,
          "the default rule");
    for (int i = 0; i < 32; i++)
        CHECK(fabs(w64[i] - pow(10000.0, -2.0 * i / 64)) <= 4e-16 * w64[i], "w[%d] = %.17g", i,
              w64[i]);
    p.precision = FASTPE_PRECISION_FLOAT32;
    CHECK(fastpe_rope_frequencies(&p, 64, w, 64, &nf, &att) == FASTPE_OK && nf == 32, "float32");
    for (int i = 0; i < 32; i++)
        CHECK(w[i] == (double)(float)w[i] && fabs(w[i] - w64[i]) <= 2e-7 * w64[i], "w32[%d]", i);

    /* a handle from the rule caches as one from its frequencies */
    fastpe_rope_params_init(&q);
    q.rope_type = FASTPE_ROPE_YARN;
    q.factor = 40.0;
    q.original_max_position_embeddings = 4096;
    q.mscale = q.mscale_all_dim = 0.707;
    q.attention_factor = 1.5;
    CHECK(fastpe_rope_frequencies(&q, 64, w, 64, &nf, &att) == FASTPE_OK && att == 1.5, "yarn");
    h = (fastpe_rope *)(void *)buf;
    CHECK(fastpe_rope_from_params(&q, 64, &h) == FASTPE_OK && h != NULL, "from_params");
    g = fastpe_rope_from_frequencies(w, nf, att);
    if (h != NULL && g != NULL) {
        double *a = (double *)malloc(4 * 9 * 64 * sizeof(double));
        CHECK(a != NULL, "out of memory");
        if (a != NULL) {
            CHECK(fastpe_rope_cache_f64(h, a, a + 9 * 64, 9, 64, NULL, 5, FASTPE_LAYOUT_SPLIT, 1) ==
                          FASTPE_OK &&
                      fastpe_rope_cache_f64(g, a + 18 * 64, a + 27 * 64, 9, 64, NULL, 5,
                                            FASTPE_LAYOUT_SPLIT, 1) == FASTPE_OK &&
                      memcmp(a, a + 18 * 64, 18 * 64 * sizeof(double)) == 0,
                  "the rule's handle == the frequencies' handle");
            free(a);
        }
    }
    fastpe_rope_free(h);
    fastpe_rope_free(g);
    h = (fastpe_rope *)(void *)buf;
    q.factor = -1.0;
    CHECK(fastpe_rope_from_params(&q, 64, &h) == FASTPE_EINVAL && h == NULL, "*rope NULL on error");
    h = (fastpe_rope *)(void *)buf;
    CHECK(fastpe_rope_from_params(NULL, 64, &h) == FASTPE_ENULL && h == NULL, "params NULL");
    CHECK(fastpe_rope_from_params(&p, 64, NULL) == FASTPE_ENULL, "rope NULL");
}

typedef struct {
    int calls;
    int stop_at;
} poll_state;

static int poll_cb(void *ctx) {
    poll_state *p = (poll_state *)ctx;
    p->calls++;
    return p->calls >= p->stop_at;
}

static void test_poll(void) {
    /* 20000 x 512 entries: more than one chunk (8 Mi entries each) */
    const int64_t S = 20000, D = 512;
    size_t n = (size_t)(S * D);
    float *ref = (float *)malloc(n * sizeof(float));
    float *out = (float *)malloc(n * sizeof(float));
    poll_state p = {0, 1000000};
    if (ref == NULL || out == NULL) {
        CHECK(0, "out of memory");
        return;
    }
    CHECK(fastpe_fill_f32(ref, S, D, D, 1e4, -7, FASTPE_LAYOUT_SPLIT, 0) == FASTPE_OK, "ref");
    memset(out, 0xff, n * sizeof(float));
    CHECK(fastpe_fill_poll(out, FASTPE_DTYPE_F32, S, D, D, 1e4, -7, FASTPE_LAYOUT_SPLIT, 0, poll_cb,
                           &p) == FASTPE_OK,
          "a poll that never stops");
    CHECK(p.calls >= 1, "the callback was called between chunks (%d calls)", p.calls);
    CHECK(memcmp(out, ref, n * sizeof(float)) == 0, "polled fill == one fill, bitwise");

    p.calls = 0;
    p.stop_at = 1;
    memset(out, 0xff, n * sizeof(float));
    int err = fastpe_fill_poll(out, FASTPE_DTYPE_F32, S, D, D, 1e4, -7, FASTPE_LAYOUT_SPLIT, 0,
                               poll_cb, &p);
    CHECK(err == FASTPE_EINTR, "stopped fill: %s", fastpe_strerror(err));
    CHECK(p.calls == 1, "stopped at the first poll (%d calls)", p.calls);
    /* the first chunk's rows are written (as one fill writes them), the last row is not */
    CHECK(memcmp(out, ref, (size_t)D * sizeof(float)) == 0, "the first row is written");
    unsigned char ff[512 * sizeof(float)];
    memset(ff, 0xff, sizeof(ff));
    CHECK(memcmp(out + (S - 1) * D, ff, sizeof(ff)) == 0, "the last row is untouched");
    free(ref);
    free(out);
}

#if !defined(_WIN32)
static void test_fork(void) {
    const int64_t S = 4000, D = 256;
    size_t n = (size_t)(S * D);
    double *a = (double *)malloc(n * sizeof(double));
    double *b = (double *)malloc(n * sizeof(double));
    if (a == NULL || b == NULL) {
        CHECK(0, "out of memory");
        return;
    }
    /* a parallel fill first: the OpenMP runtime now has a thread pool */
    CHECK(fastpe_fill_f64(a, S, D, D, 1e4, 3, FASTPE_LAYOUT_INTERLEAVED, 4) == FASTPE_OK, "fill");
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60); /* a hang in the child is a failure, not a stuck test */
        int err = fastpe_fill_f64(b, S, D, D, 1e4, 3, FASTPE_LAYOUT_INTERLEAVED, 4);
        _exit(err == FASTPE_OK && memcmp(a, b, n * sizeof(double)) == 0 ? 0 : 3);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's fill after fork (status %d)",
          status);
    free(a);
    free(b);
}

enum { NT = 4, ROUNDS = 20 };
static float *thread_ref[NT];

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    int64_t D = 16 + 24 * t, S = 40 + t;
    float *out = (float *)malloc((size_t)(S * D) * sizeof(float));
    int bad = 0;
    for (int r = 0; r < ROUNDS && out != NULL; r++) {
        /* widths differ per thread and repeat: plans are shared, evicted and rebuilt */
        bad |= fastpe_fill_f32(out, S, D, D, 1e4 + (r % 3), 0, FASTPE_LAYOUT_INTERLEAVED, 1);
        if (r % 3 == 0)
            bad |= memcmp(out, thread_ref[t], (size_t)(S * D) * sizeof(float)) != 0;
    }
    free(out);
    return (void *)(intptr_t)(bad != 0 || out == NULL);
}

static void test_threads(void) {
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) {
        int64_t D = 16 + 24 * t, S = 40 + t;
        thread_ref[t] = (float *)malloc((size_t)(S * D) * sizeof(float));
        CHECK(thread_ref[t] != NULL && fastpe_fill_f32(thread_ref[t], S, D, D, 1e4, 0,
                                                       FASTPE_LAYOUT_INTERLEAVED, 1) == FASTPE_OK,
              "reference %d", t);
    }
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "thread %d", t);
    for (int t = 0; t < NT; t++) {
        void *res = NULL;
        pthread_join(th[t], &res);
        CHECK(res == NULL, "thread %d: a fill differed from its reference", t);
        free(thread_ref[t]);
    }
}
#endif

/* Multi-axis handles: the constructor's refusals, the sections' axes, each entry
 * point's codes with nothing written, and the bits: a multi-axis cache equals,
 * column by column, the plain cache of that column's frequency at its axis's
 * positions (the Python side compares both with fastpe.rope_cache). */
static void test_rope_axes(void) {
    static const double w[4] = {1.0, 0.5, 0.25, 0.125};
    static const int32_t ax[4] = {0, 0, 1, 2};
    static const int32_t bad_ax[4] = {0, 0, 3, 2};
    static const int64_t sec[3] = {2, 1, 1}, sec_bad[3] = {2, 1, 2};
    int64_t pos[5 * 3], col[5];
    int32_t got[4];
    double *d = (double *)buf;
    double c1[5 * 2], s1[5 * 2];
    fastpe_rope *h, *p1;

    CHECK(fastpe_rope_from_axes(w, 4, bad_ax, 3, 1.0) == NULL, "an axis out of range");
    CHECK(fastpe_rope_from_axes(w, 4, NULL, 3, 1.0) == NULL, "axis NULL");
    CHECK(fastpe_rope_from_axes(w, 4, ax, 0, 1.0) == NULL, "n_axes 0");
    CHECK(fastpe_rope_from_axes(w, 4, ax, 65, 1.0) == NULL, "n_axes 65");
    CHECK(fastpe_rope_from_axes(w, 4, ax, 3, 0.0) == NULL, "attention_factor 0");
    CHECK(fastpe_rope_section_axes(sec, 3, FASTPE_SECTIONS_CONTIGUOUS, got, 4) == FASTPE_OK &&
              memcmp(got, ax, sizeof(ax)) == 0,
          "contiguous sections");
    CHECK(fastpe_rope_section_axes(sec_bad, 3, FASTPE_SECTIONS_CONTIGUOUS, got, 4) == FASTPE_ESIZE,
          "sections that do not sum to nf");
    CHECK(fastpe_rope_section_axes(sec, 3, 7, got, 4) == FASTPE_EINVAL, "an unknown layout");
    h = fastpe_rope_from_axes(w, 4, ax, 3, 1.0);
    CHECK(h != NULL && fastpe_rope_n_axes(h) == 3 && fastpe_rope_rotary_dim(h) == 8, "handle");
    if (h == NULL)
        return;
    for (int i = 0; i < 15; i++)
        pos[i] = (int64_t)(i * 7919) % 1000 - 300;
    arm();
    expect(fastpe_rope_cache_axes_f64(h, d, d + 64, 5, 8, NULL, FASTPE_LAYOUT_SPLIT, 0),
           FASTPE_ENULL, "cache_axes positions NULL");
    expect(fastpe_rope_cache_axes_f64(h, d, d + 4, 5, 8, pos, FASTPE_LAYOUT_SPLIT, 0),
           FASTPE_EOVERLAP, "cache_axes cos and sin overlap");
    expect(fastpe_rope_cache_f64(h, d, d + 64, 5, 8, NULL, 0, FASTPE_LAYOUT_SPLIT, 0),
           FASTPE_EINVAL, "a multi-axis handle at a one-axis entry point");
    expect(fastpe_rope_apply_axes_f64(h, d, 1, 5, 1, 40, 8, 8, NULL, FASTPE_LAYOUT_SPLIT, 0),
           FASTPE_ENULL, "apply_axes positions NULL");
    pos[14] = (int64_t)1 << 62;
    expect(fastpe_rope_apply_axes_f64(h, d, 1, 5, 1, 40, 8, 8, pos, FASTPE_LAYOUT_SPLIT, 0),
           FASTPE_ERANGE, "apply_axes position beyond the exact range");
    pos[14] = 11;
    CHECK(fastpe_rope_cache_axes_f64(h, d, d + 64, 5, 8, pos, FASTPE_LAYOUT_SPLIT, 1) == FASTPE_OK,
          "cache_axes");
    for (int i = 0; i < 4; i++) {
        p1 = fastpe_rope_from_frequencies(w + i, 1, 1.0);
        for (int t = 0; t < 5; t++)
            col[t] = pos[t * 3 + ax[i]];
        CHECK(p1 != NULL &&
                  fastpe_rope_cache_f64(p1, c1, s1, 5, 2, col, 0, FASTPE_LAYOUT_SPLIT, 1) == 0,
              "plain cache");
        for (int t = 0; t < 5; t++) {
            CHECK(memcmp(&d[t * 8 + i], &c1[t * 2], 8) == 0 &&
                      memcmp(&d[64 + t * 8 + i], &s1[t * 2], 8) == 0,
                  "frequency %d, token %d: the plain cache's bits", i, t);
        }
        fastpe_rope_free(p1);
    }
    fastpe_rope_free(h);
}

int main(int argc, char **argv) {
    int all = argc < 2;
    for (int i = 1; i <= argc || all; i++) {
        const char *what = all ? NULL : (i < argc ? argv[i] : NULL);
        if (!all && what == NULL)
            break;
        if (all || strcmp(what, "errors") == 0)
            test_errors();
        if (all || strcmp(what, "specs") == 0)
            test_specs();
        if (all || strcmp(what, "rope") == 0) {
            test_rope();
            test_rope_axes();
        }
        if (all || strcmp(what, "rules") == 0)
            test_rules();
        if (all || strcmp(what, "poll") == 0)
            test_poll();
#if !defined(_WIN32)
        if (all || strcmp(what, "fork") == 0)
            test_fork();
        if (all || strcmp(what, "threads") == 0)
            test_threads();
#endif
        if (all)
            break;
    }
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("fastpe_test_api: all checks passed\n");
    return 0;
}
