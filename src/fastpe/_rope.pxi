# Included by kernel.pyx: RoPE, the rotation of query/key rows in place, one pass.
#
# A rotation has two steps: the angles of each token (sin | cos of nf frequencies,
# one row of the table, filled by the kernel like any encoding) and then every row
# of the tensor rotated by its token's row, the threads splitting the rows.

# The rows to rotate and their rotation are the library's (lib/src/rope.c).
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
    int pe_rope_set_blocked(int on)
    int pe_rope_set_wide(int on)


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


cdef inline int64_t _rope_nrows(const pe_rope_rows *R) noexcept nogil:
    cdef int64_t n = 1
    cdef int j
    for j in range(R.m):
        n *= R.shape[j]
    return n


cdef object _rope_run(const Py_buffer *view, char kind, const Py_buffer *kview, char kkind,
                      Encoder enc, int sa, int64_t offset, offsets, positions, bint half,
                      double attention, int num_threads):
    """Rotate the rows of the held buffer ``view`` of entries ``kind`` (see _rope_view;
    checked by the caller: writable, aligned, last axis contiguous holding 2 nf entries or more,
    rows not overlapping; ``sa`` an axis before the last), and those of ``kview`` (k: entries
    ``kkind``, the same batch and sequence axes) unless it is NULL, in one pass by one table.
    Token (b, s) -- b the
    index on axis 0 unless the sequence axis is 0, s the index on axis ``sa`` --
    is at position ``(offsets[b] if offsets is not None else offset) +
    (positions[b or 0, s] if positions is not None else s)``: ``offsets`` a 1-D
    int64 array of one entry per batch index, ``positions`` a 2-D int64 array of
    1 or batch rows; their range is the caller's to check."""
    cdef pe_rope_rows R, RK
    cdef pe_rope_rows *Rs[2]
    cdef pe_rows rq
    cdef Py_buffer pview, oview
    cdef bint have_p = False, have_o = False
    cdef int64_t nf = enc.sp.nf, batch, nrows = 0
    cdef int nR = 0, err
    if _rope_rows_of(&R, view, kind, sa, half, nf, attention):
        Rs[nR] = &R
        nR += 1
        nrows += _rope_nrows(&R)
    if kview != NULL:
        if kview.ndim != view.ndim or kview.shape[sa] != view.shape[sa] \
                or kview.shape[0] != view.shape[0]:
            raise ValueError("q and k must agree on the batch and sequence axes")
        if _rope_rows_of(&RK, kview, kkind, sa, half, nf, attention):
            Rs[nR] = &RK
            nR += 1
            nrows += _rope_nrows(&RK)
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
        if nrows * 2 * nf <= _ROPE_HOLD_GIL:
            # a decoding step's few microseconds: releasing and taking back the GIL
            # would cost a tenth of them
            err = pe_rope_run(Rs, nR, &enc.sp, &rq, num_threads, enc.pmem, &enc.ac,
                              _poll_signals, NULL)
        else:
            with nogil:
                err = pe_rope_run(Rs, nR, &enc.sp, &rq, num_threads, enc.pmem, &enc.ac,
                                  _poll_signals, NULL)
        if err == PE_EINTR:
            _raise_pending()
        if err != FASTPE_OK:
            _raise_for(err)
    finally:
        if have_o:
            PyBuffer_Release(&oview)
        if have_p:
            PyBuffer_Release(&pview)


cdef char _rope_view(x, Py_buffer *view, int64_t width, bint bfloat16) except -1:
    """Hold x's buffer: writable, aligned, its last axis contiguous and at least
    ``width`` wide, of float32, float64, float16 or (``bfloat16``: uint16 bits)
    bfloat16 entries.  Their kind ('f', 'd', 'e', 'b'), or 0 (nothing held)."""
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
        return 0
    return code


def rope_rotate(x, Encoder enc, int seq_axis, int64_t offset, offsets, positions, bint half,
                double attention, int num_threads, bint bfloat16=False, k=None,
                bint k_bfloat16=False):
    """Rotate the rows of ``x`` in place by the angles of ``enc`` (a RoPE encoding:
    [sin | cos] of nf frequencies) at each token's position (see _rope_run), and
    those of ``k`` (if not None; the same batch and sequence axes) by the same
    table in the same pass; ``bfloat16``, ``k_bfloat16``: x, k hold bfloat16
    entries as uint16 bits.  The buffer checks are made here; the range of the
    positions, that rows do not overlap, and the shapes of offsets and positions
    against q are the caller's."""
    cdef Py_buffer view, kview
    cdef char kind = _rope_view(x, &view, 2 * enc.sp.nf, bfloat16), kkind = 0
    if kind == 0:
        raise ValueError("x must be a writable, aligned float16/bfloat16/float32/float64 "
                         "buffer whose last axis is contiguous and holds the rotated pairs")
    try:
        if not 0 <= seq_axis < view.ndim - 1:
            raise ValueError("seq_axis must be an axis of x before its last")
        if k is not None:
            kkind = _rope_view(k, &kview, 2 * enc.sp.nf, k_bfloat16)
            if kkind == 0:
                raise ValueError("k must be a writable, aligned float16/bfloat16/float32/"
                                 "float64 buffer whose last axis is contiguous and holds the "
                                 "rotated pairs")
        try:
            _rope_run(&view, kind, &kview if kkind else NULL, kkind, enc, seq_axis, offset,
                      offsets, positions, half, attention, num_threads)
        finally:
            if kkind:
                PyBuffer_Release(&kview)
    finally:
        PyBuffer_Release(&view)


# ---------------------------------------------------------------------------
# Multi-axis positions: each frequency follows one coordinate of its token
# ---------------------------------------------------------------------------

cdef extern from "pe_lib.h" nogil:
    ctypedef struct pe_rope_axis:
        const pe_spec *sp
        const pe_spec *wide
        const double *plan
        pe_anchor_cache *ac
        pe_rows rq
        const int64_t *cols
    int pe_rope_table_axes(void *table, int kind, int64_t nf, int64_t ntab,
                           const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                           void *poll_ctx)
    int pe_rope_run_axes(pe_rope_rows **R, int nR, int64_t nf, int64_t ntab,
                         const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                         void *poll_ctx)


cdef class RopeAxes:
    """A multi-axis RoPE compiled for the kernel: for each axis with frequencies,
    the Encoder of its own frequencies (in column order) and the table columns
    they go to.  Immutable once built, shared between threads."""
    cdef readonly int n_axes
    cdef readonly int64_t nf
    cdef readonly tuple encoders    # one per axis: an Encoder, or None (no frequencies)
    cdef readonly tuple columns     # one per axis: a C-contiguous int64 array
    cdef pe_rope_axis ax[64]
    cdef pe_spec wide[64]           # ax[i].wide: the spec writing into the table's columns
    cdef int nax                    # the axes with frequencies, in ax[0 .. nax-1]
    cdef int which[64]              # their index among all axes
    cdef double maxpos[64]          # the largest |position| of each axis (all axes)

    def __cinit__(self, tuple encoders, tuple columns, int64_t nf):
        cdef int a
        cdef Encoder enc
        cdef const int64_t[::1] c
        cdef int64_t total = 0
        if not 1 <= len(encoders) <= ROPE_MAX_AXES or len(columns) != len(encoders):
            raise ValueError("one encoder and one column list per axis, 1 to 64 axes")
        self.n_axes = len(encoders)
        self.nf = nf
        self.encoders = encoders
        self.columns = tuple(_np.ascontiguousarray(col, dtype=_np.int64) for col in columns)
        self.nax = 0
        for a in range(self.n_axes):
            self.maxpos[a] = float("inf")
            if encoders[a] is None:
                if len(self.columns[a]):
                    raise ValueError("an axis without an encoder must have no columns")
                continue
            enc = encoders[a]
            self.maxpos[a] = enc.max_position
            c = self.columns[a]
            if c.shape[0] != enc.sp.nf or (c.shape[0] and not (
                    0 <= c[0] and c[c.shape[0] - 1] < nf and (_np.diff(c) > 0).all())):
                raise ValueError("each axis needs one column in 0 .. nf-1 per frequency, "
                                 "in increasing order")
            self.ax[self.nax].sp = &enc.sp
            self.ax[self.nax].wide = NULL
            if c.shape[0] and c[c.shape[0] - 1] - c[0] == c.shape[0] - 1:
                # one run of columns: the axis's rows go straight into the table,
                # its sines at columns c[0].., its cosines at nf + c[0]..
                self.wide[self.nax] = enc.sp
                self.wide[self.nax].d = 2 * nf
                self.wide[self.nax].s_off = c[0]
                self.wide[self.nax].c_off = nf + c[0]
                self.ax[self.nax].wide = &self.wide[self.nax]
            self.ax[self.nax].plan = enc.pmem
            self.ax[self.nax].ac = &enc.ac
            self.ax[self.nax].cols = &c[0]
            self.which[self.nax] = a
            self.nax += 1
            total += c.shape[0]
        if total != nf or len(_np.unique(_np.concatenate(self.columns))) != nf:
            raise ValueError("every column 0 .. nf-1 must belong to exactly one axis")

    cdef void _positions(self, pe_rope_axis *ax, const void *pos, bint real, int64_t nseq,
                         int64_t S) noexcept nogil:
        # ax: this handle's axes reading the columns of pos, a C-contiguous
        # (nseq, S, n_axes) int64 array (float64 when real)
        cdef int i
        for i in range(self.nax):
            ax[i] = self.ax[i]
            _init_rows(&ax[i].rq, nseq, S, False, 0)
            if real:
                ax[i].rq.pos_f = <const double *>pos + self.which[i]
            else:
                ax[i].rq.pos_i = <const int64_t *>pos + self.which[i]
            ax[i].rq.psb = S * self.n_axes
            ax[i].rq.pss = self.n_axes
            ax[i].rq.fresh = 1


cdef int64_t _ZERO64 = 0


cdef const void *_axes_positions(Py_buffer *pv, positions, int ndim, int64_t n_axes) except NULL:
    """Hold the buffer of ``positions``: C-contiguous native int64 (or float64: see
    _real_positions) of ``ndim`` axes, the last one ``n_axes`` long."""
    PyObject_GetBuffer(positions, pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    if pv.ndim != ndim or pv.itemsize != 8 or pv.shape[ndim - 1] != n_axes \
            or _native_code(pv.format) not in (c'l', c'q', c'd'):
        PyBuffer_Release(pv)
        raise ValueError(f"positions must be a C-contiguous {ndim}-D int64/float64 array whose "
                         f"last axis has one entry per axis ({n_axes})")
    return pv.buf if pv.len else <const void *>&_ZERO64


cdef inline bint _real_positions(const Py_buffer *pv) noexcept:
    return _native_code(pv.format) == c'd'


def rope_table_axes(RopeAxes axes, out, positions, int num_threads, bint bfloat16=False):
    """Fill ``out``, a C-contiguous (n, 2 nf) float16/bfloat16 (``bfloat16``: uint16
    bits)/float32/float64 buffer, with the [sin | cos] rows of the n tokens of
    ``positions`` (a C-contiguous (n, n_axes) int64 or float64 array; its range is the
    caller's to check), each entry rounded once into out's type."""
    cdef Py_buffer ov, pv
    cdef const void *pp
    cdef pe_rope_axis ax[64]
    cdef char kind
    cdef int err
    cdef int64_t n
    PyObject_GetBuffer(out, &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
    try:
        kind = _native_code(ov.format)
        if kind == c'H' and bfloat16:
            kind = c'b'
        elif bfloat16 or kind not in (c'f', c'd', c'e'):
            raise ValueError("out must hold float16, bfloat16, float32 or float64 entries")
        if ov.ndim != 2 or ov.shape[1] != 2 * axes.nf:
            raise ValueError("out must have shape (n, 2 nf)")
        n = ov.shape[0]
        pp = _axes_positions(&pv, positions, 2, axes.n_axes)
        try:
            if pv.shape[0] != n:
                raise ValueError("positions must have one row per row of out")
            axes._positions(ax, pp, _real_positions(&pv), 1, n)
            with nogil:
                err = pe_rope_table_axes(ov.buf, kind, axes.nf, n, ax, axes.nax, num_threads,
                                         _poll_signals, NULL)
            if err == PE_EINTR:
                _raise_pending()
            if err != FASTPE_OK:
                _raise_for(err)
        finally:
            PyBuffer_Release(&pv)
    finally:
        PyBuffer_Release(&ov)


cdef object _rope_run_axes(const Py_buffer *view, char kind, const Py_buffer *kview, char kkind,
                           RopeAxes axes, int sa, positions, bint half, double attention,
                           int num_threads):
    """_rope_run for multi-axis positions: token (b, s) takes the angles of
    ``positions[b or 0, s, a]`` for the frequencies of axis a, ``positions`` a
    C-contiguous (1 or batch, seq, n_axes) int64 or float64 array whose range the caller has
    checked; q (``view``) and k (``kview`` unless NULL) held and checked as there."""
    cdef Py_buffer pv
    cdef pe_rope_rows R, RK
    cdef pe_rope_rows *Rs[2]
    cdef pe_rope_axis ax[64]
    cdef const void *pp
    cdef int64_t nf = axes.nf, batch, nrows = 0, nseq
    cdef int nR = 0, err
    if kview != NULL and (kview.ndim != view.ndim or kview.shape[sa] != view.shape[sa]
                          or kview.shape[0] != view.shape[0]):
        raise ValueError("q and k must agree on the batch and sequence axes")
    if _rope_rows_of(&R, view, kind, sa, half, nf, attention):
        Rs[nR] = &R
        nR += 1
        nrows += _rope_nrows(&R)
    if kview != NULL and _rope_rows_of(&RK, kview, kkind, sa, half, nf, attention):
        Rs[nR] = &RK
        nR += 1
        nrows += _rope_nrows(&RK)
    batch = view.shape[0] if sa != 0 else 1
    pp = _axes_positions(&pv, positions, 3, axes.n_axes)
    try:
        nseq = pv.shape[0]
        if pv.shape[1] != view.shape[sa] or nseq not in (1, batch):
            raise ValueError("positions must have shape (1 or batch, seq, n_axes)")
        R.per_batch = RK.per_batch = nseq > 1
        if nR == 0:
            return
        axes._positions(ax, pp, _real_positions(&pv), nseq, pv.shape[1])
        if nrows * 2 * nf <= _ROPE_HOLD_GIL:
            err = pe_rope_run_axes(Rs, nR, nf, nseq * pv.shape[1], ax, axes.nax, num_threads,
                                   _poll_signals, NULL)
        else:
            with nogil:
                err = pe_rope_run_axes(Rs, nR, nf, nseq * pv.shape[1], ax, axes.nax,
                                       num_threads, _poll_signals, NULL)
        if err == PE_EINTR:
            _raise_pending()
        if err != FASTPE_OK:
            _raise_for(err)
    finally:
        PyBuffer_Release(&pv)


def rope_rotate_axes(x, RopeAxes axes, int seq_axis, positions, bint half, double attention,
                     int num_threads, bint bfloat16=False, k=None, bint k_bfloat16=False):
    """rope_rotate for multi-axis positions (see _rope_run_axes): the table of every
    token's angles, then q and k by it, in one library call."""
    cdef Py_buffer view, kview
    cdef int64_t nf = axes.nf
    cdef char kind = _rope_view(x, &view, 2 * nf, bfloat16), kkind = 0
    if kind == 0:
        raise ValueError("x must be a writable, aligned float16/bfloat16/float32/float64 "
                         "buffer whose last axis is contiguous and holds the rotated pairs")
    try:
        if not 0 <= seq_axis < view.ndim - 1:
            raise ValueError("seq_axis must be an axis of x before its last")
        if k is not None:
            kkind = _rope_view(k, &kview, 2 * nf, k_bfloat16)
            if kkind == 0:
                raise ValueError("k must be a writable, aligned float16/bfloat16/float32/"
                                 "float64 buffer whose last axis is contiguous and holds the "
                                 "rotated pairs")
        try:
            _rope_run_axes(&view, kind, &kview if kkind else NULL, kkind, axes, seq_axis,
                           positions, half, attention, num_threads)
        finally:
            if kkind:
                PyBuffer_Release(&kview)
    finally:
        PyBuffer_Release(&view)


#: (rope_plan_key(...), sections, section_layout) -> (RopeAxes, attention factor):
#: multi-axis frequency arguments already checked by fastpe._rope, read by
#: rope_apply_axes below.  Bounded by ENCODERS_MAX.
rope_axes_plans = {}


def rope_axes_plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq,
                       sections, section_layout):
    """The cache key of multi-axis RoPE arguments, or None when they are not plain
    values (see rope_plan_key; ``sections`` a list or tuple of ints)."""
    return _axes_plan_key(rope_parameters, head_dim, max_position_embeddings, precision,
                          inv_freq, sections, section_layout)


cdef object _axes_plan_key(rope_parameters, head_dim, max_position_embeddings, precision,
                           inv_freq, sections, section_layout):
    if (type(sections) is not tuple and type(sections) is not list) \
            or type(section_layout) is not str:
        return None
    for v in sections:
        if type(v) is not int:
            return None
    key = _plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq)
    if key is None:
        return None
    return (key, tuple(sections), section_layout)


def remember_rope_axes_plan(key, RopeAxes axes, double attention):
    with _encoders_lock:
        rope_axes_plans[key] = (axes, attention)
        while len(rope_axes_plans) > ENCODERS_MAX:
            del rope_axes_plans[next(iter(rope_axes_plans))]


cdef bint _fast_axes_ids(arr, int64_t rows, int64_t cols, RopeAxes axes) except -1:
    """Whether ``arr`` is a C-contiguous native int64 ndarray of shape (cols, n_axes),
    or (1 or rows, cols, n_axes), whose column a stays within the exact reduction of
    axis a's frequencies."""
    cdef Py_buffer v
    cdef const int64_t *p
    cdef Py_ssize_t i, n = axes.n_axes
    cdef bint ok
    if type(arr) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(arr, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, ValueError, TypeError):
        return False
    try:
        ok = v.itemsize == 8 and _native_code(v.format) in (c'l', c'q') and (
            (v.ndim == 2 and v.shape[0] == cols and v.shape[1] == n)
            or (v.ndim == 3 and v.shape[1] == cols and v.shape[2] == n
                and (v.shape[0] == 1 or v.shape[0] == rows)))
        if ok:
            p = <const int64_t *>v.buf
            for i in range(v.len // 8):
                if fabs(<double>p[i]) > axes.maxpos[i % n]:
                    return False
        return ok
    finally:
        PyBuffer_Release(&v)


def rope_apply_axes(q, k, rope_parameters, head_dim, offset, positions, sections,
                    section_layout, seq_axis, layout, max_position_embeddings, precision,
                    inv_freq, attention_factor, num_threads):
    """fastpe.apply_rope with multi-axis positions for the common case --
    C-contiguous ndarrays, C-contiguous int64 positions, frequencies and sections
    already planned -- or None to decline (the general path then validates and
    explains)."""
    cdef Py_buffer qv, kv
    cdef bint have_k = False
    cdef char qkind, kkind = 0
    cdef int64_t sa, hd, nd, batch, S
    cdef int nt
    cdef RopeAxes axes
    if attention_factor is not None or not _as_i64(seq_axis, &sa) \
            or type(q) is not _NDARRAY or (k is not None and type(k) is not _NDARRAY) \
            or not (type(offset) is int and offset == 0):
        return None
    if type(layout) is not str or (layout != "half" and layout != "interleaved"):
        return None
    nt = _fast_threads(num_threads)
    shape = (<object>q).shape
    nd = len(shape)
    if nt < 0 or nd < 2 or not -nd <= sa < nd:
        return None
    if sa < 0:
        sa += nd
    if sa == nd - 1:
        return None
    if head_dim is None:
        head_dim = shape[nd - 1]
    elif not _as_i64(head_dim, &hd):
        return None
    key = _axes_plan_key(rope_parameters, head_dim, max_position_embeddings, precision,
                         inv_freq, sections, section_layout)
    plan = rope_axes_plans.get(key) if key is not None else None
    if plan is None:
        return None
    axes = plan[0]
    hd = head_dim
    if 2 * axes.nf > hd:    # (never planned so)
        return None
    qkind = _rope_fast_view(q, &qv, hd)
    if qkind == 0:
        return None
    try:
        if k is not None:
            kkind = _rope_fast_view(k, &kv, hd)
            have_k = kkind != 0
            if not have_k or kv.ndim != qv.ndim or kv.shape[sa] != qv.shape[sa] \
                    or kv.shape[0] != qv.shape[0] or _overlap(&qv, &kv):
                return None
        batch = qv.shape[0] if sa != 0 else 1
        S = qv.shape[sa]
        # positions kept in q's or k's memory would change while q is rotated
        if _aliases(positions, &qv, &kv, have_k) \
                or not _fast_axes_ids(positions, batch, S, axes):
            return None
        if (<object>positions).ndim == 2:
            positions = (<object>positions).reshape(1, S, axes.n_axes)
        _rope_run_axes(&qv, qkind, &kv if have_k else NULL, kkind, axes, sa, positions,
                       layout == "half", plan[1], nt)
    finally:
        PyBuffer_Release(&qv)
        if have_k:
            PyBuffer_Release(&kv)
    return q if k is None else (q, k)


cdef void _axes_caches(const void *tab, bint tab64, real *cos, real *sin, int64_t n,
                       int64_t nf, double attention, bint half) noexcept nogil:
    """rope_cache's layout of the [sin | cos] rows ``tab`` (n rows of 2 nf; real's
    type, or float64 times ``attention`` rounded once into real with ``tab64``), as
    fastpe._rope._write_caches writes them."""
    cdef int64_t r, j, o, W = 2 * nf
    cdef real c, s
    for r in range(n):
        o = r * W
        for j in range(nf):
            if tab64:
                c = <real>((<const double *>tab)[o + nf + j] * attention)
                s = <real>((<const double *>tab)[o + j] * attention)
            else:
                c = (<const real *>tab)[o + nf + j]
                s = (<const real *>tab)[o + j]
            if half:
                cos[o + j] = c
                cos[o + nf + j] = c
                sin[o + j] = s
                sin[o + nf + j] = s
            else:
                cos[o + 2 * j] = c
                cos[o + 2 * j + 1] = c
                sin[o + 2 * j] = s
                sin[o + 2 * j + 1] = s


def rope_cache_axes_fast(head_dim, rope_parameters, seq_len, offset, positions, sections,
                         section_layout, layout, dtype, max_position_embeddings, precision,
                         inv_freq, attention_factor, out, num_threads):
    """fastpe.rope_cache with sections for the common case -- frequencies and
    sections already planned, a C-contiguous (n, n_axes) int64 ndarray of
    positions, float32/float64 into new arrays -- or None to decline (the general
    path then validates and explains)."""
    cdef RopeAxes axes
    cdef Py_buffer pv
    cdef pe_rope_axis ax[64]
    cdef int64_t n, nf
    cdef int nt, err
    cdef char want, kind
    cdef double attention
    cdef bint tab64
    if attention_factor is not None or out is not None or seq_len is not None \
            or not (type(offset) is int and offset == 0) or type(positions) is not _NDARRAY \
            or type(layout) is not str or (layout != "half" and layout != "interleaved"):
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    key = _axes_plan_key(rope_parameters, head_dim, max_position_embeddings, precision,
                         inv_freq, sections, section_layout)
    plan = rope_axes_plans.get(key) if key is not None else None
    if plan is None:
        return None
    axes = plan[0]
    attention = plan[1]
    nf = axes.nf
    shape = (<object>positions).shape
    if len(shape) != 2 or shape[0] < 1:
        return None
    n = shape[0]
    # (the general path checks the memory of large requests; and every position
    # against its axis's exact reduction, as _fast_axes_ids does here)
    if (8 + 2 * 8) * <double>n * 2 * nf >= _small_request \
            or not _fast_axes_ids(positions, 0, n, axes):
        return None
    dt = _F64 if want == c'd' else _F32
    tab64 = attention != 1.0 or want == c'd'
    kind = c'd' if tab64 else c'f'
    table = _np_empty((n, 2 * nf), _F64 if tab64 else _F32)
    cos, sin = _np_empty((n, 2 * nf), dt), _np_empty((n, 2 * nf), dt)
    cdef void *tp = _data(table)
    cdef void *cp = _data(cos)
    cdef void *sp = _data(sin)
    cdef bint half = layout == "half", scaled = attention != 1.0
    PyObject_GetBuffer(positions, &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    try:
        axes._positions(ax, pv.buf, False, 1, n)  # (int64: _fast_axes_ids)
        with nogil:
            err = pe_rope_table_axes(tp, kind, nf, n, ax, axes.nax, nt, _poll_signals, NULL)
    finally:
        PyBuffer_Release(&pv)
    if err != FASTPE_OK:    # (an interrupt, or memory: the general path raises it)
        return None
    if want == c'd':
        _axes_caches[double](tp, scaled, <double *>cp, <double *>sp, n, nf, attention, half)
    else:
        _axes_caches[float](tp, scaled, <float *>cp, <float *>sp, n, nf, attention, half)
    return cos, sin


# ---------------------------------------------------------------------------
# The small-call path of fastpe.apply_rope
# ---------------------------------------------------------------------------

#: rope_plan_key(...) -> (Encoder, attention factor): the frequency rules whose
#: result does not depend on the sequence length, filled by fastpe._rope after a
#: full validation and read by rope_apply below.  Bounded by ENCODERS_MAX.
rope_plans = {}
cdef object _PLAIN = (float, int, str, bool)


def rope_plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq=None):
    """The cache key of RoPE frequency arguments, or None when they are not plain
    values (a rope_parameters dict of str keys and float/int/str/bool values, or
    an inv_freq that is a C-contiguous 1-D float32/float64 ndarray): values only,
    with their types, so a later change to the caller's dict or array is a
    different key."""
    return _plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq)


cdef object _plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq):
    # (a C call from the fast paths: no Python call per decoding step)
    cdef list items
    cdef Py_buffer v
    cdef char code
    if type(head_dim) is not int or type(precision) is not str \
            or (max_position_embeddings is not None and type(max_position_embeddings) is not int):
        return None
    if inv_freq is not None:
        # the frequencies by value: their bytes and element type
        if rope_parameters is not None or type(inv_freq) is not _NDARRAY:
            return None
        try:
            PyObject_GetBuffer(inv_freq, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        except (BufferError, ValueError, TypeError):
            return None
        try:
            code = _native_code(v.format)
            if v.ndim != 1 or v.len == 0 or code not in (c'f', c'd'):
                return None
            return (("inv_freq", code, PyBytes_FromStringAndSize(<char *>v.buf, v.len)),
                    head_dim, max_position_embeddings, precision)
        finally:
            PyBuffer_Release(&v)
    if rope_parameters is None:
        return (None, head_dim, max_position_embeddings, precision)
    if type(rope_parameters) is not dict:
        return None
    items = []
    for name, value in (<dict>rope_parameters).items():
        if type(name) is not str or type(value) not in _PLAIN:
            return None
        items.append((name, type(value), value))
    return (tuple(items), head_dim, max_position_embeddings, precision)


def remember_rope_plan(key, Encoder enc, double attention):
    with _encoders_lock:
        rope_plans[key] = (enc, attention)
        while len(rope_plans) > ENCODERS_MAX:
            del rope_plans[next(iter(rope_plans))]


cdef inline char _rope_fast_view(x, Py_buffer *view, int64_t width) except -1:
    """_rope_view for a plain C-contiguous ndarray (no two rows can overlap) of
    float16/32/64 entries; 0 for anything else."""
    cdef int j
    cdef Py_ssize_t step
    cdef char kind
    if type(x) is not _NDARRAY:
        return 0
    try:
        kind = _rope_view(x, view, width, False)
    except (BufferError, ValueError, TypeError):   # dtypes without a buffer format
        return 0
    if kind == 0:
        return 0
    step = view.itemsize
    for j in range(view.ndim - 1, -1, -1):
        if view.shape[j] == 0 or (view.shape[j] > 1 and view.strides[j] != step):
            PyBuffer_Release(view)
            return 0
        step *= view.shape[j]
    return kind


cdef bint _fast_ids(arr, int64_t rows, int64_t cols, int64_t step, double limit) except -1:
    """Whether ``arr`` is a C-contiguous native int64 ndarray of shape (cols,), or
    (1, cols) or (rows, cols) when rows > 0, whose every value v keeps v .. v + step
    within +-limit."""
    cdef Py_buffer v
    cdef const int64_t *p
    cdef Py_ssize_t i
    cdef bint ok
    if type(arr) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(arr, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, ValueError, TypeError):
        return False
    try:
        ok = v.itemsize == 8 and _native_code(v.format) in (c'l', c'q') and (
            (v.ndim == 1 and v.shape[0] == cols)
            or (v.ndim == 2 and rows > 0 and v.shape[1] == cols
                and (v.shape[0] == 1 or v.shape[0] == rows)))
        if ok:
            p = <const int64_t *>v.buf
            for i in range(v.len // 8):
                if _extent(p[i], step + 1) > limit:
                    return False
        return ok
    finally:
        PyBuffer_Release(&v)


cdef bint _aliases(arr, const Py_buffer *qv, const Py_buffer *kv, bint have_k) except -1:
    """Whether the ndarray ``arr`` may share memory with q's (or k's) buffer."""
    cdef Py_buffer v
    cdef bint shared
    if type(arr) is not _NDARRAY:
        return False    # (declined later: only ndarrays take this path)
    PyObject_GetBuffer(arr, &v, PyBUF_STRIDES)
    shared = _overlap(&v, qv) or (have_k and _overlap(&v, kv))
    PyBuffer_Release(&v)
    return shared


def rope_apply(q, k, rope_parameters, head_dim, offset, positions, seq_axis, layout,
               max_position_embeddings, precision, inv_freq, attention_factor, num_threads):
    """fastpe.apply_rope for the common case -- C-contiguous ndarrays, an int
    offset (or an int64 ndarray of one per batch entry, or int64 position ids),
    frequencies already planned -- or None to decline (the general path then
    validates and explains)."""
    return _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                            layout, max_position_embeddings, precision, inv_freq,
                            attention_factor, num_threads)


#: the public apply_rope's general path (a Python function), given by rope_front
cdef object _rope_general = None


def rope_front(general):
    """The public ``apply_rope``: a compiled function with ``general``'s parameters
    that rotates the common case itself (see rope_apply) and hands every other
    call to ``general`` unchanged.  A decoding step then runs no Python frame:
    filling eleven keyword-only defaults costs a tenth of a step.  It takes the
    same parameters (tests/test_fast_path.py compares them).  Its name,
    docstring, signature (``__wrapped__``) and annotations are ``general``'s."""
    global _rope_general
    _rope_general = general
    functools.update_wrapper(apply_rope, general)
    return apply_rope


def apply_rope(q, k=None, *, rope_parameters=None, head_dim=None, offset=0, positions=None,
               sections=None, section_layout="contiguous", seq_axis=-2, layout="half",
               max_position_embeddings=None, precision="float32", inv_freq=None,
               attention_factor=None, num_threads=None, xpos_scale_base=None,
               xpos_center=None):
    # (the general path's parameters, one for one: tests/test_fast_path.py checks
    # them; no **kwargs, whose dict costs a tenth of the call's overhead)
    if sections is None and xpos_scale_base is None and xpos_center is None \
            and (rope_parameters is None or type(rope_parameters) is dict) \
            and type(section_layout) is str \
            and (section_layout == "contiguous" or section_layout == "interleaved"):
        done = _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                                layout, max_position_embeddings, precision, inv_freq,
                                attention_factor, num_threads)
        if done is not None:
            return done
    return _rope_general(q, k, rope_parameters=rope_parameters, head_dim=head_dim,
                         offset=offset, positions=positions, sections=sections,
                         section_layout=section_layout, seq_axis=seq_axis, layout=layout,
                         max_position_embeddings=max_position_embeddings, precision=precision,
                         inv_freq=inv_freq, attention_factor=attention_factor,
                         num_threads=num_threads, xpos_scale_base=xpos_scale_base,
                         xpos_center=xpos_center)


cdef object _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                             layout, max_position_embeddings, precision, inv_freq,
                             attention_factor, num_threads):
    cdef Py_buffer qv, kv
    cdef bint have_k = False
    cdef char qkind, kkind = 0
    cdef int64_t off = 0, sa, hd, nd, batch, S
    cdef int nt
    cdef Encoder enc
    if attention_factor is not None or not _as_i64(seq_axis, &sa) \
            or type(q) is not _NDARRAY or (k is not None and type(k) is not _NDARRAY):
        return None
    if positions is not None and not (type(offset) is int and offset == 0):
        return None
    offsets = None if positions is not None or _as_i64(offset, &off) else offset
    if offsets is None and positions is None and type(offset) is not int:
        return None     # (offset=None: the general path refuses it)
    if type(layout) is not str or (layout != "half" and layout != "interleaved"):
        return None
    nt = _fast_threads(num_threads)
    if nt < 0 or (head_dim is not None and not _as_i64(head_dim, &hd)):
        return None
    # q's buffer first: its shape without a Python attribute, a tuple and an int each
    qkind = _rope_fast_view(q, &qv, 0)
    if qkind == 0:
        return None
    try:
        nd = qv.ndim
        if not -nd <= sa < nd:
            return None
        if sa < 0:
            sa += nd
        if sa == nd - 1:
            return None
        if head_dim is None:
            hd = qv.shape[nd - 1]
            head_dim = hd
        key = _plan_key(rope_parameters, head_dim, max_position_embeddings, precision, inv_freq)
        plan = (<dict?>rope_plans).get(key)
        if plan is None:
            return None
        enc = plan[0]
        # (2 nf > hd: never planned so; the rows below rely on it)
        if 2 * enc.sp.nf > hd or qv.shape[nd - 1] < hd:
            return None
        if k is not None:
            kkind = _rope_fast_view(k, &kv, hd)
            have_k = kkind != 0
            if not have_k or kv.ndim != qv.ndim or kv.shape[sa] != qv.shape[sa] \
                    or kv.shape[0] != qv.shape[0] or _overlap(&qv, &kv):
                return None
        batch = qv.shape[0] if sa != 0 else 1
        S = qv.shape[sa]
        # positions or offsets kept in q's or k's memory would change while q is
        # rotated: the general path copies them first
        if (positions is not None and _aliases(positions, &qv, &kv, have_k)) \
                or (offsets is not None and _aliases(offsets, &qv, &kv, have_k)):
            return None
        # every position checked against the exact reduction here, as the general path does
        if positions is not None:
            if not _fast_ids(positions, batch, S, 0, enc.max_position):
                return None
            if (<object>positions).ndim == 1:
                positions = (<object>positions).reshape(1, S)
        elif offsets is not None:
            if not _fast_ids(offsets, 0, batch, S - 1, enc.max_position):
                return None
        elif _extent(off, S) > enc.max_position:
            return None
        _rope_run(&qv, qkind, &kv if have_k else NULL, kkind, enc, sa, off, offsets, positions,
                  layout == "half", plan[1], nt)
    finally:
        PyBuffer_Release(&qv)
        if have_k:
            PyBuffer_Release(&kv)
    return q if k is None else (q, k)


def rope_cache_fast(head_dim, rope_parameters, seq_len, offset, positions, layout, dtype,
                    max_position_embeddings, precision, inv_freq, attention_factor, out,
                    num_threads):
    """fastpe.rope_cache for the common case -- a planned rule, an int seq_len and
    offset or a 1-D int64 ndarray of positions, float32/float64 into new arrays or
    a pair of plain ndarrays of the result's shape -- through the C API's cache
    function, or None to decline (the general path then validates and explains)."""
    cdef pe_rope_handle h
    cdef Py_buffer cv, sv, pv
    cdef bint have_out = False, have_pos = False
    cdef int64_t n, W, off = 0, crow = 0, srow = 0, cstride = 0, sstride = 0
    cdef const int64_t *pp = NULL
    cdef int nt, lay, err
    cdef char want
    cdef Encoder enc
    if attention_factor is not None or type(layout) is not str \
            or (layout != "half" and layout != "interleaved"):
        return None
    lay = FASTPE_LAYOUT_SPLIT if layout == "half" else FASTPE_LAYOUT_INTERLEAVED
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x' or (out is not None and want != 0):
        return None
    plan = rope_plans.get(_plan_key(rope_parameters, head_dim, max_position_embeddings,
                                    precision, inv_freq))
    if plan is None:
        return None
    enc = plan[0]
    W = 2 * enc.sp.nf
    if positions is None:
        if type(seq_len) is not int or type(offset) is not int or not 1 <= seq_len <= 2**40 \
                or not -2**62 <= offset <= 2**62:
            return None
        n, off = seq_len, offset
    else:
        if seq_len is not None or type(offset) is not int or offset != 0 \
                or type(positions) is not _NDARRAY:
            return None
        try:
            PyObject_GetBuffer(positions, &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        except (BufferError, ValueError, TypeError):
            return None
        have_pos = True
    try:
        if have_pos:
            if pv.ndim != 1 or pv.shape[0] < 1 or pv.itemsize != 8 \
                    or _native_code(pv.format) not in (c'l', c'q'):
                return None
            n = pv.shape[0]
            pp = <const int64_t *>pv.buf
        if (8 + 2 * 8) * <double>n * W >= _small_request:   # the general path checks memory
            return None
        h.magic = PE_ROPE_MAGIC
        h.sp = enc.sp
        h.w = NULL
        h.plan = <double *>enc.pmem
        h.attention = plan[1]
        h.max_position = enc.max_position
        if out is None:
            dt = _F64 if want == c'd' else _F32
            result = (_np_empty((n, W), dt), _np_empty((n, W), dt))
        else:
            if type(out) is not tuple or len(<tuple>out) != 2:
                return None
            result = out
        if not _fast_out(result[0], &cv, 0, &crow, W, &cstride):
            return None
        have_out = True
        if not _fast_out(result[1], &sv, c'f' if cv.itemsize == 4 else c'd', &srow, W,
                         &sstride):
            PyBuffer_Release(&cv)
            return None
        try:
            if cv.ndim != 2 or sv.ndim != 2 or cv.shape[0] != n or sv.shape[0] != n \
                    or cstride != sstride:
                return None
            with nogil:
                if cv.itemsize == 4:
                    err = fastpe_rope_cache_f32(<fastpe_rope *>&h, <float *>cv.buf,
                                                <float *>sv.buf, n, cstride, pp, off, lay, nt)
                else:
                    err = fastpe_rope_cache_f64(<fastpe_rope *>&h, <double *>cv.buf,
                                                <double *>sv.buf, n, cstride, pp, off, lay, nt)
        finally:
            PyBuffer_Release(&sv)
        # an error is found before anything is written: the general path raises it
        return result if err == FASTPE_OK else None
    finally:
        if have_out:
            PyBuffer_Release(&cv)
        if have_pos:
            PyBuffer_Release(&pv)


# ---------------------------------------------------------------------------
# The C library's multi-axis entry points, for the tests that compare them
# ---------------------------------------------------------------------------

from libc.stdint cimport int32_t


cdef extern from "fastpe/fastpe.h" nogil:
    fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                       int n_axes, double attention_factor)
    int fastpe_rope_section_axes(const int64_t *sections, int n_axes, int section_layout,
                                 int32_t *axis, int64_t nf)
    int fastpe_rope_n_axes(const fastpe_rope *rope)
    int fastpe_rope_cache_axes_f32(const fastpe_rope *h, float *cos, float *sin, int64_t n,
                                   int64_t row_stride, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_cache_axes_f64(const fastpe_rope *h, double *cos, double *sin, int64_t n,
                                   int64_t row_stride, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_cache_axes_f16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin,
                                   int64_t n, int64_t row_stride, const int64_t *positions,
                                   int layout, int num_threads)
    int fastpe_rope_cache_axes_bf16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin,
                                    int64_t n, int64_t row_stride, const int64_t *positions,
                                    int layout, int num_threads)
    int fastpe_rope_apply_axes_f32(const fastpe_rope *h, float *x, int64_t batch, int64_t seq,
                                   int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                   int64_t stride_head, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_apply_axes_f64(const fastpe_rope *h, double *x, int64_t batch, int64_t seq,
                                   int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                   int64_t stride_head, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_apply_axes_f16(const fastpe_rope *h, uint16_t *x, int64_t batch,
                                   int64_t seq, int64_t heads, int64_t stride_batch,
                                   int64_t stride_seq, int64_t stride_head,
                                   const int64_t *positions, int layout, int num_threads)
    int fastpe_rope_apply_axes_bf16(const fastpe_rope *h, uint16_t *x, int64_t batch,
                                    int64_t seq, int64_t heads, int64_t stride_batch,
                                    int64_t stride_seq, int64_t stride_head,
                                    const int64_t *positions, int layout, int num_threads)


def _rope_section_axes_native(sections, int section_layout, int64_t nf):
    """The library's fastpe_rope_section_axes: (code, axis as int32, -1 where unwritten)."""
    cdef int64_t[::1] sec = _np.ascontiguousarray(sections, dtype=_np.int64)
    cdef int32_t[::1] axis = _np.full(max(nf, 1), -1, dtype=_np.int32)
    cdef int err = fastpe_rope_section_axes(&sec[0] if sec.shape[0] else NULL,
                                            <int>sec.shape[0], section_layout, &axis[0], nf)
    return err, _np.asarray(axis)[:nf]


def _rope_axes_native(inv_freq, axis, double attention, positions, str what, a, b=None, *,
                      bint bfloat16=False, bint half=True, n=None, row_stride=None,
                      int64_t batch=0, int64_t seq=0, int64_t heads=0, int64_t sb=0,
                      int64_t ss=0, int64_t sh=0, int num_threads=0):
    """The library's multi-axis entry points on a handle of ``inv_freq`` (float64)
    and ``axis`` (int32 per frequency; None: a plain fastpe_rope_from_frequencies
    handle), for tests: ``what`` "cache" (fastpe_rope_cache_axes_* into the
    C-contiguous (n, rotary_dim) arrays a, b) or "apply" (fastpe_rope_apply_axes_*
    on a's buffer with the given sizes and strides, in elements), the entry type
    from a's dtype (uint16 with ``bfloat16``: bfloat16 bits); "cache1" the 1-axis
    fastpe_rope_cache_f64, "n_axes" fastpe_rope_n_axes.  ``positions``: a
    C-contiguous int64 array or None (NULL).  The code returned, or -1 when the
    handle was refused (NULL)."""
    cdef double[::1] w = _np.ascontiguousarray(inv_freq, dtype=_np.float64)
    cdef int32_t[::1] ax
    cdef const int64_t *pp = NULL
    cdef int64_t[::1] pv
    cdef fastpe_rope *h
    cdef Py_buffer av, bv
    cdef char code
    cdef int64_t nn, rs
    cdef int err, lay = FASTPE_LAYOUT_SPLIT if half else FASTPE_LAYOUT_INTERLEAVED
    if axis is None:
        h = fastpe_rope_from_frequencies(&w[0], w.shape[0], attention)
    else:
        ax = _np.ascontiguousarray(axis, dtype=_np.int32)
        h = fastpe_rope_from_axes(&w[0], w.shape[0], &ax[0], <int>(_np.max(axis) + 1)
                                  if len(axis) else 1, attention)
    if h == NULL:
        return -1
    if positions is not None:
        pv = _np.ascontiguousarray(positions, dtype=_np.int64).reshape(-1)
        pp = &pv[0] if pv.shape[0] else <const int64_t *>&_ZERO64
    PyObject_GetBuffer(a, &av, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
    try:
        code = _native_code(av.format)
        if code == c'H' and bfloat16:
            code = c'b'
        elif code not in (c'f', c'd', c'e'):
            raise ValueError("a must hold float16, bfloat16, float32 or float64 entries")
        if what == "n_axes":
            err = fastpe_rope_n_axes(h)
        elif what == "cache1":     # the 1-axis entry point (float64), offset 0
            PyObject_GetBuffer(b, &bv, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
            err = fastpe_rope_cache_f64(h, <double *>av.buf, <double *>bv.buf, av.shape[0],
                                        av.strides[0] // 8, pp, 0, lay, num_threads)
            PyBuffer_Release(&bv)
        elif what == "cache":
            PyObject_GetBuffer(b, &bv, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
            try:
                nn = av.shape[0] if n is None else n
                rs = av.strides[0] // av.itemsize if row_stride is None else row_stride
                with nogil:
                    if code == c'f':
                        err = fastpe_rope_cache_axes_f32(h, <float *>av.buf, <float *>bv.buf, nn,
                                                         rs, pp, lay, num_threads)
                    elif code == c'd':
                        err = fastpe_rope_cache_axes_f64(h, <double *>av.buf, <double *>bv.buf,
                                                         nn, rs, pp, lay, num_threads)
                    elif code == c'e':
                        err = fastpe_rope_cache_axes_f16(h, <uint16_t *>av.buf,
                                                         <uint16_t *>bv.buf, nn, rs, pp,
                                                         lay, num_threads)
                    else:
                        err = fastpe_rope_cache_axes_bf16(h, <uint16_t *>av.buf,
                                                          <uint16_t *>bv.buf, nn, rs, pp,
                                                          lay, num_threads)
            finally:
                PyBuffer_Release(&bv)
        else:
            with nogil:
                if code == c'f':
                    err = fastpe_rope_apply_axes_f32(h, <float *>av.buf, batch, seq, heads, sb, ss,
                                                     sh, pp, lay, num_threads)
                elif code == c'd':
                    err = fastpe_rope_apply_axes_f64(h, <double *>av.buf, batch, seq, heads, sb,
                                                     ss, sh, pp, lay, num_threads)
                elif code == c'e':
                    err = fastpe_rope_apply_axes_f16(h, <uint16_t *>av.buf, batch, seq, heads,
                                                     sb, ss, sh, pp, lay, num_threads)
                else:
                    err = fastpe_rope_apply_axes_bf16(h, <uint16_t *>av.buf, batch, seq, heads,
                                                      sb, ss, sh, pp, lay, num_threads)
    finally:
        PyBuffer_Release(&av)
        fastpe_rope_free(h)
    return err
