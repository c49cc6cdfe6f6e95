/*
 * llama_mlp.c - a Llama MLP block run through tileopsd, checked on the CPU.
 *
 *   tileops-example-mlp [ADDRESS] [--tokens T] [--hidden H] [--inter I]
 *                       [--dtype f32|bf16|f16] [--iters N]
 *
 * y = x + W_down (silu(W_gate h) * (W_up h)),  h = rms_norm(x) * w_norm
 *
 * Seven ops, each run and synchronised on its own so its time can be
 * shown. The first iteration is cold (allocation, caches); the median of
 * the others is the warm time. The result is compared with the same block
 * computed here in double precision from the same rounded inputs, each
 * intermediate rounded to the dtype as the daemon stores it.
 * Exit status 0 only when the comparison passes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_dtype.h"
#include "tileops.h"

#define N_OPS 7
#define MAX_ITERS 1000

struct mlp_args {
	const char *address;
	int64_t tokens, hidden, inter;
	tileops_dtype dtype;
	int64_t iters;
};

/* The block's tensors on the daemon. */
struct mlp_tensors {
	tileops_tensor x, w_norm, w_gate, w_up, w_down;
	tileops_tensor h, g, u, s, p, d, y;
};

static const char *const op_label[N_OPS] = {
	"rms_norm", "gemm gate", "gemm up", "silu", "mul", "gemm down", "add",
};

/* Store v in element i of a buffer of dtype dt. */
static void put(void *buf, tileops_dtype dt, size_t i, double v)
{
	if (dt == TILEOPS_F32)
		((float *)buf)[i] = (float)v;
	else if (dt == TILEOPS_BF16)
		((uint16_t *)buf)[i] = f32_to_bf16((float)v);
	else
		((uint16_t *)buf)[i] = f32_to_f16((float)v);
}

static double get(const void *buf, tileops_dtype dt, size_t i)
{
	if (dt == TILEOPS_F32)
		return ((const float *)buf)[i];
	if (dt == TILEOPS_BF16)
		return bf16_to_f32(((const uint16_t *)buf)[i]);
	return f16_to_f32(((const uint16_t *)buf)[i]);
}

/* v as the daemon would store it in dtype dt. */
static double round_to(tileops_dtype dt, double v)
{
	if (dt == TILEOPS_F32)
		return (float)v;
	if (dt == TILEOPS_BF16)
		return bf16_to_f32(f32_to_bf16((float)v));
	return f16_to_f32(f32_to_f16((float)v));
}

/* ---- the reference -------------------------------------------------------- */

/* A uniform value in [-1, 1) from a fixed-seed generator (xorshift64*). */
static double rand_unit(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Host copies of the inputs, already rounded to the dtype, as doubles. */
struct mlp_host {
	double *x, *w_norm, *w_gate, *w_up, *w_down;
};

/* out[t, n] = sum_k a[t, k] * b[n, k], rounded to dt. */
static void gemm_nt(tileops_dtype dt, const double *a, const double *b, double *out, int64_t t,
                    int64_t n, int64_t k)
{
	int64_t i, j, l;

	for (i = 0; i < t; i++)
		for (j = 0; j < n; j++) {
			double acc = 0;

			for (l = 0; l < k; l++)
				acc += a[i * k + l] * b[j * k + l];
			out[i * n + j] = round_to(dt, acc);
		}
}

/* The block in double precision, each intermediate rounded to dt. */
static double *mlp_reference(const struct mlp_args *a, const struct mlp_host *in)
{
	int64_t T = a->tokens, H = a->hidden, I = a->inter, t, j;
	double *h = calloc((size_t)(T * H), sizeof(double));
	double *g = calloc((size_t)(T * I), sizeof(double));
	double *u = calloc((size_t)(T * I), sizeof(double));
	double *d = calloc((size_t)(T * H), sizeof(double));
	double *y = calloc((size_t)(T * H), sizeof(double));

	if (h == NULL || g == NULL || u == NULL || d == NULL || y == NULL)
		goto out;
	for (t = 0; t < T; t++) {
		double ss = 0, scale;

		for (j = 0; j < H; j++)
			ss += in->x[t * H + j] * in->x[t * H + j];
		scale = 1.0 / sqrt(ss / (double)H + 1e-5);
		for (j = 0; j < H; j++)
			h[t * H + j] = round_to(a->dtype, in->x[t * H + j] * scale * in->w_norm[j]);
	}
	gemm_nt(a->dtype, h, in->w_gate, g, T, I, H);
	gemm_nt(a->dtype, h, in->w_up, u, T, I, H);
	for (j = 0; j < T * I; j++) {
		double s = round_to(a->dtype, g[j] / (1.0 + exp(-g[j])));

		g[j] = round_to(a->dtype, s * u[j]); /* g now holds p */
	}
	gemm_nt(a->dtype, g, in->w_down, d, T, H, I);
	for (j = 0; j < T * H; j++)
		y[j] = round_to(a->dtype, in->x[j] + d[j]);
out:
	free(h);
	free(g);
	free(u);
	free(d);
	return y;
}

/* ---- talking to the daemon ------------------------------------------------ */

static int check(tileops_status st, const char *what)
{
	if (st == TILEOPS_OK)
		return 0;
	fprintf(stderr, "tileops-example-mlp: %s failed: %s: %s\n", what, tileops_strerror(st),
	        tileops_last_error());
	return -1;
}

static int tensor_new(tileops_client *c, tileops_dtype dt, int64_t d0, int64_t d1,
                      tileops_tensor *out)
{
	int64_t shape[2] = { d0, d1 };

	return check(tileops_tensor_create(c, dt, d1 > 0 ? 2 : 1, shape, out), "tensor_create");
}

/* Fill a tensor with uniform values times `scale` plus `bias`; keep the
 * rounded values in *host for the reference. */
static int tensor_fill(tileops_client *c, const struct mlp_args *a, tileops_tensor t, size_t n,
                       double scale, double bias, uint64_t *rng, double **host)
{
	size_t es = tileops_dtype_size(a->dtype), i;
	void *buf = malloc(n * es);
	int rv;

	*host = malloc(n * sizeof(double));
	if (buf == NULL || *host == NULL) {
		free(buf);
		fprintf(stderr, "tileops-example-mlp: out of memory\n");
		return -1;
	}
	for (i = 0; i < n; i++) {
		put(buf, a->dtype, i, bias + scale * rand_unit(rng));
		(*host)[i] = get(buf, a->dtype, i);
	}
	rv = check(tileops_tensor_write(c, t, 0, buf, n * es), "tensor_write");
	free(buf);
	return rv;
}

static int mlp_create(tileops_client *c, const struct mlp_args *a, struct mlp_tensors *m)
{
	tileops_dtype dt = a->dtype;
	int64_t T = a->tokens, H = a->hidden, I = a->inter;

	return tensor_new(c, dt, T, H, &m->x) || tensor_new(c, dt, H, 0, &m->w_norm) ||
	                       tensor_new(c, dt, I, H, &m->w_gate) ||
	                       tensor_new(c, dt, I, H, &m->w_up) ||
	                       tensor_new(c, dt, H, I, &m->w_down) ||
	                       tensor_new(c, dt, T, H, &m->h) || tensor_new(c, dt, T, I, &m->g) ||
	                       tensor_new(c, dt, T, I, &m->u) || tensor_new(c, dt, T, I, &m->s) ||
	                       tensor_new(c, dt, T, I, &m->p) || tensor_new(c, dt, T, H, &m->d) ||
	                       tensor_new(c, dt, T, H, &m->y)
	               ? -1
	               : 0;
}

static int mlp_fill(tileops_client *c, const struct mlp_args *a, const struct mlp_tensors *m,
                    struct mlp_host *host)
{
	size_t T = (size_t)a->tokens, H = (size_t)a->hidden, I = (size_t)a->inter;
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	return tensor_fill(c, a, m->x, T * H, 1.0, 0.0, &rng, &host->x) ||
	                       tensor_fill(c, a, m->w_norm, H, 0.1, 1.0, &rng, &host->w_norm) ||
	                       tensor_fill(c, a, m->w_gate, I * H, 1.0 / sqrt((double)H), 0.0, &rng,
	                                   &host->w_gate) ||
	                       tensor_fill(c, a, m->w_up, I * H, 1.0 / sqrt((double)H), 0.0, &rng,
	                                   &host->w_up) ||
	                       tensor_fill(c, a, m->w_down, H * I, 1.0 / sqrt((double)I), 0.0, &rng,
	                                   &host->w_down)
	               ? -1
	               : 0;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Run one op and wait for it; *us is the wall time of both. */
static int op_timed(tileops_client *c, const char *name, const tileops_tensor *in, size_t n_in,
                    tileops_tensor out, const tileops_param *params, size_t n_params, double *us)
{
	tileops_op op = { name, in, n_in, &out, 1, params, n_params };
	double t0 = now_us();

	if (check(tileops_op_run(c, &op), name) != 0 || check(tileops_sync(c), "sync") != 0)
		return -1;
	*us = now_us() - t0;
	return 0;
}

/* One pass of the block; us[i] is the time of op i. */
static int mlp_run(tileops_client *c, const struct mlp_tensors *m, double us[N_OPS])
{
	const tileops_param norm_p[] = { tileops_param_float("eps", 1e-5) };
	const tileops_param gemm_p[] = { tileops_param_float("alpha", 1.0),
		                         tileops_param_bool("trans_b", 1) };
	const tileops_tensor norm_in[] = { m->x, m->w_norm };
	const tileops_tensor gate_in[] = { m->h, m->w_gate };
	const tileops_tensor up_in[] = { m->h, m->w_up };
	const tileops_tensor mul_in[] = { m->s, m->u };
	const tileops_tensor down_in[] = { m->p, m->w_down };
	const tileops_tensor add_in[] = { m->x, m->d };

	return op_timed(c, "rms_norm", norm_in, 2, m->h, norm_p, 1, &us[0]) ||
	                       op_timed(c, "gemm", gate_in, 2, m->g, gemm_p, 2, &us[1]) ||
	                       op_timed(c, "gemm", up_in, 2, m->u, gemm_p, 2, &us[2]) ||
	                       op_timed(c, "silu", &m->g, 1, m->s, NULL, 0, &us[3]) ||
	                       op_timed(c, "mul", mul_in, 2, m->p, NULL, 0, &us[4]) ||
	                       op_timed(c, "gemm", down_in, 2, m->d, gemm_p, 2, &us[5]) ||
	                       op_timed(c, "add", add_in, 2, m->y, NULL, 0, &us[6])
	               ? -1
	               : 0;
}

/* ---- the result ----------------------------------------------------------- */

static double tolerance(tileops_dtype dt)
{
	return dt == TILEOPS_F32 ? 1e-4 : dt == TILEOPS_BF16 ? 5e-2 : 1e-2;
}

/* Read y back and compare it norm-wise with the reference. */
static int mlp_verify(tileops_client *c, const struct mlp_args *a, const struct mlp_tensors *m,
                      const struct mlp_host *host, double *rel_err)
{
	size_t n = (size_t)(a->tokens * a->hidden), i;
	size_t es = tileops_dtype_size(a->dtype);
	void *buf = malloc(n * es);
	double *ref = mlp_reference(a, host);
	double num = 0, den = 0;
	int rv = -1;

	if (buf == NULL || ref == NULL) {
		fprintf(stderr, "tileops-example-mlp: out of memory\n");
		goto out;
	}
	if (check(tileops_tensor_read(c, m->y, 0, buf, n * es), "tensor_read") != 0)
		goto out;
	for (i = 0; i < n; i++) {
		double diff = get(buf, a->dtype, i) - ref[i];

		num += diff * diff;
		den += ref[i] * ref[i];
	}
	*rel_err = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
	rv = 0;
out:
	free(buf);
	free(ref);
	return rv;
}

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;

	return (a > b) - (a < b);
}

/* Print cold (first iteration) and warm (median of the rest) times. */
static void print_times(double (*us)[N_OPS], int iters)
{
	double col[MAX_ITERS], cold_total = 0, warm_total = 0;
	int i, k;

	printf("%-12s %12s %12s\n", "op", "cold us", "warm us");
	for (i = 0; i < N_OPS; i++) {
		double warm = us[0][i];

		for (k = 1; k < iters; k++)
			col[k - 1] = us[k][i];
		if (iters > 1) {
			qsort(col, (size_t)(iters - 1), sizeof(double), cmp_double);
			warm = col[(iters - 1) / 2];
		}
		cold_total += us[0][i];
		warm_total += warm;
		printf("%-12s %12.1f %12.1f\n", op_label[i], us[0][i], warm);
	}
	printf("%-12s %12.1f %12.1f\n", "total", cold_total, warm_total);
}

/* ---- arguments and main --------------------------------------------------- */

static int parse_dtype(const char *s, tileops_dtype *out)
{
	if (strcmp(s, "f32") == 0)
		*out = TILEOPS_F32;
	else if (strcmp(s, "bf16") == 0)
		*out = TILEOPS_BF16;
	else if (strcmp(s, "f16") == 0)
		*out = TILEOPS_F16;
	else
		return -1;
	return 0;
}

static int parse_count(const char *s, int64_t max, int64_t *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (*end != '\0' || v < 1 || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct mlp_args *a)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (opt[0] != '-') {
			a->address = opt;
			continue;
		}
		if (val == NULL)
			bad = 1;
		else if (strcmp(opt, "--address") == 0)
			a->address = val;
		else if (strcmp(opt, "--tokens") == 0)
			bad = parse_count(val, 1 << 20, &a->tokens);
		else if (strcmp(opt, "--hidden") == 0)
			bad = parse_count(val, 1 << 20, &a->hidden);
		else if (strcmp(opt, "--inter") == 0)
			bad = parse_count(val, 1 << 20, &a->inter);
		else if (strcmp(opt, "--dtype") == 0)
			bad = parse_dtype(val, &a->dtype);
		else if (strcmp(opt, "--iters") == 0)
			bad = parse_count(val, MAX_ITERS, &a->iters);
		else
			bad = 1;
		if (bad) {
			fprintf(stderr,
			        "usage: tileops-example-mlp [ADDRESS] [--tokens T] [--hidden H] "
			        "[--inter I] [--dtype f32|bf16|f16] [--iters N (1..%d)]\n",
			        MAX_ITERS);
			return -1;
		}
		i++;
	}
	return 0;
}

static void mlp_free(tileops_client *c, struct mlp_tensors *m, struct mlp_host *host)
{
	const tileops_tensor *t = &m->x;
	size_t i;

	/* The struct is an array of handles; free them all. */
	for (i = 0; i < sizeof(*m) / sizeof(*t); i++)
		tileops_tensor_free(c, t[i]);
	free(host->x);
	free(host->w_norm);
	free(host->w_gate);
	free(host->w_up);
	free(host->w_down);
}

int main(int argc, char **argv)
{
	struct mlp_args a = { NULL, 16, 512, 1408, TILEOPS_F32, 5 };
	struct mlp_tensors m;
	struct mlp_host host;
	tileops_connect_options opts;
	tileops_server_info info;
	tileops_client *c = NULL;
	double(*us)[N_OPS] = NULL, err = 0;
	int k, rv = 1;

	memset(&m, 0, sizeof(m));
	memset(&host, 0, sizeof(host));
	if (parse_args(argc, argv, &a) != 0)
		return 2;
	memset(&opts, 0, sizeof(opts));
	opts.address = a.address;
	opts.name = "tileops-example-mlp";
	if (check(tileops_connect_opts(&opts, &c), "connect") != 0)
		return 1;
	tileops_server_info_get(c, &info);
	printf("tileopsd %s, backend %s, device %s\n", info.daemon_version, info.backend,
	       info.device);
	printf("Llama MLP: tokens %lld, hidden %lld, intermediate %lld, %s, %lld iterations\n",
	       (long long)a.tokens, (long long)a.hidden, (long long)a.inter,
	       tileops_dtype_name(a.dtype), (long long)a.iters);

	if ((us = calloc((size_t)a.iters, sizeof(*us))) == NULL)
		goto out;
	if (mlp_create(c, &a, &m) != 0 || mlp_fill(c, &a, &m, &host) != 0)
		goto out;
	for (k = 0; k < a.iters; k++)
		if (mlp_run(c, &m, us[k]) != 0)
			goto out;
	print_times(us, (int)a.iters);
	if (mlp_verify(c, &a, &m, &host, &err) != 0)
		goto out;
	rv = err <= tolerance(a.dtype) ? 0 : 1;
	printf("relative error %.3g (tolerance %.0e): %s\n", err, tolerance(a.dtype),
	       rv == 0 ? "PASS" : "FAIL");
out:
	if (rv != 0 && err == 0)
		printf("FAIL\n");
	mlp_free(c, &m, &host);
	free(us);
	tileops_close(c);
	return rv;
}
