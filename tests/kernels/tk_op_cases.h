/*
 * tk_op_cases.h - calls of every op on fresh random inputs, for the tests
 * that run each op the same way on both backends (tests/gpu) or over
 * special shapes (empty tensors).
 *
 * tc_build reads (rows, width) the way the op reads its input: x [rows,
 * width] for elementwise, row and reduction ops (x [rows, 2 width] for the
 * gated ones), q [rows tokens, 3 heads, width] for rope (width rounded up
 * to even), NC[D]HW images with H = rows and W = width for pooling (batch 0
 * when rows is 0). `pad` extra elements follow every row of every tensor
 * with a last dim wider than 1. `variant` picks op-specific forms: params
 * (gelu's approximate, a reduction dim of 0 or keepdim), optional inputs
 * (layer_norm without bias, rope with a cos/sin cache, a given fp8 scale)
 * and pooling windows with padding, dilation and ceil_mode.
 */
#ifndef TILEOPS_TK_OP_CASES_H
#define TILEOPS_TK_OP_CASES_H

#include <string.h>

#include "kernels/tk_test_util.h"

#define TC_VARIANTS 3

static const char *const tc_unary_ops[] = { "exp",        "log",   "sqrt",       "rsqrt",
	                                    "abs",        "neg",   "reciprocal", "sigmoid",
	                                    "tanh",       "erf",   "relu",       "gelu",
	                                    "silu",       "mish",  "softplus",   "hardswish",
	                                    "leaky_relu", "clamp", NULL };
static const char *const tc_binary_ops[] = { "add",     "sub",     "mul", "div",
	                                     "maximum", "minimum", "pow", NULL };

static inline int tc_in_list(const char *const *list, const char *op)
{
	for (; *list != NULL; list++) {
		if (strcmp(*list, op) == 0)
			return 1;
	}
	return 0;
}

static inline int tc_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The input range an op is defined on (its domain), for random fills. */
static inline void tc_range(const char *op, int input, double *lo, double *hi)
{
	*lo = -3.0;
	*hi = 3.0;
	if (!strcmp(op, "log") || !strcmp(op, "sqrt") || !strcmp(op, "rsqrt") ||
	    !strcmp(op, "reciprocal")) {
		*lo = 0.1;
		*hi = 4.0;
	} else if ((!strcmp(op, "div") && input == 1) || !strcmp(op, "pow")) {
		*lo = 0.5;
		*hi = input == 1 ? 2.5 : 3.0;
	} else if (!strcmp(op, "sum") || !strcmp(op, "mean")) {
		/*
		 * Positive, so a sum is well conditioned and the relative error
		 * measures the kernel's accumulation: over [-3, 3] a row of 4096 can
		 * sum to nearly zero, and an f32 sum of one such row in another
		 * order came out 1.27e-5 from exact (H200, against 1e-5). Small, so
		 * that the sum of the widest row (262144) stays within f16 (about
		 * 35000, at most 65536 * 0.999): over [0.25, 3] it overflowed to
		 * infinity (H200).
		 */
		*lo = 1.0 / 64.0;
		*hi = 0.25;
	}
}

static inline int64_t tc_pooled(int64_t len, int64_t k, int64_t s, int64_t p, int64_t dil,
                                int ceil_mode)
{
	int64_t num = len + 2 * p - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
	int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;

	if (ceil_mode && (o - 1) * s >= len + p)
		o--;
	return o;
}

static inline void tc_pool(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width,
                           int64_t pad, int variant)
{
	int nsp = op[strlen(op) - 2] - '0', is_max = tc_starts(op, "max");
	int64_t shape[5], oshape[5], k = variant ? 3 : 2, s = 2, p = variant ? 1 : 0;
	int64_t dil = is_max && variant == 2 ? 2 : 1;
	int ceil_mode = variant != 0;
	int np = 0;

	shape[0] = rows == 0 ? 0 : 2;
	shape[1] = 3;
	for (int d = 0; d < nsp; d++)
		shape[2 + d] = d == nsp - 1 ? width : (d == nsp - 2 ? (rows ? rows : 4) : 3);
	memcpy(oshape, shape, sizeof(shape));
	for (int d = 0; d < nsp; d++)
		oshape[2 + d] = tc_pooled(shape[2 + d], k, s, p, dil, ceil_mode);
	c->in[0] = tt_tensor(dt, nsp + 2, shape, pad);
	c->out[0] = tt_tensor(dt, nsp + 2, oshape, pad ? pad + 1 : 0);
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(k);
	np += nsp;
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(s);
	np += nsp;
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(p);
	np += nsp;
	if (is_max) {
		for (int d = 0; d < nsp; d++)
			c->params[np + d] = tt_param_int(dil);
		np += nsp;
	}
	c->params[np++] = tt_param_bool(ceil_mode);
	if (!is_max)
		c->params[np++] = tt_param_bool(variant != 1);
	c->n_params = np;
	c->n_in = 1;
	c->n_out = 1;
}

static inline void tc_rope(tk_call *c, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                           int variant, uint64_t *rng)
{
	int64_t D = width + (width & 1), rd = variant == 1 && D >= 4 ? (D / 2) & ~(int64_t)1 : D;
	int64_t sq[3] = { rows, 3, D }, sk[3] = { rows, 2, D }, sp[1] = { rows };
	int64_t sc[2] = { 4096, rd };

	c->in[0] = tt_tensor(dt, 3, sq, pad);
	c->in[1] = tt_tensor(dt, 3, sk, pad ? pad + 2 : 0);
	c->in[2] = tt_tensor(variant == 2 ? TK_I64 : TK_I32, 1, sp, 0);
	c->n_in = 3;
	for (int64_t t = 0; t < rows; t++)
		tt_set(&c->in[2], t, (double)(tt_rand_u64(rng) % 4096));
	if (variant == 1) {
		/* A real cache, in f32 whatever q's dtype: cos in the first half, sin in the second. */
		c->in[3] = tt_tensor(TK_F32, 2, sc, 0);
		for (int64_t p = 0; p < sc[0]; p++) {
			for (int64_t i = 0; i < rd / 2; i++) {
				double a = (double)p * pow(500000.0, -(double)(2 * i) / (double)rd);
				tt_set(&c->in[3], p * rd + i, cos(a));
				tt_set(&c->in[3], p * rd + rd / 2 + i, sin(a));
			}
		}
		c->n_in = 4;
	}
	c->n_out = 0;
	c->n_params = 2;
	c->params[0] = tt_param_int(rd);
	c->params[1] = tt_param_float(variant == 2 ? 500000.0 : 10000.0);
}

/*
 * Build a call of `op` (inputs filled from rng, outputs zeroed). Returns 0
 * when the op has no case here (gemm has its own tests).
 */
static inline int tc_build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width,
                           int64_t pad, int variant, uint64_t *rng)
{
	int64_t shape[2] = { rows, width }, w1[1] = { width };
	int64_t opad = pad ? pad + 2 : 0;
	double lo, hi;

	memset(c, 0, sizeof(*c));
	c->n_in = 1;
	c->n_out = 1;
	if (tc_in_list(tc_unary_ops, op)) {
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (!strcmp(op, "gelu")) {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant & 1);
		} else if (!strcmp(op, "softplus")) {
			c->n_params = 2;
			c->params[0] = tt_param_float(variant ? 2.0 : 1.0);
			c->params[1] = tt_param_float(variant ? 3.0 : 20.0);
		} else if (!strcmp(op, "leaky_relu")) {
			c->n_params = 1;
			c->params[0] = tt_param_float(variant ? 0.2 : 0.01);
		} else if (!strcmp(op, "clamp")) {
			c->n_params = 2;
			c->params[0] = tt_param_float(-1.5);
			c->params[1] = tt_param_float(variant ? INFINITY : 0.75);
		}
	} else if (tc_in_list(tc_binary_ops, op)) {
		c->n_in = 2;
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->in[1] =
		        variant == 1 ? tt_tensor(dt, 1, w1, 0) : tt_tensor(dt, 2, shape, pad + 1);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
	} else if (!strcmp(op, "silu_and_mul") || !strcmp(op, "gelu_and_mul")) {
		int64_t s2[2] = { rows, 2 * width };
		c->in[0] = tt_tensor(dt, 2, s2, pad);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (op[0] == 'g') {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant & 1);
		}
	} else if (strstr(op, "norm") != NULL) {
		int fused = tc_starts(op, "fused"), layer = strstr(op, "layer") != NULL;
		int k = 1;
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		if (fused)
			c->in[k++] = tt_tensor(dt, 2, shape, pad + 1);
		c->in[k++] = tt_tensor(dt, 1, w1, 0);
		if (layer && variant != 1)
			c->in[k++] = tt_tensor(dt, 1, w1, 0);
		c->n_in = k;
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		c->n_params = 1;
		c->params[0] = tt_param_float(layer ? 1e-5 : 1e-6);
	} else if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (op[0] == 'l') {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant == 1 ? 0 : -1);
		}
	} else if (!strcmp(op, "sum") || !strcmp(op, "mean") || !strcmp(op, "amax") ||
	           !strcmp(op, "argmax")) {
		int axis = variant == 1 ? 0 : 1, keep = variant == 2;
		int64_t os[2] = { rows, width };
		os[axis] = 1;
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		if (keep)
			c->out[0] = tt_tensor(op[1] == 'r' ? TK_I64 : dt, 2, os, 0);
		else
			c->out[0] = tt_tensor(op[1] == 'r' ? TK_I64 : dt, 1, &os[1 - axis], 0);
		c->n_params = 2;
		c->params[0] = tt_param_int(axis == 1 ? -1 : 0);
		c->params[1] = tt_param_bool(keep);
	} else if (tc_starts(op, "quant_fp8")) {
		int per_token = strstr(op, "token") != NULL;
		int64_t one[1] = { 1 }, srows[2] = { rows, 1 };
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->out[0] =
		        tt_tensor(variant == 2 ? TK_U8 : TK_FP8_E4M3, 2, shape, pad ? pad + 5 : 0);
		c->out[1] =
		        per_token ? tt_tensor(TK_F32, 2, srows, 0) : tt_tensor(TK_F32, 1, one, 0);
		c->n_out = 2;
		if (!per_token && variant == 1) {
			c->in[1] = tt_tensor(TK_F32, 1, one, 0);
			tt_set(&c->in[1], 0, 3.0 / 448.0);
			c->n_in = 2;
		}
	} else if (tc_starts(op, "rope")) {
		tc_rope(c, dt, rows, width, pad, variant, rng);
	} else if (strstr(op, "_pool") != NULL) {
		tc_pool(c, op, dt, rows, width, pad, variant);
	} else {
		return 0;
	}
	for (int i = 0; i < c->n_in; i++) {
		if (c->in[i].dtype == TK_I32 || c->in[i].dtype == TK_I64 ||
		    (tc_starts(op, "rope") && i == 3) || (tc_starts(op, "quant") && i == 1))
			continue;
		tc_range(op, i, &lo, &hi);
		tt_fill(&c->in[i], rng, lo, hi);
	}
	return 1;
}

/* Tensors a run of op writes: its outputs, then the inputs it updates in place. */
static inline int tc_written(const char *op, tk_call *c, tk_tensor **list)
{
	int n = 0;

	for (int i = 0; i < c->n_out; i++)
		list[n++] = &c->out[i];
	if (tc_starts(op, "fused_add"))
		list[n++] = &c->in[1];
	if (tc_starts(op, "rope")) {
		list[n++] = &c->in[0];
		list[n++] = &c->in[1];
	}
	return n;
}

/* Whether a written tensor must match the CPU bit for bit (indices, max, fp8 codes). */
static inline int tc_exact(const char *op, const tk_tensor *t)
{
	return t->dtype == TK_I64 || t->dtype == TK_U8 || t->dtype == TK_FP8_E4M3 ||
	       tc_starts(op, "max_pool") || tc_starts(op, "quant") || !strcmp(op, "amax");
}

static inline void tc_free(tk_call *c)
{
	for (int i = 0; i < c->n_in; i++)
		tt_free(&c->in[i]);
	for (int i = 0; i < c->n_out; i++)
		tt_free(&c->out[i]);
}

#endif /* TILEOPS_TK_OP_CASES_H */
