/*
 * parity_elementwise.c - the elementwise ops' CUDA kernels against their
 * CPU references: every manifest workload (parity.h), then what no
 * workload has: odd widths, padded rows, broadcasting (a row, a column, a
 * scalar, four dims), rows past the grid's height, a misaligned operand,
 * NaNs through maximum and minimum, the gated forms, empty tensors, and a
 * chain of dependent launches with and without PDL.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu_util.h"
#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(elementwise)

static const char *const unary_ops[] = { "exp",       "log",        "sqrt",    "rsqrt", "abs",
	                                 "neg",       "reciprocal", "sigmoid", "tanh",  "erf",
	                                 "relu",      "gelu",       "silu",    "mish",  "softplus",
	                                 "hardswish", "leaky_relu", "clamp",   NULL };
static const char *const binary_ops[] = { "add",     "sub",     "mul", "div",
	                                  "maximum", "minimum", "pow", NULL };

/* The params a unary op's variant 0 or 1 runs with (as the CPU tests use them). */
static void unary_params(parity_case *c, const char *op, int variant)
{
	if (!strcmp(op, "gelu")) {
		parity_param_int(c, "approximate", variant & 1);
	} else if (!strcmp(op, "softplus")) {
		parity_param_float(c, "beta", variant ? 2.0 : 1.0);
		parity_param_float(c, "threshold", variant ? 3.0 : 20.0);
	} else if (!strcmp(op, "leaky_relu")) {
		parity_param_float(c, "negative_slope", variant ? 0.2 : 0.01);
	} else if (!strcmp(op, "clamp")) {
		parity_param_float(c, "min_value", -1.5);
		parity_param_float(c, "max_value", variant ? INFINITY : 0.75);
	}
}

/*
 * One call of `op` over rows x width: x for unary ops; a with b of a's
 * shape (variant 0) or one broadcast row (variant 1) for binary ones;
 * x [rows, 2 width] for the gated ones (gelu's form by variant).
 */
static void row_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                     int variant)
{
	parity_case c;
	char what[64];

	snprintf(what, sizeof(what), "variant %d", variant);
	parity_special(&c, op, dt, what);
	c.pad = pad;
	if (!strcmp(op, "silu_and_mul") || !strcmp(op, "gelu_and_mul")) {
		parity_shape(&c, "x", 2, (int64_t[]){ rows, 2 * width });
		if (op[0] == 'g')
			parity_param_int(&c, "approximate", variant & 1);
	} else if (parity_tensor_index(&c, "b") >= 0) {
		parity_shape(&c, "a", 2, (int64_t[]){ rows, width });
		if (variant == 1)
			parity_shape(&c, "b", 1, (int64_t[]){ width });
		else
			parity_shape(&c, "b", 2, (int64_t[]){ rows, width });
	} else {
		parity_shape(&c, "x", 2, (int64_t[]){ rows, width });
		unary_params(&c, op, variant);
	}
	parity_check(&c);
}

Test(parity_elementwise, every_unary_op_matches_cpu_on_odd_widths_and_padded_rows)
{
	for (const char *const *op = unary_ops; *op != NULL; op++)
		parity_row_cases(*op, 2, row_case);
}

Test(parity_elementwise, every_binary_op_matches_cpu_with_a_broadcast_row)
{
	for (const char *const *op = binary_ops; *op != NULL; op++)
		parity_row_cases(*op, 2, row_case);
}

Test(parity_elementwise, silu_and_gelu_and_mul_match_cpu)
{
	parity_row_cases("silu_and_mul", 1, row_case);
	parity_row_cases("gelu_and_mul", 2, row_case);
}

/* ---- broadcasting, alignment ------------------------------------------------------ */

static void binary_case(const char *op, tk_dtype dt, int nda, const int64_t *sa, int ndb,
                        const int64_t *sb, int64_t pad)
{
	parity_case c;

	parity_special(&c, op, dt, "broadcasting");
	parity_shape(&c, "a", nda, sa);
	parity_shape(&c, "b", ndb, sb);
	parity_range(&c, NULL, -2.0, 2.0);
	c.pad = pad;
	parity_check(&c);
}

static void broadcast_cases(const char *op)
{
	static const int64_t ws[] = { 1, 3, 17, 1000, 4097 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
			int64_t s2[2] = { 5, ws[w] }, s1[1] = { ws[w] }, col[2] = { 5, 1 };
			binary_case(op, dt, 2, s2, 2, s2, 0);
			binary_case(op, dt, 2, s2, 2, s2, 3);
			binary_case(op, dt, 2, s2, 1, s1, 0);
			binary_case(op, dt, 2, s2, 1, s1, 2);
			binary_case(op, dt, 2, s2, 2, col, 0);
		}
		int64_t big[1] = { (1 << 20) + 3 }, s4[4] = { 2, 3, 1, 6 }, s2b[2] = { 4, 1 };
		binary_case(op, dt, 1, big, 1, big, 0);
		binary_case(op, dt, 4, s4, 2, s2b, 0);
		binary_case(op, dt, 4, s4, 0, s4, 0);
	}
}

Test(parity_elementwise, add_and_mul_match_cpu_broadcasting_rows_columns_scalars_and_4d)
{
	broadcast_cases("add");
	broadcast_cases("mul");
}

Test(parity_elementwise, rows_past_the_grid_height_and_a_broadcast_row_match_cpu)
{
	/* 1024 bf16 a row is 128 vectors: the 2-d kernel, looping over rows past 8192 */
	int64_t s2[2] = { 9001, 1024 }, s1[1] = { 1024 }, col[2] = { 9001, 1 };

	binary_case("add", TK_BF16, 2, s2, 1, s1, 0);
	binary_case("add", TK_BF16, 2, s2, 1, s1, 8);
	binary_case("mul", TK_F32, 2, s2, 2, col, 0);
}

Test(parity_elementwise, add_matches_cpu_when_an_operand_is_not_16_byte_aligned)
{
	for (size_t k = 0; k < 3; k++) {
		parity_case c;

		parity_special(&c, "add", tt_float_dtypes[k], "a viewed from its second element");
		parity_shape(&c, "a", 1, (int64_t[]){ 1001 });
		parity_shape(&c, "b", 1, (int64_t[]){ 1001 });
		parity_range(&c, NULL, -2.0, 2.0);
		c.misalign = 1u << 0;
		parity_check(&c);
	}
}

Test(parity_elementwise, silu_and_gelu_match_cpu_over_a_wide_range)
{
	static const int64_t ws[] = { 1, 3, 17, 1000, 4097 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
			for (int pad = 0; pad <= 5; pad += 5) {
				parity_case c;
				parity_special(&c, "silu", dt, "x in [-6, 6]");
				parity_shape(&c, "x", 2, (int64_t[]){ 6, ws[w] });
				parity_range(&c, NULL, -6.0, 6.0);
				c.pad = pad;
				parity_check(&c);
			}
			for (int approx = 0; approx <= 1; approx++) {
				for (int pad = 0; pad <= 3; pad += 3) {
					parity_case c;
					parity_special(&c, "gelu", dt, "x in [-6, 6]");
					parity_shape(&c, "x", 2, (int64_t[]){ 6, ws[w] });
					parity_param_int(&c, "approximate", approx);
					parity_range(&c, NULL, -6.0, 6.0);
					c.pad = pad;
					parity_check(&c);
				}
			}
		}
		parity_case c;
		parity_special(&c, "silu", dt, "x in [-6, 6]");
		parity_shape(&c, "x", 2, (int64_t[]){ 1024, 1027 });
		parity_range(&c, NULL, -6.0, 6.0);
		parity_check(&c);
	}
}

/* ---- NaN ------------------------------------------------------------------------------- */

/* NaNs in every 7th element of a and every 11th of b. */
static void plant_nans(parity_run *r, uint64_t *rng)
{
	tk_tensor *a = parity_tensor(r, "a"), *b = parity_tensor(r, "b");

	for (int64_t i = 0; i < tk_numel(a); i += 7)
		tt_set(a, i, NAN);
	for (int64_t i = 0; i < tk_numel(b); i += 11)
		tt_set(b, i, NAN);
}

static void expect_nan_out(const parity_run *r)
{
	const tk_tensor *out = &r->t[r->c->op->n_in];
	int64_t nans = 0;

	for (int64_t i = 0; i < tk_numel(out); i++)
		nans += isnan(tt_get(out, i));
	cr_expect_gt(nans, 0, "%s: no NaN reached the output", r->c->op->name);
}

/*
 * maximum and minimum with NaNs planted in both operands (b the shape of
 * a, and b a broadcast row): the CUDA result is NaN exactly where the
 * CPU's is, and elsewhere the same value, bit for bit.
 */
Test(parity_elementwise, maximum_and_minimum_propagate_nan_as_the_cpu_does)
{
	static const char *const ops[] = { "maximum", "minimum" };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 6; k++) {
			parity_case c;

			parity_special(&c, ops[o], tt_float_dtypes[k % 3], "NaNs in a and b");
			parity_shape(&c, "a", 2, (int64_t[]){ 4, 1000 });
			if (k / 3)
				parity_shape(&c, "b", 1, (int64_t[]){ 1000 });
			else
				parity_shape(&c, "b", 2, (int64_t[]){ 4, 1000 });
			c.plant = plant_nans;
			c.verify = expect_nan_out;
			c.exact = 1;
			parity_check(&c);
		}
	}
}

/* ---- empty tensors ---------------------------------------------------------------------- */

Test(parity_elementwise, every_op_accepts_zero_rows)
{
	const char *const *lists[2] = { unary_ops, binary_ops };
	static const char *const gated[] = { "silu_and_mul", "gelu_and_mul", NULL };

	for (int l = 0; l < 2; l++) {
		for (const char *const *op = lists[l]; *op != NULL; op++)
			row_case(*op, TK_F32, 0, 8, 0, 0);
	}
	for (const char *const *op = gated; *op != NULL; op++)
		row_case(*op, TK_F32, 0, 8, 0, 0);
}

/* ---- dependent launches ------------------------------------------------------------------ */

/*
 * A chain of kernels each reading what the one before wrote, and writing
 * the buffer the one before read, all enqueued before one synchronize:
 * with programmatic dependent launch a kernel starts while the one before
 * it runs, so a kernel that touched memory before its wait would read a
 * half-written input or overwrite a still-needed one. The chain mixes
 * one-block and many-block grids, row, elementwise and binary kernels.
 */
static void chain_case(int64_t rows, int64_t w, int steps)
{
	static const char *const ops[] = { "rms_norm", "silu", "add", "softmax" };
	uint64_t rng = gpu_fresh_seed();
	int64_t shape[2] = { rows, w };
	tk_tensor h[2], x0 = tt_tensor(TK_F32, 2, shape, 0), wt = tt_tensor(TK_F32, 1, &w, 0);
	void *d[2], *dx0, *dw;
	size_t bytes = tt_span_bytes(&x0);
	cudaStream_t stream;

	gpu_require();
	tt_fill(&x0, &rng, -2.0, 2.0);
	tt_fill(&wt, &rng, 0.5, 1.5);
	for (int i = 0; i < 2; i++) {
		h[i] = tt_tensor(TK_F32, 2, shape, 0);
		memcpy(h[i].data, x0.data, bytes);
		d[i] = gpu_to_device(&h[i]);
	}
	dx0 = gpu_to_device(&x0);
	dw = gpu_to_device(&wt);
	cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
	for (int k = 0; k < steps; k++) {
		const char *op = ops[k % 4];
		const tk_kernel_entry *e = tk_kernel_find(op);
		tk_call hc = { .n_in = 1, .n_out = 1 }, dc;
		cr_assert_not_null(e);
		hc.in[0] = h[k % 2];
		hc.out[0] = h[(k + 1) % 2];
		if (k % 4 == 0) {
			hc.n_in = 2;
			hc.in[1] = wt;
			hc.n_params = 1;
			hc.params[0] = tt_param_float(1e-6);
		} else if (k % 4 == 2) {
			hc.n_in = 2;
			hc.in[1] = x0;
		}
		dc = hc;
		dc.in[0].data = d[k % 2];
		dc.out[0].data = d[(k + 1) % 2];
		if (hc.n_in == 2)
			dc.in[1].data = k % 4 == 0 ? dw : dx0;
		cr_assert_eq(e->cpu(&hc), TK_OK, "%s CPU reference, step %d", op, k);
		cr_assert_eq(e->cuda(&dc, stream), TK_OK, "%s launch, step %d", op, k);
	}
	cudaError_t err = cudaStreamSynchronize(stream);
	cr_assert_eq(err, cudaSuccess, "chain %ldx%ld: %s", (long)rows, (long)w,
	             cudaGetErrorString(err));
	cudaStreamDestroy(stream);

	tk_tensor got = h[steps % 2];
	int64_t n = tk_numel(&got);
	double *want = malloc(sizeof(double) * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(&h[steps % 2], i);
	got.data = malloc(bytes);
	cr_assert_eq(cudaMemcpy(got.data, d[steps % 2], bytes, cudaMemcpyDeviceToHost),
	             cudaSuccess);
	double rel = tt_rel_err(&got, want);
	char line[160];
	snprintf(line, sizeof(line), "chain of %d on %ldx%ld f32 (PDL %d): rel %.3g tol 1e-4",
	         steps, (long)rows, (long)w, tk_cuda_pdl(), rel);
	parity_log(line);
	cr_expect_leq(rel, 1e-4,
	              "chain of %d on %ldx%ld (PDL %d): relative error %.3g (seed 0x%llx)", steps,
	              (long)rows, (long)w, tk_cuda_pdl(), rel, (unsigned long long)gpu_case_seed);
	free(want);
	free(got.data);
	for (int i = 0; i < 2; i++) {
		tt_free(&h[i]);
		cudaFree(d[i]);
	}
	tt_free(&x0);
	tt_free(&wt);
	cudaFree(dx0);
	cudaFree(dw);
}

Test(parity_elementwise, chains_of_dependent_kernels_match_cpu_with_and_without_pdl)
{
	int was = tk_cuda_set_pdl(1);

	for (int pdl = 1; pdl >= 0; pdl--) {
		tk_cuda_set_pdl(pdl);
		chain_case(1, 4096, 40);
		chain_case(512, 2048, 40);
		chain_case(3, 100003, 20);
	}
	tk_cuda_set_pdl(was);
}
