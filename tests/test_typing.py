"""The public signatures, as a type checker reads them from the installed package:
mypy checks tests/typecheck/check_api.py (must pass) and check_api_errors.py (must
fail on exactly the lines marked ``# E``)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy)")

HERE = Path(__file__).resolve().parent / "typecheck"
GOOD = HERE / "check_api.py"
BAD = HERE / "check_api_errors.py"


@pytest.fixture(scope="module")
def mypy_errors(tmp_path_factory):
    """{file name: sorted line numbers with an error} from one mypy run."""
    work = tmp_path_factory.mktemp("mypy")
    # From a scratch directory, so mypy reads the installed fastpe, never src/.
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir",
            str(work / "cache"),
            "--hide-error-context",
            "--no-error-summary",
            "--show-absolute-path",
            str(GOOD),
            str(BAD),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if r.returncode not in (0, 1):  # 2: mypy itself failed (bad option, crash)
        pytest.fail(f"mypy failed to run (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    errors: dict[str, list[int]] = {}
    for m in re.finditer(r"^(.*?):(\d+): error:", r.stdout, re.M):
        errors.setdefault(Path(m[1]).name, []).append(int(m[2]))
    return errors, r.stdout


def test_public_signatures_give_the_expected_types(mypy_errors):
    errors, output = mypy_errors
    assert GOOD.name not in errors, f"mypy on {GOOD.name}:\n{output}"


def test_type_errors_are_caught(mypy_errors):
    errors, output = mypy_errors
    marked = [
        i
        for i, line in enumerate(BAD.read_text().splitlines(), 1)
        if line.rstrip().split("#")[-1].strip().startswith("E:")
    ]
    assert len(marked) >= 8
    assert sorted(set(errors.get(BAD.name, []))) == marked, f"mypy on {BAD.name}:\n{output}"


def test_kernel_stub_matches_the_compiled_module(tmp_path):
    # stubtest imports the installed kernel and compares every name and signature
    # with kernel.pyi (a stale stub fails here, e.g. a renamed argument)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy.stubtest",
            "fastpe.kernel",
            "--allowlist",
            str(HERE / "stubtest_allowlist.txt"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
