/*
 * parity_case.c - cases (from workloads and from the families' special
 * cases), their tensors as the op layer makes them, its checks and
 * call, host buffers poisoned and filled, and the comparison of what an op
 * wrote. Nothing here needs a GPU: the smoke self-check links it too.
 */
#include "parity/parity.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/tk_test_util.h"
#include "workload_inputs.h"

#ifndef PARITY_MANIFEST_DIR
#define PARITY_MANIFEST_DIR "manifest"
#endif

/* ---- the manifest ------------------------------------------------------------------- */

const manifest *parity_manifest(void)
{
	static manifest *m;
	char err[1024];

	if (m)
		return m;
	const char *dir = getenv("TILEOPS_MANIFEST");
	if (!dir || !*dir)
		dir = PARITY_MANIFEST_DIR;
	cr_assert_eq(manifest_load(dir, &m, err, sizeof(err)), 0, "the manifest %s: %s", dir, err);
	/* The diagnostic ops have kernels to compare too, as diagnostic_ops = on serves them. */
	m->serve_diagnostic = 1;
	return m;
}

int parity_tensor_index(const parity_case *c, const char *name)
{
	for (int i = 0; i < c->op->n_in + c->op->n_out; i++)
		if (!strcmp(c->op->tensors[i].name, name))
			return i;
	return -1;
}

static int param_index(const manifest_op *op, const char *name)
{
	for (int k = 0; k < op->n_params; k++)
		if (!strcmp(op->params[k].name, name))
			return k;
	return -1;
}

/* ---- special cases ------------------------------------------------------------------- */

void parity_special(parity_case *c, const char *op, tk_dtype dt, const char *what)
{
	memset(c, 0, sizeof(*c));
	c->op = manifest_find(parity_manifest(), op);
	cr_assert_not_null(c->op, "%s is not in the manifest", op);
	c->workload = -1;
	c->dt = dt;
	snprintf(c->label, sizeof(c->label), "%s", what);
}

void parity_shape(parity_case *c, const char *name, int ndim, const int64_t *dims)
{
	int i = parity_tensor_index(c, name), s = 0;

	cr_assert(i >= 0 && i < c->op->n_in, "%s has no input %s", c->op->name, name);
	cr_assert(ndim >= 0 && ndim <= TK_MAX_DIMS);
	while (s < c->w.n_shapes && c->w.tensor[s] != i)
		s++;
	if (s == c->w.n_shapes) {
		cr_assert_lt(s, PARITY_MAX_T);
		c->w.n_shapes++;
	}
	c->w.tensor[s] = i;
	c->w.ndim[s] = ndim;
	memset(c->w.shape[s], 0, sizeof(c->w.shape[s]));
	memcpy(c->w.shape[s], dims, sizeof(int64_t) * (size_t)ndim);
}

static void set_param(parity_case *c, const char *name, tk_param v)
{
	int k = param_index(c->op, name), s = 0;

	cr_assert(k >= 0, "%s has no param %s", c->op->name, name);
	/* As the loader stores workload params: typed as declared. */
	if (c->op->params[k].type == TK_PARAM_FLOAT && v.kind == TK_PARAM_INT)
		v = (tk_param){ .kind = TK_PARAM_FLOAT, .v.f = (double)v.v.i };
	else if (c->op->params[k].type == TK_PARAM_BOOL && v.kind == TK_PARAM_INT)
		v = (tk_param){ .kind = TK_PARAM_BOOL, .v.b = v.v.i != 0 };
	while (s < c->w.n_params && c->w.param[s] != k)
		s++;
	if (s == c->w.n_params)
		c->w.n_params++;
	c->w.param[s] = k;
	c->w.value[s] = v;
}

void parity_param_int(parity_case *c, const char *name, int64_t v)
{
	set_param(c, name, (tk_param){ .kind = TK_PARAM_INT, .v.i = v });
}

void parity_param_float(parity_case *c, const char *name, double v)
{
	set_param(c, name, (tk_param){ .kind = TK_PARAM_FLOAT, .v.f = v });
}

void parity_param_bool(parity_case *c, const char *name, int v)
{
	set_param(c, name, (tk_param){ .kind = TK_PARAM_BOOL, .v.b = v != 0 });
}

void parity_range(parity_case *c, const char *name, double lo, double hi)
{
	int i = name ? parity_tensor_index(c, name) : -1;

	cr_assert(!name || i >= 0, "%s has no tensor %s", c->op->name, name);
	cr_assert_lt(c->n_range, PARITY_MAX_RANGES);
	c->range[c->n_range].tensor = i;
	c->range[c->n_range].lo = lo;
	c->range[c->n_range++].hi = hi;
}

void parity_dtype(parity_case *c, const char *name, tk_dtype dt)
{
	int i = parity_tensor_index(c, name);

	cr_assert(i >= 0, "%s has no tensor %s", c->op->name, name);
	c->dtype[i] = dt;
}

void parity_retype(parity_case *c, const char *name, tk_dtype dt)
{
	int i = parity_tensor_index(c, name);

	cr_assert(i >= 0, "%s has no tensor %s", c->op->name, name);
	c->retype[i] = dt;
}

void parity_row_cases(const char *op, int variants, parity_row_fn one)
{
	static const int64_t widths[] = { 1, 3, 17, 1000, 4097, 8192 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (int v = 0; v < variants; v++) {
			for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
				one(op, dt, 7, widths[w], 0, v);
				one(op, dt, 5, widths[w], 3, v);
			}
			one(op, dt, 1, 4096, 0, v);
			one(op, dt, 1, 4095, 0, v);
			one(op, dt, 3000, 64, 0, v);
			one(op, dt, 40, 7168, 8, v);
			one(op, dt, 1100, 4096, 0, v);
			one(op, dt, 3, 16384, 0, v);
			one(op, dt, 2, 20000, 0, v);
			one(op, dt, 2, 262144, 0, v);
		}
	}
}

/* ---- workloads ----------------------------------------------------------------------- */

static void shape_str(const int64_t *s, int n, char *buf, size_t len)
{
	size_t u = (size_t)snprintf(buf, len, "[");

	for (int i = 0; i < n && u < len; i++)
		u += (size_t)snprintf(buf + u, len - u, "%s%lld", i ? ", " : "", (long long)s[i]);
	if (u < len)
		snprintf(buf + u, len - u, "]");
}

/* "x [4096, 14336] -> [64, 14336]" for every input the scaling changed. */
static void describe_scaling(parity_case *c, const char *how)
{
	size_t u = 0;
	int changed = 0;

	c->scaling[0] = 0;
	for (int s = 0; s < c->w.n_shapes && u < sizeof(c->scaling); s++) {
		char a[96], b[96];

		shape_str(c->w0.shape[s], c->w0.ndim[s], a, sizeof(a));
		shape_str(c->w.shape[s], c->w.ndim[s], b, sizeof(b));
		if (!strcmp(a, b)) {
			u += (size_t)snprintf(c->scaling + u, sizeof(c->scaling) - u, "%s%s %s",
			                      s ? ", " : "", c->op->tensors[c->w.tensor[s]].name,
			                      a);
			continue;
		}
		changed = 1;
		u += (size_t)snprintf(c->scaling + u, sizeof(c->scaling) - u, "%s%s %s -> %s",
		                      s ? ", " : "", c->op->tensors[c->w.tensor[s]].name, a, b);
	}
	for (int k = 0; k < c->w.n_params && u < sizeof(c->scaling); k++) {
		if (c->w.value[k].kind == c->w0.value[k].kind &&
		    !memcmp(&c->w.value[k].v, &c->w0.value[k].v, sizeof(c->w.value[k].v)))
			continue;
		changed = 1;
		u += (size_t)snprintf(
		        c->scaling + u, sizeof(c->scaling) - u, ", %s %g -> %g",
		        c->op->params[c->w.param[k]].name,
		        c->w0.value[k].kind == TK_PARAM_FLOAT ? c->w0.value[k].v.f
		                                              : (double)c->w0.value[k].v.i,
		        c->w.value[k].kind == TK_PARAM_FLOAT ? c->w.value[k].v.f
		                                             : (double)c->w.value[k].v.i);
	}
	if (u < sizeof(c->scaling))
		snprintf(c->scaling + u, sizeof(c->scaling) - u, " (%.300s)",
		         changed ? how : "as in the manifest");
}

int parity_from_workload(parity_case *c, const manifest_op *op, int wi, tk_dtype dt, char *err,
                         size_t errlen)
{
	const parity_rule *rule = parity_rule_of(op->name);
	const char *how = "non-last dims halved, equal sizes together, to 2^20 elements a "
	                  "tensor and 2^27 flops";
	int rc;

	memset(c, 0, sizeof(*c));
	c->op = op;
	c->workload = wi;
	c->dt = dt;
	c->w = op->workloads[wi];
	c->w0 = c->w;
	snprintf(c->label, sizeof(c->label), "%s", op->workloads[wi].label);
	if (rule->scale) {
		rc = rule->scale(c, err, errlen);
		how = c->scaling[0] ? c->scaling : "the op's scale rule";
	} else {
		rc = parity_scale_generic(c, PARITY_MAX_ELEMS, PARITY_MAX_FLOPS, err, errlen);
	}
	if (rc < 0)
		return -1;
	char keep[sizeof(c->scaling)];
	snprintf(keep, sizeof(keep), "%s", how);
	describe_scaling(c, keep);
	return 0;
}

/* ---- shapes and dtypes of a case --------------------------------------------------- */

/*
 * The tensors of c's request (oplayer_workload_tensors, with the case's
 * own dtypes) into t, by manifest index, and params by manifest index
 * (NULL: not wanted); given[i]: tensor i is part of the request (the
 * inputs the case gives, every output).
 */
static tileops_status case_tensors(const parity_case *c, tk_tensor *t, int *given, tk_param *params,
                                   char *err, size_t errlen)
{
	const manifest_op *op = c->op;
	uint32_t in = 0;
	tileops_status st;

	memset(t, 0, sizeof(tk_tensor) * PARITY_MAX_T);
	st = oplayer_workload_tensors(op, &c->w, c->dt, c->dtype, t, &in, params, err, errlen);
	for (int i = 0; i < PARITY_MAX_T; i++)
		given[i] = i < op->n_in ? (int)(in >> i & 1u) : i < op->n_in + op->n_out;
	return st;
}

double parity_flops(const parity_case *c, char *err, size_t errlen)
{
	op_cost cost;

	if (oplayer_check_workload(c->op, &c->w, c->dt, &cost, err, errlen) != TILEOPS_OK)
		return -1.0;
	return cost.flops;
}

int parity_elems(const parity_case *c, int64_t *elems, char *err, size_t errlen)
{
	tk_tensor t[PARITY_MAX_T];
	int given[PARITY_MAX_T];

	if (case_tensors(c, t, given, NULL, err, errlen) != TILEOPS_OK)
		return -1;
	for (int i = 0; i < PARITY_MAX_T; i++)
		elems[i] = i < c->op->n_in + c->op->n_out && given[i] ? tk_numel(&t[i]) : 0;
	return 0;
}

int64_t parity_max_elems(const parity_case *c, char *err, size_t errlen)
{
	int64_t e[PARITY_MAX_T], most = 0;

	if (parity_elems(c, e, err, errlen) < 0)
		return -1;
	for (int i = 0; i < PARITY_MAX_T; i++)
		most = e[i] > most ? e[i] : most;
	return most;
}

/* ---- preparing a run ---------------------------------------------------------------- */

uint64_t parity_seed(void)
{
	static uint64_t counter;
	const char *env = getenv("TILEOPS_TEST_SEED");
	struct timespec ts;

	if (env && *env)
		return strtoull(env, NULL, 0) | 1;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) + ++counter * 0x9e37ULL) | 1;
}

/* Inputs drawn at random from a range: the float dtypes, and fp8 codes (gemm_fp8's a and b). */
static int is_float(tk_dtype dt)
{
	return dt == TK_F32 || dt == TK_F16 || dt == TK_BF16 || dt == TK_FP8_E4M3;
}

void parity_input_range(const parity_case *c, int input, double *lo, double *hi)
{
	const parity_rule *rule = parity_rule_of(c->op->name);

	*lo = -3.0;
	*hi = 3.0;
	if (rule->lo != rule->hi) {
		*lo = rule->lo;
		*hi = rule->hi;
	}
	if (rule->range)
		rule->range(input, lo, hi);
	for (int k = 0; k < c->n_range; k++) {
		if (c->range[k].tensor == -1 || c->range[k].tensor == input) {
			*lo = c->range[k].lo;
			*hi = c->range[k].hi;
		}
	}
}

/*
 * Strides over rows padded by the case's pad (tensors of rank 2 and more
 * whose rows hold more than one element; a pad that is not a multiple of
 * 8 differs per tensor, so their strides differ), and a buffer that holds
 * the span, the misaligned view's offset and at least one element.
 */
static int lay_out(parity_run *r, int i, char *err, size_t errlen)
{
	const parity_case *c = r->c;
	tk_tensor *t = &r->t[i];
	size_t es = tk_dtype_size(t->dtype);
	int64_t pad = 0, s = 1;

	if (!es) {
		snprintf(err, errlen, "%s: tensor %s has no dtype", c->op->name,
		         c->op->tensors[i].name);
		return -1;
	}
	if (c->pad > 0 && t->ndim >= 2 && t->shape[t->ndim - 1] > 1)
		pad = c->pad % 8 == 0 ? c->pad : c->pad + i;
	for (int d = t->ndim - 1; d >= 0; d--) {
		t->stride[d] = s;
		s *= t->shape[d] + (d == t->ndim - 1 ? pad : 0);
	}
	r->offset[i] = i < c->op->n_in && (c->misalign >> i & 1u) ? es : 0;
	r->alloc[i] = tt_span_bytes(t) + r->offset[i] + es + 16;
	r->base[i] = malloc(r->alloc[i]);
	if (!r->base[i]) {
		snprintf(err, errlen, "%s: %zu bytes for %s", c->op->name, r->alloc[i],
		         c->op->tensors[i].name);
		return -1;
	}
	memset(r->base[i], 0xff, r->alloc[i]);
	t->data = (unsigned char *)r->base[i] + r->offset[i];
	return 0;
}

/* 1 when every element of t holds the poison bytes still. */
static int all_poison(const tk_tensor *t)
{
	size_t es = tk_dtype_size(t->dtype);
	int64_t n = tk_numel(t);

	for (int64_t e = 0; e < n; e++) {
		const unsigned char *p =
		        (const unsigned char *)t->data + tt_offset(t, e) * (int64_t)es;
		for (size_t b = 0; b < es; b++)
			if (p[b] != 0xff)
				return 0;
	}
	return n > 0;
}

/*
 * Float inputs at random within their range, then the inputs with
 * structure by the workload rules (in the order of the op's inputs, a
 * given scale after the x it is made from), varied, then what the case
 * plants.
 */
static tileops_status fill_inputs(parity_run *r, uint64_t *rng, char *err, size_t errlen)
{
	const parity_case *c = r->c;
	workload_call wc = { c->op, r->t, 0, r->params };

	for (int i = 0; i < c->op->n_in; i++) {
		double lo, hi;

		wc.given |= (uint32_t)(r->given[i] != 0) << i;
		if (!r->given[i] || !is_float(r->t[i].dtype))
			continue;
		parity_input_range(c, i, &lo, &hi);
		tt_fill(&r->t[i], rng, lo, hi);
	}
	for (int i = 0; i < c->op->n_in; i++)
		if (r->given[i] && workload_fill_input(&wc, i, WORKLOAD_FILL_VARIED, rng, NULL, 0,
		                                       err, errlen) < 0)
			return TILEOPS_ERR_INVALID_ARGUMENT;
	if (c->plant)
		c->plant(r, rng);
	for (int i = 0; i < c->op->n_in; i++) {
		if (r->given[i] && all_poison(&r->t[i])) {
			snprintf(err, errlen,
			         "%s: no rule writes input %s (%s): give it one in "
			         "tools/workload/workload_inputs.c",
			         c->op->name, c->op->tensors[i].name, tk_dtype_name(r->t[i].dtype));
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
	}
	return TILEOPS_OK;
}

tileops_status parity_prepare(parity_run *r, const parity_case *c, int cuda, uint64_t seed,
                              char *err, size_t errlen)
{
	const manifest_op *op = c->op;
	tk_tensor in[TK_MAX_INPUTS], out[TK_MAX_OUTPUTS];
	const char *names[TK_MAX_PARAMS];
	op_request req = { 0 };
	op_cost cost;
	tileops_status st;
	uint64_t rng = seed;

	memset(r, 0, sizeof(*r));
	r->c = c;
	r->seed = seed;
	if ((st = case_tensors(c, r->t, r->given, r->params, err, errlen)) != TILEOPS_OK)
		return st;
	for (int i = 0; i < op->n_in + op->n_out; i++)
		if (r->given[i] && lay_out(r, i, err, errlen) < 0)
			return TILEOPS_ERR_OUT_OF_MEMORY;

	/* The request: inputs up to the last one given (the others left out). */
	req.op = op->name;
	for (int i = 0; i < op->n_in; i++) {
		in[i] = r->t[i];
		if (r->given[i])
			req.n_in = i + 1;
	}
	for (int i = 0; i < req.n_in; i++)
		if (!r->given[i])
			req.left_out |= 1u << i;
	for (int j = 0; j < op->n_out; j++)
		out[j] = r->t[op->n_in + j];
	req.n_out = op->n_out;
	req.in = in;
	req.out = out;
	for (int k = 0; k < c->w.n_params; k++)
		names[k] = op->params[c->w.param[k]].name;
	req.n_params = (size_t)c->w.n_params;
	req.param_names = names;
	req.param_values = c->w.value;
	st = oplayer_prepare(parity_manifest(), &req, cuda, &r->call, &r->entry, &cost, err,
	                     errlen);
	if (st != TILEOPS_OK)
		return st;

	for (int i = 0; i < op->n_in + op->n_out; i++) {
		tk_tensor *ct;

		if (c->retype[i] == TK_DTYPE_INVALID || !r->given[i])
			continue;
		if (tk_dtype_size(c->retype[i]) != tk_dtype_size(r->t[i].dtype)) {
			snprintf(err, errlen, "%s: %s cannot be retyped to %s (another size)",
			         op->name, op->tensors[i].name, tk_dtype_name(c->retype[i]));
			return TILEOPS_ERR_DTYPE;
		}
		r->t[i].dtype = c->retype[i];
		ct = i < op->n_in ? &r->call.in[i] : &r->call.out[i - op->n_in];
		ct->dtype = c->retype[i];
	}
	if ((st = fill_inputs(r, &rng, err, errlen)) != TILEOPS_OK)
		return st;
	/* The kernels read the buffers the call names: the filled ones. */
	for (int i = 0; i < req.n_in; i++)
		r->call.in[i].data = r->given[i] ? r->t[i].data : NULL;

	for (int j = 0; j < op->n_out; j++)
		r->written[r->n_written++] = op->n_in + j;
	for (int i = 0; i < op->n_in; i++)
		if (r->given[i] && op->tensors[i].mutated)
			r->written[r->n_written++] = i;
	for (int k = 0; k < r->n_written; k++) {
		const tk_tensor *t = &r->t[r->written[k]];
		size_t b = tt_span_bytes(t);

		r->before[k] = malloc(b ? b : 1);
		if (!r->before[k]) {
			snprintf(err, errlen, "%s: out of memory", op->name);
			return TILEOPS_ERR_OUT_OF_MEMORY;
		}
		memcpy(r->before[k], t->data, b);
	}
	return TILEOPS_OK;
}

void parity_free(parity_run *r)
{
	for (int i = 0; i < PARITY_MAX_T; i++)
		free(r->base[i]);
	for (int k = 0; k < r->n_written; k++)
		free(r->before[k]);
	memset(r, 0, sizeof(*r));
}

tk_tensor *parity_tensor(parity_run *r, const char *name)
{
	int i = parity_tensor_index(r->c, name);

	return i >= 0 && r->given[i] ? &r->t[i] : NULL;
}

/* ---- comparing ---------------------------------------------------------------------- */

/* "[3, 17]": the coordinates of logical element e of t. */
static void coords(const tk_tensor *t, int64_t e, char *buf, size_t len)
{
	int64_t c[TK_MAX_DIMS];

	for (int d = t->ndim - 1; d >= 0; d--) {
		c[d] = t->shape[d] ? e % t->shape[d] : 0;
		e = t->shape[d] ? e / t->shape[d] : 0;
	}
	shape_str(c, t->ndim, buf, len);
}

/* The value at element offset o (in elements) of a buffer of dtype dt. */
static double load(tk_dtype dt, const unsigned char *data, int64_t o)
{
	switch (dt) {
	case TK_F32:
		return ((const float *)data)[o];
	case TK_F16:
		return tk_f16_to_f32(((const uint16_t *)data)[o]);
	case TK_BF16:
		return tk_bf16_to_f32(((const uint16_t *)data)[o]);
	case TK_I32:
		return ((const int32_t *)data)[o];
	case TK_I64:
		return (double)((const int64_t *)data)[o];
	case TK_FP8_E4M3:
		return tk_fp8e4m3_to_f32(data[o]);
	default:
		return data[o];
	}
}

static double value_at(const tk_tensor *t, const unsigned char *data, int64_t e)
{
	return load(t->dtype, data, tt_offset(t, e));
}

static int same_bytes(const tk_tensor *t, const unsigned char *a, const unsigned char *b, int64_t e)
{
	size_t es = tk_dtype_size(t->dtype);
	int64_t o = tt_offset(t, e);

	if (!memcmp(a + o * (int64_t)es, b + o * (int64_t)es, es))
		return 1;
	/* Two NaNs are the same value whatever their payloads. */
	return is_float(t->dtype) && isnan(load(t->dtype, a, o)) && isnan(load(t->dtype, b, o));
}

int parity_compare(const parity_run *r, int k, const unsigned char *got, char *msg, size_t msglen)
{
	int i = r->written[k];
	const tk_tensor *t = &r->t[i];
	const unsigned char *want = t->data;
	parity_tol tol = parity_tolerance(r, i);
	const char *name = r->c->op->tensors[i].name;
	int64_t n = tk_numel(t), bad = 0, first = -1, worst = -1;
	double num = 0.0, den = 0.0, maxerr = 0.0;
	char at[96], at2[96];

	if (tol.exact || !is_float(t->dtype)) {
		for (int64_t e = 0; e < n; e++) {
			if (same_bytes(t, got, want, e))
				continue;
			if (bad++ == 0)
				first = e;
		}
		if (!bad) {
			snprintf(msg, msglen, "%s %s: all %lld elements exact", name,
			         tk_dtype_name(t->dtype), (long long)n);
			return 1;
		}
		coords(t, first, at, sizeof(at));
		snprintf(msg, msglen,
		         "%s %s: %lld of %lld elements differ (must be exact), the first at %s "
		         "(got %.9g, want %.9g)",
		         name, tk_dtype_name(t->dtype), (long long)bad, (long long)n, at,
		         value_at(t, got, first), value_at(t, want, first));
		return 0;
	}
	for (int64_t e = 0; e < n; e++) {
		int64_t o = tt_offset(t, e);
		double g = load(t->dtype, got, o), w = load(t->dtype, want, o);

		if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) {
			/* NaN where the reference has NaN, the same infinity where it has one. */
			if ((isnan(w) && isnan(g)) || (!isnan(w) && g == w))
				continue;
			if (bad++ == 0)
				first = e;
			continue;
		}
		num += (g - w) * (g - w);
		den += w * w;
		if (fabs(g - w) > maxerr || worst < 0) {
			maxerr = fabs(g - w);
			worst = e;
		}
	}
	double rel = den > 0.0 ? sqrt(num / den) : sqrt(num);
	int ok = bad == 0 && (tol.abs > 0.0 ? maxerr <= tol.abs : rel <= tol.rel);
	size_t u;

	if (worst >= 0) {
		coords(t, worst, at, sizeof(at));
		u = (size_t)snprintf(msg, msglen,
		                     "%s %s: rel %.3g, max |err| %.3g at %s (got %.7g, want %.7g); "
		                     "tolerance %s %.3g",
		                     name, tk_dtype_name(t->dtype), rel, maxerr, at,
		                     value_at(t, got, worst), value_at(t, want, worst),
		                     tol.abs > 0.0 ? "max |err|" : "rel",
		                     tol.abs > 0.0 ? tol.abs : tol.rel);
	} else {
		u = (size_t)snprintf(msg, msglen, "%s %s: no finite elements (%lld)", name,
		                     tk_dtype_name(t->dtype), (long long)n);
	}
	if (bad && u < msglen) {
		coords(t, first, at2, sizeof(at2));
		snprintf(msg + u, msglen - u,
		         "; %lld elements NaN or infinite where the reference is not, or the "
		         "other way round, the first at %s (got %.7g, want %.7g)",
		         (long long)bad, at2, value_at(t, got, first), value_at(t, want, first));
	}
	return ok;
}

int parity_padding_kept(const parity_run *r, int k, const unsigned char *got)
{
	const tk_tensor *t = &r->t[r->written[k]];
	size_t bytes = tt_span_bytes(t), es = tk_dtype_size(t->dtype);
	unsigned char *want = malloc(bytes ? bytes : 1);
	int64_t n = tk_numel(t);
	int ok;

	memcpy(want, r->before[k], bytes);
	for (int64_t e = 0; e < n; e++) {
		size_t o = (size_t)tt_offset(t, e) * es;
		memcpy(want + o, got + o, es);
	}
	ok = memcmp(want, got, bytes) == 0;
	free(want);
	return ok;
}

void parity_name(const parity_case *c, char *buf, size_t len)
{
	size_t u = (size_t)snprintf(buf, len, "%s '%s' %s", c->op->name, c->label,
	                            tk_dtype_name(c->dt));

	if (c->workload >= 0)
		return;
	for (int s = 0; s < c->w.n_shapes && u < len; s++) {
		char sh[96];

		shape_str(c->w.shape[s], c->w.ndim[s], sh, sizeof(sh));
		u += (size_t)snprintf(buf + u, len - u, "%s%s %s", s ? ", " : ": ",
		                      c->op->tensors[c->w.tensor[s]].name, sh);
	}
	if (c->pad && u < len)
		snprintf(buf + u, len - u, ", rows padded by %lld", (long long)c->pad);
}

void parity_log(const char *line)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path && *path ? fopen(path, "a") : NULL;

	if (!f)
		return;
	fprintf(f, "%s\n", line);
	fclose(f);
}

/* ---- the workloads as parameters ------------------------------------------------------ */

static void free_params(struct criterion_test_params *p)
{
	cr_free(p->params);
}

struct criterion_test_params parity_params(const char *family)
{
	manifest *m = NULL;
	char err[1024];
	const char *dir = getenv("TILEOPS_MANIFEST");
	size_t n = 0, cap = 0;
	parity_param *ps;

	if (!dir || !*dir)
		dir = PARITY_MANIFEST_DIR;
	if (manifest_load(dir, &m, err, sizeof(err)) == 0) {
		for (int o = 0; o < m->n_ops; o++) {
			const manifest_op *op = &m->ops[o];

			if (op->status != MANIFEST_IMPLEMENTED || op->collective ||
			    (family && strcmp(op->family, family)))
				continue;
			for (int w = 0; w < op->n_workloads; w++)
				for (int d = 1; d < TK_DTYPE_COUNT; d++)
					cap += op->workloads[w].dtypes >> d & 1u;
		}
	}
	/* With nothing to run (no manifest, no such family), one case that says so. */
	ps = cr_calloc(cap ? cap : 1, sizeof(*ps));
	if (!m) {
		snprintf(ps[0].error, sizeof(ps[0].error), "the manifest %.60s: %.180s", dir, err);
		return cr_make_param_array(parity_param, ps, 1, free_params);
	}
	for (int o = 0; o < m->n_ops; o++) {
		const manifest_op *op = &m->ops[o];

		if (op->status != MANIFEST_IMPLEMENTED || op->collective ||
		    (family && strcmp(op->family, family)))
			continue;
		for (int w = 0; w < op->n_workloads; w++) {
			for (int d = 1; d < TK_DTYPE_COUNT; d++) {
				if (!(op->workloads[w].dtypes >> d & 1u))
					continue;
				snprintf(ps[n].op, sizeof(ps[n].op), "%s", op->name);
				ps[n].workload = w;
				ps[n++].dtype = d;
			}
		}
	}
	if (!n) {
		snprintf(ps[0].error, sizeof(ps[0].error),
		         "family %s has no implemented op with a workload in %s",
		         family ? family : "(any)", dir);
		n = 1;
	}
	manifest_free(m);
	return cr_make_param_array(parity_param, ps, n, free_params);
}

void parity_param_run(const parity_param *p, int (*check)(parity_case *c))
{
	const manifest_op *op;
	parity_case c;
	char err[1024], name[256];

	cr_assert(!p->error[0], "%s", p->error);
	op = manifest_find(parity_manifest(), p->op);
	cr_assert_not_null(op, "%s left the manifest", p->op);
	cr_assert_lt(p->workload, op->n_workloads);
	if (parity_rule_of(op->name)->skip)
		cr_skip_test("%s: not compared: %s", op->name, parity_rule_of(op->name)->skip);
	cr_assert_eq(
	        parity_from_workload(&c, op, p->workload, (tk_dtype)p->dtype, err, sizeof(err)), 0,
	        "%s '%s' %s: the workload cannot be scaled: %s", p->op,
	        op->workloads[p->workload].label, tk_dtype_name((tk_dtype)p->dtype), err);
	parity_name(&c, name, sizeof(name));
	fprintf(stderr, "[parity] %s: %s\n", name, c.scaling);
	if (!check(&c))
		cr_skip_test("%s: no CUDA kernel serves it (the manifest's conditions)", name);
}
