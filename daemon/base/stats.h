/*
 * stats.h - per-op counters for the stats socket and the JSON writer.
 *
 * Op slots are made (stats_op_slot) only for op names that the manifest
 * knows, so a client cannot grow the table with made-up names. Counters are
 * kept in one shard per executor thread (stats_set_thread_shard), each with
 * its own mutex that only its thread and the stats reader take, so counting
 * never contends between threads; the JSON sums the shards.
 */
#ifndef TILEOPSD_STATS_H
#define TILEOPSD_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define STATS_MAX_OPS 256

typedef struct op_counters {
	uint64_t count;
	uint64_t errors;
	uint64_t timed; /* how many ops time_us covers (a sample on the GPU) */
	double time_us; /* device (or CPU) time of the timed ops, summed */
	double flops;   /* roofline counts, summed over counted ops */
	double bytes;
	double flops_timed; /* the same over the timed ops, for achieved rates */
	double bytes_timed;
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
} stats;

/* n_shards: one per thread that counts (executor threads), at least 1. */
int stats_init(stats *st, int n_shards);
void stats_destroy(stats *st);
/* The calling thread counts into shard i from now on (default 0). */
void stats_set_thread_shard(int i);
/* The slot of op `name`, made on first use; -1 when the table is full. */
int stats_op_slot(stats *st, const char *name);
/* One validated (or refused) op; `timed` when its time will be reported. */
void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes);
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

#endif
