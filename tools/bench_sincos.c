/*
 * Microbenchmark and bit-identity check of pe_sincos_row (lib/src/kernels/pe_sincos.h),
 * optionally against another version of the header (a "base").
 *
 * Run (from the repository root; the flags are setup.py's):
 *   F="-O3 -ffp-contract=off -fno-math-errno -fno-trapping-math"
 *   gcc $F -Ilib/src tools/bench_sincos.c -lm -o /tmp/bs && /tmp/bs bench
 * That times the target_clones build (the clone this CPU dispatches to); for one
 * ISA add -DFASTPE_NO_CLONES -march=x86-64 (or x86-64-v3, x86-64-v4).
 *
 * Against a base, timed interleaved with it ("bench") or compared bit for bit
 * ("check [scale [seed]]": every output of ~12M*scale (K, i) pairs; exit status
 * 1 on any difference):
 *   mkdir -p /tmp/base && git archive REV lib/src/kernels | tar -x -C /tmp/base
 * --strip-components=2
 * (a REV from before the kernels moved to lib/: src/fastpe/csrc, and the base's
 * include line reads "csrc/": rename the folder to kernels after extracting)
 *   gcc -O2 -march=x86-64 -ffp-contract=off -DFASTPE_NO_CLONES -I/tmp/base \
 *       -DPE_BENCH_ROW_ONLY -c tools/bench_sincos.c -o /tmp/base.o
 *   gcc $F -Ilib/src -DPE_BENCH_BASE tools/bench_sincos.c /tmp/base.o -lm -o /tmp/bs
 *   /tmp/bs bench; /tmp/bs check
 */
#define _POSIX_C_SOURCE 199309L
#include "kernels/pe_sincos.h"

typedef void (*pe_row_fn)(double, pe_freq, int64_t, double *, double *, double *);

#ifdef PE_BENCH_ROW_ONLY
/* The base's row evaluator, called through a pointer so it is compiled out of
 * line (as the clones are). */
pe_row_fn pe_bench_base_row = pe_sincos_row;
#else

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pe_row_fn volatile cur_row = pe_sincos_row;
#ifdef PE_BENCH_BASE
extern pe_row_fn pe_bench_base_row;
#endif

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double *alloc_doubles(size_t n) {
    double *p = aligned_alloc(64, (n * sizeof(double) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ns per element, median over samples of ~20k elements each */
static int bench(int samples) {
    static const int nfs[] = {64, 160, 256, 512};
    static const double Ks[] = {1024.0, 999.5};
    for (int a = 0; a < 4; a++) {
        for (int b = 0; b < 2; b++) {
            int nf = nfs[a];
            double K = Ks[b];
            double *mem = alloc_doubles(4 * (size_t)nf), *out = alloc_doubles(3 * (size_t)nf);
            double *t_cur = alloc_doubles((size_t)samples),
                   *t_base = alloc_doubles((size_t)samples);
            pe_freq fr = pe_freq_view(mem, nf);
            pe_freqs(fr, nf, 1.0, 10000.0, (double)nf);
            int reps = 20000 / nf;
            pe_row_fn fns[2] = {cur_row, cur_row};
#ifdef PE_BENCH_BASE
            fns[1] = pe_bench_base_row;
#endif
            for (int s = 0; s < samples; s++) {
                for (int h = 0; h < 2; h++) {
                    int which = (s & 1) ^ h; /* alternate which goes first */
                    double t0 = now_ns();
                    for (int r = 0; r < reps; r++)
                        fns[which](K, fr, nf, out, out + nf, out + 2 * nf);
                    double dt = (now_ns() - t0) / ((double)reps * nf);
                    (which ? t_base : t_cur)[s] = dt;
                }
            }
            qsort(t_cur, (size_t)samples, sizeof(double), cmp_double);
            qsort(t_base, (size_t)samples, sizeof(double), cmp_double);
#ifdef PE_BENCH_BASE
            printf("nf=%4d K=%7.1f  base %.3f ns/el  current %.3f ns/el  (x%.2f)\n", nf, K,
                   t_base[samples / 2], t_cur[samples / 2],
                   t_base[samples / 2] / t_cur[samples / 2]);
#else
            printf("nf=%4d K=%7.1f  %.3f ns/el\n", nf, K, t_cur[samples / 2]);
#endif
            free(mem);
            free(out);
            free(t_cur);
            free(t_base);
        }
    }
    return 0;
}

#ifdef PE_BENCH_BASE
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double uni(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static long long n_rows, n_pairs, n_bad;

/* Both evaluators on one row (outputs at a random 8-byte offset, prefilled with
 * different garbage); every output bit compared. */
static void check_row(double K, pe_freq fr, int64_t nf, double *bo, double *co, const char *what) {
    int off = (int)(rnd() % 8);
    double *b = bo + off, *c = co + off;
    for (int64_t j = 0; j < 3 * nf; j++) {
        b[j] = uni();
        c[j] = -uni();
    }
    pe_bench_base_row(K, fr, nf, b, b + nf, b + 2 * nf);
    cur_row(K, fr, nf, c, c + nf, c + 2 * nf);
    n_rows++;
    n_pairs += nf;
    if (memcmp(b, c, sizeof(double) * 3 * (size_t)nf) != 0) {
        if (n_bad++ < 10) {
            for (int64_t j = 0; j < 3 * nf; j++) {
                if (memcmp(b + j, c + j, sizeof(double)) != 0) {
                    printf("MISMATCH (%s) K=%a nf=%lld output %lld: base %a current %a\n", what, K,
                           (long long)nf, (long long)j, b[j], c[j]);
                    break;
                }
            }
        }
    }
}

static int check(long scale) {
    static const int nfs[] = {1,   2,   3,   5,   7,   8,    9,    15,   16,   17,   31,
                              33,  63,  64,  65,  100, 127,  160,  255,  256,  257,  320,
                              384, 511, 512, 513, 640, 1000, 1024, 2048, 4096, 8191, 8192};
    const int nnf = (int)(sizeof nfs / sizeof nfs[0]);
    double *mem = alloc_doubles(4 * 8192), *bo = alloc_doubles(3 * 8192 + 8),
           *co = alloc_doubles(3 * 8192 + 8);
    for (int cfg = 0; cfg < 4 * nnf; cfg++) {
        int64_t nf = nfs[cfg % nnf];
        double w0 = 1.0, base = 1e4, denom;
        switch (cfg / nnf) {
        case 0:
            denom = (double)nf;
            break; /* d/2 */
        case 1:
            denom = (double)(nf > 1 ? nf - 1 : 1);
            break; /* h-1 */
        case 2:
            denom = (double)nf - 0.75 + 0.5 * uni();
            break; /* h-shift */
        default:   /* random ladder */
            w0 = exp(uni() * 8 - 4);
            base = exp(uni() * 20 + 0.1);
            denom = (double)nf * (0.5 + uni());
        }
        pe_freq fr = pe_freq_view(mem, nf);
        pe_freqs(fr, nf, w0, base, denom);
        double fmax = 0;
        for (int64_t i = 0; i < nf; i++)
            fmax = fabs(fr.fh[i]) > fmax ? fabs(fr.fh[i]) : fmax;
        double kmax = PE_MAX_TURNS / fmax; /* |K| * fmax < 2^45 turns */
        long reps = scale * (nf >= 1024 ? 6 : 40);
        for (long r = 0; r < reps; r++) {
            double sg = (rnd() & 1) ? -1.0 : 1.0;
            double Ki = sg * floor(exp2(uni() * 40));             /* |K| in [1, 2^40] */
            double Kf = sg * exp2(uni() * 40 - 10) * (1 + uni()); /* fractional */
            check_row(Ki, fr, nf, bo, co, "integer");
            check_row(Kf, fr, nf, bo, co, "fraction");
            check_row(floor(Kf) + 0.5, fr, nf, bo, co, "half");
            check_row((double)((int64_t)(rnd() % 41) - 20), fr, nf, bo, co, "small");
            check_row((uni() - 0.5) * 8, fr, nf, bo, co, "small fraction");
            double Kb = floor(kmax * (1 - uni() * 1e-3));
            if (Kb * fmax >= PE_MAX_TURNS)
                Kb -= 1;
            check_row(sg * Kb, fr, nf, bo, co, "largest integer");
            check_row(-sg * kmax * (1 - uni() * 1e-2), fr, nf, bo, co, "largest fraction");
            check_row(ldexp(1.0, (int)(rnd() % 40)) * (double)(rnd() % 7 + 1), fr, nf, bo, co,
                      "power of two");
        }
        check_row(0.0, fr, nf, bo, co, "0");
        check_row(-0.0, fr, nf, bo, co, "-0");
        check_row(1.0, fr, nf, bo, co, "1");
        check_row(-1.0, fr, nf, bo, co, "-1");
    }
    printf("%lld rows, %lld (K, i) pairs (x3 outputs) compared: %lld rows differ\n", n_rows,
           n_pairs, n_bad);
    free(mem);
    free(bo);
    free(co);
    return n_bad != 0;
}
#endif

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "bench";
    if (strcmp(mode, "bench") == 0)
        return bench(argc > 2 ? atoi(argv[2]) : 201);
#ifdef PE_BENCH_BASE
    if (strcmp(mode, "check") == 0) {
        if (argc > 3)
            rng_state = strtoull(argv[3], NULL, 0);
        return check(argc > 2 ? atol(argv[2]) : 1);
    }
#endif
    fprintf(stderr, "usage: %s bench [samples] | check [scale [seed]] (check: built with a base)\n",
            argv[0]);
    return 2;
}
#endif
