/* notify.c - the sd_notify protocol (see notify.h). */
#include "notify.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* The first failure is logged, later ones not (notify.h). */
static atomic_int notify_failed_once;

static int notify_fail(const char *name, const char *why)
{
	if (!atomic_exchange(&notify_failed_once, 1))
		log_warn("systemd notify: NOTIFY_SOCKET=%s: %s (logged once; the daemon runs on)",
		         name, why);
	return -1;
}

/* Fill addr from $NOTIFY_SOCKET; its length, 0 when unset, -1 when unusable. */
static socklen_t notify_address(struct sockaddr_un *addr, const char **name)
{
	const char *s = getenv("NOTIFY_SOCKET");
	*name = s;
	if (!s || !s[0])
		return 0;
	size_t len = strlen(s);
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	if (s[0] != '@' && s[0] != '/')
		return (socklen_t)-1; /* systemd's vsock: addresses are not served */
	if (len >= sizeof(addr->sun_path))
		return (socklen_t)-1;
	memcpy(addr->sun_path, s, len);
	if (s[0] == '@') {
		/* Abstract: a leading NUL, and the length counts the name only. */
		addr->sun_path[0] = '\0';
		return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	}
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

static int notify_send(const char *msg)
{
	struct sockaddr_un addr;
	const char *name;
	socklen_t alen = notify_address(&addr, &name);
	if (alen == 0)
		return 0;
	if (alen == (socklen_t)-1)
		return notify_fail(name, "not a socket path or an @abstract name that fits "
		                         "sockaddr_un");
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return notify_fail(name, strerror(errno));
	/* A manager that stops reading must not hold the loop for long: the
	 * message is dropped after a second instead. */
	struct timeval tv = { 1, 0 };
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	struct msghdr mh = {
		.msg_name = &addr,
		.msg_namelen = alen,
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	int e = errno;
	close(fd);
	if (n < 0)
		return notify_fail(name, strerror(e));
	return 1;
}

/*
 * `head` (lines ending in '\n'), then STATUS=<status> when status is not
 * NULL. A newline in status would start a new assignment, so each becomes
 * a space.
 */
static int notify_with_status(const char *head, const char *status)
{
	char msg[1024];
	size_t n = strlen(head); /* short: the callers' literals */
	memcpy(msg, head, n + 1);
	if (status) {
		snprintf(msg + n, sizeof(msg) - n, "STATUS=%s", status);
		for (char *p = msg + n; *p; p++)
			if (*p == '\n')
				*p = ' ';
	} else if (n > 0) {
		msg[n - 1] = '\0'; /* no newline after the last line */
	}
	return notify_send(msg);
}

int notify_ready(const char *status)
{
	return notify_with_status("READY=1\n", status);
}

int notify_reloading(const char *status)
{
	struct timespec ts;
	char head[96];
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(head, sizeof(head), "RELOADING=1\nMONOTONIC_USEC=%llu\n",
	         (unsigned long long)ts.tv_sec * 1000000ull +
	                 (unsigned long long)ts.tv_nsec / 1000ull);
	return notify_with_status(head, status);
}

int notify_stopping(const char *status)
{
	return notify_with_status("STOPPING=1\n", status);
}

int notify_status(const char *status)
{
	return notify_with_status("", status ? status : "");
}

int notify_watchdog(void)
{
	return notify_send("WATCHDOG=1");
}

/* A decimal integer in 1..UINT64_MAX with nothing after it, else 0. */
static uint64_t notify_parse_u64(const char *s)
{
	if (!s || *s < '0' || *s > '9')
		return 0;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return 0;
	return (uint64_t)v;
}

uint64_t notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	if (!usec || !usec[0])
		return 0;
	uint64_t v = notify_parse_u64(usec);
	if (v == 0) {
		log_warn("systemd watchdog: WATCHDOG_USEC=%s is not a positive number of "
		         "microseconds; the watchdog is off",
		         usec);
		return 0;
	}
	if (pid && pid[0]) {
		uint64_t p = notify_parse_u64(pid);
		if (p == 0) {
			log_warn("systemd watchdog: WATCHDOG_PID=%s is not a process id; the "
			         "watchdog is off",
			         pid);
			return 0;
		}
		if (p != (uint64_t)getpid()) {
			log_debug("systemd watchdog: WATCHDOG_PID=%s is not this process (%ld); "
			          "the watchdog is off",
			          pid, (long)getpid());
			return 0;
		}
	}
	return v;
}

void notify_forget(void)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
