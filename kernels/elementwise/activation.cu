/*
 * activation.cu - the activation ops: sigmoid, relu, silu, mish,
 * hardswish, gelu (param 0 "approximate": 0 erf, 1 tanh), softplus
 * (params "beta", "threshold"), leaky_relu ("negative_slope") and clamp
 * ("min_value", "max_value"). f32 arithmetic: the accurate functions for
 * f32 outputs, the fast forms below for bf16 and f16 (cuda_common.cuh).
 * Bytes: 2 * numel * elem size.
 */
#include "elementwise.cuh"

namespace
{

using tkc::m_div;
using tkc::m_exp;
using tkc::m_log;

/* The accurate form; softplus_op and mish_op have their own fast ones. */
__device__ __forceinline__ float softplus_of(float x, float beta, float threshold)
{
	float bx = beta * x;

	return bx > threshold ? x : log1pf(expf(bx)) / beta;
}

struct sigmoid_op {
	template <int F> __device__ float f(float x) const
	{
		return tkc::m_sigmoid<F>(x);
	}
};

struct relu_op {
	template <int F> __device__ float f(float x) const
	{
		return x > 0.0f || x != x ? x : 0.0f;
	}
};

struct silu_op {
	template <int F> __device__ float f(float x) const
	{
		return m_div<F>(x, 1.0f + m_exp<F>(-x));
	}
};

/*
 * x tanh(softplus(x)). Fast: with n = e^x (e^x + 2), tanh(log(1 + e^x)) is
 * n / (n + 2), one exponential and one division with no cancellation;
 * above 20 softplus is x (its threshold) and tanh of it 1 in f32.
 */
struct mish_op {
	template <int F> __device__ float f(float x) const
	{
		if (!F)
			return x * tanhf(softplus_of(x, 1.0f, 20.0f));
		if (x > 20.0f)
			return x;
		float e = __expf(x), n = e * (e + 2.0f);
		return x * __fdividef(n, n + 2.0f);
	}
};

struct hardswish_op {
	template <int F> __device__ float f(float x) const
	{
		float r = x * fminf(fmaxf(x + 3.0f, 0.0f), 6.0f);
		return F ? r * (1.0f / 6.0f) : r / 6.0f; /* the fast grade: no division */
	}
};

/* gelu in either form (cuda_common.cuh: m_gelu_erf, m_gelu_tanh). */
struct gelu_op {
	int approximate;
	template <int F> __device__ float f(float x) const
	{
		return approximate ? tkc::m_gelu_tanh<F>(x) : tkc::m_gelu_erf<F>(x);
	}
};

/* Fast: log(1 + e^y) as max(y, 0) + log(1 + e^-|y|), the log's argument in [1, 2]. */
struct softplus_op {
	float beta, threshold;
	template <int F> __device__ float f(float x) const
	{
		if (!F)
			return softplus_of(x, beta, threshold);
		float bx = beta * x;
		if (bx > threshold)
			return x;
		float l = fmaxf(bx, 0.0f) + __logf(1.0f + __expf(-fabsf(bx)));
		return __fdividef(l, beta);
	}
};

struct leaky_relu_op {
	float slope;
	template <int F> __device__ float f(float x) const
	{
		return x >= 0.0f ? x : x * slope;
	}
};

/* NaN passes through, as in PyTorch; fminf/fmaxf alone would drop it. */
struct clamp_op {
	float lo, hi;
	template <int F> __device__ float f(float x) const
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
