/*
 * mul.cu - mul: out = a * b with numpy broadcasting.
 * Bytes: (|a| + |b| + |out|) * elem size; FLOPs: numel(out).
 */
#include "elementwise.cuh"

namespace
{
struct MulOp {
	__device__ float operator()(float a, float b) const
	{
		return a * b;
	}
};
} /* namespace */

extern "C" tk_status tk_cuda_mul(const tk_call *call, void *stream)
{
	return tkc::ew_launch<2>(call, stream, MulOp());
}
