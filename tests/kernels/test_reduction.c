/*
 * test_reduction.c - the CPU references of softmax, log_softmax, sum,
 * mean, amax and argmax against the definitions in double precision:
 * odd widths, single and padded rows, large inputs (a max-subtracted
 * softmax), either dim, keepdim, argmax's first maximum and NaN rule, and
 * zero rows.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

static const int64_t widths[] = { 1, 7, 4095 };

/*
 * x [rows, width] (rows padded by pad; out's by pad + 2 where it has rows
 * of its own). log_softmax: dim 0 in variant 1. sum, mean, amax, argmax:
 * along dim 0 in variant 1, keepdim in variant 2; argmax's output i64.
 * sum and mean draw x from [1/64, 1/4]: a positive sum is well
 * conditioned, and the widest row's stays within f16.
 */
static void build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                  int variant, uint64_t *rng)
{
	int64_t shape[2] = { rows, width };
	int64_t opad = pad ? pad + 2 : 0;

	memset(c, 0, sizeof(*c));
	c->n_in = 1;
	c->n_out = 1;
	c->in[0] = tt_tensor(dt, 2, shape, pad);
	if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
		c->out[0] = tt_tensor(dt, 2, shape, opad);
		if (op[0] == 'l') {
			c->n_params = 1;
			c->params[0] = tt_param_int(variant == 1 ? 0 : -1);
		}
	} else {
		int axis = variant == 1 ? 0 : 1, keep = variant == 2;
		int64_t os[2] = { rows, width };
		tk_dtype odt = op[1] == 'r' ? TK_I64 : dt;
		os[axis] = 1;
		if (keep)
			c->out[0] = tt_tensor(odt, 2, os, 0);
		else
			c->out[0] = tt_tensor(odt, 1, &os[1 - axis], 0);
		c->n_params = 2;
		c->params[0] = tt_param_int(axis == 1 ? -1 : 0);
		c->params[1] = tt_param_bool(keep);
	}
	if (!strcmp(op, "sum") || !strcmp(op, "mean"))
		tt_fill(&c->in[0], rng, 1.0 / 64.0, 0.25);
	else
		tt_fill(&c->in[0], rng, -3.0, 3.0);
}

/* ---- softmax ----------------------------------------------------------------------- */

static void check_softmax(tk_dtype dt, int64_t rows, int64_t width, int64_t pad, double shift)
{
	uint64_t rng = ref_seed("softmax") ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[2] = { rows, width };
	tk_call c = { .n_in = 1, .n_out = 1 };

	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad + 1);
	tt_fill(&c.in[0], &rng, shift - 4.0, shift + 4.0);
	cr_assert_eq(ref_entry("softmax")->cpu(&c), TK_OK);
	double *want = malloc(sizeof(double) * (size_t)(rows * width));
	for (int64_t r = 0; r < rows; r++) {
		double mx = -INFINITY, sum = 0.0;
		for (int64_t j = 0; j < width; j++)
			mx = fmax(mx, tt_get(&c.in[0], r * width + j));
		for (int64_t j = 0; j < width; j++)
			sum += exp(tt_get(&c.in[0], r * width + j) - mx);
		for (int64_t j = 0; j < width; j++)
			want[r * width + j] = exp(tt_get(&c.in[0], r * width + j) - mx) / sum;
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "softmax %s %ldx%ld shift %g",
	              tk_dtype_name(dt), (long)rows, (long)width, shift);
	free(want);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

Test(softmax, matches_double_arithmetic_on_odd_widths_and_strided_rows)
{
	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < 3; w++) {
			check_softmax(tt_float_dtypes[k], 4, widths[w], 0, 0.0);
			check_softmax(tt_float_dtypes[k], 4, widths[w], 3, 0.0);
		}
	}
}

Test(softmax, stays_finite_for_large_inputs)
{
	/* exp(1000) overflows double: only a max-subtracted softmax survives. */
	check_softmax(TK_F32, 3, 33, 0, 1000.0);
	check_softmax(TK_BF16, 3, 33, 0, -1000.0);
}

Test(log_softmax, matches_its_formula_along_the_last_and_the_first_dim)
{
	for (int k = 0; k < 3; k++) {
		for (int w = 0; w < 3; w++) {
			for (int v = 0; v < 2; v++) {
				tk_dtype dt = tt_float_dtypes[k];
				uint64_t rng = 0xabu + (uint64_t)(k * 31 + w * 7 + v);
				int64_t d = widths[w], rows = 5;
				tk_call c;
				build(&c, "log_softmax", dt, rows, d, v * 2, v, &rng);
				ref_run("log_softmax", &c);
				double *want = ref_want(&c.out[0]);
				int64_t lines = v ? d : rows, len = v ? rows : d;
				for (int64_t l = 0; l < lines; l++) {
					double mx = -INFINITY, s = 0;
					for (int64_t j = 0; j < len; j++)
						mx = fmax(mx, tt_get(&c.in[0],
						                     v ? j * d + l : l * d + j));
					for (int64_t j = 0; j < len; j++)
						s += exp(tt_get(&c.in[0],
						                v ? j * d + l : l * d + j) -
						         mx);
					for (int64_t j = 0; j < len; j++) {
						int64_t i = v ? j * d + l : l * d + j;
						want[i] = tt_get(&c.in[0], i) - mx - log(s);
					}
				}
				cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt),
				              "log_softmax %s d %ld dim %d", tk_dtype_name(dt),
				              (long)d, v ? 0 : -1);
				free(want);
				ref_free_call(&c);
			}
		}
	}
}

/* ---- sum, mean, amax, argmax -------------------------------------------------------- */

static void check_reduce(const char *op, tk_dtype dt, int64_t rows, int64_t d, int v)
{
	uint64_t rng = 0xcdu + (uint64_t)(rows * 7 + d + v + dt);
	tk_call c;

	build(&c, op, dt, rows, d, v == 0 ? 3 : 0, v, &rng);
	ref_run(op, &c);
	int64_t lines = v == 1 ? d : rows, len = v == 1 ? rows : d;
	double *want = ref_want(&c.out[0]);
	for (int64_t l = 0; l < lines; l++) {
		double acc = op[1] == 'u' || op[0] == 'm' ? 0.0 : -INFINITY;
		int64_t best = 0;
		for (int64_t j = 0; j < len; j++) {
			double x = tt_get(&c.in[0], v == 1 ? j * d + l : l * d + j);
			if (op[1] == 'u' || op[0] == 'm')
				acc += x;
			else if (x > acc) {
				acc = x;
				best = j;
			}
		}
		want[l] = op[1] == 'r' ? (double)best : op[0] == 'm' ? acc / (double)len : acc;
	}
	double err = tt_rel_err(&c.out[0], want);
	cr_expect_leq(err, op[1] == 'r' || op[1] == 'm' ? 0.0 : ref_tol(dt),
	              "%s %s %ldx%ld variant %d", op, tk_dtype_name(dt), (long)rows, (long)d, v);
	free(want);
	ref_free_call(&c);
}

static const char *const reductions[] = { "sum", "mean", "amax", "argmax" };

Test(reduce, sum_mean_amax_argmax_match_their_formulas_along_either_dim_with_keepdim)
{
	for (int o = 0; o < 4; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 3; v++)
					check_reduce(reductions[o], tt_float_dtypes[k], 6,
					             widths[w], v);
			}
		}
	}
}

Test(reduce, argmax_takes_the_first_maximum_and_a_nan_wins)
{
	int64_t s[1] = { 5 }, one = 1;
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = 2 };
	float v[5] = { 1, 7, 3, 7, 2 };

	c.params[0] = tt_param_int(-1);
	c.params[1] = tt_param_bool(0);
	c.in[0] = tt_tensor(TK_F32, 1, s, 0);
	c.out[0] = tt_tensor(TK_I64, 0, &one, 0);
	memcpy(c.in[0].data, v, sizeof(v));
	ref_run("argmax", &c);
	cr_expect_eq(*(int64_t *)c.out[0].data, 1);
	((float *)c.in[0].data)[4] = NAN;
	ref_run("argmax", &c);
	cr_expect_eq(*(int64_t *)c.out[0].data, 4);
	ref_free_call(&c);
}

Test(reduce, every_reduction_accepts_zero_rows)
{
	static const char *const ops[] = {
		"softmax", "log_softmax", "sum", "mean", "amax", "argmax"
	};

	for (int o = 0; o < 6; o++) {
		uint64_t rng = 1;
		tk_call c;
		build(&c, ops[o], TK_F32, 0, 8, 0, 0, &rng);
		cr_expect_eq(ref_entry(ops[o])->cpu(&c), TK_OK, "%s on 0 rows", ops[o]);
		ref_free_call(&c);
	}
}
