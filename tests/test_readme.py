"""README.md is the project's page on PyPI, where a relative link or image resolves
against pypi.org and breaks: every link must be absolute or an in-page anchor."""

import re
from pathlib import Path

import pytest

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
