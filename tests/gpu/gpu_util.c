/* gpu_util.c - see gpu_util.h. */
#include "gpu/gpu_util.h"

#include <criterion/criterion.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
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
	gpu_case_seed =
	        ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20)) + ++counter * 0x9e37ULL;
	gpu_case_seed |= 1;
	return gpu_case_seed;
}

void *gpu_to_device(const tk_tensor *t)
{
	size_t bytes = tt_span_bytes(t);
	void *d = NULL;

	if (bytes == 0)
		return NULL;
	cr_assert_eq(cudaMalloc(&d, bytes), cudaSuccess, "cudaMalloc %zu bytes", bytes);
	cr_assert_eq(cudaMemcpy(d, t->data, bytes, cudaMemcpyHostToDevice), cudaSuccess);
	return d;
}

int gpu_padding_kept(const tk_tensor *t, const unsigned char *got, const unsigned char *before)
{
	size_t bytes = tt_span_bytes(t), es = tk_dtype_size(t->dtype);
	unsigned char *want = malloc(bytes ? bytes : 1);
	int64_t n = tk_numel(t);
	int ok;

	memcpy(want, before, bytes);
	for (int64_t i = 0; i < n; i++) {
		size_t o = (size_t)tt_offset(t, i) * es;
		memcpy(want + o, got + o, es);
	}
	ok = memcmp(want, got, bytes) == 0;
	free(want);
	return ok;
}
