/*
 * cpu_pool.c - the CPU backend's queues and its pool of device threads (see
 * cpu_pool.h and backend_cpu.c's header comment).
 */
#include "cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

_Thread_local cpu_thread *cpu_tls;

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

int cpu_stream_idle(const cpu_stream *s)
{
	return !s->head && !s->running;
}

/* Queue it on s (mu held); the pool takes it from there. */
void cpu_enqueue_locked(cpu_impl *im, cpu_stream *s, cpu_item *it)
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
	int was_idle = cpu_stream_idle(s);
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

void cpu_enqueue(backend *be, cpu_stream *s, cpu_item *it)
{
	cpu_impl *im = be->impl;
	pthread_mutex_lock(&im->mu);
	cpu_enqueue_locked(im, s, it);
	pthread_mutex_unlock(&im->mu);
}

cpu_item *cpu_item_new(item_kind kind, char *err, size_t errlen)
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

void cpu_graph_unref_locked(cpu_graph *g)
{
	if (g && --g->refs == 0) {
		free(g->kernels);
		free(g->calls);
		free(g);
	}
}

void cpu_stream_unref_locked(cpu_stream *s)
{
	if (--s->refs > 0)
		return;
	if (s->recording)
		cpu_graph_unref_locked(s->recording);
	free(s);
}

void cpu_fence_unref_locked(cpu_fence *f)
{
	if (--f->refs > 0)
		return;
	cpu_stream_unref_locked(f->s);
	free(f);
}

/* The fence's status, taken from its stream as it passes. */
void cpu_fence_pass_locked(cpu_fence *f)
{
	cpu_stream *s = f->s;
	f->passed = 1;
	if (f->waiter) {
		cpu_stream *w = f->waiter;
		f->waiter = NULL;
		w->parked = 0;
		ready_push(f->im, w);
		pthread_cond_signal(&f->im->work_cv);
	}
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

tileops_status cpu_wait_locked(cpu_impl *im, cpu_stream *s, cpu_stream *after, char *err,
                               size_t errlen)
{
	if (s == after)
		return TILEOPS_OK;
	if (cpu_stream_idle(after)) {
		/* Nothing of it is left to wait for; a failure it has not reported
		 * is handed on now, as a wait item would when it ran. */
		if (after->err_serial > after->err_answered) {
			stream_fail_locked(s, after->err_status, after->err_msg);
			after->err_answered = after->err_serial;
		}
		return TILEOPS_OK;
	}
	cpu_fence *f = calloc(1, sizeof(*f));
	cpu_item *mark = f ? cpu_item_new(ITEM_FENCE, err, errlen) : NULL;
	cpu_item *wait = mark ? cpu_item_new(ITEM_WAIT, err, errlen) : NULL;
	if (!wait) {
		free(f);
		free(mark);
		snprintf(err, errlen, "out of host memory ordering one stream after another");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	f->s = after;
	f->im = im;
	f->refs = 2; /* the marker's and the wait's */
	after->refs++;
	mark->u.fence = f;
	wait->u.fence = f;
	cpu_enqueue_locked(im, after, mark);
	cpu_enqueue_locked(im, s, wait);
	return TILEOPS_OK;
}

/* Release the freed memory that no earlier queued work can still use. */
void cpu_release_deferred_locked(cpu_impl *im)
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
	case ITEM_DCOPY:
		if (lost)
			return TILEOPS_ERR_BACKEND;
		memmove(it->u.dcopy.dst, it->u.dcopy.src, it->u.dcopy.len);
		return TILEOPS_OK;
	case ITEM_COLL:
		if (lost)
			return TILEOPS_ERR_BACKEND;
		cpu_collective_run(it->u.coll);
		return TILEOPS_OK;
	case ITEM_FREE:
	case ITEM_FENCE:
	case ITEM_WAIT:
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
		cpu_graph_unref_locked(it->u.graph);
		break;
	case ITEM_COLL:
		free(it->u.coll);
		break;
	case ITEM_FENCE:
		cpu_fence_pass_locked(it->u.fence);
		cpu_fence_unref_locked(it->u.fence);
		break;
	case ITEM_WAIT: {
		/* A failure on the stream waited for is this one's too, handed
		 * on once: a session with streams on several devices fences on
		 * the stream that waits for them all (exec/devices.h), so its
		 * next sync reports a kernel that failed on any of them. */
		cpu_fence *f = it->u.fence;
		if (f->status != TILEOPS_OK && f->s->err_answered < f->err_serial) {
			stream_fail_locked(s, f->status, f->msg);
			f->s->err_answered = f->err_serial;
		}
		cpu_fence_unref_locked(f);
		break;
	}
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
		cpu_release_deferred_locked(im);
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
		cpu_item *it = s->head;
		if (it->kind == ITEM_WAIT && !it->u.fence->passed) {
			/* Off the ready lists until the fence passes: no thread waits. */
			s->parked = 1;
			it->u.fence->waiter = s;
			continue;
		}
		s->running = 1;
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
void cpu_pool_start_locked(backend *be)
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
	__atomic_store_n(&be->work_threads, im->n_pool, __ATOMIC_RELAXED);
}

/* The host sees a fault when it next asks the device anything (executor
 * thread): from then on the device is lost. Returns 1 when it is. */
int cpu_observe_fault(backend *be)
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

tileops_status cpu_lost_error(backend *be, char *err, size_t errlen)
{
	char why[256];
	backend_lost(be, why, sizeof(why));
	snprintf(err, errlen, "the device failed (%s); tileopsd is restarting", why);
	return TILEOPS_ERR_BACKEND;
}
