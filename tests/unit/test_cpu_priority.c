/*
 * test_cpu_priority.c - the CPU backend's stream priorities
 * (daemon/backends/backend_cpu.c): with one device thread busy, the work of
 * a normal-priority stream runs before a low-priority stream's queued
 * earlier, each stream's work in its order, and work keeps the priority
 * its stream had when it was queued.
 *
 * The process is pinned to one CPU before the backend opens, so its pool
 * has one device thread and the order in which it takes work is the order
 * the kernels run. The kernels are the test's own: one blocks the device
 * thread until released, the others record their tags.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

static int started, released, order[16], n_order;

/* Tag 0 blocks until released; any other tag is recorded. Only the one
 * device thread writes order[]; the test reads it after syncs. */
static tk_status record(const tk_call *call)
{
	intptr_t tag = (intptr_t)call->workspace;
	if (tag == 0) {
		__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
			sched_yield();
		return TK_OK;
	}
	if (n_order < 16)
		order[n_order++] = (int)tag;
	return TK_OK;
}

static const tk_kernel_entry rec = { .op = "record", .cpu = record };

static backend *be;
static void *blocker, *a, *b;

static void setup(void)
{
	char err[256];
	cpu_set_t one;
	CPU_ZERO(&one);
	cpu_set_t mine;
	cr_assert_eq(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &mine)) {
			CPU_SET(c, &one);
			break;
		}
	cr_assert_eq(sched_setaffinity(0, sizeof(one), &one), 0);
	be = backend_cpu_open(NULL, err, sizeof(err));
	cr_assert(be, "%s", err);
	cr_assert_not_null(be->ops->stream_priority);
	cr_assert_eq(be->ops->thread_init(be, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->stream_create(be, 0, &blocker, err, sizeof(err)), TILEOPS_OK);
	cr_assert_eq(be->ops->stream_create(be, 0, &a, err, sizeof(err)), TILEOPS_OK);
	cr_assert_eq(be->ops->stream_create(be, 0, &b, err, sizeof(err)), TILEOPS_OK);
	started = released = n_order = 0;
}

static void teardown(void)
{
	be->ops->stream_destroy(be, blocker);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
	be->ops->thread_fini(be);
	be->ops->destroy(be);
}

TestSuite(cpu_priority, .init = setup, .fini = teardown, .timeout = 30);

static void launch(void *stream, intptr_t tag)
{
	char err[256];
	tk_call call;
	memset(&call, 0, sizeof(call));
	call.workspace = (void *)tag;
	cr_assert_eq(be->ops->launch(be, stream, &rec, &call, 0, -1, NULL, err, sizeof(err)),
	             TILEOPS_OK, "%s", err);
}

/* Occupy the one device thread until release(). */
static void block(void)
{
	launch(blocker, 0);
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void release_and_sync(void)
{
	char err[256];
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	cr_assert_eq(be->ops->sync(be, a, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->sync(be, b, err, sizeof(err)), TILEOPS_OK, "%s", err);
}

static void expect(const int *want, int n)
{
	cr_assert_eq(n_order, n, "%d kernels ran, expected %d", n_order, n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(order[i], want[i], "kernel %d was %d, expected %d (order %d %d %d %d)",
		             i, order[i], want[i], order[0], order[1], order[2], order[3]);
}

Test(cpu_priority, normal_priority_work_runs_before_low_priority_work_queued_earlier)
{
	block();
	be->ops->stream_priority(be, a, 1);
	launch(a, 1);
	launch(a, 2);
	launch(b, 3);
	launch(b, 4);
	release_and_sync();
	/* Without priorities the streams take turns: 1 3 2 4. */
	expect((const int[]){ 3, 4, 1, 2 }, 4);
}

Test(cpu_priority, work_keeps_the_priority_its_stream_had_when_it_was_queued)
{
	block();
	launch(a, 1); /* normal */
	be->ops->stream_priority(be, a, 1);
	launch(a, 2); /* low */
	launch(b, 3);
	release_and_sync();
	expect((const int[]){ 1, 3, 2 }, 3);
}

Test(cpu_priority, a_raised_stream_is_back_among_the_normal_ones)
{
	be->ops->stream_priority(be, a, 1);
	be->ops->stream_priority(be, a, 0);
	block();
	launch(a, 1);
	launch(b, 2);
	launch(a, 3);
	release_and_sync();
	/* Both normal: they take turns, each in its order. */
	expect((const int[]){ 1, 2, 3 }, 3);
}
