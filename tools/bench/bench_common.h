/*
 * bench_common.h - what the benches share: a clock, medians, the report
 * (one JSON line per measurement, a markdown table at the end), number
 * parsing, and client processes started together behind a pipe barrier.
 *
 * Used by the benches through tileopsd (tileops-bench-dispatch, tileops-bench-layer) and by the
 * in-process CUDA baselines (the *_baseline.cu benches), so it depends on nothing but
 * libc and POSIX. Not thread safe: the report is one per process.
 */
#ifndef TILEOPS_BENCH_COMMON_H
#define TILEOPS_BENCH_COMMON_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic time in microseconds. */
double bench_now_us(void);

/* Sort v[0..n) ascending, in place (for percentiles). */
void bench_sort(double *v, long n);

/* The median of v[0..n) (n >= 1); sorts v in place. */
double bench_median(double *v, long n);

/* strtol of the whole of s within [lo, hi]: 0, or -1 (out untouched). */
int bench_parse_long(const char *s, long lo, long hi, long *out);

/*
 * Start the report: `bench` names every JSON line's "bench" field; lines go
 * to `json_path` (appended) or, when NULL, stdout. Returns -1 with a message
 * on stderr when the file cannot be opened.
 */
int bench_report_open(const char *prog, const char *bench, const char *json_path);

/* Add "backend": name to the JSON lines from now on (NULL: leave it out). */
void bench_report_backend(const char *name);

/* The backend set last, or "unknown". */
const char *bench_report_backend_name(void);

/* Record one measurement: print its JSON line and keep it for the table. */
void bench_report(const char *name, const char *kernel, const char *stat, double value,
                  const char *unit, long n);

/* Print the markdown table of every measurement; `title` heads the first column. */
void bench_report_table(const char *title);

/* Flush and close the JSON file (stdout stays open). */
void bench_report_close(void);

/* Read or write exactly len bytes, retrying on EINTR: 0, or -1 at EOF or error. */
int bench_read_all(int fd, void *p, size_t len);
int bench_write_all(int fd, const void *p, size_t len);

/*
 * Processes that run timed phases together. bench_procs_run forks n
 * processes; each runs fn(proc, idx, arg). Before each of the `phases`
 * phases the child calls bench_proc_start (it blocks until every process
 * is ready: the phase's common start), and after it bench_proc_finish with
 * its result (result_size bytes, at most BENCH_PROC_RESULT_MAX). A phase the
 * child skips (it failed before) is finished for it with a zeroed result.
 * fn's return value is the child's exit status (0: success).
 *
 * In the parent, results[phase * n + k] receive the phase's results in the
 * order they arrive (put the process index in the result when it matters),
 * and t0_us[phase] the time of the phase's common start. Returns 0 when
 * every child exited with status 0, else -1 (a message on stderr). Fork
 * before creating anything a child must not inherit (a CUDA context).
 */
#define BENCH_PROC_RESULT_MAX 512
#define BENCH_PROC_PHASES_MAX 4
#define BENCH_PROCS_MAX 64

typedef struct bench_proc bench_proc;
typedef int (*bench_proc_fn)(bench_proc *p, int idx, void *arg);

void bench_proc_start(bench_proc *p);
void bench_proc_finish(bench_proc *p, const void *result);

int bench_procs_run(const char *prog, int n, int phases, size_t result_size, bench_proc_fn fn,
                    void *arg, void *results, double *t0_us);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_BENCH_COMMON_H */
