# Included by kernel.pyx: RoPE, the rotation of query/key rows in place, one pass.
#
# A rotation has two steps: the angles of each token (sin | cos of nf frequencies,
# one row of the table, filled by the kernel like any encoding) and then every row
# of the tensor rotated by its token's row, the threads splitting the rows.

# The rows to rotate and their rotation are the library's (lib/src/rope_rotate.c).
cdef extern from "pe_lib.h" nogil:
    int ROPE_MAX_AXES "PE_ROPE_MAX_AXES"
    ctypedef struct pe_rope_rows:
        char *base
        int m
        int sa
        int per_batch
        int kind
        int half
        int64_t S
        int64_t nf
        double attention
        const double *table
        int64_t shape[64]
        int64_t strides[64]
    int pe_rope_run(pe_rope_rows **R, int nR, const pe_spec *sp, const pe_rows *rq,
                    int num_threads, const double *plan, pe_anchor_cache *ac, pe_poll_fn poll,
                    void *poll_ctx)
    int pe_rope_run_cr(pe_rope_rows **R, int nR, const pe_spec *sp, const pe_rows *rq,
                       int num_threads, pe_poll_fn poll, void *poll_ctx)
    int pe_rope_set_blocked(int on)
    int pe_rope_set_wide(int on)
    int64_t pe_rope_nrows(const pe_rope_rows *R)


def _set_rope_blocked(bint on):
    """Walk the rows in blocks of positions (True, the default) or in the C order
    of their axes, one pass per head (False): the same bits; for tests.  Returns
    the old setting."""
    return bool(pe_rope_set_blocked(on))


def _set_rope_wide(bint on):
    """Rotate rows with the AVX-512/AVX2 loops where the CPU has them (True, the
    default) or the portable ones (False): the same bits; for tests.  Returns the
    old setting."""
    return bool(pe_rope_set_wide(on))


cdef inline void _store(anyreal *x, int64_t j, double v) noexcept nogil:
    # one rounding from the float64 result, whatever the type
    if anyreal is pe_f16:
        x[j].bits = pe_f64_to_f16(v)
    elif anyreal is pe_bf16:
        x[j].bits = pe_f64_to_bf16(v)
    else:
        x[j] = <anyreal>v


cdef int _rope_rows_of(pe_rope_rows *R, const Py_buffer *view, char kind, int sa, bint half,
                       int64_t nf, double attention) except -1:
    """R for the rows of ``view`` (all but its last axis); their number."""
    cdef int j
    cdef int64_t nrows = 1
    if view.ndim > ROPE_MAX_AXES or view.ndim < 2:
        raise ValueError("the rotated array must have 2 to 64 axes")
    R.base = <char *>view.buf
    R.m = view.ndim - 1
    R.sa = sa
    R.kind = kind
    R.half = half
    R.nf = nf
    R.attention = attention
    R.S = view.shape[sa]
    for j in range(R.m):
        R.shape[j] = view.shape[j]
        R.strides[j] = view.strides[j]
        nrows *= view.shape[j]
    return nrows > 0


#: rotations of at most this many entries (q and k) run with the GIL held
cdef enum:
    _ROPE_HOLD_GIL = 32768


cdef object _rope_run(const Py_buffer *view, char kind, const Py_buffer *kview, char kkind,
                      const pe_spec *sp, const double *pmem, pe_anchor_cache *ac, int sa,
                      int64_t offset, offsets, positions, bint half, double attention,
                      int num_threads, bint accurate=False):
    """Rotate the rows of the held buffer ``view`` of entries ``kind`` (see _rope_view;
    checked by the caller: writable, aligned, last axis contiguous holding 2 nf entries or more,
    rows not overlapping; ``sa`` an axis before the last), and those of ``kview`` (k: entries
    ``kkind``, the same batch and sequence axes) unless it is NULL, in one pass by one table.
    Token (b, s) -- b the
    index on axis 0 unless the sequence axis is 0, s the index on axis ``sa`` --
    is at position ``(offsets[b] if offsets is not None else offset) +
    (positions[b or 0, s] if positions is not None else s)``: ``offsets`` a 1-D
    int64 array of one entry per batch index, ``positions`` a 2-D int64 array of
    1 or batch rows; their range is the caller's to check.  ``accurate``: each entry
    the exact rotation of its inputs, rounded once (pe_rope_run_cr)."""
    cdef pe_rope_rows R, RK
    cdef pe_rope_rows *Rs[2]
    cdef pe_rows rq
    cdef Py_buffer pview, oview
    cdef bint have_p = False, have_o = False
    cdef int64_t nf = sp.nf, batch, nrows = 0
    cdef int nR = 0, err
    if _rope_rows_of(&R, view, kind, sa, half, nf, attention):
        Rs[nR] = &R
        nR += 1
        nrows += pe_rope_nrows(&R)
    if kview != NULL:   # (its axes agree with q's: pe_rope_check_arrays)
        if _rope_rows_of(&RK, kview, kkind, sa, half, nf, attention):
            Rs[nR] = &RK
            nR += 1
            nrows += pe_rope_nrows(&RK)
    batch = view.shape[0] if sa != 0 else 1
    _init_rows(&rq, 1, R.S, False, 0)
    rq.offset = offset
    rq.fresh = 1            # the table is new memory: no streaming stores
    try:
        if offsets is not None:
            PyObject_GetBuffer(offsets, &oview, PyBUF_STRIDES | PyBUF_FORMAT)
            have_o = True
            if oview.ndim != 1 or oview.shape[0] != batch or oview.itemsize != 8 \
                    or _native_code(oview.format) not in (c'l', c'q'):
                raise ValueError("offsets must be a 1-D int64 array, one per batch index")
            rq.offs = <const int64_t *>oview.buf
            rq.offs_stride = oview.strides[0] // 8
            rq.nseq = batch
        if positions is not None:
            PyObject_GetBuffer(positions, &pview, PyBUF_STRIDES | PyBUF_FORMAT)
            have_p = True
            if pview.ndim != 2 or pview.shape[1] != R.S or pview.itemsize != 8 \
                    or pview.shape[0] not in (1, batch) \
                    or _native_code(pview.format) not in (c'l', c'q', c'd'):
                raise ValueError("positions must be a 2-D int64/float64 array of 1 or batch rows")
            if _native_code(pview.format) == c'd':   # fractional: with offset 0, no offsets
                if offsets is not None or offset != 0:
                    raise ValueError("float positions cannot be combined with offsets")
                rq.pos_f = <const double *>pview.buf
            else:
                rq.pos_i = <const int64_t *>pview.buf
            rq.psb = pview.strides[0] // 8
            rq.pss = pview.strides[1] // 8
            if pview.shape[0] > 1:
                rq.nseq = batch
        R.per_batch = RK.per_batch = rq.nseq > 1
        if nR == 0:
            return
        # one library call for q and k: the angle table, then both rotated by it, in
        # chunks checking for Ctrl-C between them, as a long fill does
        if accurate:
            with nogil:
                err = pe_rope_run_cr(Rs, nR, sp, &rq, num_threads, _poll_signals, NULL)
        elif nrows * 2 * nf <= _ROPE_HOLD_GIL:
            # a decoding step's few microseconds: releasing and taking back the GIL
            # would cost a tenth of them
            err = pe_rope_run(Rs, nR, sp, &rq, num_threads, pmem, ac, _poll_signals, NULL)
        else:
            with nogil:
                err = pe_rope_run(Rs, nR, sp, &rq, num_threads, pmem, ac, _poll_signals, NULL)
        if err == PE_EINTR:
            _raise_pending()
        if err != FASTPE_OK:
            _raise_for(err)
    finally:
        if have_o:
            PyBuffer_Release(&oview)
        if have_p:
            PyBuffer_Release(&pview)


cdef char _rope_view(x, Py_buffer *view, int64_t width, bint bfloat16, str name) except 0:
    """Hold x's buffer: writable, aligned, its last axis contiguous and at least
    ``width`` wide, of float32, float64, float16 or (``bfloat16``: uint16 bits)
    bfloat16 entries.  Their kind ('f', 'd', 'e', 'b'); any other buffer is
    refused naming x as ``name`` (q's and k's one message), nothing held."""
    PyObject_GetBuffer(x, view, PyBUF_STRIDES | PyBUF_FORMAT)   # (read-only: not an error)
    cdef char code = _native_code(view.format)
    if code == c'H' and bfloat16:
        code = c'b'
    elif bfloat16 or (code != c'f' and code != c'd' and code != c'e'):
        code = 0
    if code == 0 or view.readonly or view.ndim < 2 \
            or (<size_t>view.buf) % view.itemsize != 0 \
            or view.shape[view.ndim - 1] < width \
            or (view.shape[view.ndim - 1] > 1 and view.strides[view.ndim - 1] != view.itemsize):
        PyBuffer_Release(view)
        raise ValueError(f"{name} must be a writable, aligned float16/bfloat16/float32/float64 "
                         "buffer whose last axis is contiguous and holds the rotated pairs")
    return code


def rope_rotate(x, plan, int seq_axis, int64_t offset, offsets, positions, bint half,
                double attention, int num_threads, bint bfloat16=False, k=None,
                bint k_bfloat16=False, bint accurate=False):
    """Rotate the rows of ``x`` in place by the angles of ``plan`` at each token's
    position, and those of ``k`` (if not None; the same batch and sequence axes) by
    the same angles in the same pass; ``bfloat16``, ``k_bfloat16``: x, k hold
    bfloat16 entries as uint16 bits.  ``plan`` is a RopePlan (the library's plan of
    nf frequencies; the positions from ``offset``, ``offsets`` or ``positions``, see
    _rope_run; ``accurate``: correctly rounded) or a RopeAxes (``positions`` a
    C-contiguous (1 or batch, seq, n_axes) array, see _rope_run_axes).  The buffer
    checks are made here; the range of the positions, that rows do not overlap, and
    the shapes of offsets and positions against q are the caller's."""
    cdef RopePlan enc = None
    cdef RopeAxes axes = None
    cdef int64_t nf
    if isinstance(plan, RopePlan):
        enc = plan
        nf = enc.spp.nf
    elif isinstance(plan, RopeAxes):
        axes = plan
        nf = axes.pl.nf
        # (a multi-axis token's angles come from its row of positions alone, by the
        # default rounding)
        if offset != 0 or offsets is not None or accurate:
            raise ValueError("a RopeAxes plan takes no offset, offsets or accurate")
    else:
        raise TypeError(f"plan must be a RopePlan or a RopeAxes, got {type(plan).__name__}")
    cdef Py_buffer view, kview
    cdef char kind = _rope_view(x, &view, 2 * nf, bfloat16, "x"), kkind = 0
    try:
        if not 0 <= seq_axis < view.ndim - 1:
            raise ValueError("seq_axis must be an axis of x before its last")
        if k is not None:
            kkind = _rope_view(k, &kview, 2 * nf, k_bfloat16, "k")
        try:
            if axes is None:
                _rope_run(&view, kind, &kview if kkind else NULL, kkind, enc.spp, enc.pmem,
                          enc.acp, seq_axis, offset, offsets, positions, half, attention,
                          num_threads, accurate)
            else:
                _rope_run_axes(&view, kind, &kview if kkind else NULL, kkind, axes.pl,
                               seq_axis, positions, half, attention, num_threads)
        finally:
            if kkind:
                PyBuffer_Release(&kview)
    finally:
        PyBuffer_Release(&view)
