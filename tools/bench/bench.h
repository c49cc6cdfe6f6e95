/*
 * bench.h - the cases of tileops-bench, made at run time from the manifest
 * (bench_cases.c): every workload of every implemented op that has a CUDA
 * kernel, at every dtype the workload lists, each checked and turned into
 * a kernel call by the op layer (oplayer_prepare), with the bytes and
 * FLOPs of the op's roofline formulas. An op added to the manifest is
 * benched with no change here.
 *
 * Ownership: bw_cases_load fills a bw_cases that owns its cases, the
 * manifest their names point into and the host values of their integer
 * inputs; bw_cases_free releases it all (a zeroed bw_cases is a no-op).
 * Nothing here touches the GPU.
 */
#ifndef TILEOPS_BENCH_H
#define TILEOPS_BENCH_H

#include "tileops_kernels.h"

#define BW_MAX_IN TK_MAX_INPUTS
#define BW_MAX_OUT TK_MAX_OUTPUTS

typedef struct bw_tensor {
	const char *name; /* the manifest's */
	int ndim;
	int64_t shape[TK_MAX_DIMS];
	tk_dtype dt;
	int mutated; /* an input the op writes in place */
	int absent;  /* an optional input the workload leaves out: the kernel sees NULL */
	/* An integer input (indices, lengths, offsets): its values, made once
	 * on the host from the op's other shapes (bw_tensor_bytes of them),
	 * and how, for --dry-run. NULL for float tensors: random values. */
	void *values;
	char fill[112];
} bw_tensor;

typedef struct bw_workload {
	const char *op, *family, *label; /* point into the manifest */
	tk_dtype dt;                     /* the workload's dtype: that of the first input */
	int n_in, n_out;
	bw_tensor in[BW_MAX_IN], out[BW_MAX_OUT];
	/* Every param with a value (the workload's or the default), by name:
	 * what a client sends, and what --list writes. */
	int n_params;
	const char *param_names[TK_MAX_PARAMS];
	tk_param params[TK_MAX_PARAMS];
	/* The call oplayer_prepare built (params in the kernel's order), data
	 * pointers NULL: each copy of the tensors fills them in. */
	tk_call call;
	const tk_kernel_entry *kernel;
	double flops, bytes; /* the roofline counts */
	char error[200];     /* not empty: the case cannot run, and why */
} bw_workload;

/* Which cases to make; NULL fields select everything. */
typedef struct bw_filter {
	const char *op;       /* a substring of the op name */
	const char *workload; /* a substring of the workload's label */
	/* A family, exactly; also one of those left out by default
	 * (bw_skipped_family). NULL: every family not left out. */
	const char *family;
} bw_filter;

typedef struct bw_cases {
	struct manifest *m;
	int n;
	bw_workload *w;
	/* The selected ops that made no cases: "name (spec)", or "name (cpu
	 * only)" when the manifest lists no cuda kernel; comma-separated. */
	char not_benched[512];
	/* The families of the manifest left out (no family asked for), each
	 * with why: "gemm (tileops-bench-gemm, against cuBLASLt), ...". */
	char skipped[512];
} bw_cases;

/*
 * Load the manifest at `path` (manifest_load: checked against the kernel
 * table) and make the cases `f` selects, in the manifest's order (files,
 * then ops as written, then workloads, then dtypes). A case the op layer
 * refuses, or whose integer inputs the bench has no rule for, is kept with
 * its error set. Returns 0, or -1 with err saying why (the manifest does
 * not load, out of memory); *c is then zeroed.
 */
int bw_cases_load(const char *path, const bw_filter *f, bw_cases *c, char *err, size_t len);
void bw_cases_free(bw_cases *c);

/*
 * Why a family is left out unless asked for by name (it has a bench of its
 * own, or is not a computation), or NULL when it is benched by default.
 */
const char *bw_skipped_family(const char *family);

/* Bytes of one tensor of a case; 0 for an absent input. */
size_t bw_tensor_bytes(const bw_tensor *t);

/*
 * Copies of a case's tensors the direct runner rotates through: at least
 * 4, and at least 256 MiB in all, so that the 60 MiB L2 does not serve them
 * (at most 1024).
 */
int bw_sets(const bw_workload *w);

/* Bytes of one copy of a case's tensors, inputs and outputs. */
double bw_set_bytes(const bw_workload *w);

/* The random values inputs are filled with (never zeros), shared by the runners. */
struct bench_host {
	const void *values[TK_DTYPE_COUNT]; /* `elems` values per float dtype, else NULL */
	size_t elems;
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
