/*
 * reduce.cu - sum, mean, amax and argmax over one dim (param 0 "dim",
 * param 1 "keepdim"), f32 accumulation; see cpu/reduce.c for NaN and tie
 * rules (amax propagates NaN; argmax returns the first maximum, a NaN
 * counting as the maximum).
 *
 * Along the last dim: threads per row as for the row engine (a warp for
 * narrow rows, up to 1024 threads for the widest), each streaming its
 * share of the row with 16-byte loads, four in flight (amax and argmax of
 * 16-bit rows take each vector's maximum with packed instructions, argmax
 * finding the element in the best vector once, at the end); then a shuffle
 * and shared-memory reduction and one write per row. Along another dim: a
 * thread per output, adjacent threads reading adjacent columns, so each
 * step of the line is one coalesced load across the warp.
 * Bytes: numel(x) * elem size + the outputs.
 */
#include "rowops.cuh"

namespace
{

using namespace tkc;

enum { RED_SUM, RED_MEAN, RED_AMAX, RED_ARGMAX };

struct RedArgs {
	void *out;
	const void *x;
	int64_t lines, len, xs; /* lines to reduce, their length and element stride */
	Plan p;                 /* operands: out, line start in x */
	int kind, vec;
};

/* Running state of one thread: a sum, or a value and its index. */
struct Acc {
	float v;
	int64_t i;
};

/* Whether (bv, bi) beats (av, ai) for argmax: NaN first, then larger, then earlier. */
__device__ __forceinline__ bool arg_better(float bv, int64_t bi, float av, int64_t ai)
{
	if (bi < 0)
		return false;
	if (ai < 0)
		return true;
	bool bn = bv != bv, an = av != av;
	if (bn != an)
		return bn;
	if (!bn && bv != av)
		return bv > av;
	return bi < ai;
}

template <int K> __device__ __forceinline__ void acc_add(Acc &a, float v, int64_t j)
{
	constexpr int kind = K;

	if (kind == RED_SUM || kind == RED_MEAN)
		a.v += v;
	else if (kind == RED_AMAX)
		a.v = max_nan(a.v, v);
	else if (arg_better(v, j, a.v, a.i)) {
		a.v = v;
		a.i = j;
	}
}

template <int K> __device__ __forceinline__ Acc acc_merge(Acc a, Acc b)
{
	constexpr int kind = K;

	if (kind == RED_SUM || kind == RED_MEAN)
		a.v += b.v;
	else if (kind == RED_AMAX)
		a.v = max_nan(a.v, b.v);
	else if (arg_better(b.v, b.i, a.v, a.i))
		a = b;
	return a;
}

__device__ __forceinline__ Acc acc_shuffle(Acc a, int o)
{
	Acc b = { __shfl_xor_sync(0xffffffffu, a.v, o),
		  (int64_t)__shfl_xor_sync(0xffffffffu, (unsigned long long)a.i, o) };
	return b;
}

/* Merge over this row's threads (blockDim.x of them); every thread gets it. */
template <int K> __device__ Acc acc_allreduce(Acc a, Acc *smem)
{
	constexpr int kind = K;

	for (int o = 16; o > 0; o >>= 1)
		a = acc_merge<K>(a, acc_shuffle(a, o));
	if (blockDim.x <= 32)
		return a;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	Acc *s = smem + threadIdx.y * 32;
	__syncthreads();
	if (lane == 0)
		s[warp] = a;
	__syncthreads();
	Acc none = { kind == RED_SUM || kind == RED_MEAN ? 0.0f : -INFINITY, -1 };
	a = lane < nw ? s[lane] : none;
	for (int o = 16; o > 0; o >>= 1)
		a = acc_merge<K>(a, acc_shuffle(a, o));
	return a;
}

template <typename T> __device__ void red_write(const RedArgs &a, int64_t oo, Acc acc)
{
	if (a.kind == RED_ARGMAX)
		static_cast<int64_t *>(a.out)[oo] = acc.i;
	else if (a.kind == RED_MEAN)
		static_cast<T *>(a.out)[oo] = from_f32<T>(acc.v / (float)a.len);
	else
		static_cast<T *>(a.out)[oo] = from_f32<T>(acc.v);
}

/*
 * The largest of a 16-bit vector's values as f32, a NaN if it holds one:
 * three packed max instructions over its four pairs and one over the last
 * pair (half an instruction an element, where widening each element and
 * comparing it costs four or five).
 */
template <typename T> __device__ __forceinline__ float vec_max_nan(const Vec<T> &u)
{
	static_assert(sizeof(T) == 2, "16-bit vectors");
	using T2 = typename Pair2<T>::type;
	const T2 *p = reinterpret_cast<const T2 *>(u.v);
	T2 m = __hmax2_nan(__hmax2_nan(p[0], p[1]), __hmax2_nan(p[2], p[3]));
	return to_f32(__hmax_nan(m.x, m.y));
}

/*
 * Argmax over a row's vectors, a thread's share: the maximum of each
 * vector (vec_max_nan), the thread's best vector kept by the rules of
 * arg_better (a NaN first, then larger; the thread walks its vectors in
 * order, so a tie keeps the earlier), and only at the end the first element
 * of that vector holding the best value, read again.
 */
template <typename T> struct ArgVec {
	float v = -INFINITY;
	int64_t j = -1; /* the best vector's first element; -1: none yet */

	__device__ __forceinline__ void add(const Vec<T> &u, int64_t at)
	{
		float m = vec_max_nan<T>(u);
		if (j < 0 || (m != m ? v == v : m > v)) {
			v = m;
			j = at;
		}
	}

	__device__ __forceinline__ Acc result(const T *x) const
	{
		Acc a = { v, -1 };
		if (j < 0)
			return a;
		const Vec<T> u = *reinterpret_cast<const Vec<T> *>(x + j);
		int i = 0;
		while (i < Vec<T>::N - 1) {
			float e = to_f32(u.v[i]);
			if (e == v || (e != e && v != v))
				break;
			i++;
		}
		a.i = j + i;
		return a;
	}
};

/*
 * The reduction kind is a template argument, so the per-element step is
 * an add, a max or a compare with no branch on the kind.
 */
template <typename T, bool VEC, int K>
__global__ void __launch_bounds__(1024) reduce_row(const __grid_constant__ RedArgs a)
{
	pdl_enter();
	__shared__ Acc smem[8 * 32];
	constexpr int N = Vec<T>::N;
	const int rb = blockDim.y;
	const float ident = K == RED_SUM || K == RED_MEAN ? 0.0f : -INFINITY;

	for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < a.lines; r0 += (int64_t)gridDim.x * rb) {
		int64_t r = r0 + threadIdx.y, off[2] = { 0, 0 };
		int64_t len = r < a.lines ? a.len : 0;
		Acc acc = { ident, -1 };

		if (r < a.lines)
			plan_offsets<2>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		/* 16-bit rows: a packed max a pair (vec_max_nan); f32 rows gain nothing by it. */
		constexpr bool PACKED = sizeof(T) == 2;
		if constexpr (VEC && PACKED && K == RED_ARGMAX) {
			ArgVec<T> best;
			stream_vecs<T>(x, len, [&](const Vec<T> &u, int64_t j) { best.add(u, j); });
			acc = best.result(x);
		} else if constexpr (VEC && PACKED && K == RED_AMAX) {
			stream_vecs<T>(x, len, [&](const Vec<T> &u, int64_t) {
				acc.v = max_nan(acc.v, vec_max_nan<T>(u));
			});
		} else if constexpr (VEC && K == RED_ARGMAX) {
			stream_vecs<T>(x, len, [&](const Vec<T> &u, int64_t j) {
				/* The vector's first maximum (a NaN first), then one merge. */
				float bv = to_f32(u.v[0]);
				int bi = 0;
#pragma unroll
				for (int i = 1; i < N; i++) {
					float v = to_f32(u.v[i]);
					if (v > bv || (v != v && bv == bv)) {
						bv = v;
						bi = i;
					}
				}
				acc_add<K>(acc, bv, j + bi);
			});
		} else if constexpr (VEC) {
			stream_vecs<T>(x, len, [&](const Vec<T> &u, int64_t j) {
#pragma unroll
				for (int i = 0; i < N; i++)
					acc_add<K>(acc, to_f32(u.v[i]), j + i);
			});
		} else {
			for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
				acc_add<K>(acc, to_f32(x[j]), j);
		}
		acc = acc_allreduce<K>(acc, smem);
		if (r < a.lines && threadIdx.x == 0)
			red_write<T>(a, off[0], acc);
	}
}

template <typename T, int K> __global__ void reduce_column(const __grid_constant__ RedArgs a)
{
	pdl_enter();
	const float ident = K == RED_SUM || K == RED_MEAN ? 0.0f : -INFINITY;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.lines;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, i, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		Acc acc = { ident, -1 };
		for (int64_t j = 0; j < a.len; j++)
			acc_add<K>(acc, to_f32(x[j * a.xs]), j);
		red_write<T>(a, off[0], acc);
	}
}

/*
 * Threads per row: enough that each streams at least 8 vectors (two
 * rounds of four in flight), from a warp up to 1024; narrow rows share a
 * 256-thread block. The grid covers the rows once.
 */
static dim3 reduce_block(int64_t len, int n)
{
	int64_t vecs = (len + n - 1) / n;
	unsigned tb = 32;

	while (tb < 1024 && (int64_t)tb * 8 < vecs)
		tb *= 2;
	return dim3(tb, tb >= 256 ? 1 : 256 / tb);
}

template <typename T, int K>
tk_status reduce_run_kind(RedArgs &a, const tk_iter &it, cudaStream_t s)
{
	launch_begin();
	if (a.xs != 1 && a.len > 1) {
		launch_pdl(reduce_column<T, K>, grid_for(a.lines, 256), 256, 0, s, a);
		return launch_status();
	}
	/* Rows: x's line starts must keep 16-byte alignment for vectors (op 1 of the plan). */
	bool vec = a.len % Vec<T>::N == 0 && aligned16(a.x);
	for (int d = 0; d < it.ndim; d++) {
		if (it.shape[d] > 1 && (it.stride[1][d] * (int64_t)sizeof(T)) % 16 != 0)
			vec = false;
	}
	dim3 blk = reduce_block(a.len, vec ? Vec<T>::N : 1);
	int64_t nb = (a.lines + blk.y - 1) / blk.y;
	unsigned g = (unsigned)(nb > 0x7fffffff ? 0x7fffffff : nb);
	if (vec)
		launch_pdl(reduce_row<T, true, K>, g, blk, 0, s, a);
	else
		launch_pdl(reduce_row<T, false, K>, g, blk, 0, s, a);
	return launch_status();
}

template <typename T> tk_status reduce_run(RedArgs &a, const tk_iter &it, cudaStream_t s)
{
	switch (a.kind) {
	case RED_SUM:
		return reduce_run_kind<T, RED_SUM>(a, it, s);
	case RED_MEAN:
		return reduce_run_kind<T, RED_MEAN>(a, it, s);
	case RED_AMAX:
		return reduce_run_kind<T, RED_AMAX>(a, it, s);
	default:
		return reduce_run_kind<T, RED_ARGMAX>(a, it, s);
	}
}

tk_status reduce_launch(const tk_call *call, void *stream, int kind)
{
	const tk_tensor *x = &call->in[0], *out = &call->out[0];
	RedArgs a;
	int axis;
	tk_iter it;

	if (call->n_in < 1 || call->n_out < 1 || x->ndim < 1)
		return TK_ERR_UNSUPPORTED;
	if (kind == RED_ARGMAX ? out->dtype != TK_I64 : out->dtype != x->dtype)
		return TK_ERR_UNSUPPORTED;
	if (!tk_same_float_dtype(&x, 1) || !tk_axis_param(call, 0, x->ndim, &axis))
		return TK_ERR_UNSUPPORTED;
	int keepdim = tk_param_num(call, 1, 0.0) != 0.0;
	if (tk_iter_reduce(&it, x, out, axis, keepdim, &a.len, &a.xs) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (a.len == 0 && it.numel > 0 && kind != RED_SUM)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0)
		return TK_OK;
	a.out = out->data;
	a.x = x->data;
	a.lines = it.numel;
	a.p = plan_of(it);
	a.kind = kind;
	a.vec = 0;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (x->dtype) {
	case TK_F32:
		return reduce_run<float>(a, it, s);
	case TK_F16:
		return reduce_run<__half>(a, it, s);
	default:
		return reduce_run<__nv_bfloat16>(a, it, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_sum(const tk_call *call, void *stream)
{
	return reduce_launch(call, stream, RED_SUM);
}

extern "C" tk_status tk_cuda_mean(const tk_call *call, void *stream)
{
	return reduce_launch(call, stream, RED_MEAN);
}

extern "C" tk_status tk_cuda_amax(const tk_call *call, void *stream)
{
	return reduce_launch(call, stream, RED_AMAX);
}

extern "C" tk_status tk_cuda_argmax(const tk_call *call, void *stream)
{
	return reduce_launch(call, stream, RED_ARGMAX);
}
