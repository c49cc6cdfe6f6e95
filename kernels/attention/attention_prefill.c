/*
 * attention_prefill.c - CPU references of attention_prefill and
 * attention_prefill_varlen.
 *
 * Plain loops in double: for each query row the scaled scores against every
 * visible key, their softmax and the weighted sum of values, rounded once on
 * store. Causal attention is aligned bottom-right: query i of a sequence with
 * S queries and Skv keys sees keys j <= i + Skv - S. A row that sees no key
 * gets zeros and an lse of -inf.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_util.h"

/* One sequence of one batch entry: where its rows live and how long it is. */
typedef struct prefill_seq {
	int64_t q0, k0, v0; /* element offsets of token 0, head 0 */
	int64_t q_len, kv_len;
	int64_t out0; /* element offset of out's token 0, head 0 */
	int64_t lse0; /* element offset of lse's head 0, token 0 */
} prefill_seq;

typedef struct prefill_args {
	const tk_tensor *q, *k, *v, *out, *lse;
	int tok; /* index of the token dim (0 varlen, 1 batched) */
	int64_t Hq, Hkv, D, Dv;
	int64_t lse_sh; /* lse's head stride */
	int causal;
	double scale;
} prefill_args;

static void prefill_row(const prefill_args *a, const prefill_seq *s, int64_t h, int64_t i,
                        double *w)
{
	const tk_tensor *q = a->q, *k = a->k, *v = a->v, *out = a->out;
	int64_t hk = h / (a->Hq / a->Hkv);
	int64_t qi = s->q0 + i * q->stride[a->tok] + h * q->stride[a->tok + 1];
	int64_t end = s->kv_len,
	        oi = s->out0 + i * out->stride[a->tok] + h * out->stride[a->tok + 1];
	double mx = -INFINITY, sum = 0.0;

	if (a->causal && i + s->kv_len - s->q_len + 1 < end)
		end = i + s->kv_len - s->q_len + 1;
	for (int64_t j = 0; j < end; j++) {
		int64_t kj = s->k0 + j * k->stride[a->tok] + hk * k->stride[a->tok + 1];
		double dot = 0.0;
		for (int64_t d = 0; d < a->D; d++)
			dot += (double)cpu_load(q->data, q->dtype, qi + d) *
			       cpu_load(k->data, k->dtype, kj + d);
		w[j] = dot * a->scale;
		if (w[j] > mx)
			mx = w[j];
	}
	for (int64_t j = 0; j < end; j++) {
		w[j] = exp(w[j] - mx);
		sum += w[j];
	}
	for (int64_t d = 0; d < a->Dv; d++) {
		double acc = 0.0;
		for (int64_t j = 0; j < end; j++) {
			int64_t vj = s->v0 + j * v->stride[a->tok] + hk * v->stride[a->tok + 1];
			acc += w[j] * cpu_load(v->data, v->dtype, vj + d);
		}
		cpu_store(out->data, out->dtype, oi + d, end > 0 ? (float)(acc / sum) : 0.0f);
	}
	if (a->lse)
		((float *)a->lse->data)[s->lse0 + h * a->lse_sh + i] =
		        end > 0 ? (float)(mx + log(sum)) : -INFINITY;
}

static tk_status prefill_seq_run(const prefill_args *a, const prefill_seq *s)
{
	double *w;

	if (s->q_len <= 0)
		return TK_OK;
	w = malloc(sizeof(double) * (size_t)(s->kv_len > 0 ? s->kv_len : 1));
	if (w == NULL)
		return TK_ERR_NOMEM;
	for (int64_t h = 0; h < a->Hq; h++) {
		for (int64_t i = 0; i < s->q_len; i++)
			prefill_row(a, s, h, i, w);
	}
	free(w);
	return TK_OK;
}

/* Fill what both ops share; 0 when the heads do not divide. */
static int prefill_args_init(prefill_args *a, const tk_call *call, int tok)
{
	a->q = &call->in[0];
	a->k = &call->in[1];
	a->v = &call->in[2];
	a->out = &call->out[0];
	a->lse = call->n_out > 1 && call->out[1].data != NULL ? &call->out[1] : NULL;
	a->tok = tok;
	a->Hq = a->q->shape[tok + 1];
	a->Hkv = a->k->shape[tok + 1];
	a->D = a->q->shape[tok + 2];
	a->Dv = a->v->shape[tok + 2];
	a->causal = call->params[0].v.b != 0;
	a->scale = call->params[1].v.f > 0.0 ? call->params[1].v.f : 1.0 / sqrt((double)a->D);
	a->lse_sh = a->lse ? a->lse->stride[tok == 0 ? 0 : 1] : 0;
	return a->Hkv > 0 && a->Hq % a->Hkv == 0;
}

tk_status tk_cpu_attention_prefill(const tk_call *call)
{
	prefill_args a;

	if (call->n_in < 3 || call->in[0].ndim != 4 || !prefill_args_init(&a, call, 1))
		return TK_ERR_UNSUPPORTED;
	for (int64_t b = 0; b < a.q->shape[0]; b++) {
		prefill_seq s = {
			.q0 = b * a.q->stride[0],
			.k0 = b * a.k->stride[0],
			.v0 = b * a.v->stride[0],
			.q_len = a.q->shape[1],
			.kv_len = a.k->shape[1],
			.out0 = b * a.out->stride[0],
			.lse0 = a.lse ? b * a.lse->stride[0] : 0,
		};
		tk_status st = prefill_seq_run(&a, &s);

		if (st != TK_OK)
			return st;
	}
	return TK_OK;
}

/* Sequence b's [start, end) from cu_seqlens, clamped to [0, T] and monotonic. */
static void varlen_bounds(const int32_t *cu, int64_t b, int64_t T, int64_t *start, int64_t *len)
{
	int64_t s = cu[b], e = cu[b + 1];

	s = s < 0 ? 0 : (s > T ? T : s);
	e = e < s ? s : (e > T ? T : e);
	*start = s;
	*len = e - s;
}

tk_status tk_cpu_attention_prefill_varlen(const tk_call *call)
{
	prefill_args a;
	const int32_t *cu_q, *cu_k;
	int64_t B;

	if (call->n_in < 5 || call->in[0].ndim != 3 || !prefill_args_init(&a, call, 0))
		return TK_ERR_UNSUPPORTED;
	if (call->in[3].dtype != TK_I32 || call->in[4].dtype != TK_I32 ||
	    call->in[3].shape[0] != call->in[4].shape[0])
		return TK_ERR_UNSUPPORTED;
	cu_q = call->in[3].data;
	cu_k = call->in[4].data;
	B = call->in[3].shape[0] - 1;
	for (int64_t b = 0; b < B; b++) {
		int64_t qs, ks;
		prefill_seq s;
		tk_status st;

		varlen_bounds(cu_q, b, a.q->shape[0], &qs, &s.q_len);
		varlen_bounds(cu_k, b, a.k->shape[0], &ks, &s.kv_len);
		s.q0 = qs * a.q->stride[0];
		s.k0 = ks * a.k->stride[0];
		s.v0 = ks * a.v->stride[0];
		s.out0 = qs * a.out->stride[0];
		s.lse0 = qs;
		st = prefill_seq_run(&a, &s);
		if (st != TK_OK)
			return st;
	}
	return TK_OK;
}
