/*
 * test_rings.c - ops through the shared-memory rings against a real
 * tileopsd: program order, many threads, wrap-around, a full ring, sixteen
 * client processes, a hostile client writing corrupt entries and counters,
 * a client killed mid-submit, an idle daemon that does not spin, and the
 * binary op and plan-run descriptors (and corrupt ones).
 *
 * Order is checked with chains of adds where each op reads the previous
 * op's output (ping-pong between two tensors): any reordering or dropped
 * op changes the final value.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "tileops_ring.h"
#include "integration/daemon2.h"
#include "integration/helpers.h"

#define CHAIN_LEN 8 /* elements per tensor */

/* ---- ordered chains ------------------------------------------------------ */

struct chain {
	tileops_client *c;
	tileops_tensor a, b, one;
};

static tileops_status chain_try_init(struct chain *ch, tileops_client *c)
{
	const int64_t shape[] = { CHAIN_LEN };
	float zeros[CHAIN_LEN] = { 0 }, ones[CHAIN_LEN];
	tileops_status st;

	for (int i = 0; i < CHAIN_LEN; i++)
		ones[i] = 1.0f;
	ch->c = c;
	if ((st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->a)) ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->b)) ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->one)) ||
	    (st = tileops_tensor_write(c, ch->a, 0, zeros, sizeof(zeros))) ||
	    (st = tileops_tensor_write(c, ch->one, 0, ones, sizeof(ones))))
		return st;
	return TILEOPS_OK;
}

/*
 * Submit `n` chained increments (b = a + 1, a = b + 1, ...) without waiting,
 * keeping at most `window` completions (0: keep them all until the end).
 * Returns the first failure, or OK.
 */
static tileops_status chain_run(struct chain *ch, int n, int window, int sync_every)
{
	int keep = window > 0 ? window : n;
	tileops_completion **cps = calloc((size_t)keep, sizeof(*cps));
	tileops_status st = TILEOPS_OK, w;
	int i;

	if (cps == NULL)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	for (i = 0; i < n && st == TILEOPS_OK; i++) {
		tileops_tensor in[2] = { i % 2 ? ch->b : ch->a, ch->one };
		tileops_tensor out = i % 2 ? ch->a : ch->b;
		tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };
		tileops_completion **slot = &cps[i % keep];

		if (*slot != NULL) {
			st = tileops_completion_wait(*slot, -1);
			tileops_completion_free(*slot);
			*slot = NULL;
			if (st != TILEOPS_OK)
				break;
		}
		st = tileops_op_submit(ch->c, &op, slot);
		if (st == TILEOPS_OK && sync_every > 0 && i % sync_every == sync_every - 1)
			st = tileops_sync(ch->c);
	}
	for (i = 0; i < keep; i++) {
		if (cps[i] == NULL)
			continue;
		w = tileops_completion_wait(cps[i], -1);
		if (st == TILEOPS_OK)
			st = w;
		tileops_completion_free(cps[i]);
	}
	free(cps);
	return st;
}

/* The chain's value after n increments: read right after submitting, so
 * ring_mark alone must order the read after the ops. */
static tileops_status chain_value(struct chain *ch, int n, float *out)
{
	float v[CHAIN_LEN];
	tileops_status st = tileops_tensor_read(ch->c, n % 2 ? ch->b : ch->a, 0, v, sizeof(v));

	if (st == TILEOPS_OK) {
		*out = v[0];
		for (int i = 1; i < CHAIN_LEN; i++)
			if (v[i] != v[0])
				*out = -1;
	}
	return st;
}

static void expect_chain(tileops_client *c, int n, int window, int sync_every)
{
	struct chain ch;
	tileops_status st;
	float v = 0;

	cr_assert_eq(chain_try_init(&ch, c), TILEOPS_OK, "chain set-up: %s", tileops_last_error());
	st = chain_run(&ch, n, window, sync_every);
	cr_assert_eq(st, TILEOPS_OK, "chain of %d adds: %s (%s)", n, tileops_strerror(st),
	             tileops_last_error());
	cr_assert_eq(chain_value(&ch, n, &v), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(v, (float)n,
	             "after %d chained adds the value is %g: ops ran out of order "
	             "or were lost",
	             n, (double)v);
}

/* A fresh client still runs a chain correctly: the daemon serves. */
static void expect_daemon_serving(void)
{
	tileops_client *c = th_connect("check", 0);

	expect_chain(c, 50, 8, 0);
	tileops_close(c);
}

Test(rings, chained_adds_see_each_other_in_program_order)
{
	tileops_client *c = th_connect("rings-order", 0);

	expect_chain(c, 1000, 0, 0);
	/* Synchronous ops and syncs mixed in. */
	expect_chain(c, 200, 1, 17);
	tileops_close(c);
}

Test(rings, thousands_of_ops_wrap_around_an_eight_entry_ring)
{
	tileops_client *c;

	setenv("TILEOPS_RING_ENTRIES", "8", 1);
	c = th_connect("rings-wrap", 0);
	expect_chain(c, 5000, 16, 0);
	expect_chain(c, 1000, 1, 100);
	tileops_close(c);
}

Test(rings, a_full_ring_blocks_the_submitter_and_drops_nothing)
{
	tileops_client *c;

	/* 3000 completions held at once on an 8-entry ring: the submitter
	 * must wait for space again and again. */
	setenv("TILEOPS_RING_ENTRIES", "8", 1);
	c = th_connect("rings-full", 0);
	expect_chain(c, 3000, 0, 0);
	tileops_close(c);
}

Test(rings, timed_ops_report_their_device_time)
{
	tileops_client *c = th_connect("rings-timed", 0);
	struct chain ch;
	tileops_completion *cp = NULL;
	double us = -1;

	cr_assert_eq(chain_try_init(&ch, c), TILEOPS_OK);
	tileops_tensor in[2] = { ch.a, ch.one };
	tileops_op op = { "add", in, 2, &ch.b, 1, NULL, 0 };

	cr_assert_eq(tileops_op_submit_timed(c, &op, &cp), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_completion_gpu_us(cp, &us), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert(us >= 0 && us < 1e7, "device time %g us", us);
	tileops_completion_free(cp);
	tileops_close(c);
}

struct thread_work {
	tileops_client *c;
	int n;
	tileops_status st;
	float value;
	char msg[256];
};

static void *thread_main(void *arg)
{
	struct thread_work *w = arg;
	struct chain ch;

	w->st = chain_try_init(&ch, w->c);
	if (w->st == TILEOPS_OK)
		w->st = chain_run(&ch, w->n, 8, 0);
	if (w->st == TILEOPS_OK)
		w->st = chain_value(&ch, w->n, &w->value);
	if (w->st != TILEOPS_OK)
		snprintf(w->msg, sizeof(w->msg), "%s", tileops_last_error());
	return NULL;
}

Test(rings, many_threads_share_one_client_and_each_chain_stays_in_order)
{
	tileops_client *c;
	struct thread_work w[8];
	pthread_t th[8];

	setenv("TILEOPS_RING_ENTRIES", "16", 1);
	c = th_connect("rings-threads", 0);
	for (int i = 0; i < 8; i++) {
		w[i] = (struct thread_work){ .c = c, .n = 400 };
		pthread_create(&th[i], NULL, thread_main, &w[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(w[i].st, TILEOPS_OK, "thread %d: %s (%s)", i,
		             tileops_strerror(w[i].st), w[i].msg);
		cr_assert_eq(w[i].value, 400.0f, "thread %d's chain ends at %g", i,
		             (double)w[i].value);
	}
	tileops_close(c);
}

/* ---- client processes ---------------------------------------------------- */

static int chain_child(int n)
{
	tileops_client *c = NULL;
	struct chain ch;
	float v = 0;

	if (th_try_connect("rings-child", 0, &c) != TILEOPS_OK || chain_try_init(&ch, c) ||
	    chain_run(&ch, n, 32, 0) || chain_value(&ch, n, &v)) {
		fprintf(stderr, "ring client: %s\n", tileops_last_error());
		return 1;
	}
	if (v != (float)n) {
		fprintf(stderr, "ring client: chain of %d ends at %g\n", n, (double)v);
		return 1;
	}
	tileops_close(c);
	return 0;
}

/* Submits forever, telling the parent once it is going. */
static int doomed_child(int ready_fd)
{
	tileops_client *c = NULL;
	struct chain ch;
	char one = 1;

	if (th_try_connect("rings-doomed", 0, &c) != TILEOPS_OK || chain_try_init(&ch, c))
		return 2;
	if (chain_run(&ch, 100, 32, 0) != TILEOPS_OK || write(ready_fd, &one, 1) != 1)
		return 3;
	for (;;)
		if (chain_run(&ch, 1000, 64, 0) != TILEOPS_OK)
			return 4;
}

static int child_main(const char *role, int arg, int fd)
{
	if (strcmp(role, "chain") == 0)
		return chain_child(arg);
	if (strcmp(role, "doomed") == 0)
		return doomed_child(fd);
	return 100;
}

TH_CHILD_MAIN(child_main)

/* Wait for n spawned client processes; each must exit 0 within limit_ms. */
static void wait_clients(const pid_t *pids, int n, int64_t limit_ms)
{
	int64_t deadline = th_now_ms() + limit_ms;
	int left = n;

	while (left > 0) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);

		if (p > 0) {
			left--;
			cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			          "client process %d failed (status 0x%x; its message is above)",
			          (int)p, status);
			continue;
		}
		if (th_now_ms() > deadline) {
			for (int i = 0; i < n; i++)
				kill(pids[i], SIGKILL);
			cr_assert_fail("%d client processes did not finish within %lld ms", left,
			               (long long)limit_ms);
		}
		th_sleep_ms(20);
	}
}

Test(rings, sixteen_client_processes_at_once_all_keep_their_order)
{
	pid_t pids[16];

	for (int i = 0; i < 16; i++)
		pids[i] = th_spawn("chain", 500, -1);
	wait_clients(pids, 16, 120000);
}

Test(rings, a_client_killed_mid_submit_is_reaped_and_others_carry_on)
{
	double sessions = th_stat("sessions");
	int fds[2];
	char b;
	pid_t pid;
	int status;
	double got;

	cr_assert_eq(pipe(fds), 0);
	pid = th_spawn("doomed", 0, fds[1]);
	close(fds[1]);
	cr_assert_eq(read(fds[0], &b, 1), 1, "the submitting child never got going");
	close(fds[0]);
	th_sleep_ms(50);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status), "the child ended before it was killed (0x%x)", status);
	got = th_stat_wait("sessions", sessions, 10000);
	cr_assert_eq(got, sessions,
	             "the killed client's session was not reaped: sessions %g, "
	             "expected %g",
	             got, sessions);
	expect_daemon_serving();
}

/* ---- an idle daemon ------------------------------------------------------ */

static pid_t daemon_pid(void)
{
	const char *dir = getenv("TILEOPS_TEST_RUNDIR");
	char path[PATH_MAX];
	FILE *f;
	long pid = 0;

	cr_assert(dir != NULL, "TILEOPS_TEST_RUNDIR is not set: run this test through ctest");
	snprintf(path, sizeof(path), "%s/tileopsd.pid", dir);
	f = fopen(path, "r");
	cr_assert(f != NULL, "cannot open %s: %s", path, strerror(errno));
	cr_assert_eq(fscanf(f, "%ld", &pid), 1, "%s holds no pid", path);
	fclose(f);
	return (pid_t)pid;
}

Test(rings, an_idle_daemon_with_an_open_ring_session_does_not_spin)
{
	tileops_client *c = th_connect("rings-idle", 0);
	pid_t pid = daemon_pid();
	double before, used;

	expect_chain(c, 100, 8, 0);
	th_sleep_ms(300); /* past any spin budget */
	before = th_cpu_seconds(pid);
	th_sleep_ms(2000);
	used = th_cpu_seconds(pid) - before;
	cr_assert_lt(used, 0.2,
	             "tileopsd used %.2f s of CPU in 2 s idle with a ring session "
	             "open: it spins",
	             used);
	/* And it wakes up for the next op. */
	expect_chain(c, 10, 1, 0);
	tileops_close(c);
}

/* ---- a hostile client ---------------------------------------------------- */

#define HOSTILE_ENTRIES 8u

struct hostile {
	th_raw raw;
	tileops_ring_header *h;
	tileops_sqe *sq;
	tileops_cqe *cq;
	uint64_t sq_tail, cq_head, next_tag;
	uint64_t handle;
};

static size_t page_round(size_t n)
{
	size_t p = (size_t)sysconf(_SC_PAGESIZE);

	return (n + p - 1) / p * p;
}

/* A raw session with rings: its own arena, its own header, raw Hello. */
static void hostile_open(struct hostile *x)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello hello = TILEOPS__HELLO__INIT;
	Tileops__Reply *rep;
	size_t ring = page_round(TILEOPS_RING_HEADER_BYTES +
	                         HOSTILE_ENTRIES * (TILEOPS_SQE_BYTES + TILEOPS_CQE_BYTES));
	size_t bytes = ring + (1 << 16);
	const int64_t shape[] = { 4 };
	int fd;

	memset(x, 0, sizeof(*x));
	th_raw_open(&x->raw);
	snprintf(x->raw.shm_name, sizeof(x->raw.shm_name), "/tileops-test-hostile-%d",
	         (int)getpid());
	shm_unlink(x->raw.shm_name);
	fd = shm_open(x->raw.shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
	cr_assert(fd >= 0, "shm_open: %s", strerror(errno));
	cr_assert_eq(ftruncate(fd, (off_t)bytes), 0);
	x->raw.arena = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	cr_assert(x->raw.arena != MAP_FAILED);
	x->raw.arena_bytes = bytes;
	x->h = x->raw.arena;
	x->h->magic = TILEOPS_RING_MAGIC;
	x->h->version = TILEOPS_RING_VERSION;
	x->h->sq_entries = x->h->cq_entries = HOSTILE_ENTRIES;
	x->h->sq_offset = TILEOPS_RING_HEADER_BYTES;
	x->h->cq_offset = x->h->sq_offset + HOSTILE_ENTRIES * TILEOPS_SQE_BYTES;
	x->h->data_offset = ring;
	x->sq = (tileops_sqe *)((char *)x->raw.arena + x->h->sq_offset);
	x->cq = (tileops_cqe *)((char *)x->raw.arena + x->h->cq_offset);

	hello.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	hello.client_name = "hostile";
	hello.arena_name = x->raw.shm_name;
	hello.arena_bytes = bytes;
	hello.client_pid = (int32_t)getpid();
	hello.rings = 1;
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &hello;
	rep = th_raw_call(&x->raw, &req);
	cr_assert(rep != NULL, "no reply to the hostile Hello");
	cr_assert_eq((int)rep->status, 0, "hostile Hello refused: %s", rep->message);
	cr_assert(rep->hello != NULL && rep->hello->rings, "tileopsd does not serve rings");
	tileops__reply__free_unpacked(rep, NULL);
	rep = th_raw_create(&x->raw, TILEOPS__DTYPE__DTYPE_F32, 1, shape);
	cr_assert(rep != NULL && rep->status == 0 && rep->tensor_create != NULL);
	x->handle = rep->tensor_create->handle;
	tileops__reply__free_unpacked(rep, NULL);
	x->next_tag = 1;
}

static void hostile_bell(struct hostile *x)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&x->h->daemon_sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_add(&x->h->sq_bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &x->h->sq_bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
}

/* Publish one entry as written by `fill`; returns its tag. */
static uint64_t hostile_push(struct hostile *x, uint32_t kind, uint32_t length, const void *payload,
                             size_t n)
{
	tileops_sqe *e = &x->sq[x->sq_tail % HOSTILE_ENTRIES];

	memset(e, 0, sizeof(*e));
	e->tag = x->next_tag++;
	e->kind = kind;
	e->length = length;
	memcpy(e->payload, payload, n < sizeof(e->payload) ? n : sizeof(e->payload));
	x->sq_tail++;
	__atomic_store_n(&x->h->sq_tail, x->sq_tail, __ATOMIC_RELEASE);
	hostile_bell(x);
	return e->tag;
}

/*
 * The daemon's answer to the entry `tag`: 1 with *e filled if a completion
 * came, 0 if none came within a few seconds.
 */
static int hostile_completion(struct hostile *x, uint64_t tag, tileops_cqe *e)
{
	int64_t deadline = th_now_ms() + 5000;

	while (th_now_ms() < deadline) {
		uint64_t tail = __atomic_load_n(&x->h->cq_tail, __ATOMIC_ACQUIRE);

		while (x->cq_head < tail && x->cq_head + HOSTILE_ENTRIES >= tail) {
			memcpy(e, &x->cq[x->cq_head % HOSTILE_ENTRIES], sizeof(*e));
			x->cq_head++;
			__atomic_store_n(&x->h->cq_head, x->cq_head, __ATOMIC_RELEASE);
			if (e->tag == tag)
				return 1;
		}
		th_sleep_ms(1);
	}
	return 0;
}

/* A corrupt entry gets an error completion, or the session is failed. */
static void expect_refused(struct hostile *x, uint64_t tag, const char *what)
{
	tileops_cqe e;

	if (hostile_completion(x, tag, &e)) {
		e.message[sizeof(e.message) - 1] = '\0';
		cr_assert_neq(e.status, 0, "%s was accepted", what);
		cr_assert_neq(e.message[0], '\0', "%s: the error completion has no message", what);
	}
	/* No completion: the daemon gave up on the session, which is allowed. */
}

static uint8_t *pack_op(uint64_t in0, uint64_t in1, uint64_t out, size_t *len)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__OpRun op = TILEOPS__OP_RUN__INIT;
	uint64_t ins[2] = { in0, in1 };
	uint8_t *buf;

	op.op = "add";
	op.n_inputs = 2;
	op.inputs = ins;
	op.n_outputs = 1;
	op.outputs = &out;
	req.body_case = TILEOPS__REQUEST__BODY_OP_RUN;
	req.op_run = &op;
	*len = tileops__request__get_packed_size(&req);
	buf = malloc(*len);
	cr_assert_not_null(buf);
	tileops__request__pack(&req, buf);
	return buf;
}

Test(rings, corrupt_entries_get_errors_and_hurt_only_their_own_session)
{
	struct hostile x;
	th_rng rng = th_rng_seed(7);
	uint8_t garbage[900];
	size_t len;
	uint8_t *good = NULL, *huge;
	tileops_cqe e;

	hostile_open(&x);
	/* A well-formed entry works: the set-up is right. */
	good = pack_op(x.handle, x.handle, x.handle, &len);
	cr_assert(hostile_completion(
	                  &x, hostile_push(&x, TILEOPS_SQE_REQUEST, (uint32_t)len, good, len), &e),
	          "no completion for a good entry");
	cr_assert_eq(e.status, 0, "a good entry failed: %s", e.message);

	expect_refused(&x, hostile_push(&x, TILEOPS_SQE_REQUEST, 100000, good, len),
	               "an entry whose length is past its payload");
	th_fill_bytes(&rng, garbage, sizeof(garbage));
	expect_refused(
	        &x,
	        hostile_push(&x, TILEOPS_SQE_REQUEST, sizeof(garbage), garbage, sizeof(garbage)),
	        "an entry of random bytes");
	expect_refused(&x, hostile_push(&x, 77, (uint32_t)len, good, len), "an entry of kind 77");
	huge = pack_op(UINT64_MAX, 1ull << 62, UINT64_MAX - 1, &len);
	if (hostile_completion(&x, hostile_push(&x, TILEOPS_SQE_REQUEST, (uint32_t)len, huge, len),
	                       &e))
		cr_assert_eq(e.status, TILEOPS_ERR_UNKNOWN_HANDLE, "huge handles: status %d (%s)",
		             e.status, e.message);
	free(huge);
	expect_daemon_serving();

	/* Counters: sq_tail far ahead of what was written, then backwards. */
	__atomic_store_n(&x.h->sq_tail, x.sq_tail + 1000000, __ATOMIC_RELEASE);
	hostile_bell(&x);
	th_sleep_ms(200);
	expect_daemon_serving();
	__atomic_store_n(&x.h->sq_tail, 1, __ATOMIC_RELEASE);
	hostile_bell(&x);
	th_sleep_ms(200);
	expect_daemon_serving();
	/* Its own completion counter scribbled too. */
	__atomic_store_n(&x.h->cq_head, UINT64_MAX - 3, __ATOMIC_RELEASE);
	__atomic_store_n(&x.h->sq_tail, UINT64_MAX, __ATOMIC_RELEASE);
	hostile_bell(&x);
	th_sleep_ms(200);
	expect_daemon_serving();
	free(good);
	th_raw_close(&x.raw);
	expect_daemon_serving();
}

/* Fill x's whole ring (and more) with valid ops and never read a completion. */
static void hostile_stall(struct hostile *x)
{
	size_t len;
	uint8_t *good = pack_op(x->handle, x->handle, x->handle, &len);

	for (unsigned i = 0; i < 4 * HOSTILE_ENTRIES; i++) {
		tileops_sqe *e = &x->sq[x->sq_tail % HOSTILE_ENTRIES];

		memset(e, 0, sizeof(*e));
		e->tag = i + 1;
		e->kind = TILEOPS_SQE_REQUEST;
		e->length = (uint32_t)len;
		memcpy(e->payload, good, len);
		x->sq_tail++;
	}
	__atomic_store_n(&x->h->sq_tail, x->sq_tail, __ATOMIC_RELEASE);
	hostile_bell(x);
	free(good);
}

Test(rings, a_stuck_client_that_never_reaps_does_not_block_others)
{
	struct hostile x;

	hostile_open(&x);
	hostile_stall(&x);
	expect_daemon_serving();
	th_raw_close(&x.raw);
}

/* Not on the test's stack: the fini stops it if the test failed first. */
static daemon2 paced;

/* A per-thread stat of the executor ("ring_ops", ...), summed over n threads. */
static double threads_stat(int n, const char *field)
{
	double sum = 0;

	for (int i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof(path), "executor.%d.%s", i, field);
		sum += th_stat(path);
	}
	return sum;
}

/*
 * Four executor threads that may lead each other by only two launches wait
 * on each other all the time: every client still finishes with its chain in
 * order, and a client that filled its ring and never reaps (work its thread
 * cannot take) holds no other thread back.
 */
Test(rings, tightly_paced_executor_threads_serve_every_client_past_a_stuck_one,
     .fini = daemon2_kill_running)
{
	struct hostile x;
	pid_t pids[16];

	daemon2_start(&paced, "executor_threads = 4\nexecutor_pace = 2\n");
	daemon2_use(&paced);
	hostile_open(&x);
	hostile_stall(&x);
	/* Chains long enough that the four threads are busy together for a
	 * while, whatever the machine's core count. */
	for (int i = 0; i < 16; i++)
		pids[i] = th_spawn("chain", 3000, -1);
	wait_clients(pids, 16, 120000);
	/* The stats count every chain op on some thread's ring, and with four
	 * threads serving sixteen clients some thread got more than two
	 * launches ahead of another and waited. */
	double ran = threads_stat(4, "ring_ops"), waits = threads_stat(4, "pace_waits");
	cr_expect_geq(ran, 16 * 3000, "the threads' ring_ops add up to %g of 48000 chain ops", ran);
	cr_expect_gt(waits, 0, "no thread ever waited for one behind it (executor_pace = 2)");
	th_raw_close(&x.raw);
	daemon2_stop(&paced);
}

static daemon2 spread;

static double thread_sessions(int i)
{
	char path[64];

	snprintf(path, sizeof(path), "executor.%d.sessions", i);
	return th_stat(path);
}

/*
 * A new session goes to the executor thread with the fewest sessions: after
 * two of four sessions on four threads close, the next two fill exactly the
 * two threads left empty, whatever their ids.
 */
Test(rings, new_sessions_go_to_the_executor_threads_with_the_fewest, .fini = daemon2_kill_running)
{
	tileops_client *c[6];

	daemon2_start(&spread, "executor_threads = 4\n");
	daemon2_use(&spread);
	for (int i = 0; i < 4; i++)
		c[i] = th_connect("spread", 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(thread_sessions(i), 1, "thread %d serves %g sessions, expected 1", i,
		             thread_sessions(i));
	tileops_close(c[0]);
	tileops_close(c[2]);
	th_stat_wait("sessions", 2, 10000);
	c[4] = th_connect("spread", 0);
	c[5] = th_connect("spread", 0);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(thread_sessions(i), 1,
		             "after two closed and two opened, thread %d serves %g sessions", i,
		             thread_sessions(i));
	tileops_close(c[1]);
	tileops_close(c[3]);
	tileops_close(c[4]);
	tileops_close(c[5]);
	daemon2_stop(&spread);
}

/* ---- op and plan-run descriptors ----------------------------------------- */

/*
 * The submission ring of this process's client, through the client's own
 * mapping of its arena (its shm name is unlinked once tileopsd opened it).
 */
static const tileops_ring_header *client_ring_header(void)
{
	char want[64], line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	const tileops_ring_header *h = NULL;

	cr_assert_not_null(f, "/proc/self/maps: %s", strerror(errno));
	snprintf(want, sizeof(want), "/dev/shm/tileops-%ld-", (long)getpid());
	while (h == NULL && fgets(line, sizeof(line), f) != NULL) {
		unsigned long start, end;

		if (strstr(line, want) == NULL || sscanf(line, "%lx-%lx", &start, &end) != 2)
			continue;
		if (((const tileops_ring_header *)start)->magic == TILEOPS_RING_MAGIC)
			h = (const tileops_ring_header *)start;
	}
	fclose(f);
	cr_assert_not_null(h, "no ring arena of this client is mapped (%s...)", want);
	return h;
}

static const tileops_sqe *client_sqe(const tileops_ring_header *h, uint64_t n)
{
	const tileops_sqe *sq = (const tileops_sqe *)((const char *)h + h->sq_offset);

	cr_assert_lt(n, __atomic_load_n(&h->sq_tail, __ATOMIC_ACQUIRE),
	             "ring entry %llu was never submitted", (unsigned long long)n);
	return &sq[n & (h->sq_entries - 1)];
}

static void expect_all_f32(tileops_client *c, tileops_tensor t, float want, const char *what)
{
	float v[4];

	th_read(c, t, v, sizeof(v));
	for (int i = 0; i < 4; i++)
		cr_assert_float_eq(v[i], want, 1e-5f, "%s: element %d is %g, expected %g", what, i,
		                   (double)v[i], (double)want);
}

Test(rings, op_and_plan_runs_travel_as_binary_descriptors_with_right_results)
{
	tileops_client *c = th_connect("descriptors", 0);
	const tileops_ring_header *h = client_ring_header();
	const int64_t shape[] = { 4 };
	const float ones[4] = { 1, 1, 1, 1 }, twos[4] = { 2, 2, 2, 2 };
	tileops_tensor x = th_tensor_f32(c, 1, shape, ones), w = th_tensor_f32(c, 1, shape, ones);
	tileops_tensor y = th_tensor_f32(c, 1, shape, twos),
	               out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_param eps = { .name = "eps", .kind = TILEOPS_PARAM_FLOAT, .v.f = 1.0 };
	tileops_tensor in[2] = { x, w };
	tileops_op norm = { "rms_norm", in, 2, &out, 1, &eps, 1 };
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_binding bind = { x, y };
	tileops_completion *cp = NULL;
	tileops_plan *p = NULL;
	double us = -1;
	uint64_t n = __atomic_load_n(&h->sq_tail, __ATOMIC_ACQUIRE);

	/* A float param crosses intact: eps 1 gives 1 / sqrt(1 + 1). */
	th_run(c, &norm);
	cr_assert_eq(client_sqe(h, n)->kind, TILEOPS_SQE_OP, "op_run went as kind %u",
	             client_sqe(h, n)->kind);
	expect_all_f32(c, out, 0.70710678f, "rms_norm with eps 1 through a descriptor");
	n++;

	cr_assert_eq(tileops_op_submit_timed(c, &add, &cp), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_completion_gpu_us(cp, &us), TILEOPS_OK, "%s", tileops_last_error());
	tileops_completion_free(cp);
	cr_assert_eq(client_sqe(h, n)->kind, TILEOPS_SQE_OP, "a timed op went as kind %u",
	             client_sqe(h, n)->kind);
	cr_assert(client_sqe(h, n)->flags & TILEOPS_SQE_F_TIMING, "the timed op lost its flag");
	expect_all_f32(c, out, 2.0f, "timed add through a descriptor");
	n++;

	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_add(p, &add), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_end(p), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_run(p, 0, &bind, 1), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(client_sqe(h, n)->kind, TILEOPS_SQE_PLAN_RUN, "plan_run went as kind %u",
	             client_sqe(h, n)->kind);
	expect_all_f32(c, out, 3.0f, "plan run with x bound to y through a descriptor");
	n++;

	/* Syncs keep the packed Request. */
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(client_sqe(h, n)->kind, TILEOPS_SQE_REQUEST, "sync went as kind %u",
	             client_sqe(h, n)->kind);
	tileops_plan_free(p);
	tileops_close(c);
}

/*
 * The same descriptor again launches what it prepared to the first time
 * (daemon/opcache.h), but never past a change: once a tensor it names is
 * freed, the same bytes are refused naming the handle, and a param that
 * differs is a different op.
 */
Test(rings, a_repeated_descriptor_runs_the_same_op_until_a_tensor_it_names_is_freed)
{
	tileops_client *c = th_connect("repeat", 0);
	const int64_t shape[] = { 4 };
	const float ones[4] = { 1, 1, 1, 1 };
	tileops_tensor x = th_tensor_f32(c, 1, shape, ones), y = th_tensor_f32(c, 1, shape, ones);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_tensor in[2] = { x, y }, chain[2] = { out, y };
	tileops_param eps1 = { .name = "eps", .kind = TILEOPS_PARAM_FLOAT, .v.f = 1.0 };
	tileops_param eps_half = { .name = "eps", .kind = TILEOPS_PARAM_FLOAT, .v.f = 0.5 };
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_op acc = { "add", chain, 2, &out, 1, NULL, 0 };
	tileops_op norm1 = { "rms_norm", in, 2, &out, 1, &eps1, 1 };
	tileops_op norm_half = { "rms_norm", in, 2, &out, 1, &eps_half, 1 };

	double reused = th_stat("executor.0.reused_ops");
	th_run(c, &add);
	expect_all_f32(c, out, 2.0f, "x + y");
	/* out += y, a hundred times through the same descriptor. */
	for (int i = 0; i < 100; i++)
		th_run(c, &acc);
	expect_all_f32(c, out, 102.0f, "100 repeats of out += y");
	/* The test daemon has one executor thread on the CPU backend. */
	if (strcmp(th_expected_backend(), "cpu") == 0)
		cr_expect_geq(th_stat("executor.0.reused_ops") - reused, 99,
		              "the repeats were checked again (%g reused)",
		              th_stat("executor.0.reused_ops") - reused);
	th_run(c, &norm1);
	expect_all_f32(c, out, 0.70710678f, "rms_norm with eps 1");
	th_run(c, &norm_half);
	expect_all_f32(c, out, 0.81649658f, "rms_norm with eps 0.5 after eps 1");
	th_run(c, &norm1);
	expect_all_f32(c, out, 0.70710678f, "rms_norm with eps 1 again");
	cr_assert_eq(tileops_tensor_free(c, y), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_op_run(c, &acc), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "an op naming a freed tensor ran again: %s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "not a tensor of this session"),
	          "the refusal does not name the handle: %s", tileops_last_error());
	tileops_close(c);
}

Test(rings, an_op_name_too_long_for_a_descriptor_goes_as_a_packed_request)
{
	tileops_client *c = th_connect("long-name", 0);
	const tileops_ring_header *h = client_ring_header();
	const int64_t shape[] = { 4 };
	tileops_tensor t = th_tensor(c, TILEOPS_F32, 1, shape);
	char name[TILEOPS_SQE_OP_NAME_BYTES + 8];
	tileops_op op = { name, &t, 1, &t, 1, NULL, 0 };
	uint64_t n = __atomic_load_n(&h->sq_tail, __ATOMIC_ACQUIRE);

	memset(name, 'q', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_UNKNOWN_OP, "a made-up op ran: %s",
	             tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq"),
	          "the error does not name the op: %s", tileops_last_error());
	cr_assert_eq(client_sqe(h, n)->kind, TILEOPS_SQE_REQUEST, "went as kind %u",
	             client_sqe(h, n)->kind);
	tileops_close(c);
}

/* An op descriptor for add(t, t) -> t, with `n_params` params of kind `kind`. */
static size_t desc_add(uint8_t *buf, uint64_t t, uint32_t n_params, uint32_t kind)
{
	tileops_sqe_op head = { .n_inputs = 2, .n_outputs = 1, .n_params = n_params };
	uint64_t handles[3] = { t, t, t };
	size_t off = sizeof(head);

	snprintf(head.op, sizeof(head.op), "add");
	memcpy(buf, &head, sizeof(head));
	memcpy(buf + off, handles, sizeof(handles));
	off += sizeof(handles);
	for (uint32_t i = 0; i < n_params; i++) {
		tileops_sqe_param p = { .kind = kind, .value.i = 1 };

		snprintf(p.name, sizeof(p.name), "p%u", i);
		memcpy(buf + off, &p, sizeof(p));
		off += sizeof(p);
	}
	return off;
}

/* The entry must come back refused, with a message naming `field`. */
static void expect_refused_naming(struct hostile *x, uint64_t tag, const char *field)
{
	tileops_cqe e;

	cr_assert(hostile_completion(x, tag, &e), "no completion for a bad %s", field);
	e.message[sizeof(e.message) - 1] = '\0';
	cr_assert_eq(e.status, TILEOPS_ERR_PROTOCOL, "a bad %s: status %d (%s)", field, e.status,
	             e.message);
	cr_assert(th_contains(e.message, field), "the error does not name %s: %s", field,
	          e.message);
}

static void expect_good_descriptor(struct hostile *x)
{
	uint8_t buf[TILEOPS_SQE_BYTES];
	size_t len = desc_add(buf, x->handle, 0, 0);
	tileops_cqe e;

	cr_assert(
	        hostile_completion(x, hostile_push(x, TILEOPS_SQE_OP, (uint32_t)len, buf, len), &e),
	        "no completion for a good op descriptor");
	cr_assert_eq(e.status, 0, "a good op descriptor failed: %s", e.message);
}

Test(rings, corrupt_descriptors_are_refused_naming_the_field_and_the_session_goes_on)
{
	struct hostile x;
	uint8_t buf[TILEOPS_SQE_BYTES];
	tileops_sqe_op head;
	tileops_sqe_param param;
	tileops_sqe_plan_run plan = { .plan = 1, .n_bindings = TILEOPS_SQE_PLAN_MAX_BINDINGS + 1 };
	size_t len;

	hostile_open(&x);
	expect_good_descriptor(&x);

	len = desc_add(buf, x.handle, 0, 0);
	memcpy(&head, buf, sizeof(head));
	head.n_inputs = TILEOPS_SQE_OP_MAX_INPUTS + 1;
	memcpy(buf, &head, sizeof(head));
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, (uint32_t)len, buf, len),
	                      "n_inputs");
	expect_good_descriptor(&x);

	len = desc_add(buf, x.handle, 0, 0);
	memset(buf, 'a', TILEOPS_SQE_OP_NAME_BYTES);
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, (uint32_t)len, buf, len),
	                      "op name is not NUL-terminated");
	expect_good_descriptor(&x);

	len = desc_add(buf, x.handle, 2, 99);
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, (uint32_t)len, buf, len),
	                      "param 0 ('p0') kind is 99");
	expect_good_descriptor(&x);

	len = desc_add(buf, x.handle, 1, TILEOPS_SQE_PARAM_INT);
	memcpy(&param, buf + len - sizeof(param), sizeof(param));
	memset(param.name, 'n', sizeof(param.name));
	memcpy(buf + len - sizeof(param), &param, sizeof(param));
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, (uint32_t)len, buf, len),
	                      "param 0 name is not NUL-terminated");
	expect_good_descriptor(&x);

	len = desc_add(buf, x.handle, 1, TILEOPS_SQE_PARAM_INT);
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, (uint32_t)len - 8, buf, len),
	                      "length is");
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, 12, buf, len),
	                      "shorter than its 80-byte header");
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_OP, 100000, buf, len),
	                      "length is 100000 bytes");
	expect_good_descriptor(&x);

	expect_refused_naming(
	        &x, hostile_push(&x, TILEOPS_SQE_PLAN_RUN, sizeof(plan), &plan, sizeof(plan)),
	        "n_bindings is 62");
	expect_refused_naming(&x, hostile_push(&x, 77, (uint32_t)len, buf, len), "kind is 77");
	expect_good_descriptor(&x);
	expect_daemon_serving();
	th_raw_close(&x.raw);
	expect_daemon_serving();
}

Test(rings, a_packed_request_entry_is_still_accepted_beside_descriptors)
{
	struct hostile x;
	size_t len;
	uint8_t *packed;
	tileops_cqe e;

	hostile_open(&x);
	packed = pack_op(x.handle, x.handle, x.handle, &len);
	for (int i = 0; i < 3; i++) {
		cr_assert(hostile_completion(
		                  &x,
		                  hostile_push(&x, TILEOPS_SQE_REQUEST, (uint32_t)len, packed, len),
		                  &e),
		          "no completion for a packed Request");
		cr_assert_eq(e.status, 0, "a packed Request failed: %s", e.message);
		expect_good_descriptor(&x);
	}
	free(packed);
	th_raw_close(&x.raw);
}

static daemon2 pinned;

/* The CPUs tileopsd's thread `name` may run on, from /proc ("" if none). */
static void thread_cpus(pid_t pid, const char *name, char *cpus)
{
	char path[300], line[256];
	DIR *d;
	struct dirent *e;

	cpus[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	cr_assert((d = opendir(path)), "cannot list %s", path);
	while (!cpus[0] && (e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int match = fgets(line, sizeof(line), f) && strcspn(line, "\n") == strlen(name) &&
		            strncmp(line, name, strlen(name)) == 0;
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, e->d_name);
		if (!match || !(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "Cpus_allowed_list: %63s", cpus) == 1)
				break;
		fclose(f);
	}
	closedir(d);
}

/*
 * executor_cpus pins executor thread i to the i-th CPU listed (cycling), and
 * the stats say how long each thread spent on ring entries and, of that, in
 * launch calls.
 */
Test(rings, executor_cpus_pin_the_threads_and_the_stats_time_their_ops,
     .fini = daemon2_kill_running)
{
	char cpus[64];
	pid_t pids[4];

	daemon2_start(&pinned, "executor_threads = 2\nexecutor_cpus = 0\n");
	daemon2_use(&pinned);
	for (int i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "tileops-exec%d", i);
		thread_cpus(pinned.pid, name, cpus);
		cr_expect_str_eq(cpus, "0", "executor thread %d may run on CPUs '%s', expected '0'",
		                 i, cpus);
	}
	for (int i = 0; i < 4; i++)
		pids[i] = th_spawn("chain", 200, -1);
	wait_clients(pids, 4, 60000);
	double ops = threads_stat(2, "ring_ops"), op_us = threads_stat(2, "ring_op_us");
	double launch_us = threads_stat(2, "launch_us"), timed = threads_stat(2, "launches_timed");
	cr_expect_geq(ops, 4 * 200, "the threads ran %g ring entries, expected at least 800", ops);
	cr_expect_gt(op_us, 0, "no time was counted on ring entries");
	/* One launch in eight is timed, per thread (the warm-up ops count too). */
	cr_expect_geq(timed, ops / 8 - 2, "%g launches timed of %g ops", timed, ops);
	cr_expect_leq(timed, ops / 8 + 2, "%g launches timed of %g ops", timed, ops);
	cr_expect_gt(launch_us, 0, "no time was counted in launch calls");
	daemon2_stop(&pinned);
}

/* One entry with `flags`, published as hostile_push does; returns its tag. */
static uint64_t hostile_push_flags(struct hostile *x, uint32_t flags, const void *payload,
                                   size_t len)
{
	tileops_sqe *e = &x->sq[x->sq_tail % HOSTILE_ENTRIES];

	memset(e, 0, sizeof(*e));
	e->tag = x->next_tag++;
	e->kind = TILEOPS_SQE_REQUEST;
	e->flags = flags;
	e->length = (uint32_t)len;
	memcpy(e->payload, payload, len);
	x->sq_tail++;
	__atomic_store_n(&x->h->sq_tail, x->sq_tail, __ATOMIC_RELEASE);
	hostile_bell(x);
	return e->tag;
}

Test(rings, unknown_flags_are_refused_and_a_trace_comes_in_the_completion)
{
	struct hostile x;
	size_t len;
	uint8_t *good;
	tileops_cqe e;
	tileops_ring_trace t;

	hostile_open(&x);
	good = pack_op(x.handle, x.handle, x.handle, &len);
	cr_assert(hostile_completion(&x, hostile_push_flags(&x, 0x80, good, len), &e),
	          "no completion for an entry with an unknown flag");
	e.message[sizeof(e.message) - 1] = '\0';
	cr_assert_eq(e.status, TILEOPS_ERR_PROTOCOL, "flags 0x80: status %d (%s)", e.status,
	             e.message);
	cr_assert(strstr(e.message, "flags") != NULL, "the refusal does not name the flags: %s",
	          e.message);

	/* Without the trace flag a completion is as it always was. */
	cr_assert(hostile_completion(&x, hostile_push_flags(&x, 0, good, len), &e));
	cr_assert_eq(e.status, 0, "%s", e.message);
	cr_assert_eq(e.flags & TILEOPS_CQE_F_TRACE, 0u, "an untraced completion carries a trace");
	cr_assert_eq(e.message[0], '\0', "an untraced success has a message");

	cr_assert(
	        hostile_completion(&x, hostile_push_flags(&x, TILEOPS_SQE_F_TRACE, good, len), &e));
	cr_assert_eq(e.status, 0);
	cr_assert(e.flags & TILEOPS_CQE_F_TRACE, "a traced completion has no trace flag");
	memcpy(&t, e.message, sizeof(t));
	cr_assert(t.taken_ns > 0 && t.taken_ns <= t.launched_ns && t.launched_ns <= t.posted_ns,
	          "trace stamps out of order: %llu %llu %llu", (unsigned long long)t.taken_ns,
	          (unsigned long long)t.launched_ns, (unsigned long long)t.posted_ns);
	cr_assert_eq(t.reserved, 0u);
	free(good);
	th_raw_close(&x.raw);
	expect_daemon_serving();
}

/* ---- spin advice ------------------------------------------------------------ */

static daemon2 advising;

/*
 * The daemon writes spin_advice into each ring's header: 1 (sleep at once)
 * while the clients with rings, its executor threads and the backend's own
 * threads outnumber the CPUs it may run on, so that waiting clients do not
 * take the CPUs the daemon's threads need. The CPU backend's device threads
 * fill the CPUs the executor threads leave, so there one client is already
 * one too many; on a GPU host two executor threads and one client fit unless
 * the host has fewer than three CPUs.
 */
Test(rings, clients_are_told_to_sleep_rather_than_spin_while_the_cpus_are_taken,
     .fini = daemon2_kill_running)
{
	cpu_set_t set;
	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	int cpus = CPU_COUNT(&set);
	daemon2_start(&advising, "executor_threads = 2\n");
	daemon2_use(&advising);
	tileops_client *c = th_connect("advice", 0);
	const tileops_ring_header *h = client_ring_header();
	const int64_t shape[] = { 4 };
	const float ones[4] = { 1, 1, 1, 1 };
	tileops_tensor x = th_tensor_f32(c, 1, shape, ones), y = th_tensor_f32(c, 1, shape, ones);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_tensor in[] = { x, y };
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	th_run(c, &add);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	int work = strcmp(th_expected_backend(), "cpu") == 0 ? (cpus - 2 > 1 ? cpus - 2 : 1) : 0;
	uint32_t want = 1 + 2 + work > cpus ? 1u : 0u;
	uint32_t got = 0;
	for (int64_t until = th_now_ms() + 5000; th_now_ms() < until; th_sleep_ms(5)) {
		th_run(c, &add); /* a pass of its executor thread writes the advice */
		got = __atomic_load_n(&h->spin_advice, __ATOMIC_RELAXED);
		if (got == want)
			break;
	}
	cr_assert_eq(got, want, "spin_advice %u, expected %u (%d CPUs, the %s backend)", got, want,
	             cpus, th_expected_backend());
	expect_all_f32(c, out, 2.0f, "the adds");
	tileops_close(c);
	daemon2_stop(&advising);
}

/* ---- event descriptors ------------------------------------------------------- */

Test(rings, corrupt_event_descriptors_are_refused_naming_the_field_and_the_session_goes_on)
{
	struct hostile x;
	tileops_sqe_event d = { 0, 0 };
	tileops_cqe e;

	hostile_open(&x);
	d.event = 3;
	expect_refused_naming(&x, hostile_push(&x, TILEOPS_SQE_EVENT_WAIT, 8, &d, sizeof(d)),
	                      "event-wait descriptor: length is 8 bytes, expected 16");
	d.reserved = 1;
	expect_refused_naming(&x,
	                      hostile_push(&x, TILEOPS_SQE_EVENT_WAIT, sizeof(d), &d, sizeof(d)),
	                      "reserved is 1");
	d.reserved = 0;
	d.event = 0;
	expect_refused_naming(&x,
	                      hostile_push(&x, TILEOPS_SQE_EVENT_WAIT, sizeof(d), &d, sizeof(d)),
	                      "event is 0");
	d.event = 7;
	expect_refused_naming(&x,
	                      hostile_push(&x, TILEOPS_SQE_EVENT_RECORD, sizeof(d), &d, sizeof(d)),
	                      "event-record descriptor: event is 7, expected 0");
	expect_good_descriptor(&x);

	/* Well formed: the CPU backend refuses it as it does every event call;
	 * the CUDA one because the session registered no event 7 and exported
	 * none to record. */
	int cuda = strcmp(th_expected_backend(), "cuda") == 0;
	cr_assert(
	        hostile_completion(
	                &x, hostile_push(&x, TILEOPS_SQE_EVENT_WAIT, sizeof(d), &d, sizeof(d)), &e),
	        "no completion for an event wait");
	e.message[sizeof(e.message) - 1] = '\0';
	cr_assert_eq(e.status, cuda ? TILEOPS_ERR_UNKNOWN_HANDLE : TILEOPS_ERR_UNSUPPORTED,
	             "status %d (%s)", e.status, e.message);
	cr_assert(th_contains(e.message,
	                      cuda ? "7 is not an event this session registered" : "CUDA backend"),
	          "%s", e.message);
	d.event = 0;
	cr_assert(hostile_completion(
	                  &x, hostile_push(&x, TILEOPS_SQE_EVENT_RECORD, sizeof(d), &d, sizeof(d)),
	                  &e),
	          "no completion for an event record");
	e.message[sizeof(e.message) - 1] = '\0';
	cr_assert_eq(e.status, cuda ? TILEOPS_ERR_INVALID_ARGUMENT : TILEOPS_ERR_UNSUPPORTED,
	             "status %d (%s)", e.status, e.message);
	if (cuda)
		cr_assert(th_contains(e.message, "no exported event yet"), "%s", e.message);
	expect_good_descriptor(&x);
	expect_daemon_serving();
	th_raw_close(&x.raw);
	expect_daemon_serving();
}
