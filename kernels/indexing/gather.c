/*
 * gather.c - the CPU references of embedding and gather_rows: rows of a
 * source matrix picked by integer indices, copied bit for bit.
 *
 *   embedding    in: table [V, H], ids (rank 1..4, i32 or i64); out ids.shape + [H]
 *   gather_rows  in: x [N, ...], index [M];                     out [M] + x.shape[1:]
 *
 * An index outside [0, rows of the source) writes a row of zeros and reads
 * nothing. gather.h describes the row view both backends take.
 */
#include <string.h>

#include "gather.h"

tk_status tk_gather_parse(const tk_call *call, tk_gather *g)
{
	const tk_tensor *src = &call->in[0], *idx = &call->in[1], *out = &call->out[0];

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(&src, 1) ||
	    out->dtype != src->dtype || src->ndim < 2 ||
	    (idx->dtype != TK_I32 && idx->dtype != TK_I64))
		return TK_ERR_UNSUPPORTED;
	memset(g, 0, sizeof(*g));
	g->elem = tk_dtype_size(src->dtype);
	g->rows = src->shape[0];
	g->src_ld = src->stride[0];
	g->width = 1;
	/* Every dim past the first is packed in both, so a row is one run of width elements. */
	for (int d = src->ndim - 1; d >= 1; d--) {
		if (src->stride[d] != g->width)
			return TK_ERR_UNSUPPORTED;
		g->width *= src->shape[d];
	}
	g->n = tk_numel(idx);
	if (idx->ndim < 1 || idx->ndim > 4 || out->ndim != idx->ndim + src->ndim - 1)
		return TK_ERR_UNSUPPORTED;
	for (int d = 0; d < idx->ndim; d++)
		if (out->shape[d] != idx->shape[d])
			return TK_ERR_UNSUPPORTED;
	int64_t w = 1;
	for (int d = out->ndim - 1; d >= idx->ndim; d--) {
		if (out->shape[d] != src->shape[d - idx->ndim + 1] || out->stride[d] != w)
			return TK_ERR_UNSUPPORTED;
		w *= out->shape[d];
	}
	/* The index dims of out must be evenly spaced rows, out_ld apart. */
	g->out_ld = out->stride[idx->ndim - 1];
	int64_t s = g->out_ld * out->shape[idx->ndim - 1];
	for (int d = idx->ndim - 2; d >= 0; d--) {
		if (out->shape[d] != 1 && out->stride[d] != s)
			return TK_ERR_UNSUPPORTED;
		s *= out->shape[d];
	}
	g->idx64 = idx->dtype == TK_I64;
	g->idx_ndim = idx->ndim;
	for (int d = 0; d < idx->ndim; d++) {
		g->idx_shape[d] = idx->shape[d];
		g->idx_stride[d] = idx->stride[d];
	}
	return TK_OK;
}

static int64_t index_at(const tk_tensor *idx, const tk_gather *g, int64_t e)
{
	int64_t off = tk_gather_index_offset(g, e);

	return g->idx64 ? ((const int64_t *)idx->data)[off] : ((const int32_t *)idx->data)[off];
}

static tk_status cpu_gather(const tk_call *call)
{
	tk_gather g;
	tk_status st = tk_gather_parse(call, &g);

	if (st != TK_OK)
		return st;
	const char *src = call->in[0].data;
	char *out = call->out[0].data;
	size_t row_bytes = (size_t)g.width * g.elem;
	for (int64_t e = 0; e < g.n; e++) {
		int64_t r = index_at(&call->in[1], &g, e);
		char *dst = out + (size_t)(e * g.out_ld) * g.elem;
		if (r >= 0 && r < g.rows)
			memcpy(dst, src + (size_t)(r * g.src_ld) * g.elem, row_bytes);
		else
			memset(dst, 0, row_bytes);
	}
	return TK_OK;
}

tk_status tk_cpu_embedding(const tk_call *call)
{
	return call->in[0].ndim == 2 ? cpu_gather(call) : TK_ERR_UNSUPPORTED;
}

tk_status tk_cpu_gather_rows(const tk_call *call)
{
	return call->in[1].ndim == 1 ? cpu_gather(call) : TK_ERR_UNSUPPORTED;
}
