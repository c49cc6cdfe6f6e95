/*
 * test_llm_ops.c - the matrix and attention ops through a running tileopsd,
 * on whichever backend the fixture daemon runs: gemm with a residual and
 * the bias left out (handle 0), in place on its residual; bmm; the paged
 * KV cache filled by kv_cache_append and read by attention_decode_paged;
 * attention_prefill with its optional lse output given or omitted; products
 * whose weights the op just before them wrote. Every result is compared
 * with a reference computed here on the host.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

static tileops_client *client;

static void setup(void)
{
	client = th_connect("llm-ops", 0);
}

static void teardown(void)
{
	tileops_close(client);
}

TestSuite(llm, .init = setup, .fini = teardown, .timeout = 60);

static int64_t numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

/* A bf16 tensor holding random values; *host gets them as floats (rounded). */
static tileops_tensor bf16_random(int ndim, const int64_t *shape, th_rng *r, float **host)
{
	size_t n = (size_t)numel(ndim, shape);
	uint16_t *bits = malloc(n * sizeof(uint16_t));
	float *f = malloc(n * sizeof(float));
	cr_assert(bits && f);
	for (size_t i = 0; i < n; i++) {
		bits[i] = th_f32_to_bf16(th_rng_float(r, -1.0f, 1.0f));
		f[i] = th_bf16_to_f32(bits[i]);
	}
	tileops_tensor t = th_tensor(client, TILEOPS_BF16, ndim, shape);
	th_write(client, t, bits, n * sizeof(uint16_t));
	free(bits);
	*host = f;
	return t;
}

static tileops_tensor i32_tensor(int ndim, const int64_t *shape, const int32_t *v)
{
	tileops_tensor t = th_tensor(client, TILEOPS_I32, ndim, shape);
	th_write(client, t, v, (size_t)numel(ndim, shape) * sizeof(int32_t));
	return t;
}

/* Norm-wise relative error of got against want. */
static double rel_err(const float *got, const float *want, size_t n)
{
	double d = 0.0, w = 0.0;
	for (size_t i = 0; i < n; i++) {
		d += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
		w += (double)want[i] * want[i];
	}
	return sqrt(d / (w > 0.0 ? w : 1.0));
}

/* ---- gemm and bmm ------------------------------------------------------ */

enum { GM = 5, GN = 3, GK = 7 };

/* want = a [m, k] b^T (b [n, k]) (+ r [m, n] when given), in double. */
static void matmul_nt_ref(const float *a, const float *b, const float *r, int m, int n, int k,
                          float *want)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double acc = 0.0;
			for (int e = 0; e < k; e++)
				acc += (double)a[i * k + e] * b[j * k + e];
			want[i * n + j] = (float)acc + (r ? r[i * n + j] : 0.0f);
		}
}

/* want = a [GM, GK] b^T (b [GN, GK]) + r [GM, GN]. */
static void gemm_nt_ref(const float *a, const float *b, const float *r, float *want)
{
	matmul_nt_ref(a, b, r, GM, GN, GK, want);
}

Test(llm, gemm_adds_a_residual_with_the_bias_left_out)
{
	th_rng r = th_rng_seed(11);
	const int64_t sa[] = { GM, GK }, sb[] = { GN, GK }, sc[] = { GM, GN };
	float a[GM * GK], b[GN * GK], res[GM * GN], want[GM * GN];
	th_fill_f32(&r, a, GM * GK, -1.0f, 1.0f);
	th_fill_f32(&r, b, GN * GK, -1.0f, 1.0f);
	th_fill_f32(&r, res, GM * GN, -1.0f, 1.0f);
	tileops_tensor in[4] = { th_tensor_f32(client, 2, sa, a), th_tensor_f32(client, 2, sb, b),
		                 0, th_tensor_f32(client, 2, sc, res) };
	tileops_tensor c = th_tensor_f32(client, 2, sc, NULL);
	tileops_param p = tileops_param_bool("trans_b", 1);
	tileops_op op = { "gemm", in, 4, &c, 1, &p, 1 };

	th_run(client, &op);
	gemm_nt_ref(a, b, res, want);
	float *got = th_read_f32(client, c, GM * GN);
	th_expect_close_f32(got, want, GM * GN, 1e-5f, 1e-4f, "gemm + residual");
	free(got);

	/* In place: the residual is the output. */
	in[3] = c;
	float before[GM * GN];
	th_read(client, c, before, sizeof(before));
	th_run(client, &op);
	gemm_nt_ref(a, b, before, want);
	got = th_read_f32(client, c, GM * GN);
	th_expect_close_f32(got, want, GM * GN, 1e-5f, 1e-4f, "gemm + residual in place");
	free(got);
}

Test(llm, a_required_input_left_out_is_refused_by_name)
{
	const int64_t sa[] = { GM, GK }, sc[] = { GM, GN };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sa, NULL), 0 };
	tileops_tensor c = th_tensor_f32(client, 2, sc, NULL);
	tileops_op op = { "gemm", in, 2, &c, 1, NULL, 0 };

	tileops_status st = tileops_op_run(client, &op);
	cr_assert_eq(st, TILEOPS_ERR_INVALID_ARGUMENT, "status %d: %s", st, tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "input b is required but was left out"), "%s",
	          tileops_last_error());
}

Test(llm, bmm_multiplies_each_batch)
{
	enum { B = 3, M = 4, K = 5, N = 6 };
	th_rng r = th_rng_seed(12);
	const int64_t sa[] = { B, M, K }, sb[] = { B, K, N }, sc[] = { B, M, N };
	float a[B * M * K], b[B * K * N], want[B * M * N];
	th_fill_f32(&r, a, B * M * K, -1.0f, 1.0f);
	th_fill_f32(&r, b, B * K * N, -1.0f, 1.0f);
	tileops_tensor in[2] = { th_tensor_f32(client, 3, sa, a), th_tensor_f32(client, 3, sb, b) };
	tileops_tensor c = th_tensor_f32(client, 3, sc, NULL);
	tileops_param p = tileops_param_float("alpha", 0.5);
	tileops_op op = { "bmm", in, 2, &c, 1, &p, 1 };

	th_run(client, &op);
	for (int z = 0; z < B; z++)
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double acc = 0.0;
				for (int k = 0; k < K; k++)
					acc += (double)a[(z * M + i) * K + k] *
					       b[(z * K + k) * N + j];
				want[(z * M + i) * N + j] = (float)(0.5 * acc);
			}
	float *got = th_read_f32(client, c, B * M * N);
	th_expect_close_f32(got, want, B * M * N, 1e-5f, 1e-4f, "bmm");
	free(got);
}

/* ---- attention ---------------------------------------------------------- */

enum { HQ = 4, HKV = 2, D = 64 };

/* One query row against n keys/values (rows of HKV * D floats, head h). */
static void attend(const float *q, const float *k, const float *v, int n, int h, float scale,
                   float *out)
{
	double *s = malloc((size_t)(n > 0 ? n : 1) * sizeof(double)), mx = -INFINITY, sum = 0.0;
	cr_assert_not_null(s);
	for (int j = 0; j < n; j++) {
		double acc = 0.0;
		for (int d = 0; d < D; d++)
			acc += (double)q[d] * k[((size_t)j * HKV + h) * D + d];
		s[j] = acc * scale;
		mx = s[j] > mx ? s[j] : mx;
	}
	for (int j = 0; j < n; j++)
		sum += (s[j] = exp(s[j] - mx));
	for (int d = 0; d < D; d++) {
		double acc = 0.0;
		for (int j = 0; j < n; j++)
			acc += s[j] * v[((size_t)j * HKV + h) * D + d];
		out[d] = n > 0 ? (float)(acc / sum) : 0.0f;
	}
	free(s);
}

Test(llm, appended_tokens_are_read_back_by_paged_decode)
{
	enum { B = 2, PAGE = 16, PAGES = 6, MAXP = 3, T = 37 };
	const int lens[B] = { 33, 4 };
	/* Sequence 0 owns pages 4, 1, 5 (not in order); sequence 1 page 2. */
	const int32_t table[B * MAXP] = { 4, 1, 5, 2, 0, 0 };
	th_rng r = th_rng_seed(13);
	const int64_t snew[] = { T, HKV, D }, sslot[] = { T }, scache[] = { PAGES, PAGE, HKV, D };
	const int64_t sq[] = { B, HQ, D }, stab[] = { B, MAXP }, slen[] = { B };
	int32_t slots[T], seq_lens[B] = { lens[0], lens[1] };
	float *kn, *vn, *q, *kz, *vz;

	/* Token t of sequence b goes to its page table[b][t / PAGE] at t % PAGE. */
	for (int t = 0; t < T; t++) {
		int b = t < lens[0] ? 0 : 1, pos = b ? t - lens[0] : t;
		slots[t] = table[b * MAXP + pos / PAGE] * PAGE + pos % PAGE;
	}
	tileops_tensor k = bf16_random(3, snew, &r, &kn), v = bf16_random(3, snew, &r, &vn);
	tileops_tensor kc = bf16_random(4, scache, &r, &kz), vc = bf16_random(4, scache, &r, &vz);
	tileops_tensor in_app[5] = { k, v, i32_tensor(1, sslot, slots), kc, vc };
	tileops_op append = { "kv_cache_append", in_app, 5, NULL, 0, NULL, 0 };
	th_run(client, &append);

	tileops_tensor qt = bf16_random(3, sq, &r, &q);
	tileops_tensor in_dec[5] = { qt, kc, vc, i32_tensor(2, stab, table),
		                     i32_tensor(1, slen, seq_lens) };
	tileops_tensor out = th_tensor(client, TILEOPS_BF16, 3, sq);
	tileops_op decode = { "attention_decode_paged", in_dec, 5, &out, 1, NULL, 0 };
	th_run(client, &decode);

	float want[B * HQ * D];
	for (int b = 0; b < B; b++) {
		const float *kb = kn + (size_t)(b ? lens[0] : 0) * HKV * D;
		const float *vb = vn + (size_t)(b ? lens[0] : 0) * HKV * D;
		for (int h = 0; h < HQ; h++)
			attend(q + (b * HQ + h) * D, kb, vb, lens[b], h / (HQ / HKV),
			       1.0f / sqrtf((float)D), want + (b * HQ + h) * D);
	}
	float *got = th_read_bf16(client, out, B * HQ * D);
	double e = rel_err(got, want, B * HQ * D);
	cr_assert_lt(e, 2e-2, "paged decode after append: relative error %g", e);
	free(got);
	free(kn), free(vn), free(q), free(kz), free(vz);
}

Test(llm, prefill_is_causal_and_its_lse_output_is_optional)
{
	enum { S = 33 };
	th_rng r = th_rng_seed(14);
	const int64_t sq[] = { 1, S, HQ, D }, skv[] = { 1, S, HKV, D }, slse[] = { 1, HQ, S };
	float *q, *k, *v;
	tileops_tensor in[3] = { bf16_random(4, sq, &r, &q), bf16_random(4, skv, &r, &k),
		                 bf16_random(4, skv, &r, &v) };
	tileops_tensor outs[2] = { th_tensor(client, TILEOPS_BF16, 4, sq),
		                   th_tensor(client, TILEOPS_F32, 3, slse) };
	tileops_param p = tileops_param_bool("causal", 1);
	tileops_op op = { "attention_prefill", in, 3, outs, 2, &p, 1 };
	th_run(client, &op);

	float *want = malloc(sizeof(float) * S * HQ * D);
	cr_assert_not_null(want);
	for (int i = 0; i < S; i++)
		for (int h = 0; h < HQ; h++)
			attend(q + (i * HQ + h) * D, k, v, i + 1, h / (HQ / HKV),
			       1.0f / sqrtf((float)D), want + (i * HQ + h) * D);
	float *got = th_read_bf16(client, outs[0], S * HQ * D);
	double e = rel_err(got, want, S * HQ * D);
	cr_assert_lt(e, 2e-2, "causal prefill: relative error %g", e);

	/* The first query sees one key: its lse is that key's scaled score. */
	float *lse = th_read_f32(client, outs[1], HQ * S);
	for (int h = 0; h < HQ; h++) {
		double s = 0.0;
		for (int d = 0; d < D; d++)
			s += (double)q[h * D + d] * k[(h / (HQ / HKV)) * D + d];
		cr_assert_float_eq(lse[h * S], s / sqrt((double)D), 1e-3, "lse of head %d", h);
	}

	/* Without lse (one output), the same out. */
	tileops_tensor out2 = th_tensor(client, TILEOPS_BF16, 4, sq);
	op.outputs = &out2;
	op.n_outputs = 1;
	th_run(client, &op);
	float *got2 = th_read_bf16(client, out2, S * HQ * D);
	cr_assert_eq(memcmp(got, got2, sizeof(float) * S * HQ * D), 0,
	             "leaving lse out changes nothing else");
	free(got), free(got2), free(lse), free(want), free(q), free(k), free(v);
}

/* ---- a decode step as a plan ------------------------------------------- */

/* The caches, tables and per-step tensors of one decode step. */
typedef struct step {
	tileops_tensor k, v, slots, kc, vc, table, lens, q, out, y;
} step;

enum { SB = 2, SPAGE = 16, SPAGES = 8, SMAXP = 4, SHID = HQ * D };

static void step_make(step *s, uint64_t seed)
{
	th_rng r = th_rng_seed(seed);
	const int64_t snew[] = { SB, HKV, D }, scache[] = { SPAGES, SPAGE, HKV, D };
	const int64_t sq[] = { SB, HQ, D }, stab[] = { SB, SMAXP }, sb[] = { SB };
	const int32_t table[SB * SMAXP] = { 3, 0, 6, 1, 5, 2, 7, 4 };
	float *f;

	s->k = bf16_random(3, snew, &r, &f), free(f);
	s->v = bf16_random(3, snew, &r, &f), free(f);
	s->kc = bf16_random(4, scache, &r, &f), free(f);
	s->vc = bf16_random(4, scache, &r, &f), free(f);
	s->q = bf16_random(3, sq, &r, &f), free(f);
	s->y = th_tensor(client, TILEOPS_BF16, 3, sq);
	s->table = i32_tensor(2, stab, table);
	s->slots = th_tensor(client, TILEOPS_I32, 1, sb);
	s->lens = th_tensor(client, TILEOPS_I32, 1, sb);
	s->out = th_tensor(client, TILEOPS_BF16, 3, sq);
}

/* Sequence b is `len` tokens long after appending its token at len - 1. */
static void step_position(const step *s, const int32_t len[SB])
{
	const int32_t table[SB * SMAXP] = { 3, 0, 6, 1, 5, 2, 7, 4 };
	int32_t slots[SB];

	for (int b = 0; b < SB; b++) {
		int pos = len[b] - 1;
		slots[b] = table[b * SMAXP + pos / SPAGE] * SPAGE + pos % SPAGE;
	}
	th_write(client, s->slots, slots, sizeof(slots));
	th_write(client, s->lens, len, sizeof(int32_t) * SB);
}

/* append, attend, then an op on the attention's output (y = silu(out)). */
static void step_ops(const step *s, tileops_op ops[3], tileops_tensor in[3][5])
{
	tileops_tensor app[5] = { s->k, s->v, s->slots, s->kc, s->vc };
	tileops_tensor dec[5] = { s->q, s->kc, s->vc, s->table, s->lens };

	memcpy(in[0], app, sizeof(app));
	memcpy(in[1], dec, sizeof(dec));
	in[2][0] = s->out;
	ops[0] = (tileops_op){ "kv_cache_append", in[0], 5, NULL, 0, NULL, 0 };
	ops[1] = (tileops_op){ "attention_decode_paged", in[1], 5, &s->out, 1, NULL, 0 };
	ops[2] = (tileops_op){ "silu", in[2], 1, &s->y, 1, NULL, 0 };
}

Test(llm, a_decode_step_as_a_plan_matches_its_ops_one_by_one_as_lengths_grow)
{
	step one, planned;
	tileops_op ops[3], pops[3];
	tileops_tensor in[3][5], pin[3][5];
	tileops_plan *p = NULL;

	/* The same seed: the same contents in both. */
	step_make(&one, 15);
	step_make(&planned, 15);
	step_ops(&one, ops, in);
	step_ops(&planned, pops, pin);
	int32_t len[SB] = { 20, 31 }; /* sequence 1 crosses into its third page */
	step_position(&planned, len);
	cr_assert_eq(tileops_plan_begin(client, NULL, &p), TILEOPS_OK, "%s", tileops_last_error());
	for (int i = 0; i < 3; i++)
		cr_assert_eq(tileops_plan_add(p, &pops[i]), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_end(p), TILEOPS_OK, "%s", tileops_last_error());

	/* Three steps: the lengths (device data) grow, the plan is not rebuilt. */
	for (int step_i = 0; step_i < 3; step_i++, len[0]++, len[1]++) {
		step_position(&one, len);
		step_position(&planned, len);
		for (int i = 0; i < 3; i++)
			th_run(client, &ops[i]);
		cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_OK, "%s",
		             tileops_last_error());
		uint16_t a[SB * SHID], b[SB * SHID], k[SPAGES * SPAGE * HKV * D];
		th_read(client, one.y, a, sizeof(a));
		th_read(client, planned.y, b, sizeof(b));
		cr_assert_eq(memcmp(a, b, sizeof(a)), 0,
		             "step %d: the plan's output differs from the ops run one by one",
		             step_i);
		th_read(client, planned.kc, k, sizeof(k));
		uint16_t k1[SPAGES * SPAGE * HKV * D];
		th_read(client, one.kc, k1, sizeof(k1));
		cr_assert_eq(memcmp(k, k1, sizeof(k)), 0,
		             "step %d: the plan appended to other slots than the ops did", step_i);
	}
	tileops_plan_free(p);
}

/* ---- weights written just before their product ------------------------ */

enum { WM = 64, WN = 256, WK = 512, WROUNDS = 4 };

/*
 * The ops of one round: w1 = -w0, c = x w1^T, w0 = -w1, d = x w0^T. t[i]
 * holds op i's tensors, inputs then the output; they outlive the ops.
 */
static void weight_round_ops(tileops_tensor x, tileops_tensor w0, tileops_tensor w1,
                             tileops_tensor c, tileops_tensor d, tileops_tensor t[4][3],
                             tileops_op ops[4], const tileops_param *p)
{
	const tileops_tensor tensors[4][3] = {
		{ w0, w1, 0 }, { x, w1, c }, { w1, w0, 0 }, { x, w0, d }
	};
	memcpy(t, tensors, sizeof(tensors));
	for (int i = 0; i < 4; i++) {
		int prod = i & 1, n_in = prod ? 2 : 1;
		tileops_op o = { prod ? "gemm" : "neg", t[i],          (size_t)n_in, &t[i][n_in], 1,
			         prod ? p : NULL,       prod ? 1u : 0u };
		ops[i] = o;
	}
}

/* Every c of the rounds holds -x w^T and every d x w^T. */
static void expect_signed_products(tileops_tensor *c, tileops_tensor *d, const float *x,
                                   const float *w, const char *how)
{
	float *want = malloc(sizeof(float) * WM * WN), *got = malloc(sizeof(float) * WM * WN);
	uint16_t *bits = malloc(sizeof(uint16_t) * WM * WN);
	cr_assert(want && got && bits);
	matmul_nt_ref(x, w, NULL, WM, WN, WK, want);
	for (int r = 0; r < 2 * WROUNDS; r++) {
		th_read(client, r & 1 ? d[r / 2] : c[r / 2], bits, sizeof(uint16_t) * WM * WN);
		for (int e = 0; e < WM * WN; e++)
			got[e] = (r & 1 ? 1.0f : -1.0f) * th_bf16_to_f32(bits[e]);
		double rel = rel_err(got, want, WM * WN);
		cr_assert_lt(rel, 1e-2, "%s, round %d, %s: relative error %.3g against the host",
		             how, r / 2, r & 1 ? "x w^T" : "-x w^T", rel);
	}
	free(want);
	free(got);
	free(bits);
}

/*
 * With programmatic dependent launch a product's CTAs start while the
 * kernel before it still runs, and must wait for it before they read its
 * weights as much as its activations. Here the op just before each product
 * writes the product's weights (neg, flipping their sign), with nothing
 * waited on between the ops, four rounds in a row, run op by op and as a
 * plan: every product must see the weights as written.
 */
Test(llm, a_gemm_reads_the_weights_the_op_just_before_it_wrote)
{
	th_rng r = th_rng_seed(23);
	const int64_t sx[] = { WM, WK }, sw[] = { WN, WK }, sc[] = { WM, WN };
	float *x, *w;
	tileops_tensor tx = bf16_random(2, sx, &r, &x), tw0 = bf16_random(2, sw, &r, &w);
	tileops_tensor tw1 = th_tensor(client, TILEOPS_BF16, 2, sw);
	tileops_tensor c[WROUNDS], d[WROUNDS], t[WROUNDS][4][3];
	tileops_op ops[WROUNDS][4];
	tileops_param p = tileops_param_bool("trans_b", 1);

	for (int i = 0; i < WROUNDS; i++) {
		c[i] = th_tensor(client, TILEOPS_BF16, 2, sc);
		d[i] = th_tensor(client, TILEOPS_BF16, 2, sc);
		weight_round_ops(tx, tw0, tw1, c[i], d[i], t[i], ops[i], &p);
	}
	for (int i = 0; i < WROUNDS; i++)
		for (int j = 0; j < 4; j++)
			th_run(client, &ops[i][j]);
	expect_signed_products(c, d, x, w, "op by op");

	tileops_plan *plan = NULL;
	cr_assert_eq(tileops_plan_begin(client, NULL, &plan), TILEOPS_OK, "%s",
	             tileops_last_error());
	for (int i = 0; i < WROUNDS; i++)
		for (int j = 0; j < 4; j++)
			cr_assert_eq(tileops_plan_add(plan, &ops[i][j]), TILEOPS_OK, "%s",
			             tileops_last_error());
	cr_assert_eq(tileops_plan_end(plan), TILEOPS_OK, "%s", tileops_last_error());
	for (int run = 0; run < 3; run++) {
		cr_assert_eq(tileops_plan_run(plan, 0, NULL, 0), TILEOPS_OK, "%s",
		             tileops_last_error());
		expect_signed_products(c, d, x, w, run ? "a plan's replay" : "a plan's first run");
	}
	tileops_plan_free(plan);
	free(x);
	free(w);
}
