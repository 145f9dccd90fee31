/*
 * A plugin's life: dlopen the shared library, one parallel fill, dlclose, many
 * times over.  No crash (an OpenMP pool outliving its runtime), the same bytes
 * every cycle, and a flat resident size (nothing leaked per cycle).
 *     fastpe_test_dlclose path/to/libfastpe.so [cycles]
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*fill_fn)(float *, int64_t, int64_t, int64_t, double, int64_t, int, int);

static long rss_kib(void) {
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    enum { S = 1024, D = 256 };
    int cycles = argc > 2 ? atoi(argv[2]) : 200;
    float *out = (float *)malloc(sizeof(float) * S * D);
    float *first = (float *)malloc(sizeof(float) * S * D);
    long rss_warm = -1, rss_end;
    if (argc < 2 || out == NULL || first == NULL) {
        fprintf(stderr, "usage: fastpe_test_dlclose libfastpe.so [cycles]\n");
        return 2;
    }
    for (int c = 0; c < cycles; c++) {
        void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (lib == NULL) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        fill_fn fill;
        *(void **)&fill = dlsym(lib, "fastpe_fill_f32");
        if (fill == NULL || fill(out, S, D, D, 1e4, c % 3, 0, 2) != 0) {
            fprintf(stderr, "cycle %d: the fill failed\n", c);
            return 1;
        }
        /* offsets cycle 0, 1, 2: every third cycle repeats cycle 0's fill */
        if (c == 0)
            memcpy(first, out, sizeof(float) * S * D);
        else if (c % 3 == 0 && memcmp(first, out, sizeof(float) * S * D) != 0) {
            fprintf(stderr, "cycle %d: different bytes\n", c);
            return 1;
        }
        if (dlclose(lib) != 0) {
            fprintf(stderr, "dlclose: %s\n", dlerror());
            return 1;
        }
        if (c == 20)
            rss_warm = rss_kib();
    }
    rss_end = rss_kib();
    printf("fastpe_test_dlclose: %d cycles, RSS %ld KiB after 20, %ld KiB at the end\n", cycles,
           rss_warm, rss_end);
    /* 137 KB a cycle would be ~24 MiB over 180 cycles; allow 2 MiB of noise */
    if (rss_warm > 0 && rss_end - rss_warm > 2048) {
        fprintf(stderr, "the resident size grew by %ld KiB\n", rss_end - rss_warm);
        return 1;
    }
    free(out);
    free(first);
    return 0;
}
