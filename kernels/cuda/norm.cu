/*
 * norm.cu - rms_norm, layer_norm and their fused-residual forms over the
 * last dim (see cpu/norm.c for the exact definitions), f32 arithmetic.
 *
 * Rows up to kRegRowMax wide are read once (rowops.cuh): the fused forms
 * add the residual, round the sum to the dtype, store it back and keep it
 * in registers; layer_norm takes the mean and then the variance of the
 * values in registers (two reductions, no cancellation); then each thread
 * writes its vectors scaled by the weight (and bias). Bytes per row:
 * 2 d (norm) or 4 d (fused) elements, plus the weight once from L2.
 * Wider rows: a block per row, one pass for the statistics (shifted sums;
 * the fused forms store the residual there), a second to write.
 */
#include "rowops.cuh"

namespace
{

using namespace tkc;

struct NormArgs {
	void *out;
	const void *x;
	void *res; /* NULL unless fused */
	const void *w;
	const void *b; /* NULL without bias */
	int64_t rows, d;
	Plan p; /* operands: out, x, res */
	int vec, layer;
	float eps;
};

/*
 * The weight and bias of this thread's vectors. Loaded before the row's
 * reductions for rows of up to 16 elements a thread, so a decode-size row
 * waits for one memory round trip instead of two; wider rows (many per
 * kernel, latency hidden) load them after, to keep registers for the row.
 */
template <typename T, int E, bool VEC> struct Affine {
	static constexpr bool pre = VEC && E <= 16;
	static constexpr int NV = pre ? E / Vec<T>::N : 1;
	Vec<T> w[NV], b[NV];
};

template <typename T, int E, bool VEC>
__device__ __forceinline__ void affine_load(const NormArgs &a, Affine<T, E, VEC> &af, int d)
{
	constexpr int N = Vec<T>::N;

	if constexpr (Affine<T, E, VEC>::pre) {
		const T *w = static_cast<const T *>(a.w), *b = static_cast<const T *>(a.b);
#pragma unroll
		for (int k = 0; k < E / N; k++) {
			int j = slot_index<T, true>(k * N);
			if (j >= d)
				continue;
			af.w[k] = *reinterpret_cast<const Vec<T> *>(w + j);
			if (b != NULL)
				af.b[k] = *reinterpret_cast<const Vec<T> *>(b + j);
		}
	}
}

template <typename T, int E, bool VEC>
__device__ __forceinline__ void norm_write(const NormArgs &a, const float (&v)[E],
                                           const Affine<T, E, VEC> &af, T *o, float mean,
                                           float rstd)
{
	constexpr int N = Vec<T>::N;
	const T *w = static_cast<const T *>(a.w), *b = static_cast<const T *>(a.b);
	int d = (int)a.d;

	if constexpr (VEC) {
#pragma unroll
		for (int k = 0; k < E / N; k++) {
			int j = slot_index<T, true>(k * N);
			if (j >= d)
				continue;
			Vec<T> wv, bv, r;
			if constexpr (Affine<T, E, VEC>::pre) {
				wv = af.w[k];
				bv = af.b[k];
			} else {
				wv = *reinterpret_cast<const Vec<T> *>(w + j);
				if (b != NULL)
					bv = *reinterpret_cast<const Vec<T> *>(b + j);
			}
#pragma unroll
			for (int i = 0; i < N; i++) {
				float y = (v[k * N + i] - mean) * rstd * to_f32(wv.v[i]);
				r.v[i] = from_f32<T>(b != NULL ? y + to_f32(bv.v[i]) : y);
			}
			*reinterpret_cast<Vec<T> *>(o + j) = r;
		}
	} else {
#pragma unroll
		for (int k = 0; k < E; k++) {
			int j = slot_index<T, false>(k);
			if (j >= d)
				continue;
			float y = (v[k] - mean) * rstd * to_f32(w[j]);
			o[j] = from_f32<T>(b != NULL ? y + to_f32(b[j]) : y);
		}
	}
}

template <typename T, int E, bool VEC>
__global__ void TKC_ROW_BOUNDS(E) norm_reg(const __grid_constant__ NormArgs a)
{
	__shared__ float smem[8 * 32];
	const int rb = blockDim.y;

	for (int64_t r0 = (int64_t)blockIdx.x * rb; r0 < a.rows; r0 += (int64_t)gridDim.x * rb) {
		int64_t r = r0 + threadIdx.y, off[3] = { 0, 0, 0 };
		int d = r < a.rows ? (int)a.d : 0; /* an idle row of the block loads nothing */
		float v[E];
		Affine<T, E, VEC> af;

		row_offsets<3>(a.p, r < a.rows ? r : 0, off);
		row_load<T, E, VEC>(v, static_cast<const T *>(a.x) + off[1], d, 0.0f);
		if (a.res != NULL) {
			T *res = static_cast<T *>(a.res) + off[2];
			float rv[E];
			row_load<T, E, VEC>(rv, res, d, 0.0f);
			affine_load<T, E, VEC>(a, af, d);
#pragma unroll
			for (int k = 0; k < E; k++)
				v[k] = to_f32(from_f32<T>(v[k] + rv[k]));
			row_store<T, E, VEC>(v, res, d);
		} else {
			affine_load<T, E, VEC>(a, af, d);
		}
		float mean = 0.0f, ss = 0.0f;
		if (a.layer) {
			float s = 0.0f;
#pragma unroll
			for (int k = 0; k < E; k++)
				s += v[k];
			mean = row_allreduce(s, smem, SumOp(), 0.0f) / (float)a.d;
		}
#pragma unroll
		for (int k = 0; k < E; k++) {
			float c = slot_index<T, VEC>(k) < d ? v[k] - mean : 0.0f;
			ss += c * c;
		}
		ss = row_allreduce(ss, smem, SumOp(), 0.0f);
		float rstd = rsqrtf(ss / (float)a.d + a.eps);
		if (d > 0)
			norm_write<T, E, VEC>(a, v, af, static_cast<T *>(a.out) + off[0], mean,
			                      rstd);
	}
}

/* Rows wider than the registers hold: a block per row, two passes. */
template <typename T>
__global__ void __launch_bounds__(kStreamThreads) norm_stream(const __grid_constant__ NormArgs a)
{
	__shared__ float smem[32];
	const T *w = static_cast<const T *>(a.w), *b = static_cast<const T *>(a.b);

	for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
		int64_t off[3];
		plan_offsets<3>(a.p, r, off);
		const T *x = static_cast<const T *>(a.x) + off[1];
		T *res = a.res != NULL ? static_cast<T *>(a.res) + off[2] : NULL;
		/* Sums shifted by the row's first value keep the variance accurate. */
		float k0 = to_f32(x[0]);
		if (res != NULL)
			k0 = to_f32(from_f32<T>(k0 + to_f32(res[0])));
		__syncthreads(); /* everyone has read res[0] before it is rewritten */
		float s = 0.0f, ss = 0.0f;
		for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) {
			float v = to_f32(x[j]);
			if (res != NULL) {
				T z = from_f32<T>(v + to_f32(res[j]));
				res[j] = z;
				v = to_f32(z);
			}
			float c = v - (a.layer ? k0 : 0.0f);
			s += c;
			ss += c * c;
		}
		s = block_allreduce(s, smem, SumOp(), 0.0f);
		ss = block_allreduce(ss, smem, SumOp(), 0.0f);
		float mean = 0.0f, var = ss / (float)a.d;
		if (a.layer) {
			float m = s / (float)a.d;
			mean = k0 + m;
			var = fmaxf(var - m * m, 0.0f);
		}
		float rstd = rsqrtf(var + a.eps);
		const T *src = res != NULL ? res : x;
		T *o = static_cast<T *>(a.out) + off[0];
		for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) {
			float y = (to_f32(src[j]) - mean) * rstd * to_f32(w[j]);
			o[j] = from_f32<T>(b != NULL ? y + to_f32(b[j]) : y);
		}
	}
}

template <typename T> tk_status norm_run(NormArgs &a, const tk_iter &it, cudaStream_t s)
{
	const void *ptrs[5] = { a.out, a.x, a.res, a.w, a.b };

	a.vec = tk_row_vec_ok(&it, a.d, sizeof(T), ptrs, 5);
	launch_begin();
	if (row_regs_fit(a.d, it.ndim, a.vec)) {
		RowShape sh = row_shape(a.d);
		TKC_ROW_LAUNCH(norm_reg, T, sh, a.vec, row_grid(a.rows, sh), s, a);
	} else {
		unsigned g = grid_persistent(a.rows, 1, 2);
		norm_stream<T><<<g, kStreamThreads, 0, s>>>(a);
	}
	return launch_status();
}

tk_status norm_launch(const tk_call *call, void *stream, int layer, int fused)
{
	int nw = fused ? 2 : 1;
	NormArgs a;
	tk_iter it;

	if (call->n_in < nw + 1 || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	const tk_tensor *x = &call->in[0], *out = &call->out[0], *w = &call->in[nw];
	const tk_tensor *res = fused ? &call->in[1] : NULL;
	const tk_tensor *b = layer && call->n_in > nw + 1 ? &call->in[nw + 1] : NULL;
	const tk_tensor *ts[5] = { out, x, w, res, b };
	const tk_tensor *rows[3] = { out, x, res };
	int n = 3;

	if (res != NULL)
		ts[n++] = res;
	if (b != NULL)
		ts[n++] = b;
	if (!tk_same_float_dtype(ts, n) || x->ndim < 1 || !tk_last_dim_packed(x) ||
	    !tk_last_dim_packed(out) || (res != NULL && !tk_last_dim_packed(res)))
		return TK_ERR_UNSUPPORTED;
	int64_t d = tk_last_dim(x);
	if (!tk_is_vector_of(w, d) || (b != NULL && !tk_is_vector_of(b, d)))
		return TK_ERR_UNSUPPORTED;
	if (tk_iter_rows(&it, rows, res != NULL ? 3 : 2) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (it.numel == 0 || d == 0)
		return TK_OK;
	a.out = out->data;
	a.x = x->data;
	a.res = res != NULL ? res->data : NULL;
	a.w = w->data;
	a.b = b != NULL ? b->data : NULL;
	a.rows = it.numel;
	a.d = d;
	a.p = plan_of(it);
	a.layer = layer;
	a.eps = (float)tk_param_num(call, 0, layer ? 1e-5 : 1e-6);
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (x->dtype) {
	case TK_F32:
		return norm_run<float>(a, it, s);
	case TK_F16:
		return norm_run<__half>(a, it, s);
	default:
		return norm_run<__nv_bfloat16>(a, it, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_rms_norm(const tk_call *call, void *stream)
{
	return norm_launch(call, stream, 0, 0);
}

extern "C" tk_status tk_cuda_layer_norm(const tk_call *call, void *stream)
{
	return norm_launch(call, stream, 1, 0);
}

extern "C" tk_status tk_cuda_fused_add_rms_norm(const tk_call *call, void *stream)
{
	return norm_launch(call, stream, 0, 1);
}

extern "C" tk_status tk_cuda_fused_add_layer_norm(const tk_call *call, void *stream)
{
	return norm_launch(call, stream, 1, 1);
}
