/*
 * test_gpu_ops.c - every op of tk_op_cases.h run by its CUDA launcher and
 * by its CPU reference on the same fresh random inputs (the seed is in
 * every failure message), written tensors poisoned with NaN bytes first.
 * Each output, and each input the op updates in place, must match: within
 * the dtype's tolerance (norm-wise relative error: bf16 1.6e-2, f16 1e-3,
 * f32 1e-5), or bit for bit for argmax, amax, max pooling and the fp8
 * codes and scales. Bytes outside the logical elements (row padding) must
 * keep what they held.
 *
 * Shapes: odd widths, a single row, rows of 262144, padded rows, many
 * narrow rows, and the ops' variants (params, optional inputs, another
 * reduction dim). Needs a GPU; with none the tests fail, saying so.
 * TILEOPS_TEST_LOG=file appends every case's error to file.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "kernels/tk_op_cases.h"
#include "gpu/gpu_util.h"

static double tol_of(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 1e-3 : 1.6e-2;
}

static void log_case(const char *op, const char *what, double rel, double tol)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path != NULL ? fopen(path, "a") : NULL;

	if (f == NULL)
		return;
	fprintf(f, "%-22s %-58s rel %.3g tol %.3g\n", op, what, rel, tol);
	fclose(f);
}

/* Index of tensor t within the call: inputs first, then outputs. */
static int slot_of(const tk_call *c, const tk_tensor *t)
{
	for (int i = 0; i < c->n_in; i++) {
		if (t == &c->in[i])
			return i;
	}
	for (int i = 0; i < c->n_out; i++) {
		if (t == &c->out[i])
			return TK_MAX_INPUTS + i;
	}
	return -1;
}

static tk_tensor *slot_tensor(tk_call *c, int s)
{
	return s < TK_MAX_INPUTS ? &c->in[s] : &c->out[s - TK_MAX_INPUTS];
}

/* Run hc (inputs filled) on both backends and compare everything it writes. */
static void compare_call(const char *op, tk_call *hc, const char *what)
{
	const tk_kernel_entry *e = tk_kernel_find(op);
	tk_tensor *written[TK_MAX_INPUTS + TK_MAX_OUTPUTS];
	unsigned char *before[TK_MAX_INPUTS + TK_MAX_OUTPUTS];
	tk_call dc = *hc;
	cudaStream_t stream;
	int nw;

	gpu_require();
	cr_assert_not_null(e, "no table entry for %s", op);
	cr_assert_not_null(e->cuda, "%s has no CUDA launcher", op);
	nw = tc_written(op, hc, written);
	for (int i = 0; i < hc->n_out; i++)
		tt_poison(&hc->out[i]);
	for (int w = 0; w < nw; w++) {
		size_t b = tt_span_bytes(written[w]);
		before[w] = malloc(b ? b : 1);
		memcpy(before[w], written[w]->data, b);
	}
	for (int i = 0; i < hc->n_in; i++)
		dc.in[i].data = gpu_to_device(&hc->in[i]);
	for (int i = 0; i < hc->n_out; i++)
		dc.out[i].data = gpu_to_device(&hc->out[i]);

	/* Workspace as tileopsd hands it to the ops that declare it. */
	if (e->workspace > 0) {
		cr_assert_eq(cudaMalloc(&dc.workspace, e->workspace), cudaSuccess);
		dc.workspace_bytes = e->workspace;
	}

	cr_assert_eq(e->cpu(hc), TK_OK, "%s CPU reference refused %s", op, what);
	cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
	cr_assert_eq(e->cuda(&dc, stream), TK_OK, "%s CUDA launcher refused %s", op, what);
	cudaError_t err = cudaStreamSynchronize(stream);
	cr_assert_eq(err, cudaSuccess, "%s %s: %s", op, what, cudaGetErrorString(err));
	cudaStreamDestroy(stream);
	cudaFree(dc.workspace);

	for (int w = 0; w < nw; w++) {
		int s = slot_of(hc, written[w]);
		tk_tensor got = *written[w];
		size_t bytes = tt_span_bytes(&got);
		got.data = malloc(bytes ? bytes : 1);
		if (bytes)
			cr_assert_eq(cudaMemcpy(got.data, slot_tensor(&dc, s)->data, bytes,
			                        cudaMemcpyDeviceToHost),
			             cudaSuccess);
		char where[128];
		snprintf(where, sizeof(where), "%s %s %s", tk_dtype_name(hc->in[0].dtype), what,
		         s < TK_MAX_INPUTS ? "(updated input)" : "");
		if (tc_exact(op, &got)) {
			int64_t bad = tt_count_diff(&got, written[w]);
			log_case(op, where, (double)bad, 0.0);
			cr_expect_eq(bad, 0,
			             "%s %s: %ld elements differ from the CPU (seed 0x%llx)", op,
			             where, (long)bad, (unsigned long long)gpu_case_seed);
		} else {
			int64_t n = tk_numel(&got);
			double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
			for (int64_t i = 0; i < n; i++)
				want[i] = tt_get(written[w], i);
			double rel = tt_rel_err(&got, want), tol = tol_of(got.dtype);
			log_case(op, where, rel, tol);
			cr_expect_leq(rel, tol, "%s %s: relative error %.3g > %.3g (seed 0x%llx)",
			              op, where, rel, tol, (unsigned long long)gpu_case_seed);
			free(want);
		}
		cr_expect(gpu_padding_kept(&got, got.data, before[w]),
		          "%s %s wrote outside its elements", op, where);
		free(got.data);
		free(before[w]);
	}
	for (int i = 0; i < hc->n_in; i++)
		cudaFree(dc.in[i].data);
	for (int i = 0; i < hc->n_out; i++)
		cudaFree(dc.out[i].data);
}

static void op_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                    int variant)
{
	uint64_t rng = gpu_fresh_seed();
	char what[96];
	tk_call c;

	cr_assert(tc_build(&c, op, dt, rows, width, pad, variant, &rng), "no case for %s", op);
	snprintf(what, sizeof(what), "%ldx%ld pad %ld variant %d", (long)rows, (long)width,
	         (long)pad, variant);
	compare_call(op, &c, what);
	tc_free(&c);
}

static const int64_t widths[] = { 1, 3, 17, 1000, 4097, 8192 };
#define N_WIDTHS (sizeof(widths) / sizeof(widths[0]))

/* The shapes every row-reading op runs on, in every dtype and variant. */
static void row_op_cases(const char *op, int variants)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (int v = 0; v < variants; v++) {
			for (size_t w = 0; w < N_WIDTHS; w++) {
				op_case(op, dt, 7, widths[w], 0, v);
				op_case(op, dt, 5, widths[w], 3, v);
			}
			op_case(op, dt, 1, 4096, 0, v);    /* decode: one row */
			op_case(op, dt, 1, 4095, 0, v);    /* one odd row */
			op_case(op, dt, 3000, 64, 0, v);   /* many narrow rows */
			op_case(op, dt, 40, 7168, 8, v);   /* aligned padded rows */
			op_case(op, dt, 1100, 4096, 0, v); /* many rows: the shapes for many */
			op_case(op, dt, 3, 16384, 0, v);   /* the widest rows held in registers */
			op_case(op, dt, 2, 20000, 0, v);   /* past them: the streaming kernels */
			op_case(op, dt, 2, 262144, 0, v);  /* the widest supported row */
		}
	}
}

Test(gpu_unary, every_op_matches_cpu)
{
	for (const char *const *op = tc_unary_ops; *op != NULL; op++)
		row_op_cases(*op, 2);
}

Test(gpu_binary, every_op_matches_cpu_with_a_broadcast_row)
{
	for (const char *const *op = tc_binary_ops; *op != NULL; op++)
		row_op_cases(*op, 2);
}

/*
 * maximum and minimum with NaNs planted in both operands (every 7th of a,
 * every 11th of b; b the shape of a, and b a broadcast row): the CUDA result is NaN exactly where the CPU's is, and
 * elsewhere the same value (the larger or smaller input, exactly). The
 * norm-wise comparison of compare_call cannot take NaN outputs.
 */
Test(gpu_binary, maximum_and_minimum_propagate_nan_as_the_cpu_does)
{
	static const char *const ops[] = { "maximum", "minimum" };

	gpu_require();
	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 6; k++) {
			const tk_kernel_entry *e = tk_kernel_find(ops[o]);
			uint64_t rng = gpu_fresh_seed();
			cudaStream_t stream;
			tk_call c, dc;

			cr_assert_not_null(e);
			/* variant 0: b the shape of a, padded; 1: b one broadcast row */
			cr_assert(tc_build(&c, ops[o], tt_float_dtypes[k % 3], 4, 1000, 0,
			                   (int)(k / 3), &rng));
			for (int64_t i = 0; i < tk_numel(&c.in[0]); i += 7)
				tt_set(&c.in[0], i, NAN);
			for (int64_t i = 0; i < tk_numel(&c.in[1]); i += 11)
				tt_set(&c.in[1], i, NAN);
			tt_poison(&c.out[0]);
			dc = c;
			for (int i = 0; i < c.n_in; i++)
				dc.in[i].data = gpu_to_device(&c.in[i]);
			dc.out[0].data = gpu_to_device(&c.out[0]);
			cr_assert_eq(e->cpu(&c), TK_OK);
			cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
			cr_assert_eq(e->cuda(&dc, stream), TK_OK);
			cr_assert_eq(cudaStreamSynchronize(stream), cudaSuccess);
			cudaStreamDestroy(stream);

			tk_tensor got = c.out[0];
			size_t bytes = tt_span_bytes(&got);
			got.data = malloc(bytes);
			cr_assert_eq(
			        cudaMemcpy(got.data, dc.out[0].data, bytes, cudaMemcpyDeviceToHost),
			        cudaSuccess);
			int64_t bad = 0, nans = 0;
			for (int64_t i = 0; i < tk_numel(&got); i++) {
				double w = tt_get(&c.out[0], i), g = tt_get(&got, i);
				nans += isnan(w);
				bad += isnan(w) ? !isnan(g) : g != w;
			}
			cr_expect_gt(nans, 0, "%s: no NaN reached the output", ops[o]);
			cr_expect_eq(bad, 0,
			             "%s %s: %ld elements differ from the CPU (seed 0x%llx)",
			             ops[o], tk_dtype_name(got.dtype), (long)bad,
			             (unsigned long long)gpu_case_seed);
			free(got.data);
			for (int i = 0; i < c.n_in; i++)
				cudaFree(dc.in[i].data);
			cudaFree(dc.out[0].data);
			tc_free(&c);
		}
	}
}

Test(gpu_gated, silu_and_gelu_and_mul_match_cpu)
{
	row_op_cases("silu_and_mul", 1);
	row_op_cases("gelu_and_mul", 2);
}

Test(gpu_norm, every_norm_matches_cpu_residual_included)
{
	row_op_cases("rms_norm", 1);
	row_op_cases("layer_norm", 2);
	row_op_cases("fused_add_rms_norm", 1);
	row_op_cases("fused_add_layer_norm", 2);
}

/*
 * layer_norm and its fused form over many rows of 1024 to 4096, the shapes
 * of 2 and 4 vectors a thread and several rows a block: every dtype, with
 * and without a bias.
 */
Test(gpu_norm, layer_norms_of_many_rows_match_cpu)
{
	static const char *const ops[] = { "layer_norm", "fused_add_layer_norm" };
	static const int64_t ws[] = { 1024, 2048, 4096 };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < 2; v++) {
				for (size_t w = 0; w < 3; w++)
					op_case(ops[o], tt_float_dtypes[k], 900, ws[w], 0, v);
			}
		}
	}
}

Test(gpu_softmax, softmax_and_log_softmax_match_cpu_along_either_dim)
{
	row_op_cases("softmax", 1);
	row_op_cases("log_softmax", 2);
}

Test(gpu_reduce, sum_mean_amax_argmax_match_cpu_along_either_dim_with_keepdim)
{
	row_op_cases("sum", TC_VARIANTS);
	row_op_cases("mean", TC_VARIANTS);
	row_op_cases("amax", TC_VARIANTS);
	row_op_cases("argmax", TC_VARIANTS);
}

/*
 * Row r of x (width w) planted with what decides an argmax: 0 all -inf; 1
 * two NaNs and a +inf before them (the first NaN wins); 2 a maximum tied
 * three times, in different vectors; 3 a -0 before a +0 above negative
 * values (equal: the first wins); 4 the maximum in the last element only;
 * 5 a tie within one 16-byte vector. Rows 1 and 3 are left out with
 * `no_nan_or_zero` (amax: a NaN's payload and a zero's sign are not
 * compared bit for bit).
 */
static void plant_row(tk_tensor *x, int64_t r, int64_t w, int kind)
{
	int64_t at = r * w, a = w / 3, b = a + w / 3 + 1, v = (w / 16) * 8;

	for (int64_t i = 0; i < w; i++)
		tt_set(x, at + i, kind == 0 ? -INFINITY : -1.0 - (double)(i % 7) / 8.0);
	switch (kind) {
	case 1:
		tt_set(x, at + (a > 0 ? a - 1 : 0), INFINITY);
		tt_set(x, at + a, NAN);
		tt_set(x, at + b % w, NAN);
		break;
	case 2:
		tt_set(x, at + a, 1000.0);
		tt_set(x, at + b % w, 1000.0);
		tt_set(x, at + w - 1, 1000.0);
		break;
	case 3:
		tt_set(x, at + a, -0.0);
		tt_set(x, at + b % w, 0.0);
		break;
	case 4:
		tt_set(x, at + w - 1, 1000.0);
		break;
	case 5:
		tt_set(x, at + (v + 5) % w, 250.0);
		tt_set(x, at + (v + 3) % w, 250.0);
		break;
	}
}

static void planted_case(const char *op, tk_dtype dt, int64_t w, int no_nan_or_zero)
{
	static const int kinds[] = { 0, 1, 2, 3, 4, 5 };
	uint64_t rng = gpu_fresh_seed();
	char what[96];
	tk_call c;
	int64_t rows = 0;

	cr_assert(tc_build(&c, op, dt, 6, w, 0, 0, &rng), "no case for %s", op);
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		if (no_nan_or_zero && (kinds[k] == 1 || kinds[k] == 3))
			plant_row(&c.in[0], rows, w, 2);
		else
			plant_row(&c.in[0], rows, w, kinds[k]);
		rows++;
	}
	snprintf(what, sizeof(what), "6x%ld planted maxima", (long)w);
	compare_call(op, &c, what);
	tc_free(&c);
}

/*
 * NaNs, infinities, ties and signed zeros where the maxima are, at widths
 * that take the vector path (16-byte rows) and the scalar one (odd), up to
 * the widest row.
 */
Test(gpu_reduce, argmax_and_amax_follow_the_nan_and_tie_rules)
{
	static const int64_t ws[] = { 8, 24, 4096, 4097, 20000, 262144 };

	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
			planted_case("argmax", tt_float_dtypes[k], ws[i], 0);
			planted_case("amax", tt_float_dtypes[k], ws[i], 1);
		}
	}
}

Test(gpu_quant_fp8, per_tensor_and_per_token_codes_and_scales_match_cpu_exactly)
{
	row_op_cases("quant_fp8_per_tensor", TC_VARIANTS);
	row_op_cases("quant_fp8_per_token", TC_VARIANTS);
}

/*
 * A computed per-tensor scale over 64 MiB of bf16 and f16, more than 2/3
 * of an H200's L2: the quantizing pass walks the tiles last to first.
 * Every code and the scale exact.
 */
Test(gpu_quant_fp8, per_tensor_past_the_l2_walked_backwards_matches_cpu_exactly)
{
	op_case("quant_fp8_per_tensor", TK_BF16, 4096, 8192, 0, 0);
	op_case("quant_fp8_per_tensor", TK_F16, 4096, 8192, 0, 0);
	/* u8 codes, and a last tile the rows fill only in part */
	op_case("quant_fp8_per_tensor", TK_BF16, 4099, 8200, 0, 2);
}

/*
 * A computed per-tensor scale over dense tensors of 2 to 40 MiB, which the
 * SMs hold: one cooperative kernel reads x once, quantizing after a grid
 * barrier. bf16 of 32 MiB, f32 of 16 MiB (1025 vectors a row), f16 with u8
 * codes and rows that end mid-block; padded rows (not dense) take the two
 * kernels. Every code and the scale exact.
 */
Test(gpu_quant_fp8, per_tensor_held_on_chip_matches_cpu_exactly)
{
	op_case("quant_fp8_per_tensor", TK_BF16, 4096, 4096, 0, 0);
	op_case("quant_fp8_per_tensor", TK_F32, 1024, 4100, 0, 0);
	op_case("quant_fp8_per_tensor", TK_F16, 3001, 1032, 0, 2);
	op_case("quant_fp8_per_tensor", TK_BF16, 1000, 4096, 8, 0);
}

Test(gpu_rope, neox_and_gptj_match_cpu_with_computed_and_cached_angles)
{
	static const int64_t dims[] = { 2, 6, 64, 128, 130 };
	static const char *const ops[] = { "rope_neox", "rope_gptj" };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < TC_VARIANTS; v++) {
				for (size_t d = 0; d < 5; d++) {
					op_case(ops[o], tt_float_dtypes[k], 9, dims[d], 0, v);
					op_case(ops[o], tt_float_dtypes[k], 5, dims[d], 4, v);
				}
				op_case(ops[o], tt_float_dtypes[k], 1, 128, 0, v);
				op_case(ops[o], tt_float_dtypes[k], 700, 128, 0, v);
			}
		}
	}
}

/*
 * Rope of `tokens` tokens of hq q and hk k heads of 128 (the case's
 * variant: computed angles, a cache with half the dims rotated, i64
 * positions); with `outside`, every other token's position lies outside
 * the cache (negative or past its end) and must be left as it is.
 */
static void rope_heads_case(const char *op, tk_dtype dt, int64_t tokens, int64_t hq, int64_t hk,
                            int variant, int outside)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t sq[3] = { tokens, hq, 128 }, sk[3] = { tokens, hk, 128 };
	char what[96];
	double lo, hi;
	tk_call c;

	cr_assert(tc_build(&c, op, dt, tokens, 128, 0, variant, &rng));
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	c.in[0] = tt_tensor(dt, 3, sq, 0);
	c.in[1] = tt_tensor(dt, 3, sk, 0);
	tc_range(op, 0, &lo, &hi);
	tt_fill(&c.in[0], &rng, lo, hi);
	tt_fill(&c.in[1], &rng, lo, hi);
	if (outside) {
		cr_assert_eq(c.n_in, 4, "the outside case needs a cache");
		for (int64_t t = 1; t < tokens; t += 2)
			tt_set(&c.in[2], t, t % 4 == 1 ? -1.0 : (double)(c.in[3].shape[0] + t));
	}
	snprintf(what, sizeof(what), "%ld tokens of %ld + %ld heads variant %d%s", (long)tokens,
	         (long)hq, (long)hk, variant, outside ? " half outside the cache" : "");
	compare_call(op, &c, what);
	tc_free(&c);
}

/*
 * Decode-shaped rope: a few tokens of many heads (32 q and 8 k heads, as
 * Llama 3 8B), whose units the kernel deals out over several blocks a
 * token, each thread reading its unit before the token's angles are ready.
 */
Test(gpu_rope, a_few_tokens_of_many_heads_match_cpu)
{
	static const char *const ops[] = { "rope_neox", "rope_gptj" };
	static const int64_t tokens[] = { 1, 3 };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < TC_VARIANTS; v++) {
				for (size_t t = 0; t < 2; t++)
					rope_heads_case(ops[o], tt_float_dtypes[k], tokens[t], 32,
					                8, v, 0);
			}
		}
	}
}

/*
 * Prefill-sized rope, past the size where a thread takes four units: Llama
 * 3 8B heads over 2048 tokens, and 2600 tokens of 130-wide heads (pairs
 * one at a time: no vectors); then tokens outside the cache among others.
 */
Test(gpu_rope, prefill_sized_calls_and_positions_outside_the_cache_match_cpu)
{
	static const char *const ops[] = { "rope_neox", "rope_gptj" };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < TC_VARIANTS; v++) {
				rope_heads_case(ops[o], tt_float_dtypes[k], 2048, 32, 8, v, 0);
				op_case(ops[o], tt_float_dtypes[k], 2600, 130, 0, v);
			}
			rope_heads_case(ops[o], tt_float_dtypes[k], 9, 3, 2, 1, 1);
			rope_heads_case(ops[o], tt_float_dtypes[k], 4096, 32, 8, 1, 1);
		}
	}
}

Test(gpu_pool, max_and_avg_in_1d_2d_3d_match_cpu_max_exactly)
{
	static const char *const ops[] = { "max_pool1d", "max_pool2d", "max_pool3d",
		                           "avg_pool1d", "avg_pool2d", "avg_pool3d" };
	static const int64_t ws[] = { 3, 8, 17, 224, 2048 };

	for (int o = 0; o < 6; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < TC_VARIANTS; v++) {
				for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
					op_case(ops[o], tt_float_dtypes[k], 9, ws[w], 0, v);
					op_case(ops[o], tt_float_dtypes[k], 6, ws[w], 3, v);
					/* even rows, packed: 2x2 windows of exact halves */
					op_case(ops[o], tt_float_dtypes[k], 8, ws[w], 0, v);
				}
			}
		}
	}
}

Test(gpu_ops, every_launcher_accepts_zero_element_tensors)
{
	size_t count = 0;
	const tk_kernel_entry *t = tk_kernels(&count);
	cudaStream_t stream;

	gpu_require();
	cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
	for (size_t i = 0; i < count; i++) {
		uint64_t rng = 1;
		tk_call c;
		if (!tc_build(&c, t[i].op, TK_F32, 0, 8, 0, 0, &rng))
			continue;
		/* Device copies of what has bytes (a per-tensor fp8 scale is still written). */
		tk_call dc = c;
		for (int k = 0; k < c.n_in; k++)
			dc.in[k].data = gpu_to_device(&c.in[k]);
		for (int k = 0; k < c.n_out; k++)
			dc.out[k].data = gpu_to_device(&c.out[k]);
		cr_expect_eq(t[i].cuda(&dc, stream), TK_OK, "%s on 0 rows", t[i].op);
		cr_expect_eq(cudaStreamSynchronize(stream), cudaSuccess, "%s on 0 rows", t[i].op);
		for (int k = 0; k < c.n_in; k++)
			cudaFree(dc.in[k].data);
		for (int k = 0; k < c.n_out; k++)
			cudaFree(dc.out[k].data);
		tc_free(&c);
	}
	cr_expect_eq(cudaStreamSynchronize(stream), cudaSuccess);
	cudaStreamDestroy(stream);
}
