/*
 * quant_fp8_fused.c - CPU references of the fp8 e4m3 quantizations that
 * feed gemm_fp8 beyond one scale per tensor or row:
 *   quant_fp8_per_token_group  x -> q, scale [.., ceil(width / group)] f32
 *   rms_norm_quant_fp8         x, weight [, input_scale [1]] -> q, scale [.., 1] f32
 * Scales and codes follow quant_fp8.h. rms_norm_quant_fp8 computes the
 * normalized row in f32 as the GPU does, one value at a time:
 * r = 1 / sqrtf(mean square + eps) (the mean square summed in double and
 * rounded to f32 once), y = (x * r) * w; it never rounds y to x's dtype.
 */
#include "cpu_util.h"
#include "quant_fp8.h"

static int quant_out_ok(const tk_call *call)
{
	return call->n_out >= 2 && call->out[0].dtype == TK_FP8_E4M3 &&
	       call->out[1].dtype == TK_F32 && tk_is_contiguous(&call->out[1]) &&
	       tk_last_dim_packed(&call->out[0]);
}

tk_status tk_cpu_quant_fp8_per_token_group(const tk_call *call)
{
	const tk_tensor *x = &call->in[0], *q = &call->out[0];
	const tk_tensor *ts[2] = { q, x };
	int64_t g = (int64_t)tk_param_num(call, 0, 128);
	tk_iter it;

	if (call->n_in < 1 || !quant_out_ok(call) || !tk_same_float_dtype(&x, 1) || x->ndim < 1 ||
	    g <= 0 || !tk_last_dim_packed(x) || tk_iter_outer(&it, ts, 2) != TK_OK ||
	    tk_last_dim(x) != tk_last_dim(q))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x), groups = (d + g - 1) / g;
	float *scale = (float *)call->out[1].data;
	if (tk_numel(&call->out[1]) != it.numel * groups)
		return TK_ERR_UNSUPPORTED;
	for (int64_t r = 0; r < it.numel && groups > 0; r++) {
		int64_t xo = tk_iter_offset(&it, 1, r), qo = tk_iter_offset(&it, 0, r);
		for (int64_t gi = 0; gi < groups; gi++) {
			int64_t j0 = gi * g, j1 = j0 + g < d ? j0 + g : d;
			float m = 0.0f;
			for (int64_t j = j0; j < j1; j++)
				m = fmaxf(m, fabsf(cpu_load(x->data, x->dtype, xo + j)));
			float s = m / TK_FP8_MAX, inv = quant_inv(s);
			scale[r * groups + gi] = s;
			for (int64_t j = j0; j < j1; j++)
				((uint8_t *)q->data)[qo + j] =
				        quantize(cpu_load(x->data, x->dtype, xo + j), s, inv);
		}
	}
	return TK_OK;
}

tk_status tk_cpu_rms_norm_quant_fp8(const tk_call *call)
{
	const tk_tensor *x = &call->in[0], *w = &call->in[1], *q = &call->out[0];
	const tk_tensor *ts[2] = { q, x }, *xw[2] = { x, w };
	const float *given = tk_has_input(call, 2) ? (const float *)call->in[2].data : NULL;
	float eps = (float)tk_param_num(call, 0, 1e-6);
	tk_iter it;

	if (call->n_in < 2 || !quant_out_ok(call) || !tk_same_float_dtype(xw, 2) || x->ndim < 1 ||
	    !tk_last_dim_packed(x) || tk_iter_outer(&it, ts, 2) != TK_OK ||
	    tk_last_dim(x) != tk_last_dim(q) || !tk_is_vector_of(w, tk_last_dim(x)))
		return TK_ERR_UNSUPPORTED;
	if (given && (call->in[2].dtype != TK_F32 || tk_numel(&call->in[2]) != 1))
		return TK_ERR_UNSUPPORTED;
	if (tk_numel(&call->out[1]) != it.numel)
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	float *scale = (float *)call->out[1].data;
	for (int64_t r = 0; r < it.numel; r++) {
		int64_t xo = tk_iter_offset(&it, 1, r), qo = tk_iter_offset(&it, 0, r);
		double ss = 0.0;
		float amax = 0.0f;
		for (int64_t j = 0; j < d; j++) {
			double v = cpu_load(x->data, x->dtype, xo + j);
			ss += v * v;
		}
		float rr = 1.0f / sqrtf((d > 0 ? (float)(ss / (double)d) : 0.0f) + eps);
		for (int64_t j = 0; j < d && !given; j++)
			amax = fmaxf(amax, fabsf(cpu_load(x->data, x->dtype, xo + j) * rr *
			                         cpu_load(w->data, w->dtype, j)));
		float s = given ? given[0] : amax / TK_FP8_MAX, inv = quant_inv(s);
		scale[r] = s;
		for (int64_t j = 0; j < d; j++) {
			float y = cpu_load(x->data, x->dtype, xo + j) * rr *
			          cpu_load(w->data, w->dtype, j);
			((uint8_t *)q->data)[qo + j] = quantize(y, s, inv);
		}
	}
	return TK_OK;
}
