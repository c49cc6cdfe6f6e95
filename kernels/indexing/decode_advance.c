/*
 * decode_advance.c - the CPU reference of decode_advance (a decode step's
 * positions, slots, lengths and token history from the block tables) and
 * the call check both backends share. The row is decode_advance.h's.
 *
 *   in:  tokens i64 [B], seq_lens i32 [B] (mutated), block_tables i32 [B, P],
 *        history i64 [B, H] (mutated); param page_size
 *   out: positions i64 [B], slots i64 [B]
 */
#include "decode_advance.h"

/* Largest page_size (the manifest's range): keeps entry * page_size inside i64. */
#define MAX_PAGE_SIZE (1 << 20)

/* An empty tensor may have no memory (a 0-byte device allocation is NULL). */
static int vector_of(const tk_tensor *t, tk_dtype dt, int64_t n)
{
	return t->dtype == dt && t->ndim == 1 && t->shape[0] == n && (n == 0 || t->data);
}

tk_status tk_decode_advance_parse(const tk_call *call, tk_decode_advance *a)
{
	const tk_tensor *tok = &call->in[0], *len = &call->in[1], *bt = &call->in[2];
	const tk_tensor *hist = &call->in[3], *pos = &call->out[0], *slot = &call->out[1];

	if (call->n_in < 4 || call->n_out < 2 || tok->dtype != TK_I64 || tok->ndim != 1)
		return TK_ERR_UNSUPPORTED;
	int64_t B = tok->shape[0];
	double ps = tk_param_num(call, 0, 0.0);
	if (!(ps >= 1.0 && ps <= MAX_PAGE_SIZE) || bt->dtype != TK_I32 || bt->ndim != 2 ||
	    bt->shape[0] != B || hist->dtype != TK_I64 || hist->ndim != 2 || hist->shape[0] != B ||
	    hist->shape[1] < 1 || !vector_of(len, TK_I32, B) || !vector_of(pos, TK_I64, B) ||
	    !vector_of(slot, TK_I64, B))
		return TK_ERR_UNSUPPORTED;
	if (B > 0 && (!tok->data || !hist->data || (bt->shape[1] > 0 && !bt->data)))
		return TK_ERR_UNSUPPORTED;
	a->tokens = tok->data;
	a->seq_lens = len->data;
	a->block_tables = bt->data;
	a->history = hist->data;
	a->positions = pos->data;
	a->slots = slot->data;
	a->B = B;
	a->P = bt->shape[1];
	a->H = hist->shape[1];
	a->page_size = (int64_t)ps;
	a->tok_s = tok->stride[0];
	a->len_s = len->stride[0];
	a->bt_s0 = bt->stride[0];
	a->bt_s1 = bt->stride[1];
	a->hist_s0 = hist->stride[0];
	a->hist_s1 = hist->stride[1];
	a->pos_s = pos->stride[0];
	a->slot_s = slot->stride[0];
	return TK_OK;
}

tk_status tk_cpu_decode_advance(const tk_call *call)
{
	tk_decode_advance a;
	tk_status st = tk_decode_advance_parse(call, &a);

	if (st != TK_OK)
		return st;
	for (int64_t b = 0; b < a.B; b++)
		tk_decode_advance_row(&a, b);
	return TK_OK;
}
