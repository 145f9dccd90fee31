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


# The representative subset, `pytest -m core`: the tests named below (a file, or one test
# function of a file with all its parameters), which between them exercise every module of
# the package (the kernel and its C library, each Python module, the C API, the command
# line, OpenMP teams) in about a fifth of the whole suite's time.  .ci/run runs it where
# the whole suite would mostly repeat the OpenMP and serial runs: the serial build under
# ASan+UBSan, the oldest and newest NumPy, the free-threaded CPython, Windows under Wine
# and the repaired wheel.  The whole suite runs on the OpenMP and serial builds, the
# OpenMP build under ASan+UBSan, and everywhere with FASTPE_CI_FULL=1.
CORE_TESTS = frozenset(
    {
        "test_accuracy.py",  # the error bounds against mpmath
        "test_api.py",  # the public API, build_info, the version
        "test_reference.py",  # fastpe.reference, the NumPy twin
        "test_kernel.py",  # the kernel's entry points and plans
        "test_fast_path.py",
        "test_add_to.py",  # fused adds
        "test_sinusoidal_at.py",  # arbitrary and fairseq positions
        "test_sinusoidal_2d.py",
        "test_conventions.py",  # the frameworks' conventions, without the frameworks
        "test_half.py",  # float16 and bfloat16 outputs
        "test_rope.py",  # RoPE frequencies, caches, apply_rope
        "test_rope_truth.py",  # the rules' float64 frequencies against mpmath, bitwise
        "test_clib.py",  # the C library's digests, the same bits on every platform
        "test_clib_rules.py",
        "test_rope_heads.py",
        "test_rope_presets.py",
        "test_capi_rope.py",
        "test_threads.py",  # OpenMP teams and thread-count independence
        "test_independence.py",
        "test_idle_teams.py",
        "test_adversarial.py",  # CPU and memory limits (fastpe._system)
        "test_capi.py",  # the capsule and get_include, from a compiled extension
        "test_cli.py",  # the command line and `fastpe bench`
        "test_bench_module.py",
        "test_plot.py",  # skipped without matplotlib
        "test_torch.py",  # skipped without torch
        # fastpe.dask without its local cluster (skipped without dask)
        "test_dask.py::test_table_bitwise_any_chunking",
        "test_dask.py::test_add_bitwise_any_chunking",
    }
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "core: the representative subset (CORE_TESTS in tests/conftest.py)"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    missing = sorted(
        t for t in CORE_TESTS if not os.path.exists(os.path.join(here, t.split("::")[0]))
    )
    if missing:
        raise pytest.UsageError(f"CORE_TESTS in tests/conftest.py names missing files {missing}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # tryfirst: the marks are set before `-m` selects on them
    for item in items:
        function = getattr(item, "originalname", None) or item.name
        if item.path.name in CORE_TESTS or f"{item.path.name}::{function}" in CORE_TESTS:
            item.add_marker(pytest.mark.core)


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
