/*
 * test_gpu_gemm.c - gemm and bmm on the GPU against the CPU references:
 * through the op launchers (tk_kernel_find, with a workspace and without),
 * every candidate of the gemm family's tuning interface as an exact choice
 * through the launchers (tk_call.choice), the family's measuring function,
 * and every small-M, decode and simt configuration through tk_gemm_launch.
 *
 * Each case draws fresh random inputs (the seed is printed on failure),
 * poisons the output buffer with NaN bytes, padding included, and compares
 * with a norm-wise relative error: bf16 1e-2, f16 2e-3, f32 1e-5 for
 * K <= 4096, growing with sqrt(K / 4096) beyond (f32 accumulation error
 * grows so). It also checks that nothing was written between padded rows.
 * A failure names the configuration that ran.
 *
 * Needs a GPU: with none the tests fail, saying so. With TILEOPS_TEST_LOG
 * set to a file name, every case's error is appended to that file.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "gpu/gpu_util.h"
#include "gemm_kinds.h"

static double tol_of(tk_dtype dt, int64_t k)
{
	double t = dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 2e-3 : 1e-2;

	return k > 4096 ? t * sqrt((double)k / 4096.0) : t;
}

static void log_case(const char *what, double rel, double tol)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path != NULL ? fopen(path, "a") : NULL;

	if (f == NULL)
		return;
	fprintf(f, "gemm     %-72s rel %.3g tol %.3g\n", what, rel, tol);
	fclose(f);
}

/* One case: the sizes and what is given. */
typedef struct gcase {
	tk_dtype dt;
	int64_t batch; /* 0: gemm (2-D); >= 1: bmm (3-D) */
	int64_t m, n, k;
	int trans_b, bias, res, alias; /* alias: the residual is c itself */
	double alpha;
	int64_t pad; /* extra elements per row (and, for bmm, per batch) */
} gcase;

/*
 * Row padding of tensor i (a, b, c, residual): a multiple of 8 keeps every
 * tensor 16-byte aligned; other pads differ per tensor.
 */
static int64_t pad_of(const gcase *g, int i)
{
	return g->pad % 8 == 0 ? g->pad : g->pad + i;
}

/* Host tensors of a case, filled; for bmm, batches sit pad * 7 elements apart. */
typedef struct gdata {
	tk_call hc; /* host tensors; the CPU reference writes hc.out[0] */
	tk_call dc; /* the same on the device */
	size_t out_bytes;
	unsigned char *init; /* c's bytes before the run (poison, or the residual) */
} gdata;

static tk_tensor make_tensor(const gcase *g, int64_t rows, int64_t cols, int64_t pad)
{
	tk_tensor t;

	if (g->batch == 0) {
		int64_t s[2] = { rows, cols };
		return tt_tensor(g->dt, 2, s, pad);
	}
	memset(&t, 0, sizeof(t));
	t.dtype = g->dt;
	t.ndim = 3;
	t.shape[0] = g->batch;
	t.shape[1] = rows;
	t.shape[2] = cols;
	t.stride[2] = 1;
	t.stride[1] = cols + pad;
	t.stride[0] = rows * (cols + pad) + pad * 7;
	t.data = calloc((size_t)(g->batch * t.stride[0] + 1), tk_dtype_size(g->dt));
	return t;
}

static void *upload(const tk_tensor *t)
{
	size_t bytes = tt_span_bytes(t);
	void *d = NULL;

	if (t->data == NULL || bytes == 0)
		return NULL;
	cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess, "cudaMalloc %zu bytes", bytes);
	cr_assert_eq(cudaMemcpy(d, t->data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

static void case_name(const gcase *g, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s%ldx%ldx%ld%s tb %d bias %d res %d%s alpha %g pad %ld",
	         g->batch ? "bmm" : "gemm", tk_dtype_name(g->dt), (long)g->m, (long)g->n,
	         (long)g->k, g->batch ? " batched" : "", g->trans_b, g->bias, g->res,
	         g->alias ? " (c)" : "", g->alpha, (long)g->pad);
}

/* Fill the host tensors, run the CPU reference and upload the inputs. */
static void data_init(gdata *d, const gcase *g)
{
	uint64_t rng = gpu_fresh_seed();
	tk_call *c = &d->hc;

	memset(d, 0, sizeof(*d));
	c->n_out = 1;
	c->n_params = 2;
	c->n_in = g->batch ? 2 : (g->res ? 4 : g->bias ? 3 : 2);
	c->params[0] = tt_param_float(g->alpha);
	c->params[1] = tt_param_bool(g->trans_b);
	c->in[0] = make_tensor(g, g->m, g->k, pad_of(g, 0));
	c->in[1] = g->trans_b ? make_tensor(g, g->n, g->k, pad_of(g, 1))
	                      : make_tensor(g, g->k, g->n, pad_of(g, 1));
	c->out[0] = make_tensor(g, g->m, g->n, pad_of(g, 2));
	tt_fill(&c->in[0], &rng, -1.0, 1.0);
	tt_fill(&c->in[1], &rng, -1.0, 1.0);
	if (g->bias) {
		c->in[2] = tt_tensor(g->dt, 1, &g->n, 0);
		tt_fill(&c->in[2], &rng, -1.0, 1.0);
	}
	tt_poison(&c->out[0]);
	if (g->res && g->alias) {
		c->in[3] = c->out[0];
		tt_fill(&c->out[0], &rng, -1.0, 1.0);
	} else if (g->res) {
		c->in[3] = make_tensor(g, g->m, g->n, pad_of(g, 3));
		tt_fill(&c->in[3], &rng, -1.0, 1.0);
	}
	d->out_bytes = tt_span_bytes(&c->out[0]);
	d->init = malloc(d->out_bytes + 1);
	memcpy(d->init, c->out[0].data, d->out_bytes);

	d->dc = *c;
	for (int i = 0; i < c->n_in; i++)
		d->dc.in[i].data = i == 3 && g->alias ? NULL : upload(&c->in[i]);
	d->dc.out[0].data = upload(&c->out[0]);
	if (g->alias)
		d->dc.in[3].data = d->dc.out[0].data;
	cr_assert_eq(tk_kernel_find(g->batch ? "bmm" : "gemm")->cpu(c), TK_OK,
	             "the CPU reference refused the case");
}

/* Put c's initial bytes (poison or the residual) back on the device. */
static void data_reset(gdata *d)
{
	cr_assert_eq(cudaMemcpy(d->dc.out[0].data, d->init, d->out_bytes, cudaMemcpyHostToDevice),
	             cudaSuccess);
}

static void data_free(gdata *d, const gcase *g)
{
	for (int i = 0; i < d->hc.n_in; i++) {
		if (i == 3 && g->alias)
			continue;
		cudaFree(d->dc.in[i].data);
		tt_free(&d->hc.in[i]);
	}
	cudaFree(d->dc.out[0].data);
	tt_free(&d->hc.out[0]);
	free(d->init);
}

/* Compare the device's c with the CPU's; `how` names what ran. */
static void data_check(gdata *d, const gcase *g, const char *how)
{
	tk_tensor got = d->hc.out[0];
	int64_t n = tk_numel(&got);
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
	double tol = tol_of(g->dt, g->k), rel;
	char what[160];

	got.data = malloc(d->out_bytes + 1);
	cr_assert_eq(cudaMemcpy(got.data, d->dc.out[0].data, d->out_bytes, cudaMemcpyDeviceToHost),
	             cudaSuccess);
	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(&d->hc.out[0], i);
	rel = tt_rel_err(&got, want);
	case_name(g, what, sizeof(what));
	strncat(what, " ", sizeof(what) - strlen(what) - 1);
	strncat(what, how, sizeof(what) - strlen(what) - 1);
	log_case(what, rel, tol);
	cr_expect_leq(rel, tol, "%s: relative error %.3g > %.3g (seed 0x%llx)", what, rel, tol,
	              (unsigned long long)gpu_case_seed);
	cr_expect(gpu_padding_kept(&got, got.data, d->init), "%s wrote outside its elements", what);
	free(want);
	free(got.data);
}

static void sync_ok(cudaStream_t s, const char *what)
{
	cudaError_t e = cudaStreamSynchronize(s);

	cr_assert_eq(e, cudaSuccess, "%s: %s", what, cudaGetErrorString(e));
}

/* Through the op launcher, with `ws_bytes` of workspace (0: none). */
static void op_case(const gcase *g, size_t ws_bytes)
{
	const tk_kernel_entry *e;
	cudaStream_t s;
	gdata d;
	char how[64];

	gpu_require();
	e = tk_kernel_find(g->batch ? "bmm" : "gemm");
	cr_assert(e != NULL && e->cuda != NULL, "no CUDA launcher for gemm / bmm");
	data_init(&d, g);
	if (ws_bytes)
		cr_assert_eq(cudaMalloc(&d.dc.workspace, ws_bytes), cudaSuccess);
	d.dc.workspace_bytes = ws_bytes;
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	cr_assert_eq(e->cuda(&d.dc, s), TK_OK, "the CUDA launcher refused the case");
	sync_ok(s, "launch");
	snprintf(how, sizeof(how), "(op launcher, workspace %zu)", ws_bytes);
	data_check(&d, g, how);
	cudaStreamDestroy(s);
	cudaFree(d.dc.workspace);
	data_free(&d, g);
}

static const tk_dtype half_types[] = { TK_BF16, TK_F16 };

Test(gpu_gemm, decode_and_prefill_shapes_match_cpu_with_bias_and_residual)
{
	static const int64_t ms[] = { 1, 2, 7, 16, 33, 100, 128, 129, 300 };

	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
			gcase a = { half_types[t], 0, ms[i], 257, 1024, 1, 1, 1, 0, 1.0, 0 };
			gcase b = { half_types[t], 0, ms[i], 384, 2048, 1, 0, 1, 1, 0.5, 0 };
			op_case(&a, TK_WORKSPACE_BYTES);
			op_case(&b, TK_WORKSPACE_BYTES);
		}
	}
}

Test(gpu_gemm, b_stored_k_by_n_matches_cpu)
{
	static const int64_t ms[] = { 1, 7, 33, 129 };

	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
			gcase a = { half_types[t], 0, ms[i], 130, 520, 0, 1, 1, 0, -1.0, 0 };
			op_case(&a, TK_WORKSPACE_BYTES);
		}
	}
	gcase f = { TK_F32, 0, 33, 65, 129, 0, 1, 1, 0, 0.5, 3 };
	op_case(&f, TK_WORKSPACE_BYTES);
}

Test(gpu_gemm, long_k_matches_cpu_within_a_sqrt_k_tolerance)
{
	for (int t = 0; t < 2; t++) {
		gcase a = { half_types[t], 0, 1, 1024, 16384, 1, 0, 0, 0, 1.0, 0 };
		gcase b = { half_types[t], 0, 16, 96, 16384, 1, 1, 1, 0, 1.0, 0 };
		gcase c = { half_types[t], 0, 128, 64, 16384, 1, 0, 1, 1, 1.0, 0 };
		gcase d = { half_types[t], 0, 5, 9, 16384, 0, 1, 0, 0, 1.0, 0 };
		op_case(&a, TK_WORKSPACE_BYTES);
		op_case(&b, TK_WORKSPACE_BYTES);
		op_case(&c, TK_WORKSPACE_BYTES);
		op_case(&d, TK_WORKSPACE_BYTES);
	}
	gcase f = { TK_F32, 0, 3, 70, 16384, 1, 1, 1, 0, 0.25, 0 };
	op_case(&f, TK_WORKSPACE_BYTES);
}

Test(gpu_gemm, runs_without_workspace_and_on_unaligned_rows)
{
	for (int t = 0; t < 2; t++) {
		gcase a = { half_types[t], 0, 33, 512, 2048, 1, 1, 1, 0, 1.0, 0 };
		gcase b = { half_types[t], 0, 1, 96, 4096, 1, 0, 1, 1, 1.0, 0 };
		gcase c = { half_types[t], 0, 7, 65, 129, 1, 1, 1, 0, 1.0, 3 };
		gcase d = { half_types[t], 0, 100, 200, 64, 1, 0, 1, 0, 2.0, 1 };
		op_case(&a, 0);
		op_case(&b, 0);
		op_case(&c, TK_WORKSPACE_BYTES);
		op_case(&d, TK_WORKSPACE_BYTES);
	}
}

Test(gpu_gemm, a_prefill_shape_runs_on_the_large_kernels)
{
	gcase a = { TK_BF16, 0, 300, 512, 1024, 1, 1, 1, 0, 1.0, 0 };
	gcase b = { TK_F16, 0, 256, 384, 512, 0, 0, 1, 1, 1.0, 0 };

	op_case(&a, TK_WORKSPACE_BYTES);
	op_case(&b, TK_WORKSPACE_BYTES);
}

Test(gpu_bmm, batches_with_strides_match_cpu)
{
	for (int t = 0; t < 3; t++) {
		tk_dtype dt = tt_float_dtypes[t];
		for (int tb = 0; tb <= 1; tb++) {
			gcase a = { dt, 3, 7, 65, 130, tb, 0, 0, 0, 0.5, 3 };
			gcase b = { dt, 3, 16, 256, 512, tb, 0, 0, 0, 1.0, 8 };
			gcase c = { dt, 3, 200, 136, 264, tb, 0, 0, 0, 1.0, 0 };
			op_case(&a, TK_WORKSPACE_BYTES);
			op_case(&b, TK_WORKSPACE_BYTES);
			op_case(&b, 0);
			op_case(&c, TK_WORKSPACE_BYTES);
		}
	}
}

/* ---- every small-M configuration --------------------------------------- */

/* The problem of a case, as the launchers would build it. */
static tk_gemm_problem problem_of(const gdata *d, const gcase *g, void *ws, size_t ws_bytes)
{
	const tk_call *c = &d->dc;
	tk_gemm_problem p;
	int r = g->batch ? 1 : 0; /* the row-stride dim */

	memset(&p, 0, sizeof(p));
	p.dtype = g->dt;
	p.trans_b = g->trans_b;
	p.batch = g->batch ? g->batch : 1;
	p.m = g->m;
	p.n = g->n;
	p.k = g->k;
	p.a = c->in[0].data;
	p.b = c->in[1].data;
	p.bias = g->bias ? c->in[2].data : NULL;
	p.residual = g->res ? c->in[3].data : NULL;
	p.c = c->out[0].data;
	p.lda = c->in[0].stride[r];
	p.ldb = c->in[1].stride[r];
	p.ldc = c->out[0].stride[r];
	p.ldr = g->res ? c->in[3].stride[r] : 0;
	if (g->batch) {
		p.stride_a = c->in[0].stride[0];
		p.stride_b = c->in[1].stride[0];
		p.stride_c = c->out[0].stride[0];
	}
	p.alpha = (float)g->alpha;
	p.workspace = ws;
	p.workspace_bytes = ws_bytes;
	return p;
}

typedef int (*candidates_fn)(const tk_gemm_problem *, tk_gemm_config *, int);

/* Every configuration a family offers for g's problem matches the CPU. */
static void family_sweep(const gcase *g, candidates_fn family, const char *name)
{
	tk_gemm_config cfgs[512];
	tk_gemm_problem p;
	cudaStream_t s;
	void *ws = NULL;
	gdata d;
	int n;

	gpu_require();
	data_init(&d, g);
	cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	p = problem_of(&d, g, ws, TK_WORKSPACE_BYTES);
	n = family(&p, cfgs, 512);
	cr_assert_gt(n, 0, "the %s family declined m %ld n %ld k %ld", name, (long)g->m, (long)g->n,
	             (long)g->k);
	cr_assert_leq(n, 512);
	for (int i = 0; i < n; i++) {
		char how[96];
		tk_gemm_config_str(&cfgs[i], how, sizeof(how));
		data_reset(&d);
		cr_assert_eq(tk_gemm_launch(&p, &cfgs[i], s), TK_OK, "%s refused its own problem",
		             how);
		sync_ok(s, how);
		data_check(&d, g, how);
	}
	cudaStreamDestroy(s);
	cudaFree(ws);
	data_free(&d, g);
}

static void smallm_sweep(const gcase *g)
{
	family_sweep(g, tk_gemm_smallm_candidates, "small-M");
}

Test(gpu_gemm_smallm, every_configuration_matches_cpu)
{
	static const int64_t ms[] = { 1, 7, 20, 33, 100, 128 };

	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
			gcase a = { half_types[t], 0, ms[i], 136, 1000, 1, 1, 1, 0, 0.5, 0 };
			smallm_sweep(&a);
		}
		gcase b = { half_types[t], 0, 3, 72, 16384, 1, 0, 1, 1, 1.0, 0 };
		gcase c = { half_types[t], 2, 9, 200, 512, 1, 0, 0, 0, 1.0, 8 };
		smallm_sweep(&b);
		smallm_sweep(&c);
	}
}

/*
 * A bf16 decode problem every decode-capable family serves: 16 x 64 x 64,
 * weights [N, K], 16-byte aligned (the pointers are never dereferenced: the
 * declines tests only ask for candidates).
 */
static tk_gemm_problem aligned_decode_problem(void)
{
	tk_gemm_problem p;

	memset(&p, 0, sizeof(p));
	p.dtype = TK_BF16;
	p.trans_b = 1;
	p.batch = 1;
	p.m = 16;
	p.n = 64;
	p.k = 64;
	p.lda = p.ldb = p.ldc = 64;
	p.a = p.b = p.c = (void *)(uintptr_t)4096;
	return p;
}

/*
 * What every decode-size family refuses, on the aligned decode problem
 * (which it must serve, filling cfg): M above 128, b stored [K, N], f32.
 */
static void expect_decode_refusals(candidates_fn family, tk_gemm_config *cfg)
{
	tk_gemm_problem p = aligned_decode_problem();

	cr_expect_gt(family(&p, cfg, 4), 0, "an aligned decode shape");
	p.m = 129;
	cr_expect_eq(family(&p, cfg + 1, 3), 0, "M above 128");
	p.m = 16;
	p.trans_b = 0;
	cr_expect_eq(family(&p, cfg + 1, 3), 0, "b stored [K, N]");
	p.trans_b = 1;
	p.dtype = TK_F32;
	cr_expect_eq(family(&p, cfg + 1, 3), 0, "f32");
}

Test(gpu_gemm_smallm, declines_what_it_cannot_serve)
{
	tk_gemm_problem p = aligned_decode_problem();
	tk_gemm_config cfg[4];

	gpu_require();
	expect_decode_refusals(tk_gemm_smallm_candidates, cfg);
	p.k = 60;
	cr_expect_eq(tk_gemm_smallm_candidates(&p, cfg, 4), 0, "K not a multiple of 8");
}

/* ---- the decode family (TMA + wgmma, cluster split-K) ------------------- */

/*
 * Every configuration of the decode family, on each token tile (M = 1, 7,
 * 9, 20, 33, 65, 100, 128), N and K not multiples of the tiles (the copy
 * engine fills past them), K up to 16384, bias and residual (also aliasing
 * c at M = 128), alpha, batches with shared and per-batch weights (also at
 * M = 100).
 */
Test(gpu_gemm_decode, every_configuration_matches_cpu)
{
	static const int64_t ms[] = { 1, 7, 9, 20, 33, 65, 100, 128 };

	for (int t = 0; t < 2; t++) {
		for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
			gcase a = { half_types[t], 0, ms[i], 200, 1000, 1, 1, 1, 0, 0.5, 0 };
			family_sweep(&a, tk_gemm_decode_candidates, "decode");
		}
		gcase b = { half_types[t], 0, 3, 72, 16384, 1, 0, 1, 1, 1.0, 0 };
		gcase c = { half_types[t], 2, 9, 200, 512, 1, 0, 0, 0, 1.0, 8 };
		gcase d = { half_types[t], 0, 16, 4100, 2056, 1, 1, 0, 0, 1.0, 0 };
		gcase e = { half_types[t], 0, 128, 520, 1000, 1, 1, 1, 1, 1.0, 0 };
		gcase f = { half_types[t], 2, 100, 330, 704, 1, 0, 0, 0, 0.5, 8 };
		family_sweep(&b, tk_gemm_decode_candidates, "decode");
		family_sweep(&c, tk_gemm_decode_candidates, "decode");
		family_sweep(&d, tk_gemm_decode_candidates, "decode");
		family_sweep(&e, tk_gemm_decode_candidates, "decode");
		family_sweep(&f, tk_gemm_decode_candidates, "decode");
	}
}

Test(gpu_gemm_decode, declines_what_it_cannot_serve)
{
	tk_gemm_problem p = aligned_decode_problem();
	tk_gemm_config cfg[4];

	gpu_require();
	expect_decode_refusals(tk_gemm_decode_candidates, cfg);
	p.lda = 60;
	p.k = 60;
	cr_expect_eq(tk_gemm_decode_candidates(&p, cfg, 4), 0, "a row pitch not 16 bytes");
	p.lda = p.k = 64;
	p.b = (void *)(uintptr_t)4098;
	cr_expect_eq(tk_gemm_decode_candidates(&p, cfg, 4), 0, "b not 16-byte aligned");
	p.b = (void *)(uintptr_t)4096;
	/* K of 72 tiles, which splits 8 and 9 ways evenly: each refusal
	 * below is for what it names. */
	p.k = p.lda = p.ldb = 72 * 64;
	tk_gemm_config bad = cfg[0];
	bad.split_k = bad.cluster = 9;
	cr_expect_eq(tk_gemm_launch(&p, &bad, NULL), TK_ERR_UNSUPPORTED, "a cluster of 9");
	bad.split_k = 8;
	bad.cluster = 0;
	cr_expect_eq(tk_gemm_launch(&p, &bad, NULL), TK_ERR_UNSUPPORTED,
	             "a split through the workspace without one");
	p.workspace = (void *)(uintptr_t)8192;
	p.workspace_bytes = 1024;
	cr_expect_eq(tk_gemm_launch(&p, &bad, NULL), TK_ERR_UNSUPPORTED,
	             "a split through a workspace too small for it");
}

/*
 * Without a choice, one bf16 matrix with M <= 32 takes the decode family,
 * M = 64 does not, and f32 takes the simt family (the dispatcher's
 * built-in choice, docs/kernels.md).
 */
Test(gpu_gemm_decode, the_built_in_choice_takes_it_up_to_m_32)
{
	tk_gemm_problem p = aligned_decode_problem();
	tk_gemm_config cfg;

	gpu_require();
	p.n = p.ldc = 4096;
	p.k = p.lda = p.ldb = 4096;
	for (int64_t m = 1; m <= 32; m *= 2) {
		p.m = m;
		tk_gemm_builtin(&p, &cfg);
		cr_expect_eq(cfg.kind, TK_GEMM_DECODE, "M = %ld took kind %d", (long)m, cfg.kind);
	}
	p.m = 64;
	tk_gemm_builtin(&p, &cfg);
	cr_expect_neq(cfg.kind, TK_GEMM_DECODE, "M = 64");
	p.m = 16;
	p.batch = 2;
	p.stride_a = p.m * p.lda;
	p.stride_b = p.n * p.ldb;
	p.stride_c = p.m * p.ldc;
	tk_gemm_builtin(&p, &cfg);
	cr_expect_neq(cfg.kind, TK_GEMM_DECODE, "a batch of 2");
	p.batch = 1;
	p.dtype = TK_F32;
	tk_gemm_builtin(&p, &cfg);
	cr_expect_eq(cfg.kind, TK_GEMM_SIMT, "f32 took kind %d", cfg.kind);
}

/* ---- the f32 family (CUDA cores, split-K) ------------------------------- */

/*
 * Every configuration the simt family offers (its splits through the
 * workspace among them): sizes that are not multiples of the 128 x 128
 * tile or of the 16-wide K step, both layouts, bias, a residual that is c
 * itself, alpha, padded rows, batches.
 */
Test(gpu_gemm_simt, every_configuration_matches_cpu)
{
	gcase cases[] = {
		{ TK_F32, 0, 128, 6144, 4096, 1, 0, 0, 0, 1.0, 0 },
		{ TK_F32, 0, 1, 300, 1000, 1, 1, 1, 0, 0.5, 0 },
		{ TK_F32, 0, 129, 257, 4099, 0, 1, 1, 1, 1.0, 3 },
		{ TK_F32, 0, 300, 130, 33, 1, 0, 0, 0, 2.0, 5 },
		{ TK_F32, 3, 70, 200, 600, 0, 0, 0, 0, 1.0, 8 },
		{ TK_F32, 2, 16, 136, 2048, 1, 0, 0, 0, 1.0, 0 },
		/* whole 16-byte vectors (the s2 build) with ragged M and N edges:
		 * a [K, N] b with bias and c as the residual, an [N, K] b of odd N */
		{ TK_F32, 0, 129, 260, 1000, 0, 1, 1, 1, 1.0, 0 },
		{ TK_F32, 0, 131, 257, 516, 1, 1, 1, 0, 1.0, 8 },
		/* few rows against an [N, K] b (the m8 build): odd N, c as the
		 * residual; a batch of 3 with padded rows */
		{ TK_F32, 0, 8, 1001, 4096, 1, 1, 1, 1, 1.0, 0 },
		{ TK_F32, 3, 5, 200, 516, 1, 0, 0, 0, 0.5, 8 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		family_sweep(&cases[i], tk_gemm_simt_candidates, "simt");
}

/*
 * An f32 m x 6144 x 4096 problem over [N, K] b, every pointer the 16-byte
 * aligned host (never launched: the candidate lists and refusals only).
 */
static tk_gemm_problem aligned_f32(float *host, int64_t m)
{
	tk_gemm_problem p;

	memset(&p, 0, sizeof(p));
	p.dtype = TK_F32;
	p.trans_b = 1;
	p.batch = 1;
	p.m = m, p.n = 6144, p.k = 4096;
	p.a = host, p.b = host, p.c = host;
	p.lda = 4096, p.ldb = 4096, p.ldc = 6144;
	p.alpha = 1.0f;
	return p;
}

/* Whether the simt family offers its vector build (s2) for p. */
static int offers_s2(const tk_gemm_problem *p)
{
	tk_gemm_config cfgs[16];
	int n = tk_gemm_simt_candidates(p, cfgs, 16), s2 = 0;
	cr_assert_gt(n, 0, "the simt family declined a problem it serves");
	for (int i = 0; i < n && i < 16; i++)
		s2 += cfgs[i].stages == 2;
	return s2;
}

/*
 * The s2 build reads whole 16-byte vectors: offered (and first) when a and
 * b are aligned with pitches, batch strides and K in whole vectors (and N
 * too for a [K, N] b); neither offered nor launched otherwise.
 */
Test(gpu_gemm_simt, the_vector_build_takes_only_whole_vectors)
{
	static _Alignas(16) float host[16];
	tk_gemm_problem p = aligned_f32(host, 128);
	tk_gemm_config cfgs[16];

	gpu_require();
	cr_assert_gt(offers_s2(&p), 0, "aligned [N, K] operands");
	cr_assert_eq(tk_gemm_simt_candidates(&p, cfgs, 16) > 0 ? cfgs[0].stages : -1, 2,
	             "s2 is not the first pick");
	p.trans_b = 0;
	p.ldb = 6144;
	cr_assert_gt(offers_s2(&p), 0, "aligned [K, N] operands");
	p.n = 6143, p.ldb = 6144;
	cr_assert_eq(offers_s2(&p), 0, "a [K, N] b with N = 6143");
	p.n = 6144, p.k = 4095;
	cr_assert_eq(offers_s2(&p), 0, "K = 4095");
	p.k = 4096, p.lda = 4098;
	cr_assert_eq(offers_s2(&p), 0, "lda = 4098");
	p.lda = 4096;
	p.a = host + 1;
	cr_assert_eq(offers_s2(&p), 0, "a off 16 bytes");
	tk_gemm_config c = { TK_GEMM_SIMT, 128, 128, 16, 2, 0, 1 };
	cr_assert_eq(tk_gemm_launch(&p, &c, NULL), TK_ERR_UNSUPPORTED,
	             "s2 launched on a misaligned a");
	p.a = host;
	p.batch = 2, p.stride_a = 4096 * 128 + 2, p.stride_b = 0, p.stride_c = 6144 * 128;
	cr_assert_eq(offers_s2(&p), 0, "a batch stride off whole vectors");
}

/* Whether the simt family offers its few-rows build (m8 n2 k128 s1) for p, and first. */
static int offers_gemv(const tk_gemm_problem *p)
{
	tk_gemm_config cfgs[16];
	int n = tk_gemm_simt_candidates(p, cfgs, 16), at = -1;
	cr_assert_gt(n, 0, "the simt family declined a problem it serves");
	for (int i = 0; i < n && i < 16; i++)
		if (cfgs[i].tile_m == 8 && cfgs[i].tile_n == 2 && cfgs[i].stages == 1 && at < 0)
			at = i;
	cr_assert(at <= 0, "the few-rows build is offered, but not first (at %d)", at);
	return at == 0;
}

/*
 * The few-rows build reads an [N, K] b of whole vectors for at most 8 rows
 * of a: offered first then, not for 9 rows, a [K, N] b or a K off whole
 * vectors, and not launched for them.
 */
Test(gpu_gemm_simt, the_few_rows_build_takes_only_what_it_reads_whole)
{
	static _Alignas(16) float host[16];
	tk_gemm_problem p = aligned_f32(host, 1);

	gpu_require();
	cr_assert(offers_gemv(&p), "M = 1");
	p.m = 8;
	cr_assert(offers_gemv(&p), "M = 8");
	p.m = 9;
	cr_assert(!offers_gemv(&p), "M = 9");
	tk_gemm_config c = { TK_GEMM_SIMT, 8, 2, 128, 1, 0, 1 };
	cr_assert_eq(tk_gemm_launch(&p, &c, NULL), TK_ERR_UNSUPPORTED, "launched for M = 9");
	p.m = 4, p.k = 4094, p.lda = 4096;
	cr_assert(!offers_gemv(&p), "K = 4094");
	p.k = 4096, p.trans_b = 0, p.ldb = 6144;
	cr_assert(!offers_gemv(&p), "a [K, N] b");
	cr_assert_eq(tk_gemm_launch(&p, &c, NULL), TK_ERR_UNSUPPORTED, "launched for a [K, N] b");
}

Test(gpu_gemm_simt, splits_give_the_same_bits_on_every_run)
{
	gcase g = { TK_F32, 0, 128, 1000, 4096, 1, 0, 0, 0, 1.0, 0 };
	tk_gemm_config cfgs[16];
	cudaStream_t s;
	void *ws = NULL;
	gdata d;

	gpu_require();
	data_init(&d, &g);
	cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	tk_gemm_problem p = problem_of(&d, &g, ws, TK_WORKSPACE_BYTES);
	int n = tk_gemm_simt_candidates(&p, cfgs, 16), tried = 0;
	unsigned char *first = malloc(d.out_bytes), *got = malloc(d.out_bytes);
	cr_assert(first != NULL && got != NULL);
	for (int i = 0; i < n && i < 16; i++) {
		if (cfgs[i].split_k <= 1)
			continue;
		char how[96];
		tk_gemm_config_str(&cfgs[i], how, sizeof(how));
		for (int k = 0; k < 10; k++) {
			cr_assert_eq(tk_gemm_launch(&p, &cfgs[i], s), TK_OK, "%s", how);
			sync_ok(s, how);
			cr_assert_eq(cudaMemcpy(k ? got : first, d.dc.out[0].data, d.out_bytes,
			                        cudaMemcpyDeviceToHost),
			             cudaSuccess);
			cr_assert(k == 0 || memcmp(first, got, d.out_bytes) == 0,
			          "%s: run %d differs from the first in its bits", how, k + 1);
		}
		tried++;
	}
	cr_assert_gt(tried, 0, "no split offered for m 128 n 1000 k 4096");
	free(first);
	free(got);
	cudaStreamDestroy(s);
	cudaFree(ws);
	data_free(&d, &g);
}

/*
 * The configurations of a family that split K through the workspace add the
 * partial sums in K order whichever CTA finishes last: twenty runs of each
 * give the bits of the first.
 */
static void same_bits_sweep(candidates_fn family, const char *name, int64_t m)
{
	gcase g = { TK_BF16, 0, m, 520, 7168, 1, 0, 0, 0, 1.0, 0 };
	tk_gemm_config cfgs[512];
	cudaStream_t s;
	void *ws = NULL;
	gdata d;

	gpu_require();
	data_init(&d, &g);
	cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	tk_gemm_problem p = problem_of(&d, &g, ws, TK_WORKSPACE_BYTES);
	int n = family(&p, cfgs, 512), tried = 0;
	unsigned char *first = malloc(d.out_bytes), *got = malloc(d.out_bytes);
	cr_assert(first != NULL && got != NULL);
	for (int i = 0; i < n; i++) {
		if (cfgs[i].split_k <= 1 || cfgs[i].cluster > 1)
			continue;
		char how[96];
		tk_gemm_config_str(&cfgs[i], how, sizeof(how));
		for (int k = 0; k < 20; k++) {
			cr_assert_eq(tk_gemm_launch(&p, &cfgs[i], s), TK_OK, "%s", how);
			sync_ok(s, how);
			cr_assert_eq(cudaMemcpy(k ? got : first, d.dc.out[0].data, d.out_bytes,
			                        cudaMemcpyDeviceToHost),
			             cudaSuccess);
			cr_assert(k == 0 || memcmp(first, got, d.out_bytes) == 0,
			          "%s: run %d differs from the first in its bits", how, k + 1);
		}
		tried++;
	}
	cr_assert_gt(tried, 0, "the %s family offered no workspace split for m %ld n 520 k 7168",
	             name, (long)m);
	free(first);
	free(got);
	cudaStreamDestroy(s);
	cudaFree(ws);
	data_free(&d, &g);
}

Test(gpu_gemm_smallm, workspace_splits_give_the_same_bits_on_every_run)
{
	same_bits_sweep(tk_gemm_smallm_candidates, "small-M", 16);
}

Test(gpu_gemm_decode, workspace_splits_give_the_same_bits_on_every_run)
{
	same_bits_sweep(tk_gemm_decode_candidates, "decode", 16);
	same_bits_sweep(tk_gemm_decode_candidates, "decode", 100);
}

/* ---- dependent launches ------------------------------------------------- */

/* A bf16 matrix of a chain, on the host and on the device. */
typedef struct chain_mat {
	tk_tensor h;
	void *d;
} chain_mat;

static chain_mat chain_mat_new(int64_t rows, int64_t cols)
{
	int64_t s[2] = { rows, cols };
	chain_mat m;

	m.h = tt_tensor(TK_BF16, 2, s, 0);
	cr_assert_eq(cudaMalloc(&m.d, tt_span_bytes(&m.h)), cudaSuccess);
	return m;
}

/*
 * c = alpha * a op(b) on the device in the pick-th configuration (modulo
 * their count) the sm90 and decode families offer, enqueued on s; with cpu
 * set, on the host too.
 */
static void chain_product(chain_mat *a, chain_mat *b, int trans_b, double alpha, chain_mat *c,
                          void *ws, int pick, int cpu, cudaStream_t s)
{
	tk_gemm_config cfgs[512];
	tk_gemm_problem p;
	char how[96];

	memset(&p, 0, sizeof(p));
	p.dtype = TK_BF16;
	p.trans_b = trans_b;
	p.batch = 1;
	p.m = a->h.shape[0];
	p.k = a->h.shape[1];
	p.n = trans_b ? b->h.shape[0] : b->h.shape[1];
	p.a = a->d;
	p.b = b->d;
	p.c = c->d;
	p.lda = p.k;
	p.ldb = b->h.shape[1];
	p.ldc = p.n;
	p.alpha = (float)alpha;
	p.workspace = ws;
	p.workspace_bytes = TK_WORKSPACE_BYTES;
	int n = tk_gemm_sm90_candidates(&p, cfgs, 256);
	n += tk_gemm_decode_candidates(&p, cfgs + n, 256);
	cr_assert_gt(n, 0, "no configuration for %ldx%ldx%ld", (long)p.m, (long)p.n, (long)p.k);
	tk_gemm_config_str(&cfgs[pick % n], how, sizeof(how));
	cr_assert_eq(tk_gemm_launch(&p, &cfgs[pick % n], s), TK_OK, "%s refused", how);
	if (cpu) {
		tk_call hc = { .n_in = 2, .n_out = 1, .n_params = 2 };
		hc.in[0] = a->h;
		hc.in[1] = b->h;
		hc.out[0] = c->h;
		hc.params[0] = tt_param_float(alpha);
		hc.params[1] = tt_param_bool(trans_b);
		cr_assert_eq(tk_kernel_find("gemm")->cpu(&hc), TK_OK);
	}
}

/* out = rms_norm(x) * w, as chain_product. */
static void chain_norm(chain_mat *x, chain_mat *w, chain_mat *out, int cpu, cudaStream_t s)
{
	const tk_kernel_entry *e = tk_kernel_find("rms_norm");
	tk_call hc = { .n_in = 2, .n_out = 1, .n_params = 1 }, dc;

	cr_assert_not_null(e);
	hc.in[0] = x->h;
	hc.in[1] = w->h;
	hc.out[0] = out->h;
	hc.params[0] = tt_param_float(1e-6);
	dc = hc;
	dc.in[0].data = x->d;
	dc.in[1].data = w->d;
	dc.out[0].data = out->d;
	cr_assert_eq(e->cuda(&dc, s), TK_OK, "rms_norm refused");
	if (cpu)
		cr_assert_eq(e->cpu(&hc), TK_OK);
}

/*
 * Products chained the way a layer chains them, all enqueued before one
 * synchronize: with programmatic dependent launch a product's CTAs start
 * while the kernel before runs, ask the L2 for weights early and must wait
 * before reading a (written by the kernel before), reading b when the
 * kernel before wrote it (scores and their product with the values, both
 * layouts of b), and writing c over what the kernel before read. Per
 * round: y = rms_norm(x); s = y y^T / d; x = s y; y = x w^T / sqrt(d);
 * x = rms_norm(y), each product in another configuration of the sm90 and
 * decode families (splits through the workspace and in clusters among
 * them). The chain gives the same bits with PDL and without (the kernels
 * are deterministic, so any difference is a race), and agrees with the CPU.
 * The first run also computes the CPU's chain, so its launches trickle in;
 * the last two are enqueued at full speed.
 */
Test(gpu_gemm_pdl, chained_products_give_the_same_bits_with_and_without_pdl)
{
	const int64_t m = 128, d = 1024;
	const int rounds = 4;
	gpu_require();
	uint64_t rng = gpu_fresh_seed();
	chain_mat x = chain_mat_new(m, d), y = chain_mat_new(m, d), sc = chain_mat_new(m, m);
	chain_mat w = chain_mat_new(d, d), g;
	tk_tensor x0 = tt_tensor(TK_BF16, 2, x.h.shape, 0);
	size_t bytes = tt_span_bytes(&x.h);
	unsigned char *first = malloc(bytes), *got = malloc(bytes);
	void *ws = NULL;
	cudaStream_t s;
	int was = tk_cuda_set_pdl(1);

	cr_assert(first != NULL && got != NULL);
	g.h = tt_tensor(TK_BF16, 1, &d, 0);
	cr_assert_eq(cudaMalloc(&g.d, tt_span_bytes(&g.h)), cudaSuccess);
	tt_fill(&x0, &rng, -1.0, 1.0);
	tt_fill(&w.h, &rng, -1.0, 1.0);
	tt_fill(&g.h, &rng, 0.5, 1.5);
	cr_assert_eq(cudaMemcpy(w.d, w.h.data, tt_span_bytes(&w.h), cudaMemcpyHostToDevice),
	             cudaSuccess);
	cr_assert_eq(cudaMemcpy(g.d, g.h.data, tt_span_bytes(&g.h), cudaMemcpyHostToDevice),
	             cudaSuccess);
	cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	memcpy(x.h.data, x0.data, bytes);
	for (int run = 0; run < 4; run++) {
		int pdl = run != 1, cpu = run == 0;
		tk_cuda_set_pdl(pdl);
		cr_assert_eq(cudaMemcpy(x.d, x0.data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
		for (int r = 0; r < rounds; r++) {
			chain_norm(&x, &g, &y, cpu, s);
			chain_product(&y, &y, 1, 1.0 / (double)d, &sc, ws, 7 * r + 1, cpu, s);
			chain_product(&sc, &y, 0, 1.0, &x, ws, 7 * r + 2, cpu, s);
			chain_product(&x, &w, 1, 1.0 / sqrt((double)d), &y, ws, 7 * r + 3, cpu, s);
			chain_norm(&y, &g, &x, cpu, s);
		}
		sync_ok(s, "the chain");
		cr_assert_eq(cudaMemcpy(run ? got : first, x.d, bytes, cudaMemcpyDeviceToHost),
		             cudaSuccess);
		cr_assert(run == 0 || memcmp(first, got, bytes) == 0,
		          "the chain with PDL %d gave other bits than with PDL on (seed 0x%llx)",
		          pdl, (unsigned long long)gpu_case_seed);
	}
	tk_cuda_set_pdl(was);

	tk_tensor dev = x.h;
	int64_t n = tk_numel(&dev);
	double *want = malloc(sizeof(double) * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(&x.h, i);
	dev.data = first;
	double rel = tt_rel_err(&dev, want);
	log_case("chain of products and norms, PDL on and off", rel, 5e-2);
	cr_expect_leq(rel, 5e-2, "the chain against the CPU: relative error %.3g (seed 0x%llx)",
	              rel, (unsigned long long)gpu_case_seed);
	free(want);
	free(first);
	free(got);
	cudaStreamDestroy(s);
	cudaFree(ws);
	chain_mat *all[] = { &x, &y, &sc, &w, &g };
	for (int i = 0; i < 5; i++) {
		cudaFree(all[i]->d);
		tt_free(&all[i]->h);
	}
	tt_free(&x0);
}

/* ---- the choice API ----------------------------------------------------- */

/*
 * Every candidate the gemm family's tuning interface offers for g (gemm or
 * bmm by g->batch), each run through the op launcher as an exact choice
 * into fresh poison, matches the CPU. Returns how many there were.
 */
static int every_candidate(const gcase *g)
{
	const tk_kernel_entry *e = tk_kernel_find(g->batch ? "bmm" : "gemm");
	tk_choice cand[256];
	cudaStream_t s;
	gdata d;

	gpu_require();
	cr_assert(e != NULL && e->cuda != NULL && e->tuning != NULL && e->tuning->candidates);
	data_init(&d, g);
	cr_assert_eq(cudaMalloc(&d.dc.workspace, TK_WORKSPACE_BYTES), cudaSuccess);
	d.dc.workspace_bytes = TK_WORKSPACE_BYTES;
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	int n = e->tuning->candidates(&d.dc, cand, 256);
	cr_assert_geq(n, 1, "%s: no candidate, not even the simple kernel", e->op);
	cr_assert_leq(n, 256);
	for (int i = 0; i < n; i++) {
		char how[TK_TUNING_TEXT_MAX + 16];
		cr_assert_eq(cand[i].mode, TK_CHOICE_EXACT);
		cr_assert_eq(e->tuning->format_choice(&cand[i], how, sizeof(how)), 0);
		strncat(how, " (choice)", sizeof(how) - strlen(how) - 1);
		data_reset(&d);
		d.dc.choice = cand[i];
		cr_assert_eq(e->cuda(&d.dc, s), TK_OK, "%s refused its own candidate %s", e->op,
		             how);
		sync_ok(s, how);
		data_check(&d, g, how);
	}
	cudaStreamDestroy(s);
	cudaFree(d.dc.workspace);
	d.dc.workspace = NULL;
	data_free(&d, g);
	return n;
}

Test(gpu_gemm_choice, every_candidate_matches_cpu_through_the_launcher, .timeout = 600)
{
	static const gcase cases[] = {
		{ TK_BF16, 0, 1, 520, 1000, 1, 1, 1, 0, 1.0, 0 },
		{ TK_F16, 0, 16, 264, 2048, 1, 0, 1, 1, 0.5, 0 },
		{ TK_BF16, 0, 100, 384, 1024, 1, 1, 0, 0, 1.0, 0 },
		{ TK_BF16, 0, 300, 512, 1024, 0, 1, 1, 0, 1.0, 0 },
		{ TK_F16, 0, 256, 384, 512, 1, 0, 1, 1, 1.0, 8 },
		{ TK_F32, 0, 33, 300, 1000, 1, 1, 1, 0, 0.5, 0 },
		{ TK_F32, 0, 128, 1000, 4096, 0, 0, 0, 0, 1.0, 0 },
		{ TK_BF16, 3, 16, 256, 512, 1, 0, 0, 0, 1.0, 8 },
		{ TK_F16, 2, 200, 136, 264, 0, 0, 0, 0, 1.0, 0 },
		{ TK_F32, 3, 7, 65, 130, 1, 0, 0, 0, 0.5, 3 },
	};
	int ran = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ran += every_candidate(&cases[i]);
	/* Far more than the simple kernel of each case: the other families ran too. */
	cr_assert_gt(ran, 4 * (int)(sizeof(cases) / sizeof(cases[0])), "%d candidates in all", ran);
}

/*
 * A choice that cannot serve the call (a split through the workspace when
 * there is none): preferred, the built-in choice runs and matches; exact,
 * the launcher refuses it.
 */
Test(gpu_gemm_choice,
     a_choice_that_cannot_serve_falls_back_when_preferred_and_is_refused_when_exact)
{
	const gcase g = { TK_BF16, 0, 16, 520, 7168, 1, 0, 0, 0, 1.0, 0 };
	const tk_kernel_entry *e = tk_kernel_find("gemm");
	tk_choice cand[256], split;
	cudaStream_t s;
	gdata d;
	int found = 0;

	gpu_require();
	data_init(&d, &g);
	cr_assert_eq(cudaMalloc(&d.dc.workspace, TK_WORKSPACE_BYTES), cudaSuccess);
	d.dc.workspace_bytes = TK_WORKSPACE_BYTES;
	int n = e->tuning->candidates(&d.dc, cand, 256);
	for (int i = 0; i < n && i < 256 && !found; i++) {
		tk_gemm_config cfg;
		tk_gemm_config_of(&cand[i], &cfg);
		/* a split through the workspace: no cluster */
		if (cfg.split_k > 1 && cfg.cluster <= 1) {
			split = cand[i];
			found = 1;
		}
	}
	cr_assert(found, "no workspace split offered for m 16 n 520 k 7168");
	cudaFree(d.dc.workspace);
	d.dc.workspace = NULL;
	d.dc.workspace_bytes = 0;
	cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
	d.dc.choice = split;
	cr_assert_eq(e->cuda(&d.dc, s), TK_ERR_UNSUPPORTED,
	             "an exact workspace split ran without a workspace");
	d.dc.choice.mode = TK_CHOICE_PREFER;
	data_reset(&d);
	cr_assert_eq(e->cuda(&d.dc, s), TK_OK, "a preferred choice did not fall back");
	sync_ok(s, "preferred split without workspace");
	data_check(&d, &g, "(preferred split without workspace: the built-in choice)");
	cudaStreamDestroy(s);
	data_free(&d, &g);
}

/* ---- measuring -------------------------------------------------------------- */

/*
 * The gemm family's measuring function on a call without a workspace (as
 * the daemon's first use calls it) and on the legacy default stream (which
 * cannot be captured: it times on a private one): it picks a choice that
 * the launcher runs exactly and that computes the product, and it leaves
 * the call's c as it was (its candidates write scratch outputs), also when
 * the residual is c itself.
 */
Test(gpu_gemm_tune, measuring_picks_a_working_choice_and_leaves_the_call_alone)
{
	static const gcase cases[] = {
		{ .dt = TK_BF16, .m = 16, .n = 520, .k = 1000, .trans_b = 1, .alpha = 1.0 },
		{ TK_BF16, 0, 100, 384, 2048, 1, 0, 1, 1, 0.5, 0 },
		{ TK_F16, 2, 64, 512, 128, 0, 0, 0, 0, 1.0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const gcase *g = &cases[i];
		const tk_kernel_entry *e = tk_kernel_find(g->batch ? "bmm" : "gemm");
		tk_choice best;
		double us = 0.0;
		char how[TK_TUNING_TEXT_MAX + 16], err[256] = "";
		gdata d;

		gpu_require();
		cr_assert(e->tuning != NULL && e->tuning->measure != NULL);
		data_init(&d, g);
		cr_assert_eq(e->tuning->measure(&d.dc, NULL, 5.0, &best, &us, err, sizeof(err)),
		             TK_OK, "measuring failed: %s", err);
		cr_assert_gt(us, 0.0, "no time measured");
		cr_assert_eq(best.mode, TK_CHOICE_PREFER);
		/* c is as data_init left it: the poison, or the residual it holds */
		unsigned char *now = malloc(d.out_bytes);
		cr_assert_eq(cudaMemcpy(now, d.dc.out[0].data, d.out_bytes, cudaMemcpyDeviceToHost),
		             cudaSuccess);
		cr_assert_eq(memcmp(now, d.init, d.out_bytes), 0, "measuring wrote the call's c");
		free(now);
		cr_assert_eq(e->tuning->format_choice(&best, how, sizeof(how)), 0);
		cr_assert_eq(cudaMalloc(&d.dc.workspace, TK_WORKSPACE_BYTES), cudaSuccess);
		d.dc.workspace_bytes = TK_WORKSPACE_BYTES;
		d.dc.choice = best;
		d.dc.choice.mode = TK_CHOICE_EXACT;
		cr_assert_eq(e->cuda(&d.dc, NULL), TK_OK, "the pick %s refused", how);
		sync_ok(NULL, how);
		data_check(&d, g, how);
		cudaFree(d.dc.workspace);
		d.dc.workspace = NULL;
		data_free(&d, g);
	}
}
