/*
 * test_pool.c - the CPU references of max and average pooling in 1 to 3
 * dims against brute force (every input element added to every window
 * holding it): padding, dilation, ceil_mode, count_include_pad, padded
 * rows, every float dtype (max exactly); an output shape PyTorch would not
 * give is refused; an empty batch is accepted.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

/* PyTorch's output length of one pooled dim. */
static int64_t pooled(int64_t len, int64_t k, int64_t s, int64_t p, int64_t dil, int ceil_mode)
{
	int64_t num = len + 2 * p - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
	int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;

	if (ceil_mode && (o - 1) * s >= len + p)
		o--;
	return o;
}

/*
 * NC[D]HW images: N 2 (0 when rows is 0), C 3, W = width, H = rows (4 when
 * rows is 0), D 3; rows padded by pad (out's by pad + 1). Variant 0:
 * 2-wide windows, stride 2; 1: 3-wide, padding 1, ceil_mode, and
 * (average) count_include_pad off; 2: as 1, and a dilation of 2 (max).
 */
static void build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                  int variant, uint64_t *rng)
{
	int nsp = op[strlen(op) - 2] - '0', is_max = ref_starts(op, "max");
	int64_t shape[5], oshape[5], k = variant ? 3 : 2, s = 2, p = variant ? 1 : 0;
	int64_t dil = is_max && variant == 2 ? 2 : 1;
	int ceil_mode = variant != 0;
	int np = 0;

	memset(c, 0, sizeof(*c));
	shape[0] = rows == 0 ? 0 : 2;
	shape[1] = 3;
	for (int d = 0; d < nsp; d++)
		shape[2 + d] = d == nsp - 1 ? width : (d == nsp - 2 ? (rows ? rows : 4) : 3);
	memcpy(oshape, shape, sizeof(shape));
	for (int d = 0; d < nsp; d++)
		oshape[2 + d] = pooled(shape[2 + d], k, s, p, dil, ceil_mode);
	c->in[0] = tt_tensor(dt, nsp + 2, shape, pad);
	c->out[0] = tt_tensor(dt, nsp + 2, oshape, pad ? pad + 1 : 0);
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(k);
	np += nsp;
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(s);
	np += nsp;
	for (int d = 0; d < nsp; d++)
		c->params[np + d] = tt_param_int(p);
	np += nsp;
	if (is_max) {
		for (int d = 0; d < nsp; d++)
			c->params[np + d] = tt_param_int(dil);
		np += nsp;
	}
	c->params[np++] = tt_param_bool(ceil_mode);
	if (!is_max)
		c->params[np++] = tt_param_bool(variant != 1);
	c->n_params = np;
	c->n_in = 1;
	c->n_out = 1;
	tt_fill(&c->in[0], rng, -3.0, 3.0);
}

/* Brute force: visit every input element and add it to every window holding it. */
static void pool_ref(const tk_call *c, int nsp, int is_max, double *want)
{
	const tk_tensor *x = &c->in[0], *o = &c->out[0];
	int64_t k[3] = { 1, 1, 1 }, s[3] = { 1, 1, 1 }, p[3] = { 0 }, dil[3] = { 1, 1, 1 };
	int64_t in[3] = { 1, 1, 1 }, out[3] = { 1, 1, 1 };
	int lead = 3 - nsp, cip = !is_max && c->params[3 * nsp + 1].v.b;
	int64_t nc = x->shape[0] * x->shape[1], on = tk_numel(o);
	double *cnt = calloc((size_t)on + 1, sizeof(double));

	for (int d = 0; d < nsp; d++) {
		k[lead + d] = c->params[d].v.i;
		s[lead + d] = c->params[nsp + d].v.i;
		p[lead + d] = c->params[2 * nsp + d].v.i;
		dil[lead + d] = is_max ? c->params[3 * nsp + d].v.i : 1;
		in[lead + d] = x->shape[2 + d];
		out[lead + d] = o->shape[2 + d];
	}
	for (int64_t i = 0; i < on; i++)
		want[i] = is_max ? -INFINITY : 0.0;
	for (int64_t b = 0; b < nc; b++)
		for (int64_t o0 = 0; o0 < out[0]; o0++)
			for (int64_t o1 = 0; o1 < out[1]; o1++)
				for (int64_t o2 = 0; o2 < out[2]; o2++) {
					int64_t oi =
					        ((b * out[0] + o0) * out[1] + o1) * out[2] + o2;
					int64_t oc[3] = { o0, o1, o2 }, padded = 1;
					for (int d = 0; d < 3; d++) {
						int64_t st = oc[d] * s[d] - p[d];
						int64_t en = st + k[d] > in[d] + p[d] ? in[d] + p[d]
						                                      : st + k[d];
						padded *= en - st;
					}
					for (int64_t t = 0; t < k[0] * k[1] * k[2]; t++) {
						int64_t tap[3] = { t / (k[1] * k[2]),
							           t / k[2] % k[1], t % k[2] };
						int64_t pos[3], ok = 1;
						for (int d = 0; d < 3; d++) {
							pos[d] = oc[d] * s[d] - p[d] +
							         tap[d] * dil[d];
							ok &= pos[d] >= 0 && pos[d] < in[d];
						}
						if (!ok)
							continue;
						double v = tt_get(x, ((b * in[0] + pos[0]) * in[1] +
						                      pos[1]) * in[2] +
						                             pos[2]);
						want[oi] =
						        is_max ? fmax(want[oi], v) : want[oi] + v;
						cnt[oi] += 1;
					}
					if (!is_max)
						want[oi] /= cip ? (double)padded : cnt[oi];
				}
	free(cnt);
}

static const char *const ops[] = { "max_pool1d", "max_pool2d", "max_pool3d",
	                           "avg_pool1d", "avg_pool2d", "avg_pool3d" };

Test(pool, max_and_avg_match_brute_force_with_padding_dilation_and_ceil_mode)
{
	for (int o = 0; o < 6; o++) {
		for (int k = 0; k < 3; k++) {
			for (int v = 0; v < 3; v++) {
				static const int64_t ws[] = { 7, 10 };
				for (int w = 0; w < 2; w++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng =
					        0x3u + (uint64_t)(k * 31 + w * 7 + v + o * 100);
					tk_call c;
					build(&c, ops[o], dt, 5, ws[w], w, v, &rng);
					ref_run(ops[o], &c);
					double *want = ref_want(&c.out[0]);
					pool_ref(&c, o % 3 + 1, o < 3, want);
					cr_expect_leq(tt_rel_err(&c.out[0], want),
					              o < 3 ? 0.0 : ref_tol(dt),
					              "%s %s width %ld variant %d", ops[o],
					              tk_dtype_name(dt), (long)ws[w], v);
					free(want);
					ref_free_call(&c);
				}
			}
		}
	}
}

Test(pool, refuses_an_output_shape_pytorch_would_not_give)
{
	uint64_t rng = 5;
	tk_call c;

	build(&c, "max_pool2d", TK_F32, 6, 6, 0, 0, &rng);
	c.out[0].shape[3] = 4;
	cr_expect_eq(tk_kernel_find("max_pool2d")->cpu(&c), TK_ERR_UNSUPPORTED);
	ref_free_call(&c);
}

Test(pool, every_pool_accepts_an_empty_batch)
{
	for (int o = 0; o < 6; o++) {
		uint64_t rng = 1;
		tk_call c;
		build(&c, ops[o], TK_F32, 0, 8, 0, 0, &rng);
		cr_expect_eq(ref_entry(ops[o])->cpu(&c), TK_OK, "%s on an empty batch", ops[o]);
		ref_free_call(&c);
	}
}
