# Included by kernel.pyx: how the fast paths of fastpe.apply_rope and rope_cache reach
# the library's plan cache (lib/src/plans.c, the only one): listed frequencies are read
# in place and keyed by their values there; a rope_parameters dict is converted to the
# library's fastpe_rope_params once, by the general path, and that conversion (no
# frequencies: those live in the plan cache) is remembered here by the dict's values.
# Multi-axis plans are entries of the same cache, keyed by their sections and by the
# list's or the rule's key.

cdef extern from "pe_lib.h" nogil:
    ctypedef struct pe_rope_plan:
        void *h             # struct fastpe_rope (pe_rope_handle)
        pe_anchor_cache ac
    const pe_rope_plan *pe_rope_plan_list(const void *w, int kind, int64_t nf, int *slot)
    const pe_rope_plan *pe_rope_plan_rule(const void *p, int64_t head_dim, int *slot)
    void pe_rope_plan_done(const pe_rope_plan *plan, int slot)
    void pe_plans_stats(int64_t *out)
    void pe_plans_kinds(int64_t *out)
    int pe_plans_set_max(int n)
    void pe_plans_clear()


cdef class RopeArgs:
    """A rule's parameters as the library reads them (a fastpe_rope_params, made by
    _capi.pxi's _new_params) and the head_dim they are for: what fastpe._rope_rules
    converted from a rope_parameters dict after a full validation.  Immutable once
    built."""
    cdef void *p
    cdef readonly int64_t head_dim

    def __cinit__(self, int64_t head_dim, dict fields):
        if "short_factor" in fields or "long_factor" in fields:
            raise ValueError("rules with factor lists depend on the length: not remembered")
        self.p = _new_params(fields)
        self.head_dim = head_dim

    def __dealloc__(self):
        free(self.p)


#: rope_plan_key(...) -> RopeArgs: the converted parameters of the rules whose
#: frequencies do not depend on the sequence length, filled by fastpe._rope_rules after
#: a full validation and read by the fast paths (_rope_fast.pxi).  Small entries (no
#: frequencies), so ROPE_ARGS_MAX of them keep a caller cycling over many configurations
#: on the fast path; oldest out first.
rope_args = {}
ROPE_ARGS_MAX = 4096
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


def remember_rope_args(key, RopeArgs args not None):
    """Keep the converted parameters ``args`` of the rope_plan_key ``key`` for the
    fast paths."""
    with _encoders_lock:
        rope_args[key] = args
        while len(rope_args) > ROPE_ARGS_MAX:
            del rope_args[next(iter(rope_args))]


cdef const void *_rope_plan(rope_parameters, head_dim, max_position_embeddings, precision,
                            inv_freq, int *slot, const int64_t *secs=NULL, int n_axes=0,
                            int layout=0) except? NULL:
    """The library's plan of the frequency arguments -- a pe_rope_plan, held until
    pe_rope_plan_done(plan, slot[0]); with ``n_axes`` sections ``secs`` in ``layout``
    (FASTPE_SECTIONS_*) a pe_rope_axes_plan, held until pe_rope_axes_plan_done -- or
    NULL to decline: arguments of other types, a dict whose conversion is not
    remembered, frequencies or sections the library refuses, frequencies that rotate
    more than head_dim dims (the general path then explains)."""
    cdef Py_buffer v
    cdef char code
    cdef const void *pl = NULL
    cdef RopeArgs args
    cdef int64_t hd, nf
    slot[0] = -1
    if not _as_i64(head_dim, &hd) or not 2 <= hd <= 2**31 or type(precision) is not str \
            or (max_position_embeddings is not None and type(max_position_embeddings) is not int):
        return NULL
    if inv_freq is None:
        key = _plan_key(rope_parameters, head_dim, max_position_embeddings, precision, None)
        found = (<dict>rope_args).get(key) if key is not None else None
        if found is None:
            return NULL
        args = <RopeArgs>found
        if n_axes:
            pl = pe_rope_plan_axes_rule(args.p, args.head_dim, secs, n_axes, layout, slot)
        else:
            pl = pe_rope_plan_rule(args.p, args.head_dim, slot)
    else:
        # listed frequencies: read in place, no conversion to remember
        if rope_parameters is not None or type(inv_freq) is not _NDARRAY:
            return NULL
        try:
            PyObject_GetBuffer(inv_freq, &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
        except (BufferError, ValueError, TypeError):
            return NULL
        code = _native_code(v.format)
        if v.ndim == 1 and v.shape[0] >= 1 and (code == c'f' or code == c'd') \
                and 2 * v.shape[0] <= hd:
            if n_axes:
                pl = pe_rope_plan_axes(v.buf, code, v.shape[0], secs, n_axes, layout, slot)
            else:
                pl = pe_rope_plan_list(v.buf, code, v.shape[0], slot)
        PyBuffer_Release(&v)
    if pl == NULL:
        return NULL
    if n_axes:
        if 2 * (<const pe_rope_axes_plan *>pl).nf > hd:
            pe_rope_axes_plan_done(<const pe_rope_axes_plan *>pl, slot[0])
            return NULL
    elif 2 * (<pe_rope_handle *>(<const pe_rope_plan *>pl).h).sp.nf > hd:
        pe_rope_plan_done(<const pe_rope_plan *>pl, slot[0])
        return NULL
    return pl


cdef bint _same_list(const double *a, const double[::1] w) noexcept:
    """Whether a plan's nf frequencies ``a`` are bitwise ``w``'s."""
    return memcmp(a, &w[0], <size_t>w.shape[0] * sizeof(double)) == 0


cdef class RopePlan(_Rows):
    """The library's plan of a list of frequencies ([sin | cos] rows of nf
    frequencies), held while this object lives: what the general path of
    apply_rope and rope_cache fills and rotates by.  With ``args``, the
    conversion of the rule that gave ``w``, it is the rule's entry
    (pe_rope_plan_rule), which the small-call paths then find by that rule;
    otherwise the entry of the list (pe_rope_plan_list), found by the frequencies'
    values: one entry per configuration either way.  ``args`` is kept only when
    the rule's plan holds exactly ``w``."""
    cdef const pe_rope_plan *pl
    cdef int slot
    cdef readonly RopeArgs args

    def __cinit__(self, w, RopeArgs args=None):
        cdef const double[::1] wv = _np.ascontiguousarray(w, dtype=_np.float64)
        cdef pe_rope_handle *h
        self.slot = -1
        if wv.shape[0] < 1:
            raise ValueError("w must list at least one frequency")
        if args is not None:
            self.pl = pe_rope_plan_rule(args.p, args.head_dim, &self.slot)
            h = <pe_rope_handle *>self.pl.h if self.pl != NULL else NULL
            if h != NULL and h.sp.nf == wv.shape[0] and _same_list(h.w, wv):
                self.args = args
            elif self.pl != NULL:
                pe_rope_plan_done(self.pl, self.slot)
                self.pl = NULL
        if self.pl == NULL:
            self.pl = pe_rope_plan_list(&wv[0], c'd', wv.shape[0], &self.slot)
        if self.pl == NULL:
            _raise_for(_last_error()[0] or FASTPE_ENOMEM)
        h = <pe_rope_handle *>self.pl.h
        self.spp = &h.sp
        self.pmem = h.plan
        self.acp = <pe_anchor_cache *>&self.pl.ac

    def __dealloc__(self):
        if self.pl != NULL:
            pe_rope_plan_done(self.pl, self.slot)

    @property
    def max_position(self):
        """The largest |position| the exact angle reduction allows."""
        return (<pe_rope_handle *>self.pl.h).max_position


def _c_plans(clear=False, max_entries=None):
    """(entries, bytes, plans built since load, entry bound, byte bound) of the
    library's plan cache (for tests); ``clear`` drops its idle entries first,
    ``max_entries`` sets the entry bound (the old one is returned as well)."""
    cdef int64_t st[5]
    old = None
    if clear:
        pe_plans_clear()
    if max_entries is not None:
        old = pe_plans_set_max(max_entries)
    pe_plans_stats(st)
    stats = (st[0], st[1], st[2], st[3], st[4])
    return stats if old is None else (stats, old)


cdef const pe_rope_axes_plan *_rope_axes_plan(rope_parameters, head_dim, max_position_embeddings,
                                              precision, inv_freq, sections, section_layout,
                                              int *slot) except? NULL:
    """The library's multi-axis plan of the frequency arguments laid out by
    ``sections`` (a list or tuple of ints) and ``section_layout`` (see _rope_plan),
    or NULL to decline."""
    cdef int64_t secs[64]
    cdef int n, i, layout
    slot[0] = -1
    if type(section_layout) is not str or section_layout not in ("contiguous", "interleaved") \
            or (type(sections) is not tuple and type(sections) is not list):
        return NULL
    layout = section_layout == "interleaved"    # (FASTPE_SECTIONS_*)
    n = len(sections)
    if not 1 <= n <= ROPE_MAX_AXES:
        return NULL
    for i in range(n):
        if not _as_i64(sections[i], &secs[i]):
            return NULL
    return <const pe_rope_axes_plan *>_rope_plan(rope_parameters, head_dim,
                                                 max_position_embeddings, precision, inv_freq,
                                                 slot, secs, n, layout)


def _c_plan_kinds():
    """{kind: (entries, holds)} of the library's plan cache, by the tag its keys start
    with (for tests)."""
    cdef int64_t n[16]
    pe_plans_kinds(n)
    names = {1: "table", 2: "rope list", 3: "rope rule", 4: "rope axes", 5: "table lows"}
    return {name: (n[2 * t], n[2 * t + 1]) for t, name in names.items()}
