/* log.c - leveled logging (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
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

void log_msg(log_level level, const char *fmt, ...)
{
	if ((int)level > atomic_load(&log_current))
		return;
	char line[2048];
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
	                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
	                 tm.tm_sec, ts.tv_nsec / 1000000, log_level_name(level));
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	/* One write per line so lines from different threads never interleave. */
	ssize_t rc = write(STDERR_FILENO, line, len);
	(void)rc;
}
