/*
 * session.h - a client's session: its connection, arena, stream, tensors and
 * the order of its requests.
 *
 * Threading: each field group below says which thread owns it. The loop
 * owns request order and the session table; the executor owns the device
 * side (stream, tensors, rings). References are atomic, so a struct lives
 * until the last job or pending completion that names it is finished.
 */
#ifndef TILEOPSD_SESSION_H
#define TILEOPSD_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "backend.h"
#include "ring.h"
#include "share.h"
#include "stats.h"
#include "tileops_kernels.h"

struct held_request; /* front/order.h */

/*
 * The memory tensors name: one allocation (or one imported mapping) and the
 * tensors over it, the one made with it and every view of it. It goes when
 * the last of them is freed; the session's bytes count it once, from when it
 * is made until then.
 */
typedef struct tensor_mem {
	void *ptr;     /* what the backend allocated, or the imported mapping's base */
	int device;    /* the index of the device it is on */
	size_t nbytes; /* counted in the session's bytes */
	int imported;
	int refs; /* the tensors that name it */
} tensor_mem;

typedef struct tensor {
	uint64_t handle;
	tk_tensor view; /* data (mem->ptr + offset), dtype, shape, strides */
	size_t nbytes;  /* from its first element to one past its last */
	size_t offset;  /* of its first element in mem */
	tensor_mem *mem;
	int is_view;         /* made by tensor_view */
	struct tensor *next; /* hash chain */
} tensor;

#define SESSION_MAX_GROUPS 64

typedef struct session {
	/* Fixed once the Hello has been checked. */
	uint64_t id;
	uint32_t pipe;
	int64_t pid;
	int64_t uid;
	int64_t gid;
	int n_groups; /* its supplementary groups (admission.h) */
	int64_t groups[SESSION_MAX_GROUPS];
	char name[64];

	/* Loop thread: request order. Requests run in seq order; later ones
	 * wait in `held`. */
	uint64_t next_seq;
	struct held_request *held; /* sorted by seq */
	int n_held;
	int n_running;    /* requests sent to the executor, not answered yet */
	double gap_since; /* when the head of `held` started waiting, seconds */
	int opened;       /* its open job succeeded: requests wait until then */
	int closing;
	struct session *next;

	/* Either thread, atomically: the loop's table reference, one per job,
	 * and the executor's for each completion it still owes. */
	int refs;

	/* Its executor thread, from the open job to the close job. The loop
	 * maps the arena before the first and unmaps it after the last. */
	arena arena;
	ring ring;
	void *stream; /* on device 0, from the open job to the close job */
	/* On the other devices, made when it first puts work there, and the
	 * stream its fences go on once it has more than one (devices.h). */
	void *dev_streams[BACKEND_MAX_DEVICES];
	void *join;
	tensor **buckets;
	size_t n_buckets;
	int ex_closed;         /* the close job ran: no more work */
	int internal;          /* the daemon's own (warm-up plans): no client */
	int worker;            /* the executor thread that runs its work; fixed at open */
	struct tenant *tenant; /* whose graph cache its plans use */
	struct plan *plans;
	struct session *ring_next;    /* its executor thread's list of ring sessions */
	struct opcache *ops;          /* recently prepared ring ops (opcache.h) */
	share share;                  /* the device time it has queued (share.h) */
	struct session_event *events; /* its registered events (events.h) */
	int n_events;
	uint64_t next_event; /* the last registered event's id */

	/* Written by the executor, read by the loop for stats (atomic). */
	size_t n_tensors;
	size_t bytes;
	size_t device_bytes[BACKEND_MAX_DEVICES]; /* of `bytes`, on each device */
	/* Its op requests' answers and latency: ring ops counted by its
	 * executor thread, control ones by the loop (atomic, stats.h). */
	stats_session op_stats;
} session;

/* A new session with one reference (the table's). NULL if out of memory. */
session *session_new(uint64_t id, uint32_t pipe);
void session_ref(session *s);
/* Drop a reference; the last one frees the struct and its tensor records. */
void session_unref(session *s);

/* 1 when the session's process is in group gid (primary or supplementary). */
int session_in_group(const session *s, int64_t gid);

/* Executor thread: the tensor table. Counts are kept for the loop's stats. */
tensor *session_tensor_find(const session *s, uint64_t handle);
/* Insert; returns 0 or -1 when out of memory. */
int session_tensor_insert(session *s, tensor *t);
/* Count bytes of memory the session holds (negative: released). */
void session_count_bytes(session *s, long long delta);
/* Remove and return the tensor, or NULL. */
tensor *session_tensor_remove(session *s, uint64_t handle);

#endif
