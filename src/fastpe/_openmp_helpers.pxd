# The one place fastpe talks to the OpenMP runtime (scikit-learn's pattern).
# When the extension is built without OpenMP (FASTPE_DISABLE_OPENMP=1, or a
# compiler without it) these shims make the same code compile and run serially:
# prange degrades to a plain loop and the runtime queries answer "one thread".
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define FASTPE_OPENMP 1
    #define FASTPE_OPENMP_VERSION _OPENMP
    /* The thread limit (OMP_THREAD_LIMIT) is OpenMP 3.0; MSVC's runtime (vcomp)
       implements 2.0 only, where there is no limit beyond the team size. */
    #if _OPENMP >= 200805
    #define fastpe_omp_thread_limit() omp_get_thread_limit()
    #else
    #define fastpe_omp_thread_limit() 2147483647
    #endif
    /* Cython emits `omp for nowait`; a phase that publishes data to the next
       loop of the same parallel region needs an explicit barrier. */
    #if defined(_MSC_VER)
    #define fastpe_omp_barrier() __pragma(omp barrier)
    #else
    #define fastpe_omp_barrier() _Pragma("omp barrier")
    #endif
    #else
    #define fastpe_omp_barrier() ((void)0)
    #define FASTPE_OPENMP 0
    #define FASTPE_OPENMP_VERSION 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_num_procs(void) { return 1; }
    #define fastpe_omp_thread_limit() 1
    #endif
    """
    bint FASTPE_OPENMP
    int FASTPE_OPENMP_VERSION
    int omp_get_max_threads() noexcept nogil
    int fastpe_omp_thread_limit() noexcept nogil
    int omp_get_num_procs() noexcept nogil
    void fastpe_omp_barrier() noexcept nogil


# Cores this process may run on.  Teams never exceed it: threads beyond the
# cores only slow a fill down, and every thread libgomp cannot create (a task
# limit such as `ulimit -u` or a container's pids.max) aborts the whole process
# from inside the runtime, with no exception.  Linux: the affinity mask (taskset,
# cpusets), read per call since it can change; the CPU quota of a cgroup is read
# by the kernel module at import (fastpe_set_cpu_quota).  Elsewhere: the
# runtime's processor count.
cdef extern from *:
    """
    #if defined(__linux__)
    #ifndef _GNU_SOURCE
    #define _GNU_SOURCE
    #endif
    #include <sched.h>
    #endif
    static int fastpe_cpu_quota = 0;   /* 0: no quota; written once, at import */
    static void fastpe_set_cpu_quota(int n) { fastpe_cpu_quota = n > 0 ? n : 0; }
    static int fastpe_usable_cpus(void) {
        int n = 0;
    #if defined(__linux__) && defined(CPU_COUNT)
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
    #endif
        if (n < 1) n = omp_get_num_procs();
        if (fastpe_cpu_quota > 0 && fastpe_cpu_quota < n) n = fastpe_cpu_quota;
        return n < 1 ? 1 : n;
    }
    """
    void fastpe_set_cpu_quota(int n) noexcept
    int fastpe_usable_cpus() noexcept nogil


# Fork guard.  GNU libgomp's thread pool does not survive fork(): the child has
# only the forking thread, but the pool's bookkeeping still lists the parent's
# workers, so a 2+-thread team in the child waits for them forever (scikit-learn
# #23823, PyTorch #45198).  A pthread_atfork child handler (installed once, at
# import) marks the child; the kernel then runs it with a 1-thread team, which
# libgomp serves from the calling thread without touching the pool.  The mark is
# inherited by grandchildren.  spawn/forkserver/exec start fresh processes and
# keep their parallelism.  Not on Windows (no fork).  See docs/reliability.md.
cdef extern from *:
    """
    #if defined(_WIN32)
    static int fastpe_install_fork_guard(void) { return 0; }
    static int fastpe_forked_child(void) { return 0; }
    #else
    #include <pthread.h>
    static volatile int fastpe_forked_child_flag = 0;
    static int fastpe_fork_guard_installed = 0;
    static void fastpe_on_fork_child(void) { fastpe_forked_child_flag = 1; }
    /* Called with the GIL held (module init), so the once-check needs no lock. */
    static int fastpe_install_fork_guard(void) {
        if (fastpe_fork_guard_installed) return 0;
        fastpe_fork_guard_installed = 1;
        return pthread_atfork(NULL, NULL, fastpe_on_fork_child);
    }
    static int fastpe_forked_child(void) { return fastpe_forked_child_flag; }
    #endif
    """
    int fastpe_install_fork_guard() noexcept
    int fastpe_forked_child() noexcept nogil
