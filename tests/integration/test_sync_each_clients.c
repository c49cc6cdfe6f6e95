/*
 * test_sync_each_clients.c - 8 client processes at once, each on tensors
 * of its own, each calling tileops_op_run then tileops_sync for every op
 * (the "sync each" use of a serving engine's worker), a few hundred times:
 * every result equals the same arithmetic done on the host, bit for bit,
 * and each process prints its round trips' p50, p99 and max (figures to
 * read, not to assert: the CI machine is shared).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "integration/helpers.h"

#define CLIENTS 8
#define STEPS 300
#define N 64

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int fail(int idx, const char *what, tileops_status st)
{
	fprintf(stderr, "client %d: %s: %s (%s)\n", idx, what, tileops_strerror(st),
	        tileops_last_error());
	return 1;
}

/*
 * Client idx: x <- x + d, STEPS times, ping-ponging between two tensors;
 * multiples of 1/256 of this size add exactly in f32, so the host's sums
 * are the daemon's. Every 50 steps the tensor is read back and compared.
 */
static int client_main(int idx)
{
	tileops_client *c = NULL;
	tileops_tensor x[2], d;
	float host[N], step[N], got[N];
	double rt[STEPS];
	const int64_t shape[1] = { N };
	tileops_status st;

	for (int i = 0; i < N; i++) {
		host[i] = (float)idx + (float)((i * 7 + idx) % 33 - 16) / 256.0f;
		step[i] = (float)(idx + 1 + i % 3) / 256.0f;
	}
	if ((st = th_try_connect("sync-each", 1 << 20, &c)) != TILEOPS_OK)
		return fail(idx, "connect", st);
	if ((st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &x[0])) != TILEOPS_OK ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &x[1])) != TILEOPS_OK ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &d)) != TILEOPS_OK)
		return fail(idx, "tensor_create", st);
	if ((st = tileops_tensor_write(c, x[0], 0, host, sizeof(host))) != TILEOPS_OK ||
	    (st = tileops_tensor_write(c, d, 0, step, sizeof(step))) != TILEOPS_OK)
		return fail(idx, "tensor_write", st);
	for (int s = 0; s < STEPS; s++) {
		tileops_tensor in[2] = { x[s % 2], d };
		tileops_op add = { "add", in, 2, &x[(s + 1) % 2], 1, NULL, 0 };
		double t0 = now_us();
		if ((st = tileops_op_run(c, &add)) != TILEOPS_OK)
			return fail(idx, "op_run", st);
		if ((st = tileops_sync(c)) != TILEOPS_OK)
			return fail(idx, "sync", st);
		rt[s] = now_us() - t0;
		for (int i = 0; i < N; i++)
			host[i] += step[i];
		if ((s + 1) % 50 != 0)
			continue;
		if ((st = tileops_tensor_read(c, x[(s + 1) % 2], 0, got, sizeof(got))) !=
		    TILEOPS_OK)
			return fail(idx, "tensor_read", st);
		for (int i = 0; i < N; i++) {
			if (memcmp(&got[i], &host[i], sizeof(float)) != 0) {
				fprintf(stderr,
				        "client %d, step %d: x[%d] = %.9g, the host has %.9g\n",
				        idx, s + 1, i, (double)got[i], (double)host[i]);
				return 1;
			}
		}
	}
	qsort(rt, STEPS, sizeof(rt[0]), cmp_double);
	printf("sync each, client %d: %d op_run + sync round trips: p50 %.1f us, p99 %.1f us, "
	       "max %.1f us\n",
	       idx, STEPS, rt[STEPS / 2], rt[(STEPS * 99 + 99) / 100 - 1], rt[STEPS - 1]);
	fflush(stdout);
	tileops_close(c);
	return 0;
}

static int child_main(const char *role, int arg, int fd)
{
	(void)fd;
	return strcmp(role, "sync-each") == 0 ? client_main(arg) : 100;
}

TH_CHILD_MAIN(child_main)

TestSuite(sync_each, .timeout = 60);

Test(sync_each, eight_processes_running_op_run_and_sync_each_all_get_exact_results)
{
	pid_t pids[CLIENTS];
	int ok = 0;

	for (int i = 0; i < CLIENTS; i++)
		pids[i] = th_spawn("sync-each", i, -1);
	int64_t deadline = th_now_ms() + 30000;
	for (int left = CLIENTS; left > 0;) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);
		if (p > 0) {
			left--;
			ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
			cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			          "client process %d failed (status 0x%x; its message is above)",
			          (int)p, status);
			continue;
		}
		if (th_now_ms() > deadline) {
			for (int i = 0; i < CLIENTS; i++)
				kill(pids[i], SIGKILL);
			cr_assert_fail("%d client processes did not finish within 30 s", left);
		}
		th_sleep_ms(10);
	}
	cr_assert_eq(ok, CLIENTS, "%d of %d client processes got every result right", ok, CLIENTS);
}
