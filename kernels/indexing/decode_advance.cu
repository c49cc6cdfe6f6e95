/*
 * decode_advance.cu - decode_advance on the GPU: one thread a row (a
 * decode batch is at most a few hundred rows), each advancing its row by
 * decode_advance.h's definition, the CPU reference's own. The call is
 * checked by tk_decode_advance_parse, so both backends take the same
 * layouts. A length, a page and a slot are read and written by the row's
 * thread alone, so rows need no ordering among themselves.
 */
#include "cuda_common.cuh"
#include "decode_advance.h"

namespace
{

using namespace tkc;

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
        decode_advance_kernel(const __grid_constant__ tk_decode_advance a)
{
	pdl_enter(); /* launched with PDL: the kernel before (the sample) completes first */
	for (int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; b < a.B;
	     b += (int64_t)gridDim.x * blockDim.x)
		tk_decode_advance_row(&a, b);
}

} /* namespace */

extern "C" tk_status tk_cuda_decode_advance(const tk_call *call, void *stream)
{
	tk_decode_advance a;
	tk_status s = tk_decode_advance_parse(call, &a);

	if (s != TK_OK || a.B == 0)
		return s;
	launch_begin();
	launch_pdl(decode_advance_kernel, grid_for(a.B, kThreads), kThreads, 0,
	           static_cast<cudaStream_t>(stream), a);
	return launch_status();
}
