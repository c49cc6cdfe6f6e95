/*
 * tileops-tune - measures, on this GPU, which choice of each tunable kernel
 * family (the kernel table's tuning interfaces: gemm and bmm, attention
 * prefill, attention decode) is fastest for each shape class of the
 * manifest's workloads (and of extra GEMM shapes), and writes the one
 * tuning table tileopsd loads (gemm_tune_cache; docs/tuning.md says what
 * is measured and how).
 *
 *   tileops-tune [--manifest DIR] [--out FILE] [--op OP]
 *                [--shape "M,N,K,nt|nn,DTYPE[,bBATCH]"]... [--budget-ms N]
 *                [--time-limit-s N] [--trace FILE] [--pdl on|off] [--list]
 *
 * At least one of --manifest and --shape: with --shape alone, only those
 * GEMM shapes (and their smaller powers of two of M) are tuned. --op keeps
 * the manifest's workloads of one op (gemm, bmm, attention_prefill, ...).
 *
 * A --shape with a batch (",b32") is a bmm shape: its class is the batched
 * one the daemon looks up for bmm.
 *
 * Every workload is tuned at its own shape first, then the GEMMs at each
 * smaller power of two of M (the decode batch sizes those weights also
 * serve), so a run cut short by --time-limit-s still covers the manifest's
 * shapes. Entries of an existing --out file for this GPU are kept unless
 * measured again.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_workload.h"
#include "manifest.h"
#include "tune.h"

#define MAX_JOBS 1024

static tune_job jobs[MAX_JOBS];
static int n_jobs;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int is_gemm(const tune_job *j)
{
	return !strcmp(j->entry->op, "gemm") || !strcmp(j->entry->op, "bmm");
}

static tk_tensor shaped(tk_dtype dt, int ndim, const int64_t *shape)
{
	tk_tensor t;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		t.shape[d] = shape[d];
	tk_set_contiguous(&t);
	return t;
}

/* The call a gemm or bmm job describes, shapes only. */
static void gemm_call(tune_job *j)
{
	tk_call *c = &j->call;
	int bmm = !strcmp(j->entry->op, "bmm"), off = bmm ? 0 : 1, nd = bmm ? 3 : 2;
	int64_t a[3] = { j->batch, j->m, j->k }, o[3] = { j->batch, j->m, j->n };
	int64_t b[3] = { j->batch, j->trans_b ? j->n : j->k, j->trans_b ? j->k : j->n };

	memset(c, 0, sizeof(*c));
	c->n_in = 2;
	c->n_out = 1;
	c->n_params = 2;
	c->params[0].kind = TK_PARAM_FLOAT;
	c->params[0].v.f = 1.0;
	c->params[1].kind = TK_PARAM_BOOL;
	c->params[1].v.b = j->trans_b;
	c->in[0] = shaped(j->dt, nd, a + off);
	c->in[1] = shaped(j->dt, nd, b + off);
	c->out[0] = shaped(j->dt, nd, o + off);
}

/* Add j unless its class is there already (or it has none: the kernel cannot serve it). */
static void add_job(tune_job j)
{
	if (is_gemm(&j))
		gemm_call(&j);
	if (j.entry->tuning->shape_class(&j.call, j.cls, sizeof(j.cls)) != 0) {
		fprintf(stderr, "tileops-tune: %s: the CUDA kernel does not serve it; skipped\n",
		        j.label);
		return;
	}
	for (int i = 0; i < n_jobs; i++)
		if (!strcmp(jobs[i].entry->tuning->family, j.entry->tuning->family) &&
		    !strcmp(jobs[i].cls, j.cls))
			return;
	if (n_jobs < MAX_JOBS)
		jobs[n_jobs++] = j;
}

/* j at its own shape, then (second pass, GEMMs) at every power of two of M below it. */
static void add_buckets(const tune_job *base, int pass)
{
	tune_job j = *base;

	if (pass == 0) {
		add_job(j);
		return;
	}
	if (!is_gemm(base))
		return;
	int64_t top = 1;
	while (top < base->m)
		top <<= 1;
	for (int64_t m = top / 2; m >= 1; m /= 2) {
		j.m = m;
		add_job(j);
	}
}

/* The problem of gemm or bmm workload w (shapes of a, index 0, and b, index 1) into j. */
static int gemm_job(const manifest_op *op, const manifest_workload *w, tune_job *j)
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
	j->trans_b = gemm_workload_trans_b(op, w);
	j->batch = batched ? a[0] : 1;
	j->m = a[rank - 2];
	j->k = a[rank - 1];
	j->n = j->trans_b ? b[rank - 2] : b[rank - 1];
	return 0;
}

/* Param p of op in workload w: its value there, else the op's default. */
static tk_param workload_param(const manifest_op *op, const manifest_workload *w, int p)
{
	tk_param none = { TK_PARAM_NONE, { 0 } };

	for (int i = 0; i < w->n_params; i++)
		if (w->param[i] == p)
			return w->value[i];
	return op->params[p].has_default ? op->params[p].def : none;
}

/* A tensor's dtype in a workload whose first input is dt: its one allowed dtype, else dt. */
static tk_dtype tensor_dtype(const manifest_dtype_rule *r, tk_dtype dt)
{
	if (r->same_as < 0 && r->mask != 0 && (r->mask & (r->mask - 1)) == 0)
		for (int d = 1; d < TK_DTYPE_COUNT; d++)
			if (r->mask == 1u << d)
				return (tk_dtype)d;
	return dt;
}

/*
 * The call of an attention workload, shapes only: its inputs as the
 * workload gives them, the one output out [.., Dv] (q's shape with v's
 * head dim), params in the kernel's order.
 */
static int choice_job(const manifest_op *op, const manifest_workload *w, tk_dtype dt, tune_job *j)
{
	tk_call *c = &j->call;
	const char *const *names = j->entry->params;

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < w->n_shapes; i++) {
		int t = w->tensor[i];
		if (t >= op->n_in || t >= TK_MAX_INPUTS)
			continue;
		tk_dtype tdt = tensor_dtype(&op->tensors[t].dtype, dt);
		c->in[t] = shaped(tdt, w->ndim[i], w->shape[i]);
		c->n_in = c->n_in > t + 1 ? c->n_in : t + 1;
	}
	if (c->n_in < 3 || c->in[0].ndim < 1 || c->in[2].ndim < 1)
		return -1;
	c->out[0] = c->in[0];
	c->out[0].dtype = dt;
	c->out[0].shape[c->out[0].ndim - 1] = c->in[2].shape[c->in[2].ndim - 1];
	tk_set_contiguous(&c->out[0]);
	c->n_out = 1;
	for (int n = 0; names && names[n] && n < TK_MAX_PARAMS; n++) {
		for (int p = 0; p < op->n_params; p++)
			if (!strcmp(op->params[p].name, names[n]))
				c->params[n] = workload_param(op, w, p);
		c->n_params = n + 1;
	}
	j->dt = dt;
	return 0;
}

static int add_manifest(const tune_options *o, int pass)
{
	char err[4096];
	manifest *m = NULL;

	if (manifest_parse(o->manifest, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileops-tune: %s\n", err);
		return -1;
	}
	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];
		const tk_kernel_entry *e = tk_kernel_find(op->name);
		if (e == NULL || e->tuning == NULL || (o->op && strcmp(o->op, op->name) != 0))
			continue;
		for (int w = 0; w < op->n_workloads; w++) {
			const manifest_workload *wl = &op->workloads[w];
			for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
				tune_job j;
				if (!(wl->dtypes & (1u << dt)))
					continue;
				memset(&j, 0, sizeof(j));
				j.entry = e;
				j.dt = (tk_dtype)dt;
				snprintf(j.label, sizeof(j.label), "%s %s", op->name, wl->label);
				int bad = !strcmp(op->name, "gemm") || !strcmp(op->name, "bmm")
				                  ? gemm_job(op, wl, &j)
				                  : choice_job(op, wl, (tk_dtype)dt, &j);
				if (bad) {
					fprintf(stderr,
					        "tileops-tune: %s workload '%s' gives no call\n",
					        op->name, wl->label);
					break;
				}
				add_buckets(&j, pass);
			}
		}
	}
	manifest_free(m);
	return 0;
}

/* "M,N,K,nt|nn,DTYPE[,bBATCH]": a batch makes it a bmm shape (c[b] = a[b] b[b]). */
static int parse_shape(const char *s, tune_job *j)
{
	char lay[8], dt[16];
	long long m, n, k, batch = 1;
	int end = 0, used = 0, batched = 0;

	memset(j, 0, sizeof(*j));
	if (sscanf(s, "%lld,%lld,%lld,%7[^,],%15[^,]%n", &m, &n, &k, lay, dt, &end) != 5 || m < 1 ||
	    n < 1 || k < 1 || (strcmp(lay, "nt") != 0 && strcmp(lay, "nn") != 0))
		return -1;
	if (s[end] != '\0') {
		if (sscanf(s + end, ",b%lld%n", &batch, &used) != 1 || s[end + used] != '\0' ||
		    batch < 1)
			return -1;
		batched = 1;
	}
	j->dt = tk_dtype_parse(dt);
	if (j->dt != TK_BF16 && j->dt != TK_F16 && j->dt != TK_F32)
		return -1;
	j->entry = tk_kernel_find(batched ? "bmm" : "gemm");
	j->trans_b = strcmp(lay, "nt") == 0;
	j->batch = batch;
	j->m = m;
	j->n = n;
	j->k = k;
	snprintf(j->label, sizeof(j->label), "--shape %s", s);
	return j->entry && j->entry->tuning ? 0 : -1;
}

void tune_trace_line(FILE *trace, const tune_job *j, const tk_choice *c, double us)
{
	char text[TK_TUNING_TEXT_MAX] = "?";

	if (trace == NULL)
		return;
	j->entry->tuning->format_choice(c, text, sizeof(text));
	if (us > 0.0)
		fprintf(trace, "%s | %s | %s | %.3f\n", j->entry->tuning->family, j->cls, text, us);
	else
		fprintf(trace, "%s | %s | %s | refused\n", j->entry->tuning->family, j->cls, text);
}

/* ---- main ---------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr,
	        "usage: tileops-tune [--manifest DIR] [--out FILE] [--op OP]\n"
	        "                    [--shape \"M,N,K,nt|nn,DTYPE[,bBATCH]\"]... [--budget-ms N]\n"
	        "                    [--time-limit-s N] [--trace FILE] [--pdl on|off] [--list]\n"
	        "  (at least one of --manifest and --shape)\n"
	        "  --out FILE        the tuning table to write (default gemm-tune.txt); its\n"
	        "                    entries for this GPU are kept unless measured again\n"
	        "  --op OP           only OP's workloads (gemm, bmm, attention_prefill, ...)\n"
	        "  --budget-ms N     timing per candidate (default 20)\n"
	        "  --time-limit-s N  start no new shape after N seconds (default 210)\n"
	        "  --trace FILE      write every candidate's time to FILE\n"
	        "  --pdl on|off      launch with programmatic dependent launch, as tileopsd\n"
	        "                    does by default (default on)\n"
	        "  --list            print the shape classes it would tune, in order, and exit\n");
	return 2;
}

static int parse_args(int argc, char **argv, tune_options *o, tune_job *extra, int *n_extra)
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
		else if (!strcmp(argv[i], "--op") && tk_kernel_find(v) && tk_kernel_find(v)->tuning)
			o->op = v;
		else if (!strcmp(argv[i], "--pdl") && (!strcmp(v, "on") || !strcmp(v, "off")))
			o->pdl = !strcmp(v, "on");
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

/* Measure job j and record it; 0, 1 (not measured), -1 (the device is unusable). */
static int run_job(const tune_job *j, const tune_options *o, tuning *t, cudaStream_t s, FILE *trace)
{
	char err[512] = "", text[TK_TUNING_TEXT_MAX] = "?";
	double t0 = now_s();
	tune_result r;
	int rc = is_gemm(j) ? tune_gemm_job(j, o, s, trace, &r, err, sizeof(err))
	                    : tune_choices_job(j, o, s, trace, &r, err, sizeof(err));

	if (rc != 0) {
		fprintf(stderr, "tileops-tune: %s %s (%s): %s\n", j->entry->tuning->family, j->cls,
		        j->label, err);
		return rc;
	}
	if (tuning_put(t, j->entry->tuning->family, j->cls, &r.best, r.us) != TILEOPS_OK) {
		fprintf(stderr, "tileops-tune: %s: out of memory\n", j->cls);
		return 1;
	}
	j->entry->tuning->format_choice(&r.best, text, sizeof(text));
	printf("%-17s | %-40s | %-30s | %10.2f us | %3d candidates, %d sets, %.1f s | %s\n",
	       j->entry->tuning->family, j->cls, text, r.us, r.candidates, r.sets, now_s() - t0,
	       j->label);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	tune_options o = { NULL, "gemm-tune.txt", NULL, NULL, 20.0, 210.0, 0, 1 };
	static tune_job extra[64];
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
			printf("%-17s %-40s %s\n", jobs[i].entry->tuning->family, jobs[i].cls,
			       jobs[i].label);
		return 0;
	}
	if (cudaSetDevice(0) != cudaSuccess || tk_cuda_device_id(0, gpu, sizeof(gpu)) != TK_OK ||
	    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
		fprintf(stderr, "tileops-tune: no usable CUDA device: %s\n",
		        cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	tk_cuda_set_pdl(o.pdl);
	tuning *t = tuning_new(gpu);
	if (t == NULL || tuning_load(t, o.out, err, sizeof(err)) != TILEOPS_OK) {
		fprintf(stderr, "tileops-tune: %s (fix or remove it; it is not overwritten)\n",
		        t ? err : "out of memory");
		return 1;
	}
	if (err[0] != '\0')
		fprintf(stderr, "tileops-tune: %s\n", err);
	FILE *trace = NULL;
	if (o.trace != NULL && (trace = fopen(o.trace, "w")) == NULL) {
		fprintf(stderr, "tileops-tune: cannot write %s: %s\n", o.trace, strerror(errno));
		return 1;
	}
	printf("tileops-tune: gpu=%s, %d shape classes, %d kept from %s, pdl %s\n", gpu, n_jobs,
	       tuning_count(t), o.out, o.pdl ? "on" : "off");
	double t0 = now_s();
	for (int i = 0; i < n_jobs; i++) {
		if (now_s() - t0 > o.time_limit_s) {
			skipped = n_jobs - i;
			break;
		}
		int rc = run_job(&jobs[i], &o, t, s, trace);
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
	if (trace != NULL)
		fclose(trace);
	if (tuning_save(t, o.out, err, sizeof(err)) != TILEOPS_OK) {
		fprintf(stderr, "tileops-tune: %s\n", err);
		return 1;
	}
	printf("tileops-tune: %d tuned, %d failed, %d skipped (time limit) in %.1f s; %d entries "
	       "in %s\n",
	       tuned, failed, skipped, now_s() - t0, tuning_count(t), o.out);
	tuning_free(t);
	cudaStreamDestroy(s);
	return failed > 0 ? 1 : 0;
}
