/*
 * sm90.cuh - the Hopper (sm_90a) instructions the GEMM and attention
 * kernels are built from, one thin inline-PTX wrapper each, spelled as the
 * PTX ISA names them: cp.async copies, mbarriers, bulk tensor copies (TMA),
 * fences, named barriers, warpgroup register reallocation and warpgroup
 * matrix multiply-accumulate (wgmma) with its shared-memory matrix
 * descriptors. Device code for sm_90a only.
 *
 * Shared-memory addresses are 32-bit offsets in the shared window
 * (smem_addr); tensor maps are the 128-byte CUtensorMap objects built on the
 * host and passed as __grid_constant__ kernel parameters.
 */
#ifndef TILEOPS_SM90_CUH
#define TILEOPS_SM90_CUH

#include <stdint.h>

namespace tk_sm90
{

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- async copies (cp.async) -------------------------------------------- */

/*
 * 16 bytes global -> shared, or 16 zero bytes when !valid (nothing is read
 * then, but src must still be a valid address).
 */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid)
{
	int n = valid ? 16 : 0;
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
	             "r"(n));
}

__device__ __forceinline__ void cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/*
 * Wait until at most N of this thread's cp.async groups are pending; this
 * thread may then read what they copied (other threads after a barrier).
 * The compiler keeps shared-memory reads after it.
 */
template <int N> __device__ __forceinline__ void cp_async_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/*
 * Arrive on bar once every cp.async this thread has issued so far has
 * landed; the arrival is one of those bar was initialized to expect (noinc).
 */
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/* ---- mbarriers ---------------------------------------------------------- */

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/* Makes initialized barriers visible to the async proxy (the copy engine). */
__device__ __forceinline__ void fence_mbar_init(void)
{
	asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
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

/* The same for a 4-d box at (c0..c3). */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void *map, uint32_t bar, int c0,
                                            int c1, int c2, int c3)
{
	asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
	             " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
	             "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
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

/* ---- thread block clusters ---------------------------------------------- */

/* This CTA's rank in its cluster. */
__device__ __forceinline__ uint32_t cluster_rank(void)
{
	uint32_t r;
	asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
	return r;
}

/* The shared-memory address of CTA `rank` of the cluster that corresponds
 * to this CTA's address addr (distributed shared memory). */
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank)
{
	uint32_t r;
	asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
	return r;
}

/* Every thread of every CTA of the cluster: arrive, then wait for the rest
 * (release and acquire at cluster scope). */
__device__ __forceinline__ void cluster_sync_all(void)
{
	asm volatile("barrier.cluster.arrive.release.aligned;\n"
	             "barrier.cluster.wait.acquire.aligned;" ::
	                     : "memory");
}

/* Arrive on the mbarrier at cluster address bar (a peer CTA's), releasing
 * this thread's earlier memory accesses to the cluster. */
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar)
{
	asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar)
	             : "memory");
}

/* mbar_wait that also acquires, at cluster scope, what the peers that
 * arrived released. */
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity)
{
	asm volatile("{\n"
	             ".reg .pred done;\n"
	             "wait_%=:\n"
	             "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
	             "@!done bra wait_%=;\n"
	             "}\n" ::"r"(bar),
	             "r"(parity)
	             : "memory");
}

/* 16 bytes of this CTA's shared memory at addr, and of a peer's at a
 * cluster address. */
__device__ __forceinline__ void st_shared_f4(uint32_t addr, float4 v)
{
	asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(v.x), "f"(v.y),
	             "f"(v.z), "f"(v.w)
	             : "memory");
}

__device__ __forceinline__ void st_shared_u32(uint32_t addr, uint32_t v)
{
	asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr)
{
	float4 v;
	asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
	             : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
	             : "r"(addr)
	             : "memory");
	return v;
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

/*
 * Hardware barrier `id` (1..15; 0 is __syncthreads) over `count` threads:
 * sync waits for the phase to complete, arrive counts without waiting.
 */
__device__ __forceinline__ void named_sync(int id, int count)
{
	asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void named_arrive(uint32_t id, uint32_t count)
{
	asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
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
 * The end of one step of a consumer main loop over a ring of shared-memory
 * slots: the wgmmas reading slot s are issued. Commit them, wait until the
 * products of the slot before are done, hand that slot back (one arrival
 * per warp on its "empty" mbarrier, 8 bytes apart from empty on) and move
 * the ring on (phase flips at each wrap). prev: the slot still being read,
 * -1 at the start.
 */
template <int MI, int NR>
__device__ __forceinline__ void slot_issued(float (&acc)[MI][NR], uint32_t empty, int &prev, int &s,
                                            uint32_t &phase, int stages, int tid)
{
	wgmma_commit();
	wgmma_wait<1>();
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
		acc_fence(acc[mi]);
	if (prev >= 0 && (tid & 31) == 0)
		mbar_arrive(empty + 8 * prev);
	prev = s;
	if (++s == stages) {
		s = 0;
		phase ^= 1;
	}
}

/*
 * The wgmma wrappers below differ only in N (the accumulator count is N / 2)
 * and the element type, so their operand lists are spelled once: the
 * accumulator operands eight at a time, and their names in the instruction
 * text as rows of twelve joined by SEP (the descriptor forms join the rows
 * with ",", the others with ", ": the PTX each emits stays as it was).
 */
#define TK_ACC_AT(i)                                                                              \
	"+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), \
	        "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define TK_ACC4 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
#define TK_ACC8 TK_ACC_AT(0)
#define TK_ACC16 TK_ACC_AT(0), TK_ACC_AT(8)
#define TK_ACC32 TK_ACC_AT(0), TK_ACC_AT(8), TK_ACC_AT(16), TK_ACC_AT(24)
#define TK_ACC40 TK_ACC32, TK_ACC_AT(32)
#define TK_ACC64 TK_ACC32, TK_ACC_AT(32), TK_ACC_AT(40), TK_ACC_AT(48), TK_ACC_AT(56)
#define TK_ACC88 TK_ACC64, TK_ACC_AT(64), TK_ACC_AT(72), TK_ACC_AT(80)
#define TK_ACC96 TK_ACC88, TK_ACC_AT(88)
#define TK_ACC128 TK_ACC96, TK_ACC_AT(96), TK_ACC_AT(104), TK_ACC_AT(112), TK_ACC_AT(120)

#define TK_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11"
#define TK_R1 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23"
#define TK_R2 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35"
#define TK_R3 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define TK_R4 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59"
#define TK_R5 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71"
#define TK_R6 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83"
#define TK_R7 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define TK_R8 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107"
#define TK_R9 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119"
#define TK_REGS4(SEP) "%0, %1, %2, %3"
#define TK_REGS8(SEP) "%0, %1, %2, %3, %4, %5, %6, %7"
#define TK_REGS16(SEP) TK_R0 SEP "%12, %13, %14, %15"
#define TK_REGS32(SEP) TK_R0 SEP TK_R1 SEP "%24, %25, %26, %27, %28, %29, %30, %31"
#define TK_REGS40(SEP) TK_R0 SEP TK_R1 SEP TK_R2 SEP "%36, %37, %38, %39"
#define TK_REGS64(SEP) TK_R0 SEP TK_R1 SEP TK_R2 SEP TK_R3 SEP TK_R4 SEP "%60, %61, %62, %63"
#define TK_REGS88(SEP) \
	TK_R0 SEP TK_R1 SEP TK_R2 SEP TK_R3 SEP TK_R4 SEP TK_R5 SEP TK_R6 SEP "%84, %85, %86, %87"
#define TK_REGS96(SEP) TK_R0 SEP TK_R1 SEP TK_R2 SEP TK_R3 SEP TK_R4 SEP TK_R5 SEP TK_R6 SEP TK_R7
#define TK_REGS128(SEP) \
	TK_REGS96(SEP) SEP TK_R8 SEP TK_R9 SEP "%120, %121, %122, %123, %124, %125, %126, %127"

/*
 * D[64 x n] += A[64 x 16] * B[16 x n] with f32 accumulators, A and B
 * described by descriptors; TRANS_B 0 for a K-major B, 1 for N-major.
 * Accumulator layout (per warp w of the warpgroup, lane l): d[4j + 0..1]
 * hold row 16w + l/4, columns 8j + 2(l%4) + 0..1; d[4j + 2..3] the same
 * columns of row 16w + l/4 + 8.
 *
 * TK_MMA_DESC(N, T, R, A, B, TB) defines wgmma_m64n<N>k16_<T>: R
 * accumulators, then the operand numbers of the two descriptors and TRANS_B.
 */
#define TK_MMA_DESC(N, T, R, A, B, TB)                                                          \
	template <int TRANS_B>                                                                  \
	__device__ __forceinline__ void wgmma_m64n##N##k16_##T(float(&d)[R], uint64_t da,       \
	                                                       uint64_t db)                     \
	{                                                                                       \
		asm volatile("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T "\n"   \
		             "{" TK_REGS##R(",") "}, %" #A ", %" #B ", 1, 1, 1, 0, %" #TB ";\n" \
		             : TK_ACC##R                                                        \
		             : "l"(da), "l"(db), "n"(TRANS_B));                                 \
	}

TK_MMA_DESC(8, f16, 4, 4, 5, 6)
TK_MMA_DESC(8, bf16, 4, 4, 5, 6)
TK_MMA_DESC(16, f16, 8, 8, 9, 10)
TK_MMA_DESC(16, bf16, 8, 8, 9, 10)
TK_MMA_DESC(32, f16, 16, 16, 17, 18)
TK_MMA_DESC(32, bf16, 16, 16, 17, 18)
TK_MMA_DESC(64, f16, 32, 32, 33, 34)
TK_MMA_DESC(64, bf16, 32, 32, 33, 34)
TK_MMA_DESC(128, f16, 64, 64, 65, 66)
TK_MMA_DESC(128, bf16, 64, 64, 65, 66)
TK_MMA_DESC(176, f16, 88, 88, 89, 90)
TK_MMA_DESC(176, bf16, 88, 88, 89, 90)
TK_MMA_DESC(192, f16, 96, 96, 97, 98)
TK_MMA_DESC(192, bf16, 96, 96, 97, 98)
TK_MMA_DESC(256, f16, 128, 128, 129, 130)
TK_MMA_DESC(256, bf16, 128, 128, 129, 130)

/*
 * D (+)= A B for one warpgroup, m64 by N by k16, f32 accumulators, f16 or
 * bf16 inputs (BF16).
 * wgmma_ss_nN: A and B from shared memory, both K-major; acc == 0 overwrites D.
 * wgmma_rs_nN: A from registers (the m16k16 fragment of each warp), B from
 * shared memory MN-major (the transpose bit), always accumulating.
 *
 * TK_MMA_SS(N, R, A, B, P) defines wgmma_ss_n<N>: R accumulators, then the
 * operand numbers of the two descriptors and of acc.
 */
#define TK_MMA_SS_ASM(N, T, R, A, B, P)                                              \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                \
	             "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." T "." T " "   \
	             "{" TK_REGS##R(", ") "}, %" #A ", %" #B ", p, 1, 1, 0, 0;\n}\n" \
	             : TK_ACC##R                                                     \
	             : "l"(da), "l"(db), "r"(acc))
#define TK_MMA_SS(N, R, A, B, P)                                                              \
	template <bool BF16>                                                                  \
	__device__ __forceinline__ void wgmma_ss_n##N(float(&d)[R], uint64_t da, uint64_t db, \
	                                              int acc)                                \
	{                                                                                     \
		if constexpr (BF16 == true)                                                   \
			TK_MMA_SS_ASM(N, "bf16", R, A, B, P);                                 \
		if constexpr (BF16 == false)                                                  \
			TK_MMA_SS_ASM(N, "f16", R, A, B, P);                                  \
	}

TK_MMA_SS(64, 32, 32, 33, 34)
TK_MMA_SS(80, 40, 40, 41, 42)
TK_MMA_SS(128, 64, 64, 65, 66)
TK_MMA_SS(176, 88, 88, 89, 90)

/*
 * TK_MMA_RS(N, R, A0, A1, A2, A3, B, P) defines wgmma_rs_n<N>: R
 * accumulators, then the operand numbers of the four A registers, of the B
 * descriptor and of the scale-d flag.
 */
/* clang-format off */
#define TK_MMA_RS_ASM(N, T, R, A0, A1, A2, A3, B, P)                                   \
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                  \
	             "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." T "." T " "     \
	             "{" TK_REGS##R(", ") "}, "                                        \
	             "{%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, "                      \
	             "%" #B ", p, 1, 1, 1;\n}\n"                                       \
	             : TK_ACC##R                                                       \
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1))
/* clang-format on */
#define TK_MMA_RS(N, R, A0, A1, A2, A3, B, P)                                              \
	template <bool BF16>                                                               \
	__device__ __forceinline__ void wgmma_rs_n##N(float(&d)[R], const uint32_t(&a)[4], \
	                                              uint64_t db)                         \
	{                                                                                  \
		if constexpr (BF16 == true)                                                \
			TK_MMA_RS_ASM(N, "bf16", R, A0, A1, A2, A3, B, P);                 \
		if constexpr (BF16 == false)                                               \
			TK_MMA_RS_ASM(N, "f16", R, A0, A1, A2, A3, B, P);                  \
	}

TK_MMA_RS(64, 32, 32, 33, 34, 35, 36, 37)
TK_MMA_RS(128, 64, 64, 65, 66, 67, 68, 69)
TK_MMA_RS(256, 128, 128, 129, 130, 131, 132, 133)

#undef TK_MMA_RS
#undef TK_MMA_RS_ASM
#undef TK_MMA_SS
#undef TK_MMA_SS_ASM
#undef TK_MMA_DESC
#undef TK_REGS128
#undef TK_REGS96
#undef TK_REGS88
#undef TK_REGS64
#undef TK_REGS40
#undef TK_REGS32
#undef TK_REGS16
#undef TK_REGS8
#undef TK_REGS4
#undef TK_R9
#undef TK_R8
#undef TK_R7
#undef TK_R6
#undef TK_R5
#undef TK_R4
#undef TK_R3
#undef TK_R2
#undef TK_R1
#undef TK_R0
#undef TK_ACC128
#undef TK_ACC96
#undef TK_ACC88
#undef TK_ACC64
#undef TK_ACC40
#undef TK_ACC32
#undef TK_ACC16
#undef TK_ACC8
#undef TK_ACC4
#undef TK_ACC_AT

} /* namespace tk_sm90 */

#endif /* TILEOPS_SM90_CUH */
