/*
 * dispatch.h - running what the executor is given: the loop's jobs (open,
 * close, control requests, resets, warm-up plans) and the entries of the
 * sessions' submission rings, with the same rules and errors on both
 * planes. Executor thread only.
 */
#ifndef TILEOPSD_DISPATCH_H
#define TILEOPSD_DISPATCH_H

#include "tileops_ring.h"
#include "worker.h"

/* Run one job; its answer goes back through completion_hand_back, now or
 * once the work it waits for is done. */
void dispatch_job(worker *w, job *j);
/* Run one submission-ring entry of s; posts (or owes) its completion. */
void dispatch_sqe(worker *w, session *s, const tileops_sqe *e);

#endif
