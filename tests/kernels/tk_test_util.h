/*
 * tk_test_util.h - host tensors, random fills and error norms shared by the
 * kernel tests (CPU references here, CUDA kernels in tests/gpu).
 */
#ifndef TILEOPS_TK_TEST_UTIL_H
#define TILEOPS_TK_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tileops_kernels.h"

/* xorshift64*: reproducible, and every test draws its own fresh values. */
static inline uint64_t tt_rand_u64(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static inline double tt_rand_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(tt_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * A host tensor of `ndim` dims. `pad` extra elements follow every row (the
 * last dim), so pad > 0 gives row strides larger than the row; outer dims
 * are packed over the padded rows. The buffer is zero-filled.
 */
static inline tk_tensor tt_tensor(tk_dtype dt, int ndim, const int64_t *shape, int64_t pad)
{
	tk_tensor t;
	int64_t s = 1, n;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = ndim;
	for (int d = ndim - 1; d >= 0; d--) {
		t.shape[d] = shape[d];
		t.stride[d] = s;
		s *= shape[d] + (d == ndim - 1 ? pad : 0);
	}
	n = s > 0 ? s : 1;
	t.data = calloc((size_t)n, tk_dtype_size(dt));
	return t;
}

/* Bytes spanned by t's buffer as tt_tensor laid it out. */
static inline size_t tt_span_bytes(const tk_tensor *t)
{
	int64_t hi = 0;

	for (int d = 0; d < t->ndim; d++) {
		if (t->shape[d] == 0)
			return 0;
		hi += (t->shape[d] - 1) * t->stride[d];
	}
	return (size_t)(hi + 1) * tk_dtype_size(t->dtype);
}

/* Offset in elements of logical (row-major) element i. */
static inline int64_t tt_offset(const tk_tensor *t, int64_t i)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		off += (i % t->shape[d]) * t->stride[d];
		i /= t->shape[d];
	}
	return off;
}

static inline double tt_get(const tk_tensor *t, int64_t i)
{
	int64_t o = tt_offset(t, i);

	switch (t->dtype) {
	case TK_F16:
		return tk_f16_to_f32(((const uint16_t *)t->data)[o]);
	case TK_BF16:
		return tk_bf16_to_f32(((const uint16_t *)t->data)[o]);
	case TK_I32:
		return ((const int32_t *)t->data)[o];
	case TK_I64:
		return (double)((const int64_t *)t->data)[o];
	case TK_U8:
		return ((const uint8_t *)t->data)[o];
	case TK_FP8_E4M3:
		return tk_fp8e4m3_to_f32(((const uint8_t *)t->data)[o]);
	default:
		return ((const float *)t->data)[o];
	}
}

static inline void tt_set(tk_tensor *t, int64_t i, double v)
{
	int64_t o = tt_offset(t, i);

	switch (t->dtype) {
	case TK_F16:
		((uint16_t *)t->data)[o] = tk_f32_to_f16((float)v);
		break;
	case TK_BF16:
		((uint16_t *)t->data)[o] = tk_f32_to_bf16((float)v);
		break;
	case TK_I32:
		((int32_t *)t->data)[o] = (int32_t)v;
		break;
	case TK_I64:
		((int64_t *)t->data)[o] = (int64_t)v;
		break;
	case TK_U8:
		((uint8_t *)t->data)[o] = (uint8_t)v;
		break;
	case TK_FP8_E4M3:
		((uint8_t *)t->data)[o] = tk_f32_to_fp8e4m3((float)v);
		break;
	default:
		((float *)t->data)[o] = (float)v;
		break;
	}
}

static inline void tt_fill(tk_tensor *t, uint64_t *rng, double lo, double hi)
{
	int64_t n = tk_numel(t);

	for (int64_t i = 0; i < n; i++)
		tt_set(t, i, tt_rand_uniform(rng, lo, hi));
}

/* Fill every byte of t's buffer (padding too) with 0xff: NaN in every float dtype. */
static inline void tt_poison(tk_tensor *t)
{
	memset(t->data, 0xff, tt_span_bytes(t));
}

/* ||got - want|| / ||want|| over the logical elements (want in double). */
static inline double tt_rel_err(const tk_tensor *got, const double *want)
{
	double num = 0.0, den = 0.0;
	int64_t n = tk_numel(got);

	for (int64_t i = 0; i < n; i++) {
		double g = tt_get(got, i);
		if (isnan(g))
			return INFINITY;
		num += (g - want[i]) * (g - want[i]);
		den += want[i] * want[i];
	}
	if (den == 0.0)
		return sqrt(num);
	return sqrt(num / den);
}

/* Number of logical elements of got whose bytes differ from want's (same layout). */
static inline int64_t tt_count_diff(const tk_tensor *got, const tk_tensor *want)
{
	size_t es = tk_dtype_size(got->dtype);
	int64_t n = tk_numel(got), bad = 0;

	for (int64_t i = 0; i < n; i++) {
		size_t o = (size_t)tt_offset(got, i) * es;
		if (memcmp((const char *)got->data + o, (const char *)want->data + o, es) != 0)
			bad++;
	}
	return bad;
}

static inline void tt_free(tk_tensor *t)
{
	free(t->data);
	t->data = NULL;
}

static inline tk_param tt_param_float(double v)
{
	tk_param p = { .kind = TK_PARAM_FLOAT, .v.f = v };
	return p;
}

static inline tk_param tt_param_int(int64_t v)
{
	tk_param p = { .kind = TK_PARAM_INT, .v.i = v };
	return p;
}

static inline tk_param tt_param_bool(int v)
{
	tk_param p = { .kind = TK_PARAM_BOOL, .v.b = v };
	return p;
}

static const tk_dtype tt_float_dtypes[] = { TK_F32, TK_F16, TK_BF16 };

#endif /* TILEOPS_TK_TEST_UTIL_H */
