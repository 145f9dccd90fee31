/*
 * What a per-entry rounding test costs the float32 table writer: the mirrored
 * pair loop of lib/src/kernels/pe_rows.inc.h (rows +t and -t from one anchor
 * row and one table row), timed as it is and with each of two tests that
 * decide whether an entry's float32 rounding is certain given an absolute error
 * bound e of its double value:
 *   int  -- the interval [v - e, v + e] holds no float32 midpoint: the double
 *           bits of both ends, plus half a float32 ulp in the low 29 bits, agree
 *           above bit 28 (integer adds and one xor per entry);
 *   cvt  -- v - e and v + e round to the same float32 (two conversions);
 *   fold -- as int, with As -+ e and Ac -+ e kept as columns (more loads, one add
 *           fewer).
 * Each test also gives the same stored entries as the plain loop (checked).
 *
 * Run (from the repository root; the flags are setup.py's, the AVX2 clone's ISA):
 *   gcc -O3 -ffp-contract=off -fno-math-errno -fno-trapping-math -march=x86-64-v3 \
 *       tools/bench_round_test.c -lm -o /tmp/brt && /tmp/brt [rounds]
 * It prints, per variant, the min and median time of one 4096 x 1024 table over
 * the rounds (variants interleaved within each round), and the ratio to the plain
 * loop.  Where it runs: docs/performance.md ("A rounding test for 16/32-bit").
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SEQ     4096
#define DM      1024
#define NP      (DM / 2)
#define C28     (UINT64_C(1) << 28)
#define ABOVE28 (~((UINT64_C(1) << 29) - 1))

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline uint64_t bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Whether [lo, hi] holds a float32 rounding boundary (normal float32 range). */
static inline uint64_t straddles(double lo, double hi) {
    return (bits(lo) + C28) ^ (bits(hi) + C28);
}

__attribute__((noinline)) static int plain(float *restrict rp, float *restrict rm,
                                           const double *restrict As, const double *restrict Ac,
                                           const double *restrict Tm, const double *restrict Ts,
                                           double e) {
    (void)e;
    for (int64_t i = 0; i < NP; i++) {
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i], p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
        rp[2 * i] = (float)(As[i] + (p1 + p2));
        rp[2 * i + 1] = (float)(Ac[i] + (p3 - p4));
        rm[2 * i] = (float)(As[i] + (p1 - p2));
        rm[2 * i + 1] = (float)(Ac[i] + (p3 + p4));
    }
    return 0;
}

__attribute__((noinline)) static int int_test(float *restrict rp, float *restrict rm,
                                              const double *restrict As, const double *restrict Ac,
                                              const double *restrict Tm, const double *restrict Ts,
                                              double e) {
    uint64_t f = 0;
    for (int64_t i = 0; i < NP; i++) {
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i], p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
        double v0 = As[i] + (p1 + p2), v1 = Ac[i] + (p3 - p4);
        double v2 = As[i] + (p1 - p2), v3 = Ac[i] + (p3 + p4);
        f |= straddles(v0 - e, v0 + e) | straddles(v1 - e, v1 + e);
        f |= straddles(v2 - e, v2 + e) | straddles(v3 - e, v3 + e);
        rp[2 * i] = (float)v0;
        rp[2 * i + 1] = (float)v1;
        rm[2 * i] = (float)v2;
        rm[2 * i + 1] = (float)v3;
    }
    return (f & ABOVE28) != 0;
}

__attribute__((noinline)) static int cvt_test(float *restrict rp, float *restrict rm,
                                              const double *restrict As, const double *restrict Ac,
                                              const double *restrict Tm, const double *restrict Ts,
                                              double e) {
    int f = 0;
    for (int64_t i = 0; i < NP; i++) {
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i], p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
        double v0 = As[i] + (p1 + p2), v1 = Ac[i] + (p3 - p4);
        double v2 = As[i] + (p1 - p2), v3 = Ac[i] + (p3 + p4);
        float a0 = (float)(v0 - e), a1 = (float)(v1 - e), a2 = (float)(v2 - e),
              a3 = (float)(v3 - e);
        f |= (a0 != (float)(v0 + e)) | (a1 != (float)(v1 + e));
        f |= (a2 != (float)(v2 + e)) | (a3 != (float)(v3 + e));
        /* Where the test passes, v - e rounds as v does. */
        rp[2 * i] = a0;
        rp[2 * i + 1] = a1;
        rm[2 * i] = a2;
        rm[2 * i + 1] = a3;
    }
    return f;
}

static double Asl[NP], Ash[NP], Acl[NP], Ach[NP];

__attribute__((noinline)) static int fold_test(float *restrict rp, float *restrict rm,
                                               const double *restrict As, const double *restrict Ac,
                                               const double *restrict Tm, const double *restrict Ts,
                                               double e) {
    uint64_t f = 0;
    (void)e;
    for (int64_t i = 0; i < NP; i++) {
        double p1 = As[i] * Tm[i], p2 = Ac[i] * Ts[i], p3 = Ac[i] * Tm[i], p4 = As[i] * Ts[i];
        double s0 = p1 + p2, s1 = p3 - p4, s2 = p1 - p2, s3 = p3 + p4;
        double l0 = Asl[i] + s0, l1 = Acl[i] + s1, l2 = Asl[i] + s2, l3 = Acl[i] + s3;
        f |= straddles(l0, Ash[i] + s0) | straddles(l1, Ach[i] + s1);
        f |= straddles(l2, Ash[i] + s2) | straddles(l3, Ach[i] + s3);
        rp[2 * i] = (float)l0;
        rp[2 * i + 1] = (float)l1;
        rm[2 * i] = (float)l2;
        rm[2 * i + 1] = (float)l3;
    }
    return (f & ABOVE28) != 0;
}

typedef int (*writer)(float *restrict, float *restrict, const double *restrict,
                      const double *restrict, const double *restrict, const double *restrict,
                      double);

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    static const char *names[] = {"plain", "int", "cvt", "fold"};
    static const writer fns[] = {plain, int_test, cvt_test, fold_test};
    enum { NV = 4 };
    int rounds = argc > 1 ? atoi(argv[1]) : 40, flagged = 0;
    double *As = malloc(sizeof(double) * NP), *Ac = malloc(sizeof(double) * NP);
    double *Tm = malloc(sizeof(double) * NP), *Ts = malloc(sizeof(double) * NP);
    double *t = malloc(sizeof(double) * (size_t)rounds * NV), e = ldexp(1.0, -50);
    float *out = aligned_alloc(64, sizeof(float) * SEQ * DM);
    float *ref = aligned_alloc(64, sizeof(float) * 2 * DM);
    if (!As || !Ac || !Tm || !Ts || !t || !out || !ref || rounds < 1)
        return 2;
    for (int i = 0; i < NP; i++) {
        double w = pow(10000.0, -2.0 * i / DM);
        As[i] = sin(1000.0 * w);
        Ac[i] = cos(1000.0 * w);
        Tm[i] = cos(3.0 * w) - 1.0;
        Ts[i] = sin(3.0 * w);
        Asl[i] = As[i] - e;
        Ash[i] = As[i] + e;
        Acl[i] = Ac[i] - e;
        Ach[i] = Ac[i] + e;
    }
    /* The two tests agree entry by entry where flags are common (e = 2^-30). */
    uint64_t seed = 12345;
    int64_t both = 0;
    for (int k = 0; k < 10000000; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        double v = ldexp((double)(seed >> 11), -53) * 2.0 - 1.0, big = ldexp(1.0, -30);
        int a = (straddles(v - big, v + big) & ABOVE28) != 0;
        int b = (float)(v - big) != (float)(v + big);
        if (a != b && fabs(v) > 0x1p-100) {
            fprintf(stderr, "the tests disagree at %a\n", v);
            return 1;
        }
        both += a;
    }
    printf("tests agree on 10M random entries (%lld flagged at e = 2^-30)\n", (long long)both);
    memset(out, 0, sizeof(float) * SEQ * DM);
    plain(ref, ref + DM, As, Ac, Tm, Ts, e);
    for (int v = 1; v < NV; v++) {
        fns[v](out, out + DM, As, Ac, Tm, Ts, e);
        if (memcmp(out, ref, sizeof(float) * 2 * DM) != 0) {
            fprintf(stderr, "%s stores other entries than the plain loop\n", names[v]);
            return 1;
        }
    }
    for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < NV; v++) {
            double t0 = now();
            for (int64_t row = 0; row < SEQ; row += 2)
                flagged += fns[v](out + row * DM, out + (row + 1) * DM, As, Ac, Tm, Ts, e);
            t[v * rounds + r] = now() - t0;
        }
    }
    double base_min = 0, base_med = 0;
    for (int v = 0; v < NV; v++) {
        double *s = t + v * rounds;
        qsort(s, (size_t)rounds, sizeof(double), cmp);
        double mn = s[0] * 1e6, md = s[rounds / 2] * 1e6;
        if (v == 0) {
            base_min = mn;
            base_med = md;
        }
        printf("%-6s min %7.0f us  median %7.0f us  ratio min %.2f  median %.2f\n", names[v], mn,
               md, mn / base_min, md / base_med);
    }
    printf("rows flagged: %d\n", flagged);
    return 0;
}
