/*
 * add.cu - add: out = a + b with numpy broadcasting.
 * Bytes: (|a| + |b| + |out|) * elem size; FLOPs: numel(out).
 */
#include "elementwise.cuh"

namespace
{
struct AddOp {
	__device__ float operator()(float a, float b) const
	{
		return a + b;
	}
};
} /* namespace */

extern "C" tk_status tk_cuda_add(const tk_call *call, void *stream)
{
	return tkc::ew_launch<2>(call, stream, AddOp());
}
