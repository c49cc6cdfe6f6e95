/*
 * test_control_plane.c - one client cannot take the control plane from the
 * others: requests it parks (behind a seq that never comes) do not use up
 * the contexts the daemon receives with, and its sessions and connections
 * are capped.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define PARKED 64

/*
 * Child: open a session, then send PARKED creates numbered from 100 (seq 1
 * to 99 never come, so all of them wait), and once they are answered write
 * how many were refused for the gap to fd.
 */
static int park_requests(int fd)
{
	th_raw r;
	const int64_t shape[] = { 4 };
	Tileops__Request reqs[PARKED];
	Tileops__TensorCreate tc = TILEOPS__TENSOR_CREATE__INIT;
	Tileops__Request *p[PARKED];
	Tileops__Reply *rep[PARKED];

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	tc.dtype = TILEOPS__DTYPE__DTYPE_F32;
	tc.n_shape = 1;
	tc.shape = (int64_t *)shape;
	for (int i = 0; i < PARKED; i++) {
		tileops__request__init(&reqs[i]);
		reqs[i].body_case = TILEOPS__REQUEST__BODY_TENSOR_CREATE;
		reqs[i].tensor_create = &tc;
		p[i] = &reqs[i];
	}
	r.seq = 100;
	th_raw_pipeline(&r, p, PARKED, rep);
	unsigned char refused = 0;
	for (int i = 0; i < PARKED; i++) {
		if (rep[i] && rep[i]->status == TILEOPS__STATUS__STATUS_PROTOCOL)
			refused++;
		if (rep[i])
			tileops__reply__free_unpacked(rep[i], NULL);
	}
	if (write(fd, &refused, 1) != 1)
		return 2;
	th_raw_close(&r);
	return 0;
}

/* Child: hold `arg` sessions open until fd is closed; the refused ones must
 * be refused as busy, naming the setting. */
static int hold_connections(int arg, int fd)
{
	tileops_client *c[16];
	int n = 0;
	tileops_connect_options o = {
		.address = th_address(), .arena_bytes = 1 << 16, .name = "held", .timeout_ms = 20000
	};
	for (int i = 0; i < arg && i < 16; i++) {
		/* Once each: th_try_connect would retry a refusal as busy. */
		tileops_status st = tileops_connect_opts(&o, &c[n]);
		if (st == TILEOPS_OK)
			n++;
		else if (st != TILEOPS_ERR_BUSY ||
		         !strstr(tileops_last_error(), "max_sessions_per_process"))
			return 4;
	}
	unsigned char got = (unsigned char)n;
	if (write(fd, &got, 1) != 1)
		return 2;
	char b;
	while (read(fd, &b, 1) > 0)
		;
	for (int i = 0; i < n; i++)
		tileops_close(c[i]);
	return 0;
}

static int child_main(const char *role, int arg, int fd)
{
	if (strcmp(role, "park") == 0)
		return park_requests(fd);
	if (strcmp(role, "hold") == 0)
		return hold_connections(arg, fd);
	return 3;
}

TH_CHILD_MAIN(child_main)

TestSuite(control_plane, .fini = daemon2_kill_running, .timeout = 60);

Test(control_plane, requests_parked_behind_a_missing_seq_leave_contexts_for_others)
{
	int fds[2];
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = th_spawn("park", 0, fds[1]);
	close(fds[1]);
	double held = th_stat_wait_min("held_requests", PARKED, TH_TIMEOUT_MS);
	cr_assert_geq(held, PARKED, "the child's %d requests did not park (held_requests %g)",
	              PARKED, held);

	/* A well-behaved client does its work while they are parked. */
	tileops_client *c = th_connect("polite", 1 << 20);
	const int64_t shape[] = { 3 };
	float a[3] = { 1, 2, 3 }, got[3], want[3] = { 2, 4, 6 };
	tileops_tensor t = th_tensor_f32(c, 1, shape, a);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { t, t };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };
	th_run(c, &op);
	th_read(c, out, got, sizeof(got));
	th_expect_close_f32(got, want, 3, 0, 0, "add beside parked requests");
	struct pollfd pf = { fds[0], POLLIN, 0 };
	cr_assert_eq(poll(&pf, 1, 0), 0,
	             "the parked requests were answered before the other client's: it waited "
	             "for their contexts");
	tileops_close(c);

	/* The parked ones are refused once the gap times out. */
	unsigned char refused = 0;
	cr_assert_eq(read(fds[0], &refused, 1), 1, "the parking child wrote no result");
	cr_assert_eq(refused, PARKED, "%d of %d parked requests were refused for the gap", refused,
	             PARKED);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	close(fds[0]);
}

Test(control_plane, one_process_cannot_take_more_sessions_than_its_cap)
{
	daemon2 d;
	daemon2_start(&d, "max_sessions_per_process = 3\n");
	daemon2_use(&d);
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Only the child's end may reach it, or it never sees this one close. */
	cr_assert_eq(fcntl(sv[0], F_SETFD, FD_CLOEXEC), 0);
	pid_t pid = th_spawn("hold", 5, sv[1]);
	close(sv[1]);
	unsigned char n = 0;
	cr_assert_eq(read(sv[0], &n, 1), 1);
	cr_assert_eq(n, 3, "a process with a cap of 3 sessions got %d of 5", n);
	/* Another process still connects. */
	tileops_client *c = th_connect("other", 1 << 16);
	tileops_close(c);
	close(sv[0]);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	daemon2_stop(&d);
}

Test(control_plane, connections_beyond_max_connections_are_refused)
{
	daemon2 d;
	daemon2_start(&d, "max_connections = 2\n");
	daemon2_use(&d);
	tileops_client *a = th_connect("first", 1 << 16), *b = th_connect("second", 1 << 16), *c;
	/* The third is told why, at once: not a connection closed under it,
	 * which would leave its connect waiting out its time-out. */
	tileops_connect_options o;
	memset(&o, 0, sizeof(o));
	o.address = getenv("TILEOPS_ADDRESS");
	o.arena_bytes = 1 << 16;
	o.timeout_ms = TH_TIMEOUT_MS;
	o.name = "third";
	int64_t t0 = th_now_ms();
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_BUSY,
	             "a third connection with max_connections = 2: %s", tileops_last_error());
	cr_assert_lt(th_now_ms() - t0, TH_TIMEOUT_MS / 2, "the refusal took %lld ms",
	             (long long)(th_now_ms() - t0));
	cr_assert_not_null(strstr(tileops_last_error(), "max_connections"),
	                   "the refusal does not name the setting: %s", tileops_last_error());
	tileops_close(a);
	/* A freed place is taken again, once the daemon has seen it go. */
	tileops_status st = TILEOPS_ERR_BUSY;
	for (int i = 0; i < 100 && st == TILEOPS_ERR_BUSY; i++) {
		o.name = "third again";
		st = tileops_connect_opts(&o, &c);
		if (st != TILEOPS_OK)
			th_sleep_ms(20);
	}
	cr_assert_eq(st, TILEOPS_OK, "no connection after one closed: %s", tileops_last_error());
	tileops_close(c);
	tileops_close(b);
	daemon2_stop(&d);
}

/* Open descriptors of process pid. */
static int open_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	cr_assert_not_null(d, "cannot read %s", path);
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Connections beyond the cap that never send a request are kept only a few
 * at a time: they cannot use up the daemon's descriptors, and whoever
 * connects once they have had their time is still told why. */
Test(control_plane, idle_connections_beyond_the_cap_are_bounded)
{
	daemon2 d;
	daemon2_start(&d, "max_connections = 1\n");
	daemon2_use(&d);
	tileops_client *a = th_connect("first", 1 << 16);
	int fds = open_fds(d.pid);
	/* Dialers that wait a minute before coming back once closed: each comes
	 * once within the test. */
	enum { IDLE = 40 };
	nng_socket idle[IDLE];
	for (int i = 0; i < IDLE; i++) {
		cr_assert_eq(nng_req0_open(&idle[i]), 0);
		nng_socket_set_ms(idle[i], NNG_OPT_RECONNMINT, 60000);
		nng_socket_set_ms(idle[i], NNG_OPT_RECONNMAXT, 60000);
		cr_assert_eq(nng_dial(idle[i], th_address(), NULL, 0), 0);
	}
	/* Past the grace the idle ones had to send something. */
	th_sleep_ms(1500);
	int held = open_fds(d.pid) - fds;
	cr_assert_leq(held, IDLE / 2, "%d idle connections beyond the cap hold %d descriptors",
	              IDLE, held);
	tileops_client *c;
	tileops_connect_options o;
	memset(&o, 0, sizeof(o));
	o.address = getenv("TILEOPS_ADDRESS");
	o.arena_bytes = 1 << 16;
	o.timeout_ms = TH_TIMEOUT_MS;
	o.name = "late";
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_BUSY, "a late connection: %s",
	             tileops_last_error());
	/* The daemon still serves the one that holds the place. */
	const int64_t shape[] = { 4 };
	tileops_tensor t;
	cr_assert_eq(tileops_tensor_create(a, TILEOPS_F32, 1, shape, &t), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(tileops_tensor_free(a, t), TILEOPS_OK);
	for (int i = 0; i < IDLE; i++)
		nng_close(idle[i]);
	tileops_close(a);
	daemon2_stop(&d);
}
