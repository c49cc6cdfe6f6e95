/*
 * devices.c - a session's streams on the devices it uses (see devices.h).
 */
#include "devices.h"

#include <stdio.h>

int devices_valid(const executor *ex, int device)
{
	return device >= 0 && device < ex->be->n_devices;
}

tileops_status devices_stream(executor *ex, session *s, int device, void **stream, char *err,
                              size_t errlen)
{
	if (device == 0) {
		*stream = s->stream;
		return TILEOPS_OK;
	}
	if (!s->dev_streams[device]) {
		tileops_status st = ex->be->ops->stream_create(
		        ex->be, device, &s->dev_streams[device], err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	*stream = s->dev_streams[device];
	return TILEOPS_OK;
}

tileops_status devices_fence_stream(executor *ex, session *s, void **stream, char *err,
                                    size_t errlen)
{
	int others = 0;
	for (int d = 1; d < ex->be->n_devices; d++)
		others |= s->dev_streams[d] != NULL;
	if (!others) {
		*stream = s->stream;
		return TILEOPS_OK;
	}
	if (!s->join) {
		tileops_status st = ex->be->ops->stream_create(ex->be, 0, &s->join, err, errlen);
		if (st != TILEOPS_OK)
			return st;
	}
	tileops_status st = ex->be->ops->stream_wait(ex->be, s->join, s->stream, err, errlen);
	for (int d = 1; st == TILEOPS_OK && d < ex->be->n_devices; d++)
		if (s->dev_streams[d])
			st = ex->be->ops->stream_wait(ex->be, s->join, s->dev_streams[d], err,
			                              errlen);
	*stream = s->join;
	return st;
}

void devices_close_session(executor *ex, session *s)
{
	for (int d = 1; d < BACKEND_MAX_DEVICES; d++) {
		if (s->dev_streams[d])
			ex->be->ops->stream_destroy(ex->be, s->dev_streams[d]);
		s->dev_streams[d] = NULL;
	}
	if (s->join)
		ex->be->ops->stream_destroy(ex->be, s->join);
	s->join = NULL;
}
