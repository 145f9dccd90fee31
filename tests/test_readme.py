"""README.md: its links work on PyPI, and every code block in it runs as written.

README.md is the project's page on PyPI, where a relative link or image resolves
against pypi.org and breaks: every link must be absolute or an in-page anchor.  Its
examples are run here as a visitor would paste them (see the second part)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import fastpe

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Links into this repository's own files, checked against the tree below.
OWN = (
    "https://github.com/fastpe/fastpe/blob/main/",
    "https://github.com/fastpe/fastpe/tree/main/",
    "https://raw.githubusercontent.com/fastpe/fastpe/main/",
)

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_TARGETS = [
    re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)"),  # [text](url), ![alt](url)
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M),  # [ref]: url
    re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""", re.I),  # HTML
]


def link_targets(markdown: str) -> list[str]:
    """Every link and image target of ``markdown``, code blocks and spans excluded
    (``x[i](...)`` in code is not a link)."""
    text = _CODE_SPAN.sub("", _FENCE.sub("", markdown))
    return [m.group(1) for pattern in _TARGETS for m in pattern.finditer(text)]


def relative_targets(markdown: str) -> list[str]:
    """The targets that would break on PyPI: neither a URL with a scheme nor an anchor."""
    return [
        t
        for t in link_targets(markdown)
        if not (t.startswith("#") or re.match(r"[a-z][a-z0-9+.-]*:", t, re.I))
    ]


def test_the_checker_finds_relative_links_and_images():
    md = (
        "See [api](docs/api.md), ![plot](docs/images/p.png), [up](../x.md),\n"
        "[ref]: docs/ref.md\n"
        '<img src="docs/a.png"> [ok](https://example.org/a) [anchor](#benchmark)\n'
        "`code [i](j)` and\n```python\nP[k](x)\n```\n"
    )
    assert relative_targets(md) == [
        "docs/api.md",
        "docs/images/p.png",
        "../x.md",
        "docs/ref.md",
        "docs/a.png",
    ]


@pytest.mark.skipif(not README.is_file(), reason="README.md is not next to the tests")
def test_readme_links_are_absolute():
    bad = relative_targets(README.read_text(encoding="utf-8"))
    assert not bad, f"relative links in README.md (broken on PyPI; use {OWN[0]}...): {bad}"


@pytest.mark.skipif(not README.is_file(), reason="README.md is not next to the tests")
def test_readme_links_into_the_repository_name_existing_files():
    missing = []
    for target in link_targets(README.read_text(encoding="utf-8")):
        for prefix in OWN:
            if target.startswith(prefix):
                path = target[len(prefix) :].partition("#")[0]
                if not (ROOT / path).exists():
                    missing.append(target)
    assert not missing, f"README.md links to files this repository does not have: {missing}"


# --- Every code block of the README, run as written ----------------------------------
#
# Each block is classified by its language and first line; a block of a kind this file
# does not know fails test_every_block_has_a_known_kind, so a new example cannot go
# untested.  Kinds:
#   python        run in a fresh interpreter (skipped without torch when it uses torch)
#   file          a file named on its first line (`# setup.py`, `/* app.c */`), written
#                 into its section's directory for the shell blocks that follow
#   shell         run by bash with the section's files, in one shell per section
#   setup         the two set-up commands (they take minutes: checked, not run)
#   install       `pip install` lines (they need a network or a wheel: checked, not run)

SETUP_COMMANDS = (
    "bash tools/run_main.sh     # the main job: builds fastpe into .venv, prints the "
    "comparison with NumPy\n"
    "bash tools/run_tests.sh    # builds fastpe with OpenMP and serial, runs the test "
    "suite on both\n"
)
# The install prefix of the C example: the only text the test replaces.
README_PREFIX = '"$HOME/opt/fastpe"'
_BLOCK = re.compile(r"^(```|~~~)([^\s`~]*)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
_FILE_NAME = re.compile(r"^(?:#|/\*)\s*([\w.-]+\.(?:py|pyx|c|cpp|h|txt))\s*(?:\*/)?\s*$")
_USES_TORCH = re.compile(r"^\s*(?:import|from)\s+(?:torch|fastpe\.torch)\b", re.M)
_FILE_LANGS = {"python", "c", "cpp", "cython", "cmake"}


@dataclass
class Block:
    lang: str
    text: str
    line: int  # where the block starts in the README, for messages
    section: str  # the "## " heading above it

    @property
    def file_name(self) -> str | None:
        m = _FILE_NAME.match(self.text.split("\n", 1)[0])
        return m.group(1) if m else None

    def __repr__(self) -> str:
        return f"README.md:{self.line} ({self.lang}, {self.section!r})"


def code_blocks(markdown: str) -> list[Block]:
    blocks = []
    for m in _BLOCK.finditer(markdown):
        above = markdown[: m.start()]
        headings = re.findall(r"^## (.+)$", above, re.M)
        blocks.append(
            Block(m.group(2), m.group(3), above.count("\n") + 1, headings[-1] if headings else "")
        )
    return blocks


def kind(block: Block) -> str | None:
    """What the test does with ``block``; None for a block it cannot run."""
    if block.lang in _FILE_LANGS and block.file_name:
        return "file"
    if block.lang == "python":
        return "python"
    if block.lang == "bash":
        if block.text == SETUP_COMMANDS:
            return "setup"
        lines = [ln for ln in block.text.splitlines() if ln.strip()]
        if lines and all(ln.startswith("pip install ") for ln in lines):
            return "install"
        return "shell"
    return None


def readme_blocks() -> list[Block]:
    if not README.is_file():
        pytest.skip("README.md is not next to the tests")
    return code_blocks(README.read_text(encoding="utf-8"))


def test_the_classifier_refuses_unknown_blocks():
    md = (
        "## A\n```python\nprint(1)\n```\n```ruby\nputs 1\n```\n"
        "```c\nint x;\n```\n```c\n/* x.c */\nint x;\n```\n"
        "## B\n```bash\npip install '.[torch]'\n```\n```console\n$ fastpe info\n```\n"
        "~~~\nno language\n~~~\n"
    )
    kinds = [(b.section, kind(b)) for b in code_blocks(md)]
    assert kinds == [
        ("A", "python"),
        ("A", None),
        ("A", None),
        ("A", "file"),
        ("B", "install"),
        ("B", None),
        ("B", None),
    ]


def test_every_block_has_a_known_kind():
    unknown = [b for b in readme_blocks() if kind(b) is None]
    assert not unknown, (
        f"README.md blocks this test does not run: {unknown}; give them a kind in "
        "tests/test_readme.py (and run them there)"
    )


def test_the_setup_commands_are_kept_and_their_scripts_parse():
    setup = [b for b in readme_blocks() if kind(b) == "setup"]
    assert len(setup) == 1, "README.md must show the two set-up commands, as CI runs them"
    for script in ("tools/run_main.sh", "tools/run_tests.sh"):
        assert (ROOT / script).is_file(), script
        if shutil.which("bash"):
            subprocess.run(["bash", "-n", str(ROOT / script)], check=True)


def _extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*=", table, re.M))


def test_the_install_commands_name_real_extras_and_this_version():
    lines = [
        ln
        for b in readme_blocks()
        if kind(b) == "install"
        for ln in b.text.splitlines()
        if ln.strip()
    ]
    assert lines, "README.md shows no pip install command"
    extras = _extras()
    wheel = re.compile(
        rf"^(?:\./)?fastpe-{re.escape(fastpe.__version__)}-cp3\d+-cp3\d+t?-[\w.]+\.whl$"
    )
    for ln in lines:
        for arg in shlex.split(ln.split("#", 1)[0])[2:]:
            if arg.endswith(".whl"):
                assert wheel.match(arg), f"{arg!r} is not a fastpe {fastpe.__version__} wheel"
                continue
            m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", arg)
            assert m, f"unexpected pip install argument {arg!r}"
            unknown = set((m.group(1) or "").split(",")) - {""} - extras
            assert not unknown, f"README.md names extras pyproject.toml lacks: {unknown}"


def _python_blocks() -> list[Block]:
    return [b for b in readme_blocks() if kind(b) == "python"] if README.is_file() else []


def _run(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 300):
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )
    return proc.stdout


@pytest.mark.parametrize("block", _python_blocks(), ids=repr)
def test_python_block_runs(block, tmp_path):
    if _USES_TORCH.search(block.text) and importlib.util.find_spec("torch") is None:
        pytest.skip("this README block needs torch (pip install 'fastpe[torch]')")
    _run([sys.executable, "-c", block.text], cwd=tmp_path)


# The sections whose shell blocks run, each with a line its output must show and how
# many times (the C program is built and run twice: through pkg-config and CMake).
SHELL_SECTIONS = {
    "C and C++ (libfastpe, no Python)": ("position 1, column 0: 0.841471", 2),
    "Cython and C extensions": ("True", 1),
}


def _copy_library_sources(dest: Path) -> None:
    """What CMakeLists.txt reads, without the Python build's outputs."""
    skip = shutil.ignore_patterns("build*", "__pycache__", "*.so", "*.pyd", "kernel.c", "*.html")
    shutil.copy2(ROOT / "CMakeLists.txt", dest)
    shutil.copy2(ROOT / "VERSION", dest)
    shutil.copytree(ROOT / "lib", dest / "lib", ignore=skip)


def _needs(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"the README's commands need {', '.join(missing)}")


def test_the_shell_sections_are_the_known_ones():
    sections = {b.section for b in readme_blocks() if kind(b) in ("shell", "file")}
    assert sections == set(SHELL_SECTIONS), (
        "README.md sections with shell or file blocks changed: tell SHELL_SECTIONS in "
        f"tests/test_readme.py what their output shows ({sorted(sections)})"
    )


@pytest.mark.parametrize("section", sorted(SHELL_SECTIONS))
def test_shell_section_runs(section, tmp_path):
    """The section's files written into a fresh directory and its shell blocks run
    there, in one bash, with the environment variables the README sets itself: the
    library built from a copy of the sources and installed into a temporary prefix
    (the README's prefix is the only text replaced), the program built against it."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the README's build commands are written for Linux")
    blocks = [b for b in readme_blocks() if b.section == section]
    text = "".join(b.text for b in blocks)
    _needs("bash", "cc", *(p for p in ("cmake", "pkg-config") if p in text))
    if "cython" in (b.lang for b in blocks):
        pytest.importorskip("Cython", reason="the README's Cython example needs Cython")
    work, src, prefix, bin_dir = (tmp_path / d for d in ("work", "src", "prefix", "bin"))
    for d in (work, src, bin_dir):
        d.mkdir()
    # `python` in the README is the interpreter running the tests (a wrapper, not a
    # link: a venv's interpreter finds its venv from the path it was started by).
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    # Only the README's own settings point pkg-config and CMake at the prefix.
    env = dict(os.environ)
    env.pop("PKG_CONFIG_PATH", None)
    env.pop("CMAKE_PREFIX_PATH", None)
    if "python" not in text:
        # A section without Python builds with the system's tools alone: a sanitizer
        # runtime preloaded for the interpreter under test (tools/sanitize.sh) stays out.
        env.pop("LD_PRELOAD", None)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    script = ["set -euo pipefail"]
    for b in blocks:
        if kind(b) == "file":
            (work / b.file_name).write_text(b.text, encoding="utf-8")
        elif kind(b) == "shell":
            body = b.text
            if "cmake -S . -B build-lib" in body:  # run from the repository root
                _copy_library_sources(src)
                assert body.count(README_PREFIX) == 1, f"{b}: the prefix is {README_PREFIX}"
                body = body.replace(README_PREFIX, shlex.quote(str(prefix)))
                script.append(f"cd {shlex.quote(str(src))}")
            else:
                script.append(f"cd {shlex.quote(str(work))}")
            script.append(body)
        else:
            raise AssertionError(f"{b}: a {kind(b)} block in a shell section")
    out = _run(["bash", "-c", "\n".join(script)], cwd=work, env=env, timeout=600)
    line, times = SHELL_SECTIONS[section]
    assert out.splitlines().count(line) == times, f"{section}: {line!r} x{times} expected:\n{out}"


# --- docs/api.md and docs/cli.md, generated from the installed package --------------


def test_generated_pages_are_up_to_date():
    tool = ROOT / "tools" / "gen_docs.py"
    if not tool.is_file():
        pytest.skip("tools/gen_docs.py is not next to the tests")
    pytest.importorskip("dask", reason="docs/api.md documents fastpe.dask")
    spec = importlib.util.spec_from_file_location("gen_docs", tool)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path, text in gen.pages().items():
        old = path.read_text(encoding="utf-8")
        if f"({gen.python_tag()})" not in old:
            pytest.skip(f"{path.name} was generated with another Python (argparse differs)")
        assert old == text, f"{path.name} is out of date: run python tools/gen_docs.py"
