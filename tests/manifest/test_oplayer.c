/*
 * test_oplayer.c - oplayer_prepare: each validation rule refuses a
 * violating request with its status and a message naming op, argument and
 * rule; a valid request gets its kernel, ordered params with defaults, and
 * its roofline counts.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "manifest.h"
#include "oplayer.h"

static manifest *m;
static char err[1024];
static tk_call call;
static const tk_kernel_entry *kernel;
static op_cost cost;

static void setup(void)
{
	char e[4096] = "";

	cr_assert_eq(manifest_load(TILEOPS_SOURCE_DIR "/manifest", &m, e, sizeof(e)), 0, "%s", e);
	err[0] = 0;
}

static void teardown(void)
{
	manifest_free(m);
}

TestSuite(oplayer, .init = setup, .fini = teardown);

static tk_tensor T(tk_dtype dt, int ndim, int64_t d0, int64_t d1, int64_t d2)
{
	tk_tensor t;
	int64_t dims[3] = { d0, d1, d2 }, s = 1;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t.shape[i] = dims[i];
	for (int i = ndim - 1; i >= 0; i--) {
		t.stride[i] = s;
		s *= t.shape[i];
	}
	return t;
}

typedef struct req_builder {
	tk_tensor in[4], out[2];
	const char *names[4];
	tk_param values[4];
	op_request r;
} req_builder;

static void req(req_builder *b, const char *op, int n_in, int n_out)
{
	b->r = (op_request){ op, n_in, n_out, b->in, b->out, 0, b->names, b->values, 0 };
}

static void param(req_builder *b, const char *name, tk_param v)
{
	b->names[b->r.n_params] = name;
	b->values[b->r.n_params++] = v;
}

#define PI(x) ((tk_param){ .kind = TK_PARAM_INT, .v.i = (x) })
#define PF(x) ((tk_param){ .kind = TK_PARAM_FLOAT, .v.f = (x) })
#define PB(x) ((tk_param){ .kind = TK_PARAM_BOOL, .v.b = (x) })

static tileops_status prep(req_builder *b)
{
	return oplayer_prepare(m, &b->r, 0, &call, &kernel, &cost, err, sizeof(err));
}

static void refused(req_builder *b, tileops_status want, const char *msg)
{
	tileops_status st = prep(b);

	cr_assert_eq(st, want, "status %d, expected %d (%s)", st, want, err);
	cr_assert(strstr(err, msg), "message '%s' lacks '%s'", err, msg);
}

/* rms_norm over [2, 4096] bf16, valid until a test breaks it. */
static void rms(req_builder *b)
{
	req(b, "rms_norm", 2, 1);
	b->in[0] = T(TK_BF16, 2, 2, 4096, 0);
	b->in[1] = T(TK_BF16, 1, 4096, 0, 0);
	b->out[0] = T(TK_BF16, 2, 2, 4096, 0);
}

Test(oplayer, valid_request_gets_kernel_defaults_and_cost)
{
	req_builder b;

	rms(&b);
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(kernel, tk_kernel_find("rms_norm"));
	cr_assert_eq(call.n_in, 2);
	cr_assert_eq(call.n_out, 1);
	cr_assert_eq(call.in[1].shape[0], 4096);
	cr_assert_eq(call.n_params, 1);
	cr_assert_eq(call.params[0].kind, TK_PARAM_FLOAT);
	cr_assert_float_eq(call.params[0].v.f, 1e-6, 1e-15);
	cr_assert_float_eq(cost.flops, 4.0 * 2 * 4096, 1e-6);
	cr_assert_float_eq(cost.bytes, (2.0 * 2 * 4096 + 4096) * 2, 1e-6);
}

Test(oplayer, unknown_op_is_refused)
{
	req_builder b;

	req(&b, "foo", 0, 0);
	refused(&b, TILEOPS_ERR_UNKNOWN_OP, "unknown op 'foo'");
}

Test(oplayer, spec_op_is_refused_as_unsupported)
{
	req_builder b;

	manifest *spec = NULL;
	char e[4096] = "";

	/* tests/manifest/data/good.yaml declares `toy` with status spec. */
	cr_assert_eq(manifest_parse(TILEOPS_SOURCE_DIR "/tests/manifest/data/good.yaml", &spec, e,
	                            sizeof(e)),
	             0, "%s", e);
	req(&b, "toy", 1, 1);
	b.in[0] = b.out[0] = T(TK_F32, 1, 8, 0, 0);
	cr_assert_eq(oplayer_prepare(spec, &b.r, 0, &call, &kernel, &cost, err, sizeof(err)),
	             TILEOPS_ERR_UNSUPPORTED, "%s", err);
	cr_assert(strstr(err, "op 'toy' is declared but has no kernel yet"), "%s", err);
	manifest_free(spec);
}

Test(oplayer, wrong_input_and_output_counts_are_refused)
{
	req_builder b;

	rms(&b);
	b.r.n_in = 1;
	refused(&b, TILEOPS_ERR_INVALID_ARGUMENT, "rms_norm: expects 2 inputs (x, weight), got 1");
	rms(&b);
	b.r.n_out = 2;
	refused(&b, TILEOPS_ERR_INVALID_ARGUMENT, "rms_norm: expects 1 output, got 2");
}

Test(oplayer, same_as_dtype_rule_is_enforced)
{
	req_builder b;

	rms(&b);
	b.in[1].dtype = TK_F16;
	refused(&b, TILEOPS_ERR_DTYPE,
	        "rms_norm: weight has dtype f16, expected bf16 (same_as(x))");
}

Test(oplayer, dtype_union_is_enforced)
{
	req_builder b;

	req(&b, "add", 2, 1);
	b.in[0] = b.in[1] = b.out[0] = T(TK_I32, 1, 8, 0, 0);
	refused(&b, TILEOPS_ERR_DTYPE, "add: a has dtype i32, expected f32 | f16 | bf16");
	b.in[0].dtype = (tk_dtype)42;
	refused(&b, TILEOPS_ERR_DTYPE, "add: a has an invalid dtype (42)");
}

Test(oplayer, declared_shape_is_enforced_with_its_rule_text)
{
	req_builder b;

	rms(&b);
	b.in[1].shape[0] = 4095;
	refused(&b, TILEOPS_ERR_SHAPE,
	        "rms_norm: weight has shape [4095], expected [4096] (x.shape[-1])");
}

Test(oplayer, rank_is_enforced)
{
	req_builder b;

	rms(&b);
	b.in[0] = T(TK_BF16, 0, 0, 0, 0);
	refused(&b, TILEOPS_ERR_SHAPE, "rms_norm: x has rank 0, expected rank 1 to 8");
	rms(&b);
	b.in[1] = T(TK_BF16, 2, 1, 4096, 0);
	refused(&b, TILEOPS_ERR_SHAPE, "rms_norm: weight has rank 2, expected rank 1");
}

Test(oplayer, output_shape_is_enforced)
{
	req_builder b;

	rms(&b);
	b.out[0].shape[0] = 3;
	refused(&b, TILEOPS_ERR_SHAPE,
	        "rms_norm: out has shape [3, 4096], expected [2, 4096] "
	        "(x.shape)");
}

Test(oplayer, non_contiguous_last_dimension_is_refused)
{
	req_builder b;

	rms(&b);
	b.in[0].stride[1] = 2;
	refused(&b, TILEOPS_ERR_SHAPE, "rms_norm: x must be a contiguous tensor or row-strided");
}

Test(oplayer, broadcast_rule_names_the_shapes)
{
	req_builder b;

	req(&b, "mul", 2, 1);
	b.in[0] = b.out[0] = T(TK_F32, 2, 2, 4, 0);
	b.in[1] = T(TK_F32, 1, 4, 0, 0);
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	b.in[1] = T(TK_F32, 1, 3, 0, 0);
	refused(&b, TILEOPS_ERR_SHAPE,
	        "mul: a and b must broadcast to the shape of out (numpy "
	        "rules) (broadcastable(a, out) and broadcastable(b, out)); a has shape [2, 4], "
	        "b has shape [3], out has shape [2, 4]");
	/* Both sides broadcast: [3, 1, 5] and [4, 1] make [3, 4, 5]. */
	b.in[0] = T(TK_F32, 3, 3, 1, 5);
	b.in[1] = T(TK_F32, 2, 4, 1, 0);
	b.out[0] = T(TK_F32, 3, 3, 4, 5);
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	b.out[0] = T(TK_F32, 3, 3, 1, 5);
	refused(&b, TILEOPS_ERR_SHAPE, "b has shape [4, 1], out has shape [3, 1, 5]");
}

static void gemm(req_builder *b, int trans_b)
{
	req(b, "gemm", 2, 1);
	b->in[0] = T(TK_F16, 2, 8, 16, 0);
	b->in[1] = trans_b ? T(TK_F16, 2, 32, 16, 0) : T(TK_F16, 2, 16, 32, 0);
	b->out[0] = T(TK_F16, 2, 8, 32, 0);
}

Test(oplayer, gemm_params_convert_and_follow_kernel_order)
{
	req_builder b;

	gemm(&b, 1);
	param(&b, "trans_b", PI(1)); /* bool given as int 1 */
	param(&b, "alpha", PI(2));   /* float given as int */
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(call.n_in, 2, "an omitted optional bias leaves n_in at 2");
	cr_assert_eq(call.n_params, 2);
	cr_assert_eq(call.params[0].kind, TK_PARAM_FLOAT);
	cr_assert_float_eq(call.params[0].v.f, 2.0, 1e-12);
	cr_assert_eq(call.params[1].kind, TK_PARAM_BOOL);
	cr_assert_eq(call.params[1].v.b, 1);
	cr_assert_float_eq(cost.flops, 2.0 * 8 * 32 * 16, 1e-6);
}

Test(oplayer, gemm_inner_dimensions_and_bias_are_checked)
{
	req_builder b;

	gemm(&b, 0);
	b.in[1].shape[0] = 15;
	refused(&b, TILEOPS_ERR_SHAPE, "gemm: the inner dimensions of a and b must agree");
	gemm(&b, 0);
	b.r.n_in = 3;
	b.in[2] = T(TK_F16, 1, 5, 0, 0);
	refused(&b, TILEOPS_ERR_SHAPE, "gemm: bias has shape [5], expected [32] (N)");
	b.in[2].shape[0] = 32;
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(call.n_in, 3);
	cr_assert_float_eq(cost.flops, 2.0 * 8 * 32 * 16 + 8 * 32, 1e-6);
}

Test(oplayer, an_optional_input_left_out_keeps_the_ones_after_it)
{
	req_builder b;

	gemm(&b, 0);
	b.r.n_in = 4;
	b.in[3] = T(TK_F16, 2, 8, 32, 0); /* residual, with the bias left out */
	b.r.left_out = 1u << 2;
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(call.n_in, 4);
	cr_assert_float_eq(cost.flops, 2.0 * 8 * 32 * 16 + 8 * 32, 1e-6,
	                   "the residual's add counts, the absent bias's does not");
	b.in[3] = T(TK_F16, 2, 8, 31, 0);
	refused(&b, TILEOPS_ERR_SHAPE, "gemm: residual has shape [8, 31], expected [8, 32] (M, N)");
}

Test(oplayer, a_required_tensor_cannot_be_left_out)
{
	req_builder b;

	gemm(&b, 0);
	b.r.left_out = 1u << 1;
	refused(&b, TILEOPS_ERR_INVALID_ARGUMENT, "gemm: input b is required but was left out");
	gemm(&b, 0);
	b.r.left_out = 1u << TK_MAX_INPUTS;
	refused(&b, TILEOPS_ERR_INVALID_ARGUMENT, "gemm: output c is required but was left out");
}

Test(oplayer, param_out_of_range_is_refused)
{
	req_builder b;

	rms(&b);
	param(&b, "eps", PF(-1));
	refused(&b, TILEOPS_ERR_PARAM, "rms_norm: param 'eps' = -1 is out of range (0, 1]");
	rms(&b);
	param(&b, "eps", PF(0.0 / 0.0));
	refused(&b, TILEOPS_ERR_PARAM, "rms_norm: param 'eps' is NaN");
}

static void gelu(req_builder *b)
{
	req(b, "gelu", 1, 1);
	b->in[0] = b->out[0] = T(TK_BF16, 2, 4, 8, 0);
}

Test(oplayer, unknown_and_duplicate_params_are_refused)
{
	req_builder b;

	gelu(&b);
	param(&b, "foo", PI(1));
	refused(&b, TILEOPS_ERR_PARAM, "gelu: unknown param 'foo'");
	gelu(&b);
	param(&b, "approximate", PI(1));
	param(&b, "approximate", PI(0));
	refused(&b, TILEOPS_ERR_PARAM, "gelu: param 'approximate' is given twice");
}

Test(oplayer, param_values_and_types_are_enforced)
{
	req_builder b;

	gelu(&b);
	param(&b, "approximate", PI(2));
	refused(&b, TILEOPS_ERR_PARAM, "gelu: param 'approximate' = 2 is not one of {0, 1}");
	gelu(&b);
	param(&b, "approximate", PF(0.5));
	refused(&b, TILEOPS_ERR_PARAM, "gelu: param 'approximate' must be int, got float 0.5");
	gemm(&b, 0);
	param(&b, "trans_b", PI(2));
	refused(&b, TILEOPS_ERR_PARAM,
	        "gemm: param 'trans_b' must be bool (or int 0/1), got int 2");
	gelu(&b);
	param(&b, "approximate", PI(1));
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(call.params[0].v.i, 1);
}

Test(oplayer, missing_required_param_is_refused)
{
	char e[1024] = "";
	manifest *g;
	op_cost c;

	cr_assert_eq(manifest_parse(TILEOPS_SOURCE_DIR "/tests/manifest/data/good.yaml", &g, e,
	                            sizeof(e)),
	             0, "%s", e);
	const manifest_op *op = manifest_find(g, "scaled");
	cr_assert_eq(oplayer_check_workload(op, &op->workloads[0], TK_F32, &c, err, sizeof(err)),
	             TILEOPS_ERR_PARAM);
	cr_assert_str_eq(err, "scaled: missing required param 'factor'");
	manifest_free(g);
}

Test(oplayer, cuda_without_a_cuda_kernel_is_unsupported)
{
	req_builder b;

	if (tk_have_cuda())
		cr_skip_test("this build has CUDA kernels");
	rms(&b);
	cr_assert_eq(oplayer_prepare(m, &b.r, 1, &call, &kernel, &cost, err, sizeof(err)),
	             TILEOPS_ERR_UNSUPPORTED);
	cr_assert_str_eq(err, "rms_norm: no cuda kernel is registered");
}

Test(oplayer, null_arguments_are_refused)
{
	cr_assert_eq(oplayer_prepare(m, NULL, 0, &call, &kernel, &cost, err, sizeof(err)),
	             TILEOPS_ERR_INVALID_ARGUMENT);
}

/* ---- layouts: packed, row-strided, and what is neither ------------------- */

Test(oplayer, row_strided_tensors_are_taken_with_their_strides_passed_on)
{
	req_builder b;

	rms(&b);
	/* Every other 4096-wide row of a wider buffer, and a [2, 1, 4096]-like
	 * outer stride far larger than a row. */
	b.in[0].stride[0] = 3 * 4096;
	b.out[0].stride[0] = 5 * 4096;
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	cr_assert_eq(call.in[0].stride[0], 3 * 4096, "the kernel must see the view's strides");
	cr_assert_eq(call.out[0].stride[0], 5 * 4096);
}

Test(oplayer, q_k_and_v_columns_of_a_fused_projection_are_row_strided_for_rope)
{
	req_builder b;

	req(&b, "rope_neox", 3, 0);
	/* q [T, 32, 128] and k [T, 8, 128] inside rows of 48 heads. */
	b.in[0] = T(TK_BF16, 3, 4, 32, 128);
	b.in[1] = T(TK_BF16, 3, 4, 8, 128);
	b.in[2] = T(TK_I32, 1, 4, 0, 0);
	b.in[0].stride[0] = b.in[1].stride[0] = 48 * 128;
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
}

Test(oplayer, a_transposed_or_overlapping_layout_is_refused_naming_op_and_tensor)
{
	req_builder b;

	rms(&b);
	b.in[0].stride[0] = 4095; /* rows overlap */
	refused(&b, TILEOPS_ERR_SHAPE,
	        "rms_norm: x must be a contiguous tensor or row-strided (last dimension stride 1, "
	        "each outer stride at least the extent inside it); got shape [2, 4096] with "
	        "strides [4095, 1]");
	rms(&b);
	b.out[0].stride[0] = 0; /* broadcast: every row the same memory */
	refused(&b, TILEOPS_ERR_SHAPE, "rms_norm: out must be a contiguous tensor or row-strided");
	req(&b, "rope_neox", 3, 0);
	b.in[0] = T(TK_BF16, 3, 4, 32, 128);
	b.in[1] = T(TK_BF16, 3, 4, 8, 128);
	b.in[2] = T(TK_I32, 1, 4, 0, 0);
	b.in[1].stride[0] = 128; /* tokens and heads swapped */
	b.in[1].stride[1] = 4 * 128;
	refused(&b, TILEOPS_ERR_SHAPE, "rope_neox: k must be a contiguous tensor or row-strided");
}

Test(oplayer, a_tensor_marked_packed_takes_no_row_strides)
{
	req_builder b;

	req(&b, "quant_fp8_per_token", 1, 2);
	b.in[0] = T(TK_BF16, 2, 4, 64, 0);
	b.out[0] = T(TK_FP8_E4M3, 2, 4, 64, 0);
	b.out[1] = T(TK_F32, 2, 4, 1, 0);
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
	b.out[1].stride[0] = 2;
	refused(&b, TILEOPS_ERR_SHAPE,
	        "quant_fp8_per_token: scale must be a contiguous (packed row-major) tensor; got "
	        "shape [4, 1] with strides [2, 1]");
	/* Its input takes row strides. */
	b.out[1].stride[0] = 1;
	b.in[0].stride[0] = 128;
	cr_assert_eq(prep(&b), TILEOPS_OK, "%s", err);
}
