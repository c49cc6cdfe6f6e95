/*
 * test_stats_socket.c - the stats socket answers any request with a JSON
 * document whose counters follow what the daemon did.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

Test(stats, answers_with_version_uptime_backend_and_counters)
{
	char *j = th_stats();
	char buf[64];
	double v;

	cr_assert_eq(j[0], '{', "the stats reply is not a JSON object: %s", j);
	cr_assert_eq(th_json_string(j, "version", buf, sizeof(buf)), 0, "no version: %s", j);
	cr_assert_str_eq(buf, TILEOPS_VERSION_STRING);
	cr_assert_eq(th_json_string(j, "backend", buf, sizeof(buf)), 0, "no backend: %s", j);
	cr_assert_str_eq(buf, th_expected_backend());
	cr_assert_eq(th_json_string(j, "device", buf, sizeof(buf)), 0, "no device: %s", j);
	cr_assert_eq(th_json_number(j, "uptime_s", &v), 0, "no uptime_s: %s", j);
	cr_assert(v >= 0, "uptime_s %g", v);
	const char *counters[] = { "sessions", "tensors", "bytes_in_use", "requests", "errors" };
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		cr_assert_eq(th_json_number(j, counters[i], &v), 0, "no %s: %s", counters[i], j);
		cr_assert(v >= 0, "%s is %g", counters[i], v);
	}
	cr_assert(strstr(j, "\"ready\":true") || strstr(j, "\"ready\": true"), "not ready: %s", j);
	free(j);
}

/* Each device says whether its contexts are shared through MPS: not known
 * on the CPU backend, true or false on a GPU. */
Test(stats, devices_say_whether_mps_shares_them)
{
	char *j = th_stats();
	const char *d = strstr(j, "\"devices\":[{");
	cr_assert_not_null(d, "no devices list: %s", j);
	const char *m = strstr(d, "\"mps\":");
	cr_assert_not_null(m, "device 0 has no mps field: %s", d);
	m += strlen("\"mps\":");
	if (strcmp(th_expected_backend(), "cpu") == 0)
		cr_assert(strncmp(m, "null", 4) == 0, "the CPU backend's mps is not null: %.40s",
		          m);
	else
		cr_assert(strncmp(m, "true", 4) == 0 || strncmp(m, "false", 5) == 0,
		          "the GPU's mps is neither true nor false: %.40s", m);
	free(j);
}

Test(stats, uptime_grows)
{
	double a = th_stat("uptime_s"), b;

	th_sleep_ms(300);
	b = th_stat("uptime_s");
	cr_assert(b > a, "uptime_s went from %g to %g over 300 ms", a, b);
}

Test(stats, op_counts_and_requests_grow_after_running_ops)
{
	tileops_client *c = th_connect("stats", 0);
	const int64_t shape[] = { 100 };
	float x[100];
	th_rng rng = th_rng_seed(3);
	double count0, requests0, errors0, time0, v;
	char *j;

	th_fill_f32(&rng, x, 100, -1, 1);
	tileops_tensor t = th_tensor_f32(c, 1, shape, x);
	tileops_tensor out = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { t, t };
	tileops_op op = { "add", in, 2, &out, 1, NULL, 0 };
	tileops_op bad = { "add", in, 1, &out, 1, NULL, 0 };

	/* "ops.add" may be absent before the first add in this daemon's life. */
	j = th_stats();
	count0 = th_json_number(j, "ops.add.count", &v) == 0 ? v : 0;
	time0 = th_json_number(j, "ops.add.total_time_us", &v) == 0 ? v : 0;
	cr_assert_eq(th_json_number(j, "requests", &requests0), 0);
	cr_assert_eq(th_json_number(j, "errors", &errors0), 0);
	free(j);

	/* On the GPU the daemon times one op in stats_sample (1024 by default):
	 * run enough that at least one of them is timed. */
	for (int i = 0; i < 5 + 1100; i++)
		th_run(c, &op);
	cr_assert_eq(tileops_sync(c), TILEOPS_OK);
	cr_assert_neq(tileops_op_run(c, &bad), TILEOPS_OK, "add with one input was accepted");

	cr_assert(th_stat_wait_min("ops.add.count", count0 + 1105, TH_TIMEOUT_MS) >= count0 + 1105,
	          "ops.add.count did not grow by the 1105 adds run");
	cr_assert(th_stat("ops.add.timed") >= 1, "no add was timed");
	cr_assert(th_stat("ops.add.total_time_us") > time0, "ops.add.total_time_us did not grow");
	cr_assert(th_stat("ops.add.bytes") > 0,
	          "ops.add.bytes is 0 after adds of 400-byte tensors");
	cr_assert(th_stat("requests") >= requests0 + 1106,
	          "requests did not count the 1106 requests");
	cr_assert(th_stat("errors") >= errors0 + 1, "errors did not count the refused add");
	tileops_close(c);
}

Test(stats, any_request_body_gets_the_same_document)
{
	/* The stats socket ignores what is asked: an empty body works too. */
	nng_socket s;
	char *buf = NULL;
	size_t len = 0;

	cr_assert_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, TH_TIMEOUT_MS);
	cr_assert_eq(nng_dial(s, th_stats_address(), NULL, 0), 0);
	cr_assert_eq(nng_send(s, "", 0, 0), 0);
	cr_assert_eq(nng_recv(s, &buf, &len, NNG_FLAG_ALLOC), 0, "no reply to an empty request");
	cr_assert(len > 2 && buf[0] == '{', "the reply is not JSON");
	nng_free(buf, len);
	nng_close(s);
}
