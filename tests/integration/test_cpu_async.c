/*
 * test_cpu_async.c - the CPU backend queues work as a GPU does: an op_run
 * returns once the op is launched, before its kernel has run; syncs,
 * reads and timed completions wait for it; a tensor freed or a session
 * closed behind queued work waits for that work; a failed kernel's error
 * comes at the next sync, and the one after is clean. And a client that
 * sleeps while its sync completes is woken every time (the completion
 * path's full fence, daemon/exec/ring.c).
 *
 * Each test runs its own daemon with the diagnostic `spin` op, which
 * stands for a kernel of a known length.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

TestSuite(cpu_async, .fini = daemon2_kill_running, .timeout = 120);

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

typedef struct spin_op {
	tileops_tensor x, out;
	tileops_param params[2];
	tileops_op op;
} spin_op;

/* spin over x = {1, 2, 3, 4}: out[b] = x[b] + 1 after `ns` nanoseconds. */
static void spin_make(tileops_client *c, spin_op *s, int64_t ns)
{
	const int64_t shape[1] = { 4 };
	const float x[4] = { 1, 2, 3, 4 };
	s->x = th_tensor_f32(c, 1, shape, x);
	s->out = th_tensor_f32(c, 1, shape, NULL);
	s->params[0] = tileops_param_int("ns", ns);
	s->params[1] = tileops_param_int("blocks", 4);
	s->op = (tileops_op){ .name = "spin",
		              .inputs = &s->x,
		              .n_inputs = 1,
		              .outputs = &s->out,
		              .n_outputs = 1,
		              .params = s->params,
		              .n_params = 2 };
}

static void spin_check(tileops_client *c, const spin_op *s)
{
	float got[4];
	th_read(c, s->out, got, sizeof(got));
	for (int i = 0; i < 4; i++)
		cr_assert_eq(got[i], (float)(i + 2), "out[%d] = %g, expected %d", i, got[i], i + 2);
}

static tileops_client *start(daemon2 *d, const char *name)
{
	daemon2_start(d, "diagnostic_ops = on\n");
	daemon2_use(d);
	return th_connect(name, 1 << 20);
}

Test(cpu_async, op_run_returns_before_the_kernel_has_run_and_sync_waits_for_it)
{
	daemon2 d;
	tileops_client *c = start(&d, "async-run");
	spin_op s;
	spin_make(c, &s, 1000000000); /* one second */
	tileops_status st = tileops_op_run(c, &s.op);
	cr_assert_eq(st, TILEOPS_OK, "op_run: %s (%s)", tileops_strerror(st), tileops_last_error());
	/* A timed op finishes when the device has run it: behind the spin. */
	tileops_op add = { .name = "add",
		           .inputs = (tileops_tensor[]){ s.x, s.x },
		           .n_inputs = 2,
		           .outputs = &s.out,
		           .n_outputs = 1 };
	tileops_completion *cp = NULL;
	cr_assert_eq(tileops_op_submit_timed(c, &add, &cp), TILEOPS_OK);
	cr_assert_eq(tileops_completion_poll(cp), TILEOPS_IN_PROGRESS,
	             "a timed op behind a one-second kernel finished at once: the launch ran "
	             "the kernel");
	double t0 = now_us();
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "sync: %s", tileops_last_error());
	double waited = now_us() - t0;
	cr_assert_eq(tileops_completion_poll(cp), TILEOPS_OK,
	             "the timed op is not done after the sync");
	tileops_completion_free(cp);
	cr_assert_gt(waited, 100000.0, "sync returned after %.0f us, before the kernel ended",
	             waited);
	float got[4];
	th_read(c, s.out, got, sizeof(got));
	for (int i = 0; i < 4; i++)
		cr_assert_eq(got[i], (float)(2 * (i + 1)), "out[%d] = %g after spin then add", i,
		             got[i]);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(cpu_async, a_read_after_an_op_sees_its_result_without_a_sync)
{
	daemon2 d;
	tileops_client *c = start(&d, "async-read");
	spin_op s;
	spin_make(c, &s, 200000000);
	th_run(c, &s.op);
	spin_check(c, &s); /* the read waits for the op that writes the tensor */
	tileops_close(c);
	daemon2_stop(&d);
}

Test(cpu_async, tensors_freed_behind_queued_work_stay_until_it_has_run)
{
	daemon2 d;
	tileops_client *c = start(&d, "async-free");
	spin_op a, b;
	spin_make(c, &a, 200000000);
	spin_make(c, &b, 1000);
	th_run(c, &a.op);
	/* Freed while the first kernel still reads and writes them (the
	 * sanitized build's daemon reports a use after free at its exit). */
	cr_assert_eq(tileops_tensor_free(c, a.x), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_free(c, a.out), TILEOPS_OK);
	th_run(c, &b.op);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "sync: %s", tileops_last_error());
	spin_check(c, &b);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(cpu_async, a_session_closed_behind_queued_work_is_reaped_after_it)
{
	daemon2 d;
	tileops_client *c = start(&d, "async-close");
	spin_op s;
	spin_make(c, &s, 300000000);
	for (int i = 0; i < 4; i++)
		th_run(c, &s.op);
	tileops_close(c); /* with over a second of work queued */
	cr_assert_eq(th_stat_wait("sessions", 0, TH_TIMEOUT_MS), 0,
	             "the closed session was not reaped");
	tileops_client *c2 = th_connect("async-after-close", 1 << 20);
	spin_op s2;
	spin_make(c2, &s2, 1000);
	th_run(c2, &s2.op);
	cr_assert_eq(tileops_sync(c2), TILEOPS_OK);
	spin_check(c2, &s2);
	tileops_close(c2);
	daemon2_stop(&d);
}

Test(cpu_async, a_failed_kernel_fails_the_next_sync_and_not_the_one_after)
{
	daemon2 d;
	tileops_client *c = start(&d, "async-fail");
	const int64_t shape[1] = { 1 };
	tileops_tensor x = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_tensor y = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_param sticky = tileops_param_bool("sticky", 0);
	tileops_op fault = { .name = "fault",
		             .inputs = &x,
		             .n_inputs = 1,
		             .outputs = &y,
		             .n_outputs = 1,
		             .params = &sticky,
		             .n_params = 1 };
	spin_op s;
	spin_make(c, &s, 50000000);
	/* Queued behind a kernel, the failing one has not run when op_run returns. */
	th_run(c, &s.op);
	tileops_status st = tileops_op_run(c, &fault);
	cr_assert_eq(st, TILEOPS_OK, "the launch of a kernel that fails later: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	th_run(c, &s.op);
	st = tileops_sync(c);
	cr_assert_eq(st, TILEOPS_ERR_BACKEND, "the sync after a failed kernel: %s (%s)",
	             tileops_strerror(st), tileops_last_error());
	cr_assert(strstr(tileops_last_error(), "fault") != NULL,
	          "the error does not name the op: %s", tileops_last_error());
	st = tileops_sync(c);
	cr_assert_eq(st, TILEOPS_OK, "the sync after that: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
	spin_check(c, &s);
	tileops_close(c);
	daemon2_stop(&d);
}

/*
 * Clients that stop spinning and go to sleep after 0, 1, ... 12 us
 * (TILEOPS_SPIN_US), each syncing again and again with nothing queued:
 * the daemon posts each sync's completion from its fence path a few
 * microseconds after the entry, so for some of the clients it comes just
 * as they announce their sleep, again and again. Without a full fence
 * between publishing cq_tail and reading client_waiting both sides can
 * miss each other (x86 lets the load pass the store), and the client
 * sleeps until its 200 ms safety net.
 */
Test(cpu_async, a_client_going_to_sleep_as_its_sync_completes_is_always_woken)
{
	daemon2 d;
	daemon2_start(&d, "diagnostic_ops = on\n");
	daemon2_use(&d);
	const int spins = 13, n = 1500;
	int slow = 0;
	double worst = 0.0;
	for (int spin = 0; spin < spins; spin++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", spin);
		setenv("TILEOPS_SPIN_US", v, 1);
		tileops_client *c = th_connect("async-wake", 1 << 20);
		for (int i = 0; i < n && slow < 5; i++) {
			double t0 = now_us();
			tileops_status st = tileops_sync(c);
			double us = now_us() - t0;
			cr_assert_eq(st, TILEOPS_OK, "sync %d: %s", i, tileops_last_error());
			if (us > worst)
				worst = us;
			if (us > 100000.0)
				slow++;
		}
		tileops_close(c);
	}
	unsetenv("TILEOPS_SPIN_US");
	printf("cpu_async: %d syncs from clients spinning 0 to %d us: %d over 100 ms, the "
	       "longest %.0f us\n",
	       spins * n, spins - 1, slow, worst);
	cr_assert_eq(slow, 0,
	             "%d of %d syncs took over 100 ms (the longest %.0f us): a completion did "
	             "not wake the client going to sleep",
	             slow, spins * n, worst);
	daemon2_stop(&d);
}
