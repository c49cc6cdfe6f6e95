/*
 * decode_tuning.c - the tuning interface of attention_decode and
 * attention_decode_paged (tk_tuning in tileops_kernels.h): family
 * "attention_decode", whose choices are split counts of the KV range
 * (attention_decode.cu).
 *
 * Shape class: dtype, head dim, paged or contiguous, the batch rounded up
 * to a power of two, the new tokens per sequence, the query heads and the
 * GQA group exactly, the cache's capacity per sequence (paged: max_pages *
 * page_size) rounded up to a power of two: "bf16 d128 b1 t1 h32 g4
 * kv65536". Those are what the split's plan depends on besides the device.
 *
 * Compiled into each kernel library (TK_WITH_CUDA says which); the
 * CPU-only one has no candidates (TK_TUNING_PAIR).
 */
#include <stdio.h>
#include <string.h>

#include "attention_schedule.h"
#include "tk_internal.h"

#define CLASS_SYNTAX "DTYPE d# [paged] b^ t# h# g# kv^"
#define CHOICE_SYNTAX "splits N (N >= 1; 1: no split)"
#define MAX_SPLITS (1 << 20)

static int shape_class(const tk_call *call, int paged, char *buf, size_t len)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1];

	if (call->n_in < (paged ? 5 : 4) || call->n_out < 1)
		return -1;
	if ((q->dtype != TK_BF16 && q->dtype != TK_F16) || k->dtype != q->dtype ||
	    (q->ndim != 3 && q->ndim != 4) || k->ndim != 4)
		return -1;
	const int64_t T = q->ndim == 4 ? q->shape[1] : 1, Hq = q->shape[q->ndim - 2];
	const int64_t D = q->shape[q->ndim - 1], Hkv = k->shape[2];
	if ((D != 64 && D != 128 && D != 256) || Hkv < 1 || Hq % Hkv != 0)
		return -1;
	int64_t cap = k->shape[1];
	if (paged) {
		const tk_tensor *bt = &call->in[3];
		if (bt->ndim != 2)
			return -1;
		cap = bt->shape[1] * k->shape[1];
	}
	snprintf(buf, len, "%s d%lld%s b%lld t%lld h%lld g%lld kv%lld", tk_dtype_name(q->dtype),
	         (long long)D, paged ? " paged" : "", (long long)tk_pow2_ceil(q->shape[0]),
	         (long long)T, (long long)Hq, (long long)(Hq / Hkv), (long long)tk_pow2_ceil(cap));
	return 0;
}

static int format_choice(const tk_choice *c, char *buf, size_t len)
{
	if (c->v[0] < 1)
		return -1;
	snprintf(buf, len, "splits %d", (int)c->v[0]);
	return 0;
}

static int parse_choice(const char *text, tk_choice *c)
{
	char word[32], num[32], extra[2];
	int64_t n;

	if (sscanf(text, " %31s %31s %1s", word, num, extra) != 2 || strcmp(word, "splits") != 0 ||
	    tk_word_number(num, "", MAX_SPLITS, &n) != 0 || n < 1)
		return -1;
	tk_choice_one(c, TK_CHOICE_PREFER, (int32_t)n);
	return 0;
}

TK_TUNING_PAIR(attention_decode, attention_decode_paged, "attention_decode", CLASS_SYNTAX,
               CHOICE_SYNTAX, shape_class, format_choice, parse_choice,
               tk_attention_decode_candidates, NULL, NULL);
