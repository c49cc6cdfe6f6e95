/*
 * gemm_sm90.cu - the large-shape GEMM family for Hopper (sm_90a): bf16 and
 * f16 in, f32 accumulation, output rounded once.
 *
 *   c[b] = alpha * a[b] op(b[b]) (+ bias) (+ residual[b])
 *
 * Each CTA has three warpgroups. The producer (warpgroup 0, one thread)
 * streams BM x 64 tiles of a and BN x 64 tiles of b into a ring of shared-
 * memory stages with bulk tensor copies (TMA, 128-byte swizzle); each stage
 * has a "full" mbarrier (the copies' bytes landed) and an "empty" one (both
 * consumers finished reading it). The two consumer warpgroups each own half
 * of the BM rows and multiply with wgmma straight from the swizzled stages,
 * keeping one stage's products in flight while waiting for the next.
 * Register files are rebalanced with setmaxnreg: the producer needs few.
 *
 * CTAs are persistent: the grid is at most one CTA per multiprocessor, and
 * each walks the output tiles (batch folded into the tile index) in a
 * grouped order, `group` tile-rows at a time, so that the CTAs running at
 * once share a and b panels in L2. The producer runs ahead into the next
 * tile while the consumers finish the current one.
 *
 * Epilogue: each consumer scales its accumulators by alpha, stages them as
 * f32 through a small shared buffer, 32 columns at a time, and stores rows
 * with 16-byte writes after adding bias and residual (read the same way);
 * residual may alias c since each element is read and written by one
 * thread. Rows and columns past M and N are masked; past K the copy engine
 * fills zeros.
 */
#include <atomic>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>
#include <type_traits>

#include "gemm_kinds.h"
#include "gemm_sm90.cuh"

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
	int m, n, k;
	int tiles_m, tiles_n, tiles; /* tiles counts every batch */
	int group;                   /* tile-rows walked together */
	int a_batched, b_batched;    /* 0: one matrix shared by every batch */
	int vec;                     /* c, residual, bias allow 16-byte access */
	float alpha;
};

template <int BM, int BN, int STAGES> struct Layout {
	static constexpr int A_BYTES = BM * BK * 2;
	static constexpr int B_BYTES = BN * BK * 2;
	static constexpr int RING = STAGES * (A_BYTES + B_BYTES);
	static constexpr int EPI = RING;                   /* two consumer buffers */
	static constexpr int BARS = EPI + 2 * STAGE_BYTES; /* full[], then empty[] */
	static constexpr int BYTES = BARS + 2 * 8 * STAGES;
	/* +1024: the dynamic window is aligned up to the swizzle period. */
	static constexpr int ALLOC = BYTES + 1024;
	static_assert(ALLOC <= 227 * 1024, "stages do not fit in shared memory");
};

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
 * Store 64 x 32 staged f32 values (rows r0.., columns n0..) of one consumer
 * into c, adding bias and residual. 128 threads, 16 elements each.
 */
template <typename T>
__device__ __forceinline__ void store_chunk(const Sm90Args &p, const float *stg, int b, int m0,
                                            int n0, int tid)
{
#pragma unroll
	for (int v = 0; v < 2; v++) {
		int idx = tid + 128 * v;
		int r = idx >> 2, c8 = (idx & 3) * 8;
		int gm = m0 + r, gn = n0 + c8;
		if (gm >= p.m || gn >= p.n)
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

/* Stage columns [32 ch, 32 ch + 32) of one m64 accumulator block, times alpha. */
template <int NR, int CH>
__device__ __forceinline__ void stage_chunk(const float (&acc)[NR], float *stg, int row, int colq,
                                            float alpha)
{
#pragma unroll
	for (int jj = 0; jj < 4; jj++) {
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
		int warp = tid >> 5, lane = tid & 31;
		named_sync(bar, 128); /* the previous chunk has been read */
		stage_chunk<NR, CH>(acc, stg, warp * 16 + (lane >> 2), (lane & 3) * 2, p.alpha);
		named_sync(bar, 128);
		store_chunk<T>(p, stg, b, m0, n0 + CH * STAGE_COLS, tid);
		epilogue_chunks<T, NR, CH + 1>(p, acc, stg, bar, b, m0, n0, tid);
	}
}

/*
 * BM x BN output tiles, STAGES-deep ring; TB 1: b is [N, K] (K-major),
 * TB 0: b is [K, N] (N-major, wgmma's transpose bit). MI = m64 blocks per
 * consumer warpgroup (BM / 128).
 */
template <typename T, int BM, int BN, int STAGES, int TB>
__global__ void __launch_bounds__(THREADS, 1)
        gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a,
                         const __grid_constant__ CUtensorMap map_b, const Sm90Args p)
{
	using L = Layout<BM, BN, STAGES>;
	constexpr int MI = BM / 128;
	constexpr int NR = BN / 2; /* accumulators per thread per m64 block */
	extern __shared__ uint8_t smem_raw[];
	uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
	                                            ~uintptr_t(1023));
	uint32_t base = smem_addr(smem);
	uint32_t full = base + L::BARS, empty = full + 8 * STAGES;
	int ktiles = (p.k + BK - 1) / BK;

	if (threadIdx.x == 0) {
		for (int s = 0; s < STAGES; s++) {
			mbar_init(full + 8 * s, 1);
			mbar_init(empty + 8 * s, 8); /* one arrival per consumer warp */
		}
		mbar_init_fence();
	}
	__syncthreads();

	if (threadIdx.x < 128) {
		regs_release<PRODUCER_REGS>();
		if (threadIdx.x != 0)
			return;
		tma_prefetch_map(&map_a);
		tma_prefetch_map(&map_b);
		int s = 0;
		uint32_t phase = 0;
		for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
			int b, tm, tn;
			tile_at(p, t, b, tm, tn);
			int za = p.a_batched ? b : 0, zb = p.b_batched ? b : 0;
			for (int kt = 0; kt < ktiles; kt++) {
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
	int wg = threadIdx.x / 128 - 1, tid = threadIdx.x & 127;
	float *stg = reinterpret_cast<float *>(smem + L::EPI) + wg * (STAGE_BYTES / 4);
	float acc[MI][NR];
	int s = 0;
	uint32_t phase = 0;
	for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
		int b, tm, tn;
		tile_at(p, t, b, tm, tn);
#pragma unroll
		for (int mi = 0; mi < MI; mi++) {
#pragma unroll
			for (int i = 0; i < NR; i++)
				acc[mi][i] = 0.0f;
			acc_fence(acc[mi]);
		}
		int prev = -1;
		for (int kt = 0; kt < ktiles; kt++) {
			uint32_t sa = base + s * L::A_BYTES + wg * MI * 64 * 128;
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
					uint64_t da =
					        sw128_desc(sa + mi * 64 * 128 + kk * 32, 16, 1024);
					wgmma<T, BN, 1 - TB>(acc[mi], da, db);
				}
			}
			wgmma_commit();
			/* The products of the previous stage are done: hand it back. */
			wgmma_wait<1>();
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
				acc_fence(acc[mi]);
			if (prev >= 0 && (tid & 31) == 0)
				mbar_arrive(empty + 8 * prev);
			prev = s;
			if (++s == STAGES) {
				s = 0;
				phase ^= 1;
			}
		}
		wgmma_wait<0>();
#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			acc_fence(acc[mi]);
		if (prev >= 0 && (tid & 31) == 0)
			mbar_arrive(empty + 8 * prev);

#pragma unroll
		for (int mi = 0; mi < MI; mi++)
			epilogue_chunks<T, NR, 0>(p, acc[mi], stg, 1 + wg, b,
			                          tm * BM + (wg * MI + mi) * 64, tn * BN, tid);
	}
}

} /* namespace */

/* ---- host side ---------------------------------------------------------- */

namespace
{

/*
 * The search space: tile shapes with the deepest ring that fits each.
 * n192 divides the N of common projections (2112, 6144) where 128 and 256
 * leave a partly idle last wave of tiles.
 */
struct Sm90Shape {
	int bm, bn, stages;
};

const Sm90Shape SHAPES[] = {
	{ 128, 256, 4 }, { 128, 128, 6 }, { 256, 128, 4 }, { 128, 192, 5 }, { 128, 64, 8 },
};
constexpr int N_SHAPES = (int)(sizeof(SHAPES) / sizeof(SHAPES[0]));

/*
 * cuTensorMapEncodeTiled, looked up once through the runtime: the daemon
 * links the static runtime only, never the driver library.
 */
PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void)
{
	static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
		void *f = nullptr;
		cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
		                                     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess) {
			(void)cudaGetLastError();
			f = nullptr;
		}
		return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
	}();
	return fn;
}

/*
 * A 3-D map over rows of `inner` contiguous elements (pitch ld), `outer`
 * rows per matrix, `batch` matrices `bstride` elements apart; boxes of
 * box_inner x box_outer with the 128-byte swizzle wgmma reads.
 */
bool make_map(CUtensorMap *map, tk_dtype dt, const void *ptr, int64_t inner, int64_t outer,
              int64_t batch, int64_t ld, int64_t bstride, int box_inner, int box_outer)
{
	PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
	if (encode == nullptr)
		return false;
	cuuint64_t dims[3] = { (cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch };
	cuuint64_t strides[2] = { (cuuint64_t)ld * 2, (cuuint64_t)(batch > 1 ? bstride : ld) * 2 };
	cuuint32_t box[3] = { (cuuint32_t)box_inner, (cuuint32_t)box_outer, 1 };
	cuuint32_t estr[3] = { 1, 1, 1 };
	CUtensorMapDataType ty =
	        dt == TK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
	return encode(map, ty, 3, const_cast<void *>(ptr), dims, strides, box, estr,
	              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
	              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

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
	if (!aligned16(p->a) || !aligned16(p->b) || p->lda % 8 != 0 || p->ldb % 8 != 0 ||
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
	int64_t tiles = (p->m + 127) / 128 * ((p->n + 63) / 64) * p->batch;
	return tiles <= lim;
}

/* 1 when every c, residual and bias access can be 16 bytes wide. */
int sm90_vec_ok(const tk_gemm_problem *p)
{
	bool ok = aligned16(p->c) && p->ldc % 8 == 0 && (p->batch == 1 || p->stride_c % 8 == 0);
	if (p->bias != nullptr)
		ok = ok && aligned16(p->bias);
	if (p->residual != nullptr)
		ok = ok && aligned16(p->residual) && p->ldr % 8 == 0 &&
		     (p->batch == 1 || p->stride_r % 8 == 0);
	return ok;
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

template <typename T, int BM, int BN, int ST, int TB>
tk_status launch_one(const CUtensorMap &ma, const CUtensorMap &mb, const Sm90Args &a, int grid,
                     cudaStream_t stream)
{
	using L = Layout<BM, BN, ST>;
	auto kern = gemm_sm90_kernel<T, BM, BN, ST, TB>;
	/* The shared-memory limit is raised once per device. */
	static std::atomic<uint64_t> raised{ 0 };
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess)
		return TK_ERR_LAUNCH;
	uint64_t bit = 1ull << (dev & 63);
	if (!(raised.load(std::memory_order_acquire) & bit)) {
		if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
		                         L::ALLOC) != cudaSuccess) {
			(void)cudaGetLastError();
			return TK_ERR_LAUNCH;
		}
		raised.fetch_or(bit, std::memory_order_release);
	}
	kern<<<grid, THREADS, L::ALLOC, stream>>>(ma, mb, a);
	return cudaGetLastError() == cudaSuccess ? TK_OK : TK_ERR_LAUNCH;
}

template <typename T, int TB>
tk_status launch_shape(int shape, const CUtensorMap &ma, const CUtensorMap &mb, const Sm90Args &a,
                       int grid, cudaStream_t st)
{
	switch (shape) {
	case 0:
		return launch_one<T, 128, 256, 4, TB>(ma, mb, a, grid, st);
	case 1:
		return launch_one<T, 128, 128, 6, TB>(ma, mb, a, grid, st);
	case 2:
		return launch_one<T, 256, 128, 4, TB>(ma, mb, a, grid, st);
	case 3:
		return launch_one<T, 128, 192, 5, TB>(ma, mb, a, grid, st);
	default:
		return launch_one<T, 128, 64, 8, TB>(ma, mb, a, grid, st);
	}
}

template <typename T>
tk_status launch_layout(int shape, int trans_b, const CUtensorMap &ma, const CUtensorMap &mb,
                        const Sm90Args &a, int grid, cudaStream_t st)
{
	return trans_b ? launch_shape<T, 1>(shape, ma, mb, a, grid, st)
	               : launch_shape<T, 0>(shape, ma, mb, a, grid, st);
}

int shape_of(const tk_gemm_config *cfg)
{
	if (cfg == nullptr || cfg->kind != TK_GEMM_SM90 || cfg->tile_k != BK || cfg->cluster > 1 ||
	    cfg->split_k > 1)
		return -1;
	for (int i = 0; i < N_SHAPES; i++)
		if (SHAPES[i].bm == cfg->tile_m && SHAPES[i].bn == cfg->tile_n &&
		    SHAPES[i].stages == cfg->stages)
			return i;
	return -1;
}

} /* namespace */

extern "C" int tk_gemm_sm90_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (p == nullptr || !sm90_serves(p))
		return 0;
	for (int i = 0; i < N_SHAPES && i < max; i++) {
		tk_gemm_config c = {};
		c.kind = TK_GEMM_SM90;
		c.tile_m = SHAPES[i].bm;
		c.tile_n = SHAPES[i].bn;
		c.tile_k = BK;
		c.stages = SHAPES[i].stages;
		c.cluster = 1;
		out[i] = c;
	}
	return N_SHAPES;
}

extern "C" tk_status tk_gemm_sm90_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                         void *stream)
{
	int shape = shape_of(cfg);
	if (p == nullptr || shape < 0 || !sm90_serves(p))
		return TK_ERR_UNSUPPORTED;
	const Sm90Shape &sh = SHAPES[shape];
	int64_t nb = p->trans_b ? p->n : p->k, kb = p->trans_b ? p->k : p->n;
	CUtensorMap ma, mb;
	if (!make_map(&ma, p->dtype, p->a, p->k, p->m, p->stride_a ? p->batch : 1, p->lda,
	              p->stride_a, BK, sh.bm) ||
	    !make_map(&mb, p->dtype, p->b, kb, nb, p->stride_b ? p->batch : 1, p->ldb, p->stride_b,
	              BK, p->trans_b ? sh.bn : BK))
		return TK_ERR_UNSUPPORTED;

	int sms = sm_count();
	if (sms <= 0)
		return TK_ERR_LAUNCH;
	Sm90Args a = {};
	a.c = p->c;
	a.bias = p->bias;
	a.res = p->residual;
	a.ldc = p->ldc;
	a.ldr = p->ldr;
	a.stride_c = p->batch > 1 ? p->stride_c : 0;
	a.stride_r = p->batch > 1 ? p->stride_r : 0;
	a.m = (int)p->m;
	a.n = (int)p->n;
	a.k = (int)p->k;
	a.tiles_m = (int)((p->m + sh.bm - 1) / sh.bm);
	a.tiles_n = (int)((p->n + sh.bn - 1) / sh.bn);
	a.tiles = (int)(a.tiles_m * a.tiles_n * p->batch);
	/* Walk about sqrt(sms * BN / BM) tile-rows together: the CTAs running at
	 * once then cover a near-square patch of c, reading the least of a and b. */
	int group = 1;
	while ((group + 1) * (group + 1) * sh.bm <= sms * sh.bn)
		group++;
	a.group = group < a.tiles_m ? group : a.tiles_m;
	a.a_batched = p->batch > 1 && p->stride_a != 0;
	a.b_batched = p->batch > 1 && p->stride_b != 0;
	a.vec = sm90_vec_ok(p);
	a.alpha = p->alpha;
	int grid = a.tiles < sms ? a.tiles : sms;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	return p->dtype == TK_BF16
	               ? launch_layout<__nv_bfloat16>(shape, p->trans_b, ma, mb, a, grid, st)
	               : launch_layout<__half>(shape, p->trans_b, ma, mb, a, grid, st);
}
