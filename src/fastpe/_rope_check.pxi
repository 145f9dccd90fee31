# Included by kernel.pyx: the array checks of apply_rope's q and k and of a
# caller's out, made once by the library (lib/src/rope_check.c,
# pe_rope_check_arrays, pe_check_out) for the general path and the fast paths
# alike; a refusal's error detail becomes the message here.

cdef extern from "pe_lib.h" nogil:
    ctypedef struct pe_rope_array:
        const char *name
        const char *buf
        int64_t itemsize
        int ndim
        const int64_t *shape
        const int64_t *strides
    int64_t PE_ROPE_HEAD_DIM_OF_Q
    const int64_t INT64_MAX, INT64_MIN
    int pe_check_out(const pe_rope_array *a, const pe_rope_array *b, const int64_t *shape, int nd)
    ctypedef struct pe_rope_span:
        int64_t ilo
        int64_t ihi
        double lo
        double hi
    int pe_rope_check_tokens(const pe_rope_array *pos, int pos_float, const pe_rope_array *off,
                             int64_t offset, int64_t batch, int64_t seq, pe_rope_span *span)
    int pe_rope_check_span(const pe_rope_span *span, double limit, int64_t axis)
    int pe_rope_check_axes_tokens(const pe_rope_array *pos, int pos_float, int64_t n,
                                  int64_t batch, int64_t seq, pe_rope_span *spans)
    int pe_rope_check_arrays(const pe_rope_array *q, const pe_rope_array *k, int64_t head_dim,
                             int64_t seq_axis, int64_t *hd, int *sa)


cdef struct _RopeAxes64:
    # a buffer's axes and strides as the library takes them (int64, not Py_ssize_t)
    int64_t shape[65]
    int64_t strides[65]


cdef inline void _rope_array_of(pe_rope_array *a, _RopeAxes64 *ax, const Py_buffer *v,
                                const char *name) noexcept:
    cdef int i, nd = v.ndim if v.ndim <= 65 else 65
    for i in range(nd):
        ax.shape[i] = v.shape[i]
        ax.strides[i] = v.strides[i]
    a.name = name
    a.buf = <const char *>v.buf
    a.itemsize = v.itemsize
    a.ndim = v.ndim
    a.shape = ax.shape
    a.strides = ax.strides


cdef int _rope_check_arrays(const Py_buffer *qv, const Py_buffer *kv, int64_t head_dim,
                            int64_t seq_axis, int64_t *hd, int *sa, head_dim_given=None,
                            seq_axis_given=None) except -1:
    """The library's checks of q (and k, unless NULL) held as buffers, head_dim
    (PE_ROPE_HEAD_DIM_OF_Q: q's last axis) and seq_axis; raises from the detail
    (``*_given``: the values as given, for a message about a huge one)."""
    cdef pe_rope_array q, k
    cdef _RopeAxes64 qa, ka
    cdef int err
    _rope_array_of(&q, &qa, qv, b"q")
    if kv != NULL:
        _rope_array_of(&k, &ka, kv, b"k")
    err = pe_rope_check_arrays(&q, &k if kv != NULL else NULL, head_dim, seq_axis, hd, sa)
    if err != FASTPE_OK:
        _raise_arrays(err, qv, kv, seq_axis if seq_axis_given is None else seq_axis_given,
                      head_dim if head_dim_given is None else head_dim_given)
    return 0


cdef tuple _axes(const Py_buffer *v, bint strides):
    return tuple([v.strides[i] if strides else v.shape[i] for i in range(v.ndim)])


cdef int _raise_arrays(int err, const Py_buffer *qv, const Py_buffer *kv, seq_axis,
                       head_dim) except -1:
    """ValueError for a refusal of pe_rope_check_arrays, from this thread's
    detail (see its comment in pe_lib.h for what each field holds)."""
    cdef fastpe_error e
    fastpe_last_error(&e)
    if e.code != err or e.argument == NULL:
        return _raise(err)
    arg = e.argument.decode()
    cdef const Py_buffer *v = kv if arg == "k" else qv
    if arg == "head_dim":
        if e.limit == 2:
            raise ValueError(f"head_dim must be an integer >= 2, got {head_dim}")
        raise ValueError(f"head_dim must be an integer <= {int(e.limit)}, got {head_dim}")
    if arg == "seq_axis":
        raise ValueError(f"seq_axis={seq_axis} is not an axis of {'qk'[e.index]} before its last")
    if err == FASTPE_EOVERLAP:
        raise ValueError("q and k must not share memory")
    if err == PE_EINVAL:
        raise ValueError(f"{arg} must be aligned to its dtype")
    if err == FASTPE_ESTRIDE:
        if e.index == v.ndim - 1:
            raise ValueError(f"{arg}'s last axis must be contiguous, got strides "
                             f"{_axes(v, True)}")
        raise ValueError(f"{arg}'s rows overlap (strides {_axes(v, True)}): it cannot be "
                         "rotated in place")
    if err == FASTPE_ESIZE:
        if e.index < 0 and e.value < 2:
            raise ValueError(f"{arg} must have shape (..., seq, ..., head_dim), got "
                             f"{_axes(v, False)}")
        if e.index < 0:
            raise ValueError("q (and k) must have shape (..., seq, ..., head_dim), the same "
                             "number of axes")
        if e.index == v.ndim - 1:
            raise ValueError(f"{arg}'s last axis ({int(e.value)}) is shorter than "
                             f"head_dim={int(e.limit)}")
        raise ValueError(f"q and k must agree on the batch and sequence axes, got "
                         f"{_axes(qv, False)} and {_axes(kv, False)}")
    return _raise(err)


def rope_check_arrays(q, k, head_dim, seq_axis):
    """(head_dim, sequence axis) of apply_rope's q and k (ndarrays; bfloat16 as
    its uint16 bits; k None: q alone) after the library's checks, which raise
    with the message naming the argument.  head_dim None: q's last axis."""
    cdef Py_buffer qv, kv
    cdef bint have_k = False
    cdef int64_t hd = PE_ROPE_HEAD_DIM_OF_Q, got = 0
    cdef int sa = 0
    # (beyond +-2^62 only the size of an integer matters: the library refuses it,
    # and the message shows the value given)
    if head_dim is not None:
        hd = max(-2**62, min(head_dim, 2**62))
    cdef int64_t axis = max(-2**62, min(seq_axis, 2**62))
    PyObject_GetBuffer(q, &qv, PyBUF_STRIDES)
    try:
        if k is not None:
            PyObject_GetBuffer(k, &kv, PyBUF_STRIDES)
            have_k = True
        _rope_check_arrays(&qv, &kv if have_k else NULL, hd, axis, &got, &sa, head_dim,
                           seq_axis)
    finally:
        PyBuffer_Release(&qv)
        if have_k:
            PyBuffer_Release(&kv)
    return got, sa


def check_out(out, other, tuple shape):
    """The library's checks of a caller's output (pe_check_out): ``out`` of
    ``shape``, or rope_cache's pair (``out``, ``other``), as ndarrays (bfloat16 as
    its uint16 bits) whose dtype and writability the caller checked; raises
    ValueError naming out."""
    cdef Py_buffer v[2]
    cdef pe_rope_array a[2]
    cdef _RopeAxes64 ax[2]
    cdef int64_t want[65]
    cdef fastpe_error e
    cdef int i, err, held = 0, n = 1 if other is None else 2
    # (more axes than any array has: the library refuses the count)
    cdef int nd = len(shape) if len(shape) <= 65 else 66
    for i in range(min(nd, 65)):
        want[i] = shape[i]
    try:
        for i in range(n):
            PyObject_GetBuffer(out if i == 0 else other, &v[i], PyBUF_STRIDES)
            held += 1
            _rope_array_of(&a[i], &ax[i], &v[i], b"out" if n == 1 else (b"cos", b"sin")[i])
        err = pe_check_out(&a[0], &a[1] if n == 2 else NULL, want, nd)
        if err == FASTPE_OK:
            return
        fastpe_last_error(&e)
        if err == FASTPE_EOVERLAP:
            raise ValueError("out's cos and sin must not share memory")
        i = 1 if n == 2 and e.argument != NULL and e.argument.decode() == "sin" else 0
        if err == FASTPE_ESIZE:
            raise ValueError(f"out must have shape {shape}, got {_axes(&v[i], False)}")
        if err == PE_EINVAL:
            raise ValueError("out must be aligned to its dtype (got a misaligned buffer)")
        if err == FASTPE_ESTRIDE and e.index == v[i].ndim - 1:
            raise ValueError(f"out's last axis must be contiguous (stride {v[i].itemsize}), "
                             f"got strides {_axes(&v[i], True)}")
        if err == FASTPE_ESTRIDE and e.index != v[i].ndim - 2:  # an outer axis
            raise ValueError(f"out's {'' if n == 1 else ('cos ', 'sin ')[i]}rows overlap "
                             f"(strides {_axes(&v[i], True)})")
        if err == FASTPE_ESTRIDE:
            raise ValueError("out's rows must not overlap or run backwards (row stride >= "
                             f"{v[i].shape[v[i].ndim - 1] * v[i].itemsize} bytes), got strides "
                             f"{_axes(&v[i], True)}")
        _raise(err)
    finally:
        for i in range(held):
            PyBuffer_Release(&v[i])


cdef int _rope_check_tokens(const Py_buffer *pv, bint pos_float, const Py_buffer *ov,
                            int64_t batch, int64_t seq, pe_rope_span *span) except -1:
    """The library's checks of apply_rope's positions (``pv``, int64 or float64,
    finite) or offsets (``ov``, int64; one of them NULL) for batch x seq tokens; raises
    from the detail."""
    cdef pe_rope_array a
    cdef _RopeAxes64 ax
    cdef fastpe_error e
    cdef int err
    _rope_array_of(&a, &ax, pv if pv != NULL else ov, b"positions" if pv != NULL else b"offset")
    err = pe_rope_check_tokens(&a if pv != NULL else NULL, pos_float, &a if pv == NULL else NULL,
                               0, batch, seq, span)
    if err == FASTPE_OK:
        return 0
    fastpe_last_error(&e)
    if err == FASTPE_ESIZE and pv != NULL:
        raise ValueError(f"positions must have shape ({seq},) or ({batch}, {seq}), got "
                         f"{_axes(pv, False)}")
    if err == FASTPE_ESIZE:
        raise ValueError(f"offset must be an int or one per batch entry ({batch}), got shape "
                         f"{_axes(ov, False)}")
    if err == FASTPE_ERANGE and pv != NULL:
        _raise_position(pv, pos_float, &e)
    if err == FASTPE_ERANGE:
        raise ValueError("offset must stay within +-2**62")
    return _raise(err)


cdef int _raise_position(const Py_buffer *pv, bint pos_float, const fastpe_error *e) except -1:
    """ValueError for a position the library's token checks refused: a float one
    not finite, an integer one beyond +-2^62, read back exactly from the buffer at
    the detail's flat (C-order) index."""
    cdef const char *p = <const char *>pv.buf
    cdef int64_t rest = e.index
    cdef int i
    if pos_float:
        raise ValueError("positions must be finite (got NaN or inf)")
    for i in range(pv.ndim - 1, -1, -1):
        p += (rest % pv.shape[i]) * pv.strides[i]
        rest //= pv.shape[i]
    raise ValueError(f"positions must stay within +-2**62, got {(<const int64_t *>p)[0]}")


cdef int _rope_check_seq(int64_t seq_len, int64_t offset, seq_given, offset_given) except -1:
    """The library's check of rope_cache's seq_len and offset (pe_rope_check_tokens of
    a scalar offset); raises from the detail, naming the values as given."""
    cdef pe_rope_span span
    cdef fastpe_error e
    cdef int err = pe_rope_check_tokens(NULL, 0, NULL, offset, 1, seq_len, &span)
    if err == FASTPE_OK:
        return 0
    fastpe_last_error(&e)
    if err == FASTPE_ESIZE and seq_len < 0:
        raise ValueError(f"seq_len must be a non-negative integer, got {seq_given}")
    if err == FASTPE_ESIZE:
        raise ValueError(f"seq_len must be an integer <= {int(e.limit)}, got {seq_given}")
    if err == FASTPE_ERANGE and offset < 0:
        raise ValueError(f"offset must be an integer >= -{int(e.limit)}, got {offset_given}")
    if err == FASTPE_ERANGE:
        raise ValueError(f"offset must be an integer <= {int(e.limit)}, got {offset_given}")
    return _raise(err)


cdef inline int64_t _clamp_i64(x) except? -1:
    """A Python int as int64, saturated beyond int64's range (the library refuses
    such values; the message shows the value given)."""
    cdef int overflow = 0
    cdef int64_t v = PyLong_AsLongLongAndOverflow(x, &overflow)
    if overflow:
        return INT64_MAX if overflow > 0 else INT64_MIN
    return v


def rope_check_seq(seq_len, offset):
    """The library's check of rope_cache's ``seq_len`` and ``offset`` (Python ints of
    any size); raises ValueError naming the one refused, with the value given."""
    _rope_check_seq(_clamp_i64(seq_len), _clamp_i64(offset), seq_len, offset)


def rope_check_tokens(positions, offset, int64_t batch, int64_t seq):
    """(lo, hi): the smallest and largest position of apply_rope's batch x seq
    tokens, after the library's checks of ``positions`` (an int64 or float64
    ndarray) or, when it is None, of ``offset`` (an int64 ndarray of shape (),
    (1,) or (batch,)); hi < lo when there are none."""
    cdef Py_buffer v
    cdef pe_rope_span span
    cdef bint real = positions is not None and positions.dtype.kind == "f"
    PyObject_GetBuffer(positions if positions is not None else offset, &v, PyBUF_STRIDES)
    try:
        _rope_check_tokens(&v if positions is not None else NULL, real,
                           &v if positions is None else NULL, batch, seq, &span)
    finally:
        PyBuffer_Release(&v)
    if real and span.hi >= span.lo:
        return span.lo, span.hi
    return span.ilo, span.ihi


def rope_check_range(lo, hi, double limit, int64_t axis=-1):
    """The library's check that positions lo .. hi (none when hi < lo; axis: of
    multi-axis positions, or -1) stay within +-limit, the exact angle reduction
    of their frequencies (Encoder.max_position); ValueError naming them."""
    cdef pe_rope_span span
    span.lo = lo
    span.hi = hi
    span.ilo = span.ihi = 0
    if pe_rope_check_span(&span, limit, axis) == FASTPE_OK:
        return
    largest = max(abs(lo), abs(hi))
    if axis < 0:
        raise ValueError(f"positions must stay within +-{int(limit)} for these frequencies "
                         f"(exact angle reduction); got up to {largest}")
    raise ValueError(f"positions[..., {axis}] must stay within +-{int(limit)} for the "
                     f"frequencies of axis {axis} (exact angle reduction); got up to {largest}")


def rope_check_axes_tokens(positions, int64_t n, int64_t batch, int64_t seq, str what):
    """(lo, hi): lists of each axis's smallest and largest coordinate (hi < lo:
    no tokens) of multi-axis positions (an int64 or float64 ndarray whose last axis
    holds a token's n coordinates) after the library's checks: a cache's (seq < 0)
    of any shape (..., n), a rotation's of batch x seq tokens (seq, n) or (1 or
    batch, seq, n).  ``what`` ends the shape messages (" for sections=...")."""
    cdef Py_buffer v
    cdef pe_rope_array a
    cdef _RopeAxes64 ax
    cdef pe_rope_span spans[64]
    cdef fastpe_error e
    cdef int err
    cdef int64_t i
    cdef bint real = positions.dtype.kind == "f"
    PyObject_GetBuffer(positions, &v, PyBUF_STRIDES)
    try:
        _rope_array_of(&a, &ax, &v, b"positions")
        err = pe_rope_check_axes_tokens(&a, real, n, batch, seq, spans)
        if err != FASTPE_OK:
            fastpe_last_error(&e)
            if err == FASTPE_ESIZE and e.index >= 0:
                raise ValueError(f"positions must have shape (..., {n}){what}, got "
                                 f"{_axes(&v, False)}")
            if err == FASTPE_ESIZE and e.argument != NULL and e.argument.decode() == "positions":
                raise ValueError(f"positions must have shape ({seq}, {n}) or ({batch}, {seq}, "
                                 f"{n}){what}, got {_axes(&v, False)}")
            if err == FASTPE_ERANGE:
                _raise_position(&v, real, &e)
            _raise(err)
    finally:
        PyBuffer_Release(&v)
    if real and n > 0 and spans[0].hi >= spans[0].lo:
        return [spans[i].lo for i in range(n)], [spans[i].hi for i in range(n)]
    return [spans[i].ilo for i in range(n)], [spans[i].ihi for i in range(n)]
