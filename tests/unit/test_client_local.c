/*
 * test_client_local.c - libtileops without a real daemon.
 *
 * The first tests need nothing at all. The rest talk to a scripted stand-in
 * for tileopsd that runs in this process: an nng REP socket on a private
 * ipc path that records every request and answers as each test tells it.
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
#include <sys/stat.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

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

Test(client_local, default_address_uses_xdg_runtime_dir_when_set)
{
	char buf[256];

	setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
	cr_assert_eq(tileops_default_address(buf, sizeof(buf)), TILEOPS_OK);
	cr_assert_str_eq(buf, "ipc:///run/user/1234/tileopsd/tileopsd.sock");
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

/* ---- a scripted stand-in for tileopsd ------------------------------------- */

#define FAKE_LOG_MAX 64

struct fake_req {
	uint64_t seq;
	int body; /* TILEOPS__REQUEST__BODY_* */
	uint64_t handle;
	uint64_t tensor_offset, arena_offset, length;
	char op[32];
	unsigned char first_byte; /* of the arena piece, for writes */
};

struct fake {
	nng_socket sock;
	char address[128];
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct fake_req log[FAKE_LOG_MAX];
	int n_log;
	/* Behaviour, set by the test before the client acts. */
	uint64_t max_message_bytes;
	int op_status;          /* status for OpRun */
	const char *op_message; /* message for OpRun */
	int hang_ops;           /* hold the answer to OpRun until fake_release */
	nng_msg *held;          /* that answer */
	/* The client's arena, mapped at Hello. */
	unsigned char *arena;
	size_t arena_bytes;
	int arena_existed_at_hello;
	char arena_name[64];
	unsigned char read_fill; /* byte pattern base for TensorRead pieces */
	unsigned char *written;  /* bytes received by TensorWrite, in tensor order */
	size_t written_cap;
};

static void fake_record(struct fake *f, const Tileops__Request *req)
{
	struct fake_req *r;

	pthread_mutex_lock(&f->mu);
	if (f->n_log < FAKE_LOG_MAX) {
		r = &f->log[f->n_log++];
		memset(r, 0, sizeof(*r));
		r->seq = req->seq;
		r->body = (int)req->body_case;
		if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_WRITE) {
			r->handle = req->tensor_write->handle;
			r->tensor_offset = req->tensor_write->tensor_offset;
			r->arena_offset = req->tensor_write->arena_offset;
			r->length = req->tensor_write->length;
		} else if (req->body_case == TILEOPS__REQUEST__BODY_TENSOR_READ) {
			r->handle = req->tensor_read->handle;
			r->tensor_offset = req->tensor_read->tensor_offset;
			r->arena_offset = req->tensor_read->arena_offset;
			r->length = req->tensor_read->length;
		} else if (req->body_case == TILEOPS__REQUEST__BODY_OP_RUN) {
			snprintf(r->op, sizeof(r->op), "%s", req->op_run->op);
		}
	}
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

static void fake_hello(struct fake *f, const Tileops__Hello *h, Tileops__Reply *rep,
                       Tileops__HelloReply *hr)
{
	int fd = shm_open(h->arena_name, O_RDWR, 0);

	snprintf(f->arena_name, sizeof(f->arena_name), "%s", h->arena_name);
	f->arena_existed_at_hello = fd >= 0;
	if (fd >= 0) {
		f->arena_bytes = h->arena_bytes;
		f->arena = mmap(NULL, h->arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	}
	hr->protocol_version = 1;
	hr->daemon_version = "0.1.0-fake";
	hr->backend = "cpu";
	hr->device = "fake device";
	hr->session_id = 42;
	hr->max_message_bytes = f->max_message_bytes;
	rep->body_case = TILEOPS__REPLY__BODY_HELLO;
	rep->hello = hr;
}

/* Act on one request; returns 0 when no reply should be sent. */
static int fake_answer(struct fake *f, const Tileops__Request *req, Tileops__Reply *rep,
                       Tileops__HelloReply *hr, Tileops__TensorCreateReply *cr)
{
	size_t i;

	rep->seq = req->seq;
	switch (req->body_case) {
	case TILEOPS__REQUEST__BODY_HELLO:
		fake_hello(f, req->hello, rep, hr);
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_CREATE:
		cr->handle = 7;
		rep->body_case = TILEOPS__REPLY__BODY_TENSOR_CREATE;
		rep->tensor_create = cr;
		break;
	case TILEOPS__REQUEST__BODY_TENSOR_WRITE: {
		const Tileops__TensorWrite *w = req->tensor_write;

		if (f->written != NULL && w->tensor_offset + w->length <= f->written_cap)
			memcpy(f->written + w->tensor_offset, f->arena + w->arena_offset,
			       w->length);
		break;
	}
	case TILEOPS__REQUEST__BODY_TENSOR_READ: {
		const Tileops__TensorRead *r = req->tensor_read;

		for (i = 0; i < r->length; i++)
			f->arena[r->arena_offset + i] =
			        (unsigned char)(f->read_fill + r->tensor_offset + i);
		break;
	}
	case TILEOPS__REQUEST__BODY_OP_RUN:
		rep->status = (Tileops__Status)f->op_status;
		rep->message = (char *)(f->op_message != NULL ? f->op_message : "");
		return !f->hang_ops;
	default:
		break;
	}
	return 1;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	nng_msg *msg;

	while (nng_recvmsg(f->sock, &msg, 0) == 0) {
		Tileops__Request *req =
		        tileops__request__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
		Tileops__Reply rep = TILEOPS__REPLY__INIT;
		Tileops__HelloReply hr = TILEOPS__HELLO_REPLY__INIT;
		Tileops__TensorCreateReply cr = TILEOPS__TENSOR_CREATE_REPLY__INIT;
		nng_msg *out;
		int answer;

		nng_msg_free(msg);
		if (req == NULL)
			continue;
		answer = fake_answer(f, req, &rep, &hr, &cr);
		nng_msg_alloc(&out, tileops__reply__get_packed_size(&rep));
		tileops__reply__pack(&rep, nng_msg_body(out));
		if (!answer) {
			pthread_mutex_lock(&f->mu);
			if (f->held != NULL)
				nng_msg_free(f->held);
			f->held = out;
			pthread_mutex_unlock(&f->mu);
			out = NULL;
		}
		/* Recorded once the arena holds what the request asked for. */
		fake_record(f, req);
		if (out != NULL && nng_sendmsg(f->sock, out, 0) != 0)
			nng_msg_free(out);
		tileops__request__free_unpacked(req, NULL);
	}
	return NULL;
}

static struct fake fake;

static void fake_start(void)
{
	memset(&fake, 0, sizeof(fake));
	pthread_mutex_init(&fake.mu, NULL);
	pthread_cond_init(&fake.cv, NULL);
	fake.max_message_bytes = 1 << 20;
	snprintf(fake.address, sizeof(fake.address), "ipc:///tmp/tileops-test-fake-%ld.sock",
	         (long)getpid());
	cr_assert_eq(nng_rep0_open(&fake.sock), 0);
	cr_assert_eq(nng_listen(fake.sock, fake.address, NULL, 0), 0);
	pthread_create(&fake.thread, NULL, fake_main, &fake);
}

static void fake_stop(void)
{
	nng_close(fake.sock);
	pthread_join(fake.thread, NULL);
	if (fake.arena != NULL)
		munmap(fake.arena, fake.arena_bytes);
	free(fake.written);
	if (fake.held != NULL)
		nng_msg_free(fake.held);
}

/* Send the answer held back by hang_ops. */
static void fake_release(void)
{
	nng_msg *m;

	pthread_mutex_lock(&fake.mu);
	m = fake.held;
	fake.held = NULL;
	pthread_mutex_unlock(&fake.mu);
	cr_assert_not_null(m);
	cr_assert_eq(nng_sendmsg(fake.sock, m, 0), 0);
}

/* Wait until the fake has seen `n` requests. */
static void fake_wait_for(int n)
{
	pthread_mutex_lock(&fake.mu);
	while (fake.n_log < n)
		pthread_cond_wait(&fake.cv, &fake.mu);
	pthread_mutex_unlock(&fake.mu);
}

static int fake_count(void)
{
	int n;

	pthread_mutex_lock(&fake.mu);
	n = fake.n_log;
	pthread_mutex_unlock(&fake.mu);
	return n;
}

static tileops_client *fake_connect(size_t arena_bytes, int timeout_ms)
{
	tileops_connect_options o;
	tileops_client *c = NULL;

	memset(&o, 0, sizeof(o));
	o.address = fake.address;
	o.arena_bytes = arena_bytes;
	o.timeout_ms = timeout_ms;
	o.name = "unit-test";
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_OK, "connect: %s", tileops_last_error());
	return c;
}

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
	cr_assert_eq(fake.arena_bytes, 8192);
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
		cr_assert_eq(fake.log[i].arena_offset, 0);
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
