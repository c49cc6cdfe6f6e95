/*
 * test_gpu_events.c - events opened once through tileopsd on the GPU
 * (tileops_event_register, _wait_submit, _export, _record_submit; the CPU
 * backend's refusals are tests/integration/test_ipc_cpu.c): a client event
 * registered once and waited on every step of a loop that hands a buffer
 * back and forth between the client's stream and the daemon's, the
 * daemon's event waited on by the client's stream, bad ids, and a session
 * that closes holding its events.
 */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define CUDA_OK(call)                                                                   \
	do {                                                                            \
		cudaError_t e_ = (call);                                                \
		cr_assert_eq(e_, cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); \
	} while (0)

static tileops_client *connect_to(const daemon2 *d, const char *name)
{
	tileops_connect_options o = { 0 };
	tileops_client *c = NULL;

	o.address = d->address;
	o.name = name;
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_OK, "%s", tileops_last_error());
	tileops_server_info info;
	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	cr_assert_str_eq(info.backend, "cuda", "these tests need the CUDA backend");
	return c;
}

/* Holds the client's stream on the host: what comes after it waits. */
static void CUDART_CB hold_stream(void *ms)
{
	usleep((useconds_t)(intptr_t)ms * 1000);
}

static tileops_event register_event(tileops_client *c, cudaEvent_t ev)
{
	cudaIpcEventHandle_t eh;
	tileops_ipc_event tev;
	tileops_event id = 0;

	CUDA_OK(cudaIpcGetEventHandle(&eh, ev));
	memcpy(tev.bytes, &eh, sizeof(tev.bytes));
	cr_assert_eq(tileops_event_register(c, &tev, &id), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_neq(id, 0);
	return id;
}

/* The session's event, opened on the client's side. */
static cudaEvent_t open_daemon_event(tileops_client *c)
{
	tileops_ipc_event tev, again;
	cudaIpcEventHandle_t eh;
	cudaEvent_t ev;

	cr_assert_eq(tileops_event_export(c, &tev), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_event_export(c, &again), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert(memcmp(tev.bytes, again.bytes, sizeof(tev.bytes)) == 0,
	          "the session's event changed between exports");
	memcpy(&eh, tev.bytes, sizeof(eh));
	CUDA_OK(cudaIpcOpenEventHandle(&ev, eh));
	return ev;
}

static void completion_ok(tileops_completion *cp, const char *what)
{
	cr_assert_eq(tileops_completion_wait(cp, -1), TILEOPS_OK, "%s: %s", what,
	             tileops_last_error());
	tileops_completion_free(cp);
}

/* The daemon's record, then the client's stream waits on it. */
static void client_waits(tileops_client *c, cudaStream_t s, cudaEvent_t dev_ev)
{
	tileops_completion *cp = NULL;

	cr_assert_eq(tileops_event_record_submit(c, &cp), TILEOPS_OK, "%s", tileops_last_error());
	completion_ok(cp, "event_record_submit"); /* the record is queued: now wait */
	CUDA_OK(cudaStreamWaitEvent(s, dev_ev, 0));
}

Test(gpu_events, a_client_event_registered_once_orders_a_thousand_steps_both_ways, .timeout = 240)
{
	daemon2 d;
	enum { N = 256, STEPS = 1000 };
	int64_t shape[1] = { N };
	float *vals = NULL, got[N];
	void *buf = NULL;
	cudaStream_t s;
	cudaEvent_t ev;

	CUDA_OK(cudaMallocHost((void **)&vals, sizeof(float) * N * STEPS));
	for (int i = 0; i < STEPS; i++)
		for (int j = 0; j < N; j++)
			vals[(size_t)i * N + j] = (float)((i + j) % 7 + 1);
	CUDA_OK(cudaMalloc(&buf, N * 4));
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
	cudaIpcMemHandle_t mh;
	CUDA_OK(cudaIpcGetMemHandle(&mh, buf));
	tileops_ipc_handle h;
	memcpy(h.bytes, &mh, sizeof(h.bytes));
	daemon2_start(&d, "");
	tileops_client *c = connect_to(&d, "events-thousand");
	tileops_tensor x = 0, acc[2] = { th_tensor(c, TILEOPS_F32, 1, shape),
		                         th_tensor(c, TILEOPS_F32, 1, shape) };
	cr_assert_eq(tileops_tensor_import(c, &h, 0, N * 4, TILEOPS_F32, 1, shape, &x), TILEOPS_OK,
	             "%s", tileops_last_error());
	CUDA_OK(cudaEventRecord(ev, s));
	tileops_event id = register_event(c, ev);
	cudaEvent_t dev_ev = open_daemon_event(c);

	/* Each step: the client's stream writes x (now and then after holding
	 * the stream on the host, so a missed wait reads the old x), the
	 * daemon waits for it, adds it into the sum, and the client's stream
	 * waits for the daemon before it writes x again (a missed wait
	 * overwrites x before the add read it). */
	int64_t t0 = th_now_ms();
	for (int i = 0; i < STEPS; i++) {
		tileops_completion *cp = NULL;
		if (i % 100 == 7)
			CUDA_OK(cudaLaunchHostFunc(s, hold_stream, (void *)(intptr_t)20));
		CUDA_OK(cudaMemcpyAsync(buf, vals + (size_t)i * N, N * 4, cudaMemcpyHostToDevice,
		                        s));
		CUDA_OK(cudaEventRecord(ev, s));
		cr_assert_eq(tileops_event_wait_submit(c, id, &cp), TILEOPS_OK, "step %d: %s", i,
		             tileops_last_error());
		tileops_tensor in[2] = { acc[i % 2], x };
		tileops_op add = { "add", in, 2, &acc[(i + 1) % 2], 1, NULL, 0 };
		tileops_completion *op = NULL;
		cr_assert_eq(tileops_op_submit(c, &add, &op), TILEOPS_OK, "step %d: %s", i,
		             tileops_last_error());
		client_waits(c, s, dev_ev);
		completion_ok(cp, "event_wait_submit");
		completion_ok(op, "add");
	}
	int64_t ms = th_now_ms() - t0;
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	th_read(c, acc[STEPS % 2], got, sizeof(got));
	for (int j = 0; j < N; j++) {
		double want = 0;
		for (int i = 0; i < STEPS; i++)
			want += vals[(size_t)i * N + j];
		cr_assert_eq(got[j], (float)want, "element %d: %g, expected %g", j, got[j], want);
	}
	cr_log_info("%d steps in %lld ms", STEPS, (long long)ms);
	cr_assert_eq(tileops_event_release(c, id), TILEOPS_OK, "%s", tileops_last_error());
	tileops_close(c);
	daemon2_stop(&d);
	CUDA_OK(cudaStreamSynchronize(s));
	cudaEventDestroy(dev_ev);
	cudaEventDestroy(ev);
	cudaStreamDestroy(s);
	cudaFree(buf);
	cudaFreeHost(vals);
}

Test(gpu_events, the_clients_stream_waits_on_the_daemons_event_recorded_again, .timeout = 120)
{
	daemon2 d;
	enum { N = 4 };
	int64_t shape[1] = { N };
	float x[N] = { 10, 20, 30, 40 }, *got = NULL;
	void *buf = NULL;
	cudaStream_t s;

	CUDA_OK(cudaMallocHost((void **)&got, N * 4));
	CUDA_OK(cudaMalloc(&buf, N * 4));
	CUDA_OK(cudaMemset(buf, 0, N * 4));
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaIpcMemHandle_t mh;
	CUDA_OK(cudaIpcGetMemHandle(&mh, buf));
	tileops_ipc_handle h;
	memcpy(h.bytes, &mh, sizeof(h.bytes));
	daemon2_start(&d, "diagnostic_ops = on\n");
	tileops_client *c = connect_to(&d, "events-record");
	tileops_tensor out = 0, tx = th_tensor_f32(c, 1, shape, x);
	cr_assert_eq(tileops_tensor_import(c, &h, 0, N * 4, TILEOPS_F32, 1, shape, &out),
	             TILEOPS_OK, "%s", tileops_last_error());
	cudaEvent_t dev_ev = open_daemon_event(c);
	for (int round = 0; round < 3; round++) {
		/* The daemon's stream writes out = x + 1 after 200 ms of spinning. */
		for (int i = 0; i < N; i++)
			x[i] += 100.0f;
		th_write(c, tx, x, sizeof(x));
		tileops_param p[2] = { tileops_param_int("ns", 200000000),
			               tileops_param_int("blocks", 4) };
		tileops_op spin = { "spin", &tx, 1, &out, 1, p, 2 };
		tileops_completion *op = NULL;
		cr_assert_eq(tileops_op_submit(c, &spin, &op), TILEOPS_OK, "%s",
		             tileops_last_error());
		int64_t t0 = th_now_ms();
		client_waits(c, s, dev_ev);
		cr_assert_lt(th_now_ms() - t0, 150,
		             "the record's completion waited for the device");
		CUDA_OK(cudaMemcpyAsync(got, buf, N * 4, cudaMemcpyDeviceToHost, s));
		CUDA_OK(cudaStreamSynchronize(s));
		for (int i = 0; i < N; i++)
			cr_assert_eq(got[i], x[i] + 1.0f,
			             "round %d element %d copied before the daemon wrote it", round,
			             i);
		completion_ok(op, "spin");
	}
	cudaEventDestroy(dev_ev);
	tileops_close(c);
	daemon2_stop(&d);
	cudaStreamDestroy(s);
	cudaFree(buf);
	cudaFreeHost(got);
}

static void expect_status(tileops_status st, tileops_status want, const char *words)
{
	cr_assert_eq(st, want, "status %d (%s), expected %d; message: %s", st, tileops_strerror(st),
	             want, tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), words), "message '%s' lacks '%s'",
	          tileops_last_error(), words);
}

Test(gpu_events, bad_ids_and_bad_handles_are_refused_and_a_closing_session_releases_its_events,
     .timeout = 120)
{
	daemon2 d;
	cudaEvent_t ev, ev2;
	tileops_completion *cp = NULL;
	tileops_ipc_event junk;
	tileops_event id = 0, other = 0;

	CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
	CUDA_OK(cudaEventCreateWithFlags(&ev2, cudaEventInterprocess | cudaEventDisableTiming));
	CUDA_OK(cudaEventRecord(ev, 0));
	CUDA_OK(cudaEventRecord(ev2, 0));
	daemon2_start(&d, "");
	tileops_client *c = connect_to(&d, "events-bad"), *c2 = connect_to(&d, "events-other");

	/* A record before any export: there is no event to record. */
	cr_assert_eq(tileops_event_record_submit(c, &cp), TILEOPS_OK, "%s", tileops_last_error());
	expect_status(tileops_completion_wait(cp, -1), TILEOPS_ERR_INVALID_ARGUMENT,
	              "tileops_event_export first");
	tileops_completion_free(cp);

	memset(junk.bytes, 0x5a, sizeof(junk.bytes));
	expect_status(tileops_event_register(c, &junk, &id), TILEOPS_ERR_INVALID_ARGUMENT,
	              "cannot open the CUDA IPC event handle");
	cr_assert_eq(id, 0, "a refused register wrote its out-parameter");
	id = register_event(c, ev);
	other = register_event(c2, ev2); /* ids are per session */

	cr_assert_eq(tileops_event_wait_submit(c, id + 1000, &cp), TILEOPS_OK);
	expect_status(tileops_completion_wait(cp, -1), TILEOPS_ERR_UNKNOWN_HANDLE,
	              "is not an event this session registered");
	tileops_completion_free(cp);
	cr_assert_eq(tileops_event_wait_submit(c, id, &cp), TILEOPS_OK);
	completion_ok(cp, "a registered event's wait");
	cr_assert_eq(tileops_event_release(c, id), TILEOPS_OK, "%s", tileops_last_error());
	expect_status(tileops_event_release(c, id), TILEOPS_ERR_UNKNOWN_HANDLE,
	              "is not an event this session registered");
	cr_assert_eq(tileops_event_wait_submit(c, id, &cp), TILEOPS_OK);
	expect_status(tileops_completion_wait(cp, -1), TILEOPS_ERR_UNKNOWN_HANDLE,
	              "is not an event this session registered");
	tileops_completion_free(cp);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "refusals are no device error: %s",
	             tileops_last_error());

	/* c's ids mean nothing to c2 (other is c2's first, as id was c's). */
	cr_assert_eq(tileops_event_wait_submit(c2, other + 1, &cp), TILEOPS_OK);
	expect_status(tileops_completion_wait(cp, -1), TILEOPS_ERR_UNKNOWN_HANDLE,
	              "is not an event this session registered");
	tileops_completion_free(cp);
	/* c2 closes holding its event; the daemon releases it and serves on. */
	tileops_close(c2);
	tileops_client *c3 = connect_to(&d, "events-after");
	tileops_event again = register_event(c3, ev2);
	cr_assert_eq(tileops_event_wait_submit(c3, again, &cp), TILEOPS_OK);
	completion_ok(cp, "a wait after another session closed");
	tileops_close(c3);
	tileops_close(c);
	daemon2_stop(&d);
	cudaEventDestroy(ev);
	cudaEventDestroy(ev2);
}
