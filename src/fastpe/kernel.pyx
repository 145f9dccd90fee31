# cython: language_level=3
"""fastpe kernel: fills a caller's buffer with the sinusoidal table, in parallel.

The Python layer (``fastpe._api``) validates and allocates; this module only
fills a buffer it is handed.  The hot loop is in ``_fill_rows`` below: a
``prange`` over row ranges; each block of B rows costs one accurate "anchor"
row evaluation at its centre, and every row one complex multiply per frequency
against a small table, rows centre+a and centre-a sharing theirs (see
_pe_core.h for the numerics and why results are independent of the thread
count).  What precedes the first row (frequencies, table) is a ``Plan``.
"""

from libc.stdint cimport int32_t, int64_t, uint64_t
from cpython.pythread cimport (
    PyThread_type_lock, PyThread_allocate_lock, PyThread_free_lock, PyThread_acquire_lock,
    PyThread_release_lock, WAIT_LOCK,
)
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, fabs, log, exp, floor
from libc.string cimport memset, memcpy
from libc.stdint cimport INT64_MIN, INT64_MAX
from cython.parallel cimport prange, parallel, threadid
from cpython.buffer cimport (
    PyObject_GetBuffer, PyBuffer_Release, PyBUF_RECORDS, PyBUF_STRIDES, PyBUF_FORMAT,
)

from fastpe._openmp_helpers cimport (
    FASTPE_OPENMP, FASTPE_OPENMP_VERSION, fastpe_omp_barrier, omp_get_max_threads,
    fastpe_omp_thread_limit, fastpe_install_fork_guard, fastpe_forked_child,
    fastpe_set_cpu_quota, fastpe_usable_cpus,
)
from cpython.exc cimport PyErr_CheckSignals, PyErr_Occurred
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.buffer cimport PyBUF_WRITABLE, PyBUF_C_CONTIGUOUS
import threading

import numpy as _np

from fastpe import _system

cdef object _NDARRAY = _np.ndarray
cdef object _np_empty = _np.empty
cdef object _F32 = _np.dtype(_np.float32)
cdef object _F64 = _np.dtype(_np.float64)
cdef object _F32_TYPE = _np.float32
cdef object _F64_TYPE = _np.float64
# requests below this many bytes skip the memory-limit look-up (see _validate)
cdef double _small_request = _system.SMALL_REQUEST

cdef extern from "csrc/pe_core.h" nogil:
    ctypedef struct pe_freq:
        pass
    ctypedef struct pe_spec:
        int64_t d
        int64_t nf
        double w0
        double base
        double denom
        int layout
        int64_t npairs
        int lone_sin
        int64_t s_off
        int64_t ns
        int64_t c_off
        int64_t nc
        int64_t zero_col
    double PE_MAX_TURNS
    pe_freq pe_freq_view(double *mem, int64_t nf)
    void pe_freqs(pe_freq fr, int64_t nf, double w0, double base, double denom)
    void pe_sincos_row(double K, pe_freq fr, int64_t nf, double *s, double *c, double *cm1)
    void pe_compose(int64_t nf, const double *m1, const double *s1, const double *m0,
                    const double *s0, double *m, double *s)
    void pe_row_f32(float *row, const pe_spec *sp, double zero, const double *As,
                    const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row_f64(double *row, const pe_spec *sp, double zero, const double *As,
                    const double *Ac, const double *Tm, const double *Ts, double sg)
    void pe_row2_f32(float *rp, float *rm, const pe_spec *sp, double zero, const double *As,
                     const double *Ac, const double *Tm, const double *Ts)
    void pe_row2_f64(double *rp, double *rm, const pe_spec *sp, double zero, const double *As,
                     const double *Ac, const double *Tm, const double *Ts)
    void pe_zero_row_f32(float *row, int64_t d, double zero)
    void pe_zero_row_f64(double *row, int64_t d, double zero)
    void pe_add_row_f32(float *x, const double *pe, int64_t n, double scale)
    void pe_add_row_f64(double *x, const double *pe, int64_t n, double scale)
    int pe_row2_v512_f32(float *rp, float *rm, const pe_spec *sp, const double *As,
                         const double *Ac, const double *Tm, const double *Ts, int stream)
    int pe_row2_v512_f64(double *rp, double *rm, const pe_spec *sp, const double *As,
                         const double *Ac, const double *Tm, const double *Ts, int stream)
    void pe_v512_init()
    int pe_v512_set(int on)
    int pe_v512
    void pe_stream_copy(void *dst, const void *src, size_t n)
    void pe_stream_fence()
    void pe_prefetch_write(const void *p, size_t n)
    int PE_HAVE_STREAM
    int PE_HAVE_V512
    pe_spec pe_spec_vaswani(int64_t d, double base, int layout)
    double pe_spec_max_turns(const pe_spec *sp)

ctypedef fused real:
    float
    double

cdef int64_t MAX_WIDTH = 1099511627776     # 2^40

cdef enum:
    # A row evaluated accurately (fractional or scattered positions) counts as
    # this many table entries per frequency of work (see _serial_below).
    EVAL_WORK = 16
    # Block size budget: 2 * B * nf doubles (~1 MiB); the table holds about half
    # of that (rows 0..B/2), so it stays in L2.
    TABLE_DOUBLES = 131072
    MAX_BLOCK = 128
    # The table's rows j = j1*SUB + j0 are themselves composed from SUB + B/SUB
    # accurately evaluated rows (one more exact rotation, ~1 ulp, for 4x fewer
    # evaluations: what makes small tables cheap).
    SUB = 8
    # Streaming stores only for rows up to this many entries (the per-thread row
    # buffer they are copied from stays in L2).
    STREAM_MAX_WIDTH = 32768


def _default_stream_bytes():
    """(float64, float32): fills of at least this many bytes into memory the caller
    already has (out=, the C API) use streaming stores (the AVX-512 pair writers,
    else pe_stream_copy): tables that outgrow what the caches usefully hold.
    Measured on the 2-core VM (260 MiB shared L3), out= N x 1024 of a NumPy
    array, medians in ms, plain vs streaming (fastpe bench's machine):
      float64   8 MiB 0.31 vs 0.23, 32 MiB 1.07 vs 0.93, 128 MiB 7.7 vs 3.6:
                streaming wins from 8 MiB on;
      float32  32 MiB 0.94 vs 1.07, 64 MiB 1.83 vs 2.17, 80 MiB 2.4 vs 2.7,
                128 MiB 7.9 vs 4.5: plain wins up to ~80 MiB while the shared
                cache is quiet; when other tenants thrash it, plain stores to 64
                MiB took 9.5 ms (they then read every line from memory first).
    Per byte a float32 row carries twice the arithmetic (and the conversions),
    which the streaming path overlaps less well with its memory traffic.  Hence
    1/32 of the last-level cache for float64 and 1/8 for float32 (robust to a
    busy cache at ~15-20 % cost in a quiet one between 1/8 and ~1/3), at least
    8 MiB each.  Never for newly allocated arrays: their pages were just zeroed by the
    OS, so the lines are already in the cache and streaming over them measured
    slower (9 vs 12 ms)."""
    llc = 0
    try:
        import glob
        for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
            with open(path) as f:
                text = f.read().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[len(text) - 1:], 1)
            llc = max(llc, int(text.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        llc = 0
    if llc <= 0:
        return (float(32 << 20), float(64 << 20))
    return (float(max(8 << 20, llc // 32)), float(max(8 << 20, llc // 8)))


pe_v512_init()
# False in builds without the AVX-512 writers (FASTPE_NO_AVX512_WRITERS), where
# _set_avx512_writers(True) cannot turn them on whatever the CPU.
_avx512_writers_built = bool(PE_HAVE_V512)
cdef double _stream_bytes_f64, _stream_bytes_f32
_stream_bytes_f64, _stream_bytes_f32 = _default_stream_bytes()


def streaming_stores():
    """How streaming fills are written here: "avx512", "sse2" or "plain"."""
    if PE_HAVE_STREAM == 0:
        return "plain"
    return "avx512" if pe_v512 else "sse2"     # a read: no writer state is touched


def _set_avx512_writers(bint on):
    """Write rows (mirrored pairs and rows alone) with the AVX-512 writers
    (AVX-512F CPUs; on by default there; streaming fills of pairs go straight from
    registers) or with the portable loops (streaming fills through a row buffer
    and pe_stream_copy); returns the old setting.  Both give the same bits.  For
    tests and measurements; not while a fill runs."""
    return bool(pe_v512_set(on))


def _set_stream_bytes(nbytes):
    """Set the streaming-store thresholds (bytes per fill): one number for both
    dtypes or a (float64, float32) pair; returns the old pair.  For tests and
    measurements: inf disables streaming, 0 forces it."""
    global _stream_bytes_f64, _stream_bytes_f32
    old = (_stream_bytes_f64, _stream_bytes_f32)
    f64, f32 = nbytes if isinstance(nbytes, tuple) else (nbytes, nbytes)
    _stream_bytes_f64, _stream_bytes_f32 = float(f64), float(f32)
    return old


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


cdef struct pe_rows:
    # Which positions the rows of a fill encode.  Row r = b*S + s (sequence b,
    # step s) sits at out + r*row_stride and encodes position
    #     K = (offs[b*offs_stride] if offs else offset) + (pos[b*psb + s*pss] if pos else s)
    # pos is int64 (pos_i) or float64 (pos_f, then offs must be NULL and offset 0).
    int64_t nseq
    int64_t S
    int64_t offset
    const int64_t *offs
    int64_t offs_stride
    const int64_t *pos_i
    const double *pos_f
    int64_t psb
    int64_t pss
    int has_zero_pos       # rows at this position get an all-zero encoding
    int64_t zero_pos
    int add                # 0: out = PE;  1: out = out*scale + PE
    double scale
    int fresh              # out was just allocated (no streaming stores, see above)


cdef inline int64_t _int_position(const pe_rows *rq, int64_t b, int64_t s) noexcept nogil:
    cdef int64_t K = rq.offs[b * rq.offs_stride] if rq.offs != NULL else rq.offset
    return K + (rq.pos_i[b * rq.psb + s * rq.pss] if rq.pos_i != NULL else s)


cdef inline size_t _plan_doubles(int64_t nf, int64_t B) noexcept nogil:
    """A plan = [frequencies (4 nf) | table cos-1 ((B/2+1) nf) | table sin ((B/2+1) nf)]."""
    return <size_t>(4 * nf + 2 * (B // 2 + 1) * nf)


cdef int _prepare(double *plan, const pe_spec *sp, int64_t first, int64_t count,
                  int nt) noexcept nogil:
    """Fill a plan: the frequencies and the table e^{i a w}, a = 0 .. B/2, each row
    composed from two accurately evaluated factor rows (a = a1*b0 + a0).  Position
    K is encoded around the centre c of its block (see _centre) as the rotation by
    a = |K - c| (sign K - c).  Only the rows a needed by positions first .. first+count-1
    are built (all of them when count >= B): a short fill touches only a few."""
    cdef int64_t nf = sp.nf
    cdef int64_t B = _block_rows(nf)
    cdef int64_t H = B // 2
    cdef int64_t b0 = SUB                           # B >= SUB always
    cdef int64_t b1 = H // b0 + 1
    cdef int64_t a, r, q
    cdef int tid
    # factor rows (2 (b0 + b1) nf), which rows are needed (H+1 + b0 + b1), and per
    # thread one evaluation's discarded cosines (nf)
    cdef double *mem = <double *>malloc(<size_t>(2 * (b0 + b1) * nf + H + 1 + b0 + b1
                                                 + nt * nf) * sizeof(double))
    if mem == NULL:
        return FASTPE_ENOMEM
    cdef pe_freq fr = pe_freq_view(plan, nf)
    cdef double *Tm = plan + 4 * nf                 # table row a: Tm + a*nf, Ts + a*nf
    cdef double *Ts = Tm + (H + 1) * nf
    cdef double *F0m = mem                          # factor rows e^{i a0 w}, a0 < b0
    cdef double *F0s = F0m + b0 * nf
    cdef double *F1m = F0s + b0 * nf                # factor rows e^{i a1 b0 w}, a1 < b1
    cdef double *F1s = F1m + b1 * nf
    cdef double *need = F1s + b1 * nf               # need[a], need0[a0], need1[a1]
    cdef double *need0 = need + H + 1
    cdef double *need1 = need0 + b0
    cdef double *discard = need1 + b1

    pe_freqs(fr, nf, sp.w0, sp.base, sp.denom)
    for r in range(b0):
        need0[r] = 0
    for r in range(b1):
        need1[r] = 0
    for a in range(H + 1):
        need[a] = 1.0 if count >= B else 0.0
    if count < B:
        for q in range(count):
            r = (first + q) - _floordiv(first + q, B) * B     # K - centre + H
            need[r - H if r >= H else H - r] = 1.0
        need[0] = 1.0       # rotation by 0: rows evaluated directly (position 0, fractions)
    for a in range(H + 1):
        if need[a] != 0:
            need0[a % b0] = 1
            need1[a // b0] = 1
    if nt > H + 1:
        nt = <int>(H + 1)
    with parallel(num_threads=nt):
        tid = threadid()
        for r in prange(b0 + b1, schedule="static"):
            if r < b0:
                if need0[r] != 0:
                    pe_sincos_row(<double>r, fr, nf, F0s + r * nf, discard + tid * nf,
                                  F0m + r * nf)
            elif need1[r - b0] != 0:
                pe_sincos_row(<double>((r - b0) * b0), fr, nf, F1s + (r - b0) * nf,
                              discard + tid * nf, F1m + (r - b0) * nf)
        fastpe_omp_barrier()   # Cython's prange is `omp for nowait`
        for a in prange(H + 1, schedule="static"):
            if need[a] != 0:
                pe_compose(nf, F1m + (a // b0) * nf, F1s + (a // b0) * nf,
                           F0m + (a % b0) * nf, F0s + (a % b0) * nf, Tm + a * nf, Ts + a * nf)
    free(mem)
    return FASTPE_OK


# Fills with less work than this (in table entries) run on the calling thread:
# waking a team whose workers went to sleep between calls costs more than it
# saves (bench/serial_threshold.py; docs/reliability.md).
cdef int64_t _serial_below = 131072


def _set_serial_below(int64_t work):
    """Set the serial threshold (entries of work); returns the old one.  For
    tests: the thread count never changes the results, only which code runs."""
    global _serial_below
    old = _serial_below
    _serial_below = work
    return old


cdef int _threads(int num_threads, int64_t N, int64_t D, int64_t work=-1) noexcept nogil:
    """The team size of a fill of N rows of D entries (``work``: its cost in
    entries when not N*D, see _serial_below): the request (or the OpenMP default),
    capped at the OpenMP thread limit and at the cores this process may use (see
    fastpe_usable_cpus), one for small fills and in a forked child."""
    cdef int nt = num_threads
    if work < 0:
        work = N * D
    # Fork safety: in a forked child a 2+-thread team can hang in libgomp; a
    # 1-thread team is safe (see fastpe_install_fork_guard).
    if work < _serial_below or N <= 1 or fastpe_forked_child():
        return 1
    if nt <= 0:
        nt = omp_get_max_threads()
    if nt > fastpe_omp_thread_limit():
        nt = fastpe_omp_thread_limit()
    if nt > 1 and nt > fastpe_usable_cpus():
        nt = fastpe_usable_cpus()
    if nt > N:
        nt = <int>N
    return nt if nt >= 1 else 1


cdef struct pe_ctx:
    # what every row of one fill shares (read-only in the parallel loop)
    const pe_spec *sp
    const pe_rows *rq
    pe_freq fr
    int64_t nf
    int64_t B
    const double *Tm
    const double *Ts


cdef inline void _encode_row(real *row, const pe_ctx *c, int64_t b, int64_t s, double *ev,
                             int64_t *cached, double zero) noexcept nogil:
    """The encoding of the position of row (b, s) -> row.  ev: this thread's
    anchor scratch (3 nf), *cached: the anchor position it holds."""
    cdef const pe_rows *rq = c.rq
    cdef int64_t nf = c.nf, K
    cdef double Kf
    if rq.pos_f != NULL:
        Kf = rq.pos_f[b * rq.psb + s * rq.pss]
        if Kf != floor(Kf):
            # a fractional position: evaluate the row directly, then "rotate" it
            # by table row 0, which is exactly (0, 0)
            pe_sincos_row(Kf, c.fr, nf, ev, ev + nf, ev + 2 * nf)
            cached[0] = INT64_MIN
            _write_one(row, c, ev, 0, NULL, False, zero)
            return
        K = <int64_t>Kf
    else:
        K = _int_position(rq, b, s)
    if rq.has_zero_pos and K == rq.zero_pos:
        if real is float:
            pe_zero_row_f32(row, c.sp.d, zero)
        else:
            pe_zero_row_f64(row, c.sp.d, zero)
        return
    _write_at(row, c, K, ev, cached, NULL, False, zero)


cdef inline int64_t _centre(int64_t K, int64_t B) noexcept nogil:
    """The centre of K's block.  Blocks are the positions m*B .. m*B+B-1, centred
    at m*B + B/2: a table that starts at position 0 (the common case) is whole
    blocks, so nearly all of its rows are written as mirrored pairs."""
    return _floordiv(K, B) * B + B // 2


cdef inline void _anchor(const pe_ctx *c, int64_t K, double *ev, int64_t *cached) noexcept nogil:
    """Make ev hold the anchor of K's block: the accurate row at its centre;
    *cached is the centre it holds."""
    cdef int64_t centre = _centre(K, c.B)
    if centre != cached[0]:
        pe_sincos_row(<double>centre, c.fr, c.nf, ev, ev + c.nf, ev + 2 * c.nf)
        cached[0] = centre


cdef inline void _write_at(real *dest, const pe_ctx *c, int64_t K, double *ev, int64_t *cached,
                           real *buf, bint stream, double zero) noexcept nogil:
    """The row of integer position K, alone.  Position 0 is evaluated directly, so
    it is exact (sines 0, cosines 1), not the rotation of its block's anchor (ev
    then no longer holds an anchor: *cached is reset)."""
    if K == 0:
        pe_sincos_row(0.0, c.fr, c.nf, ev, ev + c.nf, ev + 2 * c.nf)
        cached[0] = INT64_MIN
        _write_one(dest, c, ev, 0, buf, stream, zero)
        return
    _anchor(c, K, ev, cached)
    _write_one(dest, c, ev, K - cached[0], buf, stream, zero)


cdef inline void _write_one(real *dest, const pe_ctx *c, const double *ev, int64_t j,
                            real *buf, bint stream, double zero) noexcept nogil:
    """Row at centre + j of the anchor in ev: rotated by table row |j|, sign of j
    (through buf when streaming)."""
    cdef int64_t a = j if j >= 0 else -j
    cdef real *row = buf if stream else dest
    if real is float:
        pe_row_f32(row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf, c.Ts + a * c.nf,
                   1.0 if j >= 0 else -1.0)
    else:
        pe_row_f64(row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf, c.Ts + a * c.nf,
                   1.0 if j >= 0 else -1.0)
    if stream:
        pe_stream_copy(dest, row, c.sp.d * sizeof(real))


cdef inline void _write_pair(real *out, int64_t row_stride, int64_t rp, int64_t rm,
                             const pe_ctx *c, const double *ev, int64_t j, real *buf,
                             bint stream) noexcept nogil:
    """Rows rp (centre + j) and rm (centre - j), j > 0."""
    cdef int64_t D = c.sp.d
    # the AVX-512 writers where the CPU has them (streaming: straight from registers)
    if real is float:
        if pe_row2_v512_f32(out + rp * row_stride, out + rm * row_stride, c.sp, ev,
                            ev + c.nf, c.Tm + j * c.nf, c.Ts + j * c.nf, stream):
            return
    else:
        if pe_row2_v512_f64(out + rp * row_stride, out + rm * row_stride, c.sp, ev,
                            ev + c.nf, c.Tm + j * c.nf, c.Ts + j * c.nf, stream):
            return
    cdef real *p = buf if stream else out + rp * row_stride
    cdef real *m = buf + D if stream else out + rm * row_stride
    if real is float:
        pe_row2_f32(p, m, c.sp, 0.0, ev, ev + c.nf, c.Tm + j * c.nf, c.Ts + j * c.nf)
    else:
        pe_row2_f64(p, m, c.sp, 0.0, ev, ev + c.nf, c.Tm + j * c.nf, c.Ts + j * c.nf)
    if stream:
        pe_stream_copy(out + rp * row_stride, p, D * sizeof(real))
        pe_stream_copy(out + rm * row_stride, m, D * sizeof(real))


cdef void _fill_blocks(real *out, int64_t row_stride, const pe_ctx *c, int64_t off,
                      int64_t N, int64_t lo, int64_t hi, double *ev, int64_t *cached,
                      real *buf, bint stream) noexcept nogil:
    """Contiguous rows 0..N-1 (positions off + r), block by block.  Rows centre+j
    and centre-j share their table row and its four products, so they are written
    together (bitwise as if alone).  Within a block the rows are taken in the
    order centre, (centre+1, centre-1), (centre+2, centre-2), ..., centre-B/2;
    blocks follow each other in memory order, so a block's first unit (a pair or a
    single row) has the index "rows before the block".  This thread writes the
    units whose index is in lo .. hi-1: the threads split the work into equal row
    counts without splitting a pair (which would leave two single rows)."""
    cdef int64_t B = c.B
    cdef int64_t H = c.B // 2
    cdef int64_t centre = _centre(off + lo, B)               # the block holding row lo
    cdef int64_t first, last, idx, j, K
    cdef bint has_p, has_m
    while centre - H <= off + N - 1:
        first = centre - H if centre - H > off else off        # its positions in the fill
        last = centre + H - 1 if centre + H - 1 < off + N - 1 else off + N - 1
        idx = first - off
        if idx >= hi:
            break
        for j in range(H + 1):
            has_p = j < H and first <= centre + j <= last
            has_m = j > 0 and first <= centre - j <= last
            if not (has_p or has_m):
                continue
            if idx >= hi:
                break
            if idx >= lo:
                if has_p and has_m:
                    _anchor(c, centre, ev, cached)
                    _write_pair(out, row_stride, centre + j - off, centre - j - off, c, ev, j,
                                buf, stream)
                else:
                    K = centre + j if has_p else centre - j
                    _write_at(out + (K - off) * row_stride, c, K, ev, cached, buf, stream, 0.0)
            idx += 2 if (has_p and has_m) else 1
        centre += B


cdef struct pe_fill:
    # One fill, prepared: what its rows share, its team and its scratch memory.
    # Built by _fill_setup, run in ranges of units by _fill_units, freed by _fill_free.
    pe_ctx c
    int nt
    bint stream             # streaming (non-temporal) stores
    bint contiguous         # one sequence of consecutive positions: mirrored pairs
    bint shared             # add: every sequence has the same positions
    int64_t units           # what the threads split: rows, or steps when shared
    int64_t per_thread      # scratch doubles per thread
    double *mem             # scratch (and the plan when the caller had none)
    double *scratch
    int64_t seed            # centre whose anchor thread 0's scratch holds (INT64_MIN: none)
    int64_t last            # the same after the last range ran


cdef struct pe_anchor_cache:
    # The last anchor row (sin, cos at a block centre) a small fill evaluated for
    # one encoding: consecutive decoding steps (positions k, k+1, ...) share their
    # block's anchor, the costliest part of a one-row call.  Copied in and out
    # under the lock, so it is never read half written.
    PyThread_type_lock lock
    double *data            # 2 nf doubles, or NULL
    int64_t centre          # INT64_MIN: empty


cdef int _fill_setup(pe_fill *f, const pe_spec *sp, const pe_rows *rq, int num_threads,
                     const double *plan, size_t itemsize) noexcept nogil:
    """Decide the team and the store kind, allocate scratch, and build the plan
    unless the caller has one.  ``plan``: a prepared plan for this spec (see
    Plan), or NULL to build the part of one this fill needs."""
    cdef int64_t D = sp.d
    cdef int64_t nf = sp.nf
    cdef int64_t S = rq.S
    cdef int64_t N = rq.nseq * S
    cdef int64_t B = _block_rows(nf)
    cdef int err
    memset(f, 0, sizeof(pe_fill))
    f.seed = INT64_MIN
    f.last = INT64_MIN
    f.contiguous = rq.nseq == 1 and rq.pos_i == NULL and rq.pos_f == NULL \
        and rq.offs == NULL and not rq.has_zero_pos
    # positions independent of the sequence: one encoded row per step serves all
    f.shared = rq.add and rq.offs == NULL \
        and ((rq.pos_i == NULL and rq.pos_f == NULL) or rq.psb == 0)
    f.units = S if f.shared else N
    # rows at explicit positions may each need an accurate evaluation
    f.nt = _threads(num_threads, N, D, N * D if f.contiguous or (rq.pos_i == NULL and
                    rq.pos_f == NULL) else N * (D + EVAL_WORK * nf))
    if f.nt > f.units:
        f.nt = <int>f.units
    cdef double stream_from = _stream_bytes_f32 if itemsize == 4 else _stream_bytes_f64
    f.stream = PE_HAVE_STREAM and not rq.add and not rq.fresh and D <= STREAM_MAX_WIDTH \
        and <double>N * <double>(D * itemsize) >= stream_from
    f.per_thread = 3 * nf + (D if rq.add else (2 * D if f.stream else 0))
    cdef size_t own = 0 if plan != NULL else _plan_doubles(nf, B)
    f.mem = <double *>malloc((own + <size_t>(f.per_thread * f.nt)) * sizeof(double))
    if f.mem == NULL:
        return FASTPE_ENOMEM
    f.scratch = f.mem + own
    if plan == NULL:
        err = _prepare(f.mem, sp, rq.offset if f.contiguous else 0, S if f.contiguous else B,
                       f.nt)
        if err != FASTPE_OK:
            _fill_free(f)
            return err
        plan = f.mem
    f.c.sp = sp
    f.c.rq = rq
    f.c.fr = pe_freq_view(<double *>plan, nf)
    f.c.nf = nf
    f.c.B = B
    f.c.Tm = plan + 4 * nf
    f.c.Ts = f.c.Tm + (B // 2 + 1) * nf
    return FASTPE_OK


cdef inline void _fill_free(pe_fill *f) noexcept nogil:
    free(f.mem)
    f.mem = NULL


cdef void _fill_units(real *out, int64_t row_stride, const pe_fill *f, int64_t u0,
                      int64_t u1) noexcept nogil:
    """The hot loop: units u0 .. u1-1 of a prepared fill (all of them, or one
    chunk of a long fill), each thread a contiguous range of them.

    Integer positions K use the block decomposition K = c + j: an accurately
    evaluated anchor row at the centre c of K's block (see _centre), rotated by
    table row |j| (sign of j); position 0 is evaluated directly (exact).  Every
    entry is a pure function of (K, column): no dependence on the thread count,
    on the chunk a row came in, or on the path (mirrored pair, single row,
    explicit positions) that wrote it.  Non-integer positions are evaluated
    directly.

    The fused add (rq.add) encodes a row into a per-thread float64 buffer (it
    stays in L1), then adds it to x (x rounded once).  When every sequence has
    the same positions, each encoded row serves all of them: the threads split
    the steps, not the rows, and the row of the next sequence is prefetched."""
    cdef int64_t n = u1 - u0
    cdef int nt = f.nt
    if n <= 0:
        return
    if nt > n:
        nt = <int>n
    cdef int t
    if nt == 1:      # on the calling thread: no parallel region to enter for small fills
        _fill_part(out, row_stride, f, u0, u1, 0)
        return
    for t in prange(nt, num_threads=nt, schedule="static", chunksize=1):
        _fill_part(out, row_stride, f, u0 + t * n // nt, u0 + (t + 1) * n // nt, t)


cdef void _fill_part(real *out, int64_t row_stride, const pe_fill *f, int64_t u_lo,
                     int64_t u_hi, int t) noexcept nogil:
    """Units u_lo .. u_hi-1 of a fill, written by thread t (its scratch)."""
    cdef const pe_ctx *c = &f.c
    cdef const pe_rows *rq = f.c.rq
    cdef int64_t D = c.sp.d
    cdef int64_t nf = c.nf
    cdef int64_t S = rq.S
    cdef bint stream = f.stream
    cdef int64_t b, r
    # consecutive rows in one block share the anchor, which is evaluated once
    # (thread 0 may start with one already in its scratch: see pe_anchor_cache)
    cdef int64_t cached = f.seed if t == 0 else INT64_MIN
    cdef double *ev = f.scratch + f.per_thread * t
    cdef double *buf = ev + 3 * nf
    cdef real *dest
    if not rq.add and f.contiguous:
        _fill_blocks(out, row_stride, c, rq.offset, rq.S, u_lo, u_hi, ev, &cached,
                     <real *>buf, stream)
        if stream:
            pe_stream_fence()   # streaming stores are weakly ordered
    elif not rq.add:
        for r in range(u_lo, u_hi):
            b = r // S
            dest = out + r * row_stride
            if stream:
                _encode_row(<real *>buf, c, b, r - b * S, ev, &cached, 0.0)
                pe_stream_copy(dest, buf, D * sizeof(real))
            else:
                _encode_row(dest, c, b, r - b * S, ev, &cached, 0.0)
        if stream:
            pe_stream_fence()   # streaming stores are weakly ordered
    elif f.shared:
        for r in range(u_lo, u_hi):          # r: the step
            _encode_row(buf, c, 0, r, ev, &cached, -0.0)
            for b in range(rq.nseq):
                dest = out + (b * S + r) * row_stride
                if b + 1 < rq.nseq:
                    pe_prefetch_write(dest + S * row_stride, D * sizeof(real))
                if real is float:
                    pe_add_row_f32(dest, buf, D, rq.scale)
                else:
                    pe_add_row_f64(dest, buf, D, rq.scale)
    else:
        for r in range(u_lo, u_hi):
            b = r // S
            _encode_row(buf, c, b, r - b * S, ev, &cached, -0.0)
            dest = out + r * row_stride
            if real is float:
                pe_add_row_f32(dest, buf, D, rq.scale)
            else:
                pe_add_row_f64(dest, buf, D, rq.scale)
    if t == 0:
        (<pe_fill *>f).last = cached


cdef int _fill_rows(real *out, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                    int num_threads, const double *plan) noexcept nogil:
    """A whole fill in one go (the C API's entry points; arguments validated)."""
    cdef pe_fill f
    if rq.nseq * rq.S == 0:
        return FASTPE_OK
    cdef int err = _fill_setup(&f, sp, rq, num_threads, plan, sizeof(real))
    if err != FASTPE_OK:
        return err
    _fill_units(out, row_stride, &f, 0, f.units)
    _fill_free(&f)
    return FASTPE_OK


# ---------------------------------------------------------------------------
# The plan cache of the C API
# ---------------------------------------------------------------------------
# C callers run without the GIL, from any thread, so their plans cannot live in
# Python objects: a small table of plans keyed by what a plan depends on
# (nf, w0, base, denom), guarded by an OS lock (PyThread locks need no GIL), each
# entry reference-counted so that eviction never frees a plan a fill is using.

cdef enum:
    CPLANS = 8                  # entries; each at most PLAN_MAX_BYTES (4 MiB)
    CPLAN_MAX_DOUBLES = 524288


cdef struct pe_cplan:
    int64_t nf
    double w0, base, denom
    double *mem                 # NULL: a free slot
    int64_t refs                # fills using it now
    uint64_t used               # LRU stamp


cdef pe_cplan _cplans[CPLANS]
cdef uint64_t _cplan_clock = 0
cdef PyThread_type_lock _cplan_lock = PyThread_allocate_lock()
if _cplan_lock == NULL:
    raise MemoryError("fastpe: could not allocate the C-API plan cache lock")
memset(_cplans, 0, sizeof(_cplans))


cdef inline bint _cplan_is(const pe_cplan *e, const pe_spec *sp) noexcept nogil:
    return e.mem != NULL and e.nf == sp.nf and e.w0 == sp.w0 and e.base == sp.base \
        and e.denom == sp.denom


cdef const double *_cplan_acquire(const pe_spec *sp, int num_threads, int *slot,
                                  int *err) noexcept nogil:
    """A plan for sp: cached (slot >= 0; release it with _cplan_release), or, when
    the cache cannot hold it, NULL (slot -1: the fill prepares its own)."""
    cdef int i, victim = -1
    cdef int64_t B = _block_rows(sp.nf)
    cdef size_t n = _plan_doubles(sp.nf, B)
    cdef double *mem
    global _cplan_clock
    slot[0] = -1
    err[0] = FASTPE_OK
    if n > CPLAN_MAX_DOUBLES:
        return NULL
    PyThread_acquire_lock(_cplan_lock, WAIT_LOCK)
    for i in range(CPLANS):
        if _cplan_is(&_cplans[i], sp):
            _cplans[i].refs += 1
            _cplan_clock += 1
            _cplans[i].used = _cplan_clock
            PyThread_release_lock(_cplan_lock)
            slot[0] = i
            return _cplans[i].mem
    PyThread_release_lock(_cplan_lock)
    # build outside the lock (tens of microseconds); a racing thread may build
    # the same plan, and then one of the two is kept
    mem = <double *>malloc(n * sizeof(double))
    if mem == NULL:
        err[0] = FASTPE_ENOMEM
        return NULL
    err[0] = _prepare(mem, sp, 0, B, _threads(num_threads, B, sp.nf))
    if err[0] != FASTPE_OK:
        free(mem)
        return NULL
    PyThread_acquire_lock(_cplan_lock, WAIT_LOCK)
    for i in range(CPLANS):
        if _cplan_is(&_cplans[i], sp):          # another thread was first
            _cplans[i].refs += 1
            PyThread_release_lock(_cplan_lock)
            free(mem)
            slot[0] = i
            return _cplans[i].mem
        if _cplans[i].mem == NULL:             # a free slot first, else the LRU idle one
            if victim < 0 or _cplans[victim].mem != NULL:
                victim = i
        elif _cplans[i].refs == 0 and (victim < 0 or (_cplans[victim].mem != NULL and
                                                      _cplans[i].used < _cplans[victim].used)):
            victim = i
    if victim < 0:                              # every entry in use: keep it private
        PyThread_release_lock(_cplan_lock)
        free(mem)
        return NULL
    free(_cplans[victim].mem)
    _cplans[victim].mem = mem
    _cplans[victim].nf = sp.nf
    _cplans[victim].w0 = sp.w0
    _cplans[victim].base = sp.base
    _cplans[victim].denom = sp.denom
    _cplans[victim].refs = 1
    _cplan_clock += 1
    _cplans[victim].used = _cplan_clock
    PyThread_release_lock(_cplan_lock)
    slot[0] = victim
    return mem


cdef inline void _cplan_release(int slot) noexcept nogil:
    if slot >= 0:
        PyThread_acquire_lock(_cplan_lock, WAIT_LOCK)
        _cplans[slot].refs -= 1
        PyThread_release_lock(_cplan_lock)


cdef int _fill_cached(real *out, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                      int num_threads) noexcept nogil:
    """A C-API fill with the cached plan of its spec."""
    cdef int slot, err
    cdef const double *plan = _cplan_acquire(sp, num_threads, &slot, &err)
    if err != FASTPE_OK:
        return err
    err = _fill_rows(out, row_stride, sp, rq, num_threads, plan)
    _cplan_release(slot)
    return err


def _c_plan_cache():
    """(nf, w0, base, denom, refs) of the C API's cached plans (for tests)."""
    cdef int i
    out = []
    PyThread_acquire_lock(_cplan_lock, WAIT_LOCK)
    for i in range(CPLANS):
        if _cplans[i].mem != NULL:
            out.append((_cplans[i].nf, _cplans[i].w0, _cplans[i].base, _cplans[i].denom,
                        _cplans[i].refs))
    PyThread_release_lock(_cplan_lock)
    return out


cdef inline void _init_rows(pe_rows *rq, int64_t nseq, int64_t S, bint has_zero,
                            int64_t zero) noexcept nogil:
    """nseq sequences of S rows at positions 0 .. S-1, nothing added (the
    callers set offsets, positions and the add)."""
    memset(rq, 0, sizeof(pe_rows))
    rq.nseq = nseq
    rq.S = S
    rq.scale = 1.0
    rq.has_zero_pos = has_zero
    rq.zero_pos = zero


cdef inline double _extent(int64_t offset, int64_t S) noexcept nogil:
    """Largest |position| of offset .. offset+S-1 (in double: no overflow)."""
    cdef double a = fabs(<double>offset)
    cdef double b = fabs(<double>offset + <double>(S - 1)) if S > 0 else 0.0
    return a if a >= b else b


cdef int _positions_error(const real *out, int64_t n, int64_t row_stride, int64_t d,
                          const double *positions, double limit) noexcept nogil:
    """FASTPE_EOVERLAP if the n positions lie inside the rows to be written (the
    documented contract), FASTPE_ERANGE if one is NaN, infinite or beyond limit."""
    cdef int64_t r
    if <const char *>positions < <const char *>(out + (n - 1) * row_stride + d) \
            and <const char *>out < <const char *>(positions + n):
        return FASTPE_EOVERLAP
    for r in range(n):
        if not (fabs(positions[r]) <= limit):
            return FASTPE_ERANGE
    return FASTPE_OK


cdef int _check_common(const void *p, int64_t n, int64_t d_model, int64_t row_stride,
                       double base, int layout) noexcept nogil:
    """The checks every C entry point shares (n rows at row_stride, d_model wide)."""
    # widths beyond 2^40 cannot be a real buffer, and would overflow the scratch size
    if n < 0 or d_model < 1 or d_model > MAX_WIDTH:
        return FASTPE_ESIZE
    if p == NULL and n > 0:
        return FASTPE_ENULL
    if row_stride < d_model and n > 1:
        return FASTPE_ESTRIDE
    # above ~2^997 the Veltkamp split of base (2^27 * base) overflows
    if not (isfinite(base) and base > 0.0 and base <= 1e300):
        return FASTPE_EBASE
    if layout != FASTPE_LAYOUT_INTERLEAVED and layout != FASTPE_LAYOUT_SPLIT:
        return FASTPE_ELAYOUT
    return FASTPE_OK


cdef inline bint _frequencies_finite(const pe_spec *sp) noexcept nogil:
    """A tiny base (e.g. a subnormal) makes base^(-2i/d) overflow: even position 0
    would then give 0 * inf = NaN.  Such specs are refused, not filled."""
    return pe_spec_max_turns(sp) < 1e290   # (2^27 * f must not overflow in the Veltkamp split)


cdef int _check_args(const void *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                     double base, int64_t offset, int layout) noexcept nogil:
    cdef pe_spec sp
    cdef double kmax
    cdef int err = _check_common(out, seq_len, d_model, row_stride, base, layout)
    if err != FASTPE_OK:
        return err
    # |positions| * f_max must stay below 2^45 turns (exact quarter-turn reduction);
    # this also keeps offset + seq_len far from int64 overflow.
    sp = pe_spec_vaswani(d_model, base, layout)
    if not _frequencies_finite(&sp):
        return FASTPE_EBASE
    kmax = _extent(offset, seq_len)
    if kmax * pe_spec_max_turns(&sp) >= PE_MAX_TURNS or kmax >= 4503599627370496.0:
        return FASTPE_ERANGE
    return FASTPE_OK


cdef int _fill(real *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
               double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    cdef int err = _check_args(out, seq_len, d_model, row_stride, base, offset, layout)
    if err != FASTPE_OK or seq_len == 0:
        return err
    cdef pe_spec sp = pe_spec_vaswani(d_model, base, layout)
    cdef pe_rows rq
    memset(&rq, 0, sizeof(rq))
    rq.nseq = 1
    rq.S = seq_len
    rq.offset = offset
    rq.scale = 1.0
    return _fill_cached(out, row_stride, &sp, &rq, num_threads)


cdef int fill_f32(float *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return _fill(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)


cdef int fill_f64(double *out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                  double base, int64_t offset, int layout, int num_threads) noexcept nogil:
    return _fill(out, seq_len, d_model, row_stride, base, offset, layout, num_threads)



# ABI 1.1: the fused add and explicit positions (Vaswani spec, like fill_*).

cdef int _add(real *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
              double base, int64_t offset, double scale, int layout,
              int num_threads) noexcept nogil:
    if nseq < 0:
        return FASTPE_ESIZE
    cdef int err = _check_args(x, seq_len, d_model, row_stride, base, offset, layout)
    if err == FASTPE_OK and (nseq > 1 or seq_len > 1) and nseq > 0 and seq_len > 0 \
            and row_stride < d_model:
        err = FASTPE_ESTRIDE       # rows of different sequences would overlap
    if err == FASTPE_OK and not isfinite(scale):
        err = FASTPE_ESCALE
    if err != FASTPE_OK or nseq == 0 or seq_len == 0:
        return err
    if nseq > INT64_MAX // seq_len:
        return FASTPE_ESIZE
    cdef pe_spec sp = pe_spec_vaswani(d_model, base, layout)
    cdef pe_rows rq
    memset(&rq, 0, sizeof(rq))
    rq.nseq = nseq
    rq.S = seq_len
    rq.offset = offset
    rq.add = 1
    rq.scale = scale
    return _fill_cached(x, row_stride, &sp, &rq, num_threads)


cdef int _at(real *out, int64_t n, int64_t d_model, int64_t row_stride,
             const double *positions, double base, int layout, int add, double scale,
             int num_threads) noexcept nogil:
    cdef int err = _check_common(out, n, d_model, row_stride, base, layout)
    cdef double limit
    cdef pe_spec sp
    cdef pe_rows rq
    if err == FASTPE_OK and positions == NULL and n > 0:
        err = FASTPE_ENULL
    if err == FASTPE_OK and not isfinite(scale):
        err = FASTPE_ESCALE
    if err != FASTPE_OK or n == 0:
        return err
    sp = pe_spec_vaswani(d_model, base, layout)
    if not _frequencies_finite(&sp):
        return FASTPE_EBASE
    limit = PE_MAX_TURNS / pe_spec_max_turns(&sp)
    if limit > 4503599627370496.0:
        limit = 4503599627370496.0
    err = _positions_error(out, n, row_stride, d_model, positions, limit)
    if err != FASTPE_OK:
        return err
    _init_rows(&rq, 1, n, False, 0)
    rq.pos_f = positions
    rq.pss = 1
    rq.add = add
    rq.scale = scale
    return _fill_cached(out, row_stride, &sp, &rq, num_threads)


cdef int add_f32(float *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return _add(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout, num_threads)


cdef int add_f64(double *x, int64_t nseq, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, double scale, int layout,
                 int num_threads) noexcept nogil:
    return _add(x, nseq, seq_len, d_model, row_stride, base, offset, scale, layout, num_threads)


cdef int fill_positions_f32(float *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return _at(out, n, d_model, row_stride, positions, base, layout, 0, 1.0, num_threads)


cdef int fill_positions_f64(double *out, int64_t n, int64_t d_model, int64_t row_stride,
                            const double *positions, double base, int layout,
                            int num_threads) noexcept nogil:
    return _at(out, n, d_model, row_stride, positions, base, layout, 0, 1.0, num_threads)


cdef int add_positions_f32(float *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return _at(x, n, d_model, row_stride, positions, base, layout, 1, scale, num_threads)


cdef int add_positions_f64(double *x, int64_t n, int64_t d_model, int64_t row_stride,
                           const double *positions, double base, double scale, int layout,
                           int num_threads) noexcept nogil:
    return _at(x, n, d_model, row_stride, positions, base, layout, 1, scale, num_threads)


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
    FASTPE_ESCALE: "scale must be finite",
    FASTPE_EOVERLAP: "positions overlap the rows being written",
}


cdef char _native_code(const char *fmt) noexcept:
    """The struct-module type code of a 1-item native buffer format ('f', 'd',
    'l', 'q', ...), or 0.  Accepts the native byte-order prefixes NumPy and
    ctypes emit ('@', '=', and '<' on little-endian machines)."""
    cdef int little = (<const char *>&_one)[0] == 1
    if fmt == NULL:
        return 0
    if fmt[0] == c'@' or fmt[0] == c'=' or (fmt[0] == c'<' and little) \
            or (fmt[0] == c'>' and not little) or fmt[0] == c'!' and not little:
        fmt += 1
    if fmt[0] == 0 or fmt[1] != 0:
        return 0
    return fmt[0]


cdef int _one = 1


def _raise_for(int err):
    if err == FASTPE_ENOMEM:
        raise MemoryError(ERROR_MESSAGES[err])
    raise ValueError(ERROR_MESSAGES.get(err, f"fastpe kernel error {err}"))


cdef pe_spec _spec_from_dict(dict spec) except *:
    cdef pe_spec sp
    sp.d = spec["d"]
    sp.nf = spec["nf"]
    sp.w0 = spec["w0"]
    sp.base = spec["base"]
    sp.denom = spec["denom"]
    sp.layout = spec["layout"]
    sp.npairs = spec["npairs"]
    sp.lone_sin = spec["lone_sin"]
    sp.s_off = spec["s_off"]
    sp.ns = spec["ns"]
    sp.c_off = spec["c_off"]
    sp.nc = spec["nc"]
    sp.zero_col = spec["zero_col"]
    # the column map must stay inside the row: checked here, once, not per row
    if sp.d < 1 or sp.nf < 0 or sp.nf > sp.d or not (sp.w0 > 0 and sp.base > 0 and sp.denom > 0):
        raise ValueError(f"invalid kernel spec {spec}")
    if sp.layout == FASTPE_LAYOUT_INTERLEAVED:
        if sp.npairs < 0 or 2 * sp.npairs + sp.lone_sin > sp.d or sp.npairs + sp.lone_sin > sp.nf:
            raise ValueError(f"invalid kernel spec {spec}")
    elif sp.layout == FASTPE_LAYOUT_SPLIT:
        if (sp.ns < 0 or sp.nc < 0 or sp.ns > sp.nf or sp.nc > sp.nf or sp.s_off < 0
                or sp.c_off < 0 or sp.s_off + sp.ns > sp.d or sp.c_off + sp.nc > sp.d):
            raise ValueError(f"invalid kernel spec {spec}")
    else:
        raise ValueError(f"invalid kernel spec {spec}")
    if sp.zero_col >= sp.d:
        raise ValueError(f"invalid kernel spec {spec}")
    return sp


def fill_rows(out, dict spec, *, int64_t nseq, int64_t seq_len, int64_t offset=0, offsets=None,
              positions=None, zero_pos=None, bint add=False, double scale=1.0, int num_threads=0,
              Plan plan=None, bint fresh=False):
    """General fill from a spec dict (see Encoder.fill_rows, which the public
    functions use; this form is for tests of the kernel's pieces).  ``plan``: a
    Plan made from this same spec (saves preparing one per call)."""
    cdef pe_spec sp = _spec_from_dict(spec)
    cdef const double *pmem = NULL
    if plan is not None:
        if not plan._matches(&sp):
            raise ValueError("plan was made for a different spec")
        pmem = plan.mem
    return _fill_buffers(out, &sp, pmem, nseq, seq_len, offset, offsets, positions, zero_pos,
                         add, scale, num_threads, fresh)


cdef object _fill_buffers(out, const pe_spec *spp, const double *pmem, int64_t nseq,
                          int64_t seq_len, int64_t offset, offsets, positions, zero_pos,
                          bint add, double scale, int num_threads, bint fresh,
                          pe_anchor_cache *ac=NULL):
    """The general fill behind the public functions (which validate everything
    first): buffers in, kernel run, buffers released.

    ``out``: 2-D (nseq*seq_len, d) float32/float64 buffer, last axis contiguous,
    rows at a uniform stride.  Row r = b*seq_len + s encodes position
    ``(offsets[b] if offsets is not None else offset) + (positions[b, s] if
    positions is not None else s)``: ``offsets`` a 1-D int64 ndarray (any stride),
    ``positions`` a 2-D (nseq, seq_len) int64 or float64 ndarray (any strides,
    broadcast zeros welcome; float positions exclude offsets).  Rows at
    ``zero_pos`` get a zero encoding.  ``add``: out = out*scale + PE.
    ``fresh``: ``out`` was just allocated (its pages are new)."""
    cdef pe_spec sp = spp[0]
    cdef pe_rows rq
    cdef Py_buffer view, pview, oview
    cdef bint have_p = False, have_o = False
    cdef char code, pcode
    cdef int64_t stride
    memset(&rq, 0, sizeof(rq))
    rq.nseq = nseq
    rq.S = seq_len
    rq.offset = offset
    rq.add = add
    rq.scale = scale
    rq.fresh = fresh
    if zero_pos is not None:
        rq.has_zero_pos = 1
        rq.zero_pos = zero_pos
    PyObject_GetBuffer(out, &view, PyBUF_RECORDS)
    try:
        code = _native_code(view.format)
        if view.ndim != 2 or (code != c'f' and code != c'd'):
            raise TypeError("out must be a 2-D float32 or float64 buffer")
        if view.shape[0] != nseq * seq_len or view.shape[1] != sp.d:
            raise ValueError("out has the wrong shape for this fill")
        if view.shape[0] > 1 and view.strides[0] < sp.d * view.itemsize:
            raise ValueError("out's rows overlap")
        if view.shape[1] > 1 and view.strides[1] != view.itemsize:
            raise ValueError("out's rows must be contiguous")
        stride = view.strides[0] // view.itemsize if view.shape[0] > 1 else sp.d
        # Inputs that share memory with out (or x) are copied first, as NumPy's
        # ufuncs do: the fill would otherwise read positions it has overwritten.
        if offsets is not None:
            offsets = _input_buffer(offsets, &oview, &view)    # (the copy stays alive)
            have_o = True
            if oview.ndim != 1 or oview.shape[0] != nseq or oview.itemsize != 8 \
                    or _native_code(oview.format) not in (c'l', c'q'):
                raise TypeError("offsets must be a 1-D int64 array of length nseq")
            rq.offs = <const int64_t *>oview.buf
            rq.offs_stride = oview.strides[0] // 8
        if positions is not None:
            positions = _input_buffer(positions, &pview, &view)
            have_p = True
            if pview.ndim != 2 or pview.shape[0] != nseq or pview.shape[1] != seq_len \
                    or pview.itemsize != 8:
                raise TypeError("positions must be a 2-D (nseq, seq_len) int64/float64 array")
            pcode = _native_code(pview.format)
            if pcode == c'd':
                if offsets is not None or offset != 0:
                    raise ValueError("float positions cannot be combined with offsets")
                rq.pos_f = <const double *>pview.buf
            elif pcode in (c'l', c'q'):
                rq.pos_i = <const int64_t *>pview.buf
            else:
                raise TypeError("positions must be int64 or float64")
            rq.psb = pview.strides[0] // 8
            rq.pss = pview.strides[1] // 8
        if nseq * seq_len > 0:
            _fill_interruptibly(view.buf, code == c'f', stride, &sp, &rq, num_threads, pmem, ac)
    finally:
        PyBuffer_Release(&view)
        if have_p:
            PyBuffer_Release(&pview)
        if have_o:
            PyBuffer_Release(&oview)
    return out


cdef object _input_buffer(arr, Py_buffer *v, const Py_buffer *out):
    """Hold the buffer of the input ndarray ``arr`` in ``v``; when it shares memory
    with ``out``, of a copy instead (returned: the caller keeps it alive)."""
    PyObject_GetBuffer(arr, v, PyBUF_STRIDES | PyBUF_FORMAT)
    if _overlap(v, out):
        PyBuffer_Release(v)
        arr = arr.copy()
        PyObject_GetBuffer(arr, v, PyBUF_STRIDES | PyBUF_FORMAT)
    return arr


cdef bint _overlap(const Py_buffer *a, const Py_buffer *b) noexcept:
    """Whether the memory spans of two strided buffers intersect (bounds only, like
    numpy.may_share_memory: a false alarm costs a copy, never a wrong result)."""
    cdef const char *alo
    cdef const char *ahi
    cdef const char *blo
    cdef const char *bhi
    if not _span(a, &alo, &ahi) or not _span(b, &blo, &bhi):
        return False
    return alo < bhi and blo < ahi


cdef bint _span(const Py_buffer *v, const char **lo, const char **hi) noexcept:
    """[lo, hi) = the bytes a strided buffer can touch; False if it is empty."""
    cdef Py_ssize_t i, ext
    lo[0] = <const char *>v.buf
    hi[0] = <const char *>v.buf + v.itemsize
    for i in range(v.ndim):
        if v.shape[i] == 0:
            return False
        ext = (v.shape[i] - 1) * v.strides[i]
        if ext < 0:
            lo[0] += ext
        else:
            hi[0] += ext
    return True


cdef void _fill_interruptibly(void *out, bint f32, int64_t stride, const pe_spec *sp,
                              const pe_rows *rq, int num_threads, const double *plan,
                              pe_anchor_cache *ac=NULL) except *:
    """Run a fill without the GIL in chunks of about _chunk_entries entries,
    checking for signals between them, so that Ctrl-C interrupts a long fill
    within a few milliseconds (KeyboardInterrupt; the rows done so far stay
    written).  Any chunking gives the same bits.  ``ac``: the encoding's anchor
    cache, read before and written after a fill (NULL: none)."""
    cdef pe_fill f
    cdef int err
    cdef int64_t seeded = INT64_MIN
    cdef size_t anchor_bytes = 2 * sp.nf * sizeof(double)
    with nogil:
        err = _fill_setup(&f, sp, rq, num_threads, plan, 4 if f32 else 8)
        # fractional positions are evaluated directly: no anchors to share
        if err == FASTPE_OK and ac != NULL and rq.pos_f == NULL:
            PyThread_acquire_lock(ac.lock, WAIT_LOCK)
            if ac.centre != INT64_MIN:
                memcpy(f.scratch, ac.data, anchor_bytes)
                f.seed = seeded = ac.centre
            PyThread_release_lock(ac.lock)
    if err != FASTPE_OK:
        _raise_for(err)
    cdef int64_t per_unit = sp.d * (rq.nseq if f.shared else 1)
    cdef int64_t step = _chunk_entries // per_unit if per_unit < _chunk_entries else 1
    cdef int64_t u0 = 0, u1
    try:
        while u0 < f.units:
            u1 = u0 + step if step < f.units - u0 else f.units
            with nogil:
                if f32:
                    _fill_units(<float *>out, stride, &f, u0, u1)
                else:
                    _fill_units(<double *>out, stride, &f, u0, u1)
            f.seed = f.last          # thread 0's scratch carries over to the next chunk
            u0 = u1
            if u0 < f.units:
                PyErr_CheckSignals()
        if ac != NULL and f.last != INT64_MIN and f.last != seeded:
            with nogil:
                PyThread_acquire_lock(ac.lock, WAIT_LOCK)
                if ac.data == NULL:
                    ac.data = <double *>malloc(anchor_bytes)
                if ac.data != NULL:
                    memcpy(ac.data, f.scratch, anchor_bytes)
                    ac.centre = f.last
                PyThread_release_lock(ac.lock)
    finally:
        _fill_free(&f)


# Entries per chunk of an interruptible fill: a few ms of work for the plain
# table, tens of ms at worst (one accurate evaluation per row, one thread).
cdef int64_t _chunk_entries = 1 << 23


def _set_chunk_entries(int64_t n):
    """Set the entries per chunk of interruptible fills; returns the old value.
    For tests (any chunking gives the same bits)."""
    global _chunk_entries
    old = _chunk_entries
    _chunk_entries = n if n >= 1 else 1
    return old


cdef class Plan:
    """What a fill computes before its first row, for one spec: the frequencies
    (double-double) and the B-row rotation table.  It depends on the spec only
    (never on the positions), so callers that fill many tables of the same width
    keep one (``fastpe._api`` caches them) and skip ~16 accurate row evaluations
    and B row compositions per call.  Immutable once built; safe to share
    between threads."""
    cdef double *mem
    cdef readonly int64_t nf
    cdef readonly int64_t block_rows
    cdef double w0, base, denom

    def __cinit__(self, dict spec):
        cdef pe_spec sp = _spec_from_dict(spec)
        cdef int err
        if not _frequencies_finite(&sp):
            raise ValueError(f"base={sp.base!r} gives frequencies that overflow a double")
        self.nf = sp.nf
        self.block_rows = _block_rows(sp.nf)
        self.w0, self.base, self.denom = sp.w0, sp.base, sp.denom
        self.mem = <double *>malloc(_plan_doubles(sp.nf, self.block_rows) * sizeof(double))
        if self.mem == NULL:
            raise MemoryError("could not allocate a fastpe plan")
        with nogil:
            err = _prepare(self.mem, &sp, 0, self.block_rows, _threads(0, self.block_rows, sp.nf))
        if err != FASTPE_OK:
            _raise_for(err)

    def __dealloc__(self):
        free(self.mem)

    @property
    def nbytes(self):
        """Memory held, in bytes."""
        return _plan_doubles(self.nf, self.block_rows) * sizeof(double)

    cdef bint _matches(self, const pe_spec *sp) noexcept:
        return sp.nf == self.nf and sp.w0 == self.w0 and sp.base == self.base \
            and sp.denom == self.denom


def plan_nbytes(dict spec):
    """Bytes a Plan for this spec would hold (to decide whether to cache one)."""
    cdef pe_spec sp = _spec_from_dict(spec)
    cdef object nf = sp.nf          # Python ints: no overflow for absurd widths
    return (4 * nf + 2 * (_block_rows(sp.nf) // 2 + 1) * nf) * 8


# ---------------------------------------------------------------------------
# Compiled encodings and the small-call paths
# ---------------------------------------------------------------------------

# A plan larger than this is prepared per call instead of kept (widths beyond
# ~75000 columns); the cache below holds at most ENCODERS_MAX encodings and
# ENCODERS_MAX_BYTES of plans and anchors.
PLAN_MAX_BYTES = 4 << 20
ENCODERS_MAX = 64
ENCODERS_MAX_BYTES = 32 << 20


cdef class Encoder:
    """One encoding compiled for the kernel: the spec of a (convention, width),
    its Plan (None for widths whose plan would exceed PLAN_MAX_BYTES: prepared
    per call), the position whose rows are zero (fairseq's padding) and the
    largest position the exact angle reduction allows.  Immutable once built,
    shared between threads; the public functions keep them in ``encoders``."""
    cdef pe_spec sp
    cdef readonly Plan plan
    cdef const double *pmem
    cdef readonly object zero_pos
    cdef bint has_zero
    cdef int64_t zero
    cdef readonly double max_position
    cdef readonly int64_t d_model
    cdef pe_anchor_cache ac

    def __cinit__(self, dict spec, zero_pos=None):
        self.ac.centre = INT64_MIN
        self.ac.lock = PyThread_allocate_lock()
        if self.ac.lock == NULL:
            raise MemoryError("could not allocate a lock")
        self.sp = _spec_from_dict(spec)
        if not _frequencies_finite(&self.sp):
            raise ValueError(f"base={self.sp.base!r} gives frequencies base**(-i/denominator) "
                             "that overflow a double at this width; use a base closer to 1")
        self.max_position = min(PE_MAX_TURNS / pe_spec_max_turns(&self.sp), 4503599627370496.0)
        self.d_model = self.sp.d
        self.zero_pos = zero_pos
        self.has_zero = zero_pos is not None
        self.zero = zero_pos if zero_pos is not None else 0
        if plan_nbytes(spec) <= PLAN_MAX_BYTES:
            self.plan = Plan(spec)
            self.pmem = self.plan.mem

    def __dealloc__(self):
        free(self.ac.data)
        if self.ac.lock != NULL:
            PyThread_free_lock(self.ac.lock)

    def fill_rows(self, out, *, int64_t nseq, int64_t seq_len, int64_t offset=0, offsets=None,
                  positions=None, bint add=False, double scale=1.0, int num_threads=0,
                  bint fresh=False):
        """Fill ``out`` (arguments validated by the caller; see _fill_buffers)."""
        return _fill_buffers(out, &self.sp, self.pmem, nseq, seq_len, offset, offsets,
                             positions, self.zero_pos, add, scale, num_threads, fresh,
                             &self.ac)

    @property
    def nbytes(self):
        """Memory held: the plan and the anchor cache (its most)."""
        return (self.plan.nbytes if self.plan is not None else 0) + 16 * self.sp.nf

    def scratch_nbytes(self, int64_t rows, int num_threads, bint add):
        """Upper bound of the working memory (bytes) of a fill of ``rows`` rows."""
        return int(_scratch_bound(&self.sp, rows, num_threads, add))


cdef double _scratch_bound(const pe_spec *sp, int64_t rows, int num_threads,
                           bint add) noexcept nogil:
    """Bytes a fill allocates beside its output, streaming row buffers and a plan
    of its own counted; in floating point (no overflow for absurd widths)."""
    cdef int nt = _threads(num_threads, rows, sp.d)
    cdef double nf = <double>sp.nf, B = <double>_block_rows(sp.nf)
    cdef double per_thread = 4 * nf + (1.0 if add else 2.0) * <double>sp.d
    cdef double plan = 4 * nf + (B + 2) * nf + 2 * (SUB + B / 2 / SUB + 1) * nf + B
    return (per_thread * nt + plan) * 8.0


#: The compiled encodings the public functions use, by the values of their
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
    if type(base) is int and -9007199254740992 <= base <= 9007199254740992:
        base = <double>base      # (an int base is exact in a double: the same key)
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
    PyObject_GetBuffer(out, view, PyBUF_STRIDES | PyBUF_FORMAT)
    code = _native_code(view.format)
    if view.readonly or view.ndim < 1 or view.shape[view.ndim - 1] != d or (code != c'f' and code != c'd') \
            or (want != 0 and code != want) or (<size_t>view.buf) % view.itemsize != 0 \
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


cdef object _fill_new(Encoder enc, shape, int64_t n, char want, int nt, pe_rows *rq):
    """A new array of ``shape`` (n rows; float32 unless want is 'd') filled, or None
    when it is large enough for the general path's memory checks."""
    if want == 0:
        want = c'f'
    if not _small(&enc.sp, n, nt, False, <double>n * enc.sp.d * (4 if want == c'f' else 8)):
        return None
    out = _np_empty(shape, _F32 if want == c'f' else _F64)
    rq.fresh = 1
    if n > 0:
        _fill_interruptibly(_data(out), want == c'f', enc.sp.d, &enc.sp, rq, nt, enc.pmem,
                            &enc.ac)
    return out


def table(seq_len, d_model, base, offset, dtype, layout, out, num_threads, convention):
    """fastpe.sinusoidal for the common argument types: the table, or None to
    decline (the general path then validates and explains)."""
    cdef Encoder enc = _cached(convention, base, layout, d_model)
    cdef int64_t S, off, last, rows = 0, stride = 0
    cdef int nt
    cdef char want
    cdef Py_buffer view
    cdef pe_rows rq
    if enc is None or not _as_i64(seq_len, &S) or S < 0 or not _as_i64(offset, &off):
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    if _extent(off, S) > enc.max_position:
        return None
    _init_rows(&rq, 1, S, enc.has_zero, enc.zero)
    rq.offset = off
    if out is None:
        return _fill_new(enc, (S, enc.d_model), S, want, nt, &rq)
    if not _fast_out(out, &view, want, &rows, enc.sp.d, &stride):
        return None
    try:
        if view.ndim != 2 or rows != S or not _small(&enc.sp, S, nt, False, 0.0):
            return None
        if S > 0:
            _fill_interruptibly(view.buf, view.itemsize == 4, stride, &enc.sp, &rq, nt,
                                enc.pmem, &enc.ac)
    finally:
        PyBuffer_Release(&view)
    return out


fastpe_set_cpu_quota(_system.cgroup_cpu_quota())


def max_threads():
    """Threads a call with ``num_threads=None`` would use (before size caps): the
    OpenMP default, capped at the usable cores; 1 in a forked child (see
    ``forked_child``)."""
    if fastpe_forked_child():
        return 1
    return max(1, min(omp_get_max_threads(), fastpe_omp_thread_limit(), fastpe_usable_cpus()))


def usable_cpus():
    """Cores this process may run on now (affinity mask, cgroup CPU quota)."""
    return fastpe_usable_cpus()


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
    cdef pe_spec sp = pe_spec_vaswani(d_model, base, 0)
    if not _frequencies_finite(&sp):
        return 0
    return int(min(PE_MAX_TURNS / pe_spec_max_turns(&sp), 4503599627370496.0))


# ---------------------------------------------------------------------------
# ABI 1.2: compiled specs, every convention from C
# ---------------------------------------------------------------------------

cdef extern from *:
    """
    /* The opaque fastpe_spec of fastpe.h: a validated kernel spec. */
    struct fastpe_spec {
        pe_spec sp;
        int has_zero;        /* rows at position `zero` are all zeros (fairseq) */
        int64_t zero;
        double max_position; /* |positions| allowed by the exact angle reduction */
    };
    """
    # kernel.pxd declares the handle opaque (its users never see the fields)
    ctypedef struct pe_handle "struct fastpe_spec":
        pe_spec sp
        int has_zero
        int64_t zero
        double max_position


cdef fastpe_spec *spec_new(object convention, int64_t d_model) except NULL:
    """A spec for a convention name or a fastpe.Convention (with the GIL)."""
    from fastpe import _api
    from fastpe._validate import as_int
    cdef Encoder enc = _api._encoder(convention, 10000.0, "interleaved",
                                     as_int(d_model, "d_model", minimum=1))
    cdef pe_handle *h = <pe_handle *>malloc(sizeof(pe_handle))
    if h == NULL:
        raise MemoryError("could not allocate a fastpe spec")
    h.sp = enc.sp
    h.has_zero = enc.has_zero
    h.zero = enc.zero
    h.max_position = enc.max_position
    return <fastpe_spec *>h


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
    return spec_new(conv, d_model)


cdef inline const pe_handle *_handle(const fastpe_spec *h) noexcept nogil:
    return <const pe_handle *>h


cdef void spec_free(fastpe_spec *h) noexcept nogil:
    free(h)


cdef int64_t spec_d_model(const fastpe_spec *h) noexcept nogil:
    return _handle(h).sp.d if h != NULL else -1


cdef int _spec_fill(const pe_handle *h, real *out, int64_t nseq, int64_t S, int64_t row_stride,
                    int64_t offset, bint add, double scale, int num_threads) noexcept nogil:
    """Rows of positions offset .. offset+S-1 (nseq sequences when adding)."""
    cdef pe_rows rq
    if h == NULL:
        return FASTPE_ENULL
    if nseq < 0 or S < 0:
        return FASTPE_ESIZE
    if nseq == 0 or S == 0:
        return FASTPE_OK
    if out == NULL:
        return FASTPE_ENULL
    if row_stride < h.sp.d and nseq * S > 1:
        return FASTPE_ESTRIDE
    if nseq > INT64_MAX // S:
        return FASTPE_ESIZE
    if add and not isfinite(scale):
        return FASTPE_ESCALE
    if not (_extent(offset, S) <= h.max_position):
        return FASTPE_ERANGE
    _init_rows(&rq, nseq, S, h.has_zero, h.zero)
    rq.offset = offset
    rq.add = add
    rq.scale = scale if add else 1.0
    return _fill_cached(out, row_stride, &h.sp, &rq, num_threads)


cdef int _spec_at(const pe_handle *h, real *out, int64_t n, int64_t row_stride,
                  const double *positions, int num_threads) noexcept nogil:
    cdef pe_rows rq
    if h == NULL:
        return FASTPE_ENULL
    if n < 0:
        return FASTPE_ESIZE
    if n == 0:
        return FASTPE_OK
    if out == NULL or positions == NULL:
        return FASTPE_ENULL
    if row_stride < h.sp.d and n > 1:
        return FASTPE_ESTRIDE
    cdef int err = _positions_error(out, n, row_stride, h.sp.d, positions, h.max_position)
    if err != FASTPE_OK:
        return err
    _init_rows(&rq, 1, n, h.has_zero, h.zero)
    rq.pos_f = positions
    rq.pss = 1
    return _fill_cached(out, row_stride, &h.sp, &rq, num_threads)


cdef int spec_fill_f32(const fastpe_spec *h, float *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return _spec_fill(_handle(h), out, 1, seq_len, row_stride, offset, False, 1.0, num_threads)


cdef int spec_fill_f64(const fastpe_spec *h, double *out, int64_t seq_len, int64_t row_stride,
                       int64_t offset, int num_threads) noexcept nogil:
    return _spec_fill(_handle(h), out, 1, seq_len, row_stride, offset, False, 1.0, num_threads)


cdef int spec_fill_positions_f32(const fastpe_spec *h, float *out, int64_t n, int64_t row_stride,
                                 const double *positions, int num_threads) noexcept nogil:
    return _spec_at(_handle(h), out, n, row_stride, positions, num_threads)


cdef int spec_fill_positions_f64(const fastpe_spec *h, double *out, int64_t n,
                                 int64_t row_stride, const double *positions,
                                 int num_threads) noexcept nogil:
    return _spec_at(_handle(h), out, n, row_stride, positions, num_threads)


cdef int spec_add_f32(const fastpe_spec *h, float *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return _spec_fill(_handle(h), x, nseq, seq_len, row_stride, offset, True, scale, num_threads)


cdef int spec_add_f64(const fastpe_spec *h, double *x, int64_t nseq, int64_t seq_len,
                      int64_t row_stride, int64_t offset, double scale,
                      int num_threads) noexcept nogil:
    return _spec_fill(_handle(h), x, nseq, seq_len, row_stride, offset, True, scale, num_threads)


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

cdef extern from "include/fastpe.h":
    ctypedef int (*fastpe_fill_f32_fn)(float *, int64_t, int64_t, int64_t, double, int64_t,
                                       int, int) noexcept nogil
    ctypedef int (*fastpe_fill_f64_fn)(double *, int64_t, int64_t, int64_t, double, int64_t,
                                       int, int) noexcept nogil
    ctypedef int (*fastpe_add_f32_fn)(float *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_f64_fn)(double *, int64_t, int64_t, int64_t, int64_t, double,
                                      int64_t, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f32_fn)(float *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_fill_positions_f64_fn)(double *, int64_t, int64_t, int64_t,
                                                 const double *, double, int, int) noexcept nogil
    ctypedef int (*fastpe_add_positions_f32_fn)(float *, int64_t, int64_t, int64_t,
                                                const double *, double, double, int,
                                                int) noexcept nogil
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
    ctypedef int (*fastpe_spec_add_f32_fn)(const fastpe_spec *, float *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
    ctypedef int (*fastpe_spec_add_f64_fn)(const fastpe_spec *, double *, int64_t, int64_t,
                                           int64_t, int64_t, double, int) noexcept nogil
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
    const char *FASTPE_CAPSULE_NAME
    int FASTPE_ABI_MAJOR
    int FASTPE_ABI_MINOR

# Static storage: the capsule and every importer point at it for the process's
# lifetime (extension modules are never unloaded), so the capsule needs no destructor.
cdef fastpe_api_t _c_api_table
_c_api_table.abi_major = FASTPE_ABI_MAJOR
_c_api_table.abi_minor = FASTPE_ABI_MINOR
_c_api_table.size = sizeof(fastpe_api_t)
_c_api_table.fill_f32 = fill_f32
_c_api_table.fill_f64 = fill_f64
_c_api_table.add_f32 = add_f32
_c_api_table.add_f64 = add_f64
_c_api_table.fill_positions_f32 = fill_positions_f32
_c_api_table.fill_positions_f64 = fill_positions_f64
_c_api_table.add_positions_f32 = add_positions_f32
_c_api_table.add_positions_f64 = add_positions_f64
_c_api_table.spec_new = spec_new
_c_api_table.spec_from_knobs = spec_from_knobs
_c_api_table.spec_free = spec_free
_c_api_table.spec_d_model = spec_d_model
_c_api_table.spec_fill_f32 = spec_fill_f32
_c_api_table.spec_fill_f64 = spec_fill_f64
_c_api_table.spec_fill_positions_f32 = spec_fill_positions_f32
_c_api_table.spec_fill_positions_f64 = spec_fill_positions_f64
_c_api_table.spec_add_f32 = spec_add_f32
_c_api_table.spec_add_f64 = spec_add_f64

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


cdef bint _fast_positions(positions, Py_buffer *pv, double limit) except -1:
    """Acquire a plain C-contiguous int64/float64 ndarray of positions that are all
    finite and within +-limit.  False (nothing held) otherwise."""
    cdef Py_ssize_t i, n
    cdef char code
    cdef const double *pf
    cdef const int64_t *pi
    if type(positions) is not _NDARRAY:
        return False
    try:
        PyObject_GetBuffer(positions, pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, ValueError):        # NumPy: ValueError when not contiguous
        return False
    code = _native_code(pv.format)
    n = pv.len // 8
    if pv.itemsize != 8 or (<size_t>pv.buf) % 8 != 0:
        PyBuffer_Release(pv)
        return False
    if code == c'd':
        pf = <const double *>pv.buf
        for i in range(n):
            if not (fabs(pf[i]) <= limit):      # (NaN fails too)
                PyBuffer_Release(pv)
                return False
        return True
    if code == c'l' or code == c'q':
        pi = <const int64_t *>pv.buf
        for i in range(n):
            if pi[i] < -9007199254740992 or pi[i] > 9007199254740992 \
                    or fabs(<double>pi[i]) > limit:
                PyBuffer_Release(pv)
                return False
        return True
    PyBuffer_Release(pv)
    return False


def table_at(positions, d_model, base, dtype, layout, out, num_threads, convention):
    """fastpe.sinusoidal_at for the common argument types: the rows, or None to
    decline (the general path then validates, converts, copies and explains)."""
    cdef Encoder enc = _cached(convention, base, layout, d_model)
    cdef int64_t n, rows = 0, stride = 0
    cdef int nt
    cdef char want
    cdef Py_buffer pv, view
    cdef bint have_view = False
    cdef pe_rows rq
    if enc is None:
        return None
    nt = _fast_threads(num_threads)
    want = _fast_dtype(dtype)
    if nt < 0 or want == c'x':
        return None
    if not _fast_positions(positions, &pv, enc.max_position):
        return None
    try:
        n = pv.len // 8
        _init_rows(&rq, 1, n, enc.has_zero, enc.zero)
        rq.pss = 1
        if _native_code(pv.format) == c'd':
            rq.pos_f = <const double *>pv.buf
        else:
            rq.pos_i = <const int64_t *>pv.buf
        if out is None:
            return _fill_new(enc, (<object>positions).shape + (enc.d_model,), n, want, nt, &rq)
        if not _fast_out(out, &view, want, &rows, enc.sp.d, &stride):
            return None
        have_view = True
        if view.ndim != pv.ndim + 1 or rows != n or _overlap(&pv, &view) \
                or not _small(&enc.sp, n, nt, False, 0.0):
            return None
        for i in range(pv.ndim):
            if view.shape[i] != pv.shape[i]:
                return None
        if n > 0:
            _fill_interruptibly(view.buf, view.itemsize == 4, stride, &enc.sp, &rq, nt, enc.pmem, &enc.ac)
        return out
    finally:
        PyBuffer_Release(&pv)
        if have_view:
            PyBuffer_Release(&view)


def add(x, offset, positions, scale, base, layout, num_threads, convention):
    """fastpe.add_to for the common argument types (one int offset, no positions):
    ``x``, or None to decline (the general path then validates and explains)."""
    cdef Py_buffer view
    cdef int64_t off, rows = 0, stride = 0, S
    cdef int nt
    cdef pe_rows rq
    cdef Encoder enc
    if positions is not None or type(x) is not _NDARRAY or type(scale) is not float \
            or not isfinite(<double>scale) or not _as_i64(offset, &off):
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
        if fabs(<double>off) + <double>S > enc.max_position \
                or not _small(&enc.sp, rows, nt, True, 0.0):
            return None
        _init_rows(&rq, rows // S if S > 0 else 0, S, enc.has_zero, enc.zero)
        rq.offset = off
        rq.add = 1
        rq.scale = <double>scale
        if rows > 0:
            _fill_interruptibly(view.buf, view.itemsize == 4, stride, &enc.sp, &rq, nt, enc.pmem, &enc.ac)
    finally:
        PyBuffer_Release(&view)
    return x
