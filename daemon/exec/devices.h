/*
 * devices.h - a session's streams on the devices it uses.
 *
 * Every session has a stream on device 0 (s->stream, made when it opens);
 * one on another device is made when the session first puts work there. A
 * session's work on one device keeps its order there; work on two devices
 * meets only where something orders it: a copy between them waits for
 * both (tensors_copy_pair), and a fence after "everything so far" (a sync, a
 * read, a write) goes on a stream that waits for every stream the session
 * has (devices_fence_stream), so a session that uses one device pays
 * nothing for the others.
 */
#ifndef TILEOPSD_DEVICES_H
#define TILEOPSD_DEVICES_H

#include "worker.h"

/* 1 when `device` is an index of a device the backend serves. */
int devices_valid(const executor *ex, int device);

/* s's stream on `device` (a valid index), made on first use. */
tileops_status devices_stream(executor *ex, session *s, int device, void **stream, char *err,
                              size_t errlen);

/* The stream a fence after all of s's work so far goes on: s->stream
 * while s has used device 0 alone, else its join stream, ordered after
 * every stream s has. */
tileops_status devices_fence_stream(executor *ex, session *s, void **stream, char *err,
                                    size_t errlen);

/* Destroy every stream of s but s->stream (each waits for its work). */
void devices_close_session(executor *ex, session *s);

#endif
