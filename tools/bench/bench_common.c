/*
 * bench_common.c - the benches' shared clock, report and process barrier
 * (bench_common.h says what each promises).
 */
#define _POSIX_C_SOURCE 200809L
#include "bench_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 128

struct row {
	char name[48], kernel[40], stat[12], unit[16];
	double value;
	long n;
};

static struct row rows[MAX_ROWS];
static int n_rows;
static FILE *json_out;
static char bench_name[32] = "bench";
static char backend[16];

double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

void bench_sort(double *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
}

double bench_median(double *v, long n)
{
	bench_sort(v, n);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* ---- the report ------------------------------------------------------------ */

int bench_report_open(const char *prog, const char *bench, const char *json_path)
{
	snprintf(bench_name, sizeof(bench_name), "%s", bench);
	json_out = stdout;
	if (json_path != NULL && (json_out = fopen(json_path, "a")) == NULL) {
		fprintf(stderr, "%s: cannot open %s: %s\n", prog, json_path, strerror(errno));
		json_out = stdout;
		return -1;
	}
	return 0;
}

void bench_report_backend(const char *name)
{
	snprintf(backend, sizeof(backend), "%s", name != NULL ? name : "");
}

const char *bench_report_backend_name(void)
{
	return backend[0] ? backend : "unknown";
}

void bench_report(const char *name, const char *kernel, const char *stat, double value,
                  const char *unit, long n)
{
	FILE *f = json_out != NULL ? json_out : stdout;

	if (n_rows < MAX_ROWS) {
		struct row *r = &rows[n_rows++];
		snprintf(r->name, sizeof(r->name), "%s", name);
		snprintf(r->kernel, sizeof(r->kernel), "%s", kernel);
		snprintf(r->stat, sizeof(r->stat), "%s", stat);
		snprintf(r->unit, sizeof(r->unit), "%s", unit);
		r->value = value;
		r->n = n;
	}
	fprintf(f, "{\"bench\":\"%s\",", bench_name);
	if (backend[0])
		fprintf(f, "\"backend\":\"%s\",", backend);
	fprintf(f,
	        "\"name\":\"%s\",\"kernel\":\"%s\",\"stat\":\"%s\",\"value\":%.4f,"
	        "\"unit\":\"%s\",\"n\":%ld}\n",
	        name, kernel, stat, value, unit, n);
	fflush(f);
}

void bench_report_table(const char *title)
{
	printf("\n| %s | kernel | value | unit | stat | n |\n", title);
	printf("| --- | --- | ---: | --- | --- | ---: |\n");
	for (int i = 0; i < n_rows; i++) {
		const struct row *r = &rows[i];
		printf("| %s | %s | %.2f | %s | %s | %ld |\n", r->name, r->kernel, r->value,
		       r->unit, r->stat, r->n);
	}
}

void bench_report_close(void)
{
	if (json_out != NULL && json_out != stdout)
		fclose(json_out);
	json_out = NULL;
}

/* ---- pipes ------------------------------------------------------------------ */

int bench_read_all(int fd, void *p, size_t len)
{
	char *b = p;

	while (len > 0) {
		ssize_t r = read(fd, b, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		len -= (size_t)r;
	}
	return 0;
}

int bench_write_all(int fd, const void *p, size_t len)
{
	const char *b = p;

	while (len > 0) {
		ssize_t w = write(fd, b, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		len -= (size_t)w;
	}
	return 0;
}

/* ---- processes behind a barrier --------------------------------------------- */

/*
 * One pipe carries every "ready" byte and one every result; each phase has
 * its own "go" pipe, which the parent closes to start it (every child's
 * read then returns 0 at once). Results are at most PIPE_BUF bytes, so
 * children's writes never interleave.
 */
struct bench_proc {
	int ready_fd, result_fd;
	int go_fd[BENCH_PROC_PHASES_MAX];
	int phases, started, finished;
	size_t result_size;
};

void bench_proc_start(bench_proc *p)
{
	char ch = 1;

	if (p->started > p->finished || p->started == p->phases)
		return;
	bench_write_all(p->ready_fd, &ch, 1);
	while (read(p->go_fd[p->started], &ch, 1) < 0 && errno == EINTR) {
	}
	p->started++;
}

void bench_proc_finish(bench_proc *p, const void *result)
{
	if (p->finished == p->phases)
		return;
	if (p->started == p->finished)
		bench_proc_start(p);
	bench_write_all(p->result_fd, result, p->result_size);
	p->finished++;
}

static void child_run(bench_proc *p, int idx, bench_proc_fn fn, void *arg)
{
	char zero[BENCH_PROC_RESULT_MAX];
	int rc = fn(p, idx, arg);

	/* The parent waits for every phase of every child: finish the rest. */
	memset(zero, 0, sizeof(zero));
	while (p->finished < p->phases)
		bench_proc_finish(p, zero);
	fflush(NULL);
	_exit(rc == 0 ? 0 : 1);
}

/* Collect one phase: every ready byte, the start, every result. */
static int parent_phase(int n, int ready_fd, int go_fd, int result_fd, size_t size, char *results,
                        double *t0)
{
	char ch;
	int ok = 0;

	for (int i = 0; i < n; i++) {
		if (bench_read_all(ready_fd, &ch, 1) < 0)
			ok = -1;
	}
	*t0 = bench_now_us();
	close(go_fd);
	for (int i = 0; i < n; i++) {
		if (bench_read_all(result_fd, results + (size_t)i * size, size) < 0)
			ok = -1;
	}
	return ok;
}

int bench_procs_run(const char *prog, int n, int phases, size_t result_size, bench_proc_fn fn,
                    void *arg, void *results, double *t0_us)
{
	int ready[2], result[2], go[BENCH_PROC_PHASES_MAX][2];
	pid_t pids[BENCH_PROCS_MAX];
	int rc = 0;

	if (n < 1 || n > BENCH_PROCS_MAX || phases < 1 || phases > BENCH_PROC_PHASES_MAX ||
	    result_size > BENCH_PROC_RESULT_MAX) {
		fprintf(stderr, "%s: bench_procs_run: bad arguments\n", prog);
		return -1;
	}
	if (pipe(ready) < 0 || pipe(result) < 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		return -1;
	}
	for (int ph = 0; ph < phases; ph++) {
		if (pipe(go[ph]) < 0) {
			fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
			return -1;
		}
	}
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		if ((pids[i] = fork()) < 0) {
			fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
			return -1;
		}
		if (pids[i] == 0) {
			bench_proc p = { .ready_fd = ready[1],
				         .result_fd = result[1],
				         .phases = phases,
				         .result_size = result_size };
			close(ready[0]);
			close(result[0]);
			for (int ph = 0; ph < phases; ph++) {
				close(go[ph][1]);
				p.go_fd[ph] = go[ph][0];
			}
			child_run(&p, i, fn, arg);
		}
	}
	close(ready[1]);
	close(result[1]);
	for (int ph = 0; ph < phases; ph++)
		close(go[ph][0]);
	for (int ph = 0; ph < phases; ph++) {
		char *r = (char *)results + (size_t)ph * (size_t)n * result_size;
		if (parent_phase(n, ready[0], go[ph][1], result[0], result_size, r, &t0_us[ph]) < 0)
			rc = -1;
	}
	close(ready[0]);
	close(result[0]);
	for (int i = 0; i < n; i++) {
		int ws;
		if (waitpid(pids[i], &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			rc = -1;
	}
	if (rc < 0)
		fprintf(stderr, "%s: a process failed (see its messages)\n", prog);
	return rc;
}
