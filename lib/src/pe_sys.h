/*
 * What the library needs from the system, in one place: the OpenMP shims
 * (a serial build compiles the same code, with one-thread answers), a mutex
 * that needs no interpreter and can be initialised statically, and a
 * run-once.  Nothing here is exported.
 */
#ifndef FASTPE_PE_SYS_H
#define FASTPE_PE_SYS_H

#include "kernels/pe_platform.h"

#ifdef _OPENMP
#include <omp.h>
#define FASTPE_OPENMP         1
#define FASTPE_OPENMP_VERSION _OPENMP
/* The thread limit (OMP_THREAD_LIMIT) is OpenMP 3.0; MSVC's runtime (vcomp)
   implements 2.0 only, where there is no limit beyond the team size. */
#if _OPENMP >= 200805
#define pe_omp_thread_limit() omp_get_thread_limit()
#else
#define pe_omp_thread_limit() 2147483647
#endif
#define pe_omp_max_threads() omp_get_max_threads()
#define pe_omp_num_procs()   omp_get_num_procs()
#define pe_omp_thread_num()  omp_get_thread_num()
#else
#define FASTPE_OPENMP         0
#define FASTPE_OPENMP_VERSION 0
#define pe_omp_thread_limit() 1
#define pe_omp_max_threads()  1
#define pe_omp_num_procs()    1
#define pe_omp_thread_num()   0
#endif

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
typedef SRWLOCK pe_mutex;
#define PE_MUTEX_INIT SRWLOCK_INIT
PE_INLINE void pe_mutex_init(pe_mutex *m) { InitializeSRWLock(m); }
PE_INLINE void pe_mutex_destroy(pe_mutex *m) { (void)m; }
PE_INLINE void pe_mutex_lock(pe_mutex *m) { AcquireSRWLockExclusive(m); }
PE_INLINE void pe_mutex_unlock(pe_mutex *m) { ReleaseSRWLockExclusive(m); }
PE_INLINE int pe_mutex_trylock(pe_mutex *m) { return TryAcquireSRWLockExclusive(m) != 0; }
#else
#include <pthread.h>
typedef pthread_mutex_t pe_mutex;
#define PE_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
PE_INLINE void pe_mutex_init(pe_mutex *m) { pthread_mutex_init(m, NULL); }
PE_INLINE void pe_mutex_destroy(pe_mutex *m) { pthread_mutex_destroy(m); }
PE_INLINE void pe_mutex_lock(pe_mutex *m) { pthread_mutex_lock(m); }
PE_INLINE void pe_mutex_unlock(pe_mutex *m) { pthread_mutex_unlock(m); }
PE_INLINE int pe_mutex_trylock(pe_mutex *m) { return pthread_mutex_trylock(m) == 0; }
#endif

/* The tunables (the fill's thresholds, the cgroup quota) are written by the
 * test setters while other threads' calls may read them: relaxed atomics make
 * that defined (a call sees the old value or the new one, never a torn one),
 * at the cost of a plain load.  C11 <stdatomic.h> where the compiler has it;
 * elsewhere (MSVC's C, C++) volatile: aligned 4- and 8-byte values are read
 * and written whole on the platforms those builds target. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__) &&   \
    !defined(__cplusplus)
#include <stdatomic.h>
#define PE_RELAXED(T)          _Atomic T
#define pe_relaxed_load(p)     atomic_load_explicit((p), memory_order_relaxed)
#define pe_relaxed_store(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#else
#define PE_RELAXED(T)          volatile T
#define pe_relaxed_load(p)     (*(p))
#define pe_relaxed_store(p, v) (*(p) = (v))
#endif

#endif /* FASTPE_PE_SYS_H */
