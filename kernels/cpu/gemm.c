/*
 * gemm.c - CPU reference of gemm: c = alpha * (a b) [+ bias].
 * a [M, K]; b [K, N], or [N, K] when trans_b; optional bias [N]; c [M, N].
 * Leading dims of a and c flatten into M when evenly spaced. Params:
 * 0 "alpha", 1 "trans_b". Products accumulate in double here (the CUDA
 * kernels use f32), so the reference is the more exact of the two.
 */
#include "cpu_util.h"

tk_status tk_cpu_gemm(const tk_call *call)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *bias = call->n_in > 2 ? &call->in[2] : NULL;
	const tk_tensor *ts[4] = { c, a, b, bias };
	double alpha = tk_param_num(call, 0, 1.0);
	int trans_b = tk_param_num(call, 1, 0.0) != 0.0;
	int64_t m, k, n, lda, ldb, ldc, bn, bk, cm, cn;
	tk_dtype dt = a->dtype;

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(ts, bias ? 4 : 3))
		return TK_ERR_UNSUPPORTED;
	if (tk_matrix_view(a, &m, &k, &lda) != TK_OK || b->ndim != 2 ||
	    tk_matrix_view(b, &bk, &bn, &ldb) != TK_OK ||
	    tk_matrix_view(c, &cm, &cn, &ldc) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (trans_b) { /* b is [N, K] */
		int64_t t = bk;
		bk = bn;
		bn = t;
	}
	if (bk != k || cm != m || cn != bn)
		return TK_ERR_UNSUPPORTED;
	n = bn;
	if (bias && (tk_numel(bias) != n || !tk_last_dim_packed(bias)))
		return TK_ERR_UNSUPPORTED;

	int64_t sbk = trans_b ? 1 : ldb, sbn = trans_b ? ldb : 1;
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double acc = 0.0;
			for (int64_t p = 0; p < k; p++) {
				double av = cpu_load(a->data, dt, i * lda + p);
				acc += av * cpu_load(b->data, dt, p * sbk + j * sbn);
			}
			acc *= alpha;
			if (bias)
				acc += cpu_load(bias->data, dt, j);
			cpu_store(c->data, dt, i * ldc + j, (float)acc);
		}
	}
	return TK_OK;
}
