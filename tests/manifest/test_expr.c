/*
 * test_expr.c - the manifest's expression language: precedence, tensor
 * attributes, functions, parse errors with columns, evaluation errors.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "expr.h"

static const char *const tensor_names[] = { "x", "y", "bias" };
static const char *const param_names[] = { "eps", "n", "flag" };
static const expr_type param_types[] = { EXPR_T_FLOAT, EXPR_T_INT, EXPR_T_BOOL };
static const char *const var_names[] = { "rows" };
static const expr_type var_types[] = { EXPR_T_INT };
static const expr_scope scope = { tensor_names, 3, param_names, param_types, 3, var_names,
	                          var_types,    1 };

static tk_tensor tx, ty;
static const tk_tensor *tensors[3];
static tk_param params[3];
static expr_value vars[1];

static void setup(void)
{
	memset(&tx, 0, sizeof(tx));
	memset(&ty, 0, sizeof(ty));
	tx.dtype = TK_BF16;
	tx.ndim = 3;
	tx.shape[0] = 2;
	tx.shape[1] = 3;
	tx.shape[2] = 4;
	ty.dtype = TK_F32;
	ty.ndim = 2;
	ty.shape[0] = 3;
	ty.shape[1] = 1;
	tensors[0] = &tx;
	tensors[1] = &ty;
	tensors[2] = NULL; /* bias: an absent optional tensor */
	params[0] = (tk_param){ .kind = TK_PARAM_FLOAT, .v.f = 1e-6 };
	params[1] = (tk_param){ .kind = TK_PARAM_INT, .v.i = 5 };
	params[2] = (tk_param){ .kind = TK_PARAM_BOOL, .v.b = 1 };
	vars[0] = (expr_value){ .type = EXPR_T_INT, .v.i = 6 };
}

static expr_value eval_ok(const char *src)
{
	expr_env env = { tensors, 3, params, 3, vars, 1, 0, { 0 } };
	char err[256] = "";
	expr_value v;
	expr *e = NULL;
	int col = 0;

	cr_assert_eq(expr_parse(src, &scope, &e, &col, err, sizeof(err)), 0,
	             "parse '%s': col %d: %s", src, col, err);
	cr_assert_eq(expr_eval(e, &env, &v, err, sizeof(err)), 0, "eval '%s': %s", src, err);
	expr_free(e);
	return v;
}

static void is_true(const char *src)
{
	expr_value v = eval_ok(src);

	cr_assert_eq(v.type, EXPR_T_BOOL, "'%s' is not bool", src);
	cr_assert(v.v.b, "'%s' is false", src);
}

static int64_t int_of(const char *src)
{
	expr_value v = eval_ok(src);

	cr_assert_eq(v.type, EXPR_T_INT, "'%s' is %s, not int", src, expr_type_name(v.type));
	return v.v.i;
}

TestSuite(expr, .init = setup);

Test(expr, arithmetic_follows_python_precedence)
{
	cr_assert_eq(int_of("1 + 2 * 3"), 7);
	cr_assert_eq(int_of("(1 + 2) * 3"), 9);
	cr_assert_eq(int_of("-2 * 3 + 10"), 4);
	cr_assert_eq(int_of("2 - 3 - 4"), -5);
	cr_assert_eq(int_of("7 // 2"), 3);
	cr_assert_eq(int_of("-7 // 2"), -4);
	cr_assert_eq(int_of("-7 % 3"), 2);
	cr_assert_float_eq(eval_ok("7 / 2").v.f, 3.5, 1e-12);
	cr_assert_float_eq(eval_ok("1 + 0.5").v.f, 1.5, 1e-12);
	is_true("not 1 > 2 and 2 > 1");
	is_true("1 > 2 or 2 > 1 and 3 > 2");
	is_true("not (1 > 2 or 2 > 1) or true");
	cr_assert_eq(int_of("1 if 2 > 1 else 2"), 1);
	cr_assert_eq(int_of("1 if false else 2 if false else 3"), 3);
}

Test(expr, tensor_attributes_and_negative_indices)
{
	cr_assert_eq(int_of("x.shape[-1]"), 4);
	cr_assert_eq(int_of("x.shape[-3]"), 2);
	cr_assert_eq(int_of("x.shape[0]"), 2);
	cr_assert_eq(int_of("x.ndim"), 3);
	cr_assert_eq(int_of("x.numel"), 24);
	cr_assert_eq(int_of("product(x.shape[:-1])"), 6);
	cr_assert_eq(int_of("product([2, 5])"), 10);
	cr_assert_eq(int_of("len(x.shape[1:])"), 2);
	cr_assert_eq(int_of("len(x)"), 3);
	is_true("x.shape[:-1] + [5] == [2, 3, 5]");
	is_true("x.shape[5:] == []");
	is_true("x.shape != y.shape");
}

Test(expr, functions_params_and_vars)
{
	cr_assert_eq(int_of("min(3, 1, 2)"), 1);
	cr_assert_eq(int_of("max(x.shape)"), 4);
	cr_assert_eq(int_of("ceil_div(7, 2)"), 4);
	cr_assert_eq(int_of("ceil_div(8, 2)"), 4);
	cr_assert_eq(int_of("elem_bytes"), 2);
	cr_assert_eq(int_of("elem_bytes(y)"), 4);
	cr_assert_eq(int_of("n * rows"), 30);
	cr_assert_float_eq(eval_ok("max(eps, 1)").v.f, 1.0, 1e-12);
	is_true("eps > 0 and flag");
	is_true("broadcastable(y, x)");
	is_true("not broadcastable(x, y)");
	is_true("broadcastable([4], x) and not broadcastable([3], x)");
	is_true("not has(bias) and has(x)");
	is_true("not has(bias) or bias.shape[0] == 3");
}

static void parse_fails(const char *src, int want_col, const char *want_msg)
{
	char err[256] = "";
	expr *e = NULL;
	int col = 0;

	cr_assert_eq(expr_parse(src, &scope, &e, &col, err, sizeof(err)), -1, "'%s' parsed", src);
	cr_assert_null(e);
	cr_assert_eq(col, want_col, "'%s': column %d, expected %d (%s)", src, col, want_col, err);
	cr_assert(strstr(err, want_msg), "'%s': message '%s' lacks '%s'", src, err, want_msg);
}

Test(expr, parse_errors_name_the_column)
{
	parse_fails("1 + * 2", 5, "unexpected '*'");
	parse_fails("foo + 1", 1, "unknown name 'foo'");
	parse_fails("x.shape[-1] + true", 15, "must be a number");
	parse_fails("1 < 2 < 3", 7, "chained comparisons");
	parse_fails("x.shape[", 9, "unexpected end");
	parse_fails("x.size", 3, ".shape, .ndim and .numel");
	parse_fails("nosuch(1)", 1, "unknown function 'nosuch'");
	parse_fails("ceil_div(1)", 1, "takes 2 arguments");
	parse_fails("1 + 2)", 6, "unexpected text");
	parse_fails("2 $ 3", 3, "unexpected character '$'");
	parse_fails("x", 1, "bare tensor");
	parse_fails("1 if true else x.shape", 3, "one type");
}

static void eval_fails(const char *src, const char *want_msg)
{
	expr_env env = { tensors, 3, params, 3, vars, 1, 0, { 0 } };
	char err[256] = "";
	expr_value v;
	expr *e = NULL;

	cr_assert_eq(expr_parse(src, &scope, &e, NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(expr_eval(e, &env, &v, err, sizeof(err)), -1, "'%s' evaluated", src);
	cr_assert(strstr(err, want_msg), "'%s': message '%s' lacks '%s'", src, err, want_msg);
	cr_assert(strstr(err, src), "message '%s' does not quote the expression", err);
	expr_free(e);
}

Test(expr, evaluation_errors_are_reported_not_crashes)
{
	eval_fails("x.shape[3] == 1", "index 3 is out of range for a list of length 3");
	eval_fails("x.shape[-4] == 1", "index -4 is out of range");
	eval_fails("n // (n - 5)", "division by zero");
	eval_fails("n % 0", "division by zero");
	eval_fails("eps / 0", "division by zero");
	eval_fails("ceil_div(n, 0)", "division by zero");
	eval_fails("bias.shape[0]", "'bias' is absent");
	eval_fails("9223372036854775807 + n", "integer overflow");
	eval_fails("min([])", "empty list");
}

Test(expr, parse_records_names_used_and_type)
{
	expr *e = NULL;

	cr_assert_eq(expr_parse("[x.shape[-1], n]", &scope, &e, NULL, NULL, 0), 0);
	cr_assert_eq(expr_result_type(e), EXPR_T_LIST);
	cr_assert(expr_is_list_literal(e));
	cr_assert_eq(expr_tensors_used(e), 1u);
	cr_assert_eq(expr_params_used(e), 2u);
	cr_assert_str_eq(expr_text(e), "[x.shape[-1], n]");
	expr_free(e);
	expr_free(NULL);
}
