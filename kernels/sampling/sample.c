/*
 * sample.c - the CPU reference of sample: one token per row of logits
 * [B, V]. Inputs: logits, then the optional per-row tensors temperatures
 * (f32), top_ks (i32), top_ps (f32), min_ps (f32), seeds (i64), offsets
 * (i64), each [B]. Params: 0 temperature, 1 top_k, 2 top_p, 3 min_p,
 * 4 seed, 5 offset. Output: out [B], i32 or i64.
 *
 * The definitions are sample_math.h's. This reference follows them the
 * plain way: the weights of a row, min-p as a mask, then a sort of the
 * survivors in the op's order for top-k and top-p, then a walk in index
 * order to the token whose running weight passes the random draw. The CUDA
 * kernel finds the same cut-offs by radix selection instead of a sort; the
 * two agree token for token.
 */
#include <stdlib.h>

#include "cpu_util.h"
#include "sample_math.h"

enum { IN_LOGITS, IN_TEMP, IN_TOPK, IN_TOPP, IN_MINP, IN_SEEDS, IN_OFFSETS, IN_COUNT };

/* A per-row input of dtype dt and shape [B], or NULL when not given; *bad on a mismatch. */
static const tk_tensor *row_input(const tk_call *call, int i, tk_dtype dt, int64_t b_rows, int *bad)
{
	if (!tk_has_input(call, i))
		return NULL;
	const tk_tensor *t = &call->in[i];
	if (t->dtype != dt || t->ndim != 1 || t->shape[0] != b_rows)
		*bad = 1;
	return t;
}

static float row_f32(const tk_tensor *t, int64_t b, float dflt)
{
	return t ? ((const float *)t->data)[b * t->stride[0]] : dflt;
}

static int64_t row_i64(const tk_tensor *t, int64_t b, int64_t dflt)
{
	if (!t)
		return dflt;
	if (t->dtype == TK_I32)
		return ((const int32_t *)t->data)[b * t->stride[0]];
	return ((const int64_t *)t->data)[b * t->stride[0]];
}

/* An int param's 64 bits (a double would drop those past 2^53). */
static uint64_t param_bits(const tk_call *call, int i)
{
	if (i < call->n_params && call->params[i].kind == TK_PARAM_INT)
		return (uint64_t)call->params[i].v.i;
	return (uint64_t)(int64_t)tk_param_num(call, i, 0.0);
}

/* Sort keys: the op's order is these keys descending (z descending, index ascending). */
static uint64_t order_key(uint32_t ord, int64_t i)
{
	return ((uint64_t)ord << 32) | (uint64_t)(0xffffffffu - (uint32_t)i);
}

static int key_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : (x > y ? -1 : 0);
}

/* Scratch of one row: canonical logits, weights, the order's keys, a keep mask. */
typedef struct row_scratch {
	float *z;
	uint64_t *q, *keys;
	unsigned char *keep;
} row_scratch;

static int64_t sample_row(const tk_tensor *lg, int64_t b, const tks_row *s, row_scratch *w)
{
	int64_t V = lg->shape[1], first = 0, n1 = 0;
	float m = 0.0f;
	uint32_t best = 0;

	for (int64_t i = 0; i < V; i++) {
		w->z[i] = tks_canon(cpu_load(lg->data, lg->dtype, b * lg->stride[0] + i));
		uint32_t o = tks_ord(w->z[i]);
		if (i == 0 || o > best) {
			best = o;
			first = i;
		}
	}
	if (best == TKS_ORD_NEG_INF)
		return -1;
	m = w->z[first];
	if (s->greedy)
		return first;
	/* min-p: a mask over the weights. */
	for (int64_t i = 0; i < V; i++) {
		w->q[i] = tks_weight(w->z[i], m, s->c);
		w->keep[i] = w->q[i] >= s->min_q;
		if (w->keep[i])
			w->keys[n1++] = order_key(tks_ord(w->z[i]), i);
	}
	/* top-k and top-p keep a prefix of the survivors in the op's order. */
	if ((s->top_k > 0 && s->top_k < n1) || s->p24 < ((uint64_t)1 << TKS_P_BITS)) {
		int64_t n2 = s->top_k > 0 && s->top_k < n1 ? s->top_k : n1, n3 = n2;
		qsort(w->keys, (size_t)n1, sizeof(uint64_t), key_desc);
		if (s->p24 < ((uint64_t)1 << TKS_P_BITS)) {
			uint64_t total = 0, before = 0;
			for (int64_t r = 0; r < n2; r++)
				total += w->q[0xffffffffu - (uint32_t)w->keys[r]];
			uint64_t target = tks_mass_target(total, s->p24);
			/* Kept: the first, and each token whose predecessors weigh less than target. */
			for (n3 = 1; n3 < n2; n3++) {
				before += w->q[0xffffffffu - (uint32_t)w->keys[n3 - 1]];
				if (before >= target)
					break;
			}
		}
		for (int64_t i = 0; i < V; i++)
			w->keep[i] = 0;
		for (int64_t r = 0; r < n3; r++)
			w->keep[0xffffffffu - (uint32_t)w->keys[r]] = 1;
	}
	uint64_t total = 0, run = 0;
	for (int64_t i = 0; i < V; i++)
		total += w->keep[i] ? w->q[i] : 0;
	uint64_t u = tks_mulhi64(tks_philox(s->seed, s->offset, s->stream), total);
	for (int64_t i = 0; i < V; i++) {
		run += w->keep[i] ? w->q[i] : 0;
		if (run > u)
			return i;
	}
	return first; /* not reached: total > u, and the first token weighs 2^40 */
}

tk_status tk_cpu_sample(const tk_call *call)
{
	const tk_tensor *lg = &call->in[IN_LOGITS], *out = &call->out[0];
	const tk_tensor *rows[IN_COUNT] = { NULL };
	static const tk_dtype dts[IN_COUNT] = { TK_DTYPE_INVALID, TK_F32, TK_I32, TK_F32,
		                                TK_F32,           TK_I64, TK_I64 };

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(&lg, 1) || lg->ndim != 2 ||
	    !tk_last_dim_packed(lg) || out->ndim != 1 ||
	    (out->dtype != TK_I32 && out->dtype != TK_I64))
		return TK_ERR_UNSUPPORTED;
	int64_t B = lg->shape[0], V = lg->shape[1];
	if (out->shape[0] != B || V < 1 || V > ((int64_t)1 << 22))
		return TK_ERR_UNSUPPORTED;
	int bad = 0;
	for (int i = IN_TEMP; i < IN_COUNT; i++)
		rows[i] = row_input(call, i, dts[i], B, &bad);
	if (bad)
		return TK_ERR_UNSUPPORTED;
	if (B == 0)
		return TK_OK;
	row_scratch w;
	w.z = malloc(sizeof(float) * (size_t)V);
	w.q = malloc(sizeof(uint64_t) * (size_t)V);
	w.keys = malloc(sizeof(uint64_t) * (size_t)V);
	w.keep = malloc((size_t)V);
	if (!w.z || !w.q || !w.keys || !w.keep) {
		free(w.z);
		free(w.q);
		free(w.keys);
		free(w.keep);
		return TK_ERR_NOMEM;
	}
	float t = (float)tk_param_num(call, 0, 1.0), top_p = (float)tk_param_num(call, 2, 1.0);
	float min_p = (float)tk_param_num(call, 3, 0.0);
	int64_t top_k = (int64_t)tk_param_num(call, 1, 0.0);
	uint64_t seed = param_bits(call, 4), offset = param_bits(call, 5);
	for (int64_t b = 0; b < B; b++) {
		tks_row s;
		tks_row_settings(&s, row_f32(rows[IN_TEMP], b, t), row_i64(rows[IN_TOPK], b, top_k),
		                 row_f32(rows[IN_TOPP], b, top_p), row_f32(rows[IN_MINP], b, min_p),
		                 (uint64_t)row_i64(rows[IN_SEEDS], b, (int64_t)seed),
		                 offset + (uint64_t)row_i64(rows[IN_OFFSETS], b, 0),
		                 rows[IN_SEEDS] ? 0u : (uint32_t)b);
		int64_t tok = sample_row(lg, b, &s, &w);
		if (out->dtype == TK_I32)
			((int32_t *)out->data)[b * out->stride[0]] = (int32_t)tok;
		else
			((int64_t *)out->data)[b * out->stride[0]] = tok;
	}
	free(w.z);
	free(w.q);
	free(w.keys);
	free(w.keep);
	return TK_OK;
}
