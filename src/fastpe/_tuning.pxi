# Included by kernel.pyx (one compilation unit, so that the calls between
# these parts inline as before): tuning constants, thresholds and their probes,
# the team size of a fill, and what the process may run on.

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
    already has (out=, the C API) use streaming stores: 1/32 of the last-level
    cache for float64, 1/8 for float32, at least 8 MiB each.  Per byte a float32
    row carries twice the arithmetic, which the streaming path overlaps less well
    with its memory traffic, so plain stores win for longer.  Never for new arrays
    (their lines are in the cache already).  docs/performance.md has the figures."""
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


def _set_avx512_bf16(bint on):
    """Write bfloat16 rows with AVX512_BF16's conversion (CPUs that have it; on by
    default there) or with the AVX-512 writers' integer rounding; returns the old
    setting.  Both give the same bits.  For tests and measurements."""
    return bool(pe_v512_bf16hw_set(on))


def _set_stream_bytes(nbytes):
    """Set the streaming-store thresholds (bytes per fill): one number for both
    dtypes or a (float64, float32) pair; returns the old pair.  For tests and
    measurements: inf disables streaming, 0 forces it."""
    global _stream_bytes_f64, _stream_bytes_f32
    old = (_stream_bytes_f64, _stream_bytes_f32)
    f64, f32 = nbytes if isinstance(nbytes, tuple) else (nbytes, nbytes)
    _stream_bytes_f64, _stream_bytes_f32 = float(f64), float(f32)
    return old


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
