/*
 * metrics.c - the Prometheus page and the roofline ceilings (see
 * metrics.h).
 */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <nng/supplemental/http/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "transport.h"

/* How long a scrape waits for the loop before it is answered 503. */
#define SCRAPE_WAIT_SECONDS 5

/* ---- roofline ceilings ----------------------------------------------------- */

void metrics_set_roofline(server *srv)
{
	backend_ceilings c = { 0 };
	if (srv->be->ops->ceilings)
		srv->be->ops->ceilings(srv->be, &c);
	double dev[STATS_ROOF_N] = { c.tflops_bf16, c.tflops_fp16, c.tflops_fp32, c.tflops_fp8 };
	stats_roofline r = { .bandwidth_gbs = c.bandwidth_gbs };
	int configured = 0;
	if (srv->cfg.roofline_bandwidth_gbs > 0.0) {
		r.bandwidth_gbs = srv->cfg.roofline_bandwidth_gbs;
		configured = 1;
	}
	for (int i = 0; i < STATS_ROOF_N; i++) {
		r.tflops[i] = dev[i];
		if (srv->cfg.roofline_tflops[i] > 0.0) {
			r.tflops[i] = srv->cfg.roofline_tflops[i];
			configured = 1;
		}
	}
	/* "configured" once any figure is the config's: the rest, if any, are
	 * the device's or measured, as the log line says. */
	snprintf(r.source, sizeof(r.source), "%s",
	         configured ? "configured" : (c.source ? c.source : "device"));
	stats_set_roofline(&srv->st, &r);
	log_info("roofline ceilings (%s%s%s): %.0f GB/s; TFLOP/s bf16 %.0f, fp16 %.0f, fp32 %.1f, "
	         "fp8 %.0f (0: not known)",
	         r.source, configured && c.source ? ", others " : "",
	         configured && c.source ? c.source : "", r.bandwidth_gbs, r.tflops[0], r.tflops[1],
	         r.tflops[2], r.tflops[3]);
}

/* ---- the exposition writer ------------------------------------------------ */

void prom_label_value(strbuf *sb, const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p == '\\')
			sb_printf(sb, "\\\\");
		else if (*p == '"')
			sb_printf(sb, "\\\"");
		else if (*p == '\n')
			sb_printf(sb, "\\n");
		else
			sb_printf(sb, "%c", *p);
	}
}

void prom_family(strbuf *sb, const char *name, const char *type, const char *help)
{
	sb_printf(sb, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_name(strbuf *sb, const char *name, const char *labels)
{
	sb_printf(sb, labels && labels[0] ? "%s{%s} " : "%s ", name, labels);
}

void prom_sample_u64(strbuf *sb, const char *name, const char *labels, uint64_t v)
{
	sample_name(sb, name, labels);
	sb_printf(sb, "%llu\n", (unsigned long long)v);
}

void prom_sample(strbuf *sb, const char *name, const char *labels, double v)
{
	sample_name(sb, name, labels);
	if (isnan(v))
		sb_printf(sb, "NaN\n");
	else if (isinf(v))
		sb_printf(sb, v > 0 ? "+Inf\n" : "-Inf\n");
	else if (v == floor(v) && fabs(v) < 1e18)
		sb_printf(sb, "%.0f\n", v);
	else
		sb_printf(sb, "%.12g\n", v);
}

void prom_histogram(strbuf *sb, const char *name, const char *labels, const stats_hist *h)
{
	const char *sep = labels && labels[0] ? "," : "";
	uint64_t cum = 0;
	for (int i = 0; i < STATS_HIST_BUCKETS; i++) {
		cum += h->buckets[i];
		if (i < STATS_HIST_BOUNDS)
			sb_printf(sb, "%s_bucket{%s%sle=\"%.6g\"} %llu\n", name,
			          labels ? labels : "", sep, stats_hist_le_us[i] * 1e-6,
			          (unsigned long long)cum);
		else
			sb_printf(sb, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name,
			          labels ? labels : "", sep, (unsigned long long)cum);
	}
	char n[160];
	snprintf(n, sizeof(n), "%s_sum", name);
	prom_sample(sb, n, labels, (double)h->sum_ns * 1e-9);
	snprintf(n, sizeof(n), "%s_count", name);
	prom_sample_u64(sb, n, labels, cum);
}

/* ---- the page ------------------------------------------------------------- */

/* Append `key="value"` (the value escaped), after a comma unless sb is empty. */
static void label(strbuf *sb, const char *key, const char *value)
{
	sb_printf(sb, "%s%s=\"", sb->len ? "," : "", key);
	prom_label_value(sb, value);
	sb_printf(sb, "\"");
}

static void write_daemon(server *srv, strbuf *sb)
{
	size_t tensors = 0, bytes = 0;
	for (session *s = srv->sessions; s; s = s->next) {
		tensors += __atomic_load_n(&s->n_tensors, __ATOMIC_RELAXED);
		bytes += __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
	}
	strbuf l = { 0 };
	label(&l, "version", TILEOPS_VERSION);
	label(&l, "backend", srv->be->name);
	label(&l, "device", srv->be->device);
	prom_family(sb, "tileopsd_build_info", "gauge",
	            "Always 1; the labels say the version, the backend and its device.");
	prom_sample_u64(sb, "tileopsd_build_info", l.oom ? "" : l.buf, 1);
	sb_free(&l);
	prom_family(sb, "tileopsd_uptime_seconds", "gauge", "Seconds since tileopsd started.");
	prom_sample(sb, "tileopsd_uptime_seconds", "", clock_now_s() - srv->started_at);
	prom_family(sb, "tileopsd_ready", "gauge",
	            "1 when tileopsd takes work (warm-up done, not stopping), else 0.");
	prom_sample_u64(sb, "tileopsd_ready", "", srv->ready && !srv->stopping);
	prom_family(sb, "tileopsd_device_healthy", "gauge",
	            "1 while the device works, 0 once it failed (tileopsd then restarts).");
	prom_sample_u64(sb, "tileopsd_device_healthy", "", !backend_lost(srv->be, NULL, 0));
	uint64_t requests, errors;
	stats_requests(&srv->st, &requests, &errors);
	prom_family(sb, "tileopsd_requests_total", "counter",
	            "Requests answered, on either plane (control messages and ring entries).");
	prom_sample_u64(sb, "tileopsd_requests_total", "", requests);
	prom_family(sb, "tileopsd_request_errors_total", "counter",
	            "Requests answered with a status other than OK.");
	prom_sample_u64(sb, "tileopsd_request_errors_total", "", errors);
	prom_family(sb, "tileopsd_sessions", "gauge", "Client sessions open.");
	prom_sample_u64(sb, "tileopsd_sessions", "", (uint64_t)srv->n_sessions);
	prom_family(sb, "tileopsd_connections", "gauge", "Control-socket connections.");
	prom_sample_u64(sb, "tileopsd_connections", "",
	                srv->control ? (uint64_t)transport_connections(srv->control) : 0);
	prom_family(sb, "tileopsd_tensors", "gauge", "Tensors the sessions hold.");
	prom_sample_u64(sb, "tileopsd_tensors", "", tensors);
	prom_family(sb, "tileopsd_memory_in_use_bytes", "gauge",
	            "Bytes of the sessions' tensors on the device.");
	prom_sample_u64(sb, "tileopsd_memory_in_use_bytes", "", bytes);
	prom_family(sb, "tileopsd_device_memory_in_use_bytes", "gauge",
	            "Bytes of the sessions' tensors on each device the daemon serves (index: "
	            "what clients name, ordinal: the device's number).");
	for (int d = 0; d < srv->be->n_devices; d++) {
		size_t on = 0;
		for (session *s = srv->sessions; s; s = s->next)
			on += __atomic_load_n(&s->device_bytes[d], __ATOMIC_RELAXED);
		char lab[64];
		snprintf(lab, sizeof(lab), "index=\"%d\",ordinal=\"%d\"", d,
		         srv->be->devices[d].ordinal);
		prom_sample_u64(sb, "tileopsd_device_memory_in_use_bytes", lab, on);
	}
	prom_family(sb, "tileopsd_jobs_in_flight", "gauge",
	            "Control requests and session jobs handed to the executor, not answered yet.");
	prom_sample_u64(sb, "tileopsd_jobs_in_flight", "", srv->jobs_in_flight);
}

typedef void (*op_value_fn)(strbuf *sb, const char *name, const char *labels,
                            const stats_op_view *o);

static void op_count(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_sample_u64(sb, name, l, o->c.count);
}

static void op_errors(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_sample_u64(sb, name, l, o->c.errors);
}

static void op_device(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_sample(sb, name, l, o->c.time_us * 1e-6);
}

static void op_bytes(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_sample(sb, name, l, o->c.bytes);
}

static void op_flops(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_sample(sb, name, l, o->c.flops);
}

static void op_sol(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	if (o->sol_share >= 0.0)
		prom_sample(sb, name, l, o->sol_share);
}

static void op_latency(strbuf *sb, const char *name, const char *l, const stats_op_view *o)
{
	prom_histogram(sb, name, l, &o->c.latency);
}

/* The per-op families, in the order they are written. */
static const struct {
	const char *name, *type, *help;
	op_value_fn value;
} op_families[] = {
	{ "tileopsd_ops_total", "counter",
	  "Ops run as requests (either plane), failed ones included.", op_count },
	{ "tileopsd_op_errors_total", "counter", "Ops refused or failed.", op_errors },
	{ "tileopsd_op_device_seconds_total", "counter",
	  "Device time of the timed ops (every op on the CPU, a sample on the GPU).", op_device },
	{ "tileopsd_op_bytes_total", "counter", "Bytes the ops moved, by their roofline formulas.",
	  op_bytes },
	{ "tileopsd_op_flops_total", "counter",
	  "Floating-point operations of the ops, by their roofline formulas.", op_flops },
	{ "tileopsd_op_speed_of_light_ratio", "gauge",
	  "Roofline time over measured device time of the timed ops (1: at the ceiling; absent "
	  "until known).",
	  op_sol },
	{ "tileopsd_op_latency_seconds", "histogram",
	  "Op requests from received to answered, in the daemon.", op_latency },
};

static void write_ops(server *srv, strbuf *sb)
{
	int n = 0;
	stats_op_view *v = stats_ops_read(&srv->st, &n);
	strbuf *labels = v ? calloc((size_t)(n ? n : 1), sizeof(*labels)) : NULL;
	if (!labels) {
		free(v);
		sb->oom = 1;
		return;
	}
	for (int i = 0; i < n; i++) {
		label(&labels[i], "op", v[i].name);
		sb->oom |= labels[i].oom;
	}
	for (size_t f = 0; !sb->oom && f < sizeof(op_families) / sizeof(op_families[0]); f++) {
		prom_family(sb, op_families[f].name, op_families[f].type, op_families[f].help);
		for (int i = 0; i < n; i++)
			op_families[f].value(sb, op_families[f].name, labels[i].buf, &v[i]);
	}
	for (int i = 0; i < n; i++)
		sb_free(&labels[i]);
	free(labels);
	free(v);
}

/* A session name and tenant with their op latency, sessions of the same
 * pair summed (one series each). */
typedef struct session_series {
	const char *name, *tenant;
	stats_hist h;
} session_series;

static void write_sessions(server *srv, strbuf *sb)
{
	int n = 0, cap = 0;
	session_series *ss = NULL;
	for (session *s = srv->sessions; s; s = s->next) {
		if (!s->opened)
			continue;
		const char *tn = s->tenant ? s->tenant->name : "";
		int k = 0;
		while (k < n && (strcmp(ss[k].name, s->name) || strcmp(ss[k].tenant, tn)))
			k++;
		if (k == n) {
			if (n == cap) {
				int nc = cap ? cap * 2 : 16;
				session_series *g = realloc(ss, sizeof(*ss) * (size_t)nc);
				if (!g) {
					sb->oom = 1;
					break;
				}
				ss = g;
				cap = nc;
			}
			memset(&ss[n], 0, sizeof(ss[n]));
			ss[n].name = s->name;
			ss[n].tenant = tn;
			n++;
		}
		stats_hist_merge(&ss[k].h, &s->op_stats.latency);
	}
	prom_family(sb, "tileopsd_session_op_latency_seconds", "histogram",
	            "Op requests of the open sessions, by client name and tenant, from "
	            "received to answered.");
	for (int k = 0; k < n; k++) {
		strbuf l = { 0 };
		label(&l, "session", ss[k].name);
		label(&l, "tenant", ss[k].tenant);
		if (!l.oom)
			prom_histogram(sb, "tileopsd_session_op_latency_seconds", l.buf, &ss[k].h);
		sb_free(&l);
	}
	free(ss);
}

void metrics_write(server *srv, strbuf *sb)
{
	write_daemon(srv, sb);
	write_ops(srv, sb);
	write_sessions(srv, sb);
}

/* ---- HTTP ----------------------------------------------------------------- */

typedef struct metrics metrics;

typedef enum scrape_state { SCRAPE_QUEUED, SCRAPE_TAKEN, SCRAPE_DONE } scrape_state;

/* One GET waiting on its nng thread (it lives on that thread's stack). */
typedef struct scrape {
	struct scrape *next;
	scrape_state state; /* under metrics.mu */
	strbuf text;
} scrape;

struct metrics {
	server *srv;
	nng_http_server *http;
	uv_async_t wake;
	pthread_mutex_t mu;
	pthread_cond_t cv; /* CLOCK_MONOTONIC */
	scrape *queue;
	int closed;
};

/* Loop thread: write the page for every scrape waiting. */
static void on_wake(uv_async_t *a)
{
	metrics *m = a->data;
	pthread_mutex_lock(&m->mu);
	scrape *q = m->queue;
	m->queue = NULL;
	for (scrape *s = q; s; s = s->next)
		s->state = SCRAPE_TAKEN;
	pthread_mutex_unlock(&m->mu);
	while (q) {
		scrape *next = q->next;
		strbuf text = { 0 };
		metrics_write(m->srv, &text);
		pthread_mutex_lock(&m->mu);
		q->text = text;
		q->state = SCRAPE_DONE;
		pthread_cond_broadcast(&m->cv);
		pthread_mutex_unlock(&m->mu);
		q = next;
	}
}

static void unqueue(metrics *m, scrape *s)
{
	for (scrape **pp = &m->queue; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			return;
		}
	}
}

/* nng HTTP thread: GET /metrics. */
static void on_http(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	metrics *m = nng_http_handler_get_data(h);
	scrape s = { .state = SCRAPE_QUEUED };
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += SCRAPE_WAIT_SECONDS;
	pthread_mutex_lock(&m->mu);
	if (!m->closed) {
		s.next = m->queue;
		m->queue = &s;
		uv_async_send(&m->wake); /* under mu: metrics_close closes it after */
		/* Once the loop took it, it is finished soon (and the loop writes
		 * into s): wait for that without a deadline. */
		int late = 0;
		while (s.state != SCRAPE_DONE &&
		       !(s.state == SCRAPE_QUEUED && (m->closed || late))) {
			if (late)
				pthread_cond_wait(&m->cv, &m->mu);
			else
				late = pthread_cond_timedwait(&m->cv, &m->mu, &until) == ETIMEDOUT;
		}
		if (s.state == SCRAPE_QUEUED)
			unqueue(m, &s);
	}
	pthread_mutex_unlock(&m->mu);

	nng_http_res *res = NULL;
	int ok = s.state == SCRAPE_DONE && !s.text.oom;
	int rv = nng_http_res_alloc(&res);
	if (rv == 0 && ok) {
		rv = nng_http_res_set_header(res, "Content-Type",
		                             "text/plain; version=0.0.4; "
		                             "charset=utf-8");
		if (rv == 0)
			rv = nng_http_res_copy_data(res, s.text.buf ? s.text.buf : "", s.text.len);
	} else if (rv == 0) {
		rv = nng_http_res_set_status(res, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE);
		if (rv == 0)
			rv = nng_http_res_copy_data(res, "tileopsd is busy or stopping\n", 29);
	}
	sb_free(&s.text);
	if (rv != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv);
		return;
	}
	nng_aio_set_output(aio, 0, res);
	nng_aio_finish(aio, 0);
}

static void on_closed(uv_handle_t *h)
{
	metrics *m = h->data;
	pthread_cond_destroy(&m->cv);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

int metrics_open(server *srv, char *err, size_t errlen)
{
	if (!srv->cfg.metrics_listen[0])
		return 0;
	metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "metrics_listen: out of memory");
		return -1;
	}
	m->srv = srv;
	pthread_mutex_init(&m->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cv, &ca);
	pthread_condattr_destroy(&ca);
	nng_url *url = NULL;
	nng_http_handler *h = NULL;
	const char *what = "the address is not a URL";
	int rv = nng_url_parse(&url, srv->cfg.metrics_listen);
	if (rv == 0) {
		what = "cannot make the HTTP server";
		rv = nng_http_server_hold(&m->http, url);
	}
	if (rv == 0) {
		what = "cannot make the /metrics handler";
		rv = nng_http_handler_alloc(&h, "/metrics", on_http);
	}
	if (rv == 0)
		rv = nng_http_handler_set_method(h, "GET");
	if (rv == 0)
		rv = nng_http_handler_set_data(h, m, NULL);
	if (rv == 0)
		rv = nng_http_server_add_handler(m->http, h);
	if (rv == 0) {
		h = NULL; /* the server's now */
		what = "cannot listen";
		rv = nng_http_server_start(m->http);
	}
	if (url)
		nng_url_free(url);
	if (h)
		nng_http_handler_free(h);
	if (rv != 0) {
		snprintf(err, errlen, "metrics_listen: %s on %s: %s", what, srv->cfg.metrics_listen,
		         nng_strerror(rv));
		if (m->http)
			nng_http_server_release(m->http);
		pthread_cond_destroy(&m->cv);
		pthread_mutex_destroy(&m->mu);
		free(m);
		return -1;
	}
	uv_async_init(&srv->loop, &m->wake, on_wake);
	m->wake.data = m;
	srv->metrics = m;
	log_info("metrics: Prometheus page on %s/metrics", srv->cfg.metrics_listen);
	return 0;
}

void metrics_close(server *srv)
{
	metrics *m = srv->metrics;
	if (!m)
		return;
	srv->metrics = NULL;
	pthread_mutex_lock(&m->mu);
	m->closed = 1;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->mu);
	/* Waits for the handlers that are running; none sends a wake-up now. */
	nng_http_server_stop(m->http);
	nng_http_server_release(m->http);
	uv_close((uv_handle_t *)&m->wake, on_closed);
}
