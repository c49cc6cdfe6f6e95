/*
 * test_quantization.c - the CPU references of fp8 e4m3 quantization per
 * tensor and per token against the definition (scale = amax / 448, codes
 * x times the scale's reciprocal rounded to nearest even and saturated):
 * every code and scale exactly, odd widths, padded rows, a given scale,
 * codes written as u8, and zero rows.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

static const int64_t widths[] = { 1, 7, 4095 };

/*
 * x [rows, width] in [-3, 3] (rows padded by pad), q [rows, width] (fp8,
 * or u8 in variant 2; rows padded by pad + 5) and the scale ([rows, 1] per
 * token, [1] per tensor); per tensor, variant 1 gives the scale 3 / 448.
 */
static void build(tk_call *c, const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                  int variant, uint64_t *rng)
{
	int per_token = strstr(op, "token") != NULL;
	int64_t shape[2] = { rows, width }, one[1] = { 1 }, srows[2] = { rows, 1 };

	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(dt, 2, shape, pad);
	c->n_in = 1;
	c->out[0] = tt_tensor(variant == 2 ? TK_U8 : TK_FP8_E4M3, 2, shape, pad ? pad + 5 : 0);
	c->out[1] = per_token ? tt_tensor(TK_F32, 2, srows, 0) : tt_tensor(TK_F32, 1, one, 0);
	c->n_out = 2;
	if (!per_token && variant == 1) {
		c->in[1] = tt_tensor(TK_F32, 1, one, 0);
		tt_set(&c->in[1], 0, 3.0 / 448.0);
		c->n_in = 2;
	}
	tt_fill(&c->in[0], rng, -3.0, 3.0);
}

static const char *const ops[] = { "quant_fp8_per_tensor", "quant_fp8_per_token" };

Test(quant_fp8, scales_are_amax_over_448_and_codes_round_x_over_scale)
{
	for (int o = 0; o < 2; o++) {
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 3; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0x8u + (uint64_t)(k * 31 + w * 7 + v);
					int64_t d = widths[w], rows = 4;
					tk_call c;
					build(&c, ops[o], dt, rows, d, v, v, &rng);
					ref_run(ops[o], &c);
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
							 * definition says (kernels/quantization/quant_fp8.c) */
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
					ref_free_call(&c);
				}
			}
		}
	}
}

Test(quant_fp8, both_accept_zero_rows)
{
	for (int o = 0; o < 2; o++) {
		uint64_t rng = 1;
		tk_call c;
		build(&c, ops[o], TK_F32, 0, 8, 0, 0, &rng);
		cr_expect_eq(ref_entry(ops[o])->cpu(&c), TK_OK, "%s on 0 rows", ops[o]);
		ref_free_call(&c);
	}
}

/* ---- quant_fp8_per_token_group, rms_norm_quant_fp8 ---- */

/* x [rows, width] in [-3, 3] (rows padded by pad), q and the scale [rows, groups]. */
static void build_group(tk_call *c, tk_dtype dt, int64_t rows, int64_t width, int64_t group,
                        int64_t pad, uint64_t *rng)
{
	int64_t groups = (width + group - 1) / group;

	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(dt, 2, (int64_t[]){ rows, width }, pad);
	c->n_in = 1;
	c->out[0] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ rows, width }, pad);
	c->out[1] = tt_tensor(TK_F32, 2, (int64_t[]){ rows, groups }, 0);
	c->n_out = 2;
	c->params[0] = tt_param_int(group);
	c->n_params = 1;
	tt_fill(&c->in[0], rng, -3.0, 3.0);
}

Test(quant_fp8, per_token_group_scales_each_group_by_its_own_amax)
{
	static const int64_t cases[][3] = {
		{ 3, 128, 128 }, { 2, 7168, 128 }, { 4, 300, 128 }, { 2, 200, 64 }, { 1, 16, 128 }
	};

	for (int k = 0; k < 3; k++)
		for (size_t s = 0; s < sizeof(cases) / sizeof(cases[0]); s++) {
			int64_t rows = cases[s][0], d = cases[s][1], g = cases[s][2];
			int64_t groups = (d + g - 1) / g;
			uint64_t rng = ref_seed("token group") + (uint64_t)(k * 17 + s);
			tk_call c;
			build_group(&c, tt_float_dtypes[k], rows, d, g, s & 1 ? 3 : 0, &rng);
			ref_run("quant_fp8_per_token_group", &c);
			for (int64_t r = 0; r < rows; r++)
				for (int64_t gi = 0; gi < groups; gi++) {
					int64_t j0 = gi * g, j1 = j0 + g < d ? j0 + g : d;
					float am = 0.0f;
					for (int64_t j = j0; j < j1; j++)
						am = fmaxf(am, fabsf((float)tt_get(&c.in[0],
						                                   r * d + j)));
					float sc = am / 448.0f, inv = fminf(1.0f / sc, FLT_MAX);
					cr_expect_eq(tt_get(&c.out[1], r * groups + gi), (double)sc,
					             "scale [%ld, %ld]", (long)r, (long)gi);
					for (int64_t j = j0; j < j1; j++) {
						float x = (float)tt_get(&c.in[0], r * d + j);
						uint8_t got = ((uint8_t *)c.out[0].data)[tt_offset(
						        &c.out[0], r * d + j)];
						cr_expect_eq(got, tk_f32_to_fp8e4m3(x * inv),
						             "%s q [%ld, %ld]",
						             tk_dtype_name(tt_float_dtypes[k]),
						             (long)r, (long)j);
					}
				}
			ref_free_call(&c);
		}
}

/* x [rows, d], weight [d] in [0.5, 1.5], q, scale [rows, 1]; given: input_scale [1]. */
static void build_rms(tk_call *c, tk_dtype dt, int64_t rows, int64_t d, int given, uint64_t *rng)
{
	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(dt, 2, (int64_t[]){ rows, d }, 0);
	c->in[1] = tt_tensor(dt, 1, (int64_t[]){ d }, 0);
	c->n_in = 2;
	if (given) {
		c->in[2] = tt_tensor(TK_F32, 1, (int64_t[]){ 1 }, 0);
		tt_set(&c->in[2], 0, 0.01);
		c->n_in = 3;
	}
	c->out[0] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ rows, d }, 0);
	c->out[1] = tt_tensor(TK_F32, 2, (int64_t[]){ rows, 1 }, 0);
	c->n_out = 2;
	c->params[0] = tt_param_float(1e-5);
	c->n_params = 1;
	tt_fill(&c->in[0], rng, -3.0, 3.0);
	tt_fill(&c->in[1], rng, 0.5, 1.5);
}

Test(quant_fp8, rms_norm_quant_codes_dequantize_to_the_normalized_rows)
{
	for (int k = 0; k < 3; k++)
		for (int given = 0; given < 2; given++) {
			int64_t rows = 3, d = 4096 + 8 * k;
			uint64_t rng = ref_seed("rms quant") + (uint64_t)(k * 2 + given);
			tk_call c;
			build_rms(&c, tt_float_dtypes[k], rows, d, given, &rng);
			ref_run("rms_norm_quant_fp8", &c);
			for (int64_t r = 0; r < rows; r++) {
				double ss = 0.0, am = 0.0;
				double *y = calloc((size_t)d, sizeof(double));
				for (int64_t j = 0; j < d; j++)
					ss += tt_get(&c.in[0], r * d + j) *
					      tt_get(&c.in[0], r * d + j);
				double rr = 1.0 / sqrt(ss / (double)d + 1e-5);
				for (int64_t j = 0; j < d; j++) {
					y[j] = tt_get(&c.in[0], r * d + j) * rr *
					       tt_get(&c.in[1], j);
					am = fmax(am, fabs(y[j]));
				}
				double sc = given ? 0.01 : am / 448.0,
				       got_sc = tt_get(&c.out[1], r);
				cr_expect_float_eq(got_sc, sc, sc * 1e-6, "scale of row %ld",
				                   (long)r);
				for (int64_t j = 0; j < d; j++) {
					double v = tt_get(&c.out[0], r * d + j) * got_sc;
					double want = fmin(fmax(y[j], -448.0 * sc), 448.0 * sc);
					/* half an e4m3 ulp (2^-4 relative), or the denormal step */
					cr_expect_leq(fabs(v - want),
					              fabs(want) / 16.0 + sc * 0x1p-10 + 1e-12,
					              "%s given %d q [%ld, %ld]: %g vs %g",
					              tk_dtype_name(tt_float_dtypes[k]), given,
					              (long)r, (long)j, v, want);
				}
				free(y);
			}
			ref_free_call(&c);
		}
}
