/*
 * test_cpu_kernels.c - the CPU references against plain double-precision
 * arithmetic, the float conversions, the dtype helpers and the dispatch
 * table.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/tk_op_cases.h"

/* Norm-wise tolerance of a reference against double arithmetic. */
static double ref_tol(tk_dtype dt)
{
	return dt == TK_F32 ? 2e-6 : dt == TK_F16 ? 1e-3 : 8e-3;
}

static uint64_t seed_for(const char *what)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL;

	for (const char *p = what; *p; p++)
		s = (s ^ (uint64_t)(unsigned char)*p) * 0x100000001b3ULL;
	return s | 1;
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

static const tk_kernel_entry *entry(const char *op)
{
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert_not_null(e, "no table entry for %s", op);
	return e;
}

/* ---- dtype and tensor helpers ----------------------------------------- */

/*
 * The programmatic-dependent-launch switch (tileops_kernels.h): on unless
 * TILEOPS_PDL=0 when first read, set from code after. Each Criterion test
 * runs in a process of its own, so each reads the environment afresh. A
 * build without CUDA reports 0 and ignores the setter.
 */
Test(launch, pdl_is_on_by_default_and_set_returns_the_previous_setting)
{
	unsetenv("TILEOPS_PDL");
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

Test(launch, tileops_pdl_0_in_the_environment_turns_it_off)
{
	setenv("TILEOPS_PDL", "0", 1);
	cr_expect_eq(tk_cuda_pdl(), 0);
	if (tk_have_cuda()) {
		cr_expect_eq(tk_cuda_set_pdl(1), 0);
		cr_expect_eq(tk_cuda_pdl(), 1);
	}
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
	const tk_kernel_entry *e = entry(op);
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
	size_t n = 0;

	tk_kernels(&n);
	cr_expect_eq(n, 55);
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
	expect_entry("attention_prefill", 3, 2, attn);
	expect_entry("attention_decode", 4, 1, scale);
	expect_entry("attention_decode_paged", 5, 1, scale);
	expect_entry("kv_cache_append", 5, 0, none);
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
	uint64_t rng = seed_for(what);

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

/* ---- elementwise ------------------------------------------------------- */

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
	uint64_t rng = seed_for(op) ^ (uint64_t)(nda * 131 + ndb * 7 + pad + dt);
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

	cr_assert_eq(entry(op)->cpu(&c), TK_OK, "%s %s", op, tk_dtype_name(dt));
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
	cr_expect_eq(entry("add")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[1]);
	c.in[1] = tt_tensor(TK_F16, 2, s5x7, 0);
	cr_expect_eq(entry("add")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
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

static void check_unary(const char *op, double (*ref)(double), int n_params, tk_param p,
                        tk_dtype dt, int64_t rows, int64_t width, int64_t pad)
{
	uint64_t rng = seed_for(op) ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[2] = { rows, width };
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = n_params };

	c.params[0] = p;
	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad * 2);
	tt_fill(&c.in[0], &rng, -6.0, 6.0);
	cr_assert_eq(entry(op)->cpu(&c), TK_OK);
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

static const int64_t widths[] = { 1, 7, 4095 };

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
	cr_assert_eq(entry("gelu")->cpu(&c), TK_OK);
	e = ((float *)c.out[0].data)[0];
	c.params[0] = tt_param_int(1);
	cr_assert_eq(entry("gelu")->cpu(&c), TK_OK);
	t = ((float *)c.out[0].data)[0];
	cr_expect_float_eq(e, (float)ref_gelu_erf(1.5), 1e-6);
	cr_expect_float_eq(t, (float)ref_gelu_tanh(1.5), 1e-6);
	cr_expect_neq(e, t);
	tt_free(&c.in[0]);
	tt_free(&c.out[0]);
}

/* ---- row reductions ---------------------------------------------------- */

static void check_rms_norm(tk_dtype dt, int64_t rows, int64_t width, int64_t pad)
{
	uint64_t rng = seed_for("rms_norm") ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[3] = { 2, rows, width };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 1 };
	double eps = 1e-5;

	c.params[0] = tt_param_float(eps);
	c.in[0] = tt_tensor(dt, 3, shape, pad);
	c.in[1] = tt_tensor(dt, 1, &width, 0);
	c.out[0] = tt_tensor(dt, 3, shape, pad + 2);
	tt_fill(&c.in[0], &rng, -3.0, 3.0);
	tt_fill(&c.in[1], &rng, 0.5, 1.5);
	cr_assert_eq(entry("rms_norm")->cpu(&c), TK_OK);
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
	cr_expect_eq(entry("rms_norm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

static void check_softmax(tk_dtype dt, int64_t rows, int64_t width, int64_t pad, double shift)
{
	uint64_t rng = seed_for("softmax") ^ (uint64_t)(rows * 1000 + width + pad + dt);
	int64_t shape[2] = { rows, width };
	tk_call c = { .n_in = 1, .n_out = 1 };

	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad + 1);
	tt_fill(&c.in[0], &rng, shift - 4.0, shift + 4.0);
	cr_assert_eq(entry("softmax")->cpu(&c), TK_OK);
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

/* ---- gemm -------------------------------------------------------------- */

static void check_gemm(tk_dtype dt, int64_t m, int64_t n, int64_t k, int trans_b, int bias,
                       double alpha, int64_t pad)
{
	uint64_t rng = seed_for("gemm") ^ (uint64_t)(m * 7919 + n * 31 + k + trans_b + dt);
	int64_t sa[2] = { m, k }, sb[2] = { k, n }, sc[2] = { m, n };
	tk_call c = { .n_in = bias ? 3 : 2, .n_out = 1, .n_params = 2 };

	if (trans_b) {
		sb[0] = n;
		sb[1] = k;
	}
	c.params[0] = tt_param_float(alpha);
	c.params[1] = tt_param_bool(trans_b);
	c.in[0] = tt_tensor(dt, 2, sa, pad);
	c.in[1] = tt_tensor(dt, 2, sb, pad + 1);
	if (bias)
		c.in[2] = tt_tensor(dt, 1, &n, 0);
	c.out[0] = tt_tensor(dt, 2, sc, pad + 2);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	tt_fill(&c.in[1], &rng, -1.0, 1.0);
	if (bias)
		tt_fill(&c.in[2], &rng, -1.0, 1.0);
	cr_assert_eq(entry("gemm")->cpu(&c), TK_OK);
	double *want = malloc(sizeof(double) * (size_t)(m * n));
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double acc = 0.0;
			for (int64_t p = 0; p < k; p++) {
				int64_t bi = trans_b ? j * k + p : p * n + j;
				acc += tt_get(&c.in[0], i * k + p) * tt_get(&c.in[1], bi);
			}
			want[i * n + j] = alpha * acc + (bias ? tt_get(&c.in[2], j) : 0.0);
		}
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "gemm %s %ldx%ldx%ld tb %d",
	              tk_dtype_name(dt), (long)m, (long)n, (long)k, trans_b);
	free(want);
	for (int i = 0; i < c.n_in; i++)
		tt_free(&c.in[i]);
	tt_free(&c.out[0]);
}

Test(gemm, matches_double_arithmetic_for_both_b_layouts_alpha_and_bias)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		check_gemm(dt, 1, 1, 1, 0, 0, 1.0, 0);
		check_gemm(dt, 7, 5, 3, 0, 0, 1.0, 0);
		check_gemm(dt, 7, 5, 3, 1, 0, 1.0, 0);
		check_gemm(dt, 33, 65, 129, 0, 1, 0.5, 0);
		check_gemm(dt, 33, 65, 129, 1, 1, -2.0, 3);
		check_gemm(dt, 17, 9, 257, 0, 0, 1.0, 1);
	}
}

Test(gemm, refuses_mismatched_inner_dims)
{
	int64_t sa[2] = { 4, 8 }, sb[2] = { 7, 3 }, sc[2] = { 4, 3 };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };

	c.params[0] = tt_param_float(1.0);
	c.params[1] = tt_param_bool(0);
	c.in[0] = tt_tensor(TK_F32, 2, sa, 0);
	c.in[1] = tt_tensor(TK_F32, 2, sb, 0);
	c.out[0] = tt_tensor(TK_F32, 2, sc, 0);
	cr_expect_eq(entry("gemm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

/* ---- empty tensors ----------------------------------------------------- */

Test(kernels, every_op_accepts_zero_element_tensors)
{
	int64_t s0x8[2] = { 0, 8 }, s8x8[2] = { 8, 8 };
	size_t count = 0;
	const tk_kernel_entry *t = tk_kernels(&count);

	for (size_t i = 0; i < count; i++) {
		uint64_t rng = 1;
		tk_call c;
		if (tc_build(&c, t[i].op, TK_F32, 0, 8, 0, 0, &rng)) {
			cr_expect_eq(t[i].cpu(&c), TK_OK, "%s on 0 rows", t[i].op);
			tc_free(&c);
			continue;
		}
		if (strcmp(t[i].op, "gemm") != 0)
			continue; /* spin has its own tests */
		/* gemm: a [0, 8] times b [8, 8] */
		memset(&c, 0, sizeof(c));
		c.n_in = 2;
		c.n_out = 1;
		c.n_params = 2;
		c.params[0] = tt_param_float(1.0);
		c.params[1] = tt_param_bool(0);
		c.in[0] = tt_tensor(TK_F32, 2, s0x8, 0);
		c.in[1] = tt_tensor(TK_F32, 2, s8x8, 0);
		c.out[0] = tt_tensor(TK_F32, 2, s0x8, 0);
		cr_expect_eq(t[i].cpu(&c), TK_OK, "%s on [0, 8]", t[i].op);
		tc_free(&c);
	}
}
