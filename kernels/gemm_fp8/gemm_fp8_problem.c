/*
 * gemm_fp8_problem.c - reading the fp8 GEMMs' calls into a tk_fp8_problem
 * (gemm_fp8.h). The op layer has checked dtypes and shapes against the
 * manifest; this checks what the kernels rely on beyond that (layouts the
 * manifest leaves open, a call built by hand) and refuses the rest.
 */
#include "gemm_fp8.h"

static int is_out_dtype(tk_dtype dt)
{
	return dt == TK_BF16 || dt == TK_F16;
}

/* A rank-2 tensor of rows x cols with a packed last dim: its row stride, or -1. */
static int64_t row_stride(const tk_tensor *t, int64_t rows, int64_t cols)
{
	if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols)
		return -1;
	if (cols > 1 && t->stride[1] != 1)
		return -1;
	if (rows > 1 && t->stride[0] < cols)
		return -1;
	return rows > 1 ? t->stride[0] : cols;
}

static int scale_shape_ok(const tk_tensor *s, int layout, int64_t rows, int64_t kblocks,
                          int64_t groups)
{
	if (s->dtype != TK_F32 || !tk_is_contiguous(s))
		return 0;
	if (layout == TK_FP8_PER_TENSOR)
		return tk_numel(s) == 1;
	if (layout == TK_FP8_PER_ROW)
		return s->ndim == 2 && s->shape[0] == rows && s->shape[1] == 1;
	return s->ndim == 2 && s->shape[0] == groups && s->shape[1] == kblocks;
}

tk_status tk_fp8_gemm_parse(const tk_call *call, tk_fp8_problem *p)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];

	*p = (tk_fp8_problem){ 0 };
	if (call->n_in < 4 || call->n_out < 1 || a->dtype != TK_FP8_E4M3 ||
	    b->dtype != TK_FP8_E4M3 || !is_out_dtype(c->dtype) || a->ndim != 2 || b->ndim != 2)
		return TK_ERR_UNSUPPORTED;
	p->layout = (int)tk_param_num(call, 0, 0);
	if (p->layout < TK_FP8_PER_TENSOR || p->layout > TK_FP8_BLOCK)
		return TK_ERR_UNSUPPORTED;
	p->batch = 1;
	p->m = a->shape[0];
	p->k = a->shape[1];
	p->n = b->shape[0];
	p->kblocks = (p->k + TK_FP8_KBLOCK - 1) / TK_FP8_KBLOCK;
	p->lda = row_stride(a, p->m, p->k);
	p->ldb = row_stride(b, p->n, p->k);
	p->ldc = row_stride(c, p->m, p->n);
	if (p->lda < 0 || p->ldb < 0 || p->ldc < 0 || p->k % 16 != 0)
		return TK_ERR_UNSUPPORTED;
	if (!scale_shape_ok(&call->in[2], p->layout, p->m, p->kblocks, p->m) ||
	    !scale_shape_ok(&call->in[3], p->layout, p->n, p->kblocks,
	                    (p->n + TK_FP8_KBLOCK - 1) / TK_FP8_KBLOCK))
		return TK_ERR_UNSUPPORTED;
	if (tk_has_input(call, 4)) {
		if (call->in[4].dtype != c->dtype || !tk_is_vector_of(&call->in[4], p->n))
			return TK_ERR_UNSUPPORTED;
		p->bias = call->in[4].data;
	}
	if (tk_has_input(call, 5)) {
		const tk_tensor *r = &call->in[5];
		p->ldr = row_stride(r, p->m, p->n);
		if (r->dtype != c->dtype || p->ldr < 0)
			return TK_ERR_UNSUPPORTED;
		p->res = r->data;
	}
	p->a = (const uint8_t *)a->data;
	p->b = (const uint8_t *)b->data;
	p->sa = (const float *)call->in[2].data;
	p->sb = (const float *)call->in[3].data;
	p->c = c->data;
	p->c_dtype = c->dtype;
	return TK_OK;
}

/* A packed rank-3 tensor [batch, rows, cols]. */
static int packed3(const tk_tensor *t, int64_t batch, int64_t rows, int64_t cols)
{
	return t->ndim == 3 && t->shape[0] == batch && t->shape[1] == rows && t->shape[2] == cols &&
	       tk_is_contiguous(t);
}

static int batch_scale_ok(const tk_tensor *s, int64_t batch)
{
	return s->dtype == TK_F32 && s->ndim == 1 && tk_is_contiguous(s) &&
	       (s->shape[0] == 1 || s->shape[0] == batch);
}

tk_status tk_fp8_bmm_parse(const tk_call *call, tk_fp8_problem *p)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];

	*p = (tk_fp8_problem){ 0 };
	if (call->n_in < 4 || call->n_out < 1 || a->dtype != TK_FP8_E4M3 ||
	    b->dtype != TK_FP8_E4M3 || !is_out_dtype(c->dtype) || a->ndim != 3 || b->ndim != 3)
		return TK_ERR_UNSUPPORTED;
	p->layout = TK_FP8_PER_TENSOR;
	p->batch = a->shape[0];
	p->m = a->shape[1];
	p->k = a->shape[2];
	p->n = b->shape[1];
	p->kblocks = (p->k + TK_FP8_KBLOCK - 1) / TK_FP8_KBLOCK;
	if (!packed3(a, p->batch, p->m, p->k) || !packed3(b, p->batch, p->n, p->k) ||
	    !packed3(c, p->batch, p->m, p->n) || p->k % 16 != 0)
		return TK_ERR_UNSUPPORTED;
	if (!batch_scale_ok(&call->in[2], p->batch) || !batch_scale_ok(&call->in[3], p->batch))
		return TK_ERR_UNSUPPORTED;
	p->lda = p->ldb = p->k;
	p->ldc = p->n;
	p->a_bstride = p->m * p->k;
	p->b_bstride = p->n * p->k;
	p->c_bstride = p->m * p->n;
	p->sa_bstride = call->in[2].shape[0] > 1;
	p->sb_bstride = call->in[3].shape[0] > 1;
	p->a = (const uint8_t *)a->data;
	p->b = (const uint8_t *)b->data;
	p->sa = (const float *)call->in[2].data;
	p->sb = (const float *)call->in[3].data;
	p->c = c->data;
	p->c_dtype = c->dtype;
	return TK_OK;
}
