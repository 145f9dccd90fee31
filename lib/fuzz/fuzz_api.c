/*
 * libFuzzer target over libfastpe's public API (tools/fuzz_clib.sh builds it with
 * ASan + UBSan and runs it for a bounded time over the corpus in lib/fuzz/corpus).
 *
 * Each input is one call, its arguments read from the bytes: small sizes and
 * strides of either sign that address an arena, and now and then the ends of
 * int64.  Every call is made twice, on two copies of the arena, with 1 and with
 * 3 threads; the properties:
 *   - the same code and the same bytes for 1 and 3 threads;
 *   - on an error, not one byte of the arena changed;
 *   - on success, nothing changed outside the rows the call may write (the
 *     arena's canaries: every other byte is compared);
 *   - errno as the caller set it;
 *   - an error's detail (fastpe_last_error) holding its code and, but for a
 *     failed allocation, naming the argument refused;
 *   - a handle set to correct rounding refused (FASTPE_EINVAL, naming it) by
 *     the adds and the multi-axis rotations (the fills, caches and one-axis
 *     rotations honour it); a rounding outside
 *     FASTPE_ROUND_* refused by the setters, the handle left as it was;
 *   - (ASan, UBSan) no access outside the arena, no undefined behaviour.
 * A call whose rows would fall outside the arena is made only when its sizes
 * or strides span more than INT64_MAX / 16 entries (the library's limit for
 * any layout: it must refuse the call then).
 */
#include <fastpe/fastpe.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BYTES (1 << 15)
#define MID         (ARENA_BYTES / 2) /* calls start here: strides may be negative */
#define MAX_ROWS    4096

typedef struct {
    const uint8_t *p;
    size_t n;
} reader;

static uint64_t u64(reader *r, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v = (v << 8) | (r->n ? *r->p : 0);
        if (r->n)
            r->p++, r->n--;
    }
    return v;
}

/* a small value most of the time, an end of int64 now and then */
static int64_t pick(reader *r, int64_t lo, int64_t hi) {
    uint8_t sel = (uint8_t)u64(r, 1);
    if (sel < 240)
        return lo + (int64_t)(u64(r, 2) % (uint64_t)(hi - lo + 1));
    switch (sel % 8) {
    case 0:
        return INT64_MAX;
    case 1:
        return INT64_MIN;
    case 2:
        return INT64_MAX / 2;
    case 3:
        return -(INT64_MAX / 3);
    case 4:
        return (int64_t)1 << 40;
    case 5:
        return -1;
    case 6:
        return 0;
    default:
        return (int64_t)u64(r, 8);
    }
}

static double pick_double(reader *r, double typical) {
    uint8_t sel = (uint8_t)u64(r, 1);
    static const double odd[] = {0.0, -1.0, 1e-310, 1e300, NAN, INFINITY, -INFINITY, 2.5, 1e6};
    if (sel < 200)
        return typical;
    if (sel < 230)
        return odd[sel % 9];
    uint64_t bits = u64(r, 8);
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

/* The rows a call declares: base + sum(idx_k * st_k) entries of sz bytes, w
 * entries wide, over up to three axes.  Marks them in allow; 0 if any row is
 * outside the arena, -1 if the layout is beyond any real buffer. */
typedef struct {
    int64_t n[3], st[3];
    int m;
    int64_t w;
} rows;

static int mark(const rows *R, int64_t base, int sz, unsigned char *allow) {
    /* the library's documented limit: a layout spanning more than INT64_MAX / 16
       entries is refused; in doubles, with a margin either side of it */
    const double lim = (double)(INT64_MAX / 16);
    double ext = (double)R->w, count = 1;
    for (int k = 0; k < R->m; k++) {
        if (R->n[k] < 0)
            return -1;
        if (R->n[k] > 1)
            ext += fabs((double)R->st[k]) * (double)(R->n[k] - 1);
        count *= (double)R->n[k];
    }
    if (count == 0)
        return 1;
    if (count > 2 * lim || ext > 2 * lim)
        return -1;
    if (count > MAX_ROWS || ext * sz > ARENA_BYTES || R->w < 0)
        return 0;
    for (int64_t i = 0; i < (R->m > 0 ? R->n[0] : 1); i++) {
        for (int64_t j = 0; j < (R->m > 1 ? R->n[1] : 1); j++) {
            for (int64_t k = 0; k < (R->m > 2 ? R->n[2] : 1); k++) {
                double o = (double)base;
                if (R->m > 0 && R->n[0] > 1)
                    o += (double)i * (double)R->st[0] * sz;
                if (R->m > 1 && R->n[1] > 1)
                    o += (double)j * (double)R->st[1] * sz;
                if (R->m > 2 && R->n[2] > 1)
                    o += (double)k * (double)R->st[2] * sz;
                if (o < 0 || o + (double)R->w * sz > ARENA_BYTES)
                    return 0;
                memset(allow + (int64_t)o, 1, (size_t)(R->w * sz));
            }
        }
    }
    return 1;
}

static unsigned char arena[2][ARENA_BYTES], start[ARENA_BYTES], allow[ARENA_BYTES];
static double positions[MAX_ROWS];
static int64_t ipositions[MAX_ROWS * 4]; /* (up to 3 axes a token) */

typedef struct {
    int op, dtype, layout;
    int64_t a, b, c, seq, sa, sb, sc, off;
    double base, scale;
    fastpe_spec *spec;
    fastpe_rope *rope;
    int use_pos;
    int rounding; /* the handle's: FASTPE_ROUND_* */
} call;

static const int sizes[4] = {4, 8, 2, 2};

static int run(const call *C, unsigned char *mem, int nt) {
    void *x = mem + MID;
    void *y = mem + MID / 2; /* sin rows of a cache: elsewhere in the arena */
    const int64_t *ip = C->use_pos ? ipositions : NULL;
    switch (C->op) {
    case 0:
        return fastpe_fill_poll(x, C->dtype, C->a, C->b, C->sa, C->base, C->off, C->layout, nt,
                                NULL, NULL);
    case 1:
        switch (C->dtype) {
        case 0:
            return fastpe_add_f32((float *)x, C->c, C->a, C->b, C->sa, C->base, C->off, C->scale,
                                  C->layout, nt);
        case 1:
            return fastpe_add_f64((double *)x, C->c, C->a, C->b, C->sa, C->base, C->off, C->scale,
                                  C->layout, nt);
        case 2:
            return fastpe_add_f16((uint16_t *)x, C->c, C->a, C->b, C->sa, C->base, C->off, C->scale,
                                  C->layout, nt);
        default:
            return fastpe_add_bf16((uint16_t *)x, C->c, C->a, C->b, C->sa, C->base, C->off,
                                   C->scale, C->layout, nt);
        }
    case 2:
        if (C->dtype % 2 == 0)
            return fastpe_add_positions_f32((float *)x, C->a, C->b, C->sa, positions, C->base,
                                            C->scale, C->layout, nt);
        return fastpe_fill_positions_f64((double *)x, C->a, C->b, C->sa, positions, C->base,
                                         C->layout, nt);
    case 3:
        switch (C->dtype) {
        case 0:
            return fastpe_spec_add_f32(C->spec, (float *)x, C->c, C->a, C->sa, C->off, C->scale,
                                       nt);
        case 1:
            return fastpe_spec_fill_positions_f64(C->spec, (double *)x, C->a, C->sa, positions, nt);
        case 2:
            return fastpe_spec_fill_f16(C->spec, (uint16_t *)x, C->a, C->sa, C->off, nt);
        default:
            return fastpe_spec_add_bf16(C->spec, (uint16_t *)x, C->c, C->a, C->sa, C->off, C->scale,
                                        nt);
        }
    case 4:
        switch (C->dtype) {
        case 0:
            return fastpe_rope_apply_f32(C->rope, (float *)x, C->a, C->seq, C->c, C->sa, C->sb,
                                         C->sc, ip, C->off, C->layout, nt);
        case 1:
            return fastpe_rope_apply_f64(C->rope, (double *)x, C->a, C->seq, C->c, C->sa, C->sb,
                                         C->sc, ip, C->off, C->layout, nt);
        case 2:
            return fastpe_rope_apply_axes_f16(C->rope, (uint16_t *)x, C->a, C->seq, C->c, C->sa,
                                              C->sb, C->sc, ipositions, C->layout, nt);
        default:
            return fastpe_rope_apply_bf16(C->rope, (uint16_t *)x, C->a, C->seq, C->c, C->sa, C->sb,
                                          C->sc, ip, C->off, C->layout, nt);
        }
    default:
        switch (C->dtype) {
        case 0:
            return fastpe_rope_cache_f32(C->rope, (float *)x, (float *)y, C->a, C->sa, ip, C->off,
                                         C->layout, nt);
        case 1:
            return fastpe_rope_cache_axes_f64(C->rope, (double *)x, (double *)y, C->a, C->sa,
                                              ipositions, C->layout, nt);
        case 2:
            return fastpe_rope_cache_f16(C->rope, (uint16_t *)x, (uint16_t *)y, C->a, C->sa, ip,
                                         C->off, C->layout, nt);
        default:
            return fastpe_rope_cache_axes_bf16(C->rope, (uint16_t *)x, (uint16_t *)y, C->a, C->sa,
                                               ipositions, C->layout, nt);
        }
    }
}

static void fail(const char *what, const call *C, int e1, int e3) {
    fprintf(stderr,
            "fuzz_api: %s: op %d dtype %d layout %d sizes %lld %lld %lld strides %lld %lld %lld "
            "offset %lld codes %d %d\n",
            what, C->op, C->dtype, C->layout, (long long)C->a, (long long)C->b, (long long)C->c,
            (long long)C->sa, (long long)C->sb, (long long)C->sc, (long long)C->off, e1, e3);
    abort();
}

/* The rounding a setter leaves: `want` when it is a FASTPE_ROUND_* value (the
 * code FASTPE_OK), else the handle's default (FASTPE_EINVAL). */
static int rounding_after(int want, int e, const call *C) {
    int valid = want == FASTPE_ROUND_DEFAULT || want == FASTPE_ROUND_CORRECT;
    if (e != (valid ? FASTPE_OK : FASTPE_EINVAL))
        fail("a rounding setter's code", C, e, e);
    return valid ? want : FASTPE_ROUND_DEFAULT;
}

/* A rounding for a new handle, read from the bytes: mostly none set, now and
 * then correct rounding or any small value. */
static int pick_rounding(reader *r) {
    uint8_t sel = (uint8_t)u64(r, 1);
    if (sel < 160)
        return -100; /* (none set) */
    return sel < 224 ? FASTPE_ROUND_CORRECT : (int)pick(r, -3, 3);
}

/* Whether the call writes table rows, adds them, writes caches or one-axis
 * rotations (of any type): the ones that honour correct rounding; the
 * multi-axis rotations refuse it. */
static int honours_rounding(const call *C) {
    return C->op == 3 || C->op == 5 || (C->op == 4 && C->dtype != 2);
}

/* After a failing call: its detail holds its code and names the argument. */
static void check_detail(int e, const call *C) {
    fastpe_error d;
    if (e == FASTPE_OK)
        return;
    if (fastpe_last_error(&d) != e || d.code != e)
        fail("the error detail's code differs from the call's", C, e, d.code);
    if (d.argument == NULL && e != FASTPE_ENOMEM)
        fail("a refusal whose detail names no argument", C, e, e);
    if (C->rounding == FASTPE_ROUND_CORRECT && !honours_rounding(C) &&
        (e != FASTPE_EINVAL || strcmp(d.argument, C->op == 3 ? "spec" : "rope") != 0))
        fail("correct rounding not refused by a call that cannot honour it", C, e, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    call C;
    rows R;
    fastpe_knobs k, kb;
    memset(&C, 0, sizeof(C));
    memset(&R, 0, sizeof(R));
    C.op = (int)(u64(&r, 1) % 6);
    C.dtype = (int)(u64(&r, 1) % 4);
    C.layout = (int)(u64(&r, 1) % 8) < 7 ? (int)(u64(&r, 1) % 2) : (int)pick(&r, -2, 3);
    C.a = pick(&r, 0, 24);
    C.b = pick(&r, 1, 40);
    C.c = pick(&r, 0, 3);
    C.seq = pick(&r, 0, 6);
    C.sa = pick(&r, -64, 64);
    C.sb = pick(&r, -64, 64);
    C.sc = pick(&r, -64, 64);
    C.off = pick(&r, -300, 300);
    C.base = pick_double(&r, 10000.0);
    C.scale = pick_double(&r, 0.5);
    C.use_pos = (int)(u64(&r, 1) & 1);
    for (int i = 0; i < MAX_ROWS; i++) {
        positions[i] = (double)((int64_t)(i * 7 % 53) - 20) + (i % 5 == 0 ? 0.25 : 0.0);
        ipositions[i] = (int64_t)(i * 11 % 97) - 30;
    }
    if (r.n > 0 && (r.p[0] & 0xF0) == 0xF0)
        positions[0] = pick_double(&r, 1e300), ipositions[0] = pick(&r, -5, 5);
    int sz = sizes[C.dtype];
    if (C.op == 2)
        sz = C.dtype % 2 == 0 ? 4 : 8;
    if (C.op == 3) {
        static const char *const names[] = {"vaswani", "tensor2tensor", "fairseq", "diffusers",
                                            "gptj",    "bogus",         NULL};
        const char *name = names[u64(&r, 1) % 7];
        memset(&k, 0x5A, sizeof(k));
        kb = k;
        int e = fastpe_knobs_preset(name, &k);
        if (e != FASTPE_OK && memcmp(&k, &kb, sizeof(k)) != 0)
            fail("fastpe_knobs_preset wrote on error", &C, e, e);
        if (e != FASTPE_OK)
            return 0;
        if (u64(&r, 1) > 200) {
            k.denominator = (int)pick(&r, -1, 5);
            k.shift = pick_double(&r, 1.0);
            k.position_scale = pick_double(&r, 1.0);
            k.odd = (int)pick(&r, -1, 3);
        }
        fastpe_spec *s = (fastpe_spec *)&kb; /* must be overwritten */
        e = fastpe_spec_create(&k, C.b, &s);
        if ((e == FASTPE_OK) != (s != NULL))
            fail("fastpe_spec_create: code and handle disagree", &C, e, e);
        if (s == NULL)
            return 0;
        C.spec = s;
        sz = sizes[C.dtype];
        if (C.dtype == 1)
            sz = 8;
        C.b = fastpe_spec_d_model(s);
        int want = pick_rounding(&r);
        if (want != -100)
            C.rounding = rounding_after(want, fastpe_spec_set_rounding(s, want), &C);
    }
    if (C.op >= 4) {
        double w[8];
        int32_t axis[8];
        int64_t nf = 1 + (int64_t)(u64(&r, 1) % 8);
        int n_axes = 1 + (int)(u64(&r, 1) % 3);
        for (int i = 0; i < nf; i++) {
            w[i] = pick_double(&r, 1.0 / (double)(1 << i));
            axis[i] = (int32_t)(i % n_axes);
        }
        double att = pick_double(&r, 1.0);
        int axes = (C.op == 4 && C.dtype == 2) || (C.op == 5 && C.dtype % 2 == 1);
        C.rope = axes ? fastpe_rope_from_axes(w, nf, axis, n_axes, att)
                      : fastpe_rope_from_frequencies(w, nf, att);
        if (C.rope == NULL)
            return 0;
        C.b = fastpe_rope_rotary_dim(C.rope);
        int want = pick_rounding(&r);
        if (want != -100)
            C.rounding = rounding_after(want, fastpe_rope_set_rounding(C.rope, want), &C);
    }

    /* the rows the call may write, and whether the arena holds them */
    int ok;
    memset(allow, 0, sizeof(allow));
    if (C.op <= 3) {
        int64_t n = C.a;
        if (C.op == 1 || (C.op == 3 && C.dtype % 3 == 0)) {
            /* nseq sequences of seq_len rows; a count beyond 4e18 (far past the
               library's limit) stands for "must be refused" without forming it */
            if (C.c < 0 || C.a < 0 || (double)C.c * (double)C.a > 4e18)
                n = -1;
            else
                n = C.c * C.a;
        }
        R.m = 1, R.n[0] = n, R.st[0] = C.sa, R.w = C.b;
        ok = mark(&R, MID, sz, allow);
    } else if (C.op == 4) {
        /* rows (b, s, h) of batch a, seq, heads c at strides sa, sb, sc */
        R.m = 3, R.w = C.b;
        R.n[0] = C.a, R.n[1] = C.seq, R.n[2] = C.c;
        R.st[0] = C.sa, R.st[1] = C.sb, R.st[2] = C.sc;
        ok = mark(&R, MID, sz, allow);
    } else {
        R.m = 1, R.n[0] = C.a, R.st[0] = C.sa, R.w = C.b;
        ok = mark(&R, MID, sz, allow);
        if (ok == 1)
            ok = mark(&R, MID / 2, sz, allow);
    }
    if (ok == 0 && C.rounding == FASTPE_ROUND_CORRECT && !honours_rounding(&C)) {
        /* refused before the rows are looked at: a call to make wherever they lie */
        check_detail(run(&C, arena[0], 1), &C);
        goto done;
    }
    if (ok == 0)
        goto done; /* rows outside the arena, but a plausible buffer: not a call to make */

    for (size_t i = 0; i < ARENA_BYTES; i++)
        start[i] = (unsigned char)(i * 131u + 7u);
    memcpy(arena[0], start, ARENA_BYTES);
    memcpy(arena[1], start, ARENA_BYTES);
    errno = 1234;
    int e1 = run(&C, arena[0], 1);
    check_detail(e1, &C);
    if (errno != 1234) {
        fprintf(stderr, "fuzz_api: errno %d (%s)\n", errno, strerror(errno));
        fail("errno changed", &C, e1, e1);
    }
    int e3 = run(&C, arena[1], 3);
    check_detail(e3, &C);
    if (errno != 1234) { /* (a team's first start, too) */
        fprintf(stderr, "fuzz_api: errno %d (%s)\n", errno, strerror(errno));
        fail("errno changed by a 3-thread call", &C, e1, e3);
    }
    if (e1 != e3)
        fail("different codes for 1 and 3 threads", &C, e1, e3);
    if (memcmp(arena[0], arena[1], ARENA_BYTES) != 0)
        fail("different bytes for 1 and 3 threads", &C, e1, e3);
    if (ok < 0 && e1 == FASTPE_OK)
        fail("a layout beyond any buffer was accepted", &C, e1, e3);
    for (size_t i = 0; i < ARENA_BYTES; i++) {
        if (arena[0][i] != start[i] && (e1 != FASTPE_OK || !allow[i]))
            fail(e1 != FASTPE_OK ? "written on error" : "written outside the rows", &C, e1, e3);
    }
done:
    fastpe_spec_free(C.spec);
    fastpe_rope_free(C.rope);
    return 0;
}
