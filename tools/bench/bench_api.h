/*
 * bench_api.h - tileops-bench-dispatch --api: the dispatch figures of the
 * calls a serving engine makes (bench_api.c says which and how).
 */
#ifndef TILEOPS_BENCH_API_H
#define TILEOPS_BENCH_API_H

typedef struct bench_api_options {
	const char *address;
	const char *mode; /* pipelined, sync, windowed, plan */
	int procs;
	long ops, window, plan_ops, ns, blocks;
	int trace;
} bench_api_options;

/* Run one case and report it; 0, or -1 with a message on stderr. */
int bench_api_run(const bench_api_options *o);

/* 1 when `mode` names a mode of bench_api_run. */
int bench_api_mode_ok(const char *mode);

#endif
