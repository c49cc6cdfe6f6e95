/*
 * sessions.h - the loop's table of sessions: jobs sent to the executor on
 * their behalf, reaping, and the requests that waited too long for one
 * before them. Loop thread only.
 */
#ifndef TILEOPSD_SESSIONS_H
#define TILEOPSD_SESSIONS_H

#include "server.h"

/* The session of a control connection, or NULL. */
session *sessions_by_pipe(server *srv, uint32_t pipe);
/* Send a job to the executor on behalf of s (takes a session reference;
 * s NULL: a job of no session). */
void sessions_submit(server *srv, session *s, job *j);
/* Close a session: answer what it still holds, free its device memory. */
void session_reap(server *srv, session *s, const char *why);
/* Fail requests that waited too long for a missing seq. */
void sessions_check_gaps(server *srv);

#endif
