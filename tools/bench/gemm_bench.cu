/*
 * tileops-bench-gemm - our GEMM kernels against cuBLASLt, in one run, on
 * every gemm and bmm workload of the manifest, a square 8192^3 bf16 nt
 * product, and the decode workloads at M = 1, 16, 64 and 128.
 *
 * Both sides are timed the same way: the calls are captured back to back
 * in one CUDA graph (enough calls for a replay of a few milliseconds,
 * rotating over enough copies of the inputs that the 50 MB L2 does not
 * serve the weights), the two graphs are replayed alternately --reps times
 * each (at least 5), each replay between CUDA events, and the median
 * replay over the calls in it is the time per call. Alternating keeps a
 * drift of the card's clock (a heavy case before leaves it at its power
 * limit for a while) from favouring the side timed second. Ours is the
 * configuration the tuning table's choice names for the shape class when
 * --tune loads one and it serves the problem (as the launcher runs a
 * preferred choice), else the built-in choice, through tk_gemm_launch
 * with a 32 MiB workspace; cuBLASLt runs
 * bf16 (f16, f32) in, f32 compute, the same layouts, a 32 MiB workspace
 * and the fastest of the heuristic's top algorithms. Inputs are random in
 * [-1, 1), never zeros. Ours is checked against cuBLASLt (relative norm
 * error over the whole output; unwritten or non-finite elements fail). The
 * copy bandwidth (a 1 GiB device to device copy, bytes read plus written)
 * gives the weight-read floor of the M <= 128 shapes: the weights' bytes
 * over that bandwidth.
 *
 *   tileops-bench-gemm --manifest DIR [--json FILE] [--md FILE]
 *                      [--tune FILE] [--filter SUBSTRING] [--reps N] [--no-sass]
 *                      [--list]
 *
 * --tune loads a tuning table (docs/tuning.md; its gemm entries are used);
 * --list prints the cases and exits.
 */
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "manifest.h"
}
#include "gemm_workload.h"
#include "bench_cuda.h"
#include "tk_gemm.h"
#include "tuning.h"

#define CKB(call)                                                                            \
	do {                                                                                 \
		cublasStatus_t s_ = (call);                                                  \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                                           \
			fprintf(stderr, "tileops-bench-gemm: %s:%d: %s: cublas status %d\n", \
			        __FILE__, __LINE__, #call, (int)s_);                         \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

namespace
{

const int kMaxCases = 128;
const int kMaxSets = 32;
const double kRotateBytes = 256.0 * 1024 * 1024;
const double kReplayUs = 3000.0; /* a graph replay lasts about this long */
const int kMaxCalls = 256;
const int kTopAlgos = 4;
const size_t kWorkspace = (size_t)32 << 20;

struct Case {
	char label[128];
	int from_manifest;
	tk_dtype dt;
	int trans_b, bias;
	int64_t batch, m, n, k;
};

struct Result {
	const Case *c;
	int ok;
	char error[160];
	double ours_us, cublas_us, ours_tflops, cublas_tflops, speed, floor_pct, rel_err;
	int64_t nonfinite;
	int mismatch, sets, calls;
	char config[96];
};

struct Options {
	const char *manifest, *json, *md, *tune, *filter;
	int reps, sass, list;
};

Case cases[kMaxCases];
int n_cases;

/* ---- the cases ----------------------------------------------------------- */

/* Adds c unless it is an extra shape some case already measures. */
void add_case(const Case &c)
{
	for (int i = 0; i < n_cases && !c.from_manifest; i++) {
		const Case &o = cases[i];
		if (o.dt == c.dt && o.trans_b == c.trans_b && o.bias == c.bias &&
		    o.batch == c.batch && o.m == c.m && o.n == c.n && o.k == c.k)
			return;
	}
	if (n_cases < kMaxCases)
		cases[n_cases++] = c;
}

/* The case of workload w: a is tensor 0, b tensor 1, bias tensor 2 (gemm). */
int workload_case(const manifest_op *op, const manifest_workload *w, Case *c)
{
	const int64_t *a = NULL, *b = NULL;
	int batched = strcmp(op->name, "bmm") == 0, rank = batched ? 3 : 2;

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < w->n_shapes; i++) {
		if (w->tensor[i] == 0 && w->ndim[i] == rank)
			a = w->shape[i];
		if (w->tensor[i] == 1 && w->ndim[i] == rank)
			b = w->shape[i];
		if (!batched && w->tensor[i] == 2)
			c->bias = 1;
	}
	if (a == NULL || b == NULL)
		return -1;
	c->trans_b = gemm_workload_trans_b(op, w);
	c->batch = batched ? a[0] : 1;
	c->m = a[rank - 2];
	c->k = a[rank - 1];
	c->n = c->trans_b ? b[rank - 2] : b[rank - 1];
	c->from_manifest = 1;
	snprintf(c->label, sizeof(c->label), "%s %s", op->name, w->label);
	return 0;
}

/* The decode shapes again at the other decode batch sizes (bf16). */
void add_decode_sizes(const Case &base)
{
	static const int64_t ms[] = { 1, 16, 64, 128 };

	if (strstr(base.label, "decode") == NULL || base.batch != 1 || base.dt != TK_BF16)
		return;
	for (int i = 0; i < 4; i++) {
		if (ms[i] == base.m)
			continue;
		Case c = base;
		c.m = ms[i];
		c.from_manifest = 0;
		snprintf(c.label, sizeof(c.label), "%.100s, M=%lld", base.label, (long long)ms[i]);
		add_case(c);
	}
}

int load_cases(const Options &o)
{
	static const char *const ops[] = { "gemm", "bmm" };
	char err[4096];
	manifest *m = NULL;
	Case extra[kMaxCases];
	int n_extra = 0;

	if (manifest_parse(o.manifest, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileops-bench-gemm: %s\n", err);
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		const manifest_op *op = manifest_find(m, ops[k]);
		for (int w = 0; op != NULL && w < op->n_workloads; w++) {
			Case c;
			if (workload_case(op, &op->workloads[w], &c) != 0)
				continue;
			for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
				if (!(op->workloads[w].dtypes & (1u << dt)))
					continue;
				c.dt = (tk_dtype)dt;
				add_case(c);
				if (n_extra < kMaxCases)
					extra[n_extra++] = c;
			}
		}
	}
	manifest_free(m);
	Case sq;
	memset(&sq, 0, sizeof(sq));
	snprintf(sq.label, sizeof(sq.label), "gemm square 8192^3 nt (bench)");
	sq.dt = TK_BF16;
	sq.trans_b = 1;
	sq.batch = 1;
	sq.m = sq.n = sq.k = 8192;
	add_case(sq);
	for (int i = 0; i < n_extra; i++)
		add_decode_sizes(extra[i]);
	return 0;
}

/* ---- buffers ------------------------------------------------------------- */

struct Sets {
	int n;
	void *a[kMaxSets], *b[kMaxSets], *c[kMaxSets];
	void *bias, *ref, *ws;
};

size_t elems_a(const Case &c)
{
	return (size_t)(c.batch * c.m * c.k);
}
size_t elems_b(const Case &c)
{
	return (size_t)(c.batch * c.n * c.k);
}
size_t elems_c(const Case &c)
{
	return (size_t)(c.batch * c.m * c.n);
}

void *alloc_random(size_t elems, tk_dtype dt, uint64_t seed, cudaStream_t s)
{
	void *p = NULL;

	CK(cudaMalloc(&p, elems * tk_dtype_size(dt)));
	if (tk_gemm_fill_random(p, dt, (int64_t)elems, seed, s) != TK_OK) {
		fprintf(stderr, "tileops-bench-gemm: random fill failed\n");
		exit(1);
	}
	return p;
}

void make_sets(const Case &c, Sets *st, cudaStream_t s)
{
	size_t es = tk_dtype_size(c.dt);
	double bytes = (double)(elems_a(c) + elems_b(c) + elems_c(c)) * (double)es;
	int n = (int)ceil(kRotateBytes / bytes);

	memset(st, 0, sizeof(*st));
	st->n = n < 1 ? 1 : (n > kMaxSets ? kMaxSets : n);
	for (int i = 0; i < st->n; i++) {
		st->a[i] = alloc_random(elems_a(c), c.dt, 11 + 2 * (uint64_t)i, s);
		st->b[i] = alloc_random(elems_b(c), c.dt, 12 + 2 * (uint64_t)i, s);
		CK(cudaMalloc(&st->c[i], elems_c(c) * es));
	}
	if (c.bias)
		st->bias = alloc_random((size_t)c.n, c.dt, 7, s);
	CK(cudaMalloc(&st->ref, elems_c(c) * es));
	CK(cudaMalloc(&st->ws, kWorkspace));
	CK(cudaStreamSynchronize(s));
}

void free_sets(Sets *st)
{
	for (int i = 0; i < st->n; i++) {
		cudaFree(st->a[i]);
		cudaFree(st->b[i]);
		cudaFree(st->c[i]);
	}
	cudaFree(st->bias);
	cudaFree(st->ref);
	cudaFree(st->ws);
	memset(st, 0, sizeof(*st));
}

/* ---- the two sides ------------------------------------------------------- */

/* One call of one side on set i: 0, or -1 when the side refused it. */
struct Side {
	virtual int call(int i, cudaStream_t s) = 0;
	virtual ~Side()
	{
	}
};

struct Ours : Side {
	tk_gemm_problem p[kMaxSets];
	tk_gemm_config cfg;

	Ours(const Case &c, const Sets &st, tuning *table)
	{
		for (int i = 0; i < st.n; i++) {
			tk_gemm_problem &q = p[i];
			memset(&q, 0, sizeof(q));
			q.dtype = c.dt;
			q.trans_b = c.trans_b;
			q.batch = c.batch;
			q.m = c.m;
			q.n = c.n;
			q.k = c.k;
			q.a = st.a[i];
			q.b = st.b[i];
			q.bias = st.bias;
			q.c = st.c[i];
			q.lda = c.k;
			q.ldb = c.trans_b ? c.k : c.n;
			q.ldc = c.n;
			q.stride_a = c.m * c.k;
			q.stride_b = c.n * c.k;
			q.stride_c = c.m * c.n;
			q.alpha = 1.0f;
			q.workspace = st.ws;
			q.workspace_bytes = kWorkspace;
		}
		tk_gemm_builtin(&p[0], &cfg);
		pick_tuned(table);
	}
	/* The table's choice for the class, where it is one of the configurations
	 * that serve the problem. */
	void pick_tuned(tuning *table)
	{
		char cls[TK_TUNING_TEXT_MAX];
		tk_gemm_config want, cand[256];
		tk_choice ch;

		tk_gemm_shape_class(&p[0], cls, sizeof(cls));
		if (table == NULL || !tuning_get(table, "gemm", cls, &ch, NULL) ||
		    ch.mode == TK_CHOICE_NONE)
			return;
		tk_gemm_config_of(&ch, &want);
		int n = tk_gemm_candidates(&p[0], cand, 256);
		for (int i = 0; i < n && i < 256; i++)
			if (memcmp(&cand[i], &want, sizeof(want)) == 0)
				cfg = want;
	}
	int call(int i, cudaStream_t s) override
	{
		return tk_gemm_launch(&p[i], &cfg, s) == TK_OK ? 0 : -1;
	}
};

cudaDataType_t cuda_type(tk_dtype dt)
{
	return dt == TK_F32 ? CUDA_R_32F : (dt == TK_F16 ? CUDA_R_16F : CUDA_R_16BF);
}

/*
 * cuBLASLt in column-major terms: our row-major c [M, N] is its D [N, M];
 * D = op(W) X with W our b (op T when trans_b: [N, K] row-major is a
 * K x N column-major matrix) and X our a (a K x M column-major matrix).
 */
struct Cublas : Side {
	cublasLtHandle_t lt;
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
	const Sets *st;
	float alpha, beta;
	int n_algos;
	cublasLtMatmulHeuristicResult_t res[8];

	Cublas(cublasLtHandle_t h, const Case &c, const Sets &sets) : lt(h), st(&sets)
	{
		cublasOperation_t ta = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
		cudaDataType_t t = cuda_type(c.dt);

		alpha = 1.0f;
		beta = 0.0f;
		CKB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
		CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta,
		                                   sizeof(ta)));
		CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb,
		                                   sizeof(tb)));
		if (c.bias) {
			cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
			CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
			                                   sizeof(epi)));
			CKB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
			                                   &sets.bias, sizeof(sets.bias)));
		}
		if (c.trans_b)
			CKB(cublasLtMatrixLayoutCreate(&la, t, (uint64_t)c.k, (uint64_t)c.n, c.k));
		else
			CKB(cublasLtMatrixLayoutCreate(&la, t, (uint64_t)c.n, (uint64_t)c.k, c.n));
		CKB(cublasLtMatrixLayoutCreate(&lb, t, (uint64_t)c.k, (uint64_t)c.m, c.k));
		CKB(cublasLtMatrixLayoutCreate(&lc, t, (uint64_t)c.n, (uint64_t)c.m, c.n));
		if (c.batch > 1) {
			batch(la, c.batch, c.n * c.k);
			batch(lb, c.batch, c.m * c.k);
			batch(lc, c.batch, c.m * c.n);
		}
		cublasLtMatmulPreference_t pref;
		size_t ws = kWorkspace;
		CKB(cublasLtMatmulPreferenceCreate(&pref));
		CKB(cublasLtMatmulPreferenceSetAttribute(
		        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
		n_algos = 0;
		if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res,
		                                   &n_algos) != CUBLAS_STATUS_SUCCESS)
			n_algos = 0;
		cublasLtMatmulPreferenceDestroy(pref);
		if (n_algos > 0)
			algo = res[0].algo;
	}
	static void batch(cublasLtMatrixLayout_t l, int64_t count, int64_t stride)
	{
		int32_t n = (int32_t)count;
		CKB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n,
		                                     sizeof(n)));
		CKB(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
		                                     &stride, sizeof(stride)));
	}
	int run(int i, void *out, cudaStream_t s)
	{
		return cublasLtMatmul(lt, op, &alpha, st->b[i], la, st->a[i], lb, &beta, out, lc,
		                      out, lc, &algo, st->ws, kWorkspace,
		                      s) == CUBLAS_STATUS_SUCCESS
		               ? 0
		               : -1;
	}
	int call(int i, cudaStream_t s) override
	{
		return run(i, st->c[i], s);
	}
	~Cublas() override
	{
		cublasLtMatrixLayoutDestroy(la);
		cublasLtMatrixLayoutDestroy(lb);
		cublasLtMatrixLayoutDestroy(lc);
		cublasLtMatmulDescDestroy(op);
	}
};

/* ---- timing --------------------------------------------------------------- */

/* One call alone, in us (after one untimed call); negative if refused. */
double time_one(Side *side, cudaStream_t s)
{
	cudaEvent_t e0, e1;
	float ms;
	int bad;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	bad = side->call(0, s);
	CK(cudaEventRecord(e0, s));
	bad |= side->call(0, s);
	CK(cudaEventRecord(e1, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaGetLastError());
	CK(cudaEventElapsedTime(&ms, e0, e1));
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return bad ? -1.0 : ms * 1e3;
}

/*
 * A graph of back-to-back calls of side rotating over nsets input sets,
 * enough for a replay of about kReplayUs; false when the side refused.
 */
bool capture_side(Side *side, int nsets, cudaStream_t s, cudaGraphExec_t *ge, int *calls_out)
{
	double one = time_one(side, s);
	cudaGraph_t g;
	int bad = 0;

	if (one < 0.0)
		return false;
	int calls = (int)ceil(kReplayUs / (one > 1.0 ? one : 1.0));
	calls = calls < nsets ? nsets : calls;
	calls = calls > kMaxCalls ? kMaxCalls : (calls < 1 ? 1 : calls);
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < calls; i++)
		bad |= side->call(i % nsets, s);
	/* A call that broke the capture fails this side, not the whole run. */
	if (cudaStreamEndCapture(s, &g) != cudaSuccess) {
		cudaGetLastError();
		return false;
	}
	if (bad) {
		cudaGraphDestroy(g);
		return false;
	}
	CK(cudaGraphInstantiate(ge, g, 0));
	cudaGraphDestroy(g);
	*calls_out = calls;
	return true;
}

/* Per-call median over reps replays of side's graph; negative when it refused. */
double time_side(Side *side, int nsets, cudaStream_t s, int reps, int *calls_out)
{
	cudaGraphExec_t ge;

	if (!capture_side(side, nsets, s, &ge, calls_out))
		return -1.0;
	double med = bench_graph_replay_us(ge, s, 1, reps) / *calls_out;
	cudaGraphExecDestroy(ge);
	return med;
}

/* Set cb to the fastest of the heuristic's top algorithms (3 replays each); false if none ran. */
bool pick_cublas(Cublas *cb, int nsets, cudaStream_t s)
{
	double best = -1.0;
	int best_i = -1, calls, n = cb->n_algos < kTopAlgos ? cb->n_algos : kTopAlgos;

	for (int i = 0; i < n; i++) {
		cb->algo = cb->res[i].algo;
		double t = time_side(cb, nsets, s, 3, &calls);
		if (t > 0.0 && (best < 0.0 || t < best)) {
			best = t;
			best_i = i;
		}
	}
	if (best_i < 0)
		return false;
	cb->algo = cb->res[best_i].algo;
	return true;
}

double mismatch_tolerance(tk_dtype dt)
{
	return dt == TK_F32 ? 1e-4 : (dt == TK_F16 ? 5e-3 : 1e-2);
}

/* ---- one case ------------------------------------------------------------- */

void run_case(const Case &c, cublasLtHandle_t lt, double bw, const Options &o, tuning *table,
              cudaStream_t s, Result *r)
{
	Sets st;
	double flops = 2.0 * (double)c.batch * (double)c.m * (double)c.n * (double)c.k;
	size_t out_bytes = elems_c(c) * tk_dtype_size(c.dt);

	memset(r, 0, sizeof(*r));
	r->c = &c;
	make_sets(c, &st, s);
	r->sets = st.n;
	Ours ours(c, st, table);
	Cublas cb(lt, c, st);
	tk_gemm_config_str(&ours.cfg, r->config, sizeof(r->config));
	/* The sides that ran (ours first), their graphs replayed alternately so
	 * that a drift of the card's clock (a heavy case before leaves it at
	 * its power limit for a while) does not favour the side timed second;
	 * a side that refused leaves the other timed alone. */
	cudaGraphExec_t g[2];
	int calls[2], n = 0, at_ours = -1, at_cb = -1;
	double med[2];
	if (capture_side(&ours, st.n, s, &g[n], &calls[n]))
		at_ours = n++;
	if (cb.n_algos > 0 && pick_cublas(&cb, st.n, s) &&
	    capture_side(&cb, st.n, s, &g[n], &calls[n]))
		at_cb = n++;
	if (n > 0)
		bench_graphs_alternate_us(g, n, s, 1, o.reps, med);
	for (int i = 0; i < n; i++)
		CK(cudaGraphExecDestroy(g[i]));
	r->ours_us = at_ours < 0 ? -1.0 : med[at_ours] / calls[at_ours];
	r->cublas_us = at_cb < 0 ? -1.0 : med[at_cb] / calls[at_cb];
	r->calls = at_ours < 0 ? 0 : calls[at_ours];
	if (r->ours_us < 0.0) {
		snprintf(r->error, sizeof(r->error), "ours refused the problem (config %s)",
		         r->config);
	} else if (r->cublas_us < 0.0) {
		snprintf(r->error, sizeof(r->error), "cuBLASLt has no algorithm for it");
	} else {
		/* The check: both on set 0, outputs poisoned first. */
		CK(cudaMemsetAsync(st.c[0], 0xff, out_bytes, s));
		CK(cudaMemsetAsync(st.ref, 0xff, out_bytes, s));
		int bad = ours.call(0, s) | cb.run(0, st.ref, s);
		if (bad || tk_gemm_compare(&ours.p[0], st.c[0], st.ref, s, &r->rel_err,
		                           &r->nonfinite) != TK_OK) {
			snprintf(r->error, sizeof(r->error), "the output check could not run");
		} else {
			r->ok = 1;
			r->mismatch = r->nonfinite > 0 || !(r->rel_err <= mismatch_tolerance(c.dt));
			r->ours_tflops = flops / r->ours_us / 1e6;
			r->cublas_tflops = flops / r->cublas_us / 1e6;
			r->speed = r->cublas_us / r->ours_us;
			r->floor_pct = NAN;
			if (c.m <= 128) {
				double wbytes = (double)elems_b(c) * (double)tk_dtype_size(c.dt);
				r->floor_pct = 100.0 * (wbytes / (bw * 1e12) * 1e6) / r->ours_us;
			}
		}
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaGetLastError());
	free_sets(&st);
}

/* ---- output ----------------------------------------------------------------- */

void shape_str(const Case &c, char *buf, size_t len)
{
	if (c.batch > 1)
		snprintf(buf, len, "b%lld %lldx%lldx%lld %s", (long long)c.batch, (long long)c.m,
		         (long long)c.n, (long long)c.k, c.trans_b ? "nt" : "nn");
	else
		snprintf(buf, len, "%lldx%lldx%lld %s%s", (long long)c.m, (long long)c.n,
		         (long long)c.k, c.trans_b ? "nt" : "nn", c.bias ? " +bias" : "");
}

double geomean_speed(const Result *r, int n, int *count)
{
	double lg = 0.0;

	*count = 0;
	for (int i = 0; i < n; i++) {
		if (!r[i].ok || !r[i].c->from_manifest)
			continue;
		lg += log(r[i].speed);
		(*count)++;
	}
	return *count ? exp(lg / *count) : NAN;
}

void print_md(FILE *f, const Result *r, int n, double bw, int hgmma, const char *device)
{
	int cnt;
	double gm = geomean_speed(r, n, &cnt);

	fprintf(f,
	        "GEMM: ours vs cuBLASLt on %s. Copy bandwidth %.3f TB/s (1 GiB D2D, read + "
	        "written). HGMMA instructions in the bench binary's SASS: %d.\n\n",
	        device, bw, hgmma);
	fprintf(f, "| workload | MxNxK | dtype | ours us | cuBLAS us | ours TFLOP/s | cuBLAS "
	           "TFLOP/s | speed vs cuBLAS | %% of weight floor | config | check |\n");
	fprintf(f, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n");
	for (int i = 0; i < n; i++) {
		char sh[96], fl[32] = "", chk[64];
		shape_str(*r[i].c, sh, sizeof(sh));
		if (!r[i].ok) {
			fprintf(f, "| %s | %s | %s | | | | | | | %s | error: %s |\n", r[i].c->label,
			        sh, tk_dtype_name(r[i].c->dt), r[i].config, r[i].error);
			continue;
		}
		if (!isnan(r[i].floor_pct))
			snprintf(fl, sizeof(fl), "%.0f%%", r[i].floor_pct);
		if (r[i].mismatch)
			snprintf(chk, sizeof(chk), "**MISMATCH** err %.2e, %lld non-finite",
			         r[i].rel_err, (long long)r[i].nonfinite);
		else
			snprintf(chk, sizeof(chk), "ok (%.1e)", r[i].rel_err);
		fprintf(f,
		        "| %s%s | %s | %s | %.2f | %.2f | %.1f | %.1f | %.2fx | %s | %s | %s |\n",
		        r[i].c->label, r[i].c->from_manifest ? "" : " *", sh,
		        tk_dtype_name(r[i].c->dt), r[i].ours_us, r[i].cublas_us, r[i].ours_tflops,
		        r[i].cublas_tflops, r[i].speed, fl, r[i].config, chk);
	}
	fprintf(f,
	        "\nGeometric mean of speed vs cuBLAS (cuBLAS us / ours us; > 1: ours faster) "
	        "over the %d manifest workloads: %.3f. Rows marked * are not manifest "
	        "workloads.\n",
	        cnt, gm);
}

void json_num(FILE *f, const char *key, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, ", \"%s\": null", key);
	else
		fprintf(f, ", \"%s\": %.6g", key, v);
}

void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

int write_json(const char *path, const Result *r, int n, double bw, int hgmma, const char *device)
{
	FILE *f = fopen(path, "w");
	char date[32];
	time_t now = time(NULL);
	int cnt;
	double gm = geomean_speed(r, n, &cnt);

	if (f == NULL) {
		perror(path);
		return -1;
	}
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	fprintf(f, "{\"tool\": \"tileops-bench-gemm\", \"date\": \"%s\", \"device\": ", date);
	json_str(f, device);
	fprintf(f, ", \"hgmma_sass_count\": %d", hgmma);
	json_num(f, "copy_tbps", bw);
	json_num(f, "geomean_speed_vs_cublas", gm);
	fprintf(f, ", \"geomean_count\": %d, \"results\": [\n", cnt);
	for (int i = 0; i < n; i++) {
		const Case &c = *r[i].c;
		fprintf(f, "  {\"label\": ");
		json_str(f, c.label);
		fprintf(f,
		        ", \"manifest\": %s, \"dtype\": \"%s\", \"batch\": %lld, \"m\": %lld, "
		        "\"n\": %lld, \"k\": %lld, \"trans_b\": %s, \"bias\": %s, \"config\": ",
		        c.from_manifest ? "true" : "false", tk_dtype_name(c.dt), (long long)c.batch,
		        (long long)c.m, (long long)c.n, (long long)c.k,
		        c.trans_b ? "true" : "false", c.bias ? "true" : "false");
		json_str(f, r[i].config);
		fprintf(f, ", \"ok\": %s", r[i].ok ? "true" : "false");
		if (r[i].ok) {
			json_num(f, "ours_us", r[i].ours_us);
			json_num(f, "cublas_us", r[i].cublas_us);
			json_num(f, "ours_tflops", r[i].ours_tflops);
			json_num(f, "cublas_tflops", r[i].cublas_tflops);
			json_num(f, "speed_vs_cublas", r[i].speed);
			json_num(f, "weight_floor_pct", r[i].floor_pct);
			json_num(f, "rel_err_vs_cublas", r[i].rel_err);
			fprintf(f,
			        ", \"nonfinite\": %lld, \"mismatch\": %s, \"sets\": %d, "
			        "\"calls_per_graph\": %d",
			        (long long)r[i].nonfinite, r[i].mismatch ? "true" : "false",
			        r[i].sets, r[i].calls);
		} else {
			fprintf(f, ", \"error\": ");
			json_str(f, r[i].error);
		}
		fprintf(f, "}%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "]}\n");
	fclose(f);
	return 0;
}

/* HGMMA instructions in this binary's SASS, -1 when cuobjdump is not there. */
int count_hgmma(void)
{
	char self[PATH_MAX], cmd[PATH_MAX + 256];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return -1;
	self[n] = '\0';
	snprintf(cmd, sizeof(cmd),
	         "tool=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump); "
	         "[ -x \"$tool\" ] && \"$tool\" -sass '%s' 2>/dev/null | grep -c HGMMA",
	         self);
	FILE *p = popen(cmd, "r");
	int count = -1;
	if (p == NULL)
		return -1;
	if (fscanf(p, "%d", &count) != 1)
		count = -1;
	pclose(p);
	return count;
}

int usage(void)
{
	fprintf(stderr, "usage: tileops-bench-gemm --manifest DIR [--json FILE] [--md FILE] "
	                "[--tune FILE] [--filter SUBSTRING] [--reps N] [--no-sass] [--list]\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	Options o = { NULL, NULL, NULL, NULL, NULL, 9, 1, 0 };
	cudaDeviceProp prop;
	cudaStream_t s;
	cublasLtHandle_t lt;
	char err[1024];

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--no-sass")) {
			o.sass = 0;
			continue;
		}
		if (!strcmp(argv[i], "--list")) {
			o.list = 1;
			continue;
		}
		if (v == NULL)
			return usage();
		if (!strcmp(argv[i], "--manifest"))
			o.manifest = v;
		else if (!strcmp(argv[i], "--json"))
			o.json = v;
		else if (!strcmp(argv[i], "--md"))
			o.md = v;
		else if (!strcmp(argv[i], "--tune"))
			o.tune = v;
		else if (!strcmp(argv[i], "--filter"))
			o.filter = v;
		else if (!strcmp(argv[i], "--reps"))
			o.reps = atoi(v);
		else
			return usage();
		i++;
	}
	if (o.manifest == NULL)
		return usage();
	o.reps = o.reps < 5 ? 5 : o.reps;
	if (load_cases(o) != 0)
		return 1;
	if (o.list) {
		for (int i = 0; i < n_cases; i++) {
			char sh[96];
			shape_str(cases[i], sh, sizeof(sh));
			printf("%-34s %-5s %s%s\n", sh, tk_dtype_name(cases[i].dt), cases[i].label,
			       cases[i].from_manifest ? "" : " *");
		}
		return 0;
	}
	CK(cudaSetDevice(0));
	CK(cudaGetDeviceProperties(&prop, 0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CKB(cublasLtCreate(&lt));
	tuning *table = NULL;
	if (o.tune != NULL) {
		char gpu[160];
		tk_cuda_device_id(0, gpu, sizeof(gpu));
		table = tuning_new(gpu);
		if (table == NULL || tuning_load(table, o.tune, err, sizeof(err)) != TILEOPS_OK) {
			fprintf(stderr, "tileops-bench-gemm: %s\n", table ? err : "out of memory");
			return 1;
		}
		fprintf(stderr, "tuning table %s: %d entries%s%s\n", o.tune, tuning_count(table),
		        err[0] ? "; " : "", err);
	}
	int hgmma = o.sass ? count_hgmma() : -1;
	double bw = bench_copy_tbps(s, (size_t)1 << 30);
	fprintf(stderr, "%s: copy %.3f TB/s, HGMMA in SASS: %d\n", prop.name, bw, hgmma);
	Result *r = (Result *)calloc((size_t)n_cases, sizeof(Result));
	int nr = 0;
	for (int i = 0; i < n_cases; i++) {
		if (o.filter != NULL && strstr(cases[i].label, o.filter) == NULL)
			continue;
		run_case(cases[i], lt, bw, o, table, s, &r[nr]);
		fprintf(stderr, "%-58s %-5s ours %10.2f us  cuBLAS %10.2f us  %s\n", cases[i].label,
		        tk_dtype_name(cases[i].dt), r[nr].ours_us, r[nr].cublas_us,
		        r[nr].ok ? (r[nr].mismatch ? "MISMATCH" : "ok") : r[nr].error);
		nr++;
	}
	print_md(stdout, r, nr, bw, hgmma, prop.name);
	if (o.md != NULL) {
		FILE *f = fopen(o.md, "w");
		if (f == NULL) {
			perror(o.md);
			return 1;
		}
		print_md(f, r, nr, bw, hgmma, prop.name);
		fclose(f);
	}
	if (o.json != NULL && write_json(o.json, r, nr, bw, hgmma, prop.name) != 0)
		return 1;
	int mismatches = 0;
	for (int i = 0; i < nr; i++)
		mismatches += r[i].ok && r[i].mismatch;
	free(r);
	tuning_free(table);
	cublasLtDestroy(lt);
	cudaStreamDestroy(s);
	return mismatches ? 3 : 0;
}
