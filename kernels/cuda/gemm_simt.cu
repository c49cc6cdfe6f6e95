/*
 * gemm_simt.cu - the f32 GEMM family: c = alpha * a op(b) (+ bias)
 * (+ residual), every product and sum in f32 on the CUDA cores (no tensor
 * cores, no reduced-precision inputs), any shape, either layout of b.
 *
 * A CTA of 256 threads computes a 128 x 128 tile of c; each thread an 8 x 8
 * block of it, rows {4 ty .. 4 ty + 3, 64 + 4 ty ..} and the same for
 * columns with tx (16 x 16 threads), so that every shared-memory read is a
 * 16-byte vector that the threads of a warp either share or take from
 * consecutive addresses: 4 vector loads feed 64 fused multiply-adds. K
 * advances 16 at a time through two shared-memory buffers (transposed to
 * [k][m] and [k][n]); the next step's elements are loaded into registers
 * while the current one is multiplied, with bounds checks (zeros past M, N
 * and K), so no alignment is needed.
 *
 * Split-K (split > 1) when the tiles alone leave SMs idle (a 128-row
 * product has N / 128 tiles): each of a tile's split CTAs takes a range of
 * K, writes its partial tile to the workspace and counts in on the tile's
 * counter; the last to arrive sums the partials in K order (the same bits
 * whichever came last) and runs the epilogue. Workspace: 256-byte-aligned
 * counters (one u32 per tile), then split 64 KiB partial tiles per tile.
 */
#include <string.h>

#include "cuda_common.cuh"
#include "gemm_kinds.h"

namespace
{

constexpr int TM = 128, TN = 128, TK = 16;
constexpr int THREADS = 256;
constexpr int LDS = TM + 4; /* row pitch of the staged tiles, floats */
constexpr int MAX_SPLIT = 16;
constexpr int PART_FLOATS = TM * TN;

struct SimtArgs {
	const float *a, *b, *bias, *res;
	float *c;
	long long lda, ldb, ldc, ldr;
	long long sa, sb, sc, sr; /* batch strides; 0: shared */
	int m, n, k;
	int trans_b;
	float alpha;
	int split, per; /* CTAs along K, k steps (of TK) per CTA */
	int tiles_m, tiles_n;
	unsigned *counts;
	float *part;
};

/* The 8 a and 8 b elements this thread stages for k step kt. */
__device__ __forceinline__ void load_step(const SimtArgs &g, const float *a, const float *b, int m0,
                                          int n0, int kt, float (&ra)[8], float (&rb)[8])
{
	const int tid = threadIdx.x;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int e = tid + THREADS * i;
		int r = e >> 4, kk = e & 15;
		int gm = m0 + r, gk = kt * TK + kk;
		ra[i] = gm < g.m && gk < g.k ? __ldg(a + (long long)gm * g.lda + gk) : 0.0f;
		if (g.trans_b) {
			int gn = n0 + r;
			rb[i] = gn < g.n && gk < g.k ? __ldg(b + (long long)gn * g.ldb + gk) : 0.0f;
		} else {
			int bk = kt * TK + (e >> 7), gn = n0 + (e & 127);
			rb[i] = gn < g.n && bk < g.k ? __ldg(b + (long long)bk * g.ldb + gn) : 0.0f;
		}
	}
}

__device__ __forceinline__ void store_step(const SimtArgs &g, float (*as)[LDS], float (*bs)[LDS],
                                           const float (&ra)[8], const float (&rb)[8])
{
	const int tid = threadIdx.x;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int e = tid + THREADS * i;
		as[e & 15][e >> 4] = ra[i];
		if (g.trans_b)
			bs[e & 15][e >> 4] = rb[i];
		else
			bs[e >> 7][e & 127] = rb[i];
	}
}

/* Row (or column) of c that accumulator index i of thread coordinate t covers. */
__device__ __forceinline__ int at8(int t, int i)
{
	return (i < 4 ? 4 * t : 64 + 4 * t - 4) + i;
}

__global__ void __launch_bounds__(THREADS, 2) gemm_simt_kernel(SimtArgs g)
{
	__shared__ __align__(16) float as[2][TK][LDS];
	__shared__ __align__(16) float bs[2][TK][LDS];
	__shared__ unsigned last;
	const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	const int bz = (int)blockIdx.z / g.split, sp = (int)blockIdx.z - bz * g.split;
	const int m0 = (int)blockIdx.y * TM, n0 = (int)blockIdx.x * TN;
	const float *a = g.a + bz * g.sa, *b = g.b + bz * g.sb;
	const int steps = (g.k + TK - 1) / TK;
	const int kt0 = sp * g.per, kt1 = min(steps, kt0 + g.per);
	float acc[8][8];
	float ra[8], rb[8];

#pragma unroll
	for (int i = 0; i < 8; i++) {
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[i][j] = 0.0f;
	}
	if (kt0 < kt1) {
		load_step(g, a, b, m0, n0, kt0, ra, rb);
		store_step(g, as[0], bs[0], ra, rb);
	}
	__syncthreads();
	for (int kt = kt0; kt < kt1; kt++) {
		const int buf = (kt - kt0) & 1;
		const bool more = kt + 1 < kt1;
		if (more)
			load_step(g, a, b, m0, n0, kt + 1, ra, rb);
#pragma unroll
		for (int kk = 0; kk < TK; kk++) {
			float4 a0 = *reinterpret_cast<const float4 *>(&as[buf][kk][4 * ty]);
			float4 a1 = *reinterpret_cast<const float4 *>(&as[buf][kk][64 + 4 * ty]);
			float4 b0 = *reinterpret_cast<const float4 *>(&bs[buf][kk][4 * tx]);
			float4 b1 = *reinterpret_cast<const float4 *>(&bs[buf][kk][64 + 4 * tx]);
			float av[8] = { a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w };
			float bv[8] = { b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w };
#pragma unroll
			for (int i = 0; i < 8; i++) {
#pragma unroll
				for (int j = 0; j < 8; j++)
					acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
			}
		}
		if (more)
			store_step(g, as[buf ^ 1], bs[buf ^ 1], ra, rb);
		__syncthreads();
	}

	if (g.split > 1) {
		/* Publish this K range's partial tile; the last of the tile's CTAs
		 * sums them all in K order. */
		const long long tile =
		        ((long long)bz * g.tiles_m + blockIdx.y) * g.tiles_n + blockIdx.x;
		float4 *mine = reinterpret_cast<float4 *>(g.part + (tile * g.split + sp) * PART_FLOATS);
#pragma unroll
		for (int i = 0; i < 8; i++) {
#pragma unroll
			for (int q = 0; q < 2; q++)
				__stcg(mine + (i * 2 + q) * THREADS + tid,
				       make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2],
				                   acc[i][4 * q + 3]));
		}
		__threadfence();
		__syncthreads();
		if (tid == 0)
			last = atomicAdd(g.counts + tile, 1u) == (unsigned)g.split - 1;
		__syncthreads();
		if (!last)
			return;
		__threadfence(); /* the other partials are visible from here on */
		const float4 *all =
		        reinterpret_cast<const float4 *>(g.part + tile * g.split * PART_FLOATS);
#pragma unroll
		for (int i = 0; i < 8; i++) {
#pragma unroll
			for (int q = 0; q < 2; q++) {
				float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
				for (int o = 0; o < g.split; o++) {
					float4 v = __ldcg(all + (size_t)o * (PART_FLOATS / 4) +
					                  (i * 2 + q) * THREADS + tid);
					s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
				}
				acc[i][4 * q] = s.x, acc[i][4 * q + 1] = s.y;
				acc[i][4 * q + 2] = s.z, acc[i][4 * q + 3] = s.w;
			}
		}
	}

	float *c = g.c + bz * g.sc;
	const float *res = g.res != nullptr ? g.res + bz * g.sr : nullptr;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int row = m0 + at8(ty, i);
		if (row >= g.m)
			continue;
#pragma unroll
		for (int j = 0; j < 8; j++) {
			int col = n0 + at8(tx, j);
			if (col >= g.n)
				continue;
			float v = g.alpha * acc[i][j];
			if (g.bias != nullptr)
				v += g.bias[col];
			if (res != nullptr)
				v += res[(long long)row * g.ldr + col];
			c[(long long)row * g.ldc + col] = v;
		}
	}
}

/* ---- host side ------------------------------------------------------------ */

bool simt_serves(const tk_gemm_problem *p)
{
	const int64_t lim = INT32_MAX - 2 * TM;
	if (p == nullptr || p->dtype != TK_F32)
		return false;
	if (p->batch < 1 || p->batch > 65535 || p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim ||
	    p->n > lim || p->k > lim)
		return false;
	if (p->a == nullptr || p->b == nullptr || p->c == nullptr)
		return false;
	if (p->lda < p->k || p->ldb < (p->trans_b ? p->k : p->n) || p->ldc < p->n ||
	    (p->residual != nullptr && p->ldr < p->n))
		return false;
	if (p->batch > 1 && (p->stride_a < 0 || p->stride_b < 0 || p->stride_c <= 0))
		return false;
	return (p->m + TM - 1) / TM <= 65535;
}

int64_t tiles_of(const tk_gemm_problem *p)
{
	return (p->m + TM - 1) / TM * ((p->n + TN - 1) / TN) * p->batch;
}

/* k steps per CTA for a split; 0 when some CTA of it would get none or
 * fewer than 8 steps (K ranges under 128 do not pay for the sum). */
int per_of(const tk_gemm_problem *p, int split)
{
	int64_t steps = (p->k + TK - 1) / TK, per = (steps + split - 1) / split;
	if (split > 1 && (per < 8 || (steps + per - 1) / per != split))
		return 0;
	return (int)per;
}

size_t counts_bytes(const tk_gemm_problem *p)
{
	return ((size_t)tiles_of(p) * 4 + 255) / 256 * 256;
}

size_t workspace_for(const tk_gemm_problem *p, int split)
{
	if (split <= 1)
		return 0;
	return counts_bytes(p) + (size_t)tiles_of(p) * split * PART_FLOATS * 4;
}

bool config_ok(const tk_gemm_problem *p, const tk_gemm_config *c)
{
	if (c->kind != TK_GEMM_SIMT || !simt_serves(p) || c->tile_m != TM || c->tile_n != TN ||
	    c->tile_k != TK || c->stages != 2 || c->cluster != 0 || c->split_k < 1 ||
	    c->split_k > MAX_SPLIT || per_of(p, c->split_k) == 0 || p->batch * c->split_k > 65535)
		return false;
	return c->split_k == 1 || (p->workspace != nullptr &&
	                           ((uintptr_t)p->workspace & 15) == 0 &&
	                           workspace_for(p, c->split_k) <= p->workspace_bytes);
}

/*
 * The relative time of a split: the CTAs an SM runs in all, each 1 / split
 * of a tile's work (the FMA units are what they share), plus a little for
 * the partial sums.
 */
double split_cost(const tk_gemm_problem *p, int split, int sms)
{
	int64_t ctas = tiles_of(p) * split;
	int64_t per_sm = (ctas + sms - 1) / sms;
	return (double)per_sm / split * (split > 1 ? 1.03 : 1.0);
}

tk_gemm_config config_of(int split)
{
	tk_gemm_config c = {};
	c.kind = TK_GEMM_SIMT;
	c.tile_m = TM;
	c.tile_n = TN;
	c.tile_k = TK;
	c.stages = 2;
	c.split_k = split;
	return c;
}

} /* namespace */

/* No split, and the three splits the model likes best, cheapest first. */
extern "C" int tk_gemm_simt_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (!simt_serves(p))
		return 0;
	int sms = tkc::sm_count();
	int split[MAX_SPLIT];
	double cost[MAX_SPLIT];
	int n = 0;
	for (int s = 1; s <= MAX_SPLIT; s++) {
		tk_gemm_config c = config_of(s);
		if (!config_ok(p, &c))
			continue;
		split[n] = s;
		cost[n] = split_cost(p, s, sms);
		for (int j = n; j > 0 && cost[j] < cost[j - 1] * 0.999; j--) {
			int ts = split[j];
			double tc = cost[j];
			split[j] = split[j - 1];
			cost[j] = cost[j - 1];
			split[j - 1] = ts;
			cost[j - 1] = tc;
		}
		n++;
	}
	int w = 0;
	for (int i = 0; i < n && w < 4; i++) {
		if (i < 3 || split[i] == 1) {
			if (w < max)
				out[w] = config_of(split[i]);
			w++;
		}
	}
	/* No split is always among them. */
	bool one = false;
	for (int i = 0; i < w && i < max; i++)
		one = one || out[i].split_k == 1;
	if (!one && w < 4) {
		if (w < max)
			out[w] = config_of(1);
		w++;
	}
	return w;
}

extern "C" tk_status tk_gemm_simt_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                         void *stream)
{
	if (p == nullptr || cfg == nullptr || !config_ok(p, cfg))
		return TK_ERR_UNSUPPORTED;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	SimtArgs g = {};
	g.a = static_cast<const float *>(p->a);
	g.b = static_cast<const float *>(p->b);
	g.bias = static_cast<const float *>(p->bias);
	g.res = static_cast<const float *>(p->residual);
	g.c = static_cast<float *>(p->c);
	g.lda = p->lda;
	g.ldb = p->ldb;
	g.ldc = p->ldc;
	g.ldr = p->ldr;
	g.sa = p->batch > 1 ? p->stride_a : 0;
	g.sb = p->batch > 1 ? p->stride_b : 0;
	g.sc = p->batch > 1 ? p->stride_c : 0;
	g.sr = p->batch > 1 ? p->stride_r : 0;
	g.m = (int)p->m;
	g.n = (int)p->n;
	g.k = (int)p->k;
	g.trans_b = p->trans_b;
	g.alpha = p->alpha;
	g.split = cfg->split_k;
	g.per = per_of(p, cfg->split_k);
	g.tiles_m = (int)((p->m + TM - 1) / TM);
	g.tiles_n = (int)((p->n + TN - 1) / TN);
	tkc::launch_begin();
	if (g.split > 1) {
		char *ws = static_cast<char *>(p->workspace);
		g.counts = reinterpret_cast<unsigned *>(ws);
		g.part = reinterpret_cast<float *>(ws + counts_bytes(p));
		if (cudaMemsetAsync(ws, 0, (size_t)tiles_of(p) * 4, s) != cudaSuccess)
			return TK_ERR_LAUNCH;
	}
	dim3 grid((unsigned)g.tiles_n, (unsigned)g.tiles_m, (unsigned)(p->batch * g.split));
	gemm_simt_kernel<<<grid, THREADS, 0, s>>>(g);
	return tkc::launch_status();
}
