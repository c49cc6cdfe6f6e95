/*
 * parity_sampling.c - sample on the GPU against its CPU reference: the
 * same seed, offset and logits must give the same token in every row (the
 * op's promise, docs/sampling.md), so the comparison is exact. Every
 * manifest workload (scaled), then each filter alone and all together, at
 * vocabularies from 1 to 128256 (the widest rows, whose passes each read
 * the row again), per-row settings and seeds, rows of ties, NaN and -inf
 * rows, and logits spread widely (weights that round to 0).
 */
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(sampling)

/* arg 1: ties (a few distinct values); 2: NaN, -inf and all-masked rows. */
static void plant_sample(parity_run *r, uint64_t *rng)
{
	tk_tensor *l = parity_tensor(r, "logits");
	int64_t B = l->shape[0], V = l->shape[1];

	for (int64_t b = 0; b < B; b++) {
		for (int64_t i = 0; i < V; i++) {
			int64_t e = b * V + i;
			if (r->c->arg == 1.0)
				tt_set(l, e, (double)(tt_rand_u64(rng) % 4));
			if (r->c->arg == 2.0 && b % 3 == 0)
				tt_set(l, e, i % 5 == 0 ? NAN : -INFINITY);
			if (r->c->arg == 2.0 && b % 3 == 1 && i % 7 == 0)
				tt_set(l, e, i % 2 ? NAN : -INFINITY);
		}
	}
}

static void sample_case(tk_dtype dt, int64_t B, int64_t V, double t, int64_t k, double p,
                        double min_p, int per_row, int arg)
{
	parity_case c;
	char label[128];

	snprintf(label, sizeof(label), "T %g top_k %lld top_p %g min_p %g%s%s", t, (long long)k, p,
	         min_p, per_row ? ", per-row settings" : "",
	         arg == 1   ? ", ties"
	         : arg == 2 ? ", NaN and -inf rows"
	                    : "");
	parity_special(&c, "sample", dt, label);
	parity_shape(&c, "logits", 2, (int64_t[]){ B, V });
	if (per_row) {
		static const char *const rows[] = { "temperatures", "top_ks", "top_ps",
			                            "min_ps",       "seeds",  "offsets" };
		for (int i = 0; i < 6; i++)
			parity_shape(&c, rows[i], 1, (int64_t[]){ B });
	}
	parity_param_float(&c, "temperature", t);
	parity_param_int(&c, "top_k", k);
	parity_param_float(&c, "top_p", p);
	parity_param_float(&c, "min_p", min_p);
	parity_param_int(&c, "seed", 0x5eed + V);
	parity_param_int(&c, "offset", B);
	parity_range(&c, "logits", -8.0, 8.0);
	c.plant = plant_sample;
	c.arg = arg;
	parity_check(&c);
}

Test(parity_sampling, each_filter_alone_and_together_match_cpu)
{
	static const tk_dtype dts[] = { TK_F32, TK_F16, TK_BF16 };
	static const int64_t vocab[] = { 1, 7, 1000, 32000, 128256 };

	for (int k = 0; k < 3; k++) {
		for (int v = 0; v < 5; v++) {
			int64_t B = vocab[v] > 32000 ? 4 : 16;
			sample_case(dts[k], B, vocab[v], 0.0, 0, 1.0, 0.0, 0, 0);
			sample_case(dts[k], B, vocab[v], 1.0, 0, 1.0, 0.0, 0, 0);
			sample_case(dts[k], B, vocab[v], 0.7, 50, 1.0, 0.0, 0, 0);
			sample_case(dts[k], B, vocab[v], 0.7, 0, 0.9, 0.0, 0, 0);
			sample_case(dts[k], B, vocab[v], 1.3, 0, 1.0, 0.1, 0, 0);
			sample_case(dts[k], B, vocab[v], 0.9, 40, 0.8, 0.02, 0, 0);
			sample_case(dts[k], B, vocab[v], 1.0, 1, 1.0, 0.0, 0, 0);
		}
	}
}

Test(parity_sampling, per_row_settings_ties_and_masked_rows_match_cpu)
{
	static const tk_dtype dts[] = { TK_F32, TK_F16, TK_BF16 };

	for (int k = 0; k < 3; k++) {
		sample_case(dts[k], 32, 5000, 1.0, 0, 1.0, 0.0, 1, 0);
		sample_case(dts[k], 32, 5000, 0.8, 3, 0.5, 0.0, 0, 1);
		sample_case(dts[k], 32, 5000, 0.8, 0, 0.9, 0.05, 1, 1);
		sample_case(dts[k], 32, 5000, 1.0, 10, 0.95, 0.0, 0, 2);
		sample_case(dts[k], 32, 5000, 0.0, 0, 1.0, 0.0, 0, 2);
	}
}

Test(parity_sampling, a_low_temperature_over_wide_logits_matches_cpu)
{
	/* At T 0.05 over [-8, 8] most weights are below 2^-40 of the largest: 0. */
	sample_case(TK_BF16, 8, 128256, 0.05, 0, 0.99, 0.0, 0, 0);
	sample_case(TK_F32, 8, 128256, 0.05, 100, 1.0, 0.0, 0, 0);
}

Test(parity_sampling, rows_cut_into_cluster_slices_match_cpu)
{
	/* Rows of 8192 to 8 x 40960 tokens are cut into 8 slices, one CTA each: per-row settings,
	 * ties and masked rows across the slices; a last slice shorter than the others (8193,
	 * 151936); the largest row sliced and the shortest and longest ones that are not. */
	static const tk_dtype dts[] = { TK_F32, TK_BF16 };

	for (int k = 0; k < 2; k++) {
		sample_case(dts[k], 16, 32000, 1.0, 0, 1.0, 0.0, 1, 0);
		sample_case(dts[k], 16, 32000, 0.8, 3, 0.5, 0.0, 0, 1);
		sample_case(dts[k], 16, 32000, 0.8, 0, 0.9, 0.05, 1, 1);
		sample_case(dts[k], 16, 32000, 1.0, 10, 0.95, 0.0, 0, 2);
		sample_case(dts[k], 16, 32000, 0.0, 0, 1.0, 0.0, 0, 2);
		sample_case(dts[k], 8, 8193, 0.9, 40, 0.8, 0.02, 0, 0);
		sample_case(dts[k], 4, 151936, 0.7, 0, 0.9, 0.0, 1, 0);
	}
	sample_case(TK_BF16, 3, 8191, 0.8, 0, 0.9, 0.0, 0, 0);
	sample_case(TK_F32, 2, 8 * 40960, 0.8, 20, 0.9, 0.0, 0, 1);
	sample_case(TK_F32, 2, 8 * 40960 + 1, 0.8, 20, 0.9, 0.0, 0, 1);
}
