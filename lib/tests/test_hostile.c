/*
 * The library under hostile use from C: outputs untouched on error, errno left
 * as the caller set it, arguments at the ends of int64 (run under UBSan by
 * tools/test_clib.sh, where any undefined behaviour aborts), RoPE layouts whose
 * rows interleave without overlapping, calls through freed handles, and fork()
 * while another thread is inside the library.  Each part runs in its own
 * process (ctest), so "errno" sees the library's very first call.
 *     fastpe_test_hostile preset|errno|limits|layouts|handles|rounding|forks
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <fastpe/fastpe.h>

#include "check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

#define CODE(got, want, what)                                                                      \
    do {                                                                                           \
        int got_ = (got);                                                                          \
        CHECK(got_ == (want), "%s: got %d (%s), want %d", what, got_, fastpe_strerror(got_),       \
              (int)(want));                                                                        \
    } while (0)

static const int IL = FASTPE_LAYOUT_INTERLEAVED, SP = FASTPE_LAYOUT_SPLIT;

/* An unknown preset name is an error, and an error writes nothing. */
static void test_preset(void) {
    fastpe_knobs k, before;
    memset(&k, 0xAB, sizeof(k));
    before = k;
    CODE(fastpe_knobs_preset("bogus", &k), FASTPE_EINVAL, "unknown preset");
    CHECK(memcmp(&k, &before, sizeof(k)) == 0, "an unknown preset modified the knobs");
    CODE(fastpe_knobs_preset(NULL, &k), FASTPE_ENULL, "NULL name");
    CHECK(memcmp(&k, &before, sizeof(k)) == 0, "a NULL name modified the knobs");
    CODE(fastpe_knobs_preset("fairseq", &k), FASTPE_OK, "fairseq");
    CHECK(k.size == sizeof(k) && k.has_padding_idx == 1 && k.padding_idx == 1, "fairseq's knobs");
}

/* errno is the caller's: neither the first call (start-up probes of files that
 * may not exist) nor later ones (the idle-core sampling) change it. */
static void test_errno(void) {
    enum { SENTINEL = 4242 };
    static float out[64 * 1024];
    static const double w[2] = {1.0, 0.01};
    errno = SENTINEL;
    CODE(fastpe_fill_f32(out, 4, 16, 16, 1e4, 0, IL, 1), FASTPE_OK, "first fill");
    CHECK(errno == SENTINEL, "the first call changed errno to %d (%s)", errno, strerror(errno));
    for (int round = 0; round < 3; round++) {
        errno = SENTINEL;
        /* a parallel fill (the team's first start) and a sample of idle cores */
        CODE(fastpe_fill_f32(out, 256, 256, 256, 1e4, 0, IL, 2), FASTPE_OK, "parallel fill");
        CODE(fastpe_fill_f32(out, 4, 16, 15, 1e4, 0, IL, 0), FASTPE_ESTRIDE, "an error");
        fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
        CHECK(h != NULL, "rope handle");
        CODE(fastpe_rope_apply_f32(h, out, 2, 64, 4, 64 * 16, 16, 4, NULL, 0, SP, 0), FASTPE_OK,
             "rope apply");
        fastpe_rope_free(h);
        CHECK(errno == SENTINEL, "round %d changed errno to %d (%s)", round, errno,
              strerror(errno));
#if !defined(_WIN32)
        /* past the sampling window (100 ms): the next default team reads /proc again */
        struct timespec ts = {0, 120 * 1000 * 1000};
        nanosleep(&ts, NULL);
#endif
    }
}

/* Arguments at the ends of int64.  The codes are the documented ones; under
 * UBSan (tools/test_clib.sh) no check may overflow on the way there. */
static void test_limits(void) {
    static float x[64], pristine[64];
    static const double w[2] = {1.0, 0.01};
    fastpe_spec *s = fastpe_spec_from_name("vaswani", 8);
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
    int32_t axis[2] = {0, 1};
    fastpe_rope *ha = fastpe_rope_from_axes(w, 2, axis, 2, 1.0);
    int64_t pos2[8] = {3, 5, 4, 6, 5, 7, 6, 8}; /* (token, axis) pairs */
    CHECK(s != NULL && h != NULL && ha != NULL, "handles");
    if (s == NULL || h == NULL || ha == NULL)
        return;
    for (int i = 0; i < 64; i++)
        x[i] = pristine[i] = (float)i;
#define UNTOUCHED(what) CHECK(memcmp(x, pristine, sizeof(x)) == 0, "%s: x was modified", what)

    /* nseq * seq_len beyond int64 */
    CODE(fastpe_spec_add_f32(s, x, INT64_MAX, 49, 8, 0, 1.0, 1), FASTPE_ESIZE,
         "spec add, nseq max");
    /* (sizes before strides, as the table fills: one check) */
    CODE(fastpe_spec_add_f32(s, x, INT64_MAX, 49, 0, 0, 1.0, 1), FASTPE_ESIZE,
         "spec add, nseq max, stride 0");
    CODE(fastpe_add_f32(x, INT64_MAX, 49, 8, 8, 1e4, 0, 1.0, IL, 1), FASTPE_ESIZE, "add, nseq max");
    /* rows whose offsets would leave int64 (row * row_stride): no buffer is that large */
    CODE(fastpe_fill_f32(x, 3, 8, INT64_MAX / 2, 1e4, 0, IL, 1), FASTPE_ESTRIDE,
         "fill, a row stride beyond memory");
    CODE(fastpe_add_f32(x, 2, 2, 8, INT64_MAX / 3, 1e4, 0, 1.0, IL, 1), FASTPE_ESTRIDE,
         "add, a row stride beyond memory");
    CODE(fastpe_spec_fill_f32(s, x, 3, INT64_MAX / 2, 0, 1), FASTPE_ESTRIDE,
         "spec fill, a row stride beyond memory");
    CODE(fastpe_fill_positions_f32(x, 2, 8, INT64_MAX, (const double[]){1.0, 2.0}, 1e4, IL, 1),
         FASTPE_ESTRIDE, "positions, a row stride beyond memory");
    UNTOUCHED("sizes beyond int64");

    /* one row: its stride is never used, whatever it is */
    CODE(fastpe_add_f32(x, 1, 1, 8, -1, 1e4, 3, 0.5, IL, 1), FASTPE_OK, "one-row add, stride -1");
    CODE(fastpe_add_f32(x, 1, 1, 8, INT64_MIN, 1e4, 3, 0.5, IL, 1), FASTPE_OK,
         "one-row add, stride INT64_MIN");
    CODE(fastpe_spec_add_f32(s, x, 1, 1, INT64_MIN, 3, 0.5, 1), FASTPE_OK,
         "one-row spec add, stride INT64_MIN");
    CODE(fastpe_fill_positions_f32(x, 1, 8, INT64_MIN, (const double[]){2.0}, 1e4, IL, 1),
         FASTPE_OK, "one-row positions, stride INT64_MIN");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 1, INT64_MIN, NULL, 0, SP, 1), FASTPE_OK,
         "one-row cache, stride INT64_MIN");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 1, INT64_MAX, NULL, 0, SP, 1), FASTPE_OK,
         "one-row cache, stride INT64_MAX");
    /* unit axes of a rotation: any stride, either sign */
    CODE(fastpe_rope_apply_f32(h, x, 1, 2, 1, INT64_MIN, 8, INT64_MIN, NULL, 0, SP, 1), FASTPE_OK,
         "apply, unit axes at INT64_MIN");
    CODE(fastpe_rope_apply_f32(h, x, 1, 1, 1, INT64_MIN, INT64_MIN, INT64_MAX, NULL, 0, SP, 1),
         FASTPE_OK, "apply, one row, extreme strides");
    CODE(fastpe_rope_apply_axes_f32(ha, x, 1, 2, 1, INT64_MIN, 8, INT64_MIN, pos2, SP, 1),
         FASTPE_OK, "apply_axes, unit axes at INT64_MIN");

    memcpy(pristine, x, sizeof(x));
    /* rows whose span is beyond any address space */
    CODE(fastpe_rope_apply_f32(h, x, 2, 2, 1, INT64_MIN, 8, 4, NULL, 0, SP, 1), FASTPE_ESTRIDE,
         "apply, batch stride INT64_MIN");
    CODE(fastpe_rope_apply_f32(h, x, 3, 3, 3, INT64_MAX / 2, INT64_MAX / 3, 4, NULL, 0, SP, 1),
         FASTPE_ESTRIDE, "apply, strides whose span overflows");
    CODE(fastpe_rope_apply_axes_f32(ha, x, 3, 3, 3, INT64_MAX / 2, INT64_MAX / 3, 4, NULL, SP, 1),
         FASTPE_ESTRIDE, "apply_axes, strides whose span overflows");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 3, INT64_MAX / 2, NULL, 0, SP, 1), FASTPE_ESTRIDE,
         "cache, a row stride beyond memory");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 2, INT64_MIN / 2, NULL, 0, SP, 1), FASTPE_ESTRIDE,
         "cache, a negative row stride");
    /* huge dimensions with no buffer: the sizes are checked first, without overflow */
    CODE(
        fastpe_rope_apply_axes_f32(ha, NULL, INT64_MAX, INT64_MAX, INT64_MAX, 1, 1, 1, NULL, SP, 1),
        FASTPE_ENULL, "apply_axes, huge sizes, x NULL");
    CODE(fastpe_rope_apply_axes_f32(ha, x, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                                    INT64_MAX, pos2, SP, 1),
         FASTPE_ESIZE, "apply_axes, huge sizes");
    CODE(fastpe_rope_apply_f32(h, x, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MIN, INT64_MIN,
                               INT64_MIN, NULL, 0, SP, 1),
         FASTPE_ESIZE, "apply, huge sizes");
    UNTOUCHED("refused rotations");
#undef UNTOUCHED
    fastpe_spec_free(s);
    fastpe_rope_free(h);
    fastpe_rope_free(ha);
}

/* Rows that interleave without sharing an element are rotated; rows that share
 * one are refused.  rotary_dim 4, 3 positions x 2 heads: rows at 0, 8, 16 and
 * 12, 20, 28 (stride_seq 8, stride_head 12). */
static void test_layouts(void) {
    static const double w[2] = {1.0, 0.01};
    float x[40], ref[40], pristine[40];
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
    int32_t axis[2] = {0, 0};
    fastpe_rope *ha = fastpe_rope_from_axes(w, 2, axis, 1, 1.0);
    int64_t pos[3] = {7, 8, 9};
    CHECK(h != NULL && ha != NULL, "handles");
    if (h == NULL || ha == NULL)
        return;
    for (int i = 0; i < 40; i++)
        x[i] = ref[i] = pristine[i] = (float)(i + 1) / 7.0f;
    /* the reference: each row alone */
    for (int s = 0; s < 3; s++) {
        for (int hd = 0; hd < 2; hd++)
            CODE(fastpe_rope_apply_f32(h, ref + 8 * s + 12 * hd, 1, 1, 1, 0, 0, 0, NULL, 7 + s, SP,
                                       1),
                 FASTPE_OK, "one row");
    }
    for (int nt = 1; nt <= 3; nt += 2) {
        memcpy(x, pristine, sizeof(x));
        CODE(fastpe_rope_apply_f32(h, x, 1, 3, 2, 0, 8, 12, NULL, 7, SP, nt), FASTPE_OK,
             "disjoint interleaved rows");
        CHECK(memcmp(x, ref, sizeof(x)) == 0, "disjoint rows (%d threads): not each row's bits",
              nt);
        memcpy(x, pristine, sizeof(x));
        CODE(fastpe_rope_apply_axes_f32(ha, x, 1, 3, 2, 0, 8, 12, pos, SP, nt), FASTPE_OK,
             "disjoint interleaved rows, axes");
        CHECK(memcmp(x, ref, sizeof(x)) == 0,
              "disjoint rows, axes (%d threads): not each row's bits", nt);
        /* the same rows, strides negated (rows reached backwards from the last one) */
        memcpy(x, pristine, sizeof(x));
        CODE(fastpe_rope_apply_f32(h, x + 28, 1, 3, 2, 0, -8, -12, NULL, 7, SP, nt), FASTPE_OK,
             "disjoint rows, negative strides");
    }
    /* three axes, none nested: a second sequence 40 elements on */
    {
        float x3[80], ref3[80];
        for (int i = 0; i < 80; i++)
            x3[i] = ref3[i] = (float)(i + 3) / 11.0f;
        for (int b = 0; b < 2; b++)
            for (int sq = 0; sq < 3; sq++)
                for (int hd = 0; hd < 2; hd++)
                    CODE(fastpe_rope_apply_f32(h, ref3 + 40 * b + 8 * sq + 12 * hd, 1, 1, 1, 0, 0,
                                               0, NULL, 7 + sq, SP, 1),
                         FASTPE_OK, "one row");
        CODE(fastpe_rope_apply_f32(h, x3, 2, 3, 2, 40, 8, 12, NULL, 7, SP, 3), FASTPE_OK,
             "three interleaved axes");
        CHECK(memcmp(x3, ref3, sizeof(x3)) == 0, "three interleaved axes: not each row's bits");
        /* batch 12 and heads 13 apart: rows 12..15 and 13..16 meet */
        CODE(fastpe_rope_apply_f32(h, x3, 2, 3, 2, 12, 8, 13, NULL, 7, SP, 1), FASTPE_ESTRIDE,
             "two axes whose rows meet");
    }
    memcpy(x, pristine, sizeof(x));
    /* rows at 0, 8, 16 and 10, 18, 26: rows 8..11 and 10..13 share two elements */
    CODE(fastpe_rope_apply_f32(h, x, 1, 3, 2, 0, 8, 10, NULL, 7, SP, 1), FASTPE_ESTRIDE,
         "overlapping rows");
    CODE(fastpe_rope_apply_axes_f32(ha, x, 1, 3, 2, 0, 8, 10, pos, SP, 1), FASTPE_ESTRIDE,
         "overlapping rows, axes");
    /* a row stride below the width, and two axes reaching the same row */
    CODE(fastpe_rope_apply_f32(h, x, 2, 2, 2, 3, 8, 13, NULL, 7, SP, 1), FASTPE_ESTRIDE,
         "batch stride below the row width");
    CODE(fastpe_rope_apply_f32(h, x, 1, 2, 2, 0, 4, 4, NULL, 7, SP, 1), FASTPE_ESTRIDE,
         "two axes on the same rows");
    CHECK(memcmp(x, pristine, sizeof(x)) == 0, "a refused layout modified x");
    fastpe_rope_free(h);
    fastpe_rope_free(ha);
}

/* A freed handle: calls through the stale pointer return FASTPE_EHANDLE (under
 * ASan: without reading freed memory), a second free does nothing.  Once a new
 * handle has been given the same memory the stale pointer designates it, as
 * with free(): that case is the caller's error and is not tested. */
/* The detail of the last failure names `argument` with `value` (NaN: any). */
static void detail_names(const char *argument, double value, const char *what) {
    fastpe_error e;
    fastpe_last_error(&e);
    CHECK(e.argument != NULL && strcmp(e.argument, argument) == 0, "%s: detail names %s, want %s",
          what, e.argument != NULL ? e.argument : "(null)", argument);
    CHECK(isnan(value) || e.value == value, "%s: detail value %g, want %g", what, e.value, value);
}

/* The rounding setters: values outside FASTPE_ROUND_*, NULL and freed handles
 * are refused with the handle left as it was; a handle set to correct rounding
 * is refused by the calls that cannot honour it (adds, rotations), before
 * anything is written. */
static void test_rounding_setters(void) {
    static const double w[2] = {1.0, 0.01};
    static const int bad[4] = {-1, 2, INT32_MAX, INT32_MIN};
    float x[64], pristine[64];
    double y[64], pos[2] = {1.0, 2.0};
    for (int i = 0; i < 64; i++)
        x[i] = pristine[i] = (float)i;
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
    fastpe_spec *s = fastpe_spec_from_name("vaswani", 8);
    CHECK(h != NULL && s != NULL, "handles");
    if (h == NULL || s == NULL)
        return;
    for (int i = 0; i < 4; i++) {
        CODE(fastpe_spec_set_rounding(s, bad[i]), FASTPE_EINVAL, "spec rounding out of range");
        detail_names("rounding", (double)bad[i], "spec rounding out of range");
        CODE(fastpe_rope_set_rounding(h, bad[i]), FASTPE_EINVAL, "rope rounding out of range");
        detail_names("rounding", (double)bad[i], "rope rounding out of range");
    }
    /* (a refused value left the default: a float32 fill still works) */
    CODE(fastpe_spec_fill_f32(s, x, 2, 8, 0, 1), FASTPE_OK, "spec fill after refused settings");
    for (int i = 0; i < 64; i++)
        x[i] = pristine[i];
    CODE(fastpe_spec_set_rounding(NULL, FASTPE_ROUND_CORRECT), FASTPE_ENULL, "spec NULL");
    detail_names("spec", NAN, "spec NULL");
    CODE(fastpe_rope_set_rounding(NULL, FASTPE_ROUND_CORRECT), FASTPE_ENULL, "rope NULL");
    detail_names("rope", NAN, "rope NULL");
    /* correct rounding: the tables, adds, caches and one-axis rotations of every
       type honour it (the multi-axis rotations' refusal: test_refusals.c) */
    CODE(fastpe_spec_set_rounding(s, FASTPE_ROUND_CORRECT), FASTPE_OK, "spec correct");
    CODE(fastpe_rope_set_rounding(h, FASTPE_ROUND_CORRECT), FASTPE_OK, "rope correct");
    CODE(fastpe_spec_add_f32(s, x, 1, 2, 8, 0, 1.0, 1), FASTPE_OK, "correct spec, add");
    for (int i = 0; i < 64; i++)
        x[i] = pristine[i];
    CODE(fastpe_spec_fill_f32(s, x, 2, 8, 0, 1), FASTPE_OK, "correct spec, float32 fill");
    CODE(fastpe_spec_fill_positions_f32(s, x, 2, 8, pos, 1), FASTPE_OK,
         "correct spec, float32 positions");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 2, 4, NULL, 0, SP, 1), FASTPE_OK,
         "correct rope, float32 cache");
    CODE(fastpe_rope_apply_f32(h, x, 1, 2, 1, 0, 8, 0, NULL, 0, SP, 1), FASTPE_OK,
         "correct rope, rotation");
    CODE(fastpe_spec_fill_f64(s, y, 2, 8, 0, 1), FASTPE_OK, "correct spec, float64 fill");
    /* freed handles: refused, nothing written through them */
    fastpe_rope_free(h);
    fastpe_spec_free(s);
    CODE(fastpe_spec_set_rounding(s, FASTPE_ROUND_DEFAULT), FASTPE_EHANDLE, "spec freed");
    detail_names("spec", NAN, "spec freed");
    CODE(fastpe_rope_set_rounding(h, FASTPE_ROUND_DEFAULT), FASTPE_EHANDLE, "rope freed");
    detail_names("rope", NAN, "rope freed");
}

static void test_handles(void) {
    static const double w[2] = {1.0, 0.01};
    float x[64], pristine[64];
    int64_t pos[2] = {1, 2};
    int32_t axis[2] = {0, 1};
    for (int i = 0; i < 64; i++)
        x[i] = pristine[i] = (float)i;
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 2, 1.0);
    fastpe_rope *ha = fastpe_rope_from_axes(w, 2, axis, 2, 1.0);
    fastpe_spec *s = fastpe_spec_from_name("vaswani", 8);
    CHECK(h != NULL && ha != NULL && s != NULL, "handles");
    if (h == NULL || ha == NULL || s == NULL)
        return;
    fastpe_rope_free(h);
    fastpe_rope_free(ha);
    fastpe_spec_free(s);
    CODE(fastpe_rope_apply_f32(h, x, 1, 2, 1, 0, 8, 0, NULL, 0, SP, 1), FASTPE_EHANDLE,
         "apply through a freed handle");
    CODE(fastpe_rope_cache_f32(h, x, x + 8, 1, 16, NULL, 0, SP, 1), FASTPE_EHANDLE,
         "cache through a freed handle");
    CODE(fastpe_rope_apply_axes_f32(ha, x, 1, 1, 1, 0, 0, 0, pos, SP, 1), FASTPE_EHANDLE,
         "apply_axes through a freed handle");
    CODE(fastpe_spec_fill_f32(s, x, 2, 8, 0, 1), FASTPE_EHANDLE,
         "spec fill through a freed handle");
    CODE(fastpe_spec_add_f32(s, x, 1, 2, 8, 0, 1.0, 1), FASTPE_EHANDLE,
         "spec add through a freed handle");
    CHECK(fastpe_rope_rotary_dim(h) == -1 && fastpe_rope_n_axes(ha) == -1 &&
              fastpe_spec_d_model(s) == -1,
          "the queries of freed handles");
    CHECK(memcmp(x, pristine, sizeof(x)) == 0, "a call through a freed handle wrote");
    fastpe_rope_free(h); /* a second free: nothing */
    fastpe_rope_free(ha);
    fastpe_spec_free(s);
    /* new handles work (they may reuse the freed memory) */
    h = fastpe_rope_from_frequencies(w, 2, 1.0);
    s = fastpe_spec_from_name("vaswani", 8);
    CHECK(h != NULL && fastpe_rope_rotary_dim(h) == 4, "a new rope handle");
    CHECK(s != NULL && fastpe_spec_d_model(s) == 8, "a new spec handle");
    fastpe_rope_free(h);
    fastpe_spec_free(s);
}

#if !defined(_WIN32)
/* fork() while another thread is inside the library (holding the plan cache's
 * lock at random moments): every child's fill must finish. */
static volatile int busy_stop;

static void *busy(void *arg) {
    float *out = (float *)malloc(64 * 200 * sizeof(float));
    (void)arg;
    for (unsigned r = 0; !busy_stop && out != NULL; r++) {
        /* changing widths: plans are built, inserted and evicted all the time */
        int64_t d = 8 + 2 * (int64_t)(r % 97);
        if (fastpe_fill_f32(out, 64, d, d, 1e4 + (r % 5), 0, IL, 1) != FASTPE_OK)
            break;
    }
    free(out);
    return NULL;
}

static void test_forks(void) {
    /* FASTPE_TEST_FORKS: fewer under ASan, where each fork of its shadow memory is slow */
    const char *env = getenv("FASTPE_TEST_FORKS");
    const int FORKS = env != NULL && atoi(env) > 0 ? atoi(env) : 600;
    static float ref[16 * 40], got[16 * 40];
    pthread_t th;
    int hung = 0, bad = 0;
    CODE(fastpe_fill_f32(ref, 16, 40, 40, 1e4, 5, IL, 1), FASTPE_OK, "reference");
    busy_stop = 0;
    CHECK(pthread_create(&th, NULL, busy, NULL) == 0, "busy thread");
    for (int i = 0; i < FORKS; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5); /* a hung child is a failure (SIGALRM), not a stuck test */
            int err = fastpe_fill_f32(got, 16, 40, 40, 1e4, 5, IL, 0);
            _exit(err == FASTPE_OK && memcmp(got, ref, sizeof(ref)) == 0 ? 0 : 3);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) {
            bad++;
            continue;
        }
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
            hung++;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            bad++;
    }
    busy_stop = 1;
    pthread_join(th, NULL);
    CHECK(hung == 0 && bad == 0, "%d of %d children hung, %d failed", hung, FORKS, bad);
}
#endif

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr,
                "usage: fastpe_test_hostile preset|errno|limits|layouts|handles|rounding|forks\n");
        return 2;
    }
    if (strcmp(argv[1], "preset") == 0)
        test_preset();
    else if (strcmp(argv[1], "errno") == 0)
        test_errno();
    else if (strcmp(argv[1], "limits") == 0)
        test_limits();
    else if (strcmp(argv[1], "layouts") == 0)
        test_layouts();
    else if (strcmp(argv[1], "handles") == 0)
        test_handles();
    else if (strcmp(argv[1], "rounding") == 0)
        test_rounding_setters();
#if !defined(_WIN32)
    else if (strcmp(argv[1], "forks") == 0)
        test_forks();
#endif
    else {
        fprintf(stderr, "unknown part %s\n", argv[1]);
        return 2;
    }
    if (failures) {
        fprintf(stderr, "%s: %d checks failed\n", argv[1], failures);
        return 1;
    }
    printf("fastpe_test_hostile %s: all checks passed\n", argv[1]);
    return 0;
}
