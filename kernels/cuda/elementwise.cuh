/*
 * elementwise.cuh - the elementwise kernels (unary and binary, numpy
 * broadcasting) behind add, mul, silu and gelu. Each op's .cu file supplies
 * a functor and instantiates the launcher once per float dtype.
 *
 * Two kernels per dtype: a flat one for packed, 16-byte-aligned operands
 * (one 16-byte vector per thread per step, grid-stride), and a general one
 * that resolves each element's offsets from the merged iteration plan
 * (broadcast dims have stride 0, padded rows their row stride).
 */
#ifndef TILEOPS_ELEMENTWISE_CUH
#define TILEOPS_ELEMENTWISE_CUH

#include "cuda_common.cuh"

namespace tkc
{

template <int NIN, typename Op>
__device__ __forceinline__ float ew_apply(const Op &op, float a, float b)
{
	if constexpr (NIN == 1)
		return op(a);
	else
		return op(a, b);
}

template <typename T, int NIN, typename Op>
__global__ void ew_flat(T *__restrict__ out, const T *__restrict__ a, const T *__restrict__ b,
                        int64_t n, Op op)
{
	constexpr int N = Vec<T>::N;
	int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t step = (int64_t)gridDim.x * blockDim.x;
	int64_t nvec = n / N;

	for (int64_t i = tid; i < nvec; i += step) {
		Vec<T> va = reinterpret_cast<const Vec<T> *>(a)[i], vb = va, r;
		if constexpr (NIN == 2)
			vb = reinterpret_cast<const Vec<T> *>(b)[i];
#pragma unroll
		for (int k = 0; k < N; k++) {
			float y = 0.0f;
			if constexpr (NIN == 2)
				y = to_f32(vb.v[k]);
			r.v[k] = from_f32<T>(ew_apply<NIN>(op, to_f32(va.v[k]), y));
		}
		reinterpret_cast<Vec<T> *>(out)[i] = r;
	}
	for (int64_t i = nvec * N + tid; i < n; i += step) {
		float y = 0.0f;
		if constexpr (NIN == 2)
			y = to_f32(b[i]);
		out[i] = from_f32<T>(ew_apply<NIN>(op, to_f32(a[i]), y));
	}
}

template <typename T, int NIN, typename Op>
__global__ void ew_general(T *out, const T *a, const T *b, int64_t n, Plan p, Op op)
{
	int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = tid; i < n; i += step) {
		int64_t off[NIN + 1];
		plan_offsets<NIN + 1>(p, i, off);
		float y = 0.0f;
		if constexpr (NIN == 2)
			y = to_f32(b[off[NIN]]);
		out[off[0]] = from_f32<T>(ew_apply<NIN>(op, to_f32(a[off[1]]), y));
	}
}

/* 1 when every operand is walked with stride 1 along a single dim. */
static inline bool ew_is_flat(const tk_iter &it)
{
	if (it.ndim != 1)
		return false;
	for (int op = 0; op < it.n_ops; op++) {
		if (it.stride[op][0] != 1)
			return false;
	}
	return true;
}

template <typename T, int NIN, typename Op>
static tk_status ew_run(const tk_call *call, const tk_iter &it, cudaStream_t stream, Op op)
{
	const int threads = 256;
	T *out = static_cast<T *>(call->out[0].data);
	const T *a = static_cast<const T *>(call->in[0].data);
	const T *b = NIN == 2 ? static_cast<const T *>(call->in[1].data) : a;

	launch_begin();
	if (ew_is_flat(it) && aligned16(out) && aligned16(a) && aligned16(b)) {
		unsigned g = grid_for(it.numel, threads * Vec<T>::N);
		ew_flat<T, NIN, Op><<<g, threads, 0, stream>>>(out, a, b, it.numel, op);
	} else {
		unsigned g = grid_for(it.numel, threads);
		ew_general<T, NIN, Op>
		        <<<g, threads, 0, stream>>>(out, a, b, it.numel, plan_of(it), op);
	}
	return launch_status();
}

/* Check the call like the CPU reference does, then launch for its dtype. */
template <int NIN, typename Op> static tk_status ew_launch(const tk_call *call, void *stream, Op op)
{
	const tk_tensor *ins[2] = { &call->in[0], &call->in[1] };
	const tk_tensor *ts[3] = { &call->out[0], &call->in[0], &call->in[1] };
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	tk_iter it;

	if (call->n_in < NIN || call->n_out < 1 || !tk_same_float_dtype(ts, NIN + 1))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_broadcast(&it, &call->out[0], ins, NIN) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0)
		return TK_OK;
	switch (call->out[0].dtype) {
	case TK_F32:
		return ew_run<float, NIN>(call, it, s, op);
	case TK_F16:
		return ew_run<__half, NIN>(call, it, s, op);
	default:
		return ew_run<__nv_bfloat16, NIN>(call, it, s, op);
	}
}

} /* namespace tkc */

#endif /* TILEOPS_ELEMENTWISE_CUH */
