/*
 * rms_norm.c - CPU reference of rms_norm over the last dim:
 * out = x / sqrt(mean(x^2) + eps) * weight. Param 0, "eps".
 * Inputs: x [..., d], weight [d]; all of one float dtype.
 */
#include <math.h>

#include "cpu_util.h"

tk_status tk_cpu_rms_norm(const tk_call *call)
{
	const tk_tensor *x = &call->in[0], *w = &call->in[1], *out = &call->out[0];
	const tk_tensor *ts[3] = { out, x, w };
	const tk_tensor *rows_of[2] = { out, x };
	double eps = tk_param_num(call, 0, 1e-6);
	tk_dtype dt = x->dtype;
	tk_iter it;

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(ts, 3))
		return TK_ERR_UNSUPPORTED;
	if (x->ndim < 1 || !tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (w->ndim != 1 || w->shape[0] != d)
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_rows(&it, rows_of, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0 || d == 0)
		return TK_OK;

	for (int64_t r = 0; r < it.numel; r++) {
		int64_t xo = tk_iter_offset(&it, 1, r), oo = tk_iter_offset(&it, 0, r);
		double ss = 0.0;
		for (int64_t j = 0; j < d; j++) {
			double v = cpu_load(x->data, dt, xo + j);
			ss += v * v;
		}
		double rstd = 1.0 / sqrt(ss / (double)d + eps);
		for (int64_t j = 0; j < d; j++) {
			double v = cpu_load(x->data, dt, xo + j);
			double g = cpu_load(w->data, dt, j * w->stride[0]);
			cpu_store(out->data, dt, oo + j, (float)(v * rstd * g));
		}
	}
	return TK_OK;
}
