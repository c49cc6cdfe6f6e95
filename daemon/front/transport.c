/* transport.c - nng REP0 with a growing pool of contexts (see transport.h). */
#include "transport.h"

#include <errno.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

enum worker_state { W_RECV, W_WAIT, W_SEND, W_DONE };

struct tp_worker {
	transport *tp;
	nng_ctx ctx;
	nng_aio *aio;
	enum worker_state state;
};

/* Workers come in chunks that never move, so a worker's address stays
 * valid while more are added. */
#define CHUNK_WORKERS 16
typedef struct tp_chunk {
	tp_worker w[CHUNK_WORKERS];
	int n;
	struct tp_chunk *next;
} tp_chunk;

/* An accepted connection; `over` when it came beyond max_pipes and holds
 * no place yet (its requests are refused until one is free). */
typedef struct tp_pipe {
	nng_pipe p;
	int over;
	double since; /* clock_now_s() when it came */
	struct tp_pipe *next;
} tp_pipe;

/* Connections beyond max_pipes kept open to be told why: at most this many.
 * One more closes the oldest of them if that one has had OVER_GRACE_S to
 * send its request (a client sends its Hello at once), else it is closed
 * itself. */
#define MAX_OVER_PIPES 16
#define OVER_GRACE_S 1.0

struct transport {
	nng_socket sock;
	nng_listener listener;
	transport_callbacks cb;
	transport_options opt;
	pthread_mutex_t mu; /* chunks, pipes */
	tp_chunk *chunks;
	int n_workers;   /* under mu */
	atomic_int idle; /* workers waiting for a message */
	atomic_int busy; /* workers holding a message not answered yet */
	atomic_int closing;
	tp_pipe *pipes; /* under mu, newest first */
	int n_pipes;    /* under mu: those holding a place */
	int n_over;     /* under mu: those beyond max_pipes */
	char path[512]; /* ipc socket file, removed at close */
};

/* When fewer workers than this wait for messages, more are started. */
#define IDLE_LOW_WATER 8

static void worker_cb(void *arg);

static void worker_recv(tp_worker *w)
{
	w->state = W_RECV;
	atomic_fetch_add(&w->tp->idle, 1);
	nng_ctx_recv(w->ctx, w->aio);
}

/* Start up to n more workers (under tp->mu). Returns how many started. */
static int grow_locked(transport *tp, int n)
{
	int started = 0;
	while (started < n && tp->n_workers < tp->opt.max_workers) {
		tp_chunk *c = tp->chunks;
		if (!c || c->n == CHUNK_WORKERS) {
			c = calloc(1, sizeof(*c));
			if (!c)
				break;
			c->next = tp->chunks;
			tp->chunks = c;
		}
		tp_worker *w = &c->w[c->n];
		w->tp = tp;
		if (nng_aio_alloc(&w->aio, worker_cb, w) != 0)
			break;
		if (nng_ctx_open(&w->ctx, tp->sock) != 0) {
			nng_aio_free(w->aio);
			w->aio = NULL;
			break;
		}
		c->n++;
		tp->n_workers++;
		started++;
		worker_recv(w);
	}
	return started;
}

/*
 * Requests that wait (for one before them, or for their work to finish)
 * keep their context until they are answered; the pool grows so that they
 * never leave other clients without one, up to max_workers.
 */
static void maybe_grow(transport *tp)
{
	if (atomic_load(&tp->idle) >= IDLE_LOW_WATER || atomic_load(&tp->closing))
		return;
	pthread_mutex_lock(&tp->mu);
	int grown = 0;
	if (atomic_load(&tp->idle) < IDLE_LOW_WATER && !atomic_load(&tp->closing))
		grown = grow_locked(tp, CHUNK_WORKERS);
	int total = tp->n_workers;
	pthread_mutex_unlock(&tp->mu);
	if (grown)
		log_debug("%s: %d nng contexts now (%d more)", tp->opt.address, total, grown);
	else if (total >= tp->opt.max_workers)
		log_debug("%s: all %d nng contexts in use; new requests wait for one",
		          tp->opt.address, total);
}

static void worker_cb(void *arg)
{
	tp_worker *w = arg;
	transport *tp = w->tp;
	int rv = nng_aio_result(w->aio);
	if (w->state == W_RECV) {
		atomic_fetch_sub(&tp->idle, 1);
		if (rv != 0) {
			if (rv == NNG_ECLOSED || atomic_load(&tp->closing)) {
				w->state = W_DONE;
				return;
			}
			worker_recv(w);
			return;
		}
		nng_msg *m = nng_aio_get_msg(w->aio);
		nng_aio_set_msg(w->aio, NULL);
		w->state = W_WAIT;
		atomic_fetch_add(&tp->busy, 1);
		maybe_grow(tp);
		tp->cb.on_request(tp->cb.ctx, w, m);
		return;
	}
	if (w->state == W_SEND) {
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(w->aio);
			nng_aio_set_msg(w->aio, NULL);
			nng_msg_free(m);
		}
		atomic_fetch_sub(&tp->busy, 1);
		if (atomic_load(&tp->closing)) {
			w->state = W_DONE;
			return;
		}
		worker_recv(w);
	}
}

void transport_reply(tp_worker *w, nng_msg *msg)
{
	w->state = W_SEND;
	nng_aio_set_msg(w->aio, msg);
	nng_ctx_send(w->ctx, w->aio);
}

/* ---- connections ------------------------------------------------------- */

/* 1 when a pipe may take a place within max_pipes (under tp->mu). */
static int place_free_locked(const transport *tp)
{
	return tp->opt.max_pipes <= 0 || tp->n_pipes < tp->opt.max_pipes;
}

/* The oldest pipe beyond the cap (under tp->mu); NULL if none. */
static tp_pipe *oldest_over_locked(transport *tp)
{
	tp_pipe *oldest = NULL;
	for (tp_pipe *q = tp->pipes; q; q = q->next)
		if (q->over)
			oldest = q;
	return oldest;
}

/* Make room for one more pipe beyond the cap (under tp->mu): 1 with *evict
 * set to the pipe to close (or left unset), 0 when there is none. */
static int over_room_locked(transport *tp, double now, nng_pipe *evict)
{
	if (tp->n_over < MAX_OVER_PIPES)
		return 1;
	tp_pipe *old = oldest_over_locked(tp);
	if (!old || now - old->since < OVER_GRACE_S)
		return 0;
	*evict = old->p;
	return 1;
}

/*
 * A connection beyond max_pipes is kept, without a place, so that its first
 * request can be answered with the reason (a connection closed during its
 * handshake leaves the client's dialer retrying with nothing to report);
 * at most MAX_OVER_PIPES are kept, the oldest closed for a new one.
 */
static void pipe_added(transport *tp, nng_pipe p, uint64_t uid, uint64_t pid)
{
	tp_pipe *q = calloc(1, sizeof(*q));
	nng_pipe evict = NNG_PIPE_INITIALIZER;
	const char *refused = atomic_load(&tp->closing) ? "closing" : !q ? "out of memory" : NULL;
	double now = clock_now_s();

	pthread_mutex_lock(&tp->mu);
	if (!refused) {
		q->p = p;
		q->since = now;
		q->over = !place_free_locked(tp);
		if (q->over && !over_room_locked(tp, now, &evict))
			refused = "max_connections, and too many others beyond it just now";
	}
	if (!refused) {
		q->next = tp->pipes;
		tp->pipes = q;
		if (q->over)
			tp->n_over++;
		else
			tp->n_pipes++;
	}
	int over = !refused && q->over;
	pthread_mutex_unlock(&tp->mu);
	if (refused) {
		free(q);
		log_warn("%s: refused a connection from uid %llu pid %llu (%s)", tp->opt.address,
		         (unsigned long long)uid, (unsigned long long)pid, refused);
		nng_pipe_close(p);
		return;
	}
	if (over)
		log_warn("%s: a connection from uid %llu pid %llu is beyond max_connections (%d); "
		         "its requests are refused until one closes",
		         tp->opt.address, (unsigned long long)uid, (unsigned long long)pid,
		         tp->opt.max_pipes);
	if (nng_pipe_id(evict) > 0)
		nng_pipe_close(evict);
}

static void pipe_removed(transport *tp, uint32_t id)
{
	int known = 0;
	pthread_mutex_lock(&tp->mu);
	for (tp_pipe **pp = &tp->pipes; *pp; pp = &(*pp)->next) {
		if (nng_pipe_id((*pp)->p) == (int)id) {
			tp_pipe *q = *pp;
			*pp = q->next;
			if (q->over)
				tp->n_over--;
			else
				tp->n_pipes--;
			known = !q->over;
			free(q);
			break;
		}
	}
	pthread_mutex_unlock(&tp->mu);
	if (known && tp->cb.on_pipe_removed)
		tp->cb.on_pipe_removed(tp->cb.ctx, id);
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	transport *tp = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		uint64_t uid = UINT64_MAX, gid = UINT64_MAX, pid = 0;
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid);
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &gid);
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid);
		if (tp->cb.allow_peer && !tp->cb.allow_peer(tp->cb.ctx, id, uid, gid, pid)) {
			nng_pipe_close(p);
			return;
		}
		pipe_added(tp, p, uid, pid);
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		pipe_removed(tp, id);
	}
}

int transport_admit(transport *tp, uint32_t pipe_id)
{
	int admitted = 1;
	pthread_mutex_lock(&tp->mu);
	for (tp_pipe *q = tp->pipes; q; q = q->next) {
		if ((uint32_t)nng_pipe_id(q->p) != pipe_id)
			continue;
		if (q->over && place_free_locked(tp)) {
			q->over = 0;
			tp->n_over--;
			tp->n_pipes++;
		}
		admitted = !q->over;
		break;
	}
	pthread_mutex_unlock(&tp->mu);
	return admitted;
}

int transport_max_connections(const transport *tp)
{
	return tp->opt.max_pipes;
}

int transport_workers(transport *tp)
{
	pthread_mutex_lock(&tp->mu);
	int n = tp->n_workers;
	pthread_mutex_unlock(&tp->mu);
	return n;
}

int transport_connections(transport *tp)
{
	pthread_mutex_lock(&tp->mu);
	int n = tp->n_pipes;
	pthread_mutex_unlock(&tp->mu);
	return n;
}

/* Every connection still open, with or without a place. */
static int pipes_left(transport *tp)
{
	pthread_mutex_lock(&tp->mu);
	int n = tp->n_pipes + tp->n_over;
	pthread_mutex_unlock(&tp->mu);
	return n;
}

/* ---- open and close -------------------------------------------------- */

static int open_socket(transport *tp, const transport_options *opt, char *err, size_t errlen)
{
	int rv;
	if ((rv = nng_rep0_open(&tp->sock)) != 0) {
		snprintf(err, errlen, "cannot open an nng REP socket: %s", nng_strerror(rv));
		return -1;
	}
	nng_socket_set_size(tp->sock, NNG_OPT_RECVMAXSZ, opt->max_message_bytes);
	nng_pipe_notify(tp->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, tp);
	nng_pipe_notify(tp->sock, NNG_PIPE_EV_REM_POST, pipe_cb, tp);
	if ((rv = nng_listener_create(&tp->listener, tp->sock, opt->address)) != 0) {
		snprintf(err, errlen, "%s: cannot listen: %s", opt->address, nng_strerror(rv));
		return -1;
	}
	if (strncmp(opt->address, "ipc://", 6) == 0) {
		snprintf(tp->path, sizeof(tp->path), "%s", opt->address + 6);
		nng_listener_set_int(tp->listener, NNG_OPT_IPC_PERMISSIONS, (int)opt->socket_mode);
		/* A socket file left by a daemon that died is in the way; one that a
		 * live daemon answers on is not ours to take. */
		nng_socket probe;
		if (access(tp->path, F_OK) == 0 && nng_req0_open(&probe) == 0) {
			int live = nng_dial(probe, opt->address, NULL, 0) == 0;
			nng_close(probe);
			if (live) {
				snprintf(err, errlen,
				         "%s: another daemon is already listening there",
				         opt->address);
				tp->path[0] = '\0';
				return -1;
			}
			unlink(tp->path);
		}
	}
	if ((rv = nng_listener_start(tp->listener, 0)) != 0) {
		snprintf(err, errlen, "%s: cannot listen: %s", opt->address, nng_strerror(rv));
		tp->path[0] = '\0';
		return -1;
	}
	return 0;
}

transport *transport_open(const transport_options *opt, const transport_callbacks *cb, char *err,
                          size_t errlen)
{
	transport *tp = calloc(1, sizeof(*tp));
	if (!tp) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	tp->cb = *cb;
	tp->opt = *opt;
	if (tp->opt.max_workers < tp->opt.workers)
		tp->opt.max_workers = tp->opt.workers;
	pthread_mutex_init(&tp->mu, NULL);
	if (open_socket(tp, opt, err, errlen) != 0) {
		nng_close(tp->sock);
		pthread_mutex_destroy(&tp->mu);
		free(tp);
		return NULL;
	}
	pthread_mutex_lock(&tp->mu);
	int started = grow_locked(tp, opt->workers);
	pthread_mutex_unlock(&tp->mu);
	if (started < opt->workers) {
		snprintf(err, errlen, "%s: could make only %d of %d nng contexts", opt->address,
		         started, opt->workers);
		transport_close(tp);
		return NULL;
	}
	return tp;
}

void transport_stop_listening(transport *tp)
{
	nng_listener_close(tp->listener);
}

int transport_busy(transport *tp)
{
	return atomic_load(&tp->busy);
}

/* nng_close on its own thread, so a close that never returns (nng 1.5 can
 * wait forever in pipe teardown) cannot keep the daemon from exiting. */
typedef struct closer {
	nng_socket sock;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
} closer;

static void *close_main(void *arg)
{
	closer *c = arg;
	nng_close(c->sock);
	pthread_mutex_lock(&c->mu);
	c->done = 1;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Returns 1 when nng_close returned within `seconds`. */
static int close_socket_bounded(nng_socket sock, double seconds)
{
	static closer c; /* outlives a close that never returns */
	c = (closer){ .sock = sock };
	pthread_mutex_init(&c.mu, NULL);
	pthread_cond_init(&c.cv, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, close_main, &c) != 0) {
		nng_close(sock);
		return 1;
	}
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	long long ns = (long long)until.tv_nsec + (long long)(seconds * 1e9);
	until.tv_sec += (time_t)(ns / 1000000000LL);
	until.tv_nsec = (long)(ns % 1000000000LL);
	pthread_mutex_lock(&c.mu);
	while (!c.done)
		if (pthread_cond_timedwait(&c.cv, &c.mu, &until) == ETIMEDOUT)
			break;
	int done = c.done;
	pthread_mutex_unlock(&c.mu);
	if (done)
		pthread_join(t, NULL);
	else
		pthread_detach(t);
	return done;
}

/* How long the connections get to go away, and nng_close to return. Once
 * one close has not returned, nng's reaper is stuck and no later one will:
 * those get only a moment. */
#define PIPES_GONE_SECONDS 1.0
#define CLOSE_SECONDS 2.0
#define CLOSE_WEDGED_SECONDS 0.1
static atomic_int nng_wedged;

void transport_close(transport *tp)
{
	if (!tp)
		return;
	atomic_store(&tp->closing, 1);
	/* No new connections, then close every one we accepted, and wait for
	 * nng to tear them down: nng_close with connections still attached is
	 * where nng 1.5 can hang. */
	nng_listener_close(tp->listener);
	pthread_mutex_lock(&tp->mu);
	for (tp_pipe *q = tp->pipes; q; q = q->next)
		nng_pipe_close(q->p);
	pthread_mutex_unlock(&tp->mu);
	double until = clock_now_s() + PIPES_GONE_SECONDS;
	while (pipes_left(tp) > 0 && clock_now_s() < until)
		usleep(1000);
	/* Stop every aio (waits for callbacks in progress), then close. With
	 * closing set, and the lock taken once after it, no worker is added any
	 * more; a callback may take the lock, so it is not held while stopping. */
	pthread_mutex_lock(&tp->mu);
	pthread_mutex_unlock(&tp->mu);
	for (tp_chunk *c = tp->chunks; c; c = c->next)
		for (int i = 0; i < c->n; i++)
			nng_aio_stop(c->w[i].aio);
	double limit = atomic_load(&nng_wedged) ? CLOSE_WEDGED_SECONDS : CLOSE_SECONDS;
	if (!close_socket_bounded(tp->sock, limit)) {
		/* Its memory stays with the thread still in nng_close; the process
		 * is about to exit. */
		atomic_store(&nng_wedged, 1);
		log_warn("%s: nng_close did not return within %.1f s; exiting without it",
		         tp->opt.address, limit);
		if (tp->path[0])
			unlink(tp->path);
		return;
	}
	while (tp->chunks) {
		tp_chunk *c = tp->chunks;
		tp->chunks = c->next;
		for (int i = 0; i < c->n; i++) {
			nng_msg *m = nng_aio_get_msg(c->w[i].aio);
			if (m)
				nng_msg_free(m);
			nng_aio_free(c->w[i].aio);
		}
		free(c);
	}
	while (tp->pipes) {
		tp_pipe *q = tp->pipes;
		tp->pipes = q->next;
		free(q);
	}
	if (tp->path[0])
		unlink(tp->path);
	pthread_mutex_destroy(&tp->mu);
	free(tp);
}

int transport_nng_wedged(void)
{
	return atomic_load(&nng_wedged);
}

void transport_peer(nng_msg *msg, uint32_t *pipe_id, int64_t *uid, int64_t *gid, int64_t *pid)
{
	nng_pipe p = nng_msg_get_pipe(msg);
	uint64_t u = UINT64_MAX, g = UINT64_MAX, d = 0;
	*pipe_id = (uint32_t)nng_pipe_id(p);
	*uid = nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &u) == 0 ? (int64_t)u : -1;
	*gid = nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &g) == 0 ? (int64_t)g : -1;
	*pid = nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &d) == 0 ? (int64_t)d : -1;
}
