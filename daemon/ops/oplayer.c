/*
 * oplayer.c - L2: checks each op request against the op's manifest entry,
 * fills in param defaults, picks the kernel and counts the roofline.
 *
 * The checks run in a fixed order so that later rules may rely on earlier
 * ones: counts, params, dtypes, ranks and layouts, roofline vars, declared
 * input shapes, rules, output shapes, kernel conditions. Nothing here
 * allocates; a request costs a few expression evaluations.
 */
#include "oplayer.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "manifest.h"

typedef struct prep {
	const manifest_op *op;
	const tk_tensor *t[MANIFEST_MAX_TENSORS]; /* by manifest index; NULL: absent */
	tk_param params[TK_MAX_PARAMS];           /* by manifest index, typed, defaults in */
	expr_value vars[MANIFEST_MAX_VARS];
	expr_env env;
	char *err;
	size_t errlen;
} prep;

static tileops_status pfail(prep *p, tileops_status st, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static tileops_status pfail(prep *p, tileops_status st, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (!p->err || !p->errlen)
		return st;
	w = snprintf(p->err, p->errlen, "%s: ", p->op->name);
	if (w >= 0 && (size_t)w < p->errlen) {
		va_start(ap, fmt);
		vsnprintf(p->err + w, p->errlen - (size_t)w, fmt, ap);
		va_end(ap);
	}
	return st;
}

static void prep_init(prep *p, const manifest_op *op, char *err, size_t errlen)
{
	memset(p, 0, offsetof(prep, env));
	p->op = op;
	p->err = err;
	p->errlen = errlen;
}

static void shape_str(const int64_t *s, int n, char *buf, size_t len)
{
	size_t used = (size_t)snprintf(buf, len, "[");

	for (int i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "",
		                         (long long)s[i]);
	if (used < len)
		snprintf(buf + used, len - used, "]");
}

static void value_str(const tk_param *v, char *buf, size_t len)
{
	if (v->kind == TK_PARAM_FLOAT)
		snprintf(buf, len, "%g", v->v.f);
	else if (v->kind == TK_PARAM_BOOL)
		snprintf(buf, len, "%s", v->v.b ? "true" : "false");
	else
		snprintf(buf, len, "%lld", (long long)v->v.i);
}

static const char *kind_name(tk_param_kind k)
{
	return k == TK_PARAM_INT     ? "int"
	       : k == TK_PARAM_FLOAT ? "float"
	       : k == TK_PARAM_BOOL  ? "bool"
	                             : "none";
}

/* ---- counts and params ------------------------------------------------------- */

static tileops_status check_counts(prep *p, const op_request *req)
{
	const manifest_op *op = p->op;

	if (req->n_in < op->n_in_required || req->n_in > op->n_in) {
		char names[256] = "";
		size_t u = 0;

		for (int i = 0; i < op->n_in && u < sizeof(names); i++)
			u += (size_t)snprintf(names + u, sizeof(names) - u, "%s%s%s", i ? ", " : "",
			                      op->tensors[i].name,
			                      op->tensors[i].optional ? "?" : "");
		return pfail(p, TILEOPS_ERR_INVALID_ARGUMENT, "expects %d%s inputs (%s), got %d",
		             op->n_in_required, op->n_in > op->n_in_required ? " or more" : "",
		             names, req->n_in);
	}
	if (req->n_out < op->n_out_required || req->n_out > op->n_out) {
		if (op->n_out_required == op->n_out)
			return pfail(p, TILEOPS_ERR_INVALID_ARGUMENT, "expects %d output%s, got %d",
			             op->n_out, op->n_out == 1 ? "" : "s", req->n_out);
		return pfail(p, TILEOPS_ERR_INVALID_ARGUMENT, "expects %d to %d outputs, got %d",
		             op->n_out_required, op->n_out, req->n_out);
	}
	if ((req->n_in && !req->in) || (req->n_out && !req->out) ||
	    (req->n_params && (!req->param_names || !req->param_values)))
		return pfail(p, TILEOPS_ERR_INVALID_ARGUMENT, "request arrays are missing");
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		int is_in = i < op->n_in, j = is_in ? i : i - op->n_in;
		int given = is_in ? j < req->n_in : j < req->n_out;
		int left = given && (req->left_out >> (is_in ? j : TK_MAX_INPUTS + j) & 1u);

		/* A left-out tensor stays NULL here, as an absent optional one
		 * does; only optional tensors may be left out. */
		if (left && !op->tensors[i].optional)
			return pfail(p, TILEOPS_ERR_INVALID_ARGUMENT,
			             "%s %s is required but was left out (handle 0)",
			             is_in ? "input" : "output", op->tensors[i].name);
		if (given && !left)
			p->t[i] = is_in ? &req->in[j] : &req->out[j];
	}
	return TILEOPS_OK;
}

static int param_in_range(const manifest_param *mp, double v)
{
	if (mp->has_lo && (mp->lo_open ? !(v > mp->lo) : !(v >= mp->lo)))
		return 0;
	return !(mp->has_hi && (mp->hi_open ? !(v < mp->hi) : !(v <= mp->hi)));
}

/* Convert a client's value to the declared type: int -> float, 0/1 -> bool. */
static tileops_status convert_param(prep *p, const manifest_param *mp, const tk_param *in,
                                    tk_param *out)
{
	out->kind = mp->type;
	if (in->kind == mp->type) {
		*out = *in;
	} else if (mp->type == TK_PARAM_FLOAT && in->kind == TK_PARAM_INT) {
		out->v.f = (double)in->v.i;
	} else if (mp->type == TK_PARAM_BOOL && in->kind == TK_PARAM_INT &&
	           (in->v.i == 0 || in->v.i == 1)) {
		out->v.b = (int)in->v.i;
	} else {
		char got[48];

		value_str(in, got, sizeof(got));
		return pfail(p, TILEOPS_ERR_PARAM, "param '%s' must be %s%s, got %s %s", mp->name,
		             kind_name(mp->type), mp->type == TK_PARAM_BOOL ? " (or int 0/1)" : "",
		             kind_name(in->kind), in->kind == TK_PARAM_NONE ? "(no value)" : got);
	}
	if (out->kind == TK_PARAM_BOOL)
		out->v.b = out->v.b != 0;
	return TILEOPS_OK;
}

static tileops_status check_param_value(prep *p, const manifest_param *mp, const tk_param *v)
{
	double d = v->kind == TK_PARAM_FLOAT ? v->v.f : (double)v->v.i;
	char s[48];
	int ok = 0;

	if (v->kind == TK_PARAM_BOOL)
		return TILEOPS_OK;
	if (isnan(d))
		return pfail(p, TILEOPS_ERR_PARAM, "param '%s' is NaN", mp->name);
	/* Checked on every op: text is made only for a refusal. */
	if (mp->range_text && !param_in_range(mp, d)) {
		value_str(v, s, sizeof(s));
		return pfail(p, TILEOPS_ERR_PARAM, "param '%s' = %s is out of range %s", mp->name,
		             s, mp->range_text);
	}
	for (int k = 0; k < mp->n_values; k++)
		ok |= mp->values[k] == d;
	if (mp->n_values && !ok) {
		char list[160];
		size_t u = 0;

		for (int k = 0; k < mp->n_values && u < sizeof(list); k++)
			u += (size_t)snprintf(list + u, sizeof(list) - u, "%s%g", k ? ", " : "",
			                      mp->values[k]);
		value_str(v, s, sizeof(s));
		return pfail(p, TILEOPS_ERR_PARAM, "param '%s' = %s is not one of {%s}", mp->name,
		             s, list);
	}
	return TILEOPS_OK;
}

static tileops_status bind_params(prep *p, const op_request *req)
{
	const manifest_op *op = p->op;
	int given[TK_MAX_PARAMS] = { 0 };
	tileops_status st;

	for (size_t i = 0; i < req->n_params; i++) {
		const char *name = req->param_names[i];
		int k = -1;

		for (int j = 0; name && j < op->n_params && k < 0; j++)
			if (!strcmp(op->params[j].name, name))
				k = j;
		if (k < 0)
			return pfail(p, TILEOPS_ERR_PARAM, "unknown param '%s'", name ? name : "");
		if (given[k]++)
			return pfail(p, TILEOPS_ERR_PARAM, "param '%s' is given twice", name);
		if ((st = convert_param(p, &op->params[k], &req->param_values[i], &p->params[k])) ||
		    (st = check_param_value(p, &op->params[k], &p->params[k])))
			return st;
	}
	for (int k = 0; k < op->n_params; k++) {
		if (given[k])
			continue;
		if (!op->params[k].has_default)
			return pfail(p, TILEOPS_ERR_PARAM, "missing required param '%s'",
			             op->params[k].name);
		p->params[k] = op->params[k].def;
	}
	return TILEOPS_OK;
}

/* ---- dtypes, ranks, layouts --------------------------------------------------- */

static tileops_status check_dtypes(prep *p)
{
	const manifest_op *op = p->op;

	for (int i = 0; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *mt = &op->tensors[i];
		const manifest_dtype_rule *r = &mt->dtype;
		const tk_tensor *t = p->t[i];
		uint32_t allowed = r->mask;
		char want[128];

		if (!t)
			continue;
		if (t->dtype <= TK_DTYPE_INVALID || t->dtype >= TK_DTYPE_COUNT)
			return pfail(p, TILEOPS_ERR_DTYPE, "%s has an invalid dtype (%d)", mt->name,
			             (int)t->dtype);
		if (r->same_as >= 0 && p->t[r->same_as])
			allowed |= 1u << p->t[r->same_as]->dtype;
		else if (r->same_as >= 0 && !r->mask)
			continue; /* same as an absent optional tensor: nothing to match */
		if (allowed & (1u << t->dtype))
			continue;
		manifest_dtype_mask_str(allowed, want, sizeof(want));
		if (r->same_as >= 0)
			return pfail(p, TILEOPS_ERR_DTYPE, "%s has dtype %s, expected %s (%s)",
			             mt->name, manifest_dtype_name(t->dtype), want, r->text);
		return pfail(p, TILEOPS_ERR_DTYPE, "%s has dtype %s, expected %s", mt->name,
		             manifest_dtype_name(t->dtype), want);
	}
	return TILEOPS_OK;
}

/*
 * Row strides: the last dim contiguous, and every other dim's stride at
 * least the extent of the dims inside it (rows spaced as wide as they are
 * or wider, in row-major order, never overlapping): a slice of columns of
 * a wider buffer, or every S-th row. Size-1 dims have no stride to speak of.
 */
static int has_row_strides(const tk_tensor *t)
{
	int64_t inner = 1; /* elements from the first of dim d+1.. to one past its last */

	for (int d = t->ndim - 1; d >= 0; d--) {
		if (t->shape[d] <= 1)
			continue;
		if (d == t->ndim - 1 ? t->stride[d] != 1 : t->stride[d] < inner)
			return 0;
		inner = t->stride[d] * (t->shape[d] - 1) + inner;
	}
	return 1;
}

static tileops_status check_layout(prep *p, const manifest_tensor *mt, const tk_tensor *t)
{
	char shape[160], strides[160];

	if (tk_is_contiguous(t) || (!mt->packed && has_row_strides(t)))
		return TILEOPS_OK;
	shape_str(t->shape, t->ndim, shape, sizeof(shape));
	shape_str(t->stride, t->ndim, strides, sizeof(strides));
	if (mt->packed)
		return pfail(p, TILEOPS_ERR_SHAPE,
		             "%s must be a contiguous (packed row-major) tensor; got shape %s with "
		             "strides %s (its kernels take no row strides)",
		             mt->name, shape, strides);
	return pfail(p, TILEOPS_ERR_SHAPE,
	             "%s must be a contiguous tensor or row-strided (last dimension stride 1, "
	             "each outer stride at least the extent inside it); got shape %s with "
	             "strides %s",
	             mt->name, shape, strides);
}

static tileops_status check_ranks(prep *p)
{
	const manifest_op *op = p->op;
	tileops_status st;

	for (int i = 0; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *mt = &op->tensors[i];
		const tk_tensor *t = p->t[i];

		if (!t)
			continue;
		if (t->ndim < mt->rank_min || t->ndim > mt->rank_max) {
			if (mt->rank_min == mt->rank_max)
				return pfail(p, TILEOPS_ERR_SHAPE,
				             "%s has rank %d, expected rank %d", mt->name, t->ndim,
				             mt->rank_min);
			return pfail(p, TILEOPS_ERR_SHAPE, "%s has rank %d, expected rank %d to %d",
			             mt->name, t->ndim, mt->rank_min, mt->rank_max);
		}
		for (int d = 0; d < t->ndim; d++)
			if (t->shape[d] < 0)
				return pfail(p, TILEOPS_ERR_SHAPE, "%s has a negative dimension %d",
				             mt->name, d);
		if ((st = check_layout(p, mt, t)))
			return st;
	}
	return TILEOPS_OK;
}

/* ---- expressions ---------------------------------------------------------------- */

static void bind_env(prep *p)
{
	memset(&p->env, 0, offsetof(expr_env, scratch));
	p->env.tensors = p->t;
	p->env.n_tensors = p->op->n_in + p->op->n_out;
	p->env.params = p->params;
	p->env.n_params = p->op->n_params;
	p->env.vars = p->vars;
	p->env.n_vars = 0;
}

static tileops_status compute_vars(prep *p)
{
	char msg[256];

	for (int i = 0; i < p->op->n_vars; i++) {
		p->env.n_vars = i;
		if (expr_eval(p->op->vars[i].value, &p->env, &p->vars[i], msg, sizeof(msg)) < 0)
			return pfail(p, TILEOPS_ERR_SHAPE,
			             "roofline var '%s' cannot be computed: %s",
			             p->op->vars[i].name, msg);
	}
	p->env.n_vars = p->op->n_vars;
	return TILEOPS_OK;
}

/* "(x.shape[-1])" for "[x.shape[-1]]": the rule as a reader would write it. */
static void rule_text(const expr *e, char *buf, size_t len)
{
	const char *s = expr_text(e);
	size_t n = strlen(s);

	if (expr_is_list_literal(e) && n >= 2 && s[0] == '[' && s[n - 1] == ']')
		snprintf(buf, len, "%.*s", (int)(n - 2), s + 1);
	else
		snprintf(buf, len, "%s", s);
}

static tileops_status check_declared_shape(prep *p, int i)
{
	const manifest_tensor *mt = &p->op->tensors[i];
	const tk_tensor *t = p->t[i];
	char msg[256], have[160], want[160], text[160];
	expr_value v;

	if (!t || !mt->shape)
		return TILEOPS_OK;
	if (expr_eval(mt->shape, &p->env, &v, msg, sizeof(msg)) < 0)
		return pfail(p, TILEOPS_ERR_SHAPE, "the shape of %s cannot be computed: %s",
		             mt->name, msg);
	if (v.v.l.n == t->ndim && !memcmp(v.v.l.p, t->shape, (size_t)t->ndim * sizeof(int64_t)))
		return TILEOPS_OK;
	shape_str(t->shape, t->ndim, have, sizeof(have));
	shape_str(v.v.l.p, v.v.l.n, want, sizeof(want));
	rule_text(mt->shape, text, sizeof(text));
	return pfail(p, TILEOPS_ERR_SHAPE, "%s has shape %s, expected %s (%s)", mt->name, have,
	             want, text);
}

/* "; a has shape [2, 3], b has shape [4]" for the tensors a rule names. */
static void shapes_of(prep *p, uint32_t mask, char *buf, size_t len)
{
	size_t u = 0;

	buf[0] = 0;
	for (int i = 0; i < p->op->n_in + p->op->n_out && u < len; i++) {
		char s[160];

		if (!(mask & (1u << i)) || !p->t[i])
			continue;
		shape_str(p->t[i]->shape, p->t[i]->ndim, s, sizeof(s));
		u += (size_t)snprintf(buf + u, len - u, "%s%s has shape %s", u ? ", " : "; ",
		                      p->op->tensors[i].name, s);
	}
}

static tileops_status check_rules(prep *p)
{
	for (int i = 0; i < p->op->n_rules; i++) {
		const manifest_rule *r = &p->op->rules[i];
		uint32_t tensors = expr_tensors_used(r->check);
		tileops_status st = tensors || !expr_params_used(r->check) ? TILEOPS_ERR_SHAPE
		                                                           : TILEOPS_ERR_PARAM;
		char msg[256], shapes[320];
		expr_value v;

		if (expr_eval(r->check, &p->env, &v, msg, sizeof(msg)) < 0)
			return pfail(p, st, "rule '%s' cannot be checked: %s", expr_text(r->check),
			             msg);
		if (v.v.b)
			continue;
		shapes_of(p, tensors, shapes, sizeof(shapes));
		if (r->message)
			return pfail(p, st, "%s (%s)%s", r->message, expr_text(r->check), shapes);
		return pfail(p, st, "rule failed: %s%s", expr_text(r->check), shapes);
	}
	return TILEOPS_OK;
}

static tileops_status check_shapes(prep *p)
{
	const manifest_op *op = p->op;
	tileops_status st;

	for (int i = 0; i < op->n_in; i++)
		if ((st = check_declared_shape(p, i)))
			return st;
	if ((st = check_rules(p)))
		return st;
	for (int i = op->n_in; i < op->n_in + op->n_out; i++)
		if ((st = check_declared_shape(p, i)))
			return st;
	return TILEOPS_OK;
}

/* At least one declared kernel of the backend must accept the arguments. */
static tileops_status check_conditions(prep *p, const char *backend)
{
	char conds[256] = "", msg[256];
	size_t u = 0;
	int declared = 0;

	for (int i = 0; i < p->op->n_kernels; i++) {
		const manifest_kernel *k = &p->op->kernels[i];
		expr_value v;

		if (strcmp(k->backend, backend))
			continue;
		declared++;
		if (expr_eval(k->when, &p->env, &v, msg, sizeof(msg)) < 0)
			return pfail(p, TILEOPS_ERR_SHAPE, "kernel '%s': %s", k->name, msg);
		if (v.v.b)
			return TILEOPS_OK;
		if (u < sizeof(conds))
			u += (size_t)snprintf(conds + u, sizeof(conds) - u, "%s%s: %s",
			                      u ? "; " : "", k->name, expr_text(k->when));
	}
	if (!declared)
		return TILEOPS_OK;
	return pfail(p, TILEOPS_ERR_UNSUPPORTED, "no %s kernel accepts these arguments (%s)",
	             backend, conds);
}

static tileops_status compute_cost(prep *p, op_cost *cost)
{
	char msg[256];
	expr_value v;

	cost->flops = cost->bytes = 0;
	if (p->op->flops) {
		if (expr_eval(p->op->flops, &p->env, &v, msg, sizeof(msg)) < 0)
			return pfail(p, TILEOPS_ERR_INTERNAL, "flops: %s", msg);
		cost->flops = v.type == EXPR_T_FLOAT ? v.v.f : (double)v.v.i;
	}
	if (p->op->bytes) {
		if (expr_eval(p->op->bytes, &p->env, &v, msg, sizeof(msg)) < 0)
			return pfail(p, TILEOPS_ERR_INTERNAL, "bytes: %s", msg);
		cost->bytes = v.type == EXPR_T_FLOAT ? v.v.f : (double)v.v.i;
	}
	return TILEOPS_OK;
}

/* Everything but kernel selection: shared by requests and workload checks. */
static tileops_status validate(prep *p, const op_request *req)
{
	tileops_status st;

	if ((st = check_counts(p, req)) || (st = bind_params(p, req)) || (st = check_dtypes(p)) ||
	    (st = check_ranks(p)))
		return st;
	bind_env(p);
	if ((st = compute_vars(p)) || (st = check_shapes(p)))
		return st;
	return TILEOPS_OK;
}

static tileops_status build_call(prep *p, const op_request *req, const tk_kernel_entry *e,
                                 tk_call *call)
{
	const manifest_op *op = p->op;
	int n = 0;

	call->n_in = req->n_in;
	call->n_out = req->n_out;
	call->workspace = NULL; /* the backend hands out workspace at launch */
	call->workspace_bytes = 0;
	/* The kernel's built-in rule; the executor applies the tuning table. */
	memset(&call->choice, 0, sizeof(call->choice));
	memcpy(call->in, req->in, (size_t)req->n_in * sizeof(tk_tensor));
	memcpy(call->out, req->out, (size_t)req->n_out * sizeof(tk_tensor));
	if (!e) {
		/* A collective: the backend reads its params in manifest order. */
		memcpy(call->params, p->params, (size_t)op->n_params * sizeof(tk_param));
		call->n_params = op->n_params;
		return TILEOPS_OK;
	}
	for (; e->params && e->params[n]; n++) {
		int k = -1;

		for (int j = 0; j < op->n_params && k < 0; j++)
			if (!strcmp(op->params[j].name, e->params[n]))
				k = j;
		if (k < 0 || n == TK_MAX_PARAMS)
			return pfail(p, TILEOPS_ERR_INTERNAL,
			             "the kernel reads param '%s', which the "
			             "manifest does not declare",
			             e->params[n]);
		call->params[n] = p->params[k];
	}
	call->n_params = n;
	return TILEOPS_OK;
}

tileops_status oplayer_prepare(const manifest *m, const op_request *req, int have_cuda,
                               tk_call *call, const tk_kernel_entry **kernel, op_cost *cost,
                               char *err, size_t errlen)
{
	const tk_kernel_entry *e;
	tileops_status st;
	prep p;

	if (!m || !req || !req->op || !call || !kernel || !cost) {
		if (err && errlen)
			snprintf(err, errlen, "oplayer_prepare: a required argument is NULL");
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	prep_init(&p, manifest_find(m, req->op), err, errlen);
	if (!p.op) {
		if (err && errlen)
			snprintf(err, errlen, "unknown op '%s'", req->op);
		return TILEOPS_ERR_UNKNOWN_OP;
	}
	if (p.op->diagnostic && !m->serve_diagnostic) {
		if (err && errlen)
			snprintf(
			        err, errlen,
			        "op '%s' is a diagnostic op, served only when the daemon runs with "
			        "diagnostic_ops = on",
			        req->op);
		return TILEOPS_ERR_UNKNOWN_OP;
	}
	if (p.op->status != MANIFEST_IMPLEMENTED) {
		if (err && errlen)
			snprintf(err, errlen, "op '%s' is declared but has no kernel yet", req->op);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	if ((st = validate(&p, req)))
		return st;
	if (p.op->collective) {
		if ((st = build_call(&p, req, NULL, call)) || (st = compute_cost(&p, cost)))
			return st;
		*kernel = NULL;
		return TILEOPS_OK;
	}
	if ((st = check_conditions(&p, have_cuda ? "cuda" : "cpu")))
		return st;
	e = tk_kernel_find(p.op->name);
	if (!e || (!have_cuda && !e->cpu))
		return pfail(&p, TILEOPS_ERR_UNSUPPORTED, "no cpu kernel is registered");
	if (have_cuda && !e->cuda)
		return pfail(&p, TILEOPS_ERR_UNSUPPORTED, "no cuda kernel is registered");
	if ((st = build_call(&p, req, e, call)) || (st = compute_cost(&p, cost)))
		return st;
	*kernel = e;
	return TILEOPS_OK;
}

/* ---- workloads ------------------------------------------------------------------ */

/*
 * The dtype a workload run gives tensor i: the caller's (dtypes), else its
 * rule's choice for `dt`: the tensor it follows, dt where the rule allows
 * it, else the first dtype the rule allows.
 */
static tk_dtype workload_dtype(const manifest_op *op, int i, tk_dtype dt, const tk_dtype *dtypes,
                               const tk_tensor *t)
{
	const manifest_dtype_rule *r = &op->tensors[i].dtype;

	if (dtypes && dtypes[i] != TK_DTYPE_INVALID)
		return dtypes[i];
	if (r->same_as >= 0 && t[r->same_as].dtype != TK_DTYPE_INVALID)
		return t[r->same_as].dtype;
	if (!r->mask || (r->mask & (1u << dt)))
		return r->mask ? dt : TK_DTYPE_INVALID;
	for (int k = 1; k < TK_DTYPE_COUNT; k++)
		if (r->mask & (1u << k))
			return (tk_dtype)k;
	return TK_DTYPE_INVALID;
}

static void set_packed(tk_tensor *t)
{
	int64_t s = 1;

	for (int d = t->ndim - 1; d >= 0; d--) {
		t->stride[d] = s;
		s *= t->shape[d] > 0 ? t->shape[d] : 1;
	}
}

/*
 * The request a client sends for a workload: inputs up to the last one it
 * gives (those before it that it does not give left out), every output,
 * the workload's params by name. names: TK_MAX_PARAMS entries.
 */
static void workload_request(const manifest_op *op, const manifest_workload *w, tk_tensor *t,
                             uint32_t given, const char **names, op_request *req)
{
	memset(req, 0, sizeof(*req));
	req->op = op->name;
	for (int i = 0; i < op->n_in; i++)
		if (given >> i & 1u)
			req->n_in = i + 1;
	for (int i = 0; i < req->n_in; i++)
		if (!(given >> i & 1u))
			req->left_out |= 1u << i;
	req->n_out = op->n_out;
	req->in = t;
	req->out = t + op->n_in;
	for (int i = 0; i < w->n_params; i++)
		names[i] = op->params[w->param[i]].name;
	req->n_params = (size_t)w->n_params;
	req->param_names = names;
	req->param_values = w->value;
}

static tileops_status workload_outputs(prep *p, tk_tensor *t)
{
	const manifest_op *op = p->op;
	char msg[256];
	expr_value v;

	for (int i = op->n_in; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *mt = &op->tensors[i];

		if (!mt->shape)
			return pfail(p, TILEOPS_ERR_SHAPE, "output %s declares no shape", mt->name);
		if (expr_eval(mt->shape, &p->env, &v, msg, sizeof(msg)) < 0)
			return pfail(p, TILEOPS_ERR_SHAPE, "the shape of %s cannot be computed: %s",
			             mt->name, msg);
		if (v.v.l.n > TK_MAX_DIMS)
			return pfail(p, TILEOPS_ERR_SHAPE, "%s would have rank %d", mt->name,
			             v.v.l.n);
		t[i].ndim = v.v.l.n;
		memcpy(t[i].shape, v.v.l.p, (size_t)v.v.l.n * sizeof(int64_t));
		set_packed(&t[i]);
	}
	return TILEOPS_OK;
}

tileops_status oplayer_workload_tensors(const manifest_op *op, const manifest_workload *w,
                                        tk_dtype dt, const tk_dtype *dtypes, tk_tensor *tensors,
                                        uint32_t *given, tk_param *params, char *err, size_t errlen)
{
	const char *names[TK_MAX_PARAMS];
	uint32_t in = 0;
	op_request req;
	tileops_status st;
	prep p;

	if (!op || !w || !tensors || dt <= TK_DTYPE_INVALID || dt >= TK_DTYPE_COUNT) {
		if (err && errlen)
			snprintf(err, errlen, "oplayer_workload_tensors: %s",
			         op && w && tensors ? "dt is not a dtype"
			                            : "a required argument is NULL");
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	memset(tensors, 0, sizeof(*tensors) * (size_t)(op->n_in + op->n_out));
	for (int s = 0; s < w->n_shapes; s++) {
		tk_tensor *x = &tensors[w->tensor[s]];

		x->ndim = w->ndim[s];
		memcpy(x->shape, w->shape[s], sizeof(x->shape));
		set_packed(x);
		in |= 1u << w->tensor[s];
	}
	/* Twice: a rule may follow a tensor declared after it. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < op->n_in + op->n_out; i++)
			if (i >= op->n_in || (in >> i & 1u))
				tensors[i].dtype = workload_dtype(op, i, dt, dtypes, tensors);
	if (given)
		*given = in;

	/* The inputs as a request's, then the outputs from the op's own formulas. */
	workload_request(op, w, tensors, in, names, &req);
	prep_init(&p, op, err, errlen);
	if ((st = check_counts(&p, &req)))
		return st;
	for (int i = op->n_in; i < op->n_in + op->n_out; i++)
		p.t[i] = NULL; /* no shapes yet: not checked, and no formula may read them */
	if ((st = bind_params(&p, &req)) || (st = check_dtypes(&p)) || (st = check_ranks(&p)))
		return st;
	bind_env(&p);
	if ((st = compute_vars(&p)) || (st = workload_outputs(&p, tensors)))
		return st;
	if (params)
		memcpy(params, p.params, sizeof(*params) * (size_t)op->n_params);
	return TILEOPS_OK;
}

tileops_status oplayer_check_workload(const manifest_op *op, const manifest_workload *w,
                                      tk_dtype dt, op_cost *cost, char *err, size_t errlen)
{
	tk_tensor t[MANIFEST_MAX_TENSORS];
	const char *names[TK_MAX_PARAMS];
	uint32_t given;
	op_request req;
	tileops_status st;
	prep p;

	if ((st = oplayer_workload_tensors(op, w, dt, NULL, t, &given, NULL, err, errlen)))
		return st;
	workload_request(op, w, t, given, names, &req);
	prep_init(&p, op, err, errlen);
	if ((st = validate(&p, &req)))
		return st;
	return compute_cost(&p, cost);
}

int oplayer_writes_nothing(const manifest *m, const char *op, const tk_call *call)
{
	const manifest_op *mo = manifest_find(m, op);
	if (!mo)
		return 0;
	for (int i = 0; i < call->n_out; i++)
		if (call->out[i].data && tk_numel(&call->out[i]) != 0)
			return 0;
	for (int i = 0; i < call->n_in && i < mo->n_in; i++)
		if (mo->tensors[i].mutated && call->in[i].data && tk_numel(&call->in[i]) != 0)
			return 0;
	return 1;
}
