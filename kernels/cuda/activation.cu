/*
 * activation.cu - the activation ops: sigmoid, relu, silu, mish,
 * hardswish, gelu (param 0 "approximate": 0 erf, 1 tanh), softplus
 * (params "beta", "threshold"), leaky_relu ("negative_slope") and clamp
 * ("min_value", "max_value"). f32 arithmetic with CUDA's accurate
 * functions. Bytes: 2 * numel * elem size.
 */
#include "elementwise.cuh"

namespace
{

__device__ __forceinline__ float softplus_of(float x, float beta, float threshold)
{
	float bx = beta * x;

	return bx > threshold ? x : log1pf(expf(bx)) / beta;
}

struct sigmoid_op {
	__device__ float operator()(float x) const
	{
		return 1.0f / (1.0f + expf(-x));
	}
};

struct relu_op {
	__device__ float operator()(float x) const
	{
		return x > 0.0f || x != x ? x : 0.0f;
	}
};

struct silu_op {
	__device__ float operator()(float x) const
	{
		return x / (1.0f + expf(-x));
	}
};

struct mish_op {
	__device__ float operator()(float x) const
	{
		return x * tanhf(softplus_of(x, 1.0f, 20.0f));
	}
};

struct hardswish_op {
	__device__ float operator()(float x) const
	{
		return x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f) / 6.0f;
	}
};

struct gelu_op {
	int approximate;
	__device__ float operator()(float x) const
	{
		if (approximate) {
			float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
			return 0.5f * x * (1.0f + tanhf(inner));
		}
		return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
	}
};

struct softplus_op {
	float beta, threshold;
	__device__ float operator()(float x) const
	{
		return softplus_of(x, beta, threshold);
	}
};

struct leaky_relu_op {
	float slope;
	__device__ float operator()(float x) const
	{
		return x >= 0.0f ? x : x * slope;
	}
};

/* NaN passes through, as in PyTorch; fminf/fmaxf alone would drop it. */
struct clamp_op {
	float lo, hi;
	__device__ float operator()(float x) const
	{
		return x != x ? x : fminf(fmaxf(x, lo), hi);
	}
};

} /* namespace */

extern "C" tk_status tk_cuda_sigmoid(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, sigmoid_op());
}

extern "C" tk_status tk_cuda_relu(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, relu_op());
}

extern "C" tk_status tk_cuda_silu(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, silu_op());
}

extern "C" tk_status tk_cuda_mish(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, mish_op());
}

extern "C" tk_status tk_cuda_hardswish(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, hardswish_op());
}

extern "C" tk_status tk_cuda_gelu(const tk_call *call, void *stream)
{
	gelu_op op = { tk_param_num(call, 0, 0.0) != 0.0 };

	return tkc::ew_launch<1>(call, stream, op);
}

extern "C" tk_status tk_cuda_softplus(const tk_call *call, void *stream)
{
	softplus_op op = { (float)tk_param_num(call, 0, 1.0), (float)tk_param_num(call, 1, 20.0) };

	return tkc::ew_launch<1>(call, stream, op);
}

extern "C" tk_status tk_cuda_leaky_relu(const tk_call *call, void *stream)
{
	leaky_relu_op op = { (float)tk_param_num(call, 0, 0.01) };

	return tkc::ew_launch<1>(call, stream, op);
}

extern "C" tk_status tk_cuda_clamp(const tk_call *call, void *stream)
{
	clamp_op op = { (float)tk_param_num(call, 0, -INFINITY),
		        (float)tk_param_num(call, 1, INFINITY) };

	return tkc::ew_launch<1>(call, stream, op);
}
