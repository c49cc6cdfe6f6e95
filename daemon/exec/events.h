/*
 * events.h - a session's CUDA IPC events opened once (tileops_event_register,
 * tileops_event_wait_submit, tileops_event_export, tileops_event_record_submit;
 * docs/protocol.md, "Events"). A registered event is the client's: the daemon
 * opens its handle once, keeps it open until the client releases it or the
 * session closes, and queues waits on it in the session's stream order. The
 * exported event is the session's stream's own (one per session, its handle
 * fetched once), recorded again by each record request. Executor thread of
 * the session only.
 */
#ifndef TILEOPSD_EVENTS_H
#define TILEOPSD_EVENTS_H

#include <stdint.h>

#include "worker.h"

/* At most this many events registered at once per session. */
#define EVENTS_MAX_PER_SESSION 64

/* Open the client's event (its 64-byte handle); *id gets its id (never 0). */
tileops_status events_register(executor *ex, session *s, const unsigned char handle[64],
                               uint64_t *id, char *err, size_t errlen);
/* Close a registered event. */
tileops_status events_release(executor *ex, session *s, uint64_t id, char *err, size_t errlen);
/* The session's later work waits for the registered event's latest record. */
tileops_status events_wait(executor *ex, session *s, uint64_t id, char *err, size_t errlen);
/* The handle of the session's own event (made on first use). */
tileops_status events_export(executor *ex, session *s, unsigned char out[64], char *err,
                             size_t errlen);
/* Record the session's own event again after its work so far. */
tileops_status events_record(executor *ex, session *s, char *err, size_t errlen);
/* Close every event the session still holds (its close). */
void events_close_session(executor *ex, session *s);

#endif /* TILEOPSD_EVENTS_H */
