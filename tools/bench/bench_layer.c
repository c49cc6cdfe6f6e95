/*
 * tileops-bench-layer - a Llama-style decode layer through tileopsd, as
 * single ops and as a plan (the layer is layer_spec.h; what
 * every figure means is in docs/perf.md, "A decode layer: single ops and plans").
 *
 *   tileops-bench-layer [--address ADDR] [--runs N] [--warmup W] [--json FILE]
 *                       [layer sizes]
 *   tileops-bench-layer --procs P [--layers R] [--address ADDR] [--json FILE]
 *                       [layer sizes]
 *
 * One client (the default), for each batch size:
 *  - single_ops_layer_us: the layer's 13 ops submitted with
 *    tileops_op_submit, then tileops_sync; median over N (200) layers;
 *  - plan_layer_us: the same ops as one plan (built once), tileops_plan_run
 *    then tileops_sync per layer; median over N;
 *  - op_gpu_us and kernel_sum_us: every op submitted with
 *    tileops_op_submit_timed, its device time from tileopsd; the medians
 *    per op and of the per-layer sums over N layers;
 *  - overhead_per_op_us = (single_ops_layer_us - kernel_sum_us) / 13 and
 *    plan_overhead_us = plan_layer_us - kernel_sum_us.
 * Every loop runs W (20) times first as warm-up (the plan's first run
 * captures it). Before timing, the plan's output is checked to equal, bit
 * for bit, the output of the same layer run as single ops.
 *
 * --procs P forks P processes before any connection; each builds its own
 * layer and plan, warms up, and waits on a pipe barrier; then all run R
 * (200) layers as plans (plan run + sync per layer) at once, then, behind a
 * second barrier, R layers as single ops. Each phase's figure is P * R over
 * the time from the common start to the end of the last process. Each
 * process checks its plan output against its single-op output.
 *
 * Every measurement is one JSON line (--json FILE, appended, else stdout);
 * a markdown table ends the output. Exit status 0 only when every op
 * succeeded and every check passed.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_client.h"
#include "bench_common.h"
#include "layer_spec.h"
#include "tileops.h"

#define PROG "tileops-bench-layer"

struct options {
	const char *address, *json;
	long runs, warmup, layers;
	int procs;
	layer_config cfg;
};

/* A layer of one client: its tensors, its ops as requests, its plan. */
struct layer {
	tileops_client *c;
	layer_dims d;
	tileops_tensor t[LT_COUNT];
	tileops_op ops[LAYER_N_OPS];
	tileops_tensor io[LAYER_N_OPS][LAYER_MAX_OP_TENSORS + 1];
	tileops_param par[LAYER_N_OPS][LAYER_MAX_OP_PARAMS];
	tileops_plan *plan;
};

/* ---- building the layer ------------------------------------------------------ */

static int layer_upload(struct layer *L)
{
	size_t max = 0;

	for (int t = 0; t < LT_COUNT; t++) {
		size_t b = layer_tensor_bytes(&L->d, t);
		max = b > max ? b : max;
	}
	void *buf = malloc(max);
	if (buf == NULL) {
		fprintf(stderr, PROG ": out of memory (%zu bytes)\n", max);
		return -1;
	}
	int rc = 0;
	for (int t = 0; t < LT_COUNT && rc == 0; t++) {
		int64_t shape[3];
		int nd = layer_tensor_shape(&L->d, t, shape);
		tileops_dtype dt = layer_tensor_dtype(t) == LAYER_I32 ? TILEOPS_I32 : TILEOPS_BF16;
		tileops_status st = tileops_tensor_create(L->c, dt, nd, shape, &L->t[t]);
		if (st != TILEOPS_OK) {
			rc = bench_fail(layer_tensor_name(t), st);
			break;
		}
		/* Every tensor gets random bytes: outputs too, so none starts as zeros. */
		layer_tensor_fill(&L->d, t, buf);
		st = tileops_tensor_write(L->c, L->t[t], 0, buf, layer_tensor_bytes(&L->d, t));
		if (st != TILEOPS_OK)
			rc = bench_fail("tileops_tensor_write", st);
	}
	free(buf);
	return rc;
}

static void layer_ops_build(struct layer *L)
{
	for (int i = 0; i < LAYER_N_OPS; i++) {
		const layer_op *lo = &layer_ops[i];
		layer_param p[LAYER_MAX_OP_PARAMS];
		int np = layer_op_params(&L->d, i, p);
		tileops_op *op = &L->ops[i];

		for (int k = 0; k < lo->n_in; k++)
			L->io[i][k] = L->t[lo->in[k]];
		if (lo->out >= 0)
			L->io[i][LAYER_MAX_OP_TENSORS] = L->t[lo->out];
		for (int k = 0; k < np; k++) {
			if (p[k].kind == 'i')
				L->par[i][k] = tileops_param_int(p[k].name, (int64_t)p[k].value);
			else if (p[k].kind == 'b')
				L->par[i][k] = tileops_param_bool(p[k].name, p[k].value != 0.0);
			else
				L->par[i][k] = tileops_param_float(p[k].name, p[k].value);
		}
		*op = (tileops_op){ .name = lo->op,
			            .inputs = L->io[i],
			            .n_inputs = (size_t)lo->n_in,
			            .outputs = &L->io[i][LAYER_MAX_OP_TENSORS],
			            .n_outputs = lo->out >= 0 ? 1 : 0,
			            .params = L->par[i],
			            .n_params = (size_t)np };
	}
}

static int layer_plan_build(struct layer *L)
{
	tileops_plan_options po = { .name = "decode-layer" };
	tileops_status st;

	if ((st = tileops_plan_begin(L->c, &po, &L->plan)) != TILEOPS_OK)
		return bench_fail("tileops_plan_begin", st);
	for (int i = 0; i < LAYER_N_OPS; i++) {
		if ((st = tileops_plan_add(L->plan, &L->ops[i])) != TILEOPS_OK)
			return bench_fail(layer_ops[i].label, st);
	}
	if ((st = tileops_plan_end(L->plan)) != TILEOPS_OK)
		return bench_fail("tileops_plan_end", st);
	return 0;
}

static void layer_free(struct layer *L)
{
	tileops_plan_free(L->plan);
	for (int t = 0; t < LT_COUNT && L->c != NULL; t++)
		tileops_tensor_free(L->c, L->t[t]);
	tileops_close(L->c);
	memset(L, 0, sizeof(*L));
}

static int layer_open(const struct options *o, int64_t batch, const char *name, struct layer *L)
{
	memset(L, 0, sizeof(*L));
	L->d = o->cfg.dims;
	L->d.batch = batch;
	if (bench_connect(o->address, name, &L->c) < 0)
		return -1;
	if (layer_upload(L) < 0)
		return -1;
	layer_ops_build(L);
	return layer_plan_build(L);
}

/* ---- running it -------------------------------------------------------------- */

/*
 * One layer as single ops: submit all, sync; *wall covers the two. When
 * gpu is given, the ops are submitted timed and gpu[i] gets op i's device
 * time (NAN when the daemon measured none).
 */
static int layer_single(struct layer *L, double *wall, double *gpu)
{
	tileops_completion *cp[LAYER_N_OPS] = { NULL };
	tileops_status st = TILEOPS_OK;
	int rc = 0, n = 0;
	double t0 = bench_now_us();

	for (; n < LAYER_N_OPS && rc == 0; n++) {
		st = gpu ? tileops_op_submit_timed(L->c, &L->ops[n], &cp[n])
		         : tileops_op_submit(L->c, &L->ops[n], &cp[n]);
		if (st != TILEOPS_OK)
			rc = bench_fail(layer_ops[n].label, st);
	}
	if ((st = tileops_sync(L->c)) != TILEOPS_OK && rc == 0)
		rc = bench_fail("tileops_sync", st);
	*wall = bench_now_us() - t0;
	for (int i = 0; i < n; i++) {
		if (cp[i] == NULL)
			continue;
		if ((st = tileops_completion_wait(cp[i], -1)) != TILEOPS_OK && rc == 0)
			rc = bench_fail(layer_ops[i].label, st);
		if (gpu && tileops_completion_gpu_us(cp[i], &gpu[i]) != TILEOPS_OK)
			gpu[i] = NAN;
		tileops_completion_free(cp[i]);
	}
	return rc;
}

static int layer_plan_once(struct layer *L, double *wall)
{
	tileops_status st;
	double t0 = bench_now_us();

	if ((st = tileops_plan_run(L->plan, 0, NULL, 0)) != TILEOPS_OK)
		return bench_fail("tileops_plan_run", st);
	if ((st = tileops_sync(L->c)) != TILEOPS_OK)
		return bench_fail("tileops_sync", st);
	*wall = bench_now_us() - t0;
	return 0;
}

/* Poison y, run the layer one way, and read y back into buf. */
static int layer_output(struct layer *L, int as_plan, uint16_t *buf)
{
	size_t bytes = layer_tensor_bytes(&L->d, LT_Y);
	tileops_status st;
	double wall;

	memset(buf, 0xff, bytes); /* bf16 NaN: whatever the run leaves unwritten shows */
	if ((st = tileops_tensor_write(L->c, L->t[LT_Y], 0, buf, bytes)) != TILEOPS_OK)
		return bench_fail("tileops_tensor_write", st);
	if ((as_plan ? layer_plan_once(L, &wall) : layer_single(L, &wall, NULL)) < 0)
		return -1;
	if ((st = tileops_tensor_read(L->c, L->t[LT_Y], 0, buf, bytes)) != TILEOPS_OK)
		return bench_fail("tileops_tensor_read", st);
	return 0;
}

/* The plan's y must equal the single ops' y exactly (same kernels), and be finite. */
static int layer_check(struct layer *L)
{
	int64_t n = layer_tensor_numel(&L->d, LT_Y);
	size_t bytes = layer_tensor_bytes(&L->d, LT_Y);
	uint16_t *ref = malloc(bytes), *got = malloc(bytes);
	int rc = -1;

	if (ref == NULL || got == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	if (layer_output(L, 0, ref) < 0 || layer_output(L, 1, got) < 0)
		goto out;
	for (int64_t i = 0; i < n; i++) {
		float r = layer_bf16_to_f32(ref[i]), g = layer_bf16_to_f32(got[i]);
		if (!isfinite(r) || ref[i] != got[i]) {
			fprintf(stderr,
			        PROG ": batch %ld: y[%ld] is %g as a plan and %g as single ops: "
			             "expected equal and finite\n",
			        (long)L->d.batch, (long)i, (double)g, (double)r);
			goto out;
		}
	}
	rc = 0;
out:
	free(ref);
	free(got);
	return rc;
}

/* ---- one client -------------------------------------------------------------- */

struct samples {
	double *single, *plan, *sum, *op[LAYER_N_OPS];
};

static void samples_free(struct samples *s)
{
	free(s->single);
	free(s->plan);
	free(s->sum);
	for (int i = 0; i < LAYER_N_OPS; i++)
		free(s->op[i]);
}

static int samples_alloc(struct samples *s, long n)
{
	size_t b = (size_t)n * sizeof(double);
	int ok;

	memset(s, 0, sizeof(*s));
	s->single = malloc(b);
	s->plan = malloc(b);
	s->sum = malloc(b);
	ok = s->single && s->plan && s->sum;
	for (int i = 0; i < LAYER_N_OPS; i++)
		ok = (s->op[i] = malloc(b)) != NULL && ok;
	if (!ok)
		fprintf(stderr, PROG ": out of memory\n");
	return ok ? 0 : -1;
}

/* The timed loops: single ops, plans, then single ops with device times. */
static int bench_loops(struct layer *L, const struct options *o, struct samples *s, int *have_gpu)
{
	double gpu[LAYER_N_OPS], w;

	for (long i = -o->warmup; i < o->runs; i++) {
		if (layer_single(L, i < 0 ? &w : &s->single[i], NULL) < 0)
			return -1;
	}
	for (long i = -o->warmup; i < o->runs; i++) {
		if (layer_plan_once(L, i < 0 ? &w : &s->plan[i]) < 0)
			return -1;
	}
	*have_gpu = 1;
	for (long i = -o->warmup; i < o->runs; i++) {
		if (layer_single(L, &w, gpu) < 0)
			return -1;
		if (i < 0)
			continue;
		s->sum[i] = 0.0;
		for (int k = 0; k < LAYER_N_OPS; k++) {
			*have_gpu = *have_gpu && !isnan(gpu[k]);
			s->op[k][i] = gpu[k];
			s->sum[i] += gpu[k];
		}
	}
	return 0;
}

static void report_batch(const struct options *o, int64_t batch, struct samples *s, int have_gpu)
{
	char label[40];
	double single, plan, sum;

	snprintf(label, sizeof(label), "B=%ld", (long)batch);
	single = bench_median(s->single, o->runs);
	plan = bench_median(s->plan, o->runs);
	bench_report("single_ops_layer_us", label, "median", single, "us", o->runs);
	bench_report("plan_layer_us", label, "median", plan, "us", o->runs);
	if (!have_gpu) {
		fprintf(stderr, PROG ": the daemon measured no device times (no rings?): "
		                     "no kernel or overhead figures\n");
		return;
	}
	for (int k = 0; k < LAYER_N_OPS; k++) {
		char kl[40];
		snprintf(kl, sizeof(kl), "B=%ld %s", (long)batch, layer_ops[k].label);
		bench_report("op_gpu_us", kl, "median", bench_median(s->op[k], o->runs), "us",
		             o->runs);
	}
	sum = bench_median(s->sum, o->runs);
	bench_report("kernel_sum_us", label, "median", sum, "us", o->runs);
	bench_report("overhead_per_op_us", label, "derived", (single - sum) / LAYER_N_OPS, "us",
	             o->runs);
	bench_report("plan_overhead_us", label, "derived", plan - sum, "us", o->runs);
}

static int run_single(const struct options *o)
{
	struct samples s;
	int rc = 0;

	if (samples_alloc(&s, o->runs) < 0) {
		samples_free(&s);
		return -1;
	}
	for (int b = 0; b < o->cfg.n_batches && rc == 0; b++) {
		struct layer L;
		int have_gpu = 0;

		rc = layer_open(o, o->cfg.batches[b], PROG, &L);
		if (rc == 0)
			rc = layer_check(&L);
		if (rc == 0)
			rc = bench_loops(&L, o, &s, &have_gpu);
		/* The loops ran the layer hundreds of times more: it still matches. */
		if (rc == 0)
			rc = layer_check(&L);
		if (rc == 0)
			report_batch(o, o->cfg.batches[b], &s, have_gpu);
		layer_free(&L);
	}
	samples_free(&s);
	return rc;
}

/* ---- many client processes ----------------------------------------------------- */

struct proc_result {
	int ok;
	double end_us;
	char backend[16];
};

struct proc_arg {
	const struct options *o;
	int64_t batch;
};

/* Phase 0: R layers as plans; phase 1: R layers as single ops. */
static int proc_main(bench_proc *p, int idx, void *argp)
{
	const struct proc_arg *a = argp;
	struct layer L;
	char name[48];
	double w;
	int ok;

	snprintf(name, sizeof(name), PROG " %d", idx);
	ok = layer_open(a->o, a->batch, name, &L) == 0 && layer_check(&L) == 0;
	for (long i = 0; i < a->o->warmup && ok; i++)
		ok = layer_plan_once(&L, &w) == 0 && layer_single(&L, &w, NULL) == 0;
	for (int phase = 0; phase < 2 && ok; phase++) {
		struct proc_result r = { .ok = 0 };

		bench_proc_start(p);
		for (long i = 0; i < a->o->layers && ok; i++)
			ok = (phase == 0 ? layer_plan_once(&L, &w) : layer_single(&L, &w, NULL)) ==
			     0;
		r.end_us = bench_now_us();
		r.ok = ok && layer_check(&L) == 0;
		snprintf(r.backend, sizeof(r.backend), "%s", bench_report_backend_name());
		bench_proc_finish(p, &r);
		ok = r.ok;
	}
	layer_free(&L);
	return ok ? 0 : 1;
}

static int run_procs(const struct options *o)
{
	static const char *const what[2] = { "procs_plan_layers_per_s",
		                             "procs_single_layers_per_s" };
	struct proc_result *res = calloc((size_t)(2 * o->procs), sizeof(*res));
	double t0[2];
	int rc = 0;

	if (res == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	for (int b = 0; b < o->cfg.n_batches && rc == 0; b++) {
		struct proc_arg a = { o, o->cfg.batches[b] };
		char label[40];

		rc = bench_procs_run(PROG, o->procs, 2, sizeof(*res), proc_main, &a, res, t0);
		for (int ph = 0; ph < 2 && rc == 0; ph++) {
			double end = t0[ph];
			for (int i = 0; i < o->procs; i++) {
				const struct proc_result *r = &res[ph * o->procs + i];
				rc = r->ok ? rc : -1;
				end = r->end_us > end ? r->end_us : end;
			}
			if (rc < 0)
				break;
			bench_report_backend(res[0].backend);
			long total = (long)o->procs * o->layers;
			snprintf(label, sizeof(label), "B=%ld x%d procs", (long)a.batch, o->procs);
			bench_report(what[ph], label, "total",
			             (double)total / ((end - t0[ph]) / 1e6), "layers/s", total);
		}
	}
	free(res);
	return rc;
}

/* ---- command line ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--address ADDR] [--runs N] [--warmup W] [--json FILE]\n"
	           "       " PROG " --procs P [--layers R] [--address ADDR] [--json FILE]\n"
	           "       " LAYER_USAGE
	           "A decode layer through tileopsd, as single ops and as a plan\n"
	           "(see docs/perf.md, \"A decode layer\").\n");
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longs[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "runs", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "procs", required_argument, NULL, 'p' },
		{ "layers", required_argument, NULL, 'l' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		LAYER_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;
	long v = 0;

	while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
		int bad = 0;
		if (layer_parse_option(c, optarg, &o->cfg, &bad)) {
			/* handled */
		} else if (c == 'a') {
			o->address = optarg;
		} else if (c == 'j') {
			o->json = optarg;
		} else if (c == 'n') {
			bad = bench_parse_long(optarg, 1, 10000000, &o->runs);
		} else if (c == 'w') {
			bad = bench_parse_long(optarg, 0, 10000000, &o->warmup);
		} else if (c == 'l') {
			bad = bench_parse_long(optarg, 1, 10000000, &o->layers);
		} else if (c == 'p') {
			bad = bench_parse_long(optarg, 1, BENCH_PROCS_MAX, &v);
			o->procs = (int)v;
		} else if (c == 'h') {
			usage(stdout);
			exit(0);
		} else {
			usage(stderr);
			return -1;
		}
		if (bad) {
			fprintf(stderr, PROG ": bad value '%s' for --%s\n", optarg,
			        longs[idx].name);
			return -1;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options o = { .runs = 200, .warmup = 20, .layers = 200 };
	int rc;

	layer_config_default(&o.cfg);
	if (parse_args(argc, argv, &o) < 0)
		return 2;
	bench_client_prog(PROG);
	if (bench_report_open(PROG, "layer", o.json) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	rc = o.procs > 0 ? run_procs(&o) : run_single(&o);
	bench_report_table("measurement (tileopsd)");
	bench_report_close();
	return rc == 0 ? 0 : 1;
}
