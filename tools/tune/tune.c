/*
 * tileops-tune - measures which GEMM kernel configuration is fastest for
 * each shape class of the manifest's gemm and bmm workloads (and of extra
 * shapes) on this GPU, and writes the tuning cache file tileopsd loads
 * (gemm_tune_cache; docs/tuning.md says what is measured and how).
 *
 *   tileops-tune [--manifest DIR] [--out FILE] [--op gemm|bmm]
 *                [--shape "M,N,K,nt|nn,DTYPE[,bBATCH]"]... [--budget-ms N]
 *                [--time-limit-s N] [--trace FILE] [--list]
 *
 * At least one of --manifest and --shape: with --shape alone, only those
 * shapes (and their smaller powers of two of M) are tuned.
 *
 * A --shape with a batch (",b32") is a bmm shape: its class is the batched
 * one the daemon looks up for bmm.
 *
 * Every workload is tuned at its own M first, then at each smaller power
 * of two (the decode batch sizes those weights also serve), so a run cut
 * short by --time-limit-s still covers the manifest's shapes. Entries of
 * an existing --out file for this GPU are kept unless measured again.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_workload.h"
#include "manifest.h"
#include "tk_gemm.h"

#define MAX_JOBS 1024
#define MAX_SETS 32
#define ROTATE_BYTES ((double)(256 << 20)) /* several times the 50 MB L2 */

typedef struct job {
	tk_dtype dt;
	int trans_b;
	int64_t batch, m, n, k;
	char cls[96];
	char label[96];
} job;

struct options {
	const char *manifest, *out, *op, *trace;
	double budget_ms, time_limit_s;
	int list;
};

static job jobs[MAX_JOBS];
static int n_jobs;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void job_class(job *j)
{
	tk_gemm_problem p;

	memset(&p, 0, sizeof(p));
	p.dtype = j->dt;
	p.trans_b = j->trans_b;
	p.batch = j->batch;
	p.m = j->m;
	p.n = j->n;
	p.k = j->k;
	tk_gemm_shape_class(&p, j->cls, sizeof(j->cls));
}

/* Add j unless its shape class is there already. */
static void add_job(job j)
{
	job_class(&j);
	for (int i = 0; i < n_jobs; i++)
		if (strcmp(jobs[i].cls, j.cls) == 0)
			return;
	if (n_jobs < MAX_JOBS)
		jobs[n_jobs++] = j;
}

/* j at its own M, then (second pass) at every power of two below it. */
static void add_buckets(const job *base, int pass)
{
	job j = *base;

	if (pass == 0) {
		add_job(j);
		return;
	}
	int64_t top = 1;
	while (top < base->m)
		top <<= 1;
	for (int64_t m = top / 2; m >= 1; m /= 2) {
		j.m = m;
		add_job(j);
	}
}

/* The problem of workload w (shapes of a, index 0, and b, index 1) into j. */
static int workload_job(const manifest_op *op, const manifest_workload *w, job *j)
{
	const int64_t *a = NULL, *b = NULL;
	int batched = strcmp(op->name, "bmm") == 0, rank = batched ? 3 : 2;

	for (int i = 0; i < w->n_shapes; i++) {
		if (w->tensor[i] == 0 && w->ndim[i] == rank)
			a = w->shape[i];
		if (w->tensor[i] == 1 && w->ndim[i] == rank)
			b = w->shape[i];
	}
	if (a == NULL || b == NULL)
		return -1;
	memset(j, 0, sizeof(*j));
	j->trans_b = gemm_workload_trans_b(op, w);
	j->batch = batched ? a[0] : 1;
	j->m = a[rank - 2];
	j->k = a[rank - 1];
	j->n = j->trans_b ? b[rank - 2] : b[rank - 1];
	snprintf(j->label, sizeof(j->label), "%s %s", op->name, w->label);
	return 0;
}

static int add_manifest(const struct options *o, int pass)
{
	static const char *const ops[] = { "gemm", "bmm" };
	char err[4096];
	manifest *m = NULL;

	if (manifest_parse(o->manifest, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileops-tune: %s\n", err);
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		const manifest_op *op = manifest_find(m, ops[k]);
		if (op == NULL || (o->op != NULL && strcmp(o->op, ops[k]) != 0))
			continue;
		for (int w = 0; w < op->n_workloads; w++) {
			job j;
			if (workload_job(op, &op->workloads[w], &j) != 0) {
				fprintf(stderr,
				        "tileops-tune: %s workload '%s' gives no a and b shape\n",
				        op->name, op->workloads[w].label);
				continue;
			}
			for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
				if (!(op->workloads[w].dtypes & (1u << dt)))
					continue;
				j.dt = (tk_dtype)dt;
				add_buckets(&j, pass);
			}
		}
	}
	manifest_free(m);
	return 0;
}

/* "M,N,K,nt|nn,DTYPE[,bBATCH]": a batch makes it a bmm shape (c[b] = a[b] b[b]). */
static int parse_shape(const char *s, job *j)
{
	char lay[8], dt[16];
	long long m, n, k, batch = 1;
	int end = 0, used = 0;

	memset(j, 0, sizeof(*j));
	if (sscanf(s, "%lld,%lld,%lld,%7[^,],%15[^,]%n", &m, &n, &k, lay, dt, &end) != 5 || m < 1 ||
	    n < 1 || k < 1 || (strcmp(lay, "nt") != 0 && strcmp(lay, "nn") != 0))
		return -1;
	if (s[end] != '\0' &&
	    (sscanf(s + end, ",b%lld%n", &batch, &used) != 1 || s[end + used] != '\0' || batch < 1))
		return -1;
	j->dt = tk_dtype_parse(dt);
	if (j->dt != TK_BF16 && j->dt != TK_F16 && j->dt != TK_F32)
		return -1;
	j->trans_b = strcmp(lay, "nt") == 0;
	j->batch = batch;
	j->m = m;
	j->n = n;
	j->k = k;
	snprintf(j->label, sizeof(j->label), "--shape %s", s);
	return 0;
}

/* ---- one job on the device ---------------------------------------------- */

struct buffers {
	void *ws;
	void *a[MAX_SETS], *b[MAX_SETS], *c[MAX_SETS];
	int sets;
};

static void free_buffers(struct buffers *bf)
{
	cudaFree(bf->ws);
	for (int i = 0; i < MAX_SETS; i++) {
		cudaFree(bf->a[i]);
		cudaFree(bf->b[i]);
		cudaFree(bf->c[i]);
	}
	memset(bf, 0, sizeof(*bf));
}

static int alloc_fill(void **p, size_t elems, tk_dtype dt, uint64_t seed, cudaStream_t s)
{
	if (cudaMalloc(p, elems * tk_dtype_size(dt)) != cudaSuccess) {
		*p = NULL;
		cudaGetLastError();
		return -1;
	}
	return tk_gemm_fill_random(*p, dt, (int64_t)elems, seed, s) == TK_OK ? 0 : -1;
}

/*
 * As many sets of a, b and c as it takes for the rotation to outgrow the
 * L2, as the bench rotates them: with one a and one c, the activations of
 * a product could stay in L2 between calls and every call wrote the same
 * c lines, conditions no caller sees.
 */
static int make_buffers(const job *j, struct buffers *bf, cudaStream_t s)
{
	size_t es = tk_dtype_size(j->dt);
	size_t a_el = (size_t)(j->batch * j->m * j->k), b_el = (size_t)(j->batch * j->n * j->k);
	size_t c_el = (size_t)(j->batch * j->m * j->n);
	double set_bytes = (double)(a_el + b_el + c_el) * (double)es;
	int sets = (int)(ROTATE_BYTES / set_bytes) + 1;

	memset(bf, 0, sizeof(*bf));
	sets = sets > MAX_SETS ? MAX_SETS : sets;
	if (cudaMalloc(&bf->ws, TK_WORKSPACE_BYTES) != cudaSuccess) {
		bf->ws = NULL;
		return -1;
	}
	for (bf->sets = 0; bf->sets < sets; bf->sets++) {
		int i = bf->sets;
		if (alloc_fill(&bf->a[i], a_el, j->dt, 1 + (uint64_t)i, s) != 0 ||
		    alloc_fill(&bf->b[i], b_el, j->dt, 100 + (uint64_t)i, s) != 0 ||
		    cudaMalloc(&bf->c[i], c_el * es) != cudaSuccess) {
			bf->c[i] = NULL;
			return -1;
		}
	}
	return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}

static void problem_of(const job *j, const struct buffers *bf, int set, tk_gemm_problem *p)
{
	memset(p, 0, sizeof(*p));
	p->dtype = j->dt;
	p->trans_b = j->trans_b;
	p->batch = j->batch;
	p->m = j->m;
	p->n = j->n;
	p->k = j->k;
	p->a = bf->a[set];
	p->b = bf->b[set];
	p->c = bf->c[set];
	p->lda = j->k;
	p->ldb = j->trans_b ? j->k : j->n;
	p->ldc = j->n;
	p->stride_a = j->m * j->k;
	p->stride_b = j->n * j->k;
	p->stride_c = j->m * j->n;
	p->alpha = 1.0f;
	p->workspace = bf->ws;
	p->workspace_bytes = TK_WORKSPACE_BYTES;
}

/* Tune j; 0, 1 when it could not be tuned, -1 when the device is unusable. */
static int tune_job(const job *j, const struct options *o, cudaStream_t s)
{
	struct buffers bf;
	tk_gemm_problem sets[MAX_SETS];
	tk_gemm_config best, cand[256];
	double us, t0 = now_s();
	char err[512], cfg[96];
	int rc = 0;

	if (make_buffers(j, &bf, s) != 0) {
		fprintf(stderr, "tileops-tune: %s: cannot allocate or fill the inputs: %s\n",
		        j->cls, cudaGetErrorString(cudaGetLastError()));
		free_buffers(&bf);
		return 1;
	}
	for (int i = 0; i < bf.sets; i++)
		problem_of(j, &bf, i, &sets[i]);
	int nc = tk_gemm_candidates(&sets[0], cand, 256);
	tk_status st =
	        tk_gemm_tune_sets(sets, bf.sets, s, o->budget_ms, &best, &us, err, sizeof(err));
	if (st == TK_OK) {
		tk_gemm_table_put(j->cls, &best, us);
		tk_gemm_config_str(&best, cfg, sizeof(cfg));
		double tflops = 2.0 * (double)(j->batch * j->m) * (double)j->n * (double)j->k /
		                (us * 1e-6) / 1e12;
		printf("%-30s | %-32s | %10.2f us | %7.1f TFLOP/s | %3d candidates, %d sets, "
		       "%.1f s | %s\n",
		       j->cls, cfg, us, tflops, nc, bf.sets, now_s() - t0, j->label);
	} else {
		fprintf(stderr, "tileops-tune: %s (%s): %s\n", j->cls, j->label, err);
		rc = st == TK_ERR_LAUNCH ? -1 : 1;
	}
	fflush(stdout);
	free_buffers(&bf);
	return rc;
}

/* ---- main ---------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr,
	        "usage: tileops-tune [--manifest DIR] [--out FILE] [--op gemm|bmm]\n"
	        "                    [--shape \"M,N,K,nt|nn,DTYPE[,bBATCH]\"]... [--budget-ms N]\n"
	        "                    [--time-limit-s N] [--trace FILE]\n"
	        "  (at least one of --manifest and --shape)\n"
	        "  --out FILE        the cache file to write (default gemm-tune.txt); its\n"
	        "                    entries for this GPU are kept unless measured again\n"
	        "  --budget-ms N     timing per candidate (default 20)\n"
	        "  --time-limit-s N  start no new shape after N seconds (default 210)\n"
	        "  --trace FILE      write every candidate's time to FILE\n"
	        "  --list            print the shape classes it would tune, in order, and exit\n");
	return 2;
}

static int parse_args(int argc, char **argv, struct options *o, job *extra, int *n_extra)
{
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--list")) {
			o->list = 1;
			continue;
		}
		if (v == NULL)
			return -1;
		if (!strcmp(argv[i], "--manifest"))
			o->manifest = v;
		else if (!strcmp(argv[i], "--out"))
			o->out = v;
		else if (!strcmp(argv[i], "--trace"))
			o->trace = v;
		else if (!strcmp(argv[i], "--op") && (!strcmp(v, "gemm") || !strcmp(v, "bmm")))
			o->op = v;
		else if (!strcmp(argv[i], "--budget-ms") && atof(v) > 0)
			o->budget_ms = atof(v);
		else if (!strcmp(argv[i], "--time-limit-s") && atof(v) > 0)
			o->time_limit_s = atof(v);
		else if (!strcmp(argv[i], "--shape") && *n_extra < 64) {
			if (parse_shape(v, &extra[*n_extra]) != 0) {
				fprintf(stderr,
				        "tileops-tune: --shape '%s' is not "
				        "M,N,K,nt|nn,bf16|f16|f32[,bBATCH]\n",
				        v);
				return -1;
			}
			(*n_extra)++;
		} else
			return -1;
		i++;
	}
	if (o->manifest == NULL && *n_extra == 0) {
		fprintf(stderr,
		        "tileops-tune: nothing to tune: give --manifest DIR, --shape, or both\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options o = { NULL, "gemm-tune.txt", NULL, NULL, 20.0, 210.0, 0 };
	job extra[64];
	int n_extra = 0, tuned = 0, failed = 0, skipped = 0;
	char gpu[160], err[4096];
	cudaStream_t s;

	if (parse_args(argc, argv, &o, extra, &n_extra) != 0)
		return usage();
	for (int pass = 0; pass < 2; pass++) {
		if (o.manifest != NULL && add_manifest(&o, pass) != 0)
			return 1;
		for (int i = 0; i < n_extra; i++)
			add_buckets(&extra[i], pass);
	}
	if (o.list) {
		for (int i = 0; i < n_jobs; i++)
			printf("%-30s %s\n", jobs[i].cls, jobs[i].label);
		return 0;
	}
	if (cudaSetDevice(0) != cudaSuccess || tk_gemm_device_id(gpu, sizeof(gpu)) != TK_OK ||
	    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
		fprintf(stderr, "tileops-tune: no usable CUDA device: %s\n",
		        cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	if (tk_gemm_table_load_for(o.out, gpu, err, sizeof(err)) != TK_OK) {
		fprintf(stderr, "tileops-tune: %s (fix or remove it; it is not overwritten)\n",
		        err);
		return 1;
	}
	if (err[0] != '\0')
		fprintf(stderr, "tileops-tune: %s\n", err);
	FILE *trace = NULL;
	if (o.trace != NULL && (trace = fopen(o.trace, "w")) == NULL) {
		fprintf(stderr, "tileops-tune: cannot write %s: %s\n", o.trace, strerror(errno));
		return 1;
	}
	tk_gemm_tune_trace(trace);
	printf("tileops-tune: gpu=%s, %d shape classes, %d kept from %s\n", gpu, n_jobs,
	       tk_gemm_table_count(), o.out);
	double t0 = now_s();
	for (int i = 0; i < n_jobs; i++) {
		if (now_s() - t0 > o.time_limit_s) {
			skipped = n_jobs - i;
			break;
		}
		int rc = tune_job(&jobs[i], &o, s);
		if (rc < 0) {
			fprintf(stderr,
			        "tileops-tune: the device faulted; saving what was measured\n");
			skipped = n_jobs - i - 1;
			failed++;
			break;
		}
		if (rc == 0)
			tuned++;
		else
			failed++;
	}
	tk_gemm_tune_trace(NULL);
	if (trace != NULL)
		fclose(trace);
	if (tk_gemm_table_save(o.out, err, sizeof(err)) != TK_OK) {
		fprintf(stderr, "tileops-tune: %s\n", err);
		return 1;
	}
	printf("tileops-tune: %d tuned, %d failed, %d skipped (time limit) in %.1f s; %d entries "
	       "in %s\n",
	       tuned, failed, skipped, now_s() - t0, tk_gemm_table_count(), o.out);
	cudaStreamDestroy(s);
	return failed > 0 ? 1 : 0;
}
