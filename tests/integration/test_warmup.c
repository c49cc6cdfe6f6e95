/*
 * test_warmup.c - plans that tileopsd captures at start from its warm-up
 * file: captured before the daemon reports ready, opened by name by the
 * sessions of their tenant, run with those sessions' own tensors bound in,
 * and a broken warm-up file stops the start with a message naming it.
 *
 * Each test starts a tileopsd of its own (the config names the file).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define ROWS 8
#define H 32
#define I 48

static daemon2 d;
static char dir[64];

static const char plan_yaml[] =
        "plans:\n"
        "  - name: decode-mlp\n"
        "    tenant: serving\n"
        "    buckets: [1, 2, 4, 8]\n"
        "    bucketed: [x, h, g, y]\n"
        "    tensors:\n"
        "      - {name: x, dtype: f32, shape: [8, 32]}\n"
        "      - {name: w, dtype: f32, shape: [32]}\n"
        "      - {name: h, dtype: f32, shape: [8, 32]}\n"
        "      - {name: wg, dtype: f32, shape: [48, 32]}\n"
        "      - {name: g, dtype: f32, shape: [8, 48]}\n"
        "      - {name: y, dtype: f32, shape: [8, 48]}\n"
        "    ops:\n"
        "      - {op: rms_norm, inputs: [x, w], outputs: [h], params: {eps: 1.0e-5}}\n"
        "      - {op: gemm, inputs: [h, wg], outputs: [g], params: {trans_b: true}}\n"
        "      - {op: silu, inputs: [g], outputs: [y]}\n";

static void write_files(const char *yaml, char *config, size_t len)
{
	char path[128];

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/tileops-warmup-XXXXXX");
		cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	}
	snprintf(path, sizeof(path), "%s/warmup.yaml", dir);
	daemon2_write_text(path, yaml);
	snprintf(config, len, "tenant = serving graphs=16\nwarmup = %s\n", path);
}

static void cleanup(void)
{
	char cmd[128];

	daemon2_kill_running();
	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	dir[0] = '\0';
}

TestSuite(warmup, .fini = cleanup, .timeout = 120);

static tileops_client *connect_tenant(const char *tenant)
{
	tileops_connect_options o;
	tileops_client *c = NULL;

	memset(&o, 0, sizeof(o));
	o.name = "warmup";
	o.tenant = tenant;
	tileops_status st = tileops_connect_opts(&o, &c);
	cr_assert_eq(st, TILEOPS_OK, "connect (tenant %s): %s", tenant ? tenant : "own",
	             tileops_last_error());
	return c;
}

static tileops_tensor make(tileops_client *c, int rows, int cols, const float *v)
{
	int64_t shape[2] = { rows, cols };
	tileops_tensor t;
	int ndim = cols ? 2 : 1;

	if (!cols)
		shape[0] = rows;
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, ndim, shape, &t), TILEOPS_OK, "%s",
	             tileops_last_error());
	if (v)
		cr_assert_eq(tileops_tensor_write(c, t, 0, v,
		                                  sizeof(float) * (size_t)rows *
		                                          (size_t)(cols ? cols : 1)),
		             TILEOPS_OK, "%s", tileops_last_error());
	return t;
}

static void fill(float *v, size_t n, unsigned seed)
{
	srand(seed);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

Test(warmup, plans_are_captured_before_the_daemon_is_ready)
{
	char config[256];

	write_files(plan_yaml, config, sizeof(config));
	daemon2_start(&d, config);
	daemon2_use(&d);
	/* The ready file exists only once the warm-up is over. */
	char *json = th_stats();
	cr_assert(th_contains(json, "\"ready\":true"), "%s", json);
	free(json);
	cr_assert_eq(th_stat("tenants.serving.graphs"), 4.0, "every bucket is captured");
	cr_assert_eq(th_stat("tenants.serving.captures"), 4.0);
	cr_assert_eq(th_stat("sessions"), 0.0, "warm-up sessions are not client sessions");
	daemon2_stop(&d);
}

Test(warmup, a_session_of_the_tenant_runs_the_plan_on_its_own_tensors)
{
	char config[256];
	float x[ROWS * H], w[H], wg[I * H], y[ROWS * I], want[ROWS * I];

	write_files(plan_yaml, config, sizeof(config));
	daemon2_start(&d, config);
	daemon2_use(&d);
	tileops_client *c = connect_tenant("serving");
	tileops_plan *p = NULL;
	cr_assert_eq(tileops_plan_open(c, "decode-mlp", &p), TILEOPS_OK, "%s",
	             tileops_last_error());
	fill(x, ROWS * H, 1);
	fill(w, H, 2);
	fill(wg, I * H, 3);
	tileops_tensor tx = make(c, ROWS, H, x), tw = make(c, H, 0, w), twg = make(c, I, H, wg);
	tileops_tensor th = make(c, ROWS, H, NULL), tg = make(c, ROWS, I, NULL);
	tileops_tensor ty = make(c, ROWS, I, NULL);
	const char *names[6] = { "x", "w", "wg", "h", "g", "y" };
	tileops_tensor mine[6] = { tx, tw, twg, th, tg, ty };
	tileops_binding b[6];
	for (int i = 0; i < 6; i++) {
		int ndim = 0;
		int64_t shape[TILEOPS_MAX_DIMS];
		cr_assert_eq(
		        tileops_plan_tensor(p, names[i], &b[i].plan_tensor, NULL, &ndim, shape),
		        TILEOPS_OK, "%s", tileops_last_error());
		cr_assert(ndim >= 1 && shape[0] > 0);
		b[i].tensor = mine[i];
	}
	/* Size 3 replays bucket 4; rows 0..2 must be right. */
	cr_assert_eq(tileops_plan_run(p, 3, b, 6), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_read(c, ty, 0, y, sizeof(y)), TILEOPS_OK, "%s",
	             tileops_last_error());
	for (int r = 0; r < 3; r++) {
		double ss = 0;
		float hrow[H];
		for (int k = 0; k < H; k++)
			ss += (double)x[r * H + k] * x[r * H + k];
		double inv = 1.0 / sqrt(ss / H + 1e-5);
		for (int k = 0; k < H; k++)
			hrow[k] = (float)(x[r * H + k] * inv * w[k]);
		for (int n = 0; n < I; n++) {
			double acc = 0;
			for (int k = 0; k < H; k++)
				acc += (double)hrow[k] * wg[n * H + k];
			want[r * I + n] = (float)(acc / (1.0 + exp(-acc)));
			cr_assert(fabsf(y[r * I + n] - want[r * I + n]) <=
			                  1e-4f * (1 + fabsf(want[r * I + n])),
			          "row %d col %d: got %g, want %g", r, n, y[r * I + n],
			          want[r * I + n]);
		}
	}
	/* A second run with the same bindings replays the cached graph. */
	double hits = th_stat("tenants.serving.hits");
	cr_assert_eq(tileops_plan_run(p, 3, b, 6), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_sync(c), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(th_stat("tenants.serving.hits"), hits + 1);
	cr_assert_eq(tileops_plan_tensor(p, "nope", NULL, NULL, NULL, NULL),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	tileops_plan_free(p);
	tileops_close(c);
	daemon2_stop(&d);
}

Test(warmup, other_tenants_cannot_open_the_plan)
{
	char config[256];

	write_files(plan_yaml, config, sizeof(config));
	daemon2_start(&d, config);
	daemon2_use(&d);
	tileops_client *c = connect_tenant(NULL);
	tileops_plan *p = NULL;
	cr_assert_eq(tileops_plan_open(c, "decode-mlp", &p), TILEOPS_ERR_UNKNOWN_HANDLE);
	cr_assert(th_contains(tileops_last_error(), "decode-mlp"), "%s", tileops_last_error());
	cr_assert_null(p);
	tileops_close(c);
	daemon2_stop(&d);
}

/* Run tileopsd with a config; its exit status, and its stderr in `out`. */
static int run_daemon(const char *config, char *out, size_t len)
{
	char conf[128], cmd[512];
	snprintf(conf, sizeof(conf), "%s/bad.conf", dir);
	daemon2_write_text(conf, config);
	snprintf(cmd, sizeof(cmd),
	         "'%s' --backend cpu --config '%s' --manifest '%s' --listen ipc://%s/d.sock "
	         "--stats ipc://%s/s.sock 2>&1",
	         getenv("TILEOPSD"), conf, getenv("TILEOPS_MANIFEST"), dir, dir);
	FILE *f = popen(cmd, "r");
	cr_assert_not_null(f);
	size_t n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	int status = pclose(f);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(warmup, a_broken_warmup_file_stops_the_start_naming_the_problem)
{
	char config[256], out[4096];
	static const char bad_op[] = "plans:\n"
	                             "  - name: p\n"
	                             "    tenant: serving\n"
	                             "    tensors:\n"
	                             "      - {name: a, dtype: f32, shape: [4]}\n"
	                             "      - {name: b, dtype: f16, shape: [4]}\n"
	                             "    ops:\n"
	                             "      - {op: add, inputs: [a, b], outputs: [a]}\n";

	write_files(bad_op, config, sizeof(config));
	cr_assert_eq(run_daemon(config, out, sizeof(out)), 1, "%s", out);
	cr_assert(th_contains(out, "warm-up plan 'p'") && th_contains(out, "add"), "%s", out);

	write_files("plans:\n  - name: q\n    tenant: serving\n    tensors:\n"
	            "      - {name: a, dtype: f33, shape: [4]}\n    ops: []\n",
	            config, sizeof(config));
	cr_assert_eq(run_daemon(config, out, sizeof(out)), 1, "%s", out);
	cr_assert(th_contains(out, "warmup.yaml:5") && th_contains(out, "f33"), "%s", out);

	write_files("plans:\n  - name: r\n    tenant: nobody-configured\n    tensors:\n"
	            "      - {name: a, dtype: f32, shape: [4]}\n"
	            "    ops:\n      - {op: silu, inputs: [a], outputs: [a]}\n",
	            config, sizeof(config));
	cr_assert_eq(run_daemon(config, out, sizeof(out)), 1, "%s", out);
	cr_assert(th_contains(out, "nobody-configured"), "%s", out);
}
