"""Fork safety: fastpe keeps working in processes forked after it ran in parallel.

GNU libgomp's thread pool does not survive fork(): a forked child entering a
2+-thread parallel region can wait forever for the parent's workers
(scikit-learn #23823, PyTorch #45198).  fastpe marks forked children (a
pthread_atfork handler) and runs them on one thread.

Every scenario runs in a fresh interpreter under a hard timeout, so a hang
fails the test instead of hanging the CI.  Without the guard in kernel.pyx the
fork scenarios time out (checked when the guard was written).
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import fastpe

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no fork on Windows")

TIMEOUT = 120  # seconds per scenario; a healthy run takes ~1 s (a few under ASan)

# The parent always runs a parallel fill first (2 threads, a table large enough
# to pass the kernel's serial cut-off), which is what leaves libgomp's pool
# behind in the children.
PRELUDE = textwrap.dedent(
    """
    import multiprocessing as mp
    import os
    import sys

    import numpy as np

    import fastpe

    SHAPES = [(2000, 256, np.float64), (1500, 130, np.float32), (3, 7, np.float64)]

    def table(i, num_threads=2):
        S, D, dt = SHAPES[i % len(SHAPES)]
        return fastpe.sinusoidal(S, D, dtype=dt, offset=i, num_threads=num_threads)

    def expected(i):
        S, D, dt = SHAPES[i % len(SHAPES)]
        return fastpe.sinusoidal(S, D, dtype=dt, offset=i, num_threads=1)

    def work(i):
        info = fastpe.build_info()
        return i, table(i, 2), table(i, None), info["forked_child"], info["max_threads"]

    def check(results, forked):
        for i, a, b, fc, mt in results:
            e = expected(i)
            assert np.array_equal(a, e) and np.array_equal(b, e), i
            assert fc is forked, (i, fc, forked)
            if forked:
                assert mt == 1, mt

    def parent_runs_parallel():
        assert not fastpe.build_info()["forked_child"]
        for i in range(3):
            assert np.array_equal(table(i, 2), expected(i))
    """
)

SCENARIOS = {
    # os.fork(): the child calls with num_threads=2 and None.
    "os_fork": """
        def main():
            parent_runs_parallel()
            pid = os.fork()
            if pid == 0:
                try:
                    check([work(i) for i in range(3)], forked=True)
                except BaseException as exc:
                    print("child failed:", repr(exc), flush=True)
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, status
            # the parent keeps its parallelism
            info = fastpe.build_info()
            assert not info["forked_child"]
            check([work(i) for i in range(3)], forked=False)
    """,
    # A grandchild: the mark is inherited across a second fork.
    "fork_of_fork": """
        def main():
            parent_runs_parallel()
            pid = os.fork()
            if pid == 0:
                table(0, 2)
                pid2 = os.fork()
                if pid2 == 0:
                    try:
                        check([work(i) for i in range(3)], forked=True)
                    except BaseException:
                        os._exit(1)
                    os._exit(0)
                _, st = os.waitpid(pid2, 0)
                os._exit(os.waitstatus_to_exitcode(st))
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, status
    """,
    # What PyTorch DataLoader workers and Pool(fork) do.
    "mp_fork_pool": """
        def main():
            parent_runs_parallel()
            with mp.get_context("fork").Pool(2) as pool:
                check(pool.map(work, range(6)), forked=True)
    """,
    "mp_fork_process": """
        def child(q):
            try:
                check([work(i) for i in range(3)], forked=True)
                q.put("ok")
            except BaseException as exc:
                q.put(repr(exc))

        def main():
            parent_runs_parallel()
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start()
            assert q.get(timeout=100) == "ok"
            p.join()
            assert p.exitcode == 0
    """,
    # Fresh interpreters: not forked children, full parallelism.
    "mp_spawn_pool": """
        def main():
            parent_runs_parallel()
            with mp.get_context("spawn").Pool(2) as pool:
                check(pool.map(work, range(4)), forked=False)
    """,
    # The forkserver is a fresh interpreter, but newer CPython releases (3.13.15,
    # not 3.13.0 or 3.11) preload __main__ into it: a script that imports fastpe at
    # the top then has its workers forked from a process that imported fastpe, and
    # they are marked (serial, never a hang); older versions give fresh, parallel
    # workers.
    "mp_forkserver_pool": """
        def main():
            parent_runs_parallel()
            with mp.get_context("forkserver").Pool(2) as pool:
                results = pool.map(work, range(4))
            check(results, forked=results[0][3])
            assert len({fc for _, _, _, fc, _ in results}) == 1
    """,
    # fork() while another thread is inside the library: it fills single rows
    # (the encodings' anchor caches) and tables of changing widths (the plan
    # caches), so the locks are held at random moments.  No child may hang.
    "os_fork_beside_a_busy_thread": """
        import signal
        import threading

        def main():
            stop = threading.Event()

            def busy():
                k = 0
                while not stop.is_set():
                    fastpe.sinusoidal(1, 64, offset=k % 5000)
                    fastpe.sinusoidal(8, 16 + 2 * (k % 41), offset=k)
                    k += 1

            want = fastpe.sinusoidal(1, 64, offset=1234)
            th = threading.Thread(target=busy)
            th.start()
            bad = []
            try:
                for i in range(200):
                    pid = os.fork()
                    if pid == 0:
                        signal.alarm(10)  # a hung child dies of SIGALRM
                        got = fastpe.sinusoidal(1, 64, offset=1234)
                        os._exit(0 if np.array_equal(got, want) else 3)
                    _, status = os.waitpid(pid, 0)
                    if status != 0:
                        bad.append((i, status))
            finally:
                stop.set()
                th.join()
            assert not bad, bad
    """,
}


def run_scenario(tmp_path, name, body):
    script = tmp_path / f"fork_{name}.py"
    script.write_text(
        PRELUDE
        + textwrap.dedent(body)
        + '\nif __name__ == "__main__":\n    main()\n    print("PASS")\n'
    )
    # A new session, so that on a timeout the hung grandchildren die too.
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"{name}: hung for {TIMEOUT} s (libgomp fork hang?)\n{stdout}\n{stderr}")
    assert proc.returncode == 0 and "PASS" in stdout, (
        f"{name}: rc={proc.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    )


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fork_scenarios(tmp_path, name):
    if name == "mp_forkserver_pool":
        import multiprocessing as mp

        if "forkserver" not in mp.get_all_start_methods():
            pytest.skip("no forkserver start method")
    run_scenario(tmp_path, name, SCENARIOS[name])


def test_not_a_forked_child_here():
    info = fastpe.build_info()
    assert info["forked_child"] is False
    assert fastpe.kernel.forked_child() is False
