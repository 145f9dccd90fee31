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
    static int omp_get_thread_limit(void) { return 1; }
    static int omp_get_num_procs(void) { return 1; }
    #endif
    """
    bint FASTPE_OPENMP
    int FASTPE_OPENMP_VERSION
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_limit() noexcept nogil
    int omp_get_num_procs() noexcept nogil
    void fastpe_omp_barrier() noexcept nogil
