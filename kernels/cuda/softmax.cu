/*
 * softmax.cu - softmax over the last dim, max-subtracted, f32 arithmetic.
 *
 * One pass keeps a running (max, sum of exp(x - max)) per thread, rescaling
 * the sum when the max grows; the pairs merge across the warp by shuffles
 * and across warps through shared memory. A second pass writes
 * exp(x - max) / sum. Rows up to 1024 wide get one warp each, wider rows a
 * 512-thread block; 16-byte vector loads when every row is aligned.
 * Bytes: 2 * numel * elem size (plus a re-read that mostly hits cache);
 * FLOPs: about 5 * numel.
 */
#include "cuda_common.cuh"

namespace
{

using namespace tkc;

const int64_t kWarpRowMax = 1024;
const int kBlockThreads = 512;

struct MaxSum {
	float m, s;
};

/* Fold one value in. A -inf input adds nothing, also while the max is -inf. */
__device__ __forceinline__ void ms_add(MaxSum &a, float v)
{
	if (v > a.m) {
		a.s = a.s * expf(a.m - v) + 1.0f;
		a.m = v;
	} else if (a.m != -INFINITY) {
		a.s += expf(v - a.m);
	}
}

__device__ __forceinline__ MaxSum ms_merge(MaxSum a, MaxSum b)
{
	float m = fmaxf(a.m, b.m);

	if (m == -INFINITY)
		return a;
	MaxSum r = { m, a.s * expf(a.m - m) + b.s * expf(b.m - m) };
	return r;
}

__device__ __forceinline__ MaxSum ms_warp(MaxSum a)
{
	for (int o = 16; o > 0; o >>= 1) {
		MaxSum b = { __shfl_xor_sync(0xffffffffu, a.m, o),
			     __shfl_xor_sync(0xffffffffu, a.s, o) };
		a = ms_merge(a, b);
	}
	return a;
}

template <typename T> __device__ MaxSum row_maxsum(const T *xr, int64_t d, bool vec, int t, int nt)
{
	MaxSum a = { -INFINITY, 0.0f };

	if (vec) {
		const Vec<T> *xv = reinterpret_cast<const Vec<T> *>(xr);
		for (int64_t j = t; j < d / Vec<T>::N; j += nt) {
			Vec<T> v = xv[j];
#pragma unroll
			for (int k = 0; k < Vec<T>::N; k++)
				ms_add(a, to_f32(v.v[k]));
		}
		return a;
	}
	for (int64_t j = t; j < d; j += nt)
		ms_add(a, to_f32(xr[j]));
	return a;
}

template <typename T>
__device__ void row_write(T *o, const T *xr, int64_t d, MaxSum ms, bool vec, int t, int nt)
{
	float inv = 1.0f / ms.s;

	if (vec) {
		const Vec<T> *xv = reinterpret_cast<const Vec<T> *>(xr);
		Vec<T> *ov = reinterpret_cast<Vec<T> *>(o);
		for (int64_t j = t; j < d / Vec<T>::N; j += nt) {
			Vec<T> v = xv[j], r;
#pragma unroll
			for (int k = 0; k < Vec<T>::N; k++)
				r.v[k] = from_f32<T>(expf(to_f32(v.v[k]) - ms.m) * inv);
			ov[j] = r;
		}
		return;
	}
	for (int64_t j = t; j < d; j += nt)
		o[j] = from_f32<T>(expf(to_f32(xr[j]) - ms.m) * inv);
}

template <typename T>
__global__ void softmax_warp(T *out, const T *x, int64_t rows, int64_t d, Plan p, bool vec)
{
	int lane = threadIdx.x & 31;
	int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);

	for (int64_t r = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
	     r += warps) {
		int64_t off[2];
		plan_offsets<2>(p, r, off);
		MaxSum ms = ms_warp(row_maxsum(x + off[1], d, vec, lane, 32));
		row_write(out + off[0], x + off[1], d, ms, vec, lane, 32);
	}
}

template <typename T>
__global__ void softmax_block(T *out, const T *x, int64_t rows, int64_t d, Plan p, bool vec)
{
	__shared__ MaxSum scratch[32];
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int nwarps = (blockDim.x + 31) >> 5;

	for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
		int64_t off[2];
		plan_offsets<2>(p, r, off);
		MaxSum ms = ms_warp(row_maxsum(x + off[1], d, vec, threadIdx.x, blockDim.x));
		__syncthreads(); /* the previous row's readers are done with scratch */
		if (lane == 0)
			scratch[warp] = ms;
		__syncthreads();
		MaxSum none = { -INFINITY, 0.0f };
		ms = ms_warp(lane < nwarps ? scratch[lane] : none);
		row_write(out + off[0], x + off[1], d, ms, vec, threadIdx.x, blockDim.x);
	}
}

template <typename T>
tk_status softmax_run(const tk_call *call, const tk_iter &it, int64_t d, cudaStream_t s)
{
	T *out = static_cast<T *>(call->out[0].data);
	const T *x = static_cast<const T *>(call->in[0].data);
	const void *ptrs[2] = { out, x };
	bool vec = rows_vectorizable<T>(it, d, ptrs, 2);

	launch_begin();
	if (d <= kWarpRowMax) {
		softmax_warp<T><<<grid_for(it.numel, 8), 256, 0, s>>>(out, x, it.numel, d,
		                                                      plan_of(it), vec);
	} else {
		softmax_block<T><<<grid_for(it.numel, 1), kBlockThreads, 0, s>>>(
		        out, x, it.numel, d, plan_of(it), vec);
	}
	return launch_status();
}

} /* namespace */

extern "C" tk_status tk_cuda_softmax(const tk_call *call, void *stream)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2))
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_rows(&it, ts, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (it.numel == 0 || d == 0)
		return TK_OK;
	switch (x->dtype) {
	case TK_F32:
		return softmax_run<float>(call, it, d, s);
	case TK_F16:
		return softmax_run<__half>(call, it, d, s);
	default:
		return softmax_run<__nv_bfloat16>(call, it, d, s);
	}
}
