/*
 * test_plans.c - plans and the per-tenant graph cache, against a real
 * tileopsd (CPU backend: plans replay recorded op lists there, through the
 * same cache as CUDA graphs).
 *
 * Every test starts and ends with tileops_admin_reset, so no test sees the
 * graphs or counters another left behind and the order they run in does
 * not matter. Tests that need a daemon configured differently (quotas,
 * named tenants, who may connect) start a second tileopsd of their own.
 *
 * The regression these tests exist for: a compile cache with a fixed number
 * of slots shared by every caller overflowed when a ninth unrelated caller
 * ran in the same process, so tests passed or failed depending on which ran
 * before them. Here each tenant has its own quota and LRU, and the tests
 * below drive many tenants past their quotas, in a random (seeded, printed)
 * order, and flood one tenant while watching another.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define ROWS 8 /* the largest bucket */
#define K 32
#define N 16
#define SENTINEL 1234.5f
#define NOBODY 65534 /* uid and gid of nobody/nogroup */

/* ---- the fixture --------------------------------------------------------- */

static tileops_client *client;
/* Not on a test's stack: the fixture stops it if the test failed first. */
static daemon2 second;

static void reset_caches(tileops_client *c)
{
	tileops_status st = tileops_admin_reset(c);

	cr_assert_eq(st, TILEOPS_OK, "admin_reset: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
}

static void setup(void)
{
	client = th_connect("plans", 0);
	reset_caches(client);
}

static void teardown(void)
{
	daemon2_kill_running();
	/* The next test starts from empty caches whatever this one left. */
	(void)tileops_admin_reset(client);
	tileops_close(client);
}

TestSuite(plans, .init = setup, .fini = teardown, .timeout = 240);

/* ---- small tools --------------------------------------------------------- */

static uint64_t test_seed(void)
{
	const char *s = getenv("TILEOPS_TEST_SEED");

	return s != NULL && s[0] != '\0' ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
}

static tileops_status connect_tenant(const char *name, const char *tenant, tileops_client **out)
{
	tileops_connect_options o;

	memset(&o, 0, sizeof(o));
	o.address = th_address();
	o.timeout_ms = 60000;
	o.name = name;
	o.tenant = tenant;
	return tileops_connect_opts(&o, out);
}

static tileops_client *connect_tenant_ok(const char *name, const char *tenant)
{
	tileops_client *c = NULL;
	tileops_status st = connect_tenant(name, tenant, &c);

	cr_assert_eq(st, TILEOPS_OK, "connect to %s as tenant %s: %s (%s)", th_address(),
	             tenant ? tenant : "(own)", tileops_strerror(st), tileops_last_error());
	return c;
}

/* The stats name of the tenant a session without a named tenant gets. */
static void own_tenant(tileops_client *c, char *buf, size_t len)
{
	tileops_server_info info;

	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	snprintf(buf, len, "session-%llu", (unsigned long long)info.session_id);
}

/* One counter of one tenant from the stats socket. */
static double tstat(const char *tenant, const char *field)
{
	char path[160];

	snprintf(path, sizeof(path), "tenants.%s.%s", tenant, field);
	return th_stat(path);
}

static tileops_plan *plan_begin(tileops_client *c, const tileops_plan_options *o)
{
	tileops_plan *p = NULL;
	tileops_status st = tileops_plan_begin(c, o, &p);

	cr_assert_eq(st, TILEOPS_OK, "plan_begin: %s", tileops_last_error());
	return p;
}

static void plan_add(tileops_plan *p, const tileops_op *op)
{
	tileops_status st = tileops_plan_add(p, op);

	cr_assert_eq(st, TILEOPS_OK, "plan_add %s: %s", op->name, tileops_last_error());
}

static void plan_end(tileops_plan *p)
{
	tileops_status st = tileops_plan_end(p);

	cr_assert_eq(st, TILEOPS_OK, "plan_end: %s (%s)", tileops_strerror(st),
	             tileops_last_error());
}

static void plan_run(tileops_plan *p, int64_t size, const tileops_binding *b, size_t nb)
{
	tileops_status st = tileops_plan_run(p, size, b, nb);

	cr_assert_eq(st, TILEOPS_OK, "plan_run size %lld: %s (%s)", (long long)size,
	             tileops_strerror(st), tileops_last_error());
}

static void fill_const(float *v, size_t n, float x)
{
	for (size_t i = 0; i < n; i++)
		v[i] = x;
}

/* ---- a decode-layer-like plan: rms_norm, gemm, silu, mul, add ------------ */

/*
 * y = silu(h) * h + r with h = rms_norm(x, wn) @ w, all rows apart, so a
 * bucket of b rows computes rows [0, b) exactly as the full tensors would.
 */
typedef struct layer {
	tileops_client *c;
	tileops_tensor x, wn, w, r, xn, h, s, m, y;
	tileops_tensor in[5][2];
	tileops_tensor out[5];
	tileops_op ops[5];
} layer;

static void layer_make(layer *l, tileops_client *c, uint64_t seed)
{
	const int64_t sx[2] = { ROWS, K }, sw[2] = { K, N }, sn[1] = { K }, sy[2] = { ROWS, N };
	static float x[ROWS * K], w[K * N], wn[K], r[ROWS * N];
	th_rng rng = th_rng_seed(seed);

	th_fill_f32(&rng, x, ROWS * K, -2.0f, 2.0f);
	th_fill_f32(&rng, w, K * N, -0.5f, 0.5f);
	th_fill_f32(&rng, wn, K, 0.5f, 1.5f);
	th_fill_f32(&rng, r, ROWS * N, -1.0f, 1.0f);
	l->c = c;
	l->x = th_tensor_f32(c, 2, sx, x);
	l->wn = th_tensor_f32(c, 1, sn, wn);
	l->w = th_tensor_f32(c, 2, sw, w);
	l->r = th_tensor_f32(c, 2, sy, r);
	l->xn = th_tensor_f32(c, 2, sx, NULL);
	l->h = th_tensor_f32(c, 2, sy, NULL);
	l->s = th_tensor_f32(c, 2, sy, NULL);
	l->m = th_tensor_f32(c, 2, sy, NULL);
	l->y = th_tensor_f32(c, 2, sy, NULL);

	const tileops_tensor ins[5][2] = {
		{ l->x, l->wn }, { l->xn, l->w }, { l->h, 0 }, { l->s, l->h }, { l->m, l->r }
	};
	const tileops_tensor outs[5] = { l->xn, l->h, l->s, l->m, l->y };
	const char *names[5] = { "rms_norm", "gemm", "silu", "mul", "add" };

	memcpy(l->in, ins, sizeof(ins));
	memcpy(l->out, outs, sizeof(outs));
	for (int i = 0; i < 5; i++) {
		tileops_op op = { names[i], l->in[i], i == 2 ? 1 : 2, &l->out[i], 1, NULL, 0 };

		l->ops[i] = op;
	}
}

/* The bucketed tensors of a layer plan: everything with ROWS rows. */
static size_t layer_bucketed(const layer *l, tileops_tensor *out)
{
	const tileops_tensor b[7] = { l->x, l->r, l->xn, l->h, l->s, l->m, l->y };

	memcpy(out, b, sizeof(b));
	return 7;
}

static tileops_plan *layer_plan(const layer *l, const tileops_plan_options *o)
{
	tileops_plan *p = plan_begin(l->c, o);

	for (int i = 0; i < 5; i++)
		plan_add(p, &l->ops[i]);
	plan_end(p);
	return p;
}

/* y computed op by op, the reference a plan must reproduce. */
static void layer_one_by_one(const layer *l, float *y)
{
	for (int i = 0; i < 5; i++)
		th_run(l->c, &l->ops[i]);
	th_read(l->c, l->y, y, sizeof(float) * ROWS * N);
}

static void write_sentinel(tileops_client *c, tileops_tensor t)
{
	float v[ROWS * N];

	fill_const(v, ROWS * N, SENTINEL);
	th_write(c, t, v, sizeof(v));
}

static void expect_rows_equal(const float *got, const float *want, int from, int to,
                              const char *what)
{
	for (int i = from * N; i < to * N; i++)
		cr_assert_eq(got[i], want[i], "%s: row %d col %d is %g, expected %g", what, i / N,
		             i % N, (double)got[i], (double)want[i]);
}

Test(plans, a_plan_gives_the_results_of_its_ops_run_one_by_one_every_time)
{
	layer l;
	float want[ROWS * N], got[ROWS * N], x[ROWS * K];
	th_rng rng = th_rng_seed(101);
	tileops_plan *p;

	layer_make(&l, client, 100);
	p = layer_plan(&l, NULL);
	for (int run = 0; run < 40; run++) {
		/* New inputs now and then: the plan reads the tensors each time. */
		if (run % 8 == 0) {
			th_fill_f32(&rng, x, ROWS * K, -2.0f, 2.0f);
			th_write(client, l.x, x, sizeof(x));
			layer_one_by_one(&l, want);
		}
		write_sentinel(client, l.y);
		plan_run(p, 0, NULL, 0);
		th_read(client, l.y, got, sizeof(got));
		expect_rows_equal(got, want, 0, ROWS, "plan output");
	}
	tileops_plan_free(p);
}

Test(plans, submitted_runs_complete_in_order_with_their_bindings)
{
	const int64_t sx[2] = { ROWS, K }, sy[2] = { ROWS, N };
	layer l;
	tileops_tensor xs[4], ys[4];
	tileops_completion *cp[4];
	float want[4][ROWS * N], got[ROWS * N], x[ROWS * K];
	th_rng rng = th_rng_seed(202);
	tileops_plan *p;

	layer_make(&l, client, 200);
	for (int i = 0; i < 4; i++) {
		th_fill_f32(&rng, x, ROWS * K, -2.0f, 2.0f);
		xs[i] = th_tensor_f32(client, 2, sx, x);
		ys[i] = th_tensor_f32(client, 2, sy, NULL);
		th_write(client, l.x, x, sizeof(x));
		layer_one_by_one(&l, want[i]);
	}
	p = layer_plan(&l, NULL);
	for (int i = 0; i < 4; i++) {
		tileops_binding b[2] = { { l.x, xs[i] }, { l.y, ys[i] } };
		tileops_status st = tileops_plan_submit(p, 0, b, 2, &cp[i]);

		cr_assert_eq(st, TILEOPS_OK, "plan_submit %d: %s", i, tileops_last_error());
	}
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(tileops_completion_wait(cp[i], TH_TIMEOUT_MS), TILEOPS_OK,
		             "run %d: %s", i, tileops_last_error());
		tileops_completion_free(cp[i]);
	}
	for (int i = 0; i < 4; i++) {
		th_read(client, ys[i], got, sizeof(got));
		expect_rows_equal(got, want[i], 0, ROWS, "submitted run");
	}
	tileops_plan_free(p);
}

Test(plans, bindings_replace_inputs_for_this_and_later_runs)
{
	const int64_t sx[2] = { ROWS, K }, wide[2] = { ROWS, K + 1 };
	layer l;
	float want_a[ROWS * N], want_b[ROWS * N], got[ROWS * N], xb[ROWS * K], xa[ROWS * K];
	th_rng rng = th_rng_seed(303);
	tileops_tensor x2, bad_shape, bad_dtype;
	tileops_plan *p;

	layer_make(&l, client, 300);
	th_read(client, l.x, xa, sizeof(xa));
	layer_one_by_one(&l, want_a);
	th_fill_f32(&rng, xb, ROWS * K, -2.0f, 2.0f);
	x2 = th_tensor_f32(client, 2, sx, xb);
	th_write(client, l.x, xb, sizeof(xb));
	layer_one_by_one(&l, want_b);
	th_write(client, l.x, xa, sizeof(xa));

	p = layer_plan(&l, NULL);
	plan_run(p, 0, NULL, 0);
	th_read(client, l.y, got, sizeof(got));
	expect_rows_equal(got, want_a, 0, ROWS, "the plan's own input");

	tileops_binding b = { l.x, x2 };
	plan_run(p, 0, &b, 1);
	th_read(client, l.y, got, sizeof(got));
	expect_rows_equal(got, want_b, 0, ROWS, "the bound input");
	/* The binding stays: a later run without bindings still reads x2. */
	write_sentinel(client, l.y);
	plan_run(p, 0, NULL, 0);
	th_read(client, l.y, got, sizeof(got));
	expect_rows_equal(got, want_b, 0, ROWS, "the binding kept for a later run");
	/* Binding the plan's own tensor again restores it. */
	tileops_binding back = { l.x, l.x };
	plan_run(p, 0, &back, 1);
	th_read(client, l.y, got, sizeof(got));
	expect_rows_equal(got, want_a, 0, ROWS, "the plan's own input again");

	bad_shape = th_tensor_f32(client, 2, wide, NULL);
	bad_dtype = th_tensor(client, TILEOPS_BF16, 2, sx);
	tileops_binding wrong[2] = { { l.x, bad_shape }, { l.x, bad_dtype } };
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(tileops_plan_run(p, 0, &wrong[i], 1), TILEOPS_ERR_SHAPE,
		             "binding %d was accepted", i);
		cr_assert(th_contains(tileops_last_error(), "binding"), "%s", tileops_last_error());
	}
	/* A refused binding changes nothing. */
	plan_run(p, 0, NULL, 0);
	th_read(client, l.y, got, sizeof(got));
	expect_rows_equal(got, want_a, 0, ROWS, "after refused bindings");
	tileops_plan_free(p);
}

/* ---- buckets ------------------------------------------------------------- */

static const int64_t buckets4[4] = { 1, 2, 4, 8 };

Test(plans, a_run_replays_the_smallest_bucket_that_fits_its_size)
{
	const int64_t sizes[5] = { 1, 3, 8, 0, 2 }, bucket_of[5] = { 1, 4, 8, 8, 2 };
	layer l;
	tileops_tensor bt[8];
	tileops_plan_options o;
	float want[ROWS * N], got[ROWS * N];
	tileops_plan *p;

	layer_make(&l, client, 400);
	layer_one_by_one(&l, want);
	memset(&o, 0, sizeof(o));
	o.buckets = buckets4;
	o.n_buckets = 4;
	o.bucketed = bt;
	o.n_bucketed = layer_bucketed(&l, bt);
	o.name = "layer-buckets";
	p = layer_plan(&l, &o);
	for (int i = 0; i < 5; i++) {
		char what[64];

		write_sentinel(client, l.y);
		plan_run(p, sizes[i], NULL, 0);
		th_read(client, l.y, got, sizeof(got));
		snprintf(what, sizeof(what), "size %lld", (long long)sizes[i]);
		expect_rows_equal(got, want, 0, (int)(sizes[i] ? sizes[i] : ROWS), what);
		for (int k = (int)bucket_of[i] * N; k < ROWS * N; k++)
			cr_assert_eq(got[k], SENTINEL, "%s: row %d past bucket %lld was written",
			             what, k / N, (long long)bucket_of[i]);
	}
	cr_assert_eq(tileops_plan_run(p, 9, NULL, 0), TILEOPS_ERR_SHAPE, "size 9 was accepted");
	cr_assert(th_contains(tileops_last_error(), "largest bucket"), "%s", tileops_last_error());
	cr_assert_eq(tileops_plan_run(p, -1, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT);
	tileops_plan_free(p);
}

Test(plans, a_bucketed_tensor_must_have_the_largest_bucket_as_dim_0)
{
	layer l;
	tileops_plan_options o;
	tileops_plan *p;

	layer_make(&l, client, 500);
	memset(&o, 0, sizeof(o));
	o.buckets = buckets4;
	o.n_buckets = 4;
	o.bucketed = &l.wn; /* [K]: 32 rows, not 8 */
	o.n_bucketed = 1;
	p = plan_begin(client, &o);
	plan_add(p, &l.ops[0]);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_SHAPE);
	cr_assert(th_contains(tileops_last_error(), "largest bucket"), "%s", tileops_last_error());
	/* A refused plan is not sent, and cannot be run. */
	cr_assert_eq(tileops_plan_run(p, 0, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT);
	tileops_plan_free(p);
}

Test(plans, an_op_invalid_for_one_bucket_is_refused_naming_the_op_and_bucket)
{
	const int64_t sa[2] = { ROWS, N }, sb[2] = { 4, N }, buckets[2] = { 4, 8 };
	tileops_tensor a = th_tensor_f32(client, 2, sa, NULL);
	tileops_tensor b = th_tensor_f32(client, 2, sb, NULL);
	tileops_tensor out = th_tensor_f32(client, 2, sa, NULL);
	tileops_tensor bucketed[2] = { a, out };
	tileops_tensor silu_in[1] = { a }, add_in[2] = { a, b };
	tileops_op silu = { "silu", silu_in, 1, &a, 1, NULL, 0 };
	tileops_op add = { "add", add_in, 2, &out, 1, NULL, 0 };
	tileops_plan_options o;
	tileops_plan *p;

	/* a [bucket, N] + b [4, N] fits bucket 4 and not bucket 8. */
	memset(&o, 0, sizeof(o));
	o.buckets = buckets;
	o.n_buckets = 2;
	o.bucketed = bucketed;
	o.n_bucketed = 2;
	p = plan_begin(client, &o);
	plan_add(p, &silu);
	plan_add(p, &add);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_SHAPE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "plan op 1, bucket 8"), "%s",
	          tileops_last_error());
	tileops_plan_free(p);
}

/* ---- errors -------------------------------------------------------------- */

Test(plans, bad_plans_are_refused_before_anything_is_captured)
{
	const int64_t down[3] = { 1, 4, 2 };
	tileops_plan_options o;
	tileops_plan *p = NULL;
	tileops_tensor in[1] = { 999999 }, out = 999998;
	tileops_op op = { "silu", in, 1, &out, 1, NULL, 0 };
	char tenant[64];

	memset(&o, 0, sizeof(o));
	o.buckets = down;
	o.n_buckets = 3;
	cr_assert_eq(tileops_plan_begin(client, &o, &p), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(th_contains(tileops_last_error(), "ascending"), "%s", tileops_last_error());
	p = plan_begin(client, NULL);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_INVALID_ARGUMENT, "an empty plan was sent");
	plan_add(p, &op);
	cr_assert_eq(tileops_plan_end(p), TILEOPS_ERR_UNKNOWN_HANDLE, "%s", tileops_last_error());
	cr_assert(th_contains(tileops_last_error(), "plan op 0"), "%s", tileops_last_error());
	tileops_plan_free(p);
	own_tenant(client, tenant, sizeof(tenant));
	cr_assert_eq(tstat(tenant, "captures"), 0);
	cr_assert_eq(tstat(tenant, "graphs"), 0);
}

/* ---- the daemon's own checks, through the raw protocol ------------------- */

static uint64_t raw_tensor(th_raw *r)
{
	const int64_t shape[2] = { ROWS, N };
	Tileops__Reply *rep = th_raw_create(r, TILEOPS__DTYPE__DTYPE_F32, 2, shape);
	uint64_t h;

	cr_assert(rep != NULL && (int)rep->status == TILEOPS_OK && rep->tensor_create != NULL,
	          "raw tensor create failed");
	h = rep->tensor_create->handle;
	tileops__reply__free_unpacked(rep, NULL);
	return h;
}

/* PlanCreate of n_ops silu(in) -> out ops; returns the reply (free it). */
static Tileops__Reply *raw_plan_create(th_raw *r, uint64_t in, uint64_t out, size_t n_ops,
                                       const int64_t *buckets, size_t n_buckets,
                                       const uint64_t *bucketed, size_t n_bucketed)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__PlanCreate pc = TILEOPS__PLAN_CREATE__INIT;
	Tileops__OpRun op = TILEOPS__OP_RUN__INIT;
	Tileops__OpRun *ops[2] = { &op, &op };
	Tileops__Reply *rep;

	cr_assert(n_ops <= 2);
	op.op = "silu";
	op.n_inputs = 1;
	op.inputs = &in;
	op.n_outputs = 1;
	op.outputs = &out;
	pc.n_ops = n_ops;
	pc.ops = ops;
	pc.n_buckets = n_buckets;
	pc.buckets = (int64_t *)buckets;
	pc.n_bucketed = n_bucketed;
	pc.bucketed = (uint64_t *)bucketed;
	req.body_case = TILEOPS__REQUEST__BODY_PLAN_CREATE;
	req.plan_create = &pc;
	rep = th_raw_call(r, &req);
	cr_assert_not_null(rep, "no reply to PlanCreate");
	return rep;
}

static Tileops__Reply *raw_plan_call(th_raw *r, int run, uint64_t plan)
{
	Tileops__Request req = TILEOPS__REQUEST__INIT;
	Tileops__PlanRun pr = TILEOPS__PLAN_RUN__INIT;
	Tileops__PlanFree pf = TILEOPS__PLAN_FREE__INIT;
	Tileops__Reply *rep;

	if (run) {
		pr.plan = plan;
		req.body_case = TILEOPS__REQUEST__BODY_PLAN_RUN;
		req.plan_run = &pr;
	} else {
		pf.plan = plan;
		req.body_case = TILEOPS__REQUEST__BODY_PLAN_FREE;
		req.plan_free = &pf;
	}
	rep = th_raw_call(r, &req);
	cr_assert_not_null(rep, "no reply to %s", run ? "PlanRun" : "PlanFree");
	return rep;
}

static void expect_reply(Tileops__Reply *rep, int status, const char *needle, const char *what)
{
	cr_assert_eq((int)rep->status, status, "%s: status %d (%s), expected %d", what,
	             (int)rep->status, rep->message, status);
	cr_assert(needle == NULL || th_contains(rep->message, needle),
	          "%s: message \"%s\" does not mention \"%s\"", what, rep->message, needle);
	tileops__reply__free_unpacked(rep, NULL);
}

Test(plans, the_daemon_refuses_bad_plans_and_plans_of_other_sessions)
{
	const int64_t same[2] = { 2, 2 }, zero[1] = { 0 }, eight[1] = { ROWS };
	th_raw a, b;
	uint64_t x, y, plan;
	Tileops__Reply *rep;

	th_raw_open(&a);
	th_raw_hello(&a, 1 << 16);
	th_raw_open(&b);
	th_raw_hello(&b, 1 << 16);
	x = raw_tensor(&a);
	y = raw_tensor(&a);
	expect_reply(raw_plan_create(&a, x, y, 0, NULL, 0, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT,
	             "ops", "an empty plan");
	expect_reply(raw_plan_create(&a, x, y, 1, same, 2, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT,
	             "ascending", "buckets 2 2");
	expect_reply(raw_plan_create(&a, x, y, 1, zero, 1, NULL, 0), TILEOPS_ERR_INVALID_ARGUMENT,
	             "positive", "bucket 0");
	expect_reply(raw_plan_create(&a, x, y, 1, NULL, 0, &x, 1), TILEOPS_ERR_INVALID_ARGUMENT,
	             "without buckets", "bucketed tensors without buckets");
	expect_reply(raw_plan_create(&a, x, y, 1, eight, 1, NULL, 0), TILEOPS_OK, NULL,
	             "one bucket, nothing bucketed");
	rep = raw_plan_create(&a, x, y, 2, NULL, 0, NULL, 0);
	cr_assert_eq((int)rep->status, TILEOPS_OK, "a good plan: %s", rep->message);
	cr_assert(rep->plan_create != NULL && rep->plan_create->plan != 0, "no plan handle");
	plan = rep->plan_create->plan;
	tileops__reply__free_unpacked(rep, NULL);

	expect_reply(raw_plan_call(&a, 1, plan + 1000), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "not a plan of this session", "an unknown plan");
	expect_reply(raw_plan_call(&b, 1, plan), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "not a plan of this session", "another session's plan run");
	expect_reply(raw_plan_call(&b, 0, plan), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "not a plan of this session", "another session's plan freed");
	expect_reply(raw_plan_call(&a, 1, plan), TILEOPS_OK, NULL, "the owner's run");
	expect_reply(raw_plan_call(&a, 0, plan), TILEOPS_OK, NULL, "the owner's free");
	expect_reply(raw_plan_call(&a, 1, plan), TILEOPS_ERR_UNKNOWN_HANDLE, NULL,
	             "a run after free");
	th_raw_close(&b);
	th_raw_close(&a);
}

/* ---- small plans for the cache tests ------------------------------------- */

#define SR 4
#define SN 16

/* z = x * k + x, k a constant of its own: two ops, every plan distinct. */
typedef struct scale_plan {
	tileops_client *c;
	tileops_plan *p;
	tileops_tensor x, k, t, z;
	float kval;
} scale_plan;

static void scale_make(scale_plan *sp, tileops_client *c, float kval)
{
	const int64_t shape[2] = { SR, SN };
	float kbuf[SR * SN];

	fill_const(kbuf, SR * SN, kval);
	sp->c = c;
	sp->kval = kval;
	sp->x = th_tensor_f32(c, 2, shape, NULL);
	sp->k = th_tensor_f32(c, 2, shape, kbuf);
	sp->t = th_tensor_f32(c, 2, shape, NULL);
	sp->z = th_tensor_f32(c, 2, shape, NULL);

	const tileops_tensor mul_in[2] = { sp->x, sp->k }, add_in[2] = { sp->t, sp->x };
	tileops_op mul = { "mul", mul_in, 2, &sp->t, 1, NULL, 0 };
	tileops_op add = { "add", add_in, 2, &sp->z, 1, NULL, 0 };

	sp->p = plan_begin(c, NULL);
	plan_add(sp->p, &mul);
	plan_add(sp->p, &add);
	plan_end(sp->p);
}

/* Run with fresh input and check the output: a plan that ran stale would fail. */
static void scale_check(scale_plan *sp, th_rng *rng, const char *who)
{
	float x[SR * SN], want[SR * SN], got[SR * SN];
	tileops_status st;

	th_fill_f32(rng, x, SR * SN, -4.0f, 4.0f);
	for (int i = 0; i < SR * SN; i++) {
		volatile float t = x[i] * sp->kval;

		want[i] = t + x[i];
	}
	th_write(sp->c, sp->x, x, sizeof(x));
	st = tileops_plan_run(sp->p, 0, NULL, 0);
	cr_assert_eq(st, TILEOPS_OK, "%s: plan k=%g failed: %s (%s)", who, (double)sp->kval,
	             tileops_strerror(st), tileops_last_error());
	th_read(sp->c, sp->z, got, sizeof(got));
	th_expect_close_f32(got, want, SR * SN, 0.0f, 0.0f, who);
}

/* Many plans of one session, counted under one tenant of the stats. */
typedef struct load {
	tileops_client *c;
	char tenant[64];
	scale_plan *plans;
	int n;
} load;

static void load_make(load *ld, tileops_client *c, const char *tenant, int n, float k0)
{
	ld->c = c;
	if (tenant != NULL)
		snprintf(ld->tenant, sizeof(ld->tenant), "%s", tenant);
	else
		own_tenant(c, ld->tenant, sizeof(ld->tenant));
	ld->n = n;
	ld->plans = calloc((size_t)n, sizeof(*ld->plans));
	cr_assert_not_null(ld->plans);
	for (int i = 0; i < n; i++)
		scale_make(&ld->plans[i], c, k0 + (float)i);
}

static void load_free(load *ld)
{
	for (int i = 0; i < ld->n; i++)
		tileops_plan_free(ld->plans[i].p);
	free(ld->plans);
}

/* Run every plan of every load `rounds` times, all interleaved in a random order. */
static void run_shuffled(load *lds, int n_lds, int rounds, uint64_t seed)
{
	th_rng rng = th_rng_seed(seed);
	size_t total = 0, k = 0;
	int(*order)[2];

	for (int i = 0; i < n_lds; i++)
		total += (size_t)lds[i].n * (size_t)rounds;
	order = calloc(total, sizeof(*order));
	cr_assert_not_null(order);
	for (int i = 0; i < n_lds; i++)
		for (int r = 0; r < rounds; r++)
			for (int j = 0; j < lds[i].n; j++, k++) {
				order[k][0] = i;
				order[k][1] = j;
			}
	for (size_t i = total - 1; i > 0; i--) {
		size_t j = (size_t)(th_rng_next(&rng) % (i + 1));
		int t0 = order[i][0], t1 = order[i][1];

		order[i][0] = order[j][0];
		order[i][1] = order[j][1];
		order[j][0] = t0;
		order[j][1] = t1;
	}
	for (k = 0; k < total; k++) {
		char who[160];
		load *ld = &lds[order[k][0]];

		snprintf(who, sizeof(who), "tenant %s, plan %d, step %zu of %zu (seed %llu)",
		         ld->tenant, order[k][1], k, total, (unsigned long long)seed);
		scale_check(&ld->plans[order[k][1]], &rng, who);
	}
	free(order);
}

/* Every plan in turn, `rounds` times: past the quota, every run misses. */
static void run_cycling(load *ld, int rounds, th_rng *rng)
{
	char who[160];

	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < ld->n; i++) {
			snprintf(who, sizeof(who), "tenant %s, plan %d, round %d", ld->tenant, i,
			         r);
			scale_check(&ld->plans[i], rng, who);
		}
}

/* Each tenant stayed within its quota and evicted its own graphs to do so. */
static void expect_evicted_within_quota(const load *ld)
{
	double quota = tstat(ld->tenant, "quota_graphs");
	double graphs = tstat(ld->tenant, "graphs");

	cr_assert_leq(graphs, quota, "tenant %s holds %g graphs over its quota %g", ld->tenant,
	              graphs, quota);
	cr_assert_gt(tstat(ld->tenant, "evictions"), 0,
	             "tenant %s ran %d plans with a quota of "
	             "%g and evicted nothing",
	             ld->tenant, ld->n, quota);
	cr_assert_geq(tstat(ld->tenant, "captures"), ld->n, "tenant %s", ld->tenant);
}

/* ---- the cache ----------------------------------------------------------- */

Test(plans, the_first_run_misses_and_captures_and_later_runs_hit)
{
	scale_plan sp;
	th_rng rng = th_rng_seed(600);
	char tenant[64];

	own_tenant(client, tenant, sizeof(tenant));
	scale_make(&sp, client, 3.0f);
	cr_assert_eq(tstat(tenant, "graphs"), 0, "a plan was captured before its first run");
	scale_check(&sp, &rng, "first run");
	cr_assert_eq(tstat(tenant, "misses"), 1);
	cr_assert_eq(tstat(tenant, "captures"), 1);
	cr_assert_eq(tstat(tenant, "hits"), 0);
	cr_assert_eq(tstat(tenant, "graphs"), 1);
	for (int i = 0; i < 5; i++)
		scale_check(&sp, &rng, "later run");
	cr_assert_eq(tstat(tenant, "hits"), 5);
	cr_assert_eq(tstat(tenant, "misses"), 1);
	cr_assert_eq(tstat(tenant, "captures"), 1);
	cr_assert_eq(tstat(tenant, "runs"), 6);
	cr_assert_eq(tstat(tenant, "sessions"), 1);
	cr_assert_eq(tstat(tenant, "quota_graphs"), 64, "the default quota changed");
	/* Freeing the plan frees its graph. */
	tileops_plan_free(sp.p);
	cr_assert_eq(tstat(tenant, "graphs"), 0);
}

Test(plans, admin_reset_drops_every_graph_and_plans_capture_again)
{
	tileops_client *other = th_connect("plans-other", 0);
	scale_plan a, b;
	th_rng rng = th_rng_seed(700);
	char ta[64], tb[64];

	own_tenant(client, ta, sizeof(ta));
	own_tenant(other, tb, sizeof(tb));
	scale_make(&a, client, 2.0f);
	scale_make(&b, other, 5.0f);
	scale_check(&a, &rng, "a before reset");
	scale_check(&b, &rng, "b before reset");
	cr_assert_eq(tstat(ta, "graphs"), 1);
	cr_assert_eq(tstat(tb, "graphs"), 1);

	reset_caches(client);
	cr_assert_eq(tstat(ta, "graphs"), 0, "reset left a graph");
	cr_assert_eq(tstat(tb, "graphs"), 0, "reset left another tenant's graph");
	cr_assert_eq(tstat(ta, "captures"), 0, "reset left the counters");

	scale_check(&a, &rng, "a after reset");
	scale_check(&b, &rng, "b after reset");
	cr_assert_eq(tstat(ta, "captures"), 1);
	cr_assert_eq(tstat(ta, "misses"), 1);
	cr_assert_eq(tstat(tb, "graphs"), 1);
	tileops_plan_free(b.p);
	tileops_close(other);
	tileops_plan_free(a.p);
}

/* Every number of one key in the stats' "tenants" object. */
static void expect_all_tenants(const char *json, const char *key, double want)
{
	const char *p = strstr(json, "\"tenants\":");
	char pat[64];
	int n = 0;

	cr_assert_not_null(p, "no tenants in the stats");
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	while ((p = strstr(p, pat)) != NULL) {
		p += strlen(pat);
		cr_assert_eq(strtod(p, NULL), want, "a tenant has %s %g, expected %g: %s", key,
		             strtod(p, NULL), want, json);
		n++;
	}
	cr_assert_gt(n, 0, "no tenant has %s", key);
}

Test(plans, every_test_starts_with_every_cache_empty)
{
	char *json = th_stats();

	/* Whatever ran before, the fixture's reset left nothing cached or counted. */
	expect_all_tenants(json, "graphs", 0);
	expect_all_tenants(json, "captures", 0);
	expect_all_tenants(json, "evictions", 0);
	free(json);
}

Test(plans, freeing_a_tensor_drops_the_graphs_that_use_it)
{
	scale_plan a, b;
	th_rng rng = th_rng_seed(800);
	char tenant[64];

	own_tenant(client, tenant, sizeof(tenant));
	scale_make(&a, client, 2.0f);
	scale_make(&b, client, 3.0f);
	scale_check(&a, &rng, "a");
	scale_check(&b, &rng, "b");
	cr_assert_eq(tstat(tenant, "graphs"), 2);
	cr_assert_eq(tileops_tensor_free(client, a.k), TILEOPS_OK);
	cr_assert_eq(tstat(tenant, "graphs"), 1, "the graph naming a freed tensor was kept");
	scale_check(&b, &rng, "b after a's tensor was freed");
	cr_assert_eq(tstat(tenant, "hits"), 1, "b's graph was dropped too");
	cr_assert_eq(tileops_plan_run(a.p, 0, NULL, 0), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "a plan naming a freed tensor ran");
	tileops_plan_free(a.p);
	tileops_plan_free(b.p);
}

Test(plans, an_unconfigured_tenant_is_refused_at_connect_naming_it)
{
	tileops_client *c = NULL;

	cr_assert_eq(connect_tenant("plans-bad-tenant", "no-such-tenant", &c),
	             TILEOPS_ERR_PERMISSION);
	cr_assert_null(c);
	cr_assert(th_contains(tileops_last_error(), "no-such-tenant"), "%s", tileops_last_error());
}

/*
 * The regression: twelve unrelated callers, each past the default quota, in
 * one daemon and in a random order. With a shared slot pool the ninth
 * would have overflowed it; here each evicts only its own graphs and every
 * run is correct.
 */
Test(plans, twelve_tenants_past_the_default_quota_all_run_correctly_in_any_order)
{
	tileops_client *cs[12];
	load lds[12];
	uint64_t seed = test_seed();
	int quota;
	char tenant[64];

	own_tenant(client, tenant, sizeof(tenant));
	quota = (int)tstat(tenant, "quota_graphs");
	fprintf(stderr, "twelve tenants: seed %llu (set TILEOPS_TEST_SEED to repeat), quota %d\n",
	        (unsigned long long)seed, quota);
	for (int i = 0; i < 12; i++) {
		cs[i] = th_connect("plans-tenant", 0);
		load_make(&lds[i], cs[i], NULL, quota + 4, (float)(i * 100));
	}
	run_shuffled(lds, 12, 2, seed);
	for (int i = 0; i < 12; i++)
		expect_evicted_within_quota(&lds[i]);
	for (int i = 0; i < 12; i++) {
		load_free(&lds[i]);
		tileops_close(cs[i]);
	}
}

Test(plans, one_tenant_flooding_its_cache_never_evicts_another_tenants_graphs)
{
	tileops_client *flooder = th_connect("plans-flooder", 0);
	scale_plan v[2];
	load fl;
	th_rng rng = th_rng_seed(900);
	char victim[64];
	int quota, rounds;

	own_tenant(client, victim, sizeof(victim));
	for (int i = 0; i < 2; i++) {
		scale_make(&v[i], client, (float)(i + 1));
		scale_check(&v[i], &rng, "victim, first run");
	}
	cr_assert_eq(tstat(victim, "graphs"), 2);
	quota = (int)tstat(victim, "quota_graphs");
	load_make(&fl, flooder, NULL, quota + 8, 10.0f);
	rounds = 300 / fl.n + 1;
	run_cycling(&fl, rounds, &rng);
	cr_assert_geq(tstat(fl.tenant, "captures"), 300, "the flood captured too little");
	cr_assert_gt(tstat(fl.tenant, "evictions"), 200);
	cr_assert_leq(tstat(fl.tenant, "graphs"), quota);

	cr_assert_eq(tstat(victim, "evictions"), 0, "the flood evicted the victim's graphs");
	cr_assert_eq(tstat(victim, "graphs"), 2);
	cr_assert_eq(tstat(victim, "hits"), 0);
	scale_check(&v[0], &rng, "victim, after the flood");
	scale_check(&v[1], &rng, "victim, after the flood");
	cr_assert_eq(tstat(victim, "hits"), 2, "the victim's graphs were not kept");
	cr_assert_eq(tstat(victim, "misses"), 2);
	load_free(&fl);
	tileops_close(flooder);
	tileops_plan_free(v[0].p);
	tileops_plan_free(v[1].p);
}

Test(plans, named_tenants_share_a_quota_and_evict_only_their_own_graphs)
{
	daemon2 *d = &second;
	tileops_client *own, *s1, *s2, *z;
	load lds[4];

	daemon2_start(d, "tenant_graphs = 3\n"
	                 "tenant = small graphs=2\n"
	                 "tenant = zero graphs=0\n");
	daemon2_use(d);
	own = th_connect("plans-own", 0);
	s1 = connect_tenant_ok("plans-small-1", "small");
	s2 = connect_tenant_ok("plans-small-2", "small");
	z = connect_tenant_ok("plans-zero", "zero");
	load_make(&lds[0], own, NULL, 5, 1.0f);
	load_make(&lds[1], s1, "small", 3, 10.0f);
	load_make(&lds[2], s2, "small", 3, 20.0f);
	load_make(&lds[3], z, "zero", 2, 30.0f);
	run_shuffled(lds, 4, 4, 1000);

	cr_assert_eq(tstat(lds[0].tenant, "quota_graphs"), 3, "tenant_graphs was not applied");
	cr_assert_eq(tstat("small", "quota_graphs"), 2);
	cr_assert_eq(tstat("small", "sessions"), 2);
	cr_assert_eq(tstat("small", "runs"), 24,
	             "the two sessions' runs were not counted together");
	for (int i = 0; i < 3; i++)
		expect_evicted_within_quota(&lds[i]);
	/* A graph that can never fit runs once and is not kept: no failure. */
	cr_assert_eq(tstat("zero", "graphs"), 0);
	cr_assert_eq(tstat("zero", "hits"), 0);
	cr_assert_eq(tstat("zero", "runs"), 8);
	for (int i = 0; i < 4; i++)
		load_free(&lds[i]);
	tileops_close(z);
	tileops_close(s2);
	tileops_close(s1);
	tileops_close(own);
	daemon2_stop(d);
}

/*
 * The regression again with named tenants in the mix: every tenant, named
 * or a session's own, goes past its quota in one random interleaving, and a
 * named tenant flooded by one session keeps another tenant's graphs intact.
 */
Test(plans, named_and_session_tenants_past_their_quotas_all_run_correctly)
{
	daemon2 *d = &second;
	tileops_client *cs[8];
	load lds[8];
	uint64_t seed = test_seed();
	const char *tenant[8] = { "alpha", "alpha", "beta", NULL, NULL, NULL, NULL, NULL };
	int n[8] = { 6, 6, 8, 6, 6, 6, 6, 6 };

	daemon2_start(d, "tenant_graphs = 4\n"
	                 "tenant = alpha graphs=5\n"
	                 "tenant = beta graphs=6\n");
	daemon2_use(d);
	fprintf(stderr, "named tenants: seed %llu (set TILEOPS_TEST_SEED to repeat)\n",
	        (unsigned long long)seed);
	for (int i = 0; i < 8; i++) {
		cs[i] = tenant[i] ? connect_tenant_ok("plans-named", tenant[i])
		                  : th_connect("plans-session", 0);
		load_make(&lds[i], cs[i], tenant[i], n[i], (float)(i * 50));
	}
	run_shuffled(lds, 8, 3, seed);
	for (int i = 0; i < 8; i++)
		expect_evicted_within_quota(&lds[i]);

	/* beta floods; alpha's graphs stay. */
	double alpha_ev = tstat("alpha", "evictions"), alpha_graphs = tstat("alpha", "graphs");
	th_rng rng = th_rng_seed(seed);

	run_cycling(&lds[2], 30, &rng);
	cr_assert_geq(tstat("beta", "captures"), 200);
	cr_assert_eq(tstat("alpha", "evictions"), alpha_ev, "beta's flood evicted alpha's graphs");
	cr_assert_eq(tstat("alpha", "graphs"), alpha_graphs);
	for (int i = 0; i < 8; i++) {
		load_free(&lds[i]);
		tileops_close(cs[i]);
	}
	daemon2_stop(d);
}

/* ---- who may reset ------------------------------------------------------- */

/*
 * A client process of uid/gid nobody (spawned: nng does not survive fork):
 * role "refused" expects its connection refused, role "allowed" expects to
 * connect and have its admin reset refused. Exit 0 when it went so.
 */
static int unprivileged_child(const char *role, int arg, int fd)
{
	tileops_connect_options o;
	tileops_client *c = NULL;
	tileops_status st;
	const int64_t shape[1] = { 4 };
	tileops_tensor t;

	(void)arg;
	(void)fd;
	if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0) {
		fprintf(stderr, "child: cannot become uid %d: %s\n", NOBODY, strerror(errno));
		return 10;
	}
	memset(&o, 0, sizeof(o));
	o.address = getenv("TILEOPS_ADDRESS");
	o.timeout_ms = 5000;
	o.name = "plans-nobody";
	st = tileops_connect_opts(&o, &c);
	if (strcmp(role, "refused") == 0) {
		if (st == TILEOPS_OK) {
			fprintf(stderr, "child: uid %d connected without allow_group\n", NOBODY);
			return 11;
		}
		/* The daemon drops the connection before Hello is answered. */
		if (st != TILEOPS_ERR_CLOSED && st != TILEOPS_ERR_PERMISSION) {
			fprintf(stderr, "child: connect failed with %s (%s), not as a refusal\n",
			        tileops_strerror(st), tileops_last_error());
			return 15;
		}
		return 0;
	}
	if (st != TILEOPS_OK) {
		fprintf(stderr, "child: connect failed: %s\n", tileops_last_error());
		return 12;
	}
	if (tileops_tensor_create(c, TILEOPS_F32, 1, shape, &t) != TILEOPS_OK) {
		fprintf(stderr, "child: tensor create failed: %s\n", tileops_last_error());
		return 13;
	}
	st = tileops_admin_reset(c);
	if (st != TILEOPS_ERR_PERMISSION || !th_contains(tileops_last_error(), "admin_reset")) {
		fprintf(stderr, "child: admin_reset gave %s (%s), expected a permission error\n",
		        tileops_strerror(st), tileops_last_error());
		return 14;
	}
	tileops_close(c);
	return 0;
}

TH_CHILD_MAIN(unprivileged_child)

static void expect_child(const char *role)
{
	int status;
	pid_t pid = th_spawn(role, 0, -1);

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	          "the uid %d client (%s) ended with status %d (its stderr says why)", NOBODY, role,
	          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

Test(plans, admin_reset_is_refused_to_a_client_that_is_not_an_admin)
{
	daemon2 *d = &second;

	if (geteuid() != 0) {
		cr_skip_test("needs root to run a client as uid %d (this runs as uid %d)", NOBODY,
		             (int)geteuid());
	}
	/* Without allow_group, nobody may not even connect. */
	daemon2_start(d, "socket_mode = 0666\n");
	daemon2_use(d);
	expect_child("refused");
	daemon2_stop(d);

	/* Allowed to connect through its group, but admin_group is not set. */
	daemon2_start(d, "socket_mode = 0666\nallow_group = 65534\n");
	daemon2_use(d);
	expect_child("allowed");
	/* The daemon's own uid still may. */
	tileops_client *c = th_connect("plans-admin", 0);
	reset_caches(c);
	tileops_close(c);
	daemon2_stop(d);
}
