"""The shape of the code: the package's modules import in one direction (no circle),
and the C library builds from lib/ alone (nothing of the Python package in its build)."""

import ast
import pathlib
import re

import pytest

import fastpe

PACKAGE = pathlib.Path(fastpe.__file__).resolve().parent
ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "fastpe"


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1:
            names = [node.module] if node.module else [a.name for a in node.names]
        elif node.level == 0 and node.module and node.module.split(".")[0] == "fastpe":
            parts = node.module.split(".")
            names = parts[1:2] if len(parts) > 1 else [a.name for a in node.names]
        else:
            continue
        found |= {n.split(".")[0] for n in names if n.split(".")[0] in modules}
    return found - {path.stem}


def _kernel_imports(modules: set[str]) -> set[str]:
    """The package's modules that the compiled kernel imports when it is loaded
    (module-level imports of kernel.pyx and its .pxi files).  Its constructors for C
    callers that take Python objects import the Python API when first called, which
    the API has finished importing by then."""
    found = set()
    for path in [SRC / "kernel.pyx", *sorted(SRC.glob("*.pxi"))]:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^from fastpe(?:\.(\w+))? import (\w+)", text, re.M):
            found.add(m[1] or m[2])
    return found & modules


def test_the_python_modules_import_without_a_circle():
    files = {p.stem: p for p in PACKAGE.glob("*.py")}
    modules = set(files) | ({"kernel"} if (SRC / "kernel.pyx").is_file() else set())
    graph = {name: _imports(path, modules) for name, path in files.items()}
    if "kernel" in modules:
        graph["kernel"] = _kernel_imports(set(files))
    # Kahn's algorithm: whatever cannot be ordered lies on a circle
    indegree = {n: 0 for n in graph}
    for deps in graph.values():
        for d in deps:
            indegree[d] += 1
    ready = [n for n, k in indegree.items() if k == 0]
    while ready:
        n = ready.pop()
        for d in graph[n]:
            indegree[d] -= 1
            if indegree[d] == 0:
                ready.append(d)
    circle = sorted(n for n, k in indegree.items() if k > 0)
    assert not circle, f"modules on an import circle: {circle} ({ {n: graph[n] for n in circle} })"


@pytest.mark.skipif(
    not (ROOT / "lib" / "sources.txt").is_file(), reason="needs the source tree (lib/)"
)
def test_the_c_library_builds_from_lib_alone():
    sources = (ROOT / "lib" / "sources.txt").read_text(encoding="utf-8")
    listed = [s.split("#", 1)[0].strip() for s in sources.splitlines()]
    listed = [s for s in listed if s]
    assert listed and all(s.startswith("lib/") for s in listed), listed
    cmake = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    assert not re.search(r"\bsrc/fastpe\b", cmake), "CMakeLists.txt reaches into src/fastpe"
    # every quoted include of the library's own files resolves inside lib/
    for path in sorted((ROOT / "lib").rglob("*")):
        if path.suffix not in {".c", ".h"}:
            continue
        for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text("utf-8"), re.M):
            candidates = [path.parent / name, ROOT / "lib" / "src" / name]
            candidates.append(ROOT / "lib" / "include" / name)
            assert any(c.is_file() for c in candidates), f"{path}: #include {name!r} not in lib/"
