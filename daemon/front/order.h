/*
 * order.h - a session's control requests run in the order of their seq
 * numbers, whatever order they arrive in: one that comes early waits in
 * the session's held list until every one before it has run. Loop thread.
 */
#ifndef TILEOPSD_ORDER_H
#define TILEOPSD_ORDER_H

#include <stdint.h>

#include "session.h"
#include "tileops.pb-c.h"

struct tp_worker;

/* A request waiting for its turn (its seq is not the next one yet). */
typedef struct held_request {
	uint64_t seq;
	struct tp_worker *w;
	Tileops__Request *req;
	double received_us; /* when the daemon received it */
	struct held_request *next;
} held_request;

/* Insert a request into the held list in seq order; -1 if seq is already held. */
int session_hold(session *s, held_request *h);
/* The head of the held list if it is the next to run, removed; else NULL. */
held_request *session_next_ready(session *s);

#endif
