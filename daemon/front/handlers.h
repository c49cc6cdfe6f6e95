/*
 * handlers.h - the loop thread's side of requests: one control request,
 * one stats request, one finished job. Loop thread only.
 */
#ifndef TILEOPSD_HANDLERS_H
#define TILEOPSD_HANDLERS_H

#include "server.h"

/* A control message from the client on w (takes msg). */
/* received_us: when the nng thread got it (clock.h), for the latency stats. */
void handle_request(server *srv, tp_worker *w, nng_msg *msg, double received_us);
/* A job the executor handed back: answer it, free it. */
void handle_job_done(server *srv, job *j);
/* A stats request: the JSON answer. */
void handle_stats(server *srv, tp_worker *w);

#endif
