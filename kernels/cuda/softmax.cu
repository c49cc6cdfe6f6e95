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
 * 16 values a thread, a max then a sum), then the writes;
 * 2 * numel elements move. Rows no register kernel holds: a block of 1024
 * threads per row, 16-byte loads four in flight, keeps a running (max,
 * sum) per thread, rescaling the sum when the max grows (the online
 * softmax), merges them, then reads the row again (mostly from L2) to
 * write.
 * log_softmax along another dim: a thread per line, lines of adjacent
 * threads adjacent in memory, the same two passes.
 */
#include "rowops.cuh"

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
	int c; /* blocks per row (a cluster) of the vector kernel */
};

template <typename T, int E, bool VEC>
__global__ void TKC_ROW_BOUNDS(E) softmax_reg(const __grid_constant__ SmArgs a)
{
	__shared__ float smem[8 * 32];
	constexpr bool F = sizeof(T) == 2; /* fast exp for bf16 and f16 (cuda_common.cuh) */
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
		m = row_allreduce(m, smem, MaxOp(), -INFINITY);
#pragma unroll
		for (int k = 0; k < E; k++)
			s += slot_index<T, VEC>(k) < d ? m_exp<F>(v[k] - m) : 0.0f;
		s = row_allreduce(s, smem, SumOp(), 0.0f);
		if (a.log_form) {
			float lse = m_log<F>(s);
#pragma unroll
			for (int k = 0; k < E; k++)
				v[k] = v[k] - m - lse;
		} else {
			float inv = 1.0f / s;
#pragma unroll
			for (int k = 0; k < E; k++)
				v[k] = m_exp<F>(v[k] - m) * inv;
		}
		row_store<T, E, VEC>(v, static_cast<T *>(a.out) + off[0], d);
	}
}

/*
 * Merge two (max, sum of exp(x - max)) pairs. A pair with max -inf holds
 * nothing (its sum is 0, and exp(-inf - -inf) would be NaN); a NaN sum
 * carries through, so a NaN anywhere makes the row NaN.
 */
template <bool F> struct PairOp {
	__device__ float2 operator()(float2 a, float2 b) const
	{
		float m = fmaxf(a.x, b.x);
		float sa = a.x == -INFINITY ? 0.0f : a.y * m_exp<F>(a.x - m);
		float sb = b.x == -INFINITY ? 0.0f : b.y * m_exp<F>(b.x - m);
		return make_float2(m, sa + sb);
	}
};

template <typename T, int V>
__global__ void TKC_VEC_BOUNDS(V) softmax_vec(const __grid_constant__ SmArgs a)
{
	__shared__ float2 smem[8 * 32 + 1];
	constexpr bool F = sizeof(T) == 2; /* fast exp for bf16 and f16 (cuda_common.cuh) */
	constexpr int N = Vec<T>::N;
	const RowPlace pl = row_place(a.c);
	const int64_t nrb = (a.rows + blockDim.y - 1) / blockDim.y;

	for (int64_t rbk = pl.first; rbk < nrb; rbk += pl.step) {
		int64_t r = rbk * blockDim.y + threadIdx.y;
		int nvec = r < a.rows ? (int)(a.d / Vec<T>::N) : 0;
		int64_t rr = r < a.rows ? r : 0;
		Vec<T> x[V];

		vec_row_load<T, V>(x, static_cast<const T *>(a.x) + rr * a.p.stride[1][0], nvec,
		                   pl.rank);
		float m = -INFINITY, s = 0.0f;
#pragma unroll
		for (int k = 0; k < V; k++) {
			if (vec_slot<V>(pl.rank, k) >= nvec)
				continue;
#pragma unroll
			for (int i = 0; i < N; i++)
				m = fmaxf(m, to_f32(x[k].v[i]));
		}
		/*
		 * Up to V = 2 (16 or fewer values a thread) the pair merges' two
		 * exponentials per step would cost as much as the row's own: reduce
		 * the max first, then the sum.
		 */
		if constexpr (V <= 2)
			m = vec_allreduce(m, reinterpret_cast<float *>(smem), MaxOp(), -INFINITY,
			                  a.c);
		if (m != -INFINITY) {
#pragma unroll
			for (int k = 0; k < V; k++) {
				if (vec_slot<V>(pl.rank, k) >= nvec)
					continue;
#pragma unroll
				for (int i = 0; i < N; i++)
					s += m_exp<F>(to_f32(x[k].v[i]) - m);
			}
		}
		float2 ms;
		if constexpr (V <= 2)
			ms = make_float2(m, vec_allreduce(s, reinterpret_cast<float *>(smem),
			                                  SumOp(), 0.0f, a.c));
		else
			ms = vec_allreduce(make_float2(m, s), smem, PairOp<F>(),
			                   make_float2(-INFINITY, 0.0f), a.c);
		vec_launder(x);
		const float bm = ms.x, lse = m_log<F>(ms.y), inv = 1.0f / ms.y;
		T *o = static_cast<T *>(a.out) + rr * a.p.stride[0][0];
#pragma unroll
		for (int k = 0; k < V; k++) {
			int j = vec_slot<V>(pl.rank, k);
			if (j >= nvec)
				continue;
			Vec<T> y;
#pragma unroll
			for (int i = 0; i < N; i++) {
				float c = to_f32(x[k].v[i]) - bm;
				y.v[i] = from_f32<T>(a.log_form ? c - lse : m_exp<F>(c) * inv);
			}
			vec_st(o + (int64_t)j * N, y);
		}
	}
}

/* Fold v into a running (max m, sum s of exp(x - m)). */
__device__ __forceinline__ void online_add(float &m, float &s, float v)
{
	if (v > m) {
		s = s * expf(m - v) + 1.0f;
		m = v;
	} else if (m != -INFINITY) {
		s += expf(v - m);
	} else if (v != v) {
		m = v; /* NaN: the row's result is NaN whatever else it holds */
	}
}

/*
 * Fold a vector of N values into (m, s): one rescale for the vector's max
 * instead of a test per element. A NaN makes vm NaN, so m and s become NaN.
 */
template <bool F, int N>
__device__ __forceinline__ void online_add_vec(float &m, float &s, const float (&v)[N])
{
	float vm = v[0];
#pragma unroll
	for (int i = 1; i < N; i++)
		vm = fmaxf(vm, v[i]);
	if (vm != vm) {
		m = vm;
		s = vm;
		return;
	}
	if (vm == -INFINITY)
		return;
	if (vm > m) {
		s = m == -INFINITY ? 0.0f : s * m_exp<F>(m - vm);
		m = vm;
	}
	float t = 0.0f;
#pragma unroll
	for (int i = 0; i < N; i++)
		t += m_exp<F>(v[i] - m);
	s += t;
}

/*
 * Rows wider than the registers hold: a block per row, two passes, each
 * with 16-byte loads (four in flight) and 16-byte stores when the rows
 * allow, else single elements.
 */
template <typename T, bool VEC>
__global__ void __launch_bounds__(kStreamThreads) softmax_stream(const __grid_constant__ SmArgs a)
{
	__shared__ float smem[32];
	constexpr bool F = sizeof(T) == 2;
	constexpr int N = Vec<T>::N;

	for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		T *o = static_cast<T *>(a.out) + off[0];
		float m = -INFINITY, s = 0.0f;
		if constexpr (VEC) {
			stream_vecs<T>(x, a.d, [&](const Vec<T> &u, int64_t) {
				float v[N];
#pragma unroll
				for (int i = 0; i < N; i++)
					v[i] = to_f32(u.v[i]);
				online_add_vec<F, N>(m, s, v);
			});
		} else {
			for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x)
				online_add(m, s, to_f32(x[j]));
		}
		/* A NaN anywhere makes some thread's s NaN, and so the row's sum. */
		float bm = block_allreduce(m, smem, MaxOp(), -INFINITY);
		s = block_allreduce(m == -INFINITY ? 0.0f : s * m_exp<F>(m - bm), smem, SumOp(),
		                    0.0f);
		const float lse = m_log<F>(s), inv = 1.0f / s;
		const bool log_form = a.log_form;
		if constexpr (VEC) {
			stream_vecs<T>(x, a.d, [&](const Vec<T> &u, int64_t j) {
				Vec<T> y;
#pragma unroll
				for (int i = 0; i < N; i++) {
					float c = to_f32(u.v[i]) - bm;
					y.v[i] =
					        from_f32<T>(log_form ? c - lse : m_exp<F>(c) * inv);
				}
				*reinterpret_cast<Vec<T> *>(o + j) = y;
			});
		} else {
			for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) {
				float c = to_f32(x[j]) - bm;
				o[j] = from_f32<T>(log_form ? c - lse : m_exp<F>(c) * inv);
			}
		}
	}
}

/* log_softmax along a dim other than the last: a thread per line. */
template <typename T> __global__ void softmax_column(const __grid_constant__ SmArgs a)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.rows;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t off[2];
		plan_offsets<2>(a.p, i, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		float m = -INFINITY, s = 0.0f;
		for (int64_t j = 0; j < a.d; j++)
			online_add(m, s, to_f32(x[j * a.xs]));
		float lse = logf(s), inv = 1.0f / s;
		T *o = static_cast<T *>(a.out) + off[0];
		for (int64_t j = 0; j < a.d; j++) {
			float v = to_f32(x[j * a.xs]) - m;
			o[j * a.os] = from_f32<T>(a.log_form ? v - lse : expf(v) * inv);
		}
	}
}

template <typename T> tk_status softmax_run(SmArgs &a, const tk_iter &it, bool rows, cudaStream_t s)
{
	const void *ptrs[2] = { a.out, a.x };

	launch_begin();
	if (!rows) {
		softmax_column<T><<<grid_for(a.rows, 256), 256, 0, s>>>(a);
		return launch_status();
	}
	a.vec = tk_row_vec_ok(&it, a.d, sizeof(T), ptrs, 2);
	if (vec_rows_fit(a.d, sizeof(T), it.ndim, a.vec)) {
		VecShape sh = vec_shape(a.d / Vec<T>::N);
		a.c = sh.c;
		if (TKC_VEC_LAUNCH(softmax_vec, T, sh, a.rows, s, a) != cudaSuccess)
			return TK_ERR_LAUNCH;
	} else if (row_scalar_fits(a.d, it.ndim)) {
		RowShape sh = row_shape(a.d);
		TKC_ROW_LAUNCH_SCALAR(softmax_reg, T, sh, row_grid(a.rows, sh), s, a);
	} else if (a.vec) {
		softmax_stream<T, true><<<grid_persistent(a.rows, 1, 2), kStreamThreads, 0, s>>>(a);
	} else {
		softmax_stream<T, false>
		        <<<grid_persistent(a.rows, 1, 2), kStreamThreads, 0, s>>>(a);
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
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (x->dtype) {
	case TK_F32:
		return softmax_run<float>(a, it, rows, s);
	case TK_F16:
		return softmax_run<__half>(a, it, rows, s);
	default:
		return softmax_run<__nv_bfloat16>(a, it, rows, s);
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
