"""Hostile and careless use: what must not kill the process, corrupt memory or give
a silently wrong result.

- thread counts far above the cores (and under a task limit that cannot create them);
- inputs that share memory with the output (or with ``x``);
- Ctrl-C during a long fill;
- requests whose working memory, not only their output, exceeds what the process
  may use;
- positions that float64 cannot hold, masked arrays.

The command line's file handling is tested in test_cli.py.
"""

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from platform_info import UNDER_WINE

import fastpe
from fastpe import _system, _validate, kernel

LINUX = sys.platform.startswith("linux")
# tools/sanitize.sh preloads ASan: every call is several times slower, and its
# shadow memory cannot live under an address-space limit
ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def run_child(code, env=None, timeout=120):
    """Run ``code`` in a fresh interpreter (one OpenMP thread pool of its own)."""
    full_env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=os.path.dirname(sys.executable),
    )


# ------------------------------------------------------------------ threads

needs_openmp = pytest.mark.skipif(not fastpe.build_info()["openmp"], reason="serial build")


def test_usable_cpus_bounds_every_team():
    info = fastpe.build_info()
    assert 1 <= info["max_threads"] <= info["usable_cpus"]
    if hasattr(os, "sched_getaffinity"):
        assert info["usable_cpus"] <= len(os.sched_getaffinity(0))


def test_huge_num_threads_gives_the_one_thread_result():
    expected = fastpe.sinusoidal(3000, 96, num_threads=1)
    for nt in (10**9, 2**31 - 1, 2**40):
        np.testing.assert_array_equal(fastpe.sinusoidal(3000, 96, num_threads=nt), expected)


@needs_openmp
@pytest.mark.skipif(not LINUX, reason="counts threads in /proc/self/task")
def test_huge_num_threads_starts_no_more_threads_than_cores():
    r = run_child("""
        import os, fastpe
        cores = fastpe.build_info()["usable_cpus"]
        fastpe.sinusoidal(4096, 1024, num_threads=10**9)
        fastpe.add_to(fastpe.sinusoidal(4096, 64), num_threads=10**6)
        # the main thread plus at most cores-1 pooled OpenMP workers
        print(len(os.listdir("/proc/self/task")), cores)
    """)
    assert r.returncode == 0, r.stderr
    threads, cores = map(int, r.stdout.split())
    assert threads <= cores, r.stdout


@needs_openmp
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity API")
def test_affinity_mask_caps_the_team():
    r = run_child("""
        import os, numpy as np, fastpe
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        assert fastpe.build_info()["usable_cpus"] == 1, fastpe.build_info()
        assert fastpe.build_info()["max_threads"] == 1
        a = fastpe.sinusoidal(4096, 1024, num_threads=8)
        assert np.array_equal(a, fastpe.sinusoidal(4096, 1024, num_threads=1))
        print(len(os.listdir("/proc/self/task")))
    """)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 1, "a pinned process started OpenMP workers"


@needs_openmp
@pytest.mark.skipif(not LINUX, reason="RLIMIT_NPROC semantics and /proc are Linux's")
def test_huge_num_threads_under_a_task_limit_is_not_fatal():
    """Under ``ulimit -u`` libgomp cannot create a 1024-thread team and exits the
    process; capped at the cores, the call needs at most cores-1 new threads."""
    r = run_child("""
        import os, resource, numpy as np, fastpe
        expected = fastpe.sinusoidal(4096, 512, num_threads=1)   # imports and plans done
        cores = fastpe.build_info()["usable_cpus"]
        if os.getuid() == 0:          # root ignores RLIMIT_NPROC: become nobody first
            os.setgid(65534)
            os.setuid(65534)
        uid = os.getuid()

        def tasks_of(uid):
            n = 0
            for pid in os.listdir("/proc"):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("Uid:"):
                                if int(line.split()[1]) == uid:
                                    n += len(os.listdir(f"/proc/{pid}/task"))
                                break
                except OSError:
                    pass
            return n

        limit = tasks_of(uid) + cores + 1
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        got = fastpe.sinusoidal(4096, 512, num_threads=10**9)
        assert np.array_equal(got, expected)
        print("ok", limit)
    """)
    assert r.returncode == 0 and r.stdout.startswith("ok"), (r.returncode, r.stdout, r.stderr)


# ------------------------------------------------------------------ overlap


def test_sinusoidal_at_positions_inside_out():
    buf = np.zeros(512)
    pos = buf[:64]
    pos[:] = np.arange(64)
    expected = fastpe.sinusoidal_at(pos.copy(), 8, dtype=np.float64)
    got = fastpe.sinusoidal_at(pos, 8, out=buf.reshape(64, 8))
    np.testing.assert_array_equal(got, expected)


def test_sinusoidal_at_float_positions_inside_out_reversed():
    buf = np.zeros(64 * 8)
    pos = buf[-64:][::-1]  # a negative stride, in the last rows
    pos[:] = np.linspace(0.25, 100.5, 64)
    expected = fastpe.sinusoidal_at(pos.copy(), 8, dtype=np.float64)
    got = fastpe.sinusoidal_at(pos, 8, out=buf.reshape(64, 8))
    np.testing.assert_array_equal(got, expected)


def test_add_to_positions_inside_x():
    x = np.zeros((1, 16, 8))
    pos = x[0, ::-1, 3]  # a column of x itself, last row first
    pos[:] = np.arange(16) * 3.0 + 0.5
    ref = x.copy()
    fastpe.add_to(ref, positions=pos.copy())
    fastpe.add_to(x, positions=pos)
    np.testing.assert_array_equal(x, ref)


def test_add_to_integer_positions_and_offsets_inside_x():
    raw = np.zeros(4 * 16 * 8)
    x = raw.reshape(4, 16, 8)
    ints = raw.view(np.int64)  # the same bytes, seen as int64
    ints[:16] = np.arange(16) * 2
    ints[200:204] = [5, 0, 7, 1]
    pos, off = ints[:16], ints[200:204]
    ref = x.copy()
    fastpe.add_to(ref, positions=pos.copy(), offset=off.copy())
    fastpe.add_to(x, positions=pos, offset=off)
    np.testing.assert_array_equal(x, ref)


def test_add_to_per_sequence_offsets_inside_x():
    raw = np.zeros(3 * 10 * 8)
    x = raw.reshape(3, 10, 8)
    off = raw.view(np.int64)[:3]
    off[:] = [4, 9, 2]
    ref = x.copy()
    fastpe.add_to(ref, offset=off.copy())
    fastpe.add_to(x, offset=off)
    np.testing.assert_array_equal(x, ref)


def test_adjacent_inputs_are_not_copied_or_refused():
    """Exact bounds: positions right after the output are not an overlap."""
    buf = np.zeros(64 * 8 + 64)
    out, pos = buf[:512].reshape(64, 8), buf[512:]
    pos[:] = np.arange(64)
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(pos, 8, out=out), fastpe.sinusoidal(64, 8, dtype=np.float64)
    )


def test_c_api_refuses_overlap_and_accepts_adjacent():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(kernel._C_API, b"fastpe.kernel._C_API")
    fn_t = ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_double,
        ctypes.c_int,
        ctypes.c_int,
    )
    # fill_positions_f64 is the 6th pointer after (abi_major, abi_minor, size)
    slot = ctypes.c_void_p.from_address(table + 8 + ctypes.sizeof(ctypes.c_size_t) + 5 * 8)
    fill_positions_f64 = fn_t(slot.value)
    buf = np.zeros(4 * 8 + 4)
    buf[32:] = [1, 2, 3, 4]
    before = buf.copy()
    inside = buf.ctypes.data + 8 * 8  # positions in row 1
    assert (
        fill_positions_f64(buf.ctypes.data, 4, 8, 8, inside, 1e4, 0, 1)
        == kernel._C_CONSTANTS["FASTPE_EOVERLAP"]
    )
    np.testing.assert_array_equal(buf, before)
    after = buf.ctypes.data + 32 * 8  # right after the last row
    assert fill_positions_f64(buf.ctypes.data, 4, 8, 8, after, 1e4, 0, 1) == 0
    np.testing.assert_array_equal(
        buf[:32].reshape(4, 8), fastpe.sinusoidal_at([1, 2, 3, 4], 8, dtype=np.float64)
    )


# ---------------------------------------------------------------- Ctrl-C

INTERRUPT = """
    import os, signal, threading, time, numpy as np, fastpe
    # Python's own handler, even where a launcher started us with SIGINT ignored (a
    # background job of a non-interactive shell): then Python installs none
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out = np.zeros((8192, 4096))
    pos = np.arange(8192) + 0.5                 # one accurate evaluation per row
    fastpe.sinusoidal_at(pos[:64], 4096)        # warm up (plan, pages of the code)
    # the time of one chunk's work (rows between two signal checks), just before:
    # the latency bound scales with how fast this machine is right now
    entries = fastpe.kernel._set_chunk_entries(1)         # (the setter returns the value)
    fastpe.kernel._set_chunk_entries(entries)
    rows = entries // 4096
    t = time.perf_counter()
    fastpe.sinusoidal_at(pos[:rows], 4096, out=out[:rows], num_threads=1)
    chunk = time.perf_counter() - t
    out[:] = 0
    sent = []

    def fire():                                 # SIGINT once the fill has begun
        while out[0, 1] == 0:                   # (a cosine: never 0 at these positions)
            time.sleep(0.0005)
        sent.append(time.perf_counter())
        sent.append(int((out[:, 1] != 0).sum()))      # rows done by then
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=fire, daemon=True).start()
    t0 = time.perf_counter()
    try:
        CALL
        print("finished", time.perf_counter() - t0)
    except KeyboardInterrupt:
        latency = time.perf_counter() - sent[0]
        untouched = int((out[:, 1] == 0).sum())
        print("interrupted", latency, untouched, chunk, rows, sent[1])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    "call",
    [
        "fastpe.sinusoidal_at(pos, 4096, out=out, num_threads=1)",
        "fastpe.add_to(out, positions=pos, num_threads=1)",
    ],
)
def test_ctrl_c_interrupts_a_long_fill(call):
    r = run_child(INTERRUPT.replace("CALL", call))
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert words[0] == "interrupted", r.stdout
    latency, untouched, chunk = float(words[1]), int(words[2]), float(words[3])
    rows, before = int(words[4]), int(words[5])
    # The work done after the signal, in rows: the chunk under way and the next at
    # most (a check between chunks; the signal may land just after one), whatever
    # the machine's load.  A time bound would fail on a busy or sanitized build.
    after = 8192 - untouched - before
    assert after <= 2 * rows, f"{after} rows written after SIGINT, a chunk is {rows} rows"
    assert untouched > 0, "the fill ran to its end before the interrupt was seen"
    # (and no hang: far within the test's own timeout)
    assert latency < 20 * chunk + 1.0, f"KeyboardInterrupt {latency:.3f} s after SIGINT"


# ----------------------------------------------------------- working memory


def test_wide_row_scratch_is_counted(monkeypatch):
    """One 2**24-wide row needs ~1 GiB of working memory beside its 64 MiB: under a
    512 MiB limit that must be a MemoryError before any allocation."""
    monkeypatch.setattr(_validate, "memory_limit", lambda: (512 << 20, "a test limit"))
    with pytest.raises(MemoryError, match="working memory, more than a test limit"):
        fastpe.sinusoidal(1, 2**24)
    out = np.full((1, 2**24), 7.0, np.float32)
    with pytest.raises(MemoryError, match="working memory"):
        fastpe.sinusoidal(1, 2**24, out=out)
    assert (out == 7.0).all()
    with pytest.raises(MemoryError, match="working memory"):
        fastpe.add_to(out)
    assert (out == 7.0).all()
    # a table of about the same size with a normal width fits
    assert fastpe.sinusoidal(4096, 4096).shape == (4096, 4096)


@pytest.mark.skipif(not LINUX, reason="RLIMIT_AS semantics")
@pytest.mark.skipif(ASAN, reason="ASan's shadow memory does not fit under ulimit -v")
def test_address_space_limit_is_a_memory_error_not_a_crash():
    r = run_child("""
        import resource, fastpe
        resource.setrlimit(resource.RLIMIT_AS, (600 << 20, resource.RLIM_INFINITY))
        try:
            fastpe.sinusoidal(1, 2**24)
        except MemoryError as exc:
            print("MemoryError", exc)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("MemoryError") and "ulimit -v" in r.stdout, r.stdout


def test_physical_memory_is_known_where_fastpe_runs():
    """The machine's RAM bounds every request up front on Linux, macOS and Windows
    (Windows has no os.sysconf; GlobalMemoryStatusEx there).  Truth: psutil, or on
    Linux /proc/meminfo."""
    if sys.platform not in ("linux", "darwin", "win32"):
        pytest.skip(f"no RAM query for {sys.platform}")
    ram = _system.physical_memory()
    assert ram is not None
    try:
        import psutil

        truth = psutil.virtual_memory().total
    except ImportError:
        if not LINUX:
            pytest.skip("psutil is needed for the truth here")
        with open("/proc/meminfo") as f:
            truth = 1024 * int(f.readline().split()[1])  # MemTotal: N kB
    assert abs(ram - truth) <= truth // 100, (ram, truth)


def test_request_beyond_ram_is_refused_up_front():
    """fastpe's MemoryError names the table and the limit, before NumPy's allocator
    sees the request (which, under memory overcommit, may succeed; on Windows it
    failed with NumPy's "Unable to allocate", naming no argument)."""
    if sys.platform not in ("linux", "darwin", "win32"):
        pytest.skip(f"no RAM query for {sys.platform}")
    rows = 2**32  # 16 TiB of float32 at 1024 columns, beyond any machine's RAM
    with pytest.raises(
        MemoryError, match=rf"^a \({rows}, 1024\) table .* GiB of (working )?memory"
    ):
        fastpe.sinusoidal(rows, 1024)


def test_job_object_limit_counts(monkeypatch):
    """A Windows job's memory limit is one of the limits a request is held to."""
    monkeypatch.setattr(_system, "windows_job_memory_limit", lambda: 512 << 20)
    with pytest.raises(MemoryError, match=r"more than this process's job object memory limit"):
        fastpe.sinusoidal(1, 2**24)


@pytest.mark.skipif(sys.platform != "win32", reason="Windows job objects")
@pytest.mark.skipif(
    UNDER_WINE,
    reason="Wine accepts a job's memory limit but does not keep it (none is read back)",
)
def test_job_object_memory_limit_is_a_memory_error():
    """A process in a Windows job with a memory limit is refused up front, naming
    the job's limit (Windows' counterpart of a cgroup limit)."""
    r = run_child("""
        import ctypes, fastpe
        from fastpe import _system

        class BASIC(ctypes.Structure):
            _fields_ = [("t1", ctypes.c_int64), ("t2", ctypes.c_int64),
                        ("flags", ctypes.c_uint32), ("wmin", ctypes.c_size_t),
                        ("wmax", ctypes.c_size_t), ("active", ctypes.c_uint32),
                        ("affinity", ctypes.c_size_t), ("prio", ctypes.c_uint32),
                        ("sched", ctypes.c_uint32)]

        class EXTENDED(ctypes.Structure):
            _fields_ = [("basic", BASIC), ("io", ctypes.c_ulonglong * 6),
                        ("process", ctypes.c_size_t), ("job", ctypes.c_size_t),
                        ("peak_process", ctypes.c_size_t), ("peak_job", ctypes.c_size_t)]

        k32 = ctypes.WinDLL("kernel32", use_last_error=True)
        k32.CreateJobObjectW.restype = ctypes.c_void_p
        k32.GetCurrentProcess.restype = ctypes.c_void_p
        job = k32.CreateJobObjectW(None, None)
        info = EXTENDED()
        info.basic.flags = 0x100  # JOB_OBJECT_LIMIT_PROCESS_MEMORY
        info.process = 600 << 20
        assert k32.SetInformationJobObject(
            ctypes.c_void_p(job), 9, ctypes.byref(info), ctypes.sizeof(info)
        ), ctypes.get_last_error()
        assert k32.AssignProcessToJobObject(
            ctypes.c_void_p(job), ctypes.c_void_p(k32.GetCurrentProcess())
        ), ctypes.get_last_error()
        print("limit", _system.windows_job_memory_limit())
        try:
            fastpe.sinusoidal(1, 2**24)
        except MemoryError as exc:
            print("MemoryError", exc)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"limit {600 << 20}", r.stdout
    assert "MemoryError" in r.stdout and "job object memory limit" in r.stdout, r.stdout


LINUX_ONLY = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the library reads cgroups on Linux only"
)


def fake_cgroup(tmp_path, monkeypatch, proc, files):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "self_cgroup").write_text(proc)
    monkeypatch.setattr(_system, "_CGROUP_ROOT", str(root))
    monkeypatch.setattr(_system, "_PROC_CGROUP", str(tmp_path / "self_cgroup"))
    _system.cgroup_memory_limit.cache_clear()
    return str(tmp_path / "self_cgroup"), str(root)


def cpu_quota(where):
    """The library's cgroup CPU quota (whole cores) read from the substitute files."""
    return kernel._cgroup_limits(*where)[0]


@pytest.fixture
def restore_cgroup_caches():
    yield
    _system.cgroup_memory_limit.cache_clear()


@LINUX_ONLY
def test_cgroup_v2_limits(tmp_path, monkeypatch, restore_cgroup_caches):
    where = fake_cgroup(
        tmp_path,
        monkeypatch,
        "0::/user.slice/job\n",
        {
            "cpu.max": "max 100000\n",
            "user.slice/cpu.max": "250000 100000\n",  # a parent's quota: 2.5 cores
            "user.slice/job/cpu.max": "max 100000\n",
            "user.slice/job/memory.max": "1073741824\n",
            "user.slice/memory.max": "max\n",
        },
    )
    assert cpu_quota(where) == 3
    assert _system.cgroup_memory_limit() == 1 << 30
    limit = _system.memory_limit()
    assert limit is not None and limit[0] <= 1 << 30


@LINUX_ONLY
def test_cgroup_v1_limits(tmp_path, monkeypatch, restore_cgroup_caches):
    where = fake_cgroup(
        tmp_path,
        monkeypatch,
        "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n",
        {
            "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "100000\n",
            "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "memory/docker/abc/memory.limit_in_bytes": "536870912\n",
            "memory/memory.limit_in_bytes": "9223372036854771712\n",  # no limit
        },
    )
    assert cpu_quota(where) == 1
    assert _system.cgroup_memory_limit() == 512 << 20


@LINUX_ONLY
def test_no_cgroup_limits(tmp_path, monkeypatch, restore_cgroup_caches):
    where = fake_cgroup(
        tmp_path, monkeypatch, "0::/\n", {"cpu.max": "max 100000\n", "memory.max": "max\n"}
    )
    assert cpu_quota(where) == 0
    assert _system.cgroup_memory_limit() is None


@LINUX_ONLY
def test_cgroup_files_read_as_the_kernel_writes_them(tmp_path, monkeypatch, restore_cgroup_caches):
    # "..": parts a cgroup namespace shows above its root, skipped; a v1 mount
    # named by its controller alone (no "cpu,cpuacct" directory); quotas rounded
    # up to whole cores; unreadable or malformed files set no limit.
    where = fake_cgroup(
        tmp_path,
        monkeypatch,
        "4:cpu,cpuacct:/../a/b\n3:memory:/a\n",
        {
            "cpu/a/b/cpu.cfs_quota_us": "150000\n",
            "cpu/a/b/cpu.cfs_period_us": "100000\n",
            "cpu/a/cpu.cfs_quota_us": "-1\n",  # no quota
            "cpu/a/cpu.cfs_period_us": "100000\n",
            "memory/a/memory.limit_in_bytes": "12x\n",  # malformed
            "memory/memory.limit_in_bytes": "4096\n",
        },
    )
    assert cpu_quota(where) == 2
    assert _system.cgroup_memory_limit() == 4096
    where = fake_cgroup(
        tmp_path, monkeypatch, "0::/j\n", {"j/cpu.max": "100000\n", "j/memory.max": "\n"}
    )
    assert cpu_quota(where) == 1  # "Q" alone: the default period, 100000
    assert _system.cgroup_memory_limit() is None
    assert kernel._cgroup_limits(str(tmp_path / "absent"), str(tmp_path)) == (0, 0)


# -------------------------------------------------------- positions, masks


def test_long_double_positions_exact_or_refused():
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is float64 on this platform")
    exact = np.array([0, 3, 1e6 + 0.5], dtype=np.longdouble)
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(exact, 16), fastpe.sinusoidal_at(exact.astype(np.float64), 16)
    )
    inexact = np.array([3], dtype=np.longdouble) + np.longdouble(2) ** -60
    with pytest.raises(ValueError, match=r"positions of dtype float(96|128) must hold values"):
        fastpe.sinusoidal_at(inexact, 16)
    x = np.zeros((1, 8))
    with pytest.raises(ValueError, match="positions"):
        fastpe.add_to(x, positions=inexact)
    assert (x == 0).all()


def test_masked_arrays_are_refused():
    pos = np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])
    with pytest.raises(TypeError, match="positions must not be a masked array"):
        fastpe.sinusoidal_at(pos, 8)
    x = np.zeros((2, 3, 8))
    with pytest.raises(TypeError, match="positions must not be a masked array"):
        fastpe.add_to(x, positions=pos)
    with pytest.raises(TypeError, match="offset must not be a masked array"):
        fastpe.add_to(x, offset=np.ma.masked_array([1, 2], mask=[1, 0]))
    with pytest.raises(TypeError, match="x must not be a masked array"):
        fastpe.add_to(np.ma.masked_array(x))
    out = np.ma.masked_array(np.zeros((3, 8)), mask=False)
    with pytest.raises(TypeError, match="out must not be a masked array"):
        fastpe.sinusoidal(3, 8, out=out)
    assert (x == 0).all() and (out.data == 0).all()
