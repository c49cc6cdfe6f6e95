/*
 * transport.h - an nng REP0 socket served by a pool of contexts.
 *
 * Each worker owns one nng context and one aio and cycles receive -> hand
 * the message to the owner -> send the reply -> receive. Messages are handed
 * over on nng's threads through on_request; the owner must answer every one
 * exactly once with transport_reply (from any thread), which frees the
 * worker for the next message. A request keeps its worker until it is
 * answered, so the pool grows (in steps, up to max_workers) when few are
 * left waiting: requests that wait long (behind a missing seq, behind long
 * device work) never leave other clients without one.
 *
 * Connections are counted. One beyond max_pipes is kept without a place
 * (up to a few, the oldest closed for a new one) so that the owner can
 * answer its requests with the reason: transport_admit says whether a
 * connection holds a place, and gives it one when a place has come free.
 */
#ifndef TILEOPSD_TRANSPORT_H
#define TILEOPSD_TRANSPORT_H

#include <nng/nng.h>
#include <stddef.h>
#include <stdint.h>

typedef struct transport transport;
typedef struct tp_worker tp_worker;

typedef struct transport_callbacks {
	/* A message arrived (nng thread). Ownership of msg passes to the callee. */
	void (*on_request)(void *ctx, tp_worker *w, nng_msg *msg);
	/* A connection closed (nng thread); may be NULL. */
	void (*on_pipe_removed)(void *ctx, uint32_t pipe_id);
	/* May this peer connect? (nng thread) NULL: everyone the socket's file
	 * mode lets in. Returning 0 closes the connection at once. */
	int (*allow_peer)(void *ctx, uint32_t pipe_id, uint64_t uid, uint64_t gid, uint64_t pid);
	void *ctx;
} transport_callbacks;

typedef struct transport_options {
	const char *address;
	int workers;     /* contexts at start */
	int max_workers; /* contexts at most (below workers: workers) */
	int max_pipes;   /* connections at most (0: no limit) */
	size_t max_message_bytes;
	unsigned socket_mode; /* ipc:// only */
} transport_options;

/* Listen and start receiving. Returns NULL with a message on failure. */
transport *transport_open(const transport_options *opt, const transport_callbacks *cb, char *err,
                          size_t errlen);

/* Send the answer to the message handed over with w; takes ownership. */
void transport_reply(tp_worker *w, nng_msg *msg);

/* Close the listener: connected peers stay, new ones are refused. */
void transport_stop_listening(transport *tp);

/* Number of workers holding a message that has not been answered yet. */
int transport_busy(transport *tp);

/* 1 when the connection holds a place within max_pipes (taking one that
 * has come free), 0 when it is beyond the cap. An unknown id (gone
 * already) counts as admitted: nothing will read the answer. */
int transport_admit(transport *tp, uint32_t pipe_id);

/* The cap on connections (0: none). */
int transport_max_connections(const transport *tp);

/* Connections holding a place now, and contexts in the pool. */
int transport_connections(transport *tp);
int transport_workers(transport *tp);

/*
 * Close every connection, then the socket, and free everything. It returns
 * within a few seconds even where nng_close does not (the socket is then
 * left to the process's exit). NULL is a no-op.
 */
void transport_close(transport *tp);

/* 1 once a transport_close gave up on nng_close: a thread is stuck inside
 * nng with memory it holds, so the process should leave with _exit (no
 * atexit handlers, which could block on that state or report its memory as
 * leaked) as soon as its own work is done. */
int transport_nng_wedged(void);

/* The pipe's peer credentials (ipc:// only); -1 where unknown. */
void transport_peer(nng_msg *msg, uint32_t *pipe_id, int64_t *uid, int64_t *gid, int64_t *pid);

#endif
