/*
 * test_gemm.c - the gemm family's CPU references against double
 * arithmetic: gemm on small and odd sizes (both b layouts, alpha, a bias,
 * padded rows), its refusal of inner dims that do not agree and an empty
 * a; bmm with either b layout, each batch its own product. The rest of the
 * family's reference tests (residuals, batch strides) are in
 * test_cpu_gemm.c.
 */
#include <criterion/criterion.h>

#include "kernels/tk_ref_util.h"

static void check_gemm(tk_dtype dt, int64_t m, int64_t n, int64_t k, int trans_b, int bias,
                       double alpha, int64_t pad)
{
	uint64_t rng = ref_seed("gemm") ^ (uint64_t)(m * 7919 + n * 31 + k + trans_b + dt);
	int64_t sa[2] = { m, k }, sb[2] = { k, n }, sc[2] = { m, n };
	tk_call c = { .n_in = bias ? 3 : 2, .n_out = 1, .n_params = 2 };

	if (trans_b) {
		sb[0] = n;
		sb[1] = k;
	}
	c.params[0] = tt_param_float(alpha);
	c.params[1] = tt_param_bool(trans_b);
	c.in[0] = tt_tensor(dt, 2, sa, pad);
	c.in[1] = tt_tensor(dt, 2, sb, pad + 1);
	if (bias)
		c.in[2] = tt_tensor(dt, 1, &n, 0);
	c.out[0] = tt_tensor(dt, 2, sc, pad + 2);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	tt_fill(&c.in[1], &rng, -1.0, 1.0);
	if (bias)
		tt_fill(&c.in[2], &rng, -1.0, 1.0);
	cr_assert_eq(ref_entry("gemm")->cpu(&c), TK_OK);
	double *want = malloc(sizeof(double) * (size_t)(m * n));
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double acc = 0.0;
			for (int64_t p = 0; p < k; p++) {
				int64_t bi = trans_b ? j * k + p : p * n + j;
				acc += tt_get(&c.in[0], i * k + p) * tt_get(&c.in[1], bi);
			}
			want[i * n + j] = alpha * acc + (bias ? tt_get(&c.in[2], j) : 0.0);
		}
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "gemm %s %ldx%ldx%ld tb %d",
	              tk_dtype_name(dt), (long)m, (long)n, (long)k, trans_b);
	free(want);
	for (int i = 0; i < c.n_in; i++)
		tt_free(&c.in[i]);
	tt_free(&c.out[0]);
}

Test(gemm, matches_double_arithmetic_for_both_b_layouts_alpha_and_bias)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		check_gemm(dt, 1, 1, 1, 0, 0, 1.0, 0);
		check_gemm(dt, 7, 5, 3, 0, 0, 1.0, 0);
		check_gemm(dt, 7, 5, 3, 1, 0, 1.0, 0);
		check_gemm(dt, 33, 65, 129, 0, 1, 0.5, 0);
		check_gemm(dt, 33, 65, 129, 1, 1, -2.0, 3);
		check_gemm(dt, 17, 9, 257, 0, 0, 1.0, 1);
	}
}

Test(gemm, refuses_mismatched_inner_dims)
{
	int64_t sa[2] = { 4, 8 }, sb[2] = { 7, 3 }, sc[2] = { 4, 3 };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };

	c.params[0] = tt_param_float(1.0);
	c.params[1] = tt_param_bool(0);
	c.in[0] = tt_tensor(TK_F32, 2, sa, 0);
	c.in[1] = tt_tensor(TK_F32, 2, sb, 0);
	c.out[0] = tt_tensor(TK_F32, 2, sc, 0);
	cr_expect_eq(ref_entry("gemm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

Test(gemm, accepts_an_empty_a)
{
	int64_t s0x8[2] = { 0, 8 }, s8x8[2] = { 8, 8 };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };

	/* a [0, 8] times b [8, 8] */
	c.params[0] = tt_param_float(1.0);
	c.params[1] = tt_param_bool(0);
	c.in[0] = tt_tensor(TK_F32, 2, s0x8, 0);
	c.in[1] = tt_tensor(TK_F32, 2, s8x8, 0);
	c.out[0] = tt_tensor(TK_F32, 2, s0x8, 0);
	cr_expect_eq(ref_entry("gemm")->cpu(&c), TK_OK, "gemm on [0, 8]");
	ref_free_call(&c);
}

Test(bmm, each_batch_is_its_own_product_in_either_b_layout)
{
	const int64_t B = 3, M = 5, N = 7, K = 9;

	for (int tb = 0; tb <= 1; tb++) {
		int64_t sa[3] = { B, M, K }, sb[3] = { B, tb ? N : K, tb ? K : N },
		        sc[3] = { B, M, N };
		uint64_t rng = ref_seed("bmm") + (uint64_t)tb;
		tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };

		c.params[0] = tt_param_float(0.5);
		c.params[1] = tt_param_bool(tb);
		c.in[0] = tt_tensor(TK_F32, 3, sa, 0);
		c.in[1] = tt_tensor(TK_F32, 3, sb, 0);
		c.out[0] = tt_tensor(TK_F32, 3, sc, 0);
		tt_fill(&c.in[0], &rng, -1.0, 1.0);
		tt_fill(&c.in[1], &rng, -1.0, 1.0);
		ref_run("bmm", &c);
		double *want = ref_want(&c.out[0]);
		for (int64_t z = 0; z < B; z++)
			for (int64_t i = 0; i < M; i++)
				for (int64_t j = 0; j < N; j++) {
					double acc = 0.0;
					for (int64_t p = 0; p < K; p++) {
						int64_t bi = tb ? (z * N + j) * K + p
						                : (z * K + p) * N + j;
						acc += tt_get(&c.in[0], (z * M + i) * K + p) *
						       tt_get(&c.in[1], bi);
					}
					want[(z * M + i) * N + j] = 0.5 * acc;
				}
		cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(TK_F32), "trans_b %d", tb);
		free(want);
		ref_free_call(&c);
	}
}
