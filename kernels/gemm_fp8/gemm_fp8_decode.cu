/*
 * gemm_fp8_decode.cu - the fp8 decode GEMM for Hopper (sm_90a): M = 1..64
 * tokens of e4m3 activations against an e4m3 weight [N, K], f32
 * accumulation promoted per 128-wide K block (gemm_fp8.h), the epilogue of
 * the stream kernel (gemm_fp8.cu's store_out). Its time is what it takes to
 * read the weight once; it is the bf16 decode GEMM (kernels/gemm/
 * gemm_decode.cu) with half the bytes a weight row.
 *
 * The product is computed transposed, c^T = b a^T: BN weight rows (one or
 * two m64 blocks) are the wgmma's M side, the tokens its N side, M rounded
 * up to NT = 8, 16, 32 or 64 (the copy engine fills the rows past M with
 * zeros). For 8-bit inputs wgmma wants both operands K-major, which [N, K]
 * weights and [M, K] activations are. Every CTA holds every token, so each
 * weight byte is read from memory exactly once.
 *
 * A CTA is one consumer warpgroup and one producer warp. The producer's
 * first lane streams [BN x 128] weight tiles and [NT x 128] activation
 * tiles (one 128-byte swizzle row = 128 K values = one scale block) into a
 * ring of `stages` shared-memory slots with bulk tensor copies (TMA,
 * 128-byte swizzle), each slot completed on a "full" mbarrier and handed
 * back on an "empty" one. The consumers multiply a slot with four wgmma
 * m64nNTk32 e4m3 per m64 block into accumulators of the slot's own (the
 * first overwriting them), wait for them, hand the slot back and promote
 * the sums into the f32 total (times the block scales for the 128-block
 * layout); the ring keeps the copies flowing meanwhile.
 *
 * Split-K across a cluster: the `split` CTAs of a weight tile form one
 * thread block cluster (split <= 8, the portable size), each walking a
 * contiguous range of K blocks, starting at a different place of it per
 * tile. Each CTA leaves its [NT x BN] f32 partial in its own shared memory;
 * after a cluster barrier CTA r sums every split-th 8-row group of the tile
 * over its peers' shared memory in rank order (the same bits every run) and
 * writes c: the per-tensor or rowwise scales, bias, residual (which may
 * alias c: each element is read and written by one thread), rounded once.
 * A second barrier keeps the partials alive until every peer has read
 * them. No workspace and no second kernel.
 *
 * Launched with programmatic dependent launch (tk_cuda_pdl()): every thread
 * waits for the kernel before first.
 */
#include <atomic>
#include <cooperative_groups.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cuda_common.cuh"
#include "gemm_fp8.h"
#include "sm90.cuh"
#include "tma_map.cuh"

namespace
{

using namespace tk_sm90;

constexpr int BK = TK_FP8_KBLOCK; /* K per slot: one 128-byte swizzle row, one scale block */
constexpr int THREADS = 160;      /* one consumer warpgroup, one producer warp */
constexpr int MAX_CLUSTER = 8;    /* the portable cluster size */
constexpr int MAX_STAGES = 16;
constexpr int SMEM_SLACK = 1024; /* the ring is aligned up to the swizzle period */

struct DecodeArgs {
	void *c;
	const void *bias, *res;
	long long ldc, ldr, c_bs;
	const float *sa, *sb;
	long long sa_bs, sb_bs;
	int layout;
	int m, n;
	int kbs;     /* 128-blocks of K */
	int split;   /* CTAs along K: a cluster */
	int k_per;   /* K blocks per CTA (the last may have fewer) */
	int stages;  /* ring slots */
	int vec;     /* c, residual and bias allow 16-byte access */
	int trigger; /* PDL: let the next kernel launch at the start */
};

/*
 * Shared memory of a CTA: the ring of slots ([BN x 128] weight bytes, then
 * [NT x 128] activation bytes, each a multiple of the 1024-byte swizzle
 * period), which the output tile reuses, then the mbarriers. The tile is
 * [NT][BN + 4] f32: the pad keeps the fragment stores free of bank
 * conflicts.
 */
__host__ __device__ constexpr int slot_bytes(int bn, int nt)
{
	return (bn + nt) * BK;
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

/*
 * D[64 x N] (+)= A[64 x 32] B[32 x N], e4m3 in, f32 accumulators, both
 * operands K-major in shared memory (descriptors); acc == 0 overwrites D.
 * Accumulator layout as sm90.cuh's wgmma wrappers: per warp w and lane l,
 * d[4j + 0..1] hold row 16w + l/4, columns 8j + 2(l%4) + 0..1, d[4j + 2..3]
 * the same columns of row 16w + l/4 + 8.
 */
__device__ __forceinline__ void wgmma_e4m3_n8(float (&d)[4], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 "
	             "{%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ void wgmma_e4m3_n16(float (&d)[8], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
	               "+f"(d[6]), "+f"(d[7])
	             : "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ void wgmma_e4m3_n32(float (&d)[16], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, "
	             "%17, p, 1, 1;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
	               "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
	               "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
	             : "l"(da), "l"(db), "r"(acc));
}

__device__ __forceinline__ void wgmma_e4m3_n64(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
	             "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
	             "%32, %33, p, 1, 1;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
	               "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
	               "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
	               "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
	               "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
	               "+f"(d[30]), "+f"(d[31])
	             : "l"(da), "l"(db), "r"(acc));
}

template <int NT>
__device__ __forceinline__ void mma(float (&d)[NT / 2], uint64_t da, uint64_t db, int acc)
{
	if constexpr (NT == 8)
		wgmma_e4m3_n8(d, da, db, acc);
	else if constexpr (NT == 16)
		wgmma_e4m3_n16(d, da, db, acc);
	else if constexpr (NT == 32)
		wgmma_e4m3_n32(d, da, db, acc);
	else
		wgmma_e4m3_n64(d, da, db, acc);
}

template <typename T> struct alignas(16) Vec8 {
	T v[8];
};

/*
 * c[t, n0 .. n0 + 7] of batch bz from the f32 totals x of token t and those
 * 8 weight rows, as store_out (gemm_fp8.cu) computes each: the scale of a
 * single-scale layout, bias, residual, rounded once. Columns past N are not
 * written.
 */
template <typename T>
__device__ __forceinline__ void store8(const DecodeArgs &p, float (&x)[8], int bz, int t, int n0)
{
	T *c = static_cast<T *>(p.c) + (long long)bz * p.c_bs + (long long)t * p.ldc;
	const T *bias = static_cast<const T *>(p.bias);
	const T *res = p.res ? static_cast<const T *>(p.res) + (long long)t * p.ldr : nullptr;
	const float *sa = p.sa + bz * p.sa_bs, *sb = p.sb + bz * p.sb_bs;
	const int cnt = p.n - n0 < 8 ? p.n - n0 : 8;

	if (p.layout == TK_FP8_PER_ROW) {
		const float s = sa[t];
#pragma unroll
		for (int e = 0; e < 8; e++)
			if (e < cnt)
				x[e] = x[e] * (s * sb[n0 + e]);
	} else if (p.layout == TK_FP8_PER_TENSOR) {
		const float s = sa[0] * sb[0];
#pragma unroll
		for (int e = 0; e < 8; e++)
			x[e] = x[e] * s;
	}
	if (p.vec && cnt == 8) {
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
		if (e >= cnt)
			break;
		float y = x[e];
		if (bias != nullptr)
			y += tkc::to_f32(bias[n0 + e]);
		if (res != nullptr)
			y += tkc::to_f32(res[n0 + e]);
		c[n0 + e] = tkc::from_f32<T>(y);
	}
}

/*
 * tot += part, times the block scales of K block kb for the 128-block
 * layout: the thread's columns are tokens 8j + 2(lane % 4) + 0..1, whose
 * a scales differ (0 past M, where a is zeros anyway); every row of the
 * tile shares one b scale, sbk.
 */
template <int MI, int NR>
__device__ __forceinline__ void promote(float (&tot)[MI][NR], const float (&part)[MI][NR],
                                        const DecodeArgs &p, const float *sa, const float *sbrow,
                                        int kb, int lane)
{
	if (p.layout == TK_FP8_BLOCK) {
		const float sbk = sbrow[kb];
#pragma unroll
		for (int j = 0; j < NR / 4; j++) {
			const int t0 = j * 8 + (lane & 3) * 2;
			const float s0 = t0 < p.m ? sa[(long long)t0 * p.kbs + kb] * sbk : 0.0f;
			const float s1 =
			        t0 + 1 < p.m ? sa[(long long)(t0 + 1) * p.kbs + kb] * sbk : 0.0f;
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				tot[mi][4 * j] += part[mi][4 * j] * s0;
				tot[mi][4 * j + 1] += part[mi][4 * j + 1] * s1;
				tot[mi][4 * j + 2] += part[mi][4 * j + 2] * s0;
				tot[mi][4 * j + 3] += part[mi][4 * j + 3] * s1;
			}
		}
	} else {
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
#pragma unroll
			for (int i = 0; i < NR; i++)
				tot[mi][i] += part[mi][i];
	}
}

template <int MI, int NR> __device__ __forceinline__ void fence_all(float (&a)[MI][NR])
{
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
		acc_fence(a[mi]);
}

/*
 * One slot of the consumer loop: wait for slot s (K block kb), multiply it
 * into part (the first k32 step overwriting it), wait for the products,
 * hand the slot back and promote them into tot. The wait is whole: reading
 * part while a later slot's products were in flight would make ptxas
 * serialize every wgmma anyway (C7514), and the consumers have time to
 * spare against the copy rate.
 */
template <int BN, int NT, int MI, int NR>
__device__ __forceinline__ void consume(float (&tot)[MI][NR], float (&part)[MI][NR], int s,
                                        uint32_t phase, int kb, uint32_t base, uint32_t full,
                                        uint32_t empty, const DecodeArgs &p, const float *sa,
                                        const float *sbrow, int lane)
{
	constexpr int SLOT = slot_bytes(BN, NT), W_BYTES = BN * BK;
	const uint32_t sw = base + s * SLOT, sx = sw + W_BYTES;
	mbar_wait(full + 8 * s, phase);
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BK / 32; kk++) {
		const uint64_t db = sw128_desc(sx + kk * 32, 16, 1024);
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			mma<NT>(part[mi], sw128_desc(sw + mi * 64 * 128 + kk * 32, 16, 1024), db,
			        kk);
	}
	wgmma_commit();
	wgmma_wait<0>();
	fence_all(part);
	if (lane == 0)
		mbar_arrive(empty + 8 * s);
	promote(tot, part, p, sa, sbrow, kb, lane);
}

template <typename T, int BN, int NT>
__global__ void __launch_bounds__(THREADS, 1)
        fp8_decode_kernel(const __grid_constant__ CUtensorMap map_w,
                          const __grid_constant__ CUtensorMap map_x, const DecodeArgs p)
{
	constexpr int W_BYTES = BN * BK, SLOT = slot_bytes(BN, NT), LD = tile_ld(BN);
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
	const int kb0 = rank * p.k_per;
	const int nkb = min(p.k_per, p.kbs - kb0);
	const int rot = nkb > 0 ? (int)((unsigned)(tile + 3 * bz) % (unsigned)nkb) : 0;

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
		/* The producer: one lane walks this CTA's K blocks. */
		if (threadIdx.x == 128) {
			if (p.trigger)
				tkc::pdl_trigger();
			int s = 0;
			uint32_t phase = 0;
			for (int t = 0; t < nkb; t++) {
				int kb = kb0 + (t + rot < nkb ? t + rot : t + rot - nkb);
				uint32_t sw = base + s * SLOT, sx = sw + W_BYTES;
				mbar_wait(empty + 8 * s, phase ^ 1);
				mbar_arrive_expect_tx(full + 8 * s, SLOT);
				tma_load_3d(sw, &map_w, full + 8 * s, kb * BK, tile * BN, bz);
				tma_load_3d(sx, &map_x, full + 8 * s, kb * BK, 0, bz);
				if (++s == stages) {
					s = 0;
					phase ^= 1;
				}
			}
		}
	} else {
		/* The consumers. */
		const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
		const float *sa = p.sa + bz * p.sa_bs;
		/* the b scales of this tile's 128-row block (block layout only) */
		const float *sbrow = p.sb + bz * p.sb_bs + (long long)(tile * BN / 128) * p.kbs;
		float tot[MI][NR], part[MI][NR];
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
#pragma unroll
			for (int i = 0; i < NR; i++) {
				tot[mi][i] = 0.0f;
				part[mi][i] = 0.0f;
			}
		fence_all(part);
		int s = 0;
		uint32_t phase = 0;
		for (int t = 0; t < nkb; t++) {
			int kb = kb0 + (t + rot < nkb ? t + rot : t + rot - nkb);
			consume<BN, NT>(tot, part, s, phase, kb, base, full, empty, p, sa, sbrow,
			                lane);
			if (++s == stages) {
				s = 0;
				phase ^= 1;
			}
		}
		/* Every product has read its slot: the ring becomes the tile. */
		named_sync(1, 128);
		float *out = reinterpret_cast<float *>(smem);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
			int row = mi * 64 + warp * 16 + (lane >> 2);
#pragma unroll
			for (int j = 0; j < NT / 8; j++) {
				int t = j * 8 + (lane & 3) * 2;
				out[t * LD + row] = tot[mi][4 * j];
				out[(t + 1) * LD + row] = tot[mi][4 * j + 1];
				out[t * LD + row + 8] = tot[mi][4 * j + 2];
				out[(t + 1) * LD + row + 8] = tot[mi][4 * j + 3];
			}
		}
	}

	/*
	 * Sum the split's partial tiles and write c: 8 weight rows of one token
	 * per thread and step, every CTA of the cluster every split-th group,
	 * reading its peers' shared memory, adding the partials in rank (K)
	 * order: the same bits every run.
	 */
	namespace cg = cooperative_groups;
	const float *mine = reinterpret_cast<const float *>(smem);
	__syncthreads(); /* this CTA's tile is in shared memory */
	if (p.split > 1)
		cg::this_cluster().sync(); /* and every peer's */
	const int rows = min(NT, p.m), groups = BN / 8;
	for (int u = rank * THREADS + (int)threadIdx.x; u < rows * groups; u += p.split * THREADS) {
		int t = u / groups, r8 = (u - t * groups) * 8;
		int n0 = tile * BN + r8;
		if (n0 >= p.n)
			continue;
		float x[8] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
		for (int o = 0; o < p.split; o++) {
			const float *src =
			        p.split > 1 ? cg::this_cluster().map_shared_rank(mine, o) : mine;
			const float4 *v = reinterpret_cast<const float4 *>(src + t * LD + r8);
			float4 lo = v[0], hi = v[1];
			x[0] += lo.x, x[1] += lo.y, x[2] += lo.z, x[3] += lo.w;
			x[4] += hi.x, x[5] += hi.y, x[6] += hi.z, x[7] += hi.w;
		}
		store8<T>(p, x, bz, t, n0);
	}
	if (p.split > 1)
		cg::this_cluster().sync(); /* the peers are done reading this CTA's tile */
}

/* ---- host side ------------------------------------------------------------ */

const int kTokenTiles[] = { 8, 16, 32, 64 };
const int kRowTiles[] = { 128, 64 };

int token_tile(int64_t m)
{
	for (int nt : kTokenTiles)
		if (m <= nt)
			return nt;
	return 0;
}

int token_index(int nt)
{
	int ti = 0;
	while (ti < 4 && kTokenTiles[ti] != nt)
		ti++;
	return ti;
}

/* The kernel of (c's dtype, BN, NT), nullptr for none. */
template <typename T> const void *kernel_t(int bn, int nt)
{
	static const void *const fns[2][4] = {
		{ (const void *)fp8_decode_kernel<T, 64, 8>,
		  (const void *)fp8_decode_kernel<T, 64, 16>,
		  (const void *)fp8_decode_kernel<T, 64, 32>,
		  (const void *)fp8_decode_kernel<T, 64, 64> },
		{ (const void *)fp8_decode_kernel<T, 128, 8>,
		  (const void *)fp8_decode_kernel<T, 128, 16>,
		  (const void *)fp8_decode_kernel<T, 128, 32>,
		  (const void *)fp8_decode_kernel<T, 128, 64> },
	};
	int ti = token_index(nt);
	return (bn == 64 || bn == 128) && ti < 4 ? fns[bn == 128][ti] : nullptr;
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
 * What the kernel serves: 1 <= M <= 64, and what the copy engine needs: a
 * and b 16-byte aligned with row and batch strides of whole 16-byte
 * vectors (the stream kernel takes the rest).
 */
bool decode_serves(const tk_fp8_problem *q)
{
	const int64_t lim = INT32_MAX - 1024;
	if (q == nullptr || q->m < 1 || q->m > TK_FP8_DECODE_MAX_M || q->n < 1 || q->k < 1 ||
	    q->n > lim || q->k > lim || q->batch < 1 || q->batch > 65535)
		return false;
	if (q->a == nullptr || q->b == nullptr || q->c == nullptr || q->sa == nullptr ||
	    q->sb == nullptr)
		return false;
	if (!tkc::aligned16(q->a) || !tkc::aligned16(q->b) || q->lda % 16 != 0 ||
	    q->ldb % 16 != 0 || q->lda < q->k || q->ldb < q->k)
		return false;
	if (q->lda >= (1ll << 39) || q->ldb >= (1ll << 39))
		return false;
	if (q->batch > 1 &&
	    (q->a_bstride % 16 != 0 || q->b_bstride % 16 != 0 || q->a_bstride <= 0 ||
	     q->b_bstride <= 0 || q->a_bstride >= (1ll << 39) || q->b_bstride >= (1ll << 39)))
		return false;
	return tk_sm90::encode_fn() != nullptr;
}

int64_t n_tiles(const tk_fp8_problem *q, int bn)
{
	return (q->n + bn - 1) / bn;
}

/* K blocks per CTA for a split; 0 when some CTA of it would get none. */
int64_t k_per(const tk_fp8_problem *q, int split)
{
	int64_t kb = q->kblocks, per = (kb + split - 1) / split;
	return (kb + per - 1) / per == split ? per : 0;
}

/*
 * What the current device gives, read once per device: SMs, the dynamic
 * shared memory a block may ask for (less 1 KB for static shared memory)
 * and the shared memory of an SM.
 */
struct Limits {
	int sms, smem_block, smem_sm;
};

Limits limits(void)
{
	static int block[64], sm[64];
	Limits d;
	d.sms = tkc::sm_count();
	d.smem_block =
	        tkc::device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, block, 227 * 1024) - 1024;
	d.smem_sm = tkc::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sm, 228 * 1024);
	return d;
}

/* The deepest ring within `bytes` of shared memory (at most MAX_STAGES). */
int stages_within(int bn, int nt, int bytes)
{
	int s = MAX_STAGES;
	while (s > 2 && smem_of(bn, nt, s) > bytes)
		s--;
	return smem_of(bn, nt, s) <= bytes ? s : 0;
}

/* A configuration: the choice's fields (gemm_fp8.h). */
struct Config {
	int split, bn, stages;
};

Config config_of(const tk_choice &c)
{
	return Config{ (int)c.v[1], (int)c.v[2], (int)c.v[3] };
}

bool config_ok(const tk_fp8_problem *q, const Config &c, const Limits &d)
{
	if (!decode_serves(q) || (c.bn != 64 && c.bn != 128))
		return false;
	if (c.split < 1 || c.split > MAX_CLUSTER || k_per(q, c.split) == 0)
		return false;
	if (n_tiles(q, c.bn) * c.split > INT32_MAX)
		return false;
	return c.stages >= 2 && c.stages <= MAX_STAGES &&
	       smem_of(c.bn, token_tile(q->m), c.stages) <= d.smem_block;
}

/* Let a kernel use the opt-in shared memory, once per device and kernel. */
bool allow_smem(const void *fn, tk_dtype dt, int bn, int nt, const Limits &d)
{
	static std::atomic<uint64_t> raised[2][2][4];
	if (tkc::allow_dynamic_smem(fn, d.smem_block,
	                            raised[dt == TK_BF16][bn == 128][token_index(nt) & 3]) !=
	    cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	return true;
}

/*
 * CTAs of a configuration that run at once: clusters must fit within a
 * GPC, so clusters of 3 or more CTAs of one SM each fill fewer than all
 * the SMs (cudaOccupancyMaxActiveClusters says how many). Asked once per
 * device and (dtype, tile, ring, cluster); 0 when the runtime cannot say.
 */
int64_t wave_ctas(const tk_fp8_problem *q, const Config &c, const Limits &d)
{
	struct Entry {
		int dev, dt, bn, nt, stages, cluster;
		int64_t ctas;
	};
	static Entry cache[256];
	static int used;
	static std::mutex lock;
	int dev = 0, nt = token_tile(q->m);
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
		(void)cudaGetLastError();
		return 0;
	}
	std::lock_guard<std::mutex> guard(lock);
	for (int i = 0; i < used; i++) {
		const Entry &e = cache[i];
		if (e.dev == dev && e.dt == (int)q->c_dtype && e.bn == c.bn && e.nt == nt &&
		    e.stages == c.stages && e.cluster == c.split)
			return e.ctas;
	}
	const void *fn = kernel_of(q->c_dtype, c.bn, nt);
	int clusters = 0;
	if (fn != nullptr && allow_smem(fn, q->c_dtype, c.bn, nt, d)) {
		cudaLaunchConfig_t lc = {};
		cudaLaunchAttribute at[1];
		unsigned nat = 0;
		tkc::cluster_attr(at, &nat, (unsigned)c.split);
		lc.gridDim = dim3((unsigned)(c.split * d.sms), 1, 1);
		lc.blockDim = dim3(THREADS);
		lc.dynamicSmemBytes = (size_t)smem_of(c.bn, nt, c.stages);
		lc.attrs = at;
		lc.numAttrs = nat;
		if (cudaOccupancyMaxActiveClusters(&clusters, fn, &lc) != cudaSuccess) {
			(void)cudaGetLastError();
			clusters = 0;
		}
	}
	int64_t ctas = (int64_t)clusters * c.split;
	if (used < 256)
		cache[used++] = { dev, (int)q->c_dtype, c.bn, nt, c.stages, c.split, ctas };
	return ctas;
}

/*
 * A model of the time, to order the candidates (the tuner times them; the
 * built-in rule takes the first): the bf16 decode family's model
 * (gemm_decode.cu, fitted on the H200) with a byte a weight element: the
 * weight crosses at the bandwidth the busy SMs share, at most a per-SM
 * ceiling, in waves of what runs at once; a fixed cost per wave and per
 * split. Not fitted to this kernel's own times yet.
 */
double model_us(const tk_fp8_problem *q, const Config &c, const Limits &d)
{
	const double bw = 4.0e12, bw_sm = 60e9, per_wave = 3.0, per_split = 3.0;
	const int nt = token_tile(q->m);
	int64_t ctas = n_tiles(q, c.bn) * c.split * q->batch;
	int fit = d.smem_sm / (smem_of(c.bn, nt, c.stages) + 1024);
	if (fit < 1)
		fit = 1;
	int64_t wave = wave_ctas(q, c, d);
	if (wave <= 0 || wave > (int64_t)d.sms * fit)
		wave = (int64_t)d.sms * fit;
	int64_t waves = (ctas + wave - 1) / wave;
	int64_t active = ctas < d.sms ? ctas : d.sms;
	int64_t in_wave = ctas < wave ? ctas : wave;
	int64_t per_sm = (in_wave + d.sms - 1) / d.sms; /* CTAs an SM holds at once */
	double share = bw / (double)active;
	if (share > bw_sm)
		share = bw_sm;
	double cta_bytes =
	        (double)k_per(q, c.split) * BK * (c.bn + 0.5 * (double)(q->m < nt ? q->m : nt));
	double t = (double)waves * (double)per_sm * cta_bytes / share * 1e6;
	t += per_wave * (double)waves;
	if (c.split > 1)
		t += per_split;
	return t;
}

tk_choice choice_of(const Config &c)
{
	tk_choice ch;
	memset(&ch, 0, sizeof(ch));
	tk_choice_one(&ch, TK_CHOICE_EXACT, TK_FP8_KERNEL_DECODE);
	ch.v[1] = c.split;
	ch.v[2] = c.bn;
	ch.v[3] = c.stages;
	return ch;
}

/*
 * The search space: weight tiles of 128 and 64 rows, split 1..8 (those that
 * give every CTA some K, at most 4 CTAs an SM), each with the deepest ring
 * one CTA an SM allows, and when there are more CTAs than SMs also the
 * deepest that two allow. Writes up to max of them, the model's cheapest
 * first, and returns how many there are.
 */
int search(const tk_fp8_problem *q, const Limits &d, tk_choice *out, int max)
{
	const int nt = token_tile(q->m);
	Config list[2 * MAX_CLUSTER * 2];
	double cost[2 * MAX_CLUSTER * 2];
	int n = 0;
	for (int bn : kRowTiles) {
		int64_t tiles = n_tiles(q, bn) * q->batch;
		for (int split = 1; split <= MAX_CLUSTER; split++) {
			if (k_per(q, split) == 0 || (split > 1 && tiles * split > 4 * d.sms))
				continue;
			int deep = stages_within(bn, nt, d.smem_block);
			int two = tiles * split > d.sms
			                  ? stages_within(bn, nt, d.smem_sm / 2 - 2048)
			                  : 0;
			int variants[2] = { deep, two == deep ? 0 : two };
			for (int v = 0; v < 2; v++) {
				Config c = { split, bn, variants[v] };
				if (c.stages < 2 || !config_ok(q, c, d))
					continue;
				list[n] = c;
				cost[n] = model_us(q, c, d);
				n++;
			}
		}
	}
	/* cheapest first; ties (within 0.1%) keep their order */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cost[j] < cost[j - 1] * 0.999; j--) {
			Config tc = list[j];
			double t = cost[j];
			list[j] = list[j - 1];
			cost[j] = cost[j - 1];
			list[j - 1] = tc;
			cost[j - 1] = t;
		}
	for (int i = 0; i < n && i < max; i++)
		out[i] = choice_of(list[i]);
	return n;
}

/* A 3-D map of e4m3 rows (inner bytes, pitch ld) for 128 x rows-byte boxes, 128-byte swizzle. */
bool fp8_rows_map(CUtensorMap *map, const void *ptr, int64_t inner, int64_t outer, int64_t batch,
                  int64_t ld, int64_t bstride, int rows)
{
	PFN_cuTensorMapEncodeTiled_v12000 encode = tk_sm90::encode_fn();
	if (encode == nullptr)
		return false;
	cuuint64_t dims[3] = { (cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch };
	cuuint64_t strides[2] = { (cuuint64_t)ld, (cuuint64_t)(batch > 1 ? bstride : ld * outer) };
	cuuint32_t box[3] = { (cuuint32_t)BK, (cuuint32_t)rows, 1 };
	cuuint32_t estr[3] = { 1, 1, 1 };
	return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void *>(ptr), dims, strides,
	              box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
	              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* 1 when every c, residual and bias access can be 16 bytes wide. */
int vec_ok(const tk_fp8_problem *q)
{
	bool ok =
	        tkc::aligned16(q->c) && q->ldc % 8 == 0 && (q->batch == 1 || q->c_bstride % 8 == 0);
	if (q->bias != nullptr)
		ok = ok && tkc::aligned16(q->bias);
	if (q->res != nullptr)
		ok = ok && tkc::aligned16(q->res) && q->ldr % 8 == 0;
	return ok;
}

/*
 * The built-in rule asks for the model's choice on every call: kept per
 * shape (device, c's dtype, batch, M, N, K) in 64 slots, a newer shape
 * replacing an older one in its slot.
 */
struct ChoiceCache {
	struct Slot {
		bool used;
		int dev, dt;
		int64_t batch, m, n, k;
		tk_choice best;
		int count;
	} slot[64];
	std::mutex lock;
} choice_cache;

int cached_choice(const tk_fp8_problem *q, const Limits &d, tk_choice *best)
{
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		dev = -1;
	}
	uint64_t h = (uint64_t)q->m * 0x9e3779b97f4a7c15ULL ^
	             (uint64_t)q->n * 0xc2b2ae3d27d4eb4fULL ^
	             (uint64_t)q->k * 0x165667b19e3779f9ULL ^ (uint64_t)q->batch ^ (uint64_t)dev;
	ChoiceCache::Slot *s = &choice_cache.slot[(h >> 29) & 63];
	{
		std::lock_guard<std::mutex> guard(choice_cache.lock);
		if (s->used && s->dev == dev && s->dt == (int)q->c_dtype && s->batch == q->batch &&
		    s->m == q->m && s->n == q->n && s->k == q->k) {
			*best = s->best;
			return s->count;
		}
	}
	int count = search(q, d, best, 1);
	std::lock_guard<std::mutex> guard(choice_cache.lock);
	*s =
	        ChoiceCache::Slot{ true, dev,  (int)q->c_dtype, q->batch, q->m,
		                   q->n, q->k, *best,           count };
	return count;
}

} /* namespace */

extern "C" int tk_fp8_decode_candidates(const tk_fp8_problem *q, tk_choice *out, int max)
{
	if (!decode_serves(q))
		return 0;
	Limits d = limits();
	if (d.sms <= 0)
		return 0;
	return max == 1 ? cached_choice(q, d, out) : search(q, d, out, max);
}

extern "C" int tk_fp8_decode_fits(const tk_fp8_problem *q, const tk_choice *c)
{
	return q != nullptr && c != nullptr && c->v[0] == TK_FP8_KERNEL_DECODE &&
	       config_ok(q, config_of(*c), limits());
}

extern "C" tk_status tk_fp8_decode_launch(const tk_fp8_problem *q, const tk_choice *c, void *stream)
{
	Limits d = limits();
	if (!tk_fp8_decode_fits(q, c))
		return TK_ERR_UNSUPPORTED;
	const Config cfg = config_of(*c);
	const int nt = token_tile(q->m), bn = cfg.bn, split = cfg.split;
	const void *fn = kernel_of(q->c_dtype, bn, nt);
	if (fn == nullptr)
		return TK_ERR_UNSUPPORTED;

	CUtensorMap map_w, map_x;
	memset(&map_w, 0, sizeof(map_w));
	memset(&map_x, 0, sizeof(map_x));
	if (!fp8_rows_map(&map_w, q->b, q->k, q->n, q->batch, q->ldb, q->b_bstride, bn) ||
	    !fp8_rows_map(&map_x, q->a, q->k, q->m, q->batch, q->lda, q->a_bstride, nt))
		return TK_ERR_UNSUPPORTED;

	DecodeArgs a = {};
	a.c = q->c;
	a.bias = q->bias;
	a.res = q->res;
	a.ldc = q->ldc;
	a.ldr = q->ldr;
	a.c_bs = q->batch > 1 ? q->c_bstride : 0;
	a.sa = q->sa;
	a.sb = q->sb;
	a.sa_bs = q->sa_bstride;
	a.sb_bs = q->sb_bstride;
	a.layout = q->layout;
	a.m = (int)q->m;
	a.n = (int)q->n;
	a.kbs = (int)q->kblocks;
	a.split = split;
	a.k_per = (int)k_per(q, split);
	a.stages = cfg.stages;
	a.vec = vec_ok(q);
	const int64_t tiles = n_tiles(q, bn);
	/* a grid that leaves half the SMs idle lets the next kernel start at once
	 * (tk_gemm_common::early_trigger's rule) */
	a.trigger = tiles * split * q->batch * 2 <= d.sms;

	if (!allow_smem(fn, q->c_dtype, bn, nt, d))
		return TK_ERR_LAUNCH;
	cudaLaunchConfig_t lc = {};
	cudaLaunchAttribute at[2];
	unsigned nat = 0;
	tkc::cluster_attr(at, &nat, (unsigned)split);
	tkc::pdl_attr(at, &nat);
	lc.gridDim = dim3((unsigned)(tiles * split), (unsigned)q->batch, 1);
	lc.blockDim = dim3(THREADS);
	lc.dynamicSmemBytes = (size_t)smem_of(bn, nt, cfg.stages);
	lc.stream = static_cast<cudaStream_t>(stream);
	lc.attrs = at;
	lc.numAttrs = nat;
	void *args[] = { &map_w, &map_x, &a };
	if (cudaLaunchKernelExC(&lc, fn, args) != cudaSuccess)
		return TK_ERR_LAUNCH;
	return TK_OK;
}
