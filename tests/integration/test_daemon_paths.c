/*
 * test_daemon_paths.c - where a tileopsd started with few options puts its
 * sockets and finds its data files: the stats socket follows --listen (so
 * that one daemon per GPU, each with its own folder, can start), and the
 * build-tree daemon finds the manifest and the shipped GEMM tuning table
 * through the share/tileops folder beside it, as an installed one does.
 * Each test spawns $TILEOPSD itself in a private folder, with no --manifest.
 */
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

typedef struct pdaemon {
	pid_t pid;
	char dir[64];
	char log[96];
} pdaemon;

static pdaemon started[2];

static void kill_left(void)
{
	for (int i = 0; i < 2; i++) {
		if (started[i].pid > 0) {
			kill(started[i].pid, SIGKILL);
			waitpid(started[i].pid, NULL, 0);
			started[i].pid = 0;
		}
		if (started[i].dir[0]) {
			char cmd[128];
			snprintf(cmd, sizeof(cmd), "rm -rf '%s'", started[i].dir);
			if (system(cmd) != 0)
				fprintf(stderr, "could not remove %s\n", started[i].dir);
			started[i].dir[0] = '\0';
		}
	}
}

TestSuite(daemon_paths, .fini = kill_left, .timeout = 60);

static int file_has(const char *path, const char *needle, char *line, size_t len)
{
	FILE *f = fopen(path, "r");
	int found = 0;
	while (f && !found && fgets(line, (int)len, f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

/* How start_with gives the addresses. */
enum how { BY_OPTION, BY_CONFIG, BY_CONFIG_WITH_STATS };

/*
 * Start the build-tree tileopsd with only --listen (and the backend, the
 * ready file): stats socket, manifest and tuning table are its defaults.
 * BY_CONFIG: listen comes from a config file instead; BY_CONFIG_WITH_STATS:
 * the file also sets stats_listen (own-stats.sock), before listen.
 */
static void start_with(pdaemon *d, int nth, enum how how)
{
	const char *bin = getenv("TILEOPSD");
	char listen[128], ready[96], conf[96];

	cr_assert(bin && *bin, "TILEOPSD is not set: run this test through ctest");
	snprintf(d->dir, sizeof(d->dir), "/tmp/tileops-paths-XXXXXX");
	cr_assert_not_null(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
	snprintf(d->log, sizeof(d->log), "%s/log", d->dir);
	snprintf(listen, sizeof(listen), "ipc://%s/control-%d.sock", d->dir, nth);
	snprintf(ready, sizeof(ready), "%s/ready", d->dir);
	if (how != BY_OPTION) {
		FILE *f;
		snprintf(conf, sizeof(conf), "%s/tileopsd.conf", d->dir);
		cr_assert_not_null(f = fopen(conf, "w"));
		if (how == BY_CONFIG_WITH_STATS)
			fprintf(f, "stats_listen = ipc://%s/own-stats.sock\n", d->dir);
		fprintf(f, "listen = %s\n", listen);
		fclose(f);
	}
	d->pid = fork();
	cr_assert_geq(d->pid, 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		if (how != BY_OPTION)
			execl(bin, "tileopsd", "--backend", "cpu", "--config", conf, "--ready-file",
			      ready, (char *)NULL);
		else
			execl(bin, "tileopsd", "--backend", "cpu", "--listen", listen,
			      "--ready-file", ready, (char *)NULL);
		_exit(127);
	}
	for (int64_t deadline = th_now_ms() + 20000;;) {
		struct stat st;
		int status;
		if (stat(ready, &st) == 0 && st.st_size > 0)
			return;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			char cmd[160];
			d->pid = 0;
			snprintf(cmd, sizeof(cmd), "cat '%s' >&2", d->log);
			if (system(cmd) != 0)
				fprintf(stderr, "(no log)\n");
			cr_assert_fail("tileopsd --listen %s exited during start-up (log above)",
			               listen);
		}
		cr_assert(th_now_ms() < deadline, "tileopsd was not ready within 20 s");
		th_sleep_ms(20);
	}
}

static void start(pdaemon *d, int nth)
{
	start_with(d, nth, BY_OPTION);
}

static void stop(pdaemon *d)
{
	int status = 0;
	cr_assert_eq(kill(d->pid, SIGTERM), 0);
	cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
	d->pid = 0;
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "tileopsd ended with status %d after SIGTERM", status);
}

Test(daemon_paths, stats_socket_is_beside_the_control_socket)
{
	char stats[128];
	struct stat st;

	start(&started[0], 0);
	snprintf(stats, sizeof(stats), "%s/stats.sock", started[0].dir);
	cr_assert_eq(stat(stats, &st), 0, "no stats socket at %s: %s", stats, strerror(errno));
	cr_assert(S_ISSOCK(st.st_mode), "%s is not a socket", stats);
	/* It is the stats socket, answering with the stats document. */
	char addr[140];
	snprintf(addr, sizeof(addr), "ipc://%s", stats);
	setenv("TILEOPS_STATS_ADDRESS", addr, 1);
	char *json = th_try_stats();
	cr_assert_not_null(json, "no stats document from %s", addr);
	double sessions = -1;
	cr_expect_eq(th_json_number(json, "sessions", &sessions), 0, "no sessions in %s", json);
	free(json);
	stop(&started[0]);
}

Test(daemon_paths, stats_socket_follows_listen_from_the_config_file)
{
	char stats[128];

	start_with(&started[0], 0, BY_CONFIG);
	snprintf(stats, sizeof(stats), "%s/stats.sock", started[0].dir);
	cr_assert_eq(access(stats, F_OK), 0, "no stats socket at %s", stats);
	stop(&started[0]);
}

Test(daemon_paths, stats_listen_given_is_kept)
{
	char stats[128], beside[128];

	start_with(&started[0], 0, BY_CONFIG_WITH_STATS);
	snprintf(stats, sizeof(stats), "%s/own-stats.sock", started[0].dir);
	snprintf(beside, sizeof(beside), "%s/stats.sock", started[0].dir);
	cr_assert_eq(access(stats, F_OK), 0, "no stats socket at %s", stats);
	cr_assert_neq(access(beside, F_OK), 0,
	              "a stats socket at %s although stats_listen was given", beside);
	stop(&started[0]);
}

Test(daemon_paths, two_daemons_with_different_listen_folders_both_start)
{
	start(&started[0], 0);
	start(&started[1], 1);
	for (int i = 0; i < 2; i++) {
		char stats[128];
		snprintf(stats, sizeof(stats), "%s/stats.sock", started[i].dir);
		cr_assert_eq(access(stats, F_OK), 0, "daemon %d has no stats socket at %s", i,
		             stats);
	}
	stop(&started[1]);
	stop(&started[0]);
}

Test(daemon_paths, build_tree_daemon_finds_the_manifest_and_the_shipped_tuning_table)
{
	char line[1024];

	/* No --manifest: it was found beside the executable, or the start failed. */
	start(&started[0], 0);
	cr_assert(file_has(started[0].log, "tuning table:", line, sizeof(line)),
	          "the start log names no tuning table");
	cr_assert_not_null(strstr(line, "gemm-tune-h200.txt"),
	                   "the start log names no shipped table: %s", line);
	const char *p = strstr(line, "reads ");
	cr_assert_not_null(p, "the table was not found: %s", line);
	char file[1024];
	snprintf(file, sizeof(file), "%s", p + 6);
	file[strcspn(file, ")\n")] = '\0';
	cr_assert_eq(access(file, R_OK), 0, "the table named in the log (%s) cannot be read", file);
	stop(&started[0]);
}
