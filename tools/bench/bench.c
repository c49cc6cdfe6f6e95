/*
 * tileops-bench - the roofline bench of the memory-bound L1 kernels.
 *
 * For every workload of the manifest (bench_cases.c: each op's workloads at
 * each dtype they list, made into kernel calls by the op layer when the
 * bench starts) it times direct calls of the op's CUDA launcher and
 * reports the median time, the achieved TB/s and TFLOP/s from the roofline
 * counts, and the percentage of the copy bandwidth it measured itself at
 * the start of the run (cudaMemcpy device to device of 2 GiB, bytes read
 * plus written).
 *
 * Method: inputs hold random values (never zeros), drawn once on the host
 * and copied in; integer inputs (positions, lengths, page tables, slots)
 * hold valid values made from the op's other shapes (bench_cases.c). Every
 * workload rotates through enough copies of its tensors (at least 4, and
 * at least 256 MiB in all) that the 60 MiB L2 does not serve them. The
 * time reported (median_us, from which TB/s and the % of copy come) is
 * that of calls back to back: one call on each copy captured in a CUDA
 * graph, the median replay (of 50 unless --runs) divided by the copies, as
 * a model's forward pass runs them. Each call is also timed alone with
 * CUDA events (single_us), behind a delay kernel (DELAY_NS) so the host
 * has enqueued the call before the device reaches its first event; even so
 * a lone call carries the device's own start and end of a launch, about
 * 4 us, which is a third of a 32 MiB workload. Workloads under 64 MiB are
 * also timed back to back without programmatic dependent launch
 * (median_nopdl_us). Ops that declare workspace get one buffer for all
 * calls, as tileopsd gives it. Workloads moving less than 32 MiB are also
 * timed back to back on one copy: 20 calls captured in a CUDA graph, the
 * median replay divided by 20, next to a graph of 20 empty kernels timed
 * the same way; once with programmatic dependent launch as the kernels are
 * launched by default (tk_cuda_pdl) and once without (graph_nopdl_us),
 * with the empty kernel timed both ways too.
 *
 *   tileops-bench [--manifest PATH] [--json FILE] [--op SUBSTRING]
 *                 [--workload SUBSTRING] [--family NAME] [--runs N]
 *                 [--list FILE] [--dry-run] [--daemon ADDRESS]
 *
 * --manifest PATH: the manifest directory (default $TILEOPS_MANIFEST, then
 * the source tree's manifest/, then ./manifest). The gemm, attention and
 * moe families have benches of their own and the diagnostic one computes
 * nothing: they are left out unless --family names one. --list FILE writes
 * the workloads as JSON (shapes, dtypes, params, counts) for
 * tools/bench/torch_baseline.py, which times PyTorch on the same shapes.
 * --dry-run prints the cases it would run, with their counts, the copies
 * rotated and how integer inputs are filled; neither touches the GPU.
 * --daemon ADDRESS also times every workload through the tileopsd
 * listening there (bench_daemon.c: the op submitted back to back from a
 * client, one sync), reported beside the direct time with its own % of
 * copy.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench.h"
#include "bench_cuda.h"

int bench_launch_empty(void *stream);
int bench_launch_empty_pdl(void *stream);
int bench_launch_delay(void *stream, uint64_t ns);

#define MIB (1024.0 * 1024.0)
#define GRAPH_CALLS 20
#define HOST_ELEMS (16 << 20)
/* Longer than the host takes to record an event and launch any op here. */
#define DELAY_NS 40000

struct options {
	const char *manifest, *json, *filter, *workload, *family, *list, *daemon;
	int runs, dry_run;
};

struct result {
	const bw_workload *w;
	int ok, sets, runs;
	double median_us, single_us, graph_us, graph_nopdl_us, tbps, tflops, pct;
	double median_nopdl_us; /* back to back without PDL, workloads under 64 MiB */
	char error[200];
	/* through tileopsd (--daemon): ok, us per op back to back, % of copy */
	int d_ok;
	double d_us, d_pct;
	char d_error[160];
};

static void *host_rand[TK_DTYPE_COUNT]; /* HOST_ELEMS random values of each float dtype */
static double copy_tbps;

/* ---- inputs ---------------------------------------------------------------- */

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;

static double rand_unit(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (double)((rng_state * 0x2545f4914f6cdd1dULL) >> 11) / 9007199254740992.0;
}

/* Values in [0.25, 2): positive, so log, sqrt, div and pow stay finite. */
static void host_fill(struct bench_host *h)
{
	static const tk_dtype dts[] = { TK_F32, TK_F16, TK_BF16, TK_FP8_E4M3 };

	for (int k = 0; k < 4; k++) {
		tk_dtype dt = dts[k];
		void *p = malloc((size_t)HOST_ELEMS * tk_dtype_size(dt));
		if (p == NULL) {
			fprintf(stderr, "tileops-bench: out of host memory\n");
			exit(1);
		}
		for (int64_t i = 0; i < HOST_ELEMS; i++) {
			float v = (float)(0.25 + 1.75 * rand_unit());
			if (dt == TK_F32)
				((float *)p)[i] = v;
			else if (dt == TK_F16)
				((uint16_t *)p)[i] = tk_f32_to_f16(v);
			else if (dt == TK_BF16)
				((uint16_t *)p)[i] = tk_f32_to_bf16(v);
			else
				((uint8_t *)p)[i] = tk_f32_to_fp8e4m3(v);
		}
		host_rand[dt] = p;
		h->values[dt] = p;
	}
	h->elems = HOST_ELEMS;
}

/*
 * The device memory of tensor t, filled: an input with its integer values
 * or the random floats, an output with 0xff bytes. An absent input has none.
 */
static void *make_tensor(const bw_tensor *t, int input)
{
	size_t bytes = bw_tensor_bytes(t);
	void *data;

	if (t->absent)
		return NULL;
	CK(cudaMalloc(&data, bytes > 0 ? bytes : 16));
	if (!input) {
		CK(cudaMemset(data, 0xff, bytes));
		return data;
	}
	if (t->values != NULL) {
		CK(cudaMemcpy(data, t->values, bytes, cudaMemcpyHostToDevice));
		return data;
	}
	size_t chunk = (size_t)HOST_ELEMS * tk_dtype_size(t->dt);
	for (size_t off = 0; off < bytes; off += chunk) {
		size_t n = bytes - off < chunk ? bytes - off : chunk;
		CK(cudaMemcpy((char *)data + off, host_rand[t->dt], n, cudaMemcpyHostToDevice));
	}
	return data;
}

/* The calls of `sets` copies of the workload's tensors: the op layer's call, data filled in. */
static tk_call *make_sets(const bw_workload *w, int sets)
{
	tk_call *c = calloc((size_t)sets, sizeof(tk_call));

	for (int s = 0; s < sets; s++) {
		c[s] = w->call;
		for (int i = 0; i < w->n_in; i++)
			c[s].in[i].data = make_tensor(&w->in[i], 1);
		for (int i = 0; i < w->n_out; i++)
			c[s].out[i].data = make_tensor(&w->out[i], 0);
	}
	return c;
}

static void free_sets(tk_call *c, int sets)
{
	for (int s = 0; s < sets; s++) {
		for (int i = 0; i < c[s].n_in; i++)
			cudaFree(c[s].in[i].data);
		for (int i = 0; i < c[s].n_out; i++)
			cudaFree(c[s].out[i].data);
	}
	free(c);
}

/* ---- timing ----------------------------------------------------------------- */

/*
 * Per-call time of what enqueue(arg, s) launches (`calls` calls), captured
 * in one CUDA graph: the median replay over `calls`. NaN when a launcher
 * refused its call.
 */
static double time_graph(int (*enqueue)(void *arg, cudaStream_t s), void *arg, int calls,
                         cudaStream_t s, int runs)
{
	cudaGraph_t g;
	cudaGraphExec_t ge;

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	int bad = enqueue(arg, s);
	CK(cudaStreamEndCapture(s, &g));
	if (bad) {
		cudaGraphDestroy(g);
		return NAN;
	}
	CK(cudaGraphInstantiate(&ge, g, 0));
	double us = bench_graph_replay_us(ge, s, 3, runs) / calls;
	cudaGraphExecDestroy(ge);
	cudaGraphDestroy(g);
	return us;
}

/* GRAPH_CALLS launches of fn(arg). */
struct repeat_arg {
	int (*fn)(void *arg, cudaStream_t s);
	void *arg;
};

static int enqueue_repeat(void *arg, cudaStream_t s)
{
	struct repeat_arg *r = arg;
	int bad = 0;

	for (int i = 0; i < GRAPH_CALLS; i++)
		bad |= r->fn(r->arg, s);
	return bad;
}

/* Per-call time of GRAPH_CALLS launches of fn(arg) back to back. */
static double time_back_to_back(int (*fn)(void *arg, cudaStream_t s), void *arg, cudaStream_t s,
                                int runs)
{
	struct repeat_arg r = { fn, arg };

	return time_graph(enqueue_repeat, &r, GRAPH_CALLS, s, runs);
}

struct call_arg {
	const tk_kernel_entry *e;
	tk_call *c;
	int sets;
};

static int call_once(void *arg, cudaStream_t s)
{
	struct call_arg *a = arg;

	return a->e->cuda(a->c, s) != TK_OK;
}

/* One call on each of the `sets` copies. */
static int enqueue_rotated(void *arg, cudaStream_t s)
{
	struct call_arg *a = arg;
	int bad = 0;

	for (int i = 0; i < a->sets; i++)
		bad |= a->e->cuda(&a->c[i], s) != TK_OK;
	return bad;
}

/* Per-call time of one call on each of the `sets` copies, back to back. */
static double time_rotated(const tk_kernel_entry *e, tk_call *c, int sets, cudaStream_t s, int runs)
{
	struct call_arg a = { e, c, sets };

	return time_graph(enqueue_rotated, &a, sets, s, runs);
}

static int empty_once(void *arg, cudaStream_t s)
{
	(void)arg;
	return bench_launch_empty(s);
}

static int empty_pdl_once(void *arg, cudaStream_t s)
{
	(void)arg;
	return bench_launch_empty_pdl(s);
}

static int run_direct(const bw_workload *w, const struct options *o, cudaStream_t s,
                      struct result *r)
{
	const tk_kernel_entry *e = w->kernel;
	double sb = bw_set_bytes(w);
	int sets = bw_sets(w);
	int runs = o->runs;

	if (w->error[0] != '\0') {
		snprintf(r->error, sizeof(r->error), "%s", w->error);
		return -1;
	}
	tk_call *c = make_sets(w, sets);
	void *ws = NULL;
	/* Workspace as the daemon hands it out: one buffer, calls in stream order. */
	if (e->workspace > 0) {
		CK(cudaMalloc(&ws, e->workspace));
		for (int i = 0; i < sets; i++) {
			c[i].workspace = ws;
			c[i].workspace_bytes = e->workspace;
		}
	}
	cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * 2 * (size_t)runs);
	double *t = malloc(sizeof(double) * (size_t)runs);
	int status = 0;

	for (int i = 0; i < 2 * runs; i++)
		CK(cudaEventCreate(&ev[i]));
	for (int i = 0; i < 5 && status == 0; i++)
		status = e->cuda(&c[i % sets], s) != TK_OK;
	for (int i = 0; i < runs && status == 0; i++) {
		if (bench_launch_delay(s, DELAY_NS) != 0)
			CK(cudaGetLastError());
		CK(cudaEventRecord(ev[2 * i], s));
		status = e->cuda(&c[(i + 5) % sets], s) != TK_OK;
		CK(cudaEventRecord(ev[2 * i + 1], s));
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaGetLastError());
	if (status != 0) {
		snprintf(r->error, sizeof(r->error), "the launcher refused the workload");
	} else {
		for (int i = 0; i < runs; i++) {
			float ms;
			CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
			t[i] = ms * 1e3;
		}
		r->single_us = bench_median(t, runs);
		r->median_us = time_rotated(e, c, sets, s, runs);
		r->median_nopdl_us = NAN;
		if (sb < 64.0 * MIB) {
			int pdl = tk_cuda_set_pdl(0);
			r->median_nopdl_us = time_rotated(e, c, sets, s, runs);
			tk_cuda_set_pdl(pdl);
		}
		r->graph_us = r->graph_nopdl_us = NAN;
		if (sb < 32.0 * MIB) {
			struct call_arg a = { e, &c[0], 1 };
			int pdl = tk_cuda_pdl();
			r->graph_us = time_back_to_back(call_once, &a, s, runs);
			tk_cuda_set_pdl(0);
			r->graph_nopdl_us = time_back_to_back(call_once, &a, s, runs);
			tk_cuda_set_pdl(pdl);
		}
		r->sets = sets;
		r->runs = runs;
		r->ok = 1;
	}
	for (int i = 0; i < 2 * runs; i++)
		cudaEventDestroy(ev[i]);
	free(ev);
	free(t);
	free_sets(c, sets);
	cudaFree(ws);
	return status ? -1 : 0;
}

/* ---- output ------------------------------------------------------------------- */

static void shape_str(const bw_workload *w, char *buf, size_t len)
{
	size_t u = 0;

	buf[0] = '\0';
	for (int i = 0; i < w->n_in && u < len; i++) {
		if (w->in[i].absent) {
			u += (size_t)snprintf(buf + u, len - u, "%snone", i ? " " : "");
			continue;
		}
		u += (size_t)snprintf(buf + u, len - u, "%s[", i ? " " : "");
		for (int d = 0; d < w->in[i].ndim && u < len; d++)
			u += (size_t)snprintf(buf + u, len - u, "%s%ld", d ? "x" : "",
			                      (long)w->in[i].shape[d]);
		if (u < len)
			u += (size_t)snprintf(buf + u, len - u, "]");
	}
}

/* Text for a Markdown table cell: a '|' (as in a dtype rule) would end it. */
static void md_cell(const char *s, char *buf, size_t len)
{
	size_t u = 0;

	for (; *s && u + 2 < len; s++) {
		if (*s == '|')
			buf[u++] = '\\';
		buf[u++] = *s;
	}
	buf[u] = '\0';
}

/* The daemon's columns of a row: time and % of copy, or the error. */
static void daemon_cells(const struct result *r, char *buf, size_t len)
{
	char e[sizeof(r->d_error) * 2];

	if (r->d_ok) {
		snprintf(buf, len, " %.2f | %.1f |", r->d_us, r->d_pct);
		return;
	}
	md_cell(r->d_error, e, sizeof(e));
	snprintf(buf, len, " error: %s | |", e);
}

/*
 * The empty kernel back to back in a graph: launched plainly, and with PDL;
 * and the copy back to back at the sizes of the workloads near the ceiling
 * (COPY_SIZES MiB moved, bench_copy_graph_us).
 */
#define N_COPY_SIZES 5
static const int COPY_SIZES[N_COPY_SIZES] = { 8, 16, 32, 64, 128 };

struct floors {
	double empty_us, empty_pdl_us;
	double copy_us[N_COPY_SIZES];
};

/* TB/s of a copy moving COPY_SIZES[i] MiB in `us`. */
static double copy_size_tbps(int i, double us)
{
	return (double)COPY_SIZES[i] * 1048576.0 / (us * 1e-6) / 1e12;
}

static void print_copy_sizes(FILE *f, struct floors fl)
{
	fprintf(f, "copy back to back in a graph (cudaMemcpy D2D over rotated buffers), by MiB "
	           "moved:");
	for (int i = 0; i < N_COPY_SIZES; i++)
		fprintf(f, "%s %d MiB %.2f us (%.1f%% of the ceiling)", i ? ";" : "", COPY_SIZES[i],
		        fl.copy_us[i], 100.0 * copy_size_tbps(i, fl.copy_us[i]) / copy_tbps);
	fprintf(f, "\n");
}

static void print_table(const struct result *r, int n, struct floors fl, int daemon)
{
	printf("\ncopy ceiling (cudaMemcpy D2D 2 GiB): %.3f TB/s; empty kernel, back to back in a "
	       "graph: %.2f us (%.2f us launched with PDL)\n\n",
	       copy_tbps, fl.empty_us, fl.empty_pdl_us);
	print_copy_sizes(stdout, fl);
	printf("\n| op | workload | shapes | dtype | us, back to back | one call us | graph "
	       "us/call "
	       "| without PDL | TB/s | TFLOP/s | %% of copy |%s\n",
	       daemon ? " via daemon us | daemon % of copy |" : "");
	printf("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |%s\n",
	       daemon ? " ---: | ---: |" : "");
	for (int i = 0; i < n; i++) {
		char sh[160];
		shape_str(r[i].w, sh, sizeof(sh));
		char dc[400] = "";
		if (daemon)
			daemon_cells(&r[i], dc, sizeof(dc));
		if (!r[i].ok) {
			char e[sizeof(r[i].error) * 2];
			md_cell(r[i].error, e, sizeof(e));
			printf("| %s | %s | %s | %s | error: %s | | | | | | |%s\n", r[i].w->op,
			       r[i].w->label, sh, tk_dtype_name(r[i].w->dt), e, dc);
			continue;
		}
		char g[32] = "", gn[32] = "";
		if (!isnan(r[i].graph_us))
			snprintf(g, sizeof(g), "%.2f", r[i].graph_us);
		if (!isnan(r[i].graph_nopdl_us))
			snprintf(gn, sizeof(gn), "%.2f", r[i].graph_nopdl_us);
		printf("| %s | %s | %s | %s | %.2f | %.2f | %s | %s | %.3f | %.3f | %.1f |%s\n",
		       r[i].w->op, r[i].w->label, sh, tk_dtype_name(r[i].w->dt), r[i].median_us,
		       r[i].single_us, g, gn, r[i].tbps, r[i].tflops, r[i].pct, dc);
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void json_shape(FILE *f, const bw_tensor *t)
{
	if (t->absent) {
		fprintf(f, "null");
		return;
	}
	fprintf(f, "{\"shape\": [");
	for (int d = 0; d < t->ndim; d++)
		fprintf(f, "%s%ld", d ? ", " : "", (long)t->shape[d]);
	fprintf(f, "], \"dtype\": \"%s\", \"mutated\": %s}", tk_dtype_name(t->dt),
	        t->mutated ? "true" : "false");
}

static void json_workload(FILE *f, const bw_workload *w)
{
	fprintf(f, "\"op\": ");
	json_str(f, w->op);
	fprintf(f, ", \"label\": ");
	json_str(f, w->label);
	fprintf(f, ", \"dtype\": \"%s\", \"inputs\": [", tk_dtype_name(w->dt));
	for (int i = 0; i < w->n_in; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_shape(f, &w->in[i]);
	}
	fprintf(f, "], \"outputs\": [");
	for (int i = 0; i < w->n_out; i++) {
		fprintf(f, "%s", i ? ", " : "");
		json_shape(f, &w->out[i]);
	}
	fprintf(f, "], \"params\": {");
	for (int i = 0; i < w->n_params; i++) {
		const tk_param *p = &w->params[i];
		fprintf(f, "%s\"%s\": ", i ? ", " : "", w->param_names[i]);
		if (p->kind == TK_PARAM_INT)
			fprintf(f, "%ld", (long)p->v.i);
		else if (p->kind == TK_PARAM_BOOL)
			fprintf(f, "%s", p->v.b ? "true" : "false");
		else if (isinf(p->v.f)) /* as Python's json reads it (clamp's default bounds) */
			fprintf(f, "%sInfinity", p->v.f < 0 ? "-" : "");
		else
			fprintf(f, "%.17g", p->v.f);
	}
	fprintf(f, "}, \"bytes\": %.0f, \"flops\": %.0f", w->bytes, w->flops);
}

/* The cases that can run, as JSON for torch_baseline.py. */
static int write_list(const char *path, const bw_cases *c)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		return 1;
	}
	fprintf(f, "[");
	for (int i = 0, first = 1; i < c->n; i++) {
		if (c->w[i].error[0] != '\0')
			continue;
		fprintf(f, "%s\n  {", first ? "" : ",");
		json_workload(f, &c->w[i]);
		fprintf(f, "}");
		first = 0;
	}
	fprintf(f, "\n");
	fprintf(f, "]\n");
	fclose(f);
	return 0;
}

/* What a run would do, without a GPU: each case's counts, copies and integer inputs. */
static int print_cases(const bw_cases *c, const char *path)
{
	int runnable = 0;

	printf("tileops-bench: %d cases from %s\n", c->n, path);
	printf("\n| op | workload | shapes | dtype | bytes | flops | copies | integer inputs |\n");
	printf("| --- | --- | --- | --- | ---: | ---: | ---: | --- |\n");
	for (int i = 0; i < c->n; i++) {
		const bw_workload *w = &c->w[i];
		char sh[160], fills[512] = "", e[sizeof(w->error) * 2];
		size_t u = 0;

		shape_str(w, sh, sizeof(sh));
		if (w->error[0] != '\0') {
			md_cell(w->error, e, sizeof(e));
			printf("| %s | %s | %s | %s | | | | error: %s |\n", w->op, w->label, sh,
			       tk_dtype_name(w->dt), e);
			continue;
		}
		runnable++;
		for (int k = 0; k < w->n_in && u < sizeof(fills); k++)
			if (w->in[k].values != NULL)
				u += (size_t)snprintf(fills + u, sizeof(fills) - u, "%s%s: %s",
				                      u ? "; " : "", w->in[k].name, w->in[k].fill);
		printf("| %s | %s | %s | %s | %.0f | %.0f | %d | %s |\n", w->op, w->label, sh,
		       tk_dtype_name(w->dt), w->bytes, w->flops, bw_sets(w), fills);
	}
	printf("\n%d of %d cases can run", runnable, c->n);
	if (c->not_benched[0] != '\0')
		printf("; no cases from %s", c->not_benched);
	printf("\n");
	if (c->skipped[0] != '\0')
		printf("families left out (--family NAME runs one): %s\n", c->skipped);
	return 0;
}

static void json_num(FILE *f, const char *key, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, ", \"%s\": null", key);
	else
		fprintf(f, ", \"%s\": %.6g", key, v);
}

static int write_json(const char *path, const struct result *r, int n, struct floors fl,
                      const char *device, int daemon)
{
	FILE *f = fopen(path, "w");
	time_t now = time(NULL);
	char date[32];

	if (f == NULL) {
		perror(path);
		return 1;
	}
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f,
	        "{\"tool\": \"tileops-bench\", \"path\": \"%s\", \"date\": \"%s\", "
	        "\"device\": ",
	        daemon ? "direct+daemon" : "direct", date);
	json_str(f, device);
	fprintf(f,
	        ", \"copy_tbps\": %.6g, \"empty_graph_us\": %.6g, \"empty_graph_pdl_us\": %.6g, "
	        "\"graph_calls\": %d, \"copy_by_size\": [",
	        copy_tbps, fl.empty_us, fl.empty_pdl_us, GRAPH_CALLS);
	for (int i = 0; i < N_COPY_SIZES; i++)
		fprintf(f, "%s{\"mib_moved\": %d, \"us\": %.6g, \"tbps\": %.6g}", i ? ", " : "",
		        COPY_SIZES[i], fl.copy_us[i], copy_size_tbps(i, fl.copy_us[i]));
	fprintf(f, "], \"results\": [\n");
	for (int i = 0; i < n; i++) {
		fprintf(f, "  {");
		json_workload(f, r[i].w);
		fprintf(f, ", \"ok\": %s", r[i].ok ? "true" : "false");
		if (r[i].ok) {
			json_num(f, "median_us", r[i].median_us);
			json_num(f, "single_us", r[i].single_us);
			json_num(f, "median_nopdl_us", r[i].median_nopdl_us);
			json_num(f, "graph_us", r[i].graph_us);
			json_num(f, "graph_nopdl_us", r[i].graph_nopdl_us);
			json_num(f, "tbps", r[i].tbps);
			json_num(f, "tflops", r[i].tflops);
			json_num(f, "pct_copy", r[i].pct);
			fprintf(f, ", \"sets\": %d, \"runs\": %d", r[i].sets, r[i].runs);
		} else {
			fprintf(f, ", \"error\": ");
			json_str(f, r[i].error);
		}
		if (daemon && r[i].d_ok) {
			json_num(f, "daemon_us", r[i].d_us);
			json_num(f, "daemon_pct_copy", r[i].d_pct);
		} else if (daemon) {
			fprintf(f, ", \"daemon_us\": null, \"daemon_error\": ");
			json_str(f, r[i].d_error);
		}
		fprintf(f, "}%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "]}\n");
	fclose(f);
	return 0;
}

/* ---- main ---------------------------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr,
	        "usage: tileops-bench [--manifest PATH] [--json FILE] [--op SUBSTRING] "
	        "[--workload SUBSTRING] [--family NAME] [--runs N] [--list FILE] [--dry-run] "
	        "[--daemon ADDRESS]\n");
	return 2;
}

/* $TILEOPS_MANIFEST, else the source tree's manifest when it is there, else ./manifest. */
static const char *default_manifest(void)
{
	const char *env = getenv("TILEOPS_MANIFEST");
	struct stat st;

	if (env != NULL && *env != '\0')
		return env;
	if (stat(TILEOPS_SOURCE_MANIFEST, &st) == 0 && S_ISDIR(st.st_mode))
		return TILEOPS_SOURCE_MANIFEST;
	return "manifest";
}

int main(int argc, char **argv)
{
	struct options o = { NULL, NULL, NULL, NULL, NULL, NULL, NULL, 50, 0 };
	struct bench_host host;
	struct bench_daemon *daemon = NULL;
	struct cudaDeviceProp prop;
	cudaStream_t s;
	bw_cases cases;
	char err[4096];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--manifest") && i + 1 < argc)
			o.manifest = argv[++i];
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			o.json = argv[++i];
		else if (!strcmp(argv[i], "--op") && i + 1 < argc)
			o.filter = argv[++i];
		else if (!strcmp(argv[i], "--workload") && i + 1 < argc)
			o.workload = argv[++i];
		else if (!strcmp(argv[i], "--family") && i + 1 < argc)
			o.family = argv[++i];
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			o.runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--list") && i + 1 < argc)
			o.list = argv[++i];
		else if (!strcmp(argv[i], "--dry-run"))
			o.dry_run = 1;
		else if (!strcmp(argv[i], "--daemon") && i + 1 < argc)
			o.daemon = argv[++i];
		else
			return usage();
	}
	if (o.runs < 5)
		o.runs = 5;
	if (o.manifest == NULL)
		o.manifest = default_manifest();
	/* The cases come first: --list and --dry-run end here, before any CUDA call. */
	bw_filter filter = { o.filter, o.workload, o.family };
	if (bw_cases_load(o.manifest, &filter, &cases, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileops-bench: %s\n", err);
		return 1;
	}
	if (o.list != NULL || o.dry_run) {
		int rc = o.list != NULL ? write_list(o.list, &cases) : 0;
		if (o.dry_run)
			rc |= print_cases(&cases, o.manifest);
		bw_cases_free(&cases);
		return rc;
	}

	const bw_workload *w = cases.w;
	int n = cases.n;
	struct result *r = calloc((size_t)(n > 0 ? n : 1), sizeof(*r));
	int nr = 0;

	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	memset(&host, 0, sizeof(host));
	host_fill(&host);
	if (o.daemon != NULL) {
		if (bench_daemon_open(o.daemon, &daemon, err, sizeof(err)) != 0) {
			fprintf(stderr, "tileops-bench: %s\n", err);
			return 1;
		}
	}
	copy_tbps = bench_copy_tbps(s, (size_t)2 << 30); /* 2 GiB */
	struct floors fl = { time_back_to_back(empty_once, NULL, s, o.runs),
		             time_back_to_back(empty_pdl_once, NULL, s, o.runs),
		             { 0 } };
	for (int i = 0; i < N_COPY_SIZES; i++)
		fl.copy_us[i] = bench_copy_graph_us(s, (size_t)COPY_SIZES[i] << 19, o.runs);
	fprintf(stderr, "%s: copy %.3f TB/s, empty kernel %.2f us back to back (%.2f with PDL)\n",
	        prop.name, copy_tbps, fl.empty_us, fl.empty_pdl_us);
	print_copy_sizes(stderr, fl);
	for (int i = 0; i < n; i++) {
		struct result *x = &r[nr++];
		x->w = &w[i];
		if (run_direct(&w[i], &o, s, x) == 0) {
			x->tbps = w[i].bytes / (x->median_us * 1e-6) / 1e12;
			x->tflops = w[i].flops / (x->median_us * 1e-6) / 1e12;
			x->pct = 100.0 * x->tbps / copy_tbps;
		}
		if (daemon != NULL && w[i].error[0] != '\0')
			snprintf(x->d_error, sizeof(x->d_error),
			         "not run: the case was refused (see the direct column)");
		else if (daemon != NULL && bench_daemon_time(daemon, &w[i], o.runs, &host, &x->d_us,
		                                             x->d_error, sizeof(x->d_error)) == 0) {
			x->d_ok = 1;
			x->d_pct = 100.0 * (w[i].bytes / (x->d_us * 1e-6) / 1e12) / copy_tbps;
		}
		fprintf(stderr, "%-22s %-44s %-5s %10.2f us %10.2f us\n", w[i].op, w[i].label,
		        tk_dtype_name(w[i].dt), x->ok ? x->median_us : -1.0,
		        x->d_ok ? x->d_us : -1.0);
	}
	print_table(r, nr, fl, daemon != NULL);
	bench_daemon_close(daemon);
	if (o.json != NULL && write_json(o.json, r, nr, fl, prop.name, daemon != NULL) != 0)
		return 1;
	free(r);
	bw_cases_free(&cases);
	cudaStreamDestroy(s);
	return 0;
}
