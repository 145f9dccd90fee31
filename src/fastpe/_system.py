"""What the machine lets this process use: cores and memory.

Containers and batch schedulers limit a process below what the hardware has
(a cgroup CPU quota, a cgroup memory limit, a Windows job object's limit,
``ulimit -v``).  fastpe sizes its thread teams and refuses oversized requests
against these limits rather than the hardware's, so that it is slowed or
refused, never killed.
"""

from __future__ import annotations

import functools
import math
import os
import sys

# Requests below this many bytes skip the memory-limit look-up (a small call
# stays cheap; a malloc that fails this small still raises MemoryError cleanly).
SMALL_REQUEST = 64 << 20

_CGROUP_ROOT = "/sys/fs/cgroup"
_PROC_CGROUP = "/proc/self/cgroup"


def _cgroup_dirs(controller: str) -> list[str]:
    """The cgroup directories of this process for ``controller``, own first, then
    its ancestors (a parent's limit applies too).  cgroup v2 and v1 layouts."""
    try:
        with open(_PROC_CGROUP, encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    dirs = []
    for line in lines:
        names, _, path = line.partition(":")[2].partition(":")
        if names == "":  # v2 unified hierarchy
            base = _CGROUP_ROOT
        elif controller in names.split(","):  # v1: one mount per controller set
            base = os.path.join(_CGROUP_ROOT, names)
            if not os.path.isdir(base):
                base = os.path.join(_CGROUP_ROOT, controller)
        else:
            continue
        parts = [p for p in path.split("/") if p and p != ".."]
        for i in range(len(parts), -1, -1):
            dirs.append(os.path.join(base, *parts[:i]))
    return dirs


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


@functools.lru_cache(maxsize=1)
def cgroup_cpu_quota() -> int:
    """Cores' worth of CPU time the cgroup quota allows (rounded up), 0 if none."""
    best = 0
    for d in _cgroup_dirs("cpu"):
        quota: str | None = None
        period: str | None = None
        text = _read(os.path.join(d, "cpu.max"))  # v2: "max 100000" or "Q P"
        if text:
            head, _, tail = text.partition(" ")
            if head != "max":
                quota, period = head, tail or "100000"
        else:  # v1
            quota = _read(os.path.join(d, "cpu.cfs_quota_us"))
            period = _read(os.path.join(d, "cpu.cfs_period_us"))
        if quota is None or period is None:
            continue
        try:
            q, p = int(quota), int(period)
        except ValueError:
            continue
        if q > 0 and p > 0:
            n = max(1, math.ceil(q / p))
            best = n if best == 0 else min(best, n)
    return best


@functools.lru_cache(maxsize=1)
def physical_memory() -> int | None:
    """Bytes of RAM on this machine, or None where the OS does not say."""
    if sys.platform == "win32":  # no os.sysconf there
        return _windows_physical_memory()
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _windows_physical_memory() -> int | None:
    if sys.platform != "win32":  # (for mypy, which checks the rest for Windows only)
        return None
    import ctypes
    from ctypes import wintypes

    class MEMORYSTATUSEX(ctypes.Structure):
        _fields_ = [
            ("dwLength", wintypes.DWORD),
            ("dwMemoryLoad", wintypes.DWORD),
            ("ullTotalPhys", ctypes.c_ulonglong),
            ("ullAvailPhys", ctypes.c_ulonglong),
            ("ullTotalPageFile", ctypes.c_ulonglong),
            ("ullAvailPageFile", ctypes.c_ulonglong),
            ("ullTotalVirtual", ctypes.c_ulonglong),
            ("ullAvailVirtual", ctypes.c_ulonglong),
            ("ullAvailExtendedVirtual", ctypes.c_ulonglong),
        ]

    status = MEMORYSTATUSEX()
    status.dwLength = ctypes.sizeof(MEMORYSTATUSEX)
    try:
        ok = ctypes.WinDLL("kernel32").GlobalMemoryStatusEx(ctypes.byref(status))
    except (OSError, AttributeError):
        return None
    return int(status.ullTotalPhys) if ok and status.ullTotalPhys > 0 else None


# JOBOBJECT_EXTENDED_LIMIT_INFORMATION's class and its two memory-limit flags.
_JOB_EXTENDED_LIMITS = 9
_JOB_LIMIT_PROCESS_MEMORY = 0x100
_JOB_LIMIT_JOB_MEMORY = 0x200


def windows_job_memory_limit() -> int | None:
    """The tightest memory limit of the Windows job object this process runs in
    (the process's or the whole job's committed memory), or None: Windows'
    counterpart of a cgroup memory limit.  Read on every call (a process can be
    put in a job at any time)."""
    if sys.platform != "win32":
        return None
    import ctypes
    from ctypes import wintypes

    class BASIC(ctypes.Structure):
        _fields_ = [
            ("PerProcessUserTimeLimit", ctypes.c_int64),
            ("PerJobUserTimeLimit", ctypes.c_int64),
            ("LimitFlags", wintypes.DWORD),
            ("MinimumWorkingSetSize", ctypes.c_size_t),
            ("MaximumWorkingSetSize", ctypes.c_size_t),
            ("ActiveProcessLimit", wintypes.DWORD),
            ("Affinity", ctypes.c_size_t),
            ("PriorityClass", wintypes.DWORD),
            ("SchedulingClass", wintypes.DWORD),
        ]

    class EXTENDED(ctypes.Structure):
        _fields_ = [
            ("BasicLimitInformation", BASIC),
            ("IoInfo", ctypes.c_ulonglong * 6),
            ("ProcessMemoryLimit", ctypes.c_size_t),
            ("JobMemoryLimit", ctypes.c_size_t),
            ("PeakProcessMemoryUsed", ctypes.c_size_t),
            ("PeakJobMemoryUsed", ctypes.c_size_t),
        ]

    info = EXTENDED()
    try:
        query = ctypes.WinDLL("kernel32").QueryInformationJobObject
        # a NULL handle means the job of this process; it fails outside any job
        ok = query(None, _JOB_EXTENDED_LIMITS, ctypes.byref(info), ctypes.sizeof(info), None)
    except (OSError, AttributeError):
        return None
    if not ok:
        return None
    flags = info.BasicLimitInformation.LimitFlags
    limits = []
    if flags & _JOB_LIMIT_PROCESS_MEMORY and info.ProcessMemoryLimit:
        limits.append(int(info.ProcessMemoryLimit))
    if flags & _JOB_LIMIT_JOB_MEMORY and info.JobMemoryLimit:
        limits.append(int(info.JobMemoryLimit))
    return min(limits) if limits else None


@functools.lru_cache(maxsize=1)
def cgroup_memory_limit() -> int | None:
    """The tightest cgroup memory limit of this process in bytes, or None."""
    best = None
    for d in _cgroup_dirs("memory"):
        text = _read(os.path.join(d, "memory.max")) or _read(
            os.path.join(d, "memory.limit_in_bytes")
        )
        try:
            n = int(text or "")
        except ValueError:
            continue  # "max", or unreadable
        if 0 < n < 2**62:  # v1 says "no limit" as ~2^63
            best = n if best is None else min(best, n)
    return best


def memory_limit() -> tuple[int, str] | None:
    """(bytes, what) of the tightest memory limit on this process: the machine's
    RAM, a cgroup memory limit, a Windows job object's limit or the address-space
    rlimit; None if none is known.  The rlimit and the job's limit are read on
    every call (a program may lower them at any time)."""
    limits = []
    ram = physical_memory()
    if ram is not None:
        limits.append((ram, "this machine's RAM"))
    cg = cgroup_memory_limit()
    if cg is not None:
        limits.append((cg, "this process's cgroup memory limit"))
    job = windows_job_memory_limit()
    if job is not None:
        limits.append((job, "this process's job object memory limit"))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append((soft, "this process's address-space limit (ulimit -v)"))
    except (ImportError, OSError, ValueError, AttributeError):
        pass
    return min(limits) if limits else None
