/*
 * cuda_common.cuh - element types, conversions, reductions and launch
 * helpers shared by the CUDA kernels. Every kernel computes in f32 and
 * rounds once on store.
 */
#ifndef TILEOPS_CUDA_COMMON_CUH
#define TILEOPS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <atomic>
#include <mutex>

#include "tk_internal.h"

namespace tkc
{

__device__ __forceinline__ float to_f32(float v)
{
	return v;
}
__device__ __forceinline__ float to_f32(__half v)
{
	return __half2float(v);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v)
{
	return v;
}
template <> __device__ __forceinline__ __half from_f32<__half>(float v)
{
	return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v)
{
	return __float2bfloat16_rn(v);
}

/* 16 bytes of T: the widest plain load a thread issues. */
template <typename T> struct alignas(16) Vec {
	static constexpr int N = 16 / sizeof(T);
	T v[N];
};

/*
 * Packed pairs. The row kernels over bf16 and f16 are bound by instruction
 * issue, not memory, so a 16-byte vector is handled as four 32-bit words of
 * two values each: a bf16 pair widens with two integer operations (a bf16
 * is the high half of an f32), an f16 pair with two conversions, and a
 * float2 narrows with one cvt.rn.bf16x2.f32 or cvt.rn.f16x2.f32. The
 * first value of a pair is the low half of its word, as in memory.
 */
template <typename T> __device__ __forceinline__ float2 pair_to_f32(uint32_t u);
template <> __device__ __forceinline__ float2 pair_to_f32<__nv_bfloat16>(uint32_t u)
{
	return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
template <> __device__ __forceinline__ float2 pair_to_f32<__half>(uint32_t u)
{
	__half2 h;

	memcpy(&h, &u, 4);
	return __half22float2(h);
}

/* Both values rounded to nearest even, as from_f32 does each. */
template <typename T> __device__ __forceinline__ uint32_t pair_from_f32(float2 f);
template <> __device__ __forceinline__ uint32_t pair_from_f32<__nv_bfloat16>(float2 f)
{
	__nv_bfloat162 h = __float22bfloat162_rn(f);
	uint32_t u;

	memcpy(&u, &h, 4);
	return u;
}
template <> __device__ __forceinline__ uint32_t pair_from_f32<__half>(float2 f)
{
	__half2 h = __float22half2_rn(f);
	uint32_t u;

	memcpy(&u, &h, 4);
	return u;
}

/* Word i of a 16-byte vector (no instruction is emitted). */
template <typename T> __device__ __forceinline__ uint32_t vec_word(const Vec<T> &v, int i)
{
	uint32_t u;

	memcpy(&u, reinterpret_cast<const char *>(&v) + 4 * i, 4);
	return u;
}

template <typename T> __device__ __forceinline__ void vec_set_word(Vec<T> &v, int i, uint32_t u)
{
	memcpy(reinterpret_cast<char *>(&v) + 4 * i, &u, 4);
}

/* Values 2i and 2i + 1 of a 16-byte vector, any T, as floats. */
template <typename T> __device__ __forceinline__ float2 vec_pair(const Vec<T> &v, int i)
{
	if constexpr (sizeof(T) == 4)
		return make_float2(to_f32(v.v[2 * i]), to_f32(v.v[2 * i + 1]));
	else
		return pair_to_f32<T>(vec_word(v, i));
}

template <typename T> __device__ __forceinline__ void vec_set_pair(Vec<T> &v, int i, float2 f)
{
	if constexpr (sizeof(T) == 4) {
		v.v[2 * i] = from_f32<T>(f.x);
		v.v[2 * i + 1] = from_f32<T>(f.y);
	} else {
		vec_set_word(v, i, pair_from_f32<T>(f));
	}
}

/* N consecutive floats at p (global or shared), N in {2, 4, 8}; p is 4N-byte aligned (16 for 8). */
template <int N> __device__ __forceinline__ void ld_floats(float (&v)[N], const float *p)
{
	if constexpr (N == 2) {
		const float2 x = *reinterpret_cast<const float2 *>(p);
		v[0] = x.x;
		v[1] = x.y;
	} else {
#pragma unroll
		for (int i = 0; i < N; i += 4) {
			const float4 x = *reinterpret_cast<const float4 *>(p + i);
			v[i] = x.x;
			v[i + 1] = x.y;
			v[i + 2] = x.z;
			v[i + 3] = x.w;
		}
	}
}

/* The packed pair type of a 2-byte T, and a pair of -inf in its bits. */
template <typename T> struct Pair2;
template <> struct Pair2<__nv_bfloat16> {
	using type = __nv_bfloat162;
	static constexpr uint32_t neg_inf = 0xff80ff80u;
};
template <> struct Pair2<__half> {
	using type = __half2;
	static constexpr uint32_t neg_inf = 0xfc00fc00u;
};

/*
 * A 16-byte vector of bf16 or f16 folded into a packed running maximum
 * `acc` (start it at Pair2<T>::neg_inf, or 0 for magnitudes): four packed
 * max instructions, no conversion. NaN is skipped, as fmaxf does;
 * ABS compares magnitudes.
 */
template <typename T, bool ABS>
__device__ __forceinline__ uint32_t vec_max2(uint32_t acc, const Vec<T> &v)
{
	typename Pair2<T>::type m, x;

	memcpy(&m, &acc, 4);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = vec_word(v, i);
		memcpy(&x, &u, 4);
		m = __hmax2(m, ABS ? __habs2(x) : x);
	}
	memcpy(&acc, &m, 4);
	return acc;
}

/* The larger of a packed pair's two values, as a float (exact). */
template <typename T> __device__ __forceinline__ float pair_max_f32(uint32_t u)
{
	float2 f = pair_to_f32<T>(u);

	return fmaxf(f.x, f.y);
}

/*
 * 2^x with denormal inputs and results flushed to zero: one MUFU.EX2,
 * where the plain ex2.approx.f32 adds instructions around it to handle
 * denormals. Meant for bf16 and f16 results, where the flush cannot be
 * seen: f16 rounds anything under 2^-24 to 0, and a bf16 denormal is far
 * below any norm-wise tolerance. f32 results keep the accurate functions.
 */
__device__ __forceinline__ float ex2_ftz(float x)
{
	float r;

	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
	return r;
}

/* log2(e): e^x = 2^(x log2(e)). */
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* The plan of tk_iter, by value, for device-side offsets. */
struct Plan {
	int ndim;
	int64_t shape[TK_MAX_DIMS];
	int64_t stride[TK_ITER_MAX_OPS][TK_MAX_DIMS];
};

static inline Plan plan_of(const tk_iter &it)
{
	Plan p;

	p.ndim = it.ndim;
	for (int d = 0; d < TK_MAX_DIMS; d++) {
		p.shape[d] = it.shape[d];
		for (int op = 0; op < TK_ITER_MAX_OPS; op++)
			p.stride[op][d] = it.stride[op][d];
	}
	return p;
}

/* Offsets of all operands at linear index i, innermost dim fastest. */
template <int NOPS>
__device__ __forceinline__ void plan_offsets(const Plan &p, int64_t i, int64_t *off)
{
	for (int op = 0; op < NOPS; op++)
		off[op] = 0;
	for (int d = p.ndim - 1; d > 0; d--) {
		int64_t q = i / p.shape[d];
		int64_t c = i - q * p.shape[d];
		for (int op = 0; op < NOPS; op++)
			off[op] += c * p.stride[op][d];
		i = q;
	}
	for (int op = 0; op < NOPS; op++)
		off[op] += i * p.stride[op][0];
}

/*
 * Blocks for a grid-stride loop over `work` items of `per_block` each;
 * capped, since each thread loops over what the grid does not cover.
 */
static inline unsigned grid_for(int64_t work, int per_block)
{
	int64_t b = (work + per_block - 1) / per_block;
	const int64_t cap = 65535;

	return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

/*
 * Clear an error an earlier, unrelated runtime call left on this thread, so
 * launch_status reports this launch alone. Sticky (context) errors stay.
 */
static inline void launch_begin(void)
{
	(void)cudaGetLastError();
}

static inline tk_status launch_status(void)
{
	return cudaGetLastError() == cudaSuccess ? TK_OK : TK_ERR_LAUNCH;
}

/*
 * Programmatic dependent launch (sm_90). launch_pdl launches a kernel with
 * the programmatic-serialization attribute (when tk_cuda_pdl() is on): the
 * kernel may start while the kernel before it in the stream or graph still
 * runs. Every kernel launched that way calls pdl_enter() before it touches
 * global memory: griddepcontrol.wait returns once the kernel before it has
 * completed and its writes are visible (at once when there is none, or it
 * was not a kernel), so nothing before the wait may read an input or write
 * an output (l2_prefetch, below, may ask for an input's bytes).
 * griddepcontrol.launch_dependents then lets the next kernel launch once
 * every block of this one has passed that point; its blocks wait in turn,
 * at most one grid behind. Kernels that do not call pdl_enter(), or
 * pdl_wait() before their first global access (pdl_trigger() where and if
 * they let the next kernel launch early, as the GEMMs do), must be launched
 * without the attribute.
 */
__device__ __forceinline__ void pdl_wait(void)
{
	asm volatile("griddepcontrol.wait;" ::: "memory");
}

__device__ __forceinline__ void pdl_trigger(void)
{
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__device__ __forceinline__ void pdl_enter(void)
{
	pdl_wait();
	pdl_trigger();
}

/*
 * Ask the L2 for `bytes` at p (16-byte aligned, a multiple of 16) and go
 * on: the one use a kernel launched with PDL makes of an input before
 * pdl_enter(). It changes no value any load sees: global memory is
 * coherent in the L2, so the kernel before writes into the very lines
 * fetched early, and this kernel's loads come after the wait. What it
 * gains is time: the blocks that become resident while the kernel before
 * drains start their first reads then, not after it (the DRAM latency at
 * the head of every memory-bound kernel back to back).
 */
__device__ __forceinline__ void l2_prefetch(const void *p, uint32_t bytes)
{
	asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

/* Fill at[*n] with the PDL attribute when it is on. */
static inline void pdl_attr(cudaLaunchAttribute *at, unsigned *n)
{
	if (!tk_cuda_pdl())
		return;
	at[*n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
	at[*n].val.programmaticStreamSerializationAllowed = 1;
	(*n)++;
}

/* Fill at[*n] with a cluster of x by y CTAs. */
static inline void cluster_attr(cudaLaunchAttribute *at, unsigned *n, unsigned x, unsigned y = 1)
{
	at[*n].id = cudaLaunchAttributeClusterDimension;
	at[*n].val.clusterDim.x = x;
	at[*n].val.clusterDim.y = y;
	at[*n].val.clusterDim.z = 1;
	(*n)++;
}

/* kernel<<<grid, block, smem, s>>>(args...), with PDL when it is on. */
template <typename... P, typename... A>
static inline cudaError_t launch_pdl(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t s, A... args)
{
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];
	unsigned n = 0;

	pdl_attr(at, &n);
	cfg.gridDim = grid;
	cfg.blockDim = block;
	cfg.dynamicSmemBytes = smem;
	cfg.stream = s;
	cfg.attrs = at;
	cfg.numAttrs = n;
	return cudaLaunchKernelEx(&cfg, kernel, args...);
}

/*
 * Zero `words` 32-bit words at p on stream s (split-K counters before the
 * kernel that counts in on them). With PDL on, a one-block kernel launched
 * with PDL that clears them once the kernel before has completed, so that
 * a chain of dependent kernels stays unbroken (a memset between two kernels
 * makes the second wait for the launch of both); otherwise a memset.
 */
cudaError_t clear_words(void *p, size_t words, cudaStream_t s);

/*
 * Let kernel fn take `bytes` of dynamic shared memory (over the default 48
 * KiB) on the current device, once per device: `done` is the caller's set
 * of devices it was done on, one per kernel, so a graph capture later sees
 * launches only. Two threads may both set it: harmless.
 */
static inline cudaError_t allow_dynamic_smem(const void *fn, int bytes, std::atomic<uint64_t> &done)
{
	int dev = 0;
	cudaError_t e = cudaGetDevice(&dev);
	if (e != cudaSuccess)
		return e;
	/* Devices past the 64 the set holds are set every time. */
	const bool kept = dev >= 0 && dev < 64;
	const uint64_t bit = kept ? 1ull << dev : 0;
	if (kept && (done.load(std::memory_order_acquire) & bit))
		return cudaSuccess;
	e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
	if (e == cudaSuccess && kept)
		done.fetch_or(bit, std::memory_order_release);
	return e;
}

static inline bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/*
 * An attribute of the current device, read once per device into cache
 * (64 entries); fallback when it cannot be read or is not positive.
 */
static inline int device_attr(cudaDeviceAttr attr, int *cache, int fallback)
{
	int dev = 0, n = 0;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
		return fallback;
	if (cache[dev] == 0) {
		if (cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0)
			return fallback;
		cache[dev] = n;
	}
	return cache[dev];
}

/*
 * Multiprocessors of the current device: grids are sized from it so a
 * persistent grid fills the chip without oversubscribing.
 */
static inline int sm_count(void)
{
	static int cached[64];

	return device_attr(cudaDevAttrMultiProcessorCount, cached, 132);
}

/* Bytes of L2 of the current device (0 when it cannot be read). */
static inline int64_t l2_bytes(void)
{
	static int cached[64];

	return device_attr(cudaDevAttrL2CacheSize, cached, 0);
}

/*
 * An upper bound of the blocks of `threads` threads resident at once (the
 * SMs' thread slots): the first blocks a grid starts, the ones that can
 * start while the kernel before still runs and so the ones that prefetch
 * (l2_prefetch); later blocks start after the wait and load at once.
 */
static inline uint32_t first_wave(int threads)
{
	return (uint32_t)sm_count() * (uint32_t)(2048 / (threads < 32 ? 32 : threads));
}

/*
 * The same, exact for kernel fn launched with `threads` threads a block
 * and no dynamic shared memory (its registers may hold fewer blocks an SM
 * than the thread slots): asked of the runtime once per device, kernel and
 * block size, first_wave when it cannot say. Every launch of the row
 * kernels asks, from any thread: the table is append-only and its count
 * published after the entry, so a lookup takes no lock; only a miss does.
 */
static inline uint32_t resident_blocks(const void *fn, int threads)
{
	struct Entry {
		const void *fn;
		int dev, threads;
		uint32_t blocks;
	};
	static Entry cache[256];
	static std::atomic<int> used{ 0 };
	static std::mutex lock;
	int dev = 0, per_sm = 0;

	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return first_wave(threads);
	}
	int n = used.load(std::memory_order_acquire);
	for (int i = 0; i < n; i++) {
		if (cache[i].fn == fn && cache[i].dev == dev && cache[i].threads == threads)
			return cache[i].blocks;
	}
	if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, 0) != cudaSuccess ||
	    per_sm <= 0) {
		(void)cudaGetLastError();
		return first_wave(threads);
	}
	uint32_t blocks = (uint32_t)sm_count() * (uint32_t)per_sm;
	std::lock_guard<std::mutex> guard(lock);
	n = used.load(std::memory_order_relaxed);
	if (n < 256) {
		cache[n] = { fn, dev, threads, blocks };
		used.store(n + 1, std::memory_order_release);
	}
	return blocks;
}

/* Blocks for `work` items of `per_block` each, at most `per_sm` resident blocks per SM. */
static inline unsigned grid_persistent(int64_t work, int64_t per_block, int per_sm)
{
	int64_t b = (work + per_block - 1) / per_block;
	int64_t cap = (int64_t)sm_count() * per_sm;

	return (unsigned)(b < 1 ? 1 : (b > cap ? cap : b));
}

/*
 * q, r = a / b, a % b, in 32-bit arithmetic when both fit (about a third
 * of the cost of the 64-bit sequence).
 */
__device__ __forceinline__ int64_t divmod64(int64_t a, int64_t b, int64_t *r)
{
	if (((uint64_t)a | (uint64_t)b) >> 32 == 0) {
		uint32_t q = (uint32_t)a / (uint32_t)b;
		*r = (int64_t)((uint32_t)a - q * (uint32_t)b);
		return q;
	}
	int64_t q = a / b;
	*r = a - q * b;
	return q;
}

/*
 * Math in two grades. FAST (bf16 and f16 outputs) uses the special-function
 * unit's approximations: their relative error, a few units in f32's last
 * place, is far below the 2^-9 and 2^-12 that rounding to bf16 and f16
 * itself costs, and they keep the transcendental ops memory-bound (the
 * accurate library functions take 10 to 40 instructions per element).
 * f32 outputs keep the accurate functions, whose error f32 callers can see.
 */
/*
 * Math grades of the elementwise functors: exact (f32 outputs: CUDA's
 * accurate functions) and two fast ones, for f16 outputs (within about
 * 2e-4 relative of exact, under f16's rounding) and for bf16 outputs
 * (tanh.approx-based forms, within about 5e-4, under bf16's 2e-3). Every
 * non-zero grade takes the fast intrinsics.
 */
constexpr int kGradeExact = 0, kGradeF16 = 1, kGradeBf16 = 2;

template <int FAST> __device__ __forceinline__ float m_exp(float x)
{
	return FAST ? __expf(x) : expf(x);
}

template <int FAST> __device__ __forceinline__ float m_log(float x)
{
	return FAST ? __logf(x) : logf(x);
}

/* a / b; the fast form is a reciprocal and a product (0 for |b| > 2^126). */
template <int FAST> __device__ __forceinline__ float m_div(float a, float b)
{
	return FAST ? __fdividef(a, b) : a / b;
}

template <int FAST> __device__ __forceinline__ float m_sqrt(float x)
{
	if (!FAST)
		return sqrtf(x);
	float r;
	asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
	return r;
}

/* 1 / (1 + exp(-x)): no cancellation at either end. */
template <int FAST> __device__ __forceinline__ float m_sigmoid(float x)
{
	return m_div<FAST>(1.0f, 1.0f + m_exp<FAST>(-x));
}

/*
 * tanh.approx.f32: one special-function instruction, relative error about
 * 2^-11, below the rounding of a bf16 result. The bf16 activations with a
 * tanh or erf in them were bound by instruction issue at 16 to 20
 * instructions an element (erf at 80% of copy, gelu at 72%); the bf16 grade
 * builds them on this instead. It is too coarse for f16 (gelu of a few f16
 * values came out 1.1e-3 from exact, over the 1e-3 tolerance), whose grade
 * keeps the forms below.
 */
__device__ __forceinline__ float tanh_approx(float x)
{
	float r;

	asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
	return r;
}

/* tanh. f16: 2 sigmoid(2x) - 1, with the odd series near 0 where that cancels. */
template <int FAST> __device__ __forceinline__ float m_tanh(float x)
{
	if (FAST == kGradeExact)
		return tanhf(x);
	if (FAST == kGradeBf16)
		return tanh_approx(x);
	if (fabsf(x) < 0.125f) {
		float x2 = x * x;
		return x * fmaf(x2, fmaf(x2, 0.13333333f, -0.33333333f), 1.0f);
	}
	return 2.0f * m_sigmoid<kGradeF16>(2.0f * x) - 1.0f;
}

/*
 * erfc(|z|) for z >= 0 as t P(t) exp(-z^2), t = 1 / (1 + p z): the
 * Abramowitz and Stegun 7.1.26 form, absolute error under 1.5e-7.
 */
__device__ __forceinline__ float m_erfc_pos(float z)
{
	float t = __fdividef(1.0f, fmaf(0.3275911f, z, 1.0f));
	float p = fmaf(t, 1.061405429f, -1.453152027f);
	p = fmaf(t, p, 1.421413741f);
	p = fmaf(t, p, -0.284496736f);
	p = fmaf(t, p, 0.254829592f);
	return t * p * __expf(-z * z);
}

/*
 * erf. f16: 1 - erfc(|x|) with its sign. bf16: tanh(z (a + b z^2)), a and
 * b fitted to erf over [0, 6]: within 3.4e-4 of it everywhere (odd, and
 * exactly +-1 far out as erf is in f32).
 */
template <int FAST> __device__ __forceinline__ float m_erf(float x)
{
	if (FAST == kGradeExact)
		return erff(x);
	if (FAST == kGradeBf16)
		return tanh_approx(x * fmaf(0.10068124f, x * x, 1.1286173f));
	if (x != x)
		return x;
	return copysignf(1.0f - m_erfc_pos(fabsf(x)), x);
}

/*
 * gelu, erf form: x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2. Exact and
 * f16: Phi as erfc(-x / sqrt 2) / 2, with no cancellation for negative x.
 * bf16: the fitted erf above with its argument scaled, so Phi(x) is
 * (1 + tanh(x (c1 + c2 x^2))) / 2 within 1.7e-4: 0.5 x + 0.5 x t, six
 * instructions.
 */
template <int FAST> __device__ __forceinline__ float m_gelu_erf(float x)
{
	if (FAST == kGradeExact)
		return 0.5f * x * erfcf(x * -0.7071067811865476f);
	if (FAST == kGradeBf16) {
		float hx = 0.5f * x;
		return fmaf(hx, tanh_approx(x * fmaf(0.035596194f, x * x, 0.79805295f)), hx);
	}
	if (x != x)
		return x;
	float z = x * 0.7071067811865476f, c = m_erfc_pos(fabsf(z));
	return 0.5f * x * (z < 0.0f ? c : 2.0f - c);
}

/*
 * gelu, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
 * f16: x sigmoid(2u), the same exactly, without 1 + tanh's cancellation for
 * negative x. bf16: 0.5 x + 0.5 x tanh.approx(u).
 */
template <int FAST> __device__ __forceinline__ float m_gelu_tanh(float x)
{
	float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);

	if (FAST == kGradeExact)
		return 0.5f * x * (1.0f + tanhf(u));
	if (FAST == kGradeF16)
		return x * m_sigmoid<kGradeF16>(2.0f * u);
	float hx = 0.5f * x;
	return fmaf(hx, tanh_approx(u), hx);
}

/*
 * a^b as exp2(b log2 a) for a normal, finite, positive base other than 1,
 * with the flush-to-zero forms of lg2 and ex2 (one special-function
 * instruction each; the plain forms add denormal handling around them:
 * Nsight Compute on an H200 showed pow of bf16 bound by instruction issue,
 * 79% of the slots busy at 49% of DRAM bandwidth). A flushed result is
 * under 2^-126: zero in f16, at most a bf16 denormal, far below any
 * norm-wise tolerance. The other bases (denormal,
 * negative with integer exponents, zero, one, infinities, NaN) and a zero
 * exponent take powf's exact rules.
 */
__device__ __forceinline__ float m_pow_fast(float a, float b)
{
	if (a >= 1.17549435e-38f && a != 1.0f && a < INFINITY && b != 0.0f) {
		float l;
		asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(l) : "f"(a));
		return ex2_ftz(b * l);
	}
	return powf(a, b);
}

__device__ __forceinline__ float max_nan(float a, float b)
{
	if (a != a)
		return a;
	if (b != b)
		return b;
	return a > b ? a : b;
}

} /* namespace tkc */

#endif /* TILEOPS_CUDA_COMMON_CUH */
