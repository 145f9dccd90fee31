# Included by kernel.pyx: the C API -- the constructors through the library's
# (fastpe_spec_create, fastpe_rope_from_frequencies, fastpe_rope_from_axes, with the
# Python API's exceptions from its error detail; rope_new, which takes a Python dict,
# through fastpe.rope_frequencies), the Cython API (kernel.pxd) over the library's
# functions (lib/src/api.c, spec.c, rope.c: the entry points, their checks, the plan
# cache of C callers, the compiled specs, the RoPE handles), and the capsule whose
# table publishes them (include/fastpe.h).  The marked blocks are written by
# tools/gen_capi.py from the signatures of lib/include/fastpe/fastpe.h.
#
# The constructors import _api, _conventions and _rope_rules when first called:
# those import this module.


def _c_plan_cache():
    """(nf, w0, base, denom, refs) of the C API's cached plans (for tests)."""
    cdef double snap[5 * 16]
    cdef int i, n = pe_plan_cache_snapshot(snap, 16)
    return [(int(snap[5 * i]), snap[5 * i + 1], snap[5 * i + 2], snap[5 * i + 3],
             int(snap[5 * i + 4])) for i in range(n)]


# ---------------------------------------------------------------------------
# ABI 1.2: compiled specs, every convention from C
# ---------------------------------------------------------------------------

# The handle is the library's (lib/src/pe_lib.h: struct fastpe_spec); kernel.pxd
# declares it opaque.  The constructors resolve what only Python can (a convention
# name or object, the knobs' spellings) and make it with fastpe_spec_create, as a
# native caller does; its refusals become the Python API's exceptions.

cdef fastpe_spec *spec_new(object convention, int64_t d_model) except NULL:
    """A spec for a convention name or a fastpe.Convention (with the GIL)."""
    from fastpe import _api
    return _spec_handle(_api._convention(convention, 10000.0, "interleaved"), d_model)


cdef fastpe_spec *spec_from_knobs(int64_t d_model, double base, const char *denominator,
                                  double shift, double position_scale, const char *layout,
                                  const char *odd, int has_padding_idx,
                                  int64_t padding_idx) except NULL:
    """A spec from the knobs of fastpe.Convention (with the GIL)."""
    from fastpe._conventions import Convention
    if denominator == NULL or layout == NULL or odd == NULL:
        raise TypeError("denominator, layout and odd must not be NULL")
    conv = Convention(base=base, denominator=denominator.decode(), shift=shift,
                      position_scale=position_scale, layout=layout.decode(), odd=odd.decode(),
                      padding_idx=padding_idx if has_padding_idx else None)
    return _spec_handle(conv, d_model)


# ---------------------------------------------------------------------------
# ABI 1.3: RoPE, the cos/sin cache and the rotation in place
# ---------------------------------------------------------------------------

# The handle is the library's (lib/src/pe_lib.h: struct fastpe_rope; lib/src/rope.c
# makes it, caches and rotates with it).  The two constructors of the capsule check
# their arguments here, so that their errors are the Python API's exceptions.
cdef extern from "pe_lib.h" nogil:
    # the fields, for rope_cache_fast's handle on the stack over an Encoder's spec
    # and plan (nothing allocated; never freed)
    ctypedef struct pe_rope_handle "struct fastpe_rope":
        unsigned int magic
        pe_spec sp
        double *w
        double *plan
        double attention
        double max_position
        int rounding
    unsigned int PE_ROPE_MAGIC
    const double *pe_rope_lows(pe_rope_handle *h)


cdef extern from "fastpe/fastpe.h" nogil:
    ctypedef struct fastpe_rope_params:
        size_t size
        int rope_type
        int precision
        double rope_theta
        double partial_rotary_factor
        double factor
        double attention_factor
        double beta_fast
        double beta_slow
        double mscale
        double mscale_all_dim
        double low_freq_factor
        double high_freq_factor
        int truncate
        const double *short_factor
        int64_t short_factor_len
        const double *long_factor
        int64_t long_factor_len
        int64_t original_max_position_embeddings
        int64_t max_position_embeddings
        int64_t seq_len
    void fastpe_rope_params_init(fastpe_rope_params *p)
    int fastpe_rope_frequencies(const fastpe_rope_params *p, int64_t head_dim, double *inv_freq,
                                int64_t capacity, int64_t *nf, double *attention_factor)
    int fastpe_rope_from_params(const fastpe_rope_params *p, int64_t head_dim,
                                fastpe_rope **rope)


cdef extern from "pe_crmath.h" nogil:
    ctypedef struct pe_rule_detail:
        int reason
        int64_t index
        double value
    ctypedef void (*pe_pow32_fn)(void *ctx, float base, const float *e, float *out,
                                 int64_t n) noexcept
    int pe_rope_rule(const fastpe_rope_params *p, int64_t head_dim, double *inv_freq,
                     int64_t capacity, int64_t *nf, double *attention_factor,
                     pe_rule_detail *why, pe_pow32_fn pow32, void *pow_ctx)
    double pe_pow_cr(double x, double y)
    float pe_powf_cr(float x, float y)
    double pe_log_cr(double x)
    unsigned long long pe_cr_undecided()
    unsigned long long pe_cr_exact_runs()
    int pe_cr_force_exact(int on)


cdef extern from "pe_lib.h" nogil:
    unsigned long long pe_f64_undecided()


def _power(base, exponent, bint float32=False):
    """``base ** exponent`` elementwise (NumPy broadcasting, bases >= 0), each
    correctly rounded to float64, or with ``float32`` the float32 power of the
    float32 operands correctly rounded to float32 (returned as float32): fastpe's
    own power, the same bits on every machine (NumPy's and libm's are not)."""
    b, e = _np.broadcast_arrays(_np.asarray(base, _np.float64), _np.asarray(exponent, _np.float64))
    if float32:
        b = b.astype(_np.float32)
        e = e.astype(_np.float32)
    out = _np.empty(b.shape, _np.float32 if float32 else _np.float64)
    cdef Py_ssize_t k, n = out.size
    cdef const double[::1] bd
    cdef const double[::1] ed
    cdef const float[::1] bf
    cdef const float[::1] ef
    cdef double[::1] od
    cdef float[::1] of
    if float32:
        bf = _np.ascontiguousarray(b).reshape(-1)
        ef = _np.ascontiguousarray(e).reshape(-1)
        of = out.reshape(-1)
        with nogil:
            for k in range(n):
                of[k] = pe_powf_cr(bf[k], ef[k])
    else:
        bd = _np.ascontiguousarray(b).reshape(-1)
        ed = _np.ascontiguousarray(e).reshape(-1)
        od = out.reshape(-1)
        with nogil:
            for k in range(n):
                od[k] = pe_pow_cr(bd[k], ed[k])
    return out


def _log(double x):
    """The correctly rounded natural logarithm of x (C's log's special values):
    fastpe's own, the same bits on every machine."""
    return pe_log_cr(x)


def _undecided_roundings():
    """How many of fastpe's roundings not even the exact path could decide since
    the library was loaded (pe_crmath.h; none is known)."""
    return pe_cr_undecided()


def _f64_undecided():
    """How many float64 table entries the fast evaluation's rounding test left
    to the exact fallback since the library was loaded (pe_rows_dd.h)."""
    return pe_f64_undecided()


def _exact_path_runs():
    """How many values took the exact path since the library was loaded: those
    whose fast evaluation was too close to a rounding boundary (pe_crmath.h)."""
    return pe_cr_exact_runs()


def _force_exact_path(bint on):
    """Send every correctly rounded value through the exact path (on) or only the
    undecided ones (off, the default); returns the previous setting.  For tests:
    both paths must give the same bits.  Process-wide, not thread-safe to toggle
    while other threads compute."""
    return bool(pe_cr_force_exact(on))


_PARAM_DOUBLES = ("rope_theta", "partial_rotary_factor", "factor", "attention_factor",
                  "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "low_freq_factor",
                  "high_freq_factor")
_PARAM_INTS = ("rope_type", "precision", "truncate", "original_max_position_embeddings",
               "max_position_embeddings", "seq_len", "size")


cdef void _python_pow32(void *ctx, float base, const float *e, float *out,
                        int64_t n) noexcept with gil:
    cdef int64_t k
    try:
        got = _np.asarray((<object>ctx)(base, _np.array(<const float[:n]>e)), _np.float32)
        for k in range(n):
            out[k] = got[k]
    except BaseException:
        for k in range(n):
            out[k] = _np.nan


cdef int _params_from_fields(fastpe_rope_params *p, dict fields) except -1:
    """``p`` from fastpe_rope_params_init with the numbers of ``fields`` (struct field
    names) set; short_factor / long_factor are the caller's to point at."""
    fastpe_rope_params_init(p)
    unknown = set(fields) - set(_PARAM_DOUBLES) - set(_PARAM_INTS) - {"short_factor",
                                                                      "long_factor"}
    if unknown:
        raise ValueError(f"not fields of fastpe_rope_params: {sorted(unknown)}")
    d = {k: float(fields[k]) for k in _PARAM_DOUBLES if k in fields}
    i = {k: int(fields[k]) for k in _PARAM_INTS if k in fields}
    p.rope_theta = d.get("rope_theta", p.rope_theta)
    p.partial_rotary_factor = d.get("partial_rotary_factor", p.partial_rotary_factor)
    p.factor = d.get("factor", p.factor)
    p.attention_factor = d.get("attention_factor", p.attention_factor)
    p.beta_fast = d.get("beta_fast", p.beta_fast)
    p.beta_slow = d.get("beta_slow", p.beta_slow)
    p.mscale = d.get("mscale", p.mscale)
    p.mscale_all_dim = d.get("mscale_all_dim", p.mscale_all_dim)
    p.low_freq_factor = d.get("low_freq_factor", p.low_freq_factor)
    p.high_freq_factor = d.get("high_freq_factor", p.high_freq_factor)
    p.rope_type = i.get("rope_type", p.rope_type)
    p.precision = i.get("precision", p.precision)
    p.truncate = i.get("truncate", p.truncate)
    p.original_max_position_embeddings = i.get("original_max_position_embeddings",
                                               p.original_max_position_embeddings)
    p.max_position_embeddings = i.get("max_position_embeddings", p.max_position_embeddings)
    p.seq_len = i.get("seq_len", p.seq_len)
    p.size = i.get("size", p.size)
    return 0


cdef void *_new_params(dict fields) except NULL:
    """A fastpe_rope_params of ``fields`` (_params_from_fields), freed with free."""
    cdef fastpe_rope_params *p = <fastpe_rope_params *>malloc(sizeof(fastpe_rope_params))
    if p == NULL:
        raise MemoryError()
    try:
        _params_from_fields(p, fields)
    except BaseException:
        free(p)
        raise
    return p


def _rope_rule(int64_t head_dim, dict fields, capacity=None, bint handle=False, pow32=None):
    """The library's RoPE rule for a fastpe_rope_params from fastpe_rope_params_init
    with ``fields`` (struct field names; short_factor / long_factor as float64
    arrays, their length the array's) set: (code, inv_freq, attention_factor, nf,
    (reason, index, value)), the output buffer (``capacity`` entries, default
    head_dim // 2 up to 2**20) NaN-filled before the call (to see what is written).
    ``handle``: fastpe_rope_from_params instead (code, None, nan, nf, None).
    ``pow32(base, e)``: float32 powers of an array of exponents in place of the
    correctly rounded ones (n exponents: n powers)."""
    cdef fastpe_rope_params p
    cdef double[::1] out
    cdef double[::1] sf
    cdef double[::1] lf
    cdef int64_t nf = -1, cap
    cdef double attention = _np.nan
    cdef fastpe_rope *h = NULL
    cdef pe_rule_detail why
    cdef int err
    _params_from_fields(&p, fields)
    # the arrays stay referenced by these locals for the whole call
    short_factor = fields.get("short_factor")
    long_factor = fields.get("long_factor")
    if short_factor is not None:
        sf = _np.ascontiguousarray(short_factor, dtype=_np.float64)
        p.short_factor = &sf[0] if sf.shape[0] else <const double *>&attention
        p.short_factor_len = sf.shape[0]
    if long_factor is not None:
        lf = _np.ascontiguousarray(long_factor, dtype=_np.float64)
        p.long_factor = &lf[0] if lf.shape[0] else <const double *>&attention
        p.long_factor_len = lf.shape[0]
    if handle:
        err = fastpe_rope_from_params(&p, head_dim, &h)
        if h != NULL:
            nf = fastpe_rope_rotary_dim(h) // 2
            fastpe_rope_free(h)
        return err, None, _np.nan, nf, None
    # (at most 2**20 entries by default: a refused head_dim of 2**31 must not cost
    # an 8 GiB buffer)
    cap = min(head_dim // 2, 1 << 20) if capacity is None else capacity
    buf = _np.full(max(cap, 1), _np.nan)
    out = buf
    if pow32 is None:
        err = pe_rope_rule(&p, head_dim, &out[0], cap, &nf, &attention, &why, NULL, NULL)
    else:
        err = pe_rope_rule(&p, head_dim, &out[0], cap, &nf, &attention, &why, _python_pow32,
                           <void *>pow32)
    pe_settle(err)   # (as at the library's entry points: the detail of this call)
    return err, buf, attention, nf, (why.reason, why.index, why.value)


cdef fastpe_rope *rope_new(object rope_parameters, int64_t head_dim,
                           int64_t max_position_embeddings, int64_t seq_len,
                           const char *precision) except NULL:
    """fastpe.rope_frequencies' rule as a handle (with the GIL); 0 / -1 / NULL for
    max_position_embeddings / seq_len / precision: not given."""
    from fastpe._rope_rules import rope_frequencies
    w, attention = rope_frequencies(
        head_dim, rope_parameters,
        max_position_embeddings=max_position_embeddings if max_position_embeddings > 0 else None,
        seq_len=seq_len if seq_len >= 0 else None,
        precision="float32" if precision == NULL else precision.decode())
    cdef const double[::1] wv = _np.ascontiguousarray(w, dtype=_np.float64)
    return rope_from_frequencies(&wv[0], wv.shape[0], attention)


cdef int _refused_handle() except -1:
    """Raise for the RoPE constructor that just returned NULL, from its error
    detail: TypeError for a NULL pointer, ValueError naming the argument (and the
    entry), MemoryError when nothing was refused."""
    code, arg, i, v, limit = _last_error()
    if code == FASTPE_ENULL:
        raise TypeError(f"{arg} must not be NULL")
    if code == FASTPE_ESIZE:     # nf, n_axes
        raise ValueError(f"{arg} must be an integer {'>=' if v < limit else '<='} "
                         f"{_number(limit)}, got {_number(v)}")
    if arg == "inv_freq":
        raise ValueError(_frequency_refusal(i, v, limit))
    if arg == "attention_factor":
        raise ValueError(f"attention_factor must be finite and > 0, got {v!r}")
    if arg == "axis":            # (the limit: n_axes)
        raise ValueError(f"axis[{i}] must be in 0 .. n_axes-1 = {_number(limit) - 1}, got "
                         f"{_number(v)}")
    raise MemoryError("could not allocate a fastpe RoPE handle")


cdef fastpe_rope *rope_from_frequencies(const double *inv_freq, int64_t nf,
                                        double attention_factor) except NULL:
    """A handle for a model's own inv_freq (nf entries) and attention factor (with
    the GIL): the library's constructor, its refusal the Python API's exception."""
    cdef fastpe_rope *h = fastpe_rope_from_frequencies(inv_freq, nf, attention_factor)
    if h == NULL:
        _refused_handle()
    return h


# ---------------------------------------------------------------------------
# ABI 1.4: RoPE of multi-axis positions
# ---------------------------------------------------------------------------

cdef fastpe_rope *rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                 int n_axes, double attention_factor) except NULL:
    """A handle for nf frequencies, frequency i following axis[i] of each token's
    n_axes coordinates (with the GIL): the library's constructor, its refusal the
    Python API's exception."""
    cdef fastpe_rope *h = fastpe_rope_from_axes(inv_freq, nf, axis, n_axes, attention_factor)
    if h == NULL:
        _refused_handle()
    return h


# The Cython API (kernel.pxd): the library's functions, but for the constructors above.
# ---- definitions: generated by tools/gen_capi.py from <fastpe/fastpe.h>, not edited here ----
cdef int fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride, double base,
                  int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f32(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride, double base,
                  int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f64(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f32(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f64(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return fastpe_fill_positions_f32(out, n, d_model, row_stride, positions, base, layout,
                                     num_threads)


cdef int fill_positions_f64(double *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return fastpe_fill_positions_f64(out, n, d_model, row_stride, positions, base, layout,
                                     num_threads)


cdef int add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return fastpe_add_positions_f32(x, n, d_model, row_stride, positions, base, scale, layout,
                                    num_threads)


cdef int add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return fastpe_add_positions_f64(x, n, d_model, row_stride, positions, base, scale, layout,
                                    num_threads)


cdef void spec_free(fastpe_spec *spec) noexcept nogil:
    fastpe_spec_free(spec)


cdef int64_t spec_d_model(const fastpe_spec *spec) noexcept nogil:
    return fastpe_spec_d_model(spec)


cdef int spec_fill_f32(const fastpe_spec *spec, float *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f32(spec, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_f64(const fastpe_spec *spec, double *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f64(spec, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_positions_f32(const fastpe_spec *spec, float *out, int64_t n,
                                 int64_t row_stride, const double *positions,
                                 int num_threads) noexcept nogil:
    return fastpe_spec_fill_positions_f32(spec, out, n, row_stride, positions, num_threads)


cdef int spec_fill_positions_f64(const fastpe_spec *spec, double *out, int64_t n,
                                 int64_t row_stride, const double *positions,
                                 int num_threads) noexcept nogil:
    return fastpe_spec_fill_positions_f64(spec, out, n, row_stride, positions, num_threads)


cdef int spec_add_f32(const fastpe_spec *spec, float *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f32(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int spec_add_f64(const fastpe_spec *spec, double *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f64(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef void rope_free(fastpe_rope *rope) noexcept nogil:
    fastpe_rope_free(rope)


cdef int64_t rope_rotary_dim(const fastpe_rope *rope) noexcept nogil:
    return fastpe_rope_rotary_dim(rope)


cdef int rope_cache_f32(const fastpe_rope *rope, float *cos, float *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_cache_f32(rope, cos, sin, n, row_stride, positions, offset, layout,
                                 num_threads)


cdef int rope_cache_f64(const fastpe_rope *rope, double *cos, double *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_cache_f64(rope, cos, sin, n, row_stride, positions, offset, layout,
                                 num_threads)


cdef int rope_apply_f32(const fastpe_rope *rope, float *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_apply_f32(rope, x, batch, seq, heads, stride_batch, stride_seq, stride_head,
                                 positions, offset, layout, num_threads)


cdef int rope_apply_f64(const fastpe_rope *rope, double *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_apply_f64(rope, x, batch, seq, heads, stride_batch, stride_seq, stride_head,
                                 positions, offset, layout, num_threads)


cdef int fill_f16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride, double base,
                  int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_f16(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_bf16(uint16_t *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                   double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return fastpe_fill_bf16(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int add_f16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return fastpe_add_f16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                          num_threads)


cdef int add_bf16(uint16_t *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, double scale, int layout,
                  int num_threads) noexcept nogil:
    return fastpe_add_bf16(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout,
                           num_threads)


cdef int spec_fill_f16(const fastpe_spec *spec, uint16_t *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_f16(spec, out, seq_len, row_stride, offset, num_threads)


cdef int spec_fill_bf16(const fastpe_spec *spec, uint16_t *out, int64_t seq_len,
                        int64_t row_stride, int64_t offset, int num_threads) noexcept nogil:
    return fastpe_spec_fill_bf16(spec, out, seq_len, row_stride, offset, num_threads)


cdef int spec_add_f16(const fastpe_spec *spec, uint16_t *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return fastpe_spec_add_f16(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int spec_add_bf16(const fastpe_spec *spec, uint16_t *x, int64_t nseq, int64_t seq_len,
                       int64_t row_stride, int64_t offset, double scale,
                       int num_threads) noexcept nogil:
    return fastpe_spec_add_bf16(spec, x, nseq, seq_len, row_stride, offset, scale, num_threads)


cdef int rope_cache_f16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                        int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_cache_f16(rope, cos, sin, n, row_stride, positions, offset, layout,
                                 num_threads)


cdef int rope_cache_bf16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                         int64_t row_stride, const int64_t *positions, int64_t offset, int layout,
                         int num_threads) noexcept nogil:
    return fastpe_rope_cache_bf16(rope, cos, sin, n, row_stride, positions, offset, layout,
                                  num_threads)


cdef int rope_apply_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                        int64_t heads, int64_t stride_batch, int64_t stride_seq,
                        int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                        int num_threads) noexcept nogil:
    return fastpe_rope_apply_f16(rope, x, batch, seq, heads, stride_batch, stride_seq, stride_head,
                                 positions, offset, layout, num_threads)


cdef int rope_apply_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                         int64_t heads, int64_t stride_batch, int64_t stride_seq,
                         int64_t stride_head, const int64_t *positions, int64_t offset, int layout,
                         int num_threads) noexcept nogil:
    return fastpe_rope_apply_bf16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                  stride_head, positions, offset, layout, num_threads)


cdef int rope_section_axes(const int64_t *sections, int n_axes, int section_layout, int32_t *axis,
                           int64_t nf) noexcept nogil:
    return fastpe_rope_section_axes(sections, n_axes, section_layout, axis, nf)


cdef int rope_n_axes(const fastpe_rope *rope) noexcept nogil:
    return fastpe_rope_n_axes(rope)


cdef int rope_cache_axes_f32(const fastpe_rope *rope, float *cos, float *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_cache_axes_f32(rope, cos, sin, n, row_stride, positions, layout,
                                      num_threads)


cdef int rope_cache_axes_f64(const fastpe_rope *rope, double *cos, double *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_cache_axes_f64(rope, cos, sin, n, row_stride, positions, layout,
                                      num_threads)


cdef int rope_cache_axes_f16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                             int64_t row_stride, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_cache_axes_f16(rope, cos, sin, n, row_stride, positions, layout,
                                      num_threads)


cdef int rope_cache_axes_bf16(const fastpe_rope *rope, uint16_t *cos, uint16_t *sin, int64_t n,
                              int64_t row_stride, const int64_t *positions, int layout,
                              int num_threads) noexcept nogil:
    return fastpe_rope_cache_axes_bf16(rope, cos, sin, n, row_stride, positions, layout,
                                       num_threads)


cdef int rope_apply_axes_f32(const fastpe_rope *rope, float *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_apply_axes_f32(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, layout, num_threads)


cdef int rope_apply_axes_f64(const fastpe_rope *rope, double *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_apply_axes_f64(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, layout, num_threads)


cdef int rope_apply_axes_f16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                             int64_t heads, int64_t stride_batch, int64_t stride_seq,
                             int64_t stride_head, const int64_t *positions, int layout,
                             int num_threads) noexcept nogil:
    return fastpe_rope_apply_axes_f16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                      stride_head, positions, layout, num_threads)


cdef int rope_apply_axes_bf16(const fastpe_rope *rope, uint16_t *x, int64_t batch, int64_t seq,
                              int64_t heads, int64_t stride_batch, int64_t stride_seq,
                              int64_t stride_head, const int64_t *positions, int layout,
                              int num_threads) noexcept nogil:
    return fastpe_rope_apply_axes_bf16(rope, x, batch, seq, heads, stride_batch, stride_seq,
                                       stride_head, positions, layout, num_threads)


cdef int spec_set_rounding(fastpe_spec *spec, int rounding) noexcept nogil:
    return fastpe_spec_set_rounding(spec, rounding)


cdef int rope_set_rounding(fastpe_rope *rope, int rounding) noexcept nogil:
    return fastpe_rope_set_rounding(rope, rounding)
# ---- end of the generated block (definitions) ----


# ---------------------------------------------------------------------------
# C API for other extensions: a capsule holding a versioned function table
# (see include/fastpe.h; reached from C through import_fastpe()).
# ---------------------------------------------------------------------------

from libc.stdint cimport uint32_t
from cpython.pycapsule cimport PyCapsule_New


cdef extern from *:
    """
    /* This module provides the table: fastpe.h must not redefine the codes
       and layouts that kernel.pxd already declares as an enum. */
    #define FASTPE_KERNEL_MODULE 1
    """


# ---- table: generated by tools/gen_capi.py from <fastpe/fastpe.h>, not edited here ----
cdef extern from "include/fastpe.h":
    ctypedef int (*fastpe_fill_f32_fn)(float *, int64_t, int64_t, int64_t, double, int64_t, int,
                                       int) noexcept nogil
    ctypedef int (*fastpe_fill_f64_fn)(double *, int64_t, int64_t, int64_t, double, int64_t, int,
                                       int) noexcept nogil
    ctypedef int (*fastpe_add_f32_fn)(float *, int64_t, int64_t, int64_t, int64_t, double, int64_t,
                                      double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_f64_fn)(double *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f32_fn)(float *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f64_fn)(double *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_positions_f32_fn)(float *, int64_t, int64_t, int64_t, const double *,
                                                double, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_positions_f64_fn)(double *, int64_t, int64_t, int64_t,
                                                const double *, double, double, int,
                                                int) noexcept nogil
    ctypedef fastpe_spec *(*fastpe_spec_new_fn)(object, int64_t) except NULL
    ctypedef fastpe_spec *(*fastpe_spec_from_knobs_fn)(int64_t, double, const char *, double,
                                                       double, const char *, const char *, int,
                                                       int64_t) except NULL
    ctypedef void (*fastpe_spec_free_fn)(fastpe_spec *) noexcept nogil
    ctypedef int64_t (*fastpe_spec_d_model_fn)(const fastpe_spec *) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f32_fn)(const fastpe_spec *, float *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f64_fn)(const fastpe_spec *, double *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_positions_f32_fn)(const fastpe_spec *, float *, int64_t,
                                                      int64_t, const double *, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_positions_f64_fn)(const fastpe_spec *, double *, int64_t,
                                                      int64_t, const double *, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f32_fn)(const fastpe_spec *, float *, int64_t, int64_t, int64_t,
                                           int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f64_fn)(const fastpe_spec *, double *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef fastpe_rope *(*fastpe_rope_new_fn)(object, int64_t, int64_t, int64_t,
                                                const char *) except NULL
    ctypedef fastpe_rope *(*fastpe_rope_from_frequencies_fn)(const double *, int64_t,
                                                             double) except NULL
    ctypedef void (*fastpe_rope_free_fn)(fastpe_rope *) noexcept nogil
    ctypedef int64_t (*fastpe_rope_rotary_dim_fn)(const fastpe_rope *) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f32_fn)(const fastpe_rope *, float *, float *, int64_t,
                                             int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f64_fn)(const fastpe_rope *, double *, double *, int64_t,
                                             int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f32_fn)(const fastpe_rope *, float *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t, const int64_t *,
                                             int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f64_fn)(const fastpe_rope *, double *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t, const int64_t *,
                                             int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_f16_fn)(uint16_t *, int64_t, int64_t, int64_t, double, int64_t, int,
                                       int) noexcept nogil
    ctypedef int (*fastpe_fill_bf16_fn)(uint16_t *, int64_t, int64_t, int64_t, double, int64_t,
                                        int, int) noexcept nogil
    ctypedef int (*fastpe_add_f16_fn)(uint16_t *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_bf16_fn)(uint16_t *, int64_t, int64_t, int64_t, int64_t, double,
                                       int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_f16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                            int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_fill_bf16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                             int64_t, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_bf16_fn)(const fastpe_spec *, uint16_t *, int64_t, int64_t,
                                            int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_f16_fn)(const fastpe_rope *, uint16_t *, uint16_t *, int64_t,
                                             int64_t, const int64_t *, int64_t, int,
                                             int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_bf16_fn)(const fastpe_rope *, uint16_t *, uint16_t *, int64_t,
                                              int64_t, const int64_t *, int64_t, int,
                                              int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_f16_fn)(const fastpe_rope *, uint16_t *, int64_t, int64_t,
                                             int64_t, int64_t, int64_t, int64_t, const int64_t *,
                                             int64_t, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_bf16_fn)(const fastpe_rope *, uint16_t *, int64_t, int64_t,
                                              int64_t, int64_t, int64_t, int64_t, const int64_t *,
                                              int64_t, int, int) noexcept nogil
    ctypedef fastpe_rope *(*fastpe_rope_from_axes_fn)(const double *, int64_t, const int32_t *,
                                                      int, double) except NULL
    ctypedef int (*fastpe_rope_section_axes_fn)(const int64_t *, int, int, int32_t *,
                                                int64_t) noexcept nogil
    ctypedef int (*fastpe_rope_n_axes_fn)(const fastpe_rope *) noexcept nogil
    ctypedef int (*fastpe_rope_cache_axes_f32_fn)(const fastpe_rope *, float *, float *, int64_t,
                                                  int64_t, const int64_t *, int,
                                                  int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_axes_f64_fn)(const fastpe_rope *, double *, double *, int64_t,
                                                  int64_t, const int64_t *, int,
                                                  int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_axes_f16_fn)(const fastpe_rope *, uint16_t *, uint16_t *,
                                                  int64_t, int64_t, const int64_t *, int,
                                                  int) noexcept nogil
    ctypedef int (*fastpe_rope_cache_axes_bf16_fn)(const fastpe_rope *, uint16_t *, uint16_t *,
                                                   int64_t, int64_t, const int64_t *, int,
                                                   int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_axes_f32_fn)(const fastpe_rope *, float *, int64_t, int64_t,
                                                  int64_t, int64_t, int64_t, int64_t,
                                                  const int64_t *, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_axes_f64_fn)(const fastpe_rope *, double *, int64_t, int64_t,
                                                  int64_t, int64_t, int64_t, int64_t,
                                                  const int64_t *, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_axes_f16_fn)(const fastpe_rope *, uint16_t *, int64_t,
                                                  int64_t, int64_t, int64_t, int64_t, int64_t,
                                                  const int64_t *, int, int) noexcept nogil
    ctypedef int (*fastpe_rope_apply_axes_bf16_fn)(const fastpe_rope *, uint16_t *, int64_t,
                                                   int64_t, int64_t, int64_t, int64_t, int64_t,
                                                   const int64_t *, int, int) noexcept nogil
    ctypedef int (*fastpe_spec_set_rounding_fn)(fastpe_spec *, int) noexcept nogil
    ctypedef int (*fastpe_rope_set_rounding_fn)(fastpe_rope *, int) noexcept nogil
    ctypedef struct fastpe_api_t:
        uint32_t abi_major
        uint32_t abi_minor
        size_t size
        fastpe_fill_f32_fn fill_f32
        fastpe_fill_f64_fn fill_f64
        fastpe_add_f32_fn add_f32
        fastpe_add_f64_fn add_f64
        fastpe_fill_positions_f32_fn fill_positions_f32
        fastpe_fill_positions_f64_fn fill_positions_f64
        fastpe_add_positions_f32_fn add_positions_f32
        fastpe_add_positions_f64_fn add_positions_f64
        fastpe_spec_new_fn spec_new
        fastpe_spec_from_knobs_fn spec_from_knobs
        fastpe_spec_free_fn spec_free
        fastpe_spec_d_model_fn spec_d_model
        fastpe_spec_fill_f32_fn spec_fill_f32
        fastpe_spec_fill_f64_fn spec_fill_f64
        fastpe_spec_fill_positions_f32_fn spec_fill_positions_f32
        fastpe_spec_fill_positions_f64_fn spec_fill_positions_f64
        fastpe_spec_add_f32_fn spec_add_f32
        fastpe_spec_add_f64_fn spec_add_f64
        fastpe_rope_new_fn rope_new
        fastpe_rope_from_frequencies_fn rope_from_frequencies
        fastpe_rope_free_fn rope_free
        fastpe_rope_rotary_dim_fn rope_rotary_dim
        fastpe_rope_cache_f32_fn rope_cache_f32
        fastpe_rope_cache_f64_fn rope_cache_f64
        fastpe_rope_apply_f32_fn rope_apply_f32
        fastpe_rope_apply_f64_fn rope_apply_f64
        fastpe_fill_f16_fn fill_f16
        fastpe_fill_bf16_fn fill_bf16
        fastpe_add_f16_fn add_f16
        fastpe_add_bf16_fn add_bf16
        fastpe_spec_fill_f16_fn spec_fill_f16
        fastpe_spec_fill_bf16_fn spec_fill_bf16
        fastpe_spec_add_f16_fn spec_add_f16
        fastpe_spec_add_bf16_fn spec_add_bf16
        fastpe_rope_cache_f16_fn rope_cache_f16
        fastpe_rope_cache_bf16_fn rope_cache_bf16
        fastpe_rope_apply_f16_fn rope_apply_f16
        fastpe_rope_apply_bf16_fn rope_apply_bf16
        fastpe_rope_from_axes_fn rope_from_axes
        fastpe_rope_section_axes_fn rope_section_axes
        fastpe_rope_n_axes_fn rope_n_axes
        fastpe_rope_cache_axes_f32_fn rope_cache_axes_f32
        fastpe_rope_cache_axes_f64_fn rope_cache_axes_f64
        fastpe_rope_cache_axes_f16_fn rope_cache_axes_f16
        fastpe_rope_cache_axes_bf16_fn rope_cache_axes_bf16
        fastpe_rope_apply_axes_f32_fn rope_apply_axes_f32
        fastpe_rope_apply_axes_f64_fn rope_apply_axes_f64
        fastpe_rope_apply_axes_f16_fn rope_apply_axes_f16
        fastpe_rope_apply_axes_bf16_fn rope_apply_axes_bf16
        fastpe_spec_set_rounding_fn spec_set_rounding
        fastpe_rope_set_rounding_fn rope_set_rounding
    const char *FASTPE_CAPSULE_NAME
    int FASTPE_ABI_MAJOR
    int FASTPE_ABI_MINOR


# Static storage: the capsule and every importer point at it for the process's
# lifetime (extension modules are never unloaded), so the capsule needs no destructor.
cdef fastpe_api_t _c_api_table
_c_api_table.abi_major = FASTPE_ABI_MAJOR
_c_api_table.abi_minor = FASTPE_ABI_MINOR
_c_api_table.size = sizeof(fastpe_api_t)
_c_api_table.fill_f32 = fastpe_fill_f32
_c_api_table.fill_f64 = fastpe_fill_f64
_c_api_table.add_f32 = fastpe_add_f32
_c_api_table.add_f64 = fastpe_add_f64
_c_api_table.fill_positions_f32 = fastpe_fill_positions_f32
_c_api_table.fill_positions_f64 = fastpe_fill_positions_f64
_c_api_table.add_positions_f32 = fastpe_add_positions_f32
_c_api_table.add_positions_f64 = fastpe_add_positions_f64
_c_api_table.spec_new = spec_new
_c_api_table.spec_from_knobs = spec_from_knobs
_c_api_table.spec_free = fastpe_spec_free
_c_api_table.spec_d_model = fastpe_spec_d_model
_c_api_table.spec_fill_f32 = fastpe_spec_fill_f32
_c_api_table.spec_fill_f64 = fastpe_spec_fill_f64
_c_api_table.spec_fill_positions_f32 = fastpe_spec_fill_positions_f32
_c_api_table.spec_fill_positions_f64 = fastpe_spec_fill_positions_f64
_c_api_table.spec_add_f32 = fastpe_spec_add_f32
_c_api_table.spec_add_f64 = fastpe_spec_add_f64
_c_api_table.rope_new = rope_new
_c_api_table.rope_from_frequencies = rope_from_frequencies
_c_api_table.rope_free = fastpe_rope_free
_c_api_table.rope_rotary_dim = fastpe_rope_rotary_dim
_c_api_table.rope_cache_f32 = fastpe_rope_cache_f32
_c_api_table.rope_cache_f64 = fastpe_rope_cache_f64
_c_api_table.rope_apply_f32 = fastpe_rope_apply_f32
_c_api_table.rope_apply_f64 = fastpe_rope_apply_f64
_c_api_table.fill_f16 = fastpe_fill_f16
_c_api_table.fill_bf16 = fastpe_fill_bf16
_c_api_table.add_f16 = fastpe_add_f16
_c_api_table.add_bf16 = fastpe_add_bf16
_c_api_table.spec_fill_f16 = fastpe_spec_fill_f16
_c_api_table.spec_fill_bf16 = fastpe_spec_fill_bf16
_c_api_table.spec_add_f16 = fastpe_spec_add_f16
_c_api_table.spec_add_bf16 = fastpe_spec_add_bf16
_c_api_table.rope_cache_f16 = fastpe_rope_cache_f16
_c_api_table.rope_cache_bf16 = fastpe_rope_cache_bf16
_c_api_table.rope_apply_f16 = fastpe_rope_apply_f16
_c_api_table.rope_apply_bf16 = fastpe_rope_apply_bf16
_c_api_table.rope_from_axes = rope_from_axes
_c_api_table.rope_section_axes = fastpe_rope_section_axes
_c_api_table.rope_n_axes = fastpe_rope_n_axes
_c_api_table.rope_cache_axes_f32 = fastpe_rope_cache_axes_f32
_c_api_table.rope_cache_axes_f64 = fastpe_rope_cache_axes_f64
_c_api_table.rope_cache_axes_f16 = fastpe_rope_cache_axes_f16
_c_api_table.rope_cache_axes_bf16 = fastpe_rope_cache_axes_bf16
_c_api_table.rope_apply_axes_f32 = fastpe_rope_apply_axes_f32
_c_api_table.rope_apply_axes_f64 = fastpe_rope_apply_axes_f64
_c_api_table.rope_apply_axes_f16 = fastpe_rope_apply_axes_f16
_c_api_table.rope_apply_axes_bf16 = fastpe_rope_apply_axes_bf16
_c_api_table.spec_set_rounding = fastpe_spec_set_rounding
_c_api_table.rope_set_rounding = fastpe_rope_set_rounding
# ---- end of the generated block (table) ----


_C_API = PyCapsule_New(<void *>&_c_api_table, FASTPE_CAPSULE_NAME, NULL)

#: (major, minor) of the C-API table in ``_C_API`` (include/fastpe.h's ABI policy).
C_API_VERSION = (FASTPE_ABI_MAJOR, FASTPE_ABI_MINOR)


# The values kernel.pxd gives the codes and layouts, for the test that fastpe.h
# (a separate definition, for C) agrees with them.
_C_CONSTANTS = {
    "FASTPE_LAYOUT_INTERLEAVED": FASTPE_LAYOUT_INTERLEAVED,
    "FASTPE_LAYOUT_SPLIT": FASTPE_LAYOUT_SPLIT,
    "FASTPE_OK": FASTPE_OK,
    "FASTPE_ENULL": FASTPE_ENULL,
    "FASTPE_ESIZE": FASTPE_ESIZE,
    "FASTPE_ESTRIDE": FASTPE_ESTRIDE,
    "FASTPE_EBASE": FASTPE_EBASE,
    "FASTPE_ELAYOUT": FASTPE_ELAYOUT,
    "FASTPE_ERANGE": FASTPE_ERANGE,
    "FASTPE_ENOMEM": FASTPE_ENOMEM,
    "FASTPE_ESCALE": FASTPE_ESCALE,
    "FASTPE_EOVERLAP": FASTPE_EOVERLAP,
}
