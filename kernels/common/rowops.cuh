/*
 * rowops.cuh - the row engine behind the ops that reduce each row of the
 * last dim and then write it (the norms, softmax, per-token fp8
 * quantization).
 *
 * Rows that can be read as 16-byte vectors (the common case) take the
 * vector kernels: a row is held in registers as its raw vectors (V of them
 * per thread, 2 to 8 registers per 8 bf16 values instead of 8 floats), so
 * a thread of a 256-thread block keeps 64 bytes of its row in flight and
 * several blocks share an SM. A row is spread over tb threads of a block,
 * and past 4096 vectors over the c blocks of a thread-block cluster
 * (vec_shape): each block reduces its part, then the cluster exchanges the
 * block results through distributed shared memory, so rows of up to 65536
 * vectors (524288 bf16, 262144 f32) are read once and never leave the
 * chip. Narrow rows share a block (blockDim.y rows of a warp each).
 *
 * Rows that cannot be read as vectors use the older scalar kernels: each
 * of blockDim.x threads holds E = 8 floats (t, t + nt, ...), rows up to
 * 4096 wide; wider ones take the ops' two-pass streaming kernels, whose
 * second read mostly hits L2.
 */
#ifndef TILEOPS_ROWOPS_CUH
#define TILEOPS_ROWOPS_CUH

#include <cooperative_groups.h>

#include "cuda_common.cuh"

namespace tkc
{

constexpr int kStreamThreads = 1024;

/* Elements per thread, threads per row and rows per block for a scalar row of d <= 4096. */
struct RowShape {
	int e, tb, rb;
};

static inline RowShape row_shape(int64_t d)
{
	RowShape s;
	int64_t need;

	s.e = 8;
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

__device__ __forceinline__ float shfl_xor(float v, int o)
{
	return __shfl_xor_sync(0xffffffffu, v, o);
}

__device__ __forceinline__ float2 shfl_xor(float2 v, int o)
{
	return make_float2(__shfl_xor_sync(0xffffffffu, v.x, o),
	                   __shfl_xor_sync(0xffffffffu, v.y, o));
}

/*
 * Reduce v (a float, or a float2 pair) over the blockDim.x threads of this
 * row; every one of them gets the result. `smem` holds 32 P per row of the
 * block. Every thread of the block must reach it (it synchronizes when a
 * row spans warps).
 */
template <typename P, typename F>
__device__ __forceinline__ P row_allreduce(P v, P *smem, F f, P ident)
{
#pragma unroll
	for (int o = 16; o > 0; o >>= 1)
		v = f(v, shfl_xor(v, o));
	if (blockDim.x > 32) {
		int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
		P *s = smem + threadIdx.y * 32;
		__syncthreads(); /* the previous reduction's readers are done */
		if (lane == 0)
			s[warp] = v;
		__syncthreads();
		v = lane < nw ? s[lane] : ident;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			v = f(v, shfl_xor(v, o));
	}
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
 * Scalar register kernels' launch bounds: E = 8 (rows up to 4096 wide, up
 * to 512 threads a row) stays under 64 registers, so several blocks share
 * an SM and their rows are in flight together.
 */
#define TKC_ROW_BOUNDS(E) __launch_bounds__(1024)

/* The same over a whole block of one row (the streaming kernels). */
template <typename F>
__device__ __forceinline__ float block_allreduce(float v, float *smem, F f, float ident)
{
	return row_allreduce(v, smem, f, ident);
}

/*
 * Whether a row that cannot be read as vectors goes to the scalar register
 * kernels: at most 4096 wide (E = 8 slots per thread; more would spill with
 * their indices) and rows one stride apart.
 */
static inline bool row_scalar_fits(int64_t d, int plan_ndim)
{
	return d <= 4096 && plan_ndim == 1;
}

/* Launch the scalar KERNEL<T, 8, false> for the row shape (rows up to 4096 wide). */
#define TKC_ROW_LAUNCH_SCALAR(KERNEL, T, shape, grid, stream, ...)                   \
	do {                                                                         \
		dim3 blk_((unsigned)(shape).tb, (unsigned)(shape).rb);               \
		launch_pdl(KERNEL<T, 8, false>, grid, blk_, 0, stream, __VA_ARGS__); \
	} while (0)

/* ---- the vector row engine --------------------------------------------- */

/* Vectors per thread, threads per row, rows per block and blocks per row (a cluster). */
struct VecShape {
	int v, tb, rb, c;
};

/*
 * The smallest shape that holds nvec vectors, then blocks (a cluster costs
 * two cluster barriers per reduction). Two orders for rows of up to 4096
 * bf16: with many rows (at least kManyRows) and a kernel that holds only
 * its row, vectors per thread grow to 4 before threads (at 64 registers an
 * SM holds 1024 threads whatever V, so 4 vectors a thread keep twice the
 * bytes in flight of 2: measured on an H200, softmax of 32 x 2048 x 2048
 * from 64% to 87% of copy, rms_norm of 2048 x 4096 from 50% to 57%); a few
 * rows, whose time is one row's latency, and the fused norms, which hold
 * the residual too and lose occupancy at V = 4, grow threads first. Rows
 * past 4096 vectors (vocabulary logits) take 8 vectors a thread before more
 * blocks per cluster when their clusters fill more than one wave, halving
 * the waves (each waits on its cluster barriers: 128 x 128256 bf16 softmax
 * from 44% to 51% of copy), except in the fused norms and layer_norm
 * (no_v8), which spill at V = 8. v = 0: too wide (the streaming kernels
 * take it).
 */
constexpr int64_t kManyRows = 1024;
/*
 * A call of at most this many rows (decode: one token's row) is one row's
 * latency: the `one` shapes give each thread a single vector up to 512
 * threads, so a warp's chain of dependent instructions (load, convert,
 * reduce, write) is short and twice as many warps hide each other's
 * latencies (one row of 4096 bf16 was 256 threads of 2 vectors: about 350
 * instructions a warp at 9 cycles each in Nsight Compute on an H200; 512
 * threads of one took it from 1.74 to 1.59 us in a graph, but 1024 threads
 * for 8192 wide made fp8 per token slower, 1.81 to 1.90 us).
 */
constexpr int64_t kOneRows = 8;

static inline VecShape vec_shape(int64_t nvec, int64_t rows = kManyRows, bool holds_more = false,
                                 bool no_v8 = false)
{
	static const VecShape deep[] = {
		{ 1, 32, 8, 1 },  { 2, 32, 8, 1 },  { 4, 32, 8, 1 },  { 4, 64, 4, 1 },
		{ 4, 128, 2, 1 }, { 4, 256, 1, 1 }, { 4, 512, 1, 1 }, { 4, 512, 1, 2 },
		{ 8, 512, 1, 2 }, { 8, 512, 1, 4 }, { 8, 512, 1, 8 }, { 8, 1024, 1, 8 },
	};
	static const VecShape few[] = {
		{ 1, 32, 8, 1 },  { 2, 32, 8, 1 },  { 2, 64, 4, 1 },  { 2, 128, 2, 1 },
		{ 2, 256, 1, 1 }, { 4, 256, 1, 1 }, { 4, 512, 1, 1 }, { 4, 512, 1, 2 },
		{ 4, 512, 1, 4 }, { 4, 512, 1, 8 }, { 8, 512, 1, 8 }, { 8, 1024, 1, 8 },
	};
	static const VecShape one[] = {
		{ 1, 32, 8, 1 },  { 1, 64, 4, 1 },  { 1, 128, 2, 1 }, { 1, 256, 1, 1 },
		{ 1, 512, 1, 1 }, { 2, 512, 1, 1 }, { 4, 512, 1, 1 }, { 4, 512, 1, 2 },
		{ 4, 512, 1, 4 }, { 4, 512, 1, 8 }, { 8, 512, 1, 8 }, { 8, 1024, 1, 8 },
	};
	static const VecShape fused[] = {
		{ 1, 32, 8, 1 },  { 2, 32, 8, 1 },  { 2, 64, 4, 1 },  { 2, 128, 2, 1 },
		{ 2, 256, 1, 1 }, { 4, 256, 1, 1 }, { 4, 512, 1, 1 }, { 4, 512, 1, 2 },
		{ 4, 512, 1, 4 }, { 4, 512, 1, 8 }, { 8, 512, 1, 8 }, { 8, 1024, 1, 8 },
	};
	const VecShape *steps = rows <= kOneRows    ? one
	                        : holds_more        ? fused
	                        : rows >= kManyRows ? deep
	                                            : few;
	/* Wide rows: 8 vectors a thread once 4 would take more than one wave of
	 * clusters (two 512-thread blocks per SM); a few rows keep more blocks,
	 * each with less to do (one row of 128256 bf16: 5.1 us in a graph with
	 * 8 blocks of 4 vectors a thread, 6.8 us with 4 blocks of 8). */
	if (!holds_more && nvec > 4096)
		steps = rows * ((nvec + 2047) / 2048) > 2 * (int64_t)sm_count() ? deep : few;
	if (no_v8 && nvec > 4096)
		steps = fused;
	VecShape none = { 0, 0, 0, 0 };

	static_assert(sizeof(deep) == sizeof(few) && sizeof(few) == sizeof(fused) &&
	                      sizeof(one) == sizeof(few),
	              "same lengths");
	for (size_t i = 0; i < sizeof(deep) / sizeof(deep[0]); i++) {
		const VecShape &s = steps[i];
		if ((int64_t)s.v * s.tb * s.c >= nvec)
			return s;
	}
	return none;
}

/*
 * Whether a row goes to the vector kernels: vectors, rows one stride apart
 * (a one-dim plan) and a shape that holds it.
 */
static inline bool vec_rows_fit(int64_t d, size_t elem, int plan_ndim, bool vec)
{
	return vec && plan_ndim == 1 && vec_shape(d / (int64_t)(16 / elem)).v != 0;
}

/* Where this block's rows are: the cluster rank, row-block index and stride. */
struct RowPlace {
	int rank;
	int64_t first, step; /* row blocks: blockIdx.x / c, then + gridDim.x / c */
};

__device__ __forceinline__ RowPlace row_place(int c)
{
	RowPlace p;

	if (c == 1) { /* no division on the one-row path, whose time is its latency */
		p.rank = 0;
		p.first = blockIdx.x;
		p.step = gridDim.x;
		return p;
	}
	p.rank = (int)cooperative_groups::this_cluster().block_rank();
	p.first = blockIdx.x / (unsigned)c;
	p.step = gridDim.x / (unsigned)c;
	return p;
}

/*
 * Before pdl_enter(), in the first `wave` blocks (first_wave): thread 0 of
 * each of the block's rows asks the L2 for this block's part of its first
 * row of x, a row of d elements every rstride (l2_prefetch).
 */
template <typename T, int V>
__device__ __forceinline__ void vec_row_prefetch(const T *x, int64_t rstride, int64_t rows,
                                                 int64_t d, const RowPlace &pl, uint32_t wave)
{
	constexpr int N = Vec<T>::N;
	const int64_t r = pl.first * blockDim.y + threadIdx.y;
	const int nvec = (int)(d / N), per = V * (int)blockDim.x, j0 = pl.rank * per;

	if (threadIdx.x != 0 || blockIdx.x >= wave || r >= rows || j0 >= nvec)
		return;
	l2_prefetch(x + r * rstride + (int64_t)j0 * N,
	            (uint32_t)(nvec - j0 < per ? nvec - j0 : per) * 16);
}

/* Index in the row, in vectors, of this thread's k-th vector. */
template <int V> __device__ __forceinline__ int vec_slot(int rank, int k)
{
	return (rank * V + k) * (int)blockDim.x + (int)threadIdx.x;
}

template <typename T> __device__ __forceinline__ Vec<T> vec_ld(const T *p)
{
	return *reinterpret_cast<const Vec<T> *>(p);
}

/*
 * Loads with an L2 eviction priority (createpolicy then an ld with
 * .L2::cache_hint; sm_90 takes the bare .L2::evict_* qualifiers on 256-bit
 * loads only): a row read twice keeps its lines (evict_last) in the first
 * pass and releases them (evict_first) in the second, so the outputs
 * written in between do not push it out.
 */
template <bool KEEP> __device__ __forceinline__ uint64_t l2_policy(void)
{
	uint64_t pol;

	if (KEEP)
		asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
	else
		asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
	return pol;
}

template <typename T> __device__ __forceinline__ Vec<T> vec_ld_hint(const T *p, uint64_t pol)
{
	Vec<T> v;
	uint32_t *u = reinterpret_cast<uint32_t *>(&v);

	asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
	             : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3])
	             : "l"(p), "l"(pol));
	return v;
}

template <typename T> __device__ __forceinline__ void vec_st(T *p, const Vec<T> &v)
{
	*reinterpret_cast<Vec<T> *>(p) = v;
}

/*
 * Make the compiler forget what it knows of v's bits (no instruction is
 * emitted). Between the passes over a held row this keeps the raw vectors
 * live and the floats of the previous pass dead: otherwise the compiler
 * keeps 8 converted floats per 16-byte bf16 vector from the reduction to
 * the write, and the kernel spills.
 */
template <typename T> __device__ __forceinline__ void vec_launder(Vec<T> &v)
{
	uint32_t u[4];

	memcpy(u, &v, 16);
#pragma unroll
	for (int i = 0; i < 4; i++)
		asm volatile("" : "+r"(u[i]));
	memcpy(&v, u, 16);
}

template <typename T, int V> __device__ __forceinline__ void vec_launder(Vec<T> (&x)[V])
{
#pragma unroll
	for (int k = 0; k < V; k++)
		vec_launder(x[k]);
}

/*
 * This thread's vectors of a row of nvec vectors; those past the end are
 * zero. Left undefined, they reach the compiler as 16-bit pieces merged
 * with the loaded words, each taking a register of its own, and the V = 8
 * kernels spilled under their 64 registers.
 */
template <typename T, int V>
__device__ __forceinline__ void vec_row_load(Vec<T> (&x)[V], const T *row, int nvec, int rank)
{
	constexpr int N = Vec<T>::N;

#pragma unroll
	for (int k = 0; k < V; k++) {
		int j = vec_slot<V>(rank, k);
		if (j < nvec)
			x[k] = vec_ld(row + (int64_t)j * N);
		else
			x[k] = Vec<T>{};
	}
}

/*
 * Reduce v over a row's threads and, for c > 1, over the blocks of its
 * cluster; every thread of the row gets the same result (each block folds
 * the cluster's block results in rank order). `smem` holds 32 P per row of
 * the block plus one. Every thread of the block, and every block of the
 * cluster, must reach it.
 */
template <typename P, typename F>
__device__ __forceinline__ P vec_allreduce(P v, P *smem, F f, P ident, int c)
{
	v = row_allreduce(v, smem, f, ident);
	if (c > 1) {
		cooperative_groups::cluster_group cl = cooperative_groups::this_cluster();
		P *slot = smem + 32 * blockDim.y;
		if (threadIdx.x == 0 && threadIdx.y == 0)
			*slot = v;
		cl.sync();
		P acc = ident;
		for (int r = 0; r < c; r++)
			acc = f(acc, *cl.map_shared_rank(slot, r));
		cl.sync(); /* every block has read the slots before any rewrites or exits */
		v = acc;
	}
	return v;
}

/*
 * Bounds of the vector kernels by vectors per thread: at most 64 registers,
 * so two 512-thread or four 256-thread blocks share an SM (measured on an
 * H200: softmax of 128 x 128256 bf16 at 78 registers, one 512-thread block
 * per SM, reached 23% of copy). V = 8 takes 1024-thread blocks.
 */
#define TKC_VEC_BOUNDS(V) __launch_bounds__((V) == 4 ? 512 : 1024, (V) == 4 ? 2 : 1)

/*
 * Launch a vector row kernel over `rows` rows in shape sh: blocks of
 * tb x rb threads, c of them per row block in a cluster. args.wave is set
 * to the blocks that run at once (the ones that prefetch their first rows,
 * vec_row_prefetch), or 0 without `prefetch`. Returns the launch's error.
 */
template <typename K, typename A>
static inline cudaError_t vec_launch(K kernel, VecShape sh, int64_t rows, cudaStream_t s, A args,
                                     bool prefetch = true)
{
	args.wave = prefetch ? resident_blocks((const void *)kernel, sh.tb * sh.rb) : 0;
	cudaLaunchConfig_t cfg = {};
	cudaLaunchAttribute at[2];
	unsigned n = 0;
	int64_t blocks = (rows + sh.rb - 1) / sh.rb;
	const int64_t cap = 0x7fffffff / 8; /* a multiple of c blocks stays under 2^31 */

	cfg.gridDim = dim3((unsigned)((blocks > cap ? cap : blocks) * sh.c));
	cfg.blockDim = dim3((unsigned)sh.tb, (unsigned)sh.rb);
	cfg.stream = s;
	if (sh.c > 1)
		cluster_attr(at, &n, (unsigned)sh.c);
	pdl_attr(at, &n);
	cfg.attrs = at;
	cfg.numAttrs = n;
	return cudaLaunchKernelEx(&cfg, kernel, args);
}

/* Launch KERNEL<T, V> for shape sh (V one of 1, 2, 4, 8). */
#define TKC_VEC_LAUNCH(KERNEL, T, sh, rows, stream, args)                 \
	((sh).v == 1   ? vec_launch(KERNEL<T, 1>, sh, rows, stream, args) \
	 : (sh).v == 2 ? vec_launch(KERNEL<T, 2>, sh, rows, stream, args) \
	 : (sh).v == 4 ? vec_launch(KERNEL<T, 4>, sh, rows, stream, args) \
	               : vec_launch(KERNEL<T, 8>, sh, rows, stream, args))

} /* namespace tkc */

#endif /* TILEOPS_ROWOPS_CUH */
