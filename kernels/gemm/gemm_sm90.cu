/*
 * gemm_sm90.cu - the large-shape GEMM family for Hopper (sm_90a): bf16 and
 * f16 in, f32 accumulation, output rounded once.
 *
 *   c[b] = alpha * a[b] op(b[b]) (+ bias) (+ residual[b])
 *
 * Each CTA has three warpgroups. The producer (warpgroup 0, one thread)
 * streams BM x 64 tiles of a and BN x 64 tiles of b into a ring of shared-
 * memory stages with bulk tensor copies (TMA, 128-byte swizzle); each stage
 * has a "full" mbarrier (the copies' bytes landed) and an "empty" one (its
 * consumers finished reading it). The consumer warpgroups multiply with
 * wgmma straight from the swizzled stages, keeping one stage's products in
 * flight while waiting for the next. Register files are rebalanced with
 * setmaxnreg: the producer needs few.
 *
 * CTAs are persistent: the grid is at most one CTA per multiprocessor, and
 * each walks its units of work (below) in a grouped tile order, `group`
 * tile-rows at a time, so that the CTAs running at once share a and b
 * panels in L2. The producer runs ahead into the next unit while the
 * consumers finish the current one.
 *
 * Two schedules, chosen by the tile height:
 * - BM 128 or 256 (cooperative): both consumer warpgroups work on the same
 *   unit, each on half of its rows; the tensor cores idle while they run the
 *   epilogue.
 * - BM 64 (ping-pong): the consumer warpgroups take alternate units, each a
 *   whole 64-row tile. Their main loops take turns (a pair of "turn"
 *   mbarriers), so one warpgroup's epilogue runs while the other keeps the
 *   tensor cores busy. Best where the epilogue is a large part of a unit:
 *   short K (bmm over heads) and many small tiles.
 *
 * Split-K (split_k S > 1) for the last, partial wave: whole tiles fill the
 * grid as long as they fill it completely; the R tiles left over (R < the
 * grid: 288 tiles on 132 SMs leave 24) are each cut into S equal K ranges
 * (S at most grid / R), one final round of R * S units, so the tail takes
 * about 1 / S of a tile's time instead of a whole one. With fewer tiles than
 * SMs (decode, M <= 128) every tile is split this way. Each CTA of a split
 * tile writes its f32 partial sums to the workspace and counts in on the
 * tile's counter; the last to arrive sums the partials in K order (so the
 * bits do not depend on which came last) and runs the epilogue. No CTA
 * waits for another, and every CTA has at most one split unit, so each
 * owns one partial slot. The counters are cleared before each launch
 * (tkc::clear_words: a one-block kernel in a PDL chain, else a memset).
 * Where every tile is split and the split is at most 8 (cluster ==
 * split_k), the S units of a tile can instead run as one thread block
 * cluster, a unit a CTA: the partial sums then stay in shared memory and
 * rank 0 adds its peers' through distributed shared memory, in the same K
 * order (the same bits), with no workspace, counters or clearing kernel.
 *
 * Epilogue: each consumer scales its accumulators by alpha, stages them as
 * f32 through a small shared buffer, 32 columns at a time, and stores rows
 * with 16-byte writes after adding bias and residual (read the same way);
 * residual may alias c since each element is read and written by one
 * thread. Rows and columns past M and N are masked; past K the copy engine
 * fills zeros. Without a residual, and with N a multiple of 8, tiles of
 * one m64 block a warpgroup (BM 64 and 128) add the bias if any and round
 * into 64 x 32 chunk buffers instead (as many as the ring leaves room
 * for, up to a whole tile), which the copy engine stores to c (TMA,
 * clipped at M and N) while the threads go on: the tensor cores idle less
 * after each tile, and stores stay in flight (short K, as in bmm over
 * heads, is bound by them).
 *
 * Launched with programmatic dependent launch (when tk_cuda_pdl() is on),
 * a CTA may start while the kernel before it still runs, on an SM that
 * kernel leaves idle; every thread waits for that kernel
 * (griddepcontrol.wait) before it reads or writes global memory. A grid
 * that leaves half the SMs idle lets the next kernel launch as soon as it
 * starts (tk_gemm_common::early_trigger); a larger one when it ends.
 */
#include <atomic>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

#include "gemm_common.cuh"
#include "gemm_kinds.h"
#include "sm90.cuh"
#include "tma_map.cuh"

using namespace tk_sm90;

namespace
{

constexpr int BK = 64;         /* k per stage: one 128-byte swizzle row */
constexpr int THREADS = 384;   /* producer + two consumer warpgroups */
constexpr int STAGE_LD = 40;   /* f32 row pitch of the epilogue buffer */
constexpr int STAGE_COLS = 32; /* columns staged per epilogue step */
constexpr int STAGE_BYTES = 64 * STAGE_LD * 4;
constexpr int PRODUCER_REGS = 40; /* 40 * 128 + 232 * 256 <= 64K registers */
constexpr int CONSUMER_REGS = 232;

/* What the kernel needs beyond the two tensor maps. */
struct Sm90Args {
	void *c;
	const void *bias, *res;
	long long ldc, ldr, stride_c, stride_r;
	long long units; /* whole tiles, then split units */
	long long full;  /* units that are whole tiles */
	int m, n, k;
	int tiles_m, tiles_n, tiles; /* tiles counts every batch */
	int group;                   /* tile-rows walked together */
	int split;                   /* K ranges per split tile (1: none) */
	int a_batched, b_batched;    /* 0: one matrix shared by every batch */
	int vec;                     /* c, residual, bias allow 16-byte access */
	int tma_c;                   /* BM <= 128, no residual: store c by TMA */
	int trigger;                 /* PDL: let the next kernel launch at the start */
	int cluster_split;           /* the split units of a tile are one cluster */
	float alpha;
	/* split > 1: a counter per split tile and consumer warpgroup, a
	 * partial tile of ROWS x BN floats per split unit and warpgroup. */
	unsigned *counts;
	float *part;
};

/* Bytes of one TMA store chunk: 64 rows x 32 columns of T. */
constexpr int TMA_CHUNK_BYTES = 64 * STAGE_COLS * 2;
static_assert(STAGE_COLS * 2 == 64, "a chunk row is one row of the 64-byte swizzle");
constexpr int SMEM_MAX = 227 * 1024; /* a CTA's shared memory on sm_90 */

/* Whether BM x BN tiles may store c in TMA chunks: one m64 block a consumer
 * warpgroup and unit (BM 64 and 128), whole 32-column chunks. */
constexpr bool tma_c_tile(int bm, int bn)
{
	return bm <= 128 && bn % STAGE_COLS == 0;
}

template <int BM, int BN, int STAGES> struct Layout {
	static constexpr int A_BYTES = BM * BK * 2;
	static constexpr int B_BYTES = BN * BK * 2;
	static constexpr int RING = STAGES * (A_BYTES + B_BYTES);
	/* barriers and the two consumers' split-K words, and the alignment of
	 * the dynamic window to the swizzle period */
	static constexpr int OTHER = 2 * 8 * STAGES + 16 + 8 + 32 + 1024;
	static constexpr bool TMA_C = tma_c_tile(BM, BN);
	/* Chunk buffers a consumer warpgroup: as many as the ring leaves room
	 * for, up to a whole tile, so that stores in flight cover the memory's
	 * latency (at least two). */
	static constexpr int CHUNK_ROOM = (SMEM_MAX - RING - OTHER) / 2 / TMA_CHUNK_BYTES;
	static constexpr int CHUNKS =
	        !TMA_C || CHUNK_ROOM < 2 ? 2 : (CHUNK_ROOM < BN / 32 ? CHUNK_ROOM : BN / 32);
	/* One consumer warpgroup's epilogue buffer: the f32 staging rows or the
	 * chunks; a multiple of 1024 bytes, so that every chunk starts on the
	 * period of the 64-byte swizzle (512 bytes) the copy engine reads. */
	static constexpr int EPI_WG =
	        CHUNKS * TMA_CHUNK_BYTES > STAGE_BYTES ? CHUNKS *TMA_CHUNK_BYTES : STAGE_BYTES;
	static constexpr int EPI = RING; /* two consumer buffers */
	/* full[], empty[], turn[2], then a split-K word a consumer, then the
	 * cluster split's "ready" and "done" mbarriers, two each */
	static constexpr int BARS = EPI + 2 * EPI_WG;
	static constexpr int WORDS = BARS + 2 * 8 * STAGES + 16;
	static constexpr int CLUSTER_BARS = WORDS + 8;
	static constexpr int BYTES = CLUSTER_BARS + 32;
	/* +1024: the dynamic window is aligned up to the swizzle period. */
	static constexpr int ALLOC = BYTES + 1024;
	static_assert(ALLOC <= SMEM_MAX, "stages do not fit in shared memory");
	static_assert(EPI_WG % 1024 == 0 && RING % 1024 == 0,
	              "the epilogue buffers are misaligned");
	/* A cluster split publishes each consumer's partial tile in the ring. */
	static_assert(BM * BN * 4 <= RING, "the partial tiles do not fit in the ring");
};

/* Rows one consumer warpgroup owns in a unit: the whole tile when ping-pong. */
template <int BM> constexpr int rows_per_wg(void)
{
	return BM == 64 ? 64 : BM / 2;
}

template <typename T, int N, int TB>
__device__ __forceinline__ void wgmma(float (&d)[N / 2], uint64_t da, uint64_t db)
{
	constexpr bool BF = std::is_same<T, __nv_bfloat16>::value;
	if constexpr (N == 64) {
		if constexpr (BF)
			wgmma_m64n64k16_bf16<TB>(d, da, db);
		else
			wgmma_m64n64k16_f16<TB>(d, da, db);
	} else if constexpr (N == 128) {
		if constexpr (BF)
			wgmma_m64n128k16_bf16<TB>(d, da, db);
		else
			wgmma_m64n128k16_f16<TB>(d, da, db);
	} else if constexpr (N == 176) {
		if constexpr (BF)
			wgmma_m64n176k16_bf16<TB>(d, da, db);
		else
			wgmma_m64n176k16_f16<TB>(d, da, db);
	} else if constexpr (N == 192) {
		if constexpr (BF)
			wgmma_m64n192k16_bf16<TB>(d, da, db);
		else
			wgmma_m64n192k16_f16<TB>(d, da, db);
	} else {
		if constexpr (BF)
			wgmma_m64n256k16_bf16<TB>(d, da, db);
		else
			wgmma_m64n256k16_f16<TB>(d, da, db);
	}
}

/* Tile t of the walk: batch, tile-row and tile-column. */
__device__ __forceinline__ void tile_at(const Sm90Args &p, int t, int &b, int &tm, int &tn)
{
	int per = p.tiles_m * p.tiles_n;
	b = t / per;
	int r = t - b * per;
	int span = p.group * p.tiles_n;
	int g = r / span;
	int first = g * p.group;
	int rows = min(p.tiles_m - first, p.group);
	int rr = r - g * span;
	tm = first + rr % rows;
	tn = rr / rows;
}

template <typename T> __device__ __forceinline__ float ld_f32(const T *p)
{
	if constexpr (std::is_same<T, __half>::value)
		return __half2float(*p);
	else
		return __bfloat162float(*p);
}

template <typename T> __device__ __forceinline__ T from_f32(float v)
{
	if constexpr (std::is_same<T, __half>::value)
		return __float2half_rn(v);
	else
		return __float2bfloat16_rn(v);
}

/* 8 elements of T in 16 bytes. */
template <typename T> struct alignas(16) Vec8 {
	T v[8];
};

/*
 * Store 64 x COLS staged f32 values (rows r0.., columns n0..; COLS 32, or
 * 16 for the last chunk of a 176-column tile) of one consumer into c,
 * adding bias and residual. 128 threads, up to 16 elements each.
 */
template <typename T, int COLS>
__device__ __forceinline__ void store_chunk(const Sm90Args &p, const float *stg, int b, int m0,
                                            int n0, int tid)
{
#pragma unroll
	for (int v = 0; v < 2; v++) {
		int idx = tid + 128 * v;
		int r = idx >> 2, c8 = (idx & 3) * 8;
		int gm = m0 + r, gn = n0 + c8;
		if (c8 >= COLS || gm >= p.m || gn >= p.n)
			continue;
		float x[8];
		const float4 *src = reinterpret_cast<const float4 *>(stg + r * STAGE_LD + c8);
		float4 lo = src[0], hi = src[1];
		x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
		x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
		size_t co = (size_t)b * p.stride_c + (size_t)gm * p.ldc + gn;
		size_t ro = (size_t)b * p.stride_r + (size_t)gm * p.ldr + gn;
		T *c = static_cast<T *>(p.c);
		const T *bias = static_cast<const T *>(p.bias);
		const T *res = static_cast<const T *>(p.res);
		if (p.vec && gn + 8 <= p.n) {
			if (bias != nullptr) {
				Vec8<T> bv = *reinterpret_cast<const Vec8<T> *>(bias + gn);
#pragma unroll
				for (int e = 0; e < 8; e++)
					x[e] += ld_f32(&bv.v[e]);
			}
			if (res != nullptr) {
				Vec8<T> rv = *reinterpret_cast<const Vec8<T> *>(res + ro);
#pragma unroll
				for (int e = 0; e < 8; e++)
					x[e] += ld_f32(&rv.v[e]);
			}
			Vec8<T> out;
#pragma unroll
			for (int e = 0; e < 8; e++)
				out.v[e] = from_f32<T>(x[e]);
			*reinterpret_cast<Vec8<T> *>(c + co) = out;
		} else {
#pragma unroll
			for (int e = 0; e < 8; e++) {
				if (gn + e >= p.n)
					break;
				float y = x[e];
				if (bias != nullptr)
					y += ld_f32(bias + gn + e);
				if (res != nullptr)
					y += ld_f32(res + ro + e);
				c[co + e] = from_f32<T>(y);
			}
		}
	}
}

/* Columns of chunk CH of an m64 block of NR accumulators a thread: 32, fewer for the last. */
template <int NR, int CH> constexpr int chunk_cols(void)
{
	return NR * 2 - CH * STAGE_COLS < STAGE_COLS ? NR * 2 - CH * STAGE_COLS : STAGE_COLS;
}

/* Stage columns [32 ch, 32 ch + COLS) of one m64 accumulator block, times alpha. */
template <int NR, int CH, int COLS>
__device__ __forceinline__ void stage_chunk(const float (&acc)[NR], float *stg, int row, int colq,
                                            float alpha)
{
#pragma unroll
	for (int jj = 0; jj < COLS / 8; jj++) {
		constexpr int J0 = CH * 4;
		int j = J0 + jj;
		float2 top = make_float2(acc[4 * j] * alpha, acc[4 * j + 1] * alpha);
		float2 bot = make_float2(acc[4 * j + 2] * alpha, acc[4 * j + 3] * alpha);
		*reinterpret_cast<float2 *>(stg + row * STAGE_LD + jj * 8 + colq) = top;
		*reinterpret_cast<float2 *>(stg + (row + 8) * STAGE_LD + jj * 8 + colq) = bot;
	}
}

template <typename T, int NR, int CH>
__device__ __forceinline__ void epilogue_chunks(const Sm90Args &p, const float (&acc)[NR],
                                                float *stg, int bar, int b, int m0, int n0, int tid)
{
	if constexpr (CH * STAGE_COLS < NR * 2) {
		constexpr int COLS = chunk_cols<NR, CH>();
		int warp = tid >> 5, lane = tid & 31;
		named_sync(bar, 128); /* the previous chunk has been read */
		stage_chunk<NR, CH, COLS>(acc, stg, warp * 16 + (lane >> 2), (lane & 3) * 2,
		                          p.alpha);
		named_sync(bar, 128);
		store_chunk<T, COLS>(p, stg, b, m0, n0 + CH * STAGE_COLS, tid);
		epilogue_chunks<T, NR, CH + 1>(p, acc, stg, bar, b, m0, n0, tid);
	}
}

/* One unit of work: tile t (batch folded in), k-tiles [k0, k1); v >= 0 for
 * a split unit (its index among them), -1 for a whole tile. */
struct Unit {
	int t, k0, k1, v;
};

__device__ __forceinline__ Unit unit_at(const Sm90Args &p, long long u, int ktiles)
{
	Unit w;
	if (u < p.full) {
		w.t = (int)u;
		w.v = -1;
		w.k0 = 0;
		w.k1 = ktiles;
		return w;
	}
	w.v = (int)(u - p.full);
	int r = w.v / p.split, slice = w.v - r * p.split;
	w.t = (int)p.full + r;
	w.k0 = (int)((long long)slice * ktiles / p.split);
	w.k1 = (int)((long long)(slice + 1) * ktiles / p.split);
	return w;
}

/* Move a ring position n stages on. */
template <int STAGES> __device__ __forceinline__ void ring_skip(int &s, uint32_t &phase, int n)
{
	int q = (s + n) / STAGES;
	s = s + n - q * STAGES;
	phase ^= (uint32_t)(q & 1);
}

/*
 * The consumer main loop over n k-tiles: wait for each stage, issue its
 * wgmmas, and hand the previous stage back once its products are done.
 * a_off selects this warpgroup's rows of the a tile. Returns the stage
 * still being read (-1: none), for main_tail; the last products may still
 * be in flight.
 */
template <typename T, int BM, int BN, int STAGES, int TB, int MI>
__device__ __forceinline__ int main_loop(float (&acc)[MI][BN / 2], uint32_t base, uint32_t full,
                                         uint32_t empty, uint32_t a_off, int &s, uint32_t &phase,
                                         int n, int tid)
{
	using L = Layout<BM, BN, STAGES>;
	int prev = -1;
	for (int kt = 0; kt < n; kt++) {
		uint32_t sa = base + s * L::A_BYTES + a_off;
		uint32_t sb = base + STAGES * L::A_BYTES + s * L::B_BYTES;
		mbar_wait(full + 8 * s, phase);
		wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < BK / 16; kk++) {
			/* K-major b: 32 bytes per k16 step inside the swizzled row;
			 * N-major b: two 8-row swizzle atoms (2048 bytes) per step,
			 * 64-column atoms 64 * BK * 2 bytes apart. */
			uint64_t db = TB ? sw128_desc(sb + kk * 32, 16, 1024)
			                 : sw128_desc(sb + kk * 2048, 64 * BK * 2, 1024);
#pragma unroll
			for (int mi = 0; mi < MI; mi++) {
				uint64_t da = sw128_desc(sa + mi * 64 * 128 + kk * 32, 16, 1024);
				wgmma<T, BN, 1 - TB>(acc[mi], da, db);
			}
		}
		slot_issued(acc, empty, prev, s, phase, STAGES, tid);
	}
	return prev;
}

/* Wait for the last products and hand back the stage they read. */
template <int MI, int NR>
__device__ __forceinline__ void main_tail(float (&acc)[MI][NR], uint32_t empty, int prev, int tid)
{
	wgmma_wait<0>();
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
		acc_fence(acc[mi]);
	if (prev >= 0 && (tid & 31) == 0)
		mbar_arrive(empty + 8 * prev);
}

/* Two f32 values as the 4 bytes of two T. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float x, float y)
{
	uint32_t u;
	if constexpr (std::is_same<T, __half>::value) {
		__half2 h = __floats2half2_rn(x, y);
		memcpy(&u, &h, 4);
	} else {
		__nv_bfloat162 h = __floats2bfloat162_rn(x, y);
		memcpy(&u, &h, 4);
	}
	return u;
}

/*
 * Columns [32 CH, 32 CH + 32) of one m64 block, times alpha and rounded,
 * into the 64 x 32 chunk buffer at dst: 64-byte rows, as the copy engine
 * reads a box with the 64-byte swizzle (16-byte piece u of row r at
 * u ^ ((r >> 1) & 3)). Unswizzled, the eight rows a warp writes at once
 * fell on 8 of the 32 banks (a 4-way conflict: 46% of the kernel's
 * shared-memory wavefronts on the bmm in Nsight Compute).
 */
template <typename T, int NR, int CH, bool BIAS>
__device__ __forceinline__ void chunk_write(const Sm90Args &p, const float (&acc)[NR], uint32_t dst,
                                            int n0, int tid)
{
	const float alpha = p.alpha;
	int row = (tid >> 5) * 16 + ((tid & 31) >> 2), colq = (tid & 3) * 2;
#pragma unroll
	for (int jj = 0; jj < 4; jj++) {
		constexpr int J0 = CH * 4;
		int j = J0 + jj;
		float x0 = acc[4 * j] * alpha, x1 = acc[4 * j + 1] * alpha;
		float y0 = acc[4 * j + 2] * alpha, y1 = acc[4 * j + 3] * alpha;
		if constexpr (BIAS) {
			/* Columns gn and gn + 1: both below N or both past it (N is
			 * a multiple of 8 on this path, gn even); added after the
			 * scale in f32, as the threads' path adds it. */
			int gn = n0 + CH * STAGE_COLS + jj * 8 + colq;
			if (gn < p.n) {
				const T *bias = static_cast<const T *>(p.bias) + gn;
				float b0 = ld_f32(bias), b1 = ld_f32(bias + 1);
				x0 += b0;
				x1 += b1;
				y0 += b0;
				y1 += b1;
			}
		}
		uint32_t top = pack2<T>(x0, x1);
		uint32_t bot = pack2<T>(y0, y1);
		/* rows row and row + 8 have the same swizzle */
		uint32_t at =
		        dst + row * STAGE_COLS * 2 + ((jj ^ ((row >> 1) & 3)) << 4) + colq * 2;
		asm volatile("st.shared.b32 [%0], %1;" ::"r"(at), "r"(top) : "memory");
		asm volatile("st.shared.b32 [%0], %1;" ::"r"(at + 8 * STAGE_COLS * 2), "r"(bot)
		             : "memory");
	}
}

/* Every chunk of the tile into its own buffer (chunks CH .. the last). */
template <typename T, int NR, int CH, bool BIAS>
__device__ __forceinline__ void tile_write(const Sm90Args &p, const float (&acc)[NR], uint32_t buf,
                                           int n0, int tid)
{
	if constexpr (CH * STAGE_COLS < NR * 2) {
		chunk_write<T, NR, CH, BIAS>(p, acc, buf + CH * TMA_CHUNK_BYTES, n0, tid);
		tile_write<T, NR, CH + 1, BIAS>(p, acc, buf, n0, tid);
	}
}

/* Chunks CH .. the last, each through buffer CH % NB as its own bulk group,
 * once the group NB chunks back has read it. The first chunk of a tile
 * waits for every group before: when NB does not divide the tile's chunks
 * (m64 n256 with a ring of 5: 8 chunks, 3 buffers), the previous tile's
 * last chunks may sit in any buffer, the first included. */
template <typename T, int NR, int NB, int CH, bool BIAS>
__device__ __forceinline__ void chunks_ring(const Sm90Args &p, const float (&acc)[NR],
                                            const CUtensorMap *map_c, uint32_t buf, int bar, int b,
                                            int m0, int n0, int tid)
{
	if constexpr (CH * STAGE_COLS < NR * 2) {
		uint32_t dst = buf + (CH % NB) * TMA_CHUNK_BYTES;
		if (tid == 0)
			bulk_wait_read<CH == 0 ? 0 : NB - 1>();
		named_sync(bar, 128);
		chunk_write<T, NR, CH, BIAS>(p, acc, dst, n0, tid);
		fence_proxy_async();
		named_sync(bar, 128);
		if (tid == 0) {
			tma_store_3d(map_c, dst, n0 + CH * STAGE_COLS, m0, b);
			bulk_commit();
		}
		chunks_ring<T, NR, NB, CH + 1, BIAS>(p, acc, map_c, buf, bar, b, m0, n0, tid);
	}
}

/*
 * The epilogue when c is stored by the copy engine (no residual; BIAS: a
 * bias, added as the chunks are written), through NB chunk buffers of
 * 64 x 32. When they hold the whole tile, every chunk is written at once
 * and thread 0 stores them as one bulk group, after the previous tile's
 * group has read the buffers: two barriers a tile, and a whole tile of
 * stores in flight while the warpgroup goes on. Otherwise the chunks take
 * turns in the buffers. The copy engine clips rows and columns past M and
 * N.
 */
template <typename T, int NR, int NB, bool BIAS>
__device__ __forceinline__ void epilogue_tma(const Sm90Args &p, const float (&acc)[NR],
                                             const CUtensorMap *map_c, uint32_t buf, int bar, int b,
                                             int m0, int n0, int tid)
{
	/* the copy engine stores whole 32-column boxes: tiles of whole chunks only */
	static_assert(NR * 2 % STAGE_COLS == 0, "a partial chunk would spill into the next tile");
	static_assert(NB >= 2, "one chunk buffer would serialize the stores");
	constexpr int CHUNKS = NR * 2 / STAGE_COLS;
	if constexpr (NB >= CHUNKS) {
		if (tid == 0)
			bulk_wait_read<0>();
		named_sync(bar, 128);
		tile_write<T, NR, 0, BIAS>(p, acc, buf, n0, tid);
		fence_proxy_async();
		named_sync(bar, 128);
		if (tid == 0) {
#pragma unroll
			for (int ch = 0; ch < CHUNKS; ch++)
				tma_store_3d(map_c, buf + ch * TMA_CHUNK_BYTES,
				             n0 + ch * STAGE_COLS, m0, b);
			bulk_commit();
		}
	} else {
		chunks_ring<T, NR, NB, 0, BIAS>(p, acc, map_c, buf, bar, b, m0, n0, tid);
	}
}

/*
 * A warpgroup's partial tile in the workspace: float4 q of m64 block mi of
 * thread tid at (mi * NR / 4 + q) * 128 + tid, so that each store and load
 * of the warpgroup covers 2 KB without gaps.
 */
template <int MI, int NR>
__device__ __forceinline__ float4 *part_slot(const Sm90Args &p, int v, int stream)
{
	return reinterpret_cast<float4 *>(p.part) + (size_t)(v * 2 + stream) * MI * NR / 4 * 128;
}

/*
 * Split unit v's K range is done: publish this warpgroup's partial sums and
 * count in; the last of the tile's S units to arrive sums all S partials,
 * its own read back too, in K order, and returns true (it runs the
 * epilogue). The order does not depend on which unit came last, so a
 * product gives the same bits every time (a plan replay equals the op run
 * alone).
 * The 128 threads of one consumer warpgroup; word is a shared word of its
 * own.
 */
template <int MI, int NR>
__device__ __forceinline__ bool split_reduce(const Sm90Args &p, float (&acc)[MI][NR],
                                             volatile unsigned *word, int v, int stream, int bar,
                                             int tid)
{
	int lead = v - v % p.split;
	float4 *dst = part_slot<MI, NR>(p, v, stream);
#pragma unroll
	for (int mi = 0; mi < MI; mi++) {
#pragma unroll
		for (int q = 0; q < NR / 4; q++)
			__stcg(dst + (mi * NR / 4 + q) * 128 + tid,
			       make_float4(acc[mi][4 * q], acc[mi][4 * q + 1], acc[mi][4 * q + 2],
			                   acc[mi][4 * q + 3]));
	}
	__threadfence();
	named_sync(bar, 128); /* also: every thread has read word for the last unit */
	if (tid == 0) {
		unsigned old = atomicAdd(p.counts + (lead / p.split) * 2 + stream, 1u);
		__threadfence();
		*word = old == (unsigned)p.split - 1;
	}
	named_sync(bar, 128);
	if (*word == 0)
		return false;
	__threadfence(); /* the other partials are visible from here on */
#pragma unroll
	for (int mi = 0; mi < MI; mi++) {
#pragma unroll
		for (int i = 0; i < NR; i++)
			acc[mi][i] = 0.0f;
	}
	for (int o = lead; o < lead + p.split; o++) {
		const float4 *src = part_slot<MI, NR>(p, o, stream);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int q = 0; q < NR / 4; q++) {
				float4 x = __ldcg(src + (mi * NR / 4 + q) * 128 + tid);
				acc[mi][4 * q] += x.x;
				acc[mi][4 * q + 1] += x.y;
				acc[mi][4 * q + 2] += x.z;
				acc[mi][4 * q + 3] += x.w;
			}
		}
	}
	return true;
}

/*
 * The same for a split whose `split` units of a tile are one cluster, a
 * unit a CTA (cluster rank = K range): the partial sums stay in shared
 * memory. Each CTA but rank 0 stores this warpgroup's partial tile in its
 * own ring (part, laid out as part_slot's; cooperative: once both
 * warpgroups are done reading the ring), every thread arriving on rank
 * 0's "ready" mbarrier of this warpgroup, then waits on its own "done"
 * until rank 0 has read it. Rank 0 waits for the peers' partials, adds them
 * to its own in rank (K) order, as split_reduce does (the same bits), tells
 * each peer it is done and returns true: it runs the epilogue. No
 * workspace, no counters to clear, no global memory until the epilogue.
 */
template <bool COOP, int MI, int NR>
__device__ __forceinline__ bool cluster_reduce(const Sm90Args &p, float (&acc)[MI][NR],
                                               uint32_t part, uint32_t ready, uint32_t done,
                                               int tid)
{
	uint32_t rank = cluster_rank();
	if (rank != 0) {
		/* Cooperative: the other warpgroup's last products may still read
		 * the ring's stages. */
		if constexpr (COOP)
			named_sync(3, 256);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int q = 0; q < NR / 4; q++)
				st_shared_f4(part + ((mi * NR / 4 + q) * 128 + tid) * 16,
				             make_float4(acc[mi][4 * q], acc[mi][4 * q + 1],
				                         acc[mi][4 * q + 2], acc[mi][4 * q + 3]));
		}
		mbar_arrive_remote(cluster_map(ready, 0));
		mbar_wait_cluster(done, 0);
		return false;
	}
	mbar_wait_cluster(ready, 0);
	for (int o = 1; o < p.split; o++) {
		uint32_t src = cluster_map(part, (uint32_t)o);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int q = 0; q < NR / 4; q++) {
				float4 x =
				        ld_cluster_f4(src + ((mi * NR / 4 + q) * 128 + tid) * 16);
				acc[mi][4 * q] += x.x;
				acc[mi][4 * q + 1] += x.y;
				acc[mi][4 * q + 2] += x.z;
				acc[mi][4 * q + 3] += x.w;
			}
		}
	}
	for (int o = 1; o < p.split; o++)
		mbar_arrive_remote(cluster_map(done, (uint32_t)o));
	return true;
}

/*
 * BM x BN output tiles, STAGES-deep ring; TB 1: b is [N, K] (K-major),
 * TB 0: b is [K, N] (N-major, wgmma's transpose bit). BM 64 runs the
 * ping-pong schedule, larger BM the cooperative one. MI = m64 blocks per
 * consumer warpgroup and unit.
 */
template <typename T, int BM, int BN, int STAGES, int TB>
__global__ void __launch_bounds__(THREADS, 1)
        gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                         const __grid_constant__ CUtensorMap map_b,
                         const __grid_constant__ CUtensorMap map_c, const Sm90Args p)
{
	using L = Layout<BM, BN, STAGES>;
	constexpr bool PP = BM == 64;
	constexpr int ROWS = rows_per_wg<BM>();
	constexpr int MI = ROWS / 64;
	constexpr int NR = BN / 2; /* accumulators per thread per m64 block */
	extern __shared__ uint8_t smem_raw[];
	uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
	                                            ~uintptr_t(1023));
	uint32_t base = smem_addr(smem);
	uint32_t full = base + L::BARS, empty = full + 8 * STAGES, turn = empty + 8 * STAGES;
	int ktiles = (p.k + BK - 1) / BK;

	if (threadIdx.x == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(full + 8 * s, 1);
			/* one arrival per consumer warp that reads the stage */
			mbar_init(empty + 8 * s, PP ? 4 : 8);
		}
		mbar_init(turn, 4);
		mbar_init(turn + 8, 4);
		for (int w = 0; w < 2 && p.cluster_split; w++) {
			/* every thread of the peers' warpgroup w; rank 0's */
			mbar_init(base + L::CLUSTER_BARS + 8 * w, 128 * (p.split - 1));
			mbar_init(base + L::CLUSTER_BARS + 16 + 8 * w, 128);
		}
		fence_mbar_init();
		fence_proxy_async();
	}
	__syncthreads();
	/* A peer arrives on this CTA's barriers only once they are set up. */
	if (p.cluster_split)
		cluster_sync_all();

	if (threadIdx.x < 128) {
		regs_release<PRODUCER_REGS>();
		if (threadIdx.x != 0)
			return;
		tma_prefetch_map(&map_a);
		tma_prefetch_map(&map_b);
		/* Launched with PDL, the CTA may start while the kernel before
		 * runs: nothing is read or written before that one completes. */
		tkc::pdl_wait();
		if (p.trigger)
			tkc::pdl_trigger();
		int s = 0;
		uint32_t phase = 0;
		for (long long u = blockIdx.x; u < p.units; u += gridDim.x) {
			Unit w = unit_at(p, u, ktiles);
			int b, tm, tn;
			tile_at(p, w.t, b, tm, tn);
			int za = p.a_batched ? b : 0, zb = p.b_batched ? b : 0;
			for (int kt = w.k0; kt < w.k1; kt++) {
				uint32_t sa = base + s * L::A_BYTES;
				uint32_t sb = base + STAGES * L::A_BYTES + s * L::B_BYTES;
				mbar_wait(empty + 8 * s, phase ^ 1);
				mbar_arrive_expect_tx(full + 8 * s, L::A_BYTES + L::B_BYTES);
				tma_load_3d(sa, &map_a, full + 8 * s, kt * BK, tm * BM, za);
				if constexpr (TB) {
					tma_load_3d(sb, &map_b, full + 8 * s, kt * BK, tn * BN, zb);
				} else {
#pragma unroll
					for (int j = 0; j < BN / 64; j++)
						tma_load_3d(sb + j * 64 * BK * 2, &map_b,
						            full + 8 * s, tn * BN + 64 * j, kt * BK,
						            zb);
				}
				if (++s == STAGES) {
					s = 0;
					phase ^= 1;
				}
			}
		}
		return;
	}

	regs_claim<CONSUMER_REGS>();
	tkc::pdl_wait(); /* before the epilogue's reads and writes */
	int wg = threadIdx.x / 128 - 1, tid = threadIdx.x & 127;
	float *stg = reinterpret_cast<float *>(smem + L::EPI + wg * L::EPI_WG);
	uint32_t a_off = PP ? 0 : wg * MI * 64 * 128;
	float acc[MI][NR];
	int s = 0;
	uint32_t phase = 0;
	int j = 0; /* this CTA's units so far */
	for (long long u = blockIdx.x; u < p.units; u += gridDim.x, j++) {
		Unit w = unit_at(p, u, ktiles);
		if (PP && (j & 1) != wg) {
			ring_skip<STAGES>(s, phase, w.k1 - w.k0);
			continue;
		}
		/* Ping-pong: wait until the other warpgroup has issued unit j - 1. */
		if (PP && j > 0)
			mbar_wait(turn + 8 * (1 - wg), ((j - 1) >> 1) & 1);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int i = 0; i < NR; i++)
				acc[mi][i] = 0.0f;
			acc_fence(acc[mi]);
		}
		int last = main_loop<T, BM, BN, STAGES, TB, MI>(acc, base, full, empty, a_off, s,
		                                                phase, w.k1 - w.k0, tid);
		/* Every wgmma of this unit is issued: the other warpgroup's may
		 * queue behind them while these finish. */
		if (PP && (tid & 31) == 0)
			mbar_arrive(turn + 8 * wg);
		main_tail<MI, NR>(acc, empty, last, tid);

		/* Split-K: the last of a tile's units to finish runs its epilogue.
		 * Each cooperative warpgroup counts and publishes its own half. */
		if (w.v >= 0 && p.cluster_split) {
			/* one unit a CTA: the ring is idle, and holds this warpgroup's partial */
			uint32_t part = base + (PP ? 0 : wg) * MI * NR * 128 * 4;
			uint32_t ready = base + L::CLUSTER_BARS + 8 * wg;
			if (!cluster_reduce<!PP, MI, NR>(p, acc, part, ready, ready + 16, tid))
				continue;
		} else if (w.v >= 0) {
			unsigned *word = reinterpret_cast<unsigned *>(smem + L::WORDS) + wg;
			if (!split_reduce<MI, NR>(p, acc, word, w.v, PP ? 0 : wg, 1 + wg, tid))
				continue;
		}

		int b, tm, tn;
		tile_at(p, w.t, b, tm, tn);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
			int m0 = tm * BM + (PP ? 0 : wg * ROWS) + mi * 64;
			if (m0 >= p.m)
				continue; /* a block of rows wholly past M: nothing to store */
			bool tma = false;
			if constexpr (L::TMA_C) {
				tma = p.tma_c;
				/* The bias's code apart, so the plain store keeps its own. */
				if (tma && p.bias != nullptr)
					epilogue_tma<T, NR, L::CHUNKS, true>(p, acc[mi], &map_c,
					                                     smem_addr(stg), 1 + wg,
					                                     b, m0, tn * BN, tid);
				else if (tma)
					epilogue_tma<T, NR, L::CHUNKS, false>(
					        p, acc[mi], &map_c, smem_addr(stg), 1 + wg, b, m0,
					        tn * BN, tid);
			}
			if (!tma)
				epilogue_chunks<T, NR, 0>(p, acc[mi], stg, 1 + wg, b, m0, tn * BN,
				                          tid);
		}
	}
	/* Shared memory must outlive the copy engine's reads of it. */
	if (L::TMA_C && p.tma_c && tid == 0)
		bulk_wait_all();
}

} /* namespace */

/* ---- host side ---------------------------------------------------------- */

namespace
{

/*
 * The search space: tile shapes with the deepest ring that fits each, each
 * also split along K (split_k 2..16) where the tiles alone fill the SMs
 * poorly. n192 divides the N of common projections (2112, 6144) where 128
 * and 256 leave a partly idle last wave of tiles, and n176 (2112 again,
 * with 12 tile-columns: 384 tiles of 128 x 176 fill 2.91 waves of 132 SMs
 * where 352 of 128 x 192 fill 2.67) for a K-major b only (an N-major b
 * comes in 64-column atoms); m64 is the ping-pong schedule (the epilogue
 * overlaps the other warpgroup's main loop). m64 n256 comes with a ring of
 * 5 and of 4, m128 n256 of 4 and of 3: the shallower rings leave room for
 * a whole tile of store chunks a warpgroup, for products whose time is
 * writing c (short K).
 */
struct Sm90Shape {
	int bm, bn, stages;
};

/* The tensor maps of a launch; c's only for the TMA-store epilogue. */
struct Sm90Maps {
	CUtensorMap a, b, c;
};

const Sm90Shape SHAPES[] = {
	{ 128, 256, 4 }, { 128, 128, 6 }, { 256, 128, 4 }, { 128, 192, 5 },
	{ 128, 64, 8 },  { 64, 256, 5 },  { 64, 128, 8 },  { 128, 176, 5 },
	{ 64, 256, 4 },  { 128, 256, 3 }, { 64, 64, 12 },
};
constexpr int N_SHAPES = (int)(sizeof(SHAPES) / sizeof(SHAPES[0]));
constexpr int MAX_SPLIT = 16;
constexpr int MAX_CLUSTER = 8; /* the portable cluster size */
/* Split variants offered per shape (good_splits). */
constexpr int SPLITS_PER_SHAPE = 2;

/*
 * What the copy engine and the kernel's indexing need: f16 or bf16; a and b
 * 16-byte aligned with pitches and batch strides in multiples of 16 bytes;
 * sizes that fit 32-bit coordinates; a c per batch.
 */
bool sm90_serves(const tk_gemm_problem *p)
{
	const int64_t lim = INT32_MAX - 512;
	int64_t kb = p->trans_b ? p->k : p->n; /* b's contiguous extent */

	if (p->dtype != TK_F16 && p->dtype != TK_BF16)
		return false;
	if (p->batch < 1 || p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
	    p->k > lim || p->batch > lim)
		return false;
	if (p->a == nullptr || p->b == nullptr || p->c == nullptr)
		return false;
	if (!tkc::aligned16(p->a) || !tkc::aligned16(p->b) || p->lda % 8 != 0 || p->ldb % 8 != 0 ||
	    p->lda < p->k || p->ldb < kb || p->ldc < p->n)
		return false;
	if (p->residual != nullptr && p->ldr < p->n)
		return false;
	if (p->batch > 1 && (p->stride_a % 8 != 0 || p->stride_b % 8 != 0 || p->stride_a < 0 ||
	                     p->stride_b < 0 || p->stride_c <= 0))
		return false;
	/* The copy engine's strides stay under 2^40 bytes. */
	if (p->lda >= (1ll << 39) || p->ldb >= (1ll << 39) || p->stride_a >= (1ll << 39) ||
	    p->stride_b >= (1ll << 39))
		return false;
	/* The most tiles any configuration walks: m64 n64 (split units add < SMs). */
	int64_t tiles = (p->m + 63) / 64 * ((p->n + 63) / 64) * p->batch;
	return tiles <= lim;
}

int sm_count(void)
{
	static std::atomic<int> cache[64];
	int dev = 0, n = 0;
	if (cudaGetDevice(&dev) != cudaSuccess)
		return 0;
	if (dev >= 0 && dev < 64 && (n = cache[dev].load(std::memory_order_relaxed)) > 0)
		return n;
	if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
		return 0;
	if (dev >= 0 && dev < 64)
		cache[dev].store(n, std::memory_order_relaxed);
	return n;
}

/* Launch with PDL when it is on, in clusters of a.split CTAs for a cluster split. */
template <typename T, int BM, int BN, int ST, int TB>
tk_status launch_one(const Sm90Maps &m, const Sm90Args &a, int grid, cudaStream_t stream)
{
	using L = Layout<BM, BN, ST>;
	auto kern = gemm_sm90_kernel<T, BM, BN, ST, TB>;
	static std::atomic<uint64_t> raised{ 0 };
	if (tkc::allow_dynamic_smem(reinterpret_cast<const void *>(kern), L::ALLOC, raised) !=
	    cudaSuccess) {
		(void)cudaGetLastError();
		return TK_ERR_LAUNCH;
	}
	cudaLaunchConfig_t lc = {};
	cudaLaunchAttribute at[2];
	unsigned nat = 0;
	if (a.cluster_split)
		tkc::cluster_attr(at, &nat, (unsigned)a.split);
	tkc::pdl_attr(at, &nat);
	lc.gridDim = dim3((unsigned)grid);
	lc.blockDim = dim3(THREADS);
	lc.dynamicSmemBytes = L::ALLOC;
	lc.stream = stream;
	lc.attrs = at;
	lc.numAttrs = nat;
	if (cudaLaunchKernelEx(&lc, kern, m.a, m.b, m.c, a) != cudaSuccess) {
		(void)cudaGetLastError();
		return TK_ERR_LAUNCH;
	}
	return TK_OK;
}

template <typename T, int TB>
tk_status launch_shape(int shape, const Sm90Maps &m, const Sm90Args &a, int grid, cudaStream_t st)
{
	switch (shape) {
	case 0:
		return launch_one<T, 128, 256, 4, TB>(m, a, grid, st);
	case 1:
		return launch_one<T, 128, 128, 6, TB>(m, a, grid, st);
	case 2:
		return launch_one<T, 256, 128, 4, TB>(m, a, grid, st);
	case 3:
		return launch_one<T, 128, 192, 5, TB>(m, a, grid, st);
	case 4:
		return launch_one<T, 128, 64, 8, TB>(m, a, grid, st);
	case 5:
		return launch_one<T, 64, 256, 5, TB>(m, a, grid, st);
	case 6:
		return launch_one<T, 64, 128, 8, TB>(m, a, grid, st);
	case 7:
		if constexpr (TB == 1)
			return launch_one<T, 128, 176, 5, TB>(m, a, grid, st);
		else
			return TK_ERR_UNSUPPORTED;
	case 8:
		return launch_one<T, 64, 256, 4, TB>(m, a, grid, st);
	case 9:
		return launch_one<T, 128, 256, 3, TB>(m, a, grid, st);
	default:
		return launch_one<T, 64, 64, 12, TB>(m, a, grid, st);
	}
}

template <typename T>
tk_status launch_layout(int shape, int trans_b, const Sm90Maps &m, const Sm90Args &a, int grid,
                        cudaStream_t st)
{
	return trans_b ? launch_shape<T, 1>(shape, m, a, grid, st)
	               : launch_shape<T, 0>(shape, m, a, grid, st);
}

/* A cluster split: cluster == split_k, 2 to MAX_CLUSTER. */
bool cluster_split_of(const tk_gemm_config *cfg)
{
	return cfg->cluster > 1;
}

int shape_of(const tk_gemm_config *cfg)
{
	if (cfg == nullptr || cfg->kind != TK_GEMM_SM90 || cfg->tile_k != BK || cfg->cluster < 0 ||
	    cfg->split_k < 0 || cfg->split_k > MAX_SPLIT)
		return -1;
	if (cluster_split_of(cfg) && (cfg->cluster != cfg->split_k || cfg->cluster > MAX_CLUSTER))
		return -1;
	for (int i = 0; i < N_SHAPES; i++)
		if (SHAPES[i].bm == cfg->tile_m && SHAPES[i].bn == cfg->tile_n &&
		    SHAPES[i].stages == cfg->stages)
			return i;
	return -1;
}

/*
 * How a launch of shape sh spreads out: whole tiles while they fill the
 * grid, then the R left over split `split` ways (at most sms / R, so that
 * they take one round).
 */
struct Sm90Plan {
	int tiles_m, tiles_n, tiles, split, rest, grid;
	long long full, units;
};

void plan_of(const tk_gemm_problem *p, const Sm90Shape &sh, int split, int sms, Sm90Plan *pl)
{
	pl->tiles_m = (int)((p->m + sh.bm - 1) / sh.bm);
	pl->tiles_n = (int)((p->n + sh.bn - 1) / sh.bn);
	pl->tiles = (int)(pl->tiles_m * pl->tiles_n * p->batch);
	pl->rest = pl->tiles % sms;
	pl->split = split;
	if (pl->rest > 0 && pl->split > sms / pl->rest)
		pl->split = sms / pl->rest;
	if (pl->rest == 0 || pl->split < 2) {
		pl->split = 1;
		pl->rest = 0;
	}
	pl->full = pl->tiles - pl->rest;
	pl->units = pl->full + (long long)pl->rest * pl->split;
	pl->grid = (int)(pl->units < sms ? pl->units : sms);
}

/* Workspace a split launch needs: the counters, then the partial tiles. */
size_t counts_bytes(const Sm90Plan &pl)
{
	return ((size_t)pl.rest * 2 * sizeof(unsigned) + 255) / 256 * 256;
}

size_t split_bytes(const Sm90Shape &sh, const Sm90Plan &pl)
{
	if (pl.split <= 1)
		return 0;
	size_t rows = sh.bm == 64 ? 64 : (size_t)sh.bm / 2;
	return counts_bytes(pl) + (size_t)pl.rest * pl.split * 2 * rows * sh.bn * 4;
}

bool split_fits(const tk_gemm_problem *p, const Sm90Shape &sh, const Sm90Plan &pl)
{
	return pl.split <= 1 || (p->workspace != nullptr && tkc::aligned16(p->workspace) &&
	                         split_bytes(sh, pl) <= p->workspace_bytes);
}

/*
 * Whether plan pl of a split along K can run as a cluster split: every tile
 * split (fewer tiles than SMs), a unit a CTA, at most MAX_CLUSTER units a
 * tile.
 */
bool cluster_plan_ok(const Sm90Plan &pl, int split)
{
	return split >= 2 && split <= MAX_CLUSTER && pl.split == split && pl.full == 0 &&
	       pl.units == pl.grid;
}

/*
 * The splits worth timing for shape sh: when there are at most 8 waves of
 * tiles and the last is less than 90% full (the tail is worth cutting), the
 * largest split that fits one round (K ranges of at least 4 k-tiles, at
 * most MAX_SPLIT) and half of it, each where the workspace holds it. With
 * cluster, the cluster splits instead: only where every tile is split (the
 * tiles alone leave SMs idle), at most MAX_CLUSTER, no workspace needed.
 */
int good_splits(const tk_gemm_problem *p, const Sm90Shape &sh, int sms, int *out, bool cluster)
{
	Sm90Plan pl;
	plan_of(p, sh, cluster ? MAX_CLUSTER : MAX_SPLIT, sms, &pl);
	int64_t ktiles = (p->k + BK - 1) / BK;
	int most = pl.split < ktiles / 4 ? pl.split : (int)(ktiles / 4), n = 0;
	if (pl.split < 2 || pl.rest * 10 >= sms * 9 || pl.tiles > 8 * sms ||
	    (cluster && pl.full != 0))
		return 0;
	for (int split = most; split >= 2 && n < SPLITS_PER_SHAPE; split /= 2) {
		plan_of(p, sh, split, sms, &pl);
		if (cluster ? cluster_plan_ok(pl, split) : split_fits(p, sh, pl))
			out[n++] = split;
	}
	return n;
}

tk_gemm_config config_of(int shape, int split, bool cluster = false)
{
	tk_gemm_config c = {};
	c.kind = TK_GEMM_SM90;
	c.tile_m = SHAPES[shape].bm;
	c.tile_n = SHAPES[shape].bn;
	c.tile_k = BK;
	c.stages = SHAPES[shape].stages;
	c.cluster = cluster ? split : 1;
	c.split_k = split;
	return c;
}

/* Whether shape's tiles take p's b: an N-major b comes in 64-column atoms. */
bool shape_takes(const tk_gemm_problem *p, int shape)
{
	return p->trans_b || SHAPES[shape].bn % 64 == 0;
}

/* Append shape's split variants (cluster splits when cluster) to out (up to
 * max); returns the new count. */
int add_splits(const tk_gemm_problem *p, int shape, int sms, tk_gemm_config *out, int n, int max,
               bool cluster = false)
{
	int splits[SPLITS_PER_SHAPE];
	if (!shape_takes(p, shape))
		return n;
	int ns = good_splits(p, SHAPES[shape], sms, splits, cluster);
	for (int i = 0; i < ns; i++, n++)
		if (n < max)
			out[n] = config_of(shape, splits[i], cluster);
	return n;
}

} /* namespace */

/*
 * The unsplit shapes, then their split variants (those that need workspace
 * only when p brings enough). The split variants of m128 n256 s4 come
 * first: the dispatcher's built-in choice takes the last m128 n256 s4 entry
 * it sees, which stays the unsplit one.
 */
extern "C" int tk_gemm_sm90_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (p == nullptr || !sm90_serves(p))
		return 0;
	int sms = sm_count(), n = 0;
	if (sms <= 0)
		return 0;
	n = add_splits(p, 0, sms, out, n, max);
	for (int i = 0; i < N_SHAPES; i++) {
		if (!shape_takes(p, i))
			continue;
		if (n < max)
			out[n] = config_of(i, 1);
		n++;
	}
	for (int i = 1; i < N_SHAPES; i++)
		n = add_splits(p, i, sms, out, n, max);
	for (int i = 0; i < N_SHAPES; i++)
		n = add_splits(p, i, sms, out, n, max, true);
	return n;
}

extern "C" tk_status tk_gemm_sm90_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                         void *stream)
{
	int shape = shape_of(cfg);
	if (p == nullptr || shape < 0 || !sm90_serves(p) || !shape_takes(p, shape))
		return TK_ERR_UNSUPPORTED;
	const Sm90Shape &sh = SHAPES[shape];
	int sms = sm_count();
	if (sms <= 0)
		return TK_ERR_LAUNCH;
	Sm90Plan pl;
	plan_of(p, sh, cfg->split_k > 1 ? cfg->split_k : 1, sms, &pl);
	bool cluster = cluster_split_of(cfg);
	if (cluster ? !cluster_plan_ok(pl, cfg->split_k) : !split_fits(p, sh, pl))
		return TK_ERR_UNSUPPORTED;
	int64_t nb = p->trans_b ? p->n : p->k, kb = p->trans_b ? p->k : p->n;
	Sm90Maps maps;
	memset(&maps, 0, sizeof(maps));
	if (!make_map(&maps.a, p->dtype, p->a, p->k, p->m, p->stride_a ? p->batch : 1, p->lda,
	              p->stride_a, BK, sh.bm) ||
	    !make_map(&maps.b, p->dtype, p->b, kb, nb, p->stride_b ? p->batch : 1, p->ldb,
	              p->stride_b, BK, p->trans_b ? sh.bn : BK))
		return TK_ERR_UNSUPPORTED;

	Sm90Args a = {};
	tk_gemm_common::common_args(a, p);
	a.k = (int)p->k;
	a.tiles_m = pl.tiles_m;
	a.tiles_n = pl.tiles_n;
	a.tiles = pl.tiles;
	a.units = pl.units;
	a.full = pl.full;
	a.split = pl.split;
	a.trigger = tk_gemm_common::early_trigger(pl.grid, sms);
	/* Walk about sqrt(sms * BN / BM) tile-rows together: the CTAs running at
	 * once then cover a near-square patch of c, reading the least of a and b. */
	int group = 1;
	while ((group + 1) * (group + 1) * sh.bm <= sms * sh.bn)
		group++;
	a.group = group < a.tiles_m ? group : a.tiles_m;
	/* Tiles of one m64 block a warpgroup store c through the copy engine
	 * when the epilogue is a scale and perhaps a bias (a residual is read
	 * by the threads) and N is a multiple of 8, each row of c ending on 16
	 * bytes (docs/kernel-notes.md: a run with N = 257 through this path
	 * came out wrong). */
	a.tma_c =
	        tma_c_tile(sh.bm, sh.bn) && p->residual == nullptr && p->n % 8 == 0 && a.vec &&
	        make_map(&maps.c, p->dtype, p->c, p->n, p->m, p->batch, p->ldc,
	                 p->batch > 1 ? p->stride_c : 0, STAGE_COLS, 64, CU_TENSOR_MAP_SWIZZLE_64B);
	a.cluster_split = cluster;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	if (pl.split > 1 && !cluster) {
		char *ws = static_cast<char *>(p->workspace);
		a.counts = reinterpret_cast<unsigned *>(ws);
		a.part = reinterpret_cast<float *>(ws + counts_bytes(pl));
		if (tkc::clear_words(ws, (size_t)pl.rest * 2, st) != cudaSuccess) {
			(void)cudaGetLastError();
			return TK_ERR_LAUNCH;
		}
	}
	return p->dtype == TK_BF16
	               ? launch_layout<__nv_bfloat16>(shape, p->trans_b, maps, a, pl.grid, st)
	               : launch_layout<__half>(shape, p->trans_b, maps, a, pl.grid, st);
}
