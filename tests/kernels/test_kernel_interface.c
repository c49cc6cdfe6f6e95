/*
 * test_kernel_interface.c - the L1 interface itself (tileops_kernels.h):
 * the PDL switch, the dtype and tensor helpers, the dispatch table (sorted,
 * complete, arity and params in order), and the f16, bf16 and fp8 e4m3
 * conversions (every code round-tripping, edge values, nearest rounding).
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/tk_ref_util.h"

/* ---- dtype and tensor helpers ----------------------------------------- */

/*
 * The programmatic-dependent-launch switch (tileops_kernels.h): on by
 * default, set only by the caller (tileopsd's `pdl` key), never from the
 * environment. A build without CUDA reports 0 and ignores the setter.
 */
Test(launch, pdl_is_on_by_default_and_set_returns_the_previous_setting)
{
	if (!tk_have_cuda()) {
		cr_expect_eq(tk_cuda_pdl(), 0);
		cr_expect_eq(tk_cuda_set_pdl(1), 0);
		cr_expect_eq(tk_cuda_pdl(), 0);
		return;
	}
	cr_expect_eq(tk_cuda_pdl(), 1);
	cr_expect_eq(tk_cuda_set_pdl(0), 1);
	cr_expect_eq(tk_cuda_pdl(), 0);
	cr_expect_eq(tk_cuda_set_pdl(1), 0);
	cr_expect_eq(tk_cuda_pdl(), 1);
}

Test(launch, the_environment_does_not_change_the_switch)
{
	setenv("TILEOPS_PDL", "0", 1);
	cr_expect_eq(tk_cuda_pdl(), tk_have_cuda() ? 1 : 0,
	             "L1 read TILEOPS_PDL: kernels take no settings from the environment");
	unsetenv("TILEOPS_PDL");
}

Test(dtype, sizes_and_names_round_trip_through_parse)
{
	static const struct {
		tk_dtype dt;
		size_t size;
		const char *name;
	} want[] = {
		{ TK_F32, 4, "f32" },           { TK_F16, 2, "f16" }, { TK_BF16, 2, "bf16" },
		{ TK_I32, 4, "i32" },           { TK_I64, 8, "i64" }, { TK_U8, 1, "u8" },
		{ TK_FP8_E4M3, 1, "fp8_e4m3" },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cr_expect_eq(tk_dtype_size(want[i].dt), want[i].size);
		cr_expect_str_eq(tk_dtype_name(want[i].dt), want[i].name);
		cr_expect_eq(tk_dtype_parse(want[i].name), want[i].dt);
	}
}

Test(dtype, invalid_values_have_size_zero_and_name_invalid)
{
	cr_expect_eq(tk_dtype_size(TK_DTYPE_INVALID), 0);
	cr_expect_eq(tk_dtype_size(TK_DTYPE_COUNT), 0);
	cr_expect_eq(tk_dtype_size((tk_dtype)-3), 0);
	cr_expect_str_eq(tk_dtype_name(TK_DTYPE_COUNT), "invalid");
	cr_expect_eq(tk_dtype_parse("float32"), TK_DTYPE_INVALID);
	cr_expect_eq(tk_dtype_parse("F32"), TK_DTYPE_INVALID);
	cr_expect_eq(tk_dtype_parse(""), TK_DTYPE_INVALID);
	cr_expect_eq(tk_dtype_parse(NULL), TK_DTYPE_INVALID);
}

Test(tensor, numel_is_the_shape_product_and_one_for_scalars)
{
	tk_tensor t = { .ndim = 3, .shape = { 2, 3, 5 } };
	tk_tensor s = { .ndim = 0 };
	tk_tensor z = { .ndim = 2, .shape = { 4, 0 } };

	cr_expect_eq(tk_numel(&t), 30);
	cr_expect_eq(tk_numel(&s), 1);
	cr_expect_eq(tk_numel(&z), 0);
}

Test(tensor, set_contiguous_gives_packed_row_major_strides)
{
	tk_tensor t = { .ndim = 3, .shape = { 2, 3, 5 } };

	tk_set_contiguous(&t);
	cr_expect_eq(t.stride[0], 15);
	cr_expect_eq(t.stride[1], 5);
	cr_expect_eq(t.stride[2], 1);
	cr_expect(tk_is_contiguous(&t));
	t.stride[1] = 6;
	cr_expect_not(tk_is_contiguous(&t), "a padded row is not packed");
	t.stride[1] = 5;
	t.stride[2] = 2;
	cr_expect_not(tk_is_contiguous(&t));
}

Test(tensor, strides_of_size_one_dims_do_not_affect_contiguity)
{
	tk_tensor t = { .ndim = 3, .shape = { 4, 1, 8 }, .stride = { 8, 999, 1 } };
	tk_tensor s = { .ndim = 0 };

	cr_expect(tk_is_contiguous(&t));
	cr_expect(tk_is_contiguous(&s));
}

/* ---- dispatch table ---------------------------------------------------- */

Test(table, is_sorted_by_op_name_and_every_entry_is_found)
{
	size_t n = 0;
	const tk_kernel_entry *t = tk_kernels(&n);

	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			cr_expect_lt(strcmp(t[i - 1].op, t[i].op), 0, "%s before %s", t[i - 1].op,
			             t[i].op);
		cr_expect_eq(tk_kernel_find(t[i].op), &t[i]);
		cr_expect_not_null(t[i].cpu, "%s has no CPU reference", t[i].op);
		cr_expect_not_null(t[i].params);
		if (!tk_have_cuda())
			cr_expect_null(t[i].cuda, "%s has a CUDA fn in a CPU build", t[i].op);
		else
			cr_expect_not_null(t[i].cuda, "%s has no CUDA launcher", t[i].op);
	}
	cr_expect_null(tk_kernel_find("no_such_op"));
	cr_expect_null(tk_kernel_find(""));
	cr_expect_null(tk_kernel_find(NULL));
}

static void expect_entry(const char *op, int n_in, int n_out, const char *const *params)
{
	const tk_kernel_entry *e = ref_entry(op);
	int i = 0;

	cr_expect_eq(e->n_in, n_in, "%s n_in", op);
	cr_expect_eq(e->n_out, n_out, "%s n_out", op);
	for (; params[i] != NULL; i++) {
		cr_assert_not_null(e->params[i], "%s lacks param %s", op, params[i]);
		cr_expect_str_eq(e->params[i], params[i], "%s param %d", op, i);
	}
	cr_expect_null(e->params[i], "%s has extra params", op);
}

Test(table, lists_every_op_with_its_arity_and_params_in_order)
{
	static const char *const none[] = { NULL };
	static const char *const gelu[] = { "approximate", NULL };
	static const char *const gemm[] = { "alpha", "trans_b", NULL };
	static const char *const eps[] = { "eps", NULL };
	static const char *const dimkeep[] = { "dim", "keepdim", NULL };
	static const char *const rope[] = { "rotary_dim", "theta", NULL };
	static const char *const max2[] = { "kernel_h",  "kernel_w",  "stride_h",   "stride_w",
		                            "padding_h", "padding_w", "dilation_h", "dilation_w",
		                            "ceil_mode", NULL };
	static const char *const avg1[] = { "kernel_w",  "stride_w",          "padding_w",
		                            "ceil_mode", "count_include_pad", NULL };
	static const char *const clamp[] = { "min_value", "max_value", NULL };
	static const char *const attn[] = { "causal", "scale", NULL };
	static const char *const scale[] = { "scale", NULL };
	static const char *const sample[] = { "temperature", "top_k",  "top_p", "min_p",
		                              "seed",        "offset", NULL };
	static const char *const moe_route[] = { "top_k",   "sigmoid",    "renormalize",
		                                 "n_group", "topk_group", "routed_scaling_factor",
		                                 NULL };
	static const char *const moe_gemm[] = { "block_m", "top_k", NULL };
	static const char *const page_size[] = { "page_size", NULL };
	size_t n = 0;

	tk_kernels(&n);
	cr_expect_eq(n, 69);
	expect_entry("add", 2, 1, none);
	expect_entry("pow", 2, 1, none);
	expect_entry("exp", 1, 1, none);
	expect_entry("clamp", 1, 1, clamp);
	expect_entry("gelu", 1, 1, gelu);
	expect_entry("gelu_and_mul", 1, 1, gelu);
	expect_entry("silu_and_mul", 1, 1, none);
	expect_entry("rms_norm", 2, 1, eps);
	expect_entry("layer_norm", 3, 1, eps);
	expect_entry("fused_add_rms_norm", 3, 1, eps);
	expect_entry("fused_add_layer_norm", 4, 1, eps);
	expect_entry("softmax", 1, 1, none);
	expect_entry("argmax", 1, 1, dimkeep);
	expect_entry("rope_neox", 4, 0, rope);
	expect_entry("max_pool2d", 1, 1, max2);
	expect_entry("avg_pool1d", 1, 1, avg1);
	expect_entry("quant_fp8_per_tensor", 2, 2, none);
	expect_entry("quant_fp8_per_token", 1, 2, none);
	expect_entry("gemm", 4, 1, gemm);
	expect_entry("bmm", 2, 1, gemm);
	expect_entry("gemm_fp8", 6, 1, (const char *const[]){ "scale_layout", NULL });
	expect_entry("bmm_fp8", 4, 1, none);
	expect_entry("quant_fp8_per_token_group", 1, 2,
	             (const char *const[]){ "group_size", NULL });
	expect_entry("rms_norm_quant_fp8", 3, 2, eps);
	expect_entry("attention_prefill", 3, 2, attn);
	expect_entry("attention_decode", 4, 1, scale);
	expect_entry("attention_decode_paged", 5, 1, scale);
	expect_entry("kv_cache_append", 5, 0, none);
	expect_entry("embedding", 2, 1, none);
	expect_entry("gather_rows", 2, 1, none);
	expect_entry("decode_advance", 4, 2, page_size);
	expect_entry("sample", 7, 1, sample);
	expect_entry("moe_route", 2, 2, moe_route);
	expect_entry("moe_gate_up", 5, 1, moe_gemm);
	cr_expect_eq(tk_kernel_find("gemm")->workspace, TK_WORKSPACE_BYTES,
	             "gemm can use workspace for split-K");
	cr_expect_eq(tk_kernel_find("add")->workspace, 0);
}

/* ---- float conversions ------------------------------------------------- */

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

Test(convert, every_finite_f16_round_trips_exactly)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = tk_f16_to_f32((uint16_t)h);
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
			cr_assert(isnan(f), "0x%04x should decode to NaN", h);
			cr_assert(isnan(tk_f16_to_f32(tk_f32_to_f16(f))));
			continue;
		}
		cr_assert_eq(tk_f32_to_f16(f), h, "0x%04x -> %g -> 0x%04x", h, f, tk_f32_to_f16(f));
	}
}

Test(convert, f16_edge_values)
{
	cr_expect_eq(tk_f32_to_f16(65504.0f), 0x7bff);
	cr_expect_eq(tk_f32_to_f16(65519.0f), 0x7bff, "below the midpoint stays finite");
	cr_expect_eq(tk_f32_to_f16(65520.0f), 0x7c00, "the midpoint ties to infinity");
	cr_expect_eq(tk_f32_to_f16(1e9f), 0x7c00);
	cr_expect_eq(tk_f32_to_f16(INFINITY), 0x7c00);
	cr_expect_eq(tk_f32_to_f16(-INFINITY), 0xfc00);
	cr_expect_eq(tk_f16_to_f32(0x7c00), INFINITY);
	cr_expect_eq(tk_f32_to_f16(0x1p-24f), 0x0001, "smallest subnormal");
	cr_expect_eq(tk_f32_to_f16(0x1p-25f), 0x0000, "half the smallest ties to even zero");
	cr_expect_eq(tk_f32_to_f16(0x1.8p-24f), 0x0002, "1.5 ulp ties to even 2");
	cr_expect_eq(tk_f32_to_f16(0x1p-14f), 0x0400, "smallest normal");
	cr_expect_eq(tk_f32_to_f16(0x1.ff8p-15f), 0x03ff, "largest subnormal");
	cr_expect_eq(tk_f32_to_f16(0x1.ffcp-15f), 0x0400, "ties to even into the normals");
	cr_expect_eq(tk_f32_to_f16(1.0f + 0x1p-11f), 0x3c00, "tie to even");
	cr_expect_eq(tk_f32_to_f16(1.0f + 0x3p-11f), 0x3c02, "tie to even, upwards");
	cr_expect_eq(tk_f32_to_f16(-0.0f), 0x8000);
	cr_expect_eq(tk_f32_to_f16(1e-30f), 0x0000);
	cr_expect_eq(tk_f16_to_f32(0x0001), 0x1p-24f);
	uint16_t qn = tk_f32_to_f16(NAN);
	cr_expect_eq(qn & 0x7c00, 0x7c00);
	cr_expect_neq(qn & 0x3ff, 0, "NaN must not become infinity");
	cr_expect_neq(tk_f32_to_f16(bits_f32(0x7f800001)) & 0x3ff, 0, "signalling NaN stays NaN");
}

Test(convert, every_finite_bf16_round_trips_exactly)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = tk_bf16_to_f32((uint16_t)h);
		if ((h & 0x7f80) == 0x7f80 && (h & 0x7f)) {
			cr_assert(isnan(f));
			cr_assert(isnan(tk_bf16_to_f32(tk_f32_to_bf16(f))));
			continue;
		}
		cr_assert_eq(tk_f32_to_bf16(f), h, "0x%04x", h);
	}
}

Test(convert, bf16_edge_values)
{
	cr_expect_eq(tk_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80, "tie to even");
	cr_expect_eq(tk_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82, "tie to even, upwards");
	cr_expect_eq(tk_f32_to_bf16(1.0f + 0x1.2p-8f), 0x3f81, "above the tie");
	cr_expect_eq(tk_f32_to_bf16(FLT_MAX), 0x7f80, "beyond the largest bf16 rounds to inf");
	cr_expect_eq(tk_f32_to_bf16(bits_f32(0x7f7f7fff)), 0x7f7f);
	cr_expect_eq(tk_f32_to_bf16(INFINITY), 0x7f80);
	cr_expect_eq(tk_f32_to_bf16(-INFINITY), 0xff80);
	cr_expect_eq(tk_f32_to_bf16(bits_f32(0x00010000)), 0x0001, "subnormal kept");
	cr_expect_eq(tk_f32_to_bf16(bits_f32(0x00008000)), 0x0000,
	             "half a subnormal ulp ties to 0");
	uint16_t qn = tk_f32_to_bf16(bits_f32(0x7f800001));
	cr_expect_eq(qn & 0x7f80, 0x7f80);
	cr_expect_neq(qn & 0x7f, 0, "a NaN with low payload must not become infinity");
	cr_expect(isnan(tk_bf16_to_f32(tk_f32_to_bf16(-NAN))));
}

Test(convert, every_fp8_e4m3_round_trips_exactly)
{
	for (uint32_t v = 0; v < 0x100; v++) {
		float f = tk_fp8e4m3_to_f32((uint8_t)v);
		if ((v & 0x7f) == 0x7f) {
			cr_assert(isnan(f), "0x%02x is NaN", v);
			continue;
		}
		cr_assert(!isnan(f) && !isinf(f), "0x%02x is finite", v);
		cr_assert_eq(tk_f32_to_fp8e4m3(f), v, "0x%02x -> %g", v, f);
	}
}

Test(convert, fp8_e4m3_edge_values)
{
	cr_expect_eq(tk_fp8e4m3_to_f32(0x7e), 448.0f, "largest finite");
	cr_expect_eq(tk_fp8e4m3_to_f32(0x01), 0x1p-9f, "smallest subnormal");
	cr_expect_eq(tk_fp8e4m3_to_f32(0x08), 0x1p-6f, "smallest normal");
	cr_expect_eq(tk_f32_to_fp8e4m3(448.0f), 0x7e);
	cr_expect_eq(tk_f32_to_fp8e4m3(464.0f), 0x7e, "overflow saturates");
	cr_expect_eq(tk_f32_to_fp8e4m3(1e6f), 0x7e, "overflow saturates");
	cr_expect_eq(tk_f32_to_fp8e4m3(-1e6f), 0xfe);
	cr_expect_eq(tk_f32_to_fp8e4m3(INFINITY), 0x7e, "no infinity: saturate");
	cr_expect_eq(tk_f32_to_fp8e4m3(-INFINITY), 0xfe);
	cr_expect_eq(tk_f32_to_fp8e4m3(NAN) & 0x7f, 0x7f);
	cr_expect_eq(tk_f32_to_fp8e4m3(-NAN), 0xff);
	cr_expect_eq(tk_f32_to_fp8e4m3(0x1p-10f), 0x00, "half the smallest ties to zero");
	cr_expect_eq(tk_f32_to_fp8e4m3(0x1.8p-9f), 0x02, "1.5 ulp ties to even 2");
	cr_expect_eq(tk_f32_to_fp8e4m3(0x1.f8p-7f), 0x08, "rounds up into the normals");
	cr_expect_eq(tk_f32_to_fp8e4m3(1.0625f), 0x38, "tie to even");
	cr_expect_eq(tk_f32_to_fp8e4m3(1.1875f), 0x3a, "tie to even, upwards");
	cr_expect_eq(tk_f32_to_fp8e4m3(-0.0f), 0x80);
}

/* Every conversion picks a nearest representable value. */
typedef float (*decode_fn)(uint32_t);
typedef uint32_t (*encode_fn)(float);

static float dec_f16(uint32_t v)
{
	return tk_f16_to_f32((uint16_t)v);
}
static uint32_t enc_f16(float f)
{
	return tk_f32_to_f16(f);
}
static float dec_bf16(uint32_t v)
{
	return tk_bf16_to_f32((uint16_t)v);
}
static uint32_t enc_bf16(float f)
{
	return tk_f32_to_bf16(f);
}
static float dec_e4m3(uint32_t v)
{
	return tk_fp8e4m3_to_f32((uint8_t)v);
}
static uint32_t enc_e4m3(float f)
{
	return tk_f32_to_fp8e4m3(f);
}

static void expect_nearest(decode_fn dec, encode_fn enc, double range, const char *what)
{
	uint64_t rng = ref_seed(what);

	for (int i = 0; i < 200000; i++) {
		double mag = pow(2.0, tt_rand_uniform(&rng, -30.0, log2(range)));
		float f = (float)(tt_rand_u64(&rng) & 1 ? mag : -mag);
		uint32_t v = enc(f);
		double err = fabs((double)dec(v) - f);
		/* Neighbours by magnitude: the code one below and one above. */
		for (int dlt = -1; dlt <= 1; dlt += 2) {
			uint32_t w = v + (uint32_t)dlt;
			float g = dec(w);
			if ((v & 0x7fff) == 0 && dlt < 0)
				continue;
			if (isnan(g) || isinf(g))
				continue;
			cr_assert_leq(err, fabs((double)g - f),
			              "%s: %a encodes to 0x%x, 0x%x is nearer", what, f, v, w);
		}
	}
}

Test(convert, encodings_pick_a_nearest_value)
{
	expect_nearest(dec_f16, enc_f16, 65504.0, "f16");
	expect_nearest(dec_bf16, enc_bf16, 1e38, "bf16");
	expect_nearest(dec_e4m3, enc_e4m3, 448.0, "fp8_e4m3");
}
