/*
 * binary.cu - the binary ops with numpy broadcasting: add, sub, mul, div,
 * maximum, minimum (both propagate NaN, as in PyTorch) and pow. div and
 * pow use the fast forms for bf16 and f16 outputs (cuda_common.cuh).
 * Bytes: (|a| + |b| + |out|) * elem size; FLOPs: numel(out).
 */
#include "elementwise.cuh"

#define BINARY_OP(name, expr)                                                  \
	namespace                                                              \
	{                                                                      \
	struct name##_op {                                                     \
		template <int F> __device__ float f(float a, float b) const    \
		{                                                              \
			return (expr);                                         \
		}                                                              \
	};                                                                     \
	}                                                                      \
	extern "C" tk_status tk_cuda_##name(const tk_call *call, void *stream) \
	{                                                                      \
		return tkc::ew_launch<2>(call, stream, name##_op());           \
	}

BINARY_OP(add, a + b)
BINARY_OP(sub, a - b)
BINARY_OP(mul, a *b)
BINARY_OP(div, tkc::m_div<F>(a, b))
/* NaN-propagating and branch-free (a select): a + b is the NaN when either is one. */
BINARY_OP(maximum, (a != a || b != b) ? a + b : fmaxf(a, b))
BINARY_OP(minimum, (a != a || b != b) ? a + b : fminf(a, b))
BINARY_OP(pow, F ? tkc::m_pow_fast(a, b) : powf(a, b))
