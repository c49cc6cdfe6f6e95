/*
 * launch.cu - the process-wide switch for programmatic dependent launch of
 * the kernels (tileops_kernels.h, launch_pdl in cuda_common.cuh), and the
 * clearing of split-K counters in a chain of such kernels.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

namespace
{

/* -1: not read from the environment yet; 0 or 1 after. */
int pdl_state = -1;

int pdl_from_env(void)
{
	const char *v = getenv("TILEOPS_PDL");

	return v == NULL || strcmp(v, "0") != 0;
}

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
	int v = __atomic_load_n(&pdl_state, __ATOMIC_RELAXED);

	if (v < 0) {
		int e = pdl_from_env();
		/* the first reader stores the environment's value; a racing set wins */
		__atomic_compare_exchange_n(&pdl_state, &v, e, false, __ATOMIC_RELAXED,
		                            __ATOMIC_RELAXED);
		v = __atomic_load_n(&pdl_state, __ATOMIC_RELAXED);
	}
	return v;
}

extern "C" int tk_cuda_set_pdl(int on)
{
	int prev = tk_cuda_pdl();

	__atomic_store_n(&pdl_state, on ? 1 : 0, __ATOMIC_RELAXED);
	return prev;
}
