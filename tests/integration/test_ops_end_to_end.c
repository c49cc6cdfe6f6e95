/*
 * test_ops_end_to_end.c - ops run by the daemon agree with straightforward
 * host computations on fresh random inputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

#define F32_ATOL 1e-5f
#define F32_RTOL 1e-5f
/* bf16 keeps 8 significant bits: one rounding of the output, plus inputs. */
#define BF16_ATOL 1e-2f
#define BF16_RTOL 1e-2f

static tileops_client *client;

static void setup(void)
{
	client = th_connect("ops", 0);
}

static void teardown(void)
{
	tileops_close(client);
}

TestSuite(ops, .init = setup, .fini = teardown);

static void run(const char *name, const tileops_tensor *in, size_t n_in, tileops_tensor out,
                const tileops_param *params, size_t n_params)
{
	tileops_op op = { name, in, n_in, &out, 1, params, n_params };

	th_run(client, &op);
}

static float *random_f32(size_t n, uint64_t seed, float lo, float hi)
{
	float *p = malloc(n * sizeof(float));
	th_rng rng = th_rng_seed(seed);

	cr_assert(p);
	th_fill_f32(&rng, p, n, lo, hi);
	return p;
}

/* Elementwise unary op over [rows, cols] vs fn. */
static void check_unary(const char *name, float (*fn)(float), const tileops_param *params,
                        size_t n_params, uint64_t seed)
{
	const int64_t shape[] = { 9, 131 };
	size_t n = 9 * 131;
	float *x = random_f32(n, seed, -6.0f, 6.0f), *want = malloc(n * sizeof(float)), *got;
	tileops_tensor tx = th_tensor_f32(client, 2, shape, x);
	tileops_tensor to = th_tensor_f32(client, 2, shape, NULL);

	for (size_t i = 0; i < n; i++)
		want[i] = fn(x[i]);
	run(name, &tx, 1, to, params, n_params);
	got = th_read_f32(client, to, n);
	th_expect_close_f32(got, want, n, F32_ATOL, F32_RTOL, name);
	free(x);
	free(want);
	free(got);
}

static float silu_ref(float x)
{
	return (float)((double)x / (1.0 + exp(-(double)x)));
}

static float gelu_erf_ref(float x)
{
	return (float)(0.5 * x * (1.0 + erf((double)x / sqrt(2.0))));
}

static float gelu_tanh_ref(float x)
{
	double v = x;

	return (float)(0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
}

Test(ops, add_matches_the_host_sum)
{
	const int64_t shape[] = { 3, 37 };
	size_t n = 3 * 37;
	float *a = random_f32(n, 1, -10, 10), *b = random_f32(n, 2, -10, 10), want[3 * 37], *got;
	tileops_tensor in[2] = { th_tensor_f32(client, 2, shape, a),
		                 th_tensor_f32(client, 2, shape, b) };
	tileops_tensor out = th_tensor_f32(client, 2, shape, NULL);

	for (size_t i = 0; i < n; i++)
		want[i] = a[i] + b[i];
	run("add", in, 2, out, NULL, 0);
	got = th_read_f32(client, out, n);
	th_expect_close_f32(got, want, n, 0, 0, "add");
	free(a);
	free(b);
	free(got);
}

Test(ops, mul_broadcasts_b_over_a_like_numpy)
{
	/* a [3, 4, 5] * b [4, 1] -> out [3, 4, 5]: b repeats over dims 0 and 2. */
	const int64_t sa[] = { 3, 4, 5 }, sb[] = { 4, 1 };
	float *a = random_f32(60, 3, -4, 4), *b = random_f32(4, 4, -4, 4), want[60], *got;
	tileops_tensor in[2] = { th_tensor_f32(client, 3, sa, a), th_tensor_f32(client, 2, sb, b) };
	tileops_tensor out = th_tensor_f32(client, 3, sa, NULL);

	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 4; j++)
			for (int k = 0; k < 5; k++)
				want[(i * 4 + j) * 5 + k] = a[(i * 4 + j) * 5 + k] * b[j];
	run("mul", in, 2, out, NULL, 0);
	got = th_read_f32(client, out, 60);
	th_expect_close_f32(got, want, 60, 0, 0, "mul [3,4,5] x [4,1]");
	free(a);
	free(b);
	free(got);
}

Test(ops, mul_broadcasts_a_row_over_a_matrix)
{
	const int64_t sa[] = { 6, 17 }, sb[] = { 17 };
	float *a = random_f32(102, 5, -4, 4), *b = random_f32(17, 6, -4, 4), want[102], *got;
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sa, a), th_tensor_f32(client, 1, sb, b) };
	tileops_tensor out = th_tensor_f32(client, 2, sa, NULL);

	for (int i = 0; i < 102; i++)
		want[i] = a[i] * b[i % 17];
	run("mul", in, 2, out, NULL, 0);
	got = th_read_f32(client, out, 102);
	th_expect_close_f32(got, want, 102, 0, 0, "mul [6,17] x [17]");
	free(a);
	free(b);
	free(got);
}

Test(ops, silu_matches_x_times_sigmoid)
{
	check_unary("silu", silu_ref, NULL, 0, 7);
}

Test(ops, gelu_exact_matches_the_erf_form)
{
	check_unary("gelu", gelu_erf_ref, NULL, 0, 8);
}

Test(ops, gelu_tanh_approximation_when_asked)
{
	tileops_param p = tileops_param_int("approximate", 1);

	check_unary("gelu", gelu_tanh_ref, &p, 1, 9);
}

Test(ops, rms_norm_matches_the_host_formula)
{
	enum { R = 7, D = 96 };
	const int64_t sx[] = { R, D }, sw[] = { D };
	const double eps = 1e-5;
	float *x = random_f32(R * D, 10, -3, 3), *w = random_f32(D, 11, 0.5f, 1.5f);
	float want[R * D], *got;
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sx, x), th_tensor_f32(client, 1, sw, w) };
	tileops_tensor out = th_tensor_f32(client, 2, sx, NULL);
	tileops_param p = tileops_param_float("eps", eps);

	for (int r = 0; r < R; r++) {
		double ss = 0;

		for (int d = 0; d < D; d++)
			ss += (double)x[r * D + d] * x[r * D + d];
		for (int d = 0; d < D; d++)
			want[r * D + d] = (float)(x[r * D + d] / sqrt(ss / D + eps) * w[d]);
	}
	run("rms_norm", in, 2, out, &p, 1);
	got = th_read_f32(client, out, R * D);
	th_expect_close_f32(got, want, R * D, F32_ATOL, F32_RTOL, "rms_norm");
	free(x);
	free(w);
	free(got);
}

Test(ops, softmax_rows_match_and_sum_to_one)
{
	enum { R = 5, D = 33 };
	const int64_t shape[] = { R, D };
	float *x = random_f32(R * D, 12, -20, 20), want[R * D], *got;
	tileops_tensor in = th_tensor_f32(client, 2, shape, x);
	tileops_tensor out = th_tensor_f32(client, 2, shape, NULL);

	for (int r = 0; r < R; r++) {
		double mx = x[r * D], sum = 0;

		for (int d = 1; d < D; d++)
			mx = fmax(mx, x[r * D + d]);
		for (int d = 0; d < D; d++)
			sum += exp(x[r * D + d] - mx);
		for (int d = 0; d < D; d++)
			want[r * D + d] = (float)(exp(x[r * D + d] - mx) / sum);
	}
	run("softmax", &in, 1, out, NULL, 0);
	got = th_read_f32(client, out, R * D);
	th_expect_close_f32(got, want, R * D, 1e-6f, F32_RTOL, "softmax");
	for (int r = 0; r < R; r++) {
		double sum = 0;

		for (int d = 0; d < D; d++)
			sum += got[r * D + d];
		cr_assert(fabs(sum - 1.0) < 1e-5, "softmax row %d sums to %.8f", r, sum);
	}
	free(x);
	free(got);
}

/* want[M,N] = alpha * a[M,K] b + bias, b given as [K,N] or as [N,K] when trans_b. */
static void gemm_ref(const float *a, const float *b, const float *bias, float *want, int m, int k,
                     int n, int trans_b, double alpha)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double acc = 0;

			for (int p = 0; p < k; p++)
				acc += (double)a[i * k + p] *
				       (trans_b ? b[j * k + p] : b[p * n + j]);
			want[i * n + j] = (float)(alpha * acc + (bias ? bias[j] : 0.0));
		}
}

static void check_gemm(int trans_b, int with_bias, double alpha, uint64_t seed)
{
	enum { M = 13, K = 17, N = 11 };
	const int64_t sa[] = { M, K }, sbn[] = { K, N }, sbt[] = { N, K }, sbias[] = { N };
	const int64_t sc[] = { M, N };
	float *a = random_f32(M * K, seed, -1, 1), *b = random_f32(K * N, seed + 1, -1, 1);
	float *bias = random_f32(N, seed + 2, -1, 1), want[M * N], *got;
	tileops_tensor in[3] = { th_tensor_f32(client, 2, sa, a),
		                 th_tensor_f32(client, 2, trans_b ? sbt : sbn, b),
		                 th_tensor_f32(client, 1, sbias, bias) };
	tileops_tensor out = th_tensor_f32(client, 2, sc, NULL);
	tileops_param p[2] = { tileops_param_bool("trans_b", trans_b),
		               tileops_param_float("alpha", alpha) };

	gemm_ref(a, b, with_bias ? bias : NULL, want, M, K, N, trans_b, alpha);
	run("gemm", in, with_bias ? 3 : 2, out, p, 2);
	got = th_read_f32(client, out, M * N);
	th_expect_close_f32(got, want, M * N, 1e-5f, 1e-5f, "gemm");
	free(a);
	free(b);
	free(bias);
	free(got);
}

Test(ops, gemm_matches_the_host_product)
{
	check_gemm(0, 0, 1.0, 20);
}

Test(ops, gemm_with_trans_b_reads_b_as_n_by_k)
{
	check_gemm(1, 0, 1.0, 30);
}

Test(ops, gemm_adds_the_bias_and_scales_by_alpha)
{
	check_gemm(0, 1, 0.5, 40);
	check_gemm(1, 1, 2.0, 50);
}

/* Round f32 data to bf16 in place and return the bf16 bytes. */
static uint16_t *to_bf16(float *x, size_t n)
{
	uint16_t *h = malloc(n * 2);

	cr_assert(h);
	for (size_t i = 0; i < n; i++) {
		h[i] = th_f32_to_bf16(x[i]);
		x[i] = th_bf16_to_f32(h[i]);
	}
	return h;
}

Test(ops, bf16_add_and_silu_agree_within_bf16_rounding)
{
	enum { N = 257 };
	const int64_t shape[] = { N };
	float *a = random_f32(N, 60, -8, 8), *b = random_f32(N, 61, -8, 8), want[N], *got;
	uint16_t *ha = to_bf16(a, N), *hb = to_bf16(b, N);
	tileops_tensor in[2] = { th_tensor(client, TILEOPS_BF16, 1, shape),
		                 th_tensor(client, TILEOPS_BF16, 1, shape) };
	tileops_tensor out = th_tensor(client, TILEOPS_BF16, 1, shape);

	th_write(client, in[0], ha, N * 2);
	th_write(client, in[1], hb, N * 2);
	run("add", in, 2, out, NULL, 0);
	for (int i = 0; i < N; i++)
		want[i] = a[i] + b[i];
	got = th_read_bf16(client, out, N);
	th_expect_close_f32(got, want, N, BF16_ATOL, BF16_RTOL, "bf16 add");
	free(got);

	run("silu", in, 1, out, NULL, 0);
	for (int i = 0; i < N; i++)
		want[i] = silu_ref(a[i]);
	got = th_read_bf16(client, out, N);
	th_expect_close_f32(got, want, N, BF16_ATOL, BF16_RTOL, "bf16 silu");
	free(got);
	free(a);
	free(b);
	free(ha);
	free(hb);
}

Test(ops, bf16_gemm_agrees_within_bf16_rounding)
{
	enum { M = 8, K = 64, N = 24 };
	const int64_t sa[] = { M, K }, sb[] = { N, K }, sc[] = { M, N };
	float *a = random_f32(M * K, 70, -1, 1), *b = random_f32(N * K, 71, -1, 1), want[M * N];
	float *got;
	uint16_t *ha = to_bf16(a, M * K), *hb = to_bf16(b, N * K);
	tileops_tensor in[2] = { th_tensor(client, TILEOPS_BF16, 2, sa),
		                 th_tensor(client, TILEOPS_BF16, 2, sb) };
	tileops_tensor out = th_tensor(client, TILEOPS_BF16, 2, sc);
	tileops_param p = tileops_param_bool("trans_b", 1);

	th_write(client, in[0], ha, M * K * 2);
	th_write(client, in[1], hb, N * K * 2);
	gemm_ref(a, b, NULL, want, M, K, N, 1, 1.0);
	run("gemm", in, 2, out, &p, 1);
	got = th_read_bf16(client, out, M * N);
	th_expect_close_f32(got, want, M * N, BF16_ATOL, BF16_RTOL, "bf16 gemm");
	free(got);
	free(a);
	free(b);
	free(ha);
	free(hb);
}

Test(ops, chained_ops_see_each_others_results)
{
	/* out = silu(a) * b, computed in two ops on the daemon without a read between. */
	enum { N = 300 };
	const int64_t shape[] = { N };
	float *a = random_f32(N, 80, -5, 5), *b = random_f32(N, 81, -5, 5), want[N], *got;
	tileops_tensor ta = th_tensor_f32(client, 1, shape, a);
	tileops_tensor tb = th_tensor_f32(client, 1, shape, b);
	tileops_tensor tmp = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor out = th_tensor_f32(client, 1, shape, NULL);
	tileops_tensor in2[2] = { tmp, tb };

	run("silu", &ta, 1, tmp, NULL, 0);
	run("mul", in2, 2, out, NULL, 0);
	for (int i = 0; i < N; i++)
		want[i] = silu_ref(a[i]) * b[i];
	got = th_read_f32(client, out, N);
	th_expect_close_f32(got, want, N, F32_ATOL, F32_RTOL, "silu then mul");
	free(a);
	free(b);
	free(got);
}
