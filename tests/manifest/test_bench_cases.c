/*
 * test_bench_cases.c - tileops-bench takes its cases from the manifest
 * (tools/bench/bench_cases.c), without a GPU: every workload of every
 * benched op at every dtype is a case with the op layer's roofline counts;
 * integer inputs hold values the ops accept (positions inside the cache,
 * full sequences, page tables and slots inside the cache, packed sequence
 * offsets); `tileops-bench --dry-run` and `--list FILE` print them without
 * touching CUDA, and a workload added to the manifest shows up there.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "manifest.h"
#include "oplayer.h"

#ifndef BENCH_BIN
#error "BENCH_BIN names the tileops-bench binary"
#endif

#define MANIFEST TILEOPS_SOURCE_DIR "/manifest"

static bw_cases load(const char *op, const char *workload, const char *family)
{
	bw_filter f = { op, workload, family };
	bw_cases c;
	char err[4096] = "";

	cr_assert_eq(bw_cases_load(MANIFEST, &f, &c, err, sizeof(err)), 0, "%s", err);
	return c;
}

static const manifest_workload *workload_of(const manifest_op *op, const char *label)
{
	for (int i = 0; i < op->n_workloads; i++)
		if (!strcmp(op->workloads[i].label, label))
			return &op->workloads[i];
	return NULL;
}

static int has_cuda(const manifest_op *op)
{
	for (int i = 0; i < op->n_kernels; i++)
		if (!strcmp(op->kernels[i].backend, "cuda"))
			return 1;
	return 0;
}

Test(bench_cases, every_workload_of_a_benched_op_is_a_case_with_the_op_layers_counts)
{
	bw_cases c = load(NULL, NULL, NULL);
	const manifest *m = c.m;
	int expected = 0;

	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];

		if (bw_skipped_family(op->family) || op->status != MANIFEST_IMPLEMENTED ||
		    !has_cuda(op))
			continue;
		for (int w = 0; w < op->n_workloads; w++)
			expected += __builtin_popcount(op->workloads[w].dtypes);
	}
	cr_assert_gt(expected, 200);
	cr_assert_eq(c.n, expected, "%d cases for %d workload runs", c.n, expected);
	for (int i = 0; i < c.n; i++) {
		const bw_workload *w = &c.w[i];
		const manifest_op *op = manifest_find(m, w->op);
		const manifest_workload *mw = workload_of(op, w->label);
		op_cost cost;
		char err[512];

		cr_assert_null(bw_skipped_family(w->family), "%s is left out", w->family);
		cr_assert_str_empty(w->error, "%s / %s (%s): %s", w->op, w->label,
		                    tk_dtype_name(w->dt), w->error);
		cr_assert_not_null(mw);
		cr_assert_eq(oplayer_check_workload(op, mw, w->dt, &cost, err, sizeof(err)),
		             TILEOPS_OK, "%s", err);
		cr_assert_eq(w->bytes, cost.bytes, "%s / %s", w->op, w->label);
		cr_assert_eq(w->flops, cost.flops, "%s / %s", w->op, w->label);
		int kernel_params = 0;
		while (w->kernel->params && w->kernel->params[kernel_params])
			kernel_params++;
		cr_assert_eq(w->call.n_in, w->n_in);
		cr_assert_eq(w->call.n_params, kernel_params, "%s", w->op);
		cr_assert_not_null(w->kernel->cuda, "%s", w->op);
	}
	bw_cases_free(&c);
}

Test(bench_cases, params_carry_the_defaults_the_workload_leaves_out)
{
	bw_cases c = load("rms_norm", "deepseek-v3 hidden prefill", NULL);

	cr_assert_eq(c.n, 1);
	cr_assert_eq(c.w[0].n_params, 1);
	cr_assert_str_eq(c.w[0].param_names[0], "eps");
	cr_assert_float_eq(c.w[0].params[0].v.f, 1e-6, 1e-12);
	cr_assert_eq(c.w[0].call.n_params, 1);
	cr_assert_eq(c.w[0].out[0].ndim, 2);
	cr_assert_eq(c.w[0].out[0].shape[1], 7168);
	bw_cases_free(&c);
}

Test(bench_cases, a_family_left_out_runs_when_named)
{
	bw_cases c = load(NULL, NULL, NULL);

	for (int i = 0; i < c.n; i++)
		cr_assert_str_neq(c.w[i].family, "attention");
	cr_assert_not_null(strstr(c.skipped, "attention (tileops-bench-decode"), "%s", c.skipped);
	bw_cases_free(&c);
	c = load("kv_cache", NULL, "attention");
	cr_assert_eq(c.n, 3);
	for (int i = 0; i < c.n; i++)
		cr_assert_str_eq(c.w[i].op, "kv_cache_append");
	bw_cases_free(&c);
}

static int64_t value(const bw_tensor *t, int64_t k)
{
	return t->dt == TK_I32 ? ((const int32_t *)t->values)[k] : ((const int64_t *)t->values)[k];
}

static const bw_tensor *named(const bw_workload *w, const char *name)
{
	for (int i = 0; i < w->n_in; i++)
		if (!w->in[i].absent && !strcmp(w->in[i].name, name))
			return &w->in[i];
	return NULL;
}

static int64_t numel(const bw_tensor *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

/* Each integer input of one case holds values its op accepts. */
static void check_integers(const bw_workload *w)
{
	const bw_tensor *kc = named(w, "k_cache"), *bt = named(w, "block_tables");

	for (int i = 0; i < w->n_in; i++) {
		const bw_tensor *t = &w->in[i];
		int64_t n = numel(t);

		if (t->dt != TK_I32 && t->dt != TK_I64)
			continue;
		cr_assert_not_null(t->values, "%s / %s: %s has no values", w->op, w->label,
		                   t->name);
		if (!strcmp(t->name, "positions")) {
			const bw_tensor *cache = named(w, "cos_sin_cache");
			for (int64_t k = 0; k < n; k++)
				cr_assert(value(t, k) >= 0 &&
				                  value(t, k) < (cache ? cache->shape[0] : 131072),
				          "%s / %s", w->op, w->label);
		} else if (!strcmp(t->name, "seq_lens")) {
			int64_t cap = kc->shape[1] * (bt ? bt->shape[1] : 1);
			for (int64_t k = 0; k < n; k++)
				cr_assert_eq(value(t, k), cap, "%s / %s", w->op, w->label);
		} else if (!strcmp(t->name, "block_tables")) {
			int64_t pages = kc->shape[0], row = t->shape[1];
			char *seen = calloc((size_t)pages, 1);
			for (int64_t k = 0; k < n; k++) {
				int64_t p = value(t, k);
				cr_assert(p >= 0 && p < pages, "%s / %s: page %lld", w->op,
				          w->label, (long long)p);
				/* pages are not shared while there are enough of them */
				cr_assert(n > pages || !seen[p], "%s / %s: page %lld twice", w->op,
				          w->label, (long long)p);
				seen[p] = 1;
			}
			free(seen);
			cr_assert_gt(row, 0);
		} else if (!strcmp(t->name, "slot_mapping")) {
			int64_t cap = kc->shape[0] * kc->shape[1];
			for (int64_t k = 0; k < n; k++) {
				cr_assert(value(t, k) >= 0 && value(t, k) < cap, "%s / %s", w->op,
				          w->label);
				cr_assert(k == 0 || value(t, k) > value(t, k - 1),
				          "%s / %s: slots repeat", w->op, w->label);
			}
		} else if (!strncmp(t->name, "cu_seqlens_", 11)) {
			const bw_tensor *packed = named(w, t->name + 11);
			cr_assert_eq(value(t, 0), 0);
			cr_assert_eq(value(t, n - 1), packed->shape[0], "%s / %s", w->op, w->label);
			for (int64_t k = 1; k < n; k++)
				cr_assert_geq(value(t, k), value(t, k - 1));
		} else {
			cr_assert_fail("%s / %s: integer input %s has values but no check here",
			               w->op, w->label, t->name);
		}
	}
}

Test(bench_cases, integer_inputs_hold_values_the_ops_accept)
{
	static const char *const families[] = { "attention", "rope" };
	int checked = 0, refused = 0;

	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		bw_cases c = load(NULL, NULL, families[f]);

		for (int i = 0; i < c.n; i++) {
			const bw_workload *w = &c.w[i];

			/* The MLA shapes (qk 192, v 128) have no CUDA kernel: refused, as
			 * the op layer refuses them on the CUDA backend. */
			if (w->error[0] != '\0') {
				cr_assert_not_null(strstr(w->error, "no cuda kernel accepts"),
				                   "%s / %s: %s", w->op, w->label, w->error);
				refused++;
				continue;
			}
			check_integers(w);
			checked++;
		}
		bw_cases_free(&c);
	}
	cr_assert_gt(checked, 20);
	cr_assert_eq(refused, 1);
}

/* ---- the binary ------------------------------------------------------------------------ */

/* tileops-bench with no GPU visible (CUDA_VISIBLE_DEVICES empty): any CUDA call would fail. */
static int bench(const char *args, char *out, size_t cap)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "CUDA_VISIBLE_DEVICES= '%s' %s 2>&1", BENCH_BIN, args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	cr_assert(WIFEXITED(st), "%s did not exit normally", cmd);
	return WEXITSTATUS(st);
}

static char out[1 << 20];

/* From --dry-run's last lines: how many cases can run, of how many. */
static void counts(const char *text, int *runnable, int *total)
{
	const char *p = strstr(text, " cases can run");

	cr_assert_not_null(p, "%s", text);
	while (p > text && p[-1] != '\n')
		p--;
	cr_assert_eq(sscanf(p, "%d of %d", runnable, total), 2, "%s", p);
}

Test(bench_cli, dry_run_prints_the_cases_without_a_gpu)
{
	cr_assert_eq(bench("--manifest '" MANIFEST "' --dry-run --op rms_norm", out, sizeof(out)),
	             0, "%s", out);
	/* bytes (2 * 4096 + 4096) * 2, flops 4 * 4096, and the copies rotated capped at 1024 */
	cr_assert_not_null(strstr(out, "| rms_norm | llama3.1-8b decode | [1x4096] [4096] | bf16 | "
	                               "24576 | 16384 | 1024 |  |"),
	                   "%s", out);
	int runnable, total;
	counts(out, &runnable, &total);
	cr_assert_eq(runnable, total, "%s", out);
	cr_assert_null(strstr(out, "| layer_norm |"), "%s", out);
	cr_assert_eq(bench("--manifest '" MANIFEST
	                   "' --dry-run --family attention --op decode_paged",
	                   out, sizeof(out)),
	             0, "%s", out);
	cr_assert_not_null(strstr(out, "block_tables: a random permutation of 16384 pages; "
	                               "seq_lens: every sequence full: 4096"),
	                   "%s", out);
}

Test(bench_cli, list_writes_the_runnable_cases_as_json)
{
	char path[] = "/tmp/tileops-bench-list-XXXXXX";
	int fd = mkstemp(path);
	char args[512];

	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(args, sizeof(args), "--manifest '%s' --list '%s' --op clamp", MANIFEST, path);
	cr_assert_eq(bench(args, out, sizeof(out)), 0, "%s", out);
	FILE *f = fopen(path, "r");
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	fclose(f);
	unlink(path);
	cr_assert_not_null(strstr(out, "{\"op\": \"clamp\", \"label\": \"llama3.1-8b mlp decode\", "
	                               "\"dtype\": \"f32\", \"inputs\": [{\"shape\": [128, 14336], "
	                               "\"dtype\": \"f32\", \"mutated\": false}]"),
	                   "%s", out);
	/* clamp's default bounds, as Python's json reads infinities */
	cr_assert_not_null(strstr(out, "\"min_value\": -Infinity, \"max_value\": Infinity"), "%s",
	                   out);
}

Test(bench_cli, a_workload_added_to_the_manifest_is_benched)
{
	char dir[] = "/tmp/tileops-bench-manifest-XXXXXX", cmd[1024], args[512];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cp -R '%s/.' '%s'", MANIFEST, dir);
	cr_assert_eq(system(cmd), 0);
	/* A new workload of rms_norm, first in its list. */
	snprintf(cmd, sizeof(cmd),
	         "sed -i '0,/^    workloads:$/s//    workloads:\\n"
	         "      - label: added in a test\\n"
	         "        model: Llama 3.1 8B\\n"
	         "        dtypes: [f16]\\n"
	         "        shapes: {x: [3, 5120], weight: [5120]}/' '%s/normalization.yaml'",
	         dir);
	cr_assert_eq(system(cmd), 0);
	int before, total_before, after, total_after;
	cr_assert_eq(bench("--manifest '" MANIFEST "' --dry-run --op rms_norm", out, sizeof(out)),
	             0, "%s", out);
	counts(out, &before, &total_before);
	snprintf(args, sizeof(args), "--manifest '%s' --dry-run --op rms_norm", dir);
	cr_assert_eq(bench(args, out, sizeof(out)), 0, "%s", out);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_not_null(strstr(out, "| rms_norm | added in a test | [3x5120] [5120] | f16 | "
	                               "71680 | 61440 |"),
	                   "%s", out);
	counts(out, &after, &total_after);
	cr_assert_eq(after, before + 1, "%s", out);
	cr_assert_eq(total_after, total_before + 1, "%s", out);
}
