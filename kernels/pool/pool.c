/*
 * pool.c - CPU references of max and average pooling over the 1 to 3
 * spatial dims of NC[D]H W tensors, PyTorch's semantics: padding is -inf
 * for max and 0 for avg; dilation (max only) spaces the taps; ceil_mode
 * adds a last window when one starts inside the input or its left
 * padding; avg divides by the window clipped to the padded input
 * (count_include_pad) or to the input itself.
 */
#include <math.h>

#include "cpu_util.h"

static double pool_window(const tk_pool *pl, const tk_tensor *x, int64_t xo, const int64_t *o)
{
	int64_t lo[3], hi[3], padded = 1, inside = 1;
	double acc = pl->is_max ? -INFINITY : 0.0;

	for (int d = 0; d < 3; d++) {
		lo[d] = o[d] * pl->s[d] - pl->p[d];
		hi[d] = lo[d] + (pl->k[d] - 1) * pl->dil[d] + 1;
		if (!pl->is_max) {
			int64_t end = hi[d] < pl->in[d] + pl->p[d] ? hi[d] : pl->in[d] + pl->p[d];
			padded *= end - lo[d];
		}
	}
	for (int64_t a = lo[0]; a < hi[0]; a += pl->dil[0]) {
		for (int64_t b = lo[1]; b < hi[1]; b += pl->dil[1]) {
			for (int64_t c = lo[2]; c < hi[2]; c += pl->dil[2]) {
				if (a < 0 || b < 0 || c < 0 || a >= pl->in[0] || b >= pl->in[1] ||
				    c >= pl->in[2])
					continue;
				double v = cpu_load(x->data, x->dtype,
				                    xo + a * pl->xs[2] + b * pl->xs[3] +
				                            c * pl->xs[4]);
				if (!pl->is_max)
					acc += v;
				else if (v > acc || isnan(v))
					acc = v;
				if (isnan(acc) && pl->is_max)
					return acc;
			}
		}
	}
	if (pl->is_max)
		return acc;
	for (int d = 0; d < 3; d++) {
		int64_t l = lo[d] < 0 ? 0 : lo[d], h = hi[d] > pl->in[d] ? pl->in[d] : hi[d];
		inside *= h - l;
	}
	return acc / (double)(pl->count_include_pad ? padded : inside);
}

static tk_status cpu_pool(const tk_call *call, int nsp, int is_max)
{
	tk_pool pl;

	if (tk_pool_parse(call, nsp, is_max, &pl) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	for (int64_t n = 0; n < pl.n; n++) {
		for (int64_t c = 0; c < pl.c; c++) {
			int64_t xo = n * pl.xs[0] + c * pl.xs[1], oo = n * pl.os[0] + c * pl.os[1];
			int64_t o[3];
			for (o[0] = 0; o[0] < pl.out[0]; o[0]++)
				for (o[1] = 0; o[1] < pl.out[1]; o[1]++)
					for (o[2] = 0; o[2] < pl.out[2]; o[2]++)
						cpu_store(out->data, out->dtype,
						          oo + o[0] * pl.os[2] + o[1] * pl.os[3] +
						                  o[2] * pl.os[4],
						          (float)pool_window(&pl, x, xo, o));
		}
	}
	return TK_OK;
}

tk_status tk_cpu_max_pool1d(const tk_call *call)
{
	return cpu_pool(call, 1, 1);
}

tk_status tk_cpu_max_pool2d(const tk_call *call)
{
	return cpu_pool(call, 2, 1);
}

tk_status tk_cpu_max_pool3d(const tk_call *call)
{
	return cpu_pool(call, 3, 1);
}

tk_status tk_cpu_avg_pool1d(const tk_call *call)
{
	return cpu_pool(call, 1, 0);
}

tk_status tk_cpu_avg_pool2d(const tk_call *call)
{
	return cpu_pool(call, 2, 0);
}

tk_status tk_cpu_avg_pool3d(const tk_call *call)
{
	return cpu_pool(call, 3, 0);
}
