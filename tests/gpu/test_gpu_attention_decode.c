/*
 * test_gpu_attention_decode.c - the CUDA attention_decode,
 * attention_decode_paged and kv_cache_append against their CPU references
 * on fresh random inputs (the seed is in every failure message). The
 * device output is poisoned with 0xff bytes (NaN) before every run, so an
 * element left unwritten fails the comparison. Norm-wise relative error:
 * bf16 within 2e-2, f16 within 5e-3.
 *
 * Lengths 1, 17, 1000 and 4097 side by side; GQA groups of 1, 4 and 8;
 * head dims 64, 128 and 256; one and four new tokens per sequence; pages
 * of 16 and 256 tokens in scattered order, some shared; 65536 tokens at
 * batch 1 (split-KV) with and without workspace; every split count the
 * tuning interface offers, as exact choices through tk_call.choice (merges
 * of 1, 2, 4 and 8 warps per row, rows that leave a merge block part
 * empty, splits past the length), and counts the bounds do not allow:
 * refused when exact, the nearest run when preferred; lengths and page
 * indices out of range; append then decode. Needs a GPU.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernels/tk_decode_case.h"
#include "kernels/tk_test_util.h"
#include "gpu/gpu_util.h"

static double tol_of(tk_dtype dt)
{
	return dt == TK_F16 ? 5e-3 : 2e-2;
}

static void log_case(const char *op, const char *what, double rel, double tol)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path != NULL ? fopen(path, "a") : NULL;

	if (f == NULL)
		return;
	fprintf(f, "%-24s %-64s rel %.3g tol %.3g\n", op, what, rel, tol);
	fclose(f);
}

static void from_device(tk_tensor *t, const void *d)
{
	size_t bytes = tt_span_bytes(t);

	if (bytes)
		cr_assert_eq(cudaMemcpy(t->data, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static void *workspace(void)
{
	static void *ws;

	if (ws == NULL)
		cr_assert_eq(cudaMalloc(&ws, TK_WORKSPACE_BYTES), cudaSuccess);
	return ws;
}

/*
 * A random page table: every sequence's pages drawn from a shuffled list
 * of all pages, so they are scattered; when `share`, sequence 1 starts
 * with sequence 0's first two pages (a shared prefix).
 */
static void dcase_scatter(dcase *x, uint64_t *rng, int share)
{
	int32_t *perm = malloc(sizeof(int32_t) * (size_t)x->pages);
	int32_t *bt = dcase_table(x);

	for (int64_t i = 0; i < x->pages; i++)
		perm[i] = (int32_t)i;
	for (int64_t i = x->pages - 1; i > 0; i--) {
		int64_t j = (int64_t)(tt_rand_u64(rng) % (uint64_t)(i + 1));
		int32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int64_t i = 0; i < x->B * x->maxp; i++)
		bt[i] = perm[i % x->pages];
	if (share && x->B > 1 && x->maxp > 1) {
		bt[x->maxp] = bt[0];
		bt[x->maxp + 1] = bt[1];
	}
	free(perm);
}

/*
 * Run the case on the CPU and on the GPU (with or without workspace) with
 * `choice` (NULL: the built-in rule) and compare. Returns the relative
 * error.
 */
static double run_choice(dcase *x, int use_ws, const tk_choice *choice, const char *what)
{
	const char *op = x->paged ? "attention_decode_paged" : "attention_decode";
	const tk_kernel_entry *e = tk_kernel_find(op);
	tk_dtype dt = x->c.in[0].dtype;
	tk_call dc = x->c;
	tk_tensor got = x->c.out[0];
	char full[160];

	gpu_require();
	cr_assert_not_null(e, "no table entry for %s", op);
	cr_assert_not_null(e->cuda, "%s has no CUDA launcher", op);
	snprintf(full, sizeof(full), "%s %s%s", tk_dtype_name(dt), what,
	         use_ws ? "" : " (no workspace)");
	for (int i = 0; i < x->c.n_in; i++)
		dc.in[i].data = gpu_to_device(&x->c.in[i]);
	dc.out[0].data = gpu_to_device(&x->c.out[0]);
	cr_assert_eq(cudaMemset(dc.out[0].data, 0xff, tt_span_bytes(&got)), cudaSuccess);
	dc.workspace = use_ws ? workspace() : NULL;
	dc.workspace_bytes = use_ws ? TK_WORKSPACE_BYTES : 0;
	memset(&dc.choice, 0, sizeof(dc.choice));
	if (choice != NULL)
		dc.choice = *choice;

	cr_assert_eq(e->cpu(&x->c), TK_OK, "%s CPU reference refused %s", op, full);
	cr_assert_eq(e->cuda(&dc, NULL), TK_OK, "%s CUDA launcher refused %s", op, full);
	cudaError_t err = cudaDeviceSynchronize();
	cr_assert_eq(err, cudaSuccess, "%s %s: %s", op, full, cudaGetErrorString(err));

	got.data = malloc(tt_span_bytes(&got) + 1);
	from_device(&got, dc.out[0].data);
	int64_t n = tk_numel(&got);
	double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int64_t i = 0; i < n; i++)
		want[i] = tt_get(&x->c.out[0], i);
	double rel = tt_rel_err(&got, want);
	log_case(op, full, rel, tol_of(dt));
	cr_expect_leq(rel, tol_of(dt), "%s %s: relative error %.3g > %.3g (seed 0x%llx)", op, full,
	              rel, tol_of(dt), (unsigned long long)gpu_case_seed);
	free(want);
	free(got.data);
	for (int i = 0; i < x->c.n_in; i++)
		cudaFree(dc.in[i].data);
	cudaFree(dc.out[0].data);
	return rel;
}

static double run_case(dcase *x, int use_ws, const char *what)
{
	return run_choice(x, use_ws, NULL, what);
}

/* The device call of x, its tensors' data never read (for candidates and refusals). */
static tk_call shapes_call(const dcase *x, int use_ws)
{
	tk_call c = x->c;

	c.workspace = use_ws ? workspace() : NULL;
	c.workspace_bytes = use_ws ? TK_WORKSPACE_BYTES : 0;
	memset(&c.choice, 0, sizeof(c.choice));
	return c;
}

/*
 * Every split count the tuning interface offers for x (with workspace),
 * each an exact choice that must run and match the CPU; returns how many.
 * The counts are distinct, 1 (no split) among them.
 */
static int run_every_candidate(dcase *x, const char *what)
{
	const tk_kernel_entry *e =
	        tk_kernel_find(x->paged ? "attention_decode_paged" : "attention_decode");
	tk_call c = shapes_call(x, 1);
	tk_choice cand[64];
	int one = 0;

	cr_assert(e != NULL && e->tuning != NULL && e->tuning->candidates != NULL);
	int n = e->tuning->candidates(&c, cand, 64);
	cr_assert_gt(n, 1, "%s: %d candidates", what, n);
	cr_assert_leq(n, 64);
	for (int i = 0; i < n; i++) {
		char full[160], text[TK_TUNING_TEXT_MAX];
		cr_assert_eq(cand[i].mode, TK_CHOICE_EXACT);
		for (int j = 0; j < i; j++)
			cr_assert_neq(cand[i].v[0], cand[j].v[0], "split count %d offered twice",
			              cand[i].v[0]);
		one += cand[i].v[0] == 1;
		cr_assert_eq(e->tuning->format_choice(&cand[i], text, sizeof(text)), 0);
		snprintf(full, sizeof(full), "%s, %s", what, text);
		run_choice(x, 1, &cand[i], full);
	}
	cr_assert_eq(one, 1, "%s: no unsplit candidate", what);
	return n;
}

/* The largest split count among x's candidates. */
static int most_splits(const dcase *x)
{
	const tk_kernel_entry *e =
	        tk_kernel_find(x->paged ? "attention_decode_paged" : "attention_decode");
	tk_call c = shapes_call(x, 1);
	tk_choice cand[64];
	int n = e->tuning->candidates(&c, cand, 64), most = 0;

	for (int i = 0; i < n && i < 64; i++)
		most = cand[i].v[0] > most ? cand[i].v[0] : most;
	return most;
}

static const int32_t mixed_lens[4] = { 1, 17, 1000, 4097 };

Test(gpu_attention_decode, contiguous_matches_cpu_for_gqa_1_4_8_and_mixed_lengths)
{
	static const int64_t groups[] = { 1, 4, 8 };

	for (int di = 0; di < 2; di++) {
		for (int gi = 0; gi < 3; gi++) {
			uint64_t rng = gpu_fresh_seed();
			dcase x;
			char what[96];
			dcase_make(&x, di ? TK_F16 : TK_BF16, 0, 4, 1, 2 * groups[gi], 2, 128, 0,
			           4100, 0, 2.0, &rng);
			memcpy(dcase_lens(&x), mixed_lens, sizeof(mixed_lens));
			snprintf(what, sizeof(what), "d128 hq %lld hkv 2 lens 1,17,1000,4097",
			         (long long)x.Hq);
			run_case(&x, 1, what);
			run_case(&x, 0, what);
			dcase_free(&x);
		}
	}
}

Test(gpu_attention_decode, head_dims_64_and_256_match_cpu)
{
	static const int64_t dims[] = { 64, 256 };

	for (int di = 0; di < 2; di++) {
		uint64_t rng = gpu_fresh_seed();
		dcase x;
		char what[96];
		dcase_make(&x, TK_BF16, 0, 4, 1, 8, 2, dims[di], 0, 4097, 0, 2.0, &rng);
		memcpy(dcase_lens(&x), mixed_lens, sizeof(mixed_lens));
		snprintf(what, sizeof(what), "d%lld gqa 4", (long long)dims[di]);
		run_case(&x, 1, what);
		dcase_free(&x);
	}
}

Test(gpu_attention_decode, several_new_tokens_are_causal_among_themselves)
{
	static const int64_t groups[] = { 1, 8 };

	for (int gi = 0; gi < 2; gi++) {
		for (int di = 0; di < 2; di++) {
			uint64_t rng = gpu_fresh_seed();
			dcase x;
			char what[96];
			dcase_make(&x, di ? TK_F16 : TK_BF16, 0, 4, 4, 2 * groups[gi], 2, 128, 0,
			           4100, 0, 2.0, &rng);
			memcpy(dcase_lens(&x), mixed_lens, sizeof(mixed_lens));
			dcase_lens(&x)[0] = 2; /* fewer cached tokens than new ones */
			snprintf(what, sizeof(what), "T 4 gqa %lld lens 2,17,1000,4097",
			         (long long)groups[gi]);
			run_case(&x, 1, what);
			dcase_free(&x);
		}
	}
}

Test(gpu_attention_decode, batch_1_of_65536_tokens_splits_and_matches_cpu)
{
	for (int di = 0; di < 2; di++) {
		uint64_t rng = gpu_fresh_seed();
		dcase x;
		dcase_make(&x, di ? TK_F16 : TK_BF16, 0, 1, 1, 32, 8, 128, 0, 65536, 0, 2.0, &rng);
		dcase_lens(&x)[0] = 65536;
		run_case(&x, 1, "b1 kv65536 gqa 4 (split-KV)");
		run_case(&x, 0, "b1 kv65536 gqa 4");
		dcase_lens(&x)[0] = 40000;
		run_case(&x, 1, "b1 kv40000 of 65536 gqa 4 (split-KV)");
		dcase_free(&x);
	}
}

Test(gpu_attention_decode, every_offered_split_count_matches_cpu)
{
	static const int64_t dims[] = { 64, 128, 256 };
	static const int32_t lens[3] = { 1000, 333, 0 };

	for (int di = 0; di < 3; di++) {
		uint64_t rng = gpu_fresh_seed();
		dcase x;
		char what[96];
		/* 18 q rows: merge blocks of 4 or 8 rows end part empty. */
		dcase_make(&x, di == 1 ? TK_F16 : TK_BF16, 0, 3, 1, 6, 2, dims[di], 0, 1000, 0, 2.0,
		           &rng);
		memcpy(dcase_lens(&x), lens, sizeof(lens));
		snprintf(what, sizeof(what), "d%lld gqa 3 lens 1000,333,0", (long long)dims[di]);
		run_every_candidate(&x, what);
		/* Up to 63 splits of 16 tokens: the merges of 8 warps a row are among them. */
		cr_assert_geq(most_splits(&x), 32, "%s: no count that takes 8 merge warps", what);
		dcase_free(&x);
	}
}

Test(gpu_attention_decode, a_split_count_the_bounds_do_not_allow_is_refused_when_exact)
{
	const tk_kernel_entry *e = tk_kernel_find("attention_decode");
	uint64_t rng = gpu_fresh_seed();
	tk_choice c100 = { TK_CHOICE_EXACT, { 100 } }, c2 = { TK_CHOICE_EXACT, { 2 } };
	static const int32_t lens[3] = { 1000, 333, 0 };
	dcase x;

	gpu_require();
	dcase_make(&x, TK_BF16, 0, 3, 1, 6, 2, 128, 0, 1000, 0, 2.0, &rng);
	memcpy(dcase_lens(&x), lens, sizeof(lens));
	/* 100 splits of a 1000-token cache are 63 of 16 tokens: not as asked. */
	tk_call c = shapes_call(&x, 1);
	c.choice = c100;
	cr_assert_eq(e->cuda(&c, NULL), TK_ERR_UNSUPPORTED,
	             "100 splits of 1000 tokens ran exactly");
	/* No workspace: no split at all. */
	c = shapes_call(&x, 0);
	c.choice = c2;
	cr_assert_eq(e->cuda(&c, NULL), TK_ERR_UNSUPPORTED, "2 splits ran without a workspace");
	/* Preferred, both run what the bounds allow, and match. */
	c100.mode = c2.mode = TK_CHOICE_PREFER;
	run_choice(&x, 1, &c100, "100 splits preferred (63 run)");
	run_choice(&x, 0, &c2, "2 splits preferred, no workspace (unsplit)");
	dcase_free(&x);
}

Test(gpu_attention_decode_paged, every_offered_split_count_in_pages_of_16_matches_cpu)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t ps = 16, maxp = 256;
	dcase x;

	dcase_make(&x, TK_BF16, 1, 2, 1, 32, 8, 128, 2 * maxp + 5, ps, maxp, 2.0, &rng);
	dcase_scatter(&x, &rng, 1);
	dcase_lens(&x)[0] = 4096;
	dcase_lens(&x)[1] = 2500;
	run_every_candidate(&x, "page 16 gqa 4 lens 4096,2500");
	dcase_free(&x);
}

Test(gpu_attention_decode, every_offered_split_count_of_65536_tokens_matches_cpu)
{
	uint64_t rng = gpu_fresh_seed();
	dcase x;

	dcase_make(&x, TK_BF16, 0, 1, 1, 32, 8, 128, 0, 65536, 0, 2.0, &rng);
	dcase_lens(&x)[0] = 65536;
	cr_assert_geq(run_every_candidate(&x, "b1 kv65536 gqa 4"), 8);
	dcase_free(&x);
}

Test(gpu_attention_decode_paged, pages_of_16_and_256_scattered_and_shared_match_cpu)
{
	static const int64_t sizes[] = { 16, 256 };
	static const int64_t groups[] = { 1, 4, 8 };

	for (int si = 0; si < 2; si++) {
		for (int gi = 0; gi < 3; gi++) {
			for (int di = 0; di < 2; di++) {
				uint64_t rng = gpu_fresh_seed();
				int64_t ps = sizes[si], maxp = (4097 + ps - 1) / ps;
				dcase x;
				char what[96];
				dcase_make(&x, di ? TK_F16 : TK_BF16, 1, 4, 1, 2 * groups[gi], 2,
				           128, 4 * maxp + 3, ps, maxp, 2.0, &rng);
				dcase_scatter(&x, &rng, 1);
				memcpy(dcase_lens(&x), mixed_lens, sizeof(mixed_lens));
				snprintf(what, sizeof(what),
				         "page %lld gqa %lld lens 1,17,1000,4097", (long long)ps,
				         (long long)groups[gi]);
				run_case(&x, 1, what);
				dcase_free(&x);
			}
		}
	}
}

Test(gpu_attention_decode_paged, batch_1_of_65536_tokens_in_pages_of_16_matches_cpu)
{
	uint64_t rng = gpu_fresh_seed();
	dcase x;

	dcase_make(&x, TK_BF16, 1, 1, 1, 32, 8, 128, 4096, 16, 4096, 2.0, &rng);
	dcase_scatter(&x, &rng, 0);
	dcase_lens(&x)[0] = 65536;
	run_case(&x, 1, "b1 kv65536 page 16 (split-KV)");
	run_case(&x, 0, "b1 kv65536 page 16");
	dcase_free(&x);
}

Test(gpu_attention_decode_paged, bad_lengths_and_page_indices_are_skipped_without_faults)
{
	uint64_t rng = gpu_fresh_seed();
	int64_t ps = 16, maxp = 8;
	dcase x;

	dcase_make(&x, TK_BF16, 1, 4, 2, 8, 2, 128, 20, ps, maxp, 2.0, &rng);
	dcase_scatter(&x, &rng, 0);
	int32_t *bt = dcase_table(&x);
	bt[0 * maxp + 1] = -1;
	bt[0 * maxp + 3] = 20; /* == num_pages */
	bt[1 * maxp + 0] = 1 << 30;
	bt[2 * maxp + 7] = INT32_MIN;
	for (int64_t i = 0; i < maxp; i++)
		bt[3 * maxp + i] = -(int32_t)i - 1; /* nothing readable */
	dcase_lens(&x)[0] = 100;
	dcase_lens(&x)[1] = INT32_MAX;
	dcase_lens(&x)[2] = -7;
	dcase_lens(&x)[3] = 128;
	run_case(&x, 1, "page indices -1, num_pages, 2^30, INT32_MIN; lens 100, max, -7");
	run_case(&x, 0, "page indices -1, num_pages, 2^30, INT32_MIN; lens 100, max, -7");
	dcase_free(&x);

	dcase_make(&x, TK_F16, 0, 3, 1, 8, 8, 64, 0, 50, 0, 2.0, &rng);
	dcase_lens(&x)[0] = -1;
	dcase_lens(&x)[1] = 0;
	dcase_lens(&x)[2] = 1 << 30;
	run_case(&x, 1, "contiguous lens -1, 0, 2^30 (capacity 50)");
	dcase_free(&x);
}

/* Run kv_cache_append on both backends; the caches must agree bit for bit. */
static void append_both(tk_call *hc, void **dev)
{
	const tk_kernel_entry *e = tk_kernel_find("kv_cache_append");
	tk_call dc = *hc;

	cr_assert_not_null(e);
	cr_assert_not_null(e->cuda, "kv_cache_append has no CUDA launcher");
	for (int i = 0; i < 5; i++)
		dc.in[i].data = dev[i];
	cr_assert_eq(e->cpu(hc), TK_OK);
	cr_assert_eq(e->cuda(&dc, NULL), TK_OK);
	cudaError_t err = cudaDeviceSynchronize();
	cr_assert_eq(err, cudaSuccess, "kv_cache_append: %s", cudaGetErrorString(err));
	for (int i = 3; i < 5; i++) {
		tk_tensor got = hc->in[i];
		got.data = malloc(tt_span_bytes(&got));
		from_device(&got, dev[i]);
		cr_expect_eq(tt_count_diff(&got, &hc->in[i]), 0,
		             "kv_cache_append: the GPU %s cache differs from the CPU one",
		             i == 3 ? "k" : "v");
		free(got.data);
	}
}

Test(gpu_kv_cache_append, append_with_skipped_slots_then_decode_matches_cpu)
{
	for (int wide = 0; wide < 2; wide++) {
		uint64_t rng = gpu_fresh_seed();
		int64_t ps = 16, maxp = 8, T = 6;
		dcase x;
		dcase_make(&x, TK_BF16, 1, 2, 3, 8, 2, 128, 20, ps, maxp, 2.0, &rng);
		dcase_scatter(&x, &rng, 0);
		int32_t *bt = dcase_table(&x);
		dcase_lens(&x)[0] = 40;
		dcase_lens(&x)[1] = 77;

		/* Tokens 37..39 of sequence 0 and 74..76 of sequence 1, with padding. */
		int64_t ks[3] = { T, 2, 128 }, ss[1] = { T };
		tk_call a = { 0 };
		a.in[0] = tt_tensor(TK_BF16, 3, ks, 0);
		a.in[1] = tt_tensor(TK_BF16, 3, ks, 0);
		a.in[2] = tt_tensor(wide ? TK_I64 : TK_I32, 1, ss, 0);
		a.in[3] = x.c.in[1];
		a.in[4] = x.c.in[2];
		a.n_in = 5;
		tt_fill(&a.in[0], &rng, -2.0, 2.0);
		tt_fill(&a.in[1], &rng, -1.0, 1.0);
		static const int64_t pos[6][2] = { { 0, 37 }, { 0, 38 }, { 0, 39 },
			                           { 1, 74 }, { 1, 75 }, { 1, 76 } };
		for (int t = 0; t < T; t++) {
			int64_t b = pos[t][0], p = pos[t][1];
			tt_set(&a.in[2], t, (double)(bt[b * maxp + p / ps] * ps + p % ps));
		}
		tt_set(&a.in[2], 4, -1.0);        /* padding: skipped */
		tt_set(&a.in[2], 5, 20.0 * 16.0); /* one past the cache: skipped */
		void *dev[5];
		for (int i = 0; i < 5; i++)
			dev[i] = gpu_to_device(&a.in[i]);
		append_both(&a, dev);
		for (int i = 0; i < 5; i++)
			cudaFree(dev[i]);
		run_case(&x, 1, "after append, T 3, page 16");
		tt_free(&a.in[0]);
		tt_free(&a.in[1]);
		tt_free(&a.in[2]);
		dcase_free(&x);
	}
}
