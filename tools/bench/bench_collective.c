/*
 * tileops-bench-collective - the bus bandwidth of the collectives
 * (all_reduce, all_gather, reduce_scatter) through tileopsd, one tensor per
 * rank on devices 0 .. n-1 (docs/perf.md, "Several GPUs").
 *
 *   tileops-bench-collective [--address ADDR] [--ops all_reduce,all_gather,reduce_scatter]
 *                            [--ranks "2 4 8"] [--sizes "BYTES ..."] [--max-bytes B]
 *                            [--dtype bf16|f16|f32] [--warmup N] [--window W]
 *                            [--rounds R] [--json FILE]
 *
 * For each op, rank count n and size (bytes of one rank's tensor), it makes
 * n one-dimensional tensors, rank r's on device r, and first checks them:
 * every tensor filled with small integers (exact in every dtype), one
 * all_reduce (sum), then every rank read back and compared bit for bit with
 * the sum; a case of all_gather or reduce_scatter then checks its own op the
 * same way. Up to 64 MiB a rank is read whole, beyond that its first,
 * middle and last MiB. Then --warmup (5) calls, and --rounds (5) rounds of
 * --window (20) calls of tileops_op_run back to back followed by one
 * tileops_sync: the time per call is the round's time over W, the median
 * of the rounds is reported. The values grow from call to call (they may
 * reach inf); only the time is kept.
 *
 * algbw is bytes / time; busbw follows the nccl-tests convention: for
 * all_reduce algbw * 2(n-1)/n, for all_gather and reduce_scatter
 * algbw * (n-1)/n (bytes is the whole tensor of one rank in both). Rates are
 * in GB/s of 1e9 bytes. tools/bench/collective_torch.py measures
 * torch.distributed the same way, and its JSON lines have the same names
 * ("all_reduce x8", "64 MiB bf16"), so scripts/bench-collective.sh can put
 * the two side by side.
 *
 * The defaults: --ranks every power of two from 2 up to the daemon's device
 * count and the count itself; --sizes 1 MiB to 1 GiB by powers of 4, none
 * above --max-bytes (1 GiB). Asking for more ranks than the daemon serves is
 * an error naming both counts; a daemon of one device has nothing to
 * measure (exit 0). Exit status 0 only when every call succeeded and every
 * check matched.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_client.h"
#include "bench_common.h"

static const char *prog = "tileops-bench-collective";

enum {
	MAX_RANKS = 8, /* the manifest's x0 .. x7 */
	MAX_LIST = 16,
	N_OPS = 3,
};

/* Up to this many bytes a rank is checked whole; above, three windows. */
#define CHECK_WHOLE_BYTES (64L << 20)
#define CHECK_WINDOW_BYTES (1L << 20)
/* Host buffer for filling and reading back, in bytes. */
#define CHUNK_BYTES (4L << 20)

static const char *const op_names[N_OPS] = { "all_reduce", "all_gather", "reduce_scatter" };

typedef struct opts {
	const char *address, *json;
	int ops[N_OPS], n_ops;
	long ranks[MAX_LIST], sizes[MAX_LIST];
	int n_ranks, n_sizes;
	long max_bytes, warmup, window, rounds;
	tileops_dtype dtype;
} opts;

/* One measured case, for the table at the end. */
typedef struct result {
	int op, ranks;
	long bytes;
	double us, algbw, busbw;
} result;

/* The tensors of one case and a host buffer of CHUNK_BYTES. */
typedef struct bench_case {
	tileops_client *c;
	int op, n;
	tileops_dtype dtype;
	size_t esize;
	long elems;
	tileops_tensor t[MAX_RANKS];
	unsigned char *buf;
} bench_case;

/* ---- small integers in each dtype ---------------------------------------- */

/* k (0 .. 2048) as an f16: exact, so no rounding to get wrong. */
static uint16_t f16_of_int(int k)
{
	if (k == 0)
		return 0;
	int e = 0;
	while ((k >> (e + 1)) != 0)
		e++;
	return (uint16_t)(((e + 15) << 10) | ((k << (10 - e)) & 0x3ff));
}

static float f16_to_float(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float v;
	if (e == 0)
		v = ldexpf((float)m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexpf((float)(m | 0x400), e - 25);
	return h & 0x8000 ? -v : v;
}

/* Store small integer k as element i of p in dtype dt. */
static void put_int(tileops_dtype dt, void *p, long i, int k)
{
	float f = (float)k;
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if (dt == TILEOPS_F32)
		((float *)p)[i] = f;
	else if (dt == TILEOPS_BF16)
		((uint16_t *)p)[i] = (uint16_t)(u >> 16); /* exact: small integers fit 8 bits */
	else
		((uint16_t *)p)[i] = f16_of_int(k);
}

/* Element i of p as a float (for the message of a mismatch). */
static float get_float(tileops_dtype dt, const void *p, long i)
{
	if (dt == TILEOPS_F32)
		return ((const float *)p)[i];
	if (dt == TILEOPS_F16)
		return f16_to_float(((const uint16_t *)p)[i]);
	uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ---- the values: what each rank holds before, and after one op ---------- */

/* Rank r's element i before the op: 1 .. 5. */
static int fill_value(int r, long i)
{
	return 1 + (int)((r + i) % 5);
}

static int sum_value(int n, long i)
{
	int s = 0;
	for (int r = 0; r < n; r++)
		s += fill_value(r, i);
	return s;
}

/* Rank r's element i after one `op` over n ranks of `elems` each. */
static int expected_value(int op, int n, long elems, int r, long i)
{
	int part = (int)(i / (elems / n));
	if (op == 0)
		return sum_value(n, i);
	if (op == 1)
		return fill_value(part, i);
	return part == r ? sum_value(n, i) : fill_value(r, i);
}

/* ---- one case -------------------------------------------------------------- */

static tileops_op case_op(const bench_case *k, int op)
{
	return (tileops_op){ op_names[op], k->t, (size_t)k->n, NULL, 0, NULL, 0 };
}

static int case_fill(bench_case *k)
{
	long per = CHUNK_BYTES / (long)k->esize;
	for (int r = 0; r < k->n; r++) {
		for (long i0 = 0; i0 < k->elems; i0 += per) {
			long m = k->elems - i0 < per ? k->elems - i0 : per;
			for (long i = 0; i < m; i++)
				put_int(k->dtype, k->buf, i, fill_value(r, i0 + i));
			tileops_status st = tileops_tensor_write(
			        k->c, k->t[r], (size_t)i0 * k->esize, k->buf, (size_t)m * k->esize);
			if (st != TILEOPS_OK)
				return bench_fail("tileops_tensor_write", st);
		}
	}
	return 0;
}

/* Compare elements [i0, i0 + m) of rank r with what `op` leaves there. */
static int case_compare(bench_case *k, int op, int r, long i0, long m)
{
	long per = CHUNK_BYTES / (long)k->esize;
	unsigned char want[4];
	for (long j0 = i0; j0 < i0 + m; j0 += per) {
		long len = i0 + m - j0 < per ? i0 + m - j0 : per;
		tileops_status st = tileops_tensor_read(k->c, k->t[r], (size_t)j0 * k->esize,
		                                        k->buf, (size_t)len * k->esize);
		if (st != TILEOPS_OK)
			return bench_fail("tileops_tensor_read", st);
		for (long j = 0; j < len; j++) {
			int v = expected_value(op, k->n, k->elems, r, j0 + j);
			put_int(k->dtype, want, 0, v);
			if (memcmp(k->buf + (size_t)j * k->esize, want, k->esize) != 0) {
				fprintf(stderr,
				        "%s: %s over %d ranks, %s: rank %d element %ld is %g, "
				        "expected %d\n",
				        prog, op_names[op], k->n, tileops_dtype_name(k->dtype), r,
				        j0 + j, (double)get_float(k->dtype, k->buf, j), v);
				return -1;
			}
		}
	}
	return 0;
}

/* Fill, run `op` once, and compare every rank with what it must hold. */
static int case_check(bench_case *k, int op)
{
	if (case_fill(k) != 0)
		return -1;
	tileops_op o = case_op(k, op);
	tileops_status st = tileops_op_run(k->c, &o);
	if (st == TILEOPS_OK)
		st = tileops_sync(k->c);
	if (st != TILEOPS_OK)
		return bench_fail(op_names[op], st);
	long bytes = k->elems * (long)k->esize;
	long w = CHECK_WINDOW_BYTES / (long)k->esize;
	for (int r = 0; r < k->n; r++) {
		if (bytes <= CHECK_WHOLE_BYTES) {
			if (case_compare(k, op, r, 0, k->elems) != 0)
				return -1;
			continue;
		}
		long starts[3] = { 0, (k->elems - w) / 2, k->elems - w };
		for (int s = 0; s < 3; s++)
			if (case_compare(k, op, r, starts[s], w) != 0)
				return -1;
	}
	return 0;
}

/* W calls back to back then one sync, R times: the median time per call. */
static int case_time(bench_case *k, const opts *o, double *us)
{
	tileops_op op = case_op(k, k->op);
	double *v = calloc((size_t)o->rounds, sizeof(*v));
	tileops_status st = TILEOPS_OK;
	if (v == NULL) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	for (long i = 0; i < o->warmup && st == TILEOPS_OK; i++)
		st = tileops_op_run(k->c, &op);
	if (st == TILEOPS_OK)
		st = tileops_sync(k->c);
	for (long r = 0; r < o->rounds && st == TILEOPS_OK; r++) {
		double t0 = bench_now_us();
		for (long i = 0; i < o->window && st == TILEOPS_OK; i++)
			st = tileops_op_run(k->c, &op);
		if (st == TILEOPS_OK)
			st = tileops_sync(k->c);
		v[r] = (bench_now_us() - t0) / (double)o->window;
	}
	if (st == TILEOPS_OK)
		*us = bench_median(v, o->rounds);
	free(v);
	return st == TILEOPS_OK ? 0 : bench_fail(op_names[k->op], st);
}

/* "64 MiB": the size as both benches name it in their JSON lines. */
static void size_name(long bytes, char *out, size_t len)
{
	if (bytes >= 1L << 30 && bytes % (1L << 30) == 0)
		snprintf(out, len, "%ld GiB", bytes >> 30);
	else if (bytes >= 1L << 20 && bytes % (1L << 20) == 0)
		snprintf(out, len, "%ld MiB", bytes >> 20);
	else if (bytes >= 1L << 10 && bytes % (1L << 10) == 0)
		snprintf(out, len, "%ld KiB", bytes >> 10);
	else
		snprintf(out, len, "%ld B", bytes);
}

static void case_report(const opts *o, result *res)
{
	char name[48], kernel[40], size[24];
	long calls = o->window * o->rounds;
	snprintf(name, sizeof(name), "%s x%d", op_names[res->op], res->ranks);
	size_name(res->bytes, size, sizeof(size));
	snprintf(kernel, sizeof(kernel), "%s %s", size, tileops_dtype_name(o->dtype));
	res->algbw = (double)res->bytes / (res->us * 1e-6) / 1e9;
	double f = res->op == 0 ? 2.0 * (res->ranks - 1) / res->ranks
	                        : (double)(res->ranks - 1) / res->ranks;
	res->busbw = res->algbw * f;
	bench_report(name, kernel, "time", res->us, "us", calls);
	bench_report(name, kernel, "algbw", res->algbw, "GB/s", calls);
	bench_report(name, kernel, "busbw", res->busbw, "GB/s", calls);
}

/* Make, check and time one case; its tensors are freed whatever happens. */
static int run_case(tileops_client *c, const opts *o, int op, int n, long bytes, unsigned char *buf,
                    result *res)
{
	bench_case k = { c, op, n, o->dtype, tileops_dtype_size(o->dtype), 0, { 0 }, buf };
	int rc = -1;
	if (bytes % (long)(k.esize * (size_t)n) != 0) {
		fprintf(stderr,
		        "%s: %s over %d ranks: %ld bytes is not a whole number of %s elements "
		        "per rank part\n",
		        prog, op_names[op], n, bytes, tileops_dtype_name(o->dtype));
		return -1;
	}
	k.elems = bytes / (long)k.esize;
	const int64_t shape[] = { k.elems };
	for (int r = 0; r < n; r++) {
		tileops_status st = tileops_tensor_create_on(c, r, o->dtype, 1, shape, &k.t[r]);
		if (st != TILEOPS_OK) {
			bench_fail("tileops_tensor_create_on", st);
			goto out;
		}
	}
	if (case_check(&k, 0) != 0 || (op != 0 && case_check(&k, op) != 0))
		goto out;
	*res = (result){ op, n, bytes, 0.0, 0.0, 0.0 };
	if (case_time(&k, o, &res->us) != 0)
		goto out;
	case_report(o, res);
	rc = 0;
out:
	for (int r = 0; r < n; r++)
		if (k.t[r] != 0)
			tileops_tensor_free(c, k.t[r]);
	return rc;
}

static void print_table(const opts *o, const result *res, int n)
{
	printf("\n| op | ranks | bytes per rank | dtype | time (us) | algbw (GB/s) | "
	       "busbw (GB/s) |\n");
	printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
	for (int i = 0; i < n; i++) {
		char size[24];
		size_name(res[i].bytes, size, sizeof(size));
		printf("| %s | %d | %s | %s | %.1f | %.2f | %.2f |\n", op_names[res[i].op],
		       res[i].ranks, size, tileops_dtype_name(o->dtype), res[i].us, res[i].algbw,
		       res[i].busbw);
	}
}

/* The default rank counts: powers of two from 2 up to count, and count. */
static void default_ranks(opts *o, int count)
{
	for (long n = 2; n <= count && n <= MAX_RANKS; n *= 2)
		o->ranks[o->n_ranks++] = n;
	if (count >= 2 && count <= MAX_RANKS && o->ranks[o->n_ranks - 1] != count)
		o->ranks[o->n_ranks++] = count;
}

static int run(opts *o)
{
	tileops_client *c = NULL;
	result *res = NULL;
	unsigned char *buf = malloc(CHUNK_BYTES);
	int rc = 1, n_res = 0;
	if (buf == NULL || bench_connect(o->address, "bench-collective", &c) != 0)
		goto out;
	int count = tileops_device_count(c);
	if (o->n_ranks == 0) {
		if (count < 2) {
			printf("%s: tileopsd serves one device: no collective over several to "
			       "measure\n",
			       prog);
			rc = 0;
			goto out;
		}
		default_ranks(o, count);
	}
	for (int i = 0; i < o->n_ranks; i++) {
		if (o->ranks[i] > count) {
			fprintf(stderr,
			        "%s: --ranks asks for %ld ranks, but tileopsd serves %d device%s "
			        "(its `devices` setting; one rank per device)\n",
			        prog, o->ranks[i], count, count == 1 ? "" : "s");
			goto out;
		}
	}
	res = calloc((size_t)(o->n_ops * o->n_ranks * o->n_sizes), sizeof(*res));
	if (res == NULL)
		goto out;
	for (int a = 0; a < o->n_ops; a++)
		for (int b = 0; b < o->n_ranks; b++)
			for (int s = 0; s < o->n_sizes; s++) {
				if (run_case(c, o, o->ops[a], (int)o->ranks[b], o->sizes[s], buf,
				             &res[n_res]) != 0)
					goto out;
				n_res++;
			}
	rc = 0;
out:
	if (n_res > 0)
		print_table(o, res, n_res);
	if (c)
		tileops_close(c);
	free(res);
	free(buf);
	return rc;
}

/* ---- options ----------------------------------------------------------------- */

/* Numbers separated by spaces or commas, each in [lo, hi]: their count, or -1. */
static int parse_list(const char *flag, const char *s, long lo, long hi, long *out)
{
	char tmp[512], *save = NULL;
	int n = 0;
	snprintf(tmp, sizeof(tmp), "%s", s);
	for (char *w = strtok_r(tmp, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
		if (n == MAX_LIST || bench_parse_long(w, lo, hi, &out[n]) != 0) {
			fprintf(stderr, "%s: %s wants at most %d numbers in [%ld, %ld], not '%s'\n",
			        prog, flag, MAX_LIST, lo, hi, w);
			return -1;
		}
		n++;
	}
	if (n == 0)
		fprintf(stderr, "%s: %s is empty\n", prog, flag);
	return n > 0 ? n : -1;
}

static int parse_ops(opts *o, const char *s)
{
	char tmp[256], *save = NULL;
	o->n_ops = 0;
	snprintf(tmp, sizeof(tmp), "%s", s);
	for (char *w = strtok_r(tmp, " ,", &save); w; w = strtok_r(NULL, " ,", &save)) {
		int k = 0;
		while (k < N_OPS && strcmp(w, op_names[k]) != 0)
			k++;
		if (k == N_OPS || o->n_ops == N_OPS) {
			fprintf(stderr,
			        "%s: --ops lists all_reduce, all_gather, reduce_scatter, not "
			        "'%s'\n",
			        prog, w);
			return -1;
		}
		o->ops[o->n_ops++] = k;
	}
	return o->n_ops > 0 ? 0 : -1;
}

static int parse_dtype(opts *o, const char *s)
{
	static const tileops_dtype dts[] = { TILEOPS_BF16, TILEOPS_F16, TILEOPS_F32 };
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
		if (strcmp(s, tileops_dtype_name(dts[i])) == 0) {
			o->dtype = dts[i];
			return 0;
		}
	}
	fprintf(stderr, "%s: --dtype is bf16, f16 or f32, not '%s'\n", prog, s);
	return -1;
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: %s [--address ADDR] [--ops all_reduce,all_gather,reduce_scatter]\n"
	        "       [--ranks \"2 4 8\"] [--sizes \"BYTES ...\"] [--max-bytes B] "
	        "[--dtype bf16|f16|f32]\n"
	        "       [--warmup N] [--window W] [--rounds R] [--json FILE]\n",
	        prog);
	return 2;
}

static int parse_args(opts *o, int argc, char **argv)
{
	const char *sizes = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		struct {
			const char *flag;
			long *out, lo, hi;
		} nums[] = {
			{ "--max-bytes", &o->max_bytes, 1, 1L << 40 },
			{ "--warmup", &o->warmup, 0, 100000 },
			{ "--window", &o->window, 1, 100000 },
			{ "--rounds", &o->rounds, 1, 10000 },
		};
		int done = 0, bad = 0;
		if (v == NULL)
			return usage();
		for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]) && !done; k++) {
			if (strcmp(a, nums[k].flag) != 0)
				continue;
			if (bench_parse_long(v, nums[k].lo, nums[k].hi, nums[k].out) != 0) {
				fprintf(stderr, "%s: %s wants a number in [%ld, %ld]\n", prog, a,
				        nums[k].lo, nums[k].hi);
				return 2;
			}
			done = 1;
		}
		if (done)
			;
		else if (strcmp(a, "--address") == 0)
			o->address = v;
		else if (strcmp(a, "--json") == 0)
			o->json = v;
		else if (strcmp(a, "--ops") == 0)
			bad = parse_ops(o, v) != 0;
		else if (strcmp(a, "--dtype") == 0)
			bad = parse_dtype(o, v) != 0;
		else if (strcmp(a, "--sizes") == 0)
			sizes = v;
		else if (strcmp(a, "--ranks") == 0)
			bad = (o->n_ranks = parse_list(a, v, 2, MAX_RANKS, o->ranks)) < 0;
		else
			return usage();
		if (bad)
			return 2;
		i++;
	}
	if (sizes != NULL) {
		if ((o->n_sizes = parse_list("--sizes", sizes, 1, 1L << 40, o->sizes)) < 0)
			return 2;
	} else {
		for (long b = 1L << 20; b <= (1L << 30); b *= 4)
			o->sizes[o->n_sizes++] = b;
	}
	int kept = 0;
	for (int s = 0; s < o->n_sizes; s++)
		if (o->sizes[s] <= o->max_bytes)
			o->sizes[kept++] = o->sizes[s];
	if ((o->n_sizes = kept) == 0) {
		fprintf(stderr, "%s: no size is at most --max-bytes %ld\n", prog, o->max_bytes);
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	opts o;
	memset(&o, 0, sizeof(o));
	o.n_ops = 1; /* all_reduce */
	o.max_bytes = 1L << 30;
	o.warmup = 5;
	o.window = 20;
	o.rounds = 5;
	o.dtype = TILEOPS_BF16;
	bench_client_prog(prog);
	int rc = parse_args(&o, argc, argv);
	if (rc != 0)
		return rc;
	if (bench_report_open(prog, "collective", o.json) != 0)
		return 1;
	rc = run(&o);
	bench_report_close();
	return rc;
}
