/*
 * sessions.c - the loop's table of sessions (see sessions.h).
 */
#include "sessions.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "order.h"
#include "reply.h"

/* How long a request may wait for one before it that never arrives. */
#define GAP_TIMEOUT_SECONDS 2.0

session *sessions_by_pipe(server *srv, uint32_t pipe)
{
	for (session *s = srv->sessions; s; s = s->next)
		if (s->pipe == pipe)
			return s;
	return NULL;
}

void sessions_submit(server *srv, session *s, job *j)
{
	j->s = s;
	if (s)
		session_ref(s);
	srv->jobs_in_flight++;
	executor_submit(srv->ex, j);
}

void session_reap(server *srv, session *s, const char *why)
{
	if (s->closing)
		return;
	s->closing = 1;
	executor_release_worker(srv->ex, s->worker);
	for (session **pp = &srv->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			srv->n_sessions--;
			break;
		}
	}
	while (s->held) {
		held_request *h = s->held;
		s->held = h->next;
		reply_fmt(srv, h->w, h->seq, TILEOPS_ERR_CLOSED, "session closed: %s", why);
		tileops__request__free_unpacked(h->req, NULL);
		free(h);
	}
	s->n_held = 0;
	size_t n = __atomic_load_n(&s->n_tensors, __ATOMIC_RELAXED);
	size_t bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
	log_info("session %llu closed (%s): freeing %zu tensors, %zu bytes",
	         (unsigned long long)s->id, why, n, bytes);
	job *j = calloc(1, sizeof(*j));
	if (!j) {
		/* Without memory for the job the device memory leaks, but the daemon
		 * stays consistent. */
		log_error("session %llu: out of memory while closing; %zu bytes leaked",
		          (unsigned long long)s->id, bytes);
	} else {
		j->kind = JOB_CLOSE;
		sessions_submit(srv, s, j);
	}
	session_unref(s);
}

void sessions_check_gaps(server *srv)
{
	double now = clock_now_s();
	for (session *s = srv->sessions; s; s = s->next) {
		if (!s->gap_since || now - s->gap_since < GAP_TIMEOUT_SECONDS)
			continue;
		/* A request never arrived; the ones after it cannot run in order. */
		uint64_t missing = s->next_seq;
		while (s->held) {
			held_request *h = s->held;
			s->held = h->next;
			s->next_seq = h->seq + 1;
			reply_fmt(srv, h->w, h->seq, TILEOPS_ERR_PROTOCOL,
			          "request seq %llu never arrived; requests after it were refused",
			          (unsigned long long)missing);
			tileops__request__free_unpacked(h->req, NULL);
			free(h);
		}
		s->n_held = 0;
		s->gap_since = 0;
	}
}
