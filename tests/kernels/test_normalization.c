/*
 * test_normalization.c - the CPU references of rms_norm, layer_norm and
 * their fused-residual forms against the definitions in double precision:
 * odd widths, single and padded rows, with and without a bias, the stored
 * residual rounded to the dtype before it is normalized, refusals, and
 * zero rows.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

static const int64_t widths[] = { 1, 7, 4095 };

/*
 * x [rows, width] and, for the fused forms, the residual (rows padded by pad
 * and pad + 1), weight [width], a bias [width] for the layer norms unless
 * variant 1; out's rows padded by pad + 2. eps 1e-5 (layer) or 1e-6 (rms).
 */
static void build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                  int variant, uint64_t *rng)
{
	int64_t shape[2] = { rows, width }, w1[1] = { width };
	int fused = ref_starts(op, "fused"), layer = strstr(op, "layer") != NULL, k = 1;

	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(dt, 2, shape, pad);
	if (fused)
		c->in[k++] = tt_tensor(dt, 2, shape, pad + 1);
	c->in[k++] = tt_tensor(dt, 1, w1, 0);
	if (layer && variant != 1)
		c->in[k++] = tt_tensor(dt, 1, w1, 0);
	c->n_in = k;
	c->out[0] = tt_tensor(dt, 2, shape, pad ? pad + 2 : 0);
	c->n_out = 1;
	c->n_params = 1;
	c->params[0] = tt_param_float(layer ? 1e-5 : 1e-6);
	for (int i = 0; i < c->n_in; i++)
		tt_fill(&c->in[i], rng, -3.0, 3.0);
}

static void check_rms_norm(tk_dtype dt, int64_t rows, int64_t width, int64_t pad)
{
	uint64_t rng = ref_seed("rms_norm") ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[3] = { 2, rows, width };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 1 };
	double eps = 1e-5;

	c.params[0] = tt_param_float(eps);
	c.in[0] = tt_tensor(dt, 3, shape, pad);
	c.in[1] = tt_tensor(dt, 1, &width, 0);
	c.out[0] = tt_tensor(dt, 3, shape, pad + 2);
	tt_fill(&c.in[0], &rng, -3.0, 3.0);
	tt_fill(&c.in[1], &rng, 0.5, 1.5);
	cr_assert_eq(ref_entry("rms_norm")->cpu(&c), TK_OK);
	int64_t n = 2 * rows * width;
	double *want = malloc(sizeof(double) * (size_t)n);
	for (int64_t r = 0; r < 2 * rows; r++) {
		double ss = 0.0;
		for (int64_t j = 0; j < width; j++)
			ss += tt_get(&c.in[0], r * width + j) * tt_get(&c.in[0], r * width + j);
		double rstd = 1.0 / sqrt(ss / (double)width + eps);
		for (int64_t j = 0; j < width; j++)
			want[r * width + j] =
			        tt_get(&c.in[0], r * width + j) * rstd * tt_get(&c.in[1], j);
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "rms_norm %s %ldx%ld pad %ld",
	              tk_dtype_name(dt), (long)rows, (long)width, (long)pad);
	free(want);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

Test(rms_norm, matches_double_arithmetic_on_odd_widths_and_strided_rows)
{
	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < 3; w++) {
			check_rms_norm(tt_float_dtypes[k], 3, widths[w], 0);
			check_rms_norm(tt_float_dtypes[k], 3, widths[w], 5);
		}
	}
}

Test(rms_norm, refuses_a_weight_of_the_wrong_width)
{
	int64_t shape[2] = { 2, 8 }, wrong = 7;
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 1 };

	c.params[0] = tt_param_float(1e-6);
	c.in[0] = tt_tensor(TK_F32, 2, shape, 0);
	c.in[1] = tt_tensor(TK_F32, 1, &wrong, 0);
	c.out[0] = tt_tensor(TK_F32, 2, shape, 0);
	cr_expect_eq(ref_entry("rms_norm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

static double round_to(tk_dtype dt, float v)
{
	if (dt == TK_F16)
		return tk_f16_to_f32(tk_f32_to_f16(v));
	if (dt == TK_BF16)
		return tk_bf16_to_f32(tk_f32_to_bf16(v));
	return v;
}

static void check_norm(const char *op, tk_dtype dt, int64_t rows, int64_t d, int64_t pad, int v)
{
	uint64_t rng = 0x99u + (uint64_t)(rows * 7 + d + pad + v + dt);
	int fused = ref_starts(op, "fused"), layer = strstr(op, "layer") != NULL;
	tk_call c;

	build(&c, op, dt, rows, d, pad, v, &rng);
	const tk_tensor *w = &c.in[fused ? 2 : 1];
	const tk_tensor *b = layer && c.n_in > (fused ? 3 : 2) ? &c.in[fused ? 3 : 2] : NULL;
	double *z = ref_want(&c.in[0]), *want = ref_want(&c.out[0]);
	double eps = c.params[0].v.f;
	for (int64_t i = 0; i < rows * d; i++) {
		z[i] = tt_get(&c.in[0], i);
		if (fused) /* the stored residual is rounded to the dtype, then normalized */
			z[i] = round_to(dt, (float)z[i] + (float)tt_get(&c.in[1], i));
	}
	for (int64_t r = 0; r < rows; r++) {
		double mean = 0, ss = 0;
		for (int64_t j = 0; j < d && layer; j++)
			mean += z[r * d + j] / (double)d;
		for (int64_t j = 0; j < d; j++)
			ss += (z[r * d + j] - mean) * (z[r * d + j] - mean);
		double rstd = 1.0 / sqrt(ss / (double)d + eps);
		for (int64_t j = 0; j < d; j++)
			want[r * d + j] = (z[r * d + j] - mean) * rstd * tt_get(w, j) +
			                  (b != NULL ? tt_get(b, j) : 0.0);
	}
	ref_run(op, &c);
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "%s %s %ldx%ld pad %ld variant %d",
	              op, tk_dtype_name(dt), (long)rows, (long)d, (long)pad, v);
	if (fused)
		cr_expect_leq(tt_rel_err(&c.in[1], z), 0.0, "%s residual %s", op,
		              tk_dtype_name(dt));
	free(z);
	free(want);
	ref_free_call(&c);
}

static const char *const ops[] = { "rms_norm", "layer_norm", "fused_add_rms_norm",
	                           "fused_add_layer_norm" };

Test(norm, every_norm_matches_its_formula_on_odd_widths_and_strided_rows)
{
	for (int o = 0; o < 4; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				check_norm(ops[o], tt_float_dtypes[k], 3, widths[w], 0, 0);
				check_norm(ops[o], tt_float_dtypes[k], 2, widths[w], 5, 1);
				check_norm(ops[o], tt_float_dtypes[k], 1, widths[w], 0, 1);
			}
		}
	}
}

Test(norm, refuses_a_weight_of_the_wrong_width)
{
	int64_t shape[2] = { 2, 8 }, wrong = 7;
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 1 };

	c.params[0] = tt_param_float(1e-6);
	c.in[0] = tt_tensor(TK_F32, 2, shape, 0);
	c.in[1] = tt_tensor(TK_F32, 1, &wrong, 0);
	c.out[0] = tt_tensor(TK_F32, 2, shape, 0);
	cr_expect_eq(tk_kernel_find("rms_norm")->cpu(&c), TK_ERR_UNSUPPORTED);
	cr_expect_eq(tk_kernel_find("layer_norm")->cpu(&c), TK_ERR_UNSUPPORTED);
	ref_free_call(&c);
}

Test(norm, every_norm_accepts_zero_rows)
{
	for (int o = 0; o < 4; o++) {
		uint64_t rng = 1;
		tk_call c;
		build(&c, ops[o], TK_F32, 0, 8, 0, 0, &rng);
		cr_expect_eq(ref_entry(ops[o])->cpu(&c), TK_OK, "%s on 0 rows", ops[o]);
		ref_free_call(&c);
	}
}
