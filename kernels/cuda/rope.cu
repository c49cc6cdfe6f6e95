/*
 * rope.cu - rotary position embedding in place on q and k (see cpu/rope.c
 * for the definition). A block per token: it fills shared memory with the
 * token's cos and sin per pair (read from cos_sin_cache, or sincosf of
 * position * inverse frequency, the frequencies computed once per block
 * in double and rounded to f32 exactly as the CPU reference does), then
 * its threads rotate every head of q and k. With aligned heads a thread
 * moves 16-byte vectors: for neox one vector from each half of the
 * rotary dims, for gpt-j two adjacent vectors of interleaved pairs. A
 * token's cos/sin cache row is loaded while the token before it rotates.
 * Bytes: 2 * T * (Hq + Hk) * rotary_dim elements (dims past rotary_dim are
 * not touched) plus the cache rows.
 */
#include "cuda_common.cuh"

namespace
{

using namespace tkc;

constexpr int kRopeThreads = 256;
constexpr int kMaxHalf = 512; /* rotary_dim <= 1024 */
/* Resident blocks an SM (64 registers a thread); the persistent grid is that many. */
constexpr int kRopeBlocksPerSm = 4;

struct RopeArgs {
	void *q, *k;
	const void *pos;
	const void *cache;
	int64_t tokens, hq, hk;
	int64_t qs0, qs1, ks0, ks1; /* token and head strides */
	int64_t cache_rows, cache_stride;
	int rd, pos64, cache_dtype, has_cache;
	/* bytes of a token's q and k heads when packed and all rotated, else 0 */
	uint32_t qpf, kpf;
	double theta;
};

__device__ __forceinline__ float load_any(const void *p, int dt, int64_t i)
{
	if (dt == TK_F16)
		return __half2float(static_cast<const __half *>(p)[i]);
	if (dt == TK_BF16)
		return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
	return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ int64_t rope_pos(const RopeArgs &a, int64_t t)
{
	return a.pos64 ? static_cast<const int64_t *>(a.pos)[t]
	               : static_cast<const int32_t *>(a.pos)[t];
}

/* This thread's cos and sin values of cache row p (none when p is outside the cache). */
template <int CV>
__device__ __forceinline__ void rope_cache_load(const RopeArgs &a, int64_t p, int half,
                                                float (&cs)[CV], float (&sn)[CV])
{
	if (p < 0 || p >= a.cache_rows)
		return;
#pragma unroll
	for (int k = 0; k < CV; k++) {
		int i = (int)threadIdx.x + k * kRopeThreads;
		if (i < half) {
			cs[k] = load_any(a.cache, a.cache_dtype, p * a.cache_stride + i);
			sn[k] = load_any(a.cache, a.cache_dtype, p * a.cache_stride + half + i);
		}
	}
}

template <typename T, bool NEOX, bool VEC>
__device__ __forceinline__ void rope_unit(T *x, int c, int half, const float *cs, const float *sn)
{
	constexpr int N = VEC ? Vec<T>::N : 1;

	if constexpr (VEC && NEOX) {
		Vec<T> a = *reinterpret_cast<const Vec<T> *>(x + c * N);
		Vec<T> b = *reinterpret_cast<const Vec<T> *>(x + half + c * N);
		Vec<T> ra, rb;
#pragma unroll
		for (int e = 0; e < N; e++) {
			float x1 = to_f32(a.v[e]), x2 = to_f32(b.v[e]);
			float co = cs[c * N + e], si = sn[c * N + e];
			ra.v[e] = from_f32<T>(x1 * co - x2 * si);
			rb.v[e] = from_f32<T>(x2 * co + x1 * si);
		}
		*reinterpret_cast<Vec<T> *>(x + c * N) = ra;
		*reinterpret_cast<Vec<T> *>(x + half + c * N) = rb;
	} else if constexpr (VEC) {
		/* two adjacent vectors of interleaved pairs, both loaded before either is used */
		Vec<T> a[2], r;
#pragma unroll
		for (int h = 0; h < 2; h++)
			a[h] = *reinterpret_cast<const Vec<T> *>(x + (2 * c + h) * N);
#pragma unroll
		for (int h = 0; h < 2; h++) {
#pragma unroll
			for (int e = 0; e < N; e += 2) {
				int i = ((2 * c + h) * N + e) / 2;
				float x1 = to_f32(a[h].v[e]), x2 = to_f32(a[h].v[e + 1]);
				r.v[e] = from_f32<T>(x1 * cs[i] - x2 * sn[i]);
				r.v[e + 1] = from_f32<T>(x2 * cs[i] + x1 * sn[i]);
			}
			*reinterpret_cast<Vec<T> *>(x + (2 * c + h) * N) = r;
		}
	} else {
		int i1 = NEOX ? c : 2 * c, i2 = NEOX ? c + half : 2 * c + 1;
		float x1 = to_f32(x[i1]), x2 = to_f32(x[i2]);
		x[i1] = from_f32<T>(x1 * cs[c] - x2 * sn[c]);
		x[i2] = from_f32<T>(x2 * cs[c] + x1 * sn[c]);
	}
}

template <typename T, bool NEOX, bool VEC>
__global__ void __launch_bounds__(kRopeThreads, kRopeBlocksPerSm)
        rope_kernel(const __grid_constant__ RopeArgs a)
{
	__shared__ float inv[kMaxHalf], cs[kMaxHalf], sn[kMaxHalf];
	constexpr int N = VEC ? Vec<T>::N : 1;
	const int half = a.rd / 2;
	/* Units per head: a vector of each half (neox), two vectors of the span (gpt-j), or pairs. */
	const int upr = VEC ? (NEOX ? half / N : a.rd / (2 * N)) : half;
	const int units = (int)(a.hq + a.hk) * upr;

	/*
	 * Before the wait (pdl_enter): the first token's heads asked of the L2
	 * (l2_prefetch; every block of the persistent grid is in the first
	 * wave) and the frequencies, which read no memory. One token's rope
	 * 2.38 -> 1.78 us back to back on an H200.
	 */
	if (threadIdx.x == 0 && a.qpf != 0 && blockIdx.x < a.tokens)
		l2_prefetch(static_cast<const T *>(a.q) + blockIdx.x * a.qs0, a.qpf);
	if (threadIdx.x == 32 && a.kpf != 0 && blockIdx.x < a.tokens)
		l2_prefetch(static_cast<const T *>(a.k) + blockIdx.x * a.ks0, a.kpf);
	if (!a.has_cache) {
		for (int i = threadIdx.x; i < half; i += blockDim.x)
			inv[i] = (float)pow(a.theta, -(double)(2 * i) / (double)a.rd);
	}
	pdl_enter();
	/*
	 * A token's cache row is loaded into registers while the token before it
	 * rotates (the row's latency was a pause per token before), then goes to
	 * shared memory between the barriers. kMaxHalf / kRopeThreads values a
	 * thread at most.
	 */
	constexpr int CV = kMaxHalf / kRopeThreads;
	float ncs[CV], nsn[CV];
	int64_t t = blockIdx.x, p = t < a.tokens ? rope_pos(a, t) : 0;

	if (a.has_cache && t < a.tokens)
		rope_cache_load(a, p, half, ncs, nsn);
	for (; t < a.tokens; t += gridDim.x) {
		/* uniform across the block: a position outside the cache rotates nothing */
		const bool valid = !a.has_cache || (p >= 0 && p < a.cache_rows);
		__syncthreads(); /* the previous token's readers are done with cs/sn (and inv is ready) */
#pragma unroll
		for (int k = 0; k < CV; k++) {
			int i = threadIdx.x + k * kRopeThreads;
			if (i < half && a.has_cache) {
				cs[i] = ncs[k];
				sn[i] = nsn[k];
			} else if (i < half) {
				float si, co;
				sincosf((float)p * inv[i], &si, &co);
				cs[i] = co;
				sn[i] = si;
			}
		}
		const int64_t cur = t, next = t + gridDim.x;
		if (next < a.tokens) {
			p = rope_pos(a, next);
			if (a.has_cache)
				rope_cache_load(a, p, half, ncs, nsn);
		}
		__syncthreads();
		if (!valid)
			continue;
		for (int w = threadIdx.x; w < units; w += blockDim.x) {
			int h = w / upr, c = w - h * upr;
			T *x = h < a.hq ? static_cast<T *>(a.q) + cur * a.qs0 + h * a.qs1
			                : static_cast<T *>(a.k) + cur * a.ks0 + (h - a.hq) * a.ks1;
			rope_unit<T, NEOX, VEC>(x, c, half, cs, sn);
		}
	}
}

template <typename T, bool NEOX> tk_status rope_run(const RopeArgs &a, bool vec, cudaStream_t s)
{
	unsigned g = grid_persistent(a.tokens, 1, kRopeBlocksPerSm);

	launch_begin();
	if (vec)
		launch_pdl(rope_kernel<T, NEOX, true>, g, kRopeThreads, 0, s, a);
	else
		launch_pdl(rope_kernel<T, NEOX, false>, g, kRopeThreads, 0, s, a);
	return launch_status();
}

template <bool NEOX> tk_status rope_launch(const tk_call *call, void *stream)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *pos = &call->in[2];
	const tk_tensor *qk[2] = { q, k };
	RopeArgs a;

	if (call->n_in < 3 || !tk_same_float_dtype(qk, 2) || q->ndim != 3 || k->ndim != 3)
		return TK_ERR_UNSUPPORTED;
	if ((pos->dtype != TK_I32 && pos->dtype != TK_I64) || pos->ndim > 1)
		return TK_ERR_UNSUPPORTED;
	int64_t T_ = q->shape[0], D = q->shape[2];
	a.rd = (int)tk_param_num(call, 0, 128.0);
	a.theta = tk_param_num(call, 1, 10000.0);
	if (k->shape[0] != T_ || k->shape[2] != D || tk_numel(pos) != T_)
		return TK_ERR_UNSUPPORTED;
	if (a.rd < 2 || a.rd % 2 != 0 || a.rd > D || a.rd > 2 * kMaxHalf ||
	    !tk_last_dim_packed(q) || !tk_last_dim_packed(k))
		return TK_ERR_UNSUPPORTED;
	a.has_cache = call->n_in > 3;
	a.cache = NULL;
	a.cache_rows = a.cache_stride = 0;
	a.cache_dtype = TK_F32;
	if (a.has_cache) {
		const tk_tensor *c = &call->in[3];
		if (!tk_same_float_dtype(&c, 1) || c->ndim != 2 || c->shape[1] != a.rd ||
		    !tk_last_dim_packed(c))
			return TK_ERR_UNSUPPORTED;
		a.cache = c->data;
		a.cache_rows = c->shape[0];
		a.cache_stride = c->stride[0];
		a.cache_dtype = c->dtype;
	}
	if (T_ == 0 || q->shape[1] + k->shape[1] == 0)
		return TK_OK;
	a.q = q->data;
	a.k = k->data;
	a.pos = pos->data;
	a.pos64 = pos->dtype == TK_I64;
	a.tokens = T_;
	a.hq = q->shape[1];
	a.hk = k->shape[1];
	a.qs0 = q->stride[0];
	a.qs1 = q->stride[1];
	a.ks0 = k->stride[0];
	a.ks1 = k->stride[1];
	if (pos->ndim == 1 && pos->stride[0] != 1 && T_ > 1)
		return TK_ERR_UNSUPPORTED;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	size_t es = tk_dtype_size(q->dtype);
	int n = (int)(16 / es);
	bool vec = aligned16(a.q) && aligned16(a.k) && (a.rd / 2) % n == 0;
	const int64_t strides[4] = { a.qs0, a.qs1, a.ks0, a.ks1 };
	for (int i = 0; i < 4; i++) {
		if ((strides[i] * (int64_t)es) % 16 != 0)
			vec = false;
	}
	/* heads packed one after another and rotated whole: one span a token (up to 1 MiB) */
	const int64_t qb = a.hq * D * (int64_t)es, kb = a.hk * D * (int64_t)es;
	a.qpf = vec && a.rd == D && a.qs1 == D && qb <= (1 << 20) ? (uint32_t)qb : 0;
	a.kpf = vec && a.rd == D && a.ks1 == D && kb <= (1 << 20) ? (uint32_t)kb : 0;
	switch (q->dtype) {
	case TK_F32:
		return rope_run<float, NEOX>(a, vec, s);
	case TK_F16:
		return rope_run<__half, NEOX>(a, vec, s);
	default:
		return rope_run<__nv_bfloat16, NEOX>(a, vec, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_rope_neox(const tk_call *call, void *stream)
{
	return rope_launch<true>(call, stream);
}

extern "C" tk_status tk_cuda_rope_gptj(const tk_call *call, void *stream)
{
	return rope_launch<false>(call, stream);
}
