# Included by kernel.pyx: the C API -- the Cython API's forwarders to the library
# (lib/src/api.c, spec.c: the entry points, their checks, the plan cache of C
# callers, the compiled specs), the spec constructors through Python, the RoPE
# handles -- and the capsule that publishes them (include/fastpe.h).

cdef inline int _fill_rows(anyreal *out, int64_t row_stride, const pe_spec *sp,
                           const pe_rows *rq, int num_threads, const double *plan) noexcept nogil:
    """A whole fill in one go (arguments validated; plan: this spec's, or NULL)."""
    return pe_fill_run(out, _kind_of(out), row_stride, sp, rq, num_threads, plan, NULL, NULL,
                       NULL)


def _c_plan_cache():
    """(nf, w0, base, denom, refs) of the C API's cached plans (for tests)."""
    cdef double snap[5 * 16]
    cdef int i, n = pe_plan_cache_snapshot(snap, 16)
    return [(int(snap[5 * i]), snap[5 * i + 1], snap[5 * i + 2], snap[5 * i + 3],
             int(snap[5 * i + 4])) for i in range(n)]


# The Cython API (kernel.pxd) of the Vaswani entry points: the library's functions.

cdef int fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f32(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f64(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f16(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                   double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_bf16(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f32(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f64(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int add_f16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                 int64_t row_stride, double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model,
                  int64_t row_stride, double base, int64_t offset, double scale, int layout,
                  int num_threads) noexcept nogil:
    return fastpe_add_bf16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                           num_threads)


cdef int fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return fastpe_fill_positions_f32(out, n, d_model, row_stride, positions, base, layout,
                                     num_threads)


cdef int fill_positions_f64(double *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return fastpe_fill_positions_f64(out, n, d_model, row_stride, positions, base, layout,
                                     num_threads)


cdef int add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return fastpe_add_positions_f32(x, n, d_model, row_stride, positions, base, scale, layout,
                                    num_threads)


cdef int add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return fastpe_add_positions_f64(x, n, d_model, row_stride, positions, base, scale, layout,
                                    num_threads)


# ---------------------------------------------------------------------------
# ABI 1.2: compiled specs, every convention from C
# ---------------------------------------------------------------------------

# The handle is the library's (lib/src/pe_lib.h: struct fastpe_spec); kernel.pxd
# declares it opaque.  The constructors here go through the Python API, so that
# their errors are its exceptions; everything after construction is the library's.
cdef extern from "pe_lib.h" nogil:
    fastpe_spec *pe_spec_handle_new(const pe_spec *sp, int has_zero, int64_t zero,
                                    double max_position)
    void fastpe_spec_free(fastpe_spec *h)
    int64_t fastpe_spec_d_model(const fastpe_spec *h)
    int fastpe_spec_fill_f32(const fastpe_spec *, float *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_f64(const fastpe_spec *, double *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_f16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_bf16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t, int)
    int fastpe_spec_fill_positions_f32(const fastpe_spec *, float *, int64_t, int64_t,
                                       const double *, int)
    int fastpe_spec_fill_positions_f64(const fastpe_spec *, double *, int64_t, int64_t,
                                       const double *, int)
    int fastpe_spec_add_f32(const fastpe_spec *, float *, int64_t, int64_t, int64_t, int64_t,
                            double, int)
    int fastpe_spec_add_f64(const fastpe_spec *, double *, int64_t, int64_t, int64_t, int64_t,
                            double, int)
    int fastpe_spec_add_f16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t,
                            int64_t, double, int)
    int fastpe_spec_add_bf16(const fastpe_spec *, uint16_t *, int64_t, int64_t, int64_t,
                             int64_t, double, int)


cdef fastpe_spec *spec_new(object convention, int64_t d_model) except NULL:
    """A spec for a convention name or a fastpe.Convention (with the GIL)."""
    from fastpe import _api
    from fastpe._validate import as_int
    cdef Encoder enc = _api._encoder(convention, 10000.0, "interleaved",
                                     as_int(d_model, "d_model", minimum=1))
    cdef fastpe_spec *h = pe_spec_handle_new(&enc.sp, enc.has_zero, enc.zero, enc.max_position)
    if h == NULL:
        raise MemoryError("could not allocate a fastpe spec")
    return h


cdef fastpe_spec *spec_from_knobs(int64_t d_model, double base, const char *denominator,
                                  double shift, double position_scale, const char *layout,
                                  const char *odd, int has_padding_idx,
                                  int64_t padding_idx) except NULL:
    """A spec from the knobs of fastpe.Convention (with the GIL)."""
    from fastpe._conventions import Convention
    if denominator == NULL or layout == NULL or odd == NULL:
        raise TypeError("denominator, layout and odd must not be NULL")
    conv = Convention(base=base, denominator=denominator.decode(), shift=shift,
                      position_scale=position_scale, layout=layout.decode(), odd=odd.decode(),
                      padding_idx=padding_idx if has_padding_idx else None)
    return spec_new(conv, d_model)


# The Cython API (kernel.pxd) of the compiled specs: the library's functions.

cdef void spec_free(fastpe_spec *h) noexcept nogil:
    fastpe_spec_free(h)


cdef int64_t spec_d_model(const fastpe_spec *h) noexcept nogil:
    return fastpe_spec_d_model(h)


cdef int spec_fill_f32(const fastpe_spec *h, float *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f32(h, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_f64(const fastpe_spec *h, double *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f64(h, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_positions_f32(const fastpe_spec *h, float *out, int64_t n, int64_t row_stride,
                                 const double *positions, int num_threads) noexcept nogil:
    return fastpe_spec_fill_positions_f32(h, out, n, row_stride, positions, num_threads)


cdef int spec_fill_positions_f64(const fastpe_spec *h, double *out, int64_t n,
                                 int64_t row_stride, const double *positions,
                                 int num_threads) noexcept nogil:
    return fastpe_spec_fill_positions_f64(h, out, n, row_stride, positions, num_threads)


cdef int spec_add_f32(const fastpe_spec *h, float *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f32(h, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int spec_add_f64(const fastpe_spec *h, double *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f64(h, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int spec_fill_f16(const fastpe_spec *h, uint16_t *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f16(h, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_bf16(const fastpe_spec *h, uint16_t *out, int64_t seq_len,
                        int64_t row_stride, int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_bf16(h, out, seq_len, row_stride, offset, num_threads)


cdef int spec_add_f16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f16(h, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int spec_add_bf16(const fastpe_spec *h, uint16_t *x, int64_t nseq, int64_t seq_len,
                       int64_t row_stride, int64_t offset, double scale,
                       int num_threads) noexcept nogil:
    return fastpe_spec_add_bf16(h, x, nseq, seq_len, row_stride, offset, scale, num_threads)


# ---------------------------------------------------------------------------
# ABI 1.3: RoPE, the cos/sin cache and the rotation in place
# ---------------------------------------------------------------------------

cdef extern from *:
    """
    /* The opaque fastpe_rope of fastpe.h: a RoPE encoding ([sin | cos] of nf
       frequencies) with its own copies of the frequencies and of the plan the
       Python side's encoding cache prepared for them. */
    struct fastpe_rope {
        pe_spec sp;          /* sp.wlist == w */
        double *w;
        double *plan;        /* NULL: prepared per call (plans beyond PLAN_MAX_BYTES) */
        double attention;
        double max_position;
    };
    """
    ctypedef struct pe_rope_handle "struct fastpe_rope":
        pe_spec sp
        double *w
        double *plan
        double attention
        double max_position


cdef fastpe_rope *_rope_handle(Encoder enc, double attention) except NULL:
    """A C handle of a RoPE encoding: its spec, frequencies and plan, copied."""
    cdef int64_t nf = enc.sp.nf
    cdef size_t nplan = _plan_doubles(nf, _block_rows(nf))
    cdef pe_rope_handle *h = <pe_rope_handle *>calloc(1, sizeof(pe_rope_handle))
    if h == NULL:
        raise MemoryError("could not allocate a fastpe RoPE handle")
    h.sp = enc.sp
    h.w = <double *>malloc(nf * sizeof(double))
    if enc.pmem != NULL:
        h.plan = <double *>malloc(nplan * sizeof(double))
    if h.w == NULL or (enc.pmem != NULL and h.plan == NULL):
        rope_free(<fastpe_rope *>h)
        raise MemoryError("could not allocate a fastpe RoPE handle")
    memcpy(h.w, enc.sp.wlist, nf * sizeof(double))
    h.sp.wlist = h.w
    if enc.pmem != NULL:
        memcpy(h.plan, enc.pmem, nplan * sizeof(double))
    h.attention = attention
    h.max_position = enc.max_position
    return <fastpe_rope *>h


cdef fastpe_rope *rope_new(object rope_parameters, int64_t head_dim,
                           int64_t max_position_embeddings, int64_t seq_len,
                           const char *precision) except NULL:
    """fastpe.rope_frequencies' rule as a handle (with the GIL); 0 / -1 / NULL for
    max_position_embeddings / seq_len / precision: not given."""
    from fastpe import _rope
    w, attention = _rope.rope_frequencies(
        head_dim, rope_parameters,
        max_position_embeddings=max_position_embeddings if max_position_embeddings > 0 else None,
        seq_len=seq_len if seq_len >= 0 else None,
        precision="float32" if precision == NULL else precision.decode())
    return _rope_handle(_rope._encoder(w), attention)


cdef fastpe_rope *rope_from_frequencies(const double *inv_freq, int64_t nf,
                                        double attention_factor) except NULL:
    """A handle for a model's own inv_freq (nf entries) and attention factor (with
    the GIL)."""
    from fastpe import _rope
    from fastpe._validate import as_base, as_int
    if inv_freq == NULL:
        raise TypeError("inv_freq must not be NULL")
    as_int(nf, "nf", minimum=1, maximum=2**31)
    w = _rope._as_frequencies(_np.array(<const double[:nf]>inv_freq))
    return _rope_handle(_rope._encoder(w), as_base(attention_factor, "attention_factor"))


cdef void rope_free(fastpe_rope *h) noexcept nogil:
    cdef pe_rope_handle *p = <pe_rope_handle *>h
    if p != NULL:
        free(p.w)
        free(p.plan)
        free(p)


cdef int64_t rope_rotary_dim(const fastpe_rope *h) noexcept nogil:
    return 2 * (<const pe_rope_handle *>h).sp.nf if h != NULL else -1


cdef int _rope_positions(const pe_rope_handle *h, pe_rows *rq, int64_t nseq, int64_t S,
                         const int64_t *positions, int64_t offset) noexcept nogil:
    """rq for the angle rows of nseq x S tokens (positions[b*S + s], or offset + s
    for every sequence when positions is NULL), their range checked."""
    cdef int64_t i
    if positions == NULL:
        if _extent(offset, S) > h.max_position:
            return FASTPE_ERANGE
        nseq = 1
    else:
        for i in range(nseq * S):
            if fabs(<double>positions[i]) > h.max_position:
                return FASTPE_ERANGE
    _init_rows(rq, nseq, S, False, 0)
    rq.offset = offset if positions == NULL else 0
    rq.pos_i = positions
    rq.psb = S
    rq.pss = 1
    rq.fresh = 1
    return FASTPE_OK


cdef inline char _kind_of(anyreal *x) noexcept nogil:
    """The entry kind of a pointer's type (as _rope_view names them)."""
    if anyreal is float:
        return c'f'
    elif anyreal is double:
        return c'd'
    elif anyreal is pe_f16:
        return c'e'
    else:
        return c'b'


cdef inline void _rope_cache_row(anyreal *cos, anyreal *sin, int64_t r, int64_t row_stride,
                                 int64_t nf, int layout, const anyreal *rt, const double *dt,
                                 double attention) noexcept nogil:
    """Row r of the cos and sin caches from row r of the [sin | cos] table: rt in
    the output type, or dt in float64 with the attention factor still to apply.
    Frequency i goes to two places of a row: i and nf + i (half-split), or 2i and
    2i + 1 (interleaved)."""
    cdef int64_t i, j
    cdef int64_t step = 1 if layout == FASTPE_LAYOUT_SPLIT else 2
    cdef int64_t dup = nf if layout == FASTPE_LAYOUT_SPLIT else 1
    cdef anyreal *c = cos + r * row_stride
    cdef anyreal *s = sin + r * row_stride
    cdef anyreal vs, vc
    if rt != NULL:
        rt += r * 2 * nf
        for i in range(nf):
            j = i * step
            vs = rt[i]
            vc = rt[nf + i]
            s[j] = vs
            s[j + dup] = vs
            c[j] = vc
            c[j + dup] = vc
    else:
        dt += r * 2 * nf
        for i in range(nf):
            j = i * step
            _store(s, j, dt[i] * attention)
            _store(c, j, dt[nf + i] * attention)
            s[j + dup] = s[j]
            c[j + dup] = c[j]


cdef bint _rows_meet(const char *a, const char *b, int64_t n, int64_t stride,
                     int64_t width) noexcept nogil:
    """Whether n rows of ``width`` bytes every ``stride`` bytes (stride >= width, or
    n == 1) from a and from b share a byte: decided exactly, so that the two
    halves of one buffer's rows (cos and sin side by side) are disjoint.  Row i of
    b meets row j of a iff |d + (i - j) stride| < width, d = b - a: at most two
    differences t = i - j in -(n-1) .. n-1 can qualify."""
    cdef int64_t d = <int64_t>(<uintptr_t>b - <uintptr_t>a)
    cdef int64_t t, t0, e
    if n <= 1 or stride == 0:
        return -width < d < width
    t0 = _floordiv(-width - d, stride) + 1      # the smallest t with d + t stride > -width
    for t in range(t0, t0 + 2):
        if -(n - 1) <= t <= n - 1:
            e = d + t * stride
            if -width < e < width:
                return True
    return False


cdef int _rope_cache(const pe_rope_handle *h, anyreal *cos, anyreal *sin, int64_t n,
                     int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                     int num_threads) noexcept nogil:
    cdef pe_rows rq
    cdef int64_t nf, W, r
    cdef anyreal *rt = NULL
    cdef double *dt = NULL
    cdef int err, nt
    if h == NULL:
        return FASTPE_ENULL
    if n < 0:
        return FASTPE_ESIZE
    if layout != FASTPE_LAYOUT_INTERLEAVED and layout != FASTPE_LAYOUT_SPLIT:
        return FASTPE_ELAYOUT
    if n == 0:
        return FASTPE_OK
    nf = h.sp.nf
    W = 2 * nf
    if cos == NULL or sin == NULL:
        return FASTPE_ENULL
    if row_stride < W and n > 1:
        return FASTPE_ESTRIDE
    if n > (INT64_MAX // 16) // W:
        return FASTPE_ESIZE
    if _rows_meet(<const char *>cos, <const char *>sin, n, row_stride * <int64_t>sizeof(anyreal),
                  W * <int64_t>sizeof(anyreal)):
        return FASTPE_EOVERLAP
    err = _rope_positions(h, &rq, 1, n, positions, offset)
    if err != FASTPE_OK:
        return err
    # as fastpe.rope_cache: each entry rounded once into the output type, from
    # float64 when the attention factor is still to be applied
    if h.attention == 1.0:
        rt = <anyreal *>malloc(<size_t>(n * W) * sizeof(anyreal))
        if rt == NULL:
            return FASTPE_ENOMEM
        err = _fill_rows(rt, W, &h.sp, &rq, num_threads, h.plan)
    else:
        dt = <double *>malloc(<size_t>(n * W) * sizeof(double))
        if dt == NULL:
            return FASTPE_ENOMEM
        err = _fill_rows(dt, W, &h.sp, &rq, num_threads, h.plan)
    if err == FASTPE_OK:
        # on as many threads as the fill: a thread's rows are still in its cache
        nt = _threads(num_threads, n, W)
        if nt == 1:
            for r in range(n):
                _rope_cache_row(cos, sin, r, row_stride, nf, layout, rt, dt, h.attention)
        else:
            for r in prange(n, num_threads=nt, schedule="static"):
                _rope_cache_row(cos, sin, r, row_stride, nf, layout, rt, dt, h.attention)
    free(rt)
    free(dt)
    return err


cdef int _rope_apply(const pe_rope_handle *h, anyreal *x, int64_t batch, int64_t seq, int64_t heads,
                     int64_t stride_batch, int64_t stride_seq, int64_t stride_head,
                     const int64_t *positions, int64_t offset, int layout,
                     int num_threads) noexcept nogil:
    cdef pe_rows rq
    cdef pe_rope_rows R
    cdef int64_t nf, W, span, i, j, nrows
    cdef int64_t n3[3]
    cdef int64_t st[3]
    cdef double *table
    cdef int err
    if h == NULL:
        return FASTPE_ENULL
    if batch < 0 or seq < 0 or heads < 0:
        return FASTPE_ESIZE
    if layout != FASTPE_LAYOUT_INTERLEAVED and layout != FASTPE_LAYOUT_SPLIT:
        return FASTPE_ELAYOUT
    if batch == 0 or seq == 0 or heads == 0:
        return FASTPE_OK
    if x == NULL:
        return FASTPE_ENULL
    nf = h.sp.nf
    W = 2 * nf
    if batch > (INT64_MAX // 16) // seq or batch * seq > (INT64_MAX // 16) // heads \
            or batch * seq > (INT64_MAX // 16) // W:
        return FASTPE_ESIZE
    # rotated in place: no two rows' rotated entries may share memory (each axis,
    # by |stride|, steps over everything the axes inside it span)
    n3[0], n3[1], n3[2] = batch, seq, heads
    st[0], st[1], st[2] = stride_batch, stride_seq, stride_head
    for i in range(3):
        st[i] = st[i] if st[i] >= 0 else -st[i]
    for i in range(3):              # sort by |stride| (three entries)
        for j in range(2 - i):
            if st[j] > st[j + 1]:
                st[j], st[j + 1] = st[j + 1], st[j]
                n3[j], n3[j + 1] = n3[j + 1], n3[j]
    span = W
    for i in range(3):
        if n3[i] > 1:
            if st[i] < span:
                return FASTPE_ESTRIDE
            span = st[i] * (n3[i] - 1) + span
    err = _rope_positions(h, &rq, batch, seq, positions, offset)
    if err != FASTPE_OK:
        return err
    table = <double *>malloc(<size_t>(rq.nseq * seq * W) * sizeof(double))
    if table == NULL:
        return FASTPE_ENOMEM
    err = _fill_rows(table, W, &h.sp, &rq, num_threads, h.plan)
    if err == FASTPE_OK:
        # rows in the order of their memory: (batch, heads, seq) when heads are the
        # outer axis, else (batch, seq, heads)
        R.base = <char *>x
        R.m = 3
        R.shape[0], R.strides[0] = batch, stride_batch * <int64_t>sizeof(anyreal)
        if (stride_head if stride_head >= 0 else -stride_head) > \
                (stride_seq if stride_seq >= 0 else -stride_seq):
            R.sa = 2
            R.shape[1], R.strides[1] = heads, stride_head * <int64_t>sizeof(anyreal)
        else:
            R.sa = 1
            R.shape[2], R.strides[2] = heads, stride_head * <int64_t>sizeof(anyreal)
        R.shape[R.sa], R.strides[R.sa] = seq, stride_seq * <int64_t>sizeof(anyreal)
        R.per_batch = rq.nseq > 1
        R.kind = _kind_of(x)
        R.half = layout == FASTPE_LAYOUT_SPLIT
        R.S = seq
        R.nf = nf
        R.attention = h.attention
        R.table = table
        nrows = batch * seq * heads
        _rotate_rows(&R, 0, nrows, _threads(num_threads, nrows, W))
    free(table)
    return err


cdef int rope_cache_f32(const fastpe_rope *h, float *cos, float *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return _rope_cache(<const pe_rope_handle *>h, cos, sin, n, row_stride, positions, offset,
                       layout, num_threads)


cdef int rope_cache_f64(const fastpe_rope *h, double *cos, double *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return _rope_cache(<const pe_rope_handle *>h, cos, sin, n, row_stride, positions, offset,
                       layout, num_threads)


cdef int rope_apply_f32(const fastpe_rope *h, float *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset,
                        int layout, int num_threads) noexcept nogil:
    return _rope_apply(<const pe_rope_handle *>h, x, batch, seq, heads, stride_batch, stride_seq,
                       stride_head, positions, offset, layout, num_threads)


cdef int rope_apply_f64(const fastpe_rope *h, double *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset,
                        int layout, int num_threads) noexcept nogil:
    return _rope_apply(<const pe_rope_handle *>h, x, batch, seq, heads, stride_batch, stride_seq,
                       stride_head, positions, offset, layout, num_threads)


# The 16-bit outputs (float16, bfloat16) as uint16_t bit patterns: each entry
# rounded once from the float64 result, bitwise the Python functions' dtype=np.float16
# / "bfloat16" (the same fills as their float32 twins, whose checks they share).

cdef int rope_cache_f16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return _rope_cache(<const pe_rope_handle *>h, <pe_f16 *>cos, <pe_f16 *>sin, n, row_stride,
                       positions, offset, layout, num_threads)


cdef int rope_cache_bf16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin, int64_t n,
                         int64_t row_stride, const int64_t *positions, int64_t offset,
                         int layout, int num_threads) noexcept nogil:
    return _rope_cache(<const pe_rope_handle *>h, <pe_bf16 *>cos, <pe_bf16 *>sin, n, row_stride,
                       positions, offset, layout, num_threads)


cdef int rope_apply_f16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset,
                        int layout, int num_threads) noexcept nogil:
    return _rope_apply(<const pe_rope_handle *>h, <pe_f16 *>x, batch, seq, heads, stride_batch,
                       stride_seq, stride_head, positions, offset, layout, num_threads)


cdef int rope_apply_bf16(const fastpe_rope *h, uint16_t *x, int64_t batch, int64_t seq,
                         int64_t heads, int64_t stride_batch, int64_t stride_seq,
                         int64_t stride_head, const int64_t *positions, int64_t offset,
                         int layout, int num_threads) noexcept nogil:
    return _rope_apply(<const pe_rope_handle *>h, <pe_bf16 *>x, batch, seq, heads, stride_batch,
                       stride_seq, stride_head, positions, offset, layout, num_threads)


# ---------------------------------------------------------------------------
# C API for other extensions: a capsule holding a versioned function table
# (see include/fastpe.h; reached from C through import_fastpe()).
# ---------------------------------------------------------------------------

from libc.stdint cimport uint32_t
from cpython.pycapsule cimport PyCapsule_New


cdef extern from *:
    """
    /* This module provides the table: fastpe.h must not redefine the codes
       and layouts that kernel.pxd already declares as an enum. */
    #define FASTPE_KERNEL_MODULE 1
    """


cdef extern from "include/fastpe.h":
    ctypedef int (*fastpe_fill_f32_fn)(float *, int64_t, int64_t, int64_t, double, int64_t,
                                       int, int) noexcept nogil
    ctypedef int (*fastpe_fill_f64_fn)(double *, int64_t, int64_t, int64_t, double, int64_t,
                                       int, int) noexcept nogil
    ctypedef int (*fastpe_add_f32_fn)(float *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_f64_fn)(double *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f32_fn)(float *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f64_fn)(double *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_positions_f32_fn)(float *, int64_t, int64_t, int64_t,
                                                const double *, double, double, int,
                                                int) noexcept nogil
    ctypedef int (*fastpe_add_positions_f64_fn)(double *, int64_t, int64_t, int64_t,
                                                const double *, double, double, int,
                                                int) noexcept nogil
    ctypedef fastpe_spec *(*fastpe_spec_new_fn)(object, int64_t) except NULL
    ctypedef fastpe_spec *(*fastpe_spec_from_knobs_fn)(int64_t, double, const char *, double,
                                                       double, const char *, const char *, int,
                                                       int64_t) except NULL
    ctypedef void (*fastpe_spec_free_fn)(fastpe_spec *) noexcept nogil
    ctypedef int64_t (*fastpe_spec_d_model_fn)(const fastpe_spec *) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f32_fn)(const fastpe_spec *, float *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f64_fn)(const fastpe_spec *, double *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_positions_f32_fn)(const fastpe_spec *, float *, int64_t,
                                                      int64_t, const double *, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_positions_f64_fn)(const fastpe_spec *, double *, int64_t,
                                                      int64_t, const double *, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f32_fn)(const fastpe_spec *, float *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f64_fn)(const fastpe_spec *, double *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef fastpe_rope *(*fastpe_rope_new_fn)(object, int64_t, int64_t, int64_t,
                                                const char *) except NULL
    ctypedef fastpe_rope *(*fastpe_rope_from_frequencies_fn)(const double *, int64_t,
                                                             double) except NULL
    ctypedef void (*fastpe_rope_free_fn)(fastpe_rope *) noexcept nogil
    ctypedef int64_t (*fastpe_rope_rotary_dim_fn)(const fastpe_rope *) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f32_fn)(const fastpe_rope *, float *, float *, int64_t,
                                             int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f64_fn)(const fastpe_rope *, double *, double *, int64_t,
                                             int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f32_fn)(const fastpe_rope *, float *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t,
                                             const int64_t *, int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f64_fn)(const fastpe_rope *, double *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t,
                                             const int64_t *, int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_f16_fn)(uint16_t *, int64_t, int64_t, int64_t, double, int64_t,
                                       int, int) noexcept nogil
    ctypedef int (*fastpe_fill_bf16_fn)(uint16_t *, int64_t, int64_t, int64_t, double,
                                        int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_add_f16_fn)(uint16_t *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_bf16_fn)(uint16_t *, int64_t, int64_t, int64_t, int64_t,
                                       double, int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_bf16_fn)(const fastpe_spec *, uint16_t *, int64_t,
                                             int64_t, int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_bf16_fn)(const fastpe_spec *, uint16_t *, int64_t,
                                            int64_t, int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f16_fn)(const fastpe_rope *, uint16_t *, uint16_t *,
                                             int64_t, int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_bf16_fn)(const fastpe_rope *, uint16_t *, uint16_t *,
                                              int64_t, int64_t, const int64_t *, int64_t, int,
                                              int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f16_fn)(const fastpe_rope *, uint16_t *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t,
                                             const int64_t *, int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_bf16_fn)(const fastpe_rope *, uint16_t *, int64_t,
                                              int64_t, int64_t, int64_t, int64_t, int64_t,
                                              const int64_t *, int64_t, int, int) noexcept nogil
    ctypedef struct fastpe_api_t:
        uint32_t abi_major
        uint32_t abi_minor
        size_t size
        fastpe_fill_f32_fn fill_f32
        fastpe_fill_f64_fn fill_f64
        fastpe_add_f32_fn add_f32
        fastpe_add_f64_fn add_f64
        fastpe_fill_positions_f32_fn fill_positions_f32
        fastpe_fill_positions_f64_fn fill_positions_f64
        fastpe_add_positions_f32_fn add_positions_f32
        fastpe_add_positions_f64_fn add_positions_f64
        fastpe_spec_new_fn spec_new
        fastpe_spec_from_knobs_fn spec_from_knobs
        fastpe_spec_free_fn spec_free
        fastpe_spec_d_model_fn spec_d_model
        fastpe_spec_fill_f32_fn spec_fill_f32
        fastpe_spec_fill_f64_fn spec_fill_f64
        fastpe_spec_fill_positions_f32_fn spec_fill_positions_f32
        fastpe_spec_fill_positions_f64_fn spec_fill_positions_f64
        fastpe_spec_add_f32_fn spec_add_f32
        fastpe_spec_add_f64_fn spec_add_f64
        fastpe_rope_new_fn rope_new
        fastpe_rope_from_frequencies_fn rope_from_frequencies
        fastpe_rope_free_fn rope_free
        fastpe_rope_rotary_dim_fn rope_rotary_dim
        fastpe_rope_cache_f32_fn rope_cache_f32
        fastpe_rope_cache_f64_fn rope_cache_f64
        fastpe_rope_apply_f32_fn rope_apply_f32
        fastpe_rope_apply_f64_fn rope_apply_f64
        fastpe_fill_f16_fn fill_f16
        fastpe_fill_bf16_fn fill_bf16
        fastpe_add_f16_fn add_f16
        fastpe_add_bf16_fn add_bf16
        fastpe_spec_fill_f16_fn spec_fill_f16
        fastpe_spec_fill_bf16_fn spec_fill_bf16
        fastpe_spec_add_f16_fn spec_add_f16
        fastpe_spec_add_bf16_fn spec_add_bf16
        fastpe_rope_cache_f16_fn rope_cache_f16
        fastpe_rope_cache_bf16_fn rope_cache_bf16
        fastpe_rope_apply_f16_fn rope_apply_f16
        fastpe_rope_apply_bf16_fn rope_apply_bf16
    const char *FASTPE_CAPSULE_NAME
    int FASTPE_ABI_MAJOR
    int FASTPE_ABI_MINOR


# Static storage: the capsule and every importer point at it for the process's
# lifetime (extension modules are never unloaded), so the capsule needs no destructor.
cdef fastpe_api_t _c_api_table
_c_api_table.abi_major = FASTPE_ABI_MAJOR
_c_api_table.abi_minor = FASTPE_ABI_MINOR
_c_api_table.size = sizeof(fastpe_api_t)
_c_api_table.fill_f32 = fastpe_fill_f32
_c_api_table.fill_f64 = fastpe_fill_f64
_c_api_table.add_f32 = fastpe_add_f32
_c_api_table.add_f64 = fastpe_add_f64
_c_api_table.fill_positions_f32 = fastpe_fill_positions_f32
_c_api_table.fill_positions_f64 = fastpe_fill_positions_f64
_c_api_table.add_positions_f32 = fastpe_add_positions_f32
_c_api_table.add_positions_f64 = fastpe_add_positions_f64
_c_api_table.spec_new = spec_new
_c_api_table.spec_from_knobs = spec_from_knobs
_c_api_table.spec_free = fastpe_spec_free
_c_api_table.spec_d_model = fastpe_spec_d_model
_c_api_table.spec_fill_f32 = fastpe_spec_fill_f32
_c_api_table.spec_fill_f64 = fastpe_spec_fill_f64
_c_api_table.spec_fill_positions_f32 = fastpe_spec_fill_positions_f32
_c_api_table.spec_fill_positions_f64 = fastpe_spec_fill_positions_f64
_c_api_table.spec_add_f32 = fastpe_spec_add_f32
_c_api_table.spec_add_f64 = fastpe_spec_add_f64
_c_api_table.rope_new = rope_new
_c_api_table.rope_from_frequencies = rope_from_frequencies
_c_api_table.rope_free = rope_free
_c_api_table.rope_rotary_dim = rope_rotary_dim
_c_api_table.rope_cache_f32 = rope_cache_f32
_c_api_table.rope_cache_f64 = rope_cache_f64
_c_api_table.rope_apply_f32 = rope_apply_f32
_c_api_table.rope_apply_f64 = rope_apply_f64
_c_api_table.fill_f16 = fastpe_fill_f16
_c_api_table.fill_bf16 = fastpe_fill_bf16
_c_api_table.add_f16 = fastpe_add_f16
_c_api_table.add_bf16 = fastpe_add_bf16
_c_api_table.spec_fill_f16 = fastpe_spec_fill_f16
_c_api_table.spec_fill_bf16 = fastpe_spec_fill_bf16
_c_api_table.spec_add_f16 = fastpe_spec_add_f16
_c_api_table.spec_add_bf16 = fastpe_spec_add_bf16
_c_api_table.rope_cache_f16 = rope_cache_f16
_c_api_table.rope_cache_bf16 = rope_cache_bf16
_c_api_table.rope_apply_f16 = rope_apply_f16
_c_api_table.rope_apply_bf16 = rope_apply_bf16


_C_API = PyCapsule_New(<void *>&_c_api_table, FASTPE_CAPSULE_NAME, NULL)

#: (major, minor) of the C-API table in ``_C_API`` (include/fastpe.h's ABI policy).
C_API_VERSION = (FASTPE_ABI_MAJOR, FASTPE_ABI_MINOR)


# The values kernel.pxd gives the codes and layouts, for the test that fastpe.h
# (a separate definition, for C) agrees with them.
_C_CONSTANTS = {
    "FASTPE_LAYOUT_INTERLEAVED": FASTPE_LAYOUT_INTERLEAVED,
    "FASTPE_LAYOUT_SPLIT": FASTPE_LAYOUT_SPLIT,
    "FASTPE_OK": FASTPE_OK,
    "FASTPE_ENULL": FASTPE_ENULL,
    "FASTPE_ESIZE": FASTPE_ESIZE,
    "FASTPE_ESTRIDE": FASTPE_ESTRIDE,
    "FASTPE_EBASE": FASTPE_EBASE,
    "FASTPE_ELAYOUT": FASTPE_ELAYOUT,
    "FASTPE_ERANGE": FASTPE_ERANGE,
    "FASTPE_ENOMEM": FASTPE_ENOMEM,
    "FASTPE_ESCALE": FASTPE_ESCALE,
    "FASTPE_EOVERLAP": FASTPE_EOVERLAP,
}
