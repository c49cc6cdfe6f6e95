/*
 * fault.cu - the diagnostic `fault` op on the GPU: a kernel that executes a
 * trap instruction, which poisons the context (every later CUDA call
 * returns the sticky error, the way a kernel's illegal memory access does),
 * or, with sticky false, a launch with an empty grid, which the runtime
 * refuses (cudaErrorInvalidConfiguration) without harming the context.
 */
#include "cuda_common.cuh"

namespace
{

__global__ void fault_kernel(float *out)
{
	__trap();
	out[0] = 0.0f; /* never reached */
}

} /* namespace */

extern "C" tk_status tk_cuda_fault(const tk_call *call, void *stream)
{
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	bool sticky = tk_param_num(call, 0, 1.0) != 0.0;
	(void)cudaGetLastError();
	fault_kernel<<<sticky ? 1u : 0u, 1, 0, s>>>(static_cast<float *>(call->out[0].data));
	return cudaGetLastError() == cudaSuccess ? TK_OK : TK_ERR_LAUNCH;
}
