/*
 * parity_reduction.c - softmax, log_softmax, sum, mean, amax and argmax on
 * the GPU against their CPU references: every manifest workload
 * (parity.h), then odd widths, padded rows, large and shifted inputs,
 * masked (-inf) positions, vocabulary-wide rows (the split and cluster
 * kernels, with and without workspace: parity_check runs both), reductions
 * along the first dim and with keepdim, the NaN, tie and signed-zero rules
 * of argmax and amax, and empty tensors.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(reduction)

/*
 * x [rows, width]. Variants: softmax none; log_softmax 1 along dim 0; the
 * reductions 1 along dim 0, 2 with keepdim.
 */
/* Not inlined: GCC at -O3 warns (-Wstring-compare) when it sees a caller's
 * fixed array on one side. */
static __attribute__((noinline)) int same_op(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static void build(parity_case *c, const char *op, tk_dtype dt, int64_t rows, int64_t width,
                  int64_t pad, int variant)
{
	char what[64];

	snprintf(what, sizeof(what), "variant %d", variant);
	parity_special(c, op, dt, what);
	parity_shape(c, "x", 2, (int64_t[]){ rows, width });
	if (same_op(op, "log_softmax")) {
		parity_param_int(c, "dim", variant == 1 ? 0 : -1);
	} else if (!same_op(op, "softmax")) {
		parity_param_int(c, "dim", variant == 1 ? 0 : -1);
		parity_param_bool(c, "keepdim", variant == 2);
	}
	c->pad = pad;
}

static void op_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                    int variant)
{
	parity_case c;

	build(&c, op, dt, rows, width, pad, variant);
	parity_check(&c);
}

Test(parity_reduction, softmax_and_log_softmax_match_cpu_along_either_dim)
{
	parity_row_cases("softmax", 1, op_case);
	parity_row_cases("log_softmax", 2, op_case);
}

Test(parity_reduction, sum_mean_amax_argmax_match_cpu_along_either_dim_with_keepdim)
{
	parity_row_cases("sum", 3, op_case);
	parity_row_cases("mean", 3, op_case);
	parity_row_cases("amax", 3, op_case);
	parity_row_cases("argmax", 3, op_case);
}

/* ---- shifted, masked and wide softmax rows ------------------------------------------ */

/* Masked positions (-inf) as attention uses them: every third, never a row's first. */
static void plant_mask(parity_run *r, uint64_t *rng)
{
	tk_tensor *x = parity_tensor(r, "x");
	int64_t w = x->shape[x->ndim - 1];

	for (int64_t i = 0; i < tk_numel(x); i += 3)
		if (i % w != 0)
			tt_set(x, i, -INFINITY);
}

/* x in [shift - 5, shift + 5], masked or not. */
static void softmax_case(const char *op, tk_dtype dt, int64_t rows, int64_t w, int64_t pad,
                         double shift, int masked)
{
	parity_case c;
	char what[64];

	snprintf(what, sizeof(what), "x in %g +- 5%s", shift, masked ? ", masked" : "");
	parity_special(&c, op, dt, what);
	parity_shape(&c, "x", 2, (int64_t[]){ rows, w });
	parity_range(&c, NULL, shift - 5.0, shift + 5.0);
	if (masked)
		c.plant = plant_mask;
	c.pad = pad;
	parity_check(&c);
}

Test(parity_reduction, softmax_matches_cpu_on_odd_widths_large_inputs_and_masks)
{
	static const int64_t ws[] = { 1, 3, 17, 1000, 4097 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
			softmax_case("softmax", dt, 7, ws[w], 0, 0.0, 0);
			softmax_case("softmax", dt, 7, ws[w], 3, 0.0, 0);
		}
		softmax_case("softmax", dt, 3, 4096, 0, 0.0, 0);
		softmax_case("softmax", dt, 3, 4096, 8, 50.0, 0);
		softmax_case("softmax", dt, 5000, 64, 0, -30.0, 0);
		softmax_case("softmax", dt, 2, 262144, 0, 0.0, 0);
	}
	softmax_case("softmax", TK_F32, 9, 17, 0, 0.0, 1);
	softmax_case("softmax", TK_F32, 9, 4097, 0, 0.0, 1);
	softmax_case("softmax", TK_F32, 4, 333, 0, 1000.0, 0);
}

/*
 * With workspace, rows over 4096 vectors of a tensor within 3/4 of the L2
 * take the split kernels (2 vectors a thread for a few rows, 8 for many);
 * without, the cluster kernel (parity_check runs both). Masked and shifted
 * rows, odd chunk counts, every dtype.
 */
Test(parity_reduction, wide_rows_match_cpu_with_and_without_workspace)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		softmax_case("softmax", dt, 1, 128256, 0, 0.0, 0);
		softmax_case("softmax", dt, 3, 40000, 0, 30.0, 1);
		softmax_case("softmax", dt, 100, 65536 + 64, 8, -20.0, 0);
	}
}

/*
 * Batches of vocabulary rows as the logits of a decode step bring them:
 * the split kernels while the tensor fits their share of the L2, the
 * cluster kernels past it (130 x 128256 f32); masked (softmax) and shifted
 * rows, padded rows, both forms, every dtype.
 */
Test(parity_reduction, batches_of_vocabulary_rows_match_cpu_in_both_forms)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		softmax_case("softmax", dt, 130, 128256, 0, 10.0, 1);
		softmax_case("log_softmax", dt, 130, 128256, 0, -10.0, 0);
		softmax_case("log_softmax", dt, 33, 129280, 8, 0.0, 0);
		softmax_case("softmax", dt, 70, 65536 + 8, 0, 0.0, 0);
	}
}

/* ---- argmax and amax rules -------------------------------------------------------------- */

/*
 * Row r of x (width w) planted with what decides an argmax: 0 all -inf; 1
 * two NaNs and a +inf before them (the first NaN wins); 2 a maximum tied
 * three times, in different vectors; 3 a -0 before a +0 above negative
 * values (equal: the first wins); 4 the maximum in the last element only;
 * 5 a tie within one 16-byte vector.
 */
static void plant_row(tk_tensor *x, int64_t r, int64_t w, int kind)
{
	int64_t at = r * w, a = w / 3, b = a + w / 3 + 1, v = (w / 16) * 8;

	for (int64_t i = 0; i < w; i++)
		tt_set(x, at + i, kind == 0 ? -INFINITY : -1.0 - (double)(i % 7) / 8.0);
	switch (kind) {
	case 1:
		tt_set(x, at + (a > 0 ? a - 1 : 0), INFINITY);
		tt_set(x, at + a, NAN);
		tt_set(x, at + b % w, NAN);
		break;
	case 2:
		tt_set(x, at + a, 1000.0);
		tt_set(x, at + b % w, 1000.0);
		tt_set(x, at + w - 1, 1000.0);
		break;
	case 3:
		tt_set(x, at + a, -0.0);
		tt_set(x, at + b % w, 0.0);
		break;
	case 4:
		tt_set(x, at + w - 1, 1000.0);
		break;
	case 5:
		tt_set(x, at + (v + 5) % w, 250.0);
		tt_set(x, at + (v + 3) % w, 250.0);
		break;
	}
}

/* Rows of every kind; arg 1 (amax): rows 1 and 3 are ties instead (a NaN's
 * payload and a zero's sign are not compared bit for bit). */
static void plant_maxima(parity_run *r, uint64_t *rng)
{
	tk_tensor *x = parity_tensor(r, "x");
	int64_t w = x->shape[1];

	for (int k = 0; k < 6; k++)
		plant_row(x, k, w, r->c->arg != 0.0 && (k == 1 || k == 3) ? 2 : k);
}

Test(parity_reduction, argmax_and_amax_follow_the_nan_and_tie_rules)
{
	static const int64_t ws[] = { 8, 24, 4096, 4097, 20000, 262144 };

	for (size_t k = 0; k < 3; k++) {
		for (size_t i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
			for (int amax = 0; amax <= 1; amax++) {
				parity_case c;

				build(&c, amax ? "amax" : "argmax", tt_float_dtypes[k], 6, ws[i], 0,
				      0);
				snprintf(c.label, sizeof(c.label), "planted maxima");
				c.plant = plant_maxima;
				c.arg = amax;
				parity_check(&c);
			}
		}
	}
}

Test(parity_reduction, every_reduction_accepts_zero_rows)
{
	static const char *const ops[] = {
		"softmax", "log_softmax", "sum", "mean", "amax", "argmax"
	};

	for (int o = 0; o < 6; o++)
		op_case(ops[o], TK_F32, 0, 8, 0, 0);
}
