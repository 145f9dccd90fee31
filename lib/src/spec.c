/*
 * Every convention from C: the knobs of a convention (fastpe.Convention's, passed
 * in by the Python binding too) compiled into the kernel's spec -- the only place
 * it is made -- and a spec handle, and the fills through it.  Each fill is one
 * call into the driver (fill.c).  Also the rounding setting of both kinds of
 * handle (spec and RoPE).
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <float.h>
#include <stdlib.h>

/* the largest position_scale (fastpe._validate.MAX_SCALE's value) */
#define MAX_SCALE 1e280

/* The knobs' spellings, as fastpe.Convention and fastpe_spec_from_knobs take
 * them, indexed by kind (PE_KNOB_*) and value (the FASTPE_DENOM_*,
 * FASTPE_COLUMNS_* and FASTPE_ODD_* enums, 0 up); the Python binding reads its
 * spellings from here, so that each is written once. */
#define KNOB_MAX 5 /* the most spellings of one kind */
static const char *const knob_names[3][KNOB_MAX + 1] = {
    {"d/2", "h", "h-1", "max(h-1,1)", "h-shift", NULL},
    {"interleaved", "split", "split_cos_first", NULL},
    {"sin", "zero", "error", NULL},
};

/* The named conventions' knobs that differ from Vaswani's (base 10000,
 * position_scale 1 for all); fastpe.Convention's named constructors start from
 * these.  tensor2tensor: max/min timescale 1e4 / 1; diffusers:
 * downscale_freq_shift 1, scale 1, no flip; fairseq: padding_idx 1. */
static const struct preset {
    const char *name;
    int denominator, columns, odd;
    double shift;
    int has_padding_idx;
    int64_t padding_idx;
} presets[] = {
    {"vaswani", FASTPE_DENOM_D2, FASTPE_COLUMNS_INTERLEAVED, FASTPE_ODD_SIN, 0.0, 0, 0},
    {"tensor2tensor", FASTPE_DENOM_MAX_H_MINUS_1_1, FASTPE_COLUMNS_SPLIT, FASTPE_ODD_ZERO, 0.0, 0,
     0},
    {"fairseq", FASTPE_DENOM_H_MINUS_1, FASTPE_COLUMNS_SPLIT, FASTPE_ODD_ZERO, 0.0, 1, 1},
    {"diffusers", FASTPE_DENOM_H_MINUS_SHIFT, FASTPE_COLUMNS_SPLIT, FASTPE_ODD_ZERO, 1.0, 0, 0},
    {"gptj", FASTPE_DENOM_D2, FASTPE_COLUMNS_SPLIT, FASTPE_ODD_ERROR, 0.0, 0, 0},
};
#define NPRESETS ((int)(sizeof(presets) / sizeof(presets[0])))

const char *pe_knob_name(int kind, int value) {
    if (kind == PE_KNOB_PRESET)
        return value >= 0 && value < NPRESETS ? presets[value].name : NULL;
    if (kind < 0 || kind > PE_KNOB_ODD || value < 0 || value >= KNOB_MAX)
        return NULL;
    return knob_names[kind][value]; /* NULL past the kind's last */
}

int pe_knob_parse(int kind, const char *s) {
    const char *name;
    for (int i = 0; s != NULL && (name = pe_knob_name(kind, i)) != NULL; i++) {
        if (strcmp(s, name) == 0)
            return i;
    }
    return -1;
}

int fastpe_knobs_preset(const char *name, fastpe_knobs *k) {
    const struct preset *p;
    int i;
    if (name == NULL || k == NULL)
        return pe_settle(pe_fail(FASTPE_ENULL, name == NULL ? "name" : "knobs", -1, NAN, NAN));
    i = pe_knob_parse(PE_KNOB_PRESET, name);
    /* an unknown name leaves the caller's struct as it was */
    if (i < 0)
        return pe_settle(pe_fail(FASTPE_EINVAL, "name", -1, NAN, NAN));
    p = &presets[i];
    memset(k, 0, sizeof(*k));
    k->size = sizeof(*k);
    k->base = 10000.0;
    k->position_scale = 1.0;
    k->denominator = p->denominator;
    k->shift = p->shift;
    k->columns = p->columns;
    k->odd = p->odd;
    k->has_padding_idx = p->has_padding_idx;
    k->padding_idx = p->padding_idx;
    return FASTPE_OK;
}

int pe_knobs_check(const fastpe_knobs *k) {
    if (k->size < sizeof(fastpe_knobs))
        return pe_fail(FASTPE_EINVAL, "size", -1, (double)k->size, (double)sizeof(fastpe_knobs));
    if (!(isfinite(k->base) && k->base > 0.0))
        return pe_fail(FASTPE_EBASE, "base", -1, k->base, 0.0);
    /* limit 0: not finite and > 0; MAX_SCALE: beyond it, where the angles k * w
       overflow for every position past the first few */
    if (!(isfinite(k->position_scale) && k->position_scale > 0.0))
        return pe_fail(FASTPE_EINVAL, "position_scale", -1, k->position_scale, 0.0);
    if (k->position_scale > MAX_SCALE)
        return pe_fail(FASTPE_EINVAL, "position_scale", -1, k->position_scale, MAX_SCALE);
    if (!isfinite(k->shift))
        return pe_fail(FASTPE_EINVAL, "shift", -1, k->shift, NAN);
    if (k->denominator < FASTPE_DENOM_D2 || k->denominator > FASTPE_DENOM_H_MINUS_SHIFT)
        return pe_fail(FASTPE_EINVAL, "denominator", -1, k->denominator, NAN);
    if (k->columns < FASTPE_COLUMNS_INTERLEAVED || k->columns > FASTPE_COLUMNS_SPLIT_COS_FIRST)
        return pe_fail(FASTPE_EINVAL, "layout", -1, k->columns, NAN);
    if (k->odd < FASTPE_ODD_SIN || k->odd > FASTPE_ODD_ERROR)
        return pe_fail(FASTPE_EINVAL, "odd", -1, k->odd, NAN);
    return FASTPE_OK;
}

int pe_spec_of(const fastpe_knobs *k, int64_t d, pe_spec *sp) {
    int64_t h = d / 2, nf;
    double denom;
    int err = pe_knobs_check(k);
    if (err != FASTPE_OK)
        return err;
    if (d < 1)
        return pe_fail(FASTPE_ESIZE, "d_model", -1, (double)d, 1.0);
    if (d > PE_MAX_WIDTH)
        return pe_fail(FASTPE_ESIZE, "d_model", -1, (double)d, (double)PE_MAX_WIDTH);
    /* index: the width (-1: the refusal is of any odd width) */
    if (d % 2 && k->odd == FASTPE_ODD_ERROR)
        return pe_fail(FASTPE_EINVAL, "d_model", -1, (double)d, 2.0);
    nf = k->odd == FASTPE_ODD_SIN ? (d + 1) / 2 : h;
    switch (k->denominator) {
    case FASTPE_DENOM_D2:
        denom = (double)d / 2.0;
        break;
    case FASTPE_DENOM_H:
        denom = (double)h;
        break;
    case FASTPE_DENOM_H_MINUS_1:
        denom = (double)(h - 1);
        break;
    case FASTPE_DENOM_MAX_H_MINUS_1_1:
        denom = (double)(h - 1 > 1 ? h - 1 : 1);
        break;
    default:
        denom = (double)h - k->shift;
        break;
    }
    if (!(denom > 0)) {
        /* the ladder divides by a denominator <= 0: index the width, value the
           denominator there */
        if (nf > 1)
            return pe_fail(FASTPE_EINVAL, "denominator", d, denom, 0.0);
        denom = 1.0; /* one frequency: w_0 = position_scale whatever it is */
    }
    memset(sp, 0, sizeof(*sp));
    sp->d = d;
    sp->nf = nf;
    sp->w0 = k->position_scale;
    sp->base = k->base;
    sp->denom = denom;
    sp->zero_col = d % 2 && k->odd == FASTPE_ODD_ZERO ? d - 1 : -1;
    if (k->columns == FASTPE_COLUMNS_INTERLEAVED) {
        sp->layout = PE_LAYOUT_INTERLEAVED;
        sp->npairs = h;
        sp->lone_sin = nf > h;
    } else if (k->columns == FASTPE_COLUMNS_SPLIT) {
        sp->layout = PE_LAYOUT_SPLIT;
        sp->s_off = 0;
        sp->ns = nf;
        sp->c_off = nf;
        sp->nc = h;
    } else {
        sp->layout = PE_LAYOUT_SPLIT;
        sp->c_off = 0;
        sp->nc = h;
        sp->s_off = h;
        sp->ns = nf;
    }
    /* (limit DBL_MAX, not 0: the base is a valid number, its powers are not) */
    if (!pe_frequencies_finite(sp))
        return pe_fail(FASTPE_EBASE, "base", -1, k->base, DBL_MAX);
    return FASTPE_OK;
}

struct fastpe_spec *pe_spec_handle_new(const pe_spec *sp, int has_zero, int64_t zero,
                                       double max_position) {
    struct fastpe_spec *h;
    if (sp->wlist != NULL)
        return NULL;
    h = (struct fastpe_spec *)pe_shell_alloc(PE_SHELL_SPEC, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->magic = PE_SPEC_MAGIC;
    h->sp = *sp;
    h->has_zero = has_zero;
    h->zero = zero;
    h->max_position = max_position;
    return h;
}

static int spec_create_body(const fastpe_knobs *knobs, int64_t d_model, fastpe_spec **spec) {
    pe_spec sp;
    int err;
    pe_init();
    if (spec == NULL)
        return FASTPE_ENULL;
    *spec = NULL;
    if (knobs == NULL)
        return FASTPE_ENULL;
    err = pe_spec_of(knobs, d_model, &sp);
    if (err != FASTPE_OK)
        return err;
    *spec = pe_spec_handle_new(&sp, knobs->has_padding_idx != 0, knobs->padding_idx,
                               pe_max_position(&sp));
    return *spec != NULL ? FASTPE_OK : FASTPE_ENOMEM;
}

int fastpe_spec_create(const fastpe_knobs *knobs, int64_t d_model, fastpe_spec **spec) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, spec_create_body(knobs, d_model, spec));
}

fastpe_spec *fastpe_spec_from_name(const char *name, int64_t d_model) {
    fastpe_knobs k;
    fastpe_spec *h = NULL;
    if (fastpe_knobs_preset(name, &k) == FASTPE_OK)
        fastpe_spec_create(&k, d_model, &h);
    return h;
}

fastpe_spec *fastpe_spec_from_knobs(int64_t d_model, double base, const char *denominator,
                                    double shift, double position_scale, const char *layout,
                                    const char *odd, int has_padding_idx, int64_t padding_idx) {
    fastpe_knobs k;
    fastpe_spec *h = NULL;
    fastpe_knobs_preset("vaswani", &k);
    k.base = base;
    k.denominator = pe_knob_parse(PE_KNOB_DENOMINATOR, denominator);
    k.shift = shift;
    k.position_scale = position_scale;
    k.columns = pe_knob_parse(PE_KNOB_LAYOUT, layout);
    k.odd = pe_knob_parse(PE_KNOB_ODD, odd);
    k.has_padding_idx = has_padding_idx;
    k.padding_idx = padding_idx;
    fastpe_spec_create(&k, d_model, &h);
    return h;
}

void fastpe_spec_free(fastpe_spec *h) {
    if (h != NULL && h->magic == PE_SPEC_MAGIC) {
        h->magic = 0;
        pe_shell_free(PE_SHELL_SPEC, h);
    }
}

int64_t fastpe_spec_d_model(const fastpe_spec *h) {
    return h != NULL && h->magic == PE_SPEC_MAGIC ? h->sp.d : -1;
}

/* A live handle whose rounding the call can honour (every fill and add of a
 * type: kind not 0), else the refusal naming "spec". */
static int spec_usable(const fastpe_spec *h, int kind) {
    if (h == NULL)
        return pe_fail(FASTPE_ENULL, "spec", -1, NAN, NAN);
    if (h->magic != PE_SPEC_MAGIC)
        return pe_fail(PE_EHANDLE, "spec", -1, NAN, NAN);
    return pe_check_rounding(h->rounding, kind, "spec");
}

/* Rows of positions offset .. offset+S-1 (nseq sequences when adding), checked
 * by the table fills' own check (api.c), so every refusal names its argument. */
static int spec_fill_body(const fastpe_spec *h, void *out, int kind, int64_t nseq, int64_t S,
                          int64_t row_stride, int64_t offset, int add, double scale,
                          int num_threads) {
    pe_rows rq;
    int err = spec_usable(h, kind);
    if (err != FASTPE_OK)
        return err;
    pe_init_rows(&rq, nseq, S, h->has_zero, h->zero);
    rq.offset = offset;
    rq.add = add;
    rq.scale = add ? scale : 1.0;
    rq.accurate = h->rounding == PE_ROUND_CORRECT;
    err = pe_check_fill_within(out, kind, row_stride, &h->sp, &rq, "seq_len", h->max_position);
    if (err != FASTPE_OK)
        return err;
    return pe_fill_cached(out, kind, row_stride, &h->sp, &rq, num_threads);
}

static int spec_fill(const fastpe_spec *h, void *out, int kind, int64_t nseq, int64_t S,
                     int64_t row_stride, int64_t offset, int add, double scale, int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno, spec_fill_body(h, out, kind, nseq, S, row_stride, offset, add,
                                                     scale, num_threads));
}

/* Rows of positions[0 .. n-1], checked as fastpe_fill_positions_* (api.c). */
static int spec_at_body(const fastpe_spec *h, void *out, int kind, int64_t n, int64_t row_stride,
                        const double *positions, int num_threads) {
    pe_rows rq;
    int err = spec_usable(h, kind);
    if (err != FASTPE_OK)
        return err;
    if (positions == NULL && n > 0)
        return pe_fail(FASTPE_ENULL, "positions", -1, NAN, NAN);
    pe_init_rows(&rq, 1, n, h->has_zero, h->zero);
    rq.pos_f = positions;
    rq.pss = 1;
    rq.accurate = h->rounding == PE_ROUND_CORRECT;
    err = pe_check_fill_within(out, kind, row_stride, &h->sp, &rq, "n", h->max_position);
    if (err != FASTPE_OK)
        return err;
    return pe_fill_cached(out, kind, row_stride, &h->sp, &rq, num_threads);
}

static int spec_at(const fastpe_spec *h, void *out, int kind, int64_t n, int64_t row_stride,
                   const double *positions, int num_threads) {
    int saved_errno = errno;
    return pe_keep_errno(saved_errno,
                         spec_at_body(h, out, kind, n, row_stride, positions, num_threads));
}

int fastpe_spec_fill_f32(const fastpe_spec *h, float *out, int64_t seq_len, int64_t row_stride,
                         int64_t offset, int num_threads) {
    return spec_fill(h, out, PE_KIND_F32, 1, seq_len, row_stride, offset, 0, 1.0, num_threads);
}

int fastpe_spec_fill_f64(const fastpe_spec *h, double *out, int64_t seq_len, int64_t row_stride,
                         int64_t offset, int num_threads) {
    return spec_fill(h, out, PE_KIND_F64, 1, seq_len, row_stride, offset, 0, 1.0, num_threads);
}

int fastpe_spec_fill_f16(const fastpe_spec *h, uint16_t *out, int64_t seq_len, int64_t row_stride,
                         int64_t offset, int num_threads) {
    return spec_fill(h, out, PE_KIND_F16, 1, seq_len, row_stride, offset, 0, 1.0, num_threads);
}

int fastpe_spec_fill_bf16(const fastpe_spec *h, uint16_t *out, int64_t seq_len, int64_t row_stride,
                          int64_t offset, int num_threads) {
    return spec_fill(h, out, PE_KIND_BF16, 1, seq_len, row_stride, offset, 0, 1.0, num_threads);
}

int fastpe_spec_fill_positions_f32(const fastpe_spec *h, float *out, int64_t n, int64_t row_stride,
                                   const double *positions, int num_threads) {
    return spec_at(h, out, PE_KIND_F32, n, row_stride, positions, num_threads);
}

int fastpe_spec_fill_positions_f64(const fastpe_spec *h, double *out, int64_t n, int64_t row_stride,
                                   const double *positions, int num_threads) {
    return spec_at(h, out, PE_KIND_F64, n, row_stride, positions, num_threads);
}

int fastpe_spec_add_f32(const fastpe_spec *h, float *x, int64_t nseq, int64_t seq_len,
                        int64_t row_stride, int64_t offset, double scale, int num_threads) {
    return spec_fill(h, x, PE_KIND_F32, nseq, seq_len, row_stride, offset, 1, scale, num_threads);
}

int fastpe_spec_add_f64(const fastpe_spec *h, double *x, int64_t nseq, int64_t seq_len,
                        int64_t row_stride, int64_t offset, double scale, int num_threads) {
    return spec_fill(h, x, PE_KIND_F64, nseq, seq_len, row_stride, offset, 1, scale, num_threads);
}

int fastpe_spec_add_f16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                        int64_t row_stride, int64_t offset, double scale, int num_threads) {
    return spec_fill(h, x, PE_KIND_F16, nseq, seq_len, row_stride, offset, 1, scale, num_threads);
}

int fastpe_spec_add_bf16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                         int64_t row_stride, int64_t offset, double scale, int num_threads) {
    return spec_fill(h, x, PE_KIND_BF16, nseq, seq_len, row_stride, offset, 1, scale, num_threads);
}

/* ---- the rounding of either kind of handle ----------------------------------
 * A setting stored in the handle and read by its fills (spec_fill_body,
 * spec_at_body here; the RoPE caches in rope_api.inc.c), so that every existing
 * entry point keeps its signature. */

static int rounding_of(int rounding) {
    if (rounding != PE_ROUND_DEFAULT && rounding != PE_ROUND_CORRECT)
        return pe_fail(FASTPE_EINVAL, "rounding", -1, (double)rounding, NAN);
    return FASTPE_OK;
}

int fastpe_spec_set_rounding(fastpe_spec *h, int rounding) {
    int err;
    if (h == NULL)
        return pe_settle(pe_fail(FASTPE_ENULL, "spec", -1, NAN, NAN));
    if (h->magic != PE_SPEC_MAGIC)
        return pe_settle(pe_fail(PE_EHANDLE, "spec", -1, NAN, NAN));
    err = rounding_of(rounding);
    if (err == FASTPE_OK)
        h->rounding = rounding;
    return pe_settle(err);
}

int fastpe_rope_set_rounding(fastpe_rope *h, int rounding) {
    int err;
    if (h == NULL)
        return pe_settle(pe_fail(FASTPE_ENULL, "rope", -1, NAN, NAN));
    if (h->magic != PE_ROPE_MAGIC && h->magic != PE_ROPE_AXES_MAGIC)
        return pe_settle(pe_fail(PE_EHANDLE, "rope", -1, NAN, NAN));
    err = rounding_of(rounding);
    if (err == FASTPE_OK)
        h->rounding = rounding;
    return pe_settle(err);
}
