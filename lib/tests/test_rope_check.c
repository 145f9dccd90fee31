/*
 * The array checks of a rotation in place (pe_rope_check_arrays, internal:
 * built here from its sources, since the shared library does not export it):
 * each refusal's error detail, as fastpe_last_error gives it, and the overlap
 * of q and k decided on elements.
 *     fastpe_test_rope_check
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include "check.h"

#include <float.h>
#include <string.h>

static float mem[4096];

/* a (b, h, s, d) array of floats at mem + off, strides in floats */
typedef struct {
    int64_t shape[4], strides[4];
    pe_rope_array a;
} arr;

static void make(arr *x, const char *name, int64_t off, int64_t b, int64_t h, int64_t s, int64_t d,
                 int64_t sb, int64_t sh, int64_t ss) {
    int64_t shape[4] = {b, h, s, d}, st[4] = {sb, sh, ss, 1};
    for (int i = 0; i < 4; i++) {
        x->shape[i] = shape[i];
        x->strides[i] = st[i] * (int64_t)sizeof(float);
    }
    x->a.name = name;
    x->a.buf = (const char *)(mem + off);
    x->a.itemsize = sizeof(float);
    x->a.ndim = 4;
    x->a.shape = x->shape;
    x->a.strides = x->strides;
}

/* a check's return value got, and the error detail it left, against the refusal
   wanted (value or limit NAN: not compared) */
static void detail_is(int got, int code, const char *argument, int64_t index, double value,
                      double limit, const char *what) {
    fastpe_error e;
    fastpe_last_error(&e);
    CHECK(got == code && e.code == code, "%s: returned %d (detail %d), want %d", what, got, e.code,
          code);
    CHECK(e.argument != NULL && strcmp(e.argument, argument) == 0, "%s: argument %s, want %s", what,
          e.argument != NULL ? e.argument : "(null)", argument);
    CHECK(e.index == index, "%s: index %lld, want %lld", what, (long long)e.index,
          (long long)index);
    CHECK(isnan(value) || e.value == value, "%s: value %g, want %g", what, e.value, value);
    CHECK(isnan(limit) || e.limit == limit, "%s: limit %g, want %g", what, e.limit, limit);
}

static void refused(const arr *q, const arr *k, int64_t head_dim, int64_t seq_axis, int code,
                    const char *argument, int64_t index, double value, double limit,
                    const char *what) {
    int64_t hd = -1;
    int sa = -1;
    int got = pe_rope_check_arrays(&q->a, k != NULL ? &k->a : NULL, head_dim, seq_axis, &hd, &sa);
    detail_is(got, code, argument, index, value, limit, what);
}

/* pe_check_out of out (and sin) for the shape want */
static void out_refused(const arr *out, const arr *sin, const int64_t *want, int code,
                        const char *argument, int64_t index, double value, double limit,
                        const char *what) {
    int got = pe_check_out(&out->a, sin != NULL ? &sin->a : NULL, want, 4);
    detail_is(got, code, argument, index, value, limit, what);
}

static void accepted(const arr *q, const arr *k, int64_t head_dim, int64_t seq_axis,
                     int64_t want_hd, int want_sa, const char *what) {
    int64_t hd = -1;
    int sa = -1;
    int got = pe_rope_check_arrays(&q->a, k != NULL ? &k->a : NULL, head_dim, seq_axis, &hd, &sa);
    CHECK(got == FASTPE_OK && hd == want_hd && sa == want_sa, "%s: returned %d, hd %lld, sa %d",
          what, got, (long long)hd, sa);
}

int main(void) {
    const int64_t Q = PE_ROPE_HEAD_DIM_OF_Q;
    arr q, k;
    /* (1, 2, 3, 8) C-contiguous; k beside it */
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 8);
    make(&k, "k", 64, 1, 2, 3, 8, 48, 24, 8);
    accepted(&q, &k, Q, -2, 8, 2, "separate q and k");
    accepted(&q, NULL, 4, 1, 4, 1, "head_dim below the last axis, seq_axis 1");
    /* a fused projection: q and k the two halves of each 16-float row, interleaved */
    make(&q, "q", 0, 1, 2, 3, 8, 96, 48, 16);
    make(&k, "k", 8, 1, 2, 3, 8, 96, 48, 16);
    accepted(&q, &k, Q, -2, 8, 2, "interleaved halves of one buffer");
    make(&k, "k", 4, 1, 2, 3, 8, 96, 48, 16);
    refused(&q, &k, Q, -2, FASTPE_EOVERLAP, "k", -1, NAN, NAN, "k half inside q's rows");
    /* k's last row meets only q's last row */
    make(&q, "q", 0, 1, 1, 3, 8, 24, 24, 8);
    make(&k, "k", 23, 1, 1, 3, 8, 24, 24, 8);
    refused(&q, &k, Q, -2, FASTPE_EOVERLAP, "k", -1, NAN, NAN, "k's first row on q's last entry");
    make(&k, "k", 24, 1, 1, 3, 8, 24, 24, 8);
    accepted(&q, &k, Q, -2, 8, 2, "k right after q");
    /* rows backwards (a negative stride) and a broadcast axis */
    make(&q, "q", 100, 1, 2, 3, 8, 48, 24, -8);
    accepted(&q, NULL, Q, -2, 8, 2, "seq axis backwards");
    make(&q, "q", 0, 1, 2, 3, 8, 48, 0, 8);
    refused(&q, NULL, Q, -2, FASTPE_ESTRIDE, "q", 1, 0.0, 32.0, "heads broadcast");
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 4);
    refused(&q, NULL, Q, -2, FASTPE_ESTRIDE, "q", 2, 16.0, 32.0, "rows half overlapping");
    /* the last axis, alignment, head_dim, seq_axis, agreement */
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 8);
    q.strides[3] = 8;
    refused(&q, NULL, Q, -2, FASTPE_ESTRIDE, "q", 3, 8.0, 4.0, "last axis strided");
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 8);
    q.a.buf += 1;
    refused(&q, NULL, Q, -2, FASTPE_EINVAL, "q", -1, 1.0, 4.0, "misaligned");
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 8);
    q.a.ndim = 1;
    q.shape[0] = 8;
    refused(&q, NULL, Q, -2, FASTPE_ESIZE, "q", -1, 1.0, 2.0, "one axis");
    make(&q, "q", 0, 1, 2, 3, 8, 48, 24, 8);
    refused(&q, NULL, 1, -2, FASTPE_ESIZE, "head_dim", -1, 1.0, 2.0, "head_dim 1");
    refused(&q, NULL, 16, -2, FASTPE_ESIZE, "q", 3, 8.0, 16.0, "head_dim past the last axis");
    refused(&q, NULL, Q, -1, FASTPE_EINVAL, "seq_axis", 0, -1.0, 4.0, "seq_axis the last");
    refused(&q, NULL, Q, 4, FASTPE_EINVAL, "seq_axis", 0, 4.0, 4.0, "seq_axis past the axes");
    make(&k, "k", 64, 1, 2, 4, 8, 64, 32, 8);
    refused(&q, &k, Q, -2, FASTPE_ESIZE, "k", 2, 4.0, 3.0, "sequence lengths differ");
    make(&k, "k", 64, 2, 2, 3, 8, 48, 24, 8);
    refused(&q, &k, Q, -2, FASTPE_ESIZE, "k", 0, 2.0, 1.0, "batches differ");
    make(&k, "k", 64, 1, 3, 8, 1, 24, 8, 1); /* its first three axes: (1, 3, 8) */
    k.strides[2] = sizeof(float);
    k.a.ndim = 3;
    refused(&q, &k, Q, -2, FASTPE_ESIZE, "k", -1, 3.0, 4.0, "axes differ");
    /* cos and sin of rope_cache: two rows of 8 floats side by side in rows of 16 */
    make(&q, "cos", 0, 1, 1, 4, 8, 64, 64, 16);
    make(&k, "sin", 8, 1, 1, 4, 8, 64, 64, 16);
    CHECK(pe_check_out(&q.a, &k.a, q.shape, 4) == FASTPE_OK, "side-by-side cos and sin");
    CHECK(!pe_rope_rows_meet(q.a.buf, k.a.buf, 4, 64, 32), "side-by-side rows");
    make(&k, "sin", 7, 1, 1, 4, 8, 64, 64, 16);
    refused(&q, &k, Q, -2, FASTPE_EOVERLAP, "k", -1, NAN, NAN, "(the q and k spelling)");
    out_refused(&q, &k, q.shape, FASTPE_EOVERLAP, "sin", -1, NAN, NAN, "sin on cos's last entry");
    CHECK(pe_rope_rows_meet(q.a.buf, k.a.buf, 4, 64, 32), "rows one entry over");
    CHECK(!pe_rope_rows_meet(q.a.buf, q.a.buf + 32, 1, 0, 32) &&
              pe_rope_rows_meet(q.a.buf, q.a.buf + 31, 1, 0, 32),
          "one row each: adjacent, one byte in");
    make(&k, "sin", 1000, 1, 1, 4, 8, 64, 64, 0);
    out_refused(&q, &k, q.shape, FASTPE_ESTRIDE, "sin", 2, 0.0, 32.0, "sin's rows broadcast");
    /* an outer axis of stride 0 repeats every row: refused on that axis */
    {
        /* (the span inside a stride-0 axis: one row, as it sorts innermost) */
        int64_t want[4] = {2, 1, 4, 8};
        make(&q, "out", 0, 2, 1, 4, 8, 0, 64, 16);
        out_refused(&q, NULL, want, FASTPE_ESTRIDE, "out", 0, 0.0, 32.0, "a broadcast outer axis");
        make(&q, "out", 0, 2, 1, 4, 8, 128, 64, 16);
        CHECK(pe_check_out(&q.a, NULL, want, 4) == FASTPE_OK, "the same rows, apart");
        q.shape[2] = 5;
        out_refused(&q, NULL, want, FASTPE_ESIZE, "out", 2, 5.0, 4.0, "a sequence axis too long");
        q.shape[2] = 4;
        q.a.ndim = 3;
        out_refused(&q, NULL, want, FASTPE_ESIZE, "out", -1, 3.0, 4.0, "an axis missing");
        q.a.ndim = 4;
        q.a.buf += 2;
        out_refused(&q, NULL, want, FASTPE_EINVAL, "out", -1, 2.0, 4.0, "misaligned");
        make(&q, "out", 0, 2, 1, 4, 8, 128, 64, 16);
        q.strides[3] = 8;
        out_refused(&q, NULL, want, FASTPE_ESTRIDE, "out", 3, 8.0, 4.0, "a strided last axis");
    }
    /* the tokens: positions of shape (seq,) or (1 or batch, seq), offsets () to (batch,) */
    {
        int64_t ids[6] = {4, -2, 9, 1, 2, 3}, big[2] = {0, ((int64_t)1 << 62) + 1};
        int64_t shape[2] = {2, 3}, strides[2] = {24, 8};
        pe_rope_array p = {"positions", (const char *)ids, 8, 2, shape, strides};
        pe_rope_span span;
        fastpe_error e;
        int err = pe_rope_check_tokens(&p, 0, NULL, 0, 2, 3, &span);
        CHECK(err == FASTPE_OK && span.ilo == -2 && span.ihi == 9, "positions (2, 3): %d", err);
        err = pe_rope_check_tokens(&p, 0, NULL, 0, 3, 3, &span);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ESIZE && strcmp(e.argument, "positions") == 0 && e.limit == 3.0,
              "two rows for a batch of 3: %d", err);
        p.name = "offset", p.ndim = 1, p.shape = shape, p.strides = strides + 1;
        err = pe_rope_check_tokens(NULL, 0, &p, 0, 2, 5, &span);
        CHECK(err == FASTPE_OK && span.ilo == -2 && span.ihi == 4 + 5 - 1,
              "offsets (2,): %d [%lld, %lld]", err, (long long)span.ilo, (long long)span.ihi);
        p.buf = (const char *)big;
        err = pe_rope_check_tokens(NULL, 0, &p, 0, 2, 5, &span);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ERANGE && strcmp(e.argument, "offset") == 0 && e.index == 1 &&
                  e.limit == (double)((int64_t)1 << 62),
              "an offset past 2^62: %d", err);
    }
    /* a cache's length and scalar offset; integer positions within +-2^62 */
    {
        const double lim = (double)((int64_t)1 << 62);
        int64_t ids[3] = {0, ((int64_t)1 << 62) + 2048, -1}, shape[1] = {3}, strides[1] = {8};
        pe_rope_array p = {"positions", (const char *)ids, 8, 1, shape, strides};
        pe_rope_span span;
        int err = pe_rope_check_tokens(NULL, 0, NULL, -7, 1, -3, &span);
        detail_is(err, FASTPE_ESIZE, "seq_len", -1, -3.0, 0.0, "a negative length");
        err = pe_rope_check_tokens(NULL, 0, NULL, 0, 1, INT64_MAX, &span);
        detail_is(err, FASTPE_ESIZE, "seq_len", -1, (double)INT64_MAX, lim, "a length past 2^62");
        err = pe_rope_check_tokens(NULL, 0, NULL, INT64_MIN, 1, 4, &span);
        detail_is(err, FASTPE_ERANGE, "offset", -1, (double)INT64_MIN, lim, "an offset past -2^62");
        err = pe_rope_check_tokens(NULL, 0, NULL, (int64_t)1 << 62, 1, (int64_t)1 << 62, &span);
        CHECK(err == FASTPE_OK && span.ilo == (int64_t)1 << 62 &&
                  span.ihi == ((int64_t)1 << 62) + (((int64_t)1 << 62) - 1),
              "the largest offset and length: %d", err);
        err = pe_rope_check_tokens(NULL, 0, NULL, 5, 1, 0, &span);
        CHECK(err == FASTPE_OK && span.ihi < span.ilo, "an empty cache: %d", err);
        err = pe_rope_check_tokens(&p, 0, NULL, 0, 1, 3, &span);
        detail_is(err, FASTPE_ERANGE, "positions", 1, (double)ids[1], lim, "an id past 2^62");
        ids[1] = -((int64_t)1 << 62);
        err = pe_rope_check_tokens(&p, 0, NULL, 0, 1, 3, &span);
        CHECK(err == FASTPE_OK && span.ilo == ids[1] && span.ihi == 0, "an id at -2^62: %d", err);
        /* multi-axis: the coordinate's flat index */
        shape[0] = 1;
        {
            int64_t two[2] = {1, 3}, st2[2] = {24, 8};
            ids[2] = INT64_MAX;
            p.ndim = 2, p.shape = two, p.strides = st2;
            err = pe_rope_check_axes_tokens(&p, 0, 3, -1, -1, (pe_rope_span[3]){{0}});
            detail_is(err, FASTPE_ERANGE, "positions", 2, (double)INT64_MAX, lim,
                      "a coordinate past 2^62");
        }
    }
    /* float positions: each finite, the detail naming the first that is not */
    {
        double xs[4] = {0.5, -3.0, INFINITY, NAN};
        int64_t shape[1] = {4}, strides[1] = {8};
        pe_rope_array p = {"positions", (const char *)xs, 8, 1, shape, strides};
        pe_rope_span span;
        fastpe_error e;
        int err = pe_rope_check_tokens(&p, 1, NULL, 0, 1, 4, &span);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ERANGE && strcmp(e.argument, "positions") == 0 && e.index == 2 &&
                  isinf(e.value) && e.limit == DBL_MAX,
              "an infinite position: %d at %lld", err, (long long)e.index);
        shape[0] = 2;
        err = pe_rope_check_tokens(&p, 1, NULL, 0, 1, 2, &span);
        CHECK(err == FASTPE_OK && span.lo == -3.0 && span.hi == 0.5, "finite: %d", err);
        /* the span against the exact reduction: the extreme beyond it named */
        CHECK(pe_rope_check_span(&span, 3.0, -1) == FASTPE_OK, "within +-3");
        err = pe_rope_check_span(&span, 2.5, 1);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ERANGE && strcmp(e.argument, "positions") == 0 && e.index == 1 &&
                  e.value == -3.0 && e.limit == 2.5,
              "beyond +-2.5: %d (%g)", err, e.value);
        span.lo = 0.0, span.hi = -1.0;
        CHECK(pe_rope_check_span(&span, 0.0, -1) == FASTPE_OK, "no tokens: nothing to check");
    }
    /* multi-axis positions: (..., n) of a cache, (seq, n) or (1 or batch, seq, n) of a
       rotation; each axis's span */
    {
        int64_t ids[6] = {4, -2, 9, 1, 2, 3}, shape[3] = {2, 3}, strides[3] = {24, 8};
        double xs[4] = {0.5, 1.0, -2.0, NAN};
        pe_rope_array p = {"positions", (const char *)ids, 8, 2, shape, strides};
        pe_rope_span sp[3];
        fastpe_error e;
        int err = pe_rope_check_axes_tokens(&p, 0, 3, -1, -1, sp);
        CHECK(err == FASTPE_OK && sp[0].ilo == 1 && sp[0].ihi == 4 && sp[1].ilo == -2 &&
                  sp[1].ihi == 2 && sp[2].lo == 3.0 && sp[2].hi == 9.0,
              "(2, 3) of 3 axes: %d", err);
        err = pe_rope_check_axes_tokens(&p, 0, 2, -1, -1, sp);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ESIZE && e.index == 1 && e.value == 3.0 && e.limit == 2.0,
              "3 coordinates for 2 axes: %d", err);
        CHECK(pe_rope_check_axes_tokens(&p, 0, 3, 4, 2, sp) == FASTPE_OK, "(seq 2, 3)");
        err = pe_rope_check_axes_tokens(&p, 0, 3, 4, 3, sp);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ESIZE && e.index == -1 && e.value == 2.0 && e.limit == 3.0,
              "(2, 3) for a sequence of 3: %d", err);
        p.buf = (const char *)xs, shape[0] = 2, shape[1] = 2, strides[0] = 16;
        err = pe_rope_check_axes_tokens(&p, 1, 2, -1, -1, sp);
        fastpe_last_error(&e);
        CHECK(err == FASTPE_ERANGE && e.index == 3 && isnan(e.value), "a NaN coordinate: %d", err);
        shape[0] = 1;
        err = pe_rope_check_axes_tokens(&p, 1, 2, -1, -1, sp);
        CHECK(err == FASTPE_OK && sp[0].lo == 0.5 && sp[1].hi == 1.0, "finite: %d", err);
    }
    if (failures == 0)
        printf("rope_check: ok\n");
    return failures != 0;
}
