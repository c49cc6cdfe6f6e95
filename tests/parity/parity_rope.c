/*
 * parity_rope.c - rope_neox and rope_gptj (in place on q and k) on the GPU
 * against the CPU references: every manifest workload (parity.h), then
 * head dims 2 to 130 (odd pairs, no vectors), padded rows, computed angles
 * with either theta, a cos/sin cache rotating half the dims, i64
 * positions, a few tokens of many heads, prefill-sized calls, positions
 * outside the cache (left as they are), and no tokens at all.
 */
#include <math.h>
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(rope)

#define CACHE_ROWS 4096

/*
 * Positions below CACHE_ROWS; a real cache (cos in the first half of a row,
 * sin in the second, theta 500000) when there is one; with arg set, every
 * other token's position outside the cache (negative or past its end).
 */
static void plant_rope(parity_run *r, uint64_t *rng)
{
	tk_tensor *pos = parity_tensor(r, "positions"), *cache = parity_tensor(r, "cos_sin_cache");
	int64_t tokens = tk_numel(pos);

	for (int64_t t = 0; t < tokens; t++)
		tt_set(pos, t, (double)(tt_rand_u64(rng) % CACHE_ROWS));
	if (cache) {
		int64_t rd = cache->shape[1];
		for (int64_t p = 0; p < cache->shape[0]; p++) {
			for (int64_t i = 0; i < rd / 2; i++) {
				double a = (double)p * pow(500000.0, -(double)(2 * i) / (double)rd);
				tt_set(cache, p * rd + i, cos(a));
				tt_set(cache, p * rd + rd / 2 + i, sin(a));
			}
		}
	}
	if (r->c->arg != 0.0 && cache)
		for (int64_t t = 1; t < tokens; t += 2)
			tt_set(pos, t, t % 4 == 1 ? -1.0 : (double)(cache->shape[0] + t));
}

/*
 * tokens of hq q heads and hk k heads of head dim d (rounded up to even).
 * Variants: 0 computed angles (theta 10000); 1 a cache in f32 rotating half
 * the dims; 2 computed angles with theta 500000 and i64 positions.
 */
static void rope_case(const char *op, tk_dtype dt, int64_t tokens, int64_t hq, int64_t hk,
                      int64_t d, int64_t pad, int variant, int outside)
{
	static const char *const what[] = { "computed angles", "cos/sin cache",
		                            "theta 500000, i64 positions" };
	int64_t dim = d + (d & 1), rd = variant == 1 && dim >= 4 ? (dim / 2) & ~(int64_t)1 : dim;
	parity_case c;
	char label[96];

	snprintf(label, sizeof(label), "%s%s", what[variant],
	         outside ? ", half the positions outside the cache" : "");
	parity_special(&c, op, dt, label);
	parity_shape(&c, "q", 3, (int64_t[]){ tokens, hq, dim });
	parity_shape(&c, "k", 3, (int64_t[]){ tokens, hk, dim });
	parity_shape(&c, "positions", 1, (int64_t[]){ tokens });
	if (variant == 1) {
		parity_shape(&c, "cos_sin_cache", 2, (int64_t[]){ CACHE_ROWS, rd });
		parity_dtype(&c, "cos_sin_cache", TK_F32);
	}
	if (variant == 2)
		parity_dtype(&c, "positions", TK_I64);
	parity_param_int(&c, "rotary_dim", rd);
	parity_param_float(&c, "theta", variant == 2 ? 500000.0 : 10000.0);
	c.plant = plant_rope;
	c.arg = outside;
	c.pad = pad;
	parity_check(&c);
}

static const char *const ops[] = { "rope_neox", "rope_gptj" };

Test(parity_rope, neox_and_gptj_match_cpu_with_computed_and_cached_angles)
{
	static const int64_t dims[] = { 2, 6, 64, 128, 130 };

	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < 3; v++) {
				for (size_t d = 0; d < 5; d++) {
					rope_case(ops[o], tt_float_dtypes[k], 9, 3, 2, dims[d], 0,
					          v, 0);
					rope_case(ops[o], tt_float_dtypes[k], 5, 3, 2, dims[d], 4,
					          v, 0);
				}
				rope_case(ops[o], tt_float_dtypes[k], 1, 3, 2, 128, 0, v, 0);
				rope_case(ops[o], tt_float_dtypes[k], 700, 3, 2, 128, 0, v, 0);
			}
		}
	}
}

/*
 * Decode-shaped rope: a few tokens of many heads (32 q and 8 k heads, as
 * Llama 3 8B), whose units the kernel deals out over several blocks a
 * token, each thread reading its unit before the token's angles are ready.
 */
Test(parity_rope, a_few_tokens_of_many_heads_match_cpu)
{
	static const int64_t tokens[] = { 1, 3 };

	for (int o = 0; o < 2; o++)
		for (size_t k = 0; k < 3; k++)
			for (int v = 0; v < 3; v++)
				for (size_t t = 0; t < 2; t++)
					rope_case(ops[o], tt_float_dtypes[k], tokens[t], 32, 8, 128,
					          0, v, 0);
}

/*
 * Prefill-sized rope, past the size where a thread takes four units: Llama
 * 3 8B heads over 2048 tokens, and 2600 tokens of 130-wide heads (pairs
 * one at a time: no vectors); then tokens outside the cache among others.
 */
Test(parity_rope, prefill_sized_calls_and_positions_outside_the_cache_match_cpu)
{
	for (int o = 0; o < 2; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < 3; v++) {
				rope_case(ops[o], tt_float_dtypes[k], 2048, 32, 8, 128, 0, v, 0);
				rope_case(ops[o], tt_float_dtypes[k], 2600, 3, 2, 130, 0, v, 0);
			}
			rope_case(ops[o], tt_float_dtypes[k], 9, 3, 2, 128, 0, 1, 1);
			rope_case(ops[o], tt_float_dtypes[k], 4096, 32, 8, 128, 0, 1, 1);
		}
	}
}

Test(parity_rope, both_accept_no_tokens)
{
	for (int o = 0; o < 2; o++)
		rope_case(ops[o], TK_F32, 0, 3, 2, 8, 0, 0, 0);
}
