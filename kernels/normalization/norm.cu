/*
 * norm.cu - rms_norm, layer_norm and their fused-residual forms over the
 * last dim (see cpu/norm.c for the exact definitions), f32 arithmetic.
 *
 * Rows are read once into registers (rowops.cuh: raw 16-byte vectors for
 * aligned rows, up to 524288 bf16 wide over a cluster; floats for the
 * others, up to 4096): the fused forms add the residual, round the sum to
 * the dtype, store it back and keep it in registers; layer_norm takes the
 * mean and then the variance of the values in registers (two reductions,
 * no cancellation); then each thread writes its vectors scaled by the
 * weight (and bias). Bytes per row: 2 d (norm) or 4 d (fused) elements,
 * plus the weight once from L2. Rows no register kernel holds: a block
 * per row, one pass for the statistics (shifted sums; the fused forms
 * store the residual there), a second to write.
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
	int c; /* blocks per row (a cluster) of the vector kernel */
	float eps;
	float inv_d;   /* 1 / d, rounded once on the host */
	uint32_t wave; /* blocks that prefetch their first rows (vec_launch sets it) */
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
	pdl_enter();
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

/*
 * Sums over this thread's vectors of a held row: of x (SQ false), or of
 * (x - shift)^2 (SQ true), in two chains.
 */
template <typename T, int V, bool SQ>
__device__ __forceinline__ float norm_vec_sum(const Vec<T> (&x)[V], int nvec, int rank, float shift)
{
	float2 s = make_float2(0.0f, 0.0f);

#pragma unroll
	for (int k = 0; k < V; k++) {
		if (vec_slot<V>(rank, k) >= nvec)
			continue;
#pragma unroll
		for (int i = 0; i < Vec<T>::N / 2; i++) {
			float2 f = vec_pair(x[k], i);
			if constexpr (SQ) {
				float cx = f.x - shift, cy = f.y - shift;
				s.x += cx * cx;
				s.y += cy * cy;
			} else {
				s.x += f.x;
				s.y += f.y;
			}
		}
	}
	return s.x + s.y;
}

/*
 * Vectors k0 .. k0 + C - 1 of this thread's share of a row (the slots of
 * vec_row_load, zero past the end), all loads issued before any use.
 */
template <typename T, int V, int C>
__device__ __forceinline__ void vec_chunk_load(Vec<T> (&x)[C], const T *row, int nvec, int rank,
                                               int k0)
{
#pragma unroll
	for (int c = 0; c < C; c++) {
		int j = vec_slot<V>(rank, k0 + c);
		if (j < nvec)
			x[c] = vec_ld(row + (int64_t)j * Vec<T>::N);
		else
			x[c] = Vec<T>{};
	}
}

/*
 * x += res, rounded to T as the op defines, and stored back to res; the
 * residual read C vectors at a time.
 */
template <typename T, int V, int C>
__device__ __forceinline__ void norm_vec_residual(Vec<T> (&x)[V], T *res, int nvec, int rank)
{
	constexpr int N = Vec<T>::N;

#pragma unroll
	for (int k0 = 0; k0 < V; k0 += C) {
		Vec<T> rv[C];
		vec_chunk_load<T, V, C>(rv, res, nvec, rank, k0);
#pragma unroll
		for (int c = 0; c < C; c++) {
			int j = vec_slot<V>(rank, k0 + c);
			if (j >= nvec)
				continue;
#pragma unroll
			for (int i = 0; i < N / 2; i++) {
				float2 u = vec_pair(x[k0 + c], i), v = vec_pair(rv[c], i);
				vec_set_pair(x[k0 + c], i, make_float2(u.x + v.x, u.y + v.y));
			}
			vec_st(res + (int64_t)j * N, x[k0 + c]);
		}
	}
}

/* One output vector: (x - mean) * rstd * w (+ b), a pair at a time. */
template <typename T>
__device__ __forceinline__ Vec<T> norm_vec_out(const Vec<T> &x, const Vec<T> &w, const Vec<T> &b,
                                               bool bias, float mean, float rstd)
{
	Vec<T> y;

#pragma unroll
	for (int i = 0; i < Vec<T>::N / 2; i++) {
		float2 f = vec_pair(x, i), g = vec_pair(w, i);
		float2 z = make_float2((f.x - mean) * rstd * g.x, (f.y - mean) * rstd * g.y);
		if (bias) {
			float2 c = vec_pair(b, i);
			z.x += c.x;
			z.y += c.y;
		}
		vec_set_pair(y, i, z);
	}
	return y;
}

/*
 * The vector kernel (rowops.cuh). Values convert a pair at a time (one
 * packed conversion per output pair): the kernel is bound by instruction
 * issue, not memory. The weight (and bias) loads are independent of the
 * reduction and come from L2; loaded in the write loop each vector's
 * product waited on its own load (the kernel stalled on them). So
 * rms_norm loads its weight with the row up to V = 4, and so does
 * layer_norm (with its bias) at V = 1, the shape of a few rows, where a
 * second trip to L2 after the reductions is most of a decode-size call's
 * time; the fused forms ask for them before the residual, not after.
 * Wider layer_norm rows load C vectors of weight and bias at a time after
 * the reduction, all of a chunk before its first use (C = 2 at V = 4: all
 * four with the bias spilled f32 under 64 registers; holding them with
 * the row at V = 2 made 2048 x 4096 bf16 slower). At V = 8 the row alone
 * is half of the 64 registers: the residual, weight and bias come a
 * vector at a time (C = 1; more spilled). The fused forms, which hold
 * the residual too, get up to 128 registers at V = 4 (they spill under
 * 64).
 */
template <typename T, int V, bool LAYER, bool FUSED>
__global__ void __launch_bounds__(V == 4 ? 512 : 1024, V == 4 ? (FUSED ? 1 : 2) : 1)
        norm_vec(const __grid_constant__ NormArgs a)
{
	const RowPlace pl = row_place(a.c);

	vec_row_prefetch<T, V>(static_cast<const T *>(a.x), a.p.stride[1][0], a.rows, a.d, pl,
	                       a.wave);
	if constexpr (FUSED)
		vec_row_prefetch<T, V>(static_cast<const T *>(a.res), a.p.stride[2][0], a.rows, a.d,
		                       pl, a.wave);
	pdl_enter();
	__shared__ float smem[8 * 32 + 1];
	constexpr int N = Vec<T>::N;
	constexpr bool pre = (V <= 4 && !LAYER) || V == 1;
	constexpr int C = V == 8 ? 1 : (LAYER && V == 4 ? 2 : V);
	const T *w = static_cast<const T *>(a.w);
	const T *b = LAYER ? static_cast<const T *>(a.b) : NULL;
	const float inv_d = a.inv_d;

	for (int64_t rbk = pl.first; rbk * blockDim.y < a.rows; rbk += pl.step) {
		int64_t r = rbk * blockDim.y + threadIdx.y;
		int nvec = r < a.rows ? (int)(a.d / N) : 0; /* an idle row loads nothing */
		int64_t rr = r < a.rows ? r : 0;
		Vec<T> x[V], wpre[pre ? V : 1], bpre[pre && LAYER ? V : 1];

		vec_row_load<T, V>(x, static_cast<const T *>(a.x) + rr * a.p.stride[1][0], nvec,
		                   pl.rank);
		if constexpr (pre) {
			vec_row_load<T, V>(wpre, w, nvec, pl.rank);
			if constexpr (LAYER) /* zeros without a bias */
				vec_row_load<T, V>(bpre, b, b != NULL ? nvec : 0, pl.rank);
		}
		if constexpr (FUSED)
			norm_vec_residual<T, V, C>(
			        x, static_cast<T *>(a.res) + rr * a.p.stride[2][0], nvec, pl.rank);
		float mean = 0.0f;
		if constexpr (LAYER) {
			float sum = norm_vec_sum<T, V, false>(x, nvec, pl.rank, 0.0f);
			mean = vec_allreduce(sum, smem, SumOp(), 0.0f, a.c) * inv_d;
			vec_launder(x);
		}
		float ss = vec_allreduce(norm_vec_sum<T, V, true>(x, nvec, pl.rank, mean), smem,
		                         SumOp(), 0.0f, a.c);
		const float rstd = rsqrtf(ss * inv_d + a.eps);
		vec_launder(x);
		if constexpr (pre) {
			vec_launder(wpre);
			if constexpr (LAYER)
				vec_launder(bpre);
		}
		T *o = static_cast<T *>(a.out) + rr * a.p.stride[0][0];
#pragma unroll
		for (int k0 = 0; k0 < V; k0 += C) {
			Vec<T> wv[C], bv[LAYER ? C : 1];
			if (vec_slot<V>(pl.rank, k0) >= nvec)
				break; /* the later slots are past the end too */
			if constexpr (pre) {
#pragma unroll
				for (int c = 0; c < C; c++) {
					wv[c] = wpre[k0 + c];
					if constexpr (LAYER)
						bv[c] = bpre[k0 + c];
				}
			} else {
				vec_chunk_load<T, V, C>(wv, w, nvec, pl.rank, k0);
				if constexpr (LAYER) {
					if (b != NULL)
						vec_chunk_load<T, V, C>(bv, b, nvec, pl.rank, k0);
				}
			}
#pragma unroll
			for (int c = 0; c < C; c++) {
				int j = vec_slot<V>(pl.rank, k0 + c);
				if (j < nvec)
					vec_st(o + (int64_t)j * N,
					       norm_vec_out(x[k0 + c], wv[c], bv[LAYER ? c : 0],
					                    b != NULL, mean, rstd));
			}
		}
	}
}

/* Rows no register kernel holds: a block per row, two passes. */
template <typename T>
__global__ void __launch_bounds__(kStreamThreads) norm_stream(const __grid_constant__ NormArgs a)
{
	pdl_enter();
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

/*
 * Rows of at most this many bytes in all prefetch (vec_row_prefetch): on an
 * H200 that took rms_norm of one row from 1.52 to 1.37 us back to back and
 * layer_norm of 2048 x 4096 bf16 from 60% to 64% of copy, but made the
 * norms of 56 and 128 MiB 1 to 2% slower (their ramp is a small share, and
 * the early reads compete with the kernel before's last blocks).
 */
constexpr int64_t kNormPrefetchMax = (int64_t)32 << 20;

template <typename T, int V>
cudaError_t norm_vec_kind(VecShape sh, const NormArgs &a, cudaStream_t s)
{
	const bool pf = a.rows * a.d * (int64_t)sizeof(T) <= kNormPrefetchMax;

	if (a.layer)
		return a.res != NULL
		               ? vec_launch(norm_vec<T, V, true, true>, sh, a.rows, s, a, pf)
		               : vec_launch(norm_vec<T, V, true, false>, sh, a.rows, s, a, pf);
	return a.res != NULL ? vec_launch(norm_vec<T, V, false, true>, sh, a.rows, s, a, pf)
	                     : vec_launch(norm_vec<T, V, false, false>, sh, a.rows, s, a, pf);
}

/* The vector kernel for the shape's vectors per thread and the op's form. */
template <typename T> cudaError_t norm_vec_launch(VecShape sh, const NormArgs &a, cudaStream_t s)
{
	switch (sh.v) {
	case 1:
		return norm_vec_kind<T, 1>(sh, a, s);
	case 2:
		return norm_vec_kind<T, 2>(sh, a, s);
	case 4:
		return norm_vec_kind<T, 4>(sh, a, s);
	default:
		return norm_vec_kind<T, 8>(sh, a, s);
	}
}

template <typename T> tk_status norm_run(NormArgs &a, const tk_iter &it, cudaStream_t s)
{
	const void *ptrs[5] = { a.out, a.x, a.res, a.w, a.b };

	a.vec = tk_row_vec_ok(&it, a.d, sizeof(T), ptrs, 5);
	launch_begin();
	if (vec_rows_fit(a.d, sizeof(T), it.ndim, a.vec)) {
		/* The fused forms hold the residual too; layer_norm a second reduction's
		 * values: both keep the shapes that do not spill (rowops.cuh). */
		VecShape sh = vec_shape(a.d / Vec<T>::N, a.rows, a.res != nullptr, a.layer != 0);
		a.c = sh.c;
		if (norm_vec_launch<T>(sh, a, s) != cudaSuccess)
			return TK_ERR_LAUNCH;
	} else if (row_scalar_fits(a.d, it.ndim)) {
		RowShape sh = row_shape(a.d);
		TKC_ROW_LAUNCH_SCALAR(norm_reg, T, sh, row_grid(a.rows, sh), s, a);
	} else {
		unsigned g = grid_persistent(a.rows, 1, 2);
		launch_pdl(norm_stream<T>, g, kStreamThreads, 0, s, a);
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
	a.inv_d = 1.0f / (float)d;
	a.p = plan_of(it);
	a.layer = layer;
	a.c = 1;
	a.wave = 0;
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
