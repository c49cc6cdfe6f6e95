/*
 * reduce.c - CPU references of the reductions over one dim (param 0
 * "dim", negative from the end; param 1 "keepdim"): sum and mean
 * (accumulated in double), amax (NaN if the line has one, as in PyTorch)
 * and argmax (i64 index of the first maximum; a NaN counts as the
 * maximum, so the first NaN wins).
 */
#include <math.h>

#include "cpu_util.h"

enum reduce_kind { RED_SUM, RED_MEAN, RED_AMAX, RED_ARGMAX };

static double reduce_line(const tk_tensor *x, int64_t xo, int64_t n, int64_t xs,
                          enum reduce_kind kind)
{
	double acc = kind == RED_AMAX || kind == RED_ARGMAX ? -INFINITY : 0.0;
	int64_t best = 0;

	for (int64_t j = 0; j < n; j++) {
		double v = cpu_load(x->data, x->dtype, xo + j * xs);
		if (kind == RED_SUM || kind == RED_MEAN) {
			acc += v;
		} else if (isnan(acc)) {
			break;
		} else if (isnan(v) || v > acc || (j == 0 && kind == RED_ARGMAX)) {
			acc = v;
			best = j;
		}
	}
	if (kind == RED_MEAN)
		return acc / (double)n;
	return kind == RED_ARGMAX ? (double)best : acc;
}

static tk_status cpu_reduce(const tk_call *call, enum reduce_kind kind)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	int64_t n, xs;
	int axis;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if (kind == RED_ARGMAX ? out->dtype != TK_I64 : out->dtype != x->dtype)
		return TK_ERR_UNSUPPORTED;
	if (!tk_same_float_dtype(&x, 1) || !tk_axis_param(call, 0, x->ndim, &axis))
		return TK_ERR_UNSUPPORTED;
	int keepdim = tk_param_num(call, 1, 0.0) != 0.0;
	if (tk_iter_reduce(&it, x, out, axis, keepdim, &n, &xs) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (n == 0 && it.numel > 0 && kind != RED_SUM)
		return TK_ERR_UNSUPPORTED; /* mean, amax, argmax of nothing are undefined */
	for (int64_t r = 0; r < it.numel; r++) {
		double v = reduce_line(x, tk_iter_offset(&it, 1, r), n, xs, kind);
		int64_t oo = tk_iter_offset(&it, 0, r);
		if (kind == RED_ARGMAX)
			((int64_t *)out->data)[oo] = (int64_t)v;
		else
			cpu_store(out->data, out->dtype, oo, (float)v);
	}
	return TK_OK;
}

tk_status tk_cpu_sum(const tk_call *call)
{
	return cpu_reduce(call, RED_SUM);
}

tk_status tk_cpu_mean(const tk_call *call)
{
	return cpu_reduce(call, RED_MEAN);
}

tk_status tk_cpu_amax(const tk_call *call)
{
	return cpu_reduce(call, RED_AMAX);
}

tk_status tk_cpu_argmax(const tk_call *call)
{
	return cpu_reduce(call, RED_ARGMAX);
}
