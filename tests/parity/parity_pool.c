/*
 * parity_pool.c - max and average pooling in 1 to 3 dims on the GPU
 * against the CPU references (max bit for bit): every manifest workload
 * (parity.h), then odd and even sizes, padded rows, windows of 3 with
 * padding, ceil_mode, dilation and count_include_pad, and an empty batch.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(pool)

static const char *const axes[3] = { "d", "h", "w" };

/*
 * NC[D]HW with N 2 (0 when rows is 0), C 3, W = width, H = rows (4 when
 * rows is 0), D 3. Variant 0: 2-wide windows, stride 2; 1: 3-wide with
 * padding 1 and ceil_mode, and (average) count_include_pad off; 2: as 1,
 * and a dilation of 2 (max).
 */
static void pool_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                      int variant)
{
	int nsp = op[strlen(op) - 2] - '0', is_max = !strncmp(op, "max", 3);
	int64_t shape[5];
	parity_case c;
	char what[64], name[32];

	snprintf(what, sizeof(what), "variant %d", variant);
	parity_special(&c, op, dt, what);
	shape[0] = rows == 0 ? 0 : 2;
	shape[1] = 3;
	for (int d = 0; d < nsp; d++)
		shape[2 + d] = d == nsp - 1 ? width : (d == nsp - 2 ? (rows ? rows : 4) : 3);
	parity_shape(&c, "x", nsp + 2, shape);
	for (int d = 0; d < nsp; d++) {
		const char *ax = axes[3 - nsp + d];

		snprintf(name, sizeof(name), "kernel_%s", ax);
		parity_param_int(&c, name, variant ? 3 : 2);
		snprintf(name, sizeof(name), "stride_%s", ax);
		parity_param_int(&c, name, 2);
		snprintf(name, sizeof(name), "padding_%s", ax);
		parity_param_int(&c, name, variant ? 1 : 0);
		if (is_max) {
			snprintf(name, sizeof(name), "dilation_%s", ax);
			parity_param_int(&c, name, variant == 2 ? 2 : 1);
		}
	}
	parity_param_bool(&c, "ceil_mode", variant != 0);
	if (!is_max)
		parity_param_bool(&c, "count_include_pad", variant != 1);
	c.pad = pad;
	parity_check(&c);
}

static const char *const ops[] = { "max_pool1d", "max_pool2d", "max_pool3d",
	                           "avg_pool1d", "avg_pool2d", "avg_pool3d" };

Test(parity_pool, max_and_avg_in_1d_2d_3d_match_cpu_max_exactly)
{
	static const int64_t ws[] = { 3, 8, 17, 224, 2048 };

	for (int o = 0; o < 6; o++) {
		for (size_t k = 0; k < 3; k++) {
			for (int v = 0; v < 3; v++) {
				for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
					pool_case(ops[o], tt_float_dtypes[k], 9, ws[w], 0, v);
					pool_case(ops[o], tt_float_dtypes[k], 6, ws[w], 3, v);
					/* even rows, packed: 2x2 windows of exact halves */
					pool_case(ops[o], tt_float_dtypes[k], 8, ws[w], 0, v);
				}
			}
		}
	}
}

Test(parity_pool, every_pool_accepts_an_empty_batch)
{
	for (int o = 0; o < 6; o++)
		pool_case(ops[o], TK_F32, 0, 8, 0, 0);
}
