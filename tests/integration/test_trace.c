/*
 * test_trace.c - profiling traces (tileops_trace_start): every op run,
 * plan run and sync of a tracing client reports its five stamps in the
 * order of its trip (submitted, taken, launched, posted, read), with its
 * kind, status and executor thread; a client that does not trace records
 * nothing and its results are the same; a failed request is traced with
 * its status and no daemon stamps.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/helpers.h"

TestSuite(trace, .timeout = 60);

static void expect_ordered(const tileops_trace *t, const char *what)
{
	cr_assert_eq(t->status, TILEOPS_OK, "%s: status %d", what, (int)t->status);
	cr_assert_geq(t->executor, 0, "%s: no executor thread", what);
	cr_assert_gt(t->submit_ns, 0, "%s: no submit stamp", what);
	cr_assert_leq(t->submit_ns, t->taken_ns, "%s: taken %lld ns before it was submitted", what,
	              (long long)(t->submit_ns - t->taken_ns));
	cr_assert_leq(t->taken_ns, t->launched_ns, "%s: launched before it was taken", what);
	cr_assert_leq(t->launched_ns, t->posted_ns, "%s: posted before it was launched", what);
	cr_assert_leq(t->posted_ns, t->woke_ns, "%s: read before it was posted", what);
}

Test(trace, traced_ops_plans_and_syncs_report_their_stamps_in_order)
{
	tileops_client *c = th_connect("trace", 1 << 20);
	const int64_t shape[1] = { 64 };
	float one[64];
	for (int i = 0; i < 64; i++)
		one[i] = 1.0f;
	tileops_tensor a = th_tensor_f32(c, 1, shape, one);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { a, a };
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_plan *p = NULL;
	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
	cr_assert_eq(tileops_plan_add(p, &add), TILEOPS_OK);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_OK, "plan_end: %s", tileops_last_error());

	cr_assert_eq(tileops_trace_start(c, 64), TILEOPS_OK, "trace_start: %s",
	             tileops_last_error());
	const int n = 10;
	for (int i = 0; i < n; i++) {
		th_run(c, &add);
		cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_OK);
		cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	}
	tileops_completion *cp = NULL;
	cr_assert_eq(tileops_op_submit_timed(c, &add, &cp), TILEOPS_OK);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK);
	tileops_completion_free(cp);

	tileops_trace t[64];
	size_t got = 0;
	cr_assert_eq(tileops_trace_read(c, t, 64, &got), TILEOPS_OK);
	cr_assert_eq(got, (size_t)(3 * n + 1), "%zu traces for %d requests", got, 3 * n + 1);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(t[3 * i].kind, TILEOPS_TRACE_OP, "trace %d is not an op", 3 * i);
		cr_assert_eq(t[3 * i + 1].kind, TILEOPS_TRACE_PLAN, "trace %d is not a plan run",
		             3 * i + 1);
		cr_assert_eq(t[3 * i + 2].kind, TILEOPS_TRACE_SYNC, "trace %d is not a sync",
		             3 * i + 2);
	}
	for (size_t i = 0; i < got; i++) {
		char what[32];
		snprintf(what, sizeof(what), "trace %zu", i);
		expect_ordered(&t[i], what);
		if (i > 0)
			cr_assert_geq(t[i].submit_ns, t[i - 1].submit_ns,
			              "trace %zu was submitted before the one before it", i);
	}
	/* Read once: nothing is left. */
	cr_assert_eq(tileops_trace_read(c, t, 64, &got), TILEOPS_OK);
	cr_assert_eq(got, 0, "%zu traces read twice", got);
	float *v = th_read_f32(c, out, 64);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(v[i], 2.0f, "out[%d] = %g with tracing on", i, v[i]);
	free(v);
	tileops_plan_free(p);
	tileops_close(c);
}

Test(trace, an_untraced_client_records_nothing_and_gets_the_same_results)
{
	tileops_client *c = th_connect("trace-off", 1 << 20);
	const int64_t shape[1] = { 8 };
	float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	tileops_tensor a = th_tensor_f32(c, 1, shape, x);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { a, a };
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_trace t[4];
	size_t got = 99;

	th_run(c, &add);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(tileops_trace_read(c, t, 4, &got), TILEOPS_OK);
	cr_assert_eq(got, 0, "a client that never traced has %zu traces", got);
	/* Started and stopped again: nothing is recorded after the stop. */
	cr_assert_eq(tileops_trace_start(c, 4), TILEOPS_OK);
	cr_assert_eq(tileops_trace_start(c, 0), TILEOPS_OK);
	th_run(c, &add);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(tileops_trace_read(c, t, 4, &got), TILEOPS_OK);
	cr_assert_eq(got, 0, "%zu traces after tracing stopped", got);
	float *v = th_read_f32(c, out, 8);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(v[i], 2 * x[i], "out[%d] = %g", i, v[i]);
	free(v);
	tileops_close(c);
}

Test(trace, a_full_trace_buffer_keeps_the_oldest_and_a_failure_has_no_daemon_stamps)
{
	tileops_client *c = th_connect("trace-full", 1 << 20);
	const int64_t shape[1] = { 8 }, other[1] = { 9 };
	tileops_tensor a = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor b = th_tensor_f32(c, 1, other, NULL);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor bad_in[2] = { a, b };
	tileops_op bad = { "add", bad_in, 2, &out, 1, NULL, 0 };
	tileops_trace t[4];
	size_t got = 0;

	cr_assert_eq(tileops_trace_start(c, 2), TILEOPS_OK);
	cr_assert_neq(tileops_op_run(c, &bad), TILEOPS_OK, "add of [8] and [9] was accepted");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(tileops_trace_read(c, t, 4, &got), TILEOPS_OK);
	cr_assert_eq(got, 2, "%zu traces kept with room for 2", got);
	cr_assert_eq(t[0].kind, TILEOPS_TRACE_OP);
	cr_assert_eq(t[0].status, TILEOPS_ERR_SHAPE, "the failed op's trace has status %d",
	             (int)t[0].status);
	cr_assert(t[0].taken_ns == 0 && t[0].launched_ns == 0 && t[0].posted_ns == 0,
	          "a failed request's trace has daemon stamps");
	cr_assert_leq(t[0].submit_ns, t[0].woke_ns);
	cr_assert_eq(t[1].kind, TILEOPS_TRACE_SYNC);
	expect_ordered(&t[1], "the first sync");
	tileops_close(c);
}
