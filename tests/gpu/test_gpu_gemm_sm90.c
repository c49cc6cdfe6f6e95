/*
 * test_gpu_gemm_sm90.c - the Hopper GEMM family (TMA + wgmma) against a
 * double-precision CPU reference.
 *
 * For f16 and bf16, both layouts of b ([N, K] and [K, N]) and every
 * configuration tk_gemm_sm90_candidates offers, plus each unsplit one split
 * along K in 2, 3 and 7 (7 leaves empty K ranges when K is short), each case
 * runs on fresh random inputs (the seed is printed on failure) at sizes that
 * are not tile multiples, with batches, alpha, bias and residual (also
 * residual aliasing c; cases without a residual and with N a multiple of 8
 * run the TMA-store epilogue of the m64 and m128 tiles, with and without a
 * bias). c and the workspace are poisoned with 0xFF
 * bytes (NaN in both dtypes) before each run, and padded rows check that
 * nothing is written past N. The error is norm-wise: ||c - ref|| / ||ref||. Each failing
 * configuration prints one line naming it. Needs a Hopper GPU.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_kinds.h"
#include "gpu/gpu_util.h"
#include "tk_gemm.h"

enum res_mode { RES_NONE, RES_OWN, RES_IN_C };

struct sm90_case {
	int64_t m, n, k, batch;
	float alpha;
	int bias;
	enum res_mode res;
	int shared_b; /* batch > 1: one b for every batch (stride 0) */
};

static const struct sm90_case CASES[] = {
	{ 1, 8, 72, 1, 1.0f, 0, RES_NONE, 0 },
	{ 127, 136, 1000, 1, 1.0f, 0, RES_NONE, 0 },
	{ 129, 257, 8, 1, 1.0f, 1, RES_NONE, 0 },
	{ 300, 1, 72, 1, 0.5f, 0, RES_OWN, 0 },
	{ 300, 136, 37, 1, -1.25f, 1, RES_OWN, 0 },
	{ 129, 257, 72, 3, 0.75f, 1, RES_IN_C, 0 },
	{ 127, 136, 1000, 3, 2.0f, 0, RES_OWN, 1 },
	{ 129, 136, 16384, 1, 1.0f, 0, RES_NONE, 0 },
	{ 2053, 2057, 136, 1, 1.0f, 1, RES_OWN, 0 },
	{ 520, 1000, 2048, 1, 1.0f, 1, RES_OWN, 0 },
	{ 200, 264, 128, 4, 1.5f, 0, RES_NONE, 0 }, /* bmm-like: c stored by TMA (m64) */
	/* neither bias nor residual, N off a multiple of 8 (c stored by the threads) */
	{ 129, 257, 40, 2, 1.0f, 0, RES_NONE, 0 },
	/* a bias without a residual (c stored by TMA, the bias added in the chunks) */
	{ 300, 264, 200, 2, 0.5f, 1, RES_NONE, 0 },
	/* the same, one batch, the last tile-column partly past N */
	{ 520, 1000, 136, 1, -0.75f, 1, RES_NONE, 0 },
	/* bmm-like with several tiles a CTA: the store chunks' buffers are reused */
	{ 520, 1000, 136, 12, 1.0f, 0, RES_NONE, 0 },
};

/* Splits tried on every unsplit candidate besides those the family offers. */
static const int EXTRA_SPLITS[] = { 2, 3, 7 };
#define MAX_CFGS 128

/* ---- host f16 / bf16 ---------------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t to_bf16(float f)
{
	uint32_t u = f32_bits(f);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Round to nearest even; the inputs here are finite and in the normal range or 0. */
static uint16_t to_f16(float f)
{
	uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u;
	int32_t e = (int32_t)((u >> 23) & 0xff) - 127 + 15;
	uint32_t mant = u & 0x7fffffu;

	if (e <= 0)
		return (uint16_t)sign; /* below f16's normal range: flush */
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
		h++;
	return (uint16_t)(sign | h);
}

static float from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;

	if (e == 31)
		return bits_f32(sign | 0x7f800000u | (m << 13));
	if (e == 0) {
		float v = ldexpf((float)m, -24);
		return sign ? -v : v;
	}
	return bits_f32(sign | ((e - 15 + 127) << 23) | (m << 13));
}

static float from_half(tk_dtype dt, uint16_t h)
{
	return dt == TK_BF16 ? bits_f32((uint32_t)h << 16) : from_f16(h);
}

static uint16_t to_half(tk_dtype dt, float f)
{
	return dt == TK_BF16 ? to_bf16(f) : to_f16(f);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [-1, 1), rounded to dt. */
static void fill_random(tk_dtype dt, uint16_t *x, size_t n, uint64_t *s)
{
	for (size_t i = 0; i < n; i++) {
		float v = (float)((double)(rng_next(s) >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
		x[i] = to_half(dt, v);
	}
}

/* ---- one problem: host buffers, device buffers, reference ---------------- */

struct sm90_run {
	tk_gemm_problem p;
	size_t na, nb, nc, nbias;
	uint16_t *a, *b, *bias, *res, *c0; /* c0: c's contents before a run */
	double *ref;
	void *da, *db, *dbias, *dres, *dc;
};

/* The workspace every run gets: what the daemon hands a kernel. */
static void *workspace(void)
{
	static void *ws;

	if (ws == NULL)
		cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	return ws;
}

static void *dev_copy(const void *h, size_t bytes)
{
	void *d = NULL;
	cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess, "cudaMalloc %zu bytes", bytes);
	if (h != NULL)
		cr_assert_eq(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

static int64_t round8(int64_t x)
{
	return (x + 7) / 8 * 8;
}

static void run_setup(struct sm90_run *r, const struct sm90_case *tc, tk_dtype dt, int trans_b)
{
	tk_gemm_problem *p = &r->p;
	uint64_t s = gpu_fresh_seed();

	memset(r, 0, sizeof(*r));
	p->dtype = dt;
	p->trans_b = trans_b;
	p->batch = tc->batch;
	p->m = tc->m;
	p->n = tc->n;
	p->k = tc->k;
	p->alpha = tc->alpha;
	/* Padded pitches: writes past N would land in the padding. */
	p->lda = round8(tc->k + 5);
	p->ldb = trans_b ? round8(tc->k + 3) : round8(tc->n + 9);
	p->ldc = round8(tc->n + 1);
	p->ldr = tc->res == RES_IN_C ? p->ldc : round8(tc->n + 17);
	p->stride_a = tc->batch > 1 ? p->lda * tc->m + 8 : 0;
	p->stride_b = tc->batch > 1 && !tc->shared_b ? p->ldb * (trans_b ? tc->n : tc->k) + 16 : 0;
	p->stride_c = tc->batch > 1 ? p->ldc * tc->m : 0;
	p->stride_r = tc->batch > 1 ? p->ldr * tc->m + 24 : 0;

	r->na = (size_t)(p->stride_a ? p->stride_a * tc->batch : p->lda * tc->m);
	r->nb = (size_t)(p->stride_b ? p->stride_b * tc->batch
	                             : p->ldb * (trans_b ? tc->n : tc->k));
	r->nc = (size_t)(p->stride_c ? p->stride_c * tc->batch : p->ldc * tc->m);
	r->a = malloc(r->na * 2);
	r->b = malloc(r->nb * 2);
	r->c0 = malloc(r->nc * 2);
	cr_assert(r->a && r->b && r->c0);
	fill_random(dt, r->a, r->na, &s);
	fill_random(dt, r->b, r->nb, &s);
	memset(r->c0, 0xff, r->nc * 2);
	if (tc->bias) {
		r->nbias = (size_t)tc->n;
		r->bias = malloc(r->nbias * 2);
		fill_random(dt, r->bias, r->nbias, &s);
	}
	if (tc->res == RES_OWN) {
		size_t nr = (size_t)(p->stride_r ? p->stride_r * tc->batch : p->ldr * tc->m);
		r->res = malloc(nr * 2);
		fill_random(dt, r->res, nr, &s);
		r->dres = dev_copy(r->res, nr * 2);
	} else if (tc->res == RES_IN_C) {
		/* The residual is c's own contents: random where c is, poison in the padding. */
		for (int64_t bt = 0; bt < tc->batch; bt++)
			for (int64_t i = 0; i < tc->m; i++)
				fill_random(dt, r->c0 + bt * p->stride_c + i * p->ldc,
				            (size_t)tc->n, &s);
		r->res = r->c0;
		p->stride_r = p->stride_c;
	}
	r->da = dev_copy(r->a, r->na * 2);
	r->db = dev_copy(r->b, r->nb * 2);
	r->dc = dev_copy(NULL, r->nc * 2);
	r->dbias = r->bias ? dev_copy(r->bias, r->nbias * 2) : NULL;
	p->a = r->da;
	p->b = r->db;
	p->c = r->dc;
	p->bias = r->dbias;
	p->residual = tc->res == RES_IN_C ? r->dc : r->dres;
	p->workspace = workspace();
	p->workspace_bytes = TK_WORKSPACE_BYTES;
}

static float *to_floats(tk_dtype dt, const uint16_t *x, size_t n)
{
	float *f = malloc(n * sizeof(float) + 1);

	cr_assert(f != NULL);
	for (size_t i = 0; i < n; i++)
		f[i] = from_half(dt, x[i]);
	return f;
}

static void run_reference(struct sm90_run *r)
{
	const tk_gemm_problem *p = &r->p;
	float *af = to_floats(p->dtype, r->a, r->na), *bf = to_floats(p->dtype, r->b, r->nb);
	double *acc = malloc((size_t)p->n * sizeof(double));

	r->ref = malloc((size_t)(p->batch * p->m * p->n) * sizeof(double));
	cr_assert(acc && r->ref);
	for (int64_t bt = 0; bt < p->batch; bt++) {
		const float *a = af + bt * p->stride_a, *b = bf + bt * p->stride_b;
		for (int64_t i = 0; i < p->m; i++) {
			const float *ai = a + i * p->lda;
			memset(acc, 0, (size_t)p->n * sizeof(double));
			for (int64_t j = 0; j < p->n && p->trans_b; j++) {
				double sum = 0;
				for (int64_t k = 0; k < p->k; k++)
					sum += (double)ai[k] * b[j * p->ldb + k];
				acc[j] = sum;
			}
			for (int64_t k = 0; k < p->k && !p->trans_b; k++)
				for (int64_t j = 0; j < p->n; j++)
					acc[j] += (double)ai[k] * b[k * p->ldb + j];
			for (int64_t j = 0; j < p->n; j++) {
				double v = p->alpha * acc[j];
				if (r->bias)
					v += from_half(p->dtype, r->bias[j]);
				if (r->res)
					v += from_half(p->dtype,
					               r->res[bt * p->stride_r + i * p->ldr + j]);
				r->ref[(bt * p->m + i) * p->n + j] = v;
			}
		}
	}
	free(af);
	free(bf);
	free(acc);
}

static void run_free(struct sm90_run *r)
{
	cudaFree(r->da);
	cudaFree(r->db);
	cudaFree(r->dc);
	cudaFree(r->dbias);
	cudaFree(r->dres);
	if (r->res != r->c0)
		free(r->res);
	free(r->a);
	free(r->b);
	free(r->bias);
	free(r->c0);
	free(r->ref);
}

static void config_name(const tk_gemm_config *c, char *buf, size_t len)
{
	snprintf(buf, len, "sm90 m%d n%d k%d s%d c%d sk%d", c->tile_m, c->tile_n, c->tile_k,
	         c->stages, c->cluster, c->split_k);
}

/*
 * Run r with cfg; returns the norm-wise relative error (INFINITY when a
 * padding element was written or the launch failed).
 */
static double run_config(struct sm90_run *r, const tk_gemm_config *cfg, uint16_t *got)
{
	const tk_gemm_problem *p = &r->p;
	double num = 0, den = 0;

	cr_assert_eq(cudaMemcpy(r->dc, r->c0, r->nc * 2, cudaMemcpyHostToDevice), cudaSuccess);
	if (p->workspace != NULL)
		cr_assert_eq(cudaMemset(p->workspace, 0xff, p->workspace_bytes), cudaSuccess);
	tk_status st = tk_gemm_sm90_launch(p, cfg, NULL);
	cudaError_t e = cudaDeviceSynchronize();
	cr_assert_eq(e, cudaSuccess, "device error after launch: %s", cudaGetErrorString(e));
	if (st != TK_OK)
		return INFINITY;
	cr_assert_eq(cudaMemcpy(got, r->dc, r->nc * 2, cudaMemcpyDeviceToHost), cudaSuccess);
	for (int64_t bt = 0; bt < p->batch; bt++) {
		for (int64_t i = 0; i < p->m; i++) {
			const uint16_t *row = got + bt * p->stride_c + i * p->ldc;
			for (int64_t j = 0; j < p->ldc; j++) {
				if (j >= p->n) {
					if (row[j] != 0xffffu)
						return INFINITY;
					continue;
				}
				double want = r->ref[(bt * p->m + i) * p->n + j];
				double d = from_half(p->dtype, row[j]) - want;
				num += d * d;
				den += want * want;
			}
		}
	}
	double rel = sqrt(num / (den > 0 ? den : 1));
	return isnan(rel) ? INFINITY : rel;
}

/* An sm90 configuration of BM x BN tiles (k 64), a ring of `stages`. */
static tk_gemm_config sm90_config(int bm, int bn, int stages, int cluster, int split_k)
{
	tk_gemm_config c;

	memset(&c, 0, sizeof(c));
	c.kind = TK_GEMM_SM90;
	c.tile_m = bm;
	c.tile_n = bn;
	c.tile_k = 64;
	c.stages = stages;
	c.cluster = cluster;
	c.split_k = split_k;
	return c;
}

/* 1 when cfgs[0..n) holds c already. */
static int has_config(const tk_gemm_config *cfgs, int n, const tk_gemm_config *c)
{
	for (int i = 0; i < n; i++)
		if (memcmp(&cfgs[i], c, sizeof(*c)) == 0)
			return 1;
	return 0;
}

/* The candidates for p, then the extra splits of the unsplit ones; returns the count. */
static int configs_to_check(const tk_gemm_problem *p, tk_gemm_config *cfgs)
{
	int n = tk_gemm_sm90_candidates(p, cfgs, MAX_CFGS);

	cr_assert(n > 0, "no sm90 candidates for a problem the family serves");
	cr_assert(n <= MAX_CFGS / 2, "more candidates (%d) than the test expects", n);
	for (int i = 0, base = n; i < base; i++) {
		if (cfgs[i].split_k > 1)
			continue;
		for (size_t e = 0; e < sizeof(EXTRA_SPLITS) / sizeof(EXTRA_SPLITS[0]); e++) {
			tk_gemm_config c = cfgs[i];
			c.split_k = EXTRA_SPLITS[e];
			if (!has_config(cfgs, n, &c) && n < MAX_CFGS)
				cfgs[n++] = c;
		}
	}
	return n;
}

/* Every case and every candidate for one dtype and layout; returns failures. */
static int check_all(tk_dtype dt, int trans_b)
{
	int fails = 0, runs = 0;

	gpu_require();
	for (size_t ci = 0; ci < sizeof(CASES) / sizeof(CASES[0]); ci++) {
		struct sm90_run r;
		tk_gemm_config cfgs[MAX_CFGS];
		run_setup(&r, &CASES[ci], dt, trans_b);
		run_reference(&r);
		int n = configs_to_check(&r.p, cfgs);
		double tol = (dt == TK_BF16 ? 1e-2 : 2e-3) *
		             (r.p.k > 4096 ? sqrt((double)r.p.k / 4096.0) : 1.0);
		uint16_t *got = malloc(r.nc * 2);
		cr_assert(got != NULL);
		for (int i = 0; i < n; i++) {
			char name[64];
			double rel = run_config(&r, &cfgs[i], got);
			runs++;
			if (rel <= tol)
				continue;
			config_name(&cfgs[i], name, sizeof(name));
			printf("FAIL %s %s b%s m%lld n%lld k%lld batch%lld: rel %.3g tol %.3g "
			       "(seed %llu)\n",
			       name, tk_dtype_name(dt), trans_b ? "[N,K]" : "[K,N]",
			       (long long)r.p.m, (long long)r.p.n, (long long)r.p.k,
			       (long long)r.p.batch, rel, tol, (unsigned long long)gpu_case_seed);
			fails++;
		}
		free(got);
		run_free(&r);
	}
	printf("sm90 %s b%s: %d of %d runs within tolerance\n", tk_dtype_name(dt),
	       trans_b ? "[N,K]" : "[K,N]", runs - fails, runs);
	fflush(stdout);
	return fails;
}

Test(gemm_sm90, bf16_k_major_b_matches_reference_for_every_config)
{
	cr_assert_eq(check_all(TK_BF16, 1), 0, "some configurations were wrong (lines above)");
}

Test(gemm_sm90, bf16_n_major_b_matches_reference_for_every_config)
{
	cr_assert_eq(check_all(TK_BF16, 0), 0, "some configurations were wrong (lines above)");
}

Test(gemm_sm90, f16_k_major_b_matches_reference_for_every_config)
{
	cr_assert_eq(check_all(TK_F16, 1), 0, "some configurations were wrong (lines above)");
}

Test(gemm_sm90, f16_n_major_b_matches_reference_for_every_config)
{
	cr_assert_eq(check_all(TK_F16, 0), 0, "some configurations were wrong (lines above)");
}

/* The copy engine needs 16-byte pitches: an odd lda is refused, not run. */
Test(gemm_sm90, odd_lda_is_refused_as_unsupported)
{
	struct sm90_run r;
	tk_gemm_config cfgs[16];

	gpu_require();
	run_setup(&r, &CASES[1], TK_BF16, 1);
	int n = tk_gemm_sm90_candidates(&r.p, cfgs, 16);
	cr_assert(n > 0);
	r.p.lda = r.p.k + 1 + (r.p.k % 2); /* odd, still >= k */
	cr_assert_eq(tk_gemm_sm90_candidates(&r.p, cfgs, 16), 0);
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &cfgs[0], NULL), TK_ERR_UNSUPPORTED);
	r.p.lda = round8(r.p.k);
	r.p.dtype = TK_F32;
	cr_assert_eq(tk_gemm_sm90_candidates(&r.p, cfgs, 16), 0, "f32 is not served");
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &cfgs[0], NULL), TK_ERR_UNSUPPORTED);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	run_free(&r);
}

/*
 * 176-column tiles (2112 = 12 x 176) load b as a K-major tile only: an
 * N-major b comes in 64-column atoms. They are offered for [N, K] b and
 * checked with every other candidate above; for [K, N] b they are neither
 * offered nor run.
 */
Test(gemm_sm90, n176_tiles_take_only_a_k_major_b)
{
	struct sm90_run r;
	tk_gemm_config cfgs[MAX_CFGS], n176 = { 0 };
	int found = 0;

	gpu_require();
	run_setup(&r, &CASES[1], TK_BF16, 1);
	int n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS);
	for (int i = 0; i < n && i < MAX_CFGS; i++) {
		if (cfgs[i].tile_n == 176 && !found) {
			n176 = cfgs[i];
			found = 1;
		}
	}
	cr_assert(found, "no 176-column tile offered for a K-major b");
	run_free(&r);
	run_setup(&r, &CASES[1], TK_BF16, 0);
	n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS);
	for (int i = 0; i < n && i < MAX_CFGS; i++)
		cr_assert_neq(cfgs[i].tile_n, 176, "a 176-column tile offered for an N-major b");
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &n176, NULL), TK_ERR_UNSUPPORTED);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	run_free(&r);
}

/* Split-K through the workspace keeps its partial sums there: without one it is not
 * offered or run (a cluster split keeps them in shared memory and is). */
Test(gemm_sm90, split_k_without_workspace_is_refused_as_unsupported)
{
	struct sm90_run r;
	tk_gemm_config cfgs[MAX_CFGS];

	gpu_require();
	run_setup(&r, &CASES[9], TK_BF16, 1);
	int n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS), splits = 0;
	cr_assert(n > 0 && n <= MAX_CFGS);
	for (int i = 0; i < n; i++)
		splits += cfgs[i].split_k > 1;
	cr_assert(splits > 0, "520 x 1000 x 2048 fills the SMs poorly: splits are offered");
	tk_gemm_config split = cfgs[0];
	split.split_k = 3;
	r.p.workspace = NULL;
	r.p.workspace_bytes = 0;
	n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS);
	for (int i = 0; i < n; i++)
		cr_assert(cfgs[i].split_k <= 1 || cfgs[i].cluster > 1,
		          "a split through the workspace offered without one");
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &split, NULL), TK_ERR_UNSUPPORTED);
	r.p.workspace = workspace();
	r.p.workspace_bytes = 4096; /* far too small for the partial tiles */
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &split, NULL), TK_ERR_UNSUPPORTED);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	run_free(&r);
}

/*
 * A cluster split (cluster == split_k) adds the same partial sums in the
 * same K order as the split through the workspace, over distributed shared
 * memory instead: the same bits, on every run. Every cluster split offered
 * for a product whose tiles are all split, against the reference and
 * against the same split through the workspace.
 */
Test(gemm_sm90, cluster_split_matches_the_workspace_split_bit_for_bit)
{
	struct sm90_run r;
	tk_gemm_config cfgs[MAX_CFGS];

	gpu_require();
	run_setup(&r, &CASES[1], TK_BF16, 1);
	run_reference(&r);
	int n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS), tried = 0;
	cr_assert(n > 0 && n <= MAX_CFGS);
	uint16_t *first = malloc(r.nc * 2), *got = malloc(r.nc * 2);
	cr_assert(first != NULL && got != NULL);
	for (int i = 0; i < n; i++) {
		if (cfgs[i].cluster <= 1)
			continue;
		char name[96];
		config_name(&cfgs[i], name, sizeof(name));
		cr_assert_eq(cfgs[i].cluster, cfgs[i].split_k, "%s: cluster is not the split",
		             name);
		tk_gemm_config ws = cfgs[i];
		ws.cluster = 1;
		cr_assert_lt(run_config(&r, &ws, first), 1e-2, "%s through the workspace: wrong",
		             name);
		for (int k = 0; k < 10; k++) {
			cr_assert_lt(run_config(&r, &cfgs[i], got), 1e-2, "%s: wrong result", name);
			cr_assert(memcmp(first, got, r.nc * 2) == 0,
			          "%s: run %d differs in its bits from the workspace split", name,
			          k + 1);
		}
		tried++;
	}
	cr_assert_gt(tried, 1,
	             "127 x 136 x 1000 has fewer tiles than SMs: cluster splits are offered");
	free(first);
	free(got);
	run_free(&r);
}

/*
 * A cluster split needs every tile split, a unit a CTA, and cluster ==
 * split_k of at most 8 (and no workspace): anything else is refused, not
 * run.
 */
Test(gemm_sm90, cluster_split_outside_its_rules_is_refused_as_unsupported)
{
	struct sm90_run r;
	tk_gemm_config c = sm90_config(64, 64, 12, 2, 2);

	gpu_require();
	run_setup(&r, &CASES[8], TK_BF16, 1); /* 2053 x 2057: more tiles than SMs */
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &c, NULL), TK_ERR_UNSUPPORTED);
	run_free(&r);
	run_setup(&r, &CASES[1], TK_BF16, 1);
	void *ws = r.p.workspace;
	r.p.workspace = NULL; /* a cluster split needs none */
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &c, NULL), TK_OK, "the rules hold here");
	r.p.workspace = ws;
	c.split_k = 4; /* cluster != split */
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &c, NULL), TK_ERR_UNSUPPORTED);
	c.cluster = c.split_k = 9; /* over the portable cluster size */
	cr_assert_eq(tk_gemm_sm90_launch(&r.p, &c, NULL), TK_ERR_UNSUPPORTED);
	cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
	cr_assert_eq(cudaGetLastError(), cudaSuccess);
	run_free(&r);
}

/*
 * The split tiles' partial sums are added in K order whichever CTA finishes
 * last, so a split product gives the same bits on every run (a plan's
 * replay equals the same op run alone). Thirty runs of each split the
 * family offers, and of a forced 4-way split, against the first.
 */
Test(gemm_sm90, split_k_gives_the_same_bits_on_every_run)
{
	struct sm90_run r;
	tk_gemm_config cfgs[MAX_CFGS];

	gpu_require();
	run_setup(&r, &CASES[9], TK_BF16, 1);
	run_reference(&r);
	int n = tk_gemm_sm90_candidates(&r.p, cfgs, MAX_CFGS);
	cr_assert(n > 0 && n < MAX_CFGS);
	cfgs[n] = cfgs[0];
	cfgs[n++].split_k = 4;
	uint16_t *first = malloc(r.nc * 2), *got = malloc(r.nc * 2);
	cr_assert(first != NULL && got != NULL);
	int tried = 0;
	for (int i = 0; i < n; i++) {
		if (cfgs[i].split_k <= 1)
			continue;
		char name[96];
		config_name(&cfgs[i], name, sizeof(name));
		cr_assert_lt(run_config(&r, &cfgs[i], first), 2e-2, "%s: wrong result", name);
		for (int k = 0; k < 30; k++) {
			run_config(&r, &cfgs[i], got);
			cr_assert(memcmp(first, got, r.nc * 2) == 0,
			          "%s: run %d differs from the first in its bits", name, k + 2);
		}
		tried++;
	}
	cr_assert_gt(tried, 1, "splits were run");
	free(first);
	free(got);
	run_free(&r);
}
