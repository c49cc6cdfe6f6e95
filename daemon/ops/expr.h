/*
 * expr.h - the manifest's expression language.
 *
 * Shape rules, output shapes, kernel conditions and roofline formulas are
 * written in one small, Python-like language:
 *
 *   literals      1  2.5  1e-6  true  false  [a, b, c]
 *   arithmetic    + - * / // % and unary -   (/ always gives a float;
 *                 // and % are integer floor division and modulo)
 *   lists         list + list (concatenation), list[i] (negative i counts
 *                 from the end), list[a:b] (slices, Python rules)
 *   comparisons   == != < <= > >=   (lists and bools: == and != only)
 *   logic         and or not, and `a if cond else b`; and/or short-circuit
 *   tensors       x.shape  x.ndim  x.numel
 *   functions     product(list) len(list) min(...) max(...) ceil_div(a, b)
 *                 elem_bytes(x)  has(x)  broadcastable(a, b)
 *   names         tensors, params and roofline vars of the op; a bare
 *                 `elem_bytes` is the element size of the op's first input.
 *
 * Every expression is parsed once, when the manifest loads, into a typed
 * AST: types are checked then, so evaluation can fail only on values
 * (division by zero, an index out of range, an absent optional tensor,
 * integer overflow). Evaluation allocates nothing: list results live in a
 * scratch area inside the caller's expr_env.
 *
 * Ownership: expr_parse allocates the expr; expr_free releases it (NULL is
 * a no-op). Thread safety: a parsed expr is immutable; any number of threads
 * may evaluate it at once, each with its own expr_env.
 */
#ifndef TILEOPS_EXPR_H
#define TILEOPS_EXPR_H

#include <stddef.h>
#include <stdint.h>

#include "tileops_kernels.h"

/* Static types of expressions and values. */
typedef enum expr_type {
	EXPR_T_NONE = 0,
	EXPR_T_INT,
	EXPR_T_FLOAT,
	EXPR_T_BOOL,
	EXPR_T_LIST,  /* a list of integers, e.g. a shape */
	EXPR_T_TENSOR /* a bare tensor name: only an argument of some functions */
} expr_type;

/* Elements of lists built during one evaluation (literals, concatenation). */
#define EXPR_SCRATCH 128

/* Most symbols of each kind a scope may name (bitmasks record their use). */
#define EXPR_MAX_SYMBOLS 32

typedef struct expr_value {
	expr_type type;
	union {
		int64_t i;
		double f;
		int b;
		struct {
			const int64_t *p;
			int n;
		} l;
	} v;
} expr_value;

/* The names an expression may use, resolved at parse time to indices. */
typedef struct expr_scope {
	const char *const *tensors; /* inputs then outputs */
	int n_tensors;
	const char *const *params;
	const expr_type *param_types; /* INT, FLOAT or BOOL */
	int n_params;
	const char *const *vars;
	const expr_type *var_types; /* INT, FLOAT or BOOL */
	int n_vars;
} expr_scope;

/* What one evaluation sees. Zero-initialise, then set the arrays. */
typedef struct expr_env {
	const tk_tensor *const *tensors; /* by scope index; NULL: absent optional */
	int n_tensors;
	const tk_param *params; /* by scope index */
	int n_params;
	const expr_value *vars; /* by scope index */
	int n_vars;
	int top; /* used part of scratch; reset by expr_eval */
	int64_t scratch[EXPR_SCRATCH];
} expr_env;

typedef struct expr expr;

/*
 * Parse `src` against `scope`. On success returns 0 and sets *out. On
 * failure returns -1, sets *col to the 1-based column of the offending
 * character within src and writes a message to err (without the column).
 */
int expr_parse(const char *src, const expr_scope *scope, expr **out, int *col, char *err,
               size_t errlen);

void expr_free(expr *e);

/* The expression's type, as checked at parse time. */
expr_type expr_result_type(const expr *e);
/* The source text, as given to expr_parse. */
const char *expr_text(const expr *e);
/* Bitmasks of the scope's tensors / params / vars the expression names. */
uint32_t expr_tensors_used(const expr *e);
uint32_t expr_params_used(const expr *e);
uint32_t expr_vars_used(const expr *e);
/* 1 when the whole expression is a list literal [a, b, ...]. */
int expr_is_list_literal(const expr *e);

/*
 * Evaluate `e` in `env`. Returns 0 and sets *out, or -1 with a message in
 * err. A list result points into env->scratch: copy it before the next
 * evaluation with the same env.
 */
int expr_eval(const expr *e, expr_env *env, expr_value *out, char *err, size_t errlen);

/* "int", "float", "bool", "list", "tensor". */
const char *expr_type_name(expr_type t);

#endif /* TILEOPS_EXPR_H */
