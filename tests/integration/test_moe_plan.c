/*
 * test_moe_plan.c - a whole MoE block (moe_route, moe_align, moe_gate_up,
 * moe_grouped_gemm, moe_unpermute) as one plan through a running tileopsd
 * (the backend under test): captured once, replayed with two different gate
 * logits written between the runs. The routing lives in the plan's tensors,
 * so each replay must route anew: both routings equal the CPU references run
 * here in-process on the same inputs, both outputs equal theirs within f32
 * rounding (the GPU sums in another order), and the two routings (and
 * outputs) differ.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"
#include "tk_internal.h"

enum {
	T = 6,
	H = 16,
	I = 8,
	E = 8,
	K = 2,
	BM = 16,
	P = T * K + E * (BM - 1),
	NB = (P + BM - 1) / BM
};

static tk_tensor host(tk_dtype dt, int ndim, const int64_t *shape)
{
	tk_tensor t;
	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		t.shape[d] = shape[d];
	tk_set_contiguous(&t);
	t.data = calloc((size_t)tk_numel(&t), tk_dtype_size(dt));
	cr_assert_not_null(t.data);
	return t;
}

/* The block on the CPU references: out [T, H] and the routing ids [T, K]. */
static void reference(const float *x, const float *w13, const float *w2, const float *lg,
                      float *out, int32_t *ids)
{
	int64_t s_lg[2] = { T, E }, s_k[2] = { T, K }, s_p[1] = { P }, s_nb[1] = { NB },
	        s_1[1] = { 1 };
	int64_t s_tk[1] = { T * K }, s_x[2] = { T, H }, s_w13[3] = { E, 2 * I, H };
	int64_t s_w2[3] = { E, H, I }, s_h[2] = { P, I }, s_y[2] = { P, H };
	tk_tensor tl = host(TK_F32, 2, s_lg), ti = host(TK_I32, 2, s_k), tw = host(TK_F32, 2, s_k);
	tk_tensor ts = host(TK_I32, 1, s_p), te = host(TK_I32, 1, s_nb), tn = host(TK_I32, 1, s_1);
	tk_tensor tv = host(TK_I32, 1, s_tk), tx = host(TK_F32, 2, s_x),
	          t13 = host(TK_F32, 3, s_w13);
	tk_tensor t2 = host(TK_F32, 3, s_w2), th = host(TK_F32, 2, s_h), ty = host(TK_F32, 2, s_y);
	tk_tensor to = host(TK_F32, 2, s_x);
	memcpy(tl.data, lg, sizeof(float) * T * E);
	memcpy(tx.data, x, sizeof(float) * T * H);
	memcpy(t13.data, w13, sizeof(float) * E * 2 * I * H);
	memcpy(t2.data, w2, sizeof(float) * E * H * I);

	tk_call c;
	memset(&c, 0, sizeof(c));
	c.n_in = 1, c.n_out = 2, c.n_params = 6;
	c.in[0] = tl, c.out[0] = ti, c.out[1] = tw;
	c.params[0] = (tk_param){ TK_PARAM_INT, { .i = K } };
	c.params[1] = (tk_param){ TK_PARAM_BOOL, { .b = 0 } };
	c.params[2] = (tk_param){ TK_PARAM_BOOL, { .b = 1 } };
	c.params[3] = (tk_param){ TK_PARAM_INT, { .i = 1 } };
	c.params[4] = (tk_param){ TK_PARAM_INT, { .i = 1 } };
	c.params[5] = (tk_param){ TK_PARAM_FLOAT, { .f = 1.0 } };
	cr_assert_eq(tk_cpu_moe_route(&c), TK_OK);
	memset(&c, 0, sizeof(c));
	c.n_in = 1, c.n_out = 4, c.n_params = 2;
	c.in[0] = ti, c.out[0] = ts, c.out[1] = te, c.out[2] = tn, c.out[3] = tv;
	c.params[0] = (tk_param){ TK_PARAM_INT, { .i = E } };
	c.params[1] = (tk_param){ TK_PARAM_INT, { .i = BM } };
	cr_assert_eq(tk_cpu_moe_align(&c), TK_OK);
	memset(&c, 0, sizeof(c));
	c.n_in = 5, c.n_out = 1, c.n_params = 2;
	c.in[0] = tx, c.in[1] = t13, c.in[2] = ts, c.in[3] = te, c.in[4] = tn, c.out[0] = th;
	c.params[0] = (tk_param){ TK_PARAM_INT, { .i = BM } };
	c.params[1] = (tk_param){ TK_PARAM_INT, { .i = K } };
	cr_assert_eq(tk_cpu_moe_gate_up(&c), TK_OK);
	c.in[0] = th, c.in[1] = t2, c.out[0] = ty;
	c.params[1] = (tk_param){ TK_PARAM_INT, { .i = 0 } };
	cr_assert_eq(tk_cpu_moe_grouped_gemm(&c), TK_OK);
	memset(&c, 0, sizeof(c));
	c.n_in = 3, c.n_out = 1;
	c.in[0] = ty, c.in[1] = tv, c.in[2] = tw, c.out[0] = to;
	cr_assert_eq(tk_cpu_moe_unpermute(&c), TK_OK);
	memcpy(out, to.data, sizeof(float) * T * H);
	memcpy(ids, ti.data, sizeof(int32_t) * T * K);
	tk_tensor all[] = { tl, ti, tw, ts, te, tn, tv, tx, t13, t2, th, ty, to };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i].data);
}

Test(moe_plan, one_capture_serves_two_routings)
{
	tileops_client *c = th_connect("moe-plan", 0);
	th_rng r = th_rng_seed(33);
	static float x[T * H], w13[E * 2 * I * H], w2[E * H * I], lg[2][T * E];
	th_fill_f32(&r, x, T * H, -1.0f, 1.0f);
	th_fill_f32(&r, w13, E * 2 * I * H, -0.5f, 0.5f);
	th_fill_f32(&r, w2, E * H * I, -0.5f, 0.5f);
	th_fill_f32(&r, lg[0], T * E, -2.0f, 2.0f);
	for (int i = 0; i < T * E; i++) /* the second routing: the first one's experts reversed */
		lg[1][i] = lg[0][(i / E) * E + (E - 1 - i % E)];

	int64_t s_lg[2] = { T, E }, s_k[2] = { T, K }, s_p[1] = { P }, s_nb[1] = { NB },
	        s_1[1] = { 1 };
	int64_t s_tk[1] = { T * K }, s_x[2] = { T, H }, s_w13[3] = { E, 2 * I, H };
	int64_t s_w2[3] = { E, H, I }, s_h[2] = { P, I }, s_y[2] = { P, H };
	tileops_tensor tl = th_tensor(c, TILEOPS_F32, 2, s_lg),
	               ti = th_tensor(c, TILEOPS_I32, 2, s_k);
	tileops_tensor tw = th_tensor(c, TILEOPS_F32, 2, s_k),
	               ts = th_tensor(c, TILEOPS_I32, 1, s_p);
	tileops_tensor te = th_tensor(c, TILEOPS_I32, 1, s_nb),
	               tn = th_tensor(c, TILEOPS_I32, 1, s_1);
	tileops_tensor tv = th_tensor(c, TILEOPS_I32, 1, s_tk),
	               tx = th_tensor(c, TILEOPS_F32, 2, s_x);
	tileops_tensor t13 = th_tensor(c, TILEOPS_F32, 3, s_w13);
	tileops_tensor t2 = th_tensor(c, TILEOPS_F32, 3, s_w2),
	               th = th_tensor(c, TILEOPS_F32, 2, s_h);
	tileops_tensor ty = th_tensor(c, TILEOPS_F32, 2, s_y),
	               to = th_tensor(c, TILEOPS_F32, 2, s_x);
	th_write(c, tx, x, sizeof(x));
	th_write(c, t13, w13, sizeof(w13));
	th_write(c, t2, w2, sizeof(w2));

	tileops_param p_route[] = { tileops_param_int("top_k", K),
		                    tileops_param_bool("renormalize", 1) };
	tileops_param p_align[] = { tileops_param_int("num_experts", E),
		                    tileops_param_int("block_m", BM) };
	tileops_param p_gu[] = { tileops_param_int("block_m", BM), tileops_param_int("top_k", K) };
	tileops_param p_dn[] = { tileops_param_int("block_m", BM) };
	tileops_tensor r_out[] = { ti, tw }, a_out[] = { ts, te, tn, tv };
	tileops_tensor gu_in[] = { tx, t13, ts, te, tn }, dn_in[] = { th, t2, ts, te, tn };
	tileops_tensor up_in[] = { ty, tv, tw };
	tileops_op ops[] = {
		{ "moe_route", &tl, 1, r_out, 2, p_route, 2 },
		{ "moe_align", &ti, 1, a_out, 4, p_align, 2 },
		{ "moe_gate_up", gu_in, 5, &th, 1, p_gu, 2 },
		{ "moe_grouped_gemm", dn_in, 5, &ty, 1, p_dn, 1 },
		{ "moe_unpermute", up_in, 3, &to, 1, NULL, 0 },
	};
	tileops_plan *plan;
	cr_assert_eq(tileops_plan_begin(c, NULL, &plan), TILEOPS_OK, "%s", tileops_last_error());
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		cr_assert_eq(tileops_plan_add(plan, &ops[i]), TILEOPS_OK, "%s: %s", ops[i].name,
		             tileops_last_error());
	cr_assert_eq(tileops_plan_end(plan), TILEOPS_OK, "%s", tileops_last_error());

	static float got[2][T * H], want[2][T * H];
	int32_t gids[2][T * K], wids[2][T * K];
	for (int run = 0; run < 2; run++) {
		th_write(c, tl, lg[run], sizeof(lg[run]));
		cr_assert_eq(tileops_plan_run(plan, 0, NULL, 0), TILEOPS_OK, "%s",
		             tileops_last_error());
		th_read(c, to, got[run], sizeof(got[run]));
		th_read(c, ti, gids[run], sizeof(gids[run]));
		reference(x, w13, w2, lg[run], want[run], wids[run]);
		cr_assert_eq(memcmp(gids[run], wids[run], sizeof(gids[run])), 0, "run %d: routing",
		             run);
		/* The same sums in another order on the GPU: f32 rounding apart. */
		th_expect_close_f32(got[run], want[run], T * H, 1e-5f, 1e-4f,
		                    run ? "second routing's output" : "first routing's output");
	}
	cr_assert_neq(memcmp(wids[0], wids[1], sizeof(wids[0])), 0, "the two routings differ");
	cr_assert_neq(memcmp(want[0], want[1], sizeof(want[0])), 0, "and so do the outputs");
	tileops_plan_free(plan);
	tileops_close(c);
}
