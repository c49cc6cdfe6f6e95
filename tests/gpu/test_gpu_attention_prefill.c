/*
 * test_gpu_attention_prefill.c - the CUDA attention_prefill and
 * attention_prefill_varlen kernels against the CPU reference.
 *
 * Every case draws fresh random inputs (the seed is printed on failure),
 * fills out and lse with 0xFF bytes (NaN in every dtype) before the run,
 * checks that every element was written, and compares out norm-wise
 * (bf16 within 2e-2, f16 within 5e-3) and lse element-wise. Large cases
 * compare a sample of heads and the last rows of each sequence with the
 * reference (the last rows keep the bottom-right causal alignment and see
 * the most keys), which bounds the CPU's cost.
 *
 * Every case runs the built-in choice and then every candidate the tuning
 * interface offers for the call (its schedules, as exact choices through
 * tk_call.choice, so a candidate that does not run fails) against the same
 * reference, each into fresh poisoned outputs. With TILEOPS_TEST_LOG set to
 * a file name, every case's error is appended, with its choice.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "gpu/gpu_util.h"
#include "kernels/tk_test_util.h"

typedef struct prefill_case {
	tk_dtype dt;
	int64_t B, S, Skv, Hq, Hkv, D;
	int causal;
	double scale;
	int with_lse;
	/* varlen when n_seq > 0: per-sequence query and key lengths */
	int n_seq;
	const int *q_lens, *k_lens;
	int max_q;       /* max_seqlen_q param (0: derived) */
	int odd_choices; /* also a choice of no schedule: preferred and exact */
} prefill_case;

/* More than the schedules there are (attention_schedule.h). */
#define MAX_CHOICES 16

#define ROWS_CHECKED 192 /* rows per (sequence, head) compared, the last ones */
#define HEADS_CHECKED 3

static double tol_of(tk_dtype dt)
{
	return dt == TK_BF16 ? 2e-2 : 5e-3;
}

static void log_case(const prefill_case *c, const char *variant, double rel, double lse_err)
{
	const char *path = getenv("TILEOPS_TEST_LOG");
	FILE *f = path != NULL ? fopen(path, "a") : NULL;

	if (f == NULL)
		return;
	if (c->n_seq > 0)
		fprintf(f,
		        "prefill %-10s %-4s varlen %d seqs H%lld/%lld D%lld causal %d: rel %.3g "
		        "lse %.3g\n",
		        variant, tk_dtype_name(c->dt), c->n_seq, (long long)c->Hq,
		        (long long)c->Hkv, (long long)c->D, c->causal, rel, lse_err);
	else
		fprintf(f,
		        "prefill %-10s %-4s B%lld S%lld Skv%lld H%lld/%lld D%lld causal %d: rel "
		        "%.3g lse %.3g\n",
		        variant, tk_dtype_name(c->dt), (long long)c->B, (long long)c->S,
		        (long long)c->Skv, (long long)c->Hq, (long long)c->Hkv, (long long)c->D,
		        c->causal, rel, lse_err);
	fclose(f);
}

/* Roughly normal values (sum of four uniforms), rounded to the dtype. */
static void fill_random(tk_tensor *t, uint64_t *rng)
{
	int64_t n = tk_numel(t);
	uint16_t *p = t->data;

	for (int64_t i = 0; i < n; i++) {
		double x = 0.0;
		for (int r = 0; r < 4; r++)
			x += tt_rand_uniform(rng, -0.866, 0.866);
		p[i] = t->dtype == TK_BF16 ? tk_f32_to_bf16((float)x) : tk_f32_to_f16((float)x);
	}
}

static void *dev_copy(const tk_tensor *t)
{
	size_t bytes = tt_span_bytes(t);
	void *d = NULL;

	cr_assert_eq(cudaMalloc(&d, bytes ? bytes : 16), cudaSuccess, "cudaMalloc %zu", bytes);
	if (bytes)
		cr_assert_eq(cudaMemcpy(d, t->data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

static void *dev_poisoned(const tk_tensor *t)
{
	size_t bytes = tt_span_bytes(t);
	void *d = NULL;

	cr_assert_eq(cudaMalloc(&d, bytes ? bytes : 16), cudaSuccess, "cudaMalloc %zu", bytes);
	cr_assert_eq(cudaMemset(d, 0xFF, bytes ? bytes : 16), cudaSuccess);
	return d;
}

static float out_at(const tk_tensor *t, int64_t i)
{
	uint16_t v = ((const uint16_t *)t->data)[i];

	return t->dtype == TK_BF16 ? tk_bf16_to_f32(v) : tk_f16_to_f32(v);
}

/* A view of `t` narrowed to `n` entries of dim d from index `at`. */
static tk_tensor narrow(const tk_tensor *t, int d, int64_t at, int64_t n)
{
	tk_tensor v = *t;

	v.data = (char *)t->data + (size_t)(at * t->stride[d]) * tk_dtype_size(t->dtype);
	v.shape[d] = n;
	return v;
}

/*
 * The reference for the heads and rows checked, into ref (shaped like the
 * GPU's out) and ref_lse; `mark` flags the elements it wrote.
 */
static void reference(const prefill_case *c, tk_call *hc, tk_tensor *ref, tk_tensor *ref_lse,
                      unsigned char *mark, const int *cu_q, const int *cu_k)
{
	int varlen = c->n_seq > 0, tok = varlen ? 0 : 1;
	int64_t n_seq = varlen ? c->n_seq : c->B, group = c->Hq / c->Hkv;
	int64_t step = c->Hq <= HEADS_CHECKED ? 1 : (c->Hq + HEADS_CHECKED - 1) / HEADS_CHECKED;

	for (int64_t b = 0; b < n_seq; b++) {
		int64_t q0 = varlen ? cu_q[b] : 0, q_len = varlen ? cu_q[b + 1] - cu_q[b] : c->S;
		int64_t k0 = varlen ? cu_k[b] : 0, kv_len = varlen ? cu_k[b + 1] - cu_k[b] : c->Skv;
		int64_t rows = q_len < ROWS_CHECKED ? q_len : ROWS_CHECKED;
		if (rows == 0)
			continue;
		for (int64_t h = (b * 7) % step; h < c->Hq; h += step) {
			tk_call rc;
			memset(&rc, 0, sizeof(rc));
			rc.n_in = 3;
			rc.n_out = 2;
			rc.n_params = 2;
			rc.params[0] = hc->params[0];
			rc.params[1] = hc->params[1];
			for (int i = 0; i < 3; i++) {
				tk_tensor t = hc->in[i];
				if (!varlen)
					t = narrow(&t, 0, b, 1);
				t = narrow(&t, tok, i == 0 ? q0 + q_len - rows : k0,
				           i == 0 ? rows : kv_len);
				t = narrow(&t, tok + 1, i == 0 ? h : h / group, 1);
				if (varlen) { /* the batched reference on a [1, len, 1, D] view */
					memmove(&t.shape[1], &t.shape[0], 3 * sizeof(int64_t));
					memmove(&t.stride[1], &t.stride[0], 3 * sizeof(int64_t));
					t.shape[0] = 1;
					t.stride[0] = 0;
					t.ndim = 4;
				}
				rc.in[i] = t;
			}
			tk_tensor o = *ref, l = *ref_lse;
			if (!varlen) {
				o = narrow(&o, 0, b, 1);
				l = narrow(&l, 0, b, 1);
			}
			o = narrow(&o, tok, q0 + q_len - rows, rows);
			o = narrow(&o, tok + 1, h, 1);
			l = narrow(&l, varlen ? 0 : 1, h, 1);
			l = narrow(&l, varlen ? 1 : 2, q0 + q_len - rows, rows);
			if (varlen) {
				memmove(&o.shape[1], &o.shape[0], 3 * sizeof(int64_t));
				memmove(&o.stride[1], &o.stride[0], 3 * sizeof(int64_t));
				o.shape[0] = 1;
				o.stride[0] = 0;
				o.ndim = 4;
				memmove(&l.shape[1], &l.shape[0], 2 * sizeof(int64_t));
				memmove(&l.stride[1], &l.stride[0], 2 * sizeof(int64_t));
				l.shape[0] = 1;
				l.stride[0] = 0;
				l.ndim = 3;
			}
			rc.out[0] = o;
			rc.out[1] = l;
			cr_assert_eq(tk_kernel_find("attention_prefill")->cpu(&rc), TK_OK);
			for (int64_t r = 0; r < rows; r++) {
				int64_t t = q0 + q_len - rows + r;
				int64_t base = varlen ? t * ref->stride[0] + h * ref->stride[1]
				                      : b * ref->stride[0] + t * ref->stride[1] +
				                                h * ref->stride[2];
				memset(mark + base, 1, (size_t)c->D);
			}
		}
	}
}

/* The op and kernel entry of a case. */
static const tk_kernel_entry *entry_of(const prefill_case *c)
{
	const char *op = c->n_seq > 0 ? "attention_prefill_varlen" : "attention_prefill";
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert(e != NULL && e->cuda != NULL && e->tuning != NULL,
	          "%s has no tunable CUDA kernel", op);
	return e;
}

/*
 * Runs dc's inputs with `choice` (the built-in one when its mode is
 * TK_CHOICE_NONE) into fresh poisoned outputs and compares them with the
 * reference in hc->out where `mark` is set.
 */
static void check_choice(const prefill_case *c, const tk_call *hc, tk_call *dc,
                         const unsigned char *mark, const tk_choice *choice, int64_t Tq)
{
	const tk_kernel_entry *e = entry_of(c);
	const char *op = e->op;
	int varlen = c->n_seq > 0;
	char variant[TK_TUNING_TEXT_MAX] = "built-in";

	/* A choice of no schedule has no name: it is shown by its number. */
	if (choice->mode != TK_CHOICE_NONE &&
	    e->tuning->format_choice(choice, variant, sizeof(variant)) != 0)
		snprintf(variant, sizeof(variant), "schedule %d", (int)choice->v[0]);
	dc->choice = *choice;
	dc->out[0].data = dev_poisoned(&hc->out[0]);
	dc->out[1].data = c->with_lse ? dev_poisoned(&hc->out[1]) : NULL;
	cr_assert_eq(e->cuda(dc, NULL), TK_OK, "%s %s refused the launch (seed %llu)", op, variant,
	             (unsigned long long)gpu_case_seed);
	cudaError_t err = cudaDeviceSynchronize();
	cr_assert_eq(err, cudaSuccess, "%s %s: %s (seed %llu)", op, variant,
	             cudaGetErrorString(err), (unsigned long long)gpu_case_seed);

	tk_tensor got = hc->out[0], got_lse = hc->out[1];
	got.data = malloc(tt_span_bytes(&got) + 16);
	got_lse.data = malloc(tt_span_bytes(&got_lse) + 16);
	cr_assert_eq(
	        cudaMemcpy(got.data, dc->out[0].data, tt_span_bytes(&got), cudaMemcpyDeviceToHost),
	        cudaSuccess);
	if (c->with_lse)
		cr_assert_eq(cudaMemcpy(got_lse.data, dc->out[1].data, tt_span_bytes(&got_lse),
		                        cudaMemcpyDeviceToHost),
		             cudaSuccess);

	int64_t n = tk_numel(&got), nl = tk_numel(&got_lse);
	for (int64_t i = 0; i < n; i++)
		cr_assert(!isnan(out_at(&got, i)),
		          "%s: out[%lld] was not written or is NaN (seed %llu)", variant,
		          (long long)i, (unsigned long long)gpu_case_seed);
	for (int64_t i = 0; c->with_lse && i < nl; i++)
		cr_assert(!isnan(((float *)got_lse.data)[i]),
		          "%s: lse[%lld] was not written or is NaN (seed %llu)", variant,
		          (long long)i, (unsigned long long)gpu_case_seed);

	double num = 0.0, den = 0.0, lse_err = 0.0;
	for (int64_t i = 0; i < n; i++) {
		if (!mark[i])
			continue;
		double r = out_at(&hc->out[0], i), g = out_at(&got, i);
		num += (g - r) * (g - r);
		den += r * r;
	}
	double rel = sqrt(num / (den > 0.0 ? den : 1.0));
	if (c->with_lse) {
		/* The rows whose out elements were checked; lse is [.., Hq, tokens]. */
		int64_t rows_total = n / c->D;
		for (int64_t row = 0; row < rows_total; row++) {
			if (!mark[row * c->D])
				continue;
			int64_t tokh = row; /* out row = (b, t, h) or (t, h) */
			int64_t h = tokh % c->Hq, bt = tokh / c->Hq;
			int64_t li = varlen ? h * Tq + bt
			                    : (bt / c->S) * c->Hq * c->S + h * c->S + bt % c->S;
			float r = ((float *)hc->out[1].data)[li], g = ((float *)got_lse.data)[li];
			double d = isinf(r) && isinf(g) && r == g ? 0.0 : fabs((double)g - r);
			if (d > lse_err)
				lse_err = d;
		}
	}
	log_case(c, variant, rel, lse_err);
	cr_expect(rel <= tol_of(c->dt), "%s: out: relative error %.3g over %.3g (seed %llu)",
	          variant, rel, tol_of(c->dt), (unsigned long long)gpu_case_seed);
	cr_expect(lse_err <= 2e-3, "%s: lse: error %.3g over 2e-3 (seed %llu)", variant, lse_err,
	          (unsigned long long)gpu_case_seed);

	free(got.data);
	free(got_lse.data);
	for (int i = 0; i < 2; i++) {
		if (dc->out[i].data)
			cudaFree(dc->out[i].data);
		dc->out[i].data = NULL;
	}
}

/*
 * The candidates the tuning interface offers for dc, each an exact choice:
 * the four schedules, but for non-causal d64, where the wide key tiles are
 * the default ones and turns-wide is turns.
 */
static int candidates_of(const prefill_case *c, const tk_call *dc, tk_choice *out)
{
	const tk_kernel_entry *e = entry_of(c);
	int n = 0, least = c->causal || c->D != 64 ? 4 : 3;

	cr_assert_not_null(e->tuning->candidates, "no candidates in a CUDA build");
	n = e->tuning->candidates(dc, out, MAX_CHOICES);
	cr_assert_eq(n, least, "%s: %d candidates, expected %d", e->op, n, least);
	cr_assert_leq(n, MAX_CHOICES);
	for (int i = 0; i < n; i++)
		cr_assert_eq(out[i].mode, TK_CHOICE_EXACT);
	return n;
}

/* Build, run on the CPU, then the built-in choice and every candidate on the GPU, compare. */
static void run_case(const prefill_case *c)
{
	uint64_t rng = gpu_fresh_seed();
	int varlen = c->n_seq > 0;
	int cu_q[64], cu_k[64];
	int64_t Tq = 0, Tk = 0;
	tk_call hc, dc;

	gpu_require();
	memset(&hc, 0, sizeof(hc));
	if (varlen) {
		cu_q[0] = cu_k[0] = 0;
		for (int i = 0; i < c->n_seq; i++) {
			cu_q[i + 1] = cu_q[i] + c->q_lens[i];
			cu_k[i + 1] = cu_k[i] + c->k_lens[i];
		}
		Tq = cu_q[c->n_seq];
		Tk = cu_k[c->n_seq];
		int64_t qs[3] = { Tq, c->Hq, c->D }, ks[3] = { Tk, c->Hkv, c->D };
		int64_t ls[2] = { c->Hq, Tq }, cs[1] = { c->n_seq + 1 };
		hc.in[0] = tt_tensor(c->dt, 3, qs, 0);
		hc.in[1] = tt_tensor(c->dt, 3, ks, 0);
		hc.in[2] = tt_tensor(c->dt, 3, ks, 0);
		hc.in[3] = tt_tensor(TK_I32, 1, cs, 0);
		hc.in[4] = tt_tensor(TK_I32, 1, cs, 0);
		memcpy(hc.in[3].data, cu_q, sizeof(int) * (size_t)(c->n_seq + 1));
		memcpy(hc.in[4].data, cu_k, sizeof(int) * (size_t)(c->n_seq + 1));
		hc.out[0] = tt_tensor(c->dt, 3, qs, 0);
		hc.out[1] = tt_tensor(TK_F32, 2, ls, 0);
		hc.n_in = 5;
	} else {
		int64_t qs[4] = { c->B, c->S, c->Hq, c->D }, ks[4] = { c->B, c->Skv, c->Hkv, c->D };
		int64_t ls[3] = { c->B, c->Hq, c->S };
		hc.in[0] = tt_tensor(c->dt, 4, qs, 0);
		hc.in[1] = tt_tensor(c->dt, 4, ks, 0);
		hc.in[2] = tt_tensor(c->dt, 4, ks, 0);
		hc.out[0] = tt_tensor(c->dt, 4, qs, 0);
		hc.out[1] = tt_tensor(TK_F32, 3, ls, 0);
		hc.n_in = 3;
	}
	hc.n_out = 2;
	hc.n_params = varlen ? 3 : 2;
	hc.params[0].kind = TK_PARAM_BOOL;
	hc.params[0].v.b = c->causal;
	hc.params[1].kind = TK_PARAM_FLOAT;
	hc.params[1].v.f = c->scale;
	hc.params[2].kind = TK_PARAM_INT;
	hc.params[2].v.i = c->max_q;
	for (int i = 0; i < 3; i++)
		fill_random(&hc.in[i], &rng);

	dc = hc;
	for (int i = 0; i < hc.n_in; i++)
		dc.in[i].data = dev_copy(&hc.in[i]);
	/* The reference overwrites hc.out; the inputs are on the device by now. */
	unsigned char *mark = calloc((size_t)tk_numel(&hc.out[0]), 1);
	reference(c, &hc, &hc.out[0], &hc.out[1], mark, cu_q, cu_k);
	tk_choice none, cand[MAX_CHOICES];
	memset(&none, 0, sizeof(none));
	check_choice(c, &hc, &dc, mark, &none, Tq);
	int n = candidates_of(c, &dc, cand);
	for (int i = 0; i < n; i++)
		check_choice(c, &hc, &dc, mark, &cand[i], Tq);
	if (c->odd_choices) {
		/* Preferred: the built-in schedule runs instead. Exact: refused. */
		tk_choice odd = { TK_CHOICE_PREFER, { 9 } };
		check_choice(c, &hc, &dc, mark, &odd, Tq);
		odd.mode = TK_CHOICE_EXACT;
		dc.choice = odd;
		cr_assert_eq(entry_of(c)->cuda(&dc, NULL), TK_ERR_UNSUPPORTED,
		             "an exact choice of schedule 9 was not refused");
		memset(&dc.choice, 0, sizeof(dc.choice));
	}

	free(mark);
	for (int i = 0; i < hc.n_in; i++) {
		cudaFree(dc.in[i].data);
		free(hc.in[i].data);
	}
	for (int i = 0; i < 2; i++)
		free(hc.out[i].data);
}

static prefill_case batched(tk_dtype dt, int64_t B, int64_t S, int64_t Skv, int64_t Hq, int64_t Hkv,
                            int64_t D, int causal)
{
	prefill_case c = { .dt = dt,
		           .B = B,
		           .S = S,
		           .Skv = Skv,
		           .Hq = Hq,
		           .Hkv = Hkv,
		           .D = D,
		           .causal = causal,
		           .with_lse = 1 };
	return c;
}

Test(gpu_attention_prefill, d128_bf16_non_causal_matches_reference, .timeout = 120)
{
	prefill_case c = batched(TK_BF16, 2, 256, 256, 4, 4, 128, 0);
	run_case(&c);
}

Test(gpu_attention_prefill, causal_is_aligned_bottom_right_when_keys_outnumber_queries,
     .timeout = 120)
{
	prefill_case c = batched(TK_BF16, 2, 256, 256, 4, 4, 128, 1);
	run_case(&c);
	c = batched(TK_BF16, 1, 300, 1000, 4, 2, 128, 1);
	run_case(&c);
	c = batched(TK_F16, 1, 17, 1000, 2, 1, 64, 1);
	run_case(&c);
}

Test(gpu_attention_prefill, odd_lengths_and_every_head_dim_match_reference, .timeout = 120)
{
	static const int64_t lens[][2] = {
		{ 1, 1 }, { 17, 17 }, { 1000, 1000 }, { 1, 1000 }, { 17, 300 }
	};
	static const int64_t dims[] = { 64, 128, 256 };
	for (size_t d = 0; d < 3; d++) {
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			for (int causal = 0; causal < 2; causal++) {
				tk_dtype dt = (i + d + causal) % 2 ? TK_F16 : TK_BF16;
				prefill_case c = batched(dt, 2, lens[i][0], lens[i][1], 4, 2,
				                         dims[d], causal);
				run_case(&c);
			}
		}
	}
}

Test(gpu_attention_prefill, gqa_ratios_1_4_8_match_reference, .timeout = 120)
{
	static const int64_t ratio[] = { 1, 4, 8 };
	for (size_t i = 0; i < 3; i++) {
		for (int causal = 0; causal < 2; causal++) {
			prefill_case c =
			        batched(TK_BF16, 1, 1000, 1000, 8, 8 / ratio[i], 128, causal);
			run_case(&c);
		}
	}
}

Test(gpu_attention_prefill, long_sequences_4097_match_reference, .timeout = 300)
{
	prefill_case c = batched(TK_BF16, 1, 4097, 4097, 16, 2, 128, 1);
	run_case(&c);
	c = batched(TK_F16, 1, 4097, 4097, 8, 8, 64, 0);
	run_case(&c);
	c = batched(TK_BF16, 1, 1000, 4097, 8, 1, 256, 1);
	run_case(&c);
	c = batched(TK_BF16, 1, 4097, 4097, 8, 2, 256, 0);
	run_case(&c);
}

Test(gpu_attention_prefill,
     a_choice_of_no_schedule_falls_back_when_preferred_and_is_refused_when_exact, .timeout = 120)
{
	prefill_case c = batched(TK_BF16, 2, 130, 130, 4, 2, 128, 1);
	c.odd_choices = 1;
	run_case(&c);
	c = batched(TK_F16, 1, 200, 200, 4, 4, 64, 0);
	c.odd_choices = 1;
	run_case(&c);
}

Test(gpu_attention_prefill, scale_param_and_left_out_lse_are_honoured, .timeout = 120)
{
	prefill_case c = batched(TK_F16, 2, 130, 130, 4, 1, 128, 1);
	c.scale = 0.3;
	run_case(&c);
	c.with_lse = 0;
	run_case(&c);
}

Test(gpu_attention_prefill, varlen_with_empty_sequences_matches_reference, .timeout = 120)
{
	static const int ql[] = { 0, 17, 300, 1, 0, 129, 1000 };
	static const int kl_same[] = { 0, 17, 300, 1, 0, 129, 1000 };
	static const int kl_more[] = { 5, 40, 300, 77, 0, 256, 1100 };
	static const int64_t dims[] = { 64, 128, 256 };
	for (size_t d = 0; d < 3; d++) {
		for (int causal = 0; causal < 2; causal++) {
			for (int more = 0; more < 2; more++) {
				prefill_case c = { .dt = (d + more) % 2 ? TK_F16 : TK_BF16,
					           .Hq = 8,
					           .Hkv = 2,
					           .D = dims[d],
					           .causal = causal,
					           .with_lse = 1,
					           .n_seq = 7,
					           .q_lens = ql,
					           .k_lens = more ? kl_more : kl_same,
					           .max_q = more ? 1000 : 0 };
				run_case(&c);
			}
		}
	}
}
