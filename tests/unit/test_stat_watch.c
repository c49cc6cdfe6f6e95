/*
 * test_stat_watch.c - tileops-stat's summary and --watch view against canned
 * stats documents served on a stats socket of the test's own (nng REP), so
 * the rates and percentiles they must give are known: the current document
 * shape with latency histograms, the shape of older daemons without them,
 * and documents that are not what a daemon sends.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

/* ---- a stats socket serving canned documents ------------------------------ */

struct fake_stats {
	char address[128];
	const char *const *docs; /* answered in order; the last one again after that */
	int n_docs;
	int served;
	nng_socket sock;
	pthread_t thread;
};

static void *fake_stats_loop(void *arg)
{
	struct fake_stats *f = arg;

	for (;;) {
		nng_msg *m;
		const char *doc;

		if (nng_recvmsg(f->sock, &m, 0) != 0)
			return NULL; /* closed, or the test took too long */
		doc = f->docs[f->served < f->n_docs ? f->served : f->n_docs - 1];
		f->served++;
		nng_msg_clear(m);
		if (nng_msg_append(m, doc, strlen(doc)) != 0 || nng_sendmsg(f->sock, m, 0) != 0)
			nng_msg_free(m);
	}
}

static void fake_stats_start(struct fake_stats *f, const char *const *docs, int n)
{
	static int seq;

	memset(f, 0, sizeof(*f));
	f->docs = docs;
	f->n_docs = n;
	snprintf(f->address, sizeof(f->address), "ipc:///tmp/tileops-stat-test-%d-%d.sock",
	         (int)getpid(), seq++);
	cr_assert_eq(nng_rep0_open(&f->sock), 0);
	nng_socket_set_ms(f->sock, NNG_OPT_RECVTIMEO, 20000);
	cr_assert_eq(nng_listen(f->sock, f->address, NULL, 0), 0, "cannot listen at %s",
	             f->address);
	cr_assert_eq(pthread_create(&f->thread, NULL, fake_stats_loop, f), 0);
}

static void fake_stats_stop(struct fake_stats *f)
{
	nng_close(f->sock);
	pthread_join(f->thread, NULL);
	unlink(f->address + strlen("ipc://"));
}

/* Run tileops-stat with args against f; returns its output (malloc'd), *status its exit. */
static char *run_stat(struct fake_stats *f, const char *args, int *status)
{
	const char *bin = getenv("TILEOPS_STAT");
	char cmd[1024];
	size_t cap = 1 << 16, len = 0, got;
	char *out = malloc(cap);
	FILE *p;

	cr_assert_not_null(bin, "TILEOPS_STAT names no tileops-stat binary");
	snprintf(cmd, sizeof(cmd), "'%s' --address '%s' %s 2>&1", bin, f->address, args);
	cr_assert_not_null(p = popen(cmd, "r"));
	while ((got = fread(out + len, 1, cap - 1 - len, p)) > 0)
		len += got;
	out[len] = '\0';
	*status = pclose(p);
	return out;
}

/* The line of out that starts with word (an op or session row), or NULL. */
static const char *row(const char *out, const char *word, int nth)
{
	size_t n = strlen(word);
	const char *p = out;

	while (p != NULL && *p) {
		if (strncmp(p, word, n) == 0 && p[n] == ' ' && nth-- == 0)
			return p;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* The fields of a row, split at spaces, into f (each up to 31 chars). */
static int fields(const char *line, char f[][32], int max)
{
	int n = 0;

	while (line != NULL && *line && *line != '\n' && n < max) {
		int k = 0;

		while (*line == ' ')
			line++;
		if (*line == '\n' || *line == '\0')
			break;
		while (*line && *line != ' ' && *line != '\n' && k < 31)
			f[n][k++] = *line++;
		f[n++][k] = '\0';
	}
	return n;
}

/* ---- the documents -------------------------------------------------------- */

/*
 * Two seconds apart by the daemon's uptime. add: 200 more calls (100/s), 4
 * more errors, 2000 us more device time, 2e9 more bytes and 4e9 more flops,
 * its buckets (le 10, 20, 50, 100, +Inf) gaining 20, 100, 60, 20, 0 samples:
 * p50 at rank 100 of 200 lies in (10, 20], 80 of its 100 in: 18.0 us; p99 at
 * rank 198 lies in (50, 100], 18 of its 20 in: 95.0 us; no sample above 100.
 * sol: 0.5 of 1000 us then 0.6 of 3000 us, so 1300 of the interval's 2000.
 * rms_norm appears in the interval (its whole count belongs to it), as an
 * older daemon would print it; mul did not run.
 */
static const char *const doc1 =
        "{\"version\":\"9.9.9\",\"uptime_s\":10.000,\"backend\":\"cpu\",\"device\":\"test\","
        "\"ready\":true,\"sessions\":1,\"bytes_in_use\":1048576,\"requests\":120,"
        "\"errors\":0,\"jobs_in_flight\":0,\"connections\":1,"
        "\"ops\":{\"add\":{\"count\":100,\"errors\":0,\"timed\":100,\"total_time_us\":1000,"
        "\"flops\":1000000000,\"bytes\":1000000000,\"achieved_gbps\":1000,"
        "\"achieved_tflops\":1,\"sol_share\":0.5,\"latency_us\":{\"count\":100,\"sum\":900,"
        "\"p50\":10,\"p99\":47,\"max\":48,\"buckets\":[[10,50],[20,90],[50,100],[100,100],"
        "[null,100]]}},"
        "\"mul\":{\"count\":5,\"errors\":0,\"timed\":5,\"total_time_us\":50,\"flops\":5,"
        "\"bytes\":5}},"
        "\"sessions_detail\":[{\"id\":1,\"name\":\"svc-a\",\"tenant\":\"t1\",\"ops\":100,"
        "\"errors\":0,\"latency_us\":{\"count\":100,\"buckets\":[[10,50],[20,90],[50,100],"
        "[100,100],[null,100]]}}],"
        "\"roofline\":{\"bandwidth_gbs\":4240,\"tflops\":{\"bf16\":730},\"source\":\"measured\"}}";

static const char *const doc2 =
        "{\"version\":\"9.9.9\",\"uptime_s\":12.000,\"backend\":\"cpu\",\"device\":\"test\","
        "\"ready\":true,\"sessions\":2,\"bytes_in_use\":2097152,\"requests\":340,"
        "\"errors\":4,\"jobs_in_flight\":3,\"connections\":2,"
        "\"ops\":{\"add\":{\"count\":300,\"errors\":4,\"timed\":300,\"total_time_us\":3000,"
        "\"flops\":5000000000,\"bytes\":3000000000,\"achieved_gbps\":1000,"
        "\"achieved_tflops\":1.6667,\"sol_share\":0.6,\"latency_us\":{\"count\":300,"
        "\"sum\":9000,\"p50\":15,\"p99\":90,\"max\":99,\"buckets\":[[10,70],[20,210],"
        "[50,280],[100,300],[null,300]]}},"
        "\"mul\":{\"count\":5,\"errors\":0,\"timed\":5,\"total_time_us\":50,\"flops\":5,"
        "\"bytes\":5},"
        "\"rms_norm\":{\"count\":10,\"errors\":0,\"timed\":10,\"total_time_us\":6000,"
        "\"flops\":0,\"bytes\":600000000}},"
        "\"sessions_detail\":[{\"id\":1,\"name\":\"svc-a\",\"tenant\":\"t1\",\"ops\":300,"
        "\"errors\":4,\"latency_us\":{\"count\":300,\"buckets\":[[10,70],[20,210],[50,280],"
        "[100,300],[null,300]]}},"
        "{\"id\":2,\"name\":\"svc-b\",\"tenant\":\"t2\",\"ops\":20,\"errors\":0,"
        "\"latency_us\":{\"count\":20,\"buckets\":[[10,0],[20,0],[50,0],[100,10],"
        "[null,20]]}}]}";

/* ---- the tests ------------------------------------------------------------ */

Test(stat_watch, second_frame_shows_the_interval_rates_and_percentiles)
{
	const char *const docs[] = { doc1, doc2 };
	struct fake_stats f;
	char c[12][32];
	int status;

	fake_stats_start(&f, docs, 2);
	char *out = run_stat(&f, "--watch 0.01 --count 2", &status);
	fake_stats_stop(&f);

	cr_assert_eq(status, 0, "exit %d:\n%s", status, out);
	cr_assert_eq(f.served, 2, "asked %d times for --count 2", f.served);
	cr_assert_not(strstr(out, "\033["), "escapes written into a pipe:\n%s", out);
	cr_assert(strstr(out, "since start (10.00 s)"), "no first frame:\n%s", out);
	cr_assert(strstr(out, "last 2.00 s"), "the interval is not the uptime's 2 s:\n%s", out);
	cr_assert(strstr(out, "sessions 2, connections 2, 2.0 MiB in use, jobs in flight 3"),
	          "daemon line:\n%s", out);

	/* First frame, since start: add at 100 calls over 10 s, cumulative buckets. */
	cr_assert_eq(fields(row(out, "add", 0), c, 12), 10, "add row:\n%s", out);
	cr_assert_str_eq(c[1], "10.0");
	cr_assert_str_eq(c[3], "10.0", "since-start p50:\n%s", out);
	cr_assert_str_eq(c[4], "47.0", "since-start p99:\n%s", out);
	cr_assert_str_eq(c[5], "50.0", "since-start max bound:\n%s", out);
	cr_assert_str_eq(c[9], "50.0", "since-start sol %%:\n%s", out);

	/* Second frame: the differences. Sorted by device time, rms_norm first. */
	const char *norm = row(out, "rms_norm", 0), *add = row(out, "add", 1);
	cr_assert(norm != NULL && add != NULL && norm < add, "order by time:\n%s", out);
	cr_assert_eq(fields(add, c, 12), 10);
	cr_assert_str_eq(c[1], "100.0", "ops/s:\n%s", out);
	cr_assert_str_eq(c[2], "2.0", "errors/s:\n%s", out);
	cr_assert_str_eq(c[3], "18.0", "interval p50:\n%s", out);
	cr_assert_str_eq(c[4], "95.0", "interval p99:\n%s", out);
	cr_assert_str_eq(c[5], "100", "interval max bound:\n%s", out);
	cr_assert_str_eq(c[6], "25.0", "time share:\n%s", out);
	cr_assert_str_eq(c[7], "1000.0", "GB/s:\n%s", out);
	cr_assert_str_eq(c[8], "2.000", "TFLOP/s:\n%s", out);
	cr_assert_str_eq(c[9], "65.0", "interval sol %%:\n%s", out);

	/* rms_norm: an older daemon's entry, no histogram, no sol share. */
	cr_assert_eq(fields(norm, c, 12), 10);
	cr_assert_str_eq(c[1], "5.0");
	cr_assert_str_eq(c[3], "-");
	cr_assert_str_eq(c[4], "-");
	cr_assert_str_eq(c[6], "75.0");
	cr_assert_str_eq(c[9], "-");
	cr_assert_not_null(row(out, "mul", 0), "mul ran before the first frame:\n%s", out);
	cr_assert_null(row(out, "mul", 1), "mul did not run, yet has a row:\n%s", out);

	/* Sessions: 1 did 200 calls in 2 s with add's buckets; 2 appeared with 20. */
	cr_assert_eq(fields(row(out, "1", 1), c, 12), 6, "session 1:\n%s", out);
	cr_assert_str_eq(c[1], "svc-a");
	cr_assert_str_eq(c[3], "100.0");
	cr_assert_str_eq(c[4], "18.0");
	cr_assert_str_eq(c[5], "95.0");
	cr_assert_eq(fields(row(out, "2", 0), c, 12), 6, "session 2:\n%s", out);
	cr_assert_str_eq(c[3], "10.0");
	cr_assert_str_eq(c[4], "100", "p50 of (50, 100] with 10 of 10 in it:\n%s", out);
	cr_assert_str_eq(c[5], ">100", "p99 in the +Inf bucket:\n%s", out);
	free(out);
}

Test(stat_watch, sort_ops_puts_the_busiest_op_first)
{
	const char *const docs[] = { doc1, doc2 };
	struct fake_stats f;
	int status;

	fake_stats_start(&f, docs, 2);
	char *out = run_stat(&f, "--watch 0.01 --count 2 --sort ops", &status);
	fake_stats_stop(&f);
	cr_assert_eq(status, 0, "%s", out);
	const char *add = row(out, "add", 1), *norm = row(out, "rms_norm", 0);
	cr_assert(add != NULL && norm != NULL && add < norm, "order by ops/s:\n%s", out);
	free(out);
}

Test(stat_watch, summary_shows_cumulative_percentiles_and_sol_share)
{
	const char *const docs[] = { doc2 };
	struct fake_stats f;
	char c[12][32];
	int status;

	fake_stats_start(&f, docs, 1);
	char *out = run_stat(&f, "", &status);
	fake_stats_stop(&f);
	cr_assert_eq(status, 0, "%s", out);
	/* op count errors total-ms mean p50 p99 max sol: the daemon's own percentiles. */
	cr_assert_eq(fields(row(out, "add", 0), c, 12), 9, "add row:\n%s", out);
	cr_assert_str_eq(c[5], "15.0");
	cr_assert_str_eq(c[6], "90.0");
	cr_assert_str_eq(c[7], "99.0");
	cr_assert_str_eq(c[8], "60.0");
	cr_assert_eq(fields(row(out, "rms_norm", 0), c, 12), 9);
	cr_assert_str_eq(c[5], "-");
	cr_assert_str_eq(c[8], "-");
	free(out);
}

/* An older daemon: no latency_us, sol_share, sessions_detail or roofline. */
Test(stat_watch, old_documents_give_rates_and_dashes)
{
	static const char *const docs[] = {
		"{\"uptime_s\":1.0,\"ready\":true,\"ops\":{\"add\":{\"count\":10,\"errors\":0,"
		"\"timed\":10,\"total_time_us\":100.000,\"flops\":1e+06,\"bytes\":1.2e+07}}}",
		"{\"uptime_s\":1.5,\"ready\":true,\"ops\":{\"add\":{\"count\":60,\"errors\":1,"
		"\"timed\":60,\"total_time_us\":600.000,\"flops\":6e+06,\"bytes\":7.2e+07}}}",
	};
	struct fake_stats f;
	char c[12][32];
	int status;

	fake_stats_start(&f, docs, 2);
	char *out = run_stat(&f, "--watch 0.01 --count 2", &status);
	fake_stats_stop(&f);
	cr_assert_eq(status, 0, "%s", out);
	cr_assert_eq(fields(row(out, "add", 1), c, 12), 10, "%s", out);
	cr_assert_str_eq(c[1], "100.0");
	cr_assert_str_eq(c[2], "2.0");
	cr_assert_str_eq(c[3], "-");
	cr_assert_str_eq(c[5], "-");
	cr_assert_str_eq(c[6], "100.0");
	cr_assert_str_eq(c[7], "120.0", "6e7 bytes in 500 us:\n%s", out);
	cr_assert_str_eq(c[9], "-");
	cr_assert_null(strstr(out, "session "), "a session block without sessions:\n%s", out);
	free(out);
}

/* Whatever arrives, tileops-stat reports it and goes on; it never crashes. */
Test(stat_watch, garbage_is_reported_not_fatal)
{
	static const char *const docs[] = {
		"not json at all",
		"{\"uptime_s\":",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]",
		"{\"ops\":[1,2,3],\"sessions_detail\":{\"id\":1}}",
		"{\"uptime_s\":\"x\",\"ops\":{\"a\":{\"count\":\"y\",\"latency_us\":{\"buckets\":"
		"[[null,5],[1,3]]}},\"b\":{\"count\":1e999,\"latency_us\":{\"buckets\":[[1],[2,"
		"\"z\"],"
		"3,[5,2],[4,9]]}},\"c\":7},\"sessions_detail\":[1,{\"id\":\"q\"},{\"ops\":-5}]}",
		"{\"uptime_s\":-3,\"ops\":{\"a\":{\"count\":nan,\"latency_us\":{\"buckets\":[]}},"
		"\"b\":{\"count\":4,\"total_time_us\":-1,\"sol_share\":7,\"latency_us\":{"
		"\"buckets\":"
		"[[1,1],[null,0]]}}},\"sessions_detail\":[{\"id\":1,\"latency_us\":7}]}",
		"{\"ops\":{\"a\":{\"count\":2,\"latency_us\":{\"buckets\":[[1,1],[2,2],[null,2]]}}}"
		"}",
		"{}",
	};
	struct fake_stats f;
	int status;

	fake_stats_start(&f, docs, 8);
	char *out = run_stat(&f, "--watch 0.01 --count 8", &status);
	fake_stats_stop(&f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d:\n%s", status, out);
	cr_assert_eq(f.served, 8);
	cr_assert(strstr(out, "not valid JSON"), "garbage not reported:\n%s", out);
	free(out);

	/* The summary prints what it cannot parse as received. */
	fake_stats_start(&f, docs + 2, 1);
	out = run_stat(&f, "", &status);
	fake_stats_stop(&f);
	cr_assert_eq(status, 0, "%s", out);
	cr_assert(strstr(out, "not valid JSON") && strstr(out, docs[2]), "%s", out);
	free(out);
	fake_stats_start(&f, docs + 4, 1);
	out = run_stat(&f, "", &status);
	fake_stats_stop(&f);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d:\n%s", status, out);
	free(out);
}

Test(stat_watch, count_needs_watch_and_sort_names_a_key)
{
	const char *const docs[] = { doc1 };
	struct fake_stats f;
	int status;

	fake_stats_start(&f, docs, 1);
	char *out = run_stat(&f, "--count 2", &status);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "--count alone: %d", status);
	free(out);
	out = run_stat(&f, "--watch 0.01 --count 1 --sort size", &status);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "--sort size: %d", status);
	free(out);
	/* --watch with no seconds takes the default; --count 1 stops after one frame. */
	out = run_stat(&f, "--watch --count 1", &status);
	fake_stats_stop(&f);
	cr_assert_eq(status, 0, "%s", out);
	cr_assert(strstr(out, "since start"), "%s", out);
	free(out);
}
