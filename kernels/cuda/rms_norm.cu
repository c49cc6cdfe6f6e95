/*
 * rms_norm.cu - rms_norm over the last dim: out = x * rsqrt(mean(x^2) + eps)
 * * weight, all arithmetic in f32.
 *
 * Rows of up to 1024 elements get one warp each (8 rows per 256-thread
 * block); wider rows get a 512-thread block each. A row is read twice: once
 * for the sum of squares (shuffle reduction, then across warps through
 * shared memory), once to scale; the second read mostly hits L2/L1.
 * Loads are 16-byte vectors when every row is aligned for it.
 * Bytes: (2 * numel(x) + d) * elem size; FLOPs: about 4 * numel(x).
 */
#include "cuda_common.cuh"

namespace
{

using namespace tkc;

const int64_t kWarpRowMax = 1024;
const int kBlockThreads = 512;

/* This thread's share of the row's sum of squares; `t` of `nt` threads. */
template <typename T> __device__ float row_sumsq(const T *xr, int64_t d, bool vec, int t, int nt)
{
	float ss = 0.0f;

	if (vec) {
		const Vec<T> *xv = reinterpret_cast<const Vec<T> *>(xr);
		for (int64_t j = t; j < d / Vec<T>::N; j += nt) {
			Vec<T> a = xv[j];
#pragma unroll
			for (int k = 0; k < Vec<T>::N; k++)
				ss += to_f32(a.v[k]) * to_f32(a.v[k]);
		}
		return ss;
	}
	for (int64_t j = t; j < d; j += nt) {
		float v = to_f32(xr[j]);
		ss += v * v;
	}
	return ss;
}

template <typename T>
__device__ void row_scale(T *o, const T *xr, const T *w, int64_t ws, int64_t d, float rstd,
                          bool vec, int t, int nt)
{
	if (vec) {
		const Vec<T> *xv = reinterpret_cast<const Vec<T> *>(xr);
		const Vec<T> *wv = reinterpret_cast<const Vec<T> *>(w);
		Vec<T> *ov = reinterpret_cast<Vec<T> *>(o);
		for (int64_t j = t; j < d / Vec<T>::N; j += nt) {
			Vec<T> a = xv[j], g = wv[j], r;
#pragma unroll
			for (int k = 0; k < Vec<T>::N; k++)
				r.v[k] = from_f32<T>(to_f32(a.v[k]) * rstd * to_f32(g.v[k]));
			ov[j] = r;
		}
		return;
	}
	for (int64_t j = t; j < d; j += nt)
		o[j] = from_f32<T>(to_f32(xr[j]) * rstd * to_f32(w[j * ws]));
}

template <typename T>
__global__ void rms_norm_warp(T *out, const T *x, const T *w, int64_t ws, int64_t rows, int64_t d,
                              Plan p, float eps, bool vec)
{
	int lane = threadIdx.x & 31;
	int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);

	for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
	     r += warps) {
		int64_t off[2];
		plan_offsets<2>(p, r, off);
		float ss = warp_sum(row_sumsq(x + off[1], d, vec, lane, 32));
		float rstd = rsqrtf(ss / (float)d + eps);
		row_scale(out + off[0], x + off[1], w, ws, d, rstd, vec, lane, 32);
	}
}

template <typename T>
__global__ void rms_norm_block(T *out, const T *x, const T *w, int64_t ws, int64_t rows, int64_t d,
                               Plan p, float eps, bool vec)
{
	__shared__ float scratch[32];

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off[2];
		plan_offsets<2>(p, r, off);
		float ss = row_sumsq(x + off[1], d, vec, threadIdx.x, blockDim.x);
		ss = block_sum(ss, scratch);
		float rstd = rsqrtf(ss / (float)d + eps);
		row_scale(out + off[0], x + off[1], w, ws, d, rstd, vec, threadIdx.x, blockDim.x);
	}
}

template <typename T>
tk_status rms_norm_run(const tk_call *call, const tk_iter &it, int64_t d, float eps, cudaStream_t s)
{
	T *out = static_cast<T *>(call->out[0].data);
	const T *x = static_cast<const T *>(call->in[0].data);
	const T *w = static_cast<const T *>(call->in[1].data);
	int64_t ws = call->in[1].stride[0];
	const void *ptrs[3] = { out, x, w };
	bool vec = (ws == 1 || d == 1) && rows_vectorizable<T>(it, d, ptrs, 3);

	launch_begin();
	if (d <= kWarpRowMax) {
		rms_norm_warp<T><<<grid_for(it.numel, 8), 256, 0, s>>>(out, x, w, ws, it.numel, d,
		                                                       plan_of(it), eps, vec);
	} else {
		rms_norm_block<T><<<grid_for(it.numel, 1), kBlockThreads, 0, s>>>(
		        out, x, w, ws, it.numel, d, plan_of(it), eps, vec);
	}
	return launch_status();
}

} /* namespace */

extern "C" tk_status tk_cuda_rms_norm(const tk_call *call, void *stream)
{
	const tk_tensor *x = &call->in[0], *w = &call->in[1], *out = &call->out[0];
	const tk_tensor *ts[3] = { out, x, w };
	const tk_tensor *rows_of[2] = { out, x };
	float eps = (float)tk_param_num(call, 0, 1e-6);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	tk_iter it;

	if (call->n_in < 2 || call->n_out < 1 || !tk_same_float_dtype(ts, 3))
		return TK_ERR_UNSUPPORTED;
	if (x->ndim < 1 || !tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (w->ndim != 1 || w->shape[0] != d)
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_rows(&it, rows_of, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0 || d == 0)
		return TK_OK;
	switch (x->dtype) {
	case TK_F32:
		return rms_norm_run<float>(call, it, d, eps, s);
	case TK_F16:
		return rms_norm_run<__half>(call, it, d, eps, s);
	default:
		return rms_norm_run<__nv_bfloat16>(call, it, d, eps, s);
	}
}
