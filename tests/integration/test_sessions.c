/*
 * test_sessions.c - a session's life: opened by connect, used, closed or
 * abandoned, and then reaped, with its tensors gone from the daemon's stats
 * and other clients untouched.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

/* Reaping follows a disconnect; allow it seconds, checked by polling. */
#define REAP_MS 10000

static void expect_stat(const char *path, double want)
{
	double got = th_stat_wait(path, want, REAP_MS);

	cr_assert_eq(got, want, "stats %s is %g, expected %g within %d ms", path, got, want,
	             REAP_MS);
}

Test(sessions, close_removes_the_session_and_its_tensors_from_the_stats)
{
	double sessions = th_stat("sessions"), tensors = th_stat("tensors");
	double bytes = th_stat("bytes_in_use");
	tileops_client *c = th_connect("closing", 0);
	const int64_t shape[] = { 1000 };

	expect_stat("sessions", sessions + 1);
	for (int i = 0; i < 5; i++)
		th_tensor(c, TILEOPS_F32, 1, shape);
	expect_stat("tensors", tensors + 5);
	cr_assert(th_stat("bytes_in_use") >= bytes + 5 * 4000,
	          "bytes_in_use did not grow by the 20000 bytes of five tensors");
	tileops_close(c);
	expect_stat("sessions", sessions);
	expect_stat("tensors", tensors);
	expect_stat("bytes_in_use", bytes);
}

/* A client that connects, makes tensors and runs ops until killed. */
static int busy_child(int ready_fd)
{
	tileops_client *c = NULL;
	const int64_t shape[] = { 128, 128 };
	tileops_tensor in[2] = { 0, 0 }, out = 0;
	char one = 1;

	if (th_try_connect("doomed", 1 << 20, &c) != TILEOPS_OK ||
	    tileops_tensor_create(c, TILEOPS_F32, 2, shape, &in[0]) ||
	    tileops_tensor_create(c, TILEOPS_F32, 2, shape, &in[1]) ||
	    tileops_tensor_create(c, TILEOPS_F32, 2, shape, &out))
		_exit(2);
	tileops_op op = { "gemm", in, 2, &out, 1, NULL, 0 };
	tileops_completion *ring[8] = { 0 };

	/* Keep eight requests in flight so the kill lands mid-request. */
	for (long i = 0;; i++) {
		tileops_completion **slot = &ring[i % 8];

		tileops_completion_free(*slot);
		if (tileops_op_submit(c, &op, slot) != TILEOPS_OK)
			_exit(3);
		if (i == 8 && write(ready_fd, &one, 1) != 1)
			_exit(4);
	}
	return 0;
}

/* A client that opens a session, creates a tensor and exits without closing. */
static int leaving_child(void)
{
	tileops_client *c = NULL;
	const int64_t shape[] = { 10 };
	tileops_tensor t;

	if (th_try_connect("leaver", 0, &c) != TILEOPS_OK ||
	    tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t) != TILEOPS_OK)
		return 1;
	return 0; /* no tileops_close */
}

static int child_main(const char *role, int arg, int fd)
{
	if (strcmp(role, "busy") == 0)
		return busy_child(fd);
	return leaving_child();
}

TH_CHILD_MAIN(child_main)

static pid_t start_busy_child(void)
{
	int fds[2];
	char b;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	pid = th_spawn("busy", 0, fds[1]);
	close(fds[1]);
	cr_assert_eq(read(fds[0], &b, 1), 1, "the client child died before running ops");
	close(fds[0]);
	return pid;
}

static void kill_and_reap(pid_t pid)
{
	int status;

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	          "the client child ended on its own (status 0x%x)", status);
}

Test(sessions, client_killed_mid_request_is_reaped_and_others_carry_on)
{
	tileops_client *other = th_connect("survivor", 0);
	const int64_t shape[] = { 4 };
	float a[4] = { 1, 2, 3, 4 }, got[4], want[4] = { 2, 4, 6, 8 };
	tileops_tensor ta = th_tensor_f32(other, 1, shape, a);
	tileops_tensor tout = th_tensor_f32(other, 1, shape, NULL);
	tileops_tensor in[2] = { ta, ta };
	tileops_op add = { "add", in, 2, &tout, 1, NULL, 0 };
	double sessions = th_stat("sessions"), tensors = th_stat("tensors");
	pid_t pid = start_busy_child();

	expect_stat("sessions", sessions + 1);
	kill_and_reap(pid);
	expect_stat("sessions", sessions);
	expect_stat("tensors", tensors);

	th_run(other, &add);
	th_read(other, tout, got, sizeof(got));
	th_expect_close_f32(got, want, 4, 0, 0, "survivor's add after the kill");
	tileops_close(other);

	/* And new clients are served. */
	other = th_connect("newcomer", 0);
	tileops_close(other);
}

Test(sessions, repeated_kills_leave_nothing_behind)
{
	double sessions = th_stat("sessions"), tensors = th_stat("tensors");
	double bytes = th_stat("bytes_in_use");

	for (int i = 0; i < 3; i++)
		kill_and_reap(start_busy_child());
	expect_stat("sessions", sessions);
	expect_stat("tensors", tensors);
	expect_stat("bytes_in_use", bytes);
}

Test(sessions, exit_without_close_is_reaped)
{
	double sessions = th_stat("sessions"), tensors = th_stat("tensors");
	pid_t pid = th_spawn("leaver", 0, -1);
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child could not connect");
	expect_stat("sessions", sessions);
	expect_stat("tensors", tensors);
}

Test(sessions, a_closed_client_can_reconnect_and_gets_a_new_session)
{
	tileops_client *c = th_connect("again", 0);
	tileops_server_info info;
	uint64_t first;

	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	first = info.session_id;
	tileops_close(c);
	c = th_connect("again", 0);
	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	cr_assert_neq(info.session_id, first, "session id %llu reused", (unsigned long long)first);
	tileops_close(c);
}

Test(sessions, close_of_null_is_a_no_op)
{
	tileops_close(NULL);
}

/*
 * Device memory a client frees (or leaves behind by closing) is handed back
 * to the device later, off the launch path (the CUDA backend releases it
 * in the background): it must still be there for the next client. One
 * client takes 8 GiB tensors until the device is full and closes; a second
 * client then gets as many. GPU only: the CPU backend's memory is the
 * host's.
 */
Test(sessions, device_memory_a_closed_session_held_is_there_for_the_next)
{
	enum { MAX = 64 };
	int64_t shape[1] = { (int64_t)1 << 31 }; /* 2^31 f32: 8 GiB */
	tileops_tensor t[MAX];
	int first = 0, second = 0;

	if (strcmp(th_expected_backend(), "cuda") != 0)
		cr_skip_test("the CPU backend's memory is the host's");
	double bytes = th_stat("bytes_in_use");
	tileops_client *c = th_connect("fill", 0);
	while (first < MAX &&
	       tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t[first]) == TILEOPS_OK)
		first++;
	cr_assert_gt(first, 0, "not one 8 GiB tensor could be made");
	cr_assert_lt(first, MAX, "%d tensors of 8 GiB and the device is not full", first);
	/* Half freed one by one, the rest left to the close. */
	for (int i = 0; i < first / 2; i++)
		cr_assert_eq(tileops_tensor_free(c, t[i]), TILEOPS_OK);
	tileops_close(c);
	/* The close has run once the daemon counts none of its bytes. */
	expect_stat("bytes_in_use", bytes);
	c = th_connect("refill", 0);
	while (second < first &&
	       tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t[second]) == TILEOPS_OK)
		second++;
	cr_expect_eq(second, first, "the second client got %d tensors of 8 GiB, the first %d",
	             second, first);
	tileops_close(c);
}

/*
 * A new tensor is zero-filled: memory one session wrote and freed never
 * shows through in another's (or its own) next tensor. The size is small
 * enough for the CPU backend's heap to hand the same block back.
 */
Test(sessions, a_new_tensor_is_zero_whatever_the_memory_held_before)
{
	enum { N = 8192 };
	int64_t shape[1] = { N };
	float *pattern = malloc(N * sizeof(float));

	cr_assert(pattern);
	for (int i = 0; i < N; i++)
		pattern[i] = (float)(i + 1);
	for (int round = 0; round < 4; round++) {
		tileops_client *a = th_connect("writer", 0);
		tileops_tensor t = th_tensor_f32(a, 1, shape, pattern);
		cr_assert_eq(tileops_tensor_free(a, t), TILEOPS_OK, "%s", tileops_last_error());
		/* Its own next tensor, then another session's. */
		t = th_tensor(a, TILEOPS_F32, 1, shape);
		float *got = th_read_f32(a, t, N);
		for (int i = 0; i < N; i++)
			cr_assert_eq(got[i], 0.0f, "round %d: element %d of a new tensor is %g",
			             round, i, (double)got[i]);
		free(got);
		th_write(a, t, pattern, N * sizeof(float));
		tileops_close(a);
		tileops_client *b = th_connect("reader", 0);
		tileops_tensor u = th_tensor(b, TILEOPS_F32, 1, shape);
		got = th_read_f32(b, u, N);
		for (int i = 0; i < N; i++)
			cr_assert_eq(got[i], 0.0f,
			             "round %d: element %d of another session's new tensor is %g",
			             round, i, (double)got[i]);
		free(got);
		tileops_close(b);
	}
	free(pattern);
}
