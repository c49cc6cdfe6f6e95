/*
 * gemm_simt.cu - the f32 GEMM family: c = alpha * a op(b) (+ bias)
 * (+ residual), every product and sum in f32 on the CUDA cores (no tensor
 * cores, no reduced-precision inputs), any shape, either layout of b.
 *
 * A CTA of 256 threads computes a 128 x 128 tile of c; each thread an 8 x 8
 * block of it, rows {4 ty .. 4 ty + 3, 64 + 4 ty ..} and the same for
 * columns with tx (16 x 16 threads), so that every shared-memory read is a
 * 16-byte vector that the threads of a warp either share or take from
 * consecutive addresses: 4 vector loads feed 64 fused multiply-adds, and
 * the next k's 4 are loaded while those run. K advances 16 at a time
 * through a ring of shared-memory slots (a and b transposed to [k][m] and
 * [k][n]) filled by 4-byte asynchronous copies, stages - 1 steps ahead;
 * past M, N and K the copies write zeros, so any shape and no alignment
 * work. Two builds: s4 (two CTAs an SM, 128 registers a thread) and s6
 * (one CTA an SM, deeper ring, more registers). A third, s2, for operands
 * in whole 16-byte vectors, brings each step through registers with
 * 16-byte loads into two slots, with far fewer instructions a step. And
 * for M <= 8 against an [N, K] b, a warp a pair of b's rows (m8 n2 k128
 * s1): a weight-reading product at the weights' bandwidth.
 *
 * Split-K (split > 1) when the tiles alone leave SMs idle (a 128-row
 * product has N / 128 tiles): each of a tile's split CTAs takes a range of
 * K, writes its partial tile to the workspace and counts in on the tile's
 * counter; the last to arrive sums the partials in K order (the same bits
 * whichever came last) and runs the epilogue. Workspace: 256-byte-aligned
 * counters (one u32 per tile), then split 64 KiB partial tiles per tile.
 */
#include <atomic>
#include <string.h>

#include "cuda_common.cuh"
#include "gemm_common.cuh"
#include "gemm_kinds.h"
#include "sm90.cuh"

namespace
{

constexpr int TM = 128, TN = 128, TK = 16;
constexpr int THREADS = 256;
constexpr int LDS = TM + 4; /* row pitch of the staged tiles, floats */
constexpr int MAX_SPLIT = 16;
constexpr int PART_FLOATS = TM * TN;
constexpr int SLOT_BYTES = 2 * TK * LDS * 4; /* a then b, [TK][LDS] each */

/*
 * Three builds, told apart by their ring depth: s4 runs two CTAs an SM at
 * 128 registers a thread; s6 one CTA an SM with six slots and as many
 * registers as the compiler wants (149). On an H200, s4 measured 15%
 * faster on 128x6144x4096 (docs/kernel-notes.md); the tuner times both.
 * s2 (two slots filled through registers, two CTAs an SM) takes only
 * operands in whole 16-byte vectors (vec_ok).
 */
constexpr bool build_ok(int stages)
{
	return stages == 2 || stages == 4 || stages == 6;
}

constexpr int blocks_of(int stages)
{
	return stages == 6 ? 1 : 2;
}

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

/* 4 bytes global -> shared; zeros (nothing read) when !valid. */
__device__ __forceinline__ void cp_async4(uint32_t dst, const float *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src),
	             "r"(valid ? 4 : 0)
	             : "memory");
}

/*
 * Stage k step kt into slot (as, bs: [TK][LDS] each, as shared-window
 * addresses): 8 elements of a and 8 of b per thread, walking each operand
 * along its contiguous dim so that a warp's loads coalesce. Past M, N or K
 * the copies write zeros and read nothing (the source named is then a
 * valid address of the matrix).
 */
__device__ __forceinline__ void issue_step(const SimtArgs &g, const float *a, const float *b,
                                           int m0, int n0, int kt, uint32_t as, uint32_t bs)
{
	const int tid = threadIdx.x;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		int e = tid + THREADS * i;
		int r = e >> 4, kk = e & 15;
		int gm = m0 + r, gk = kt * TK + kk;
		bool ok = gm < g.m && gk < g.k;
		cp_async4(as + (kk * LDS + r) * 4, ok ? a + (long long)gm * g.lda + gk : a, ok);
		if (g.trans_b) {
			int gn = n0 + r;
			ok = gn < g.n && gk < g.k;
			cp_async4(bs + (kk * LDS + r) * 4, ok ? b + (long long)gn * g.ldb + gk : b,
			          ok);
		} else {
			int bk = kt * TK + (e >> 7), bn = e & 127, gn = n0 + bn;
			ok = gn < g.n && bk < g.k;
			cp_async4(bs + ((e >> 7) * LDS + bn) * 4,
			          ok ? b + (long long)bk * g.ldb + gn : b, ok);
		}
	}
}

/* Row (or column) of c that accumulator index i of thread coordinate t covers. */
__device__ __forceinline__ int at8(int t, int i)
{
	return (i < 4 ? 4 * t : 64 + 4 * t - 4) + i;
}

/* Zero a thread's 8 x 8 accumulators. */
__device__ __forceinline__ void clear_acc(float (&acc)[8][8])
{
#pragma unroll
	for (int i = 0; i < 8; i++) {
#pragma unroll
		for (int j = 0; j < 8; j++)
			acc[i][j] = 0.0f;
	}
}

/*
 * The products of one staged K step (as, bs: [TK][LDS] each): per k, this
 * thread's 8 rows of a and 8 columns of b as two 16-byte vectors each, the
 * next k's loaded while the 64 fused multiply-adds of this one run.
 */
__device__ __forceinline__ void step_products(const float *as, const float *bs, float (&acc)[8][8],
                                              int tx, int ty)
{
	float4 fa[2][2], fb[2][2]; /* this k's fragments and the next's */
	fa[0][0] = *reinterpret_cast<const float4 *>(as + 4 * ty);
	fa[0][1] = *reinterpret_cast<const float4 *>(as + 64 + 4 * ty);
	fb[0][0] = *reinterpret_cast<const float4 *>(bs + 4 * tx);
	fb[0][1] = *reinterpret_cast<const float4 *>(bs + 64 + 4 * tx);
#pragma unroll
	for (int kk = 0; kk < TK; kk++) {
		const int cur = kk & 1;
		if (kk + 1 < TK) {
			const float *an = as + (kk + 1) * LDS, *bn = bs + (kk + 1) * LDS;
			fa[cur ^ 1][0] = *reinterpret_cast<const float4 *>(an + 4 * ty);
			fa[cur ^ 1][1] = *reinterpret_cast<const float4 *>(an + 64 + 4 * ty);
			fb[cur ^ 1][0] = *reinterpret_cast<const float4 *>(bn + 4 * tx);
			fb[cur ^ 1][1] = *reinterpret_cast<const float4 *>(bn + 64 + 4 * tx);
		}
		const float av[8] = { fa[cur][0].x, fa[cur][0].y, fa[cur][0].z, fa[cur][0].w,
			              fa[cur][1].x, fa[cur][1].y, fa[cur][1].z, fa[cur][1].w };
		const float bv[8] = { fb[cur][0].x, fb[cur][0].y, fb[cur][0].z, fb[cur][0].w,
			              fb[cur][1].x, fb[cur][1].y, fb[cur][1].z, fb[cur][1].w };
#pragma unroll
		for (int i = 0; i < 8; i++) {
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
		}
	}
}

/*
 * After the main loop: with a split, publish this K range's partial tile
 * and, in the last of the tile's CTAs to finish, sum them all; then the
 * epilogue (alpha, bias, residual) into c. last: a shared word of the CTA.
 */
__device__ __forceinline__ void finish_tile(const SimtArgs &g, float (&acc)[8][8], unsigned *last,
                                            int tid, int tx, int ty, int bz, int sp, int m0, int n0)
{
	if (g.split > 1) {
		/* Publish this K range's partial tile; the last of the tile's CTAs
		 * sums them all in K order. */
		const long long tile =
		        ((long long)bz * g.tiles_m + blockIdx.y) * g.tiles_n + blockIdx.x;
		float4 *mine =
		        reinterpret_cast<float4 *>(g.part + (tile * g.split + sp) * PART_FLOATS);
#pragma unroll
		for (int i = 0; i < 8; i++) {
#pragma unroll
			for (int q = 0; q < 2; q++)
				__stcg(mine + (i * 2 + q) * THREADS + tid,
				       make_float4(acc[i][4 * q], acc[i][4 * q + 1],
				                   acc[i][4 * q + 2], acc[i][4 * q + 3]));
		}
		__threadfence();
		__syncthreads();
		if (tid == 0)
			*last = atomicAdd(g.counts + tile, 1u) == (unsigned)g.split - 1;
		__syncthreads();
		if (!*last)
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

template <int STAGES>
__global__ void __launch_bounds__(THREADS, blocks_of(STAGES)) gemm_simt_kernel(SimtArgs g)
{
	extern __shared__ __align__(16) float smem[]; /* STAGES slots of a, then b */
	__shared__ unsigned last;
	const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	const int bz = (int)blockIdx.z / g.split, sp = (int)blockIdx.z - bz * g.split;
	const int m0 = (int)blockIdx.y * TM, n0 = (int)blockIdx.x * TN;
	const float *a = g.a + bz * g.sa, *b = g.b + bz * g.sb;
	const int steps = (g.k + TK - 1) / TK;
	const int kt0 = sp * g.per, n = min(steps, kt0 + g.per) - kt0;
	const uint32_t base = tk_sm90::smem_addr(smem);
	float acc[8][8];

	clear_acc(acc);
	/* A ring of STAGES slots: STAGES - 1 steps in flight while one is
	 * multiplied. */
#pragma unroll
	for (int st = 0; st < STAGES - 1; st++) {
		if (st < n)
			issue_step(g, a, b, m0, n0, kt0 + st, base + st * SLOT_BYTES,
			           base + st * SLOT_BYTES + SLOT_BYTES / 2);
		tk_sm90::cp_async_commit();
	}
	for (int t = 0; t < n; t++) {
		tk_sm90::cp_async_wait<STAGES - 2>();
		__syncthreads(); /* step t is in; the slot of step t - 1 is free */
		int nt = t + STAGES - 1, ns = nt % STAGES;
		if (nt < n)
			issue_step(g, a, b, m0, n0, kt0 + nt, base + ns * SLOT_BYTES,
			           base + ns * SLOT_BYTES + SLOT_BYTES / 2);
		tk_sm90::cp_async_commit();
		const float *as = smem + (t % STAGES) * (SLOT_BYTES / 4);
		step_products(as, as + TK * LDS, acc, tx, ty);
	}
	tk_sm90::cp_async_wait<0>();

	finish_tile(g, acc, &last, tid, tx, ty, bz, sp, m0, n0);
}

/*
 * The aligned build (s2): a, b and their pitches in whole 16-byte vectors
 * (vec_ok). Each thread brings 2 vectors of a and 2 of b a step through
 * registers with 16-byte loads, issued before the products of the step
 * before and stored to the other of two shared slots after them (a, and a
 * [N, K] b, transposed into [k][m] and [k][n] by four 4-byte stores each):
 * one barrier a step, and a handful of instructions a step for what the
 * 4-byte copies spent on addressing (docs/kernel-notes.md, "simt (f32 on the CUDA cores)").
 * TB: b is [N, K]. Past M, N or K the vectors are zeros (K, and for an
 * [K, N] b also N, come in whole vectors).
 */
template <int TB> __global__ void __launch_bounds__(THREADS, 2) gemm_simt_vec_kernel(SimtArgs g)
{
	__shared__ __align__(16) float sa[2][TK][LDS];
	__shared__ __align__(16) float sb[2][TK][LDS];
	__shared__ unsigned last;
	const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	const int bz = (int)blockIdx.z / g.split, sp = (int)blockIdx.z - bz * g.split;
	const int m0 = (int)blockIdx.y * TM, n0 = (int)blockIdx.x * TN;
	const int steps = (g.k + TK - 1) / TK;
	const int kt0 = sp * g.per, n = min(steps, kt0 + g.per) - kt0;
	/* Vector i (0, 1) of a thread: row r of the tile, k offset 4 q; of an
	 * [N, K] b the same; of a [K, N] b k row kr, columns 4 c. */
	const int q = tid & 3, c4 = (tid & 31) * 4;
	const float *pa[2], *pb[2];
	bool ra[2], rb[2];
#pragma unroll
	for (int i = 0; i < 2; i++) {
		int r = (tid >> 2) + 64 * i, gm = m0 + r;
		ra[i] = gm < g.m;
		pa[i] = g.a + bz * g.sa + (long long)(ra[i] ? gm : 0) * g.lda +
		        (long long)kt0 * TK + 4 * q;
		if (TB) {
			int gn = n0 + r;
			rb[i] = gn < g.n;
			pb[i] = g.b + bz * g.sb + (long long)(rb[i] ? gn : 0) * g.ldb +
			        (long long)kt0 * TK + 4 * q;
		} else {
			int kr = (tid >> 5) + 8 * i, gn = n0 + c4;
			rb[i] = gn < g.n;
			pb[i] = g.b + bz * g.sb + ((long long)kt0 * TK + kr) * g.ldb +
			        (rb[i] ? gn : 0);
		}
	}
	float4 va[2], vb[2];
	const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	/* The vectors of K step kt (absolute); the pointers move on a step. */
	auto load = [&](int kt) {
		int k0 = kt * TK;
#pragma unroll
		for (int i = 0; i < 2; i++) {
			bool ka = k0 + 4 * q < g.k;
			va[i] = ra[i] && ka ? __ldg(reinterpret_cast<const float4 *>(pa[i])) : zero;
			pa[i] += TK;
			if (TB) {
				vb[i] = rb[i] && ka ? __ldg(reinterpret_cast<const float4 *>(pb[i]))
				                    : zero;
				pb[i] += TK;
			} else {
				bool kb = k0 + (tid >> 5) + 8 * i < g.k;
				vb[i] = rb[i] && kb ? __ldg(reinterpret_cast<const float4 *>(pb[i]))
				                    : zero;
				pb[i] += (long long)TK * g.ldb;
			}
		}
	};
	auto store = [&](int slot) {
#pragma unroll
		for (int i = 0; i < 2; i++) {
			int r = (tid >> 2) + 64 * i;
			sa[slot][4 * q][r] = va[i].x;
			sa[slot][4 * q + 1][r] = va[i].y;
			sa[slot][4 * q + 2][r] = va[i].z;
			sa[slot][4 * q + 3][r] = va[i].w;
			if (TB) {
				sb[slot][4 * q][r] = vb[i].x;
				sb[slot][4 * q + 1][r] = vb[i].y;
				sb[slot][4 * q + 2][r] = vb[i].z;
				sb[slot][4 * q + 3][r] = vb[i].w;
			} else {
				*reinterpret_cast<float4 *>(&sb[slot][(tid >> 5) + 8 * i][c4]) =
				        vb[i];
			}
		}
	};
	float acc[8][8];

	clear_acc(acc);
	if (n > 0) {
		load(kt0);
		store(0);
	}
	__syncthreads();
	for (int t = 0; t < n; t++) {
		if (t + 1 < n)
			load(kt0 + t + 1);
		step_products(&sa[t & 1][0][0], &sb[t & 1][0][0], acc, tx, ty);
		/* the other slot was last read before the barrier of step t - 1 */
		if (t + 1 < n)
			store((t + 1) & 1);
		__syncthreads();
	}
	finish_tile(g, acc, &last, tid, tx, ty, bz, sp, m0, n0);
}

/*
 * Few rows of a against an [N, K] b (M <= GV_M, operands in whole vectors):
 * a product of weight-reading size, which the 128 x 128 tiles would spend
 * 127 rows of work a row on. Each warp takes GV_ROWS rows of b whole along
 * K, its lanes 16-byte vectors 512 bytes apart, GV_U steps of each row in
 * flight; the rows of a come from L1 (every warp of an SM reads the same).
 * The lanes' sums meet by shuffles; lane r GV_M + i stores row i of a
 * against row r of b. A row of b past N repeats the last (never stored).
 */
constexpr int GV_M = 8, GV_ROWS = 2, GV_WARPS = 8, GV_U = 4;

__global__ void __launch_bounds__(GV_WARPS * 32) gemm_simt_gemv_kernel(SimtArgs g)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, bz = (int)blockIdx.z;
	const int n0 = ((int)blockIdx.x * GV_WARPS + warp) * GV_ROWS;
	if (n0 >= g.n)
		return;
	const float *a = g.a + bz * g.sa;
	const float *brow[GV_ROWS];
	float acc[GV_ROWS][GV_M];
#pragma unroll
	for (int r = 0; r < GV_ROWS; r++) {
		brow[r] = g.b + bz * g.sb + (long long)min(n0 + r, g.n - 1) * g.ldb;
#pragma unroll
		for (int i = 0; i < GV_M; i++)
			acc[r][i] = 0.0f;
	}
	for (int k0 = lane * 4; k0 < g.k; k0 += 128 * GV_U) {
		float4 bv[GV_U][GV_ROWS];
#pragma unroll
		for (int u = 0; u < GV_U; u++) {
			const int k = k0 + 128 * u;
#pragma unroll
			for (int r = 0; r < GV_ROWS; r++)
				bv[u][r] = k < g.k ? __ldg(reinterpret_cast<const float4 *>(
				                             brow[r] + k))
				                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
		}
#pragma unroll
		for (int u = 0; u < GV_U; u++) {
			const int k = k0 + 128 * u;
#pragma unroll
			for (int i = 0; i < GV_M; i++) {
				if (i >= g.m || k >= g.k)
					continue;
				const float4 av = __ldg(reinterpret_cast<const float4 *>(
				        a + (long long)i * g.lda + k));
#pragma unroll
				for (int r = 0; r < GV_ROWS; r++) {
					float v = acc[r][i];
					v = fmaf(av.x, bv[u][r].x, v);
					v = fmaf(av.y, bv[u][r].y, v);
					v = fmaf(av.z, bv[u][r].z, v);
					acc[r][i] = fmaf(av.w, bv[u][r].w, v);
				}
			}
		}
	}
	float *c = g.c + bz * g.sc;
	const float *res = g.res != nullptr ? g.res + bz * g.sr : nullptr;
#pragma unroll
	for (int r = 0; r < GV_ROWS; r++) {
#pragma unroll
		for (int i = 0; i < GV_M; i++) {
			float v = acc[r][i];
#pragma unroll
			for (int off = 16; off > 0; off >>= 1)
				v += __shfl_xor_sync(0xffffffffu, v, off);
			const int n = n0 + r;
			if (lane != r * GV_M + i || i >= g.m || n >= g.n)
				continue;
			v = g.alpha * v;
			if (g.bias != nullptr)
				v += g.bias[n];
			if (res != nullptr)
				v += res[(long long)i * g.ldr + n];
			c[(long long)i * g.ldc + n] = v;
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

/*
 * Whether the s2 build takes p: a and b 16-byte aligned, their pitches and
 * batch strides whole vectors, K whole vectors, and for a [K, N] b also N
 * (a vector never straddles the edge of a matrix).
 */
bool vec_ok(const tk_gemm_problem *p)
{
	const uintptr_t al = (uintptr_t)p->a | (uintptr_t)p->b;
	if ((al & 15) != 0 || p->lda % 4 != 0 || p->ldb % 4 != 0 || p->k % 4 != 0)
		return false;
	if (!p->trans_b && p->n % 4 != 0)
		return false;
	return p->batch <= 1 || (p->stride_a % 4 == 0 && p->stride_b % 4 == 0);
}

/* The few-rows build: m8 n2 k128 s1, an [N, K] b, M <= 8, whole vectors. */
tk_gemm_config gemv_config(void)
{
	tk_gemm_config c = {};
	c.kind = TK_GEMM_SIMT;
	c.tile_m = GV_M;
	c.tile_n = GV_ROWS;
	c.tile_k = 128;
	c.stages = 1;
	c.split_k = 1;
	return c;
}

bool is_gemv(const tk_gemm_config *c)
{
	return c->tile_m == GV_M && c->tile_n == GV_ROWS && c->tile_k == 128 && c->stages == 1;
}

bool gemv_ok(const tk_gemm_problem *p)
{
	return p->trans_b && p->m <= GV_M && vec_ok(p);
}

bool config_ok(const tk_gemm_problem *p, const tk_gemm_config *c)
{
	if (c->kind == TK_GEMM_SIMT && is_gemv(c))
		return simt_serves(p) && gemv_ok(p) && c->cluster == 0 && c->split_k == 1;
	if (c->kind != TK_GEMM_SIMT || !simt_serves(p) || c->tile_m != TM || c->tile_n != TN ||
	    c->tile_k != TK || !build_ok(c->stages) || c->cluster != 0 || c->split_k < 1 ||
	    c->split_k > MAX_SPLIT || per_of(p, c->split_k) == 0 || p->batch * c->split_k > 65535 ||
	    (c->stages == 2 && !vec_ok(p)))
		return false;
	return c->split_k == 1 || (p->workspace != nullptr && ((uintptr_t)p->workspace & 15) == 0 &&
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

tk_gemm_config config_of(int split, int stages)
{
	tk_gemm_config c = {};
	c.kind = TK_GEMM_SIMT;
	c.tile_m = TM;
	c.tile_n = TN;
	c.tile_k = TK;
	c.stages = stages;
	c.split_k = split;
	return c;
}

} /* namespace */

/*
 * The few-rows build when it takes p (first: M <= 8 reads the weights once
 * at their bandwidth), then the three splits the model likes best and no
 * split, cheapest first, each in every tiled build that takes p (s2 first,
 * then s4 and s6).
 */
extern "C" int tk_gemm_simt_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (!simt_serves(p))
		return 0;
	int sms = tkc::sm_count();
	tk_gemm_config list[MAX_SPLIT];
	double cost[MAX_SPLIT];
	int n = 0;
	for (int s = 1; s <= MAX_SPLIT; s++) {
		list[n] = config_of(s, 4);
		if (!config_ok(p, &list[n]))
			continue;
		cost[n] = split_cost(p, s, sms);
		n++;
	}
	tk_gemm_common::sort_by_cost(list, cost, n);
	/* The best three, then no split if it is not among them. */
	int pick[4], np = 0;
	for (int i = 0; i < n && np < 3; i++)
		pick[np++] = list[i].split_k;
	bool one = false;
	for (int i = 0; i < np; i++)
		one = one || pick[i] == 1;
	if (!one && n > 0)
		pick[np++] = 1;
	int w = 0;
	const bool vec = vec_ok(p);
	if (gemv_ok(p)) {
		if (w < max)
			out[w] = gemv_config();
		w++;
	}
	for (int i = 0; i < np; i++) {
		for (int stages = vec ? 2 : 4; stages <= 6; stages += 2, w++) {
			if (w < max)
				out[w] = config_of(pick[i], stages);
		}
	}
	return w;
}

template <int STAGES> tk_status launch_build(const SimtArgs &g, dim3 grid, cudaStream_t s)
{
	constexpr int bytes = STAGES * SLOT_BYTES;
	/* the ring is more than the default 48 KiB */
	static std::atomic<uint64_t> raised{ 0 };
	if (tkc::allow_dynamic_smem(reinterpret_cast<const void *>(gemm_simt_kernel<STAGES>), bytes,
	                            raised) != cudaSuccess)
		return TK_ERR_LAUNCH;
	gemm_simt_kernel<STAGES><<<grid, THREADS, bytes, s>>>(g);
	return tkc::launch_status();
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
		if (tkc::clear_words(ws, (size_t)tiles_of(p), s) != cudaSuccess)
			return TK_ERR_LAUNCH;
	}
	if (is_gemv(cfg)) {
		const int rows = GV_ROWS * GV_WARPS;
		dim3 gg((unsigned)((p->n + rows - 1) / rows), 1, (unsigned)p->batch);
		gemm_simt_gemv_kernel<<<gg, GV_WARPS * 32, 0, s>>>(g);
		return tkc::launch_status();
	}
	dim3 grid((unsigned)g.tiles_n, (unsigned)g.tiles_m, (unsigned)(p->batch * g.split));
	if (cfg->stages == 2) {
		if (g.trans_b)
			gemm_simt_vec_kernel<1><<<grid, THREADS, 0, s>>>(g);
		else
			gemm_simt_vec_kernel<0><<<grid, THREADS, 0, s>>>(g);
		return tkc::launch_status();
	}
	return cfg->stages == 4 ? launch_build<4>(g, grid, s) : launch_build<6>(g, grid, s);
}
