/*
 * plan.h - plans: op sequences checked once, captured once per shape bucket
 * into a graph kept in the session's tenant's cache, and replayed; and the
 * warm-up plans shared by a tenant's sessions. Executor threads share the
 * cache: every function here takes the executor's cache_mu (the loop's
 * stats take it too). A function given a job sets j->status and j->msg.
 */
#ifndef TILEOPSD_PLAN_H
#define TILEOPSD_PLAN_H

#include "request.h"
#include "warmup.h"
#include "worker.h"

/* Make a plan of s from *def, which it takes (*def is NULL after); j gets
 * the plan's handle. Every op is checked for every bucket now. */
void plan_create(executor *ex, session *s, job *j, plan_def **def);
/* Run a plan of s (or a shared plan of its tenant) with the run's bindings. */
tileops_status plan_run(executor *ex, session *s, const plan_run_desc *r, char *err, size_t errlen);
void plan_free(executor *ex, session *s, job *j, uint64_t handle);
/* A tensor of s is going away: drop the graphs that may use its memory. */
void plan_forget_tensor(executor *ex, session *s, uint64_t handle);
/* Free every plan of s and release its tenant (session close). */
void plan_close_session(executor *ex, session *s);
/* Find or make s's tenant at open; an error for a tenant it may not join. */
tileops_status plan_join_tenant(executor *ex, session *s, const char *name, char *err,
                                size_t errlen);
/* Drop every cached graph of every tenant. */
void plan_reset_caches(executor *ex);
/* Make one warm-up plan's tensors and plan in the internal session s and
 * capture every bucket; the plan is then shared with s's tenant. */
tileops_status plan_warmup(executor *ex, session *s, job *j, const warm_plan *wp);

/* What PlanOpen answers: a shared plan, its tensors by name, its buckets. */
typedef struct plan_open_tensor {
	char name[WARM_NAME_MAX];
	uint64_t handle;
	int dtype;
	int ndim;
	int64_t shape[TK_MAX_DIMS];
} plan_open_tensor;

typedef struct plan_open_result {
	uint64_t plan;
	int n_tensors;
	plan_open_tensor *tensors;
	int n_buckets;
	int64_t buckets[PLAN_MAX_BUCKETS];
} plan_open_result;

/* Answer a PlanOpen: j->open gets the shared plan of s's tenant named
 * `name`. */
void plan_open(executor *ex, session *s, job *j, const char *name);
/* NULL is a no-op. */
void plan_open_result_free(plan_open_result *r);

/* Append "tenants":{...} (the graph cache per tenant). */
void plan_write_tenants_json(executor *ex, strbuf *sb);

#endif
