/*
 * timm's rotary frequency rules (fastpe.rope_presets.timm_rotary and
 * timm_dinov3): the only implementation, the same bits on every machine.
 * float64: each frequency the real number of its formula (docs/rope.md),
 * rounded once; float32: timm's torch float32 steps, each rounded to float32.
 */
#ifndef FASTPE_PE_PRESETS_H
#define FASTPE_PE_PRESETS_H

#include <stdint.h>

#include "pe_crmath.h"

/* The rules (n frequencies, i < n, m = max(n - 1, 1)):
 * PIXEL_LINEAR  (1 + (max_res / 2 - 1) i / m) pi          x = max_res
 * PIXEL_LOG     (max_res / 2)^(i / m) pi                  x = max_res
 * LANGUAGE      temperature^(-i / n)                      x = temperature
 * DINO_TEMP     2 pi / temperature^(2i / half)            x = temperature, half = dim // 2
 * DINO_PERIODS  2 pi / (lo (hi / lo)^(i / m))             x = lo, y = hi (min, max period) */
enum {
    PE_TIMM_PIXEL_LINEAR,
    PE_TIMM_PIXEL_LOG,
    PE_TIMM_LANGUAGE,
    PE_TIMM_DINO_TEMP,
    PE_TIMM_DINO_PERIODS
};

/* The n frequencies of rule kind into out (radians per unit of the grid's
 * coordinate), precision FASTPE_PRECISION_FLOAT32 or _FLOAT64; nothing written
 * on a refusal.  Refusals: FASTPE_EINVAL (kind, precision, half, or x / y not
 * finite and > 0: the detail names "max_res", "temperature", "min_period" or
 * "max_period"), FASTPE_ESIZE (n outside 1 .. 2^30), FASTPE_EBASE (frequency
 * index not finite, or below 0 / at most 0 for DINOv3's; why: PE_RULE_FREQUENCY
 * with index and value), FASTPE_ENOMEM.  pow32 (may be NULL: the correctly
 * rounded power) stands in for the float32 powers, all of a rule's at once. */
PE_HIDDEN int pe_timm_frequencies(int kind, int precision, int64_t n, int64_t half, double x,
                                  double y, double *out, pe_rule_detail *why, pe_pow32_fn pow32,
                                  void *pow_ctx);

/* torch.linspace(start, end, steps) in float32 by its CPU kernel's scalar
 * formula: start + step * i up to halfway, end - step * (steps - 1 - i) after,
 * each a fused multiply-add (one rounding), step = (end - start) / (steps - 1)
 * in float32, start and end rounded to float32 first. */
PE_HIDDEN void pe_linspace_f32(double start, double end, int64_t steps, float *out);

#endif /* FASTPE_PE_PRESETS_H */
