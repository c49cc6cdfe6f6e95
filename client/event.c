/*
 * event.c - CUDA IPC events opened once (tileops.h, "Events opened once"):
 * registering a client's event and releasing it over nng, waiting on it and
 * recording the session's own event through the rings like ops (over nng
 * where the session has no rings), and the session event's handle.
 */
#include <string.h>

#include "internal.h"

TILEOPS_API tileops_status tileops_event_register(tileops_client *c, const tileops_ipc_event *ev,
                                                  tileops_event *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventRegister body = TILEOPS__EVENT_REGISTER__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;

	if (c == NULL || ev == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_register: %s is NULL",
		                 c == NULL    ? "client"
		                 : ev == NULL ? "event"
		                              : "out");
	body.ipc_event.data = (uint8_t *)ev->bytes;
	body.ipc_event.len = sizeof(ev->bytes);
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_REGISTER;
	req.event_register = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	if (reply->body_case != TILEOPS__REPLY__BODY_EVENT_REGISTER ||
	    reply->event_register->event == 0)
		st = tci_error(TILEOPS_ERR_PROTOCOL,
		               "event_register: tileopsd's reply carries no event id");
	else
		*out = reply->event_register->event;
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

TILEOPS_API tileops_status tileops_event_release(tileops_client *c, tileops_event e)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventRelease body = TILEOPS__EVENT_RELEASE__INIT;

	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_release: client is NULL");
	if (e == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "event_release: event 0 is never a registered event");
	body.event = e;
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_RELEASE;
	req.event_release = &body;
	/* Over nng: the daemon runs it after the ring entries before it. */
	return tci_request_call(c, &req, 0, NULL);
}

TILEOPS_API tileops_status tileops_event_wait_submit(tileops_client *c, tileops_event e,
                                                     tileops_completion **out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventWaitRegistered body = TILEOPS__EVENT_WAIT_REGISTERED__INIT;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_wait_submit: out is NULL");
	*out = NULL;
	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_wait_submit: client is NULL");
	if (e == 0)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "event_wait_submit: event 0 is never a registered event");
	body.event = e;
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_WAIT_REGISTERED;
	req.event_wait_registered = &body;
	return tci_op_send(c, &req, 0, out);
}

/* The event handle in er (the reply's body, NULL when another one) into out;
 * frees the reply. */
tileops_status tci_event_reply(const char *what, Tileops__Reply *reply,
                               const Tileops__EventRecordReply *er, tileops_ipc_event *out)
{
	tileops_status st = TILEOPS_OK;

	if (er == NULL || er->ipc_event.len != sizeof(out->bytes))
		st = tci_error(TILEOPS_ERR_PROTOCOL,
		               "%s: tileopsd's reply carries %zu event bytes, expected %zu", what,
		               er != NULL ? er->ipc_event.len : 0, sizeof(out->bytes));
	else
		memcpy(out->bytes, er->ipc_event.data, sizeof(out->bytes));
	tileops__reply__free_unpacked(reply, NULL);
	return st;
}

TILEOPS_API tileops_status tileops_event_export(tileops_client *c, tileops_ipc_event *out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventExport body = TILEOPS__EVENT_EXPORT__INIT;
	Tileops__Reply *reply = NULL;
	tileops_status st;

	if (c == NULL || out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_export: %s is NULL",
		                 c == NULL ? "client" : "out");
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_EXPORT;
	req.event_export = &body;
	if ((st = tci_request_call(c, &req, 0, &reply)) != TILEOPS_OK)
		return st;
	return tci_event_reply(
	        "event_export", reply,
	        reply->body_case == TILEOPS__REPLY__BODY_EVENT_EXPORT ? reply->event_export : NULL,
	        out);
}

TILEOPS_API tileops_status tileops_event_record_submit(tileops_client *c, tileops_completion **out)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__EventRecordExported body = TILEOPS__EVENT_RECORD_EXPORTED__INIT;

	if (out == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT, "event_record_submit: out is NULL");
	*out = NULL;
	if (c == NULL)
		return tci_error(TILEOPS_ERR_INVALID_ARGUMENT,
		                 "event_record_submit: client is NULL");
	req.body_case = TILEOPS__REQUEST__BODY_EVENT_RECORD_EXPORTED;
	req.event_record_exported = &body;
	return tci_op_send(c, &req, 0, out);
}
