/*
 * backend_cpu.c - the CPU backend: tensors in host memory, the plain-C
 * reference kernels. It serves the whole protocol so that every daemon
 * feature runs where there is no GPU (CI, laptops).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"

/* A plan on the CPU: the recorded calls, run in order. */
typedef struct cpu_graph {
	size_t n, cap;
	const tk_kernel_entry **kernels;
	tk_call *calls;
} cpu_graph;

typedef struct cpu_stream {
	cpu_graph *recording; /* between capture_begin and capture_end */
} cpu_stream;

static tileops_status cpu_thread_init(backend *be, char *err, size_t errlen)
{
	return TILEOPS_OK;
}

static void cpu_destroy(backend *be)
{
	free(be);
}

static tileops_status cpu_stream_create(backend *be, void **stream, char *err, size_t errlen)
{
	cpu_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of host memory creating a stream");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	*stream = s;
	return TILEOPS_OK;
}

static void cpu_graph_destroy(backend *be, void *graph);

static void cpu_stream_destroy(backend *be, void *stream)
{
	cpu_stream *cs = stream;
	if (cs)
		cpu_graph_destroy(be, cs->recording);
	free(stream);
}

static void cpu_arena_noop(backend *be, arena *a)
{
}

static tileops_status cpu_alloc(backend *be, size_t bytes, void **ptr, char *err, size_t errlen)
{
	/* 64-byte alignment, and never a zero-sized request. */
	size_t n = (bytes + 63) & ~(size_t)63;
	void *p = aligned_alloc(64, n ? n : 64);
	if (!p) {
		snprintf(err, errlen, "out of host memory allocating %zu bytes", bytes);
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	/* Zeroed: the memory may have held another session's data. */
	memset(p, 0, n ? n : 64);
	*ptr = p;
	return TILEOPS_OK;
}

static void cpu_free(backend *be, void *stream, void *ptr)
{
	free(ptr);
}

static tileops_status cpu_write(backend *be, void *stream, void *dst, const arena *a, size_t aoff,
                                size_t len, char *err, size_t errlen)
{
	if (arena_copy_in(a, aoff, dst, len) != 0) {
		snprintf(err, errlen,
		         "arena bytes [%zu, %zu) are no longer backed by the shm object", aoff,
		         aoff + len);
		return TILEOPS_ERR_RANGE;
	}
	return TILEOPS_OK;
}

static tileops_status cpu_read(backend *be, void *stream, const void *src, const arena *a,
                               size_t aoff, size_t len, char *err, size_t errlen)
{
	if (arena_copy_out(a, aoff, src, len) != 0) {
		snprintf(err, errlen,
		         "arena bytes [%zu, %zu) are no longer backed by the shm object", aoff,
		         aoff + len);
		return TILEOPS_ERR_RANGE;
	}
	return TILEOPS_OK;
}

static tileops_status cpu_record(cpu_graph *g, const tk_kernel_entry *k, const tk_call *call,
                                 char *err, size_t errlen)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		const tk_kernel_entry **nk = realloc(g->kernels, cap * sizeof(*nk));
		if (nk)
			g->kernels = nk;
		tk_call *nc = nk ? realloc(g->calls, cap * sizeof(*nc)) : NULL;
		if (!nc) {
			snprintf(err, errlen, "out of host memory recording a plan");
			return TILEOPS_ERR_OUT_OF_MEMORY;
		}
		g->calls = nc;
		g->cap = cap;
	}
	g->kernels[g->n] = k;
	g->calls[g->n] = *call;
	g->n++;
	return TILEOPS_OK;
}

static tileops_status cpu_launch(backend *be, void *stream, const tk_kernel_entry *k,
                                 const tk_call *call, int timed, int slot, void *arg, char *err,
                                 size_t errlen)
{
	cpu_stream *cs = stream;
	if (cs->recording)
		return cpu_record(cs->recording, k, call, err, errlen);
	double t0 = clock_now_us();
	tk_status st = k->cpu(call);
	double t1 = clock_now_us();
	if (st == TK_ERR_UNSUPPORTED) {
		snprintf(err, errlen, "%s: the CPU kernel does not support these arguments", k->op);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	if (st == TK_ERR_FAULT) {
		backend_mark_lost(be,
		                  "%s: the device faulted (the CPU backend's stand-in for a "
		                  "sticky device error)",
		                  k->op);
		snprintf(err, errlen, "%s: the device faulted; tileopsd is restarting", k->op);
		return TILEOPS_ERR_BACKEND;
	}
	if (st != TK_OK) {
		snprintf(err, errlen, "%s: the CPU kernel failed (status %d)", k->op, (int)st);
		return TILEOPS_ERR_BACKEND;
	}
	if (timed && be->timing_cb)
		be->timing_cb(be->timing_ctx, slot, arg, t1 - t0);
	return TILEOPS_OK;
}

static tileops_status cpu_sync(backend *be, void *stream, char *err, size_t errlen)
{
	return TILEOPS_OK;
}

/* The CPU backend runs everything to completion: a fence is always passed. */
static tileops_status cpu_fence_create(backend *be, void *stream, void **fence, char *err,
                                       size_t errlen)
{
	*fence = NULL;
	return TILEOPS_OK;
}

static tileops_status cpu_fence_query(backend *be, void *fence, char *err, size_t errlen)
{
	return TILEOPS_OK;
}

static void cpu_fence_free(backend *be, void *fence)
{
}

static void cpu_graph_destroy(backend *be, void *graph)
{
	cpu_graph *g = graph;
	if (!g)
		return;
	free(g->kernels);
	free(g->calls);
	free(g);
}

static tileops_status cpu_capture_begin(backend *be, void *stream, char *err, size_t errlen)
{
	cpu_stream *cs = stream;
	cs->recording = calloc(1, sizeof(cpu_graph));
	if (!cs->recording) {
		snprintf(err, errlen, "out of host memory recording a plan");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	return TILEOPS_OK;
}

static tileops_status cpu_capture_end(backend *be, void *stream, void **graph, size_t *bytes,
                                      char *err, size_t errlen)
{
	cpu_stream *cs = stream;
	cpu_graph_destroy(be, *graph);
	*graph = cs->recording;
	*bytes = cs->recording->n * sizeof(tk_call);
	cs->recording = NULL;
	return TILEOPS_OK;
}

static void cpu_capture_abort(backend *be, void *stream)
{
	cpu_stream *cs = stream;
	cpu_graph_destroy(be, cs->recording);
	cs->recording = NULL;
}

static tileops_status cpu_graph_launch(backend *be, void *stream, void *graph, char *err,
                                       size_t errlen)
{
	cpu_graph *g = graph;
	for (size_t i = 0; i < g->n; i++) {
		tileops_status st = cpu_launch(be, stream, g->kernels[i], &g->calls[i], 0, -1, NULL,
		                               err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	return TILEOPS_OK;
}

static tileops_status cpu_ipc_export(backend *be, void *ptr, unsigned char handle[64], char *err,
                                     size_t errlen)
{
	snprintf(err, errlen, "tensor export needs the CUDA backend (this daemon runs on the CPU)");
	return TILEOPS_ERR_UNSUPPORTED;
}

static tileops_status cpu_ipc_import(backend *be, const unsigned char handle[64], void **ptr,
                                     char *err, size_t errlen)
{
	snprintf(err, errlen, "tensor import needs the CUDA backend (this daemon runs on the CPU)");
	return TILEOPS_ERR_UNSUPPORTED;
}

static void cpu_ipc_close(backend *be, void *ptr)
{
}

/*
 * The memory bandwidth one core gets copying a buffer larger than the
 * caches (best of three; bytes read plus written), the ceiling the
 * reference kernels' bandwidth is judged against. Their flops have no
 * ceiling worth the name (scalar loops), so the flops peaks stay unknown.
 */
#define CPU_PROBE_BYTES (32u << 20)

static void cpu_ceilings(backend *be, backend_ceilings *out)
{
	(void)be;
	*out = (backend_ceilings){ .source = "measured" };
	char *a = malloc(CPU_PROBE_BYTES), *b = malloc(CPU_PROBE_BYTES);
	if (a && b) {
		memset(a, 1, CPU_PROBE_BYTES);
		memset(b, 2, CPU_PROBE_BYTES);
		double best = 0.0;
		for (int i = 0; i < 3; i++) {
			double t0 = clock_now_us();
			memcpy(i % 2 ? a : b, i % 2 ? b : a, CPU_PROBE_BYTES);
			double us = clock_now_us() - t0;
			if (us > 0.0 && (best == 0.0 || us < best))
				best = us;
		}
		/* Keeps the copies from being optimized away. */
		__asm__ volatile("" : : "r"(a), "r"(b) : "memory");
		if (best > 0.0)
			out->bandwidth_gbs = 2.0 * CPU_PROBE_BYTES / (best * 1e3);
	}
	free(a);
	free(b);
}

static const backend_ops cpu_ops = {
	.thread_init = cpu_thread_init,
	.thread_fini = NULL,
	.destroy = cpu_destroy,
	.stream_create = cpu_stream_create,
	.stream_destroy = cpu_stream_destroy,
	.arena_attach = cpu_arena_noop,
	.arena_detach = cpu_arena_noop,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.write = cpu_write,
	.read = cpu_read,
	.launch = cpu_launch,
	.sync = cpu_sync,
	.fence_create = cpu_fence_create,
	.fence_query = cpu_fence_query,
	.fence_free = cpu_fence_free,
	.capture_begin = cpu_capture_begin,
	.capture_end = cpu_capture_end,
	.capture_abort = cpu_capture_abort,
	.graph_launch = cpu_graph_launch,
	.graph_destroy = cpu_graph_destroy,
	.ipc_export = cpu_ipc_export,
	.ipc_import = cpu_ipc_import,
	.ipc_close = cpu_ipc_close,
	.collect_timings = NULL,
	.ceilings = cpu_ceilings,
};

backend *backend_cpu_open(char *err, size_t errlen)
{
	backend *be = calloc(1, sizeof(*be));
	if (!be) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	be->ops = &cpu_ops;
	be->name = "cpu";
	snprintf(be->device, sizeof(be->device), "CPU reference kernels (%ld cores)",
	         sysconf(_SC_NPROCESSORS_ONLN));
	be->capabilities = 0;
	be->is_gpu = 0;
	/* Rough rates of one core running the reference kernels: launches
	 * finish before they return, so the estimates (exec/share.h) never
	 * hold a session here; they are kept as on a GPU. */
	be->bytes_per_us = 4000.0;
	be->flops_per_us = 2000.0;
	return be;
}
