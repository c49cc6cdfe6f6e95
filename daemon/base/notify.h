/*
 * notify.h - telling the service manager how the daemon is doing: the
 * sd_notify(3) protocol, spoken without libsystemd.
 *
 * Each message is one datagram of "KEY=value" lines on the AF_UNIX socket
 * that $NOTIFY_SOCKET names: a file system path, or an abstract socket when
 * the name starts with '@'. Where NOTIFY_SOCKET is unset or empty (not
 * started by systemd, or Type=simple) every function here is a no-op that
 * returns 0. A message that cannot be sent is logged once per process (not
 * per call, so a broken socket does not fill the log twice a watchdog
 * interval) and never stops the daemon: the service manager then sees a
 * daemon that is slow to report, which its own time-outs already handle.
 *
 * The variables are read at each call, so a process that sets them later
 * (the tests) is heard. Call from one thread at a time (the daemon's loop
 * thread): getenv races with setenv elsewhere.
 *
 * Each returns 1 when the datagram was sent, 0 when there is no socket to
 * send to, -1 when sending failed.
 */
#ifndef TILEOPSD_NOTIFY_H
#define TILEOPSD_NOTIFY_H

#include <stdint.h>

/* READY=1, plus STATUS=<status> when status is not NULL: the start-up (or a
 * reload) is over and the daemon serves. */
int notify_ready(const char *status);
/* RELOADING=1 and MONOTONIC_USEC=<now> (what systemd 253's Type=notify-reload
 * asks for; older systemd ignores the second line), plus STATUS= when status
 * is not NULL. Follow it with notify_ready when the reload is over. */
int notify_reloading(const char *status);
/* STOPPING=1, plus STATUS=<status> (why) when status is not NULL. */
int notify_stopping(const char *status);
/* STATUS=<status> alone: the line `systemctl status` shows. */
int notify_status(const char *status);
/* WATCHDOG=1: the daemon is alive and healthy (see notify_watchdog_usec). */
int notify_watchdog(void);

/*
 * The watchdog interval the service manager asked for ($WATCHDOG_USEC,
 * microseconds), or 0 when there is none: WATCHDOG_USEC unset, not a
 * positive integer (logged), or WATCHDOG_PID set to another process's pid
 * (the variables were inherited, and the watchdog is not ours to pet).
 * systemd recommends petting at half this interval.
 */
uint64_t notify_watchdog_usec(void);

/* Unset NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, so that a program
 * this process executes does not speak for it. */
void notify_forget(void);

#endif
