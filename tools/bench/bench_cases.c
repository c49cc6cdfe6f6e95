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
 * their name, from the shapes of the op's other tensors, as the ops'
 * manifest docs and CPU references define them (kernels/rope/rope.c,
 * kernels/attention/): see fill_integer. An integer input of another name
 * leaves its case refused with a message, never filled with garbage that
 * could fault the device and end the run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "manifest.h"
#include "oplayer.h"

#define MIB (1024.0 * 1024.0)
/* Positions when no cos/sin cache bounds them: Llama 3.1's context length. */
#define MAX_POSITIONS 131072
#define NO_RULE \
	"holds integers with no rule for their values in tools/bench/bench_cases.c (fill_integer)"

static const struct {
	const char *family, *why;
} skipped[] = {
	{ "gemm", "tileops-bench-gemm, against cuBLASLt" },
	{ "attention", "tileops-bench-decode and tileops-bench-prefill" },
	{ "diagnostic", "not a computation" },
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

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* The case's input called `name`, or NULL when the op has none or it is absent. */
static const bw_tensor *input_named(const manifest_op *op, const bw_workload *w, const char *name)
{
	for (int i = 0; i < op->n_in && i < w->n_in; i++)
		if (!strcmp(op->tensors[i].name, name))
			return w->in[i].absent ? NULL : &w->in[i];
	return NULL;
}

static int64_t numel(const bw_tensor *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

static int refuse(bw_workload *w, const char *name, const char *why)
{
	snprintf(w->error, sizeof(w->error), "input '%s' %s", name, why);
	return -1;
}

/*
 * The values of integer input i, by its name:
 *   positions     rope: uniformly below the rows of cos_sin_cache, or below
 *                 MAX_POSITIONS when the angles are computed;
 *   seq_lens      attention decode: every sequence full, the capacity of
 *                 the cache (k_cache.shape[1], times block_tables.shape[1]
 *                 when paged), as the roofline bytes assume;
 *   block_tables  paged decode: a random permutation of the cache's pages
 *                 (k_cache.shape[0]), row after row, wrapping round when
 *                 the table has more entries than there are pages;
 *   slot_mapping  kv_cache_append: distinct slots, token t at the end of
 *                 the t-th of T equal parts of the cache, as a batch of T
 *                 sequences each appending its next token;
 *   cu_seqlens_X  varlen attention: B equal sequences packed along X's
 *                 first dimension (offsets 0, N/B, ..., N).
 */
static int fill_integer(const manifest_op *op, bw_workload *w, int i)
{
	bw_tensor *t = &w->in[i];
	const char *name = op->tensors[i].name;
	const bw_tensor *kc = input_named(op, w, "k_cache");
	int64_t n = numel(t);
	int64_t *v;

	if (t->dt != TK_I32 && t->dt != TK_I64)
		return refuse(w, name, NO_RULE);
	v = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
	if (v == NULL)
		return refuse(w, name, "does not fit in host memory");
	if (!strcmp(name, "positions")) {
		const bw_tensor *cache = input_named(op, w, "cos_sin_cache");
		int64_t limit = cache ? cache->shape[0] : MAX_POSITIONS;

		for (int64_t k = 0; k < n; k++)
			v[k] = (int64_t)(rng_next() % (uint64_t)(limit > 0 ? limit : 1));
		snprintf(t->fill, sizeof(t->fill), "random below %lld", (long long)limit);
	} else if (!strcmp(name, "seq_lens") && kc) {
		const bw_tensor *bt = input_named(op, w, "block_tables");
		int64_t cap = kc->shape[1] * (bt ? bt->shape[1] : 1);

		for (int64_t k = 0; k < n; k++)
			v[k] = cap;
		snprintf(t->fill, sizeof(t->fill), "every sequence full: %lld", (long long)cap);
	} else if (!strcmp(name, "block_tables") && kc && kc->shape[0] > 0) {
		int64_t pages = kc->shape[0];
		int64_t *perm = malloc(sizeof(int64_t) * (size_t)pages);

		if (perm == NULL) {
			free(v);
			return refuse(w, name, "does not fit in host memory");
		}
		for (int64_t k = 0; k < pages; k++)
			perm[k] = k;
		for (int64_t k = pages - 1; k > 0; k--) {
			int64_t j = (int64_t)(rng_next() % (uint64_t)(k + 1)), x = perm[k];
			perm[k] = perm[j];
			perm[j] = x;
		}
		for (int64_t k = 0; k < n; k++)
			v[k] = perm[k % pages];
		free(perm);
		snprintf(t->fill, sizeof(t->fill), "a random permutation of %lld pages",
		         (long long)pages);
	} else if (!strcmp(name, "slot_mapping") && kc) {
		int64_t cap = kc->shape[0] * kc->shape[1];
		int64_t stride = n > 0 && cap >= n ? cap / n : 1;

		for (int64_t k = 0; k < n; k++)
			v[k] = ((k + 1) * stride - 1) % (cap > 0 ? cap : 1);
		snprintf(t->fill, sizeof(t->fill), "slots %lld apart in a cache of %lld",
		         (long long)stride, (long long)cap);
	} else if (!strncmp(name, "cu_seqlens_", 11) && input_named(op, w, name + 11) && n >= 1) {
		int64_t tokens = input_named(op, w, name + 11)->shape[0], b = n - 1;

		for (int64_t k = 0; k < n; k++)
			v[k] = b > 0 ? k * tokens / b : 0;
		snprintf(t->fill, sizeof(t->fill), "%lld sequences of %lld %s tokens", (long long)b,
		         (long long)(b > 0 ? tokens / b : 0), name + 11);
	} else {
		free(v);
		return refuse(w, name, NO_RULE);
	}
	if (t->dt == TK_I32) {
		int32_t *v32 = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));

		for (int64_t k = 0; v32 != NULL && k < n; k++)
			v32[k] = (int32_t)v[k];
		free(v);
		if (v32 == NULL)
			return refuse(w, name, "does not fit in host memory");
		t->values = v32;
		return 0;
	}
	t->values = v;
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
	for (int i = 0; i < w->n_in; i++) {
		tk_dtype x = w->in[i].dt;

		if (!w->in[i].absent && x != TK_F32 && x != TK_F16 && x != TK_BF16 &&
		    x != TK_FP8_E4M3 && fill_integer(op, w, i) < 0)
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
