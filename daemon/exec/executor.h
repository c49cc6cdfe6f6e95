/*
 * executor.h - the thread that owns the device.
 *
 * Every backend call (allocation, copies, launches, fences) runs here, so
 * one thread owns the CUDA context and the per-session streams, and every
 * request that touches tensors runs here too, in each session's order: jobs
 * from the loop (the nng control plane) in submission order, and the
 * entries of each session's submission ring (the data plane), which the
 * executor polls itself. A job that names a ring_mark runs after the
 * session's ring entries up to that mark.
 *
 * When a job is done the executor hands it back through the done callback
 * (on the executor thread); the loop answers the request. Ring entries are
 * answered here, in the session's completion ring.
 */
#ifndef TILEOPSD_EXECUTOR_H
#define TILEOPSD_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "tenant.h"
#include "stats.h"

struct session;
struct tp_worker;
struct tuning;
struct request;
struct plan_open_result;
typedef struct manifest manifest;

typedef enum job_kind {
	JOB_OPEN,    /* make the session's stream, pin its arena, set up its rings */
	JOB_CLOSE,   /* free everything the session holds on the device */
	JOB_REQUEST, /* one control-plane request of the session */
	JOB_RESET,   /* drop every tenant's cached graphs */
	JOB_WARMUP   /* make and capture one warm-up plan in an internal session */
} job_kind;

typedef struct job {
	job_kind kind;
	struct job *next;
	struct session *s;   /* holds a reference until the job is handed back */
	struct tp_worker *w; /* where the answer goes; NULL for none */
	uint64_t seq;
	double received_us;           /* REQUEST: when the daemon received it (clock.h) */
	struct request *req;          /* REQUEST: what to run (the loop frees it) */
	int want_rings;               /* OPEN: the Hello asked for rings */
	char tenant[64];              /* OPEN: the tenant the Hello named */
	const struct warm_plan *warm; /* WARMUP: the plan to make */
	/* Results. */
	tileops_status status;
	char msg[512];
	uint64_t handle; /* tensor create/import */
	uint64_t nbytes;
	unsigned char ipc[64]; /* tensor export; event record */
	uint64_t ipc_offset;   /* tensor export: the tensor's place in the allocation */
	uint64_t ipc_bytes;
	struct plan_open_result *open; /* plan open; free with executor_free_reply */
	int rings;                     /* OPEN: rings are served */
	int op_slot;                   /* REQUEST of an op: its stats slot (-1: none) */
} job;

typedef struct executor executor;
typedef void (*executor_done_fn)(void *ctx, job *j);

typedef struct executor_config {
	backend *be;
	stats *st;
	manifest *mf;               /* the executor owns it from here on */
	const size_t *memory_limit; /* session_memory_limit, read atomically */
	int spin_us;                /* spin this long after the last work, then sleep */
	int ring_batch;             /* ring entries per session per pass */
	int stats_sample;           /* time one op in this many on the GPU (0: none) */
	int pace;                   /* launches a busy thread may lead another by (0: off) */
	int queue_us; /* device time a session may have queued before it is held (share.h; 0: off) */
	int threads;  /* executor threads; sessions are shared out among them */
	const int *cpus; /* thread i runs on cpus[i % n_cpus]; n_cpus 0: anywhere */
	int n_cpus;
	tenant_quota default_quota;   /* a session's own tenant */
	const tenant_config *tenants; /* named tenants */
	int n_tenants;
	struct tuning *tuning; /* the tunable kernels' choices (daemon/policy); NULL: built-in */
	executor_done_fn done;
	/* Called once, from an executor thread, when the backend marks the
	 * device lost (backend_lost); may be NULL. */
	void (*device_lost)(void *ctx);
	void *ctx;
} executor_config;

/*
 * Start the threads. Each calls be->ops->thread_init first; a failure there
 * is returned here, with a message.
 */
executor *executor_start(const executor_config *cfg, char *err, size_t errlen);

/*
 * The thread a new session goes to (its jobs and rings run there): the one
 * with the fewest sessions, ties going to the first at or after
 * session_id modulo the thread count, so sessions spread evenly however
 * others have come and gone. executor_release_worker gives the place back
 * when the session is reaped. Both are called from the daemon's loop
 * thread only.
 */
int executor_pick_worker(executor *ex, uint64_t session_id);
void executor_release_worker(executor *ex, int index);

/*
 * Queue a job (any thread) on the thread of its session (jobs without a
 * session go to the first). The done callback always runs for it.
 */
void executor_submit(executor *ex, job *j);

/* Swap in a reloaded manifest between the threads' passes; returns the old
 * one, which no thread uses any more (the caller frees it). Loop thread. */
manifest *executor_swap_manifest(executor *ex, manifest *m);

/* Finish every queued job and pending completion, then join the thread and
 * free the manifest it owns. NULL is a no-op. */
void executor_stop(executor *ex);

/* Free what a job's answer carried (a plan open's reply). Any thread. */
void executor_free_reply(job *j);

/*
 * How long (microseconds) the least recently alive executor thread has gone
 * without getting anything done while it owed something: running one
 * request, or waiting for completions the device does not deliver. An idle
 * thread counts as alive (it looks at its queue at least every 100 ms), and
 * so does one that keeps finishing work however much it has, so this grows
 * only while one request runs or the device finishes nothing. *thread (when
 * not NULL) gets that thread's index. Any thread.
 */
double executor_stalled_us(executor *ex, int *thread);

/* Append "tenants":{...} (the graph cache per tenant). Any thread. */
void executor_write_tenants_json(executor *ex, strbuf *sb);
/*
 * "executor":{"0":{"sessions":N,"ring_ops":N,"pace_waits":N},...}: per
 * executor thread, its sessions, the ring entries it ran and how often it
 * waited for a thread behind it (executor_pace). The loop thread only.
 */
void executor_write_threads_json(executor *ex, strbuf *sb);

#endif
