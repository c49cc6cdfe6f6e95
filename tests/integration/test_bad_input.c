/*
 * test_bad_input.c - every malformed or hostile request gets a clear error
 * (the right status and a message naming the problem), and the daemon goes
 * on serving: each test ends by checking that a good request still works.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

/* A fresh client runs one add and checks it: the daemon still serves. */
static void expect_daemon_serving(void)
{
	tileops_client *c = th_connect("check", 0);
	const int64_t shape[] = { 3 };
	float a[3] = { 1.5f, -2, 4 }, got[3], want[3] = { 3, -4, 8 };
	tileops_tensor t = th_tensor_f32(c, 1, shape, a);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { t, t };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };

	th_run(c, &op);
	th_read(c, out, got, sizeof(got));
	th_expect_close_f32(got, want, 3, 0, 0, "add after bad input");
	tileops_close(c);
}

/* The status must be `want` and the message must contain `needle`. */
static void expect_error(tileops_status got, tileops_status want, const char *needle,
                         const char *what)
{
	const char *msg = tileops_last_error();

	cr_assert_eq(got, want, "%s: got %s (%s), expected %s", what, tileops_strerror(got), msg,
	             tileops_strerror(want));
	cr_assert(th_contains(msg, needle), "%s: the message \"%s\" does not mention \"%s\"", what,
	          msg, needle);
}

/* ---- through the public API ------------------------------------------- */

static tileops_client *client;

static void setup(void)
{
	client = th_connect("bad-input", 0);
}

static void teardown(void)
{
	tileops_close(client);
}

TestSuite(api, .init = setup, .fini = teardown, .timeout = 120);
/* A hang names its test instead of running into ctest's limit. */
TestSuite(raw, .timeout = 120);

static tileops_status run1(const char *name, tileops_tensor *in, size_t n_in, tileops_tensor out,
                           const tileops_param *p, size_t np)
{
	tileops_op op = { name, in, n_in, &out, 1, p, np };

	return tileops_op_run(client, &op);
}

Test(api, unknown_op_is_refused_by_name)
{
	const int64_t shape[] = { 4 };
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);

	expect_error(run1("no_such_op", &t, 1, t, NULL, 0), TILEOPS_ERR_UNKNOWN_OP, "no_such_op",
	             "unknown op");
	expect_daemon_serving();
}

Test(api, mixed_dtypes_are_refused_with_the_dtype_named)
{
	const int64_t shape[] = { 4 };
	tileops_tensor in[2] = { th_tensor(client, TILEOPS_F32, 1, shape),
		                 th_tensor(client, TILEOPS_I32, 1, shape) };
	tileops_tensor out = th_tensor(client, TILEOPS_F32, 1, shape);

	expect_error(run1("add", in, 2, out, NULL, 0), TILEOPS_ERR_DTYPE, "i32", "add f32 + i32");
	expect_daemon_serving();
}

Test(api, wrong_weight_shape_is_refused_with_the_shapes_named)
{
	const int64_t sx[] = { 4, 64 }, sw[] = { 63 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sx, NULL),
		                 th_tensor_f32(client, 1, sw, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sx, NULL);

	expect_error(run1("rms_norm", in, 2, out, NULL, 0), TILEOPS_ERR_SHAPE, "63",
	             "rms_norm with weight [63] for x [4, 64]");
	cr_assert(th_contains(tileops_last_error(), "rms_norm"), "message names no op: %s",
	          tileops_last_error());
	expect_daemon_serving();
}

Test(api, unbroadcastable_shapes_are_refused)
{
	const int64_t sa[] = { 3, 4 }, sb[] = { 5 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sa, NULL),
		                 th_tensor_f32(client, 1, sb, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sa, NULL);

	expect_error(run1("mul", in, 2, out, NULL, 0), TILEOPS_ERR_SHAPE, "mul", "mul [3,4] x [5]");
	expect_daemon_serving();
}

Test(api, unknown_param_is_refused_by_name)
{
	const int64_t shape[] = { 8 };
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor out = th_tensor_f32(client, 1, shape, NULL);
	tileops_param p = tileops_param_float("foo", 1.0);

	expect_error(run1("silu", &t, 1, out, &p, 1), TILEOPS_ERR_PARAM, "foo", "param foo");
	expect_daemon_serving();
}

Test(api, param_out_of_its_allowed_values_is_refused_by_name)
{
	const int64_t shape[] = { 8 };
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor out = th_tensor_f32(client, 1, shape, NULL);
	tileops_param p = tileops_param_int("approximate", 5);

	expect_error(run1("gelu", &t, 1, out, &p, 1), TILEOPS_ERR_PARAM, "approximate",
	             "gelu approximate=5");
	expect_daemon_serving();
}

Test(api, param_of_the_wrong_kind_is_refused_by_name)
{
	const int64_t sx[] = { 2, 8 }, sw[] = { 8 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sx, NULL),
		                 th_tensor_f32(client, 1, sw, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sx, NULL);
	tileops_param p = tileops_param_bool("eps", 1);

	expect_error(run1("rms_norm", in, 2, out, &p, 1), TILEOPS_ERR_PARAM, "eps",
	             "rms_norm eps given as a bool");
	expect_daemon_serving();
}

/*
 * The first op the manifest declares with "status: spec" (declared, no
 * kernel yet) and one input, read from the YAML files line by line. 0 if none.
 */
static int find_spec_op(char *name, size_t len)
{
	const char *dir = getenv("TILEOPS_MANIFEST");
	char path[512], line[512], op[128] = "";
	struct dirent *e;
	DIR *d = dir ? opendir(dir) : NULL;
	int found = 0;

	while (d && !found && (e = readdir(d)) != NULL) {
		FILE *f;

		if (!strstr(e->d_name, ".yaml"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "r");
		while (f && !found && fgets(line, sizeof(line), f)) {
			if (sscanf(line, "  - name: %127s", op) == 1)
				continue;
			if (op[0] && strncmp(line, "    status: spec", 16) == 0) {
				snprintf(name, len, "%s", op);
				found = 1;
			}
		}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

Test(api, op_declared_but_not_implemented_is_unsupported)
{
	const int64_t shape[] = { 8 };
	tileops_tensor in[4], out[2];
	tileops_op op;
	char name[128];

	if (!find_spec_op(name, sizeof(name)))
		cr_skip_test("every op in the manifest is implemented");
	for (int i = 0; i < 4; i++)
		in[i] = th_tensor_f32(client, 1, shape, NULL);
	out[0] = th_tensor_f32(client, 1, shape, NULL);
	out[1] = th_tensor_f32(client, 1, shape, NULL);
	/* Whatever its arguments, an op without a kernel must say so by name. */
	op = (tileops_op){ name, in, 1, out, 1, NULL, 0 };
	tileops_status st = tileops_op_run(client, &op);
	while (st != TILEOPS_ERR_UNSUPPORTED && op.n_inputs < 4) {
		op.n_inputs++;
		st = tileops_op_run(client, &op);
	}
	expect_error(st, TILEOPS_ERR_UNSUPPORTED, name, "an op with status spec");
	expect_daemon_serving();
}

Test(api, gemm_with_mismatched_inner_dims_is_a_shape_error)
{
	const int64_t sa[] = { 4, 8 }, sb[] = { 9, 3 }, sc[] = { 4, 3 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sa, NULL),
		                 th_tensor_f32(client, 2, sb, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sc, NULL);

	expect_error(run1("gemm", in, 2, out, NULL, 0), TILEOPS_ERR_SHAPE, "gemm",
	             "gemm [4,8] x [9,3]");
	expect_daemon_serving();
}

Test(api, integer_tensors_are_refused_by_float_ops)
{
	const int64_t shape[] = { 8 };
	tileops_tensor t = th_tensor(client, TILEOPS_I64, 1, shape);
	tileops_tensor out = th_tensor(client, TILEOPS_I64, 1, shape);

	expect_error(run1("silu", &t, 1, out, NULL, 0), TILEOPS_ERR_DTYPE, "i64", "silu on i64");
	expect_daemon_serving();
}

Test(api, missing_input_is_refused)
{
	const int64_t shape[] = { 8 };
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor out = th_tensor_f32(client, 1, shape, NULL);
	tileops_status st = run1("add", &t, 1, out, NULL, 0);

	cr_assert_neq(st, TILEOPS_OK, "add with one input was accepted");
	cr_assert(th_contains(tileops_last_error(), "add"), "message names no op: %s",
	          tileops_last_error());
	expect_daemon_serving();
}

Test(api, another_sessions_handle_is_unknown_here)
{
	tileops_client *other = th_connect("owner", 0);
	const int64_t shape[] = { 4 };
	float buf[4];
	tileops_tensor theirs = th_tensor_f32(other, 1, shape, NULL);
	tileops_tensor mine = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor in[2] = { theirs, theirs };

	expect_error(tileops_tensor_read(client, theirs, 0, buf, sizeof(buf)),
	             TILEOPS_ERR_UNKNOWN_HANDLE, "handle", "read of another session's tensor");
	expect_error(tileops_tensor_write(client, theirs, 0, buf, sizeof(buf)),
	             TILEOPS_ERR_UNKNOWN_HANDLE, "handle", "write to another session's tensor");
	expect_error(run1("add", in, 2, mine, NULL, 0), TILEOPS_ERR_UNKNOWN_HANDLE, "handle",
	             "op over another session's tensor");
	expect_error(tileops_tensor_free(client, theirs), TILEOPS_ERR_UNKNOWN_HANDLE, "handle",
	             "free of another session's tensor");
	/* The owner's tensor is untouched and still usable. */
	th_read(other, theirs, buf, sizeof(buf));
	tileops_close(other);
	expect_daemon_serving();
}

Test(api, write_past_the_end_of_a_tensor_is_a_range_error)
{
	const int64_t shape[] = { 4 };
	float buf[8] = { 0 };
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);

	expect_error(tileops_tensor_write(client, t, 4, buf, 16), TILEOPS_ERR_RANGE, "",
	             "write of bytes 4..20 into a 16-byte tensor");
	expect_error(tileops_tensor_read(client, t, 0, buf, 32), TILEOPS_ERR_RANGE, "",
	             "read of 32 bytes from a 16-byte tensor");
	expect_daemon_serving();
}

Test(api, bad_create_arguments_are_refused)
{
	const int64_t neg[] = { 4, -1 };
	int64_t nine[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
	tileops_tensor t = 0;

	cr_assert_neq(tileops_tensor_create(client, TILEOPS_F32, 2, neg, &t), TILEOPS_OK,
	              "a negative extent was accepted");
	cr_assert_neq(tileops_tensor_create(client, TILEOPS_F32, 9, nine, &t), TILEOPS_OK,
	              "ndim 9 was accepted");
	cr_assert_neq(tileops_tensor_create(client, (tileops_dtype)42, 1, nine, &t), TILEOPS_OK,
	              "dtype 42 was accepted");
	cr_assert_eq(t, 0, "a refused create wrote a handle");
	expect_daemon_serving();
}

Test(api, request_over_the_size_cap_is_too_large_and_nothing_is_sent)
{
	const int64_t shape[] = { 4 };
	tileops_server_info info;
	tileops_tensor t = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor out = th_tensor_f32(client, 1, shape, NULL);
	size_t len;
	char *name;
	tileops_param p;

	cr_assert_eq(tileops_server_info_get(client, &info), TILEOPS_OK);
	len = (size_t)info.max_message_bytes + 1024;
	name = malloc(len + 1);
	cr_assert(name);
	memset(name, 'p', len);
	name[len] = '\0';
	p = tileops_param_float(name, 1.0);
	expect_error(run1("silu", &t, 1, out, &p, 1), TILEOPS_ERR_TOO_LARGE, "", "huge param name");
	free(name);
	/* The same client carries on. */
	cr_assert_eq(run1("silu", &t, 1, out, NULL, 0), TILEOPS_OK, "%s", tileops_last_error());
	expect_daemon_serving();
}

/* ---- raw protocol ----------------------------------------------------- */

static void expect_reply(Tileops__Reply *rep, int want, const char *needle, const char *what)
{
	cr_assert(rep != NULL, "%s: no reply within %d ms", what, TH_TIMEOUT_MS);
	cr_assert_eq((int)rep->status, want, "%s: status %d (%s), expected %d", what,
	             (int)rep->status, rep->message, want);
	cr_assert(th_contains(rep->message, needle),
	          "%s: the message \"%s\" does not mention \"%s\"", what, rep->message, needle);
	tileops__reply__free_unpacked(rep, NULL);
}

Test(raw, request_without_hello_gets_no_session)
{
	th_raw r;
	const int64_t shape[] = { 4 };

	th_raw_open(&r);
	r.seq = 1;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_NO_SESSION, "", "TensorCreate before Hello");
	/* The connection is still usable for a proper Hello. */
	th_raw_hello(&r, 1 << 16);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, garbage_bytes_get_a_protocol_error)
{
	th_raw r;
	unsigned char junk[1000];
	th_rng rng = th_rng_seed(99);
	Tileops__Reply *rep;

	th_raw_open(&r);
	th_fill_bytes(&rng, junk, sizeof(junk));
	junk[0] = 0xff; /* field 31, wire type 7: never valid */
	rep = th_raw_send_bytes(&r, junk, sizeof(junk), TH_TIMEOUT_MS);
	cr_assert(rep != NULL, "no reply to garbage");
	cr_assert_eq(rep->seq, 0u);
	expect_reply(rep, TILEOPS__STATUS__STATUS_PROTOCOL, "", "1000 random bytes");
	th_raw_hello(&r, 1 << 16);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, truncated_request_gets_a_protocol_error)
{
	th_raw r;
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello h = TILEOPS__HELLO__INIT;
	size_t len;
	uint8_t *buf;

	th_raw_open(&r);
	h.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.client_name = "a client name long enough to cut in the middle";
	h.arena_name = "/tileops-test-never-created";
	h.arena_bytes = 1 << 16;
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &h;
	buf = th_raw_pack(&r, &req, &len);
	cr_assert(len > 20);
	expect_reply(th_raw_send_bytes(&r, buf, len / 2, TH_TIMEOUT_MS),
	             TILEOPS__STATUS__STATUS_PROTOCOL, "", "a Hello cut in half");
	free(buf);
	th_raw_close(&r);
	expect_daemon_serving();
}

/*
 * A plain Unix socket speaking nng's IPC framing (an 8-byte SP header naming
 * REQ0, then 0x01, a 64-bit big-endian length and the payload): what is sent
 * and what comes back are this test's own, so a close of the connection by
 * the daemon is seen as the EOF it is.
 */
static int sp_ipc_connect(void)
{
	const char *addr = th_address();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const unsigned char hdr[8] = { 0, 'S', 'P', 0, 0, 48, 0, 0 }; /* REQ0 is 48 */
	unsigned char peer[8];
	int fd;

	cr_assert(strncmp(addr, "ipc://", 6) == 0, "the test daemon listens on %s", addr);
	cr_assert_lt(strlen(addr + 6), sizeof(sa.sun_path));
	strcpy(sa.sun_path, addr + 6);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(fd >= 0, "socket: %s", strerror(errno));
	cr_assert(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", addr,
	          strerror(errno));
	cr_assert_eq(send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL), (ssize_t)sizeof(hdr));
	cr_assert_eq(recv(fd, peer, sizeof(peer), MSG_WAITALL), (ssize_t)sizeof(peer),
	             "no SP header from the daemon");
	cr_assert(peer[1] == 'S' && peer[2] == 'P' && peer[5] == 49,
	          "the daemon's SP header does not name REP0");
	return fd;
}

/* Reads until EOF or `ms` pass: 1 on EOF (the daemon closed), 0 otherwise. */
static int sp_ipc_closed_within(int fd, int ms)
{
	int64_t deadline = th_now_ms() + ms;
	unsigned char buf[256];

	while (th_now_ms() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		cr_assert(n > 0, "read: %s", strerror(errno));
		cr_assert_fail("the daemon answered a message over the cap (%zd bytes)", n);
	}
	return 0;
}

Test(raw, message_over_the_cap_drops_only_that_connection)
{
	tileops_client *other = th_connect("bystander", 0);
	const int64_t shape[] = { 4 };
	tileops_tensor kept = th_tensor_f32(other, 1, shape, NULL);
	tileops_server_info info;
	uint64_t len;
	unsigned char frame[9 + 4] = { 1 };
	unsigned char *body;
	int fd;

	cr_assert_eq(tileops_server_info_get(other, &info), TILEOPS_OK);
	len = (uint64_t)info.max_message_bytes + (1u << 20);
	for (int i = 0; i < 8; i++)
		frame[1 + i] = (unsigned char)(len >> (56 - 8 * i));
	frame[9] = 0x80; /* a REQ request id, high bit set */
	fd = sp_ipc_connect();
	cr_assert_eq(send(fd, frame, sizeof(frame), MSG_NOSIGNAL), (ssize_t)sizeof(frame));
	/* Part of the payload: the daemon must not wait for (or buffer) the rest.
	 * It may have closed already (EPIPE, no SIGPIPE). */
	body = calloc(1, 64 << 10);
	cr_assert(body);
	(void)!send(fd, body, 64 << 10, MSG_NOSIGNAL);
	free(body);
	cr_assert(sp_ipc_closed_within(fd, TH_TIMEOUT_MS),
	          "the daemon kept a connection that announced %llu bytes (cap %llu)",
	          (unsigned long long)len, (unsigned long long)info.max_message_bytes);
	close(fd);
	/* The connection that stayed within the cap goes on, its tensor kept. */
	cr_assert_eq(tileops_sync(other), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_free(other, kept), TILEOPS_OK, "%s", tileops_last_error());
	tileops_close(other);
	expect_daemon_serving();
}

Test(raw, wrong_protocol_version_is_refused)
{
	th_raw r;
	char msg[512];
	int st;

	th_raw_open(&r);
	st = th_raw_hello_ex(&r, 999, 1 << 16, 1 << 16, msg, sizeof(msg));
	cr_assert_eq(st, TILEOPS__STATUS__STATUS_VERSION, "Hello version 999: status %d (%s)", st,
	             msg);
	cr_assert(th_contains(msg, "version"), "the message \"%s\" does not mention the version",
	          msg);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, hello_naming_a_missing_shm_object_is_refused)
{
	th_raw r;
	char msg[512];
	int st;

	th_raw_open(&r);
	st = th_raw_hello_ex(&r, TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT, 1 << 16, 0,
	                     msg, sizeof(msg));
	cr_assert_neq(st, TILEOPS__STATUS__STATUS_OK, "a Hello with a missing arena was accepted");
	/* Skip the leading '/': the daemon may print the name without it. */
	cr_assert(th_contains(msg, r.shm_name + 1), "the message \"%s\" does not name the arena %s",
	          msg, r.shm_name);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, hello_whose_shm_size_disagrees_is_refused)
{
	th_raw r;
	char msg[512];
	int st;

	th_raw_open(&r);
	st = th_raw_hello_ex(&r, TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT, 1 << 20,
	                     1 << 16, msg, sizeof(msg));
	cr_assert_neq(st, TILEOPS__STATUS__STATUS_OK,
	              "a Hello claiming 1 MiB over a 64 KiB shm object was accepted");
	cr_assert(th_contains(msg, r.shm_name + 1) || th_contains(msg, "size") ||
	                  th_contains(msg, "bytes"),
	          "the message \"%s\" says nothing of the arena or its size", msg);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, arena_and_tensor_ranges_are_checked)
{
	th_raw r;
	const int64_t shape[] = { 16 }; /* 64 bytes */
	const size_t arena = 1 << 16;
	Tileops__Reply *rep;
	uint64_t h;

	th_raw_open(&r);
	th_raw_hello(&r, arena);
	rep = th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape);
	cr_assert(rep && rep->status == TILEOPS__STATUS__STATUS_OK, "create failed");
	cr_assert_eq(rep->body_case, TILEOPS__REPLY__BODY_TENSOR_CREATE);
	h = rep->tensor_create->handle;
	cr_assert_eq(rep->tensor_create->nbytes, 64u);
	tileops__reply__free_unpacked(rep, NULL);

	expect_reply(th_raw_write(&r, h, 0, arena - 10, 64), TILEOPS__STATUS__STATUS_RANGE, "arena",
	             "write from past the arena's end");
	expect_reply(th_raw_read(&r, h, 0, arena, 1), TILEOPS__STATUS__STATUS_RANGE, "arena",
	             "read to the arena's end");
	expect_reply(th_raw_write(&r, h, 0, UINT64_MAX - 5, 10), TILEOPS__STATUS__STATUS_RANGE, "",
	             "arena offset that wraps around");
	expect_reply(th_raw_write(&r, h, 60, 0, 8), TILEOPS__STATUS__STATUS_RANGE, "",
	             "write past the tensor's end");
	expect_reply(th_raw_read(&r, h, 65, 0, 1), TILEOPS__STATUS__STATUS_RANGE, "",
	             "read from beyond the tensor");
	expect_reply(th_raw_read(&r, h, UINT64_MAX, 0, 2), TILEOPS__STATUS__STATUS_RANGE, "",
	             "tensor offset that wraps around");
	/* In range works on the same session. */
	memset(r.arena, 7, 64);
	expect_reply(th_raw_write(&r, h, 0, 0, 64), TILEOPS__STATUS__STATUS_OK, "", "good write");
	memset(r.arena, 0, 64);
	expect_reply(th_raw_read(&r, h, 0, 128, 64), TILEOPS__STATUS__STATUS_OK, "", "good read");
	for (int i = 0; i < 64; i++)
		cr_assert_eq(((unsigned char *)r.arena)[128 + i], 7, "byte %d did not round-trip",
		             i);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, unknown_handle_in_a_raw_write_is_refused)
{
	th_raw r;

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	expect_reply(th_raw_write(&r, 123456789, 0, 0, 4), TILEOPS__STATUS__STATUS_UNKNOWN_HANDLE,
	             "", "write to handle 123456789");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, request_with_no_body_is_a_protocol_error)
{
	th_raw r;
	Tileops__Request req = TILEOPS__REQUEST__INIT;

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	expect_reply(th_raw_call(&r, &req), TILEOPS__STATUS__STATUS_PROTOCOL, "",
	             "a request with no body");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, second_hello_is_a_protocol_error)
{
	th_raw r;
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__Hello h = TILEOPS__HELLO__INIT;
	uint64_t seq;

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	seq = r.seq;
	h.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.client_name = "again";
	h.arena_name = r.shm_name;
	h.arena_bytes = r.arena_bytes;
	req.body_case = TILEOPS__REQUEST__BODY_HELLO;
	req.hello = &h;
	expect_reply(th_raw_call(&r, &req), TILEOPS__STATUS__STATUS_PROTOCOL, "hello",
	             "a second Hello");
	/* The first session still works. */
	r.seq = seq + 1;
	const int64_t shape[] = { 2 };
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_OK, "", "create after a second Hello");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, reused_seq_is_a_protocol_error)
{
	th_raw r;
	const int64_t shape[] = { 2 };

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_OK, "", "create with seq 1");
	r.seq = 1;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_PROTOCOL, "seq", "create with seq 1 again");
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_OK, "", "create with seq 2");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, seq_gap_is_answered_after_a_wait_and_the_session_goes_on)
{
	th_raw r;
	const int64_t shape[] = { 2 };

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	/* seq 1..4 never come: seq 5 waits, then is refused (about 2 s). */
	r.seq = 5;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_PROTOCOL, "seq", "create with seq 5 after the Hello");
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_OK, "", "create with seq 6");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, requests_pipelined_behind_a_refused_hello_never_run)
{
	th_raw r;
	const int64_t shape[] = { 4 };
	Tileops__Request reqs[3] = { TILEOPS__REQUEST__INIT, TILEOPS__REQUEST__INIT,
		                     TILEOPS__REQUEST__INIT };
	Tileops__Hello h = TILEOPS__HELLO__INIT;
	Tileops__TensorCreate tc = TILEOPS__TENSOR_CREATE__INIT;
	Tileops__OpRun op = TILEOPS__OP_RUN__INIT;
	uint64_t handles[2] = { 1, 2 };
	Tileops__Request *p[3] = { &reqs[0], &reqs[1], &reqs[2] };
	Tileops__Reply *rep[3];
	char shm[64];

	th_raw_open(&r);
	/* The Hello names a tenant no config declares: its open fails. */
	snprintf(shm, sizeof(shm), "/tileops-test-refused-%d", (int)getpid());
	shm_unlink(shm);
	int fd = shm_open(shm, O_CREAT | O_EXCL | O_RDWR, 0600);
	cr_assert(fd >= 0 && ftruncate(fd, 1 << 16) == 0);
	close(fd);
	h.protocol_version = TILEOPS__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.client_name = "refused";
	h.arena_name = shm;
	h.arena_bytes = 1 << 16;
	h.tenant = "no-such-tenant";
	reqs[0].body_case = TILEOPS__REQUEST__BODY_HELLO;
	reqs[0].hello = &h;
	tc.dtype = TILEOPS__DTYPE__DTYPE_F32;
	tc.n_shape = 1;
	tc.shape = (int64_t *)shape;
	reqs[1].body_case = TILEOPS__REQUEST__BODY_TENSOR_CREATE;
	reqs[1].tensor_create = &tc;
	op.op = "add";
	op.n_inputs = 2;
	op.inputs = handles;
	op.n_outputs = 1;
	op.outputs = handles;
	reqs[2].body_case = TILEOPS__REQUEST__BODY_OP_RUN;
	reqs[2].op_run = &op;
	r.seq = 0;
	th_raw_pipeline(&r, p, 3, rep);
	for (int i = 0; i < 3; i++) {
		cr_assert(rep[i] != NULL, "request %d got no answer", i);
		cr_assert_neq(rep[i]->status, TILEOPS__STATUS__STATUS_OK,
		              "request %d on a refused session succeeded", i);
		tileops__reply__free_unpacked(rep[i], NULL);
	}
	shm_unlink(shm);
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, a_zero_extent_does_not_let_the_other_extents_overflow)
{
	th_raw r;
	const int64_t huge[] = { 0, (int64_t)1 << 62, (int64_t)1 << 62 };
	const int64_t wide[] = { 0, (int64_t)1 << 40, (int64_t)1 << 40 };
	const int64_t empty[] = { 0, 1 << 20 };

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 3, huge),
	             TILEOPS__STATUS__STATUS_SHAPE, "too large", "[0, 2^62, 2^62]");
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 3, wide),
	             TILEOPS__STATUS__STATUS_SHAPE, "too large", "[0, 2^40, 2^40]");
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 2, empty),
	             TILEOPS__STATUS__STATUS_OK, "", "[0, 2^20] (no bytes, small strides)");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, a_seq_far_ahead_is_refused_at_once_and_cannot_wrap_the_order)
{
	th_raw r;
	const int64_t shape[] = { 2 };

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	int64_t t0 = th_now_ms();
	r.seq = UINT64_MAX;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_PROTOCOL, "too far ahead", "create with seq 2^64-1");
	r.seq = (uint64_t)1 << 40;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_PROTOCOL, "too far ahead", "create with seq 2^40");
	cr_assert_lt(th_now_ms() - t0, 1500, "the refusals waited for the gap timeout");
	r.seq = 1;
	expect_reply(th_raw_create(&r, TILEOPS__DTYPE__DTYPE_F32, 1, shape),
	             TILEOPS__STATUS__STATUS_OK, "", "create with seq 1 after them");
	th_raw_close(&r);
	expect_daemon_serving();
}

Test(raw, the_daemon_removes_the_arena_name_once_it_has_mapped_it)
{
	th_raw r;

	th_raw_open(&r);
	th_raw_hello(&r, 1 << 16);
	int fd = shm_open(r.shm_name, O_RDWR, 0);
	int err = errno;
	cr_assert(fd < 0 && err == ENOENT,
	          "arena %s is still linked after the Hello (a client killed now would leak it)",
	          r.shm_name);
	th_raw_close(&r);
}
