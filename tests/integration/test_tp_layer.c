/*
 * test_tp_layer.c - a Llama-style decoder layer, one decode step for a
 * batch of 2 sequences, run tensor-parallel over 2 and over 4 devices as one
 * plan, against the same layer on device 0 alone (a daemon of its own with
 * `devices = 0-3`: emulated devices on the CPU backend).
 *
 * The layer: hidden 256, 8 query heads and 4 KV heads of 32, intermediate
 * 512, a contiguous KV cache of 8 positions per sequence, RMS norms with
 * weights, rope (NeoX layout, theta 500000) and grouped-query attention:
 *
 *   xn = rms_norm(x); [q k v] = xn Wqkv; rope_neox(q, k); kv_cache_append(k, v);
 *   a = attention_decode(q, cache); h = x + a Wo;
 *   y = h + silu_and_mul(rms_norm(h) Wgu) Wd
 *
 * Over n devices, as Megatron-LM splits it: Wqkv is split by output columns,
 * device d taking query heads [8d/n, 8(d+1)/n) and their KV heads (its KV
 * cache holds those heads only), and Wgu likewise, device d taking its part
 * of the gate columns and the same part of the up columns; Wo and Wd are
 * split by input rows, so each device's product is a partial sum, and each
 * is followed by an all_reduce over the devices; x, the norms and the
 * residual adds are replicated on every device. The plan adds the ops
 * stage by stage (every device's rms_norm, then every device's gemm, ...),
 * so consecutive ops alternate between devices; the daemon runs each
 * device's ops between two all_reduces as one graph.
 *
 * Two steps run: the first captures both plans, the second replays them, at
 * the next positions, over the cache entries the first appended.
 *
 * What differs from an f32 layer: the attention ops take f16 or bf16 only
 * and no op converts between dtypes, so the whole layer is f16 (the closer of
 * the two to f32). The tensor-parallel layer rounds each device's partial
 * sums of the Wo and Wd products to f16 before the all_reduce adds them,
 * where the layer on one device rounds each whole sum once, so the two agree
 * within f16's rounding (ATOL and RTOL below: a few units in the last place
 * of the outputs), not f32's. Every device of the tensor-parallel layer
 * holds the same output, bit for bit.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

#define NB 2 /* sequences (one new token each) */
#define HID 256
#define HQ 8
#define HKV 4
#define HD 32
#define INTER 512
#define SMAX 8 /* cache positions per sequence */
#define QKV ((HQ + 2 * HKV) * HD)
#define MAX_RANKS 4
#define STEPS 2

/* The outputs are below 4, where an f16 unit in the last place is 2^-9
 * (0.002); the two layers differ by one such unit at most. */
#define ATOL 5e-3f
#define RTOL 2e-3f

/* Cached tokens of each sequence before the first step. */
static const int start_len[NB] = { 5, 3 };

/* Not on a test's stack: the fixture kills it if the test failed first. */
static daemon2 multi;

static void teardown(void)
{
	daemon2_kill_running();
}

TestSuite(tp_layer, .fini = teardown, .timeout = 240);

/* ---- the model ----------------------------------------------------------- */

/* The whole layer's weights and starting KV cache, as f16 bits; every
 * matrix is [K, N] row-major (gemm without trans_b). */
typedef struct model {
	uint16_t wqkv[HID * QKV]; /* columns: q heads, then k heads, then v heads */
	uint16_t wo[HQ * HD * HID];
	uint16_t wgu[HID * 2 * INTER]; /* columns: gate, then up */
	uint16_t wd[INTER * HID];
	uint16_t norm1[HID], norm2[HID];
	uint16_t kc[NB * SMAX * HKV * HD], vc[NB * SMAX * HKV * HD];
	uint16_t x[STEPS][NB * HID];
} model;

static model md;

static void fill_f16(th_rng *r, uint16_t *dst, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = th_f32_to_f16(th_rng_float(r, lo, hi));
}

/* Weights of unit-variance products (uniform in +-sqrt(3 / K)). */
static void model_make(uint64_t seed)
{
	th_rng r = th_rng_seed(seed);
	float a = sqrtf(3.0f / HID), b = sqrtf(3.0f / (HQ * HD)), c = sqrtf(3.0f / INTER);

	fill_f16(&r, md.wqkv, HID * QKV, -a, a);
	fill_f16(&r, md.wo, HQ * HD * HID, -b, b);
	fill_f16(&r, md.wgu, HID * 2 * INTER, -a, a);
	fill_f16(&r, md.wd, INTER * HID, -c, c);
	fill_f16(&r, md.norm1, HID, 0.5f, 1.5f);
	fill_f16(&r, md.norm2, HID, 0.5f, 1.5f);
	/* Entries past a sequence's length are never read: leave them random. */
	fill_f16(&r, md.kc, NB * SMAX * HKV * HD, -1.0f, 1.0f);
	fill_f16(&r, md.vc, NB * SMAX * HKV * HD, -1.0f, 1.0f);
	for (int t = 0; t < STEPS; t++)
		fill_f16(&r, md.x[t], NB * HID, -1.0f, 1.0f);
}

/* Columns [col, col + n) of rows x width src into columns [at, at + n) of
 * rows x dwidth dst. */
static void copy_cols(const uint16_t *src, int rows, int width, int col, int n, uint16_t *dst,
                      int dwidth, int at)
{
	for (int k = 0; k < rows; k++)
		memcpy(dst + (size_t)k * dwidth + at, src + (size_t)k * width + col,
		       sizeof(uint16_t) * (size_t)n);
}

/* ---- one rank: a device's part of the layer ------------------------------ */

typedef struct rank {
	int device, hq, hkv, inter; /* its heads and intermediate columns */
	tileops_tensor x, norm1, wqkv, xn, qkv, q, k, v, pos, slots, lens, kc, vc;
	tileops_tensor att, att2, wo, o, h, norm2, hn, wgu, gu, act, wd, dn, y;
} rank;

static tileops_tensor make2(tileops_client *c, int device, int64_t rows, int64_t cols)
{
	const int64_t shape[2] = { rows, cols };

	return th_tensor_on(c, device, TILEOPS_F16, 2, shape);
}

/* [NB, heads, HD] at column `col` of a [NB, width] f16 tensor: a row-strided view. */
static tileops_tensor heads_view(tileops_client *c, tileops_tensor src, int64_t width,
                                 int64_t heads, int64_t col)
{
	const int64_t shape[3] = { NB, heads, HD }, strides[3] = { width, HD, 1 };
	tileops_tensor v = 0;
	tileops_status st =
	        tileops_tensor_view(c, src, (size_t)col * 2, TILEOPS_F16, 3, shape, strides, &v);

	cr_assert_eq(st, TILEOPS_OK, "tensor_view: %s", tileops_last_error());
	return v;
}

/*
 * Rank d of n on `device`: its tensors, its slices of the weights and of
 * the starting cache written (n == 1: the whole layer).
 */
static void rank_make(tileops_client *c, int n, int d, int device, rank *r)
{
	const int64_t one[1] = { NB }, vec[1] = { HID };
	int hq = HQ / n, hkv = HKV / n, inter = INTER / n, w = (hq + 2 * hkv) * HD;
	const int64_t cache[4] = { NB, SMAX, hkv, HD }, att[3] = { NB, hq, HD };
	const int64_t att2[2] = { NB, hq * HD };
	size_t cache_n = (size_t)NB * SMAX * hkv * HD;
	uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)HID * 2 * INTER);
	uint16_t *kc = malloc(sizeof(uint16_t) * cache_n), *vc = malloc(sizeof(uint16_t) * cache_n);

	cr_assert(buf && kc && vc);
	memset(r, 0, sizeof(*r));
	r->device = device;
	r->hq = hq;
	r->hkv = hkv;
	r->inter = inter;
	r->x = make2(c, device, NB, HID);
	r->norm1 = th_tensor_on(c, device, TILEOPS_F16, 1, vec);
	r->norm2 = th_tensor_on(c, device, TILEOPS_F16, 1, vec);
	th_write(c, r->norm1, md.norm1, sizeof(md.norm1));
	th_write(c, r->norm2, md.norm2, sizeof(md.norm2));

	/* Column-parallel: this rank's q, k and v heads. */
	r->wqkv = make2(c, device, HID, w);
	copy_cols(md.wqkv, HID, QKV, d * hq * HD, hq * HD, buf, w, 0);
	copy_cols(md.wqkv, HID, QKV, HQ * HD + d * hkv * HD, hkv * HD, buf, w, hq * HD);
	copy_cols(md.wqkv, HID, QKV, (HQ + HKV) * HD + d * hkv * HD, hkv * HD, buf, w,
	          (hq + hkv) * HD);
	th_write(c, r->wqkv, buf, sizeof(uint16_t) * (size_t)HID * w);
	r->xn = make2(c, device, NB, HID);
	r->qkv = make2(c, device, NB, w);
	r->q = heads_view(c, r->qkv, w, hq, 0);
	r->k = heads_view(c, r->qkv, w, hkv, hq * HD);
	r->v = heads_view(c, r->qkv, w, hkv, (hq + hkv) * HD);
	r->pos = th_tensor_on(c, device, TILEOPS_I32, 1, one);
	r->slots = th_tensor_on(c, device, TILEOPS_I32, 1, one);
	r->lens = th_tensor_on(c, device, TILEOPS_I32, 1, one);

	/* Its KV heads of the cache: [NB, SMAX, hkv, HD] of [NB, SMAX, HKV, HD]. */
	r->kc = th_tensor_on(c, device, TILEOPS_F16, 4, cache);
	r->vc = th_tensor_on(c, device, TILEOPS_F16, 4, cache);
	copy_cols(md.kc, NB * SMAX, HKV * HD, d * hkv * HD, hkv * HD, kc, hkv * HD, 0);
	copy_cols(md.vc, NB * SMAX, HKV * HD, d * hkv * HD, hkv * HD, vc, hkv * HD, 0);
	th_write(c, r->kc, kc, sizeof(uint16_t) * cache_n);
	th_write(c, r->vc, vc, sizeof(uint16_t) * cache_n);
	r->att = th_tensor_on(c, device, TILEOPS_F16, 3, att);
	cr_assert_eq(tileops_tensor_view(c, r->att, 0, TILEOPS_F16, 2, att2, NULL, &r->att2),
	             TILEOPS_OK, "%s", tileops_last_error());

	/* Row-parallel: the rows of Wo that its heads multiply. */
	r->wo = make2(c, device, hq * HD, HID);
	th_write(c, r->wo, md.wo + (size_t)d * hq * HD * HID,
	         sizeof(uint16_t) * (size_t)hq * HD * HID);
	r->o = make2(c, device, NB, HID);
	r->h = make2(c, device, NB, HID);
	r->hn = make2(c, device, NB, HID);

	/* Column-parallel: its part of the gate columns, then of the up ones. */
	r->wgu = make2(c, device, HID, 2 * inter);
	copy_cols(md.wgu, HID, 2 * INTER, d * inter, inter, buf, 2 * inter, 0);
	copy_cols(md.wgu, HID, 2 * INTER, INTER + d * inter, inter, buf, 2 * inter, inter);
	th_write(c, r->wgu, buf, sizeof(uint16_t) * (size_t)HID * 2 * inter);
	r->gu = make2(c, device, NB, 2 * inter);
	r->act = make2(c, device, NB, inter);

	/* Row-parallel: the rows of Wd that its intermediate columns multiply. */
	r->wd = make2(c, device, inter, HID);
	th_write(c, r->wd, md.wd + (size_t)d * inter * HID, sizeof(uint16_t) * (size_t)inter * HID);
	r->dn = make2(c, device, NB, HID);
	r->y = make2(c, device, NB, HID);
	free(buf);
	free(kc);
	free(vc);
}

/* Step t's inputs, on every rank: x, and each sequence's position, slot and length. */
static void step_write(tileops_client *c, const rank *r, int n, int t)
{
	int32_t pos[NB], slots[NB], lens[NB];

	for (int b = 0; b < NB; b++) {
		pos[b] = start_len[b] + t;
		slots[b] = b * SMAX + pos[b];
		lens[b] = pos[b] + 1;
	}
	for (int d = 0; d < n; d++) {
		th_write(c, r[d].x, md.x[t], sizeof(md.x[t]));
		th_write(c, r[d].pos, pos, sizeof(pos));
		th_write(c, r[d].slots, slots, sizeof(slots));
		th_write(c, r[d].lens, lens, sizeof(lens));
	}
}

/* ---- the plan ------------------------------------------------------------ */

static void plan_op(tileops_plan *p, const char *name, tileops_tensor *in, size_t n_in,
                    tileops_tensor *out, size_t n_out, const tileops_param *params, size_t n_params)
{
	const tileops_op op = { name, in, n_in, out, n_out, params, n_params };
	tileops_status st = tileops_plan_add(p, &op);

	cr_assert_eq(st, TILEOPS_OK, "plan_add %s: %s", name, tileops_last_error());
}

/* The layer over ranks r[0..n), stage by stage; an all_reduce after each
 * row-parallel projection when there are several. */
static tileops_plan *layer_plan(tileops_client *c, rank *r, int n)
{
	const tileops_param eps = tileops_param_float("eps", 1e-5);
	const tileops_param rope[2] = { tileops_param_int("rotary_dim", HD),
		                        tileops_param_float("theta", 500000.0) };
	tileops_tensor ranks[MAX_RANKS];
	tileops_plan *p = NULL;

	cr_assert_eq(tileops_plan_begin(c, NULL, &p), TILEOPS_OK, "%s", tileops_last_error());
	for (int d = 0; d < n; d++)
		plan_op(p, "rms_norm", (tileops_tensor[]){ r[d].x, r[d].norm1 }, 2, &r[d].xn, 1,
		        &eps, 1);
	for (int d = 0; d < n; d++)
		plan_op(p, "gemm", (tileops_tensor[]){ r[d].xn, r[d].wqkv }, 2, &r[d].qkv, 1, NULL,
		        0);
	for (int d = 0; d < n; d++)
		plan_op(p, "rope_neox", (tileops_tensor[]){ r[d].q, r[d].k, r[d].pos }, 3, NULL, 0,
		        rope, 2);
	for (int d = 0; d < n; d++)
		plan_op(p, "kv_cache_append",
		        (tileops_tensor[]){ r[d].k, r[d].v, r[d].slots, r[d].kc, r[d].vc }, 5, NULL,
		        0, NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "attention_decode",
		        (tileops_tensor[]){ r[d].q, r[d].kc, r[d].vc, r[d].lens }, 4, &r[d].att, 1,
		        NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "gemm", (tileops_tensor[]){ r[d].att2, r[d].wo }, 2, &r[d].o, 1, NULL,
		        0);
	for (int d = 0; d < n; d++)
		ranks[d] = r[d].o;
	if (n > 1)
		plan_op(p, "all_reduce", ranks, (size_t)n, NULL, 0, NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "add", (tileops_tensor[]){ r[d].x, r[d].o }, 2, &r[d].h, 1, NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "rms_norm", (tileops_tensor[]){ r[d].h, r[d].norm2 }, 2, &r[d].hn, 1,
		        &eps, 1);
	for (int d = 0; d < n; d++)
		plan_op(p, "gemm", (tileops_tensor[]){ r[d].hn, r[d].wgu }, 2, &r[d].gu, 1, NULL,
		        0);
	for (int d = 0; d < n; d++)
		plan_op(p, "silu_and_mul", &r[d].gu, 1, &r[d].act, 1, NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "gemm", (tileops_tensor[]){ r[d].act, r[d].wd }, 2, &r[d].dn, 1, NULL,
		        0);
	for (int d = 0; d < n; d++)
		ranks[d] = r[d].dn;
	if (n > 1)
		plan_op(p, "all_reduce", ranks, (size_t)n, NULL, 0, NULL, 0);
	for (int d = 0; d < n; d++)
		plan_op(p, "add", (tileops_tensor[]){ r[d].h, r[d].dn }, 2, &r[d].y, 1, NULL, 0);
	tileops_status st = tileops_plan_end(p);
	cr_assert_eq(st, TILEOPS_OK, "plan_end over %d devices: %s (%s)", n, tileops_strerror(st),
	             tileops_last_error());
	return p;
}

/* ---- checks -------------------------------------------------------------- */

static void read_f16(tileops_client *c, tileops_tensor t, float *out, size_t n)
{
	uint16_t *bits = malloc(sizeof(uint16_t) * n);

	cr_assert(bits);
	th_read(c, t, bits, sizeof(uint16_t) * n);
	for (size_t i = 0; i < n; i++)
		out[i] = th_f16_to_f32(bits[i]);
	free(bits);
}

/* The tensor-parallel caches of ranks r[0..n), put back together by head. */
static void read_caches(tileops_client *c, const rank *r, int n, int v, float *out)
{
	size_t part = (size_t)NB * SMAX * r[0].hkv * HD;
	float *buf = malloc(sizeof(float) * part);

	cr_assert(buf);
	for (int d = 0; d < n; d++) {
		read_f16(c, v ? r[d].vc : r[d].kc, buf, part);
		for (int row = 0; row < NB * SMAX; row++)
			memcpy(out + (size_t)row * HKV * HD + (size_t)d * r[d].hkv * HD,
			       buf + (size_t)row * r[d].hkv * HD,
			       sizeof(float) * (size_t)r[d].hkv * HD);
	}
	free(buf);
}

/* The sequences' cache rows that steps up to t wrote: [len, len + t] of each. */
static void expect_new_cache_rows(const float *got, const float *want, int t, const char *what)
{
	for (int b = 0; b < NB; b++)
		for (int s = start_len[b]; s <= start_len[b] + t; s++) {
			size_t at = ((size_t)b * SMAX + s) * HKV * HD;
			char msg[160];

			snprintf(msg, sizeof(msg), "%s, sequence %d position %d", what, b, s);
			th_expect_close_f32(got + at, want + at, HKV * HD, ATOL, RTOL, msg);
		}
}

static double max_abs(const float *v, size_t n)
{
	double m = 0.0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)v[i]));
	return m;
}

/*
 * The layer on device 0 alone and over devices 0..n-1, both plans run for
 * STEPS steps; after each, the tensor-parallel output of every device
 * matches the reference, every device's is the same, and so do the cache
 * rows the steps appended.
 */
static void tp_matches_one_device(int n)
{
	daemon2_start(&multi, "devices = 0-3\n");
	daemon2_use(&multi);
	tileops_client *c = th_connect("tp-layer", 0);
	rank ref, tp[MAX_RANKS];
	float want[NB * HID], got[NB * HID], first[NB * HID];
	static float want_cache[NB * SMAX * HKV * HD], got_cache[NB * SMAX * HKV * HD];

	model_make(0x7e1a + (uint64_t)n);
	rank_make(c, 1, 0, 0, &ref);
	for (int d = 0; d < n; d++)
		rank_make(c, n, d, d, &tp[d]);
	tileops_plan *pref = layer_plan(c, &ref, 1);
	tileops_plan *ptp = layer_plan(c, tp, n);

	for (int t = 0; t < STEPS; t++) {
		char what[96];

		step_write(c, &ref, 1, t);
		step_write(c, tp, n, t);
		cr_assert_eq(tileops_plan_run(pref, 0, NULL, 0), TILEOPS_OK,
		             "step %d, one device: %s", t, tileops_last_error());
		cr_assert_eq(tileops_plan_run(ptp, 0, NULL, 0), TILEOPS_OK,
		             "step %d, %d devices: %s", t, n, tileops_last_error());
		read_f16(c, ref.y, want, NB * HID);
		/* Something to compare: the reference output is not near zero. */
		cr_assert(max_abs(want, NB * HID) > 0.5, "step %d: the reference is near zero", t);
		for (int d = 0; d < n; d++) {
			read_f16(c, tp[d].y, got, NB * HID);
			snprintf(what, sizeof(what), "step %d, %d devices, device %d's output", t,
			         n, d);
			th_expect_close_f32(got, want, NB * HID, ATOL, RTOL, what);
			if (d == 0)
				memcpy(first, got, sizeof(first));
			else
				cr_assert_eq(memcmp(got, first, sizeof(got)), 0,
				             "step %d: device %d's output differs from device 0's",
				             t, d);
		}
		for (int v = 0; v < 2; v++) {
			read_f16(c, v ? ref.vc : ref.kc, want_cache, NB * SMAX * HKV * HD);
			read_caches(c, tp, n, v, got_cache);
			snprintf(what, sizeof(what), "step %d, %d devices, the %s cache", t, n,
			         v ? "v" : "k");
			expect_new_cache_rows(got_cache, want_cache, t, what);
		}
	}
	/* Captured once and replayed: per device, the ops before the first
	 * all_reduce, between the two and after the second, and the two. */
	cr_assert_eq(th_own_tenant_stat(c, "captures"), 2, "a plan was captured again");
	cr_assert_eq(th_own_tenant_stat(c, "graphs"), 2);
	cr_assert_eq(th_own_tenant_stat(c, "graph_segments"), 1 + 3 * n + 2);
	tileops_plan_free(pref);
	tileops_plan_free(ptp);
	tileops_close(c);
	daemon2_stop(&multi);
}

Test(tp_layer, a_decode_layer_tensor_parallel_over_2_devices_in_one_plan_matches_device_0_alone)
{
	tp_matches_one_device(2);
}

Test(tp_layer, a_decode_layer_tensor_parallel_over_4_devices_in_one_plan_matches_device_0_alone)
{
	tp_matches_one_device(4);
}
