/*
 * test_load.c - load and faults on a daemon of the test's own: many clients
 * at once with their results checked; clients killed in the middle of an
 * op, a transfer and a plan, reaped with everything they held (sessions,
 * tensors, bytes, the daemon's file descriptors and memory) while the
 * others' results stay exact; thousands of connections opened and dropped;
 * the daemon killed and restarted under connected clients.
 *
 * TILEOPS_LOAD_CLIENTS (64), TILEOPS_LOAD_OPS (2000) and
 * TILEOPS_LOAD_CONNECTS (10000) set the sizes; docs/reliability.md has the
 * figures of a run.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v && atoi(v) > 0 ? atoi(v) : dflt;
}

/* ---- what the daemon holds ----------------------------------------------- */

static int count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	int n = 0;
	cr_assert_not_null(d, "%s", path);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

typedef struct held {
	double sessions, tensors, bytes;
	int fds;
	long rss;
} held;

static held held_now(pid_t pid)
{
	held h = { th_stat("sessions"), th_stat("tensors"), th_stat("bytes_in_use"), count_fds(pid),
		   rss_kib(pid) };
	return h;
}

/*
 * Under AddressSanitizer freed memory waits in its quarantine (256 MiB by
 * default) before it is reused, so the daemon's resident memory grows by
 * up to that much with nothing leaked; LeakSanitizer checks for leaks when
 * it exits (daemon2_stop requires exit status 0).
 */
#if defined(__SANITIZE_ADDRESS__)
#define QUARANTINE_KIB (320L * 1024)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QUARANTINE_KIB (320L * 1024)
#endif
#endif
#ifndef QUARANTINE_KIB
#define QUARANTINE_KIB 0L
#endif

/*
 * Wait (at most 10 s) until the daemon holds what it held in `base`: the
 * same sessions, tensors, bytes and descriptors, and at most slack_kib more
 * resident memory (plus ASan's quarantine). Returns the milliseconds it took.
 */
static int64_t expect_back_to(pid_t pid, held base, long slack_kib, const char *what)
{
	slack_kib += QUARANTINE_KIB;
	int64_t t0 = th_now_ms(), deadline = t0 + 10000;
	held now;
	for (;;) {
		now = held_now(pid);
		if ((now.sessions == base.sessions && now.tensors == base.tensors &&
		     now.bytes == base.bytes && now.fds == base.fds &&
		     now.rss <= base.rss + slack_kib) ||
		    th_now_ms() > deadline)
			break;
		th_sleep_ms(5);
	}
	cr_assert(now.sessions == base.sessions && now.tensors == base.tensors &&
	                  now.bytes == base.bytes,
	          "%s: sessions %g tensors %g bytes %g, before %g %g %g", what, now.sessions,
	          now.tensors, now.bytes, base.sessions, base.tensors, base.bytes);
	cr_assert_eq(now.fds, base.fds, "%s: the daemon has %d file descriptors open, %d before",
	             what, now.fds, base.fds);
	cr_assert_leq(now.rss, base.rss + slack_kib,
	              "%s: the daemon's resident memory is %ld KiB, %ld before", what, now.rss,
	              base.rss);
	return th_now_ms() - t0;
}

/* ---- clients ------------------------------------------------------------- */

/*
 * A chain of `ops` adds, each depending on the one before (t <- t + one,
 * ping-ponging two tensors), then one sync; the result must be exactly
 * start + ops. 0 when it is.
 */
static int run_chain(tileops_client *c, int ops, float start)
{
	const int64_t shape[] = { 64 };
	float host[64];
	for (int i = 0; i < 64; i++)
		host[i] = start;
	tileops_tensor t[2], one;
	float ones[64];
	for (int i = 0; i < 64; i++)
		ones[i] = 1.0f;
	if (tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t[0]) != TILEOPS_OK ||
	    tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t[1]) != TILEOPS_OK ||
	    tileops_tensor_create(c, TILEOPS_F32, 1, shape, &one) != TILEOPS_OK ||
	    tileops_tensor_write(c, t[0], 0, host, sizeof(host)) != TILEOPS_OK ||
	    tileops_tensor_write(c, one, 0, ones, sizeof(ones)) != TILEOPS_OK)
		return 1;
	for (int i = 0; i < ops; i++) {
		tileops_tensor in[2] = { t[i % 2], one };
		tileops_op op = { "add", in, 2, &t[(i + 1) % 2], 1, NULL, 0 };
		if (tileops_op_run(c, &op) != TILEOPS_OK)
			return 2;
	}
	if (tileops_sync(c) != TILEOPS_OK ||
	    tileops_tensor_read(c, t[ops % 2], 0, host, sizeof(host)) != TILEOPS_OK)
		return 3;
	for (int i = 0; i < 64; i++)
		if (host[i] != start + (float)ops)
			return 4;
	tileops_tensor_free(c, t[0]);
	tileops_tensor_free(c, t[1]);
	tileops_tensor_free(c, one);
	return 0;
}

static int role_chain(int arg)
{
	tileops_client *c;
	if (th_try_connect("load", 1 << 20, &c) != TILEOPS_OK)
		return 9;
	int rc = run_chain(c, env_int("TILEOPS_LOAD_OPS", 2000), (float)(arg % 100));
	tileops_close(c);
	return rc;
}

/* Roles killed in the middle of their work; they say when they are in it. */
static void say_ready(int fd)
{
	char b = 'r';
	if (write(fd, &b, 1) != 1)
		_exit(5);
	close(fd);
}

static int role_doomed(const char *role, int fd)
{
	tileops_client *c = th_connect(role, 16 << 20);
	const int64_t big[] = { 2 << 20 }; /* 8 MiB of f32 */
	const int64_t small[] = { 4096 };
	tileops_tensor a = th_tensor(c, TILEOPS_F32, 1, strcmp(role, "transfer") ? small : big);
	tileops_tensor b = th_tensor(c, TILEOPS_F32, 1, strcmp(role, "transfer") ? small : big);
	tileops_tensor in[2] = { a, a };
	tileops_op op = { "add", in, 2, &b, 1, NULL, 0 };
	if (strcmp(role, "transfer") == 0) {
		float *buf = calloc(2 << 20, sizeof(float));
		say_ready(fd);
		for (;;)
			tileops_tensor_write(c, a, 0, buf, (2u << 20) * sizeof(float));
	}
	if (strcmp(role, "plan") == 0) {
		tileops_plan *p;
		cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK);
		for (int i = 0; i < 8; i++)
			cr_assert_eq(tileops_plan_add(p, &op), TILEOPS_OK);
		cr_assert_eq(tileops_plan_end(p), TILEOPS_OK);
		say_ready(fd);
		for (;;)
			tileops_plan_run(p, 0, NULL, 0);
	}
	say_ready(fd);
	for (;;)
		tileops_op_run(c, &op);
}

static int child_main(const char *role, int arg, int fd)
{
	if (strcmp(role, "chain") == 0)
		return role_chain(arg);
	return role_doomed(role, fd);
}

TH_CHILD_MAIN(child_main)

TestSuite(load, .fini = daemon2_kill_running, .timeout = 900);

Test(load, many_clients_of_thousands_of_ops_all_get_exact_results_and_leave_nothing)
{
	int n = env_int("TILEOPS_LOAD_CLIENTS", 64);
	daemon2 d;
	daemon2_start(&d, "");
	daemon2_use(&d);
	held base = held_now(d.pid);
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	int64_t t0 = th_now_ms();
	for (int i = 0; i < n; i++)
		pids[i] = th_spawn("chain", i, -1);
	for (int i = 0; i < n; i++) {
		int status;
		cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		          "client %d: status %d (1 setup, 2 op_run, 3 sync or read, 4 a wrong "
		          "result, "
		          "9 connect)",
		          i, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	int64_t ran = th_now_ms() - t0;
	int64_t back = expect_back_to(d.pid, base, 32 * 1024, "after the clients");
	printf("load: %d clients x %d ops, exact, in %lld ms; the daemon back to what it held "
	       "before in %lld ms\n",
	       n, env_int("TILEOPS_LOAD_OPS", 2000), (long long)ran, (long long)back);
	free(pids);
	daemon2_stop(&d);
}

/* Start a doomed child, wait until it is in its work, and SIGKILL it. */
static void kill_in_the_middle(const char *role)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = th_spawn(role, 0, fds[1]);
	close(fds[1]);
	char b;
	cr_assert_eq(read(fds[0], &b, 1), 1, "the %s child died before its work", role);
	close(fds[0]);
	th_sleep_ms(30);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status), "the %s child ended on its own", role);
}

Test(load, clients_killed_mid_op_mid_transfer_and_mid_plan_are_reaped_and_others_stay_exact)
{
	static const char *const roles[] = { "op", "transfer", "plan" };
	daemon2 d;
	daemon2_start(&d, "");
	daemon2_use(&d);
	tileops_client *survivor = th_connect("survivor", 1 << 20);
	cr_assert_eq(run_chain(survivor, 200, 1.0f), 0, "the survivor before the kills");
	held base = held_now(d.pid);
	for (int r = 0; r < 3; r++) {
		kill_in_the_middle(roles[r]);
		int64_t ms = expect_back_to(d.pid, base, 32 * 1024, roles[r]);
		printf("load: a client killed mid-%s reaped in %lld ms\n", roles[r], (long long)ms);
		cr_assert_lt(ms, 3000, "reaping the client killed mid-%s took %lld ms", roles[r],
		             (long long)ms);
		cr_assert_eq(run_chain(survivor, 200, 7.0f), 0, "the survivor after mid-%s",
		             roles[r]);
	}
	tileops_close(survivor);
	daemon2_stop(&d);
}

Test(load, thousands_of_connections_opened_and_dropped_leave_nothing)
{
	int n = env_int("TILEOPS_LOAD_CONNECTS", 10000);
	daemon2 d;
	daemon2_start(&d, "");
	daemon2_use(&d);
	held base = held_now(d.pid);
	int64_t t0 = th_now_ms();
	for (int i = 0; i < n; i++) {
		if (i % 2 == 0) {
			/* A client that says goodbye. */
			tileops_client *c;
			cr_assert_eq(th_try_connect("cycle", 1 << 16, &c), TILEOPS_OK,
			             "connect %d: %s", i, tileops_last_error());
			tileops_close(c);
		} else {
			/* One that drops its connection after its Hello. */
			th_raw r;
			th_raw_open(&r);
			th_raw_hello(&r, 1 << 16);
			th_raw_close(&r);
		}
	}
	int64_t ran = th_now_ms() - t0;
	int64_t back = expect_back_to(d.pid, base, 32 * 1024, "after the connections");
	printf("load: %d connections (half closed, half dropped) in %lld ms; back to what it "
	       "held in %lld ms\n",
	       n, (long long)ran, (long long)back);
	daemon2_stop(&d);
}

Test(load, a_daemon_killed_under_its_clients_fails_their_calls_promptly_and_a_new_one_serves)
{
	daemon2 d;
	daemon2_start(&d, "");
	daemon2_use(&d);
	tileops_client *c = th_connect("orphan", 1 << 20);
	cr_assert_eq(run_chain(c, 100, 0.0f), 0);
	const int64_t shape[] = { 64 };
	tileops_tensor t = th_tensor(c, TILEOPS_F32, 1, shape);
	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	th_sleep_ms(100); /* the connection's end reaches the client */

	tileops_tensor in[2] = { t, t };
	tileops_op op = { "add", in, 2, &t, 1, NULL, 0 };
	int64_t t0 = th_now_ms();
	tileops_status st = tileops_op_run(c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(c);
	int64_t took = th_now_ms() - t0;
	cr_assert_neq(st, TILEOPS_OK, "a call to a dead daemon succeeded");
	printf("load: a call to a killed daemon failed with %s in %lld ms\n", tileops_strerror(st),
	       (long long)took);
	cr_assert_lt(took, 1000, "the call to a killed daemon took %lld ms to fail",
	             (long long)took);
	tileops_close(c);
	daemon2_kill(&d);

	/* A new daemon on the same socket serves a reconnecting client. */
	daemon2 e;
	daemon2_start(&e, "");
	daemon2_use(&e);
	c = th_connect("reconnected", 1 << 20);
	cr_assert_eq(run_chain(c, 100, 3.0f), 0, "after reconnecting");
	tileops_close(c);
	daemon2_stop(&e);
}
