"""What the machine lets this process use: cores and memory.

Containers and batch schedulers limit a process below what the hardware has
(a cgroup CPU quota, a cgroup memory limit, a Windows job object's limit,
``ulimit -v``).  fastpe sizes its thread teams and refuses oversized requests
against these limits rather than the hardware's, so that it is slowed or
refused, never killed.
"""

from __future__ import annotations

import functools
import os
import sys

from . import kernel as _kernel

_CGROUP_ROOT = "/sys/fs/cgroup"
_PROC_CGROUP = "/proc/self/cgroup"


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
    """The tightest cgroup memory limit of this process in bytes, or None (the C
    library reads the cgroup files, as it does for the CPU quota)."""
    return _kernel._cgroup_limits(_PROC_CGROUP, _CGROUP_ROOT)[1] or None


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
