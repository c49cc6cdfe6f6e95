/*
 * test_gpu_ipc.c - CUDA IPC with offsets and IPC events through tileopsd on
 * the GPU (the CUDA backend; the refusals on the CPU backend are
 * tests/integration/test_ipc_cpu.c). Each test starts its own daemons: a
 * process cannot open a CUDA IPC handle it exported itself, so an export is
 * opened here or by a second daemon.
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

static void run_ok(tileops_client *c, const tileops_op *op)
{
	cr_assert_eq(tileops_op_run(c, op), TILEOPS_OK, "%s: %s", op->name, tileops_last_error());
}

Test(gpu_ipc, an_exported_view_is_opened_at_its_offset_and_imported_by_another_daemon)
{
	daemon2 a, b;
	enum { N = 4096, V0 = 1024, VN = 1024 };
	static float host[N], got[VN], back[N];
	int64_t shape[1] = { N }, vshape[1] = { VN };

	for (int i = 0; i < N; i++)
		host[i] = (float)i;
	daemon2_start(&a, "");
	daemon2_start(&b, "");
	tileops_client *ca = connect_to(&a, "ipc-exporter");
	tileops_client *cb = connect_to(&b, "ipc-importer");
	tileops_tensor base = th_tensor_f32(ca, 1, shape, host), v = 0;
	cr_assert_eq(tileops_tensor_view(ca, base, V0 * 4, TILEOPS_F32, 1, vshape, NULL, &v),
	             TILEOPS_OK, "%s", tileops_last_error());
	tileops_ipc_handle h;
	size_t off = 0, bytes = 0;
	cr_assert_eq(tileops_tensor_export(ca, v, &h, &off, &bytes), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(bytes, VN * 4);
	cr_assert_geq(off, V0 * 4, "the view's offset inside its allocation");
	cr_assert_eq(tileops_sync(ca), TILEOPS_OK);

	/* This process opens the allocation and finds the view at the offset. */
	void *p = NULL;
	cudaIpcMemHandle_t mh;
	memcpy(&mh, h.bytes, sizeof(mh));
	CUDA_OK(cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess));
	CUDA_OK(cudaMemcpy(got, (char *)p + off, bytes, cudaMemcpyDeviceToHost));
	cr_assert(memcmp(got, host + V0, sizeof(got)) == 0, "the bytes at the offset differ");
	CUDA_OK(cudaIpcCloseMemHandle(p));

	/* Another daemon imports it and writes it with an op. */
	tileops_tensor imp = 0;
	cr_assert_eq(tileops_tensor_import(cb, &h, off, bytes, TILEOPS_F32, 1, vshape, &imp),
	             TILEOPS_OK, "%s", tileops_last_error());
	th_read(cb, imp, got, sizeof(got));
	cr_assert(memcmp(got, host + V0, sizeof(got)) == 0, "the import reads other bytes");
	tileops_tensor in[2] = { imp, imp };
	tileops_op add = { "add", in, 2, &imp, 1, NULL, 0 };
	run_ok(cb, &add);
	cr_assert_eq(tileops_sync(cb), TILEOPS_OK);
	th_read(ca, base, back, sizeof(back));
	for (int i = 0; i < N; i++)
		cr_assert_eq(back[i], i >= V0 && i < V0 + VN ? 2.0f * host[i] : host[i],
		             "element %d", i);
	/* Bounded by the allocation's size, which the importer reads back. */
	tileops_tensor bad = 0;
	cr_assert_eq(
	        tileops_tensor_import(cb, &h, off, (size_t)1 << 40, TILEOPS_F32, 1, vshape, &bad),
	        TILEOPS_ERR_RANGE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "outside the exported allocation"));
	cr_assert_eq(tileops_tensor_free(cb, imp), TILEOPS_OK);
	tileops_close(cb);
	tileops_close(ca);
	daemon2_stop(&b);
	daemon2_stop(&a);
}

Test(gpu_ipc, a_buffer_of_the_clients_own_is_imported_at_an_offset_and_written_by_an_op)
{
	daemon2 d;
	enum { BYTES = 2 << 20, OFF = 4096, N = 256 };
	static unsigned char before[BYTES], after[BYTES];
	float x[N];
	int64_t shape[1] = { N };
	void *buf = NULL;

	memset(before, 0x7f, sizeof(before));
	for (int i = 0; i < N; i++)
		x[i] = 0.25f * (float)i;
	CUDA_OK(cudaMalloc(&buf, BYTES));
	CUDA_OK(cudaMemcpy(buf, before, BYTES, cudaMemcpyHostToDevice));
	cudaIpcMemHandle_t mh;
	CUDA_OK(cudaIpcGetMemHandle(&mh, buf));
	tileops_ipc_handle h;
	memcpy(h.bytes, &mh, sizeof(h.bytes));

	daemon2_start(&d, "");
	tileops_client *c = connect_to(&d, "ipc-own-buffer");
	tileops_tensor t = 0, bad = 0;
	cr_assert_eq(tileops_tensor_import(c, &h, OFF, N * 4, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_import(c, &h, BYTES - 512, N * 4, TILEOPS_F32, 1, shape, &bad),
	             TILEOPS_ERR_RANGE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "2097152 bytes"), "%s", tileops_last_error());
	tileops_tensor tx = th_tensor_f32(c, 1, shape, x);
	tileops_tensor in[2] = { tx, tx };
	tileops_op add = { "add", in, 2, &t, 1, NULL, 0 };
	run_ok(c, &add);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	CUDA_OK(cudaMemcpy(after, buf, BYTES, cudaMemcpyDeviceToHost));
	for (int i = 0; i < N; i++) {
		float v;
		memcpy(&v, after + OFF + 4 * i, 4);
		cr_assert_eq(v, 2.0f * x[i], "element %d", i);
	}
	cr_assert(memcmp(after, before, OFF) == 0, "bytes before the offset changed");
	cr_assert(memcmp(after + OFF + N * 4, before + OFF + N * 4, BYTES - OFF - N * 4) == 0,
	          "bytes past the tensor changed");
	cr_assert_eq(tileops_tensor_free(c, t), TILEOPS_OK);
	tileops_close(c);
	daemon2_stop(&d);
	CUDA_OK(cudaFree(buf));
}

/* Holds the client's stream on the host: what comes after it waits. */
static void CUDART_CB hold_stream(void *ms)
{
	usleep((useconds_t)(intptr_t)ms * 1000);
}

Test(gpu_ipc, an_op_waits_on_the_device_for_the_clients_event)
{
	daemon2 d;
	enum { N = 1024 };
	int64_t shape[1] = { N };
	float *fresh = NULL, got[N];
	void *buf = NULL;
	cudaStream_t s;
	cudaEvent_t ev;

	CUDA_OK(cudaMallocHost((void **)&fresh, N * 4));
	for (int i = 0; i < N; i++)
		fresh[i] = 1.0f + (float)i;
	CUDA_OK(cudaMalloc(&buf, N * 4));
	CUDA_OK(cudaMemset(buf, 0, N * 4));
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventInterprocess | cudaEventDisableTiming));
	cudaIpcMemHandle_t mh;
	CUDA_OK(cudaIpcGetMemHandle(&mh, buf));
	tileops_ipc_handle h;
	memcpy(h.bytes, &mh, sizeof(h.bytes));
	daemon2_start(&d, "");
	tileops_client *c = connect_to(&d, "ipc-event-wait");
	tileops_tensor x = 0, y = th_tensor(c, TILEOPS_F32, 1, shape);
	cr_assert_eq(tileops_tensor_import(c, &h, 0, N * 4, TILEOPS_F32, 1, shape, &x), TILEOPS_OK,
	             "%s", tileops_last_error());

	/* The client's stream writes x only after 300 ms; no host sync below. */
	CUDA_OK(cudaLaunchHostFunc(s, hold_stream, (void *)(intptr_t)300));
	CUDA_OK(cudaMemcpyAsync(buf, fresh, N * 4, cudaMemcpyHostToDevice, s));
	CUDA_OK(cudaEventRecord(ev, s));
	cudaIpcEventHandle_t eh;
	CUDA_OK(cudaIpcGetEventHandle(&eh, ev));
	tileops_ipc_event tev;
	memcpy(tev.bytes, &eh, sizeof(tev.bytes));
	int64_t t0 = th_now_ms();
	cr_assert_eq(tileops_event_wait(c, &tev), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_lt(th_now_ms() - t0, 250, "event_wait waited on the host");
	tileops_tensor in[2] = { x, x };
	tileops_op add = { "add", in, 2, &y, 1, NULL, 0 };
	run_ok(c, &add);
	th_read(c, y, got, sizeof(got));
	for (int i = 0; i < N; i++)
		cr_assert_eq(got[i], 2.0f * fresh[i], "element %d read before the client's write",
		             i);
	tileops_close(c);
	daemon2_stop(&d);
	CUDA_OK(cudaStreamSynchronize(s));
	cudaEventDestroy(ev);
	cudaStreamDestroy(s);
	cudaFree(buf);
	cudaFreeHost(fresh);
}

Test(gpu_ipc, the_client_waits_on_the_daemons_recorded_event)
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
	tileops_client *c = connect_to(&d, "ipc-event-record");
	tileops_tensor out = 0, tx = th_tensor_f32(c, 1, shape, x);
	cr_assert_eq(tileops_tensor_import(c, &h, 0, N * 4, TILEOPS_F32, 1, shape, &out),
	             TILEOPS_OK, "%s", tileops_last_error());
	/* The daemon's stream writes out = x + 1 after 300 ms of spinning. */
	tileops_param p[2] = { tileops_param_int("ns", 300000000), tileops_param_int("blocks", 4) };
	tileops_op spin = { "spin", &tx, 1, &out, 1, p, 2 };
	run_ok(c, &spin);
	tileops_ipc_event tev, again;
	cr_assert_eq(tileops_event_record(c, &tev), TILEOPS_OK, "%s", tileops_last_error());
	cudaIpcEventHandle_t eh;
	memcpy(&eh, tev.bytes, sizeof(eh));
	cudaEvent_t ev;
	CUDA_OK(cudaIpcOpenEventHandle(&ev, eh));
	CUDA_OK(cudaStreamWaitEvent(s, ev, 0));
	CUDA_OK(cudaMemcpyAsync(got, buf, N * 4, cudaMemcpyDeviceToHost, s));
	CUDA_OK(cudaStreamSynchronize(s));
	for (int i = 0; i < N; i++)
		cr_assert_eq(got[i], x[i] + 1.0f, "element %d copied before the daemon wrote it",
		             i);
	/* The session records the same event each time. */
	cr_assert_eq(tileops_event_record(c, &again), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert(memcmp(tev.bytes, again.bytes, sizeof(tev.bytes)) == 0);
	cudaEventDestroy(ev);
	tileops_close(c);
	daemon2_stop(&d);
	cudaStreamDestroy(s);
	cudaFree(buf);
	cudaFreeHost(got);
}
