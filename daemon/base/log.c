/* log.c - leveled logging (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int log_current = LOG_INFO;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

void log_set_level(log_level level)
{
	atomic_store(&log_current, (int)level);
}

log_level log_get_level(void)
{
	return (log_level)atomic_load(&log_current);
}

int log_level_parse(const char *name)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	if (strcmp(name, "warning") == 0)
		return LOG_WARN;
	return -1;
}

const char *log_level_name(log_level level)
{
	return (unsigned)level < 4 ? log_names[level] : "?";
}

/* 1 when stderr is the journal, 0 when not, -1 not yet looked at. */
static atomic_int log_journal = -1;

int log_detect_journal(void)
{
	/* systemd sets JOURNAL_STREAM to the device and inode of the stream it
	 * connected to stdout/stderr; a stderr redirected since then is not it. */
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	int on = 0;
	if (js && js[0] && fstat(STDERR_FILENO, &st) == 0) {
		char *end;
		unsigned long long dev = strtoull(js, &end, 10), ino = 0;
		int ok = end != js && *end == ':';
		if (ok) {
			const char *p = end + 1;
			ino = strtoull(p, &end, 10);
			ok = end != p && *end == '\0';
		}
		on = ok && dev == (unsigned long long)st.st_dev &&
		     ino == (unsigned long long)st.st_ino;
	}
	atomic_store(&log_journal, on);
	return on;
}

/* syslog(3)'s priorities, which the journal reads from a "<N>" prefix. */
static const char log_priority[] = { '3', '4', '6', '7' };

void log_msg(log_level level, const char *fmt, ...)
{
	if ((int)level > atomic_load(&log_current))
		return;
	int journal = atomic_load(&log_journal);
	if (journal < 0)
		journal = log_detect_journal();
	char body[2048];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	if (m < 0)
		body[0] = '\0';
	char line[4096];
	size_t len = 0;
	if (journal) {
		/* The journal stamps each line itself; the prefix is its priority,
		 * repeated on every line of a multi-line message (a line without
		 * one would be logged as info). */
		char pfx[3] = { '<', log_priority[(unsigned)level < 4 ? level : 3], '>' };
		size_t blen = strlen(body);
		while (blen > 0 && body[blen - 1] == '\n')
			blen--;
		memcpy(line, pfx, 3);
		len = 3;
		for (size_t i = 0; i < blen && len < sizeof(line) - 5; i++) {
			line[len++] = body[i];
			if (body[i] == '\n') {
				memcpy(line + len, pfx, 3);
				len += 3;
			}
		}
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s",
		                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		                 tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_level_name(level),
		                 body);
		len = n < 0 ? 0 : (size_t)n;
		if (len > sizeof(line) - 2)
			len = sizeof(line) - 2;
	}
	line[len++] = '\n';
	/* One write per line so lines from different threads never interleave. */
	ssize_t rc = write(STDERR_FILENO, line, len);
	(void)rc;
}
