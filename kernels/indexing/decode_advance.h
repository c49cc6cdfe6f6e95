/*
 * decode_advance.h - one row of decode_advance, shared by the CPU
 * reference and the CUDA kernel so that both advance a row by one
 * definition: the view of the call (tk_decode_advance_parse) and the row
 * (tk_decode_advance_row). The manifest entry is the specification.
 */
#ifndef TILEOPS_DECODE_ADVANCE_H
#define TILEOPS_DECODE_ADVANCE_H

#include "tk_internal.h"

/* The call as pointers and element strides; rows B, pages P, history H. */
typedef struct tk_decode_advance {
	const int64_t *tokens;
	int32_t *seq_lens;
	const int32_t *block_tables;
	int64_t *history, *positions, *slots;
	int64_t B, P, H, page_size;
	int64_t tok_s, len_s, bt_s0, bt_s1, hist_s0, hist_s1, pos_s, slot_s;
} tk_decode_advance;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Check the call (the manifest's dtypes and shapes, page_size in
 * [1, 2^20], H > 0) and describe it. TK_ERR_UNSUPPORTED for anything else:
 * the op layer has already refused it, so this only guards a direct call.
 */
tk_status tk_decode_advance_parse(const tk_call *call, tk_decode_advance *a);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define TK_DECODE_ADVANCE_FN __host__ __device__ static inline
#else
#define TK_DECODE_ADVANCE_FN static inline
#endif

/*
 * Advance row b. A length of INT32_MAX is padding: its next length would
 * not fit in i32, and the row must never wrap to a negative length that a
 * later step would read as padding with a stale slot. The slot is at most
 * (2^31 - 1) * 2^20 + 2^20, far inside i64.
 */
TK_DECODE_ADVANCE_FN void tk_decode_advance_row(const tk_decode_advance *a, int64_t b)
{
	int32_t *len = a->seq_lens + b * a->len_s;
	int64_t p = *len, slot = -1;

	if (p <= 0 || p >= INT32_MAX) {
		a->positions[b * a->pos_s] = 0;
		a->slots[b * a->slot_s] = -1;
		return;
	}
	int64_t page = p / a->page_size;
	if (page < a->P) {
		int64_t entry = a->block_tables[b * a->bt_s0 + page * a->bt_s1];
		if (entry >= 0)
			slot = entry * a->page_size + p % a->page_size;
	}
	*len = (int32_t)(p + 1);
	a->positions[b * a->pos_s] = p;
	a->slots[b * a->slot_s] = slot;
	a->history[b * a->hist_s0 + (p % a->H) * a->hist_s1] = a->tokens[b * a->tok_s];
}

#endif /* TILEOPS_DECODE_ADVANCE_H */
