/*
 * session.h - a client's session: its connection, arena, stream, tensors and
 * the order of its requests.
 *
 * Threading: sessions belong to the loop thread. The executor reads only a
 * session's stream and arena, which are fixed while jobs of it are queued,
 * and holds a reference (refs) for every job so the struct outlives them.
 */
#ifndef TILEOPSD_SESSION_H
#define TILEOPSD_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arena.h"
#include "tileops_kernels.h"

struct tp_worker;
struct Tileops__Request;

typedef struct tensor {
	uint64_t handle;
	tk_tensor view; /* data, dtype, shape, packed strides */
	size_t nbytes;
	int imported;
	struct tensor *next; /* hash chain */
} tensor;

/* A request waiting for its turn (its seq is not the next one yet). */
typedef struct held_request {
	uint64_t seq;
	struct tp_worker *w;
	struct Tileops__Request *req;
	struct held_request *next;
} held_request;

typedef struct session {
	uint64_t id;
	uint32_t pipe;
	int64_t pid;
	int64_t uid;
	char name[64];
	arena arena;
	void *stream;
	/* Tensors by handle. */
	tensor **buckets;
	size_t n_buckets;
	size_t n_tensors;
	size_t bytes;
	/* Request order: requests run in seq order; later ones wait in `held`. */
	uint64_t next_seq;
	held_request *held; /* sorted by seq */
	int n_held;
	double gap_since; /* when the head of `held` started waiting, seconds */
	int barrier;      /* a job whose result later requests need is running */
	int refs;         /* the session table's, plus one per job */
	int closing;
	struct session *next;
} session;

/* A new session with one reference (the table's). NULL if out of memory. */
session *session_new(uint64_t id, uint32_t pipe);
/* Drop a reference; the last one frees the struct and its tensor records. */
void session_unref(session *s);

tensor *session_tensor_find(const session *s, uint64_t handle);
/* Insert; returns 0 or -1 when out of memory. */
int session_tensor_insert(session *s, tensor *t);
/* Remove and return the tensor, or NULL. */
tensor *session_tensor_remove(session *s, uint64_t handle);

/* Insert a request into the held list in seq order; -1 if seq is already held. */
int session_hold(session *s, held_request *h);
/* The head of the held list if it is the next to run, removed; else NULL. */
held_request *session_next_ready(session *s);

#endif
