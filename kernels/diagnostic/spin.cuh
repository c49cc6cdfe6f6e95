/*
 * spin.cuh - the body of the diagnostic `spin` kernel, shared by the L1
 * launcher (spin.cu) and the in-process dispatch baseline
 * (kernels/bench/dispatch_baseline.cu), so both time exactly the same
 * device work.
 *
 * Each block busy-waits on the global nanosecond timer until `ns` have
 * passed since the block started, then thread 0 of block b writes
 * out[b % n] = x[b % n] + 1. The kernel's length is thus set by the caller
 * and does not depend on the clock rate or on what else the GPU runs.
 */
#ifndef TILEOPS_SPIN_CUH
#define TILEOPS_SPIN_CUH

#include <stdint.h>

namespace tkc
{

/* Threads per block of the spin kernel: one warp keeps the SM share small. */
constexpr int kSpinThreads = 32;

__device__ __forceinline__ uint64_t global_ns(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

/*
 * One block of the spin kernel. `n` is the element count of x and out;
 * with n == 0 the block only waits. The timer's tick is coarse (tens of
 * nanoseconds to a microsecond, by device), so a block waits at least `ns`
 * and at most about one tick more.
 */
__device__ __forceinline__ void spin_block(const float *x, float *out, int64_t n, uint64_t ns)
{
	uint64_t t0 = global_ns();

	while (global_ns() - t0 < ns) {
	}
	if (threadIdx.x == 0 && n > 0) {
		int64_t i = (int64_t)(blockIdx.x % (uint64_t)n);
		out[i] = x[i] + 1.0f;
	}
}

} /* namespace tkc */

#endif /* TILEOPS_SPIN_CUH */
