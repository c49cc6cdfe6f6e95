/*
 * test_client_local.c - libtileops without a real daemon.
 *
 * The first tests need nothing at all. The rest talk to a scripted stand-in
 * for tileopsd that runs in this process (fake_daemon.c): an nng REP socket
 * on a private ipc path that records every request and answers as each test
 * tells it. It does not serve rings here, so every request goes over nng;
 * test_client_rings.c covers the rings.
 * That pins down the wire behaviour the daemon relies on (seq order, the
 * arena, nothing sent for a bad argument) and what the library does when
 * the daemon errs, stalls or goes away.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "fake_daemon.h"
#include "tileops.h"
#include "tileops.pb-c.h"

/* ---- no daemon ------------------------------------------------------------ */

Test(client_local, strerror_names_every_status_and_tolerates_unknown_codes)
{
	int i, j;

	for (i = TILEOPS_OK; i <= TILEOPS_IN_PROGRESS; i++) {
		const char *s = tileops_strerror(i);

		cr_assert_not_null(s);
		cr_assert_str_neq(s, "unknown status", "status %d has no text", i);
		for (j = TILEOPS_OK; j < i; j++)
			cr_assert_str_neq(s, tileops_strerror(j), "statuses %d and %d share text",
			                  i, j);
	}
	cr_assert_str_eq(tileops_strerror(-1), "unknown status");
	cr_assert_str_eq(tileops_strerror(TILEOPS_IN_PROGRESS + 1), "unknown status");
}

Test(client_local, dtype_helpers_give_sizes_and_names)
{
	cr_assert_eq(tileops_dtype_size(TILEOPS_F32), 4);
	cr_assert_eq(tileops_dtype_size(TILEOPS_F16), 2);
	cr_assert_eq(tileops_dtype_size(TILEOPS_BF16), 2);
	cr_assert_eq(tileops_dtype_size(TILEOPS_I32), 4);
	cr_assert_eq(tileops_dtype_size(TILEOPS_I64), 8);
	cr_assert_eq(tileops_dtype_size(TILEOPS_U8), 1);
	cr_assert_eq(tileops_dtype_size(TILEOPS_FP8_E4M3), 1);
	cr_assert_eq(tileops_dtype_size((tileops_dtype)0), 0);
	cr_assert_eq(tileops_dtype_size((tileops_dtype)99), 0);
	cr_assert_str_eq(tileops_dtype_name(TILEOPS_BF16), "bf16");
	cr_assert_str_eq(tileops_dtype_name(TILEOPS_F32), "f32");
	cr_assert_str_eq(tileops_dtype_name((tileops_dtype)-3), "invalid");
}

Test(client_local, default_address_uses_xdg_runtime_dir_when_its_socket_exists)
{
	char dir[] = "/tmp/tileops-xdg-XXXXXX", sockdir[64], sock[96], want[128], buf[256];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(sockdir, sizeof(sockdir), "%s/tileopsd", dir);
	snprintf(sock, sizeof(sock), "%s/tileopsd.sock", sockdir);
	cr_assert_eq(mkdir(sockdir, 0700), 0);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	/* No user daemon there: the system daemon's socket. */
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_str_eq(buf, "ipc:///run/tileopsd/tileopsd.sock");
	/* A user daemon's socket: that one. */
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_OK);
	snprintf(want, sizeof(want), "ipc://%s", sock);
	cr_assert_str_eq(buf, want);
	close(fd);
	unlink(sock);
	rmdir(sockdir);
	rmdir(dir);
}

Test(client_local, default_address_falls_back_to_run_when_xdg_unset_or_empty)
{
	char buf[256];

	unsetenv("XDG_RUNTIME_DIR");
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_str_eq(buf, "ipc:///run/tileopsd/tileopsd.sock");
	setenv("XDG_RUNTIME_DIR", "", 1);
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_str_eq(buf, "ipc:///run/tileopsd/tileopsd.sock");
}

Test(client_local, default_address_refuses_a_short_buffer)
{
	char buf[8];

	unsetenv("XDG_RUNTIME_DIR");
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "too small"));
	cr_assert_eq(tileops_default_address(NULL, 10), TILEOPS_ERR_INVALID_ARGUMENT);
}

Test(client_local, connect_to_missing_socket_fails_with_connect_naming_the_address)
{
	tileops_client *c = (tileops_client *)&c;

	cr_assert_eq(tileops_connect("ipc:///tmp/tileops-test-no-such-daemon.sock", &c),
	             TILEOPS_ERR_CONNECT);
	cr_assert_null(c);
	cr_assert_not_null(strstr(tileops_last_error(), "/tmp/tileops-test-no-such-daemon.sock"),
	                   "message: %s", tileops_last_error());
}

Test(client_local, connect_without_address_uses_tileops_address_from_environment)
{
	tileops_client *c = NULL;

	setenv("TILEOPS_ADDRESS", "ipc:///tmp/tileops-test-env-daemon.sock", 1);
	cr_assert_eq(tileops_connect(NULL, &c), TILEOPS_ERR_CONNECT);
	cr_assert_not_null(strstr(tileops_last_error(), "tileops-test-env-daemon.sock"),
	                   "message: %s", tileops_last_error());
}

Test(client_local, calls_on_a_null_client_fail_with_invalid_argument)
{
	int64_t shape[1] = { 4 };
	tileops_tensor t;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };
	tileops_completion *cp = (tileops_completion *)&cp;
	char buf[4];
	tileops_server_info info;

	cr_assert_eq(tileops_tensor_create(NULL, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "client is NULL"));
	cr_assert_eq(tileops_tensor_free(NULL, 1), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_write(NULL, 1, 0, buf, 4), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_read(NULL, 1, 0, buf, 4), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_op_run(NULL, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_op_submit(NULL, &op, &cp), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_null(cp);
	cr_assert_eq(tileops_sync(NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_server_info_get(NULL, &info), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_completion_wait(NULL, -1), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_connect_opts(NULL, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	/* Freeing nothing is a no-op. */
	tileops_close(NULL);
	tileops_completion_free(NULL);
}

static void *last_error_of_new_thread(void *arg)
{
	return (void *)tileops_last_error();
}

Test(client_local, last_error_is_per_thread)
{
	pthread_t th;
	void *res;

	tileops_sync(NULL);
	cr_assert_str_neq(tileops_last_error(), "");
	pthread_create(&th, NULL, last_error_of_new_thread, NULL);
	pthread_join(th, &res);
	cr_assert_str_eq((const char *)res, "");
}

/* ---- against the stand-in -------------------------------------------------- */

TestSuite(client_fake, .init = fake_start, .fini = fake_stop);

Test(client_fake, connect_says_hello_with_seq_0_and_shares_an_arena_then_unlinks_it)
{
	tileops_client *c = fake_connect(8192, 0);
	tileops_server_info info;
	int fd;

	cr_assert_eq(fake_count(), 1);
	cr_assert_eq(fake.log[0].body, TILEOPS__REQUEST__BODY_HELLO);
	cr_assert_eq(fake.log[0].seq, 0);
	cr_assert(fake.arena_existed_at_hello, "arena %s was not there at Hello", fake.arena_name);
	/* The ring region comes first; the data area has the size asked for. */
	cr_assert(fake.hello_rings, "Hello did not offer rings");
	cr_assert_eq(fake.arena_bytes, ((tileops_ring_header *)fake.arena)->data_offset + 8192);
	cr_assert_eq(strncmp(fake.arena_name, "/tileops-", 9), 0, "name %s", fake.arena_name);
	fd = shm_open(fake.arena_name, O_RDWR, 0);
	cr_assert_lt(fd, 0, "arena name still linked after connect");

	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	cr_assert_str_eq(info.backend, "cpu");
	cr_assert_str_eq(info.device, "fake device");
	cr_assert_str_eq(info.daemon_version, "0.1.0-fake");
	cr_assert_eq(info.session_id, 42);
	cr_assert_eq(info.protocol_version, 1);
	tileops_close(c);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

Test(client_fake, an_unanswered_hello_is_tried_again_on_a_new_connection, .timeout = 30)
{
	struct timespec t0;

	/* The first Hello gets no answer (as one sent on a pipe the daemon never took in):
	 * connect gives it 5 s, then says Hello again on a connection of its own. */
	fake.hello_silent = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	tileops_client *c = fake_connect(0, 0);
	double s = seconds_since(&t0);
	cr_assert_eq(fake.n_hellos, 2, "%d Hellos", fake.n_hellos);
	cr_assert_neq(fake.hello_pipe[0], fake.hello_pipe[1],
	              "the second Hello came on pipe %u too", fake.hello_pipe[1]);
	cr_assert(s >= 4.9 && s < 15.0, "connect took %.2f s", s);
	tileops_close(c);
}

Test(client_fake, connect_gives_up_at_its_timeout_when_no_hello_is_answered, .timeout = 30)
{
	tileops_connect_options o;
	tileops_client *c = NULL;
	struct timespec t0;

	fake.hello_silent = 1000;
	memset(&o, 0, sizeof(o));
	o.address = fake.address;
	o.timeout_ms = 8000;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_TIMEOUT);
	double s = seconds_since(&t0);
	cr_assert_null(c);
	cr_assert(s >= 7.9 && s < 12.0, "gave up after %.2f s", s);
	/* 5 s, then the 3 s left: two connections, each with its own Hello. */
	cr_assert_eq(fake.n_hellos, 2, "%d Hellos", fake.n_hellos);
	cr_assert_neq(fake.hello_pipe[0], fake.hello_pipe[1]);
	cr_assert(strstr(tileops_last_error(), "did not answer Hello within 8000 ms") != NULL, "%s",
	          tileops_last_error());
}

Test(client_fake, requests_carry_consecutive_seqs_and_close_says_goodbye)
{
	tileops_client *c = fake_connect(0, 0);
	int64_t shape[2] = { 2, 3 };
	tileops_tensor t = 0;

	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 2, shape, &t), TILEOPS_OK);
	cr_assert_eq(t, 7);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_free(c, t), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_free(c, 0), TILEOPS_OK); /* no-op, nothing sent */
	tileops_close(c);
	fake_wait_for(5);
	cr_assert_eq(fake.log[1].body, TILEOPS__REQUEST__BODY_TENSOR_CREATE);
	cr_assert_eq(fake.log[2].body, TILEOPS__REQUEST__BODY_SYNC);
	cr_assert_eq(fake.log[3].body, TILEOPS__REQUEST__BODY_TENSOR_FREE);
	cr_assert_eq(fake.log[4].body, TILEOPS__REQUEST__BODY_GOODBYE);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(fake.log[i].seq, (uint64_t)i);
}

Test(client_fake, bad_arguments_fail_locally_without_sending_or_using_a_seq)
{
	tileops_client *c = fake_connect(0, 0);
	int64_t shape[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	int64_t neg[2] = { 2, -1 };
	tileops_tensor t = 0, many[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	tileops_param params[17];
	tileops_param bad_kind = tileops_param_int("k", 1);
	tileops_param no_name = tileops_param_int("", 1);
	tileops_op op = { "add", many, 9, many, 1, NULL, 0 };

	for (int i = 0; i < 17; i++)
		params[i] = tileops_param_int("p", i);
	bad_kind.kind = (tileops_param_kind)9;
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 9, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "ndim"));
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 2, neg, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_create(c, (tileops_dtype)0, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 1, NULL, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT); /* 9 inputs */
	op.n_inputs = 2;
	op.n_outputs = 5;
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	op.n_outputs = 1;
	op.params = params;
	op.n_params = 17;
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	op.params = &bad_kind;
	op.n_params = 1;
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_not_null(strstr(tileops_last_error(), "kind"));
	op.params = &no_name;
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	op.n_params = 0;
	op.name = "";
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_write(c, 7, 0, NULL, 4), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_tensor_write(c, 7, 0, NULL, 0), TILEOPS_OK);
	cr_assert_eq(fake_count(), 1, "a bad argument reached the daemon");

	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.log[1].seq, 1);
	tileops_close(c);
}

Test(client_fake, a_request_over_the_daemon_size_cap_is_refused_with_both_sizes)
{
	char name[200];
	tileops_client *c;
	tileops_op op = { name, NULL, 0, NULL, 0, NULL, 0 };

	fake.max_message_bytes = 64;
	c = fake_connect(0, 0);
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_TOO_LARGE);
	cr_assert_not_null(strstr(tileops_last_error(), "64"), "%s", tileops_last_error());
	cr_assert_eq(fake_count(), 1);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_eq(fake.log[1].seq, 1, "the refused request used up a seq");
	tileops_close(c);
}

Test(client_fake, daemon_status_and_message_come_back_to_the_caller)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_tensor in[2] = { 7, 7 }, out = 7;
	tileops_op op = { "rms_norm", in, 2, &out, 1, NULL, 0 };

	fake.op_status = TILEOPS_ERR_SHAPE;
	fake.op_message = "rms_norm: weight has shape [4095], expected [4096]";
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_SHAPE);
	cr_assert_str_eq(tileops_last_error(), fake.op_message);
	tileops_close(c);
}

Test(client_fake, writes_larger_than_the_arena_go_in_arena_sized_pieces)
{
	tileops_client *c = fake_connect(4096, 0);
	unsigned char data[10000];
	size_t i;

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + 3);
	fake.written_cap = 100 + sizeof(data);
	fake.written = calloc(1, fake.written_cap);
	cr_assert_eq(tileops_tensor_write(c, 7, 100, data, sizeof(data)), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(fake_count(), 4);
	for (i = 1; i < 4; i++) {
		cr_assert_eq(fake.log[i].body, TILEOPS__REQUEST__BODY_TENSOR_WRITE);
		cr_assert_eq(fake.log[i].handle, 7);
		/* Past the rings, which the daemon did not take: the layout is fixed. */
		cr_assert_eq(fake.log[i].arena_offset,
		             ((tileops_ring_header *)fake.arena)->data_offset);
		cr_assert_eq(fake.log[i].tensor_offset, 100 + (i - 1) * 4096);
		cr_assert_eq(fake.log[i].length, i < 3 ? 4096 : 10000 - 2 * 4096);
	}
	cr_assert_eq(memcmp(fake.written + 100, data, sizeof(data)), 0);
	tileops_close(c);
}

Test(client_fake, reads_copy_each_piece_out_of_the_arena)
{
	tileops_client *c = fake_connect(4096, 0);
	unsigned char got[9000];
	size_t i;

	fake.read_fill = 5;
	cr_assert_eq(tileops_tensor_read(c, 7, 16, got, sizeof(got)), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(fake_count(), 4);
	for (i = 0; i < sizeof(got); i++)
		cr_assert_eq(got[i], (unsigned char)(5 + 16 + i), "byte %zu", i);
	tileops_close(c);
}

Test(client_fake, submit_reports_in_progress_until_the_reply_arrives)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_completion *cp = NULL;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };

	fake.hang_ops = 1;
	cr_assert_eq(tileops_op_submit(c, &op, &cp), TILEOPS_OK);
	cr_assert_not_null(cp);
	fake_wait_for(2);
	cr_assert_eq(tileops_completion_poll(cp), TILEOPS_IN_PROGRESS);
	cr_assert_eq(tileops_completion_wait(cp, 50), TILEOPS_IN_PROGRESS);
	fake_release();
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK);
	cr_assert_eq(tileops_completion_poll(cp), TILEOPS_OK,
	             "a second wait gives the same status");
	tileops_completion_free(cp);
	tileops_close(c);
}

Test(client_fake, a_reply_that_does_not_come_in_time_is_a_timeout)
{
	tileops_client *c = fake_connect(0, 100);
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };

	fake.hang_ops = 1;
	cr_assert_eq(tileops_op_run(c, &op), TILEOPS_ERR_TIMEOUT);
	cr_assert_not_null(strstr(tileops_last_error(), "100 ms"), "%s", tileops_last_error());
	tileops_close(c);
}

Test(client_fake, losing_the_daemon_fails_pending_and_later_calls_with_closed)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_completion *cp = NULL;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };
	int n;

	fake.hang_ops = 1;
	cr_assert_eq(tileops_op_submit(c, &op, &cp), TILEOPS_OK);
	fake_wait_for(2);
	nng_close(fake.sock); /* the daemon goes away */
	cr_assert_eq(tileops_completion_wait(cp, 5000), TILEOPS_ERR_CLOSED);
	cr_assert_str_eq(tileops_last_error(), "connection to tileopsd lost");
	tileops_completion_free(cp);
	n = fake_count();
	cr_assert_eq(tileops_sync(c), TILEOPS_ERR_CLOSED);
	cr_assert_eq(fake_count(), n);
	tileops_close(c);
}

Test(client_fake, completions_outlive_close_and_report_closed)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_completion *cp = NULL;
	tileops_op op = { "add", NULL, 0, NULL, 0, NULL, 0 };

	fake.hang_ops = 1;
	cr_assert_eq(tileops_op_submit(c, &op, &cp), TILEOPS_OK);
	fake_wait_for(2);
	tileops_close(c);
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_ERR_CLOSED);
	cr_assert_eq(tileops_completion_wait(cp, 0), TILEOPS_ERR_CLOSED);
	tileops_completion_free(cp);
}
