/*
 * parity_gemm_fp8.c - gemm_fp8 and bmm_fp8 on the GPU against their CPU
 * references: every manifest workload (parity.h), then every scale layout
 * at the decode sizes (M 1, 7, 16), the tile sizes (64, 128) and past them
 * (300), N and K that end mid-tile and mid-block, both output dtypes, a
 * bias and a residual, and bmm with shared and per-batch scales. Inputs
 * are random codes in [-3, 3] and positive scales (parity_rules.c).
 */
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(gemm_fp8)

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static void fp8_case(int layout, tk_dtype out, int64_t m, int64_t n, int64_t k, int epilogue)
{
	static const char *const what[] = { "per tensor", "per row", "block" };
	parity_case c;

	parity_special(&c, "gemm_fp8", TK_FP8_E4M3, what[layout]);
	parity_shape(&c, "a", 2, (int64_t[]){ m, k });
	parity_shape(&c, "b", 2, (int64_t[]){ n, k });
	if (layout == 0) {
		parity_shape(&c, "a_scale", 1, (int64_t[]){ 1 });
		parity_shape(&c, "b_scale", 1, (int64_t[]){ 1 });
	} else if (layout == 1) {
		parity_shape(&c, "a_scale", 2, (int64_t[]){ m, 1 });
		parity_shape(&c, "b_scale", 2, (int64_t[]){ n, 1 });
	} else {
		parity_shape(&c, "a_scale", 2, (int64_t[]){ m, cdiv(k, 128) });
		parity_shape(&c, "b_scale", 2, (int64_t[]){ cdiv(n, 128), cdiv(k, 128) });
	}
	parity_dtype(&c, "c", out);
	if (epilogue) {
		parity_shape(&c, "bias", 1, (int64_t[]){ n });
		parity_shape(&c, "residual", 2, (int64_t[]){ m, n });
		parity_dtype(&c, "bias", out);
		parity_dtype(&c, "residual", out);
	}
	parity_param_int(&c, "scale_layout", layout);
	parity_check(&c);
}

Test(parity_gemm_fp8, every_layout_at_decode_and_prefill_sizes_matches_cpu)
{
	static const int64_t ms[] = { 1, 7, 16, 64, 128, 300 };
	static const int64_t nk[][2] = { { 576, 512 }, { 200, 272 }, { 2112, 1040 }, { 64, 16 } };

	for (int layout = 0; layout < 3; layout++)
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
			for (size_t j = 0; j < sizeof(nk) / sizeof(nk[0]); j++)
				fp8_case(layout, (i + j) & 1 ? TK_F16 : TK_BF16, ms[i], nk[j][0],
				         nk[j][1], 0);
}

Test(parity_gemm_fp8, bias_and_residual_match_cpu)
{
	for (int layout = 0; layout < 3; layout++) {
		fp8_case(layout, TK_BF16, 5, 300, 256, 1);
		fp8_case(layout, TK_F16, 130, 136, 384, 1);
	}
}

Test(parity_gemm_fp8, a_long_k_matches_cpu)
{
	for (int layout = 0; layout < 3; layout++)
		fp8_case(layout, TK_BF16, 16, 128, 16384, 0);
}

static void bmm_case(int64_t b, int64_t m, int64_t n, int64_t k, int per_batch)
{
	parity_case c;

	parity_special(&c, "bmm_fp8", TK_FP8_E4M3, per_batch ? "per-batch scales" : "one scale");
	parity_shape(&c, "a", 3, (int64_t[]){ b, m, k });
	parity_shape(&c, "b", 3, (int64_t[]){ b, n, k });
	parity_shape(&c, "a_scale", 1, (int64_t[]){ per_batch ? b : 1 });
	parity_shape(&c, "b_scale", 1, (int64_t[]){ per_batch ? b : 1 });
	parity_check(&c);
}

Test(parity_gemm_fp8, bmm_with_shared_and_per_batch_scales_matches_cpu)
{
	bmm_case(3, 1, 512, 128, 1);
	bmm_case(3, 7, 128, 512, 0);
	bmm_case(2, 130, 72, 48, 1);
}
