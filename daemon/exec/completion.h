/*
 * completion.h - what the executor owes: a job's answer to the loop, or a
 * completion in a session's ring, now or once the work queued before it
 * on the session's stream has finished (a fence). Executor thread only.
 */
#ifndef TILEOPSD_COMPLETION_H
#define TILEOPSD_COMPLETION_H

#include "worker.h"

/* Give a finished job back to the loop (executor_config.done). */
void completion_hand_back(executor *ex, job *j);
/* Post a completion on s's ring and count it. gpu_us < 0: none. */
void completion_post(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
                     const char *msg);
/* completion_post with the entry's trace (NULL: none; ring.h). */
void completion_post_trace(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
                           const char *msg, const tileops_ring_trace *trace);
/* The same for an op request taken from the ring at received_us, counted
 * in the latency stats of its op slot (-1: none) and of s. */
void completion_post_op(executor *ex, session *s, int slot, uint64_t tag, tileops_status st,
                        double gpu_us, const char *msg, double received_us,
                        const tileops_ring_trace *trace);
/* The answers of s that the batch just published (ring_publish) end their
 * latency now. */
void completion_latency_published(worker *w, session *s);
/*
 * Owe j's answer (or, with j NULL, a ring completion with `tag`) until the
 * work queued on s's stream so far is done. If no fence can be made, the
 * answer goes out at once with the error.
 */
void completion_defer(worker *w, session *s, job *j, uint64_t tag);
/* completion_defer of a ring completion with the entry's trace (NULL: none). */
void completion_defer_trace(worker *w, session *s, uint64_t tag, const tileops_ring_trace *trace);
/* Answer every owed completion of w whose fence has passed; 1 if any was. */
int completion_poll(worker *w);
/* The backend's timing callback: an op's device time, and the ring
 * completion (a timed_cqe, or NULL) that waited for it. */
void completion_timed(void *ctx, int slot, void *arg, double us);

#endif
