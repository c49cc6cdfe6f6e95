/*
 * test_concurrent_clients.c - several clients at once, as threads and as
 * processes, each doing real work and each getting its own right answers.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

enum { M = 16, K = 32, N = 24, ROUNDS = 8 };

typedef struct work {
	int id;
	tileops_client *shared; /* use this client instead of connecting */
	int failed;
	char msg[512];
} work;

#define FAIL(w, ...)                                               \
	do {                                                       \
		snprintf((w)->msg, sizeof((w)->msg), __VA_ARGS__); \
		(w)->failed = 1;                                   \
		goto out;                                          \
	} while (0)

/*
 * One client's job: random a, b; c = a @ b and d = a + a, compared with the
 * host, ROUNDS times with fresh data. No Criterion asserts: this runs in
 * threads and forked children.
 */
static void do_work(work *w)
{
	const int64_t sa[] = { M, K }, sb[] = { K, N }, sc[] = { M, N };
	float a[M * K], b[K * N], c[M * N], d[M * K], want_c[M * N];
	tileops_client *cl = w->shared;
	tileops_tensor ta = 0, tb = 0, tc = 0, td = 0;
	th_rng rng = th_rng_seed(1000 + (uint64_t)w->id);
	tileops_status st;
	char name[32];

	snprintf(name, sizeof(name), "worker-%d", w->id);
	if (!cl && (st = th_try_connect(name, 1 << 20, &cl)) != TILEOPS_OK)
		FAIL(w, "%s: connect: %s (%s)", name, tileops_strerror(st), tileops_last_error());
	if (tileops_tensor_create(cl, TILEOPS_F32, 2, sa, &ta) ||
	    tileops_tensor_create(cl, TILEOPS_F32, 2, sb, &tb) ||
	    tileops_tensor_create(cl, TILEOPS_F32, 2, sc, &tc) ||
	    tileops_tensor_create(cl, TILEOPS_F32, 2, sa, &td))
		FAIL(w, "%s: create: %s", name, tileops_last_error());
	for (int r = 0; r < ROUNDS; r++) {
		tileops_tensor gin[2] = { ta, tb }, ain[2] = { ta, ta };
		tileops_op gemm = { "gemm", gin, 2, &tc, 1, NULL, 0 };
		tileops_op add = { "add", ain, 2, &td, 1, NULL, 0 };

		th_fill_f32(&rng, a, M * K, -1, 1);
		th_fill_f32(&rng, b, K * N, -1, 1);
		if (tileops_tensor_write(cl, ta, 0, a, sizeof(a)) ||
		    tileops_tensor_write(cl, tb, 0, b, sizeof(b)))
			FAIL(w, "%s: write: %s", name, tileops_last_error());
		if (tileops_op_run(cl, &gemm) || tileops_op_run(cl, &add))
			FAIL(w, "%s: op: %s", name, tileops_last_error());
		if (tileops_tensor_read(cl, tc, 0, c, sizeof(c)) ||
		    tileops_tensor_read(cl, td, 0, d, sizeof(d)))
			FAIL(w, "%s: read: %s", name, tileops_last_error());
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double acc = 0;

				for (int p = 0; p < K; p++)
					acc += (double)a[i * K + p] * b[p * N + j];
				want_c[i * N + j] = (float)acc;
			}
		long bad = th_mismatch_f32(c, want_c, M * N, 1e-5f, 1e-5f);
		if (bad >= 0)
			FAIL(w, "%s round %d: gemm element %ld is %g, expected %g", name, r, bad,
			     (double)c[bad], (double)want_c[bad]);
		for (int i = 0; i < M * K; i++)
			if (d[i] != a[i] + a[i])
				FAIL(w, "%s round %d: add element %d is %g, expected %g", name, r,
				     i, (double)d[i], (double)(a[i] + a[i]));
	}
out:
	if (cl && !w->shared)
		tileops_close(cl);
	else if (cl) {
		tileops_tensor_free(cl, ta);
		tileops_tensor_free(cl, tb);
		tileops_tensor_free(cl, tc);
		tileops_tensor_free(cl, td);
	}
}

static void *work_thread(void *arg)
{
	do_work(arg);
	return NULL;
}

static void run_threads(int n, tileops_client *shared)
{
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	work *w = calloc((size_t)n, sizeof(*w));

	cr_assert(th && w);
	for (int i = 0; i < n; i++) {
		w[i].id = i;
		w[i].shared = shared;
		cr_assert_eq(pthread_create(&th[i], NULL, work_thread, &w[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < n; i++)
		cr_expect(!w[i].failed, "%s", w[i].msg);
	free(th);
	free(w);
}

Test(concurrent, two_clients_in_threads_both_get_right_answers)
{
	run_threads(2, NULL);
}

Test(concurrent, sixteen_clients_in_threads_all_get_right_answers)
{
	run_threads(16, NULL);
}

Test(concurrent, eight_threads_sharing_one_client_all_get_right_answers)
{
	tileops_client *c = th_connect("shared", 0);

	run_threads(8, c);
	tileops_close(c);
}

/* A spawned client process: the same work, the verdict in the exit status. */
static int child_main(const char *role, int arg, int fd)
{
	work w = { .id = arg };

	do_work(&w);
	if (w.failed)
		fprintf(stderr, "%s\n", w.msg);
	return w.failed ? 1 : 0;
}

TH_CHILD_MAIN(child_main)

/* Start n client processes; all must exit 0 within the deadline. */
static void run_processes(int n)
{
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	int64_t deadline = th_now_ms() + 120000;
	int left = n;

	cr_assert(pids);
	for (int i = 0; i < n; i++)
		pids[i] = th_spawn("worker", 100 + i, -1);
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
			cr_assert_fail("%d client processes did not finish within 120 s", left);
		}
		th_sleep_ms(20);
	}
	free(pids);
}

Test(concurrent, two_client_processes_both_get_right_answers)
{
	run_processes(2);
}

Test(concurrent, sixteen_client_processes_all_get_right_answers)
{
	run_processes(16);
}
