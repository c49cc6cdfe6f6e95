/*
 * bench_moe.c - tileops-bench-moe: one MoE layer of a model through
 * tileopsd as one plan (moe_route, moe_align, moe_gate_up, moe_grouped_gemm,
 * moe_unpermute; DeepSeek-V2-Lite's shared experts as gemm, silu_and_mul,
 * gemm feeding moe_unpermute's shared input), bf16, random weights and gate
 * logits (the routing the plan computes from them). Prints one line
 *   BENCH {"model": ..., "tokens": T, "layer_ms": ..., "synced_ms": ...}
 * layer_ms: the mean of ITERS replays sent back to back, then one sync
 * (throughput); synced_ms: the median of replays each waited for (latency,
 * the round trip included).
 *
 *   tileops-bench-moe ADDRESS MODEL TOKENS [ITERS [BLOCK_M]]
 *   MODEL: qwen3-30b-a3b | mixtral-8x7b | deepseek-v2-lite | tiny (a CPU-sized check)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tileops.h"

typedef struct model {
	const char *name;
	int64_t hidden, experts, top_k, inter, shared_inter; /* shared_inter 0: none */
	int renormalize;
} model;

static const model models[] = {
	{ "qwen3-30b-a3b", 2048, 128, 8, 768, 0, 1 },
	{ "mixtral-8x7b", 4096, 8, 2, 14336, 0, 1 },
	{ "deepseek-v2-lite", 2048, 64, 6, 1408, 2 * 1408, 0 },
	{ "tiny", 64, 8, 2, 32, 32, 1 },
};

static tileops_client *cl;

static void die(const char *what, tileops_status st)
{
	fprintf(stderr, "tileops-bench-moe: %s: status %d (%s)\n", what, (int)st,
	        tileops_last_error());
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint16_t bf16_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* A tensor of values in [-scale, scale] (bf16 or f32), written in chunks. */
static tileops_tensor make(tileops_dtype dt, int ndim, const int64_t *shape, float scale,
                           uint64_t *rng)
{
	tileops_tensor t;
	tileops_status st = tileops_tensor_create(cl, dt, ndim, shape, &t);
	if (st != TILEOPS_OK)
		die("tensor_create", st);
	if (scale == 0.0f)
		return t;
	size_t n = 1, es = dt == TILEOPS_F32 ? 4 : 2, chunk = (size_t)1 << 22;
	for (int d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	unsigned char *buf = malloc(chunk * es);
	for (size_t off = 0; off < n; off += chunk) {
		size_t m = n - off < chunk ? n - off : chunk;
		for (size_t i = 0; i < m; i++) {
			*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
			float v = scale * ((float)(*rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f);
			if (es == 4)
				memcpy(buf + i * 4, &v, 4);
			else {
				uint16_t h = bf16_of(v);
				memcpy(buf + i * 2, &h, 2);
			}
		}
		if ((st = tileops_tensor_write(cl, t, off * es, buf, m * es)) != TILEOPS_OK)
			die("tensor_write", st);
	}
	free(buf);
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
		        "usage: tileops-bench-moe ADDRESS MODEL TOKENS [ITERS [BLOCK_M]]\n");
		return 2;
	}
	const model *m = NULL;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (!strcmp(models[i].name, argv[2]))
			m = &models[i];
	if (!m) {
		fprintf(stderr, "tileops-bench-moe: unknown model %s\n", argv[2]);
		return 2;
	}
	int64_t T = atoll(argv[3]), iters = argc > 4 ? atoll(argv[4]) : 20;
	int64_t H = m->hidden, E = m->experts, K = m->top_k, I = m->inter, S = m->shared_inter;
	/* Blocks of 16 rows at decode; at prefill 128 where an expert gets a
	 * block or more on average (the warp-specialized kernel then more than
	 * pays for the padding), else 64 (docs/moe.md); BLOCK_M, when given,
	 * instead. */
	int64_t BM = T <= 64 ? 16 : T * K / E >= 128 ? 128 : 64;
	if (argc > 5 && atoll(argv[5]) > 0)
		BM = atoll(argv[5]);
	if (BM != 16 && BM != 32 && BM != 64 && BM != 128) {
		fprintf(stderr, "tileops-bench-moe: block_m must be 16, 32, 64 or 128\n");
		return 2;
	}
	int64_t P = T * K + E * (BM - 1), NB = (P + BM - 1) / BM;
	tileops_status st = tileops_connect(argv[1], &cl);
	if (st != TILEOPS_OK)
		die("connect", st);
	uint64_t rng = 12345;
	int64_t s_lg[2] = { T, E }, s_k[2] = { T, K }, s_p[1] = { P }, s_nb[1] = { NB },
	        s_1[1] = { 1 };
	int64_t s_tk[1] = { T * K }, s_x[2] = { T, H }, s_w13[3] = { E, 2 * I, H };
	int64_t s_w2[3] = { E, H, I }, s_h[2] = { P, I }, s_y[2] = { P, H };
	tileops_tensor lg = make(TILEOPS_BF16, 2, s_lg, 2.0f, &rng);
	tileops_tensor ids = make(TILEOPS_I32, 2, s_k, 0, &rng),
	               wts = make(TILEOPS_F32, 2, s_k, 0, &rng);
	tileops_tensor sid = make(TILEOPS_I32, 1, s_p, 0, &rng),
	               eid = make(TILEOPS_I32, 1, s_nb, 0, &rng);
	tileops_tensor npp = make(TILEOPS_I32, 1, s_1, 0, &rng),
	               inv = make(TILEOPS_I32, 1, s_tk, 0, &rng);
	tileops_tensor x = make(TILEOPS_BF16, 2, s_x, 1.0f, &rng);
	tileops_tensor w13 = make(TILEOPS_BF16, 3, s_w13, 0.02f, &rng);
	tileops_tensor w2 = make(TILEOPS_BF16, 3, s_w2, 0.02f, &rng);
	tileops_tensor h = make(TILEOPS_BF16, 2, s_h, 0, &rng),
	               y = make(TILEOPS_BF16, 2, s_y, 0, &rng);
	tileops_tensor out = make(TILEOPS_BF16, 2, s_x, 0, &rng);

	tileops_plan *plan;
	if ((st = tileops_plan_begin(cl, NULL, &plan)) != TILEOPS_OK)
		die("plan_begin", st);
	tileops_tensor shared = 0, s13 = 0, s2 = 0, sg = 0, sa = 0;
	if (S) {
		int64_t s_s13[2] = { 2 * S, H }, s_s2[2] = { H, S }, s_g[2] = { T, 2 * S },
		        s_a[2] = { T, S };
		s13 = make(TILEOPS_BF16, 2, s_s13, 0.02f, &rng);
		s2 = make(TILEOPS_BF16, 2, s_s2, 0.02f, &rng);
		sg = make(TILEOPS_BF16, 2, s_g, 0, &rng);
		sa = make(TILEOPS_BF16, 2, s_a, 0, &rng);
		shared = make(TILEOPS_BF16, 2, s_x, 0, &rng);
		tileops_param tb[] = { tileops_param_bool("trans_b", 1) };
		tileops_tensor g1_in[] = { x, s13 }, g2_in[] = { sa, s2 };
		tileops_op sh[] = { { "gemm", g1_in, 2, &sg, 1, tb, 1 },
			            { "silu_and_mul", &sg, 1, &sa, 1, NULL, 0 },
			            { "gemm", g2_in, 2, &shared, 1, tb, 1 } };
		for (int i = 0; i < 3; i++)
			if ((st = tileops_plan_add(plan, &sh[i])) != TILEOPS_OK)
				die(sh[i].name, st);
	}
	tileops_param p_route[] = { tileops_param_int("top_k", K),
		                    tileops_param_bool("renormalize", m->renormalize) };
	tileops_param p_align[] = { tileops_param_int("num_experts", E),
		                    tileops_param_int("block_m", BM) };
	tileops_param p_gu[] = { tileops_param_int("block_m", BM), tileops_param_int("top_k", K) };
	tileops_param p_dn[] = { tileops_param_int("block_m", BM) };
	tileops_tensor r_out[] = { ids, wts }, a_out[] = { sid, eid, npp, inv };
	tileops_tensor gu_in[] = { x, w13, sid, eid, npp }, dn_in[] = { h, w2, sid, eid, npp };
	tileops_tensor up_in[] = { y, inv, wts, shared };
	tileops_op ops[] = {
		{ "moe_route", &lg, 1, r_out, 2, p_route, 2 },
		{ "moe_align", &ids, 1, a_out, 4, p_align, 2 },
		{ "moe_gate_up", gu_in, 5, &h, 1, p_gu, 2 },
		{ "moe_grouped_gemm", dn_in, 5, &y, 1, p_dn, 1 },
		{ "moe_unpermute", up_in, S ? 4 : 3, &out, 1, NULL, 0 },
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if ((st = tileops_plan_add(plan, &ops[i])) != TILEOPS_OK)
			die(ops[i].name, st);
	if ((st = tileops_plan_end(plan)) != TILEOPS_OK)
		die("plan_end", st);

	for (int i = 0; i < 3; i++)
		if ((st = tileops_plan_run(plan, 0, NULL, 0)) != TILEOPS_OK ||
		    (st = tileops_sync(cl)))
			die("warm-up run", st);
	double t0 = now_ms();
	for (int64_t i = 0; i < iters; i++)
		if ((st = tileops_plan_run(plan, 0, NULL, 0)) != TILEOPS_OK)
			die("plan_run", st);
	if ((st = tileops_sync(cl)) != TILEOPS_OK)
		die("sync", st);
	double layer_ms = (now_ms() - t0) / (double)iters;
	double *lat = malloc((size_t)iters * sizeof(double));
	for (int64_t i = 0; i < iters; i++) {
		double a = now_ms();
		if ((st = tileops_plan_run(plan, 0, NULL, 0)) != TILEOPS_OK ||
		    (st = tileops_sync(cl)))
			die("synced run", st);
		lat[i] = now_ms() - a;
	}
	qsort(lat, (size_t)iters, sizeof(double), cmp);
	/* The bytes of the experts' weights a layer can read: each active expert once. */
	int64_t active = E < T * K ? E : T * K;
	double wbytes = 2.0 * (double)active * 3.0 * (double)I * (double)H + 2.0 * 3.0 * S * H;
	printf("BENCH {\"model\": \"%s\", \"tokens\": %lld, \"block_m\": %lld, \"iters\": %lld, "
	       "\"layer_ms\": %.4f, \"synced_ms\": %.4f, \"max_weight_bytes\": %.0f}\n",
	       m->name, (long long)T, (long long)BM, (long long)iters, layer_ms, lat[iters / 2],
	       wbytes);
	free(lat);
	tileops_plan_free(plan);
	tileops_close(cl);
	return 0;
}
