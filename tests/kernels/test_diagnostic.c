/*
 * test_diagnostic.c - the CPU references of the diagnostic ops. spin
 * waits at least `ns` nanoseconds, then out[b % n] = x[b % n] + 1 for every
 * block b < `blocks`; elements no block writes keep what they held; it
 * refuses anything but f32 vectors of x's length and params out of range.
 * fault stands for a lost device (sticky) or a refused launch, and never
 * writes out.
 */
#include <criterion/criterion.h>
#include <time.h>

#include "kernels/tk_ref_util.h"

static tk_call spin_call(int64_t n, int64_t ns, int64_t blocks)
{
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = 2 };

	c.in[0] = tt_tensor(TK_F32, 1, &n, 0);
	c.out[0] = tt_tensor(TK_F32, 1, &n, 0);
	for (int64_t i = 0; i < n; i++) {
		((float *)c.in[0].data)[i] = (float)i * 0.5f;
		((float *)c.out[0].data)[i] = -7.0f;
	}
	c.params[0] = tt_param_int(ns);
	c.params[1] = tt_param_int(blocks);
	return c;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

Test(spin, writes_x_plus_one_where_a_block_lands_and_keeps_the_rest)
{
	tk_call c = spin_call(8, 0, 5);
	const float *out = c.out[0].data;

	ref_run("spin", &c);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(out[i], (float)i * 0.5f + 1.0f, "element %d", i);
	for (int i = 5; i < 8; i++)
		cr_expect_eq(out[i], -7.0f, "element %d has no block and keeps its value", i);
	ref_free_call(&c);
}

Test(spin, more_blocks_than_elements_wrap_around_to_the_same_values)
{
	tk_call c = spin_call(4, 0, 1024);
	const float *out = c.out[0].data;

	ref_run("spin", &c);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(out[i], (float)i * 0.5f + 1.0f, "element %d", i);
	ref_free_call(&c);
}

Test(spin, waits_at_least_the_nanoseconds_asked)
{
	tk_call c = spin_call(4, 3000000, 4);
	int64_t t0 = now_ns();

	ref_run("spin", &c);
	cr_expect_geq(now_ns() - t0, 3000000, "spin returned before 3 ms");
	ref_free_call(&c);
}

Test(spin, refuses_other_dtypes_lengths_and_params_out_of_range)
{
	tk_call c = spin_call(4, 0, 4);
	int64_t five = 5;

	c.params[1] = tt_param_int(0);
	cr_expect_eq(ref_entry("spin")->cpu(&c), TK_ERR_UNSUPPORTED, "no blocks");
	c.params[1] = tt_param_int(4);
	c.params[0] = tt_param_int(-1);
	cr_expect_eq(ref_entry("spin")->cpu(&c), TK_ERR_UNSUPPORTED, "a negative wait");
	c.params[0] = tt_param_int(0);
	tt_free(&c.out[0]);
	c.out[0] = tt_tensor(TK_F32, 1, &five, 0);
	cr_expect_eq(ref_entry("spin")->cpu(&c), TK_ERR_UNSUPPORTED, "out longer than x");
	tt_free(&c.out[0]);
	c.out[0] = tt_tensor(TK_F16, 1, &c.in[0].shape[0], 0);
	cr_expect_eq(ref_entry("spin")->cpu(&c), TK_ERR_UNSUPPORTED, "an f16 out");
	ref_free_call(&c);
}

static tk_call fault_call(int sticky)
{
	int64_t n = 2;
	tk_call c = { .n_in = 1, .n_out = 1, .n_params = 1 };

	c.in[0] = tt_tensor(TK_F32, 1, &n, 0);
	c.out[0] = tt_tensor(TK_F32, 1, &n, 0);
	((float *)c.out[0].data)[0] = ((float *)c.out[0].data)[1] = -7.0f;
	c.params[0] = (tk_param){ .kind = TK_PARAM_BOOL, .v.b = sticky };
	return c;
}

Test(fault, sticky_stands_for_a_lost_device_and_otherwise_for_a_refused_launch)
{
	tk_call lost = fault_call(1), refused = fault_call(0);

	cr_assert_eq(ref_entry("fault")->cpu(&lost), TK_ERR_FAULT);
	cr_assert_eq(ref_entry("fault")->cpu(&refused), TK_ERR_LAUNCH);
	cr_assert_eq(((float *)lost.out[0].data)[0], -7.0f, "fault wrote its output");
	cr_assert_eq(((float *)refused.out[0].data)[1], -7.0f, "fault wrote its output");
	ref_free_call(&lost);
	ref_free_call(&refused);
}

Test(fault, fails_as_a_lost_device_when_sticky_and_a_refused_launch_when_not)
{
	tk_call c = spin_call(4, 0, 4);
	const float *out = c.out[0].data;

	c.n_params = 1;
	c.params[0] = tt_param_bool(1);
	cr_expect_eq(ref_entry("fault")->cpu(&c), TK_ERR_FAULT);
	c.params[0] = tt_param_bool(0);
	cr_expect_eq(ref_entry("fault")->cpu(&c), TK_ERR_LAUNCH);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(out[i], -7.0f, "out[%d] was written", i);
	ref_free_call(&c);
}
