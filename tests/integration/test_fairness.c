/*
 * test_fairness.c - one client's long ops beside another's short ones on a
 * daemon with the default config (session_queue_us = 2000;
 * docs/reliability.md, "Fairness between sessions"): in CI on the CPU
 * backend, whose device threads run normal-priority streams' work before
 * low-priority streams' as a GPU does.
 *
 * A heavy client (a child process) submits adds in bursts of 16 with
 * tileops_op_run, syncing after each burst: over 4 Mi floats on the CPU
 * (12.6 ms each by the CPU backend's estimate, several ms of real work),
 * over 256 Mi on a GPU (about 670 us on an H200), so that each op is long
 * (a quarter of the limit or more) and a burst is over the limit. A light
 * client runs adds over 1 Ki floats one at a time with op_run + sync. Both
 * chains of adds are checked exactly. The heavy session must have been
 * held (the stats' queue_holds) and lowered once only, not again after
 * each of its syncs (demotions). The light
 * client's round trips alone and beside are printed, not asserted: the CI
 * machine's cores are shared.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

TestSuite(fairness, .fini = daemon2_kill_running, .timeout = 240);

#define HEAVY_CPU_MI 4
#define HEAVY_GPU_MI 256
#define CHECK_SLICE (1L << 20)
#define HEAVY_BURST 16
#define LIGHT_ELEMS 1024L
#define LIGHT_ALONE 200
#define LIGHT_BESIDE 300

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* x <- x + 1, ping-ponging a and b; `one` = exp(0) (tensors start zeroed). */
typedef struct chain {
	tileops_client *c;
	tileops_tensor a, b, one;
	long elems, ops;
} chain;

static tileops_status chain_make(tileops_client *c, long elems, chain *ch)
{
	const int64_t shape[] = { elems };
	memset(ch, 0, sizeof(*ch));
	ch->c = c;
	ch->elems = elems;
	tileops_status st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->a);
	if (st == TILEOPS_OK)
		st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->b);
	if (st == TILEOPS_OK)
		st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ch->one);
	tileops_op exp = { "exp", &ch->a, 1, &ch->one, 1, NULL, 0 };
	if (st == TILEOPS_OK)
		st = tileops_op_run(c, &exp);
	return st == TILEOPS_OK ? tileops_sync(c) : st;
}

static tileops_status chain_step(chain *ch)
{
	tileops_tensor in[2] = { ch->ops % 2 ? ch->b : ch->a, ch->one };
	tileops_tensor out = ch->ops % 2 ? ch->a : ch->b;
	tileops_op add = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_status st = tileops_op_run(ch->c, &add);
	if (st == TILEOPS_OK)
		ch->ops++;
	return st;
}

/* After a sync: every element of the last output (of its first, middle
 * and last CHECK_SLICE when it is longer) equals the op count. Returns the
 * index of the first that does not, -1 when all do, -2 when a read fails. */
static long chain_check(const chain *ch)
{
	long n = ch->elems < CHECK_SLICE ? ch->elems : CHECK_SLICE;
	long starts[3] = { 0, (ch->elems - n) / 2, ch->elems - n };
	int slices = ch->elems <= CHECK_SLICE ? 1 : 3;
	float *got = malloc((size_t)n * sizeof(float));
	tileops_tensor last = ch->ops % 2 ? ch->b : ch->a;
	long bad = got ? -1 : -2;
	for (int s = 0; s < slices && bad == -1; s++) {
		if (tileops_tensor_read(ch->c, last, (size_t)starts[s] * sizeof(float), got,
		                        (size_t)n * sizeof(float)) != TILEOPS_OK) {
			bad = -2;
			break;
		}
		for (long i = 0; i < n && bad == -1; i++)
			if (got[i] != (float)ch->ops)
				bad = starts[s] + i;
	}
	free(got);
	return bad;
}

/* The heavy client: says 'r' on fd when set up, runs bursts until the test
 * writes to fd, then checks its chain. Exit 0 when everything was right. */
static int heavy_main(int fd, long elems)
{
	tileops_client *c;
	chain ch;
	if (th_try_connect("fairness-heavy", 1 << 20, &c) != TILEOPS_OK ||
	    chain_make(c, elems, &ch) != TILEOPS_OK)
		return 2;
	if (write(fd, "r", 1) != 1)
		return 3;
	tileops_status st = TILEOPS_OK;
	struct pollfd p = { fd, POLLIN, 0 };
	while (st == TILEOPS_OK && poll(&p, 1, 0) == 0) {
		for (int i = 0; i < HEAVY_BURST && st == TILEOPS_OK; i++)
			st = chain_step(&ch);
		if (st == TILEOPS_OK)
			st = tileops_sync(c);
	}
	if (st != TILEOPS_OK) {
		fprintf(stderr, "heavy client: %s (%s)\n", tileops_strerror(st),
		        tileops_last_error());
		return 4;
	}
	long bad = chain_check(&ch);
	if (bad != -1) {
		fprintf(stderr, "heavy client: element %ld wrong after %ld adds\n", bad, ch.ops);
		return 5;
	}
	fprintf(stderr, "heavy client: %ld adds of %ld floats, checked\n", ch.ops, ch.elems);
	tileops_close(c);
	return 0;
}

static int child_main(const char *role, int arg, int fd)
{
	return strcmp(role, "heavy") == 0 ? heavy_main(fd, (long)arg << 20) : 1;
}

TH_CHILD_MAIN(child_main)

/* n light round trips (op_run + sync) into v, microseconds. */
static void round_trips(chain *ch, double *v, int n)
{
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		tileops_status st = chain_step(ch);
		if (st == TILEOPS_OK)
			st = tileops_sync(ch->c);
		cr_assert_eq(st, TILEOPS_OK, "light op_run + sync: %s (%s)", tileops_strerror(st),
		             tileops_last_error());
		v[i] = now_us() - t0;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void print_percentiles(const char *when, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("light client %s: p50 %.1f us, p99 %.1f us, max %.1f us (%d round trips)\n", when,
	       v[n / 2], v[n * 99 / 100], v[n - 1], n);
	fflush(stdout);
}

/* A counter summed over the executor threads in the stats. */
static double executor_sum(const char *json, const char *what)
{
	double sum = 0.0, x;
	char path[96];
	for (int i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "executor.%d.%s", i, what);
		if (th_json_number(json, path, &x) != 0)
			break;
		sum += x;
	}
	return sum;
}

Test(fairness, a_heavy_session_is_held_and_lowered_beside_a_light_one_and_both_are_right)
{
	daemon2 d;
	daemon2_start(&d, "# the defaults: session_queue_us = 2000\n");
	daemon2_use(&d);
	char *json = th_stats();
	cr_assert_eq(executor_sum(json, "queue_holds"), 0.0);
	free(json);

	tileops_client *c = th_connect("fairness-light", 1 << 20);
	chain light;
	cr_assert_eq(chain_make(c, LIGHT_ELEMS, &light), TILEOPS_OK);
	double v[LIGHT_BESIDE];
	round_trips(&light, v, LIGHT_ALONE);
	print_percentiles("alone", v, LIGHT_ALONE);

	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair: %s",
	             strerror(errno));
	cr_assert_eq(fcntl(sv[1], F_SETFD, 0), 0); /* the child's end survives its exec */
	int cpu = strcmp(th_expected_backend(), "cpu") == 0;
	pid_t pid = th_spawn("heavy", cpu ? HEAVY_CPU_MI : HEAVY_GPU_MI, sv[1]);
	close(sv[1]);
	char b;
	cr_assert_eq(read(sv[0], &b, 1), 1, "the heavy client did not start");

	/* Held at least once before the light client measures: each of its adds
	 * alone is over the limit. */
	double holds = 0.0;
	for (int64_t end = th_now_ms() + TH_TIMEOUT_MS; holds == 0.0 && th_now_ms() < end;) {
		json = th_stats();
		holds = executor_sum(json, "queue_holds");
		free(json);
		if (holds == 0.0)
			th_sleep_ms(10);
	}
	round_trips(&light, v, LIGHT_BESIDE);
	print_percentiles("beside the heavy client", v, LIGHT_BESIDE);

	cr_assert_eq(write(sv[0], "s", 1), 1);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	close(sv[0]);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "the heavy client failed (status 0x%x): its chain or its calls", status);

	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	long bad = chain_check(&light);
	cr_assert_eq(bad, -1, "light client: element %ld wrong after %ld adds", bad, light.ops);

	json = th_stats();
	holds = executor_sum(json, "queue_holds");
	double demotions = executor_sum(json, "demotions");
	free(json);
	printf("queue_holds %.0f, demotions %.0f\n", holds, demotions);
	cr_assert_gt(holds, 0.0, "the heavy session was never held at session_queue_us");
	/* Lowered once, before its first long op (the exp that sets it up),
	 * and never raised: it launches no short op, so its syncs' drains do
	 * not give it the normal priority back. The light session's ops are
	 * short and never held. */
	cr_assert_eq(demotions, 1.0, "the heavy session was lowered %.0f times, expected once",
	             demotions);
	tileops_close(c);
	daemon2_stop(&d);
}

/*
 * Heavy clients killed while the executor holds their sessions: once the
 * last ring session is gone the executor thread has nothing to poll for, so
 * the daemon goes idle (a thread that still counted a held session would
 * spin on a core) and stops at SIGTERM (it would never leave its loop).
 * Several clients at once, in several rounds, so that some session is held
 * as the last of them closes.
 */
#define HELD_CLIENTS 3
#define HELD_ROUNDS 5

/* Start HELD_CLIENTS heavy clients, wait until the holds pass `holds`, kill
 * them all mid-burst, and wait until their sessions are closed. */
static double kill_held_clients(double holds)
{
	int cpu = strcmp(th_expected_backend(), "cpu") == 0;
	int fds[HELD_CLIENTS];
	pid_t pids[HELD_CLIENTS];
	for (int i = 0; i < HELD_CLIENTS; i++) {
		int sv[2];
		cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0,
		             "socketpair: %s", strerror(errno));
		cr_assert_eq(fcntl(sv[1], F_SETFD, 0), 0);
		pids[i] = th_spawn("heavy", cpu ? HEAVY_CPU_MI : HEAVY_GPU_MI, sv[1]);
		close(sv[1]);
		fds[i] = sv[0];
		char b;
		cr_assert_eq(read(fds[i], &b, 1), 1, "heavy client %d did not start", i);
	}
	double now = holds;
	for (int64_t end = th_now_ms() + TH_TIMEOUT_MS; now <= holds && th_now_ms() < end;) {
		char *json = th_stats();
		now = executor_sum(json, "queue_holds");
		free(json);
		if (now <= holds)
			th_sleep_ms(5);
	}
	cr_assert_gt(now, holds, "no heavy session was held at session_queue_us");
	th_sleep_ms(20); /* into the middle of their bursts */
	for (int i = 0; i < HELD_CLIENTS; i++)
		cr_assert_eq(kill(pids[i], SIGKILL), 0);
	for (int i = 0; i < HELD_CLIENTS; i++) {
		int status = 0;
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		close(fds[i]);
	}
	cr_assert_eq(th_stat_wait("sessions", 0, TH_TIMEOUT_MS), 0,
	             "the killed clients' sessions did not close");
	return now;
}

Test(fairness, sessions_closed_while_held_leave_the_daemon_idle_and_stoppable)
{
	daemon2 d;
	daemon2_start(&d, "# the defaults: session_queue_us = 2000\n");
	daemon2_use(&d);

	double holds = 0.0;
	for (int round = 0; round < HELD_ROUNDS; round++) {
		holds = kill_held_clients(holds);
		/* What the killed sessions had launched drains; then the daemon idles. */
		th_sleep_ms(300);
		double before = th_cpu_seconds(d.pid);
		th_sleep_ms(500);
		double used = th_cpu_seconds(d.pid) - before;
		printf("round %d, idle after the held sessions closed: %.3f s of CPU in 0.5 s\n",
		       round, used);
		cr_assert_lt(used, 0.15,
		             "tileopsd used %.2f s of CPU in 0.5 s with no session open", used);
	}
	daemon2_stop(&d);
}
