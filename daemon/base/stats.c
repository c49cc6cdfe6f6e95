/* stats.c - per-op counters and JSON (see stats.h). */
#include "stats.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tileops_kernels.h"

static _Thread_local int stats_thread_shard;

/* ---- latency histograms ---------------------------------------------------- */

#define R10(d) 1 * d, 1.25 * d, 1.6 * d, 2 * d, 2.5 * d, 3.15 * d, 4 * d, 5 * d, 6.3 * d, 8 * d
const double stats_hist_le_us[STATS_HIST_BOUNDS] = { R10(1.0), R10(1e1), R10(1e2), R10(1e3),
	                                             R10(1e4), R10(1e5), R10(1e6), 1e7 };
#undef R10

int stats_hist_bucket(double us)
{
	int lo = 0, hi = STATS_HIST_BOUNDS; /* the answer is in [lo, hi] */
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (us <= stats_hist_le_us[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void stats_hist_record(stats_hist *h, double us)
{
	if (!(us >= 0.0)) /* a clock step back, or NaN */
		us = 0.0;
	uint64_t ns = us < 1.8e13 ? (uint64_t)(us * 1e3 + 0.5) : UINT64_C(1) << 63;
	__atomic_fetch_add(&h->buckets[stats_hist_bucket(us)], 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->sum_ns, ns, __ATOMIC_RELAXED);
	uint64_t max = __atomic_load_n(&h->max_ns, __ATOMIC_RELAXED);
	while (ns > max && !__atomic_compare_exchange_n(&h->max_ns, &max, ns, 1, __ATOMIC_RELAXED,
	                                                __ATOMIC_RELAXED))
		;
}

void stats_hist_merge(stats_hist *into, const stats_hist *h)
{
	for (int i = 0; i < STATS_HIST_BUCKETS; i++)
		into->buckets[i] += __atomic_load_n(&h->buckets[i], __ATOMIC_RELAXED);
	into->sum_ns += __atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED);
	uint64_t max = __atomic_load_n(&h->max_ns, __ATOMIC_RELAXED);
	if (max > into->max_ns)
		into->max_ns = max;
}

uint64_t stats_hist_count(const stats_hist *h)
{
	uint64_t n = 0;
	for (int i = 0; i < STATS_HIST_BUCKETS; i++)
		n += h->buckets[i];
	return n;
}

double stats_hist_quantile(const stats_hist *h, double q)
{
	uint64_t n = stats_hist_count(h);
	double max = (double)h->max_ns * 1e-3;
	if (n == 0)
		return 0.0;
	double rank = q * (double)n, below = 0.0;
	for (int i = 0; i < STATS_HIST_BUCKETS; i++) {
		double in = (double)h->buckets[i];
		if (in == 0.0 || below + in < rank) {
			below += in;
			continue;
		}
		double lo = i ? stats_hist_le_us[i - 1] : 0.0;
		double hi = i < STATS_HIST_BOUNDS ? stats_hist_le_us[i] : max;
		if (hi > max)
			hi = max;
		if (lo > hi)
			lo = hi;
		return lo + (hi - lo) * (rank - below) / in;
	}
	return max;
}

void stats_session_op(stats_session *ss, int failed, double us)
{
	__atomic_fetch_add(&ss->ops, 1, __ATOMIC_RELAXED);
	if (failed)
		__atomic_fetch_add(&ss->errors, 1, __ATOMIC_RELAXED);
	stats_hist_record(&ss->latency, us);
}

/* ---- op slots ------------------------------------------------------------- */

int stats_init(stats *st, int n_shards)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->mu, NULL);
	st->n_shards = n_shards > 0 ? n_shards : 1;
	st->shards = calloc((size_t)st->n_shards, sizeof(*st->shards));
	if (!st->shards)
		return -1;
	for (int i = 0; i < st->n_shards; i++)
		pthread_mutex_init(&st->shards[i].mu, NULL);
	return 0;
}

void stats_destroy(stats *st)
{
	for (int i = 0; st->shards && i < st->n_shards; i++)
		pthread_mutex_destroy(&st->shards[i].mu);
	free(st->shards);
	st->shards = NULL;
	pthread_mutex_destroy(&st->mu);
}

void stats_set_thread_shard(int i)
{
	stats_thread_shard = i;
}

static int find_slot(const stats *st, int from, int to, const char *name)
{
	for (int i = from; i < to; i++)
		if (strcmp(st->names[i], name) == 0)
			return i;
	return -1;
}

int stats_op_slot(stats *st, const char *name)
{
	/* Names are written before n_ops is published, and never change. */
	int n = __atomic_load_n(&st->n_ops, __ATOMIC_ACQUIRE);
	int slot = find_slot(st, 0, n, name);
	if (slot >= 0)
		return slot;
	pthread_mutex_lock(&st->mu);
	slot = find_slot(st, n, st->n_ops, name);
	if (slot < 0 && st->n_ops < STATS_MAX_OPS) {
		slot = st->n_ops;
		snprintf(st->names[slot], sizeof(st->names[slot]), "%s", name);
		__atomic_store_n(&st->n_ops, slot + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&st->mu);
	return slot;
}

static stats_shard *my_shard(stats *st)
{
	int i = stats_thread_shard;
	return &st->shards[i >= 0 && i < st->n_shards ? i : 0];
}

void stats_set_roofline(stats *st, const stats_roofline *r)
{
	st->roof = *r;
}

static int roof_class(int dtype)
{
	switch (dtype) {
	case TK_BF16:
		return STATS_ROOF_BF16;
	case TK_F16:
		return STATS_ROOF_FP16;
	case TK_FP8_E4M3:
		return STATS_ROOF_FP8;
	default:
		return STATS_ROOF_FP32; /* f32, and the integer ops' few flops */
	}
}

/* The op's time at the ceilings: max(bytes / bandwidth, flops / peak). */
static double roof_us(const stats_roofline *r, double flops, double bytes, int dtype)
{
	double us = 0.0, peak = r->tflops[roof_class(dtype)];
	if (r->bandwidth_gbs > 0.0)
		us = bytes / (r->bandwidth_gbs * 1e3);
	if (peak > 0.0 && flops / (peak * 1e6) > us)
		us = flops / (peak * 1e6);
	return us;
}

void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes,
                    int dtype)
{
	if (slot < 0 || slot >= STATS_MAX_OPS)
		return;
	double roof = !failed && timed ? roof_us(&st->roof, flops, bytes, dtype) : 0.0;
	stats_shard *sh = my_shard(st);
	pthread_mutex_lock(&sh->mu);
	op_counters *o = &sh->ops[slot];
	o->count++;
	if (failed) {
		o->errors++;
	} else {
		o->flops += flops;
		o->bytes += bytes;
		if (timed) {
			o->flops_timed += flops;
			o->bytes_timed += bytes;
			o->roof_us_timed += roof;
		}
	}
	pthread_mutex_unlock(&sh->mu);
}

void stats_count_request(stats *st, int failed)
{
	/* Each thread's own line: a shared counter would bounce between the
	 * executor threads on every op. */
	stats_shard *sh = my_shard(st);
	__atomic_fetch_add(&sh->requests, 1, __ATOMIC_RELAXED);
	if (failed)
		__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
}

void stats_requests(stats *st, uint64_t *requests, uint64_t *errors)
{
	uint64_t r = 0, e = 0;
	for (int k = 0; k < st->n_shards; k++) {
		r += __atomic_load_n(&st->shards[k].requests, __ATOMIC_RELAXED);
		e += __atomic_load_n(&st->shards[k].errors, __ATOMIC_RELAXED);
	}
	*requests = r;
	*errors = e;
}

void stats_op_latency(stats *st, int slot, double us)
{
	if (slot < 0 || slot >= STATS_MAX_OPS)
		return;
	stats_hist_record(&my_shard(st)->ops[slot].latency, us);
}

void stats_op_time(stats *st, int slot, double us)
{
	if (slot < 0 || slot >= STATS_MAX_OPS)
		return;
	stats_shard *sh = my_shard(st);
	pthread_mutex_lock(&sh->mu);
	sh->ops[slot].time_us += us;
	sh->ops[slot].timed++;
	pthread_mutex_unlock(&sh->mu);
}

void sb_printf(strbuf *sb, const char *fmt, ...)
{
	if (sb->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = sb->cap - sb->len;
		int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			sb->oom = 1;
			return;
		}
		if ((size_t)n < room) {
			sb->len += (size_t)n;
			return;
		}
		size_t cap = (sb->cap ? sb->cap * 2 : 1024) + (size_t)n;
		char *b = realloc(sb->buf, cap);
		if (!b) {
			sb->oom = 1;
			return;
		}
		sb->buf = b;
		sb->cap = cap;
	}
}

void sb_json_string(strbuf *sb, const char *s)
{
	sb_printf(sb, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			sb_printf(sb, "\\%c", *p);
		else if (*p < 0x20)
			sb_printf(sb, "\\u%04x", *p);
		else
			sb_printf(sb, "%c", *p);
	}
	sb_printf(sb, "\"");
}

void sb_free(strbuf *sb)
{
	free(sb->buf);
	memset(sb, 0, sizeof(*sb));
}

stats_op_view *stats_ops_read(stats *st, int *n_out)
{
	int n = __atomic_load_n(&st->n_ops, __ATOMIC_ACQUIRE);
	stats_op_view *v = calloc((size_t)(n ? n : 1), sizeof(*v));
	if (!v)
		return NULL;
	for (int k = 0; k < st->n_shards; k++) {
		stats_shard *sh = &st->shards[k];
		pthread_mutex_lock(&sh->mu);
		for (int i = 0; i < n; i++) {
			const op_counters *o = &sh->ops[i];
			op_counters *c = &v[i].c;
			c->count += o->count;
			c->errors += o->errors;
			c->timed += o->timed;
			c->time_us += o->time_us;
			c->flops += o->flops;
			c->bytes += o->bytes;
			c->flops_timed += o->flops_timed;
			c->bytes_timed += o->bytes_timed;
			c->roof_us_timed += o->roof_us_timed;
			stats_hist_merge(&c->latency, &o->latency);
		}
		pthread_mutex_unlock(&sh->mu);
	}
	for (int i = 0; i < n; i++) {
		v[i].name = st->names[i];
		/* Known where ops were timed and some ceiling is. */
		v[i].sol_share = v[i].c.time_us > 0.0 && v[i].c.roof_us_timed > 0.0
		                         ? v[i].c.roof_us_timed / v[i].c.time_us
		                         : -1.0;
	}
	*n_out = n;
	return v;
}

/* A count or a sum of integers (flops, bytes), printed exactly: the sums
 * stay integers below 2^53, and %.0f prints every digit. */
static void sb_count(strbuf *sb, double v)
{
	sb_printf(sb, "%.0f", v);
}

void stats_write_hist_json(strbuf *sb, const stats_hist *h)
{
	uint64_t n = stats_hist_count(h);
	sb_printf(sb, "{\"count\":%llu,\"sum\":%.3f,", (unsigned long long)n,
	          (double)h->sum_ns * 1e-3);
	if (n)
		sb_printf(sb, "\"p50\":%.3f,\"p99\":%.3f,\"max\":%.3f,",
		          stats_hist_quantile(h, 0.5), stats_hist_quantile(h, 0.99),
		          (double)h->max_ns * 1e-3);
	else
		sb_printf(sb, "\"p50\":null,\"p99\":null,\"max\":null,");
	sb_printf(sb, "\"buckets\":[");
	uint64_t cum = 0;
	for (int i = 0; i < STATS_HIST_BOUNDS; i++) {
		cum += h->buckets[i];
		sb_printf(sb, "[%g,%llu],", stats_hist_le_us[i], (unsigned long long)cum);
	}
	sb_printf(sb, "[null,%llu]]}", (unsigned long long)n);
}

static void write_figure(strbuf *sb, double v)
{
	if (v > 0.0)
		sb_printf(sb, "%.6g", v);
	else
		sb_printf(sb, "null");
}

void stats_write_roofline_json(stats *st, strbuf *sb)
{
	static const char *const names[STATS_ROOF_N] = { "bf16", "fp16", "fp32", "fp8" };
	sb_printf(sb, "\"roofline\":{\"bandwidth_gbs\":");
	write_figure(sb, st->roof.bandwidth_gbs);
	sb_printf(sb, ",\"tflops\":{");
	for (int i = 0; i < STATS_ROOF_N; i++) {
		sb_printf(sb, "%s\"%s\":", i ? "," : "", names[i]);
		write_figure(sb, st->roof.tflops[i]);
	}
	sb_printf(sb, "},\"source\":");
	sb_json_string(sb, st->roof.source[0] ? st->roof.source : "device");
	sb_printf(sb, "}");
}

void stats_write_ops_json(stats *st, strbuf *sb)
{
	int n = 0;
	stats_op_view *v = stats_ops_read(st, &n);
	if (!v) {
		sb->oom = 1;
		return;
	}
	sb_printf(sb, "\"ops\":{");
	for (int i = 0; i < n; i++) {
		const op_counters *o = &v[i].c;
		/* Achieved rates over the ops that have a measured time. */
		double secs = o->time_us * 1e-6;
		double gbps = secs > 0 ? o->bytes_timed / secs * 1e-9 : 0.0;
		double tflops = secs > 0 ? o->flops_timed / secs * 1e-12 : 0.0;
		sb_printf(sb, "%s", i ? "," : "");
		sb_json_string(sb, v[i].name);
		sb_printf(sb,
		          ":{\"count\":%llu,\"errors\":%llu,\"timed\":%llu,\"total_time_us\":%.3f,"
		          "\"flops\":",
		          (unsigned long long)o->count, (unsigned long long)o->errors,
		          (unsigned long long)o->timed, o->time_us);
		sb_count(sb, o->flops);
		sb_printf(sb, ",\"bytes\":");
		sb_count(sb, o->bytes);
		sb_printf(sb,
		          ",\"achieved_gbps\":%.3f,\"achieved_tflops\":%.4f,\"sol_share\":", gbps,
		          tflops);
		if (v[i].sol_share >= 0.0)
			sb_printf(sb, "%.4f", v[i].sol_share);
		else
			sb_printf(sb, "null");
		sb_printf(sb, ",\"latency_us\":");
		stats_write_hist_json(sb, &o->latency);
		sb_printf(sb, "}");
	}
	sb_printf(sb, "}");
	free(v);
}
