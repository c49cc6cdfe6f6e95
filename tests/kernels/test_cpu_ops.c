/*
 * test_cpu_ops.c - the CPU references of the elementwise, gated, norm,
 * softmax, reduction, rope, pooling and fp8 ops against formulas written
 * here in double precision from the definitions (PyTorch's semantics),
 * on odd widths, single rows and padded rows, in every float dtype.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>

#include "kernels/tk_op_cases.h"

static double tol(tk_dtype dt)
{
	return dt == TK_F32 ? 2e-6 : dt == TK_F16 ? 1e-3 : 8e-3;
}

static const int64_t widths[] = { 1, 7, 4095 };

static void run_cpu(const char *op, tk_call *c)
{
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert_not_null(e, "no table entry for %s", op);
	cr_assert_eq(e->cpu(c), TK_OK, "%s refused its call", op);
}

static double *want_of(const tk_tensor *t)
{
	int64_t n = tk_numel(t);

	return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

/* ---- unary --------------------------------------------------------------- */

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
	for (const char *const *op = tc_unary_ops; *op != NULL; op++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 2; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x1234567u + (uint64_t)(k * 31 + w * 7 + v);
					tk_call c;
					cr_assert(tc_build(&c, *op, dt, 3, widths[w], v * 3, v,
					                   &rng));
					run_cpu(*op, &c);
					double *want = want_of(&c.out[0]);
					for (int64_t i = 0; i < tk_numel(&c.out[0]); i++)
						want[i] = unary_ref(*op, tt_get(&c.in[0], i), &c);
					cr_expect_leq(tt_rel_err(&c.out[0], want), tol(dt),
					              "%s %s width %ld variant %d", *op,
					              tk_dtype_name(dt), (long)widths[w], v);
					free(want);
					tc_free(&c);
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
	run_cpu("clamp", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]));
	cr_expect_eq(((float *)c.out[0].data)[1], -1.0f);
	cr_expect_eq(((float *)c.out[0].data)[2], 2.0f);
	c.n_params = 0;
	run_cpu("relu", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]));
	cr_expect_eq(((float *)c.out[0].data)[1], 0.0f);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

/* ---- binary and gated ------------------------------------------------------ */

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
	for (const char *const *op = tc_binary_ops; *op != NULL; op++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 2; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x51u + (uint64_t)(k * 31 + w * 7 + v);
					int64_t wd = widths[w];
					tk_call c;
					cr_assert(tc_build(&c, *op, dt, 4, wd, v * 2, v, &rng));
					run_cpu(*op, &c);
					double *want = want_of(&c.out[0]);
					for (int64_t i = 0; i < tk_numel(&c.out[0]); i++) {
						double b = tt_get(&c.in[1], v == 1 ? i % wd : i);
						want[i] = binary_ref(*op, tt_get(&c.in[0], i), b);
					}
					cr_expect_leq(tt_rel_err(&c.out[0], want), tol(dt),
					              "%s %s width %ld variant %d", *op,
					              tk_dtype_name(dt), (long)wd, v);
					free(want);
					tc_free(&c);
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
	run_cpu("maximum", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]) && isnan(((float *)c.out[0].data)[1]));
	run_cpu("minimum", &c);
	cr_expect(isnan(((float *)c.out[0].data)[0]) && isnan(((float *)c.out[0].data)[1]));
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

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
					tc_build(&c, ops[o], dt, 3, d, v * 3, v, &rng);
					run_cpu(ops[o], &c);
					double *want = want_of(&c.out[0]);
					for (int64_t i = 0; i < 3 * d; i++) {
						int64_t r = i / d, j = i % d;
						double g = tt_get(&c.in[0], r * 2 * d + j);
						double u = tt_get(&c.in[0], r * 2 * d + d + j);
						double a = o == 0 ? unary_ref("silu", g, &c)
						                  : unary_ref("gelu", g, &c);
						want[i] = a * u;
					}
					cr_expect_leq(tt_rel_err(&c.out[0], want), tol(dt),
					              "%s %s d %ld variant %d", ops[o],
					              tk_dtype_name(dt), (long)d, v);
					free(want);
					tc_free(&c);
				}
			}
		}
	}
}

/* ---- norms ----------------------------------------------------------------- */

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
	int fused = tc_starts(op, "fused"), layer = strstr(op, "layer") != NULL;
	tk_call c;

	tc_build(&c, op, dt, rows, d, pad, v, &rng);
	const tk_tensor *w = &c.in[fused ? 2 : 1];
	const tk_tensor *b = layer && c.n_in > (fused ? 3 : 2) ? &c.in[fused ? 3 : 2] : NULL;
	double *z = want_of(&c.in[0]), *want = want_of(&c.out[0]);
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
	run_cpu(op, &c);
	cr_expect_leq(tt_rel_err(&c.out[0], want), tol(dt), "%s %s %ldx%ld pad %ld variant %d", op,
	              tk_dtype_name(dt), (long)rows, (long)d, (long)pad, v);
	if (fused)
		cr_expect_leq(tt_rel_err(&c.in[1], z), 0.0, "%s residual %s", op,
		              tk_dtype_name(dt));
	free(z);
	free(want);
	tc_free(&c);
}

Test(norm, every_norm_matches_its_formula_on_odd_widths_and_strided_rows)
{
	static const char *const ops[] = { "rms_norm", "layer_norm", "fused_add_rms_norm",
		                           "fused_add_layer_norm" };

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
	tc_free(&c);
}

/* ---- softmax and reductions ------------------------------------------------ */

Test(log_softmax, matches_its_formula_along_the_last_and_the_first_dim)
{
	for (int k = 0; k < 3; k++) {
		for (int w = 0; w < 3; w++) {
			for (int v = 0; v < 2; v++) {
				tk_dtype dt = tt_float_dtypes[k];
				uint64_t rng = 0xabu + (uint64_t)(k * 31 + w * 7 + v);
				int64_t d = widths[w], rows = 5;
				tk_call c;
				tc_build(&c, "log_softmax", dt, rows, d, v * 2, v, &rng);
				run_cpu("log_softmax", &c);
				double *want = want_of(&c.out[0]);
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
				cr_expect_leq(tt_rel_err(&c.out[0], want), tol(dt),
				              "log_softmax %s d %ld dim %d", tk_dtype_name(dt),
				              (long)d, v ? 0 : -1);
				free(want);
				tc_free(&c);
			}
		}
	}
}

static void check_reduce(const char *op, tk_dtype dt, int64_t rows, int64_t d, int v)
{
	uint64_t rng = 0xcdu + (uint64_t)(rows * 7 + d + v + dt);
	tk_call c;

	tc_build(&c, op, dt, rows, d, v == 0 ? 3 : 0, v, &rng);
	run_cpu(op, &c);
	int64_t lines = v == 1 ? d : rows, len = v == 1 ? rows : d;
	double *want = want_of(&c.out[0]);
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
	cr_expect_leq(err, op[1] == 'r' || op[1] == 'm' ? 0.0 : tol(dt), "%s %s %ldx%ld variant %d",
	              op, tk_dtype_name(dt), (long)rows, (long)d, v);
	free(want);
	tc_free(&c);
}

Test(reduce, sum_mean_amax_argmax_match_their_formulas_along_either_dim_with_keepdim)
{
	static const char *const ops[] = { "sum", "mean", "amax", "argmax" };

	for (int o = 0; o < 4; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < TC_VARIANTS; v++)
					check_reduce(ops[o], tt_float_dtypes[k], 6, widths[w], v);
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
	run_cpu("argmax", &c);
	cr_expect_eq(*(int64_t *)c.out[0].data, 1);
	((float *)c.in[0].data)[4] = NAN;
	run_cpu("argmax", &c);
	cr_expect_eq(*(int64_t *)c.out[0].data, 4);
	tc_free(&c);
}

/* ---- rope ------------------------------------------------------------------- */

static void rope_ref(const tk_tensor *x0, double *want, int neox, int64_t rd, const tk_call *c)
{
	int64_t T = x0->shape[0], H = x0->shape[1], D = x0->shape[2], half = rd / 2;

	for (int64_t t = 0; t < T; t++) {
		int64_t p = (int64_t)tt_get(&c->in[2], t);
		for (int64_t h = 0; h < H; h++) {
			int64_t base = (t * H + h) * D;
			for (int64_t j = 0; j < D; j++)
				want[base + j] = tt_get(x0, base + j);
			for (int64_t i = 0; i < half; i++) {
				double co, si;
				if (c->n_in > 3) {
					co = tt_get(&c->in[3], p * rd + i);
					si = tt_get(&c->in[3], p * rd + half + i);
				} else {
					float inv = (float)pow(c->params[1].v.f, -(2.0 * i) / rd);
					float a = (float)p * inv;
					co = cos(a);
					si = sin(a);
				}
				int64_t i1 = neox ? i : 2 * i, i2 = neox ? i + half : 2 * i + 1;
				double x1 = tt_get(x0, base + i1), x2 = tt_get(x0, base + i2);
				want[base + i1] = x1 * co - x2 * si;
				want[base + i2] = x2 * co + x1 * si;
			}
		}
	}
}

Test(rope, neox_and_gptj_rotate_q_and_k_by_computed_or_cached_angles)
{
	static const int64_t dims[] = { 2, 8, 64 };

	for (int style = 0; style < 2; style++) {
		const char *op = style ? "rope_neox" : "rope_gptj";
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < TC_VARIANTS; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0xefu + (uint64_t)(k * 31 + w * 7 + v);
					tk_call c;
					tc_build(&c, op, dt, 4, dims[w], v == 1 ? 3 : 0, v, &rng);
					tk_tensor q0 =
					        tt_tensor(dt, 3, c.in[0].shape, v == 1 ? 3 : 0);
					tk_tensor k0 =
					        tt_tensor(dt, 3, c.in[1].shape, v == 1 ? 5 : 0);
					memcpy(q0.data, c.in[0].data, tt_span_bytes(&q0));
					memcpy(k0.data, c.in[1].data, tt_span_bytes(&k0));
					double *wq = want_of(&q0), *wk = want_of(&k0);
					rope_ref(&q0, wq, style, c.params[0].v.i, &c);
					rope_ref(&k0, wk, style, c.params[0].v.i, &c);
					run_cpu(op, &c);
					cr_expect_leq(tt_rel_err(&c.in[0], wq), tol(dt),
					              "%s q %s D %ld v %d", op, tk_dtype_name(dt),
					              (long)dims[w], v);
					cr_expect_leq(tt_rel_err(&c.in[1], wk), tol(dt),
					              "%s k %s D %ld v %d", op, tk_dtype_name(dt),
					              (long)dims[w], v);
					free(wq);
					free(wk);
					tt_free(&q0);
					tt_free(&k0);
					tc_free(&c);
				}
			}
		}
	}
}

/* ---- pooling ---------------------------------------------------------------- */

/* Brute force: visit every input element and add it to every window holding it. */
static void pool_ref(const tk_call *c, int nsp, int is_max, double *want)
{
	const tk_tensor *x = &c->in[0], *o = &c->out[0];
	int64_t k[3] = { 1, 1, 1 }, s[3] = { 1, 1, 1 }, p[3] = { 0 }, dil[3] = { 1, 1, 1 };
	int64_t in[3] = { 1, 1, 1 }, out[3] = { 1, 1, 1 };
	int lead = 3 - nsp, cip = !is_max && c->params[3 * nsp + 1].v.b;
	int64_t nc = x->shape[0] * x->shape[1], on = tk_numel(o);
	double *cnt = calloc((size_t)on + 1, sizeof(double));

	for (int d = 0; d < nsp; d++) {
		k[lead + d] = c->params[d].v.i;
		s[lead + d] = c->params[nsp + d].v.i;
		p[lead + d] = c->params[2 * nsp + d].v.i;
		dil[lead + d] = is_max ? c->params[3 * nsp + d].v.i : 1;
		in[lead + d] = x->shape[2 + d];
		out[lead + d] = o->shape[2 + d];
	}
	for (int64_t i = 0; i < on; i++)
		want[i] = is_max ? -INFINITY : 0.0;
	for (int64_t b = 0; b < nc; b++)
		for (int64_t o0 = 0; o0 < out[0]; o0++)
			for (int64_t o1 = 0; o1 < out[1]; o1++)
				for (int64_t o2 = 0; o2 < out[2]; o2++) {
					int64_t oi =
					        ((b * out[0] + o0) * out[1] + o1) * out[2] + o2;
					int64_t oc[3] = { o0, o1, o2 }, padded = 1;
					for (int d = 0; d < 3; d++) {
						int64_t st = oc[d] * s[d] - p[d];
						int64_t en = st + k[d] > in[d] + p[d] ? in[d] + p[d]
						                                      : st + k[d];
						padded *= en - st;
					}
					for (int64_t t = 0; t < k[0] * k[1] * k[2]; t++) {
						int64_t tap[3] = { t / (k[1] * k[2]),
							           t / k[2] % k[1], t % k[2] };
						int64_t pos[3], ok = 1;
						for (int d = 0; d < 3; d++) {
							pos[d] = oc[d] * s[d] - p[d] +
							         tap[d] * dil[d];
							ok &= pos[d] >= 0 && pos[d] < in[d];
						}
						if (!ok)
							continue;
						double v = tt_get(x, ((b * in[0] + pos[0]) * in[1] +
						                      pos[1]) * in[2] +
						                             pos[2]);
						want[oi] =
						        is_max ? fmax(want[oi], v) : want[oi] + v;
						cnt[oi] += 1;
					}
					if (!is_max)
						want[oi] /= cip ? (double)padded : cnt[oi];
				}
	free(cnt);
}

Test(pool, max_and_avg_match_brute_force_with_padding_dilation_and_ceil_mode)
{
	static const char *const ops[] = { "max_pool1d", "max_pool2d", "max_pool3d",
		                           "avg_pool1d", "avg_pool2d", "avg_pool3d" };

	for (int o = 0; o < 6; o++) {
		for (int k = 0; k < 3; k++) {
			for (int v = 0; v < TC_VARIANTS; v++) {
				static const int64_t ws[] = { 7, 10 };
				for (int w = 0; w < 2; w++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng =
					        0x3u + (uint64_t)(k * 31 + w * 7 + v + o * 100);
					tk_call c;
					tc_build(&c, ops[o], dt, 5, ws[w], w, v, &rng);
					run_cpu(ops[o], &c);
					double *want = want_of(&c.out[0]);
					pool_ref(&c, o % 3 + 1, o < 3, want);
					cr_expect_leq(tt_rel_err(&c.out[0], want),
					              o < 3 ? 0.0 : tol(dt),
					              "%s %s width %ld variant %d", ops[o],
					              tk_dtype_name(dt), (long)ws[w], v);
					free(want);
					tc_free(&c);
				}
			}
		}
	}
}

Test(pool, refuses_an_output_shape_pytorch_would_not_give)
{
	uint64_t rng = 5;
	tk_call c;

	tc_build(&c, "max_pool2d", TK_F32, 6, 6, 0, 0, &rng);
	c.out[0].shape[3] = 4;
	cr_expect_eq(tk_kernel_find("max_pool2d")->cpu(&c), TK_ERR_UNSUPPORTED);
	tc_free(&c);
}

/* ---- fp8 quantization ------------------------------------------------------- */

Test(quant_fp8, scales_are_amax_over_448_and_codes_round_x_over_scale)
{
	static const char *const ops[] = { "quant_fp8_per_tensor", "quant_fp8_per_token" };

	for (int o = 0; o < 2; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < TC_VARIANTS; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x8u + (uint64_t)(k * 31 + w * 7 + v);
					int64_t d = widths[w], rows = 4;
					tk_call c;
					tc_build(&c, ops[o], dt, rows, d, v, v, &rng);
					run_cpu(ops[o], &c);
					double amax_all = 0;
					for (int64_t i = 0; i < rows * d; i++)
						amax_all =
						        fmax(amax_all, fabs(tt_get(&c.in[0], i)));
					for (int64_t r = 0; r < rows; r++) {
						double am = 0;
						for (int64_t j = 0; j < d; j++)
							am = fmax(am, fabs(tt_get(&c.in[0],
							                          r * d + j)));
						float sc =
						        o ? (float)am / 448.0f
						          : (c.n_in > 1 ? 3.0f / 448.0f
						                        : (float)amax_all / 448.0f);
						cr_expect_eq(tt_get(&c.out[1], o ? r : 0),
						             (double)sc, "%s scale", ops[o]);
						for (int64_t j = 0; j < d; j++) {
							float x =
							        (float)tt_get(&c.in[0], r * d + j);
							/* x times the scale's reciprocal, capped as the
							 * definition says (kernels/cpu/quant_fp8.c) */
							float inv = fminf(1.0f / sc, FLT_MAX);
							uint8_t want = tk_f32_to_fp8e4m3(x * inv);
							uint8_t got = ((uint8_t *)c.out[0]
							                       .data)[tt_offset(
							        &c.out[0], r * d + j)];
							cr_expect_eq(got, want, "%s %s [%ld,%ld]",
							             ops[o], tk_dtype_name(dt),
							             (long)r, (long)j);
							/* and the code is within e4m3's half step of x / scale */
							double back = tk_fp8e4m3_to_f32(got) * sc;
							cr_expect_leq(fabs(back - x),
							              fabs(x) / 16 + sc / 512 +
							                      1e-30);
						}
					}
					tc_free(&c);
				}
			}
		}
	}
}
