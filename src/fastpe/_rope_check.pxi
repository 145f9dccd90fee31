# Included by kernel.pyx: the array checks of apply_rope's q and k, made once by
# the library (lib/src/rope_check.c, pe_rope_check_arrays) for the general path
# and the fast paths alike; a refusal's error detail becomes the message here.

cdef extern from "pe_lib.h" nogil:
    ctypedef struct pe_rope_array:
        const char *name
        const char *buf
        int64_t itemsize
        int ndim
        const int64_t *shape
        const int64_t *strides
    int64_t PE_ROPE_HEAD_DIM_OF_Q
    int pe_rope_check_disjoint(const pe_rope_array *a, const pe_rope_array *b)
    ctypedef struct pe_rope_span:
        int64_t ilo
        int64_t ihi
        double lo
        double hi
    int pe_rope_check_tokens(const pe_rope_array *pos, int pos_float, const pe_rope_array *off,
                             int64_t offset, int64_t batch, int64_t seq, pe_rope_span *span)
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


def rope_check_disjoint(cos, sin):
    """rope_cache's ``out``: the library's check that cos and sin (ndarrays;
    bfloat16 as its uint16 bits) share no element, each row of either its own."""
    cdef Py_buffer cv, sv
    cdef pe_rope_array c, s
    cdef _RopeAxes64 ca, sa
    cdef fastpe_error e
    cdef int err
    PyObject_GetBuffer(cos, &cv, PyBUF_STRIDES)
    try:
        PyObject_GetBuffer(sin, &sv, PyBUF_STRIDES)
        try:
            _rope_array_of(&c, &ca, &cv, b"cos")
            _rope_array_of(&s, &sa, &sv, b"sin")
            err = pe_rope_check_disjoint(&c, &s)
            if err == FASTPE_ESTRIDE:
                fastpe_last_error(&e)
                arg = e.argument.decode()
                raise ValueError(f"out's {arg} rows overlap (strides "
                                 f"{_axes(&cv if arg == 'cos' else &sv, True)})")
            if err != FASTPE_OK:
                raise ValueError("out's cos and sin must not share memory")
        finally:
            PyBuffer_Release(&sv)
    finally:
        PyBuffer_Release(&cv)


cdef int _rope_check_tokens(const Py_buffer *pv, bint pos_float, const Py_buffer *ov,
                            int64_t batch, int64_t seq, pe_rope_span *span) except -1:
    """The library's checks of apply_rope's positions (``pv``, int64 or float64)
    or offsets (``ov``, int64; one of them NULL) for batch x seq tokens; raises
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
    if err == FASTPE_ERANGE:
        raise ValueError("offset must stay within +-2**62")
    return _raise(err)


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
