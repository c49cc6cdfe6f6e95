/*
 * reply.c - answers to control requests (see reply.h).
 */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void reply_send(server *srv, tp_worker *w, Tileops__Reply *r)
{
	stats_count_request(&srv->st, r->status != TILEOPS__STATUS__STATUS_OK);
	if (r->status != TILEOPS__STATUS__STATUS_OK)
		log_debug("request %llu: status %d: %s", (unsigned long long)r->seq, (int)r->status,
		          r->message);
	if (!w)
		return;
	size_t len = tileops__reply__get_packed_size(r);
	nng_msg *m;
	if (nng_msg_alloc(&m, len) != 0) {
		log_error("out of memory for a %zu-byte reply; the client will time out", len);
		return;
	}
	tileops__reply__pack(r, nng_msg_body(m));
	transport_reply(w, m);
}

void reply_status(server *srv, tp_worker *w, uint64_t seq, tileops_status st, const char *msg)
{
	Tileops__Reply r = TILEOPS__REPLY__INIT;
	r.seq = seq;
	r.status = (Tileops__Status)st;
	r.message = (char *)(msg ? msg : "");
	reply_send(srv, w, &r);
}

void reply_fmt(server *srv, tp_worker *w, uint64_t seq, tileops_status st, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_status(srv, w, seq, st, msg);
}
