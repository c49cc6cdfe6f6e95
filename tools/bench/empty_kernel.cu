/*
 * empty_kernel.cu - device helpers of tileops-bench: a kernel that does
 * nothing (the floor a decode-size op is compared with, timed the same
 * way, launched plainly or with programmatic dependent launch like the
 * memory-bound kernels), and a delay kernel that holds the stream while the
 * host enqueues a timed call, so the call's events time the kernel and not
 * the host's launch path.
 */
#include <cuda_runtime.h>
#include <stdint.h>

namespace
{
__global__ void empty_kernel(void)
{
}

/* As the memory-bound kernels start (tkc::pdl_enter): wait, then release. */
__global__ void empty_pdl_kernel(void)
{
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void delay_kernel(uint64_t ns)
{
	uint64_t t0, t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do {
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
}
} /* namespace */

extern "C" int bench_launch_empty(void *stream)
{
	empty_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>();
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int bench_launch_empty_pdl(void *stream)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];

	at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[0].val.programmaticStreamSerializationAllowed = 1;
	cfg.gridDim = dim3(1);
	cfg.blockDim = dim3(32);
	cfg.stream = static_cast<cudaStream_t>(stream);
	cfg.attrs = at;
	cfg.numAttrs = 1;
	return cudaLaunchKernelEx(&cfg, empty_pdl_kernel) == cudaSuccess ? 0 : -1;
}

extern "C" int bench_launch_delay(void *stream, uint64_t ns)
{
	delay_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(ns);
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
