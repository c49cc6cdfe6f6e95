/*
 * attention_prefill.cuh - the sm_90a instructions the prefill kernel is
 * built from: the wrappers of sm90.cuh, with the mbarrier and bulk-copy ones
 * taking the barrier and tile as pointers into shared memory.
 *
 * Shared-memory tiles are stored as the bulk tensor copy writes them with
 * 128-byte swizzling: blocks of [rows][64] 16-bit elements, each row 128
 * bytes, 8 rows forming one 1024-byte swizzle atom. Every block starts on a
 * 1024-byte boundary so the descriptors' base offset stays 0.
 *
 * Descriptors (sw128_desc): K-major operands (Q, K) use sbo = 1024 (the next
 * 8 rows) and no lbo; the MN-major V uses sbo = 1024 (the next 8 keys) and
 * lbo = one [rows][64] block (the next 64 output columns).
 */
#ifndef TILEOPS_ATTENTION_PREFILL_CUH
#define TILEOPS_ATTENTION_PREFILL_CUH

#include <stdint.h>

#include "sm90.cuh"

namespace tkp
{

using namespace tk_sm90;

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
	tk_sm90::mbar_init(smem_addr(bar), count);
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
	mbar_arrive_expect_tx(smem_addr(bar), bytes);
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
	tk_sm90::mbar_arrive(smem_addr(bar));
}

/* Block until the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
	tk_sm90::mbar_wait(smem_addr(bar), parity);
}

/* A 4-d box of `map` at (c0..c3), completing on `bar` with its byte count. */
__device__ __forceinline__ void tma_load_4d(void *dst, const void *map, uint64_t *bar, int c0,
                                            int c1, int c2, int c3)
{
	tk_sm90::tma_load_4d(smem_addr(dst), map, smem_addr(bar), c0, c1, c2, c3);
}

} /* namespace tkp */

#endif /* TILEOPS_ATTENTION_PREFILL_CUH */
