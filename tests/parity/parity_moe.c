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

/*
 * A grouped GEMM case: t tokens (top_k 0: t rows in sorted order), E experts,
 * w [E, n, k], blocks of bm; misalign 1 views x one element past its base.
 */
static void gemm_case_at(const char *op, tk_dtype dt, int64_t t, int64_t top_k, int64_t e,
                         int64_t n, int64_t k, int64_t bm, uint32_t misalign)
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
	c.misalign = misalign;
	parity_check(&c);
}

/* A grouped GEMM of odd sizes (no multiple of the 16-wide tiles) and each block_m. */
static void gemm_case(const char *op, tk_dtype dt, int64_t t, int64_t top_k, int64_t e, int64_t n,
                      int64_t k, int64_t bm)
{
	gemm_case_at(op, dt, t, top_k, e, n, k, bm, 0);
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

/*
 * The router's group keys past lane 31 (64 groups), a softmax with groups
 * and no bias, and the one-thread-a-token kernel past 1024 experts; the
 * aligner with few ranking warps (shared memory holds 21 of E at 1024, 3 at
 * 4096) over more ids than one tile of them.
 */
Test(parity_moe, routing_with_many_groups_or_experts_and_align_with_many_experts_match_cpu)
{
	parity_case c;

	parity_special(&c, "moe_route", TK_F32, "sigmoid, 64 groups keep 5, bias");
	parity_shape(&c, "logits", 2, (int64_t[]){ 70, 512 });
	parity_shape(&c, "bias", 1, (int64_t[]){ 512 });
	parity_param_int(&c, "top_k", 8);
	parity_param_bool(&c, "sigmoid", 1);
	parity_param_int(&c, "n_group", 64);
	parity_param_int(&c, "topk_group", 5);
	parity_check(&c);

	parity_special(&c, "moe_route", TK_BF16, "softmax, 8 groups keep 3");
	parity_shape(&c, "logits", 2, (int64_t[]){ 129, 160 });
	parity_param_int(&c, "top_k", 6);
	parity_param_int(&c, "n_group", 8);
	parity_param_int(&c, "topk_group", 3);
	parity_check(&c);

	parity_special(&c, "moe_route", TK_F16, "softmax, 2048 experts");
	parity_shape(&c, "logits", 2, (int64_t[]){ 9, 2048 });
	parity_param_int(&c, "top_k", 4);
	parity_check(&c);

	const int64_t experts[] = { 1024, 4096 };
	for (size_t i = 0; i < sizeof experts / sizeof experts[0]; i++) {
		char label[64];
		snprintf(label, sizeof label, "%lld experts, blocks of 16", (long long)experts[i]);
		parity_special(&c, "moe_align", TK_I32, label);
		parity_shape(&c, "topk_ids", 2, (int64_t[]){ 1000, 8 });
		parity_param_int(&c, "num_experts", experts[i]);
		parity_param_int(&c, "block_m", 16);
		parity_check(&c);
	}
}

/*
 * The tensor-core kernel's edges (kernels/moe/moe_gemm.cu, f16 and bf16, K a
 * multiple of 8): K past the last 64-wide step (72, 136, 200), N and I not a
 * multiple of the 128- or 64-wide tiles, odd I and N (single stores), tiles
 * of 16 and 32 rows (mma.sync) and of 64 and 128 (wgmma), padded blocks and
 * sentinel rows, empty experts, top_k 0 and > 0, a decode step (one token,
 * BR 64) and layouts with enough blocks for BR 128; a misaligned x takes the
 * CUDA-core kernel instead, with the same result.
 */
Test(parity_moe, tensor_core_grouped_gemms_at_their_tile_edges_match_cpu)
{
	static const tk_dtype dts[] = { TK_BF16, TK_F16 };
	static const int64_t bms[] = { 16, 32, 64, 128 };

	for (int d = 0; d < 2; d++) {
		for (int b = 0; b < 4; b++) {
			gemm_case("moe_grouped_gemm", dts[d], 77, 0, 5, 200, 200, bms[b]);
			gemm_case("moe_grouped_gemm", dts[d], 50, 0, 3, 37, 136, bms[b]);
			gemm_case("moe_gate_up", dts[d], 40, 3, 5, 150, 136, bms[b]);
			gemm_case("moe_gate_up", dts[d], 21, 2, 4, 200, 72, bms[b]);
			gemm_case("moe_gate_up", dts[d], 1, 8, 16, 96, 64, bms[b]);
		}
		/* Enough blocks for the 128-row weight tiles (BR 128) of the
		 * mma.sync kernel, for the wgmma kernel's 256-row ones with tiles
		 * of 64 rows (block_m 64), and for the warp-specialized kernel's
		 * tiles of 128 rows (block_m 128). */
		gemm_case("moe_grouped_gemm", dts[d], 4096, 0, 4, 264, 72, 16);
		gemm_case("moe_grouped_gemm", dts[d], 4096, 0, 4, 520, 72, 64);
		gemm_case("moe_gate_up", dts[d], 1024, 4, 4, 520, 72, 64);
		gemm_case("moe_grouped_gemm", dts[d], 4096, 0, 4, 1040, 136, 128);
		gemm_case("moe_gate_up", dts[d], 1024, 4, 4, 520, 136, 128);
		gemm_case("moe_gate_up", dts[d], 512, 8, 8, 262, 40, 32);
		/* More 128-row tiles than SMs, so that the persistent kernel's
		 * CTAs take several each, its ring wrapping across tiles: I a
		 * multiple of 8 (the copy engine stores the tiles) and not (the
		 * threads do). */
		gemm_case("moe_gate_up", dts[d], 1024, 4, 4, 784, 520, 128);
		gemm_case("moe_gate_up", dts[d], 1024, 4, 4, 776, 520, 128);
		/* A misaligned x: the CUDA-core kernel. */
		gemm_case_at("moe_grouped_gemm", dts[d], 37, 0, 5, 64, 64, 16, 1u);
		gemm_case_at("moe_gate_up", dts[d], 13, 3, 5, 64, 64, 64, 1u);
	}
}
