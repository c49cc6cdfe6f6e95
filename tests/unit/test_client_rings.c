/*
 * test_client_rings.c - libtileops submitting ops through the shared-memory
 * rings of its arena, against the in-process stand-in (fake_daemon.c) that
 * serves them the way tileopsd promises: order, many threads, wrap-around,
 * a full ring, completions out of order, ring_mark on nng requests, waking
 * and sleeping, and a daemon side that misbehaves.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_daemon.h"
#include "tileops.h"

static void rings_start(void)
{
	fake_start();
	fake.serve_rings = 1;
}

TestSuite(rings, .init = rings_start, .fini = fake_stop);

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static tileops_ring_header *hdr(void)
{
	return (tileops_ring_header *)fake.arena;
}

/* An op whose params ("t", "i") let the fake check per-thread order. */
struct seq_op {
	tileops_param params[2];
	tileops_op op;
};

static void seq_op_init(struct seq_op *s, const char *name, int t, int64_t i)
{
	s->params[0] = tileops_param_int("t", t);
	s->params[1] = tileops_param_int("i", i);
	s->op = (tileops_op){ name, NULL, 0, NULL, 0, s->params, 2 };
}

static tileops_status submit_seq(tileops_client *c, int t, int64_t i, tileops_completion **cp)
{
	struct seq_op s;

	seq_op_init(&s, "add", t, i);
	return tileops_op_submit(c, &s.op, cp);
}

/* Submit n ordered ops keeping `window` completions pending at most. */
static void submit_many(tileops_client *c, int t, int n, int window)
{
	tileops_completion **win = calloc((size_t)window, sizeof(*win));
	int i;

	cr_assert_not_null(win);
	for (i = 0; i < n; i++) {
		tileops_completion **slot = &win[i % window];

		if (*slot != NULL) {
			cr_assert_eq(tileops_completion_wait(*slot, -1), TILEOPS_OK, "%s",
			             tileops_last_error());
			tileops_completion_free(*slot);
		}
		cr_assert_eq(submit_seq(c, t, i, slot), TILEOPS_OK, "op %d: %s", i,
		             tileops_last_error());
	}
	for (i = 0; i < window; i++) {
		if (win[i] != NULL)
			cr_assert_eq(tileops_completion_wait(win[i], -1), TILEOPS_OK);
		tileops_completion_free(win[i]);
	}
	free(win);
}

Test(rings, connect_offers_a_valid_ring_layout_and_ops_then_skip_nng)
{
	tileops_client *c = fake_connect(1 << 16, 0);
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };

	cr_assert(fake.hello_rings);
	cr_assert(fake.ring_running, "the fake refused the client's ring layout");
	cr_assert_eq(hdr()->sq_entries, 256, "default ring size");
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(fake.ring_ops, 1);
	cr_assert_eq(fake.ring_syncs, 1);
	cr_assert_eq(fake_count(), 3); /* Hello, then the two ring entries */
	cr_assert_eq(fake.log[1].plane, FAKE_RING);
	cr_assert_str_eq(fake.log[1].op, "add");
	cr_assert_eq(fake.log[2].plane, FAKE_RING);
	tileops_close(c);
}

Test(rings, ops_reach_the_daemon_in_program_order)
{
	tileops_client *c = fake_connect(0, 0);

	submit_many(c, 0, 2000, 64);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.ring_ops, 2000);
	cr_assert_eq(fake.order_errors, 0);
	cr_assert_eq(fake.last_i[0], 1999);
	tileops_close(c);
}

Test(rings, thousands_of_ops_wrap_around_an_eight_entry_ring)
{
	tileops_client *c;
	struct seq_op s;

	setenv("TILEOPS_RING_ENTRIES", "8", 1);
	c = fake_connect(0, 0);
	cr_assert_eq(hdr()->sq_entries, 8);
	submit_many(c, 0, 5000, 40);
	for (int i = 5000; i < 6000; i++) {
		seq_op_init(&s, "add", 0, i);
		cr_assert_eq(tileops_op_run(c, &s.op), TILEOPS_OK);
	}
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.ring_ops, 6000);
	cr_assert_eq(fake.order_errors, 0);
	cr_assert_leq(fake.max_unreaped, 8, "the client let %llu entries go unreaped",
	              (unsigned long long)fake.max_unreaped);
	tileops_close(c);
}

struct submitter {
	tileops_client *c;
	int t, n;
	int submitted; /* atomic */
	tileops_completion *cps[64];
};

static void *submitter_main(void *arg)
{
	struct submitter *s = arg;

	for (int i = 0; i < s->n; i++) {
		if (submit_seq(s->c, s->t, i, &s->cps[i]) != TILEOPS_OK)
			return "submit failed";
		__atomic_store_n(&s->submitted, i + 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

Test(rings, a_full_ring_makes_the_submitter_wait_and_drops_nothing)
{
	struct submitter s = { .t = 0, .n = 20 };
	pthread_t th;
	void *res;

	setenv("TILEOPS_RING_ENTRIES", "8", 1);
	s.c = fake_connect(0, 0);
	fake.ring_hold = 1;
	pthread_create(&th, NULL, submitter_main, &s);
	usleep(200 * 1000);
	cr_assert_eq(__atomic_load_n(&s.submitted, __ATOMIC_SEQ_CST), 8,
	             "with the daemon stalled, 8 entries fit and the ninth waits");
	cr_assert_eq(hdr()->sq_tail, 8);
	__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
	pthread_join(th, &res);
	cr_assert_null(res);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(tileops_completion_wait(s.cps[i], -1), TILEOPS_OK);
		tileops_completion_free(s.cps[i]);
	}
	cr_assert_eq(fake.ring_ops, 20);
	cr_assert_eq(fake.order_errors, 0);
	tileops_close(s.c);
}

static void *many_main(void *arg)
{
	struct submitter *s = arg;
	struct seq_op op;

	/* Half asynchronous in a window, half synchronous. */
	submit_many(s->c, s->t, s->n, 16);
	for (int i = s->n; i < s->n + 200; i++) {
		seq_op_init(&op, "add", s->t, i);
		if (tileops_op_run(s->c, &op.op) != TILEOPS_OK)
			return "op_run failed";
	}
	return NULL;
}

Test(rings, many_threads_share_one_ring_and_each_keeps_its_order)
{
	struct submitter s[8];
	pthread_t th[8];
	tileops_client *c;
	void *res;

	setenv("TILEOPS_RING_ENTRIES", "16", 1);
	c = fake_connect(0, 0);
	for (int t = 0; t < 8; t++) {
		s[t] = (struct submitter){ .c = c, .t = t, .n = 800 };
		pthread_create(&th[t], NULL, many_main, &s[t]);
	}
	for (int t = 0; t < 8; t++) {
		pthread_join(th[t], &res);
		cr_assert_null(res, "thread %d: %s", t, (const char *)res);
	}
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.ring_ops, 8 * 1000);
	cr_assert_eq(fake.order_errors, 0);
	for (int t = 0; t < 8; t++)
		cr_assert_eq(fake.last_i[t], 999);
	tileops_close(c);
}

Test(rings, timed_completions_out_of_order_each_reach_their_own_op)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_completion *cp[12], *plain = NULL;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };
	double us = -1;

	fake.ring_reverse_timed = 1;
	fake.ring_gpu_us = 12.5;
	for (int i = 0; i < 12; i++)
		cr_assert_eq(tileops_op_submit_timed(c, &op, &cp[i]), TILEOPS_OK);
	cr_assert_eq(tileops_op_submit(c, &op, &plain), TILEOPS_OK);
	for (int i = 11; i >= 0; i--) {
		cr_assert_eq(tileops_completion_wait(cp[i], -1), TILEOPS_OK, "%s",
		             tileops_last_error());
		us = -1;
		cr_assert_eq(tileops_completion_gpu_us(cp[i], &us), TILEOPS_OK, "%s",
		             tileops_last_error());
		cr_assert_float_eq(us, 12.5, 1e-9);
		tileops_completion_free(cp[i]);
	}
	cr_assert_eq(tileops_completion_wait(plain, -1), TILEOPS_OK);
	cr_assert_eq(tileops_completion_gpu_us(plain, &us), TILEOPS_ERR_UNSUPPORTED);
	cr_assert_not_null(strstr(tileops_last_error(), "tileops_op_submit_timed"), "%s",
	                   tileops_last_error());
	tileops_completion_free(plain);
	cr_assert_eq(fake.timed_seen, 12);
	tileops_close(c);
}

Test(rings, gpu_time_of_a_pending_op_is_in_progress)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_completion *cp = NULL;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };
	double us = -1;

	fake.ring_hold = 1;
	cr_assert_eq(tileops_op_submit_timed(c, &op, &cp), TILEOPS_OK);
	cr_assert_eq(tileops_completion_gpu_us(cp, &us), TILEOPS_IN_PROGRESS);
	cr_assert_eq(us, -1);
	cr_assert_eq(tileops_completion_gpu_us(cp, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
	tileops_completion_free(cp);
	tileops_close(c);
}

Test(rings, a_daemon_error_on_a_ring_op_comes_back_with_its_message)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_tensor in[2] = { 7, 7 }, out = 7;
	tileops_op op = { "rms_norm", in, 2, &out, 1, NULL, 0 };
	tileops_completion *cp = NULL;

	fake.op_status = TILEOPS_ERR_SHAPE;
	fake.op_message = "rms_norm: weight has shape [4095], expected [4096]";
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_SHAPE);
	cr_assert_str_eq(tileops_last_error(), fake.op_message);
	cr_assert_eq(tileops_op_submit(c, &op, &cp), TILEOPS_OK);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_ERR_SHAPE);
	cr_assert_str_eq(tileops_last_error(), fake.op_message);
	tileops_completion_free(cp);
	cr_assert_eq(fake.ring_ops, 2);
	tileops_close(c);
}

Test(rings, nng_requests_carry_ring_mark_and_run_after_earlier_ring_ops)
{
	tileops_client *c = fake_connect(4096, 0);
	tileops_completion *cp[6];
	unsigned char buf[16];
	int i;

	for (i = 0; i < 5; i++)
		cr_assert_eq(submit_seq(c, 0, i, &cp[i]), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_read(c, 7, 0, buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_eq(submit_seq(c, 0, 5, &cp[5]), TILEOPS_OK);
	/* Hello, five ring ops, the read, the sixth op. */
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.log[6].plane, FAKE_NNG);
	cr_assert_eq(fake.log[6].body, TILEOPS__REQUEST__BODY_TENSOR_READ);
	cr_assert_eq(fake.log[6].ring_mark, 5);
	cr_assert_geq(fake.log[6].ring_consumed, 5);
	cr_assert_eq(fake.log[6].seq, 1, "ring entries take no seq");
	cr_assert_eq(fake.log[6].arena_offset, hdr()->data_offset,
	             "tensor bytes stay out of the rings");
	for (i = 1; i <= 5; i++)
		cr_assert_eq(fake.log[i].plane, FAKE_RING);
	cr_assert_eq(fake.log[7].plane, FAKE_RING);
	for (i = 0; i < 6; i++)
		tileops_completion_free(cp[i]);
	tileops_close(c);
	fake_wait_for(10);
	cr_assert_eq(fake.log[9].body, TILEOPS__REQUEST__BODY_GOODBYE);
	cr_assert_eq(fake.log[9].ring_mark, 7, "Goodbye comes after every ring entry");
}

Test(rings, an_op_too_large_for_an_entry_goes_over_nng_in_order)
{
	tileops_client *c = fake_connect(0, 0);
	char name[1500];
	tileops_op big = { name, NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *cp = NULL;

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	cr_assert_eq(submit_seq(c, 0, 0, &cp), TILEOPS_OK);
	cr_assert_eq(tileops_op_run(c, &big), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK);
	tileops_completion_free(cp);
	cr_assert_eq(fake.log[1].plane, FAKE_RING);
	cr_assert_eq(fake.log[2].plane, FAKE_NNG);
	cr_assert_eq(fake.log[2].body, TILEOPS__REQUEST__BODY_OP_RUN);
	cr_assert_eq(fake.log[2].ring_mark, 1);
	tileops_close(c);
}

Test(rings, an_op_after_an_unanswered_nng_request_follows_it_over_nng)
{
	tileops_client *c = fake_connect(0, 0);
	char name[1500];
	tileops_op big = { name, NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *first = NULL, *second = NULL;

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	fake.op_delay_ms = 300;
	cr_assert_eq(tileops_op_submit(c, &big, &first), TILEOPS_OK);
	cr_assert_eq(submit_seq(c, 0, 0, &second), TILEOPS_OK);
	cr_assert_eq(tileops_completion_poll(first), TILEOPS_IN_PROGRESS,
	             "the fake answered too early for this test to mean anything");
	cr_assert_eq(tileops_completion_wait(first, -1), TILEOPS_OK);
	cr_assert_eq(tileops_completion_wait(second, -1), TILEOPS_OK);
	cr_assert_eq(fake.log[2].plane, FAKE_NNG, "the ring entry could overtake the request");
	cr_assert_eq(fake.ring_ops, 0);
	tileops_completion_free(first);
	tileops_completion_free(second);
	tileops_close(c);
}

Test(rings, a_completion_with_an_unknown_tag_is_ignored)
{
	tileops_client *c = fake_connect(0, 300);
	tileops_op bogus = { "bogus", NULL, 0, NULL, 0, NULL, 0 };
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };

	fake.ring_bogus_op = "bogus";
	cr_assert_eq(tileops_op_run(c, &bogus), TILEOPS_ERR_TIMEOUT);
	cr_assert_not_null(strstr(tileops_last_error(), "300 ms"), "%s", tileops_last_error());
	cr_assert_eq(tileops_op_run(c, &add), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(fake.ring_ops, 2);
	tileops_close(c);
}

Test(rings, cq_tail_beyond_the_submissions_fails_waiters_with_protocol)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_op jump = { "jump", NULL, 0, NULL, 0, NULL, 0 };
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *a = NULL, *b = NULL;

	fake.ring_jump_op = "jump";
	fake.ring_hold = 1;
	cr_assert_eq(tileops_op_submit(c, &jump, &a), TILEOPS_OK);
	cr_assert_eq(tileops_op_submit(c, &add, &b), TILEOPS_OK);
	__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
	cr_assert_eq(tileops_completion_wait(b, 5000), TILEOPS_ERR_PROTOCOL);
	cr_assert_not_null(strstr(tileops_last_error(), "cq_tail"), "%s", tileops_last_error());
	tileops_completion_free(a);
	tileops_completion_free(b);
	/* The session still works, over nng. */
	cr_assert_eq(tileops_op_run(c, &add), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(fake.log[fake_count() - 1].plane, FAKE_NNG);
	tileops_close(c);
}

Test(rings, a_sleeping_daemon_is_woken_by_a_submission)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	int64_t t0 = now_ms();

	while (!__atomic_load_n(&hdr()->daemon_sleeping, __ATOMIC_SEQ_CST) && now_ms() - t0 < 3000)
		usleep(1000);
	usleep(20 * 1000); /* let it reach the futex */
	cr_assert(hdr()->daemon_sleeping, "the fake never went to sleep");
	t0 = now_ms();
	cr_assert_eq(tileops_op_run(c, &add), TILEOPS_OK);
	cr_assert_lt(now_ms() - t0, 2500, "op_run took %lld ms: the daemon was not woken",
	             (long long)(now_ms() - t0));
	cr_assert_geq(fake.daemon_wakes, 1);
	tileops_close(c);
}

struct waiter {
	tileops_completion *cp;
	tileops_status st;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->st = tileops_completion_wait(w->cp, -1);
	return NULL;
}

Test(rings, a_waiter_sleeps_on_the_bell_and_is_woken_by_the_completion)
{
	tileops_client *c;
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	struct waiter w[3];
	pthread_t th[3];
	int64_t t0;

	setenv("TILEOPS_SPIN_US", "0", 1);
	c = fake_connect(0, 0);
	fake.ring_hold = 1;
	for (int i = 0; i < 3; i++) {
		w[i].st = TILEOPS_IN_PROGRESS;
		cr_assert_eq(tileops_op_submit(c, &add, &w[i].cp), TILEOPS_OK);
		pthread_create(&th[i], NULL, waiter_main, &w[i]);
	}
	t0 = now_ms();
	while (__atomic_load_n(&hdr()->client_waiting, __ATOMIC_SEQ_CST) < 3 &&
	       now_ms() - t0 < 3000)
		usleep(1000);
	cr_assert_eq(hdr()->client_waiting, 3, "the waiters did not go to sleep");
	__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(w[i].st, TILEOPS_OK);
		tileops_completion_free(w[i].cp);
	}
	cr_assert_eq(hdr()->client_waiting, 0);
	tileops_close(c);
}

Test(rings, poll_of_a_pending_ring_op_returns_at_once)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *cp = NULL;
	int64_t t0;

	fake.ring_hold = 1;
	cr_assert_eq(tileops_op_submit(c, &add, &cp), TILEOPS_OK);
	t0 = now_ms();
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(tileops_completion_poll(cp), TILEOPS_IN_PROGRESS);
	cr_assert_lt(now_ms() - t0, 500);
	cr_assert_eq(tileops_completion_wait(cp, 30), TILEOPS_IN_PROGRESS);
	__atomic_store_n(&fake.ring_hold, 0, __ATOMIC_SEQ_CST);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK);
	cr_assert_eq(tileops_completion_poll(cp), TILEOPS_OK,
	             "a second wait gives the same status");
	tileops_completion_free(cp);
	tileops_close(c);
}

Test(rings, close_fails_pending_ring_ops_with_closed)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *cp = NULL;

	/* The stalled fake answers Goodbye without consuming the entry. */
	fake.ring_hold = 1;
	cr_assert_eq(tileops_op_submit(c, &add, &cp), TILEOPS_OK);
	tileops_close(c);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_ERR_CLOSED);
	cr_assert_str_eq(tileops_last_error(), "the client was closed (tileops_close)");
	tileops_completion_free(cp);
}

Test(rings, close_keeps_the_status_of_ring_ops_the_daemon_finished)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *cp = NULL;

	fake.op_status = TILEOPS_ERR_DTYPE;
	fake.op_message = "add: b is i32, expected f32";
	cr_assert_eq(tileops_op_submit(c, &add, &cp), TILEOPS_OK);
	tileops_close(c); /* Goodbye comes after the entry: it was consumed */
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_ERR_DTYPE);
	cr_assert_str_eq(tileops_last_error(), fake.op_message);
	tileops_completion_free(cp);
}

Test(rings, tileops_rings_0_sends_everything_over_nng)
{
	tileops_client *c;
	tileops_op add = { "add", NULL, 0, NULL, 0, NULL, 0 };
	unsigned char buf[8];

	setenv("TILEOPS_RINGS", "0", 1);
	c = fake_connect(4096, 0);
	cr_assert_not(fake.hello_rings);
	cr_assert_eq(fake.arena_bytes, 4096, "no ring region without rings");
	cr_assert_eq(tileops_op_run(c, &add), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_read(c, 7, 0, buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_eq(fake.log[1].plane, FAKE_NNG);
	cr_assert_eq(fake.log[2].arena_offset, 0);
	cr_assert_eq(fake.ring_ops, 0);
	tileops_close(c);
}

Test(rings, a_bad_ring_size_in_the_environment_fails_connect_naming_it)
{
	tileops_connect_options o;
	tileops_client *c = NULL;

	memset(&o, 0, sizeof(o));
	o.address = fake.address;
	setenv("TILEOPS_RING_ENTRIES", "100", 1);
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_null(c);
	cr_assert_not_null(strstr(tileops_last_error(), "TILEOPS_RING_ENTRIES"), "%s",
	                   tileops_last_error());
	setenv("TILEOPS_RING_ENTRIES", "8192", 1);
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_INVALID_ARGUMENT);
	setenv("TILEOPS_RING_ENTRIES", "8", 1);
	setenv("TILEOPS_RINGS", "yes", 1);
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "TILEOPS_RINGS"));
	cr_assert_eq(fake_count(), 0, "nothing reached the daemon");
}
