/*
 * bench_api.c - tileops-bench-dispatch --api MODE --procs P: P client
 * processes at once, each on its own tensors, using only the calls of the
 * README and tileops.h, each running N (--ops, 2000) `spin` ops (NS ns on
 * B blocks, as the many-process rows) in one of four ways:
 *
 *   pipelined  N x tileops_op_run, then one tileops_sync (a decode step:
 *              ops in order, one sync); a latency is one op_run call
 *   sync       tileops_op_run + tileops_sync per op; a latency is the pair
 *   windowed   tileops_op_submit with W (--window, 128) completions kept
 *              outstanding, the oldest waited for and freed to make room;
 *              a latency is from its submit to the end of its wait
 *   plan       a plan of K (--plan-ops, 8) spin ops, tileops_plan_run +
 *              tileops_sync per step, N / K steps; a latency is one step
 *
 * Every process connects and warms up, then all start together (a pipe
 * barrier); each records every latency, and what its ops wrote is checked
 * exactly after the timing. Reported (bench "dispatch", kernel "MODE P=p"):
 * api_lat_p50_us, api_lat_p99_us, api_lat_max_us over every latency of
 * every process; api_ops_per_s, P * N over the time from the common start
 * to the end of the last process; api_us_per_op, each process's time over
 * its N ops, the median over the processes.
 *
 * --trace (a separate run: tracing costs clock reads) turns on
 * tileops_trace_start in every process and reports instead, per kind of
 * request traced (op, plan, sync), the median over every request of each
 * stage of its trip (api_stage_us, kernel "MODE P=p KIND STAGE"):
 *   ring     submitted -> the executor took it
 *   launch   taken -> launched (a sync: its fence placed)
 *   post     launched -> completion posted (a sync: the device finished)
 *   wake     posted -> the client read it
 *   total    submitted -> read
 */
#include "bench_api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_client.h"
#include "bench_common.h"
#include "tileops.h"

#define SPIN_N 4
#define API_WINDOW_MAX 256
#define STAGES 5
#define KINDS 3

static const char *const stage_names[STAGES] = { "ring", "launch", "post", "wake", "total" };
static const char *const kind_names[KINDS] = { "op", "plan", "sync" };

int bench_api_mode_ok(const char *mode)
{
	return strcmp(mode, "pipelined") == 0 || strcmp(mode, "sync") == 0 ||
	       strcmp(mode, "windowed") == 0 || strcmp(mode, "plan") == 0;
}

/* What each process sends back; its latencies and stages go through files. */
struct api_result {
	int ok;
	double start_us, end_us;
	long n_lat, n_stage;
	char backend[16];
};

struct api_ctx {
	const bench_api_options *o;
	char dir[64]; /* where the processes leave their samples */
};

/* One traced request's stages, in microseconds. */
struct stage_rec {
	int kind;
	double us[STAGES];
};

static int write_file(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, len, f) == len;

	if (f)
		fclose(f);
	if (!ok)
		fprintf(stderr, "tileops-bench-dispatch: cannot write %s\n", path);
	return ok ? 0 : -1;
}

/* The whole file, malloc'd; *len its size. NULL when absent or empty. */
static void *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	void *p = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)n)) != NULL && fread(p, 1, (size_t)n, f) == (size_t)n)
		*len = (size_t)n;
	fclose(f);
	if (*len == 0) {
		free(p);
		p = NULL;
	}
	return p;
}

/* ---- one process ---------------------------------------------------------- */

struct api_proc {
	tileops_client *c;
	tileops_tensor t[2];
	tileops_param params[2];
	tileops_op op;
	tileops_plan *plan;
	float x[SPIN_N];
};

static int api_prepare(const bench_api_options *o, int idx, struct api_proc *p)
{
	char name[48];
	tileops_status st;
	const int64_t n = SPIN_N;

	for (int i = 0; i < SPIN_N; i++)
		p->x[i] = (float)(idx * SPIN_N + i) * 0.25f;
	snprintf(name, sizeof(name), "tileops-bench-dispatch api %d", idx);
	if (bench_connect(o->address, name, &p->c) < 0)
		return -1;
	for (int k = 0; k < 2; k++) {
		if ((st = tileops_tensor_create(p->c, TILEOPS_F32, 1, &n, &p->t[k])) != TILEOPS_OK)
			return bench_fail("tileops_tensor_create", st);
		if ((st = tileops_tensor_write(p->c, p->t[k], 0, p->x, sizeof(p->x))) != TILEOPS_OK)
			return bench_fail("tileops_tensor_write", st);
	}
	p->params[0] = tileops_param_int("ns", o->ns);
	p->params[1] = tileops_param_int("blocks", o->blocks);
	p->op = (tileops_op){ .name = "spin",
		              .inputs = &p->t[0],
		              .n_inputs = 1,
		              .outputs = &p->t[1],
		              .n_outputs = 1,
		              .params = p->params,
		              .n_params = 2 };
	if (strcmp(o->mode, "plan") == 0) {
		if ((st = tileops_plan_begin(p->c, NULL, &p->plan)) != TILEOPS_OK)
			return bench_fail("tileops_plan_begin", st);
		for (long i = 0; i < o->plan_ops; i++)
			if ((st = tileops_plan_add(p->plan, &p->op)) != TILEOPS_OK)
				return bench_fail("tileops_plan_add", st);
		if ((st = tileops_plan_end(p->plan)) != TILEOPS_OK)
			return bench_fail("tileops_plan_end", st);
	}
	return 0;
}

/* The timed loop of o->mode over n ops (plan: n / K steps); lat gets each
 * latency; returns how many, or -1. */
static long api_loop(const bench_api_options *o, struct api_proc *p, long n, double *lat)
{
	tileops_status st;
	long k = 0;

	if (strcmp(o->mode, "pipelined") == 0) {
		for (long i = 0; i < n; i++) {
			double t0 = bench_now_us();
			if ((st = tileops_op_run(p->c, &p->op)) != TILEOPS_OK)
				return bench_fail("tileops_op_run", st);
			lat[k++] = bench_now_us() - t0;
		}
		if ((st = tileops_sync(p->c)) != TILEOPS_OK)
			return bench_fail("tileops_sync", st);
	} else if (strcmp(o->mode, "sync") == 0) {
		for (long i = 0; i < n; i++) {
			double t0 = bench_now_us();
			if ((st = tileops_op_run(p->c, &p->op)) != TILEOPS_OK)
				return bench_fail("tileops_op_run", st);
			if ((st = tileops_sync(p->c)) != TILEOPS_OK)
				return bench_fail("tileops_sync", st);
			lat[k++] = bench_now_us() - t0;
		}
	} else if (strcmp(o->mode, "windowed") == 0) {
		tileops_completion *cp[API_WINDOW_MAX];
		double at[API_WINDOW_MAX];
		long head = 0, count = 0, w = o->window;
		for (long i = 0; i < n || count > 0;) {
			if (i < n && count < w) {
				long slot = (head + count) % w;
				at[slot] = bench_now_us();
				if ((st = tileops_op_submit(p->c, &p->op, &cp[slot])) != TILEOPS_OK)
					return bench_fail("tileops_op_submit", st);
				count++;
				i++;
				continue;
			}
			st = tileops_completion_wait(cp[head], -1);
			lat[k++] = bench_now_us() - at[head];
			tileops_completion_free(cp[head]);
			if (st != TILEOPS_OK)
				return bench_fail("an asynchronous op", st);
			head = (head + 1) % w;
			count--;
		}
		if ((st = tileops_sync(p->c)) != TILEOPS_OK)
			return bench_fail("tileops_sync", st);
	} else {
		long steps = n / o->plan_ops;
		for (long i = 0; i < steps; i++) {
			double t0 = bench_now_us();
			if ((st = tileops_plan_run(p->plan, 0, NULL, 0)) != TILEOPS_OK)
				return bench_fail("tileops_plan_run", st);
			if ((st = tileops_sync(p->c)) != TILEOPS_OK)
				return bench_fail("tileops_sync", st);
			lat[k++] = bench_now_us() - t0;
		}
	}
	return k;
}

/* Every written element is x + 1 (block b writes element b % n). */
static int api_check(const bench_api_options *o, struct api_proc *p)
{
	float got[SPIN_N];
	long written = o->blocks < SPIN_N ? o->blocks : SPIN_N;
	tileops_status st = tileops_tensor_read(p->c, p->t[1], 0, got, sizeof(got));

	if (st != TILEOPS_OK)
		return bench_fail("tileops_tensor_read", st);
	for (long i = 0; i < SPIN_N; i++) {
		float want = i < written ? p->x[i] + 1.0f : p->x[i];
		if (got[i] != want) {
			fprintf(stderr, "tileops-bench-dispatch: spin out[%ld] = %g, expected %g\n",
			        i, (double)got[i], (double)want);
			return -1;
		}
	}
	return 0;
}

/* The stages of every kept trace, into recs; returns how many. */
static long api_stages(tileops_client *c, struct stage_rec *recs, long max)
{
	tileops_trace t[256];
	size_t got;
	long k = 0;

	while (k < max && tileops_trace_read(c, t, 256, &got) == TILEOPS_OK && got > 0) {
		for (size_t i = 0; i < got && k < max; i++) {
			if (t[i].status != TILEOPS_OK || t[i].kind < 1 || t[i].kind > KINDS)
				continue;
			struct stage_rec *r = &recs[k++];
			r->kind = (int)t[i].kind - 1;
			r->us[0] = (double)(t[i].taken_ns - t[i].submit_ns) / 1e3;
			r->us[1] = (double)(t[i].launched_ns - t[i].taken_ns) / 1e3;
			r->us[2] = (double)(t[i].posted_ns - t[i].launched_ns) / 1e3;
			r->us[3] = (double)(t[i].woke_ns - t[i].posted_ns) / 1e3;
			r->us[4] = (double)(t[i].woke_ns - t[i].submit_ns) / 1e3;
		}
	}
	return k;
}

static int api_proc_main(bench_proc *bp, int idx, void *arg)
{
	const struct api_ctx *ctx = arg;
	const bench_api_options *o = ctx->o;
	struct api_result r = { .ok = 0 };
	struct api_proc p;
	long n = o->ops, warm = o->ops < 100 ? o->ops : 100, traces = 2 * o->ops + 64;
	double *lat = malloc((size_t)n * sizeof(double));
	struct stage_rec *stages = o->trace ? malloc((size_t)traces * sizeof(*stages)) : NULL;
	char path[128];

	memset(&p, 0, sizeof(p));
	int ready = lat && (!o->trace || stages) && api_prepare(o, idx, &p) == 0 &&
	            api_loop(o, &p, warm, lat) >= 0;
	tileops_status ts =
	        ready && o->trace ? tileops_trace_start(p.c, (size_t)traces) : TILEOPS_OK;
	if (ts != TILEOPS_OK)
		ready = bench_fail("tileops_trace_start", ts) == 0;
	bench_proc_start(bp);
	r.start_us = bench_now_us();
	long k = ready ? api_loop(o, &p, n, lat) : -1;
	r.end_us = bench_now_us();
	if (k >= 0 && api_check(o, &p) == 0) {
		r.n_lat = k;
		snprintf(path, sizeof(path), "%s/lat.%d", ctx->dir, idx);
		r.ok = write_file(path, lat, (size_t)k * sizeof(double)) == 0;
		if (r.ok && o->trace) {
			r.n_stage = api_stages(p.c, stages, traces);
			snprintf(path, sizeof(path), "%s/stage.%d", ctx->dir, idx);
			r.ok = write_file(path, stages, (size_t)r.n_stage * sizeof(*stages)) == 0;
		}
	}
	snprintf(r.backend, sizeof(r.backend), "%s", bench_report_backend_name());
	bench_proc_finish(bp, &r);
	tileops_plan_free(p.plan);
	if (p.c) {
		tileops_tensor_free(p.c, p.t[0]);
		tileops_tensor_free(p.c, p.t[1]);
		tileops_close(p.c);
	}
	free(lat);
	free(stages);
	return r.ok ? 0 : 1;
}

/* ---- the parent --------------------------------------------------------------- */

/* The value at quantile q of sorted v[0..n). */
static double quantile(const double *v, long n, double q)
{
	long i = (long)ceil(q * (double)n) - 1;
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static int report_latencies(const struct api_ctx *ctx, const char *label, long expect)
{
	double *all = malloc((size_t)ctx->o->procs * (size_t)expect * sizeof(double));
	long n = 0;

	if (!all)
		return -1;
	for (int i = 0; i < ctx->o->procs; i++) {
		char path[128];
		size_t len;
		snprintf(path, sizeof(path), "%s/lat.%d", ctx->dir, i);
		double *v = read_file(path, &len);
		size_t k = len / sizeof(double);
		if (v && n + (long)k <= ctx->o->procs * expect) {
			memcpy(all + n, v, k * sizeof(double));
			n += (long)k;
		}
		free(v);
		unlink(path);
	}
	if (n > 0) {
		bench_sort(all, n);
		bench_report("api_lat_p50_us", label, "p50", quantile(all, n, 0.50), "us", n);
		bench_report("api_lat_p99_us", label, "p99", quantile(all, n, 0.99), "us", n);
		bench_report("api_lat_max_us", label, "max", all[n - 1], "us", n);
	}
	free(all);
	return n > 0 ? 0 : -1;
}

static void report_stages(const struct api_ctx *ctx, const char *label)
{
	size_t cap = 0, n = 0;
	struct stage_rec *all = NULL;

	for (int i = 0; i < ctx->o->procs; i++) {
		char path[128];
		size_t len;
		snprintf(path, sizeof(path), "%s/stage.%d", ctx->dir, i);
		struct stage_rec *v = read_file(path, &len);
		size_t k = len / sizeof(*v);
		if (v && n + k > cap) {
			size_t ncap = (n + k) * 2;
			struct stage_rec *na = realloc(all, ncap * sizeof(*na));
			if (na) {
				all = na;
				cap = ncap;
			}
		}
		if (v && n + k <= cap) {
			memcpy(all + n, v, k * sizeof(*v));
			n += k;
		}
		free(v);
		unlink(path);
	}
	double *col = n ? malloc(n * sizeof(double)) : NULL;
	for (int kind = 0; col && kind < KINDS; kind++) {
		for (int s = 0; s < STAGES; s++) {
			long m = 0;
			for (size_t i = 0; i < n; i++)
				if (all[i].kind == kind)
					col[m++] = all[i].us[s];
			if (m == 0)
				continue;
			char what[96];
			snprintf(what, sizeof(what), "%s %s %s", label, kind_names[kind],
			         stage_names[s]);
			bench_report("api_stage_us", what, "median", bench_median(col, m), "us", m);
		}
	}
	free(col);
	free(all);
}

int bench_api_run(const bench_api_options *o)
{
	struct api_result res[BENCH_PROCS_MAX];
	struct api_ctx ctx = { .o = o };
	char label[64];
	double t0, end;
	int rc = -1;

	snprintf(ctx.dir, sizeof(ctx.dir), "/tmp/tileops-bench-api.XXXXXX");
	if (!mkdtemp(ctx.dir)) {
		fprintf(stderr, "tileops-bench-dispatch: mkdtemp failed\n");
		return -1;
	}
	snprintf(label, sizeof(label), "%s P=%d", o->mode, o->procs);
	memset(res, 0, sizeof(res));
	if (bench_procs_run("tileops-bench-dispatch", o->procs, 1, sizeof(res[0]), api_proc_main,
	                    &ctx, res, &t0) < 0)
		goto out;
	end = t0;
	double *per = malloc((size_t)o->procs * sizeof(double));
	long ops = 0;
	for (int i = 0; per && i < o->procs; i++) {
		if (!res[i].ok) {
			fprintf(stderr, "tileops-bench-dispatch: a client process failed (its "
			                "messages are above)\n");
			free(per);
			goto out;
		}
		end = res[i].end_us > end ? res[i].end_us : end;
		per[i] = (res[i].end_us - res[i].start_us) / (double)o->ops;
	}
	if (!per)
		goto out;
	bench_report_backend(res[0].backend);
	/* A plan step runs K ops: count ops either way. */
	ops = strcmp(o->mode, "plan") == 0 ? o->ops / o->plan_ops * o->plan_ops : o->ops;
	if (o->trace) {
		report_stages(&ctx, label);
	} else {
		bench_report("api_ops_per_s", label, "total",
		             (double)o->procs * (double)ops / ((end - t0) / 1e6), "ops/s",
		             (long)o->procs * ops);
		bench_report("api_us_per_op", label, "median", bench_median(per, o->procs), "us",
		             ops);
		if (report_latencies(&ctx, label, o->ops) < 0) {
			free(per);
			goto out;
		}
	}
	free(per);
	rc = 0;
out:
	for (int i = 0; i < o->procs; i++) {
		char path[128];
		snprintf(path, sizeof(path), "%s/lat.%d", ctx.dir, i);
		unlink(path);
		snprintf(path, sizeof(path), "%s/stage.%d", ctx.dir, i);
		unlink(path);
	}
	rmdir(ctx.dir);
	return rc;
}
