/*
 * gemm_smallm.cu - the small-M GEMM family: M = 1..128, f16 and bf16, b
 * stored [N, K] (trans_b, as nn.Linear keeps its weights). This is the
 * decode path, where the time is what it takes to read the weights once.
 *
 * The product is computed transposed, c^T = b a^T: the weight rows are the
 * tensor cores' M dimension and the tokens their N dimension, so an n8
 * fragment covers 8 tokens and a single token wastes 7/8 of a tiny matrix
 * product instead of 15/16 of a large one.
 *
 * Two kernels, each a CTA of 4 warps owning tile_n weight rows and one K
 * chunk; tile_m is M rounded up to 16, 32, 64 or 128: every token is in
 * every CTA, so each weight byte is read from memory exactly once.
 * - Pipelined (stages 3, 4, 6): a cp.async pipeline of `stages` slots
 *   streams the weight tile [tile_n, tile_k] and the activation tile
 *   [tile_m, tile_k] into swizzled shared memory (16-byte chunk c of row r
 *   lives at c ^ (r & 7), so ldmatrix reads are free of bank conflicts);
 *   warps multiply with ldmatrix + mma.sync m16n8k16 into f32 registers.
 * - Streaming (stages 1, tile_n 64, tile_m <= 64): weights go straight from
 *   memory into mma fragments (smallm_reg_kernel says how).
 * On an H200 the pipelined kernel first measured one memory round trip per
 * K step, whatever its depth (10 to 40% of the weight-read bandwidth); both
 * kernels now start each CTA's (and warp's) K walk at a different place, so
 * that the GPU does not read one column of every row at once.
 *
 * split_k > 1 splits K across CTAs so that the grid fills every SM. The
 * partial f32 tiles are summed in one of two ways:
 * - cluster == split_k (2..8): the split_k CTAs of a tile form one thread
 *   block cluster; each keeps its partial tile in its shared memory, and
 *   after a cluster barrier each CTA reduces a share of the tile's elements
 *   over its peers' shared memory (distributed shared memory) and runs the
 *   epilogue (alpha, bias, residual, one rounding) for them. No workspace.
 * - cluster 0 or 1: each CTA writes its partial tile to the workspace and
 *   bumps a per-tile counter; the CTA that arrives last sums the partials
 *   in K order (the same bits whichever came last) and runs the epilogue,
 *   so no second kernel runs. The counters are
 *   cleared before each launch (tkc::clear_words). Workspace: 256-byte-aligned
 *   counters (batch * n_tiles u32), then batch * split_k * M * N f32
 *   partial sums. Without workspace this form cannot split.
 */
#include <string.h>

#include <cooperative_groups.h>
#include <mutex>

#include "cuda_common.cuh"
#include "gemm_common.cuh"
#include "gemm_kinds.h"
#include "sm90.cuh"

namespace
{

using namespace tkc;

const int kThreads = 128;
const int kMaxSplit = 16;
const int kMaxCluster = 8; /* the portable cluster size */

struct SmallmArgs {
	const void *a, *b, *bias, *res;
	void *c;
	int m, n, k;
	int64_t lda, ldb, ldr, ldc;
	int64_t sa, sb, sr, sc;
	float alpha;
	int tile_k, stages;
	int split, k_per_split; /* CTAs along K, k tiles per CTA */
	int in_cluster;         /* the split CTAs of a tile are one cluster */
	unsigned zero;          /* 0, unknown to the compiler (see smallm_reg_kernel) */
	float *part;
	unsigned *counters;
};

/* ---- PTX wrappers -------------------------------------------------------- */

/*
 * cp_async16: callers pass a src in a line that a real load of the same
 * step reads (past K's end, the row's first line), so zero fills do not
 * pile onto one address.
 */
using tk_sm90::cp_async16;
using tk_sm90::cp_async_commit;
using tk_sm90::cp_async_wait;
using tk_sm90::smem_addr;

/* Wait until at most n groups are pending; n is stages - 2 (1, 2 or 4). */
__device__ __forceinline__ void cp_async_wait_rt(int n)
{
	switch (n) {
	case 1:
		cp_async_wait<1>();
		break;
	case 2:
		cp_async_wait<2>();
		break;
	case 4:
		cp_async_wait<4>();
		break;
	default:
		cp_async_wait<0>();
		break;
	}
}

__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned &r0, unsigned &r1, unsigned &r2,
                                            unsigned &r3)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
	             : "r"(addr));
}

template <typename T> struct Mma;

template <> struct Mma<__half> {
	static __device__ __forceinline__ void run(float *d, const unsigned *a, unsigned b0,
	                                           unsigned b1)
	{
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		             "{%0, %1, %2, %3};\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
};

template <> struct Mma<__nv_bfloat16> {
	static __device__ __forceinline__ void run(float *d, const unsigned *a, unsigned b0,
	                                           unsigned b1)
	{
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		             "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
		             "{%0, %1, %2, %3};\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
};

/* Byte offset of 16-byte chunk `ch` of row `r` in a swizzled tile of tk columns. */
__device__ __forceinline__ unsigned swz(int r, int ch, int tk)
{
	return (unsigned)((r * tk + ((ch ^ (r & 7)) << 3)) * 2);
}

/* ---- the kernel ---------------------------------------------------------- */

/*
 * Warps split the weight rows 4 ways for tile_m <= 32; for 64 and 128
 * tokens they split 2 x 2 (rows x tokens), which halves the activation
 * reads from shared memory per weight byte.
 */
template <int TN, int MT> struct Layout {
	static constexpr int RW = MT >= 64 ? 2 : 4; /* warps along weight rows */
	static constexpr int CW = 4 / RW;           /* warps along tokens */
	static constexpr int FI = TN / RW / 16;     /* m16 fragments per warp */
	static constexpr int FJ = MT / CW / 8;      /* n8 fragments per warp */
};

template <typename T, int TN, int MT>
__device__ __forceinline__ void load_stage(const SmallmArgs &g, unsigned ws, unsigned xs,
                                           const T *b, const T *a, int n0, int kt)
{
	int tk = g.tile_k, shift = tk == 128 ? 4 : 3, cpr = tk >> 3;
	int64_t k0 = (int64_t)kt * tk;

	for (int i = threadIdx.x; i < TN * cpr; i += kThreads) {
		int r = i >> shift, ch = i & (cpr - 1);
		int64_t gk = k0 + (ch << 3);
		bool ok = n0 + r < g.n && gk < g.k;
		const T *src = b + (int64_t)(ok ? n0 + r : n0) * g.ldb + (gk < g.k ? gk : 0);
		cp_async16(ws + swz(r, ch, tk), src, ok);
	}
	for (int i = threadIdx.x; i < MT * cpr; i += kThreads) {
		int r = i >> shift, ch = i & (cpr - 1);
		int64_t gk = k0 + (ch << 3);
		bool ok = r < g.m && gk < g.k;
		const T *src = a + (int64_t)(ok ? r : 0) * g.lda + (gk < g.k ? gk : 0);
		cp_async16(xs + swz(r, ch, tk), src, ok);
	}
}

/* Writes c = alpha * acc (+ bias) (+ residual) for one element. */
template <typename T>
__device__ __forceinline__ void store_out(const SmallmArgs &g, int bz, int m, int n, float acc)
{
	float v = g.alpha * acc;

	if (g.bias != nullptr)
		v += to_f32(static_cast<const T *>(g.bias)[n]);
	if (g.res != nullptr)
		v += to_f32(static_cast<const T *>(g.res)[bz * g.sr + m * g.ldr + n]);
	static_cast<T *>(g.c)[bz * g.sc + m * g.ldc + n] = from_f32<T>(v);
}

/*
 * The end of every small-M kernel: the CTA's f32 tile is in shared memory
 * ([MT][TN + 4], tokens by weight rows); write c, or sum the split-K
 * partials first (in the cluster, or through the workspace).
 */
template <typename T, int TN, int MT>
__device__ __forceinline__ void finish_tile(const SmallmArgs &g, float *tile, int n0, int s, int bz)
{
	const int tid = threadIdx.x, ld = TN + 4;
	const int rows = min(MT, g.m), cols = min(TN, g.n - n0);
	if (g.split == 1) {
		for (int e = tid; e < rows * TN; e += kThreads) {
			int m = e / TN, n = e % TN;
			if (n < cols)
				store_out<T>(g, bz, m, n0 + n, tile[m * ld + n]);
		}
		return;
	}

	if (g.in_cluster) {
		/* Split K in a cluster: rank r finishes every split-th element. */
		namespace cg = cooperative_groups;
		cg::cluster_group cl = cg::this_cluster();
		cl.sync(); /* every partial tile is in its CTA's shared memory */
		for (int e = s * kThreads + tid; e < rows * TN; e += kThreads * g.split) {
			int m = e / TN, n = e % TN;
			if (n >= cols)
				continue;
			float v = 0.0f;
			for (int o = 0; o < g.split; o++)
				v += cl.map_shared_rank(tile, o)[m * ld + n];
			store_out<T>(g, bz, m, n0 + n, v);
		}
		cl.sync(); /* peers may still read this CTA's tile until here */
		return;
	}

	/* Split K: publish this CTA's partial, and let the last one finish. */
	__shared__ int last;
	const int64_t mn = (int64_t)g.m * g.n;
	float *part = g.part + ((int64_t)bz * g.split) * mn;
	for (int e = tid; e < rows * TN; e += kThreads) {
		int m = e / TN, n = e % TN;
		if (n < cols)
			part[s * mn + (int64_t)m * g.n + n0 + n] = tile[m * ld + n];
	}
	__threadfence();
	__syncthreads();
	if (tid == 0) {
		unsigned *cnt = g.counters + (int64_t)bz * gridDim.x + blockIdx.x;
		last = atomicAdd(cnt, 1u) == (unsigned)g.split - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence(); /* the other CTAs' partials are visible from here on */
	/* In K order whichever CTA came last, so every run gives the same bits. */
	for (int e = tid; e < rows * TN; e += kThreads) {
		int m = e / TN, n = e % TN;
		if (n >= cols)
			continue;
		float v = 0.0f;
		const float *p = part + (int64_t)m * g.n + n0 + n;
		for (int o = 0; o < g.split; o++)
			v += o == s ? tile[m * ld + n] : __ldcg(p + o * mn);
		store_out<T>(g, bz, m, n0 + n, v);
	}
}

template <typename T, int TN, int MT>
__global__ void __launch_bounds__(kThreads) smallm_kernel(SmallmArgs g)
{
	using L = Layout<TN, MT>;
	extern __shared__ __align__(128) unsigned char smem[];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wr0 = (warp % L::RW) * (TN / L::RW), wt0 = (warp / L::RW) * (MT / L::CW);
	const int n0 = blockIdx.x * TN, s = blockIdx.y, bz = blockIdx.z;
	const int tk = g.tile_k, stages = g.stages;
	const T *a = static_cast<const T *>(g.a) + bz * g.sa;
	const T *b = static_cast<const T *>(g.b) + bz * g.sb;
	const unsigned wbytes = TN * tk * 2, stage_bytes = (TN + MT) * tk * 2;
	const unsigned base = smem_addr(smem);
	int kt0 = s * g.k_per_split, ktiles = (g.k + tk - 1) / tk;
	int nkt = min(g.k_per_split, ktiles - kt0);
	float acc[L::FI][L::FJ][4];

#pragma unroll
	for (int i = 0; i < L::FI; i++) {
#pragma unroll
		for (int j = 0; j < L::FJ; j++) {
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[i][j][e] = 0.0f;
		}
	}

	/*
	 * Each CTA starts its K walk at its own tile and wraps around (the sum
	 * does not care): CTAs that start together then read different
	 * columns, not one column of every row at once, whose addresses share
	 * their low bits and so crowd the same L2 slices and memory channels.
	 */
	const int rot = nkt > 0 ? (int)((blockIdx.x + 7u * blockIdx.z) % (unsigned)nkt) : 0;

	for (int st = 0; st < stages - 1; st++) {
		if (st < nkt)
			load_stage<T, TN, MT>(g, base + st * stage_bytes,
			                      base + st * stage_bytes + wbytes, b, a, n0,
			                      kt0 + (st + rot) % nkt);
		cp_async_commit();
	}
	for (int t = 0; t < nkt; t++) {
		cp_async_wait_rt(stages - 2);
		__syncthreads(); /* slot t is in; slot t - 1 is free for every warp */
		int nt = t + stages - 1, slot = nt % stages;
		if (nt < nkt)
			load_stage<T, TN, MT>(g, base + slot * stage_bytes,
			                      base + slot * stage_bytes + wbytes, b, a, n0,
			                      kt0 + (nt + rot) % nkt);
		cp_async_commit();

		unsigned ws = base + (t % stages) * stage_bytes, xs = ws + wbytes;
#pragma unroll 2
		for (int kk = 0; kk < tk / 16; kk++) {
			unsigned af[L::FI][4], bf[L::FJ][2];
#pragma unroll
			for (int i = 0; i < L::FI; i++) {
				int r = wr0 + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
				int ch = kk * 2 + (lane >> 4);
				ldmatrix_x4(ws + swz(r, ch, tk), af[i][0], af[i][1], af[i][2],
				            af[i][3]);
			}
#pragma unroll
			for (int j = 0; j < L::FJ; j += 2) {
				int r = wt0 + j * 8 + (lane & 7) + ((lane >> 4) & 1) * 8;
				int ch = kk * 2 + ((lane >> 3) & 1);
				ldmatrix_x4(xs + swz(r, ch, tk), bf[j][0], bf[j][1], bf[j + 1][0],
				            bf[j + 1][1]);
			}
#pragma unroll
			for (int i = 0; i < L::FI; i++) {
#pragma unroll
				for (int j = 0; j < L::FJ; j++)
					Mma<T>::run(acc[i][j], af[i], bf[j][0], bf[j][1]);
			}
		}
	}
	cp_async_wait<0>();
	__syncthreads(); /* the pipeline's shared memory becomes the output tile */

	/* Tile [MT][TN + 4] in f32: the +4 keeps fragment stores conflict-free. */
	float *tile = reinterpret_cast<float *>(smem);
	const int ld = TN + 4;
#pragma unroll
	for (int i = 0; i < L::FI; i++) {
#pragma unroll
		for (int j = 0; j < L::FJ; j++) {
			int r = wr0 + i * 16 + (lane >> 2), t = wt0 + j * 8 + (lane & 3) * 2;
			tile[t * ld + r] = acc[i][j][0];
			tile[(t + 1) * ld + r] = acc[i][j][1];
			tile[t * ld + r + 8] = acc[i][j][2];
			tile[(t + 1) * ld + r + 8] = acc[i][j][3];
		}
	}
	__syncthreads();

	finish_tile<T, TN, MT>(g, tile, n0, s, bz);
}

/* ---- the register-streaming kernel (stages == 1) ----------------------- */

/*
 * 16 bytes of weights, read once: not kept in L1. volatile keeps the loads
 * of a batch ahead of its products in the generated code.
 */
__device__ __forceinline__ uint4 ld_stream(const void *p)
{
	uint4 r;
	asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
	             : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
	             : "l"(p));
	return r;
}

/* 16 bytes of activations, which the CTA's other warps read too: kept in L1. */
__device__ __forceinline__ uint4 ld_shared_input(const void *p)
{
	uint4 r;
	asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
	             : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
	             : "l"(p));
	return r;
}

/*
 * Weights straight from memory into mma fragments, no shared memory
 * pipeline. Warp w of the CTA owns weight rows n0 + 16w .. + 15 over the
 * CTA's K chunk; lane (g, q) = (lane / 4, lane % 4) reads 16 contiguous
 * bytes (k = k0 + 8q .. 8q + 7) of rows g and g + 8, so the four lanes of a
 * row read 64 contiguous bytes and U steps in a row read U * 64. K is
 * permuted inside each 32-wide step (the sum does not care): slots
 * {2q, 2q+1, 2q+8, 2q+9} of the first k16 product are k 8q .. 8q + 3, those
 * of the second 8q + 4 .. 8q + 7. The activations are read in the same
 * order (token g of each n8 fragment), so every fragment register is one
 * 32-bit word of a 16-byte load. The loads of U steps are written ahead of
 * their products (ptxas may still interleave them: 54 to 134 registers);
 * the many warps an SM holds at that size hide the rest of the latency.
 */
template <typename T, int MT, int U>
__global__ void __launch_bounds__(kThreads) smallm_reg_kernel(SmallmArgs g)
{
	constexpr int TN = 64, FJ = MT / 8;
	extern __shared__ __align__(128) unsigned char smem[];
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int gq = lane >> 2, q = lane & 3;
	const int n0 = blockIdx.x * TN, s = blockIdx.y, bz = blockIdx.z;
	const T *a = static_cast<const T *>(g.a) + bz * g.sa;
	const T *b = static_cast<const T *>(g.b) + bz * g.sb;
	const int64_t kbeg = (int64_t)s * g.k_per_split * g.tile_k;
	const int64_t kend = min(kbeg + (int64_t)g.k_per_split * g.tile_k, (int64_t)g.k);
	const int r0 = n0 + warp * 16 + gq;
	const bool v0 = r0 < g.n, v1 = r0 + 8 < g.n;
	const T *w0 = b + (int64_t)(v0 ? r0 : 0) * g.ldb + q * 8;
	const T *w1 = b + (int64_t)(v1 ? r0 + 8 : 0) * g.ldb + q * 8;
	const T *x[FJ];
	bool xv[FJ];
	float acc[FJ][4];

#pragma unroll
	for (int j = 0; j < FJ; j++) {
		int tok = j * 8 + gq;
		xv[j] = tok < g.m;
		x[j] = a + (int64_t)(xv[j] ? tok : 0) * g.lda + q * 8;
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[j][e] = 0.0f;
	}
	/* Each warp starts at its own step and wraps around, as in smallm_kernel. */
	const int steps = (int)((kend - kbeg + 32 * U - 1) / (32 * U));
	const int rot = steps > 0 ? (int)((blockIdx.x * 4u + warp + 7u * blockIdx.z) % steps) : 0;
	for (int i = 0; i < steps; i++) {
		int st = i + rot < steps ? i + rot : i + rot - steps;
		int64_t k = kbeg + (int64_t)st * 32 * U;
		uint4 wa[U], wb[U], xr[U][FJ];
		const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
		for (int u = 0; u < U; u++) {
			/* Straight-line loads from valid addresses, then zeros where
			 * out of range: no branch splits the batch of loads. */
			int64_t kk = k + u * 32;
			bool in = kk + q * 8 < kend; /* K and kend are multiples of 8 */
			int64_t ks = in ? kk : kbeg;
			wa[u] = ld_stream(w0 + ks);
			wb[u] = ld_stream(w1 + ks);
			if (!(v0 && in))
				wa[u] = zero;
			if (!(v1 && in))
				wb[u] = zero;
#pragma unroll
			for (int j = 0; j < FJ; j++) {
				xr[u][j] = ld_shared_input(x[j] + ks);
				if (!(xv[j] && in))
					xr[u][j] = zero;
			}
		}
		/*
		 * The batched builds (U = 8, and U = 4 at tile_m 32) make the first
		 * product wait for every load of the batch, so the compiler cannot
		 * sink loads between products to save registers: all U steps are
		 * in flight at once. The other builds leave the schedule to it.
		 */
		unsigned dep = 0;
		if (U == 8 || (MT == 32 && U == 4)) {
#pragma unroll
			for (int u = 0; u < U; u++) {
				dep |= wa[u].x | wb[u].x;
#pragma unroll
				for (int j = 0; j < FJ; j++)
					dep |= xr[u][j].x;
			}
			dep &= g.zero;
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			const unsigned lo[4] = { wa[u].x | dep, wb[u].x, wa[u].y, wb[u].y };
			const unsigned hi[4] = { wa[u].z, wb[u].z, wa[u].w, wb[u].w };
#pragma unroll
			for (int j = 0; j < FJ; j++) {
				Mma<T>::run(acc[j], lo, xr[u][j].x, xr[u][j].y);
				Mma<T>::run(acc[j], hi, xr[u][j].z, xr[u][j].w);
			}
		}
	}

	float *tile = reinterpret_cast<float *>(smem);
	const int ld = TN + 4;
#pragma unroll
	for (int j = 0; j < FJ; j++) {
		int r = warp * 16 + gq, t = j * 8 + q * 2;
		tile[t * ld + r] = acc[j][0];
		tile[(t + 1) * ld + r] = acc[j][1];
		tile[t * ld + r + 8] = acc[j][2];
		tile[(t + 1) * ld + r + 8] = acc[j][3];
	}
	__syncthreads();
	finish_tile<T, TN, MT>(g, tile, n0, s, bz);
}

/* ---- host side ----------------------------------------------------------- */

typedef void (*smallm_fn)(SmallmArgs);

/* The kernels of one dtype: 8 pipelined (tile_n x tile_m), 5 streaming. */
const int kKernels = 13;

/* Whether the streaming kernel has a build for tile_m and tile_k (= 32 U). */
bool reg_ok(int tm, int tk)
{
	return (tm == 16 && (tk == 128 || tk == 256)) || (tm == 32 && (tk == 64 || tk == 128)) ||
	       (tm == 64 && tk == 64);
}

/* Index of the kernel that runs c among a dtype's kKernels, -1 for none. */
int kernel_id(const tk_gemm_config *c)
{
	int mi = c->tile_m == 16 ? 0 : c->tile_m == 32 ? 1 : c->tile_m == 64 ? 2 : 3;

	if (c->tile_m != 16 && c->tile_m != 32 && c->tile_m != 64 && c->tile_m != 128)
		return -1;
	if (c->stages != 1)
		return c->tile_n == 64 ? mi : c->tile_n == 128 ? 4 + mi : -1;
	if (c->tile_n != 64 || !reg_ok(c->tile_m, c->tile_k))
		return -1;
	if (c->tile_m == 16)
		return c->tile_k == 128 ? 8 : 9;
	if (c->tile_m == 32)
		return c->tile_k == 64 ? 10 : 11;
	return 12;
}

template <typename T> smallm_fn kernel_for(int id)
{
	static const smallm_fn fns[kKernels] = {
		smallm_kernel<T, 64, 16>,    smallm_kernel<T, 64, 32>,
		smallm_kernel<T, 64, 64>,    smallm_kernel<T, 64, 128>,
		smallm_kernel<T, 128, 16>,   smallm_kernel<T, 128, 32>,
		smallm_kernel<T, 128, 64>,   smallm_kernel<T, 128, 128>,
		smallm_reg_kernel<T, 16, 4>, smallm_reg_kernel<T, 16, 8>,
		smallm_reg_kernel<T, 32, 2>, smallm_reg_kernel<T, 32, 4>,
		smallm_reg_kernel<T, 64, 2>,
	};
	return id >= 0 && id < kKernels ? fns[id] : nullptr;
}

smallm_fn kernel_of(tk_dtype dt, int id)
{
	return dt == TK_F16 ? kernel_for<__half>(id) : kernel_for<__nv_bfloat16>(id);
}

int tile_m_for(int64_t m)
{
	return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
}

/* Dynamic shared memory of c: the pipeline's stages, or the output tile. */
size_t smem_bytes(int tn, int tk, int mt, int stages)
{
	size_t pipe = stages > 1 ? (size_t)stages * (tn + mt) * tk * 2 : 0;
	size_t out = (size_t)mt * (tn + 4) * 4;
	return pipe > out ? pipe : out;
}

/* What the device gives (gemm_common.cuh). */
using DeviceLimits = tk_gemm_common::Limits;

DeviceLimits device_limits(void)
{
	return tk_gemm_common::limits();
}

size_t align256(size_t v)
{
	return (v + 255) & ~(size_t)255;
}

int64_t n_tiles(const tk_gemm_problem *p, int tn)
{
	return (p->n + tn - 1) / tn;
}

/* Workspace a split of `split` needs (0 for no split). */
size_t workspace_for(const tk_gemm_problem *p, int tn, int split)
{
	if (split <= 1)
		return 0;
	return align256((size_t)(p->batch * n_tiles(p, tn)) * 4) +
	       (size_t)p->batch * split * p->m * p->n * 4;
}

/* Whether the family can serve p at all: layout, dtype, alignment, sizes. */
bool serves(const tk_gemm_problem *p)
{
	if (p->dtype != TK_F16 && p->dtype != TK_BF16)
		return false;
	if (!p->trans_b || p->m < 1 || p->m > 128 || p->n < 1 || p->k < 8 || p->batch < 1)
		return false;
	if (p->n > 0x7fffffffLL || p->k > 0x7fffffffLL || p->batch > 65535)
		return false;
	if (p->k % 8 || p->lda % 8 || p->ldb % 8 || !aligned16(p->a) || !aligned16(p->b))
		return false;
	return p->batch == 1 || (p->stride_a % 8 == 0 && p->stride_b % 8 == 0);
}

int64_t k_tiles(const tk_gemm_problem *p, int tk)
{
	return (p->k + tk - 1) / tk;
}

/* CTAs along K that a split of `split` really runs (no empty CTAs). */
int64_t split_runs(const tk_gemm_problem *p, int tk, int split)
{
	int64_t kt = k_tiles(p, tk), per = (kt + split - 1) / split;
	return (kt + per - 1) / per;
}

/*
 * Blocks per SM, from registers (read off the compiled kernel once) and
 * shared memory; 4-warp blocks, at most 16.
 */
int blocks_per_sm(const tk_gemm_problem *p, const tk_gemm_config *c, const DeviceLimits &d)
{
	static int regs[2][kKernels];
	int di = p->dtype == TK_F16, id = kernel_id(c);

	if (id < 0)
		return 1;
	if (regs[di][id] == 0) {
		cudaFuncAttributes fa;
		smallm_fn f = kernel_of(p->dtype, id);
		regs[di][id] = f && cudaFuncGetAttributes(&fa, (const void *)f) == cudaSuccess
		                       ? (fa.numRegs > 0 ? fa.numRegs : 128)
		                       : 128;
	}
	/* Registers are allocated per warp in units of 256. */
	int per_warp = (regs[di][id] * 32 + 255) / 256 * 256;
	int by_regs = 65536 / (per_warp * (kThreads / 32));
	int by_smem =
	        d.smem_sm / (int)(smem_bytes(c->tile_n, c->tile_k, c->tile_m, c->stages) + 1024);
	int b = by_regs < by_smem ? by_regs : by_smem;
	return b < 1 ? 1 : (b > 16 ? 16 : b);
}

/*
 * A model of the time of c on p, fitted to the pipelined kernel's first
 * measurements on an H200: a CTA's K step costs at least one loaded memory
 * round trip (about 2.5 us there, however many stages were in flight), or
 * its SM's share of the bandwidth when the blocks on the SM together ask
 * for more; activation rows (read by every CTA of a split at once) cost
 * about 2.5 times their bytes. The grid runs in waves of sms * blocks
 * CTAs; a CTA also pays for filling its pipeline and for the split-K sum.
 */
double model_cost(const tk_gemm_problem *p, const tk_gemm_config *c, const DeviceLimits &d)
{
	const double bw_sm = 30e9, round_trip = c->stages > 1 ? 2.5e-6 : 2.0e-6;
	int64_t runs = split_runs(p, c->tile_k, c->split_k);
	int64_t per = (k_tiles(p, c->tile_k) + runs - 1) / runs;
	int64_t ctas = n_tiles(p, c->tile_n) * runs * p->batch;
	int occ = blocks_per_sm(p, c, d);
	int64_t slots = (int64_t)d.sms * occ, waves = (ctas + slots - 1) / slots;
	int64_t used = ctas < slots ? ctas : slots;
	double per_sm = (double)(used + d.sms - 1) / d.sms; /* blocks sharing an SM */
	double bytes = (double)c->tile_n * c->tile_k * 2.0 +
	               2.5 * (double)(p->m < c->tile_m ? p->m : c->tile_m) * c->tile_k * 2.0;
	double step = per_sm * bytes / bw_sm;
	double fill = c->stages > 1 ? 2.0 : 1.0;
	double sum = runs > 1 ? (c->cluster > 1 ? 0.5 : 1.0) : 0.0;

	if (step < round_trip)
		step = round_trip;
	return (double)waves * ((double)per + fill + sum) * step;
}

bool config_ok(const tk_gemm_problem *p, const tk_gemm_config *c, const DeviceLimits &d)
{
	if (c->kind != TK_GEMM_SMALLM || !serves(p) || c->tile_m != tile_m_for(p->m))
		return false;
	if (c->stages == 1 && (c->tile_n != 64 || !reg_ok(c->tile_m, c->tile_k)))
		return false;
	if (c->stages != 1 && (c->tile_n != 64 && c->tile_n != 128))
		return false;
	if (c->stages != 1 && c->tile_k != 64 && c->tile_k != 128)
		return false;
	if (c->stages != 1 && c->stages != 3 && c->stages != 4 && c->stages != 6)
		return false;
	if (c->split_k < 0 || c->split_k > kMaxSplit || c->cluster < 0 || kernel_id(c) < 0)
		return false;
	if (smem_bytes(c->tile_n, c->tile_k, c->tile_m, c->stages) > (size_t)d.smem_block)
		return false;
	int split = c->split_k < 1 ? 1 : c->split_k;
	if (split > 1 && split_runs(p, c->tile_k, split) != split)
		return false;
	if (c->cluster > 1)
		return c->cluster == split && split <= kMaxCluster &&
		       n_tiles(p, c->tile_n) <= 0x7fffffffLL;
	if (split > 1 && (workspace_for(p, c->tile_n, split) > p->workspace_bytes ||
	                  p->workspace == nullptr || !aligned16(p->workspace)))
		return false;
	return n_tiles(p, c->tile_n) <= 0x7fffffffLL;
}

/* tile_n, tile_k, stages: the pipelined kernel's, then the streaming kernel's (stages 1). */
const int kShapes[][3] = {
	{ 64, 64, 4 },   { 64, 64, 3 },   { 64, 64, 6 },  { 64, 128, 4 }, { 64, 128, 3 },
	{ 64, 128, 6 },  { 128, 64, 4 },  { 128, 64, 3 }, { 128, 64, 6 }, { 128, 128, 4 },
	{ 128, 128, 3 }, { 128, 128, 6 }, { 64, 64, 1 },  { 64, 128, 1 }, { 64, 256, 1 },
};
const int kNumShapes = (int)(sizeof(kShapes) / sizeof(kShapes[0]));

/*
 * The configurations worth trying for p: for each kernel shape (kShapes)
 * that serves it, the model's best without a split, its best split through
 * the workspace and its best split through a cluster (at most 3 x 15).
 * Returns how many there are, writes up to max of them to out and the
 * model's best of all to best.
 */
int search(const tk_gemm_problem *p, const DeviceLimits &d, tk_gemm_config *best,
           tk_gemm_config *out, int max)
{
	double best_cost = 0.0;
	int count = 0;

	for (int si = 0; si < kNumShapes; si++) {
		tk_gemm_config pick[3];
		double cost[3] = { -1.0, -1.0, -1.0 };
		for (int v = 1; v <= kMaxSplit + kMaxCluster - 1; v++) {
			/* v: no split, splits through the workspace, then through clusters. */
			tk_gemm_config c = {};
			bool cl = v > kMaxSplit;
			int group = v == 1 ? 0 : cl ? 2 : 1;
			c.kind = TK_GEMM_SMALLM;
			c.tile_m = tile_m_for(p->m);
			c.tile_n = kShapes[si][0];
			c.tile_k = kShapes[si][1];
			c.stages = kShapes[si][2];
			c.split_k = cl ? v - kMaxSplit + 1 : v;
			c.cluster = cl ? c.split_k : 0;
			if (!config_ok(p, &c, d))
				continue;
			double t = model_cost(p, &c, d);
			if (cost[group] < 0.0 || t < cost[group] * 0.999) {
				pick[group] = c;
				cost[group] = t;
			}
		}
		for (int g = 0; g < 3; g++) {
			if (cost[g] < 0.0)
				continue;
			if (count == 0 || cost[g] < best_cost * 0.999) {
				*best = pick[g];
				best_cost = cost[g];
			}
			if (count < max)
				out[count] = pick[g];
			count++;
		}
	}
	return count;
}

/* The model's choice for the shapes seen last (see gemm_common.cuh). */
tk_gemm_common::Cache choice_cache;

int cached_best(const tk_gemm_problem *p, const DeviceLimits &d, tk_gemm_config *best)
{
	return tk_gemm_common::cached(choice_cache, p, best,
	                              [&d](const tk_gemm_problem *q, tk_gemm_config *b) {
		                              tk_gemm_config none[1];
		                              return search(q, d, b, none, 0);
	                              });
}

} /* namespace */

/*
 * The configurations worth trying for p (see search), the one the cost
 * model prefers first (tk_gemm_builtin takes it when no tuning says
 * otherwise); the rest follow in search order.
 */
extern "C" int tk_gemm_smallm_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	tk_gemm_config best = {};
	int count;

	if (!serves(p))
		return 0;
	DeviceLimits d = device_limits();
	if (max <= 1) {
		count = cached_best(p, d, &best);
		if (count > 0 && max == 1)
			out[0] = best;
		return count;
	}
	/* The best first, then the others in order. */
	count = search(p, d, &best, out + 1, max - 1);
	if (count == 0)
		return 0;
	int w = 1, n = count < max - 1 ? count : max - 1;
	for (int i = 0; i < n; i++) {
		if (memcmp(&out[1 + i], &best, sizeof(best)) != 0)
			out[w++] = out[1 + i];
	}
	out[0] = best;
	return count;
}

extern "C" tk_status tk_gemm_smallm_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                           void *stream)
{
	static std::atomic<uint64_t> raised[2][kKernels];
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	int split = cfg->split_k < 1 ? 1 : cfg->split_k;
	SmallmArgs g;

	DeviceLimits lim = device_limits();
	if (!config_ok(p, cfg, lim))
		return TK_ERR_UNSUPPORTED;
	int id = kernel_id(cfg);
	smallm_fn f = kernel_of(p->dtype, id);
	size_t smem = smem_bytes(cfg->tile_n, cfg->tile_k, cfg->tile_m, cfg->stages);
	if (f == nullptr)
		return TK_ERR_UNSUPPORTED;

	g.a = p->a;
	g.b = p->b;
	g.bias = p->bias;
	g.res = p->residual;
	g.c = p->c;
	g.m = (int)p->m;
	g.n = (int)p->n;
	g.k = (int)p->k;
	g.lda = p->lda;
	g.ldb = p->ldb;
	g.ldr = p->ldr;
	g.ldc = p->ldc;
	g.sa = p->stride_a;
	g.sb = p->stride_b;
	g.sr = p->stride_r;
	g.sc = p->stride_c;
	g.alpha = p->alpha;
	g.tile_k = cfg->tile_k;
	g.stages = cfg->stages;
	g.split = split;
	g.k_per_split = (int)((k_tiles(p, cfg->tile_k) + split - 1) / split);
	g.in_cluster = cfg->cluster > 1;
	g.zero = 0;
	g.counters = static_cast<unsigned *>(p->workspace);
	g.part = nullptr;

	int64_t tiles = n_tiles(p, cfg->tile_n);
	dim3 grid((unsigned)tiles, (unsigned)split, (unsigned)p->batch);

	launch_begin();
	if (tkc::allow_dynamic_smem(reinterpret_cast<const void *>(f), lim.smem_block,
	                            raised[p->dtype == TK_F16][id]) != cudaSuccess) {
		(void)cudaGetLastError();
		return TK_ERR_LAUNCH;
	}
	if (g.in_cluster) {
		cudaLaunchConfig_t lc = {};
		cudaLaunchAttribute at[1];
		unsigned nat = 0;
		tkc::cluster_attr(at, &nat, 1, (unsigned)split);
		lc.gridDim = grid;
		lc.blockDim = dim3(kThreads);
		lc.dynamicSmemBytes = smem;
		lc.stream = s;
		lc.attrs = at;
		lc.numAttrs = nat;
		if (cudaLaunchKernelEx(&lc, f, g) != cudaSuccess)
			return TK_ERR_LAUNCH;
		return launch_status();
	}
	if (split > 1) {
		size_t cbytes = align256((size_t)(p->batch * tiles) * 4);
		g.part = reinterpret_cast<float *>(static_cast<char *>(p->workspace) + cbytes);
		if (tkc::clear_words(p->workspace, (size_t)(p->batch * tiles), s) != cudaSuccess)
			return TK_ERR_LAUNCH;
	}
	f<<<grid, kThreads, smem, s>>>(g);
	return launch_status();
}
