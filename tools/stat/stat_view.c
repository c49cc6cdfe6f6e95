/*
 * stat_view.c - the summary and the --watch frames of tileops-stat.
 *
 * Everything read from a document may be missing (an older daemon) or of
 * the wrong type (a broken one): a missing figure prints as "-". Interval
 * figures are differences between two documents; an op or a session absent
 * from the earlier one appeared during the interval, so all it counted
 * belongs to it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stat_view.h"

/* ---- histograms ----------------------------------------------------------- */

int hist_read(const struct json *lat, struct hist *h)
{
	const struct json *b = json_get(lat, "buckets"), *e;

	h->n = 0;
	if (b == NULL || b->type != JSON_ARRAY)
		return -1;
	for (e = b->child; e != NULL; e = e->next) {
		const struct json *le, *cum;

		if (h->n == HIST_MAX_BUCKETS || e->type != JSON_ARRAY || (le = e->child) == NULL ||
		    (cum = le->next) == NULL || cum->type != JSON_NUMBER || !isfinite(cum->num) ||
		    cum->num < 0)
			goto bad;
		if (le->type == JSON_NULL)
			h->le[h->n] = INFINITY;
		else if (le->type == JSON_NUMBER && isfinite(le->num))
			h->le[h->n] = le->num;
		else
			goto bad;
		h->cum[h->n] = cum->num;
		if (h->n > 0 && (h->le[h->n] <= h->le[h->n - 1] || h->cum[h->n] < h->cum[h->n - 1]))
			goto bad;
		/* Only the last bucket may be +Inf. */
		if (h->n > 0 && isinf(h->le[h->n - 1]))
			goto bad;
		h->n++;
	}
	return h->n > 0 ? 0 : -1;
bad:
	h->n = 0;
	return -1;
}

int hist_delta(const struct hist *now, const struct hist *prev, struct hist *out)
{
	int i, reset = 0;

	if (now->n != prev->n)
		return -1;
	for (i = 0; i < now->n; i++) {
		if (now->le[i] != prev->le[i])
			return -1;
		reset |= now->cum[i] < prev->cum[i];
	}
	*out = *now;
	if (!reset)
		for (i = 0; i < now->n; i++)
			out->cum[i] = now->cum[i] - prev->cum[i];
	return 0;
}

double hist_quantile(const struct hist *h, double q, int *open)
{
	double total, rank, lo, below;
	int i;

	*open = 0;
	if (h->n == 0 || (total = h->cum[h->n - 1]) <= 0)
		return NAN;
	rank = q * total;
	for (i = 0; i < h->n - 1 && h->cum[i] < rank; i++)
		;
	lo = i > 0 ? h->le[i - 1] : 0.0;
	below = i > 0 ? h->cum[i - 1] : 0.0;
	if (isinf(h->le[i])) {
		*open = 1;
		return lo;
	}
	/* A first bucket with a negative bound has nothing below it to interpolate from. */
	if (i == 0 && h->le[0] <= 0)
		return h->le[0];
	return lo + (h->le[i] - lo) * (rank - below) / (h->cum[i] - below);
}

double hist_max_bound(const struct hist *h, int *open)
{
	int i;

	*open = 0;
	if (h->n == 0 || h->cum[h->n - 1] <= 0)
		return NAN;
	/* The first bucket whose cumulative count is the total holds the largest sample. */
	for (i = 0; i < h->n - 1 && h->cum[i] < h->cum[h->n - 1]; i++)
		;
	if (isinf(h->le[i])) {
		*open = 1;
		return i > 0 ? h->le[i - 1] : 0.0;
	}
	return h->le[i];
}

/* ---- formatting ----------------------------------------------------------- */

/* A figure, or "-" when it is not known; open prefixes ">" (a lower bound). */
static const char *fmt(char *buf, size_t len, double v, int prec, int open)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s%.*f", open ? ">" : "", prec, v);
	return buf;
}

/* Microseconds: a decimal below 100 us, whole ones above. */
static const char *fmt_us(char *buf, size_t len, double v, int open)
{
	return fmt(buf, len, v, isfinite(v) && v < 100 ? 1 : 0, open);
}

static void print_bytes(double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (b >= 1024.0 && u < 4) {
		b /= 1024.0;
		u++;
	}
	if (u == 0)
		printf("%.0f B", b);
	else
		printf("%.1f %s", b, unit[u]);
}

/* ---- the one-shot summary ------------------------------------------------- */

static int op_cmp(const void *a, const void *b)
{
	double ta = json_num(*(const struct json *const *)a, "total_time_us");
	double tb = json_num(*(const struct json *const *)b, "total_time_us");

	return (ta < tb) - (ta > tb);
}

/* A percentile the daemon computed, else one from its buckets, else NAN. */
static double op_percentile(const struct json *lat, const char *key, double q, int *open)
{
	struct hist h;
	double v;

	*open = 0;
	if (json_num_opt(lat, key, &v))
		return v;
	if (hist_read(lat, &h) != 0)
		return NAN;
	return hist_quantile(&h, q, open);
}

static void print_ops(const struct json *ops)
{
	const struct json *m;
	const struct json **list;
	size_t n = 0, i;

	for (m = ops != NULL && ops->type == JSON_OBJECT ? ops->child : NULL; m; m = m->next)
		n += m->type == JSON_OBJECT;
	if (n == 0) {
		printf("no ops run yet\n");
		return;
	}
	if ((list = calloc(n, sizeof(*list))) == NULL)
		return;
	for (i = 0, m = ops->child; m != NULL; m = m->next)
		if (m->type == JSON_OBJECT)
			list[i++] = m;
	/* The ops that cost the most time first. */
	qsort(list, n, sizeof(*list), op_cmp);
	printf("%-24s %10s %8s %12s %10s %9s %9s %9s %6s\n", "op", "count", "errors", "total ms",
	       "mean us", "p50 us", "p99 us", "max us", "sol %");
	for (i = 0; i < n; i++) {
		const struct json *lat = json_get(list[i], "latency_us");
		double count = json_num(list[i], "count");
		double us = json_num(list[i], "total_time_us");
		double sol = NAN, mx = NAN;
		char b50[24], b99[24], bmx[24], bsol[24];
		int o50, o99;
		double p50 = op_percentile(lat, "p50", 0.50, &o50);
		double p99 = op_percentile(lat, "p99", 0.99, &o99);

		json_num_opt(lat, "max", &mx);
		if (json_num_opt(list[i], "sol_share", &sol))
			sol *= 100.0;
		printf("%-24s %10.0f %8.0f %12.3f %10.1f %9s %9s %9s %6s\n", list[i]->key, count,
		       json_num(list[i], "errors"), us / 1000.0, count > 0 ? us / count : 0.0,
		       fmt_us(b50, sizeof(b50), p50, o50), fmt_us(b99, sizeof(b99), p99, o99),
		       fmt_us(bmx, sizeof(bmx), mx, 0), fmt(bsol, sizeof(bsol), sol, 1, 0));
	}
	free(list);
}

/*
 * One line per executor thread: how evenly the sessions and the ring ops are
 * spread, what an entry costs it and how much of that is the launch call,
 * and entries that took a millisecond or more (a stalled launch path).
 */
static void print_executor(const struct json *ex)
{
	const struct json *t;

	if (ex == NULL || ex->type != JSON_OBJECT || ex->child == NULL)
		return;
	printf("%-8s %10s %12s %12s %10s %10s %9s %8s\n", "thread", "sessions", "ring ops",
	       "pace waits", "us/op", "us/launch", "slow ops", "sleeps");
	for (t = ex->child; t != NULL; t = t->next) {
		if (t->type != JSON_OBJECT)
			continue;
		double ops = json_num(t, "ring_ops");
		printf("%-8s %10.0f %12.0f %12.0f %10.2f %10.2f %9.0f %8.0f\n", t->key,
		       json_num(t, "sessions"), ops, json_num(t, "pace_waits"),
		       ops > 0 ? json_num(t, "ring_op_us") / ops : 0.0,
		       json_num(t, "launches_timed") > 0
		               ? json_num(t, "launch_us") / json_num(t, "launches_timed")
		               : 0.0,
		       json_num(t, "slow_ops"), json_num(t, "sleeps"));
	}
	putchar('\n');
}

/* One line per device when the daemon serves more than one. */
static void print_devices(const struct json *devices)
{
	if (devices == NULL || devices->type != JSON_ARRAY || devices->child == NULL ||
	    devices->child->next == NULL)
		return;
	for (const struct json *d = devices->child; d != NULL; d = d->next) {
		printf("device %.0f (ordinal %.0f): %s, ", json_num(d, "index"),
		       json_num(d, "ordinal"), json_str(d, "name"));
		print_bytes(json_num(d, "bytes_in_use"));
		printf(" in use\n");
	}
}

void view_summary(const char *text, size_t len)
{
	struct json *doc = json_parse(text, len);

	if (doc == NULL || doc->type != JSON_OBJECT) {
		fprintf(stderr, "tileops-stat: the daemon's stats are not valid JSON; "
		                "printing them as received\n");
		json_free(doc);
		fwrite(text, 1, len, stdout);
		putchar('\n');
		return;
	}
	printf("tileopsd %s, up %.1f s, %s\n", json_str(doc, "version"), json_num(doc, "uptime_s"),
	       json_num(doc, "ready") != 0 ? "ready" : "not ready");
	printf("backend  %s (%s)\n", json_str(doc, "backend"), json_str(doc, "device"));
	printf("sessions %.0f, tensors %.0f, ", json_num(doc, "sessions"),
	       json_num(doc, "tensors"));
	print_bytes(json_num(doc, "bytes_in_use"));
	printf(" in use\n");
	printf("requests %.0f, errors %.0f\n", json_num(doc, "requests"), json_num(doc, "errors"));
	print_devices(json_get(doc, "devices"));
	putchar('\n');
	print_executor(json_get(doc, "executor"));
	print_ops(json_get(doc, "ops"));
	json_free(doc);
}

/* ---- the --watch frames --------------------------------------------------- */

struct rate_row {
	const char *name;
	const char *tenant; /* sessions only */
	double ops_s, err_s, time_us, gbs, tflops, sol;
	double p50, p99, mx;
	int o50, o99, omx;
};

/* Interval percentiles from the buckets of now less those of prev (may be NULL). */
static void row_latency(struct rate_row *r, const struct json *now, const struct json *prev)
{
	struct hist hn, hp, hd;

	r->p50 = r->p99 = r->mx = NAN;
	r->o50 = r->o99 = r->omx = 0;
	if (hist_read(json_get(now, "latency_us"), &hn) != 0)
		return;
	if (prev == NULL) {
		hd = hn;
	} else if (hist_read(json_get(prev, "latency_us"), &hp) != 0) {
		/* The earlier document had no histogram: nothing to subtract from. */
		return;
	} else if (hist_delta(&hn, &hp, &hd) != 0) {
		return;
	}
	r->p50 = hist_quantile(&hd, 0.50, &r->o50);
	r->p99 = hist_quantile(&hd, 0.99, &r->o99);
	r->mx = hist_max_bound(&hd, &r->omx);
}

/* now's member key less prev's (0 when prev is NULL); NAN when now lacks it. */
static double delta(const struct json *now, const struct json *prev, const char *key)
{
	double a, b = 0;

	if (!json_num_opt(now, key, &a))
		return NAN;
	if (prev != NULL && json_num_opt(prev, key, &b) && b > a)
		return a; /* the counter restarted */
	return a - b;
}

/*
 * The share of the speed of light over the interval. sol_share is the
 * roofline time over the measured time of all the timed calls so far, so
 * sol_share * total_time_us is the roofline time so far, and the interval's
 * share is the difference of those over the difference of the times.
 */
static double interval_sol(const struct json *now, const struct json *prev, double dtime)
{
	double sn, sp = 0, tn, tp = 0;
	int have_tp;

	if (!json_num_opt(now, "sol_share", &sn) || !json_num_opt(now, "total_time_us", &tn) ||
	    !(dtime > 0))
		return NAN;
	if (prev != NULL) {
		have_tp = json_num_opt(prev, "total_time_us", &tp);
		if (have_tp && tp > tn) {
			sp = tp = 0; /* the daemon restarted */
		} else if (!json_num_opt(prev, "sol_share", &sp)) {
			/* null before any timed call; after one, the interval's part is unknown */
			if (have_tp && tp > 0)
				return NAN;
			sp = tp = 0;
		}
	}
	double v = (sn * tn - sp * tp) / dtime;
	return v >= 0 ? v : NAN;
}

static void op_row(struct rate_row *r, const struct json *now, const struct json *prev, double dt)
{
	double dcount = delta(now, prev, "count"), dtimed = delta(now, prev, "timed");

	r->name = now->key;
	r->tenant = NULL;
	r->ops_s = dcount / dt;
	r->err_s = delta(now, prev, "errors") / dt;
	r->time_us = delta(now, prev, "total_time_us");
	r->gbs = r->tflops = NAN;
	/*
	 * bytes and flops count every call, the time only the timed ones: the
	 * rate assumes the timed calls stand for the others.
	 */
	if (r->time_us > 0 && dcount > 0 && dtimed > 0) {
		double timed_share = dtimed < dcount ? dtimed / dcount : 1.0;
		double s = r->time_us * 1e-6;

		r->gbs = delta(now, prev, "bytes") * timed_share / s * 1e-9;
		r->tflops = delta(now, prev, "flops") * timed_share / s * 1e-12;
	}
	r->sol = interval_sol(now, prev, r->time_us) * 100.0;
	row_latency(r, now, prev);
}

static enum view_sort sort_key;

static int row_cmp(const void *a, const void *b)
{
	const struct rate_row *x = a, *y = b;
	double kx = sort_key == VIEW_SORT_OPS ? x->ops_s : x->time_us;
	double ky = sort_key == VIEW_SORT_OPS ? y->ops_s : y->time_us;

	kx = isfinite(kx) ? kx : -1;
	ky = isfinite(ky) ? ky : -1;
	if (kx != ky)
		return (kx < ky) - (kx > ky);
	return strcmp(x->name, y->name);
}

static const struct json *find_prev_session(const struct json *prev_list, double id)
{
	const struct json *s;
	double v;

	if (prev_list == NULL || prev_list->type != JSON_ARRAY)
		return NULL;
	for (s = prev_list->child; s != NULL; s = s->next)
		if (json_num_opt(s, "id", &v) && v == id)
			return s;
	return NULL;
}

static void print_op_rows(const struct json *now, const struct json *prev, double dt,
                          enum view_sort sort)
{
	const struct json *ops = json_get(now, "ops"), *pops = json_get(prev, "ops"), *m;
	struct rate_row *rows;
	size_t n = 0, i;
	double total_us = 0;

	for (m = ops != NULL && ops->type == JSON_OBJECT ? ops->child : NULL; m; m = m->next)
		n += m->type == JSON_OBJECT;
	if (n == 0 || (rows = calloc(n, sizeof(*rows))) == NULL) {
		printf("no ops ran\n");
		return;
	}
	n = 0;
	for (m = ops->child; m != NULL; m = m->next) {
		const struct json *p;

		if (m->type != JSON_OBJECT)
			continue;
		p = json_get(pops, m->key);
		op_row(&rows[n], m, p != NULL && p->type == JSON_OBJECT ? p : NULL, dt);
		/* Only the ops that ran (or failed) in the interval. */
		if (!(rows[n].ops_s > 0) && !(rows[n].err_s > 0))
			continue;
		if (rows[n].time_us > 0)
			total_us += rows[n].time_us;
		n++;
	}
	if (n == 0) {
		printf("no ops ran\n");
		free(rows);
		return;
	}
	sort_key = sort;
	qsort(rows, n, sizeof(*rows), row_cmp);
	printf("%-24s %9s %8s %8s %8s %8s %6s %8s %8s %6s\n", "op", "ops/s", "err/s", "p50 us",
	       "p99 us", "max<= us", "time %", "GB/s", "TFLOP/s", "sol %");
	for (i = 0; i < n; i++) {
		const struct rate_row *r = &rows[i];
		char b[9][24];
		double share = total_us > 0 && r->time_us >= 0 ? r->time_us / total_us * 100 : NAN;

		printf("%-24s %9s %8s %8s %8s %8s %6s %8s %8s %6s\n", r->name,
		       fmt(b[0], 24, r->ops_s, 1, 0), fmt(b[1], 24, r->err_s, 1, 0),
		       fmt_us(b[2], 24, r->p50, r->o50), fmt_us(b[3], 24, r->p99, r->o99),
		       fmt_us(b[4], 24, r->mx, r->omx), fmt(b[5], 24, share, 1, 0),
		       fmt(b[6], 24, r->gbs, 1, 0), fmt(b[7], 24, r->tflops, 3, 0),
		       fmt(b[8], 24, r->sol, 1, 0));
	}
	free(rows);
}

static void print_session_rows(const struct json *now, const struct json *prev, double dt)
{
	const struct json *list = json_get(now, "sessions_detail"), *s;
	const struct json *plist = json_get(prev, "sessions_detail");
	int header = 0;

	if (list == NULL || list->type != JSON_ARRAY)
		return;
	for (s = list->child; s != NULL; s = s->next) {
		struct rate_row r;
		const struct json *p = NULL;
		char b[4][24];
		double id;

		if (s->type != JSON_OBJECT)
			continue;
		if (json_num_opt(s, "id", &id))
			p = find_prev_session(plist, id);
		else
			id = NAN;
		r.ops_s = delta(s, p, "ops") / dt;
		row_latency(&r, s, p);
		if (!header) {
			printf("\n%-8s %-20s %-16s %9s %8s %8s\n", "session", "name", "tenant",
			       "ops/s", "p50 us", "p99 us");
			header = 1;
		}
		printf("%-8s %-20.20s %-16.16s %9s %8s %8s\n", fmt(b[0], 24, id, 0, 0),
		       json_str(s, "name"), json_str(s, "tenant"), fmt(b[1], 24, r.ops_s, 1, 0),
		       fmt_us(b[2], 24, r.p50, r.o50), fmt_us(b[3], 24, r.p99, r.o99));
	}
}

void view_frame(const struct json *now, const struct json *prev, double local_s,
                enum view_sort sort)
{
	double up_now, up_prev, dt = local_s;
	int have_up = json_num_opt(now, "uptime_s", &up_now);

	/* A daemon that restarted between the two documents starts from zero. */
	if (prev != NULL && have_up && json_num_opt(prev, "uptime_s", &up_prev) && up_prev > up_now)
		prev = NULL;
	/* The daemon's own clock times the interval when both documents carry it. */
	if (prev == NULL && have_up)
		dt = up_now;
	else if (prev != NULL && have_up && json_num_opt(prev, "uptime_s", &up_prev) &&
	         up_now > up_prev)
		dt = up_now - up_prev;
	if (!(dt > 0))
		dt = 1e-9;
	printf("tileopsd %s, up %.1f s, %s; sessions %.0f, connections %.0f, ",
	       json_str(now, "version"), json_num(now, "uptime_s"),
	       json_num(now, "ready") != 0 ? "ready" : "not ready", json_num(now, "sessions"),
	       json_num(now, "connections"));
	print_bytes(json_num(now, "bytes_in_use"));
	printf(" in use, jobs in flight %.0f\n", json_num(now, "jobs_in_flight"));
	if (prev == NULL)
		printf("since start (%.2f s):\n", dt);
	else
		printf("last %.2f s:\n", dt);
	print_op_rows(now, prev, dt, sort);
	print_session_rows(now, prev, dt);
}
