/*
 * rope.c - CPU references of the rotary position embedding, in place on
 * q [T, Hq, D] and k [T, Hk, D]. Inputs: q, k, positions [T] (i32 or i64),
 * and an optional cos_sin_cache [P, rotary_dim] (cos in the first half of a
 * row, sin in the second). Params: 0 "rotary_dim" (even, <= D), 1 "theta".
 *
 * Without a cache, pair i of a token at position p turns by the angle
 * p * theta^(-2i / rotary_dim). The angle is formed in f32 exactly as the
 * CUDA kernel forms it (the frequency rounded from double to f32, then one
 * f32 product), so both backends rotate by the same angle. A token whose
 * position lies outside the cache is left as it is.
 *
 * neox rotates (x[i], x[i + rotary_dim/2]); gpt-j rotates (x[2i], x[2i+1]).
 * Dims past rotary_dim pass through.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_util.h"

static int64_t position_of(const tk_tensor *pos, int64_t t)
{
	int64_t o = t * (pos->ndim ? pos->stride[0] : 1);

	if (pos->dtype == TK_I32)
		return ((const int32_t *)pos->data)[o];
	return ((const int64_t *)pos->data)[o];
}

static void rope_heads(const tk_tensor *x, int64_t t, int64_t rd, int neox, const double *c,
                       const double *s)
{
	int64_t half = rd / 2;

	for (int64_t h = 0; h < x->shape[1]; h++) {
		int64_t base = t * x->stride[0] + h * x->stride[1];
		for (int64_t i = 0; i < half; i++) {
			int64_t i1 = neox ? i : 2 * i, i2 = neox ? i + half : 2 * i + 1;
			double x1 = cpu_load(x->data, x->dtype, base + i1);
			double x2 = cpu_load(x->data, x->dtype, base + i2);
			cpu_store(x->data, x->dtype, base + i1, (float)(x1 * c[i] - x2 * s[i]));
			cpu_store(x->data, x->dtype, base + i2, (float)(x2 * c[i] + x1 * s[i]));
		}
	}
}

/* cos and sin of every pair of token position p; 0 when p is out of the cache. */
static int rope_angles(const tk_call *call, int64_t p, int64_t rd, double theta, double *c,
                       double *s)
{
	int64_t half = rd / 2;

	if (call->n_in > 3) {
		const tk_tensor *cache = &call->in[3];
		if (p < 0 || p >= cache->shape[0])
			return 0;
		for (int64_t i = 0; i < half; i++) {
			c[i] = cpu_load(cache->data, cache->dtype, p * cache->stride[0] + i);
			s[i] = cpu_load(cache->data, cache->dtype, p * cache->stride[0] + half + i);
		}
		return 1;
	}
	for (int64_t i = 0; i < half; i++) {
		float inv = (float)pow(theta, -(double)(2 * i) / (double)rd);
		float ang = (float)p * inv;
		c[i] = cos((double)ang);
		s[i] = sin((double)ang);
	}
	return 1;
}

static tk_status cpu_rope(const tk_call *call, int neox)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *pos = &call->in[2];
	const tk_tensor *qk[2] = { q, k };
	int64_t rd = (int64_t)tk_param_num(call, 0, 128.0);
	double theta = tk_param_num(call, 1, 10000.0);

	if (call->n_in < 3 || !tk_same_float_dtype(qk, 2) || q->ndim != 3 || k->ndim != 3)
		return TK_ERR_UNSUPPORTED;
	if (pos->dtype != TK_I32 && pos->dtype != TK_I64)
		return TK_ERR_UNSUPPORTED;
	int64_t T = q->shape[0], D = q->shape[2];
	if (k->shape[0] != T || k->shape[2] != D || tk_numel(pos) != T || pos->ndim > 1)
		return TK_ERR_UNSUPPORTED;
	if (rd < 2 || rd % 2 != 0 || rd > D || !tk_last_dim_packed(q) || !tk_last_dim_packed(k))
		return TK_ERR_UNSUPPORTED;
	if (call->n_in > 3) {
		const tk_tensor *cache = &call->in[3];
		if (!tk_same_float_dtype(&cache, 1) || cache->ndim != 2 || cache->shape[1] != rd ||
		    !tk_last_dim_packed(cache))
			return TK_ERR_UNSUPPORTED;
	}
	if (T == 0)
		return TK_OK;
	double *c = malloc(sizeof(double) * (size_t)rd);
	if (c == NULL)
		return TK_ERR_NOMEM;
	for (int64_t t = 0; t < T; t++) {
		if (!rope_angles(call, position_of(pos, t), rd, theta, c, c + rd / 2))
			continue;
		rope_heads(q, t, rd, neox, c, c + rd / 2);
		rope_heads(k, t, rd, neox, c, c + rd / 2);
	}
	free(c);
	return TK_OK;
}

tk_status tk_cpu_rope_neox(const tk_call *call)
{
	return cpu_rope(call, 1);
}

tk_status tk_cpu_rope_gptj(const tk_call *call)
{
	return cpu_rope(call, 0);
}
