# Cython-level API of the fastpe kernel:  from fastpe.kernel cimport fill_f32, fill_f64
#
# Both fill a (seq_len, d_model) table whose row r starts at out + r*row_stride
# (row_stride in elements, >= d_model) with the encoding of positions
# offset .. offset+seq_len-1.  They take no GIL, may be called from any thread,
# validate every argument and return 0 or one of the FASTPE_E* codes below.
from libc.stdint cimport int32_t, int64_t, uint16_t

cdef enum:
    FASTPE_LAYOUT_INTERLEAVED = 0
    FASTPE_LAYOUT_SPLIT = 1

cdef enum:
    FASTPE_OK = 0
    FASTPE_ENULL = 1       # out is NULL while seq_len > 0
    FASTPE_ESIZE = 2       # seq_len < 0, d_model < 1 or > 2^40, rows beyond int64
    FASTPE_ESTRIDE = 3     # row_stride < d_model (rows would overlap)
    FASTPE_EBASE = 4       # base not finite and > 0, or its frequencies overflow
    FASTPE_ELAYOUT = 5     # unknown layout
    FASTPE_ERANGE = 6      # positions NaN, infinite or too large for an exact reduction
    FASTPE_ENOMEM = 7      # scratch allocation failed
    FASTPE_ESCALE = 8      # scale is not finite (add_*)
    FASTPE_EOVERLAP = 9    # positions overlap the rows being written (*_positions_*)

cdef int fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil
cdef int fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil

# ABI 1.1.  x = x*scale + PE for nseq sequences of seq_len rows each (row r of
# sequence b at x + (b*seq_len + r)*row_stride), positions offset .. offset+seq_len-1:
cdef int add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil
cdef int add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil
# Row r encodes positions[r] (any finite real; integers give the fill_* rows bitwise):
cdef int fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil
cdef int fill_positions_f64(double *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil
cdef int add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil
cdef int add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil

# ABI 1.2.  Every convention, through a compiled encoding: an opaque handle made
# once with the GIL (from a convention's name or a fastpe.Convention, or from the
# knobs of one; raises with the Python API's messages), used without the GIL from
# any thread, and freed with spec_free.  The fill functions return the codes above.
cdef extern from *:
    """
    struct fastpe_spec;
    """
    cdef struct fastpe_spec:
        pass

cdef fastpe_spec *spec_new(object convention, int64_t d_model) except NULL
cdef fastpe_spec *spec_from_knobs(int64_t d_model, double base, const char *denominator,
                                  double shift, double position_scale, const char *layout,
                                  const char *odd, int has_padding_idx,
                                  int64_t padding_idx) except NULL
cdef void spec_free(fastpe_spec *h) noexcept nogil
cdef int64_t spec_d_model(const fastpe_spec *h) noexcept nogil
cdef int spec_fill_f32(const fastpe_spec *h, float *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil
cdef int spec_fill_f64(const fastpe_spec *h, double *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil
cdef int spec_fill_positions_f32(const fastpe_spec *h, float *out, int64_t n, int64_t row_stride,
                                 const double *positions, int num_threads) noexcept nogil
cdef int spec_fill_positions_f64(const fastpe_spec *h, double *out, int64_t n,
                                 int64_t row_stride, const double *positions,
                                 int num_threads) noexcept nogil
cdef int spec_add_f32(const fastpe_spec *h, float *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil
cdef int spec_add_f64(const fastpe_spec *h, double *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil

# ABI 1.3.  RoPE: a handle made once with the GIL -- from fastpe.rope_frequencies'
# arguments (max_position_embeddings 0, seq_len -1, precision NULL: not given) or
# from a model's own inv_freq -- then used without the GIL.  The cache writes n rows
# of cos and sin (2*nf = rotary_dim entries each, at row_stride) for positions[r]
# (NULL: offset + r); the rotation turns the first rotary_dim entries of every row
# (b, s, h) at x + b*stride_batch + s*stride_seq + h*stride_head (elements) by the
# angles of positions[b*seq + s] (NULL: offset + s).  layout: FASTPE_LAYOUT_SPLIT
# for the half-split (rotate_half) pairs, FASTPE_LAYOUT_INTERLEAVED for GPT-J's.
cdef extern from *:
    """
    struct fastpe_rope;
    """
    cdef struct fastpe_rope:
        pass

cdef fastpe_rope *rope_new(object rope_parameters, int64_t head_dim,
                           int64_t max_position_embeddings, int64_t seq_len,
                           const char *precision) except NULL
cdef fastpe_rope *rope_from_frequencies(const double *inv_freq, int64_t nf,
                                        double attention_factor) except NULL
cdef void rope_free(fastpe_rope *h) noexcept nogil
cdef int64_t rope_rotary_dim(const fastpe_rope *h) noexcept nogil
cdef int rope_cache_f32(const fastpe_rope *h, float *cos, float *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil
cdef int rope_cache_f64(const fastpe_rope *h, double *cos, double *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil
cdef int rope_apply_f32(const fastpe_rope *h, float *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset,
                        int layout, int num_threads) noexcept nogil
cdef int rope_apply_f64(const fastpe_rope *h, double *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset,
                        int layout, int num_threads) noexcept nogil

# ABI 1.3.  float16 and bfloat16 outputs as uint16_t bit patterns, each entry rounded
# once from the float64 result; the arguments and codes of their float32 twins.
cdef int fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride, double base,
                  int64_t offset, int layout, int num_threads) noexcept nogil
cdef int fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride, double base,
                   int64_t offset, int layout, int num_threads) noexcept nogil
cdef int add_f16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil
cdef int add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, double scale, int layout,
                  int num_threads) noexcept nogil
cdef int spec_fill_f16(const fastpe_spec *h, uint16_t *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil
cdef int spec_fill_bf16(const fastpe_spec *h, uint16_t *out, int64_t seq_len, int64_t row_stride,
                        int64_t offset, int num_threads) noexcept nogil
cdef int spec_add_f16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil
cdef int spec_add_bf16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                       int64_t row_stride, int64_t offset, double scale,
                       int num_threads) noexcept nogil
cdef int rope_cache_f16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil
cdef int rope_cache_bf16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                         int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                         int num_threads) noexcept nogil
cdef int rope_apply_f16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil
cdef int rope_apply_bf16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                         int64_t heads, int64_t stride_batch, int64_t stride_seq,
                         int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                         int num_threads) noexcept nogil

# ABI 1.4.  Multi-axis positions (M-RoPE, axial RoPE): frequency i of token t turns by
# positions[t*n_axes + axis[i]] * inv_freq[i].  rope_from_axes needs the GIL (NULL with
# the Python API's exception); rope_section_axes fills axis[0 .. nf-1] from sections
# (FASTPE_SECTIONS_CONTIGUOUS 0 or _INTERLEAVED 1); the cache and rotation take the
# positions (required) of n_axes entries per token and no offset.
cdef fastpe_rope *rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                 int n_axes, double attention_factor) except NULL
cdef int rope_section_axes(const int64_t *sections, int n_axes, int section_layout,
                           int32_t *axis, int64_t nf) noexcept nogil
cdef int rope_n_axes(const fastpe_rope *h) noexcept nogil
cdef int rope_cache_axes_f32(const fastpe_rope *h, float *cos, float *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_cache_axes_f64(const fastpe_rope *h, double *cos, double *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_cache_axes_f16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_cache_axes_bf16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                              int64_t row_stride, const int64_t *positions, int layout,
                              int num_threads) noexcept nogil
cdef int rope_apply_axes_f32(const fastpe_rope *h, float *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_apply_axes_f64(const fastpe_rope *h, double *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_apply_axes_f16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil
cdef int rope_apply_axes_bf16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                              int64_t heads, int64_t stride_batch, int64_t stride_seq,
                              int64_t stride_head, const int64_t *positions, int layout,
                              int num_threads) noexcept nogil
