/*
 * attention_decode.c - CPU references of attention decode over a
 * contiguous or a paged KV cache, and of kv_cache_append.
 *
 * Decode. q is [B, Hq, D] (one new token per sequence) or [B, T, Hq, D]
 * (T new tokens, causal among themselves); out has q's shape. The cache is
 * contiguous, k_cache and v_cache [B, S_max, Hkv, D], or paged,
 * [num_pages, page_size, Hkv, D] with block_tables [B, max_pages] (i32):
 * token j of sequence b lives in page block_tables[b, j / page_size] at
 * slot j % page_size. seq_lens [B] (i32) counts the cached tokens,
 * the T new ones included (they were appended before the call).
 * Query head hq reads KV head hq / (Hq / Hkv).
 *
 * With capacity C = S_max (contiguous) or max_pages * page_size (paged)
 * and L = seq_lens[b] clamped to [0, C], token t of sequence b attends to
 * the cache entries [0, L - T + t]; a paged entry whose page index lies
 * outside [0, num_pages) is skipped (it takes no part in the softmax).
 * out = softmax(scale * q k^T) v over the entries seen, or zeros when
 * there are none. scale (param 0) of 0 means 1 / sqrt(D). Accumulation in
 * double, one rounding on store.
 *
 * kv_cache_append. k and v [T, Hkv, D] are written into k_cache and
 * v_cache [num_pages, page_size, Hkv, D] at the slots slot_mapping [T]
 * (i32 or i64) gives: slot s is page s / page_size, offset s % page_size.
 * A slot outside [0, num_pages * page_size), negative ones included
 * (padding), is skipped. A contiguous cache [B, S_max, Hkv, D] is the
 * same with page_size = S_max and slot = b * S_max + position. The copy
 * is bit-exact, any float dtype.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_util.h"

typedef struct dec_shape {
	const tk_tensor *q, *k, *v, *bt, *sl, *out;
	int64_t B, T, Hq, Hkv, D, cap;
	int q4;
} dec_shape;

static int is_half(tk_dtype dt)
{
	return dt == TK_F16 || dt == TK_BF16;
}

static int same_shape(const tk_tensor *a, const tk_tensor *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

static tk_status dec_parse(const tk_call *call, int paged, dec_shape *s)
{
	memset(s, 0, sizeof(*s));
	if (call->n_in < (paged ? 5 : 4) || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	s->q = &call->in[0];
	s->k = &call->in[1];
	s->v = &call->in[2];
	s->bt = paged ? &call->in[3] : NULL;
	s->sl = &call->in[paged ? 4 : 3];
	s->out = &call->out[0];
	if (!is_half(s->q->dtype) || s->k->dtype != s->q->dtype || s->v->dtype != s->q->dtype ||
	    s->out->dtype != s->q->dtype || s->sl->dtype != TK_I32 ||
	    (paged && s->bt->dtype != TK_I32))
		return TK_ERR_UNSUPPORTED;
	if ((s->q->ndim != 3 && s->q->ndim != 4) || s->k->ndim != 4 || s->sl->ndim != 1 ||
	    (paged && s->bt->ndim != 2) || !same_shape(s->q, s->out) || !same_shape(s->k, s->v))
		return TK_ERR_UNSUPPORTED;
	s->q4 = s->q->ndim == 4;
	s->B = s->q->shape[0];
	s->T = s->q4 ? s->q->shape[1] : 1;
	s->Hq = s->q->shape[s->q->ndim - 2];
	s->D = s->q->shape[s->q->ndim - 1];
	s->Hkv = s->k->shape[2];
	if (s->k->shape[3] != s->D || s->Hkv < 1 || s->Hq % s->Hkv != 0 || s->sl->shape[0] != s->B)
		return TK_ERR_UNSUPPORTED;
	if (paged) {
		if (s->bt->shape[0] != s->B)
			return TK_ERR_UNSUPPORTED;
		s->cap = s->bt->shape[1] * s->k->shape[1];
	} else {
		if (s->k->shape[0] != s->B)
			return TK_ERR_UNSUPPORTED;
		s->cap = s->k->shape[1];
	}
	return TK_OK;
}

/* Element offset of head h of cache entry j of sequence b, or -1 when the entry is skipped. */
static int64_t dec_entry(const dec_shape *s, const tk_tensor *c, int64_t b, int64_t j, int64_t h)
{
	int64_t page = b, slot = j;

	if (s->bt != NULL) {
		int64_t ps = s->k->shape[1];
		const int32_t *bt = s->bt->data;
		page = bt[b * s->bt->stride[0] + (j / ps) * s->bt->stride[1]];
		slot = j % ps;
		if (page < 0 || page >= s->k->shape[0])
			return -1;
	}
	return page * c->stride[0] + slot * c->stride[1] + h * c->stride[2];
}

/* One q row: sequence b, new token t, q head hq, over the first n cache entries. */
static void dec_row(const dec_shape *s, int64_t b, int64_t t, int64_t hq, int64_t n, double scale,
                    double *score, double *acc)
{
	const tk_tensor *q = s->q, *o = s->out;
	int64_t h = hq / (s->Hq / s->Hkv);
	int64_t qo =
	        b * q->stride[0] + (s->q4 ? t * q->stride[1] : 0) + hq * q->stride[q->ndim - 2];
	int64_t oo =
	        b * o->stride[0] + (s->q4 ? t * o->stride[1] : 0) + hq * o->stride[o->ndim - 2];
	double mx = -INFINITY, sum = 0.0;

	for (int64_t j = 0; j < n; j++) {
		int64_t ko = dec_entry(s, s->k, b, j, h);
		score[j] = -INFINITY;
		if (ko < 0)
			continue;
		double dot = 0.0;
		for (int64_t d = 0; d < s->D; d++)
			dot += (double)cpu_load(q->data, q->dtype, qo + d) *
			       cpu_load(s->k->data, s->k->dtype, ko + d);
		score[j] = dot * scale;
		if (score[j] > mx)
			mx = score[j];
	}
	for (int64_t d = 0; d < s->D; d++)
		acc[d] = 0.0;
	for (int64_t j = 0; j < n && mx > -INFINITY; j++) {
		int64_t vo = dec_entry(s, s->v, b, j, h);
		if (vo < 0)
			continue;
		double p = exp(score[j] - mx);
		sum += p;
		for (int64_t d = 0; d < s->D; d++)
			acc[d] += p * cpu_load(s->v->data, s->v->dtype, vo + d);
	}
	for (int64_t d = 0; d < s->D; d++)
		cpu_store(o->data, o->dtype, oo + d, (float)(sum > 0.0 ? acc[d] / sum : 0.0));
}

static tk_status dec_run(const tk_call *call, int paged)
{
	dec_shape s;
	tk_status st = dec_parse(call, paged, &s);

	if (st != TK_OK)
		return st;
	double scale = tk_param_num(call, 0, 0.0);
	if (!(scale > 0.0))
		scale = 1.0 / sqrt((double)(s.D > 0 ? s.D : 1));
	double *score = malloc(sizeof(double) * (size_t)(s.cap > 0 ? s.cap : 1));
	double *acc = malloc(sizeof(double) * (size_t)(s.D > 0 ? s.D : 1));
	if (score == NULL || acc == NULL) {
		free(score);
		free(acc);
		return TK_ERR_NOMEM;
	}
	const int32_t *sl = s.sl->data;
	for (int64_t b = 0; b < s.B; b++) {
		int64_t L = sl[b * s.sl->stride[0]];
		L = L < 0 ? 0 : (L > s.cap ? s.cap : L);
		for (int64_t t = 0; t < s.T; t++) {
			int64_t n = L - s.T + t + 1;
			for (int64_t hq = 0; hq < s.Hq; hq++)
				dec_row(&s, b, t, hq, n > 0 ? n : 0, scale, score, acc);
		}
	}
	free(score);
	free(acc);
	return TK_OK;
}

tk_status tk_cpu_attention_decode(const tk_call *call)
{
	return dec_run(call, 0);
}

tk_status tk_cpu_attention_decode_paged(const tk_call *call)
{
	return dec_run(call, 1);
}

tk_status tk_cpu_kv_cache_append(const tk_call *call)
{
	const tk_tensor *k = &call->in[0], *v = &call->in[1], *sm = &call->in[2];
	const tk_tensor *kc = &call->in[3], *vc = &call->in[4];

	if (call->n_in < 5 || k->ndim != 3 || kc->ndim != 4 || sm->ndim != 1 || !same_shape(k, v) ||
	    !same_shape(kc, vc))
		return TK_ERR_UNSUPPORTED;
	size_t es = tk_dtype_size(k->dtype);
	if (es == 0 || v->dtype != k->dtype || kc->dtype != k->dtype || vc->dtype != k->dtype ||
	    (sm->dtype != TK_I32 && sm->dtype != TK_I64))
		return TK_ERR_UNSUPPORTED;
	if (sm->shape[0] != k->shape[0] || kc->shape[2] != k->shape[1] ||
	    kc->shape[3] != k->shape[2])
		return TK_ERR_UNSUPPORTED;
	int64_t ps = kc->shape[1], slots = kc->shape[0] * kc->shape[1];
	for (int64_t t = 0; t < k->shape[0]; t++) {
		int64_t i = t * sm->stride[0];
		int64_t slot = sm->dtype == TK_I64 ? ((const int64_t *)sm->data)[i]
		                                   : ((const int32_t *)sm->data)[i];
		if (slot < 0 || slot >= slots)
			continue;
		int64_t page = slot / ps, off = slot % ps;
		for (int64_t h = 0; h < k->shape[1]; h++) {
			char *kd = (char *)kc->data + (page * kc->stride[0] + off * kc->stride[1] +
			                               h * kc->stride[2]) *
			                                      es;
			char *vd = (char *)vc->data + (page * vc->stride[0] + off * vc->stride[1] +
			                               h * vc->stride[2]) *
			                                      es;
			const char *ks =
			        (const char *)k->data + (t * k->stride[0] + h * k->stride[1]) * es;
			const char *vs =
			        (const char *)v->data + (t * v->stride[0] + h * v->stride[1]) * es;
			memcpy(kd, ks, (size_t)k->shape[2] * es);
			memcpy(vd, vs, (size_t)k->shape[2] * es);
		}
	}
	return TK_OK;
}
