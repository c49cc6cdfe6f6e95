/*
 * test_ipc_cpu.c - CUDA IPC with offsets, and IPC events, against the test
 * daemon on the CPU backend: what the library refuses before sending, what
 * the daemon checks before the backend (bounds, alignment, sizes), and the
 * backend's own refusal, on both planes. The device paths are in
 * tests/gpu/test_gpu_ipc.c.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "integration/helpers.h"

static void expect_refused(tileops_status st, tileops_status want, const char *words)
{
	cr_assert_eq(st, want, "status %d (%s), expected %d; message: %s", st, tileops_strerror(st),
	             want, tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), words), "message '%s' lacks '%s'",
	          tileops_last_error(), words);
}

Test(ipc_cpu, export_is_unsupported_and_leaves_the_out_parameters_alone)
{
	tileops_client *c = th_connect("ipc-export", 0);
	int64_t shape[1] = { 8 };
	tileops_tensor t = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_ipc_handle h;
	size_t off = 77, bytes = 77;

	memset(&h, 0xab, sizeof(h));
	expect_refused(tileops_tensor_export(c, t, &h, &off, &bytes), TILEOPS_ERR_UNSUPPORTED,
	               "CUDA backend");
	cr_assert_eq(off, 77);
	cr_assert_eq(bytes, 77);
	cr_assert_eq(h.bytes[0], 0xab);
	/* offset and bytes may be NULL. */
	expect_refused(tileops_tensor_export(c, t, &h, NULL, NULL), TILEOPS_ERR_UNSUPPORTED,
	               "CUDA backend");
	tileops_close(c);
}

Test(ipc_cpu, import_checks_sizes_and_offsets_before_the_backend_refuses)
{
	tileops_client *c = th_connect("ipc-import", 0);
	int64_t shape[2] = { 4, 8 };
	tileops_ipc_handle h;
	tileops_tensor t = 0;

	memset(&h, 0, sizeof(h));
	expect_refused(tileops_tensor_import(c, &h, 0, 64, TILEOPS_F32, 2, shape, &t),
	               TILEOPS_ERR_INVALID_ARGUMENT, "needs 128 bytes, more than the 64 given");
	expect_refused(tileops_tensor_import(c, &h, 2, 4096, TILEOPS_F32, 2, shape, &t),
	               TILEOPS_ERR_INVALID_ARGUMENT, "offset 2 is not a multiple of f32's 4");
	expect_refused(tileops_tensor_import(c, &h, (size_t)-4, 128, TILEOPS_F32, 2, shape, &t),
	               TILEOPS_ERR_INVALID_ARGUMENT, "overflows");
	expect_refused(tileops_tensor_import(c, NULL, 0, 128, TILEOPS_F32, 2, shape, &t),
	               TILEOPS_ERR_INVALID_ARGUMENT, "handle is NULL");
	/* Well-formed: the CPU backend has no IPC. */
	expect_refused(tileops_tensor_import(c, &h, 256, 128, TILEOPS_F32, 2, shape, &t),
	               TILEOPS_ERR_UNSUPPORTED, "CUDA backend");
	cr_assert_eq(t, 0, "a refused import wrote its out-parameter");
	/* The session goes on. */
	int64_t one[1] = { 1 };
	float x = 3.0f, y = 0.0f;
	tileops_tensor ok = th_tensor_f32(c, 1, one, &x);
	th_read(c, ok, &y, sizeof(y));
	cr_assert_eq(y, 3.0f);
	tileops_close(c);
}

static void events_refused(tileops_client *c)
{
	tileops_ipc_event ev;

	memset(&ev, 0x5a, sizeof(ev));
	expect_refused(tileops_event_wait(c, &ev), TILEOPS_ERR_UNSUPPORTED,
	               "event_wait: CUDA IPC events need the CUDA backend");
	memset(&ev, 0x11, sizeof(ev));
	expect_refused(tileops_event_record(c, &ev), TILEOPS_ERR_UNSUPPORTED,
	               "event_record: CUDA IPC events need the CUDA backend");
	cr_assert_eq(ev.bytes[0], 0x11, "a refused record wrote its out-parameter");
	expect_refused(tileops_event_wait(c, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_record(c, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	/* In order with ops on the same plane: an op after the refusal runs. */
	int64_t shape[1] = { 4 };
	float a[4] = { 1, 2, 3, 4 }, got[4];
	tileops_tensor x = th_tensor_f32(c, 1, shape, a);
	tileops_tensor in[2] = { x, x };
	tileops_op op = { "add", in, 2, &x, 1, NULL, 0 };
	th_run(c, &op);
	th_read(c, x, got, sizeof(got));
	for (int i = 0; i < 4; i++)
		cr_assert_eq(got[i], 2 * a[i]);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
}

Test(ipc_cpu, events_are_unsupported_through_the_rings)
{
	tileops_client *c = th_connect("ipc-events-ring", 0);
	events_refused(c);
	tileops_close(c);
}

Test(ipc_cpu, events_are_unsupported_over_nng)
{
	setenv("TILEOPS_RINGS", "0", 1);
	tileops_client *c = th_connect("ipc-events-nng", 0);
	unsetenv("TILEOPS_RINGS");
	events_refused(c);
	tileops_close(c);
}

static Tileops__Reply *raw_import(th_raw *r, size_t handle_len, uint64_t offset, uint64_t bytes)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__TensorImport im = TILEOPS__TENSOR_IMPORT__INIT;
	unsigned char h[64] = { 0 };
	int64_t shape[1] = { 8 };

	im.ipc_handle.data = h;
	im.ipc_handle.len = handle_len;
	im.dtype = TILEOPS__DTYPE__DTYPE_F32;
	im.n_shape = 1;
	im.shape = shape;
	im.offset = offset;
	im.bytes = bytes;
	req.body_case = TILEOPS__REQUEST__BODY_TENSOR_IMPORT;
	req.tensor_import = &im;
	Tileops__Reply *rep = th_raw_call(r, &req);
	cr_assert_not_null(rep, "no reply to a TensorImport");
	return rep;
}

static void expect_reply(Tileops__Reply *rep, int status, const char *words)
{
	cr_assert_eq((int)rep->status, status, "status %d: %s", (int)rep->status, rep->message);
	cr_assert(th_contains(rep->message, words), "message '%s' lacks '%s'", rep->message, words);
	tileops__reply__free_unpacked(rep, NULL);
}

Test(ipc_cpu, the_daemon_checks_what_a_raw_client_sends)
{
	th_raw r;
	th_raw_open(&r);
	th_raw_hello(&r, 1 << 20);
	/* An older client's import (no offset, no bytes) means the tensor's own size. */
	expect_reply(raw_import(&r, 64, 0, 0), TILEOPS__STATUS__STATUS_UNSUPPORTED, "CUDA");
	expect_reply(raw_import(&r, 64, 0, 4), TILEOPS__STATUS__STATUS_INVALID_ARGUMENT,
	             "needs 32 bytes, more than the 4 it may touch");
	expect_reply(raw_import(&r, 64, 6, 64), TILEOPS__STATUS__STATUS_INVALID_ARGUMENT,
	             "offset 6 is not a multiple");
	expect_reply(raw_import(&r, 10, 0, 64), TILEOPS__STATUS__STATUS_INVALID_ARGUMENT,
	             "ipc_handle has 10 bytes");

	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventWait ew = TILEOPS__EVENT_WAIT__INIT;
	unsigned char ev[64] = { 0 };
	ew.ipc_event.data = ev;
	ew.ipc_event.len = 10;
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_WAIT;
	req.event_wait = &ew;
	expect_reply(th_raw_call(&r, &req), TILEOPS__STATUS__STATUS_INVALID_ARGUMENT,
	             "ipc_event has 10 bytes");
	ew.ipc_event.len = 64;
	expect_reply(th_raw_call(&r, &req), TILEOPS__STATUS__STATUS_UNSUPPORTED, "CUDA backend");

	Tileops__Request rec = TILEOPS__REQUEST__INIT;
	Tileops__EventRecord er = TILEOPS__EVENT_RECORD__INIT;
	rec.body_case = TILEOPS__REQUEST__BODY_EVENT_RECORD;
	rec.event_record = &er;
	Tileops__Reply *rep = th_raw_call(&r, &rec);
	cr_assert_not_null(rep);
	cr_assert_neq(rep->body_case, TILEOPS__REPLY__BODY_EVENT_RECORD,
	              "a refused record carries an event");
	expect_reply(rep, TILEOPS__STATUS__STATUS_UNSUPPORTED, "CUDA backend");
	th_raw_close(&r);
}

/* ---- events opened once ------------------------------------------------------- */

static void registered_events_refused(tileops_client *c)
{
	tileops_ipc_event ev;
	tileops_event id = 77;
	tileops_completion *cp = (tileops_completion *)&id;

	memset(&ev, 0x5a, sizeof(ev));
	expect_refused(tileops_event_register(c, &ev, &id), TILEOPS_ERR_UNSUPPORTED,
	               "event_register: CUDA IPC events need the CUDA backend");
	cr_assert_eq(id, 77, "a refused register wrote its out-parameter");
	expect_refused(tileops_event_release(c, 5), TILEOPS_ERR_UNSUPPORTED,
	               "event_release: CUDA IPC events need the CUDA backend");
	memset(&ev, 0x11, sizeof(ev));
	expect_refused(tileops_event_export(c, &ev), TILEOPS_ERR_UNSUPPORTED,
	               "event_export: CUDA IPC events need the CUDA backend");
	cr_assert_eq(ev.bytes[0], 0x11, "a refused export wrote its out-parameter");

	/* The submitted ones: accepted for the rings, refused by the daemon. */
	cr_assert_eq(tileops_event_wait_submit(c, 5, &cp), TILEOPS_OK, "%s", tileops_last_error());
	expect_refused(tileops_completion_wait(cp, -1), TILEOPS_ERR_UNSUPPORTED,
	               "event_wait_submit: CUDA IPC events need the CUDA backend");
	tileops_completion_free(cp);
	cr_assert_eq(tileops_event_record_submit(c, &cp), TILEOPS_OK, "%s", tileops_last_error());
	expect_refused(tileops_completion_wait(cp, -1), TILEOPS_ERR_UNSUPPORTED,
	               "event_record_submit: CUDA IPC events need the CUDA backend");
	tileops_completion_free(cp);

	/* What the library refuses before sending. */
	cp = (tileops_completion *)&id;
	expect_refused(tileops_event_wait_submit(c, 0, &cp), TILEOPS_ERR_INVALID_ARGUMENT,
	               "event 0 is never a registered event");
	cr_assert_null(cp, "a refused submit left *out set");
	expect_refused(tileops_event_release(c, 0), TILEOPS_ERR_INVALID_ARGUMENT,
	               "event 0 is never a registered event");
	expect_refused(tileops_event_register(c, NULL, &id), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_register(c, &ev, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_export(c, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_wait_submit(c, 1, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_record_submit(c, NULL), TILEOPS_ERR_INVALID_ARGUMENT, "NULL");
	expect_refused(tileops_event_record_submit(NULL, &cp), TILEOPS_ERR_INVALID_ARGUMENT,
	               "NULL");

	/* In order with ops: an op after the refusals runs, and sync is clean
	 * (a refused request is its own completion's error, not a device one). */
	int64_t shape[1] = { 4 };
	float a[4] = { 1, 2, 3, 4 }, got[4];
	tileops_tensor x = th_tensor_f32(c, 1, shape, a);
	tileops_tensor in[2] = { x, x };
	tileops_op op = { "add", in, 2, &x, 1, NULL, 0 };
	th_run(c, &op);
	th_read(c, x, got, sizeof(got));
	for (int i = 0; i < 4; i++)
		cr_assert_eq(got[i], 2 * a[i]);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
}

Test(ipc_cpu, registered_events_are_unsupported_through_the_rings)
{
	tileops_client *c = th_connect("ipc-regev-ring", 0);
	registered_events_refused(c);
	tileops_close(c);
}

Test(ipc_cpu, registered_events_are_unsupported_over_nng)
{
	setenv("TILEOPS_RINGS", "0", 1);
	tileops_client *c = th_connect("ipc-regev-nng", 0);
	unsetenv("TILEOPS_RINGS");
	registered_events_refused(c);
	tileops_close(c);
}
