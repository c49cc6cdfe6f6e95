/*
 * parity_quantization.c - fp8 e4m3 quantization per tensor and per token on
 * the GPU against the CPU references, codes and scales bit for bit: every
 * manifest workload (parity.h), then odd widths and padded rows, a given
 * scale, codes written as u8, a per-tensor scale over more than the L2
 * holds (the quantizing pass walks the tiles backwards) and over dense
 * tensors the SMs hold (one cooperative kernel), and empty tensors.
 */
#include <stdio.h>
#include <string.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(quantization)

/* The static scale a per-tensor variant 1 gives: x is drawn from [-3, 3]. */
static void plant_scale(parity_run *r, uint64_t *rng)
{
	tk_tensor *s = parity_tensor(r, "input_scale");

	if (s)
		tt_set(s, 0, 3.0 / 448.0);
}

/* x [rows, width]; variant 1: a given scale (per tensor); 2: the codes as u8. */
static void quant_case(const char *op, tk_dtype dt, int64_t rows, int64_t width, int64_t pad,
                       int variant)
{
	static const char *const what[] = { "computed scale", "given scale", "u8 codes" };
	int per_tensor = strstr(op, "tensor") != NULL;
	parity_case c;

	parity_special(&c, op, dt, per_tensor || variant != 1 ? what[variant] : what[0]);
	parity_shape(&c, "x", 2, (int64_t[]){ rows, width });
	if (per_tensor && variant == 1) {
		parity_shape(&c, "input_scale", 1, (int64_t[]){ 1 });
		c.plant = plant_scale;
	}
	if (variant == 2)
		parity_retype(&c, "q", TK_U8);
	c.pad = pad;
	parity_check(&c);
}

Test(parity_quantization, per_tensor_and_per_token_codes_and_scales_match_cpu_exactly)
{
	parity_row_cases("quant_fp8_per_tensor", 3, quant_case);
	parity_row_cases("quant_fp8_per_token", 3, quant_case);
}

/*
 * A computed per-tensor scale over 64 MiB of bf16 and f16, more than 2/3
 * of an H200's L2: the quantizing pass walks the tiles last to first.
 */
Test(parity_quantization, per_tensor_past_the_l2_walked_backwards_matches_cpu_exactly)
{
	quant_case("quant_fp8_per_tensor", TK_BF16, 4096, 8192, 0, 0);
	quant_case("quant_fp8_per_tensor", TK_F16, 4096, 8192, 0, 0);
	/* u8 codes, and a last tile the rows fill only in part */
	quant_case("quant_fp8_per_tensor", TK_BF16, 4099, 8200, 0, 2);
}

/*
 * A computed per-tensor scale over dense tensors of 2 to 40 MiB, which the
 * SMs hold: one cooperative kernel reads x once, quantizing after a grid
 * barrier. bf16 of 32 MiB, f32 of 16 MiB (1025 vectors a row), f16 with u8
 * codes and rows that end mid-block; padded rows (not dense) take the two
 * kernels.
 */
Test(parity_quantization, per_tensor_held_on_chip_matches_cpu_exactly)
{
	quant_case("quant_fp8_per_tensor", TK_BF16, 4096, 4096, 0, 0);
	quant_case("quant_fp8_per_tensor", TK_F32, 1024, 4100, 0, 0);
	quant_case("quant_fp8_per_tensor", TK_F16, 3001, 1032, 0, 2);
	quant_case("quant_fp8_per_tensor", TK_BF16, 1000, 4096, 8, 0);
}

Test(parity_quantization, both_accept_zero_rows)
{
	quant_case("quant_fp8_per_tensor", TK_F32, 0, 8, 0, 0);
	quant_case("quant_fp8_per_token", TK_F32, 0, 8, 0, 0);
}

/* quant_fp8_per_token_group: x [rows, width] in group_size groups, codes and scales exact. */
static void group_case(tk_dtype dt, int64_t rows, int64_t width, int64_t group)
{
	parity_case c;

	parity_special(&c, "quant_fp8_per_token_group", dt, group == 64 ? "groups of 64" : "");
	parity_shape(&c, "x", 2, (int64_t[]){ rows, width });
	parity_param_int(&c, "group_size", group);
	parity_check(&c);
}

Test(parity_quantization, per_token_group_on_partial_groups_matches_cpu_exactly)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		group_case(dt, 7, 300, 128);
		group_case(dt, 3, 17, 128);
		group_case(dt, 33, 7168, 128);
		group_case(dt, 5, 200, 64);
		group_case(dt, 1000, 256, 128);
	}
}

/* rms_norm_quant_fp8: x [rows, width], a computed or a given scale. */
static void rms_case(tk_dtype dt, int64_t rows, int64_t width, int given)
{
	parity_case c;

	parity_special(&c, "rms_norm_quant_fp8", dt, given ? "given scale" : "per-token scale");
	parity_shape(&c, "x", 2, (int64_t[]){ rows, width });
	parity_shape(&c, "weight", 1, (int64_t[]){ width });
	if (given)
		parity_shape(&c, "input_scale", 1, (int64_t[]){ 1 });
	parity_check(&c);
}

Test(parity_quantization, rms_norm_quant_on_odd_widths_matches_cpu)
{
	for (size_t d = 0; d < 3; d++) {
		tk_dtype dt = tt_float_dtypes[d];
		for (int given = 0; given < 2; given++) {
			rms_case(dt, 7, 1, given);
			rms_case(dt, 7, 17, given);
			rms_case(dt, 3, 4097, given);
			rms_case(dt, 130, 8192, given);
		}
	}
}
