/*
 * The 16-bit output formats, float16 (IEEE binary16) and bfloat16, as uint16_t
 * bit patterns (MSVC has no _Float16, and bfloat16 has no C type anywhere).
 *
 * A double becomes a half in two steps, rounded once in effect: first to float
 * with round-to-odd (truncate, then set the last bit when anything was cut
 * off), then to the half with round-to-nearest-even.  Round-to-odd to a format
 * with at least two more bits than the target keeps every bit that decides the
 * second rounding (the sticky bit says "not a halfway point"), so the result
 * is the correctly rounded half of the double (float keeps 24 bits: 13 more
 * than float16, 16 more than bfloat16, at every exponent either one reaches).
 * The second step is what F16C / AVX-512 hardware does, so a vector writer
 * may use it and give the bits of these portable helpers, which are written
 * without branches so that the compiler can vectorise the row loops.
 *
 * NaN keeps its sign and the leading bits of its payload and comes out quiet
 * (what vcvtps2ph does), +-inf stays +-inf, and values beyond the format's
 * largest finite number round to +-inf as round-to-nearest says.
 */
#ifndef FASTPE_PE_HALF_H
#define FASTPE_PE_HALF_H

#include "pe_platform.h"

PE_INLINE uint32_t pe_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

PE_INLINE float pe_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x rounded to float with round-to-odd: the truncated value, its last bit set
 * when x was not exact.  (float)x rounds to nearest; one step back towards zero
 * when that went up in magnitude gives the truncation (bit patterns are ordered
 * like magnitudes, including the step from inf back to FLT_MAX).  A NaN stays a
 * NaN (it compares unequal, so only its last payload bit is set). */
PE_INLINE float pe_f32_odd(double x) {
    float f = (float)x;
    double b = (double)f;
    uint32_t u = pe_f32_bits(f);
    u -= (uint32_t)(fabs(b) > fabs(x));
    u |= (uint32_t)(b != x);
    return pe_bits_f32(u);
}

/* float -> float16, round to nearest even. */
PE_INLINE uint16_t pe_f32_to_f16(float f) {
    uint32_t u = pe_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* below 2^-14 the half is subnormal: adding 0.5 puts the half's grid (2^-24,
     * the ulp of 0.5 in float) on the float's last bit, and the float addition
     * rounds to it, to nearest even; the bits above 0.5's are the half's */
    uint32_t sub = pe_f32_bits(pe_bits_f32(a) + 0.5f) - 0x3f000000u;
    /* normal: rebias the exponent (-112 << 23), add half an ulp of the half less
     * one, plus its last bit (ties to even), and cut; a carry out of the
     * mantissa moves the exponent up, to inf beyond 65504 */
    uint32_t nrm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t big = a > 0x7f800000u ? (0x7e00u | ((a >> 13) & 0x3ffu)) : 0x7c00u;
    uint32_t r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : nrm);
    return (uint16_t)(r | sign);
}

/* float -> bfloat16, round to nearest even (a NaN is made quiet). */
PE_INLINE uint16_t pe_f32_to_bf16(float f) {
    uint32_t u = pe_f32_bits(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/* The halves of a double, rounded once (see above). */
PE_INLINE uint16_t pe_f64_to_f16(double x) { return pe_f32_to_f16(pe_f32_odd(x)); }
PE_INLINE uint16_t pe_f64_to_bf16(double x) { return pe_f32_to_bf16(pe_f32_odd(x)); }

/* A half's value (exact in float, hence in double). */
PE_INLINE float pe_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    /* subnormal: m * 2^-24, exact in float */
    float sub = (float)m * 5.9604644775390625e-8f;
    uint32_t bits = e == 0x1fu ? (0x7f800000u | (m << 13)) : (((e + 112u) << 23) | (m << 13));
    return e == 0 ? pe_bits_f32(pe_f32_bits(sub) | sign) : pe_bits_f32(bits | sign);
}

PE_INLINE float pe_bf16_to_f32(uint16_t h) { return pe_bits_f32((uint32_t)h << 16); }

#endif /* FASTPE_PE_HALF_H */
