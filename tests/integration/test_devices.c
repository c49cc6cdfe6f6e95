/*
 * test_devices.c - a daemon serving several devices (`devices = 0-3`; on
 * the CPU backend these are emulated devices), through the public API: the
 * device list, tensors created on each device, copies within and between
 * devices and the pairs a copy refuses, ops whose tensors share a device (on
 * both planes) and the ones that mix devices, which are refused, the
 * client's own refusal of an index past the count, the collectives
 * (all_reduce, all_gather, reduce_scatter) over tensors on several devices,
 * and plans whose ops are on several devices with collectives among them
 * (buckets, bindings and the graph cache's counts included).
 *
 * Each test starts a daemon of its own with that config (daemon2.h); the
 * last one checks the suite's shared daemon, which has no devices setting.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define NDEV 4
#define N 64

/* Not on a test's stack: the fixture kills it if the test failed first. */
static daemon2 multi;

static void teardown(void)
{
	daemon2_kill_running();
}

TestSuite(devices, .fini = teardown, .timeout = 120);

/* ---- small tools --------------------------------------------------------- */

static tileops_client *connect_multi(const char *name)
{
	daemon2_start(&multi, "devices = 0-3\n");
	daemon2_use(&multi);
	return th_connect(name, 0);
}

static void close_multi(tileops_client *c)
{
	tileops_close(c);
	daemon2_stop(&multi);
}

/* An f32 vector of N elements on `device`, holding `v` when it is not NULL. */
static tileops_tensor vec_on(tileops_client *c, int device, const float *v)
{
	const int64_t shape[1] = { N };
	tileops_tensor t = th_tensor_on(c, device, TILEOPS_F32, 1, shape);

	if (v != NULL)
		th_write(c, t, v, sizeof(float) * N);
	return t;
}

static void fill(float *v, float base, float step)
{
	for (int i = 0; i < N; i++)
		v[i] = base + step * (float)i;
}

static void expect_vec_n(tileops_client *c, tileops_tensor t, const float *want, int n,
                         const char *what)
{
	float got[N];

	cr_assert(n <= N);
	th_read(c, t, got, sizeof(float) * (size_t)n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(got[i], want[i], "%s: element %d is %g, expected %g", what, i,
		             (double)got[i], (double)want[i]);
}

static void expect_vec(tileops_client *c, tileops_tensor t, const float *want, const char *what)
{
	expect_vec_n(c, t, want, N, what);
}

/* Whether `msg` holds the number n as a word of its own ("device 1", not "12"). */
static int has_number(const char *msg, long n)
{
	for (const char *p = msg; *p != '\0'; p++) {
		char *end;
		long v;

		if (!isdigit((unsigned char)*p) || (p > msg && isdigit((unsigned char)p[-1])))
			continue;
		v = strtol(p, &end, 10);
		if (v == n)
			return 1;
		p = end - 1;
	}
	return 0;
}

/* The refusal of something whose tensors are on devices a and b. */
static void expect_mixed_refused(tileops_status st, int a, int b, const char *what)
{
	const char *msg = tileops_last_error();

	cr_assert_eq(st, TILEOPS_ERR_INVALID_ARGUMENT, "%s: status %d (%s), message '%s'", what, st,
	             tileops_strerror(st), msg);
	cr_assert(th_contains(msg, "device") && has_number(msg, a) && has_number(msg, b),
	          "%s: message '%s' does not name devices %d and %d", what, msg, a, b);
}

/* A plan of n ops, not yet ended. */
static tileops_plan *plan_of(tileops_client *c, const tileops_plan_options *o,
                             const tileops_op *ops, int n)
{
	tileops_plan *p = NULL;

	cr_assert_eq(tileops_plan_begin(c, o, &p), TILEOPS_OK, "plan_begin: %s",
	             tileops_last_error());
	for (int i = 0; i < n; i++)
		cr_assert_eq(tileops_plan_add(p, &ops[i]), TILEOPS_OK, "plan_add %d: %s", i,
		             tileops_last_error());
	return p;
}

static void plan_end_ok(tileops_plan *p)
{
	tileops_status st = tileops_plan_end(p);

	cr_assert_eq(st, TILEOPS_OK, "plan_end: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
}

static void plan_run_ok(tileops_plan *p, int64_t size, const tileops_binding *b, size_t n)
{
	tileops_status st = tileops_plan_run(p, size, b, n);

	cr_assert_eq(st, TILEOPS_OK, "plan_run (size %lld): %s (%s)", (long long)size,
	             tileops_strerror(st), tileops_last_error());
}

/* ---- the device list ----------------------------------------------------- */

Test(devices, a_daemon_serving_devices_0_to_3_reports_four_by_index_ordinal_and_name)
{
	tileops_client *c = connect_multi("devices-list");
	tileops_server_info info;

	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	cr_assert_eq(tileops_device_count(c), NDEV);
	for (int i = 0; i < NDEV; i++) {
		tileops_device_info d;

		cr_assert_eq(tileops_device_info_get(c, i, &d), TILEOPS_OK, "%s",
		             tileops_last_error());
		cr_assert_eq(d.index, (uint32_t)i);
		cr_assert_eq(d.ordinal, i, "device %d has ordinal %d", i, d.ordinal);
		cr_assert(d.name != NULL && d.name[0] != '\0', "device %d has no name", i);
		if (strcmp(info.backend, "cpu") == 0)
			cr_assert_eq(d.memory_bytes, 0, "an emulated device reports %llu bytes",
			             (unsigned long long)d.memory_bytes);
	}
	close_multi(c);
}

Test(devices, tensor_create_on_device_4_is_refused_by_the_client_naming_the_count)
{
	tileops_client *c = connect_multi("devices-range");
	const int64_t shape[1] = { N };
	tileops_tensor t = 0;
	double before = th_stat("tensors");

	cr_assert_eq(tileops_tensor_create_on(c, NDEV, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(strstr(tileops_last_error(), "serves 4 devices") != NULL, "message '%s'",
	          tileops_last_error());
	cr_assert_eq(t, 0);
	cr_assert_eq(th_stat("tensors"), before, "a refused create reached the daemon");
	close_multi(c);
}

Test(devices, a_tensor_is_created_on_each_device_and_holds_its_own_bytes)
{
	tileops_client *c = connect_multi("devices-each");
	tileops_tensor t[NDEV];
	float v[NDEV][N];

	for (int d = 0; d < NDEV; d++) {
		fill(v[d], 100.0f * (float)d, 0.5f);
		t[d] = vec_on(c, d, v[d]);
		for (int e = 0; e < d; e++)
			cr_assert_neq(t[d], t[e], "devices %d and %d gave one handle", d, e);
	}
	for (int d = 0; d < NDEV; d++)
		expect_vec(c, t[d], v[d], "a tensor read back from its device");
	close_multi(c);
}

/* ---- copies -------------------------------------------------------------- */

Test(devices, bytes_written_on_device_2_and_copied_to_device_0_read_back_equal)
{
	tileops_client *c = connect_multi("devices-peer");
	const int64_t shape[2] = { 8, 33 };
	unsigned char src[8 * 33 * 2], got[sizeof(src)];
	th_rng r = th_rng_seed(7);
	tileops_tensor s, d;

	th_fill_bytes(&r, src, sizeof(src));
	s = th_tensor_on(c, 2, TILEOPS_BF16, 2, shape);
	d = th_tensor_on(c, 0, TILEOPS_BF16, 2, shape);
	th_write(c, s, src, sizeof(src));
	cr_assert_eq(tileops_tensor_copy(c, d, s), TILEOPS_OK, "%s", tileops_last_error());
	th_read(c, d, got, sizeof(got));
	cr_assert_eq(memcmp(got, src, sizeof(src)), 0, "the copy on device 0 differs");
	/* The source is left as it was. */
	th_read(c, s, got, sizeof(got));
	cr_assert_eq(memcmp(got, src, sizeof(src)), 0, "the source changed");
	close_multi(c);
}

Test(devices, a_copy_between_two_tensors_on_one_device_moves_every_byte)
{
	tileops_client *c = connect_multi("devices-local");
	float a[N], b[N];
	tileops_tensor s, d;

	fill(a, -3.0f, 0.25f);
	fill(b, 9.0f, 0.0f);
	s = vec_on(c, 3, a);
	d = vec_on(c, 3, b);
	cr_assert_eq(tileops_tensor_copy(c, d, s), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	expect_vec(c, d, a, "a copy within device 3");
	close_multi(c);
}

Test(devices, a_copy_between_tensors_of_different_byte_sizes_is_refused_naming_both)
{
	tileops_client *c = connect_multi("devices-sizes");
	const int64_t s5[1] = { 5 }, s7[1] = { 7 };
	const float keep[5] = { 1, 2, 3, 4, 5 };
	float got[5];
	tileops_tensor d = th_tensor_on(c, 0, TILEOPS_F32, 1, s5);
	tileops_tensor s = th_tensor_on(c, 1, TILEOPS_F32, 1, s7);
	tileops_status st;

	th_write(c, d, keep, sizeof(keep));
	st = tileops_tensor_copy(c, d, s);
	cr_assert_eq(st, TILEOPS_ERR_INVALID_ARGUMENT, "status %d (%s): %s", st,
	             tileops_strerror(st), tileops_last_error());
	cr_assert(has_number(tileops_last_error(), 20) && has_number(tileops_last_error(), 28),
	          "message '%s' does not name 20 and 28 bytes", tileops_last_error());
	th_read(c, d, got, sizeof(got));
	cr_assert_eq(memcmp(got, keep, sizeof(keep)), 0, "a refused copy wrote dst");
	close_multi(c);
}

Test(devices, a_copy_from_or_into_a_view_with_gaps_is_refused_and_changes_nothing)
{
	tileops_client *c = connect_multi("devices-gaps");
	const int64_t base_shape[2] = { 4, 8 }, vshape[2] = { 4, 4 }, strides[2] = { 8, 1 };
	float base[32], keep[16], got[16];
	tileops_tensor b, v = 0, d;
	tileops_status st;

	for (int i = 0; i < 32; i++)
		base[i] = (float)i;
	for (int i = 0; i < 16; i++)
		keep[i] = -1.0f - (float)i;
	b = th_tensor_on(c, 1, TILEOPS_F32, 2, base_shape);
	th_write(c, b, base, sizeof(base));
	/* The first 4 columns of each row of 8: 16 elements with gaps between rows. */
	st = tileops_tensor_view(c, b, 0, TILEOPS_F32, 2, vshape, strides, &v);
	cr_assert_eq(st, TILEOPS_OK, "tensor_view: %s", tileops_last_error());
	d = th_tensor_on(c, 1, TILEOPS_F32, 2, vshape);
	th_write(c, d, keep, sizeof(keep));

	st = tileops_tensor_copy(c, d, v);
	cr_assert_neq(st, TILEOPS_OK, "a copy from a view with gaps was taken");
	cr_assert_neq(tileops_last_error()[0], '\0', "refused without a message");
	th_read(c, d, got, sizeof(got));
	cr_assert_eq(memcmp(got, keep, sizeof(keep)), 0, "a refused copy wrote dst");

	st = tileops_tensor_copy(c, v, d);
	cr_assert_neq(st, TILEOPS_OK, "a copy into a view with gaps was taken");
	th_read(c, b, base, sizeof(base));
	for (int i = 0; i < 32; i++)
		cr_assert_eq(base[i], (float)i, "a refused copy wrote element %d of the base", i);
	close_multi(c);
}

/*
 * A copy sits in the session's order: it sees the ops submitted before it
 * (through the rings, on its source's device) and an op submitted after it
 * (on its destination's device) sees what it copied.
 */
Test(devices, a_copy_sees_the_ops_before_it_and_the_ops_after_it_see_the_copy)
{
	tileops_client *c = connect_multi("devices-order");
	float a[N], b[N], sum[N], twice[N];
	tileops_tensor x, y, s2, d0, out;
	tileops_completion *cp = NULL;

	fill(a, 1.0f, 1.0f);
	fill(b, 0.5f, 0.0f);
	for (int i = 0; i < N; i++) {
		sum[i] = a[i] + b[i];
		twice[i] = 2.0f * sum[i];
	}
	x = vec_on(c, 2, a);
	y = vec_on(c, 2, b);
	s2 = vec_on(c, 2, NULL);
	d0 = vec_on(c, 0, NULL);
	out = vec_on(c, 0, NULL);

	tileops_tensor in1[2] = { x, y }, in2[2] = { d0, d0 };
	tileops_op add1 = { "add", in1, 2, &s2, 1, NULL, 0 };
	tileops_op add2 = { "add", in2, 2, &out, 1, NULL, 0 };

	cr_assert_eq(tileops_op_submit(c, &add1, &cp), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_copy(c, d0, s2), TILEOPS_OK, "%s", tileops_last_error());
	th_run(c, &add2);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK, "%s", tileops_last_error());
	tileops_completion_free(cp);
	expect_vec(c, d0, sum, "the copy of the sum made on device 2");
	expect_vec(c, out, twice, "an op on device 0 after the copy");
	close_multi(c);
}

/* ---- ops and plans ------------------------------------------------------- */

Test(devices, an_op_whose_tensors_are_on_devices_0_and_1_is_refused_naming_them)
{
	tileops_client *c = connect_multi("devices-mixed-op");
	float a[N], keep[N];
	tileops_tensor x, y, out;
	tileops_completion *cp = NULL;

	fill(a, 1.0f, 0.0f);
	fill(keep, 42.0f, 0.0f);
	x = vec_on(c, 0, a);
	y = vec_on(c, 1, a);
	out = vec_on(c, 0, keep);

	tileops_tensor in[2] = { x, y };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };

	expect_mixed_refused(tileops_op_run(c, &op), 0, 1, "op_run");
	/* Through the rings too: the same refusal in the completion. */
	cr_assert_eq(tileops_op_submit(c, &op, &cp), TILEOPS_OK, "%s", tileops_last_error());
	expect_mixed_refused(tileops_completion_wait(cp, -1), 0, 1, "op_submit");
	tileops_completion_free(cp);
	/* An output on another device than the inputs is mixing too. */
	tileops_tensor same[2] = { x, x };
	tileops_tensor out1 = vec_on(c, 1, keep);
	tileops_op op2 = { "add", same, 2, &out1, 1, NULL, 0 };
	expect_mixed_refused(tileops_op_run(c, &op2), 0, 1, "op_run, output on device 1");
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	expect_vec(c, out, keep, "the output of a refused op");
	expect_vec(c, out1, keep, "the output of a refused op");
	close_multi(c);
}

Test(devices, an_op_with_every_tensor_on_device_1_runs_and_gives_the_sum)
{
	tileops_client *c = connect_multi("devices-op1");
	float a[N], b[N], want[N];
	tileops_tensor x, y, out;

	fill(a, -8.0f, 0.25f);
	fill(b, 3.0f, -0.5f);
	for (int i = 0; i < N; i++)
		want[i] = a[i] + b[i];
	x = vec_on(c, 1, a);
	y = vec_on(c, 1, b);
	out = vec_on(c, 1, NULL);

	tileops_tensor in[2] = { x, y };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };

	th_run(c, &op);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	expect_vec(c, out, want, "add on device 1");
	close_multi(c);
}

/* A chain of adds on device 1, each reading the one before, through the rings. */
Test(devices, ops_on_device_1_submitted_through_the_rings_run_in_order)
{
	enum { STEPS = 24 };
	tileops_client *c = connect_multi("devices-ring");
	float zero[N], one[N], want[N];
	tileops_completion *cp[STEPS];
	tileops_tensor t[2], inc;
	tileops_op op[STEPS];
	tileops_tensor in[STEPS][2];

	fill(zero, 0.0f, 0.0f);
	fill(one, 1.0f, 0.0f);
	fill(want, (float)STEPS, 0.0f);
	t[0] = vec_on(c, 1, zero);
	t[1] = vec_on(c, 1, zero);
	inc = vec_on(c, 1, one);
	for (int k = 0; k < STEPS; k++) {
		in[k][0] = t[k % 2];
		in[k][1] = inc;
		op[k] = (tileops_op){ "add", in[k], 2, &t[(k + 1) % 2], 1, NULL, 0 };
		cr_assert_eq(tileops_op_submit(c, &op[k], &cp[k]), TILEOPS_OK, "step %d: %s", k,
		             tileops_last_error());
	}
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	for (int k = 0; k < STEPS; k++) {
		cr_assert_eq(tileops_completion_wait(cp[k], -1), TILEOPS_OK, "step %d: %s", k,
		             tileops_last_error());
		tileops_completion_free(cp[k]);
	}
	expect_vec(c, t[STEPS % 2], want, "the chain's last sum");
	close_multi(c);
}

Test(devices, a_plan_whose_tensors_are_all_on_device_2_runs_correctly)
{
	tileops_client *c = connect_multi("devices-plan");
	float a[N], b[N], want[N];
	tileops_tensor x, y, s, out;
	tileops_plan *p = NULL;

	x = vec_on(c, 2, NULL);
	y = vec_on(c, 2, NULL);
	s = vec_on(c, 2, NULL);
	out = vec_on(c, 2, NULL);

	/* out = (x + y) * y */
	tileops_tensor in1[2] = { x, y }, in2[2] = { s, y };
	tileops_op ops[2] = { { "add", in1, 2, &s, 1, NULL, 0 },
		              { "mul", in2, 2, &out, 1, NULL, 0 } };

	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK, "%s", tileops_last_error());
	for (int i = 0; i < 2; i++)
		cr_assert_eq(tileops_plan_add(p, &ops[i]), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_end(p), TILEOPS_OK, "plan_end: %s", tileops_last_error());
	/* Twice, with new inputs: the first run captures, the second replays. */
	for (int run = 0; run < 2; run++) {
		fill(a, 1.0f + (float)run, 0.125f);
		fill(b, -2.0f, 0.0625f * (float)(run + 1));
		for (int i = 0; i < N; i++)
			want[i] = (a[i] + b[i]) * b[i];
		th_write(c, x, a, sizeof(a));
		th_write(c, y, b, sizeof(b));
		cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_OK, "run %d: %s", run,
		             tileops_last_error());
		expect_vec(c, out, want, "the plan's output on device 2");
	}
	tileops_plan_free(p);
	close_multi(c);
}

/* A plan may span devices, but each of its ops keeps to one. */
Test(devices, a_plan_op_whose_tensors_are_on_two_devices_is_refused_when_the_plan_is_made)
{
	tileops_client *c = connect_multi("devices-plan-mixed");
	tileops_tensor x2 = vec_on(c, 2, NULL), o2 = vec_on(c, 2, NULL);
	tileops_tensor x3 = vec_on(c, 3, NULL), o3 = vec_on(c, 3, NULL);
	tileops_tensor in3[2] = { x3, x3 }, mixed[2] = { x2, x3 };
	tileops_op ops[2] = { { "add", in3, 2, &o3, 1, NULL, 0 },
		              { "add", mixed, 2, &o2, 1, NULL, 0 } };
	tileops_plan *p = plan_of(c, NULL, ops, 2);

	expect_mixed_refused(tileops_plan_end(p), 2, 3, "plan_end");
	cr_assert(th_contains(tileops_last_error(), "plan op 1"), "message '%s' does not name op 1",
	          tileops_last_error());
	tileops_plan_free(p);
	close_multi(c);
}

/* ---- the suite's own daemon ---------------------------------------------- */

/* A kernel that fails once it runs on device 1 fails the session's next
 * sync, as one on device 0 would, and not the sync after. */
Test(devices, a_kernel_failing_on_device_1_fails_the_next_sync_only)
{
	daemon2_start(&multi, "devices = 0-1\ndiagnostic_ops = on\n");
	daemon2_use(&multi);
	tileops_client *c = th_connect("device-fault", 0);
	const int64_t shape[1] = { 1 };
	tileops_tensor x0 = th_tensor_on(c, 0, TILEOPS_F32, 1, shape);
	tileops_tensor x = th_tensor_on(c, 1, TILEOPS_F32, 1, shape);
	tileops_tensor y = th_tensor_on(c, 1, TILEOPS_F32, 1, shape);
	tileops_param sticky = tileops_param_bool("sticky", 0);
	tileops_op fault = { .name = "fault",
		             .inputs = &x,
		             .n_inputs = 1,
		             .outputs = &y,
		             .n_outputs = 1,
		             .params = &sticky,
		             .n_params = 1 };
	/* The session has work on device 0 too. */
	float one = 1.0f;
	th_write(c, x0, &one, sizeof(one));
	tileops_status st = tileops_op_run(c, &fault);
	cr_assert_eq(st, TILEOPS_OK, "the launch of a kernel that fails later: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	st = tileops_sync(c);
	cr_assert_eq(st, TILEOPS_ERR_BACKEND, "the sync after a kernel failed on device 1: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	cr_assert_not_null(strstr(tileops_last_error(), "fault"),
	                   "the error does not name the op: %s", tileops_last_error());
	st = tileops_sync(c);
	cr_assert_eq(st, TILEOPS_OK, "the sync after that: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
	close_multi(c);
}

/* ---- collectives ------------------------------------------------------- */

/* all_reduce over the four devices, summing in place; then max, out of the
 * same tensors; and a second client's work on device 0 meanwhile is its own. */
Test(devices, all_reduce_over_four_devices_sums_then_takes_the_max_in_place)
{
	tileops_client *c = connect_multi("devices-allreduce");
	float v[NDEV][N], sum[N], max[N];
	tileops_tensor t[NDEV];

	for (int d = 0; d < NDEV; d++) {
		fill(v[d], (float)(d * 3 - 4), d % 2 ? 0.25f : -0.125f);
		t[d] = vec_on(c, d, v[d]);
	}
	for (int i = 0; i < N; i++) {
		sum[i] = max[i] = v[0][i];
		for (int d = 1; d < NDEV; d++) {
			sum[i] += v[d][i];
			max[i] = max[i] > v[d][i] ? max[i] : v[d][i];
		}
	}
	tileops_op ar = { "all_reduce", t, NDEV, NULL, 0, NULL, 0 };
	th_run(c, &ar);
	for (int d = 0; d < NDEV; d++)
		expect_vec(c, t[d], sum, "all_reduce sum");
	/* max of equal tensors is each of them; write the inputs again first. */
	for (int d = 0; d < NDEV; d++)
		th_write(c, t[d], v[d], sizeof(v[d]));
	tileops_param reduce = tileops_param_int("reduce", 1);
	tileops_op armax = { "all_reduce", t, NDEV, NULL, 0, &reduce, 1 };
	th_run(c, &armax);
	for (int d = 0; d < NDEV; d++)
		expect_vec(c, t[d], max, "all_reduce max");
	close_multi(c);
}

/* Ops before a collective on each rank's device are in it; an op after it on
 * one device sees its result; all through the rings. */
Test(devices, ops_around_an_all_reduce_submitted_through_the_rings_keep_their_order)
{
	tileops_client *c = connect_multi("devices-allreduce-ring");
	float one[N], want[N];
	tileops_tensor x[NDEV], y[NDEV], out;
	tileops_completion *cp[NDEV + 2];
	tileops_op add[NDEV];
	tileops_tensor in[NDEV][2];

	fill(one, 1.0f, 0.0f);
	/* Each rank adds its ones to itself (2s), the all_reduce sums them (8s)
	 * and an add on device 3 doubles the result (16s). */
	for (int d = 0; d < NDEV; d++) {
		x[d] = vec_on(c, d, one);
		y[d] = vec_on(c, d, NULL);
		in[d][0] = in[d][1] = x[d];
		add[d] = (tileops_op){ "add", in[d], 2, &y[d], 1, NULL, 0 };
		cr_assert_eq(tileops_op_submit(c, &add[d], &cp[d]), TILEOPS_OK, "%s",
		             tileops_last_error());
	}
	out = vec_on(c, 3, NULL);
	tileops_op ar = { "all_reduce", y, NDEV, NULL, 0, NULL, 0 };
	tileops_tensor twice[2] = { y[3], y[3] };
	tileops_op after = { "add", twice, 2, &out, 1, NULL, 0 };
	cr_assert_eq(tileops_op_submit(c, &ar, &cp[NDEV]), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_op_submit(c, &after, &cp[NDEV + 1]), TILEOPS_OK, "%s",
	             tileops_last_error());
	for (int k = 0; k < NDEV + 2; k++) {
		cr_assert_eq(tileops_completion_wait(cp[k], -1), TILEOPS_OK, "op %d: %s", k,
		             tileops_last_error());
		tileops_completion_free(cp[k]);
	}
	fill(want, 16.0f, 0.0f);
	expect_vec(c, out, want, "an add on device 3 after the all_reduce");
	fill(want, 8.0f, 0.0f);
	for (int d = 0; d < NDEV; d++)
		expect_vec(c, y[d], want, "the all_reduce of the adds");
	close_multi(c);
}

/* all_gather and reduce_scatter in place over ranks on devices 3, 1 and 0
 * (rank order is the order given, not the devices'). */
Test(devices, all_gather_and_reduce_scatter_in_place_over_three_ranks_in_the_order_given)
{
	enum { RANKS = 3, PART = 10 };
	tileops_client *c = connect_multi("devices-gather");
	const int dev[RANKS] = { 3, 1, 0 };
	const int64_t shape[2] = { RANKS, PART };
	float whole[RANKS][RANKS * PART], want[RANKS * PART], got[RANKS * PART];
	tileops_tensor t[RANKS];

	for (int r = 0; r < RANKS; r++) {
		/* Only part r of rank r's tensor is its own; the rest is noise. */
		for (int i = 0; i < RANKS * PART; i++)
			whole[r][i] = i / PART == r ? (float)(100 * r + i) : -1.0f;
		t[r] = th_tensor_on(c, dev[r], TILEOPS_F32, 2, shape);
		th_write(c, t[r], whole[r], sizeof(whole[r]));
	}
	for (int i = 0; i < RANKS * PART; i++)
		want[i] = (float)(100 * (i / PART) + i);
	tileops_op ag = { "all_gather", t, RANKS, NULL, 0, NULL, 0 };
	th_run(c, &ag);
	for (int r = 0; r < RANKS; r++)
		expect_vec_n(c, t[r], want, RANKS * PART, "all_gather");
	/* reduce_scatter of the gathered tensors: part r of rank r is RANKS
	 * times part r; the other parts stay. */
	tileops_op rs = { "reduce_scatter", t, RANKS, NULL, 0, NULL, 0 };
	th_run(c, &rs);
	for (int r = 0; r < RANKS; r++) {
		th_read(c, t[r], got, sizeof(got));
		for (int i = 0; i < RANKS * PART; i++) {
			float w = i / PART == r ? RANKS * want[i] : want[i];
			cr_assert_eq(got[i], w, "reduce_scatter: rank %d element %d is %g, want %g",
			             r, i, (double)got[i], (double)w);
		}
	}
	close_multi(c);
}

Test(devices, collectives_refuse_two_ranks_on_one_device_and_uneven_parts)
{
	tileops_client *c = connect_multi("devices-coll-refuse");
	const int64_t odd[1] = { 7 };
	float keep[N];
	tileops_tensor a = vec_on(c, 0, NULL), b = vec_on(c, 2, NULL), d2 = vec_on(c, 2, NULL);

	fill(keep, 5.0f, 1.0f);
	th_write(c, b, keep, sizeof(keep));
	tileops_tensor same[2] = { b, d2 };
	tileops_op ar = { "all_reduce", same, 2, NULL, 0, NULL, 0 };
	tileops_status st = tileops_op_run(c, &ar);
	cr_assert_eq(st, TILEOPS_ERR_INVALID_ARGUMENT, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "ranks 0 and 1 are both on device 2"), "%s",
	          tileops_last_error());
	tileops_tensor u[2] = { th_tensor_on(c, 0, TILEOPS_F32, 1, odd),
		                th_tensor_on(c, 1, TILEOPS_F32, 1, odd) };
	tileops_op rs = { "reduce_scatter", u, 2, NULL, 0, NULL, 0 };
	cr_assert_eq(tileops_op_run(c, &rs), TILEOPS_ERR_SHAPE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "7 elements"), "%s", tileops_last_error());
	/* A rank whose shape differs from rank 0's. */
	tileops_tensor ab[2] = { a, u[1] };
	tileops_op mism = { "all_reduce", ab, 2, NULL, 0, NULL, 0 };
	cr_assert_eq(tileops_op_run(c, &mism), TILEOPS_ERR_SHAPE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "x1"), "%s", tileops_last_error());
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	expect_vec(c, b, keep, "rank 0 of a refused collective");
	close_multi(c);
}

/* ---- plans over several devices ------------------------------------------ */

/*
 * Each op on one device, the plan over two, interleaved: device 0 computes
 * (x0 + y0) * y0 and device 2 (x2 * y2) + x2. The ops of each device are
 * one graph on its stream, so the tenant holds one entry of two segments.
 */
Test(devices, a_plan_with_ops_on_devices_0_and_2_runs_right_on_capture_and_on_replay)
{
	tileops_client *c = connect_multi("devices-plan-two");
	float a0[N], b0[N], a2[N], b2[N], want0[N], want2[N];
	tileops_tensor x0 = vec_on(c, 0, NULL), y0 = vec_on(c, 0, NULL), s0 = vec_on(c, 0, NULL);
	tileops_tensor o0 = vec_on(c, 0, NULL);
	tileops_tensor x2 = vec_on(c, 2, NULL), y2 = vec_on(c, 2, NULL), s2 = vec_on(c, 2, NULL);
	tileops_tensor o2 = vec_on(c, 2, NULL);
	tileops_tensor in0[2] = { x0, y0 }, in1[2] = { x2, y2 }, in2[2] = { s0, y0 };
	tileops_tensor in3[2] = { s2, x2 };
	tileops_op ops[4] = { { "add", in0, 2, &s0, 1, NULL, 0 },
		              { "mul", in1, 2, &s2, 1, NULL, 0 },
		              { "mul", in2, 2, &o0, 1, NULL, 0 },
		              { "add", in3, 2, &o2, 1, NULL, 0 } };
	tileops_plan *p = plan_of(c, NULL, ops, 4);

	plan_end_ok(p);
	/* Twice, with new inputs: the first run captures, the second replays. */
	for (int run = 0; run < 2; run++) {
		fill(a0, 1.0f + (float)run, 0.125f);
		fill(b0, -2.0f, 0.0625f * (float)(run + 1));
		fill(a2, 3.0f - (float)run, -0.25f);
		fill(b2, 0.5f * (float)(run + 1), 0.03125f);
		for (int i = 0; i < N; i++) {
			want0[i] = (a0[i] + b0[i]) * b0[i];
			want2[i] = a2[i] * b2[i] + a2[i];
		}
		th_write(c, x0, a0, sizeof(a0));
		th_write(c, y0, b0, sizeof(b0));
		th_write(c, x2, a2, sizeof(a2));
		th_write(c, y2, b2, sizeof(b2));
		plan_run_ok(p, 0, NULL, 0);
		expect_vec(c, o0, want0, "the plan's output on device 0");
		expect_vec(c, o2, want2, "the plan's output on device 2");
	}
	cr_assert_eq(th_own_tenant_stat(c, "captures"), 1, "the second run captured again");
	cr_assert_eq(th_own_tenant_stat(c, "hits"), 1);
	cr_assert_eq(th_own_tenant_stat(c, "graphs"), 1);
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 2, "not one graph per device");
	tileops_plan_free(p);
	close_multi(c);
}

/*
 * The shape of a tensor-parallel layer: per-device adds, an all_reduce over
 * the four devices, then per-device muls, as one plan. Rank d computes
 * z_d = (sum over e of (x_e + b_e)) * w_d.
 */
Test(devices, adds_then_an_all_reduce_over_four_devices_then_muls_run_as_one_plan)
{
	tileops_client *c = connect_multi("devices-plan-allreduce");
	float xv[NDEV][N], bv[NDEV][N], wv[NDEV][N], sum[N], want[N];
	tileops_tensor x[NDEV], b[NDEV], w[NDEV], y[NDEV], z[NDEV];
	tileops_tensor add_in[NDEV][2], mul_in[NDEV][2];
	tileops_op ops[2 * NDEV + 1];

	for (int d = 0; d < NDEV; d++) {
		x[d] = vec_on(c, d, NULL);
		b[d] = vec_on(c, d, NULL);
		w[d] = vec_on(c, d, NULL);
		y[d] = vec_on(c, d, NULL);
		z[d] = vec_on(c, d, NULL);
		add_in[d][0] = x[d];
		add_in[d][1] = b[d];
		mul_in[d][0] = y[d];
		mul_in[d][1] = w[d];
		ops[d] = (tileops_op){ "add", add_in[d], 2, &y[d], 1, NULL, 0 };
		ops[NDEV + 1 + d] = (tileops_op){ "mul", mul_in[d], 2, &z[d], 1, NULL, 0 };
	}
	ops[NDEV] = (tileops_op){ "all_reduce", y, NDEV, NULL, 0, NULL, 0 };
	tileops_plan *p = plan_of(c, NULL, ops, 2 * NDEV + 1);
	plan_end_ok(p);
	for (int run = 0; run < 2; run++) {
		for (int d = 0; d < NDEV; d++) {
			/* Small integers and halves: every sum and product is exact. */
			fill(xv[d], (float)(d - 2 + run), 0.5f);
			fill(bv[d], (float)(3 * run - d), -0.25f);
			fill(wv[d], 0.5f * (float)(d + 1), 0.0f);
			th_write(c, x[d], xv[d], sizeof(xv[d]));
			th_write(c, b[d], bv[d], sizeof(bv[d]));
			th_write(c, w[d], wv[d], sizeof(wv[d]));
		}
		for (int i = 0; i < N; i++) {
			sum[i] = 0.0f;
			for (int d = 0; d < NDEV; d++)
				sum[i] += xv[d][i] + bv[d][i];
		}
		plan_run_ok(p, 0, NULL, 0);
		for (int d = 0; d < NDEV; d++) {
			for (int i = 0; i < N; i++)
				want[i] = sum[i] * wv[d][i];
			expect_vec(c, y[d], sum, "the all_reduce of the adds");
			expect_vec(c, z[d], want, "a mul after the all_reduce");
		}
	}
	/* The adds of each device, the all_reduce, the muls of each device. */
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 2 * NDEV + 1);
	cr_assert_eq(th_own_tenant_stat(c, "captures"), 1);
	tileops_plan_free(p);
	close_multi(c);
}

#define ROWS 8 /* the largest bucket */
#define W 16
#define SENTINEL 777.0f

/* out[r][i] for rows [0, rows): the plan below, on all rows. */
static void two_device_rows(const float (*x)[ROWS * W], const float (*b)[ROWS * W], const float *wt,
                            float *out)
{
	for (int k = 0; k < ROWS * W; k++)
		out[k] = (x[0][k] + b[0][k] + x[1][k] + b[1][k]) * wt[k % W];
}

/*
 * Buckets over two devices: y_d = x_d + b_d, an all_reduce of the y_d, and
 * z_d = y_d * w_d ([W] weights, broadcast), every [ROWS, W] tensor bucketed.
 * A run of size n computes the rows of the smallest bucket >= n, the
 * all_reduce included, and leaves the rows past it as they were.
 */
Test(devices, a_bucketed_plan_over_two_devices_computes_the_rows_of_each_bucket_only)
{
	static const int64_t buckets[4] = { 1, 2, 4, 8 };
	const int64_t sizes[4] = { 1, 3, 8, 0 }, bucket_of[4] = { 1, 4, 8, 8 };
	const int64_t rows[2] = { ROWS, W }, one[1] = { W };
	tileops_client *c = connect_multi("devices-plan-buckets");
	float xv[2][ROWS * W], bv[2][ROWS * W], wv[2][W], want[2][ROWS * W], got[ROWS * W];
	float sentinel[ROWS * W];
	tileops_tensor x[2], b[2], w[2], y[2], z[2], bucketed[8];
	tileops_tensor add_in[2][2], mul_in[2][2];
	tileops_op ops[5];
	tileops_plan_options o;

	for (int k = 0; k < ROWS * W; k++)
		sentinel[k] = SENTINEL;
	for (int d = 0; d < 2; d++) {
		x[d] = th_tensor_on(c, d, TILEOPS_F32, 2, rows);
		b[d] = th_tensor_on(c, d, TILEOPS_F32, 2, rows);
		y[d] = th_tensor_on(c, d, TILEOPS_F32, 2, rows);
		z[d] = th_tensor_on(c, d, TILEOPS_F32, 2, rows);
		w[d] = th_tensor_on(c, d, TILEOPS_F32, 1, one);
		bucketed[4 * d] = x[d];
		bucketed[4 * d + 1] = b[d];
		bucketed[4 * d + 2] = y[d];
		bucketed[4 * d + 3] = z[d];
		add_in[d][0] = x[d];
		add_in[d][1] = b[d];
		mul_in[d][0] = y[d];
		mul_in[d][1] = w[d];
		ops[d] = (tileops_op){ "add", add_in[d], 2, &y[d], 1, NULL, 0 };
		ops[3 + d] = (tileops_op){ "mul", mul_in[d], 2, &z[d], 1, NULL, 0 };
	}
	ops[2] = (tileops_op){ "all_reduce", y, 2, NULL, 0, NULL, 0 };
	memset(&o, 0, sizeof(o));
	o.buckets = buckets;
	o.n_buckets = 4;
	o.bucketed = bucketed;
	o.n_bucketed = 8;
	o.name = "two-devices-buckets";
	tileops_plan *p = plan_of(c, &o, ops, 5);
	plan_end_ok(p);
	for (int i = 0; i < 4; i++) {
		int live = (int)bucket_of[i] * W;

		for (int d = 0; d < 2; d++) {
			for (int k = 0; k < ROWS * W; k++) {
				xv[d][k] = (float)((k + 3 * i + d) % 9) - 4.0f;
				bv[d][k] = 0.5f * (float)((k * (d + 1) + i) % 5);
			}
			for (int k = 0; k < W; k++)
				wv[d][k] = (float)(d + 1) + 0.25f * (float)k;
			th_write(c, x[d], xv[d], sizeof(xv[d]));
			th_write(c, b[d], bv[d], sizeof(bv[d]));
			th_write(c, w[d], wv[d], sizeof(wv[d]));
			th_write(c, y[d], sentinel, sizeof(sentinel));
			th_write(c, z[d], sentinel, sizeof(sentinel));
		}
		for (int d = 0; d < 2; d++)
			two_device_rows(xv, bv, wv[d], want[d]);
		plan_run_ok(p, sizes[i], NULL, 0);
		for (int d = 0; d < 2; d++) {
			th_read(c, z[d], got, sizeof(got));
			for (int k = 0; k < ROWS * W; k++)
				cr_assert_eq(got[k], k < live ? want[d][k] : SENTINEL,
				             "size %lld, device %d: z row %d column %d is %g",
				             (long long)sizes[i], d, k / W, k % W, (double)got[k]);
			th_read(c, y[d], got, sizeof(got));
			for (int k = live; k < ROWS * W; k++)
				cr_assert_eq(got[k], SENTINEL,
				             "size %lld, device %d: y row %d, past the bucket, was "
				             "written",
				             (long long)sizes[i], d, k / W);
		}
	}
	/* Buckets 1, 4 and 8 captured, the last run a hit. */
	cr_assert_eq(th_own_tenant_stat(c, "graphs"), 3);
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 3 * 5);
	tileops_plan_free(p);
	close_multi(c);
}

/* Every op is still checked for every bucket when the plan is made: a
 * collective whose second rank is not bucketed suits bucket 4, not 8. */
Test(devices, a_collective_in_a_plan_invalid_for_one_bucket_is_refused_naming_op_and_bucket)
{
	static const int64_t buckets[2] = { 4, 8 };
	const int64_t big[2] = { 8, W }, small[2] = { 4, W };
	tileops_client *c = connect_multi("devices-plan-coll-bucket");
	tileops_tensor a = th_tensor_on(c, 0, TILEOPS_F32, 2, big);
	tileops_tensor a2 = th_tensor_on(c, 0, TILEOPS_F32, 2, big);
	tileops_tensor r1 = th_tensor_on(c, 1, TILEOPS_F32, 2, small);
	tileops_tensor same[2] = { a, a }, ranks[2] = { a, r1 }, bucketed[2] = { a, a2 };
	tileops_op ops[2] = { { "add", same, 2, &a2, 1, NULL, 0 },
		              { "all_reduce", ranks, 2, NULL, 0, NULL, 0 } };
	tileops_plan_options o;

	memset(&o, 0, sizeof(o));
	o.buckets = buckets;
	o.n_buckets = 2;
	o.bucketed = bucketed;
	o.n_bucketed = 2;
	tileops_plan *p = plan_of(c, &o, ops, 2);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_SHAPE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "plan op 1, bucket 8: all_reduce"), "%s",
	          tileops_last_error());
	tileops_plan_free(p);

	/* Two ranks on one device are refused in a plan as outside one. */
	tileops_tensor a3 = th_tensor_on(c, 1, TILEOPS_F32, 2, small);
	tileops_tensor twice[2] = { r1, a3 };
	tileops_op bad = { "all_reduce", twice, 2, NULL, 0, NULL, 0 };
	p = plan_of(c, NULL, &bad, 1);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_INVALID_ARGUMENT, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "plan op 0: all_reduce: ranks 0 and 1 are both "
	                                            "on device 1"),
	          "%s", tileops_last_error());
	tileops_plan_free(p);
	close_multi(c);
}

/*
 * A binding replaces a plan tensor with a tensor on the same device: one on
 * another device is refused naming both devices, and the plan keeps its
 * tensors; one on the same device is used.
 */
Test(devices, a_binding_on_another_device_than_the_tensor_it_replaces_is_refused)
{
	tileops_client *c = connect_multi("devices-plan-bind");
	float a[N], bv[N], twice_a[N], twice_b[N], keep[N];
	tileops_tensor x0 = vec_on(c, 0, NULL), o0 = vec_on(c, 0, NULL);
	tileops_tensor x1 = vec_on(c, 1, NULL), o1 = vec_on(c, 1, NULL);
	tileops_tensor on2 = vec_on(c, 2, NULL), on1 = vec_on(c, 1, NULL);
	tileops_tensor in0[2] = { x0, x0 }, in1[2] = { x1, x1 };
	tileops_op ops[2] = { { "add", in0, 2, &o0, 1, NULL, 0 },
		              { "add", in1, 2, &o1, 1, NULL, 0 } };
	tileops_plan *p = plan_of(c, NULL, ops, 2);

	fill(a, 1.0f, 0.5f);
	fill(bv, -7.0f, 0.25f);
	fill(keep, 99.0f, 0.0f);
	for (int i = 0; i < N; i++) {
		twice_a[i] = 2.0f * a[i];
		twice_b[i] = 2.0f * bv[i];
	}
	th_write(c, x0, a, sizeof(a));
	th_write(c, x1, a, sizeof(a));
	th_write(c, on2, bv, sizeof(bv));
	th_write(c, on1, bv, sizeof(bv));
	th_write(c, o1, keep, sizeof(keep));
	plan_end_ok(p);

	tileops_binding wrong = { x1, on2 };
	tileops_status st = tileops_plan_run(p, 0, &wrong, 1);
	expect_mixed_refused(st, 2, 1, "a binding on device 2 for a tensor on device 1");
	cr_assert(th_contains(tileops_last_error(), "binding 0") &&
	                  th_contains(tileops_last_error(), "the device of the tensor it replaces"),
	          "message '%s'", tileops_last_error());
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	expect_vec(c, o1, keep, "the output of a refused run");
	/* The plan still names its own tensor... */
	plan_run_ok(p, 0, NULL, 0);
	expect_vec(c, o1, twice_a, "a run after the refused binding");
	/* ... and takes one on its device. */
	tileops_binding right = { x1, on1 };
	plan_run_ok(p, 0, &right, 1);
	expect_vec(c, o1, twice_b, "a run with a binding on device 1");
	expect_vec(c, o0, twice_a, "device 0's op of the same run");
	tileops_plan_free(p);
	close_multi(c);
}

/*
 * The graph cache counts every segment of a plan over several devices: the
 * same four ops make as many graph bytes on two devices as on one (the CPU
 * backend's graph bytes are its recorded calls), held by one entry; freeing
 * the plan gives them all back.
 */
Test(devices, the_graph_cache_counts_the_bytes_of_every_segment_of_a_plan)
{
	tileops_client *c = connect_multi("devices-plan-bytes");
	tileops_tensor x0 = vec_on(c, 0, NULL), o0 = vec_on(c, 0, NULL), q0 = vec_on(c, 0, NULL);
	tileops_tensor x3 = vec_on(c, 3, NULL), o3 = vec_on(c, 3, NULL);
	tileops_tensor a0[2] = { x0, x0 }, b0[2] = { o0, x0 }, a3[2] = { x3, x3 };
	tileops_tensor b3[2] = { o3, x3 };
	/* The same ops, once all on device 0 and once two on each device. */
	tileops_op one[4] = { { "add", a0, 2, &o0, 1, NULL, 0 },
		              { "mul", b0, 2, &q0, 1, NULL, 0 },
		              { "add", a0, 2, &o0, 1, NULL, 0 },
		              { "mul", b0, 2, &q0, 1, NULL, 0 } };
	tileops_op two[4] = { { "add", a0, 2, &o0, 1, NULL, 0 },
		              { "mul", b0, 2, &q0, 1, NULL, 0 },
		              { "add", a3, 2, &o3, 1, NULL, 0 },
		              { "mul", b3, 2, &x3, 1, NULL, 0 } };
	tileops_plan *p = plan_of(c, NULL, one, 4);

	plan_end_ok(p);
	plan_run_ok(p, 0, NULL, 0);
	double bytes_one = th_own_tenant_stat(c, "graph_bytes");
	cr_assert_gt(bytes_one, 0, "a captured graph of four ops holds no bytes");
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 1);
	tileops_plan_free(p);
	cr_assert_eq(th_own_tenant_stat(c, "graph_bytes"), 0);

	p = plan_of(c, NULL, two, 4);
	plan_end_ok(p);
	plan_run_ok(p, 0, NULL, 0);
	cr_assert_eq(th_own_tenant_stat(c, "graphs"), 1);
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 2);
	cr_assert_eq(th_own_tenant_stat(c, "graph_bytes"), bytes_one,
	             "two segments hold %g bytes, the same ops on one device %g",
	             th_own_tenant_stat(c, "graph_bytes"), bytes_one);
	tileops_plan_free(p);
	cr_assert_eq(th_own_tenant_stat(c, "graphs"), 0);
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 0);
	cr_assert_eq(th_own_tenant_stat(c, "graph_bytes"), 0);
	close_multi(c);
}

Test(devices, a_daemon_without_a_devices_setting_reports_one_device)
{
	tileops_client *c = th_connect("devices-default", 0);
	const int64_t shape[1] = { N };
	tileops_device_info d;
	tileops_tensor t = 0;

	cr_assert_eq(tileops_device_count(c), 1);
	cr_assert_eq(tileops_device_info_get(c, 0, &d), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(d.index, 0);
	cr_assert(d.name != NULL && d.name[0] != '\0', "device 0 has no name");
	cr_assert_eq(tileops_device_info_get(c, 1, &d), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_create_on(c, 1, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(strstr(tileops_last_error(), "serves 1 device") != NULL, "message '%s'",
	          tileops_last_error());
	tileops_close(c);
}
