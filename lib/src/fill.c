/*
 * The fill driver: a fill's plan (frequencies and rotation table), its split
 * between threads and the row writers' dispatch, and the entry points that
 * run it.  It includes the row writers (kernels/pe_core.h) so that the hot loop
 * inlines them: keep the driver in this compilation unit.
 */
#if defined(__FAST_MATH__)
#error                                                                                             \
    "fastpe must be compiled without -ffast-math (its double-double arithmetic needs IEEE rounding)"
#endif

#include "pe_crmath.h"
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>

/* A row evaluated accurately (fractional or scattered positions) counts as
 * this many table entries per frequency of work (see serial_below). */
#define EVAL_WORK 16
/* Block size budget: 2 * B * nf doubles (~1 MiB); the table holds about half
 * of that (rows 0..B/2), so it stays in L2. */
#define TABLE_DOUBLES 131072
#define MAX_BLOCK     128
/* The table's rows j = j1*SUB + j0 are themselves composed from SUB + B/SUB
 * accurately evaluated rows (one more exact rotation, ~1 ulp, for 4x fewer
 * evaluations: what makes small tables cheap). */
#define SUB 8
/* Streaming stores only for rows up to this many entries (the per-thread row
 * buffer they are copied from stays in L2). */
#define STREAM_MAX_WIDTH 32768

/* Tunables: written at initialisation and by the test setters (relaxed
 * atomics, pe_sys.h: a call running meanwhile sees either value).  Fills with
 * less work than serial_below (in table entries) run on the calling thread:
 * waking a team whose workers went to sleep between calls costs more than it
 * saves (bench/serial_threshold.py). */
static PE_RELAXED(int64_t) serial_below = 131072;
/* Entries per chunk of an interruptible fill: a few ms of work for the plain
 * table, tens of ms at worst (one accurate evaluation per row, one thread). */
static PE_RELAXED(int64_t) chunk_entries = (int64_t)1 << 23;

int64_t pe_set_serial_below(int64_t work) {
    int64_t old = pe_relaxed_load(&serial_below);
    pe_relaxed_store(&serial_below, work);
    return old;
}

int64_t pe_set_chunk_entries(int64_t n) {
    int64_t old = pe_relaxed_load(&chunk_entries);
    pe_relaxed_store(&chunk_entries, n >= 1 ? n : 1);
    return old;
}

int64_t pe_chunk_entries(void) { return pe_relaxed_load(&chunk_entries); }

/* The team size of a fill of N rows of D entries (work: its cost in entries
 * when not N*D, see serial_below): the request (or the OpenMP default), capped
 * at the OpenMP thread limit and at the cores this process may use, one for
 * small fills and in a forked child (GNU libgomp's pool does not survive fork). */
int pe_threads(int num_threads, int64_t N, int64_t D, int64_t work) {
    int nt = num_threads;
    if (work < 0)
        work = N * D;
    if (work < pe_relaxed_load(&serial_below) || N <= 1 || pe_forked_child())
        return 1;
    /* a runtime that initialises itself lazily (LLVM's libomp, at its first
       query) may leave errno set by its probes: the caller's is kept */
    int saved_errno = errno;
    if (nt <= 0)
        nt = pe_omp_max_threads();
    if (nt > pe_omp_thread_limit())
        nt = pe_omp_thread_limit();
    if (nt > 1) {
        int cpus = pe_usable_cpus();
        if (nt > cpus)
            nt = cpus;
        if (num_threads <= 0)
            nt = pe_idle_team(nt); /* a default team leaves busy cores alone */
    }
    if (nt > N)
        nt = (int)N;
    errno = saved_errno;
    return nt >= 1 ? nt : 1;
}

/* Rows per anchor block: a power of two that depends on the width only --
 * never on seq_len, offset or the thread count -- so every entry is a pure
 * function of (position, column) and chunked fills agree bitwise with one fill. */
int64_t pe_block_rows(int64_t nf) {
    int64_t b = MAX_BLOCK;
    while (b > SUB && 2 * b * nf > TABLE_DOUBLES)
        b /= 2;
    return b;
}

/* A plan = [frequencies (4 nf) | table cos-1 ((B/2+1) nf) | table sin ((B/2+1) nf)]. */
size_t pe_plan_doubles(int64_t nf, int64_t B) { return (size_t)(4 * nf + 2 * (B / 2 + 1) * nf); }

/* Fill a plan: the frequencies and the table e^{i a w}, a = 0 .. B/2, each row
 * composed from two accurately evaluated factor rows (a = a1*b0 + a0).  Position
 * K is encoded around the centre c of its block (see pe_centre) as the rotation
 * by a = |K - c| (sign K - c).  Only the rows a needed by positions first ..
 * first+count-1 are built (all of them when count >= B): a short fill touches
 * only a few. */
int pe_prepare(double *plan, const pe_spec *sp, int64_t first, int64_t count, int nt) {
    int64_t nf = sp->nf;
    int64_t B = pe_block_rows(nf);
    int64_t H = B / 2;
    int64_t b0 = SUB; /* B >= SUB always */
    int64_t b1 = H / b0 + 1;
    /* factor rows (2 (b0 + b1) nf), which rows are needed (H+1 + b0 + b1), and per
       thread one evaluation's discarded cosines (nf) */
    double *mem =
        (double *)malloc((size_t)(2 * (b0 + b1) * nf + H + 1 + b0 + b1 + nt * nf) * sizeof(double));
    if (mem == NULL)
        return FASTPE_ENOMEM;
    pe_freq fr = pe_freq_view(plan, nf);
    double *Tm = plan + 4 * nf; /* table row a: Tm + a*nf, Ts + a*nf */
    double *Ts = Tm + (H + 1) * nf;
    double *F0m = mem; /* factor rows e^{i a0 w}, a0 < b0 */
    double *F0s = F0m + b0 * nf;
    double *F1m = F0s + b0 * nf; /* factor rows e^{i a1 b0 w}, a1 < b1 */
    double *F1s = F1m + b1 * nf;
    double *need = F1s + b1 * nf; /* need[a], need0[a0], need1[a1] */
    double *need0 = need + H + 1;
    double *need1 = need0 + b0;
    double *discard = need1 + b1;
    int64_t a, r;

    if (sp->wlist != NULL)
        pe_freqs_list(fr, nf, sp->wlist);
    else
        pe_freqs(fr, nf, sp->w0, sp->base, sp->denom);
    for (r = 0; r < b0; r++)
        need0[r] = 0;
    for (r = 0; r < b1; r++)
        need1[r] = 0;
    for (a = 0; a < H + 1; a++)
        need[a] = count >= B ? 1.0 : 0.0;
    if (count < B) {
        for (int64_t q = 0; q < count; q++) {
            r = (first + q) - pe_floordiv(first + q, B) * B; /* K - centre + H */
            need[r >= H ? r - H : H - r] = 1.0;
        }
        need[0] = 1.0; /* rotation by 0: rows evaluated directly (position 0, fractions) */
    }
    for (a = 0; a < H + 1; a++) {
        if (need[a] != 0) {
            need0[a % b0] = 1;
            need1[a / b0] = 1;
        }
    }
    if (nt > H + 1)
        nt = (int)(H + 1);
#pragma omp parallel num_threads(nt) private(r, a)
    {
        int tid = pe_omp_thread_num();
#pragma omp for schedule(static)
        for (r = 0; r < b0 + b1; r++) {
            if (r < b0) {
                if (need0[r] != 0)
                    pe_sincos_row((double)r, fr, nf, F0s + r * nf, discard + tid * nf,
                                  F0m + r * nf);
            } else if (need1[r - b0] != 0) {
                pe_sincos_row((double)((r - b0) * b0), fr, nf, F1s + (r - b0) * nf,
                              discard + tid * nf, F1m + (r - b0) * nf);
            }
        }
        /* (the implicit barrier of the loop above publishes the factor rows) */
#pragma omp for schedule(static)
        for (a = 0; a < H + 1; a++) {
            if (need[a] != 0)
                pe_compose(nf, F1m + (a / b0) * nf, F1s + (a / b0) * nf, F0m + (a % b0) * nf,
                           F0s + (a % b0) * nf, Tm + a * nf, Ts + a * nf);
        }
    }
    free(mem);
    return FASTPE_OK;
}

/* What every row of one fill shares (read-only in the parallel loop). */
typedef struct {
    const pe_spec *sp;
    const pe_rows *rq;
    pe_freq fr;
    int64_t nf;
    int64_t B;
    const double *Tm;
    const double *Ts;
    int dd;            /* float64 rows by the accurate writers (pe_rows_dd.h) */
    double scale;      /* their factor (rq->scale): other than 1, every entry is fixed */
    const double *Tml; /* then the table's low parts (cos-1, sin), row a at a*nf */
    const double *Tsl;
    int cr;      /* 16/32-bit rows correctly rounded (fill_rows.inc.c's tested writer) */
    double ferr; /* then the angles' error per unit of position (pe_angle_err_rate) */
    int cradd;   /* an add correctly rounded: its rows in double-double (dd set), pe_acc_row */
} pe_ctx;

/* The error of the angle 2 pi K f_i of a row at position K, over |K|, times
 * what the rotation multiplies it by (at most 1 + |Tm| + |Ts| <= 4, so 8 pi):
 * the frequencies in double-double carry a relative error below 2^-96 (1 +
 * their largest exponent |i ln(base) / denom|: pe_dd_log and pe_dd_exp err by
 * 2^-99 of their argument, the chained products of pe_freqs by 2^-104 each),
 * or 2^-100 as float64 frequencies times 1/2pi; the reduction adds 2^-104 of
 * K f.  26 > 8 pi leaves room for the rounding of this bound itself. */
static double pe_angle_err_rate(const pe_spec *sp, pe_freq fr) {
    double fmax = 0.0, rel = 7.888609052210118e-31; /* 2^-100 */
    for (int64_t i = 0; i < sp->nf; i++)
        fmax = fabs(fr.fh[i]) > fmax ? fabs(fr.fh[i]) : fmax;
    if (sp->wlist == NULL)
        rel = 1.262177448353619e-29 /* 2^-96 */ *
              (1.0 + fabs(pe_dd_log(sp->base).hi * (double)sp->nf / sp->denom));
    return 26.0 * fmax * rel;
}

/* One fill, prepared: what its rows share, its team and its scratch memory. */
typedef struct {
    pe_ctx c;
    int nt;
    int stream;         /* streaming (non-temporal) stores */
    int contiguous;     /* one sequence of consecutive positions: mirrored pairs */
    int blocked;        /* add: PE_BLK_POS or PE_BLK_STEP (0: row by row) */
    int64_t units;      /* what the threads split: rows, or (block, sequence) pairs */
    int64_t per_thread; /* scratch doubles per thread */
    double *mem;        /* scratch (and the plan when the caller had none) */
    double *scratch;
    int64_t seed; /* centre whose anchor thread 0's scratch holds (INT64_MIN: none) */
    int64_t last; /* the same after the last range ran */
    /* the blocked add: sequence i (in order of start) covers the coordinates
       start[i] .. start[i]+S-1 (positions, or steps for PE_BLK_STEP) and is
       sequence seq[i] of x; block blk[n] (coordinates blk[n]*nb ..) is used by
       the sequences act[n] .. act[n] + cum[n+1]-cum[n] - 1 */
    int64_t nb;
    int64_t nblk;
    int64_t *pr; /* (start[i], seq[i]) pairs, nseq of them; NULL: start0, i */
    int64_t start0;
    int64_t *blk; /* blk, act (nblk each), cum (nblk+1) */
    int64_t *act;
    int64_t *cum;
} pe_fill;

/* Blocked adds.  Rows by position: each sequence's positions run consecutively
 * from its start (an offset, one per sequence, or consecutive position ids), and
 * the rows are written as a table is.  Rows by step: every sequence has the same
 * positions (any, fractional too), encoded step by step. */
#define PE_BLK_POS  1
#define PE_BLK_STEP 2
/* A block of encoded rows (float64) is about this many bytes: it stays in L2
 * while it is added to every sequence that uses it. */
#define ADD_BLOCK_BYTES 131072

/* Sequence i of a blocked add in order of start: its first coordinate and its
 * index in x. */
PE_INLINE int64_t pe_add_start(const pe_fill *f, int64_t i) {
    return f->pr != NULL ? f->pr[2 * i] : f->start0;
}
PE_INLINE int64_t pe_add_seq(const pe_fill *f, int64_t i) {
    return f->pr != NULL ? f->pr[2 * i + 1] : i;
}

PE_INLINE int64_t pe_int_position(const pe_rows *rq, int64_t b, int64_t s) {
    int64_t K = rq->offs != NULL ? rq->offs[b * rq->offs_stride] : rq->offset;
    return K + (rq->pos_i != NULL ? rq->pos_i[b * rq->psb + s * rq->pss] : s);
}

/* The centre of K's block.  Blocks are the positions m*B .. m*B+B-1, centred
 * at m*B + B/2: a table that starts at position 0 (the common case) is whole
 * blocks, so nearly all of its rows are written as mirrored pairs. */
PE_INLINE int64_t pe_centre(int64_t K, int64_t B) { return pe_floordiv(K, B) * B + B / 2; }

/* ev = the row of position K evaluated directly: sines, cosines (and cos-1)
 * in double, or with c->dd [sines | cosines | their low parts] in
 * double-double. */
PE_INLINE void pe_direct_row(const pe_ctx *c, double K, double *ev) {
    int64_t nf = c->nf;
    if (c->dd)
        pe_sincos_row_dd(K, c->fr, nf, ev, ev + 2 * nf, ev + nf, ev + 3 * nf);
    else
        pe_sincos_row(K, c->fr, nf, ev, ev + nf, ev + 2 * nf);
}

/* Make ev hold the anchor of K's block: the accurate row at its centre;
 * *cached is the centre it holds. */
PE_INLINE void pe_anchor_row(const pe_ctx *c, int64_t K, double *ev, int64_t *cached) {
    int64_t centre = pe_centre(K, c->B);
    if (centre != *cached) {
        pe_direct_row(c, (double)centre, ev);
        *cached = centre;
    }
}

/* The double-double anchor in ev (4 nf: sin, cos and their low parts) rotated
 * by table row a of c, bounded for positions within a block of pos. */
static inline pe_ddrot pe_ddrot_of(const pe_ctx *c, const double *ev, int64_t a, double pos) {
    int64_t nf = c->nf;
    pe_ddrot R = {ev,
                  ev + 2 * nf,
                  ev + nf,
                  ev + 3 * nf,
                  c->Tm + a * nf,
                  c->Tml + a * nf,
                  c->Ts + a * nf,
                  c->Tsl + a * nf,
                  c->fr.fh,
                  pe_dd_bound(pos, (double)c->B)};
    return R;
}

/* Entries left undecided by the accurate float64 rows' rounding test. */
static PE_RELAXED(uint64_t) f64_undecided;

uint64_t pe_f64_undecided(void) { return (uint64_t)pe_relaxed_load(&f64_undecided); }

/* The exact fallback of the accurate float64 rows (counted): sin or cos of
 * K w_i evaluated exactly (pe_entry_exact: w_i = sp->wlist[i] when set, else
 * sp->w0 sp->base^(-i / sp->denom)), times scale, and rounded to double; r,
 * the double-double's rounding, is what it replaces. */
double pe_f64_exact(const pe_spec *sp, double K, int64_t i, int cosine, double r, double scale) {
    (void)r;
    pe_relaxed_store(&f64_undecided, pe_relaxed_load(&f64_undecided) + 1);
    return pe_entry_exact(K, i, sp->w0, sp->base, sp->denom, sp->wlist, cosine, scale, 53, -1074);
}

/* The encoding of row (b, s) of a correctly rounded add (c->cradd), unrounded:
 * entry col within er[col] of hi[col] + lo[col] (er 0: exact; where no
 * encoding goes, -0.0 exactly, which leaves x scale as it is).  *K: its
 * position; *none: a row with no encoding (the zero position).  ev, cached:
 * the thread's anchor scratch (4 nf, double-double) as for the table rows. */
static void pe_acc_row(double *hi, double *lo, double *er, const pe_ctx *c, int64_t b, int64_t s,
                       double *ev, int64_t *cached, double *K, int *none) {
    const pe_rows *rq = c->rq;
    const pe_spec *sp = c->sp;
    int64_t a = 0, Ki = 0, col;
    int exact = 0;
    double pos, sg = 1.0;
    int64_t nfreq = pe_row_freqs(sp);
    double Kf = rq->pos_f != NULL ? rq->pos_f[b * rq->psb + s * rq->pss] : 0.0;
    *none = 0;
    if (Kf != floor(Kf)) {
        /* a fractional position: its row directly, "rotated" by table row 0 */
        pos = Kf;
        pe_direct_row(c, pos, ev);
        *cached = INT64_MIN;
        *K = pos;
    } else {
        Ki = rq->pos_f != NULL ? (int64_t)Kf : pe_int_position(rq, b, s);
        *K = (double)Ki;
        if (rq->has_zero_pos && Ki == rq->zero_pos) {
            *none = 1;
            for (col = 0; col < sp->d; col++) {
                hi[col] = -0.0;
                lo[col] = 0.0;
                er[col] = 0.0;
            }
            return;
        }
        exact = Ki == 0; /* (sines 0, cosines 1) */
        if (!exact) {
            pe_anchor_row(c, Ki, ev, cached);
            a = Ki - *cached;
            sg = a >= 0 ? 1.0 : -1.0;
            a = a >= 0 ? a : -a;
        }
        pos = (double)*cached;
    }
    pe_ddrot R = pe_ddrot_of(c, ev, a, pos);
    for (int64_t i = 0; i < nfreq; i++) {
        pe_dd v[2] = {{0.0, 0.0}, {1.0, 0.0}};
        double E = 0.0;
        int64_t at[2];
        if (!exact)
            E = pe_dd_val(&R, i, sg, &v[0], &v[1]);
        pe_freq_columns(sp, i, at);
        for (int k = 0; k < 2; k++) {
            if (at[k] >= 0) {
                hi[at[k]] = v[k].hi;
                lo[at[k]] = v[k].lo;
                er[at[k]] = exact ? 0.0 : E + 4.930380657631324e-32 /* 2^-104 */ * fabs(v[k].hi);
            }
        }
    }
    if (sp->zero_col >= 0) {
        hi[sp->zero_col] = -0.0;
        lo[sp->zero_col] = 0.0;
        er[sp->zero_col] = 0.0;
    }
}

/* What column col of a spec's row holds: frequency *i's sine (0) or cosine
 * (1), or no encoding (-1: the zero column). */
static int pe_col_entry(const pe_spec *sp, int64_t col, int64_t *i) {
    if (col == sp->zero_col)
        return -1;
    if (sp->layout == PE_LAYOUT_INTERLEAVED) {
        *i = col / 2 < sp->npairs ? col / 2 : sp->npairs;
        return col / 2 < sp->npairs ? (int)(col & 1) : 0;
    }
    if (col >= sp->s_off && col < sp->s_off + sp->ns) {
        *i = col - sp->s_off;
        return 0;
    }
    *i = col - sp->c_off;
    return 1;
}

#define DRV_FN(name) PE_CAT(pe_drv_##name, DRV_SFX)

/* Each type also defines DRV_PUT (a double rounded once to the type), DRV_GET
 * (an entry's value as a double), DRV_BITS (an entry's bits, so that -0.0 and
 * 0.0 differ), DRV_PREC and DRV_EMIN (the format's significant bits and least
 * subnormal exponent, for the exact path): what the correctly rounded rows
 * and adds need. */
PE_INLINE uint64_t pe_f64_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

#define DRV_T       double
#define DRV_SFX     f64
#define DRV_DD      1
#define DRV_PUT(v)  (v)
#define DRV_GET(x)  (x)
#define DRV_BITS(x) pe_f64_bits(x)
#define DRV_PREC    53
#define DRV_EMIN    -1074
#include "fill_rows.inc.c"

#define DRV_T       float
#define DRV_SFX     f32
#define DRV_DD      0
#define DRV_PUT(v)  ((float)(v))
#define DRV_GET(x)  ((double)(x))
#define DRV_BITS(x) pe_f32_bits(x)
#define DRV_PREC    24
#define DRV_EMIN    -149
#include "fill_rows.inc.c"

#define DRV_T       uint16_t
#define DRV_SFX     f16
#define DRV_DD      0
#define DRV_PUT(v)  pe_f64_to_f16(v)
#define DRV_GET(x)  ((double)pe_f16_to_f32(x))
#define DRV_BITS(x) (x)
#define DRV_PREC    11
#define DRV_EMIN    -24
#include "fill_rows.inc.c"

#define DRV_T       uint16_t
#define DRV_SFX     bf16
#define DRV_DD      0
#define DRV_PUT(v)  pe_f64_to_bf16(v)
#define DRV_GET(x)  ((double)pe_bf16_to_f32(x))
#define DRV_BITS(x) (x)
#define DRV_PREC    8
#define DRV_EMIN    -133
#include "fill_rows.inc.c"

#undef DRV_FN

/* The float64 row of a fill of one integer position (rq: one sequence of one
 * step, no zero position, not an add) with a prepared plan, written by the
 * same write_at as pe_fill_run writes it (hence its bits), without the fill's
 * setup: a decoding step's angle row.  The anchor comes from ac when it holds
 * the right one (read under the lock, no copy) and goes back into it when
 * evaluated.  PE_EINVAL when the fill is not of that kind (pe_fill_run then
 * writes it). */
int pe_fill_one_f64(double *row, const pe_spec *sp, const pe_rows *rq, const double *plan,
                    pe_anchor_cache *ac) {
    double ev[3 * 256];
    pe_ctx c;
    int64_t K, centre, cached;
    if (rq->nseq * rq->S != 1 || plan == NULL || sp->nf > 256 || rq->pos_f != NULL ||
        rq->has_zero_pos || rq->add || rq->accurate)
        return PE_EINVAL;
    c.sp = sp;
    c.rq = rq;
    c.nf = sp->nf;
    c.B = pe_block_rows(sp->nf);
    c.fr = pe_freq_view((double *)plan, sp->nf);
    c.Tm = plan + 4 * sp->nf;
    c.Ts = c.Tm + (c.B / 2 + 1) * sp->nf;
    c.dd = 0;
    c.cr = 0;
    c.ferr = 0.0;
    c.cradd = 0;
    K = pe_int_position(rq, 0, 0);
    centre = pe_centre(K, c.B);
    /* The anchor cache only saves work (the bits are the same without it), so
       it is taken with trylock and skipped when busy: a caller never waits for
       it, and a forked child whose parent forked while another thread held it
       never hangs on it. */
    if (ac != NULL && K != 0 && pe_mutex_trylock(&ac->lock)) {
        if (ac->centre == centre && ac->data != NULL) {
            pe_drv_write_one_f64(row, &c, ac->data, K - centre, NULL, 0, 0.0, (double)centre);
            pe_mutex_unlock(&ac->lock);
            return FASTPE_OK;
        }
        pe_mutex_unlock(&ac->lock);
    }
    cached = INT64_MIN;
    pe_drv_write_at_f64(row, &c, K, ev, &cached, NULL, 0, 0.0);
    if (ac != NULL && cached != INT64_MIN && pe_mutex_trylock(&ac->lock)) {
        if (ac->data == NULL)
            ac->data = (double *)malloc((size_t)(2 * sp->nf) * sizeof(double));
        if (ac->data != NULL) {
            memcpy(ac->data, ev, (size_t)(2 * sp->nf) * sizeof(double));
            ac->centre = cached;
        }
        pe_mutex_unlock(&ac->lock);
    }
    return FASTPE_OK;
}

static size_t pe_itemsize(int kind) {
    return kind == PE_KIND_F32 ? 4 : (kind == PE_KIND_F64 ? 8 : 2);
}

static void pe_fill_free(pe_fill *f) {
    free(f->mem);
    free(f->pr);
    free(f->blk);
    f->mem = NULL;
    f->pr = NULL;
    f->blk = NULL;
}

/* Rows per block of a blocked add of rows D wide (any size gives the same bits:
 * every row is a pure function of its position). */
static int64_t pe_add_block_rows(int64_t D) {
    int64_t nb = 256;
    while (nb > 1 && nb * D * 8 > ADD_BLOCK_BYTES)
        nb /= 2;
    return nb;
}

static int pe_cmp_pair(const void *pa, const void *pb) {
    const int64_t *a = (const int64_t *)pa, *b = (const int64_t *)pb;
    if (a[0] != b[0])
        return a[0] < b[0] ? -1 : 1;
    return a[1] < b[1] ? -1 : (a[1] > b[1] ? 1 : 0);
}

/* Which blocked add fits the positions of rq: PE_BLK_POS when every sequence's
 * positions run consecutively, PE_BLK_STEP when every sequence has the same
 * positions, else 0.  A pass over the position ids (cheap beside the rows). */
static int pe_add_mode(const pe_rows *rq) {
    int64_t nseq = rq->nseq, S = rq->S, b, s;
    if (rq->pos_i == NULL && rq->pos_f == NULL)
        return PE_BLK_POS;
    if (rq->pos_i != NULL) {
        int run = 1;
        for (b = 0; b < nseq && run; b++) {
            const int64_t *p = rq->pos_i + b * rq->psb;
            for (s = 1; s < S; s++) {
                if (p[s * rq->pss] != p[0] + s) {
                    run = 0;
                    break;
                }
            }
        }
        if (run)
            return PE_BLK_POS;
    }
    if (rq->offs != NULL) {
        for (b = 1; b < nseq; b++)
            if (rq->offs[b * rq->offs_stride] != rq->offs[0])
                return 0;
    }
    if (rq->psb != 0) {
        for (b = 1; b < nseq; b++) {
            for (s = 0; s < S; s++) {
                int64_t k = b * rq->psb + s * rq->pss;
                if (rq->pos_i != NULL ? rq->pos_i[k] != rq->pos_i[s * rq->pss]
                                      : rq->pos_f[k] != rq->pos_f[s * rq->pss])
                    return 0;
            }
        }
    }
    return PE_BLK_STEP;
}

/* Blocks ka .. kb of a blocked add: counted (f->blk NULL) or listed, with the
 * sequences that use each (*lo, *hi: the sweep's window over the sorted starts). */
static void pe_add_blocks(pe_fill *f, int64_t ka, int64_t kb, int64_t *lo, int64_t *hi) {
    int64_t nseq = f->c.rq->nseq, S = f->c.rq->S, nb = f->nb;
    for (int64_t k = ka; k <= kb; k++) {
        if (f->blk != NULL) {
            if (f->pr == NULL) { /* every sequence uses every block */
                *lo = 0;
                *hi = nseq;
            }
            while (*lo < nseq && pe_floordiv(pe_add_start(f, *lo) + S - 1, nb) < k)
                (*lo)++;
            while (*hi < nseq && pe_floordiv(pe_add_start(f, *hi), nb) <= k)
                (*hi)++;
            f->blk[f->nblk] = k;
            f->act[f->nblk] = *lo;
            f->cum[f->nblk + 1] = f->cum[f->nblk] + (*hi - *lo);
        }
        f->nblk++;
    }
}

/* The plan of a blocked add: the sequences in order of their first coordinate
 * and the blocks they use (each listed once, with the sequences using it). */
static int pe_add_plan(pe_fill *f, const pe_rows *rq, int mode) {
    int64_t nseq = rq->nseq, S = rq->S, nb = f->nb, b, i, pass;
    int sorted = 1;
    f->start0 = mode == PE_BLK_POS ? rq->offset : 0;
    if (mode == PE_BLK_POS && (rq->offs != NULL || rq->pos_i != NULL)) {
        /* one start per sequence (in order of start: the blocks each uses are
           then a window that slides along) */
        f->pr = (int64_t *)malloc((size_t)(2 * nseq) * sizeof(int64_t));
        if (f->pr == NULL)
            return FASTPE_ENOMEM;
    }
    for (b = 0; b < nseq && f->pr != NULL; b++) {
        int64_t st = 0;
        if (mode == PE_BLK_POS) {
            st = rq->offs != NULL ? rq->offs[b * rq->offs_stride] : rq->offset;
            if (rq->pos_i != NULL)
                st += rq->pos_i[b * rq->psb];
        }
        f->pr[2 * b] = st;
        f->pr[2 * b + 1] = b;
        if (b > 0 && st < f->pr[2 * b - 2])
            sorted = 0;
    }
    if (!sorted)
        qsort(f->pr, (size_t)nseq, 2 * sizeof(int64_t), pe_cmp_pair);
    /* pass 0 counts the blocks, pass 1 lists them: the union of the sequences'
       block ranges, which are sorted at both ends */
    for (pass = 0; pass < 2; pass++) {
        int64_t ka = 0, kb = -1, lo = 0, hi = 0;
        f->nblk = 0;
        for (i = 0; i < nseq; i++) {
            int64_t ks = pe_floordiv(pe_add_start(f, i), nb);
            int64_t ke = pe_floordiv(pe_add_start(f, i) + S - 1, nb);
            if (i > 0 && f->pr == NULL)
                break; /* (every sequence has the same blocks) */
            if (i == 0 || ks > kb) {
                if (i > 0)
                    pe_add_blocks(f, ka, kb, &lo, &hi);
                ka = ks;
                kb = ke;
            } else if (ke > kb) {
                kb = ke;
            }
        }
        pe_add_blocks(f, ka, kb, &lo, &hi);
        if (pass == 0) {
            f->blk = (int64_t *)malloc((size_t)(3 * f->nblk + 1) * sizeof(int64_t));
            if (f->blk == NULL)
                return FASTPE_ENOMEM;
            f->act = f->blk + f->nblk;
            f->cum = f->act + f->nblk;
            f->cum[0] = 0;
        }
    }
    f->blocked = mode;
    f->units = f->cum[f->nblk];
    return FASTPE_OK;
}

/* The low parts of the table rows an accurate fill uses (into mem: 2 (B/2+1)
 * nf doubles, then B/2+1 flags): which rows its positions need (all of them
 * for B or more consecutive positions), each evaluated in double-double. */
static void pe_table_lows(pe_fill *f, double *mem) {
    const pe_rows *rq = f->c.rq;
    int64_t nf = f->c.nf, B = f->c.B, H = B / 2, a;
    double *Tml, *Tsl, *need;
    int64_t N = rq->nseq * rq->S;
    if (mem == NULL) { /* (the caller's, of this plan: pe_fill_setup) */
        f->c.Tml = rq->lows;
        f->c.Tsl = rq->lows + (H + 1) * nf;
        return;
    }
    Tml = mem;
    Tsl = mem + (H + 1) * nf;
    need = Tsl + (H + 1) * nf;
    for (a = 0; a < H + 1; a++)
        need[a] = f->contiguous && N >= B ? 1.0 : 0.0;
    if (!(f->contiguous && N >= B)) {
        for (int64_t r = 0; r < N; r++) {
            int64_t b = r / rq->S, s = r - b * rq->S, K;
            if (rq->pos_f != NULL) {
                double Kf = rq->pos_f[b * rq->psb + s * rq->pss];
                if (Kf != floor(Kf))
                    continue; /* (evaluated directly: table row 0, always built) */
                K = (int64_t)Kf;
            } else {
                K = pe_int_position(rq, b, s);
            }
            K -= pe_centre(K, B);
            need[K >= 0 ? K : -K] = 1.0;
        }
        need[0] = 1.0; /* (rows evaluated directly: position 0, fractions) */
    }
    for (a = 0; a < H + 1; a++) {
        if (need[a] != 0)
            pe_table_row_dd((double)a, f->c.fr, nf, f->c.Tm + a * nf, f->c.Ts + a * nf,
                            Tml + a * nf, Tsl + a * nf);
    }
    f->c.Tml = Tml;
    f->c.Tsl = Tsl;
}

/* Decide the team and the store kind, allocate scratch, and build the plan
 * unless the caller has one (plan: a prepared plan for this spec, or NULL to
 * build the part of one this fill needs). */
static int pe_fill_setup(pe_fill *f, const pe_spec *sp, const pe_rows *rq, int num_threads,
                         const double *plan, size_t itemsize) {
    int64_t D = sp->d;
    int64_t nf = sp->nf;
    int64_t S = rq->S;
    int64_t N = rq->nseq * S;
    int64_t B = pe_block_rows(nf);
    /* low parts made for a plan serve only that plan, not one prepared here */
    const double *lows = plan != NULL ? rq->lows : NULL;
    memset(f, 0, sizeof(pe_fill));
    f->seed = INT64_MIN;
    f->last = INT64_MIN;
    f->contiguous = rq->nseq == 1 && rq->pos_i == NULL && rq->pos_f == NULL && rq->offs == NULL &&
                    !rq->has_zero_pos;
    f->c.rq = rq;
    f->units = N;
    if (rq->add && N > 0 && !rq->accurate) {
        /* rows shared by several sequences (or consecutive in one) are encoded
           once per block and added to each sequence using them */
        int mode = pe_add_mode(rq);
        f->nb = pe_add_block_rows(D);
        if (mode != 0) {
            int err = pe_add_plan(f, rq, mode);
            if (err != FASTPE_OK) {
                pe_fill_free(f);
                return err;
            }
        }
    }
    /* rows at explicit positions may each need an accurate evaluation */
    f->nt = pe_threads(num_threads, N, D,
                       f->contiguous || (rq->pos_i == NULL && rq->pos_f == NULL)
                           ? N * D
                           : N * (D + EVAL_WORK * nf));
    if (f->nt > f->units)
        f->nt = (int)f->units;
    if (f->nt < 1)
        f->nt = 1;
    double stream_from = pe_stream_bytes(itemsize);
    f->stream = PE_HAVE_STREAM && !rq->add && !rq->fresh && D <= STREAM_MAX_WIDTH &&
                (double)N * (double)(D * (int64_t)itemsize) >= stream_from;
    /* (a correctly rounded add: P's row hi, lo, bound and the result row) */
    f->per_thread = 4 * nf + (rq->add ? (rq->accurate ? 4
                                         : f->blocked ? f->nb
                                                      : 1) *
                                            D
                                      : (f->stream ? 2 * D : 0));
    size_t own = plan != NULL ? 0 : pe_plan_doubles(nf, B);
    /* float64 rows by the accurate writers when asked (not rows added to x) */
    f->c.cradd = rq->accurate && rq->add;
    f->c.dd = rq->accurate && (itemsize == 8 || rq->add);
    f->c.cr = itemsize != 8 && rq->accurate && !rq->add;
    f->c.scale = (f->c.dd || f->c.cr) && !rq->add ? rq->scale : 1.0;
    size_t nlows = f->c.dd && lows == NULL ? (size_t)(2 * (B / 2 + 1) * nf + B / 2 + 1) : 0;
    f->mem = (double *)malloc((own + nlows + (size_t)(f->per_thread * f->nt)) * sizeof(double));
    if (f->mem == NULL) {
        pe_fill_free(f);
        return FASTPE_ENOMEM;
    }
    f->scratch = f->mem + own + nlows;
    if (plan == NULL) {
        int err =
            pe_prepare(f->mem, sp, f->contiguous ? rq->offset : 0, f->contiguous ? S : B, f->nt);
        if (err != FASTPE_OK) {
            pe_fill_free(f);
            return err;
        }
        plan = f->mem;
    }
    f->c.sp = sp;
    f->c.rq = rq;
    f->c.fr = pe_freq_view((double *)plan, nf);
    f->c.nf = nf;
    f->c.B = B;
    f->c.Tm = plan + 4 * nf;
    f->c.Ts = f->c.Tm + (B / 2 + 1) * nf;
    if (f->c.dd)
        pe_table_lows(f, lows != NULL ? NULL : f->mem + own);
    f->c.ferr = f->c.cr ? pe_angle_err_rate(sp, f->c.fr) : 0.0;
    return FASTPE_OK;
}

double *pe_plan_lows(const pe_spec *sp, const double *plan) {
    int64_t nf = sp->nf, H = pe_block_rows(nf) / 2;
    double *lows = (double *)malloc((size_t)(2 * (H + 1) * nf) * sizeof(double));
    const double *Tm = plan + 4 * nf, *Ts = Tm + (H + 1) * nf;
    if (lows == NULL)
        return NULL;
    /* (as pe_table_lows evaluates each row it needs: the same bits) */
    for (int64_t a = 0; a < H + 1; a++)
        pe_table_row_dd((double)a, pe_freq_view((double *)plan, nf), nf, Tm + a * nf, Ts + a * nf,
                        lows + a * nf, lows + (H + 1 + a) * nf);
    return lows;
}

static void pe_fill_units(void *out, int kind, int64_t stride, pe_fill *f, int64_t u0, int64_t u1) {
    switch (kind) {
    case PE_KIND_F32:
        pe_drv_fill_units_f32((float *)out, stride, f, u0, u1);
        break;
    case PE_KIND_F64:
        pe_drv_fill_units_f64((double *)out, stride, f, u0, u1);
        break;
    case PE_KIND_F16:
        pe_drv_fill_units_f16((uint16_t *)out, stride, f, u0, u1);
        break;
    default:
        pe_drv_fill_units_bf16((uint16_t *)out, stride, f, u0, u1);
        break;
    }
}

int pe_fill_run(void *out, int kind, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                void *poll_ctx) {
    pe_fill f;
    int64_t seeded = INT64_MIN;
    size_t anchor_bytes = (size_t)(2 * sp->nf) * sizeof(double);
    int err = pe_fill_setup(&f, sp, rq, num_threads, plan, pe_itemsize(kind));
    if (err != FASTPE_OK)
        return err;
    if (f.c.dd)
        ac = NULL; /* (its anchors are in double: the accurate rows evaluate their own) */
    /* fractional positions are evaluated directly: no anchors to share */
    /* (the anchor cache with trylock, as in pe_fill_one_f64: the same bits) */
    if (ac != NULL && rq->pos_f == NULL && pe_mutex_trylock(&ac->lock)) {
        if (ac->centre != INT64_MIN) {
            memcpy(f.scratch, ac->data, anchor_bytes);
            f.seed = seeded = ac->centre;
        }
        pe_mutex_unlock(&ac->lock);
    }
    int64_t step = f.units;
    if (poll != NULL) {
        int64_t per_unit = sp->d * (f.blocked ? (f.nb < rq->S ? f.nb : rq->S) : 1);
        int64_t chunk = pe_chunk_entries();
        step = per_unit < chunk ? chunk / per_unit : 1;
    }
    int64_t u0 = 0;
    while (u0 < f.units) {
        int64_t u1 = step < f.units - u0 ? u0 + step : f.units;
        pe_fill_units(out, kind, row_stride, &f, u0, u1);
        f.seed = f.last; /* thread 0's scratch carries over to the next chunk */
        u0 = u1;
        if (u0 < f.units && poll != NULL && poll(poll_ctx) != 0) {
            err = PE_EINTR;
            break;
        }
    }
    if (err == FASTPE_OK && ac != NULL && f.last != INT64_MIN && f.last != seeded &&
        pe_mutex_trylock(&ac->lock)) {
        if (ac->data == NULL)
            ac->data = (double *)malloc(anchor_bytes);
        if (ac->data != NULL) {
            memcpy(ac->data, f.scratch, anchor_bytes);
            ac->centre = f.last;
        }
        pe_mutex_unlock(&ac->lock);
    }
    pe_fill_free(&f);
    return err;
}

void pe_anchor_init(pe_anchor_cache *ac) {
    pe_mutex_init(&ac->lock);
    ac->data = NULL;
    ac->centre = INT64_MIN;
}

void pe_anchor_free(pe_anchor_cache *ac) {
    free(ac->data);
    ac->data = NULL;
    pe_mutex_destroy(&ac->lock);
}

void pe_init_rows(pe_rows *rq, int64_t nseq, int64_t S, int has_zero, int64_t zero) {
    memset(rq, 0, sizeof(pe_rows));
    rq->nseq = nseq;
    rq->S = S;
    rq->scale = 1.0;
    rq->has_zero_pos = has_zero;
    rq->zero_pos = zero;
}

/* The largest |position| whose angles the reduction keeps exact (for a spec
 * whose frequencies are finite). */
double pe_max_position(const pe_spec *sp) {
    double limit = PE_MAX_TURNS / pe_spec_max_turns(sp);
    return limit < PE_MAX_POSITION ? limit : PE_MAX_POSITION;
}

/* A tiny base (e.g. a subnormal) makes base^(-2i/d) overflow: even position 0
 * would then give 0 * inf = NaN.  Such specs are refused, not filled. */
int pe_frequencies_finite(const pe_spec *sp) {
    return pe_spec_max_turns(sp) < 1e290; /* 2^27 * f must not overflow in the Veltkamp split */
}

/* Bytes a fill allocates beside its output, streaming row buffers and a plan
 * of its own counted; in floating point (no overflow for absurd widths). */
double pe_scratch_bound(const pe_spec *sp, int64_t rows, int num_threads, int add) {
    int nt = pe_threads(num_threads, rows, sp->d, -1);
    double nf = (double)sp->nf, B = (double)pe_block_rows(sp->nf);
    /* (an add: its block of rows, at least the 4 rows of a correctly rounded one) */
    double nb = add ? (double)pe_add_block_rows(sp->d) : 2.0;
    double per_thread = 4 * nf + (add && nb < 4.0 ? 4.0 : nb) * (double)sp->d;
    double plan = 4 * nf + (B + 2) * nf + 2 * (SUB + B / 2 / SUB + 1) * nf + B;
    /* a blocked add's lists: a start per sequence and at most one block per row */
    double lists = add ? 5.0 * (double)rows + 1 : 0.0;
    return (per_thread * nt + plan + lists) * 8.0;
}
