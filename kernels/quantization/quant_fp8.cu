/*
 * quant_fp8.cu - fp8 e4m3 quantization (see cpu/quant_fp8.c for the
 * definition; both backends produce the same bytes).
 *
 * Per token: the row engine (rowops.cuh) reads a row once into registers
 * (raw 16-byte vectors for aligned rows, over a cluster past 4096
 * vectors), reduces its absolute maximum, writes the row's scale and the
 * quantized row (8 bytes per 16-byte bf16 vector). Rows no register kernel
 * holds stream twice.
 * Per tensor with a computed scale: a first kernel reduces |x| per block
 * and folds each block's amax / 448 into the scale with one atomicMax on
 * its bits (non-negative floats order like their bit patterns), after the
 * scale is cleared; a second kernel quantizes. That reads x twice; the
 * second read hits L2 only for tensors that fit it (see docs/perf.md).
 * Dense tensors the SMs can hold (up to about 40 MiB on an H200) take one
 * cooperative kernel instead: each block keeps its share of x in registers
 * and shared memory, folds its amax into the scale, waits at a grid
 * barrier for every other block's, and quantizes what it holds: x is read
 * once (quant_tensor_held).
 */
#include <cooperative_groups.h>
#include <cuda_fp8.h>
#include <float.h>

#include "rowops.cuh"
#include "sm90.cuh"

namespace
{

using namespace tkc;

struct QArgs {
	uint8_t *q;
	float *scale;       /* per token: one per row; per tensor: [1] */
	const float *given; /* per tensor with a given scale, else NULL */
	int reverse;        /* per tensor: the quantizing pass walks x last to first */
	const void *x;
	int64_t rows, d;
	Plan p; /* operands: q, x */
	int vec;
	int c;         /* blocks per row (a cluster) of the vector kernel */
	uint32_t wave; /* blocks that prefetch their first rows (vec_launch sets it) */
};

/*
 * The factor values are quantized with: 1 / scale, one division per row
 * (or tensor) and then a product per value, where a division per value
 * cost about ten instructions in kernels bound by instruction issue.
 * Capped at FLT_MAX, so a denormal scale, whose reciprocal overflows,
 * still maps 0 to 0 and not to NaN. cpu/quant_fp8.c computes the same f32
 * reciprocal and product, so both give the same bytes. A scale that is
 * not positive gives 0 codes (`on` false below).
 */
__device__ __forceinline__ float quant_inv(float scale)
{
	return fminf(1.0f / scale, FLT_MAX);
}

__device__ __forceinline__ uint8_t to_e4m3(float v, float inv, bool on)
{
	return on ? (uint8_t)__nv_cvt_float_to_fp8(v * inv, __NV_SATFINITE, __NV_E4M3) : 0;
}

/* Two codes, x.x in the low byte: one cvt.rn.satfinite.e4m3x2.f32. */
__device__ __forceinline__ uint32_t to_e4m3x2(float2 x, float inv)
{
	return __nv_cvt_float2_to_fp8x2(make_float2(x.x * inv, x.y * inv), __NV_SATFINITE,
	                                __NV_E4M3);
}

/*
 * Quantize a 16-byte vector of x and store its N codes (8 bytes for bf16
 * and f16, 4 for f32) with one store, converting a pair at a time.
 */
template <typename T>
__device__ __forceinline__ void store_codes(uint8_t *q, const Vec<T> &x, float inv, bool on)
{
	constexpr int P = Vec<T>::N / 2;
	uint32_t w[2] = { 0, 0 };

#pragma unroll
	for (int i = 0; i < P; i++)
		w[i / 2] |= to_e4m3x2(vec_pair(x, i), inv) << (16 * (i % 2));
	if (!on) {
		w[0] = 0;
		w[1] = 0;
	}
	if constexpr (P == 4)
		*reinterpret_cast<uint2 *>(q) = make_uint2(w[0], w[1]);
	else
		*reinterpret_cast<uint32_t *>(q) = w[0];
}

/* Store N quantized bytes (one 16-byte vector of x) with one store. */
template <int N> __device__ __forceinline__ void store_bytes(uint8_t *p, const uint8_t (&b)[N])
{
	if constexpr (N == 8) {
		uint2 u;
		u.x = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
		u.y = b[4] | b[5] << 8 | b[6] << 16 | (uint32_t)b[7] << 24;
		*reinterpret_cast<uint2 *>(p) = u;
	} else {
		*reinterpret_cast<uint32_t *>(p) =
		        b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
	}
}

/*
 * A running maximum of |x| over 16-byte vectors. bf16 and f16 keep it as a
 * packed pair (an abs and a max per pair, no conversion) and convert once
 * at the end. NaN is skipped, as fmaxf does.
 */
template <typename T> struct Amax {
	uint32_t p = 0; /* two +0 */
	float f = 0.0f;

	__device__ void add(const Vec<T> &x)
	{
		if constexpr (sizeof(T) == 2) {
			p = vec_max2<T, true>(p, x);
		} else {
#pragma unroll
			for (int i = 0; i < Vec<T>::N; i++)
				f = fmaxf(f, fabsf(x.v[i]));
		}
	}

	__device__ float get() const
	{
		if constexpr (sizeof(T) == 2)
			return pair_max_f32<T>(p);
		else
			return f;
	}
};

template <typename T, int E, bool VEC>
__global__ void TKC_ROW_BOUNDS(E) quant_token_reg(const __grid_constant__ QArgs a)
{
	pdl_enter();
	__shared__ float smem[8 * 32];
	constexpr int N = Vec<T>::N;
	const int rb = blockDim.y;

	for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < a.rows; r0 += (int64_t)gridDim.x * rb) {
		int64_t r = r0 + threadIdx.y, off[2];
		int d = r < a.rows ? (int)a.d : 0;
		float v[E], m = 0.0f;

		row_offsets<2>(a.p, r < a.rows ? r : 0, off);
		row_load<T, E, VEC>(v, static_cast<const T *>(a.x) + off[1], d, 0.0f);
#pragma unroll
		for (int k = 0; k < E; k++)
			m = fmaxf(m, fabsf(v[k]));
		m = row_allreduce(m, smem, MaxOp(), 0.0f);
		float scale = m / 448.0f, inv = quant_inv(scale);
		bool on = scale > 0.0f;
		if (d > 0 && threadIdx.x == 0)
			a.scale[r] = scale;
		uint8_t *q = a.q + off[0];
		if constexpr (VEC) {
#pragma unroll
			for (int k = 0; k < E / N; k++) {
				int j = slot_index<T, true>(k * N);
				uint8_t b[N];
#pragma unroll
				for (int i = 0; i < N; i++)
					b[i] = to_e4m3(v[k * N + i], inv, on);
				if (j < d)
					store_bytes<N>(q + j, b);
			}
		} else {
#pragma unroll
			for (int k = 0; k < E; k++) {
				int j = slot_index<T, false>(k);
				if (j < d)
					q[j] = to_e4m3(v[k], inv, on);
			}
		}
	}
}

template <typename T, int V>
__global__ void TKC_VEC_BOUNDS(V) quant_token_vec(const __grid_constant__ QArgs a)
{
	const RowPlace pl = row_place(a.c);

	vec_row_prefetch<T, V>(static_cast<const T *>(a.x), a.p.stride[1][0], a.rows, a.d, pl,
	                       a.wave);
	pdl_enter();
	__shared__ float smem[8 * 32 + 1];
	constexpr int N = Vec<T>::N;

	for (int64_t rbk = pl.first; rbk * blockDim.y < a.rows; rbk += pl.step) {
		int64_t r = rbk * blockDim.y + threadIdx.y;
		int nvec = r < a.rows ? (int)(a.d / N) : 0;
		int64_t rr = r < a.rows ? r : 0;
		Vec<T> x[V];

		vec_row_load<T, V>(x, static_cast<const T *>(a.x) + rr * a.p.stride[1][0], nvec,
		                   pl.rank);
		Amax<T> am;
#pragma unroll
		for (int k = 0; k < V; k++) {
			if (vec_slot<V>(pl.rank, k) < nvec)
				am.add(x[k]);
		}
		float m = vec_allreduce(am.get(), smem, MaxOp(), 0.0f, a.c);
		vec_launder(x);
		const float scale = m / 448.0f, inv = quant_inv(scale);
		const bool on = scale > 0.0f;
		if (nvec > 0 && pl.rank == 0 && threadIdx.x == 0)
			a.scale[r] = scale;
		/* Vector k's codes are k block widths on (fewer registers than 64-bit j * N). */
		uint8_t *q = a.q + rr * a.p.stride[0][0] + (int64_t)vec_slot<V>(pl.rank, 0) * N;
		const int64_t step = (int64_t)blockDim.x * N;
#pragma unroll
		for (int k = 0; k < V; k++) {
			if (vec_slot<V>(pl.rank, k) < nvec)
				store_codes(q + k * step, x[k], inv, on);
		}
	}
}

/* Rows no register kernel holds: a block per row, two passes. */
template <typename T>
__global__ void __launch_bounds__(kStreamThreads)
        quant_token_stream(const __grid_constant__ QArgs a)
{
	pdl_enter();
	__shared__ float smem[32];

	for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		float m = 0.0f;
		for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x)
			m = fmaxf(m, fabsf(to_f32(x[j])));
		float scale = block_allreduce(m, smem, MaxOp(), 0.0f) / 448.0f;
		float inv = quant_inv(scale);
		if (threadIdx.x == 0)
			a.scale[r] = scale;
		for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x)
			a.q[off[0] + j] = to_e4m3(to_f32(x[j]), inv, scale > 0.0f);
	}
}

/*
 * A given scale is the op's scale output too: the quantizing kernel's first
 * thread writes it, so no copy stands between the kernel before and this
 * one in a chain of dependent launches. The output may alias the input
 * (the same value is written over itself).
 */
__device__ __forceinline__ void publish_given(const QArgs &a, float scale, bool amax)
{
	if (!amax && a.given != NULL && blockIdx.x == 0 && threadIdx.x == 0)
		*a.scale = scale;
}

/*
 * Per tensor: the tensor as rows (a 1-dim plan of row starts), walked in
 * tiles of a block's width of vectors (or elements) within one row.
 */
template <typename T, bool VEC, bool AMAX>
__global__ void quant_tensor(const __grid_constant__ QArgs a)
{
	pdl_enter();
	__shared__ float smem[32];
	constexpr int N = VEC ? Vec<T>::N : 1;
	const int64_t upr = (a.d + N - 1) / N;                   /* units per row */
	const int64_t tpr = (upr + blockDim.x - 1) / blockDim.x; /* tiles per row */
	const float scale = AMAX ? 0.0f : (a.given != NULL ? *a.given : *a.scale);
	const float inv = quant_inv(scale);
	const bool on = scale > 0.0f;
	Amax<T> am;
	float m = 0.0f;

	publish_given(a, scale, AMAX);

	for (int64_t t = blockIdx.x; t < a.rows * tpr; t += gridDim.x) {
		int64_t r = t / tpr, u = (t - r * tpr) * blockDim.x + threadIdx.x, off[2];
		if (u >= upr)
			continue;
		plan_offsets<2>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1] + u * N;
		if constexpr (VEC) {
			Vec<T> v = vec_ld(x);
			if (AMAX)
				am.add(v);
			else
				store_codes(a.q + off[0] + u * N, v, inv, on);
		} else {
			if (AMAX)
				m = fmaxf(m, fabsf(to_f32(*x)));
			else
				a.q[off[0] + u] = to_e4m3(to_f32(*x), inv, on);
		}
	}
	if (AMAX) {
		m = block_allreduce(fmaxf(m, am.get()), smem, MaxOp(), 0.0f) / 448.0f;
		if (threadIdx.x == 0 && m > 0.0f)
			atomicMax(reinterpret_cast<unsigned int *>(a.scale), __float_as_uint(m));
	}
}

/*
 * Per tensor over aligned rows one stride apart (the common case): the
 * tensor as units of one 16-byte vector, four per thread in flight; a
 * unit's row is one division (32-bit when the counts fit).
 */
template <typename T, bool AMAX>
__global__ void __launch_bounds__(256) quant_tensor_vec(const __grid_constant__ QArgs a)
{
	pdl_enter();
	__shared__ float smem[32];
	constexpr int N = Vec<T>::N, U = 4;
	const int64_t upr = a.d / N, units = a.rows * upr, tile = (int64_t)blockDim.x * U;
	const int64_t xs = a.p.stride[1][0], qs = a.p.stride[0][0];
	const float scale = AMAX ? 0.0f : (a.given != NULL ? *a.given : *a.scale);
	const float inv = quant_inv(scale);
	const bool on = scale > 0.0f;
	Amax<T> am;

	publish_given(a, scale, AMAX);
	const int64_t tiles = (units + tile - 1) / tile;
	for (int64_t ti = blockIdx.x; ti < tiles; ti += gridDim.x) {
		/*
		 * For x larger than the L2 holds, the quantizing pass walks the tiles
		 * last to first: the amax pass just read the last ones, and the L2
		 * still holds about 40 MiB of them on an H200 (docs/kernel-notes.md).
		 */
		const int64_t base = (!AMAX && a.reverse ? tiles - 1 - ti : ti) * tile;
		Vec<T> v[U];
		int64_t qo[U];
#pragma unroll
		for (int k = 0; k < U; k++) {
			int64_t u = base + k * blockDim.x + threadIdx.x, col;
			if (u >= units)
				continue;
			int64_t row = divmod64(u, upr, &col);
			qo[k] = row * qs + col * N;
			v[k] = vec_ld(static_cast<const T *>(a.x) + row * xs + col * N);
		}
#pragma unroll
		for (int k = 0; k < U; k++) {
			if (base + k * blockDim.x + threadIdx.x >= units)
				continue;
			if (AMAX)
				am.add(v[k]);
			else
				store_codes(a.q + qo[k], v[k], inv, on);
		}
	}
	if (AMAX) {
		float m = block_allreduce(am.get(), smem, MaxOp(), 0.0f) / 448.0f;
		if (threadIdx.x == 0 && m > 0.0f)
			atomicMax(reinterpret_cast<unsigned int *>(a.scale), __float_as_uint(m));
	}
}

/*
 * Per tensor, the quantizing pass over x and q both dense (one row, or rows
 * d apart) and fewer than 2^32 vectors: one vector a thread, a grid that
 * covers the tensor once, 32-bit indices (the shape of ew_flat); the first
 * wave asks the L2 for its vectors before the wait. With `reverse` the
 * blocks take the tensor last to first, as quant_tensor_vec walks it.
 */
constexpr int kFlatThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
        quant_tensor_flat(const __grid_constant__ QArgs a, uint32_t nvec, uint32_t wave)
{
	constexpr int N = Vec<T>::N;
	const uint32_t blk = a.reverse ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
	const uint32_t base = blk * kFlatThreads, u = base + threadIdx.x;
	const T *x = static_cast<const T *>(a.x);

	if (blockIdx.x < wave && threadIdx.x == 0) {
		const uint32_t n = nvec - base < kFlatThreads ? nvec - base : kFlatThreads;
		l2_prefetch(x + (size_t)base * N, n * 16);
	}
	pdl_enter();
	const float scale = a.given != NULL ? *a.given : *a.scale;
	publish_given(a, scale, false);
	if (u < nvec)
		store_codes(a.q + (size_t)u * N, vec_ld(x + (size_t)u * N), quant_inv(scale),
		            scale > 0.0f);
}

/*
 * Per tensor, computed scale, x dense and held on chip: block b takes
 * vectors [b per, (b + 1) per) of x, kHeldRegs a thread in registers and
 * the next `held` a thread in shared memory (copied with cp.async, so no
 * register waits on them), all asked for at once. Its amax goes into the
 * scale (cleared before the launch) by atomicMax; after a grid barrier
 * (the launch is cooperative, so every block is resident) each block reads
 * the final scale and quantizes the vectors it holds.
 */
constexpr int kHeldThreads = 1024, kHeldRegs = 8, kHeldMaxSlots = 12;

template <typename T>
__global__ void __launch_bounds__(kHeldThreads, 1)
        quant_tensor_held(const __grid_constant__ QArgs a, int64_t per, int held)
{
	extern __shared__ __align__(16) unsigned char held_bytes[];
	Vec<T> *hv = reinterpret_cast<Vec<T> *>(held_bytes);
	__shared__ float smem[32];
	constexpr int N = Vec<T>::N, S = kHeldThreads, R = kHeldRegs;
	const int t = (int)threadIdx.x;
	const int64_t units = a.rows * (a.d / N), first = (int64_t)blockIdx.x * per;
	const int64_t cnt = units - first < per ? units - first : per;
	const T *x = static_cast<const T *>(a.x) + first * N;
	uint8_t *q = a.q + first * N;
	Vec<T> v[R];
	Amax<T> am;

	for (int k = 0; k < held; k++) {
		const int64_t j = t + (int64_t)(R + k) * S;
		if (j < cnt)
			tk_sm90::cp_async16(tk_sm90::smem_addr(&hv[k * S + t]), x + j * N, true);
	}
	tk_sm90::cp_async_commit();
#pragma unroll
	for (int k = 0; k < R; k++) {
		const int64_t j = t + (int64_t)k * S;
		if (j < cnt)
			v[k] = vec_ld(x + j * N);
	}
#pragma unroll
	for (int k = 0; k < R; k++) {
		if (t + (int64_t)k * S < cnt)
			am.add(v[k]);
	}
	tk_sm90::cp_async_wait<0>(); /* this thread's own copies: no barrier needed */
	for (int k = 0; k < held; k++) {
		if (t + (int64_t)(R + k) * S < cnt)
			am.add(hv[k * S + t]);
	}
	const float m = block_allreduce(am.get(), smem, MaxOp(), 0.0f) / 448.0f;
	if (t == 0 && m > 0.0f)
		atomicMax(reinterpret_cast<unsigned int *>(a.scale), __float_as_uint(m));
	cooperative_groups::this_grid().sync();
	const float scale = __ldcg(a.scale);
	const float inv = quant_inv(scale);
	const bool on = scale > 0.0f;
#pragma unroll
	for (int k = 0; k < R; k++) {
		const int64_t j = t + (int64_t)k * S;
		if (j < cnt)
			store_codes(q + j * N, v[k], inv, on);
	}
	for (int k = 0; k < held; k++) {
		const int64_t j = t + (int64_t)(R + k) * S;
		if (j < cnt)
			store_codes(q + j * N, hv[k * S + t], inv, on);
	}
}

/*
 * Launch quant_tensor_held over `units` dense vectors when the SMs can hold
 * them and the device runs cooperative launches; returns false (nothing
 * launched) otherwise, also when the grid cannot be resident at once (a
 * process limited to a share of the SMs). The shared-memory limit is
 * raised once per device.
 */
template <typename T>
bool held_launch(const QArgs &a, int64_t units, cudaStream_t s, cudaError_t *err)
{
	static std::atomic<uint64_t> ready{ 0 }, refused{ 0 };
	const int S = kHeldThreads;
	const int sms = sm_count();
	int dev = 0;
	*err = cudaSuccess;
	if (sms <= 0 || cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	const int64_t per = (units + sms - 1) / sms;
	if (per > (int64_t)(kHeldRegs + kHeldMaxSlots) * S)
		return false;
	const uint64_t bit = 1ull << (dev & 63);
	if (refused.load(std::memory_order_acquire) & bit)
		return false;
	if (!(ready.load(std::memory_order_acquire) & bit)) {
		int coop = 0, blocks = 0;
		const size_t most = (size_t)kHeldMaxSlots * S * 16;
		bool ok = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) ==
		                  cudaSuccess &&
		          coop != 0 &&
		          cudaFuncSetAttribute(quant_tensor_held<T>,
		                               cudaFuncAttributeMaxDynamicSharedMemorySize,
		                               (int)most) == cudaSuccess &&
		          cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		                  &blocks, quant_tensor_held<T>, S, most) == cudaSuccess &&
		          blocks >= 1;
		(void)cudaGetLastError();
		(ok ? ready : refused).fetch_or(bit, std::memory_order_release);
		if (!ok)
			return false;
	}
	const int64_t rest = per - (int64_t)kHeldRegs * S;
	const int held = rest > 0 ? (int)((rest + S - 1) / S) : 0;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[1];
	at[0].id = cudaLaunchAttributeCooperative;
	at[0].val.cooperative = 1;
	cfg.gridDim = dim3((unsigned)((units + per - 1) / per));
	cfg.blockDim = dim3(S);
	cfg.dynamicSmemBytes = (size_t)held * S * 16;
	cfg.stream = s;
	cfg.attrs = at;
	cfg.numAttrs = 1;
	*err = cudaLaunchKernelEx(&cfg, quant_tensor_held<T>, a, per, held);
	if (*err == cudaErrorCooperativeLaunchTooLarge) {
		/* fewer SMs than the device has (a share of it under MPS): the
		 * two kernels instead */
		(void)cudaGetLastError();
		*err = cudaSuccess;
		return false;
	}
	return true;
}

/* q's rows keep N-byte alignment for the vector stores when x's keep 16. */
static bool q_vec_ok(const tk_iter &it, const void *q, int n)
{
	if (((uintptr_t)q % (uintptr_t)n) != 0)
		return false;
	for (int d = 0; d < it.ndim; d++) {
		if (it.shape[d] > 1 && it.stride[0][d] % n != 0)
			return false;
	}
	return true;
}

template <typename T>
tk_status quant_run(QArgs &a, const tk_iter &it, bool per_token, cudaStream_t s)
{
	const void *xp[1] = { a.x };
	tk_iter xonly = it;

	/* x alone against the vector rule; q then needs N-byte alignment. */
	xonly.n_ops = 2;
	for (int d = 0; d < it.ndim; d++)
		xonly.stride[0][d] = it.stride[1][d];
	a.vec = tk_row_vec_ok(&xonly, a.d, sizeof(T), xp, 1) && q_vec_ok(it, a.q, Vec<T>::N);
	launch_begin();
	if (per_token) {
		if (vec_rows_fit(a.d, sizeof(T), it.ndim, a.vec)) {
			VecShape sh = vec_shape(a.d / Vec<T>::N, a.rows);
			a.c = sh.c;
			if (TKC_VEC_LAUNCH(quant_token_vec, T, sh, a.rows, s, a) != cudaSuccess)
				return TK_ERR_LAUNCH;
		} else if (row_scalar_fits(a.d, it.ndim)) {
			RowShape sh = row_shape(a.d);
			TKC_ROW_LAUNCH_SCALAR(quant_token_reg, T, sh, row_grid(a.rows, sh), s, a);
		} else {
			launch_pdl(quant_token_stream<T>, grid_persistent(a.rows, 1, 2),
			           kStreamThreads, 0, s, a);
		}
		return launch_status();
	}
	const int threads = 256;
	/* what the L2 keeps of the amax pass: about 40 of its 60 MiB on an H200 */
	a.reverse = a.given == NULL &&
	            (double)a.rows * (double)a.d * sizeof(T) > 2.0 / 3.0 * (double)l2_bytes();
	int64_t units = a.rows * ((a.d + (a.vec ? Vec<T>::N : 1) - 1) / (a.vec ? Vec<T>::N : 1));
	unsigned g = grid_persistent(units, threads, 8);
	bool flat = a.vec && it.ndim == 1;
	bool dense = flat && (a.rows == 1 || (a.p.stride[1][0] == a.d && a.p.stride[0][0] == a.d));
	unsigned gf = grid_persistent(units, threads * 4, 8);
	if (a.given == NULL) {
		/* the amax pass folds into a zero scale; cleared in the PDL chain */
		if (clear_words(a.scale, 1, s) != cudaSuccess)
			return TK_ERR_LAUNCH;
		/* Dense and at least 2 MiB: held on chip when it fits (read once). */
		cudaError_t e = cudaSuccess;
		if (dense && (double)units * 16.0 >= 2.0 * 1024 * 1024 &&
		    held_launch<T>(a, units, s, &e))
			return e == cudaSuccess ? launch_status() : TK_ERR_LAUNCH;
		if (flat)
			launch_pdl(quant_tensor_vec<T, true>, gf, threads, 0, s, a);
		else if (a.vec)
			launch_pdl(quant_tensor<T, true, true>, g, threads, 0, s, a);
		else
			launch_pdl(quant_tensor<T, false, true>, g, threads, 0, s, a);
	}
	if (dense && units < ((int64_t)1 << 32) - kFlatThreads)
		launch_pdl(quant_tensor_flat<T>,
		           (unsigned)((units + kFlatThreads - 1) / kFlatThreads), kFlatThreads, 0,
		           s, a, (uint32_t)units, first_wave(kFlatThreads));
	else if (flat)
		launch_pdl(quant_tensor_vec<T, false>, gf, threads, 0, s, a);
	else if (a.vec)
		launch_pdl(quant_tensor<T, true, false>, g, threads, 0, s, a);
	else
		launch_pdl(quant_tensor<T, false, false>, g, threads, 0, s, a);
	return launch_status();
}

tk_status quant_launch(const tk_call *call, void *stream, bool per_token)
{
	const tk_tensor *x = &call->in[0], *q = &call->out[0], *scale = &call->out[1];
	const tk_tensor *ts[2] = { q, x };
	QArgs a;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 2 || !tk_same_float_dtype(&x, 1) || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if ((q->dtype != TK_FP8_E4M3 && q->dtype != TK_U8) || scale->dtype != TK_F32)
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(x) || !tk_last_dim_packed(q) ||
	    tk_iter_outer(&it, ts, 2) != TK_OK || tk_last_dim(x) != tk_last_dim(q))
		return TK_ERR_UNSUPPORTED;
	a.given = NULL;
	a.reverse = 0;
	if (per_token) {
		if (tk_numel(scale) * tk_last_dim(x) != tk_numel(x) || !tk_is_contiguous(scale))
			return TK_ERR_UNSUPPORTED;
	} else {
		if (tk_numel(scale) != 1)
			return TK_ERR_UNSUPPORTED;
		if (call->n_in > 1) {
			if (call->in[1].dtype != TK_F32 || tk_numel(&call->in[1]) != 1)
				return TK_ERR_UNSUPPORTED;
			a.given = static_cast<const float *>(call->in[1].data);
		}
	}
	a.q = static_cast<uint8_t *>(q->data);
	a.scale = static_cast<float *>(scale->data);
	a.x = x->data;
	a.rows = it.numel;
	a.d = tk_last_dim(x);
	a.p = plan_of(it);
	a.c = 1;
	a.wave = 0;
	if (a.rows == 0 || a.d == 0) {
		/* Nothing to read: the scales are still defined, 0 per empty row (as the
		 * CPU reference writes them), or the per-tensor one (0, or the given one). */
		cudaStream_t s0 = static_cast<cudaStream_t>(stream);
		if (per_token) {
			if (a.rows == 0)
				return TK_OK;
			launch_begin();
			return cudaMemsetAsync(a.scale, 0, sizeof(float) * (size_t)a.rows, s0) ==
			                       cudaSuccess
			               ? TK_OK
			               : TK_ERR_LAUNCH;
		}
		if (tk_numel(x) != 0)
			return TK_OK;
		launch_begin();
		cudaError_t e = a.given != NULL ? cudaMemcpyAsync(a.scale, a.given, sizeof(float),
		                                                  cudaMemcpyDeviceToDevice, s0)
		                                : cudaMemsetAsync(a.scale, 0, sizeof(float), s0);
		return e == cudaSuccess ? TK_OK : TK_ERR_LAUNCH;
	}
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (x->dtype) {
	case TK_F32:
		return quant_run<float>(a, it, per_token, s);
	case TK_F16:
		return quant_run<__half>(a, it, per_token, s);
	default:
		return quant_run<__nv_bfloat16>(a, it, per_token, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_quant_fp8_per_tensor(const tk_call *call, void *stream)
{
	return quant_launch(call, stream, false);
}

extern "C" tk_status tk_cuda_quant_fp8_per_token(const tk_call *call, void *stream)
{
	return quant_launch(call, stream, true);
}
