// An installed libfastpe from C++ (the header's extern "C" block).
#include <fastpe/fastpe.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    const int64_t seq_len = 32, d_model = 6;
    std::vector<float> pe(seq_len * d_model);
    int err =
        fastpe_fill_f32(pe.data(), seq_len, d_model, d_model, 10000.0, -5, FASTPE_LAYOUT_SPLIT, 1);
    if (err != FASTPE_OK) {
        std::fprintf(stderr, "fastpe: %s\n", fastpe_strerror(err));
        return 1;
    }
    // split layout: sines in columns 0..2, cosines in 3..5; row r is position r - 5
    for (int64_t r = 0; r < seq_len; r++) {
        for (int i = 0; i < 3; i++) {
            double a = static_cast<double>(r - 5) * std::pow(10000.0, -2.0 * i / 6.0);
            if (std::fabs(pe[r * 6 + i] - static_cast<float>(std::sin(a))) > 1e-7f ||
                std::fabs(pe[r * 6 + 3 + i] - static_cast<float>(std::cos(a))) > 1e-7f) {
                std::fprintf(stderr, "row %lld differs from libm\n", static_cast<long long>(r));
                return 1;
            }
        }
    }
    if (fastpe_fill_f32(pe.data(), 1, 0, 0, 10000.0, 0, FASTPE_LAYOUT_SPLIT, 1) != FASTPE_ESIZE)
        return 1;
    std::printf("C++ consumer: ok\n");
    return 0;
}
