"""Sphinx configuration for fastpe's documentation (built by tools/build_docs.sh).

The pages are Markdown read as they are on GitHub: docs/api.md and docs/cli.md hold
the docstrings and ``--help`` texts of the installed package, written by
tools/gen_docs.py (tests/test_readme.py checks that they are up to date).  fastpe is
imported for its version only.
"""

import fastpe

project = "fastpe"
author = "fastpe developers"
copyright = "fastpe developers"
release = fastpe.__version__
version = ".".join(release.split(".")[:2])

extensions = ["myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "images/README.md"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"fastpe {release}"
html_static_path: list[str] = []
