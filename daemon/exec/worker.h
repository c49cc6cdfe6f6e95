/*
 * worker.h - the executor and its threads, as the modules of exec/ see
 * them: executor.c runs the threads, dispatch.c the requests, completion.c
 * what is owed to clients, launch.c the ops, tensors.c and plan.c what a
 * session holds. Executor thread only, except where noted.
 */
#ifndef TILEOPSD_WORKER_H
#define TILEOPSD_WORKER_H

#include <pthread.h>

#include "executor.h"
#include "session.h"

/* A completion owed once a fence passes: a job's answer or a ring CQE. */
typedef struct pending {
	struct pending *next;
	void *fence;
	job *job;   /* answer this job, or ... */
	session *s; /* ... post a CQE with this tag (holds a reference) */
	uint64_t tag;
	int traced; /* the entry asked for a trace (TILEOPS_SQE_F_TRACE) */
	tileops_ring_trace trace;
} pending;

/* A ring op whose completion waits for its device time. */
typedef struct timed_cqe {
	session *s; /* holds a reference */
	uint64_t tag;
	double received_us; /* when its ring entry was taken (for the latency stats) */
	int traced;
	tileops_ring_trace trace;
} timed_cqe;

/* A ring op's answer written during a batch (ring_hold) and not yet
 * published: its latency ends when the batch's answers are published. */
typedef struct owed_latency {
	session *s;
	int slot;
	int failed;
	double received_us;
} owed_latency;

/*
 * One executor thread. It owns the sessions given to it (their streams,
 * tensors, rings and owed completions): every request of such a session
 * runs here, in order.
 */
typedef struct worker {
	struct executor *ex;
	int index;
	pthread_t thread;

	/* Shared with submitters (under mu). */
	pthread_mutex_t mu;
	job *head, *tail;
	int stopping;
	uint32_t bell; /* futex word; bumped by submitters when sleeping */
	int sleeping;  /* atomic */

	/* Start-up (under the executor's start_mu). */
	int started;
	tileops_status init_status;
	char init_msg[256];

	/* This thread only. */
	session *rings;   /* sessions whose rings are polled */
	session *rr_next; /* where the next polling pass starts */
	pending *pend, *pend_tail;
	/* Asking the device whether events passed takes the driver's context
	 * lock, which every thread's launches need too: ask at most this often. */
	double next_collect_us, next_fence_us;
	int timed_owed;    /* ring completions waiting for their device time */
	double entry_us;   /* when the ring entry being run was taken (the latency's start) */
	int holding;       /* sessions its last pass held (share.h): their fences are polled */
	int backend_wakes; /* the backend wakes it when its work has run (thread_waker) */

	/* The loop thread only: sessions given to this thread and not reaped. */
	int n_sessions;

	owed_latency *lat_owed; /* ring_batch of them (none: counted when written) */
	int n_lat_owed, cap_lat_owed;

	uint64_t launches;   /* ops launched, for the stats' timing sample */
	int active;          /* its last pass had work (counted in be->active_threads) */
	int pacing;          /* this thread's pace slot says it has ring work */
	unsigned since_pace; /* ring entries run since the last look at the others */
} worker;

/*
 * What a thread publishes for the others' pacing (executor.c): its ring
 * launches so far and whether it has ring work now; written by its thread
 * only, read by the others. One cache line each.
 */
typedef struct pace_slot {
	_Alignas(64) uint64_t launched; /* atomic */
	int busy;                       /* atomic */
	uint64_t ring_ops;              /* ring entries run (atomic; for the stats) */
	uint64_t waits;                 /* times it waited for a thread behind (atomic) */
	uint64_t slow_ops;      /* ring entries that took SLOW_OP_US or more to run (atomic) */
	uint64_t slow_launches; /* launch calls timed (one in LAUNCH_SAMPLE) that took that long */
	uint64_t sleeps;        /* times it slept for want of work (atomic) */
	uint64_t reused;        /* ring ops launched as prepared before (opcache.h; atomic) */
	uint64_t holds;         /* times a session was held at session_queue_us (atomic) */
	uint64_t demotions;     /* sessions moved to low priority: held, or a long op (atomic) */
	double op_us;           /* time running ring entries, summed (written by its thread only) */
	double launch_us;       /* time in the launch calls timed (one in LAUNCH_SAMPLE), summed */
	uint64_t launches_timed; /* how many launch_us covers (atomic) */
	/* When its thread last made progress or had nothing owed (clock_now_us;
	 * atomic): executor_stalled_us reads it for the watchdog. */
	double alive_us;
} pace_slot;

/* A ring entry (or a launch) this long is counted as slow in the stats. */
#define SLOW_OP_US 1000.0

/* The worker running on this thread (NULL elsewhere). */
extern _Thread_local worker *exec_worker;

struct executor {
	executor_config cfg;
	backend *be;
	int n_workers;
	worker *workers;
	pace_slot *pace; /* one per worker */
	pthread_mutex_t start_mu;
	pthread_cond_t started_cv;

	/* Read by every worker during a pass; swapped under the write lock. */
	pthread_rwlock_t mf_lock;
	manifest *mf;
	uint64_t mf_gen; /* bumped with each swap (prepared ops name the one they used) */

	uint64_t next_handle; /* atomic */
	/* Sessions with rings, whose clients may spin while they wait (atomic),
	 * and the CPUs this process may run on: the clients are told not to
	 * spin while the two, with the executor and backend threads, exceed
	 * the CPUs (executor_spin_advice). */
	int ring_sessions;
	int host_cpus;
	int lost_reported; /* atomic: device_lost was called */

	/* The graph cache: tenants, their plans' graphs and the shared plans.
	 * Every plan.c entry point holds cache_mu; the loop reads the tenants
	 * for stats under it too. */
	pthread_mutex_t cache_mu;
	tenant *tenants;
	uint64_t lru_clock;
};

/* The spin_advice for every ring's header now (tileops_ring.h): 1 (sleep
 * at once) while more threads would spin than there are CPUs, else 0 (no
 * advice). Any worker. */
uint32_t executor_spin_advice(executor *ex);

/* A fresh handle for a tensor or a plan (any worker). */
uint64_t exec_next_handle(executor *ex);

/* Counters a worker keeps for the stats (executor.c). */
/* A launch call of this thread took `us` (launch.c times one in LAUNCH_SAMPLE). */
void executor_count_launch(worker *w, double us);
#define LAUNCH_SAMPLE 8
/* This thread launched a ring op as prepared before (opcache.h). */
void executor_count_reuse(worker *w);

#endif
