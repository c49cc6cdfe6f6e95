/*
 * example_dtype.h - the examples' conversions between f32 and the 16-bit
 * float formats tileopsd stores (bf16, f16), rounding to nearest even as
 * the hardware does. The examples are standalone programs over tileops.h,
 * so they carry these themselves.
 */
#ifndef TILEOPS_EXAMPLE_DTYPE_H
#define TILEOPS_EXAMPLE_DTYPE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Round to nearest even, as hardware converts. */
static inline uint16_t f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* keep NaN a NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/* Round a 32-bit float to IEEE half, to nearest even. */
static inline uint16_t f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	int32_t e = (int32_t)((x >> 23) & 0xff);
	int32_t exp = e - 127 + 15;
	uint32_t mant = x & 0x7fffffu;
	uint32_t half, rem, halfway;
	int shift;

	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00u | (mant != 0 ? 0x200u : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		/* Subnormal half: units of 2^-24. */
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		shift = 14 - exp;
		half = mant >> shift;
		rem = mant & ((1u << shift) - 1u);
		halfway = 1u << (shift - 1);
		if (rem > halfway || (rem == halfway && (half & 1u)))
			half++;
		return (uint16_t)(sign | half);
	}
	half = ((uint32_t)exp << 10) | (mant >> 13);
	rem = mant & 0x1fffu;
	/* A carry out of the mantissa correctly bumps the exponent. */
	if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
		half++;
	return (uint16_t)(sign | half);
}

static inline float f16_to_f32(uint16_t h)
{
	uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
	uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
	uint32_t mant = (uint32_t)h & 0x3ffu;
	float v;

	if (exp == 0) {
		v = ldexpf((float)mant, -24);
		return sign ? -v : v;
	}
	if (exp == 31)
		return bits_f32(sign | 0x7f800000u | (mant << 13));
	return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

#endif
