/*
 * norm.c - CPU references of the normalizations over the last dim:
 *   rms_norm              x, weight                 out = x / rms(x) * w
 *   layer_norm            x, weight, bias?          out = (x - mean) / std * w + b
 *   fused_add_rms_norm    x, residual, weight       residual += x; out = rms_norm(residual)
 *   fused_add_layer_norm  x, residual, weight, bias?
 * Param 0 "eps" is added to the mean square (variance) before the root. The
 * fused forms round the new residual to its dtype, store it, and normalize
 * the stored values (what a following layer reads back).
 */
#include <math.h>

#include "cpu_util.h"

struct norm_args {
	const tk_tensor *x, *res, *w, *b, *out;
	int layer;
	double eps;
};

static tk_status norm_check(const struct norm_args *a, tk_iter *it)
{
	const tk_tensor *ts[5] = { a->out, a->x, a->w, a->res, a->b };
	const tk_tensor *rows[3] = { a->out, a->x, a->res };
	int n = 3;

	if (a->res != NULL)
		ts[n++] = a->res;
	if (a->b != NULL)
		ts[n++] = a->b;
	if (!tk_same_float_dtype(ts, n) || a->x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(a->x) || !tk_last_dim_packed(a->out))
		return TK_ERR_UNSUPPORTED;
	if (a->res != NULL && !tk_last_dim_packed(a->res))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(a->x);
	if (!tk_is_vector_of(a->w, d) || (a->b != NULL && !tk_is_vector_of(a->b, d)))
		return TK_ERR_UNSUPPORTED;
	return tk_iter_rows(it, rows, a->res != NULL ? 3 : 2);
}

static void norm_row(const struct norm_args *a, int64_t xo, int64_t ro, int64_t oo, int64_t d)
{
	tk_dtype dt = a->x->dtype;
	const void *src = a->x->data;
	int64_t so = xo;
	double mean = 0.0, ss = 0.0;

	if (a->res != NULL) {
		for (int64_t j = 0; j < d; j++) {
			float z = cpu_load(a->x->data, dt, xo + j) +
			          cpu_load(a->res->data, dt, ro + j);
			cpu_store(a->res->data, dt, ro + j, z);
		}
		src = a->res->data;
		so = ro;
	}
	if (a->layer) {
		for (int64_t j = 0; j < d; j++)
			mean += cpu_load(src, dt, so + j);
		mean /= (double)d;
	}
	for (int64_t j = 0; j < d; j++) {
		double v = cpu_load(src, dt, so + j) - mean;
		ss += v * v;
	}
	double rstd = 1.0 / sqrt(ss / (double)d + a->eps);
	for (int64_t j = 0; j < d; j++) {
		double v = (cpu_load(src, dt, so + j) - mean) * rstd * cpu_load(a->w->data, dt, j);
		if (a->b != NULL)
			v += cpu_load(a->b->data, dt, j);
		cpu_store(a->out->data, dt, oo + j, (float)v);
	}
}

static tk_status cpu_norm(const tk_call *call, int layer, int fused)
{
	struct norm_args a = { 0 };
	int nw = fused ? 2 : 1;
	tk_iter it;

	if (call->n_in < nw + 1 || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	a.x = &call->in[0];
	a.res = fused ? &call->in[1] : NULL;
	a.w = &call->in[nw];
	a.b = layer && call->n_in > nw + 1 ? &call->in[nw + 1] : NULL;
	a.out = &call->out[0];
	a.layer = layer;
	a.eps = tk_param_num(call, 0, layer ? 1e-5 : 1e-6);
	if (norm_check(&a, &it) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(a.x);
	for (int64_t r = 0; r < it.numel && d > 0; r++) {
		int64_t oo = tk_iter_offset(&it, 0, r), xo = tk_iter_offset(&it, 1, r);
		norm_row(&a, xo, fused ? tk_iter_offset(&it, 2, r) : 0, oo, d);
	}
	return TK_OK;
}

tk_status tk_cpu_rms_norm(const tk_call *call)
{
	return cpu_norm(call, 0, 0);
}

tk_status tk_cpu_layer_norm(const tk_call *call)
{
	return cpu_norm(call, 1, 0);
}

tk_status tk_cpu_fused_add_rms_norm(const tk_call *call)
{
	return cpu_norm(call, 0, 1);
}

tk_status tk_cpu_fused_add_layer_norm(const tk_call *call)
{
	return cpu_norm(call, 1, 1);
}
