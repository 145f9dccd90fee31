"""Print which C files of lib/src call which, and any circle among them.

    python tools/tu_calls.py [BUILD_DIR]

Compiles every file of lib/sources.txt with -O2 -fno-inline (so that no call is
hidden by inlining, and no unused header function is emitted) into BUILD_DIR
(default build/tu-calls), then reads each object's defined and undefined symbols
with nm: file A calls file B when A uses a symbol B defines.  Exits 1 when the
calls form a circle (files that reach each other), which a layered library has not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def objects(build: str) -> dict[str, str]:
    """name -> object file of every C source of the library (compiled side by side,
    through ccache where installed)."""
    with open(os.path.join(ROOT, "lib", "sources.txt")) as f:
        sources = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    os.makedirs(build, exist_ok=True)
    cc = ["ccache", "cc"] if shutil.which("ccache") else ["cc"]
    flags = ["-O2", "-fno-inline", "-Ilib/include", "-Ilib/src"]
    out = {os.path.splitext(os.path.basename(src))[0]: src for src in sources}

    def compile_one(name: str) -> None:
        obj = os.path.join(build, name + ".o")
        subprocess.run([*cc, "-c", *flags, out[name], "-o", obj], cwd=ROOT, check=True)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(compile_one, out))
    return {name: os.path.join(build, name + ".o") for name in out}


def calls(objs: dict[str, str]) -> dict[str, set[str]]:
    defined: dict[str, str] = {}
    used: dict[str, set[str]] = {}
    for name, obj in objs.items():
        for line in subprocess.run(["nm", obj], capture_output=True, text=True).stdout.split("\n"):
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                used.setdefault(name, set()).add(parts[1])
    return {n: {defined[s] for s in used.get(n, ()) if defined.get(s, n) != n} for n in objs}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one file (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "tu-calls")
    graph = calls(objects(build))
    for name in sorted(graph):
        print(f"{name:12s} -> {', '.join(sorted(graph[name])) or '-'}")
    found = circles(graph)
    print("circles:", "; ".join(" <-> ".join(g) for g in found) if found else "none")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
