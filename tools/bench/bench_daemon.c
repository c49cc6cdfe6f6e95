/*
 * bench_daemon.c - the second runner of tileops-bench: the same workload
 * through a running tileopsd, as a client program sees it.
 *
 * Per workload it creates `sets` copies of the tensors in the daemon's
 * session (inputs written with the bench's random values, never zeros;
 * enough copies that the rotation does not run out of L2), submits the op
 * 5 times and syncs (warm-up), then submits it `runs` times back to back
 * with tileops_op_submit, rotating over the copies, and calls tileops_sync
 * once: the wall time over `runs` is the per-op figure. For ops the GPU
 * takes longer to run than the daemon takes to dispatch, that is the GPU
 * time; for decode sizes it is the dispatch rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "tileops.h"

#define MIB (1024.0 * 1024.0)

struct bench_daemon {
	tileops_client *c;
};

int bench_daemon_open(const char *address, struct bench_daemon **out, char *err, size_t len)
{
	struct bench_daemon *d = calloc(1, sizeof(*d));
	tileops_status st;

	*out = NULL;
	if (d == NULL) {
		snprintf(err, len, "out of host memory");
		return -1;
	}
	st = tileops_connect(address, &d->c);
	if (st != TILEOPS_OK) {
		snprintf(err, len, "cannot connect to tileopsd at %s: %s (%s)", address,
		         tileops_strerror(st), tileops_last_error());
		free(d);
		return -1;
	}
	*out = d;
	return 0;
}

void bench_daemon_close(struct bench_daemon *d)
{
	if (d == NULL)
		return;
	tileops_close(d->c);
	free(d);
}

/* The client's dtype of the same name as the kernels' one; 0 if none. */
static tileops_dtype dtype_of(tk_dtype dt)
{
	for (int v = TILEOPS_F32; v <= TILEOPS_FP8_E4M3; v++) {
		if (!strcmp(tileops_dtype_name((tileops_dtype)v), tk_dtype_name(dt)))
			return (tileops_dtype)v;
	}
	return (tileops_dtype)0;
}

static int fail(char *err, size_t len, const char *what, tileops_status st)
{
	snprintf(err, len, "%s: %s (%s)", what, tileops_strerror(st), tileops_last_error());
	return -1;
}

/* Fill an input: its integer values, or the random floats. */
static int fill(tileops_client *c, tileops_tensor t, const bw_tensor *bt,
                const struct bench_host *h, char *err, size_t len)
{
	size_t es = tk_dtype_size(bt->dt), bytes = bw_tensor_bytes(bt);
	const void *src = bt->values != NULL ? bt->values : h->values[bt->dt];
	size_t chunk = bt->values != NULL ? bytes : h->elems * es;
	tileops_status st;

	if (src == NULL) {
		snprintf(err, len, "no values to fill %s (%s) with", bt->name,
		         tk_dtype_name(bt->dt));
		return -1;
	}
	for (size_t off = 0; off < bytes; off += chunk) {
		size_t m = bytes - off < chunk ? bytes - off : chunk;
		st = tileops_tensor_write(c, t, off, src, m);
		if (st != TILEOPS_OK)
			return fail(err, len, "tileops_tensor_write", st);
	}
	return 0;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The tensors of one copy of the workload, inputs then outputs. */
struct set {
	tileops_tensor in[BW_MAX_IN], out[BW_MAX_OUT];
};

/* An absent optional input is left out with the handle 0, as a client does. */
static int make_set(tileops_client *c, const bw_workload *w, struct set *s,
                    const struct bench_host *h, char *err, size_t len)
{
	for (int k = 0; k < w->n_in + w->n_out; k++) {
		const bw_tensor *t = k < w->n_in ? &w->in[k] : &w->out[k - w->n_in];
		tileops_tensor *dst = k < w->n_in ? &s->in[k] : &s->out[k - w->n_in];
		tileops_dtype cdt = dtype_of(t->dt);
		tileops_status st;

		*dst = 0;
		if (t->absent)
			continue;
		if (cdt == 0) {
			snprintf(err, len, "dtype %s has no client dtype", tk_dtype_name(t->dt));
			return -1;
		}
		st = tileops_tensor_create(c, cdt, t->ndim, t->shape, dst);
		if (st != TILEOPS_OK)
			return fail(err, len, "tileops_tensor_create", st);
		if (k < w->n_in && fill(c, *dst, t, h, err, len) != 0)
			return -1;
	}
	return 0;
}

static void free_set(tileops_client *c, const bw_workload *w, const struct set *s)
{
	for (int k = 0; k < w->n_in; k++)
		if (s->in[k] != 0)
			tileops_tensor_free(c, s->in[k]);
	for (int k = 0; k < w->n_out; k++)
		if (s->out[k] != 0)
			tileops_tensor_free(c, s->out[k]);
}

/* Submit `n` ops rotating over the sets, then sync; every completion must succeed. */
static int submit_run(tileops_client *c, tileops_op *ops, int sets, int first, int n, char *err,
                      size_t len)
{
	tileops_completion **cp = calloc((size_t)n, sizeof(*cp));
	tileops_status st = TILEOPS_OK;
	int done = 0, rc = 0;

	if (cp == NULL) {
		snprintf(err, len, "out of host memory");
		return -1;
	}
	for (; done < n; done++) {
		st = tileops_op_submit(c, &ops[(first + done) % sets], &cp[done]);
		if (st != TILEOPS_OK) {
			rc = fail(err, len, "tileops_op_submit", st);
			break;
		}
	}
	if (rc == 0 && (st = tileops_sync(c)) != TILEOPS_OK)
		rc = fail(err, len, "tileops_sync", st);
	for (int i = 0; i < done; i++) {
		st = tileops_completion_wait(cp[i], -1);
		if (st != TILEOPS_OK && rc == 0)
			rc = fail(err, len, ops[0].name, st);
		tileops_completion_free(cp[i]);
	}
	free(cp);
	return rc;
}

int bench_daemon_time(struct bench_daemon *d, const bw_workload *w, int runs,
                      const struct bench_host *h, double *us, char *err, size_t len)
{
	double sb = bw_set_bytes(w);
	tileops_param params[TK_MAX_PARAMS];
	int sets, made = 0, rc = 0;

	/* 128 MiB rotated (twice the L2), at least 2 copies: the writes cost host time. */
	sets = (int)(128.0 * MIB / (sb > 1.0 ? sb : 1.0)) + 1;
	sets = sets < 2 ? 2 : (sets > 64 ? 64 : sets);
	for (int i = 0; i < w->n_params; i++) {
		params[i].name = w->param_names[i];
		params[i].kind = (tileops_param_kind)w->params[i].kind;
		if (w->params[i].kind == TK_PARAM_INT)
			params[i].v.i = w->params[i].v.i;
		else if (w->params[i].kind == TK_PARAM_BOOL)
			params[i].v.b = w->params[i].v.b;
		else
			params[i].v.f = w->params[i].v.f;
	}
	struct set *s = calloc((size_t)sets, sizeof(*s));
	tileops_op *ops = calloc((size_t)sets, sizeof(*ops));
	if (s == NULL || ops == NULL) {
		snprintf(err, len, "out of host memory");
		rc = -1;
	}
	for (; rc == 0 && made < sets; made++) {
		rc = make_set(d->c, w, &s[made], h, err, len);
		ops[made].name = w->op;
		ops[made].inputs = s[made].in;
		ops[made].n_inputs = (size_t)w->n_in;
		ops[made].outputs = s[made].out;
		ops[made].n_outputs = (size_t)w->n_out;
		ops[made].params = params;
		ops[made].n_params = (size_t)w->n_params;
	}
	if (rc == 0)
		rc = submit_run(d->c, ops, sets, 0, 5, err, len);
	if (rc == 0) {
		double t0 = now_us();
		rc = submit_run(d->c, ops, sets, 5, runs, err, len);
		*us = (now_us() - t0) / runs;
	}
	for (int i = 0; i < made && s != NULL; i++)
		free_set(d->c, w, &s[i]);
	free(s);
	free(ops);
	return rc;
}
