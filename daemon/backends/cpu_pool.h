/*
 * cpu_pool.h - the CPU backend's streams, queues, fences and pool of device
 * threads (cpu_pool.c), for backend_cpu.c alone, which implements the
 * backend interface over them. One lock, cpu_impl.mu, guards every queue,
 * stream, fence and per-thread record; functions named *_locked expect it
 * held. Kernels and copies run outside it, on the pool's threads.
 */
#ifndef TILEOPSD_CPU_POOL_H
#define TILEOPSD_CPU_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "backend.h"

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
	ITEM_FENCE,
	ITEM_WAIT,  /* the stream waits for a fence of another stream */
	ITEM_DCOPY, /* device memory to device memory */
	ITEM_COLL   /* a collective, on its rank 0's stream (cpu_collective.c) */
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
		struct {
			void *dst;
			const void *src;
			size_t len;
		} dcopy;
		void *ptr;
		struct cpu_fence *fence; /* FENCE, WAIT */
		backend_coll *coll;      /* owned */
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
	int parked;                    /* its head waits for a fence (ITEM_WAIT) to pass */
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
	cpu_stream *waiter;  /* parked on it (ITEM_WAIT): made ready when it passes */
	struct cpu_impl *im; /* whose ready lists the waiter goes back to */
	int refs;            /* the executor's, and the queued marker's */
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
	 * query, sync or launch, which marks the device lost (cpu_observe_fault);
	 * meanwhile nothing more runs. */
	int faulted;
	char fault_why[200];
} cpu_impl;

/* The calling executor thread's record (thread_init to thread_fini). */
extern _Thread_local cpu_thread *cpu_tls;

/* Queue on `s` a wait for the work queued on `after` so far (mu held);
 * TILEOPS_ERR_OUT_OF_MEMORY with a message. */
tileops_status cpu_wait_locked(cpu_impl *im, cpu_stream *s, cpu_stream *after, char *err,
                               size_t errlen);
/* Nothing queued on s and nothing of it running (mu held). */
int cpu_stream_idle(const cpu_stream *s);
/* Queue it on s in the stream's order (mu held); the pool takes it from there. */
void cpu_enqueue_locked(cpu_impl *im, cpu_stream *s, cpu_item *it);
/* cpu_enqueue_locked, taking mu. */
void cpu_enqueue(backend *be, cpu_stream *s, cpu_item *it);
/* An item of `kind`, not timed, of no stats slot; NULL with a message when out of memory. */
cpu_item *cpu_item_new(item_kind kind, char *err, size_t errlen);
/* Drop a reference; the last one frees the graph (mu held). */
void cpu_graph_unref_locked(cpu_graph *g);
/* Drop a reference; the last one frees the stream (mu held). */
void cpu_stream_unref_locked(cpu_stream *s);
/* Drop a reference; the last one frees the fence (mu held). */
void cpu_fence_unref_locked(cpu_fence *f);
/* f passes, with its stream's unanswered error if there is one, and the
 * stream parked on it becomes ready (mu held). */
void cpu_fence_pass_locked(cpu_fence *f);
/* Free the freed memory that no earlier queued work can still use (mu held). */
void cpu_release_deferred_locked(cpu_impl *im);
/* Start the pool with the first stream: a thread per CPU the executor threads
 * leave, at least one (mu held). */
void cpu_pool_start_locked(backend *be);
/* Once a kernel has faulted, mark the device lost; 1 when it is (executor thread). */
int cpu_observe_fault(backend *be);
/* TILEOPS_ERR_BACKEND and its message, for a call after the device was lost. */
tileops_status cpu_lost_error(backend *be, char *err, size_t errlen);

/* The backend's collective operation (backend.h; cpu_collective.c). */
tileops_status cpu_collective(backend *be, const backend_coll *c, char *err, size_t errlen);
/* Run a queued collective (a pool thread, outside the lock). */
void cpu_collective_run(const backend_coll *c);

#endif
