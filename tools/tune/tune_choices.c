/*
 * tune_choices.c - one shape class of a tunable op measured through the
 * choice API (tk_call.choice): every candidate its tuning interface offers
 * for the workload's call runs as an exact choice, its output checked
 * against the built-in choice's on the same inputs, then timed as back to
 * back calls captured in a CUDA graph (the median of a few replays per
 * call, as a plan replays them). The fastest candidate that matched wins.
 * This is how the attention families are tuned; the GEMM has its own
 * measuring (tune_gemm.c), with rotated input sets.
 *
 * Inputs: random values in [-1, 1) for the floating tensors; the integer
 * ones as a serving engine fills them for the workload's shapes: full
 * sequences (seq_lens at the capacity), page tables a random permutation
 * of the pages, varlen offsets of equal sequences.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tk_gemm.h"
#include "tune.h"

#define MAX_CANDIDATES 64
#define MAX_LOOP 64
#define MAX_REPS 7
#define MIN_REPS 3
#define DEFAULT_BUDGET_MS 20.0

static double tolerance(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-3 : (dt == TK_F16 ? 1e-2 : 2e-2);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static size_t tensor_bytes(const tk_tensor *t)
{
	return (size_t)tk_numel(t) * tk_dtype_size(t->dtype);
}

/* Host values of an integer input of op, as a serving engine fills them. */
static void int_values(const char *op, const tk_call *c, int i, int32_t *v, int64_t n)
{
	const tk_tensor *k = &c->in[1];

	if (!strcmp(op, "attention_prefill_varlen")) {
		/* equal sequences over q's (i == 3) or k's (i == 4) tokens */
		int64_t tokens = c->in[i == 3 ? 0 : 1].shape[0], seqs = n - 1;
		int64_t each = seqs > 0 ? (tokens + seqs - 1) / seqs : 0;
		for (int64_t b = 0; b < n; b++)
			v[b] = (int32_t)(b * each < tokens ? b * each : tokens);
	} else if (!strcmp(op, "attention_decode_paged") && i == 3) {
		/* every sequence's pages drawn from a shuffled list of all pages */
		int64_t pages = k->shape[0];
		int32_t *perm = malloc(sizeof(int32_t) * (size_t)pages);
		uint64_t r = 0x9e3779b97f4a7c15ULL;
		for (int64_t p = 0; p < pages; p++)
			perm[p] = (int32_t)p;
		for (int64_t p = pages - 1; p > 0; p--) {
			r ^= r >> 12;
			r ^= r << 25;
			r ^= r >> 27;
			int64_t q = (int64_t)((r * 0x2545f4914f6cdd1dULL) % (uint64_t)(p + 1));
			int32_t t = perm[p];
			perm[p] = perm[q];
			perm[q] = t;
		}
		for (int64_t e = 0; e < n; e++)
			v[e] = perm[e % pages];
		free(perm);
	} else {
		/* seq_lens: every sequence full */
		int64_t cap = !strcmp(op, "attention_decode_paged")
		                      ? c->in[3].shape[1] * k->shape[1]
		                      : k->shape[1];
		for (int64_t b = 0; b < n; b++)
			v[b] = (int32_t)cap;
	}
}

/* The device tensors of a job's call; 0, or -1 with err set. */
static int make_call(const tune_job *j, tk_call *c, void **ws, cudaStream_t s, char *err,
                     size_t errlen)
{
	*c = j->call;
	*ws = NULL;
	for (int i = 0; i < c->n_in + c->n_out; i++) {
		tk_tensor *t = i < c->n_in ? &c->in[i] : &c->out[i - c->n_in];
		size_t bytes = tensor_bytes(t);
		t->data = NULL;
		if (cudaMalloc(&t->data, bytes ? bytes : 16) != cudaSuccess) {
			t->data = NULL;
			snprintf(err, errlen, "no device memory for %zu bytes", bytes);
			return -1;
		}
		if (i >= c->n_in)
			continue;
		if (t->dtype == TK_I32) {
			int64_t n = tk_numel(t);
			int32_t *h = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
			int_values(j->entry->op, c, i, h, n);
			cudaError_t e = cudaMemcpy(t->data, h, bytes, cudaMemcpyHostToDevice);
			free(h);
			if (e != cudaSuccess) {
				snprintf(err, errlen, "copy: %s", cudaGetErrorString(e));
				return -1;
			}
		} else if (tk_gemm_fill_random(t->data, t->dtype, tk_numel(t), 17 + (uint64_t)i,
		                               s) != TK_OK) {
			snprintf(err, errlen, "cannot fill input %d (%s)", i,
			         tk_dtype_name(t->dtype));
			return -1;
		}
	}
	if (j->entry->workspace) {
		if (cudaMalloc(ws, TK_WORKSPACE_BYTES) != cudaSuccess) {
			*ws = NULL;
			snprintf(err, errlen, "no device memory for the workspace");
			return -1;
		}
		c->workspace = *ws;
		c->workspace_bytes = TK_WORKSPACE_BYTES;
	}
	return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}

static void free_call(tk_call *c, void *ws)
{
	for (int i = 0; i < c->n_in; i++)
		cudaFree(c->in[i].data);
	for (int i = 0; i < c->n_out; i++)
		cudaFree(c->out[i].data);
	cudaFree(ws);
}

/* out[0] as a [rows, last dim] problem, for tk_gemm_compare. */
static tk_gemm_problem out_matrix(const tk_tensor *out)
{
	tk_gemm_problem p;

	memset(&p, 0, sizeof(p));
	p.dtype = out->dtype;
	p.batch = 1;
	p.n = out->ndim ? out->shape[out->ndim - 1] : 1;
	p.m = p.n ? tk_numel(out) / p.n : 0;
	p.ldc = p.n;
	return p;
}

/*
 * Run c with choice ch into its poisoned out[0]; 1 when it ran and matches
 * ref, 0 when it refused or differs (why says which), -1 when the device
 * failed.
 */
static int run_checked(const tk_kernel_entry *e, tk_call *c, const tk_choice *ch, const void *ref,
                       cudaStream_t s, const char **why)
{
	tk_gemm_problem p = out_matrix(&c->out[0]);
	double rel;
	int64_t bad;

	c->choice = *ch;
	if (cudaMemsetAsync(c->out[0].data, 0xff, tensor_bytes(&c->out[0]), s) != cudaSuccess)
		return -1;
	if (e->cuda(c, s) != TK_OK) {
		cudaGetLastError();
		*why = "refused";
		return 0;
	}
	if (tk_gemm_compare(&p, c->out[0].data, ref, s, &rel, &bad) != TK_OK)
		return -1;
	if (bad != 0 || rel > tolerance(c->out[0].dtype)) {
		*why = "output differs from the built-in choice's";
		return 0;
	}
	return 1;
}

/* Median us per call of c's choice, calls back to back in a graph; < 0 when the device failed. */
static double time_choice(const tk_kernel_entry *e, const tk_call *c, cudaStream_t s,
                          double budget_us)
{
	cudaEvent_t ev[2 * MAX_REPS + 2];
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	double t[MAX_REPS], us = -1.0;
	int made = 0, loop, reps;
	float ms;

	for (; made < 2 * MAX_REPS + 2; made++)
		if (cudaEventCreate(&ev[made]) != cudaSuccess)
			goto out;
	cudaEventRecord(ev[0], s);
	e->cuda(c, s);
	cudaEventRecord(ev[1], s);
	if (cudaStreamSynchronize(s) != cudaSuccess)
		goto out;
	cudaEventElapsedTime(&ms, ev[0], ev[1]);
	double first = ms * 1e3 > 1e-3 ? ms * 1e3 : 1e-3;
	reps = first * MAX_REPS > budget_us ? (int)(budget_us / first) : MAX_REPS;
	reps = reps < MIN_REPS ? MIN_REPS : (reps > MAX_REPS ? MAX_REPS : reps);
	loop = (int)(budget_us / (reps * first));
	loop = loop < 1 ? 1 : (loop > MAX_LOOP ? MAX_LOOP : loop);
	if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
		goto out;
	for (int i = 0; i < loop; i++)
		e->cuda(c, s);
	if (cudaStreamEndCapture(s, &g) != cudaSuccess ||
	    cudaGraphInstantiate(&ge, g, 0) != cudaSuccess)
		goto out;
	cudaGraphLaunch(ge, s); /* warm-up */
	for (int r = 0; r < reps; r++) {
		cudaEventRecord(ev[2 + 2 * r], s);
		cudaGraphLaunch(ge, s);
		cudaEventRecord(ev[3 + 2 * r], s);
	}
	if (cudaStreamSynchronize(s) != cudaSuccess)
		goto out;
	for (int r = 0; r < reps; r++) {
		cudaEventElapsedTime(&ms, ev[2 + 2 * r], ev[3 + 2 * r]);
		t[r] = ms * 1e3 / loop;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	us = t[reps / 2];
out:
	if (ge)
		cudaGraphExecDestroy(ge);
	if (g)
		cudaGraphDestroy(g);
	for (int i = 0; i < made; i++)
		cudaEventDestroy(ev[i]);
	cudaGetLastError();
	return us;
}

int tune_choices_job(const tune_job *j, const tune_options *o, void *stream, FILE *trace,
                     tune_result *r, char *err, size_t errlen)
{
	cudaStream_t s = (cudaStream_t)stream;
	const tk_kernel_entry *e = j->entry;
	tk_choice cand[MAX_CANDIDATES], none;
	double budget_us = (o->budget_ms > 0.0 ? o->budget_ms : DEFAULT_BUDGET_MS) * 1e3;
	void *ws = NULL, *ref = NULL;
	tk_call c;
	int rc = 1;

	memset(r, 0, sizeof(*r));
	memset(&none, 0, sizeof(none));
	if (e->cuda == NULL || e->tuning == NULL || e->tuning->candidates == NULL) {
		snprintf(err, errlen, "%s has no CUDA kernel to tune", e->op);
		return 1;
	}
	if (make_call(j, &c, &ws, s, err, errlen) != 0)
		goto out;
	int n = e->tuning->candidates(&c, cand, MAX_CANDIDATES);
	n = n > MAX_CANDIDATES ? MAX_CANDIDATES : n;
	if (n <= 0) {
		snprintf(err, errlen, "the kernel offers no candidate for this call");
		goto out;
	}
	/* The reference: the built-in choice's output. */
	size_t out_bytes = tensor_bytes(&c.out[0]);
	if (cudaMalloc(&ref, out_bytes) != cudaSuccess) {
		ref = NULL;
		snprintf(err, errlen, "no device memory for the reference output");
		goto out;
	}
	c.choice = none;
	if (cudaMemsetAsync(c.out[0].data, 0xff, out_bytes, s) != cudaSuccess ||
	    e->cuda(&c, s) != TK_OK ||
	    cudaMemcpyAsync(ref, c.out[0].data, out_bytes, cudaMemcpyDeviceToDevice, s) !=
	            cudaSuccess ||
	    cudaStreamSynchronize(s) != cudaSuccess) {
		snprintf(err, errlen, "the built-in choice failed: %s",
		         cudaGetErrorString(cudaGetLastError()));
		rc = -1;
		goto out;
	}
	double best = 0.0;
	for (int i = 0; i < n; i++) {
		const char *why = NULL;
		int ok = run_checked(e, &c, &cand[i], ref, s, &why);
		if (ok < 0) {
			snprintf(err, errlen, "the device failed while checking a candidate");
			rc = -1;
			goto out;
		}
		double us = ok ? time_choice(e, &c, s, budget_us) : -1.0;
		if (ok && us < 0.0) {
			snprintf(err, errlen, "the device failed while timing a candidate");
			rc = -1;
			goto out;
		}
		if (!ok && why && strcmp(why, "refused") != 0) {
			char text[TK_TUNING_TEXT_MAX] = "?";
			e->tuning->format_choice(&cand[i], text, sizeof(text));
			fprintf(stderr, "tileops-tune: %s %s: %s: %s\n", e->tuning->family, j->cls,
			        text, why);
			if (trace != NULL)
				fprintf(trace, "%s | %s | %s | mismatch\n", e->tuning->family,
				        j->cls, text);
		} else {
			tune_trace_line(trace, j, &cand[i], us);
		}
		r->candidates++;
		if (ok && (best == 0.0 || us < best)) {
			best = us;
			r->best = cand[i];
			r->best.mode = TK_CHOICE_PREFER;
			r->us = us;
		}
	}
	r->sets = 1;
	if (best > 0.0)
		rc = 0;
	else
		snprintf(err, errlen, "no candidate matched the built-in choice's output");
out:
	cudaFree(ref);
	free_call(&c, ws);
	return rc;
}
