/*
 * test_stats_hist.c - the latency histograms (daemon/base/stats.c): where
 * a time lands, percentiles against distributions whose answer is known,
 * shards merged by adding, and the JSON the stats socket prints.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "stats.h"

Test(stats_hist, bounds_ascend_ten_a_decade_from_1us_to_10s)
{
	cr_assert_eq(stats_hist_le_us[0], 1.0);
	cr_assert_eq(stats_hist_le_us[STATS_HIST_BOUNDS - 1], 1e7);
	for (int i = 1; i < STATS_HIST_BOUNDS; i++) {
		double r = stats_hist_le_us[i] / stats_hist_le_us[i - 1];
		cr_assert(r > 1.2 && r < 1.29, "bounds %d and %d differ by %g", i - 1, i, r);
	}
	cr_assert_eq(stats_hist_le_us[10], 10.0);
	cr_assert_eq(stats_hist_le_us[30], 1000.0);
}

Test(stats_hist, a_time_lands_in_the_first_bucket_whose_bound_is_not_below_it)
{
	cr_assert_eq(stats_hist_bucket(0.0), 0);
	cr_assert_eq(stats_hist_bucket(0.3), 0);
	cr_assert_eq(stats_hist_bucket(1.0), 0, "le is inclusive");
	cr_assert_eq(stats_hist_bucket(1.01), 1);
	cr_assert_eq(stats_hist_bucket(10.0), 10);
	cr_assert_eq(stats_hist_bucket(10.5), 11);
	cr_assert_eq(stats_hist_bucket(1e7), STATS_HIST_BOUNDS - 1);
	cr_assert_eq(stats_hist_bucket(2e7), STATS_HIST_BOUNDS, "slower than 10 s is +Inf");
}

Test(stats_hist, records_count_sum_and_exact_max)
{
	stats_hist h = { 0 };
	stats_hist_record(&h, 3.0);
	stats_hist_record(&h, 7.5);
	stats_hist_record(&h, 123.456);
	stats_hist_record(&h, -4.0); /* a clock step back counts as 0 */
	cr_assert_eq(stats_hist_count(&h), 4);
	cr_assert_eq(h.max_ns, 123456);
	cr_assert_eq(h.sum_ns, 3000 + 7500 + 123456);
	cr_assert_eq(h.buckets[0], 1);
	cr_assert_eq(h.buckets[stats_hist_bucket(123.456)], 1);
}

static double rel(double got, double want)
{
	return fabs(got - want) / want;
}

Test(stats_hist, percentiles_of_a_uniform_spread_are_within_a_bucket_width)
{
	stats_hist h = { 0 };
	/* 10000 times evenly over 10 us .. 1010 us: p50 510, p99 1000. */
	for (int i = 0; i < 10000; i++)
		stats_hist_record(&h, 10.0 + i * 0.1);
	double p50 = stats_hist_quantile(&h, 0.5), p99 = stats_hist_quantile(&h, 0.99);
	cr_assert(rel(p50, 510.0) < 0.05, "p50 %g, expected about 510", p50);
	cr_assert(rel(p99, 1000.0) < 0.05, "p99 %g, expected about 1000", p99);
	cr_assert(stats_hist_quantile(&h, 1.0) <= 1009.9 + 1e-6, "p100 above the maximum");
}

Test(stats_hist, percentiles_of_a_log_normal_spread_are_within_25_percent)
{
	/* Latencies spread over decades: exp(N(ln 50 us, 1)); the true
	 * quantiles come from sorting the same samples. */
	enum { N = 20000 };
	static double xs[N];
	stats_hist h = { 0 };
	unsigned long long s = 88172645463325252ull;
	for (int i = 0; i < N; i++) {
		double u1, u2;
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		u1 = ((s >> 11) + 0.5) / 9007199254740992.0;
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		u2 = ((s >> 11) + 0.5) / 9007199254740992.0;
		double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
		xs[i] = 50.0 * exp(z);
		stats_hist_record(&h, xs[i]);
	}
	/* Insertion would be slow; a counting check is enough: the share of
	 * samples at or below the estimate must be close to q. */
	double qs[] = { 0.5, 0.9, 0.99 };
	for (int k = 0; k < 3; k++) {
		double est = stats_hist_quantile(&h, qs[k]);
		int below = 0, below_lo = 0, below_hi = 0;
		for (int i = 0; i < N; i++) {
			below += xs[i] <= est;
			below_lo += xs[i] <= est / 1.25;
			below_hi += xs[i] <= est * 1.25;
		}
		cr_assert(below_lo <= qs[k] * N && below_hi >= qs[k] * N,
		          "q %g: estimate %g is more than 25%% off (share below %g)", qs[k], est,
		          (double)below / N);
	}
	cr_assert_eq(stats_hist_quantile(&h, 1.0), h.max_ns * 1e-3);
}

Test(stats_hist, an_empty_histogram_has_no_percentiles)
{
	stats_hist h = { 0 };
	cr_assert_eq(stats_hist_quantile(&h, 0.99), 0.0);
	strbuf sb = { 0 };
	stats_write_hist_json(&sb, &h);
	cr_assert_not_null(strstr(sb.buf, "\"count\":0,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"p50\":null,\"p99\":null,\"max\":null"), "%s", sb.buf);
	sb_free(&sb);
}

static stats shared_st;

static void *count_on_shard(void *arg)
{
	int i = (int)(intptr_t)arg;
	stats_set_thread_shard(i);
	int slot = stats_op_slot(&shared_st, "add");
	for (int k = 0; k < 1000; k++)
		stats_op_latency(&shared_st, slot, 5.0 + i * 100.0);
	return NULL;
}

Test(stats_hist, shards_merge_by_adding_their_buckets)
{
	cr_assert_eq(stats_init(&shared_st, 4), 0);
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, count_on_shard, (void *)(intptr_t)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	int n = 0;
	stats_op_view *v = stats_ops_read(&shared_st, &n);
	cr_assert_eq(n, 1);
	cr_assert_eq(stats_hist_count(&v[0].c.latency), 4000);
	cr_assert_eq(v[0].c.latency.max_ns, 305000);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(v[0].c.latency.buckets[stats_hist_bucket(5.0 + i * 100.0)], 1000,
		             "shard %d's bucket", i);
	/* Each shard kept only its own thread's times. */
	cr_assert_eq(stats_hist_count(&shared_st.shards[2].ops[0].latency), 1000);
	free(v);
	stats_destroy(&shared_st);
}

Test(stats_hist, json_buckets_are_cumulative_and_end_with_null)
{
	stats_hist h = { 0 };
	stats_hist_record(&h, 0.5);
	stats_hist_record(&h, 1.1);
	stats_hist_record(&h, 3e7);
	strbuf sb = { 0 };
	stats_write_hist_json(&sb, &h);
	cr_assert_not_null(strstr(sb.buf, "{\"count\":3,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"buckets\":[[1,1],[1.25,2],[1.6,2],"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "[1e+07,2],[null,3]]}"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"max\":30000000.000"), "%s", sb.buf);
	sb_free(&sb);
}

Test(stats_ops, counters_print_as_exact_integers_and_sol_share_from_the_ceilings)
{
	stats st;
	cr_assert_eq(stats_init(&st, 1), 0);
	stats_roofline r = { .bandwidth_gbs = 1000.0, .tflops = { 100.0, 100.0, 10.0, 200.0 } };
	stats_set_roofline(&st, &r);
	int slot = stats_op_slot(&st, "gemm");
	/* 45,096,960 bytes at 1000 GB/s take 45.09696 us; 2e9 bf16 flops at
	 * 100 TFLOP/s take 20 us: the roofline time is the larger. */
	for (int i = 0; i < 3; i++) {
		stats_op_count(&st, slot, 0, 1, 2e9, 45096960.0, 3 /* bf16 */);
		stats_op_time(&st, slot, 90.19392);
	}
	strbuf sb = { 0 };
	stats_write_ops_json(&st, &sb);
	cr_assert_not_null(strstr(sb.buf, "\"bytes\":135290880,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"flops\":6000000000,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"sol_share\":0.5000,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"count\":3,\"errors\":0,"), "%s", sb.buf);
	sb_free(&sb);
	stats_write_roofline_json(&st, &sb);
	cr_assert_not_null(strstr(sb.buf, "\"bandwidth_gbs\":1000,"), "%s", sb.buf);
	cr_assert_not_null(strstr(sb.buf, "\"fp32\":10,"), "%s", sb.buf);
	sb_free(&sb);
	stats_destroy(&st);
}

Test(stats_ops, sol_share_is_null_until_an_op_is_timed)
{
	stats st;
	cr_assert_eq(stats_init(&st, 1), 0);
	stats_roofline r = { .bandwidth_gbs = 1000.0 };
	stats_set_roofline(&st, &r);
	int slot = stats_op_slot(&st, "add");
	stats_op_count(&st, slot, 0, 0, 0.0, 1200.0, 1);
	strbuf sb = { 0 };
	stats_write_ops_json(&st, &sb);
	cr_assert_not_null(strstr(sb.buf, "\"sol_share\":null,"), "%s", sb.buf);
	sb_free(&sb);
	stats_destroy(&st);
}
