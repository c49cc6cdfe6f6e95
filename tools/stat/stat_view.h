/*
 * stat_view.h - what tileops-stat prints from the daemon's stats documents:
 * the one-shot summary and the frames of --watch.
 */
#ifndef TILEOPS_STAT_VIEW_H
#define TILEOPS_STAT_VIEW_H

#include "stat_json.h"

/* The most buckets a latency histogram may have; a longer one is ignored. */
#define HIST_MAX_BUCKETS 64

/*
 * A latency histogram as the stats carry it: le[i] ascending (the last one
 * INFINITY for the +Inf bucket) and cum[i] the samples <= le[i], so cum[n-1]
 * is the count.
 */
struct hist {
	int n;
	double le[HIST_MAX_BUCKETS];
	double cum[HIST_MAX_BUCKETS];
};

/*
 * Read lat ({"buckets": [[le_us, cumulative], ...], ...}) into h. Returns 0,
 * or -1 when it is absent or malformed (bounds not ascending, counts falling,
 * too many buckets), in which case the caller prints "-".
 */
int hist_read(const struct json *lat, struct hist *h);

/*
 * out = now - prev bucket by bucket. Returns 0, or -1 when the two have
 * different bounds. A count that fell (the daemon restarted) makes out a copy
 * of now: what was counted since the restart.
 */
int hist_delta(const struct hist *now, const struct hist *prev, struct hist *out);

/*
 * The q-quantile (0 < q <= 1), interpolated linearly within the bucket that
 * holds it, as Prometheus's histogram_quantile does. NAN when h is empty.
 * When it falls in the +Inf bucket the result is the largest finite bound and
 * *open is set (print it as "> bound").
 */
double hist_quantile(const struct hist *h, double q, int *open);

/*
 * The upper bound of the highest bucket holding a sample: no sample of h is
 * larger. NAN when h is empty; the +Inf bucket gives the largest finite bound
 * with *open set.
 */
double hist_max_bound(const struct hist *h, int *open);

enum view_sort { VIEW_SORT_TIME, VIEW_SORT_OPS };

/* The one-shot summary of one document (text[len] must be a NUL). */
void view_summary(const char *text, size_t len);

/*
 * One frame of --watch: the daemon line, a row per op that ran between prev
 * and now, and a block of the live sessions. prev NULL means since the daemon
 * started (rates over its uptime). local_s is the time between the two
 * fetches by this process's clock, used when the documents carry no uptime.
 */
void view_frame(const struct json *now, const struct json *prev, double local_s,
                enum view_sort sort);

#endif
