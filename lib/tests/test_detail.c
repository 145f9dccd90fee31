/*
 * The error detail (fastpe_last_error): each failing table call, RoPE rule,
 * RoPE handle call and convention's spec names its argument, the element and
 * the bound; a successful call leaves the last failure readable; two threads
 * failing at once each read their own.
 *     fastpe_test_detail
 */
#if !defined(_WIN32) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <fastpe/fastpe.h>

#include "check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#if defined(_WIN32)
#include <process.h>
#include <windows.h>
#else
#include <pthread.h>
#endif

static const char *name(const char *s) { return s != NULL ? s : "(null)"; }

/* the detail is (code, argument, index) and value/limit as given (NaN: any) */
static int detail_is(int got, int code, const char *argument, int64_t index, double value,
                     double limit, const char *what) {
    fastpe_error e;
    int n = failures;
    int ret = fastpe_last_error(&e);
    CHECK(got == code, "%s: returned %d, want %d", what, got, code);
    CHECK(ret == code && e.code == code, "%s: detail code %d, want %d", what, e.code, code);
    CHECK((argument == NULL && e.argument == NULL) ||
              (argument != NULL && e.argument != NULL && strcmp(e.argument, argument) == 0),
          "%s: argument %s, want %s", what, name(e.argument), name(argument));
    CHECK(e.index == index, "%s: index %lld, want %lld", what, (long long)e.index,
          (long long)index);
    CHECK(isnan(value) || e.value == value, "%s: value %g, want %g", what, e.value, value);
    CHECK(isnan(limit) || e.limit == limit, "%s: limit %g, want %g", what, e.limit, limit);
    return failures == n;
}

static double buf[64 * 16];

/* One thread's sequence of failures; `salt` makes each thread's values its own. */
static int failures_in_order(int salt) {
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    double pos[4] = {0.0, 1.0, 2.0, 3.0};
    int ok = 1;
    ok &= detail_is(fastpe_fill_f64(buf, -1 - salt, 16, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "seq_len",
                    -1, (double)(-1 - salt), 0.0, "seq_len < 0");
    ok &= detail_is(fastpe_fill_f64(buf, 4, 0, 16, 1e4, 0, IL, 1), FASTPE_ESIZE, "d_model", -1, 0.0,
                    1.0, "d_model 0");
    ok &= detail_is(fastpe_add_positions_f32((float *)buf, 4, INT64_MAX, 16, buf, 1e4, 1.0, IL, 1),
                    FASTPE_ESIZE, "d_model", -1, (double)INT64_MAX, NAN, "d_model INT64_MAX");
    ok &= detail_is(fastpe_fill_f64(buf, 4, 16, 15 - salt, 1e4, 0, IL, 1), FASTPE_ESTRIDE,
                    "row_stride", -1, (double)(15 - salt), 16.0, "row_stride < d_model");
    ok &= detail_is(fastpe_fill_f64(buf, 4, 16, 16, -2.0 - salt, 0, IL, 1), FASTPE_EBASE, "base",
                    -1, -2.0 - salt, NAN, "base < 0");
    ok &= detail_is(fastpe_fill_f64(NULL, 4, 16, 16, 1e4, 0, IL, 1), FASTPE_ENULL, "out", -1, NAN,
                    NAN, "out NULL");
    ok &= detail_is(fastpe_fill_f64(buf, 4, 16, 16, 1e4, 0, 7, 1), FASTPE_ELAYOUT, "layout", -1,
                    7.0, NAN, "layout 7");
    ok &= detail_is(fastpe_add_f64(buf, 2, 4, 16, 16, 1e4, 0, INFINITY, IL, 1), FASTPE_ESCALE,
                    "scale", -1, INFINITY, NAN, "scale inf");
    ok &= detail_is(fastpe_fill_poll(buf, 9, 4, 16, 16, 1e4, 0, IL, 1, NULL, NULL), FASTPE_EINVAL,
                    "dtype", -1, 9.0, 3.0, "dtype 9");
    /* the offset: the largest |position| of the rows, and the limit */
    ok &= detail_is(fastpe_fill_f64(buf, 4, 16, 16, 1e4, (int64_t)1 << 60, IL, 1), FASTPE_ERANGE,
                    "offset", -1, (double)((int64_t)1 << 60) + 3.0, NAN, "offset too large");
    fastpe_error e;
    fastpe_last_error(&e);
    CHECK(e.limit > 1e9 && e.limit < (double)((int64_t)1 << 60), "offset limit %g", e.limit);
    /* positions: the index of the first bad one, and its value */
    pos[2 + salt % 2] = NAN;
    ok &= detail_is(fastpe_fill_positions_f64(buf, 4, 16, 16, pos, 1e4, IL, 1), FASTPE_ERANGE,
                    "positions", 2 + salt % 2, NAN, NAN, "position NaN");
    fastpe_last_error(&e);
    CHECK(isnan(e.value), "the NaN position's value is NaN, got %g", e.value);
    pos[2 + salt % 2] = 1e300;
    ok &= detail_is(fastpe_add_positions_f64(buf, 4, 16, 16, pos, 1e4, 1.0, IL, 1), FASTPE_ERANGE,
                    "positions", 2 + salt % 2, 1e300, NAN, "position too large");
    ok &= detail_is(fastpe_fill_positions_f64(buf, 4, 16, 16, buf + 8, 1e4, IL, 1), FASTPE_EOVERLAP,
                    "positions", 0, NAN, NAN, "positions overlap out");
    /* a successful call leaves the last failure readable (as errno) */
    CHECK(fastpe_fill_f64(buf, 4, 16, 16, 1e4, 0, IL, 1) == FASTPE_OK, "a valid fill");
    ok &= detail_is(FASTPE_EOVERLAP, FASTPE_EOVERLAP, "positions", 0, NAN, NAN,
                    "after a successful call");
    return ok;
}

/* The RoPE rules: each refused parameter is named as its field of
 * fastpe_rope_params, with its value and the bound it broke. */
static int rope_rule_failures(void) {
    fastpe_rope_params p;
    double w[32], a, sf[4] = {1.0, 1.0, 1.0, 1.0}, lf[4] = {1.0, 1.0, 1.0, 1.0};
    int64_t nf;
    fastpe_rope *h = NULL;
    int ok = 1;
#define RULE(...) fastpe_rope_frequencies(&p, 64, w, 32, &nf, &a)
    fastpe_rope_params_init(&p);
    ok &= detail_is(fastpe_rope_frequencies(&p, 1, w, 32, &nf, &a), FASTPE_ESIZE, "head_dim", -1,
                    1.0, 2.0, "head_dim 1");
    p.rope_theta = -3.0;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "rope_theta", -1, -3.0, 0.0, "rope_theta < 0");
    fastpe_rope_params_init(&p);
    p.partial_rotary_factor = 1.5;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "partial_rotary_factor", -1, 1.5, 1.0, "prf > 1");
    p.partial_rotary_factor = 0.03; /* int(64 * 0.03) = 1 */
    ok &= detail_is(RULE(), FASTPE_EINVAL, "rotary_dim", -1, 1.0, 2.0, "odd rotary_dim");
    fastpe_rope_params_init(&p);
    p.factor = 2.0; /* the default rule reads no factor: the K_FACTOR bit */
    ok &= detail_is(RULE(), FASTPE_EINVAL, "rope_type", 0, 0.0, NAN, "a key not read");
    p.rope_type = FASTPE_ROPE_LINEAR;
    p.factor = -0.5;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "factor", -1, -0.5, 0.0, "linear factor < 0");
    fastpe_rope_params_init(&p);
    p.rope_type = FASTPE_ROPE_YARN;
    p.factor = 4.0;
    p.original_max_position_embeddings = 4096;
    p.beta_fast = -1.0;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "beta_fast", -1, -1.0, 0.0, "beta_fast < 0");
    p.beta_fast = NAN;
    p.mscale = INFINITY;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "mscale", -1, INFINITY, NAN, "mscale inf");
    p.mscale = NAN;
    p.original_max_position_embeddings = 0;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "original_max_position_embeddings", -1, 0.0, 1.0,
                    "original length 0");
    fastpe_rope_params_init(&p);
    p.rope_type = FASTPE_ROPE_LLAMA3;
    p.factor = 8.0;
    p.low_freq_factor = 4.0;
    p.high_freq_factor = 1.0;
    p.original_max_position_embeddings = 8192;
    ok &= detail_is(RULE(), FASTPE_EINVAL, "high_freq_factor", -1, 1.0, 4.0, "high < low");
    /* longrope: the entry of a per-pair list */
    fastpe_rope_params_init(&p);
    p.rope_type = FASTPE_ROPE_LONGROPE;
    p.factor = 2.0;
    p.original_max_position_embeddings = 4096;
    p.short_factor = sf, p.short_factor_len = 4;
    p.long_factor = lf, p.long_factor_len = 3;
    ok &= detail_is(fastpe_rope_frequencies(&p, 8, w, 32, &nf, &a), FASTPE_EINVAL, "long_factor",
                    -1, 3.0, 4.0, "long_factor length");
    p.long_factor_len = 4;
    sf[2] = 0.0;
    ok &= detail_is(fastpe_rope_frequencies(&p, 8, w, 32, &nf, &a), FASTPE_EINVAL, "short_factor",
                    2, 0.0, 0.0, "short_factor[2] = 0");
    /* values valid one by one that overflow together: the frequency's index */
    fastpe_rope_params_init(&p);
    p.rope_theta = 1e-300;
    ok &= detail_is(RULE(), FASTPE_EBASE, "inv_freq", 1, NAN, NAN, "frequencies overflow");
    p.rope_theta = 1e4;
    ok &= detail_is(fastpe_rope_frequencies(&p, 64, w, 2, &nf, &a), FASTPE_ESIZE, "capacity", -1,
                    2.0, 32.0, "capacity");
    ok &= detail_is(fastpe_rope_from_params(&p, 64, NULL), FASTPE_ENULL, "rope", -1, NAN, NAN,
                    "from_params rope NULL");
    p.rope_type = 9;
    ok &= detail_is(fastpe_rope_from_params(&p, 64, &h), FASTPE_EINVAL, "rope_type", -1, 9.0, NAN,
                    "from_params rope_type 9");
    CHECK(h == NULL, "no handle on a refusal");
#undef RULE
    return ok;
}

/* The RoPE handles: the cache, the rotation, the sections and the handle's
 * own arguments. */
static int rope_handle_failures(void) {
    const int HALF = FASTPE_LAYOUT_SPLIT;
    double w[4] = {1.0, 0.1, 0.01, 0.001}, bad[2] = {1.0, INFINITY};
    float c[8 * 3], s[8 * 3], x[2 * 3 * 8];
    int64_t pos[3] = {0, 1, 2}, sections[2] = {2, 3};
    int32_t axis[4];
    fastpe_error e;
    int ok = 1;
    fastpe_rope *h = fastpe_rope_from_frequencies(w, 4, 1.0);
    CHECK(h != NULL, "a handle");
    if (h == NULL)
        return 0;
    ok &= detail_is(fastpe_rope_cache_f32(h, c, s, -2, 8, NULL, 0, HALF, 1), FASTPE_ESIZE, "n", -1,
                    -2.0, 0.0, "cache n < 0");
    ok &= detail_is(fastpe_rope_cache_f32(h, c, s, 3, 8, NULL, 0, 5, 1), FASTPE_ELAYOUT, "layout",
                    -1, 5.0, NAN, "cache layout 5");
    ok &= detail_is(fastpe_rope_cache_f32(h, c, NULL, 3, 8, NULL, 0, HALF, 1), FASTPE_ENULL, "sin",
                    -1, NAN, NAN, "cache sin NULL");
    ok &= detail_is(fastpe_rope_cache_f32(h, c, s, 3, 7, NULL, 0, HALF, 1), FASTPE_ESTRIDE,
                    "row_stride", -1, 7.0, 8.0, "cache row_stride < 8");
    ok &= detail_is(fastpe_rope_cache_f32(h, c, c + 4, 3, 8, NULL, 0, HALF, 1), FASTPE_EOVERLAP,
                    "sin", -1, NAN, NAN, "cache sin overlaps cos");
    pos[1] = INT64_MAX / 2;
    ok &= detail_is(fastpe_rope_cache_f32(h, c, s, 3, 8, pos, 0, HALF, 1), FASTPE_ERANGE,
                    "positions", 1, (double)(INT64_MAX / 2), NAN, "cache position too large");
    fastpe_last_error(&e);
    CHECK(e.limit > 1e6 && e.limit < (double)(INT64_MAX / 2), "the position limit %g", e.limit);
    ok &= detail_is(fastpe_rope_cache_f32(h, c, s, 3, 8, NULL, INT64_MAX / 2, HALF, 1),
                    FASTPE_ERANGE, "offset", -1, NAN, NAN, "cache offset too large");
    ok &= detail_is(fastpe_rope_apply_f32(h, x, 2, -3, 1, 24, 8, 8, NULL, 0, HALF, 1), FASTPE_ESIZE,
                    "seq", -1, -3.0, 0.0, "apply seq < 0");
    ok &= detail_is(fastpe_rope_apply_f32(h, NULL, 2, 3, 1, 24, 8, 8, NULL, 0, HALF, 1),
                    FASTPE_ENULL, "x", -1, NAN, NAN, "apply x NULL");
    ok &= detail_is(fastpe_rope_apply_f32(h, x, 2, 3, 1, 24, 4, 8, NULL, 0, HALF, 1),
                    FASTPE_ESTRIDE, "stride_seq", -1, 4.0, 8.0, "apply rows overlap");
    ok &= detail_is(fastpe_rope_apply_f32(h, x, 2, 3, 1, 24, 8, 8, pos, 0, HALF, 1), FASTPE_ERANGE,
                    "positions", 1, (double)(INT64_MAX / 2), NAN, "apply position too large");
    ok &= detail_is(fastpe_rope_apply_f32(NULL, x, 2, 3, 1, 24, 8, 8, NULL, 0, HALF, 1),
                    FASTPE_ENULL, "rope", -1, NAN, NAN, "apply rope NULL");
    ok &= detail_is(fastpe_rope_section_axes(sections, 2, FASTPE_SECTIONS_CONTIGUOUS, axis, 4),
                    FASTPE_ESIZE, "sections", -1, 5.0, 4.0, "sections sum 5 for 4");
    sections[1] = -1;
    ok &= detail_is(fastpe_rope_section_axes(sections, 2, FASTPE_SECTIONS_CONTIGUOUS, axis, 4),
                    FASTPE_ESIZE, "sections", 1, -1.0, 0.0, "sections[1] < 0");
    fastpe_rope_free(h);
    /* a refused handle: NULL, and the detail names why */
    CHECK(fastpe_rope_from_frequencies(bad, 2, 1.0) == NULL, "an infinite frequency");
    ok &= detail_is(FASTPE_EINVAL, FASTPE_EINVAL, "inv_freq", 1, INFINITY, 1e280,
                    "from_frequencies inv_freq[1] = inf");
    CHECK(fastpe_rope_from_frequencies(w, 4, -1.0) == NULL, "a negative attention factor");
    ok &= detail_is(FASTPE_EINVAL, FASTPE_EINVAL, "attention_factor", -1, -1.0, 0.0,
                    "from_frequencies attention_factor < 0");
    axis[0] = axis[1] = axis[2] = 0, axis[3] = 2;
    CHECK(fastpe_rope_from_axes(w, 4, axis, 2, 1.0) == NULL, "an axis out of range");
    ok &= detail_is(FASTPE_EINVAL, FASTPE_EINVAL, "axis", 3, 2.0, 2.0, "from_axes axis[3] = 2");
    return ok;
}

/* A convention's spec (fastpe_spec_create): the knobs no width can use, and the
 * widths a convention does not define; the handle stays NULL. */
static int spec_failures(void) {
    fastpe_knobs k;
    fastpe_spec *h = (fastpe_spec *)&k;
    int ok = 1;
#define SPEC(field, value)                                                                         \
    (fastpe_knobs_preset("vaswani", &k), k.field = (value), fastpe_spec_create(&k, 64, &h))
    ok &= detail_is(SPEC(base, -3.0), FASTPE_EBASE, "base", -1, -3.0, 0.0, "base < 0");
    ok &= detail_is(SPEC(base, NAN), FASTPE_EBASE, "base", -1, NAN, 0.0, "base NaN");
    ok &= detail_is(SPEC(position_scale, 0.0), FASTPE_EINVAL, "position_scale", -1, 0.0, 0.0,
                    "position_scale 0");
    ok &= detail_is(SPEC(position_scale, 1e300), FASTPE_EINVAL, "position_scale", -1, 1e300, 1e280,
                    "position_scale beyond 1e280");
    ok &= detail_is(SPEC(shift, INFINITY), FASTPE_EINVAL, "shift", -1, INFINITY, NAN, "shift inf");
    ok &= detail_is(SPEC(denominator, 9), FASTPE_EINVAL, "denominator", -1, 9.0, NAN,
                    "denominator 9");
    ok &= detail_is(SPEC(columns, -1), FASTPE_EINVAL, "layout", -1, -1.0, NAN, "columns -1");
    ok &= detail_is(SPEC(odd, 3), FASTPE_EINVAL, "odd", -1, 3.0, NAN, "odd 3");
    /* the base is valid, its powers are not: 1e-310^(-31/32) overflows */
    ok &= detail_is(SPEC(base, 1e-310), FASTPE_EBASE, "base", -1, 1e-310, NAN, "base 1e-310");
#undef SPEC
    fastpe_knobs_preset("vaswani", &k);
    ok &= detail_is(fastpe_spec_create(&k, 0, &h), FASTPE_ESIZE, "d_model", -1, 0.0, 1.0,
                    "d_model 0");
    fastpe_knobs_preset("gptj", &k);
    ok &= detail_is(fastpe_spec_create(&k, 7, &h), FASTPE_EINVAL, "d_model", -1, 7.0, 2.0,
                    "gptj at an odd width");
    /* h-1 with an extra sine: 0 at d_model 3 (two frequencies); the index is the width */
    fastpe_knobs_preset("vaswani", &k);
    k.denominator = FASTPE_DENOM_H_MINUS_1;
    ok &= detail_is(fastpe_spec_create(&k, 3, &h), FASTPE_EINVAL, "denominator", 3, 0.0, 0.0,
                    "h-1 at d_model 3");
    fastpe_knobs_preset("diffusers", &k);
    k.shift = 5.5;
    ok &= detail_is(fastpe_spec_create(&k, 8, &h), FASTPE_EINVAL, "denominator", 8, -1.5, 0.0,
                    "diffusers h - shift < 0");
    CHECK(h == NULL, "a refused spec is NULL");
    /* one frequency: the denominator is not used, so fairseq's width 2 and 3 are defined */
    fastpe_knobs_preset("fairseq", &k);
    CHECK(fastpe_spec_create(&k, 3, &h) == FASTPE_OK && h != NULL, "fairseq at d_model 3");
    fastpe_spec_free(h);
    return ok;
}

/* Both threads fail, wait for each other, then read: a detail shared between
 * threads would hold the other thread's failure. */
#if defined(_WIN32)
static SYNCHRONIZATION_BARRIER barrier;
static void wait_both(void) { EnterSynchronizationBarrier(&barrier, 0); }
#else
static pthread_barrier_t barrier;
static void wait_both(void) { pthread_barrier_wait(&barrier); }
#endif

static void lockstep(int salt) {
    const int IL = FASTPE_LAYOUT_INTERLEAVED;
    double pos[64];
    int ok = 1;
    for (int i = 0; i < 64; i++)
        pos[i] = i;
    for (int i = 0; i < 500; i++) {
        int at = (salt * 7 + i) % 64;
        pos[at] = -1e300 * salt;
        int err = fastpe_fill_positions_f64(buf, 64, 4, 4, pos, 1e4, IL, 1);
        pos[at] = at;
        wait_both();
        /* (after a failure, keep meeting the other thread, without reporting more) */
        if (ok)
            ok = detail_is(err, FASTPE_ERANGE, "positions", at, -1e300 * salt, NAN, "lockstep");
        wait_both();
    }
}

#if defined(_WIN32)
static unsigned __stdcall worker(void *arg) {
#else
static void *worker(void *arg) {
#endif
    int salt = (int)(intptr_t)arg, ok = 1;
    for (int i = 0; i < 50 && ok; i++)
        ok = failures_in_order(salt);
    lockstep(salt);
#if defined(_WIN32)
    return 0;
#else
    return NULL;
#endif
}

int main(void) {
    fastpe_error e;
    memset(&e, 0x5a, sizeof(e));
    CHECK(fastpe_last_error(NULL) == FASTPE_OK, "no failure yet on this thread");
    CHECK(fastpe_last_error(&e) == FASTPE_OK && e.code == FASTPE_OK && e.argument == NULL &&
              e.index == -1,
          "the detail before any failure");
    rope_rule_failures();
    rope_handle_failures();
    spec_failures();
    failures_in_order(0);
    /* two threads failing at once: each reads its own detail, never the other's */
#if defined(_WIN32)
    HANDLE th[2];
    InitializeSynchronizationBarrier(&barrier, 2, -1);
    for (int t = 0; t < 2; t++)
        th[t] = (HANDLE)_beginthreadex(NULL, 0, worker, (void *)(intptr_t)(t + 1), 0, NULL);
    WaitForMultipleObjects(2, th, TRUE, INFINITE);
#else
    pthread_t th[2];
    pthread_barrier_init(&barrier, NULL, 2);
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)(t + 1)) == 0, "thread %d", t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
#endif
    /* this thread's detail is still its own last failure */
    detail_is(FASTPE_EOVERLAP, FASTPE_EOVERLAP, "positions", 0, NAN, NAN, "main after threads");
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    else
        printf("fastpe_test_detail: ok\n");
    return failures != 0;
}
