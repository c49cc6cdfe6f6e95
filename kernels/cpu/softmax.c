/*
 * softmax.c - CPU reference of softmax over the last dim, with the row
 * maximum subtracted first so exp never overflows.
 */
#include <math.h>

#include "cpu_util.h"

tk_status tk_cpu_softmax(const tk_call *call)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	tk_dtype dt = x->dtype;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2))
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_rows(&it, ts, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (it.numel == 0 || d == 0)
		return TK_OK;

	for (int64_t r = 0; r < it.numel; r++) {
		int64_t xo = tk_iter_offset(&it, 1, r), oo = tk_iter_offset(&it, 0, r);
		double mx = -INFINITY, sum = 0.0;
		for (int64_t j = 0; j < d; j++) {
			double v = cpu_load(x->data, dt, xo + j);
			mx = v > mx ? v : mx;
		}
		for (int64_t j = 0; j < d; j++)
			sum += exp(cpu_load(x->data, dt, xo + j) - mx);
		for (int64_t j = 0; j < d; j++) {
			double e = exp(cpu_load(x->data, dt, xo + j) - mx);
			cpu_store(out->data, dt, oo + j, (float)(e / sum));
		}
	}
	return TK_OK;
}
