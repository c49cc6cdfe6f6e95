/*
 * test_attention.c - the attention family's CPU references against closed
 * forms: when every key a query can see is the same vector, the softmax
 * weights are equal and the output is the mean of the values it sees, so
 * the visible ranges (bottom-right causal alignment, packed sequences,
 * cached lengths, new tokens, pages) and the GQA head mapping are checked
 * without a second softmax; one key gives its value and an lse of the
 * scaled score; kv_cache_append copies rows to their slots, bit for bit.
 * The references' own cases (edge lengths, bad tables, refusals) are in
 * test_cpu_attention_prefill.c and test_cpu_attention_decode.c.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

/* Every position of a [.., positions, heads, d] tensor gets the same row per head. */
static void same_rows(tk_tensor *t, int tok_dim, uint64_t *rng)
{
	int64_t heads = t->shape[tok_dim + 1], d = t->shape[tok_dim + 2], n = tk_numel(t);
	double *row = malloc(sizeof(double) * (size_t)(heads * d));

	for (int64_t i = 0; i < heads * d; i++)
		row[i] = tt_rand_uniform(rng, -1.0, 1.0);
	for (int64_t i = 0; i < n; i++)
		tt_set(t, i, row[i % (heads * d)]);
	free(row);
}

/*
 * want[(b, i, h, e)] = the mean over keys j in [0, seen) of v[b, j, h / g, e]
 * (v [B, Skv, Hkv, Dv] row-major; 0 when seen is 0).
 */
static double mean_v(const tk_tensor *v, int64_t b, int64_t hk, int64_t e, int64_t first,
                     int64_t seen)
{
	int64_t skv = v->shape[1], hkv = v->shape[2], dv = v->shape[3];
	double s = 0.0;

	for (int64_t j = first; j < first + seen; j++)
		s += tt_get(v, ((b * skv + j) * hkv + hk) * dv + e);
	return seen > 0 ? s / (double)seen : 0.0;
}

Test(attention_prefill, equal_keys_average_the_visible_values_bottom_right_causal_and_gqa)
{
	const int64_t B = 2, S = 5, Skv = 9, Hq = 4, Hkv = 2, D = 16;
	int64_t sq[4] = { B, S, Hq, D }, sk[4] = { B, Skv, Hkv, D }, sl[3] = { B, Hq, S };

	for (int causal = 0; causal <= 1; causal++) {
		uint64_t rng = ref_seed("attention_prefill equal keys") + (uint64_t)causal;
		tk_call c = { .n_in = 3, .n_out = 2, .n_params = 2 };

		c.in[0] = tt_tensor(TK_F16, 4, sq, 0);
		c.in[1] = tt_tensor(TK_F16, 4, sk, 0);
		c.in[2] = tt_tensor(TK_F16, 4, sk, 0);
		c.out[0] = tt_tensor(TK_F16, 4, sq, 0);
		c.out[1] = tt_tensor(TK_F32, 3, sl, 0);
		tt_fill(&c.in[0], &rng, -1.0, 1.0);
		same_rows(&c.in[1], 1, &rng);
		tt_fill(&c.in[2], &rng, -1.0, 1.0);
		c.params[0] = tt_param_bool(causal);
		c.params[1] = tt_param_float(0.0);
		ref_run("attention_prefill", &c);

		double *want = ref_want(&c.out[0]);
		for (int64_t b = 0; b < B; b++)
			for (int64_t i = 0; i < S; i++)
				for (int64_t h = 0; h < Hq; h++)
					for (int64_t e = 0; e < D; e++) {
						/* query i sees keys j <= i + Skv - S when causal */
						int64_t seen = causal ? i + Skv - S + 1 : Skv;
						want[((b * S + i) * Hq + h) * D + e] = mean_v(
						        &c.in[2], b, h / (Hq / Hkv), e, 0, seen);
					}
		cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(TK_F16), "causal %d", causal);
		/* lse = scale * score + log(seen): the score is q . k for every key */
		for (int64_t b = 0; b < B; b++)
			for (int64_t h = 0; h < Hq; h++)
				for (int64_t i = 0; i < S; i++) {
					double dot = 0.0;
					int64_t seen = causal ? i + Skv - S + 1 : Skv;
					for (int64_t e = 0; e < D; e++)
						dot += tt_get(&c.in[0],
						              ((b * S + i) * Hq + h) * D + e) *
						       tt_get(&c.in[1],
						              (b * Skv * Hkv + h / 2) * D + e);
					double lse = dot / sqrt((double)D) + log((double)seen);
					double got = ((float *)c.out[1].data)[(b * Hq + h) * S + i];
					cr_expect(fabs(got - lse) <= 1e-4 * (1.0 + fabs(lse)),
					          "lse[%ld, %ld, %ld] %g, want %g", (long)b,
					          (long)h, (long)i, got, lse);
				}
		free(want);
		ref_free_call(&c);
	}
}

Test(attention_prefill_varlen, each_packed_sequence_sees_only_its_own_keys)
{
	/* Three sequences: queries 3, 0 and 4, keys 5, 2 and 4 (one empty, causal). */
	static const int32_t cq[4] = { 0, 3, 3, 7 }, ck[4] = { 0, 5, 7, 11 };
	const int64_t Tq = 7, Tk = 11, Hq = 2, Hkv = 1, D = 8;
	int64_t sq[3] = { Tq, Hq, D }, sk[3] = { Tk, Hkv, D }, sc[1] = { 4 }, sl[2] = { Hq, Tq };
	uint64_t rng = ref_seed("attention_prefill_varlen packed");
	tk_call c = { .n_in = 5, .n_out = 2, .n_params = 3 };

	c.in[0] = tt_tensor(TK_BF16, 3, sq, 0);
	c.in[1] = tt_tensor(TK_BF16, 3, sk, 0);
	c.in[2] = tt_tensor(TK_BF16, 3, sk, 0);
	c.in[3] = tt_tensor(TK_I32, 1, sc, 0);
	c.in[4] = tt_tensor(TK_I32, 1, sc, 0);
	memcpy(c.in[3].data, cq, sizeof(cq));
	memcpy(c.in[4].data, ck, sizeof(ck));
	c.out[0] = tt_tensor(TK_BF16, 3, sq, 0);
	c.out[1] = tt_tensor(TK_F32, 2, sl, 0);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	same_rows(&c.in[1], 0, &rng);
	tt_fill(&c.in[2], &rng, -1.0, 1.0);
	c.params[0] = tt_param_bool(1);
	c.params[1] = tt_param_float(0.0);
	c.params[2] = tt_param_int(0);
	ref_run("attention_prefill_varlen", &c);

	/* v as [1, Tk, Hkv, D] for mean_v */
	tk_tensor v4 = c.in[2];
	v4.ndim = 4;
	v4.shape[0] = 1;
	v4.shape[1] = Tk;
	v4.shape[2] = Hkv;
	v4.shape[3] = D;
	tk_set_contiguous(&v4);
	double *want = ref_want(&c.out[0]);
	for (int s = 0; s < 3; s++) {
		int64_t nq = cq[s + 1] - cq[s], nk = ck[s + 1] - ck[s];
		for (int64_t i = 0; i < nq; i++)
			for (int64_t h = 0; h < Hq; h++)
				for (int64_t e = 0; e < D; e++)
					want[((cq[s] + i) * Hq + h) * D + e] =
					        mean_v(&v4, 0, 0, e, ck[s], i + nk - nq + 1);
	}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(TK_BF16));
	free(want);
	ref_free_call(&c);
}

/* Decode over a cache whose every entry is the same key: mean of the values seen. */
static void decode_case(int paged)
{
	const int64_t B = 3, T = 2, Hq = 4, Hkv = 2, D = 8, PS = 4, MP = 3;
	const int64_t NP = paged ? 10 : B, slots = paged ? PS : MP * PS;
	static const int32_t lens[3] = { 12, 1, 7 }; /* full, fewer than T, in between */
	static const int32_t table[3][3] = { { 9, 0, 4 }, { 2, 7, 7 }, { 5, 1, 8 } };
	int64_t sq[4] = { B, T, Hq, D }, sk[4] = { NP, slots, Hkv, D }, sb[2] = { B, MP };
	int64_t sl[1] = { B };
	uint64_t rng = ref_seed(paged ? "decode paged equal keys" : "decode equal keys");
	const char *op = paged ? "attention_decode_paged" : "attention_decode";
	tk_call c = { .n_in = paged ? 5 : 4, .n_out = 1, .n_params = 1 };

	c.in[0] = tt_tensor(TK_F16, 4, sq, 0);
	c.in[1] = tt_tensor(TK_F16, 4, sk, 0);
	c.in[2] = tt_tensor(TK_F16, 4, sk, 0);
	if (paged) {
		c.in[3] = tt_tensor(TK_I32, 2, sb, 0);
		memcpy(c.in[3].data, table, sizeof(table));
	}
	c.in[paged ? 4 : 3] = tt_tensor(TK_I32, 1, sl, 0);
	memcpy(c.in[paged ? 4 : 3].data, lens, sizeof(lens));
	c.out[0] = tt_tensor(TK_F16, 4, sq, 0);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	same_rows(&c.in[1], 1, &rng);
	tt_fill(&c.in[2], &rng, -1.0, 1.0);
	c.params[0] = tt_param_float(0.0);
	ref_run(op, &c);

	double *want = ref_want(&c.out[0]);
	for (int64_t b = 0; b < B; b++)
		for (int64_t t = 0; t < T; t++)
			for (int64_t h = 0; h < Hq; h++)
				for (int64_t e = 0; e < D; e++) {
					/* new token t sees the entries [0, L - T + t] */
					int64_t seen =
					        lens[b] - T + t + 1 > 0 ? lens[b] - T + t + 1 : 0;
					double s = 0.0;
					for (int64_t j = 0; j < seen; j++) {
						int64_t page = paged ? table[b][j / PS] : b;
						int64_t slot = paged ? j % PS : j;
						s += tt_get(&c.in[2], ((page * slots + slot) * Hkv +
						                       h / (Hq / Hkv)) *
						                                      D +
						                              e);
					}
					want[((b * T + t) * Hq + h) * D + e] =
					        seen ? s / (double)seen : 0.0;
				}
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(TK_F16), "%s", op);
	free(want);
	ref_free_call(&c);
}

Test(attention_decode, equal_keys_average_the_cached_values_each_new_token_sees)
{
	decode_case(0);
}

Test(attention_decode_paged, equal_keys_average_the_values_of_the_pages_the_table_names)
{
	decode_case(1);
}

Test(kv_cache_append, copies_each_row_to_its_slot_bit_for_bit_and_skips_the_rest)
{
	const int64_t T = 5, Hkv = 2, D = 4, NP = 3, PS = 2;
	static const int64_t slots[5] = { 4, -1, 0, 6, 3 }; /* padding, and one past the end */
	int64_t sk[3] = { T, Hkv, D }, sc[4] = { NP, PS, Hkv, D }, ss[1] = { T };
	uint64_t rng = ref_seed("kv_cache_append");
	tk_call c = { .n_in = 5, .n_out = 0 };

	c.in[0] = tt_tensor(TK_BF16, 3, sk, 0);
	c.in[1] = tt_tensor(TK_BF16, 3, sk, 0);
	c.in[2] = tt_tensor(TK_I64, 1, ss, 0);
	memcpy(c.in[2].data, slots, sizeof(slots));
	c.in[3] = tt_tensor(TK_BF16, 4, sc, 0);
	c.in[4] = tt_tensor(TK_BF16, 4, sc, 0);
	for (int i = 0; i < 5; i++)
		if (i != 2)
			tt_fill(&c.in[i], &rng, -2.0, 2.0);
	size_t bytes = tt_span_bytes(&c.in[3]), row = (size_t)(Hkv * D) * 2;
	unsigned char *k0 = malloc(bytes), *v0 = malloc(bytes);
	memcpy(k0, c.in[3].data, bytes);
	memcpy(v0, c.in[4].data, bytes);
	ref_run("kv_cache_append", &c);

	for (int64_t s = 0; s < NP * PS; s++) {
		int64_t from = -1;
		for (int64_t t = 0; t < T; t++)
			if (slots[t] == s)
				from = t;
		const unsigned char *wk =
		        from >= 0 ? (unsigned char *)c.in[0].data + from * row : k0 + s * row;
		const unsigned char *wv =
		        from >= 0 ? (unsigned char *)c.in[1].data + from * row : v0 + s * row;
		cr_expect(!memcmp((unsigned char *)c.in[3].data + s * row, wk, row), "k slot %ld",
		          (long)s);
		cr_expect(!memcmp((unsigned char *)c.in[4].data + s * row, wv, row), "v slot %ld",
		          (long)s);
	}
	free(k0);
	free(v0);
	ref_free_call(&c);
}
