/*
 * tk_internal.h - pieces shared by the kernels in this folder; not part of
 * the L1 interface (tileops_kernels.h is).
 *
 * The per-op entry points are listed here so the dispatch table in common.c
 * can name them. Every CPU reference and every CUDA launcher has the
 * signature of tk_cpu_fn / tk_cuda_fn.
 */
#ifndef TILEOPS_TK_INTERNAL_H
#define TILEOPS_TK_INTERNAL_H

#include "tileops_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU references, kernels/cpu/<op>.c */
tk_status tk_cpu_add(const tk_call *call);
tk_status tk_cpu_gelu(const tk_call *call);
tk_status tk_cpu_gemm(const tk_call *call);
tk_status tk_cpu_mul(const tk_call *call);
tk_status tk_cpu_rms_norm(const tk_call *call);
tk_status tk_cpu_silu(const tk_call *call);
tk_status tk_cpu_softmax(const tk_call *call);

/* CUDA launchers, kernels/cuda/<op>.cu (only in builds with CUDA) */
tk_status tk_cuda_add(const tk_call *call, void *stream);
tk_status tk_cuda_gelu(const tk_call *call, void *stream);
tk_status tk_cuda_gemm(const tk_call *call, void *stream);
tk_status tk_cuda_mul(const tk_call *call, void *stream);
tk_status tk_cuda_rms_norm(const tk_call *call, void *stream);
tk_status tk_cuda_silu(const tk_call *call, void *stream);
tk_status tk_cuda_softmax(const tk_call *call, void *stream);

/*
 * An iteration plan: up to TK_ITER_MAX_OPS tensors walked over one shape,
 * each with its own element strides (0 on broadcast dims). Adjacent dims
 * that are packed alike in every operand are merged, so the common cases
 * become one dim (all packed) or two (rows with a row stride), which the
 * kernels turn into cheap index arithmetic.
 *
 * Operand 0 is the output; the others are inputs.
 */
#define TK_ITER_MAX_OPS 3

typedef struct tk_iter {
	int ndim; /* >= 1 after merging; shape[ndim-1] is the innermost */
	int n_ops;
	int64_t numel;
	int64_t shape[TK_MAX_DIMS];
	int64_t stride[TK_ITER_MAX_OPS][TK_MAX_DIMS];
} tk_iter;

/*
 * Plan an elementwise walk over out's shape. Each input is right-aligned to
 * out (numpy broadcasting): a missing or size-1 dim is read with stride 0.
 * Returns TK_ERR_UNSUPPORTED when an input cannot broadcast to out.
 */
tk_status tk_iter_broadcast(tk_iter *it, const tk_tensor *out, const tk_tensor *const *ins,
                            int n_in);

/*
 * Plan a walk over the rows of tensors that share one shape: every dim but
 * the last. The result has numel = number of rows (1 for ndim <= 1).
 * Returns TK_ERR_UNSUPPORTED when the shapes differ.
 */
tk_status tk_iter_rows(tk_iter *it, const tk_tensor *const *ts, int n);

/* Element offset of operand `op` at linear index `i` of the plan. */
int64_t tk_iter_offset(const tk_iter *it, int op, int64_t i);

/*
 * View t as a matrix of rows: every dim but the last flattens into `rows`,
 * which must then be evenly spaced `ld` elements apart. The last dim must
 * be packed. Returns TK_ERR_UNSUPPORTED otherwise (or for ndim < 1).
 */
tk_status tk_matrix_view(const tk_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld);

/* A param read as a number, whatever its kind (INT, FLOAT or BOOL). */
double tk_param_num(const tk_call *call, int idx, double dflt);

/* 1 when every tensor is f32, f16 or bf16 and all share one dtype. */
int tk_same_float_dtype(const tk_tensor *const *ts, int n);

/* Width of the last dim (1 for ndim 0) and whether it is packed. */
int64_t tk_last_dim(const tk_tensor *t);
int tk_last_dim_packed(const tk_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_TK_INTERNAL_H */
