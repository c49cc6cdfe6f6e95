/*
 * gemm_fp8.h - the fp8 e4m3 GEMMs' calls read once (gemm_fp8_problem.c),
 * for the CPU references (gemm_fp8.c) and the CUDA kernels (gemm_fp8.cu).
 *
 * c[b][m, n] = sum over K blocks kb of sa * sb * dot(a[b][m, kb], b[b][n, kb])
 * + bias[n] + residual[m, n], where a K block is TK_FP8_KBLOCK values and
 * the scales are those the layout gives the block (per tensor and per row
 * they are the same for every block). Each block's dot product is an f32
 * sum promoted into the f32 total with its scales: Hopper's fp8 tensor
 * cores accumulate with fewer bits than f32, so the GPU must promote at
 * least that often, and the reference does the same to keep tolerances
 * tight.
 */
#ifndef TILEOPS_GEMM_FP8_H
#define TILEOPS_GEMM_FP8_H

#include "tk_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_FP8_KBLOCK 128

/* The values of gemm_fp8's scale_layout param. */
enum tk_fp8_layout { TK_FP8_PER_TENSOR = 0, TK_FP8_PER_ROW = 1, TK_FP8_BLOCK = 2 };

typedef struct tk_fp8_problem {
	int layout;
	int64_t batch, m, n, k;
	int64_t kblocks;                         /* ceil(k / TK_FP8_KBLOCK) */
	const uint8_t *a, *b;                    /* e4m3 codes */
	int64_t lda, ldb;                        /* row strides in elements */
	int64_t a_bstride, b_bstride, c_bstride; /* batch strides (bmm) */
	const float *sa, *sb;                    /* scales, packed; see the layout */
	int64_t sa_bstride, sb_bstride;          /* 0: one scale for every batch (bmm) */
	const void *bias;                        /* [n] in c's dtype, or NULL */
	const void *res;                         /* [m, n] in c's dtype, or NULL */
	int64_t ldr;
	void *c;
	int64_t ldc;
	tk_dtype c_dtype; /* TK_BF16 or TK_F16 */
} tk_fp8_problem;

/* gemm_fp8's call (a, b, a_scale, b_scale, bias?, residual? -> c; scale_layout). */
tk_status tk_fp8_gemm_parse(const tk_call *call, tk_fp8_problem *p);
/* bmm_fp8's call (a, b, a_scale [1|B], b_scale [1|B] -> c): per-tensor scales per batch. */
tk_status tk_fp8_bmm_parse(const tk_call *call, tk_fp8_problem *p);

/*
 * The kernels a choice names (tk_choice.v[0]; v[1] is the stream kernel's
 * split count of K; decode's v[1..3] are its cluster split of K, weight
 * rows a CTA and ring stages): gemm_fp8.cu and gemm_fp8_decode.cu say what
 * each does, gemm_fp8_tuning.c how choices are written.
 */
enum tk_fp8_kernel {
	TK_FP8_KERNEL_STREAM = 1,
	TK_FP8_KERNEL_WG = 2,
	TK_FP8_KERNEL_TILE = 3,
	TK_FP8_KERNEL_DECODE = 4
};

/* The largest M the decode kernel (gemm_fp8_decode.cu) takes. */
#define TK_FP8_DECODE_MAX_M 64

/*
 * The decode kernel (CUDA builds only): the configurations that can serve
 * q on the current device as exact choices, the model's cheapest first (up
 * to max written, how many there are returned; 0 where it cannot serve q:
 * M > 64, rows the copy engine cannot read); whether choice c fits q; and
 * a launch of c on stream (TK_ERR_UNSUPPORTED where c does not fit, nothing
 * launched then). q must have K > 0.
 */
int tk_fp8_decode_candidates(const tk_fp8_problem *q, tk_choice *out, int max);
int tk_fp8_decode_fits(const tk_fp8_problem *q, const tk_choice *c);
tk_status tk_fp8_decode_launch(const tk_fp8_problem *q, const tk_choice *c, void *stream);

/*
 * The choices that can serve call (gemm_fp8's, or bmm_fp8's when batched)
 * on the current device, mode TK_CHOICE_EXACT: up to max of them written,
 * how many there are returned (CUDA builds only).
 */
int tk_gemm_fp8_candidates(const tk_call *call, int batched, tk_choice *out, int max);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_GEMM_FP8_H */
