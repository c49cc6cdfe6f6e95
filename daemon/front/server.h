/*
 * server.h - tileopsd's state and its event loop.
 *
 * The libuv loop thread owns everything here except the device (executor).
 * nng threads and the executor never touch this state: they post events to
 * the inbox and wake the loop with uv_async_send, which coalesces wake-ups,
 * so the loop drains the whole inbox each time.
 */
#ifndef TILEOPSD_SERVER_H
#define TILEOPSD_SERVER_H

#include <nng/nng.h>
#include <pthread.h>
#include <uv.h>

#include "backend.h"
#include "config.h"
#include "executor.h"
#include "session.h"
#include "stats.h"
#include "transport.h"

typedef enum event_kind {
	EV_REQUEST,    /* a control request (w, msg) */
	EV_STATS,      /* a stats request (w) */
	EV_PIPE_GONE,  /* a control connection closed (pipe) */
	EV_JOB_DONE,   /* the executor finished a job */
	EV_DEVICE_LOST /* the backend's device state is lost */
} event_kind;

typedef struct event {
	event_kind kind;
	struct event *next;
	tp_worker *w;
	nng_msg *msg;
	uint32_t pipe;
	job *job;
	double posted_us; /* when it was posted (a request's latency starts here) */
} event;

typedef struct server {
	config cfg;
	uv_loop_t loop;
	uv_async_t wake;
	uv_signal_t sig_int, sig_term, sig_hup;
	uv_timer_t tick;
	pthread_mutex_t inbox_mu;
	event *inbox_head, *inbox_tail;

	backend *be;
	executor *ex;
	transport *control;
	transport *stats_tp;
	stats st;
	struct metrics *metrics; /* the Prometheus page (metrics.h); NULL when off */

	session *sessions;
	int n_sessions;
	/* Warm-up plans: their internal sessions, and how the start is going. */
	struct warm_spec *warm;
	session **warm_sessions;
	int n_warm;
	int warm_pending;
	char warm_error[600];
	int ready;
	uint64_t next_session_id;
	uint64_t next_handle;
	size_t jobs_in_flight;
	double started_at;
	int stopping;
	double stop_deadline;
	int exit_code;
	uid_t uid;
} server;

/* The exit status after the device was lost (sysexits' EX_TEMPFAIL): not 0,
 * so systemd's Restart=on-failure and a Kubernetes restart policy restart it. */
#define TILEOPSD_EXIT_DEVICE_LOST 75

/* Set up everything from srv->cfg (already filled). Returns 0 or -1 + message. */
int server_start(server *srv, char *err, size_t errlen);
/* Run the loop until a stop signal has been handled. */
void server_run(server *srv);
/* Tear down: finish queued work, free sessions, close sockets. */
void server_finish(server *srv);

#endif
