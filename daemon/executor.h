/*
 * executor.h - the thread that owns the device.
 *
 * Every backend call (allocation, copies, launches, syncs) runs here, in
 * submission order, so one thread owns the CUDA context and the per-session
 * streams. The loop thread submits jobs; when a job is done the executor
 * hands it back through the done callback (on the executor thread), and the
 * loop answers the request.
 */
#ifndef TILEOPSD_EXECUTOR_H
#define TILEOPSD_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct session;
struct tp_worker;

typedef enum job_kind {
	JOB_OPEN,   /* make the session's stream, pin its arena */
	JOB_CLOSE,  /* free the session's tensors, stream and arena pinning */
	JOB_ALLOC,
	JOB_FREE,
	JOB_WRITE,
	JOB_READ,
	JOB_OP,
	JOB_SYNC,
	JOB_EXPORT,
	JOB_IMPORT
} job_kind;

typedef struct job_buffer {
	void *ptr;
	int imported;
} job_buffer;

typedef struct job {
	job_kind kind;
	struct job *next;
	struct session *s;      /* holds a reference until the job is finished */
	struct tp_worker *w;    /* where the answer goes; NULL for none */
	uint64_t seq;
	/* Arguments. */
	void *ptr;              /* FREE, WRITE, READ, EXPORT: the tensor's memory */
	int imported;           /* FREE: close an IPC mapping instead of freeing */
	size_t bytes;           /* ALLOC: size; WRITE/READ: length */
	size_t toff, aoff;      /* WRITE/READ: tensor and arena offsets */
	unsigned char ipc[64];  /* EXPORT result, IMPORT argument */
	const tk_kernel_entry *kernel;
	int op_slot;            /* stats slot of the op */
	tk_call call;
	job_buffer *buffers;    /* CLOSE: everything the session still holds */
	size_t n_buffers;
	struct tensor *tensor;  /* ALLOC/IMPORT: the tensor being made */
	/* Results. */
	tileops_status status;
	char msg[512];
} job;

typedef struct executor executor;
typedef void (*executor_done_fn)(void *ctx, job *j);

/*
 * Start the thread. It calls be->ops->thread_init first; a failure there is
 * returned here. done(ctx, job) is called on the executor thread.
 */
executor *executor_start(backend *be, executor_done_fn done, void *ctx, char *err,
                         size_t errlen);

/* Queue a job (any thread). The done callback always runs for it. */
void executor_submit(executor *ex, job *j);

/* Jobs queued or running. */
size_t executor_pending(executor *ex);

/* Finish every queued job, then join the thread. NULL is a no-op. */
void executor_stop(executor *ex);

#endif
