/*
 * parity_gemm.c - gemm and bmm on the GPU against their CPU references
 * through the op launchers with their default choices (tk_kernel_find;
 * tk_call zero-initialised, so a choice the caller does not make is
 * empty): every manifest workload (parity.h), then odd sizes, both b
 * layouts, alpha, a bias, padded rows, a long K, and an empty product.
 * Every configuration of the kernel families has its own tests in
 * tests/gpu.
 */
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(gemm)

/* The tolerance these special cases have always had: bf16 2e-2 at any K. */
static double simple_tol(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 2e-3 : 2e-2;
}

static void gemm_case(tk_dtype dt, int64_t m, int64_t n, int64_t k, int trans_b, int bias,
                      double alpha, int64_t pad)
{
	parity_case c;

	parity_special(&c, "gemm", dt, bias ? "with bias" : "no bias");
	parity_shape(&c, "a", 2, (int64_t[]){ m, k });
	if (trans_b)
		parity_shape(&c, "b", 2, (int64_t[]){ n, k });
	else
		parity_shape(&c, "b", 2, (int64_t[]){ k, n });
	if (bias)
		parity_shape(&c, "bias", 1, (int64_t[]){ n });
	parity_param_float(&c, "alpha", alpha);
	parity_param_bool(&c, "trans_b", trans_b);
	c.rel_tol = simple_tol(dt);
	c.pad = pad;
	parity_check(&c);
}

Test(parity_gemm, matches_cpu_on_odd_sizes_both_b_layouts_alpha_and_bias)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		for (int tb = 0; tb <= 1; tb++) {
			gemm_case(dt, 1, 1, 1, tb, 0, 1.0, 0);
			gemm_case(dt, 33, 65, 129, tb, 0, 1.0, 0);
			gemm_case(dt, 33, 65, 129, tb, 1, 0.5, 3);
			gemm_case(dt, 7, 3, 5, tb, 1, -2.0, 0);
			gemm_case(dt, 130, 257, 64, tb, 1, 1.0, 0);
		}
	}
}

Test(parity_gemm, matches_cpu_with_a_long_k)
{
	for (size_t d = 0; d < 3; d++) {
		gemm_case(tt_float_dtypes[d], 5, 9, 16384, 0, 0, 1.0, 0);
		gemm_case(tt_float_dtypes[d], 3, 70, 16384, 1, 1, 0.25, 0);
	}
}

Test(parity_gemm, gemm_accepts_an_empty_a)
{
	gemm_case(TK_F32, 0, 8, 8, 0, 0, 1.0, 0);
}
