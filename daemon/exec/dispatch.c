/*
 * dispatch.c - the executor's jobs and ring entries (see dispatch.h): each
 * request goes to the module that owns what it touches (tensors.c,
 * launch.c, plan.c) and its answer to completion.c.
 */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "completion.h"
#include "devices.h"
#include "events.h"
#include "launch.h"
#include "opcache.h"
#include "plan.h"
#include "sqe.h"
#include "tensors.h"

/* ---- ops ------------------------------------------------------------------ */

/*
 * Check and launch one op of s. With `key` (a ring op descriptor, `hash`
 * its hash from opcache_find), an op that checks out is remembered under it.
 * *slot gets the op's stats slot (-1 for none).
 */
static tileops_status run_op(executor *ex, session *s, const op_desc *d, const tileops_sqe *key,
                             uint64_t hash, timed_cqe *timed, int *slot, char *err, size_t errlen)
{
	prepared_op p;
	tensor_resolver views = tensors_resolver(s);
	tileops_status st = launch_prepare(ex, &views, d, &p, err, errlen);
	*slot = p.slot;
	if (st == TILEOPS_OK)
		(void)launch_first_use(ex, s, &p); /* before it is cached: with its choice */
	if (st == TILEOPS_OK && key) {
		uint64_t handles[TK_MAX_INPUTS + TK_MAX_OUTPUTS];
		memcpy(handles, d->in, sizeof(handles[0]) * (size_t)d->n_in);
		memcpy(handles + d->n_in, d->out, sizeof(handles[0]) * (size_t)d->n_out);
		opcache_put(s, key, hash, ex->mf_gen, &p, handles, d->n_in + d->n_out);
	}
	return launch_prepared(ex, s, &p, st, timed, err, errlen);
}

/* ---- ring entries --------------------------------------------------------- */

/*
 * Run one op from the ring and post (or owe, when timed) its completion:
 * `hit` when its descriptor was prepared before, else d, which `key` (when
 * not NULL; `hash` its hash) remembers once it checks out.
 */
static void sqe_op(worker *w, session *s, const tileops_sqe *e, const op_desc *d,
                   const prepared_op *hit, const tileops_sqe *key, uint64_t hash,
                   tileops_ring_trace *trace)
{
	executor *ex = w->ex;
	char err[256] = "";
	timed_cqe *t = NULL;
	if ((e->flags & TILEOPS_SQE_F_TIMING) && (t = calloc(1, sizeof(*t)))) {
		t->s = s;
		t->tag = e->tag;
		t->received_us = w->entry_us;
		session_ref(s);
		w->timed_owed++; /* the worker keeps polling until it is posted */
	}
	int slot = hit ? hit->slot : -1;
	tileops_status st = hit ? launch_prepared(ex, s, hit, TILEOPS_OK, t, err, sizeof(err))
	                        : run_op(ex, s, d, key, hash, t, &slot, err, sizeof(err));
	if (trace)
		trace->launched_ns = ring_now_ns();
	if (t && trace) {
		t->trace = *trace;
		t->traced = 1;
	}
	if (st != TILEOPS_OK || !t)
		completion_post_op(ex, s, slot, e->tag, st, -1.0, err, w->entry_us, trace);
	if (st != TILEOPS_OK && t) {
		w->timed_owed--;
		session_unref(s);
		free(t);
	}
}

/* A plan run, and its completion. */
static void sqe_plan_run(executor *ex, session *s, const tileops_sqe *e, const plan_run_desc *r,
                         tileops_ring_trace *trace)
{
	char err[256] = "";
	tileops_status st = plan_run(ex, s, r, err, sizeof(err));
	if (trace)
		trace->launched_ns = ring_now_ns();
	completion_post_trace(ex, s, e->tag, st, -1.0, err, trace);
}

/* A packed tileops.Request (TILEOPS_SQE_REQUEST). */
static void sqe_request(worker *w, session *s, const tileops_sqe *e, tileops_ring_trace *trace)
{
	executor *ex = w->ex;
	char err[256] = "";
	request r;
	tileops_status st = wire_decode_sqe_request(e, &r, err, sizeof(err));
	if (st != TILEOPS_OK) {
		completion_post(ex, s, e->tag, st, -1.0, err);
	} else if (r.kind == REQ_OP_RUN) {
		sqe_op(w, s, e, &r.u.op, NULL, NULL, 0, trace);
	} else if (r.kind == REQ_PLAN_RUN) {
		sqe_plan_run(ex, s, e, &r.u.run, trace);
	} else if (r.kind == REQ_EVENT_WAIT) {
		st = tensors_event_wait(ex, s, r.u.event, err, sizeof(err));
		if (trace)
			trace->launched_ns = ring_now_ns();
		completion_post_trace(ex, s, e->tag, st, -1.0, err, trace);
	} else {
		completion_defer_trace(w, s, e->tag, trace); /* a sync */
	}
	request_clear(&r);
}

void dispatch_sqe(worker *w, session *s, const tileops_sqe *e)
{
	executor *ex = w->ex;
	char err[256] = "";
	tileops_status st;
	if (e->length > sizeof(e->payload)) {
		snprintf(err, sizeof(err), "ring entry: length is %u bytes, at most %zu", e->length,
		         sizeof(e->payload));
		completion_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
		return;
	}
	if (e->flags & ~TILEOPS_SQE_F_KNOWN) {
		snprintf(err, sizeof(err),
		         "ring entry: flags 0x%x include bits this daemon does not know (0x%x)",
		         e->flags, e->flags & ~TILEOPS_SQE_F_KNOWN);
		completion_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
		return;
	}
	/* Profiling (TILEOPS_SQE_F_TRACE): when the entry was taken, launched
	 * and posted; entries without the flag read no clock here. */
	tileops_ring_trace trace_buf, *trace = NULL;
	if (e->flags & TILEOPS_SQE_F_TRACE) {
		trace_buf = (tileops_ring_trace){ .taken_ns = ring_now_ns(),
			                          .executor = (uint32_t)w->index };
		trace = &trace_buf;
	}
	switch (e->kind) {
	case TILEOPS_SQE_REQUEST:
		sqe_request(w, s, e, trace);
		return;
	case TILEOPS_SQE_OP: {
		uint64_t hash;
		const prepared_op *hit = opcache_find(s, e, ex->mf_gen, &hash);
		if (hit) {
			executor_count_reuse(w);
			sqe_op(w, s, e, NULL, hit, NULL, 0, trace);
			return;
		}
		op_desc d;
		if ((st = wire_decode_sqe_op(e, &d, err, sizeof(err))) == TILEOPS_OK)
			sqe_op(w, s, e, &d, NULL, e, hash, trace);
		else
			completion_post_op(ex, s, -1, e->tag, st, -1.0, err, w->entry_us, trace);
		return;
	}
	case TILEOPS_SQE_EVENT_WAIT:
	case TILEOPS_SQE_EVENT_RECORD: {
		uint64_t id = 0;
		st = wire_decode_sqe_event(e, &id, err, sizeof(err));
		if (st == TILEOPS_OK)
			st = e->kind == TILEOPS_SQE_EVENT_WAIT
			             ? events_wait(ex, s, id, err, sizeof(err))
			             : events_record(ex, s, err, sizeof(err));
		if (trace)
			trace->launched_ns = ring_now_ns();
		completion_post_trace(ex, s, e->tag, st, -1.0, err,
		                      st == TILEOPS_OK ? trace : NULL);
		return;
	}
	case TILEOPS_SQE_PLAN_RUN: {
		plan_run_desc r;
		if ((st = wire_decode_sqe_plan_run(e, &r, err, sizeof(err))) == TILEOPS_OK)
			sqe_plan_run(ex, s, e, &r, trace);
		else
			completion_post(ex, s, e->tag, st, -1.0, err);
		return;
	}
	default:
		snprintf(
		        err, sizeof(err),
		        "ring entry: kind is %u, expected %u (request), %u (op), %u (plan run), %u "
		        "(event wait) or %u (event record)",
		        e->kind, TILEOPS_SQE_REQUEST, TILEOPS_SQE_OP, TILEOPS_SQE_PLAN_RUN,
		        TILEOPS_SQE_EVENT_WAIT, TILEOPS_SQE_EVENT_RECORD);
		completion_post(ex, s, e->tag, TILEOPS_ERR_PROTOCOL, -1.0, err);
	}
}

/* Consume s's ring entries up to `mark`. Returns TILEOPS_OK or an error. */
static tileops_status ring_until(worker *w, session *s, uint64_t mark, char *err, size_t errlen)
{
	while (s->ring.consumed < mark) {
		uint64_t avail = ring_available(&s->ring, &s->arena);
		if (s->ring.broken) {
			snprintf(err, errlen, "the session's ring is broken: %s", s->ring.why);
			return TILEOPS_ERR_PROTOCOL;
		}
		if (s->ring.consumed + avail < mark) {
			snprintf(err, errlen, "ring_mark %llu is past the %llu entries submitted",
			         (unsigned long long)mark,
			         (unsigned long long)(s->ring.consumed + avail));
			return TILEOPS_ERR_PROTOCOL;
		}
		if (ring_cq_room(&s->ring, &s->arena) == 0) {
			snprintf(err, errlen,
			         "the completion ring is full: read completions before "
			         "sending more requests");
			return TILEOPS_ERR_BUSY;
		}
		tileops_sqe e;
		if (ring_take(&s->ring, &s->arena, &e) != 0)
			continue;
		w->entry_us = clock_now_us();
		dispatch_sqe(w, s, &e);
	}
	return TILEOPS_OK;
}

/* ---- jobs from the loop --------------------------------------------------- */

static void job_open(worker *w, session *s, job *j)
{
	executor *ex = w->ex;
	j->status = plan_join_tenant(ex, s, j->tenant, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return;
	j->status = ex->be->ops->stream_create(ex->be, 0, &s->stream, j->msg, sizeof(j->msg));
	if (j->status != TILEOPS_OK)
		return;
	ex->be->ops->arena_attach(ex->be, &s->arena);
	if (!j->want_rings)
		return;
	if (ring_setup(&s->ring, &s->arena, j->msg, sizeof(j->msg)) != 0) {
		j->status = TILEOPS_ERR_INVALID_ARGUMENT;
		return;
	}
	j->rings = 1;
	__atomic_add_fetch(&ex->ring_sessions, 1, __ATOMIC_RELAXED);
	s->ring_next = w->rings;
	w->rings = s;
	session_ref(s);
}

static void job_warmup(executor *ex, session *s, job *j)
{
	j->status = plan_join_tenant(ex, s, j->warm->tenant, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		j->status =
		        ex->be->ops->stream_create(ex->be, 0, &s->stream, j->msg, sizeof(j->msg));
	if (j->status == TILEOPS_OK)
		plan_warmup(ex, s, j, j->warm);
}

static void job_close(worker *w, session *s)
{
	executor *ex = w->ex;
	if (s->ring.enabled) {
		for (session **pp = &w->rings; *pp; pp = &(*pp)->ring_next) {
			if (*pp == s) {
				*pp = s->ring_next;
				break;
			}
		}
		if (w->rr_next == s)
			w->rr_next = s->ring_next;
		s->ring_next = NULL;
	}
	plan_close_session(ex, s);
	events_close_session(ex, s);
	tensors_free_all(ex, s);
	opcache_free(s);
	devices_close_session(ex, s);
	if (s->stream) {
		/* Destroying the stream waits for its work; then every completion it
		 * owes can be posted before the arena goes away. */
		ex->be->ops->stream_destroy(ex->be, s->stream);
		s->stream = NULL;
		share_release(ex->be, &s->share);
		if (ex->be->ops->collect_timings)
			ex->be->ops->collect_timings(ex->be);
		completion_poll(w);
	}
	ring_break(&s->ring, "the session is closed");
	if (s->arena.base)
		ex->be->ops->arena_detach(ex->be, &s->arena);
	s->ex_closed = 1;
	if (s->ring.enabled) {
		__atomic_sub_fetch(&ex->ring_sessions, 1, __ATOMIC_RELAXED);
		session_unref(s); /* the rings list's reference */
	}
}

/* Returns 1 when the job's answer is owed until its fence passes. */
static int job_request(worker *w, session *s, job *j)
{
	executor *ex = w->ex;
	request *r = j->req;
	if (s->ex_closed || !s->stream) {
		/* The loop holds requests until the open succeeded; this is the
		 * second line. */
		j->status = TILEOPS_ERR_CLOSED;
		snprintf(j->msg, sizeof(j->msg), "%s",
		         s->ex_closed ? "the session is closed" : "the session was never opened");
		return 0;
	}
	if (s->ring.enabled && r->ring_mark > s->ring.consumed) {
		j->status = ring_until(w, s, r->ring_mark, j->msg, sizeof(j->msg));
		if (j->status != TILEOPS_OK)
			return 0;
	}
	switch (r->kind) {
	case REQ_TENSOR_CREATE:
		tensors_make(ex, s, j, &r->u.tensor.spec, r->u.tensor.device);
		return 0;
	case REQ_TENSOR_IMPORT:
		tensors_import(ex, s, j, &r->u.tensor.spec, r->u.tensor.ipc, r->u.tensor.offset,
		               r->u.tensor.bytes);
		return 0;
	case REQ_TENSOR_VIEW:
		tensors_view(ex, s, j, r->u.view.base, r->u.view.byte_offset, &r->u.view.spec,
		             r->u.view.has_strides ? r->u.view.strides : NULL);
		return 0;
	case REQ_EVENT_WAIT:
		j->status = tensors_event_wait(ex, s, r->u.event, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_RECORD:
		j->status = tensors_event_record(ex, s, j->ipc, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_REGISTER:
		j->status = events_register(ex, s, r->u.event, &j->handle, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_RELEASE:
		j->status = events_release(ex, s, r->u.handle, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_WAIT_ID:
		j->status = events_wait(ex, s, r->u.handle, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_EXPORT:
		j->status = events_export(ex, s, j->ipc, j->msg, sizeof(j->msg));
		return 0;
	case REQ_EVENT_RECORD_EXPORT:
		j->status = events_record(ex, s, j->msg, sizeof(j->msg));
		return 0;
	case REQ_TENSOR_FREE:
		plan_forget_tensor(ex, s, r->u.handle);
		tensors_free(ex, s, j, r->u.handle);
		return 0;
	case REQ_TENSOR_WRITE:
	case REQ_TENSOR_READ:
		return tensors_copy(w, s, j, r->kind == REQ_TENSOR_WRITE, r->u.copy.handle,
		                    r->u.copy.tensor_offset, r->u.copy.arena_offset,
		                    r->u.copy.length);
	case REQ_TENSOR_EXPORT:
		tensors_export(ex, s, j, r->u.handle);
		return 0;
	case REQ_TENSOR_COPY:
		tensors_copy_pair(ex, s, j, r->u.pair.dst, r->u.pair.src);
		return 0;
	case REQ_OP_RUN:
		j->status =
		        run_op(ex, s, &r->u.op, NULL, 0, NULL, &j->op_slot, j->msg, sizeof(j->msg));
		return 0;
	case REQ_SYNC:
		completion_defer(w, s, j, 0);
		return 1;
	case REQ_PLAN_CREATE:
		plan_create(ex, s, j, &r->u.plan); /* takes the definition */
		return 0;
	case REQ_PLAN_RUN:
		j->status = plan_run(ex, s, &r->u.run, j->msg, sizeof(j->msg));
		return 0;
	case REQ_PLAN_FREE:
		plan_free(ex, s, j, r->u.handle);
		return 0;
	case REQ_PLAN_OPEN:
		plan_open(ex, s, j, r->u.name);
		return 0;
	}
	j->status = TILEOPS_ERR_INTERNAL;
	snprintf(j->msg, sizeof(j->msg), "request kind %d has no handler", (int)r->kind);
	return 0;
}

void dispatch_job(worker *w, job *j)
{
	executor *ex = w->ex;
	j->status = TILEOPS_OK;
	j->msg[0] = '\0';
	j->op_slot = -1;
	switch (j->kind) {
	case JOB_OPEN:
		job_open(w, j->s, j);
		break;
	case JOB_CLOSE:
		job_close(w, j->s);
		break;
	case JOB_REQUEST:
		if (job_request(w, j->s, j))
			return; /* answered when its fence passes */
		break;
	case JOB_RESET:
		plan_reset_caches(ex);
		break;
	case JOB_WARMUP:
		job_warmup(ex, j->s, j);
		break;
	}
	completion_hand_back(ex, j);
}
