# Included by kernel.pyx: the fast paths of fastpe.apply_rope and rope_cache, for
# arguments the library's plan cache serves (_rope_plans.pxi): one C call, no Python
# validation; anything else falls through to the general path (fastpe._rope_apply).

cdef extern from "pe_lib.h" nogil:
    const double *pe_rope_plan_lows(const pe_rope_plan *plan, int slot)

cdef bint _fast_axes_ids(arr, int64_t rows, int64_t cols, const pe_rope_axes_plan *pl) except -1:
    """Whether ``arr`` is a C-contiguous native int64 ndarray of shape (cols, n_axes),
    or (1 or rows, cols, n_axes), that passes the library's checks of multi-axis
    positions, column a within the exact reduction of axis a's frequencies (the
    general path's checks: it explains a refusal)."""
    cdef Py_buffer v
    cdef pe_rope_array a
    cdef _RopeAxes64 ax
    cdef pe_rope_span spans[64]
    cdef int64_t i, n = pl.n_axes
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
            _rope_array_of(&a, &ax, &v, b"positions")
            ok = pe_rope_check_axes_tokens(&a, False, n, rows, cols, spans) == FASTPE_OK
            i = 0
            while ok and i < n:
                ok = pe_rope_check_span(&spans[i], pl.max_position[i], i) == FASTPE_OK
                i += 1
        return ok
    finally:
        PyBuffer_Release(&v)


def rope_apply_axes(q, k, rope_parameters, head_dim, offset, positions, sections,
                    section_layout, seq_axis, layout, max_position_embeddings, precision,
                    inv_freq, attention_factor, num_threads):
    """fastpe.apply_rope with multi-axis positions for the common case --
    C-contiguous ndarrays, C-contiguous int64 positions, listed frequencies or a
    remembered rule, sections the library accepts (_rope_axes_plan) -- or None to
    decline (the general path then validates and explains)."""
    cdef Py_buffer qv, kv
    cdef bint have_k = False
    cdef char qkind, kkind = 0
    cdef int64_t sa, hd = PE_ROPE_HEAD_DIM_OF_Q, batch, S
    cdef int nt, axis, slot = -1
    cdef double attention = 1.0
    cdef const pe_rope_axes_plan *pl = NULL
    if attention_factor is not None or not _as_i64(seq_axis, &sa) \
            or type(q) is not _NDARRAY or (k is not None and type(k) is not _NDARRAY) \
            or not (type(offset) is int and offset == 0):
        return None
    if type(layout) is not str or (layout != "half" and layout != "interleaved"):
        return None
    nt = _fast_threads(num_threads)
    if nt < 0 or (head_dim is not None and not _as_i64(head_dim, &hd)):
        return None
    qkind = _rope_fast_buffer(q, &qv)
    if qkind == 0:
        return None
    try:
        pl = _rope_axes_plan(rope_parameters,
                             qv.shape[qv.ndim - 1] if head_dim is None else head_dim,
                             max_position_embeddings, precision, inv_freq, sections,
                             section_layout, &slot)
        if pl == NULL:
            return None
        attention = pl.attention
        if k is not None:
            kkind = _rope_fast_buffer(k, &kv)
            have_k = kkind != 0
            if not have_k:
                return None
        # the library's checks, as on the general path: one message either way
        _rope_check_arrays(&qv, &kv if have_k else NULL, hd, sa, &hd, &axis)
        if 2 * pl.nf > hd:    # (the general path explains)
            return None
        sa = axis
        batch = qv.shape[0] if sa != 0 else 1
        S = qv.shape[sa]
        # positions kept in q's or k's memory would change while q is rotated
        if _aliases(positions, &qv, &kv, have_k) \
                or not _fast_axes_ids(positions, batch, S, pl):
            return None
        if (<object>positions).ndim == 2:
            positions = (<object>positions).reshape(1, S, pl.n_axes)
        _rope_run_axes(&qv, qkind, &kv if have_k else NULL, kkind, pl, sa, positions,
                       layout == "half", attention, nt)
    finally:
        pe_rope_axes_plan_done(pl, slot)
        PyBuffer_Release(&qv)
        if have_k:
            PyBuffer_Release(&kv)
    return q if k is None else (q, k)


cdef void _axes_caches(const void *tab, bint tab64, real *cos, real *sin, int64_t n,
                       int64_t nf, double attention, bint half) noexcept nogil:
    """rope_cache's layout of the [sin | cos] rows ``tab`` (n rows of 2 nf; real's
    type, or float64 times ``attention`` rounded once into real with ``tab64``), as
    fastpe._rope_args._write_caches writes them."""
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


cdef void _axes_caches16(const uint16_t *tab, uint16_t *cos, uint16_t *sin, int64_t n,
                         int64_t nf, bint half) noexcept nogil:
    """_axes_caches for 16-bit entries (their bits), from rows already rounded."""
    cdef int64_t r, j, o, W = 2 * nf
    for r in range(n):
        o = r * W
        for j in range(nf):
            if half:
                cos[o + j] = cos[o + nf + j] = tab[o + nf + j]
                sin[o + j] = sin[o + nf + j] = tab[o + j]
            else:
                cos[o + 2 * j] = cos[o + 2 * j + 1] = tab[o + nf + j]
                sin[o + 2 * j] = sin[o + 2 * j + 1] = tab[o + j]


def rope_cache_axes_fast(head_dim, rope_parameters, seq_len, offset, positions, sections,
                         section_layout, layout, dtype, max_position_embeddings, precision,
                         inv_freq, attention_factor, out, num_threads,
                         bint correctly_rounded=False):
    """fastpe.rope_cache with sections for the common case -- the arguments
    rope_apply_axes serves, a C-contiguous (n, n_axes) int64 ndarray of positions,
    float32/float64 (``correctly_rounded``: float16/bfloat16 too) into new arrays --
    or None to decline (the general path then validates and explains).
    ``correctly_rounded``: each entry the attention factor times its sine or cosine,
    rounded once into the dtype, as the general path's."""
    cdef const pe_rope_axes_plan *pl
    cdef Py_buffer pv
    cdef pe_rope_axis ax[64]
    cdef int64_t n, nf
    cdef int nt, err, i, slot = -1
    cdef char want, kind
    cdef double attention = 1.0
    cdef bint tab64, half, scaled
    cdef void *tp
    cdef void *cp
    cdef void *sp
    if attention_factor is not None or out is not None or seq_len is not None \
            or not (type(offset) is int and offset == 0) or type(positions) is not _NDARRAY \
            or type(layout) is not str or (layout != "half" and layout != "interleaved"):
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if correctly_rounded and want == c'x':
        want = _half_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    shape = (<object>positions).shape
    if len(shape) != 2 or shape[0] < 1:
        return None
    n = shape[0]
    pl = _rope_axes_plan(rope_parameters, head_dim, max_position_embeddings, precision,
                         inv_freq, sections, section_layout, &slot)
    if pl == NULL:
        return None
    attention = pl.attention
    try:
        nf = pl.nf
        # (the general path checks the memory of large requests; _fast_axes_ids runs
        # the library's checks of the positions, as the general path does)
        if (8 + 2 * 8) * <double>n * 2 * nf >= _small_request \
                or not _fast_axes_ids(positions, 0, n, pl):
            return None
        dt = _F64 if want == c'd' else _F16 if want == c'e' else _U16 if want == c'b' else _F32
        # (correctly rounded rows come scaled, in the caches' type)
        tab64 = not correctly_rounded and (attention != 1.0 or want == c'd')
        kind = c'd' if tab64 else c'f' if want == 0 else want
        table = _np_empty((n, 2 * nf), _F64 if tab64 else dt)
        cos, sin = _np_empty((n, 2 * nf), dt), _np_empty((n, 2 * nf), dt)
        tp = _data(table)
        cp = _data(cos)
        sp = _data(sin)
        half = layout == "half"
        scaled = tab64 and attention != 1.0
        PyObject_GetBuffer(positions, &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        try:
            _axes_rows(pl, ax, pv.buf, False, 1, n)  # (int64: _fast_axes_ids)
            for i in range(pl.nax):
                ax[i].rq.accurate = correctly_rounded
                ax[i].rq.scale = attention if correctly_rounded else 1.0
            with nogil:
                err = pe_rope_table_axes(tp, kind, nf, n, ax, pl.nax, nt, _poll_signals, NULL)
        finally:
            PyBuffer_Release(&pv)
    finally:
        pe_rope_axes_plan_done(pl, slot)
    if err != FASTPE_OK:    # (an interrupt, or memory: the general path raises it)
        return None
    if want == c'd':
        _axes_caches[double](tp, scaled, <double *>cp, <double *>sp, n, nf, attention, half)
    elif want == c'e' or want == c'b':
        _axes_caches16(<const uint16_t *>tp, <uint16_t *>cp, <uint16_t *>sp, n, nf, half)
        if want == c'b':
            return cos.view(_BF16), sin.view(_BF16)
    else:
        _axes_caches[float](tp, scaled, <float *>cp, <float *>sp, n, nf, attention, half)
    return cos, sin


cdef inline char _rope_fast_buffer(x, Py_buffer *view) except -1:
    """Hold the buffer of a plain writable ndarray of float16/32/64 entries with at
    least two axes, none empty: its kind ('e', 'f', 'd'), or 0 (nothing held) for
    anything else, which the general path converts or explains."""
    cdef int j
    cdef char kind
    if type(x) is not _NDARRAY:
        return 0
    try:
        PyObject_GetBuffer(x, view, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
    except (BufferError, ValueError, TypeError):   # read-only, or no buffer format
        return 0
    kind = _native_code(view.format)
    if (kind != c'f' and kind != c'd' and kind != c'e') or view.ndim < 2:
        PyBuffer_Release(view)
        return 0
    for j in range(view.ndim):
        if view.shape[j] == 0:
            PyBuffer_Release(view)
            return 0
    return kind


cdef bint _fast_int64(arr, Py_buffer *view) except -1:
    """Hold the buffer of a C-contiguous native int64 ndarray (positions or
    offsets); False (nothing held) for anything else, which the general path
    converts."""
    if type(arr) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(arr, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, ValueError, TypeError):
        return False
    if view.itemsize != 8 or _native_code(view.format) not in (c'l', c'q'):
        PyBuffer_Release(view)
        return False
    return True


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
               max_position_embeddings, precision, inv_freq, attention_factor, num_threads,
               bint accurate=False):
    """fastpe.apply_rope for the common case -- C-contiguous ndarrays, an int
    offset (or an int64 ndarray of one per batch entry, or int64 position ids),
    frequencies already planned -- or None to decline (the general path then
    validates and explains).  ``accurate``: correctly_rounded=True."""
    return _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                            layout, max_position_embeddings, precision, inv_freq,
                            attention_factor, num_threads, accurate)


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
               xpos_center=None, correctly_rounded=False):
    # (the general path's parameters, one for one: tests/test_fast_path.py checks
    # them; no **kwargs, whose dict costs a tenth of the call's overhead)
    # (correctly_rounded: only the bools here; the one-row frequencies planned below
    # are those the option covers, the others the general path refuses)
    if sections is None and xpos_scale_base is None and xpos_center is None \
            and (correctly_rounded is False or correctly_rounded is True) \
            and (rope_parameters is None or type(rope_parameters) is dict) \
            and type(section_layout) is str \
            and (section_layout == "contiguous" or section_layout == "interleaved"):
        done = _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                                layout, max_position_embeddings, precision, inv_freq,
                                attention_factor, num_threads, correctly_rounded)
        if done is not None:
            return done
    return _rope_general(q, k, rope_parameters=rope_parameters, head_dim=head_dim,
                         offset=offset, positions=positions, sections=sections,
                         section_layout=section_layout, seq_axis=seq_axis, layout=layout,
                         max_position_embeddings=max_position_embeddings, precision=precision,
                         inv_freq=inv_freq, attention_factor=attention_factor,
                         num_threads=num_threads, xpos_scale_base=xpos_scale_base,
                         xpos_center=xpos_center, correctly_rounded=correctly_rounded)


cdef object _rope_apply_fast(q, k, rope_parameters, head_dim, offset, positions, seq_axis,
                             layout, max_position_embeddings, precision, inv_freq,
                             attention_factor, num_threads, bint accurate):
    cdef Py_buffer qv, kv
    cdef bint have_k = False
    cdef char qkind, kkind = 0
    cdef int64_t off = 0, sa, hd = PE_ROPE_HEAD_DIM_OF_Q, batch, S
    cdef int nt, axis, slot = -1
    cdef const pe_rope_plan *pl = NULL
    cdef pe_rope_handle *h
    cdef Py_buffer iv
    cdef pe_rope_span span
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
    qkind = _rope_fast_buffer(q, &qv)
    if qkind == 0:
        return None
    try:
        pl = <const pe_rope_plan *>_rope_plan(
            rope_parameters, qv.shape[qv.ndim - 1] if head_dim is None else head_dim,
            max_position_embeddings, precision, inv_freq, &slot)
        if pl == NULL:
            return None
        h = <pe_rope_handle *>pl.h
        if k is not None:
            kkind = _rope_fast_buffer(k, &kv)
            have_k = kkind != 0
            if not have_k:
                return None
        # the library's checks, as on the general path: one message either way
        _rope_check_arrays(&qv, &kv if have_k else NULL, hd, sa, &hd, &axis)
        # (2 nf > hd: never planned so; the rows below rely on it)
        if 2 * h.sp.nf > hd:
            return None
        sa = axis
        batch = qv.shape[0] if sa != 0 else 1
        S = qv.shape[sa]
        # positions or offsets kept in q's or k's memory would change while q is
        # rotated: the general path copies them first
        if (positions is not None and _aliases(positions, &qv, &kv, have_k)) \
                or (offsets is not None and _aliases(offsets, &qv, &kv, have_k)):
            return None
        # the library's checks of positions or offsets, as on the general path; a
        # range beyond the exact reduction is the general path's to explain
        if positions is not None or offsets is not None:
            ids = positions if positions is not None else offsets
            if not _fast_int64(ids, &iv):
                return None
            try:
                _rope_check_tokens(&iv if positions is not None else NULL, False,
                                   &iv if positions is None else NULL, batch, S, &span)
                # (one offset per batch entry; the general path broadcasts the others)
                if positions is None and (iv.ndim != 1 or iv.shape[0] != batch):
                    return None
            finally:
                PyBuffer_Release(&iv)
            if pe_rope_check_span(&span, h.max_position, -1) != FASTPE_OK:
                return None
            if positions is not None and (<object>positions).ndim == 1:
                positions = (<object>positions).reshape(1, S)
        else:
            # (the span in doubles: no int64 overflow; beyond the reduction's bound, far
            # inside +-2^62, the general path explains)
            span.lo, span.hi = <double>off, <double>off + <double>(S - 1)
            if pe_rope_check_span(&span, h.max_position, -1) != FASTPE_OK:
                return None
        _rope_run(&qv, qkind, &kv if have_k else NULL, kkind, &h.sp, h.plan,
                  <pe_anchor_cache *>&pl.ac, sa, off, offsets, positions, layout == "half",
                  h.attention, nt, accurate)
    finally:
        PyBuffer_Release(&qv)
        if have_k:
            PyBuffer_Release(&kv)
        pe_rope_plan_done(pl, slot)
    return q if k is None else (q, k)


cdef object _F16 = _np.dtype(_np.float16)
cdef object _F16_TYPE = _np.float16
cdef object _U16 = _np.dtype(_np.uint16)
#: ml_dtypes' bfloat16 (its type, its dtype) once looked up; False without ml_dtypes
cdef object _BF16_TYPE = None
cdef object _BF16 = None


cdef char _half_dtype(dtype) except 0:
    """'e' for the plain spellings of float16, 'b' for bfloat16's (ml_dtypes'
    type or dtype, or "bfloat16" with ml_dtypes installed), 'x' else."""
    global _BF16_TYPE, _BF16
    if dtype is _F16_TYPE or dtype is _F16 or (type(dtype) is str and dtype == "float16"):
        return c'e'
    if _BF16 is None:
        try:
            import ml_dtypes
            _BF16_TYPE, _BF16 = ml_dtypes.bfloat16, _np.dtype(ml_dtypes.bfloat16)
        except ImportError:     # (the general path names the extra)
            _BF16_TYPE = _BF16 = False
    if _BF16 is not False and (dtype is _BF16_TYPE or dtype is _BF16
                               or (type(dtype) is str and dtype == "bfloat16")):
        return c'b'
    return c'x'


cdef object _rope_cache_half(pe_rope_handle *h, char want, int64_t n, int64_t W,
                             const int64_t *pp, int64_t off, int lay, int nt):
    """rope_cache_fast's new float16/bfloat16 (``want`` 'e' or 'b') caches of n
    rows, or None when the library refuses (the general path then raises it)."""
    cdef int err
    cdef uint16_t *cp
    cdef uint16_t *sp
    dt = _F16 if want == c'e' else _U16     # (bfloat16: filled as its uint16 bits)
    cos, sin = _np_empty((n, W), dt), _np_empty((n, W), dt)
    cp = <uint16_t *>_data(cos)
    sp = <uint16_t *>_data(sin)
    with nogil:
        if want == c'e':
            err = fastpe_rope_cache_f16(<fastpe_rope *>h, cp, sp, n, W, pp, off, lay, nt)
        else:
            err = fastpe_rope_cache_bf16(<fastpe_rope *>h, cp, sp, n, W, pp, off, lay, nt)
    if err != FASTPE_OK:
        return None
    return (cos, sin) if want == c'e' else (cos.view(_BF16), sin.view(_BF16))


# the most positions a list may hold on rope_cache's small-call path (a decoding
# step's few; longer lists take the general path's conversion)
cdef enum:
    _LIST_IDS = 64


cdef bint _int64_list(list xs, int64_t *ids, int64_t *n) except -1:
    """A short list of Python ints (rope_cache's positions) into ids, exactly as
    the general path converts them; False for anything else, which the general
    path converts and checks."""
    cdef Py_ssize_t i, m = len(xs)
    cdef int overflow = 0
    if m < 1 or m > _LIST_IDS:
        return False
    for i in range(m):
        x = xs[i]
        if type(x) is not int:
            return False
        ids[i] = PyLong_AsLongLongAndOverflow(x, &overflow)
        if overflow:
            return False
    n[0] = m
    return True


def rope_cache_fast(head_dim, rope_parameters, seq_len, offset, positions, layout, dtype,
                    max_position_embeddings, precision, inv_freq, attention_factor, out,
                    num_threads, bint correctly_rounded=False):
    """fastpe.rope_cache for the common case -- a planned rule, an int seq_len and
    offset or 1-D positions (an int64 ndarray, or a short list of ints), float32/float64
    into new arrays or
    a pair of plain ndarrays of the result's shape -- through the C API's cache
    function, or None to decline (the general path then validates and explains).
    ``correctly_rounded``: every dtype (float16/bfloat16 into new arrays), through a
    copy of the plan's handle set to the C API's correct rounding (the shared handle
    itself is never changed): the one correctly rounded result, as the general
    path's."""
    cdef const pe_rope_plan *pl = NULL
    cdef pe_rope_handle *h
    cdef pe_rope_handle exact
    cdef Py_buffer cv, sv, pv
    cdef bint have_out = False, have_pos = False
    cdef int64_t n, W, off = 0, crow = 0, srow = 0, cstride = 0, sstride = 0
    cdef const int64_t *pp = NULL
    cdef int64_t ids[_LIST_IDS]
    cdef int nt, lay, err, slot = -1
    cdef char want
    if attention_factor is not None or type(layout) is not str \
            or (layout != "half" and layout != "interleaved"):
        return None
    lay = FASTPE_LAYOUT_SPLIT if layout == "half" else FASTPE_LAYOUT_INTERLEAVED
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if correctly_rounded and want == c'x' and out is None:
        want = _half_dtype(dtype)   # (new 16-bit caches: correctly rounded ones only)
    if nt < 0 or want == c'x':
        return None
    if positions is None:
        if type(seq_len) is not int or type(offset) is not int:
            return None
        n, off = _clamp_i64(seq_len), _clamp_i64(offset)
        # the general path's check of the range, with its message
        _rope_check_seq(n, off, seq_len, offset)
        if n == 0:  # (an empty cache: the general path's)
            return None
    else:
        if seq_len is not None or type(offset) is not int or offset != 0:
            return None
        if type(positions) is list:
            if not _int64_list(<list>positions, ids, &n):
                return None
            pp = ids
        elif type(positions) is not _NDARRAY:
            return None
        else:
            try:
                PyObject_GetBuffer(positions, &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
            except (BufferError, ValueError, TypeError):
                return None
            have_pos = True
    try:
        pl = <const pe_rope_plan *>_rope_plan(rope_parameters, head_dim,
                                              max_position_embeddings, precision, inv_freq,
                                              &slot)
        if pl == NULL:
            return None
        h = <pe_rope_handle *>pl.h
        if correctly_rounded:
            # (the shared handle keeps the low parts its accurate rows reuse, counted
            # in the plan cache's bytes: made here, or the copy would make its own
            # every call)
            if pe_rope_plan_lows(pl, slot) == NULL and h.plan != NULL:
                return None
            exact = h[0]
            exact.rounding = FASTPE_ROUND_CORRECT
            h = &exact
        W = 2 * h.sp.nf
        if have_pos:
            if pv.ndim != 1 or pv.shape[0] < 1 or pv.itemsize != 8 \
                    or _native_code(pv.format) not in (c'l', c'q'):
                return None
            n = pv.shape[0]
            pp = <const int64_t *>pv.buf
        if (8 + 2 * 8) * <double>n * W >= _small_request:   # the general path checks memory
            return None
        if want == c'e' or want == c'b':
            return _rope_cache_half(h, want, n, W, pp, off, lay, nt)
        if out is None:
            dt = _F64 if want == c'd' else _F32
            result = (_np_empty((n, W), dt), _np_empty((n, W), dt))
        else:
            if type(out) is not tuple or len(<tuple>out) != 2:
                return None
            result = out
        # (a dtype given with out: out's must be it, else the general path explains)
        if not _fast_out(result[0], &cv, want, &crow, W, &cstride):
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
                    err = fastpe_rope_cache_f32(<fastpe_rope *>h, <float *>cv.buf,
                                                <float *>sv.buf, n, cstride, pp, off, lay, nt)
                else:
                    err = fastpe_rope_cache_f64(<fastpe_rope *>h, <double *>cv.buf,
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
        pe_rope_plan_done(pl, slot)
