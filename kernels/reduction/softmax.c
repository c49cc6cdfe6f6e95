/*
 * softmax.c - CPU references of softmax (over the last dim) and
 * log_softmax (over param 0 "dim"), with the line maximum subtracted first
 * so exp never overflows. A line that is all -inf gives NaN, as in PyTorch.
 */
#include <math.h>

#include "cpu_util.h"

static void softmax_line(const tk_tensor *x, const tk_tensor *out, int64_t xo, int64_t oo,
                         int64_t n, int64_t xs, int64_t os, int log_form)
{
	tk_dtype dt = x->dtype;
	double mx = -INFINITY, sum = 0.0;

	for (int64_t j = 0; j < n; j++) {
		double v = cpu_load(x->data, dt, xo + j * xs);
		mx = v > mx ? v : mx;
	}
	for (int64_t j = 0; j < n; j++)
		sum += exp(cpu_load(x->data, dt, xo + j * xs) - mx);
	double lse = log(sum);
	for (int64_t j = 0; j < n; j++) {
		double v = cpu_load(x->data, dt, xo + j * xs) - mx;
		cpu_store(out->data, dt, oo + j * os, (float)(log_form ? v - lse : exp(v) / sum));
	}
}

static tk_status cpu_softmax_dim(const tk_call *call, int axis_param, int log_form)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	tk_tensor xv, ov;
	const tk_tensor *views[2] = { &ov, &xv };
	int axis;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2) || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(x) || !tk_last_dim_packed(out) || out->ndim != x->ndim)
		return TK_ERR_UNSUPPORTED;
	axis = x->ndim - 1;
	if (axis_param && !tk_axis_param(call, 0, x->ndim, &axis))
		return TK_ERR_UNSUPPORTED;
	int64_t n = x->shape[axis];
	if (out->shape[axis] != n)
		return TK_ERR_UNSUPPORTED;
	/* Plan over every dim but `axis`; each plan element is one line. */
	xv = *x;
	ov = *out;
	xv.shape[axis] = 1;
	ov.shape[axis] = 1;
	if (tk_iter_rows(&it, views, 2) != TK_OK || ov.shape[x->ndim - 1] != xv.shape[x->ndim - 1])
		return TK_ERR_UNSUPPORTED;
	/* tk_iter_rows walks the outer dims only: add the last one unless it is the axis. */
	int64_t last = axis == x->ndim - 1 ? 1 : x->shape[x->ndim - 1];
	for (int64_t r = 0; r < it.numel && n > 0; r++) {
		for (int64_t c = 0; c < last; c++) {
			int64_t oo = tk_iter_offset(&it, 0, r) + c,
			        xo = tk_iter_offset(&it, 1, r) + c;
			softmax_line(x, out, xo, oo, n, x->stride[axis], out->stride[axis],
			             log_form);
		}
	}
	return TK_OK;
}

tk_status tk_cpu_softmax(const tk_call *call)
{
	return cpu_softmax_dim(call, 0, 0);
}

tk_status tk_cpu_log_softmax(const tk_call *call)
{
	return cpu_softmax_dim(call, 1, 1);
}
