/*
 * rows.c - plans for row-wise and reducing ops, built on the iteration
 * plans of iter.c, and the checks the row ops share. Used on the host by
 * both the CPU references and the CUDA launchers.
 */
#include <string.h>

#include "tk_internal.h"

tk_status tk_iter_outer(tk_iter *it, const tk_tensor *const *ts, int n)
{
	tk_tensor v[TK_ITER_MAX_OPS];
	const tk_tensor *pv[TK_ITER_MAX_OPS];

	if (n < 1 || n > TK_ITER_MAX_OPS)
		return TK_ERR_UNSUPPORTED;
	for (int k = 0; k < n; k++) {
		if (ts[k]->ndim < 1 || ts[k]->ndim != ts[0]->ndim)
			return TK_ERR_UNSUPPORTED;
		/* Only the outer dims are compared and walked: make the last ones agree. */
		v[k] = *ts[k];
		v[k].shape[v[k].ndim - 1] = 1;
		pv[k] = &v[k];
	}
	return tk_iter_rows(it, pv, n);
}

/* t without dim `axis`: its shape and strides close up over the gap. */
static tk_tensor drop_dim(const tk_tensor *t, int axis)
{
	tk_tensor r = *t;

	for (int d = axis; d + 1 < t->ndim; d++) {
		r.shape[d] = t->shape[d + 1];
		r.stride[d] = t->stride[d + 1];
	}
	r.ndim = t->ndim - 1;
	return r;
}

tk_status tk_iter_reduce(tk_iter *it, const tk_tensor *x, const tk_tensor *out, int axis,
                         int keepdim, int64_t *len, int64_t *stride)
{
	tk_tensor xr, orr;
	const tk_tensor *ins[1] = { &xr };

	if (axis < 0 || axis >= x->ndim)
		return TK_ERR_UNSUPPORTED;
	if (out->ndim != (keepdim ? x->ndim : x->ndim - 1))
		return TK_ERR_UNSUPPORTED;
	if (keepdim && out->shape[axis] != 1)
		return TK_ERR_UNSUPPORTED;
	xr = drop_dim(x, axis);
	orr = keepdim ? drop_dim(out, axis) : *out;
	for (int d = 0; d < xr.ndim; d++) {
		if (xr.shape[d] != orr.shape[d])
			return TK_ERR_UNSUPPORTED;
	}
	*len = x->shape[axis];
	*stride = x->stride[axis];
	return tk_iter_broadcast(it, &orr, ins, 1);
}

int tk_axis_param(const tk_call *call, int idx, int ndim, int *axis)
{
	int64_t a = (int64_t)tk_param_num(call, idx, -1.0);

	if (a < 0)
		a += ndim;
	if (a < 0 || a >= ndim)
		return 0;
	*axis = (int)a;
	return 1;
}

int tk_row_vec_ok(const tk_iter *it, int64_t width, size_t elem, const void *const *ptrs, int n)
{
	size_t vec_elems = 16 / elem;

	if (width % (int64_t)vec_elems != 0)
		return 0;
	for (int i = 0; i < n; i++) {
		if (ptrs[i] != NULL && ((uintptr_t)ptrs[i] & 15) != 0)
			return 0;
	}
	for (int op = 0; op < it->n_ops; op++) {
		for (int d = 0; d < it->ndim; d++) {
			if (it->shape[d] > 1 && (it->stride[op][d] * (int64_t)elem) % 16 != 0)
				return 0;
		}
	}
	return 1;
}

int tk_is_vector_of(const tk_tensor *t, int64_t n)
{
	return t->ndim == 1 && t->shape[0] == n && (n <= 1 || t->stride[0] == 1);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* PyTorch's pooled length, ceil_mode's extra window included only if it starts inside. */
static int64_t pooled_len(int64_t len, int64_t k, int64_t s, int64_t p, int64_t dil, int ceil_mode)
{
	int64_t o = floor_div(len + 2 * p - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0), s) + 1;

	if (ceil_mode && (o - 1) * s >= len + p)
		o--;
	return o;
}

tk_status tk_pool_parse(const tk_call *call, int nsp, int is_max, tk_pool *pl)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	int lead = 3 - nsp;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2))
		return TK_ERR_UNSUPPORTED;
	if (x->ndim != nsp + 2 || out->ndim != nsp + 2 || x->shape[0] != out->shape[0] ||
	    x->shape[1] != out->shape[1] || !tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	pl->is_max = is_max;
	pl->n = x->shape[0];
	pl->c = x->shape[1];
	for (int d = 0; d < 2; d++) {
		pl->xs[d] = x->stride[d];
		pl->os[d] = out->stride[d];
	}
	for (int d = 0; d < 3; d++) {
		int sd = d - lead; /* the param slot of this dim, < 0 when absent */
		pl->in[d] = sd >= 0 ? x->shape[2 + sd] : 1;
		pl->out[d] = sd >= 0 ? out->shape[2 + sd] : 1;
		pl->xs[2 + d] = sd >= 0 ? x->stride[2 + sd] : 0;
		pl->os[2 + d] = sd >= 0 ? out->stride[2 + sd] : 0;
		pl->k[d] = sd >= 0 ? (int64_t)tk_param_num(call, sd, 2.0) : 1;
		pl->s[d] = sd >= 0 ? (int64_t)tk_param_num(call, nsp + sd, 2.0) : 1;
		pl->p[d] = sd >= 0 ? (int64_t)tk_param_num(call, 2 * nsp + sd, 0.0) : 0;
		pl->dil[d] = sd >= 0 && is_max ? (int64_t)tk_param_num(call, 3 * nsp + sd, 1.0) : 1;
	}
	int flags = is_max ? 4 * nsp : 3 * nsp;
	pl->ceil_mode = tk_param_num(call, flags, 0.0) != 0.0;
	pl->count_include_pad = !is_max && tk_param_num(call, flags + 1, 1.0) != 0.0;
	for (int d = 0; d < 3; d++) {
		if (pl->k[d] < 1 || pl->s[d] < 1 || pl->p[d] < 0 || pl->dil[d] < 1)
			return TK_ERR_UNSUPPORTED;
		if (2 * pl->p[d] > (pl->k[d] - 1) * pl->dil[d] + 1)
			return TK_ERR_UNSUPPORTED;
		if (pl->out[d] != pooled_len(pl->in[d], pl->k[d], pl->s[d], pl->p[d], pl->dil[d],
		                             pl->ceil_mode) ||
		    pl->out[d] < 1)
			return TK_ERR_UNSUPPORTED;
	}
	return TK_OK;
}
