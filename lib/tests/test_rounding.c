/*
 * Correct rounding through the C API (fastpe_spec_set_rounding,
 * fastpe_rope_set_rounding):
 *     fastpe_test_rounding check          the hard rows against their exact
 *                                         values, the refusals, the default
 *                                         left as it was
 *     fastpe_test_rounding digests [FILE] one digest per case of the sweep
 *                                         below, printed, or compared with FILE
 *
 * The hard rows are the positions 355, 103993 and 833719 (numerators of
 * convergents of pi: sin(k) is within 1e-5 of 0 there, where a fast evaluation
 * loses most of its relative accuracy).  Their values below were computed with
 * mpmath at 80 digits and rounded once to nearest; tests/test_clib_rounding.py
 * recomputes them from this file with mpmath, and computes the digests' cases
 * with fastpe.sinusoidal / sinusoidal_at / rope_cache(..., correctly_rounded=True),
 * so that the committed lib/tests/digests_rounding.txt ties the two.  Each case
 * is filled with 1, 2 and 3 threads, which must agree bitwise.
 *
 * This file includes no Python header: it must build and run without Python.
 */
#ifdef Py_PYTHON_H
#error "the C library's tests must not include Python.h"
#endif
#include <fastpe/fastpe.h>

#include "digest.h"

#include "check.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t HARD[3] = {355, 103993, 833719};

/* ---- exact values: begin ----
 * VASWANI[r]: the float64 row of position HARD[r], d_model 8, interleaved
 * (sin, cos of k w_i, w_i = 10000^(-i/4)).  ROPE[a][r]: a RoPE handle of the
 * frequencies {1, 0.125} with attention factor {1, 1.25}[a] at HARD[r]: (a
 * sin(k), a cos(k), a sin(k/8), a cos(k/8)). */
static const double VASWANI[3][8] = {
    {-0x1.f9bd0307d1de3p-16, -0x1.fffffffc18e4cp-1, -0x1.9e37b52d75f81p-1, -0x1.2cf1de72c9139p-1,
     -0x1.96ae0258a35d3p-2, -0x1.d5e3eb29c37a4p-1, 0x1.63eeba8c5e9b3p-2, 0x1.e0133359606d7p-1},
    {-0x1.40efdf1eb8de7p-16, 0x1.fffffffe6da77p-1, 0x1.2cf1fc59942fcp-1, 0x1.9e379f73f4e93p-1,
     -0x1.01306e7e65722p-4, -0x1.fefd5c657193fp-1, -0x1.428bd24a7db97p-2, -0x1.e5efee42be965p-1},
    {0x1.366f4e5709850p-19, -0x1.fffffffffa1e4p-1, 0x1.3c6ee4afe8bddp-2, 0x1.e6f0e39a385adp-1,
     -0x1.1fc9651f52ba5p-1, 0x1.a7771a73a8959p-1, -0x1.dca2a56f7451fp-1, -0x1.75f773840e0a2p-2},
};
static const double ROPE[2][3][4] = {
    {
        {-0x1.f9bd0307d1de3p-16, -0x1.fffffffc18e4cp-1, 0x1.87df1409c137bp-2, 0x1.d9068c90b112bp-1},
        {-0x1.40efdf1eb8de7p-16, 0x1.fffffffe6da77p-1, -0x1.6a0a1f23e2a42p-1, 0x1.6a09adabfbf17p-1},
        {0x1.366f4e5709850p-19, -0x1.fffffffffa1e4p-1, 0x1.d906c0a98b8fep-1, -0x1.87de187e0be85p-2},
    },
    {
        {-0x1.3c1621e4e32aep-15, -0x1.3ffffffd8f8efp+0, 0x1.e9d6d90c3185ap-2, 0x1.27a417da6eabbp+0},
        {-0x1.912bd6e667160p-16, 0x1.3fffffff0488ap+0, -0x1.c48ca6ecdb4d2p-1, 0x1.c48c1916faeddp-1},
        {0x1.840b21eccbe64p-19, -0x1.3ffffffffc52ep+0, 0x1.27a43869f739fp+0, -0x1.e9d59e9d8ee26p-2},
    },
};
/* ---- exact values: end ---- */

static int same(double a, double b) { return memcmp(&a, &b, sizeof(a)) == 0; }

/* the last failure's detail is (code, argument) */
static void detail_is(int got, int code, const char *argument, const char *what) {
    fastpe_error e;
    fastpe_last_error(&e);
    CHECK(got == code, "%s: returned %d, want %d", what, got, code);
    CHECK(e.code == code, "%s: detail code %d, want %d", what, e.code, code);
    CHECK(argument == NULL ? e.argument == NULL
                           : e.argument != NULL && strcmp(e.argument, argument) == 0,
          "%s: detail argument %s, want %s", what, e.argument ? e.argument : "(null)",
          argument ? argument : "(null)");
}

static fastpe_spec *correct_spec(const char *name, int64_t d) {
    fastpe_spec *s = fastpe_spec_from_name(name, d);
    if (s == NULL || fastpe_spec_set_rounding(s, FASTPE_ROUND_CORRECT) != FASTPE_OK) {
        fprintf(stderr, "no correctly rounded %s spec of width %" PRId64 "\n", name, d);
        exit(2);
    }
    return s;
}

/* Whether s adds correctly rounded: x = -(its own float64 rows at positions
 * 2, 3), plus those rows' exact values, leaves each entry's residue P -
 * round(P) rounded once, never 0 (a sine or cosine of a nonzero angle is not a
 * double); a default add of rows equal to them leaves 0. */
static int adds_residues(fastpe_spec *s) {
    double t[16], x[16];
    if (fastpe_spec_fill_f64(s, t, 2, 8, 2, 1) != FASTPE_OK)
        return 0;
    for (int i = 0; i < 16; i++)
        x[i] = -t[i];
    if (fastpe_spec_add_f64(s, x, 1, 2, 8, 2, 1.0, 1) != FASTPE_OK)
        return 0;
    for (int i = 0; i < 16; i++) {
        if (x[i] == 0.0 || fabs(x[i]) > 1.2e-16 * fabs(t[i]))
            return 0;
    }
    return 1;
}

/* ---- check -------------------------------------------------------------------- */

static void check_hard_rows(void) {
    fastpe_spec *s = correct_spec("vaswani", 8);
    double row[8], rows[3][8], pos[3];
    for (int r = 0; r < 3; r++) {
        pos[r] = (double)HARD[r];
        CHECK(fastpe_spec_fill_f64(s, row, 1, 8, HARD[r], 1) == FASTPE_OK, "fill");
        for (int j = 0; j < 8; j++)
            CHECK(same(row[j], VASWANI[r][j]), "spec fill k=%" PRId64 " col %d: %a, exact %a",
                  HARD[r], j, row[j], VASWANI[r][j]);
    }
    CHECK(fastpe_spec_fill_positions_f64(s, &rows[0][0], 3, 8, pos, 2) == FASTPE_OK, "positions");
    /* float32: the exact values rounded once (none of these doubles is a float
       midpoint, so rounding them again is that rounding) */
    {
        float rows32[3][8];
        CHECK(fastpe_spec_fill_positions_f32(s, &rows32[0][0], 3, 8, pos, 2) == FASTPE_OK,
              "positions f32");
        for (int r = 0; r < 3; r++) {
            for (int j = 0; j < 8; j++)
                CHECK(rows32[r][j] == (float)VASWANI[r][j],
                      "positions f32 k=%" PRId64 " col %d: %a, exact %a", HARD[r], j,
                      (double)rows32[r][j], VASWANI[r][j]);
        }
    }
    for (int r = 0; r < 3; r++) {
        for (int j = 0; j < 8; j++)
            CHECK(same(rows[r][j], VASWANI[r][j]), "positions k=%" PRId64 " col %d: %a, exact %a",
                  HARD[r], j, rows[r][j], VASWANI[r][j]);
    }
    fastpe_spec_free(s);

    /* RoPE: both layouts, both attention factors, a plain and a two-axis handle */
    const double w[2] = {1.0, 0.125};
    const int32_t axis[2] = {0, 1};
    for (int a = 0; a < 2; a++) {
        double att = a ? 1.25 : 1.0;
        fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, att);
        fastpe_rope *x = fastpe_rope_from_axes(w, 2, axis, 2, att);
        double cos[3][4], sin[3][4];
        int64_t xy[6];
        CHECK(h != NULL && x != NULL, "RoPE handles");
        if (h == NULL || x == NULL)
            return;
        CHECK(fastpe_rope_set_rounding(h, FASTPE_ROUND_CORRECT) == FASTPE_OK, "set rope");
        CHECK(fastpe_rope_set_rounding(x, FASTPE_ROUND_CORRECT) == FASTPE_OK, "set axes");
        for (int lay = 0; lay < 2; lay++) {
            /* split: (f0, f1, f0, f1); interleaved: (f0, f0, f1, f1) */
            CHECK(fastpe_rope_cache_f64(h, &cos[0][0], &sin[0][0], 3, 4, HARD, 0, lay, 1) ==
                      FASTPE_OK,
                  "rope cache");
            for (int r = 0; r < 3; r++) {
                for (int j = 0; j < 4; j++) {
                    int i = lay == FASTPE_LAYOUT_SPLIT ? j % 2 : j / 2;
                    CHECK(same(sin[r][j], ROPE[a][r][2 * i]) &&
                              same(cos[r][j], ROPE[a][r][2 * i + 1]),
                          "rope cache a=%g k=%" PRId64 " layout %d col %d", att, HARD[r], lay, j);
                }
            }
            /* token r at HARD[r] on both axes (frequency 1 follows axis 0, 1/8
               axis 1): the plain handle's values */
            for (int r = 0; r < 3; r++) {
                xy[2 * r] = HARD[r];
                xy[2 * r + 1] = HARD[r];
            }
            CHECK(fastpe_rope_cache_axes_f64(x, &cos[0][0], &sin[0][0], 3, 4, xy, lay, 2) ==
                      FASTPE_OK,
                  "axes cache");
            for (int r = 0; r < 3; r++) {
                for (int j = 0; j < 4; j++) {
                    int i = lay == FASTPE_LAYOUT_SPLIT ? j % 2 : j / 2;
                    CHECK(same(sin[r][j], ROPE[a][r][2 * i]) &&
                              same(cos[r][j], ROPE[a][r][2 * i + 1]),
                          "axes cache a=%g k=%" PRId64 " layout %d col %d", att, HARD[r], lay, j);
                }
            }
        }
        fastpe_rope_free(h);
        fastpe_rope_free(x);
    }
}

static void check_refusals(void) {
    const double w[2] = {1.0, 0.125};
    const int32_t axis[2] = {0, 1};
    const int64_t pos[2] = {0, 1};
    const double fpos[2] = {0.0, 1.0};
    fastpe_spec *s = correct_spec("fairseq", 8);
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
    fastpe_rope *x = fastpe_rope_from_axes(w, 2, axis, 2, 1.0);
    float f[64];
    uint16_t u[64];
    double d[64], d2[64];
    CHECK(h != NULL && x != NULL, "RoPE handles");
    if (h == NULL || x == NULL)
        return;
    CHECK(fastpe_rope_set_rounding(h, FASTPE_ROUND_CORRECT) == FASTPE_OK, "set rope");
    CHECK(fastpe_rope_set_rounding(x, FASTPE_ROUND_CORRECT) == FASTPE_OK, "set axes");
    for (int i = 0; i < 64; i++)
        d[i] = d2[i] = 7.0;
    /* the tables and caches of every type take the setting */
    CHECK(fastpe_spec_fill_f32(s, f, 2, 8, 0, 1) == FASTPE_OK, "spec_fill_f32");
    CHECK(fastpe_spec_fill_f16(s, u, 2, 8, 0, 1) == FASTPE_OK, "spec_fill_f16");
    CHECK(fastpe_spec_fill_bf16(s, u, 2, 8, 0, 1) == FASTPE_OK, "spec_fill_bf16");
    CHECK(fastpe_spec_fill_positions_f32(s, f, 2, 8, fpos, 1) == FASTPE_OK,
          "spec_fill_positions_f32");
    CHECK(fastpe_rope_cache_f32(h, f, f + 8, 2, 4, pos, 0, 0, 1) == FASTPE_OK, "rope_cache_f32");
    CHECK(fastpe_rope_cache_f16(h, u, u + 8, 2, 4, pos, 0, 0, 1) == FASTPE_OK, "rope_cache_f16");
    CHECK(fastpe_rope_cache_bf16(h, u, u + 8, 2, 4, pos, 0, 0, 1) == FASTPE_OK, "rope_cache_bf16");
    CHECK(adds_residues(s), "spec_add_f64");
    CHECK(fastpe_spec_add_f32(s, f, 1, 2, 8, 0, 1.0, 1) == FASTPE_OK, "spec_add_f32");
    CHECK(fastpe_spec_add_bf16(s, u, 1, 2, 8, 0, 1.0, 1) == FASTPE_OK, "spec_add_bf16");
    detail_is(fastpe_rope_apply_axes_f64(x, d, 1, 1, 1, 4, 4, 4, pos, 0, 1), FASTPE_EINVAL, "rope",
              "rope_apply_axes_f64");
    CHECK(memcmp(d, d2, sizeof(d)) == 0, "a refused call wrote into its buffer");
    /* the rotations take it (their bits: tests/test_rope_apply_rounding.py) */
    CHECK(fastpe_rope_apply_f64(h, d, 1, 2, 1, 8, 4, 4, pos, 0, 0, 1) == FASTPE_OK,
          "rope_apply_f64");
    for (int i = 0; i < 64; i++)
        d[i] = 7.0;
    /* the setters' own arguments */
    detail_is(fastpe_spec_set_rounding(s, 2), FASTPE_EINVAL, "rounding", "rounding 2");
    detail_is(fastpe_spec_set_rounding(s, -1), FASTPE_EINVAL, "rounding", "rounding -1");
    detail_is(fastpe_rope_set_rounding(h, 2), FASTPE_EINVAL, "rounding", "rope rounding 2");
    detail_is(fastpe_spec_set_rounding(NULL, 1), FASTPE_ENULL, "spec", "NULL spec");
    detail_is(fastpe_rope_set_rounding(NULL, 1), FASTPE_ENULL, "rope", "NULL rope");
    /* a refused setting leaves the handle as it was: still correctly rounded */
    CHECK(adds_residues(s), "still correct");
    /* and back to the default, every function takes it again */
    CHECK(fastpe_spec_set_rounding(s, FASTPE_ROUND_DEFAULT) == FASTPE_OK, "reset spec");
    CHECK(fastpe_rope_set_rounding(h, FASTPE_ROUND_DEFAULT) == FASTPE_OK, "reset rope");
    CHECK(fastpe_spec_fill_f32(s, f, 2, 8, 0, 1) == FASTPE_OK, "default spec f32");
    CHECK(fastpe_rope_apply_f64(h, d, 1, 2, 1, 8, 4, 4, pos, 0, 0, 1) == FASTPE_OK,
          "default apply");
    fastpe_spec_free(s);
    fastpe_rope_free(h);
    fastpe_rope_free(x);
    detail_is(fastpe_spec_set_rounding(s, 1), FASTPE_EHANDLE, "spec", "freed spec");
    detail_is(fastpe_rope_set_rounding(h, 1), FASTPE_EHANDLE, "rope", "freed rope");
}

static int stop_never(void *ctx) {
    *(int *)ctx += 1;
    return 0;
}

/* fastpe_fill_poll_ex: FASTPE_ROUND_CORRECT gives a correctly rounded Vaswani
 * spec's rows (tied to fastpe.sinusoidal by the digests) in every dtype, with a
 * poll callback or without (the plan cache's plan and kept low parts, or the
 * fill's own), the hard rows their exact values; FASTPE_ROUND_DEFAULT gives
 * fastpe_fill_poll's. */
static void check_fill_poll(void) {
    enum { S = 70, D = 64 };
    static unsigned char a[S * D * 8], b[S * D * 8];
    static const size_t size[4] = {4, 8, 2, 2};
    fastpe_spec *s = correct_spec("vaswani", D);
    double row[8];
    int calls = 0; /* (a table this small may finish in one chunk: never called) */
    for (int dt = 0; dt < 4; dt++) {
        const int64_t offset = 103960;
        int err;
        switch (dt) {
        case FASTPE_DTYPE_F32:
            err = fastpe_spec_fill_f32(s, (float *)b, S, D, offset, 2);
            break;
        case FASTPE_DTYPE_F64:
            err = fastpe_spec_fill_f64(s, (double *)b, S, D, offset, 2);
            break;
        case FASTPE_DTYPE_F16:
            err = fastpe_spec_fill_f16(s, (uint16_t *)b, S, D, offset, 2);
            break;
        default:
            err = fastpe_spec_fill_bf16(s, (uint16_t *)b, S, D, offset, 2);
        }
        CHECK(err == FASTPE_OK, "spec fill dtype %d", dt);
        for (int polled = 0; polled < 2; polled++) {
            memset(a, 0xAB, sizeof(a));
            CHECK(fastpe_fill_poll_ex(a, dt, S, D, D, 10000.0, offset, FASTPE_LAYOUT_INTERLEAVED,
                                      FASTPE_ROUND_CORRECT, 2, polled ? stop_never : NULL,
                                      &calls) == FASTPE_OK,
                  "fill_poll_ex dtype %d", dt);
            CHECK(memcmp(a, b, (size_t)(S * D) * size[dt]) == 0,
                  "fill_poll_ex dtype %d (poll %d): not the correctly rounded spec's rows", dt,
                  polled);
        }
        /* the default rounding is fastpe_fill_poll */
        CHECK(fastpe_fill_poll(b, dt, S, D, D, 10000.0, offset, FASTPE_LAYOUT_SPLIT, 2, NULL,
                               NULL) == FASTPE_OK,
              "fill_poll");
        CHECK(fastpe_fill_poll_ex(a, dt, S, D, D, 10000.0, offset, FASTPE_LAYOUT_SPLIT,
                                  FASTPE_ROUND_DEFAULT, 2, NULL, NULL) == FASTPE_OK,
              "fill_poll_ex default");
        CHECK(memcmp(a, b, (size_t)(S * D) * size[dt]) == 0,
              "fill_poll_ex's default dtype %d is not fastpe_fill_poll's", dt);
    }
    for (int r = 0; r < 3; r++) {
        CHECK(fastpe_fill_poll_ex(row, FASTPE_DTYPE_F64, 1, 8, 8, 10000.0, HARD[r],
                                  FASTPE_LAYOUT_INTERLEAVED, FASTPE_ROUND_CORRECT, 1, NULL,
                                  NULL) == FASTPE_OK,
              "fill_poll_ex hard row");
        for (int j = 0; j < 8; j++)
            CHECK(same(row[j], VASWANI[r][j]), "fill_poll_ex k=%" PRId64 " col %d: %a, exact %a",
                  HARD[r], j, row[j], VASWANI[r][j]);
    }
    fastpe_spec_free(s);
}

/* The default is the default: a spec left at (or set back to) FASTPE_ROUND_DEFAULT
 * fills fastpe_fill_f64's bits. */
static void check_default(void) {
    enum { S = 40, D = 64 };
    static double a[S * D], b[S * D];
    fastpe_spec *s = fastpe_spec_from_name("vaswani", D);
    CHECK(s != NULL, "spec");
    if (s == NULL)
        return;
    CHECK(fastpe_fill_f64(a, S, D, D, 10000.0, 103970, 0, 1) == FASTPE_OK, "fill");
    CHECK(fastpe_spec_set_rounding(s, FASTPE_ROUND_CORRECT) == FASTPE_OK, "set");
    CHECK(fastpe_spec_set_rounding(s, FASTPE_ROUND_DEFAULT) == FASTPE_OK, "reset");
    CHECK(fastpe_spec_fill_f64(s, b, S, D, 103970, 1) == FASTPE_OK, "spec fill");
    CHECK(memcmp(a, b, sizeof(a)) == 0, "the default spec's rows are not fastpe_fill_f64's");
    fastpe_spec_free(s);
}

/* ---- digests ------------------------------------------------------------------- */

static FILE *expected;
static int lines_seen;

static void emit(const char *line) {
    char want[512];
    lines_seen++;
    if (expected == NULL) {
        fputs(line, stdout);
        return;
    }
    if (fgets(want, sizeof(want), expected) == NULL || strcmp(want, line) != 0) {
        fprintf(stderr, "FAIL digest line %d: got %s", lines_seen, line);
        failures++;
    }
}

/* One case: fill(ctx, buf, nt) with 1, 2 and 3 threads, one line. */
typedef int (*filler)(const void *ctx, double *buf, int nt);

static void one(const char *head, filler fill, const void *ctx, size_t n) {
    double *buf = (double *)malloc(n * sizeof(double) + 8);
    uint64_t hs[3];
    char line[512];
    if (buf == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int nt = 1; nt <= 3; nt++) {
        int err = fill(ctx, buf, nt);
        if (err != FASTPE_OK) {
            fprintf(stderr, "%s: %s\n", head, fastpe_strerror(err));
            exit(2);
        }
        hs[nt - 1] = digest(buf, n * sizeof(double));
    }
    CHECK(hs[0] == hs[1] && hs[0] == hs[2], "thread counts disagree: %s", head);
    snprintf(line, sizeof(line), "%s %016" PRIx64 "\n", head, hs[0]);
    emit(line);
    free(buf);
}

typedef struct {
    fastpe_spec *spec;
    fastpe_rope *rope;
    int64_t S, d, offset, W;
    int layout;
    const int64_t *pos;
    const double *fpos;
} job;

static int fill_spec(const void *c, double *buf, int nt) {
    const job *j = (const job *)c;
    if (j->fpos != NULL)
        return fastpe_spec_fill_positions_f64(j->spec, buf, j->S, j->d, j->fpos, nt);
    return fastpe_spec_fill_f64(j->spec, buf, j->S, j->d, j->offset, nt);
}

/* cos rows, then sin rows */
static int fill_rope(const void *c, double *buf, int nt) {
    const job *j = (const job *)c;
    if (j->pos != NULL && fastpe_rope_n_axes(j->rope) > 1)
        return fastpe_rope_cache_axes_f64(j->rope, buf, buf + j->S * j->W, j->S, j->W, j->pos,
                                          j->layout, nt);
    return fastpe_rope_cache_f64(j->rope, buf, buf + j->S * j->W, j->S, j->W, j->pos, j->offset,
                                 j->layout, nt);
}

/* the frequencies of the RoPE cases: (1 + i/8) 2^-i, exact in any language */
static void frequencies(double *w, int64_t nf) {
    for (int64_t i = 0; i < nf; i++)
        w[i] = ldexp(1.0 + (double)i / 8.0, -(int)i);
}

static void sweep(void) {
    static const char *const CONV[5] = {"vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj"};
    static const int64_t D[3] = {8, 63, 130}, S[2] = {1, 37};
    static const int64_t OFF[4] = {0, -355, 103990, 833700};
    static const char *const LAY[2] = {"interleaved", "split"};
    char head[256];
    job j;
    /* tables: cr_spec conv d S offset; cr_spec_positions conv d S offset (row r
       at offset + 2.5 r - 3) */
    for (int c = 0; c < 5; c++) {
        for (int di = 0; di < 3; di++) {
            if (D[di] % 2 && strcmp(CONV[c], "gptj") == 0)
                continue; /* (odd widths refused) */
            memset(&j, 0, sizeof(j));
            j.spec = correct_spec(CONV[c], D[di]);
            j.d = D[di];
            for (int si = 0; si < 2; si++) {
                for (int oi = 0; oi < 4; oi++) {
                    double fpos[37];
                    j.S = S[si];
                    j.offset = OFF[oi];
                    j.fpos = NULL;
                    snprintf(head, sizeof(head), "cr_spec %s %" PRId64 " %" PRId64 " %" PRId64,
                             CONV[c], j.d, j.S, j.offset);
                    one(head, fill_spec, &j, (size_t)(j.S * j.d));
                    for (int64_t r = 0; r < j.S; r++)
                        fpos[r] = (double)j.offset + 2.5 * (double)r - 3.0;
                    j.fpos = fpos;
                    snprintf(head, sizeof(head),
                             "cr_spec_positions %s %" PRId64 " %" PRId64 " %" PRId64, CONV[c], j.d,
                             j.S, j.offset);
                    one(head, fill_spec, &j, (size_t)(j.S * j.d));
                }
            }
            fastpe_spec_free(j.spec);
        }
    }
    /* RoPE caches: cr_rope layout nf S offset attention (positions offset + s);
       cr_rope_positions layout nf S offset attention (positions[s] = offset + 7919 s
       - 3000); cr_rope_axes layout nf S offset attention (a two-axis handle,
       frequency i on axis i % 2, token s at (offset + 13 s, 5 - 7 s)) */
    static const int64_t NF[2] = {3, 8};
    static const double ATT[2] = {1.0, 1.25};
    for (int lay = 0; lay < 2; lay++) {
        for (int ni = 0; ni < 2; ni++) {
            for (int ai = 0; ai < 2; ai++) {
                for (int oi = 0; oi < 4; oi++) {
                    double w[8];
                    int32_t axis[8];
                    int64_t pos[2 * 37];
                    memset(&j, 0, sizeof(j));
                    frequencies(w, NF[ni]);
                    j.S = 37;
                    j.W = 2 * NF[ni];
                    j.offset = OFF[oi];
                    j.layout = lay;
                    j.rope = fastpe_rope_from_frequencies(w, NF[ni], ATT[ai]);
                    if (j.rope == NULL || fastpe_rope_set_rounding(j.rope, FASTPE_ROUND_CORRECT)) {
                        fprintf(stderr, "no RoPE handle\n");
                        exit(2);
                    }
                    snprintf(head, sizeof(head),
                             "cr_rope %s %" PRId64 " %" PRId64 " %" PRId64 " %g", LAY[lay], NF[ni],
                             j.S, j.offset, ATT[ai]);
                    one(head, fill_rope, &j, (size_t)(2 * j.S * j.W));
                    for (int64_t s = 0; s < j.S; s++)
                        pos[s] = j.offset + 7919 * s - 3000;
                    j.pos = pos;
                    snprintf(head, sizeof(head),
                             "cr_rope_positions %s %" PRId64 " %" PRId64 " %" PRId64 " %g",
                             LAY[lay], NF[ni], j.S, j.offset, ATT[ai]);
                    one(head, fill_rope, &j, (size_t)(2 * j.S * j.W));
                    fastpe_rope_free(j.rope);
                    for (int64_t i = 0; i < NF[ni]; i++)
                        axis[i] = (int32_t)(i % 2);
                    for (int64_t s = 0; s < j.S; s++) {
                        pos[2 * s] = j.offset + 13 * s;
                        pos[2 * s + 1] = 5 - 7 * s;
                    }
                    j.rope = fastpe_rope_from_axes(w, NF[ni], axis, 2, ATT[ai]);
                    if (j.rope == NULL || fastpe_rope_set_rounding(j.rope, FASTPE_ROUND_CORRECT)) {
                        fprintf(stderr, "no multi-axis RoPE handle\n");
                        exit(2);
                    }
                    snprintf(head, sizeof(head),
                             "cr_rope_axes %s %" PRId64 " %" PRId64 " %" PRId64 " %g", LAY[lay],
                             NF[ni], j.S, j.offset, ATT[ai]);
                    one(head, fill_rope, &j, (size_t)(2 * j.S * j.W));
                    fastpe_rope_free(j.rope);
                }
            }
        }
    }
    /* a rule's handle with its own attention factor: cr_rope_rule_yarn layout
       head_dim S offset bits (DeepSeek's yarn, as digest.c's) */
    for (int lay = 0; lay < 2; lay++) {
        for (int bits = 32; bits <= 64; bits += 32) {
            fastpe_rope_params p;
            fastpe_rope_params_init(&p);
            p.rope_type = FASTPE_ROPE_YARN;
            p.precision = bits == 64 ? FASTPE_PRECISION_FLOAT64 : FASTPE_PRECISION_FLOAT32;
            p.factor = 40.0;
            p.original_max_position_embeddings = 4096;
            p.mscale = 0.707;
            p.mscale_all_dim = 1.0;
            memset(&j, 0, sizeof(j));
            j.S = 5;
            j.offset = 103990;
            j.layout = lay;
            if (fastpe_rope_from_params(&p, 64, &j.rope) != FASTPE_OK ||
                fastpe_rope_set_rounding(j.rope, FASTPE_ROUND_CORRECT) != FASTPE_OK) {
                fprintf(stderr, "no yarn handle\n");
                exit(2);
            }
            j.W = fastpe_rope_rotary_dim(j.rope);
            snprintf(head, sizeof(head), "cr_rope_rule_yarn %s 64 %" PRId64 " %" PRId64 " %d",
                     LAY[lay], j.S, j.offset, bits);
            one(head, fill_rope, &j, (size_t)(2 * j.S * j.W));
            fastpe_rope_free(j.rope);
        }
    }
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "check") == 0) {
        check_hard_rows();
        check_refusals();
        check_default();
        check_fill_poll();
    } else if (argc >= 2 && strcmp(argv[1], "digests") == 0) {
        if (argc >= 3) {
            expected = fopen(argv[2], "r");
            if (expected == NULL) {
                fprintf(stderr, "cannot open %s\n", argv[2]);
                return 2;
            }
        }
        sweep();
        if (expected != NULL) {
            char extra[512];
            if (fgets(extra, sizeof(extra), expected) != NULL) {
                fprintf(stderr, "FAIL: the file has more lines than the sweep (%d)\n", lines_seen);
                failures++;
            }
            fclose(expected);
        }
    } else {
        fprintf(stderr, "usage: fastpe_test_rounding check | digests [FILE]\n");
        return 2;
    }
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
