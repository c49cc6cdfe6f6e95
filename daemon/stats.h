/*
 * stats.h - per-op counters for the stats socket and the JSON writer.
 *
 * Op slots are made on the loop thread (stats_op_slot) for op names that the
 * op layer accepted, so a client cannot grow the table with made-up names.
 * Times arrive from the executor thread. One mutex guards the table.
 */
#ifndef TILEOPSD_STATS_H
#define TILEOPSD_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct op_stats {
	char name[64];
	uint64_t count;
	uint64_t errors;
	double time_us;   /* device (or CPU) time of the timed ops, summed */
	uint64_t timed;   /* how many ops time_us covers (a sample on the GPU) */
	double flops;     /* roofline counts, summed over counted ops */
	double bytes;
	double flops_timed; /* the same over the timed ops, for achieved rates */
	double bytes_timed;
} op_stats;

typedef struct stats {
	pthread_mutex_t mu;
	op_stats *ops;
	int n_ops, cap_ops;
	uint64_t requests;
	uint64_t errors;
} stats;

void stats_init(stats *st);
void stats_destroy(stats *st);
/* The slot of op `name`, made on first use; -1 if out of memory. */
int stats_op_slot(stats *st, const char *name);
/* One validated (or refused) op; `timed` when its time will be reported. */
void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes);
/* One answered request (either plane); `failed` when its status was not OK. */
void stats_count_request(stats *st, int failed);
/* Executor thread: an op of `slot` took `us` microseconds. */
void stats_op_time(stats *st, int slot, double us);

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

/* Append "ops":{...} for every op slot. */
void stats_write_ops_json(stats *st, strbuf *sb);

#endif
