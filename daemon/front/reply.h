/*
 * reply.h - answering a control request: a Reply packed and sent on the
 * worker the request came in on (NULL: nobody to answer), counted in the
 * stats. Loop thread only.
 */
#ifndef TILEOPSD_REPLY_H
#define TILEOPSD_REPLY_H

#include "server.h"
#include "tileops.pb-c.h"

void reply_send(server *srv, tp_worker *w, Tileops__Reply *r);
/* A Reply with only a status and a message (msg NULL: none). */
void reply_status(server *srv, tp_worker *w, uint64_t seq, tileops_status st, const char *msg);
void reply_fmt(server *srv, tp_worker *w, uint64_t seq, tileops_status st, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

#endif
