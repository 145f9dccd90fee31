"""Python threads, per-call num_threads, and threadpoolctl.

fastpe is called from data loaders and web workers: many Python threads at
once, each with its own arguments.  The GIL is released during the fill (see
test_api.py::test_gil_released_during_fill); num_threads is an OpenMP
``num_threads`` clause on one parallel region, never ``omp_set_num_threads``,
so it cannot leak into other callers or other OpenMP libraries.
"""

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import fastpe

OPENMP = fastpe.build_info()["openmp"]

# Distinct (seq_len, d_model, dtype, base, offset, layout, num_threads) per thread;
# sizes large enough that the parallel path is taken for num_threads >= 2.
CASES = [
    (2000, 256, np.float64, 10000.0, 0, "interleaved", 2),
    (1999, 255, np.float32, 10000.0, 17, "split", 3),
    (513, 1024, np.float64, 500.0, -300, "interleaved", None),
    (4099, 64, np.float32, 1e6, 123456, "split", 4),
    (97, 101, np.float64, 2.5, 5, "interleaved", 1),
    (3000, 130, np.float32, 10000.0, -7, "interleaved", 2),
    (1, 7, np.float64, 10000.0, 99, "split", 7),
    (777, 333, np.float64, 12345.6, 1000000, "split", None),
]


def _call(case, out=None):
    S, D, dt, base, offset, layout, nt = case
    kwargs = dict(base=base, offset=offset, layout=layout, num_threads=nt)
    if out is None:
        return fastpe.sinusoidal(S, D, dtype=dt, **kwargs)
    return fastpe.sinusoidal(S, D, out=out, **kwargs)


def _serial(case):
    S, D, dt, base, offset, layout, _ = case
    return fastpe.sinusoidal(
        S, D, dtype=dt, base=base, offset=offset, layout=layout, num_threads=1
    )


def test_cases_agree_with_reference():
    """The serial results the threads are compared against are themselves right."""
    for case in CASES:
        S, D, dt, base, offset, layout, _ = case
        R = fastpe.reference(S, D, base=base, offset=offset, layout=layout)
        tol = 1e-9 + (2.0**-24 if dt == np.float32 else 0.0)
        assert np.max(np.abs(_serial(case) - R)) <= tol, case


def test_many_python_threads_get_their_own_results():
    expected = [_serial(c) for c in CASES]
    n_rounds = 4
    errors = []
    barrier = threading.Barrier(len(CASES))

    def worker(idx):
        case = CASES[idx]
        try:
            barrier.wait(timeout=30)
            for r in range(n_rounds):
                got = _call(case)
                if r % 2:  # and through out=, into a fresh buffer
                    got = _call(case, out=np.full_like(expected[idx], np.nan))
                if got.dtype != expected[idx].dtype or not np.array_equal(got, expected[idx]):
                    errors.append((idx, r, "mismatch"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append((idx, repr(exc)))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(CASES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive(), "a fastpe call did not return"
    assert errors == []


def test_threads_writing_disjoint_windows_of_one_buffer():
    """Concurrent fills into column windows of one shared matrix stay in their window."""
    n = 6
    shared = np.full((800, 64 * n + 3), -1.0)
    windows = [shared[:, 64 * i : 64 * (i + 1)] for i in range(n)]

    def worker(i):
        fastpe.sinusoidal(800, 64, offset=100 * i, out=windows[i], num_threads=1 + i % 3)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i in range(n):
        np.testing.assert_array_equal(
            windows[i], fastpe.sinusoidal(800, 64, offset=100 * i, dtype=np.float64)
        )
    assert np.all(shared[:, 64 * n :] == -1.0)


def test_num_threads_is_per_call():
    before = fastpe.build_info()["max_threads"]
    for nt in (1, 3, 7, 1):
        fastpe.sinusoidal(2000, 256, num_threads=nt)
        assert fastpe.build_info()["max_threads"] == before


def test_num_threads_does_not_leak_across_threads():
    """While one thread calls with num_threads=1 in a loop, another thread's
    default (num_threads=None) is still the OpenMP default."""
    before = fastpe.build_info()["max_threads"]
    stop = threading.Event()

    def one_thread_caller():
        while not stop.is_set():
            fastpe.sinusoidal(300, 128, num_threads=1)

    t = threading.Thread(target=one_thread_caller)
    t.start()
    try:
        seen = set()
        for _ in range(20):
            fastpe.sinusoidal(300, 128)
            seen.add(fastpe.build_info()["max_threads"])
    finally:
        stop.set()
        t.join(timeout=60)
    assert seen == {before}


# ---------------------------------------------------------------- threadpoolctl

try:
    import threadpoolctl
except ImportError:  # pragma: no cover - it is in requirements-dev.txt
    threadpoolctl = None
needs_openmp = pytest.mark.skipif(
    not OPENMP or threadpoolctl is None,
    reason="needs the OpenMP build (the serial build has no runtime) and threadpoolctl",
)


def _linked_openmp_runtime():
    """Real path of the OpenMP runtime the kernel's .so is linked against (ldd)."""
    if not sys.platform.startswith("linux") or shutil.which("ldd") is None:
        pytest.skip("needs Linux and ldd")
    out = subprocess.run(["ldd", fastpe.kernel.__file__], capture_output=True, text=True).stdout
    for line in out.splitlines():
        name, _, rest = line.strip().partition(" => ")
        if name.startswith(("libgomp", "libomp", "libiomp")) and rest:
            return os.path.realpath(rest.split(" (")[0])
    pytest.fail(f"OpenMP build, but ldd shows no OpenMP runtime:\n{out}")


def _openmp_records():
    return [r for r in threadpoolctl.threadpool_info() if r["user_api"] == "openmp"]


@needs_openmp
def test_threadpoolctl_lists_fastpes_runtime():
    runtime = _linked_openmp_runtime()
    paths = {os.path.realpath(r["filepath"]) for r in _openmp_records()}
    assert runtime in paths, (runtime, paths)


@needs_openmp
def test_threadpool_limits_one_makes_fastpe_serial():
    before = fastpe.build_info()["max_threads"]
    expected = fastpe.sinusoidal(2000, 256, num_threads=1)
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert fastpe.build_info()["max_threads"] == 1
        np.testing.assert_array_equal(fastpe.sinusoidal(2000, 256), expected)
    assert fastpe.build_info()["max_threads"] == before


@needs_openmp
def test_threadpool_limits_raise_is_followed_up_to_the_cores():
    cores = fastpe.build_info()["usable_cpus"]
    with threadpoolctl.threadpool_limits(cores + 1, user_api="openmp"):
        # teams never exceed the usable cores, whatever the runtime's setting
        assert fastpe.build_info()["max_threads"] == cores
    if cores >= 2:
        with threadpoolctl.threadpool_limits(cores - 1, user_api="openmp"):
            assert fastpe.build_info()["max_threads"] == cores - 1


@needs_openmp
def test_num_threads_does_not_change_what_threadpoolctl_sees():
    runtime = _linked_openmp_runtime()

    def ours():
        return [
            r["num_threads"]
            for r in _openmp_records()
            if os.path.realpath(r["filepath"]) == runtime
        ]

    before = ours()
    assert before, "fastpe's runtime not found by threadpoolctl"
    for nt in (1, 5):
        fastpe.sinusoidal(2000, 256, num_threads=nt)
        assert ours() == before


def _every_function(d, k):
    """One call of every public function at width d, position parameter k."""
    conv = ("vaswani", "fairseq", "diffusers", "tensor2tensor")[k % 4]
    x = np.linspace(-1, 1, 3 * 5 * d).reshape(3, 5, d).astype(np.float32)
    fastpe.add_to(x, offset=[k, k + 1, k + 2], scale=0.5, convention=conv)
    return [
        fastpe.sinusoidal(7, d, offset=k, convention=conv),
        fastpe.sinusoidal(1, d, offset=k, dtype=np.float64),
        fastpe.sinusoidal_at(np.array([k + 0.25, 3.0, k]), d, convention=conv),
        x,
        fastpe.reference(3, d, offset=k),
        fastpe.sinusoidal_2d(3, 2, 4 * (d // 4 + 1)),
        fastpe.fairseq_positions(np.array([[5, 1, 7, k % 3]])),
    ]


def test_every_function_from_eight_threads_over_many_widths():
    """8 threads call every public function at more widths than the encoding
    cache holds (so encodings are evicted and rebuilt while others use them);
    every result is bitwise the single-threaded one."""
    from fastpe import kernel

    widths = list(range(40, 40 + kernel.ENCODERS_MAX + 16))
    jobs = [(d, 3 * d % 997) for d in widths]
    expected = {job: _every_function(*job) for job in jobs}
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in rng.permutation(len(jobs))[:60]:
                job = jobs[int(i)]
                for got, want in zip(_every_function(*job), expected[job], strict=False):
                    if got.dtype != want.dtype or not np.array_equal(got, want):
                        errors.append(job)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a fastpe call did not return"
    assert errors == [], errors[:5]


def test_encoding_cache_stays_bounded_under_concurrent_inserts():
    """8 threads insert into the encoding cache at once, each evicting what the
    others inserted.  Without the GIL (free-threaded CPython) an insert and its
    evictions must still be one step: otherwise two threads evict the same oldest
    entry (KeyError), one changes the dict while another sums its sizes
    (RuntimeError), or the cache ends up over its bound."""
    from fastpe import kernel

    enc = kernel.Encoder(fastpe.Convention.vaswani(), 8)
    saved = dict(kernel.encoders)
    errors = []
    barrier = threading.Barrier(8)

    def worker(t):
        try:
            barrier.wait(timeout=30)
            for i in range(3000):
                kernel.remember(("test", t, i), enc)
        except Exception as exc:  # reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
            assert not t.is_alive(), "remember did not return"
        assert errors == [], errors[:3]
        assert 1 <= len(kernel.encoders) <= kernel.ENCODERS_MAX
    finally:
        with kernel._encoders_lock:
            kernel.encoders.clear()
            kernel.encoders.update(saved)
