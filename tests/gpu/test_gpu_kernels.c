/*
 * test_gpu_kernels.c - every CUDA kernel against its CPU reference.
 *
 * Each case draws fresh random inputs (the seed is printed on failure),
 * poisons the output buffer with NaN bytes, padding included, runs the CPU
 * reference and the CUDA launcher on the same inputs, and compares the two
 * with a norm-wise relative error under the op's per-dtype tolerance. It
 * also checks that the kernel left the bytes between padded rows alone.
 *
 * Needs a GPU: with none the tests fail, saying so. With TILEOPS_TEST_LOG
 * set to a file name, every case's error is appended to that file.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <time.h>

#include "kernels/tk_test_util.h"
#include "gpu/gpu_util.h"

static double tol_of(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 1e-3 : 1.6e-2;
}

static double gemm_tol_of(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 2e-3 : 2e-2;
}

/*
 * Whether compare_op hands the launcher workspace when its entry declares
 * some, as tileopsd does (1), or leaves it out (0): both paths must agree.
 */
static int with_workspace = 1;

static void log_case(const char *op, const char *dt, const char *what, double rel, double tol)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path != NULL ? fopen(path, "a") : NULL;

	if (f == NULL)
		return;
	fprintf(f, "%-8s %-4s %-52s rel %.3g tol %.3g\n", op, dt, what, rel, tol);
	fclose(f);
}

/* 1 when every byte of got outside t's logical elements is still poison. */
static int padding_untouched(const tk_tensor *t, const unsigned char *got)
{
	size_t bytes = tt_span_bytes(t), es = tk_dtype_size(t->dtype);
	unsigned char *want = malloc(bytes ? bytes : 1);
	int64_t n = tk_numel(t);
	int ok;

	memset(want, 0xff, bytes);
	for (int64_t i = 0; i < n; i++) {
		size_t o = (size_t)tt_offset(t, i) * es;
		memcpy(want + o, got + o, es);
	}
	ok = memcmp(want, got, bytes) == 0;
	free(want);
	return ok;
}

/*
 * Run `op` on the host call `hc` (inputs filled, outputs allocated) with
 * the CPU reference and on the GPU, and compare output 0.
 */
static void compare_op(const char *op, tk_call *hc, double tol, const char *what)
{
	const tk_kernel_entry *e = tk_kernel_find(op);
	tk_call dc = *hc;
	tk_tensor got = hc->out[0];
	size_t bytes = tt_span_bytes(&hc->out[0]);
	cudaStream_t stream;

	gpu_require();
	cr_assert_not_null(e, "no table entry for %s", op);
	cr_assert_not_null(e->cuda, "%s has no CUDA launcher", op);
	for (int i = 0; i < hc->n_in; i++)
		dc.in[i].data = gpu_to_device(&hc->in[i]);
	tt_poison(&hc->out[0]);
	dc.out[0].data = gpu_to_device(&hc->out[0]);

	if (with_workspace && e->workspace > 0) {
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

	got.data = malloc(bytes ? bytes : 1);
	if (bytes)
		cr_assert_eq(cudaMemcpy(got.data, dc.out[0].data, bytes, cudaMemcpyDeviceToHost),
		             cudaSuccess);
	int64_t n = tk_numel(&got);
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(&hc->out[0], i);
	double rel = tt_rel_err(&got, want);
	log_case(op, tk_dtype_name(got.dtype), what, rel, tol);
	cr_expect_leq(rel, tol, "%s %s %s: relative error %.3g > %.3g (seed 0x%llx)", op,
	              tk_dtype_name(got.dtype), what, rel, tol, (unsigned long long)gpu_case_seed);
	cr_expect(padding_untouched(&got, got.data), "%s %s %s wrote outside its elements", op,
	          tk_dtype_name(got.dtype), what);
	free(want);
	free(got.data);
	for (int i = 0; i < hc->n_in; i++)
		cudaFree(dc.in[i].data);
	cudaFree(dc.out[0].data);
}

static void free_call(tk_call *c)
{
	for (int i = 0; i < c->n_in; i++)
		tt_free(&c->in[i]);
	tt_free(&c->out[0]);
}

static const int64_t widths[] = { 1, 3, 17, 1000, 4097 };
#define N_WIDTHS (sizeof(widths) / sizeof(widths[0]))

/* ---- elementwise ------------------------------------------------------- */

static void binary_case(const char *op, tk_dtype dt, int nda, const int64_t *sa, int ndb,
                        const int64_t *sb, int64_t pad)
{
	uint64_t rng = gpu_fresh_seed();
	tk_call c = { .n_in = 2, .n_out = 1 };
	int ndo = nda > ndb ? nda : ndb;
	int64_t so[TK_MAX_DIMS];
	char what[96];

	for (int d = 0; d < ndo; d++) {
		int da = d - (ndo - nda), db = d - (ndo - ndb);
		int64_t x = da >= 0 ? sa[da] : 1, y = db >= 0 ? sb[db] : 1;
		so[d] = x == 1 ? y : x;
	}
	c.in[0] = tt_tensor(dt, nda, sa, pad);
	c.in[1] = tt_tensor(dt, ndb, sb, pad ? pad + 1 : 0);
	c.out[0] = tt_tensor(dt, ndo, so, pad ? pad + 2 : 0);
	tt_fill(&c.in[0], &rng, -2.0, 2.0);
	tt_fill(&c.in[1], &rng, -2.0, 2.0);
	snprintf(what, sizeof(what), "a %dd [..%ld] b %dd [..%ld] pad %ld", nda, (long)sa[nda - 1],
	         ndb, ndb ? (long)sb[ndb - 1] : 1L, (long)pad);
	compare_op(op, &c, tol_of(dt), what);
	free_call(&c);
}

static void binary_op_cases(const char *op)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < N_WIDTHS; w++) {
			int64_t s2[2] = { 5, widths[w] }, s1[1] = { widths[w] };
			int64_t col[2] = { 5, 1 };
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

Test(gpu_add, matches_cpu_on_odd_widths_strided_rows_and_broadcasting)
{
	binary_op_cases("add");
}

Test(gpu_mul, matches_cpu_on_odd_widths_strided_rows_and_broadcasting)
{
	binary_op_cases("mul");
}

Test(gpu_add, rows_past_the_grid_height_and_a_broadcast_row_match_cpu)
{
	/* 1024 bf16 a row is 128 vectors: the 2-d kernel, looping over rows past 8192 */
	int64_t s2[2] = { 9001, 1024 }, s1[1] = { 1024 }, col[2] = { 9001, 1 };

	binary_case("add", TK_BF16, 2, s2, 1, s1, 0);
	binary_case("add", TK_BF16, 2, s2, 1, s1, 8);
	binary_case("mul", TK_F32, 2, s2, 2, col, 0);
}

Test(gpu_add, matches_cpu_when_operands_are_not_16_byte_aligned)
{
	int64_t s[1] = { 1001 };

	for (size_t k = 0; k < 3; k++) {
		uint64_t rng = gpu_fresh_seed();
		tk_call c = { .n_in = 2, .n_out = 1 };
		tk_dtype dt = tt_float_dtypes[k];
		int64_t s1[1] = { 1002 };
		c.in[0] = tt_tensor(dt, 1, s1, 0);
		c.in[1] = tt_tensor(dt, 1, s, 0);
		c.out[0] = tt_tensor(dt, 1, s, 0);
		tt_fill(&c.in[0], &rng, -2.0, 2.0);
		tt_fill(&c.in[1], &rng, -2.0, 2.0);
		/* View a from its second element: same shape, misaligned base. */
		void *base = c.in[0].data;
		c.in[0].data = (char *)base + tk_dtype_size(dt);
		c.in[0].shape[0] = 1001;
		compare_op("add", &c, tol_of(dt), "misaligned a");
		c.in[0].data = base;
		free_call(&c);
	}
}

static void unary_case(const char *op, tk_dtype dt, int64_t rows, int64_t w, int64_t pad,
                       int n_params, tk_param p)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t shape[2] = { rows, w };
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = n_params };
	char what[64];

	c.params[0] = p;
	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad ? pad + 1 : 0);
	tt_fill(&c.in[0], &rng, -6.0, 6.0);
	snprintf(what, sizeof(what), "%ldx%ld pad %ld", (long)rows, (long)w, (long)pad);
	compare_op(op, &c, tol_of(dt), what);
	free_call(&c);
}

Test(gpu_silu, matches_cpu_on_odd_widths_and_strided_rows)
{
	tk_param none = { 0 };

	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < N_WIDTHS; w++) {
			unary_case("silu", tt_float_dtypes[k], 6, widths[w], 0, 0, none);
			unary_case("silu", tt_float_dtypes[k], 6, widths[w], 5, 0, none);
		}
		unary_case("silu", tt_float_dtypes[k], 1024, 1027, 0, 0, none);
	}
}

Test(gpu_gelu, exact_and_tanh_forms_match_cpu)
{
	for (size_t k = 0; k < 3; k++) {
		for (size_t w = 0; w < N_WIDTHS; w++) {
			for (int approx = 0; approx <= 1; approx++) {
				tk_param p = tt_param_int(approx);
				unary_case("gelu", tt_float_dtypes[k], 6, widths[w], 0, 1, p);
				unary_case("gelu", tt_float_dtypes[k], 6, widths[w], 3, 1, p);
			}
		}
	}
}

/* ---- row reductions ---------------------------------------------------- */

static void rms_norm_case(tk_dtype dt, int64_t rows, int64_t w, int64_t pad)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t shape[2] = { rows, w };
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 1 };
	char what[64];

	c.params[0] = tt_param_float(1e-6);
	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.in[1] = tt_tensor(dt, 1, &w, 0);
	c.out[0] = tt_tensor(dt, 2, shape, pad ? pad + 8 : 0);
	tt_fill(&c.in[0], &rng, -3.0, 3.0);
	tt_fill(&c.in[1], &rng, 0.5, 1.5);
	snprintf(what, sizeof(what), "%ldx%ld pad %ld", (long)rows, (long)w, (long)pad);
	compare_op("rms_norm", &c, tol_of(dt), what);
	free_call(&c);
}

Test(gpu_rms_norm, matches_cpu_on_odd_widths_and_strided_rows)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < N_WIDTHS; w++) {
			rms_norm_case(dt, 7, widths[w], 0);
			rms_norm_case(dt, 7, widths[w], 3);
		}
		rms_norm_case(dt, 3, 4096, 0);   /* vector path, block per row */
		rms_norm_case(dt, 3, 4096, 8);   /* vector path with padded rows */
		rms_norm_case(dt, 5000, 64, 0);  /* many narrow rows, warp per row */
		rms_norm_case(dt, 2, 262144, 0); /* the widest supported row */
	}
}

static void softmax_op_case(const char *op, tk_dtype dt, int64_t rows, int64_t w, int64_t pad,
                            double shift, int masked)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t shape[2] = { rows, w };
	tk_call c = { .n_in = 1, .n_out = 1 };
	char what[80];

	c.in[0] = tt_tensor(dt, 2, shape, pad);
	c.out[0] = tt_tensor(dt, 2, shape, pad ? pad + 8 : 0);
	tt_fill(&c.in[0], &rng, shift - 5.0, shift + 5.0);
	/* Masked positions (-inf) as attention uses them; never a whole row. */
	for (int64_t i = 0; masked && i < rows * w; i += 3) {
		if (i % w != 0)
			tt_set(&c.in[0], i, -INFINITY);
	}
	snprintf(what, sizeof(what), "%ldx%ld pad %ld shift %g%s", (long)rows, (long)w, (long)pad,
	         shift, masked ? " masked" : "");
	compare_op(op, &c, tol_of(dt), what);
	free_call(&c);
}

static void softmax_case(tk_dtype dt, int64_t rows, int64_t w, int64_t pad, double shift,
                         int masked)
{
	softmax_op_case("softmax", dt, rows, w, pad, shift, masked);
}

Test(gpu_softmax, matches_cpu_on_odd_widths_strided_rows_and_large_inputs)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < N_WIDTHS; w++) {
			softmax_case(dt, 7, widths[w], 0, 0.0, 0);
			softmax_case(dt, 7, widths[w], 3, 0.0, 0);
		}
		softmax_case(dt, 3, 4096, 0, 0.0, 0);
		softmax_case(dt, 3, 4096, 8, 50.0, 0);
		softmax_case(dt, 5000, 64, 0, -30.0, 0);
		softmax_case(dt, 2, 262144, 0, 0.0, 0);
	}
	softmax_case(TK_F32, 9, 17, 0, 0.0, 1);
	softmax_case(TK_F32, 9, 4097, 0, 0.0, 1);
	softmax_case(TK_F32, 4, 333, 0, 1000.0, 0);
}

Test(gpu_softmax, wide_rows_match_cpu_with_and_without_workspace)
{
	/* With workspace, rows over 4096 vectors of a tensor within 3/4 of the L2 take the
	 * split kernels (2 vectors a thread for a few rows, 8 for many); without, the
	 * cluster kernel. Masked and shifted rows, odd chunk counts, every dtype. */
	for (with_workspace = 1; with_workspace >= 0; with_workspace--) {
		for (size_t k = 0; k < 3; k++) {
			tk_dtype dt = tt_float_dtypes[k];
			softmax_case(dt, 1, 128256, 0, 0.0, 0);
			softmax_case(dt, 3, 40000, 0, 30.0, 1);
			softmax_case(dt, 100, 65536 + 64, 8, -20.0, 0);
		}
	}
	with_workspace = 1;
}

Test(gpu_softmax, batches_of_vocabulary_rows_match_cpu_in_both_forms)
{
	/* Batches of vocabulary rows as the logits of a decode step bring them: the split
	 * kernels while the tensor fits their share of the L2, the cluster kernels past it
	 * (130 x 128256 f32); masked (softmax) and shifted rows, padded rows, both forms,
	 * every dtype. */
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		softmax_op_case("softmax", dt, 130, 128256, 0, 10.0, 1);
		softmax_op_case("log_softmax", dt, 130, 128256, 0, -10.0, 0);
		softmax_op_case("log_softmax", dt, 33, 129280, 8, 0.0, 0);
		softmax_op_case("softmax", dt, 70, 65536 + 8, 0, 0.0, 0);
	}
}

/* ---- dependent launches ------------------------------------------------- */

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
	log_case("chain", "f32", "dependent launches", rel, 1e-4);
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

Test(gpu_pdl, chains_of_dependent_kernels_match_cpu_with_and_without_pdl)
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

/* ---- gemm -------------------------------------------------------------- */

static void gemm_case(tk_dtype dt, int64_t m, int64_t n, int64_t k, int trans_b, int bias,
                      double alpha, int64_t pad)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t sa[2] = { m, k }, sb[2] = { k, n }, sc[2] = { m, n };
	tk_call c = { .n_in = bias ? 3 : 2, .n_out = 1, .n_params = 2 };
	char what[96];

	if (trans_b) {
		sb[0] = n;
		sb[1] = k;
	}
	c.params[0] = tt_param_float(alpha);
	c.params[1] = tt_param_bool(trans_b);
	c.in[0] = tt_tensor(dt, 2, sa, pad);
	c.in[1] = tt_tensor(dt, 2, sb, pad ? pad + 1 : 0);
	if (bias)
		c.in[2] = tt_tensor(dt, 1, &n, 0);
	c.out[0] = tt_tensor(dt, 2, sc, pad ? pad + 2 : 0);
	for (int i = 0; i < c.n_in; i++)
		tt_fill(&c.in[i], &rng, -1.0, 1.0);
	snprintf(what, sizeof(what), "%ldx%ldx%ld trans_b %d bias %d alpha %g pad %ld", (long)m,
	         (long)n, (long)k, trans_b, bias, alpha, (long)pad);
	compare_op("gemm", &c, gemm_tol_of(dt), what);
	free_call(&c);
}

Test(gpu_gemm, matches_cpu_on_odd_sizes_both_b_layouts_alpha_and_bias)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		for (int tb = 0; tb <= 1; tb++) {
			gemm_case(dt, 1, 1, 1, tb, 0, 1.0, 0);
			gemm_case(dt, 33, 65, 129, tb, 0, 1.0, 0);
			gemm_case(dt, 33, 65, 129, tb, 1, 0.5, 3);
			gemm_case(dt, 7, 3, 5, tb, 1, -2.0, 0);
			gemm_case(dt, 130, 257, 64, tb, 1, 1.0, 0);
		}
	}
}

Test(gpu_gemm, matches_cpu_with_a_long_k)
{
	for (size_t d = 0; d < 3; d++) {
		gemm_case(tt_float_dtypes[d], 5, 9, 16384, 0, 0, 1.0, 0);
		gemm_case(tt_float_dtypes[d], 3, 70, 16384, 1, 1, 0.25, 0);
	}
}

/* ---- empty tensors ----------------------------------------------------- */

Test(gpu_kernels, every_launcher_accepts_zero_element_tensors)
{
	int64_t s8[1] = { 8 }, s8x8[2] = { 8, 8 };
	size_t count = 0;
	const tk_kernel_entry *t = tk_kernels(&count);
	cudaStream_t stream;

	gpu_require();
	cr_assert_eq(cudaStreamCreate(&stream), cudaSuccess);
	for (size_t i = 0; i < count; i++) {
		tk_call c = { .n_in = t[i].n_in, .n_out = 1 };
		/* The other ops' empty calls are in test_gpu_ops.c, shaped for each. */
		static const char *const here[] = { "add",      "mul",     "silu", "gelu",
			                            "rms_norm", "softmax", "gemm" };
		int mine = 0;
		for (size_t h = 0; h < sizeof(here) / sizeof(here[0]); h++)
			mine |= strcmp(here[h], t[i].op) == 0;
		if (!mine)
			continue;
		while (t[i].params[c.n_params] != NULL)
			c.n_params++;
		for (int p = 0; p < c.n_params; p++)
			c.params[p] = tt_param_float(p == 0 ? 1.0 : 0.0);
		/* No memory behind these: a launcher that touches it fails. */
		c.in[0] = (tk_tensor){ .dtype = TK_F32, .ndim = 2, .shape = { 0, 8 } };
		tk_set_contiguous(&c.in[0]);
		c.out[0] = c.in[0];
		for (int k = 1; k < c.n_in; k++) {
			int is_b = strcmp(t[i].op, "gemm") == 0 && k == 1;
			c.in[k] = (tk_tensor){ .dtype = TK_F32, .ndim = is_b ? 2 : 1 };
			memcpy(c.in[k].shape, is_b ? s8x8 : s8, sizeof(int64_t) * (is_b ? 2 : 1));
			tk_set_contiguous(&c.in[k]);
		}
		cr_expect_eq(t[i].cuda(&c, stream), TK_OK, "%s on [0, 8]", t[i].op);
	}
	cr_expect_eq(cudaStreamSynchronize(stream), cudaSuccess);
	cudaStreamDestroy(stream);
}
