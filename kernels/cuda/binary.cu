/*
 * binary.cu - the binary ops with numpy broadcasting: add, sub, mul, div,
 * maximum, minimum (both propagate NaN, as in PyTorch) and pow.
 * Bytes: (|a| + |b| + |out|) * elem size; FLOPs: numel(out).
 */
#include "elementwise.cuh"

#define BINARY_OP(name, expr)                                                  \
	namespace                                                              \
	{                                                                      \
	struct name##_op {                                                     \
		__device__ float operator()(float a, float b) const            \
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
BINARY_OP(div, a / b)
BINARY_OP(maximum, tkc::max_nan(a, b))
BINARY_OP(minimum, (a != a || b != b) ? a + b : fminf(a, b))
BINARY_OP(pow, powf(a, b))
