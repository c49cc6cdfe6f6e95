/*
 * test_views.c - tensor views against the test daemon (CPU backend): the
 * q, k and v columns of one fused projection fed to rope and attention, a
 * gemm output read as heads, slices of rows, the bounds and alignment
 * checks, the order of frees, views in plans and bindings, layouts an op
 * refuses, and the session's memory counted once per allocation.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "integration/helpers.h"

#define T_ 6
#define HQ 4
#define HK 2
#define D_ 64                   /* a head size the CUDA kernels take (64, 128, 256) */
#define W_ ((HQ + 2 * HK) * D_) /* one token's row of the fused qkv output */

static tileops_tensor view(tileops_client *c, tileops_tensor base, size_t off, tileops_dtype dt,
                           int ndim, const int64_t *shape, const int64_t *strides)
{
	tileops_tensor v = 0;
	tileops_status st = tileops_tensor_view(c, base, off, dt, ndim, shape, strides, &v);
	cr_assert_eq(st, TILEOPS_OK, "tensor_view: %s", tileops_last_error());
	cr_assert_neq(v, 0);
	return v;
}

static void expect_refused(tileops_status st, tileops_status want, const char *words)
{
	cr_assert_eq(st, want, "status %d (%s), expected %d; message: %s", st, tileops_strerror(st),
	             want, tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), words), "message '%s' lacks '%s'",
	          tileops_last_error(), words);
}

static void fill_bf16(th_rng *r, uint16_t *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = th_f32_to_bf16(th_rng_float(r, -1.0f, 1.0f));
}

static void rope_op(tileops_op *op, tileops_tensor *in, tileops_param *p)
{
	*p = tileops_param_int("rotary_dim", D_);
	*op = (tileops_op){ "rope_neox", in, 3, NULL, 0, p, 1 };
}

static void attention_op(tileops_op *op, tileops_tensor *in, tileops_tensor *out, tileops_param *p)
{
	*p = tileops_param_bool("causal", 1);
	*op = (tileops_op){ "attention_prefill", in, 3, out, 1, p, 1 };
}

/* The packed tensors the views stand for, made from the same bytes. */
typedef struct qkv_case {
	uint16_t host[T_ * W_];
	tileops_tensor qkv, pos;
	tileops_tensor q3, k3;     /* [T, H, D] views for rope */
	tileops_tensor q4, k4, v4; /* [1, T, H, D] views for attention */
} qkv_case;

static const int64_t q3_shape[3] = { T_, HQ, D_ }, k3_shape[3] = { T_, HK, D_ };
static const int64_t rows3[3] = { W_, D_, 1 };
static const int64_t q4_shape[4] = { 1, T_, HQ, D_ }, k4_shape[4] = { 1, T_, HK, D_ };
static const int64_t rows4[4] = { T_ * W_, W_, D_, 1 };

static void qkv_setup(tileops_client *c, qkv_case *q, uint64_t seed)
{
	th_rng r = th_rng_seed(seed);
	int64_t qkv_shape[2] = { T_, W_ }, pos_shape[1] = { T_ };
	int32_t pos[T_];

	fill_bf16(&r, q->host, T_ * W_);
	for (int t = 0; t < T_; t++)
		pos[t] = t + 3;
	q->qkv = th_tensor(c, TILEOPS_BF16, 2, qkv_shape);
	th_write(c, q->qkv, q->host, sizeof(q->host));
	q->pos = th_tensor(c, TILEOPS_I32, 1, pos_shape);
	th_write(c, q->pos, pos, sizeof(pos));
	q->q3 = view(c, q->qkv, 0, TILEOPS_BF16, 3, q3_shape, rows3);
	q->k3 = view(c, q->qkv, HQ * D_ * 2, TILEOPS_BF16, 3, k3_shape, rows3);
	q->q4 = view(c, q->qkv, 0, TILEOPS_BF16, 4, q4_shape, rows4);
	q->k4 = view(c, q->qkv, HQ * D_ * 2, TILEOPS_BF16, 4, k4_shape, rows4);
	q->v4 = view(c, q->qkv, (HQ + HK) * D_ * 2, TILEOPS_BF16, 4, k4_shape, rows4);
}

/* Columns [col, col + n) of every token's row, packed. */
static void columns(const uint16_t *host, int col, int n, uint16_t *out)
{
	for (int t = 0; t < T_; t++)
		memcpy(out + t * n, host + t * W_ + col, sizeof(uint16_t) * (size_t)n);
}

/* rope then attention on packed copies: what the views must give. */
static void reference(tileops_client *c, const qkv_case *q, uint16_t *out_host)
{
	uint16_t qh[T_ * HQ * D_], kh[T_ * HK * D_], vh[T_ * HK * D_];
	int64_t qs[4] = { 1, T_, HQ, D_ }, ks[4] = { 1, T_, HK, D_ };

	columns(q->host, 0, HQ * D_, qh);
	columns(q->host, HQ * D_, HK * D_, kh);
	columns(q->host, (HQ + HK) * D_, HK * D_, vh);
	tileops_tensor qp = th_tensor(c, TILEOPS_BF16, 3, q3_shape);
	tileops_tensor kp = th_tensor(c, TILEOPS_BF16, 3, k3_shape);
	tileops_tensor vp = th_tensor(c, TILEOPS_BF16, 4, ks);
	tileops_tensor op_out = th_tensor(c, TILEOPS_BF16, 4, qs);
	th_write(c, qp, qh, sizeof(qh));
	th_write(c, kp, kh, sizeof(kh));
	th_write(c, vp, vh, sizeof(vh));
	tileops_tensor rin[3] = { qp, kp, q->pos };
	tileops_op op;
	tileops_param p;
	rope_op(&op, rin, &p);
	th_run(c, &op);
	tileops_tensor qv = view(c, qp, 0, TILEOPS_BF16, 4, qs, NULL);
	tileops_tensor kv = view(c, kp, 0, TILEOPS_BF16, 4, ks, NULL);
	tileops_tensor ain[3] = { qv, kv, vp };
	attention_op(&op, ain, &op_out, &p);
	th_run(c, &op);
	th_read(c, op_out, out_host, sizeof(uint16_t) * T_ * HQ * D_);
	tileops_tensor all[] = { qv, kv, qp, kp, vp, op_out };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		cr_assert_eq(tileops_tensor_free(c, all[i]), TILEOPS_OK);
}

Test(views, qkv_column_views_feed_rope_and_attention_as_packed_tensors_would)
{
	tileops_client *c = th_connect("views-qkv", 0);
	qkv_case q;
	uint16_t want[T_ * HQ * D_], got[T_ * HQ * D_], after[T_ * W_];
	int64_t os[4] = { 1, T_, HQ, D_ };

	qkv_setup(c, &q, 28);
	reference(c, &q, want);
	tileops_tensor out = th_tensor(c, TILEOPS_BF16, 4, os);
	tileops_tensor rin[3] = { q.q3, q.k3, q.pos };
	tileops_op op;
	tileops_param p;
	rope_op(&op, rin, &p);
	th_run(c, &op);
	tileops_tensor ain[3] = { q.q4, q.k4, q.v4 };
	attention_op(&op, ain, &out, &p);
	th_run(c, &op);
	th_read(c, out, got, sizeof(got));
	cr_assert(memcmp(got, want, sizeof(got)) == 0,
	          "attention over the views differs from attention over packed copies");
	/* rope rotated q and k in place and left v's columns alone. */
	th_read(c, q.qkv, after, sizeof(after));
	for (int t = 0; t < T_; t++) {
		cr_assert(memcmp(after + t * W_ + (HQ + HK) * D_, q.host + t * W_ + (HQ + HK) * D_,
		                 sizeof(uint16_t) * HK * D_) == 0,
		          "token %d: v changed", t);
		cr_assert(memcmp(after + t * W_, q.host + t * W_, sizeof(uint16_t) * HQ * D_) != 0,
		          "token %d: q was not rotated", t);
	}
	tileops_close(c);
}

Test(views, a_gemm_output_reshaped_as_heads_feeds_a_per_head_op)
{
	tileops_client *c = th_connect("views-reshape", 0);
	th_rng r = th_rng_seed(7);
	enum { M = T_, K = 32, N = HQ * D_ };
	float a[M * K], b[N * K], flat[M * N], want[M * N], got[M * N], w[D_];
	int64_t as[2] = { M, K }, bs[2] = { N, K }, os[2] = { M, N }, heads[3] = { M, HQ, D_ };
	int64_t ws[1] = { D_ };

	th_fill_f32(&r, a, M * K, -1, 1);
	th_fill_f32(&r, b, N * K, -1, 1);
	for (int i = 0; i < D_; i++)
		w[i] = 0.5f + (float)i / D_;
	tileops_tensor ta = th_tensor_f32(c, 2, as, a), tb = th_tensor_f32(c, 2, bs, b);
	tileops_tensor tw = th_tensor_f32(c, 1, ws, w);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 2, os);
	tileops_tensor in[2] = { ta, tb };
	tileops_param p = tileops_param_bool("trans_b", 1);
	tileops_op op = { "gemm", in, 2, &out, 1, &p, 1 };
	th_run(c, &op);
	th_read(c, out, flat, sizeof(flat));
	cr_assert(flat[0] != 0.0f || flat[1] != 0.0f, "the gemm wrote nothing");
	/* [M, N] as [M, heads, D]: the same bytes, normalized per head. */
	tileops_tensor hv = view(c, out, 0, TILEOPS_F32, 3, heads, NULL);
	tileops_tensor copy = th_tensor_f32(c, 3, heads, flat);
	tileops_tensor y1 = th_tensor(c, TILEOPS_F32, 3, heads);
	tileops_tensor y2 = th_tensor(c, TILEOPS_F32, 3, heads);
	tileops_tensor n1[2] = { hv, tw }, n2[2] = { copy, tw };
	tileops_op norm1 = { "rms_norm", n1, 2, &y1, 1, NULL, 0 };
	tileops_op norm2 = { "rms_norm", n2, 2, &y2, 1, NULL, 0 };
	th_run(c, &norm1);
	th_run(c, &norm2);
	th_read(c, y1, got, sizeof(got));
	th_read(c, y2, want, sizeof(want));
	cr_assert(memcmp(got, want, sizeof(got)) == 0, "the reshaped view normalized otherwise");
	tileops_close(c);
}

Test(views, a_slice_of_rows_reads_writes_and_feeds_an_op)
{
	tileops_client *c = th_connect("views-rows", 0);
	enum { R = 8, N = 64 };
	float host[R * N], w[N], got[R * N];
	int64_t shape[2] = { R, N }, ws[1] = { N }, slice[2] = { 4, N };
	th_rng r = th_rng_seed(3);

	th_fill_f32(&r, host, R * N, -2, 2);
	for (int i = 0; i < N; i++)
		w[i] = 1.0f;
	tileops_tensor x = th_tensor_f32(c, 2, shape, host);
	tileops_tensor tw = th_tensor_f32(c, 1, ws, w);
	tileops_tensor y = th_tensor(c, TILEOPS_F32, 2, shape);
	tileops_tensor xs = view(c, x, 2 * N * 4, TILEOPS_F32, 2, slice, NULL);
	tileops_tensor ys = view(c, y, 2 * N * 4, TILEOPS_F32, 2, slice, NULL);
	tileops_tensor in[2] = { xs, tw };
	tileops_op op = { "rms_norm", in, 2, &ys, 1, NULL, 0 };
	th_run(c, &op);
	th_read(c, y, got, sizeof(got));
	for (int i = 0; i < R; i++) {
		double ss = 0;
		for (int j = 0; j < N; j++)
			ss += (double)host[i * N + j] * host[i * N + j];
		for (int j = 0; j < N; j++) {
			float want = i >= 2 && i < 6
			                     ? (float)(host[i * N + j] / sqrt(ss / N + 1e-6))
			                     : 0.0f;
			cr_assert_float_eq(got[i * N + j], want, 1e-4, "row %d col %d", i, j);
		}
	}
	/* A write through the slice lands in rows 2..5 of its base only. */
	float ones[4 * N];
	for (int i = 0; i < 4 * N; i++)
		ones[i] = 1.0f;
	th_write(c, xs, ones, sizeof(ones));
	th_read(c, x, got, sizeof(got));
	for (int i = 0; i < R * N; i++)
		cr_assert_eq(got[i], i >= 2 * N && i < 6 * N ? 1.0f : host[i], "element %d", i);
	tileops_close(c);
}

Test(views, bounds_and_alignment_are_checked_against_the_base)
{
	tileops_client *c = th_connect("views-bounds", 0);
	int64_t shape[2] = { 4, 8 }, past[2] = { 4, 8 }, one[1] = { 1 }, wide[2] = { 4, 8 };
	int64_t wide_st[2] = { 9, 1 }, u8s[1] = { 127 }, four[1] = { 4 };
	tileops_tensor v = 0;
	tileops_tensor b = th_tensor(c, TILEOPS_F32, 2, shape); /* 128 bytes */

	/* Shifted by one element, the last one lies past the base. */
	expect_refused(tileops_tensor_view(c, b, 4, TILEOPS_F32, 2, past, NULL, &v),
	               TILEOPS_ERR_RANGE, "past the end of base");
	cr_assert(th_contains(tileops_last_error(), "128 bytes"), "%s", tileops_last_error());
	/* Rows 9 apart reach element 3 * 9 + 7 = 34 of 32. */
	expect_refused(tileops_tensor_view(c, b, 0, TILEOPS_F32, 2, wide, wide_st, &v),
	               TILEOPS_ERR_RANGE, "strides [9, 1]");
	expect_refused(tileops_tensor_view(c, b, 132, TILEOPS_F32, 0, one, NULL, &v),
	               TILEOPS_ERR_RANGE, "past the end");
	/* The last element exactly at the end is inside. */
	tileops_tensor last = view(c, b, 124, TILEOPS_F32, 1, one, NULL);
	/* Offsets a multiple of the dtype's size, here and in the daemon. */
	expect_refused(tileops_tensor_view(c, b, 2, TILEOPS_F32, 1, one, NULL, &v),
	               TILEOPS_ERR_INVALID_ARGUMENT, "multiple of f32's 4 bytes");
	tileops_tensor bytes = view(c, b, 1, TILEOPS_U8, 1, u8s, NULL);
	expect_refused(tileops_tensor_view(c, bytes, 4, TILEOPS_F32, 1, four, NULL, &v),
	               TILEOPS_ERR_INVALID_ARGUMENT, "byte 5 of the memory");
	/* A view of a view is bounded by the inner view. */
	expect_refused(tileops_tensor_view(c, last, 0, TILEOPS_F32, 1, four, NULL, &v),
	               TILEOPS_ERR_RANGE, "4 bytes end");
	int64_t neg[1] = { -1 };
	expect_refused(tileops_tensor_view(c, b, 0, TILEOPS_F32, 1, one, neg, &v),
	               TILEOPS_ERR_INVALID_ARGUMENT, "stride 0 is -1");
	expect_refused(tileops_tensor_view(c, 999999, 0, TILEOPS_F32, 1, one, NULL, &v),
	               TILEOPS_ERR_UNKNOWN_HANDLE, "tensor_view");
	cr_assert_eq(v, 0, "a refused view wrote its out-parameter");
	tileops_close(c);
}

Test(views, a_view_keeps_its_memory_after_the_base_is_freed)
{
	tileops_client *c = th_connect("views-free", 0);
	int64_t shape[1] = { 16 }, half[1] = { 8 };
	float host[16], got[8], w[8];
	th_rng r = th_rng_seed(5);

	th_fill_f32(&r, host, 16, -1, 1);
	/* Base first. */
	tileops_tensor b = th_tensor_f32(c, 1, shape, host);
	tileops_tensor v = view(c, b, 8 * 4, TILEOPS_F32, 1, half, NULL);
	cr_assert_eq(tileops_tensor_free(c, b), TILEOPS_OK);
	th_read(c, v, got, sizeof(got));
	cr_assert(memcmp(got, host + 8, sizeof(got)) == 0, "the view lost its bytes");
	/* An op through the view after its base is gone. */
	for (int i = 0; i < 8; i++)
		w[i] = 2.0f;
	tileops_tensor tw = th_tensor_f32(c, 1, half, w);
	tileops_tensor in[2] = { v, tw };
	tileops_op op = { "mul", in, 2, &v, 1, NULL, 0 };
	th_run(c, &op);
	th_read(c, v, got, sizeof(got));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(got[i], host[8 + i] * 2.0f);
	/* The base's own handle is gone. */
	float x;
	expect_refused(tileops_tensor_read(c, b, 0, &x, 4), TILEOPS_ERR_UNKNOWN_HANDLE,
	               "already freed");
	tileops_tensor ib[2] = { b, tw };
	op.inputs = ib;
	expect_refused(tileops_op_run(c, &op), TILEOPS_ERR_UNKNOWN_HANDLE, "not a tensor");
	cr_assert_eq(tileops_tensor_free(c, v), TILEOPS_OK);
	expect_refused(tileops_tensor_read(c, v, 0, &x, 4), TILEOPS_ERR_UNKNOWN_HANDLE,
	               "already freed");
	/* View first. */
	b = th_tensor_f32(c, 1, shape, host);
	v = view(c, b, 0, TILEOPS_F32, 1, half, NULL);
	cr_assert_eq(tileops_tensor_free(c, v), TILEOPS_OK);
	th_read(c, b, got, sizeof(got));
	cr_assert(memcmp(got, host, sizeof(got)) == 0);
	cr_assert_eq(tileops_tensor_free(c, b), TILEOPS_OK);
	tileops_close(c);
}

Test(views, the_session_counts_an_allocation_once_until_its_last_view_goes)
{
	tileops_client *c = th_connect("views-bytes", 0);
	int64_t shape[1] = { 1024 }, part[1] = { 256 };
	/* Counts of the daemon's, relative to what the test found once the
	 * sessions of the tests before it are gone. */
	(void)th_stat_wait("sessions", 1, TH_TIMEOUT_MS);
	double b0 = th_stat("bytes_in_use"), n0 = th_stat("tensors");

	tileops_tensor b = th_tensor(c, TILEOPS_F32, 1, shape);
	cr_assert_eq(th_stat("bytes_in_use") - b0, 4096);
	tileops_tensor v[3];
	for (int i = 0; i < 3; i++)
		v[i] = view(c, b, (size_t)i * 1024, TILEOPS_F32, 1, part, NULL);
	tileops_tensor vv = view(c, v[2], 0, TILEOPS_F32, 1, part, NULL);
	cr_assert_eq(th_stat("bytes_in_use") - b0, 4096, "views were counted as memory");
	cr_assert_eq(th_stat("tensors") - n0, 5);
	cr_assert_eq(tileops_tensor_free(c, b), TILEOPS_OK);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(tileops_tensor_free(c, v[i]), TILEOPS_OK);
	cr_assert_eq(th_stat("bytes_in_use") - b0, 4096, "the memory went while a view holds it");
	cr_assert_eq(tileops_tensor_free(c, vv), TILEOPS_OK);
	cr_assert_eq(th_stat("bytes_in_use"), b0);
	cr_assert_eq(th_stat("tensors"), n0);
	/* Session close frees what views still hold. */
	b = th_tensor(c, TILEOPS_F32, 1, shape);
	(void)view(c, b, 0, TILEOPS_F32, 1, part, NULL);
	cr_assert_eq(tileops_tensor_free(c, b), TILEOPS_OK);
	tileops_close(c);
	cr_assert_eq(th_stat_wait("bytes_in_use", b0, TH_TIMEOUT_MS), b0);
	cr_assert_eq(th_stat_wait("tensors", n0, TH_TIMEOUT_MS), n0);
}

Test(views, layouts_an_op_cannot_take_are_refused_naming_op_and_tensor)
{
	tileops_client *c = th_connect("views-layout", 0);
	int64_t shape[2] = { 4, 8 }, ws[1] = { 8 }, tr[2] = { 1, 4 }, col[2] = { 4, 1 };
	int64_t col_st[2] = { 2, 1 }, half[2] = { 4, 4 }, pair_st[2] = { 8, 1 };
	float ones[8] = { 1, 1, 1, 1, 1, 1, 1, 1 };

	tileops_tensor x = th_tensor(c, TILEOPS_F32, 2, shape);
	tileops_tensor y = th_tensor(c, TILEOPS_F32, 2, shape);
	tileops_tensor w = th_tensor_f32(c, 1, ws, ones);
	/* A transpose: rows of stride 1, columns 4 apart. */
	int64_t tshape[2] = { 8, 4 };
	tileops_tensor xt = view(c, x, 0, TILEOPS_F32, 2, tshape, tr);
	tileops_tensor yt = view(c, y, 0, TILEOPS_F32, 2, tshape, tr);
	tileops_tensor in[2] = { xt, w };
	tileops_op op = { "rms_norm", in, 2, &yt, 1, NULL, 0 };
	expect_refused(tileops_op_run(c, &op), TILEOPS_ERR_SHAPE,
	               "rms_norm: x must be a contiguous tensor or row-strided");
	cr_assert(th_contains(tileops_last_error(), "strides [1, 4]"), "%s", tileops_last_error());
	/* Row strides are fine for rms_norm: half of each row. */
	int64_t w4s[1] = { 4 };
	tileops_tensor w4 = th_tensor_f32(c, 1, w4s, ones);
	tileops_tensor xh = view(c, x, 0, TILEOPS_F32, 2, half, pair_st);
	tileops_tensor yh = view(c, y, 0, TILEOPS_F32, 2, half, pair_st);
	tileops_tensor hin[2] = { xh, w4 };
	tileops_op ok = { "rms_norm", hin, 2, &yh, 1, NULL, 0 };
	th_run(c, &ok);
	/* A tensor its kernels need packed: the per-token scale. */
	int64_t ss[2] = { 8, 1 };
	tileops_tensor scale_base = th_tensor(c, TILEOPS_F32, 2, ss);
	tileops_tensor scale = view(c, scale_base, 0, TILEOPS_F32, 2, col, col_st);
	tileops_tensor q = th_tensor(c, TILEOPS_FP8_E4M3, 2, shape);
	tileops_tensor outs[2] = { q, scale };
	tileops_op quant = { "quant_fp8_per_token", &x, 1, outs, 2, NULL, 0 };
	expect_refused(tileops_op_run(c, &quant), TILEOPS_ERR_SHAPE,
	               "quant_fp8_per_token: scale must be a contiguous (packed row-major)");
	/* Copies of a view with gaps are refused: the gaps are other bytes. */
	float buf[16];
	expect_refused(tileops_tensor_read(c, xh, 0, buf, sizeof(buf)),
	               TILEOPS_ERR_INVALID_ARGUMENT, "gaps between its elements");
	expect_refused(tileops_tensor_write(c, xh, 0, buf, sizeof(buf)),
	               TILEOPS_ERR_INVALID_ARGUMENT, "copy through its base");
	tileops_close(c);
}

Test(views, views_work_as_plan_tensors_and_in_bindings)
{
	tileops_client *c = th_connect("views-plan", 0);
	qkv_case q;
	uint16_t want[T_ * HQ * D_], got[T_ * HQ * D_];
	int64_t os[4] = { 1, T_, HQ, D_ };
	tileops_plan *p = NULL;
	tileops_op op;
	tileops_param rp, ap;

	qkv_setup(c, &q, 29);
	reference(c, &q, want);
	tileops_tensor out = th_tensor(c, TILEOPS_BF16, 4, os);
	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
	tileops_tensor rin[3] = { q.q3, q.k3, q.pos };
	rope_op(&op, rin, &rp);
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	tileops_tensor ain[3] = { q.q4, q.k4, q.v4 };
	attention_op(&op, ain, &out, &ap);
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_OK, "%s", tileops_last_error());
	th_read(c, out, got, sizeof(got));
	cr_assert(memcmp(got, want, sizeof(got)) == 0, "the plan over views differs");

	/* Bound: a second fused buffer's views in place of the first's. */
	qkv_case q2;
	uint16_t want2[T_ * HQ * D_];
	qkv_setup(c, &q2, 30);
	reference(c, &q2, want2);
	tileops_binding b[5] = {
		{ q.q3, q2.q3 }, { q.k3, q2.k3 }, { q.q4, q2.q4 }, { q.k4, q2.k4 }, { q.v4, q2.v4 }
	};
	cr_assert_eq(tileops_plan_run(p, 0, b, 5), TILEOPS_OK, "%s", tileops_last_error());
	th_read(c, out, got, sizeof(got));
	cr_assert(memcmp(got, want2, sizeof(got)) == 0, "the bound views were not used");

	/* A view of the same shape with a layout rope cannot take: refused at
	 * the run, and the plan keeps its bindings. */
	int64_t bad_st[3] = { D_, T_ * D_, 1 }; /* tokens and heads swapped */
	tileops_tensor big = th_tensor(c, TILEOPS_BF16, 3, q3_shape);
	tileops_tensor odd = view(c, big, 0, TILEOPS_BF16, 3, q3_shape, bad_st);
	tileops_binding bad = { q.q3, odd };
	expect_refused(tileops_plan_run(p, 0, &bad, 1), TILEOPS_ERR_SHAPE,
	               "q must be a contiguous tensor or row-strided");
	cr_assert(th_contains(tileops_last_error(), "plan op 0"), "%s", tileops_last_error());
	/* Packed tensors bind in place of views too (same dtype and shape). */
	int64_t k3s[3] = { T_, HK, D_ };
	tileops_tensor kp = th_tensor(c, TILEOPS_BF16, 3, k3s);
	tileops_binding packed = { q.k3, kp };
	cr_assert_eq(tileops_plan_run(p, 0, &packed, 1), TILEOPS_OK, "%s", tileops_last_error());
	tileops_plan_free(p);
	tileops_close(c);
}

Test(views, a_wrong_count_of_strides_is_a_protocol_level_refusal)
{
	th_raw r;
	th_raw_open(&r);
	th_raw_hello(&r, 1 << 20);
	int64_t shape[1] = { 8 };
	Tileops__Reply *rep = th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape);
	cr_assert_not_null(rep);
	uint64_t base = rep->tensor_create->handle;
	tileops__reply__free_unpacked(rep, NULL);

	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorView tv = TILEOPS__TENSOR_VIEW__INIT;
	int64_t vshape[2] = { 2, 2 }, strides[1] = { 1 };
	tv.base_tensor = base;
	tv.dtype = TILEOPS__DTYPE__DTYPE_F32;
	tv.n_shape = 2;
	tv.shape = vshape;
	tv.n_strides = 1;
	tv.strides = strides;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_VIEW;
	req.tensor_view = &tv;
	rep = th_raw_call(&r, &req);
	cr_assert_not_null(rep);
	cr_assert_eq(rep->status, TILEOPS__STATUS__STATUS_INVALID_ARGUMENT, "%s", rep->message);
	cr_assert(th_contains(rep->message, "1 strides for 2 dimensions"), "%s", rep->message);
	tileops__reply__free_unpacked(rep, NULL);
	/* The same view with its strides is answered with its span. */
	int64_t two[2] = { 2, 1 };
	tv.n_strides = 2;
	tv.strides = two;
	rep = th_raw_call(&r, &req);
	cr_assert_not_null(rep);
	cr_assert_eq(rep->status, TILEOPS__STATUS__STATUS_OK, "%s", rep->message);
	cr_assert_eq(rep->body_case, TILEOPS__REPLY__BODY_TENSOR_VIEW);
	cr_assert_eq(rep->tensor_view->nbytes, 16, "a [2, 2] view of rows 2 apart spans 4 floats");
	tileops__reply__free_unpacked(rep, NULL);
	th_raw_close(&r);
}
