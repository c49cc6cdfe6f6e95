/*
 * iter.c - iteration plans and small argument helpers shared by the CPU
 * references and the CUDA launchers (which call them on the host).
 */
#include <string.h>

#include "tk_internal.h"

/*
 * Drop size-1 dims and merge dim d into d+1 where every operand is packed
 * across the pair (stride[d] == stride[d+1] * shape[d+1]). Broadcast dims
 * (stride 0 in some operand) merge only with other broadcast dims of that
 * operand, which the same rule expresses.
 */
static void iter_merge(tk_iter *it)
{
	int nd = 0;

	for (int d = 0; d < it->ndim; d++) {
		if (it->shape[d] == 1)
			continue;
		if (nd > 0) {
			int ok = 1;
			for (int op = 0; op < it->n_ops; op++) {
				if (it->stride[op][nd - 1] != it->stride[op][d] * it->shape[d])
					ok = 0;
			}
			if (ok) {
				it->shape[nd - 1] *= it->shape[d];
				for (int op = 0; op < it->n_ops; op++)
					it->stride[op][nd - 1] = it->stride[op][d];
				continue;
			}
		}
		it->shape[nd] = it->shape[d];
		for (int op = 0; op < it->n_ops; op++)
			it->stride[op][nd] = it->stride[op][d];
		nd++;
	}
	if (nd == 0) { /* a single element (or none): one dim of size numel */
		it->shape[0] = it->numel;
		for (int op = 0; op < it->n_ops; op++)
			it->stride[op][0] = 1;
		nd = 1;
	}
	it->ndim = nd;
}

tk_status tk_iter_broadcast(tk_iter *it, const tk_tensor *out, const tk_tensor *const *ins,
                            int n_in)
{
	if (n_in + 1 > TK_ITER_MAX_OPS || out->ndim > TK_MAX_DIMS)
		return TK_ERR_UNSUPPORTED;
	memset(it, 0, sizeof(*it));
	it->ndim = out->ndim;
	it->n_ops = n_in + 1;
	it->numel = tk_numel(out);
	for (int d = 0; d < out->ndim; d++) {
		it->shape[d] = out->shape[d];
		it->stride[0][d] = out->stride[d];
	}
	for (int k = 0; k < n_in; k++) {
		const tk_tensor *t = ins[k];
		int lead = out->ndim - t->ndim;

		if (lead < 0)
			return TK_ERR_UNSUPPORTED;
		for (int d = 0; d < out->ndim; d++) {
			int64_t s = 0;
			if (d >= lead) {
				int64_t n = t->shape[d - lead];
				if (n != out->shape[d] && n != 1)
					return TK_ERR_UNSUPPORTED;
				s = n == 1 ? 0 : t->stride[d - lead];
			}
			it->stride[k + 1][d] = s;
		}
	}
	iter_merge(it);
	return TK_OK;
}

tk_status tk_iter_rows(tk_iter *it, const tk_tensor *const *ts, int n)
{
	const tk_tensor *t0 = ts[0];
	int outer = t0->ndim > 0 ? t0->ndim - 1 : 0;

	if (n > TK_ITER_MAX_OPS)
		return TK_ERR_UNSUPPORTED;
	memset(it, 0, sizeof(*it));
	it->ndim = outer;
	it->n_ops = n;
	it->numel = 1;
	for (int d = 0; d < outer; d++)
		it->numel *= t0->shape[d];
	for (int k = 0; k < n; k++) {
		if (ts[k]->ndim != t0->ndim)
			return TK_ERR_UNSUPPORTED;
		for (int d = 0; d < t0->ndim; d++) {
			if (ts[k]->shape[d] != t0->shape[d])
				return TK_ERR_UNSUPPORTED;
		}
		for (int d = 0; d < outer; d++)
			it->stride[k][d] = ts[k]->stride[d];
	}
	for (int d = 0; d < outer; d++)
		it->shape[d] = t0->shape[d];
	iter_merge(it);
	return TK_OK;
}

int64_t tk_iter_offset(const tk_iter *it, int op, int64_t i)
{
	int64_t off = 0;

	for (int d = it->ndim - 1; d > 0; d--) {
		int64_t q = i / it->shape[d];
		off += (i - q * it->shape[d]) * it->stride[op][d];
		i = q;
	}
	return off + i * it->stride[op][0];
}

double tk_param_num(const tk_call *call, int idx, double dflt)
{
	if (idx >= call->n_params)
		return dflt;
	switch (call->params[idx].kind) {
	case TK_PARAM_INT:
		return (double)call->params[idx].v.i;
	case TK_PARAM_FLOAT:
		return call->params[idx].v.f;
	case TK_PARAM_BOOL:
		return call->params[idx].v.b ? 1.0 : 0.0;
	default:
		return dflt;
	}
}

int tk_same_float_dtype(const tk_tensor *const *ts, int n)
{
	tk_dtype dt = ts[0]->dtype;

	if (dt != TK_F32 && dt != TK_F16 && dt != TK_BF16)
		return 0;
	for (int k = 1; k < n; k++) {
		if (ts[k]->dtype != dt)
			return 0;
	}
	return 1;
}

int64_t tk_last_dim(const tk_tensor *t)
{
	return t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
}

int tk_last_dim_packed(const tk_tensor *t)
{
	return t->ndim == 0 || t->shape[t->ndim - 1] <= 1 || t->stride[t->ndim - 1] == 1;
}

tk_status tk_matrix_view(const tk_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld)
{
	tk_iter it;
	const tk_tensor *ts[1] = { t };

	if (t->ndim < 1 || !tk_last_dim_packed(t) || tk_iter_rows(&it, ts, 1) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	*cols = t->shape[t->ndim - 1];
	*rows = it.numel;
	if (it.ndim > 1)
		return TK_ERR_UNSUPPORTED;
	/* A single row has no meaningful row stride; call it packed. */
	*ld = it.numel > 1 ? it.stride[0][0] : *cols;
	if (*ld<*cols && * rows> 1)
		return TK_ERR_UNSUPPORTED;
	return TK_OK;
}
