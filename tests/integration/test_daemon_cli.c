/*
 * test_daemon_cli.c - tileopsd's command line: help and version, and the
 * start-up errors that must stop it with status 1 and a message naming what
 * was wrong. Each test spawns the binary ($TILEOPSD) in a private folder.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

#define MAX_ARGS 32

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tileops-cli-XXXXXX");
	cr_assert(mkdtemp(dir) != NULL, "mkdtemp failed");
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(cli, .init = setup, .fini = teardown, .timeout = 60);

static const char *daemon_path(void)
{
	const char *p = getenv("TILEOPSD");

	cr_assert(p && *p, "TILEOPSD is not set: run this test through ctest");
	return p;
}

static const char *manifest_path(void)
{
	const char *p = getenv("TILEOPS_MANIFEST");

	cr_assert(p && *p, "TILEOPS_MANIFEST is not set: run this test through ctest");
	return p;
}

typedef struct proc {
	pid_t pid;
	char out_path[128];
	char err_path[128];
} proc;

/* Start tileopsd with argv (NULL-terminated, argv[0] excluded); output to files in dir. */
static void spawn(proc *p, const char *const *args)
{
	static int n;
	const char *argv[MAX_ARGS + 2];
	int i = 0;

	argv[i++] = daemon_path();
	for (; args[i - 1] && i <= MAX_ARGS; i++)
		argv[i] = args[i - 1];
	argv[i] = NULL;
	n++;
	snprintf(p->out_path, sizeof(p->out_path), "%s/out.%d", dir, n);
	snprintf(p->err_path, sizeof(p->err_path), "%s/err.%d", dir, n);
	p->pid = fork();
	cr_assert(p->pid >= 0, "fork failed");
	if (p->pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(p->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int err = open(p->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(err, 2) < 0)
			_exit(127);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
}

/* Wait for the process to exit within timeout_ms; returns its exit status. */
static int wait_exit(proc *p, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(p->pid, &status, WNOHANG);

		if (r == p->pid)
			break;
		if (th_now_ms() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, &status, 0);
			cr_assert_fail("tileopsd did not exit within %d ms", timeout_ms);
		}
		th_sleep_ms(20);
	}
	cr_assert(WIFEXITED(status), "tileopsd died from signal %d", WTERMSIG(status));
	return WEXITSTATUS(status);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);
	size_t n;

	cr_assert(buf);
	if (!f)
		return buf;
	n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Run to completion; check the exit status and that stream contains needle. */
static void expect_run(const char *const *args, int want_status, int use_stderr, const char *needle)
{
	proc p;
	int st;
	char *out, *err;

	spawn(&p, args);
	st = wait_exit(&p, 20000);
	out = slurp(p.out_path);
	err = slurp(p.err_path);
	cr_assert_eq(st, want_status, "%s: exit status %d, expected %d\nstdout: %s\nstderr: %s",
	             args[0], st, want_status, out, err);
	cr_assert(th_contains(use_stderr ? err : out, needle),
	          "%s: %s does not mention \"%s\":\n%s", args[0], use_stderr ? "stderr" : "stdout",
	          needle, use_stderr ? err : out);
	free(out);
	free(err);
}

static void path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

Test(cli, help_prints_usage_and_exits_0)
{
	const char *a[] = { "--help", NULL }, *b[] = { "-h", NULL };

	expect_run(a, 0, 0, "--listen");
	expect_run(a, 0, 0, "usage");
	expect_run(b, 0, 0, "--manifest");
}

Test(cli, version_prints_the_version_and_exits_0)
{
	const char *a[] = { "--version", NULL }, *b[] = { "-V", NULL };

	expect_run(a, 0, 0, "tileopsd " TILEOPS_VERSION_STRING);
	expect_run(b, 0, 0, TILEOPS_VERSION_STRING);
}

Test(cli, unknown_option_exits_1_naming_it)
{
	const char *a[] = { "--no-such-option", NULL };

	expect_run(a, 1, 1, "no-such-option");
}

Test(cli, bad_backend_exits_1_naming_it)
{
	const char *a[] = { "--backend", "tpu", NULL };

	expect_run(a, 1, 1, "tpu");
}

Test(cli, missing_config_file_exits_1_naming_it)
{
	char conf[128];
	const char *a[] = { "--config", conf, NULL };

	path_in_dir(conf, sizeof(conf), "absent.conf");
	expect_run(a, 1, 1, conf);
}

Test(cli, unknown_config_key_exits_1_naming_key_and_line)
{
	char conf[128];
	const char *a[] = { "--config", conf, NULL };

	path_in_dir(conf, sizeof(conf), "bad.conf");
	write_file(conf, "# a comment\nbackend = cpu\nbogus_key = 1\n");
	expect_run(a, 1, 1, "bogus_key");
	expect_run(a, 1, 1, ":3");
}

Test(cli, bad_config_value_exits_1_naming_the_key)
{
	/* Each line alone, and what the message must say. */
	static const struct {
		const char *line, *says;
	} bad[] = {
		{ "contexts = many\n", "contexts" },
		{ "max_message_bytes = 12Q\n", "max_message_bytes" },
		/* The driver allows 1 to 32 hardware queues (0: its default). */
		{ "device_queues = 33\n", "device_queues" },
		{ "executor_pace = -1\n", "executor_pace" },
		{ "session_queue_us = -5\n", "session_queue_us" },
		{ "session_queue_us = 2ms\n", "session_queue_us" },
		{ "executor_cpus = 3-1\n", "executor_cpus" },
		{ "executor_cpus = 0,1,0\n", "CPU 0 is listed twice" },
		{ "executor_cpus = 0,\n", "executor_cpus" },
		{ "devices = 1,1\n", "device 1 is listed twice" },
		{ "devices = 0-16\n", "more than 16 devices" },
		{ "devices = gpu0\n", "devices" },
		{ "device = 0-1\n", "names 2 devices" },
	};
	char conf[128];
	const char *a[] = { "--config", conf, NULL };

	path_in_dir(conf, sizeof(conf), "value.conf");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(conf, bad[i].line);
		expect_run(a, 1, 1, bad[i].says);
	}
}

Test(cli, executor_cpus_the_machine_lacks_refuse_to_start)
{
	char conf[128], sock[128], stats[128];
	const char *a[] = { "--backend", "cpu",     "--config", conf,         "--listen",
		            sock,        "--stats", stats,      "--manifest", manifest_path(),
		            NULL };

	path_in_dir(conf, sizeof(conf), "cpus.conf");
	snprintf(sock, sizeof(sock), "ipc://%s/d.sock", dir);
	snprintf(stats, sizeof(stats), "ipc://%s/s.sock", dir);
	/* CPU 255 is below the limit the key accepts but on no test machine. */
	write_file(conf, "executor_cpus = 255\n");
	expect_run(a, 1, 1, "cannot run executor thread 0 on CPU 255");
}

Test(cli, invalid_manifest_path_refuses_to_start)
{
	char sock[128], stats[128], manifest[128];
	const char *a[] = { "--backend", "cpu",        "--listen", sock, "--stats",
		            stats,       "--manifest", manifest,   NULL };

	snprintf(sock, sizeof(sock), "ipc://%s/d.sock", dir);
	snprintf(stats, sizeof(stats), "ipc://%s/s.sock", dir);
	path_in_dir(manifest, sizeof(manifest), "no-manifest-here");
	expect_run(a, 1, 1, "no-manifest-here");
}

Test(cli, backend_cuda_without_a_gpu_exits_1)
{
	char sock[128], stats[128];
	const char *a[] = { "--backend", "cuda",       "--listen",      sock, "--stats",
		            stats,       "--manifest", manifest_path(), NULL };

	if (access("/dev/nvidiactl", F_OK) == 0)
		cr_skip_test("this machine has a GPU");
	snprintf(sock, sizeof(sock), "ipc://%s/d.sock", dir);
	snprintf(stats, sizeof(stats), "ipc://%s/s.sock", dir);
	expect_run(a, 1, 1, "cuda");
}

/* Wait for the ready file; fail with stderr if the daemon exits first. */
static void wait_ready(proc *p, const char *ready)
{
	int64_t deadline = th_now_ms() + 20000;
	struct stat sb;

	while (stat(ready, &sb) != 0 || sb.st_size == 0) {
		int status;

		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			char *err = slurp(p->err_path);

			cr_assert_fail("tileopsd exited during start-up (0x%x):\n%s", status, err);
		}
		if (th_now_ms() > deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, NULL, 0);
			cr_assert_fail("tileopsd wrote no ready file %s within 20 s", ready);
		}
		th_sleep_ms(20);
	}
}

/* Write conf (a daemon on sockets in dir, plus `extra` lines) to `name`. */
static void write_config(char *conf, size_t len, const char *name, const char *extra)
{
	char text[2048], ready[128];

	path_in_dir(conf, len, name);
	path_in_dir(ready, sizeof(ready), "ready.pid");
	snprintf(text, sizeof(text),
	         "# a working config\nlisten = ipc://%s/d.sock\nstats_listen = ipc://%s/s.sock\n"
	         "backend = cpu\nmanifest = %s\nready_file = %s\nlog_level = debug\n%s",
	         dir, dir, manifest_path(), ready, extra);
	write_file(conf, text);
}

/* Start a daemon from a config file with `extra` settings and wait until it serves. */
static void start_configured(proc *p, char *conf, size_t len, const char *extra)
{
	char ready[128];
	const char *a[] = { "--config", conf, NULL };

	write_config(conf, len, "daemon.conf", extra);
	path_in_dir(ready, sizeof(ready), "ready.pid");
	spawn(p, a);
	wait_ready(p, ready);
}

/* SIGTERM must stop it with status 0 and remove the ready file. */
static void stop_gracefully(proc *p)
{
	char ready[128], *err;
	int status;

	path_in_dir(ready, sizeof(ready), "ready.pid");
	cr_assert_eq(kill(p->pid, SIGTERM), 0);
	status = wait_exit(p, 20000);
	err = slurp(p->err_path);
	cr_assert_eq(status, 0, "tileopsd exited %d after SIGTERM:\n%s", status, err);
	cr_assert(access(ready, F_OK) != 0, "the ready file is left after exit");
	free(err);
}

static tileops_status connect_private(tileops_client **c)
{
	char addr[128];
	tileops_connect_options o;

	snprintf(addr, sizeof(addr), "ipc://%s/d.sock", dir);
	memset(&o, 0, sizeof(o));
	o.address = addr;
	o.arena_bytes = 1 << 16;
	o.timeout_ms = 20000;
	o.name = "cli-test";
	return tileops_connect_opts(&o, c);
}

Test(cli, config_file_starts_it_sighup_reloads_and_sigterm_exits_0)
{
	char conf[128], sock[128];
	const char *second[] = { "--backend", "cpu",        "--listen",      sock, "--stats",
		                 sock,        "--manifest", manifest_path(), NULL };
	proc p, q;
	int status;
	char *err;

	snprintf(sock, sizeof(sock), "ipc://%s/d.sock", dir);
	start_configured(&p, conf, sizeof(conf), "max_sessions = 8\n");

	/* A second daemon on the same socket must refuse to start. */
	spawn(&q, second);
	status = wait_exit(&q, 20000);
	err = slurp(q.err_path);
	cr_expect_eq(status, 1, "a second daemon on a socket in use exited %d:\n%s", status, err);
	cr_expect(th_contains(err, "d.sock"), "the message does not name the socket:\n%s", err);
	free(err);

	/* SIGHUP reloads; the daemon keeps running. */
	cr_assert_eq(kill(p.pid, SIGHUP), 0);
	th_sleep_ms(300);
	cr_assert_eq(waitpid(p.pid, &status, WNOHANG), 0, "tileopsd exited on SIGHUP");
	stop_gracefully(&p);
}

Test(cli, session_memory_limit_refuses_tensors_beyond_it)
{
	char conf[128];
	const int64_t s32k[] = { 8192 }, s48k[] = { 12288 }, s64k[] = { 16384 };
	tileops_client *c = NULL;
	tileops_tensor a = 0, b = 0;
	proc p;

	start_configured(&p, conf, sizeof(conf), "session_memory_limit = 64K\n");
	cr_assert_eq(connect_private(&c), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 1, s32k, &a), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 1, s64k, &b), TILEOPS_ERR_QUOTA,
	             "96 KiB under a 64 KiB limit: %s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "session_memory_limit"),
	          "the message does not name the setting: %s", tileops_last_error());
	/* Freeing gives the quota back. */
	cr_assert_eq(tileops_tensor_free(c, a), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 1, s48k, &b), TILEOPS_OK,
	             "48 KiB after freeing: %s", tileops_last_error());
	tileops_close(c);
	stop_gracefully(&p);
}

Test(cli, max_sessions_refuses_one_more_and_sighup_applies_a_new_limit)
{
	char conf[128];
	tileops_client *c[3] = { NULL, NULL, NULL };
	int64_t deadline;
	tileops_status st;
	proc p;

	start_configured(&p, conf, sizeof(conf), "max_sessions = 2\n");
	cr_assert_eq(connect_private(&c[0]), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(connect_private(&c[1]), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(connect_private(&c[2]), TILEOPS_ERR_BUSY, "a third session: %s",
	             tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "max_sessions"),
	          "the message does not name the setting: %s", tileops_last_error());

	/* Raise the limit with a reload: the third client gets in. */
	write_config(conf, sizeof(conf), "daemon.conf", "max_sessions = 3\n");
	cr_assert_eq(kill(p.pid, SIGHUP), 0);
	deadline = th_now_ms() + 10000;
	while ((st = connect_private(&c[2])) == TILEOPS_ERR_BUSY && th_now_ms() < deadline)
		th_sleep_ms(50);
	cr_assert_eq(st, TILEOPS_OK, "after raising max_sessions to 3: %s", tileops_last_error());
	for (int i = 0; i < 3; i++)
		tileops_close(c[i]);
	stop_gracefully(&p);
}
