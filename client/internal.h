/*
 * internal.h - what the files of libtileops share with each other.
 *
 * Nothing here is part of the public API. Internal functions carry the
 * prefix tci_ (TileOPs client internal) so that programs linking the
 * static archive never collide with them.
 *
 * Locks of a client, in the order they may be taken:
 *   arena_mu  one tensor transfer at a time (the arena has one owner)
 *   mu        everything else that changes after connect: seq, the dead
 *             flag, the list of requests in flight and their states, the
 *             context pool, the reference count. It is also the submission
 *             lock of the rings: taking a seq for an nng request and
 *             publishing a submission entry both happen under it, so the
 *             two planes see one program order. Never held while waiting
 *             on anything but its condition variables (slot_cv, and each
 *             request's done_cv). nng calls made under it only start or
 *             abort operations; their callbacks run later on nng's threads.
 *   ring.cq_mu  the completion side of the rings (ring.c): reaping, the
 *             slot table, finishing ring completions.
 * nng callbacks (aio completions, pipe events) take only mu, and cq_mu
 * after it when the pipe goes away. Fields marked
 * "fixed after connect" are written before the client is handed out and
 * read without a lock.
 * The only global state is the per-thread error buffer in errors.c.
 */
#ifndef TILEOPS_CLIENT_INTERNAL_H
#define TILEOPS_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>

#include <nng/nng.h>

#include "address.h"
#include "tileops.h"
#include "tileops.pb-c.h"
#include "tileops_ring.h"

/* Marks the functions of tileops.h as exported from libtileops.so. */
#define TILEOPS_API __attribute__((visibility("default")))

#define TCI_PROTOCOL_VERSION 1
#define TCI_DEFAULT_ARENA_BYTES ((size_t)64 << 20)
#define TCI_RECV_MAX_BYTES ((size_t)64 << 20)
#define TCI_MAX_OUTSTANDING 256
#define TCI_CTX_POOL_MAX 16
#define TCI_GOODBYE_TIMEOUT_MS 1000
#define TCI_MAX_INPUTS 8
#define TCI_MAX_OUTPUTS 4
#define TCI_MAX_PARAMS 16
#define TCI_RING_DEFAULT_ENTRIES 256
#define TCI_SPIN_DEFAULT_US 20

/* Where a request is in its life. */
enum tci_req_state {
	TCI_REQ_SENDING,   /* nng_ctx_send in progress */
	TCI_REQ_RECEIVING, /* sent; nng_ctx_recv in progress */
	TCI_REQ_DONE       /* status, message and reply are final */
};

/*
 * One request and its reply. tileops_completion is this struct; the
 * blocking calls use it too (submit, wait, free). Created by tci_request_send
 * (nng) or tci_ring_submit (the rings), finished by the aio callback or by
 * the ring reaper, freed by tci_request_free once done.
 */
struct tileops_completion {
	struct tileops_client *client;
	int on_ring;   /* went through the submission ring: the fields below apply */
	int ring_done; /* atomic: 1 once status and message are final */
	int timed;     /* TILEOPS_SQE_F_TIMING was asked for */
	int has_gpu_us;
	double gpu_us;
	int traced;          /* TILEOPS_SQE_F_TRACE was asked for (tileops_trace_start) */
	int trace_kind;      /* a tileops_trace_kind */
	int64_t submit_ns;   /* when its entry was published */
	uint64_t tag;        /* echoed by the completion entry */
	int64_t deadline_ns; /* CLOCK_MONOTONIC; 0 without a timeout */
	nng_ctx ctx;
	nng_aio *aio;
	uint64_t seq;
	enum tci_req_state state;               /* under client->mu */
	tileops_status status;                  /* valid when DONE */
	char *message;                          /* malloc'd; NULL when none */
	Tileops__Reply *reply;                  /* decoded reply on success; NULL otherwise */
	pthread_cond_t done_cv;                 /* signalled (under mu) when state becomes DONE */
	struct tileops_completion *prev, *next; /* in client->inflight, under mu */
};

struct tileops_client {
	/* Fixed after connect. */
	nng_socket sock;
	int timeout_ms;
	char *address;
	void *arena;
	size_t arena_bytes;
	char *daemon_version;
	char *backend;
	char *device;
	tileops_server_info info;
	tileops_device_info *devices; /* n_devices (>= 1) entries, names malloc'd */
	int n_devices;

	pthread_mutex_t arena_mu;

	pthread_mutex_t mu;
	pthread_cond_t slot_cv; /* signalled when a request leaves the in-flight list */
	uint64_t next_seq;
	int dead;         /* the pipe went away or the client closed: send nothing */
	int had_pipe;     /* a pipe was added once; later ones are refused */
	uint32_t pipe_id; /* the one pipe this session lives on */
	int closed;       /* tileops_close was called */
	int refs;         /* 1 for the caller's handle + 1 per live request and plan */
	size_t n_inflight;
	struct tileops_completion *inflight; /* not-yet-done requests */
	nng_ctx ctx_pool[TCI_CTX_POOL_MAX];
	size_t n_ctx_pool;

	/* The data area of the arena: tensor bytes move through
	 * [data_offset, data_offset + data_bytes). Fixed after connect. */
	size_t data_offset;
	size_t data_bytes;
	struct tci_ring *ring; /* NULL when the session has no rings; fixed after connect */
};

/* errors.c: the calling thread's last error. */
tileops_status tci_error(tileops_status st, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
tileops_status tci_error_nng(tileops_status st, int nng_err, const char *what);
void tci_error_set_text(const char *msg);
tileops_status tci_status_from_nng(int nng_err);
int tci_status_valid(int status);

/* request.c: sending requests and finishing them. */

/* Flags of tci_request_send. */
#define TCI_SEND_CLOSING 1 /* the Goodbye: ignores the in-flight cap, short timeout */

tileops_status tci_request_send(struct tileops_client *c, Tileops__Request *req, int flags,
                                struct tileops_completion **out);
tileops_status tci_request_wait(struct tileops_completion *r, int timeout_ms);
void tci_request_free(struct tileops_completion *r);
tileops_status tci_request_call(struct tileops_client *c, Tileops__Request *req, int flags,
                                Tileops__Reply **reply_out);
void tci_request_abort_all(struct tileops_client *c);

/* op.c: ops, shared with plan.c so that a plan's ops read as single ops. */

/* An OpRun request built on the caller's stack; it points into the op. */
struct tci_op_msg {
	Tileops__Request req;
	Tileops__OpRun body;
	Tileops__Param params[TCI_MAX_PARAMS];
	Tileops__Param *param_ptrs[TCI_MAX_PARAMS];
};

/* Everything the library can check about an op without the daemon; `call`
 * names the API call in the message. */
tileops_status tci_op_check(const char *call, tileops_client *c, const tileops_op *op);
/* Fill m with an OpRun request for an op that passed tci_op_check. */
void tci_op_msg_build(struct tci_op_msg *m, const tileops_op *op);
/*
 * Send a request through the ring when the session has one and the request
 * fits an entry, else over nng. Either way *out is a completion.
 */
tileops_status tci_op_send(tileops_client *c, Tileops__Request *req, int timed,
                           tileops_completion **out);
/* Send and wait; the completion's message becomes the thread's error. */
tileops_status tci_op_call(tileops_client *c, Tileops__Request *req);

/* client.c */
void tci_client_retain(struct tileops_client *c);
void tci_client_release(struct tileops_client *c);

/* device.c: the devices the daemon serves. */

/* Keep HelloReply.devices in c (one device, index 0, named as c->device,
 * when the daemon sends none); called once c->device is set. */
tileops_status tci_devices_store(struct tileops_client *c, const Tileops__HelloReply *h);
/* Free the list; safe on a client that never stored one. */
void tci_devices_free(struct tileops_client *c);
/* INVALID_ARGUMENT naming `call` and the count unless 0 <= device < count. */
tileops_status tci_device_check(const char *call, const struct tileops_client *c, int device);

/* ring.c: the shared-memory rings (the data plane). */

/* Bytes the ring region takes for `entries` entries (header, SQ, CQ), page-aligned. */
size_t tci_ring_region_bytes(uint32_t entries);
/* Entries from $TILEOPS_RING_ENTRIES (default 256); 0 when $TILEOPS_RINGS=0. */
tileops_status tci_ring_config(uint32_t *entries);
/* The arena's name in the Hello, and its file's path when it lives in a
 * folder (empty for a POSIX shm object). */
struct tci_arena_name {
	char name[64];
	char path[448];
};

/* Fill the layout fields of the header at the start of `arena` (zeroed memory). */
void tci_ring_layout(void *arena, uint32_t entries);
/* Start using the rings the daemon agreed to serve. */
tileops_status tci_ring_attach(struct tileops_client *c, uint32_t entries);
/* Free the ring state once the client is unreferenced. */
void tci_ring_destroy(struct tileops_client *c);
/*
 * Submit a request through the ring: an op or plan run as a binary
 * descriptor (TILEOPS_SQE_OP, TILEOPS_SQE_PLAN_RUN), anything else, or a
 * run too large for a descriptor, as a packed tileops.Request. TILEOPS_OK
 * with *out NULL when it must go over nng instead (no ring, the ring is
 * stopped, or it fits no entry): the caller then sends it there.
 */
tileops_status tci_ring_submit(struct tileops_client *c, const Tileops__Request *req, int timed,
                               struct tileops_completion **out);
tileops_status tci_ring_wait(struct tileops_completion *r, int timeout_ms);
void tci_ring_free(struct tileops_completion *r);
/* Finish every pending ring completion with `st` (the session is gone). */
void tci_ring_fail_all(struct tileops_client *c, tileops_status st, const char *why);
/* The submission count an nng request comes after. Called with c->mu held. */
uint64_t tci_ring_mark(const struct tileops_client *c);
/*
 * The two halves of a waiter's sleep (ring.c's ring_sleep, and the test of
 * the handshake, tests/unit/test_ring_fence.c): begin reads cq_bell into
 * *seen, adds the caller to client_waiting and reaps once more, returning
 * what the reap took (> 0: completions came, no need to sleep; -1: the
 * rings are stopped); the caller may then sleep on cq_bell while it still
 * holds *seen, and calls end, which takes it off client_waiting, in every
 * case.
 */
int tci_ring_sleep_begin(struct tci_ring *ring, uint32_t *seen);
void tci_ring_sleep_end(struct tci_ring *ring);

/* An EventRecordReply's handle into out (PROTOCOL when er is NULL or the
 * wrong size), the reply freed: event_record and event_export. */
tileops_status tci_event_reply(const char *what, Tileops__Reply *reply,
                               const Tileops__EventRecordReply *er, tileops_ipc_event *out);

#endif /* TILEOPS_CLIENT_INTERNAL_H */
