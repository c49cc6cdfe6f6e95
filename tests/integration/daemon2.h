/*
 * daemon2.h - a second tileopsd that a test starts with a config of its own
 * (quotas, named tenants, warm-up plans, who may connect), on sockets in a
 * fresh folder, and stops with SIGTERM (it must exit 0).
 */
#ifndef TILEOPS_TEST_DAEMON2_H
#define TILEOPS_TEST_DAEMON2_H

#include <sys/types.h>

typedef struct daemon2 {
	pid_t pid;
	char dir[64];
	char address[128];
	char stats[128];
	char ready[128];
} daemon2;

/* Start tileopsd ($TILEOPS_TEST_BACKEND, cpu by default) with `config`; asserts it
 * became ready. */
void daemon2_start(daemon2 *d, const char *config);
/* Point th_connect, th_stat and spawned children at it. */
void daemon2_use(const daemon2 *d);
/* SIGTERM; asserts a clean exit 0. */
void daemon2_stop(daemon2 *d);
/* Wait up to timeout_ms for it to exit by itself; its exit status, or -1
 * when it still runs (it is then left running). */
int daemon2_wait(daemon2 *d, int timeout_ms);
/* Whether its log contains `needle`. */
int daemon2_log_has(const daemon2 *d, const char *needle);
/* SIGKILL and clean up. */
void daemon2_kill(daemon2 *d);
/* Kill the one still running, if a test failed before stopping it. */
void daemon2_kill_running(void);
/* Write `text` to `path` (asserts). */
void daemon2_write_text(const char *path, const char *text);

#endif
