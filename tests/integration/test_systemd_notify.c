/*
 * test_systemd_notify.c - what tileopsd tells systemd (Type=notify,
 * WatchdogSec=): a tileopsd with a warm-up plan, NOTIFY_SOCKET naming a
 * datagram socket of this test's and WATCHDOG_USEC=200000. READY=1 comes
 * once clients can connect and run ops, WATCHDOG=1 every 100 ms while it is
 * healthy and not while an executor thread is stuck past watchdog_stall_ms,
 * RELOADING=1 then READY=1 on SIGHUP, STOPPING=1 before it exits on SIGTERM.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define MAX_MSGS 4096

/* Every datagram the daemon sent, with the time it was read. */
typedef struct msg {
	int64_t at_ms;
	char text[512];
	int ready_file_existed; /* when it was read */
} msg;

static msg msgs[MAX_MSGS];
static int n_msgs;
static pthread_mutex_t msgs_mu = PTHREAD_MUTEX_INITIALIZER;
static int sock_fd = -1;
static char sock_path[108], dir[64];
static volatile int receiver_stop;
static pthread_t receiver;
static daemon2 d;

static void record(const char *text)
{
	struct stat st;
	pthread_mutex_lock(&msgs_mu);
	if (n_msgs < MAX_MSGS) {
		msg *m = &msgs[n_msgs++];
		m->at_ms = th_now_ms();
		snprintf(m->text, sizeof(m->text), "%s", text);
		m->ready_file_existed = d.ready[0] && stat(d.ready, &st) == 0 && st.st_size > 0;
	}
	pthread_mutex_unlock(&msgs_mu);
}

static int read_one(int timeout_ms)
{
	struct pollfd p = { .fd = sock_fd, .events = POLLIN };
	char buf[512];
	if (poll(&p, 1, timeout_ms) <= 0)
		return 0;
	ssize_t n = recv(sock_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	if (n < 0)
		return 0;
	buf[n] = '\0';
	record(buf);
	return 1;
}

static void *receive_main(void *arg)
{
	while (!receiver_stop)
		read_one(20);
	return NULL;
}

static void listen_notify(void)
{
	struct sockaddr_un a;

	snprintf(dir, sizeof(dir), "/tmp/tileops-notify-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock_path, sizeof(sock_path), "%s/notify.sock", dir);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	sock_fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	cr_assert_geq(sock_fd, 0);
	cr_assert_eq(bind(sock_fd, (struct sockaddr *)&a, sizeof(a)), 0, "bind: %s",
	             strerror(errno));
	setenv("NOTIFY_SOCKET", sock_path, 1);
	setenv("WATCHDOG_USEC", "200000", 1);
	unsetenv("WATCHDOG_PID");
	receiver_stop = 0;
	cr_assert_eq(pthread_create(&receiver, NULL, receive_main, NULL), 0);
}

/* Stop the receiver, then take what is still queued (sent before now). */
static void stop_receiver(void)
{
	if (sock_fd < 0)
		return;
	receiver_stop = 1;
	pthread_join(receiver, NULL);
	while (read_one(0))
		;
}

static void cleanup(void)
{
	char cmd[128];

	daemon2_kill_running();
	stop_receiver();
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	dir[0] = '\0';
}

TestSuite(systemd_notify, .fini = cleanup, .timeout = 120);

/* Index of the first message at or after `from` that starts with `prefix`,
 * waiting up to timeout_ms for it; -1 if none came. */
static int wait_msg(int from, const char *prefix, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	for (;;) {
		pthread_mutex_lock(&msgs_mu);
		int n = n_msgs, found = -1;
		for (int i = from; i < n && found < 0; i++)
			if (strncmp(msgs[i].text, prefix, strlen(prefix)) == 0)
				found = i;
		pthread_mutex_unlock(&msgs_mu);
		if (found >= 0 || th_now_ms() > deadline)
			return found;
		th_sleep_ms(10);
	}
}

static int msg_count(void)
{
	pthread_mutex_lock(&msgs_mu);
	int n = n_msgs;
	pthread_mutex_unlock(&msgs_mu);
	return n;
}

/* WATCHDOG=1 messages read in [from_ms, to_ms), and the longest gap between
 * consecutive ones there. */
static int pets_between(int64_t from_ms, int64_t to_ms, int64_t *longest_gap)
{
	int n = 0;
	int64_t last = from_ms, gap = 0;
	pthread_mutex_lock(&msgs_mu);
	for (int i = 0; i < n_msgs; i++) {
		if (strcmp(msgs[i].text, "WATCHDOG=1") != 0 || msgs[i].at_ms < from_ms ||
		    msgs[i].at_ms >= to_ms)
			continue;
		if (msgs[i].at_ms - last > gap)
			gap = msgs[i].at_ms - last;
		last = msgs[i].at_ms;
		n++;
	}
	pthread_mutex_unlock(&msgs_mu);
	if (to_ms - last > gap)
		gap = to_ms - last;
	if (longest_gap)
		*longest_gap = gap;
	return n;
}

static const char plan_yaml[] =
        "plans:\n"
        "  - name: decode-norm\n"
        "    tenant: serving\n"
        "    buckets: [1, 4]\n"
        "    bucketed: [x, h]\n"
        "    tensors:\n"
        "      - {name: x, dtype: f32, shape: [4, 32]}\n"
        "      - {name: w, dtype: f32, shape: [32]}\n"
        "      - {name: h, dtype: f32, shape: [4, 32]}\n"
        "    ops:\n"
        "      - {op: rms_norm, inputs: [x, w], outputs: [h], params: {eps: 1.0e-5}}\n";

static void start_daemon(void)
{
	char path[128], config[384];

	listen_notify();
	snprintf(path, sizeof(path), "%s/warmup.yaml", dir);
	daemon2_write_text(path, plan_yaml);
	snprintf(config, sizeof(config),
	         "tenant = serving graphs=16\nwarmup = %s\ndiagnostic_ops = on\n"
	         "watchdog_stall_ms = 300\n",
	         path);
	daemon2_start(&d, config);
	daemon2_use(&d);
}

/* One spin op of `ns` nanoseconds, run to its end; out[0] = x[0] + 1. */
static void run_spin(tileops_client *c, int64_t ns)
{
	int64_t shape[1] = { 1 };
	float x = 2.0f, got = 0.0f;
	tileops_tensor tx = th_tensor_f32(c, 1, shape, &x);
	tileops_tensor out = th_tensor(c, TILEOPS_F32, 1, shape);
	tileops_param params[2] = { tileops_param_int("ns", ns), tileops_param_int("blocks", 1) };
	tileops_op op = { .name = "spin",
		          .inputs = &tx,
		          .n_inputs = 1,
		          .outputs = &out,
		          .n_outputs = 1,
		          .params = params,
		          .n_params = 2 };
	th_run(c, &op);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	th_read(c, out, &got, sizeof(got));
	cr_assert_eq(got, 3.0f);
}

Test(systemd_notify, ready_comes_when_clients_can_run_ops)
{
	start_daemon();
	int r = wait_msg(0, "READY=1", TH_TIMEOUT_MS);
	cr_assert_eq(r, 0, "the first message is READY=1 (got %d messages, first: %s)", msg_count(),
	             msg_count() ? msgs[0].text : "none");
	cr_assert(msgs[r].ready_file_existed, "READY=1 came before the ready file");
	cr_assert(strstr(msgs[r].text, "\nSTATUS=serving ") != NULL &&
	                  strstr(msgs[r].text, " on cpu ") != NULL &&
	                  strstr(msgs[r].text, ", 1 warm-up plans") != NULL,
	          "%s", msgs[r].text);
	/* No retrying: right after READY=1 the control socket takes a client. */
	tileops_client *c = NULL;
	cr_assert_eq(tileops_connect(d.address, &c), TILEOPS_OK, "connect right after READY=1: %s",
	             tileops_last_error());
	run_spin(c, 1000);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(systemd_notify, the_watchdog_is_petted_every_half_interval)
{
	start_daemon();
	cr_assert_geq(wait_msg(0, "READY=1", TH_TIMEOUT_MS), 0);
	int64_t t0 = th_now_ms();
	th_sleep_ms(1000);
	int n = pets_between(t0, th_now_ms(), NULL);
	/* 10 at 100 ms; a loaded test machine may delay a few. */
	cr_assert_geq(n, 4, "%d WATCHDOG=1 in 1 s at WATCHDOG_USEC=200000", n);
	daemon2_stop(&d);
}

Test(systemd_notify, a_stuck_executor_thread_stops_the_petting_until_it_recovers)
{
	start_daemon();
	cr_assert_geq(wait_msg(0, "READY=1", TH_TIMEOUT_MS), 0);
	tileops_client *c = th_connect("stuck", 1 << 20);
	/* One request of 1 s on the executor thread, past watchdog_stall_ms = 300. */
	int64_t t0 = th_now_ms();
	run_spin(c, 1000000000);
	int64_t t1 = th_now_ms(), gap = 0;
	pets_between(t0, t1, &gap);
	cr_assert_geq(gap, 500, "the longest gap between pets during a 1 s request was %lld ms",
	              (long long)gap);
	cr_assert(daemon2_log_has(&d, "no longer petting"), "the log names the stall");
	/* Work done, the thread is alive again: petting resumes. */
	th_sleep_ms(1000);
	int n = pets_between(t1, th_now_ms(), NULL);
	cr_assert_geq(n, 4, "%d WATCHDOG=1 in the second after the request", n);
	cr_assert(daemon2_log_has(&d, "healthy again"));
	/* Short requests, however many, keep the petting going. */
	int64_t t2 = th_now_ms();
	for (int i = 0; i < 200; i++)
		run_spin(c, 5000000);
	int64_t t3 = th_now_ms();
	pets_between(t2, t3, &gap);
	cr_assert_lt(gap, 300, "a gap of %lld ms between pets under 5 ms requests", (long long)gap);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(systemd_notify, sighup_reports_reloading_then_ready)
{
	start_daemon();
	cr_assert_geq(wait_msg(0, "READY=1", TH_TIMEOUT_MS), 0);
	int from = msg_count();
	cr_assert_eq(kill(d.pid, SIGHUP), 0);
	int rl = wait_msg(from, "RELOADING=1\nMONOTONIC_USEC=", TH_TIMEOUT_MS);
	cr_assert_geq(rl, 0, "no RELOADING=1 after SIGHUP");
	int rd = wait_msg(rl, "READY=1\nSTATUS=serving ", TH_TIMEOUT_MS);
	cr_assert_gt(rd, rl, "no READY=1 after RELOADING=1");
	daemon2_stop(&d);
}

Test(systemd_notify, a_failed_reload_is_ready_again_on_the_running_config)
{
	char conf[128];

	start_daemon();
	cr_assert_geq(wait_msg(0, "READY=1", TH_TIMEOUT_MS), 0);
	snprintf(conf, sizeof(conf), "%s/tileopsd.conf", d.dir);
	daemon2_write_text(conf, "no_such_key = 1\n");
	int from = msg_count();
	cr_assert_eq(kill(d.pid, SIGHUP), 0);
	int rl = wait_msg(from, "RELOADING=1", TH_TIMEOUT_MS);
	cr_assert_geq(rl, 0);
	int rd = wait_msg(rl, "READY=1\nSTATUS=reload failed, kept the running config",
	                  TH_TIMEOUT_MS);
	cr_assert_gt(rd, rl, "READY=1 after a failed reload says so");
	daemon2_stop(&d);
}

Test(systemd_notify, sigterm_reports_stopping_before_the_exit)
{
	start_daemon();
	cr_assert_geq(wait_msg(0, "READY=1", TH_TIMEOUT_MS), 0);
	daemon2_stop(&d); /* SIGTERM; asserts exit status 0 */
	/* Exited: what it sent is queued already. */
	stop_receiver();
	int s = wait_msg(0, "STOPPING=1\nSTATUS=stopping on SIGTERM", 0);
	cr_assert_geq(s, 0, "no STOPPING=1 before the exit");
	for (int i = s + 1; i < msg_count(); i++)
		cr_assert_str_eq(msgs[i].text, "WATCHDOG=1", "after STOPPING=1: %s", msgs[i].text);
}
