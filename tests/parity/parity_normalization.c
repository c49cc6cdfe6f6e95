/*
 * parity_normalization.c - rms_norm, layer_norm and their fused-residual
 * forms on the GPU against their CPU references: every manifest workload
 * (parity.h), then odd widths, padded rows, one row, many narrow rows,
 * rows of 262144, many rows of 1024 to 4096, layer_norm without its bias,
 * and empty tensors. The fused forms' updated residual is compared too.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(normalization)

/* x [rows, width] (and the residual), weight, a bias unless variant 1. */
static void norm_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                      int variant)
{
	int layer = strstr(op, "layer") != NULL;
	parity_case c;
	char what[64];

	snprintf(what, sizeof(what), "%s", layer && variant == 1 ? "no bias" : "variant 0");
	parity_special(&c, op, dt, what);
	parity_shape(&c, "x", 2, (int64_t[]){ rows, width });
	if (parity_tensor_index(&c, "residual") >= 0)
		parity_shape(&c, "residual", 2, (int64_t[]){ rows, width });
	parity_shape(&c, "weight", 1, (int64_t[]){ width });
	if (layer && variant != 1)
		parity_shape(&c, "bias", 1, (int64_t[]){ width });
	parity_param_float(&c, "eps", layer ? 1e-5 : 1e-6);
	c.pad = pad;
	parity_check(&c);
}

Test(parity_normalization, every_norm_matches_cpu_residual_included)
{
	parity_row_cases("rms_norm", 1, norm_case);
	parity_row_cases("layer_norm", 2, norm_case);
	parity_row_cases("fused_add_rms_norm", 1, norm_case);
	parity_row_cases("fused_add_layer_norm", 2, norm_case);
}

/*
 * layer_norm and its fused form over many rows of 1024 to 4096, the shapes
 * of 2 and 4 vectors a thread and several rows a block: every dtype, with
 * and without a bias.
 */
Test(parity_normalization, layer_norms_of_many_rows_match_cpu)
{
	static const char *const ops[] = { "layer_norm", "fused_add_layer_norm" };
	static const int64_t ws[] = { 1024, 2048, 4096 };

	for (int o = 0; o < 2; o++)
		for (size_t k = 0; k < 3; k++)
			for (int v = 0; v < 2; v++)
				for (size_t w = 0; w < 3; w++)
					norm_case(ops[o], tt_float_dtypes[k], 900, ws[w], 0, v);
}

/* rms_norm with a weight near 1 over its kernels' row shapes. */
static void rms_norm_case(tk_dtype dt, int64_t rows, int64_t w, int64_t pad)
{
	parity_case c;

	parity_special(&c, "rms_norm", dt, "weight in [0.5, 1.5]");
	parity_shape(&c, "x", 2, (int64_t[]){ rows, w });
	parity_shape(&c, "weight", 1, (int64_t[]){ w });
	parity_param_float(&c, "eps", 1e-6);
	parity_range(&c, "weight", 0.5, 1.5);
	c.pad = pad;
	parity_check(&c);
}

Test(parity_normalization, rms_norm_matches_cpu_on_its_row_shapes)
{
	static const int64_t ws[] = { 1, 3, 17, 1000, 4097 };

	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (size_t w = 0; w < sizeof(ws) / sizeof(ws[0]); w++) {
			rms_norm_case(dt, 7, ws[w], 0);
			rms_norm_case(dt, 7, ws[w], 3);
		}
		rms_norm_case(dt, 3, 4096, 0);   /* vector path, block per row */
		rms_norm_case(dt, 3, 4096, 8);   /* vector path with padded rows */
		rms_norm_case(dt, 5000, 64, 0);  /* many narrow rows, warp per row */
		rms_norm_case(dt, 2, 262144, 0); /* the widest supported row */
	}
}

Test(parity_normalization, every_norm_accepts_zero_rows)
{
	static const char *const ops[] = { "rms_norm", "layer_norm", "fused_add_rms_norm",
		                           "fused_add_layer_norm" };

	for (int o = 0; o < 4; o++)
		norm_case(ops[o], TK_F32, 0, 8, 0, 0);
}
