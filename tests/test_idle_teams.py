"""Default teams on a busy machine: a call with num_threads=None takes only the
cores that other processes left idle, never more than max_threads(), and the
team it takes never changes the results."""

import os
import sys
import time

import numpy as np
import pytest

import fastpe
from fastpe import _bench, kernel


def test_default_team_is_within_the_usable_cores():
    assert 1 <= kernel.default_team() <= kernel.max_threads()


def _cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


needs_idle_probe = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or not fastpe.build_info()["openmp"]
    or kernel.max_threads() < 2
    # a CPU quota below the cores: busy loops share the quota and leave cores idle
    or kernel.usable_cpus() < _cores()
    or _cores() > 16,
    reason="needs Linux, OpenMP, 2 to 16 cores and no CPU quota below them",
)


@needs_idle_probe
def test_busy_cores_shrink_the_default_team():
    """With every core kept busy by another process, the default team is one
    thread (after a sampling window); with the probe off it is every core."""
    kernel.default_team()  # starts a window if none is open
    with _bench.Spinners(0, _cores(), settle=0.3):
        for _ in range(20):  # a window is 0.1 s; allow a slow start
            time.sleep(0.15)
            if kernel.default_team() == 1:
                break
        assert kernel.default_team() == 1
        old = kernel._set_idle_teams(False)
        try:
            assert kernel.default_team() == kernel.max_threads()
        finally:
            assert kernel._set_idle_teams(old) is False
    assert old is True


@needs_idle_probe
def test_default_calls_are_bitwise_the_same_on_a_busy_machine():
    """The same bits from a default call beside busy loops (a one-thread team),
    an explicit two-thread team and one thread."""
    q = np.random.default_rng(3).standard_normal((1, 257, 3, 64), dtype=np.float32)
    x = np.random.default_rng(4).standard_normal((3, 301, 96), dtype=np.float32)
    want = [
        fastpe.sinusoidal(1001, 130, offset=7, num_threads=1),
        fastpe.add_to(x.copy(), offset=5, num_threads=1),
        fastpe.apply_rope(q.copy(), seq_axis=1, offset=9, num_threads=1),
    ]
    old = kernel._set_serial_below(1)  # teams even for these small calls
    try:
        with _bench.Spinners(0, _cores(), settle=0.5):
            for nt in (None, 2):
                got = [
                    fastpe.sinusoidal(1001, 130, offset=7, num_threads=nt),
                    fastpe.add_to(x.copy(), offset=5, num_threads=nt),
                    fastpe.apply_rope(q.copy(), seq_axis=1, offset=9, num_threads=nt),
                ]
                for w, g in zip(want, got, strict=True):
                    np.testing.assert_array_equal(g, w)
    finally:
        kernel._set_serial_below(old)


@pytest.mark.parametrize(
    ("n", "others", "own", "last", "want"),
    [
        (16, 0.0, 0.0, 2**30, 16),  # idle: every core
        (16, 0.3, 0.0, 16, 15),  # a core counts when at least 3/4 of it was idle
        (16, 0.2, 0.0, 16, 16),
        (16, 8.0, 0.0, 16, 8),  # half the cores busy
        (16, 8.0, 1.0, 4, 8),  # a window with idle cores left raises the estimate
        (16, 15.9, 0.1, 16, 1),  # never below one thread
        (16, 20.0, 0.0, 16, 1),
        (16, -0.5, 0.2, 3, 16),  # tick rounding: others below zero count as none
        # every core in use (this process's oversized teams squeezing the others):
        (16, 0.2, 15.8, 8, 8),  # the others look idle: the estimate does not rise
        (16, 7.9, 7.7, 4, 4),
        (16, 12.0, 4.0, 8, 4),  # but it falls
        (2, 0.03, 1.97, 1, 1),
        (2, 0.0, 1.0, 1, 2),  # a core left idle: the estimate rises
    ],
)
def test_idle_estimate(n, others, own, last, want):
    assert kernel._idle_estimate(n, others, own, last) == want
