/*
 * The RoPE handles of the C API (fastpe_rope_*): made from listed frequencies
 * or from per-axis ones, their argument and overlap checks, and the entry
 * points of the caches and the rotation for each element type
 * (rope_api.inc.c).  The angle tables and the rotation themselves are
 * rope_rotate.c's and rope_axes.c's.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

/* The cache rows, one instantiation per entry type (the rotation's are
 * rope_rotate.c's). */
#define CROW_T        float
#define CROW_SFX      f32
#define CROW_STORE(v) ((float)(v))
#include "rope_cache_rows.inc.c"

#define CROW_T        double
#define CROW_SFX      f64
#define CROW_STORE(v) (v)
#include "rope_cache_rows.inc.c"

#define CROW_T        uint16_t
#define CROW_SFX      f16
#define CROW_STORE(v) pe_f64_to_f16(v)
#include "rope_cache_rows.inc.c"

#define CROW_T        uint16_t
#define CROW_SFX      bf16
#define CROW_STORE(v) pe_f64_to_bf16(v)
#include "rope_cache_rows.inc.c"

/* ---- the RoPE handles ------------------------------------------------------
 * A handle is the encoding fastpe._rope_rules._encoder compiles for ("rope", w): the
 * [sin | cos] rows of nf listed frequencies, with its own copy of them and of
 * its plan, so that the cache and the rotation give fastpe.rope_cache's and
 * fastpe.apply_rope's bits. */

/* as fastpe._rope_rules.MAX_FREQUENCY: a larger frequency overflows the angles */
#define MAX_FREQUENCY 1e280
/* as fastpe.kernel.PLAN_MAX_BYTES: larger plans are prepared per call */
#define PLAN_MAX_BYTES ((double)(4 << 20))

int pe_rope_check_frequencies(const double *inv_freq, int64_t nf) {
    for (int64_t i = 0; i < nf; i++) {
        if (!(inv_freq[i] >= 0.0 && inv_freq[i] <= MAX_FREQUENCY))
            return pe_fail(FASTPE_EINVAL, "inv_freq", i, inv_freq[i], MAX_FREQUENCY);
    }
    return FASTPE_OK;
}

/* A frequency list's pointer and length (its values: pe_rope_check_frequencies). */
static int rope_check_list(const double *inv_freq, int64_t nf) {
    if (inv_freq == NULL)
        return pe_fail(FASTPE_ENULL, "inv_freq", -1, NAN, NAN);
    if (nf < 1 || nf > ((int64_t)1 << 31))
        return pe_fail(FASTPE_ESIZE, "nf", -1, (double)nf,
                       nf < 1 ? 1.0 : (double)((int64_t)1 << 31));
    return FASTPE_OK;
}

/* A plain handle of the list inv_freq; with `whole` the plan of the whole list too
 * (a multi-axis handle fills each axis by its own plan and never reads it). */
static fastpe_rope *rope_from_frequencies_body(const double *inv_freq, int64_t nf,
                                               double attention_factor, int whole) {
    struct fastpe_rope *h;
    int64_t B;
    pe_init();
    if (rope_check_list(inv_freq, nf) != FASTPE_OK)
        return NULL;
    if (!(isfinite(attention_factor) && attention_factor > 0.0))
        return pe_fail(FASTPE_EINVAL, "attention_factor", -1, attention_factor, 0.0), NULL;
    if (pe_rope_check_frequencies(inv_freq, nf) != FASTPE_OK)
        return NULL;
    h = (struct fastpe_rope *)pe_shell_alloc(PE_SHELL_ROPE, sizeof(*h));
    if (h == NULL)
        return NULL;
    h->w = (double *)malloc((size_t)nf * sizeof(double));
    if (h->w == NULL) {
        pe_shell_free(PE_SHELL_ROPE, h);
        return NULL;
    }
    memcpy(h->w, inv_freq, (size_t)nf * sizeof(double));
    /* kernel_spec(2 nf, nf, layout=1, ns=nf, c_off=nf, nc=nf, frequencies=w) */
    h->sp.d = 2 * nf;
    h->sp.nf = nf;
    h->sp.w0 = 1.0;
    h->sp.base = 1.0;
    h->sp.denom = 1.0;
    h->sp.layout = PE_LAYOUT_SPLIT;
    h->sp.zero_col = -1;
    h->sp.s_off = 0;
    h->sp.ns = nf;
    h->sp.c_off = nf;
    h->sp.nc = nf;
    h->sp.wlist = h->w;
    h->attention = attention_factor;
    h->max_position = pe_max_position(&h->sp);
    B = pe_block_rows(nf);
    if (whole && (double)pe_plan_doubles(nf, B) * 8.0 <= PLAN_MAX_BYTES) {
        h->plan = (double *)malloc(pe_plan_doubles(nf, B) * sizeof(double));
        if (h->plan == NULL ||
            pe_prepare(h->plan, &h->sp, 0, B, pe_threads(0, B, nf, -1)) != FASTPE_OK) {
            free(h->plan);
            free(h->w);
            pe_shell_free(PE_SHELL_ROPE, h);
            return NULL;
        }
    }
    h->magic = PE_ROPE_MAGIC;
    return h;
}

fastpe_rope *fastpe_rope_from_frequencies(const double *inv_freq, int64_t nf,
                                          double attention_factor) {
    int saved_errno = errno;
    fastpe_rope *r = rope_from_frequencies_body(inv_freq, nf, attention_factor, 1);
    /* (a refusal named its argument; a NULL from an allocation is ENOMEM's) */
    pe_settle(r != NULL ? FASTPE_OK : FASTPE_ENOMEM);
    errno = saved_errno;
    return r;
}

void fastpe_rope_free(fastpe_rope *h) {
    if (h != NULL && (h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC)) {
        if (h->magic == PE_ROPE_AXES_MAGIC) {
            for (int a = 0; a < h->n_axes; a++) {
                free(h->axes[a].w);
                free(h->axes[a].plan);
                free(h->axes[a].cols);
            }
            free(h->axes);
        }
        h->magic = 0;
        free(h->w);
        free(h->plan);
        free(h->lows);
        pe_shell_free(PE_SHELL_ROPE, h);
    }
}

/* ---- RoPE plans --------------------------------------------------------------
 * The handles fastpe.apply_rope and rope_cache reuse between calls, kept by the
 * library's plan cache (plans.c) under their frequencies (here) or their
 * rule's parameters (rope_rules.c). */

static void rope_plan_drop(void *v) {
    pe_rope_plan *pl = (pe_rope_plan *)v;
    fastpe_rope_free(pl->h);
    pe_anchor_free(&pl->ac);
    free(pl);
}

const pe_rope_plan *pe_rope_plan_add(const void *key, size_t len, const double *w, int64_t nf,
                                     double attention, int *slot) {
    pe_rope_plan *pl = (pe_rope_plan *)calloc(1, sizeof(*pl));
    size_t bytes;
    *slot = -1;
    if (pl == NULL)
        return NULL;
    pl->h = rope_from_frequencies_body(w, nf, attention, 1);
    if (pl->h == NULL) {
        free(pl);
        return NULL;
    }
    pe_anchor_init(&pl->ac);
    /* the handle's copies, its plan and the anchor row a decoding step keeps */
    bytes = sizeof(*pl) + sizeof(*pl->h) + (size_t)nf * 3 * sizeof(double) +
            (pl->h->plan != NULL ? pe_plan_doubles(nf, pe_block_rows(nf)) * sizeof(double) : 0);
    return (const pe_rope_plan *)pe_plans_add(key, len, pl, bytes, rope_plan_drop, slot);
}

void pe_rope_plan_done(const pe_rope_plan *plan, int slot) {
    if (slot >= 0)
        pe_plans_release(slot);
    else if (plan != NULL) /* (one the cache had no room for: the caller's) */
        rope_plan_drop((void *)plan);
}

/* (keys of up to this many frequencies live on the stack) */
#define ROPE_KEY_STACK 256

const pe_rope_plan *pe_rope_plan_list(const void *w, int kind, int64_t nf, int *slot) {
    double stack[ROPE_KEY_STACK + 2], *key = stack;
    const pe_rope_plan *pl;
    size_t len;
    int64_t tag = PE_PLAN_ROPE_LIST;
    *slot = -1;
    if ((kind != PE_KIND_F32 && kind != PE_KIND_F64) || rope_check_list(w, nf) != FASTPE_OK)
        return NULL;
    len = (size_t)(nf + 2) * sizeof(double);
    if (nf > ROPE_KEY_STACK) {
        key = (double *)malloc(len);
        if (key == NULL)
            return NULL;
    }
    /* the tag and nf as int64 bits, then the frequencies as float64 (exact) */
    memcpy(&key[0], &tag, 8);
    memcpy(&key[1], &nf, 8);
    for (int64_t i = 0; i < nf; i++)
        key[2 + i] = kind == PE_KIND_F64 ? ((const double *)w)[i] : (double)((const float *)w)[i];
    pl = (const pe_rope_plan *)pe_plans_find(key, len, slot);
    if (pl == NULL)
        pl = pe_rope_plan_add(key, len, key + 2, nf, 1.0, slot);
    if (key != stack)
        free(key);
    return pl;
}

int64_t fastpe_rope_rotary_dim(const fastpe_rope *h) {
    return h != NULL && (h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC) ? 2 * h->sp.nf
                                                                                      : -1;
}

/* The [sin | cos] spec of the nf frequencies w (fastpe._rope_rules._encoder's), with
 * its plan when it is small enough to keep (else *plan = NULL); 0 or an error. */
static int rope_spec(pe_spec *sp, double *w, int64_t nf, double **plan) {
    int64_t B;
    memset(sp, 0, sizeof(*sp));
    /* kernel_spec(2 nf, nf, layout=1, ns=nf, c_off=nf, nc=nf, frequencies=w) */
    sp->d = 2 * nf;
    sp->nf = nf;
    sp->w0 = 1.0;
    sp->base = 1.0;
    sp->denom = 1.0;
    sp->layout = PE_LAYOUT_SPLIT;
    sp->zero_col = -1;
    sp->s_off = 0;
    sp->ns = nf;
    sp->c_off = nf;
    sp->nc = nf;
    sp->wlist = w;
    *plan = NULL;
    B = pe_block_rows(nf);
    if ((double)pe_plan_doubles(nf, B) * 8.0 <= PLAN_MAX_BYTES) {
        *plan = (double *)malloc(pe_plan_doubles(nf, B) * sizeof(double));
        if (*plan == NULL)
            return FASTPE_ENOMEM;
        if (pe_prepare(*plan, sp, 0, B, pe_threads(0, B, nf, -1)) != FASTPE_OK) {
            free(*plan);
            *plan = NULL;
            return FASTPE_ENOMEM;
        }
    }
    return FASTPE_OK;
}

static fastpe_rope *rope_from_axes_body(const double *inv_freq, int64_t nf, const int32_t *axis,
                                        int n_axes, double attention_factor) {
    struct fastpe_rope *h;
    int a;
    pe_init();
    if (axis == NULL)
        return pe_fail(FASTPE_ENULL, "axis", -1, NAN, NAN), NULL;
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "n_axes", -1, (double)n_axes,
                       n_axes < 1 ? 1.0 : PE_ROPE_MAX_AXES),
               NULL;
    if (rope_check_list(inv_freq, nf) != FASTPE_OK)
        return NULL;
    for (int64_t i = 0; i < nf; i++) {
        if (axis[i] < 0 || axis[i] >= n_axes)
            return pe_fail(FASTPE_EINVAL, "axis", i, (double)axis[i], (double)n_axes), NULL;
    }
    h = rope_from_frequencies_body(inv_freq, nf, attention_factor, 0);
    if (h == NULL)
        return NULL;
    h->axes = (pe_rope_axis_data *)calloc((size_t)n_axes, sizeof(pe_rope_axis_data));
    if (h->axes == NULL) {
        fastpe_rope_free(h);
        return NULL;
    }
    h->magic = PE_ROPE_AXES_MAGIC; /* (from here fastpe_rope_free frees the axes) */
    h->n_axes = n_axes;
    for (a = 0; a < n_axes; a++) {
        pe_rope_axis_data *d = &h->axes[a];
        int64_t na = 0;
        for (int64_t i = 0; i < nf; i++)
            na += axis[i] == a;
        d->max_position = HUGE_VAL;
        if (na == 0)
            continue;
        d->w = (double *)malloc((size_t)na * sizeof(double));
        d->cols = (int64_t *)malloc((size_t)na * sizeof(int64_t));
        if (d->w == NULL || d->cols == NULL)
            break;
        na = 0;
        for (int64_t i = 0; i < nf; i++) {
            if (axis[i] == a) {
                d->w[na] = inv_freq[i];
                d->cols[na++] = i;
            }
        }
        if (rope_spec(&d->sp, d->w, na, &d->plan) != FASTPE_OK)
            break;
        d->max_position = pe_max_position(&d->sp);
        /* one run of columns: its rows straight into the table (as the binding) */
        d->has_wide = d->cols[na - 1] - d->cols[0] == na - 1;
        d->wide = d->sp;
        d->wide.d = 2 * nf;
        d->wide.s_off = d->cols[0];
        d->wide.c_off = nf + d->cols[0];
    }
    if (a < n_axes) {
        fastpe_rope_free(h);
        return NULL;
    }
    return h;
}

fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                   int n_axes, double attention_factor) {
    int saved_errno = errno;
    fastpe_rope *r = rope_from_axes_body(inv_freq, nf, axis, n_axes, attention_factor);
    pe_settle(r != NULL ? FASTPE_OK : FASTPE_ENOMEM);
    errno = saved_errno;
    return r;
}

int fastpe_rope_n_axes(const fastpe_rope *h) {
    if (h == NULL)
        return -1;
    return h->magic == PE_ROPE_AXES_MAGIC ? h->n_axes : h->magic == PE_ROPE_MAGIC ? 1 : -1;
}

static int section_axes_body(const int64_t *sections, int n_axes, int section_layout, int32_t *axis,
                             int64_t nf) {
    int64_t total = 0;
    if (sections == NULL || axis == NULL)
        return pe_fail(FASTPE_ENULL, sections == NULL ? "sections" : "axis", -1, NAN, NAN);
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "n_axes", -1, (double)n_axes,
                       n_axes < 1 ? 1.0 : PE_ROPE_MAX_AXES);
    if (section_layout != FASTPE_SECTIONS_CONTIGUOUS &&
        section_layout != FASTPE_SECTIONS_INTERLEAVED)
        return pe_fail(FASTPE_EINVAL, "section_layout", -1, (double)section_layout, NAN);
    for (int a = 0; a < n_axes; a++) {
        if (sections[a] < 0 || sections[a] > ((int64_t)1 << 31))
            return pe_fail(FASTPE_ESIZE, "sections", a, (double)sections[a],
                           sections[a] < 0 ? 0.0 : (double)((int64_t)1 << 31));
        total += sections[a];
    }
    if (total != nf) /* (the sections' sum: value; the frequencies: limit) */
        return pe_fail(FASTPE_ESIZE, "sections", -1, (double)total, (double)nf);
    if (section_layout == FASTPE_SECTIONS_INTERLEAVED) {
        /* column i (r = i % n_axes >= 1, i < n_axes * sections[r]) takes axis r,
           every other column axis 0; each axis must get sections[a] columns */
        for (int a = 1; a < n_axes; a++) {
            if (sections[a] > 0 && a + (int64_t)n_axes * (sections[a] - 1) >= nf)
                return pe_fail(FASTPE_EINVAL, "sections", a, (double)sections[a], NAN);
        }
        for (int64_t i = 0; i < nf; i++) {
            int r = (int)(i % n_axes);
            axis[i] = r >= 1 && i < (int64_t)n_axes * sections[r] ? r : 0;
        }
    } else {
        int64_t i = 0;
        for (int a = 0; a < n_axes; a++) {
            for (int64_t j = 0; j < sections[a]; j++)
                axis[i++] = a;
        }
    }
    return FASTPE_OK;
}

int fastpe_rope_section_axes(const int64_t *sections, int n_axes, int section_layout, int32_t *axis,
                             int64_t nf) {
    return pe_settle(section_axes_body(sections, n_axes, section_layout, axis, nf));
}

/* ---- Multi-axis plans ----------------------------------------------------------
 * fastpe.apply_rope's and rope_cache's handles of multi-axis positions, one plan
 * cache entry each: the handle, and the per-axis views a call copies. */

typedef struct {
    pe_rope_axes_plan pub;
    pe_rope_axis *ax;
    pe_anchor_cache *ac; /* n_axes of them, ax[i].ac = &ac[i] */
    int *which;
    double *max_position;
} axes_plan;

static void axes_plan_drop(void *v) {
    axes_plan *p = (axes_plan *)v;
    for (int a = 0; a < p->pub.n_axes; a++)
        pe_anchor_free(&p->ac[a]);
    fastpe_rope_free(p->pub.h);
    free(p->ax);
    free(p->ac);
    free(p->which);
    free(p->max_position);
    free(p);
}

/* The plan of handle h (PE_ROPE_AXES_MAGIC, taken over), or NULL (h freed). */
static axes_plan *axes_plan_new(struct fastpe_rope *h, size_t *bytes) {
    axes_plan *p = (axes_plan *)calloc(1, sizeof(*p));
    int n = h->n_axes, k = 0;
    if (p != NULL) {
        p->ax = (pe_rope_axis *)calloc((size_t)n, sizeof(pe_rope_axis));
        p->ac = (pe_anchor_cache *)calloc((size_t)n, sizeof(pe_anchor_cache));
        p->which = (int *)calloc((size_t)n, sizeof(int));
        p->max_position = (double *)calloc((size_t)n, sizeof(double));
    }
    if (p == NULL || p->ax == NULL || p->ac == NULL || p->which == NULL ||
        p->max_position == NULL) {
        if (p != NULL) {
            free(p->ax);
            free(p->ac);
            free(p->which);
            free(p->max_position);
            free(p);
        }
        fastpe_rope_free(h);
        return NULL;
    }
    p->pub.h = h;
    p->pub.n_axes = n;
    p->pub.nf = h->sp.nf;
    p->pub.attention = h->attention;
    /* the whole list's copy (the handle's; no plan of it: see rope_from_axes_body),
       then each axis's */
    *bytes = sizeof(*p) + (size_t)n * (sizeof(pe_rope_axis) + sizeof(pe_anchor_cache) + 12) +
             sizeof(*h) + (size_t)h->sp.nf * sizeof(double);
    for (int a = 0; a < n; a++) {
        const pe_rope_axis_data *d = &h->axes[a];
        pe_anchor_init(&p->ac[a]);
        p->max_position[a] = d->max_position;
        if (d->sp.nf == 0)
            continue;
        p->ax[k].sp = &d->sp;
        p->ax[k].wide = d->has_wide ? &d->wide : NULL;
        p->ax[k].plan = d->plan;
        p->ax[k].ac = &p->ac[k];
        p->ax[k].cols = d->cols;
        p->which[k] = a;
        k++;
        /* its frequencies, columns and plan, and the anchor row of its steps */
        *bytes += (size_t)d->sp.nf * 4 * sizeof(double) +
                  (d->plan != NULL ? pe_plan_doubles(d->sp.nf, pe_block_rows(d->sp.nf)) * 8 : 0);
    }
    p->pub.nax = k;
    p->pub.ax = p->ax;
    p->pub.which = p->which;
    p->pub.max_position = p->max_position;
    return p;
}

int pe_rope_axes_key(void *key, const int64_t *sections, int n_axes, int section_layout) {
    const int64_t head[3] = {PE_PLAN_ROPE_AXES, n_axes, section_layout};
    if (sections == NULL)
        return pe_fail(FASTPE_ENULL, "sections", -1, NAN, NAN), -1;
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "n_axes", -1, (double)n_axes,
                       n_axes < 1 ? 1.0 : PE_ROPE_MAX_AXES),
               -1;
    memcpy(key, head, sizeof(head));
    memcpy((char *)key + sizeof(head), sections, (size_t)n_axes * 8);
    return 3 + n_axes;
}

const pe_rope_axes_plan *pe_rope_plan_axes_add(const void *key, size_t len, const double *w,
                                               int64_t nf, double attention,
                                               const int64_t *sections, int n_axes,
                                               int section_layout, int *slot) {
    int32_t *axis = (int32_t *)malloc((size_t)(nf > 0 ? nf : 1) * sizeof(int32_t));
    struct fastpe_rope *h = NULL;
    axes_plan *p = NULL;
    size_t bytes = 0;
    *slot = -1;
    if (axis != NULL && section_axes_body(sections, n_axes, section_layout, axis, nf) == FASTPE_OK)
        h = rope_from_axes_body(w, nf, axis, n_axes, attention);
    free(axis);
    if (h != NULL)
        p = axes_plan_new(h, &bytes);
    if (p == NULL)
        return NULL;
    return (const pe_rope_axes_plan *)pe_plans_add(key, len, p, bytes, axes_plan_drop, slot);
}

/* (keys of up to this many words live on the stack: 3 axes and 256 frequencies) */
#define AXES_KEY_STACK (ROPE_KEY_STACK + 8)

const pe_rope_axes_plan *pe_rope_plan_axes(const void *w, int kind, int64_t nf,
                                           const int64_t *sections, int n_axes, int section_layout,
                                           int *slot) {
    double stack[AXES_KEY_STACK], *key = stack;
    const pe_rope_axes_plan *pl;
    const int64_t list[2] = {PE_PLAN_ROPE_LIST, nf};
    int head;
    size_t words;
    *slot = -1;
    if ((kind != PE_KIND_F32 && kind != PE_KIND_F64) ||
        rope_check_list((const double *)w, nf) != FASTPE_OK)
        return NULL;
    if (n_axes < 1 || n_axes > PE_ROPE_MAX_AXES) /* (refused there, with its detail) */
        return (void)pe_rope_axes_key(key, sections, n_axes, section_layout), NULL;
    /* the sections' words, then the list's as pe_rope_plan_list keys it */
    words = 3 + (size_t)n_axes + 2 + (size_t)nf;
    if (words > AXES_KEY_STACK) {
        key = (double *)malloc(words * 8);
        if (key == NULL)
            return NULL;
    }
    head = pe_rope_axes_key(key, sections, n_axes, section_layout);
    pl = NULL;
    if (head >= 0) {
        double *kw = key + head + 2;
        memcpy(key + head, list, sizeof(list));
        for (int64_t i = 0; i < nf; i++)
            kw[i] = kind == PE_KIND_F64 ? ((const double *)w)[i] : (double)((const float *)w)[i];
        pl = (const pe_rope_axes_plan *)pe_plans_find(key, words * 8, slot);
        if (pl == NULL)
            pl = pe_rope_plan_axes_add(key, words * 8, kw, nf, 1.0, sections, n_axes,
                                       section_layout, slot);
    }
    if (key != stack)
        free(key);
    return pl;
}

void pe_rope_axes_rows(const pe_rope_axes_plan *pl, pe_rope_axis *ax, const void *positions,
                       int real, int64_t nseq, int64_t S) {
    for (int i = 0; i < pl->nax; i++) {
        ax[i] = pl->ax[i];
        pe_init_rows(&ax[i].rq, nseq, S, 0, 0);
        if (real)
            ax[i].rq.pos_f = (const double *)positions + pl->which[i];
        else
            ax[i].rq.pos_i = (const int64_t *)positions + pl->which[i];
        ax[i].rq.psb = S * pl->n_axes;
        ax[i].rq.pss = pl->n_axes;
        ax[i].rq.fresh = 1;
    }
}

void pe_rope_axes_plan_done(const pe_rope_axes_plan *plan, int slot) {
    if (slot >= 0)
        pe_plans_release(slot);
    else if (plan != NULL) /* (one the cache had no room for: the caller's) */
        axes_plan_drop((void *)plan);
}

/* ax[0 .. *nax-1]: the axes of h (a plain handle: one axis, its whole list) for
 * ntab tokens of positions[t * n_axes + a], their range checked. */
static int rope_axes_of(const struct fastpe_rope *h, pe_rope_axis *ax, int *nax,
                        const int64_t *positions, int64_t ntab) {
    int n = h->magic == PE_ROPE_AXES_MAGIC ? h->n_axes : 1, k = 0;
    if (positions == NULL)
        return pe_fail(FASTPE_ENULL, "positions", -1, NAN, NAN);
    for (int64_t i = 0; i < ntab * n; i++) {
        double limit =
            n == 1 && h->magic == PE_ROPE_MAGIC ? h->max_position : h->axes[i % n].max_position;
        if (fabs((double)positions[i]) > limit)
            return pe_fail(FASTPE_ERANGE, "positions", i, (double)positions[i], limit);
    }
    for (int a = 0; a < n; a++) {
        pe_rope_axis *x = &ax[k];
        if (h->magic == PE_ROPE_MAGIC) {
            x->sp = x->wide = &h->sp;
            x->plan = h->plan;
            x->cols = NULL;
        } else if (h->axes[a].sp.nf > 0) {
            x->sp = &h->axes[a].sp;
            x->wide = h->axes[a].has_wide ? &h->axes[a].wide : NULL;
            x->plan = h->axes[a].plan;
            x->cols = h->axes[a].cols;
        } else {
            continue;
        }
        x->ac = NULL;
        pe_init_rows(&x->rq, 1, ntab, 0, 0);
        x->rq.pos_i = positions + a;
        x->rq.pss = n;
        x->rq.psb = ntab * n;
        x->rq.fresh = 1;
        k++;
    }
    *nax = k;
    return FASTPE_OK;
}

/* rq for the angle rows of nseq x S tokens (positions[b*S + s], or offset + s
 * for every sequence when positions is NULL), their range checked. */
static int rope_positions(const struct fastpe_rope *h, pe_rows *rq, int64_t nseq, int64_t S,
                          const int64_t *positions, int64_t offset) {
    if (positions == NULL) {
        if (pe_extent(offset, S) > h->max_position)
            return pe_fail(FASTPE_ERANGE, "offset", -1, pe_extent(offset, S), h->max_position);
        nseq = 1;
    } else {
        for (int64_t i = 0; i < nseq * S; i++) {
            if (fabs((double)positions[i]) > h->max_position)
                return pe_fail(FASTPE_ERANGE, "positions", i, (double)positions[i],
                               h->max_position);
        }
    }
    pe_init_rows(rq, nseq, S, 0, 0);
    rq->offset = positions == NULL ? offset : 0;
    rq->pos_i = positions;
    rq->psb = S;
    rq->pss = 1;
    rq->fresh = 1;
    return FASTPE_OK;
}

/* Whether the rows of a rotation (m <= 3 axes of n[i] rows at st[i] elements,
 * each row w elements wide) share no element: FASTPE_OK, else FASTPE_ESTRIDE
 * naming the stride at fault (names[i], with its value): one beyond the layout's
 * bound, one shorter than a row, or, when rows meet, the innermost stride that
 * lands inside what the axes inside it span (its limit that span).  Axes of one
 * row are dropped first (their stride is never used, and may be anything,
 * INT64_MIN included); every product and sum below is bounded before it is
 * formed, so no argument can overflow the check.  Decided on elements: nested
 * strides (each axis stepping over everything the axes inside it span) are
 * accepted at once; otherwise rows i and j meet iff some difference vector
 * d != 0 (|d_k| < n_k) has |sum d_k st_k| < w, searched exactly over the two
 * axes with the fewest differences, the third solved for (at most two
 * candidates, as for two rows of one stride).  A search beyond ROPE_OVERLAP_WORK steps is not
 * run and the layout refused: real layouts are nested, or small. */
#define ROPE_OVERLAP_WORK ((int64_t)1 << 22)
static int rope_rows_disjoint(const int64_t *n_in, const int64_t *st_in, int m, int64_t w,
                              const char *const *names) {
    /* whole layouts must fit in INT64_MAX / 16 elements: byte offsets (entries of
       at most 8 bytes) then fit in int64 with room to spare */
    const int64_t lim = INT64_MAX / 16;
    int64_t n[3], st[3], span = w, fault_span = 0;
    int k = 0, axis[3], fault = -1;
    for (int i = 0; i < m; i++) {
        if (n_in[i] <= 1)
            continue;
        int64_t q = lim / (n_in[i] - 1);
        if (st_in[i] > q || st_in[i] < -q)
            return pe_fail(FASTPE_ESTRIDE, names[i], -1, (double)st_in[i], (double)q);
        n[k] = n_in[i];
        st[k] = st_in[i] >= 0 ? st_in[i] : -st_in[i];
        axis[k] = i;
        if (st[k] < w) /* one step along this axis lands inside the row */
            return pe_fail(FASTPE_ESTRIDE, names[i], -1, (double)st_in[i], (double)w);
        span += st[k] * (n[k] - 1);
        if (span > lim)
            return pe_fail(FASTPE_ESTRIDE, names[i], -1, (double)st_in[i], (double)lim);
        k++;
    }
    for (int i = 0; i < k; i++) { /* sort by stride (at most three entries) */
        for (int j = 0; j + 1 < k - i; j++) {
            if (st[j] > st[j + 1]) {
                int64_t ts = st[j], tn = n[j];
                int ta = axis[j];
                st[j] = st[j + 1], n[j] = n[j + 1], axis[j] = axis[j + 1];
                st[j + 1] = ts, n[j + 1] = tn, axis[j + 1] = ta;
            }
        }
    }
    span = w;
    for (int i = 0; i < k; i++) {
        if (fault < 0 && st[i] < span) /* (the first stride that does not nest) */
            fault = axis[i], fault_span = span;
        span += st[i] * (n[i] - 1);
    }
    if (fault < 0)
        return FASTPE_OK;
#define ROWS_MEET                                                                                  \
    pe_fail(FASTPE_ESTRIDE, names[fault], -1, (double)st_in[fault], (double)fault_span)
    if (k < 2)
        return ROWS_MEET; /* (one axis: nested iff its stride >= w, seen above) */
    /* solve for the axis with the most rows; walk the other one or two */
    int big = 0;
    for (int i = 1; i < k; i++)
        big = n[i] > n[big] ? i : big;
    int64_t na = 1, sa = 0, nb = 1, sb = 0, sc = st[big], nc = n[big];
    for (int i = 0, seen = 0; i < k; i++) {
        if (i == big)
            continue;
        if (seen++ == 0)
            na = n[i], sa = st[i];
        else
            nb = n[i], sb = st[i];
    }
    if ((2 * na - 1) > ROPE_OVERLAP_WORK / (2 * nb - 1))
        return ROWS_MEET;
    /* d and -d meet alike: da >= 0 (and db >= 0 when da == 0) covers every pair */
    for (int64_t da = 0; da < na; da++) {
        for (int64_t db = da == 0 ? 0 : -(nb - 1); db < nb; db++) {
            int64_t e = da * sa + db * sb;            /* |e| <= span: no overflow */
            int64_t t0 = pe_floordiv(-w - e, sc) + 1; /* the least dc with e + dc sc > -w */
            for (int64_t dc = t0; dc < t0 + 2; dc++) {
                if (dc <= -nc || dc >= nc || (da == 0 && db == 0 && dc == 0))
                    continue;
                int64_t f = e + dc * sc;
                if (-w < f && f < w)
                    return ROWS_MEET;
            }
        }
    }
#undef ROWS_MEET
    return FASTPE_OK;
}

/* The names of rope_rows_disjoint's strides in fastpe_rope_apply_*'s order. */
static const char *const rope_stride_names[3] = {"stride_batch", "stride_seq", "stride_head"};

static int rope_check(const struct fastpe_rope *h) {
    if (h == NULL)
        return pe_fail(FASTPE_ENULL, "rope", -1, NAN, NAN);
    if (h->magic == PE_ROPE_AXES_MAGIC) /* positions of one axis for several */
        return pe_fail(FASTPE_EINVAL, "rope", -1, (double)h->n_axes, 1.0);
    return h->magic == PE_ROPE_MAGIC ? FASTPE_OK : pe_fail(PE_EHANDLE, "rope", -1, NAN, NAN);
}

/* The entry points of multi-axis positions take either kind of handle. */
static int rope_check_axes(const struct fastpe_rope *h) {
    if (h == NULL)
        return pe_fail(FASTPE_ENULL, "rope", -1, NAN, NAN);
    return h->magic == PE_ROPE_MAGIC || h->magic == PE_ROPE_AXES_MAGIC
               ? FASTPE_OK
               : pe_fail(PE_EHANDLE, "rope", -1, NAN, NAN);
}

/* The handle's low parts are made outside the lock (tens to hundreds of
 * microseconds) and published under it: two first calls at once may both make
 * them, and one copy is kept (*fresh: 1 when it is this call's). */
static const double *rope_lows(struct fastpe_rope *h, int *fresh) {
    double *lows, *kept;
    *fresh = 0;
    if (h->plan == NULL)
        return NULL;
    kept = pe_shell_kept(&h->lows);
    if (kept != NULL)
        return kept;
    lows = pe_plan_lows(&h->sp, h->plan);
    if (lows == NULL)
        return NULL;
    kept = pe_shell_keep(&h->lows, lows);
    *fresh = kept == lows;
    return kept;
}

const double *pe_rope_lows(struct fastpe_rope *h) {
    int fresh;
    return rope_lows(h, &fresh);
}

const double *pe_rope_plan_lows(const pe_rope_plan *plan, int slot) {
    int fresh;
    const double *kept = rope_lows(plan->h, &fresh);
    int64_t nf = plan->h->sp.nf;
    if (fresh) /* (counted once, by the call whose copy was kept) */
        pe_plans_charge(slot, (size_t)(2 * (pe_block_rows(nf) / 2 + 1) * nf) * sizeof(double));
    return kept;
}

#define ROPE_T    float
#define ROPE_SFX  f32
#define ROPE_KIND PE_KIND_F32
#include "rope_api.inc.c"

#define ROPE_T    double
#define ROPE_SFX  f64
#define ROPE_KIND PE_KIND_F64
#include "rope_api.inc.c"

#define ROPE_T    uint16_t
#define ROPE_SFX  f16
#define ROPE_KIND PE_KIND_F16
#include "rope_api.inc.c"

#define ROPE_T    uint16_t
#define ROPE_SFX  bf16
#define ROPE_KIND PE_KIND_BF16
#include "rope_api.inc.c"
