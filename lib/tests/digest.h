/*
 * The digest the C library's tests compare with the Python suite's
 * (tests/test_clib.py): the bytes as little-endian 64-bit words w_i (the last
 * one zero-padded), h = nbytes + sum_i (w_i ^ (w_i >> 29)) * (2i + 1) mod 2^64.
 */
#ifndef FASTPE_TESTS_DIGEST_H
#define FASTPE_TESTS_DIGEST_H

#include <stddef.h>
#include <stdint.h>

static uint64_t digest(const void *p, size_t nbytes) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = (uint64_t)nbytes;
    for (size_t i = 0; 8 * i < nbytes; i++) {
        uint64_t w = 0;
        for (size_t k = 0; k < 8 && 8 * i + k < nbytes; k++)
            w |= (uint64_t)b[8 * i + k] << (8 * k);
        h += (w ^ (w >> 29)) * (uint64_t)(2 * i + 1);
    }
    return h;
}

#endif
