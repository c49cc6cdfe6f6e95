/*
 * unary_math.cu - the unary math ops: exp, log, sqrt, rsqrt, abs, neg,
 * reciprocal, tanh, erf. f32 arithmetic with CUDA's accurate functions
 * (not the fast intrinsics, whose error f32 callers can see).
 * Bytes: 2 * numel * elem size.
 */
#include "elementwise.cuh"

#define UNARY_OP(name, expr)                                                   \
	namespace                                                              \
	{                                                                      \
	struct name##_op {                                                     \
		__device__ float operator()(float x) const                     \
		{                                                              \
			return (expr);                                         \
		}                                                              \
	};                                                                     \
	}                                                                      \
	extern "C" tk_status tk_cuda_##name(const tk_call *call, void *stream) \
	{                                                                      \
		return tkc::ew_launch<1>(call, stream, name##_op());           \
	}

UNARY_OP(exp, expf(x))
UNARY_OP(log, logf(x))
UNARY_OP(sqrt, sqrtf(x))
UNARY_OP(rsqrt, 1.0f / sqrtf(x))
UNARY_OP(abs, fabsf(x))
UNARY_OP(neg, -x)
UNARY_OP(reciprocal, 1.0f / x)
UNARY_OP(tanh, tanhf(x))
UNARY_OP(erf, erff(x))
