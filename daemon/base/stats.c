/* stats.c - per-op counters and JSON (see stats.h). */
#include "stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local int stats_thread_shard;

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

void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes)
{
	if (slot < 0 || slot >= STATS_MAX_OPS)
		return;
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

void stats_write_ops_json(stats *st, strbuf *sb)
{
	int n = __atomic_load_n(&st->n_ops, __ATOMIC_ACQUIRE);
	op_counters *sum = calloc((size_t)(n ? n : 1), sizeof(*sum));
	if (!sum) {
		sb->oom = 1;
		return;
	}
	for (int k = 0; k < st->n_shards; k++) {
		stats_shard *sh = &st->shards[k];
		pthread_mutex_lock(&sh->mu);
		for (int i = 0; i < n; i++) {
			const op_counters *o = &sh->ops[i];
			sum[i].count += o->count;
			sum[i].errors += o->errors;
			sum[i].timed += o->timed;
			sum[i].time_us += o->time_us;
			sum[i].flops += o->flops;
			sum[i].bytes += o->bytes;
			sum[i].flops_timed += o->flops_timed;
			sum[i].bytes_timed += o->bytes_timed;
		}
		pthread_mutex_unlock(&sh->mu);
	}
	sb_printf(sb, "\"ops\":{");
	for (int i = 0; i < n; i++) {
		const op_counters *o = &sum[i];
		/* Achieved rates over the ops that have a measured time. */
		double secs = o->time_us * 1e-6;
		double gbps = secs > 0 ? o->bytes_timed / secs * 1e-9 : 0.0;
		double tflops = secs > 0 ? o->flops_timed / secs * 1e-12 : 0.0;
		sb_printf(sb, "%s", i ? "," : "");
		sb_json_string(sb, st->names[i]);
		sb_printf(sb,
		          ":{\"count\":%llu,\"errors\":%llu,\"timed\":%llu,\"total_time_us\":%.3f,"
		          "\"flops\":%.6g,\"bytes\":%.6g,\"achieved_gbps\":%.3f,"
		          "\"achieved_tflops\":%.4f}",
		          (unsigned long long)o->count, (unsigned long long)o->errors,
		          (unsigned long long)o->timed, o->time_us, o->flops, o->bytes, gbps,
		          tflops);
	}
	sb_printf(sb, "}");
	free(sum);
}
