/*
 * One-row fastpe_fill_f32 calls from C, the library alone (no Python): the cost
 * of a call's own checks and setup.  Build against a static libfastpe, e.g.
 *     cc -O2 -Ilib/include bench/fill_row_timer.c build-lib/libfastpe.a -fopenmp -lm
 *     ./a.out 128
 * prints the best of 20 rounds of 2000 calls at consecutive positions, one thread.
 */
#include <fastpe/fastpe.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    int d = argc > 1 ? atoi(argv[1]) : 1024;
    float *out = (float *)malloc(sizeof(float) * (size_t)(d > 0 ? d : 1));
    double best = 1e9;
    if (out == NULL || d < 1)
        return 2;
    for (int round = 0; round < 20; round++) {
        double t0 = now(), t;
        for (int i = 0; i < 2000; i++) {
            if (fastpe_fill_f32(out, 1, d, d, 10000.0, 123457 + i, FASTPE_LAYOUT_SPLIT, 1) != 0)
                return 1;
        }
        t = (now() - t0) / 2000;
        best = t < best ? t : best;
    }
    printf("fastpe_fill_f32, one row of %d, 1 thread: best of 20 x 2000 calls %.2f us\n", d,
           best * 1e6);
    free(out);
    return 0;
}
