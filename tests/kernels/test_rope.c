/*
 * test_rope.c - the CPU references of rope_neox and rope_gptj (in place on
 * q and k) against the rotation written here in double precision: head
 * dims 2 to 64, padded rows, computed angles (theta 10000 and 500000) and
 * a cos/sin cache rotating half the dims, i32 and i64 positions, and no
 * tokens at all.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "kernels/tk_ref_util.h"

/*
 * q [rows, 3, D] and k [rows, 2, D] (D = width rounded up to even; rows
 * padded by pad and pad + 2), positions [rows] below 4096. Variant 0:
 * computed angles, theta 10000; 1: a cache [4096, D / 2] in f32 (cos in
 * the first half of a row, sin in the second, theta 500000) rotating half
 * the dims; 2: computed angles, theta 500000, i64 positions.
 */
static void build(tk_call *c, tk_dtype dt, int64_t rows, int64_t width, int64_t pad, int variant,
                  uint64_t *rng)
{
	int64_t D = width + (width & 1), rd = variant == 1 && D >= 4 ? (D / 2) & ~(int64_t)1 : D;
	int64_t sq[3] = { rows, 3, D }, sk[3] = { rows, 2, D }, sp[1] = { rows };
	int64_t sc[2] = { 4096, rd };

	memset(c, 0, sizeof(*c));
	c->in[0] = tt_tensor(dt, 3, sq, pad);
	c->in[1] = tt_tensor(dt, 3, sk, pad ? pad + 2 : 0);
	c->in[2] = tt_tensor(variant == 2 ? TK_I64 : TK_I32, 1, sp, 0);
	c->n_in = 3;
	for (int64_t t = 0; t < rows; t++)
		tt_set(&c->in[2], t, (double)(tt_rand_u64(rng) % 4096));
	if (variant == 1) {
		c->in[3] = tt_tensor(TK_F32, 2, sc, 0);
		for (int64_t p = 0; p < sc[0]; p++) {
			for (int64_t i = 0; i < rd / 2; i++) {
				double a = (double)p * pow(500000.0, -(double)(2 * i) / (double)rd);
				tt_set(&c->in[3], p * rd + i, cos(a));
				tt_set(&c->in[3], p * rd + rd / 2 + i, sin(a));
			}
		}
		c->n_in = 4;
	}
	c->n_out = 0;
	c->n_params = 2;
	c->params[0] = tt_param_int(rd);
	c->params[1] = tt_param_float(variant == 2 ? 500000.0 : 10000.0);
	tt_fill(&c->in[0], rng, -3.0, 3.0);
	tt_fill(&c->in[1], rng, -3.0, 3.0);
}

static void rope_ref(const tk_tensor *x0, double *want, int neox, int64_t rd, const tk_call *c)
{
	int64_t T = x0->shape[0], H = x0->shape[1], D = x0->shape[2], half = rd / 2;

	for (int64_t t = 0; t < T; t++) {
		int64_t p = (int64_t)tt_get(&c->in[2], t);
		for (int64_t h = 0; h < H; h++) {
			int64_t base = (t * H + h) * D;
			for (int64_t j = 0; j < D; j++)
				want[base + j] = tt_get(x0, base + j);
			for (int64_t i = 0; i < half; i++) {
				double co, si;
				if (c->n_in > 3) {
					co = tt_get(&c->in[3], p * rd + i);
					si = tt_get(&c->in[3], p * rd + half + i);
				} else {
					float inv = (float)pow(c->params[1].v.f, -(2.0 * i) / rd);
					float a = (float)p * inv;
					co = cos(a);
					si = sin(a);
				}
				int64_t i1 = neox ? i : 2 * i, i2 = neox ? i + half : 2 * i + 1;
				double x1 = tt_get(x0, base + i1), x2 = tt_get(x0, base + i2);
				want[base + i1] = x1 * co - x2 * si;
				want[base + i2] = x2 * co + x1 * si;
			}
		}
	}
}

Test(rope, neox_and_gptj_rotate_q_and_k_by_computed_or_cached_angles)
{
	static const int64_t dims[] = { 2, 8, 64 };

	for (int style = 0; style < 2; style++) {
		const char *op = style ? "rope_neox" : "rope_gptj";
		for (int k = 0; k < 3; k++) {
			for (int w = 0; w < 3; w++) {
				for (int v = 0; v < 3; v++) {
					tk_dtype dt = tt_float_dtypes[k];
					uint64_t rng = 0xefu + (uint64_t)(k * 31 + w * 7 + v);
					tk_call c;
					build(&c, dt, 4, dims[w], v == 1 ? 3 : 0, v, &rng);
					tk_tensor q0 =
					        tt_tensor(dt, 3, c.in[0].shape, v == 1 ? 3 : 0);
					tk_tensor k0 =
					        tt_tensor(dt, 3, c.in[1].shape, v == 1 ? 5 : 0);
					memcpy(q0.data, c.in[0].data, tt_span_bytes(&q0));
					memcpy(k0.data, c.in[1].data, tt_span_bytes(&k0));
					double *wq = ref_want(&q0), *wk = ref_want(&k0);
					rope_ref(&q0, wq, style, c.params[0].v.i, &c);
					rope_ref(&k0, wk, style, c.params[0].v.i, &c);
					ref_run(op, &c);
					cr_expect_leq(tt_rel_err(&c.in[0], wq), ref_tol(dt),
					              "%s q %s D %ld v %d", op, tk_dtype_name(dt),
					              (long)dims[w], v);
					cr_expect_leq(tt_rel_err(&c.in[1], wk), ref_tol(dt),
					              "%s k %s D %ld v %d", op, tk_dtype_name(dt),
					              (long)dims[w], v);
					free(wq);
					free(wk);
					tt_free(&q0);
					tt_free(&k0);
					ref_free_call(&c);
				}
			}
		}
	}
}

Test(rope, both_accept_no_tokens)
{
	static const char *const ops[] = { "rope_neox", "rope_gptj" };

	for (int o = 0; o < 2; o++) {
		uint64_t rng = 1;
		tk_call c;
		build(&c, TK_F32, 0, 8, 0, 0, &rng);
		cr_expect_eq(ref_entry(ops[o])->cpu(&c), TK_OK, "%s on 0 tokens", ops[o]);
		ref_free_call(&c);
	}
}
