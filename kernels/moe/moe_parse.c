/*
 * moe_parse.c - the argument checks of moe.h. The op layer has checked the
 * manifest's rules already; these guard the kernels' own assumptions (packed
 * tensors, the dtypes each reads) for a caller that fills a tk_call by hand.
 */
#include "moe.h"

static int packed_as(const tk_tensor *t, tk_dtype dt, int ndim)
{
	return t->dtype == dt && t->ndim == ndim && tk_is_contiguous(t);
}

static int float_dtype(tk_dtype dt)
{
	return dt == TK_F32 || dt == TK_F16 || dt == TK_BF16;
}

tk_status tk_moe_route_parse(const tk_call *call, tk_moe_route *r)
{
	const tk_tensor *lg = &call->in[0];

	if (call->n_in < 1 || call->n_out < 2 || !float_dtype(lg->dtype) ||
	    !packed_as(lg, lg->dtype, 2))
		return TK_ERR_UNSUPPORTED;
	r->t = lg->shape[0];
	r->e = lg->shape[1];
	r->dtype = lg->dtype;
	r->logits = lg->data;
	r->k = (int64_t)tk_param_num(call, 0, 0);
	r->sigmoid = tk_param_num(call, 1, 0) != 0.0;
	r->renormalize = tk_param_num(call, 2, 0) != 0.0;
	r->n_group = (int64_t)tk_param_num(call, 3, 1);
	r->topk_group = (int64_t)tk_param_num(call, 4, 1);
	r->scale = (float)tk_param_num(call, 5, 1.0);
	r->bias = NULL;
	if (tk_has_input(call, 1)) {
		if (!packed_as(&call->in[1], TK_F32, 1) || call->in[1].shape[0] != r->e)
			return TK_ERR_UNSUPPORTED;
		r->bias = call->in[1].data;
	}
	if (r->k < 1 || r->k > r->e || r->k > 64 || r->n_group < 1 || r->e % r->n_group ||
	    r->topk_group < 1 || r->topk_group > r->n_group ||
	    (r->n_group > 1 && r->k > r->topk_group * (r->e / r->n_group)))
		return TK_ERR_UNSUPPORTED;
	if (!packed_as(&call->out[0], TK_I32, 2) || !packed_as(&call->out[1], TK_F32, 2) ||
	    call->out[0].shape[0] != r->t || call->out[0].shape[1] != r->k ||
	    call->out[1].shape[0] != r->t || call->out[1].shape[1] != r->k)
		return TK_ERR_UNSUPPORTED;
	r->ids = call->out[0].data;
	r->weights = call->out[1].data;
	return TK_OK;
}

tk_status tk_moe_align_parse(const tk_call *call, tk_moe_align *a)
{
	const tk_tensor *ids = &call->in[0];

	if (call->n_in < 1 || call->n_out < 4 || !packed_as(ids, TK_I32, 2))
		return TK_ERR_UNSUPPORTED;
	a->tk = tk_numel(ids);
	a->e = (int64_t)tk_param_num(call, 0, 0);
	a->block_m = (int64_t)tk_param_num(call, 1, 64);
	if (a->e < 1 || a->block_m < 1)
		return TK_ERR_UNSUPPORTED;
	a->p = a->tk + a->e * (a->block_m - 1);
	a->nb = (a->p + a->block_m - 1) / a->block_m;
	if (a->p > INT32_MAX || !tk_is_vector_of(&call->out[0], a->p) ||
	    !tk_is_vector_of(&call->out[1], a->nb) || !tk_is_vector_of(&call->out[2], 1) ||
	    !tk_is_vector_of(&call->out[3], a->tk))
		return TK_ERR_UNSUPPORTED;
	for (int i = 0; i < 4; i++)
		if (call->out[i].dtype != TK_I32)
			return TK_ERR_UNSUPPORTED;
	a->topk_ids = ids->data;
	a->sorted_ids = call->out[0].data;
	a->expert_ids = call->out[1].data;
	a->num_post_padded = call->out[2].data;
	a->inv = call->out[3].data;
	return TK_OK;
}

tk_status tk_moe_gemm_parse(const tk_call *call, int gate_up, tk_moe_gemm *g)
{
	const tk_tensor *x = &call->in[0], *w = &call->in[1], *out = &call->out[0];

	if (call->n_in < 5 || call->n_out < 1 || !float_dtype(x->dtype) ||
	    !packed_as(x, x->dtype, 2) || !packed_as(w, x->dtype, 3) ||
	    !packed_as(&call->in[2], TK_I32, 1) || !packed_as(&call->in[3], TK_I32, 1) ||
	    !packed_as(&call->in[4], TK_I32, 1) || call->in[4].shape[0] != 1 ||
	    !packed_as(out, x->dtype, 2))
		return TK_ERR_UNSUPPORTED;
	g->gate_up = gate_up;
	g->dtype = x->dtype;
	g->e = w->shape[0];
	g->n = w->shape[1];
	g->k = w->shape[2];
	g->p = call->in[2].shape[0];
	g->nb = call->in[3].shape[0];
	g->block_m = (int64_t)tk_param_num(call, 0, 64);
	g->top_k = (int64_t)tk_param_num(call, 1, 0);
	g->x_rows = x->shape[0];
	g->out_cols = gate_up ? g->n / 2 : g->n;
	if (g->block_m < 1 || g->top_k < 0 || x->shape[1] != g->k || (gate_up && g->n % 2))
		return TK_ERR_UNSUPPORTED;
	g->tk = g->p - g->e * (g->block_m - 1);
	if (g->tk < 0 || g->nb != (g->p + g->block_m - 1) / g->block_m ||
	    (g->top_k == 0 ? g->x_rows != g->p : g->x_rows * g->top_k != g->tk) ||
	    out->shape[0] != g->p || out->shape[1] != g->out_cols)
		return TK_ERR_UNSUPPORTED;
	g->x = x->data;
	g->w = w->data;
	g->sorted_ids = call->in[2].data;
	g->expert_ids = call->in[3].data;
	g->num_post_padded = call->in[4].data;
	g->out = out->data;
	return TK_OK;
}

tk_status tk_moe_unpermute_parse(const tk_call *call, tk_moe_unpermute *u)
{
	const tk_tensor *y = &call->in[0], *out = &call->out[0];

	if (call->n_in < 3 || call->n_out < 1 || !float_dtype(y->dtype) ||
	    !packed_as(y, y->dtype, 2) || !packed_as(&call->in[2], TK_F32, 2))
		return TK_ERR_UNSUPPORTED;
	u->dtype = y->dtype;
	u->p = y->shape[0];
	u->h = y->shape[1];
	u->t = call->in[2].shape[0];
	u->k = call->in[2].shape[1];
	if (!tk_is_vector_of(&call->in[1], u->t * u->k) || call->in[1].dtype != TK_I32 ||
	    !packed_as(out, y->dtype, 2) || out->shape[0] != u->t || out->shape[1] != u->h)
		return TK_ERR_UNSUPPORTED;
	u->shared = NULL;
	if (tk_has_input(call, 3)) {
		const tk_tensor *s = &call->in[3];
		if (!packed_as(s, y->dtype, 2) || s->shape[0] != u->t || s->shape[1] != u->h)
			return TK_ERR_UNSUPPORTED;
		u->shared = s->data;
	}
	u->y = y->data;
	u->inv = call->in[1].data;
	u->weights = call->in[2].data;
	u->out = out->data;
	return TK_OK;
}
