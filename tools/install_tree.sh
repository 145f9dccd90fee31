#!/usr/bin/env bash
# Build fastpe from this tree and install it into a venv (no build isolation, no
# dependencies): the one build step the test scripts share.
#   bash tools/install_tree.sh VENV/bin/python [pip install options...]
#   FASTPE_DISABLE_OPENMP=1 bash tools/install_tree.sh .venv/bin/python
# The build's own settings (FASTPE_DISABLE_OPENMP, FASTPE_SANITIZE, ...) pass through.
#
# Only setuptools' staging folders (build/lib.*, build/bdist.*) are removed first, so
# that a file deleted from src/ cannot come back from an earlier build; the rest of
# build/ and any CMake folder (build-lib/, the README's) are left alone.  setup.py
# regenerates kernel.c on every build, so the extension is always recompiled.
#
# ccache, where installed, caches the C compiles: identical builds (the same flags,
# Python and sources) in other venvs or later runs then cost a link.  FASTPE_NO_CCACHE=1
# or a CC set by the caller turns that off.  Cython's output is cached the same way
# (setup.py's FASTPE_CYTHON_CACHE, keyed on the sources' content), unless
# FASTPE_NO_CCACHE=1 or FASTPE_CYTHON_CACHE= (empty).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:?usage: install_tree.sh VENV/bin/python [pip options]}
shift
rm -rf build/lib.* build/bdist.*
if [ -z "${CC:-}" ] && [ "${FASTPE_NO_CCACHE:-0}" != 1 ] && command -v ccache >/dev/null; then
    # (the interpreter's own compiler, as setuptools would pick it; the cache key
    # ignores where the tree is, since CI builds in copies of it)
    CC="ccache $("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("CC") or "cc")')"
    export CC
    export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
fi
if [ "${FASTPE_NO_CCACHE:-0}" != 1 ]; then
    export FASTPE_CYTHON_CACHE=${FASTPE_CYTHON_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/cython}
fi
"$PY" -m pip install -q --no-build-isolation --no-deps --force-reinstall "$@" . >/dev/null
