"""The release number is written once, in the repository's VERSION file: the package,
its metadata and the module a build writes all carry it (the C library's pc file and
CMake package are checked by tools/test_clib.sh)."""

import importlib.metadata
import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

import fastpe

ROOT = pathlib.Path(__file__).resolve().parents[1]
VERSION_FILE = ROOT / "VERSION"

needs_repo = pytest.mark.skipif(
    not VERSION_FILE.is_file() or not (ROOT / "setup.py").is_file(),
    reason="needs the source tree (VERSION, setup.py)",
)


@needs_repo
def test_the_package_and_its_metadata_carry_the_version_file():
    want = VERSION_FILE.read_text(encoding="ascii").strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", want), want
    assert fastpe.__version__ == want
    assert importlib.metadata.version("fastpe") == want


@needs_repo
@pytest.mark.skipif(
    importlib.util.find_spec("setuptools") is None, reason="setup.py needs setuptools"
)
def test_a_build_writes_the_number_into_the_module(tmp_path):
    """An installed package has no VERSION beside it: the build's _version.py holds the
    number itself, and importing it reads no file."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    built = tmp_path / "fastpe" / "_version.py"
    text = built.read_text(encoding="ascii")
    assert "read_text" not in text and "open(" not in text  # no file read on import
    namespace: dict = {}
    exec(compile(text, str(built), "exec"), namespace)
    assert namespace["__version__"] == VERSION_FILE.read_text(encoding="ascii").strip()
    # the source copy is left as it is: it still reads the file
    assert "VERSION" in (ROOT / "src" / "fastpe" / "_version.py").read_text(encoding="utf-8")
