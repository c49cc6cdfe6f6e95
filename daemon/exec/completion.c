/*
 * completion.c - answers owed to the loop and to sessions' rings (see
 * completion.h).
 */
#include "completion.h"

#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "devices.h"

void completion_hand_back(executor *ex, job *j)
{
	ex->cfg.done(ex->cfg.ctx, j);
}

void completion_post(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
                     const char *msg)
{
	completion_post_trace(ex, s, tag, st, gpu_us, msg, NULL);
}

void completion_post_trace(executor *ex, session *s, uint64_t tag, tileops_status st, double gpu_us,
                           const char *msg, const tileops_ring_trace *trace)
{
	if (ring_post_trace(&s->ring, &s->arena, tag, (int)st, gpu_us, msg, trace) == 0)
		stats_count_request(ex->cfg.st, st != TILEOPS_OK);
}

void completion_post_op(executor *ex, session *s, int slot, uint64_t tag, tileops_status st,
                        double gpu_us, const char *msg, double received_us,
                        const tileops_ring_trace *trace)
{
	if (ring_post_trace(&s->ring, &s->arena, tag, (int)st, gpu_us, msg, trace) != 0)
		return;
	stats_count_request(ex->cfg.st, st != TILEOPS_OK);
	worker *w = exec_worker;
	if (s->ring.holding && w && w->n_lat_owed < w->cap_lat_owed) {
		/* The client sees it when the batch is published. */
		w->lat_owed[w->n_lat_owed++] =
		        (owed_latency){ s, slot, st != TILEOPS_OK, received_us };
		return;
	}
	double us = clock_now_us() - received_us;
	stats_op_latency(ex->cfg.st, slot, us);
	stats_session_op(&s->op_stats, st != TILEOPS_OK, us);
}

void completion_latency_published(worker *w, session *s)
{
	if (!w->n_lat_owed)
		return;
	double now = clock_now_us();
	for (int i = 0; i < w->n_lat_owed; i++) {
		const owed_latency *o = &w->lat_owed[i];
		stats_op_latency(w->ex->cfg.st, o->slot, now - o->received_us);
		stats_session_op(&o->s->op_stats, o->failed, now - o->received_us);
	}
	w->n_lat_owed = 0;
}

static void defer(worker *w, session *s, job *j, uint64_t tag, const tileops_ring_trace *trace);

void completion_defer(worker *w, session *s, job *j, uint64_t tag)
{
	defer(w, s, j, tag, NULL);
}

void completion_defer_trace(worker *w, session *s, uint64_t tag, const tileops_ring_trace *trace)
{
	defer(w, s, NULL, tag, trace);
}

static void defer(worker *w, session *s, job *j, uint64_t tag, const tileops_ring_trace *trace)
{
	executor *ex = w->ex;
	char msg[256];
	pending *p = calloc(1, sizeof(*p));
	void *fence = NULL, *stream = NULL;
	tileops_status st = p ? devices_fence_stream(ex, s, &stream, msg, sizeof(msg))
	                      : TILEOPS_ERR_OUT_OF_MEMORY;
	if (st == TILEOPS_OK)
		st = ex->be->ops->fence_create(ex->be, stream, &fence, msg, sizeof(msg));
	if (st != TILEOPS_OK) {
		free(p);
		if (!p)
			snprintf(msg, sizeof(msg), "out of host memory");
		if (j) {
			j->status = st;
			snprintf(j->msg, sizeof(j->msg), "%s", msg);
			completion_hand_back(ex, j);
		} else {
			completion_post(ex, s, tag, st, -1.0, msg);
		}
		return;
	}
	p->fence = fence;
	p->job = j;
	p->tag = tag;
	if (trace) {
		p->trace = *trace;
		p->trace.launched_ns = ring_now_ns();
		p->traced = 1;
	}
	if (!j) {
		p->s = s;
		session_ref(s);
	}
	if (w->pend_tail)
		w->pend_tail->next = p;
	else
		w->pend = p;
	w->pend_tail = p;
}

int completion_poll(worker *w)
{
	executor *ex = w->ex;
	int progressed = 0;
	pending **pp = &w->pend;
	w->pend_tail = NULL;
	while (*pp) {
		pending *p = *pp;
		char msg[256] = "";
		tileops_status st = ex->be->ops->fence_query(ex->be, p->fence, msg, sizeof(msg));
		if (st == TILEOPS_IN_PROGRESS) {
			w->pend_tail = p;
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (st != TILEOPS_OK && ex->be->ops->fence_answered)
			ex->be->ops->fence_answered(ex->be, p->fence);
		ex->be->ops->fence_free(ex->be, p->fence);
		if (p->job) {
			if (st != TILEOPS_OK && p->job->status == TILEOPS_OK) {
				p->job->status = st;
				snprintf(p->job->msg, sizeof(p->job->msg), "%s", msg);
			}
			completion_hand_back(ex, p->job);
		} else {
			completion_post_trace(ex, p->s, p->tag, st, -1.0, msg,
			                      p->traced ? &p->trace : NULL);
			session_unref(p->s);
		}
		free(p);
		progressed = 1;
	}
	return progressed;
}

void completion_timed(void *ctx, int slot, void *arg, double us)
{
	executor *ex = ctx;
	stats_op_time(ex->cfg.st, slot, us);
	timed_cqe *t = arg;
	if (!t)
		return;
	if (exec_worker)
		exec_worker->timed_owed--;
	completion_post_op(ex, t->s, slot, t->tag, TILEOPS_OK, us, "", t->received_us,
	                   t->traced ? &t->trace : NULL);
	session_unref(t->s);
	free(t);
}
