/* fastpe's C RoPE (libfastpe) against ggml's CPU RoPE (llama.cpp's kernel), in one process;
 * built by bench/ggml_rope.sh against a ggml source tree.
 *
 * q: 4096 positions x 32 heads x 128 float32, positions-first (ggml ne = [128, 32, 4096],
 * fastpe (batch=1, seq=4096, heads=32, head_dim=128), strides 4096*32*128, 32*128, 128).
 * ggml: ggml_rope_ext (llama.cpp's call: separate dst) and ggml_rope_ext_inplace, modes
 * NEOX (2) and NORMAL (0), n_dims 128, base 10000, freq_scale 1, ext_factor 0, attn 1;
 * graph prebuilt, timed: ggml_graph_compute(gf, &cplan) only (plan + work buffer made once).
 * fastpe: fastpe_rope_from_frequencies(w_i = 10000^(-2i/128) in double, 64, 1.0), timed:
 * fastpe_rope_apply_f32 in place, FASTPE_LAYOUT_SPLIT (= NEOX) / INTERLEAVED (= NORMAL).
 * memcpy: q (64 MiB) into a preallocated buffer ("one copy pass").
 * Medians of NREP timed calls after NWARM warm-up calls, CLOCK_MONOTONIC.
 * Decode step: q of 1 position (100000) x 32 x 128; each sample times a batch of
 * STEP_BATCH calls and divides (median of NREP samples).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml.h"
#include "ggml-cpu.h"
#include <fastpe/fastpe.h>

#define HD         128
#define NH         32
#define NP         4096
#define NF         (HD / 2)
#define NREP       31
#define NWARM      3
#define STEP_BATCH 200

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmpd);
    return v[n / 2];
}

/* ggml: one graph per (mode, inplace, n positions) */
typedef struct {
    struct ggml_cgraph *gf;
    struct ggml_tensor *src, *dst, *pos;
} gcase;

static gcase make_case(struct ggml_context *ctx, int np, int mode, int inplace) {
    gcase c;
    c.src = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, HD, NH, np);
    c.pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, np);
    if (inplace)
        c.dst = ggml_rope_ext_inplace(ctx, c.src, c.pos, NULL, HD, mode, 4096, 10000.0f, 1.0f, 0.0f,
                                      1.0f, 32.0f, 1.0f);
    else
        c.dst = ggml_rope_ext(ctx, c.src, c.pos, NULL, HD, mode, 4096, 10000.0f, 1.0f, 0.0f, 1.0f,
                              32.0f, 1.0f);
    c.gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(c.gf, c.dst);
    return c;
}

static uint8_t *g_work = NULL;
static size_t g_work_size = 0;

static void ggml_run(gcase *c, int nth) {
    struct ggml_cplan p = ggml_graph_plan(c->gf, nth, NULL);
    if (p.work_size > g_work_size) {
        g_work = realloc(g_work, p.work_size);
        g_work_size = p.work_size;
    }
    p.work_data = g_work;
    if (ggml_graph_compute(c->gf, &p) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "ggml_graph_compute failed\n");
        exit(1);
    }
}

/* time ggml compute only: the plan is made outside the timed region */
static double time_ggml(gcase *c, int nth, int batch) {
    struct ggml_cplan p = ggml_graph_plan(c->gf, nth, NULL);
    if (p.work_size > g_work_size) {
        g_work = realloc(g_work, p.work_size);
        g_work_size = p.work_size;
    }
    p.work_data = g_work;
    double t[NREP];
    for (int i = 0; i < NWARM; i++)
        ggml_graph_compute(c->gf, &p);
    for (int r = 0; r < NREP; r++) {
        double t0 = now_s();
        for (int b = 0; b < batch; b++)
            ggml_graph_compute(c->gf, &p);
        t[r] = (now_s() - t0) / batch;
    }
    return median(t, NREP);
}

static double time_fastpe(const fastpe_rope *rope, float *x, int np, int64_t offset, int layout,
                          int nth, int batch) {
    double t[NREP];
    for (int i = 0; i < NWARM; i++) {
        int e = fastpe_rope_apply_f32(rope, x, 1, np, NH, (int64_t)np * NH * HD, NH * HD, HD, NULL,
                                      offset, layout, nth);
        if (e) {
            fprintf(stderr, "fastpe error %d: %s\n", e, fastpe_strerror(e));
            exit(1);
        }
    }
    for (int r = 0; r < NREP; r++) {
        double t0 = now_s();
        for (int b = 0; b < batch; b++)
            fastpe_rope_apply_f32(rope, x, 1, np, NH, (int64_t)np * NH * HD, NH * HD, HD, NULL,
                                  offset, layout, nth);
        t[r] = (now_s() - t0) / batch;
    }
    return median(t, NREP);
}

static double time_memcpy(float *dst, const float *src, size_t n) {
    double t[NREP];
    for (int i = 0; i < NWARM; i++)
        memcpy(dst, src, n * sizeof(float));
    for (int r = 0; r < NREP; r++) {
        double t0 = now_s();
        memcpy(dst, src, n * sizeof(float));
        t[r] = now_s() - t0;
    }
    volatile float sink = dst[n / 3];
    (void)sink;
    return median(t, NREP);
}

/* float64 reference rotation of q0 at positions off .. off+np-1 */
static double max_err_vs_ref(const float *q0, const float *out, int np, int64_t off, int neox,
                             const double *w) {
    double m = 0;
    for (int s = 0; s < np; s++)
        for (int i = 0; i < NF; i++) {
            double a = (double)(off + s) * w[i], c = cos(a), sn = sin(a);
            for (int h = 0; h < NH; h++) {
                size_t base = ((size_t)s * NH + h) * HD;
                size_t i0 = neox ? base + i : base + 2 * i,
                       i1 = neox ? base + i + NF : base + 2 * i + 1;
                double x0 = q0[i0], x1 = q0[i1];
                double y0 = x0 * c - x1 * sn, y1 = x0 * sn + x1 * c;
                double e0 = fabs(y0 - out[i0]), e1 = fabs(y1 - out[i1]);
                if (e0 > m)
                    m = e0;
                if (e1 > m)
                    m = e1;
            }
        }
    return m;
}
static double max_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m)
            m = d;
    }
    return m;
}

int main(void) {
    int threads[] = {1, 2, 4, 8, 16};
    int nthr = 5;
    const size_t N = (size_t)NP * NH * HD;
    const int64_t offs[2] = {0, 100000};

    ggml_cpu_init();
    struct ggml_init_params ip = {.mem_size = 8 * N * sizeof(float) + 64 * 1024 * 1024,
                                  .mem_buffer = NULL,
                                  .no_alloc = false};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) {
        fprintf(stderr, "ggml_init failed\n");
        return 1;
    }

    /* data: uniform in [-1, 1), fixed seed */
    float *q0 = malloc(N * sizeof(float));
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        q0[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }

    double w[NF];
    for (int i = 0; i < NF; i++)
        w[i] = pow(10000.0, -2.0 * i / (double)HD);
    fastpe_rope *rope = fastpe_rope_from_frequencies(w, NF, 1.0);
    if (!rope) {
        fprintf(stderr, "fastpe_rope_from_frequencies failed\n");
        return 1;
    }

    const int modes[2] = {GGML_ROPE_TYPE_NEOX, GGML_ROPE_TYPE_NORMAL};
    const int layouts[2] = {FASTPE_LAYOUT_SPLIT, FASTPE_LAYOUT_INTERLEAVED};
    const char *mname[2] = {"NEOX/split", "NORMAL/interleaved"};

    gcase gx[2], gi[2], gs[2];
    for (int m = 0; m < 2; m++) {
        gx[m] = make_case(ctx, NP, modes[m], 0);
        gi[m] = make_case(ctx, NP, modes[m], 1);
        gs[m] = make_case(ctx, 1, modes[m], 0);
        memcpy(gx[m].src->data, q0, N * sizeof(float));
        memcpy(gi[m].src->data, q0, N * sizeof(float));
        memcpy(gs[m].src->data, q0, (size_t)NH * HD * sizeof(float));
        ((int32_t *)gs[m].pos->data)[0] = 100000;
    }
    float *xf = malloc(N * sizeof(float));
    float *cp = malloc(N * sizeof(float));
    memcpy(xf, q0, N * sizeof(float));
    memcpy(cp, q0, N * sizeof(float));
    float *xs = malloc((size_t)NH * HD * sizeof(float));
    memcpy(xs, q0, (size_t)NH * HD * sizeof(float));

    printf("ggml %s, libfastpe ABI %d.%d; q = %d positions x %d heads x %d float32 (%.0f MiB)\n",
           ggml_version(), FASTPE_LIB_ABI_MAJOR, FASTPE_LIB_ABI_MINOR, NP, NH, HD,
           N * 4.0 / 1048576.0);
    printf("medians of %d timed calls after %d warm-up calls\n\n", NREP, NWARM);

    /* ---- correctness (positions 0..4095 and 100000..104095, 1 thread) ---- */
    printf("## correctness (max abs; q in [-1,1))\n");
    float *gout = malloc(N * sizeof(float));
    for (int o = 0; o < 2; o++)
        for (int m = 0; m < 2; m++) {
            int32_t *pp = (int32_t *)gx[m].pos->data;
            for (int s = 0; s < NP; s++)
                pp[s] = (int32_t)(offs[o] + s);
            ggml_run(&gx[m], 1);
            memcpy(gout, gx[m].dst->data, N * sizeof(float));
            memcpy(xf, q0, N * sizeof(float));
            int e = fastpe_rope_apply_f32(rope, xf, 1, NP, NH, (int64_t)N, NH * HD, HD, NULL,
                                          offs[o], layouts[m], 1);
            if (e) {
                fprintf(stderr, "fastpe error %d\n", e);
                return 1;
            }
            /* threads do not change fastpe's bits */
            float *xf16 = cp;
            memcpy(xf16, q0, N * sizeof(float));
            fastpe_rope_apply_f32(rope, xf16, 1, NP, NH, (int64_t)N, NH * HD, HD, NULL, offs[o],
                                  layouts[m], 16);
            int same = memcmp(xf16, xf, N * sizeof(float)) == 0;
            printf("pos %6lld..%6lld %-19s |ggml-fastpe| %.3e  ggml vs f64 ref %.3e  fastpe vs f64 "
                   "ref "
                   "%.3e  fastpe 1thr==16thr bitwise: %s\n",
                   (long long)offs[o], (long long)offs[o] + NP - 1, mname[m], max_diff(gout, xf, N),
                   max_err_vs_ref(q0, gout, NP, offs[o], m == 0, w),
                   max_err_vs_ref(q0, xf, NP, offs[o], m == 0, w), same ? "yes" : "NO");
        }
    /* ggml inplace == ggml separate dst (bitwise) */
    for (int m = 0; m < 2; m++) {
        int32_t *pp = (int32_t *)gx[m].pos->data, *pi = (int32_t *)gi[m].pos->data;
        for (int s = 0; s < NP; s++)
            pp[s] = pi[s] = s;
        memcpy(gi[m].src->data, q0, N * sizeof(float));
        ggml_run(&gx[m], 1);
        ggml_run(&gi[m], 1);
        printf("ggml %s inplace == separate dst bitwise: %s\n", mname[m],
               memcmp(gx[m].dst->data, gi[m].dst->data, N * sizeof(float)) == 0 ? "yes" : "NO");
    }
    /* step */
    for (int m = 0; m < 2; m++) {
        ggml_run(&gs[m], 1);
        memcpy(xs, q0, (size_t)NH * HD * sizeof(float));
        fastpe_rope_apply_f32(rope, xs, 1, 1, NH, NH * HD, NH * HD, HD, NULL, 100000, layouts[m],
                              1);
        printf("step pos 100000 %-19s |ggml-fastpe| %.3e  ggml vs f64 ref %.3e  fastpe vs f64 ref "
               "%.3e\n",
               mname[m], max_diff((float *)gs[m].dst->data, xs, (size_t)NH * HD),
               max_err_vs_ref(q0, (float *)gs[m].dst->data, 1, 100000, m == 0, w),
               max_err_vs_ref(q0, xs, 1, 100000, m == 0, w));
    }
    memcpy(cp, q0, N * sizeof(float));
    printf("\n");

    /* ---- prompt: 4096 positions ---- */
    printf("## prompt, 4096 positions x 32 x 128 f32, ms per call (ratio = fastpe / ggml)\n");
    printf("%-8s %-19s %4s %12s %12s %12s %10s %10s\n", "pos", "mode", "thr", "ggml_ext",
           "ggml_inpl", "fastpe", "fp/ext", "fp/inpl");
    for (int o = 0; o < 2; o++)
        for (int m = 0; m < 2; m++) {
            int32_t *pp = (int32_t *)gx[m].pos->data, *pi = (int32_t *)gi[m].pos->data;
            for (int s = 0; s < NP; s++)
                pp[s] = pi[s] = (int32_t)(offs[o] + s);
            for (int t = 0; t < nthr; t++) {
                int nth = threads[t];
                double tg = time_ggml(&gx[m], nth, 1);
                double tgi = time_ggml(&gi[m], nth, 1);
                double tf = time_fastpe(rope, xf, NP, offs[o], layouts[m], nth, 1);
                printf("%-8lld %-19s %4d %12.3f %12.3f %12.3f %10.2f %10.2f\n", (long long)offs[o],
                       mname[m], nth, tg * 1e3, tgi * 1e3, tf * 1e3, tf / tg, tf / tgi);
                fflush(stdout);
            }
        }
    printf("\n## memcpy of q (64 MiB) into a preallocated buffer, 1 thread: %.3f ms\n\n",
           time_memcpy(cp, q0, N) * 1e3);

    /* ---- decode step ---- */
    printf("## decode step: 1 position (100000) x 32 x 128 f32, us per call (batches of %d)\n",
           STEP_BATCH);
    printf("%-19s %4s %12s %12s %10s\n", "mode", "thr", "ggml_ext", "fastpe", "fp/ggml");
    for (int m = 0; m < 2; m++)
        for (int t = 0; t < nthr; t++) {
            int nth = threads[t];
            double tg = time_ggml(&gs[m], nth, STEP_BATCH);
            double tf = time_fastpe(rope, xs, 1, 100000, layouts[m], nth, STEP_BATCH);
            printf("%-19s %4d %12.3f %12.3f %10.2f\n", mname[m], nth, tg * 1e6, tf * 1e6, tf / tg);
            fflush(stdout);
        }
    fastpe_rope_free(rope);
    ggml_free(ctx);
    return 0;
}
