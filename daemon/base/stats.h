/*
 * stats.h - per-op counters for the stats socket and the JSON writer.
 *
 * Op slots are made (stats_op_slot) only for op names that the manifest
 * knows, so a client cannot grow the table with made-up names. Counters are
 * kept in one shard per executor thread (stats_set_thread_shard), each with
 * its own mutex that only its thread and the stats reader take, so counting
 * never contends between threads; the JSON sums the shards.
 *
 * Latency histograms (stats_hist) are lock-free: each bucket is an atomic
 * counter, so a shard's histogram is written by its executor thread (and
 * by the loop for shard 0) and read by the stats without a lock. One set of
 * bucket bounds serves every histogram, so shards and sessions merge by
 * adding buckets.
 */
#ifndef TILEOPSD_STATS_H
#define TILEOPSD_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_MAX_OPS 256

/*
 * Bucket upper bounds in microseconds ("le", inclusive): ten a decade (the
 * R10 series 1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8) from 1 us to 10 s, so
 * neighbouring bounds differ by at most 28% and a percentile interpolated
 * inside its bucket is off by less than that. A last bucket (+Inf) takes
 * what is slower.
 */
#define STATS_HIST_BOUNDS 71
#define STATS_HIST_BUCKETS (STATS_HIST_BOUNDS + 1)
extern const double stats_hist_le_us[STATS_HIST_BOUNDS];

typedef struct stats_hist {
	uint64_t buckets[STATS_HIST_BUCKETS]; /* atomic; per bucket, not cumulative */
	uint64_t sum_ns;                      /* atomic */
	uint64_t max_ns;                      /* atomic */
} stats_hist;

/* The bucket a time of `us` falls in (the first whose bound is >= us). */
int stats_hist_bucket(double us);
/* Count one observation of `us` microseconds. Any thread, lock-free. */
void stats_hist_record(stats_hist *h, double us);
/* Add h's counts into `into` (a plain copy being built; h may be live). */
void stats_hist_merge(stats_hist *into, const stats_hist *h);
/* Observations in a copy (the sum of its buckets). */
uint64_t stats_hist_count(const stats_hist *h);
/*
 * The q-quantile (0 < q <= 1) of a copy, in microseconds: linear inside the
 * bucket it falls in (from 0 in the first, up to the exact maximum in the
 * last), never above the maximum. 0 when empty.
 */
double stats_hist_quantile(const stats_hist *h, double q);

/* The roofline ceilings' dtype classes (stats_op_count's `dtype` maps here). */
enum { STATS_ROOF_BF16, STATS_ROOF_FP16, STATS_ROOF_FP32, STATS_ROOF_FP8, STATS_ROOF_N };

/* The device's speed of light: an op's roofline time is
 * max(bytes / bandwidth, flops / peak of its dtype); 0 means unknown, and
 * an unknown term is left out. */
typedef struct stats_roofline {
	double bandwidth_gbs;
	double tflops[STATS_ROOF_N];
	char source[16]; /* "device", "measured" or "configured" */
} stats_roofline;

/* Per session (kept in the session): its op requests and their latency. */
typedef struct stats_session {
	uint64_t ops;    /* atomic */
	uint64_t errors; /* atomic */
	stats_hist latency;
} stats_session;

typedef struct op_counters {
	uint64_t count;
	uint64_t errors;
	uint64_t timed; /* how many ops time_us covers (a sample on the GPU) */
	double time_us; /* device (or CPU) time of the timed ops, summed */
	double flops;   /* roofline counts, summed over counted ops */
	double bytes;
	double flops_timed; /* the same over the timed ops, for achieved rates */
	double bytes_timed;
	double roof_us_timed; /* their roofline time (stats_roofline), summed */
	stats_hist latency;   /* request to completion posted, per op request */
} op_counters;

typedef struct stats_shard {
	pthread_mutex_t mu;
	op_counters ops[STATS_MAX_OPS];
	uint64_t requests; /* answered requests (atomic: the loop counts into shard 0 too) */
	uint64_t errors;   /* of which failed (atomic) */
} stats_shard;

typedef struct stats {
	pthread_mutex_t mu; /* making slots */
	char names[STATS_MAX_OPS][64];
	int n_ops; /* atomic: names below it are final */
	int n_shards;
	stats_shard *shards;
	stats_roofline roof; /* set before counting starts */
} stats;

/* n_shards: one per thread that counts (executor threads), at least 1. */
int stats_init(stats *st, int n_shards);
void stats_destroy(stats *st);
/* The calling thread counts into shard i from now on (default 0). */
void stats_set_thread_shard(int i);
/* The slot of op `name`, made on first use; -1 when the table is full. */
int stats_op_slot(stats *st, const char *name);
/* The ceilings the roofline times are counted against; before any op. */
void stats_set_roofline(stats *st, const stats_roofline *r);
/* One validated (or refused) op; `timed` when its time will be reported.
 * dtype: its first tensor's (a TILEOPS dtype value), for the flops peak. */
void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes,
                    int dtype);
/* An op request of `slot` was answered `us` after the daemon received it
 * (any thread that counts; slot -1 is ignored). */
void stats_op_latency(stats *st, int slot, double us);
/* An op request of a session was answered (any thread). */
void stats_session_op(stats_session *ss, int failed, double us);
/* Executor thread: an op of `slot` took `us` microseconds. */
void stats_op_time(stats *st, int slot, double us);
/* One answered request (either plane); `failed` when its status was not OK. */
void stats_count_request(stats *st, int failed);
/* Answered requests and failures so far, summed over the shards. */
void stats_requests(stats *st, uint64_t *requests, uint64_t *errors);

/* A growing text buffer for JSON. */
typedef struct strbuf {
	char *buf;
	size_t len, cap;
	int oom;
} strbuf;

void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as a JSON string literal, quotes included. */
void sb_json_string(strbuf *sb, const char *s);
void sb_free(strbuf *sb);

/* Append "ops":{...} for every op slot, summed over the shards. */
void stats_write_ops_json(stats *st, strbuf *sb);
/* Append a histogram copy as {"count":N,"sum":S,"p50":x,"p99":y,"max":z,
 * "buckets":[[le_us,cumulative],...,[null,count]]} (percentiles null when
 * empty). */
void stats_write_hist_json(strbuf *sb, const stats_hist *h);
/* Append "roofline":{...}: the ceilings and where they came from. */
void stats_write_roofline_json(stats *st, strbuf *sb);

/* One op slot summed over the shards, for the metrics page. */
typedef struct stats_op_view {
	const char *name;
	op_counters c;
	double sol_share; /* < 0: not known */
} stats_op_view;
/* Sum every slot into a new array (free it); *n gets its length. NULL when
 * out of memory. */
stats_op_view *stats_ops_read(stats *st, int *n);

#endif
