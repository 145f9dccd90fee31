"""Print the size of each layer of fastpe, at a git revision or in the working tree.

    python tools/layer_sizes.py               # the working tree (files git tracks or would)
    python tools/layer_sizes.py --rev 07e0bd1 # a revision, read with git (no checkout)

Per layer: the number of files, all their lines, and their code lines: lines that are
neither blank nor comment only (C: ``//`` lines and the lines of ``/* */`` blocks;
Python and Cython: ``#`` lines).  Docstrings count as code.  A file belongs to the first
layer whose rule matches it; files of no layer (tests, tools, docs) are not counted.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ROPE_PY = ("src/fastpe/_rope*.py", "src/fastpe/rope_presets.py")

# (layer, patterns): fnmatch's * crosses folders, so each pattern names its folder.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("kernels (row writers)", ("lib/src/kernels/*", "src/fastpe/csrc/*")),
    ("C library (lib/src)", ("lib/src/*.c", "lib/src/*.h")),
    ("native header", ("lib/include/fastpe/fastpe.h",)),
    ("capsule header", ("src/fastpe/include/fastpe.h",)),
    ("Cython (.pyx/.pxi/.pxd)", ("src/fastpe/*.pyx", "src/fastpe/*.pxi", "src/fastpe/*.pxd")),
    ("RoPE Python", _ROPE_PY),
    ("Python API", ("src/fastpe/*.py",)),
]


def layer_of(path: str) -> str | None:
    for name, patterns in LAYERS:
        if any(fnmatch.fnmatchcase(path, p) for p in patterns):
            return name
    return None


def code_lines(path: str, text: str) -> int:
    """Lines that are neither blank nor comment only (see the module docstring)."""
    c_like = path.endswith((".c", ".h"))
    n = 0
    in_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not c_like:
            n += bool(line) and not line.startswith("#")
            continue
        if in_block:
            end = line.find("*/")
            if end < 0:
                continue
            in_block = False
            line = line[end + 2 :].strip()
        while line.startswith("/*"):
            end = line.find("*/", 2)
            if end < 0:
                in_block = True
                line = ""
                break
            line = line[end + 2 :].strip()
        n += bool(line) and not line.startswith("//")
    return n


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", ROOT, *args], check=True, capture_output=True, text=True
    ).stdout


def files_at(rev: str | None) -> tuple[list[str], Callable[[str], str]]:
    """The paths of a revision (or of the working tree) and a reader of their text."""
    if rev is None:
        paths = _git("ls-files", "-co", "--exclude-standard").split("\n")

        def read(p: str) -> str:
            with open(os.path.join(ROOT, p), encoding="utf-8", errors="replace") as f:
                return f.read()

        return [p for p in paths if p and os.path.isfile(os.path.join(ROOT, p))], read

    paths = _git("ls-tree", "-r", "--name-only", rev).split("\n")
    return [p for p in paths if p], lambda p: _git("show", f"{rev}:{p}")


def sizes(rev: str | None) -> dict[str, list[int]]:
    """layer -> [files, lines, code lines]."""
    out = {name: [0, 0, 0] for name, _ in LAYERS}
    paths, read = files_at(rev)
    for p in paths:
        layer = layer_of(p)
        if layer is None:
            continue
        text = read(p)
        row = out[layer]
        row[0] += 1
        row[1] += len(text.splitlines())
        row[2] += code_lines(p, text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rev", help="a git revision (default: the working tree)")
    args = ap.parse_args(argv)
    if args.rev is not None:
        try:
            _git("rev-parse", "--verify", "--quiet", f"{args.rev}^{{commit}}")
        except subprocess.CalledProcessError:
            print(f"layer_sizes: --rev {args.rev!r} is not a commit of this repository")
            return 2
    table = sizes(args.rev)
    where = f"revision {args.rev}" if args.rev else "the working tree"
    print(f"fastpe's layers in {where} (code: lines neither blank nor comment only)")
    print(f"{'layer':<26} {'files':>5} {'lines':>7} {'code':>7}")
    total = [0, 0, 0]
    for name, (nfiles, lines, code) in table.items():
        print(f"{name:<26} {nfiles:>5} {lines:>7} {code:>7}")
        total = [total[0] + nfiles, total[1] + lines, total[2] + code]
    print(f"{'total':<26} {total[0]:>5} {total[1]:>7} {total[2]:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
