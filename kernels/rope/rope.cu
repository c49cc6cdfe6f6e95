/*
 * rope.cu - rotary position embedding in place on q and k (see cpu/rope.c
 * for the definition). The units of all tokens (a unit: with aligned
 * heads, 16-byte vectors, for neox one vector from each half of the
 * rotary dims, for gpt-j two adjacent vectors of interleaved pairs; else
 * the two elements of one pair) are dealt out in order, a run of them a
 * block. A block asks for its units first, then fills shared memory with
 * the cos and sin of the few tokens it spans (read from cos_sin_cache, or
 * sincosf of position * inverse frequency, the frequencies computed once
 * per block in double and rounded to f32 exactly as the CPU reference
 * does) while they arrive, then rotates and stores them.
 * Bytes: 2 * T * (Hq + Hk) * rotary_dim elements (dims past rotary_dim are
 * not touched) plus the cache rows.
 */
#include "rowops.cuh" /* vec_launder */

namespace
{

using namespace tkc;

constexpr int kRopeThreads = 256;
constexpr int kMaxHalf = 512; /* rotary_dim <= 1024 */
/* Resident blocks an SM (64 registers a thread): at 4 units a thread, 128 KiB of loads in flight. */
constexpr int kRopeBlocksPerSm = 4;
/* cos (and sin) values of the tokens a block spans, and at most that many tokens */
constexpr int kTable = 2048;
constexpr int kTableTokens = 64;

struct RopeArgs {
	void *q, *k;
	const void *pos;
	const void *cache;
	int64_t tokens, hq, hk;
	int64_t qs0, qs1, ks0, ks1; /* token and head strides */
	int64_t cache_rows, cache_stride;
	int64_t total; /* units of all tokens */
	int rd, pos64, cache_dtype, has_cache;
	int upr, units; /* units a head, a token */
	int upr_shift;  /* log2(upr) when a power of two, else -1 */
	int half_shift; /* log2(rd / 2) when a power of two, else -1 */
	int span;       /* units a block (the last block fewer) */
	uint32_t wave;  /* blocks resident at once: the ones that prefetch */
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
__device__ __forceinline__ T *rope_head(const RopeArgs &a, int64_t t, int w, int &c)
{
	int h = a.upr_shift >= 0 ? w >> a.upr_shift : w / a.upr;
	c = w - h * a.upr;
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
		/* pair i of each half turns by angles c N + 2i and c N + 2i + 1 */
		float co[N], si[N];
		ld_floats<N>(co, cs + c * N);
		ld_floats<N>(si, sn + c * N);
		Vec<T> ra, rb;
#pragma unroll
		for (int i = 0; i < N / 2; i++) {
			const float2 x1 = vec_pair(in.v[0], i), x2 = vec_pair(in.v[1], i);
			const float c0 = co[2 * i], c1 = co[2 * i + 1], s0 = si[2 * i],
			            s1 = si[2 * i + 1];
			vec_set_pair(ra, i,
			             make_float2(x1.x * c0 - x2.x * s0, x1.y * c1 - x2.y * s1));
			vec_set_pair(rb, i,
			             make_float2(x2.x * c0 + x1.x * s0, x2.y * c1 + x1.y * s1));
		}
		*reinterpret_cast<Vec<T> *>(x + c * N) = ra;
		*reinterpret_cast<Vec<T> *>(x + half + c * N) = rb;
	} else if constexpr (VEC) {
		/* vector h holds pairs (2c + h) N / 2 .. + N / 2 - 1, each a pair of the vector */
#pragma unroll
		for (int h = 0; h < 2; h++) {
			float co[N / 2], si[N / 2];
			ld_floats<N / 2>(co, cs + (2 * c + h) * (N / 2));
			ld_floats<N / 2>(si, sn + (2 * c + h) * (N / 2));
			Vec<T> r;
#pragma unroll
			for (int i = 0; i < N / 2; i++) {
				const float2 f = vec_pair(in.v[h], i);
				vec_set_pair(r, i,
				             make_float2(f.x * co[i] - f.y * si[i],
				                         f.y * co[i] + f.x * si[i]));
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
 * A block rotates a.span consecutive units of the flattened (token, unit)
 * order (K a thread): it asks for all of its units first, then fills the
 * cos and sin of the tokens it spans (at most kTableTokens) while they
 * arrive, then rotates and stores them. No barrier a token and no thread
 * with more units than another (a block a token left 576 units of a
 * Llama 70B token over 256 threads: three rounds for some, two for others).
 */
template <typename T, bool NEOX, bool VEC, int K>
__global__ void __launch_bounds__(kRopeThreads, kRopeBlocksPerSm)
        rope_kernel(const __grid_constant__ RopeArgs a)
{
	__shared__ float inv[kMaxHalf];
	__shared__ __align__(16) float cs[kTable], sn[kTable];
	__shared__ unsigned char ok[kTableTokens];
	const int half = a.rd / 2;
	const int64_t base = (int64_t)blockIdx.x * a.span;
	const int64_t end = base + a.span < a.total ? base + a.span : a.total;
	int64_t rem;
	const int64_t t0 = divmod64(base, a.units, &rem);
	const int nt = (int)(divmod64(end - 1, a.units, &rem) - t0) + 1;

	/*
	 * Before the wait (pdl_enter): the first wave's tokens asked of the L2
	 * (l2_prefetch) and the frequencies, which read no memory.
	 */
	if (blockIdx.x < a.wave) {
		int i = (int)threadIdx.x;
		if (a.qpf != 0 && i < nt)
			l2_prefetch(static_cast<const T *>(a.q) + (t0 + i) * a.qs0, a.qpf);
		if (a.kpf != 0 && i >= 32 && i - 32 < nt)
			l2_prefetch(static_cast<const T *>(a.k) + (t0 + i - 32) * a.ks0, a.kpf);
	}
	if (!a.has_cache) {
		for (int i = threadIdx.x; i < half; i += kRopeThreads)
			inv[i] = (float)pow(a.theta, -(double)(2 * i) / (double)a.rd);
	}
	pdl_enter();

	RopeIn<T, VEC> in[K];
	int ws[K]; /* unit k's place in its token */
	/* byte k: unit k's token less t0 (under kTableTokens), or 0xff for none */
	uint32_t offs = 0xffffffffu;
	static_assert(K <= 4 && kTableTokens < 0xff, "unit tokens packed a byte each");
	const int w0 = (int)(base - t0 * a.units) + (int)threadIdx.x;
#pragma unroll
	for (int k = 0; k < K; k++) {
		if (base + threadIdx.x + k * kRopeThreads >= end)
			continue;
		/* the unit's token (t0 + j) and place w in it: a block spans at most a few tokens */
		int w = w0 + k * kRopeThreads, j = 0;
		if (a.units >= kRopeThreads) {
			while (w >= a.units) {
				w -= a.units;
				j++;
			}
		} else {
			j = w / a.units;
			w -= j * a.units;
		}
		int c;
		const T *x = rope_head<T>(a, t0 + j, w, c);
		ws[k] = w;
		offs ^= (0xffu ^ (uint32_t)j) << (8 * k);
		in[k] = rope_load<T, NEOX, VEC>(x, c, half);
	}
	/* The cos and sin of the tokens spanned; a position outside the cache rotates nothing. */
	if (!a.has_cache)
		__syncthreads(); /* inv is ready (after the loads are asked for) */
	for (int i = threadIdx.x; i < nt * half; i += kRopeThreads) {
		const int j = a.half_shift >= 0 ? i >> a.half_shift : i / half, e = i - j * half;
		const int64_t p = rope_pos(a, t0 + j);
		float co = 0.0f, si = 0.0f;
		if (a.has_cache) {
			const bool valid = p >= 0 && p < a.cache_rows;
			if (e == 0)
				ok[j] = valid;
			if (valid) {
				co = load_any(a.cache, a.cache_dtype, p * a.cache_stride + e);
				si = load_any(a.cache, a.cache_dtype,
				              p * a.cache_stride + half + e);
			}
		} else {
			if (e == 0)
				ok[j] = 1;
			sincosf((float)p * inv[e], &si, &co);
		}
		cs[i] = co;
		sn[i] = si;
	}
	__syncthreads();
	if constexpr (VEC) { /* widened only here, not held as floats over the table */
#pragma unroll
		for (int k = 0; k < K; k++) {
			vec_launder(in[k].v[0]);
			vec_launder(in[k].v[1]);
		}
	}
#pragma unroll
	for (int k = 0; k < K; k++) {
		const uint32_t o = (offs >> (8 * k)) & 0xffu;
		if (o == 0xffu || !ok[o])
			continue;
		int c;
		T *x = rope_head<T>(a, t0 + o, ws[k], c);
		rope_apply<T, NEOX, VEC>(x, c, half, in[k], cs + o * half, sn + o * half);
	}
}

/*
 * Units a thread: 4 once the grid holds 4 blocks an SM of them, else 1 (a
 * few tokens: more blocks a token). Measured on an H200 at 4096 tokens of
 * Llama 70B heads, 4 units a thread against 2 and 1: 42.5, 44.2 and
 * 59.0 us (each block fills its table and waits at its barrier once).
 */
template <typename T, bool NEOX, bool VEC> cudaError_t rope_spread(RopeArgs &a, cudaStream_t s)
{
	const int64_t wide = (int64_t)4 * kRopeThreads * sm_count() * kRopeBlocksPerSm;
	const bool four = a.total >= wide;
	void (*kernel)(RopeArgs) =
	        four ? rope_kernel<T, NEOX, VEC, 4> : rope_kernel<T, NEOX, VEC, 1>;
	/* a block spans at most kTableTokens tokens, and their cos and sin fit the table */
	const int half = a.rd / 2;
	const int64_t tmax = kTable / half < kTableTokens ? kTable / half : kTableTokens;
	int64_t span = (four ? 4 : 1) * kRopeThreads;
	if (span > (tmax - 1) * a.units)
		span = (tmax - 1) * a.units;
	a.span = (int)span;
	const int64_t blocks = (a.total + span - 1) / span;
	if (blocks > 0x7fffffff)
		return cudaErrorInvalidConfiguration;
	a.wave = resident_blocks((const void *)kernel, kRopeThreads);
	return launch_pdl(kernel, (unsigned)blocks, kRopeThreads, 0, s, a);
}

template <typename T, bool NEOX> tk_status rope_run(RopeArgs &a, bool vec, cudaStream_t s)
{
	const int64_t n = vec ? Vec<T>::N : 1;
	const int64_t upr = vec ? (NEOX ? a.rd / 2 / n : a.rd / (2 * n)) : a.rd / 2;
	const int64_t units = (a.hq + a.hk) * upr;

	if (units > 0x7fffffff || a.tokens > INT64_MAX / units)
		return TK_ERR_UNSUPPORTED;
	a.upr = (int)upr;
	a.units = (int)units;
	a.upr_shift = (upr & (upr - 1)) == 0 ? __builtin_ctzll((unsigned long long)upr) : -1;
	const int half = a.rd / 2;
	a.half_shift = (half & (half - 1)) == 0 ? __builtin_ctz((unsigned)half) : -1;
	a.total = a.tokens * units;
	launch_begin();
	cudaError_t e = vec ? rope_spread<T, NEOX, true>(a, s) : rope_spread<T, NEOX, false>(a, s);
	if (e == cudaErrorInvalidConfiguration)
		return TK_ERR_UNSUPPORTED;
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
