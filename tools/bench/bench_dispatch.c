/*
 * tileops-bench-dispatch - what an op costs to dispatch through tileopsd,
 * measured from a client as a program would see it.
 *
 *   tileops-bench-dispatch [--address ADDR] [--n N] [--reps R] [--json FILE]
 *   tileops-bench-dispatch --procs P [--kernels K] [--ns NS] [--blocks B]
 *                          [--reap C] [--progress] [--linger-ms MS]
 *                          [--address ADDR] [--json FILE]
 *
 * One client (the default), a tiny op: `add` of two 256-float vectors.
 *  - async: N (20000) ops submitted with tileops_op_submit, at most
 *    WINDOW (128) completions outstanding (the oldest is waited for and
 *    freed to make room), then tileops_sync; the whole time over N is the
 *    per-op time (mean);
 *  - sync_timed: tileops_op_submit_timed then tileops_completion_wait, one
 *    op at a time, R (2000) times: the median round trip (the completion
 *    comes when the op has finished on the device); the op's own device
 *    time from tileops_completion_gpu_us, median over the same ops;
 *  - sync_run: tileops_op_run then tileops_sync, R times, median: the
 *    plain synchronous use of the API;
 *  - overhead: each of the three above minus that median device time.
 * Every loop runs once as warm-up first; the sums are checked at the end.
 *
 * --procs P forks P processes before any connection; each connects, runs
 * a few spin ops to warm up, then waits on a pipe the parent closes once
 * every one is ready (the common start). Each then submits K (2000) `spin`
 * ops (NS = 5000 ns on B = 4 blocks, the anchors' multi-process kernel)
 * with at most WINDOW outstanding, and calls tileops_sync. Time runs from
 * the common start to the end of the last process's sync; the figure is
 * P * K over it. What the ops wrote is checked after the timing.
 *
 * --reap C: when the window is full, wait for the C-th oldest completion
 * and free the C oldest, rather than one at a time (C = 1): a client that
 * waits in batches spins less and leaves the CPUs to the daemon.
 * --progress prints, per process, when each tenth of its ops had
 * completed; --linger-ms MS makes each process wait that long after its
 * sync before it reads back, frees and closes (diagnostics: what the
 * processes that finish first do to the others).
 *
 * --api MODE --procs P [--ops N] [--window W] [--plan-ops K] [--trace]:
 * the rows of a serving engine's calls (pipelined op_run, op_run + sync
 * each, windowed submit, plan replay per step), P processes at once, with
 * latency percentiles and, with --trace, where each request's time went
 * (bench_api.c).
 *
 * Every measurement is one JSON line (to --json FILE, appended, else
 * stdout); a markdown table of all of them ends the output. Exit status 0
 * only when every op succeeded and every result checked out.
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_api.h"
#include "bench_client.h"
#include "bench_common.h"
#include "tileops.h"

#define PROG "tileops-bench-dispatch"
#define TINY_N 256
#define SPIN_N 4
#define WINDOW 128

struct options {
	const char *address, *json;
	long n, reps, kernels, ns, blocks, reap, linger_ms;
	int procs, progress;
	bench_api_options api; /* --api MODE: its mode is set */
};

/* ---- a window of outstanding completions ---------------------------------- */

struct window {
	tileops_completion *cp[WINDOW];
	int head, count;
	int reap; /* completions freed each time the window is full */
	long failed;
	/* --progress: when each tenth of the ops had completed. */
	long popped, tenth;
	double t0, *marks;
};

/* Wait for the oldest completion, count it if it failed, and free it. */
static void window_pop(struct window *w)
{
	tileops_completion *cp = w->cp[w->head];
	tileops_status st = tileops_completion_wait(cp, -1);

	if (st != TILEOPS_OK && w->failed++ == 0)
		bench_fail("an asynchronous op", st);
	tileops_completion_free(cp);
	w->head = (w->head + 1) % WINDOW;
	w->count--;
	if (w->marks && ++w->popped % w->tenth == 0 && w->popped / w->tenth <= 10)
		w->marks[w->popped / w->tenth - 1] = (bench_now_us() - w->t0) / 1e3;
}

static int window_submit(struct window *w, tileops_client *c, const tileops_op *op)
{
	tileops_completion *cp;
	tileops_status st;

	if (w->count == WINDOW) {
		/* Wait for the reap-th oldest first (ring ops finish in order), so
		 * a full window costs one wait, not one per op. */
		tileops_completion_wait(w->cp[(w->head + w->reap - 1) % WINDOW], -1);
		for (int i = 0; i < w->reap; i++)
			window_pop(w);
	}
	if ((st = tileops_op_submit(c, op, &cp)) != TILEOPS_OK)
		return bench_fail("tileops_op_submit", st);
	w->cp[(w->head + w->count) % WINDOW] = cp;
	w->count++;
	return 0;
}

/* Submit `n` copies of op, wait for every completion, then sync; marks
 * (when not NULL) gets the milliseconds at which each tenth had completed. */
static int submit_many(tileops_client *c, const tileops_op *op, long n, long reap, double *marks)
{
	struct window w = { .head = 0,
		            .reap = (int)reap,
		            .marks = n >= 10 ? marks : NULL,
		            .tenth = n / 10,
		            .t0 = bench_now_us() };
	tileops_status st;
	int rc = 0;

	for (long i = 0; i < n && rc == 0; i++)
		rc = window_submit(&w, c, op);
	while (w.count > 0)
		window_pop(&w);
	if ((st = tileops_sync(c)) != TILEOPS_OK)
		rc = bench_fail("tileops_sync", st);
	return rc == 0 && w.failed == 0 ? 0 : -1;
}

/* ---- tensors ---------------------------------------------------------------- */

static int vector_create(tileops_client *c, int64_t n, const float *init, tileops_tensor *t)
{
	tileops_status st = tileops_tensor_create(c, TILEOPS_F32, 1, &n, t);

	if (st != TILEOPS_OK)
		return bench_fail("tileops_tensor_create", st);
	if ((st = tileops_tensor_write(c, *t, 0, init, (size_t)n * sizeof(float))) != TILEOPS_OK)
		return bench_fail("tileops_tensor_write", st);
	return 0;
}

static int vector_check(tileops_client *c, tileops_tensor t, const float *want, int64_t n,
                        const char *what)
{
	float got[TINY_N];
	tileops_status st = tileops_tensor_read(c, t, 0, got, (size_t)n * sizeof(float));

	if (st != TILEOPS_OK)
		return bench_fail("tileops_tensor_read", st);
	for (int64_t i = 0; i < n; i++) {
		if (got[i] != want[i]) {
			fprintf(stderr, PROG ": %s: out[%ld] = %g, expected %g\n", what, (long)i,
			        (double)got[i], (double)want[i]);
			return -1;
		}
	}
	return 0;
}

/* ---- one client ----------------------------------------------------------- */

static int bench_async(tileops_client *c, const tileops_op *op, long n, long reap, double *per_op)
{
	if (submit_many(c, op, n < 1000 ? n : 1000, reap, NULL) < 0)
		return -1;
	double t0 = bench_now_us();
	if (submit_many(c, op, n, reap, NULL) < 0)
		return -1;
	*per_op = (bench_now_us() - t0) / (double)n;
	bench_report("async_per_op_us", "add256", "mean", *per_op, "us", n);
	return 0;
}

/* One timed op round trip: its wall time and its device time. */
static int timed_once(tileops_client *c, const tileops_op *op, double *wall, double *gpu)
{
	tileops_completion *cp;
	tileops_status st;
	double t0 = bench_now_us();

	if ((st = tileops_op_submit_timed(c, op, &cp)) != TILEOPS_OK)
		return bench_fail("tileops_op_submit_timed", st);
	st = tileops_completion_wait(cp, -1);
	*wall = bench_now_us() - t0;
	if (st == TILEOPS_OK)
		st = tileops_completion_gpu_us(cp, gpu);
	tileops_completion_free(cp);
	return st == TILEOPS_OK ? 0 : bench_fail("a timed op", st);
}

static int run_once(tileops_client *c, const tileops_op *op, double *wall)
{
	tileops_status st;
	double t0 = bench_now_us();

	if ((st = tileops_op_run(c, op)) != TILEOPS_OK)
		return bench_fail("tileops_op_run", st);
	if ((st = tileops_sync(c)) != TILEOPS_OK)
		return bench_fail("tileops_sync", st);
	*wall = bench_now_us() - t0;
	return 0;
}

/* sync_timed and sync_run; *gpu_med is the ops' median device time. */
static int bench_sync(tileops_client *c, const tileops_op *op, long reps, double *gpu_med,
                      double *sync_med, double *run_med)
{
	double *wall = malloc((size_t)reps * sizeof(double));
	double *gpu = malloc((size_t)reps * sizeof(double));
	long warm = reps < 200 ? reps : 200;
	int rc = -1;

	if (wall == NULL || gpu == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	for (long i = 0; i < warm; i++) {
		if (timed_once(c, op, &wall[i], &gpu[i]) < 0 || run_once(c, op, &wall[i]) < 0)
			goto out;
	}
	for (long i = 0; i < reps; i++) {
		if (timed_once(c, op, &wall[i], &gpu[i]) < 0)
			goto out;
	}
	*sync_med = bench_median(wall, reps);
	*gpu_med = bench_median(gpu, reps);
	for (long i = 0; i < reps; i++) {
		if (run_once(c, op, &wall[i]) < 0)
			goto out;
	}
	*run_med = bench_median(wall, reps);
	bench_report("sync_timed_us", "add256", "median", *sync_med, "us", reps);
	bench_report("sync_run_us", "add256", "median", *run_med, "us", reps);
	bench_report("kernel_gpu_us", "add256", "median", *gpu_med, "us", reps);
	rc = 0;
out:
	free(wall);
	free(gpu);
	return rc;
}

/*
 * plan12: a plan of 12 add256 ops (the in-process baseline's graph12),
 * tileops_plan_run + tileops_sync per replay, median. The first run
 * captures; it is left out with the warm-up.
 */
static int bench_plan(tileops_client *c, const tileops_op *op, long reps)
{
	tileops_plan *p = NULL;
	tileops_status st;
	double *wall = malloc((size_t)reps * sizeof(double));
	int rc = -1;

	if (wall == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	if ((st = tileops_plan_begin(c, NULL, &p)) != TILEOPS_OK) {
		rc = bench_fail("tileops_plan_begin", st);
		goto out;
	}
	for (int i = 0; i < 12; i++) {
		if ((st = tileops_plan_add(p, op)) != TILEOPS_OK) {
			rc = bench_fail("tileops_plan_add", st);
			goto out;
		}
	}
	if ((st = tileops_plan_end(p)) != TILEOPS_OK) {
		rc = bench_fail("tileops_plan_end", st);
		goto out;
	}
	for (long i = -50; i < reps; i++) {
		double t0 = bench_now_us();
		if ((st = tileops_plan_run(p, 0, NULL, 0)) != TILEOPS_OK) {
			rc = bench_fail("tileops_plan_run", st);
			goto out;
		}
		if ((st = tileops_sync(c)) != TILEOPS_OK) {
			rc = bench_fail("tileops_sync", st);
			goto out;
		}
		if (i >= 0)
			wall[i] = bench_now_us() - t0;
	}
	bench_report("plan12_run_sync_us", "add256 x12", "median", bench_median(wall, reps), "us",
	             reps);
	rc = 0;
out:
	tileops_plan_free(p);
	free(wall);
	return rc;
}

static int run_single(const struct options *o)
{
	float a[TINY_N], b[TINY_N], sum[TINY_N], poison[TINY_N];
	tileops_tensor t[3] = { 0, 0, 0 };
	tileops_client *c = NULL;
	tileops_op op = {
		.name = "add", .inputs = t, .n_inputs = 2, .outputs = &t[2], .n_outputs = 1
	};
	double async_op, gpu, sync_med, run_med;
	int rc = -1;

	for (int i = 0; i < TINY_N; i++) {
		/* Multiples of 1/256 below 4: every sum is exact in f32. */
		a[i] = (float)(rand() % 2001 - 1000) / 256.0f;
		b[i] = (float)(rand() % 2001 - 1000) / 256.0f;
		sum[i] = a[i] + b[i];
		poison[i] = NAN;
	}
	if (bench_connect(o->address, PROG, &c) < 0)
		return -1;
	if (vector_create(c, TINY_N, a, &t[0]) < 0 || vector_create(c, TINY_N, b, &t[1]) < 0 ||
	    vector_create(c, TINY_N, poison, &t[2]) < 0)
		goto out;
	if (bench_async(c, &op, o->n, o->reap, &async_op) < 0 ||
	    vector_check(c, t[2], sum, TINY_N, "async add") < 0)
		goto out;
	if (bench_sync(c, &op, o->reps, &gpu, &sync_med, &run_med) < 0 ||
	    bench_plan(c, &op, o->reps) < 0)
		goto out;
	bench_report("async_overhead_us", "add256", "derived", async_op - gpu, "us", o->n);
	bench_report("sync_timed_overhead_us", "add256", "derived", sync_med - gpu, "us", o->reps);
	bench_report("sync_run_overhead_us", "add256", "derived", run_med - gpu, "us", o->reps);
	rc = vector_check(c, t[2], sum, TINY_N, "sync add");
out:
	for (int i = 0; i < 3; i++)
		tileops_tensor_free(c, t[i]);
	tileops_close(c);
	return rc;
}

/* ---- many client processes ------------------------------------------------- */

/* What one process reports back through the result pipe. */
struct proc_result {
	int ok;
	double start_us, end_us; /* after the start signal; after the last sync */
	double marks[10];        /* --progress */
	char backend[16];
};

/* Connect, create x and out, and warm up with a few spin ops. */
static int proc_prepare(const struct options *o, int idx, tileops_client **c, tileops_tensor *t,
                        tileops_op *op, tileops_param *params, float *x)
{
	char name[48];
	float poison[SPIN_N];

	for (int i = 0; i < SPIN_N; i++) {
		x[i] = (float)(idx * SPIN_N + i) * 0.25f;
		poison[i] = NAN;
	}
	snprintf(name, sizeof(name), PROG " %d", idx);
	if (bench_connect(o->address, name, c) < 0 || vector_create(*c, SPIN_N, x, &t[0]) < 0 ||
	    vector_create(*c, SPIN_N, x, &t[1]) < 0)
		return -1;
	params[0] = tileops_param_int("ns", o->ns);
	params[1] = tileops_param_int("blocks", o->blocks);
	*op = (tileops_op){ .name = "spin",
		            .inputs = &t[0],
		            .n_inputs = 1,
		            .outputs = &t[1],
		            .n_outputs = 1,
		            .params = params,
		            .n_params = 2 };
	if (submit_many(*c, op, 10, 1, NULL) < 0)
		return -1;
	/* Poisoned, so the check after the timed ops sees their writes. */
	tileops_status st = tileops_tensor_write(*c, t[1], 0, poison, sizeof(poison));
	return st == TILEOPS_OK ? 0 : bench_fail("tileops_tensor_write", st);
}

static int proc_main(bench_proc *p, int idx, void *arg)
{
	const struct options *o = arg;
	struct proc_result r = { .ok = 0 };
	tileops_client *c = NULL;
	tileops_tensor t[2] = { 0, 0 };
	tileops_param params[2];
	tileops_op op;
	float x[SPIN_N], want[SPIN_N];
	int64_t written = o->blocks < SPIN_N ? o->blocks : SPIN_N;

	int prepared = proc_prepare(o, idx, &c, t, &op, params, x) == 0;
	bench_proc_start(p);
	r.start_us = bench_now_us();
	if (prepared &&
	    submit_many(c, &op, o->kernels, o->reap, o->progress ? r.marks : NULL) == 0) {
		r.end_us = bench_now_us();
		/* --linger-ms: read back, free and close only after the others
		 * are likely done too. */
		if (o->linger_ms > 0)
			usleep((useconds_t)(o->linger_ms * 1000));
		/* Block b writes element b % n: the first min(blocks, n) are written. */
		for (int i = 0; i < SPIN_N; i++)
			want[i] = x[i] + 1.0f;
		r.ok = vector_check(c, t[1], want, written, "spin") == 0;
	}
	snprintf(r.backend, sizeof(r.backend), "%s", bench_report_backend_name());
	bench_proc_finish(p, &r);
	tileops_tensor_free(c, t[0]);
	tileops_tensor_free(c, t[1]);
	tileops_close(c);
	return r.ok ? 0 : 1;
}

static int run_procs(const struct options *o)
{
	struct proc_result res[BENCH_PROCS_MAX];
	double t0, end;

	memset(res, 0, sizeof(res));
	if (bench_procs_run(PROG, o->procs, 1, sizeof(res[0]), proc_main, (void *)o, res, &t0) < 0)
		return -1;
	end = t0;
	double first = -1.0;
	for (int i = 0; i < o->procs; i++) {
		if (!res[i].ok) {
			fprintf(stderr,
			        PROG ": a client process failed (its messages are above)\n");
			return -1;
		}
		end = res[i].end_us > end ? res[i].end_us : end;
		first = first < 0 || res[i].end_us < first ? res[i].end_us : first;
	}
	for (int i = 0; i < o->procs; i++) {
		char who[32];
		snprintf(who, sizeof(who), "process %d", i);
		bench_report("proc_start_ms", who, "once", (res[i].start_us - t0) / 1e3, "ms",
		             (long)o->kernels);
		bench_report("proc_done_ms", who, "once", (res[i].end_us - t0) / 1e3, "ms",
		             (long)o->kernels);
		if (o->progress) {
			fprintf(stderr, "progress %s (ms at each tenth of its ops):", who);
			for (int k = 0; k < 10; k++)
				fprintf(stderr, " %.2f",
				        res[i].marks[k] + (res[i].start_us - t0) / 1e3);
			fprintf(stderr, "\n");
		}
	}
	bench_report_backend(res[0].backend);
	double total = (double)o->procs * (double)o->kernels;
	bench_report("procs_kernels_per_s", "spin", "total", total / ((end - t0) / 1e6),
	             "kernels/s", (long)total);
	bench_report("procs_wall_ms", "spin", "once", (end - t0) / 1e3, "ms", (long)total);
	/* How evenly the processes were served: the first one's finish beside the last's. */
	bench_report("procs_first_done_ms", "spin", "once", (first - t0) / 1e3, "ms", (long)total);
	return 0;
}

/* ---- command line ------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--address ADDR] [--n N] [--reps R] [--reap C] [--json FILE]\n"
	           "       " PROG " --procs P [--kernels K] [--ns NS] [--blocks B] [--reap C]\n"
	           "                [--progress] [--linger-ms MS]\n"
	           "                [--address ADDR] [--json FILE]\n"
	           "       " PROG " --api pipelined|sync|windowed|plan --procs P [--ops N]\n"
	           "                [--window W] [--plan-ops K] [--ns NS] [--blocks B] [--trace]\n"
	           "                [--address ADDR] [--json FILE]\n"
	           "Dispatch figures through tileopsd (see docs/perf.md).\n");
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longs[] = {
		{ "address", required_argument, NULL, 'a' },
		{ "n", required_argument, NULL, 'n' },
		{ "reps", required_argument, NULL, 'r' },
		{ "procs", required_argument, NULL, 'p' },
		{ "kernels", required_argument, NULL, 'k' },
		{ "ns", required_argument, NULL, 't' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "json", required_argument, NULL, 'j' },
		{ "reap", required_argument, NULL, 'R' },
		{ "progress", no_argument, NULL, 'g' },
		{ "linger-ms", required_argument, NULL, 'L' },
		{ "api", required_argument, NULL, 'A' },
		{ "ops", required_argument, NULL, 'O' },
		{ "window", required_argument, NULL, 'W' },
		{ "plan-ops", required_argument, NULL, 'K' },
		{ "trace", no_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;
	long v = 0;

	while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
		int bad = 0;
		switch (c) {
		case 'a':
			o->address = optarg;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'n':
			bad = bench_parse_long(optarg, 1, 100000000, &o->n);
			break;
		case 'r':
			bad = bench_parse_long(optarg, 1, 10000000, &o->reps);
			break;
		case 'k':
			bad = bench_parse_long(optarg, 1, 100000000, &o->kernels);
			break;
		case 't':
			bad = bench_parse_long(optarg, 0, 1000000000, &o->ns);
			break;
		case 'b':
			bad = bench_parse_long(optarg, 1, 1024, &o->blocks);
			break;
		case 'p':
			bad = bench_parse_long(optarg, 1, BENCH_PROCS_MAX, &v);
			o->procs = (int)v;
			break;
		case 'R':
			bad = bench_parse_long(optarg, 1, WINDOW, &o->reap);
			break;
		case 'g':
			o->progress = 1;
			break;
		case 'L':
			bad = bench_parse_long(optarg, 0, 60000, &o->linger_ms);
			break;
		case 'A':
			o->api.mode = optarg;
			bad = !bench_api_mode_ok(optarg);
			break;
		case 'O':
			bad = bench_parse_long(optarg, 1, 10000000, &o->api.ops);
			break;
		case 'W':
			bad = bench_parse_long(optarg, 1, 256, &o->api.window);
			break;
		case 'K':
			bad = bench_parse_long(optarg, 1, 256, &o->api.plan_ops);
			break;
		case 'T':
			o->api.trace = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
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
	struct options o = { .n = 20000,
		             .reps = 2000,
		             .kernels = 2000,
		             .ns = 5000,
		             .blocks = 4,
		             .reap = 1,
		             .api = { .ops = 2000, .window = 128, .plan_ops = 8 } };
	char title[64];
	int rc;

	if (parse_args(argc, argv, &o) < 0)
		return 2;
	bench_client_prog(PROG);
	if (bench_report_open(PROG, "dispatch", o.json) < 0)
		return 2;
	bench_report_backend("unknown");
	signal(SIGPIPE, SIG_IGN);
	srand(12345);
	if (o.api.mode) {
		o.api.address = o.address;
		o.api.procs = o.procs > 0 ? o.procs : 1;
		o.api.ns = o.ns;
		o.api.blocks = o.blocks;
		rc = bench_api_run(&o.api);
	} else {
		rc = o.procs > 0 ? run_procs(&o) : run_single(&o);
	}
	snprintf(title, sizeof(title), "measurement (tileopsd, %s)", bench_report_backend_name());
	bench_report_table(title);
	bench_report_close();
	return rc == 0 ? 0 : 1;
}
