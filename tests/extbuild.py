"""Build small third-party extensions against the *installed* fastpe, at test time.

Used by test_capi.py and test_cython_api.py.  Each build runs setuptools'
``build_ext --inplace`` in a subprocess (sys.executable, cwd = a temporary
directory, so the source tree is never on the path) and imports the results
from there.  Without a C compiler or Python headers the callers skip.

Under Wine (tools/test_windows_wine.sh) there is no compiler inside the Windows
interpreter: FASTPE_TEST_CROSS_BUILD names a directory through which a Linux
process (tools/wine/build_win.py serve) builds the extensions with mingw-w64, so
GCC's flags apply there, not MSVC's.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

EXT_DIR = Path(__file__).parent / "ext"
CROSS_BUILD = os.environ.get("FASTPE_TEST_CROSS_BUILD")
MSVC = sys.platform == "win32" and not CROSS_BUILD

_SETUP = """
import json
from setuptools import Extension, setup
cfg = json.load(open("exts.json"))
for e in cfg["extensions"]:  # JSON turned the macro tuples into lists
    e["define_macros"] = [tuple(m) for m in e.get("define_macros", [])]
exts = [Extension(**e) for e in cfg["extensions"]]
if cfg["cythonize"]:
    from Cython.Build import cythonize
    exts = cythonize(exts, quiet=True)
setup(name="fastpe-test-probes", ext_modules=exts, script_args=["build_ext", "--inplace"])
"""


def no_compiler_reason() -> str | None:
    """Why extensions cannot be built here, or None if they can."""
    if CROSS_BUILD:
        if not os.path.isdir(CROSS_BUILD):
            return f"the cross-build queue {CROSS_BUILD!r} does not exist"
        return None
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return "setuptools is not installed"
    if sys.platform != "win32":
        cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
        exe = shlex.split(cc)[0]
        if shutil.which(exe) is None:
            return f"no C compiler: {exe!r} is not on PATH"
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return "Python.h not found (no Python development headers)"
    return None


def quick_cflags() -> list[str]:
    # The probes are tiny; optimising them only slows the test suite down.
    return ["/Od"] if MSVC else ["-O0"]


def openmp_flags() -> list[str]:
    """The compiler's OpenMP flag (compile and link)."""
    return ["/openmp"] if MSVC else ["-fopenmp"]


def build(workdir: Path, extensions: list[dict], *, cythonize: bool = False) -> None:
    """Build the extensions (setuptools.Extension keyword dicts) in workdir.

    Raises RuntimeError with the compiler output when the build fails."""
    if CROSS_BUILD:
        _cross_build(workdir, extensions, cythonize)
        return
    (workdir / "setup.py").write_text(_SETUP)
    (workdir / "exts.json").write_text(
        json.dumps({"extensions": extensions, "cythonize": cythonize})
    )
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # never build against a source tree by accident
    proc = subprocess.run(
        [sys.executable, "setup.py"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"building {[e['name'] for e in extensions]} failed:\n{proc.stdout}\n{proc.stderr}"
        )


def _cross_build(workdir: Path, extensions: list[dict], cythonize: bool) -> None:
    """Hand the build to the Linux builder and wait for its answer."""
    name = f"{os.getpid()}-{time.monotonic_ns()}"
    queue = Path(CROSS_BUILD)
    request = {
        "workdir": str(workdir.resolve()),
        "extensions": extensions,
        "cythonize": cythonize,
        # where Cython finds the installed fastpe's .pxd files
        "search_path": [p for p in sys.path if os.path.isdir(p)],
    }
    (queue / f"{name}.tmp").write_text(json.dumps(request))
    os.replace(queue / f"{name}.tmp", queue / f"{name}.req.json")
    done = queue / f"{name}.done.json"
    deadline = time.monotonic() + 600
    while not done.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cross builder did not answer {name} in 600 s")
        time.sleep(0.1)
    answer = json.loads(done.read_text())
    done.unlink()
    if answer["rc"] != 0:
        raise RuntimeError(
            f"building {[e['name'] for e in extensions]} failed:\n{answer['output']}"
        )


def load(workdir: Path, name: str):
    """Import the extension module `name` built in workdir (runs its init)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    paths = glob.glob(str(workdir / f"{name}{suffix}"))
    if not paths:
        raise FileNotFoundError(f"{name}{suffix} not found in {workdir}")
    spec = importlib.util.spec_from_file_location(name, paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
