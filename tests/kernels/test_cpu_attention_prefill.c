/*
 * test_cpu_attention_prefill.c - the CPU references of attention_prefill
 * and attention_prefill_varlen against a naive formulation in this file
 * (an explicit mask matrix and a two-pass softmax in double) on tiny shapes:
 * bottom-right causal alignment, GQA head mapping, packed sequences with an
 * empty one, lse, and cu_seqlens that a client got wrong.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_test_util.h"

/* Inputs of one packed sequence set, as plain doubles. */
typedef struct naive_seq {
	int q_len, kv_len;
	const double *q, *k, *v; /* [len][heads][D] */
} naive_seq;

/*
 * out[i][h][d] and lse[h][i] of one sequence: every score kept in a full
 * matrix, masked ones set to -inf before a max and a sum.
 */
static void naive_attention(const naive_seq *s, int Hq, int Hkv, int D, int causal, double scale,
                            double *out, double *lse)
{
	for (int h = 0; h < Hq; h++) {
		int hk = h * Hkv / Hq;
		for (int i = 0; i < s->q_len; i++) {
			double sc[64], mx = -INFINITY, sum = 0.0;
			for (int j = 0; j < s->kv_len; j++) {
				double dot = 0.0;
				for (int d = 0; d < D; d++)
					dot += s->q[(i * Hq + h) * D + d] *
					       s->k[(j * Hkv + hk) * D + d];
				int visible = !causal || j - i <= s->kv_len - s->q_len;
				sc[j] = visible ? dot * scale : -INFINITY;
				mx = fmax(mx, sc[j]);
			}
			for (int j = 0; j < s->kv_len; j++)
				sum += sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx);
			for (int d = 0; d < D; d++) {
				double acc = 0.0;
				for (int j = 0; j < s->kv_len; j++) {
					if (sc[j] != -INFINITY)
						acc += exp(sc[j] - mx) *
						       s->v[(j * Hkv + hk) * D + d];
				}
				out[(i * Hq + h) * D + d] = sum > 0.0 ? acc / sum : 0.0;
			}
			lse[h * s->q_len + i] = sum > 0.0 ? mx + log(sum) : -INFINITY;
		}
	}
}

static void fill_f16(tk_tensor *t, double *vals, uint64_t *rng)
{
	int64_t n = tk_numel(t);

	for (int64_t i = 0; i < n; i++) {
		uint16_t h = tk_f32_to_f16((float)tt_rand_uniform(rng, -2.0, 2.0));
		((uint16_t *)t->data)[i] = h;
		vals[i] = tk_f16_to_f32(h);
	}
}

static tk_call make_call(int n_in, int causal, double scale)
{
	tk_call c;

	memset(&c, 0, sizeof(c));
	c.n_in = n_in;
	c.n_out = 2;
	c.n_params = n_in == 3 ? 2 : 3;
	c.params[0].kind = TK_PARAM_BOOL;
	c.params[0].v.b = causal;
	c.params[1].kind = TK_PARAM_FLOAT;
	c.params[1].v.f = scale;
	c.params[2].kind = TK_PARAM_INT;
	return c;
}

static void expect_close(const tk_tensor *out, const double *want, int64_t n, const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		double got = tk_f16_to_f32(((uint16_t *)out->data)[i]);
		cr_expect(fabs(got - want[i]) <= 2e-3 * (1.0 + fabs(want[i])),
		          "%s: out[%lld] = %g, expected %g", what, (long long)i, got, want[i]);
	}
}

static void expect_lse(const float *got, const double *want, int64_t n, const char *what)
{
	for (int64_t i = 0; i < n; i++) {
		if (isinf(want[i]))
			cr_expect(isinf(got[i]) && got[i] < 0, "%s: lse[%lld] = %g, expected -inf",
			          what, (long long)i, got[i]);
		else
			cr_expect(fabs(got[i] - want[i]) <= 1e-5 * (1.0 + fabs(want[i])),
			          "%s: lse[%lld] = %g, expected %g", what, (long long)i, got[i],
			          want[i]);
	}
}

/* Batched: B = 1, so the naive sequence is the whole tensor. */
static void check_batched(int S, int Skv, int Hq, int Hkv, int D, int causal, double scale)
{
	uint64_t rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(S * 131 + Skv * 7 + Hq + causal);
	int64_t qs[4] = { 1, S, Hq, D }, ks[4] = { 1, Skv, Hkv, D }, ls[3] = { 1, Hq, S };
	tk_call c = make_call(3, causal, scale);
	double *q = calloc((size_t)S * Hq * D, sizeof(double));
	double *k = calloc((size_t)Skv * Hkv * D, sizeof(double));
	double *v = calloc((size_t)Skv * Hkv * D, sizeof(double));
	double *want = calloc((size_t)S * Hq * D, sizeof(double));
	double *want_lse = calloc((size_t)S * Hq, sizeof(double));

	c.in[0] = tt_tensor(TK_F16, 4, qs, 0);
	c.in[1] = tt_tensor(TK_F16, 4, ks, 0);
	c.in[2] = tt_tensor(TK_F16, 4, ks, 0);
	c.out[0] = tt_tensor(TK_F16, 4, qs, 0);
	c.out[1] = tt_tensor(TK_F32, 3, ls, 0);
	fill_f16(&c.in[0], q, &rng);
	fill_f16(&c.in[1], k, &rng);
	fill_f16(&c.in[2], v, &rng);
	cr_assert_eq(tk_kernel_find("attention_prefill")->cpu(&c), TK_OK);

	naive_seq s = { S, Skv, q, k, v };
	double sc = scale > 0.0 ? scale : 1.0 / sqrt((double)D);
	naive_attention(&s, Hq, Hkv, D, causal, sc, want, want_lse);
	expect_close(&c.out[0], want, (int64_t)S * Hq * D, "batched");
	expect_lse(c.out[1].data, want_lse, (int64_t)S * Hq, "batched");
	for (int i = 0; i < 3; i++)
		free(c.in[i].data);
	free(c.out[0].data);
	free(c.out[1].data);
	free(q);
	free(k);
	free(v);
	free(want);
	free(want_lse);
}

Test(cpu_attention_prefill, causal_aligns_the_last_query_with_the_last_key)
{
	check_batched(3, 5, 1, 1, 4, 1, 0.0);
	check_batched(4, 4, 2, 2, 8, 1, 0.0);
}

Test(cpu_attention_prefill, gqa_maps_query_heads_to_their_kv_group)
{
	check_batched(6, 6, 4, 2, 4, 0, 0.0);
	check_batched(5, 7, 4, 1, 8, 1, 0.7);
}

Test(cpu_attention_prefill, lse_is_the_log_of_the_scaled_softmax_denominator)
{
	/* One query, one key: lse is the scaled score itself. */
	int64_t s4[4] = { 1, 1, 1, 2 }, ls[3] = { 1, 1, 1 };
	tk_call c = make_call(3, 0, 0.5);
	uint16_t one = tk_f32_to_f16(1.0f), three = tk_f32_to_f16(3.0f);

	for (int i = 0; i < 3; i++)
		c.in[i] = tt_tensor(TK_F16, 4, s4, 0);
	c.out[0] = tt_tensor(TK_F16, 4, s4, 0);
	c.out[1] = tt_tensor(TK_F32, 3, ls, 0);
	((uint16_t *)c.in[0].data)[0] = ((uint16_t *)c.in[0].data)[1] = one;
	((uint16_t *)c.in[1].data)[0] = ((uint16_t *)c.in[1].data)[1] = three;
	((uint16_t *)c.in[2].data)[0] = ((uint16_t *)c.in[2].data)[1] = three;
	cr_assert_eq(tk_kernel_find("attention_prefill")->cpu(&c), TK_OK);
	cr_expect_float_eq(((float *)c.out[1].data)[0], 3.0f, 1e-6, "lse = 0.5 * (1*3 + 1*3)");
	cr_expect_eq(((uint16_t *)c.out[0].data)[0], three, "one key: out is its value");
	for (int i = 0; i < 3; i++)
		free(c.in[i].data);
	free(c.out[0].data);
	free(c.out[1].data);
}

/* Varlen over three sequences, the middle one empty; one row sees no key. */
Test(cpu_attention_prefill, varlen_handles_empty_sequences_and_rows_without_keys)
{
	static const int ql[3] = { 2, 0, 3 }, kl[3] = { 4, 0, 1 };
	const int Hq = 2, Hkv = 1, D = 4, Tq = 5, Tk = 5;
	uint64_t rng = 12345;
	int64_t qs[3] = { Tq, Hq, D }, ks[3] = { Tk, Hkv, D }, ls[2] = { Hq, Tq }, cs[1] = { 4 };
	tk_call c = make_call(5, 1, 0.0);
	double q[5 * 2 * 4], k[5 * 4], v[5 * 4], want[5 * 2 * 4], want_lse[2 * 5];
	int32_t cu_q[4] = { 0, 2, 2, 5 }, cu_k[4] = { 0, 4, 4, 5 };

	c.in[0] = tt_tensor(TK_F16, 3, qs, 0);
	c.in[1] = tt_tensor(TK_F16, 3, ks, 0);
	c.in[2] = tt_tensor(TK_F16, 3, ks, 0);
	c.in[3] = tt_tensor(TK_I32, 1, cs, 0);
	c.in[4] = tt_tensor(TK_I32, 1, cs, 0);
	memcpy(c.in[3].data, cu_q, sizeof(cu_q));
	memcpy(c.in[4].data, cu_k, sizeof(cu_k));
	c.out[0] = tt_tensor(TK_F16, 3, qs, 0);
	c.out[1] = tt_tensor(TK_F32, 2, ls, 0);
	fill_f16(&c.in[0], q, &rng);
	fill_f16(&c.in[1], k, &rng);
	fill_f16(&c.in[2], v, &rng);
	cr_assert_eq(tk_kernel_find("attention_prefill_varlen")->cpu(&c), TK_OK);

	for (int b = 0; b < 3; b++) {
		naive_seq s = { ql[b], kl[b], q + cu_q[b] * Hq * D, k + cu_k[b] * Hkv * D,
			        v + cu_k[b] * Hkv * D };
		double o[3 * 2 * 4], l[2 * 3];
		naive_attention(&s, Hq, Hkv, D, 1, 0.5, o, l);
		memcpy(want + cu_q[b] * Hq * D, o, sizeof(double) * (size_t)(ql[b] * Hq * D));
		for (int h = 0; h < Hq; h++)
			for (int i = 0; i < ql[b]; i++)
				want_lse[h * Tq + cu_q[b] + i] = l[h * ql[b] + i];
	}
	/* Sequence 2 has 3 queries and 1 key: its first two rows see nothing. */
	cr_assert(isinf(want_lse[2]) && isinf(want_lse[3]));
	expect_close(&c.out[0], want, Tq * Hq * D, "varlen");
	expect_lse(c.out[1].data, want_lse, Hq * Tq, "varlen");
	for (int i = 0; i < 5; i++)
		free(c.in[i].data);
	free(c.out[0].data);
	free(c.out[1].data);
}

Test(cpu_attention_prefill, varlen_clamps_cu_seqlens_out_of_range)
{
	int64_t qs[3] = { 4, 1, 4 }, cs[1] = { 4 };
	tk_call c = make_call(5, 0, 0.0);
	int32_t bad_q[4] = { -7, 100, 2, 1 }, bad_k[4] = { 3, -1, 1 << 30, 4 };

	for (int i = 0; i < 3; i++)
		c.in[i] = tt_tensor(TK_F16, 3, qs, 0);
	c.in[3] = tt_tensor(TK_I32, 1, cs, 0);
	c.in[4] = tt_tensor(TK_I32, 1, cs, 0);
	memcpy(c.in[3].data, bad_q, sizeof(bad_q));
	memcpy(c.in[4].data, bad_k, sizeof(bad_k));
	c.out[0] = tt_tensor(TK_F16, 3, qs, 0);
	c.n_out = 1;
	/* Clamped: sequence 0 covers queries [0, 4) and keys [3, 3), the others nothing. */
	cr_expect_eq(tk_kernel_find("attention_prefill_varlen")->cpu(&c), TK_OK);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(((uint16_t *)c.out[0].data)[i], 0, "a row without keys is 0");
	for (int i = 0; i < 5; i++)
		free(c.in[i].data);
	free(c.out[0].data);
}
