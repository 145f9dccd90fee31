/*
 * fastpe.h -- the C API of fastpe, for other compiled extensions.
 *
 * Fill sinusoidal positional-encoding tables from C without the GIL and with
 * no link-time dependency on fastpe: the functions are reached through a
 * table that fastpe.kernel publishes in a capsule (NumPy's import_array()
 * pattern).
 *
 *     #include "fastpe.h"          // include dir: fastpe.get_include()
 *
 *     PyMODINIT_FUNC PyInit_mymod(void) {
 *         if (import_fastpe() < 0) return NULL;     // ImportError is set
 *         ...
 *     }
 *     ...
 *     int err = fastpe_fill_f32(buf, seq_len, d_model, d_model, 10000.0, 0,
 *                               FASTPE_LAYOUT_INTERLEAVED, 0);
 *
 * The table
 * ---------
 * Row r (0 <= r < seq_len) starts at out + r*row_stride and holds position
 * k = offset + r.  With w_i = base^(-2i/d_model):
 *   FASTPE_LAYOUT_INTERLEAVED: row[2i] = sin(k w_i), row[2i+1] = cos(k w_i)
 *   FASTPE_LAYOUT_SPLIT:       row[i] = sin(k w_i), row[ns+i] = cos(k w_i),
 *                              ns = ceil(d_model/2)
 * For odd d_model the extra column is the sine of the next frequency.  Values
 * are bitwise identical to fastpe.sinusoidal(..., dtype=float32/float64) and
 * independent of num_threads.
 *
 * Arguments
 * ---------
 * row_stride   distance between row starts, in ELEMENTS (not bytes), >= d_model
 *              (only checked when seq_len > 1).  Only the d_model entries of
 *              each row are written, so a column window of a wider matrix can
 *              be filled in place (out = M + col0, row_stride = M's width).
 *              The caller guarantees the memory: (seq_len-1)*row_stride + d_model
 *              elements.
 * base         finite and > 0 (10000 in the paper).
 * offset       first position; may be negative.
 * layout       FASTPE_LAYOUT_INTERLEAVED or FASTPE_LAYOUT_SPLIT.
 * num_threads  OpenMP threads for this call; <= 0 means the OpenMP default
 *              (OMP_NUM_THREADS...).  Small tables always run on one thread;
 *              a serial build of fastpe always runs on one thread.
 * out may be NULL when seq_len == 0 (nothing is written).
 *
 * Return value: FASTPE_OK (0), or a FASTPE_E* code below; arguments are
 * validated before anything is written, so on an error `out` is untouched.
 *
 * Memory
 * ------
 * The rows written must not overlap any input of the same call: the
 * `positions` array of the *_positions_* functions is read while rows are
 * written, so it must not lie inside [out, out + (n-1)*row_stride + d_model).
 * That overlap is detected (bounds only) and refused with FASTPE_EOVERLAP
 * before anything is written.  Python callers need not care: fastpe's Python
 * functions copy an overlapping input first, as NumPy's ufuncs do.
 *
 * Threads and the GIL
 * -------------------
 * import_fastpe() calls into Python: call it with the GIL held (in your
 * module's init function).  After that, fastpe_fill_f32/f64 never touch Python:
 * call them without the GIL, from any thread (including threads that have
 * never seen Python, and from inside your own OpenMP regions), concurrently
 * into different buffers.  Each call allocates its own scratch memory.  When
 * calling from your own parallel loop, pass num_threads = 1 to avoid
 * oversubscription (nested OpenMP teams) unless you mean it.
 *
 * One pointer per translation unit
 * --------------------------------
 * The table pointer below is `static`: every C file that calls fastpe must
 * call import_fastpe() itself (it is cheap: an import that is already done
 * and a capsule lookup).  Calling a fill function in a file where
 * import_fastpe() has not succeeded returns FASTPE_ENOTIMPORTED.
 *
 * ABI policy
 * ----------
 * The capsule table starts with its version (major, minor) and its size.
 * - New capabilities are APPENDED to the end of the table and bump
 *   FASTPE_ABI_MINOR; existing members never move or change signature.
 * - Anything incompatible bumps FASTPE_ABI_MAJOR.
 * import_fastpe() requires the installed fastpe to have the same major and a
 * minor (and table size) >= the ones of this header, and raises ImportError
 * naming both versions otherwise -- so an extension built against a newer or
 * incompatible fastpe fails at import, never by calling the wrong function.
 * Error codes and layout values never change meaning.
 */
#ifndef FASTPE_H
#define FASTPE_H

#include <Python.h> /* PyObject (spec constructors, import_fastpe) */
#include <stddef.h>
#include <stdint.h>

#define FASTPE_ABI_MAJOR    1
#define FASTPE_ABI_MINOR    4
#define FASTPE_CAPSULE_NAME "fastpe.kernel._C_API"

typedef int (*fastpe_fill_f32_fn)(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                                  double base, int64_t offset, int layout, int num_threads);
typedef int (*fastpe_fill_f64_fn)(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                                  double base, int64_t offset, int layout, int num_threads);

/* ABI 1.1: the fused add into existing rows, and explicit positions. */
typedef int (*fastpe_add_f32_fn)(float *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                                 int64_t row_stride, double base, int64_t offset, double scale,
                                 int layout, int num_threads);
typedef int (*fastpe_add_f64_fn)(double *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                                 int64_t row_stride, double base, int64_t offset, double scale,
                                 int layout, int num_threads);
typedef int (*fastpe_fill_positions_f32_fn)(float *out, int64_t n, int64_t d_model,
                                            int64_t row_stride, const double *positions,
                                            double base, int layout, int num_threads);
typedef int (*fastpe_fill_positions_f64_fn)(double *out, int64_t n, int64_t d_model,
                                            int64_t row_stride, const double *positions,
                                            double base, int layout, int num_threads);
typedef int (*fastpe_add_positions_f32_fn)(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                                           const double *positions, double base, double scale,
                                           int layout, int num_threads);
typedef int (*fastpe_add_positions_f64_fn)(double *x, int64_t n, int64_t d_model,
                                           int64_t row_stride, const double *positions, double base,
                                           double scale, int layout, int num_threads);

/* ABI 1.2: every convention, through a compiled spec.  A spec is made once, with
   the GIL held (from a convention's name or a fastpe.Convention, or from the raw
   knobs of one; NULL with a Python exception set on bad arguments, with the
   messages of the Python API), then used by the fill functions from any thread
   without the GIL, concurrently, and freed with spec_free (no GIL needed).  It
   holds the validated spec only: the plans (frequencies and rotation table) come
   from a cache fastpe keeps for C callers, shared between specs of equal
   frequencies. */
typedef struct fastpe_spec fastpe_spec;
typedef fastpe_spec *(*fastpe_spec_new_fn)(PyObject *convention, int64_t d_model);
typedef fastpe_spec *(*fastpe_spec_from_knobs_fn)(int64_t d_model, double base,
                                                  const char *denominator, double shift,
                                                  double position_scale, const char *layout,
                                                  const char *odd, int has_padding_idx,
                                                  int64_t padding_idx);
typedef void (*fastpe_spec_free_fn)(fastpe_spec *spec);
typedef int64_t (*fastpe_spec_d_model_fn)(const fastpe_spec *spec);
typedef int (*fastpe_spec_fill_f32_fn)(const fastpe_spec *spec, float *out, int64_t seq_len,
                                       int64_t row_stride, int64_t offset, int num_threads);
typedef int (*fastpe_spec_fill_f64_fn)(const fastpe_spec *spec, double *out, int64_t seq_len,
                                       int64_t row_stride, int64_t offset, int num_threads);
typedef int (*fastpe_spec_fill_positions_f32_fn)(const fastpe_spec *spec, float *out, int64_t n,
                                                 int64_t row_stride, const double *positions,
                                                 int num_threads);
typedef int (*fastpe_spec_fill_positions_f64_fn)(const fastpe_spec *spec, double *out, int64_t n,
                                                 int64_t row_stride, const double *positions,
                                                 int num_threads);
typedef int (*fastpe_spec_add_f32_fn)(const fastpe_spec *spec, float *x, int64_t nseq,
                                      int64_t seq_len, int64_t row_stride, int64_t offset,
                                      double scale, int num_threads);
typedef int (*fastpe_spec_add_f64_fn)(const fastpe_spec *spec, double *x, int64_t nseq,
                                      int64_t seq_len, int64_t row_stride, int64_t offset,
                                      double scale, int num_threads);

/* ABI 1.3: RoPE.  A handle is made once with the GIL held -- from the arguments of
   fastpe.rope_frequencies (rope_parameters a mapping or None; max_position_embeddings
   0, seq_len -1 and precision NULL: not given), or from a model's own inv_freq (nf
   entries) and attention factor -- NULL with a Python exception set on bad
   arguments.  It holds its own copy of the frequencies and of the plan fastpe's
   encoding cache prepared for them; used from any thread without the GIL; freed
   with rope_free (no GIL needed).  rotary_dim = 2*nf.
   rope_cache_*: n rows of cos and sin (rotary_dim entries each, at row_stride >=
   rotary_dim) for positions[r] (positions NULL: offset + r), bitwise
   fastpe.rope_cache's; cos and sin must not share an element (FASTPE_EOVERLAP;
   decided on elements: the two halves of one buffer's rows are fine).  Both
   functions read every position before writing: positions may lie in the output.
   rope_apply_*: rotates in place the first rotary_dim entries of the row (b, s, h)
   at x + b*stride_batch + s*stride_seq + h*stride_head (strides in ELEMENTS, any
   sign; rows whose rotated entries would overlap: FASTPE_ESTRIDE) by the angles of
   positions[b*seq + s] (positions NULL: offset + s), bitwise fastpe.apply_rope's.
   layout: FASTPE_LAYOUT_SPLIT for the half-split (rotate_half) pairs,
   FASTPE_LAYOUT_INTERLEAVED for GPT-J's.  Positions beyond the exact reduction:
   FASTPE_ERANGE. */
typedef struct fastpe_rope fastpe_rope;
typedef fastpe_rope *(*fastpe_rope_new_fn)(PyObject *rope_parameters, int64_t head_dim,
                                           int64_t max_position_embeddings, int64_t seq_len,
                                           const char *precision);
typedef fastpe_rope *(*fastpe_rope_from_frequencies_fn)(const double *inv_freq, int64_t nf,
                                                        double attention_factor);
typedef void (*fastpe_rope_free_fn)(fastpe_rope *rope);
typedef int64_t (*fastpe_rope_rotary_dim_fn)(const fastpe_rope *rope);
typedef int (*fastpe_rope_cache_f32_fn)(const fastpe_rope *rope, float *cos, float *sin, int64_t n,
                                        int64_t row_stride, const int64_t *positions,
                                        int64_t offset, int layout, int num_threads);
typedef int (*fastpe_rope_cache_f64_fn)(const fastpe_rope *rope, double *cos, double *sin,
                                        int64_t n, int64_t row_stride, const int64_t *positions,
                                        int64_t offset, int layout, int num_threads);
typedef int (*fastpe_rope_apply_f32_fn)(const fastpe_rope *rope, float *x, int64_t batch,
                                        int64_t seq, int64_t heads, int64_t stride_batch,
                                        int64_t stride_seq, int64_t stride_head,
                                        const int64_t *positions, int64_t offset, int layout,
                                        int num_threads);
typedef int (*fastpe_rope_apply_f64_fn)(const fastpe_rope *rope, double *x, int64_t batch,
                                        int64_t seq, int64_t heads, int64_t stride_batch,
                                        int64_t stride_seq, int64_t stride_head,
                                        const int64_t *positions, int64_t offset, int layout,
                                        int num_threads);

/* ABI 1.3: float16 and bfloat16 outputs, as uint16_t bit patterns (IEEE binary16 and
   the upper half of a float32): each entry is the correct rounding of the float64
   result (rounded once, never through float32), bitwise fastpe's dtype=np.float16 /
   "bfloat16".  Same arguments, checks and codes as the float32 functions above;
   add_* compute x*scale + PE in float64 and round once. */
typedef int (*fastpe_fill_f16_fn)(uint16_t *out, int64_t seq_len, int64_t d_model,
                                  int64_t row_stride, double base, int64_t offset, int layout,
                                  int num_threads);
typedef int (*fastpe_fill_bf16_fn)(uint16_t *out, int64_t seq_len, int64_t d_model,
                                   int64_t row_stride, double base, int64_t offset, int layout,
                                   int num_threads);
typedef int (*fastpe_add_f16_fn)(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                                 int64_t row_stride, double base, int64_t offset, double scale,
                                 int layout, int num_threads);
typedef int (*fastpe_add_bf16_fn)(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                                  int64_t row_stride, double base, int64_t offset, double scale,
                                  int layout, int num_threads);
typedef int (*fastpe_spec_fill_f16_fn)(const fastpe_spec *spec, uint16_t *out, int64_t seq_len,
                                       int64_t row_stride, int64_t offset, int num_threads);
typedef int (*fastpe_spec_fill_bf16_fn)(const fastpe_spec *spec, uint16_t *out, int64_t seq_len,
                                        int64_t row_stride, int64_t offset, int num_threads);
typedef int (*fastpe_spec_add_f16_fn)(const fastpe_spec *spec, uint16_t *x, int64_t nseq,
                                      int64_t seq_len, int64_t row_stride, int64_t offset,
                                      double scale, int num_threads);
typedef int (*fastpe_spec_add_bf16_fn)(const fastpe_spec *spec, uint16_t *x, int64_t nseq,
                                       int64_t seq_len, int64_t row_stride, int64_t offset,
                                       double scale, int num_threads);
typedef int (*fastpe_rope_cache_f16_fn)(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                        int64_t n, int64_t row_stride, const int64_t *positions,
                                        int64_t offset, int layout, int num_threads);
typedef int (*fastpe_rope_cache_bf16_fn)(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                         int64_t n, int64_t row_stride, const int64_t *positions,
                                         int64_t offset, int layout, int num_threads);
typedef int (*fastpe_rope_apply_f16_fn)(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                        int64_t seq, int64_t heads, int64_t stride_batch,
                                        int64_t stride_seq, int64_t stride_head,
                                        const int64_t *positions, int64_t offset, int layout,
                                        int num_threads);
typedef int (*fastpe_rope_apply_bf16_fn)(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                         int64_t seq, int64_t heads, int64_t stride_batch,
                                         int64_t stride_seq, int64_t stride_head,
                                         const int64_t *positions, int64_t offset, int layout,
                                         int num_threads);

/* ABI 1.4: RoPE of multi-axis positions (M-RoPE, axial 2-D/3-D RoPE): frequency i of
   a token turns by positions[t * n_axes + axis[i]] * inv_freq[i], each frequency
   following one coordinate (time, height, width, ...) of its token; the C
   library's functions of the same names (<fastpe/fastpe.h>).
   rope_from_axes: a handle of nf frequencies, axis[i] in 0 .. n_axes-1 (n_axes 1 ..
   64), made with the GIL: NULL with a Python exception set on bad arguments (the
   messages of the Python API), as rope_from_frequencies.  rope_section_axes:
   axis[0 .. nf-1] of sections (frequencies per axis, summing to nf: FASTPE_ESIZE
   otherwise) laid out as fastpe.rope_cache's section_layout,
   FASTPE_SECTIONS_CONTIGUOUS (Qwen2-VL) or FASTPE_SECTIONS_INTERLEAVED (Qwen3-VL;
   FASTPE_EINVAL when an axis would not get sections[a] frequencies); nothing is
   written on an error.  rope_n_axes: the handle's n_axes (1 for a plain handle, -1
   for NULL or a dead one).  rope_cache_axes_* / rope_apply_axes_*: rope_cache_* /
   rope_apply_* for the positions (required: NULL is FASTPE_ENULL) of token r = b*seq
   + s at positions[r*n_axes .. r*n_axes + n_axes-1], bitwise fastpe.rope_cache /
   fastpe.apply_rope with sections.  They take plain handles too (n_axes 1); a
   multi-axis handle given to the 1-axis entry points is FASTPE_EINVAL.  All but
   rope_from_axes run without the GIL. */
typedef fastpe_rope *(*fastpe_rope_from_axes_fn)(const double *inv_freq, int64_t nf,
                                                 const int32_t *axis, int n_axes,
                                                 double attention_factor);
typedef int (*fastpe_rope_section_axes_fn)(const int64_t *sections, int n_axes, int section_layout,
                                           int32_t *axis, int64_t nf);
typedef int (*fastpe_rope_n_axes_fn)(const fastpe_rope *rope);
typedef int (*fastpe_rope_cache_axes_f32_fn)(const fastpe_rope *rope, float *cos, float *sin,
                                             int64_t n, int64_t row_stride,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_cache_axes_f64_fn)(const fastpe_rope *rope, double *cos, double *sin,
                                             int64_t n, int64_t row_stride,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_cache_axes_f16_fn)(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                             int64_t n, int64_t row_stride,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_cache_axes_bf16_fn)(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                              int64_t n, int64_t row_stride,
                                              const int64_t *positions, int layout,
                                              int num_threads);
typedef int (*fastpe_rope_apply_axes_f32_fn)(const fastpe_rope *rope, float *x, int64_t batch,
                                             int64_t seq, int64_t heads, int64_t stride_batch,
                                             int64_t stride_seq, int64_t stride_head,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_apply_axes_f64_fn)(const fastpe_rope *rope, double *x, int64_t batch,
                                             int64_t seq, int64_t heads, int64_t stride_batch,
                                             int64_t stride_seq, int64_t stride_head,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_apply_axes_f16_fn)(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                             int64_t seq, int64_t heads, int64_t stride_batch,
                                             int64_t stride_seq, int64_t stride_head,
                                             const int64_t *positions, int layout, int num_threads);
typedef int (*fastpe_rope_apply_axes_bf16_fn)(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                              int64_t seq, int64_t heads, int64_t stride_batch,
                                              int64_t stride_seq, int64_t stride_head,
                                              const int64_t *positions, int layout,
                                              int num_threads);

/* The capsule's table.  Append-only (see "ABI policy"). */
typedef struct fastpe_api {
    uint32_t abi_major;
    uint32_t abi_minor;
    size_t size; /* sizeof(fastpe_api_t) in the providing fastpe */
    /* ABI 1.0 */
    fastpe_fill_f32_fn fill_f32;
    fastpe_fill_f64_fn fill_f64;
    /* ABI 1.1 */
    fastpe_add_f32_fn add_f32;
    fastpe_add_f64_fn add_f64;
    fastpe_fill_positions_f32_fn fill_positions_f32;
    fastpe_fill_positions_f64_fn fill_positions_f64;
    fastpe_add_positions_f32_fn add_positions_f32;
    fastpe_add_positions_f64_fn add_positions_f64;
    /* ABI 1.2 */
    fastpe_spec_new_fn spec_new;
    fastpe_spec_from_knobs_fn spec_from_knobs;
    fastpe_spec_free_fn spec_free;
    fastpe_spec_d_model_fn spec_d_model;
    fastpe_spec_fill_f32_fn spec_fill_f32;
    fastpe_spec_fill_f64_fn spec_fill_f64;
    fastpe_spec_fill_positions_f32_fn spec_fill_positions_f32;
    fastpe_spec_fill_positions_f64_fn spec_fill_positions_f64;
    fastpe_spec_add_f32_fn spec_add_f32;
    fastpe_spec_add_f64_fn spec_add_f64;
    /* ABI 1.3 */
    fastpe_rope_new_fn rope_new;
    fastpe_rope_from_frequencies_fn rope_from_frequencies;
    fastpe_rope_free_fn rope_free;
    fastpe_rope_rotary_dim_fn rope_rotary_dim;
    fastpe_rope_cache_f32_fn rope_cache_f32;
    fastpe_rope_cache_f64_fn rope_cache_f64;
    fastpe_rope_apply_f32_fn rope_apply_f32;
    fastpe_rope_apply_f64_fn rope_apply_f64;
    fastpe_fill_f16_fn fill_f16;
    fastpe_fill_bf16_fn fill_bf16;
    fastpe_add_f16_fn add_f16;
    fastpe_add_bf16_fn add_bf16;
    fastpe_spec_fill_f16_fn spec_fill_f16;
    fastpe_spec_fill_bf16_fn spec_fill_bf16;
    fastpe_spec_add_f16_fn spec_add_f16;
    fastpe_spec_add_bf16_fn spec_add_bf16;
    fastpe_rope_cache_f16_fn rope_cache_f16;
    fastpe_rope_cache_bf16_fn rope_cache_bf16;
    fastpe_rope_apply_f16_fn rope_apply_f16;
    fastpe_rope_apply_bf16_fn rope_apply_bf16;
    /* ABI 1.4 */
    fastpe_rope_from_axes_fn rope_from_axes;
    fastpe_rope_section_axes_fn rope_section_axes;
    fastpe_rope_n_axes_fn rope_n_axes;
    fastpe_rope_cache_axes_f32_fn rope_cache_axes_f32;
    fastpe_rope_cache_axes_f64_fn rope_cache_axes_f64;
    fastpe_rope_cache_axes_f16_fn rope_cache_axes_f16;
    fastpe_rope_cache_axes_bf16_fn rope_cache_axes_bf16;
    fastpe_rope_apply_axes_f32_fn rope_apply_axes_f32;
    fastpe_rope_apply_axes_f64_fn rope_apply_axes_f64;
    fastpe_rope_apply_axes_f16_fn rope_apply_axes_f16;
    fastpe_rope_apply_axes_bf16_fn rope_apply_axes_bf16;
} fastpe_api_t;

/*
 * fastpe.kernel itself (the provider) needs only the table type above: its
 * codes and layouts are kernel.pxd's enum, and it imports nothing.
 */
#ifndef FASTPE_KERNEL_MODULE

/* Layouts (same values as fastpe.kernel's FASTPE_LAYOUT_*). */
#define FASTPE_LAYOUT_INTERLEAVED 0
#define FASTPE_LAYOUT_SPLIT       1

/* Return codes (same values as fastpe.kernel's; tests check they agree). */
#define FASTPE_OK      0
#define FASTPE_ENULL   1 /* out is NULL while seq_len > 0 */
#define FASTPE_ESIZE   2 /* seq_len < 0, d_model < 1 or > 2^40, rows beyond int64 */
#define FASTPE_ESTRIDE 3 /* row_stride < d_model while seq_len > 1 (rows would overlap) */
#define FASTPE_EBASE   4 /* base not finite and > 0, or its frequencies overflow */
#define FASTPE_ELAYOUT 5 /* layout is not one of FASTPE_LAYOUT_* */
#define FASTPE_ERANGE                                                                              \
    6                   /* positions NaN, infinite or too large for an exact angle reduction       \
                           (fastpe.kernel.max_position(base, d_model)) */
#define FASTPE_ENOMEM 7 /* the kernel's scratch allocation failed */
#define FASTPE_ESCALE 8 /* scale is not finite (ABI 1.1 add functions) */
#define FASTPE_EOVERLAP                                                                            \
    9 /* positions overlap the rows being written (the                                             \
       *_positions_* functions; see "Memory" above) */
/* A spec or RoPE handle that is not a live one (freed, or never made by this
   table): the spec_* and rope_* functions.  (The C library's own header,
   <fastpe/fastpe.h>, lists one more: FASTPE_EINTR 10.) */
#define FASTPE_EHANDLE 12
/* A multi-axis handle given to a 1-axis RoPE entry point, or sections that
   cannot be interleaved (ABI 1.4; the C library's FASTPE_EINVAL). */
#define FASTPE_EINVAL 11
/* The section_layout of rope_section_axes (ABI 1.4). */
#define FASTPE_SECTIONS_CONTIGUOUS  0
#define FASTPE_SECTIONS_INTERLEAVED 1
/* Returned by this header's wrappers only (never by the kernel): the
   translation unit has not run import_fastpe() successfully. */
#define FASTPE_ENOTIMPORTED 100

#if defined(_MSC_VER)
#define FASTPE_INLINE static __inline
#else
#define FASTPE_INLINE static inline
#endif

#if defined(__GNUC__)
#define FASTPE_MAYBE_UNUSED __attribute__((unused))
#else
#define FASTPE_MAYBE_UNUSED
#endif

/* Set by import_fastpe(); NULL until then.  Points into fastpe.kernel, which,
   like every extension module, is never unloaded. */
static const fastpe_api_t *fastpe_api FASTPE_MAYBE_UNUSED = NULL;

/* Import fastpe.kernel and check its C-API table.  Returns 0, or -1 with a
   Python exception set (ImportError on a version mismatch).  Needs the GIL. */
FASTPE_MAYBE_UNUSED static int import_fastpe(void) {
    PyObject *mod, *cap;
    const fastpe_api_t *api;
    int too_old;

    mod = PyImport_ImportModule("fastpe.kernel");
    if (mod == NULL) {
        return -1;
    }
    cap = PyObject_GetAttrString(mod, "_C_API");
    Py_DECREF(mod);
    if (cap == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_SetString(PyExc_ImportError,
                            "fastpe.kernel has no _C_API: the installed fastpe is too old "
                            "to have a C API; upgrade fastpe");
        }
        return -1;
    }
    if (!PyCapsule_IsValid(cap, FASTPE_CAPSULE_NAME)) {
        Py_DECREF(cap);
        PyErr_SetString(PyExc_ImportError,
                        "fastpe.kernel._C_API is not a \"" FASTPE_CAPSULE_NAME "\" capsule; "
                        "the installed fastpe is broken or too old to have a C API");
        return -1;
    }
    api = (const fastpe_api_t *)PyCapsule_GetPointer(cap, FASTPE_CAPSULE_NAME);
    Py_DECREF(cap);
    if (api == NULL) {
        return -1;
    }
    if (api->abi_major != FASTPE_ABI_MAJOR) {
        PyErr_Format(PyExc_ImportError,
                     "this module was compiled against the fastpe C API %d.%d, but the "
                     "installed fastpe provides the incompatible C API %u.%u: rebuild the "
                     "module against the installed fastpe (or install a matching fastpe)",
                     FASTPE_ABI_MAJOR, FASTPE_ABI_MINOR, (unsigned)api->abi_major,
                     (unsigned)api->abi_minor);
        return -1;
    }
    too_old = api->size < sizeof(fastpe_api_t);
#if FASTPE_ABI_MINOR > 0 /* (`unsigned < 0` would draw -Wtype-limits) */
    too_old = too_old || api->abi_minor < FASTPE_ABI_MINOR;
#endif
    if (too_old) {
        PyErr_Format(PyExc_ImportError,
                     "this module was compiled against the fastpe C API %d.%d, but the "
                     "installed fastpe provides only C API %u.%u: upgrade fastpe",
                     FASTPE_ABI_MAJOR, FASTPE_ABI_MINOR, (unsigned)api->abi_major,
                     (unsigned)api->abi_minor);
        return -1;
    }
    fastpe_api = api;
    return 0;
}

/* The fill functions (see the top of this file).  GIL-free, thread-safe.
   One wrapper per table entry, written out in plain C for the readers of this
   header rather than made by macros; tests/test_capi_signatures.py checks each
   against its typedef above. */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_fill_f32(float *out, int64_t seq_len, int64_t d_model,
                                                      int64_t row_stride, double base,
                                                      int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL) {
        return FASTPE_ENOTIMPORTED;
    }
    return fastpe_api->fill_f32(out, seq_len, d_model, row_stride, base, offset, layout,
                                num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_fill_f64(double *out, int64_t seq_len, int64_t d_model,
                                                      int64_t row_stride, double base,
                                                      int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL) {
        return FASTPE_ENOTIMPORTED;
    }
    return fastpe_api->fill_f64(out, seq_len, d_model, row_stride, base, offset, layout,
                                num_threads);
}

/* ABI 1.1 (see the top of this file).  GIL-free, thread-safe. */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_f32(float *x, int64_t nseq, int64_t seq_len,
                                                     int64_t d_model, int64_t row_stride,
                                                     double base, int64_t offset, double scale,
                                                     int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_f32(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                               num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_f64(double *x, int64_t nseq, int64_t seq_len,
                                                     int64_t d_model, int64_t row_stride,
                                                     double base, int64_t offset, double scale,
                                                     int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_f64(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                               num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                          const double *positions, double base, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->fill_positions_f32(out, n, d_model, row_stride, positions, base, layout,
                                          num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_fill_positions_f64(double *out, int64_t n, int64_t d_model, int64_t row_stride,
                          const double *positions, double base, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->fill_positions_f64(out, n, d_model, row_stride, positions, base, layout,
                                          num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_positions_f32(float *x, int64_t n, int64_t d_model,
                                                               int64_t row_stride,
                                                               const double *positions, double base,
                                                               double scale, int layout,
                                                               int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_positions_f32(x, n, d_model, row_stride, positions, base, scale, layout,
                                         num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_positions_f64(double *x, int64_t n,
                                                               int64_t d_model, int64_t row_stride,
                                                               const double *positions, double base,
                                                               double scale, int layout,
                                                               int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_positions_f64(x, n, d_model, row_stride, positions, base, scale, layout,
                                         num_threads);
}

/* ABI 1.2 (see the spec typedefs above).  The constructors need the GIL and
   return NULL with a Python exception set on error (also when import_fastpe()
   has not run: RuntimeError); the rest are GIL-free and thread-safe. */
FASTPE_MAYBE_UNUSED static fastpe_spec *fastpe_spec_new(PyObject *convention, int64_t d_model) {
    if (fastpe_api == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "fastpe_spec_new: import_fastpe() has not run");
        return NULL;
    }
    return fastpe_api->spec_new(convention, d_model);
}

/* A named convention ("vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj")
   with its defaults. */
FASTPE_MAYBE_UNUSED static fastpe_spec *fastpe_spec_from_name(const char *name, int64_t d_model) {
    PyObject *str;
    fastpe_spec *spec;
    if (name == NULL) {
        PyErr_SetString(PyExc_TypeError, "fastpe_spec_from_name: name is NULL");
        return NULL;
    }
    str = PyUnicode_FromString(name);
    if (str == NULL)
        return NULL;
    spec = fastpe_spec_new(str, d_model);
    Py_DECREF(str);
    return spec;
}

/* fastpe.Convention(base=, denominator=, shift=, position_scale=, layout=, odd=,
   padding_idx=) at width d_model; padding_idx applies when has_padding_idx. */
FASTPE_MAYBE_UNUSED static fastpe_spec *
fastpe_spec_from_knobs(int64_t d_model, double base, const char *denominator, double shift,
                       double position_scale, const char *layout, const char *odd,
                       int has_padding_idx, int64_t padding_idx) {
    if (fastpe_api == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "fastpe_spec_from_knobs: import_fastpe() has not run");
        return NULL;
    }
    return fastpe_api->spec_from_knobs(d_model, base, denominator, shift, position_scale, layout,
                                       odd, has_padding_idx, padding_idx);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED void fastpe_spec_free(fastpe_spec *spec) {
    if (fastpe_api != NULL)
        fastpe_api->spec_free(spec);
}

/* The width the spec was made for; -1 for NULL. */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int64_t fastpe_spec_d_model(const fastpe_spec *spec) {
    if (fastpe_api == NULL)
        return -1;
    return fastpe_api->spec_d_model(spec);
}

/* Rows of positions offset .. offset+seq_len-1, as fastpe_fill_f32 for Vaswani. */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_fill_f32(const fastpe_spec *spec, float *out,
                                                           int64_t seq_len, int64_t row_stride,
                                                           int64_t offset, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_f32(spec, out, seq_len, row_stride, offset, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_fill_f64(const fastpe_spec *spec, double *out,
                                                           int64_t seq_len, int64_t row_stride,
                                                           int64_t offset, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_f64(spec, out, seq_len, row_stride, offset, num_threads);
}

/* Row r encodes positions[r] (any finite real; must not overlap the rows). */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_spec_fill_positions_f32(const fastpe_spec *spec, float *out, int64_t n, int64_t row_stride,
                               const double *positions, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_positions_f32(spec, out, n, row_stride, positions, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_spec_fill_positions_f64(const fastpe_spec *spec, double *out, int64_t n, int64_t row_stride,
                               const double *positions, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_positions_f64(spec, out, n, row_stride, positions, num_threads);
}

/* x = x*scale + PE for nseq sequences of seq_len rows (positions offset ...). */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_add_f32(const fastpe_spec *spec, float *x,
                                                          int64_t nseq, int64_t seq_len,
                                                          int64_t row_stride, int64_t offset,
                                                          double scale, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_add_f32(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_add_f64(const fastpe_spec *spec, double *x,
                                                          int64_t nseq, int64_t seq_len,
                                                          int64_t row_stride, int64_t offset,
                                                          double scale, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_add_f64(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads);
}

/* RoPE (ABI 1.3; see its typedefs above).  The constructors need the GIL. */
FASTPE_MAYBE_UNUSED static fastpe_rope *fastpe_rope_new(PyObject *rope_parameters, int64_t head_dim,
                                                        int64_t max_position_embeddings,
                                                        int64_t seq_len, const char *precision) {
    if (fastpe_api == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "fastpe_rope_new: import_fastpe() has not run");
        return NULL;
    }
    return fastpe_api->rope_new(rope_parameters, head_dim, max_position_embeddings, seq_len,
                                precision);
}

FASTPE_MAYBE_UNUSED static fastpe_rope *
fastpe_rope_from_frequencies(const double *inv_freq, int64_t nf, double attention_factor) {
    if (fastpe_api == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "fastpe_rope_from_frequencies: import_fastpe() has not run");
        return NULL;
    }
    return fastpe_api->rope_from_frequencies(inv_freq, nf, attention_factor);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED void fastpe_rope_free(fastpe_rope *rope) {
    if (fastpe_api != NULL)
        fastpe_api->rope_free(rope);
}

/* 2 * the number of frequencies; -1 for NULL. */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int64_t fastpe_rope_rotary_dim(const fastpe_rope *rope) {
    if (fastpe_api == NULL)
        return -1;
    return fastpe_api->rope_rotary_dim(rope);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_cache_f32(const fastpe_rope *rope, float *cos, float *sin, int64_t n,
                      int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                      int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_f32(rope, cos, sin, n, row_stride, positions, offset, layout,
                                      num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_cache_f64(const fastpe_rope *rope, double *cos, double *sin, int64_t n,
                      int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                      int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_f64(rope, cos, sin, n, row_stride, positions, offset, layout,
                                      num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_f32(const fastpe_rope *rope, float *x, int64_t batch, int64_t seq, int64_t heads,
                      int64_t stride_batch, int64_t stride_seq, int64_t stride_head,
                      const int64_t *positions, int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_f32(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, offset, layout, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_f64(const fastpe_rope *rope, double *x, int64_t batch, int64_t seq, int64_t heads,
                      int64_t stride_batch, int64_t stride_seq, int64_t stride_head,
                      const int64_t *positions, int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_f64(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, offset, layout, num_threads);
}

/* The 16-bit outputs (ABI 1.3; see their typedefs above). */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_fill_f16(uint16_t *out, int64_t seq_len,
                                                      int64_t d_model, int64_t row_stride,
                                                      double base, int64_t offset, int layout,
                                                      int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->fill_f16(out, seq_len, d_model, row_stride, base, offset, layout,
                                num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_fill_bf16(uint16_t *out, int64_t seq_len,
                                                       int64_t d_model, int64_t row_stride,
                                                       double base, int64_t offset, int layout,
                                                       int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->fill_bf16(out, seq_len, d_model, row_stride, base, offset, layout,
                                 num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_f16(uint16_t *x, int64_t nseq, int64_t seq_len,
                                                     int64_t d_model, int64_t row_stride,
                                                     double base, int64_t offset, double scale,
                                                     int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_f16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                               num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len,
                                                      int64_t d_model, int64_t row_stride,
                                                      double base, int64_t offset, double scale,
                                                      int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->add_bf16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                                num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_fill_f16(const fastpe_spec *spec, uint16_t *out,
                                                           int64_t seq_len, int64_t row_stride,
                                                           int64_t offset, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_f16(spec, out, seq_len, row_stride, offset, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_fill_bf16(const fastpe_spec *spec, uint16_t *out,
                                                            int64_t seq_len, int64_t row_stride,
                                                            int64_t offset, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_fill_bf16(spec, out, seq_len, row_stride, offset, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_add_f16(const fastpe_spec *spec, uint16_t *x,
                                                          int64_t nseq, int64_t seq_len,
                                                          int64_t row_stride, int64_t offset,
                                                          double scale, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_add_f16(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_spec_add_bf16(const fastpe_spec *spec, uint16_t *x,
                                                           int64_t nseq, int64_t seq_len,
                                                           int64_t row_stride, int64_t offset,
                                                           double scale, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->spec_add_bf16(spec, x, nseq, seq_len, row_stride, offset, scale,
                                     num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_cache_f16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                      int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                      int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_f16(rope, cos, sin, n, row_stride, positions, offset, layout,
                                      num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_cache_bf16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                       int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                       int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_bf16(rope, cos, sin, n, row_stride, positions, offset, layout,
                                       num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                      int64_t heads, int64_t stride_batch, int64_t stride_seq, int64_t stride_head,
                      const int64_t *positions, int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_f16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, offset, layout, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                       int64_t heads, int64_t stride_batch, int64_t stride_seq, int64_t stride_head,
                       const int64_t *positions, int64_t offset, int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_bf16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                       stride_head, positions, offset, layout, num_threads);
}

/* Multi-axis RoPE (ABI 1.4; see its typedefs above).  rope_from_axes needs the GIL. */
FASTPE_MAYBE_UNUSED static fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf,
                                                              const int32_t *axis, int n_axes,
                                                              double attention_factor) {
    if (fastpe_api == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "fastpe_rope_from_axes: import_fastpe() has not run");
        return NULL;
    }
    return fastpe_api->rope_from_axes(inv_freq, nf, axis, n_axes, attention_factor);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_section_axes(const int64_t *sections, int n_axes,
                                                               int section_layout, int32_t *axis,
                                                               int64_t nf) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_section_axes(sections, n_axes, section_layout, axis, nf);
}

/* n_axes of a live handle; -1 for NULL or a dead one (or before import_fastpe()). */
FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_n_axes(const fastpe_rope *rope) {
    if (fastpe_api == NULL)
        return -1;
    return fastpe_api->rope_n_axes(rope);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_cache_axes_f32(const fastpe_rope *rope,
                                                                 float *cos, float *sin, int64_t n,
                                                                 int64_t row_stride,
                                                                 const int64_t *positions,
                                                                 int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_axes_f32(rope, cos, sin, n, row_stride, positions, layout,
                                           num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_cache_axes_f64(const fastpe_rope *rope,
                                                                 double *cos, double *sin,
                                                                 int64_t n, int64_t row_stride,
                                                                 const int64_t *positions,
                                                                 int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_axes_f64(rope, cos, sin, n, row_stride, positions, layout,
                                           num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_cache_axes_f16(const fastpe_rope *rope,
                                                                 uint16_t *cos, uint16_t *sin,
                                                                 int64_t n, int64_t row_stride,
                                                                 const int64_t *positions,
                                                                 int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_axes_f16(rope, cos, sin, n, row_stride, positions, layout,
                                           num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int fastpe_rope_cache_axes_bf16(const fastpe_rope *rope,
                                                                  uint16_t *cos, uint16_t *sin,
                                                                  int64_t n, int64_t row_stride,
                                                                  const int64_t *positions,
                                                                  int layout, int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_cache_axes_bf16(rope, cos, sin, n, row_stride, positions, layout,
                                            num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_axes_f32(const fastpe_rope *rope, float *x, int64_t batch, int64_t seq,
                           int64_t heads, int64_t stride_batch, int64_t stride_seq,
                           int64_t stride_head, const int64_t *positions, int layout,
                           int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_axes_f32(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                           stride_head, positions, layout, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_axes_f64(const fastpe_rope *rope, double *x, int64_t batch, int64_t seq,
                           int64_t heads, int64_t stride_batch, int64_t stride_seq,
                           int64_t stride_head, const int64_t *positions, int layout,
                           int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_axes_f64(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                           stride_head, positions, layout, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_axes_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                           int64_t heads, int64_t stride_batch, int64_t stride_seq,
                           int64_t stride_head, const int64_t *positions, int layout,
                           int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_axes_f16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                           stride_head, positions, layout, num_threads);
}

FASTPE_INLINE FASTPE_MAYBE_UNUSED int
fastpe_rope_apply_axes_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                            int64_t heads, int64_t stride_batch, int64_t stride_seq,
                            int64_t stride_head, const int64_t *positions, int layout,
                            int num_threads) {
    if (fastpe_api == NULL)
        return FASTPE_ENOTIMPORTED;
    return fastpe_api->rope_apply_axes_bf16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                            stride_head, positions, layout, num_threads);
}

#endif /* FASTPE_KERNEL_MODULE */
#endif /* FASTPE_H */
