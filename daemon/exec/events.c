/*
 * events.c - a session's events opened once (events.h). The registered
 * events are a short list: a session holds a few (one per client stream it
 * orders with), and a lookup is a walk of it.
 */
#include "events.h"

#include <stdio.h>
#include <stdlib.h>

struct session_event {
	uint64_t id;
	void *ev; /* the backend's opened event */
	struct session_event *next;
};

static tileops_status events_unsupported(const executor *ex, const char *call, int have, char *err,
                                         size_t errlen)
{
	if (have)
		return TILEOPS_OK;
	snprintf(err, errlen,
	         "%s: CUDA IPC events need the CUDA backend (this daemon runs on the %s)", call,
	         ex->be->name);
	return TILEOPS_ERR_UNSUPPORTED;
}

static struct session_event *events_find(const session *s, uint64_t id)
{
	for (struct session_event *e = s->events; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

static tileops_status events_unknown(const session *s, const char *call, uint64_t id, char *err,
                                     size_t errlen)
{
	snprintf(err, errlen,
	         "%s: %llu is not an event this session registered (%d registered now; ids "
	         "come from tileops_event_register and end with tileops_event_release)",
	         call, (unsigned long long)id, s->n_events);
	return TILEOPS_ERR_UNKNOWN_HANDLE;
}

tileops_status events_register(executor *ex, session *s, const unsigned char handle[64],
                               uint64_t *id, char *err, size_t errlen)
{
	const backend_ops *o = ex->be->ops;
	tileops_status st =
	        events_unsupported(ex, "event_register", o->event_open != NULL, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	if (s->n_events >= EVENTS_MAX_PER_SESSION) {
		snprintf(err, errlen,
		         "event_register: the session holds %d events, at most %d (release some "
		         "with tileops_event_release)",
		         s->n_events, EVENTS_MAX_PER_SESSION);
		return TILEOPS_ERR_QUOTA;
	}
	struct session_event *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, errlen, "event_register: out of host memory");
		return TILEOPS_ERR_OUT_OF_MEMORY;
	}
	if ((st = o->event_open(ex->be, handle, &e->ev, err, errlen)) != TILEOPS_OK) {
		free(e);
		return st;
	}
	e->id = ++s->next_event;
	e->next = s->events;
	s->events = e;
	s->n_events++;
	*id = e->id;
	return TILEOPS_OK;
}

tileops_status events_release(executor *ex, session *s, uint64_t id, char *err, size_t errlen)
{
	tileops_status st = events_unsupported(ex, "event_release", ex->be->ops->event_open != NULL,
	                                       err, errlen);
	if (st != TILEOPS_OK)
		return st;
	for (struct session_event **pp = &s->events; *pp; pp = &(*pp)->next) {
		struct session_event *e = *pp;
		if (e->id != id)
			continue;
		*pp = e->next;
		ex->be->ops->event_close(ex->be, e->ev);
		free(e);
		s->n_events--;
		return TILEOPS_OK;
	}
	return events_unknown(s, "event_release", id, err, errlen);
}

tileops_status events_wait(executor *ex, session *s, uint64_t id, char *err, size_t errlen)
{
	const backend_ops *o = ex->be->ops;
	tileops_status st = events_unsupported(ex, "event_wait_submit",
	                                       o->event_wait_opened != NULL, err, errlen);
	if (st != TILEOPS_OK)
		return st;
	struct session_event *e = events_find(s, id);
	if (!e)
		return events_unknown(s, "event_wait_submit", id, err, errlen);
	return o->event_wait_opened(ex->be, s->stream, e->ev, err, errlen);
}

tileops_status events_export(executor *ex, session *s, unsigned char out[64], char *err,
                             size_t errlen)
{
	const backend_ops *o = ex->be->ops;
	tileops_status st =
	        events_unsupported(ex, "event_export", o->event_export != NULL, err, errlen);
	return st != TILEOPS_OK ? st : o->event_export(ex->be, s->stream, out, err, errlen);
}

tileops_status events_record(executor *ex, session *s, char *err, size_t errlen)
{
	const backend_ops *o = ex->be->ops;
	tileops_status st = events_unsupported(ex, "event_record_submit", o->event_rerecord != NULL,
	                                       err, errlen);
	return st != TILEOPS_OK ? st : o->event_rerecord(ex->be, s->stream, err, errlen);
}

void events_close_session(executor *ex, session *s)
{
	while (s->events) {
		struct session_event *e = s->events;
		s->events = e->next;
		ex->be->ops->event_close(ex->be, e->ev);
		free(e);
	}
	s->n_events = 0;
}
