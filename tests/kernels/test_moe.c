/*
 * test_moe.c - the CPU references of the moe family (moe_route, moe_align,
 * moe_grouped_gemm, moe_gate_up, moe_unpermute) against values worked out
 * here: softmax and sigmoid scoring, renormalisation on and off, ties to the
 * lower expert, DeepSeek-style grouped top-k with a correction bias, the
 * block-aligned layout with empty experts, all tokens on one expert and ids
 * outside the experts, and the whole block against a dense per-expert loop.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/tk_ref_util.h"
#include "tk_internal.h"

static tk_tensor t1(tk_dtype dt, int64_t a)
{
	int64_t s[1] = { a };
	return tt_tensor(dt, 1, s, 0);
}

static tk_tensor t2(tk_dtype dt, int64_t a, int64_t b)
{
	int64_t s[2] = { a, b };
	return tt_tensor(dt, 2, s, 0);
}

static tk_tensor t3(tk_dtype dt, int64_t a, int64_t b, int64_t c)
{
	int64_t s[3] = { a, b, c };
	return tt_tensor(dt, 3, s, 0);
}

static void free_call(tk_call *c)
{
	for (int i = 0; i < c->n_in; i++)
		tt_free(&c->in[i]);
	for (int i = 0; i < c->n_out; i++)
		tt_free(&c->out[i]);
}

/* moe_route on f32 logits [T, E]; bias NULL for none. */
static void route(tk_call *c, const float *logits, int64_t T, int64_t E, const float *bias,
                  int64_t k, int sigmoid, int renorm, int64_t n_group, int64_t topk_group,
                  double scale)
{
	memset(c, 0, sizeof(*c));
	c->n_in = bias ? 2 : 1;
	c->n_out = 2;
	c->in[0] = t2(TK_F32, T, E);
	for (int64_t i = 0; i < T * E; i++)
		tt_set(&c->in[0], i, logits[i]);
	if (bias) {
		c->in[1] = t1(TK_F32, E);
		for (int64_t i = 0; i < E; i++)
			tt_set(&c->in[1], i, bias[i]);
	}
	c->out[0] = t2(TK_I32, T, k);
	c->out[1] = t2(TK_F32, T, k);
	c->n_params = 6;
	c->params[0] = tt_param_int(k);
	c->params[1] = tt_param_bool(sigmoid);
	c->params[2] = tt_param_bool(renorm);
	c->params[3] = tt_param_int(n_group);
	c->params[4] = tt_param_int(topk_group);
	c->params[5] = tt_param_float(scale);
	cr_assert_eq(tk_cpu_moe_route(c), TK_OK);
}

static int32_t id_at(const tk_call *c, int64_t i)
{
	return ((const int32_t *)c->out[0].data)[i];
}

static float w_at(const tk_call *c, int64_t i)
{
	return ((const float *)c->out[1].data)[i];
}

/* Softmax routing of random rows against a selection sort over the probabilities. */
Test(moe_route, softmax_topk_renormalise_on_and_off)
{
	enum { T = 7, E = 16, K = 4 };
	float lg[T * E];
	uint64_t rng = 11;
	for (int i = 0; i < T * E; i++)
		lg[i] = (float)tt_rand_uniform(&rng, -4.0, 4.0);
	for (int renorm = 0; renorm < 2; renorm++) {
		tk_call c;
		route(&c, lg, T, E, NULL, K, 0, renorm, 1, 1, 1.0);
		for (int t = 0; t < T; t++) {
			double p[E], m = -INFINITY, s = 0.0, picked = 0.0;
			int used[E] = { 0 }, want[K];
			for (int e = 0; e < E; e++)
				m = fmax(m, lg[t * E + e]);
			for (int e = 0; e < E; e++)
				s += p[e] = exp(lg[t * E + e] - m);
			for (int j = 0; j < K; j++) {
				int b = -1;
				for (int e = 0; e < E; e++)
					if (!used[e] && (b < 0 || p[e] > p[b]))
						b = e;
				used[b] = 1;
				want[j] = b;
				picked += p[b] / s;
			}
			for (int j = 0; j < K; j++) {
				double w = p[want[j]] / s / (renorm ? picked : 1.0);
				cr_assert_eq(id_at(&c, t * K + j), want[j], "row %d slot %d", t, j);
				cr_assert_float_eq(w_at(&c, t * K + j), w, 1e-6, "row %d slot %d",
				                   t, j);
			}
		}
		free_call(&c);
	}
}

/* Equal logits: the lowest experts win, each weighing 1/E (1/k renormalised). */
Test(moe_route, ties_go_to_the_lower_expert)
{
	float lg[2 * 8] = { 0 };
	for (int i = 8; i < 16; i++)
		lg[i] = 1.5f;
	lg[8 + 6] = 2.0f; /* row 1: expert 6 first, then 0, 1 */
	tk_call c;
	route(&c, lg, 2, 8, NULL, 3, 0, 0, 1, 1, 1.0);
	cr_assert_eq(id_at(&c, 0), 0);
	cr_assert_eq(id_at(&c, 1), 1);
	cr_assert_eq(id_at(&c, 2), 2);
	cr_assert_float_eq(w_at(&c, 0), 1.0 / 8, 1e-7);
	cr_assert_eq(id_at(&c, 3), 6);
	cr_assert_eq(id_at(&c, 4), 0);
	cr_assert_eq(id_at(&c, 5), 1);
	free_call(&c);
	route(&c, lg, 2, 8, NULL, 3, 0, 1, 1, 1, 1.0);
	cr_assert_float_eq(w_at(&c, 0), 1.0 / 3, 1e-7);
	free_call(&c);
}

/* Sigmoid scores: each weight is sigmoid(logit), scaled; renormalised they sum to the scale. */
Test(moe_route, sigmoid_scores_and_scaling)
{
	float lg[6] = { -1.0f, 2.0f, 0.5f, 3.0f, -2.0f, 0.0f };
	tk_call c;
	route(&c, lg, 1, 6, NULL, 2, 1, 0, 1, 1, 2.5);
	cr_assert_eq(id_at(&c, 0), 3);
	cr_assert_eq(id_at(&c, 1), 1);
	cr_assert_float_eq(w_at(&c, 0), 2.5 / (1.0 + exp(-3.0)), 1e-6);
	cr_assert_float_eq(w_at(&c, 1), 2.5 / (1.0 + exp(-2.0)), 1e-6);
	free_call(&c);
	route(&c, lg, 1, 6, NULL, 2, 1, 1, 1, 1, 2.5);
	cr_assert_float_eq(w_at(&c, 0) + w_at(&c, 1), 2.5, 1e-6);
	free_call(&c);
}

/*
 * 8 experts in 4 groups of 2, 2 groups kept, top-2, sigmoid with a bias.
 * Without the bias expert 0 (logit 4) would lead; its bias of -1 leaves group
 * 0 last, expert 2 leads the keys but its group 1 (with expert 3 near 0) ranks
 * behind groups 3 and 2, so the experts come from those, ranked by score +
 * bias, and the weights are the plain scores renormalised.
 */
Test(moe_route, grouped_topk_with_correction_bias)
{
	float lg[8] = { 4.0f, -4.0f, 3.0f, -6.0f, 1.0f, 0.5f, 0.2f, 1.2f };
	float bias[8] = { -1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.3f, 0.0f };
	double s[8], key[8], g[4];
	for (int e = 0; e < 8; e++) {
		s[e] = 1.0 / (1.0 + exp(-lg[e]));
		key[e] = s[e] + bias[e];
	}
	for (int i = 0; i < 4; i++)
		g[i] = key[2 * i] + key[2 * i + 1];
	/* The worked ranking this test relies on. */
	cr_assert(g[3] > g[2] && g[2] > g[1] && g[1] > g[0]);
	cr_assert(key[2] > key[6] && key[0] < key[4]);
	cr_assert(key[6] > key[7] && key[7] > key[4]);
	tk_call c;
	route(&c, lg, 1, 8, bias, 2, 1, 1, 4, 2, 1.0);
	cr_assert_eq(id_at(&c, 0), 6);
	cr_assert_eq(id_at(&c, 1), 7);
	cr_assert_float_eq(w_at(&c, 0), s[6] / (s[6] + s[7]), 1e-6);
	cr_assert_float_eq(w_at(&c, 1), s[7] / (s[6] + s[7]), 1e-6);
	free_call(&c);
	/* Without groups expert 2 (of the dropped group 1) leads; expert 0 stays out. */
	route(&c, lg, 1, 8, bias, 3, 1, 0, 1, 1, 1.0);
	cr_assert_eq(id_at(&c, 0), 2);
	cr_assert_eq(id_at(&c, 1), 6);
	cr_assert_eq(id_at(&c, 2), 7);
	cr_assert_float_eq(w_at(&c, 0), s[2], 1e-6);
	free_call(&c);
	/* Without the bias expert 0 leads. */
	route(&c, lg, 1, 8, NULL, 1, 1, 0, 1, 1, 1.0);
	cr_assert_eq(id_at(&c, 0), 0);
	free_call(&c);
}

/* moe_align of ids [T, k] into c; the outputs are poisoned first. */
static void align(tk_call *c, const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t bm)
{
	int64_t P = T * k + E * (bm - 1);
	memset(c, 0, sizeof(*c));
	c->n_in = 1;
	c->n_out = 4;
	c->in[0] = t2(TK_I32, T, k);
	memcpy(c->in[0].data, ids, (size_t)(T * k) * 4);
	c->out[0] = t1(TK_I32, P);
	c->out[1] = t1(TK_I32, (P + bm - 1) / bm);
	c->out[2] = t1(TK_I32, 1);
	c->out[3] = t1(TK_I32, T * k);
	for (int i = 0; i < 4; i++)
		tt_poison(&c->out[i]);
	c->n_params = 2;
	c->params[0] = tt_param_int(E);
	c->params[1] = tt_param_int(bm);
	cr_assert_eq(tk_cpu_moe_align(c), TK_OK);
}

static const int32_t *o32(const tk_call *c, int i)
{
	return c->out[i].data;
}

/* 5 tokens, top-2, 4 experts, blocks of 4: expert 2 empty, one id outside the experts. */
Test(moe_align, block_padding_empty_expert_and_invalid_id)
{
	const int32_t ids[10] = { 1, 0, 3, 1, 0, 1, 3, -1, 1, 3 };
	/* expert 0: flat 1, 4; expert 1: 0, 3, 5, 8; expert 3: 2, 6, 9; pad = 10 */
	const int32_t want[] = { 1, 4, 10, 10, 0, 3, 5, 8, 2, 6, 9, 10 };
	tk_call c;
	align(&c, ids, 5, 2, 4, 4);
	cr_assert_eq(c.out[0].shape[0], 10 + 4 * 3);
	for (int p = 0; p < 12; p++)
		cr_assert_eq(o32(&c, 0)[p], want[p], "sorted_ids[%d]", p);
	for (int p = 12; p < 22; p++)
		cr_assert_eq(o32(&c, 0)[p], 10, "sorted_ids[%d] past the total", p);
	cr_assert_eq(o32(&c, 2)[0], 12);
	const int32_t eb[6] = { 0, 1, 3, 4, 4, 4 };
	for (int b = 0; b < 6; b++)
		cr_assert_eq(o32(&c, 1)[b], eb[b], "expert_ids[%d]", b);
	for (int f = 0; f < 10; f++) {
		if (ids[f] < 0) {
			cr_assert_eq(o32(&c, 3)[f], 22);
			continue;
		}
		cr_assert_eq(o32(&c, 0)[o32(&c, 3)[f]], f, "inv[%d]", f);
	}
	free_call(&c);
}

Test(moe_align, all_tokens_to_one_expert)
{
	int32_t ids[33];
	for (int i = 0; i < 33; i++)
		ids[i] = 5;
	tk_call c;
	align(&c, ids, 33, 1, 8, 16);
	cr_assert_eq(o32(&c, 2)[0], 48);
	for (int p = 0; p < 48; p++)
		cr_assert_eq(o32(&c, 0)[p], p < 33 ? p : 33);
	for (int b = 0; b < 3; b++)
		cr_assert_eq(o32(&c, 1)[b], 5);
	cr_assert_eq(o32(&c, 1)[3], 8);
	free_call(&c);
}

/* ---- the whole block against a dense per-expert loop ------------------------------ */

static void gemm_call(tk_call *c, int gate_up, const tk_tensor *x, const tk_tensor *w,
                      const tk_call *al, int64_t bm, int64_t top_k, int64_t cols)
{
	memset(c, 0, sizeof(*c));
	c->n_in = 5;
	c->n_out = 1;
	c->in[0] = *x;
	c->in[1] = *w;
	for (int i = 0; i < 3; i++)
		c->in[2 + i] = al->out[i];
	c->out[0] = t2(x->dtype, al->out[0].shape[0], cols);
	tt_poison(&c->out[0]);
	c->n_params = 2;
	c->params[0] = tt_param_int(bm);
	c->params[1] = tt_param_int(top_k);
	cr_assert_eq(gate_up ? tk_cpu_moe_gate_up(c) : tk_cpu_moe_grouped_gemm(c), TK_OK);
}

static double silu(double v)
{
	return v / (1.0 + exp(-v));
}

static void block_case(int64_t T, int64_t H, int64_t I, int64_t E, int64_t K, int64_t bm,
                       int one_expert, int with_shared, uint64_t seed)
{
	uint64_t rng = seed;
	tk_tensor x = t2(TK_F32, T, H), w13 = t3(TK_F32, E, 2 * I, H), w2 = t3(TK_F32, E, H, I);
	tk_tensor shared = t2(TK_F32, T, H);
	float *lg = malloc((size_t)(T * E) * sizeof(float));
	tt_fill(&x, &rng, -1.0, 1.0);
	tt_fill(&w13, &rng, -0.5, 0.5);
	tt_fill(&w2, &rng, -0.5, 0.5);
	tt_fill(&shared, &rng, -1.0, 1.0);
	for (int64_t i = 0; i < T * E; i++)
		lg[i] = (float)tt_rand_uniform(&rng, -2.0, 2.0);
	if (one_expert) /* every token's best expert is 2: the others have few or none */
		for (int64_t t = 0; t < T; t++)
			lg[t * E + 2] = 10.0f;

	tk_call rt, al, gu, dn, up;
	route(&rt, lg, T, E, NULL, K, 0, 1, 1, 1, 1.0);
	align(&al, rt.out[0].data, T, K, E, bm);
	gemm_call(&gu, 1, &x, &w13, &al, bm, K, I);
	gemm_call(&dn, 0, &gu.out[0], &w2, &al, bm, 0, H);
	memset(&up, 0, sizeof(up));
	up.n_in = with_shared ? 4 : 3;
	up.n_out = 1;
	up.in[0] = dn.out[0];
	up.in[1] = al.out[3];
	up.in[2] = rt.out[1];
	if (with_shared)
		up.in[3] = shared;
	up.out[0] = t2(TK_F32, T, H);
	cr_assert_eq(tk_cpu_moe_unpermute(&up), TK_OK);

	/* Padded rows of both GEMMs are zero. */
	for (int64_t p = 0; p < gu.out[0].shape[0]; p++)
		if (((int32_t *)al.out[0].data)[p] >= T * K)
			for (int64_t i = 0; i < I; i++)
				cr_assert_eq(tt_get(&gu.out[0], p * I + i), 0.0);

	/* The dense loop: every expert over the tokens that chose it. */
	double *want = calloc((size_t)(T * H), sizeof(double)), *h = malloc((size_t)I * 8);
	for (int64_t e = 0; e < E; e++)
		for (int64_t t = 0; t < T; t++)
			for (int64_t j = 0; j < K; j++) {
				if (id_at(&rt, t * K + j) != e)
					continue;
				for (int64_t i = 0; i < I; i++) {
					double g = 0, u = 0;
					for (int64_t d = 0; d < H; d++) {
						g += tt_get(&x, t * H + d) *
						     tt_get(&w13, (e * 2 * I + i) * H + d);
						u += tt_get(&x, t * H + d) *
						     tt_get(&w13, (e * 2 * I + I + i) * H + d);
					}
					h[i] = silu(g) * u;
				}
				for (int64_t d = 0; d < H; d++) {
					double y = 0;
					for (int64_t i = 0; i < I; i++)
						y += h[i] * tt_get(&w2, (e * H + d) * I + i);
					want[t * H + d] += w_at(&rt, t * K + j) * y;
				}
			}
	if (with_shared)
		for (int64_t i = 0; i < T * H; i++)
			want[i] += tt_get(&shared, i);
	cr_assert_lt(tt_rel_err(&up.out[0], want), 1e-5, "T %lld E %lld k %lld", (long long)T,
	             (long long)E, (long long)K);
	free(want);
	free(h);
	free(lg);
	tt_free(&up.out[0]);
	tt_free(&gu.out[0]);
	tt_free(&dn.out[0]);
	free_call(&rt);
	free_call(&al);
	tt_free(&x);
	tt_free(&w13);
	tt_free(&w2);
	tt_free(&shared);
}

Test(moe_block, matches_a_dense_per_expert_loop)
{
	block_case(9, 24, 16, 6, 2, 16, 0, 0, 1); /* a few tokens: most experts empty */
	block_case(40, 16, 8, 8, 3, 32, 0, 1, 2); /* a shared expert added */
	block_case(17, 16, 8, 4, 1, 16, 1, 0, 3); /* all tokens to one expert */
	block_case(3, 8, 8, 16, 4, 64, 0, 0, 4);  /* more blocks of padding than rows */
}

/* Permuted x (top_k 0) gives the same rows as gathering the tokens (top_k k). */
Test(moe_grouped_gemm, sorted_rows_equal_gathered_tokens)
{
	enum { T = 6, K = 2, E = 3, H = 8, N = 5, BM = 16 };
	const int32_t ids[T * K] = { 0, 2, 2, 1, 0, 1, 2, 0, 1, 2, 0, 2 };
	uint64_t rng = 5;
	tk_tensor x = t2(TK_BF16, T, H), w = t3(TK_BF16, E, N, H);
	tt_fill(&x, &rng, -1, 1);
	tt_fill(&w, &rng, -1, 1);
	tk_call al, a, b;
	align(&al, ids, T, K, E, BM);
	int64_t P = al.out[0].shape[0];
	tk_tensor xp = t2(TK_BF16, P, H);
	for (int64_t p = 0; p < P; p++) {
		int32_t s = ((int32_t *)al.out[0].data)[p];
		for (int64_t d = 0; d < H; d++)
			tt_set(&xp, p * H + d, s < T * K ? tt_get(&x, s / K * H + d) : 7.0);
	}
	gemm_call(&a, 0, &x, &w, &al, BM, K, N);
	gemm_call(&b, 0, &xp, &w, &al, BM, 0, N);
	cr_assert_eq(tt_count_diff(&a.out[0], &b.out[0]), 0);
	for (int64_t p = 0; p < P; p++) {
		int32_t s = ((int32_t *)al.out[0].data)[p];
		for (int64_t n = 0; n < N; n++) {
			double v = 0;
			if (s < T * K)
				for (int64_t d = 0; d < H; d++)
					v += tt_get(&x, s / K * H + d) *
					     tt_get(&w, (ids[s] * N + n) * H + d);
			cr_assert_float_eq(tt_get(&a.out[0], p * N + n), v, fabs(v) / 64 + 1e-6);
		}
	}
	tt_free(&a.out[0]);
	tt_free(&b.out[0]);
	tt_free(&xp);
	tt_free(&x);
	tt_free(&w);
	free_call(&al);
}
