/*
 * quant_fp8.h - the one rounding rule of every fp8 e4m3 quantization
 * reference (quant_fp8.c, quant_fp8_fused.c), so the ops produce the same
 * codes for the same values and scale: q = x * inv rounded to nearest even
 * and saturated, inv = 1 / scale capped at FLT_MAX (a denormal scale's
 * reciprocal overflows, and 0 * inf would be NaN), q = 0 where the scale
 * is not positive.
 */
#ifndef TILEOPS_QUANT_FP8_H
#define TILEOPS_QUANT_FP8_H

#include <float.h>
#include <math.h>

#include "tk_internal.h"

/* e4m3's largest finite value: scale = amax / TK_FP8_MAX saturates nothing. */
#define TK_FP8_MAX 448.0f

static inline float quant_inv(float scale)
{
	return fminf(1.0f / scale, FLT_MAX);
}

static inline uint8_t quantize(float v, float scale, float inv)
{
	return tk_f32_to_fp8e4m3(scale > 0.0f ? v * inv : 0.0f);
}

#endif /* TILEOPS_QUANT_FP8_H */
