/*
 * test_gpu_collective.c - the CUDA backend on every GPU of the machine (at
 * most 8), opened directly (daemon/backends/backend_cuda.c): the devices
 * it lists, collectives through NCCL against a result computed on the
 * host, and stream_wait and copy between two GPUs.
 *
 * Each collective kind and reduction runs in f32 and bf16 over ranks on
 * devices 0..k-1 for every k from 1 to the machine's count, on fresh
 * random data (the seed is in every failure), into outputs poisoned with
 * NaN first. The data are multiples of 1/4 in [-8, 8]: every partial sum
 * of up to 8 of them is exact in bf16 and f32, so the device's result must
 * equal the host's exactly, whatever order NCCL adds in.
 *
 * NCCL is loaded by the backend (dlopen "libnccl.so.2"); where it cannot
 * be, every collective test fails with the backend's message saying why.
 */
#include <criterion/criterion.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "arena.h"
#include "backend.h"

#define MAX_GPUS 8
#define ARENA_BYTES ((size_t)64 << 20)

static backend *be;
static arena stage; /* host staging for every write and read */
static uint64_t seed, rng;

static void setup(void)
{
	char err[512];
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	cr_assert(e == cudaSuccess && n > 0, "no CUDA device is usable (%s)",
	          e == cudaSuccess ? "none found" : cudaGetErrorString(e));
	backend_options opt = { .n_devices = n < MAX_GPUS ? n : MAX_GPUS };
	for (int d = 0; d < opt.n_devices; d++)
		opt.devices[d] = d;
	cr_assert_eq(arena_global_init(), 0);
	be = backend_cuda_open(&opt, err, sizeof(err));
	cr_assert_not_null(be, "backend_cuda_open with %d GPUs: %s", opt.n_devices, err);
	cr_assert_eq(be->ops->thread_init(be, err, sizeof(err)), TILEOPS_OK, "%s", err);
	/* The backend takes the mapping over when it is detached. */
	stage.base =
	        mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(stage.base, MAP_FAILED);
	stage.size = ARENA_BYTES;
	be->ops->arena_attach(be, &stage);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	seed = rng = ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) | 1;
}

static void teardown(void)
{
	if (!be)
		return;
	be->ops->arena_detach(be, &stage);
	if (stage.base)
		munmap(stage.base, stage.size);
	be->ops->thread_fini(be);
	backend_close(be);
	be = NULL;
}

TestSuite(gpu_collective, .init = setup, .fini = teardown, .timeout = 600);

static uint32_t next_u32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* A multiple of 1/4 in [-8, 8]. */
static float quarter(void)
{
	return (float)((int)(next_u32() % 65) - 32) * 0.25f;
}

static void *stream_on(int device)
{
	char err[256];
	void *s = NULL;
	cr_assert_eq(be->ops->stream_create(be, device, &s, err, sizeof(err)), TILEOPS_OK,
	             "device %d: %s", device, err);
	return s;
}

static void *device_alloc(int device, size_t bytes)
{
	char err[256];
	void *p = NULL;
	cr_assert_eq(be->ops->alloc(be, device, bytes, &p, err, sizeof(err)), TILEOPS_OK,
	             "device %d, %zu bytes: %s", device, bytes, err);
	return p;
}

static void sync_ok(void *stream)
{
	char err[256];
	cr_assert_eq(be->ops->sync(be, stream, err, sizeof(err)), TILEOPS_OK, "%s", err);
}

/* Bytes to device memory and back, through the staging arena, each done
 * before it returns. */
static void put(void *stream, void *dst, const void *src, size_t bytes)
{
	char err[256];
	cr_assert_leq(bytes, stage.size);
	memcpy(stage.base, src, bytes);
	cr_assert_eq(be->ops->write(be, stream, dst, &stage, 0, bytes, err, sizeof(err)),
	             TILEOPS_OK, "%s", err);
	sync_ok(stream);
}

static void get(void *stream, void *dst, const void *src, size_t bytes)
{
	char err[256];
	cr_assert_leq(bytes, stage.size);
	cr_assert_eq(be->ops->read(be, stream, src, &stage, 0, bytes, err, sizeof(err)), TILEOPS_OK,
	             "%s", err);
	sync_ok(stream);
	memcpy(dst, stage.base, bytes);
}

/* Host floats as dtype's bytes and back (the values are exact in bf16). */
static size_t elem_bytes(tk_dtype dt)
{
	return dt == TK_F32 ? 4 : 2;
}

static void encode(tk_dtype dt, const float *v, size_t n, void *out)
{
	if (dt == TK_F32) {
		memcpy(out, v, n * sizeof(float));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		((uint16_t *)out)[i] = (uint16_t)(u >> 16);
	}
}

static float decode(tk_dtype dt, const void *in, size_t i)
{
	if (dt == TK_F32)
		return ((const float *)in)[i];
	uint32_t u = (uint32_t)((const uint16_t *)in)[i] << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float reduce2(backend_reduce op, float a, float b)
{
	switch (op) {
	case BACKEND_MAX:
		return a > b ? a : b;
	case BACKEND_MIN:
		return a < b ? a : b;
	case BACKEND_SUM:
	default:
		return a + b;
	}
}

static const char *kind_name(backend_coll_kind k)
{
	return k == BACKEND_ALL_REDUCE   ? "all_reduce"
	       : k == BACKEND_ALL_GATHER ? "all_gather"
	                                 : "reduce_scatter";
}

static const char *reduce_name(backend_reduce r)
{
	return r == BACKEND_SUM ? "sum" : r == BACKEND_MAX ? "max" : "min";
}

/* A float whose bytes are all 0xff: NaN, and NaN again as bf16. */
static float poison(void)
{
	uint32_t u = 0xffffffffu;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/*
 * One collective over n ranks, rank r on device devs[r] with a stream of
 * its own, count elements a rank, checked on every rank against the host.
 * In place, each rank has one buffer laid out as NCCL's in-place forms
 * want it: ALL_REDUCE sends its recv; ALL_GATHER sends part r of its recv
 * (the other parts poisoned first); REDUCE_SCATTER receives into part r of
 * its send, whose other parts keep their values.
 */
static void check_one(backend_coll_kind kind, backend_reduce op, tk_dtype dt, int n,
                      const int *devs, size_t count, int in_place)
{
	size_t es = elem_bytes(dt);
	size_t send_n = kind == BACKEND_REDUCE_SCATTER ? (size_t)n * count : count;
	size_t recv_n = kind == BACKEND_ALL_GATHER ? (size_t)n * count : count;
	size_t buf_n = send_n > recv_n ? send_n : recv_n;
	/* Rank r's send data; in place, also each rank's buffer before and
	 * after (else its recv before and after). */
	float *in = malloc(sizeof(float) * send_n * (size_t)n);
	float *before = malloc(sizeof(float) * buf_n);
	float *want = malloc(sizeof(float) * buf_n);
	void *bytes = malloc(buf_n * es);
	void *streams[MAX_GPUS], *send[MAX_GPUS], *recv[MAX_GPUS], *buf[MAX_GPUS];
	size_t recv_at = 0; /* recv's place in the buffer, in elements */
	cr_assert(in && before && want && bytes);
	for (size_t i = 0; i < send_n * (size_t)n; i++)
		in[i] = quarter();
	backend_coll c = { .kind = kind, .reduce = op, .dtype = dt, .count = count, .n = n };
	for (int r = 0; r < n; r++) {
		const float *mine = in + (size_t)r * send_n;
		streams[r] = stream_on(devs[r]);
		if (in_place) {
			buf[r] = device_alloc(devs[r], buf_n * es);
			for (size_t i = 0; i < buf_n; i++)
				before[i] = kind == BACKEND_ALL_GATHER ? poison() : mine[i];
			if (kind == BACKEND_ALL_GATHER)
				memcpy(before + (size_t)r * count, mine, sizeof(float) * count);
			size_t send_at = kind == BACKEND_ALL_GATHER ? (size_t)r * count : 0;
			recv_at = kind == BACKEND_REDUCE_SCATTER ? (size_t)r * count : 0;
			send[r] = (char *)buf[r] + send_at * es;
			recv[r] = (char *)buf[r] + recv_at * es;
			encode(dt, before, buf_n, bytes);
			put(streams[r], buf[r], bytes, buf_n * es);
		} else {
			send[r] = device_alloc(devs[r], send_n * es);
			buf[r] = recv[r] = device_alloc(devs[r], recv_n * es);
			encode(dt, mine, send_n, bytes);
			put(streams[r], send[r], bytes, send_n * es);
			for (size_t i = 0; i < recv_n; i++)
				before[i] = poison();
			encode(dt, before, recv_n, bytes);
			put(streams[r], recv[r], bytes, recv_n * es);
		}
		c.parts[r] = (backend_coll_part){ streams[r], send[r], recv[r] };
	}
	char err[512];
	tileops_status st = be->ops->collective(be, &c, err, sizeof(err));
	cr_assert_eq(st, TILEOPS_OK, "%s %s %s over %d ranks, %zu elements: %s", kind_name(kind),
	             reduce_name(op), dt == TK_F32 ? "f32" : "bf16", n, count, err);
	size_t got_n = in_place ? buf_n : recv_n;
	for (int r = 0; r < n; r++) {
		/* What rank r's buffer must hold: its send data where an in-place
		 * reduce-scatter leaves it, the result in its recv. */
		if (in_place && kind == BACKEND_REDUCE_SCATTER)
			memcpy(want, in + (size_t)r * send_n, sizeof(float) * buf_n);
		recv_at = in_place && kind == BACKEND_REDUCE_SCATTER ? (size_t)r * count : 0;
		for (size_t i = 0; i < recv_n; i++) {
			if (kind == BACKEND_ALL_GATHER) {
				want[i] = in[(i / count) * send_n + i % count];
				continue;
			}
			size_t at = kind == BACKEND_REDUCE_SCATTER ? (size_t)r * count + i : i;
			float acc = in[at];
			for (int q = 1; q < n; q++)
				acc = reduce2(op, acc, in[(size_t)q * send_n + at]);
			want[recv_at + i] = acc;
		}
		get(streams[r], bytes, buf[r], got_n * es);
		for (size_t i = 0; i < got_n; i++) {
			float got = decode(dt, bytes, i);
			cr_assert(got == want[i],
			          "%s %s %s over %d ranks (rank %d on device %d), %zu elements%s: "
			          "element %zu is %g, expected %g (seed %llu)",
			          kind_name(kind), reduce_name(op), dt == TK_F32 ? "f32" : "bf16",
			          n, r, devs[r], count, in_place ? ", in place" : "", i,
			          (double)got, (double)want[i], (unsigned long long)seed);
		}
	}
	for (int r = 0; r < n; r++) {
		be->ops->free(be, streams[r], buf[r]);
		if (!in_place)
			be->ops->free(be, streams[r], send[r]);
		be->ops->stream_destroy(be, streams[r]);
	}
	free(in);
	free(before);
	free(want);
	free(bytes);
}

/* Every device count from 1 to the machine's, ranks on devices 0..k-1, at
 * one element, at an odd count, and at one of several MiB. */
static void check_kind(backend_coll_kind kind, backend_reduce op, tk_dtype dt)
{
	static const size_t counts[] = { 1, 4099, ((size_t)1 << 20) + 3 };
	int devs[MAX_GPUS];
	for (int d = 0; d < MAX_GPUS; d++)
		devs[d] = d;
	for (int k = 1; k <= be->n_devices; k++)
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
			check_one(kind, op, dt, k, devs, counts[i], 0);
}

Test(gpu_collective, every_gpu_is_listed_with_its_memory)
{
	int n = 0;
	cr_assert_eq(cudaGetDeviceCount(&n), cudaSuccess);
	cr_assert_eq(be->n_devices, n < MAX_GPUS ? n : MAX_GPUS);
	for (int d = 0; d < be->n_devices; d++) {
		cr_assert_eq(be->devices[d].ordinal, d);
		cr_assert_gt(be->devices[d].memory_bytes, 1ull << 30, "device %d: %llu bytes", d,
		             (unsigned long long)be->devices[d].memory_bytes);
		cr_assert_not_null(strstr(be->devices[d].name, "sm_90"), "%s", be->devices[d].name);
	}
}

Test(gpu_collective, all_reduce_sum_f32)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_SUM, TK_F32);
}

Test(gpu_collective, all_reduce_max_f32)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_MAX, TK_F32);
}

Test(gpu_collective, all_reduce_min_f32)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_MIN, TK_F32);
}

Test(gpu_collective, all_reduce_sum_bf16)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_SUM, TK_BF16);
}

Test(gpu_collective, all_reduce_max_bf16)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_MAX, TK_BF16);
}

Test(gpu_collective, all_reduce_min_bf16)
{
	check_kind(BACKEND_ALL_REDUCE, BACKEND_MIN, TK_BF16);
}

Test(gpu_collective, all_gather_f32)
{
	check_kind(BACKEND_ALL_GATHER, BACKEND_SUM, TK_F32);
}

Test(gpu_collective, all_gather_bf16)
{
	check_kind(BACKEND_ALL_GATHER, BACKEND_SUM, TK_BF16);
}

Test(gpu_collective, reduce_scatter_sum_f32)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_SUM, TK_F32);
}

Test(gpu_collective, reduce_scatter_max_f32)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_MAX, TK_F32);
}

Test(gpu_collective, reduce_scatter_min_f32)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_MIN, TK_F32);
}

Test(gpu_collective, reduce_scatter_sum_bf16)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_SUM, TK_BF16);
}

Test(gpu_collective, reduce_scatter_max_bf16)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_MAX, TK_BF16);
}

Test(gpu_collective, reduce_scatter_min_bf16)
{
	check_kind(BACKEND_REDUCE_SCATTER, BACKEND_MIN, TK_BF16);
}

/* NCCL's in-place layouts, which the daemon's collectives use (each rank
 * one tensor). */
Test(gpu_collective, every_kind_works_in_place)
{
	int devs[MAX_GPUS];
	for (int d = 0; d < MAX_GPUS; d++)
		devs[d] = d;
	for (int k = 1; k <= be->n_devices; k++) {
		check_one(BACKEND_ALL_REDUCE, BACKEND_SUM, TK_F32, k, devs, 65537, 1);
		check_one(BACKEND_ALL_REDUCE, BACKEND_MAX, TK_BF16, k, devs, 65537, 1);
		check_one(BACKEND_ALL_GATHER, BACKEND_SUM, TK_BF16, k, devs, 65537, 1);
		check_one(BACKEND_REDUCE_SCATTER, BACKEND_SUM, TK_F32, k, devs, 65537, 1);
		check_one(BACKEND_REDUCE_SCATTER, BACKEND_MIN, TK_BF16, k, devs, 65537, 1);
	}
}

/* Ranks are places in parts[], not device indexes: with ranks on the
 * devices in reverse, rank 0's data (on the last device) comes first. */
Test(gpu_collective, ranks_follow_their_order_in_parts_not_the_device_order)
{
	int devs[MAX_GPUS];
	for (int k = 1; k <= be->n_devices; k++) {
		for (int r = 0; r < k; r++)
			devs[r] = k - 1 - r;
		check_one(BACKEND_ALL_GATHER, BACKEND_SUM, TK_F32, k, devs, 4099, 0);
		check_one(BACKEND_REDUCE_SCATTER, BACKEND_SUM, TK_BF16, k, devs, 4099, 0);
	}
}

Test(gpu_collective, two_ranks_on_one_device_are_refused)
{
	void *a = stream_on(0), *b = stream_on(0);
	void *x = device_alloc(0, 64), *y = device_alloc(0, 64);
	backend_coll c = { .kind = BACKEND_ALL_REDUCE, .dtype = TK_F32, .count = 16, .n = 2 };
	c.parts[0] = (backend_coll_part){ a, x, x };
	c.parts[1] = (backend_coll_part){ b, y, y };
	char err[512] = "";
	cr_assert_eq(be->ops->collective(be, &c, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT,
	             "%s", err);
	cr_assert_not_null(strstr(err, "device of its own"), "%s", err);
	be->ops->free(be, a, x);
	be->ops->free(be, b, y);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
}

/*
 * 64 MiB written to device 0 on one stream, copied to device 1 on a stream
 * of device 1 that waited for it, and back to device 0 on a third stream
 * that waited for the copy: a copy not ordered after the write before it
 * reads zeros (the allocation's) for the bytes not yet written.
 */
Test(gpu_collective, a_copy_between_gpus_waits_for_the_other_gpus_stream)
{
	if (be->n_devices < 2)
		cr_skip_test("one GPU: a copy between GPUs needs two");
	enum { N = 16 << 20 };
	const size_t bytes = sizeof(float) * N;
	char err[256];
	float *v = malloc(bytes), *back = malloc(bytes);
	cr_assert(v && back);
	for (int i = 0; i < N; i++)
		v[i] = (float)(i % 1000) + 1.0f;
	void *a = stream_on(0), *b = stream_on(1), *c = stream_on(0);
	void *x = device_alloc(0, bytes), *y = device_alloc(1, bytes), *z = device_alloc(0, bytes);
	memcpy(stage.base, v, bytes);
	cr_assert_eq(be->ops->write(be, a, x, &stage, 0, bytes, err, sizeof(err)), TILEOPS_OK, "%s",
	             err);
	cr_assert_eq(be->ops->stream_wait(be, b, a, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->copy(be, b, y, x, bytes, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->stream_wait(be, c, b, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(be->ops->copy(be, c, z, y, bytes, err, sizeof(err)), TILEOPS_OK, "%s", err);
	get(c, back, z, bytes);
	for (int i = 0; i < N; i++)
		cr_assert_eq(back[i], v[i], "float %d came back as %g, written as %g", i,
		             (double)back[i], (double)v[i]);
	get(b, back, y, bytes);
	for (int i = 0; i < N; i++)
		cr_assert_eq(back[i], v[i], "float %d on device 1 is %g, written as %g", i,
		             (double)back[i], (double)v[i]);
	be->ops->free(be, a, x);
	be->ops->free(be, b, y);
	be->ops->free(be, c, z);
	be->ops->stream_destroy(be, a);
	be->ops->stream_destroy(be, b);
	be->ops->stream_destroy(be, c);
	free(v);
	free(back);
}
