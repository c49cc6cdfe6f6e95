/*
 * test_indexing.c - the CPU references of embedding and gather_rows: every
 * output row is the source row its index names, bit for bit, in every
 * dtype and index dtype; an index outside the source (negative, or past
 * the last row) gives a row of zeros; ids of rank 2, padded source rows,
 * rows of any width and no indices at all.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/tk_ref_util.h"

static const tk_dtype idx_dtypes[] = { TK_I32, TK_I64 };

/* src [rows, width] (rows padded by pad), idx of shape ishape, out ishape + [width]. */
static void build(tk_call *c, tk_dtype dt, tk_dtype it, int64_t rows, int64_t width, int64_t pad,
                  int indim, const int64_t *ishape, uint64_t *rng)
{
	int64_t src_shape[2] = { rows, width }, oshape[5];

	memset(c, 0, sizeof(*c));
	c->n_in = 2;
	c->n_out = 1;
	c->in[0] = tt_tensor(dt, 2, src_shape, pad);
	tt_fill(&c->in[0], rng, -3.0, 3.0);
	c->in[1] = tt_tensor(it, indim, ishape, 0);
	for (int d = 0; d < indim; d++)
		oshape[d] = ishape[d];
	oshape[indim] = width;
	c->out[0] = tt_tensor(dt, indim + 1, oshape, 0);
	tt_poison(&c->out[0]);
}

/* Every out row equals its source row's bytes, or is all zero bytes when out of range. */
static void check_rows(const tk_call *c, const char *what)
{
	const tk_tensor *src = &c->in[0], *idx = &c->in[1], *out = &c->out[0];
	int64_t n = tk_numel(idx), w = src->shape[1], rows = src->shape[0];
	size_t es = tk_dtype_size(src->dtype);

	for (int64_t e = 0; e < n; e++) {
		int64_t r = (int64_t)tt_get(idx, e);
		const char *got = (const char *)out->data + (size_t)(e * w) * es;
		for (int64_t j = 0; j < w; j++) {
			const char *g = got + (size_t)j * es;
			if (r >= 0 && r < rows) {
				const char *want = (const char *)src->data +
				                   (size_t)(r * src->stride[0] + j) * es;
				cr_assert(memcmp(g, want, es) == 0,
				          "%s: out[%lld][%lld] is not row %lld's", what,
				          (long long)e, (long long)j, (long long)r);
			} else {
				static const char zero[8] = { 0 };
				cr_assert(memcmp(g, zero, es) == 0,
				          "%s: out[%lld] (index %lld, out of range) is not zeros",
				          what, (long long)e, (long long)r);
			}
		}
	}
}

static void run_case(const char *op, tk_dtype dt, tk_dtype it, int64_t rows, int64_t width,
                     int64_t pad, int64_t n, int out_of_range)
{
	char what[128];
	uint64_t rng;
	tk_call c;
	int64_t ishape[2] = { n, 1 };

	snprintf(what, sizeof(what), "%s %s/%s rows %lld width %lld pad %lld n %lld", op,
	         tk_dtype_name(dt), tk_dtype_name(it), (long long)rows, (long long)width,
	         (long long)pad, (long long)n);
	rng = ref_seed(what);
	build(&c, dt, it, rows, width, pad, 1, ishape, &rng);
	for (int64_t e = 0; e < n; e++) {
		int64_t r = (int64_t)(tt_rand_u64(&rng) % (uint64_t)(rows > 0 ? rows : 1));
		if (out_of_range && e % 3 == 1)
			r = e % 2 ? -1 - e : rows + e;
		tt_set(&c.in[1], e, (double)r);
	}
	ref_run(op, &c);
	check_rows(&c, what);
	ref_free_call(&c);
}

Test(indexing, embedding_and_gather_rows_copy_the_named_rows_exactly)
{
	static const char *const ops[] = { "embedding", "gather_rows" };
	static const int64_t widths[] = { 1, 3, 8, 4096 };

	for (int o = 0; o < 2; o++)
		for (size_t k = 0; k < 3; k++)
			for (int i = 0; i < 2; i++)
				for (size_t w = 0; w < 4; w++) {
					run_case(ops[o], tt_float_dtypes[k], idx_dtypes[i], 37,
					         widths[w], 0, 20, 0);
					run_case(ops[o], tt_float_dtypes[k], idx_dtypes[i], 5,
					         widths[w], 3, 9, 0);
				}
}

Test(indexing, ids_outside_the_table_give_rows_of_zeros)
{
	static const char *const ops[] = { "embedding", "gather_rows" };

	for (int o = 0; o < 2; o++)
		for (size_t k = 0; k < 3; k++)
			for (int i = 0; i < 2; i++)
				run_case(ops[o], tt_float_dtypes[k], idx_dtypes[i], 11, 64, 0, 30,
				         1);
}

Test(indexing, extreme_ids_read_nothing_outside_the_table)
{
	/* The table is the only allocation: any read outside it would be a bug ASan sees. */
	static const int64_t bad[] = { INT64_MIN, -1, 7, INT64_MAX };
	tk_call c;
	uint64_t rng = 5;
	int64_t n = 4;

	build(&c, TK_BF16, TK_I64, 7, 16, 0, 1, &n, &rng);
	for (int e = 0; e < 4; e++)
		((int64_t *)c.in[1].data)[e] = bad[e];
	ref_run("embedding", &c);
	for (int64_t j = 0; j < 4 * 16; j++)
		cr_assert_eq(((uint16_t *)c.out[0].data)[j], 0, "element %lld is not zero",
		             (long long)j);
	ref_free_call(&c);
}

Test(indexing, embedding_takes_ids_of_rank_two)
{
	int64_t ishape[2] = { 3, 5 };
	uint64_t rng = 77;
	tk_call c;

	build(&c, TK_F32, TK_I32, 50, 12, 0, 2, ishape, &rng);
	for (int64_t e = 0; e < 15; e++)
		tt_set(&c.in[1], e, (double)((e * 7) % 50));
	tt_set(&c.in[1], 4, 50.0);
	ref_run("embedding", &c);
	cr_assert_eq(c.out[0].ndim, 3);
	check_rows(&c, "embedding ids [3, 5]");
	ref_free_call(&c);
}

Test(indexing, both_accept_no_indices)
{
	static const char *const ops[] = { "embedding", "gather_rows" };

	for (int o = 0; o < 2; o++)
		run_case(ops[o], TK_BF16, TK_I32, 4, 8, 0, 0, 0);
}

Test(indexing, gather_rows_refuses_an_index_of_rank_two)
{
	int64_t ishape[2] = { 2, 2 };
	uint64_t rng = 3;
	tk_call c;

	build(&c, TK_F32, TK_I32, 4, 8, 0, 2, ishape, &rng);
	cr_assert_eq(ref_entry("gather_rows")->cpu(&c), TK_ERR_UNSUPPORTED);
	ref_free_call(&c);
}
