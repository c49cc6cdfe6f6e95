/*
 * grouped_gemm.c - the CPU references of moe_grouped_gemm and moe_gate_up:
 * one dot product per output element over the rows moe_align laid out,
 * accumulated in double and rounded once (manifest/moe.yaml).
 */
#include <math.h>
#include <string.h>

#include "cpu_util.h"
#include "moe.h"

/* The x row of place p, or -1 when out's row p is zero. */
static int64_t source_row(const tk_moe_gemm *g, int64_t p)
{
	int32_t e = g->expert_ids[p / g->block_m], s = g->sorted_ids[p];

	if (p >= g->num_post_padded[0] || e < 0 || e >= g->e || s < 0 || s >= g->tk)
		return -1;
	return g->top_k ? s / g->top_k : p;
}

static double dot(const tk_moe_gemm *g, int64_t xrow, int64_t wrow)
{
	double acc = 0.0;

	for (int64_t k = 0; k < g->k; k++)
		acc += (double)cpu_load(g->x, g->dtype, xrow * g->k + k) *
		       cpu_load(g->w, g->dtype, wrow * g->k + k);
	return acc;
}

static tk_status run(const tk_call *call, int gate_up)
{
	tk_moe_gemm g;
	tk_status st = tk_moe_gemm_parse(call, gate_up, &g);

	if (st != TK_OK)
		return st;
	for (int64_t p = 0; p < g.p; p++) {
		int64_t r = source_row(&g, p), e = r < 0 ? 0 : g.expert_ids[p / g.block_m];
		for (int64_t n = 0; n < g.out_cols; n++) {
			double v = 0.0;
			if (r >= 0 && !gate_up) {
				v = dot(&g, r, e * g.n + n);
			} else if (r >= 0) {
				/* The accumulations as f32, as the kernels keep them. */
				float gt = (float)dot(&g, r, e * g.n + n);
				float up = (float)dot(&g, r, e * g.n + g.out_cols + n);
				v = (double)gt / (1.0 + exp(-(double)gt)) * up;
			}
			cpu_store(g.out, g.dtype, p * g.out_cols + n, (float)v);
		}
	}
	return TK_OK;
}

tk_status tk_cpu_moe_grouped_gemm(const tk_call *call)
{
	return run(call, 0);
}

tk_status tk_cpu_moe_gate_up(const tk_call *call)
{
	return run(call, 1);
}
