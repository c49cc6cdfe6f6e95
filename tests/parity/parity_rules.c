/*
 * parity_rules.c - what the parity harness must know of an op beyond its
 * manifest entry: the domain its float inputs are drawn from, scale rules
 * for workloads the generic halving cannot bring within the CPU budget,
 * and tolerances. Inputs with structure (positions, slots, lengths, block
 * tables, sequence offsets, a given scale) follow the rules of
 * tools/workload/workload_inputs.h, by their names.
 *
 * An op with no row here gets inputs in [-3, 3], the generic scaling and
 * the tolerance of its output dtype. The smoke self-check fails for an op
 * whose integer input no rule writes (naming tools/workload), or whose
 * workload no rule can scale (naming this file).
 *
 * Tolerances (norm-wise relative error ||gpu - cpu|| / ||cpu|| over the
 * logical elements; NaN and infinities must match exactly):
 *   f32 1e-5: the kernels compute in f32 as the references do, in another
 *     order (tree reductions, fused multiply-adds, exp and log of the
 *     CUDA math library within 2 ulp): a few ulp of 2^-24 spread over a
 *     tensor stays below 1e-6, a row sum of thousands of terms near 1e-5.
 *   f16 1e-3: one rounding of an f32 result to f16 (half an ulp, 2^-11)
 *     that the two sides place on either side of a tie, or an
 *     intermediate the kernel keeps in f32 and the reference rounds,
 *     costs at most an ulp (2^-10 ~ 9.8e-4) on the elements concerned.
 *   bf16 1.6e-2: the same with bf16's 8-bit mantissa: two ulp of 2^-7.
 *   fp8 e4m3, i32, i64, u8: exact. Indices are exact by definition; fp8
 *     codes are round-to-nearest-even of x times one f32 reciprocal that
 *     both sides form the same way (kernels/quantization/quant_fp8.c), so
 *     a different code is a bug, and one e4m3 step (6 to 12 %) would make
 *     any tolerance meaningless.
 *   Exact also: amax and max pooling (a maximum is one of its inputs),
 *     the fp8 scales (amax / 448 in f32 on both sides), kv_cache_append
 *     (a copy) and spin (x + 1 in f32).
 *   gemm_fp8 and bmm_fp8: by c's dtype (the products are exact and both
 *     sides promote the same f32 sums per 128-wide K block).
 *   gemm and bmm: f32 1e-5, f16 2e-3, bf16 1e-2, times sqrt(K / 4096) past
 *     K = 4096 (f32 accumulation error of a K-term dot product grows so;
 *     the reference accumulates in double).
 *   attention outputs: f16 5e-3, bf16 2e-2 (the softmax weights are
 *     rounded to the dtype before the second product, as in
 *     FlashAttention); lse (f32) within 2e-3 of the reference, element by
 *     element.
 */
#include "parity/parity.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- budgets of the scale rules ------------------------------------------------------ */

/* gemm: about 0.5 s of the reference's double loop; 16 MB of bf16 weights. */
#define GEMM_FLOPS ((double)(1 << 28))
#define GEMM_ELEMS ((int64_t)1 << 23)
/* attention: the same for the double loops over keys and values. */
#define ATTN_FLOPS ((double)(1 << 28))
#define ATTN_ELEMS ((int64_t)1 << 23)

static int over(const parity_case *c, double max_flops, int64_t max_elems, char *err, size_t errlen,
                int *refused)
{
	double f = parity_flops(c, err, errlen);
	int64_t e = f < 0.0 ? -1 : parity_max_elems(c, err, errlen);

	*refused = f < 0.0 || e < 0;
	return !*refused && (f > max_flops || e > max_elems);
}

static int64_t half(int64_t v)
{
	return (v + 1) / 2;
}

/* ---- gemm family ---------------------------------------------------------------------- */

static void gemm_set(parity_case *c, int64_t m, int64_t n, int64_t k, int tb)
{
	parity_set_dim(c, "a", 0, m);
	parity_set_dim(c, "a", 1, k);
	parity_set_dim(c, "b", 0, tb ? n : k);
	parity_set_dim(c, "b", 1, tb ? k : n);
	parity_set_dim(c, "bias", 0, n);
	parity_set_dim(c, "residual", 0, m);
	parity_set_dim(c, "residual", 1, n);
}

static int scale_gemm(parity_case *c, char *err, size_t errlen)
{
	int tb = parity_param_num(c, "trans_b") != 0.0, refused = 0;
	int64_t m = parity_dim(c, "a", 0), k = parity_dim(c, "a", 1);
	int64_t n = parity_dim(c, "b", tb ? 0 : 1);

	if (m > 128)
		m = 256;
	gemm_set(c, m, n, k, tb);
	while (over(c, GEMM_FLOPS, GEMM_ELEMS, err, errlen, &refused)) {
		if (n > 256)
			n = half(n);
		else if (k > 1024)
			k = half(k);
		else if (m > 1)
			m = half(m);
		else if (n > 1)
			n = half(n);
		else
			k = half(k);
		gemm_set(c, m, n, k, tb);
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "gemm: M above 128 set to 256 (still past the small-M kernels), then N "
	         "halved down to 256, K down to 1024, then M, until 2MNK <= 2^28 and every "
	         "tensor <= 2^23 elements");
	return refused ? -1 : 0;
}

static void bmm_set(parity_case *c, int64_t b, int64_t m, int64_t n, int64_t k, int tb)
{
	parity_set_dim(c, "a", 0, b);
	parity_set_dim(c, "a", 1, m);
	parity_set_dim(c, "a", 2, k);
	parity_set_dim(c, "b", 0, b);
	parity_set_dim(c, "b", 1, tb ? n : k);
	parity_set_dim(c, "b", 2, tb ? k : n);
}

static int scale_bmm(parity_case *c, char *err, size_t errlen)
{
	int tb = parity_param_num(c, "trans_b") != 0.0, refused = 0;
	int64_t b = parity_dim(c, "a", 0), m = parity_dim(c, "a", 1), k = parity_dim(c, "a", 2);
	int64_t n = parity_dim(c, "b", tb ? 1 : 2);

	while (over(c, GEMM_FLOPS, GEMM_ELEMS, err, errlen, &refused)) {
		if (b > 4)
			b = half(b);
		else if (m > 128)
			m = half(m);
		else if (n > 256)
			n = half(n);
		else if (k > 256)
			k = half(k);
		else if (b > 1)
			b = half(b);
		else
			m = half(m);
		bmm_set(c, b, m, n, k, tb);
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "bmm: the batch halved down to 4, then M down to 128, N down to 256, K down "
	         "to 256, until 2BMNK <= 2^28 and every tensor <= 2^23 elements");
	return refused ? -1 : 0;
}

static parity_tol tol_gemm(const parity_run *r, int tensor)
{
	const tk_tensor *a = &r->t[0];
	int64_t k = a->shape[a->ndim - 1];
	tk_dtype dt = r->t[tensor].dtype;
	double t = dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 2e-3 : 1e-2;

	return (parity_tol){ .rel = k > 4096 ? t * sqrt((double)k / 4096.0) : t };
}

/* ---- gemm_fp8 family ------------------------------------------------------------------ */

/* A quarter of gemm's budget: the family has 120 workloads. */
#define FP8_FLOPS ((double)(1 << 26))

static int64_t cdiv(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

static void fp8_set(parity_case *c, int layout, int64_t m, int64_t n, int64_t k)
{
	parity_set_dim(c, "a", 0, m);
	parity_set_dim(c, "a", 1, k);
	parity_set_dim(c, "b", 0, n);
	parity_set_dim(c, "b", 1, k);
	parity_set_dim(c, "bias", 0, n);
	parity_set_dim(c, "residual", 0, m);
	parity_set_dim(c, "residual", 1, n);
	if (layout == 0)
		return;
	parity_set_dim(c, "a_scale", 0, m);
	parity_set_dim(c, "a_scale", 1, layout == 1 ? 1 : cdiv(k, 128));
	parity_set_dim(c, "b_scale", 0, layout == 1 ? n : cdiv(n, 128));
	parity_set_dim(c, "b_scale", 1, layout == 1 ? 1 : cdiv(k, 128));
}

static int scale_gemm_fp8(parity_case *c, char *err, size_t errlen)
{
	int layout = (int)parity_param_num(c, "scale_layout"), refused = 0;
	int64_t m = parity_dim(c, "a", 0), k = parity_dim(c, "a", 1), n = parity_dim(c, "b", 0);

	if (m > 128)
		m = 300;
	fp8_set(c, layout, m, n, k);
	while (over(c, FP8_FLOPS, GEMM_ELEMS, err, errlen, &refused)) {
		if (n > 256)
			n = half(n);
		else if (k > 512 && (k / 2) % 16 == 0)
			k /= 2;
		else if (m > 1)
			m = half(m);
		else
			break;
		fp8_set(c, layout, m, n, k);
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "gemm_fp8: M above 128 set to 300 (past the decode kernels, not a multiple of "
	         "the tiles), then N halved down to 256 (partial 128-blocks kept), K down to 512 "
	         "while a multiple of 16, then M, until 2MNK <= 2^26; scales follow the shapes");
	return refused ? -1 : 0;
}

static int scale_bmm_fp8(parity_case *c, char *err, size_t errlen)
{
	int64_t b = parity_dim(c, "a", 0), m = parity_dim(c, "a", 1), k = parity_dim(c, "a", 2);
	int64_t n = parity_dim(c, "b", 1);
	int refused = 0;

	while (over(c, FP8_FLOPS, GEMM_ELEMS, err, errlen, &refused)) {
		if (b > 4)
			b = half(b);
		else if (m > 16)
			m = half(m);
		else
			break;
		parity_set_dim(c, "a", 0, b);
		parity_set_dim(c, "a", 1, m);
		parity_set_dim(c, "b", 0, b);
		if (parity_dim(c, "a_scale", 0) > 1)
			parity_set_dim(c, "a_scale", 0, b);
		if (parity_dim(c, "b_scale", 0) > 1)
			parity_set_dim(c, "b_scale", 0, b);
	}
	(void)k;
	(void)n;
	snprintf(c->scaling, sizeof(c->scaling),
	         "bmm_fp8: the batch halved down to 4 (per-batch scales with it), then M down "
	         "to 16, until 2BMNK <= 2^26");
	return refused ? -1 : 0;
}

/* Codes in [-3, 3]; the scales (inputs 2 and 3) positive, as quantization gives them. */
static void range_gemm_fp8(int input, double *lo, double *hi)
{
	if (input == 2 || input == 3) {
		*lo = 0.01;
		*hi = 0.2;
	}
}

/*
 * rms_norm_quant_fp8: the scales within an f32 ulp or two (the mean square
 * is summed in another order), the codes norm-wise within 1e-3, which
 * a few codes one e4m3 step apart in a row of thousands stay under.
 */
static parity_tol tol_rms_quant(const parity_run *r, int tensor)
{
	return (parity_tol){ .rel = r->t[tensor].dtype == TK_F32 ? 1e-6 : 1e-3 };
}

/* ---- attention family ------------------------------------------------------------------ */

/* Halve the kv heads (dim hd; the q heads with them: the GQA group stays) down to 2. */
static int halve_heads(parity_case *c, const char *q, const char *k, const char *v, int hd)
{
	int64_t hq = parity_dim(c, q, hd), hk = parity_dim(c, k, hd);

	if (hk <= 2 || hk % 2 || hq % 2)
		return 0;
	parity_set_dim(c, q, hd, hq / 2);
	parity_set_dim(c, k, hd, hk / 2);
	parity_set_dim(c, v, hd, hk / 2);
	return 1;
}

static int scale_prefill(parity_case *c, char *err, size_t errlen)
{
	int refused = 0;

	parity_set_dim(c, "q", 0, 1);
	parity_set_dim(c, "k", 0, 1);
	parity_set_dim(c, "v", 0, 1);
	while (over(c, ATTN_FLOPS, ATTN_ELEMS, err, errlen, &refused)) {
		if (halve_heads(c, "q", "k", "v", -2))
			continue;
		int64_t s = parity_dim(c, "q", 1), skv = parity_dim(c, "k", 1);
		if (s <= 1 && skv <= 1)
			break;
		parity_set_dim(c, "q", 1, half(s));
		parity_set_dim(c, "k", 1, half(skv));
		parity_set_dim(c, "v", 1, half(skv));
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "attention_prefill: batch 1, kv heads halved down to 2 with the q heads "
	         "(the GQA group kept), then the query and key lengths halved together, to "
	         "2^28 flops and 2^23 elements a tensor; head dims kept");
	return refused ? -1 : 0;
}

static int scale_prefill_varlen(parity_case *c, char *err, size_t errlen)
{
	int refused = 0;

	while (over(c, ATTN_FLOPS, ATTN_ELEMS, err, errlen, &refused)) {
		if (halve_heads(c, "q", "k", "v", -2))
			continue;
		int64_t tq = parity_dim(c, "q", 0), tk = parity_dim(c, "k", 0);
		int64_t mq = (int64_t)parity_param_num(c, "max_seqlen_q");
		if (tq <= 1 && tk <= 1)
			break;
		parity_set_dim(c, "q", 0, half(tq));
		parity_set_dim(c, "k", 0, half(tk));
		parity_set_dim(c, "v", 0, half(tk));
		if (mq > 0)
			parity_param_int(c, "max_seqlen_q", half(mq));
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "attention_prefill_varlen: the sequences kept, kv heads halved down to 2 "
	         "with the q heads, then the packed lengths and max_seqlen_q halved together, "
	         "to 2^28 flops and 2^23 elements a tensor");
	return refused ? -1 : 0;
}

static void decode_set_batch(parity_case *c, int64_t b)
{
	parity_set_dim(c, "q", 0, b);
	parity_set_dim(c, "seq_lens", 0, b);
	if (parity_tensor_index(c, "block_tables") >= 0 && parity_dim(c, "block_tables", 0) > 0) {
		parity_set_dim(c, "block_tables", 0, b);
	} else {
		parity_set_dim(c, "k_cache", 0, b);
		parity_set_dim(c, "v_cache", 0, b);
	}
}

static int scale_decode(parity_case *c, char *err, size_t errlen)
{
	int refused = 0;

	if (parity_dim(c, "q", 0) > 4)
		decode_set_batch(c, 4);
	while (over(c, ATTN_FLOPS, ATTN_ELEMS, err, errlen, &refused)) {
		int64_t l = parity_dim(c, "k_cache", 1), b = parity_dim(c, "q", 0);
		if (l > 256) {
			parity_set_dim(c, "k_cache", 1, half(l));
			parity_set_dim(c, "v_cache", 1, half(l));
		} else if (b > 1) {
			decode_set_batch(c, half(b));
		} else if (!halve_heads(c, "q", "k_cache", "v_cache", -2)) {
			break;
		}
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "attention_decode: batch 4 at most, then the cache length halved down to "
	         "256, to 2^28 flops and 2^23 elements a tensor; heads, head dim and new "
	         "tokens kept");
	return refused ? -1 : 0;
}

static int scale_decode_paged(parity_case *c, char *err, size_t errlen)
{
	int64_t b0 = parity_dim(c, "q", 0), mp0 = parity_dim(c, "block_tables", 1);
	int64_t np0 = parity_dim(c, "k_cache", 0), b = b0 > 4 ? 4 : b0, mp = mp0;
	int refused = 0;

	for (;;) {
		/* Pages in proportion to the table's slots, as the workload has them. */
		int64_t np = (np0 * b * mp + b0 * mp0 - 1) / (b0 * mp0);
		decode_set_batch(c, b);
		parity_set_dim(c, "block_tables", 1, mp);
		parity_set_dim(c, "k_cache", 0, np > 0 ? np : 1);
		parity_set_dim(c, "v_cache", 0, np > 0 ? np : 1);
		if (!over(c, ATTN_FLOPS, ATTN_ELEMS, err, errlen, &refused))
			break;
		if (mp > 1)
			mp = half(mp);
		else if (b > 1)
			b = half(b);
		else
			break;
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "attention_decode_paged: batch 4 at most, then the table's pages a "
	         "sequence halved, the pool of pages shrunk in proportion, to 2^28 flops "
	         "and 2^23 elements a tensor; page size, heads and head dim kept");
	return refused ? -1 : 0;
}

static parity_tol tol_attention(const parity_run *r, int tensor)
{
	if (!strcmp(r->c->op->tensors[tensor].name, "lse"))
		return (parity_tol){ .abs = 2e-3 };
	return (parity_tol){ .rel = r->t[tensor].dtype == TK_F16 ? 5e-3 : 2e-2 };
}

/* ---- domains -------------------------------------------------------------------------- */

static void range_div(int input, double *lo, double *hi)
{
	if (input == 1) {
		*lo = 0.5;
		*hi = 2.5;
	}
}

static void range_pow(int input, double *lo, double *hi)
{
	*lo = 0.5;
	*hi = input == 1 ? 2.5 : 3.0;
}

/* ---- the rules ---------------------------------------------------------------------------- */

/* ---- moe family ----------------------------------------------------------------------- */

/*
 * The grouped GEMMs' shapes hang together (P = T*k + E*(block_m - 1)), so
 * they are set as one: N (I for gate-up) halved down to 64, K to 256, E to
 * 4, then the routed rows, each time with P and the blocks made anew.
 */
static void moe_gemm_set(parity_case *c, int64_t t, int64_t tk, int64_t e, int64_t n, int64_t k,
                         int64_t bm)
{
	int64_t p = tk + e * (bm - 1);

	parity_set_dim(c, "x", 0, parity_param_num(c, "top_k") > 0 ? t : p);
	parity_set_dim(c, "x", 1, k);
	parity_set_dim(c, "w", 0, e);
	parity_set_dim(c, "w", 1, n);
	parity_set_dim(c, "w", 2, k);
	parity_set_dim(c, "sorted_ids", 0, p);
	parity_set_dim(c, "expert_ids", 0, (p + bm - 1) / bm);
}

static int scale_moe_gemm(parity_case *c, char *err, size_t errlen)
{
	int64_t bm = (int64_t)parity_param_num(c, "block_m"),
	        top_k = (int64_t)parity_param_num(c, "top_k");
	int64_t e = parity_dim(c, "w", 0), n = parity_dim(c, "w", 1), k = parity_dim(c, "w", 2);
	int64_t p = parity_dim(c, "sorted_ids", 0), tk = p - e * (bm - 1);
	int64_t t = top_k > 0 ? parity_dim(c, "x", 0) : tk, step = top_k > 0 ? 2 : 1;
	int gate_up = !strcmp(c->op->name, "moe_gate_up"), refused = 0;

	while (over(c, GEMM_FLOPS, GEMM_ELEMS, err, errlen, &refused)) {
		if (n > 64 * step)
			n = gate_up ? half(n / 2) * 2 : half(n);
		else if (k > 256)
			k = half(k);
		else if (e > 4)
			e = half(e);
		else if (t > 1)
			t = half(t);
		else
			break;
		moe_gemm_set(c, t, top_k > 0 ? t * top_k : t, e, n, k, bm);
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "moe gemm: N halved down to 64, K to 256, experts to 4, then the tokens, with "
	         "P = T*k + E*(block_m - 1) kept");
	return refused ? -1 : 0;
}

static void moe_unpermute_set(parity_case *c, int64_t p, int64_t h, int64_t t, int64_t k)
{
	parity_set_dim(c, "y", 0, p);
	parity_set_dim(c, "y", 1, h);
	parity_set_dim(c, "inv", 0, t * k);
	parity_set_dim(c, "topk_weights", 0, t);
	parity_set_dim(c, "shared", 0, t);
	parity_set_dim(c, "shared", 1, h);
}

static int scale_moe_unpermute(parity_case *c, char *err, size_t errlen)
{
	int64_t p = parity_dim(c, "y", 0), h = parity_dim(c, "y", 1);
	int64_t t = parity_dim(c, "topk_weights", 0), k = parity_dim(c, "topk_weights", 1);
	int refused = 0;

	while (over(c, PARITY_MAX_FLOPS, PARITY_MAX_ELEMS, err, errlen, &refused)) {
		if (h > 256)
			h = half(h);
		else if (t > 1)
			t = half(t), p = half(p);
		else if (p > 1)
			p = half(p);
		else
			break;
		moe_unpermute_set(c, p, h, t, k);
	}
	snprintf(c->scaling, sizeof(c->scaling),
	         "moe_unpermute: H halved down to 256, then the tokens and the rows of y");
	return refused ? -1 : 0;
}

static const parity_rule rules[] = {
	/* elementwise: domains */
	{ .op = "log", .lo = 0.1, .hi = 4.0 },
	{ .op = "sqrt", .lo = 0.1, .hi = 4.0 },
	{ .op = "rsqrt", .lo = 0.1, .hi = 4.0 },
	{ .op = "reciprocal", .lo = 0.1, .hi = 4.0 },
	{ .op = "div", .range = range_div },
	{ .op = "pow", .range = range_pow },
	/*
	 * reduction: positive, so a sum is well conditioned and the error
	 * measures the kernel's accumulation (over [-3, 3] a row can sum to
	 * nearly zero); small, so that the widest row's sum stays within f16.
	 */
	{ .op = "sum", .lo = 1.0 / 64.0, .hi = 0.25 },
	{ .op = "mean", .lo = 1.0 / 64.0, .hi = 0.25 },
	{ .op = "amax", .exact = 1 },
	/* pool */
	{ .op = "max_pool1d", .exact = 1 },
	{ .op = "max_pool2d", .exact = 1 },
	{ .op = "max_pool3d", .exact = 1 },
	/* quantization */
	{ .op = "quant_fp8_per_tensor", .exact = 1 },
	{ .op = "quant_fp8_per_token", .exact = 1 },
	/* diagnostic */
	{ .op = "spin", .exact = 1 },
	{ .op = "fault",
	  .skip = "it fails on purpose, on both backends (tests/kernels/test_diagnostic.c and the "
	          "daemon's device-fault tests check how)" },
	/* gemm */
	{ .op = "gemm", .scale = scale_gemm, .lo = -1.0, .hi = 1.0, .tol = tol_gemm },
	{ .op = "bmm", .scale = scale_bmm, .lo = -1.0, .hi = 1.0, .tol = tol_gemm },
	/* gemm_fp8 and the quantizations that feed it */
	{ .op = "gemm_fp8", .scale = scale_gemm_fp8, .range = range_gemm_fp8 },
	{ .op = "bmm_fp8", .scale = scale_bmm_fp8, .range = range_gemm_fp8 },
	{ .op = "quant_fp8_per_token_group", .exact = 1 },
	{ .op = "rms_norm_quant_fp8", .tol = tol_rms_quant },
	/* attention: q, k and v in [-1, 1] keep the softmax spread over many keys */
	{ .op = "attention_prefill",
	  .scale = scale_prefill,
	  .lo = -1.0,
	  .hi = 1.0,
	  .tol = tol_attention },
	{ .op = "attention_prefill_varlen",
	  .scale = scale_prefill_varlen,
	  .lo = -1.0,
	  .hi = 1.0,
	  .tol = tol_attention },
	{ .op = "attention_decode",
	  .scale = scale_decode,
	  .lo = -1.0,
	  .hi = 1.0,
	  .tol = tol_attention },
	{ .op = "attention_decode_paged",
	  .scale = scale_decode_paged,
	  .lo = -1.0,
	  .hi = 1.0,
	  .tol = tol_attention },
	{ .op = "kv_cache_append", .exact = 1 },
	/* indexing: copies; sampling: tokens, the same on both backends by design */
	{ .op = "embedding", .exact = 1 },
	{ .op = "gather_rows", .exact = 1 },
	{ .op = "sample", .exact = 1 },
	/* moe: ids and the layout exact; the GEMMs in gemm's tolerance */
	{ .op = "moe_route" },
	{ .op = "moe_align", .exact = 1 },
	{ .op = "moe_grouped_gemm",
	  .scale = scale_moe_gemm,
	  .lo = -1.0,
	  .hi = 1.0,
	  .tol = tol_gemm },
	{ .op = "moe_gate_up", .scale = scale_moe_gemm, .lo = -1.0, .hi = 1.0, .tol = tol_gemm },
	{ .op = "moe_unpermute", .scale = scale_moe_unpermute },
};

const parity_rule *parity_rule_of(const char *op)
{
	static const parity_rule none = { .op = "" };

	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (!strcmp(rules[i].op, op))
			return &rules[i];
	return &none;
}

parity_tol parity_tolerance(const parity_run *r, int tensor)
{
	const parity_rule *rule = parity_rule_of(r->c->op->name);
	tk_dtype dt = r->t[tensor].dtype;

	if (rule->exact || r->c->exact || (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16))
		return (parity_tol){ .exact = 1 };
	if (r->c->rel_tol > 0.0)
		return (parity_tol){ .rel = r->c->rel_tol };
	if (rule->tol)
		return rule->tol(r, tensor);
	return (parity_tol){ .rel = dt == TK_F32 ? 1e-5 : dt == TK_F16 ? 1e-3 : 1.6e-2 };
}
