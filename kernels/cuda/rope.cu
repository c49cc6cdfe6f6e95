/*
 * rope.cu - rotary position embedding in place on q and k (see cpu/rope.c
 * for the definition). A block per token (for a few tokens several, the
 * token's heads dealt out among them): it fills shared memory with the
 * token's cos and sin per pair (read from cos_sin_cache, or sincosf of
 * position * inverse frequency, the frequencies computed once per block
 * in double and rounded to f32 exactly as the CPU reference does), then
 * its threads rotate every head of q and k. With aligned heads a thread
 * moves 16-byte vectors: for neox one vector from each half of the
 * rotary dims, for gpt-j two adjacent vectors of interleaved pairs. A
 * thread reads its first unit of a token before the token's cos and sin
 * are ready, and a token's cos/sin cache row is loaded while the token
 * before it rotates.
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
	int parts; /* blocks a token: its heads' units dealt out among them */
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

/*
 * What one unit reads: for neox one vector from each half of the rotary
 * dims, for gpt-j two adjacent vectors of interleaved pairs, or without
 * vectors the two elements of one pair.
 */
template <typename T, bool VEC> struct RopeIn {
	Vec<T> v[2];
};

template <typename T> struct RopeIn<T, false> {
	float v[2];
};

/* Where unit w of token t's heads starts: its head, and its index c there. */
template <typename T>
__device__ __forceinline__ T *rope_head(const RopeArgs &a, int64_t t, int w, int upr, int &c)
{
	int h = w / upr;
	c = w - h * upr;
	return h < a.hq ? static_cast<T *>(a.q) + t * a.qs0 + h * a.qs1
	                : static_cast<T *>(a.k) + t * a.ks0 + (h - a.hq) * a.ks1;
}

template <typename T, bool NEOX, bool VEC>
__device__ __forceinline__ RopeIn<T, VEC> rope_load(const T *x, int c, int half)
{
	constexpr int N = VEC ? Vec<T>::N : 1;
	RopeIn<T, VEC> in;

	if constexpr (VEC && NEOX) {
		in.v[0] = *reinterpret_cast<const Vec<T> *>(x + c * N);
		in.v[1] = *reinterpret_cast<const Vec<T> *>(x + half + c * N);
	} else if constexpr (VEC) {
#pragma unroll
		for (int h = 0; h < 2; h++)
			in.v[h] = *reinterpret_cast<const Vec<T> *>(x + (2 * c + h) * N);
	} else {
		in.v[0] = to_f32(x[NEOX ? c : 2 * c]);
		in.v[1] = to_f32(x[NEOX ? c + half : 2 * c + 1]);
	}
	return in;
}

/* Rotate one unit read by rope_load and store it back. */
template <typename T, bool NEOX, bool VEC>
__device__ __forceinline__ void rope_apply(T *x, int c, int half, const RopeIn<T, VEC> &in,
                                           const float *cs, const float *sn)
{
	constexpr int N = VEC ? Vec<T>::N : 1;

	if constexpr (VEC && NEOX) {
		Vec<T> ra, rb;
#pragma unroll
		for (int e = 0; e < N; e++) {
			float x1 = to_f32(in.v[0].v[e]), x2 = to_f32(in.v[1].v[e]);
			float co = cs[c * N + e], si = sn[c * N + e];
			ra.v[e] = from_f32<T>(x1 * co - x2 * si);
			rb.v[e] = from_f32<T>(x2 * co + x1 * si);
		}
		*reinterpret_cast<Vec<T> *>(x + c * N) = ra;
		*reinterpret_cast<Vec<T> *>(x + half + c * N) = rb;
	} else if constexpr (VEC) {
		Vec<T> r;
#pragma unroll
		for (int h = 0; h < 2; h++) {
#pragma unroll
			for (int e = 0; e < N; e += 2) {
				int i = ((2 * c + h) * N + e) / 2;
				float x1 = to_f32(in.v[h].v[e]), x2 = to_f32(in.v[h].v[e + 1]);
				r.v[e] = from_f32<T>(x1 * cs[i] - x2 * sn[i]);
				r.v[e + 1] = from_f32<T>(x2 * cs[i] + x1 * sn[i]);
			}
			*reinterpret_cast<Vec<T> *>(x + (2 * c + h) * N) = r;
		}
	} else {
		int i1 = NEOX ? c : 2 * c, i2 = NEOX ? c + half : 2 * c + 1;
		x[i1] = from_f32<T>(in.v[0] * cs[c] - in.v[1] * sn[c]);
		x[i2] = from_f32<T>(in.v[1] * cs[c] + in.v[0] * sn[c]);
	}
}

/*
 * EARLY: a token's units are dealt out over a.parts blocks, and each thread
 * reads its unit before the token's cos and sin are ready (decode; at most
 * a block an SM, so those kernels take the registers they want: under 64,
 * bf16 gpt-j spilled); else a block a token (a.parts is 1).
 */
template <typename T, bool NEOX, bool VEC, bool EARLY>
__global__ void __launch_bounds__(kRopeThreads, EARLY ? 1 : kRopeBlocksPerSm)
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
	const unsigned parts = EARLY ? (unsigned)a.parts : 1u;
	const int part = (int)(blockIdx.x % parts);
	const int64_t first = blockIdx.x / parts, tstep = gridDim.x / parts;
	const int ustep = (int)parts * blockDim.x;

	if (threadIdx.x == 0 && a.qpf != 0 && first < a.tokens)
		l2_prefetch(static_cast<const T *>(a.q) + first * a.qs0, a.qpf);
	if (threadIdx.x == 32 && a.kpf != 0 && first < a.tokens)
		l2_prefetch(static_cast<const T *>(a.k) + first * a.ks0, a.kpf);
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
	int64_t t = first, p = t < a.tokens ? rope_pos(a, t) : 0;

	if (a.has_cache && t < a.tokens)
		rope_cache_load(a, p, half, ncs, nsn);
	for (; t < a.tokens; t += tstep) {
		/*
		 * With a token's units over several blocks (a few tokens), this
		 * thread's unit is read now, before the token's position has arrived
		 * and its cos and sin are computed: one trip to memory instead of
		 * two. (Compiled apart: in the kernel of a block a token the
		 * early read, even when not taken, measured 5 to 13% slower at 128
		 * tokens.)
		 */
		const int w0 = part * blockDim.x + threadIdx.x;
		int c0 = 0;
		T *x0 = EARLY && w0 < units ? rope_head<T>(a, t, w0, upr, c0) : NULL;
		RopeIn<T, VEC> in0;
		if (x0 != NULL)
			in0 = rope_load<T, NEOX, VEC>(x0, c0, half);
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
		const int64_t cur = t, next = t + tstep;
		if (next < a.tokens) {
			p = rope_pos(a, next);
			if (a.has_cache)
				rope_cache_load(a, p, half, ncs, nsn);
		}
		__syncthreads();
		if (!valid)
			continue;
		if (x0 != NULL)
			rope_apply<T, NEOX, VEC>(x0, c0, half, in0, cs, sn);
		for (int w = x0 != NULL ? w0 + ustep : w0; w < units; w += ustep) {
			int c;
			T *x = rope_head<T>(a, cur, w, upr, c);
			rope_apply<T, NEOX, VEC>(x, c, half, rope_load<T, NEOX, VEC>(x, c, half),
			                         cs, sn);
		}
	}
}

template <typename T, bool NEOX> tk_status rope_run(RopeArgs &a, bool vec, cudaStream_t s)
{
	/* Fewer tokens than SMs (decode): a token's units dealt out over as many
	 * blocks as give each thread one, while they still fit one an SM (at 128
	 * tokens of 40 heads, two blocks a token, reading early, measured 2 to
	 * 12% slower than one); more: a block a token. */
	const int64_t n = vec ? Vec<T>::N : 1;
	const int64_t upr = vec ? (NEOX ? a.rd / 2 / n : a.rd / (2 * n)) : a.rd / 2;
	const int64_t per = ((a.hq + a.hk) * upr + kRopeThreads - 1) / kRopeThreads;
	a.parts = per > 1 && a.tokens * per <= (int64_t)sm_count() ? (int)per : 1;
	unsigned g = grid_persistent(a.tokens * a.parts, 1, kRopeBlocksPerSm);
	g = g / (unsigned)a.parts * (unsigned)a.parts;

	launch_begin();
	if (vec && a.parts > 1)
		launch_pdl(rope_kernel<T, NEOX, true, true>, g, kRopeThreads, 0, s, a);
	else if (vec)
		launch_pdl(rope_kernel<T, NEOX, true, false>, g, kRopeThreads, 0, s, a);
	else if (a.parts > 1)
		launch_pdl(rope_kernel<T, NEOX, false, true>, g, kRopeThreads, 0, s, a);
	else
		launch_pdl(rope_kernel<T, NEOX, false, false>, g, kRopeThreads, 0, s, a);
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
