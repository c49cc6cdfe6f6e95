/*
 * log.h - leveled logging to stderr, one line per event, UTC timestamps.
 * Safe to call from any thread (each line is written with one write(2)).
 *
 * When stderr is the systemd journal ($JOURNAL_STREAM names its device and
 * inode), a line carries no timestamp (the journal stamps it) and starts
 * with its syslog priority instead: <3> error, <4> warn, <6> info, <7>
 * debug, so `journalctl -p warning` selects by level. Each line of a
 * message that holds newlines gets the prefix.
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

/*
 * Look again at whether stderr is the journal (the first log line looks by
 * itself); call it after redirecting stderr. Returns 1 when it is. Not
 * concurrently with setenv.
 */
int log_detect_journal(void);

void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
