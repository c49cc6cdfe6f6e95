/*
 * gated.c - CPU references of the fused gated activations of MLPs:
 * x [.., 2d] -> out [.., d], out = act(x[.., :d]) * x[.., d:], with act silu
 * (silu_and_mul) or gelu (gelu_and_mul; param 0 "approximate").
 */
#include <math.h>

#include "cpu_util.h"

static double gate_act(double g, int kind)
{
	if (kind == 0)
		return g / (1.0 + exp(-g));
	if (kind == 2) {
		double inner = 0.7978845608028654 * (g + 0.044715 * g * g * g);
		return 0.5 * g * (1.0 + tanh(inner));
	}
	return 0.5 * g * (1.0 + erf(g * 0.7071067811865476));
}

/* kind: 0 silu, 1 gelu (erf), 2 gelu (tanh). */
static tk_status cpu_gated(const tk_call *call, int kind)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2))
		return TK_ERR_UNSUPPORTED;
	if (x->ndim < 1 || !tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(out);
	if (tk_last_dim(x) != 2 * d || tk_iter_outer(&it, ts, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	for (int64_t r = 0; r < it.numel && d > 0; r++) {
		int64_t oo = tk_iter_offset(&it, 0, r), xo = tk_iter_offset(&it, 1, r);
		for (int64_t j = 0; j < d; j++) {
			double g = cpu_load(x->data, x->dtype, xo + j);
			double u = cpu_load(x->data, x->dtype, xo + d + j);
			cpu_store(out->data, out->dtype, oo + j, (float)(gate_act(g, kind) * u));
		}
	}
	return TK_OK;
}

tk_status tk_cpu_silu_and_mul(const tk_call *call)
{
	return cpu_gated(call, 0);
}

tk_status tk_cpu_gelu_and_mul(const tk_call *call)
{
	return cpu_gated(call, tk_param_num(call, 0, 0.0) != 0.0 ? 2 : 1);
}
