/*
 * gemm_fp8.c - CPU references of the fp8 e4m3 GEMMs:
 *   gemm_fp8  a [M, K], b [N, K], a_scale, b_scale, bias?, residual? -> c [M, N]
 *   bmm_fp8   a [B, M, K], b [B, N, K], a_scale [1|B], b_scale [1|B] -> c [B, M, N]
 * The codes decode exactly (every e4m3 value and every product of two is
 * exact in f32 and double). Each 128-wide K block's dot product is summed
 * in double and rounded to f32 once, then promoted into the f32 total the
 * way gemm_fp8.h describes: times its scales for block scales, unscaled
 * with the one scale applied at the end otherwise. The GPU's block sums
 * differ from these by the rounding of an f32 sum only.
 */
#include "cpu_util.h"
#include "gemm_fp8.h"

static void decode_table(float t[256])
{
	for (int v = 0; v < 256; v++)
		t[v] = tk_fp8e4m3_to_f32((uint8_t)v);
}

/* The f32 result of one element before bias and residual. */
static float fp8_dot(const tk_fp8_problem *p, const float *lut, int64_t bi, int64_t m, int64_t n)
{
	const uint8_t *ar = p->a + bi * p->a_bstride + m * p->lda;
	const uint8_t *br = p->b + bi * p->b_bstride + n * p->ldb;
	const float *sa = p->sa + bi * p->sa_bstride, *sb = p->sb + bi * p->sb_bstride;
	float total = 0.0f;

	for (int64_t kb = 0; kb < p->kblocks; kb++) {
		int64_t k0 = kb * TK_FP8_KBLOCK, k1 = k0 + TK_FP8_KBLOCK;
		double d = 0.0;
		if (k1 > p->k)
			k1 = p->k;
		for (int64_t k = k0; k < k1; k++)
			d += (double)lut[ar[k]] * (double)lut[br[k]];
		if (p->layout == TK_FP8_BLOCK)
			total += (float)d * (sa[m * p->kblocks + kb] *
			                     sb[(n / TK_FP8_KBLOCK) * p->kblocks + kb]);
		else
			total += (float)d;
	}
	if (p->layout == TK_FP8_PER_ROW)
		return total * (sa[m] * sb[n]);
	if (p->layout == TK_FP8_PER_TENSOR)
		return total * (sa[0] * sb[0]);
	return total;
}

static void fp8_run(const tk_fp8_problem *p)
{
	float lut[256];

	decode_table(lut);
	for (int64_t bi = 0; bi < p->batch; bi++)
		for (int64_t m = 0; m < p->m; m++)
			for (int64_t n = 0; n < p->n; n++) {
				float v = fp8_dot(p, lut, bi, m, n);
				if (p->bias)
					v += cpu_load(p->bias, p->c_dtype, n);
				if (p->res)
					v += cpu_load(p->res, p->c_dtype, m * p->ldr + n);
				cpu_store(p->c, p->c_dtype, bi * p->c_bstride + m * p->ldc + n, v);
			}
}

tk_status tk_cpu_gemm_fp8(const tk_call *call)
{
	tk_fp8_problem p;
	tk_status st = tk_fp8_gemm_parse(call, &p);

	if (st == TK_OK)
		fp8_run(&p);
	return st;
}

tk_status tk_cpu_bmm_fp8(const tk_call *call)
{
	tk_fp8_problem p;
	tk_status st = tk_fp8_bmm_parse(call, &p);

	if (st == TK_OK)
		fp8_run(&p);
	return st;
}
