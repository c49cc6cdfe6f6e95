/*
 * launch.cu - the switch for programmatic dependent launch of the kernels
 * (tileops_kernels.h, launch_pdl in cuda_common.cuh), set by the caller
 * (the daemon's `pdl`), the clearing of split-K counters in a chain of such
 * kernels, and the device's name for the tuning table's header.
 */
#include <stdio.h>

#include "cuda_common.cuh"

namespace
{

/* On until the caller says otherwise; read at every launch. */
int pdl_state = 1;

/* Zero p[0 .. n) once the kernel before has completed. */
__global__ void __launch_bounds__(256) clear_words_kernel(unsigned *p, size_t n)
{
	tkc::pdl_enter();
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = 0;
}

} /* namespace */

cudaError_t tkc::clear_words(void *p, size_t words, cudaStream_t s)
{
	if (words == 0)
		return cudaSuccess;
	if (!tk_cuda_pdl())
		return cudaMemsetAsync(p, 0, words * sizeof(unsigned), s);
	size_t blocks = (words + 255) / 256;
	return launch_pdl(clear_words_kernel, (unsigned)(blocks < 64 ? blocks : 64), 256, 0, s,
	                  static_cast<unsigned *>(p), words);
}

extern "C" int tk_cuda_pdl(void)
{
	return __atomic_load_n(&pdl_state, __ATOMIC_RELAXED);
}

extern "C" int tk_cuda_set_pdl(int on)
{
	return __atomic_exchange_n(&pdl_state, on ? 1 : 0, __ATOMIC_RELAXED);
}

extern "C" tk_status tk_cuda_device_id(int device, char *buf, size_t len)
{
	cudaDeviceProp prop;

	if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
		cudaGetLastError();
		snprintf(buf, len, "unknown");
		return TK_ERR_LAUNCH;
	}
	snprintf(buf, len, "%s sm=%d%d", prop.name, prop.major, prop.minor);
	return TK_OK;
}
