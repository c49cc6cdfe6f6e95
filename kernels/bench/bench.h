/*
 * bench.h - the workloads of tileops-bench: every memory-bound op on the
 * shapes its manifest entry lists (Llama 3.1 8B / 70B / 405B and
 * DeepSeek-V3, decode and prefill), with the bytes and FLOPs its roofline
 * formulas give.
 */
#ifndef TILEOPS_BENCH_H
#define TILEOPS_BENCH_H

#include "tileops_kernels.h"

#define BW_MAX_IN 4
#define BW_MAX_OUT 2

typedef struct bw_tensor {
	int ndim;
	int64_t shape[TK_MAX_DIMS];
	tk_dtype dt; /* TK_DTYPE_INVALID: the workload's dtype */
	int mutated; /* an input the op writes in place */
} bw_tensor;

typedef struct bw_workload {
	const char *op;
	char label[96];
	tk_dtype dt;
	int n_in, n_out, n_params;
	bw_tensor in[BW_MAX_IN], out[BW_MAX_OUT];
	tk_param params[TK_MAX_PARAMS];
	const char *param_names[TK_MAX_PARAMS];
	double flops, bytes; /* the roofline counts */
} bw_workload;

/* All workloads; the array lives as long as the program. */
const bw_workload *bw_all(int *count);

/* The dtype of tensor t of workload w. */
tk_dtype bw_dtype(const bw_workload *w, const bw_tensor *t);

#endif /* TILEOPS_BENCH_H */
