# Included by kernel.pyx: the library's argument checks and their error detail
# (lib/src/api.c, status.c).  The table functions convert Python arguments to C
# ones and make ONE checked library call; a refusal comes back as a code and a
# detail (argument, element, value, limit), and _raise turns it into the
# exception the Python API has always raised, with a message naming the argument.

cdef extern from "fastpe/fastpe.h":
    ctypedef struct fastpe_error:
        int code
        const char *argument
        int64_t index
        double value
        double limit
    int fastpe_last_error(fastpe_error *detail) nogil

cdef extern from "pe_lib.h" nogil:
    int pe_settle(int ret)
    int pe_rope_check_frequencies(const double *inv_freq, int64_t nf)
    int pe_check_fill(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                      const pe_rows *rq, const char *n_name)
    int pe_check_fill_within(const void *out, int kind, int64_t row_stride, const pe_spec *sp,
                             const pe_rows *rq, const char *n_name, double max_position)
    int pe_fill_checked(void *out, int kind, int64_t row_stride, const pe_spec *sp,
                        const pe_rows *rq, int num_threads, const double *plan,
                        pe_anchor_cache *ac, pe_poll_fn poll, void *poll_ctx,
                        double max_position)


def _number(double v):
    """A detail's value as messages show it: integers (int64 sizes, positions)
    without a fraction, larger values as floats."""
    if isfinite(v) and v.is_integer() and fabs(v) <= 9223372036854775808.0:
        return int(v)
    return v


def _last_error():
    """This thread's error detail: (code, argument or None, index, value, limit)
    of the last failing library call (fastpe_last_error)."""
    cdef fastpe_error e
    fastpe_last_error(&e)
    return (e.code, None if e.argument == NULL else e.argument.decode(), e.index, e.value,
            e.limit)


cdef str _element(int64_t index, tuple shape, str label):
    """`label[i, j]` for a flat row index into an array of ``shape`` (C order)."""
    if index < 0 or shape is None or len(shape) == 0:
        return ""
    idx = []
    for n in reversed(shape):
        idx.append(index % n if n > 0 else 0)
        index = index // n if n > 0 else 0
    return f" at {label}[{', '.join(str(i) for i in reversed(idx))}]"


cdef int _raise(int err, dict names=None, tuple shape=None, str label="positions") except -1:
    """Raise for the library's code ``err`` from this thread's error detail:
    ValueError naming the argument (``names`` renames the library's argument
    names to the caller's, ``shape``/``label`` place an element index), or
    MemoryError; the bare code's text when no check named an argument."""
    cdef fastpe_error e
    fastpe_last_error(&e)
    if err == FASTPE_ENOMEM:
        raise MemoryError(ERROR_MESSAGES[err])
    if err == PE_EINTR:
        return _raise_pending()
    if e.code != err or e.argument == NULL:
        raise ValueError(ERROR_MESSAGES.get(err, f"fastpe kernel error {err}"))
    arg = e.argument.decode()
    name = names.get(arg, arg) if names is not None else arg
    value = _number(e.value)
    limit = _number(e.limit)
    if err == FASTPE_ESIZE:
        if limit == 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value}")
        if limit == 1 and value == 0 and names is not None and arg in names:
            raise ValueError(f"{name} must not be empty")   # (an array's axis)
        if arg == "d_model" and limit == 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value}")
        raise ValueError(f"{name} must be an integer <= {limit} (no table is larger), got {value}")
    if err == FASTPE_ESTRIDE:
        raise ValueError("out's rows must not overlap or run backwards "
                         f"(row stride >= {limit} entries), got {value}")
    if err == FASTPE_EBASE:
        if limit == 0:
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")
        raise ValueError(f"{name}={value!r} gives frequencies base**(-i/denominator) "
                         "that overflow a double at this width; use a base closer to 1")
    if err == FASTPE_ESCALE:
        raise ValueError(f"{name} must be finite, got {value!r}")
    if err == FASTPE_ERANGE:
        where = _element(e.index, shape, label)
        if not isfinite(e.value):
            raise ValueError(f"{name} must be finite, got {value!r}{where}")
        raise ValueError(
            f"{name} must keep every position within +-{int(e.limit)} for this width and "
            f"base (exact angle reduction); got positions up to {value!r}{where}")
    if err == FASTPE_EOVERLAP:
        raise ValueError(f"{name} must not share memory with the rows being written")
    if err == PE_EINVAL and arg == "offset":
        raise ValueError(
            "float positions cannot be combined with offset; add the offset to the positions")
    raise ValueError(f"{name}: {ERROR_MESSAGES.get(err, f'fastpe kernel error {err}')}")


def check_frequencies(const double[::1] inv_freq):
    """The library's check of a RoPE frequency list (pe_rope_check_frequencies):
    ValueError naming the first entry that is not finite, >= 0 and <= 1e280."""
    cdef int err = pe_settle(pe_rope_check_frequencies(&inv_freq[0] if inv_freq.shape[0] else NULL,
                                                       inv_freq.shape[0]))
    cdef fastpe_error e
    if err != FASTPE_OK:
        fastpe_last_error(&e)
        raise ValueError(_frequency_refusal(e.index, e.value, e.limit))


cdef str _frequency_refusal(int64_t index, double value, double limit):
    return f"inv_freq must be finite, >= 0 and <= {limit:g}, got inv_freq[{index}] = {value!r}"


def check_sizes(int64_t nseq, int64_t seq_len, int64_t d_model, dict names=None):
    """The library's size checks (counts, width, rows within int64), before
    anything is built or allocated from them (``names``: as for _raise)."""
    # (a width outside 1 .. 2^40 is the check's to refuse, not one to build on)
    cdef pe_spec sp = pe_spec_vaswani(d_model if 1 <= d_model <= (<int64_t>1 << 40) else 1,
                                      10000.0, 0)
    cdef pe_rows rq
    cdef int err
    sp.d = d_model
    _init_rows(&rq, nseq, seq_len, False, 0)
    err = pe_check_fill(NULL, 0, 0, &sp, &rq, "seq_len")     # (no buffer yet)
    if err != FASTPE_OK:
        _raise(err, names)
