/* gpu_util.c - see gpu_util.h. */
#include "gpu/gpu_util.h"

#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <time.h>

uint64_t gpu_case_seed;

void gpu_require(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	cr_assert(e == cudaSuccess && n > 0,
	          "no CUDA device is usable (%s, %d devices): the gpu tests must run on a "
	          "machine with a GPU",
	          e == cudaSuccess ? "no error" : cudaGetErrorString(e), n);
}

uint64_t gpu_fresh_seed(void)
{
	static uint64_t counter;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	gpu_case_seed = ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) + ++counter * 0x9e37ULL;
	gpu_case_seed |= 1;
	return gpu_case_seed;
}
