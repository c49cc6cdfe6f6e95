/*
 * bench_client.h - what the benches through tileopsd share on top of
 * bench_common.h: failure messages in the library's own words, and a
 * connection that records the daemon's backend in the report.
 */
#ifndef TILEOPS_BENCH_CLIENT_H
#define TILEOPS_BENCH_CLIENT_H

#include "tileops.h"

/* The program name the messages start with (set once in main). */
void bench_client_prog(const char *prog);

/* Print "PROG: what: status (last error)"; returns -1 for chaining. */
int bench_fail(const char *what, tileops_status st);

/*
 * Connect to `address` (NULL: the default) as a client named `name`, and
 * pass the daemon's backend to bench_report_backend. 0, or -1 with a message.
 */
int bench_connect(const char *address, const char *name, tileops_client **c);

#endif /* TILEOPS_BENCH_CLIENT_H */
