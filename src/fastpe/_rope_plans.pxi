# Included by kernel.pyx: the plan memories of fastpe.apply_rope and rope_cache, keyed
# by the frequency arguments' values, so that a repeated call skips the checks.

#: rope_plan_key(...) -> (Encoder, attention factor): the frequency rules whose
#: result does not depend on the sequence length, filled by fastpe._rope_rules after a
#: full validation and read by rope_apply (_rope_fast.pxi).  Bounded by ENCODERS_MAX.
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


#: (rope_plan_key(...), sections, section_layout) -> (RopeAxes, attention factor):
#: multi-axis frequency arguments already checked by fastpe._rope_axes, read by
#: rope_apply_axes (_rope_fast.pxi).  Bounded by ENCODERS_MAX.
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
