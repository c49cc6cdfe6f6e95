/*
 * test_share.c - a session's share of the device (daemon/exec/share.c)
 * against a backend whose fences pass when the test says: charges below
 * session_queue_us run, the session is held at the limit with its work
 * fenced and its stream lowered once, and runs again (and gets its
 * priority back) as its fences pass; the fence pool's bound; estimates.
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

	/* Everything finishes: the session gets its priority back. */
	for (int i = 0; i < made; i++)
		passed[i] = 1;
	cr_assert(admit_at(&sh, limit, &t, &demoted));
	cr_assert_float_eq(sh.queued_us, 0.0, 1e-6);
	cr_assert_eq(raised, 1);
	cr_assert_eq(freed, made);
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
