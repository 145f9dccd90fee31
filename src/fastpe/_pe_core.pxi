# Included by kernel.pyx: the declarations of the C library it links
# statically (lib/src/pe_lib.h, over the row writers of kernels/pe_core.h).

from libc.stdint cimport int32_t, int64_t, uint16_t

cdef extern from "kernels/pe_core.h" nogil:
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


cdef extern from "pe_lib.h" nogil:
    """
    /* kernel.pxd declares the codes and layouts: the native header must not. */
    #define FASTPE_NO_CONSTANTS 1
    #include "fastpe/fastpe.h"
    """
    bint FASTPE_OPENMP
    int FASTPE_OPENMP_VERSION
    int pe_omp_max_threads()
    int pe_omp_thread_limit()
    int PE_EINTR
    int PE_EINVAL
    int PE_ELAST
    ctypedef struct pe_rows:
        int64_t nseq
        int64_t S
        int64_t offset
        const int64_t *offs
        int64_t offs_stride
        const int64_t *pos_i
        const double *pos_f
        int64_t psb
        int64_t pss
        int has_zero_pos
        int64_t zero_pos
        int add
        double scale
        int fresh
        int accurate
    ctypedef struct pe_anchor_cache:
        double *data
        int64_t centre
    ctypedef int (*pe_poll_fn)(void *ctx) noexcept nogil
    void pe_init()
    int pe_init_error()
    int64_t _block_rows "pe_block_rows"(int64_t nf)
    size_t _plan_doubles "pe_plan_doubles"(int64_t nf, int64_t B)
    int _prepare "pe_prepare"(double *plan, const pe_spec *sp, int64_t first, int64_t count,
                              int nt)
    int pe_threads(int num_threads, int64_t N, int64_t D, int64_t work)
    double _scratch_bound "pe_scratch_bound"(const pe_spec *sp, int64_t rows, int num_threads,
                                             bint add)
    double _max_position "pe_max_position"(const pe_spec *sp)
    bint _frequencies_finite "pe_frequencies_finite"(const pe_spec *sp)
    void _init_rows "pe_init_rows"(pe_rows *rq, int64_t nseq, int64_t S, bint has_zero,
                                   int64_t zero)
    double _extent "pe_extent"(int64_t offset, int64_t S)
    int64_t _floordiv "pe_floordiv"(int64_t a, int64_t b)
    int pe_fill_run(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                    const pe_rows *rq, int num_threads, const double *plan,
                    pe_anchor_cache *ac, pe_poll_fn poll, void *poll_ctx)
    int pe_fill_cached(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                       const pe_rows *rq, int num_threads)
    int pe_plan_cache_snapshot(double *out, int n)
    void pe_anchor_init(pe_anchor_cache *ac)
    void pe_anchor_free(pe_anchor_cache *ac)
    int64_t pe_set_serial_below(int64_t work)
    int64_t pe_set_chunk_entries(int64_t n)
    int64_t pe_chunk_entries()
    void pe_set_stream_bytes(double f64, double f32, double *old_f64, double *old_f32)
    void pe_default_stream_bytes(double *f64, double *f32)
    int pe_usable_cpus()
    int pe_forked_child()
    int pe_cgroup_cpu_quota_in(const char *proc_cgroup, const char *root)
    int64_t pe_cgroup_memory_limit_in(const char *proc_cgroup, const char *root)
    int pe_max_threads()
    int pe_idle_team(int nt)
    int pe_set_idle_teams(int on)
    int pe_idle_estimate(int n, double others, double own, int last)
    const char *pe_strerror(int code)


# The library's functions of the capsule's table (_capi.pxi, kernel.pxd).
# ---- library: generated by tools/gen_capi.py from <fastpe/fastpe.h>, not edited here ----
cdef extern from "fastpe/fastpe.h" nogil:
    int fastpe_fill_f32(float *, int64_t, int64_t, int64_t, double, int64_t, int, int)
    int fastpe_fill_f64(double *, int64_t, int64_t, int64_t, double, int64_t, int, int)
    int fastpe_add_f32(float *, int64_t, int64_t, int64_t, int64_t, double, int64_t, double, int,
                       int)
    int fastpe_add_f64(double *, int64_t, int64_t, int64_t, int64_t, double, int64_t, double, int,
                       int)
    int fastpe_fill_positions_f32(float *, int64_t, int64_t, int64_t, const double *, double, int,
                                  int)
    int fastpe_fill_positions_f64(double *, int64_t, int64_t, int64_t, const double *, double, int,
                                  int)
    int fastpe_add_positions_f32(float *, int64_t, int64_t, int64_t, const double *, double,
                                 double, int, int)
    int fastpe_add_positions_f64(double *, int64_t, int64_t, int64_t, const double *, double,
                                 double, int, int)
    fastpe_spec *fastpe_spec_from_knobs(int64_t, double, const char *, double, double,
                                        const char *, const char *, int, int64_t)
    void fastpe_spec_free(fastpe_spec *)
    int64_t fastpe_spec_d_model(const fastpe_spec *)
    int fastpe_spec_fill_f32(const fastpe_spec *, float *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_f64(const fastpe_spec *, double *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_positions_f32(const fastpe_spec *, float *, int64_t, int64_t,
                                       const double *, int)
    int fastpe_spec_fill_positions_f64(const fastpe_spec *, double *, int64_t, int64_t,
                                       const double *, int)
    int fastpe_spec_add_f32(const fastpe_spec *, float *, int64_t, int64_t, int64_t, int64_t,
                            double, int)
    int fastpe_spec_add_f64(const fastpe_spec *, double *, int64_t, int64_t, int64_t, int64_t,
                            double, int)
    fastpe_rope *fastpe_rope_from_frequencies(const double *, int64_t, double)
    void fastpe_rope_free(fastpe_rope *)
    int64_t fastpe_rope_rotary_dim(const fastpe_rope *)
    int fastpe_rope_cache_f32(const fastpe_rope *, float *, float *, int64_t, int64_t,
                              const int64_t *, int64_t, int, int)
    int fastpe_rope_cache_f64(const fastpe_rope *, double *, double *, int64_t, int64_t,
                              const int64_t *, int64_t, int, int)
    int fastpe_rope_apply_f32(const fastpe_rope *, float *, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, const int64_t *, int64_t, int, int)
    int fastpe_rope_apply_f64(const fastpe_rope *, double *, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, const int64_t *, int64_t, int, int)
    int fastpe_fill_f16(uint16_t *, int64_t, int64_t, int64_t, double, int64_t, int, int)
    int fastpe_fill_bf16(uint16_t *, int64_t, int64_t, int64_t, double, int64_t, int, int)
    int fastpe_add_f16(uint16_t *, int64_t, int64_t, int64_t, int64_t, double, int64_t, double,
                       int, int)
    int fastpe_add_bf16(uint16_t *, int64_t, int64_t, int64_t, int64_t, double, int64_t, double,
                        int, int)
    int fastpe_spec_fill_f16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_bf16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_add_f16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int64_t,
                            double, int)
    int fastpe_spec_add_bf16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int64_t,
                             double, int)
    int fastpe_rope_cache_f16(const fastpe_rope *, uint16_t *, uint16_t *, int64_t, int64_t,
                              const int64_t *, int64_t, int, int)
    int fastpe_rope_cache_bf16(const fastpe_rope *, uint16_t *, uint16_t *, int64_t, int64_t,
                               const int64_t *, int64_t, int, int)
    int fastpe_rope_apply_f16(const fastpe_rope *, uint16_t *, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, const int64_t *, int64_t, int, int)
    int fastpe_rope_apply_bf16(const fastpe_rope *, uint16_t *, int64_t, int64_t, int64_t, int64_t,
                               int64_t, int64_t, const int64_t *, int64_t, int, int)
    fastpe_rope *fastpe_rope_from_axes(const double *, int64_t, const int32_t *, int, double)
    int fastpe_rope_section_axes(const int64_t *, int, int, int32_t *, int64_t)
    int fastpe_rope_n_axes(const fastpe_rope *)
    int fastpe_rope_cache_axes_f32(const fastpe_rope *, float *, float *, int64_t, int64_t,
                                   const int64_t *, int, int)
    int fastpe_rope_cache_axes_f64(const fastpe_rope *, double *, double *, int64_t, int64_t,
                                   const int64_t *, int, int)
    int fastpe_rope_cache_axes_f16(const fastpe_rope *, uint16_t *, uint16_t *, int64_t, int64_t,
                                   const int64_t *, int, int)
    int fastpe_rope_cache_axes_bf16(const fastpe_rope *, uint16_t *, uint16_t *, int64_t, int64_t,
                                    const int64_t *, int, int)
    int fastpe_rope_apply_axes_f32(const fastpe_rope *, float *, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, const int64_t *, int, int)
    int fastpe_rope_apply_axes_f64(const fastpe_rope *, double *, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, const int64_t *, int, int)
    int fastpe_rope_apply_axes_f16(const fastpe_rope *, uint16_t *, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, const int64_t *, int, int)
    int fastpe_rope_apply_axes_bf16(const fastpe_rope *, uint16_t *, int64_t, int64_t, int64_t,
                                    int64_t, int64_t, int64_t, const int64_t *, int, int)
    int fastpe_spec_set_rounding(fastpe_spec *, int)
    int fastpe_rope_set_rounding(fastpe_rope *, int)
# ---- end of the generated block (library) ----


cdef inline int _threads(int num_threads, int64_t N, int64_t D, int64_t work=-1) noexcept nogil:
    """The team size of a fill of N rows of D entries (the library's rule)."""
    return pe_threads(num_threads, N, D, work)


ctypedef fused real:
    float
    double


# The 16-bit outputs, as the fill driver sees them: distinct types (a fused
# type needs them to be), each the uint16_t bits of one entry, handed to the C
# writers as uint16_t * (kernels/pe_half.h).
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
