/* transport.c - nng REP0 with a pool of contexts (see transport.h). */
#include "transport.h"

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

enum worker_state { W_RECV, W_WAIT, W_SEND, W_DONE };

struct tp_worker {
	transport *tp;
	nng_ctx ctx;
	nng_aio *aio;
	enum worker_state state;
};

struct transport {
	nng_socket sock;
	nng_listener listener;
	transport_callbacks cb;
	int n_workers;
	tp_worker *workers;
	atomic_int busy;
	atomic_int closing;
	char path[512]; /* ipc socket file, removed at close */
};

static void worker_recv(tp_worker *w)
{
	w->state = W_RECV;
	nng_ctx_recv(w->ctx, w->aio);
}

static void worker_cb(void *arg)
{
	tp_worker *w = arg;
	transport *tp = w->tp;
	int rv = nng_aio_result(w->aio);
	if (w->state == W_RECV) {
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

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	transport *tp = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	if (ev == NNG_PIPE_EV_ADD_PRE && tp->cb.allow_peer) {
		uint64_t uid = UINT64_MAX, gid = UINT64_MAX, pid = 0;
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid);
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &gid);
		nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid);
		if (!tp->cb.allow_peer(tp->cb.ctx, id, uid, gid, pid))
			nng_pipe_close(p);
	} else if (ev == NNG_PIPE_EV_REM_POST && tp->cb.on_pipe_removed) {
		tp->cb.on_pipe_removed(tp->cb.ctx, id);
	}
}

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
	if (open_socket(tp, opt, err, errlen) != 0) {
		nng_close(tp->sock);
		free(tp);
		return NULL;
	}
	tp->workers = calloc((size_t)opt->workers, sizeof(tp_worker));
	if (!tp->workers) {
		snprintf(err, errlen, "out of memory");
		transport_close(tp);
		return NULL;
	}
	for (int i = 0; i < opt->workers; i++) {
		tp_worker *w = &tp->workers[i];
		w->tp = tp;
		int rv = nng_aio_alloc(&w->aio, worker_cb, w);
		if (rv == 0)
			rv = nng_ctx_open(&w->ctx, tp->sock);
		if (rv != 0) {
			snprintf(err, errlen, "cannot make nng context %d: %s", i,
			         nng_strerror(rv));
			transport_close(tp);
			return NULL;
		}
		tp->n_workers = i + 1;
	}
	for (int i = 0; i < tp->n_workers; i++)
		worker_recv(&tp->workers[i]);
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

void transport_close(transport *tp)
{
	if (!tp)
		return;
	atomic_store(&tp->closing, 1);
	/* Stop every aio first (waits for callbacks in progress), then free. */
	for (int i = 0; i < tp->n_workers; i++)
		nng_aio_stop(tp->workers[i].aio);
	nng_close(tp->sock);
	for (int i = 0; i < tp->n_workers; i++) {
		nng_msg *m = nng_aio_get_msg(tp->workers[i].aio);
		if (m)
			nng_msg_free(m);
		nng_aio_free(tp->workers[i].aio);
	}
	free(tp->workers);
	if (tp->path[0])
		unlink(tp->path);
	free(tp);
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
