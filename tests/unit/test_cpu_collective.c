/*
 * test_cpu_collective.c - the CPU backend's collectives between its
 * emulated devices (daemon/backends/cpu_collective.c), the reference the
 * collective ops (manifest/collective.yaml: all_reduce, all_gather,
 * reduce_scatter) are held to: every kind, reduction and dtype over 1 to 4
 * ranks against sums taken here in double, in place and out of place, in
 * stream order with work queued before and after on the ranks' streams,
 * and the refusals.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define RANKS 4

static backend *be;
static void *streams[RANKS];

static void setup(void)
{
	char err[256];
	backend_options opt = { .devices = { 0, 1, 2, 3 }, .n_devices = RANKS };
	be = backend_cpu_open(&opt, err, sizeof(err));
	cr_assert(be, "%s", err);
	for (int d = 0; d < RANKS; d++)
		cr_assert_eq(be->ops->stream_create(be, d, &streams[d], err, sizeof(err)),
		             TILEOPS_OK, "%s", err);
}

static void teardown(void)
{
	for (int d = 0; d < RANKS; d++)
		be->ops->stream_destroy(be, streams[d]);
	be->ops->destroy(be);
}

TestSuite(cpu_collective, .init = setup, .fini = teardown, .timeout = 60);

static void *alloc_on(int device, size_t bytes)
{
	char err[256];
	void *p = NULL;
	cr_assert_eq(be->ops->alloc(be, device, bytes, &p, err, sizeof(err)), TILEOPS_OK, "%s",
	             err);
	return p;
}

static void sync_all(int n)
{
	char err[256];
	for (int d = 0; d < n; d++)
		cr_assert_eq(be->ops->sync(be, streams[d], err, sizeof(err)), TILEOPS_OK, "%s",
		             err);
}

static double get(tk_dtype dt, const void *p, size_t i)
{
	if (dt == TK_F16)
		return tk_f16_to_f32(((const uint16_t *)p)[i]);
	if (dt == TK_BF16)
		return tk_bf16_to_f32(((const uint16_t *)p)[i]);
	return ((const float *)p)[i];
}

static void set(tk_dtype dt, void *p, size_t i, double v)
{
	if (dt == TK_F16)
		((uint16_t *)p)[i] = tk_f32_to_f16((float)v);
	else if (dt == TK_BF16)
		((uint16_t *)p)[i] = tk_f32_to_bf16((float)v);
	else
		((float *)p)[i] = (float)v;
}

/* Fresh values in [-4, 4) on a grid f16 and bf16 hold exactly. */
static void fill(tk_dtype dt, void *p, size_t n, unsigned *seed)
{
	for (size_t i = 0; i < n; i++)
		set(dt, p, i, (double)((int)(rand_r(seed) % 512) - 256) / 64.0);
}

static double reduce2(backend_reduce op, double a, double b)
{
	return op == BACKEND_MAX ? fmax(a, b) : op == BACKEND_MIN ? fmin(a, b) : a + b;
}

/* How far the backend may be from a double sum of n ranks: one rounding
 * to the dtype of a value up to 4 n in magnitude. */
static double tolerance(tk_dtype dt, int n)
{
	double ulp = dt == TK_BF16 ? 1.0 / 128 : dt == TK_F16 ? 1.0 / 1024 : 1e-6;
	return 4.0 * n * ulp;
}

/*
 * One collective of `kind` over n ranks of `count` elements (the
 * backend_coll count), in place or with a recv of its own, checked
 * element by element against the double result. The recv buffers are
 * poisoned first.
 */
static void check_one(backend_coll_kind kind, backend_reduce op, tk_dtype dt, int n, size_t count,
                      int in_place)
{
	char err[256];
	unsigned seed = 1234u + (unsigned)(kind * 97 + op * 31 + dt * 7 + n);
	size_t es = tk_dtype_size(dt);
	size_t send_n = kind == BACKEND_REDUCE_SCATTER ? count * (size_t)n : count;
	size_t recv_n = kind == BACKEND_ALL_GATHER ? count * (size_t)n : count;
	size_t whole = send_n > recv_n ? send_n : recv_n;
	void *buf[RANKS], *recv[RANKS], *sent[RANKS];
	backend_coll c = { .kind = kind, .reduce = op, .dtype = dt, .count = count, .n = n };
	for (int r = 0; r < n; r++) {
		buf[r] = alloc_on(r, whole * es);
		recv[r] = in_place ? buf[r] : alloc_on(r, recv_n * es);
		memset(recv[r], 0xff, (in_place ? whole : recv_n) * es); /* poison: NaN */
		/* In place, NCCL's layout: a gather sends part r of the whole, a
		 * scatter receives it. */
		char *part = (char *)buf[r] + (size_t)r * count * es;
		void *send = in_place && kind == BACKEND_ALL_GATHER ? part : buf[r];
		if (in_place && kind == BACKEND_REDUCE_SCATTER)
			recv[r] = part;
		fill(dt, send, send_n, &seed);
		sent[r] = malloc(send_n * es);
		cr_assert(sent[r]);
		memcpy(sent[r], send, send_n * es);
		c.parts[r] = (backend_coll_part){ streams[r], send, recv[r] };
	}
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_OK, "%s", err);
	sync_all(n);
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < recv_n; i++) {
			double want;
			if (kind == BACKEND_ALL_GATHER) {
				want = get(dt, sent[i / count], i % count);
			} else {
				size_t at =
				        kind == BACKEND_REDUCE_SCATTER ? (size_t)r * count + i : i;
				want = get(dt, sent[0], at);
				for (int q = 1; q < n; q++)
					want = reduce2(op, want, get(dt, sent[q], at));
			}
			double got = get(dt, recv[r], i);
			cr_assert(fabs(got - want) <= tolerance(dt, n),
			          "kind %d reduce %d %s ranks %d %s: rank %d element %zu is %g, "
			          "want %g",
			          kind, op, tk_dtype_name(dt), n,
			          in_place ? "in place" : "out of place", r, i, got, want);
		}
	for (int r = 0; r < n; r++) {
		free(sent[r]);
		be->ops->free(be, streams[r], buf[r]);
		if (!in_place)
			be->ops->free(be, streams[r], recv[r]);
	}
	sync_all(n);
}

static const tk_dtype dtypes[] = { TK_F32, TK_F16, TK_BF16 };

Test(cpu_collective, all_reduce_every_reduction_dtype_and_rank_count)
{
	for (int n = 1; n <= RANKS; n++)
		for (int op = BACKEND_SUM; op <= BACKEND_MIN; op++)
			for (size_t d = 0; d < 3; d++) {
				check_one(BACKEND_ALL_REDUCE, (backend_reduce)op, dtypes[d], n,
				          1000, 1);
				check_one(BACKEND_ALL_REDUCE, (backend_reduce)op, dtypes[d], n, 257,
				          0);
			}
}

Test(cpu_collective, all_gather_in_place_and_out_of_place)
{
	for (int n = 1; n <= RANKS; n++)
		for (size_t d = 0; d < 3; d++) {
			check_one(BACKEND_ALL_GATHER, BACKEND_SUM, dtypes[d], n, 333, 1);
			check_one(BACKEND_ALL_GATHER, BACKEND_SUM, dtypes[d], n, 64, 0);
		}
}

Test(cpu_collective, reduce_scatter_every_reduction_in_place_and_out_of_place)
{
	for (int n = 1; n <= RANKS; n++)
		for (int op = BACKEND_SUM; op <= BACKEND_MIN; op++)
			for (size_t d = 0; d < 3; d++) {
				check_one(BACKEND_REDUCE_SCATTER, (backend_reduce)op, dtypes[d], n,
				          129, 1);
				check_one(BACKEND_REDUCE_SCATTER, (backend_reduce)op, dtypes[d], n,
				          40, 0);
			}
}

/* Work queued on a rank's stream before the collective is in it, and work
 * queued after it on another rank's stream sees its result. */
Test(cpu_collective, all_reduce_keeps_each_streams_order)
{
	char err[256];
	enum { N = 1 << 16 };
	float *x[RANKS], *later = alloc_on(2, N * sizeof(float));
	float *src = alloc_on(1, N * sizeof(float));
	for (size_t i = 0; i < N; i++)
		src[i] = 2.0f;
	backend_coll c = { .kind = BACKEND_ALL_REDUCE, .dtype = TK_F32, .count = N, .n = RANKS };
	for (int r = 0; r < RANKS; r++) {
		x[r] = alloc_on(r, N * sizeof(float));
		for (size_t i = 0; i < N; i++)
			x[r][i] = 1.0f;
		c.parts[r] = (backend_coll_part){ streams[r], x[r], x[r] };
	}
	/* Rank 1's tensor becomes 2s on its stream, just before the collective. */
	cr_assert_eq(be->ops->copy(be, streams[1], x[1], src, N * sizeof(float), err, sizeof(err)),
	             TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(
	        be->ops->copy(be, streams[2], later, x[2], N * sizeof(float), err, sizeof(err)),
	        TILEOPS_OK, "%s", err);
	sync_all(RANKS);
	for (size_t i = 0; i < N; i += 997) {
		cr_assert_eq(later[i], 5.0f, "element %zu after the collective is %g", i, later[i]);
		for (int r = 0; r < RANKS; r++)
			cr_assert_eq(x[r][i], 5.0f, "rank %d element %zu is %g", r, i, x[r][i]);
	}
}

Test(cpu_collective, refuses_a_shared_stream_and_other_dtypes)
{
	char err[256] = "";
	float a[4], b[4];
	backend_coll c = { .kind = BACKEND_ALL_REDUCE, .dtype = TK_F32, .count = 4, .n = 2 };
	c.parts[0] = (backend_coll_part){ streams[0], a, a };
	c.parts[1] = (backend_coll_part){ streams[0], b, b };
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(strstr(err, "ranks 0 and 1 share a stream"), "%s", err);
	c.parts[1].stream = streams[1];
	c.dtype = TK_I32;
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_ERR_DTYPE);
	cr_assert(strstr(err, "i32"), "%s", err);
	c.dtype = TK_F32;
	c.n = 0;
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(strstr(err, "0 ranks"), "%s", err);
}
