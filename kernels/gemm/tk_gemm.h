/*
 * tk_gemm.h - the GEMM kernels behind gemm and bmm: one problem description,
 * the kernel configurations that can serve it (the gemm family's choices,
 * tk_tuning_gemm and tk_tuning_bmm), and measuring them. Internal to the
 * kernels and their tools (the tuner, the bench, the tests); the daemon
 * reaches gemm through tileops_kernels.h, and picks configurations through
 * the tuning interface and its own tuning table (docs/tuning.md).
 *
 *   c[b] = alpha * a[b] op(b[b]) (+ bias) (+ residual[b])
 *
 * a [M, K] row-major; b [K, N], or [N, K] when trans_b (as nn.Linear keeps
 * its weights); bias [N]; residual and c [M, N]. Leading dimensions are in
 * elements; batch strides are in elements and 0 for an operand shared by
 * every batch. Accumulation is f32; c is rounded once.
 */
#ifndef TILEOPS_TK_GEMM_H
#define TILEOPS_TK_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "tileops_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_gemm_problem {
	tk_dtype dtype; /* of a, b, bias, residual and c */
	int trans_b;
	int64_t batch, m, n, k;
	const void *a, *b, *bias, *residual; /* bias, residual may be NULL */
	void *c;
	int64_t lda, ldb, ldr, ldc;
	int64_t stride_a, stride_b, stride_r, stride_c; /* per batch, elements */
	float alpha;
	void *workspace; /* may be NULL */
	size_t workspace_bytes;
} tk_gemm_problem;

/* The kernel families. */
typedef enum tk_gemm_kind {
	TK_GEMM_SIMPLE = 0, /* tiled WMMA / SIMT: any dtype, any shape */
	TK_GEMM_SM90 = 1,   /* TMA + wgmma, warp-specialized, persistent */
	TK_GEMM_SMALLM = 2, /* M <= 128: weight streaming, split-K */
	TK_GEMM_DECODE = 3, /* M <= 128: TMA + wgmma weight streaming, cluster split-K */
	TK_GEMM_SIMT = 4,   /* f32 on the CUDA cores: 128x128 tiles, split-K */
	TK_GEMM_KIND_COUNT
} tk_gemm_kind;

/*
 * One point of the search space. Fields a kind does not use are 0.
 * cluster is the CTA cluster size along the dimension the kind documents;
 * split_k 0 or 1 means no split.
 */
typedef struct tk_gemm_config {
	int kind;
	int tile_m, tile_n, tile_k;
	int stages;
	int cluster;
	int split_k;
} tk_gemm_config;

/* "sm90 m128 n256 k64 s4 c2 sk1": for logs, the tuning table and reports. */
void tk_gemm_config_str(const tk_gemm_config *c, char *buf, size_t len);
/* Parse what tk_gemm_config_str writes; 0 on success, -1 otherwise. */
int tk_gemm_config_parse(const char *s, tk_gemm_config *c);

/* A configuration as a tk_choice of the gemm family (mode as given) and back. */
void tk_gemm_choice_of(const tk_gemm_config *cfg, int mode, tk_choice *c);
void tk_gemm_config_of(const tk_choice *c, tk_gemm_config *cfg);

/*
 * The problem of a gemm (batched 0: a [M, K], b, c 2-D) or bmm (batched 1:
 * 3-D) call, as the launchers run it. TK_ERR_UNSUPPORTED when the call's
 * tensors do not make one (the op layer has checked the op's rules; this
 * checks what the kernels need: one float dtype, matrix views, a bias of
 * N packed elements). A problem with no element (M, N or the batch 0) is
 * TK_OK: its launch does nothing.
 */
tk_status tk_gemm_problem_of(const tk_call *call, int batched, tk_gemm_problem *p);

/*
 * The configurations that can serve p (the declared search space filtered
 * by what the problem allows: dtype, alignment, M). Writes up to max of
 * them and returns how many there are in all.
 */
int tk_gemm_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);

/* Run p with config cfg on stream (a cudaStream_t). TK_ERR_UNSUPPORTED
 * when cfg cannot serve p. */
tk_status tk_gemm_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

/*
 * The built-in choice for p: what gemm and bmm run when the call carries
 * no choice (docs/kernels.md, "GEMM").
 */
void tk_gemm_builtin(const tk_gemm_problem *p, tk_gemm_config *cfg);

/*
 * The shape class of p, the tuning table's key: dtype, layout, batched or
 * not, N and K exactly (weights do not change shape), M rounded up to a
 * power of two (M >= 1). Example: "bf16 nt m128 n2112 k7168".
 */
void tk_gemm_shape_class(const tk_gemm_problem *p, char *buf, size_t len);

/*
 * Measuring on the device (CUDA builds only; gemm_measure.cu). None of
 * these is a launcher: each synchronizes, and none is ever called from
 * gemm or bmm.
 *
 * tk_gemm_tune_sets: times every candidate for n copies of one problem
 * (rotated so the L2 does not serve small weights), writing each copy's c,
 * which must be scratch; puts the fastest that computes the same result as
 * the simple kernel in *best with its median time per call in *us.
 * budget_ms caps each candidate's timing (0: 20 ms). When all is not
 * NULL, the first max_all candidates' times go there too (us <= 0: it
 * refused), *n_all says how many, to see what the winner beat. err (may be
 * NULL) says why it failed. Candidates are timed as replays of a captured
 * CUDA graph; on the legacy default stream, which cannot be captured, that
 * runs on a private stream once the work before on it is done. Refuses a
 * stream being captured (TK_ERR_UNSUPPORTED).
 *
 * tk_gemm_measure: the gemm family's tk_tuning.measure (tileops_kernels.h)
 * for a gemm or bmm call: tk_gemm_tune_sets over one copy, into scratch
 * outputs (a residual that aliases c is read as it was).
 *
 * tk_gemm_fill_random fills n elements of dtype dt (f32, f16, bf16, or
 * fp8_e4m3 codes) with values in [-1, 1) drawn from seed. tk_gemm_compare writes ||x - y|| / ||y|| over the
 * [batch, m, n] outputs x and y laid out as p->c is, and how many elements
 * of x are not finite. Both enqueue on stream; compare synchronizes it.
 */
typedef struct tk_gemm_timing {
	tk_gemm_config cfg;
	double us; /* median per call; <= 0: the candidate refused the problem */
} tk_gemm_timing;

tk_status tk_gemm_tune_sets(const tk_gemm_problem *sets, int n, void *stream, double budget_ms,
                            tk_gemm_config *best, double *us, tk_gemm_timing *all, int max_all,
                            int *n_all, char *err, size_t errlen);
tk_status tk_gemm_measure(const tk_call *call, int batched, void *stream, double budget_ms,
                          tk_choice *best, double *us, char *err, size_t errlen);
tk_status tk_gemm_fill_random(void *data, tk_dtype dt, int64_t n, uint64_t seed, void *stream);
tk_status tk_gemm_compare(const tk_gemm_problem *p, const void *x, const void *y, void *stream,
                          double *rel_err, int64_t *nonfinite);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_TK_GEMM_H */
