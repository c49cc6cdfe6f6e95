/* stats.c - per-op counters and JSON (see stats.h). */
#include "stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stats_init(stats *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->mu, NULL);
}

void stats_destroy(stats *st)
{
	pthread_mutex_destroy(&st->mu);
	free(st->ops);
	st->ops = NULL;
}

int stats_op_slot(stats *st, const char *name)
{
	pthread_mutex_lock(&st->mu);
	int slot = -1;
	for (int i = 0; i < st->n_ops; i++) {
		if (strcmp(st->ops[i].name, name) == 0) {
			slot = i;
			goto out;
		}
	}
	if (st->n_ops == st->cap_ops) {
		int cap = st->cap_ops ? st->cap_ops * 2 : 32;
		op_stats *n = realloc(st->ops, (size_t)cap * sizeof(*n));
		if (!n)
			goto out;
		st->ops = n;
		st->cap_ops = cap;
	}
	slot = st->n_ops++;
	memset(&st->ops[slot], 0, sizeof(st->ops[slot]));
	snprintf(st->ops[slot].name, sizeof(st->ops[slot].name), "%s", name);
out:
	pthread_mutex_unlock(&st->mu);
	return slot;
}

void stats_op_count(stats *st, int slot, int failed, int timed, double flops, double bytes)
{
	pthread_mutex_lock(&st->mu);
	if (slot >= 0 && slot < st->n_ops) {
		op_stats *o = &st->ops[slot];
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
	}
	pthread_mutex_unlock(&st->mu);
}

void stats_count_request(stats *st, int failed)
{
	__atomic_fetch_add(&st->requests, 1, __ATOMIC_RELAXED);
	if (failed)
		__atomic_fetch_add(&st->errors, 1, __ATOMIC_RELAXED);
}

void stats_op_time(stats *st, int slot, double us)
{
	pthread_mutex_lock(&st->mu);
	if (slot >= 0 && slot < st->n_ops) {
		st->ops[slot].time_us += us;
		st->ops[slot].timed++;
	}
	pthread_mutex_unlock(&st->mu);
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
	pthread_mutex_lock(&st->mu);
	sb_printf(sb, "\"ops\":{");
	for (int i = 0; i < st->n_ops; i++) {
		const op_stats *o = &st->ops[i];
		/* Achieved rates over the ops that have a measured time. */
		double secs = o->time_us * 1e-6;
		double gbps = secs > 0 ? o->bytes_timed / secs * 1e-9 : 0.0;
		double tflops = secs > 0 ? o->flops_timed / secs * 1e-12 : 0.0;
		sb_printf(sb, "%s", i ? "," : "");
		sb_json_string(sb, o->name);
		sb_printf(sb,
		          ":{\"count\":%llu,\"errors\":%llu,\"timed\":%llu,\"total_time_us\":%.3f,"
		          "\"flops\":%.6g,\"bytes\":%.6g,\"achieved_gbps\":%.3f,"
		          "\"achieved_tflops\":%.4f}",
		          (unsigned long long)o->count, (unsigned long long)o->errors,
		          (unsigned long long)o->timed, o->time_us,
		          o->flops, o->bytes, gbps, tflops);
	}
	sb_printf(sb, "}");
	pthread_mutex_unlock(&st->mu);
}
