/*
 * test_share.c - a session's share of the device (daemon/exec/share.c)
 * against a backend whose fences pass when the test says: charges below
 * session_queue_us run, the session is held at the limit with its work
 * fenced and its stream lowered once, and runs again (and gets its
 * priority back before a short op) as its fences pass; a long op (a
 * quarter of the limit or more) lowers its session before it is launched,
 * and a session of long ops stays low across its drains; the fence pool's
 * bound; estimates.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "share.h"

#define MAX_FENCES 64

/* Fences are indices into `passed`; the test passes them in order. */
static int passed[MAX_FENCES], made, freed, lowered, raised;

static tileops_status fake_fence_create(backend *be, void *stream, void **fence, char *err,
                                        size_t errlen)
{
	(void)be, (void)stream, (void)err, (void)errlen;
	cr_assert_lt(made, MAX_FENCES);
	*fence = &passed[made++];
	return TILEOPS_OK;
}

static tileops_status fake_fence_query(backend *be, void *fence, char *err, size_t errlen)
{
	(void)be, (void)err, (void)errlen;
	return *(int *)fence ? TILEOPS_OK : TILEOPS_IN_PROGRESS;
}

static void fake_fence_free(backend *be, void *fence)
{
	(void)be, (void)fence;
	freed++;
}

static void fake_priority(backend *be, void *stream, int low)
{
	(void)be, (void)stream;
	if (low)
		lowered++;
	else
		raised++;
}

static const backend_ops fake_ops = {
	.fence_create = fake_fence_create,
	.fence_query = fake_fence_query,
	.fence_free = fake_fence_free,
	.stream_priority = fake_priority,
};

static backend fake = { .ops = &fake_ops, .bytes_per_us = 1000.0, .flops_per_us = 100000.0 };

static void reset(void)
{
	memset(passed, 0, sizeof(passed));
	made = freed = lowered = raised = 0;
}

/* Whether a session may run at time t (each call far enough apart that the
 * fences are asked every time). */
static int admit_at(share *sh, double limit, double *t, int *demoted)
{
	*t += 1000.0;
	return share_admit(&fake, NULL, sh, limit, *t, demoted);
}

Test(share, estimates_are_the_slower_of_bytes_and_flops_and_at_least_a_launch)
{
	op_cost mem = { 1e3, 1e6 }, math = { 1e9, 1e3 }, tiny = { 1.0, 4.0 };
	cr_assert_float_eq(share_estimate_us(&fake, &mem), 1000.0, 1e-9);
	cr_assert_float_eq(share_estimate_us(&fake, &math), 10000.0, 1e-9);
	cr_assert_float_eq(share_estimate_us(&fake, &tiny), SHARE_LAUNCH_US, 1e-9);
	backend unknown = { .ops = &fake_ops };
	cr_assert_float_eq(share_estimate_us(&unknown, &mem), SHARE_LAUNCH_US, 1e-9);
}

Test(share, with_the_limit_off_nothing_is_kept_or_held)
{
	reset();
	share sh = { 0 };
	double t = 0.0;
	int demoted = 0;
	for (int i = 0; i < 100; i++) {
		share_charge(&fake, NULL, &sh, 0.0, 1e6);
		cr_assert(admit_at(&sh, 0.0, &t, &demoted));
	}
	cr_assert_eq(made, 0);
	cr_assert_eq(lowered, 0);
	cr_assert_float_eq(sh.queued_us, 0.0, 1e-9);
}

Test(share, a_session_at_its_limit_is_held_and_lowered_until_its_work_finishes)
{
	reset();
	const double limit = 2000.0;
	share sh = { 0 };
	double t = 0.0;
	int demoted = 0;

	/* 100 us ops: a fence every 500 us, admitted until 2000 us queued. */
	int ran = 0;
	while (admit_at(&sh, limit, &t, &demoted)) {
		share_charge(&fake, NULL, &sh, limit, 100.0);
		ran++;
		cr_assert_leq(ran, 20, "never held");
	}
	cr_assert_eq(ran, 20);
	cr_assert_eq(made, 4, "%d fences for 2000 us in quarters", made);
	cr_assert_eq(demoted, 1);
	cr_assert_eq(lowered, 1);

	/* Held again while nothing passes; lowered only once. */
	demoted = 0;
	cr_assert_not(admit_at(&sh, limit, &t, &demoted));
	cr_assert_eq(demoted, 0);
	cr_assert_eq(lowered, 1);

	/* The first quarter finishes: room for 500 us more. */
	passed[0] = 1;
	cr_assert(admit_at(&sh, limit, &t, &demoted));
	cr_assert_float_eq(sh.queued_us, 1500.0, 1e-6);
	cr_assert_eq(freed, 1);
	cr_assert_eq(raised, 0, "raised with three quarters still queued");

	/* Everything finishes: the session gets its priority back before its
	 * next (short) op. */
	for (int i = 0; i < made; i++)
		passed[i] = 1;
	cr_assert(admit_at(&sh, limit, &t, &demoted));
	cr_assert_float_eq(sh.queued_us, 0.0, 1e-6);
	cr_assert_eq(freed, made);
	cr_assert_eq(share_launch(&fake, NULL, &sh, limit, 100.0), 0);
	cr_assert_eq(raised, 1);
	cr_assert_not(sh.low);
}

/* Admit, then the launch of one op of `us`, charged; returns what
 * share_launch did (1: lowered). */
static int launch_op(share *sh, double limit, double *t, double us)
{
	int demoted = 0;
	cr_assert(admit_at(sh, limit, t, &demoted), "held");
	int lowered_now = share_launch(&fake, NULL, sh, limit, us);
	share_charge(&fake, NULL, sh, limit, us);
	return lowered_now;
}

Test(share, an_op_longer_than_the_limit_lowers_its_session_before_it_is_launched)
{
	reset();
	share sh = { 0 };
	/* Nothing queued: the hold would not lower it before this op ran. */
	cr_assert_eq(share_launch(&fake, NULL, &sh, 2000.0, 5000.0), 1);
	cr_assert_eq(lowered, 1, "the stream was not lowered before the launch");
	cr_assert_eq(made, 0);
	cr_assert_float_eq(sh.queued_us, 0.0, 1e-9);
	cr_assert(sh.low);
}

Test(share, ops_of_a_quarter_of_the_limit_are_long_shorter_ones_are_not)
{
	reset();
	const double limit = 2000.0;
	share sh = { 0 }, other = { 0 };
	double t = 0.0;
	/* A 1 ms op beside a 2 ms limit (the H200's 1 ms adds): lowered at once. */
	cr_assert_eq(launch_op(&sh, limit, &t, 1000.0), 1);
	cr_assert_eq(lowered, 1);
	reset();
	cr_assert_eq(launch_op(&sh, limit, &t, limit * SHARE_LONG), 0, "lowered twice");
	cr_assert_eq(lowered, 0);
	/* Just under a quarter, from a fresh session: never lowered by the op. */
	for (int i = 0; i < 2; i++)
		cr_assert_eq(launch_op(&other, limit, &t, limit * SHARE_LONG - 1.0), 0);
	cr_assert_eq(lowered, 0);
	cr_assert_not(other.low);
}

Test(share, a_session_of_long_ops_stays_low_across_its_drains)
{
	reset();
	const double limit = 2000.0;
	share sh = { 0 };
	double t = 0.0;
	for (int round = 0; round < 3; round++) {
		/* Two 900 us ops (each fenced: more than a quarter), then its
		 * client syncs and everything finishes. */
		launch_op(&sh, limit, &t, 900.0);
		launch_op(&sh, limit, &t, 900.0);
		for (int i = 0; i < made; i++)
			passed[i] = 1;
		int demoted = 0;
		cr_assert(admit_at(&sh, limit, &t, &demoted));
		cr_assert_float_eq(sh.queued_us, 0.0, 1e-6);
		cr_assert_eq(raised, 0, "raised as its queue drained (round %d)", round);
		cr_assert(sh.low);
	}
	cr_assert_eq(lowered, 1);
}

Test(share, a_lowered_session_is_raised_before_a_short_op_only_once_drained)
{
	reset();
	const double limit = 2000.0;
	share sh = { 0 };
	double t = 0.0;
	cr_assert_eq(launch_op(&sh, limit, &t, 1000.0), 1);
	/* The long op is still queued: a short op behind it stays low. */
	launch_op(&sh, limit, &t, 10.0);
	cr_assert_eq(raised, 0);
	passed[0] = 1;
	launch_op(&sh, limit, &t, 10.0);
	cr_assert_eq(raised, 1);
	cr_assert_not(sh.low);
}

Test(share, launches_change_nothing_with_the_limit_off_or_without_priorities)
{
	reset();
	share sh = { 0 };
	cr_assert_eq(share_launch(&fake, NULL, &sh, 0.0, 1e6), 0);
	static const backend_ops no_prio = {
		.fence_create = fake_fence_create,
		.fence_query = fake_fence_query,
		.fence_free = fake_fence_free,
	};
	backend flat = { .ops = &no_prio, .bytes_per_us = 1000.0 };
	cr_assert_eq(share_launch(&flat, NULL, &sh, 2000.0, 1e6), 0);
	cr_assert_eq(lowered, 0);
	cr_assert_not(sh.low);
}

Test(share, a_held_session_fences_what_it_queued_since_the_last_fence)
{
	reset();
	const double limit = 1000.0;
	share sh = { 0 };
	double t = 0.0;
	int demoted = 0;
	/* One op of 1200 us: fenced at once (more than a quarter). */
	share_charge(&fake, NULL, &sh, limit, 1200.0);
	cr_assert_eq(made, 1);
	/* 100 us more, unfenced, then held: the hold fences it too. */
	share_charge(&fake, NULL, &sh, limit, 100.0);
	cr_assert_eq(made, 1);
	cr_assert_not(admit_at(&sh, limit, &t, &demoted));
	cr_assert_eq(made, 2);
	passed[0] = 1;
	cr_assert(admit_at(&sh, limit, &t, &demoted));
	cr_assert_float_eq(sh.queued_us, 100.0, 1e-6);
}

Test(share, at_most_the_pool_of_fences_is_outstanding)
{
	reset();
	const double limit = 1e9;
	share sh = { 0 };
	for (int i = 0; i < 4 * SHARE_FENCES; i++)
		share_charge(&fake, NULL, &sh, limit, limit / 4);
	cr_assert_eq(made, SHARE_FENCES);
	cr_assert_eq(sh.n, SHARE_FENCES);
	cr_assert_float_eq(sh.queued_us, limit * SHARE_FENCES, 1.0);
	share_release(&fake, &sh);
	cr_assert_eq(freed, made);
	cr_assert_eq(sh.n, 0);
	cr_assert_float_eq(sh.queued_us, 0.0, 1e-9);
}

Test(share, fences_are_asked_at_most_every_few_microseconds_while_held)
{
	reset();
	const double limit = 1000.0;
	share sh = { 0 };
	int demoted = 0;
	share_charge(&fake, NULL, &sh, limit, 1000.0);
	cr_assert_not(share_admit(&fake, NULL, &sh, limit, 10.0, &demoted));
	passed[0] = 1;
	/* 1 us later the fence is not asked again; some microseconds later it is. */
	cr_assert_not(share_admit(&fake, NULL, &sh, limit, 11.0, &demoted));
	cr_assert(share_admit(&fake, NULL, &sh, limit, 20.0, &demoted));
}
