/*
 * expr_eval.c - evaluation of parsed expressions, and their accessors.
 *
 * Types were checked by the parser, so this file only guards values:
 * division by zero, indices out of range, absent optional tensors and
 * integer overflow each end in an error message, never in a crash. Nothing
 * here allocates; lists are built in env->scratch.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr_internal.h"

typedef struct evalctx {
	const expr *e;
	expr_env *env;
	char *err;
	size_t errlen;
} evalctx;

static int ev(evalctx *c, int n, expr_value *out);

static int efail(evalctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int efail(evalctx *c, const char *fmt, ...)
{
	va_list ap;
	int len;

	if (!c->err || !c->errlen)
		return -1;
	va_start(ap, fmt);
	len = vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	if (len >= 0 && (size_t)len < c->errlen)
		snprintf(c->err + len, c->errlen - (size_t)len, " in '%s'", c->e->text);
	return -1;
}

/* The identifier at a node's position, for messages ("'bias' is absent"). */
static int ident_len(const char *s)
{
	int n = 0;

	while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
	       (s[n] >= '0' && s[n] <= '9') || s[n] == '_')
		n++;
	return n;
}

/* Element sizes by wire dtype value; kept here so expressions need no L1. */
static int64_t dtype_bytes(tk_dtype dt)
{
	static const int64_t sizes[] = { 0, 4, 2, 2, 4, 8, 1, 1 };

	return (unsigned)dt < sizeof(sizes) / sizeof(sizes[0]) ? sizes[dt] : 0;
}

static int get_tensor(evalctx *c, int n, int must_exist, const tk_tensor **t)
{
	const node *nd = &c->e->nodes[n];
	int sym = (int)nd->v.i;
	const char *name = c->e->text + nd->pos;

	*t = sym < c->env->n_tensors ? c->env->tensors[sym] : NULL;
	if (!*t && must_exist)
		return efail(c, "'%.*s' is absent", ident_len(name), name);
	return 0;
}

static double as_f(const expr_value *v)
{
	return v->type == EXPR_T_FLOAT ? v->v.f : (double)v->v.i;
}

static void to_type(expr_value *v, expr_type t)
{
	if (t == EXPR_T_FLOAT && v->type == EXPR_T_INT) {
		v->v.f = (double)v->v.i;
		v->type = EXPR_T_FLOAT;
	}
}

static int push_list(evalctx *c, const int64_t *src, int n, expr_value *out)
{
	expr_env *env = c->env;

	if (n > EXPR_SCRATCH - env->top)
		return efail(c, "list too long");
	memmove(env->scratch + env->top, src, (size_t)n * sizeof(*src));
	out->type = EXPR_T_LIST;
	out->v.l.p = env->scratch + env->top;
	out->v.l.n = n;
	env->top += n;
	return 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	if ((a % b != 0) && ((a < 0) != (b < 0)))
		q--;
	return q;
}

static int int_arith(evalctx *c, int op, int64_t a, int64_t b, int64_t *r)
{
	int ovf = 0;

	switch (op) {
	case N_ADD:
		ovf = __builtin_add_overflow(a, b, r);
		break;
	case N_SUB:
		ovf = __builtin_sub_overflow(a, b, r);
		break;
	case N_MUL:
		ovf = __builtin_mul_overflow(a, b, r);
		break;
	case N_IDIV:
	case N_MOD:
		if (b == 0)
			return efail(c, "division by zero");
		if (a == INT64_MIN && b == -1)
			return efail(c, "integer overflow");
		if (op == N_IDIV) {
			*r = floor_div(a, b);
		} else {
			/* Floored modulo (the sign of b), without a product that can
			 * overflow (2 % INT64_MIN). */
			*r = a % b;
			if (*r != 0 && (*r < 0) != (b < 0))
				*r += b;
		}
		break;
	default:
		return efail(c, "bad integer operator");
	}
	return ovf ? efail(c, "integer overflow") : 0;
}

static int eval_arith(evalctx *c, const node *nd, expr_value *out)
{
	expr_value a, b;

	if (ev(c, nd->a, &a) < 0 || ev(c, nd->b, &b) < 0)
		return -1;
	if (nd->type == EXPR_T_LIST) {
		int64_t tmp[EXPR_SCRATCH];
		int n = a.v.l.n + b.v.l.n;

		if (n > EXPR_SCRATCH)
			return efail(c, "list too long");
		memcpy(tmp, a.v.l.p, (size_t)a.v.l.n * sizeof(int64_t));
		memcpy(tmp + a.v.l.n, b.v.l.p, (size_t)b.v.l.n * sizeof(int64_t));
		return push_list(c, tmp, n, out);
	}
	out->type = (expr_type)nd->type;
	if (nd->type == EXPR_T_INT)
		return int_arith(c, nd->op, a.v.i, b.v.i, &out->v.i);
	double x = as_f(&a), y = as_f(&b);
	switch (nd->op) {
	case N_ADD:
		out->v.f = x + y;
		break;
	case N_SUB:
		out->v.f = x - y;
		break;
	case N_MUL:
		out->v.f = x * y;
		break;
	default:
		if (y == 0.0)
			return efail(c, "division by zero");
		out->v.f = x / y;
	}
	return 0;
}

static int compare(evalctx *c, const node *nd, expr_value *out)
{
	expr_value a, b;
	int r = 0;

	if (ev(c, nd->a, &a) < 0 || ev(c, nd->b, &b) < 0)
		return -1;
	out->type = EXPR_T_BOOL;
	if (a.type == EXPR_T_LIST) {
		r = a.v.l.n == b.v.l.n &&
		    !memcmp(a.v.l.p, b.v.l.p, (size_t)a.v.l.n * sizeof(int64_t));
		out->v.b = nd->op == N_EQ ? r : !r;
		return 0;
	}
	if (a.type == EXPR_T_BOOL) {
		out->v.b = nd->op == N_EQ ? a.v.b == b.v.b : a.v.b != b.v.b;
		return 0;
	}
	int cmp;
	if (a.type == EXPR_T_INT && b.type == EXPR_T_INT)
		cmp = (a.v.i > b.v.i) - (a.v.i < b.v.i);
	else
		cmp = (as_f(&a) > as_f(&b)) - (as_f(&a) < as_f(&b));
	switch (nd->op) {
	case N_EQ:
		r = cmp == 0;
		break;
	case N_NE:
		r = cmp != 0;
		break;
	case N_LT:
		r = cmp < 0;
		break;
	case N_LE:
		r = cmp <= 0;
		break;
	case N_GT:
		r = cmp > 0;
		break;
	default:
		r = cmp >= 0;
	}
	out->v.b = r;
	return 0;
}

static int eval_dim(evalctx *c, const node *nd, expr_value *out)
{
	const tk_tensor *t;
	int64_t k;

	if (get_tensor(c, nd->a, 1, &t) < 0)
		return -1;
	int n = t->ndim < 0 ? 0 : t->ndim > TK_MAX_DIMS ? TK_MAX_DIMS : t->ndim;

	k = nd->v.i < 0 ? nd->v.i + n : nd->v.i;
	if (k < 0 || k >= n)
		return efail(c, "index %lld is out of range for a list of length %d",
		             (long long)nd->v.i, n);
	out->type = EXPR_T_INT;
	out->v.i = t->shape[k];
	return 0;
}

static int eval_index(evalctx *c, const node *nd, expr_value *out)
{
	expr_value l, i;
	int64_t k;

	if (ev(c, nd->a, &l) < 0 || ev(c, nd->b, &i) < 0)
		return -1;
	k = i.v.i < 0 ? i.v.i + l.v.l.n : i.v.i;
	if (k < 0 || k >= l.v.l.n)
		return efail(c, "index %lld is out of range for a list of length %d",
		             (long long)i.v.i, l.v.l.n);
	out->type = EXPR_T_INT;
	out->v.i = l.v.l.p[k];
	return 0;
}

static int64_t slice_bound(int64_t v, int64_t n)
{
	if (v < 0)
		v += n;
	return v < 0 ? 0 : v > n ? n : v;
}

static int eval_slice(evalctx *c, const node *nd, expr_value *out)
{
	expr_value l, v;
	int64_t lo = 0, hi;

	if (ev(c, nd->a, &l) < 0)
		return -1;
	hi = l.v.l.n;
	if (nd->b >= 0) {
		if (ev(c, nd->b, &v) < 0)
			return -1;
		lo = slice_bound(v.v.i, l.v.l.n);
	}
	if (nd->c >= 0) {
		if (ev(c, nd->c, &v) < 0)
			return -1;
		hi = slice_bound(v.v.i, l.v.l.n);
	}
	*out = l;
	out->v.l.p = l.v.l.p + lo;
	out->v.l.n = hi > lo ? (int)(hi - lo) : 0;
	return 0;
}

static int eval_list(evalctx *c, const node *nd, expr_value *out)
{
	int64_t tmp[TK_MAX_DIMS * 2];
	int n = 0;

	for (int k = nd->a; k >= 0; k = c->e->nodes[k].next) {
		expr_value v;

		if (ev(c, k, &v) < 0)
			return -1;
		tmp[n++] = v.v.i;
	}
	return push_list(c, tmp, n, out);
}

static int eval_minmax(evalctx *c, const node *nd, expr_value *out)
{
	int is_max = nd->op == N_MAX, first = 1;
	expr_value v;

	out->type = (expr_type)nd->type;
	if (nd->v.i == 1) {
		if (ev(c, nd->a, &v) < 0)
			return -1;
		if (v.v.l.n == 0)
			return efail(c, "%s() of an empty list", is_max ? "max" : "min");
		out->v.i = v.v.l.p[0];
		for (int i = 1; i < v.v.l.n; i++)
			if (is_max ? v.v.l.p[i] > out->v.i : v.v.l.p[i] < out->v.i)
				out->v.i = v.v.l.p[i];
		return 0;
	}
	for (int k = nd->a; k >= 0; k = c->e->nodes[k].next, first = 0) {
		if (ev(c, k, &v) < 0)
			return -1;
		to_type(&v, out->type);
		if (out->type == EXPR_T_INT) {
			if (first || (is_max ? v.v.i > out->v.i : v.v.i < out->v.i))
				out->v.i = v.v.i;
		} else if (first || (is_max ? v.v.f > out->v.f : v.v.f < out->v.f)) {
			out->v.f = v.v.f;
		}
	}
	return 0;
}

static int product(evalctx *c, const int64_t *p, int n, int64_t *r)
{
	*r = 1;
	for (int i = 0; i < n; i++)
		if (__builtin_mul_overflow(*r, p[i], r))
			return efail(c, "integer overflow");
	return 0;
}

/* `a` broadcasts to `b` under numpy's rules (trailing dims aligned). */
static int broadcasts(const expr_value *a, const expr_value *b)
{
	if (a->v.l.n > b->v.l.n)
		return 0;
	for (int i = 1; i <= a->v.l.n; i++) {
		int64_t x = a->v.l.p[a->v.l.n - i], y = b->v.l.p[b->v.l.n - i];

		if (x != y && x != 1)
			return 0;
	}
	return 1;
}

/* The numpy broadcast of two shapes; an error when they do not broadcast. */
static int broadcast_shape(evalctx *c, const expr_value *a, const expr_value *b, expr_value *out)
{
	int n = a->v.l.n > b->v.l.n ? a->v.l.n : b->v.l.n;
	int64_t dims[TK_MAX_DIMS];

	if (n > TK_MAX_DIMS)
		return efail(c, "broadcast_shape: more than %d dims", TK_MAX_DIMS);
	for (int i = 1; i <= n; i++) {
		int64_t x = i <= a->v.l.n ? a->v.l.p[a->v.l.n - i] : 1;
		int64_t y = i <= b->v.l.n ? b->v.l.p[b->v.l.n - i] : 1;

		if (x != y && x != 1 && y != 1)
			return efail(c, "shapes do not broadcast (dim -%d: %lld vs %lld)", i,
			             (long long)x, (long long)y);
		dims[n - i] = x == 1 ? y : x;
	}
	return push_list(c, dims, n, out);
}

static int eval_tensor_attr(evalctx *c, const node *nd, expr_value *out)
{
	const tk_tensor *t;

	if (get_tensor(c, nd->a, nd->op != N_HAS, &t) < 0)
		return -1;
	switch (nd->op) {
	case N_HAS:
		out->type = EXPR_T_BOOL;
		out->v.b = t != NULL;
		return 0;
	case N_SHAPE:
		out->type = EXPR_T_LIST;
		out->v.l.p = t->shape;
		out->v.l.n = t->ndim < 0 ? 0 : t->ndim > TK_MAX_DIMS ? TK_MAX_DIMS : t->ndim;
		return 0;
	case N_NDIM:
		out->type = EXPR_T_INT;
		out->v.i = t->ndim;
		return 0;
	case N_NUMEL:
		out->type = EXPR_T_INT;
		return product(c, t->shape, t->ndim > TK_MAX_DIMS ? TK_MAX_DIMS : t->ndim,
		               &out->v.i);
	default:
		out->type = EXPR_T_INT;
		out->v.i = dtype_bytes(t->dtype);
		return 0;
	}
}

static int eval_func(evalctx *c, const node *nd, expr_value *out)
{
	expr_value a, b;

	if (ev(c, nd->a, &a) < 0 || (nd->b >= 0 && ev(c, nd->b, &b) < 0))
		return -1;
	switch (nd->op) {
	case N_PRODUCT:
		out->type = EXPR_T_INT;
		return product(c, a.v.l.p, a.v.l.n, &out->v.i);
	case N_LEN:
		out->type = EXPR_T_INT;
		out->v.i = a.v.l.n;
		return 0;
	case N_CEIL_DIV:
		if (b.v.i == 0)
			return efail(c, "division by zero");
		if (a.v.i == INT64_MIN)
			return efail(c, "integer overflow");
		out->type = EXPR_T_INT;
		out->v.i = -floor_div(-a.v.i, b.v.i);
		return 0;
	case N_BROADCAST_SHAPE:
		return broadcast_shape(c, &a, &b, out);
	default:
		out->type = EXPR_T_BOOL;
		out->v.b = broadcasts(&a, &b);
		return 0;
	}
}

static int eval_leaf(evalctx *c, const node *nd, expr_value *out)
{
	int sym = (int)nd->v.i;

	out->type = (expr_type)nd->type;
	switch (nd->op) {
	case N_INT:
		out->v.i = nd->v.i;
		return 0;
	case N_FLOAT:
		out->v.f = nd->v.f;
		return 0;
	case N_BOOL:
		out->v.b = (int)nd->v.i;
		return 0;
	case N_PARAM: {
		if (sym >= c->env->n_params)
			return efail(c, "param %d is not bound", sym);
		const tk_param *p = &c->env->params[sym];
		if (nd->type == EXPR_T_FLOAT)
			out->v.f = p->kind == TK_PARAM_FLOAT ? p->v.f : (double)p->v.i;
		else if (nd->type == EXPR_T_BOOL)
			out->v.b = p->kind == TK_PARAM_BOOL ? p->v.b : p->v.i != 0;
		else
			out->v.i = p->kind == TK_PARAM_INT ? p->v.i : (int64_t)p->v.f;
		return 0;
	}
	case N_VAR:
		if (sym >= c->env->n_vars)
			return efail(c, "var %d is not computed yet", sym);
		*out = c->env->vars[sym];
		to_type(out, (expr_type)nd->type);
		return 0;
	default: { /* N_ELEM_BYTES0: the op's first input */
		const tk_tensor *t = c->env->n_tensors > 0 ? c->env->tensors[0] : NULL;
		if (!t)
			return efail(c, "the first input is absent");
		out->v.i = dtype_bytes(t->dtype);
		return 0;
	}
	}
}

static int ev(evalctx *c, int n, expr_value *out)
{
	const node *nd = &c->e->nodes[n];
	expr_value v;

	switch (nd->op) {
	case N_INT:
	case N_FLOAT:
	case N_BOOL:
	case N_PARAM:
	case N_VAR:
	case N_ELEM_BYTES0:
		return eval_leaf(c, nd, out);
	case N_TENSOR:
		out->type = EXPR_T_TENSOR;
		out->v.i = nd->v.i;
		return 0;
	case N_SHAPE:
	case N_NDIM:
	case N_NUMEL:
	case N_ELEM_BYTES:
	case N_HAS:
		return eval_tensor_attr(c, nd, out);
	case N_DIM:
		return eval_dim(c, nd, out);
	case N_INDEX:
		return eval_index(c, nd, out);
	case N_SLICE:
		return eval_slice(c, nd, out);
	case N_LIST:
		return eval_list(c, nd, out);
	case N_NEG:
		if (ev(c, nd->a, out) < 0)
			return -1;
		if (out->type == EXPR_T_FLOAT)
			out->v.f = -out->v.f;
		else if (out->v.i == INT64_MIN)
			return efail(c, "integer overflow");
		else
			out->v.i = -out->v.i;
		return 0;
	case N_NOT:
		if (ev(c, nd->a, out) < 0)
			return -1;
		out->v.b = !out->v.b;
		return 0;
	case N_ADD:
	case N_SUB:
	case N_MUL:
	case N_DIV:
	case N_IDIV:
	case N_MOD:
		return eval_arith(c, nd, out);
	case N_EQ:
	case N_NE:
	case N_LT:
	case N_LE:
	case N_GT:
	case N_GE:
		return compare(c, nd, out);
	case N_AND:
	case N_OR:
		if (ev(c, nd->a, out) < 0)
			return -1;
		if (out->v.b == (nd->op == N_OR))
			return 0;
		return ev(c, nd->b, out);
	case N_COND:
		if (ev(c, nd->c, &v) < 0 || ev(c, v.v.b ? nd->a : nd->b, out) < 0)
			return -1;
		to_type(out, (expr_type)nd->type);
		return 0;
	case N_MIN:
	case N_MAX:
		return eval_minmax(c, nd, out);
	default:
		return eval_func(c, nd, out);
	}
}

int expr_eval(const expr *e, expr_env *env, expr_value *out, char *err, size_t errlen)
{
	evalctx c = { e, env, err, errlen };

	env->top = 0;
	return ev(&c, e->root, out);
}

void expr_free(expr *e)
{
	if (!e)
		return;
	free(e->text);
	free(e->nodes);
	free(e);
}

expr_type expr_result_type(const expr *e)
{
	return (expr_type)e->nodes[e->root].type;
}

const char *expr_text(const expr *e)
{
	return e->text;
}

uint32_t expr_tensors_used(const expr *e)
{
	return e->tensors;
}

uint32_t expr_params_used(const expr *e)
{
	return e->params;
}

uint32_t expr_vars_used(const expr *e)
{
	return e->vars;
}

int expr_is_list_literal(const expr *e)
{
	return e->nodes[e->root].op == N_LIST;
}

const char *expr_type_name(expr_type t)
{
	switch (t) {
	case EXPR_T_INT:
		return "int";
	case EXPR_T_FLOAT:
		return "float";
	case EXPR_T_BOOL:
		return "bool";
	case EXPR_T_LIST:
		return "list";
	case EXPR_T_TENSOR:
		return "tensor";
	default:
		return "none";
	}
}
