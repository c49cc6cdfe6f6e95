/*
 * gemm_fp8.cu - the fp8 e4m3 GEMMs on the GPU (gemm_fp8, bmm_fp8), with
 * f32 accumulation on the tensor cores (mma.sync m16n8k32 e4m3, sm_89 and
 * later) and the promotion gemm_fp8.h describes: each 128-wide K block is
 * summed into registers of its own, then added into the f32 total, times
 * the block's scales for block scales. The CPU reference promotes the same
 * way, so the two differ by the order of f32 additions only.
 *
 * Three kernels:
 * - stream (M <= 64): the weight is the traffic, read once with 16-byte
 *   non-allocating loads and fed to the tensor cores straight from
 *   registers. The mma's K order is free as long as a and b agree, so
 *   each lane's 16 contiguous weight bytes are the b fragments of two
 *   mmas, and a (at most 64 rows of one K chunk) is read from shared
 *   memory in the same order. Each warp owns 8 output channels; K is split
 *   over blocks until the grid fills the GPU, the partial sums adding up
 *   in the workspace (f32 atomics) and a second kernel applying the
 *   epilogue. Without a workspace a K that needs splitting goes on below.
 * - wg (M > 64, a and b readable by the copy engine: 16-byte aligned
 *   rows): TMA and wgmma m64n128k32 on 128 x 128 tiles (see fp8_wg).
 * - tile (the rest): mma.sync on 64 x 128 output tiles, 128-wide K steps
 *   (one scale block a step) through a 3-stage cp.async pipeline,
 *   fragments read from rows padded to 144 bytes (free of bank conflicts).
 * stream and tile read rows of a and b that are not 16-byte aligned byte by byte.
 * For M <= 64 with rows the copy engine can read, the built-in rule runs the
 * decode kernel of gemm_fp8_decode.cu instead of stream (TMA, wgmma, split K
 * across a cluster: no workspace).
 */
#include <atomic>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_common.cuh"
#include "gemm_fp8.h"
#include "sm90.cuh"
#include "tma_map.cuh"

namespace
{

using namespace tkc;
using tk_sm90::cp_async16;
using tk_sm90::cp_async_commit;
using tk_sm90::cp_async_wait;
using tk_sm90::smem_addr;

struct Fp8Args {
	int layout;
	int m, n, k, kbs;
	const uint8_t *a, *b;
	int64_t lda, ldb, a_bs, b_bs, c_bs;
	const float *sa, *sb;
	int64_t sa_bs, sb_bs;
	const void *bias, *res;
	int64_t ldr;
	void *c;
	int64_t ldc;
	float *ws;  /* split K: the partial sums [batch, m, n], zeroed; else NULL */
	int kchunk; /* stream: K values per block (a multiple of 128) */
	int vec_a, vec_b;
};

__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
	             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* 16 bytes read once: the weight is streamed, never re-read by this block. */
__device__ __forceinline__ uint4 ld_stream16(const uint8_t *p)
{
	uint4 v;
	asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	             : "l"(p));
	return v;
}

/* 16 bytes from a row that may not be 16-byte aligned. */
__device__ __forceinline__ uint4 ld_bytes16(const uint8_t *p)
{
	uint32_t w[4];
#pragma unroll
	for (int i = 0; i < 4; i++)
		w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
		       (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
	return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ uint32_t lds32(const uint8_t *p)
{
	return *reinterpret_cast<const uint32_t *>(p);
}

/* c[m, n] of batch bi from its f32 total: the scale of a single-scale layout, bias, residual. */
template <typename T>
__device__ __forceinline__ void store_out(const Fp8Args &p, int64_t bi, int m, int n, float total)
{
	const float *sa = p.sa + bi * p.sa_bs, *sb = p.sb + bi * p.sb_bs;
	float v = total;

	if (p.layout == TK_FP8_PER_ROW)
		v = total * (sa[m] * sb[n]);
	else if (p.layout == TK_FP8_PER_TENSOR)
		v = total * (sa[0] * sb[0]);
	if (p.bias)
		v += to_f32(static_cast<const T *>(p.bias)[n]);
	if (p.res)
		v += to_f32(static_cast<const T *>(p.res)[(int64_t)m * p.ldr + n]);
	static_cast<T *>(p.c)[bi * p.c_bs + (int64_t)m * p.ldc + n] = from_f32<T>(v);
}

/* The block scale of row m (0 past M, whose a is zeros anyway) times b's. */
__device__ __forceinline__ float block_scale(const Fp8Args &p, const float *sa, int m, int kb,
                                             float sbk)
{
	return m < p.m ? sa[(int64_t)m * p.kbs + kb] * sbk : 0.0f;
}

/* ---- stream: M <= 64, the weight read once -------------------------------------------- */

constexpr int S_THREADS = 256;
constexpr int S_NPB = 64; /* output channels a block: 8 warps of 8 */
constexpr int S_PAD = 64; /* row stride = kchunk + 64: 16-byte reads free of conflicts */

template <typename T, int MT> __global__ void __launch_bounds__(S_THREADS) fp8_stream(Fp8Args p)
{
	extern __shared__ __align__(16) uint8_t smem[];
	constexpr int ROWS = 16 * MT;
	/* K blocks whose weight loads are issued together: 128 bytes a lane (64 for 4 m-tiles,
	 * whose accumulators leave fewer registers) */
	constexpr int S_UNROLL = MT >= 4 ? 2 : 4;
	const int64_t bi = blockIdx.z;
	const int str = p.kchunk + S_PAD;
	const int kbeg = blockIdx.y * p.kchunk;
	const int kend = min(p.k, kbeg + p.kchunk);
	const int kw = kend - kbeg, nkb = (kw + 127) / 128, kpad = nkb * 128;
	const uint8_t *a = p.a + bi * p.a_bs;
	const float *sa = p.sa + bi * p.sa_bs, *sb = p.sb + bi * p.sb_bs;

	/* a's chunk, rows past M and columns past K zero (the weight there is zero too) */
	for (int i = threadIdx.x; i < ROWS * (kpad / 16); i += S_THREADS) {
		int r = i / (kpad / 16), col = (i % (kpad / 16)) * 16;
		uint4 v = make_uint4(0, 0, 0, 0);
		if (r < p.m && col < kw) {
			const uint8_t *src = a + (int64_t)r * p.lda + kbeg + col;
			v = p.vec_a ? *reinterpret_cast<const uint4 *>(src) : ld_bytes16(src);
		}
		*reinterpret_cast<uint4 *>(smem + r * str + col) = v;
	}
	__syncthreads();

	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int n0 = blockIdx.x * S_NPB + warp * 8, n = n0 + g;
	if (n0 >= p.n)
		return;
	const bool nok = n < p.n;
	const uint8_t *brow = p.b + bi * p.b_bs + (int64_t)(nok ? n : 0) * p.ldb;
	float tot[MT][4], part[MT][4];
#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int i = 0; i < 4; i++)
			tot[mt][i] = 0.0f;

	for (int j0 = 0; j0 < nkb; j0 += S_UNROLL) {
		uint4 w[S_UNROLL][2];
		/* every load of S_UNROLL blocks first */
#pragma unroll
		for (int u = 0; u < S_UNROLL; u++)
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int kk = kbeg + (j0 + u) * 128 + h * 64 + t * 16;
				w[u][h] = make_uint4(0, 0, 0, 0);
				if (nok && j0 + u < nkb && kk < kend)
					w[u][h] = p.vec_b ? ld_stream16(brow + kk)
					                  : ld_bytes16(brow + kk);
			}
#pragma unroll
		for (int u = 0; u < S_UNROLL; u++) {
			const int j = j0 + u;
			if (j >= nkb)
				break;
#pragma unroll
			for (int mt = 0; mt < MT; mt++)
#pragma unroll
				for (int i = 0; i < 4; i++)
					part[mt][i] = 0.0f;
#pragma unroll
			for (int h = 0; h < 2; h++) {
				const int kl = j * 128 + h * 64 + t * 16;
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					uint4 ra = *reinterpret_cast<const uint4 *>(
					        smem + (mt * 16 + g) * str + kl);
					uint4 rb = *reinterpret_cast<const uint4 *>(
					        smem + (mt * 16 + g + 8) * str + kl);
					mma_e4m3(part[mt], ra.x, rb.x, ra.y, rb.y, w[u][h].x,
					         w[u][h].y);
					mma_e4m3(part[mt], ra.z, rb.z, ra.w, rb.w, w[u][h].z,
					         w[u][h].w);
				}
			}
			const int kb = kbeg / 128 + j;
			if (p.layout == TK_FP8_BLOCK) {
				const float sbk = sb[(int64_t)(n0 / 128) * p.kbs + kb];
#pragma unroll
				for (int mt = 0; mt < MT; mt++) {
					float lo = block_scale(p, sa, mt * 16 + g, kb, sbk);
					float hi = block_scale(p, sa, mt * 16 + g + 8, kb, sbk);
					tot[mt][0] += part[mt][0] * lo;
					tot[mt][1] += part[mt][1] * lo;
					tot[mt][2] += part[mt][2] * hi;
					tot[mt][3] += part[mt][3] * hi;
				}
			} else {
#pragma unroll
				for (int mt = 0; mt < MT; mt++)
#pragma unroll
					for (int i = 0; i < 4; i++)
						tot[mt][i] += part[mt][i];
			}
		}
	}

#pragma unroll
	for (int mt = 0; mt < MT; mt++)
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int m = mt * 16 + g + (i >= 2 ? 8 : 0), nn = n0 + t * 2 + (i & 1);
			if (m >= p.m || nn >= p.n)
				continue;
			if (p.ws)
				atomicAdd(p.ws + (bi * p.m + m) * p.n + nn, tot[mt][i]);
			else
				store_out<T>(p, bi, m, nn, tot[mt][i]);
		}
}

/* The epilogue of a split K: c from the summed partials in the workspace (none: K = 0). */
template <typename T> __global__ void fp8_split_epilogue(Fp8Args p, int64_t batch)
{
	const int64_t total = batch * p.m * p.n;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t bi = i / ((int64_t)p.m * p.n), r = i % ((int64_t)p.m * p.n);
		store_out<T>(p, bi, (int)(r / p.n), (int)(r % p.n), p.ws ? p.ws[i] : 0.0f);
	}
}

/* ---- tile: 64 x 128 outputs, 128-wide K steps ----------------------------------------- */

constexpr int T_BM = 64, T_BN = 128, T_BK = 128, T_STR = 144, T_STAGES = 3, T_THREADS = 256;
constexpr int T_A_BYTES = T_BM * T_STR, T_STAGE = T_A_BYTES + T_BN * T_STR;
constexpr int T_SMEM = T_STAGES * T_STAGE;

/* rows x 128 bytes of src from (r0, k0) into dst (stride T_STR), zeros past rows and K. */
__device__ __forceinline__ void tile_rows(uint8_t *dst, const uint8_t *src, int64_t ld, int r0,
                                          int rows, int nrows, int k0, int k, int vec)
{
	for (int i = threadIdx.x; i < rows * 8; i += T_THREADS) {
		int r = i >> 3, col = (i & 7) * 16;
		bool ok = r0 + r < nrows && k0 + col < k;
		const uint8_t *s = ok ? src + (int64_t)(r0 + r) * ld + k0 + col : src;
		uint8_t *d = dst + r * T_STR + col;
		if (vec) {
			cp_async16(smem_addr(d), s, ok);
		} else {
			uint4 v = ok ? ld_bytes16(s) : make_uint4(0, 0, 0, 0);
			*reinterpret_cast<uint4 *>(d) = v;
		}
	}
}

template <typename T> __global__ void __launch_bounds__(T_THREADS) fp8_tile(Fp8Args p)
{
	extern __shared__ __align__(16) uint8_t smem[];
	const int64_t bi = blockIdx.z;
	const int m0 = blockIdx.y * T_BM, n0 = blockIdx.x * T_BN;
	const uint8_t *a = p.a + bi * p.a_bs, *b = p.b + bi * p.b_bs;
	const float *sa = p.sa + bi * p.sa_bs, *sb = p.sb + bi * p.sb_bs;
	const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
	const int wm = warp >> 2, wn = warp & 3;
	const int nkt = p.kbs;
	float tot[2][4][4], part[2][4][4];

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int i = 0; i < 4; i++)
				tot[mt][nt][i] = 0.0f;

	for (int s = 0; s < T_STAGES - 1; s++) {
		if (s < nkt) {
			uint8_t *st = smem + s * T_STAGE;
			tile_rows(st, a, p.lda, m0, T_BM, p.m, s * T_BK, p.k, p.vec_a);
			tile_rows(st + T_A_BYTES, b, p.ldb, n0, T_BN, p.n, s * T_BK, p.k, p.vec_b);
		}
		cp_async_commit();
	}
	for (int kt = 0; kt < nkt; kt++) {
		cp_async_wait<T_STAGES - 2>();
		__syncthreads();
		const int nk = kt + T_STAGES - 1;
		if (nk < nkt) {
			uint8_t *st = smem + (nk % T_STAGES) * T_STAGE;
			tile_rows(st, a, p.lda, m0, T_BM, p.m, nk * T_BK, p.k, p.vec_a);
			tile_rows(st + T_A_BYTES, b, p.ldb, n0, T_BN, p.n, nk * T_BK, p.k, p.vec_b);
		}
		cp_async_commit();
		const uint8_t *sA = smem + (kt % T_STAGES) * T_STAGE, *sB = sA + T_A_BYTES;
#pragma unroll
		for (int mt = 0; mt < 2; mt++)
#pragma unroll
			for (int nt = 0; nt < 4; nt++)
#pragma unroll
				for (int i = 0; i < 4; i++)
					part[mt][nt][i] = 0.0f;
#pragma unroll
		for (int ks = 0; ks < T_BK / 32; ks++) {
			uint32_t af[2][4], bf[4][2];
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const uint8_t *r =
				        sA + (wm * 32 + mt * 16 + g) * T_STR + ks * 32 + t * 4;
				af[mt][0] = lds32(r);
				af[mt][1] = lds32(r + 8 * T_STR);
				af[mt][2] = lds32(r + 16);
				af[mt][3] = lds32(r + 8 * T_STR + 16);
			}
#pragma unroll
			for (int nt = 0; nt < 4; nt++) {
				const uint8_t *r =
				        sB + (wn * 32 + nt * 8 + g) * T_STR + ks * 32 + t * 4;
				bf[nt][0] = lds32(r);
				bf[nt][1] = lds32(r + 16);
			}
#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
					mma_e4m3(part[mt][nt], af[mt][0], af[mt][1], af[mt][2],
					         af[mt][3], bf[nt][0], bf[nt][1]);
		}
		if (p.layout == TK_FP8_BLOCK) {
			const float sbk = sb[(int64_t)(n0 / 128) * p.kbs + kt];
#pragma unroll
			for (int mt = 0; mt < 2; mt++) {
				const int m = m0 + wm * 32 + mt * 16 + g;
				float lo = block_scale(p, sa, m, kt, sbk);
				float hi = block_scale(p, sa, m + 8, kt, sbk);
#pragma unroll
				for (int nt = 0; nt < 4; nt++) {
					tot[mt][nt][0] += part[mt][nt][0] * lo;
					tot[mt][nt][1] += part[mt][nt][1] * lo;
					tot[mt][nt][2] += part[mt][nt][2] * hi;
					tot[mt][nt][3] += part[mt][nt][3] * hi;
				}
			}
		} else {
#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int i = 0; i < 4; i++)
						tot[mt][nt][i] += part[mt][nt][i];
		}
	}
	cp_async_wait<0>();

#pragma unroll
	for (int mt = 0; mt < 2; mt++)
#pragma unroll
		for (int nt = 0; nt < 4; nt++)
#pragma unroll
			for (int i = 0; i < 4; i++) {
				int m = m0 + wm * 32 + mt * 16 + g + (i >= 2 ? 8 : 0);
				int n = n0 + wn * 32 + nt * 8 + t * 2 + (i & 1);
				if (m < p.m && n < p.n)
					store_out<T>(p, bi, m, n, tot[mt][nt][i]);
			}
}

/* ---- wg: Hopper warpgroup MMA for M > 64 ---------------------------------------------- */

/*
 * 128 x 128 output tiles, one a CTA. Warpgroup 0's first thread streams
 * 128 x 128-byte tiles of a and b (one 128-wide K block each: the scale
 * block) into a ring of W_STAGES stages with bulk tensor copies (TMA,
 * 128-byte swizzle, zeros past the edges); warpgroups 1 and 2 multiply 64
 * rows each with wgmma m64n128k32 e4m3 from the swizzled stages (a k32
 * step is 32 bytes along the swizzled row, as a k16 step of bf16), the
 * first of a block's four overwriting the block's accumulators; two sets of
 * those in turn, so that one block's products run while the one before is
 * waited for, its stage handed back and its sums promoted into the f32
 * total.
 */
constexpr int W_BM = 128, W_BN = 128, W_BK = 128, W_STAGES = 5, W_THREADS = 384;
constexpr int W_TILE = 128 * 128; /* bytes of one a or b tile */
constexpr int W_SMEM = 2 * W_STAGES * W_TILE + 16 * W_STAGES + 1024;

__device__ __forceinline__ void wgmma_n128_e4m3(float (&d)[64], uint64_t da, uint64_t db, int acc)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
	             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
	             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
	             "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
	             "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "
	             "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
	             "%62, %63}, %64, %65, p, 1, 1;\n}\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
	               "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
	               "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
	               "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
	               "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
	               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
	               "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
	               "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
	               "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
	               "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
	               "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
	             : "l"(da), "l"(db), "r"(acc));
}

template <typename T>
__global__ void __launch_bounds__(W_THREADS, 1)
        fp8_wg(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
               const Fp8Args p)
{
	extern __shared__ uint8_t smem_raw[];
	uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
	                                            ~uintptr_t(1023));
	const uint32_t base = smem_addr(smem);
	const uint32_t full = base + 2 * W_STAGES * W_TILE, empty = full + 8 * W_STAGES;
	const int bi = blockIdx.z, m0 = blockIdx.y * W_BM, n0 = blockIdx.x * W_BN;
	const int nkt = p.kbs;

	if (threadIdx.x == 0) {
		for (int s = 0; s < W_STAGES; s++) {
			tk_sm90::mbar_init(full + 8 * s, 1);
			/* one arrival per consumer warp */
			tk_sm90::mbar_init(empty + 8 * s, 8);
		}
		tk_sm90::fence_mbar_init();
		tk_sm90::fence_proxy_async();
	}
	__syncthreads();

	if (threadIdx.x < 128) {
		tk_sm90::regs_release<40>();
		if (threadIdx.x != 0)
			return;
		tk_sm90::tma_prefetch_map(&map_a);
		tk_sm90::tma_prefetch_map(&map_b);
		for (int kt = 0; kt < nkt; kt++) {
			const int s = kt % W_STAGES;
			const uint32_t phase = (uint32_t)((kt / W_STAGES) & 1);
			tk_sm90::mbar_wait(empty + 8 * s, phase ^ 1);
			tk_sm90::mbar_arrive_expect_tx(full + 8 * s, 2 * W_TILE);
			tk_sm90::tma_load_3d(base + s * W_TILE, &map_a, full + 8 * s, kt * W_BK, m0,
			                     bi);
			tk_sm90::tma_load_3d(base + (W_STAGES + s) * W_TILE, &map_b, full + 8 * s,
			                     kt * W_BK, n0, bi);
		}
		return;
	}
	tk_sm90::regs_claim<232>();
	const int wg = (threadIdx.x >> 7) - 1, tid = threadIdx.x & 127;
	const int warp = tid >> 5, lane = tid & 31;
	const int r_lo = m0 + wg * 64 + warp * 16 + (lane >> 2), r_hi = r_lo + 8;
	const float *sa = p.sa + bi * p.sa_bs, *sb = p.sb + bi * p.sb_bs;
	/* Two partial accumulators in turn: block kt + 1's wgmmas run while
	 * block kt's partial sums are promoted into the total, so the tensor
	 * cores do not idle through each block's wait and promotion. */
	float tot[64], part0[64], part1[64];

	/* Block kt's four k32 steps into acc, the first overwriting it. */
	auto issue = [&](float(&acc)[64], int kt) {
		const int s = kt % W_STAGES;
		const uint32_t phase = (uint32_t)((kt / W_STAGES) & 1);
		const uint32_t ta = base + s * W_TILE + wg * 64 * 128;
		const uint32_t tb = base + (W_STAGES + s) * W_TILE;
		tk_sm90::mbar_wait(full + 8 * s, phase);
		tk_sm90::wgmma_fence();
#pragma unroll
		for (int kk = 0; kk < W_BK / 32; kk++)
			wgmma_n128_e4m3(acc, tk_sm90::sw128_desc(ta + kk * 32, 16, 1024),
			                tk_sm90::sw128_desc(tb + kk * 32, 16, 1024), kk);
		tk_sm90::wgmma_commit();
	};
	/* Block kt's partial sums (complete) into the total; its stage goes back. */
	auto promote = [&](float(&acc)[64], int kt) {
		tk_sm90::acc_fence(acc);
		if (lane == 0)
			tk_sm90::mbar_arrive(empty + 8 * (kt % W_STAGES));
		if (p.layout == TK_FP8_BLOCK) {
			const float sbk = sb[(int64_t)(n0 / 128) * p.kbs + kt];
			const float lo = block_scale(p, sa, r_lo, kt, sbk);
			const float hi = block_scale(p, sa, r_hi, kt, sbk);
#pragma unroll
			for (int j = 0; j < 16; j++) {
				tot[4 * j] += acc[4 * j] * lo;
				tot[4 * j + 1] += acc[4 * j + 1] * lo;
				tot[4 * j + 2] += acc[4 * j + 2] * hi;
				tot[4 * j + 3] += acc[4 * j + 3] * hi;
			}
		} else {
#pragma unroll
			for (int i = 0; i < 64; i++)
				tot[i] += acc[i];
		}
	};

#pragma unroll
	for (int i = 0; i < 64; i++)
		tot[i] = 0.0f;
	/* Each turn of the loop starts and ends with part0's block in flight, so
	 * that the compiler sees one wgmma group pending at every point and
	 * keeps them asynchronous. K >= 1, so there is a block 0. */
	issue(part0, 0);
	int kt = 0;
	for (; kt + 2 < nkt; kt += 2) {
		issue(part1, kt + 1);
		tk_sm90::wgmma_wait<1>();
		promote(part0, kt);
		issue(part0, kt + 2);
		tk_sm90::wgmma_wait<1>();
		promote(part1, kt + 1);
	}
	if (kt + 1 < nkt) {
		issue(part1, kt + 1);
		tk_sm90::wgmma_wait<1>();
		promote(part0, kt);
		tk_sm90::wgmma_wait<0>();
		promote(part1, kt + 1);
	} else {
		tk_sm90::wgmma_wait<0>();
		promote(part0, kt);
	}
#pragma unroll
	for (int j = 0; j < 16; j++)
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int m = e < 2 ? r_lo : r_hi,
			          n = n0 + 8 * j + 2 * (lane & 3) + (e & 1);
			if (m < p.m && n < p.n)
				store_out<T>(p, bi, m, n, tot[4 * j + e]);
		}
}

/* A 3-D map of e4m3 rows (inner bytes, pitch ld) for 128 x 128-byte boxes, 128-byte swizzle. */
bool fp8_map(CUtensorMap *map, const void *ptr, int64_t inner, int64_t outer, int64_t batch,
             int64_t ld, int64_t bstride)
{
	PFN_cuTensorMapEncodeTiled_v12000 encode = tk_sm90::encode_fn();
	if (encode == nullptr)
		return false;
	cuuint64_t dims[3] = { (cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch };
	cuuint64_t strides[2] = { (cuuint64_t)ld, (cuuint64_t)(batch > 1 ? bstride : ld * outer) };
	cuuint32_t box[3] = { 128, 128, 1 };
	cuuint32_t estr[3] = { 1, 1, 1 };
	return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void *>(ptr), dims, strides,
	              box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
	              CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The wg kernel (wg_ok says where it runs; cudaErrorNotSupported elsewhere). */
template <typename T> cudaError_t launch_wg(const Fp8Args &p, int64_t batch, cudaStream_t s)
{
	static std::atomic<uint64_t> smem_set{ 0 };
	CUtensorMap ma, mb;

	if (!p.vec_a || !p.vec_b || !fp8_map(&ma, p.a, p.k, p.m, batch, p.lda, p.a_bs) ||
	    !fp8_map(&mb, p.b, p.k, p.n, batch, p.ldb, p.b_bs))
		return cudaErrorNotSupported;
	cudaError_t e = allow_dynamic_smem((const void *)fp8_wg<T>, W_SMEM, smem_set);
	if (e != cudaSuccess)
		return e;
	dim3 grid((unsigned)((p.n + W_BN - 1) / W_BN), (unsigned)((p.m + W_BM - 1) / W_BM),
	          (unsigned)batch);
	fp8_wg<T><<<grid, W_THREADS, W_SMEM, s>>>(ma, mb, p);
	return cudaGetLastError();
}

/* ---- launch --------------------------------------------------------------------------- */

Fp8Args args_of(const tk_fp8_problem &q)
{
	Fp8Args p = {};

	p.layout = q.layout;
	p.m = (int)q.m;
	p.n = (int)q.n;
	p.k = (int)q.k;
	p.kbs = (int)q.kblocks;
	p.a = q.a;
	p.b = q.b;
	p.lda = q.lda;
	p.ldb = q.ldb;
	p.a_bs = q.a_bstride;
	p.b_bs = q.b_bstride;
	p.c_bs = q.c_bstride;
	p.sa = q.sa;
	p.sb = q.sb;
	p.sa_bs = q.sa_bstride;
	p.sb_bs = q.sb_bstride;
	p.bias = q.bias;
	p.res = q.res;
	p.ldr = q.ldr;
	p.c = q.c;
	p.ldc = q.ldc;
	/* every row 16-byte aligned: the base, and a row stride of whole vectors */
	p.vec_a = aligned16(q.a) && q.lda % 16 == 0 && q.a_bstride % 16 == 0;
	p.vec_b = aligned16(q.b) && q.ldb % 16 == 0 && q.b_bstride % 16 == 0;
	return p;
}

template <typename T, int MT>
cudaError_t launch_stream(Fp8Args p, int64_t batch, int splits, cudaStream_t s)
{
	dim3 grid((unsigned)((p.n + S_NPB - 1) / S_NPB), (unsigned)splits, (unsigned)batch);
	size_t smem = (size_t)16 * MT * (p.kchunk + S_PAD);

	fp8_stream<T, MT><<<grid, S_THREADS, smem, s>>>(p);
	if (p.ws) {
		int64_t total = batch * p.m * p.n;
		fp8_split_epilogue<T><<<grid_for(total, 256), 256, 0, s>>>(p, batch);
	}
	return cudaGetLastError();
}

template <typename T> cudaError_t launch_tile(Fp8Args p, int64_t batch, cudaStream_t s)
{
	static std::atomic<uint64_t> smem_set{ 0 };
	dim3 grid((unsigned)((p.n + T_BN - 1) / T_BN), (unsigned)((p.m + T_BM - 1) / T_BM),
	          (unsigned)batch);
	cudaError_t e = allow_dynamic_smem((const void *)fp8_tile<T>, T_SMEM, smem_set);

	if (e != cudaSuccess)
		return e;
	fp8_tile<T><<<grid, T_THREADS, T_SMEM, s>>>(p);
	return cudaGetLastError();
}

/* The largest K chunk a stream block holds for MT m-tiles (about 36 KiB of a). */
int stream_max_chunk(int mt)
{
	return mt == 1 ? 2048 : mt == 2 ? 1024 : 512;
}

/* How a call runs: the kernel, for stream its m-tiles, K chunk and split count, for
 * decode its choice (gemm_fp8_decode.cu). */
struct RunPlan {
	int kernel;
	int mt, splits;
	int64_t chunk;
	tk_choice decode;
};

/*
 * The stream kernel with K split in `splits` chunks of whole 128-blocks,
 * where it serves q exactly that way: M <= 64, chunks within what a block
 * holds, and the workspace for the partial sums when split (ws_bytes: what
 * the call has).
 */
bool stream_plan(const tk_fp8_problem &q, size_t ws_bytes, int splits, RunPlan *pl)
{
	if (q.m > 64 || q.k == 0 || splits < 1 || splits > q.kblocks)
		return false;
	const int mt = q.m <= 16 ? 1 : q.m <= 32 ? 2 : 4;
	const int64_t chunk = ((q.kblocks + splits - 1) / splits) * 128;
	if (chunk > stream_max_chunk(mt) || (q.k + chunk - 1) / chunk != splits)
		return false;
	if (splits > 1 && (size_t)(q.batch * q.m * q.n) * sizeof(float) > ws_bytes)
		return false;
	*pl = RunPlan{ TK_FP8_KERNEL_STREAM, mt, splits, chunk, {} };
	return true;
}

/* The stream kernel's built-in split: about four blocks an SM, each at least one K block. */
int stream_splits(const tk_fp8_problem &q)
{
	const int mt = q.m <= 16 ? 1 : q.m <= 32 ? 2 : 4;
	const int64_t nblk = ((q.n + S_NPB - 1) / S_NPB) * q.batch;
	const int64_t want = (4 * (int64_t)sm_count() + nblk - 1) / nblk;
	int64_t chunk = ((q.kblocks + want - 1) / want) * 128;
	if (chunk > stream_max_chunk(mt))
		chunk = stream_max_chunk(mt);
	return (int)((q.k + chunk - 1) / chunk);
}

/* Whether the copy engine can read a and b (the wg kernel's condition). */
bool wg_ok(const Fp8Args &p)
{
	return p.vec_a && p.vec_b && (p.m + W_BM - 1) / W_BM <= 65535 &&
	       tk_sm90::encode_fn() != nullptr;
}

/*
 * The built-in rule: for M <= 64, decode (the weight streamed by TMA into a
 * deep ring, split K summed across a cluster: the bf16 decode GEMM's design)
 * where the copy engine can read a and b (and `decode` allows), else stream
 * where it fits; past that wg, else tile.
 */
RunPlan default_plan(const tk_fp8_problem &q, const Fp8Args &p, size_t ws_bytes, bool decode)
{
	RunPlan pl = {};

	if (decode && q.m <= TK_FP8_DECODE_MAX_M &&
	    tk_fp8_decode_candidates(&q, &pl.decode, 1) > 0) {
		pl.kernel = TK_FP8_KERNEL_DECODE;
		return pl;
	}
	if (q.m <= 64) {
		const int mt = q.m <= 16 ? 1 : q.m <= 32 ? 2 : 4;
		if (stream_plan(q, ws_bytes, stream_splits(q), &pl) ||
		    stream_plan(q, 0,
		                (int)((q.k + stream_max_chunk(mt) - 1) / stream_max_chunk(mt)),
		                &pl))
			return pl;
	}
	return RunPlan{ wg_ok(p) ? TK_FP8_KERNEL_WG : TK_FP8_KERNEL_TILE, 0, 0, 0, {} };
}

/* The plan a choice names, where it can serve the call exactly. */
bool choice_plan(const tk_fp8_problem &q, const Fp8Args &p, size_t ws_bytes, const tk_choice &c,
                 RunPlan *pl)
{
	if (q.k == 0)
		return false;
	if (c.v[0] == TK_FP8_KERNEL_STREAM)
		return stream_plan(q, ws_bytes, c.v[1], pl);
	if (c.v[0] == TK_FP8_KERNEL_WG && wg_ok(p)) {
		*pl = RunPlan{ TK_FP8_KERNEL_WG, 0, 0, 0, {} };
		return true;
	}
	if (c.v[0] == TK_FP8_KERNEL_TILE) {
		*pl = RunPlan{ TK_FP8_KERNEL_TILE, 0, 0, 0, {} };
		return true;
	}
	if (c.v[0] == TK_FP8_KERNEL_DECODE && tk_fp8_decode_fits(&q, &c)) {
		*pl = RunPlan{ TK_FP8_KERNEL_DECODE, 0, 0, 0, c };
		return true;
	}
	return false;
}

template <typename T> tk_status run(const tk_fp8_problem &q, const tk_call *call, cudaStream_t s)
{
	Fp8Args p = args_of(q);
	const size_t ws_bytes = call->workspace ? call->workspace_bytes : 0;
	cudaError_t e = cudaSuccess;
	RunPlan pl;

	if (q.m == 0 || q.n == 0 || q.batch == 0)
		return TK_OK;
	if (q.m > INT32_MAX || q.n > INT32_MAX || q.k > INT32_MAX || q.batch > 65535 ||
	    (q.m + T_BM - 1) / T_BM > 65535)
		return TK_ERR_UNSUPPORTED;
	const bool chosen = call->choice.mode != TK_CHOICE_NONE &&
	                    choice_plan(q, p, ws_bytes, call->choice, &pl);
	if (call->choice.mode == TK_CHOICE_EXACT && !chosen)
		return TK_ERR_UNSUPPORTED;
	launch_begin();
	if (q.k == 0) {
		/* no products: c is the epilogue of zero totals */
		fp8_split_epilogue<T>
		        <<<grid_for(q.batch * q.m * q.n, 256), 256, 0, s>>>(p, q.batch);
		return launch_status();
	}
	if (!chosen)
		pl = default_plan(q, p, ws_bytes, true);
	if (pl.kernel == TK_FP8_KERNEL_DECODE) {
		tk_status st = tk_fp8_decode_launch(&q, &pl.decode, s);
		if (st != TK_ERR_UNSUPPORTED || call->choice.mode == TK_CHOICE_EXACT)
			return st == TK_OK ? launch_status() : st;
		/* the driver refused its tensor maps, nothing launched: the rest of the rule */
		pl = default_plan(q, p, ws_bytes, false);
	}
	if (pl.kernel == TK_FP8_KERNEL_STREAM) {
		p.kchunk = (int)pl.chunk;
		if (pl.splits > 1) {
			p.ws = static_cast<float *>(call->workspace);
			e = cudaMemsetAsync(p.ws, 0, (size_t)(q.batch * q.m * q.n) * sizeof(float),
			                    s);
		}
		if (e == cudaSuccess)
			e = pl.mt == 1   ? launch_stream<T, 1>(p, q.batch, pl.splits, s)
			    : pl.mt == 2 ? launch_stream<T, 2>(p, q.batch, pl.splits, s)
			                 : launch_stream<T, 4>(p, q.batch, pl.splits, s);
	} else if (pl.kernel == TK_FP8_KERNEL_WG) {
		e = launch_wg<T>(p, q.batch, s);
		/* the driver refused the tensor maps: the tile kernel, unless wg was asked exactly */
		if (e == cudaErrorNotSupported && call->choice.mode != TK_CHOICE_EXACT)
			e = launch_tile<T>(p, q.batch, s);
		else if (e == cudaErrorNotSupported)
			return TK_ERR_UNSUPPORTED;
	} else {
		e = launch_tile<T>(p, q.batch, s);
	}
	return e == cudaSuccess ? launch_status() : TK_ERR_LAUNCH;
}

tk_status dispatch(const tk_fp8_problem &q, const tk_call *call, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	return q.c_dtype == TK_BF16 ? run<__nv_bfloat16>(q, call, s) : run<__half>(q, call, s);
}

} /* namespace */

extern "C" tk_status tk_cuda_gemm_fp8(const tk_call *call, void *stream)
{
	tk_fp8_problem q;
	tk_status st = tk_fp8_gemm_parse(call, &q);

	return st == TK_OK ? dispatch(q, call, stream) : st;
}

extern "C" tk_status tk_cuda_bmm_fp8(const tk_call *call, void *stream)
{
	tk_fp8_problem q;
	tk_status st = tk_fp8_bmm_parse(call, &q);

	return st == TK_OK ? dispatch(q, call, stream) : st;
}

extern "C" int tk_gemm_fp8_candidates(const tk_call *call, int batched, tk_choice *out, int max)
{
	tk_fp8_problem q;
	int n = 0, seen[64];
	RunPlan pl;

	if ((batched ? tk_fp8_bmm_parse(call, &q) : tk_fp8_gemm_parse(call, &q)) != TK_OK ||
	    q.k == 0)
		return 0;
	Fp8Args p = args_of(q);
	auto add = [&](int kernel, int splits) {
		if (n < max) {
			tk_choice_one(&out[n], TK_CHOICE_EXACT, kernel);
			out[n].v[1] = splits;
		}
		n++;
	};
	/* the decode kernel's configurations, the model's cheapest first */
	{
		tk_choice dec[64];
		int nd = tk_fp8_decode_candidates(&q, dec, 64);
		for (int i = 0; i < nd && i < 64; i++) {
			if (n < max)
				out[n] = dec[i];
			n++;
		}
	}
	/* every split count the stream kernel can run exactly: the built-in one and powers of two */
	int ns = 0;
	for (int64_t sp = 1; sp <= q.kblocks && ns < 64; sp *= 2) {
		int want[2] = { (int)sp, sp == 1 ? stream_splits(q) : 0 };
		for (int w = 0; w < 2; w++) {
			bool dup = false;
			for (int i = 0; i < ns; i++)
				dup = dup || seen[i] == want[w];
			if (want[w] < 1 || dup || !stream_plan(q, TK_WORKSPACE_BYTES, want[w], &pl))
				continue;
			seen[ns++] = want[w];
			add(TK_FP8_KERNEL_STREAM, want[w]);
		}
	}
	if (wg_ok(p))
		add(TK_FP8_KERNEL_WG, 0);
	add(TK_FP8_KERNEL_TILE, 0);
	return n;
}
