/*
 * log.h - leveled logging to stderr, one line per event, UTC timestamps.
 * Safe to call from any thread (each line is written with one write(2)).
 */
#ifndef TILEOPSD_LOG_H
#define TILEOPSD_LOG_H

typedef enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 } log_level;

/* Set the most verbose level that is printed. */
void log_set_level(log_level level);
log_level log_get_level(void);
/* Parse "error", "warn", "info", "debug"; -1 if unknown. */
int log_level_parse(const char *name);
const char *log_level_name(log_level level);

void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
