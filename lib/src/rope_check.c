/*
 * The array checks of a rotation in place (fastpe.apply_rope's q and k, as the
 * binding holds their buffers): alignment, axes, the contiguous last axis, rows
 * that never share an element, q and k disjoint, head_dim and the sequence
 * axis; its positions' and offsets' shapes and bounds; and the overlap of two
 * outputs (rope_cache's cos and sin, also the C API's); an output array's
 * shape, alignment and rows (pe_check_out: the caches and the tables' out).
 * Written once here;
 * every refusal names its argument, axis, value and bound in the error detail,
 * which the binding turns into its messages.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <float.h>

/* A layout whose rows nest (sorted by stride, each axis steps over all that the
 * axes inside it span), normalised: its lowest row starts lo bytes after the
 * reference address, m axes of n[i] > 1 rows at st[i] > 0 bytes, ascending. */
typedef struct {
    int64_t lo;
    int64_t w;
    int m;
    int64_t n[PE_ROPE_MAX_AXES];
    int64_t st[PE_ROPE_MAX_AXES];
} rope_nest;

/* whole layouts stay within INT64_MAX / 16 bytes: no sum below overflows */
#define NEST_LIMIT (INT64_MAX / 16)

/* The rows of a (ndim >= 2, no empty axis) as a nest relative to `ref`;
 * FASTPE_OK, or FASTPE_ESTRIDE naming the axis whose stride lands inside what
 * the axes inside it span (a broadcast axis, overlapping rows). */
static int nest_of(const pe_rope_array *a, const char *ref, rope_nest *r) {
    int64_t span = a->itemsize * a->shape[a->ndim - 1];
    int axis[PE_ROPE_MAX_AXES];
    r->lo = (int64_t)((uintptr_t)a->buf - (uintptr_t)ref);
    r->w = span;
    r->m = 0;
    for (int i = 0; i < a->ndim - 1; i++) {
        int64_t n = a->shape[i], st = a->strides[i];
        if (n <= 1)
            continue;
        /* (in double: a division per axis would cost a decoding step more than
           the rest of the check) */
        if (fabs((double)st) * (double)(n - 1) > (double)NEST_LIMIT)
            return pe_fail(FASTPE_ESTRIDE, a->name, i, (double)st, (double)NEST_LIMIT);
        if (st < 0) { /* the same rows walked upwards from the lowest */
            r->lo += st * (n - 1);
            st = -st;
        }
        int k = r->m++;
        while (k > 0 && r->st[k - 1] > st) { /* insertion by stride: few axes */
            r->st[k] = r->st[k - 1], r->n[k] = r->n[k - 1], axis[k] = axis[k - 1];
            k--;
        }
        r->st[k] = st, r->n[k] = n, axis[k] = i;
    }
    for (int k = 0; k < r->m; k++) {
        if (r->st[k] < span)
            return pe_fail(FASTPE_ESTRIDE, a->name, axis[k], (double)a->strides[axis[k]],
                           (double)span);
        if ((double)r->st[k] * (double)(r->n[k] - 1) > (double)(NEST_LIMIT - span))
            return pe_fail(FASTPE_ESTRIDE, a->name, axis[k], (double)a->strides[axis[k]],
                           (double)NEST_LIMIT);
        span += r->st[k] * (r->n[k] - 1);
    }
    return FASTPE_OK;
}

/* The largest row start of r at or below x (relative bytes), or INT64_MIN:
 * nested strides order the starts as their indices, so a greedy descent from
 * the outermost axis finds it. */
static int64_t nest_floor(const rope_nest *r, int64_t x) {
    int64_t t = x - r->lo;
    if (t < 0)
        return INT64_MIN;
    for (int k = r->m - 1; k >= 0; k--) {
        int64_t i = t / r->st[k];
        t -= (i < r->n[k] - 1 ? i : r->n[k] - 1) * r->st[k];
    }
    return x - t;
}

/* Whether two nests share a byte: decided on elements, not on address ranges
 * (q and k of one fused QKV buffer interleave and are disjoint).  Each row of
 * the one with fewer rows meets the other iff the other's last row start below
 * its end lies above its start minus the other's width. */
static int nests_meet(const rope_nest *a, const rope_nest *b) {
    int64_t na = 1, nb = 1, ea = a->lo + a->w, eb = b->lo + b->w, idx[PE_ROPE_MAX_AXES];
    for (int k = 0; k < a->m; k++)
        na *= a->n[k], ea += a->st[k] * (a->n[k] - 1);
    for (int k = 0; k < b->m; k++)
        nb *= b->n[k], eb += b->st[k] * (b->n[k] - 1);
    if (ea <= b->lo || eb <= a->lo) /* apart: separate arrays, decided at once */
        return 0;
    if (na > nb) {
        const rope_nest *t = a;
        a = b, b = t;
        na = nb;
    }
    for (int k = 0; k < a->m; k++)
        idx[k] = 0;
    for (int64_t r = 0, start = a->lo; r < na; r++) {
        int64_t f = nest_floor(b, start + a->w - 1);
        if (f != INT64_MIN && f > start - b->w)
            return 1;
        for (int k = 0; k < a->m; k++) { /* the next row: a mixed-radix step */
            if (++idx[k] < a->n[k]) {
                start += a->st[k];
                break;
            }
            start -= (a->n[k] - 1) * a->st[k];
            idx[k] = 0;
        }
    }
    return 0;
}

static int64_t array_size(const pe_rope_array *a) {
    int64_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n = a->shape[i] == 0 ? 0 : n * a->shape[i];
    return n;
}

/* One array's own checks: aligned, (..., seq, ..., head_dim) axes, its last
 * axis contiguous, its rows nested (r, when it holds entries). */
static int check_array(const pe_rope_array *a, const char *ref, rope_nest *r, int *empty) {
    int last = a->ndim - 1;
    /* entries of 2, 4 or 8 bytes: a mask, not a division */
    uintptr_t mis = a->itemsize < 1 ? 1
                    : (a->itemsize & (a->itemsize - 1)) == 0
                        ? (uintptr_t)a->buf & (uintptr_t)(a->itemsize - 1)
                        : (uintptr_t)a->buf % (uintptr_t)a->itemsize;
    *empty = 1;
    if (mis != 0)
        return pe_fail(FASTPE_EINVAL, a->name, -1, (double)mis, (double)a->itemsize);
    if (a->ndim < 2 || a->ndim > PE_ROPE_MAX_AXES + 1)
        return pe_fail(FASTPE_ESIZE, a->name, -1, (double)a->ndim, a->ndim < 2 ? 2.0 : 65.0);
    if (array_size(a) == 0)
        return FASTPE_OK;
    if (a->shape[last] > 1 && a->strides[last] != a->itemsize)
        return pe_fail(FASTPE_ESTRIDE, a->name, last, (double)a->strides[last],
                       (double)a->itemsize);
    *empty = 0;
    return nest_of(a, ref, r);
}

int pe_rope_check_arrays(const pe_rope_array *q, const pe_rope_array *k, int64_t head_dim,
                         int64_t seq_axis, int64_t *hd, int *sa) {
    rope_nest rq, rk; /* (filled by check_array when the array holds entries) */
    const pe_rope_array *v[2] = {q, k};
    const char *ref = q->buf;
    int nv = k != NULL ? 2 : 1, eq, ek = 1, err;
    if (k != NULL && k->buf < ref)
        ref = k->buf;
    if ((err = check_array(q, ref, &rq, &eq)) != FASTPE_OK)
        return err;
    if (k != NULL) {
        if ((err = check_array(k, ref, &rk, &ek)) != FASTPE_OK)
            return err;
        if (!eq && !ek && nests_meet(&rq, &rk))
            return pe_fail(FASTPE_EOVERLAP, "k", -1, NAN, NAN);
    }
    if (head_dim == PE_ROPE_HEAD_DIM_OF_Q)
        head_dim = q->shape[q->ndim - 1];
    if (head_dim < 2 || head_dim > ((int64_t)1 << 31))
        return pe_fail(FASTPE_ESIZE, "head_dim", -1, (double)head_dim,
                       head_dim < 2 ? 2.0 : (double)((int64_t)1 << 31));
    for (int i = 0; i < nv; i++) {
        int nd = v[i]->ndim;
        if (v[i]->shape[nd - 1] < head_dim)
            return pe_fail(FASTPE_ESIZE, v[i]->name, nd - 1, (double)v[i]->shape[nd - 1],
                           (double)head_dim);
        if (seq_axis < -nd || seq_axis >= nd - 1 || seq_axis == -1)
            return pe_fail(FASTPE_EINVAL, "seq_axis", i, (double)seq_axis, (double)nd);
    }
    *hd = head_dim;
    *sa = (int)(seq_axis < 0 ? seq_axis + q->ndim : seq_axis);
    if (k != NULL) {
        if (k->ndim != q->ndim)
            return pe_fail(FASTPE_ESIZE, "k", -1, (double)k->ndim, (double)q->ndim);
        if (k->shape[*sa] != q->shape[*sa])
            return pe_fail(FASTPE_ESIZE, "k", *sa, (double)k->shape[*sa], (double)q->shape[*sa]);
        if (k->shape[0] != q->shape[0])
            return pe_fail(FASTPE_ESIZE, "k", 0, (double)k->shape[0], (double)q->shape[0]);
    }
    return FASTPE_OK;
}

/* One output array's own checks (see pe_check_out). */
static int check_out_one(const pe_rope_array *a, const char *ref, const int64_t *shape, int nd,
                         rope_nest *r, int *empty) {
    uintptr_t mis = a->itemsize < 1 ? 1 : (uintptr_t)a->buf % (uintptr_t)a->itemsize;
    *empty = 1;
    if (a->ndim != nd)
        return pe_fail(FASTPE_ESIZE, a->name, -1, (double)a->ndim, (double)nd);
    for (int i = 0; i < nd; i++)
        if (a->shape[i] != shape[i])
            return pe_fail(FASTPE_ESIZE, a->name, i, (double)a->shape[i], (double)shape[i]);
    /* (an element stride that is not a multiple of the entry size misaligns
       every other row, as NumPy's aligned flag says) */
    for (int i = 0; i < nd && mis == 0 && a->itemsize > 0; i++)
        if (a->shape[i] > 1)
            mis = (uintptr_t)(a->strides[i] % a->itemsize);
    if (mis != 0)
        return pe_fail(FASTPE_EINVAL, a->name, -1, (double)mis, (double)a->itemsize);
    if (nd == 0 || array_size(a) == 0)
        return FASTPE_OK;
    if (a->shape[nd - 1] > 1 && a->strides[nd - 1] != a->itemsize)
        return pe_fail(FASTPE_ESTRIDE, a->name, nd - 1, (double)a->strides[nd - 1],
                       (double)a->itemsize);
    /* rows are written forwards: the C API's fills take a row stride >= the width */
    if (nd >= 2 && a->shape[nd - 2] > 1 && a->strides[nd - 2] < a->itemsize * a->shape[nd - 1])
        return pe_fail(FASTPE_ESTRIDE, a->name, nd - 2, (double)a->strides[nd - 2],
                       (double)(a->itemsize * a->shape[nd - 1]));
    *empty = 0;
    return nest_of(a, ref, r);
}

int pe_check_out(const pe_rope_array *a, const pe_rope_array *b, const int64_t *shape, int nd) {
    rope_nest ra, rb;
    const char *ref = b != NULL && b->buf < a->buf ? b->buf : a->buf;
    int ea, eb, err;
    if (nd < 0 || nd > PE_ROPE_MAX_AXES + 1)
        return pe_fail(FASTPE_ESIZE, a->name, -1, (double)nd, (double)(PE_ROPE_MAX_AXES + 1));
    if ((err = check_out_one(a, ref, shape, nd, &ra, &ea)) != FASTPE_OK)
        return err;
    if (b == NULL)
        return FASTPE_OK;
    if ((err = check_out_one(b, ref, shape, nd, &rb, &eb)) != FASTPE_OK)
        return err;
    if (ea || eb)
        return FASTPE_OK;
    return nests_meet(&ra, &rb) ? pe_fail(FASTPE_EOVERLAP, b->name, -1, NAN, NAN) : FASTPE_OK;
}

int pe_rope_rows_meet(const char *a, const char *b, int64_t n, int64_t stride, int64_t width) {
    rope_nest r[2];
    const char *ref = a < b ? a : b, *p[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        r[i].lo = (int64_t)((uintptr_t)p[i] - (uintptr_t)ref);
        r[i].w = width;
        r[i].m = n > 1;
        r[i].n[0] = n;
        r[i].st[0] = stride;
    }
    return nests_meet(&r[0], &r[1]);
}

/* the bound on offsets, integer positions and a cache's length: offset + seq - 1
   and the largest position plus one (the length the dynamic rules get) then stay
   far inside int64 */
#define OFFSET_LIMIT ((int64_t)1 << 62)

/* One position at p (a double when pos_float, else an int64) into the span it widens
   (first: it starts the span); a float one must be finite, before the rules see the
   span, since a NaN would pass every comparison, an integer one within +-2^62.  name
   and index: the detail's. */
static int span_take(pe_rope_span *span, const char *p, int pos_float, int first, const char *name,
                     int64_t index) {
    if (pos_float) {
        double v = *(const double *)p;
        if (!isfinite(v))
            return pe_fail(FASTPE_ERANGE, name, index, v, DBL_MAX);
        span->lo = first || v < span->lo ? v : span->lo;
        span->hi = first || v > span->hi ? v : span->hi;
    } else {
        int64_t v = *(const int64_t *)p;
        if (v > OFFSET_LIMIT || v < -OFFSET_LIMIT)
            return pe_fail(FASTPE_ERANGE, name, index, (double)v, (double)OFFSET_LIMIT);
        span->ilo = first || v < span->ilo ? v : span->ilo;
        span->ihi = first || v > span->ihi ? v : span->ihi;
    }
    return FASTPE_OK;
}

static int64_t id_at(const pe_rope_array *a, int64_t i) {
    return *(const int64_t *)(a->buf + i * (a->ndim > 0 ? a->strides[a->ndim - 1] : 0));
}

int pe_rope_check_tokens(const pe_rope_array *pos, int pos_float, const pe_rope_array *off,
                         int64_t offset, int64_t batch, int64_t seq, pe_rope_span *span) {
    span->ilo = 0, span->ihi = -1, span->lo = 0.0, span->hi = -1.0;
    if (seq < 0 || seq > OFFSET_LIMIT)
        return pe_fail(FASTPE_ESIZE, "seq_len", -1, (double)seq,
                       seq < 0 ? 0.0 : (double)OFFSET_LIMIT);
    if (pos != NULL) {
        int nd = pos->ndim;
        int64_t rows = nd == 2 ? pos->shape[0] : 1, n = 0;
        if (!(nd == 1 && pos->shape[0] == seq) &&
            !(nd == 2 && pos->shape[1] == seq && (rows == 1 || rows == batch)))
            return pe_fail(FASTPE_ESIZE, "positions", -1, (double)nd, (double)seq);
        for (int64_t r = 0; r < rows; r++) {
            const char *row = pos->buf + (nd == 2 ? r * pos->strides[0] : 0);
            for (int64_t s = 0; s < seq; s++, n++) {
                int err = span_take(span, row + s * pos->strides[nd - 1], pos_float, n == 0,
                                    "positions", n);
                if (err != FASTPE_OK)
                    return err;
            }
        }
        if (!pos_float)
            span->lo = (double)span->ilo, span->hi = (double)span->ihi;
        return FASTPE_OK;
    }
    int64_t n = 1, lo = offset, hi = offset;
    if (off != NULL) {
        if (off->ndim > 1 || (off->ndim == 1 && off->shape[0] != 1 && off->shape[0] != batch))
            return pe_fail(FASTPE_ESIZE, "offset", -1, (double)off->ndim, (double)batch);
        n = off->ndim == 0 ? 1 : off->shape[0];
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = off != NULL ? id_at(off, i) : offset;
        if (v > OFFSET_LIMIT || v < -OFFSET_LIMIT)
            return pe_fail(FASTPE_ERANGE, "offset", off != NULL ? i : -1, (double)v,
                           (double)OFFSET_LIMIT);
        lo = i == 0 || v < lo ? v : lo;
        hi = i == 0 || v > hi ? v : hi;
    }
    if (n > 0 && seq > 0) {
        span->ilo = lo, span->ihi = hi + (seq - 1);
        span->lo = (double)span->ilo, span->hi = (double)span->ihi;
    }
    return FASTPE_OK;
}

int pe_rope_check_span(const pe_rope_span *span, double limit, int64_t axis) {
    double v = fabs(span->lo) > fabs(span->hi) ? span->lo : span->hi;
    if (!(span->hi >= span->lo) || fabs(v) <= limit) /* (no tokens, or all within) */
        return FASTPE_OK;
    return pe_fail(FASTPE_ERANGE, "positions", axis, v, limit);
}

int pe_rope_check_axes_tokens(const pe_rope_array *pos, int pos_float, int64_t n, int64_t batch,
                              int64_t seq, pe_rope_span *spans) {
    int nd = pos->ndim;
    int64_t rows = 1, idx[PE_ROPE_MAX_AXES];
    const char *row = pos->buf;
    if (n < 1 || n > PE_ROPE_MAX_AXES)
        return pe_fail(FASTPE_ESIZE, "n_axes", -1, (double)n, (double)PE_ROPE_MAX_AXES);
    if (nd < 1 || nd > PE_ROPE_MAX_AXES || pos->shape[nd - 1] != n)
        return pe_fail(FASTPE_ESIZE, pos->name, nd > 0 ? nd - 1 : 0,
                       nd > 0 ? (double)pos->shape[nd - 1] : 0.0, (double)n);
    if (seq >= 0 && !(nd == 2 && pos->shape[0] == seq) &&
        !(nd == 3 && pos->shape[1] == seq && (pos->shape[0] == 1 || pos->shape[0] == batch)))
        return pe_fail(FASTPE_ESIZE, pos->name, -1, (double)nd, (double)seq);
    for (int64_t a = 0; a < n; a++) {
        spans[a].ilo = 0, spans[a].ihi = -1, spans[a].lo = 0.0, spans[a].hi = -1.0;
    }
    for (int i = 0; i < nd - 1; i++)
        rows *= pos->shape[i], idx[i] = 0;
    for (int64_t t = 0; t < rows; t++) {
        for (int64_t a = 0; a < n; a++) {
            int err = span_take(&spans[a], row + a * pos->strides[nd - 1], pos_float, t == 0,
                                pos->name, t * n + a);
            if (err != FASTPE_OK)
                return err;
        }
        for (int i = nd - 2; i >= 0; i--) { /* the next token: a mixed-radix step */
            if (++idx[i] < pos->shape[i]) {
                row += pos->strides[i];
                break;
            }
            row -= (pos->shape[i] - 1) * pos->strides[i];
            idx[i] = 0;
        }
    }
    for (int64_t a = 0; a < n && !pos_float; a++)
        spans[a].lo = (double)spans[a].ilo, spans[a].hi = (double)spans[a].ihi;
    return FASTPE_OK;
}
