/*
 * test_gpu_gemm_fp8.c - gemm_fp8 and bmm_fp8 on the GPU, two ways:
 * - against the CPU reference (norm-wise: bf16 1e-2, f16 2e-3; both sides
 *   sum exact products per 128-wide K block in f32, so what is left is
 *   the rounding of c), with the launcher's workspace (split K) and
 *   without it (one block a K, or the tile kernel);
 * - against a dequantize-then-bf16-GEMM on the same GPU: a and b decoded,
 *   times their scales (per element of the layout), rounded to bf16 and
 *   multiplied by the bf16 gemm launcher with trans_b. The bf16 rounding
 *   of the operands costs up to 2^-9 each, so the bound is 2e-2.
 * Every scale layout, M in {1, 7, 16, 64, 128, 300} (the stream kernel's
 * m-tile counts up to 64, the wgmma kernel past it, a partial tile), N
 * and K that end inside a 128-block and a tile, rows of a that are not
 * 16-byte aligned (the stream kernel's and the tile kernel's byte paths),
 * bias and residual, both output dtypes. Inputs are random e4m3
 * codes with |x| in [0.25, 3] (never zero) and positive scales; the seed
 * is printed on failure.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "gpu/gpu_util.h"
#include "kernels/tk_test_util.h"

#define KB 128

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

typedef struct fcase {
	int layout;
	tk_dtype out;
	int64_t batch; /* 0: gemm_fp8; >= 1: bmm_fp8 */
	int64_t m, n, k;
	int64_t pad; /* extra bytes per row of a */
	int epilogue;
} fcase;

static void fill_codes(tk_tensor *t, uint64_t *rng)
{
	for (int64_t i = 0; i < tk_numel(t); i++) {
		double v = tt_rand_uniform(rng, 0.25, 3.0);
		tt_set(t, i, tt_rand_u64(rng) & 1 ? v : -v);
	}
}

static void host_call(tk_call *c, const fcase *f, uint64_t *rng)
{
	int64_t m = f->m, n = f->n, k = f->k, kb = cdiv(k, KB);

	memset(c, 0, sizeof(*c));
	c->n_in = 4;
	c->n_out = 1;
	if (f->batch) {
		c->in[0] = tt_tensor(TK_FP8_E4M3, 3, (int64_t[]){ f->batch, m, k }, 0);
		c->in[1] = tt_tensor(TK_FP8_E4M3, 3, (int64_t[]){ f->batch, n, k }, 0);
		c->in[2] = tt_tensor(TK_F32, 1, (int64_t[]){ f->batch }, 0);
		c->in[3] = tt_tensor(TK_F32, 1, (int64_t[]){ 1 }, 0);
		c->out[0] = tt_tensor(f->out, 3, (int64_t[]){ f->batch, m, n }, 0);
	} else {
		c->in[0] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ m, k }, f->pad);
		c->in[1] = tt_tensor(TK_FP8_E4M3, 2, (int64_t[]){ n, k }, 0);
		if (f->layout == 0) {
			c->in[2] = tt_tensor(TK_F32, 1, (int64_t[]){ 1 }, 0);
			c->in[3] = tt_tensor(TK_F32, 1, (int64_t[]){ 1 }, 0);
		} else if (f->layout == 1) {
			c->in[2] = tt_tensor(TK_F32, 2, (int64_t[]){ m, 1 }, 0);
			c->in[3] = tt_tensor(TK_F32, 2, (int64_t[]){ n, 1 }, 0);
		} else {
			c->in[2] = tt_tensor(TK_F32, 2, (int64_t[]){ m, kb }, 0);
			c->in[3] = tt_tensor(TK_F32, 2, (int64_t[]){ cdiv(n, KB), kb }, 0);
		}
		c->out[0] = tt_tensor(f->out, 2, (int64_t[]){ m, n }, 0);
		c->params[0] = tt_param_int(f->layout);
		c->n_params = 1;
		if (f->epilogue) {
			c->in[4] = tt_tensor(f->out, 1, (int64_t[]){ n }, 0);
			c->in[5] = tt_tensor(f->out, 2, (int64_t[]){ m, n }, 0);
			tt_fill(&c->in[4], rng, -1.0, 1.0);
			tt_fill(&c->in[5], rng, -1.0, 1.0);
			c->n_in = 6;
		}
	}
	fill_codes(&c->in[0], rng);
	fill_codes(&c->in[1], rng);
	tt_fill(&c->in[2], rng, 0.01, 0.2);
	tt_fill(&c->in[3], rng, 0.01, 0.2);
	tt_poison(&c->out[0]);
}

static void describe(const fcase *f, char *buf, size_t len)
{
	snprintf(buf, len, "%s layout %d %s %ldx%ldx%ld%s pad %ld%s",
	         f->batch ? "bmm_fp8" : "gemm_fp8", f->layout, tk_dtype_name(f->out), (long)f->m,
	         (long)f->n, (long)f->k, f->batch ? " batched" : "", (long)f->pad,
	         f->epilogue ? " bias residual" : "");
}

/* c of the device as doubles. */
static double *download(const tk_tensor *host_c, void *dev, tk_tensor *got)
{
	size_t bytes = tt_span_bytes(host_c);
	int64_t n = tk_numel(host_c);
	double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));

	*got = *host_c;
	got->data = malloc(bytes + 1);
	cr_assert_eq(cudaMemcpy(got->data, dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
	for (int64_t i = 0; i < n; i++)
		v[i] = tt_get(got, i);
	return v;
}

static double rel_to(const tk_tensor *got, const tk_tensor *want_t)
{
	int64_t n = tk_numel(want_t);
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1)), r;

	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(want_t, i);
	r = tt_rel_err(got, want);
	free(want);
	return r;
}

/* The scale element (m, k) of a or (n, k) of b multiplies by, in the case's layout. */
static double scale_at(const tk_tensor *s, int layout, int64_t row, int64_t k, int64_t kbs,
                       int is_b)
{
	if (layout == 0)
		return tt_get(s, 0);
	if (layout == 1)
		return tt_get(s, row);
	return tt_get(s, (is_b ? row / KB : row) * kbs + k / KB);
}

/* a or b decoded and scaled, as bf16 [rows, k] (packed). */
static tk_tensor dequant(const tk_tensor *q, const tk_tensor *s, int layout, int is_b)
{
	int64_t rows = q->shape[0], k = q->shape[1], kbs = cdiv(k, KB);
	tk_tensor t = tt_tensor(TK_BF16, 2, (int64_t[]){ rows, k }, 0);

	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < k; j++)
			tt_set(&t, r * k + j,
			       tt_get(q, r * k + j) * scale_at(s, layout, r, j, kbs, is_b));
	return t;
}

/* f on the GPU with choice (NULL: the built-in rule) against the CPU reference. */
static void run_case_as(const fcase *f, const tk_choice *choice)
{
	const tk_kernel_entry *e = tk_kernel_find(f->batch ? "bmm_fp8" : "gemm_fp8");
	uint64_t rng = gpu_fresh_seed();
	tk_call hc, dc;
	void *ws = NULL;
	char what[160];

	cr_assert_not_null(e);
	cr_assert_not_null(e->cuda, "no CUDA launcher");
	describe(f, what, sizeof(what));
	host_call(&hc, f, &rng);
	dc = hc;
	for (int i = 0; i < hc.n_in; i++)
		dc.in[i].data = gpu_to_device(&hc.in[i]);
	dc.out[0].data = gpu_to_device(&hc.out[0]);
	cr_assert_eq(e->cpu(&hc), TK_OK, "%s: the CPU reference refused", what);
	cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	double tol = f->out == TK_BF16 ? 1e-2 : 2e-3;

	for (int with_ws = 0; with_ws < 2; with_ws++) {
		tk_tensor got;
		cr_assert_eq(cudaMemset(dc.out[0].data, 0xff, tt_span_bytes(&hc.out[0])),
		             cudaSuccess);
		dc.workspace = with_ws ? ws : NULL;
		dc.workspace_bytes = with_ws ? TK_WORKSPACE_BYTES : 0;
		if (choice != NULL)
			dc.choice = *choice;
		cr_assert_eq(e->cuda(&dc, NULL), TK_OK, "%s: the launcher refused", what);
		cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess, "%s: %s", what,
		             cudaGetErrorString(cudaGetLastError()));
		free(download(&hc.out[0], dc.out[0].data, &got));
		double rel = rel_to(&got, &hc.out[0]);
		cr_expect_leq(rel, tol, "%s%s%s vs CPU: relative error %.3g > %.3g (seed 0x%llx)",
		              what, with_ws ? " (workspace)" : "", choice ? " (a choice)" : "", rel,
		              tol, (unsigned long long)gpu_case_seed);
		tt_free(&got);
	}

	/* the same product as a dequantized bf16 GEMM on the GPU (gemm only) */
	if (!f->batch && !f->epilogue && choice == NULL) {
		const tk_kernel_entry *g = tk_kernel_find("gemm");
		tk_call bc, bd;
		tk_tensor got;
		memset(&bc, 0, sizeof(bc));
		bc.in[0] = dequant(&hc.in[0], &hc.in[2], f->layout, 0);
		bc.in[1] = dequant(&hc.in[1], &hc.in[3], f->layout, 1);
		bc.n_in = 2;
		bc.out[0] = tt_tensor(TK_BF16, 2, (int64_t[]){ f->m, f->n }, 0);
		bc.n_out = 1;
		bc.params[0] = tt_param_float(1.0);
		bc.params[1] = tt_param_bool(1);
		bc.n_params = 2;
		bd = bc;
		bd.in[0].data = gpu_to_device(&bc.in[0]);
		bd.in[1].data = gpu_to_device(&bc.in[1]);
		bd.out[0].data = gpu_to_device(&bc.out[0]);
		bd.workspace = ws;
		bd.workspace_bytes = TK_WORKSPACE_BYTES;
		cr_assert_eq(g->cuda(&bd, NULL), TK_OK, "the bf16 gemm refused");
		cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
		double *bf = download(&bc.out[0], bd.out[0].data, &got);
		tk_tensor fp8_got;
		free(download(&hc.out[0], dc.out[0].data, &fp8_got));
		double rel = tt_rel_err(&fp8_got, bf);
		cr_expect_leq(rel, 2e-2,
		              "%s vs dequantized bf16 gemm: relative error %.3g (seed 0x%llx)",
		              what, rel, (unsigned long long)gpu_case_seed);
		free(bf);
		tt_free(&got);
		tt_free(&fp8_got);
		for (int i = 0; i < 2; i++) {
			cudaFree(bd.in[i].data);
			tt_free(&bc.in[i]);
		}
		cudaFree(bd.out[0].data);
		tt_free(&bc.out[0]);
	}

	for (int i = 0; i < hc.n_in; i++) {
		cudaFree(dc.in[i].data);
		tt_free(&hc.in[i]);
	}
	cudaFree(dc.out[0].data);
	tt_free(&hc.out[0]);
	cudaFree(ws);
}

static void run_case(const fcase *f)
{
	run_case_as(f, NULL);
}

Test(gpu_gemm_fp8, every_layout_and_m_matches_cpu_and_a_dequantized_bf16_gemm)
{
	static const int64_t ms[] = { 1, 7, 16, 64, 128, 300 };
	static const int64_t nk[][2] = { { 576, 7168 }, { 200, 272 }, { 2112, 1040 }, { 136, 16 } };

	gpu_require();
	for (int layout = 0; layout < 3; layout++)
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
			for (size_t j = 0; j < sizeof(nk) / sizeof(nk[0]); j++) {
				fcase f = { layout,   (i + j) & 1 ? TK_F16 : TK_BF16,
					    0,        ms[i],
					    nk[j][0], nk[j][1],
					    0,        0 };
				run_case(&f);
			}
}

Test(gpu_gemm_fp8, unaligned_rows_of_a_bias_and_residual_match_cpu)
{
	gpu_require();
	for (int layout = 0; layout < 3; layout++) {
		fcase f1 = { layout, TK_BF16, 0, 5, 300, 512, 3, 0 };
		fcase f2 = { layout, TK_F16, 0, 130, 260, 384, 0, 1 };
		fcase f3 = { layout, TK_BF16, 0, 16, 4096, 4096, 0, 1 };
		/* rows the copy engine cannot read: the cp.async tile kernel's byte path */
		fcase f4 = { layout, TK_BF16, 0, 130, 520, 1040, 5, 0 };
		run_case(&f1);
		run_case(&f2);
		run_case(&f3);
		run_case(&f4);
	}
}

Test(gpu_gemm_fp8, bmm_matches_cpu)
{
	gpu_require();
	fcase fs[] = { { 0, TK_BF16, 128, 1, 512, 128, 0, 0 },
		       { 0, TK_BF16, 128, 16, 128, 512, 0, 0 },
		       { 0, TK_F16, 3, 130, 72, 48, 0, 0 },
		       { 0, TK_BF16, 2, 64, 512, 2048, 0, 0 } };
	for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
		run_case(&fs[i]);
}

/* TK_FP8_KERNEL_DECODE (kernels/gemm_fp8/gemm_fp8.h): the TMA decode kernel's choices. */
#define FP8_DECODE 4

/*
 * Every configuration of the decode kernel that serves a shape, run exactly:
 * both weight tiles, every cluster split of K the shape allows, both rings;
 * token tiles of 8 to 64 with M inside them (24, 40) and at their ends;
 * N that ends inside a 64-row tile, K that ends inside a 128-block.
 */
Test(gpu_gemm_fp8, every_decode_configuration_matches_cpu)
{
	static const int64_t shapes[][3] = { { 1, 200, 1040 },  { 24, 576, 2064 },
		                             { 40, 136, 1152 }, { 64, 2112, 1040 },
		                             { 16, 72, 16 },    { 8, 1024, 4096 } };
	const tk_kernel_entry *e = tk_kernel_find("gemm_fp8");
	int ran = 0;

	gpu_require();
	cr_assert(e != NULL && e->tuning != NULL && e->tuning->candidates != NULL);
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int layout = 0; layout < 3; layout++) {
			fcase f = { layout,
				    layout & 1 ? TK_F16 : TK_BF16,
				    0,
				    shapes[i][0],
				    shapes[i][1],
				    shapes[i][2],
				    0,
				    layout == 1 && i % 2 == 0 };
			uint64_t rng = 1;
			tk_call c;
			tk_choice cand[64];
			host_call(&c, &f, &rng);
			/* host buffers (malloc: 16-byte aligned, as cudaMalloc's) stand in for the shapes */
			int n = e->tuning->candidates(&c, cand, 64);
			for (int j = 0; j < c.n_in; j++)
				tt_free(&c.in[j]);
			tt_free(&c.out[0]);
			int found = 0;
			for (int j = 0; j < n && j < 64; j++) {
				if (cand[j].v[0] != FP8_DECODE)
					continue;
				run_case_as(&f, &cand[j]);
				found++;
				ran++;
			}
			cr_expect_gt(found, 0, "no decode candidate for m%ld n%ld k%ld", (long)f.m,
			             (long)f.n, (long)f.k);
		}
	cr_log_info("%d decode configurations run", ran);
}
