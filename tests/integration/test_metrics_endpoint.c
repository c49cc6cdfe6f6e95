/*
 * test_metrics_endpoint.c - a tileopsd with metrics_listen serves
 * GET /metrics in the Prometheus text format: op counts and latency
 * histograms follow the ops a client ran on either plane, the stats socket
 * shows the same latency and the sessions' detail, and promtool (when on
 * PATH) accepts the page.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

static daemon2 d;
static int port;

static void fini(void)
{
	daemon2_kill_running();
}

/* A port nothing listens on now (the kernel's pick for port 0). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* GET path over HTTP/1.0 on 127.0.0.1:port; the whole answer, headers too
 * (malloc'd). */
static char *http_get(const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
		                 .sin_port = htons((uint16_t)port),
		                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	struct timeval tv = { 10, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0, "cannot connect to port %d",
	             port);
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ssize_t got;
	while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)got;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	cr_assert_not_null(buf);
	buf[len] = '\0';
	return buf;
}

/* The value of the sample whose line starts with `series` followed by a space. */
static int sample(const char *page, const char *series, double *out)
{
	size_t n = strlen(series);
	for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ') {
			*out = strtod(p + n + 1, NULL);
			return 0;
		}
	}
	return -1;
}

static void run_adds(const char *name, int n)
{
	tileops_client *c = th_connect(name, 0);
	const int64_t shape[] = { 256 };
	float x[256];
	th_rng rng = th_rng_seed(7);
	th_fill_f32(&rng, x, 256, -1, 1);
	tileops_tensor t = th_tensor_f32(c, 1, shape, x);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { t, t };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };
	for (int i = 0; i < n; i++)
		th_run(c, &op);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	/* Left open: the sessions' detail lists live sessions only. */
}

Test(metrics, the_page_counts_ops_of_both_planes_and_passes_promtool, .fini = fini, .timeout = 120)
{
	enum { RING_OPS = 300, NNG_OPS = 40 };
	char config[256];
	port = free_port();
	snprintf(config, sizeof(config), "metrics_listen = http://127.0.0.1:%d\n", port);
	daemon2_start(&d, config);
	daemon2_use(&d);

	run_adds("metrics-ring", RING_OPS);
	setenv("TILEOPS_RINGS", "0", 1); /* the next session's ops go over nng */
	run_adds("metrics-nng", NNG_OPS);
	unsetenv("TILEOPS_RINGS");
	th_stat_wait("ops.add.latency_us.count", RING_OPS + NNG_OPS, TH_TIMEOUT_MS);

	char *page = http_get("/metrics");
	cr_assert(strncmp(page, "HTTP/1.1 200", 12) == 0 || strncmp(page, "HTTP/1.0 200", 12) == 0,
	          "not 200: %.200s", page);
	cr_assert_not_null(strstr(page, "text/plain; version=0.0.4"), "%.300s", page);
	char *body = strstr(page, "\r\n\r\n");
	cr_assert_not_null(body);
	body += 4;
	double v;
	cr_assert_eq(sample(body, "tileopsd_ops_total{op=\"add\"}", &v), 0, "%s", body);
	cr_assert_eq(v, RING_OPS + NNG_OPS, "tileopsd_ops_total{op=\"add\"} is %g", v);
	cr_assert_eq(sample(body, "tileopsd_op_latency_seconds_count{op=\"add\"}", &v), 0);
	cr_assert_eq(v, RING_OPS + NNG_OPS);
	cr_assert_eq(sample(body, "tileopsd_op_latency_seconds_bucket{op=\"add\",le=\"+Inf\"}", &v),
	             0);
	cr_assert_eq(v, RING_OPS + NNG_OPS);
	cr_assert_eq(sample(body, "tileopsd_op_latency_seconds_sum{op=\"add\"}", &v), 0);
	cr_assert(v > 0.0, "the latency sum is %g", v);
	cr_assert_eq(sample(body, "tileopsd_op_errors_total{op=\"add\"}", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(sample(body, "tileopsd_op_bytes_total{op=\"add\"}", &v), 0);
	cr_assert_eq(v, (RING_OPS + NNG_OPS) * 3.0 * 256 * 4, "add moves 3 tensors of 1 KiB");
	cr_assert_eq(sample(body, "tileopsd_ready", &v), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(sample(body, "tileopsd_device_healthy", &v), 0);
	cr_assert_eq(v, 1);
	cr_assert_eq(sample(body, "tileopsd_sessions", &v), 0);
	cr_assert_eq(v, 2);
	cr_assert_not_null(strstr(body,
	                          "tileopsd_session_op_latency_seconds_count{session=\"metrics-"
	                          "ring\",tenant=\"session-"),
	                   "%s", body);
	cr_assert_not_null(strstr(body, "# TYPE tileopsd_op_latency_seconds histogram\n"));
	cr_assert_not_null(strstr(body, "tileopsd_build_info{version=\""));
	/* The CPU backend measured its bandwidth at start, so adds have a share
	 * (above 1 is possible: these tensors sit in the cache). */
	cr_assert_eq(sample(body, "tileopsd_op_speed_of_light_ratio{op=\"add\"}", &v), 0, "%s",
	             body);
	cr_assert(v > 0.0, "speed-of-light ratio %g", v);

	if (system("command -v promtool >/dev/null 2>&1") == 0) {
		char path[128], cmd[300];
		snprintf(path, sizeof(path), "%s/metrics.txt", d.dir);
		daemon2_write_text(path, body);
		snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' >&2", path);
		cr_assert_eq(system(cmd), 0, "promtool check metrics refused the page (above)");
	} else {
		/* Not cr_log_warn: a warning makes Criterion 2.4 exit 1 with every
		 * test passed. */
		fprintf(stderr,
		        "promtool is not on PATH: the page's format is not checked by it\n");
	}
	free(page);

	page = http_get("/nothing-here");
	cr_assert_not_null(strstr(page, " 404 "), "%.200s", page);
	free(page);

	char *j = th_stats();
	cr_assert_eq(th_json_number(j, "ops.add.latency_us.count", &v), 0, "%s", j);
	cr_assert_eq(v, RING_OPS + NNG_OPS);
	cr_assert_eq(th_json_number(j, "ops.add.latency_us.p99", &v), 0, "%s", j);
	cr_assert(v > 0.0);
	cr_assert_eq(th_json_number(j, "ops.add.count", &v), 0);
	cr_assert_eq(v, RING_OPS + NNG_OPS);
	cr_assert_not_null(strstr(j, "\"sessions_detail\":[{"), "%s", j);
	char want[96];
	snprintf(want, sizeof(want), "\"name\":\"metrics-nng\",\"tenant\":\"session-");
	cr_assert_not_null(strstr(j, want), "%s", j);
	snprintf(want, sizeof(want), "\"ops\":%d,\"errors\":0,\"latency_us\":{\"count\":%d,",
	         NNG_OPS, NNG_OPS);
	cr_assert_not_null(strstr(j, want), "no session with %s: %s", want, j);
	snprintf(want, sizeof(want), "\"ops\":%d,\"errors\":0,\"latency_us\":{\"count\":%d,",
	         RING_OPS, RING_OPS);
	cr_assert_not_null(strstr(j, want), "no session with %s: %s", want, j);
	cr_assert_not_null(strstr(j, "\"roofline\":{\"bandwidth_gbs\":"), "%s", j);
	cr_assert_not_null(strstr(j, "\"source\":\"measured\""), "%s", j);
	free(j);
	daemon2_stop(&d);
}

Test(metrics, a_malformed_metrics_listen_refuses_the_start)
{
	const char *bin = getenv("TILEOPSD");
	cr_assert_not_null(bin);
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "'%s' --check --config /dev/stdin --manifest '%s' 2>&1 <<'EOF' | "
	         "grep -q \"metrics_listen: 'tcp://1.2.3.4' does not start with http://\"\n"
	         "metrics_listen = tcp://1.2.3.4\nEOF",
	         bin, getenv("TILEOPS_MANIFEST"));
	cr_assert_eq(system(cmd), 0, "no clear error for a malformed metrics_listen");
}

Test(metrics, configured_ceilings_replace_the_measured_ones, .fini = fini)
{
	daemon2_start(&d, "roofline_bandwidth_gbs = 1000\nroofline_tflops_fp32 = 5\n");
	daemon2_use(&d);
	char *j = th_stats();
	cr_assert_not_null(strstr(j, "\"roofline\":{\"bandwidth_gbs\":1000,\"tflops\":{"), "%s", j);
	cr_assert_not_null(strstr(j, "\"fp32\":5,"), "%s", j);
	cr_assert_not_null(strstr(j, "\"source\":\"configured\""), "%s", j);
	free(j);
	daemon2_stop(&d);
}

Test(metrics, a_negative_ceiling_refuses_the_start)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd),
	         "'%s' --check --config /dev/stdin --manifest '%s' 2>&1 <<'EOF' | "
	         "grep -q \"roofline_tflops_bf16: '-1' is not a number >= 0\"\n"
	         "roofline_tflops_bf16 = -1\nEOF",
	         getenv("TILEOPSD"), getenv("TILEOPS_MANIFEST"));
	cr_assert_eq(system(cmd), 0, "no clear error for a negative roofline_tflops_bf16");
}
