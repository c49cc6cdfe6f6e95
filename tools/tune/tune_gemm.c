/*
 * tune_gemm.c - one gemm or bmm shape class measured on the device: every
 * configuration tk_gemm_candidates offers, timed by tk_gemm_tune_sets over
 * enough sets of random inputs that the L2 cannot serve one call's
 * operands to the next (docs/tuning.md, "How one shape class is measured").
 */
#include <cuda_runtime.h>
#include <string.h>

#include "tk_gemm.h"
#include "tune.h"

#define MAX_SETS 32
#define MAX_CANDIDATES 256
#define ROTATE_BYTES ((double)(256 << 20)) /* several times the 50 MB L2 */

struct buffers {
	void *ws;
	void *a[MAX_SETS], *b[MAX_SETS], *c[MAX_SETS];
	int sets;
};

static void free_buffers(struct buffers *bf)
{
	cudaFree(bf->ws);
	for (int i = 0; i < MAX_SETS; i++) {
		cudaFree(bf->a[i]);
		cudaFree(bf->b[i]);
		cudaFree(bf->c[i]);
	}
	memset(bf, 0, sizeof(*bf));
}

static int alloc_fill(void **p, size_t elems, tk_dtype dt, uint64_t seed, cudaStream_t s)
{
	if (cudaMalloc(p, elems * tk_dtype_size(dt)) != cudaSuccess) {
		*p = NULL;
		cudaGetLastError();
		return -1;
	}
	return tk_gemm_fill_random(*p, dt, (int64_t)elems, seed, s) == TK_OK ? 0 : -1;
}

/*
 * As many sets of a, b and c as it takes for the rotation to outgrow the
 * L2, as the bench rotates them: with one a and one c, the activations of
 * a product could stay in L2 between calls and every call wrote the same
 * c lines, conditions no caller sees.
 */
static int make_buffers(const tune_job *j, struct buffers *bf, cudaStream_t s)
{
	size_t es = tk_dtype_size(j->dt);
	size_t a_el = (size_t)(j->batch * j->m * j->k), b_el = (size_t)(j->batch * j->n * j->k);
	size_t c_el = (size_t)(j->batch * j->m * j->n);
	double set_bytes = (double)(a_el + b_el + c_el) * (double)es;
	int sets = (int)(ROTATE_BYTES / set_bytes) + 1;

	memset(bf, 0, sizeof(*bf));
	sets = sets > MAX_SETS ? MAX_SETS : sets;
	if (cudaMalloc(&bf->ws, TK_WORKSPACE_BYTES) != cudaSuccess) {
		bf->ws = NULL;
		return -1;
	}
	for (bf->sets = 0; bf->sets < sets; bf->sets++) {
		int i = bf->sets;
		if (alloc_fill(&bf->a[i], a_el, j->dt, 1 + (uint64_t)i, s) != 0 ||
		    alloc_fill(&bf->b[i], b_el, j->dt, 100 + (uint64_t)i, s) != 0 ||
		    cudaMalloc(&bf->c[i], c_el * es) != cudaSuccess) {
			bf->c[i] = NULL;
			return -1;
		}
	}
	return cudaStreamSynchronize(s) == cudaSuccess ? 0 : -1;
}

static void problem_of(const tune_job *j, const struct buffers *bf, int set, tk_gemm_problem *p)
{
	memset(p, 0, sizeof(*p));
	p->dtype = j->dt;
	p->trans_b = j->trans_b;
	p->batch = j->batch;
	p->m = j->m;
	p->n = j->n;
	p->k = j->k;
	p->a = bf->a[set];
	p->b = bf->b[set];
	p->c = bf->c[set];
	p->lda = j->k;
	p->ldb = j->trans_b ? j->k : j->n;
	p->ldc = j->n;
	p->stride_a = j->m * j->k;
	p->stride_b = j->n * j->k;
	p->stride_c = j->m * j->n;
	p->alpha = 1.0f;
	p->workspace = bf->ws;
	p->workspace_bytes = TK_WORKSPACE_BYTES;
}

int tune_gemm_job(const tune_job *j, const tune_options *o, void *stream, FILE *trace,
                  tune_result *r, char *err, size_t errlen)
{
	cudaStream_t s = (cudaStream_t)stream;
	static tk_gemm_timing all[MAX_CANDIDATES];
	tk_gemm_problem sets[MAX_SETS];
	struct buffers bf;
	tk_gemm_config best;
	int n_all = 0, rc = 0;

	memset(r, 0, sizeof(*r));
	if (make_buffers(j, &bf, s) != 0) {
		snprintf(err, errlen, "cannot allocate or fill the inputs: %s",
		         cudaGetErrorString(cudaGetLastError()));
		free_buffers(&bf);
		return 1;
	}
	for (int i = 0; i < bf.sets; i++)
		problem_of(j, &bf, i, &sets[i]);
	tk_status st = tk_gemm_tune_sets(sets, bf.sets, s, o->budget_ms, &best, &r->us, all,
	                                 MAX_CANDIDATES, &n_all, err, errlen);
	for (int i = 0; i < n_all; i++) {
		tk_choice c;
		tk_gemm_choice_of(&all[i].cfg, TK_CHOICE_EXACT, &c);
		tune_trace_line(trace, j, &c, all[i].us);
	}
	if (st == TK_OK) {
		tk_gemm_choice_of(&best, TK_CHOICE_PREFER, &r->best);
		r->candidates = n_all;
		r->sets = bf.sets;
	} else {
		rc = st == TK_ERR_LAUNCH ? -1 : 1;
	}
	free_buffers(&bf);
	return rc;
}
