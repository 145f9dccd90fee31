# Included by kernel.pyx (one compilation unit, so that the calls between
# these parts inline as before): the compiled-encoding cache and the fast paths of
# the public functions (table, table_at, add).

#: arguments (see encoder_key).  Filled by fastpe._api after a full validation;
#: read by the fast paths below.  Bounded by ENCODERS_MAX (oldest out first).
encoders = {}
_encoders_lock = threading.Lock()


def encoder_key(convention, double base, layout, int64_t d_model):
    """The cache key of validated encoding arguments (``base`` as a float), or
    None for a convention or layout that is not a plain str / Convention: the
    key holds values only, never a caller's object (a Convention is keyed by
    its fields)."""
    # our own copies of the names, so the cache keeps no string of the caller's
    layout = _NAMES.get(layout) if type(layout) is str else None
    if layout is None:
        return None
    if type(convention) is str:
        convention = _NAMES.get(convention)
        return None if convention is None else (convention, base, layout, d_model)
    key = getattr(convention, "_key", None)   # fastpe.Convention's field values
    if type(key) is tuple:
        return (key, base, layout, d_model)
    return None


_NAMES = {name: name for name in (
    "interleaved", "split", "vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj")}


def remember(key, Encoder enc):
    """Keep ``enc`` under ``key`` (None: not kept), dropping the oldest encodings
    beyond ENCODERS_MAX or ENCODERS_MAX_BYTES; returns ``enc``."""
    if key is not None:
        with _encoders_lock:
            encoders[key] = enc
            while len(encoders) > 1 and (
                    len(encoders) > ENCODERS_MAX
                    or sum(e.nbytes for e in encoders.values()) > ENCODERS_MAX_BYTES):
                del encoders[next(iter(encoders))]
    return enc


cdef inline Encoder _cached(convention, base, layout, d_model):
    """The cached encoding for exact-type arguments, else None."""
    cdef object key
    # (an int base up to 2^53 is exact in a double: the same key as the float)
    if type(base) is int and -9007199254740992 <= base <= 9007199254740992:
        base = <double>base
    if type(d_model) is not int or type(base) is not float or type(layout) is not str:
        return None
    if type(convention) is str:
        key = (convention, base, layout, d_model)
    else:
        key = getattr(convention, "_key", None)
        if type(key) is not tuple:
            return None
        key = (key, base, layout, d_model)
    return encoders.get(key)


cdef inline bint _as_i64(obj, int64_t *v):
    """An exact Python int that fits in int64 -> *v; False for anything else."""
    cdef int overflow = 0
    if type(obj) is not int:
        return False
    v[0] = PyLong_AsLongLongAndOverflow(obj, &overflow)
    return overflow == 0 and not (v[0] == -1 and PyErr_Occurred() != NULL)


cdef inline int _fast_threads(num_threads) except -2:
    """num_threads as the kernel takes it (0: the default), or -1 to decline."""
    cdef int64_t v
    if num_threads is None:
        return 0
    if not _as_i64(num_threads, &v) or v < 1:
        return -1
    return <int>(v if v < 2147483647 else 2147483647)


cdef inline char _fast_dtype(dtype):
    """'f' or 'd' for the plain spellings of float32/float64, 0 for None, 'x' else."""
    if dtype is None:
        return 0
    if dtype is _F32_TYPE or dtype is _F32:
        return c'f'
    if dtype is _F64_TYPE or dtype is _F64:
        return c'd'
    if type(dtype) is str:
        if dtype == "float32":
            return c'f'
        if dtype == "float64":
            return c'd'
    return c'x'


cdef bint _fast_out(out, Py_buffer *view, char want, int64_t *rows, int64_t d,
                    int64_t *stride) except -1:
    """Acquire a plain, writable, aligned ndarray ``out`` whose rows (all leading
    axes flattened) are d contiguous float32/float64 entries at one stride, of
    dtype ``want`` ('f', 'd', or 0 for either).  False (nothing held) for
    anything else: the caller then takes the general path, which explains."""
    cdef int i
    cdef int64_t n = 1, span = 1, s = -1
    cdef char code
    if type(out) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(out, view, PyBUF_STRIDES | PyBUF_FORMAT)
    except ValueError:      # dtypes with no buffer format (ml_dtypes' bfloat16)
        return False
    code = _native_code(view.format)
    if view.readonly or view.ndim < 1 or view.shape[view.ndim - 1] != d \
            or (code != c'f' and code != c'd') or (want != 0 and code != want) \
            or (<size_t>view.buf) % view.itemsize != 0 \
            or (d > 1 and view.strides[view.ndim - 1] != view.itemsize):
        PyBuffer_Release(view)
        return False
    for i in range(view.ndim - 1):
        n *= view.shape[i]
    # the leading axes must flatten to one row stride (as a reshape to 2-D would)
    for i in range(view.ndim - 2, -1, -1):
        if n == 0 or view.shape[i] == 1:
            continue
        if s == -1:
            s = view.strides[i]
            span = view.shape[i]
            if s < d * view.itemsize or s % view.itemsize != 0:
                PyBuffer_Release(view)
                return False
        elif view.strides[i] != s * span:
            PyBuffer_Release(view)
            return False
        else:
            span *= view.shape[i]
    rows[0] = n
    stride[0] = s // view.itemsize if s != -1 else d
    return True


cdef inline char _kind(const Py_buffer *view) noexcept:
    """The kind _fill_interruptibly takes of a buffer _fast_out accepted."""
    return c'f' if view.itemsize == 4 else c'd'


cdef void *_data(arr) except NULL:
    """The data pointer of a new C-contiguous ndarray (buffer protocol: no NumPy
    C-API, so one wheel serves NumPy 1.x and 2.x)."""
    cdef Py_buffer v
    PyObject_GetBuffer(arr, &v, PyBUF_WRITABLE)
    cdef void *p = v.buf
    PyBuffer_Release(&v)       # the array keeps its memory; only the export ends
    return p if p != NULL else <void *>&_one


cdef inline bint _small(const pe_spec *sp, int64_t rows, int nt, bint add, double out_bytes):
    """Below the size at which the memory limits are looked up (_validate)."""
    return out_bytes + _scratch_bound(sp, rows, nt, add) < _small_request


cdef object _fill_new(Encoder enc, shape, int64_t n, char want, int nt, pe_rows *rq,
                      tuple errctx):
    """A new array of ``shape`` (n >= 0 rows; float32 unless want is 'd') filled,
    or None when it is large enough for the general path's memory checks.  The
    fill's one library call checks the arguments (a refused call costs the small
    array made for it: a second check before it would cost every call)."""
    if want == 0:
        want = c'f'
    if not _small(&enc.sp, n, nt, False, <double>n * enc.sp.d * (4 if want == c'f' else 8)):
        return None
    out = _np_empty(shape, _F32 if want == c'f' else _F64)
    rq.fresh = 1
    _fill_interruptibly(_data(out), want, enc.sp.d, &enc.sp, rq, nt, enc.pmem, &enc.ac,
                        enc.max_position, errctx)
    return out


# How the library's refusals read for each public function (see _raise): the
# library's names of its arguments as the caller knows them.
TABLE_ERRORS = ({"offset": "seq_len and offset", "seq_len": "seq_len"}, None, "positions")
ADD_ERRORS = {"seq_len": "x.shape[-2]", "nseq": "the number of sequences",
              "d_model": "x's last axis (d_model)"}
# (C-level names of the same objects: the fast paths read them without a
# module-dict lookup or a new tuple per call)
cdef tuple _TABLE_CTX = TABLE_ERRORS
cdef tuple _ADD_CTX = (ADD_ERRORS, None, "x")


def table(seq_len, d_model, base, offset, dtype, layout, out, num_threads, convention,
          correctly_rounded=False):
    """fastpe.sinusoidal for the common argument types: the table, or None to
    decline (the general path then validates and explains).  ``correctly_rounded``:
    a bool (anything else declined), checked here rather than by the caller: a
    Python-level check would cost a sixth of a one-row call."""
    cdef Encoder enc = _cached(convention, base, layout, d_model)
    cdef int64_t S, off, last, rows = 0, stride = 0
    cdef int nt
    cdef char want
    cdef Py_buffer view
    cdef pe_rows rq
    cdef bint accurate
    if correctly_rounded is False or correctly_rounded is True:
        accurate = correctly_rounded
    else:
        return None     # (the general path converts or refuses it)
    # (a negative seq_len is the general path's to refuse: no array has that shape)
    if enc is None or not _as_i64(seq_len, &S) or S < 0 or not _as_i64(offset, &off):
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    _init_rows(&rq, 1, S, enc.has_zero, enc.zero)
    rq.offset = off
    rq.accurate = accurate
    if out is None:
        return _fill_new(enc, (S, enc.d_model), S, want, nt, &rq, _TABLE_CTX)
    if not _fast_out(out, &view, want, &rows, enc.sp.d, &stride):
        return None
    try:
        if view.ndim != 2 or rows != S or not _small(&enc.sp, S, nt, False, 0.0):
            return None
        _fill_interruptibly(view.buf, _kind(&view), stride, &enc.sp, &rq, nt, enc.pmem,
                            &enc.ac, enc.max_position, _TABLE_CTX)
    finally:
        PyBuffer_Release(&view)
    return out


cdef bint _fast_positions(positions, Py_buffer *pv) except -1:
    """Acquire a plain C-contiguous int64/float64 ndarray of positions (their
    values are the library's to check).  False (nothing held) otherwise."""
    cdef char code
    if type(positions) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(positions, pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, ValueError):        # NumPy: ValueError when not contiguous
        return False
    code = _native_code(pv.format)
    if pv.itemsize == 8 and (<size_t>pv.buf) % 8 == 0 \
            and (code == c'd' or code == c'l' or code == c'q'):
        return True
    PyBuffer_Release(pv)
    return False


def table_at(positions, d_model, base, dtype, layout, out, num_threads, convention,
             correctly_rounded=False):
    """fastpe.sinusoidal_at for the common argument types: the rows, or None to
    decline (the general path then validates, converts, copies and explains).
    ``correctly_rounded``: as for table."""
    cdef Encoder enc = _cached(convention, base, layout, d_model)
    cdef int64_t n, rows = 0, stride = 0
    cdef int nt
    cdef char want
    cdef Py_buffer pv, view
    cdef bint have_view = False
    cdef pe_rows rq
    cdef bint accurate
    cdef int err
    if correctly_rounded is False or correctly_rounded is True:
        accurate = correctly_rounded
    else:
        return None     # (the general path converts or refuses it)
    if enc is None:
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    if not _fast_positions(positions, &pv):
        return None
    try:
        n = pv.len // 8
        _init_rows(&rq, 1, n, enc.has_zero, enc.zero)
        rq.pss = 1
        rq.accurate = accurate
        if _native_code(pv.format) == c'd':
            rq.pos_f = <const double *>pv.buf
        else:
            rq.pos_i = <const int64_t *>pv.buf
        if out is None:
            shape = (<object>positions).shape
            return _fill_new(enc, shape + (enc.d_model,), n, want, nt, &rq,
                             (None, shape, "positions"))
        if not _fast_out(out, &view, want, &rows, enc.sp.d, &stride):
            return None
        have_view = True
        if view.ndim != pv.ndim + 1 or rows != n or _overlap(&pv, &view) \
                or not _small(&enc.sp, n, nt, False, 0.0):
            return None
        for i in range(pv.ndim):
            if view.shape[i] != pv.shape[i]:
                return None
        # (the refusal's wording is built only for a refusal)
        err = _fill(view.buf, _kind(&view), stride, &enc.sp, &rq, nt, enc.pmem, &enc.ac,
                    enc.max_position)
        if err != FASTPE_OK:
            _raise(err, None, (<object>positions).shape, "positions")
        return out
    finally:
        PyBuffer_Release(&pv)
        if have_view:
            PyBuffer_Release(&view)


def add(x, offset, positions, scale, base, layout, num_threads, convention,
        correctly_rounded=False):
    """fastpe.add_to for the common argument types (one int offset, no positions):
    ``x``, or None to decline (the general path then validates and explains).
    ``correctly_rounded``: as for table."""
    cdef Py_buffer view
    cdef int64_t off, rows = 0, stride = 0, S
    cdef int nt
    cdef pe_rows rq
    cdef Encoder enc
    cdef bint accurate
    if correctly_rounded is False or correctly_rounded is True:
        accurate = correctly_rounded
    else:
        return None     # (the general path converts or refuses it)
    if positions is not None or type(x) is not _NDARRAY or type(scale) is not float \
            or not _as_i64(offset, &off):
        return None
    nt = _fast_threads(num_threads)
    shape = (<object>x).shape
    if nt < 0 or len(shape) < 2:
        return None
    enc = _cached(convention, base, layout, shape[len(shape) - 1])   # (no wraparound here)
    if enc is None:
        return None
    if not _fast_out(x, &view, 0, &rows, enc.sp.d, &stride):
        return None
    try:
        S = view.shape[view.ndim - 2]
        if not _small(&enc.sp, rows, nt, True, 0.0):
            return None
        _init_rows(&rq, rows // S if S > 0 else 0, S, enc.has_zero, enc.zero)
        rq.offset = off
        rq.add = 1
        rq.scale = <double>scale
        rq.accurate = accurate
        _fill_interruptibly(view.buf, _kind(&view), stride, &enc.sp, &rq, nt, enc.pmem,
                            &enc.ac, enc.max_position, _ADD_CTX)
    finally:
        PyBuffer_Release(&view)
    return x
