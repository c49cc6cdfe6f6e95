/*
 * quant_fp8.c - CPU references of fp8 e4m3 quantization.
 *   quant_fp8_per_tensor  x [, input_scale [1] f32] -> q (fp8_e4m3 or u8), scale [1] f32
 *   quant_fp8_per_token   x -> q, scale [.., 1] f32 (one per row)
 * A computed scale is amax / 448 (448 is e4m3's largest finite value; NaN
 * is skipped by the maximum); q = x * inv rounded to nearest even and
 * saturated to +-448, where inv = 1 / scale, computed once per scale and
 * capped at FLT_MAX (a denormal scale's reciprocal overflows, and 0 * inf
 * would be NaN). A scale that is not positive (an all-zero tensor or row)
 * gives q = 0. The division, the reciprocal and the product are single
 * f32 operations, as on the GPU, so the two backends produce the same
 * bytes; the GPU multiplies because a division per value cost it about
 * ten instructions.
 */
#include "cpu_util.h"
#include "quant_fp8.h"

static int q_dtype_ok(const tk_tensor *q, const tk_tensor *scale)
{
	return (q->dtype == TK_FP8_E4M3 || q->dtype == TK_U8) && scale->dtype == TK_F32;
}

/* Rows of x and q over one plan; the amax and quantization of each. */
static tk_status quant_rows(const tk_call *call, int per_token, float *amax_all)
{
	const tk_tensor *x = &call->in[0], *q = &call->out[0];
	const tk_tensor *ts[2] = { q, x };
	const float *given = NULL;
	tk_iter it;

	if (x->ndim < 1 || !tk_last_dim_packed(x) || !tk_last_dim_packed(q) ||
	    tk_iter_outer(&it, ts, 2) != TK_OK || tk_last_dim(x) != tk_last_dim(q))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (!per_token && call->n_in > 1)
		given = (const float *)call->in[1].data;
	if (d == 0) {
		/* Empty rows: the work is the scales alone, never a walk over rows
		 * that hold nothing (x [2^28, 0] has 2^28 of them). */
		for (int64_t r = 0; per_token && r < it.numel; r++)
			((float *)call->out[1].data)[r] = 0.0f;
		if (amax_all)
			*amax_all = given ? given[0] : 0.0f;
		return TK_OK;
	}
	float amax = 0.0f;
	for (int pass = per_token || given ? 1 : 0; pass < 2; pass++) {
		float scale = given ? given[0] : amax / 448.0f;
		for (int64_t r = 0; r < it.numel; r++) {
			int64_t xo = tk_iter_offset(&it, 1, r), qo = tk_iter_offset(&it, 0, r);
			float m = 0.0f;
			for (int64_t j = 0; j < d && (pass == 0 || per_token); j++)
				m = fmaxf(m, fabsf(cpu_load(x->data, x->dtype, xo + j)));
			if (pass == 0) {
				amax = fmaxf(amax, m);
				continue;
			}
			if (per_token) {
				scale = m / 448.0f;
				((float *)call->out[1].data)[r] = scale;
			}
			float inv = quant_inv(scale);
			for (int64_t j = 0; j < d; j++)
				((uint8_t *)q->data)[qo + j] =
				        quantize(cpu_load(x->data, x->dtype, xo + j), scale, inv);
		}
	}
	if (amax_all)
		*amax_all = given ? given[0] : amax / 448.0f;
	return TK_OK;
}

tk_status tk_cpu_quant_fp8_per_tensor(const tk_call *call)
{
	const tk_tensor *x = &call->in[0];
	float scale = 0.0f;

	if (call->n_in < 1 || call->n_out < 2 || !tk_same_float_dtype(&x, 1))
		return TK_ERR_UNSUPPORTED;
	if (!q_dtype_ok(&call->out[0], &call->out[1]) || tk_numel(&call->out[1]) != 1)
		return TK_ERR_UNSUPPORTED;
	if (call->n_in > 1 && (call->in[1].dtype != TK_F32 || tk_numel(&call->in[1]) != 1))
		return TK_ERR_UNSUPPORTED;
	tk_status st = quant_rows(call, 0, &scale);
	if (st == TK_OK)
		*(float *)call->out[1].data = scale;
	return st;
}

tk_status tk_cpu_quant_fp8_per_token(const tk_call *call)
{
	const tk_tensor *x = &call->in[0], *scale = &call->out[1];

	if (call->n_in < 1 || call->n_out < 2 || !tk_same_float_dtype(&x, 1))
		return TK_ERR_UNSUPPORTED;
	if (!q_dtype_ok(&call->out[0], scale) || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	/* One packed scale per row: [.., 1] over the rows of x. */
	if (tk_numel(scale) * tk_last_dim(x) != tk_numel(x) || !tk_is_contiguous(scale))
		return TK_ERR_UNSUPPORTED;
	return quant_rows(call, 1, NULL);
}
