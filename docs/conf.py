"""Sphinx configuration for fastpe's documentation (built by tools/build_docs.sh).

The API pages are generated from the docstrings of the *installed* package
(fastpe.kernel is compiled), so build and install fastpe before running Sphinx.
The CLI page shows the real ``--help`` texts, generated here at build time.
"""

import os
from pathlib import Path

import fastpe
from fastpe import _cli

project = "fastpe"
author = "fastpe developers"
copyright = "fastpe developers"
release = fastpe.__version__
version = ".".join(release.split(".")[:2])

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated", "images/README.md"]
myst_heading_anchors = 3

napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_typehints = "signature"
# Keep numpy.typing.DTypeLike readable instead of its 8-member expansion.
autodoc_type_aliases = {"DTypeLike": "numpy.typing.DTypeLike"}
autodoc_member_order = "bysource"

html_theme = "furo"
html_title = f"fastpe {release}"
html_static_path: list[str] = []

# --- the CLI's --help texts, as the installed `fastpe` prints them ---------------
_gen = Path(__file__).parent / "_generated"
_gen.mkdir(exist_ok=True)
os.environ["COLUMNS"] = "88"  # argparse wraps to the terminal width
_parser = _cli.build_parser("fastpe")
_subparsers = next(a for a in _parser._actions if a.choices and isinstance(a.choices, dict))
(_gen / "cli-fastpe.txt").write_text(_parser.format_help())
for _name, _sub in _subparsers.choices.items():
    (_gen / f"cli-{_name}.txt").write_text(_sub.format_help())
