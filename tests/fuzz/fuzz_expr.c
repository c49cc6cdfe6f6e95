/*
 * fuzz_expr.c - the expression language: any text is parsed against a
 * scope like an op's (two tensors, params of each type, vars), and what
 * parses is evaluated over tensors of several ranks, including empty and
 * huge extents. Parse errors and evaluation errors are fine; crashes,
 * sanitizer reports and hangs are not.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tensors[] = { "x", "weight", "out" };
	static const char *const params[] = { "eps", "dim", "causal" };
	static const expr_type ptypes[] = { EXPR_T_FLOAT, EXPR_T_INT, EXPR_T_BOOL };
	static const char *const vars[] = { "n", "d" };
	static const expr_type vtypes[] = { EXPR_T_INT, EXPR_T_INT };
	const expr_scope scope = { tensors, 3, params, ptypes, 3, vars, vtypes, 2 };
	if (size > 4096)
		return 0;
	char *src = malloc(size + 1);
	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = '\0';
	expr *e = NULL;
	int col = 0;
	char err[256];
	if (expr_parse(src, &scope, &e, &col, err, sizeof(err)) == 0) {
		tk_tensor x = { .dtype = TK_F32, .ndim = 3, .shape = { 0, INT64_MAX / 2, 7 } };
		tk_tensor w = { .dtype = TK_BF16, .ndim = 1, .shape = { 4096 } };
		tk_tensor o = { .dtype = TK_F16, .ndim = 0 };
		const tk_tensor *ts[3] = { &x, &w, &o };
		tk_param ps[3] = { { .kind = TK_PARAM_FLOAT, .v.f = 1e-6 },
			           { .kind = TK_PARAM_INT, .v.i = -1 },
			           { .kind = TK_PARAM_BOOL, .v.b = 1 } };
		expr_value vs[2] = { { .type = EXPR_T_INT, .v.i = INT64_MIN },
			             { .type = EXPR_T_INT, .v.i = 128 } };
		expr_env env;
		memset(&env, 0, sizeof(env));
		env.tensors = ts;
		env.n_tensors = 3;
		env.params = ps;
		env.n_params = 3;
		env.vars = vs;
		env.n_vars = 2;
		expr_value v;
		(void)expr_eval(e, &env, &v, err, sizeof(err));
		ts[1] = NULL; /* an optional tensor left out */
		(void)expr_eval(e, &env, &v, err, sizeof(err));
		expr_free(e);
	}
	free(src);
	return 0;
}
