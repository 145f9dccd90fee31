"""Shared pytest configuration and fixtures (the truths themselves live in truth.py)."""

import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
# Long bug hunts (HYPOTHESIS_PROFILE=thorough), not run in CI.
settings.register_profile(
    "thorough", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="session")
def small_fills_use_threads_too():
    """The tests use small tables; with a low serial threshold their fills still
    run on several threads, so the thread-count independence they check is real
    (the threshold chooses the team size, never the values)."""
    from fastpe import kernel

    old = kernel._set_serial_below(4096)
    yield
    kernel._set_serial_below(old)


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


# FASTPE_EXPECT_FREE_THREADED=1 (tools/test_free_threaded.sh): the run fails if the GIL
# is on at the end, since a run with the GIL back on tests nothing about free threading.
# CPython turns it on for good, with only a RuntimeWarning, when it imports an extension
# that does not declare GIL-free support; the first test after which it was on is named.
EXPECT_FREE_THREADED = os.environ.get("FASTPE_EXPECT_FREE_THREADED") == "1"
_gil_first_enabled_after = []


def _gil_enabled():
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return True if is_enabled is None else is_enabled()


def pytest_runtest_logfinish(nodeid, location):
    if EXPECT_FREE_THREADED and not _gil_first_enabled_after and _gil_enabled():
        _gil_first_enabled_after.append(nodeid)


def pytest_sessionfinish(session, exitstatus):
    if not EXPECT_FREE_THREADED or not _gil_enabled():
        return
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        why = "this interpreter is not a free-threaded build"
    elif _gil_first_enabled_after:
        why = (
            f"it was first on after {_gil_first_enabled_after[0]}; the warnings summary "
            "names the module ('has been enabled to load module')"
        )
    else:
        why = "it was on before the first test ended"
    msg = (
        f"FASTPE_EXPECT_FREE_THREADED=1 but the GIL is enabled at the end of the run: {why} "
        f"(Python {sys.version.split()[0]}, {sys.executable})"
    )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line(msg, red=True, bold=True)
    else:
        print(msg, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
