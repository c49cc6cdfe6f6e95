/*
 * gemm_decode.cu - the decode GEMM family for Hopper (sm_90a): M = 1..128
 * tokens against weights stored [N, K] (trans_b, as nn.Linear keeps them),
 * f16 and bf16 in, f32 accumulation, output rounded once. Its time is what
 * it takes to read the weights once, so everything here serves that
 * stream.
 *
 * The product is computed transposed, c^T = b a^T: BN weight rows are the
 * wgmma's M side (one or two m64 blocks) and the tokens its N side, M
 * rounded up to NT = 8, 16, 32, 64 or 128 (the copy engine fills the rows
 * past M with zeros). Every CTA holds every token, so each weight byte is
 * read from memory exactly once.
 *
 * A CTA is one consumer warpgroup and one producer warp. The producer's
 * first lane streams [BN x 64] weight tiles and [NT x 64] activation tiles
 * into a ring of `stages` shared-memory slots with bulk tensor copies (TMA,
 * 128-byte swizzle), each slot completed on a "full" mbarrier and handed
 * back on an "empty" one; the consumers multiply straight from the slots
 * with wgmma, one slot's products in flight while they wait for the next.
 * Nothing but the one thread touches the weights on their way in, so the
 * SM's issue slots are free and a deep ring (up to 200 KB) keeps enough
 * bytes in flight for the SM's share of the memory bandwidth.
 *
 * Split-K across a cluster: the `split` CTAs of a weight tile form one
 * thread block cluster (split <= 8, the portable size), each walking a
 * contiguous range of K, starting at a different place of it per tile (the
 * sum does not care) so that the CTAs reading at one moment do not all read
 * one column of every row. Each CTA leaves its [NT x BN] f32 partial in its
 * own shared memory; after a cluster barrier, CTA r sums every split-th
 * 8-row group of the tile over its peers' shared memory (distributed shared
 * memory), in rank order so the bits do not depend on timing, and writes c
 * (alpha, bias, residual; residual may alias c: each element is read and
 * written by one thread). A second barrier keeps the partials alive until
 * every peer has read them. No workspace and no second kernel.
 *
 * Split-K through the workspace (cluster 0): clusters must fit within a
 * GPC, so a grid of one large CTA an SM in clusters of 3 or 4 can leave
 * some CTAs for a second wave. Without a cluster each CTA writes its
 * partial tile to the workspace and counts in on the tile's counter; the
 * last to arrive sums the partials in rank order and writes c. Workspace:
 * 256-byte-aligned counters (one u32 per tile and batch), then NT x BN f32
 * per CTA.
 *
 * Launched with programmatic dependent launch (tk_cuda_pdl()), a CTA may
 * start while the kernel before it runs: every thread waits for that
 * kernel first. A grid that leaves half the SMs idle lets the next kernel
 * launch as soon as it starts (tk_gemm_common::early_trigger).
 */
#include <atomic>
#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#include "cuda_common.cuh"
#include "gemm_common.cuh"
#include "gemm_kinds.h"
#include "sm90.cuh"
#include "tma_map.cuh"

namespace
{

using namespace tk_sm90;

constexpr int BK = 64;         /* k per slot: one 128-byte swizzle row */
constexpr int THREADS = 160;   /* one consumer warpgroup, one producer warp */
constexpr int MAX_CLUSTER = 8; /* the portable cluster size */
constexpr int MAX_SPLIT = 16;  /* through the workspace */
constexpr int MAX_STAGES = 16;
constexpr int SMEM_SLACK = 1024; /* the ring is aligned up to the swizzle period */

struct DecodeArgs {
	void *c;
	const void *bias, *res;
	long long ldc, ldr, stride_c, stride_r;
	int m, n;
	int ktiles;               /* k tiles of 64 in K */
	int split;                /* CTAs along K */
	int in_cluster;           /* 1: the split CTAs are a cluster; 0: the workspace */
	int trigger;              /* PDL: let the next kernel launch at the start */
	int k_per;                /* k tiles per CTA (the last may have fewer) */
	int stages;               /* ring slots */
	int a_batched, b_batched; /* 0: one matrix shared by every batch */
	int vec;                  /* c, residual and bias allow 16-byte access */
	float alpha;
	int tiles;        /* weight tiles of one batch */
	unsigned *counts; /* workspace split: a counter per tile and batch */
	float *part;      /* and NT x BN f32 per CTA */
};

/*
 * Shared memory of a CTA: the ring of slots ([BN x 64] weights, then
 * [NT x 64] activations, each a multiple of the 1024-byte swizzle period),
 * which the output tile reuses, then the mbarriers. The tile is
 * [NT][BN + 4] f32: the pad keeps the fragment stores free of bank
 * conflicts.
 */
__host__ __device__ constexpr int slot_bytes(int bn, int nt)
{
	return (bn + nt) * BK * 2;
}

__host__ __device__ constexpr int tile_ld(int bn)
{
	return bn + 4;
}

__host__ __device__ constexpr int ring_region(int bn, int nt, int stages)
{
	return stages * slot_bytes(bn, nt) > nt * tile_ld(bn) * 4 ? stages * slot_bytes(bn, nt)
	                                                          : nt * tile_ld(bn) * 4;
}

template <typename T, int NT>
__device__ __forceinline__ void mma(float (&d)[NT / 2], uint64_t da, uint64_t db)
{
	constexpr bool BF = std::is_same<T, __nv_bfloat16>::value;
	if constexpr (NT == 8) {
		if constexpr (BF)
			wgmma_m64n8k16_bf16<0>(d, da, db);
		else
			wgmma_m64n8k16_f16<0>(d, da, db);
	} else if constexpr (NT == 16) {
		if constexpr (BF)
			wgmma_m64n16k16_bf16<0>(d, da, db);
		else
			wgmma_m64n16k16_f16<0>(d, da, db);
	} else if constexpr (NT == 32) {
		if constexpr (BF)
			wgmma_m64n32k16_bf16<0>(d, da, db);
		else
			wgmma_m64n32k16_f16<0>(d, da, db);
	} else if constexpr (NT == 64) {
		if constexpr (BF)
			wgmma_m64n64k16_bf16<0>(d, da, db);
		else
			wgmma_m64n64k16_f16<0>(d, da, db);
	} else {
		if constexpr (BF)
			wgmma_m64n128k16_bf16<0>(d, da, db);
		else
			wgmma_m64n128k16_f16<0>(d, da, db);
	}
}

template <typename T> struct alignas(16) Vec8 {
	T v[8];
};

/*
 * c[t, n0 .. n0 + 7] = alpha * x + bias + residual, x the sums of token t
 * and those 8 weight rows; columns past N are not written.
 */
template <typename T>
__device__ __forceinline__ void store8(const DecodeArgs &p, float (&x)[8], int bz, int t, int n0)
{
	T *c = static_cast<T *>(p.c) + (size_t)bz * p.stride_c + (size_t)t * p.ldc;
	const T *bias = static_cast<const T *>(p.bias);
	const T *res =
	        p.res ? static_cast<const T *>(p.res) + (size_t)bz * p.stride_r + (size_t)t * p.ldr
	              : nullptr;
#pragma unroll
	for (int e = 0; e < 8; e++)
		x[e] *= p.alpha;
	if (p.vec && n0 + 8 <= p.n) {
		if (bias != nullptr) {
			Vec8<T> bv = *reinterpret_cast<const Vec8<T> *>(bias + n0);
#pragma unroll
			for (int e = 0; e < 8; e++)
				x[e] += tkc::to_f32(bv.v[e]);
		}
		if (res != nullptr) {
			Vec8<T> rv = *reinterpret_cast<const Vec8<T> *>(res + n0);
#pragma unroll
			for (int e = 0; e < 8; e++)
				x[e] += tkc::to_f32(rv.v[e]);
		}
		Vec8<T> out;
#pragma unroll
		for (int e = 0; e < 8; e++)
			out.v[e] = tkc::from_f32<T>(x[e]);
		*reinterpret_cast<Vec8<T> *>(c + n0) = out;
		return;
	}
#pragma unroll
	for (int e = 0; e < 8; e++) {
		if (n0 + e >= p.n)
			break;
		float y = x[e];
		if (bias != nullptr)
			y += tkc::to_f32(bias[n0 + e]);
		if (res != nullptr)
			y += tkc::to_f32(res[n0 + e]);
		c[n0 + e] = tkc::from_f32<T>(y);
	}
}

template <typename T, int BN, int NT>
__global__ void __launch_bounds__(THREADS, 1)
        gemm_decode_kernel(const __grid_constant__ CUtensorMap map_w,
                           const __grid_constant__ CUtensorMap map_x, const DecodeArgs p)
{
	constexpr int W_BYTES = BN * BK * 2, SLOT = slot_bytes(BN, NT), LD = tile_ld(BN);
	constexpr int MI = BN / 64; /* m64 blocks of weight rows */
	constexpr int NR = NT / 2;  /* accumulators per thread per block */
	extern __shared__ uint8_t smem_raw[];
	uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
	                                            ~uintptr_t(1023));
	const uint32_t base = smem_addr(smem);
	const int stages = p.stages;
	const uint32_t full = base + ring_region(BN, NT, stages), empty = full + 8 * stages;
	const int rank = (int)(blockIdx.x % (unsigned)p.split);
	const int tile = (int)(blockIdx.x / (unsigned)p.split), bz = (int)blockIdx.y;
	const int kt0 = rank * p.k_per;
	const int nkt = min(p.k_per, p.ktiles - kt0);
	const int rot = nkt > 0 ? (int)((unsigned)(tile + 3 * bz) % (unsigned)nkt) : 0;

	if (threadIdx.x == 128) {
		for (int s = 0; s < stages; s++) {
			mbar_init(full + 8 * s, 1);
			mbar_init(empty + 8 * s, 4); /* one arrival per consumer warp */
		}
		fence_mbar_init();
		fence_proxy_async();
	}
	__syncthreads();

	/* Launched with PDL, the CTA may start while the kernel before runs:
	 * nothing is read or written before that one completes (the tensor
	 * maps are parameters). */
	if (threadIdx.x == 128) {
		tma_prefetch_map(&map_w);
		tma_prefetch_map(&map_x);
	}
	tkc::pdl_wait();
	if (threadIdx.x >= 128) {
		/* The producer: one lane walks this CTA's K range. */
		if (threadIdx.x == 128) {
			const int zw = p.b_batched ? bz : 0, zx = p.a_batched ? bz : 0;
			if (p.trigger)
				tkc::pdl_trigger();
			int s = 0;
			uint32_t phase = 0;
			for (int t = 0; t < nkt; t++) {
				int kt = kt0 + (t + rot < nkt ? t + rot : t + rot - nkt);
				uint32_t sw = base + s * SLOT, sx = sw + W_BYTES;
				mbar_wait(empty + 8 * s, phase ^ 1);
				mbar_arrive_expect_tx(full + 8 * s, SLOT);
				tma_load_3d(sw, &map_w, full + 8 * s, kt * BK, tile * BN, zw);
				tma_load_3d(sx, &map_x, full + 8 * s, kt * BK, 0, zx);
				if (++s == stages) {
					s = 0;
					phase ^= 1;
				}
			}
		}
	} else {
		/* The consumers. */
		const int tid = threadIdx.x;
		float acc[MI][NR];
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int i = 0; i < NR; i++)
				acc[mi][i] = 0.0f;
			acc_fence(acc[mi]);
		}
		int s = 0, prev = -1;
		uint32_t phase = 0;
		for (int t = 0; t < nkt; t++) {
			uint32_t sw = base + s * SLOT, sx = sw + W_BYTES;
			mbar_wait(full + 8 * s, phase);
			wgmma_fence();
#pragma unroll
			for (int kk = 0; kk < BK / 16; kk++) {
				uint64_t db = sw128_desc(sx + kk * 32, 16, 1024);
#pragma unroll
				for (int mi = 0; mi < MI; mi++)
					mma<T, NT>(
					        acc[mi],
					        sw128_desc(sw + mi * 64 * 128 + kk * 32, 16, 1024),
					        db);
			}
			slot_issued(acc, empty, prev, s, phase, stages, tid);
		}
		wgmma_wait<0>();
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			acc_fence(acc[mi]);
		/* Every product has read its slot: the ring becomes the tile. */
		named_sync(1, 128);
		float *out = reinterpret_cast<float *>(smem);
		const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
			int r = mi * 64 + warp * 16 + (lane >> 2);
#pragma unroll
			for (int j = 0; j < NT / 8; j++) {
				int t = j * 8 + (lane & 3) * 2;
				out[t * LD + r] = acc[mi][4 * j];
				out[(t + 1) * LD + r] = acc[mi][4 * j + 1];
				out[t * LD + r + 8] = acc[mi][4 * j + 2];
				out[(t + 1) * LD + r + 8] = acc[mi][4 * j + 3];
			}
		}
	}

	/*
	 * Sum the split's partial tiles and write c: 8 weight rows of one token
	 * per thread and step. In a cluster every CTA takes every split-th
	 * group, reading its peers' shared memory; through the workspace the
	 * last CTA of the tile to finish takes them all. Either way the
	 * partials are added in rank (K) order: the same bits every run.
	 */
	namespace cg = cooperative_groups;
	const float *mine = reinterpret_cast<const float *>(smem);
	const float *part = nullptr; /* the tile's partials in the workspace */
	int first = rank, step = p.split;
	__syncthreads(); /* this CTA's tile is in shared memory */
	if (p.split > 1 && p.in_cluster) {
		cg::this_cluster().sync(); /* and every peer's */
	} else if (p.split > 1) {
		__shared__ unsigned last;
		const size_t slot = (size_t)NT * BN;
		const long long t_id = (long long)bz * p.tiles + tile;
		float *dst = p.part + ((size_t)t_id * p.split + rank) * slot;
		for (int i = threadIdx.x; i < NT * BN / 4; i += THREADS) {
			int t = i / (BN / 4), c4 = (i - t * (BN / 4)) * 4;
			__stcg(reinterpret_cast<float4 *>(dst + t * BN + c4),
			       *reinterpret_cast<const float4 *>(mine + t * LD + c4));
		}
		__threadfence();
		__syncthreads();
		if (threadIdx.x == 0)
			last = atomicAdd(p.counts + t_id, 1u) == (unsigned)p.split - 1;
		__syncthreads();
		if (!last)
			return;
		__threadfence(); /* the other partials are visible from here on */
		part = p.part + (size_t)t_id * p.split * slot;
		first = 0;
		step = 1;
	}
	const int rows = min(NT, p.m), groups = BN / 8;
	for (int u = first * THREADS + (int)threadIdx.x; u < rows * groups; u += step * THREADS) {
		int t = u / groups, r8 = (u - t * groups) * 8;
		int n0 = tile * BN + r8;
		if (n0 >= p.n)
			continue;
		float x[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
		for (int o = 0; o < p.split; o++) {
			float4 lo, hi;
			if (part != nullptr) {
				const float4 *v = reinterpret_cast<const float4 *>(
				        part + (size_t)o * NT * BN + t * BN + r8);
				lo = __ldcg(v);
				hi = __ldcg(v + 1);
			} else {
				const float *src =
				        p.split > 1 ? cg::this_cluster().map_shared_rank(mine, o)
				                    : mine;
				const float4 *v =
				        reinterpret_cast<const float4 *>(src + t * LD + r8);
				lo = v[0];
				hi = v[1];
			}
			x[0] += lo.x, x[1] += lo.y, x[2] += lo.z, x[3] += lo.w;
			x[4] += hi.x, x[5] += hi.y, x[6] += hi.z, x[7] += hi.w;
		}
		store8<T>(p, x, bz, t, n0);
	}
	if (p.split > 1 && p.in_cluster)
		cg::this_cluster().sync(); /* the peers are done reading this CTA's tile */
}

/* ---- host side ------------------------------------------------------------ */

typedef void (*decode_fn)(CUtensorMap, CUtensorMap, DecodeArgs);

const int kTokenTiles[] = { 8, 16, 32, 64, 128 };
const int kRowTiles[] = { 64, 128 };

int token_tile(int64_t m)
{
	for (int nt : kTokenTiles)
		if (m <= nt)
			return nt;
	return 0;
}

/* The kernel of (dtype, BN, NT), nullptr for none. */
template <typename T> const void *kernel_t(int bn, int nt)
{
	static const void *const fns[2][5] = {
		{ (const void *)gemm_decode_kernel<T, 64, 8>,
		  (const void *)gemm_decode_kernel<T, 64, 16>,
		  (const void *)gemm_decode_kernel<T, 64, 32>,
		  (const void *)gemm_decode_kernel<T, 64, 64>,
		  (const void *)gemm_decode_kernel<T, 64, 128> },
		{ (const void *)gemm_decode_kernel<T, 128, 8>,
		  (const void *)gemm_decode_kernel<T, 128, 16>,
		  (const void *)gemm_decode_kernel<T, 128, 32>,
		  (const void *)gemm_decode_kernel<T, 128, 64>,
		  (const void *)gemm_decode_kernel<T, 128, 128> },
	};
	int ti = 0;
	while (ti < 5 && kTokenTiles[ti] != nt)
		ti++;
	return (bn == 64 || bn == 128) && ti < 5 ? fns[bn == 128][ti] : nullptr;
}

const void *kernel_of(tk_dtype dt, int bn, int nt)
{
	return dt == TK_BF16 ? kernel_t<__nv_bfloat16>(bn, nt) : kernel_t<__half>(bn, nt);
}

/* Shared memory of a launch of (bn, nt) with a ring of `stages`. */
int smem_of(int bn, int nt, int stages)
{
	return ring_region(bn, nt, stages) + 16 * stages + SMEM_SLACK;
}

/*
 * What the family serves: f16 or bf16, weights [N, K], 1 <= M <= 128;
 * what the copy engine needs (a and b 16-byte aligned, pitches and batch
 * strides multiples of 16 bytes); a c per batch.
 */
bool decode_serves(const tk_gemm_problem *p)
{
	const int64_t lim = INT32_MAX - 1024;
	if (p == nullptr || (p->dtype != TK_F16 && p->dtype != TK_BF16) || !p->trans_b)
		return false;
	if (p->m < 1 || p->m > 128 || p->n < 1 || p->k < 1 || p->n > lim || p->k > lim ||
	    p->batch < 1 || p->batch > 65535)
		return false;
	if (p->a == nullptr || p->b == nullptr || p->c == nullptr)
		return false;
	if (!tkc::aligned16(p->a) || !tkc::aligned16(p->b) || p->lda % 8 != 0 || p->ldb % 8 != 0 ||
	    p->lda < p->k || p->ldb < p->k || p->ldc < p->n)
		return false;
	if (p->residual != nullptr && p->ldr < p->n)
		return false;
	if (p->lda >= (1ll << 39) || p->ldb >= (1ll << 39))
		return false;
	if (p->batch > 1 &&
	    (p->stride_a % 8 != 0 || p->stride_b % 8 != 0 || p->stride_a < 0 || p->stride_b < 0 ||
	     p->stride_a >= (1ll << 39) || p->stride_b >= (1ll << 39) || p->stride_c <= 0))
		return false;
	/* Tiles times the split in 32 bits (grid x), with the smallest tile. */
	return (p->n + 63) / 64 * MAX_SPLIT * p->batch <= INT32_MAX;
}

int64_t n_tiles(const tk_gemm_problem *p, int bn)
{
	return (p->n + bn - 1) / bn;
}

/* Workspace a split through it needs: 256-byte-aligned counters (one per
 * tile and batch), then an NT x BN f32 partial per CTA. */
size_t counts_bytes(const tk_gemm_problem *p, int bn)
{
	return ((size_t)(n_tiles(p, bn) * p->batch) * 4 + 255) / 256 * 256;
}

size_t workspace_for(const tk_gemm_problem *p, const tk_gemm_config *c)
{
	return counts_bytes(p, c->tile_n) +
	       (size_t)(n_tiles(p, c->tile_n) * p->batch) * c->split_k * c->tile_m * c->tile_n * 4;
}

int64_t k_tiles(const tk_gemm_problem *p)
{
	return (p->k + BK - 1) / BK;
}

/* K tiles per CTA for a split; 0 when some CTA of it would get none. */
int64_t k_per(const tk_gemm_problem *p, int split)
{
	int64_t kt = k_tiles(p), per = (kt + split - 1) / split;
	return (kt + per - 1) / per == split ? per : 0;
}

using tk_gemm_common::Limits;
using tk_gemm_common::limits;

/* The deepest ring within `bytes` of shared memory (at most MAX_STAGES). */
int stages_within(int bn, int nt, int bytes)
{
	int s = MAX_STAGES;
	while (s > 2 && smem_of(bn, nt, s) > bytes)
		s--;
	return smem_of(bn, nt, s) <= bytes ? s : 0;
}

bool config_ok(const tk_gemm_problem *p, const tk_gemm_config *c, const Limits &d)
{
	if (c->kind != TK_GEMM_DECODE || !decode_serves(p) || c->tile_k != BK ||
	    c->tile_m != token_tile(p->m) || (c->tile_n != 64 && c->tile_n != 128))
		return false;
	if (c->split_k < 1 || c->split_k > MAX_SPLIT || k_per(p, c->split_k) == 0)
		return false;
	if (c->stages < 2 || c->stages > MAX_STAGES ||
	    smem_of(c->tile_n, c->tile_m, c->stages) > d.smem_block)
		return false;
	/* cluster == split_k: the split is a cluster; cluster 0 with a split:
	 * through the workspace, which must be there and large enough. */
	if (c->cluster == c->split_k)
		return c->split_k <= MAX_CLUSTER;
	return c->cluster == 0 && c->split_k > 1 && p->workspace != nullptr &&
	       tkc::aligned16(p->workspace) && workspace_for(p, c) <= p->workspace_bytes;
}

/* Let a kernel use the opt-in shared memory, once per device and kernel. */
bool allow_smem(const void *fn, tk_dtype dt, int bn, int nt, const Limits &d)
{
	static std::atomic<uint64_t> raised[2][2][5];
	int ti = 0;
	while (ti < 4 && kTokenTiles[ti] != nt)
		ti++;
	if (tkc::allow_dynamic_smem(fn, d.smem_block, raised[dt == TK_BF16][bn == 128][ti]) !=
	    cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return true;
}

/*
 * CTAs of c's kernel that run at once: clusters must fit within a GPC, so
 * clusters of 3 or 4 CTAs of one SM each fill fewer than all the SMs
 * (cudaOccupancyMaxActiveClusters says how many). Asked once per device
 * and (dtype, tile, ring, cluster); 0 when the runtime cannot say.
 */
int64_t wave_ctas(const tk_gemm_problem *p, const tk_gemm_config *c, const Limits &d)
{
	struct Entry {
		int dev, dt, bn, nt, stages, cluster;
		int64_t ctas;
	};
	static Entry cache[256];
	static int used;
	static std::mutex lock;
	int dev = 0, cl = c->cluster > 1 ? c->cluster : 1;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
		(void)cudaGetLastError();
		return 0;
	}
	std::lock_guard<std::mutex> guard(lock);
	for (int i = 0; i < used; i++) {
		const Entry &e = cache[i];
		if (e.dev == dev && e.dt == (int)p->dtype && e.bn == c->tile_n &&
		    e.nt == c->tile_m && e.stages == c->stages && e.cluster == cl)
			return e.ctas;
	}
	const void *fn = kernel_of(p->dtype, c->tile_n, c->tile_m);
	int clusters = 0;
	if (fn != nullptr && allow_smem(fn, p->dtype, c->tile_n, c->tile_m, d)) {
		cudaLaunchConfig_t lc = {};
		cudaLaunchAttribute at[1];
		unsigned nat = 0;
		tkc::cluster_attr(at, &nat, (unsigned)cl);
		lc.gridDim = dim3((unsigned)(cl * d.sms), 1, 1);
		lc.blockDim = dim3(THREADS);
		lc.dynamicSmemBytes = (size_t)smem_of(c->tile_n, c->tile_m, c->stages);
		lc.attrs = at;
		lc.numAttrs = nat;
		if (cudaOccupancyMaxActiveClusters(&clusters, fn, &lc) != cudaSuccess) {
			(void)cudaGetLastError();
			clusters = 0;
		}
	}
	int64_t ctas = (int64_t)clusters * cl;
	if (used < 256)
		cache[used++] = { dev, (int)p->dtype, c->tile_n, c->tile_m, c->stages, cl, ctas };
	return ctas;
}

/*
 * A model of the time, to order the candidates (the tuner times them; the
 * built-in choice takes the first): the weights cross at the bandwidth the
 * busy SMs share, at most a per-SM ceiling, in waves of what runs at once
 * (wave_ctas, else the SMs times the CTAs an SM holds); a fixed cost per
 * wave and per split. The constants were fitted offline to the tuner's
 * per-candidate times of the decode family on an H200 (54 classes with
 * M <= 32, three tuning runs), with six GPCs of 16 SMs and two of 18
 * standing in for the occupancy query: the pick is then on average 2.6%
 * (at most 20%) slower than the fastest candidate, against 8% (at most
 * 41%) for the first model, which had no cluster packing and smaller
 * split costs.
 */
double model_us(const tk_gemm_problem *p, const tk_gemm_config *c, const Limits &d)
{
	const double bw = 4.0e12, bw_sm = 60e9, per_wave = 3.0, per_split = 3.0, per_ws_split = 0.5;
	int64_t ctas = n_tiles(p, c->tile_n) * c->split_k * p->batch;
	int fit = d.smem_sm / (smem_of(c->tile_n, c->tile_m, c->stages) + 1024);
	if (fit < 1)
		fit = 1;
	int64_t wave = wave_ctas(p, c, d);
	if (wave <= 0 || wave > (int64_t)d.sms * fit)
		wave = (int64_t)d.sms * fit;
	int64_t waves = (ctas + wave - 1) / wave;
	int64_t active = ctas < d.sms ? ctas : d.sms;
	int64_t in_wave = ctas < wave ? ctas : wave;
	int64_t per_sm = (in_wave + d.sms - 1) / d.sms; /* CTAs an SM holds at once */
	double share = bw / (double)active;
	if (share > bw_sm)
		share = bw_sm;
	double cta_bytes = (double)k_per(p, c->split_k) * BK * 2.0 *
	                   (c->tile_n + 0.5 * (double)(p->m < c->tile_m ? p->m : c->tile_m));
	double t = (double)waves * (double)per_sm * cta_bytes / share * 1e6;
	t += per_wave * (double)waves;
	if (c->split_k > 1)
		t += per_split + (c->cluster > 1 ? 0.0 : per_ws_split);
	return t;
}

tk_gemm_config config_of(int nt, int bn, int stages, int split, bool cluster)
{
	tk_gemm_config c = {};
	c.kind = TK_GEMM_DECODE;
	c.tile_m = nt;
	c.tile_n = bn;
	c.tile_k = BK;
	c.stages = stages;
	c.cluster = cluster ? split : 0;
	c.split_k = split;
	return c;
}

/*
 * The search space: weight tiles of 64 and 128 rows, split 1..16 (those that
 * give every CTA some K, at most 4 CTAs an SM), each with the deepest ring
 * that one CTA per SM allows, and when there are more CTAs than SMs also the
 * deepest that two allow; a split runs as a cluster (up to 8) and through
 * the workspace (clusters must fit in a GPC, which leaves some grids a
 * second wave). search writes up to max of them, the model's cheapest
 * first, and returns how many there are.
 */
int search(const tk_gemm_problem *p, const Limits &d, tk_gemm_config *out, int max)
{
	int nt = token_tile(p->m), n = 0;
	tk_gemm_config list[2 * MAX_SPLIT * 2 * 2];
	double cost[2 * MAX_SPLIT * 2 * 2];
	for (int bn : kRowTiles) {
		int64_t tiles = (p->n + bn - 1) / bn * p->batch;
		for (int split = 1; split <= MAX_SPLIT; split++) {
			if (k_per(p, split) == 0 || (split > 1 && tiles * split > 4 * d.sms))
				continue;
			int deep = stages_within(bn, nt, d.smem_block);
			int two = stages_within(bn, nt, d.smem_sm / 2 - 2048);
			int variants[2] = { deep, tiles * split > d.sms ? two : 0 };
			for (int v = 0; v < 4; v++) {
				/* v: the two rings, in a cluster, then through the workspace */
				int stages = variants[v & 1];
				if (stages < 2 || ((v & 1) && stages == deep) ||
				    (v >= 2 && split == 1))
					continue;
				tk_gemm_config c = config_of(nt, bn, stages, split, v < 2);
				if (!config_ok(p, &c, d))
					continue;
				list[n] = c;
				cost[n] = model_us(p, &c, d);
				n++;
			}
		}
	}
	tk_gemm_common::sort_by_cost(list, cost, n);
	for (int i = 0; i < n && i < max; i++)
		out[i] = list[i];
	return n;
}

/* The model's choice for the shapes seen last (see gemm_common.cuh). */
tk_gemm_common::Cache choice_cache;

} /* namespace */

extern "C" int tk_gemm_decode_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (!decode_serves(p))
		return 0;
	Limits d = limits();
	if (d.sms <= 0)
		return 0;
	if (max == 1) {
		/* The built-in choice asks on every call: cached per shape. */
		tk_gemm_config best = {};
		int count = tk_gemm_common::cached(
		        choice_cache, p, &best, [&d](const tk_gemm_problem *q, tk_gemm_config *b) {
			        return search(q, d, b, 1);
		        });
		if (count > 0)
			out[0] = best;
		return count;
	}
	return search(p, d, out, max);
}

extern "C" tk_status tk_gemm_decode_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                           void *stream)
{
	Limits d = limits();
	if (p == nullptr || cfg == nullptr || !config_ok(p, cfg, d))
		return TK_ERR_UNSUPPORTED;
	int bn = cfg->tile_n, nt = cfg->tile_m, split = cfg->split_k;
	const void *fn = kernel_of(p->dtype, bn, nt);
	if (fn == nullptr)
		return TK_ERR_UNSUPPORTED;

	CUtensorMap map_w, map_x;
	memset(&map_w, 0, sizeof(map_w));
	memset(&map_x, 0, sizeof(map_x));
	if (!make_map(&map_w, p->dtype, p->b, p->k, p->n, p->stride_b ? p->batch : 1, p->ldb,
	              p->stride_b, BK, bn) ||
	    !make_map(&map_x, p->dtype, p->a, p->k, p->m, p->stride_a ? p->batch : 1, p->lda,
	              p->stride_a, BK, nt))
		return TK_ERR_UNSUPPORTED;

	DecodeArgs a = {};
	tk_gemm_common::common_args(a, p);
	a.ktiles = (int)k_tiles(p);
	a.split = split;
	a.k_per = (int)k_per(p, split);
	a.stages = cfg->stages;
	a.in_cluster = cfg->cluster > 1;
	a.tiles = (int)n_tiles(p, bn);

	int smem = smem_of(bn, nt, cfg->stages);
	tkc::launch_begin();
	if (!allow_smem(fn, p->dtype, bn, nt, d))
		return TK_ERR_LAUNCH;
	int64_t tiles = n_tiles(p, bn);
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	if (split > 1 && !a.in_cluster) {
		char *ws = static_cast<char *>(p->workspace);
		a.counts = reinterpret_cast<unsigned *>(ws);
		a.part = reinterpret_cast<float *>(ws + counts_bytes(p, bn));
		if (tkc::clear_words(ws, (size_t)(tiles * p->batch), st) != cudaSuccess)
			return TK_ERR_LAUNCH;
	}
	a.trigger = tk_gemm_common::early_trigger(tiles * split * p->batch, d.sms);
	cudaLaunchConfig_t lc = {};
	cudaLaunchAttribute at[2];
	unsigned nat = 0;
	tkc::cluster_attr(at, &nat, a.in_cluster ? (unsigned)split : 1);
	tkc::pdl_attr(at, &nat);
	lc.gridDim = dim3((unsigned)(tiles * split), (unsigned)p->batch, 1);
	lc.blockDim = dim3(THREADS);
	lc.dynamicSmemBytes = (size_t)smem;
	lc.stream = st;
	lc.attrs = at;
	lc.numAttrs = nat;
	void *args[] = { &map_w, &map_x, &a };
	if (cudaLaunchKernelExC(&lc, fn, args) != cudaSuccess)
		return TK_ERR_LAUNCH;
	return tkc::launch_status();
}
