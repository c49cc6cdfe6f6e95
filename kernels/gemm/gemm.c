/*
 * gemm.c - CPU references of gemm and bmm:
 *   c = alpha * (a b) (+ bias) (+ residual)
 * gemm: a [M, K]; b [K, N], or [N, K] when trans_b; optional bias [N];
 * optional residual [M, N], which may be c itself; c [M, N]. Leading dims
 * of a, c and the residual flatten into M when evenly spaced.
 * bmm: a [B, M, K], b [B, K, N] (or [B, N, K]), c [B, M, N], each with its
 * own batch and row strides.
 * Params of both: 0 "alpha", 1 "trans_b". Products accumulate in double
 * here (the CUDA kernels use f32), so the reference is the more exact one.
 */
#include "cpu_util.h"

/* One matrix product, element by element; offsets in elements. */
typedef struct cpu_mm {
	tk_dtype dt;
	int64_t m, n, k;
	const void *a, *b, *bias, *res;
	void *c;
	int64_t oa, ob, or_, oc; /* offsets of this batch */
	int64_t lda, sbk, sbn, ldr, ldc;
	double alpha;
} cpu_mm;

static void cpu_mm_run(const cpu_mm *p)
{
	for (int64_t i = 0; i < p->m; i++) {
		for (int64_t j = 0; j < p->n; j++) {
			double acc = 0.0;
			for (int64_t q = 0; q < p->k; q++) {
				double av = cpu_load(p->a, p->dt, p->oa + i * p->lda + q);
				acc += av * cpu_load(p->b, p->dt, p->ob + q * p->sbk + j * p->sbn);
			}
			acc *= p->alpha;
			if (p->bias)
				acc += cpu_load(p->bias, p->dt, j);
			/* The residual is read before c is written: it may be c. */
			if (p->res)
				acc += cpu_load(p->res, p->dt, p->or_ + i * p->ldr + j);
			cpu_store(p->c, p->dt, p->oc + i * p->ldc + j, (float)acc);
		}
	}
}

tk_status tk_cpu_gemm(const tk_call *call)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *bias = tk_has_input(call, 2) ? &call->in[2] : NULL;
	const tk_tensor *res = tk_has_input(call, 3) ? &call->in[3] : NULL;
	const tk_tensor *ts[5] = { c, a, b, NULL, NULL };
	int trans_b = tk_param_num(call, 1, 0.0) != 0.0;
	int64_t m, k, ldb, bn, bk, cm, cn, rm, rn;
	int nts = 3;
	cpu_mm p = { 0 };

	if (call->n_in < 2 || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	if (bias)
		ts[nts++] = bias;
	if (res)
		ts[nts++] = res;
	if (!tk_same_float_dtype(ts, nts))
		return TK_ERR_UNSUPPORTED;
	if (tk_matrix_view(a, &m, &k, &p.lda) != TK_OK || b->ndim != 2 ||
	    tk_matrix_view(b, &bk, &bn, &ldb) != TK_OK ||
	    tk_matrix_view(c, &cm, &cn, &p.ldc) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (trans_b) { /* b is [N, K] */
		int64_t t = bk;
		bk = bn;
		bn = t;
	}
	if (bk != k || cm != m || cn != bn)
		return TK_ERR_UNSUPPORTED;
	if (bias && (tk_numel(bias) != bn || !tk_last_dim_packed(bias)))
		return TK_ERR_UNSUPPORTED;
	if (res && (tk_matrix_view(res, &rm, &rn, &p.ldr) != TK_OK || rm != m || rn != bn))
		return TK_ERR_UNSUPPORTED;

	p.dt = a->dtype;
	p.m = m;
	p.n = bn;
	p.k = k;
	p.a = a->data;
	p.b = b->data;
	p.bias = bias ? bias->data : NULL;
	p.res = res ? res->data : NULL;
	p.c = c->data;
	p.sbk = trans_b ? 1 : ldb;
	p.sbn = trans_b ? ldb : 1;
	p.alpha = tk_param_num(call, 0, 1.0);
	cpu_mm_run(&p);
	return TK_OK;
}

/* A 3-D tensor with a packed last dim; its batch and row strides. */
static int cpu_batch_view(const tk_tensor *t, int64_t *sbatch, int64_t *srow)
{
	if (t->ndim != 3 || (t->stride[2] != 1 && t->shape[2] > 1))
		return 0;
	*sbatch = t->stride[0];
	*srow = t->stride[1];
	return 1;
}

tk_status tk_cpu_bmm(const tk_call *call)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *ts[3] = { c, a, b };
	int trans_b = tk_param_num(call, 1, 0.0) != 0.0;
	int64_t sa, sb, sc, ldb, bk, bn;
	cpu_mm p = { 0 };

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(ts, 3))
		return TK_ERR_UNSUPPORTED;
	if (!cpu_batch_view(a, &sa, &p.lda) || !cpu_batch_view(b, &sb, &ldb) ||
	    !cpu_batch_view(c, &sc, &p.ldc))
		return TK_ERR_UNSUPPORTED;
	bk = trans_b ? b->shape[2] : b->shape[1];
	bn = trans_b ? b->shape[1] : b->shape[2];
	if (b->shape[0] != a->shape[0] || c->shape[0] != a->shape[0] || bk != a->shape[2] ||
	    c->shape[1] != a->shape[1] || c->shape[2] != bn)
		return TK_ERR_UNSUPPORTED;

	p.dt = a->dtype;
	p.m = a->shape[1];
	p.n = bn;
	p.k = a->shape[2];
	p.a = a->data;
	p.b = b->data;
	p.c = c->data;
	p.sbk = trans_b ? 1 : ldb;
	p.sbn = trans_b ? ldb : 1;
	p.alpha = tk_param_num(call, 0, 1.0);
	for (int64_t z = 0; z < a->shape[0]; z++) {
		p.oa = z * sa;
		p.ob = z * sb;
		p.oc = z * sc;
		cpu_mm_run(&p);
	}
	return TK_OK;
}
