/*
 * tileops-bench-fairness - what one client's long ops do to another's short
 * ones on the same daemon (session_queue_us; docs/reliability.md).
 *
 *   tileops-bench-fairness [--address ADDR] [--heavy none|add|gemm]
 *                          [--samples N] [--label TEXT] [--json FILE]
 *                          [--heavy-elems N] [--small-elems N]
 *                          [--gemm-m M] [--gemm-n N] [--gemm-k K]
 *
 * The small client (this process) runs `add` over two f32 vectors of
 * --small-elems (1 Mi) elements, the way a latency-bound client does:
 * tileops_op_run, then tileops_sync, one op at a time; each round trip is
 * one sample. It first measures them alone (the unloaded figure) and the
 * op's own device time (tileops_op_submit_timed), then lets the heavy
 * client connect and set up (not before: its allocations and first op
 * would land in the figures alone), starts it and, once that has run for
 * 300 ms, measures --samples (2000) more.
 *
 * The heavy client (a child process, its own session) submits long ops
 * back to back with tileops_op_run and calls tileops_sync every 64:
 *  - add: t <- t + 1 over f32 vectors of --heavy-elems (350 Mi, 4.2 GB
 *    moved: about 1 ms on an H200), a chain whose every element must come
 *    out as the number of ops (slices are read back and checked);
 *  - gemm: bf16 M x K times K x N (8192, 8192, 4096: about 0.55 TFLOP),
 *    kernels that keep every SM for their whole length.
 * The small client's chain is checked the same way. Reported: the small
 * op's round trip (p50, p90, p99, max) alone and beside the heavy client,
 * its device time alone and beside it, and the heavy client's ops per
 * second.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_client.h"
#include "bench_common.h"

static const char *prog = "tileops-bench-fairness";

typedef struct opts {
	const char *address, *heavy, *label, *json;
	long samples, heavy_elems, small_elems, m, n, k;
} opts;

/* What the heavy child reports at the end. */
typedef struct heavy_result {
	int ok;
	long ops;
	double seconds;
} heavy_result;

static int make(tileops_client *c, tileops_dtype dt, int ndim, const int64_t *shape,
                tileops_tensor *t)
{
	tileops_status st = tileops_tensor_create(c, dt, ndim, shape, t);
	return st == TILEOPS_OK ? 0 : bench_fail("tileops_tensor_create", st);
}

/* A chain of adds: x <- x + one, ping-ponging a and b, `one` = exp(0). */
typedef struct chain {
	tileops_client *c;
	tileops_tensor a, b, one;
	long elems, ops;
} chain;

static int chain_make(tileops_client *c, long elems, chain *ch)
{
	const int64_t shape[] = { elems };
	memset(ch, 0, sizeof(*ch));
	ch->c = c;
	ch->elems = elems;
	if (make(c, TILEOPS_F32, 1, shape, &ch->a) || make(c, TILEOPS_F32, 1, shape, &ch->b) ||
	    make(c, TILEOPS_F32, 1, shape, &ch->one))
		return -1;
	tileops_op exp = { "exp", &ch->a, 1, &ch->one, 1, NULL, 0 };
	tileops_status st = tileops_op_run(c, &exp);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	return st == TILEOPS_OK ? 0 : bench_fail("exp", st);
}

/* The chain's next add, in in[] and *out (which the op points at). */
static tileops_op chain_next(const chain *ch, tileops_tensor in[2], tileops_tensor *out)
{
	in[0] = ch->ops % 2 ? ch->b : ch->a;
	in[1] = ch->one;
	*out = ch->ops % 2 ? ch->a : ch->b;
	return (tileops_op){ "add", in, 2, out, 1, NULL, 0 };
}

static tileops_status chain_step(chain *ch)
{
	tileops_tensor in[2], out;
	tileops_op add = chain_next(ch, in, &out);
	tileops_status st = tileops_op_run(ch->c, &add);
	if (st == TILEOPS_OK)
		ch->ops++;
	return st;
}

/* After a sync: every element read (three slices) equals the op count. */
static int chain_check(const chain *ch, const char *who)
{
	enum { SLICE = 4096 };
	static float got[SLICE];
	tileops_tensor last = ch->ops % 2 ? ch->b : ch->a;
	long n = ch->elems < SLICE ? ch->elems : SLICE;
	long starts[3] = { 0, (ch->elems - n) / 2, ch->elems - n };
	for (int s = 0; s < 3; s++) {
		tileops_status st =
		        tileops_tensor_read(ch->c, last, (size_t)starts[s] * sizeof(float), got,
		                            (size_t)n * sizeof(float));
		if (st != TILEOPS_OK)
			return bench_fail("tileops_tensor_read", st);
		for (long i = 0; i < n; i++) {
			if (got[i] != (float)ch->ops) {
				fprintf(stderr, "%s: %s: element %ld is %g after %ld adds of 1\n",
				        prog, who, starts[s] + i, (double)got[i], ch->ops);
				return -1;
			}
		}
	}
	return 0;
}

/* ---- the heavy client --------------------------------------------------- */

static int stop_asked(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, 0) > 0;
}

static int heavy_gemm_setup(tileops_client *c, const opts *o, tileops_tensor t[3])
{
	const int64_t sa[] = { o->m, o->k }, sb[] = { o->k, o->n }, sc[] = { o->m, o->n };
	return make(c, TILEOPS_BF16, 2, sa, &t[0]) || make(c, TILEOPS_BF16, 2, sb, &t[1]) ||
	       make(c, TILEOPS_BF16, 2, sc, &t[2]);
}

/* The child: wait for the setup byte, set up, say ready, wait for the go
 * byte, run until the pipe closes, then report. */
static int heavy_main(const opts *o, int ctl, int res)
{
	tileops_client *c;
	heavy_result r = { 0, 0, 0.0 };
	chain ch;
	tileops_tensor g[3];
	int gemm = strcmp(o->heavy, "gemm") == 0;
	char b;
	if (bench_read_all(ctl, &b, 1) != 0 || bench_connect(o->address, "fairness-heavy", &c) != 0)
		return 1;
	if (gemm ? heavy_gemm_setup(c, o, g) : chain_make(c, o->heavy_elems, &ch))
		return 1;
	b = 'r';
	if (bench_write_all(res, &b, 1) != 0 || bench_read_all(ctl, &b, 1) != 0)
		return 1;
	double t0 = bench_now_us();
	tileops_status st = TILEOPS_OK;
	while (st == TILEOPS_OK && !stop_asked(ctl)) {
		for (int i = 0; i < 64 && st == TILEOPS_OK; i++) {
			if (gemm) {
				tileops_op op = { "gemm", g, 2, &g[2], 1, NULL, 0 };
				st = tileops_op_run(c, &op);
			} else {
				st = chain_step(&ch);
			}
			r.ops += st == TILEOPS_OK;
		}
		if (st == TILEOPS_OK)
			st = tileops_sync(c);
	}
	r.seconds = (bench_now_us() - t0) * 1e-6;
	if (st != TILEOPS_OK)
		bench_fail("the heavy client's ops", st);
	r.ok = st == TILEOPS_OK && (gemm || chain_check(&ch, "the heavy client") == 0);
	tileops_close(c);
	return bench_write_all(res, &r, sizeof(r)) == 0 && r.ok ? 0 : 1;
}

/* ---- the small client --------------------------------------------------- */

/* n round trips of op_run + sync into v (microseconds). */
static int round_trips(chain *ch, double *v, long n)
{
	for (long i = 0; i < n; i++) {
		double t0 = bench_now_us();
		tileops_status st = chain_step(ch);
		if (st == TILEOPS_OK)
			st = tileops_sync(ch->c);
		if (st != TILEOPS_OK)
			return bench_fail("the small client's op_run + sync", st);
		v[i] = bench_now_us() - t0;
	}
	return 0;
}

static void report_latency(const opts *o, const char *when, double *v, long n)
{
	char name[160];
	bench_sort(v, n);
	snprintf(name, sizeof(name), "%s, %s", o->label, when);
	bench_report(name, "small add", "p50", v[n / 2], "us", n);
	bench_report(name, "small add", "p90", v[n * 9 / 10], "us", n);
	bench_report(name, "small add", "p99", v[n * 99 / 100], "us", n);
	bench_report(name, "small add", "max", v[n - 1], "us", n);
}

/* The small op's device time, median of 200 timed runs. */
static int device_time(chain *ch, double *us)
{
	double v[200];
	for (int i = 0; i < 200; i++) {
		tileops_tensor in[2], out;
		tileops_op add = chain_next(ch, in, &out);
		tileops_completion *cp;
		tileops_status st = tileops_op_submit_timed(ch->c, &add, &cp);
		if (st == TILEOPS_OK) {
			st = tileops_completion_wait(cp, -1);
			if (st == TILEOPS_OK)
				st = tileops_completion_gpu_us(cp, &v[i]);
			tileops_completion_free(cp);
		}
		if (st != TILEOPS_OK)
			return bench_fail("tileops_op_submit_timed", st);
		ch->ops++;
	}
	*us = bench_median(v, 200);
	return 0;
}

static int run(const opts *o)
{
	int heavy = strcmp(o->heavy, "none") != 0;
	int ctl[2] = { -1, -1 }, res[2] = { -1, -1 };
	pid_t pid = -1;
	/* The child first, before this process has a connection to inherit. */
	if (heavy) {
		if (pipe(ctl) != 0 || pipe(res) != 0) {
			fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
			return 1;
		}
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
			return 1;
		}
		if (pid == 0) {
			close(ctl[1]);
			close(res[0]);
			_exit(heavy_main(o, ctl[0], res[1]));
		}
		close(ctl[0]);
		close(res[1]);
	}
	tileops_client *c = NULL;
	chain ch;
	double dev_us = 0.0;
	/* the warm-up takes 200 round trips whatever --samples is */
	double *v = calloc((size_t)(o->samples > 200 ? o->samples : 200), sizeof(*v));
	int rc = 1;
	if (!v || bench_connect(o->address, "fairness-small", &c) != 0)
		goto out;
	if (chain_make(c, o->small_elems, &ch) != 0 || round_trips(&ch, v, 200) != 0)
		goto out;
	if (device_time(&ch, &dev_us) != 0 || round_trips(&ch, v, o->samples) != 0)
		goto out;
	bench_report(o->label, "small add", "device time", dev_us, "us", 200);
	report_latency(o, "alone", v, o->samples);
	if (heavy) {
		char b = 's';
		if (bench_write_all(ctl[1], &b, 1) != 0 || bench_read_all(res[0], &b, 1) != 0) {
			fprintf(stderr, "%s: the heavy client failed to start\n", prog);
			goto out;
		}
		b = 'g';
		if (bench_write_all(ctl[1], &b, 1) != 0)
			goto out;
		usleep(300000);
		if (round_trips(&ch, v, o->samples) != 0)
			goto out;
		char when[64];
		snprintf(when, sizeof(when), "beside %s", o->heavy);
		report_latency(o, when, v, o->samples);
		/* The small kernel's own time with the heavy one running: how much of the
		 * round trip beside it the GPU takes, and how much the rest of the path. */
		double beside_us = 0.0;
		if (device_time(&ch, &beside_us) != 0)
			goto out;
		snprintf(when, sizeof(when), "%s, beside %s", o->label, o->heavy);
		bench_report(when, "small add", "device time", beside_us, "us", 200);
	}
	if (tileops_sync(c) != TILEOPS_OK || chain_check(&ch, "the small client") != 0)
		goto out;
	rc = 0;
out:
	if (c)
		tileops_close(c);
	if (heavy) {
		heavy_result r = { 0, 0, 0.0 };
		int status = 0;
		close(ctl[1]); /* stop */
		if (bench_read_all(res[0], &r, sizeof(r)) != 0 || !r.ok) {
			fprintf(stderr, "%s: the heavy client failed\n", prog);
			rc = 1;
		} else {
			bench_report(o->label, o->heavy, "heavy ops/s", (double)r.ops / r.seconds,
			             "ops/s", r.ops);
		}
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = 1;
	}
	free(v);
	return rc;
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: %s [--address ADDR] [--heavy none|add|gemm] [--samples N] "
	        "[--label TEXT] [--json FILE]\n"
	        "       [--heavy-elems N] [--small-elems N] [--gemm-m M] [--gemm-n N] "
	        "[--gemm-k K]\n",
	        prog);
	return 2;
}

int main(int argc, char **argv)
{
	opts o = { NULL, "add", "tileopsd", NULL, 2000, 350L << 20, 1L << 20, 8192, 8192, 4096 };
	bench_client_prog(prog);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		struct {
			const char *flag;
			long *out, lo, hi;
		} nums[] = {
			{ "--samples", &o.samples, 10, 1000000 },
			{ "--heavy-elems", &o.heavy_elems, 1, 1L << 32 },
			{ "--small-elems", &o.small_elems, 1, 1L << 30 },
			{ "--gemm-m", &o.m, 1, 1 << 20 },
			{ "--gemm-n", &o.n, 1, 1 << 20 },
			{ "--gemm-k", &o.k, 1, 1 << 20 },
		};
		int done = 0;
		for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]) && !done; k++) {
			if (strcmp(a, nums[k].flag) != 0)
				continue;
			if (!v || bench_parse_long(v, nums[k].lo, nums[k].hi, nums[k].out) != 0) {
				fprintf(stderr, "%s: %s wants a number in [%ld, %ld]\n", prog, a,
				        nums[k].lo, nums[k].hi);
				return 2;
			}
			done = 1;
		}
		if (!done && v && strcmp(a, "--address") == 0)
			o.address = v, done = 1;
		else if (!done && v && strcmp(a, "--label") == 0)
			o.label = v, done = 1;
		else if (!done && v && strcmp(a, "--json") == 0)
			o.json = v, done = 1;
		else if (!done && v && strcmp(a, "--heavy") == 0) {
			if (strcmp(v, "none") && strcmp(v, "add") && strcmp(v, "gemm")) {
				fprintf(stderr, "%s: --heavy is none, add or gemm, not '%s'\n",
				        prog, v);
				return 2;
			}
			o.heavy = v, done = 1;
		}
		if (!done)
			return usage();
		i++;
	}
	if (bench_report_open(prog, "fairness", o.json) != 0)
		return 1;
	int rc = run(&o);
	bench_report_table("measurement");
	bench_report_close();
	return rc;
}
