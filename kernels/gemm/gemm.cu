/*
 * gemm.cu - gemm and bmm: c = alpha * (a b) (+ bias) (+ residual), f32
 * accumulation; the dispatcher over the GEMM kernel families
 * (tk_gemm.h) and the simple family itself.
 *
 * The op launchers turn a call into a tk_gemm_problem (tk_gemm_problem_of)
 * and run the configuration the call's choice names (tk_call.choice, which
 * the daemon fills from its tuning table), else the built-in choice
 * (tk_gemm_builtin). A preferred choice that cannot serve the problem
 * falls back to the built-in one, and that to the simple family, which
 * serves every problem; an exact choice that cannot is refused.
 *
 * Simple family: f16 and bf16 run on the tensor cores through WMMA: a
 * 128-thread block computes a 64x64 tile of c, each warp a 32x32 quarter as
 * 2x2 fragments of 16x16, stepping K by 32 through shared memory. f32 runs
 * a SIMT tiled kernel: a 256-thread block computes a 64x64 tile, each
 * thread a 4x4 register tile, stepping K by 16. Both stage tiles with
 * bounds checks (zeros outside the matrices), so any M, N, K work; b is
 * transposed into [k][n] order while it is staged, so one kernel serves both
 * layouts. Batches run along grid z.
 * Bytes: (M*K + K*N + M*N [+ N] [+ M*N]) * elem size; FLOPs: 2*M*N*K.
 */
#include <mma.h>
#include <string.h>

#include "cuda_common.cuh"
#include "gemm_kinds.h"

namespace
{

using namespace tkc;

struct GemmArgs {
	int64_t m, n, k, lda, ldb, ldc, ldr;
	int64_t sa, sb, sc, sr; /* batch strides */
	int trans_b;
	float alpha;
};

const int kTile = 64;

/* Element (kk, nn) of b in [k][n] terms, whichever layout b has. */
template <typename T>
__device__ __forceinline__ T b_at(const T *b, const GemmArgs &g, int64_t kk, int64_t nn)
{
	return g.trans_b ? b[nn * g.ldb + kk] : b[kk * g.ldb + nn];
}

/* c = alpha * acc (+ bias) (+ residual); residual may be c itself. */
template <typename T>
__device__ __forceinline__ void store_c(T *c, const T *bias, const T *res, const GemmArgs &g,
                                        int64_t row, int64_t col, float acc)
{
	float v = g.alpha * acc;

	if (bias != nullptr)
		v += to_f32(bias[col]);
	if (res != nullptr)
		v += to_f32(res[row * g.ldr + col]);
	c[row * g.ldc + col] = from_f32<T>(v);
}

/* Move the operands to batch blockIdx.z. */
template <typename T>
__device__ __forceinline__ void batch_offsets(T *&c, const T *&a, const T *&b, const T *&res,
                                              const GemmArgs &g)
{
	int64_t z = blockIdx.z;

	c += z * g.sc;
	a += z * g.sa;
	b += z * g.sb;
	if (res != nullptr)
		res += z * g.sr;
}

/* ---- f32: SIMT ---------------------------------------------------------- */

const int kSimtK = 16;

__global__ void __launch_bounds__(256) gemm_simt(float *c, const float *a, const float *b,
                                                 const float *bias, const float *res, GemmArgs g)
{
	__shared__ float as[kSimtK][kTile + 4];
	__shared__ float bs[kSimtK][kTile + 4];
	int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	int64_t n0 = (int64_t)blockIdx.x * kTile;
	int64_t mtiles = (g.m + kTile - 1) / kTile;

	batch_offsets(c, a, b, res, g);
	for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
		int64_t m0 = mt * kTile;
		float acc[4][4] = {};

		for (int64_t k0 = 0; k0 < g.k; k0 += kSimtK) {
			for (int e = tid; e < kTile * kSimtK; e += 256) {
				int r = e / kSimtK, kk = e % kSimtK;
				int64_t gm = m0 + r, gk = k0 + kk;
				as[kk][r] = gm < g.m && gk < g.k ? a[gm * g.lda + gk] : 0.0f;
				/* Walk b along its contiguous dim so the loads coalesce. */
				int bn = g.trans_b ? e / kSimtK : e % kTile;
				int bk = g.trans_b ? e % kSimtK : e / kTile;
				int64_t gn = n0 + bn, gbk = k0 + bk;
				bs[bk][bn] = gn < g.n && gbk < g.k ? b_at(b, g, gbk, gn) : 0.0f;
			}
			__syncthreads();
#pragma unroll
			for (int kk = 0; kk < kSimtK; kk++) {
				float av[4], bv[4];
#pragma unroll
				for (int i = 0; i < 4; i++) {
					av[i] = as[kk][ty + 16 * i];
					bv[i] = bs[kk][tx + 16 * i];
				}
#pragma unroll
				for (int i = 0; i < 4; i++) {
#pragma unroll
					for (int j = 0; j < 4; j++)
						acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
				}
			}
			__syncthreads();
		}
		for (int i = 0; i < 4; i++) {
			for (int j = 0; j < 4; j++) {
				int64_t row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
				if (row < g.m && col < g.n)
					store_c(c, bias, res, g, row, col, acc[i][j]);
			}
		}
	}
}

/* ---- f16 / bf16: tensor cores through WMMA ------------------------------ */

const int kWmmaK = 32;
const int kPad = 8; /* keeps rows 16-byte aligned and spreads the banks */

template <typename T>
__global__ void __launch_bounds__(128)
        gemm_wmma(T *c, const T *a, const T *b, const T *bias, const T *res, GemmArgs g)
{
	using namespace nvcuda;
	__shared__ __align__(32) T as[kTile][kWmmaK + kPad];
	__shared__ __align__(32) T bs[kWmmaK][kTile + kPad];
	__shared__ __align__(32) float cs[kTile][kTile + 4];
	int tid = threadIdx.x, warp = tid >> 5;
	int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
	int64_t n0 = (int64_t)blockIdx.x * kTile;
	int64_t mtiles = (g.m + kTile - 1) / kTile;
	const T zero = from_f32<T>(0.0f);

	batch_offsets(c, a, b, res, g);
	for (int64_t mt = blockIdx.y; mt < mtiles; mt += gridDim.y) {
		int64_t m0 = mt * kTile;
		wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
		for (int i = 0; i < 2; i++) {
			for (int j = 0; j < 2; j++)
				wmma::fill_fragment(acc[i][j], 0.0f);
		}
		for (int64_t k0 = 0; k0 < g.k; k0 += kWmmaK) {
			for (int e = tid; e < kTile * kWmmaK; e += 128) {
				int r = e / kWmmaK, kk = e % kWmmaK;
				int64_t gm = m0 + r, gk = k0 + kk;
				as[r][kk] = gm < g.m && gk < g.k ? a[gm * g.lda + gk] : zero;
				int bn = g.trans_b ? e / kWmmaK : e % kTile;
				int bk = g.trans_b ? e % kWmmaK : e / kTile;
				int64_t gn = n0 + bn, gbk = k0 + bk;
				bs[bk][bn] = gn < g.n && gbk < g.k ? b_at(b, g, gbk, gn) : zero;
			}
			__syncthreads();
#pragma unroll
			for (int kk = 0; kk < kWmmaK; kk += 16) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>
				        fa[2];
				wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major>
				        fb[2];
				for (int i = 0; i < 2; i++) {
					wmma::load_matrix_sync(fa[i], &as[wm + 16 * i][kk],
					                       kWmmaK + kPad);
					wmma::load_matrix_sync(fb[i], &bs[kk][wn + 16 * i],
					                       kTile + kPad);
				}
				for (int i = 0; i < 2; i++) {
					for (int j = 0; j < 2; j++)
						wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
				}
			}
			__syncthreads();
		}
		for (int i = 0; i < 2; i++) {
			for (int j = 0; j < 2; j++)
				wmma::store_matrix_sync(&cs[wm + 16 * i][wn + 16 * j], acc[i][j],
				                        kTile + 4, wmma::mem_row_major);
		}
		__syncthreads();
		for (int e = tid; e < kTile * kTile; e += 128) {
			int r = e / kTile, col = e % kTile;
			if (m0 + r < g.m && n0 + col < g.n)
				store_c(c, bias, res, g, m0 + r, n0 + col, cs[r][col]);
		}
		__syncthreads(); /* cs is rewritten by the next m tile */
	}
}

/* ---- the simple family --------------------------------------------------- */

bool simple_serves(const tk_gemm_problem *p)
{
	if (p->dtype != TK_F32 && p->dtype != TK_F16 && p->dtype != TK_BF16)
		return false;
	return p->batch >= 1 && p->batch <= 65535 && p->m >= 0 && p->n >= 0 && p->k >= 0 &&
	       (p->n + kTile - 1) / kTile <= 0x7fffffff;
}

tk_gemm_config simple_config(tk_dtype dt)
{
	tk_gemm_config c = {};

	c.kind = TK_GEMM_SIMPLE;
	c.tile_m = kTile;
	c.tile_n = kTile;
	c.tile_k = dt == TK_F32 ? kSimtK : kWmmaK;
	c.stages = 1;
	c.split_k = 1;
	return c;
}

template <typename T> tk_status simple_run(const tk_gemm_problem *p, cudaStream_t s)
{
	GemmArgs g;
	T *c = static_cast<T *>(p->c);
	const T *a = static_cast<const T *>(p->a), *b = static_cast<const T *>(p->b);
	const T *bias = static_cast<const T *>(p->bias), *res = static_cast<const T *>(p->residual);
	int64_t ntiles = (p->n + kTile - 1) / kTile, mtiles = (p->m + kTile - 1) / kTile;
	dim3 grid((unsigned)ntiles, (unsigned)(mtiles < 65535 ? mtiles : 65535),
	          (unsigned)p->batch);

	g.m = p->m;
	g.n = p->n;
	g.k = p->k;
	g.lda = p->lda;
	g.ldb = p->ldb;
	g.ldc = p->ldc;
	g.ldr = p->ldr;
	g.sa = p->stride_a;
	g.sb = p->stride_b;
	g.sc = p->stride_c;
	g.sr = p->stride_r;
	g.trans_b = p->trans_b;
	g.alpha = p->alpha;
	launch_begin();
	if constexpr (sizeof(T) == 4)
		gemm_simt<<<grid, 256, 0, s>>>(c, a, b, bias, res, g);
	else
		gemm_wmma<T><<<grid, 128, 0, s>>>(c, a, b, bias, res, g);
	return launch_status();
}

/* ---- the dispatcher ------------------------------------------------------ */

/*
 * The built-in choice, for calls without a choice (shapes the tuning table
 * does not know): the
 * decode family's own pick for one matrix of M <= 32 (on an H200 it beat
 * every other family there by 2 to 35% in tuning runs), the small-M
 * family's own pick for M <= 64 when it serves p (it sizes split-K
 * to fill the SMs within the workspace); the sm90 family for larger aligned
 * f16/bf16 problems: 128x64 tiles up to M = 128 (the most CTAs: on an H200
 * the small-M kernels measured 3 to 5 times slower than cuBLAS at M = 64 to
 * 128), else 128x256 when those tiles alone fill the SMs and 128x128
 * otherwise; the small-M family for M <= 128 that sm90 cannot serve; the
 * simt family's own split for f32; else the simple family.
 */
void builtin_select(const tk_gemm_problem *p, tk_gemm_config *cfg)
{
	tk_gemm_config list[16];
	int n;

	if (p->m <= 32 && p->batch == 1 && tk_gemm_decode_candidates(p, cfg, 1) > 0)
		return;
	if (tk_gemm_simt_candidates(p, cfg, 1) > 0)
		return;
	if (p->m <= 64 && tk_gemm_smallm_candidates(p, cfg, 1) > 0)
		return;
	n = tk_gemm_sm90_candidates(p, list, 16);
	if (n > 16)
		n = 16;
	if (n > 0) {
		int64_t big_tiles = (p->m + 127) / 128 * ((p->n + 255) / 256) * p->batch;
		int want_n = p->m <= 128 ? 64 : big_tiles >= sm_count() ? 256 : 128, pick = -1;
		for (int i = 0; i < n; i++) {
			if (list[i].tile_m != 128 || list[i].tile_n != want_n)
				continue;
			if (pick < 0 || list[i].stages == 4)
				pick = i;
		}
		if (pick < 0 && want_n == 64) {
			for (int i = 0; i < n && pick < 0; i++) {
				if (list[i].tile_m == 128 && list[i].tile_n == 128)
					pick = i;
			}
		}
		*cfg = list[pick < 0 ? 0 : pick];
		return;
	}
	if (p->m <= 128 && tk_gemm_smallm_candidates(p, cfg, 1) > 0)
		return;
	*cfg = simple_config(p->dtype);
}

/*
 * Run the call's choice, else the built-in one; what cannot serve p falls
 * back as the file's head says.
 */
tk_status gemm_run(const tk_gemm_problem *p, const tk_choice *choice, cudaStream_t s)
{
	tk_gemm_config cfg, alt;
	tk_status st;
	int tried = 0;

	if (choice->mode == TK_CHOICE_PREFER || choice->mode == TK_CHOICE_EXACT) {
		tk_gemm_config_of(choice, &cfg);
		st = tk_gemm_launch(p, &cfg, s);
		if (st != TK_ERR_UNSUPPORTED || choice->mode == TK_CHOICE_EXACT)
			return st;
		tried = 1;
	}
	/* A tuned entry may not fit this call (less workspace, say). */
	builtin_select(p, &alt);
	if (!tried || memcmp(&alt, &cfg, sizeof(cfg)) != 0) {
		st = tk_gemm_launch(p, &alt, s);
		if (st != TK_ERR_UNSUPPORTED)
			return st;
	}
	cfg = simple_config(p->dtype);
	return tk_gemm_simple_launch(p, &cfg, s);
}

} /* namespace */

extern "C" int tk_gemm_simple_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	if (!simple_serves(p))
		return 0;
	if (max > 0)
		out[0] = simple_config(p->dtype);
	return 1;
}

extern "C" tk_status tk_gemm_simple_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                           void *stream)
{
	tk_gemm_config want = simple_config(p->dtype);
	cudaStream_t s = static_cast<cudaStream_t>(stream);

	if (!simple_serves(p) || cfg->kind != TK_GEMM_SIMPLE || cfg->tile_m != want.tile_m ||
	    cfg->tile_n != want.tile_n || cfg->tile_k != want.tile_k)
		return TK_ERR_UNSUPPORTED;
	if (p->m == 0 || p->n == 0 || p->batch == 0)
		return TK_OK;
	switch (p->dtype) {
	case TK_F32:
		return simple_run<float>(p, s);
	case TK_F16:
		return simple_run<__half>(p, s);
	default:
		return simple_run<__nv_bfloat16>(p, s);
	}
}

extern "C" int tk_gemm_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max)
{
	int n = 0;

	n += tk_gemm_simple_candidates(p, out, max);
	n += tk_gemm_sm90_candidates(p, out + (n < max ? n : max), n < max ? max - n : 0);
	n += tk_gemm_smallm_candidates(p, out + (n < max ? n : max), n < max ? max - n : 0);
	n += tk_gemm_decode_candidates(p, out + (n < max ? n : max), n < max ? max - n : 0);
	n += tk_gemm_simt_candidates(p, out + (n < max ? n : max), n < max ? max - n : 0);
	return n;
}

extern "C" tk_status tk_gemm_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg,
                                    void *stream)
{
	switch (cfg->kind) {
	case TK_GEMM_SIMPLE:
		return tk_gemm_simple_launch(p, cfg, stream);
	case TK_GEMM_SM90:
		return tk_gemm_sm90_launch(p, cfg, stream);
	case TK_GEMM_SMALLM:
		return tk_gemm_smallm_launch(p, cfg, stream);
	case TK_GEMM_DECODE:
		return tk_gemm_decode_launch(p, cfg, stream);
	case TK_GEMM_SIMT:
		return tk_gemm_simt_launch(p, cfg, stream);
	default:
		return TK_ERR_UNSUPPORTED;
	}
}

extern "C" void tk_gemm_builtin(const tk_gemm_problem *p, tk_gemm_config *cfg)
{
	builtin_select(p, cfg);
}

extern "C" tk_status tk_cuda_gemm(const tk_call *call, void *stream)
{
	tk_gemm_problem p;
	tk_status st = tk_gemm_problem_of(call, 0, &p);

	if (st != TK_OK || p.m == 0 || p.n == 0)
		return st;
	return gemm_run(&p, &call->choice, static_cast<cudaStream_t>(stream));
}

extern "C" tk_status tk_cuda_bmm(const tk_call *call, void *stream)
{
	tk_gemm_problem p;
	tk_status st = tk_gemm_problem_of(call, 1, &p);

	if (st != TK_OK || p.batch == 0 || p.m == 0 || p.n == 0)
		return st;
	return gemm_run(&p, &call->choice, static_cast<cudaStream_t>(stream));
}
