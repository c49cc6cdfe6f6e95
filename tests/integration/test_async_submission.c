/*
 * test_async_submission.c - submitting ops without waiting: completions
 * report each op's status, results respect submission order, sync waits.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

#define N_OPS 200
#define LEN 1024

static tileops_client *client;

static void setup(void)
{
	client = th_connect("async", 0);
}

static void teardown(void)
{
	tileops_close(client);
}

TestSuite(async, .init = setup, .fini = teardown);

/*
 * acc += one, N_OPS times, all submitted before any is waited for. Each add
 * reads what the previous one wrote, so the result counts only when they
 * ran in submission order.
 */
Test(async, many_submitted_adds_all_complete_in_order)
{
	const int64_t shape[] = { LEN };
	float *zeros = calloc(LEN, sizeof(float)), *ones = malloc(LEN * sizeof(float));
	float got[LEN], want[LEN];
	tileops_completion *cp[N_OPS];
	tileops_tensor acc, one;

	cr_assert(zeros && ones);
	for (int i = 0; i < LEN; i++) {
		ones[i] = 1.0f;
		want[i] = (float)N_OPS;
	}
	acc = th_tensor_f32(client, 1, shape, zeros);
	one = th_tensor_f32(client, 1, shape, ones);
	tileops_tensor in[2] = { acc, one };
	tileops_op op = { "add", in, 2, &acc, 1, NULL, 0 };

	for (int i = 0; i < N_OPS; i++) {
		tileops_status st = tileops_op_submit(client, &op, &cp[i]);

		cr_assert_eq(st, TILEOPS_OK, "submit %d: %s", i, tileops_last_error());
		cr_assert(cp[i] != NULL);
	}
	for (int i = 0; i < N_OPS; i++) {
		tileops_status st = tileops_completion_wait(cp[i], TH_TIMEOUT_MS);

		cr_assert_eq(st, TILEOPS_OK, "completion %d: %s (%s)", i, tileops_strerror(st),
		             tileops_last_error());
		/* Waiting again gives the same answer. */
		cr_assert_eq(tileops_completion_wait(cp[i], 0), TILEOPS_OK);
		tileops_completion_free(cp[i]);
	}
	cr_assert_eq(tileops_sync(client), TILEOPS_OK, "%s", tileops_last_error());
	th_read(client, acc, got, sizeof(got));
	th_expect_close_f32(got, want, LEN, 0, 0, "acc after 200 ordered adds");
	free(zeros);
	free(ones);
}

Test(async, poll_says_in_progress_or_ok_and_ends_ok)
{
	const int64_t shape[] = { 256, 256 };
	float *a = malloc(256 * 256 * sizeof(float));
	th_rng rng = th_rng_seed(5);
	tileops_completion *cp[16];
	int in_progress_seen = 0;

	cr_assert(a);
	th_fill_f32(&rng, a, 256 * 256, -1, 1);
	tileops_tensor in[2] = { th_tensor_f32(client, 2, shape, a),
		                 th_tensor_f32(client, 2, shape, a) };
	tileops_tensor out = th_tensor_f32(client, 2, shape, NULL);
	tileops_op op = { "gemm", in, 2, &out, 1, NULL, 0 };

	for (int i = 0; i < 16; i++)
		cr_assert_eq(tileops_op_submit(client, &op, &cp[i]), TILEOPS_OK, "%s",
		             tileops_last_error());
	for (int i = 0; i < 16; i++) {
		int64_t deadline = th_now_ms() + 60000;
		tileops_status st;

		while ((st = tileops_completion_poll(cp[i])) == TILEOPS_IN_PROGRESS) {
			in_progress_seen++;
			cr_assert(th_now_ms() < deadline, "completion %d still pending after 60 s",
			          i);
			th_sleep_ms(1);
		}
		cr_assert_eq(st, TILEOPS_OK, "completion %d: %s (%s)", i, tileops_strerror(st),
		             tileops_last_error());
		tileops_completion_free(cp[i]);
	}
	/* 16 gemms of 256^3 on the CPU take long enough to catch one pending. */
	cr_assert(in_progress_seen > 0, "poll never reported TILEOPS_IN_PROGRESS");
	free(a);
}

Test(async, a_failing_submission_reports_its_error_on_its_completion)
{
	const int64_t s4[] = { 4 }, s5[] = { 5 };
	tileops_tensor in[2] = { th_tensor_f32(client, 1, s4, NULL),
		                 th_tensor_f32(client, 1, s5, NULL) };
	tileops_tensor out = th_tensor_f32(client, 1, s4, NULL);
	tileops_op bad = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_op good = { "add", in, 1, &out, 1, NULL, 0 };
	tileops_tensor ok_in[2] = { in[0], in[0] };
	tileops_completion *cb = NULL, *cg = NULL;
	tileops_status st;

	good.inputs = ok_in;
	good.n_inputs = 2;
	st = tileops_op_submit(client, &bad, &cb);
	if (st == TILEOPS_OK) {
		st = tileops_completion_wait(cb, TH_TIMEOUT_MS);
		tileops_completion_free(cb);
	}
	cr_assert_eq(st, TILEOPS_ERR_SHAPE, "add of [4] and [5]: got %s (%s)", tileops_strerror(st),
	             tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "add"), "message does not name the op: %s",
	          tileops_last_error());
	/* The session carries on. */
	cr_assert_eq(tileops_op_submit(client, &good, &cg), TILEOPS_OK);
	cr_assert_eq(tileops_completion_wait(cg, TH_TIMEOUT_MS), TILEOPS_OK, "%s",
	             tileops_last_error());
	tileops_completion_free(cg);
	cr_assert_eq(tileops_sync(client), TILEOPS_OK, "%s", tileops_last_error());
}

Test(async, sync_waits_for_everything_submitted_before_it)
{
	const int64_t shape[] = { 64 };
	float v[64], got[64], want[64];
	tileops_completion *cp[32];

	for (int i = 0; i < 64; i++) {
		v[i] = (float)i;
		want[i] = (float)i * 33.0f; /* v, plus v added 32 times */
	}
	tileops_tensor x = th_tensor_f32(client, 1, shape, v);
	tileops_tensor acc = th_tensor_f32(client, 1, shape, v);
	tileops_tensor in[2] = { acc, x };
	tileops_op op = { "add", in, 2, &acc, 1, NULL, 0 };

	for (int i = 0; i < 32; i++)
		cr_assert_eq(tileops_op_submit(client, &op, &cp[i]), TILEOPS_OK);
	cr_assert_eq(tileops_sync(client), TILEOPS_OK, "%s", tileops_last_error());
	for (int i = 0; i < 32; i++) {
		cr_assert_eq(tileops_completion_poll(cp[i]), TILEOPS_OK,
		             "completion %d still pending after sync", i);
		tileops_completion_free(cp[i]);
	}
	th_read(client, acc, got, sizeof(got));
	th_expect_close_f32(got, want, 64, 0, 0, "acc after sync");
}

Test(async, more_than_256_outstanding_submissions_still_work)
{
	const int64_t shape[] = { 8 };
	float z[8] = { 0 }, o[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, got[8];
	enum { MANY = 600 };
	tileops_completion **cp = calloc(MANY, sizeof(*cp));
	tileops_tensor acc = th_tensor_f32(client, 1, shape, z);
	tileops_tensor one = th_tensor_f32(client, 1, shape, o);
	tileops_tensor in[2] = { acc, one };
	tileops_op op = { "add", in, 2, &acc, 1, NULL, 0 };

	cr_assert(cp);
	for (int i = 0; i < MANY; i++)
		cr_assert_eq(tileops_op_submit(client, &op, &cp[i]), TILEOPS_OK, "submit %d: %s", i,
		             tileops_last_error());
	for (int i = 0; i < MANY; i++) {
		cr_assert_eq(tileops_completion_wait(cp[i], -1), TILEOPS_OK, "%d: %s", i,
		             tileops_last_error());
		tileops_completion_free(cp[i]);
	}
	th_read(client, acc, got, sizeof(got));
	for (int i = 0; i < 8; i++)
		cr_assert_eq(got[i], (float)MANY);
	free(cp);
}

Test(async, free_of_a_null_completion_is_a_no_op)
{
	tileops_completion_free(NULL);
}
