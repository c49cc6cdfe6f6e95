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

/* Bytes of tensor t of workload w. */
size_t bw_tensor_bytes(const bw_workload *w, const bw_tensor *t);

/*
 * 1 for the op families tileops-bench leaves to their own benches (gemm,
 * attention): their integer and index inputs would be random garbage here.
 */
int bw_skipped(const char *op);

/* The random values inputs are filled with (never zeros), shared by the runners. */
struct bench_host {
	const void *values[TK_DTYPE_COUNT]; /* `elems` values per float dtype, else NULL */
	size_t elems;
	double (*rand_unit)(void); /* uniform in [0, 1), for index inputs */
};

/*
 * The tileopsd runner (bench_daemon.c). bench_daemon_open connects to the
 * daemon at `address` (on failure *out is NULL and err says why);
 * bench_daemon_close closes it (NULL is a no-op). bench_daemon_time
 * creates the workload's tensors in the daemon, times `runs` submissions
 * back to back and writes the time per op in microseconds to *us; it frees
 * what it created and returns 0, or -1 with err saying what failed.
 */
struct bench_daemon;
int bench_daemon_open(const char *address, struct bench_daemon **out, char *err, size_t len);
void bench_daemon_close(struct bench_daemon *d);
int bench_daemon_time(struct bench_daemon *d, const bw_workload *w, int runs,
                      const struct bench_host *h, double *us, char *err, size_t len);

#endif /* TILEOPS_BENCH_H */
