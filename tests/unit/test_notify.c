/*
 * test_notify.c - the service manager's notify protocol (daemon/base/notify.c)
 * against a datagram socket of the test's own, the watchdog's variables, and
 * the journal's priority prefixes on log lines (daemon/base/log.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "notify.h"

static char sock_path[108];
static int sock_fd = -1;

/* Bind a datagram socket at a fresh path (or an abstract name when abstract)
 * and point NOTIFY_SOCKET at it. */
static void listen_notify(int abstract)
{
	struct sockaddr_un a;
	socklen_t len;

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	if (abstract) {
		snprintf(sock_path, sizeof(sock_path), "@tileops-test-notify-%ld", (long)getpid());
		memcpy(a.sun_path, sock_path, strlen(sock_path));
		a.sun_path[0] = '\0';
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sock_path));
	} else {
		snprintf(sock_path, sizeof(sock_path), "/tmp/tileops-test-notify-%ld.sock",
		         (long)getpid());
		unlink(sock_path);
		snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
		len = sizeof(a);
	}
	sock_fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	cr_assert_geq(sock_fd, 0);
	cr_assert_eq(bind(sock_fd, (struct sockaddr *)&a, len), 0, "bind %s: %s", sock_path,
	             strerror(errno));
	struct timeval tv = { 2, 0 };
	setsockopt(sock_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setenv("NOTIFY_SOCKET", sock_path, 1);
}

static void cleanup(void)
{
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	if (sock_path[0] == '/')
		unlink(sock_path);
	sock_path[0] = '\0';
}

/* The next datagram, NUL-terminated in buf; fails the test after 2 s. */
static void receive(char *buf, size_t len)
{
	ssize_t n = recv(sock_fd, buf, len - 1, 0);
	cr_assert_geq(n, 0, "no datagram on %s: %s", sock_path, strerror(errno));
	buf[n] = '\0';
}

static void expect_nothing_more(void)
{
	char buf[64];
	ssize_t n = recv(sock_fd, buf, sizeof(buf), MSG_DONTWAIT);
	cr_assert(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), "a second datagram came");
}

static void expect_datagram(const char *want)
{
	char got[2048];
	receive(got, sizeof(got));
	cr_assert_str_eq(got, want);
	expect_nothing_more();
}

TestSuite(notify, .fini = cleanup);

Test(notify, ready_sends_ready_and_the_status_line)
{
	listen_notify(0);
	cr_assert_eq(notify_ready("serving 3 ops on cpu x, 0 warm-up plans"), 1);
	expect_datagram("READY=1\nSTATUS=serving 3 ops on cpu x, 0 warm-up plans");
	cr_assert_eq(notify_ready(NULL), 1);
	expect_datagram("READY=1");
}

Test(notify, an_abstract_socket_name_is_reached)
{
	listen_notify(1);
	cr_assert_eq(notify_watchdog(), 1);
	expect_datagram("WATCHDOG=1");
}

Test(notify, stopping_status_and_watchdog_send_their_assignments)
{
	listen_notify(0);
	cr_assert_eq(notify_stopping("stopping on SIGTERM"), 1);
	expect_datagram("STOPPING=1\nSTATUS=stopping on SIGTERM");
	cr_assert_eq(notify_status("a status"), 1);
	expect_datagram("STATUS=a status");
	cr_assert_eq(notify_watchdog(), 1);
	expect_datagram("WATCHDOG=1");
}

Test(notify, reloading_carries_the_monotonic_clock)
{
	struct timespec ts;
	char got[256];
	unsigned long long usec;
	char status[64];

	listen_notify(0);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned long long before = (unsigned long long)ts.tv_sec * 1000000ull +
	                            (unsigned long long)ts.tv_nsec / 1000ull;
	cr_assert_eq(notify_reloading("reloading"), 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	unsigned long long after = (unsigned long long)ts.tv_sec * 1000000ull +
	                           (unsigned long long)ts.tv_nsec / 1000ull;
	receive(got, sizeof(got));
	cr_assert_eq(
	        sscanf(got, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=%63[^\n]", &usec, status), 2,
	        "%s", got);
	cr_assert(usec >= before && usec <= after, "MONOTONIC_USEC %llu not in [%llu, %llu]", usec,
	          before, after);
	cr_assert_str_eq(status, "reloading");
	expect_nothing_more();
}

Test(notify, a_newline_in_the_status_cannot_start_another_assignment)
{
	listen_notify(0);
	cr_assert_eq(notify_stopping("why\nREADY=1"), 1);
	expect_datagram("STOPPING=1\nSTATUS=why READY=1");
}

Test(notify, without_notify_socket_nothing_is_sent)
{
	unsetenv("NOTIFY_SOCKET");
	cr_assert_eq(notify_ready("x"), 0);
	cr_assert_eq(notify_watchdog(), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	cr_assert_eq(notify_stopping(NULL), 0);
}

Test(notify, a_socket_that_is_gone_fails_without_stopping_anything)
{
	setenv("NOTIFY_SOCKET", "/tmp/tileops-test-no-such-notify.sock", 1);
	cr_assert_eq(notify_ready("x"), -1);
	cr_assert_eq(notify_watchdog(), -1);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	cr_assert_eq(notify_watchdog(), -1);
}

/* ---- the watchdog's variables ------------------------------------------- */

/* Redirect stderr to a fresh temporary file; its fd (read it after). */
static int capture_stderr(void)
{
	char path[] = "/tmp/tileops-test-log-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	cr_assert_geq(dup2(fd, STDERR_FILENO), 0);
	return fd;
}

static void captured(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);
	cr_assert_geq(n, 0);
	buf[n] = '\0';
}

TestSuite(watchdog);

Test(watchdog, the_interval_comes_from_watchdog_usec)
{
	unsetenv("WATCHDOG_PID");
	unsetenv("WATCHDOG_USEC");
	cr_assert_eq(notify_watchdog_usec(), 0);
	setenv("WATCHDOG_USEC", "30000000", 1);
	cr_assert_eq(notify_watchdog_usec(), 30000000u);
}

Test(watchdog, it_is_ours_only_when_watchdog_pid_is_this_process)
{
	char pid[32];

	setenv("WATCHDOG_USEC", "200000", 1);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(notify_watchdog_usec(), 200000u);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid() + 1);
	setenv("WATCHDOG_PID", pid, 1);
	cr_assert_eq(notify_watchdog_usec(), 0, "another process's watchdog");
}

Test(watchdog, garbage_turns_it_off_with_a_log_line)
{
	char log[4096];

	int fd = capture_stderr();
	unsetenv("WATCHDOG_PID");
	setenv("WATCHDOG_USEC", "30s", 1);
	cr_assert_eq(notify_watchdog_usec(), 0);
	captured(fd, log, sizeof(log));
	cr_assert(strstr(log, "WATCHDOG_USEC=30s") != NULL, "log: %s", log);
	setenv("WATCHDOG_USEC", "0", 1);
	cr_assert_eq(notify_watchdog_usec(), 0);
	setenv("WATCHDOG_USEC", "200000", 1);
	setenv("WATCHDOG_PID", "me", 1);
	cr_assert_eq(notify_watchdog_usec(), 0);
	captured(fd, log, sizeof(log));
	cr_assert(strstr(log, "WATCHDOG_PID=me") != NULL, "log: %s", log);
}

/* ---- journald priorities ----------------------------------------------- */

TestSuite(journal);

/* JOURNAL_STREAM naming fd's device and inode, as systemd sets it. */
static void journal_stream_is(int fd, int match)
{
	struct stat st;
	char v[64];

	cr_assert_eq(fstat(fd, &st), 0);
	snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino + (match ? 0 : 1));
	setenv("JOURNAL_STREAM", v, 1);
}

Test(journal, lines_to_the_journal_carry_the_priority_and_no_timestamp)
{
	char log[4096];

	int fd = capture_stderr();
	journal_stream_is(fd, 1);
	cr_assert_eq(log_detect_journal(), 1);
	log_set_level(LOG_DEBUG);
	log_error("e %d", 1);
	log_warn("w");
	log_info("i");
	log_debug("d");
	captured(fd, log, sizeof(log));
	cr_assert_str_eq(log, "<3>e 1\n<4>w\n<6>i\n<7>d\n");
}

Test(journal, every_line_of_a_multi_line_message_is_prefixed)
{
	char log[4096];

	int fd = capture_stderr();
	journal_stream_is(fd, 1);
	cr_assert_eq(log_detect_journal(), 1);
	log_warn("first\nsecond\n");
	captured(fd, log, sizeof(log));
	cr_assert_str_eq(log, "<4>first\n<4>second\n");
}

Test(journal, another_stream_keeps_plain_timestamped_lines)
{
	char log[4096];
	int y, mo, d, h, mi, s, ms;
	char level[8], text[64];

	int fd = capture_stderr();
	journal_stream_is(fd, 0);
	cr_assert_eq(log_detect_journal(), 0);
	log_error("plain");
	captured(fd, log, sizeof(log));
	cr_assert_eq(sscanf(log, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ %7s %63s", &y, &mo, &d, &h, &mi, &s,
	                    &ms, level, text),
	             9, "%s", log);
	cr_assert_str_eq(level, "error");
	cr_assert_str_eq(text, "plain");
	cr_assert_neq(log[0], '<');
	unsetenv("JOURNAL_STREAM");
	cr_assert_eq(log_detect_journal(), 0);
}
