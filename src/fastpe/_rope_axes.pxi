# Included by kernel.pyx: multi-axis RoPE (Qwen2-VL's mrope, 2-D and 3-D RoPE), each
# frequency following one coordinate of its token: the library's multi-axis plans
# (RopeAxes holds one for the general path), their tables and the rotation by them.

cdef extern from "pe_lib.h" nogil:
    ctypedef struct pe_rope_axis:
        const pe_spec *sp
        const pe_spec *wide
        const double *plan
        pe_anchor_cache *ac
        pe_rows rq
        const int64_t *cols
    ctypedef struct pe_rope_axes_plan:
        void *h
        int n_axes
        int nax
        int64_t nf
        double attention
        const pe_rope_axis *ax
        const int *which
        const double *max_position
    const pe_rope_axes_plan *pe_rope_plan_axes(const void *w, int kind, int64_t nf,
                                               const int64_t *sections, int n_axes,
                                               int section_layout, int *slot)
    const pe_rope_axes_plan *pe_rope_plan_axes_rule(const void *p, int64_t head_dim,
                                                    const int64_t *sections, int n_axes,
                                                    int section_layout, int *slot)
    void pe_rope_axes_plan_done(const pe_rope_axes_plan *plan, int slot)
    void _axes_rows "pe_rope_axes_rows"(const pe_rope_axes_plan *plan, pe_rope_axis *ax,
                                        const void *positions, bint real, int64_t nseq,
                                        int64_t S)
    int pe_rope_table_axes(void *table, int kind, int64_t nf, int64_t ntab,
                           const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                           void *poll_ctx)
    int pe_rope_run_axes(pe_rope_rows **R, int nR, int64_t nf, int64_t ntab,
                         const pe_rope_axis *ax, int n_axes, int num_threads, pe_poll_fn poll,
                         void *poll_ctx)


cdef class RopeAxes:
    """A multi-axis RoPE plan of the library's cache (lib/src/rope.c,
    pe_rope_plan_axes; with ``args``, the rule's entry: see RopePlan), held while
    this object lives: the frequencies ``w`` (float64) laid out over the axes by
    ``sections`` (``section_layout``, one of FASTPE_SECTIONS_*).  The general path
    makes one per call; the cache keeps the plan, and the small-call paths read the
    same entry without this object."""
    cdef const pe_rope_axes_plan *pl
    cdef int slot
    cdef readonly RopeArgs args

    def __cinit__(self, w, sections, int section_layout, RopeArgs args=None):
        cdef const double[::1] wv = _np.ascontiguousarray(w, dtype=_np.float64)
        cdef const int64_t[::1] sv = _np.ascontiguousarray(sections, dtype=_np.int64)
        cdef pe_rope_handle *h
        self.slot = -1
        if wv.shape[0] < 1 or not 1 <= sv.shape[0] <= ROPE_MAX_AXES:
            raise ValueError("w must list frequencies and sections 1 to 64 axes")
        if args is not None:  # (the rule's entry, as RopePlan's)
            self.pl = pe_rope_plan_axes_rule(args.p, args.head_dim, &sv[0], <int>sv.shape[0],
                                             section_layout, &self.slot)
            h = <pe_rope_handle *>self.pl.h if self.pl != NULL else NULL
            if h != NULL and h.sp.nf == wv.shape[0] and _same_list(h.w, wv):
                self.args = args
            elif self.pl != NULL:
                pe_rope_axes_plan_done(self.pl, self.slot)
                self.pl = NULL
        if self.pl == NULL:
            self.pl = pe_rope_plan_axes(&wv[0], c'd', wv.shape[0], &sv[0], <int>sv.shape[0],
                                        section_layout, &self.slot)
        if self.pl == NULL:
            _raise_for(_last_error()[0] or FASTPE_ENOMEM)

    def __dealloc__(self):
        if self.pl != NULL:
            pe_rope_axes_plan_done(self.pl, self.slot)

    @property
    def max_positions(self):
        """The largest |position| of each axis (inf for one without frequencies)."""
        return tuple(self.pl.max_position[a] for a in range(self.pl.n_axes))


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


def rope_table_axes(RopeAxes axes, out, positions, int num_threads, bint bfloat16=False,
                    bint accurate=False, double scale=1.0):
    """Fill ``out``, a C-contiguous (n, 2 nf) float16/bfloat16 (``bfloat16``: uint16
    bits)/float32/float64 buffer, with the [sin | cos] rows of the n tokens of
    ``positions`` (a C-contiguous (n, n_axes) int64 or float64 array; its range is the
    caller's to check), each entry rounded once into out's type (``accurate``: each
    entry correctly rounded, each ``scale`` times its sine or cosine)."""
    cdef Py_buffer ov, pv
    cdef const void *pp
    cdef pe_rope_axis ax[64]
    cdef char kind
    cdef int err, i
    cdef int64_t n
    PyObject_GetBuffer(out, &ov, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE)
    try:
        kind = _native_code(ov.format)
        if kind == c'H' and bfloat16:
            kind = c'b'
        elif bfloat16 or kind not in (c'f', c'd', c'e'):
            raise ValueError("out must hold float16, bfloat16, float32 or float64 entries")
        if ov.ndim != 2 or ov.shape[1] != 2 * axes.pl.nf:
            raise ValueError("out must have shape (n, 2 nf)")
        n = ov.shape[0]
        pp = _axes_positions(&pv, positions, 2, axes.pl.n_axes)
        try:
            if pv.shape[0] != n:
                raise ValueError("positions must have one row per row of out")
            _axes_rows(axes.pl, ax, pp, _real_positions(&pv), 1, n)
            for i in range(axes.pl.nax):
                ax[i].rq.accurate = accurate
                ax[i].rq.scale = scale if accurate else 1.0
            with nogil:
                err = pe_rope_table_axes(ov.buf, kind, axes.pl.nf, n, ax, axes.pl.nax,
                                         num_threads, _poll_signals, NULL)
            if err == PE_EINTR:
                _raise_pending()
            if err != FASTPE_OK:
                _raise_for(err)
        finally:
            PyBuffer_Release(&pv)
    finally:
        PyBuffer_Release(&ov)


cdef object _rope_run_axes(const Py_buffer *view, char kind, const Py_buffer *kview, char kkind,
                           const pe_rope_axes_plan *pl, int sa, positions, bint half,
                           double attention, int num_threads):
    """_rope_run for multi-axis positions: token (b, s) takes the angles of
    ``positions[b or 0, s, a]`` for the frequencies of axis a, ``positions`` a
    C-contiguous (1 or batch, seq, n_axes) int64 or float64 array whose range the caller has
    checked; q (``view``) and k (``kview`` unless NULL) held and checked as there
    (their axes agree: pe_rope_check_arrays)."""
    cdef Py_buffer pv
    cdef pe_rope_rows R, RK
    cdef pe_rope_rows *Rs[2]
    cdef pe_rope_axis ax[64]
    cdef const void *pp
    cdef int64_t nf = pl.nf, batch, nrows = 0, nseq
    cdef int nR = 0, err
    if _rope_rows_of(&R, view, kind, sa, half, nf, attention):
        Rs[nR] = &R
        nR += 1
        nrows += pe_rope_nrows(&R)
    if kview != NULL and _rope_rows_of(&RK, kview, kkind, sa, half, nf, attention):
        Rs[nR] = &RK
        nR += 1
        nrows += pe_rope_nrows(&RK)
    batch = view.shape[0] if sa != 0 else 1
    pp = _axes_positions(&pv, positions, 3, pl.n_axes)
    try:
        nseq = pv.shape[0]
        if pv.shape[1] != view.shape[sa] or nseq not in (1, batch):
            raise ValueError("positions must have shape (1 or batch, seq, n_axes)")
        R.per_batch = RK.per_batch = nseq > 1
        if nR == 0:
            return
        _axes_rows(pl, ax, pp, _real_positions(&pv), nseq, pv.shape[1])
        if nrows * 2 * nf <= _ROPE_HOLD_GIL:
            err = pe_rope_run_axes(Rs, nR, nf, nseq * pv.shape[1], ax, pl.nax, num_threads,
                                   _poll_signals, NULL)
        else:
            with nogil:
                err = pe_rope_run_axes(Rs, nR, nf, nseq * pv.shape[1], ax, pl.nax,
                                       num_threads, _poll_signals, NULL)
        if err == PE_EINTR:
            _raise_pending()
        if err != FASTPE_OK:
            _raise_for(err)
    finally:
        PyBuffer_Release(&pv)
