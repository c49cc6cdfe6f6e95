/*
 * parity_moe.c - the moe family on the GPU against its CPU references: every
 * manifest workload, scaled (parity_rules.c keeps the grouped GEMMs' P = T*k +
 * E*(block_m - 1)), with routing from tools/workload's rules: random distinct
 * experts per token with every 16th outside the layer for moe_align, one
 * consistent moe_align layout with empty experts for the GEMMs. Route and
 * align compare exactly.
 */
#include <stdio.h>

#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(moe)

/* A grouped GEMM of odd sizes (no multiple of the 16-wide tiles) and each block_m. */
static void gemm_case(const char *op, tk_dtype dt, int64_t t, int64_t top_k, int64_t e, int64_t n,
                      int64_t k, int64_t bm)
{
	int64_t tk = t * (top_k ? top_k : 1), p = tk + e * (bm - 1);
	parity_case c;
	char label[96];

	snprintf(label, sizeof(label), "E %lld N %lld K %lld block_m %lld top_k %lld", (long long)e,
	         (long long)n, (long long)k, (long long)bm, (long long)top_k);
	parity_special(&c, op, dt, label);
	parity_shape(&c, "x", 2, (int64_t[]){ top_k ? t : p, k });
	parity_shape(&c, "w", 3, (int64_t[]){ e, n, k });
	parity_shape(&c, "sorted_ids", 1, (int64_t[]){ p });
	parity_shape(&c, "expert_ids", 1, (int64_t[]){ (p + bm - 1) / bm });
	parity_shape(&c, "num_post_padded", 1, (int64_t[]){ 1 });
	parity_param_int(&c, "block_m", bm);
	parity_param_int(&c, "top_k", top_k);
	parity_range(&c, NULL, -1.0, 1.0);
	parity_check(&c);
}

Test(parity_moe, grouped_gemms_of_odd_sizes_and_every_block_m_match_cpu)
{
	static const tk_dtype dts[] = { TK_BF16, TK_F16, TK_F32 };
	static const int64_t bms[] = { 16, 32, 64, 128 };

	for (int d = 0; d < 3; d++)
		for (int b = 0; b < 4; b++) {
			gemm_case("moe_grouped_gemm", dts[d], 37, 0, 5, 37, 100, bms[b]);
			gemm_case("moe_gate_up", dts[d], 13, 3, 5, 38, 100, bms[b]);
			gemm_case("moe_gate_up", dts[d], 1, 8, 16, 2, 1, bms[b]);
		}
}

Test(parity_moe, grouped_sigmoid_routing_with_bias_and_few_experts_match_cpu)
{
	parity_case c;

	parity_special(&c, "moe_route", TK_BF16, "sigmoid, 4 groups keep 2, bias");
	parity_shape(&c, "logits", 2, (int64_t[]){ 33, 16 });
	parity_shape(&c, "bias", 1, (int64_t[]){ 16 });
	parity_param_int(&c, "top_k", 3);
	parity_param_bool(&c, "sigmoid", 1);
	parity_param_int(&c, "n_group", 4);
	parity_param_int(&c, "topk_group", 2);
	parity_check(&c);

	parity_special(&c, "moe_route", TK_F16, "softmax, every expert chosen");
	parity_shape(&c, "logits", 2, (int64_t[]){ 5, 3 });
	parity_param_int(&c, "top_k", 3);
	parity_check(&c);

	parity_special(&c, "moe_align", TK_I32, "3 experts, blocks of 128");
	parity_shape(&c, "topk_ids", 2, (int64_t[]){ 300, 2 });
	parity_param_int(&c, "num_experts", 3);
	parity_param_int(&c, "block_m", 128);
	parity_check(&c);
}
