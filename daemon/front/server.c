/*
 * server.c - tileopsd's event loop: start-up, the inbox, signals, the
 * periodic tick, a graceful stop and the teardown.
 */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admission.h"
#include "clock.h"
#include "datadir.h"
#include "handlers.h"
#include "log.h"
#include "manifest.h"
#include "metrics.h"
#include "notify.h"
#include "sessions.h"
#include "tuning.h"
#include "warmup.h"

#define STOP_GRACE_SECONDS 30.0

/* ---- the inbox: events from other threads -------------------------------- */

static void server_post(server *srv, event *ev)
{
	ev->next = NULL;
	pthread_mutex_lock(&srv->inbox_mu);
	if (srv->inbox_tail)
		srv->inbox_tail->next = ev;
	else
		srv->inbox_head = ev;
	srv->inbox_tail = ev;
	pthread_mutex_unlock(&srv->inbox_mu);
	uv_async_send(&srv->wake);
}

static void post_new(server *srv, event_kind kind, tp_worker *w, nng_msg *msg, uint32_t pipe,
                     job *j)
{
	event *ev = calloc(1, sizeof(*ev));
	if (!ev) {
		/* Out of memory on an nng or executor thread: nothing sane is left. */
		log_error("out of memory posting an event; exiting");
		_exit(70);
	}
	ev->kind = kind;
	ev->w = w;
	ev->msg = msg;
	ev->pipe = pipe;
	ev->job = j;
	ev->posted_us = clock_now_us();
	server_post(srv, ev);
}

static void on_control_request(void *ctx, tp_worker *w, nng_msg *msg)
{
	post_new(ctx, EV_REQUEST, w, msg, 0, NULL);
}

static void on_stats_request(void *ctx, tp_worker *w, nng_msg *msg)
{
	nng_msg_free(msg);
	post_new(ctx, EV_STATS, w, NULL, 0, NULL);
}

static void on_pipe_removed(void *ctx, uint32_t pipe)
{
	post_new(ctx, EV_PIPE_GONE, NULL, NULL, pipe, NULL);
}

static void on_job_done(void *ctx, job *j)
{
	post_new(ctx, EV_JOB_DONE, NULL, NULL, 0, j);
}

static void on_device_lost(void *ctx)
{
	post_new(ctx, EV_DEVICE_LOST, NULL, NULL, 0, NULL);
}

static void begin_stop(server *srv, const char *why);

/*
 * Nothing will run on the device again: stop taking work (ready turns
 * false at once), answer what is in flight (it fails with the device's
 * error), and exit non-zero so the service manager starts a fresh daemon.
 */
static void device_lost(server *srv)
{
	char why[256];
	backend_lost(srv->be, why, sizeof(why));
	log_error("the device failed: %s; stopping, exit status %d so the service manager "
	          "restarts tileopsd",
	          why, TILEOPSD_EXIT_DEVICE_LOST);
	srv->ready = 0;
	srv->exit_code = TILEOPSD_EXIT_DEVICE_LOST;
	begin_stop(srv, "device failure");
}

/*
 * nng thread, stats socket: admission (admission.h) decides at the
 * connection, since the stats answer no Hello. The control socket admits
 * everyone the socket file's mode lets in and decides at the Hello, so a
 * refused client gets TILEOPS_ERR_PERMISSION with the rule.
 */
static int allow_stats_peer(void *ctx, uint32_t pipe, uint64_t uid, uint64_t gid, uint64_t pid)
{
	server *srv = ctx;
	gid_t allow = __atomic_load_n(&srv->cfg.allow_gid, __ATOMIC_RELAXED);
	peer p;
	char why[256];
	admission_peer(&p, (int64_t)uid, (int64_t)gid, (int64_t)pid);
	if (admission_allowed(&p, srv->uid, allow, why, sizeof(why)))
		return 1;
	log_warn("stats: refused a connection from pid %lld: %s", (long long)p.pid, why);
	return 0;
}

static void pipe_gone(server *srv, uint32_t pipe)
{
	session *s = sessions_by_pipe(srv, pipe);
	if (s)
		session_reap(srv, s, "client disconnected");
}

static void drain_inbox(server *srv)
{
	pthread_mutex_lock(&srv->inbox_mu);
	event *ev = srv->inbox_head;
	srv->inbox_head = srv->inbox_tail = NULL;
	pthread_mutex_unlock(&srv->inbox_mu);
	while (ev) {
		event *next = ev->next;
		switch (ev->kind) {
		case EV_REQUEST:
			handle_request(srv, ev->w, ev->msg, ev->posted_us);
			break;
		case EV_STATS:
			handle_stats(srv, ev->w);
			break;
		case EV_PIPE_GONE:
			pipe_gone(srv, ev->pipe);
			break;
		case EV_JOB_DONE:
			srv->jobs_in_flight--;
			handle_job_done(srv, ev->job);
			break;
		case EV_DEVICE_LOST:
			device_lost(srv);
			break;
		}
		free(ev);
		ev = next;
	}
}

static void on_wake(uv_async_t *h)
{
	drain_inbox(h->data);
}

/* ---- systemd: readiness and the watchdog (notify.h) --------------------- */

static int server_ops_served; /* in the manifest served now, for STATUS= */
static uv_timer_t server_watchdog;
static int server_watchdog_on;   /* the timer was started */
static int server_watchdog_sick; /* petting is paused; logged when it starts and ends */

static int count_served(const manifest *m)
{
	int n = 0;
	for (int i = 0; i < m->n_ops; i++)
		n += m->ops[i].status == MANIFEST_IMPLEMENTED &&
		     (!m->ops[i].diagnostic || m->serve_diagnostic);
	return n;
}

/* The STATUS= line while serving (systemctl status shows it). */
static void ready_status(const server *srv, char *buf, size_t len)
{
	snprintf(buf, len, "serving %d ops on %s %s, %d warm-up plans", server_ops_served,
	         srv->be->name, srv->be->device, srv->n_warm);
}

/*
 * Whether the daemon deserves a pet. That this runs at all says the loop
 * turns (a loop stuck in a handler or on a lock pets nothing). Then the
 * device must not be lost, and no executor thread may have gone
 * watchdog_stall_ms without finishing anything while it owed work
 * (executor_stalled_us): a request that never returns or a device that
 * completes nothing. Heavy load cannot look like that, since a loaded
 * thread finishes work all the time; only one request longer than the
 * limit can. Client behaviour cannot either: nothing an executor thread
 * owes waits on a client (a full completion ring fails the request).
 */
static int server_healthy(server *srv, char *why, size_t len)
{
	if (backend_lost(srv->be, NULL, 0)) {
		snprintf(why, len, "the device is lost");
		return 0;
	}
	if (srv->cfg.watchdog_stall_ms > 0) {
		int thread = 0;
		double us = executor_stalled_us(srv->ex, &thread);
		if (us > srv->cfg.watchdog_stall_ms * 1e3) {
			snprintf(why, len,
			         "executor thread %d has finished nothing for %.1f s while it owes "
			         "work (watchdog_stall_ms = %d)",
			         thread, us * 1e-6, srv->cfg.watchdog_stall_ms);
			return 0;
		}
	}
	return 1;
}

static void on_watchdog(uv_timer_t *h)
{
	server *srv = h->data;
	char why[256], status[256];
	if (server_healthy(srv, why, sizeof(why))) {
		if (server_watchdog_sick) {
			log_info("watchdog: healthy again, petting resumed");
			ready_status(srv, status, sizeof(status));
			notify_status(status);
		}
		server_watchdog_sick = 0;
		notify_watchdog();
		return;
	}
	if (!server_watchdog_sick) {
		log_error("watchdog: %s; no longer petting systemd's watchdog, which restarts "
		          "tileopsd unless this clears within WatchdogSec",
		          why);
		notify_status(why);
	}
	server_watchdog_sick = 1;
}

/* Pet at half the interval systemd asked for, as sd_watchdog_enabled(3) advises. */
static void start_watchdog(server *srv)
{
	uint64_t usec = notify_watchdog_usec();
	if (!usec)
		return;
	uint64_t ms = usec / 2000 ? usec / 2000 : 1;
	uv_timer_init(&srv->loop, &server_watchdog);
	server_watchdog.data = srv;
	uv_timer_start(&server_watchdog, on_watchdog, ms, ms);
	server_watchdog_on = 1;
	log_info("systemd watchdog: every %llu ms (WATCHDOG_USEC=%llu), executor stall limit "
	         "%d ms",
	         (unsigned long long)ms, (unsigned long long)usec, srv->cfg.watchdog_stall_ms);
}

/* ---- signals and the tick ----------------------------------------------- */

static void begin_stop(server *srv, const char *why)
{
	if (srv->stopping)
		return;
	log_info("%s: stopping (no new connections; finishing work in flight)", why);
	char status[400], lost[256];
	if (srv->be && backend_lost(srv->be, lost, sizeof(lost)))
		snprintf(status, sizeof(status),
		         "stopping on a %s (%s); exit status %d for a restart", why, lost,
		         TILEOPSD_EXIT_DEVICE_LOST);
	else
		snprintf(status, sizeof(status), "stopping on %s: finishing work in flight", why);
	notify_stopping(status);
	srv->stopping = 1;
	srv->stop_deadline = clock_now_s() + STOP_GRACE_SECONDS;
	transport_stop_listening(srv->control);
}

static void on_stop_signal(uv_signal_t *h, int signum)
{
	begin_stop(h->data, signum == SIGINT ? "SIGINT" : "SIGTERM");
}

static int reload(server *srv, char *why, size_t whylen)
{
	if (!srv->cfg.config_file[0]) {
		log_info("SIGHUP: no config file to reload; reloading the manifest only");
	} else {
		config next = srv->cfg;
		char err[512];
		if (config_load_file(&next, srv->cfg.config_file, err, sizeof(err)) != 0) {
			log_error("SIGHUP: %s; keeping the running config", err);
			snprintf(why, whylen, "%s", err);
			return -1;
		}
		if (strcmp(next.listen, srv->cfg.listen) ||
		    strcmp(next.stats_listen, srv->cfg.stats_listen) ||
		    next.backend != srv->cfg.backend || next.n_devices != srv->cfg.n_devices ||
		    memcmp(next.devices, srv->cfg.devices, sizeof(int) * (size_t)next.n_devices) !=
		            0 ||
		    next.contexts != srv->cfg.contexts ||
		    next.max_message_bytes != srv->cfg.max_message_bytes)
			log_warn("SIGHUP: listen, stats_listen, backend, devices, contexts and "
			         "max_message_bytes change only on restart");
		srv->cfg.log_level = next.log_level;
		__atomic_store_n(&srv->cfg.allow_gid, next.allow_gid, __ATOMIC_RELAXED);
		__atomic_store_n(&srv->cfg.session_memory_limit, next.session_memory_limit,
		                 __ATOMIC_RELAXED);
		srv->cfg.max_sessions = next.max_sessions;
		srv->cfg.max_pending = next.max_pending;
		srv->cfg.max_arena_bytes = next.max_arena_bytes;
		snprintf(srv->cfg.manifest, sizeof(srv->cfg.manifest), "%s", next.manifest);
		log_set_level((log_level)srv->cfg.log_level);
	}
	manifest *m = NULL;
	char err[1024];
	if (manifest_load(srv->cfg.manifest, &m, err, sizeof(err)) != 0) {
		log_error("SIGHUP: manifest %s is invalid, keeping the loaded one: %s",
		          srv->cfg.manifest, err);
		snprintf(why, whylen, "manifest %s is invalid", srv->cfg.manifest);
		return -1;
	}
	m->serve_diagnostic = srv->cfg.diagnostic_ops;
	server_ops_served = count_served(m);
	/* The executor threads read the manifest during their passes: the swap
	 * waits for the passes in progress, then the old one is no one's. */
	manifest_free(executor_swap_manifest(srv->ex, m));
	log_info("SIGHUP: config and manifest reloaded");
	return 0;
}

/* RELOADING=1, the reload, then READY=1 again, whether it worked or the
 * running config was kept (the daemon serves either way). */
static void on_hup(uv_signal_t *h, int signum)
{
	server *srv = h->data;
	char why[600] = "", status[900];
	int notify = !srv->stopping; /* after STOPPING=1 the manager expects no READY=1 */
	if (notify)
		notify_reloading("reloading the config and the manifest");
	int failed = reload(srv, why, sizeof(why)) != 0;
	if (!notify)
		return;
	if (failed) {
		char serving[256];
		ready_status(srv, serving, sizeof(serving));
		snprintf(status, sizeof(status),
		         "reload failed, kept the running config (%.400s); %s", why, serving);
	} else {
		ready_status(srv, status, sizeof(status));
	}
	notify_ready(status);
}

static void on_tick(uv_timer_t *h)
{
	server *srv = h->data;
	sessions_check_gaps(srv);
	if (!srv->stopping)
		return;
	int idle = srv->jobs_in_flight == 0 && transport_busy(srv->control) == 0;
	if (idle || clock_now_s() > srv->stop_deadline) {
		if (!idle)
			log_warn("stop: work still in flight after %.0f s; stopping anyway",
			         STOP_GRACE_SECONDS);
		uv_stop(&srv->loop);
	}
}

/* ---- start, run, finish ------------------------------------------------- */

static int write_ready_file(const char *path, char *err, size_t errlen)
{
	char tmp[CONFIG_PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) != 0) {
		snprintf(err, errlen, "cannot write the ready file %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int open_control_socket(server *srv, char *err, size_t errlen)
{
	if (config_prepare_ipc_dir(srv->cfg.listen, err, errlen) != 0)
		return -1;
	/* Before the socket exists: a client that finds the socket finds the
	 * arena folder beside it too. */
	char adir[CONFIG_PATH_MAX], note[CONFIG_PATH_MAX + 128];
	if (config_arena_dir(&srv->cfg, adir, sizeof(adir))) {
		if (arena_dir_prepare(adir, srv->cfg.allow_gid, note, sizeof(note), err, errlen))
			return -1;
		if (note[0])
			log_warn("%s", note);
	}
	transport_callbacks cb = {
		.on_request = on_control_request,
		.on_pipe_removed = on_pipe_removed,
		.ctx = srv,
	};
	transport_options opt = {
		.address = srv->cfg.listen,
		.workers = srv->cfg.contexts,
		.max_workers = srv->cfg.max_contexts,
		.max_pipes = srv->cfg.max_connections,
		.max_message_bytes = srv->cfg.max_message_bytes,
		.socket_mode = srv->cfg.socket_mode,
	};
	srv->control = transport_open(&opt, &cb, err, errlen);
	return srv->control ? 0 : -1;
}

static int open_stats_socket(server *srv, char *err, size_t errlen)
{
	if (config_prepare_ipc_dir(srv->cfg.stats_listen, err, errlen) != 0)
		return -1;
	transport_callbacks scb = {
		.on_request = on_stats_request,
		.allow_peer = allow_stats_peer,
		.ctx = srv,
	};
	transport_options sopt = {
		.address = srv->cfg.stats_listen,
		.workers = 4,
		.max_workers = 64,
		.max_pipes = 256,
		.max_message_bytes = 4096,
		.socket_mode = srv->cfg.socket_mode,
	};
	srv->stats_tp = transport_open(&sopt, &scb, err, errlen);
	return srv->stats_tp ? 0 : -1;
}

/* ---- warm-up ------------------------------------------------------------ */

/*
 * Capture the warm-up plans, each in an internal session of its tenant, and
 * wait for them (answering stats requests meanwhile). A plan that cannot be
 * made stops the start, as an invalid manifest does.
 */
static int run_warmup(server *srv, char *err, size_t errlen)
{
	if (!srv->cfg.warmup[0])
		return 0;
	if (warmup_load(srv->cfg.warmup, &srv->warm, err, errlen) != 0)
		return -1;
	int n = srv->warm->n_plans;
	srv->warm_sessions = calloc((size_t)n + 1, sizeof(*srv->warm_sessions));
	if (!srv->warm_sessions) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	double t0 = clock_now_s();
	for (int i = 0; i < n; i++) {
		session *s = session_new(srv->next_session_id++, 0);
		job *j = calloc(1, sizeof(*j));
		if (!s || !j) {
			session_unref(s);
			free(j);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		s->internal = 1;
		s->uid = (int64_t)srv->uid;
		s->worker = executor_pick_worker(srv->ex, s->id);
		snprintf(s->name, sizeof(s->name), "warm-up %.50s", srv->warm->plans[i].name);
		srv->warm_sessions[srv->n_warm++] = s;
		j->kind = JOB_WARMUP;
		j->warm = &srv->warm->plans[i];
		srv->warm_pending++;
		sessions_submit(srv, s, j);
	}
	while (srv->warm_pending > 0) {
		uv_run(&srv->loop, UV_RUN_NOWAIT);
		drain_inbox(srv);
		if (srv->warm_pending > 0)
			usleep(1000);
	}
	if (srv->warm_error[0]) {
		snprintf(err, errlen, "%s", srv->warm_error);
		return -1;
	}
	log_info("warm-up: %d plans captured in %.1f ms", n, (clock_now_s() - t0) * 1e3);
	return 0;
}

/*
 * The tuning table (daemon/policy/tuning.h), one per daemon: the cache file
 * when it exists (tileops-tune or first-use tuning wrote it), else the
 * table shipped for the H200, else none (every kernel's built-in choice).
 * A malformed file refuses the start. The executor applies it.
 */
static tuning *server_tuning;

/*
 * The file the tuning table comes from into path: the cache file when it
 * is readable, else the shipped table (beside the executable or as
 * installed, datadir.h). 0, or -1 when there is neither; looked then
 * says where it looked.
 */
static int tuning_file(const config *cfg, char *path, size_t len, char *looked, size_t looked_len)
{
	char where[2048];
	if (access(cfg->gemm_tune_cache, R_OK) == 0) {
		snprintf(path, len, "%s", cfg->gemm_tune_cache);
		return 0;
	}
	if (datadir_find("gemm-tune-h200.txt", path, len, where, sizeof(where)) == 0)
		return 0;
	snprintf(looked, looked_len, "%s, %s", cfg->gemm_tune_cache, where);
	return -1;
}

static int load_tuning(const config *cfg, char *err, size_t errlen)
{
	char gpu[160], note[1024] = "", path[4096], looked[4096];
	const char *first_use = cfg->gemm_tune == GEMM_TUNE_FIRST_USE ? "on" : "off";

	if (tk_cuda_device_id(cfg->devices[0], gpu, sizeof(gpu)) != TK_OK ||
	    !(server_tuning = tuning_new(gpu))) {
		snprintf(err, errlen, "tuning table: no device name or no memory");
		return -1;
	}
	tuning_first_use(server_tuning, cfg->gemm_tune == GEMM_TUNE_FIRST_USE,
	                 cfg->gemm_tune_cache);
	if (tuning_file(cfg, path, sizeof(path), looked, sizeof(looked)) != 0) {
		log_info("tuning table: none found (looked for %s): built-in choices; first-use "
		         "tuning %s",
		         looked, first_use);
		return 0;
	}
	if (tuning_load(server_tuning, path, note, sizeof(note)) != TILEOPS_OK) {
		snprintf(err, errlen, "tuning table: %s", note);
		return -1;
	}
	log_info("tuning table: %d entries from %s for gpu=%s%s%s; first-use tuning %s",
	         tuning_count(server_tuning), path, gpu, note[0] ? ": " : "", note, first_use);
	return 0;
}

/* The CPU kernels have nothing to tune; the log still names the file a GPU start reads. */
static void log_tuning_unused(const config *cfg)
{
	char path[4096], looked[4096];
	if (tuning_file(cfg, path, sizeof(path), looked, sizeof(looked)) == 0)
		log_info("tuning table: not used by the CPU backend (a GPU start reads %s)", path);
	else
		log_info("tuning table: not used by the CPU backend (none found: looked for %s)",
		         looked);
}

int server_start(server *srv, char *err, size_t errlen)
{
	srv->uid = getuid();
	srv->started_at = clock_now_s();
	srv->next_session_id = 1;
	srv->next_handle = 1;
	pthread_mutex_init(&srv->inbox_mu, NULL);
	if (arena_global_init() != 0) {
		snprintf(err, errlen, "cannot install the SIGBUS handler");
		return -1;
	}
	manifest *mf = NULL;
	if (manifest_load(srv->cfg.manifest, &mf, err, errlen) != 0)
		return -1;
	mf->serve_diagnostic = srv->cfg.diagnostic_ops;
	server_ops_served = count_served(mf);
	if (srv->cfg.diagnostic_ops)
		log_info("serving the diagnostic ops (diagnostic_ops = on)");
	backend_options bo = { .n_devices = srv->cfg.n_devices, .queues = srv->cfg.device_queues };
	memcpy(bo.devices, srv->cfg.devices, sizeof(bo.devices));
	srv->be = backend_open(srv->cfg.backend, &bo, err, errlen);
	if (!srv->be) {
		manifest_free(mf);
		return -1;
	}
	if (!srv->be->is_gpu)
		log_tuning_unused(&srv->cfg);
	else if (load_tuning(&srv->cfg, err, errlen) != 0) {
		manifest_free(mf);
		return -1;
	}
	/* Before any launch: the kernels read the setting at every launch. */
	tk_cuda_set_pdl(srv->cfg.pdl);
	if (srv->be->is_gpu)
		log_info("programmatic dependent launch %s (pdl)", srv->cfg.pdl ? "on" : "off");
	int threads = srv->cfg.executor_threads > 0 ? srv->cfg.executor_threads
	                                            : (srv->be->is_gpu ? 8 : 1);
	if (stats_init(&srv->st, threads) != 0) {
		snprintf(err, errlen, "out of memory");
		manifest_free(mf);
		return -1;
	}
	metrics_set_roofline(srv);
	executor_config ec = {
		.be = srv->be,
		.st = &srv->st,
		.mf = mf,
		.memory_limit = &srv->cfg.session_memory_limit,
		.spin_us = srv->cfg.ring_spin_us,
		.ring_batch = srv->cfg.ring_batch,
		.stats_sample = srv->cfg.stats_sample,
		.pace = srv->cfg.executor_pace,
		.queue_us = srv->cfg.session_queue_us,
		.threads = threads,
		.cpus = srv->cfg.executor_cpus,
		.n_cpus = srv->cfg.n_executor_cpus,
		.default_quota = srv->cfg.default_quota,
		.tenants = srv->cfg.tenants,
		.n_tenants = srv->cfg.n_tenants,
		.tuning = server_tuning,
		.done = on_job_done,
		.device_lost = on_device_lost,
		.ctx = srv,
	};
	srv->ex = executor_start(&ec, err, errlen);
	if (!srv->ex) {
		manifest_free(mf);
		return -1;
	}

	uv_loop_init(&srv->loop);
	uv_async_init(&srv->loop, &srv->wake, on_wake);
	srv->wake.data = srv;
	uv_signal_init(&srv->loop, &srv->sig_int);
	uv_signal_init(&srv->loop, &srv->sig_term);
	uv_signal_init(&srv->loop, &srv->sig_hup);
	srv->sig_int.data = srv->sig_term.data = srv->sig_hup.data = srv;
	uv_signal_start(&srv->sig_int, on_stop_signal, SIGINT);
	uv_signal_start(&srv->sig_term, on_stop_signal, SIGTERM);
	uv_signal_start(&srv->sig_hup, on_hup, SIGHUP);
	uv_timer_init(&srv->loop, &srv->tick);
	srv->tick.data = srv;
	uv_timer_start(&srv->tick, on_tick, 100, 100);
	/* A client that dies mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);

	/* Stats first, so operators see "ready": false while plans warm up;
	 * clients can connect once they are captured. */
	if (open_stats_socket(srv, err, errlen) != 0 || metrics_open(srv, err, errlen) != 0 ||
	    run_warmup(srv, err, errlen) != 0 || open_control_socket(srv, err, errlen) != 0)
		return -1;
	srv->ready = 1;
	if (srv->cfg.ready_file[0] && write_ready_file(srv->cfg.ready_file, err, errlen) != 0)
		return -1;
	log_info("tileopsd %s serving on %s (stats %s), backend %s: %s, %d executor thread%s",
	         TILEOPS_VERSION, srv->cfg.listen, srv->cfg.stats_listen, srv->be->name,
	         srv->be->device, ec.threads, ec.threads == 1 ? "" : "s");
	/* READY=1 only now: warm-up plans are captured and both sockets take
	 * clients, so systemd's "started" means what the ready file means. */
	char status[256];
	ready_status(srv, status, sizeof(status));
	notify_ready(status);
	start_watchdog(srv);
	return 0;
}

void server_run(server *srv)
{
	uv_run(&srv->loop, UV_RUN_DEFAULT);
}

static void close_cb(uv_handle_t *h)
{
}

void server_finish(server *srv)
{
	metrics_close(srv); /* scrapes would wait for a loop that no longer runs */
	/* Answer what is still held, free every session's device memory, then let
	 * the executor finish its queue; its last answers go out before the
	 * sockets close. */
	while (srv->sessions)
		session_reap(srv, srv->sessions, "daemon stopping");
	for (int i = 0; i < srv->n_warm; i++)
		session_reap(srv, srv->warm_sessions[i], "daemon stopping");
	if (srv->ex) {
		while (srv->jobs_in_flight > 0) {
			drain_inbox(srv);
			if (srv->jobs_in_flight > 0)
				usleep(1000);
		}
		executor_stop(srv->ex);
		srv->ex = NULL;
	}
	tuning_free(server_tuning); /* no executor thread is left to use it */
	server_tuning = NULL;
	drain_inbox(srv);
	transport_close(srv->control);
	transport_close(srv->stats_tp);
	srv->control = srv->stats_tp = NULL;
	drain_inbox(srv);
	if (srv->wake.loop) {
		uv_close((uv_handle_t *)&srv->wake, close_cb);
		uv_close((uv_handle_t *)&srv->sig_int, close_cb);
		uv_close((uv_handle_t *)&srv->sig_term, close_cb);
		uv_close((uv_handle_t *)&srv->sig_hup, close_cb);
		uv_close((uv_handle_t *)&srv->tick, close_cb);
		if (server_watchdog_on)
			uv_close((uv_handle_t *)&server_watchdog, close_cb);
		server_watchdog_on = 0;
		uv_run(&srv->loop, UV_RUN_DEFAULT);
		uv_loop_close(&srv->loop);
	}
	backend_close(srv->be);
	srv->be = NULL;
	free(srv->warm_sessions);
	srv->warm_sessions = NULL;
	warmup_free(srv->warm);
	srv->warm = NULL;
	stats_destroy(&srv->st);
	if (srv->cfg.ready_file[0])
		unlink(srv->cfg.ready_file);
	pthread_mutex_destroy(&srv->inbox_mu);
}
