/*
 * gemm.cu - gemm: c = alpha * (a b) [+ bias], f32 accumulation.
 * a [M, K]; b [K, N], or [N, K] with trans_b; bias [N]; c [M, N]; rows of
 * each may be padded (leading dimensions lda, ldb, ldc).
 *
 * f16 and bf16 run on the tensor cores through WMMA: a 128-thread block
 * computes a 64x64 tile of c, each warp a 32x32 quarter as 2x2 fragments
 * of 16x16, stepping K by 32 through shared memory. f32 runs a SIMT tiled
 * kernel: a 256-thread block computes a 64x64 tile, each thread a 4x4
 * register tile, stepping K by 16. Both stage tiles with bounds checks
 * (zeros outside the matrices), so any M, N, K work; b is transposed into
 * [k][n] order while it is staged, so one kernel serves both layouts.
 * Bytes: (M*K + K*N + M*N [+ N]) * elem size; FLOPs: 2*M*N*K (+ 2*M*N).
 */
#include <mma.h>

#include "cuda_common.cuh"

namespace
{

using namespace tkc;

struct GemmArgs {
	int64_t m, n, k, lda, ldb, ldc;
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

template <typename T>
__device__ __forceinline__ void store_c(T *c, const T *bias, const GemmArgs &g, int64_t row,
                                        int64_t col, float acc)
{
	float v = g.alpha * acc;

	if (bias != nullptr)
		v += to_f32(bias[col]);
	c[row * g.ldc + col] = from_f32<T>(v);
}

/* ---- f32: SIMT ---------------------------------------------------------- */

const int kSimtK = 16;

__global__ void __launch_bounds__(256)
        gemm_simt(float *c, const float *a, const float *b, const float *bias, GemmArgs g)
{
	__shared__ float as[kSimtK][kTile + 4];
	__shared__ float bs[kSimtK][kTile + 4];
	int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	int64_t n0 = (int64_t)blockIdx.x * kTile;
	int64_t mtiles = (g.m + kTile - 1) / kTile;

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
					store_c(c, bias, g, row, col, acc[i][j]);
			}
		}
	}
}

/* ---- f16 / bf16: tensor cores through WMMA ------------------------------ */

const int kWmmaK = 32;
const int kPad = 8; /* keeps rows 16-byte aligned and spreads the banks */

template <typename T>
__global__ void __launch_bounds__(128)
        gemm_wmma(T *c, const T *a, const T *b, const T *bias, GemmArgs g)
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
				store_c(c, bias, g, m0 + r, n0 + col, cs[r][col]);
		}
		__syncthreads(); /* cs is rewritten by the next m tile */
	}
}

template <typename T> tk_status gemm_run(const tk_call *call, const GemmArgs &g, cudaStream_t s)
{
	T *c = static_cast<T *>(call->out[0].data);
	const T *a = static_cast<const T *>(call->in[0].data);
	const T *b = static_cast<const T *>(call->in[1].data);
	const T *bias = call->n_in > 2 ? static_cast<const T *>(call->in[2].data) : nullptr;
	int64_t ntiles = (g.n + kTile - 1) / kTile, mtiles = (g.m + kTile - 1) / kTile;
	dim3 grid((unsigned)ntiles, (unsigned)(mtiles < 65535 ? mtiles : 65535));

	launch_begin();
	if constexpr (sizeof(T) == 4)
		gemm_simt<<<grid, 256, 0, s>>>(c, a, b, bias, g);
	else
		gemm_wmma<T><<<grid, 128, 0, s>>>(c, a, b, bias, g);
	return launch_status();
}

} /* namespace */

extern "C" tk_status tk_cuda_gemm(const tk_call *call, void *stream)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *bias = call->n_in > 2 ? &call->in[2] : nullptr;
	const tk_tensor *ts[4] = { c, a, b, bias };
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	GemmArgs g;
	int64_t bk, bn, cm, cn;

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(ts, bias ? 4 : 3))
		return TK_ERR_UNSUPPORTED;
	g.alpha = (float)tk_param_num(call, 0, 1.0);
	g.trans_b = tk_param_num(call, 1, 0.0) != 0.0;
	if (tk_matrix_view(a, &g.m, &g.k, &g.lda) != TK_OK || b->ndim != 2 ||
	    tk_matrix_view(b, &bk, &bn, &g.ldb) != TK_OK ||
	    tk_matrix_view(c, &cm, &cn, &g.ldc) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (g.trans_b) {
		int64_t t = bk;
		bk = bn;
		bn = t;
	}
	g.n = bn;
	if (bk != g.k || cm != g.m || cn != g.n)
		return TK_ERR_UNSUPPORTED;
	if (bias && (tk_numel(bias) != g.n || !tk_last_dim_packed(bias)))
		return TK_ERR_UNSUPPORTED;
	if (g.m == 0 || g.n == 0)
		return TK_OK;
	if ((g.n + kTile - 1) / kTile > 0x7fffffff)
		return TK_ERR_UNSUPPORTED;
	switch (a->dtype) {
	case TK_F32:
		return gemm_run<float>(call, g, s);
	case TK_F16:
		return gemm_run<__half>(call, g, s);
	default:
		return gemm_run<__nv_bfloat16>(call, g, s);
	}
}
