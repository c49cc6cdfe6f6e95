/*
 * math.cu - the unary math ops: exp, log, sqrt, rsqrt, abs, neg,
 * reciprocal, tanh, erf. f32 arithmetic: the accurate functions for f32
 * outputs, the special-function unit's for bf16 and f16 (cuda_common.cuh).
 * Bytes: 2 * numel * elem size.
 */
#include "elementwise.cuh"

#define UNARY_OP(name, expr)                                                   \
	namespace                                                              \
	{                                                                      \
	struct name##_op {                                                     \
		template <int F> __device__ float f(float x) const             \
		{                                                              \
			return (expr);                                         \
		}                                                              \
	};                                                                     \
	}                                                                      \
	extern "C" tk_status tk_cuda_##name(const tk_call *call, void *stream) \
	{                                                                      \
		return tkc::ew_launch<1>(call, stream, name##_op());           \
	}

UNARY_OP(exp, tkc::m_exp<F>(x))
UNARY_OP(log, tkc::m_log<F>(x))
UNARY_OP(sqrt, tkc::m_sqrt<F>(x))
UNARY_OP(rsqrt, F ? rsqrtf(x) : 1.0f / sqrtf(x))
UNARY_OP(abs, fabsf(x))
UNARY_OP(neg, -x)
UNARY_OP(reciprocal, tkc::m_div<F>(1.0f, x))
UNARY_OP(tanh, tkc::m_tanh<F>(x))
UNARY_OP(erf, tkc::m_erf<F>(x))
