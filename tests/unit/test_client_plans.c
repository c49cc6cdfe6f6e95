/*
 * test_client_plans.c - the plan API of libtileops against the scripted
 * stand-in for tileopsd (fake_daemon.c): what is checked on the client and
 * never sent, and what goes on the wire when it is sent.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fake_daemon.h"

TestSuite(client_plans, .init = fake_start, .fini = fake_stop);

static const tileops_tensor ins[2] = { 7, 8 }, outs[1] = { 9 };

static tileops_op op_add(void)
{
	tileops_op op = { "add", ins, 2, outs, 1, NULL, 0 };

	return op;
}

Test(client_plans, calls_on_null_arguments_fail_with_invalid_argument)
{
	tileops_plan *p = (tileops_plan *)1;
	tileops_completion *cp = (tileops_completion *)1;
	tileops_op op = op_add();

	cr_assert_eq(tileops_plan_begin(NULL, NULL, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_null(p, "out must be NULL after a failed begin");
	cr_assert_not_null(strstr(tileops_last_error(), "client"), "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_add(NULL, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_end(NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_run(NULL, 0, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_submit(NULL, 0, NULL, 0, &cp), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_null(cp, "out must be NULL after a failed submit");
	cr_assert_eq(tileops_admin_reset(NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	tileops_plan_free(NULL);
}

Test(client_plans, bad_plans_and_ops_fail_locally_without_sending)
{
	tileops_client *c = fake_connect(0, 0);
	int64_t down[2] = { 4, 2 }, zero[2] = { 0, 1 }, ok[2] = { 1, 2 };
	tileops_tensor t = 7;
	tileops_plan_options o;
	tileops_plan *p = NULL;
	tileops_completion *cp = NULL;
	tileops_binding b = { 7, 8 };
	tileops_op op = op_add();

	memset(&o, 0, sizeof(o));
	o.buckets = down;
	o.n_buckets = 2;
	cr_assert_eq(tileops_plan_begin(c, &o, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "ascending"), "%s", tileops_last_error());
	o.buckets = zero;
	cr_assert_eq(tileops_plan_begin(c, &o, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	o.buckets = NULL;
	cr_assert_eq(tileops_plan_begin(c, &o, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	o.n_buckets = 0;
	o.bucketed = &t;
	o.n_bucketed = 1;
	cr_assert_eq(tileops_plan_begin(c, &o, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "no buckets"), "%s", tileops_last_error());
	o.buckets = ok;
	o.n_buckets = 2;
	cr_assert_eq(tileops_plan_begin(c, &o, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_begin(c, &o, &p), TILEOPS_OK);

	/* The same checks as tileops_op_run. */
	op.n_inputs = 9;
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	op.n_inputs = 2;
	op.name = "";
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_add(p, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	/* Nothing added yet: an empty plan is refused before sending. */
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "no ops"), "%s", tileops_last_error());
	/* Not ended: there is nothing to run yet. */
	cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "tileops_plan_end"), "%s",
	                   tileops_last_error());
	cr_assert_eq(tileops_plan_submit(p, 0, NULL, 0, &cp), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_plan_submit(p, 0, &b, 1, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	/* A plan never ended is freed locally. */
	tileops_plan_free(p);
	cr_assert_eq(fake_count(), 1, "a bad plan call reached the daemon");
	tileops_close(c);
}

Test(client_plans, end_sends_one_plan_create_and_a_reply_without_a_handle_is_refused)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_plan *p = NULL;
	tileops_op op = op_add();

	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	cr_assert_eq(fake_count(), 1, "plan_add sent something");
	/* The stand-in answers OK with no PlanCreateReply. */
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_PROTOCOL);
	cr_assert_not_null(strstr(tileops_last_error(), "handle"), "%s", tileops_last_error());
	cr_assert_eq(fake_count(), 2);
	cr_assert_eq(fake.log[1].body, TILEOPS__REQUEST__BODY_PLAN_CREATE);
	cr_assert_eq(fake.log[1].seq, 1);
	/* Still unsent: freeing sends nothing. */
	tileops_plan_free(p);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.log[2].body, TILEOPS__REQUEST__BODY_SYNC);
	tileops_close(c);
}

Test(client_plans, a_plan_over_the_size_cap_is_refused_before_sending_naming_the_limit)
{
	tileops_client *c;
	tileops_plan *p = NULL;
	tileops_op op = op_add();

	fake.max_message_bytes = 4096;
	c = fake_connect(0, 0);
	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
	for (int i = 0; i < 400; i++)
		cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_TOO_LARGE);
	cr_assert_not_null(strstr(tileops_last_error(), "4096"), "%s", tileops_last_error());
	cr_assert_not_null(strstr(tileops_last_error(), "400 ops"), "%s", tileops_last_error());
	cr_assert_eq(fake_count(), 1, "the refused plan was sent");
	tileops_plan_free(p);
	tileops_close(c);
}

Test(client_plans, admin_reset_sends_admin_reset_and_returns_the_daemon_status)
{
	tileops_client *c = fake_connect(0, 0);

	cr_assert_eq(tileops_admin_reset(c), TILEOPS_OK);
	cr_assert_eq(fake_count(), 2);
	cr_assert_eq(fake.log[1].body, TILEOPS__REQUEST__BODY_ADMIN_RESET);
	tileops_close(c);
}

Test(client_plans, a_plan_outlives_its_client_and_frees_without_sending)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_plan *p = NULL;
	tileops_op op = op_add();

	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
	cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
	tileops_close(c);
	fake_wait_for(2); /* Hello, Goodbye */
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_CLOSED);
	tileops_plan_free(p);
	cr_assert_eq(fake_count(), 2);
}
