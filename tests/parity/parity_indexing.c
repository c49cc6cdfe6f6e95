/*
 * parity_indexing.c - embedding and gather_rows on the GPU against their
 * CPU references, bit for bit: every manifest workload (scaled; ids and
 * indices random rows with every 8th out of range, whose rows must be
 * zeros), then rows of odd widths (the 2- and 4-byte copies), padded
 * source rows, ids of rank 2 in i64, a source seen one element past an
 * aligned base, and no indices at all. decode_advance: the workloads,
 * then a short history ring over padded rows with lengths at INT32_MAX
 * and one below it, and no rows at all.
 */
#include <stdio.h>

#include "kernels/tk_test_util.h"
#include "parity/parity.h"

PARITY_WORKLOAD_TESTS(indexing)

static void gather_case(const char *op, tk_dtype dt, tk_dtype it, int64_t rows, int64_t width,
                        int64_t n0, int64_t n1, int64_t pad, uint32_t misalign)
{
	const int embedding = op[0] == 'e';
	parity_case c;
	char label[96];

	snprintf(label, sizeof(label), "%s ids, width %lld", tk_dtype_name(it), (long long)width);
	parity_special(&c, op, dt, label);
	parity_shape(&c, embedding ? "table" : "x", 2, (int64_t[]){ rows, width });
	if (n1 > 0)
		parity_shape(&c, "ids", 2, (int64_t[]){ n0, n1 });
	else
		parity_shape(&c, embedding ? "ids" : "index", 1, (int64_t[]){ n0 });
	parity_dtype(&c, embedding ? "ids" : "index", it);
	c.pad = pad;
	c.misalign = misalign;
	parity_check(&c);
}

Test(parity_indexing, odd_widths_padded_rows_and_misaligned_sources_match_cpu)
{
	static const char *const ops[] = { "embedding", "gather_rows" };
	static const tk_dtype dts[] = { TK_F32, TK_F16, TK_BF16 };
	static const int64_t widths[] = { 1, 3, 8, 100, 4096, 4097 };

	for (int o = 0; o < 2; o++)
		for (int k = 0; k < 3; k++)
			for (int w = 0; w < 6; w++) {
				gather_case(ops[o], dts[k], TK_I32, 300, widths[w], 77, 0, 0, 0);
				gather_case(ops[o], dts[k], TK_I64, 300, widths[w], 77, 0, 3, 0);
				gather_case(ops[o], dts[k], TK_I32, 300, widths[w], 77, 0, 0, 1u);
			}
}

Test(parity_indexing, ids_of_rank_two_and_no_ids_match_cpu)
{
	gather_case("embedding", TK_BF16, TK_I64, 1000, 256, 4, 33, 0, 0);
	gather_case("embedding", TK_BF16, TK_I32, 1000, 256, 0, 0, 0, 0);
	gather_case("gather_rows", TK_F16, TK_I32, 1000, 256, 0, 0, 0, 0);
}

/* Lengths at the overflow guard and one below it, over the generated ones. */
static void plant_advance(parity_run *r, uint64_t *rng)
{
	tk_tensor *lens = parity_tensor(r, "seq_lens");

	(void)rng;
	for (int64_t b = 0; b < tk_numel(lens); b += 9)
		tt_set(lens, b, b % 2 ? (double)INT32_MAX : (double)(INT32_MAX - 1));
}

static void advance_case(int64_t B, int64_t P, int64_t H, int64_t page_size, int64_t pad)
{
	parity_case c;
	char label[96];

	snprintf(label, sizeof(label), "B %lld, P %lld, H %lld, page %lld, pad %lld", (long long)B,
	         (long long)P, (long long)H, (long long)page_size, (long long)pad);
	parity_special(&c, "decode_advance", TK_I64, label);
	parity_shape(&c, "tokens", 1, (int64_t[]){ B });
	parity_shape(&c, "seq_lens", 1, (int64_t[]){ B });
	parity_shape(&c, "block_tables", 2, (int64_t[]){ B, P });
	parity_shape(&c, "history", 2, (int64_t[]){ B, H });
	parity_param_int(&c, "page_size", page_size);
	c.pad = pad;
	c.plant = plant_advance;
	parity_check(&c);
}

Test(parity_indexing, decode_advance_padded_rows_short_rings_and_the_overflow_guard_match_cpu)
{
	advance_case(77, 5, 3, 16, 3);
	advance_case(128, 1, 1, 1, 0);
	advance_case(33, 256, 4097, 16, 1);
	advance_case(0, 4, 4, 16, 0);
}
