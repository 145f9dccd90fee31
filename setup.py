"""Build the fastpe extension: Cython kernel, with OpenMP when the compiler has it.

Environment variables
---------------------
FASTPE_DISABLE_OPENMP=1   force the serial build (no OpenMP flags at all).
FASTPE_REQUIRE_OPENMP=1   fail the build instead of falling back to serial when
                          the OpenMP probe fails (used for release wheels).
FASTPE_SANITIZE=1         add -fsanitize=address,undefined (for the sanitizer CI job);
                          FASTPE_SANITIZE=undefined: UBSan alone (no runtime to preload).
FASTPE_EXTRA_CFLAGS       extra compile flags, space separated.
FASTPE_CYTHON_CACHE=DIR   keep Cython's generated C in DIR, keyed by a hash of the
                          module's .pyx/.pxi/.pxd files, the directives and the Cython
                          version: a rebuild of the same sources (another venv, the other
                          build of the test command) skips cythonizing.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import warnings

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))

# What each compiler family needs for OpenMP: (compile flags, link flags).
# Apple clang has no -fopenmp driver flag; libomp must be supplied (cibuildwheel
# config sets CPPFLAGS/LDFLAGS to a libomp built for the deployment target).
OPENMP_FLAGS = {
    "msvc": (["/openmp"], []),
    "apple-clang": (["-Xpreprocessor", "-fopenmp"], ["-lomp"]),
    "gcc-like": (["-fopenmp"], ["-fopenmp"]),
}

# No -ffast-math, ever: the double-double arithmetic in lib/src/kernels/pe_dd.h relies on IEEE
# rounding of every operation.  -ffp-contract=off keeps FMA contraction from
# changing results between machines (bitwise reproducibility, exact error terms).
BASE_CFLAGS = {
    "msvc": ["/O2", "/fp:precise"],
    "gcc-like": ["-O3", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math"],
}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _compiler_family(compiler) -> str:
    if compiler.compiler_type == "msvc":
        return "msvc"
    if sys.platform == "darwin":
        cc = os.environ.get("CC", "") or " ".join(getattr(compiler, "compiler", []) or [])
        if "gcc" not in os.path.basename(cc.split()[0] if cc else ""):
            return "apple-clang"
    return "gcc-like"


PROBE = textwrap.dedent(
    """
    #include <omp.h>
    #include <stdio.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        printf("%d %d\\n", n, omp_get_max_threads());
        return n > 0 ? 0 : 1;
    }
    """
)


def probe_openmp(compiler, cflags, ldflags) -> bool:
    """Compile, link and run a small OpenMP program (as scikit-learn does)."""
    tmp = tempfile.mkdtemp(prefix="fastpe-omp-")
    cwd = os.getcwd()
    try:
        os.chdir(tmp)
        with open("probe.c", "w") as f:
            f.write(PROBE)
        extra_pre = os.environ.get("CPPFLAGS", "").split()
        extra_ld = os.environ.get("LDFLAGS", "").split()
        objs = compiler.compile(["probe.c"], output_dir=tmp, extra_postargs=extra_pre + cflags)
        exe = os.path.join(tmp, "probe" + (".exe" if sys.platform == "win32" else ""))
        compiler.link_executable(objs, "probe", output_dir=tmp, extra_postargs=extra_ld + ldflags)
        out = subprocess.run([exe], capture_output=True, text=True, timeout=60)
        return out.returncode == 0 and out.stdout.strip() != ""
    except Exception as exc:  # any compile/link/run failure means "no OpenMP"
        print(f"fastpe: OpenMP probe failed: {exc!r}")
        return False
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    def build_extensions(self):
        family = _compiler_family(self.compiler)
        cflags = list(BASE_CFLAGS["msvc" if family == "msvc" else "gcc-like"])
        ldflags: list[str] = []
        extra = os.environ.get("FASTPE_EXTRA_CFLAGS", "").split()
        sanitize = os.environ.get("FASTPE_SANITIZE", "").strip().lower()
        if sanitize == "undefined" and family != "msvc":
            cflags += ["-fsanitize=undefined", "-fno-sanitize-recover=undefined", "-g"]
            ldflags += ["-fsanitize=undefined"]
        elif _env_flag("FASTPE_SANITIZE") and family != "msvc":
            cflags += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g", "-O1"]
            cflags += ["-fno-sanitize-recover=undefined"]
            ldflags += ["-fsanitize=address,undefined"]
        elif family != "msvc":
            # no debug info in the extension (Python's own CFLAGS carry -g): a
            # wheel's kernel shrinks ~4x; FASTPE_EXTRA_CFLAGS=-g brings it back
            cflags += ["-g0"]
            if sys.platform.startswith("linux") and not any(
                f.startswith("-g") and f != "-g0" for f in extra
            ):
                # and no symbol table (-s): ~9 % smaller still.  Python and the C API
                # (a capsule) reach the module through PyInit_kernel, which stays in
                # the dynamic symbol table; only profilers lose the static names.
                ldflags += ["-s"]
                print("fastpe: linking with -s (no symbol table)")
        cflags += extra

        if _env_flag("FASTPE_DISABLE_OPENMP"):
            print("fastpe: FASTPE_DISABLE_OPENMP set -> serial build (no OpenMP)")
        else:
            omp_c, omp_l = OPENMP_FLAGS[family]
            if probe_openmp(self.compiler, omp_c, omp_l):
                cflags += omp_c
                ldflags += omp_l
                print(f"fastpe: OpenMP enabled ({family}: {' '.join(omp_c + omp_l)})")
            else:
                if _env_flag("FASTPE_REQUIRE_OPENMP"):
                    raise RuntimeError(
                        "fastpe: FASTPE_REQUIRE_OPENMP is set but the compiler has no usable "
                        "OpenMP"
                    )
                warnings.warn(  # noqa: B028 - setup.py's caller is setuptools, not a user
                    "fastpe: the compiler has no usable OpenMP; building the SERIAL kernel "
                    "(correct, but single-threaded). Install an OpenMP runtime "
                    "(libgomp / libomp) for the parallel build."
                )
        # Cythonized here, once per build: not when setup.py is merely imported
        # (`setup.py --version`, an sdist), which needs no C.
        for ext in self.extensions:
            ext.sources = cythonize_cached(ext)
            ext.extra_compile_args = cflags + list(ext.extra_compile_args or [])
            ext.extra_link_args = ldflags + list(ext.extra_link_args or [])
        super().build_extensions()


def cythonize_cached(ext, build_dir: str | None = None) -> list[str]:
    """Cythonize ``ext`` (its .c in build_dir, or beside the .pyx) and return its
    sources with the .c in place of the .pyx.  The .c is always that of this build's
    sources: without FASTPE_CYTHON_CACHE it is regenerated; with it, a copy is kept
    there under a hash of everything that decides it (the Cython version, the
    directives, and every .pyx, .pxi and .pxd beside the module), so that another
    build of the same sources (another venv, the other build of the test command)
    copies it instead of cythonizing (about 5 s of CPU)."""
    from Cython import __version__ as cython_version
    from Cython.Build import cythonize

    cache = os.environ.get("FASTPE_CYTHON_CACHE", "").strip()
    pyx = [src for src in ext.sources if src.endswith(".pyx")]
    c_files = [os.path.join(build_dir or "", os.path.splitext(src)[0] + ".c") for src in pyx]
    sources = [
        os.path.join(build_dir or "", os.path.splitext(s)[0] + ".c") if s.endswith(".pyx") else s
        for s in ext.sources
    ]
    if not cache or len(pyx) != 1:
        (cy,) = cythonize(
            ext, compiler_directives=CYTHON_DIRECTIVES, force=True, build_dir=build_dir
        )
        return list(cy.sources)
    digest = hashlib.sha256(f"{cython_version}\0{sorted(CYTHON_DIRECTIVES.items())}".encode())
    folder = os.path.dirname(pyx[0])
    for name in sorted(os.listdir(folder)):
        if name.endswith((".pyx", ".pxi", ".pxd")):
            digest.update(f"\0{name}\0".encode())
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(f.read())
    cache = os.path.abspath(os.path.expanduser(cache))
    entry = os.path.join(cache, f"{os.path.basename(c_files[0])}-{digest.hexdigest()}.gz")
    if os.path.exists(entry):
        os.makedirs(os.path.dirname(c_files[0]) or ".", exist_ok=True)
        with gzip.open(entry, "rb") as src, open(c_files[0], "wb") as dst:
            shutil.copyfileobj(src, dst)
        print(f"fastpe: {c_files[0]} from the Cython cache ({entry})")
        return sources
    (cy,) = cythonize(ext, compiler_directives=CYTHON_DIRECTIVES, force=True, build_dir=build_dir)
    os.makedirs(cache, exist_ok=True)
    # (a name of its own, renamed into place: builds side by side never share a file)
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".tmp")
    with (
        os.fdopen(fd, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb") as dst,
        open(c_files[0], "rb") as src,
    ):
        shutil.copyfileobj(src, dst)
    os.replace(tmp, entry)
    return list(cy.sources)


CYTHON_DIRECTIVES = {
    "language_level": 3,
    "boundscheck": False,
    "wraparound": False,
    "initializedcheck": False,
    "cdivision": True,
    "embedsignature": True,
    "freethreading_compatible": True,
}


def _library_sources() -> list[str]:
    """The C library's sources (lib/sources.txt, which CMakeLists.txt reads too)."""
    with open(os.path.join(HERE, "lib", "sources.txt")) as f:
        lines = (line.split("#", 1)[0].strip() for line in f)
        return [line for line in lines if line]


def _release() -> str:
    """The release number, from VERSION (pyproject.toml and CMakeLists.txt read it too)."""
    with open(os.path.join(HERE, "VERSION"), encoding="ascii") as f:
        version = f.read().strip()
    if not re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version):
        raise ValueError(f"VERSION must hold one MAJOR.MINOR.PATCH line, not {version!r}")
    return version


def standalone_capsule_header() -> str:
    """The installed fastpe.h: tools/gen_capi.py's, with the library's header inside."""
    spec = importlib.util.spec_from_file_location(
        "gen_capi", os.path.join(HERE, "tools", "gen_capi.py")
    )
    gen = importlib.util.module_from_spec(spec)
    sys.modules["gen_capi"] = gen  # (its dataclasses look their module up there)
    spec.loader.exec_module(gen)
    return gen.standalone_capsule_header()


class BuildPy(build_py):
    """Writes what an installed package needs in place of the repository: the release
    number in fastpe/_version.py (the source copy reads VERSION), and the capsule's
    header with the library's header copied in (standalone_capsule_header)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install imports the source copies, beside VERSION and lib/
        version = os.path.join(self.build_lib, "fastpe", "_version.py")
        header = os.path.join(self.build_lib, "fastpe", "include", "fastpe.h")
        for target, text in (
            (
                version,
                '"""fastpe\'s release number (written by setup.py from VERSION)."""\n\n'
                f'__version__ = "{_release()}"\n',
            ),
            (header, standalone_capsule_header()),
        ):
            if os.path.exists(target):
                os.remove(target)  # a hard link to the source must not be written through
                with open(target, "w", encoding="utf-8") as f:
                    f.write(text)


EXTENSIONS = [
    Extension(
        "fastpe.kernel",
        # kernel.pyx (Cython; it includes the _*.pxi parts) over the C library,
        # whose sources are compiled into the extension (no libfastpe.so in the
        # wheel); with hidden visibility, the module exports PyInit_kernel only
        sources=["src/fastpe/kernel.pyx", *_library_sources()],
        include_dirs=["src/fastpe", "lib/include", "lib/src"],
        extra_compile_args=[] if sys.platform == "win32" else ["-fvisibility=hidden"],
        depends=[
            *sorted(glob.glob("lib/src/kernels/*.h")),
            *sorted(glob.glob("lib/src/kernels/*.inc.c")),
            *sorted(glob.glob("src/fastpe/*.pxi")),
            *sorted(glob.glob("lib/src/*.h")),
            *sorted(glob.glob("lib/src/*.inc.c")),
            "lib/include/fastpe/fastpe.h",
            "lib/sources.txt",
            "src/fastpe/kernel.pxd",
            "src/fastpe/include/fastpe.h",
        ],
    ),
]


setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
