/*
 * gelu.cu - gelu, exact (erf) or tanh-approximated (param "approximate").
 * Bytes: 2 * numel * elem size; FLOPs: about 8 per element.
 */
#include "elementwise.cuh"

namespace
{
struct GeluOp {
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
} /* namespace */

extern "C" tk_status tk_cuda_gelu(const tk_call *call, void *stream)
{
	GeluOp op = { tk_param_num(call, 0, 0.0) != 0.0 };

	return tkc::ew_launch<1>(call, stream, op);
}
