/*
 * rowops.cuh - the row engine behind the ops that reduce each row of the
 * last dim and then write it (the norms, softmax, per-token fp8
 * quantization).
 *
 * A row of up to kRegRowMax elements is read once into registers: each of
 * blockDim.x (<= 1024) threads holds E floats (E = 8 or 32), loaded as 16-byte
 * vectors when rows are aligned for it (thread t holds vectors t, t + nt,
 * ...), else as single elements (t, t + nt, ...), so every load instruction
 * is coalesced across the warp. Narrow rows share a block (blockDim.y rows
 * of blockDim.x threads; a warp per row at the narrowest), wide rows get a
 * block each. Reductions go through warp shuffles, then once through
 * shared memory when a row spans several warps. Wider rows take the ops'
 * two-pass streaming kernels, whose second read mostly hits L2.
 */
#ifndef TILEOPS_ROWOPS_CUH
#define TILEOPS_ROWOPS_CUH

#include "cuda_common.cuh"

namespace tkc
{

constexpr int64_t kRegRowMax = 16384;
constexpr int kStreamThreads = 1024;

/* Elements per thread, threads per row and rows per block for a width. */
struct RowShape {
	int e, tb, rb;
};

static inline RowShape row_shape(int64_t d)
{
	RowShape s;
	int64_t need;

	s.e = d <= 4096 ? 8 : 32;
	need = (d + s.e - 1) / s.e;
	s.tb = 32;
	while (s.tb < need)
		s.tb *= 2;
	s.rb = s.tb >= 256 ? 1 : 256 / s.tb;
	return s;
}

/*
 * Blocks for `rows` rows: one block-row per row, so the grid covers the
 * tensor once and each SM takes a new block as one finishes (a persistent
 * grid would leave each block's next load waiting behind its last store).
 */
static inline unsigned row_grid(int64_t rows, RowShape s)
{
	int64_t b = (rows + s.rb - 1) / s.rb;
	const int64_t cap = 0x7fffffff;

	return (unsigned)(b > cap ? cap : b);
}

/*
 * Row starts of the NOPS operands of row r. The register kernels take only
 * plans of one dim (packed or evenly spaced rows), so this is a multiply;
 * deeper plans go to the streaming kernels, which resolve them through
 * plan_offsets (a 64-bit division there would cost the register kernels
 * their registers).
 */
template <int NOPS>
__device__ __forceinline__ void row_offsets(const Plan &p, int64_t r, int64_t *off)
{
#pragma unroll
	for (int op = 0; op < NOPS; op++)
		off[op] = r * p.stride[op][0];
}

/*
 * Index in the row of register slot s (see the mapping above). Rows in
 * registers are at most kRegRowMax wide, so indices are 32-bit.
 */
template <typename T, bool VEC> __device__ __forceinline__ int slot_index(int s)
{
	constexpr int N = Vec<T>::N;

	if (VEC)
		return ((int)threadIdx.x + (s / N) * (int)blockDim.x) * N + s % N;
	return (int)threadIdx.x + s * (int)blockDim.x;
}

template <typename T, int E, bool VEC>
__device__ __forceinline__ void row_load(float (&v)[E], const T *p, int d, float fill)
{
	constexpr int N = Vec<T>::N;

	if constexpr (VEC) {
#pragma unroll
		for (int k = 0; k < E / N; k++) {
			int j = slot_index<T, true>(k * N);
			Vec<T> x;
			if (j < d)
				x = *reinterpret_cast<const Vec<T> *>(p + j);
#pragma unroll
			for (int i = 0; i < N; i++)
				v[k * N + i] = j < d ? to_f32(x.v[i]) : fill;
		}
	} else {
#pragma unroll
		for (int k = 0; k < E; k++) {
			int j = slot_index<T, false>(k);
			v[k] = j < d ? to_f32(p[j]) : fill;
		}
	}
}

template <typename T, int E, bool VEC>
__device__ __forceinline__ void row_store(const float (&v)[E], T *p, int d)
{
	constexpr int N = Vec<T>::N;

	if constexpr (VEC) {
#pragma unroll
		for (int k = 0; k < E / N; k++) {
			int j = slot_index<T, true>(k * N);
			Vec<T> x;
#pragma unroll
			for (int i = 0; i < N; i++)
				x.v[i] = from_f32<T>(v[k * N + i]);
			if (j < d)
				*reinterpret_cast<Vec<T> *>(p + j) = x;
		}
	} else {
#pragma unroll
		for (int k = 0; k < E; k++) {
			int j = slot_index<T, false>(k);
			if (j < d)
				p[j] = from_f32<T>(v[k]);
		}
	}
}

struct SumOp {
	__device__ float operator()(float a, float b) const
	{
		return a + b;
	}
};

struct MaxOp {
	__device__ float operator()(float a, float b) const
	{
		return fmaxf(a, b);
	}
};

/*
 * Reduce v over the blockDim.x threads of this row; every one of them gets
 * the result. `smem` holds 32 floats per row of the block. Every thread of
 * the block must reach it (it synchronizes when a row spans warps).
 */
template <typename F>
__device__ __forceinline__ float row_allreduce(float v, float *smem, F f, float ident)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
	if (blockDim.x <= 32)
		return v;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	float *s = smem + threadIdx.y * 32;
	__syncthreads(); /* the previous reduction's readers are done */
	if (lane == 0)
		s[warp] = v;
	__syncthreads();
	v = lane < nw ? s[lane] : ident;
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/*
 * Call f(vector, j) for every 16-byte vector of a row of d (a whole number
 * of vectors, aligned), this thread's share of a block-wide walk, four
 * loads in flight before the first use.
 */
template <typename T, typename F>
__device__ __forceinline__ void stream_vecs(const T *x, int64_t d, F f)
{
	constexpr int N = Vec<T>::N;
	const int64_t step = (int64_t)blockDim.x * N;
	int64_t j = (int64_t)threadIdx.x * N;

	for (; j + 3 * step < d; j += 4 * step) {
		Vec<T> u[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			u[k] = *reinterpret_cast<const Vec<T> *>(x + j + k * step);
#pragma unroll
		for (int k = 0; k < 4; k++)
			f(u[k], j + k * step);
	}
	for (; j < d; j += step)
		f(*reinterpret_cast<const Vec<T> *>(x + j), j);
}

/*
 * Register kernels' launch bounds. E = 8 (rows up to 4096 wide, up to 512
 * threads a row) stays under 64 registers, so several blocks share an SM
 * and their rows are in flight together; E = 32 (rows up to 16384, 256 or
 * 512 threads) gets 128 registers, since its 32 floats and their indices
 * would spill under 64. (E = 8 with 1024-thread rows of 8192 ran slower on
 * an H200 than E = 32 with 256: rms_norm 44% of copy against 62%.)
 */
#define TKC_ROW_BOUNDS(E) __launch_bounds__((E) == 32 ? 512 : 1024)

/* The same over a whole block of one row (the streaming kernels). */
template <typename F>
__device__ __forceinline__ float block_allreduce(float v, float *smem, F f, float ident)
{
	return row_allreduce(v, smem, f, ident);
}

/*
 * Whether a row goes to the register kernels: at most kRegRowMax wide, rows
 * one stride apart, and, when it cannot be read as vectors, at most 4096
 * wide (E = 8 scalar slots per thread; 32 with their indices would spill).
 */
static inline bool row_regs_fit(int64_t d, int plan_ndim, bool vec)
{
	return d <= kRegRowMax && plan_ndim == 1 && (vec || d <= 4096);
}

/* Launch KERNEL<T, E, VEC> for the row shape (E 32 only with vectors, see above). */
#define TKC_ROW_LAUNCH(KERNEL, T, shape, vec, grid, stream, ...)                     \
	do {                                                                         \
		dim3 blk_((unsigned)(shape).tb, (unsigned)(shape).rb);               \
		if ((shape).e == 8 && (vec))                                         \
			KERNEL<T, 8, true><<<grid, blk_, 0, stream>>>(__VA_ARGS__);  \
		else if ((shape).e == 8)                                             \
			KERNEL<T, 8, false><<<grid, blk_, 0, stream>>>(__VA_ARGS__); \
		else                                                                 \
			KERNEL<T, 32, true><<<grid, blk_, 0, stream>>>(__VA_ARGS__); \
	} while (0)

} /* namespace tkc */

#endif /* TILEOPS_ROWOPS_CUH */
