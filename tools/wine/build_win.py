"""Build Windows (win_amd64, CPython 3.12) extensions on Linux with mingw-w64.

Used by tools/test_windows_wine.sh, with the Linux venv's Python (Cython and
setuptools come from there):

  build_win.py fastpe --root . --pyinclude DIR --pydll DIR --out DIR
      cythonize and compile fastpe's extension modules as setup.py describes them
      (sources, include directories, Cython directives, the gcc-like flags and
      OpenMP flags are read from setup.py, not repeated here) into DIR, with the
      GCC runtime DLLs the modules load beside them.

  build_win.py serve --queue DIR --pyinclude DIR --pydll DIR
      build the extensions that tests/extbuild.py asks for from inside Wine.  A
      Windows process under Wine can start a Linux program but cannot wait for
      it (Wine gives it no process handle), so the two talk through files:
      extbuild writes NAME.req.json into the queue directory, this loop builds and
      answers with NAME.done.json (exit status and compiler output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CC = os.environ.get("FASTPE_WINE_CC", "x86_64-w64-mingw32-gcc-posix")
# ccache, where installed, caches the compiles (the same sources and flags every run):
# paths below CCACHE_BASEDIR (the tree, or the run's folder for the test builds) enter
# the key relative to the compiler's working folder, so where the tree or the run's
# temporary folders are does not change it.
CCACHE = (
    ["ccache"] if shutil.which("ccache") and os.environ.get("FASTPE_NO_CCACHE", "0") != "1" else []
)
EXT_SUFFIX = ".cp312-win_amd64.pyd"
# What a module built with -fopenmp loads at run time: libgomp and the GCC and
# winpthreads runtimes it depends on.  Windows looks for them beside the module.
RUNTIME_DLLS = ("libgomp-1.dll", "libgcc_s_seh-1.dll", "libwinpthread-1.dll")


def runtime_dlls() -> list[Path]:
    found = []
    for name in RUNTIME_DLLS:
        out = subprocess.run([CC, f"-print-file-name={name}"], capture_output=True, text=True)
        path = Path(out.stdout.strip())
        if not path.is_absolute():  # gcc echoes the bare name when it has no such file
            # libwinpthread sits in the target's lib directory, outside gcc's own
            for d in ("/usr/x86_64-w64-mingw32/lib", "/usr/x86_64-w64-mingw32/bin"):
                if Path(d, name).is_file():
                    path = Path(d, name)
                    break
        if not path.is_file():
            raise SystemExit(f"build_win: {name} not found for {CC}")
        found.append(path)
    return found


def read_setup(root: Path) -> dict:
    """setup.py's module namespace, with setuptools.setup made a no-op: the
    extension list, Cython directives and flag tables as the Linux build uses them."""
    import setuptools

    real = setuptools.setup
    setuptools.setup = lambda **kw: None
    cwd = os.getcwd()
    os.chdir(root)
    try:
        ns: dict = {"__name__": "fastpe_setup", "__file__": str(root / "setup.py")}
        exec(compile((root / "setup.py").read_text(), str(root / "setup.py"), "exec"), ns)
    finally:
        setuptools.setup = real
        os.chdir(cwd)
    return ns


def compile_and_link(
    sources, target: Path, *, cflags, ldflags, include_dirs, macros, pyinclude, pydll, cwd, basedir
):
    """Compile the C sources (in parallel) and link them into the module target."""
    env = {**os.environ, "CCACHE_BASEDIR": str(Path(basedir).resolve()), "CCACHE_NOHASHDIR": "1"}
    objdir = target.parent / f".obj-{target.name}"
    objdir.mkdir(parents=True, exist_ok=True)
    incs = [f"-I{d}" for d in [*include_dirs, pyinclude]]
    defs = [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in macros]

    def one(i_src):
        i, src = i_src
        obj = objdir / f"{i}_{Path(src).stem}.o"
        cmd = [*CCACHE, CC, "-c", str(src), "-o", str(obj), "-DNDEBUG", *incs, *defs, *cflags]
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
        if proc.returncode:
            raise RuntimeError(f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        return obj

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objs = list(pool.map(one, enumerate(sources)))
    cmd = [CC, "-shared", "-o", str(target), *map(str, objs), f"-L{pydll}", "-lpython312"]
    cmd += ldflags
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    shutil.rmtree(objdir, ignore_errors=True)


def build_fastpe(args) -> None:
    root = Path(args.root).resolve()
    ns = read_setup(root)
    base = [*ns["BASE_CFLAGS"]["gcc-like"], "-g0"]
    omp_c, omp_l = ns["OPENMP_FLAGS"]["gcc-like"]
    out = Path(args.out)
    cwd = os.getcwd()
    os.chdir(root)  # setup.py's paths are relative to the tree
    try:
        # The CPython headers through a link in the build folder: the compile commands
        # then name the same relative paths wherever the tree is (ccache's key).
        pyinclude = Path(args.build_dir) / "pyinclude"
        pyinclude.parent.mkdir(parents=True, exist_ok=True)
        if pyinclude.is_symlink() or pyinclude.exists():
            pyinclude.unlink()
        pyinclude.symlink_to(Path(cwd, args.pyinclude).resolve(), target_is_directory=True)
        for ext in ns["EXTENSIONS"]:
            # (as the Linux build does: its Cython cache, where one is set)
            sources = ns["cythonize_cached"](ext, args.build_dir)
            target = out / (ext.name.split(".", 1)[1].replace(".", "/") + EXT_SUFFIX)
            target.parent.mkdir(parents=True, exist_ok=True)
            compile_and_link(
                sources,
                target.resolve(),
                cflags=base + omp_c + list(ext.extra_compile_args or []),
                ldflags=list(omp_l) + list(ext.extra_link_args or []),
                include_dirs=list(ext.include_dirs or []),
                macros=list(ext.define_macros or []),
                pyinclude=str(pyinclude),
                pydll=args.pydll,
                cwd=root,
                basedir=root,
            )
            print(f"build_win: {target.relative_to(out)} ({target.stat().st_size // 1024} KiB)")
    finally:
        os.chdir(cwd)
    for dll in runtime_dlls():
        shutil.copy(dll, out)


def unix_path(win: str) -> str:
    """The Linux path of a path as the Windows process spells it: Wine maps drive
    Z: to / and C: to the prefix's drive_c."""
    p = win.replace("\\", "/")
    if len(p) > 1 and p[1] == ":":
        drive, rest = p[0].lower(), p[2:]
        if drive == "z":
            return rest or "/"
        return os.path.join(os.environ["WINEPREFIX"], f"drive_{drive}") + rest
    return p


def serve_one(req: dict, args) -> str:
    """Build the extensions of one request; returns the build log."""
    from Cython.Build import cythonize
    from setuptools import Extension

    workdir = Path(unix_path(req["workdir"]))
    search = [unix_path(p) for p in req.get("search_path", [])]
    log = []
    for e in req["extensions"]:
        sources = [str(workdir / unix_path(s)) for s in e["sources"]]
        include_dirs = [unix_path(d) for d in e.get("include_dirs", [])]
        if req.get("cythonize"):
            ext = Extension(e["name"], sources=sources, include_dirs=include_dirs)
            (cy,) = cythonize(ext, include_path=search, quiet=True)
            sources = list(cy.sources)
        target = workdir / (e["name"].replace(".", "/") + EXT_SUFFIX)
        compile_and_link(
            sources,
            target,
            cflags=list(e.get("extra_compile_args", [])),
            ldflags=list(e.get("extra_link_args", [])),
            include_dirs=include_dirs,
            macros=[tuple(m) for m in e.get("define_macros", [])],
            pyinclude=args.pyinclude,
            pydll=args.pydll,
            cwd=workdir,
            basedir=Path(args.queue).parent,
        )
        log.append(f"built {target}")
    for dll in runtime_dlls():
        shutil.copy(dll, workdir)
    return "\n".join(log)


def serve(args) -> None:
    queue = Path(args.queue)
    queue.mkdir(parents=True, exist_ok=True)
    while True:
        for req_path in sorted(queue.glob("*.req.json")):
            name = req_path.name[: -len(".req.json")]
            try:
                req = json.loads(req_path.read_text())
            except (OSError, ValueError):
                continue  # still being written; the writer renames it into place
            req_path.unlink()
            try:
                answer = {"rc": 0, "output": serve_one(req, args)}
            except Exception as exc:  # any failure goes back to the test as its output
                answer = {"rc": 1, "output": f"{type(exc).__name__}: {exc}"}
            tmp = queue / f"{name}.tmp"
            tmp.write_text(json.dumps(answer))
            tmp.rename(queue / f"{name}.done.json")
        time.sleep(0.1)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("fastpe", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--pyinclude", required=True, help="CPython headers, Windows pyconfig.h")
        p.add_argument("--pydll", required=True, help="the directory of python312.dll")
    sub.choices["fastpe"].add_argument("--root", default=".")
    sub.choices["fastpe"].add_argument("--out", required=True)
    sub.choices["fastpe"].add_argument("--build-dir", required=True)
    sub.choices["serve"].add_argument("--queue", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "fastpe":
        build_fastpe(args)
    else:
        serve(args)


if __name__ == "__main__":
    sys.exit(main())
