/*
 * moe.h - the layout the moe kernels of both backends share (manifest/moe.yaml,
 * docs/moe.md): the argument checks of each op, done once at the entry of the
 * CPU reference and of the CUDA launcher alike.
 */
#ifndef TILEOPS_MOE_H
#define TILEOPS_MOE_H

#include "tk_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* moe_route: inputs logits [T, E], bias [E] (optional); outputs ids, weights [T, k]. */
typedef struct tk_moe_route {
	int64_t t, e, k, n_group, topk_group;
	int sigmoid, renormalize;
	float scale;
	const void *logits;
	tk_dtype dtype;
	const float *bias; /* NULL: none */
	int32_t *ids;
	float *weights;
} tk_moe_route;

tk_status tk_moe_route_parse(const tk_call *call, tk_moe_route *r);

/* moe_align: topk_ids [T, k]; outputs sorted_ids [P], expert_ids [NB], num_post_padded [1], inv [T*k]. */
typedef struct tk_moe_align {
	int64_t tk, e, block_m, p, nb;
	const int32_t *topk_ids;
	int32_t *sorted_ids, *expert_ids, *num_post_padded, *inv;
} tk_moe_align;

tk_status tk_moe_align_parse(const tk_call *call, tk_moe_align *a);

/*
 * moe_grouped_gemm (gate_up 0) and moe_gate_up (gate_up 1): x, w [E, N, K]
 * (N = 2I for gate_up), sorted_ids [P], expert_ids [NB], num_post_padded [1];
 * out [P, N] (or [P, I]). top_k 0: x row p; else x row sorted_ids[p] / top_k.
 */
typedef struct tk_moe_gemm {
	int gate_up;
	int64_t e, n, k, p, nb, tk, block_m, top_k, x_rows, out_cols;
	tk_dtype dtype;
	const void *x, *w;
	const int32_t *sorted_ids, *expert_ids, *num_post_padded;
	void *out;
} tk_moe_gemm;

tk_status tk_moe_gemm_parse(const tk_call *call, int gate_up, tk_moe_gemm *g);

/*
 * The tensor-core grouped GEMMs (moe_gemm.cu, CUDA builds only): whether
 * they take g (f16/bf16, K a multiple of 8, x and w 16-byte aligned,
 * block_m a multiple of 16), and the launch on stream, for a g they take
 * with P and out_cols above 0.
 */
int tk_moe_gemm_mma_fits(const tk_moe_gemm *g);
tk_status tk_moe_gemm_mma(const tk_moe_gemm *g, void *stream);

/* moe_unpermute: y [P, H], inv [T*k], topk_weights [T, k], shared [T, H] (optional); out [T, H]. */
typedef struct tk_moe_unpermute {
	int64_t p, h, t, k;
	tk_dtype dtype;
	const void *y, *shared; /* shared NULL: none */
	const int32_t *inv;
	const float *weights;
	void *out;
} tk_moe_unpermute;

tk_status tk_moe_unpermute_parse(const tk_call *call, tk_moe_unpermute *u);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_MOE_H */
