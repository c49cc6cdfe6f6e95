/*
 * metrics.h - the Prometheus page: GET /metrics over HTTP (nng's HTTP
 * server) when the config's metrics_listen names an address, in the text
 * exposition format 0.0.4, and the roofline ceilings the stats count
 * against.
 *
 * Threading: nng's HTTP threads take the requests; each waits while the
 * loop thread writes the page (through a uv_async), so the page reads the
 * same state, on the same thread, as the stats socket's answer. The loop
 * never waits for HTTP.
 */
#ifndef TILEOPSD_METRICS_H
#define TILEOPSD_METRICS_H

#include "server.h"
#include "stats.h"

/*
 * The stats' roofline ceilings: each configured figure (roofline_* keys,
 * non-zero), else the backend's (be->ops->ceilings). Logged. Before the
 * executor starts.
 */
void metrics_set_roofline(server *srv);

/*
 * Start serving GET /metrics on srv->cfg.metrics_listen (nothing when it
 * is empty). Returns 0, or -1 with a message (the address cannot be
 * listened on). Loop thread, after the loop is initialized.
 */
int metrics_open(server *srv, char *err, size_t errlen);

/* Stop serving: scrapes waiting are refused (503), the HTTP server is
 * stopped, and the loop's handle closed (freed by the loop's next run).
 * Loop thread; a daemon without the page is a no-op. */
void metrics_close(server *srv);

/* The whole page, from the loop thread. */
void metrics_write(server *srv, strbuf *sb);

/* ---- the exposition writer (metrics_write's pieces) ----------------------- */

/* A label value with \, " and newline escaped (no quotes added). */
void prom_label_value(strbuf *sb, const char *s);
/* "# HELP name help" and "# TYPE name type". */
void prom_family(strbuf *sb, const char *name, const char *type, const char *help);
/* One sample: name{labels} value, labels (already escaped, may be "") and
 * an integer value. */
void prom_sample_u64(strbuf *sb, const char *name, const char *labels, uint64_t v);
/* The same with a real value: integral values (sums of integer counts such
 * as bytes and flops) print every digit, never in exponent form. */
void prom_sample(strbuf *sb, const char *name, const char *labels, double v);
/* A histogram copy's samples in seconds: name_bucket{labels,le="..."} (one
 * per bound, cumulative, then +Inf), name_sum and name_count. */
void prom_histogram(strbuf *sb, const char *name, const char *labels, const stats_hist *h);

#endif
