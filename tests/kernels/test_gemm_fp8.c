/*
 * test_gemm_fp8.c - the CPU references of gemm_fp8 and bmm_fp8 against the
 * definition worked out in double: c = sum over 128-wide K blocks of the
 * block's scales times its dot product (one scale per tensor, per row and
 * output channel, or 1x128 x 128x128 blocks), plus bias and residual, on
 * random e4m3 codes and positive random scales. Shapes cross partial N and
 * K blocks; rows are padded; the residual may be c itself; calls the
 * kernels cannot serve are refused.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

#define KB 128

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static void fill_codes(tk_tensor *t, uint64_t *rng)
{
	/* never zero: |x| in [0.25, 3] with a random sign */
	for (int64_t i = 0; i < tk_numel(t); i++) {
		double v = tt_rand_uniform(rng, 0.25, 3.0);
		tt_set(t, i, tt_rand_u64(rng) & 1 ? v : -v);
	}
}

/* gemm_fp8's call: a [m, k] (rows padded by pad), b [n, k], scales by layout, c [m, n]. */
static void build(tk_call *c, int layout, tk_dtype out, int64_t m, int64_t n, int64_t k,
                  int64_t pad, int bias, int res, uint64_t *rng)
{
	int64_t sa1[1] = { 1 }, sa[2] = { m, layout == 1 ? 1 : cdiv(k, KB) };
	int64_t sb[2] = { layout == 1 ? n : cdiv(n, KB), layout == 1 ? 1 : cdiv(k, KB) };

	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ m, k }, pad);
	c->in[1] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ n, k }, 0);
	c->in[2] = layout ? tt_tensor(TK_F32, 2, sa, 0) : tt_tensor(TK_F32, 1, sa1, 0);
	c->in[3] = layout ? tt_tensor(TK_F32, 2, sb, 0) : tt_tensor(TK_F32, 1, sa1, 0);
	c->n_in = 4;
	fill_codes(&c->in[0], rng);
	fill_codes(&c->in[1], rng);
	tt_fill(&c->in[2], rng, 0.01, 0.2);
	tt_fill(&c->in[3], rng, 0.01, 0.2);
	if (bias) {
		c->in[4] = tt_tensor(out, 1, (int64_t[]){ n }, 0);
		tt_fill(&c->in[4], rng, -2.0, 2.0);
		c->n_in = 5;
	}
	if (res) {
		c->in[5] = tt_tensor(out, 2, (int64_t[]){ m, n }, 3);
		tt_fill(&c->in[5], rng, -2.0, 2.0);
		c->n_in = 6;
	}
	c->out[0] = tt_tensor(out, 2, (int64_t[]){ m, n }, pad ? 5 : 0);
	tt_poison(&c->out[0]);
	c->n_out = 1;
	c->params[0] = tt_param_int(layout);
	c->n_params = 1;
}

/* The definition, in double, of c[i, j] of a gemm_fp8 call built above. */
static double want_at(const tk_call *c, int layout, int64_t i, int64_t j)
{
	const tk_tensor *a = &c->in[0], *b = &c->in[1];
	int64_t k = a->shape[1], kbs = cdiv(k, KB);
	double v = 0.0;

	for (int64_t kb = 0; kb < kbs; kb++) {
		double d = 0.0, s;
		for (int64_t q = kb * KB; q < k && q < (kb + 1) * KB; q++)
			d += tt_get(a, i * k + q) * tt_get(b, j * k + q);
		if (layout == 0)
			s = tt_get(&c->in[2], 0) * tt_get(&c->in[3], 0);
		else if (layout == 1)
			s = tt_get(&c->in[2], i) * tt_get(&c->in[3], j);
		else
			s = tt_get(&c->in[2], i * kbs + kb) *
			    tt_get(&c->in[3], (j / KB) * kbs + kb);
		v += s * d;
	}
	if (tk_has_input(c, 4))
		v += tt_get(&c->in[4], j);
	if (tk_has_input(c, 5))
		v += tt_get(&c->in[5], i * c->in[5].shape[1] + j);
	return v;
}

static void check(const char *what, tk_call *c, int layout, const double *want)
{
	const tk_tensor *o = &c->out[0];
	double err = tt_rel_err(o, want);

	cr_expect_leq(err, ref_tol(o->dtype), "%s layout %d %s: rel err %g", what, layout,
	              tk_dtype_name(o->dtype), err);
}

static const int64_t shapes[][3] = {
	{ 1, 7, 16 },
	{ 7, 130, 272 },
	{ 33, 257, 400 },
	{ 16, 128, 1024 },
};

Test(gemm_fp8, every_scale_layout_matches_the_blockwise_definition)
{
	static const tk_dtype outs[] = { TK_BF16, TK_F16 };

	for (int layout = 0; layout < 3; layout++)
		for (int o = 0; o < 2; o++)
			for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
				int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
				uint64_t rng =
				        ref_seed("gemm_fp8") + (uint64_t)(layout * 97 + o * 13 + s);
				tk_call c;
				build(&c, layout, outs[o], m, n, k, s & 1 ? 3 : 0, 0, 0, &rng);
				ref_run("gemm_fp8", &c);
				double *want = ref_want(&c.out[0]);
				for (int64_t i = 0; i < m; i++)
					for (int64_t j = 0; j < n; j++)
						want[i * n + j] = want_at(&c, layout, i, j);
				check("gemm_fp8", &c, layout, want);
				free(want);
				ref_free_call(&c);
			}
}

Test(gemm_fp8, block_scales_apply_per_k_block_not_to_the_whole_row)
{
	/* Two K blocks, the second's scale 0: only the first block counts. */
	uint64_t rng = ref_seed("gemm_fp8 blocks");
	tk_call c;

	build(&c, 2, TK_BF16, 2, 3, 256, 0, 0, 0, &rng);
	for (int64_t i = 0; i < 2; i++)
		tt_set(&c.in[2], i * 2 + 1, 0.0);
	ref_run("gemm_fp8", &c);
	for (int64_t i = 0; i < 2; i++)
		for (int64_t j = 0; j < 3; j++) {
			double d = 0.0;
			for (int64_t q = 0; q < KB; q++)
				d += tt_get(&c.in[0], i * 256 + q) * tt_get(&c.in[1], j * 256 + q);
			d *= tt_get(&c.in[2], i * 2) * tt_get(&c.in[3], 0);
			cr_expect_float_eq(tt_get(&c.out[0], i * 3 + j), d, fabs(d) * 8e-3 + 1e-6,
			                   "c[%ld, %ld]", (long)i, (long)j);
		}
	ref_free_call(&c);
}

Test(gemm_fp8, bias_and_residual_are_added_after_the_scales)
{
	for (int layout = 0; layout < 3; layout++) {
		uint64_t rng = ref_seed("gemm_fp8 epilogue") + (uint64_t)layout;
		int64_t m = 5, n = 200, k = 384;
		tk_call c;
		build(&c, layout, TK_BF16, m, n, k, 0, 1, 1, &rng);
		ref_run("gemm_fp8", &c);
		double *want = ref_want(&c.out[0]);
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++)
				want[i * n + j] = want_at(&c, layout, i, j);
		check("gemm_fp8 bias residual", &c, layout, want);
		free(want);
		ref_free_call(&c);
	}
}

Test(gemm_fp8, residual_may_be_c_itself)
{
	uint64_t rng = ref_seed("gemm_fp8 in place");
	int64_t m = 4, n = 64, k = 128;
	tk_call c;

	build(&c, 1, TK_F16, m, n, k, 0, 0, 0, &rng);
	tt_fill(&c.out[0], &rng, -1.0, 1.0);
	c.in[5] = c.out[0];
	c.n_in = 6;
	double *want = ref_want(&c.out[0]);
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++)
			want[i * n + j] = want_at(&c, 1, i, j);
	ref_run("gemm_fp8", &c);
	check("gemm_fp8 in place", &c, 1, want);
	free(want);
	c.n_in = 4;
	ref_free_call(&c);
}

Test(gemm_fp8, refuses_k_not_a_multiple_of_16_and_wrong_scale_shapes)
{
	uint64_t rng = ref_seed("gemm_fp8 refuse");
	tk_call c;

	build(&c, 0, TK_BF16, 2, 3, 24, 0, 0, 0, &rng);
	cr_expect_eq(ref_entry("gemm_fp8")->cpu(&c), TK_ERR_UNSUPPORTED, "K = 24");
	ref_free_call(&c);
	build(&c, 2, TK_BF16, 2, 3, 256, 0, 0, 0, &rng);
	c.in[3].shape[1] = 1; /* one K block where there are two */
	cr_expect_eq(ref_entry("gemm_fp8")->cpu(&c), TK_ERR_UNSUPPORTED, "b_scale [1, 1]");
	c.in[3].shape[1] = 2;
	c.out[0].dtype = TK_F32;
	cr_expect_eq(ref_entry("gemm_fp8")->cpu(&c), TK_ERR_UNSUPPORTED, "f32 output");
	c.out[0].dtype = TK_BF16;
	ref_free_call(&c);
}

Test(bmm_fp8, per_batch_and_shared_scales_match_the_definition)
{
	for (int shared = 0; shared < 2; shared++) {
		uint64_t rng = ref_seed("bmm_fp8") + (uint64_t)shared;
		int64_t bt = 3, m = 5, n = 40, k = 160;
		tk_call c;
		memset(&c, 0, sizeof(c));
		c.in[0] = tt_tensor(TK_FP8_E4M3, 3, (int64_t[]){ bt, m, k }, 0);
		c.in[1] = tt_tensor(TK_FP8_E4M3, 3, (int64_t[]){ bt, n, k }, 0);
		c.in[2] = tt_tensor(TK_F32, 1, (int64_t[]){ shared ? 1 : bt }, 0);
		c.in[3] = tt_tensor(TK_F32, 1, (int64_t[]){ bt }, 0);
		c.n_in = 4;
		c.out[0] = tt_tensor(TK_BF16, 3, (int64_t[]){ bt, m, n }, 0);
		c.n_out = 1;
		fill_codes(&c.in[0], &rng);
		fill_codes(&c.in[1], &rng);
		tt_fill(&c.in[2], &rng, 0.01, 0.2);
		tt_fill(&c.in[3], &rng, 0.01, 0.2);
		ref_run("bmm_fp8", &c);
		double *want = ref_want(&c.out[0]);
		for (int64_t b = 0; b < bt; b++)
			for (int64_t i = 0; i < m; i++)
				for (int64_t j = 0; j < n; j++) {
					double d = 0.0;
					for (int64_t q = 0; q < k; q++)
						d += tt_get(&c.in[0], (b * m + i) * k + q) *
						     tt_get(&c.in[1], (b * n + j) * k + q);
					want[(b * m + i) * n + j] =
					        d * tt_get(&c.in[2], shared ? 0 : b) *
					        tt_get(&c.in[3], b);
				}
		check("bmm_fp8", &c, 0, want);
		free(want);
		ref_free_call(&c);
	}
}
