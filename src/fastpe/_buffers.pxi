# Included by kernel.pyx (one compilation unit, so that the calls between
# these parts inline as before): from Python buffers to a fill: the general path's
# buffer checks and the interruptible run of a fill.

cdef char _native_code(const char *fmt) noexcept:
    """The struct-module type code of a 1-item native buffer format ('f', 'd',
    'l', 'q', ...), or 0.  Accepts the native byte-order prefixes NumPy and
    ctypes emit ('@', '=', and '<' on little-endian machines)."""
    cdef int little = (<const char *>&_one)[0] == 1
    if fmt == NULL:
        return 0
    if fmt[0] == c'@' or fmt[0] == c'=' or (fmt[0] == c'<' and little) \
            or (fmt[0] == c'>' and not little) or fmt[0] == c'!' and not little:
        fmt += 1
    if fmt[0] == 0 or fmt[1] != 0:
        return 0
    return fmt[0]


cdef int _one = 1

cdef object _fill_buffers(out, const pe_spec *spp, const double *pmem, int64_t nseq,
                          int64_t seq_len, int64_t offset, offsets, positions, zero_pos,
                          bint add, double scale, int num_threads, bint fresh,
                          pe_anchor_cache *ac=NULL, bint bfloat16=False, tuple errctx=None,
                          bint accurate=False):
    """The general fill behind the public functions (which validate everything
    first): buffers in, kernel run, buffers released.

    ``out``: 2-D (nseq*seq_len, d) float16/float32/float64 buffer, or with
    ``bfloat16`` the uint16 bits of a bfloat16 one (NumPy exports no buffer of
    ml_dtypes' type), last axis contiguous, rows at a uniform stride.  Row
    r = b*seq_len + s encodes position
    ``(offsets[b] if offsets is not None else offset) + (positions[b, s] if
    positions is not None else s)``: ``offsets`` a 1-D int64 ndarray (any stride),
    ``positions`` a 2-D (nseq, seq_len) int64 or float64 ndarray (any strides,
    broadcast zeros welcome; float positions exclude offsets).  Rows at
    ``zero_pos`` get a zero encoding.  ``add``: out = out*scale + PE.
    ``fresh``: ``out`` was just allocated (its pages are new).  ``accurate``:
    rows correctly rounded (the library's tested writers).  ``out`` None:
    the library's checks of the other arguments only, nothing filled.  The library
    checks the numbers (sizes, stride, positions, scale); ``errctx``: how its
    refusals are worded (see _fill_interruptibly)."""
    cdef pe_spec sp = spp[0]
    cdef pe_rows rq
    cdef Py_buffer view, pview, oview
    cdef bint have_p = False, have_o = False
    cdef char code, pcode
    cdef int64_t stride
    memset(&rq, 0, sizeof(rq))
    rq.nseq = nseq
    rq.S = seq_len
    rq.offset = offset
    rq.add = add
    rq.scale = scale
    rq.fresh = fresh
    rq.accurate = accurate
    if zero_pos is not None:
        rq.has_zero_pos = 1
        rq.zero_pos = zero_pos
    cdef bint check_only = out is None
    cdef int err
    if check_only:          # (an empty buffer: nothing overlaps it)
        memset(&view, 0, sizeof(view))
    else:
        PyObject_GetBuffer(out, &view, PyBUF_RECORDS)
    try:
        code = _native_code(view.format)
        if check_only:
            pass
        elif bfloat16:
            if view.ndim != 2 or code != c'H':
                raise TypeError("out must be a 2-D uint16 buffer holding bfloat16")
            code = c'b'
        elif view.ndim != 2 or (code != c'f' and code != c'd' and code != c'e'):
            raise TypeError("out must be a 2-D float16, float32 or float64 buffer")
        if check_only:
            stride = 0
        elif view.shape[0] != nseq * seq_len or view.shape[1] != sp.d:
            raise ValueError("out has the wrong shape for this fill")
        elif view.shape[1] > 1 and view.strides[1] != view.itemsize:
            raise ValueError("out's rows must be contiguous")
        elif view.shape[0] > 1 and view.strides[0] % view.itemsize != 0:
            raise ValueError("out's row stride must be a whole number of entries")
        else:
            # (the library checks the stride against the width: rows must not overlap)
            stride = view.strides[0] // view.itemsize if view.shape[0] > 1 else sp.d
        # Inputs that share memory with out (or x) are copied first, as NumPy's
        # ufuncs do: the fill would otherwise read positions it has overwritten.
        if offsets is not None:
            offsets = _input_buffer(offsets, &oview, &view)    # (the copy stays alive)
            have_o = True
            if oview.ndim != 1 or oview.shape[0] != nseq or oview.itemsize != 8 \
                    or _native_code(oview.format) not in (c'l', c'q'):
                raise TypeError("offsets must be a 1-D int64 array of length nseq")
            rq.offs = <const int64_t *>oview.buf
            rq.offs_stride = oview.strides[0] // 8
        if positions is not None:
            positions = _input_buffer(positions, &pview, &view)
            have_p = True
            if pview.ndim != 2 or pview.shape[0] != nseq or pview.shape[1] != seq_len \
                    or pview.itemsize != 8:
                raise TypeError("positions must be a 2-D (nseq, seq_len) int64/float64 array")
            pcode = _native_code(pview.format)
            if pcode == c'd':
                rq.pos_f = <const double *>pview.buf
            elif pcode in (c'l', c'q'):
                rq.pos_i = <const int64_t *>pview.buf
            else:
                raise TypeError("positions must be int64 or float64")
            rq.psb = pview.strides[0] // 8
            rq.pss = pview.strides[1] // 8
        if check_only:
            err = pe_check_fill(NULL, 0, 0, &sp, &rq, "seq_len")
            if err != FASTPE_OK:
                if errctx is None:
                    _raise(err)
                else:
                    _raise(err, errctx[0], errctx[1], errctx[2])
        else:
            _fill_interruptibly(view.buf, code, stride, &sp, &rq, num_threads, pmem, ac, NAN,
                                errctx)
    finally:
        if not check_only:
            PyBuffer_Release(&view)
        if have_p:
            PyBuffer_Release(&pview)
        if have_o:
            PyBuffer_Release(&oview)
    return out


cdef object _input_buffer(arr, Py_buffer *v, const Py_buffer *out):
    """Hold the buffer of the input ndarray ``arr`` in ``v``; when it shares memory
    with ``out``, of a copy instead (returned: the caller keeps it alive)."""
    PyObject_GetBuffer(arr, v, PyBUF_STRIDES | PyBUF_FORMAT)
    if _overlap(v, out):
        PyBuffer_Release(v)
        arr = arr.copy()
        PyObject_GetBuffer(arr, v, PyBUF_STRIDES | PyBUF_FORMAT)
    return arr


cdef bint _overlap(const Py_buffer *a, const Py_buffer *b) noexcept:
    """Whether the memory spans of two strided buffers intersect (bounds only, like
    numpy.may_share_memory: a false alarm costs a copy, never a wrong result)."""
    cdef const char *alo
    cdef const char *ahi
    cdef const char *blo
    cdef const char *bhi
    if not _span(a, &alo, &ahi) or not _span(b, &blo, &bhi):
        return False
    return alo < bhi and blo < ahi


cdef bint _span(const Py_buffer *v, const char **lo, const char **hi) noexcept:
    """[lo, hi) = the bytes a strided buffer can touch; False if it is empty."""
    cdef Py_ssize_t i, ext
    lo[0] = <const char *>v.buf
    hi[0] = <const char *>v.buf + v.itemsize
    for i in range(v.ndim):
        if v.shape[i] == 0:
            return False
        ext = (v.shape[i] - 1) * v.strides[i]
        if ext < 0:
            lo[0] += ext
        else:
            hi[0] += ext
    return True


cdef extern from "Python.h":
    # (declared here without Cython's exception check: the poll callback below
    # runs in C, and the exception it leaves is raised by _fill_interruptibly)
    int _check_signals "PyErr_CheckSignals"()


cdef int _poll_signals(void *ctx) noexcept nogil:
    """The library's poll callback: nonzero (a KeyboardInterrupt or another
    exception from a signal handler pending) stops the fill between chunks."""
    with gil:
        return 1 if _check_signals() != 0 else 0


cdef int _raise_pending() except -1:
    """Raise the exception _poll_signals left set."""
    return -1


cdef inline int _fill(void *out, char kind, int64_t stride, const pe_spec *sp, const pe_rows *rq,
                      int num_threads, const double *plan, pe_anchor_cache *ac,
                      double max_position) noexcept:
    """Run a checked fill without the GIL: ONE call into the library, which checks
    the arguments, then works in chunks of about _set_chunk_entries entries and
    checks for signals between them, so that Ctrl-C interrupts a long fill within
    a few milliseconds (PE_EINTR; the rows done so far stay written).  ``kind``:
    the entries' type ('f', 'd', 'e' or 'b').  Any chunking gives the same bits.
    ``ac``: the encoding's anchor cache, read before and written after a fill
    (NULL: none).  ``max_position``: the largest position sp's frequencies allow
    (an Encoder's, known since it was built; NaN: the library works it out, the
    same number).  Returns the library's code: the caller raises (_raise)."""
    cdef int err
    with nogil:
        err = pe_fill_checked(out, kind, stride, sp, rq, num_threads, plan, ac, _poll_signals,
                              NULL, max_position)
    return err


cdef int _fill_interruptibly(void *out, char kind, int64_t stride, const pe_spec *sp,
                             const pe_rows *rq, int num_threads, const double *plan,
                             pe_anchor_cache *ac, double max_position,
                             tuple errctx) except -1:
    """_fill, raising for a refusal or an interruption (KeyboardInterrupt).
    ``errctx``: None, or (names, shape, label) for _raise: the caller's names of
    the library's arguments, and where an element index points."""
    cdef int err = _fill(out, kind, stride, sp, rq, num_threads, plan, ac, max_position)
    if err != FASTPE_OK:
        if errctx is None:
            _raise(err)
        else:
            _raise(err, errctx[0], errctx[1], errctx[2])
    return 0
