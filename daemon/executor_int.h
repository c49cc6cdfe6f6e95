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

typedef struct plan_view plan_view;   /* plan.c: how a plan's ops see tensors */

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
	job *job;        /* answer this job, or ... */
	session *s;      /* ... post a CQE with this tag (holds a reference) */
	uint64_t tag;
} pending;

/* A ring op whose completion waits for its device time. */
typedef struct timed_cqe {
	session *s; /* holds a reference */
	uint64_t tag;
} timed_cqe;

struct executor {
	executor_config cfg;
	backend *be;
	manifest *mf;
	pthread_t thread;

	/* Shared with submitters (under mu). */
	pthread_mutex_t mu;
	job *head, *tail;
	int stopping;
	uint32_t bell;     /* futex word; bumped by submitters when sleeping */
	int sleeping;      /* atomic */

	/* Start-up handshake (under mu). */
	pthread_cond_t started_cv;
	int started;
	tileops_status init_status;
	char init_msg[256];

	/* Executor thread only. */
	session *rings;    /* sessions whose rings are polled */
	session *rr_next;  /* where the next polling pass starts */
	pending *pend, *pend_tail;
	uint64_t next_handle;
	uint64_t launches;
	uint64_t lru_clock;

	/* Graph cache tenants; the list is read by the loop for stats. */
	pthread_mutex_t tenants_mu;
	tenant *tenants;
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
void exec_job(executor *ex, job *j);
/* Resolve, check against the manifest and build the call of one op. With a
 * plan view, handles resolve through the plan's bindings and bucket. */
tileops_status exec_prepare_op(executor *ex, session *s, const plan_view *pv,
                               const Tileops__OpRun *m, prepared_op *out, char *err,
                               size_t errlen);
/* Run one submission-ring entry of s; posts (or owes) its completion. */
void exec_sqe(executor *ex, session *s, const tileops_sqe *e);
/* Consume s's ring entries up to `mark`. Returns TILEOPS_OK or an error. */
tileops_status exec_ring_until(executor *ex, session *s, uint64_t mark, char *err,
                               size_t errlen);
/* Owe a completion until the work queued on s's stream so far is done. */
void exec_defer(executor *ex, session *s, job *j, uint64_t tag);
/* Post a completion on s's ring and count it. gpu_us < 0: none. */
void exec_post(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
               const char *msg);
/* The backend's timing callback. */
void exec_timed(void *ctx, int slot, void *arg, double us);

/* executor.c */
void executor_hand_back(executor *ex, job *j);
/* Answer every owed completion whose fence has passed; 1 if any was. */
int executor_poll_pending(executor *ex);

#endif
