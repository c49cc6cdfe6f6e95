/*
 * prefill_tuning.c - the tuning interface of attention_prefill and
 * attention_prefill_varlen (tk_tuning in tileops_kernels.h): family
 * "attention_prefill", whose choices are the kernel's schedules
 * (attention_schedule.h).
 *
 * Shape class: dtype, head dim, causal or not, varlen or batched, the
 * batch (sequences) rounded up to a power of two, the query heads and the
 * GQA group exactly, the query and key lengths (varlen: max_seqlen_q and
 * the keys per sequence) rounded up to powers of two:
 * "bf16 d128 causal b4 h32 g4 q4096 kv4096".
 *
 * Compiled into each kernel library (TK_WITH_CUDA says which); the
 * CPU-only one has no candidates (TK_TUNING_PAIR).
 */
#include <stdio.h>
#include <string.h>

#include "attention_schedule.h"
#include "tk_internal.h"

#define CLASS_SYNTAX "DTYPE d# causal|full [varlen] b^ h# g# q^ kv^"
#define CHOICE_SYNTAX "plain, turns, turns-wide or lean-wide"

typedef struct pshape {
	tk_dtype dt;
	int causal, varlen;
	int64_t B, S, Skv, Hq, Hkv, D, Dv;
} pshape;

/* What the CUDA kernel serves (attention_prefill.cu, prefill_run); 0 or -1. */
static int prefill_shape(const tk_call *call, int varlen, pshape *sh)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
	int rank = varlen ? 3 : 4;

	memset(sh, 0, sizeof(*sh));
	if (call->n_in < (varlen ? 5 : 3) || call->n_out < 1 || call->n_params < (varlen ? 3 : 2))
		return -1;
	sh->dt = q->dtype;
	if ((sh->dt != TK_BF16 && sh->dt != TK_F16) || k->dtype != sh->dt || v->dtype != sh->dt ||
	    q->ndim != rank || k->ndim != rank || v->ndim != rank)
		return -1;
	sh->varlen = varlen;
	sh->causal = call->params[0].v.b != 0;
	if (varlen) {
		const tk_tensor *cq = &call->in[3];
		if (cq->ndim != 1 || cq->shape[0] < 1)
			return -1;
		sh->B = cq->shape[0] - 1;
		sh->S = call->params[2].v.i > 0 && call->params[2].v.i <= q->shape[0]
		                ? call->params[2].v.i
		                : q->shape[0];
		sh->Skv = sh->B > 0 ? (k->shape[0] + sh->B - 1) / sh->B : k->shape[0];
	} else {
		sh->B = q->shape[0];
		sh->S = q->shape[1];
		sh->Skv = k->shape[1];
	}
	sh->Hq = q->shape[rank - 2];
	sh->D = q->shape[rank - 1];
	sh->Hkv = k->shape[rank - 2];
	sh->Dv = v->shape[rank - 1];
	if (sh->D != sh->Dv || (sh->D != 64 && sh->D != 128 && sh->D != 256) || sh->Hkv < 1 ||
	    sh->Hq % sh->Hkv != 0)
		return -1;
	return 0;
}

static int shape_class(const tk_call *call, int varlen, char *buf, size_t len)
{
	pshape sh;

	if (prefill_shape(call, varlen, &sh) != 0)
		return -1;
	snprintf(buf, len, "%s d%lld %s%s b%lld h%lld g%lld q%lld kv%lld", tk_dtype_name(sh.dt),
	         (long long)sh.D, sh.causal ? "causal" : "full", varlen ? " varlen" : "",
	         (long long)tk_pow2_ceil(sh.B), (long long)sh.Hq, (long long)(sh.Hq / sh.Hkv),
	         (long long)tk_pow2_ceil(sh.S), (long long)tk_pow2_ceil(sh.Skv));
	return 0;
}

static int format_choice(const tk_choice *c, char *buf, size_t len)
{
	if (c->v[0] < 0 || c->v[0] >= TK_PREFILL_SCHEDULES)
		return -1;
	snprintf(buf, len, "%s", tk_prefill_schedule_of(c->v[0]).name);
	return 0;
}

static int parse_choice(const char *text, tk_choice *c)
{
	char word[32], extra[2];

	if (sscanf(text, " %31s %1s", word, extra) != 1)
		return -1;
	for (int s = 0; s < TK_PREFILL_SCHEDULES; s++) {
		if (strcmp(word, tk_prefill_schedule_of(s).name) != 0)
			continue;
		tk_choice_one(c, TK_CHOICE_PREFER, s);
		return 0;
	}
	return -1;
}

#if TK_WITH_CUDA
/* The schedules that differ in what runs for the call, each once. */
static int candidates(const tk_call *call, int varlen, tk_choice *out, int max)
{
	int seen[TK_PREFILL_SCHEDULES][4], n = 0;
	pshape sh;

	if (prefill_shape(call, varlen, &sh) != 0)
		return 0;
	for (int s = 0; s < TK_PREFILL_SCHEDULES; s++) {
		tk_prefill_sched p = tk_prefill_schedule_of(s);
		int d = (int)sh.D, key[4];
		key[0] = p.turns;
		key[1] = p.lean;
		key[2] = p.wide && !sh.causal ? tk_prefill_wide_bn(d) : tk_prefill_default_bn(d);
		key[3] = p.wide && sh.causal ? TK_PREFILL_HEAD_GROUP : 0;
		int dup = 0;
		for (int i = 0; i < n && !dup; i++)
			dup = memcmp(seen[i], key, sizeof(key)) == 0;
		if (dup)
			continue;
		memcpy(seen[n], key, sizeof(key));
		if (n < max)
			tk_choice_one(&out[n], TK_CHOICE_EXACT, s);
		n++;
	}
	return n;
}
#endif

TK_TUNING_PAIR(attention_prefill, attention_prefill_varlen, "attention_prefill", CLASS_SYNTAX,
               CHOICE_SYNTAX, shape_class, format_choice, parse_choice, candidates, NULL, NULL);
