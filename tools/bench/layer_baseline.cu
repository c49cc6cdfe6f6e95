/*
 * tileops-bench-layer-baseline - the decode layer of tileops-bench-layer
 * (layer_spec.h) run in-process, without tileopsd: the same L1
 * launchers the daemon calls, on one stream of this process, with the same
 * sizes and contents. The figures the plan bench is held to
 * (docs/perf.md, "A decode layer: single ops and plans").
 *
 *   tileops-bench-layer-baseline [--runs N] [--warmup W] [--json FILE] [layer sizes]
 *   tileops-bench-layer-baseline --procs P [--layers R] [--label NAME] [layer sizes]
 *
 * For each batch size:
 *  - eager_layer_us: the 13 launches one by one, then
 *    cudaStreamSynchronize; median over N (200) layers;
 *  - graph_layer_us: the 13 launches captured once into a CUDA graph,
 *    then cudaGraphLaunch + cudaStreamSynchronize per layer; median over N;
 *  - op_gpu_us and kernel_sum_us: each launch between two CUDA events;
 *    medians per op and of the per-layer sums over N;
 *  - eager_overhead_per_op_us = (eager_layer_us - kernel_sum_us) / 13 and
 *    graph_overhead_us = graph_layer_us - kernel_sum_us.
 * Each loop runs W (20) times first. The graph's output is checked to equal
 * the eager launches' output bit for bit, before and after the loops.
 *
 * --procs P forks P processes before any CUDA call; each makes its own
 * context (or joins the MPS server when one runs: --label names the row),
 * builds and checks the layer and its graph, replays it W times, then from
 * a common start R (200) times with a synchronize each:
 * procs_graph_layers_per_s is P * R over the time to the last process's
 * end, per batch size. The side tileops-bench-layer --procs is held to.
 *
 * Every measurement is one JSON line (--json FILE, appended, else stdout);
 * a markdown table ends the output. Exit status 0 only when every CUDA call
 * succeeded and every check passed.
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "bench_common.h"
#include "layer_spec.h"
#include "tk_internal.h"

#define PROG "tileops-bench-layer-baseline"

namespace
{

struct options {
	long runs = 200, warmup = 20, layers = 200;
	int procs = 0;
	const char *label = "contexts";
	const char *json = NULL;
	layer_config cfg;
};

/* The layer on the device: its buffers and one tk_call per op. */
struct layer {
	layer_dims d;
	cudaStream_t stream;
	void *buf[LT_COUNT];
	tk_call call[LAYER_N_OPS];
	tk_cuda_fn fn[LAYER_N_OPS];
};

tk_tensor view(const layer *L, int t)
{
	tk_tensor v;

	memset(&v, 0, sizeof(v));
	v.data = L->buf[t];
	v.dtype = layer_tensor_dtype(t) == LAYER_I32 ? TK_I32 : TK_BF16;
	v.ndim = layer_tensor_shape(&L->d, t, v.shape);
	tk_set_contiguous(&v);
	return v;
}

/* Params in the order the kernel reads them, as the daemon's op layer fills them. */
void fill_params(const tk_kernel_entry *e, const layer_dims *d, int i, tk_call *c)
{
	layer_param p[LAYER_MAX_OP_PARAMS];
	int np = layer_op_params(d, i, p);

	c->n_params = 0;
	for (int k = 0; e->params && e->params[k]; k++) {
		int j = 0;
		while (j < np && strcmp(p[j].name, e->params[k]) != 0)
			j++;
		if (j == np) {
			fprintf(stderr,
			        PROG ": %s reads param '%s', which the layer does not give\n",
			        e->op, e->params[k]);
			exit(1);
		}
		tk_param *tp = &c->params[c->n_params++];
		if (p[j].kind == 'i') {
			tp->kind = TK_PARAM_INT;
			tp->v.i = (int64_t)p[j].value;
		} else if (p[j].kind == 'b') {
			tp->kind = TK_PARAM_BOOL;
			tp->v.b = p[j].value != 0.0;
		} else {
			tp->kind = TK_PARAM_FLOAT;
			tp->v.f = p[j].value;
		}
	}
}

void layer_init(layer *L, const layer_dims *d)
{
	size_t max = 0;

	memset(L, 0, sizeof(*L));
	L->d = *d;
	CK(cudaStreamCreateWithFlags(&L->stream, cudaStreamNonBlocking));
	for (int t = 0; t < LT_COUNT; t++)
		max = layer_tensor_bytes(d, t) > max ? layer_tensor_bytes(d, t) : max;
	void *host = malloc(max);
	if (host == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	for (int t = 0; t < LT_COUNT; t++) {
		size_t bytes = layer_tensor_bytes(d, t);
		CK(cudaMalloc(&L->buf[t], bytes));
		layer_tensor_fill(d, t, host);
		CK(cudaMemcpy(L->buf[t], host, bytes, cudaMemcpyHostToDevice));
	}
	free(host);
	for (int i = 0; i < LAYER_N_OPS; i++) {
		const layer_op *lo = &layer_ops[i];
		const tk_kernel_entry *e = tk_kernel_find(lo->op);
		tk_call *c = &L->call[i];

		if (e == NULL || e->cuda == NULL) {
			fprintf(stderr, PROG ": the kernel table has no CUDA %s\n", lo->op);
			exit(1);
		}
		L->fn[i] = e->cuda;
		memset(c, 0, sizeof(*c));
		c->n_in = lo->n_in;
		for (int k = 0; k < lo->n_in; k++)
			c->in[k] = view(L, lo->in[k]);
		c->n_out = lo->out >= 0 ? 1 : 0;
		if (lo->out >= 0)
			c->out[0] = view(L, lo->out);
		fill_params(e, d, i, c);
	}
}

void layer_destroy(layer *L)
{
	for (int t = 0; t < LT_COUNT; t++)
		CK(cudaFree(L->buf[t]));
	CK(cudaStreamDestroy(L->stream));
}

void launch(layer *L, int i)
{
	if (L->fn[i](&L->call[i], L->stream) != TK_OK) {
		fprintf(stderr, PROG ": the L1 launcher of %s (%s) failed\n", layer_ops[i].op,
		        layer_ops[i].label);
		exit(1);
	}
}

void launch_layer(layer *L)
{
	for (int i = 0; i < LAYER_N_OPS; i++)
		launch(L, i);
}

struct graph {
	cudaGraph_t g;
	cudaGraphExec_t exec;
};

void graph_capture(layer *L, graph *G)
{
	CK(cudaStreamBeginCapture(L->stream, cudaStreamCaptureModeThreadLocal));
	launch_layer(L);
	CK(cudaStreamEndCapture(L->stream, &G->g));
	CK(cudaGraphInstantiate(&G->exec, G->g, 0));
}

/* Poison y, run the layer one way, and read y back. */
void layer_output(layer *L, const graph *G, uint16_t *host)
{
	size_t bytes = layer_tensor_bytes(&L->d, LT_Y);

	CK(cudaMemsetAsync(L->buf[LT_Y], 0xff, bytes, L->stream));
	if (G != NULL)
		CK(cudaGraphLaunch(G->exec, L->stream));
	else
		launch_layer(L);
	CK(cudaStreamSynchronize(L->stream));
	CK(cudaMemcpy(host, L->buf[LT_Y], bytes, cudaMemcpyDeviceToHost));
}

/* The graph's y equals the eager launches' y exactly, and is finite. */
void layer_check(layer *L, const graph *G)
{
	int64_t n = layer_tensor_numel(&L->d, LT_Y);
	size_t bytes = layer_tensor_bytes(&L->d, LT_Y);
	uint16_t *ref = static_cast<uint16_t *>(malloc(bytes));
	uint16_t *got = static_cast<uint16_t *>(malloc(bytes));

	if (ref == NULL || got == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	layer_output(L, NULL, ref);
	layer_output(L, G, got);
	for (int64_t i = 0; i < n; i++) {
		float r = layer_bf16_to_f32(ref[i]);
		if (!isfinite(r) || ref[i] != got[i]) {
			fprintf(stderr,
			        PROG ": batch %ld: y[%ld] is %g from the graph and %g launched "
			             "one by one: expected equal and finite\n",
			        (long)L->d.batch, (long)i, (double)layer_bf16_to_f32(got[i]),
			        (double)r);
			exit(1);
		}
	}
	free(ref);
	free(got);
}

/* ---- the loops ---------------------------------------------------------------- */

double eager_once(layer *L)
{
	double t0 = bench_now_us();

	launch_layer(L);
	CK(cudaStreamSynchronize(L->stream));
	return bench_now_us() - t0;
}

double graph_once(layer *L, const graph *G)
{
	double t0 = bench_now_us();

	CK(cudaGraphLaunch(G->exec, L->stream));
	CK(cudaStreamSynchronize(L->stream));
	return bench_now_us() - t0;
}

/* Each op between events; gpu[i] its time in microseconds. */
void timed_once(layer *L, cudaEvent_t *ev, double *gpu)
{
	float ms;

	for (int i = 0; i < LAYER_N_OPS; i++) {
		CK(cudaEventRecord(ev[i], L->stream));
		launch(L, i);
	}
	CK(cudaEventRecord(ev[LAYER_N_OPS], L->stream));
	CK(cudaEventSynchronize(ev[LAYER_N_OPS]));
	for (int i = 0; i < LAYER_N_OPS; i++) {
		CK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
		gpu[i] = (double)ms * 1e3;
	}
}

double *alloc_doubles(long n)
{
	double *v = static_cast<double *>(malloc((size_t)n * sizeof(double)));

	if (v == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	return v;
}

void bench_batch(const options *o, int64_t batch)
{
	layer_dims d = o->cfg.dims;
	double *eager = alloc_doubles(o->runs), *graphed = alloc_doubles(o->runs);
	double *sum = alloc_doubles(o->runs), *op[LAYER_N_OPS];
	cudaEvent_t ev[LAYER_N_OPS + 1];
	double gpu[LAYER_N_OPS];
	char label[40], kl[48];
	layer L;
	graph G;

	d.batch = batch;
	layer_init(&L, &d);
	graph_capture(&L, &G);
	layer_check(&L, &G);
	for (int i = 0; i < LAYER_N_OPS; i++)
		op[i] = alloc_doubles(o->runs);
	for (int i = 0; i <= LAYER_N_OPS; i++)
		CK(cudaEventCreate(&ev[i]));
	for (long i = -o->warmup; i < o->runs; i++) {
		double w = eager_once(&L);
		if (i >= 0)
			eager[i] = w;
	}
	for (long i = -o->warmup; i < o->runs; i++) {
		double w = graph_once(&L, &G);
		if (i >= 0)
			graphed[i] = w;
	}
	for (long i = -o->warmup; i < o->runs; i++) {
		timed_once(&L, ev, gpu);
		if (i < 0)
			continue;
		sum[i] = 0.0;
		for (int k = 0; k < LAYER_N_OPS; k++) {
			op[k][i] = gpu[k];
			sum[i] += gpu[k];
		}
	}
	CK(cudaGetLastError());
	layer_check(&L, &G);

	snprintf(label, sizeof(label), "B=%ld", (long)batch);
	double e = bench_median(eager, o->runs), g = bench_median(graphed, o->runs);
	bench_report("eager_layer_us", label, "median", e, "us", o->runs);
	bench_report("graph_layer_us", label, "median", g, "us", o->runs);
	for (int k = 0; k < LAYER_N_OPS; k++) {
		snprintf(kl, sizeof(kl), "B=%ld %s", (long)batch, layer_ops[k].label);
		bench_report("op_gpu_us", kl, "median", bench_median(op[k], o->runs), "us",
		             o->runs);
	}
	double s = bench_median(sum, o->runs);
	bench_report("kernel_sum_us", label, "median", s, "us", o->runs);
	bench_report("eager_overhead_per_op_us", label, "derived", (e - s) / LAYER_N_OPS, "us",
	             o->runs);
	bench_report("graph_overhead_us", label, "derived", g - s, "us", o->runs);

	for (int i = 0; i <= LAYER_N_OPS; i++)
		CK(cudaEventDestroy(ev[i]));
	for (int i = 0; i < LAYER_N_OPS; i++)
		free(op[i]);
	free(eager);
	free(graphed);
	free(sum);
	CK(cudaGraphExecDestroy(G.exec));
	CK(cudaGraphDestroy(G.g));
	layer_destroy(&L);
}

/* ---- many processes ------------------------------------------------------------ */

/* What a process reports for a phase. */
struct proc_result {
	int ok;
	double end_us;
};

struct proc_arg {
	const options *o;
	int64_t batch;
};

/* One process: its own context (made here, after the fork), the layer and
 * its graph, then R replays with a synchronize each, from the common start. */
int proc_main(bench_proc *p, int idx, void *argp)
{
	const proc_arg *a = static_cast<const proc_arg *>(argp);
	layer_dims d = a->o->cfg.dims;
	proc_result r = {};
	layer L;
	graph G;

	(void)idx;
	d.batch = a->batch;
	CK(cudaSetDevice(0));
	layer_init(&L, &d);
	graph_capture(&L, &G);
	layer_check(&L, &G);
	for (long i = 0; i < a->o->warmup; i++)
		graph_once(&L, &G);
	bench_proc_start(p);
	for (long i = 0; i < a->o->layers; i++)
		graph_once(&L, &G);
	r.end_us = bench_now_us();
	CK(cudaGetLastError());
	layer_check(&L, &G);
	r.ok = 1;
	bench_proc_finish(p, &r);
	CK(cudaGraphExecDestroy(G.exec));
	CK(cudaGraphDestroy(G.g));
	layer_destroy(&L);
	return 0;
}

/* P processes replaying the layer's graph at once: the aggregate layers/s
 * from the common start to the last process's end. */
int run_procs(const options *o)
{
	proc_result *res = static_cast<proc_result *>(calloc((size_t)o->procs, sizeof(*res)));
	int rc = 0;

	if (res == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	for (int b = 0; b < o->cfg.n_batches && rc == 0; b++) {
		proc_arg a = { o, o->cfg.batches[b] };
		double t0 = 0.0, end;
		char label[64];

		rc = bench_procs_run(PROG, o->procs, 1, sizeof(*res), proc_main, &a, res, &t0);
		end = t0;
		for (int i = 0; i < o->procs && rc == 0; i++) {
			rc = res[i].ok ? 0 : -1;
			end = res[i].end_us > end ? res[i].end_us : end;
		}
		if (rc != 0)
			break;
		long total = (long)o->procs * o->layers;
		snprintf(label, sizeof(label), "B=%ld x%d procs %s", (long)a.batch, o->procs,
		         o->label);
		bench_report("procs_graph_layers_per_s", label, "total",
		             (double)total / ((end - t0) / 1e6), "layers/s", total);
	}
	free(res);
	return rc == 0 ? 0 : 1;
}

/* ---- command line ------------------------------------------------------------- */

void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--runs N] [--warmup W] [--json FILE]\n"
	           "       " PROG " --procs P [--layers R] [--label NAME] [--json FILE]\n"
	           "       " LAYER_USAGE
	           "The decode layer of tileops-bench-layer in-process, launched one by one\n"
	           "and as a CUDA graph (see docs/perf.md, \"A decode layer\"); with --procs,\n"
	           "P processes with their own contexts (or under MPS: --label names the\n"
	           "row) each replaying the graph R times with a synchronize each.\n");
}

bool parse_args(int argc, char **argv, options *o)
{
	static const struct option longs[] = {
		{ "runs", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "json", required_argument, NULL, 'j' },
		{ "procs", required_argument, NULL, 'p' },
		{ "layers", required_argument, NULL, 'r' },
		{ "label", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		LAYER_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;

	while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
		int bad = 0;
		if (layer_parse_option(c, optarg, &o->cfg, &bad)) {
			/* handled */
		} else if (c == 'n') {
			bad = bench_parse_long(optarg, 1, 10000000, &o->runs);
		} else if (c == 'w') {
			bad = bench_parse_long(optarg, 0, 10000000, &o->warmup);
		} else if (c == 'j') {
			o->json = optarg;
		} else if (c == 'p') {
			long v = 0;
			bad = bench_parse_long(optarg, 1, BENCH_PROCS_MAX, &v);
			o->procs = (int)v;
		} else if (c == 'r') {
			bad = bench_parse_long(optarg, 1, 10000000, &o->layers);
		} else if (c == 'l') {
			o->label = optarg;
		} else if (c == 'h') {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			return false;
		}
		if (bad) {
			fprintf(stderr, PROG ": bad value '%s' for --%s\n", optarg,
			        longs[idx].name);
			return false;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return false;
	}
	return true;
}

} /* namespace */

int main(int argc, char **argv)
{
	options o;

	layer_config_default(&o.cfg);
	if (!parse_args(argc, argv, &o))
		return 2;
	if (bench_report_open(PROG, "layer-baseline", o.json) < 0)
		return 2;
	bench_report_backend("cuda");
	if (o.procs > 0) {
		/* Forked before this process makes a context of its own. */
		int rc = run_procs(&o);
		bench_report_table("measurement (in-process CUDA, many processes)");
		bench_report_close();
		return rc;
	}
	CK(cudaSetDevice(0));
	for (int b = 0; b < o.cfg.n_batches; b++)
		bench_batch(&o, o.cfg.batches[b]);
	bench_report_table("measurement (in-process CUDA)");
	bench_report_close();
	return 0;
}
