/*
 * test_metrics.c - the Prometheus exposition writer (daemon/front/metrics.c):
 * label values escaped, integers printed in full, histograms cumulative in
 * seconds with +Inf, _sum and _count.
 */
#include <string.h>

#include <criterion/criterion.h>

#include "metrics.h"

Test(metrics, label_values_escape_backslash_quote_and_newline)
{
	strbuf sb = { 0 };
	prom_label_value(&sb, "a\\b\"c\nd");
	cr_assert_str_eq(sb.buf, "a\\\\b\\\"c\\nd");
	sb_free(&sb);
}

Test(metrics, counters_print_every_digit)
{
	strbuf sb = { 0 };
	prom_sample(&sb, "tileopsd_op_bytes_total", "op=\"add\"", 45096960.0);
	prom_sample(&sb, "tileopsd_op_flops_total", "op=\"gemm\"", 123456789012345678.0);
	prom_sample_u64(&sb, "tileopsd_requests_total", "", 18446744073709551615ull);
	prom_sample(&sb, "tileopsd_op_device_seconds_total", "op=\"add\"", 0.000125);
	cr_assert_str_eq(sb.buf, "tileopsd_op_bytes_total{op=\"add\"} 45096960\n"
	                         "tileopsd_op_flops_total{op=\"gemm\"} 123456789012345680\n"
	                         "tileopsd_requests_total 18446744073709551615\n"
	                         "tileopsd_op_device_seconds_total{op=\"add\"} 0.000125\n");
	sb_free(&sb);
}

Test(metrics, a_family_has_help_and_type)
{
	strbuf sb = { 0 };
	prom_family(&sb, "tileopsd_ops_total", "counter", "Ops run.");
	cr_assert_str_eq(sb.buf, "# HELP tileopsd_ops_total Ops run.\n"
	                         "# TYPE tileopsd_ops_total counter\n");
	sb_free(&sb);
}

Test(metrics, histograms_are_cumulative_in_seconds_with_inf_sum_and_count)
{
	stats_hist h = { 0 };
	stats_hist_record(&h, 1.0);
	stats_hist_record(&h, 100.0);
	stats_hist_record(&h, 2e7);
	strbuf sb = { 0 };
	prom_histogram(&sb, "tileopsd_op_latency_seconds", "op=\"add\"", &h);
	cr_assert_not_null(
	        strstr(sb.buf,
	               "tileopsd_op_latency_seconds_bucket{op=\"add\",le=\"1e-06\"} 1\n"
	               "tileopsd_op_latency_seconds_bucket{op=\"add\",le=\"1.25e-06\"} 1\n"),
	        "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "_bucket{op=\"add\",le=\"0.0001\"} 2\n"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf,
	                          "_bucket{op=\"add\",le=\"10\"} 2\n"
	                          "tileopsd_op_latency_seconds_bucket{op=\"add\",le=\"+Inf\"} 3\n"
	                          "tileopsd_op_latency_seconds_sum{op=\"add\"} 20.000101\n"
	                          "tileopsd_op_latency_seconds_count{op=\"add\"} 3\n"),
	                   "%s", sb.buf);
	int lines = 0;
	for (const char *p = sb.buf; *p; p++)
		lines += *p == '\n';
	cr_assert_eq(lines, STATS_HIST_BUCKETS + 2);
	sb_free(&sb);
}

Test(metrics, a_histogram_without_labels_has_only_le)
{
	stats_hist h = { 0 };
	strbuf sb = { 0 };
	prom_histogram(&sb, "x_seconds", "", &h);
	cr_assert_not_null(strstr(sb.buf, "x_seconds_bucket{le=\"+Inf\"} 0\nx_seconds_sum 0\n"
	                                  "x_seconds_count 0\n"),
	                   "%s", sb.buf);
	sb_free(&sb);
}
