/*
 * test_device_faults.c - device errors, injected with the diagnostic
 * `fault` op: a launch the device refuses fails that op alone; a fault
 * that loses the device fails every session's work promptly, turns
 * readiness off and ends the daemon with status 75 so that its service
 * manager restarts it. Runs on the backend TILEOPS_TEST_BACKEND names (the
 * CPU backend stands for a fault with TK_ERR_FAULT; on a GPU it is a
 * trapping kernel).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

TestSuite(device_faults, .fini = daemon2_kill_running, .timeout = 120);

static tileops_status run_fault(tileops_client *c, int sticky)
{
	const int64_t shape[] = { 1 };
	tileops_tensor x = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_param p = tileops_param_bool("sticky", sticky);
	tileops_op op = { .name = "fault",
		          .inputs = &x,
		          .n_inputs = 1,
		          .outputs = &out,
		          .n_outputs = 1,
		          .params = &p,
		          .n_params = 1 };
	tileops_status st = tileops_op_run(c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	return st;
}

/* add over three elements, and its result checked; the status. */
static tileops_status run_add(tileops_client *c, tileops_tensor a, tileops_tensor out)
{
	tileops_tensor in[2] = { a, a };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_status st = tileops_op_run(c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	float got[3];
	if (st == TILEOPS_OK)
		st = tileops_tensor_read(c, out, 0, got, sizeof(got));
	if (st == TILEOPS_OK)
		cr_assert(got[0] == 2 && got[1] == 4 && got[2] == 6, "add gave %g %g %g", got[0],
		          got[1], got[2]);
	return st;
}

Test(device_faults, a_refused_launch_fails_only_that_op)
{
	daemon2 d;
	daemon2_start(&d, "diagnostic_ops = on\n");
	daemon2_use(&d);
	tileops_client *c = th_connect("refused-launch", 1 << 20);
	tileops_status st = run_fault(c, 0);
	cr_assert_eq(st, TILEOPS_ERR_BACKEND, "a refused launch: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
	const int64_t shape[] = { 3 };
	float v[3] = { 1, 2, 3 };
	tileops_tensor a = th_tensor_f32(c, 1, shape, v), out = th_tensor_f32(c, 1, shape, NULL);
	st = run_add(c, a, out);
	cr_assert_eq(st, TILEOPS_OK, "the same session after a refused launch: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	char *stats = th_stats();
	cr_assert(strstr(stats, "\"ready\":true") != NULL,
	          "a refused launch turned readiness off: %s", stats);
	free(stats);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(device_faults, a_lost_device_fails_every_session_and_exits_75)
{
	daemon2 d;
	daemon2_start(&d, "diagnostic_ops = on\n");
	daemon2_use(&d);
	tileops_client *other = th_connect("bystander", 1 << 20);
	const int64_t shape[] = { 3 };
	float v[3] = { 1, 2, 3 };
	tileops_tensor a = th_tensor_f32(other, 1, shape, v);
	tileops_tensor out = th_tensor_f32(other, 1, shape, NULL);
	cr_assert_eq(run_add(other, a, out), TILEOPS_OK);

	tileops_client *c = th_connect("faulter", 1 << 20);
	tileops_status st = run_fault(c, 1);
	cr_assert_eq(st, TILEOPS_ERR_BACKEND, "a device fault: %s (%s)", tileops_strerror(st),
	             tileops_last_error());

	/* The other session's next work fails too, promptly, and never hangs. */
	int64_t t0 = th_now_ms();
	st = run_add(other, a, out);
	cr_assert_neq(st, TILEOPS_OK, "work after the device was lost succeeded");
	cr_assert_lt(th_now_ms() - t0, 5000, "the failure took %lld ms",
	             (long long)(th_now_ms() - t0));
	tileops_close(c);
	tileops_close(other);
	int code = daemon2_wait(&d, 30000);
	cr_assert_eq(code, 75, "the daemon's exit status after a lost device: %d (expected 75)",
	             code);
	cr_assert(daemon2_log_has(&d, "the device failed"),
	          "the log does not say the device failed");
	daemon2_kill(&d);
}
