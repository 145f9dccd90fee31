/*
 * fastpe/fastpe.h -- fastpe in C: the library's header and the reference of
 * every function, however it is reached.
 *
 *     #include <fastpe/fastpe.h>      // cc app.c $(pkg-config --cflags --libs fastpe)
 *
 *     float pe[128 * 512];
 *     int err = fastpe_fill_f32(pe, 128, 512, 512, 10000.0, 0, FASTPE_LAYOUT_INTERLEAVED, 0);
 *     if (err != FASTPE_OK) fprintf(stderr, "fastpe: %s\n", fastpe_strerror(err));
 *
 * Two ways in, one set of functions
 * ---------------------------------
 * - The C library (libfastpe, no Python anywhere): this header, linked
 *   against libfastpe.
 * - A Python extension: #include "fastpe.h" from fastpe.get_include() and call
 *   import_fastpe() in the module's init function; the functions are then
 *   reached through a table that the installed fastpe publishes in a capsule,
 *   with no link-time dependency.  That header includes this one (for the
 *   constants, types and this documentation) and adds only the table, its
 *   wrappers and import_fastpe().
 * The names, signatures and results (bitwise) are the same both ways.  What
 * differs is said where it applies: the functions marked "library only" are
 * not in the capsule's table; the handle constructors of the capsule are made
 * with the GIL held and report a bad argument as a Python exception (with the
 * messages of the Python API) instead of a bare NULL.
 *
 * The table
 * ---------
 * Row r (0 <= r < seq_len) starts at out + r*row_stride and holds position
 * k = offset + r.  With w_i = base^(-2i/d_model):
 *   FASTPE_LAYOUT_INTERLEAVED: row[2i] = sin(k w_i), row[2i+1] = cos(k w_i)
 *   FASTPE_LAYOUT_SPLIT:       row[i] = sin(k w_i), row[ns+i] = cos(k w_i),
 *                              ns = ceil(d_model/2)
 * For odd d_model the extra column is the sine of the next frequency.  Values
 * are bitwise fastpe.sinusoidal(..., dtype=...)'s and independent of
 * num_threads.  Other conventions go through a compiled spec (below).
 *
 * Arguments shared by the functions
 * ---------------------------------
 * out, x       the first entry of the first row written (x: read and written).
 * seq_len, n   the number of rows (positions), >= 0.
 * nseq         the add functions: sequences of seq_len rows each, >= 0.
 * d_model      the width of a row in entries, 1 .. 2^40 (a spec's is its own).
 * row_stride   distance between row starts, in ELEMENTS (not bytes), >= the
 *              row's width (only checked when more than one row is written).
 *              Only the width's entries of each row are written, so a column
 *              window of a wider matrix can be filled in place (out = M + col0,
 *              row_stride = M's width).  The caller guarantees the memory:
 *              (rows-1)*row_stride + width elements.
 * base         finite and > 0 (10000 in the paper).
 * offset       the first position; may be negative.
 * layout       FASTPE_LAYOUT_INTERLEAVED or FASTPE_LAYOUT_SPLIT.
 * scale        the add functions: x = x*scale + PE; finite.
 * num_threads  OpenMP threads for this call; <= 0 means the OpenMP default
 *              (OMP_NUM_THREADS...).  Small tables always run on one thread,
 *              as does a serial build.  From inside your own parallel loop pass
 *              1, unless nested teams are what you mean.
 * An output pointer may be NULL when there are no rows (nothing is written).
 * 16-bit entries (the _f16 and _bf16 functions) are uint16_t bit patterns of
 * IEEE binary16 and bfloat16 (the upper half of a float32), each the correct
 * rounding of the float64 result (rounded once, never through float32); the
 * add functions compute x*scale + PE in float64 and round once.  Their
 * arguments, checks and codes are those of the float32 functions.
 *
 * Errors
 * ------
 * Every int function returns FASTPE_OK (0) or a FASTPE_E* code (below);
 * fastpe_strerror names them.  Arguments are validated before anything is
 * written, so on an error nothing the caller passed is modified.  Codes are
 * returned, never errno (left as the caller set it), never a message printed,
 * never an abort.  Codes and layout values never change meaning.
 *
 * Memory
 * ------
 * The rows written must not overlap an input of the same call: the positions
 * of the *_positions_* functions are read while rows are written, so none of
 * them may lie inside a row written.  That overlap is detected on elements
 * (positions in the gap between rows, row_stride > d_model, are legal) and
 * refused with FASTPE_EOVERLAP before anything is written.  (fastpe's Python
 * functions copy an overlapping input first, as NumPy's ufuncs do.)  Each call
 * allocates its own scratch memory.
 *
 * Threads
 * -------
 * Every function is reentrant: call it from any thread (including threads that
 * have never seen Python), concurrently into different buffers, and from
 * inside your own OpenMP regions.  Through the capsule, every function but the
 * handle constructors runs without the GIL.  fork() is safe while other
 * threads are inside the library; the shared library stays loaded after
 * dlclose (-z nodelete: an OpenMP pool must not outlive its runtime).
 *
 * Handles
 * -------
 * A spec (fastpe_spec) or a RoPE handle (fastpe_rope) is made once, is
 * immutable but for its rounding (see "Correct rounding"), and is used from
 * any thread.  Handles follow free()'s rule: after
 * fastpe_*_free a handle must not be used; a call through it returns
 * FASTPE_EHANDLE (its memory stays the library's) until a later handle is given
 * that memory.
 */
#ifndef FASTPE_FASTPE_H
#define FASTPE_FASTPE_H

#include <stddef.h>
#include <stdint.h>

/* FASTPE_API marks the exported functions: default visibility (dllexport) in
 * the shared library, nothing in the static one. */
#if defined(FASTPE_SHARED_BUILD)
#if defined(_WIN32)
#define FASTPE_API __declspec(dllexport)
#else
#define FASTPE_API __attribute__((visibility("default")))
#endif
#elif defined(FASTPE_SHARED) && defined(_WIN32)
#define FASTPE_API __declspec(dllimport)
#else
#define FASTPE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library's ABI: the major is the shared library's SONAME; within a major,
 * functions are only ever added.  (The capsule's table has a version of its
 * own, FASTPE_ABI_MAJOR/MINOR in fastpe.h.) */
#define FASTPE_LIB_ABI_MAJOR 1
#define FASTPE_LIB_ABI_MINOR 4

/* FASTPE_NO_CONSTANTS: for a file that already has these values under the same
 * names (the Python binding, whose kernel.pxd declares them). */
#ifndef FASTPE_NO_CONSTANTS
#define FASTPE_LAYOUT_INTERLEAVED 0
#define FASTPE_LAYOUT_SPLIT       1

#define FASTPE_OK       0
#define FASTPE_ENULL    1  /* a required pointer is NULL (an output while rows > 0) */
#define FASTPE_ESIZE    2  /* a count < 0, d_model < 1 or > 2^40, rows beyond int64 */
#define FASTPE_ESTRIDE  3  /* rows > 1 and row_stride < the width (rows would overlap) */
#define FASTPE_EBASE    4  /* base not finite and > 0, or its frequencies overflow */
#define FASTPE_ELAYOUT  5  /* layout is not one of FASTPE_LAYOUT_* */
#define FASTPE_ERANGE   6  /* positions NaN, infinite or too large for an exact reduction */
#define FASTPE_ENOMEM   7  /* scratch allocation failed */
#define FASTPE_ESCALE   8  /* scale is not finite */
#define FASTPE_EOVERLAP 9  /* an input overlaps the rows being written (see "Memory") */
#define FASTPE_EINTR    10 /* the poll callback asked the fill to stop (library only) */
#define FASTPE_EINVAL   11 /* an argument outside its documented values (e.g. a dtype) */
#define FASTPE_EHANDLE  12 /* a handle that is not a live fastpe_spec / fastpe_rope */

/* The knobs of a convention (fastpe_knobs): the denominator of the frequency
 * ladder (h = d_model / 2), the column layout, and what an odd width does. */
#define FASTPE_DENOM_D2                0 /* d/2 */
#define FASTPE_DENOM_H                 1 /* h */
#define FASTPE_DENOM_H_MINUS_1         2 /* h-1 */
#define FASTPE_DENOM_MAX_H_MINUS_1_1   3 /* max(h-1, 1) */
#define FASTPE_DENOM_H_MINUS_SHIFT     4 /* h - shift */
#define FASTPE_COLUMNS_INTERLEAVED     0
#define FASTPE_COLUMNS_SPLIT           1
#define FASTPE_COLUMNS_SPLIT_COS_FIRST 2
#define FASTPE_ODD_SIN                 0 /* one more sine column */
#define FASTPE_ODD_ZERO                1 /* a zero column at the end */
#define FASTPE_ODD_ERROR               2 /* odd widths refused */

/* Entry types of fastpe_fill_poll. */
#define FASTPE_DTYPE_F32  0
#define FASTPE_DTYPE_F64  1
#define FASTPE_DTYPE_F16  2 /* IEEE binary16, as uint16_t bits */
#define FASTPE_DTYPE_BF16 3 /* bfloat16, as uint16_t bits */

/* The section_layout of fastpe_rope_section_axes. */
#define FASTPE_SECTIONS_CONTIGUOUS  0
#define FASTPE_SECTIONS_INTERLEAVED 1

/* The rope_type and precision of fastpe_rope_params. */
#define FASTPE_ROPE_DEFAULT      0
#define FASTPE_ROPE_LINEAR       1
#define FASTPE_ROPE_DYNAMIC      2
#define FASTPE_ROPE_YARN         3
#define FASTPE_ROPE_LONGROPE     4
#define FASTPE_ROPE_LLAMA3       5
#define FASTPE_PRECISION_FLOAT32 0         /* the framework's float32 steps (the default) */
#define FASTPE_PRECISION_FLOAT64 1         /* the same formula in float64 */
#define FASTPE_ROPE_UNSET        INT64_MIN /* an absent int64 field */

/* The rounding of a handle (fastpe_spec_set_rounding, fastpe_rope_set_rounding). */
#define FASTPE_ROUND_DEFAULT 0 /* the fast evaluation (float64: within 5e-16 absolute) */
#define FASTPE_ROUND_CORRECT 1 /* every entry correctly rounded (correctly_rounded=True) */
#endif

/* ---- types ------------------------------------------------------------------ */

/* Called on the calling thread between the chunks (a few milliseconds of work
 * each) of a long fill; a nonzero return stops the fill with FASTPE_EINTR (the
 * rows done so far stay written).  For a program that wants to cancel.  (Spelt
 * as a function type first: the capsule's fastpe.h carries this header, and
 * its pointer typedefs named fastpe_*_fn are the table's slots only.) */
typedef int fastpe_poll_callback(void *ctx);
typedef fastpe_poll_callback *fastpe_poll_fn;

/* A compiled convention: w_i = position_scale * base^(-i/denominator), its
 * columns and odd-width rule; made from the knobs of fastpe.Convention or a
 * named preset.  The plans (frequencies and rotation table) come from a cache
 * the library keeps, shared between specs of equal frequencies. */
typedef struct fastpe_spec fastpe_spec;

typedef struct fastpe_knobs {
    size_t size; /* sizeof(fastpe_knobs): set by fastpe_knobs_preset */
    double base;
    int denominator; /* FASTPE_DENOM_* */
    double shift;    /* for FASTPE_DENOM_H_MINUS_SHIFT */
    double position_scale;
    int columns; /* FASTPE_COLUMNS_* */
    int odd;     /* FASTPE_ODD_* */
    int has_padding_idx;
    int64_t padding_idx; /* the position whose rows are all zeros */
} fastpe_knobs;

/* A RoPE handle: a model's own frequencies (inv_freq, nf entries: finite, >= 0,
 * at most 1e280), their axes (multi-axis handles) and attention factor (finite,
 * > 0), with its own copy of the plan.  rotary_dim = 2*nf. */
typedef struct fastpe_rope fastpe_rope;

/* The frequencies of a model's rope_parameters (transformers'
 * ROPE_INIT_FUNCTIONS, fastpe.rope_frequencies): fill the struct with
 * fastpe_rope_params_init, then set the fields the config gives.  "Absent" (the
 * key not in the config, or None where transformers reads None as absent) is
 * NaN for the double fields, NULL for the lists, FASTPE_ROPE_UNSET for the
 * int64 fields and -1 for truncate: the initialiser's values.  A field that the
 * rope_type does not read must stay absent (fastpe.rope_frequencies refuses an
 * unknown key).  NaN is never a value: a NaN field reads as absent.  mscale and
 * mscale_all_dim of 0 mean no mscale (transformers reads them by truth value),
 * but a 0 is a key given. */
typedef struct fastpe_rope_params {
    size_t size;                   /* sizeof(fastpe_rope_params): set by fastpe_rope_params_init */
    int rope_type;                 /* FASTPE_ROPE_*: FASTPE_ROPE_DEFAULT */
    int precision;                 /* FASTPE_PRECISION_*: FASTPE_PRECISION_FLOAT32 */
    double rope_theta;             /* absent: 10000 */
    double partial_rotary_factor;  /* absent: 1; rotary_dim = (int64)(head_dim * it) */
    double factor;                 /* linear, dynamic, llama3 (required); yarn, longrope */
    double attention_factor;       /* yarn, longrope */
    double beta_fast, beta_slow;   /* yarn: absent 32 and 1 */
    double mscale, mscale_all_dim; /* yarn: finite, any sign; absent or 0: none */
    double low_freq_factor, high_freq_factor; /* llama3 (required) */
    int truncate;                             /* yarn: -1 absent (true), 0 or 1 */
    const double *short_factor;               /* longrope (required): rotary_dim/2 entries */
    int64_t short_factor_len;
    const double *long_factor; /* longrope (required): rotary_dim/2 entries */
    int64_t long_factor_len;
    int64_t original_max_position_embeddings; /* yarn, longrope, llama3 */
    /* not keys of rope_parameters: the config's length, and the current one */
    int64_t max_position_embeddings; /* >= 1 */
    int64_t seq_len;                 /* >= 0: dynamic and longrope depend on it */
} fastpe_rope_params;

/* ---- functions -----------------------------------------------------------------
 * FASTPE_NO_PROTOTYPES: for fastpe.h (the capsule's header), whose wrappers of
 * the same names stand for these declarations. */
#ifndef FASTPE_NO_PROTOTYPES

/* A short English description of a code ("unknown fastpe error code" for
 * others); a static string, never NULL.  Library only. */
FASTPE_API const char *fastpe_strerror(int code);

/* ---- the table ----------------------------------------------------------------
 * fastpe_fill_*: the table above, seq_len rows of positions offset ..
 * offset+seq_len-1. */
FASTPE_API int fastpe_fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads);
FASTPE_API int fastpe_fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads);
FASTPE_API int fastpe_fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                               double base, int64_t offset, int layout, int num_threads);
FASTPE_API int fastpe_fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                                double base, int64_t offset, int layout, int num_threads);

/* x = x*scale + PE for nseq sequences of seq_len rows each (row r of sequence b
 * at x + (b*seq_len + r)*row_stride), positions offset .. offset+seq_len-1. */
FASTPE_API int fastpe_add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads);
FASTPE_API int fastpe_add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads);
FASTPE_API int fastpe_add_f16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                              int64_t row_stride, double base, int64_t offset, double scale,
                              int layout, int num_threads);
FASTPE_API int fastpe_add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                               int64_t row_stride, double base, int64_t offset, double scale,
                               int layout, int num_threads);

/* Row r encodes positions[r] (any finite real; integers give the fill rows
 * bitwise); positions must not lie inside the rows written (FASTPE_EOVERLAP,
 * see "Memory"). */
FASTPE_API int fastpe_fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                                         const double *positions, double base, int layout,
                                         int num_threads);
FASTPE_API int fastpe_fill_positions_f64(double *out, int64_t n, int64_t d_model,
                                         int64_t row_stride, const double *positions, double base,
                                         int layout, int num_threads);
FASTPE_API int fastpe_add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                                        const double *positions, double base, double scale,
                                        int layout, int num_threads);
FASTPE_API int fastpe_add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                                        const double *positions, double base, double scale,
                                        int layout, int num_threads);

/* fastpe_fill_* for the entry type dtype (FASTPE_DTYPE_*), calling poll between
 * chunks (FASTPE_EINTR when it asks to stop).  Library only. */
FASTPE_API int fastpe_fill_poll(void *out, int dtype, int64_t seq_len, int64_t d_model,
                                int64_t row_stride, double base, int64_t offset, int layout,
                                int num_threads, fastpe_poll_fn poll, void *ctx);
/* fastpe_fill_poll with a rounding (FASTPE_ROUND_*): FASTPE_ROUND_CORRECT gives
 * every entry correctly rounded, as fastpe.sinusoidal(..., correctly_rounded=True)
 * and a spec handle set to it; FASTPE_ROUND_DEFAULT is fastpe_fill_poll.  Another
 * value: FASTPE_EINVAL naming "rounding" (after "dtype").  Library only; ABI
 * 1.4. */
FASTPE_API int fastpe_fill_poll_ex(void *out, int dtype, int64_t seq_len, int64_t d_model,
                                   int64_t row_stride, double base, int64_t offset, int layout,
                                   int rounding, int num_threads, fastpe_poll_fn poll, void *ctx);

/* ---- every convention, through a compiled spec --------------------------------
 * A spec is made once and used from any thread; it is freed with
 * fastpe_spec_free.  The fills take the arguments above (the width is the
 * spec's d_model, the layout its columns) and give fastpe.sinusoidal(...,
 * convention=...)'s bits; for "vaswani" they are fastpe_fill_*'s.  A handle
 * that is not a live one: FASTPE_EHANDLE. */

/* The knobs of a named convention ("vaswani", "tensor2tensor", "fairseq",
 * "diffusers", "gptj"), with their defaults; FASTPE_EINVAL for another name.
 * Library only. */
FASTPE_API int fastpe_knobs_preset(const char *name, fastpe_knobs *knobs);
/* A spec from knobs at width d_model: FASTPE_OK and *spec, or a code (EINVAL for
 * a knob outside its values or a width the convention does not define, EBASE,
 * ESIZE, ENOMEM) and *spec = NULL; fastpe_last_error names the knob ("base",
 * "position_scale", "shift", ...) or "d_model", or "denominator" (index: the
 * width, value: the denominator <= 0 there).  Library only. */
FASTPE_API int fastpe_spec_create(const fastpe_knobs *knobs, int64_t d_model, fastpe_spec **spec);
/* A named convention with its defaults, and fastpe.Convention(base=,
 * denominator=, shift=, position_scale=, layout=, odd=, padding_idx=) at width
 * d_model (the knobs as the Python API spells them; padding_idx applies when
 * has_padding_idx): NULL on any error (fastpe_spec_create says which; through
 * the capsule, with the GIL, a Python exception is set). */
FASTPE_API fastpe_spec *fastpe_spec_from_name(const char *name, int64_t d_model);
FASTPE_API fastpe_spec *fastpe_spec_from_knobs(int64_t d_model, double base,
                                               const char *denominator, double shift,
                                               double position_scale, const char *layout,
                                               const char *odd, int has_padding_idx,
                                               int64_t padding_idx);
/* Frees a spec (NULL is ignored). */
FASTPE_API void fastpe_spec_free(fastpe_spec *spec);
/* The width the spec was made for; -1 for NULL. */
FASTPE_API int64_t fastpe_spec_d_model(const fastpe_spec *spec);
/* Rows of positions offset .. offset+seq_len-1, as fastpe_fill_*. */
FASTPE_API int fastpe_spec_fill_f32(const fastpe_spec *spec, float *out, int64_t seq_len,
                                    int64_t row_stride, int64_t offset, int num_threads);
FASTPE_API int fastpe_spec_fill_f64(const fastpe_spec *spec, double *out, int64_t seq_len,
                                    int64_t row_stride, int64_t offset, int num_threads);
FASTPE_API int fastpe_spec_fill_f16(const fastpe_spec *spec, uint16_t *out, int64_t seq_len,
                                    int64_t row_stride, int64_t offset, int num_threads);
FASTPE_API int fastpe_spec_fill_bf16(const fastpe_spec *spec, uint16_t *out, int64_t seq_len,
                                     int64_t row_stride, int64_t offset, int num_threads);
/* Row r encodes positions[r], as fastpe_fill_positions_*. */
FASTPE_API int fastpe_spec_fill_positions_f32(const fastpe_spec *spec, float *out, int64_t n,
                                              int64_t row_stride, const double *positions,
                                              int num_threads);
FASTPE_API int fastpe_spec_fill_positions_f64(const fastpe_spec *spec, double *out, int64_t n,
                                              int64_t row_stride, const double *positions,
                                              int num_threads);
/* x = x*scale + PE for nseq sequences of seq_len rows, as fastpe_add_*. */
FASTPE_API int fastpe_spec_add_f32(const fastpe_spec *spec, float *x, int64_t nseq, int64_t seq_len,
                                   int64_t row_stride, int64_t offset, double scale,
                                   int num_threads);
FASTPE_API int fastpe_spec_add_f64(const fastpe_spec *spec, double *x, int64_t nseq,
                                   int64_t seq_len, int64_t row_stride, int64_t offset,
                                   double scale, int num_threads);
FASTPE_API int fastpe_spec_add_f16(const fastpe_spec *spec, uint16_t *x, int64_t nseq,
                                   int64_t seq_len, int64_t row_stride, int64_t offset,
                                   double scale, int num_threads);
FASTPE_API int fastpe_spec_add_bf16(const fastpe_spec *spec, uint16_t *x, int64_t nseq,
                                    int64_t seq_len, int64_t row_stride, int64_t offset,
                                    double scale, int num_threads);

/* ---- RoPE: the cos/sin cache and the rotation in place ------------------------
 * A handle that is not a live one: FASTPE_EHANDLE.  Positions beyond the exact
 * reduction: FASTPE_ERANGE.  layout: FASTPE_LAYOUT_SPLIT for the half-split
 * (rotate_half) pairs, FASTPE_LAYOUT_INTERLEAVED for GPT-J's. */

/* A handle of a model's own inv_freq (nf entries, copied) and attention factor:
 * NULL for any argument outside fastpe_rope's rules, nf outside 1 .. 2^31, or no
 * memory (through the capsule, with the GIL, a Python exception is set). */
FASTPE_API fastpe_rope *fastpe_rope_from_frequencies(const double *inv_freq, int64_t nf,
                                                     double attention_factor);
/* Frees a handle (NULL is ignored). */
FASTPE_API void fastpe_rope_free(fastpe_rope *rope);
/* 2 * the number of frequencies; -1 for NULL. */
FASTPE_API int64_t fastpe_rope_rotary_dim(const fastpe_rope *rope);
/* n rows of cos and sin (rotary_dim entries each, at row_stride >= rotary_dim)
 * for positions[r] (positions NULL: offset + r), bitwise fastpe.rope_cache's.
 * cos and sin must not share an element (FASTPE_EOVERLAP; decided on elements:
 * the two halves of one buffer's rows are fine).  Every position is read before
 * anything is written: positions may lie in the output. */
FASTPE_API int fastpe_rope_cache_f32(const fastpe_rope *rope, float *cos, float *sin, int64_t n,
                                     int64_t row_stride, const int64_t *positions, int64_t offset,
                                     int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_f64(const fastpe_rope *rope, double *cos, double *sin, int64_t n,
                                     int64_t row_stride, const int64_t *positions, int64_t offset,
                                     int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_f16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                     int64_t n, int64_t row_stride, const int64_t *positions,
                                     int64_t offset, int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_bf16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                      int64_t n, int64_t row_stride, const int64_t *positions,
                                      int64_t offset, int layout, int num_threads);
/* Rotates in place the first rotary_dim entries of the row (b, s, h) at
 * x + b*stride_batch + s*stride_seq + h*stride_head (strides in ELEMENTS, any
 * sign; no two rows may share an element, decided exactly: FASTPE_ESTRIDE) by
 * the angles of positions[b*seq + s] (positions NULL: offset + s), bitwise
 * fastpe.apply_rope's. */
FASTPE_API int fastpe_rope_apply_f32(const fastpe_rope *rope, float *x, int64_t batch, int64_t seq,
                                     int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                     int64_t stride_head, const int64_t *positions, int64_t offset,
                                     int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_f64(const fastpe_rope *rope, double *x, int64_t batch, int64_t seq,
                                     int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                     int64_t stride_head, const int64_t *positions, int64_t offset,
                                     int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                     int64_t seq, int64_t heads, int64_t stride_batch,
                                     int64_t stride_seq, int64_t stride_head,
                                     const int64_t *positions, int64_t offset, int layout,
                                     int num_threads);
FASTPE_API int fastpe_rope_apply_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                      int64_t seq, int64_t heads, int64_t stride_batch,
                                      int64_t stride_seq, int64_t stride_head,
                                      const int64_t *positions, int64_t offset, int layout,
                                      int num_threads);

/* ---- RoPE of multi-axis positions (library ABI 1.1, capsule ABI 1.4) ----------
 * Vision and multimodal models (M-RoPE, axial 2-D/3-D RoPE) rotate frequency i
 * of a token by positions[t * n_axes + axis[i]] * inv_freq[i]: each frequency
 * follows one coordinate (time, height, width, ...) of its token. */

/* A handle of nf frequencies and their axes (axis[i] in 0 .. n_axes-1, n_axes
 * 1 .. 64): NULL as fastpe_rope_from_frequencies, or for an axis out of range. */
FASTPE_API fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf,
                                              const int32_t *axis, int n_axes,
                                              double attention_factor);
/* axis[0 .. nf-1] of sections (frequencies per axis, summing to nf:
 * FASTPE_ESIZE otherwise), laid out as fastpe.rope_cache's section_layout:
 * FASTPE_SECTIONS_CONTIGUOUS (Qwen2-VL: the first sections[0] frequencies axis 0,
 * ...) or FASTPE_SECTIONS_INTERLEAVED (Qwen3-VL: frequency i takes axis
 * r = i % n_axes when r >= 1 and i < n_axes * sections[r], else axis 0;
 * FASTPE_EINVAL when an axis would not get sections[a] of them). */
FASTPE_API int fastpe_rope_section_axes(const int64_t *sections, int n_axes, int section_layout,
                                        int32_t *axis, int64_t nf);
/* The handle's n_axes (1 for a plain handle; -1 for NULL or a dead handle). */
FASTPE_API int fastpe_rope_n_axes(const fastpe_rope *rope);
/* fastpe_rope_cache_* and fastpe_rope_apply_* for the positions (required:
 * NULL is FASTPE_ENULL) of token r = b*seq + s at positions[r*n_axes .. +
 * n_axes-1]; bitwise fastpe.rope_cache / fastpe.apply_rope with sections.  They
 * take plain handles too (n_axes 1); a multi-axis handle given to the 1-axis
 * functions above is FASTPE_EINVAL. */
FASTPE_API int fastpe_rope_cache_axes_f32(const fastpe_rope *rope, float *cos, float *sin,
                                          int64_t n, int64_t row_stride, const int64_t *positions,
                                          int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_axes_f64(const fastpe_rope *rope, double *cos, double *sin,
                                          int64_t n, int64_t row_stride, const int64_t *positions,
                                          int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_axes_f16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                          int64_t n, int64_t row_stride, const int64_t *positions,
                                          int layout, int num_threads);
FASTPE_API int fastpe_rope_cache_axes_bf16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin,
                                           int64_t n, int64_t row_stride, const int64_t *positions,
                                           int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_axes_f32(const fastpe_rope *rope, float *x, int64_t batch,
                                          int64_t seq, int64_t heads, int64_t stride_batch,
                                          int64_t stride_seq, int64_t stride_head,
                                          const int64_t *positions, int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_axes_f64(const fastpe_rope *rope, double *x, int64_t batch,
                                          int64_t seq, int64_t heads, int64_t stride_batch,
                                          int64_t stride_seq, int64_t stride_head,
                                          const int64_t *positions, int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_axes_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                          int64_t seq, int64_t heads, int64_t stride_batch,
                                          int64_t stride_seq, int64_t stride_head,
                                          const int64_t *positions, int layout, int num_threads);
FASTPE_API int fastpe_rope_apply_axes_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch,
                                           int64_t seq, int64_t heads, int64_t stride_batch,
                                           int64_t stride_seq, int64_t stride_head,
                                           const int64_t *positions, int layout, int num_threads);

/* ---- RoPE from the published rules (library only) -----------------------------
 * The frequencies of a model's rope_parameters (fastpe_rope_params, above):
 * bitwise fastpe.rope_frequencies' inv_freq and attention factor, in both
 * precisions.  Codes: FASTPE_ENULL (a NULL pointer), FASTPE_ESIZE (head_dim
 * outside 2 .. 2^31, capacity < nf), FASTPE_EBASE (frequencies that are not
 * finite numbers in [0, 1e280], or dynamic's base not finite and > 0),
 * FASTPE_EINVAL (any other value or combination the Python rules refuse, and a
 * size this library does not know); nothing is written on error. */

/* Every field absent, the default rule, float32; NULL is ignored. */
FASTPE_API void fastpe_rope_params_init(fastpe_rope_params *p);
/* inv_freq[0 .. *nf-1] and *attention_factor of the rule (nf = rotary_dim / 2,
 * at most head_dim / 2: a capacity of head_dim / 2 always suffices). */
FASTPE_API int fastpe_rope_frequencies(const fastpe_rope_params *p, int64_t head_dim,
                                       double *inv_freq, int64_t capacity, int64_t *nf,
                                       double *attention_factor);
/* A handle of the rule's frequencies and attention factor (as
 * fastpe_rope_from_frequencies): FASTPE_OK and *rope, or a code of
 * fastpe_rope_frequencies (or FASTPE_ENOMEM) and *rope = NULL. */
FASTPE_API int fastpe_rope_from_params(const fastpe_rope_params *p, int64_t head_dim,
                                       fastpe_rope **rope);

/* ---- correct rounding (library ABI 1.3, capsule ABI 1.5) ----------------------
 * fastpe.sinusoidal / sinusoidal_at / rope_cache / add_to(...,
 * correctly_rounded=True): each entry is its exact value (the sine or cosine
 * of the exact product of the position and the frequency; for a RoPE cache,
 * times the attention factor; for an add, x*scale plus it, an exact sum of 0
 * being +0.0 but where x*scale is -0.0 and no encoding goes) rounded once to
 * nearest-even in the output's type (float64, float32, float16 or bfloat16,
 * subnormals included): the same bits as those Python functions, by the same
 * code.  The fast evaluation runs first, a rounding test
 * decides each entry, and the rare entry it cannot decide is evaluated exactly:
 * costlier than the default (see docs/performance.md), which stays as it is.
 *
 * It is a setting of the handle, FASTPE_ROUND_DEFAULT when it is made:
 *   spec: fastpe_spec_fill_{f64,f32,f16,bf16},
 *         fastpe_spec_fill_positions_{f64,f32,f16,bf16} (for fastpe_fill_* and
 *         fastpe_fill_positions_*, a "vaswani" spec, whose rows are theirs),
 *         fastpe_spec_add_{f64,f32,f16,bf16} (x = x*scale + PE);
 *   rope: fastpe_rope_cache_*, fastpe_rope_cache_axes_*, and the rotations
 *         fastpe_rope_apply_{f64,f32,f16,bf16}: each rotated entry the exact
 *         value of a (x1 cos t - x2 sin t) (and a (x2 cos t + x1 sin t)), x1 and
 *         x2 the entries given, t the exact angle and a the attention factor,
 *         rounded once: fastpe.apply_rope(..., correctly_rounded=True)'s bits.
 * The multi-axis rotations (fastpe_rope_apply_axes_*) given a handle set to
 * FASTPE_ROUND_CORRECT return FASTPE_EINVAL before writing anything, the error
 * detail naming "rope" (value: the rounding).
 *
 * Threads: set the rounding after making the handle and before sharing it; it
 * must not change while another thread calls through the handle.
 * Codes: FASTPE_ENULL (a NULL handle), FASTPE_EHANDLE (not a live one),
 * FASTPE_EINVAL (rounding not a FASTPE_ROUND_* value: "rounding"; the handle
 * is left as it was).  Through the capsule they run without the GIL. */
FASTPE_API int fastpe_spec_set_rounding(fastpe_spec *spec, int rounding);
FASTPE_API int fastpe_rope_set_rounding(fastpe_rope *rope, int rounding);

#endif /* FASTPE_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif

/* ---- the error detail -------------------------------------------------------
 * What the last failing call on the calling thread refused: its code, the
 * argument by its name in this header ("seq_len", "d_model", "row_stride",
 * "base", "layout", "offset", "positions", "scale", "out", ...; NULL when the
 * code says all there is, e.g. FASTPE_ENOMEM), the element of an array
 * argument (index, else -1), the offending value and the limit it broke (NaN
 * where there is none).  Each thread has its own; only a failing call writes it,
 * as with errno: a call that succeeds leaves the last failure readable, so read
 * it right after the call that returned the code.  argument is a static string.
 * Returns detail->code (FASTPE_OK before any failure on this thread); a NULL
 * detail only returns the code. */
#ifdef __cplusplus
extern "C" {
#endif
typedef struct fastpe_error {
    int code;             /* FASTPE_E* */
    const char *argument; /* static; NULL: none named */
    int64_t index;        /* the element of an array argument, or -1 */
    double value;         /* the refused value (for sizes and positions, as a double) */
    double limit;         /* the bound it broke, or NaN */
} fastpe_error;
FASTPE_API int fastpe_last_error(fastpe_error *detail);
#ifdef __cplusplus
}
#endif

#endif /* FASTPE_FASTPE_H */
