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

static const int64_t widths[] = { 1, 3, 17, 1000, 4097, 8192 };
#define N_WIDTHS (sizeof(widths) / sizeof(widths[0]))

static void row_op_cases(const char *op)
{
	for (size_t k = 0; k < 3; k++) {
		tk_dtype dt = tt_float_dtypes[k];
		for (int v = 0; v < 3; v++) {
			for (size_t w = 0; w < N_WIDTHS; w++) {
				quant_case(op, dt, 7, widths[w], 0, v);
				quant_case(op, dt, 5, widths[w], 3, v);
			}
			quant_case(op, dt, 1, 4096, 0, v);    /* decode: one row */
			quant_case(op, dt, 1, 4095, 0, v);    /* one odd row */
			quant_case(op, dt, 3000, 64, 0, v);   /* many narrow rows */
			quant_case(op, dt, 40, 7168, 8, v);   /* aligned padded rows */
			quant_case(op, dt, 1100, 4096, 0, v); /* many rows: the shapes for many */
			quant_case(op, dt, 3, 16384, 0, v);  /* the widest rows held in registers */
			quant_case(op, dt, 2, 20000, 0, v);  /* past them: the streaming kernels */
			quant_case(op, dt, 2, 262144, 0, v); /* the widest supported row */
		}
	}
}

Test(parity_quantization, per_tensor_and_per_token_codes_and_scales_match_cpu_exactly)
{
	row_op_cases("quant_fp8_per_tensor");
	row_op_cases("quant_fp8_per_token");
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
