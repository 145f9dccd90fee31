/*
 * The C library's tests' one assertion: CHECK(cond, printf-style message)
 * reports a failed condition with its place and counts it, and the test goes on
 * (a test reports every failure, then exits nonzero when `failures` is not 0).
 */
#ifndef FASTPE_TESTS_CHECK_H
#define FASTPE_TESTS_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
