# cython: language_level=3
"""fastpe kernel: fills a caller's buffer with the sinusoidal table, in parallel.

The Python layer (``fastpe._api``) validates and allocates; this module only
fills a buffer it is handed.  The hot loop is ``_fill`` below: a ``prange``
over blocks of rows, each block = one accurate "anchor" row evaluation plus one
complex multiply per (row, frequency) against a small table (see _pe_core.h for
the numerics and why results are independent of the thread count).
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, fabs, log, exp
from cython.parallel cimport prange, parallel, threadid
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_RECORDS

from fastpe._openmp_helpers cimport (
    FASTPE_OPENMP, FASTPE_OPENMP_VERSION, fastpe_omp_barrier, omp_get_max_threads,
    omp_get_thread_limit,
)

cdef extern from "_pe_core.h" nogil:
    ctypedef struct pe_freq:
        pass
    double PE_MAX_TURNS
    pe_freq pe_freq_view(double *mem, int64_t nf)
    void pe_freqs(pe_freq fr, int64_t nf, double w0, double base, double denom)
    void pe_sincos_row(double K, pe_freq fr, int64_t nf, double *s, double *c, double *cm1)
    void pe_compose(int64_t nf, const double *m1, const double *s1, const double *m0,
                    const double *s0, double *m, double *s)
    void pe_row_interleaved_f32(float *row, int64_t d, const double *As, const double *Ac,
                                const double *Tm, const double *Ts)
    void pe_row_interleaved_f64(double *row, int64_t d, const double *As, const double *Ac,
                                const double *Tm, const double *Ts)
    void pe_row_split_f32(float *rs, int64_t ns, float *rc, int64_t nc, const double *As,
                          const double *Ac, const double *Tm, const double *Ts)
    void pe_row_split_f64(double *rs, int64_t ns, double *rc, int64_t nc, const double *As,
                          const double *Ac, const double *Tm, const double *Ts)

ctypedef fused real:
    float
    double

cdef enum:
    # Below this many output entries one thread beats waking the team.
    SERIAL_BELOW = 16384
    # Table budget: 2 * B * nf doubles (~1 MiB), so the table stays in L2.
    TABLE_DOUBLES = 131072
    MAX_BLOCK = 64
    # The table's rows j = j1*SUB + j0 are themselves composed from SUB + B/SUB
    # accurately evaluated rows (one more exact rotation, ~1 ulp, for 4x fewer
    # evaluations: what makes small tables cheap).
    SUB = 8


cdef inline int64_t _block_rows(int64_t nf) noexcept nogil:
    """Rows per anchor block: a power of two that depends on the width only --
    never on seq_len, offset or the thread count -- so every entry is a pure
    function of (position, column) and chunked fills agree bitwise with one fill."""
    cdef int64_t b = MAX_BLOCK
    while b > SUB and 2 * b * nf > TABLE_DOUBLES:
        b //= 2
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

    cdef int64_t D = d_model
    cdef int64_t nf = (D + 1) // 2                # frequencies (odd d: one extra sine)
    cdef int64_t B = _block_rows(nf)
    cdef int64_t b0 = SUB if B >= SUB else B      # table row j = j1*b0 + j0
    cdef int64_t b1 = B // b0
    cdef int64_t last = offset + seq_len - 1
    cdef int64_t b_first = _floordiv(offset, B)
    cdef int64_t nblocks = _floordiv(last, B) - b_first + 1
    cdef int64_t j0 = offset - b_first * B          # offset mod B, in [0, B)
    cdef int64_t j, r

    cdef int nt = num_threads
    if nt <= 0:
        nt = omp_get_max_threads()
    if nt > omp_get_thread_limit():
        nt = omp_get_thread_limit()
    if nt > nblocks:
        nt = <int>nblocks
    if seq_len * D < SERIAL_BELOW:
        nt = 1
    if nt < 1:
        nt = 1

    # One allocation.  Per call: frequencies (4 nf), the composed table (2 B nf),
    # its factors (2 (b0 + b1) nf) and which rows this call needs; per thread:
    # one accurate evaluation (3 nf: sin, cos, cos-1).
    cdef size_t n_doubles = <size_t>(4 * nf + 2 * B * nf + 2 * (b0 + b1) * nf
                                     + B + b0 + b1 + 3 * nt * nf)
    cdef double *mem = <double *>malloc(n_doubles * sizeof(double))
    if mem == NULL:
        return FASTPE_ENOMEM
    cdef pe_freq fr = pe_freq_view(mem, nf)
    cdef double *Tm = mem + 4 * nf                  # table row j: Tm + j*nf, Ts + j*nf
    cdef double *Ts = Tm + B * nf
    cdef double *F0m = Ts + B * nf                  # factor rows e^{i j0 w}, j0 < b0
    cdef double *F0s = F0m + b0 * nf
    cdef double *F1m = F0s + b0 * nf                # factor rows e^{i j1 b0 w}, j1 < b1
    cdef double *F1s = F1m + b1 * nf
    cdef double *need = F1s + b1 * nf               # need[j], need0[j0], need1[j1]
    cdef double *need0 = need + B
    cdef double *need1 = need0 + b0
    cdef double *scratch = need1 + b1

    # Vaswani: w_i = base^(-2i/d) = exp(-i ln(base) / (d/2))
    pe_freqs(fr, nf, 1.0, base, 0.5 * <double>D)
    # A short call touches only some residues j = position mod B: build just those.
    for r in range(b0):
        need0[r] = 0
    for r in range(b1):
        need1[r] = 0
    for j in range(B):
        need[j] = 1.0 if (seq_len >= B or (j - j0 + B) % B < seq_len) else 0.0
        if need[j] != 0:
            need0[j % b0] = 1
            need1[j // b0] = 1

    cdef int64_t b, K0, k_lo, k_hi, k
    cdef int64_t nc = D // 2
    cdef int tid = 0
    cdef double *ev = NULL                        # this thread's anchor: sin, cos, cos-1
    cdef real *row
    with parallel(num_threads=nt):
        tid = threadid()
        ev = scratch + 3 * nf * tid
        # 1. factor rows, each evaluated accurately
        for r in prange(b0 + b1, schedule="static"):
            if r < b0:
                if need0[r] != 0:
                    pe_sincos_row(<double>r, fr, nf, F0s + r * nf, ev + nf, F0m + r * nf)
            elif need1[r - b0] != 0:
                pe_sincos_row(<double>((r - b0) * b0), fr, nf,
                              F1s + (r - b0) * nf, ev + nf, F1m + (r - b0) * nf)
        fastpe_omp_barrier()   # Cython's prange is `omp for nowait`
        # 2. table rows j = j1*b0 + j0, composed from the factors
        for j in prange(B, schedule="static"):
            if need[j] != 0:
                pe_compose(nf, F1m + (j // b0) * nf, F1s + (j // b0) * nf,
                           F0m + (j % b0) * nf, F0s + (j % b0) * nf, Tm + j * nf, Ts + j * nf)
        fastpe_omp_barrier()
        # 3. the hot loop: per block, one accurate anchor row, then every row of
        #    the block is that anchor rotated by its table row.
        for b in prange(nblocks, schedule="static"):
            K0 = (b_first + b) * B
            pe_sincos_row(<double>K0, fr, nf, ev, ev + nf, ev + 2 * nf)
            k_lo = K0 if K0 > offset else offset
            k_hi = K0 + B - 1 if K0 + B - 1 < last else last
            for k in range(k_lo, k_hi + 1):
                row = out + (k - offset) * row_stride
                j = k - K0
                if layout == FASTPE_LAYOUT_INTERLEAVED:
                    if real is float:
                        pe_row_interleaved_f32(row, D, ev, ev + nf, Tm + j * nf, Ts + j * nf)
                    else:
                        pe_row_interleaved_f64(row, D, ev, ev + nf, Tm + j * nf, Ts + j * nf)
                else:
                    if real is float:
                        pe_row_split_f32(row, nf, row + nf, nc, ev, ev + nf,
                                         Tm + j * nf, Ts + j * nf)
                    else:
                        pe_row_split_f64(row, nf, row + nf, nc, ev, ev + nf,
                                         Tm + j * nf, Ts + j * nf)
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
    """Threads a call with ``num_threads=None`` would use (before size caps)."""
    return omp_get_max_threads()


def openmp_info():
    """(built with OpenMP, the _OPENMP version macro, e.g. 201511)."""
    return bool(FASTPE_OPENMP), int(FASTPE_OPENMP_VERSION)


def max_position(double base, int64_t d_model):
    """Largest |position| the kernel accepts for this (base, d_model)."""
    return int(min(PE_MAX_TURNS / _max_turns_per_position(base, d_model), 4503599627370496.0))
