/*
 * align.c - the CPU reference of moe_align (vLLM's moe_align_block_size
 * layout, manifest/moe.yaml): count each expert's flat ids, pad each count to
 * a multiple of block_m, then place the ids in ascending order.
 */
#include <stdlib.h>

#include "moe.h"

tk_status tk_cpu_moe_align(const tk_call *call)
{
	tk_moe_align a;
	tk_status st = tk_moe_align_parse(call, &a);

	if (st != TK_OK)
		return st;
	int64_t *start = calloc((size_t)a.e + 1, sizeof(int64_t));
	if (!start)
		return TK_ERR_NOMEM;
	/* start[e + 1] counts expert e's ids, then becomes where its rows begin. */
	for (int64_t f = 0; f < a.tk; f++) {
		int32_t e = a.topk_ids[f];
		if (e >= 0 && e < a.e)
			start[e + 1]++;
	}
	for (int64_t e = 0; e < a.e; e++)
		start[e + 1] = start[e] + (start[e + 1] + a.block_m - 1) / a.block_m * a.block_m;
	int64_t total = start[a.e];

	for (int64_t p = 0; p < a.p; p++)
		a.sorted_ids[p] = (int32_t)a.tk;
	for (int64_t b = 0; b < a.nb; b++)
		a.expert_ids[b] = (int32_t)a.e;
	for (int64_t e = 0; e < a.e; e++)
		for (int64_t b = start[e] / a.block_m; b < start[e + 1] / a.block_m; b++)
			a.expert_ids[b] = (int32_t)e;
	for (int64_t f = 0; f < a.tk; f++) {
		int32_t e = a.topk_ids[f];
		if (e < 0 || e >= a.e) {
			a.inv[f] = (int32_t)a.p;
			continue;
		}
		a.inv[f] = (int32_t)start[e];
		a.sorted_ids[start[e]++] = (int32_t)f;
	}
	a.num_post_padded[0] = (int32_t)total;
	free(start);
	return TK_OK;
}
