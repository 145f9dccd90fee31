# Included by kernel.pyx: the library's tuning knobs and what the process may
# run on, as Python sees them (the rules themselves live in lib/src: fill.c's
# thresholds and team size, system.c's cores, fork guard and cache probe).

# The library's one-time set-up: the AVX-512 dispatch, the streaming-store
# thresholds from the cache size, the cgroup CPU quota and the fork guard.
pe_init()
if pe_init_error() != 0:
    raise ImportError("fastpe: pthread_atfork failed; cannot install the fork guard")


def _cgroup_limits(str proc_cgroup, str root):
    """(CPU quota in whole cores, memory limit in bytes) of the cgroups that
    ``proc_cgroup`` (/proc/self/cgroup's format) lists under the mount ``root``, 0
    for none: the library's reading (fastpe._system names the real files; tests,
    substitutes)."""
    cdef bytes p = proc_cgroup.encode(), r = root.encode()
    return pe_cgroup_cpu_quota_in(p, r), pe_cgroup_memory_limit_in(p, r)


def _default_stream_bytes():
    """(float64, float32): fills of at least this many bytes into memory the caller
    already has (out=, the C API) use streaming stores: 1/32 of the last-level
    cache for float64, 1/8 for float32, at least 8 MiB each.  Per byte a float32
    row carries twice the arithmetic, which the streaming path overlaps less well
    with its memory traffic, so plain stores win for longer.  Never for new arrays
    (their lines are in the cache already).  docs/performance.md has the figures."""
    cdef double f64, f32
    pe_default_stream_bytes(&f64, &f32)
    return (f64, f32)


# False in builds without the AVX-512 writers (FASTPE_NO_AVX512_WRITERS), where
# _set_avx512_writers(True) cannot turn them on whatever the CPU.
_avx512_writers_built = bool(PE_HAVE_V512)


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
    cdef double old64, old32
    f64, f32 = nbytes if isinstance(nbytes, tuple) else (nbytes, nbytes)
    pe_set_stream_bytes(float(f64), float(f32), &old64, &old32)
    return (old64, old32)


def _set_serial_below(int64_t work):
    """Set the serial threshold (entries of work below which a fill runs on the
    calling thread); returns the old one.  For tests: the thread count never
    changes the results, only which code runs."""
    return pe_set_serial_below(work)


def _set_chunk_entries(int64_t n):
    """Set the entries per chunk of interruptible fills; returns the old value.
    For tests (any chunking gives the same bits)."""
    return pe_set_chunk_entries(n)


def max_threads():
    """Threads a call with ``num_threads=None`` would use (before size caps): the
    OpenMP default, capped at the usable cores; 1 in a forked child (see
    ``forked_child``)."""
    return pe_max_threads()


def default_team():
    """Threads a large call with ``num_threads=None`` would use now: ``max_threads()``,
    less the cores other processes kept busy over the last 0.1 s or more (Linux;
    see ``_set_idle_teams``)."""
    return pe_idle_team(pe_max_threads())


def _set_idle_teams(bint on):
    """Size default teams (``num_threads=None``) from the cores other processes left
    idle (on by default) or take every usable core; returns the old setting.  A
    team thread that the scheduler has not run yet stalls the whole call for a
    scheduler slice, so on a busy machine a smaller team is the faster one.  For
    tests and measurements: the team size never changes the results."""
    return bool(pe_set_idle_teams(on))


def _idle_estimate(int n, double others, double own, int last):
    """The default team's cap after a sampling window of ``n`` cores in which
    other processes used ``others`` cores and this one ``own`` on average, the
    last cap being ``last`` (the rule ``default_team`` applies; for tests)."""
    return pe_idle_estimate(n, others, own, last)


def usable_cpus():
    """Cores this process may run on now (affinity mask, cgroup CPU quota)."""
    return pe_usable_cpus()


def forked_child():
    """True in a process forked from one that had imported fastpe: calls there
    run serially, since GNU libgomp's thread pool does not survive fork()."""
    return bool(pe_forked_child())


def openmp_info():
    """(built with OpenMP, the _OPENMP version macro, e.g. 201511)."""
    return bool(FASTPE_OPENMP), int(FASTPE_OPENMP_VERSION)
