# Included by kernel.pyx (one compilation unit, so that the calls between
# these parts inline as before): the C core's declarations (csrc/pe_core.h).

from libc.stdint cimport int64_t, uint16_t

cdef extern from "csrc/pe_core.h" nogil:
    ctypedef struct pe_freq:
        pass
    ctypedef struct pe_spec:
        int64_t d
        int64_t nf
        double w0
        double base
        double denom
        int layout
        int64_t npairs
        int lone_sin
        int64_t s_off
        int64_t ns
        int64_t c_off
        int64_t nc
        int64_t zero_col
        const double *wlist
    double PE_MAX_TURNS
    double PE_MAX_POSITION
    pe_freq pe_freq_view(double *mem, int64_t nf)
    void pe_freqs(pe_freq fr, int64_t nf, double w0, double base, double denom)
    void pe_freqs_list(pe_freq fr, int64_t nf, const double *w)
    void pe_sincos_row(double K, pe_freq fr, int64_t nf, double *s, double *c, double *cm1)
    void pe_compose(int64_t nf, const double *m1, const double *s1, const double *m0,
                    const double *s0, double *m, double *s)
    void pe_row_f32(float *row, const pe_spec *sp, double zero, const double *As,
                    const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row_f64(double *row, const pe_spec *sp, double zero, const double *As,
                    const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row2_f32(float *rp, float *rm, const pe_spec *sp, double zero, const double *As,
                     const double *Ac, const double *Tm, const double *Ts)
    void pe_row2_f64(double *rp, double *rm, const pe_spec *sp, double zero, const double *As,
                     const double *Ac, const double *Tm, const double *Ts)
    void pe_zero_row_f32(float *row, int64_t d, double zero)
    void pe_zero_row_f64(double *row, int64_t d, double zero)
    void pe_add_row_f32(float *x, const double *pe, int64_t n, double scale)
    void pe_add_row_f64(double *x, const double *pe, int64_t n, double scale)
    void pe_row_f16(uint16_t *row, const pe_spec *sp, double zero, const double *As,
                    const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row_bf16(uint16_t *row, const pe_spec *sp, double zero, const double *As,
                     const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row2_f16(uint16_t *rp, uint16_t *rm, const pe_spec *sp, double zero,
                     const double *As, const double *Ac, const double *Tm, const double *Ts)
    void pe_row2_bf16(uint16_t *rp, uint16_t *rm, const pe_spec *sp, double zero,
                      const double *As, const double *Ac, const double *Tm, const double *Ts)
    void pe_zero_row_f16(uint16_t *row, int64_t d, double zero)
    void pe_zero_row_bf16(uint16_t *row, int64_t d, double zero)
    void pe_add_row_f16(uint16_t *x, const double *pe, int64_t n, double scale)
    void pe_add_row_bf16(uint16_t *x, const double *pe, int64_t n, double scale)
    int pe_row2_v512_f16(uint16_t *rp, uint16_t *rm, const pe_spec *sp, const double *As,
                         const double *Ac, const double *Tm, const double *Ts, int stream)
    int pe_row2_v512_bf16(uint16_t *rp, uint16_t *rm, const pe_spec *sp, const double *As,
                          const double *Ac, const double *Tm, const double *Ts, int stream)
    uint16_t pe_f64_to_f16(double x)
    uint16_t pe_f64_to_bf16(double x)
    float pe_f32_odd(double x)
    float pe_f16_to_f32(uint16_t h)
    float pe_bf16_to_f32(uint16_t h)
    int pe_row2_v512_f32(float *rp, float *rm, const pe_spec *sp, const double *As,
                         const double *Ac, const double *Tm, const double *Ts, int stream)
    int pe_row2_v512_f64(double *rp, double *rm, const pe_spec *sp, const double *As,
                         const double *Ac, const double *Tm, const double *Ts, int stream)
    void pe_v512_init()
    int pe_v512_set(int on)
    int pe_v512_bf16hw_set(int on)
    int pe_v512
    void pe_stream_copy(void *dst, const void *src, size_t n)
    void pe_stream_fence()
    void pe_prefetch_write(const void *p, size_t n)
    int PE_HAVE_STREAM
    int PE_HAVE_V512
    pe_spec pe_spec_vaswani(int64_t d, double base, int layout)
    double pe_spec_max_turns(const pe_spec *sp)


ctypedef fused real:
    float
    double


# The 16-bit outputs, as the fill driver sees them: distinct types (a fused
# type needs them to be), each the uint16_t bits of one entry, handed to the C
# writers as uint16_t * (csrc/pe_half.h).
cdef struct pe_f16:
    uint16_t bits

cdef struct pe_bf16:
    uint16_t bits

# Every element type a fill writes.
ctypedef fused anyreal:
    float
    double
    pe_f16
    pe_bf16
