/*
 * test_cpu_attention_decode.c - the CPU references of attention_decode,
 * attention_decode_paged and kv_cache_append against a naive model written
 * here: gather the entries a query row sees into a list, then a two-pass
 * softmax in double. Covers GQA, several new tokens per sequence (causal
 * among themselves), lengths of 0 and past the capacity, paged caches with
 * scattered and shared pages and page indices out of range, and appends
 * with skipped slots.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_decode_case.h"
#include "kernels/tk_test_util.h"

static const tk_kernel_entry *entry(const char *op)
{
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert_not_null(e, "no table entry for %s", op);
	return e;
}

/* Logical index of q / out element (b, t, hq, d). */
static int64_t q_index(const dcase *x, int64_t b, int64_t t, int64_t hq, int64_t d)
{
	return ((b * x->T + t) * x->Hq + hq) * x->D + d;
}

/* Logical index of cache element (entry j of sequence b, head h, d), or -1 when skipped. */
static int64_t cache_index(dcase *x, int64_t b, int64_t j, int64_t h, int64_t d)
{
	int64_t ps = x->c.in[1].shape[1], page = b, slot = j;

	if (x->paged) {
		int64_t maxp = x->c.in[3].shape[1];
		page = dcase_table(x)[b * maxp + j / ps];
		slot = j % ps;
		if (page < 0 || page >= x->c.in[1].shape[0])
			return -1;
	}
	return ((page * ps + slot) * x->Hkv + h) * x->D + d;
}

/* The naive model: every visible entry gathered, softmax in two passes. */
static double *naive_decode(dcase *x, double scale)
{
	int64_t n_out = x->B * x->T * x->Hq * x->D;
	double *want = calloc((size_t)(n_out ? n_out : 1), sizeof(double));
	double *sc = malloc(sizeof(double) * (size_t)(x->cap + 1));
	int64_t *ent = malloc(sizeof(int64_t) * (size_t)(x->cap + 1));

	for (int64_t b = 0; b < x->B; b++) {
		int64_t len = dcase_lens(x)[b];
		len = len < 0 ? 0 : len > x->cap ? x->cap : len;
		for (int64_t t = 0; t < x->T; t++) {
			for (int64_t hq = 0; hq < x->Hq; hq++) {
				int64_t h = hq / (x->Hq / x->Hkv), n = 0;
				for (int64_t j = 0; j <= len - x->T + t; j++)
					if (cache_index(x, b, j, h, 0) >= 0)
						ent[n++] = j;
				double mx = -INFINITY, sum = 0.0;
				for (int64_t e = 0; e < n; e++) {
					double dot = 0.0;
					for (int64_t d = 0; d < x->D; d++)
						dot += tt_get(&x->c.in[0],
						              q_index(x, b, t, hq, d)) *
						       tt_get(&x->c.in[1],
						              cache_index(x, b, ent[e], h, d));
					sc[e] = dot * scale;
					mx = fmax(mx, sc[e]);
				}
				for (int64_t e = 0; e < n; e++) {
					sc[e] = exp(sc[e] - mx);
					sum += sc[e];
				}
				for (int64_t d = 0; d < x->D; d++) {
					double acc = 0.0;
					for (int64_t e = 0; e < n; e++)
						acc += sc[e] *
						       tt_get(&x->c.in[2],
						              cache_index(x, b, ent[e], h, d));
					want[q_index(x, b, t, hq, d)] = n ? acc / sum : 0.0;
				}
			}
		}
	}
	free(sc);
	free(ent);
	return want;
}

static double check_decode(dcase *x, const char *what)
{
	const char *op = x->paged ? "attention_decode_paged" : "attention_decode";
	double scale = x->c.params[0].v.f > 0.0 ? x->c.params[0].v.f : 1.0 / sqrt((double)x->D);
	double tol = x->c.in[0].dtype == TK_F16 ? 1e-3 : 8e-3;

	tt_poison(&x->c.out[0]);
	cr_assert_eq(entry(op)->cpu(&x->c), TK_OK, "%s refused %s", op, what);
	double *want = naive_decode(x, scale);
	double rel = tt_rel_err(&x->c.out[0], want);
	cr_expect_leq(rel, tol, "%s %s %s: relative error %.3g > %.3g", op,
	              tk_dtype_name(x->c.in[0].dtype), what, rel, tol);
	free(want);
	return rel;
}

/* 1 when every output element of sequence b is exactly zero. */
static int sequence_is_zero(dcase *x, int64_t b)
{
	for (int64_t i = 0; i < x->T * x->Hq * x->D; i++)
		if (tt_get(&x->c.out[0], b * x->T * x->Hq * x->D + i) != 0.0)
			return 0;
	return 1;
}

Test(attention_decode, gqa_groups_of_1_4_and_8_match_the_naive_softmax)
{
	static const int64_t groups[] = { 1, 4, 8 };
	uint64_t rng = 0x51ed2701;

	for (int di = 0; di < 2; di++) {
		for (int gi = 0; gi < 3; gi++) {
			dcase x;
			dcase_make(&x, di ? TK_F16 : TK_BF16, 0, 3, 1, 2 * groups[gi], 2, 64, 0, 40,
			           0, 1.0, &rng);
			int32_t *len = dcase_lens(&x);
			len[0] = 1;
			len[1] = 17;
			len[2] = 40;
			check_decode(&x, "lengths 1, 17, 40");
			dcase_free(&x);
		}
	}
}

Test(attention_decode, several_new_tokens_are_causal_among_themselves)
{
	uint64_t rng = 0x7ab1;
	dcase x;

	dcase_make(&x, TK_BF16, 0, 2, 4, 8, 2, 32, 0, 24, 0, 1.0, &rng);
	dcase_lens(&x)[0] = 24;
	dcase_lens(&x)[1] = 9;
	check_decode(&x, "T 4, lengths 24 and 9");
	/* A length under T: the first tokens see nothing and give zeros. */
	dcase_lens(&x)[1] = 2;
	check_decode(&x, "T 4, length 2");
	for (int64_t hq = 0; hq < x.Hq; hq++)
		for (int64_t d = 0; d < x.D; d++)
			cr_assert_eq(tt_get(&x.c.out[0], q_index(&x, 1, 0, hq, d)), 0.0,
			             "token 0 of a length-2 sequence with T 4 sees nothing");
	dcase_free(&x);
}

Test(attention_decode, length_zero_and_negative_give_zeros_and_long_lengths_clamp)
{
	uint64_t rng = 0x3;
	dcase x;

	dcase_make(&x, TK_F16, 0, 3, 1, 4, 4, 16, 0, 20, 0, 1.0, &rng);
	dcase_lens(&x)[0] = 0;
	dcase_lens(&x)[1] = -5;
	dcase_lens(&x)[2] = 1 << 30;
	check_decode(&x, "lengths 0, -5, 2^30 (capacity 20)");
	cr_expect(sequence_is_zero(&x, 0), "length 0 must give zeros");
	cr_expect(sequence_is_zero(&x, 1), "a negative length must give zeros");
	cr_expect(!sequence_is_zero(&x, 2), "a length past the capacity reads the whole cache");
	dcase_free(&x);
}

Test(attention_decode, an_explicit_scale_replaces_one_over_sqrt_d)
{
	uint64_t rng = 0x99;
	dcase x;

	dcase_make(&x, TK_BF16, 0, 1, 1, 2, 1, 16, 0, 30, 0, 1.0, &rng);
	dcase_lens(&x)[0] = 30;
	x.c.params[0] = tt_param_float(0.7);
	check_decode(&x, "scale 0.7");
	dcase_free(&x);
}

Test(attention_decode_paged, scattered_and_shared_pages_match_the_naive_softmax)
{
	uint64_t rng = 0xbeef;
	dcase x;

	/* 10 pages of 4 slots, 3 sequences of up to 5 pages. */
	dcase_make(&x, TK_BF16, 1, 3, 1, 8, 2, 32, 10, 4, 5, 1.0, &rng);
	static const int32_t table[3][5] = {
		{ 7, 2, 9, 0, 5 },
		{ 7, 3, 1, -1, -1 }, /* shares page 7 with sequence 0 */
		{ 4, 8, 6, 2, 3 },   /* shares pages 2 and 3 */
	};
	memcpy(dcase_table(&x), table, sizeof(table));
	dcase_lens(&x)[0] = 18;
	dcase_lens(&x)[1] = 11;
	dcase_lens(&x)[2] = 20;
	check_decode(&x, "pages of 4, scattered and shared");
	dcase_free(&x);
}

Test(attention_decode_paged, pages_out_of_range_are_skipped_not_read)
{
	uint64_t rng = 0xfeed;
	dcase x;

	dcase_make(&x, TK_F16, 1, 2, 2, 4, 1, 16, 6, 8, 4, 1.0, &rng);
	static const int32_t table[2][4] = {
		{ 1, 600, 3, -7 },     /* two pages out of range */
		{ 99, -1, 100000, 6 }, /* page 6 == num_pages is out of range too */
	};
	memcpy(dcase_table(&x), table, sizeof(table));
	dcase_lens(&x)[0] = 30;
	dcase_lens(&x)[1] = 32;
	check_decode(&x, "out-of-range page indices");
	cr_expect(sequence_is_zero(&x, 1), "a sequence with no readable page gives zeros");
	dcase_free(&x);
}

Test(attention_decode_paged, identity_pages_give_the_contiguous_result)
{
	uint64_t rng = 0x1234;
	dcase c, p;
	int64_t ps = 16;

	dcase_make(&c, TK_BF16, 0, 2, 2, 8, 2, 64, 0, 64, 0, 1.0, &rng);
	dcase_make(&p, TK_BF16, 1, 2, 2, 8, 2, 64, 8, ps, 4, 1.0, &rng);
	/* The same bytes: sequence b's 64 entries are pages 4b .. 4b + 3. */
	memcpy(p.c.in[0].data, c.c.in[0].data, tt_span_bytes(&c.c.in[0]));
	memcpy(p.c.in[1].data, c.c.in[1].data, tt_span_bytes(&c.c.in[1]));
	memcpy(p.c.in[2].data, c.c.in[2].data, tt_span_bytes(&c.c.in[2]));
	for (int i = 0; i < 8; i++)
		dcase_table(&p)[i] = i;
	for (int b = 0; b < 2; b++)
		dcase_lens(&c)[b] = dcase_lens(&p)[b] = 37 + 20 * b;
	check_decode(&c, "contiguous");
	check_decode(&p, "paged, identity table");
	cr_expect_eq(tt_count_diff(&p.c.out[0], &c.c.out[0]), 0,
	             "paged with an identity table must equal contiguous bit for bit");
	dcase_free(&c);
	dcase_free(&p);
}

Test(kv_cache_append, writes_each_token_at_its_slot_and_skips_the_rest)
{
	uint64_t rng = 0x600d;

	for (int wide = 0; wide < 2; wide++) {
		int64_t ks[3] = { 5, 2, 8 }, cs[4] = { 3, 4, 2, 8 }, ss[1] = { 5 };
		tk_call c = { 0 };
		c.in[0] = tt_tensor(TK_BF16, 3, ks, 0);
		c.in[1] = tt_tensor(TK_BF16, 3, ks, 0);
		c.in[2] = tt_tensor(wide ? TK_I64 : TK_I32, 1, ss, 0);
		c.in[3] = tt_tensor(TK_BF16, 4, cs, 0);
		c.in[4] = tt_tensor(TK_BF16, 4, cs, 0);
		c.n_in = 5;
		for (int i = 0; i < 5; i++)
			if (i != 2)
				tt_fill(&c.in[i], &rng, -2.0, 2.0);
		static const int64_t slots[5] = { 9, -1, 0, 12, 11 }; /* 12 slots in all */
		for (int t = 0; t < 5; t++)
			tt_set(&c.in[2], t, (double)slots[t]);
		tk_tensor k0 = tt_tensor(TK_BF16, 4, cs, 0), v0 = tt_tensor(TK_BF16, 4, cs, 0);
		memcpy(k0.data, c.in[3].data, tt_span_bytes(&k0));
		memcpy(v0.data, c.in[4].data, tt_span_bytes(&v0));

		cr_assert_eq(entry("kv_cache_append")->cpu(&c), TK_OK);
		for (int64_t s = 0; s < 12; s++) {
			int64_t t = -1;
			for (int i = 0; i < 5; i++)
				if (slots[i] == s)
					t = i;
			for (int64_t i = 0; i < 2 * 8; i++) {
				int64_t ci = s * 16 + i;
				double wk = t >= 0 ? tt_get(&c.in[0], t * 16 + i) : tt_get(&k0, ci);
				double wv = t >= 0 ? tt_get(&c.in[1], t * 16 + i) : tt_get(&v0, ci);
				cr_assert_eq(tt_get(&c.in[3], ci), wk, "k slot %lld elem %lld",
				             (long long)s, (long long)i);
				cr_assert_eq(tt_get(&c.in[4], ci), wv, "v slot %lld elem %lld",
				             (long long)s, (long long)i);
			}
		}
		for (int i = 0; i < 5; i++)
			tt_free(&c.in[i]);
		tt_free(&k0);
		tt_free(&v0);
	}
}

Test(kv_cache_append, then_decode_sees_the_appended_tokens)
{
	uint64_t rng = 0xa99e;
	dcase x;

	/* Sequence 0 holds 5 tokens in pages 2, 0; append 2 more at positions 5 and 6. */
	dcase_make(&x, TK_F16, 1, 1, 2, 4, 2, 16, 4, 4, 2, 1.0, &rng);
	dcase_table(&x)[0] = 2;
	dcase_table(&x)[1] = 0;
	dcase_lens(&x)[0] = 7;
	int64_t ks[3] = { 2, 2, 16 }, ss[1] = { 2 };
	tk_call a = { 0 };
	a.in[0] = tt_tensor(TK_F16, 3, ks, 0);
	a.in[1] = tt_tensor(TK_F16, 3, ks, 0);
	a.in[2] = tt_tensor(TK_I32, 1, ss, 0);
	a.in[3] = x.c.in[1];
	a.in[4] = x.c.in[2];
	a.n_in = 5;
	tt_fill(&a.in[0], &rng, -1.0, 1.0);
	tt_fill(&a.in[1], &rng, -1.0, 1.0);
	tt_set(&a.in[2], 0, 0 * 4 + 1); /* position 5: page 0, slot 1 */
	tt_set(&a.in[2], 1, 0 * 4 + 2); /* position 6: page 0, slot 2 */
	cr_assert_eq(entry("kv_cache_append")->cpu(&a), TK_OK);
	/* Page 0 comes first in the cache: token t went to slot 1 + t, 2 heads of 16 each. */
	for (int64_t t = 0; t < 2; t++) {
		for (int64_t i = 0; i < 2 * 16; i++) {
			cr_assert_eq(tt_get(&x.c.in[1], (1 + t) * 32 + i),
			             tt_get(&a.in[0], t * 32 + i));
			cr_assert_eq(tt_get(&x.c.in[2], (1 + t) * 32 + i),
			             tt_get(&a.in[1], t * 32 + i));
		}
	}
	check_decode(&x, "after append, T 2");
	tt_free(&a.in[0]);
	tt_free(&a.in[1]);
	tt_free(&a.in[2]);
	dcase_free(&x);
}

Test(attention_decode, mismatched_shapes_are_refused)
{
	uint64_t rng = 0x5;
	dcase x;

	dcase_make(&x, TK_BF16, 0, 2, 1, 6, 4, 16, 0, 8, 0, 1.0, &rng); /* 6 % 4 != 0 */
	cr_expect_eq(entry("attention_decode")->cpu(&x.c), TK_ERR_UNSUPPORTED);
	dcase_free(&x);
}
