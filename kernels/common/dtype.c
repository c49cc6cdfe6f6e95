/*
 * dtype.c - dtype and tensor helpers and the float conversions of the
 * L1 kernels (the table of kernels is registry.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tileops_kernels.h"
#include "tk_internal.h"

/* ---- dtypes and tensors ------------------------------------------------ */

static const struct {
	const char *name;
	size_t size;
} dtype_info[TK_DTYPE_COUNT] = {
	[TK_DTYPE_INVALID] = { "invalid", 0 },
	[TK_F32] = { "f32", 4 },
	[TK_F16] = { "f16", 2 },
	[TK_BF16] = { "bf16", 2 },
	[TK_I32] = { "i32", 4 },
	[TK_I64] = { "i64", 8 },
	[TK_U8] = { "u8", 1 },
	[TK_FP8_E4M3] = { "fp8_e4m3", 1 },
};

size_t tk_dtype_size(tk_dtype dt)
{
	if ((int)dt <= TK_DTYPE_INVALID || dt >= TK_DTYPE_COUNT)
		return 0;
	return dtype_info[dt].size;
}

const char *tk_dtype_name(tk_dtype dt)
{
	if ((int)dt <= TK_DTYPE_INVALID || dt >= TK_DTYPE_COUNT)
		return "invalid";
	return dtype_info[dt].name;
}

tk_dtype tk_dtype_parse(const char *name)
{
	if (name == NULL)
		return TK_DTYPE_INVALID;
	for (int dt = TK_DTYPE_INVALID + 1; dt < TK_DTYPE_COUNT; dt++) {
		if (strcmp(name, dtype_info[dt].name) == 0)
			return (tk_dtype)dt;
	}
	return TK_DTYPE_INVALID;
}

int64_t tk_numel(const tk_tensor *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

void tk_set_contiguous(tk_tensor *t)
{
	int64_t s = 1;

	for (int d = t->ndim - 1; d >= 0; d--) {
		t->stride[d] = s;
		s *= t->shape[d];
	}
}

int tk_is_contiguous(const tk_tensor *t)
{
	int64_t s = 1;

	/* Strides of size-1 dims never move the pointer, so they may be anything. */
	for (int d = t->ndim - 1; d >= 0; d--) {
		if (t->shape[d] != 1 && t->stride[d] != s)
			return 0;
		s *= t->shape[d];
	}
	return 1;
}

/* ---- float conversions ------------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float f32_from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * Round the 23-bit f32 mantissa `mant` to `bits` bits, nearest even. The
 * result may be 1 << bits (a carry into the exponent), which callers add
 * to the biased exponent field so it carries naturally.
 */
static uint32_t round_mantissa(uint32_t mant, int bits)
{
	int drop = 23 - bits;
	uint32_t keep = mant >> drop;
	uint32_t rem = mant & ((1u << drop) - 1);
	uint32_t half = 1u << (drop - 1);

	if (rem > half || (rem == half && (keep & 1)))
		keep++;
	return keep;
}

float tk_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;
	float v;

	if (exp == 0x1f)
		return f32_from_bits(sign | 0x7f800000 | (mant << 13));
	if (exp == 0)
		v = ldexpf((float)mant, -24); /* zero or subnormal */
	else
		v = ldexpf((float)(mant | 0x400), (int)exp - 25);
	return sign ? -v : v;
}

uint16_t tk_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;

	if (a > 0x7f800000) /* NaN: keep it quiet and keep the top payload bits */
		return sign | 0x7e00 | (uint16_t)((a >> 13) & 0x1ff);
	if (a >= 0x477ff000) /* 65520 and above round to infinity */
		return sign | 0x7c00;
	if (a < 0x38800000) { /* below 2^-14: subnormal; scaling by 2^24 is exact */
		float m = rintf(f32_from_bits(a) * 16777216.0f);
		return sign | (uint16_t)m;
	}
	uint32_t exp = (a >> 23) - 127 + 15;
	return sign | (uint16_t)((exp << 10) + round_mantissa(a & 0x7fffff, 10));
}

float tk_bf16_to_f32(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

uint16_t tk_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x0040);
	/* Nearest even; overflow past the largest finite carries into infinity. */
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/*
 * fp8 e4m3 in its "fn" form: bias 7, no infinities, 0x7f/0xff are NaN and
 * the largest finite value is 448. Values beyond it, infinities included,
 * saturate to +-448 (the convention of serving stacks that store
 * activations in this format).
 */
float tk_fp8e4m3_to_f32(uint8_t v)
{
	uint32_t exp = (v >> 3) & 0xf;
	uint32_t mant = v & 0x7;
	float r;

	if ((v & 0x7f) == 0x7f)
		return f32_from_bits(((uint32_t)(v & 0x80) << 24) | 0x7fc00000);
	if (exp == 0)
		r = ldexpf((float)mant, -9);
	else
		r = ldexpf((float)(mant | 0x8), (int)exp - 10);
	return (v & 0x80) ? -r : r;
}

uint8_t tk_f32_to_fp8e4m3(float f)
{
	uint32_t u = f32_bits(f);
	uint8_t sign = (uint8_t)((u >> 24) & 0x80);
	uint32_t a = u & 0x7fffffff;

	if (a > 0x7f800000)
		return sign | 0x7f;
	if (a >= 0x43e00000) /* 448 and beyond, infinity included */
		return sign | 0x7e;
	if (a < 0x3c800000) { /* below 2^-6: subnormal; scaling by 2^9 is exact */
		float m = rintf(f32_from_bits(a) * 512.0f);
		return sign | (uint8_t)m;
	}
	uint32_t exp = (a >> 23) - 127 + 7;
	uint32_t r = (exp << 3) + round_mantissa(a & 0x7fffff, 3);
	return sign | (uint8_t)(r > 0x7e ? 0x7e : r);
}
