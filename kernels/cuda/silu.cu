/*
 * silu.cu - silu: out = x * sigmoid(x) = x / (1 + exp(-x)).
 * Bytes: 2 * numel * elem size; FLOPs: about 4 per element (exp counted as 1).
 */
#include "elementwise.cuh"

namespace
{
struct SiluOp {
	/* expf, not __expf: the fast form loses accuracy f32 callers can see. */
	__device__ float operator()(float x) const
	{
		return x / (1.0f + expf(-x));
	}
};
} /* namespace */

extern "C" tk_status tk_cuda_silu(const tk_call *call, void *stream)
{
	return tkc::ew_launch<1>(call, stream, SiluOp());
}
