/*
 * tk_gemm.h - the GEMM kernels behind gemm and bmm: one problem description,
 * the kernel configurations that can serve it, and the tuning table that
 * picks one per shape class. Internal to the kernels and their tools (the
 * tuner, the bench); the daemon reaches gemm through tileops_kernels.h and
 * loads the tuning table through tk_gemm_table_load.
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
#include <stdio.h>
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

/* "sm90 m128 n256 k64 s4 c2 sk1": for logs, the cache file and reports. */
void tk_gemm_config_str(const tk_gemm_config *c, char *buf, size_t len);
/* Parse what tk_gemm_config_str writes; 0 on success, -1 otherwise. */
int tk_gemm_config_parse(const char *s, tk_gemm_config *c);

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
 * The configuration gemm and bmm use for p: the tuning table's entry for
 * p's shape class when there is one, else a built-in choice.
 */
void tk_gemm_select(const tk_gemm_problem *p, tk_gemm_config *cfg);

/*
 * The shape class of p, the tuning table's key: dtype, layout, batched or
 * not, N and K exactly (weights do not change shape), M rounded up to a
 * power of two (M >= 1). Example: "bf16 nt m128 n2112 k7168".
 */
void tk_gemm_shape_class(const tk_gemm_problem *p, char *buf, size_t len);

/*
 * The tuning table. Load replaces the table with a cache file's entries
 * (written by tileops-tune or by first-use tuning); entries for another GPU
 * are ignored. Put adds or replaces one entry. Save writes the table.
 * All are safe to call from several threads.
 */
tk_status tk_gemm_table_load(const char *path, char *err, size_t errlen);
tk_status tk_gemm_table_save(const char *path, char *err, size_t errlen);
void tk_gemm_table_put(const char *shape_class, const tk_gemm_config *cfg, double us);
int tk_gemm_table_get(const char *shape_class, tk_gemm_config *cfg);

/*
 * The cache file (docs/tuning.md): a header line "tileops-gemm-tune 1
 * gpu=NVIDIA H200 sm=90", then "shape class | config | us" lines. gemm_tune.c.
 *
 * tk_gemm_table_load_for replaces the table with the entries of path made
 * on gpu (the text after "gpu=", as tk_gemm_device_id writes it; NULL takes
 * the file's entries whatever GPU made them) and remembers gpu for save.
 * A missing file leaves an empty table and is not an error. Every line is
 * checked, also in a file made on another GPU: a malformed one fails with
 * TK_ERR_UNSUPPORTED and "FILE:LINE: what is wrong" in err, leaving the
 * table as it was. On success err holds a note ("" or why the file's
 * entries were not taken). tk_gemm_table_load is tk_gemm_table_load_for
 * with the current device (CUDA builds) or NULL (CPU-only builds).
 *
 * tk_gemm_table_check reads and checks path without changing the table
 * (for --check). tk_gemm_table_save writes the table atomically (a
 * temporary file renamed over path). tk_gemm_table_clear empties it;
 * tk_gemm_table_count says how many entries it has.
 */
/*
 * First-use tuning (the daemon's gemm_tune = first_use). tk_gemm_tune_configure
 * turns it on (first_use 1) or off and names the cache file it saves to.
 * tk_gemm_tune_if_new (CUDA builds) is called by gemm and bmm before
 * tk_gemm_select: when first-use tuning is on and p's shape class is not in
 * the table, it tunes p (tk_gemm_tune_problem) and saves the table. A
 * stream being captured is left alone (TK_OK, nothing tuned: a later call
 * outside a capture tunes). A class whose tuning fails gets the built-in
 * choice in the table (not saved), so it is not tried on every call; the
 * status and err say why it failed, for the log. Cheap when off.
 */
void tk_gemm_tune_configure(int first_use, const char *cache_path);
int tk_gemm_tune_first_use(char *cache_path, size_t len);
tk_status tk_gemm_tune_if_new(const tk_gemm_problem *p, void *stream, char *err, size_t errlen);

tk_status tk_gemm_table_load_for(const char *path, const char *gpu, char *err, size_t errlen);
tk_status tk_gemm_table_check(const char *path, char *err, size_t errlen);
void tk_gemm_table_clear(void);
int tk_gemm_table_count(void);

/*
 * Tuning on the device (CUDA builds only; cuda/gemm_tune_gpu.cu).
 *
 * tk_gemm_device_id: "NVIDIA H200 sm=90" for the current device.
 *
 * tk_gemm_tune_problem: times every candidate for p on stream and puts the
 * fastest that computes the same result as the simple kernel into the
 * table under p's shape class; *best and *us (median per call) say which.
 * Candidates write scratch outputs, never p->c (a residual that aliases c
 * is read as it was). Synchronizes the stream; refuses a stream that is
 * being captured (TK_ERR_UNSUPPORTED).
 *
 * tk_gemm_tune_sets: the same over n copies of one problem (rotated so
 * the L2 does not serve small weights), writing each copy's c, which must
 * be scratch. budget_ms caps each candidate's timing (0: 20 ms). Puts
 * nothing in the table. err (may be NULL) says why it failed. Candidates
 * are timed as replays of a captured CUDA graph; on the legacy default
 * stream, which cannot be captured, that runs on a private stream once the
 * work before on it is done.
 *
 * tk_gemm_fill_random fills n elements of dtype dt with values in [-1, 1)
 * drawn from seed. tk_gemm_compare writes ||x - y|| / ||y|| over the
 * [batch, m, n] outputs x and y laid out as p->c is, and how many elements
 * of x are not finite. Both enqueue on stream; compare synchronizes it.
 */
tk_status tk_gemm_device_id(char *buf, size_t len);
/*
 * tk_gemm_tune_trace: from now on tk_gemm_tune_sets also writes every
 * candidate's time to f ("shape class | config | us", "refused" when it
 * did not run), to see what the winner beat; NULL stops it.
 */
void tk_gemm_tune_trace(FILE *f);
tk_status tk_gemm_tune_problem(const tk_gemm_problem *p, void *stream, tk_gemm_config *best,
                               double *us);
tk_status tk_gemm_tune_sets(const tk_gemm_problem *sets, int n, void *stream, double budget_ms,
                            tk_gemm_config *best, double *us, char *err, size_t errlen);
tk_status tk_gemm_fill_random(void *data, tk_dtype dt, int64_t n, uint64_t seed, void *stream);
tk_status tk_gemm_compare(const tk_gemm_problem *p, const void *x, const void *y, void *stream,
                          double *rel_err, int64_t *nonfinite);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_TK_GEMM_H */
