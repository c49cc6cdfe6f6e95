/*
 * bench_cases.c - tileops-bench's cases, from the manifest at run time.
 *
 * Each (op, workload, dtype) becomes a request as a client would send it:
 * the tensors the op layer makes of the workload (oplayer_workload_tensors:
 * its input shapes, the dtype each tensor's rule gives for the workload's
 * dtype, the output shapes the op's own formulas give) and every param
 * with a value. The op layer (oplayer_prepare) then checks it like any
 * request and builds the kernel call and the roofline counts, so the bench
 * runs exactly what the manifest declares and cannot drift from it.
 *
 * Integer inputs carry structure that random values would break (an index
 * past a cache, a page table naming missing pages). They are filled by
 * their name, from the shapes of the op's other tensors, with the load the
 * op's roofline counts (every sequence full, one slot a token, sequences of
 * equal length: tools/workload/workload_inputs.h). An integer input no rule
 * there knows leaves its case refused with a message, never filled with
 * garbage that could fault the device and end the run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "manifest.h"
#include "oplayer.h"
#include "workload_inputs.h"

#define MIB (1024.0 * 1024.0)
#define NO_RULE "holds integers with no rule for their values in tools/workload/workload_inputs.c"

static const struct {
	const char *family, *why;
} skipped[] = {
	{ "gemm", "tileops-bench-gemm, against cuBLASLt" },
	{ "attention", "tileops-bench-decode and tileops-bench-prefill" },
	{ "diagnostic", "not a computation" },
	{ "moe", "tileops-bench-moe (scripts/bench-moe.sh), which runs the family too" },
	{ "collective", "spans devices: a one-device run measures no collective" },
};

#define N_SKIPPED (sizeof(skipped) / sizeof(skipped[0]))

static int skipped_index(const char *family)
{
	for (size_t i = 0; i < N_SKIPPED; i++)
		if (!strcmp(family, skipped[i].family))
			return (int)i;
	return -1;
}

const char *bw_skipped_family(const char *family)
{
	int i = skipped_index(family);

	return i < 0 ? NULL : skipped[i].why;
}

size_t bw_tensor_bytes(const bw_tensor *t)
{
	int64_t n = 1;

	if (t->absent)
		return 0;
	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return (size_t)n * tk_dtype_size(t->dt);
}

double bw_set_bytes(const bw_workload *w)
{
	double b = 0.0;

	for (int i = 0; i < w->n_in; i++)
		b += (double)bw_tensor_bytes(&w->in[i]);
	for (int i = 0; i < w->n_out; i++)
		b += (double)bw_tensor_bytes(&w->out[i]);
	return b;
}

int bw_sets(const bw_workload *w)
{
	double sb = bw_set_bytes(w);
	double sets = 256.0 * MIB / (sb > 1.0 ? sb : 1.0);

	return sets <= 4.0 ? 4 : (sets >= 1024.0 ? 1024 : (int)ceil(sets));
}

/* ---- integer inputs ------------------------------------------------------------ */

/* The random state of the integer inputs: every run of the bench fills them alike. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static int refuse(bw_workload *w, const char *name, const char *why)
{
	snprintf(w->error, sizeof(w->error), "input '%s' %s", name, why);
	return -1;
}

/* Integer input i's host values, by the rule for its name, with the load the roofline counts. */
static int fill_integer(const workload_call *c, bw_workload *w, int i)
{
	bw_tensor *b = &w->in[i];
	size_t bytes = bw_tensor_bytes(b);
	int rc;

	c->t[i].data = malloc(bytes ? bytes : 1);
	if (c->t[i].data == NULL)
		return refuse(w, b->name, "does not fit in host memory");
	rc = workload_fill_input(c, i, WORKLOAD_FILL_ROOFLINE, &rng_state, b->fill, sizeof(b->fill),
	                         w->error, sizeof(w->error));
	if (rc <= 0) {
		free(c->t[i].data);
		c->t[i].data = NULL;
		return rc < 0 ? -1 : refuse(w, b->name, NO_RULE);
	}
	b->values = c->t[i].data;
	return 0;
}

/* ---- one case ------------------------------------------------------------------- */

static void make_case(const manifest *m, const manifest_op *op, const manifest_workload *mw,
                      tk_dtype dt, bw_workload *w)
{
	tk_tensor t[MANIFEST_MAX_TENSORS];
	tk_param params[TK_MAX_PARAMS];
	op_cost cost = { 0, 0 };
	uint32_t given = 0, left_out = 0;
	tileops_status st;

	w->op = op->name;
	w->family = op->family;
	w->label = mw->label;
	w->dt = dt;
	w->n_out = op->n_out;
	st = oplayer_workload_tensors(op, mw, dt, NULL, t, &given, params, w->error,
	                              sizeof(w->error));
	/* Inputs up to the last one the workload gives; optional ones before it left out. */
	for (int i = 0; i < op->n_in; i++)
		if (given >> i & 1u)
			w->n_in = i + 1;
	for (int i = 0; i < w->n_in; i++)
		if (!(given >> i & 1u))
			left_out |= 1u << i;
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		int is_in = i < op->n_in;
		bw_tensor *b = is_in ? &w->in[i] : &w->out[i - op->n_in];

		if (is_in && i >= w->n_in)
			continue;
		b->name = op->tensors[i].name;
		b->ndim = t[i].ndim;
		memcpy(b->shape, t[i].shape, sizeof(b->shape));
		b->dt = t[i].dtype;
		b->mutated = op->tensors[i].mutated;
		b->absent = is_in && (left_out >> i & 1u);
	}
	if (st != TILEOPS_OK)
		return;
	for (int k = 0; k < op->n_params; k++) {
		w->param_names[w->n_params] = op->params[k].name;
		w->params[w->n_params++] = params[k];
	}
	op_request req = {
		op->name,       w->n_in,   op->n_out, t, t + op->n_in, (size_t)w->n_params,
		w->param_names, w->params, left_out
	};
	if (oplayer_prepare(m, &req, 1, &w->call, &w->kernel, &cost, w->error, sizeof(w->error)) !=
	    TILEOPS_OK)
		return;
	w->error[0] = '\0';
	w->flops = cost.flops;
	w->bytes = cost.bytes;
	workload_call wc = { op, t, given, params };
	for (int i = 0; i < w->n_in; i++) {
		tk_dtype x = w->in[i].dt;

		if (!w->in[i].absent && x != TK_F32 && x != TK_F16 && x != TK_BF16 &&
		    x != TK_FP8_E4M3 && fill_integer(&wc, w, i) < 0)
			return;
	}
}

/* ---- the list -------------------------------------------------------------------- */

static int has_cuda_kernel(const manifest_op *op)
{
	for (int i = 0; i < op->n_kernels; i++)
		if (!strcmp(op->kernels[i].backend, "cuda"))
			return 1;
	return 0;
}

static int selected(const manifest_op *op, const bw_filter *f)
{
	if (f->family ? strcmp(op->family, f->family) != 0 : bw_skipped_family(op->family) != NULL)
		return 0;
	return f->op == NULL || strstr(op->name, f->op) != NULL;
}

/* The ops of file `fi` in the order they are written (m->ops is sorted by name). */
static int by_line(const void *a, const void *b)
{
	const manifest_op *x = *(const manifest_op *const *)a, *y = *(const manifest_op *const *)b;

	return x->line - y->line;
}

static int add_cases(bw_cases *c, const manifest_op *op, const bw_filter *f, int *cap)
{
	for (int wi = 0; wi < op->n_workloads; wi++) {
		const manifest_workload *mw = &op->workloads[wi];

		if (f->workload != NULL && strstr(mw->label, f->workload) == NULL)
			continue;
		for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
			if (!(mw->dtypes & (1u << dt)))
				continue;
			if (c->n == *cap) {
				int ncap = *cap ? 2 * *cap : 256;
				bw_workload *w = realloc(c->w, sizeof(*w) * (size_t)ncap);
				if (w == NULL)
					return -1;
				c->w = w;
				*cap = ncap;
			}
			memset(&c->w[c->n], 0, sizeof(c->w[c->n]));
			make_case(c->m, op, mw, (tk_dtype)dt, &c->w[c->n++]);
		}
	}
	return 0;
}

static void note(char *buf, size_t len, const manifest_op *op)
{
	size_t u = strlen(buf);

	if (u + 1 < len)
		snprintf(buf + u, len - u, "%s%s (%s)", u ? ", " : "", op->name,
		         op->status != MANIFEST_IMPLEMENTED ? "spec" : "cpu only");
}

int bw_cases_load(const char *path, const bw_filter *f, bw_cases *c, char *err, size_t len)
{
	static const bw_filter all = { NULL, NULL, NULL };
	const manifest_op **ops = NULL;
	unsigned seen = 0; /* bit k: the manifest has family skipped[k] */
	int cap = 0;

	memset(c, 0, sizeof(*c));
	if (f == NULL)
		f = &all;
	if (manifest_load(path, &c->m, err, len) < 0)
		return -1;
	ops = malloc(sizeof(*ops) * (size_t)(c->m->n_ops + 1));
	if (ops == NULL)
		goto oom;
	for (int fi = 0; fi < c->m->n_files; fi++) {
		int n = 0;

		for (int i = 0; i < c->m->n_ops; i++)
			if (!strcmp(c->m->ops[i].file, c->m->files[fi]))
				ops[n++] = &c->m->ops[i];
		qsort(ops, (size_t)n, sizeof(*ops), by_line);
		for (int i = 0; i < n; i++) {
			if (skipped_index(ops[i]->family) >= 0)
				seen |= 1u << skipped_index(ops[i]->family);
			if (!selected(ops[i], f))
				continue;
			if (ops[i]->status != MANIFEST_IMPLEMENTED || !has_cuda_kernel(ops[i])) {
				note(c->not_benched, sizeof(c->not_benched), ops[i]);
				continue;
			}
			if (add_cases(c, ops[i], f, &cap) < 0)
				goto oom;
		}
	}
	free(ops);
	for (size_t k = 0; f->family == NULL && k < N_SKIPPED; k++) {
		size_t u = strlen(c->skipped);

		if ((seen >> k & 1u) && u + 1 < sizeof(c->skipped))
			snprintf(c->skipped + u, sizeof(c->skipped) - u, "%s%s (%s)", u ? ", " : "",
			         skipped[k].family, skipped[k].why);
	}
	return 0;
oom:
	free(ops);
	bw_cases_free(c);
	snprintf(err, len, "out of host memory");
	return -1;
}

void bw_cases_free(bw_cases *c)
{
	for (int i = 0; i < c->n; i++)
		for (int k = 0; k < c->w[i].n_in; k++)
			free(c->w[i].in[k].values);
	free(c->w);
	manifest_free(c->m);
	memset(c, 0, sizeof(*c));
}
