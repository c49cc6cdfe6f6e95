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
 * as the CUDA backend does once the device has finished.
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

/* A plan on the CPU: the recorded calls, replayed in order. Replays queued
 * on streams hold references, so a graph dropped from the cache meanwhile
 * is freed only after its last replay ran. */
typedef struct cpu_graph {
	size_t n, cap;
	const tk_kernel_entry **kernels;
	tk_call *calls;
	int refs; /* under mu once made */
} cpu_graph;

/* What each executor thread keeps (thread_init to thread_fini). */
typedef struct cpu_thread {
	struct cpu_item *done_head, *done_tail; /* finished timed items, oldest first */
	int owned;                              /* items it queued that have not run yet */
	void (*wake)(void *arg);                /* thread_waker */
	void *wake_arg;
} cpu_thread;

struct cpu_fence;

typedef enum item_kind {
	ITEM_KERNEL,
	ITEM_GRAPH,
	ITEM_WRITE, /* arena -> tensor */
	ITEM_READ,  /* tensor -> arena */
	ITEM_FREE,
	ITEM_FENCE
} item_kind;

/* One piece of queued work, with everything it needs copied in. */
typedef struct cpu_item {
	struct cpu_item *next;          /* in its stream's queue, then in a done list */
	struct cpu_item *gprev, *gnext; /* in the device's list of queued work */
	uint64_t ticket;                /* device-wide queue order */
	item_kind kind;
	cpu_thread *owner; /* the executor thread that queued it */
	int timed, slot;
	int low; /* queued at the low priority (runs after normal-priority work) */
	void *arg;
	double us; /* the kernel's time, for the timing callback */
	union {
		struct {
			const tk_kernel_entry *k;
			tk_call call;
		} kern;
		cpu_graph *graph;
		struct {
			void *dev;
			arena a; /* the mapping, by value: the stream is drained before it goes */
			size_t off, len;
		} copy;
		void *ptr;
		struct cpu_fence *fence;
	} u;
} cpu_item;

/*
 * A session's stream. Failures (other than a fault, which loses the
 * device) are not sticky on a GPU: they are reported at the launch.
 * Here a kernel fails after its launch returned, so the failure is kept on
 * the stream and every fence after it reports it until the executor has
 * passed one of those on to the client (fence_answered): the next sync or
 * copy after a failed op fails, later ones do not.
 */
typedef struct cpu_stream {
	cpu_graph *recording; /* between capture_begin and capture_end (executor only) */
	cpu_item *head, *tail;
	int running;                   /* a pool thread runs its head */
	int low;                       /* work queued from now on is low priority */
	struct cpu_stream *ready_next; /* in a ready list: queued work, not running */
	int refs;                      /* the session's, and one per fence made on it */
	uint64_t err_serial;           /* failures so far */
	uint64_t err_answered;         /* the failures a client has been told of */
	tileops_status err_status;     /* the first failure not told yet */
	char err_msg[256];
} cpu_stream;

typedef struct cpu_fence {
	cpu_stream *s; /* holds a reference */
	int passed;
	int refs; /* the executor's, and the queued marker's */
	uint64_t err_serial;
	tileops_status status;
	char msg[256];
} cpu_fence;

/* A freed tensor whose memory waits for work queued before the free on
 * other streams (a shared plan's replay reads its owner's tensors). */
typedef struct cpu_deferred {
	void *ptr;
	uint64_t ticket;
	struct cpu_deferred *next;
} cpu_deferred;

typedef struct cpu_impl {
	pthread_mutex_t mu;
	pthread_cond_t work_cv; /* a stream became ready, or the pool stops */
	pthread_cond_t idle_cv; /* a stream drained, or a thread's items all ran */
	/* Streams with queued work that no thread runs, by their head item's
	 * priority: [0] normal, [1] low. */
	cpu_stream *ready_head[2], *ready_tail[2];
	cpu_item *all_head, *all_tail; /* every queued item, by ticket */
	uint64_t next_ticket;
	cpu_deferred *deferred;
	int cpus;      /* the CPUs this process may run on */
	int executors; /* executor threads that called thread_init */
	int n_pool, pool_started, stopping;
	pthread_t *pool;
	/* A kernel reported TK_ERR_FAULT (atomic; the reason under mu). As a
	 * GPU's sticky error is, it is seen by the host at its next fence
	 * query, sync or launch, which marks the device lost (observe_fault);
	 * meanwhile nothing more runs. */
	int faulted;
	char fault_why[200];
} cpu_impl;

static _Thread_local cpu_thread *cpu_tls;

/* ---- the queues (mu held) ------------------------------------------------ */

/* Behind the ready streams of its head item's priority. As on a GPU, the
 * priority is the work's, fixed when it was queued: a stream lowered with
 * work queued runs that work at the priority it had. */
static void ready_push(cpu_impl *im, cpu_stream *s)
{
	int q = s->head->low;
	s->ready_next = NULL;
	if (im->ready_tail[q])
		im->ready_tail[q]->ready_next = s;
	else
		im->ready_head[q] = s;
	im->ready_tail[q] = s;
}

/* The next stream to run: normal-priority work first, each list in turn. */
static cpu_stream *ready_pop(cpu_impl *im)
{
	for (int q = 0; q < 2; q++) {
		cpu_stream *s = im->ready_head[q];
		if (!s)
			continue;
		im->ready_head[q] = s->ready_next;
		if (!im->ready_head[q])
			im->ready_tail[q] = NULL;
		s->ready_next = NULL;
		return s;
	}
	return NULL;
}

static int stream_idle(const cpu_stream *s)
{
	return !s->head && !s->running;
}

/* Queue it on s (mu held); the pool takes it from there. */
static void enqueue_locked(cpu_impl *im, cpu_stream *s, cpu_item *it)
{
	it->ticket = ++im->next_ticket;
	it->low = s->low;
	it->owner = cpu_tls;
	if (it->owner)
		it->owner->owned++;
	it->next = NULL;
	it->gnext = NULL;
	it->gprev = im->all_tail;
	if (im->all_tail)
		im->all_tail->gnext = it;
	else
		im->all_head = it;
	im->all_tail = it;
	int was_idle = stream_idle(s);
	if (s->tail)
		s->tail->next = it;
	else
		s->head = it;
	s->tail = it;
	if (was_idle) {
		ready_push(im, s); /* after head is set: its priority picks the list */
		pthread_cond_signal(&im->work_cv);
	}
}

static void enqueue(backend *be, cpu_stream *s, cpu_item *it)
{
	cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mu);
	enqueue_locked(im, s, it);
	pthread_mutex_unlock(&im->mu);
}

static cpu_item *item_new(item_kind kind, char *err, size_t errlen)
{
	cpu_item *it = malloc(sizeof(*it));
	if (!it) {
		snprintf(err, errlen, "out of host memory queueing work");
		return NULL;
	}
	it->kind = kind;
	it->timed = 0;
	it->slot = -1;
	it->arg = NULL;
	it->us = 0.0;
	return it;
}

static void graph_unref_locked(cpu_graph *g)
{
	if (g && --g->refs == 0) {
		free(g->kernels);
		free(g->calls);
		free(g);
	}
}

static void stream_unref_locked(cpu_stream *s)
{
	if (--s->refs > 0)
		return;
	if (s->recording)
		graph_unref_locked(s->recording);
	free(s);
}

static void fence_unref_locked(cpu_fence *f)
{
	if (--f->refs > 0)
		return;
	stream_unref_locked(f->s);
	free(f);
}

/* The fence's status, taken from its stream as it passes. */
static void fence_pass_locked(cpu_fence *f)
{
	cpu_stream *s = f->s;
	f->passed = 1;
	f->err_serial = s->err_serial;
	if (s->err_serial > s->err_answered) {
		f->status = s->err_status;
		snprintf(f->msg, sizeof(f->msg), "%s", s->err_msg);
	} else {
		f->status = TILEOPS_OK;
		f->msg[0] = '\0';
	}
}

static void stream_fail_locked(cpu_stream *s, tileops_status st, const char *msg)
{
	if (s->err_serial == s->err_answered) {
		s->err_status = st;
		snprintf(s->err_msg, sizeof(s->err_msg), "%s", msg);
	}
	s->err_serial++;
}

/* Release the freed memory that no earlier queued work can still use. */
static void release_deferred_locked(cpu_impl *im)
{
	uint64_t oldest = im->all_head ? im->all_head->ticket : UINT64_MAX;
	for (cpu_deferred **pp = &im->deferred; *pp;) {
		cpu_deferred *d = *pp;
		if (d->ticket < oldest) {
			*pp = d->next;
			free(d->ptr);
			free(d);
		} else {
			pp = &d->next;
		}
	}
}

/* ---- the pool ------------------------------------------------------------- */

static tileops_status run_kernel(backend *be, const tk_kernel_entry *k, const tk_call *call,
                                 char *err, size_t errlen)
{
	tk_status st = k->cpu(call);
	if (st == TK_OK)
		return TILEOPS_OK;
	if (st == TK_ERR_UNSUPPORTED) {
		snprintf(err, errlen, "%s: the CPU kernel does not support these arguments", k->op);
		return TILEOPS_ERR_UNSUPPORTED;
	}
	if (st == TK_ERR_FAULT) {
		cpu_impl *im = be->impl;
		pthread_mutex_lock(&im->mu);
		if (!im->faulted)
			snprintf(im->fault_why, sizeof(im->fault_why),
			         "%s: the device faulted (the CPU backend's stand-in for a sticky "
			         "device error)",
			         k->op);
		__atomic_store_n(&im->faulted, 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&im->mu);
		snprintf(err, errlen, "%s: the device faulted; tileopsd is restarting", k->op);
		return TILEOPS_ERR_BACKEND;
	}
	if (st == TK_ERR_NOMEM) {
		snprintf(err, errlen, "%s: the CPU kernel ran out of host memory", k->op);
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	snprintf(err, errlen, "%s: the CPU kernel failed (status %d)", k->op, (int)st);
	return TILEOPS_ERR_BACKEND;
}

static tileops_status copy_failed(const cpu_item *it, char *err, size_t errlen)
{
	snprintf(err, errlen, "arena bytes [%zu, %zu) are no longer backed by the shm object",
	         it->u.copy.off, it->u.copy.off + it->u.copy.len);
	return TILEOPS_ERR_RANGE;
}

/* Run one item outside the lock. Once the device is lost nothing more runs
 * (every fence reports the loss), but memory is still released. */
static tileops_status run_item(backend *be, cpu_item *it, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	int lost = __atomic_load_n(&im->faulted, __ATOMIC_ACQUIRE) || backend_lost(be, NULL, 0);
	switch (it->kind) {
	case ITEM_KERNEL: {
		if (lost)
			return TILEOPS_ERR_BACKEND;
		double t0 = clock_now_us();
		tileops_status st = run_kernel(be, it->u.kern.k, &it->u.kern.call, err, errlen);
		it->us = clock_now_us() - t0;
		return st;
	}
	case ITEM_GRAPH: {
		cpu_graph *g = it->u.graph;
		for (size_t i = 0; i < g->n && !lost; i++) {
			tileops_status st =
			        run_kernel(be, g->kernels[i], &g->calls[i], err, errlen);
			if (st != TILEOPS_OK)
				return st; /* the rest of the replay does not run */
		}
		return lost ? TILEOPS_ERR_BACKEND : TILEOPS_OK;
	}
	case ITEM_WRITE:
		if (lost)
			return TILEOPS_ERR_BACKEND;
		if (arena_copy_in(&it->u.copy.a, it->u.copy.off, it->u.copy.dev, it->u.copy.len) !=
		    0)
			return copy_failed(it, err, errlen);
		return TILEOPS_OK;
	case ITEM_READ:
		if (lost)
			return TILEOPS_ERR_BACKEND;
		if (arena_copy_out(&it->u.copy.a, it->u.copy.off, it->u.copy.dev, it->u.copy.len) !=
		    0)
			return copy_failed(it, err, errlen);
		return TILEOPS_OK;
	case ITEM_FREE:
	case ITEM_FENCE:
		return TILEOPS_OK; /* done under the lock, in finish_locked */
	}
	return TILEOPS_OK;
}

/* The bookkeeping after an item ran (mu held): off its queues, its result
 * on the stream, its time to its owner. Returns 1 when the item is kept
 * (in its owner's done list). */
static int finish_locked(cpu_impl *im, cpu_stream *s, cpu_item *it, tileops_status st,
                         const char *msg)
{
	s->head = it->next;
	if (!s->head)
		s->tail = NULL;
	if (it->gprev)
		it->gprev->gnext = it->gnext;
	else
		im->all_head = it->gnext;
	if (it->gnext)
		it->gnext->gprev = it->gprev;
	else
		im->all_tail = it->gprev;
	if (st != TILEOPS_OK)
		stream_fail_locked(s, st, msg);
	int keep = 0;
	switch (it->kind) {
	case ITEM_GRAPH:
		graph_unref_locked(it->u.graph);
		break;
	case ITEM_FENCE:
		fence_pass_locked(it->u.fence);
		fence_unref_locked(it->u.fence);
		break;
	case ITEM_FREE: {
		cpu_deferred *d = malloc(sizeof(*d));
		if (!d || !im->all_head || im->all_head->ticket > it->ticket) {
			free(it->u.ptr); /* nothing queued before it is left */
			free(d);
		} else {
			*d = (cpu_deferred){ it->u.ptr, it->ticket, im->deferred };
			im->deferred = d;
		}
		break;
	}
	case ITEM_KERNEL:
		/* A failed (or skipped) kernel's time is reported too: a timed
		 * ring op's completion waits for it. Its failure is the stream's. */
		keep = it->timed && it->owner;
		break;
	default:
		break;
	}
	if (im->deferred)
		release_deferred_locked(im);
	cpu_thread *t = it->owner;
	if (keep) {
		it->next = NULL;
		if (t->done_tail)
			t->done_tail->next = it;
		else
			t->done_head = it;
		t->done_tail = it;
	}
	if (t) {
		/* Under the lock: thread_fini frees t once its items have run. */
		if (--t->owned == 0)
			pthread_cond_broadcast(&im->idle_cv);
		if (t->wake)
			t->wake(t->wake_arg);
	}
	return keep;
}

typedef struct pool_arg {
	backend *be;
	int index;
} pool_arg;

static void *pool_main(void *arg)
{
	pool_arg pa = *(pool_arg *)arg;
	free(arg);
	backend *be = pa.be;
	cpu_impl *im = be->impl;
	char name[16];
	snprintf(name, sizeof(name), "tileops-cpu%d", pa.index);
	pthread_setname_np(pthread_self(), name);
	/* Arena copies turn a SIGBUS into an error (arena.c); the guard is this
	 * thread's, so the signal must reach it. */
	sigset_t bus;
	sigemptyset(&bus);
	sigaddset(&bus, SIGBUS);
	pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
	pthread_mutex_lock(&im->mu);
	for (;;) {
		cpu_stream *s = ready_pop(im);
		if (!s) {
			if (im->stopping)
				break;
			pthread_cond_wait(&im->work_cv, &im->mu);
			continue;
		}
		s->running = 1;
		cpu_item *it = s->head;
		pthread_mutex_unlock(&im->mu);
		char msg[256] = "";
		tileops_status st = run_item(be, it, msg, sizeof(msg));
		pthread_mutex_lock(&im->mu);
		int kept = finish_locked(im, s, it, st, msg);
		s->running = 0;
		if (s->head)
			ready_push(im, s); /* behind the other ready streams of its next item's
			                    * priority: they take turns */
		else
			pthread_cond_broadcast(&im->idle_cv);
		if (!kept)
			free(it);
	}
	pthread_mutex_unlock(&im->mu);
	return NULL;
}

/* Start the pool (mu held): one thread per CPU the executor threads leave,
 * at least one. Made with the first stream, once every executor thread has
 * started. */
static void pool_start_locked(backend *be)
{
	cpu_impl *im = be->impl;
	if (im->pool_started)
		return;
	im->pool_started = 1;
	int n = im->cpus - im->executors;
	if (n < 1)
		n = 1;
	im->pool = calloc((size_t)n, sizeof(*im->pool));
	for (int i = 0; im->pool && i < n; i++) {
		pool_arg *pa = malloc(sizeof(*pa));
		if (!pa)
			break;
		*pa = (pool_arg){ be, i };
		if (pthread_create(&im->pool[i], NULL, pool_main, pa) != 0) {
			free(pa);
			break;
		}
		im->n_pool++;
	}
}

/* The host sees a fault when it next asks the device anything (executor
 * thread): from then on the device is lost. Returns 1 when it is. */
static int observe_fault(backend *be)
{
	cpu_impl *im = be->impl;
	if (__atomic_load_n(&im->faulted, __ATOMIC_ACQUIRE) && !backend_lost(be, NULL, 0)) {
		char why[sizeof(im->fault_why)];
		pthread_mutex_lock(&im->mu);
		snprintf(why, sizeof(why), "%s", im->fault_why);
		pthread_mutex_unlock(&im->mu);
		backend_mark_lost(be, "%s", why);
	}
	return backend_lost(be, NULL, 0);
}

static tileops_status lost_error(backend *be, char *err, size_t errlen)
{
	char why[256];
	backend_lost(be, why, sizeof(why));
	snprintf(err, errlen, "the device failed (%s); tileopsd is restarting", why);
	return TILEOPS_ERR_BACKEND;
}

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
	release_deferred_locked(im); /* nothing is queued any more */
	pthread_cond_destroy(&im->work_cv);
	pthread_cond_destroy(&im->idle_cv);
	pthread_mutex_destroy(&im->mu);
	free(im);
	free(be);
}

static tileops_status cpu_stream_create(backend *be, void **stream, char *err, size_t errlen)
{
	cpu_impl *im = be->impl;
	cpu_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of host memory creating a stream");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	s->refs = 1;
	pthread_mutex_lock(&im->mu);
	pool_start_locked(be);
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
	while (!stream_idle(s))
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
		graph_unref_locked(s->recording);
	s->recording = NULL;
	stream_unref_locked(s);
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

/* Freed in stream order, once no work queued before it on any stream is
 * left (as cudaFree waits for the device). */
static void cpu_free(backend *be, void *stream, void *ptr)
{
	cpu_impl *im = be->impl;
	char err[64];
	if (!ptr)
		return;
	cpu_item *it = item_new(ITEM_FREE, err, sizeof(err));
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
		enqueue_locked(im, stream, it);
	}
	pthread_mutex_unlock(&im->mu);
}

static tileops_status cpu_copy(backend *be, void *stream, item_kind kind, void *dev, const arena *a,
                               size_t aoff, size_t len, char *err, size_t errlen)
{
	if (observe_fault(be))
		return lost_error(be, err, errlen);
	cpu_item *it = item_new(kind, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.copy.dev = dev;
	it->u.copy.a = *a;
	it->u.copy.off = aoff;
	it->u.copy.len = len;
	enqueue(be, stream, it);
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
	if (observe_fault(be))
		return lost_error(be, err, errlen);
	cpu_item *it = item_new(ITEM_KERNEL, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.kern.k = k;
	it->u.kern.call = *call;
	it->timed = timed && be->timing_cb;
	it->slot = slot;
	it->arg = arg;
	enqueue(be, cs, it);
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
	observe_fault(be);
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
	cpu_item *it = f ? item_new(ITEM_FENCE, err, errlen) : NULL;
	if (!it) {
		free(f);
		snprintf(err, errlen, "out of host memory making a fence");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	f->s = s;
	f->refs = 1;
	pthread_mutex_lock(&im->mu);
	s->refs++;
	if (stream_idle(s)) {
		fence_pass_locked(f); /* nothing before it is left to run */
		free(it);
	} else {
		f->refs++;
		it->u.fence = f;
		enqueue_locked(im, s, it);
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
	observe_fault(be);
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
	fence_unref_locked(fence);
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
	graph_unref_locked(graph);
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
	if (observe_fault(be))
		return lost_error(be, err, errlen);
	if (g->n == 0)
		return TILEOPS_OK;
	cpu_item *it = item_new(ITEM_GRAPH, err, errlen);
	if (!it)
		return TILEOPS_ERR_OUT_OF_MEMORY;
	it->u.graph = g;
	pthread_mutex_lock(&im->mu);
	g->refs++;
	enqueue_locked(im, stream, it);
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

/* The CPUs this process may run on (its affinity: a container's cpuset). */
static int usable_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

backend *backend_cpu_open(char *err, size_t errlen)
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
	im->cpus = usable_cpus();
	be->ops = &cpu_ops;
	be->impl = im;
	be->name = "cpu";
	snprintf(be->device, sizeof(be->device), "CPU reference kernels (%d cores)", im->cpus);
	be->capabilities = 0;
	be->is_gpu = 0;
	/* Rough rates of one core running the reference kernels, for the
	 * estimates that hold a session with much queued (exec/share.h). */
	be->bytes_per_us = 4000.0;
	be->flops_per_us = 2000.0;
	return be;
}
