/*
 * test_elementwise.c - the CPU references of the elementwise family (unary
 * math and activations, binary ops with numpy broadcasting, the gated
 * activations) against formulas written here in double precision from the
 * definitions (PyTorch's semantics): odd widths, single and padded rows,
 * broadcasting in every direction, every float dtype, the NaN rules,
 * refusals, and zero rows.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

static const char *const unary_ops[] = { "exp",       "log",        "sqrt",    "rsqrt", "abs",
	                                 "neg",       "reciprocal", "sigmoid", "tanh",  "erf",
	                                 "relu",      "gelu",       "silu",    "mish",  "softplus",
	                                 "hardswish", "leaky_relu", "clamp",   NULL };
static const char *const binary_ops[] = { "add",     "sub",     "mul", "div",
	                                  "maximum", "minimum", "pow", NULL };

static const int64_t widths[] = { 1, 7, 4095 };

/* The input range an op is defined on (its domain), for random fills. */
static void domain(const char *op, int input, double *lo, double *hi)
{
	*lo = -3.0;
	*hi = 3.0;
	if (!strcmp(op, "log") || !strcmp(op, "sqrt") || !strcmp(op, "rsqrt") ||
	    !strcmp(op, "reciprocal")) {
		*lo = 0.1;
		*hi = 4.0;
	} else if ((!strcmp(op, "div") && input == 1) || !strcmp(op, "pow")) {
		*lo = 0.5;
		*hi = input == 1 ? 2.5 : 3.0;
	}
}

/*
 * A call of op over x [rows, width] (unary), a [rows, width] with b of a's
 * shape or (variant 1) one broadcast row (binary), x [rows, 2 width]
 * (gated); `pad` extra elements after every row, the outputs' rows padded
 * by pad + 2. Variants also pick params: gelu's form, softplus's beta and
 * threshold, leaky_relu's slope, clamp's upper bound.
 */
static void build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                  int variant, uint64_t *rng)
{
	int64_t shape[2] = { rows, width }, w1[1] = { width };
	int64_t opad = pad ? pad + 2 : 0;
	double lo, hi;

	memset(c, 0, sizeof(*c));
	c->n_in = 1;
	c->n_out = 1;
	if (ref_in_list(unary_ops, op)) {
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (!strcmp(op, "gelu")) {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant & 1);
		} else if (!strcmp(op, "softplus")) {
			c->n_params = 2;
			c->params[0] = tt_param_float(variant ? 2.0 : 1.0);
			c->params[1] = tt_param_float(variant ? 3.0 : 20.0);
		} else if (!strcmp(op, "leaky_relu")) {
			c->n_params = 1;
			c->params[0] = tt_param_float(variant ? 0.2 : 0.01);
		} else if (!strcmp(op, "clamp")) {
			c->n_params = 2;
			c->params[0] = tt_param_float(-1.5);
			c->params[1] = tt_param_float(variant ? INFINITY : 0.75);
		}
	} else if (ref_in_list(binary_ops, op)) {
		c->n_in = 2;
		c->in[0] = tt_tensor(dt, 2, shape, pad);
		c->in[1] =
		        variant == 1 ? tt_tensor(dt, 1, w1, 0) : tt_tensor(dt, 2, shape, pad + 1);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
	} else {
		int64_t s2[2] = { rows, 2 * width };
		c->in[0] = tt_tensor(dt, 2, s2, pad);
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (op[0] == 'g') {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant & 1);
		}
	}
	for (int i = 0; i < c->n_in; i++) {
		domain(op, i, &lo, &hi);
		tt_fill(&c->in[i], rng, lo, hi);
	}
}

/* Logical index into `t` of out's element i under numpy broadcasting. */
static int64_t bcast_index(const tk_tensor *out, const tk_tensor *t, int64_t i)
{
	int64_t idx = 0, mult = 1;
	int lead = out->ndim - t->ndim;

	for (int d = out->ndim - 1; d >= 0; d--) {
		int64_t c = i % out->shape[d];
		i /= out->shape[d];
		if (d < lead)
			continue;
		if (t->shape[d - lead] != 1)
			idx += c * mult;
		mult *= t->shape[d - lead];
	}
	return idx;
}

/* ---- unary ------------------------------------------------------------------------ */

static double softplus_ref(double x, double beta, double th)
{
	return beta * x > th ? x : log(1.0 + exp(beta * x)) / beta;
}

/* A param as a number (the cases use INT and FLOAT params). */
static double pnum(const tk_call *c, int i)
{
	if (i >= c->n_params)
		return 0.0;
	return c->params[i].kind == TK_PARAM_INT ? (double)c->params[i].v.i : c->params[i].v.f;
}

static double unary_ref(const char *op, double x, const tk_call *c)
{
	double p0 = pnum(c, 0), p1 = pnum(c, 1);

	if (!strcmp(op, "exp"))
		return exp(x);
	if (!strcmp(op, "log"))
		return log(x);
	if (!strcmp(op, "sqrt"))
		return sqrt(x);
	if (!strcmp(op, "rsqrt"))
		return 1.0 / sqrt(x);
	if (!strcmp(op, "abs"))
		return fabs(x);
	if (!strcmp(op, "neg"))
		return -x;
	if (!strcmp(op, "reciprocal"))
		return 1.0 / x;
	if (!strcmp(op, "sigmoid"))
		return 1.0 / (1.0 + exp(-x));
	if (!strcmp(op, "tanh"))
		return tanh(x);
	if (!strcmp(op, "erf"))
		return erf(x);
	if (!strcmp(op, "relu"))
		return x > 0 ? x : 0;
	if (!strcmp(op, "gelu"))
		return p0 != 0 ? 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
		               : 0.5 * x * (1 + erf(x / sqrt(2.0)));
	if (!strcmp(op, "silu"))
		return x / (1 + exp(-x));
	if (!strcmp(op, "mish"))
		return x * tanh(softplus_ref(x, 1, 20));
	if (!strcmp(op, "softplus"))
		return softplus_ref(x, p0, p1);
	if (!strcmp(op, "hardswish"))
		return x * fmin(fmax(x + 3, 0), 6) / 6;
	if (!strcmp(op, "leaky_relu"))
		return x >= 0 ? x : p0 * x;
	return fmin(fmax(x, p0), p1); /* clamp */
}

Test(unary, every_op_matches_its_formula_on_odd_widths_and_strided_rows)
{
	for (const char *const *op = unary_ops; *op != NULL; op++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 2; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x1234567u + (uint64_t)(k * 31 + w * 7 + v);
					tk_call c;
					build(&c, *op, dt, 3, widths[w], v * 3, v, &rng);
					ref_run(*op, &c);
					double *want = ref_want(&c.out[0]);
					for (int64_t i = 0; i < tk_numel(&c.out[0]); i++)
						want[i] = unary_ref(*op, tt_get(&c.in[0], i), &c);
					cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt),
					              "%s %s width %ld variant %d", *op,
					              tk_dtype_name(dt), (long)widths[w], v);
					free(want);
					ref_free_call(&c);
				}
			}
		}
	}
}

Test(unary, clamp_and_relu_keep_nan_and_clamp_saturates)
{
	int64_t s[1] = { 3 };
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = 2 };

	c.in[0] = tt_tensor(TK_F32, 1, s, 0);
	c.out[0] = tt_tensor(TK_F32, 1, s, 0);
	((float *)c.in[0].data)[0] = NAN;
	((float *)c.in[0].data)[1] = -7.0f;
	((float *)c.in[0].data)[2] = 9.0f;
	c.params[0] = tt_param_float(-1.0);
	c.params[1] = tt_param_float(2.0);
	ref_run("clamp", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]));
	cr_expect_eq(((float *)c.out[0].data)[1], -1.0f);
	cr_expect_eq(((float *)c.out[0].data)[2], 2.0f);
	c.n_params = 0;
	ref_run("relu", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]));
	cr_expect_eq(((float *)c.out[0].data)[1], 0.0f);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

static double ref_silu(double x)
{
	return x / (1.0 + exp(-x));
}

static double ref_gelu_erf(double x)
{
	return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double ref_gelu_tanh(double x)
{
	return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* op over x [rows, width] in [-6, 6], rows padded by pad (the output's by 2 pad). */
static void check_unary(const char *op, double (*ref)(double), int n_params, tk_param p,
                        tk_dtype dt, int64_t rows, int64_t width, int64_t pad)
{
	uint64_t rng = ref_seed(op) ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[2] = { rows, width };
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = n_params };

	c.params[0] = p;
	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad * 2);
	tt_fill(&c.in[0], &rng, -6.0, 6.0);
	cr_assert_eq(ref_entry(op)->cpu(&c), TK_OK);
	int64_t n = rows * width;
	double *want = malloc(sizeof(double) * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		want[i] = ref(tt_get(&c.in[0], i));
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "%s %s %ldx%ld pad %ld", op,
	              tk_dtype_name(dt), (long)rows, (long)width, (long)pad);
	free(want);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

Test(silu, matches_double_arithmetic_on_odd_widths_and_strided_rows)
{
	tk_param none = { 0 };

	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < 3; w++) {
			check_unary("silu", ref_silu, 0, none, tt_float_dtypes[k], 5, widths[w], 0);
			check_unary("silu", ref_silu, 0, none, tt_float_dtypes[k], 5, widths[w], 3);
		}
	}
}

Test(gelu, exact_and_tanh_forms_match_double_arithmetic)
{
	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < 3; w++) {
			tk_dtype dt = tt_float_dtypes[k];
			check_unary("gelu", ref_gelu_erf, 1, tt_param_int(0), dt, 4, widths[w], 1);
			check_unary("gelu", ref_gelu_tanh, 1, tt_param_int(1), dt, 4, widths[w], 1);
		}
	}
}

Test(gelu, exact_and_tanh_forms_differ)
{
	static const int64_t s[] = { 1 };
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = 1 };
	float e, t;

	c.in[0] = tt_tensor(TK_F32, 1, s, 0);
	c.out[0] = tt_tensor(TK_F32, 1, s, 0);
	((float *)c.in[0].data)[0] = 1.5f;
	c.params[0] = tt_param_int(0);
	cr_assert_eq(ref_entry("gelu")->cpu(&c), TK_OK);
	e = ((float *)c.out[0].data)[0];
	c.params[0] = tt_param_int(1);
	cr_assert_eq(ref_entry("gelu")->cpu(&c), TK_OK);
	t = ((float *)c.out[0].data)[0];
	cr_expect_float_eq(e, (float)ref_gelu_erf(1.5), 1e-6);
	cr_expect_float_eq(t, (float)ref_gelu_tanh(1.5), 1e-6);
	cr_expect_neq(e, t);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

/* ---- binary -------------------------------------------------------------------------- */

static double binary_ref(const char *op, double a, double b)
{
	if (!strcmp(op, "add"))
		return a + b;
	if (!strcmp(op, "sub"))
		return a - b;
	if (!strcmp(op, "mul"))
		return a * b;
	if (!strcmp(op, "div"))
		return a / b;
	if (!strcmp(op, "maximum"))
		return fmax(a, b);
	if (!strcmp(op, "minimum"))
		return fmin(a, b);
	return pow(a, b);
}

Test(binary, every_op_matches_its_formula_with_a_broadcast_row_and_strided_rows)
{
	for (const char *const *op = binary_ops; *op != NULL; op++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 2; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x51u + (uint64_t)(k * 31 + w * 7 + v);
					int64_t wd = widths[w];
					tk_call c;
					build(&c, *op, dt, 4, wd, v * 2, v, &rng);
					ref_run(*op, &c);
					double *want = ref_want(&c.out[0]);
					for (int64_t i = 0; i < tk_numel(&c.out[0]); i++) {
						double b = tt_get(&c.in[1], v == 1 ? i % wd : i);
						want[i] = binary_ref(*op, tt_get(&c.in[0], i), b);
					}
					cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt),
					              "%s %s width %ld variant %d", *op,
					              tk_dtype_name(dt), (long)wd, v);
					free(want);
					ref_free_call(&c);
				}
			}
		}
	}
}

Test(binary, maximum_and_minimum_propagate_nan)
{
	int64_t s[1] = { 2 };
	tk_call c = { .n_in = 2, .n_out = 1 };

	c.in[0] = tt_tensor(TK_F32, 1, s, 0);
	c.in[1] = tt_tensor(TK_F32, 1, s, 0);
	c.out[0] = tt_tensor(TK_F32, 1, s, 0);
	((float *)c.in[0].data)[0] = NAN;
	((float *)c.in[0].data)[1] = 1.0f;
	((float *)c.in[1].data)[0] = 5.0f;
	((float *)c.in[1].data)[1] = NAN;
	ref_run("maximum", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]) && isnan(((float *)c.out[0].data)[1]));
	ref_run("minimum", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]) && isnan(((float *)c.out[0].data)[1]));
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

static double ref_add(double a, double b)
{
	return a + b;
}

static double ref_mul(double a, double b)
{
	return a * b;
}

typedef double (*ref_binary)(double, double);

/* out = op(a, b) with a of shape sa, b of shape sb, rows padded by `pad`. */
static void check_binary(const char *op, ref_binary ref, tk_dtype dt, int nda, const int64_t *sa,
                         int ndb, const int64_t *sb, int64_t pad)
{
	uint64_t rng = ref_seed(op) ^ (uint64_t)(nda * 131 + ndb * 7 + pad + dt);
	tk_call c = { .n_in = 2, .n_out = 1 };
	int ndo = nda > ndb ? nda : ndb;
	int64_t so[TK_MAX_DIMS];

	for (int d = 0; d < ndo; d++) {
		int da = d - (ndo - nda), db = d - (ndo - ndb);
		int64_t x = da >= 0 ? sa[da] : 1, y = db >= 0 ? sb[db] : 1;
		so[d] = x == 1 ? y : x;
	}
	c.in[0] = tt_tensor(dt, nda, sa, pad);
	c.in[1] = tt_tensor(dt, ndb, sb, pad ? pad + 3 : 0);
	c.out[0] = tt_tensor(dt, ndo, so, pad ? pad + 1 : 0);
	tt_fill(&c.in[0], &rng, -2.0, 2.0);
	tt_fill(&c.in[1], &rng, 0.5, 3.0);

	cr_assert_eq(ref_entry(op)->cpu(&c), TK_OK, "%s %s", op, tk_dtype_name(dt));
	int64_t n = tk_numel(&c.out[0]);
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int64_t i = 0; i < n; i++) {
		double a = tt_get(&c.in[0], bcast_index(&c.out[0], &c.in[0], i));
		double b = tt_get(&c.in[1], bcast_index(&c.out[0], &c.in[1], i));
		want[i] = ref(a, b);
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "%s %s nda %d ndb %d pad %ld", op,
	              tk_dtype_name(dt), nda, ndb, (long)pad);
	free(want);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

static void check_binary_op(const char *op, ref_binary ref)
{
	static const int64_t s3x4095[] = { 3, 4095 }, s4095[] = { 4095 };
	static const int64_t s5x7[] = { 5, 7 }, s7[] = { 7 }, s5x1[] = { 5, 1 };
	static const int64_t s2x3x1x6[] = { 2, 3, 1, 6 }, s4x1[] = { 4, 1 }, s4x6[] = { 4, 6 };
	static const int64_t s9x1[] = { 9, 1 }, s1[] = { 1 }, s1x9[] = { 1, 9 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		check_binary(op, ref, dt, 2, s5x7, 2, s5x7, 0);
		check_binary(op, ref, dt, 2, s5x7, 2, s5x7, 5);
		check_binary(op, ref, dt, 2, s3x4095, 1, s4095, 0);
		check_binary(op, ref, dt, 2, s3x4095, 1, s4095, 2);
		check_binary(op, ref, dt, 2, s5x7, 1, s7, 3);
		check_binary(op, ref, dt, 2, s5x7, 2, s5x1, 1);
		check_binary(op, ref, dt, 4, s2x3x1x6, 2, s4x1, 0);
		check_binary(op, ref, dt, 4, s2x3x1x6, 2, s4x6, 2);
		check_binary(op, ref, dt, 2, s9x1, 1, s1, 0);
		check_binary(op, ref, dt, 2, s9x1, 2, s1x9, 0);
		check_binary(op, ref, dt, 2, s9x1, 0, s1, 0);
	}
}

Test(add, matches_double_arithmetic_with_broadcasting_and_strided_rows)
{
	check_binary_op("add", ref_add);
}

Test(mul, matches_double_arithmetic_with_broadcasting_and_strided_rows)
{
	check_binary_op("mul", ref_mul);
}

Test(add, refuses_shapes_that_do_not_broadcast_and_mixed_dtypes)
{
	static const int64_t s5x7[] = { 5, 7 }, s6[] = { 6 };
	tk_call c = { .n_in = 2, .n_out = 1 };

	c.in[0] = tt_tensor(TK_F32, 2, s5x7, 0);
	c.in[1] = tt_tensor(TK_F32, 1, s6, 0);
	c.out[0] = tt_tensor(TK_F32, 2, s5x7, 0);
	cr_expect_eq(ref_entry("add")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[1]);
	c.in[1] = tt_tensor(TK_F16, 2, s5x7, 0);
	cr_expect_eq(ref_entry("add")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

/* ---- gated ----------------------------------------------------------------------------- */

Test(gated, silu_and_gelu_times_the_second_half_match_their_formulas)
{
	static const char *const ops[] = { "silu_and_mul", "gelu_and_mul" };

	for (int o = 0; o < 2; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 2; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x77u + (uint64_t)(k * 31 + w * 7 + v);
					int64_t d = widths[w];
					tk_call c;
					build(&c, ops[o], dt, 3, d, v * 3, v, &rng);
					ref_run(ops[o], &c);
					double *want = ref_want(&c.out[0]);
					for (int64_t i = 0; i < 3 * d; i++) {
						int64_t r = i / d, j = i % d;
						double g = tt_get(&c.in[0], r * 2 * d + j);
						double u = tt_get(&c.in[0], r * 2 * d + d + j);
						double a = o == 0 ? unary_ref("silu", g, &c)
						                  : unary_ref("gelu", g, &c);
						want[i] = a * u;
					}
					cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt),
					              "%s %s d %ld variant %d", ops[o],
					              tk_dtype_name(dt), (long)d, v);
					free(want);
					ref_free_call(&c);
				}
			}
		}
	}
}

/* ---- empty tensors ----------------------------------------------------------------------- */

Test(elementwise, every_op_accepts_zero_rows)
{
	static const char *const gated[] = { "silu_and_mul", "gelu_and_mul", NULL };
	const char *const *lists[3] = { unary_ops, binary_ops, gated };

	for (int l = 0; l < 3; l++) {
		for (const char *const *op = lists[l]; *op != NULL; op++) {
			uint64_t rng = 1;
			tk_call c;
			build(&c, *op, TK_F32, 0, 8, 0, 0, &rng);
			cr_expect_eq(ref_entry(*op)->cpu(&c), TK_OK, "%s on 0 rows", *op);
			ref_free_call(&c);
		}
	}
}
