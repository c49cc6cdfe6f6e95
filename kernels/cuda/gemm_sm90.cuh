/*
 * gemm_sm90.cuh - the Hopper instructions behind gemm_sm90.cu, one thin
 * wrapper each: mbarriers, bulk tensor copies (TMA), warpgroup matrix
 * multiply-accumulate (wgmma) and register reallocation. Device code for
 * sm_90a only; every wrapper is inline PTX, spelled as the PTX ISA names it.
 *
 * Shared-memory addresses are 32-bit offsets in the shared window
 * (smem_addr); tensor maps are the 128-byte CUtensorMap objects built on the
 * host and passed as __grid_constant__ kernel parameters.
 */
#ifndef TILEOPS_GEMM_SM90_CUH
#define TILEOPS_GEMM_SM90_CUH

#include <stdint.h>

namespace tk_sm90
{

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarriers ---------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/* Makes the initialized barriers visible to the copy engine and the other threads. */
__device__ __forceinline__ void mbar_init_fence(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Arrive once and announce `bytes` more bytes that copies will complete. */
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
	             : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/*
 * Wait until the phase with parity `parity` has completed. A barrier that
 * has not completed any phase yet counts its (virtual) previous phase, of
 * parity 1, as complete: a producer waiting for parity 1 on a fresh "slot
 * free" barrier passes at once.
 */
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
	asm volatile("{\n"
	             ".reg .pred done;\n"
	             "wait_%=:\n"
	             "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
	             "@!done bra wait_%=;\n"
	             "}\n" ::"r"(bar),
	             "r"(parity)
	             : "memory");
}

/* ---- bulk tensor copies ------------------------------------------------- */

__device__ __forceinline__ void tma_prefetch_map(const void *map)
{
	asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)map) : "memory");
}

/*
 * Copy the box at coordinates (x, y, z) (innermost first, in elements) of
 * the tensor `map` describes into shared memory at dst; completion adds the
 * box's bytes to bar's transaction count. Elements outside the tensor are
 * written as zeros.
 */
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void *map, uint32_t bar, int x,
                                            int y, int z)
{
	asm volatile(
	        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
	        " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(dst),
	        "l"((uint64_t)map), "r"(bar), "r"(x), "r"(y), "r"(z)
	        : "memory");
}

/*
 * Copy the box at (x, y, z) of the tensor `map` describes from shared
 * memory at src (the box's elements in row order, no swizzle) to global
 * memory, as a bulk async-group of this thread. Elements outside the tensor
 * are not written. The shared memory must have been written before a
 * fence_proxy_async by each writing thread.
 */
__device__ __forceinline__ void tma_store_3d(const void *map, uint32_t src, int x, int y, int z)
{
	asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group"
	             " [%0, {%2, %3, %4}], [%1];" ::"l"((uint64_t)map),
	             "r"(src), "r"(x), "r"(y), "r"(z)
	             : "memory");
}

__device__ __forceinline__ void bulk_commit(void)
{
	asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Wait until at most N of this thread's bulk groups still read shared memory. */
template <int N> __device__ __forceinline__ void bulk_wait_read(void)
{
	asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Wait until every bulk group of this thread is complete. */
__device__ __forceinline__ void bulk_wait_all(void)
{
	asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

/* Order this thread's shared-memory writes before the copy engine reads them. */
__device__ __forceinline__ void fence_proxy_async(void)
{
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* ---- warpgroup roles ---------------------------------------------------- */

/* Hand registers back (producer) or take them (consumers); N a multiple of 8. */
template <int N> __device__ __forceinline__ void regs_release(void)
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

template <int N> __device__ __forceinline__ void regs_claim(void)
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/* A barrier among `count` threads, apart from __syncthreads (id 0). */
__device__ __forceinline__ void named_sync(int id, int count)
{
	asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* ---- wgmma -------------------------------------------------------------- */

/*
 * A shared-memory matrix descriptor for a 128-byte-swizzled operand: start
 * address, leading and stride byte offsets (each >> 4) and swizzle mode 1
 * (128B) in bits 62-63. The operand's tile must start on a 1024-byte
 * boundary (the swizzle pattern's period), so the base-offset field is 0.
 */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
	return (uint64_t)((addr & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
	       ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

/* Order register writes before the next wgmma reads its accumulators. */
__device__ __forceinline__ void wgmma_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Wait until at most N committed groups of this warpgroup are pending. */
template <int N> __device__ __forceinline__ void wgmma_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/*
 * Keep the compiler from moving reads or writes of an accumulator across
 * this point: wgmma writes them asynchronously, behind its back.
 */
template <int N> __device__ __forceinline__ void acc_fence(float (&d)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+f"(d[i])::"memory");
}

/*
 * D[64 x n] += A[64 x 16] * B[16 x n] with f32 accumulators, A and B
 * described by descriptors; TRANS_B 0 for a K-major B, 1 for N-major.
 * Accumulator layout (per warp w of the warpgroup, lane l): d[4j + 0..1]
 * hold row 16w + l/4, columns 8j + 2(l%4) + 0..1; d[4j + 2..3] the same
 * columns of row 16w + l/4 + 8.
 */
#define TK_ACC8(i)                                                                                \
	"+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), \
	        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16_f16(float (&d)[32], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31"
	             "}, %32, %33, 1, 1, 1, 0, %34;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&d)[32], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31"
	             "}, %32, %33, 1, 1, 1, 0, %34;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[64], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63"
	             "}, %64, %65, 1, 1, 1, 0, %66;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[64], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63"
	             "}, %64, %65, 1, 1, 1, 0, %66;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n192k16_f16(float (&d)[96], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71,"
	             "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83,"
	             "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
	             "}, %96, %97, 1, 1, 1, 0, %98;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56), TK_ACC8(64), TK_ACC8(72), TK_ACC8(80), TK_ACC8(88)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n192k16_bf16(float (&d)[96], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71,"
	             "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83,"
	             "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
	             "}, %96, %97, 1, 1, 1, 0, %98;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56), TK_ACC8(64), TK_ACC8(72), TK_ACC8(80), TK_ACC8(88)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71,"
	             "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83,"
	             "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
	             "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107,"
	             "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119,"
	             "%120, %121, %122, %123, %124, %125, %126, %127"
	             "}, %128, %129, 1, 1, 1, 0, %130;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56), TK_ACC8(64), TK_ACC8(72), TK_ACC8(80), TK_ACC8(88),
	               TK_ACC8(96), TK_ACC8(104), TK_ACC8(112), TK_ACC8(120)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

template <int TRANS_B>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t da, uint64_t db)
{
	asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16\n"
	             "{"
	             "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11,"
	             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23,"
	             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35,"
	             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
	             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59,"
	             "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71,"
	             "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83,"
	             "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
	             "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107,"
	             "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119,"
	             "%120, %121, %122, %123, %124, %125, %126, %127"
	             "}, %128, %129, 1, 1, 1, 0, %130;\n"
	             : TK_ACC8(0), TK_ACC8(8), TK_ACC8(16), TK_ACC8(24), TK_ACC8(32), TK_ACC8(40),
	               TK_ACC8(48), TK_ACC8(56), TK_ACC8(64), TK_ACC8(72), TK_ACC8(80), TK_ACC8(88),
	               TK_ACC8(96), TK_ACC8(104), TK_ACC8(112), TK_ACC8(120)
	             : "l"(da), "l"(db), "n"(TRANS_B));
}

#undef TK_ACC8

} /* namespace tk_sm90 */

#endif /* TILEOPS_GEMM_SM90_CUH */
