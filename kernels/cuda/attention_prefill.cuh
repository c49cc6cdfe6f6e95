/*
 * attention_prefill.cuh - the sm_90a instructions the prefill kernel is
 * built from, as thin inline-PTX wrappers: mbarriers, bulk tensor copies
 * (TMA), warpgroup register reallocation, and wgmma with its shared-memory
 * matrix descriptors.
 *
 * Shared-memory tiles are stored as the bulk tensor copy writes them with
 * 128-byte swizzling: blocks of [rows][64] 16-bit elements, each row 128
 * bytes, 8 rows forming one 1024-byte swizzle atom. Every block starts on a
 * 1024-byte boundary so the descriptors' base offset stays 0.
 */
#ifndef TILEOPS_ATTENTION_PREFILL_CUH
#define TILEOPS_ATTENTION_PREFILL_CUH

#include <stdint.h>

namespace tkp
{

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarriers ---------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}

/* Make the initialized barriers visible to the async proxy (the copy engine). */
__device__ __forceinline__ void mbar_init_fence(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
	             "r"(bytes)
	             : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
	asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

/* Block until the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
	asm volatile("{\n"
	             ".reg .pred done;\n"
	             "wait_%=:\n"
	             "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
	             "@!done bra wait_%=;\n"
	             "}\n" ::"r"(smem_addr(bar)),
	             "r"(parity)
	             : "memory");
}

/* ---- bulk tensor copies ------------------------------------------------- */

/* A 4-d box of `map` at (c0..c3), completing on `bar` with its byte count. */
__device__ __forceinline__ void tma_load_4d(void *dst, const void *map, uint64_t *bar, int c0,
                                            int c1, int c2, int c3)
{
	asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
	             " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(smem_addr(dst)),
	             "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
	             : "memory");
}

/* ---- warpgroup registers ------------------------------------------------ */

template <int N> __device__ __forceinline__ void regs_shrink(void)
{
	asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

template <int N> __device__ __forceinline__ void regs_grow(void)
{
	asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/* ---- wgmma ----------------------------------------------------------------- */

__device__ __forceinline__ void wgmma_fence(void)
{
	asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit(void)
{
	asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N> __device__ __forceinline__ void wgmma_wait(void)
{
	asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/*
 * Keep the compiler from moving reads or writes of accumulator registers
 * across a wgmma issue or wait: the hardware writes them asynchronously.
 */
template <int N> __device__ __forceinline__ void reg_fence(float (&r)[N])
{
#pragma unroll
	for (int i = 0; i < N; i++)
		asm volatile("" : "+f"(r[i])::"memory");
}

/*
 * A shared-memory matrix descriptor for 128-byte swizzled tiles. `lbo` and
 * `sbo` are the leading- and stride-dimension byte offsets. K-major operands
 * (Q, K) use sbo = 1024 (the next 8 rows) and no lbo; the MN-major V uses
 * sbo = 1024 (the next 8 keys) and lbo = one [rows][64] block (the next 64
 * output columns).
 */
__device__ __forceinline__ uint64_t sw128_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo)
{
	uint64_t d = 0;

	d |= (uint64_t)((saddr & 0x3FFFF) >> 4);
	d |= (uint64_t)((lbo >> 4) & 0x3FFF) << 16;
	d |= (uint64_t)((sbo >> 4) & 0x3FFF) << 32;
	d |= (uint64_t)1 << 62;
	return d;
}

/*
 * D (+)= A B for one warpgroup, m64 by N by k16, f32 accumulators.
 * wgmma_ss_nN: A and B from shared memory, both K-major; acc == 0 overwrites D.
 * wgmma_rs_nN: A from registers (the m16k16 fragment of each warp), B from
 * shared memory MN-major (the transpose bit), always accumulating.
 */
template <bool BF16>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
	if constexpr (BF16 == true) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31}, "
		             "%32, %33, p, 1, 1, 0, 0;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31])
		             : "l"(da), "l"(db), "r"(acc));
	}
	if constexpr (BF16 == false) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31}, "
		             "%32, %33, p, 1, 1, 0, 0;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31])
		             : "l"(da), "l"(db), "r"(acc));
	}
}

template <bool BF16>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t da, uint64_t db, int acc)
{
	if constexpr (BF16 == true) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		             "%60, %61, %62, %63}, "
		             "%64, %65, p, 1, 1, 0, 0;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
		               "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		               "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
		               "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
		               "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
		               "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
		               "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		             : "l"(da), "l"(db), "r"(acc));
	}
	if constexpr (BF16 == false) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		             "%60, %61, %62, %63}, "
		             "%64, %65, p, 1, 1, 0, 0;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
		               "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		               "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
		               "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
		               "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
		               "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
		               "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		             : "l"(da), "l"(db), "r"(acc));
	}
}

template <bool BF16>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t db)
{
	if constexpr (BF16 == true) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31}, "
		             "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
	if constexpr (BF16 == false) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31}, "
		             "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
}

template <bool BF16>
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t db)
{
	if constexpr (BF16 == true) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		             "%60, %61, %62, %63}, "
		             "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
		               "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		               "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
		               "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
		               "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
		               "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
		               "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
	if constexpr (BF16 == false) {
		asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
		             "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
		             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		             "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		             "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		             "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		             "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		             "%60, %61, %62, %63}, "
		             "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
		             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
		               "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
		               "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
		               "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
		               "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
		               "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
		               "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
		               "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
		               "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),
		               "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
		               "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
		               "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
		               "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
}

template <bool BF16>
__device__ __forceinline__ void wgmma_rs_n256(float (&d)[128], const uint32_t (&a)[4], uint64_t db)
{
	if constexpr (BF16 == true) {
		asm volatile(
		        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
		        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
		        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		        "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		        "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
		        "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
		        "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
		        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
		        "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
		        "%120, %121, %122, %123, %124, %125, %126, %127}, "
		        "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
		        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
		          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
		          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
		          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
		          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),
		          "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
		          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
		          "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
		          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),
		          "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
		          "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
		          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),
		          "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]),
		          "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
		          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
		          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]),
		          "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]),
		          "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
		          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
		          "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
		          "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
		          "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
		          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
		          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
		          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
		          "+f"(d[127])
		        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
	if constexpr (BF16 == false) {
		asm volatile(
		        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
		        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
		        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
		        "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
		        "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
		        "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
		        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
		        "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
		        "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
		        "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
		        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
		        "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
		        "%120, %121, %122, %123, %124, %125, %126, %127}, "
		        "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
		        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
		          "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
		          "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
		          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
		          "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),
		          "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
		          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
		          "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
		          "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]),
		          "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
		          "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
		          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]),
		          "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]),
		          "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
		          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
		          "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]),
		          "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]),
		          "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),
		          "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
		          "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
		          "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
		          "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
		          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
		          "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
		          "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
		          "+f"(d[127])
		        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
	}
}

} /* namespace tkp */

#endif /* TILEOPS_ATTENTION_PREFILL_CUH */
