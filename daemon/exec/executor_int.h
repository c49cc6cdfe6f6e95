/*
 * executor_int.h - what executor.c (the thread and its polling) and exec.c
 * (running requests) share. Executor thread only, except where noted.
 */
#ifndef TILEOPSD_EXECUTOR_INT_H
#define TILEOPSD_EXECUTOR_INT_H

#include <pthread.h>

#include "executor.h"
#include "oplayer.h"
#include "session.h"
#include "tileops.pb-c.h"

typedef struct plan_view plan_view; /* plan.c: how a plan's ops see tensors */

/* An op checked and ready to launch. */
typedef struct prepared_op {
	tk_call call;
	const tk_kernel_entry *kernel;
	op_cost cost;
	int slot; /* stats slot, -1 for none */
} prepared_op;

/* A completion owed once a fence passes: a job's answer or a ring CQE. */
typedef struct pending {
	struct pending *next;
	void *fence;
	job *job;   /* answer this job, or ... */
	session *s; /* ... post a CQE with this tag (holds a reference) */
	uint64_t tag;
} pending;

/* A ring op whose completion waits for its device time. */
typedef struct timed_cqe {
	session *s; /* holds a reference */
	uint64_t tag;
} timed_cqe;

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
	int timed_owed; /* ring completions waiting for their device time */

	/* The loop thread only: sessions given to this thread and not reaped. */
	int n_sessions;

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
	double op_us;           /* time running ring entries, summed (written by its thread only) */
	double launch_us;       /* time in the launch calls timed (one in LAUNCH_SAMPLE), summed */
	uint64_t launches_timed; /* how many launch_us covers (atomic) */
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

	/* The graph cache: tenants, their plans' graphs and the shared plans.
	 * Every plan.c entry point holds cache_mu; the loop reads the tenants
	 * for stats under it too. */
	pthread_mutex_t cache_mu;
	tenant *tenants;
	uint64_t lru_clock;
};

/* plan.c */
tileops_status plan_view_of(const plan_view *pv, uint64_t handle, tk_tensor *v);
/* Run a plan request (create, run, free) of s; fills j's status and results. */
void plan_create(executor *ex, session *s, job *j, const Tileops__PlanCreate *m);
tileops_status plan_run(executor *ex, session *s, const Tileops__PlanRun *m, char *err,
                        size_t errlen);
void plan_free(executor *ex, session *s, job *j, uint64_t handle);
/* Free every plan of s and release its tenant (session close). */
void plan_close_session(executor *ex, session *s);
/* Find or make s's tenant at open; an error for a tenant it may not join. */
tileops_status plan_join_tenant(executor *ex, session *s, const char *name, char *err,
                                size_t errlen);
/* Drop every cached graph of every tenant. */
void plan_reset_caches(executor *ex);
struct warm_plan;
struct warm_tensor;
/* Make one warm-up plan's tensors and plan in the internal session s and
 * capture every bucket; the plan is then shared with s's tenant. */
tileops_status plan_warmup(executor *ex, session *s, job *j, const struct warm_plan *wp);
/* Answer a PlanOpen: the shared plan of s's tenant named `name`. */
void plan_open(executor *ex, session *s, job *j, const char *name);
void plan_open_reply_free(Tileops__PlanOpenReply *r);
/* exec.c: make a tensor for a warm-up plan (j gets status, handle). */
void exec_make_tensor(executor *ex, session *s, job *j, const struct warm_tensor *t);
/* A tensor of s is going away: drop the graphs that may use its memory. */
void plan_forget_tensor(executor *ex, session *s, uint64_t handle);
void plan_write_tenants_json(executor *ex, strbuf *sb);

/* exec.c */
void exec_job(worker *w, job *j);
/* Resolve, check against the manifest and build the call of one op. With a
 * plan view, handles resolve through the plan's bindings and bucket. */
tileops_status exec_prepare_op(executor *ex, session *s, const plan_view *pv,
                               const Tileops__OpRun *m, prepared_op *out, char *err, size_t errlen);
/* Run one submission-ring entry of s; posts (or owes) its completion. */
void exec_sqe(worker *w, session *s, const tileops_sqe *e);
/* Consume s's ring entries up to `mark`. Returns TILEOPS_OK or an error. */
tileops_status exec_ring_until(worker *w, session *s, uint64_t mark, char *err, size_t errlen);
/* Owe a completion until the work queued on s's stream so far is done. */
void exec_defer(worker *w, session *s, job *j, uint64_t tag);
/* A fresh handle for a tensor or a plan (any worker). */
uint64_t exec_next_handle(executor *ex);
/* Post a completion on s's ring and count it. gpu_us < 0: none. */
void exec_post(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
               const char *msg);
/* The backend's timing callback. */
void exec_timed(void *ctx, int slot, void *arg, double us);

/* executor.c */
void executor_hand_back(executor *ex, job *j);
/* CLOCK_MONOTONIC in microseconds. */
double exec_now_us(void);
/* A launch call of this thread took `us` (exec.c times one in LAUNCH_SAMPLE). */
void executor_count_launch(worker *w, double us);
#define LAUNCH_SAMPLE 8
/* This thread launched a ring op as prepared before (exec.c). */
void executor_count_reuse(worker *w);
/* Answer every owed completion of w whose fence has passed; 1 if any was. */
int executor_poll_pending(worker *w);

#endif
