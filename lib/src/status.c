/*
 * The error detail: which argument the last failing call on this thread
 * refused, and why (include/fastpe/fastpe.h, fastpe_last_error).  One record
 * per thread, so concurrent callers never see each other's failures; only a
 * failing call writes it (like errno), so a successful call leaves the last
 * failure readable.
 */
#include "pe_lib.h"
#include "fastpe/fastpe.h"

#include <math.h>

/* Thread-local storage in each toolchain the library builds with: MSVC (whose C
 * is not C11 in its OpenMP 2.0 world) spells it __declspec(thread); C11
 * compilers _Thread_local (mingw-w64's gcc through its emulated TLS); older
 * gcc and clang __thread. */
#if defined(_MSC_VER) && !defined(__clang__)
#define PE_THREAD_LOCAL __declspec(thread)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PE_THREAD_LOCAL _Thread_local
#else
#define PE_THREAD_LOCAL __thread
#endif

static PE_THREAD_LOCAL fastpe_error detail = {0, NULL, -1, 0.0, 0.0};
/* set by pe_fail during the current call: the entry point's exit then keeps
   the specific detail rather than writing the bare code */
static PE_THREAD_LOCAL int detail_fresh = 0;

int pe_fail(int code, const char *argument, int64_t index, double value, double limit) {
    detail.code = code;
    detail.argument = argument;
    detail.index = index;
    detail.value = value;
    detail.limit = limit;
    detail_fresh = 1;
    return code;
}

int pe_settle(int ret) {
    if (ret != FASTPE_OK && !detail_fresh)
        pe_fail(ret, NULL, -1, NAN, NAN);
    detail_fresh = 0;
    return ret;
}

FASTPE_API int fastpe_last_error(fastpe_error *out) {
    if (out != NULL)
        *out = detail;
    return detail.code;
}
