/*
 * softmax.cu - softmax over the last dim and log_softmax over any dim,
 * max-subtracted, f32 arithmetic. A line that is all -inf gives NaN, as
 * in PyTorch.
 *
 * Along the last dim, rows are read once into registers (rowops.cuh: raw
 * 16-byte vectors for aligned rows, up to 524288 bf16 wide over a cluster,
 * which covers vocabulary logits; floats for the others, up to 4096): each
 * thread takes the max of its values and the sum of exp(x - max), the
 * (max, sum) pairs merge over the row in one reduction (for rows of up to
 * 16 values a thread, and bf16 and f16 rows of one block, a max then a
 * sum), then the writes;
 * 2 * numel elements move. Rows no register kernel holds: a block of 1024
 * threads per row, 16-byte loads four in flight, keeps a running (max,
 * sum) per thread, rescaling the sum when the max grows (the online
 * softmax), merges them, then reads the row again (mostly from L2) to
 * write.
 * bf16 and f16 rows of 4097 to 16384 vectors, at least half as many as
 * SMs: a block an SM holds a row (softmax_onsm, below). Other rows over
 * 4096 vectors of a tensor within 3/4 of the L2, given workspace: two
 * kernels over row chunks (softmax_split_*, below).
 * log_softmax along another dim: a thread per line, lines of adjacent
 * threads adjacent in memory, the same two passes.
 */
#include "rowops.cuh"
#include "sm90.cuh" /* cp.async */

namespace
{

using namespace tkc;

struct SmArgs {
	void *out;
	const void *x;
	int64_t rows, d;
	int64_t xs, os; /* element strides along the line (column kernel) */
	Plan p;         /* operands: out, x */
	int vec, log_form;
	int c;         /* blocks per row (a cluster) of the vector kernel */
	float2 *part;  /* the split kernels' (max key, sum) per row chunk */
	int chunks;    /* chunks per row of the split kernels */
	uint32_t wave; /* blocks that prefetch their first rows (vec_launch sets it) */
};

/*
 * Exponentials relative to a row's max, in one of two domains. bf16 and f16
 * (F) work in base 2: a max m is carried as its key m log2(e), rounded once,
 * and e^(x - m) is 2^(x log2(e) - key), one FFMA and one ex2.approx.ftz per
 * element. The row kernels are bound by instruction issue, not memory, and
 * this replaces a subtraction, a product and the four-instruction
 * denormal-handling ex2 of __expf. A value's term in the sum and its
 * output use the same key, so the key's rounding cancels in the
 * normalization. f32 keeps the natural domain and expf, its precision
 * unchanged. (A bf16 max beyond FLT_MAX / log2(e), about 2.4e38,
 * overflows its key, and its row comes out NaN.)
 */
template <bool F> __device__ __forceinline__ float sm_key(float m)
{
	return F ? m * kLog2e : m;
}

/* e^(x - m) for the key k of m. */
template <bool F> __device__ __forceinline__ float sm_term(float x, float k)
{
	if constexpr (F)
		return ex2_ftz(fmaf(x, kLog2e, -k));
	else
		return expf(x - k);
}

/* The factor between two keys' sums: e^(m1 - m2) for keys d = k1 - k2. */
template <bool F> __device__ __forceinline__ float sm_rescale(float d)
{
	return F ? ex2_ftz(d) : expf(d);
}

/*
 * What the write pass needs of a row: its max's key, 1 / sum and the log
 * term. For F the log term is the whole shift, max + log(sum) in natural
 * units, so a log_softmax value is one subtraction; for f32 it is
 * log(sum), subtracted after the max as before.
 */
struct SmRow {
	float k, inv, lse;
};

template <bool F> __device__ __forceinline__ SmRow sm_row(float k, float s)
{
	constexpr float ln2 = 0.69314718055994531f;
	SmRow r;

	r.k = k;
	r.inv = 1.0f / s;
	r.lse = F ? (k + __log2f(s)) * ln2 : logf(s);
	return r;
}

/* One output: softmax's e^(x - max) / sum, or log_softmax's x - max - log(sum). */
template <bool F, bool LOG> __device__ __forceinline__ float sm_value(float x, const SmRow &r)
{
	if constexpr (!LOG)
		return sm_term<F>(x, r.k) * r.inv;
	else if constexpr (F)
		return x - r.lse;
	else
		return (x - r.k) - r.lse;
}

/* A 16-byte vector's outputs, a pair at a time (one packed conversion each for bf16, f16). */
template <typename T, bool LOG>
__device__ __forceinline__ Vec<T> sm_vec(const Vec<T> &x, const SmRow &r)
{
	constexpr bool F = sizeof(T) == 2;
	Vec<T> y;

#pragma unroll
	for (int i = 0; i < Vec<T>::N / 2; i++) {
		float2 f = vec_pair(x, i);
		vec_set_pair(y, i, make_float2(sm_value<F, LOG>(f.x, r), sm_value<F, LOG>(f.y, r)));
	}
	return y;
}

/* The sum of e^(x - max) over a vector for the max's key k, two chains. */
template <typename T> __device__ __forceinline__ float sm_vec_sum(const Vec<T> &x, float k)
{
	constexpr bool F = sizeof(T) == 2;
	float2 s = make_float2(0.0f, 0.0f);

#pragma unroll
	for (int i = 0; i < Vec<T>::N / 2; i++) {
		float2 f = vec_pair(x, i);
		s.x += sm_term<F>(f.x, k);
		s.y += sm_term<F>(f.y, k);
	}
	return s.x + s.y;
}

template <typename T, int E, bool VEC>
__global__ void TKC_ROW_BOUNDS(E) softmax_reg(const __grid_constant__ SmArgs a)
{
	pdl_enter();
	__shared__ float smem[8 * 32];
	constexpr bool F = sizeof(T) == 2; /* base-2 exponentials for bf16 and f16 (sm_key) */
	const int rb = blockDim.y;

	for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < a.rows; r0 += (int64_t)gridDim.x * rb) {
		int64_t r = r0 + threadIdx.y, off[2];
		int d = r < a.rows ? (int)a.d : 0;
		float v[E], m = -INFINITY, s = 0.0f;

		row_offsets<2>(a.p, r < a.rows ? r : 0, off);
		row_load<T, E, VEC>(v, static_cast<const T *>(a.x) + off[1], d, -INFINITY);
#pragma unroll
		for (int k = 0; k < E; k++)
			m = fmaxf(m, v[k]);
		const float key = sm_key<F>(row_allreduce(m, smem, MaxOp(), -INFINITY));
#pragma unroll
		for (int k = 0; k < E; k++)
			s += slot_index<T, VEC>(k) < d ? sm_term<F>(v[k], key) : 0.0f;
		const SmRow row = sm_row<F>(key, row_allreduce(s, smem, SumOp(), 0.0f));
		if (a.log_form) {
#pragma unroll
			for (int k = 0; k < E; k++)
				v[k] = sm_value<F, true>(v[k], row);
		} else {
#pragma unroll
			for (int k = 0; k < E; k++)
				v[k] = sm_value<F, false>(v[k], row);
		}
		row_store<T, E, VEC>(v, static_cast<T *>(a.out) + off[0], d);
	}
}

/*
 * Merge two (max key, sum) pairs. A pair with max -inf holds nothing (its
 * sum is 0, and -inf - -inf would be NaN); a NaN sum carries through, so a
 * NaN anywhere makes the row NaN.
 */
template <bool F> struct PairOp {
	__device__ float2 operator()(float2 a, float2 b) const
	{
		float m = fmaxf(a.x, b.x);
		float sa = a.x == -INFINITY ? 0.0f : a.y * sm_rescale<F>(a.x - m);
		float sb = b.x == -INFINITY ? 0.0f : b.y * sm_rescale<F>(b.x - m);
		return make_float2(m, sa + sb);
	}
};

/*
 * The largest of a 16-byte vector's values, NaN only when all of them are
 * (as an fmaxf chain from the first value).
 */
template <typename T> __device__ __forceinline__ float vec_max_f32(const Vec<T> &x)
{
	if constexpr (sizeof(T) == 2) {
		/* Packed compares on the raw pairs, from the first pair; one conversion. */
		return pair_max_f32<T>(vec_max2<T, false>(vec_word(x, 0), x));
	} else {
		float m = x.v[0];
#pragma unroll
		for (int i = 1; i < Vec<T>::N; i++)
			m = fmaxf(m, x.v[i]);
		return m;
	}
}

/* The largest of this thread's vectors of a held row; NaN is skipped. */
template <typename T, int V>
__device__ __forceinline__ float sm_thread_max(const Vec<T> (&x)[V], int nvec, int rank)
{
	if constexpr (sizeof(T) == 2) {
		/* One packed maximum over all the vectors, converted once. */
		uint32_t p = Pair2<T>::neg_inf;
#pragma unroll
		for (int k = 0; k < V; k++) {
			if (vec_slot<V>(rank, k) < nvec)
				p = vec_max2<T, false>(p, x[k]);
		}
		return pair_max_f32<T>(p);
	} else {
		float m = -INFINITY;
#pragma unroll
		for (int k = 0; k < V; k++) {
			if (vec_slot<V>(rank, k) < nvec)
				m = fmaxf(m, vec_max_f32(x[k]));
		}
		return m;
	}
}

/* Write this thread's vectors of a held row. */
template <typename T, int V, bool LOG>
__device__ __forceinline__ void sm_vec_write(const Vec<T> (&x)[V], T *o, int nvec, int rank,
                                             const SmRow &r)
{
	constexpr int N = Vec<T>::N;

#pragma unroll
	for (int k = 0; k < V; k++) {
		int j = vec_slot<V>(rank, k);
		if (j < nvec)
			vec_st(o + (int64_t)j * N, sm_vec<T, LOG>(x[k], r));
	}
}

template <typename T, int V>
__global__ void TKC_VEC_BOUNDS(V) softmax_vec(const __grid_constant__ SmArgs a)
{
	const RowPlace pl = row_place(a.c);

	vec_row_prefetch<T, V>(static_cast<const T *>(a.x), a.p.stride[1][0], a.rows, a.d, pl,
	                       a.wave);
	pdl_enter();
	__shared__ float2 smem[8 * 32 + 1];
	constexpr bool F = sizeof(T) == 2; /* base-2 exponentials for bf16 and f16 (sm_key) */

	for (int64_t rbk = pl.first; rbk * blockDim.y < a.rows; rbk += pl.step) {
		int64_t r = rbk * blockDim.y + threadIdx.y;
		int nvec = r < a.rows ? (int)(a.d / Vec<T>::N) : 0;
		int64_t rr = r < a.rows ? r : 0;
		Vec<T> x[V];

		vec_row_load<T, V>(x, static_cast<const T *>(a.x) + rr * a.p.stride[1][0], nvec,
		                   pl.rank);
		float m = sm_thread_max<T, V>(x, nvec, pl.rank), s = 0.0f;
		/*
		 * Reduce the max first, then the sum, where the pair merges' two
		 * exponentials per step would cost as much as the row's own: up to
		 * V = 2 (16 or fewer values a thread), and for bf16 and f16, whose
		 * own exponentials are one ex2 each, unless the row spans a
		 * cluster (the merge saves a round of cluster barriers there).
		 */
		const bool max_first = V <= 2 || (F && a.c == 1);
		if (max_first)
			m = vec_allreduce(m, reinterpret_cast<float *>(smem), MaxOp(), -INFINITY,
			                  a.c);
		const float key = sm_key<F>(m);
		if (m != -INFINITY) {
#pragma unroll
			for (int k = 0; k < V; k++) {
				if (vec_slot<V>(pl.rank, k) < nvec)
					s += sm_vec_sum(x[k], key);
			}
		}
		float2 ks;
		if (max_first)
			ks = make_float2(key, vec_allreduce(s, reinterpret_cast<float *>(smem),
			                                    SumOp(), 0.0f, a.c));
		else
			ks = vec_allreduce(make_float2(key, s), smem, PairOp<F>(),
			                   make_float2(-INFINITY, 0.0f), a.c);
		vec_launder(x);
		const SmRow row = sm_row<F>(ks.x, ks.y);
		T *o = static_cast<T *>(a.out) + rr * a.p.stride[0][0];
		if (a.log_form)
			sm_vec_write<T, V, true>(x, o, nvec, pl.rank, row);
		else
			sm_vec_write<T, V, false>(x, o, nvec, pl.rank, row);
	}
}

/* Fold v into a running (max key k, sum s of e^(x - max)). */
template <bool F> __device__ __forceinline__ void online_add(float &k, float &s, float v)
{
	float vk = sm_key<F>(v);

	if (vk > k) {
		s = s * sm_rescale<F>(k - vk) + 1.0f;
		k = vk;
	} else if (k != -INFINITY) {
		s += sm_term<F>(v, k);
	} else if (v != v) {
		k = v; /* NaN: the row's result is NaN whatever else it holds */
	}
}

/*
 * Fold a 16-byte vector into (k, s): one rescale for the vector's max
 * instead of a test per element. The max starts from the first value, so
 * a vector of NaN makes vm NaN, and k and s become NaN; a NaN among other
 * values makes its term, and so s, NaN.
 */
template <typename T>
__device__ __forceinline__ void online_add_vec(float &k, float &s, const Vec<T> &u)
{
	constexpr bool F = sizeof(T) == 2;
	float vm = vec_max_f32(u);

	if (vm != vm) {
		k = vm;
		s = vm;
		return;
	}
	if (vm == -INFINITY)
		return;
	float vk = sm_key<F>(vm);
	if (vk > k) {
		s = k == -INFINITY ? 0.0f : s * sm_rescale<F>(k - vk);
		k = vk;
	}
	s += sm_vec_sum(u, k);
}

/* The second pass of a streamed row: its outputs. */
template <typename T, bool VEC, bool LOG>
__device__ __forceinline__ void sm_stream_write(const T *x, T *o, int64_t d, const SmRow &row)
{
	constexpr bool F = sizeof(T) == 2;

	if constexpr (VEC) {
		stream_vecs<T>(x, d, [&](const Vec<T> &u, int64_t j) {
			vec_st(o + j, sm_vec<T, LOG>(u, row));
		});
	} else {
		for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
			o[j] = from_f32<T>(sm_value<F, LOG>(to_f32(x[j]), row));
	}
}

/*
 * Rows wider than the registers hold: a block per row, two passes, each
 * with 16-byte loads (four in flight) and 16-byte stores when the rows
 * allow, else single elements.
 */
template <typename T, bool VEC>
__global__ void __launch_bounds__(kStreamThreads) softmax_stream(const __grid_constant__ SmArgs a)
{
	pdl_enter();
	__shared__ float smem[32];
	constexpr bool F = sizeof(T) == 2;

	for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		T *o = static_cast<T *>(a.out) + off[0];
		float k = -INFINITY, s = 0.0f;
		if constexpr (VEC) {
			stream_vecs<T>(x, a.d, [&](const Vec<T> &u, int64_t) {
				online_add_vec<T>(k, s, u);
			});
		} else {
			for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x)
				online_add<F>(k, s, to_f32(x[j]));
		}
		/* A NaN anywhere makes some thread's s NaN, and so the row's sum. */
		float bk = block_allreduce(k, smem, MaxOp(), -INFINITY);
		s = block_allreduce(k == -INFINITY ? 0.0f : s * sm_rescale<F>(k - bk), smem,
		                    SumOp(), 0.0f);
		const SmRow row = sm_row<F>(bk, s);
		if (a.log_form)
			sm_stream_write<T, VEC, true>(x, o, a.d, row);
		else
			sm_stream_write<T, VEC, false>(x, o, a.d, row);
	}
}

/*
 * Wide rows of a tensor that fits in L2 (vocabulary logits: 128 x 128256
 * bf16 is 31 MiB) in two kernels over a grid of (row chunk, row) blocks of
 * kSplitThreads threads, V vectors a thread: the first reads each chunk
 * once and writes its (max key, sum) to the workspace; the second merges a
 * row's chunks, reads its chunk again and writes. The second read is meant
 * to come from L2 (the first pass marks the lines evict-last, the second
 * reads them evict-first), and neither kernel waits on cluster barriers
 * with a row in its registers, as the cluster kernel does (two waves of
 * 8-block clusters for those logits). Measured on an H200: one row of
 * 128256 bf16 4.5 -> 3.0 us back to back; the 128-row logits at 56 to 57%
 * of copy either way, so the second read does not seem to find the rows in
 * L2 (docs/kernel-notes.md).
 */
constexpr int kSplitThreads = 256;

/* This thread's V vectors of its row chunk, a block apart, with L2 policy pol. */
template <typename T, int V>
__device__ __forceinline__ void split_load(Vec<T> (&u)[V], const T *x, int base, int nvec,
                                           uint64_t pol)
{
#pragma unroll
	for (int k = 0; k < V; k++) {
		int j = base + k * kSplitThreads;
		if (j < nvec)
			u[k] = vec_ld_hint(x + (int64_t)j * Vec<T>::N, pol);
	}
}

template <typename T, int V>
__global__ void __launch_bounds__(kSplitThreads)
        softmax_split_stats(const __grid_constant__ SmArgs a)
{
	pdl_enter();
	__shared__ float smem[32];
	constexpr bool F = sizeof(T) == 2;
	const int nvec = (int)(a.d / Vec<T>::N);
	const int base = (int)blockIdx.x * V * kSplitThreads + (int)threadIdx.x;
	const T *x = static_cast<const T *>(a.x) + (int64_t)blockIdx.y * a.p.stride[1][0];
	Vec<T> u[V];

	split_load<T, V>(u, x, base, nvec, l2_policy<true>());
	float key = -INFINITY, sum = 0.0f;
#pragma unroll
	for (int k = 0; k < V; k++) {
		if (base + k * kSplitThreads < nvec)
			online_add_vec<T>(key, sum, u[k]);
	}
	/* A NaN anywhere makes some thread's sum NaN, and so the chunk's. */
	float bk = block_allreduce(key, smem, MaxOp(), -INFINITY);
	sum = block_allreduce(key == -INFINITY ? 0.0f : sum * sm_rescale<F>(key - bk), smem,
	                      SumOp(), 0.0f);
	if (threadIdx.x == 0)
		a.part[(int64_t)blockIdx.y * a.chunks + blockIdx.x] = make_float2(bk, sum);
}

template <typename T, int V, bool LOG>
__global__ void __launch_bounds__(kSplitThreads)
        softmax_split_write(const __grid_constant__ SmArgs a)
{
	pdl_enter();
	constexpr bool F = sizeof(T) == 2;
	constexpr int N = Vec<T>::N;
	const int nvec = (int)(a.d / N);
	const int base = (int)blockIdx.x * V * kSplitThreads + (int)threadIdx.x;
	const float2 *part = a.part + (int64_t)blockIdx.y * a.chunks;
	const T *x = static_cast<const T *>(a.x) + (int64_t)blockIdx.y * a.p.stride[1][0];
	T *o = static_cast<T *>(a.out) + (int64_t)blockIdx.y * a.p.stride[0][0];
	Vec<T> u[V];

	split_load<T, V>(u, x, base, nvec, l2_policy<false>());
	/*
	 * The row's (max key, sum) from its chunks' (at most 32): one load a lane
	 * of the first warp, all in flight together, merged with shuffles.
	 */
	__shared__ float2 total;
	if (threadIdx.x < 32) {
		float2 p = (int)threadIdx.x < a.chunks ? part[threadIdx.x]
		                                       : make_float2(-INFINITY, 0.0f);
		float key = p.x;
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			key = fmaxf(key, shfl_xor(key, o));
		/* a NaN chunk has a NaN sum, which makes the row's NaN */
		float sum = p.x == -INFINITY ? 0.0f : p.y * sm_rescale<F>(p.x - key);
#pragma unroll
		for (int o = 16; o > 0; o >>= 1)
			sum += shfl_xor(sum, o);
		if (threadIdx.x == 0)
			total = make_float2(key, sum);
	}
	__syncthreads();
	const SmRow row = sm_row<F>(total.x, total.y);
#pragma unroll
	for (int k = 0; k < V; k++) {
		int j = base + k * kSplitThreads;
		if (j < nvec)
			vec_st(o + (int64_t)j * N, sm_vec<T, LOG>(u[k], row));
	}
}

/*
 * Whether the split kernels take rows of nvec vectors: rows a cluster
 * would hold (over 4096 vectors), the whole tensor at most three quarters
 * of the L2 (so the second read finds most of it there: 128 x 128256 bf16
 * is 31 MiB), and workspace for the chunks' pairs.
 */
static inline bool sm_split_fits(const SmArgs &a, size_t elem, size_t ws_bytes, int64_t nvec,
                                 int64_t chunks)
{
	double bytes = (double)a.rows * (double)a.d * (double)elem;

	return a.vec && nvec > 4096 && chunks <= 32 && a.rows <= 65535 &&
	       bytes <= 0.75 * (double)l2_bytes() &&
	       (double)a.rows * (double)chunks * sizeof(float2) <= (double)ws_bytes;
}

template <typename T, int V> cudaError_t sm_split_launch(SmArgs &a, cudaStream_t s)
{
	dim3 g((unsigned)a.chunks, (unsigned)a.rows);
	cudaError_t e = launch_pdl(softmax_split_stats<T, V>, g, kSplitThreads, 0, s, a);

	if (e != cudaSuccess)
		return e;
	if (a.log_form)
		return launch_pdl(softmax_split_write<T, V, true>, g, kSplitThreads, 0, s, a);
	return launch_pdl(softmax_split_write<T, V, false>, g, kSplitThreads, 0, s, a);
}

/*
 * Vocabulary logits of many rows (bf16, f16): a block of kOnSmThreads
 * threads a row, one block an SM, the row read once and held on the SM:
 * kOnSmRegs vectors a thread in registers and up to kOnSmHeld more in
 * shared memory, copied there with cp.async so no register waits on them
 * (128 KiB: rows of up to 16384 vectors, 131072 bf16). All of a row's
 * loads are asked for at once, each vector folded into a running (max,
 * sum) as it lands; then one reduction and the writes.
 * Where the split kernels read each row twice and the cluster kernel ran
 * its clusters in waves (56 to 60% of copy for 128 x 128256 bf16 on an
 * H200), every row of a wave is in flight together and read once.
 */
constexpr int kOnSmThreads = 1024, kOnSmRegs = 8, kOnSmHeld = 8;
constexpr size_t kOnSmShared = (size_t)kOnSmThreads * kOnSmHeld * 16;

/*
 * Fold held slots K.. (slot k at held[k S], the row's vector j0 + k S) into
 * (key, sum), waiting for each slot's copy group in turn.
 */
template <typename T, int K>
__device__ __forceinline__ void onsm_fold(float &key, float &sum, const Vec<T> *held, int j0,
                                          int nvec)
{
	if constexpr (K < kOnSmHeld) {
		tk_sm90::cp_async_wait<kOnSmHeld - 1 - K>();
		if (j0 + K * kOnSmThreads < nvec)
			online_add_vec<T>(key, sum, held[K * kOnSmThreads]);
		onsm_fold<T, K + 1>(key, sum, held, j0, nvec);
	}
}

template <typename T, bool LOG>
__global__ void __launch_bounds__(kOnSmThreads, 1) softmax_onsm(const __grid_constant__ SmArgs a)
{
	extern __shared__ __align__(16) unsigned char held_bytes[];
	Vec<T> *held = reinterpret_cast<Vec<T> *>(held_bytes);
	__shared__ float2 smem[32];
	constexpr int N = Vec<T>::N, S = kOnSmThreads;
	const int nvec = (int)(a.d / N), t = (int)threadIdx.x;
	Vec<T> v[kOnSmRegs];

	if (t == 0 && blockIdx.x < a.wave && (int64_t)blockIdx.x < a.rows)
		l2_prefetch(static_cast<const T *>(a.x) + (int64_t)blockIdx.x * a.p.stride[1][0],
		            (uint32_t)nvec * 16);
	pdl_enter();
	for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
		const T *x = static_cast<const T *>(a.x) + r * a.p.stride[1][0];
		T *o = static_cast<T *>(a.out) + r * a.p.stride[0][0];
		/*
		 * Vector t + k S: k < kOnSmRegs in v[k], the rest in held[(k -
		 * kOnSmRegs) S + t], a copy group each. Each is folded into a running
		 * (max key, sum) as it arrives (online_add_vec), so the sum's
		 * exponentials run while the rest of the row is still on its way
		 * (on an H200, 128 x 128256 bf16 25.8 -> 25.4 us against taking the
		 * row's max first).
		 */
#pragma unroll
		for (int k = 0; k < kOnSmRegs; k++) {
			const int j = t + k * S;
			if (j < nvec)
				v[k] = vec_ld(x + (int64_t)j * N);
		}
#pragma unroll
		for (int k = 0; k < kOnSmHeld; k++) {
			const int j = t + (kOnSmRegs + k) * S;
			if (j < nvec)
				tk_sm90::cp_async16(tk_sm90::smem_addr(&held[k * S + t]),
				                    x + (int64_t)j * N, true);
			tk_sm90::cp_async_commit();
		}
		float key = -INFINITY, sum = 0.0f;
#pragma unroll
		for (int k = 0; k < kOnSmRegs; k++) {
			if (t + k * S < nvec)
				online_add_vec<T>(key, sum, v[k]);
		}
		/* held slot k is group k: wait until at most kOnSmHeld - 1 - k groups are pending */
		onsm_fold<T, 0>(key, sum, held + t, t + kOnSmRegs * S, nvec);
		const float2 ks = row_allreduce(make_float2(key, sum), smem, PairOp<true>(),
		                                make_float2(-INFINITY, 0.0f));
		const SmRow row = sm_row<true>(ks.x, ks.y);
#pragma unroll
		for (int k = 0; k < kOnSmRegs; k++) {
			const int j = t + k * S;
			if (j < nvec)
				vec_st(o + (int64_t)j * N, sm_vec<T, LOG>(v[k], row));
		}
#pragma unroll
		for (int k = 0; k < kOnSmHeld; k++) {
			const int j = t + (kOnSmRegs + k) * S;
			if (j < nvec)
				vec_st(o + (int64_t)j * N, sm_vec<T, LOG>(held[k * S + t], row));
		}
	}
}

/*
 * Whether softmax_onsm takes the rows: bf16 or f16 vectors, one stride
 * apart, over 4096 vectors (narrower rows fit the vector kernel's
 * registers) and at most what it holds, and at least half as many rows as
 * SMs (fewer leave most of the chip idle: one row of 128256 is faster over
 * the split kernels' many blocks).
 */
template <typename T> static inline bool sm_onsm_fits(const SmArgs &a, int plan_ndim)
{
	const int64_t nvec = a.d / Vec<T>::N;

	return sizeof(T) == 2 && a.vec && plan_ndim == 1 && nvec > 4096 &&
	       nvec <= (int64_t)kOnSmThreads * (kOnSmRegs + kOnSmHeld) &&
	       2 * a.rows >= (int64_t)sm_count();
}

template <typename T, bool LOG> cudaError_t sm_onsm_launch(SmArgs &a, cudaStream_t s)
{
	static std::atomic<uint64_t> raised{ 0 };
	const cudaError_t e = allow_dynamic_smem(
	        reinterpret_cast<const void *>(softmax_onsm<T, LOG>), (int)kOnSmShared, raised);
	if (e != cudaSuccess)
		return e;
	const unsigned g = grid_persistent(a.rows, 1, 1);
	a.wave = g;
	return launch_pdl(softmax_onsm<T, LOG>, g, kOnSmThreads, kOnSmShared, s, a);
}

/* log_softmax along a dim other than the last: a thread per line. */
template <typename T> __global__ void softmax_column(const __grid_constant__ SmArgs a)
{
	pdl_enter();
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.rows;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, i, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		float m = -INFINITY, s = 0.0f;
		for (int64_t j = 0; j < a.d; j++)
			online_add<false>(m, s, to_f32(x[j * a.xs]));
		float lse = logf(s), inv = 1.0f / s;
		T *o = static_cast<T *>(a.out) + off[0];
		for (int64_t j = 0; j < a.d; j++) {
			float v = to_f32(x[j * a.xs]) - m;
			o[j * a.os] = from_f32<T>(a.log_form ? v - lse : expf(v) * inv);
		}
	}
}

template <typename T>
tk_status softmax_run(SmArgs &a, const tk_iter &it, bool rows, void *ws, size_t ws_bytes,
                      cudaStream_t s)
{
	const void *ptrs[2] = { a.out, a.x };
	const int64_t nvec = a.d / Vec<T>::N;

	launch_begin();
	if (!rows) {
		launch_pdl(softmax_column<T>, grid_for(a.rows, 256), 256, 0, s, a);
		return launch_status();
	}
	a.vec = tk_row_vec_ok(&it, a.d, sizeof(T), ptrs, 2);
	/* 8 vectors a thread when that still makes two waves of blocks or 2 would make more
	 * than 32 chunks a row (the merge's limit), else 2 */
	const bool deep = a.rows * ((nvec + 2047) / 2048) >= 2 * (int64_t)sm_count() ||
	                  nvec > 32 * 2 * kSplitThreads;
	const int64_t per_chunk = (deep ? 8 : 2) * kSplitThreads;
	const int64_t chunks = (nvec + per_chunk - 1) / per_chunk;
	if (sm_onsm_fits<T>(a, it.ndim)) {
		if constexpr (sizeof(T) == 2) {
			if ((a.log_form ? sm_onsm_launch<T, true>(a, s)
			                : sm_onsm_launch<T, false>(a, s)) != cudaSuccess)
				return TK_ERR_LAUNCH;
		}
	} else if (ws != NULL && it.ndim == 1 &&
	           sm_split_fits(a, sizeof(T), ws_bytes, nvec, chunks)) {
		a.part = static_cast<float2 *>(ws);
		a.chunks = (int)chunks;
		if ((deep ? sm_split_launch<T, 8>(a, s) : sm_split_launch<T, 2>(a, s)) !=
		    cudaSuccess)
			return TK_ERR_LAUNCH;
	} else if (vec_rows_fit(a.d, sizeof(T), it.ndim, a.vec)) {
		VecShape sh = vec_shape(a.d / Vec<T>::N, a.rows);
		a.c = sh.c;
		if (TKC_VEC_LAUNCH(softmax_vec, T, sh, a.rows, s, a) != cudaSuccess)
			return TK_ERR_LAUNCH;
	} else if (row_scalar_fits(a.d, it.ndim)) {
		RowShape sh = row_shape(a.d);
		TKC_ROW_LAUNCH_SCALAR(softmax_reg, T, sh, row_grid(a.rows, sh), s, a);
	} else if (a.vec) {
		launch_pdl(softmax_stream<T, true>, grid_persistent(a.rows, 1, 2), kStreamThreads,
		           0, s, a);
	} else {
		launch_pdl(softmax_stream<T, false>, grid_persistent(a.rows, 1, 2), kStreamThreads,
		           0, s, a);
	}
	return launch_status();
}

tk_status softmax_launch(const tk_call *call, void *stream, int axis_param, int log_form)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	const tk_tensor *ts[2] = { out, x };
	tk_tensor xv, ov;
	const tk_tensor *views[1] = { &xv };
	SmArgs a;
	int axis;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(ts, 2) || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if (!tk_last_dim_packed(x) || !tk_last_dim_packed(out) || out->ndim != x->ndim)
		return TK_ERR_UNSUPPORTED;
	axis = x->ndim - 1;
	if (axis_param && !tk_axis_param(call, 0, x->ndim, &axis))
		return TK_ERR_UNSUPPORTED;
	bool rows = axis == x->ndim - 1;
	a.d = x->shape[axis];
	if (out->shape[axis] != a.d)
		return TK_ERR_UNSUPPORTED;
	if (rows) {
		if (tk_iter_rows(&it, ts, 2) != TK_OK)
			return TK_ERR_UNSUPPORTED;
	} else {
		/* A plan over every dim but `axis`: each element starts one line. */
		xv = *x;
		ov = *out;
		xv.shape[axis] = 1;
		ov.shape[axis] = 1;
		for (int d = 0; d < x->ndim; d++) {
			if (ov.shape[d] != xv.shape[d])
				return TK_ERR_UNSUPPORTED;
		}
		if (tk_iter_broadcast(&it, &ov, views, 1) != TK_OK)
			return TK_ERR_UNSUPPORTED;
	}
	if (it.numel == 0 || a.d == 0)
		return TK_OK;
	a.out = out->data;
	a.x = x->data;
	a.rows = it.numel;
	a.xs = x->stride[axis];
	a.os = out->stride[axis];
	a.p = plan_of(it);
	a.log_form = log_form;
	a.vec = 0;
	a.c = 1;
	a.part = NULL;
	a.chunks = 0;
	a.wave = 0;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	void *ws = call->workspace;
	size_t wb = call->workspace_bytes;
	switch (x->dtype) {
	case TK_F32:
		return softmax_run<float>(a, it, rows, ws, wb, s);
	case TK_F16:
		return softmax_run<__half>(a, it, rows, ws, wb, s);
	default:
		return softmax_run<__nv_bfloat16>(a, it, rows, ws, wb, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_softmax(const tk_call *call, void *stream)
{
	return softmax_launch(call, stream, 0, 0);
}

extern "C" tk_status tk_cuda_log_softmax(const tk_call *call, void *stream)
{
	return softmax_launch(call, stream, 1, 1);
}
