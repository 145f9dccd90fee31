"""Shared pytest configuration and fixtures (the truths themselves live in truth.py)."""

import os
import re
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
# tools/sanitize.sh: under ASan each example costs several times its native time, and the
# run's job is memory safety (every entry point and error path still runs); the generated
# argument space is covered by the "ci" profile on the OpenMP and serial builds.
settings.register_profile(
    "sanitizers", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# tools/run_tests.sh: the serial build's run of the suite, after the OpenMP build's with
# the "ci" profile.  The two builds share every line but the OpenMP teams, so the second
# run checks each property on fewer generated examples (the hostile-call properties,
# four times the profile's count, were a third of the suite's time).
settings.register_profile(
    "repeat", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# Long bug hunts (HYPOTHESIS_PROFILE=thorough), not run in CI.
settings.register_profile(
    "thorough", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The representative subset, `pytest -m core`: the tests named below (a file, or one test
# function of a file with all its parameters), which between them exercise every module of
# the package (the kernel and its C library, each Python module, the C API, the command
# line, OpenMP teams) in about a quarter of the whole suite's CPU time.  .ci/run runs it where
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
# The slowest functions of the files above, left out of the subset (a third of its time):
# the whole-suite runs cover their argument spaces, and the rest of each file keeps its
# module in the subset (the blocked adds: test_add_to_blocked_forms_match_the_row_by_row_path;
# the C rules: the named configurations and refusals of test_clib_rules.py; the command
# line: the rest of test_cli.py).
CORE_LEAVES_OUT = frozenset(
    {
        "test_add_to.py::test_add_to_blocked_forms_bitwise",
        "test_clib_rules.py::test_generated_parameters_good_and_bad",
        "test_cli.py::test_help_works_without_matplotlib",
    }
)


# The tests that need a framework (FRAMEWORKS below: a file, or one test function of a
# file), marked `frameworks`: tools/test_frameworks.sh runs `-m frameworks` in a venv that
# has them, and only these, since every other test already ran in the README's test
# command.  A test that skips for want of a framework but is missing here would run
# nowhere, so such a skip fails the run (_framework_skips below).
FRAMEWORK_TESTS = frozenset(
    {
        "test_frameworks.py",
        "test_frameworks_rotary.py",
        "test_frameworks_vision.py",
        "test_frameworks_vision2.py",
        "test_torch.py",
        "test_torch_conformance.py",
        "test_torch_schemas.py",
        "test_signatures.py",
        "test_plot.py",
        "test_api.py::test_import_fastpe_does_not_import_torch",  # (passes trivially without)
        "test_bench_module.py::test_qwen2_vl_pair_rotates_as_transformers_does",
        "test_cli.py::test_bench_chart_into_missing_directory_fails_before_benchmarking",
        "test_half.py::test_torch_16_bit_tensors_filled_in_place",
        "test_half.py::test_apply_rope_torch_16_bit_tensors_in_place",
        "test_out_interop.py::test_torch_cpu_tensor_is_filled_in_its_own_memory",
        "test_out_interop.py::test_torch_column_window_of_a_wider_tensor",
        "test_out_interop.py::test_torch_bad_tensors_refused",
        "test_rope_presets_timm.py::test_float32_steps_are_timms_with_torchs_power",
        "test_rope.py::test_torch_bfloat16_inv_freq_is_converted_exactly",
        "test_rope.py::test_against_transformers",
        "test_rope.py::test_float32_steps_are_torchs_operation_order",
        "test_rope.py::test_float32_within_a_few_ulps_of_transformers",
        "test_rope.py::test_float32_llama_3_1_and_3_2_are_transformers_bitwise",
        "test_rope.py::test_float32_llama_4_equal_factors_are_transformers_bitwise",
        "test_rope.py::test_float32_equal_factors_are_torchs_operation_order",
        "test_rope.py::test_against_transformers_llama_rotary_embedding",
        "test_rope.py::test_apply_against_transformers_apply_rotary_pos_emb",
        "test_rope_aliasing.py::test_an_empty_torch_tensor_is_accepted_as_numpy_arrays_are",
        "test_rope_axes.py::test_layouts_match_transformers",
        "test_rope_axes.py::test_torch_tensors_in_place",
    }
)
# The packages tools/test_frameworks.sh installs (requirements-frameworks.txt), as a
# skip's reason names them: importorskip's "could not import 'torch'", test_frameworks.py's
# "timm is not importable here".
_FRAMEWORK_NAMES = re.compile(
    r"\b(torch|transformers|diffusers|timm|rotary_embedding_torch|matplotlib)\b"
)
_IMPORT_FAILED = re.compile(r"No module named|could not import|not importable")
_framework_skips = []


def _listed(names, path_name, function=None):
    return path_name in names or (function is not None and f"{path_name}::{function}" in names)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "core: the representative subset (CORE_TESTS in tests/conftest.py)"
    )
    config.addinivalue_line(
        "markers", "frameworks: needs a framework (FRAMEWORK_TESTS in tests/conftest.py)"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    for label, names in (
        ("CORE_TESTS", CORE_TESTS),
        ("CORE_LEAVES_OUT", CORE_LEAVES_OUT),
        ("FRAMEWORK_TESTS", FRAMEWORK_TESTS),
    ):
        missing = sorted(
            t for t in names if not os.path.exists(os.path.join(here, t.split("::")[0]))
        )
        if missing:
            raise pytest.UsageError(f"{label} in tests/conftest.py names missing files {missing}")


def pytest_ignore_collect(collection_path, config):
    # `-m core` alone: the other files are not even imported (collecting the whole suite
    # costs seconds natively, and several times that under ASan or Wine).
    if config.getoption("markexpr", "") != "core" or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    return collection_path.name not in {t.split("::")[0] for t in CORE_TESTS} or None


# Of a parametrized function, the subset takes at most this many parameter sets
# (FASTPE_CORE_MAX_SETS=1000000: all those that bring a new value).
CORE_MAX_SETS = int(os.environ.get("FASTPE_CORE_MAX_SETS", "3"))


def _new_values(item, seen):
    """Whether a parametrized test's parameter set brings a value that the earlier
    sets of its function did not (a parameter's value is its id: "float16" of
    "float16-vaswani-33"); records them.  Unparametrized tests always do."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return True
    values = {(n, part) for n, part in enumerate(callspec.id.split("-"))}
    fresh = values - seen
    seen |= values
    return bool(fresh)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # tryfirst: the marks are set before `-m` selects on them.  The subset takes every
    # function listed, but of a parametrized one only the parameter sets that bring a
    # value not seen yet in the earlier sets (every dtype, layout, convention ... once,
    # not each combination), at most CORE_MAX_SETS of them: the rest run in the whole
    # suite.  Under ASan and Wine each test costs several times its native time.
    seen, taken = {}, {}
    for item in items:
        function = getattr(item, "originalname", None) or item.name
        left_out = f"{item.path.name}::{function}" in CORE_LEAVES_OUT
        key = (item.path.name, function)
        if (
            _listed(CORE_TESTS, item.path.name, function)
            and not left_out
            and taken.get(key, 0) < CORE_MAX_SETS
            and _new_values(item, seen.setdefault(key, set()))
        ):
            taken[key] = taken.get(key, 0) + 1
            item.add_marker(pytest.mark.core)
        if _listed(FRAMEWORK_TESTS, item.path.name, function):
            item.add_marker(pytest.mark.frameworks)


def _skipped_for_a_framework(report):
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return bool(_IMPORT_FAILED.search(reason) and _FRAMEWORK_NAMES.search(reason))


def pytest_runtest_logreport(report):
    if not report.skipped or hasattr(report, "wasxfail") or "frameworks" in report.keywords:
        return
    if _skipped_for_a_framework(report):
        _framework_skips.append(report.nodeid)


def pytest_collectreport(report):
    # a module that skips as a whole (importorskip at its top)
    if not report.skipped or not _skipped_for_a_framework(report):
        return
    if not _listed(FRAMEWORK_TESTS, os.path.basename(report.nodeid.split("::")[0])):
        _framework_skips.append(report.nodeid)


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
    if _framework_skips:
        _fail_session(
            session,
            f"{len(_framework_skips)} tests skipped for want of a framework but are not in "
            f"FRAMEWORK_TESTS (tests/conftest.py), so tools/test_frameworks.sh would not run "
            f"them: {', '.join(_framework_skips[:5])}",
        )
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
    _fail_session(session, msg)


def _fail_session(session, msg):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line(msg, red=True, bold=True)
    else:
        print(msg, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
