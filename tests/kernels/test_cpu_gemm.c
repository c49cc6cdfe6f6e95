/*
 * test_cpu_gemm.c - the CPU references of gemm and bmm against a naive
 * double loop over logical elements: both layouts of b, alpha, bias, the
 * residual (also left-out bias with a residual, and a residual that is c
 * itself), padded rows, odd sizes, and bmm with batch strides.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "kernels/tk_test_util.h"

/* Norm-wise tolerance of a reference (rounded once) against double arithmetic. */
static double ref_tol(tk_dtype dt)
{
	return dt == TK_F32 ? 2e-6 : dt == TK_F16 ? 1e-3 : 8e-3;
}

static const tk_kernel_entry *entry(const char *op)
{
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert_not_null(e, "no table entry for %s", op);
	return e;
}

/*
 * A 3-D tensor [b, r, c] whose rows carry `pad` extra elements and whose
 * batches are `gap` elements further apart than packed rows would put them.
 */
static tk_tensor batch_tensor(tk_dtype dt, int64_t b, int64_t r, int64_t c, int64_t pad,
                              int64_t gap)
{
	tk_tensor t;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = 3;
	t.shape[0] = b;
	t.shape[1] = r;
	t.shape[2] = c;
	t.stride[2] = 1;
	t.stride[1] = c + pad;
	t.stride[0] = r * (c + pad) + gap;
	t.data = calloc((size_t)(b * t.stride[0] + 1), tk_dtype_size(dt));
	return t;
}

/*
 * want[z][i][j] = alpha * sum_p a[z][i][p] b[z][p][j] + bias[j] + res[z][i][j]
 * over logical elements (a, res, want: batch * m rows; b per batch).
 */
static void naive(double *want, const tk_tensor *a, const tk_tensor *b, const tk_tensor *bias,
                  const double *res, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_b,
                  double alpha)
{
	for (int64_t z = 0; z < batch; z++) {
		for (int64_t i = 0; i < m; i++) {
			for (int64_t j = 0; j < n; j++) {
				double acc = 0.0;
				for (int64_t p = 0; p < k; p++) {
					int64_t bi = trans_b ? j * k + p : p * n + j;
					acc += tt_get(a, (z * m + i) * k + p) *
					       tt_get(b, z * n * k + bi);
				}
				double v = alpha * acc + (bias ? tt_get(bias, j) : 0.0);
				int64_t o = (z * m + i) * n + j;
				want[o] = v + (res ? res[o] : 0.0);
			}
		}
	}
}

/*
 * gemm of [m, k] by b, with bias and residual each 0 (absent), 1 (given) or,
 * for bias, 2 (left out: data NULL while the residual after it is given);
 * alias: the residual is c itself.
 */
static void check_gemm(tk_dtype dt, int64_t m, int64_t n, int64_t k, int trans_b, int bias, int res,
                       int alias, double alpha, int64_t pad)
{
	uint64_t rng = 0x5eedULL ^ (uint64_t)(m * 7919 + n * 31 + k * 3 + trans_b + dt * 101);
	int64_t sa[2] = { m, k }, sb[2] = { k, n }, sc[2] = { m, n };
	tk_call c = { .n_in = res ? 4 : bias ? 3 : 2, .n_out = 1, .n_params = 2 };
	double *want = malloc(sizeof(double) * (size_t)(m * n + 1));
	double *resv = malloc(sizeof(double) * (size_t)(m * n + 1));

	if (trans_b) {
		sb[0] = n;
		sb[1] = k;
	}
	c.params[0] = tt_param_float(alpha);
	c.params[1] = tt_param_bool(trans_b);
	c.in[0] = tt_tensor(dt, 2, sa, pad);
	c.in[1] = tt_tensor(dt, 2, sb, pad + 1);
	c.out[0] = tt_tensor(dt, 2, sc, pad + 2);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	tt_fill(&c.in[1], &rng, -1.0, 1.0);
	if (bias == 1) {
		c.in[2] = tt_tensor(dt, 1, &n, 0);
		tt_fill(&c.in[2], &rng, -1.0, 1.0);
	}
	if (res) {
		if (alias) {
			c.in[3] = c.out[0];
			tt_fill(&c.out[0], &rng, -1.0, 1.0);
		} else {
			c.in[3] = tt_tensor(dt, 2, sc, pad + 3);
			tt_fill(&c.in[3], &rng, -1.0, 1.0);
		}
		for (int64_t i = 0; i < m * n; i++)
			resv[i] = tt_get(&c.in[3], i);
	}
	naive(want, &c.in[0], &c.in[1], bias == 1 ? &c.in[2] : NULL, res ? resv : NULL, 1, m, n, k,
	      trans_b, alpha);
	cr_assert_eq(entry("gemm")->cpu(&c), TK_OK, "gemm %ldx%ldx%ld refused", (long)m, (long)n,
	             (long)k);
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt),
	              "gemm %s %ldx%ldx%ld tb %d bias %d res %d alias %d", tk_dtype_name(dt),
	              (long)m, (long)n, (long)k, trans_b, bias, res, alias);
	free(want);
	free(resv);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.in[2]);
	if (res && !alias)
		tt_free(&c.in[3]);
	tt_free(&c.out[0]);
}

Test(cpu_gemm, matches_a_double_loop_for_both_layouts_alpha_bias_and_residual)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		for (int tb = 0; tb <= 1; tb++) {
			check_gemm(dt, 1, 1, 1, tb, 0, 0, 0, 1.0, 0);
			check_gemm(dt, 7, 5, 3, tb, 1, 0, 0, 1.0, 0);
			check_gemm(dt, 33, 65, 129, tb, 1, 1, 0, 0.5, 0);
			check_gemm(dt, 33, 65, 129, tb, 0, 1, 0, -2.0, 3);
			check_gemm(dt, 17, 9, 257, tb, 1, 1, 0, 1.0, 1);
		}
	}
}

Test(cpu_gemm, adds_the_residual_when_the_bias_is_left_out)
{
	for (size_t d = 0; d < 3; d++) {
		check_gemm(tt_float_dtypes[d], 9, 13, 31, 1, 2, 1, 0, 1.0, 0);
		check_gemm(tt_float_dtypes[d], 2, 3, 70, 0, 2, 1, 0, 0.25, 2);
	}
}

Test(cpu_gemm, reads_a_residual_that_is_c_itself_before_writing_c)
{
	for (size_t d = 0; d < 3; d++) {
		check_gemm(tt_float_dtypes[d], 11, 19, 23, 1, 1, 1, 1, 1.0, 0);
		check_gemm(tt_float_dtypes[d], 5, 64, 128, 0, 2, 1, 1, -1.0, 1);
	}
}

Test(cpu_gemm, refuses_a_residual_of_the_wrong_shape)
{
	int64_t sa[2] = { 4, 8 }, sb[2] = { 8, 3 }, sc[2] = { 4, 3 }, sr[2] = { 3, 4 };
	tk_call c = { .n_in = 4, .n_out = 1, .n_params = 2 };

	c.params[0] = tt_param_float(1.0);
	c.params[1] = tt_param_bool(0);
	c.in[0] = tt_tensor(TK_F32, 2, sa, 0);
	c.in[1] = tt_tensor(TK_F32, 2, sb, 0);
	c.in[3] = tt_tensor(TK_F32, 2, sr, 0);
	c.out[0] = tt_tensor(TK_F32, 2, sc, 0);
	cr_expect_eq(entry("gemm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.in[3]);
	tt_free(&c.out[0]);
}

static void check_bmm(tk_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t k, int trans_b,
                      double alpha, int64_t pad, int64_t gap)
{
	uint64_t rng = 0xb33fULL ^ (uint64_t)(batch * 13 + m * 7919 + n * 31 + k + trans_b + dt);
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };
	double *want = malloc(sizeof(double) * (size_t)(batch * m * n + 1));

	c.params[0] = tt_param_float(alpha);
	c.params[1] = tt_param_bool(trans_b);
	c.in[0] = batch_tensor(dt, batch, m, k, pad, gap);
	c.in[1] = trans_b ? batch_tensor(dt, batch, n, k, pad + 1, gap + 3)
	                  : batch_tensor(dt, batch, k, n, pad + 1, gap + 3);
	c.out[0] = batch_tensor(dt, batch, m, n, pad + 2, gap + 5);
	tt_fill(&c.in[0], &rng, -1.0, 1.0);
	tt_fill(&c.in[1], &rng, -1.0, 1.0);
	naive(want, &c.in[0], &c.in[1], NULL, NULL, batch, m, n, k, trans_b, alpha);
	cr_assert_eq(entry("bmm")->cpu(&c), TK_OK, "bmm %ldx%ldx%ldx%ld refused", (long)batch,
	             (long)m, (long)n, (long)k);
	cr_expect_leq(tt_rel_err(&c.out[0], want), ref_tol(dt), "bmm %s %ldx%ldx%ldx%ld tb %d",
	              tk_dtype_name(dt), (long)batch, (long)m, (long)n, (long)k, trans_b);
	free(want);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}

Test(cpu_bmm, matches_a_double_loop_per_batch_with_batch_and_row_strides)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		for (int tb = 0; tb <= 1; tb++) {
			check_bmm(dt, 1, 1, 1, 1, tb, 1.0, 0, 0);
			check_bmm(dt, 3, 7, 5, 9, tb, 0.5, 0, 0);
			check_bmm(dt, 3, 17, 33, 65, tb, -1.0, 2, 7);
			check_bmm(dt, 4, 1, 64, 128, tb, 1.0, 1, 0);
		}
	}
}

Test(cpu_bmm, refuses_batches_that_differ)
{
	tk_call c = { .n_in = 2, .n_out = 1, .n_params = 2 };

	c.params[0] = tt_param_float(1.0);
	c.params[1] = tt_param_bool(0);
	c.in[0] = batch_tensor(TK_F32, 3, 4, 8, 0, 0);
	c.in[1] = batch_tensor(TK_F32, 2, 8, 5, 0, 0);
	c.out[0] = batch_tensor(TK_F32, 3, 4, 5, 0, 0);
	cr_expect_eq(entry("bmm")->cpu(&c), TK_ERR_UNSUPPORTED);
	tt_free(&c.in[0]);
	tt_free(&c.in[1]);
	tt_free(&c.out[0]);
}
