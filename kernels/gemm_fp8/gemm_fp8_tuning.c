/*
 * gemm_fp8_tuning.c - the tuning interface of gemm_fp8 and bmm_fp8
 * (tk_tuning in tileops_kernels.h): family "gemm_fp8", whose choices are
 * the kernels of gemm_fp8.cu: the weight-streaming kernel with a split
 * count of K ("stream splits 4"), the wgmma kernel ("wg"), the
 * mma.sync tile kernel ("tile") and the TMA decode kernel with its cluster
 * split of K, weight rows a CTA and ring stages ("decode splits 2 bn 128
 * stages 12").
 *
 * Shape class: c's dtype, the scale layout ("bmm" for bmm_fp8's per-batch
 * scales), M rounded up to a power of two, N and K exactly, the batch
 * rounded up to a power of two: "bf16 block m16 n2112 k7168 b1". What the
 * kernels' plans depend on besides the device.
 *
 * Compiled into each kernel library (TK_WITH_CUDA says which); the
 * CPU-only one has no candidates (TK_TUNING_PAIR).
 */
#include <stdio.h>
#include <string.h>

#include "gemm_fp8.h"

#define CLASS_SYNTAX "DTYPE per_tensor|rowwise|block|bmm m^ n# k# b^"
#define CHOICE_SYNTAX \
	"stream splits N (N >= 1), wg, tile or decode splits S (1..8) bn 64|128 stages T (2..16)"
#define MAX_SPLITS 4096

static int shape_class(const tk_call *call, int batched, char *buf, size_t len)
{
	static const char *const layouts[] = { "per_tensor", "rowwise", "block" };
	tk_fp8_problem q;

	if ((batched ? tk_fp8_bmm_parse(call, &q) : tk_fp8_gemm_parse(call, &q)) != TK_OK)
		return -1;
	snprintf(buf, len, "%s %s m%lld n%lld k%lld b%lld", tk_dtype_name(q.c_dtype),
	         batched ? "bmm" : layouts[q.layout], (long long)tk_pow2_ceil(q.m), (long long)q.n,
	         (long long)q.k, (long long)tk_pow2_ceil(q.batch));
	return 0;
}

static int format_choice(const tk_choice *c, char *buf, size_t len)
{
	if (c->v[0] == TK_FP8_KERNEL_STREAM && c->v[1] >= 1)
		snprintf(buf, len, "stream splits %d", (int)c->v[1]);
	else if (c->v[0] == TK_FP8_KERNEL_WG)
		snprintf(buf, len, "wg");
	else if (c->v[0] == TK_FP8_KERNEL_TILE)
		snprintf(buf, len, "tile");
	else if (c->v[0] == TK_FP8_KERNEL_DECODE)
		snprintf(buf, len, "decode splits %d bn %d stages %d", (int)c->v[1], (int)c->v[2],
		         (int)c->v[3]);
	else
		return -1;
	return 0;
}

/* "decode splits S bn B stages T". */
static int parse_decode(const char *text, tk_choice *c)
{
	char word[32], k1[32], n1[32], k2[32], n2[32], k3[32], n3[32], extra[2];
	int64_t split, bn, stages;
	int got = sscanf(text, " %31s %31s %31s %31s %31s %31s %31s %1s", word, k1, n1, k2, n2, k3,
	                 n3, extra);

	if (got != 7 || strcmp(word, "decode") || strcmp(k1, "splits") || strcmp(k2, "bn") ||
	    strcmp(k3, "stages") || tk_word_number(n1, "", 8, &split) != 0 || split < 1 ||
	    tk_word_number(n2, "", 128, &bn) != 0 || (bn != 64 && bn != 128) ||
	    tk_word_number(n3, "", 16, &stages) != 0 || stages < 2)
		return -1;
	c->v[0] = TK_FP8_KERNEL_DECODE;
	c->v[1] = (int32_t)split;
	c->v[2] = (int32_t)bn;
	c->v[3] = (int32_t)stages;
	return 0;
}

static int parse_choice(const char *text, tk_choice *c)
{
	char word[32], key[32], num[32], extra[2];
	int64_t n;
	int got = sscanf(text, " %31s %31s %31s %1s", word, key, num, extra);

	memset(c, 0, sizeof(*c));
	c->mode = TK_CHOICE_PREFER;
	if (got >= 1 && !strcmp(word, "decode"))
		return parse_decode(text, c);
	if (got == 1 && !strcmp(word, "wg")) {
		c->v[0] = TK_FP8_KERNEL_WG;
		return 0;
	}
	if (got == 1 && !strcmp(word, "tile")) {
		c->v[0] = TK_FP8_KERNEL_TILE;
		return 0;
	}
	if (got == 3 && !strcmp(word, "stream") && !strcmp(key, "splits") &&
	    tk_word_number(num, "", MAX_SPLITS, &n) == 0 && n >= 1) {
		c->v[0] = TK_FP8_KERNEL_STREAM;
		c->v[1] = (int32_t)n;
		return 0;
	}
	return -1;
}

TK_TUNING_PAIR(gemm_fp8, bmm_fp8, "gemm_fp8", CLASS_SYNTAX, CHOICE_SYNTAX, shape_class,
               format_choice, parse_choice, tk_gemm_fp8_candidates, NULL, NULL);
