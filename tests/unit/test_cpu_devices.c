/*
 * test_cpu_devices.c - the CPU backend's emulated devices
 * (daemon/backends/backend_cpu.c, cpu_pool.c): each device named at open,
 * stream_wait holding one stream's work until another's has run without
 * taking a device thread meanwhile, and copies between devices in stream
 * order.
 *
 * The kernels are the test's own: tag 0 blocks its device thread until
 * released, any other tag records itself. No executor thread is
 * registered, so the pool has a thread per CPU and a stream that does not
 * wait runs beside the blocked one.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "backend.h"

static int started, released, order[16], n_order;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;

static tk_status record(const tk_call *call)
{
	intptr_t tag = (intptr_t)call->workspace;
	if (tag == 0) {
		__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&released, __ATOMIC_ACQUIRE))
			sched_yield();
		return TK_OK;
	}
	pthread_mutex_lock(&order_mu);
	if (n_order < 16)
		order[n_order++] = (int)tag;
	pthread_mutex_unlock(&order_mu);
	return TK_OK;
}

static const tk_kernel_entry rec = { .op = "record", .cpu = record };

static backend *be;

static void setup(void)
{
	char err[256];
	backend_options opt = { .devices = { 4, 6 }, .n_devices = 2 };
	be = backend_cpu_open(&opt, err, sizeof(err));
	cr_assert(be, "%s", err);
	started = released = n_order = 0;
}

static void teardown(void)
{
	be->ops->destroy(be);
}

TestSuite(cpu_devices, .init = setup, .fini = teardown, .timeout = 30);

static void *stream_on(int device)
{
	char err[256];
	void *s = NULL;
	cr_assert_eq(be->ops->stream_create(be, device, &s, err, sizeof(err)), TILEOPS_OK, "%s",
	             err);
	return s;
}

static void launch(void *stream, intptr_t tag)
{
	char err[256];
	tk_call call;
	memset(&call, 0, sizeof(call));
	call.workspace = (void *)tag;
	cr_assert_eq(be->ops->launch(be, stream, &rec, &call, 0, -1, NULL, err, sizeof(err)),
	             TILEOPS_OK, "%s", err);
}

static void sync_ok(void *stream)
{
	char err[256];
	cr_assert_eq(be->ops->sync(be, stream, err, sizeof(err)), TILEOPS_OK, "%s", err);
}

static int recorded(void)
{
	pthread_mutex_lock(&order_mu);
	int n = n_order;
	pthread_mutex_unlock(&order_mu);
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	nanosleep(&ts, NULL);
}

Test(cpu_devices, each_device_is_named_with_its_ordinal)
{
	cr_assert_eq(be->n_devices, 2);
	cr_assert_eq(be->devices[0].ordinal, 4);
	cr_assert_eq(be->devices[1].ordinal, 6);
	cr_assert_not_null(strstr(be->devices[1].name, "emulated device 6"), "%s",
	                   be->devices[1].name);
}

Test(cpu_devices, a_stream_waits_for_the_work_another_had_queued)
{
	void *a = stream_on(0), *b = stream_on(1), *c = stream_on(1);
	char err[256];
	launch(a, 0); /* blocks until released */
	launch(a, 1);
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		sched_yield();
	cr_assert_eq(be->ops->stream_wait(be, b, a, err, sizeof(err)), TILEOPS_OK, "%s", err);
	launch(b, 2);
	/* Queued after the wait on a, so not covered by it. */
	launch(a, 3);
	/* A stream that waits for nothing runs beside the blocked one, when
	 * the pool has a second thread. */
	launch(c, 4);
	sync_ok(c);
	sleep_ms(50);
	int n = recorded();
	cr_assert(n == 1 || (n == 0 && backend_usable_cpus() == 1),
	          "%d kernels ran while stream a was blocked (order %d ...)", n, order[0]);
	if (n == 1)
		cr_assert_eq(order[0], 4, "kernel %d ran while a was blocked", order[0]);
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	sync_ok(b);
	sync_ok(a);
	/* b's kernel came after a's first two; a's third may come either side. */
	int pos1 = -1, pos2 = -1;
	for (int i = 0; i < n_order; i++) {
		if (order[i] == 1)
			pos1 = i;
		if (order[i] == 2)
			pos2 = i;
	}
	cr_assert_eq(n_order, 4, "%d kernels ran, expected 4", n_order);
	cr_assert(pos1 >= 0 && pos2 > pos1, "b's kernel ran at %d, a's second at %d", pos2, pos1);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
	be->ops->stream_destroy(be, c);
}

Test(cpu_devices, a_wait_on_an_idle_stream_costs_nothing)
{
	void *a = stream_on(0), *b = stream_on(1);
	char err[256];
	cr_assert_eq(be->ops->stream_wait(be, b, a, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->stream_wait(be, b, b, err, sizeof(err)), TILEOPS_OK, "%s", err);
	launch(b, 7);
	sync_ok(b);
	cr_assert_eq(n_order, 1);
	cr_assert_eq(order[0], 7);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
}

Test(cpu_devices, a_copy_between_devices_runs_in_stream_order)
{
	void *a = stream_on(0), *b = stream_on(1);
	char err[256];
	void *src = NULL, *dst = NULL;
	cr_assert_eq(be->ops->alloc(be, 0, 64, &src, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->alloc(be, 1, 64, &dst, err, sizeof(err)), TILEOPS_OK, "%s", err);
	memset(src, 0x5a, 64);
	launch(b, 0); /* the copy waits behind it on b */
	while (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		sched_yield();
	cr_assert_eq(be->ops->copy(be, b, dst, src, 64, err, sizeof(err)), TILEOPS_OK, "%s", err);
	sleep_ms(20);
	cr_assert_eq(((unsigned char *)dst)[0], 0, "the copy ran before the work queued before it");
	__atomic_store_n(&released, 1, __ATOMIC_RELEASE);
	sync_ok(b);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(((unsigned char *)dst)[i], 0x5a, "byte %d was not copied", i);
	be->ops->free(be, a, src);
	be->ops->free(be, b, dst);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
}
