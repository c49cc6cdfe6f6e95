/*
 * backend_cuda.c - the CUDA backend: tensors in device memory, one stream
 * per session and device, kernels from kernels/ launched on it, on every
 * GPU of the devices setting. With cuda_nccl.c (the collectives) the only
 * daemon files that include CUDA headers; every call runs on the executor
 * thread.
 *
 * Several devices: streams, events, allocations and kernel launches belong
 * to the device current on the calling thread, so every operation first
 * makes its stream's device current (on_device), and what a thread keeps
 * per launch is kept per device as well (cuda_thread). A thread remembers
 * which device it made current, so one that stays on one device (every
 * thread when the backend serves one) sets it once, not per call.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "backend.h"
#include "clock.h"
#include "cuda_nccl.h"
#include "log.h"

#define CUDA_TIMING_RING 256
#define CUDA_BOUNCE_BYTES (8u << 20)

typedef struct cuda_timing {
	int slot;
	void *arg;
	cudaEvent_t start, stop;
} cuda_timing;

typedef struct cuda_ipc_map {
	unsigned char handle[64];
	void *ptr;
	int refs;
	struct cuda_ipc_map *next;
} cuda_ipc_map;

/*
 * A session's stream on one device, and the workspace its ops borrow
 * (TK_WORKSPACE_BYTES, made on the first op that can use it). Ops on one
 * stream run in order, so they can all share it.
 */
typedef struct cuda_stream {
	int device;              /* the index of its device */
	int ordinal;             /* that device's CUDA ordinal */
	cudaStream_t s;          /* where its work goes now: home, or low's */
	cudaStream_t home;       /* its own, at the normal priority */
	cudaEvent_t turn;        /* orders its work after a change of stream */
	struct cuda_stream *low; /* the low-priority stream it runs on while lowered */
	void *ws;
	cudaEvent_t ipc_ev;           /* event_record's, made on first use; NULL: none */
	unsigned char ipc_handle[64]; /* ipc_ev's handle, fetched once */
	int has_handle;
	int pooled;               /* one of the streams made at open */
	struct cuda_stream *next; /* in the pool's free list */
} cuda_stream;

/*
 * A device's streams made at open, one per hardware work queue asked for
 * (backend_options.queues), all at once so that each sits on a queue of its
 * own: most at the device's greatest priority, for sessions, and an eighth
 * at its least, for sessions lowered while they have much queued
 * (exec/share.h). A session takes the one free the longest and gives it
 * back when it closes. Sessions past the pool get streams of their own.
 */
typedef struct cuda_pool {
	pthread_mutex_t mu;
	cuda_stream *head, *tail; /* free, oldest first */
	cuda_stream **all;
	int n;
} cuda_pool;

/*
 * Releases put off: cudaFree and cudaHostUnregister wait for the whole
 * device and hold the driver's locks meanwhile, so every other thread's
 * launches stall for as long (on an H200 with 8 clients launching,
 * sessions closing beside them cost the others 4 to 6 launch calls of 1 ms
 * or more: docs/perf.md, "What the many-process figure rests on"). A
 * background thread does them while no executor thread has work
 * (be->active_threads), one at a time, or once one has waited
 * DEFER_MAX_US (then one every DEFER_GAP_US, busy or not), or at once when
 * an allocation runs short.
 */
typedef enum { DEFER_DEVICE, DEFER_ARENA } defer_kind;

typedef struct cuda_deferred {
	defer_kind kind;
	void *ptr;      /* device memory, or a pinned arena mapping */
	int ordinal;    /* the CUDA device of the memory (-1: any, an arena's) */
	size_t size;    /* the arena mapping's size */
	uint64_t since; /* when it was put off (now_us) */
	struct cuda_deferred *next;
} cuda_deferred;

#define DEFER_MAX_US 200000u
#define DEFER_GAP_US 5000u

/* One device the backend serves: its ordinal and the streams made for it. */
typedef struct cuda_device {
	int ordinal;
	cuda_pool pool, low_pool;
	int prio_normal, prio_low; /* stream priorities (equal: the device has none) */
} cuda_device;

typedef struct cuda_impl {
	cuda_device dev[BACKEND_MAX_DEVICES]; /* by index, as be->devices */
	int n_devices;
	/* CUDA IPC serves the first device only: imported memory is mapped
	 * into it, and only its memory is exported. */
	pthread_mutex_t ipc_mu; /* the executor threads share the IPC mappings */
	cuda_ipc_map *ipc;
	/* The releases put off, oldest first, and the thread that does them. */
	pthread_mutex_t defer_mu;
	pthread_cond_t defer_cv;
	cuda_deferred *deferred, *deferred_tail;
	int deferred_any; /* atomic: the list is not empty */
	pthread_t reaper;
	int reaper_running, reaper_stop;
	backend_ceilings ceil; /* from the first device's properties at open */
	cuda_nccl *nccl;       /* the collectives' communicators (NCCL, loaded on first use) */
} cuda_impl;

/*
 * An instantiated plan graph and the workspace its kernels were captured
 * with: a graph may replay on any stream while its session's stream runs
 * other work, so it owns its workspace.
 */
typedef struct cuda_graph {
	cudaGraphExec_t exec;
	void *ws;
	int device, ordinal; /* where it was captured, the only device it runs on */
} cuda_graph;

/* A fence: an event of one device, which pool it goes back to. */
typedef struct cuda_fence {
	cudaEvent_t ev;
	int device;
} cuda_fence;

/* Fence events each thread keeps made, per device. */
#define CUDA_FENCE_POOL 32

/* What an executor thread keeps for its own launches on one device (CUDA
 * events and streams belong to one device). */
typedef struct cuda_thread_dev {
	/* Launched ops whose device time is not collected yet, oldest first. */
	cuda_timing ring[CUDA_TIMING_RING];
	unsigned head, tail; /* tail - head entries in use */
	int capturing;       /* a plan is being captured: launches are not timed */
	void *capture_ws;    /* workspace made during the capture, for its graph */
	/* Fences to reuse (made at thread start, like the timing events). */
	cuda_fence *fences[CUDA_FENCE_POOL];
	int n_fences;
	cudaStream_t zero; /* where new tensors are zeroed (cuda_alloc) */
} cuda_thread_dev;

/* What each executor thread keeps: its state on every device, all made at
 * thread start. */
typedef struct cuda_thread {
	cuda_thread_dev *dev[BACKEND_MAX_DEVICES];
	void *bounce; /* pinned staging (portable: any device) for arenas that could not be pinned */
} cuda_thread;

static _Thread_local cuda_thread *cuda_tls;

/*
 * The CUDA device this file last made current on the calling thread, -1
 * when not known (before the first, and after code that may change it:
 * NCCL, another backend). Every thread has one, the release thread too.
 */
static _Thread_local int cuda_current = -1;

/* The one CUDA backend of the process (its device's sticky state is the
 * process's). */
static backend *cuda_be;

/*
 * Errors that leave the context unusable: the CUDA runtime documents each
 * as "the process must be terminated and relaunched".
 */
static int cuda_sticky(cudaError_t e)
{
	switch (e) {
	case cudaErrorECCUncorrectable:
	case cudaErrorNvlinkUncorrectable:
	case cudaErrorIllegalAddress:
	case cudaErrorLaunchTimeout:
	case cudaErrorAssert:
	case cudaErrorHardwareStackError:
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
	case cudaErrorLaunchFailure:
		return 1;
	default:
		return 0;
	}
}

static tileops_status cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
	if (cuda_sticky(e) && cuda_be)
		backend_mark_lost(cuda_be, "%s: %s (%s)", what, cudaGetErrorString(e),
		                  cudaGetErrorName(e));
	snprintf(err, errlen, "%s: %s (%s)%s", what, cudaGetErrorString(e), cudaGetErrorName(e),
	         cuda_sticky(e) ? "; the device's state is lost and tileopsd is restarting" : "");
	if (e == cudaErrorMemoryAllocation)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	return TILEOPS_ERR_BACKEND;
}

/* Make CUDA device `ordinal` current on the calling thread. */
static cudaError_t cuda_switch(int ordinal)
{
	cudaError_t e = cudaSetDevice(ordinal);
	cuda_current = e == cudaSuccess ? ordinal : -1;
	return e;
}

/* Make device `ordinal` current unless it is already: a comparison on the
 * path of every launch, a cudaSetDevice only when the thread moves. */
static inline cudaError_t on_device(int ordinal)
{
	return ordinal == cuda_current ? cudaSuccess : cuda_switch(ordinal);
}

/* The same, for a call that cannot return an error: a failure is logged,
 * and the call that follows fails (or runs on the wrong device) and says. */
static void on_device_or_log(int ordinal, const char *what)
{
	cudaError_t e = on_device(ordinal);
	if (e != cudaSuccess) {
		cudaGetLastError();
		log_warn("%s: cudaSetDevice(%d): %s", what, ordinal, cudaGetErrorString(e));
	}
}

/* The state of the calling thread for device index `device`; NULL on a
 * thread that is not an executor thread (no thread_init). */
static inline cuda_thread_dev *thread_dev(int device)
{
	return cuda_tls ? cuda_tls->dev[device] : NULL;
}

/* The clock in whole microseconds, never 0. */
static uint64_t now_us(void)
{
	return (uint64_t)clock_now_us() + 1u;
}

static void release_one(const cuda_deferred *d)
{
	if (d->kind == DEFER_DEVICE) {
		if (d->ordinal >= 0)
			on_device_or_log(d->ordinal, "releasing device memory");
		/* Waits for work in flight that may still use the memory: its
		 * device's (a peer copy that read it from another device is
		 * ordered before the stream its free came on: tensors.c). */
		cudaFree(d->ptr);
	} else {
		cudaHostUnregister(d->ptr);
		munmap(d->ptr, d->size);
	}
}

/* Put a release off; done at once if there is no memory to remember it.
 * `ordinal`: the device of device memory, -1 for an arena. */
static void defer(cuda_impl *im, defer_kind kind, void *ptr, int ordinal, size_t size)
{
	cuda_deferred *d = malloc(sizeof(*d));
	if (!d || !im->reaper_running) {
		release_one(&(cuda_deferred){ kind, ptr, ordinal, size, 0, NULL });
		free(d);
		return;
	}
	*d = (cuda_deferred){ kind, ptr, ordinal, size, now_us(), NULL };
	pthread_mutex_lock(&im->defer_mu);
	if (im->deferred_tail)
		im->deferred_tail->next = d;
	else
		im->deferred = d;
	im->deferred_tail = d;
	__atomic_store_n(&im->deferred_any, 1, __ATOMIC_RELAXED);
	pthread_cond_signal(&im->defer_cv);
	pthread_mutex_unlock(&im->defer_mu);
}

/* The oldest release put off, taken off the list (defer_mu held). */
static cuda_deferred *take_oldest(cuda_impl *im)
{
	cuda_deferred *d = im->deferred;
	if (d) {
		im->deferred = d->next;
		if (!im->deferred)
			im->deferred_tail = NULL;
		__atomic_store_n(&im->deferred_any, im->deferred != NULL, __ATOMIC_RELAXED);
	}
	return d;
}

/* Every release put off, now, on the calling thread. */
static void release_all(cuda_impl *im)
{
	for (;;) {
		pthread_mutex_lock(&im->defer_mu);
		cuda_deferred *d = take_oldest(im);
		pthread_mutex_unlock(&im->defer_mu);
		if (!d)
			return;
		release_one(d);
		free(d);
	}
}

static void wait_us(cuda_impl *im, uint64_t us)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)(us % 1000000u) * 1000;
	ts.tv_sec += (time_t)(us / 1000000u) + ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&im->defer_cv, &im->defer_mu, &ts);
}

typedef struct reaper_arg {
	backend *be;
	cuda_impl *im;
} reaper_arg;

static void *reaper_main(void *arg)
{
	reaper_arg a = *(reaper_arg *)arg;
	cuda_impl *im = a.im;
	free(arg);
	pthread_setname_np(pthread_self(), "tileops-release");
	on_device_or_log(im->dev[0].ordinal, "the release thread");
	uint64_t last_forced = 0;
	pthread_mutex_lock(&im->defer_mu);
	while (!im->reaper_stop) {
		if (!im->deferred) {
			pthread_cond_wait(&im->defer_cv, &im->defer_mu);
			continue;
		}
		uint64_t now = now_us();
		int quiet = __atomic_load_n(&a.be->active_threads, __ATOMIC_RELAXED) == 0;
		int overdue = now - im->deferred->since >= DEFER_MAX_US &&
		              now - last_forced >= DEFER_GAP_US;
		if (!quiet && !overdue) {
			wait_us(im, 1000);
			continue;
		}
		if (!quiet)
			last_forced = now;
		cuda_deferred *d = take_oldest(im);
		pthread_mutex_unlock(&im->defer_mu);
		release_one(d);
		free(d);
		pthread_mutex_lock(&im->defer_mu);
	}
	pthread_mutex_unlock(&im->defer_mu);
	return NULL;
}

/*
 * Every kernel is loaded when the context is made, not at its first launch:
 * with CUDA's default lazy loading the first launch of each kernel loads
 * its module, which may wait for the device (the CUDA programming guide,
 * "Lazy Loading", potential hazards). On the H200 the first `add` of a
 * session whose stream waited on a client's event for 0.2 s of that
 * client's work returned after 203.6 ms; the next ones in 0.2 ms. A daemon
 * serves for days, so it pays the loading once at start instead. An
 * operator's own CUDA_MODULE_LOADING is kept. Called before the first CUDA
 * call of the process, while it has no other threads.
 */
static void cuda_load_eagerly(void)
{
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

int backend_cuda_available(void)
{
	cuda_load_eagerly();
	int n = 0;
	return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* A fence of the current device, which is device index `device`. */
static cudaError_t fence_new(int device, cuda_fence **out)
{
	cuda_fence *f = malloc(sizeof(*f));
	if (!f)
		return cudaErrorMemoryAllocation;
	cudaError_t e = cudaEventCreateWithFlags(&f->ev, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		free(f);
		return e;
	}
	f->device = device;
	*out = f;
	return cudaSuccess;
}

static void fence_destroy(cuda_fence *f)
{
	cudaEventDestroy(f->ev);
	free(f);
}

/* Free what thread_dev_make made of td (its device current). */
static void thread_dev_free(cuda_thread_dev *td)
{
	for (unsigned i = 0; i < CUDA_TIMING_RING; i++) {
		if (td->ring[i].start)
			cudaEventDestroy(td->ring[i].start);
		if (td->ring[i].stop)
			cudaEventDestroy(td->ring[i].stop);
	}
	while (td->n_fences > 0)
		fence_destroy(td->fences[--td->n_fences]);
	if (td->zero)
		cudaStreamDestroy(td->zero);
	free(td);
}

/* The calling thread's state on device index `device`, with that device
 * current. Every timing event is made now: creating events while other
 * threads launch stalls them all (measured: the 8-process dispatch rate
 * fell from 684k to 450k kernels/s with a few dozen made on the fly). */
static tileops_status thread_dev_make(int device, cuda_thread_dev **out, char *err, size_t errlen)
{
	cuda_thread_dev *td = calloc(1, sizeof(*td));
	cudaError_t e = cudaSuccess;
	const char *what = "cudaEventCreate";
	if (!td) {
		snprintf(err, errlen, "out of memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	for (unsigned i = 0; e == cudaSuccess && i < CUDA_TIMING_RING; i++) {
		cuda_timing *t = &td->ring[i];
		if ((e = cudaEventCreate(&t->start)) == cudaSuccess)
			e = cudaEventCreate(&t->stop);
	}
	for (; e == cudaSuccess && td->n_fences < CUDA_FENCE_POOL; td->n_fences++)
		e = fence_new(device, &td->fences[td->n_fences]);
	if (e == cudaSuccess) {
		what = "cudaStreamCreate";
		e = cudaStreamCreateWithFlags(&td->zero, cudaStreamNonBlocking);
	}
	if (e != cudaSuccess) {
		thread_dev_free(td);
		return cuda_fail(e, what, err, errlen);
	}
	*out = td;
	return TILEOPS_OK;
}

static void cuda_thread_fini(backend *be);

static tileops_status cuda_thread_init(backend *be, char *err, size_t errlen)
{
	cuda_impl *im = be->impl;
	cuda_tls = calloc(1, sizeof(*cuda_tls));
	if (!cuda_tls) {
		snprintf(err, errlen, "out of memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	/* The first device last: the thread starts on it, as it did with one. */
	cuda_current = -1;
	for (int d = im->n_devices - 1; d >= 0; d--) {
		cudaError_t e = cuda_switch(im->dev[d].ordinal);
		tileops_status st = e == cudaSuccess
		                            ? thread_dev_make(d, &cuda_tls->dev[d], err, errlen)
		                            : cuda_fail(e, "cudaSetDevice", err, errlen);
		if (st != TILEOPS_OK) {
			cuda_thread_fini(be);
			return st;
		}
	}
	return TILEOPS_OK;
}

static void cuda_collect(backend *be);

static void cuda_thread_fini(backend *be)
{
	cuda_impl *im = be->impl;
	cuda_thread *t = cuda_tls;
	if (!t)
		return;
	for (int d = 0; d < im->n_devices; d++) {
		if (!t->dev[d])
			continue;
		on_device_or_log(im->dev[d].ordinal, "thread_fini");
		cudaDeviceSynchronize();
	}
	cuda_collect(be);
	for (int d = 0; d < im->n_devices; d++) {
		if (!t->dev[d])
			continue;
		on_device_or_log(im->dev[d].ordinal, "thread_fini");
		thread_dev_free(t->dev[d]);
	}
	if (t->bounce)
		cudaFreeHost(t->bounce);
	free(t);
	cuda_tls = NULL;
}

static void stream_free(cuda_stream *st)
{
	cudaStreamDestroy(st->home);
	if (st->turn)
		cudaEventDestroy(st->turn);
	free(st);
}

static void pool_destroy(cuda_pool *p)
{
	for (int i = 0; i < p->n; i++)
		stream_free(p->all[i]);
	free(p->all);
	pthread_mutex_destroy(&p->mu);
}

/* A stream of the current device, index `device`, at priority prio with
 * its event, or NULL (the error cleared). */
static cuda_stream *stream_new(const cuda_impl *im, int device, int prio)
{
	cuda_stream *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->device = device;
	st->ordinal = im->dev[device].ordinal;
	if (cudaStreamCreateWithPriority(&st->home, cudaStreamNonBlocking, prio) != cudaSuccess) {
		cudaGetLastError();
		free(st);
		return NULL;
	}
	if (cudaEventCreateWithFlags(&st->turn, cudaEventDisableTiming) != cudaSuccess) {
		cudaGetLastError();
		cudaStreamDestroy(st->home);
		free(st);
		return NULL;
	}
	st->s = st->home;
	return st;
}

/* Make n streams of the current device, index `device`, at priority prio
 * in a row, all free. A failure leaves a smaller pool. */
static void pool_make(const cuda_impl *im, int device, cuda_pool *p, int n, int prio)
{
	pthread_mutex_init(&p->mu, NULL);
	p->all = calloc((size_t)(n > 0 ? n : 1), sizeof(*p->all));
	for (int i = 0; p->all && i < n; i++) {
		cuda_stream *st = stream_new(im, device, prio);
		if (!st) {
			log_warn("CUDA device %d: made %d of %d pooled streams; later sessions "
			         "get their own",
			         im->dev[device].ordinal, i, n);
			break;
		}
		st->pooled = 1;
		p->all[p->n++] = st;
		if (p->tail)
			p->tail->next = st;
		else
			p->head = st;
		p->tail = st;
	}
}

static cuda_stream *pool_take(cuda_pool *p)
{
	pthread_mutex_lock(&p->mu);
	cuda_stream *st = p->head;
	if (st) {
		p->head = st->next;
		if (!p->head)
			p->tail = NULL;
		st->next = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	return st;
}

static void pool_give(cuda_pool *p, cuda_stream *st)
{
	pthread_mutex_lock(&p->mu);
	st->next = NULL;
	if (p->tail)
		p->tail->next = st;
	else
		p->head = st;
	p->tail = st;
	pthread_mutex_unlock(&p->mu);
}

static void cuda_destroy(backend *be)
{
	cuda_impl *im = be->impl;
	cuda_be = NULL;
	/* The communicators first (NCCL finishes their work before it frees them). */
	cuda_nccl_close(im->nccl);
	cuda_current = -1;
	on_device_or_log(im->dev[0].ordinal, "closing the CUDA backend");
	if (im->reaper_running) {
		pthread_mutex_lock(&im->defer_mu);
		im->reaper_stop = 1;
		pthread_cond_signal(&im->defer_cv);
		pthread_mutex_unlock(&im->defer_mu);
		pthread_join(im->reaper, NULL);
		im->reaper_running = 0;
	}
	release_all(im);
	pthread_cond_destroy(&im->defer_cv);
	pthread_mutex_destroy(&im->defer_mu);
	for (int d = im->n_devices - 1; d >= 0; d--) {
		on_device_or_log(im->dev[d].ordinal, "closing the CUDA backend");
		pool_destroy(&im->dev[d].pool);
		pool_destroy(&im->dev[d].low_pool);
	}
	/* Imports are mappings into the first device (cuda_ipc_open). */
	while (im->ipc) {
		cuda_ipc_map *m = im->ipc;
		im->ipc = m->next;
		cudaIpcCloseMemHandle(m->ptr);
		free(m);
	}
	pthread_mutex_destroy(&im->ipc_mu);
	free(im);
	free(be);
}

static inline cudaStream_t cs(void *stream)
{
	return ((cuda_stream *)stream)->s;
}

static tileops_status cuda_stream_create(backend *be, int device, void **stream, char *err,
                                         size_t errlen)
{
	cuda_impl *im = be->impl;
	if (device < 0 || device >= im->n_devices) {
		snprintf(err, errlen, "stream_create: device %d does not exist (%d served)", device,
		         im->n_devices);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	cuda_device *dev = &im->dev[device];
	cuda_stream *st = pool_take(&dev->pool);
	if (!st) {
		cudaError_t e = on_device(dev->ordinal);
		if (e != cudaSuccess)
			return cuda_fail(e, "cudaSetDevice", err, errlen);
		st = stream_new(im, device, dev->prio_normal);
	}
	if (!st) {
		snprintf(err, errlen,
		         "cannot make a stream on CUDA device %d (cudaStreamCreateWithPriority "
		         "failed)",
		         dev->ordinal);
		return TILEOPS_ERR_BACKEND;
	}
	*stream = st;
	return TILEOPS_OK;
}

/* Give back a stream a session held (pooled ones to their pool). */
static void stream_give(cuda_pool *p, cuda_stream *st)
{
	if (st->pooled)
		pool_give(p, st);
	else
		stream_free(st);
}

static void cuda_stream_destroy(backend *be, void *stream)
{
	cuda_impl *im = be->impl;
	cuda_stream *st = stream;
	cuda_device *dev = &im->dev[st->device];
	on_device_or_log(st->ordinal, "stream_destroy");
	/* The stream it runs on now waits for the one before: one sync is all. */
	cudaStreamSynchronize(st->s);
	cuda_collect(be);
	if (st->ws)
		defer(im, DEFER_DEVICE, st->ws, st->ordinal, 0);
	st->ws = NULL;
	/* The next session on a pooled stream gets an event of its own. */
	if (st->ipc_ev)
		cudaEventDestroy(st->ipc_ev);
	st->ipc_ev = NULL;
	st->has_handle = 0;
	if (st->low)
		stream_give(&dev->low_pool, st->low);
	st->low = NULL;
	st->s = st->home;
	stream_give(&dev->pool, st);
}

/*
 * Move the session's later work to a low-priority stream or back home: the
 * stream it goes to first waits for what the session queued so far, so its
 * order holds. Any failure leaves it where it was (the priority is a
 * preference, not a rule).
 */
static void cuda_stream_priority(backend *be, void *stream, int low)
{
	cuda_impl *im = be->impl;
	cuda_stream *st = stream;
	cuda_device *dev = &im->dev[st->device];
	cuda_thread_dev *td = thread_dev(st->device);
	if ((st->low != NULL) == (low != 0) || dev->prio_low == dev->prio_normal ||
	    (td && td->capturing))
		return;
	if (on_device(st->ordinal) != cudaSuccess) {
		cudaGetLastError();
		return;
	}
	cuda_stream *lo = NULL;
	if (low && !(lo = pool_take(&dev->low_pool)) &&
	    !(lo = stream_new(im, st->device, dev->prio_low)))
		return;
	cudaStream_t to = low ? lo->s : st->home;
	cudaError_t e = cudaEventRecord(st->turn, st->s);
	if (e == cudaSuccess)
		e = cudaStreamWaitEvent(to, st->turn, 0);
	if (e != cudaSuccess) {
		if (cuda_sticky(e))
			backend_mark_lost(be, "cudaStreamWaitEvent: %s", cudaGetErrorString(e));
		cudaGetLastError();
		if (lo)
			stream_give(&dev->low_pool, lo);
		return;
	}
	if (low) {
		st->low = lo;
	} else {
		stream_give(&dev->low_pool, st->low);
		st->low = NULL;
	}
	st->s = to;
}

static void cuda_arena_attach(backend *be, arena *a)
{
	/* Pinned arenas are copied by DMA. If the client later shrinks its shm
	 * object, the pinned pages stay referenced, so the copy cannot fault.
	 * Portable: pinned for every device's copies, not only the current one's. */
	cudaError_t e = cudaHostRegister(a->base, a->size, cudaHostRegisterPortable);
	if (e == cudaSuccess) {
		a->pinned = 1;
	} else {
		cudaGetLastError();
		log_warn("cannot pin a %zu-byte arena (%s): copies go through a staging buffer",
		         a->size, cudaGetErrorString(e));
	}
}

static void cuda_arena_detach(backend *be, arena *a)
{
	if (!a->pinned)
		return;
	/* The mapping goes with the pinning: unmapped only once unregistered,
	 * so its addresses cannot be reused by another arena before. */
	defer(be->impl, DEFER_ARENA, a->base, -1, a->size);
	a->base = NULL;
	a->size = 0;
	a->pinned = 0;
}

static tileops_status cuda_alloc(backend *be, int device, size_t bytes, void **ptr, char *err,
                                 size_t errlen)
{
	cuda_impl *im = be->impl;
	if (device < 0 || device >= im->n_devices) {
		snprintf(err, errlen, "alloc: device %d does not exist (%d served)", device,
		         im->n_devices);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	int ordinal = im->dev[device].ordinal;
	void *p = NULL;
	cudaError_t e = on_device(ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaMalloc(&p, bytes ? bytes : 256);
	if (e == cudaErrorMemoryAllocation &&
	    __atomic_load_n(&im->deferred_any, __ATOMIC_RELAXED)) {
		/* Memory freed but not yet released: release it and try again
		 * (the releases make their own devices current). */
		cudaGetLastError();
		release_all(im);
		if ((e = on_device(ordinal)) == cudaSuccess)
			e = cudaMalloc(&p, bytes ? bytes : 256);
	}
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen,
		         "device memory exhausted allocating %zu bytes on CUDA device %d (%s)",
		         bytes, ordinal, cudaGetErrorString(e));
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	/* Zeroed before anyone learns the address: memory freed in this process
	 * comes back from cudaMalloc as it was left, and it may have held another
	 * session's data. */
	cuda_thread_dev *td = thread_dev(device);
	cudaStream_t z = td ? td->zero : NULL;
	if (z)
		e = cudaMemsetAsync(p, 0, bytes ? bytes : 256, z);
	if (e == cudaSuccess)
		e = z ? cudaStreamSynchronize(z) : cudaMemset(p, 0, bytes ? bytes : 256);
	if (e != cudaSuccess) {
		defer(im, DEFER_DEVICE, p, ordinal, 0);
		return cuda_fail(e, "zeroing a new tensor", err, errlen);
	}
	*ptr = p;
	return TILEOPS_OK;
}

/* The CUDA device of device memory p, -1 when the runtime cannot tell. */
static int ptr_ordinal(const cuda_impl *im, const void *p)
{
	struct cudaPointerAttributes attr;
	if (im->n_devices == 1)
		return im->dev[0].ordinal;
	if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	return attr.type == cudaMemoryTypeDevice ? attr.device : -1;
}

/* Released on the stream's device once the device has finished what was
 * queued before (release_one); with no stream, on the memory's device. */
static void cuda_free(backend *be, void *stream, void *ptr)
{
	cuda_impl *im = be->impl;
	if (!ptr)
		return;
	defer(im, DEFER_DEVICE, ptr,
	      stream ? ((cuda_stream *)stream)->ordinal : ptr_ordinal(im, ptr), 0);
}

static tileops_status cuda_bounce(backend *be, char *err, size_t errlen)
{
	cuda_thread *im = cuda_tls;
	if (im->bounce)
		return TILEOPS_OK;
	/* Portable: staging for copies of every device. */
	cudaError_t e = cudaHostAlloc(&im->bounce, CUDA_BOUNCE_BYTES, cudaHostAllocPortable);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaHostAlloc", err, errlen);
}

static tileops_status cuda_copy(backend *be, cudaStream_t s, void *dev, const arena *a, size_t aoff,
                                size_t len, int to_device, char *err, size_t errlen)
{
	cudaError_t e;
	if (a->pinned) {
		char *host = (char *)a->base + aoff;
		/* Queued only: the executor answers once a fence after it passes. */
		e = to_device ? cudaMemcpyAsync(dev, host, len, cudaMemcpyHostToDevice, s)
		              : cudaMemcpyAsync(host, dev, len, cudaMemcpyDeviceToHost, s);
		return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "copy", err, errlen);
	}
	tileops_status st = cuda_bounce(be, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	cuda_thread *im = cuda_tls;
	for (size_t done = 0; done < len;) {
		size_t n = len - done < CUDA_BOUNCE_BYTES ? len - done : CUDA_BOUNCE_BYTES;
		char *d = (char *)dev + done;
		if (to_device) {
			if (arena_copy_in(a, aoff + done, im->bounce, n) != 0)
				goto truncated;
			e = cudaMemcpyAsync(d, im->bounce, n, cudaMemcpyHostToDevice, s);
			if (e == cudaSuccess)
				e = cudaStreamSynchronize(s);
		} else {
			e = cudaMemcpyAsync(im->bounce, d, n, cudaMemcpyDeviceToHost, s);
			if (e == cudaSuccess)
				e = cudaStreamSynchronize(s);
			if (e == cudaSuccess && arena_copy_out(a, aoff + done, im->bounce, n) != 0)
				goto truncated;
		}
		if (e != cudaSuccess)
			return cuda_fail(e, "copy", err, errlen);
		done += n;
	}
	return TILEOPS_OK;
truncated:
	snprintf(err, errlen, "arena bytes [%zu, %zu) are no longer backed by the shm object", aoff,
	         aoff + len);
	return TILEOPS_ERR_RANGE;
}

static tileops_status cuda_write(backend *be, void *stream, void *dst, const arena *a, size_t aoff,
                                 size_t len, char *err, size_t errlen)
{
	cudaError_t e = on_device(((cuda_stream *)stream)->ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	return cuda_copy(be, cs(stream), dst, a, aoff, len, 1, err, errlen);
}

static tileops_status cuda_read(backend *be, void *stream, const void *src, const arena *a,
                                size_t aoff, size_t len, char *err, size_t errlen)
{
	cudaError_t e = on_device(((cuda_stream *)stream)->ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	return cuda_copy(be, cs(stream), (void *)src, a, aoff, len, 0, err, errlen);
}

/* Report td's finished timings, oldest first, up to the first unfinished. */
static void collect_dev(backend *be, cuda_thread_dev *td)
{
	while (td->tail != td->head) {
		cuda_timing *t = &td->ring[td->head % CUDA_TIMING_RING];
		cudaError_t q = cudaEventQuery(t->stop);
		if (q == cudaErrorNotReady)
			break;
		float ms = 0.0f;
		if (q == cudaSuccess &&
		    cudaEventElapsedTime(&ms, t->start, t->stop) == cudaSuccess && be->timing_cb)
			be->timing_cb(be->timing_ctx, t->slot, t->arg, (double)ms * 1e3);
		cudaGetLastError();
		td->head++;
	}
}

/* Every device's: querying an event needs no device made current. */
static void cuda_collect(backend *be)
{
	cuda_thread *t = cuda_tls;
	for (int d = 0; t && d < BACKEND_MAX_DEVICES; d++)
		if (t->dev[d])
			collect_dev(be, t->dev[d]);
}

/*
 * Device memory for workspace, on the current device. During a capture
 * the allocation is made in relaxed capture mode: it is not a stream
 * operation, and the graph that is being captured will own it. NULL when
 * there is none to be had: the kernels then run without (slower, never
 * wrong).
 */
static void *cuda_workspace_alloc(int capturing)
{
	void *p = NULL;
	enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
	if (capturing)
		cudaThreadExchangeStreamCaptureMode(&mode);
	if (cudaMalloc(&p, TK_WORKSPACE_BYTES) != cudaSuccess) {
		cudaGetLastError();
		log_warn("no device memory for a %zu-byte kernel workspace: kernels run without it",
		         TK_WORKSPACE_BYTES);
		p = NULL;
	}
	if (capturing)
		cudaThreadExchangeStreamCaptureMode(&mode);
	return p;
}

/* The workspace a launch on `stream` may use: the graph's while capturing,
 * else the stream's. */
static void *cuda_workspace(cuda_thread_dev *td, cuda_stream *st)
{
	void **slot = td->capturing ? &td->capture_ws : &st->ws;
	if (!*slot)
		*slot = cuda_workspace_alloc(td->capturing);
	return *slot;
}

static tileops_status cuda_launch(backend *be, void *stream, const tk_kernel_entry *k,
                                  const tk_call *call, int timed, int slot, void *arg, char *err,
                                  size_t errlen)
{
	cuda_stream *st = stream;
	cuda_thread_dev *im = cuda_tls->dev[st->device];
	cudaStream_t s = st->s;
	cudaError_t e = on_device(st->ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	tk_call with_ws;
	if (k->workspace && !call->workspace) {
		with_ws = *call;
		with_ws.workspace = cuda_workspace(im, st);
		with_ws.workspace_bytes = with_ws.workspace ? TK_WORKSPACE_BYTES : 0;
		call = &with_ws;
	}
	if (im->capturing || !timed) {
		tk_status cst = k->cuda(call, s);
		if (cst == TK_OK)
			return TILEOPS_OK;
		if (cst == TK_ERR_UNSUPPORTED) {
			snprintf(err, errlen,
			         "%s: the CUDA kernel does not support these arguments", k->op);
			return TILEOPS_ERR_UNSUPPORTED;
		}
		char what[96];
		snprintf(what, sizeof(what), "%s: kernel launch failed", k->op);
		return cuda_fail(cudaGetLastError(), what, err, errlen);
	}
	if (im->tail - im->head == CUDA_TIMING_RING) {
		/* Ring full: wait for the oldest op, then collect. */
		cudaEventSynchronize(im->ring[im->head % CUDA_TIMING_RING].stop);
		collect_dev(be, im);
	}
	cuda_timing *t = &im->ring[im->tail % CUDA_TIMING_RING];
	t->slot = slot;
	t->arg = arg;
	cudaEventRecord(t->start, s);
	tk_status kst = k->cuda(call, s);
	if (kst == TK_ERR_UNSUPPORTED) {
		snprintf(err, errlen, "%s: the CUDA kernel does not support these arguments",
		         k->op);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	if (kst != TK_OK) {
		char what[96];
		snprintf(what, sizeof(what), "%s: kernel launch failed", k->op);
		return cuda_fail(cudaGetLastError(), what, err, errlen);
	}
	cudaEventRecord(t->stop, s);
	im->tail++;
	collect_dev(be, im);
	return TILEOPS_OK;
}

static tileops_status cuda_sync(backend *be, void *stream, char *err, size_t errlen)
{
	cudaError_t e = on_device(((cuda_stream *)stream)->ordinal);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(cs(stream));
	cuda_collect(be);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "device error", err, errlen);
}

static void cuda_fence_free(backend *be, void *fence);

static tileops_status cuda_fence_create(backend *be, void *stream, void **fence, char *err,
                                        size_t errlen)
{
	cuda_stream *st = stream;
	cuda_thread_dev *t = thread_dev(st->device);
	cuda_fence *f = NULL;
	cudaError_t e = cudaSuccess;
	/* From the thread's pool: making an event stalls every thread's launches. */
	if (t && t->n_fences > 0) {
		f = t->fences[--t->n_fences];
	} else if ((e = on_device(st->ordinal)) != cudaSuccess ||
	           (e = fence_new(st->device, &f)) != cudaSuccess) {
		return cuda_fail(e, "cudaEventCreate", err, errlen);
	}
	/* Recording needs no device made current: the event and the stream
	 * are of one device. */
	if ((e = cudaEventRecord(f->ev, st->s)) != cudaSuccess) {
		cuda_fence_free(be, f);
		return cuda_fail(e, "cudaEventRecord", err, errlen);
	}
	*fence = f;
	return TILEOPS_OK;
}

/* A fence recorded on `after` (an event of after's device) and waited for
 * on `stream`, of the same device or another (CUDA waits across devices):
 * the wait takes the record as it is now, so the fence goes back to the
 * pool at once. */
static tileops_status cuda_stream_wait(backend *be, void *stream, void *after, char *err,
                                       size_t errlen)
{
	void *f = NULL;
	if (stream == after)
		return TILEOPS_OK;
	tileops_status st = cuda_fence_create(be, after, &f, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	cudaError_t e = cudaStreamWaitEvent(cs(stream), ((cuda_fence *)f)->ev, 0);
	cuda_fence_free(be, f);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaStreamWaitEvent", err, errlen);
}

/* Device to device, or between two devices: unified addressing tells the
 * driver which, and it copies over the peer link where there is one,
 * through the host where not. */
static tileops_status cuda_device_copy(backend *be, void *stream, void *dst, const void *src,
                                       size_t len, char *err, size_t errlen)
{
	cudaError_t e = on_device(((cuda_stream *)stream)->ordinal);
	if (e == cudaSuccess)
		e = cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, cs(stream));
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaMemcpyAsync", err, errlen);
}

static tileops_status cuda_fence_query(backend *be, void *fence, char *err, size_t errlen)
{
	cudaError_t e = cudaEventQuery(((cuda_fence *)fence)->ev);
	if (e == cudaErrorNotReady)
		return TILEOPS_IN_PROGRESS;
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "device error", err, errlen);
}

/* Back to the calling thread's pool for the fence's device, or destroyed. */
static void cuda_fence_free(backend *be, void *fence)
{
	cuda_fence *f = fence;
	if (!f)
		return;
	cuda_thread_dev *t = thread_dev(f->device);
	if (t && t->n_fences < CUDA_FENCE_POOL)
		t->fences[t->n_fences++] = f;
	else
		fence_destroy(f);
}

static tileops_status cuda_capture_begin(backend *be, void *stream, char *err, size_t errlen)
{
	cuda_stream *st = stream;
	cuda_thread_dev *im = cuda_tls->dev[st->device];
	cudaError_t e = on_device(st->ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaStreamBeginCapture(st->s, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaStreamBeginCapture", err, errlen);
	im->capturing = 1;
	im->capture_ws = NULL;
	return TILEOPS_OK;
}

static void cuda_capture_abort(backend *be, void *stream)
{
	cuda_stream *st = stream;
	cuda_thread_dev *im = cuda_tls->dev[st->device];
	cudaGraph_t g = NULL;
	on_device_or_log(st->ordinal, "capture_abort");
	if (cudaStreamEndCapture(st->s, &g) == cudaSuccess && g)
		cudaGraphDestroy(g);
	cudaGetLastError();
	im->capturing = 0;
	if (im->capture_ws)
		cudaFree(im->capture_ws);
	im->capture_ws = NULL;
}

static tileops_status cuda_capture_end(backend *be, void *stream, void **graph, size_t *bytes,
                                       char *err, size_t errlen)
{
	cuda_stream *st = stream;
	cuda_thread_dev *im = cuda_tls->dev[st->device];
	cudaGraph_t g = NULL;
	cudaError_t e = on_device(st->ordinal);
	if (e == cudaSuccess)
		e = cudaStreamEndCapture(st->s, &g);
	void *ws = im->capture_ws;
	im->capturing = 0;
	im->capture_ws = NULL;
	if (e != cudaSuccess) {
		if (ws)
			cudaFree(ws);
		return cuda_fail(e, "cudaStreamEndCapture", err, errlen);
	}
	cuda_graph *old = *graph;
	if (old && old->device != st->device) {
		snprintf(err, errlen,
		         "capture_end: the graph to update was captured on device %d, this capture "
		         "on device %d",
		         old->device, st->device);
		cudaGraphDestroy(g);
		if (ws)
			cudaFree(ws);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	if (old) {
		/* Same topology, new arguments: update the instantiated graph. The
		 * old workspace may still be in use by a replay in flight. */
		cudaGraphExecUpdateResultInfo info;
		if (cudaGraphExecUpdate(old->exec, g, &info) == cudaSuccess) {
			cudaGraphDestroy(g);
			if (old->ws != ws && old->ws) {
				cudaStreamSynchronize(st->s);
				cudaFree(old->ws);
			}
			old->ws = ws;
			return TILEOPS_OK;
		}
		cudaGetLastError();
		cudaGraphExecDestroy(old->exec);
		if (old->ws)
			cudaFree(old->ws);
		free(old);
		*graph = NULL;
	}
	cuda_graph *ng = calloc(1, sizeof(*ng));
	if (!ng) {
		cudaGraphDestroy(g);
		if (ws)
			cudaFree(ws);
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	size_t free0 = 0, free1 = 0, total = 0;
	cudaMemGetInfo(&free0, &total);
	e = cudaGraphInstantiateWithFlags(&ng->exec, g, 0);
	cudaGraphDestroy(g);
	if (e != cudaSuccess) {
		free(ng);
		if (ws)
			cudaFree(ws);
		return cuda_fail(e, "cudaGraphInstantiate", err, errlen);
	}
	cudaMemGetInfo(&free1, &total);
	*bytes = (free0 > free1 ? free0 - free1 : 0) + (ws ? TK_WORKSPACE_BYTES : 0);
	ng->ws = ws;
	ng->device = st->device;
	ng->ordinal = st->ordinal;
	*graph = ng;
	return TILEOPS_OK;
}

static tileops_status cuda_graph_launch(backend *be, void *stream, void *graph, char *err,
                                        size_t errlen)
{
	cuda_stream *st = stream;
	cuda_graph *g = graph;
	if (g->device != st->device) {
		snprintf(err, errlen,
		         "graph_launch: the graph was captured on device %d and cannot run on a "
		         "stream of device %d",
		         g->device, st->device);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	cudaError_t e = on_device(st->ordinal);
	if (e == cudaSuccess)
		e = cudaGraphLaunch(g->exec, st->s);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaGraphLaunch", err, errlen);
}

static void cuda_graph_destroy(backend *be, void *graph)
{
	cuda_graph *g = graph;
	if (!g)
		return;
	on_device_or_log(g->ordinal, "graph_destroy");
	cudaGraphExecDestroy(g->exec);
	/* Released later: cudaFree waits for replays in flight that may still use it. */
	if (g->ws)
		defer(be->impl, DEFER_DEVICE, g->ws, g->ordinal, 0);
	free(g);
}

/* Memory of the first device only (cuda_impl.ipc). */
static tileops_status cuda_ipc_export(backend *be, void *ptr, unsigned char handle[64], char *err,
                                      size_t errlen)
{
	cuda_impl *im = be->impl;
	int ordinal = ptr_ordinal(im, ptr);
	if (ordinal >= 0 && ordinal != im->dev[0].ordinal) {
		snprintf(err, errlen,
		         "tensor_export: the tensor is on CUDA device %d, and CUDA IPC serves the "
		         "first device of the devices setting (CUDA device %d) only; copy it there "
		         "(tileops_tensor_copy) to export it",
		         ordinal, im->dev[0].ordinal);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	cudaIpcMemHandle_t h;
	cudaError_t e = on_device(im->dev[0].ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaIpcGetMemHandle(&h, ptr);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaIpcGetMemHandle", err, errlen);
	memcpy(handle, &h, 64);
	return TILEOPS_OK;
}

static tileops_status cuda_ipc_open(cuda_impl *im, const unsigned char handle[64], void **ptr,
                                    char *err, size_t errlen);

static tileops_status cuda_ipc_import(backend *be, const unsigned char handle[64], void **ptr,
                                      char *err, size_t errlen)
{
	cuda_impl *im = be->impl;
	pthread_mutex_lock(&im->ipc_mu);
	tileops_status st = cuda_ipc_open(im, handle, ptr, err, errlen);
	pthread_mutex_unlock(&im->ipc_mu);
	return st;
}

/* Each exported allocation is opened once; later imports share it. It is
 * mapped into the first device, which is where an imported tensor lives
 * (tensors.c). */
static tileops_status cuda_ipc_open(cuda_impl *im, const unsigned char handle[64], void **ptr,
                                    char *err, size_t errlen)
{
	for (cuda_ipc_map *m = im->ipc; m; m = m->next) {
		if (memcmp(m->handle, handle, 64) == 0) {
			m->refs++;
			*ptr = m->ptr;
			return TILEOPS_OK;
		}
	}
	cudaIpcMemHandle_t h;
	memcpy(&h, handle, 64);
	void *p = NULL;
	cudaError_t e = on_device(im->dev[0].ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen, "cannot open the CUDA IPC handle: %s", cudaGetErrorString(e));
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	cuda_ipc_map *m = calloc(1, sizeof(*m));
	if (!m) {
		cudaIpcCloseMemHandle(p);
		snprintf(err, errlen, "out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	memcpy(m->handle, handle, 64);
	m->ptr = p;
	m->refs = 1;
	m->next = im->ipc;
	im->ipc = m;
	*ptr = p;
	return TILEOPS_OK;
}

static void cuda_ipc_close(backend *be, void *ptr)
{
	cuda_impl *im = be->impl;
	pthread_mutex_lock(&im->ipc_mu);
	for (cuda_ipc_map **pp = &im->ipc; *pp; pp = &(*pp)->next) {
		cuda_ipc_map *m = *pp;
		if (m->ptr != ptr)
			continue;
		if (--m->refs == 0) {
			on_device_or_log(im->dev[0].ordinal, "ipc_close");
			cudaDeviceSynchronize();
			cudaIpcCloseMemHandle(m->ptr);
			*pp = m->next;
			free(m);
		}
		break;
	}
	pthread_mutex_unlock(&im->ipc_mu);
}

/* cuMemGetAddressRange from the driver the runtime loaded (the daemon links
 * the static runtime only), looked up once; NULL when it offers none. */
static void *address_range_sym;

static void address_range_lookup(void)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &address_range_sym, 3020,
	                                     cudaEnableDefault, &q) != cudaSuccess ||
	    q != cudaDriverEntryPointSuccess) {
		cudaGetLastError();
		address_range_sym = NULL;
	}
}

static tileops_status cuda_mem_range(backend *be, const void *ptr, void **base, size_t *size,
                                     char *err, size_t errlen)
{
	(void)be;
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, address_range_lookup);
	PFN_cuMemGetAddressRange_v3020 fn = (PFN_cuMemGetAddressRange_v3020)address_range_sym;
	if (!fn) {
		snprintf(err, errlen, "the CUDA driver offers no cuMemGetAddressRange");
		return TILEOPS_ERR_UNSUPPORTED;
	}
	CUdeviceptr b = 0;
	size_t n = 0;
	CUresult r = fn(&b, &n, (CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "cuMemGetAddressRange failed (CUresult %d)", (int)r);
		return TILEOPS_ERR_BACKEND;
	}
	*base = (void *)(uintptr_t)b;
	*size = n;
	return TILEOPS_OK;
}

/* Opened, waited on and closed at once: the wait stays queued after the
 * event is destroyed, and a handle opened once is never mistaken for a
 * later event of the client's that happens to reuse its bytes. */
static tileops_status cuda_event_wait(backend *be, void *stream, const unsigned char handle[64],
                                      char *err, size_t errlen)
{
	cudaIpcEventHandle_t h;
	cudaEvent_t ev = NULL;
	memcpy(&h, handle, sizeof(h));
	cudaError_t e = on_device(((cuda_stream *)stream)->ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaIpcOpenEventHandle(&ev, h);
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen,
		         "event_wait: cannot open the CUDA IPC event handle (%s); the event must "
		         "be made with cudaEventInterprocess | cudaEventDisableTiming",
		         cudaGetErrorString(e));
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	e = cudaStreamWaitEvent(cs(stream), ev, 0);
	cudaEventDestroy(ev);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaStreamWaitEvent", err, errlen);
}

/* The stream's event and its handle, made (on the stream's device) and
 * fetched on first use. */
static tileops_status stream_ipc_event(cuda_stream *st, char *err, size_t errlen)
{
	cudaError_t e;
	if (st->has_handle)
		return TILEOPS_OK;
	if ((e = on_device(st->ordinal)) != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	if (!st->ipc_ev) {
		e = cudaEventCreateWithFlags(&st->ipc_ev,
		                             cudaEventInterprocess | cudaEventDisableTiming);
		if (e != cudaSuccess) {
			st->ipc_ev = NULL;
			return cuda_fail(e, "cudaEventCreateWithFlags", err, errlen);
		}
	}
	cudaIpcEventHandle_t h;
	if ((e = cudaIpcGetEventHandle(&h, st->ipc_ev)) != cudaSuccess)
		return cuda_fail(e, "cudaIpcGetEventHandle", err, errlen);
	memcpy(st->ipc_handle, &h, 64);
	st->has_handle = 1;
	return TILEOPS_OK;
}

static tileops_status cuda_event_record(backend *be, void *stream, unsigned char handle[64],
                                        char *err, size_t errlen)
{
	(void)be;
	cuda_stream *st = stream;
	tileops_status ts = stream_ipc_event(st, err, errlen);
	if (ts != TILEOPS_OK)
		return ts;
	cudaError_t e = cudaEventRecord(st->ipc_ev, st->s);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaEventRecord", err, errlen);
	memcpy(handle, st->ipc_handle, 64);
	return TILEOPS_OK;
}

static tileops_status cuda_event_export(backend *be, void *stream, unsigned char handle[64],
                                        char *err, size_t errlen)
{
	(void)be;
	cuda_stream *st = stream;
	tileops_status ts = stream_ipc_event(st, err, errlen);
	if (ts == TILEOPS_OK)
		memcpy(handle, st->ipc_handle, 64);
	return ts;
}

static tileops_status cuda_event_rerecord(backend *be, void *stream, char *err, size_t errlen)
{
	(void)be;
	cuda_stream *st = stream;
	if (!st->ipc_ev) {
		snprintf(err, errlen,
		         "event_record_exported: the session has no exported event yet (call "
		         "tileops_event_export first)");
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	cudaError_t e = cudaEventRecord(st->ipc_ev, st->s);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaEventRecord", err, errlen);
}

/* Opened once per registration (the client promises the event outlives
 * it), with the first device current, as IPC memory is. */
static tileops_status cuda_event_open(backend *be, const unsigned char handle[64], void **ev,
                                      char *err, size_t errlen)
{
	cuda_impl *im = be->impl;
	cudaIpcEventHandle_t h;
	cudaEvent_t e_ = NULL;
	memcpy(&h, handle, sizeof(h));
	cudaError_t e = on_device(im->dev[0].ordinal);
	if (e != cudaSuccess)
		return cuda_fail(e, "cudaSetDevice", err, errlen);
	e = cudaIpcOpenEventHandle(&e_, h);
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(err, errlen,
		         "event_register: cannot open the CUDA IPC event handle (%s); the event "
		         "must be made with cudaEventInterprocess | cudaEventDisableTiming",
		         cudaGetErrorString(e));
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	*ev = e_;
	return TILEOPS_OK;
}

static void cuda_event_close(backend *be, void *ev)
{
	(void)be;
	if (ev)
		cudaEventDestroy((cudaEvent_t)ev);
}

static tileops_status cuda_event_wait_opened(backend *be, void *stream, void *ev, char *err,
                                             size_t errlen)
{
	(void)be;
	cudaError_t e = cudaStreamWaitEvent(cs(stream), (cudaEvent_t)ev, 0);
	return e == cudaSuccess ? TILEOPS_OK : cuda_fail(e, "cudaStreamWaitEvent", err, errlen);
}

/* Whether the driver shares device's contexts through an MPS server
 * (1, 0; -1 where the driver cannot say). Without MPS a client process
 * that orders its own stream with the daemon's (tileops.pytorch's
 * torch_waits and wait_for_torch) waits for a GPU time-slice at each
 * hand-off: docs/python.md. */
static int device_mps(int device)
{
	int v = 0;
	if (cudaDeviceGetAttribute(&v, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	if (v)
		log_info("device %d: contexts shared through MPS (client processes' kernels run "
		         "beside the daemon's)",
		         device);
	else
		log_info("device %d: no MPS server: the GPU time-slices between the daemon's "
		         "context and those of client processes with kernels of their own "
		         "(docs/python.md)",
		         device);
	return v != 0;
}

/*
 * The copy ceiling measured at start: eight device-to-device copies of 256
 * MiB issued back to back, reads plus writes counted, as the copy ceiling in
 * docs/perf.md is measured (4.2 TB/s on the H200, against the 4.8 its
 * properties give). 0 when it cannot run; the properties' figure stands.
 */
static double measure_copy_gbs(void)
{
	const size_t bytes = (size_t)256 << 20;
	const int reps = 8;
	void *a = NULL, *b = NULL;
	cudaEvent_t t0 = NULL, t1 = NULL;
	float ms = 0.0f;
	double gbs = 0.0;
	if (cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
	    cudaEventCreate(&t0) == cudaSuccess && cudaEventCreate(&t1) == cudaSuccess &&
	    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess) {
		cudaEventRecord(t0, 0);
		for (int i = 0; i < reps; i++)
			cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
		cudaEventRecord(t1, 0);
		if (cudaEventSynchronize(t1) == cudaSuccess &&
		    cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms > 0.0f)
			gbs = 2.0 * (double)bytes * reps / (ms * 1e-3) * 1e-9;
	}
	if (t0)
		cudaEventDestroy(t0);
	if (t1)
		cudaEventDestroy(t1);
	cudaFree(a);
	cudaFree(b);
	cudaGetLastError();
	return gbs;
}

static void cuda_ceilings(backend *be, backend_ceilings *out)
{
	*out = ((cuda_impl *)be->impl)->ceil;
}

/*
 * Collectives run on NCCL (cuda_nccl.h), one rank per device: each rank's
 * stream gives its device and where its part is queued.
 */
static tileops_status cuda_collective(backend *be, const backend_coll *c, char *err, size_t errlen)
{
	cuda_impl *im = be->impl;
	int ordinals[BACKEND_MAX_DEVICES], rank_on[BACKEND_MAX_DEVICES];
	cudaStream_t streams[BACKEND_MAX_DEVICES];
	/* More ranks than devices is two ranks on one device: the loop below
	 * names them. */
	if (c->n < 1 || c->n > BACKEND_MAX_DEVICES) {
		snprintf(err, errlen, "collective: %d ranks (1 to %d, one per device)", c->n,
		         BACKEND_MAX_DEVICES);
		return TILEOPS_ERR_INVALID_ARGUMENT;
	}
	for (int d = 0; d < im->n_devices; d++)
		rank_on[d] = -1;
	for (int r = 0; r < c->n; r++) {
		const cuda_stream *st = c->parts[r].stream;
		if (!st) {
			snprintf(err, errlen, "collective: rank %d has no stream", r);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
		if (rank_on[st->device] >= 0) {
			snprintf(err, errlen,
			         "collective: ranks %d and %d are both on device %d; every rank "
			         "needs a device of its own",
			         rank_on[st->device], r, st->device);
			return TILEOPS_ERR_INVALID_ARGUMENT;
		}
		rank_on[st->device] = r;
		const cuda_thread_dev *td = thread_dev(st->device);
		if (td && td->capturing) {
			snprintf(err, errlen,
			         "collective: not while a plan is being captured (device %d)",
			         st->device);
			return TILEOPS_ERR_UNSUPPORTED;
		}
		ordinals[r] = st->ordinal;
		streams[r] = st->s;
	}
	tileops_status ts = cuda_nccl_run(im->nccl, c, ordinals, streams, err, errlen);
	/* NCCL made each rank's device current in turn. */
	cuda_current = -1;
	return ts;
}

static const backend_ops cuda_ops = {
	.thread_init = cuda_thread_init,
	.thread_fini = cuda_thread_fini,
	.destroy = cuda_destroy,
	.stream_create = cuda_stream_create,
	.stream_priority = cuda_stream_priority,
	.stream_destroy = cuda_stream_destroy,
	.arena_attach = cuda_arena_attach,
	.arena_detach = cuda_arena_detach,
	.alloc = cuda_alloc,
	.stream_wait = cuda_stream_wait,
	.copy = cuda_device_copy,
	.free = cuda_free,
	.write = cuda_write,
	.read = cuda_read,
	.launch = cuda_launch,
	.sync = cuda_sync,
	.fence_create = cuda_fence_create,
	.fence_query = cuda_fence_query,
	.fence_free = cuda_fence_free,
	.capture_begin = cuda_capture_begin,
	.capture_end = cuda_capture_end,
	.capture_abort = cuda_capture_abort,
	.graph_launch = cuda_graph_launch,
	.graph_destroy = cuda_graph_destroy,
	.ipc_export = cuda_ipc_export,
	.ipc_import = cuda_ipc_import,
	.ipc_close = cuda_ipc_close,
	.collect_timings = cuda_collect,
	.ceilings = cuda_ceilings,
	.mem_range = cuda_mem_range,
	.event_wait = cuda_event_wait,
	.event_record = cuda_event_record,
	.event_open = cuda_event_open,
	.event_close = cuda_event_close,
	.event_wait_opened = cuda_event_wait_opened,
	.event_export = cuda_event_export,
	.event_rerecord = cuda_event_rerecord,
	.collective = cuda_collective,
};

/*
 * The devices named (CUDA ordinals, by index) exist, each once, and can run
 * this build's kernels; props gets each one's properties. Returns 0, or -1
 * with a message.
 */
static int check_devices(const int *ordinals, int n, struct cudaDeviceProp *props, char *err,
                         size_t errlen)
{
	int count = 0;
	cudaError_t e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count == 0) {
		snprintf(err, errlen, "--backend cuda: no usable GPU (%s)",
		         e == cudaSuccess ? "no CUDA devices" : cudaGetErrorString(e));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		int ord = ordinals[i];
		if (ord < 0 || ord >= count) {
			snprintf(err, errlen, "device %d does not exist (this machine has %d)", ord,
			         count);
			return -1;
		}
		for (int j = 0; j < i; j++) {
			if (ordinals[j] == ord) {
				snprintf(err, errlen,
				         "devices: CUDA device %d is named twice (indexes %d "
				         "and %d); the CUDA backend serves each GPU once",
				         ord, j, i);
				return -1;
			}
		}
		if ((e = cuda_switch(ord)) != cudaSuccess ||
		    (e = cudaGetDeviceProperties(&props[i], ord)) != cudaSuccess) {
			snprintf(err, errlen, "cannot open device %d: %s", ord,
			         cudaGetErrorString(e));
			return -1;
		}
		/* The kernels are built for sm_90a only; anything else cannot run them. */
		if (props[i].major != 9 || props[i].minor != 0) {
			snprintf(err, errlen,
			         "device %d (%s) is sm_%d%d; this build's kernels need "
			         "sm_90 (Hopper)",
			         ord, props[i].name, props[i].major, props[i].minor);
			return -1;
		}
	}
	return 0;
}

/*
 * Let every device reach every other's memory where the hardware can (NVLink
 * or PCIe peer to peer): copies between them then go device to device, not
 * through the host. A pair that cannot is logged; copies between its
 * devices still work (cudaMemcpyDefault stages them), only slower.
 */
static void enable_peers(const cuda_impl *im)
{
	char without[512] = "";
	size_t used = 0;
	int pairs = 0, enabled = 0;
	for (int i = 0; i < im->n_devices; i++) {
		int from = im->dev[i].ordinal;
		for (int j = 0; j < im->n_devices; j++) {
			int to = im->dev[j].ordinal, can = 0;
			if (i == j)
				continue;
			pairs++;
			cudaError_t e = cudaDeviceCanAccessPeer(&can, from, to);
			if (e == cudaSuccess && can && (e = cuda_switch(from)) == cudaSuccess) {
				e = cudaDeviceEnablePeerAccess(to, 0);
				if (e == cudaErrorPeerAccessAlreadyEnabled) {
					/* Not an error, but left as the last one it would
					 * fail the next launch that checks. */
					cudaGetLastError();
					e = cudaSuccess;
				}
			}
			if (e != cudaSuccess) {
				cudaGetLastError();
				log_warn("peer access from CUDA device %d to %d: %s", from, to,
				         cudaGetErrorString(e));
			}
			if (e == cudaSuccess && can) {
				enabled++;
			} else if (used < sizeof(without)) {
				used += (size_t)snprintf(without + used, sizeof(without) - used,
				                         "%s%d->%d", used ? ", " : "", from, to);
			}
		}
	}
	if (pairs == 0)
		return;
	if (enabled == pairs)
		log_info("peer access between all %d GPUs", im->n_devices);
	else
		log_warn("peer access for %d of %d GPU pairs; without it (CUDA ordinals, "
		         "from->to): %s; copies between those go through the host",
		         enabled, pairs, without);
}

/* Device index d's stream pools, with the device current. */
static void device_start(cuda_impl *im, int d, int queues)
{
	cuda_device *dev = &im->dev[d];
	if (cudaDeviceGetStreamPriorityRange(&dev->prio_low, &dev->prio_normal) != cudaSuccess) {
		cudaGetLastError();
		dev->prio_low = dev->prio_normal = 0;
	}
	int n_low = queues >= 8 ? queues / 8 : 0;
	pool_make(im, d, &dev->pool, queues - n_low, dev->prio_normal);
	pool_make(im, d, &dev->low_pool, n_low, dev->prio_low);
	const char *q = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	log_info("device %d: %d + %d pooled streams (priorities %d and %d), "
	         "CUDA_DEVICE_MAX_CONNECTIONS=%s",
	         dev->ordinal, dev->pool.n, dev->low_pool.n, dev->prio_normal, dev->prio_low,
	         q ? q : "(driver default)");
}

backend *backend_cuda_open(const backend_options *opt, char *err, size_t errlen)
{
	static const backend_options one = { .devices = { 0 }, .n_devices = 1 };
	if (!opt || opt->n_devices <= 0)
		opt = &one;
	if (opt->n_devices > BACKEND_MAX_DEVICES) {
		snprintf(err, errlen, "devices: %d named, and a tileopsd serves at most %d",
		         opt->n_devices, BACKEND_MAX_DEVICES);
		return NULL;
	}
	cuda_load_eagerly();
	/* What this thread made current before is not known (another backend). */
	cuda_current = -1;
	int n_dev = opt->n_devices;
	struct cudaDeviceProp props[BACKEND_MAX_DEVICES];
	if (check_devices(opt->devices, n_dev, props, err, errlen) != 0)
		return NULL;
	backend *be = calloc(1, sizeof(*be));
	cuda_impl *im = calloc(1, sizeof(*im));
	cuda_nccl *nccl = cuda_nccl_new();
	if (!be || !im || !nccl) {
		free(be);
		free(im);
		cuda_nccl_close(nccl);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	im->n_devices = n_dev;
	im->nccl = nccl;
	for (int d = 0; d < n_dev; d++)
		im->dev[d].ordinal = opt->devices[d];
	enable_peers(im);
	pthread_mutex_init(&im->ipc_mu, NULL);
	pthread_mutex_init(&im->defer_mu, NULL);
	pthread_cond_init(&im->defer_cv, NULL);
	reaper_arg *ra = malloc(sizeof(*ra));
	if (ra) {
		*ra = (reaper_arg){ be, im };
		im->reaper_running = pthread_create(&im->reaper, NULL, reaper_main, ra) == 0;
		if (!im->reaper_running)
			free(ra);
	}
	if (!im->reaper_running)
		log_warn("cannot start the release thread: memory is released at once");
	/* The first device last: the estimates and ceilings below are its,
	 * and the opening thread is left on it, as it was with one. */
	for (int d = n_dev - 1; d >= 0; d--) {
		on_device_or_log(im->dev[d].ordinal, "opening the CUDA backend");
		device_start(im, d, opt->queues);
	}
	int device = im->dev[0].ordinal;
	const struct cudaDeviceProp *prop = &props[0];
	be->ops = &cuda_ops;
	be->impl = im;
	be->name = "cuda";
	be->is_gpu = 1;
	be->capabilities = TILEOPS_CODE_CAP_CUDA_IPC | TILEOPS_CODE_CAP_GPU;
	/* Peak rates for estimating ops' times (exec/share.h): memory moves two
	 * words a clock per bus width (HBM); a Hopper SM does 4096 dense 16-bit
	 * tensor-core flops a clock. The first device's, as every device is
	 * a Hopper GPU (check_devices). */
	int mem_khz = 0, bus_bits = 0, sm_khz = 0;
	cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device);
	cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device);
	cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, device);
	cudaGetLastError();
	be->bytes_per_us = 2.0 * mem_khz * 1e-3 * (bus_bits / 8.0);
	be->flops_per_us = (double)prop->multiProcessorCount * sm_khz * 1e-3 * 4096.0;
	log_info("device %d: estimates at %.2f TB/s and %.0f TFLOP/s", device,
	         be->bytes_per_us * 1e-6, be->flops_per_us * 1e-6);
	/* The roofline's ceilings from the same properties: dense flops a clock
	 * per Hopper SM are 4096 (bf16, fp16 tensor cores), 8192 (fp8) and 256
	 * (fp32 FMA on the CUDA cores). On an H200 that gives about 4.8 TB/s and
	 * 1070 / 2140 / 67 TFLOP/s at its 1.98 GHz. The bandwidth is then measured
	 * (measure_copy_gbs); a measured flops peak (cuBLAS at 730 TFLOP/s) can be
	 * configured. */
	double sm_ghz_count = (double)prop->multiProcessorCount * sm_khz * 1e-6;
	im->ceil = (backend_ceilings){
		.bandwidth_gbs = be->bytes_per_us * 1e-3,
		.tflops_bf16 = sm_ghz_count * 4096.0 * 1e-3,
		.tflops_fp16 = sm_ghz_count * 4096.0 * 1e-3,
		.tflops_fp32 = sm_ghz_count * 256.0 * 1e-3,
		.tflops_fp8 = sm_ghz_count * 8192.0 * 1e-3,
		.source = "device",
	};
	double copy_gbs = measure_copy_gbs();
	if (copy_gbs > 0.0) {
		im->ceil.bandwidth_gbs = copy_gbs;
		im->ceil.source = "measured";
	}
	be->n_devices = n_dev;
	for (int d = 0; d < n_dev; d++) {
		backend_device *bd = &be->devices[d];
		const struct cudaDeviceProp *p = &props[d];
		bd->ordinal = im->dev[d].ordinal;
		bd->memory_bytes = (uint64_t)p->totalGlobalMem;
		snprintf(bd->name, sizeof(bd->name), "%.64s (sm_%d%d, %d SMs, %.0f GiB, device %d)",
		         p->name, p->major, p->minor, p->multiProcessorCount,
		         (double)p->totalGlobalMem / (1024.0 * 1024.0 * 1024.0), bd->ordinal);
		bd->mps = device_mps(bd->ordinal);
	}
	snprintf(be->device, sizeof(be->device), "%s", be->devices[0].name);
	int all_mps = 1;
	for (int d = 0; d < n_dev; d++)
		all_mps &= be->devices[d].mps == 1;
	if (all_mps)
		be->capabilities |= TILEOPS_CODE_CAP_MPS;
	cuda_be = be;
	return be;
}
