/*
 * gemm_measure.cu - GEMM measuring on the device (tk_gemm.h): time every
 * candidate configuration of a problem, keep the fastest one whose output
 * matches the simple kernel's (the gemm family's tk_tuning.measure, and
 * what tileops-tune runs), and the two helpers the tuner and the bench
 * share (a random fill and an output comparison). Nothing here is a
 * launcher: every entry point synchronizes, and gemm and bmm never call
 * one.
 *
 * Timing: one launch first (it must succeed, and it says roughly how long
 * a call takes), then a loop of back-to-back calls rotating over the given
 * copies of the problem, captured in one CUDA graph and replayed a few
 * times between CUDA events (the GPU's time, as in the bench and in a
 * plan's replay, not the host's launch rate); the per-call median of the
 * replays is the candidate's time. The loop length
 * and the number of repeats shrink with the call's time so that every
 * candidate costs about budget_ms, and a candidate whose first call takes
 * over 100 us and three times the best so far is not timed further.
 */
#include <cuda_fp8.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"
#include "gemm_kinds.h"

namespace
{

using namespace tkc;

const int kMaxCandidates = 256;
const double kDefaultBudgetMs = 20.0;
const int kMaxReps = 7;
const int kMinReps = 3;
const int kMaxLoop = 256; /* calls in a captured graph */

/* ---- random fill -------------------------------------------------------- */

__device__ __forceinline__ uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

template <typename T> __global__ void fill_uniform(T *p, int64_t n, uint64_t seed)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		float u = (float)(h >> 40) * (1.0f / 16777216.0f);
		p[i] = from_f32<T>(2.0f * u - 1.0f);
	}
}

/* e4m3 codes of values in [-1, 1): the fp8 GEMMs' inputs when they are tuned. */
__global__ void fill_uniform_e4m3(uint8_t *p, int64_t n, uint64_t seed)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		uint64_t h = mix64(seed ^ mix64((uint64_t)i));
		float u = (float)(h >> 40) * (1.0f / 16777216.0f);
		p[i] = (uint8_t)__nv_cvt_float_to_fp8(2.0f * u - 1.0f, __NV_SATFINITE, __NV_E4M3);
	}
}

/* ---- output comparison -------------------------------------------------- */

struct OutShape {
	int64_t batch, m, n, ld, stride;
};

__device__ __forceinline__ double warp_sum_d(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* acc[0] += sum (x - y)^2, acc[1] += sum y^2, acc[2] += count of non-finite x. */
template <typename T>
__global__ void __launch_bounds__(256) diff_sums(const T *x, const T *y, OutShape o, double *acc)
{
	__shared__ double part[3][8];
	int64_t total = o.batch * o.m * o.n, step = (int64_t)gridDim.x * blockDim.x;
	double d = 0.0, r = 0.0, bad = 0.0;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
		int64_t b = i / (o.m * o.n), rem = i % (o.m * o.n);
		int64_t off = b * o.stride + (rem / o.n) * o.ld + rem % o.n;
		double xv = to_f32(x[off]), yv = to_f32(y[off]);
		if (!isfinite(xv))
			bad += 1.0;
		else
			d += (xv - yv) * (xv - yv);
		r += yv * yv;
	}
	d = warp_sum_d(d);
	r = warp_sum_d(r);
	bad = warp_sum_d(bad);
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	if (lane == 0) {
		part[0][warp] = d;
		part[1][warp] = r;
		part[2][warp] = bad;
	}
	__syncthreads();
	if (threadIdx.x < 3) {
		double s = 0.0;
		for (int w = 0; w < (int)(blockDim.x >> 5); w++)
			s += part[threadIdx.x][w];
		atomicAdd(&acc[threadIdx.x], s);
	}
}

/* Elements from the first to one past the last of p's output. */
int64_t out_extent(const tk_gemm_problem *p)
{
	int64_t e = (p->m - 1) * p->ldc + p->n;

	if (p->batch > 1)
		e += (p->batch - 1) * p->stride_c;
	return e;
}

void set_err(char *err, size_t errlen, const char *cls, const char *what)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s: %s", cls, what);
}

/* Largest relative error two correct kernels' outputs may differ by. */
double tolerance(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-3 : (dt == TK_F16 ? 1e-2 : 2e-2);
}

struct Timer {
	cudaEvent_t ev[2 * kMaxReps + 2];
	int made;
};

int timer_make(Timer *t)
{
	for (t->made = 0; t->made < 2 * kMaxReps + 2; t->made++)
		if (cudaEventCreate(&t->ev[t->made]) != cudaSuccess)
			return -1;
	return 0;
}

void timer_free(Timer *t)
{
	for (int i = 0; i < t->made; i++)
		cudaEventDestroy(t->ev[i]);
}

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Per-call median time in us of cfg over the sets, or a negative value when
 * cfg cannot run them. *fatal is set when the device is left unusable (a
 * fault inside a kernel), after which nothing else can run.
 */
double time_candidate(const tk_gemm_problem *sets, int n, const tk_gemm_config *cfg, cudaStream_t s,
                      double budget_us, double best_us, Timer *tm, int *fatal)
{
	float ms;
	int64_t k = 0;

	if (tk_gemm_launch(&sets[0], cfg, s) != TK_OK) {
		cudaGetLastError();
		return -1.0;
	}
	cudaEventRecord(tm->ev[0], s);
	tk_status st = tk_gemm_launch(&sets[1 % n], cfg, s);
	cudaEventRecord(tm->ev[1], s);
	if (cudaStreamSynchronize(s) != cudaSuccess) {
		*fatal = 1;
		return -1.0;
	}
	if (st != TK_OK || cudaGetLastError() != cudaSuccess)
		return -1.0;
	cudaEventElapsedTime(&ms, tm->ev[0], tm->ev[1]);
	double first = ms * 1e3;
	/* Clearly slower: not worth the budget. A lone call of a few us is
	 * mostly launch and event overhead, so only long calls are judged. */
	if (best_us > 0.0 && first > 3.0 * best_us && first > 100.0)
		return first;
	int reps = kMaxReps;
	if (first * reps > budget_us)
		reps = (int)(budget_us / (first > 1e-3 ? first : 1e-3));
	reps = reps < kMinReps ? kMinReps : (reps > kMaxReps ? kMaxReps : reps);
	int64_t loop = (int64_t)(budget_us / (reps * (first > 1e-3 ? first : 1e-3)));
	loop = loop < 1 ? 1 : (loop > kMaxLoop ? kMaxLoop : loop);
	loop = loop < n ? n : loop;
	/* The calls go into one graph, replayed reps times: what the GPU takes
	 * for them back to back, as in a plan's replay and in the bench, not
	 * what the host takes to launch them (a split's extra kernel, the
	 * tensor maps). */
	cudaGraph_t g = NULL;
	cudaGraphExec_t ge = NULL;
	st = TK_OK;
	if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
		cudaGetLastError();
		return -1.0;
	}
	for (int64_t j = 0; j < loop && st == TK_OK; j++)
		st = tk_gemm_launch(&sets[k++ % n], cfg, s);
	if (cudaStreamEndCapture(s, &g) != cudaSuccess || st != TK_OK ||
	    cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) {
		cudaGetLastError();
		if (g != NULL)
			cudaGraphDestroy(g);
		return -1.0;
	}
	cudaGraphDestroy(g);
	cudaGraphLaunch(ge, s); /* warm-up */
	for (int r = 0; r < reps; r++) {
		cudaEventRecord(tm->ev[2 + 2 * r], s);
		cudaGraphLaunch(ge, s);
		cudaEventRecord(tm->ev[3 + 2 * r], s);
	}
	if (cudaStreamSynchronize(s) != cudaSuccess) {
		cudaGraphExecDestroy(ge);
		*fatal = 1;
		return -1.0;
	}
	cudaGraphExecDestroy(ge);
	if (cudaGetLastError() != cudaSuccess)
		return -1.0;
	double t[kMaxReps];
	for (int r = 0; r < reps; r++) {
		cudaEventElapsedTime(&ms, tm->ev[2 + 2 * r], tm->ev[3 + 2 * r]);
		t[r] = ms * 1e3 / (double)loop;
	}
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	return t[reps / 2];
}

/* 1 when cfg's output on p matches ref (the simple kernel's), 0 if not, -1 fatal. */
int output_matches(const tk_gemm_problem *p, const tk_gemm_config *cfg, const void *ref,
                   size_t bytes, cudaStream_t s)
{
	double rel;
	int64_t bad;

	/* NaN poison: an element the kernel does not write cannot pass. */
	if (cudaMemsetAsync(p->c, 0xff, bytes, s) != cudaSuccess)
		return -1;
	if (tk_gemm_launch(p, cfg, s) != TK_OK) {
		cudaGetLastError();
		return 0;
	}
	if (tk_gemm_compare(p, p->c, ref, s, &rel, &bad) != TK_OK)
		return -1;
	return bad == 0 && rel <= tolerance(p->dtype);
}

/* The candidates' indices by time, fastest first; those that could not run are left out. */
int order_by_time(const double *t, int n, int *idx)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		if (t[i] <= 0.0)
			continue;
		int j = k++;
		while (j > 0 && t[idx[j - 1]] > t[i]) {
			idx[j] = idx[j - 1];
			j--;
		}
		idx[j] = i;
	}
	return k;
}

/* Time every candidate into t[]; TK_ERR_LAUNCH when the device faulted. */
tk_status time_all(const tk_gemm_problem *sets, int n, const tk_gemm_config *cand, int nc,
                   cudaStream_t s, double budget_us, double *t)
{
	Timer tm;
	double best = 0.0;
	int fatal = 0;

	if (timer_make(&tm) != 0) {
		timer_free(&tm);
		return TK_ERR_LAUNCH;
	}
	for (int i = 0; i < nc && !fatal; i++) {
		t[i] = time_candidate(sets, n, &cand[i], s, budget_us, best, &tm, &fatal);
		if (t[i] > 0.0 && (best == 0.0 || t[i] < best))
			best = t[i];
	}
	timer_free(&tm);
	return fatal ? TK_ERR_LAUNCH : TK_OK;
}

/*
 * The fastest candidate in idx order whose output matches the simple
 * kernel's: its position in idx, -1 when none does, -2 on a device fault.
 */
int first_correct(const tk_gemm_problem *p, const tk_gemm_config *cand, const int *idx, int n,
                  cudaStream_t s)
{
	size_t bytes = (size_t)out_extent(p) * tk_dtype_size(p->dtype);
	tk_gemm_config ref_cfg;
	tk_gemm_problem rp = *p;
	void *ref = NULL;
	int found = -1;

	if (n > 0 && cand[idx[0]].kind == TK_GEMM_SIMPLE)
		return 0; /* the fastest is the reference itself */
	if (tk_gemm_simple_candidates(p, &ref_cfg, 1) < 1)
		return n > 0 ? 0 : -1; /* nothing to check against */
	if (cudaMallocAsync(&ref, bytes, s) != cudaSuccess) {
		cudaGetLastError();
		return -2;
	}
	rp.c = ref;
	if (cudaMemsetAsync(ref, 0xff, bytes, s) != cudaSuccess ||
	    tk_gemm_launch(&rp, &ref_cfg, s) != TK_OK) {
		cudaFreeAsync(ref, s);
		return -2;
	}
	for (int i = 0; i < n && found == -1; i++) {
		if (cand[idx[i]].kind == TK_GEMM_SIMPLE) {
			found = i; /* the reference itself */
			break;
		}
		int ok = output_matches(p, &cand[idx[i]], ref, bytes, s);
		if (ok < 0)
			found = -2;
		else if (ok)
			found = i;
	}
	cudaFreeAsync(ref, s);
	return found;
}

int capturing(cudaStream_t s)
{
	cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;

	return cudaStreamIsCapturing(s, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone;
}

} // namespace

extern "C" tk_status tk_gemm_fill_random(void *data, tk_dtype dt, int64_t n, uint64_t seed,
                                         void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	int64_t blocks = (n + 255) / 256;
	unsigned grid = (unsigned)(blocks < 4096 ? (blocks > 0 ? blocks : 1) : 4096);

	if (dt == TK_F32)
		fill_uniform<<<grid, 256, 0, s>>>((float *)data, n, seed);
	else if (dt == TK_F16)
		fill_uniform<<<grid, 256, 0, s>>>((__half *)data, n, seed);
	else if (dt == TK_BF16)
		fill_uniform<<<grid, 256, 0, s>>>((__nv_bfloat16 *)data, n, seed);
	else if (dt == TK_FP8_E4M3)
		fill_uniform_e4m3<<<grid, 256, 0, s>>>((uint8_t *)data, n, seed);
	else
		return TK_ERR_UNSUPPORTED;
	return cudaGetLastError() == cudaSuccess ? TK_OK : TK_ERR_LAUNCH;
}

extern "C" tk_status tk_gemm_compare(const tk_gemm_problem *p, const void *x, const void *y,
                                     void *stream, double *rel_err, int64_t *nonfinite)
{
	cudaStream_t s = (cudaStream_t)stream;
	OutShape o = { p->batch > 1 ? p->batch : 1, p->m, p->n, p->ldc, p->stride_c };
	int64_t total = o.batch * o.m * o.n, blocks = (total + 255) / 256;
	unsigned grid = (unsigned)(blocks < 2048 ? (blocks > 0 ? blocks : 1) : 2048);
	double *acc, h[3];

	if (cudaMallocAsync((void **)&acc, 3 * sizeof(double), s) != cudaSuccess) {
		cudaGetLastError();
		return TK_ERR_NOMEM;
	}
	cudaMemsetAsync(acc, 0, 3 * sizeof(double), s);
	if (p->dtype == TK_F32)
		diff_sums<<<grid, 256, 0, s>>>((const float *)x, (const float *)y, o, acc);
	else if (p->dtype == TK_F16)
		diff_sums<<<grid, 256, 0, s>>>((const __half *)x, (const __half *)y, o, acc);
	else
		diff_sums<<<grid, 256, 0, s>>>((const __nv_bfloat16 *)x, (const __nv_bfloat16 *)y,
		                               o, acc);
	cudaMemcpyAsync(h, acc, sizeof(h), cudaMemcpyDeviceToHost, s);
	cudaFreeAsync(acc, s);
	if (cudaStreamSynchronize(s) != cudaSuccess || cudaGetLastError() != cudaSuccess)
		return TK_ERR_LAUNCH;
	*rel_err = h[1] > 0.0 ? sqrt(h[0] / h[1]) : (h[0] > 0.0 ? INFINITY : 0.0);
	*nonfinite = (int64_t)h[2];
	return TK_OK;
}

extern "C" tk_status tk_gemm_tune_sets(const tk_gemm_problem *sets, int n, void *stream,
                                       double budget_ms, tk_gemm_config *best, double *us,
                                       tk_gemm_timing *all, int max_all, int *n_all, char *err,
                                       size_t errlen)
{
	cudaStream_t s = (cudaStream_t)stream;
	char cls[96];

	if (n < 1 || sets == NULL) {
		set_err(err, errlen, "tune", "no problem to tune");
		return TK_ERR_UNSUPPORTED;
	}
	if (n_all != NULL)
		*n_all = 0;
	tk_gemm_shape_class(&sets[0], cls, sizeof(cls));
	if (capturing(s)) {
		set_err(err, errlen, cls, "cannot tune on a stream that is being captured");
		return TK_ERR_UNSUPPORTED;
	}
	tk_gemm_config *cand = (tk_gemm_config *)malloc(kMaxCandidates * sizeof(*cand));
	double *t = (double *)malloc(kMaxCandidates * sizeof(double));
	int *idx = (int *)malloc(kMaxCandidates * sizeof(int));
	tk_status st = TK_OK;
	if (cand == NULL || t == NULL || idx == NULL) {
		set_err(err, errlen, cls, "out of host memory");
		st = TK_ERR_NOMEM;
		goto out;
	}
	{
		int nc = tk_gemm_candidates(&sets[0], cand, kMaxCandidates);
		nc = nc > kMaxCandidates ? kMaxCandidates : nc;
		if (nc <= 0) {
			set_err(err, errlen, cls, "no kernel configuration can serve it");
			st = TK_ERR_UNSUPPORTED;
			goto out;
		}
		double budget_us = (budget_ms > 0.0 ? budget_ms : kDefaultBudgetMs) * 1e3;
		/* The timing captures graphs, which the legacy default stream cannot:
		 * on it, time on a private stream once the work before is done. */
		cudaStream_t ts = s, own = NULL;
		if (s == NULL || s == cudaStreamLegacy) {
			if (cudaStreamSynchronize(s) != cudaSuccess ||
			    cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking) != cudaSuccess) {
				cudaGetLastError();
				set_err(err, errlen, cls, "no stream to time on");
				st = TK_ERR_LAUNCH;
				goto out;
			}
			ts = own;
		}
		st = time_all(sets, n, cand, nc, ts, budget_us, t);
		if (own != NULL)
			cudaStreamDestroy(own); /* time_all synchronized it */
		if (st != TK_OK) {
			set_err(err, errlen, cls, "a candidate faulted on the device");
			goto out;
		}
		for (int i = 0; all != NULL && i < nc && i < max_all; i++) {
			all[i].cfg = cand[i];
			all[i].us = t[i];
			*n_all = i + 1;
		}
		int ran = order_by_time(t, nc, idx);
		int at = ran > 0 ? first_correct(&sets[0], cand, idx, ran, s) : -1;
		if (at == -2) {
			set_err(err, errlen, cls, "the device failed while checking outputs");
			st = TK_ERR_LAUNCH;
		} else if (at < 0) {
			set_err(err, errlen, cls,
			        ran ? "no candidate matched the simple kernel's output"
			            : "every candidate refused the problem");
			st = TK_ERR_UNSUPPORTED;
		} else {
			*best = cand[idx[at]];
			*us = t[idx[at]];
		}
	}
out:
	free(cand);
	free(t);
	free(idx);
	return st;
}

extern "C" tk_status tk_gemm_measure(const tk_call *call, int batched, void *stream,
                                     double budget_ms, tk_choice *best, double *us, char *err,
                                     size_t errlen)
{
	cudaStream_t s = (cudaStream_t)stream;
	tk_gemm_problem p;
	tk_gemm_config cfg;
	void *ws = NULL;
	char cls[96];

	if (tk_gemm_problem_of(call, batched, &p) != TK_OK || p.m == 0 || p.n == 0 ||
	    p.batch == 0) {
		set_err(err, errlen, batched ? "bmm" : "gemm", "nothing to measure in this call");
		return TK_ERR_UNSUPPORTED;
	}
	tk_gemm_shape_class(&p, cls, sizeof(cls));
	if (capturing(s)) {
		set_err(err, errlen, cls, "cannot tune on a stream that is being captured");
		return TK_ERR_UNSUPPORTED;
	}
	size_t bytes = (size_t)out_extent(&p) * tk_dtype_size(p.dtype);
	/* Candidates write here, never into the call's c: a residual that
	 * aliases c keeps the caller's values for every candidate. */
	if (cudaMallocAsync(&p.c, bytes, s) != cudaSuccess) {
		cudaGetLastError();
		set_err(err, errlen, cls, "no device memory for a scratch output");
		return TK_ERR_NOMEM;
	}
	/* The workspace a launch gets (the daemon hands it out at launch). */
	if (p.workspace == NULL) {
		if (cudaMallocAsync(&ws, TK_WORKSPACE_BYTES, s) == cudaSuccess) {
			p.workspace = ws;
			p.workspace_bytes = TK_WORKSPACE_BYTES;
		} else {
			cudaGetLastError();
			ws = NULL;
		}
	}
	tk_status st =
	        tk_gemm_tune_sets(&p, 1, stream, budget_ms, &cfg, us, NULL, 0, NULL, err, errlen);
	cudaFreeAsync(p.c, s);
	if (ws != NULL)
		cudaFreeAsync(ws, s);
	cudaStreamSynchronize(s);
	if (st == TK_OK)
		tk_gemm_choice_of(&cfg, TK_CHOICE_PREFER, best);
	return st;
}
