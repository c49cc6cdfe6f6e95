/*
 * moe_gemm.cu - the tensor-core grouped GEMMs of the moe family
 * (moe_grouped_gemm and moe_gate_up, f16 and bf16; manifest/moe.yaml,
 * docs/moe.md), fed by a 4-stage pipeline into shared memory in the 128-byte
 * swizzle: for block_m a multiple of 128 (prefill) a warp-specialized
 * persistent kernel whose producer warpgroup gathers the activations with
 * cp.async and has TMA bring the weights (moe_ws_kernel, below); for other
 * multiples of 64 wgmma straight from cp.async stages (moe_wg_kernel); for
 * block_m 16 and 32 (decode) ldmatrix + mma.sync m16n8k16 with f32
 * accumulators, after kernels/gemm/gemm_smallm.cu, as follows.
 *
 * A CTA of 4 warps computes out[p0 .. p0 + BM, n0 .. n0 + BN] for BM rows
 * of one block_m block of moe_align's layout (BM = 16 or 32 divides
 * block_m, so the tile has one expert, e = expert_ids[p0 / block_m]; the
 * wgmma kernel loads its tiles the same way):
 * - A (the activations) is [BM, 64] a K step, gathered: tile row r reads x
 *   row sorted_ids[p0 + r] / top_k (top_k 0: row p0 + r) with one cp.async
 *   per 16 bytes from that row's own address; rows of no flat id (the
 *   sentinel, places past P) and chunks past K are zero-filled.
 * - B (the weight) is BR = 128 (or 64) rows of w[e] ([N, K], K contiguous,
 *   mma's "col" operand) by 64. For moe_gate_up the BR rows are BR / 2 gate
 *   rows n0 .. and the BR / 2 up rows I + n0 .. of the same columns, so
 *   BN = BR / 2 output columns, and every warp holds the gate and up
 *   accumulators of the same columns: the epilogue forms silu(g) * u in f32
 *   and rounds once, as the CPU reference does.
 * - 16-byte chunk c of tile row r lives at chunk c ^ (r & 7) of its
 *   128-byte row, so the 8 rows an ldmatrix phase reads hit 8 distinct
 *   bank groups.
 * - Tiles of a block past num_post_padded or of no expert (expert_ids[b]
 *   outside [0, E)) read no weight and write zeros, as do zero-filled rows
 *   (all zero accumulators, silu(0) * 0 = 0): every row of out below P is
 *   written, padding zero, as by the CUDA-core kernel of moe.cu and the
 *   CPU reference. Columns past out_cols and rows past P are not written.
 *
 * The grid is one-dimensional over the tiles, rastered in groups of 8 M
 * tiles (512 rows at BM 64) that walk the N tiles together, M fastest: the
 * CTAs resident at once cover a few N tiles of those 8 M tiles, so a weight
 * tile comes from memory about once per group and from L2 for the rest of
 * it (with the N tiles fastest, Mixtral's 28672 x 4096 gate-up weight would
 * be streamed from memory once per M tile); the wgmma kernel rasters the
 * same way. Tiles of 32 rows are 2 x 2 warps of 16 x 64. At decode (1
 * to 64 tokens, block_m 16) most blocks are padding: their CTAs only write
 * zeros, and the few live blocks' CTAs stream their expert's weight once
 * (BM 16, 1 x 4 warps); when an upper bound of the live CTAs at BR 128
 * would not fill two waves of the SMs, BR drops to 64, doubling the CTAs
 * over which the active experts' weight reads spread. Each CTA also starts
 * its K walk at its own K step (the sum does not care), so that CTAs which
 * start together do not all read one column of every row at once.
 *
 * Taken only when: f16 or bf16, K a multiple of 8 (16-byte rows for
 * cp.async), x and w 16-byte aligned, block_m a multiple of 16; moe.cu's
 * CUDA-core kernel runs everything else (f32 too).
 */
#include <atomic>

#include "cuda_common.cuh"
#include "moe.h"
#include "sm90.cuh"
#include "tma_map.cuh"

namespace
{

using namespace tkc;
using tk_sm90::cp_async16;
using tk_sm90::cp_async_commit;
using tk_sm90::cp_async_wait;
using tk_sm90::fence_proxy_async;
using tk_sm90::smem_addr;
using tk_sm90::sw128_desc;
using tk_sm90::wgmma_commit;
using tk_sm90::wgmma_fence;
using tk_sm90::wgmma_wait;

constexpr int kThreads = 128;
constexpr int kBK = 64; /* K per stage: 8 chunks of 16 bytes a row */
constexpr int kStages = 4;
constexpr int kRowBytes = kBK * 2;
/* M tiles that walk the N tiles together, so that each weight tile is read
 * from memory once for them and from L2 by the rest. */
constexpr int kGroupM = 8;

/* What the kernel reads besides tk_moe_gemm. */
struct MmaArgs {
	tk_moe_gemm g;
	int pair_store; /* out_cols even and out 4-byte aligned: stores of 2 */
	int64_t m_tiles, n_tiles;
};

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

/* Byte offset of 16-byte chunk ch (0..7) of row r in a swizzled tile of 64 columns. */
__device__ __forceinline__ unsigned swz(int r, int ch)
{
	return (unsigned)(r * kRowBytes + ((ch ^ (r & 7)) << 4));
}

/*
 * The warps of a BM x BR tile of the mma.sync kernel: WM x WN = 4 warps, each FI m16 fragments
 * (rows) by FJ n8 fragments (weight rows).
 */
template <int BM, int BR> struct Layout {
	static constexpr int WM = BM >= 32 ? 2 : 1;
	static constexpr int WN = 4 / WM;
	static constexpr int FI = BM / WM / 16;
	static constexpr int FJ = BR / WN / 8;
	static_assert(FI >= 1 && FJ >= 2 && FJ % 2 == 0, "tile too small for the warps");
	static_assert(BM % 16 == 0 && BR % 16 == 0, "tile rows load 16 at a time");
};

/*
 * The first B-tile row of warp column wn's n8 fragment j. Plain: the warp's
 * FJ fragments are contiguous. Gate-up: its first FJ / 2 fragments are gate
 * rows, the last FJ / 2 the up rows BR / 2 further, of the same columns.
 */
template <int BR, int FJ, bool GATE_UP> __device__ __forceinline__ int brow(int wn, int j)
{
	if (!GATE_UP)
		return wn * FJ * 8 + j * 8;
	constexpr int H = FJ / 2;
	return j < H ? wn * H * 8 + j * 8 : BR / 2 + wn * H * 8 + (j - H) * 8;
}

/*
 * One K step into a stage: A rows from their gathered sources (xrow[i] is
 * the element offset of tile row tid / 8 + (NT / 8) i, -1 for a zero row),
 * B rows from w[e]. Every thread of the NT copies chunk tid % 8 of its rows.
 */
template <typename T, int BM, int BR, bool GATE_UP, int NT = kThreads>
__device__ __forceinline__ void load_stage(const tk_moe_gemm &g, unsigned as, unsigned bs,
                                           const T *x, const T *we, const int64_t *xrow, int64_t n0,
                                           int kt)
{
	constexpr int RP = NT / 8; /* rows a pass */
	const int tid = threadIdx.x, ch = tid & 7, r0 = tid >> 3;
	const int64_t gk = (int64_t)kt * kBK + ch * 8;
	const bool kin = gk < g.k;
	const int64_t kc = kin ? gk : 0; /* zero fills name a line the step reads */

#pragma unroll
	for (int i = 0; i < BM / RP; i++) {
		int r = r0 + RP * i;
		bool ok = kin && xrow[i] >= 0;
		cp_async16(as + swz(r, ch), x + (ok ? xrow[i] : 0) + kc, ok);
	}
#pragma unroll
	for (int i = 0; i < BR / RP; i++) {
		int r = r0 + RP * i;
		/* Gate-up: output column c from gate row c and up row I + c. */
		int64_t c = n0 + (GATE_UP && r >= BR / 2 ? r - BR / 2 : r);
		int64_t n = GATE_UP && r >= BR / 2 ? g.out_cols + c : c;
		bool ok = kin && c < g.out_cols;
		cp_async16(bs + swz(r, ch), we + (ok ? n * g.k : 0) + kc, ok);
	}
}

/*
 * The element offset in x of out row p's source row, or -1 when row p is
 * zero (a tile of no live block, a place past P, the sentinel).
 */
__device__ __forceinline__ int64_t source_row(const tk_moe_gemm &g, bool live, int64_t p)
{
	if (!live || p >= g.p)
		return -1;
	int32_t s = g.sorted_ids[p];
	if (s < 0 || s >= g.tk)
		return -1;
	return (g.top_k ? s / g.top_k : p) * g.k;
}

/* source_row's x row of a live tile's out row p, as an index; -1 for a zero row. */
__device__ __forceinline__ int32_t source_index(const tk_moe_gemm &g, int64_t p)
{
	if (p >= g.p)
		return -1;
	int32_t s = g.sorted_ids[p];
	if (s < 0 || s >= g.tk)
		return -1;
	return g.top_k ? (int32_t)(s / g.top_k) : (int32_t)p;
}

template <typename T>
__device__ __forceinline__ void store2(const MmaArgs &a, int64_t p, int64_t n, float v0, float v1)
{
	const tk_moe_gemm &g = a.g;

	if (p >= g.p || n >= g.out_cols)
		return;
	T *o = static_cast<T *>(g.out) + p * g.out_cols + n;
	if (a.pair_store) {
		/* out_cols even and n even: n + 1 is in the row too. */
		*reinterpret_cast<uint32_t *>(o) = pair_from_f32<T>(make_float2(v0, v1));
		return;
	}
	o[0] = from_f32<T>(v0);
	if (n + 1 < g.out_cols)
		o[1] = from_f32<T>(v1);
}

/*
 * The four values of one accumulator fragment: c0, c1 at (p, n .. n + 1),
 * c2, c3 at (p + 8, ...). Gate-up: silu(g) * u in f32 with the up
 * fragment `up`, rounded once. z0, z1: rows of no source, written as zeros
 * outright (their zero-filled products are zero too, unless a weight is
 * Inf or NaN), as the CPU reference writes them.
 */
template <typename T, bool GATE_UP>
__device__ __forceinline__ void store_frag(const MmaArgs &a, int64_t p, int64_t n, const float *gt,
                                           const float *up, bool z0, bool z1)
{
	float v[4];
#pragma unroll
	for (int c = 0; c < 4; c++)
		v[c] = GATE_UP ? gt[c] / (1.0f + expf(-gt[c])) * up[c] : gt[c];
	store2<T>(a, p, n, z0 ? 0.0f : v[0], z0 ? 0.0f : v[1]);
	store2<T>(a, p + 8, n, z1 ? 0.0f : v[2], z1 ? 0.0f : v[3]);
}

/* Launch a kernel over the m_tiles x n_tiles tiles of BM x BN. */
template <typename F>
tk_status launch_tiles(F *fn, MmaArgs a, int bm, int bn, int threads, int smem,
                       std::atomic<uint64_t> &done, cudaStream_t st)
{
	a.m_tiles = (a.g.p + bm - 1) / bm;
	a.n_tiles = (a.g.out_cols + bn - 1) / bn;
	if (a.m_tiles * a.n_tiles > INT32_MAX)
		return TK_ERR_UNSUPPORTED;
	if (allow_dynamic_smem((const void *)fn, smem, done) != cudaSuccess)
		return TK_ERR_LAUNCH;
	launch_begin();
	fn<<<(unsigned)(a.m_tiles * a.n_tiles), threads, smem, st>>>(a);
	return launch_status();
}

template <typename T, int BM, int BR, bool GATE_UP>
__global__ void __launch_bounds__(kThreads) moe_mma_kernel(const __grid_constant__ MmaArgs a)
{
	using L = Layout<BM, BR>;
	constexpr int BN = GATE_UP ? BR / 2 : BR; /* output columns of the tile */
	constexpr unsigned A_BYTES = BM * kRowBytes, STAGE_BYTES = (BM + BR) * kRowBytes;
	extern __shared__ __align__(128) unsigned char smem[];
	const tk_moe_gemm &g = a.g;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp / L::WN, wn = warp % L::WN;
	/* Grouped raster: kGroupM M tiles by every N tile, M fastest. */
	const int64_t pid = blockIdx.x, per_group = (int64_t)kGroupM * a.n_tiles;
	const int64_t m_first = pid / per_group * kGroupM, in_group = pid % per_group;
	const int64_t group_m = min((int64_t)kGroupM, a.m_tiles - m_first);
	const int64_t mt = m_first + in_group % group_m, ntile = in_group / group_m;
	const int64_t p0 = mt * BM, n0 = ntile * BN;
	const unsigned base = smem_addr(smem);

	/* p0 < P: the grid has ceil(P / BM) rows of tiles. */
	const int32_t e = g.expert_ids[p0 / g.block_m];
	const bool live = p0 < g.num_post_padded[0] && e >= 0 && e < g.e;
	const T *x = static_cast<const T *>(g.x);
	const T *we = static_cast<const T *>(g.w) + (int64_t)(live ? e : 0) * g.n * g.k;

	int64_t xrow[BM / 16];
#pragma unroll
	for (int i = 0; i < BM / 16; i++)
		xrow[i] = source_row(g, live, p0 + (tid >> 3) + 16 * i);

	float acc[L::FI][L::FJ][4];
#pragma unroll
	for (int i = 0; i < L::FI; i++)
#pragma unroll
		for (int j = 0; j < L::FJ; j++)
#pragma unroll
			for (int c = 0; c < 4; c++)
				acc[i][j][c] = 0.0f;

	const int nkt = live ? (int)((g.k + kBK - 1) / kBK) : 0;
	const int rot = nkt > 0 ? (int)((ntile + 5 * mt) % nkt) : 0;

	for (int st = 0; st < kStages - 1; st++) {
		if (st < nkt) {
			int kt = st + rot < nkt ? st + rot : st + rot - nkt;
			load_stage<T, BM, BR, GATE_UP>(g, base + st * STAGE_BYTES,
			                               base + st * STAGE_BYTES + A_BYTES, x, we,
			                               xrow, n0, kt);
		}
		cp_async_commit();
	}
	for (int t = 0; t < nkt; t++) {
		cp_async_wait<kStages - 2>();
		__syncthreads(); /* stage t is in; stage t - 1 is free for every warp */
		int nt = t + kStages - 1;
		if (nt < nkt) {
			int slot = nt % kStages, kt = nt + rot < nkt ? nt + rot : nt + rot - nkt;
			load_stage<T, BM, BR, GATE_UP>(g, base + slot * STAGE_BYTES,
			                               base + slot * STAGE_BYTES + A_BYTES, x, we,
			                               xrow, n0, kt);
		}
		cp_async_commit();

		const unsigned as = base + (t % kStages) * STAGE_BYTES, bs = as + A_BYTES;
#pragma unroll
		for (int kk = 0; kk < kBK / 16; kk++) {
			unsigned af[L::FI][4], bf[L::FJ][2];
#pragma unroll
			for (int i = 0; i < L::FI; i++) {
				/* a0..a3: rows 0-7 / 8-15 by k 0-7 / 8-15 of the m16 fragment. */
				int r = wm * L::FI * 16 + i * 16 + (lane & 7) +
				        ((lane >> 3) & 1) * 8;
				ldmatrix_x4(as + swz(r, kk * 2 + (lane >> 4)), af[i][0], af[i][1],
				            af[i][2], af[i][3]);
			}
#pragma unroll
			for (int j = 0; j < L::FJ; j += 2) {
				/* b0, b1 of fragment j (k 0-7, 8-15), then those of j + 1. */
				int r = brow<BR, L::FJ, GATE_UP>(wn, j + ((lane >> 4) & 1)) +
				        (lane & 7);
				ldmatrix_x4(bs + swz(r, kk * 2 + ((lane >> 3) & 1)), bf[j][0],
				            bf[j][1], bf[j + 1][0], bf[j + 1][1]);
			}
#pragma unroll
			for (int i = 0; i < L::FI; i++)
#pragma unroll
				for (int j = 0; j < L::FJ; j++)
					Mma<T>::run(acc[i][j], af[i], bf[j][0], bf[j][1]);
		}
	}
	cp_async_wait<0>();

	/*
	 * Fragment (i, j): c0, c1 at row lane / 4, columns 2 (lane % 4) + 0, 1;
	 * c2, c3 eight rows further (store_frag).
	 */
#pragma unroll
	for (int i = 0; i < L::FI; i++) {
		int64_t p = p0 + wm * L::FI * 16 + i * 16 + (lane >> 2);
		const bool z0 = source_row(g, live, p) < 0, z1 = source_row(g, live, p + 8) < 0;
#pragma unroll
		for (int j = 0; j < (GATE_UP ? L::FJ / 2 : L::FJ); j++) {
			int64_t n = n0 + brow<BR, L::FJ, GATE_UP>(wn, j) + (lane & 3) * 2;
			store_frag<T, GATE_UP>(a, p, n, acc[i][j],
			                       acc[i][GATE_UP ? j + L::FJ / 2 : j], z0, z1);
		}
	}
}

template <typename T, int BM, int BR, bool GATE_UP> tk_status launch_one(MmaArgs a, cudaStream_t st)
{
	static std::atomic<uint64_t> done{ 0 };
	return launch_tiles(moe_mma_kernel<T, BM, BR, GATE_UP>, a, BM, GATE_UP ? BR / 2 : BR,
	                    kThreads, kStages * (BM + BR) * kRowBytes, done, st);
}

/* ---- the wgmma kernel: tiles of 64 or 128 rows ------------------------- */

/*
 * D[64 x BR] += A[64 x 16] B[16 x BR]^T for one warpgroup, both operands
 * K-major in the 128-byte swizzle that load_stage writes (TMA's pattern:
 * chunk c of row r at c ^ (r & 7), 8-row groups 1024 bytes apart).
 */
template <typename T, int BR>
__device__ __forceinline__ void wg_mma(float (&d)[BR / 2], uint64_t da, uint64_t db)
{
	constexpr bool BF = std::is_same<T, __nv_bfloat16>::value;
	if constexpr (BR == 128) {
		if constexpr (BF)
			tk_sm90::wgmma_m64n128k16_bf16<0>(d, da, db);
		else
			tk_sm90::wgmma_m64n128k16_f16<0>(d, da, db);
	} else {
		static_assert(BR == 256, "weight tiles of 128 or 256 rows");
		if constexpr (BF)
			tk_sm90::wgmma_m64n256k16_bf16<0>(d, da, db);
		else
			tk_sm90::wgmma_m64n256k16_f16<0>(d, da, db);
	}
}

/*
 * One stage's products into d: the 64 rows of A at `as` by the BR weight
 * rows at `bs`, K 64; the previous stage's products are then complete, this
 * one's still in flight.
 */
template <typename T, int BR>
__device__ __forceinline__ void stage_mma(float (&d)[BR / 2], unsigned as, unsigned bs)
{
	wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < kBK / 16; kk++)
		wg_mma<T, BR>(d, sw128_desc(as + kk * 32, 16, 1024),
		              sw128_desc(bs + kk * 32, 16, 1024));
	wgmma_commit();
	wgmma_wait<1>();
	tk_sm90::acc_fence(d);
}

constexpr int kWgStages = 4;

/*
 * Tiles of BM = 64 WG rows (block_m a multiple of BM) by BR weight rows,
 * WG warpgroups, each the wgmma m64 x BR product of its 64 rows from the
 * same stages as the mma.sync kernel fills them (cp.async, gathered A).
 * Stage t + 2 is loaded while stage t is multiplied and stage t - 1's
 * products finish: at step t every thread has waited (wgmma.wait_group 1)
 * for the products of step t - 2 before the barrier, so their slot is free.
 * Gate-up: accumulator columns 0 .. BR/2 - 1 are gate, BR/2 .. the up
 * rows of the same output columns, held by the same thread (the m64nN
 * layout gives a thread the columns 8j + 2 (lane % 4) + 0, 1 of every n8
 * block j), so silu(g) * u is formed in f32 and rounded once.
 */
template <typename T, int WG, int BR, bool GATE_UP>
__global__ void __launch_bounds__(128 * WG, 1) moe_wg_kernel(const __grid_constant__ MmaArgs a)
{
	constexpr int BM = 64 * WG, NT = 128 * WG, RP = NT / 8;
	constexpr int BN = GATE_UP ? BR / 2 : BR;
	constexpr unsigned A_BYTES = BM * kRowBytes, STAGE_BYTES = (BM + BR) * kRowBytes;
	static_assert(STAGE_BYTES % 1024 == 0 && A_BYTES % 1024 == 0, "swizzle atoms stay aligned");
	extern __shared__ __align__(128) unsigned char smem[];
	const tk_moe_gemm &g = a.g;
	const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, wq = (tid >> 5) & 3;
	const int64_t pid = blockIdx.x, per_group = (int64_t)kGroupM * a.n_tiles;
	const int64_t m_first = pid / per_group * kGroupM, in_group = pid % per_group;
	const int64_t group_m = min((int64_t)kGroupM, a.m_tiles - m_first);
	const int64_t mt = m_first + in_group % group_m, ntile = in_group / group_m;
	const int64_t p0 = mt * BM, n0 = ntile * BN;
	const unsigned base = (smem_addr(smem) + 1023u) & ~1023u;

	const int32_t e = g.expert_ids[p0 / g.block_m];
	const bool live = p0 < g.num_post_padded[0] && e >= 0 && e < g.e;
	const T *x = static_cast<const T *>(g.x);
	const T *we = static_cast<const T *>(g.w) + (int64_t)(live ? e : 0) * g.n * g.k;

	int64_t xrow[BM / RP];
#pragma unroll
	for (int i = 0; i < BM / RP; i++)
		xrow[i] = source_row(g, live, p0 + (tid >> 3) + RP * i);

	float acc[BR / 2];
#pragma unroll
	for (int i = 0; i < BR / 2; i++)
		acc[i] = 0.0f;

	const int nkt = live ? (int)((g.k + kBK - 1) / kBK) : 0;
	const int rot = nkt > 0 ? (int)((ntile + 5 * mt) % nkt) : 0;
	auto load = [&](int step) {
		int slot = step % kWgStages, kt = step + rot < nkt ? step + rot : step + rot - nkt;
		load_stage<T, BM, BR, GATE_UP, NT>(g, base + slot * STAGE_BYTES,
		                                   base + slot * STAGE_BYTES + A_BYTES, x, we, xrow,
		                                   n0, kt);
	};

	for (int st = 0; st < kWgStages - 2; st++) {
		if (st < nkt)
			load(st);
		cp_async_commit();
	}
	for (int t = 0; t < nkt; t++) {
		cp_async_wait<kWgStages - 3>();
		fence_proxy_async(); /* this thread's copies, before wgmma reads them */
		__syncthreads();     /* stage t is in; step t - 2's slot is free */
		if (t + kWgStages - 2 < nkt)
			load(t + kWgStages - 2);
		cp_async_commit();

		const unsigned as = base + (t % kWgStages) * STAGE_BYTES + wg * 64 * kRowBytes;
		const unsigned bs = base + (t % kWgStages) * STAGE_BYTES + A_BYTES;
		stage_mma<T, BR>(acc, as, bs);
	}
	wgmma_wait<0>();
	tk_sm90::acc_fence(acc);
	cp_async_wait<0>();

	/* Row 16 wq + lane / 4 (and 8 below) of this warpgroup's 64. */
	const int64_t p = p0 + wg * 64 + wq * 16 + (lane >> 2);
	const bool z0 = source_row(g, live, p) < 0, z1 = source_row(g, live, p + 8) < 0;
#pragma unroll
	for (int j = 0; j < BN / 8; j++) {
		const int64_t n = n0 + j * 8 + (lane & 3) * 2;
		store_frag<T, GATE_UP>(a, p, n, &acc[4 * j], &acc[4 * (GATE_UP ? j + BN / 8 : j)],
		                       z0, z1);
	}
}

template <typename T, int WG, int BR, bool GATE_UP> tk_status launch_wg(MmaArgs a, cudaStream_t st)
{
	static std::atomic<uint64_t> done{ 0 };
	/* 1024 more: the stages start at the next 1024-byte boundary. */
	return launch_tiles(moe_wg_kernel<T, WG, BR, GATE_UP>, a, 64 * WG, GATE_UP ? BR / 2 : BR,
	                    128 * WG, kWgStages * (64 * WG + BR) * kRowBytes + 1024, done, st);
}

template <typename T, bool GATE_UP>
tk_status launch_wg_pick(const MmaArgs &a, int wg, bool wide, cudaStream_t st)
{
	if (wg == 2)
		return wide ? launch_wg<T, 2, 256, GATE_UP>(a, st)
		            : launch_wg<T, 2, 128, GATE_UP>(a, st);
	return wide ? launch_wg<T, 1, 256, GATE_UP>(a, st) : launch_wg<T, 1, 128, GATE_UP>(a, st);
}

/* ---- the warp-specialized kernel: 128-row tiles, persistent ------------ */

constexpr int kWsStages = 4;
constexpr int kWsThreads = 384; /* producer + two consumer warpgroups */
constexpr int kWsBM = 128, kWsBR = 256;
constexpr unsigned kWsA = kWsBM * kRowBytes, kWsB = kWsBR * kRowBytes, kWsStage = kWsA + kWsB;
/* A consumer warpgroup's staging of 64 rows by 128 output columns: two boxes of 64 x 64. */
constexpr unsigned kWsBox = 64 * kRowBytes, kWsStaging = 2 * kWsBox;
/* The ring, the two stagings, then full[] and empty[]; +1024: the ring starts on the swizzle
 * period. */
constexpr int kWsSmem = kWsStages * (int)kWsStage + 2 * (int)kWsStaging + 16 * kWsStages + 1024;
constexpr int kWsProducerRegs = 40, kWsConsumerRegs = 232;

/*
 * Tiles of 128 rows (block_m a multiple of 128, so one expert a tile) by 256
 * weight rows (plain: 256 output columns; gate-up: 128 gate rows and the 128
 * up rows of the same columns), the CTAs persistent over them in the
 * grouped raster of the kernels above. Warpgroup 0 produces: every thread
 * gathers chunk tid % 8 of 8 rows of the A stage with cp.async (zero rows
 * and K past the end filled with zeros) and arrives on the stage's "full"
 * mbarrier when its copies land (cp.async.mbarrier.arrive.noinc); thread 0
 * also has the copy engine bring the weight rows (two boxes of 128 rows of
 * w[e], TMA, 128-byte swizzle, zeros past N and K). Warpgroups 1 and 2
 * consume, each the wgmma m64n256 products of its 64 rows, keep one stage's
 * products in flight, and hand a stage back (one arrival a warp on "empty")
 * once the products reading it are done. While the consumers store a
 * tile's results the producer fills the ring for the next. Tiles of no live
 * block are skipped by the producer and written as zeros by the consumers.
 */
template <typename T, bool GATE_UP>
__global__ void __launch_bounds__(kWsThreads, 1)
        moe_ws_kernel(const __grid_constant__ MmaArgs a, const __grid_constant__ CUtensorMap wmap,
                      const __grid_constant__ CUtensorMap omap, int tma_out)
{
	constexpr int BN = GATE_UP ? kWsBR / 2 : kWsBR;
	extern __shared__ __align__(128) unsigned char smem[];
	const tk_moe_gemm &g = a.g;
	const unsigned base = (smem_addr(smem) + 1023u) & ~1023u;
	const unsigned staging = base + kWsStages * kWsStage;
	const unsigned full = staging + 2 * kWsStaging, empty = full + 8 * kWsStages;
	const int tid = threadIdx.x, wg = tid >> 7;
	const int64_t tiles = a.m_tiles * a.n_tiles, per_group = (int64_t)kGroupM * a.n_tiles;
	const int nkt = (int)((g.k + kBK - 1) / kBK);

	if (tid == 0) {
		for (int s = 0; s < kWsStages; s++) {
			/* the producer's 128 cp.async arrivals and thread 0's expect_tx */
			tk_sm90::mbar_init(full + 8 * s, 129);
			tk_sm90::mbar_init(empty + 8 * s, 8); /* one a consumer warp */
		}
		tk_sm90::fence_mbar_init();
	}
	__syncthreads();

	/* The tile at index u: its first row, first output column and expert, -1 if dead. */
	auto tile = [&](int64_t u, int64_t &p0, int64_t &n0) {
		const int64_t m_first = u / per_group * kGroupM, in_group = u % per_group;
		const int64_t group_m = min((int64_t)kGroupM, a.m_tiles - m_first);
		p0 = (m_first + in_group % group_m) * kWsBM;
		n0 = in_group / group_m * BN;
		const int32_t e = g.expert_ids[p0 / g.block_m];
		return p0 < g.num_post_padded[0] && e >= 0 && e < g.e ? (int)e : -1;
	};

	if (wg == 0) {
		tk_sm90::regs_release<kWsProducerRegs>();
		const T *x = static_cast<const T *>(g.x);
		const int ch = tid & 7;
		int s = 0;
		unsigned phase = 0;
		if (tid == 0)
			tk_sm90::tma_prefetch_map(&wmap);
		for (int64_t u = blockIdx.x; u < tiles; u += gridDim.x) {
			int64_t p0, n0;
			const int e = tile(u, p0, n0);
			if (e < 0)
				continue;
			/* x rows of this thread's 8 tile rows, -1 for zero rows */
			int32_t src[kWsBM / 16];
#pragma unroll
			for (int i = 0; i < kWsBM / 16; i++)
				src[i] = source_index(g, p0 + (tid >> 3) + 16 * i);
			for (int kt = 0; kt < nkt; kt++) {
				const unsigned as = base + s * kWsStage, bs = as + kWsA;
				const int64_t gk = (int64_t)kt * kBK + ch * 8;
				const bool kin = gk < g.k;
				tk_sm90::mbar_wait(empty + 8 * s, phase ^ 1);
				if (tid == 0) {
					tk_sm90::mbar_arrive_expect_tx(full + 8 * s, kWsB);
					const int y = (int)n0,
					          yu = (int)(GATE_UP ? g.out_cols + n0 : n0 + 128);
					tk_sm90::tma_load_3d(bs, &wmap, full + 8 * s, kt * kBK, y,
					                     e);
					tk_sm90::tma_load_3d(bs + kWsB / 2, &wmap, full + 8 * s,
					                     kt * kBK, yu, e);
				}
#pragma unroll
				for (int i = 0; i < kWsBM / 16; i++) {
					const bool ok = kin && src[i] >= 0;
					cp_async16(as + swz((tid >> 3) + 16 * i, ch),
					           x + (ok ? (int64_t)src[i] * g.k + gk : 0), ok);
				}
				tk_sm90::cp_async_mbar_arrive(full + 8 * s);
				if (++s == kWsStages) {
					s = 0;
					phase ^= 1;
				}
			}
		}
		/* Leave no copy in flight into a CTA that has exited. */
		cp_async_wait<0>();
		return;
	}

	tk_sm90::regs_claim<kWsConsumerRegs>();
	const int c = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3;
	int s = 0;
	unsigned phase = 0;
	float acc[kWsBR / 2];
	for (int64_t u = blockIdx.x; u < tiles; u += gridDim.x) {
		int64_t p0, n0;
		const int e = tile(u, p0, n0);
#pragma unroll
		for (int i = 0; i < kWsBR / 2; i++)
			acc[i] = 0.0f;
		tk_sm90::acc_fence(acc);
		if (e >= 0) {
			int prev = -1;
			for (int kt = 0; kt < nkt; kt++) {
				const unsigned as = base + s * kWsStage + c * 64 * kRowBytes;
				const unsigned bs = base + s * kWsStage + kWsA;
				tk_sm90::mbar_wait(full + 8 * s, phase);
				/* the producer's cp.async writes, before wgmma reads them */
				fence_proxy_async();
				stage_mma<T, kWsBR>(acc, as, bs);
				if (prev >= 0 && lane == 0)
					tk_sm90::mbar_arrive(empty + 8 * prev);
				prev = s;
				if (++s == kWsStages) {
					s = 0;
					phase ^= 1;
				}
			}
			wgmma_wait<0>();
			tk_sm90::acc_fence(acc);
			if (prev >= 0 && lane == 0)
				tk_sm90::mbar_arrive(empty + 8 * prev);
		}
		/* Row 16 wq + lane / 4 (and 8 below) of this warpgroup's 64. */
		const int r = wq * 16 + (lane >> 2);
		const int64_t p = p0 + c * 64 + r;
		const bool live = e >= 0;
		const bool z0 = source_row(g, live, p) < 0, z1 = source_row(g, live, p + 8) < 0;
		if (!tma_out) {
#pragma unroll
			for (int j = 0; j < BN / 8; j++) {
				const int64_t n = n0 + j * 8 + (lane & 3) * 2;
				store_frag<T, GATE_UP>(a, p, n, &acc[4 * j],
				                       &acc[4 * (GATE_UP ? j + BN / 8 : j)], z0,
				                       z1);
			}
			continue;
		}
		/*
		 * 128 columns at a time into this warpgroup's staging (the TMA
		 * pattern: 16-byte chunk q of row r at q ^ (r & 7)), then one
		 * thread has the copy engine store the two boxes, rows past P and
		 * columns past out_cols dropped, while the warpgroup goes on.
		 */
		const unsigned st = staging + c * kWsStaging;
		const int bar = 1 + c, lead = (tid & 127) == 0;
#pragma unroll
		for (int h = 0; h < BN / 128; h++) {
			/* the staging's previous store has read it */
			if (lead)
				tk_sm90::bulk_wait_read<0>();
			tk_sm90::named_sync(bar, 128);
#pragma unroll
			for (int jj = 0; jj < 16; jj++) {
				const int j = h * 16 + jj, col = jj * 8 + (lane & 3) * 2;
				const float *gt = &acc[4 * j],
				            *up = &acc[4 * (GATE_UP ? j + BN / 8 : j)];
				float v[4];
#pragma unroll
				for (int q = 0; q < 4; q++)
					v[q] = GATE_UP ? gt[q] / (1.0f + expf(-gt[q])) * up[q]
					               : gt[q];
				const unsigned at =
				        st + (col >> 6) * kWsBox + (unsigned)(col & 7) * 2;
				const unsigned q16 = (unsigned)(col & 63) >> 3;
				tk_sm90::st_shared_u32(
				        at + r * kRowBytes + ((q16 ^ (r & 7)) << 4),
				        pair_from_f32<T>(z0 ? make_float2(0.0f, 0.0f)
				                            : make_float2(v[0], v[1])));
				tk_sm90::st_shared_u32(
				        at + (r + 8) * kRowBytes + ((q16 ^ ((r + 8) & 7)) << 4),
				        pair_from_f32<T>(z1 ? make_float2(0.0f, 0.0f)
				                            : make_float2(v[2], v[3])));
			}
			fence_proxy_async();
			tk_sm90::named_sync(bar, 128);
			if (lead) {
				const int x = (int)n0 + h * 128, y = (int)(p0 + c * 64);
				tk_sm90::tma_store_3d(&omap, st, x, y, 0);
				tk_sm90::tma_store_3d(&omap, st + kWsBox, x + 64, y, 0);
				tk_sm90::bulk_commit();
			}
		}
	}
	/* Leave no store reading the staging of a CTA that has exited. */
	if (tma_out && (tid & 127) == 0)
		tk_sm90::bulk_wait_all();
}

template <typename T, bool GATE_UP> tk_status launch_ws(MmaArgs a, cudaStream_t st)
{
	static std::atomic<uint64_t> done{ 0 };
	CUtensorMap wmap;
	const auto fn = moe_ws_kernel<T, GATE_UP>;

	/* w as E matrices of N rows of K: boxes of 64 columns by 128 rows. */
	if (!tk_sm90::make_map(&wmap, a.g.dtype, a.g.w, a.g.k, a.g.n, a.g.e, a.g.k, a.g.n * a.g.k,
	                       kBK, kWsBR / 2))
		return TK_ERR_UNSUPPORTED;
	/* out as P rows of out_cols, boxes of 64 x 64, where its rows are 16-byte aligned. */
	CUtensorMap omap = wmap;
	const int tma_out = a.g.out_cols % 8 == 0 && aligned16(a.g.out) &&
	                    tk_sm90::make_map(&omap, a.g.dtype, a.g.out, a.g.out_cols, a.g.p, 1,
	                                      a.g.out_cols, 0, 64, 64);
	a.m_tiles = (a.g.p + kWsBM - 1) / kWsBM;
	a.n_tiles =
	        (a.g.out_cols + (GATE_UP ? kWsBR / 2 : kWsBR) - 1) / (GATE_UP ? kWsBR / 2 : kWsBR);
	const int64_t tiles = a.m_tiles * a.n_tiles;
	if (allow_dynamic_smem((const void *)fn, kWsSmem, done) != cudaSuccess)
		return TK_ERR_LAUNCH;
	const unsigned grid = (unsigned)(tiles < sm_count() ? tiles : sm_count());
	launch_begin();
	fn<<<grid, kWsThreads, kWsSmem, st>>>(a, wmap, omap, tma_out);
	return launch_status();
}

template <typename T, bool GATE_UP>
tk_status launch_bm(const MmaArgs &a, int bm, bool narrow, cudaStream_t st)
{
	if (bm == 32)
		return narrow ? launch_one<T, 32, 64, GATE_UP>(a, st)
		              : launch_one<T, 32, 128, GATE_UP>(a, st);
	return narrow ? launch_one<T, 16, 64, GATE_UP>(a, st)
	              : launch_one<T, 16, 128, GATE_UP>(a, st);
}

/* The tile's rows: the largest of 64, 32, 16 that divides block_m. */
int tile_rows(int64_t block_m)
{
	return block_m % 64 == 0 ? 64 : block_m % 32 == 0 ? 32 : 16;
}

} // namespace

extern "C" int tk_moe_gemm_mma_fits(const tk_moe_gemm *g)
{
	int bm = tile_rows(g->block_m);

	/* Tiles for the grid's x: at most (P / 16) * (N / 32), far below 2^31 in practice. */
	return (g->dtype == TK_BF16 || g->dtype == TK_F16) && g->k % 8 == 0 &&
	       g->block_m % 16 == 0 && aligned16(g->x) && aligned16(g->w) &&
	       (g->p + bm - 1) / bm * ((g->out_cols + 31) / 32) <= INT32_MAX;
}

extern "C" tk_status tk_moe_gemm_mma(const tk_moe_gemm *g, void *stream)
{
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	MmaArgs a;
	const int bm = tile_rows(g->block_m);

	a.g = *g;
	a.pair_store = g->out_cols % 2 == 0 && ((uintptr_t)g->out & 3) == 0;
	/*
	 * Live blocks are at most one per expert with rows plus one per full
	 * block_m of rows (sum of ceil(c_e / block_m) <= T*k / block_m + min(E,
	 * T*k)); below two waves of CTAs at BR 128, take BR 64.
	 */
	int64_t live = g->tk / g->block_m + (g->e < g->tk ? g->e : g->tk);
	if (live > g->nb)
		live = g->nb;
	const int64_t wide_ctas = live * (g->block_m / bm) * ((g->n + 127) / 128);
	const bool narrow = wide_ctas < 2 * (int64_t)sm_count();

	/*
	 * Blocks of 128 rows or more, K, N and the expert stride within what a
	 * tensor map names: the warp-specialized kernel. Falls through to the
	 * cp.async kernels when the driver has no tensor-map encoder.
	 */
	if (g->block_m % 128 == 0 && g->p <= INT32_MAX && g->k <= INT32_MAX && g->n <= INT32_MAX &&
	    g->e <= INT32_MAX) {
		tk_status s = TK_ERR_UNSUPPORTED;
		if (g->dtype == TK_BF16)
			s = g->gate_up ? launch_ws<__nv_bfloat16, true>(a, st)
			               : launch_ws<__nv_bfloat16, false>(a, st);
		else
			s = g->gate_up ? launch_ws<__half, true>(a, st)
			               : launch_ws<__half, false>(a, st);
		if (s != TK_ERR_UNSUPPORTED)
			return s;
	}

	/*
	 * Blocks of 64 rows or more: wgmma, 128-row tiles where block_m allows
	 * them; 256 weight rows a tile where the live tiles at that width still
	 * fill the SMs once (twice the reuse of each A stage).
	 */
	if (bm == 64) {
		const int wg = g->block_m % 128 == 0 ? 2 : 1;
		const bool wide = live * (g->block_m / (64 * wg)) * ((g->n + 255) / 256) >=
		                  (int64_t)sm_count();
		if (g->dtype == TK_BF16)
			return g->gate_up ? launch_wg_pick<__nv_bfloat16, true>(a, wg, wide, st)
			                  : launch_wg_pick<__nv_bfloat16, false>(a, wg, wide, st);
		return g->gate_up ? launch_wg_pick<__half, true>(a, wg, wide, st)
		                  : launch_wg_pick<__half, false>(a, wg, wide, st);
	}

	if (g->dtype == TK_BF16)
		return g->gate_up ? launch_bm<__nv_bfloat16, true>(a, bm, narrow, st)
		                  : launch_bm<__nv_bfloat16, false>(a, bm, narrow, st);
	return g->gate_up ? launch_bm<__half, true>(a, bm, narrow, st)
	                  : launch_bm<__half, false>(a, bm, narrow, st);
}
