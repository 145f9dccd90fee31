#!/usr/bin/env bash
# The test suite on a free-threaded CPython (configured with --disable-gil), built here
# from Debian's source package and cached, so that the kernel and fastpe's Python-level
# state are exercised with no GIL behind them.  The suite must pass on it before a
# release.
#
# Where the interpreter comes from: a private apt configuration (its own sources list,
# lists and cache under the cache directory; the host's apt state is not touched) fetches
# the source package from deb.debian.org.  apt checks the suite's signed InRelease against
# the host's debian-archive-keyring, the Sources index against InRelease, and the .dsc and
# tarballs against the index; dpkg-source checks the tarballs against the .dsc.  Only the
# upstream tarball is built (--skip-patches): Debian's patches fit CPython to /usr and
# Debian's layout, which a private prefix does not want.
#
# Caching: the built interpreter is kept in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/free-threaded/<package>_<version>-<flags hash>
# and reused while the archive offers the same version and the configure flags are the same.
#
# Policy: .ci/run runs this on every run, building CPython when the cache is cold (8 minutes
# with the suite on a 2-core machine, once per machine and Debian version; warm: 2 to 5
# minutes; docs/reliability.md, "Free-threaded CPython").  A release must pass it.
# FASTPE_FT_CACHED_ONLY=1 makes a cold cache a skip with a message instead of a build.
#
#   bash tools/test_free_threaded.sh
#   FASTPE_FT_SOURCE=python3.13 FASTPE_FT_SUITE=trixie bash tools/test_free_threaded.sh
#
# Environment:
#   FASTPE_FT_SOURCE       Debian source packages, in order of preference
#                          (default "python3.14 python3.13")
#   FASTPE_FT_SUITE        Debian suite to take it from (default forky, i.e. testing)
#   FASTPE_FT_MIRROR       archive URL (default http://deb.debian.org/debian)
#   FASTPE_FT_CACHE        cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/free-threaded)
#   FASTPE_FT_JOBS         make -j for CPython (default 2)
#   FASTPE_FT_CACHED_ONLY  1: skip (exit 0, with a message) instead of building CPython
#   FASTPE_TEST_MARK       core: only the tests marked so (tests/conftest.py)
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCES=${FASTPE_FT_SOURCE:-python3.14 python3.13}
SUITE=${FASTPE_FT_SUITE:-forky}
MIRROR=${FASTPE_FT_MIRROR:-http://deb.debian.org/debian}
CACHE=${FASTPE_FT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/free-threaded}
JOBS=${FASTPE_FT_JOBS:-2}
# --disable-test-modules: CPython's own test package and test extensions (_testcapi, ...)
# are three fifths of the .pyc files `make install` compiles, three times over, and
# nothing here uses them.
CONFIGURE_FLAGS=(--disable-gil --with-ensurepip=no --disable-test-modules)
# The GIL must stay off because nothing imported asks for it, not because it is forced off.
unset PYTHON_GIL

mkdir -p "$CACHE/apt/lists/partial" "$CACHE/apt/cache/archives/partial"
# One run at a time per cache: a second waits instead of building into the same prefix.
exec 9>"$CACHE/.lock"
flock 9

echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $SUITE main" \
    >"$CACHE/apt/sources.list"
APT_OPTS=(
    -o "Dir::Etc::SourceList=$CACHE/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$CACHE/apt/lists" -o "Dir::Cache=$CACHE/apt/cache"
    -o APT::Sandbox::User=root -o Acquire::Retries=2
)
# apt-get update exits 0 when a source cannot be fetched; -o APT::Update::Error-Mode=any
# is not in bookworm's apt, so the failure is read from its output instead.
if ! upd=$(apt-get "${APT_OPTS[@]}" update 2>&1) || grep -qE '^(W|E|Err):' <<<"$upd"; then
    echo "$upd" >&2
    echo "error: cannot read the Debian archive ($MIRROR, suite $SUITE): the free-threaded" \
        "interpreter's version cannot be resolved, so this check fails rather than pass unchecked." >&2
    exit 1
fi
FLAGS_HASH=$(printf '%s\n' "${CONFIGURE_FLAGS[@]}" | sha256sum | cut -c1-12)
prefix_of() {  # the cache directory for source package $1, version $2
    echo "$CACHE/${1}_${2}-$FLAGS_HASH"
}
version_of() {  # the version of source package $1 that the suite offers, or nothing
    apt-get "${APT_OPTS[@]}" source --print-uris "$1" 2>/dev/null |
        awk -v p="$1" '$2 ~ /\.dsc$/ {v = $2; sub("^" p "_", "", v); sub(/\.dsc$/, "", v); print v}'
}

# The first package in the list that is cached, else (unless FASTPE_FT_CACHED_ONLY) the
# first whose source can be fetched: an index can list a version that a mirror lacks.
PREFIX=
for pkg in $SOURCES; do
    v=$(version_of "$pkg")
    if [ -n "$v" ] && [ -f "$(prefix_of "$pkg" "$v")/.complete" ]; then
        PREFIX=$(prefix_of "$pkg" "$v")
        echo "== free-threaded CPython: cached $PREFIX"
        break
    fi
done
if [ -z "$PREFIX" ] && [ "${FASTPE_FT_CACHED_ONLY:-0}" = 1 ]; then
    echo "== SKIPPED: free-threaded suite (no cached --disable-gil build of $SOURCES in $CACHE)."
    echo "   FASTPE_FT_CACHED_ONLY=1 is set; build the interpreter and run the suite with:"
    echo "   bash tools/test_free_threaded.sh"
    exit 0
fi
if [ -z "$PREFIX" ]; then
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    for pkg in $SOURCES; do
        v=$(version_of "$pkg")
        if [ -z "$v" ]; then
            echo "== $SUITE has no source package $pkg"
            continue
        fi
        if (cd "$WORK" && apt-get "${APT_OPTS[@]}" source --download-only "$pkg" >"$WORK/get.log" 2>&1); then
            SOURCE=$pkg VERSION=$v PREFIX=$(prefix_of "$pkg" "$v")
            break
        fi
        echo "== $SUITE lists $pkg $v but its files cannot be fetched:"
        grep -E '^(E|Err):' "$WORK/get.log" | head -n 3 | sed 's/^/   /' || true
        rm -f "$WORK"/*
    done
    if [ -z "$PREFIX" ]; then
        echo "error: none of $SOURCES could be fetched from $MIRROR ($SUITE)" >&2
        exit 1
    fi
    echo "== free-threaded CPython: building $SOURCE $VERSION ($SUITE) into $PREFIX"
    rm -rf "$PREFIX"
    # dpkg-source cannot check the uploader's signature (no Debian keyring here) and says
    # so; the files were already checked by apt through the signed index.
    dpkg-source --skip-patches -x "$WORK/${SOURCE}_${VERSION}.dsc" "$WORK/src" \
        >"$WORK/unpack.log" 2>&1 || { cat "$WORK/unpack.log"; exit 1; }
    (
        cd "$WORK/src"
        ./configure --prefix="$PREFIX" "${CONFIGURE_FLAGS[@]}" >"$WORK/configure.log" 2>&1 ||
            { tail -n 40 "$WORK/configure.log"; exit 1; }
        make -j"$JOBS" >"$WORK/make.log" 2>&1 || { tail -n 60 "$WORK/make.log"; exit 1; }
        make install >"$WORK/install.log" 2>&1 || { tail -n 60 "$WORK/install.log"; exit 1; }
    )
    # Written last: a build that stopped half way is rebuilt, never reused.
    echo "$SOURCE $VERSION ${CONFIGURE_FLAGS[*]}" >"$PREFIX/.complete"
    echo "== free-threaded CPython: fetched and built in $SECONDS s"
    rm -rf "$WORK"
    trap - EXIT
fi
PY=$(ls "$PREFIX"/bin/python3.*t | head -n 1)
"$PY" -c 'import sys, sysconfig
assert sysconfig.get_config_var("Py_GIL_DISABLED"), "not a free-threaded build"
assert not sys._is_gil_enabled(), "the GIL is enabled at startup"
print("==", sys.version.replace("\n", " "))'

VENV=$(mktemp -d)/venv
trap 'rm -rf "$(dirname "$VENV")"' EXIT
source tools/venv.sh
new_venv "$PY" "$VENV"
# Wheels only: NumPy from a free-threaded (cp3XXt) wheel, since a source build would take
# longer than the rest of this script and hide a missing wheel; and pip then takes the
# newest release of the test tools with a wheel for this interpreter instead of an sdist
# that needs a compiler or network this machine lacks.  The dask extra is left out (its
# tests skip).
"$VENV/bin/python" -m pip install -q --only-binary :all: "numpy>=2.1" "setuptools>=77" wheel \
    "Cython>=3.1" "pytest>=7" "hypothesis>=6" "mpmath>=1.3" "threadpoolctl>=3" "pytest-benchmark>=4"
bash tools/install_tree.sh "$VENV/bin/python"
"$VENV/bin/python" -c "import sys, numpy, fastpe
print('NumPy', numpy.__version__, '| fastpe', fastpe.__version__, '| GIL enabled:', sys._is_gil_enabled())"
SETUP_DONE=$SECONDS
FASTPE_EXPECT_OPENMP=1 FASTPE_EXPECT_FREE_THREADED=1 "$VENV/bin/python" -m pytest \
    ${FASTPE_TEST_MARK:+-m "$FASTPE_TEST_MARK"} tests -q -p no:cacheprovider
echo "== free-threaded suite passed (setup $SETUP_DONE s, tests $((SECONDS - SETUP_DONE)) s)"
