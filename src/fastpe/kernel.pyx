# cython: language_level=3
"""fastpe kernel: fills a caller's buffer with the sinusoidal table, in parallel.

The Python layer (``fastpe._api``) validates and allocates; this module only
fills a buffer it is handed.  The hot loop is ``_fill`` below: a ``prange``
over blocks of rows, each block = one accurate "anchor" row evaluation plus one
complex multiply per (row, frequency) against a small table (see _pe_core.h for
the numerics and why results are independent of the thread count).
"""

from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, fabs, log, exp
from cython.parallel cimport prange, parallel, threadid
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_RECORDS

from fastpe._openmp_helpers cimport (
    FASTPE_OPENMP, FASTPE_OPENMP_VERSION, fastpe_omp_barrier, omp_get_max_threads,
    omp_get_thread_limit, fastpe_install_fork_guard, fastpe_forked_child,
)

cdef extern from "_pe_core.h" nogil:
    ctypedef struct pe_freq:
        double fh
        double fhh
        double fhl
        double fl
    double PE_MAX_TURNS
    void pe_freqs(pe_freq *fr, int64_t nf, double w0, double base, double denom)
    void pe_sincos_row(double K, const pe_freq *fr, int64_t nf,
                       double *s, double *c, double *cm1)
    void pe_row_interleaved_f32(float *row, int64_t d, const double *As, const double *Ac,
                                const double *Tcm1, const double *Ts)
    void pe_row_interleaved_f64(double *row, int64_t d, const double *As, const double *Ac,
                                const double *Tcm1, const double *Ts)
    void pe_row_split_f32(float *row, int64_t d, int64_t nf, const double *As, const double *Ac,
                          const double *Tcm1, const double *Ts)
    void pe_row_split_f64(double *row, int64_t d, int64_t nf, const double *As, const double *Ac,
                          const double *Tcm1, const double *Ts)

ctypedef fused real:
    float
    double

cdef enum:
    # Below this many (row, frequency) evaluations one thread beats waking the team.
    SERIAL_BELOW = 32768
    # Table budget: 2 * B * nf doubles, kept within ~1 MiB so it stays in L2.
    TABLE_DOUBLES = 131072
    MAX_BLOCK = 64


cdef inline int64_t _block_rows(int64_t nf) noexcept nogil:
    """Rows per anchor block.  A function of the width only -- never of seq_len,
    offset or the thread count -- so every entry is a pure function of
    (position, column): chunked or offset fills agree bitwise with one big fill."""
    cdef int64_t b = TABLE_DOUBLES // (2 * nf)
    if b > MAX_BLOCK:
        b = MAX_BLOCK
    if b < 4:
        b = 4
    return b


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef inline double _max_turns_per_position(double base, int64_t d_model) noexcept nogil:
    """Largest frequency in turns: base^(-2i/d) is largest at i=0 for base >= 1
    and at the last frequency for base < 1."""
    cdef int64_t nf = (d_model + 1) // 2
    cdef double w = 1.0
    if base < 1.0:
        w = exp(-log(base) * 2.0 * <double>(nf - 1) / <double>d_model)
    return w / 6.283185307179586


cdef int _check_args(const void *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                     double base, int64_t offset, int layout) noexcept nogil:
    cdef double kmax
    if seq_len < 0 or d_model < 1:
        return FASTPE_ESIZE
    if out == NULL and seq_len > 0:
        return FASTPE_ENULL
    if row_stride < d_model and seq_len > 1:
        return FASTPE_ESTRIDE
    if not (isfinite(base) and base > 0.0):
        return FASTPE_EBASE
    if layout != FASTPE_LAYOUT_INTERLEAVED and layout != FASTPE_LAYOUT_SPLIT:
        return FASTPE_ELAYOUT
    # |positions| * f_max must stay below 2^45 turns (exact quarter-turn reduction);
    # this also keeps offset + seq_len far from int64 overflow.
    kmax = fabs(<double>offset)
    if fabs(<double>offset + <double>seq_len) > kmax:
        kmax = fabs(<double>offset + <double>seq_len)
    if kmax * _max_turns_per_position(base, d_model) >= PE_MAX_TURNS or kmax >= 4503599627370496.0:
        return FASTPE_ERANGE
    return FASTPE_OK


cdef int _fill(real *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
               double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    cdef int err = _check_args(out, seq_len, d_model, row_stride, base, offset, layout)
    if err != FASTPE_OK or seq_len == 0:
        return err

    cdef int64_t nf = (d_model + 1) // 2          # frequencies (odd d: one extra sin)
    cdef int64_t B = _block_rows(nf)
    cdef int64_t last = offset + seq_len - 1
    cdef int64_t b_first = _floordiv(offset, B)
    cdef int64_t nblocks = _floordiv(last, B) - b_first + 1
    cdef int64_t j0 = offset - b_first * B          # offset mod B, in [0, B)

    cdef int nt = num_threads
    if nt <= 0:
        nt = omp_get_max_threads()
    if nt > omp_get_thread_limit():
        nt = omp_get_thread_limit()
    if nt > nblocks:
        nt = <int>nblocks
    if (seq_len + B) * nf < SERIAL_BELOW:
        nt = 1
    # Fork safety: in a forked child a 2+-thread team can hang in libgomp; a
    # 1-thread team is safe (see fastpe_install_fork_guard).
    if fastpe_forked_child():
        nt = 1
    if nt < 1:
        nt = 1

    # One allocation: frequencies, the j-table (cos-1 and sin), per-thread anchors.
    cdef size_t n_freq_bytes = <size_t>nf * sizeof(pe_freq)
    cdef size_t n_doubles = <size_t>(2 * B * nf + 3 * nt * nf)
    cdef char *mem = <char *>malloc(n_freq_bytes + n_doubles * sizeof(double))
    if mem == NULL:
        return FASTPE_ENOMEM
    cdef pe_freq *fr = <pe_freq *>mem
    cdef double *Tcm1 = <double *>(mem + n_freq_bytes)
    cdef double *Ts = Tcm1 + B * nf
    cdef double *scratch = Ts + B * nf

    # Vaswani: w_i = base^(-2i/d) = exp(-i ln(base) / (d/2))
    pe_freqs(fr, nf, 1.0, base, 0.5 * <double>d_model)

    cdef int64_t j, jt, b, K0, k_lo, k_hi, k
    cdef int tid = 0
    cdef double *As = NULL
    cdef double *Ac = NULL
    cdef double *tmp = NULL
    cdef real *row
    with parallel(num_threads=nt):
        tid = threadid()
        As = scratch + 3 * nf * tid
        Ac = As + nf
        tmp = Ac + nf
        # Table rows j = 0..B-1: e^{i j w}.  Only the j this call touches.
        for jt in prange(B, schedule="static"):
            if seq_len >= B or (jt - j0 + B) % B < seq_len:
                pe_sincos_row(<double>jt, fr, nf, Ts + jt * nf, tmp, Tcm1 + jt * nf)
        # Cython's prange is `omp for nowait`: wait until the whole table is built.
        fastpe_omp_barrier()
        for b in prange(nblocks, schedule="static"):
            K0 = (b_first + b) * B
            pe_sincos_row(<double>K0, fr, nf, As, Ac, tmp)
            k_lo = K0 if K0 > offset else offset
            k_hi = K0 + B - 1 if K0 + B - 1 < last else last
            for k in range(k_lo, k_hi + 1):
                row = out + (k - offset) * row_stride
                j = k - K0
                if layout == FASTPE_LAYOUT_INTERLEAVED:
                    if real is float:
                        pe_row_interleaved_f32(row, d_model, As, Ac, Tcm1 + j * nf, Ts + j * nf)
                    else:
                        pe_row_interleaved_f64(row, d_model, As, Ac, Tcm1 + j * nf, Ts + j * nf)
                else:
                    if real is float:
                        pe_row_split_f32(row, d_model, nf, As, Ac, Tcm1 + j * nf, Ts + j * nf)
                    else:
                        pe_row_split_f64(row, d_model, nf, As, Ac, Tcm1 + j * nf, Ts + j * nf)
    free(mem)
    return FASTPE_OK


cdef int fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return _fill(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return _fill(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


# ---------------------------------------------------------------------------
# Python entry points (private: the public API in fastpe._api validates first)
# ---------------------------------------------------------------------------

ERROR_MESSAGES = {
    FASTPE_ENULL: "out is NULL",
    FASTPE_ESIZE: "seq_len must be >= 0 and d_model >= 1",
    FASTPE_ESTRIDE: "row_stride must be >= d_model",
    FASTPE_EBASE: "base must be finite and > 0",
    FASTPE_ELAYOUT: "unknown layout",
    FASTPE_ERANGE: "positions too large for an exact angle reduction",
    FASTPE_ENOMEM: "could not allocate kernel scratch memory",
}


def _raise_for(int err):
    if err == FASTPE_ENOMEM:
        raise MemoryError(ERROR_MESSAGES[err])
    raise ValueError(ERROR_MESSAGES.get(err, f"fastpe kernel error {err}"))


def fill(out, int64_t offset, double base, int layout, int num_threads):
    """Fill the validated 2-D float32/float64 array ``out`` (last axis contiguous,
    rows possibly strided, writable, aligned) in place and return it.
    ``num_threads <= 0`` means the OpenMP default.  The GIL is released for the
    whole fill."""
    cdef Py_buffer view
    cdef int err = FASTPE_OK
    cdef int64_t S, D, stride
    PyObject_GetBuffer(out, &view, PyBUF_RECORDS)
    try:
        if view.ndim != 2 or view.format == NULL or view.format[1] != 0 \
                or (view.format[0] != c'f' and view.format[0] != c'd'):
            raise TypeError("out must be a 2-D float32 or float64 buffer")
        S = view.shape[0]
        D = view.shape[1]
        stride = view.strides[0] // view.itemsize if S > 1 else D
        if S == 0:
            return out
        if view.format[0] == c'f':
            with nogil:
                err = fill_f32(<float *>view.buf, S, D, stride, base, offset, layout, num_threads)
        else:
            with nogil:
                err = fill_f64(<double *>view.buf, S, D, stride, base, offset, layout, num_threads)
    finally:
        PyBuffer_Release(&view)
    if err != FASTPE_OK:
        _raise_for(err)
    return out


def max_threads():
    """Threads a call with ``num_threads=None`` would use (before size caps):
    1 in a forked child (see ``forked_child``)."""
    return 1 if fastpe_forked_child() else omp_get_max_threads()


def forked_child():
    """True in a process forked from one that had imported fastpe: calls there
    run serially, since GNU libgomp's thread pool does not survive fork()."""
    return bool(fastpe_forked_child())


if fastpe_install_fork_guard() != 0:
    raise ImportError("fastpe: pthread_atfork failed; cannot install the fork guard")


def openmp_info():
    """(built with OpenMP, the _OPENMP version macro, e.g. 201511)."""
    return bool(FASTPE_OPENMP), int(FASTPE_OPENMP_VERSION)


def max_position(double base, int64_t d_model):
    """Largest |position| the kernel accepts for this (base, d_model)."""
    return int(min(PE_MAX_TURNS / _max_turns_per_position(base, d_model), 4503599627370496.0))
