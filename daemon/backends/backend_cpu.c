/*
 * backend_cpu.c - the CPU backend: tensors in host memory, the plain-C
 * reference kernels. It serves the whole protocol so that every daemon
 * feature runs where there is no GPU (CI, laptops), and it behaves as a
 * GPU does: launches, copies, frees and graph replays are queued on the
 * session's stream and return; a pool of "device" threads runs each
 * stream's queue in order, different streams at once; fences pass when
 * their stream's queue has run past them. Streams have the GPU's two
 * priorities (stream_priority): a free pool thread takes the next item of a
 * normal-priority stream before any low-priority one's, and never stops an
 * item it runs, as a GPU dispatches a higher-priority stream's blocks first
 * as SMs free up but does not preempt blocks running.
 *
 * One lock (cpu_impl.mu) guards every queue, stream, fence and per-thread
 * record below; kernels and copies run outside it. At most one pool thread
 * runs a stream at a time, so a stream's order holds. An idle pool sleeps
 * on a condition variable.
 *
 * What the executor must see on its own thread (the stats' per-thread
 * shards, the ring completions of timed ops) is not done here: a finished
 * item's time goes back to the executor thread that queued it, which
 * reports it through be->timing_cb from collect_timings (or fence_query),
 * as the CUDA backend does once the device has finished. The queues and the
 * pool are cpu_pool.c; this file is the backend interface over them.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "clock.h"
#include "cpu_pool.h"

/* ---- threads and streams ---------------------------------------------------- */

static tileops_status cpu_thread_init(backend *be, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	cpu_tls = calloc(1, sizeof(*cpu_tls));
	if (!cpu_tls) {
		snprintf(err, errlen, "out of memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&im->mu);
	im->executors++;
	pthread_mutex_unlock(&im->mu);
	return TILEOPS_OK;
}

static void cpu_collect(backend *be);

static void cpu_thread_fini(backend *be)
{
	cpu_impl *im = be->impl;
	cpu_thread *t = cpu_tls;
	if (!t)
		return;
	pthread_mutex_lock(&im->mu);
	while (t->owned > 0)
		pthread_cond_wait(&im->idle_cv, &im->mu);
	t->wake = NULL;
	pthread_mutex_unlock(&im->mu);
	cpu_collect(be);
	free(t);
	cpu_tls = NULL;
}

static void cpu_thread_waker(backend *be, void (*wake)(void *arg), void *arg)
{
	cpu_impl *im = be->impl;
	if (!cpu_tls)
		return;
	pthread_mutex_lock(&im->mu);
	cpu_tls->wake = wake;
	cpu_tls->wake_arg = arg;
	pthread_mutex_unlock(&im->mu);
}

static void cpu_destroy(backend *be)
{
	cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mu);
	im->stopping = 1;
	pthread_cond_broadcast(&im->work_cv);
	pthread_mutex_unlock(&im->mu);
	for (int i = 0; i < im->n_pool; i++)
		pthread_join(im->pool[i], NULL);
	free(im->pool);
	cpu_release_deferred_locked(im); /* nothing is queued any more */
	pthread_cond_destroy(&im->work_cv);
	pthread_cond_destroy(&im->idle_cv);
	pthread_mutex_destroy(&im->mu);
	free(im);
	free(be);
}

static tileops_status cpu_stream_create(backend *be, int device, void **stream, char *err,
                                        size_t errlen)
{
	cpu_impl *im = be->impl;
	(void)device; /* the emulated devices share the host's memory and threads */
	cpu_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of host memory creating a stream");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	s->refs = 1;
	pthread_mutex_lock(&im->mu);
	cpu_pool_start_locked(be);
	int started = im->n_pool > 0;
	pthread_mutex_unlock(&im->mu);
	if (!started) {
		free(s);
		snprintf(err, errlen, "cannot start the CPU backend's threads");
		return TILEOPS_ERR_BACKEND;
	}
	*stream = s;
	return TILEOPS_OK;
}

/* Wait until s has run everything queued on it (mu held). */
static void drain_locked(cpu_impl *im, cpu_stream *s)
{
	while (!cpu_stream_idle(s))
		pthread_cond_wait(&im->idle_cv, &im->mu);
}

static void cpu_stream_destroy(backend *be, void *stream)
{
	cpu_impl *im = be->impl;
	cpu_stream *s = stream;
	if (!s)
		return;
	pthread_mutex_lock(&im->mu);
	drain_locked(im, s);
	if (s->recording)
		cpu_graph_unref_locked(s->recording);
	s->recording = NULL;
	cpu_stream_unref_locked(s);
	pthread_mutex_unlock(&im->mu);
}

/* Work queued on the stream from now on runs at the low (1) or normal (0)
 * priority; what it has queued keeps the priority it was queued with, and
 * the stream's order holds either way (one thread runs it at a time). */
static void cpu_stream_priority(backend *be, void *stream, int low)
{
	cpu_impl *im = be->impl;
	cpu_stream *s = stream;
	pthread_mutex_lock(&im->mu);
	s->low = low != 0;
	pthread_mutex_unlock(&im->mu);
}

static void cpu_arena_noop(backend *be, arena *a)
{
}

static tileops_status cpu_alloc(backend *be, int device, size_t bytes, void **ptr, char *err,
                                size_t errlen)
{
	(void)device;
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

/* Freed in stream order, once no work queued before it on any stream is
 * left (as cudaFree waits for the device). */
static void cpu_free(backend *be, void *stream, void *ptr)
{
	cpu_impl *im = be->impl;
	char err[64];
	if (!ptr)
		return;
	cpu_item *it = cpu_item_new(ITEM_FREE, err, sizeof(err));
	pthread_mutex_lock(&im->mu);
	if (!im->all_head || !it || !stream) {
		/* Nothing queued anywhere: nothing can use it. Without memory to
		 * queue the free, wait for the stream instead. */
		if (it && stream)
			drain_locked(im, stream);
		while (!it && im->all_head)
			pthread_cond_wait(&im->idle_cv, &im->mu);
		free(ptr);
		free(it);
	} else {
		it->u.ptr = ptr;
		cpu_enqueue_locked(im, stream, it);
	}
	pthread_mutex_unlock(&im->mu);
}

static tileops_status cpu_copy(backend *be, void *stream, item_kind kind, void *dev, const arena *a,
                               size_t aoff, size_t len, char *err, size_t errlen)
{
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	cpu_item *it = cpu_item_new(kind, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.copy.dev = dev;
	it->u.copy.a = *a;
	it->u.copy.off = aoff;
	it->u.copy.len = len;
	cpu_enqueue(be, stream, it);
	return TILEOPS_OK;
}

static tileops_status cpu_stream_wait(backend *be, void *stream, void *after, char *err,
                                      size_t errlen)
{
	cpu_impl *im = be->impl;
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	pthread_mutex_lock(&im->mu);
	tileops_status st = cpu_wait_locked(im, stream, after, err, errlen);
	pthread_mutex_unlock(&im->mu);
	return st;
}

static tileops_status cpu_device_copy(backend *be, void *stream, void *dst, const void *src,
                                      size_t len, char *err, size_t errlen)
{
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	cpu_item *it = cpu_item_new(ITEM_DCOPY, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.dcopy.dst = dst;
	it->u.dcopy.src = src;
	it->u.dcopy.len = len;
	cpu_enqueue(be, stream, it);
	return TILEOPS_OK;
}

static tileops_status cpu_write(backend *be, void *stream, void *dst, const arena *a, size_t aoff,
                                size_t len, char *err, size_t errlen)
{
	return cpu_copy(be, stream, ITEM_WRITE, dst, a, aoff, len, err, errlen);
}

static tileops_status cpu_read(backend *be, void *stream, const void *src, const arena *a,
                               size_t aoff, size_t len, char *err, size_t errlen)
{
	return cpu_copy(be, stream, ITEM_READ, (void *)src, a, aoff, len, err, errlen);
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

/* The call is copied whole: it holds tensor views by value, and the
 * memory they point at is freed only in stream order (cpu_free). */
static tileops_status cpu_launch(backend *be, void *stream, const tk_kernel_entry *k,
                                 const tk_call *call, int timed, int slot, void *arg, char *err,
                                 size_t errlen)
{
	cpu_stream *cs = stream;
	if (cs->recording)
		return cpu_record(cs->recording, k, call, err, errlen);
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	cpu_item *it = cpu_item_new(ITEM_KERNEL, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.kern.k = k;
	it->u.kern.call = *call;
	it->timed = timed && be->timing_cb;
	it->slot = slot;
	it->arg = arg;
	cpu_enqueue(be, cs, it);
	return TILEOPS_OK;
}

/* The stream's status, as a fence after all of it would report it. */
static tileops_status stream_status_locked(backend *be, cpu_stream *s, char *err, size_t errlen)
{
	if (backend_lost(be, err, errlen))
		return TILEOPS_ERR_BACKEND;
	if (s->err_serial > s->err_answered) {
		snprintf(err, errlen, "%s", s->err_msg);
		return s->err_status;
	}
	return TILEOPS_OK;
}

static tileops_status cpu_sync(backend *be, void *stream, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mu);
	drain_locked(im, stream);
	pthread_mutex_unlock(&im->mu);
	cpu_observe_fault(be);
	pthread_mutex_lock(&im->mu);
	tileops_status st = stream_status_locked(be, stream, err, errlen);
	pthread_mutex_unlock(&im->mu);
	cpu_collect(be);
	return st;
}

/* ---- fences and timings ------------------------------------------------------ */

static tileops_status cpu_fence_create(backend *be, void *stream, void **fence, char *err,
                                       size_t errlen)
{
	cpu_impl *im = be->impl;
	cpu_stream *s = stream;
	cpu_fence *f = calloc(1, sizeof(*f));
	cpu_item *it = f ? cpu_item_new(ITEM_FENCE, err, errlen) : NULL;
	if (!it) {
		free(f);
		snprintf(err, errlen, "out of host memory making a fence");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	f->s = s;
	f->im = im;
	f->refs = 1;
	pthread_mutex_lock(&im->mu);
	s->refs++;
	if (cpu_stream_idle(s)) {
		cpu_fence_pass_locked(f); /* nothing before it is left to run */
		free(it);
	} else {
		f->refs++;
		it->u.fence = f;
		cpu_enqueue_locked(im, s, it);
	}
	pthread_mutex_unlock(&im->mu);
	*fence = f;
	return TILEOPS_OK;
}

/* A passed fence is reported only once the times of the work before it
 * have been: a timed op's completion never comes after a later sync's. */
static tileops_status cpu_fence_query(backend *be, void *fence, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	cpu_fence *f = fence;
	tileops_status st;
	cpu_observe_fault(be);
	pthread_mutex_lock(&im->mu);
	if (backend_lost(be, err, errlen)) {
		st = TILEOPS_ERR_BACKEND;
	} else if (!f->passed) {
		st = TILEOPS_IN_PROGRESS;
	} else {
		st = f->status;
		if (st != TILEOPS_OK)
			snprintf(err, errlen, "%s", f->msg);
	}
	pthread_mutex_unlock(&im->mu);
	if (st != TILEOPS_IN_PROGRESS)
		cpu_collect(be);
	return st;
}

static void cpu_fence_answered(backend *be, void *fence)
{
	cpu_impl *im = be->impl;
	cpu_fence *f = fence;
	pthread_mutex_lock(&im->mu);
	if (f->passed && f->err_serial > f->s->err_answered)
		f->s->err_answered = f->err_serial;
	pthread_mutex_unlock(&im->mu);
}

static void cpu_fence_free(backend *be, void *fence)
{
	cpu_impl *im = be->impl;
	if (!fence)
		return;
	pthread_mutex_lock(&im->mu);
	cpu_fence_unref_locked(fence);
	pthread_mutex_unlock(&im->mu);
}

/* Report this thread's finished kernels' times (executor thread). */
static void cpu_collect(backend *be)
{
	cpu_impl *im = be->impl;
	cpu_thread *t = cpu_tls;
	if (!t)
		return;
	pthread_mutex_lock(&im->mu);
	cpu_item *it = t->done_head;
	t->done_head = t->done_tail = NULL;
	pthread_mutex_unlock(&im->mu);
	while (it) {
		cpu_item *next = it->next;
		if (be->timing_cb)
			be->timing_cb(be->timing_ctx, it->slot, it->arg, it->us);
		free(it);
		it = next;
	}
}

/* ---- plans -------------------------------------------------------------------- */

static void cpu_graph_destroy(backend *be, void *graph)
{
	cpu_impl *im = be->impl;
	if (!graph)
		return;
	pthread_mutex_lock(&im->mu);
	cpu_graph_unref_locked(graph);
	pthread_mutex_unlock(&im->mu);
}

static tileops_status cpu_capture_begin(backend *be, void *stream, char *err, size_t errlen)
{
	cpu_stream *cs = stream;
	cs->recording = calloc(1, sizeof(cpu_graph));
	if (!cs->recording) {
		snprintf(err, errlen, "out of host memory recording a plan");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	cs->recording->refs = 1;
	return TILEOPS_OK;
}

/* A replay of the earlier graph still queued keeps its own calls. */
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
	cpu_impl *im = be->impl;
	cpu_graph *g = graph;
	if (cpu_observe_fault(be))
		return cpu_lost_error(be, err, errlen);
	if (g->n == 0)
		return TILEOPS_OK;
	cpu_item *it = cpu_item_new(ITEM_GRAPH, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.graph = g;
	pthread_mutex_lock(&im->mu);
	g->refs++;
	cpu_enqueue_locked(im, stream, it);
	pthread_mutex_unlock(&im->mu);
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
	.thread_fini = cpu_thread_fini,
	.thread_waker = cpu_thread_waker,
	.destroy = cpu_destroy,
	.stream_create = cpu_stream_create,
	.stream_destroy = cpu_stream_destroy,
	.stream_priority = cpu_stream_priority,
	.arena_attach = cpu_arena_noop,
	.arena_detach = cpu_arena_noop,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.write = cpu_write,
	.read = cpu_read,
	.launch = cpu_launch,
	.sync = cpu_sync,
	.stream_wait = cpu_stream_wait,
	.copy = cpu_device_copy,
	.collective = cpu_collective,
	.fence_create = cpu_fence_create,
	.fence_query = cpu_fence_query,
	.fence_answered = cpu_fence_answered,
	.fence_free = cpu_fence_free,
	.capture_begin = cpu_capture_begin,
	.capture_end = cpu_capture_end,
	.capture_abort = cpu_capture_abort,
	.graph_launch = cpu_graph_launch,
	.graph_destroy = cpu_graph_destroy,
	.ipc_export = cpu_ipc_export,
	.ipc_import = cpu_ipc_import,
	.ipc_close = cpu_ipc_close,
	.collect_timings = cpu_collect,
	.ceilings = cpu_ceilings,
};

backend *backend_cpu_open(const backend_options *opt, char *err, size_t errlen)
{
	backend *be = calloc(1, sizeof(*be));
	cpu_impl *im = calloc(1, sizeof(*im));
	if (!be || !im) {
		free(be);
		free(im);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&im->mu, NULL);
	pthread_cond_init(&im->work_cv, NULL);
	pthread_cond_init(&im->idle_cv, NULL);
	im->cpus = backend_usable_cpus();
	be->ops = &cpu_ops;
	be->impl = im;
	be->name = "cpu";
	snprintf(be->device, sizeof(be->device), "CPU reference kernels (%d cores)", im->cpus);
	be->n_devices = opt && opt->n_devices > 0 ? opt->n_devices : 1;
	for (int i = 0; i < be->n_devices; i++) {
		backend_device *d = &be->devices[i];
		d->ordinal = opt && opt->n_devices > 0 ? opt->devices[i] : 0;
		d->mps = -1;
		if (be->n_devices == 1)
			snprintf(d->name, sizeof(d->name), "%s", be->device);
		else
			snprintf(d->name, sizeof(d->name),
			         "CPU reference kernels (%d cores), emulated device %d", im->cpus,
			         d->ordinal);
	}
	be->capabilities = 0;
	be->is_gpu = 0;
	/* Rough rates of one core running the reference kernels, for the
	 * estimates that hold a session with much queued (exec/share.h). */
	be->bytes_per_us = 4000.0;
	be->flops_per_us = 2000.0;
	return be;
}
