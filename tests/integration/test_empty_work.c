/*
 * test_empty_work.c - a request's work is bounded by its bytes: tensors
 * with 2^40 rows of nothing ([2^40, 0], 0 bytes) go through ops of every
 * kind of loop in well under a second, with the results the ops define
 * (a per-tensor fp8 scale of 0; nothing written elsewhere). Before, the
 * row loops walked every empty row (2^28 of them took 6.9 s; 2^40 would
 * take hours, which the suite's timeout catches).
 */
#include <criterion/criterion.h>

#include "integration/helpers.h"

#define HUGE_ROWS ((int64_t)1 << 40)

static tileops_client *c;

static void setup(void)
{
	c = th_connect("empty-work", 1 << 20);
}

static void teardown(void)
{
	tileops_close(c);
}

TestSuite(empty_work, .init = setup, .fini = teardown, .timeout = 30);

static tileops_tensor empty_rows(tileops_dtype dt, int64_t width)
{
	const int64_t shape[2] = { HUGE_ROWS, width };
	return th_tensor(c, dt, 2, shape);
}

static void run_ok(const char *name, tileops_tensor *in, size_t n_in, tileops_tensor *out,
                   size_t n_out, const tileops_param *p, size_t np)
{
	tileops_op op = { name, in, n_in, out, n_out, p, np };
	int64_t t0 = th_now_ms();
	tileops_status st = tileops_op_run(c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	cr_assert_eq(st, TILEOPS_OK, "%s over [2^40, 0]: %s (%s)", name, tileops_strerror(st),
	             tileops_last_error());
	cr_assert_lt(th_now_ms() - t0, 5000, "%s over [2^40, 0] took %lld ms", name,
	             (long long)(th_now_ms() - t0));
}

Test(empty_work, fp8_per_tensor_quantization_of_empty_rows_gives_a_zero_scale)
{
	tileops_tensor x = empty_rows(TILEOPS_BF16, 0), q = empty_rows(TILEOPS_FP8_E4M3, 0);
	const int64_t one[1] = { 1 };
	tileops_tensor scale = th_tensor(c, TILEOPS_F32, 1, one);
	float poison = 12.5f;
	th_write(c, scale, &poison, sizeof(poison));
	tileops_tensor outs[2] = { q, scale };
	run_ok("quant_fp8_per_tensor", &x, 1, outs, 2, NULL, 0);
	float got = -1;
	th_read(c, scale, &got, sizeof(got));
	cr_assert_eq(got, 0.0f, "the scale of an empty tensor is %g, expected 0", got);
}

Test(empty_work, row_ops_over_empty_rows_write_nothing_and_return_at_once)
{
	const int64_t zero[1] = { 0 };
	tileops_tensor w = th_tensor(c, TILEOPS_F32, 1, zero);
	tileops_tensor x = empty_rows(TILEOPS_F32, 0), out = empty_rows(TILEOPS_F32, 0);
	tileops_param eps = tileops_param_float("eps", 1e-6);
	tileops_tensor in[2] = { x, w };
	run_ok("rms_norm", in, 2, &out, 1, &eps, 1);
	run_ok("softmax", &x, 1, &out, 1, NULL, 0);
	run_ok("silu_and_mul", &x, 1, &out, 1, NULL, 0);
	tileops_tensor pair[2] = { x, x };
	run_ok("add", pair, 2, &out, 1, NULL, 0);
}

Test(empty_work, a_product_of_empty_rows_and_a_reduction_to_nothing_return_at_once)
{
	const int64_t k0[2] = { 0, 0 };
	tileops_tensor a = empty_rows(TILEOPS_F32, 0), b = th_tensor(c, TILEOPS_F32, 2, k0);
	tileops_tensor out = empty_rows(TILEOPS_F32, 0);
	tileops_tensor ab[2] = { a, b };
	run_ok("gemm", ab, 2, &out, 1, NULL, 0);
	const int64_t z[1] = { 0 };
	tileops_tensor sums = th_tensor(c, TILEOPS_F32, 1, z);
	tileops_param dim = tileops_param_int("dim", 0);
	run_ok("sum", &a, 1, &sums, 1, &dim, 1);
}
