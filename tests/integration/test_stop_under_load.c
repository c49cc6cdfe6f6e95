/*
 * test_stop_under_load.c - SIGTERM while many clients are sending: the
 * daemon exits 0 within its stop grace, every time, and no client hangs.
 *
 * TILEOPS_STOP_TRIES (default 5) daemons are started and stopped, each
 * under TILEOPS_STOP_CLIENTS (default 16) client processes running ops in a
 * loop; docs/reliability.md has the long run (100 tries, 64 clients).
 */
#include <criterion/criterion.h>
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

/*
 * Child: until the daemon goes away, a mix of what clients do: ops through
 * the ring, syncs, bytes in and out and tensors made and freed over the
 * control socket, and now and then a new connection. 0 when it saw the
 * daemon go.
 */
static int worker(int arg)
{
	tileops_status st = TILEOPS_OK;
	for (int round = 0; st == TILEOPS_OK; round++) {
		tileops_client *c;
		st = th_try_connect("stop-load", 1 << 20, &c);
		if (st != TILEOPS_OK)
			break;
		const int64_t shape[] = { 256 };
		float host[256] = { 0 };
		tileops_tensor t[3] = { 0, 0, 0 };
		for (int i = 0; i < 3 && st == TILEOPS_OK; i++)
			st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t[i]);
		tileops_tensor in[2] = { t[0], t[1] };
		tileops_op op = { "add", in, 2, &t[2], 1, NULL, 0 };
		for (long n = 0; st == TILEOPS_OK && n < 400; n++) {
			st = tileops_op_run(c, &op);
			if (st == TILEOPS_OK && (n + arg) % 8 == 0)
				st = tileops_sync(c);
			if (st == TILEOPS_OK && (n + arg) % 16 == 0)
				st = tileops_tensor_write(c, t[0], 0, host, sizeof(host));
			if (st == TILEOPS_OK && (n + arg) % 16 == 8)
				st = tileops_tensor_read(c, t[2], 0, host, sizeof(host));
		}
		if (st == TILEOPS_OK && (round + arg) % 2 == 0)
			st = tileops_tensor_free(c, t[0]);
		tileops_close(c);
	}
	return st == TILEOPS_ERR_SHUTDOWN || st == TILEOPS_ERR_CLOSED ||
	                       st == TILEOPS_ERR_CONNECT || st == TILEOPS_ERR_TIMEOUT
	               ? 0
	               : 10 + (int)st;
}

static int child_main(const char *role, int arg, int fd)
{
	return strcmp(role, "worker") == 0 ? worker(arg) : 3;
}

TH_CHILD_MAIN(child_main)

TestSuite(stop, .fini = daemon2_kill_running, .timeout = 600);

Test(stop, sigterm_with_clients_sending_exits_0_every_time)
{
	int tries = env_int("TILEOPS_STOP_TRIES", 5);
	int clients = env_int("TILEOPS_STOP_CLIENTS", 16);
	pid_t *pids = calloc((size_t)clients, sizeof(*pids));
	int64_t slowest = 0, total = 0;
	cr_assert_not_null(pids);
	for (int t = 0; t < tries; t++) {
		daemon2 d;
		daemon2_start(&d, "");
		daemon2_use(&d);
		for (int i = 0; i < clients; i++)
			pids[i] = th_spawn("worker", i, -1);
		/* Stop once every client is sending. */
		double n = th_stat_wait_min("sessions", clients, 20000);
		cr_assert_geq(n, clients, "try %d: only %g of %d clients connected", t, n, clients);
		th_sleep_ms(50 + 37 * (t % 7));
		int64_t t0 = th_now_ms();
		daemon2_stop(&d); /* asserts exit 0 within 20 s */
		int64_t took = th_now_ms() - t0;
		slowest = took > slowest ? took : slowest;
		total += took;
		for (int i = 0; i < clients; i++) {
			int status = 0;
			int64_t deadline = th_now_ms() + 15000;
			pid_t got;
			while ((got = waitpid(pids[i], &status, WNOHANG)) == 0 &&
			       th_now_ms() < deadline)
				th_sleep_ms(10);
			if (got == 0) {
				kill(pids[i], SIGKILL);
				waitpid(pids[i], &status, 0);
				cr_assert_fail(
				        "try %d: client %d still ran 15 s after the daemon exited",
				        t, i);
			}
			cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			          "try %d: client %d ended with status %d", t, i, status);
		}
	}
	free(pids);
	printf("stop under load: %d tries of %d clients, exit 0 every time; SIGTERM to exit "
	       "%.0f ms on average, %lld ms at most\n",
	       tries, clients, (double)total / tries, (long long)slowest);
}
