"""fastpe's release number, written once in the repository's VERSION file.

CMakeLists.txt reads that file for the C library, and setup.py for the package's
metadata; setup.py also writes the number itself into the built copy of this module,
so an installed fastpe needs no repository.  Run from a source tree (an editable
install), this module reads the file two folders above it.
"""

from pathlib import Path

__version__ = (Path(__file__).resolve().parents[2] / "VERSION").read_text(encoding="ascii").strip()
