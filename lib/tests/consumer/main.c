/* An installed libfastpe from C: the README's example, checked against libm. */
#include <fastpe/fastpe.h>

#include <math.h>
#include <stdio.h>

int main(void) {
    double pe[16 * 8];
    int err = fastpe_fill_f64(pe, 16, 8, 8, 10000.0, 0, FASTPE_LAYOUT_INTERLEAVED, 0);
    if (err != FASTPE_OK) {
        fprintf(stderr, "fastpe: %s\n", fastpe_strerror(err));
        return 1;
    }
    /* row k, columns 2i and 2i+1: sin and cos of k * 10000^(-2i/8) */
    for (int k = 0; k < 16; k++) {
        for (int i = 0; i < 4; i++) {
            double w = pow(10000.0, -2.0 * i / 8.0);
            if (fabs(pe[8 * k + 2 * i] - sin(k * w)) > 1e-15 ||
                fabs(pe[8 * k + 2 * i + 1] - cos(k * w)) > 1e-15) {
                fprintf(stderr, "row %d frequency %d differs from libm\n", k, i);
                return 1;
            }
        }
    }
    printf("C consumer: ok\n");
    return 0;
}
