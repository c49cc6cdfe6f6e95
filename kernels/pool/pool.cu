/*
 * pool.cu - max and average pooling over 1 to 3 spatial dims (see
 * cpu/pool.c for the semantics; tk_pool_parse reads the call for both).
 * The common 2-wide, stride-2 window (every vision and audio stem) has its
 * own kernel, pool2x: four outputs per thread, all taps loaded before any
 * is used, a window row's two taps read as one 4- or 8-byte load. Other
 * windows: a thread per output, outputs of adjacent threads adjacent
 * along the last dim, so a warp's taps of one window row fall in a few
 * contiguous sectors; the index split uses 32-bit divisions when the
 * output count fits. Bytes: (|x| + |out|) * elem size.
 */
#include <string.h>

#include "cuda_common.cuh"

namespace
{

using namespace tkc;

struct PoolArgs {
	tk_pool pl;
	void *out;
	const void *x;
	int64_t total;
};

/* i / n and i % n; 32-bit when the whole index space fits. */
template <bool SMALL> __device__ __forceinline__ int64_t split(int64_t &i, int64_t n)
{
	if constexpr (SMALL) {
		uint32_t q = (uint32_t)i / (uint32_t)n;
		uint32_t r = (uint32_t)i - q * (uint32_t)n;
		i = q;
		return r;
	} else {
		int64_t q = i / n, r = i - q * n;
		i = q;
		return r;
	}
}

template <typename T, bool SMALL> __global__ void pool_kernel(const __grid_constant__ PoolArgs a)
{
	pdl_enter();
	const tk_pool &pl = a.pl;
	const T *x = static_cast<const T *>(a.x);
	T *out = static_cast<T *>(a.out);

	for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < a.total;
	     idx += (int64_t)gridDim.x * blockDim.x) {
		int64_t i = idx, o[3];
		o[2] = split<SMALL>(i, pl.out[2]);
		o[1] = split<SMALL>(i, pl.out[1]);
		o[0] = split<SMALL>(i, pl.out[0]);
		int64_t c = split<SMALL>(i, pl.c), n = i;
		const T *xb = x + n * pl.xs[0] + c * pl.xs[1];
		int64_t lo[3], hi[3], padded = 1, inside = 1;
		for (int d = 0; d < 3; d++) {
			lo[d] = o[d] * pl.s[d] - pl.p[d];
			hi[d] = lo[d] + (pl.k[d] - 1) * pl.dil[d] + 1;
			int64_t end = min(hi[d], pl.in[d] + pl.p[d]);
			padded *= end - lo[d];
		}
		float acc = pl.is_max ? -INFINITY : 0.0f;
		for (int64_t za = lo[0]; za < hi[0]; za += pl.dil[0]) {
			if (za < 0 || za >= pl.in[0])
				continue;
			for (int64_t zb = lo[1]; zb < hi[1]; zb += pl.dil[1]) {
				if (zb < 0 || zb >= pl.in[1])
					continue;
				const T *row = xb + za * pl.xs[2] + zb * pl.xs[3];
				for (int64_t zc = lo[2]; zc < hi[2]; zc += pl.dil[2]) {
					if (zc < 0 || zc >= pl.in[2])
						continue;
					float v = to_f32(row[zc]);
					if (!pl.is_max)
						acc += v;
					else if ((v > acc || v != v) && acc == acc)
						acc = v; /* the first NaN sticks, as in PyTorch */
				}
			}
		}
		if (!pl.is_max) {
			for (int d = 0; d < 3; d++)
				inside *= min(hi[d], pl.in[d]) - max(lo[d], (int64_t)0);
			acc /= (float)(pl.count_include_pad ? padded : inside);
		}
		out[n * pl.os[0] + c * pl.os[1] + o[0] * pl.os[2] + o[1] * pl.os[3] +
		    o[2] * pl.os[4]] = from_f32<T>(acc);
	}
}

/* Two adjacent elements of a row as floats: one 4- or 8-byte load when aligned. */
template <typename T, bool PAIRS>
__device__ __forceinline__ void load_pair(const T *p, float &a, float &b)
{
	if constexpr (PAIRS && sizeof(T) == 2) {
		uint32_t u = *reinterpret_cast<const uint32_t *>(p);
		T lo, hi;
		memcpy(&lo, &u, 2);
		u >>= 16;
		memcpy(&hi, &u, 2);
		a = to_f32(lo);
		b = to_f32(hi);
	} else if constexpr (PAIRS) {
		float2 v = *reinterpret_cast<const float2 *>(p);
		a = v.x;
		b = v.y;
	} else {
		a = to_f32(p[0]);
		b = to_f32(p[1]);
	}
}

/*
 * The common window: 2 along every spatial dim, stride 2, no padding, no
 * dilation, every tap inside the input. Each thread takes four outputs a
 * block-width apart and issues all their loads (2^(NSP-1) row pairs each)
 * before it reduces them, so enough bytes are in flight to reach the
 * bandwidth.
 */
template <typename T, bool MAX, int NSP, bool PAIRS>
__global__ void __launch_bounds__(256) pool2x(const __grid_constant__ PoolArgs a)
{
	pdl_enter();
	constexpr int U = 4, R = 1 << (NSP - 1);
	const tk_pool &pl = a.pl;
	const T *x = static_cast<const T *>(a.x);
	T *out = static_cast<T *>(a.out);
	const int64_t tile = (int64_t)blockDim.x * U;

	for (int64_t base = (int64_t)blockIdx.x * tile; base < a.total; base += gridDim.x * tile) {
		float v[U][2 * R];
		int64_t oo[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t i = base + u * blockDim.x + threadIdx.x, o[3];
			if (i >= a.total)
				continue;
			o[2] = split<true>(i, pl.out[2]);
			o[1] = split<true>(i, pl.out[1]);
			o[0] = split<true>(i, pl.out[0]);
			int64_t c = split<true>(i, pl.c), n = i;
			const T *xb = x + n * pl.xs[0] + c * pl.xs[1] + 2 * o[2];
			oo[u] = n * pl.os[0] + c * pl.os[1] + o[0] * pl.os[2] + o[1] * pl.os[3] +
			        o[2] * pl.os[4];
#pragma unroll
			for (int r = 0; r < R; r++) {
				/* row r: bit 0 the h tap, bit 1 the d tap (for 3 dims) */
				int64_t zh = NSP >= 2 ? 2 * o[1] + (r & 1) : 0;
				int64_t zd = NSP == 3 ? 2 * o[0] + (r >> 1) : 0;
				load_pair<T, PAIRS>(xb + zd * pl.xs[2] + zh * pl.xs[3], v[u][2 * r],
				                    v[u][2 * r + 1]);
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t i = base + u * blockDim.x + threadIdx.x;
			if (i >= a.total)
				continue;
			float acc = v[u][0];
#pragma unroll
			for (int k = 1; k < 2 * R; k++) {
				if (MAX)
					acc = (v[u][k] > acc || v[u][k] != v[u][k]) && acc == acc
					              ? v[u][k]
					              : acc;
				else
					acc += v[u][k];
			}
			out[oo[u]] = from_f32<T>(MAX ? acc : acc / (float)(2 * R));
		}
	}
}

/*
 * pool2x over 16-byte vectors: a unit is N = 16 / sizeof(T) adjacent
 * outputs of one output row, read as two vectors per window row (the 2N
 * taps) and written as one. U units per thread, so each has 8 loads in
 * flight whatever the number of spatial dims. The taps are folded in the
 * order pool2x uses (row by row, left then right). FLAT (one or two
 * spatial dims, x and out packed, x exactly twice out along each): in one
 * dim output i's taps are x[2i] and x[2i + 1], so a unit needs no index
 * arithmetic; in two, output row R = i / OW reads x rows 2R and 2R + 1,
 * one division (four 32-bit divisions a unit otherwise, most of the
 * instructions of a bf16 unit).
 */
template <typename T, bool MAX, int NSP, bool FLAT>
__global__ void __launch_bounds__(256) pool2x_vec(const __grid_constant__ PoolArgs a)
{
	pdl_enter();
	constexpr int N = Vec<T>::N, R = 1 << (NSP - 1), U = 4 / R;
	const tk_pool &pl = a.pl;
	const T *x = static_cast<const T *>(a.x);
	T *out = static_cast<T *>(a.out);
	const int64_t units = a.total / N, tile = (int64_t)blockDim.x * U;

	for (int64_t base = (int64_t)blockIdx.x * tile; base < units; base += gridDim.x * tile) {
		Vec<T> v[U][2 * R];
		int64_t oo[U];
#pragma unroll
		for (int u = 0; u < U; u++) {
			int64_t i = (base + u * blockDim.x + threadIdx.x) * N, o[3];
			if (i >= a.total)
				continue;
			if constexpr (FLAT) {
				static_assert(NSP <= 2, "one or two spatial dims");
				const T *p = x + 2 * i;
				oo[u] = i;
				if constexpr (NSP == 2) {
					int64_t row = i, ow = split<true>(row, pl.out[2]);
					p = x + 2 * row * pl.in[2] + 2 * ow;
				}
#pragma unroll
				for (int r = 0; r < R; r++) {
					v[u][2 * r] =
					        *reinterpret_cast<const Vec<T> *>(p + r * pl.in[2]);
					v[u][2 * r + 1] = *reinterpret_cast<const Vec<T> *>(
					        p + r * pl.in[2] + N);
				}
				continue;
			}
			o[2] = split<true>(i, pl.out[2]);
			o[1] = split<true>(i, pl.out[1]);
			o[0] = split<true>(i, pl.out[0]);
			int64_t c = split<true>(i, pl.c), n = i;
			const T *xb = x + n * pl.xs[0] + c * pl.xs[1] + 2 * o[2];
			oo[u] = n * pl.os[0] + c * pl.os[1] + o[0] * pl.os[2] + o[1] * pl.os[3] +
			        o[2];
#pragma unroll
			for (int r = 0; r < R; r++) {
				int64_t zh = NSP >= 2 ? 2 * o[1] + (r & 1) : 0;
				int64_t zd = NSP == 3 ? 2 * o[0] + (r >> 1) : 0;
				const T *p = xb + zd * pl.xs[2] + zh * pl.xs[3];
				v[u][2 * r] = *reinterpret_cast<const Vec<T> *>(p);
				v[u][2 * r + 1] = *reinterpret_cast<const Vec<T> *>(p + N);
			}
		}
#pragma unroll
		for (int u = 0; u < U; u++) {
			if ((base + u * blockDim.x + threadIdx.x) * N >= a.total)
				continue;
			Vec<T> y;
#pragma unroll
			for (int e = 0; e < N; e++) {
				/* output e's taps: elements 2e, 2e + 1 of each window row */
				const int h = (2 * e) / N, k = (2 * e) % N;
				float acc = 0.0f;
#pragma unroll
				for (int r = 0; r < R; r++) {
#pragma unroll
					for (int t = 0; t < 2; t++) {
						float w = to_f32(v[u][2 * r + h].v[k + t]);
						if (r == 0 && t == 0)
							acc = w;
						else if (MAX)
							acc = (w > acc || w != w) && acc == acc
							              ? w
							              : acc;
						else
							acc += w;
					}
				}
				y.v[e] = from_f32<T>(MAX ? acc : acc / (float)(2 * R));
			}
			*reinterpret_cast<Vec<T> *>(out + oo[u]) = y;
		}
	}
}

/*
 * Whether pool2x_vec can take the call: output rows a whole number of
 * vectors, packed, and every row start of x and out 16-byte aligned.
 */
static bool pool2x_vec_ok(const PoolArgs &a, size_t es)
{
	const tk_pool &pl = a.pl;
	const int64_t n = (int64_t)(16 / es);

	if (pl.out[2] % n != 0 || pl.os[4] != 1 || !aligned16(a.x) || !aligned16(a.out))
		return false;
	for (int d = 0; d < 4; d++) {
		if ((pl.xs[d] * (int64_t)es) % 16 != 0 || (pl.os[d] * (int64_t)es) % 16 != 0)
			return false;
	}
	return true;
}

/* Whether a tensor of dims (n, c, sizes[3 - nsp ..]) with strides st is packed. */
static bool pool_packed(const tk_pool &pl, const int64_t *sizes, const int64_t *st, int nsp)
{
	int64_t want = 1;

	for (int d = 2; d >= 3 - nsp; d--) {
		if (sizes[d] > 1 && st[2 + d] != want)
			return false;
		want *= sizes[d];
	}
	if (pl.c > 1 && st[1] != want)
		return false;
	return pl.n <= 1 || st[0] == want * pl.c;
}

/*
 * Whether pool2x_vec may take a call as FLAT: one or two spatial dims, x
 * and out packed, x exactly twice out along each.
 */
static bool pool2x_flat_ok(const PoolArgs &a, int nsp)
{
	const tk_pool &pl = a.pl;

	if (nsp > 2)
		return false;
	for (int d = 3 - nsp; d < 3; d++) {
		if (pl.in[d] != 2 * pl.out[d])
			return false;
	}
	return pool_packed(pl, pl.in, pl.xs, nsp) && pool_packed(pl, pl.out, pl.os, nsp);
}

/* Whether the call is pool2x's case, and whether its taps pair up aligned. */
static bool pool2x_ok(const PoolArgs &a, int nsp, size_t es, bool *pairs)
{
	const tk_pool &pl = a.pl;

	if (a.total >= ((int64_t)1 << 31))
		return false;
	for (int d = 3 - nsp; d < 3; d++) {
		if (pl.k[d] != 2 || pl.s[d] != 2 || pl.p[d] != 0 || pl.dil[d] != 1)
			return false;
		if (2 * pl.out[d] > pl.in[d]) /* a ceil_mode window past the end */
			return false;
	}
	/* Pairs start at even columns: aligned when every other stride is even too. */
	*pairs = ((uintptr_t)a.x % (2 * es)) == 0;
	for (int d = 0; d < 4; d++) {
		if (pl.xs[d] % 2 != 0)
			*pairs = false;
	}
	return true;
}

template <typename T, bool MAX, int NSP>
static void pool2x_launch(const PoolArgs &a, bool pairs, cudaStream_t s)
{
	unsigned g = grid_persistent(a.total, 256 * 4, 8);

	if (pool2x_vec_ok(a, sizeof(T))) {
		int64_t per_block = 256 * (4 >> (NSP - 1)) * Vec<T>::N;
		unsigned grid = grid_for(a.total, (int)per_block);
		if constexpr (NSP <= 2) {
			if (pool2x_flat_ok(a, NSP)) {
				launch_pdl(pool2x_vec<T, MAX, NSP, true>, grid, 256, 0, s, a);
				return;
			}
		}
		launch_pdl(pool2x_vec<T, MAX, NSP, false>, grid, 256, 0, s, a);
	} else if (pairs)
		launch_pdl(pool2x<T, MAX, NSP, true>, g, 256, 0, s, a);
	else
		launch_pdl(pool2x<T, MAX, NSP, false>, g, 256, 0, s, a);
}

template <typename T, bool MAX>
static void pool2x_dispatch(const PoolArgs &a, int nsp, bool pairs, cudaStream_t s)
{
	if (nsp == 1)
		pool2x_launch<T, MAX, 1>(a, pairs, s);
	else if (nsp == 2)
		pool2x_launch<T, MAX, 2>(a, pairs, s);
	else
		pool2x_launch<T, MAX, 3>(a, pairs, s);
}

template <typename T> tk_status pool_run(const PoolArgs &a, int nsp, cudaStream_t s)
{
	unsigned g = grid_persistent(a.total, 256, 8);
	bool pairs = false;

	launch_begin();
	if (pool2x_ok(a, nsp, sizeof(T), &pairs)) {
		if (a.pl.is_max)
			pool2x_dispatch<T, true>(a, nsp, pairs, s);
		else
			pool2x_dispatch<T, false>(a, nsp, pairs, s);
		return launch_status();
	}
	if (a.total < ((int64_t)1 << 32))
		launch_pdl(pool_kernel<T, true>, g, 256, 0, s, a);
	else
		launch_pdl(pool_kernel<T, false>, g, 256, 0, s, a);
	return launch_status();
}

tk_status pool_launch(const tk_call *call, void *stream, int nsp, int is_max)
{
	PoolArgs a;

	if (tk_pool_parse(call, nsp, is_max, &a.pl) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	a.out = call->out[0].data;
	a.x = call->in[0].data;
	a.total = tk_numel(&call->out[0]);
	if (a.total == 0)
		return TK_OK;
	cudaStream_t s = static_cast<cudaStream_t>(stream);
	switch (call->in[0].dtype) {
	case TK_F32:
		return pool_run<float>(a, nsp, s);
	case TK_F16:
		return pool_run<__half>(a, nsp, s);
	default:
		return pool_run<__nv_bfloat16>(a, nsp, s);
	}
}

} /* namespace */

extern "C" tk_status tk_cuda_max_pool1d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 1, 1);
}

extern "C" tk_status tk_cuda_max_pool2d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 2, 1);
}

extern "C" tk_status tk_cuda_max_pool3d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 3, 1);
}

extern "C" tk_status tk_cuda_avg_pool1d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 1, 0);
}

extern "C" tk_status tk_cuda_avg_pool2d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 2, 0);
}

extern "C" tk_status tk_cuda_avg_pool3d(const tk_call *call, void *stream)
{
	return pool_launch(call, stream, 3, 0);
}
