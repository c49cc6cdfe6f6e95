/*
 * elementwise.c - the loops behind the elementwise CPU references.
 */
#include "cpu_util.h"

/*
 * Walk the plan row by row: the innermost dim is a plain strided loop, the
 * outer dims are resolved once per row.
 */
static tk_status cpu_walk(const tk_call *call, cpu_unary_fn ufn, cpu_binary_fn bfn, int n_in)
{
	const tk_tensor *ins[2] = { &call->in[0], &call->in[1] };
	const tk_tensor *ts[3] = { &call->out[0], &call->in[0], &call->in[1] };
	tk_dtype dt = call->out[0].dtype;
	tk_iter it;

	if (call->n_in < n_in || call->n_out < 1 || !tk_same_float_dtype(ts, n_in + 1))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_broadcast(&it, &call->out[0], ins, n_in) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0)
		return TK_OK;

	int last = it.ndim - 1;
	int64_t width = it.shape[last];
	int64_t rows = it.numel / width;
	for (int64_t r = 0; r < rows; r++) {
		int64_t base[3];
		for (int op = 0; op <= n_in; op++)
			base[op] = tk_iter_offset(&it, op, r * width);
		for (int64_t j = 0; j < width; j++) {
			float a = cpu_load(ins[0]->data, dt, base[1] + j * it.stride[1][last]);
			float v;
			if (n_in == 1) {
				v = ufn(a, call);
			} else {
				float b = cpu_load(ins[1]->data, dt,
				                   base[2] + j * it.stride[2][last]);
				v = bfn(a, b);
			}
			cpu_store(call->out[0].data, dt, base[0] + j * it.stride[0][last], v);
		}
	}
	return TK_OK;
}

tk_status cpu_unary(const tk_call *call, cpu_unary_fn fn)
{
	return cpu_walk(call, fn, NULL, 1);
}

tk_status cpu_binary(const tk_call *call, cpu_binary_fn fn)
{
	return cpu_walk(call, NULL, fn, 2);
}
