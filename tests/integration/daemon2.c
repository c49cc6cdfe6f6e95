/* daemon2.c - a second tileopsd for tests that need their own config. */
#include "integration/daemon2.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

/* The daemon started last and not yet stopped, copied: a test that fails
 * leaves its own daemon2 (often on its stack) behind, and its suite's fini
 * kills this one. */
static daemon2 running2;
static int running2_live;

static const char *env_path(const char *name)
{
	const char *p = getenv(name);

	cr_assert(p != NULL && p[0] != '\0', "%s is not set: run this test through ctest", name);
	return p;
}

void daemon2_write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static void log_tail(const daemon2 *d)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "tail -n 30 '%s/log' >&2", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log in %s)\n", d->dir);
}

static void daemon2_remove_dir(daemon2 *d)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}

/* Start tileopsd (the backend under test) with `config` on sockets in a fresh folder. */
void daemon2_start(daemon2 *d, const char *config)
{
	const char *bin = env_path("TILEOPSD"), *manifest = env_path("TILEOPS_MANIFEST");
	char conf[96], logp[96];
	int64_t deadline;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/tileops-plans-XXXXXX");
	cr_assert_not_null(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
	/* Clients of another uid must reach the socket in it. */
	cr_assert_eq(chmod(d->dir, 0755), 0);
	snprintf(conf, sizeof(conf), "%s/tileopsd.conf", d->dir);
	snprintf(logp, sizeof(logp), "%s/log", d->dir);
	snprintf(d->address, sizeof(d->address), "ipc://%s/d.sock", d->dir);
	snprintf(d->stats, sizeof(d->stats), "ipc://%s/s.sock", d->dir);
	snprintf(d->ready, sizeof(d->ready), "%s/ready", d->dir);
	daemon2_write_text(conf, config);
	d->pid = fork();
	cr_assert_geq(d->pid, 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		/* Never outlive the test, even when it fails before stopping us. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execl(bin, "tileopsd", "--config", conf, "--backend", th_expected_backend(),
		      "--listen", d->address, "--stats", d->stats, "--manifest", manifest,
		      "--ready-file", d->ready, (char *)NULL);
		_exit(127);
	}
	running2 = *d;
	running2_live = 1;
	deadline = th_now_ms() + 20000;
	for (;;) {
		struct stat st;
		int status;

		if (stat(d->ready, &st) == 0 && st.st_size > 0)
			return;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			d->pid = 0;
			log_tail(d);
			cr_assert_fail("the second tileopsd exited during start-up (log above)");
		}
		if (th_now_ms() > deadline) {
			log_tail(d);
			cr_assert_fail("the second tileopsd was not ready within 20 s");
		}
		th_sleep_ms(20);
	}
}

/* Point th_connect, th_stat and the spawned children at the second daemon. */
void daemon2_use(const daemon2 *d)
{
	setenv("TILEOPS_ADDRESS", d->address, 1);
	setenv("TILEOPS_STATS_ADDRESS", d->stats, 1);
}

int daemon2_wait(daemon2 *d, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	int status = 0;
	while (waitpid(d->pid, &status, WNOHANG) != d->pid) {
		if (th_now_ms() > deadline)
			return -1;
		th_sleep_ms(10);
	}
	d->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int daemon2_log_has(const daemon2 *d, const char *needle)
{
	char path[96], line[1024];
	snprintf(path, sizeof(path), "%s/log", d->dir);
	FILE *f = fopen(path, "r");
	int found = 0;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

void daemon2_kill(daemon2 *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
	}
	daemon2_remove_dir(d);
	running2_live = 0;
}

/* SIGTERM, and it must exit 0: stopping is part of what is tested. */
void daemon2_stop(daemon2 *d)
{
	int64_t deadline = th_now_ms() + 20000;
	int status = 0;

	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	while (waitpid(d->pid, &status, WNOHANG) != d->pid) {
		if (th_now_ms() > deadline) {
			log_tail(d);
			cr_assert_fail("the second tileopsd did not stop within 20 s of SIGTERM");
		}
		th_sleep_ms(20);
	}
	d->pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		log_tail(d);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "the second tileopsd ended with status %d after SIGTERM", status);
	daemon2_remove_dir(d);
	running2_live = 0;
}

void daemon2_kill_running(void)
{
	if (!running2_live)
		return;
	/* Only while it is still this process's child: a test may have reaped
	 * it already, and its pid may be another process's by now. */
	int status;
	if (running2.pid > 0 && waitpid(running2.pid, &status, WNOHANG) != 0)
		running2.pid = 0;
	daemon2_kill(&running2);
}
