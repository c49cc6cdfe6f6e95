/*
 * test_diagnostic_ops.c - the manifest's diagnostic ops (spin) are served
 * only by a daemon whose config says diagnostic_ops = on: by default a
 * client cannot hold device blocks for a second per call with them.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

TestSuite(diagnostic_ops, .fini = daemon2_kill_running, .timeout = 60);

/* spin over x [4] with 4 blocks of 1000 ns: out[b] = x[b] + 1. */
static tileops_status run_spin(tileops_client *c, float *got)
{
	int64_t shape[1] = { 4 };
	float x[4] = { 1.5f, -2.0f, 0.25f, 7.0f };
	tileops_tensor tx = th_tensor_f32(c, 1, shape, x);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_param params[2] = { tileops_param_int("ns", 1000), tileops_param_int("blocks", 4) };
	tileops_op op = { .name = "spin",
		          .inputs = &tx,
		          .n_inputs = 1,
		          .outputs = &out,
		          .n_outputs = 1,
		          .params = params,
		          .n_params = 2 };
	tileops_status st = tileops_op_run(c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	if (st == TILEOPS_OK)
		th_read(c, out, got, sizeof(float) * 4);
	return st;
}

Test(diagnostic_ops, a_default_daemon_refuses_spin_naming_the_setting)
{
	tileops_client *c = th_connect("diagnostic-default", 1 << 20);
	float got[4];
	tileops_status st = run_spin(c, got);
	cr_assert_eq(st, TILEOPS_ERR_UNKNOWN_OP, "spin on a default daemon: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	cr_assert(strstr(tileops_last_error(), "diagnostic_ops = on") != NULL,
	          "the message does not name the setting: %s", tileops_last_error());
	tileops_close(c);
}

Test(diagnostic_ops, a_daemon_with_diagnostic_ops_on_runs_spin)
{
	daemon2 d;
	daemon2_start(&d, "diagnostic_ops = on\n");
	daemon2_use(&d);
	tileops_client *c = th_connect("diagnostic-on", 1 << 20);
	float got[4];
	tileops_status st = run_spin(c, got);
	cr_assert_eq(st, TILEOPS_OK, "spin with diagnostic_ops = on: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
	const float want[4] = { 2.5f, -1.0f, 1.25f, 8.0f };
	for (int i = 0; i < 4; i++)
		cr_assert_float_eq(got[i], want[i], 0.0f, "out[%d] = %g, expected %g", i, got[i],
		                   want[i]);
	tileops_close(c);
	daemon2_stop(&d);
}
