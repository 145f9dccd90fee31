/*
 * The library's internals, shared by its C files and by the Python binding
 * (fastpe.kernel links the same sources statically; none of this is
 * exported).  The public API is include/fastpe/fastpe.h.
 *
 * A fill is described by a spec (what a row looks like, kernels/pe_spec.h) and a
 * pe_rows (which positions its rows encode), and is run by ONE call,
 * pe_fill_run: plan, anchor seed, every chunk, store and free happen inside
 * the compilation unit of the row writers, so the hot loop inlines them.
 */
#ifndef FASTPE_PE_LIB_H
#define FASTPE_PE_LIB_H

#include "kernels/pe_core.h"
#include "pe_sys.h"

#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which positions the rows of a fill encode.  Row r = b*S + s (sequence b,
 * step s) sits at out + r*row_stride and encodes position
 *     K = (offs[b*offs_stride] if offs else offset) + (pos[b*psb + s*pss] if pos else s)
 * pos is int64 (pos_i) or float64 (pos_f, then offs must be NULL and offset 0). */
typedef struct {
    int64_t nseq;
    int64_t S;
    int64_t offset;
    const int64_t *offs;
    int64_t offs_stride;
    const int64_t *pos_i;
    const double *pos_f;
    int64_t psb;
    int64_t pss;
    int has_zero_pos; /* rows at this position get an all-zero encoding */
    int64_t zero_pos;
    int add; /* 0: out = PE (accurate: scale PE);  1: out = out*scale + PE */
    double scale;
    int fresh;    /* out was just allocated (no streaming stores) */
    int accurate; /* rows correctly rounded: each entry scale times its sine or
                     cosine (add: x*scale plus it), rounded once */
    /* accurate: pe_plan_lows of the plan the fill is given, or NULL (the fill
       evaluates the rows it needs) */
    const double *lows;
} pe_rows;

/* The last anchor row (sin, cos at a block centre) a small fill evaluated for
 * one encoding: consecutive decoding steps (positions k, k+1, ...) share their
 * block's anchor, the costliest part of a one-row call.  Copied in and out
 * under the lock, so it is never read half written. */
typedef struct {
    pe_mutex lock;
    double *data;   /* 2 nf doubles, or NULL */
    int64_t centre; /* INT64_MIN: empty */
} pe_anchor_cache;

/* The opaque fastpe_spec of both headers: a validated spec.  magic tells a live
 * handle from anything else (freed handles have it cleared). */
#define PE_SPEC_MAGIC 0x66737063u /* "fspc" */
struct fastpe_spec {
    uint32_t magic;
    pe_spec sp;
    int has_zero; /* rows at position `zero` are all zeros (fairseq) */
    int64_t zero;
    double max_position; /* |positions| allowed by the exact angle reduction */
    int rounding;        /* PE_ROUND_*: fastpe_spec_set_rounding */
};

/* The opaque fastpe_rope of both headers: the [sin | cos] encoding of nf listed
 * frequencies (sp.wlist == w), with its own copies of them and of its plan. */
#define PE_ROPE_MAGIC 0x66726f70u /* "frop" */
/* A multi-axis handle (fastpe_rope_from_axes): the fields below are read only
 * under this magic (the binding builds plain handles on the stack). */
#define PE_ROPE_AXES_MAGIC 0x66726f61u /* "froa" */
/* One axis of a multi-axis handle: its own frequencies' encoding (the columns
 * cols[0 .. sp.nf-1] of the handle's list), wide as pe_rope_axis's. */
typedef struct {
    pe_spec sp;
    pe_spec wide;
    int has_wide;
    double *w;
    double *plan;
    int64_t *cols;
    double max_position;
} pe_rope_axis_data;
struct fastpe_rope {
    uint32_t magic;
    pe_spec sp;
    double *w;
    double *plan; /* NULL: prepared per call (plans beyond 4 MiB) */
    double attention;
    double max_position;
    int n_axes;              /* PE_ROPE_AXES_MAGIC only */
    pe_rope_axis_data *axes; /* PE_ROPE_AXES_MAGIC only: n_axes entries */
    int rounding;            /* PE_ROUND_*: fastpe_rope_set_rounding */
    double *lows;            /* NULL, or pe_plan_lows of plan (pe_rope_lows) */
};

/* A RoPE handle kept by the plan cache, with the anchor cache of its decoding
 * steps (pe_anchor_cache): what fastpe.apply_rope and rope_cache reuse between
 * calls.  Never freed while held. */
typedef struct {
    struct fastpe_rope *h;
    pe_anchor_cache ac;
} pe_rope_plan;
struct fastpe_rope_params;
/* The plan of the nf listed frequencies w (kind PE_KIND_F32 or PE_KIND_F64;
 * attention factor 1), or of a rule's parameters for head_dim: cached or built
 * and added, held by the caller until pe_rope_plan_done(plan, *slot); NULL
 * when the frequencies or the parameters are refused (the error detail says
 * why) or memory ran out. */
PE_HIDDEN const pe_rope_plan *pe_rope_plan_list(const void *w, int kind, int64_t nf, int *slot);
PE_HIDDEN const pe_rope_plan *pe_rope_plan_rule(const struct fastpe_rope_params *p,
                                                int64_t head_dim, int *slot);
PE_HIDDEN void pe_rope_plan_done(const pe_rope_plan *plan, int slot);
/* The plan of the nf frequencies w and attention factor, built and added
 * under key (as pe_plans_add); NULL: refused or out of memory. */
PE_HIDDEN const pe_rope_plan *pe_rope_plan_add(const void *key, size_t len, const double *w,
                                               int64_t nf, double attention, int *slot);

/* A spec handle holding sp (which must not list its frequencies), or NULL. */
PE_HIDDEN struct fastpe_spec *pe_spec_handle_new(const pe_spec *sp, int has_zero, int64_t zero,
                                                 double max_position);

/* Handle shells (lifecycle.c): the structs behind handles, kept by the library
 * once freed so that a stale pointer never reaches freed memory. */
#define PE_SHELL_SPEC  0
#define PE_SHELL_ROPE  1
#define PE_SHELL_KINDS 2
PE_HIDDEN void *pe_shell_alloc(int kind, size_t size); /* zeroed, or NULL */
PE_HIDDEN void pe_shell_free(int kind, void *p);
/* *slot, read under the shells' lock (NULL: nothing kept yet). */
PE_HIDDEN double *pe_shell_kept(double *const *slot);
/* v published into *slot unless another thread did first (then v is freed):
 * the kept pointer. */
PE_HIDDEN double *pe_shell_keep(double **slot, double *v);
/* The fork handlers (pthread_atfork, installed by pe_init): every lock of the
 * library taken before fork() and released on both sides. */
PE_HIDDEN void pe_fork_prepare(void);
PE_HIDDEN void pe_fork_parent(void);
PE_HIDDEN void pe_fork_child(void);
/* The plan cache (plans.c), the library's only one: values kept under the
 * bytes of a key (written field by field, starting with a PE_PLAN_* tag), each
 * held by its callers.  pe_plans_find: the value of key with a hold on it
 * (*slot >= 0), or NULL (*slot -1).  pe_plans_add: keep value (its size in
 * bytes, freed by drop when evicted) under key and return it held; when
 * another thread added the key first, value is dropped and theirs returned;
 * when there is no room, value itself with *slot -1 (then it is the caller's
 * to drop after use).  pe_plans_release: the hold of pe_plans_find/add given
 * back (slot -1: nothing). */
#define PE_PLAN_TABLE      1 /* a table's plan (api.c) */
#define PE_PLAN_ROPE_LIST  2 /* a RoPE handle of listed frequencies (rope.c) */
#define PE_PLAN_ROPE_RULE  3 /* a RoPE handle of a rule's parameters (rope_rules.c) */
#define PE_PLAN_ROPE_AXES  4 /* a multi-axis RoPE handle (rope.c) */
#define PE_PLAN_TABLE_LOWS 5 /* the low parts of a table plan's rows (api.c) */
typedef void (*pe_plan_drop)(void *value);
PE_HIDDEN void *pe_plans_find(const void *key, size_t len, int *slot);
PE_HIDDEN void *pe_plans_add(const void *key, size_t len, void *value, size_t bytes,
                             pe_plan_drop drop, int *slot);
PE_HIDDEN void pe_plans_release(int slot);
/* bytes more counted for the held entry slot (slot -1: nothing), for what its
 * value keeps once made (a RoPE handle's low parts); freed with it. */
PE_HIDDEN void pe_plans_charge(int slot, size_t bytes);
/* fn(ctx, key, len, holds) for every entry, under the cache's lock. */
PE_HIDDEN void pe_plans_visit(void (*fn)(void *ctx, const void *key, size_t len, int64_t refs),
                              void *ctx);
/* out[0 .. 4]: entries, bytes held, values added since load (each one built),
 * the entry bound, the byte bound. */
PE_HIDDEN void pe_plans_stats(int64_t *out);
/* out[2 t], out[2 t + 1]: the entries whose key starts with tag t (0: any other)
 * and the holds on them, t < PE_PLAN_KINDS (tests). */
#define PE_PLAN_KINDS 8
PE_HIDDEN void pe_plans_kinds(int64_t *out);
/* The entry bound (1 .. 1024; tests), the old one returned. */
PE_HIDDEN int pe_plans_set_max(int n);
/* The cache's lock taken (1) or released (0), for the fork handlers; the idle
 * entries dropped (at unload, and for tests). */
PE_HIDDEN void pe_plans_lock(int take);
PE_HIDDEN void pe_plans_clear(void);

/* Called on the calling thread between the chunks of a long fill; nonzero
 * stops the fill (the rows done so far stay written). */
typedef int (*pe_poll_fn)(void *ctx);

/* Entry kinds, as the binding names them (struct-module codes; 'b': bfloat16). */
#define PE_KIND_F32  'f'
#define PE_KIND_F64  'd'
#define PE_KIND_F16  'e'
#define PE_KIND_BF16 'b'

/* Codes the library adds after the ones kernel.pxd and fastpe.h define. */
#define PE_EINTR   10
#define PE_EINVAL  11
#define PE_EHANDLE 12
/* The highest code: fastpe.kernel.ERROR_MESSAGES holds 1 .. PE_ELAST (a test
 * checks it against the header's list). */
#define PE_ELAST PE_EHANDLE

#define PE_MAX_WIDTH ((int64_t)1 << 40)

PE_HIDDEN void pe_init(void);
PE_HIDDEN int pe_init_error(void);

PE_HIDDEN int64_t pe_block_rows(int64_t nf);
PE_HIDDEN size_t pe_plan_doubles(int64_t nf, int64_t B);
PE_HIDDEN int pe_prepare(double *plan, const pe_spec *sp, int64_t first, int64_t count, int nt);
PE_HIDDEN int pe_threads(int num_threads, int64_t N, int64_t D, int64_t work);
PE_HIDDEN double pe_scratch_bound(const pe_spec *sp, int64_t rows, int num_threads, int add);
PE_HIDDEN double pe_max_position(const pe_spec *sp);
PE_HIDDEN int pe_frequencies_finite(const pe_spec *sp);
PE_HIDDEN void pe_init_rows(pe_rows *rq, int64_t nseq, int64_t S, int has_zero, int64_t zero);

/* A whole fill: kind one of PE_KIND_*, plan a prepared plan of sp or NULL, ac
 * the encoding's anchor cache or NULL, poll NULL (one go) or a callback run
 * between chunks of about pe_chunk_entries entries (then PE_EINTR when it
 * asks to stop).  Arguments are validated by the callers. */
PE_HIDDEN int pe_fill_run(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                          const pe_rows *rq, int num_threads, const double *plan,
                          pe_anchor_cache *ac, pe_poll_fn poll, void *poll_ctx);
/* The low parts (double-double) of every table row of a prepared plan of sp,
 * which a correctly rounded fill would otherwise evaluate per call (rq->lows):
 * malloc'd, 2 (B/2+1) nf doubles; NULL when out of memory. */
PE_HIDDEN double *pe_plan_lows(const pe_spec *sp, const double *plan);
/* A RoPE handle's pe_plan_lows, made by its first correctly rounded cache and
 * kept with it (freed by fastpe_rope_free); NULL for a handle without a kept
 * plan, or when out of memory.  Safe from several threads at once. */
PE_HIDDEN const double *pe_rope_lows(struct fastpe_rope *h);
/* The same for the handle of a held plan of the plan cache (slot as
 * pe_rope_plan_list gave it): the 2 (B/2+1) nf doubles, when this call makes
 * them, are counted in the cache's bytes for the entry. */
PE_HIDDEN const double *pe_rope_plan_lows(const pe_rope_plan *plan, int slot);
/* Entries the accurate float64 rows left to their exact fallback (a count). */
PE_HIDDEN uint64_t pe_f64_undecided(void);
/* The float64 row of a one-position fill (one integer position, plan given)
 * as pe_fill_run writes it, without its setup; PE_EINVAL for any other fill. */
PE_HIDDEN int pe_fill_one_f64(double *row, const pe_spec *sp, const pe_rows *rq, const double *plan,
                              pe_anchor_cache *ac);
/* The same with the library's shared plan cache (plans keyed by spec). */
PE_HIDDEN int pe_fill_cached(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                             const pe_rows *rq, int num_threads);
/* (nf, w0, base, denom, refs) of up to n cached plans into out[5*i ...]; the count. */
PE_HIDDEN int pe_plan_cache_snapshot(double *out, int n);

PE_HIDDEN void pe_anchor_init(pe_anchor_cache *ac);
PE_HIDDEN void pe_anchor_free(pe_anchor_cache *ac);

/* The rows RoPE rotates: every index of the leading axes (all but the last), in
 * C order.  Row (i_0, .., i_{m-1}) starts at base + sum(i_j * strides[j]) bytes
 * and takes the angles of table row (i_0 * S if per_batch else 0) + i_sa. */
#define PE_ROPE_MAX_AXES 64
typedef struct {
    char *base;
    int m;
    int sa;
    int per_batch;
    int kind; /* PE_KIND_* */
    int half; /* pairs (i, i + nf) rather than (2i, 2i + 1) */
    int64_t S;
    int64_t nf;
    double attention;
    const double *table;
    int64_t shape[PE_ROPE_MAX_AXES];
    int64_t strides[PE_ROPE_MAX_AXES];
} pe_rope_rows;

/* How many rows R holds: the product of its leading axes. */
static inline int64_t pe_rope_nrows(const pe_rope_rows *R) {
    int64_t n = 1;
    for (int j = 0; j < R->m; j++)
        n *= R->shape[j];
    return n;
}

/* Every row of R[0] .. R[nR-1] (nR 1 or 2: q and k, sharing the table, S and
 * per_batch) on nt threads, polling between chunks when poll is not NULL
 * (PE_EINTR). */
PE_HIDDEN int pe_rope_rotate(const pe_rope_rows *const *R, int nR, int nt, pe_poll_fn poll,
                             void *poll_ctx);
/* The rows of R[0] .. R[nR-1] together, or -1 when nR is not 1 or 2 (q, or q
 * and k). */
PE_HIDDEN int64_t pe_rope_rows_total(pe_rope_rows *const *R, int nR);
/* Every row of R[0] .. R[nR-1] (nrows in all) by the angle table `table` of W
 * entries a row, on the team a fill of that size gets; the R[i].table fields
 * are set for the call and cleared after (shared by the one-axis and the
 * multi-axis rotations). */
PE_HIDDEN int pe_rope_rotate_by(pe_rope_rows *const *R, int nR, const double *table, int64_t nrows,
                                int64_t W, int num_threads, pe_poll_fn poll, void *poll_ctx);
/* A whole rotation, as fastpe.apply_rope runs it: the angle table of rq's
 * positions (sp's [sin | cos] rows; plan, ac as pe_fill_run), then every row
 * of R[0] .. R[nR-1] by it (nR 1 or 2; their table fields are set here), poll
 * NULL or called between chunks (PE_EINTR). */
/* A RoPE list of nf frequencies usable by the kernel: each finite, >= 0 and
 * <= 1e280 (it splits 2^27 w and multiplies by positions); the error detail
 * names the first that is not (inv_freq, its index and value, the bound).  The
 * handles and the Python binding both call it. */
PE_HIDDEN int pe_rope_check_frequencies(const double *inv_freq, int64_t nf);
/* An array rotated in place (q or k) as its buffer holds it: its argument
 * name, first entry, entry size, axes and strides (bytes). */
typedef struct {
    const char *name;
    const char *buf;
    int64_t itemsize;
    int ndim;
    const int64_t *shape;
    const int64_t *strides;
} pe_rope_array;
/* head_dim for pe_rope_check_arrays: q's last axis */
#define PE_ROPE_HEAD_DIM_OF_Q INT64_MIN
/* The checks of q and k (k NULL: q alone) for a rotation in place by head_dim
 * (or PE_ROPE_HEAD_DIM_OF_Q) with sequence axis seq_axis (negative: from the
 * end), in this order, each refusal's detail naming (argument, index, value,
 * limit): each array aligned (EINVAL, name, -1, buf % itemsize, itemsize), of
 * 2 to 65 axes (ESIZE, name, -1, ndim, 2 or 65), its last axis contiguous
 * (ESTRIDE, name, ndim-1, stride, itemsize) and its rows nested so that none
 * share an element (ESTRIDE, name, axis, stride, the span inside it); q and k
 * sharing no element (EOVERLAP, "k"); head_dim within 2 .. 2^31 (ESIZE,
 * "head_dim"); each last axis at least head_dim (ESIZE, name, ndim-1, length,
 * head_dim); seq_axis an axis before the last (EINVAL, "seq_axis", 0 for q or
 * 1 for k, seq_axis, ndim); k with q's number of axes (ESIZE, "k", -1, k's,
 * q's) and its sequence and batch axes (ESIZE, "k", axis, k's, q's).  On
 * success *hd is head_dim and *sa the sequence axis (0 .. ndim-2). */
/* The checks of an output written row by row (a table's out, rope_cache's cos
 * and sin: b NULL or the second of the pair), each refusal naming the array,
 * in this order: exactly nd axes of the given shape (ESIZE, name, -1, ndim,
 * nd; or name, axis, length, shape[axis]), aligned to its entries, strides
 * included (EINVAL, name, -1, misalignment, itemsize); then, when it holds
 * entries: its last axis contiguous (ESTRIDE, name, nd-1, stride, itemsize),
 * its rows (axis nd-2) forwards and apart (ESTRIDE, name, nd-2, stride, row
 * width) and no two elements sharing memory on any axis (ESTRIDE, name, axis,
 * stride, the span inside it: a broadcast axis); a and b sharing no element
 * (EOVERLAP, b's name). */
PE_HIDDEN int pe_check_out(const pe_rope_array *a, const pe_rope_array *b, const int64_t *shape,
                           int nd);
/* Whether n rows of width bytes every stride bytes (stride >= width, or n == 1)
 * from a and from b share a byte (the C API's cos and sin), decided as above. */
PE_HIDDEN int pe_rope_rows_meet(const char *a, const char *b, int64_t n, int64_t stride,
                                int64_t width);
/* The smallest and largest position of a rotation's tokens (ihi < ilo: none;
 * lo, hi the same as doubles, or the float positions' own). */
typedef struct {
    int64_t ilo, ihi;
    double lo, hi;
} pe_rope_span;
/* The positions of a rotation's (or a cache's: batch 1) batch x seq tokens, seq
 * in 0 .. 2^62 (else ESIZE "seq_len" (-1, seq, 0 or 2^62)): explicit ids (pos:
 * int64 within +-2^62, else ERANGE "positions" (its flat index, value, 2^62), or
 * float64 with pos_float, each finite, else ERANGE "positions" (its flat
 * index, value, DBL_MAX)); shape (seq,) or (1 or batch, seq), else
 * ESIZE "positions" (-1, ndim, seq)), or the offsets (off: int64 of shape (),
 * (1,) or (batch,), else ESIZE "offset" (-1, ndim, batch); NULL: the scalar
 * offset), each within +-2^62 (ERANGE "offset", its index or -1, value,
 * 2^62); their span into *span. */
PE_HIDDEN int pe_rope_check_tokens(const pe_rope_array *pos, int pos_float,
                                   const pe_rope_array *off, int64_t offset, int64_t batch,
                                   int64_t seq, pe_rope_span *span);
/* The span's positions within +-limit, the exact angle reduction of the
 * frequencies that rotate them (pe_max_position), else ERANGE "positions"
 * (axis: -1, or the axis of multi-axis positions; the extreme position;
 * limit).  No tokens (hi < lo): nothing to check. */
PE_HIDDEN int pe_rope_check_span(const pe_rope_span *span, double limit, int64_t axis);
/* Multi-axis positions (pos: int64, or float64 with pos_float), the last axis
 * holding a token's n coordinates (1 .. 64, else ESIZE "n_axes"), else ESIZE
 * (name, its last axis (0 for no axes), length, n); a rotation's (seq >= 0) of
 * shape (seq, n) or (1 or batch, seq, n), else ESIZE (name, -1, ndim, seq), a
 * cache's (seq < 0) of any shape (..., n); each coordinate finite (int64:
 * within +-2^62), else ERANGE (name, flat index, value, DBL_MAX (2^62)).  Each
 * axis's span into spans[0 .. n-1]. */
PE_HIDDEN int pe_rope_check_axes_tokens(const pe_rope_array *pos, int pos_float, int64_t n,
                                        int64_t batch, int64_t seq, pe_rope_span *spans);
PE_HIDDEN int pe_rope_check_arrays(const pe_rope_array *q, const pe_rope_array *k, int64_t head_dim,
                                   int64_t seq_axis, int64_t *hd, int *sa);
PE_HIDDEN int pe_rope_run(pe_rope_rows *const *R, int nR, const pe_spec *sp, const pe_rows *rq,
                          int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                          void *poll_ctx);
/* pe_rope_run with every rotated entry correctly rounded (the exact rotation
 * of the inputs by the angles of rq's positions, times R[0]->attention, rounded
 * once; rope_rotate.c); R's table fields unused. */
PE_HIDDEN int pe_rope_run_cr(pe_rope_rows *const *R, int nR, const pe_spec *sp, const pe_rows *rq,
                             int num_threads, pe_poll_fn poll, void *poll_ctx);
/* One axis of a multi-axis angle table: the encoding of its own frequencies
 * (sp's [sin | cos] rows; plan, ac as pe_fill_run), the positions of its tokens
 * (rq: a column of the caller's positions, nseq x S rows), and the table
 * columns its sp->nf frequencies go to (cols[j] < the table's nf; sine in
 * column cols[j], cosine in nf + cols[j]).  wide: NULL, or (when the columns
 * are one run) sp with the table's width and those columns' offsets, whose
 * rows are written straight into the table. */
typedef struct {
    const pe_spec *sp;
    const pe_spec *wide;
    const double *plan;
    pe_anchor_cache *ac;
    pe_rows rq;
    const int64_t *cols;
} pe_rope_axis;

/* A multi-axis RoPE handle kept by the plan cache: the nf frequencies of a rule
 * or a list laid out over n_axes axes by their sections (fastpe_rope_from_axes
 * with fastpe_rope_section_axes' assignment), and what a call reads of it: the
 * axes with frequencies as ax[0 .. nax-1] (their rq left to the caller; each
 * with its own anchor cache), which[i] the index of ax[i] among all axes,
 * max_position[a] the largest |position| of axis a (HUGE_VAL for an axis
 * without frequencies), and the rule's attention factor (1 for a list).  Never
 * freed while held. */
typedef struct {
    struct fastpe_rope *h;
    int n_axes;
    int nax;
    int64_t nf;
    double attention;
    const pe_rope_axis *ax;
    const int *which;
    const double *max_position;
} pe_rope_axes_plan;
/* The multi-axis plan of nf listed frequencies w (kind PE_KIND_F32 or
 * PE_KIND_F64), or of a rule's parameters p for head_dim (rope_rules.c), with
 * sections[0 .. n_axes-1] laid out as section_layout (FASTPE_SECTIONS_*):
 * cached, or built and added, under the sections and the list's (or the
 * rule's) key; held by the caller until pe_rope_axes_plan_done(plan, *slot).
 * NULL when the library refuses them (the error detail says why, as
 * fastpe_rope_section_axes and fastpe_rope_from_axes) or memory ran out. */
PE_HIDDEN const pe_rope_axes_plan *pe_rope_plan_axes(const void *w, int kind, int64_t nf,
                                                     const int64_t *sections, int n_axes,
                                                     int section_layout, int *slot);
PE_HIDDEN const pe_rope_axes_plan *pe_rope_plan_axes_rule(const struct fastpe_rope_params *p,
                                                          int64_t head_dim, const int64_t *sections,
                                                          int n_axes, int section_layout,
                                                          int *slot);
/* The first words of a multi-axis plan's key (the tag, n_axes, the layout, the
 * sections: 3 + n_axes of 8 bytes, their count returned; -1 when refused), and
 * the plan of the nf frequencies w built and added under key (as pe_plans_add;
 * NULL: refused or out of memory). */
PE_HIDDEN int pe_rope_axes_key(void *key, const int64_t *sections, int n_axes, int section_layout);
PE_HIDDEN const pe_rope_axes_plan *pe_rope_plan_axes_add(const void *key, size_t len,
                                                         const double *w, int64_t nf,
                                                         double attention, const int64_t *sections,
                                                         int n_axes, int section_layout, int *slot);
PE_HIDDEN void pe_rope_axes_plan_done(const pe_rope_axes_plan *plan, int slot);
/* ax[0 .. plan->nax-1]: the plan's axes reading the columns of positions, a
 * C-contiguous (nseq, S, n_axes) int64 array (float64 when real). */
PE_HIDDEN void pe_rope_axes_rows(const pe_rope_axes_plan *plan, pe_rope_axis *ax,
                                 const void *positions, int real, int64_t nseq, int64_t S);

/* The [sin | cos] table of nf frequencies for ntab tokens whose frequencies
 * follow n_axes axes: each axis's rows filled (kind PE_KIND_*, each entry
 * rounded once, as pe_fill_run) and scattered into its columns of `table`
 * (row stride 2 nf).  Every column must belong to exactly one axis. */
PE_HIDDEN int pe_rope_table_axes(void *table, int kind, int64_t nf, int64_t ntab,
                                 const pe_rope_axis *ax, int n_axes, int num_threads,
                                 pe_poll_fn poll, void *poll_ctx);
/* pe_rope_run with the table of pe_rope_table_axes (float64). */
PE_HIDDEN int pe_rope_run_axes(pe_rope_rows *const *R, int nR, int64_t nf, int64_t ntab,
                               const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                               void *poll_ctx);
/* Whether rows are walked in blocks of positions (1, the default) or in their
 * axes' C order (0); the same bits.  Returns the old setting. */
PE_HIDDEN int pe_rope_set_blocked(int on);
/* Whether rows are rotated by the AVX-512/AVX2 loops where the CPU has them (1,
 * the default) or by the portable ones (0); the same bits.  Returns the old
 * setting. */
PE_HIDDEN int pe_rope_set_wide(int on);

/* A convention's knobs (spec.c): pe_knobs_check refuses values no width can
 * use (base, position_scale, shift, the enums), naming the argument in the
 * detail; pe_spec_of makes the kernel's spec of the knobs at width d (the one
 * place a convention becomes a spec: the native API and the Python binding
 * both call it), also refusing widths the convention does not define
 * ("d_model"; "denominator" <= 0 with index d, value the denominator) and a
 * base whose frequencies overflow ("base", limit DBL_MAX). */
struct fastpe_knobs;
PE_HIDDEN int pe_knobs_check(const struct fastpe_knobs *k);
PE_HIDDEN int pe_spec_of(const struct fastpe_knobs *k, int64_t d, pe_spec *sp);
/* The knobs' spellings and the named conventions (spec.c's tables):
 * pe_knob_name gives the spelling of value (an enum, FASTPE_DENOM_* etc.; for
 * PE_KNOB_PRESET the index of a fastpe_knobs_preset name) of a kind, NULL past
 * the kind's last; pe_knob_parse the value of a spelling, -1 for none. */
#define PE_KNOB_DENOMINATOR 0
#define PE_KNOB_LAYOUT      1
#define PE_KNOB_ODD         2
#define PE_KNOB_PRESET      3
PE_HIDDEN const char *pe_knob_name(int kind, int value);
PE_HIDDEN int pe_knob_parse(int kind, const char *s);

/* The error detail (status.c): pe_fail records which argument a check refused
 * (name: a static string; index -1 when not an element) and returns code;
 * pe_settle(ret), at an entry point's exit, gives a failure no check named
 * a bare detail (its code) and returns ret. */
PE_HIDDEN int pe_fail(int code, const char *argument, int64_t index, double value, double limit);
PE_HIDDEN int pe_settle(int ret);

/* The rounding modes of the handles (FASTPE_ROUND_* of the public header,
 * which the binding's translation unit does not see). */
#define PE_ROUND_DEFAULT 0
#define PE_ROUND_CORRECT 1
/* A handle's rounding against the call: correct rounding is for fills and
 * caches of every entry type (kind 0: a call that cannot honour it, an add or
 * a rotation, FASTPE_EINVAL naming the handle's argument). */
PE_INLINE int pe_check_rounding(int rounding, int kind, const char *name) {
    if (rounding == PE_ROUND_DEFAULT || kind != 0)
        return 0;
    return pe_fail(PE_EINVAL, name, -1, (double)rounding, NAN);
}

/* Every check of a table fill, in one place: the fill of sp's rows that rq
 * describes (rows nseq * S, named n_name in the detail: "seq_len" or "n") into
 * out, row_stride entries apart, of entries of kind (PE_KIND_*); kind 0: no
 * buffer yet (out and row_stride ignored: the arguments alone, before one is
 * allocated).  Sizes, the
 * row stride and span, base, scale, positions finite and within the exact
 * reduction (the index of the first bad one), inputs overlapping out.  The
 * public entry points and the Python binding both call it. */
PE_HIDDEN int pe_check_fill(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                            const pe_rows *rq, const char *n_name);
/* pe_check_fill with the exact reduction's bound known (a spec handle's, its
 * frequencies checked when it was made: evaluating the bound costs a few
 * microseconds, a one-row fill's whole time); NaN: computed from sp. */
PE_HIDDEN int pe_check_fill_within(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                                   const pe_rows *rq, const char *n_name, double max_position);
/* pe_check_fill_within, then the fill: with plan NULL through the shared plan
 * cache (specs without a frequency list), else with that plan; ac, poll as
 * pe_fill_run; max_position as pe_check_fill_within (NaN: computed from sp). */
PE_HIDDEN int pe_fill_checked(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                              const pe_rows *rq, int num_threads, const double *plan,
                              pe_anchor_cache *ac, pe_poll_fn poll, void *poll_ctx,
                              double max_position);

/* Tunables (tests and measurements; not while a fill runs).  Each setter
 * returns the old value. */
PE_HIDDEN int64_t pe_set_serial_below(int64_t work);
PE_HIDDEN int64_t pe_set_chunk_entries(int64_t n);
PE_HIDDEN int64_t pe_chunk_entries(void);
/* The streaming-store thresholds live with the cache-size probe that sets them
 * (system.c); fills read them through pe_stream_bytes (bytes, by item size). */
PE_HIDDEN void pe_set_stream_bytes(double f64, double f32, double *old_f64, double *old_f32);
PE_HIDDEN void pe_default_stream_bytes(double *f64, double *f32);
PE_HIDDEN double pe_stream_bytes(int itemsize);

/* The cores this process may use, the fork guard, the CPU quota. */
PE_HIDDEN int pe_usable_cpus(void);
PE_HIDDEN int pe_forked_child(void);
PE_HIDDEN void pe_set_cpu_quota(int n);
/* The tightest cgroup CPU quota (whole cores, rounded up) and memory limit
 * (bytes) of this process, 0 for none; the files' paths given (for tests). */
PE_HIDDEN int pe_cgroup_cpu_quota_in(const char *proc_cgroup, const char *root);
PE_HIDDEN int64_t pe_cgroup_memory_limit_in(const char *proc_cgroup, const char *root);
PE_HIDDEN int pe_max_threads(void);
PE_HIDDEN int pe_idle_team(int nt);
PE_HIDDEN int pe_set_idle_teams(int on);
/* The default team's cap after a window of n cores in which other processes
 * used `others` cores and this one `own` (on average), the last cap `last`. */
PE_HIDDEN int pe_idle_estimate(int n, double others, double own, int last);
PE_HIDDEN int pe_openmp_version(void);

PE_HIDDEN const char *pe_strerror(int code);

/* Whether n rows of d entries at row_stride (>= d when n > 1) span at most
 * INT64_MAX / 16 entries: any real buffer does, and then every byte offset of
 * a row (entries of at most 8 bytes) is an int64 with room to spare.  A wider
 * layout is FASTPE_ESTRIDE, before any offset is formed. */
PE_INLINE int pe_span_ok(int64_t n, int64_t row_stride, int64_t d) {
    const int64_t lim = INT64_MAX / 16;
    if (d > lim)
        return 0;
    return n <= 1 || row_stride <= (lim - d) / (n - 1);
}

/* ret, with errno restored to saved.  errno is the caller's: the library
 * reports errors as codes, but libm (a pow that overflows), an OpenMP runtime's
 * start-up and file probes set errno on their way, so every entry point puts
 * it back. */
PE_INLINE int pe_keep_errno(int saved, int ret) {
    errno = saved;
    return pe_settle(ret);
}

/* a // b, rounded towards -infinity (Python's) */
PE_INLINE int64_t pe_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q -= 1;
    return q;
}

PE_INLINE double pe_extent(int64_t offset, int64_t S) {
    /* largest |position| of offset .. offset+S-1 (in double: no overflow) */
    double a = fabs((double)offset);
    double b = S > 0 ? fabs((double)offset + (double)(S - 1)) : 0.0;
    return a >= b ? a : b;
}

#ifdef __cplusplus
}
#endif

#endif /* FASTPE_PE_LIB_H */
