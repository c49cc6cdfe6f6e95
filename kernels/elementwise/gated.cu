/*
 * gated.cu - silu_and_mul and gelu_and_mul: x [.., 2d] -> out [.., d],
 * out = act(x[.., :d]) * x[.., d:]. The elementwise row kernel with the
 * gate half as input a and the up half (the same rows, d further on) as
 * input b, so each output vector reads one vector of each half.
 * Bytes: (|x| + |out|) * elem size.
 */
#include "elementwise.cuh"

namespace
{

using namespace tkc;

/* The activations as in activation.cu (fast forms for bf16 and f16), times the up half. */
struct silu_mul_op {
	template <int F> __device__ float f(float g, float u) const
	{
		return m_div<F>(g, 1.0f + m_exp<F>(-g)) * u;
	}
};

struct gelu_mul_op {
	int approximate;
	template <int F> __device__ float f(float g, float u) const
	{
		return (approximate ? m_gelu_tanh<F>(g) : m_gelu_erf<F>(g)) * u;
	}
};

/* Rows that no single row stride reaches (or over 2^32 units): one thread per output. */
template <typename T, typename Op>
__global__ void gated_flat(T *out, const T *x, int64_t rows, int64_t d, Plan p, Op op)
{
	pdl_enter();
	int64_t n = rows * d;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t r = i / d, j = i - r * d, off[2];
		plan_offsets<2>(p, r, off);
		out[off[0] + j] = from_f32<T>(op.template f<ew_fast<T>()>(
		        to_f32(x[off[1] + j]), to_f32(x[off[1] + d + j])));
	}
}

template <typename T, typename Op>
tk_status gated_general(T *out, const T *x, const tk_iter &it, int64_t d, cudaStream_t s, Op op)
{
	launch_begin();
	launch_pdl(gated_flat<T, Op>, grid_for(it.numel * d, 256), 256, 0, s, out, x, it.numel, d,
	           plan_of(it), op);
	return launch_status();
}

template <typename T, typename Op>
tk_status gated_run(const tk_call *call, const tk_iter &it, int64_t d, cudaStream_t s, Op op)
{
	T *out = static_cast<T *>(call->out[0].data);
	const T *x = static_cast<const T *>(call->in[0].data);
	const T *up = x + d;
	RowWalk<3> w;
	bool vec = d % Vec<T>::N == 0 && aligned16(out) && aligned16(x);

	w.rows = it.numel;
	w.width = d;
	for (int op = 0; op < 3; op++) {
		int src = op == 2 ? 1 : op;
		w.inner[op] = 1;
		w.rstride[op] = it.stride[src][0];
		if (it.shape[0] > 1 && (it.stride[src][0] * (int64_t)sizeof(T)) % 16 != 0)
			vec = false;
	}
	w.vec = vec;
	w.upr = vec ? d / Vec<T>::N : d;
	w.units = w.rows * w.upr;
	if (it.ndim > 1 || w.units >= ((int64_t)1 << 32))
		return gated_general<T>(out, x, it, d, s, op);
	launch_begin();
	/* One row (a decode token): its two halves and the output are packed vectors. */
	if (ew_flat_fits(w))
		ew_flat_launch<T, 2>(w, out, x, up, s, op);
	else
		ew_walk_launch<T, 2>(w, out, x, up, s, op);
	return launch_status();
}

template <typename Op> tk_status gated_launch(const tk_call *call, void *stream, Op op)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2))
		return TK_ERR_UNSUPPORTED;
	if (x->ndim < 1 || !tk_last_dim_packed(x) || !tk_last_dim_packed(out))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(out);
	if (tk_last_dim(x) != 2 * d || tk_iter_outer(&it, ts, 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0 || d == 0)
		return TK_OK;
	switch (x->dtype) {
	case TK_F32:
		return gated_run<float>(call, it, d, s, op);
	case TK_F16:
		return gated_run<__half>(call, it, d, s, op);
	default:
		return gated_run<__nv_bfloat16>(call, it, d, s, op);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_silu_and_mul(const tk_call *call, void *stream)
{
	return gated_launch(call, stream, silu_mul_op());
}

extern "C" tk_status tk_cuda_gelu_and_mul(const tk_call *call, void *stream)
{
	gelu_mul_op op = { tk_param_num(call, 0, 0.0) != 0.0 };

	return gated_launch(call, stream, op);
}
