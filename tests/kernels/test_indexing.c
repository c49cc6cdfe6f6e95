/*
 * test_indexing.c - the CPU references of embedding and gather_rows: every
 * output row is the source row its index names, bit for bit, in every
 * dtype and index dtype; an index outside the source (negative, or past
 * the last row) gives a row of zeros; ids of rank 2, padded source rows,
 * rows of any width and no indices at all. decode_advance: active rows
 * advance their length, position, slot (from the block table, across page
 * boundaries) and history ring; padding rows, pages past the table and
 * negative entries give slot -1; a length of INT32_MAX stays padding.
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

/* ---- decode_advance ------------------------------------------------------------ */

/* tokens [B], seq_lens [B], block_tables [B, P], history [B, H]; rows of the 2-d ones padded. */
static void adv_build(tk_call *c, int64_t B, int64_t P, int64_t H, int64_t page_size, int64_t pad)
{
	memset(c, 0, sizeof(*c));
	c->n_in = 4;
	c->n_out = 2;
	c->in[0] = tt_tensor(TK_I64, 1, (int64_t[]){ B }, 0);
	c->in[1] = tt_tensor(TK_I32, 1, (int64_t[]){ B }, 0);
	c->in[2] = tt_tensor(TK_I32, 2, (int64_t[]){ B, P }, pad);
	c->in[3] = tt_tensor(TK_I64, 2, (int64_t[]){ B, H }, pad);
	c->out[0] = tt_tensor(TK_I64, 1, (int64_t[]){ B }, 0);
	c->out[1] = tt_tensor(TK_I64, 1, (int64_t[]){ B }, 0);
	tt_poison(&c->out[0]);
	tt_poison(&c->out[1]);
	c->n_params = 1;
	c->params[0].kind = TK_PARAM_INT;
	c->params[0].v.i = page_size;
	for (int64_t b = 0; b < B; b++) {
		tt_set(&c->in[0], b, (double)(1000 + b));
		for (int64_t h = 0; h < H; h++)
			tt_set(&c->in[3], b * H + h, -7.0);
	}
}

static int64_t adv_i64(const tk_tensor *t, int64_t e)
{
	return ((const int64_t *)t->data)[tt_offset(t, e)];
}

static int32_t adv_i32(const tk_tensor *t, int64_t e)
{
	return ((const int32_t *)t->data)[tt_offset(t, e)];
}

static void adv_set_i32(tk_tensor *t, int64_t e, int32_t v)
{
	((int32_t *)t->data)[tt_offset(t, e)] = v;
}

/* Row b's history holds -7 everywhere but column `col` (-1: nowhere), which holds `tok`. */
static void adv_history_is(const tk_call *c, int64_t b, int64_t col, int64_t tok)
{
	int64_t H = c->in[3].shape[1];

	for (int64_t h = 0; h < H; h++)
		cr_assert_eq(adv_i64(&c->in[3], b * H + h), h == col ? tok : -7,
		             "row %lld: history[%lld] is %lld", (long long)b, (long long)h,
		             (long long)adv_i64(&c->in[3], b * H + h));
}

Test(indexing, decode_advance_moves_active_rows_on_by_their_block_tables)
{
	/* page 4: lengths 1 and 3 inside page 0, 4 the first slot of page 1, 7 its last. */
	static const int32_t lens[] = { 1, 3, 4, 7 };
	tk_call c;

	adv_build(&c, 4, 3, 8, 4, 2);
	for (int64_t b = 0; b < 4; b++) {
		adv_set_i32(&c.in[1], b, lens[b]);
		for (int64_t p = 0; p < 3; p++)
			adv_set_i32(&c.in[2], b * 3 + p, (int32_t)(10 * b + 3 * p + 1));
	}
	ref_run("decode_advance", &c);
	for (int64_t b = 0; b < 4; b++) {
		int64_t p = lens[b], page = p / 4;
		cr_assert_eq(adv_i32(&c.in[1], b), p + 1, "row %lld: length", (long long)b);
		cr_assert_eq(adv_i64(&c.out[0], b), p, "row %lld: position", (long long)b);
		cr_assert_eq(adv_i64(&c.out[1], b), (10 * b + 3 * page + 1) * 4 + p % 4,
		             "row %lld: slot %lld", (long long)b, (long long)adv_i64(&c.out[1], b));
		adv_history_is(&c, b, p % 8, 1000 + b);
	}
	ref_free_call(&c);
}

Test(indexing, decode_advance_leaves_padding_rows_alone)
{
	tk_call c;

	adv_build(&c, 3, 2, 4, 16, 0);
	adv_set_i32(&c.in[1], 0, 0);
	adv_set_i32(&c.in[1], 1, -5);
	adv_set_i32(&c.in[1], 2, INT32_MIN);
	ref_run("decode_advance", &c);
	for (int64_t b = 0; b < 3; b++) {
		cr_assert_eq(adv_i64(&c.out[0], b), 0, "row %lld: position", (long long)b);
		cr_assert_eq(adv_i64(&c.out[1], b), -1, "row %lld: slot", (long long)b);
		adv_history_is(&c, b, -1, 0);
	}
	cr_assert_eq(adv_i32(&c.in[1], 0), 0);
	cr_assert_eq(adv_i32(&c.in[1], 1), -5);
	cr_assert_eq(adv_i32(&c.in[1], 2), INT32_MIN);
	ref_free_call(&c);
}

Test(indexing, decode_advance_gives_slot_minus_one_past_the_table_or_for_a_negative_entry)
{
	tk_call c;

	/* Row 0: length 8 with 2 pages of 4 needs page 2; row 1: page 1 is -3. */
	adv_build(&c, 2, 2, 16, 4, 0);
	adv_set_i32(&c.in[1], 0, 8);
	adv_set_i32(&c.in[1], 1, 5);
	adv_set_i32(&c.in[2], 0, 0);
	adv_set_i32(&c.in[2], 1, 1);
	adv_set_i32(&c.in[2], 2, 2);
	adv_set_i32(&c.in[2], 3, -3);
	ref_run("decode_advance", &c);
	for (int64_t b = 0; b < 2; b++) {
		int64_t p = b == 0 ? 8 : 5;
		cr_assert_eq(adv_i64(&c.out[1], b), -1, "row %lld: slot %lld", (long long)b,
		             (long long)adv_i64(&c.out[1], b));
		/* The token still has its position and its place in the history. */
		cr_assert_eq(adv_i64(&c.out[0], b), p);
		cr_assert_eq(adv_i32(&c.in[1], b), p + 1);
		adv_history_is(&c, b, p % 16, 1000 + b);
	}
	ref_free_call(&c);
}

Test(indexing, decode_advance_steps_wrap_the_history_ring)
{
	tk_call c;

	/* History of 3 columns, 5 steps from length 7: columns 1, 2, 0, 1, 2. */
	adv_build(&c, 1, 4, 3, 4, 1);
	for (int64_t p = 0; p < 4; p++)
		adv_set_i32(&c.in[2], p, (int32_t)(3 - p));
	adv_set_i32(&c.in[1], 0, 7);
	for (int64_t s = 0; s < 5; s++) {
		int64_t p = 7 + s;
		tt_set(&c.in[0], 0, (double)(500 + s));
		ref_run("decode_advance", &c);
		cr_assert_eq(adv_i64(&c.out[0], 0), p);
		cr_assert_eq(adv_i64(&c.out[1], 0), (3 - p / 4) * 4 + p % 4, "step %lld: slot",
		             (long long)s);
		cr_assert_eq(adv_i64(&c.in[3], p % 3), 500 + s, "step %lld: history", (long long)s);
	}
	cr_assert_eq(adv_i32(&c.in[1], 0), 12);
	cr_assert_eq(adv_i64(&c.in[3], 0), 502);
	cr_assert_eq(adv_i64(&c.in[3], 1), 503);
	cr_assert_eq(adv_i64(&c.in[3], 2), 504);
	ref_free_call(&c);
}

Test(indexing, decode_advance_never_overflows_a_length_or_a_slot)
{
	tk_call c;

	/* INT32_MAX would become negative: it stays, as padding. INT32_MAX - 1 reaches it. */
	adv_build(&c, 3, 1, 5, 1 << 20, 0);
	adv_set_i32(&c.in[1], 0, INT32_MAX);
	adv_set_i32(&c.in[1], 1, INT32_MAX - 1);
	/* The largest page and page size: (2^31 - 1) * 2^20 + 5, exact in i64. */
	adv_set_i32(&c.in[1], 2, 5);
	adv_set_i32(&c.in[2], 2, INT32_MAX);
	ref_run("decode_advance", &c);
	cr_assert_eq(adv_i32(&c.in[1], 0), INT32_MAX);
	cr_assert_eq(adv_i64(&c.out[0], 0), 0);
	cr_assert_eq(adv_i64(&c.out[1], 0), -1);
	adv_history_is(&c, 0, -1, 0);
	cr_assert_eq(adv_i32(&c.in[1], 1), INT32_MAX);
	cr_assert_eq(adv_i64(&c.out[0], 1), INT32_MAX - 1);
	cr_assert_eq(adv_i64(&c.out[1], 1), -1); /* page 2047 of a table of one */
	adv_history_is(&c, 1, (INT32_MAX - 1) % 5, 1001);
	cr_assert_eq(adv_i64(&c.out[1], 2), (int64_t)INT32_MAX * (1 << 20) + 5);
	ref_free_call(&c);
}

Test(indexing, decode_advance_refuses_a_bad_page_size_or_an_empty_history)
{
	tk_call c;

	adv_build(&c, 2, 2, 4, 0, 0);
	cr_assert_eq(ref_entry("decode_advance")->cpu(&c), TK_ERR_UNSUPPORTED);
	c.params[0].v.i = (1 << 20) + 1;
	cr_assert_eq(ref_entry("decode_advance")->cpu(&c), TK_ERR_UNSUPPORTED);
	ref_free_call(&c);
	adv_build(&c, 2, 2, 0, 16, 0);
	cr_assert_eq(ref_entry("decode_advance")->cpu(&c), TK_ERR_UNSUPPORTED);
	ref_free_call(&c);
}

Test(indexing, decode_advance_takes_an_empty_batch_without_memory)
{
	tk_call c;

	/* A 0-byte device allocation is NULL: an empty batch's tensors may have no memory. */
	adv_build(&c, 0, 4, 4, 16, 0);
	void *keep[6] = { c.in[0].data, c.in[1].data,  c.in[2].data,
		          c.in[3].data, c.out[0].data, c.out[1].data };
	c.in[0].data = c.in[1].data = c.in[2].data = c.in[3].data = NULL;
	c.out[0].data = c.out[1].data = NULL;
	cr_assert_eq(ref_entry("decode_advance")->cpu(&c), TK_OK);
	c.in[0].data = keep[0], c.in[1].data = keep[1], c.in[2].data = keep[2];
	c.in[3].data = keep[3], c.out[0].data = keep[4], c.out[1].data = keep[5];
	ref_free_call(&c);
}
