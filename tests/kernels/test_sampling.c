/*
 * test_sampling.c - the CPU reference of sample against its definition
 * (docs/sampling.md): greedy is the first argmax and ignores NaN; a row
 * with no finite logit gives -1; the same seed and offset give the same
 * tokens and another offset or seed others; top_k 1 is greedy; tokens
 * outside top-k, top-p's nucleus or min-p's cut are never drawn over
 * thousands of seeds; per-row settings replace the params; per-row seeds
 * make a row's draw independent of its place in the batch; and the draws
 * of a filtered distribution pass a chi-square test against the
 * probabilities computed here in double precision (a fixed set of seeds,
 * so the test is deterministic).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

enum { P_TEMP, P_TOPK, P_TOPP, P_MINP, P_SEED, P_OFFSET, P_COUNT };

typedef struct settings {
	double temperature, top_p, min_p;
	int64_t top_k, seed, offset;
} settings;

static const settings plain = { 1.0, 1.0, 0.0, 0, 0, 0 };

/* A call of sample over logits [B, V] of dt (filled by the caller), out i64. */
static tk_call make_call(tk_dtype dt, int64_t B, int64_t V, const settings *s)
{
	tk_call c;
	int64_t shape[2] = { B, V };

	memset(&c, 0, sizeof(c));
	c.n_in = 1;
	c.n_out = 1;
	c.in[0] = tt_tensor(dt, 2, shape, 0);
	c.out[0] = tt_tensor(TK_I64, 1, &B, 0);
	c.n_params = P_COUNT;
	c.params[P_TEMP] = tt_param_float(s->temperature);
	c.params[P_TOPK] = tt_param_int(s->top_k);
	c.params[P_TOPP] = tt_param_float(s->top_p);
	c.params[P_MINP] = tt_param_float(s->min_p);
	c.params[P_SEED] = tt_param_int(s->seed);
	c.params[P_OFFSET] = tt_param_int(s->offset);
	return c;
}

static void set_seed(tk_call *c, int64_t seed, int64_t offset)
{
	c->params[P_SEED] = tt_param_int(seed);
	c->params[P_OFFSET] = tt_param_int(offset);
}

static int64_t token(const tk_call *c, int64_t b)
{
	return ((const int64_t *)c->out[0].data)[b];
}

/* Row b of the call's logits set from v[0..V). */
static void set_row(tk_call *c, int64_t b, const double *v)
{
	for (int64_t i = 0; i < c->in[0].shape[1]; i++)
		tt_set(&c->in[0], b * c->in[0].shape[1] + i, v[i]);
}

/* Draw row 0 under seeds 0..n-1 (offset 7) and count each token. */
static void histogram(tk_call *c, int64_t n, int64_t *counts)
{
	int64_t V = c->in[0].shape[1];

	memset(counts, 0, sizeof(int64_t) * (size_t)V);
	for (int64_t s = 0; s < n; s++) {
		set_seed(c, s, 7);
		ref_run("sample", c);
		int64_t t = token(c, 0);
		cr_assert(t >= 0 && t < V, "seed %lld drew token %lld", (long long)s, (long long)t);
		counts[t]++;
	}
}

Test(sampling, greedy_is_the_first_argmax_and_ignores_nan)
{
	settings s = plain;
	s.temperature = 0.0;
	tk_call c = make_call(TK_F32, 4, 6, &s);
	const double rows[4][6] = {
		{ 0.5, 2.0, -1.0, 2.0, 1.0, 0.0 },      /* a tie: the lower index */
		{ NAN, 1.0, NAN, 3.0, -INFINITY, 2.0 }, /* NaN is not a maximum */
		{ -0.0, 0.0, -1.0, -2.0, -3.0, -4.0 },  /* -0 and +0 are equal */
		{ 1.0, 2.0, 3.0, 4.0, 5.0, INFINITY },
	};
	const int64_t want[4] = { 1, 3, 0, 5 };

	for (int b = 0; b < 4; b++)
		set_row(&c, b, rows[b]);
	ref_run("sample", &c);
	for (int b = 0; b < 4; b++)
		cr_assert_eq(token(&c, b), want[b], "row %d: token %lld, want %lld", b,
		             (long long)token(&c, b), (long long)want[b]);
	ref_free_call(&c);
}

Test(sampling, greedy_matches_argmax_of_random_rows_in_every_dtype)
{
	settings s = plain;
	s.temperature = 0.0;
	for (size_t k = 0; k < 3; k++) {
		tk_call c = make_call(tt_float_dtypes[k], 16, 1000, &s);
		uint64_t rng = 11 + k;
		tt_fill(&c.in[0], &rng, -5.0, 5.0);
		ref_run("sample", &c);
		for (int64_t b = 0; b < 16; b++) {
			int64_t best = 0;
			for (int64_t i = 1; i < 1000; i++)
				if (tt_get(&c.in[0], b * 1000 + i) >
				    tt_get(&c.in[0], b * 1000 + best))
					best = i;
			cr_assert_eq(token(&c, b), best, "%s row %lld",
			             tk_dtype_name(c.in[0].dtype), (long long)b);
		}
		ref_free_call(&c);
	}
}

Test(sampling, a_row_without_a_finite_logit_gives_minus_one)
{
	for (int greedy = 0; greedy < 2; greedy++) {
		settings s = plain;
		s.temperature = greedy ? 0.0 : 1.0;
		tk_call c = make_call(TK_BF16, 2, 5, &s);
		const double r0[5] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY };
		const double r1[5] = { NAN, -INFINITY, NAN, NAN, -INFINITY };
		set_row(&c, 0, r0);
		set_row(&c, 1, r1);
		ref_run("sample", &c);
		cr_assert_eq(token(&c, 0), -1);
		cr_assert_eq(token(&c, 1), -1);
		ref_free_call(&c);
	}
}

Test(sampling, same_seed_and_offset_give_the_same_tokens_and_others_differ)
{
	tk_call c = make_call(TK_F32, 64, 1000, &plain);
	uint64_t rng = 99;
	int64_t first[64];
	int same_offset = 0, same_seed = 0;

	tt_fill(&c.in[0], &rng, -1.0, 1.0); /* flat: many tokens likely */
	set_seed(&c, 1234, 5);
	ref_run("sample", &c);
	for (int b = 0; b < 64; b++)
		first[b] = token(&c, b);
	ref_run("sample", &c);
	for (int b = 0; b < 64; b++)
		cr_assert_eq(token(&c, b), first[b], "row %d changed between equal calls", b);
	set_seed(&c, 1234, 6);
	ref_run("sample", &c);
	for (int b = 0; b < 64; b++)
		same_offset += token(&c, b) == first[b];
	set_seed(&c, 1235, 5);
	ref_run("sample", &c);
	for (int b = 0; b < 64; b++)
		same_seed += token(&c, b) == first[b];
	/* Over ~1000 likely tokens a row repeats by chance about once in 64. */
	cr_assert_lt(same_offset, 8, "another offset repeated %d of 64 rows", same_offset);
	cr_assert_lt(same_seed, 8, "another seed repeated %d of 64 rows", same_seed);
	/* Rows differ from each other too: the row is part of the counter. */
	int distinct = 0;
	for (int b = 1; b < 64; b++)
		distinct += first[b] != first[0];
	cr_assert_gt(distinct, 48);
	ref_free_call(&c);
}

Test(sampling, top_k_one_is_greedy)
{
	settings s = plain;
	s.top_k = 1;
	s.temperature = 1.5;
	tk_call c = make_call(TK_BF16, 8, 777, &s);
	settings g = plain;
	g.temperature = 0.0;
	tk_call gc = make_call(TK_BF16, 8, 777, &g);
	uint64_t rng = 5;

	tt_fill(&c.in[0], &rng, -2.0, 2.0);
	memcpy(gc.in[0].data, c.in[0].data, tt_span_bytes(&c.in[0]));
	ref_run("sample", &gc);
	for (int64_t seed = 0; seed < 50; seed++) {
		set_seed(&c, seed, seed * 3);
		ref_run("sample", &c);
		for (int b = 0; b < 8; b++)
			cr_assert_eq(token(&c, b), token(&gc, b), "seed %lld row %d",
			             (long long)seed, b);
	}
	ref_free_call(&c);
	ref_free_call(&gc);
}

/* Logits of probabilities {0.5, 0.3, 0.15, 0.05} at temperature 1. */
static const double four[4] = { -0.6931471805599453, -1.2039728043259361, -1.8971199848858813,
	                        -2.995732273553991 };

Test(sampling, top_p_never_draws_outside_the_nucleus)
{
	settings s = plain;
	s.top_p = 0.7; /* keeps 0.5 and 0.3: the mass before 0.15 is 0.8 */
	tk_call c = make_call(TK_F32, 1, 4, &s);
	int64_t counts[4];

	set_row(&c, 0, four);
	histogram(&c, 4000, counts);
	cr_assert_eq(counts[2] + counts[3], 0, "drew %lld and %lld outside the nucleus",
	             (long long)counts[2], (long long)counts[3]);
	cr_assert_gt(counts[0], 2000);
	cr_assert_gt(counts[1], 1000);
	ref_free_call(&c);
}

Test(sampling, a_tiny_top_p_keeps_only_the_most_likely_token)
{
	settings s = plain;
	s.top_p = 1e-9;
	tk_call c = make_call(TK_F32, 1, 4, &s);
	int64_t counts[4];

	set_row(&c, 0, four);
	histogram(&c, 500, counts);
	cr_assert_eq(counts[0], 500);
	ref_free_call(&c);
}

Test(sampling, min_p_never_draws_below_its_cut)
{
	settings s = plain;
	s.min_p = 0.2; /* the cut is 0.2 * 0.5 = 0.1: 0.05 goes */
	tk_call c = make_call(TK_BF16, 1, 4, &s);
	int64_t counts[4];

	set_row(&c, 0, four);
	histogram(&c, 4000, counts);
	cr_assert_eq(counts[3], 0);
	cr_assert_gt(counts[2], 300);
	ref_free_call(&c);
}

Test(sampling, top_k_breaks_ties_by_index)
{
	settings s = plain;
	s.top_k = 3;
	tk_call c = make_call(TK_F16, 1, 10, &s);
	double flat[10] = { 0 };
	int64_t counts[10];

	set_row(&c, 0, flat);
	histogram(&c, 3000, counts);
	for (int i = 3; i < 10; i++)
		cr_assert_eq(counts[i], 0, "token %d drawn past the first 3 of a tie", i);
	for (int i = 0; i < 3; i++)
		cr_assert_gt(counts[i], 800, "token %d: %lld of 3000", i, (long long)counts[i]);
	ref_free_call(&c);
}

Test(sampling, nan_logits_are_never_drawn_and_infinities_take_all_the_mass)
{
	tk_call c = make_call(TK_F32, 1, 5, &plain);
	const double nan_row[5] = { NAN, 0.0, NAN, 0.0, NAN };
	const double inf_row[5] = { 1.0, INFINITY, 2.0, INFINITY, 3.0 };
	int64_t counts[5];

	set_row(&c, 0, nan_row);
	histogram(&c, 1000, counts);
	cr_assert_eq(counts[0] + counts[2] + counts[4], 0);
	set_row(&c, 0, inf_row);
	histogram(&c, 1000, counts);
	cr_assert_eq(counts[1] + counts[3], 1000);
	cr_assert_gt(counts[1], 400);
	cr_assert_gt(counts[3], 400);
	ref_free_call(&c);
}

Test(sampling, a_low_temperature_concentrates_and_a_high_one_spreads)
{
	settings s = plain;
	int64_t counts[4];

	s.temperature = 0.05;
	tk_call c = make_call(TK_F32, 1, 4, &s);
	set_row(&c, 0, four);
	histogram(&c, 2000, counts);
	cr_assert_geq(counts[0], 1995); /* (0.3/0.5)^20: about 4e-5 for the second */
	ref_free_call(&c);
	s.temperature = 20.0;
	c = make_call(TK_F32, 1, 4, &s);
	set_row(&c, 0, four);
	histogram(&c, 4000, counts);
	for (int i = 0; i < 4; i++) /* nearly uniform: each within [0.2, 0.3] */
		cr_assert(counts[i] > 800 && counts[i] < 1200, "token %d: %lld of 4000", i,
		          (long long)counts[i]);
	ref_free_call(&c);
}

Test(sampling, per_row_settings_replace_the_params)
{
	settings s = plain;
	s.temperature = 1.0;
	tk_call c = make_call(TK_F32, 3, 4, &s);
	int64_t one = 3;

	for (int b = 0; b < 3; b++)
		set_row(&c, b, four);
	c.n_in = 5;
	c.in[1] = tt_tensor(TK_F32, 1, &one, 0); /* temperatures */
	c.in[2] = tt_tensor(TK_I32, 1, &one, 0); /* top_ks */
	c.in[4] = tt_tensor(TK_F32, 1, &one, 0); /* min_ps */
	/* row 0 greedy; row 1 top_k 2; row 2 min_p 0.9 (only the first survives) */
	tt_set(&c.in[1], 0, 0.0);
	tt_set(&c.in[1], 1, 1.0);
	tt_set(&c.in[1], 2, 1.0);
	tt_set(&c.in[2], 0, 0.0);
	tt_set(&c.in[2], 1, 2.0);
	tt_set(&c.in[2], 2, 0.0);
	tt_set(&c.in[4], 0, 0.0);
	tt_set(&c.in[4], 1, 0.0);
	tt_set(&c.in[4], 2, 0.9);
	int64_t seen1[4] = { 0 };
	for (int64_t seed = 0; seed < 400; seed++) {
		set_seed(&c, seed, 0);
		ref_run("sample", &c);
		cr_assert_eq(token(&c, 0), 0);
		cr_assert(token(&c, 1) < 2, "row 1 drew %lld past top_k 2",
		          (long long)token(&c, 1));
		seen1[token(&c, 1)]++;
		cr_assert_eq(token(&c, 2), 0);
	}
	cr_assert(seen1[0] > 100 && seen1[1] > 50);
	ref_free_call(&c);
}

Test(sampling, per_row_seeds_make_a_draw_independent_of_its_row)
{
	tk_call c = make_call(TK_F32, 4, 300, &plain);
	uint64_t rng = 3;
	int64_t four_rows = 4;
	double row[300];

	for (int i = 0; i < 300; i++)
		row[i] = tt_rand_uniform(&rng, -1.0, 1.0);
	for (int b = 0; b < 4; b++)
		set_row(&c, b, row);
	c.n_in = 7;
	c.in[5] = tt_tensor(TK_I64, 1, &four_rows, 0);
	c.in[6] = tt_tensor(TK_I64, 1, &four_rows, 0);
	/* Rows 0 and 3 are one request (seed 42, step 9); rows 1 and 2 another two. */
	const int64_t seeds[4] = { 42, 43, 44, 42 }, offs[4] = { 9, 9, 9, 9 };
	int differ = 0;
	for (int b = 0; b < 4; b++) {
		((int64_t *)c.in[5].data)[b] = seeds[b];
		((int64_t *)c.in[6].data)[b] = offs[b];
	}
	for (int64_t step = 0; step < 50; step++) {
		set_seed(&c, 0, step);
		ref_run("sample", &c);
		cr_assert_eq(token(&c, 0), token(&c, 3), "step %lld", (long long)step);
		differ += token(&c, 0) != token(&c, 1);
	}
	cr_assert_gt(differ, 40);
	ref_free_call(&c);
}

Test(sampling, out_may_be_i32)
{
	tk_call c = make_call(TK_BF16, 8, 500, &plain);
	uint64_t rng = 8;
	int64_t b8 = 8, want[8];

	tt_fill(&c.in[0], &rng, -2.0, 2.0);
	set_seed(&c, 77, 1);
	ref_run("sample", &c);
	for (int b = 0; b < 8; b++)
		want[b] = token(&c, b);
	tt_free(&c.out[0]);
	c.out[0] = tt_tensor(TK_I32, 1, &b8, 0);
	ref_run("sample", &c);
	for (int b = 0; b < 8; b++)
		cr_assert_eq(((int32_t *)c.out[0].data)[b], want[b]);
	ref_free_call(&c);
}

/*
 * The filtered distribution, in double: softmax at temperature t, min-p
 * against the largest probability, the first k by logit, top-p's prefix
 * (kept while the mass before a token is below p of what top-k left),
 * renormalised.
 */
static void filtered(const double *l, int n, double t, double min_p, int k, double p, double *out)
{
	double m = l[0], sum = 0.0, kept = 0.0, before = 0.0;
	int order[16], n1 = 0;

	for (int i = 1; i < n; i++)
		m = fmax(m, l[i]);
	for (int i = 0; i < n; i++) {
		out[i] = exp((l[i] - m) / t);
		if (out[i] < min_p)
			out[i] = 0.0;
		else
			order[n1++] = i;
	}
	for (int a = 0; a < n1; a++) /* by logit, descending; the test's logits are distinct */
		for (int b = a + 1; b < n1; b++)
			if (l[order[b]] > l[order[a]]) {
				int x = order[a];
				order[a] = order[b];
				order[b] = x;
			}
	for (int r = k; r < n1; r++)
		out[order[r]] = 0.0;
	for (int r = 0; r < n1 && r < k; r++)
		kept += out[order[r]];
	for (int r = 0; r < n1 && r < k; r++) {
		if (r > 0 && before >= p * kept)
			out[order[r]] = 0.0;
		before += out[order[r]];
	}
	for (int i = 0; i < n; i++)
		sum += out[i];
	for (int i = 0; i < n; i++)
		out[i] /= sum;
}

Test(sampling, draws_follow_the_filtered_distribution_chi_square)
{
	/* At T 0.8: min-p 0.05 drops the last two, top-k 5 the sixth, top-p 0.9 the fifth. */
	const double l[8] = { 2.0, 1.5, 1.2, 0.8, 0.3, 0.0, -0.5, -3.0 };
	settings s = { 0.8, 0.9, 0.05, 5, 0, 0 };
	const int64_t n = 20000;
	double want[8], chi2 = 0.0;
	int64_t counts[8];
	int df = -1;

	for (size_t k = 0; k < 3; k++) {
		tk_call c = make_call(tt_float_dtypes[k], 1, 8, &s);
		double lr[8];
		set_row(&c, 0, l);
		for (int i = 0; i < 8; i++) /* the logits as the dtype holds them */
			lr[i] = tt_get(&c.in[0], i);
		filtered(lr, 8, 0.8, 0.05, 5, 0.9, want);
		histogram(&c, n, counts);
		chi2 = 0.0;
		df = -1;
		for (int i = 0; i < 8; i++) {
			if (want[i] == 0.0) {
				cr_assert_eq(counts[i], 0,
				             "%s: token %d is filtered out but was drawn",
				             tk_dtype_name(tt_float_dtypes[k]), i);
				continue;
			}
			double e = want[i] * (double)n;
			chi2 += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
			df++;
		}
		cr_assert_eq(df, 3, "the filters should leave 4 tokens");
		/* 16.27: the 99.9% point of chi-square with 3 degrees of freedom. */
		cr_assert_lt(chi2, 16.27, "%s: chi-square %.2f over %d degrees of freedom",
		             tk_dtype_name(tt_float_dtypes[k]), chi2, df);
		ref_free_call(&c);
	}
}
