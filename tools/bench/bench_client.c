/*
 * bench_client.c - the client benches' shared failure report and connect.
 */
#include "bench_client.h"

#include <stdio.h>
#include <string.h>

#include "bench_common.h"

static const char *prog_name = "tileops-bench";

void bench_client_prog(const char *prog)
{
	prog_name = prog;
}

int bench_fail(const char *what, tileops_status st)
{
	fprintf(stderr, "%s: %s: %s (%s)\n", prog_name, what, tileops_strerror(st),
	        tileops_last_error());
	return -1;
}

int bench_connect(const char *address, const char *name, tileops_client **c)
{
	tileops_connect_options co;
	tileops_server_info info;
	tileops_status st;

	memset(&co, 0, sizeof(co));
	co.address = address;
	co.name = name;
	if ((st = tileops_connect_opts(&co, c)) != TILEOPS_OK)
		return bench_fail("tileops_connect", st);
	if (tileops_server_info_get(*c, &info) == TILEOPS_OK && info.backend != NULL)
		bench_report_backend(info.backend);
	return 0;
}
