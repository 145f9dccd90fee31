#!/usr/bin/env bash
# Build fastpe for aarch64 and run its test suite there, under QEMU user
# emulation, in a Debian bookworm arm64 chroot made by debootstrap.  The chroot
# (with its venv and pip cache) is kept between runs; the source is copied in
# fresh and rebuilt every run.  Needs root (apt-get, debootstrap, chroot, mounts)
# on a Debian or Ubuntu host.
#   bash tools/test_aarch64_qemu.sh                       # the whole suite
#   bash tools/test_aarch64_qemu.sh tests/test_kernel.py  # pytest arguments instead
#   FASTPE_ARM64_ROOT=/var/tmp/arm64 bash tools/test_aarch64_qemu.sh
# The optional extras (dask, torch, matplotlib, ray) are not installed: their
# tests skip.  ~12 min cold (bootstrap, venv), ~5 min warm on 2 cores; figures
# and the tests left out under emulation: docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
ROOT=${FASTPE_ARM64_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fastpe/arm64-bookworm}
MIRROR=${FASTPE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
APT=(apt-get -o DPkg::Lock::Timeout=900)
PKGS=python3,python3-venv,python3-dev,gcc,libc6-dev
# What the venv in the chroot gets; a change here rebuilds the venv.
PIP_REQS=(numpy Cython "setuptools>=77" wheel pytest hypothesis mpmath threadpoolctl)
TESTS=(tests)
if [ $# -gt 0 ]; then
    TESTS=("$@")
fi
# What QEMU user emulation, not aarch64, breaks; these run on native arm64:
#  - QEMU's own RCU thread shows in /proc/self/task, so a process that started
#    no OpenMP worker counts 2 threads;
#  - QEMU keeps a guest's setrlimit(RLIMIT_AS) from the host (getrlimit then
#    reads unlimited), so no address-space limit is there to be respected;
#  - fills check for Ctrl-C every 2**23 entries, tens of ms natively: 2-3 s
#    emulated, against a 0.1 s bound.
EMULATION_DESELECT=(
    tests/test_adversarial.py::test_huge_num_threads_starts_no_more_threads_than_cores
    tests/test_adversarial.py::test_affinity_mask_caps_the_team
    tests/test_adversarial.py::test_address_space_limit_is_a_memory_error_not_a_crash
    tests/test_adversarial.py::test_ctrl_c_interrupts_a_long_fill
)

say() { echo "== $*"; }
die() { echo "test_aarch64_qemu: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts)"
command -v git >/dev/null || die "needs git (the source is copied from git ls-files)"

# The chroot's mounts, unmounted on any exit, innermost first, so that a failed
# or interrupted run leaves no /proc or /dev of the host inside the cache.  The
# work inside runs as its own process group (INNER), stopped first: processes
# still running there would keep the mounts busy.
MOUNTS=()
INNER=
cleanup() {
    local rc=$? i
    if [ -n "$INNER" ] && kill -0 "$INNER" 2>/dev/null; then
        kill -TERM -- "-$INNER" 2>/dev/null || true
        for i in 1 2 3 4 5 6 7 8 9 10; do
            pgrep -g "$INNER" >/dev/null || break
            sleep 1
        done
        kill -KILL -- "-$INNER" 2>/dev/null || true
    fi
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" \
            || echo "test_aarch64_qemu: could not unmount ${MOUNTS[i]}" >&2
    done
    MOUNTS=()
    if [ "$rc" != 0 ]; then
        echo "test_aarch64_qemu: FAILED (exit status $rc)" >&2
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mounted_below() {  # anything mounted at or below $1?
    findmnt -rn -o TARGET | awk -v p="$(realpath -m "$1")" '$0 == p || index($0, p "/") == 1' \
        | grep -q .
}

safe_rm() {  # rm -rf, but never through a mounted /proc or /dev
    if mounted_below "$1"; then
        die "something is still mounted under $1; unmount it first"
    fi
    rm -rf "$1"
}

mount_into() {  # mount_into <chroot> <mount args...> <target below chroot>
    local target=$1/${*: -1}
    mkdir -p "$target"
    mount "${@:2:$#-2}" "$target"
    MOUNTS+=("$target")
}

# --- host tools --------------------------------------------------------------
host_arch=$(dpkg --print-architecture)
need=()
dpkg -s debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ "$host_arch" != arm64 ]; then
    dpkg -s qemu-user-static >/dev/null 2>&1 || need+=(qemu-user-static)
fi
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    "${APT[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -qq --no-install-recommends "${need[@]}"
fi

PYTEST_ARGS=("${TESTS[@]}")
if [ "$host_arch" != arm64 ]; then
    for t in "${EMULATION_DESELECT[@]}"; do
        PYTEST_ARGS+=(--deselect "$t")
    done
fi

# --- binfmt_misc: the kernel hands aarch64 ELF files to qemu-aarch64 ----------
# The F flag (interpreter opened when registered) is what lets binaries inside
# the chroot run without a copy of QEMU in it; Debian's registration has it.
if [ "$host_arch" != arm64 ]; then
    BINFMT=/proc/sys/fs/binfmt_misc
    if [ ! -e "$BINFMT/register" ]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT" \
            || die "binfmt_misc is not mounted and cannot be (a container without the privilege?)"
    fi
    if [ ! -e "$BINFMT/qemu-aarch64" ]; then
        conf=/usr/lib/binfmt.d/qemu-aarch64.conf
        [ -r "$conf" ] || die "no $conf from qemu-user-static to register"
        say "registering qemu-aarch64 with binfmt_misc"
        cat "$conf" > "$BINFMT/register"
    fi
    grep -qx enabled "$BINFMT/qemu-aarch64" || die "binfmt_misc entry qemu-aarch64 is disabled"
    grep -q '^flags:.*F' "$BINFMT/qemu-aarch64" \
        || die "binfmt_misc entry qemu-aarch64 lacks the F flag (needed inside a chroot)"
fi

# --- the chroot (cached) -----------------------------------------------------
# Built under a temporary name and renamed only when complete, so an interrupted
# bootstrap is never mistaken for a cached one.
if [ ! -e "$ROOT/.fastpe-chroot-ready" ]; then
    say "creating the arm64 bookworm chroot in $ROOT (once; several minutes)"
    safe_rm "$ROOT.partial"
    safe_rm "$ROOT"
    mkdir -p "$(dirname "$ROOT")"
    debootstrap --arch=arm64 --foreign --variant=minbase --include="$PKGS" \
        bookworm "$ROOT.partial" "$MIRROR"
    say "second stage (under QEMU)"
    chroot "$ROOT.partial" /debootstrap/debootstrap --second-stage
    mounted_below "$ROOT.partial" && die "debootstrap left mounts under $ROOT.partial"
    touch "$ROOT.partial/.fastpe-chroot-ready"
    mv "$ROOT.partial" "$ROOT"
fi

mount_into "$ROOT" -t proc proc /proc
mount_into "$ROOT" -t sysfs -o ro sysfs /sys
mount_into "$ROOT" --bind /dev /dev
# A private /dev/shm: POSIX semaphores of multiprocessing live there.
mount_into "$ROOT" -t tmpfs -o mode=1777,size=256m shm /dev/shm
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
if [ -n "${PIP_CERT:-}" ] && [ -r "$PIP_CERT" ]; then
    cp -L "$PIP_CERT" "$ROOT/etc/fastpe-pip-ca.crt"   # a host that needs its own CA for PyPI
fi

# --- the source: what git tracks plus untracked files it does not ignore -----
say "copying the source into the chroot"
safe_rm "$ROOT/src/fastpe"
mkdir -p "$ROOT/src/fastpe"
# (tracked files deleted from the work tree are left out)
# shellcheck disable=SC2016  # $f is the inner shell's
git -C "$REPO" ls-files -z -co --exclude-standard --deduplicate \
    | (cd "$REPO" && xargs -0 -r sh -c 'for f; do if [ -e "$f" ]; then printf "%s\0" "$f"; fi; done' sh) \
    | tar -C "$REPO" --null -T - -cf - | tar -C "$ROOT/src/fastpe" -xf -

# --- inside: venv (cached), build, build_info, tests -------------------------
# A clean environment: the host's pip settings (local indexes, find-links)
# name paths that do not exist in the chroot.
envs=(HOME=/root PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1
      PIP_NO_INPUT=1 PIP_DEFAULT_TIMEOUT=180 HYPOTHESIS_PROFILE=ci FASTPE_EXPECT_OPENMP=1
      "FASTPE_PIP_REQS=${PIP_REQS[*]}")
[ -e "$ROOT/etc/fastpe-pip-ca.crt" ] && envs+=(PIP_CERT=/etc/fastpe-pip-ca.crt)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && envs+=("$v=${!v}")
done

start=$SECONDS
# In the background and waited for, so that a signal to this script reaches the
# trap at once instead of after the build or the tests.
setsid chroot "$ROOT" /usr/bin/env -i "${envs[@]}" /bin/bash -s -- "${PYTEST_ARGS[@]}" <<'INSIDE' &
set -euo pipefail
V=/opt/fastpe-venv
took() { echo "   ($((SECONDS - t0)) s)"; t0=$SECONDS; }
t0=$SECONDS
echo "== $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME"), $(python3 --version), $(gcc --version | head -n1)"
if [ "$(cat "$V/.fastpe-reqs" 2>/dev/null)" != "$FASTPE_PIP_REQS" ]; then
    echo "== venv with: $FASTPE_PIP_REQS (aarch64 wheels from PyPI)"
    rm -rf "$V"
    python3 -m venv "$V"
    "$V/bin/python" -m pip install -q --upgrade pip
    # shellcheck disable=SC2086  # a list of requirements, split on purpose
    "$V/bin/python" -m pip install -q --only-binary=numpy $FASTPE_PIP_REQS
    echo "$FASTPE_PIP_REQS" > "$V/.fastpe-reqs"
    took
fi
cd /src/fastpe
echo "== build (OpenMP as setup.py probes it)"
"$V/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall . >/dev/null
took
cd /tmp   # import the installed package, not the copy of src/
"$V/bin/python" - <<'PY'
import pprint, fastpe
info = fastpe.build_info()
pprint.pprint(info, sort_dicts=False)
assert info["machine"] == "aarch64", info["machine"]
assert info["openmp"], "built without OpenMP"
# aarch64 has neither the AVX-512 writers nor SSE2 streaming stores
assert info["streaming_stores"] == "plain", info["streaming_stores"]
assert not fastpe.kernel._avx512_writers_built
assert not set(info["cpu_features"]) & {"sse2", "avx2", "avx512f"}, info["cpu_features"]
PY
cd /src/fastpe
echo "== pytest $*"
"$V/bin/python" -m pytest -q -p no:cacheprovider -rs "$@"
took
INSIDE
INNER=$!
wait "$INNER"
INNER=
say "aarch64: build and tests passed (${TESTS[*]}), $((SECONDS - start)) s in the chroot"
