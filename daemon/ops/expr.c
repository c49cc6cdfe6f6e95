/*
 * expr.c - the parser of the manifest's expression language.
 *
 * The parser is recursive descent over a hand-written tokenizer; it builds
 * a flat array of typed nodes so that evaluation walks indices and never
 * allocates. See expr.h for the language.
 */
#include "expr_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- tokenizer --------------------------------------------------------- */

enum tok_kind { TOK_END, TOK_INT, TOK_FLOAT, TOK_IDENT, TOK_PUNCT };

typedef struct parser {
	const char *s;
	size_t pos; /* start of the current token */
	size_t end; /* end of the current token */
	enum tok_kind kind;
	char punct[3];
	int64_t ival;
	double fval;
	const expr_scope *scope;
	node *nodes;
	int n, cap;
	uint32_t tensors, params, vars;
	int failed;
	size_t err_pos;
	char *err;
	size_t errlen;
} parser;

static int fail(parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parser *p, size_t pos, const char *fmt, ...)
{
	va_list ap;

	if (p->failed)
		return -1;
	p->failed = 1;
	p->err_pos = pos;
	if (p->err && p->errlen) {
		va_start(ap, fmt);
		vsnprintf(p->err, p->errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *const puncts2[] = { "//", "==", "!=", "<=", ">=", NULL };

static int next_token(parser *p)
{
	const char *s = p->s;
	size_t i = p->end;

	while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
		i++;
	p->pos = i;
	if (!s[i]) {
		p->kind = TOK_END;
		p->end = i;
		return 0;
	}
	if (isdigit((unsigned char)s[i]) || (s[i] == '.' && isdigit((unsigned char)s[i + 1]))) {
		size_t j = i;
		int is_float = 0;
		char *endp;

		while (isdigit((unsigned char)s[j]))
			j++;
		if (s[j] == '.' || s[j] == 'e' || s[j] == 'E')
			is_float = 1;
		errno = 0;
		if (is_float) {
			p->fval = strtod(s + i, &endp);
			p->kind = TOK_FLOAT;
		} else {
			p->ival = strtoll(s + i, &endp, 10);
			p->kind = TOK_INT;
		}
		if (errno == ERANGE)
			return fail(p, i, "number out of range");
		if (isalpha((unsigned char)*endp) || *endp == '_')
			return fail(p, i, "malformed number");
		p->end = (size_t)(endp - s);
		return 0;
	}
	if (isalpha((unsigned char)s[i]) || s[i] == '_') {
		size_t j = i;

		while (isalnum((unsigned char)s[j]) || s[j] == '_')
			j++;
		p->kind = TOK_IDENT;
		p->end = j;
		return 0;
	}
	for (int k = 0; puncts2[k]; k++) {
		if (s[i] == puncts2[k][0] && s[i + 1] == puncts2[k][1]) {
			memcpy(p->punct, puncts2[k], 3);
			p->kind = TOK_PUNCT;
			p->end = i + 2;
			return 0;
		}
	}
	if (strchr("+-*/%()[],.:<>", s[i])) {
		p->punct[0] = s[i];
		p->punct[1] = 0;
		p->kind = TOK_PUNCT;
		p->end = i + 1;
		return 0;
	}
	return fail(p, i, "unexpected character '%c'", s[i]);
}

static int is_punct(const parser *p, const char *t)
{
	return p->kind == TOK_PUNCT && strcmp(p->punct, t) == 0;
}

static int is_word(const parser *p, const char *w)
{
	size_t n = strlen(w);

	return p->kind == TOK_IDENT && p->end - p->pos == n && memcmp(p->s + p->pos, w, n) == 0;
}

static int expect(parser *p, const char *t)
{
	if (!is_punct(p, t))
		return fail(p, p->pos, "expected '%s'", t);
	return next_token(p);
}

/* ---- nodes and type checks --------------------------------------------- */

static int new_node(parser *p, int op, expr_type type, size_t pos, int a, int b)
{
	if (p->n == p->cap) {
		int cap = p->cap ? p->cap * 2 : 16;
		node *nn = realloc(p->nodes, (size_t)cap * sizeof(*nn));

		if (!nn)
			return fail(p, pos, "out of memory");
		p->nodes = nn;
		p->cap = cap;
	}
	node *nd = &p->nodes[p->n];
	memset(nd, 0, sizeof(*nd));
	nd->op = (uint8_t)op;
	nd->type = (uint8_t)type;
	nd->pos = (int32_t)pos;
	nd->a = a;
	nd->b = b;
	nd->c = -1;
	nd->next = -1;
	return p->n++;
}

/* A node without children that carries an integer (a literal or a symbol index). */
static int leaf(parser *p, int op, expr_type type, size_t pos, int64_t v)
{
	int r = new_node(p, op, type, pos, -1, -1);

	if (r >= 0)
		p->nodes[r].v.i = v;
	return r;
}

static expr_type type_of(const parser *p, int n)
{
	return (expr_type)p->nodes[n].type;
}

static int is_num(expr_type t)
{
	return t == EXPR_T_INT || t == EXPR_T_FLOAT;
}

static int want(parser *p, int n, expr_type t, const char *what)
{
	if (n < 0)
		return -1;
	if (type_of(p, n) != t)
		return fail(p, (size_t)p->nodes[n].pos, "%s must be %s, not %s", what,
		            expr_type_name(t), expr_type_name(type_of(p, n)));
	return n;
}

static int want_num(parser *p, int n, const char *what)
{
	if (n < 0)
		return -1;
	if (!is_num(type_of(p, n)))
		return fail(p, (size_t)p->nodes[n].pos, "%s must be a number, not %s", what,
		            expr_type_name(type_of(p, n)));
	return n;
}

/* A tensor argument, or a list where a list will do. */
static int want_shape(parser *p, int n, const char *what)
{
	if (n < 0)
		return -1;
	if (type_of(p, n) == EXPR_T_TENSOR) {
		int s = new_node(p, N_SHAPE, EXPR_T_LIST, (size_t)p->nodes[n].pos, n, -1);
		return s;
	}
	return want(p, n, EXPR_T_LIST, what);
}

/* ---- grammar ------------------------------------------------------------ */

static int parse_expr(parser *p);

static int find_name(const char *const *names, int n, const char *s, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
			return i;
	return -1;
}

static int parse_args(parser *p, int *args, int max, int *count)
{
	*count = 0;
	if (expect(p, "(") < 0)
		return -1;
	if (is_punct(p, ")"))
		return next_token(p);
	for (;;) {
		if (*count == max)
			return fail(p, p->pos, "too many arguments");
		args[*count] = parse_expr(p);
		if (args[*count] < 0)
			return -1;
		(*count)++;
		if (is_punct(p, ")"))
			return next_token(p);
		if (expect(p, ",") < 0)
			return -1;
	}
}

static int link_args(parser *p, const int *args, int count)
{
	for (int i = 0; i + 1 < count; i++)
		p->nodes[args[i]].next = args[i + 1];
	return count ? args[0] : -1;
}

static int parse_call(parser *p, const char *name, size_t pos)
{
	int args[16], n, r;

	if (parse_args(p, args, 16, &n) < 0)
		return -1;
	if (!strcmp(name, "min") || !strcmp(name, "max")) {
		int op = name[1] == 'i' ? N_MIN : N_MAX;
		expr_type t = EXPR_T_INT;

		if (n == 1) {
			if (want(p, args[0], EXPR_T_LIST,
			         "the argument of a one-argument min/max") < 0)
				return -1;
		} else if (n < 2) {
			return fail(p, pos, "%s() needs a list or at least two numbers", name);
		}
		for (int i = 0; i < n && n > 1; i++) {
			if (want_num(p, args[i], "an argument of min/max") < 0)
				return -1;
			if (type_of(p, args[i]) == EXPR_T_FLOAT)
				t = EXPR_T_FLOAT;
		}
		r = new_node(p, op, t, pos, link_args(p, args, n), -1);
		if (r >= 0)
			p->nodes[r].v.i = n;
		return r;
	}
	static const struct {
		const char *name;
		int op, nargs;
		expr_type ret;
	} fns[] = {
		{ "product", N_PRODUCT, 1, EXPR_T_INT },
		{ "len", N_LEN, 1, EXPR_T_INT },
		{ "elem_bytes", N_ELEM_BYTES, 1, EXPR_T_INT },
		{ "ceil_div", N_CEIL_DIV, 2, EXPR_T_INT },
		{ "broadcastable", N_BROADCASTABLE, 2, EXPR_T_BOOL },
		{ "has", N_HAS, 1, EXPR_T_BOOL },
		{ "broadcast_shape", N_BROADCAST_SHAPE, 2, EXPR_T_LIST },
	};
	for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
		if (strcmp(name, fns[k].name))
			continue;
		if (n != fns[k].nargs)
			return fail(p, pos, "%s() takes %d argument%s, got %d", name, fns[k].nargs,
			            fns[k].nargs == 1 ? "" : "s", n);
		switch (fns[k].op) {
		case N_PRODUCT:
		case N_LEN:
			args[0] = want_shape(p, args[0], "the argument");
			break;
		case N_ELEM_BYTES:
		case N_HAS:
			args[0] = want(p, args[0], EXPR_T_TENSOR, "the argument");
			break;
		case N_CEIL_DIV:
			args[0] = want(p, args[0], EXPR_T_INT, "the first argument");
			args[1] = want(p, args[1], EXPR_T_INT, "the second argument");
			break;
		case N_BROADCASTABLE:
		case N_BROADCAST_SHAPE:
			args[0] = want_shape(p, args[0], "the first argument");
			args[1] = want_shape(p, args[1], "the second argument");
			break;
		}
		if (args[0] < 0 || (n > 1 && args[1] < 0))
			return -1;
		return new_node(p, fns[k].op, fns[k].ret, pos, args[0], n > 1 ? args[1] : -1);
	}
	return fail(p, pos, "unknown function '%s'", name);
}

static int parse_name(parser *p)
{
	const expr_scope *sc = p->scope;
	size_t pos = p->pos, len = p->end - p->pos;
	const char *s = p->s + pos;
	char name[64];
	int i;

	if (len >= sizeof(name))
		return fail(p, pos, "name too long");
	memcpy(name, s, len);
	name[len] = 0;
	if (next_token(p) < 0)
		return -1;
	if (!strcmp(name, "true") || !strcmp(name, "false"))
		return leaf(p, N_BOOL, EXPR_T_BOOL, pos, name[0] == 't');
	if (is_punct(p, "("))
		return parse_call(p, name, pos);
	if ((i = find_name(sc->tensors, sc->n_tensors, s, len)) >= 0) {
		p->tensors |= 1u << i;
		return leaf(p, N_TENSOR, EXPR_T_TENSOR, pos, i);
	}
	if ((i = find_name(sc->params, sc->n_params, s, len)) >= 0) {
		p->params |= 1u << i;
		return leaf(p, N_PARAM, sc->param_types[i], pos, i);
	}
	if ((i = find_name(sc->vars, sc->n_vars, s, len)) >= 0) {
		p->vars |= 1u << i;
		return leaf(p, N_VAR, sc->var_types[i], pos, i);
	}
	if (!strcmp(name, "elem_bytes")) {
		if (sc->n_tensors < 1)
			return fail(p, pos, "'elem_bytes' needs an op with an input");
		p->tensors |= 1u;
		return new_node(p, N_ELEM_BYTES0, EXPR_T_INT, pos, -1, -1);
	}
	return fail(p, pos, "unknown name '%s'", name);
}

static int parse_list(parser *p)
{
	size_t pos = p->pos;
	int args[TK_MAX_DIMS * 2], n = 0, r;

	if (next_token(p) < 0)
		return -1;
	while (!is_punct(p, "]")) {
		if (n == TK_MAX_DIMS * 2)
			return fail(p, p->pos, "list literal too long");
		args[n] = want(p, parse_expr(p), EXPR_T_INT, "a list element");
		if (args[n++] < 0)
			return -1;
		if (is_punct(p, "]"))
			break;
		if (expect(p, ",") < 0)
			return -1;
	}
	if (next_token(p) < 0)
		return -1;
	r = new_node(p, N_LIST, EXPR_T_LIST, pos, link_args(p, args, n), -1);
	if (r >= 0)
		p->nodes[r].v.i = n;
	return r;
}

static int parse_primary(parser *p)
{
	size_t pos = p->pos;
	int r;

	switch (p->kind) {
	case TOK_INT:
		r = leaf(p, N_INT, EXPR_T_INT, pos, p->ival);
		return r < 0 || next_token(p) < 0 ? -1 : r;
	case TOK_FLOAT:
		r = new_node(p, N_FLOAT, EXPR_T_FLOAT, pos, -1, -1);
		if (r >= 0)
			p->nodes[r].v.f = p->fval;
		return r < 0 || next_token(p) < 0 ? -1 : r;
	case TOK_IDENT:
		return parse_name(p);
	case TOK_PUNCT:
		if (is_punct(p, "(")) {
			if (next_token(p) < 0 || (r = parse_expr(p)) < 0 || expect(p, ")") < 0)
				return -1;
			return r;
		}
		if (is_punct(p, "["))
			return parse_list(p);
		return fail(p, pos, "unexpected '%s'", p->punct);
	default:
		return fail(p, pos, "unexpected end of expression");
	}
}

static int parse_subscript(parser *p, int base, size_t pos)
{
	int lo = -1, hi = -1;

	if (want(p, base, EXPR_T_LIST, "a subscripted value") < 0 || next_token(p) < 0)
		return -1;
	if (!is_punct(p, ":")) {
		lo = want(p, parse_expr(p), EXPR_T_INT, "an index");
		if (lo < 0)
			return -1;
		if (is_punct(p, "]")) {
			if (next_token(p) < 0)
				return -1;
			/* x.shape[k] with a literal k is the commonest form: one node. */
			if (p->nodes[base].op == N_SHAPE && p->nodes[lo].op == N_INT) {
				int r = leaf(p, N_DIM, EXPR_T_INT, pos, p->nodes[lo].v.i);
				if (r >= 0)
					p->nodes[r].a = p->nodes[base].a;
				return r;
			}
			return new_node(p, N_INDEX, EXPR_T_INT, pos, base, lo);
		}
	}
	if (expect(p, ":") < 0)
		return -1;
	if (!is_punct(p, "]") && (hi = want(p, parse_expr(p), EXPR_T_INT, "a slice bound")) < 0)
		return -1;
	if (expect(p, "]") < 0)
		return -1;
	int r = new_node(p, N_SLICE, EXPR_T_LIST, pos, base, lo);
	if (r >= 0)
		p->nodes[r].c = hi;
	return r;
}

static int parse_postfix(parser *p)
{
	int r = parse_primary(p);

	while (r >= 0) {
		size_t pos = p->pos;

		if (is_punct(p, "[")) {
			r = parse_subscript(p, r, pos);
		} else if (is_punct(p, ".")) {
			if (next_token(p) < 0)
				return -1;
			if (type_of(p, r) != EXPR_T_TENSOR)
				return fail(p, pos, "only a tensor has attributes");
			int op = is_word(p, "shape")   ? N_SHAPE
			         : is_word(p, "ndim")  ? N_NDIM
			         : is_word(p, "numel") ? N_NUMEL
			                               : -1;
			if (op < 0)
				return fail(p, p->pos,
				            "a tensor has .shape, .ndim and .numel only");
			if (next_token(p) < 0)
				return -1;
			r = new_node(p, op, op == N_SHAPE ? EXPR_T_LIST : EXPR_T_INT, pos, r, -1);
		} else {
			break;
		}
	}
	return r;
}

static int parse_unary(parser *p)
{
	size_t pos = p->pos;

	if (is_punct(p, "-")) {
		if (next_token(p) < 0)
			return -1;
		int a = want_num(p, parse_unary(p), "the operand of unary -");
		if (a >= 0 && p->nodes[a].op == N_INT && p->nodes[a].v.i != INT64_MIN) {
			p->nodes[a].v.i = -p->nodes[a].v.i; /* fold -1 into a literal */
			p->nodes[a].pos = (int32_t)pos;
			return a;
		}
		return a < 0 ? -1 : new_node(p, N_NEG, type_of(p, a), pos, a, -1);
	}
	return parse_postfix(p);
}

static int arith(parser *p, int op, size_t pos, int a, int b)
{
	expr_type ta, tb;

	if (a < 0 || b < 0)
		return -1;
	ta = type_of(p, a);
	tb = type_of(p, b);
	if (op == N_ADD && ta == EXPR_T_LIST && tb == EXPR_T_LIST)
		return new_node(p, N_ADD, EXPR_T_LIST, pos, a, b);
	if (op == N_IDIV || op == N_MOD) {
		if (want(p, a, EXPR_T_INT, "an operand of // and %") < 0 ||
		    want(p, b, EXPR_T_INT, "an operand of // and %") < 0)
			return -1;
		return new_node(p, op, EXPR_T_INT, pos, a, b);
	}
	if (want_num(p, a, "an operand of arithmetic") < 0 ||
	    want_num(p, b, "an operand of arithmetic") < 0)
		return -1;
	if (op == N_DIV || ta == EXPR_T_FLOAT || tb == EXPR_T_FLOAT)
		return new_node(p, op, EXPR_T_FLOAT, pos, a, b);
	return new_node(p, op, EXPR_T_INT, pos, a, b);
}

static int parse_term(parser *p)
{
	int r = parse_unary(p);

	while (r >= 0) {
		size_t pos = p->pos;
		int op = is_punct(p, "*")    ? N_MUL
		         : is_punct(p, "/")  ? N_DIV
		         : is_punct(p, "//") ? N_IDIV
		         : is_punct(p, "%")  ? N_MOD
		                             : -1;
		if (op < 0)
			break;
		if (next_token(p) < 0)
			return -1;
		r = arith(p, op, pos, r, parse_unary(p));
	}
	return r;
}

static int parse_sum(parser *p)
{
	int r = parse_term(p);

	while (r >= 0 && (is_punct(p, "+") || is_punct(p, "-"))) {
		size_t pos = p->pos;
		int op = is_punct(p, "+") ? N_ADD : N_SUB;

		if (next_token(p) < 0)
			return -1;
		r = arith(p, op, pos, r, parse_term(p));
	}
	return r;
}

static int cmp_op(const parser *p)
{
	static const char *const names[] = { "==", "!=", "<", "<=", ">", ">=" };
	static const int ops[] = { N_EQ, N_NE, N_LT, N_LE, N_GT, N_GE };

	for (int i = 0; i < 6; i++)
		if (is_punct(p, names[i]))
			return ops[i];
	return -1;
}

static int parse_cmp(parser *p)
{
	int a = parse_sum(p), b, op;
	size_t pos = p->pos;
	expr_type ta, tb;

	if (a < 0 || (op = cmp_op(p)) < 0)
		return a;
	if (next_token(p) < 0 || (b = parse_sum(p)) < 0)
		return -1;
	if (cmp_op(p) >= 0)
		return fail(p, p->pos, "chained comparisons are not supported; use 'and'");
	ta = type_of(p, a);
	tb = type_of(p, b);
	if (is_num(ta) && is_num(tb))
		return new_node(p, op, EXPR_T_BOOL, pos, a, b);
	if (ta == tb && (ta == EXPR_T_LIST || ta == EXPR_T_BOOL) && (op == N_EQ || op == N_NE))
		return new_node(p, op, EXPR_T_BOOL, pos, a, b);
	return fail(p, pos, "cannot compare %s with %s using '%s'", expr_type_name(ta),
	            expr_type_name(tb), p->s[pos] == '!' || p->s[pos] == '=' ? "==/!=" : "<, >");
}

static int parse_not(parser *p)
{
	size_t pos = p->pos;

	if (is_word(p, "not")) {
		if (next_token(p) < 0)
			return -1;
		int a = want(p, parse_not(p), EXPR_T_BOOL, "the operand of 'not'");
		return a < 0 ? -1 : new_node(p, N_NOT, EXPR_T_BOOL, pos, a, -1);
	}
	return parse_cmp(p);
}

static int parse_logic(parser *p, const char *word, int op, int (*sub)(parser *))
{
	int r = sub(p);

	while (r >= 0 && is_word(p, word)) {
		size_t pos = p->pos;

		if (want(p, r, EXPR_T_BOOL, "an operand of 'and'/'or'") < 0 || next_token(p) < 0)
			return -1;
		int b = want(p, sub(p), EXPR_T_BOOL, "an operand of 'and'/'or'");
		r = b < 0 ? -1 : new_node(p, op, EXPR_T_BOOL, pos, r, b);
	}
	return r;
}

static int parse_and(parser *p)
{
	return parse_logic(p, "and", N_AND, parse_not);
}

static int parse_or(parser *p)
{
	return parse_logic(p, "or", N_OR, parse_and);
}

static int parse_expr(parser *p)
{
	int a = parse_or(p), c, b, r;
	size_t pos = p->pos;
	expr_type ta, tb, t;

	if (a < 0 || !is_word(p, "if"))
		return a;
	if (next_token(p) < 0 || (c = want(p, parse_or(p), EXPR_T_BOOL, "a condition")) < 0)
		return -1;
	if (!is_word(p, "else"))
		return fail(p, p->pos, "expected 'else'");
	if (next_token(p) < 0 || (b = parse_expr(p)) < 0)
		return -1;
	ta = type_of(p, a);
	tb = type_of(p, b);
	if (ta == tb && ta != EXPR_T_TENSOR)
		t = ta;
	else if (is_num(ta) && is_num(tb))
		t = EXPR_T_FLOAT;
	else
		return fail(p, pos, "both branches of 'if' must have one type (%s, %s)",
		            expr_type_name(ta), expr_type_name(tb));
	r = new_node(p, N_COND, t, pos, a, b);
	if (r >= 0)
		p->nodes[r].c = c;
	return r;
}

int expr_parse(const char *src, const expr_scope *scope, expr **out, int *col, char *err,
               size_t errlen)
{
	parser p;
	expr *e;
	int root;

	memset(&p, 0, sizeof(p));
	p.s = src ? src : "";
	p.scope = scope;
	p.err = err;
	p.errlen = errlen;
	*out = NULL;
	root = next_token(&p) < 0 ? -1 : parse_expr(&p);
	if (root >= 0 && p.kind != TOK_END)
		root = fail(&p, p.pos, "unexpected text after the expression");
	if (root >= 0 && type_of(&p, root) == EXPR_T_TENSOR)
		root = fail(&p, 0, "a bare tensor is not a value; use .shape, .numel or .ndim");
	e = root >= 0 ? calloc(1, sizeof(*e)) : NULL;
	if (e)
		e->text = strdup(p.s);
	if (root >= 0 && (!e || !e->text))
		root = fail(&p, 0, "out of memory");
	if (root < 0) {
		if (e)
			free(e->text);
		free(e);
		free(p.nodes);
		if (col)
			*col = (int)p.err_pos + 1;
		return -1;
	}
	e->nodes = p.nodes;
	e->n = p.n;
	e->root = root;
	e->tensors = p.tensors;
	e->params = p.params;
	e->vars = p.vars;
	*out = e;
	return 0;
}
