/*
 * request.c - one request to tileopsd and its reply.
 *
 * Every request gets its own nng context, so any number of threads may
 * have requests in flight on one REQ socket. A request's life runs through
 * its aio callback on nng's threads: send done -> start receiving -> reply
 * decoded -> DONE. Nobody has to be waiting for it to progress.
 *
 * Ordering: tileopsd runs a session's requests in seq order. The seq is
 * taken and nng_ctx_send started under client->mu, in one critical
 * section, so seq order is send order. A request that fails before it is
 * sent does not consume a seq. Each request also carries ring_mark, the
 * number of ring submissions published before it (under the same lock), so
 * requests and ring submissions keep one program order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static void request_cb(void *arg);

static void list_push(struct tileops_client *c, struct tileops_completion *r)
{
	r->prev = NULL;
	r->next = c->inflight;
	if (c->inflight != NULL)
		c->inflight->prev = r;
	c->inflight = r;
}

static void list_remove(struct tileops_client *c, struct tileops_completion *r)
{
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		c->inflight = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

static struct tileops_completion *request_alloc(struct tileops_client *c)
{
	struct tileops_completion *r = calloc(1, sizeof(*r));
	pthread_condattr_t attr;

	if (r == NULL)
		return NULL;
	if (nng_aio_alloc(&r->aio, request_cb, r) != 0) {
		free(r);
		return NULL;
	}
	/* Waits with a timeout measure it on the monotonic clock. */
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->done_cv, &attr);
	pthread_condattr_destroy(&attr);
	r->client = c;
	r->state = TCI_REQ_SENDING;
	return r;
}

/* Free what request_alloc made; the aio must be idle. */
static void request_destroy(struct tileops_completion *r)
{
	nng_aio_free(r->aio);
	pthread_cond_destroy(&r->done_cv);
	free(r->message);
	if (r->reply != NULL)
		tileops__reply__free_unpacked(r->reply, NULL);
	free(r);
}

/* A context from the pool, or a new one. Called with c->mu held. */
static int ctx_get(struct tileops_client *c, nng_ctx *out)
{
	if (c->n_ctx_pool > 0) {
		*out = c->ctx_pool[--c->n_ctx_pool];
		return 0;
	}
	return nng_ctx_open(out, c->sock);
}

/* Keep a context for the next request, or close it. Called with c->mu held. */
static void ctx_put(struct tileops_client *c, nng_ctx ctx)
{
	if (!c->dead && c->n_ctx_pool < TCI_CTX_POOL_MAX)
		c->ctx_pool[c->n_ctx_pool++] = ctx;
	else
		nng_ctx_close(ctx);
}

static const char *closed_text(const struct tileops_client *c)
{
	return c->closed ? "the client was closed (tileops_close)" : "connection to tileopsd lost";
}

/* Pack `req` with the next seq and start sending it. Called with c->mu held. */
static tileops_status request_start(struct tileops_client *c, struct tileops_completion *r,
                                    Tileops__Request *req, int flags)
{
	size_t size;
	nng_msg *msg;
	int rv;

	req->seq = c->next_seq;
	/* The daemon consumes the ring up to here before running this request. */
	req->ring_mark = tci_ring_mark(c);
	size = tileops__request__get_packed_size(req);
	if (c->info.max_message_bytes != 0 && size > c->info.max_message_bytes)
		return tci_error(TILEOPS_ERR_TOO_LARGE,
		                 "request of %zu bytes is over tileopsd's limit of %llu bytes",
		                 size, (unsigned long long)c->info.max_message_bytes);
	if ((rv = ctx_get(c, &r->ctx)) != 0)
		return tci_error_nng(tci_status_from_nng(rv), rv, "opening an nng context");
	if ((rv = nng_msg_alloc(&msg, size)) != 0) {
		ctx_put(c, r->ctx);
		return tci_error_nng(TILEOPS_ERR_OUT_OF_MEMORY, rv, "allocating a request");
	}
	tileops__request__pack(req, nng_msg_body(msg));

	r->seq = c->next_seq++;
	if (flags & TCI_SEND_CLOSING)
		nng_aio_set_timeout(r->aio, TCI_GOODBYE_TIMEOUT_MS);
	else
		nng_aio_set_timeout(r->aio,
		                    c->timeout_ms > 0 ? c->timeout_ms : NNG_DURATION_INFINITE);
	nng_aio_set_msg(r->aio, msg);
	list_push(c, r);
	c->n_inflight++;
	c->refs++;
	nng_ctx_send(r->ctx, r->aio);
	return TILEOPS_OK;
}

/*
 * Send `req` (its seq is filled in here). On success *out is the in-flight
 * request, to be released with tci_request_free; on failure nothing was
 * sent, *out is untouched and the thread's error says why.
 */
tileops_status tci_request_send(struct tileops_client *c, Tileops__Request *req, int flags,
                                struct tileops_completion **out)
{
	struct tileops_completion *r;
	tileops_status st;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "client is NULL");
	if ((r = request_alloc(c)) == NULL)
		return tci_error(TILEOPS_ERR_OUT_OF_MEMORY, "out of memory for a request");

	pthread_mutex_lock(&c->mu);
	while (!(flags & TCI_SEND_CLOSING) && !c->dead && c->n_inflight >= TCI_MAX_OUTSTANDING)
		pthread_cond_wait(&c->slot_cv, &c->mu);
	if (c->dead)
		st = tci_error(TILEOPS_ERR_CLOSED, "%s", closed_text(c));
	else
		st = request_start(c, r, req, flags);
	pthread_mutex_unlock(&c->mu);

	if (st != TILEOPS_OK) {
		request_destroy(r);
		return st;
	}
	*out = r;
	return TILEOPS_OK;
}

/* Make r final and wake whoever waits for it. Called with c->mu held. */
static void request_finish(struct tileops_completion *r, tileops_status st, char *message,
                           Tileops__Reply *reply)
{
	struct tileops_client *c = r->client;

	r->status = st;
	r->message = message;
	r->reply = reply;
	r->state = TCI_REQ_DONE;
	list_remove(c, r);
	c->n_inflight--;
	pthread_cond_broadcast(&r->done_cv);
	pthread_cond_signal(&c->slot_cv);
}

static char *text_dup(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *text_dup(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* The message for an nng failure of r. Called with c->mu held. */
static tileops_status failure_text(struct tileops_completion *r, int rv, char **message)
{
	struct tileops_client *c = r->client;

	if (!c->dead && tci_status_from_nng(rv) == TILEOPS_ERR_CLOSED) {
		/* nng fails the receives of a closing pipe before the pipe
		 * callback runs: the session is gone already, so stop now. */
		c->dead = 1;
		tci_request_abort_all(c);
		pthread_cond_broadcast(&c->slot_cv);
	}
	if (c->dead) {
		*message = text_dup("%s", closed_text(c));
		return TILEOPS_ERR_CLOSED;
	}
	if (rv == NNG_ETIMEDOUT) {
		*message = text_dup("no reply from tileopsd at %s within %d ms (request %llu)",
		                    c->address, c->timeout_ms, (unsigned long long)r->seq);
		return TILEOPS_ERR_TIMEOUT;
	}
	*message = text_dup("request %llu to tileopsd at %s failed: %s", (unsigned long long)r->seq,
	                    c->address, nng_strerror(rv));
	return tci_status_from_nng(rv) == TILEOPS_ERR_OUT_OF_MEMORY ? TILEOPS_ERR_OUT_OF_MEMORY
	                                                            : TILEOPS_ERR_PROTOCOL;
}

/* Decode a reply message; the status and message of the request follow from it. */
static tileops_status reply_decode(struct tileops_completion *r, nng_msg *msg, char **message,
                                   Tileops__Reply **reply_out)
{
	Tileops__Reply *reply;
	size_t len = nng_msg_len(msg);

	reply = tileops__reply__unpack(NULL, len, nng_msg_body(msg));
	if (reply == NULL) {
		*message = text_dup("tileopsd sent a reply of %zu bytes that does not decode", len);
		return TILEOPS_ERR_PROTOCOL;
	}
	if (reply->seq != r->seq) {
		*message = text_dup("tileopsd answered request %llu with the reply of %llu",
		                    (unsigned long long)r->seq, (unsigned long long)reply->seq);
		tileops__reply__free_unpacked(reply, NULL);
		return TILEOPS_ERR_PROTOCOL;
	}
	if (!tci_status_valid((int)reply->status)) {
		*message = text_dup("tileopsd replied with unknown status %d", (int)reply->status);
		tileops__reply__free_unpacked(reply, NULL);
		return TILEOPS_ERR_PROTOCOL;
	}
	if (reply->status != TILEOPS__STATUS__STATUS_OK) {
		tileops_status st = (tileops_status)reply->status;

		if (reply->message != NULL && reply->message[0] != '\0')
			*message = text_dup("%s", reply->message);
		else
			*message = text_dup("tileopsd: %s", tileops_strerror(st));
		tileops__reply__free_unpacked(reply, NULL);
		return st;
	}
	*reply_out = reply;
	return TILEOPS_OK;
}

/* The aio callback: runs on an nng thread each time a send or receive ends. */
static void request_cb(void *arg)
{
	struct tileops_completion *r = arg;
	struct tileops_client *c = r->client;
	int rv = nng_aio_result(r->aio);
	Tileops__Reply *reply = NULL;
	char *message = NULL;
	tileops_status st;
	nng_msg *msg;

	/* Only this callback changes r->state once sending started, and nng
	 * runs one callback of an aio at a time, so reading it here is safe. */
	if (r->state == TCI_REQ_RECEIVING && rv == 0) {
		msg = nng_aio_get_msg(r->aio);
		st = reply_decode(r, msg, &message, &reply);
		nng_msg_free(msg);
		pthread_mutex_lock(&c->mu);
		request_finish(r, st, message, reply);
		pthread_mutex_unlock(&c->mu);
		return;
	}

	pthread_mutex_lock(&c->mu);
	if (rv != 0) {
		/* A failed send leaves the message with us. */
		if (r->state == TCI_REQ_SENDING && (msg = nng_aio_get_msg(r->aio)) != NULL)
			nng_msg_free(msg);
		st = failure_text(r, rv, &message);
		request_finish(r, st, message, NULL);
	} else if (c->dead) {
		/* Sent, but the pipe is gone: no reply will ever come. Checked
		 * under mu so the abort of tci_request_abort_all cannot miss it. */
		st = failure_text(r, NNG_ECLOSED, &message);
		request_finish(r, st, message, NULL);
	} else {
		r->state = TCI_REQ_RECEIVING;
		nng_ctx_recv(r->ctx, r->aio);
	}
	pthread_mutex_unlock(&c->mu);
}

/*
 * Abort every request in flight, e.g. because the pipe went away. Called
 * with c->mu held and c->dead set. nng_aio_abort only schedules the
 * callbacks (they run on nng's task threads and take c->mu after us).
 */
void tci_request_abort_all(struct tileops_client *c)
{
	struct tileops_completion *r;

	for (r = c->inflight; r != NULL; r = r->next)
		nng_aio_abort(r->aio, NNG_ECLOSED);
	tci_ring_fail_all(c, TILEOPS_ERR_CLOSED, closed_text(c));
}

static void deadline_after(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * Wait until r is done (timeout_ms < 0: without limit) and return its
 * status; TILEOPS_IN_PROGRESS if the time ran out first. On failure the
 * request's message becomes the thread's error.
 */
tileops_status tci_request_wait(struct tileops_completion *r, int timeout_ms)
{
	struct tileops_client *c = r->client;
	struct timespec deadline;
	tileops_status st;

	if (r->on_ring)
		return tci_ring_wait(r, timeout_ms);
	if (timeout_ms > 0)
		deadline_after(&deadline, timeout_ms);
	pthread_mutex_lock(&c->mu);
	while (r->state != TCI_REQ_DONE) {
		if (timeout_ms == 0)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&r->done_cv, &c->mu);
		else if (pthread_cond_timedwait(&r->done_cv, &c->mu, &deadline) == ETIMEDOUT)
			break;
	}
	st = r->state == TCI_REQ_DONE ? r->status : TILEOPS_IN_PROGRESS;
	if (st != TILEOPS_OK && st != TILEOPS_IN_PROGRESS)
		tci_error_set_text(r->message ? r->message : tileops_strerror(st));
	pthread_mutex_unlock(&c->mu);
	return st;
}

/* Wait for r without touching the thread's error, then free it. */
void tci_request_free(struct tileops_completion *r)
{
	struct tileops_client *c;

	if (r == NULL)
		return;
	if (r->on_ring) {
		tci_ring_free(r);
		return;
	}
	c = r->client;
	pthread_mutex_lock(&c->mu);
	while (r->state != TCI_REQ_DONE)
		pthread_cond_wait(&r->done_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);

	/* Waits for the callback to return, which may still be unlocking mu. */
	nng_aio_free(r->aio);
	r->aio = NULL;

	pthread_mutex_lock(&c->mu);
	ctx_put(c, r->ctx);
	pthread_mutex_unlock(&c->mu);

	pthread_cond_destroy(&r->done_cv);
	free(r->message);
	if (r->reply != NULL)
		tileops__reply__free_unpacked(r->reply, NULL);
	free(r);
	tci_client_release(c);
}

/*
 * Send `req`, wait for its reply. On success and if reply_out is not NULL,
 * *reply_out is the decoded reply, freed by the caller with
 * tileops__reply__free_unpacked.
 */
tileops_status tci_request_call(struct tileops_client *c, Tileops__Request *req, int flags,
                                Tileops__Reply **reply_out)
{
	struct tileops_completion *r;
	tileops_status st;

	if ((st = tci_request_send(c, req, flags, &r)) != TILEOPS_OK)
		return st;
	st = tci_request_wait(r, -1);
	if (st == TILEOPS_OK && reply_out != NULL) {
		*reply_out = r->reply;
		r->reply = NULL;
	}
	tci_request_free(r);
	return st;
}

/* ---- completions: the public face of a request ------------------------- */

TILEOPS_API tileops_status tileops_completion_wait(tileops_completion *cp, int timeout_ms)
{
	if (cp == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "completion is NULL");
	return tci_request_wait(cp, timeout_ms);
}

TILEOPS_API tileops_status tileops_completion_poll(tileops_completion *cp)
{
	return tileops_completion_wait(cp, 0);
}

TILEOPS_API void tileops_completion_free(tileops_completion *cp)
{
	tci_request_free(cp);
}
