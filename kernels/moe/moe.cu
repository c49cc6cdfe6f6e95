/*
 * moe.cu - the CUDA launchers of the moe family, written to be plainly
 * right before fast (manifest/moe.yaml defines each op; moe.h is the layout
 * both backends check): route one warp per token (one thread per token past
 * 1024 experts), align one block over the whole routing (a counting sort
 * ranked a warp at a time), the grouped GEMMs a 16 x 16 shared-memory tile
 * per CTA with f32 accumulation, unpermute one thread per output element.
 * The grouped GEMMs of f16 and bf16 go to the tensor-core kernel of
 * moe_gemm.cu where it takes them (K a multiple of 8, x and w 16-byte
 * aligned, block_m a multiple of 16); the 16 x 16 kernel here runs the rest
 * (f32, odd K, misaligned views). docs/moe.md says what is still to come (wgmma, fp8 weights).
 */
#include <algorithm>

#include "cuda_common.cuh"
#include "moe.h"

namespace
{

using namespace tkc;

constexpr int TILE = 16;
/*
 * moe_align keeps two int arrays of E + 1 and, for each ranking warp, one of
 * E in (at most ALIGN_SMEM bytes of) shared memory: 32 warps up to 740
 * experts, at least 3 at 4096.
 */
constexpr int ALIGN_MAX_EXPERTS = 4096;
constexpr int ALIGN_SMEM = 96 * 1024;
/* moe_route keeps the chosen experts and the kept groups in registers. */
constexpr int ROUTE_MAX_GROUPS = 64;

template <typename T> __device__ float load(const void *p, int64_t i)
{
	return to_f32(static_cast<const T *>(p)[i]);
}

/* a ranks before b: the larger key, NaN last, ties to the lower index (route.c). */
__device__ bool before(float ka, int64_t a, float kb, int64_t b)
{
	if (isnan(ka) || isnan(kb))
		return isnan(kb) && (!isnan(ka) || a < b);
	return ka > kb || (ka == kb && a < b);
}

template <typename T> struct RouteRow {
	const tk_moe_route &r;
	int64_t row;
	float m, sum;
	__device__ float score(int64_t e) const
	{
		float l = load<T>(r.logits, row * r.e + e);
		return r.sigmoid ? 1.0f / (1.0f + expf(-l)) : expf(l - m) / sum;
	}
	__device__ float key(int64_t e) const
	{
		return r.bias ? score(e) + r.bias[e] : load<T>(r.logits, row * r.e + e);
	}
};

template <typename T> __global__ void route_kernel(const __grid_constant__ tk_moe_route r)
{
	int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= r.t)
		return;
	RouteRow<T> row{ r, t, -INFINITY, 0.0f };
	for (int64_t e = 0; e < r.e; e++)
		row.m = fmaxf(row.m, load<T>(r.logits, t * r.e + e));
	if (!r.sigmoid)
		for (int64_t e = 0; e < r.e; e++)
			row.sum += expf(load<T>(r.logits, t * r.e + e) - row.m);

	int64_t gsize = r.e / r.n_group;
	bool kept[ROUTE_MAX_GROUPS];
	for (int g = 0; g < ROUTE_MAX_GROUPS; g++)
		kept[g] = r.n_group == 1;
	if (r.n_group > 1) {
		for (int64_t n = 0; n < r.topk_group; n++) {
			int64_t best = -1;
			float bk = 0.0f;
			for (int64_t g = 0; g < r.n_group; g++) {
				if (kept[g])
					continue;
				int64_t b0 = -1, b1 = -1;
				for (int64_t e = g * gsize; e < (g + 1) * gsize; e++) {
					if (b0 < 0 || before(row.key(e), e, row.key(b0), b0)) {
						b1 = b0;
						b0 = e;
					} else if (b1 < 0 ||
					           before(row.key(e), e, row.key(b1), b1)) {
						b1 = e;
					}
				}
				float gk = b1 < 0 ? row.key(b0) : row.key(b0) + row.key(b1);
				if (best < 0 || before(gk, g, bk, best)) {
					best = g;
					bk = gk;
				}
			}
			kept[best] = true;
		}
	}
	int32_t *ids = r.ids + t * r.k;
	float *w = r.weights + t * r.k, total = 0.0f;
	for (int64_t j = 0; j < r.k; j++) {
		int64_t best = -1;
		float bk = 0.0f;
		for (int64_t e = 0; e < r.e; e++) {
			if (!kept[r.n_group == 1 ? 0 : e / gsize])
				continue;
			bool taken = false;
			for (int64_t i = 0; i < j; i++)
				taken |= ids[i] == e;
			float ke = row.key(e);
			if (!taken && (best < 0 || before(ke, e, bk, best))) {
				best = e;
				bk = ke;
			}
		}
		ids[j] = (int32_t)best;
		total += w[j] = row.score(best);
	}
	for (int64_t j = 0; j < r.k; j++)
		w[j] = (r.renormalize ? w[j] / total : w[j]) * r.scale;
}

/* The warp's best (index, key) under `before` into every lane; best < 0: a lane without one. */
__device__ void warp_best(int64_t &best, float &bk)
{
	for (int o = 16; o > 0; o >>= 1) {
		const int64_t ob = __shfl_xor_sync(0xffffffffu, best, o);
		const float ok = __shfl_xor_sync(0xffffffffu, bk, o);
		if (ob >= 0 && (best < 0 || before(ok, ob, bk, best))) {
			best = ob;
			bk = ok;
		}
	}
}

/*
 * moe_route one warp a token: the lanes load the row's
 * logits (expert e at lane e % 32) into the warp's slice of shared memory,
 * the max and each exp are taken by the lanes, the softmax sum is added by
 * lane 0 in expert order (route.c's order, so the weights are its bits),
 * and each of the k choices is a warp-wide arg-max under `before` (a strict
 * total order, so it names the same expert as route_kernel's scan). With
 * expert groups, each lane first keys up to two groups (the sum of the
 * group's two best keys), topk_group warp-wide arg-maxes keep groups, and
 * the experts of the others start out taken. Shared memory: ROUTE_WARPS x E
 * keys, exps and taken flags.
 */
constexpr int ROUTE_WARPS = 4;
constexpr int ROUTE_WARP_MAX_EXPERTS = 1024;

template <typename T>
__global__ void __launch_bounds__(32 * ROUTE_WARPS)
        route_warp_kernel(const __grid_constant__ tk_moe_route r)
{
	extern __shared__ float route_smem[];
	const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
	const int64_t t = (int64_t)blockIdx.x * ROUTE_WARPS + wid;
	const int64_t E = r.e;
	float *key = route_smem + (int64_t)wid * E * 2, *ex = key + E;
	unsigned char *taken =
	        reinterpret_cast<unsigned char *>(route_smem + ROUTE_WARPS * E * 2) + wid * E;
	if (t >= r.t)
		return;
	/* key[e] holds the logit until a bias turns it into score + bias. */
	float m = -INFINITY;
	for (int64_t e = lane; e < E; e += 32) {
		key[e] = load<T>(r.logits, t * E + e);
		m = fmaxf(m, key[e]);
	}
	for (int o = 16; o > 0; o >>= 1)
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
	for (int64_t e = lane; e < E; e += 32) {
		ex[e] = r.sigmoid ? 1.0f / (1.0f + expf(-key[e])) : expf(key[e] - m);
		taken[e] = 0;
	}
	__syncwarp();
	float sum = 0.0f;
	if (!r.sigmoid && lane == 0)
		for (int64_t e = 0; e < E; e++)
			sum += ex[e];
	sum = __shfl_sync(0xffffffffu, sum, 0);
	/* score(e) is ex[e] (sigmoid) or ex[e] / sum; the key is the logit
	 * unless a correction bias is added to the score. */
	for (int64_t e = lane; e < E; e += 32) {
		float sc = r.sigmoid ? ex[e] : ex[e] / sum;
		if (r.bias)
			key[e] = sc + r.bias[e];
		ex[e] = sc;
	}
	__syncwarp();
	if (r.n_group > 1) {
		/* Group lane + 32 s is keyed by lane: the sum of its two best keys. */
		const int64_t gsize = E / r.n_group;
		float gk[2] = { 0.0f, 0.0f };
		for (int s = 0; s < 2; s++) {
			const int64_t g = lane + 32 * s, e0 = g * gsize;
			if (g >= r.n_group)
				continue;
			int64_t b0 = e0, b1 = -1;
			for (int64_t e = e0 + 1; e < e0 + gsize; e++) {
				if (before(key[e], e, key[b0], b0)) {
					b1 = b0;
					b0 = e;
				} else if (b1 < 0 || before(key[e], e, key[b1], b1)) {
					b1 = e;
				}
			}
			gk[s] = b1 < 0 ? key[b0] : key[b0] + key[b1];
		}
		uint64_t kept = 0;
		for (int64_t n = 0; n < r.topk_group; n++) {
			int64_t best = -1;
			float bk = 0.0f;
			for (int s = 0; s < 2; s++) {
				const int64_t g = lane + 32 * s;
				if (g < r.n_group && !((kept >> g) & 1) &&
				    (best < 0 || before(gk[s], g, bk, best))) {
					best = g;
					bk = gk[s];
				}
			}
			warp_best(best, bk);
			kept |= 1ull << best;
		}
		for (int64_t e = lane; e < E; e += 32)
			taken[e] = !((kept >> (e / gsize)) & 1);
		__syncwarp();
	}
	int32_t *ids = r.ids + t * r.k;
	float *w = r.weights + t * r.k, total = 0.0f;
	for (int64_t j = 0; j < r.k; j++) {
		int64_t best = -1;
		float bk = 0.0f;
		for (int64_t e = lane; e < E; e += 32)
			if (!taken[e] && (best < 0 || before(key[e], e, bk, best))) {
				best = e;
				bk = key[e];
			}
		warp_best(best, bk);
		if (lane == 0) {
			taken[best] = 1;
			ids[j] = (int32_t)best;
			total += w[j] = ex[best];
		}
		__syncwarp();
	}
	if (lane == 0)
		for (int64_t j = 0; j < r.k; j++)
			w[j] = (r.renormalize ? w[j] / total : w[j]) * r.scale;
}

/*
 * moe_align in one block of 1024 threads. The counts are warp-aggregated
 * (one shared atomic per expert a warp holds). The ids are then placed a
 * tile of rank_warps * 32 flat ids at a time: a lane's place is its
 * expert's running start, plus the same-expert lanes before it in its warp
 * (__match_any_sync), plus that expert's count in each earlier warp of the
 * tile (wcnt, [rank_warps][E]), which keeps each expert's ids ascending as
 * align.c places them.
 */
__global__ void __launch_bounds__(1024)
        align_kernel(const __grid_constant__ tk_moe_align a, int rank_warps)
{
	extern __shared__ int align_smem[];
	const int ne = (int)a.e;
	int *start = align_smem, *run = start + ne + 1, *wcnt = run + ne + 1;
	const int tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5;
	const unsigned lanes_before = (1u << lane) - 1;

	for (int i = tid; i < (ne + 1) * 2 + rank_warps * ne; i += nt)
		align_smem[i] = 0;
	__syncthreads();
	for (int64_t base = (int64_t)warp * 32; base < a.tk; base += nt) {
		const int64_t f = base + lane;
		const int32_t v = f < a.tk ? a.topk_ids[f] : -1;
		const int e = v >= 0 && v < ne ? v : -1;
		const unsigned same = __match_any_sync(0xffffffffu, e);
		if (e >= 0 && (same & lanes_before) == 0)
			atomicAdd(&run[e], __popc(same));
	}
	__syncthreads();
	if (tid == 0) {
		for (int e = 0; e < ne; e++) {
			start[e + 1] =
			        start[e] + (int)((run[e] + a.block_m - 1) / a.block_m * a.block_m);
			run[e] = start[e];
		}
		a.num_post_padded[0] = start[ne];
	}
	for (int64_t p = tid; p < a.p; p += nt)
		a.sorted_ids[p] = (int32_t)a.tk;
	__syncthreads();
	for (int64_t b = tid; b < a.nb; b += nt) {
		/* The expert whose padded rows hold block b: the last e with start[e] <= b * block_m. */
		const int64_t row = b * a.block_m;
		int lo = 0, hi = ne;
		while (lo < hi) {
			const int mid = (lo + hi + 1) / 2;
			if (start[mid] <= row)
				lo = mid;
			else
				hi = mid - 1;
		}
		a.expert_ids[b] = (int32_t)(row < start[ne] ? lo : ne);
	}
	const bool ranks = warp < rank_warps;
	for (int64_t base = 0; base < a.tk; base += (int64_t)rank_warps * 32) {
		const int64_t f = base + tid;
		int e = -1;
		unsigned same = 0;
		if (ranks) {
			const int32_t v = f < a.tk ? a.topk_ids[f] : -1;
			e = v >= 0 && v < ne ? v : -1;
			if (f < a.tk && e < 0)
				a.inv[f] = (int32_t)a.p;
			same = __match_any_sync(0xffffffffu, e);
		}
		const bool leader = e >= 0 && (same & lanes_before) == 0;
		if (leader)
			wcnt[warp * ne + e] = __popc(same);
		__syncthreads();
		if (e >= 0) {
			int pos = run[e] + __popc(same & lanes_before);
			for (int w = 0; w < warp; w++)
				pos += wcnt[w * ne + e];
			a.sorted_ids[pos] = (int32_t)f;
			a.inv[f] = pos;
		}
		__syncthreads();
		if (leader) {
			atomicAdd(&run[e], __popc(same));
			wcnt[warp * ne + e] = 0;
		}
		__syncthreads();
	}
}

/*
 * One CTA: TILE rows of out (all in one block_m block, so of one expert) by
 * TILE columns; thread (tx, ty) owns out[p0 + ty, n0 + tx].
 */
template <typename T, bool GATE_UP>
__global__ void __launch_bounds__(TILE *TILE) gemm_kernel(const __grid_constant__ tk_moe_gemm g)
{
	__shared__ float xs[TILE][TILE + 1], ws[TILE][TILE + 1], us[TILE][TILE + 1];
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int64_t p0 = (int64_t)blockIdx.y * TILE, n0 = (int64_t)blockIdx.x * TILE;
	const int64_t p = p0 + ty, n = n0 + tx;
	const int32_t e = p0 < g.p ? g.expert_ids[p0 / g.block_m] : -1;
	const bool live = p0 < g.num_post_padded[0] && e >= 0 && e < g.e;
	int64_t src = -1;
	if (live && p < g.p) {
		int32_t s = g.sorted_ids[p];
		if (s >= 0 && s < g.tk)
			src = g.top_k ? s / g.top_k : p;
	}
	/* The rows of w this tile reads: columns n0.. of the gate (or only) and up halves. */
	const T *w = static_cast<const T *>(g.w) + (int64_t)(live ? e : 0) * g.n * g.k;
	float acc = 0.0f, acc_up = 0.0f;
	for (int64_t k0 = 0; live && k0 < g.k; k0 += TILE) {
		int64_t kx = k0 + tx, wn = n0 + ty;
		xs[ty][tx] = src >= 0 && kx < g.k ? load<T>(g.x, src * g.k + kx) : 0.0f;
		ws[ty][tx] = wn < g.out_cols && kx < g.k ? to_f32(w[wn * g.k + kx]) : 0.0f;
		if (GATE_UP)
			us[ty][tx] = wn < g.out_cols && kx < g.k
			                     ? to_f32(w[(g.out_cols + wn) * g.k + kx])
			                     : 0.0f;
		__syncthreads();
		for (int kk = 0; kk < TILE; kk++) {
			acc += xs[ty][kk] * ws[tx][kk];
			if (GATE_UP)
				acc_up += xs[ty][kk] * us[tx][kk];
		}
		__syncthreads();
	}
	if (p >= g.p || n >= g.out_cols)
		return;
	float v = src < 0 ? 0.0f : GATE_UP ? acc / (1.0f + expf(-acc)) * acc_up : acc;
	static_cast<T *>(g.out)[p * g.out_cols + n] = from_f32<T>(v);
}

template <typename T> __global__ void unpermute_kernel(const __grid_constant__ tk_moe_unpermute u)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < u.t * u.h;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t t = i / u.h, h = i - t * u.h;
		float acc = 0.0f;
		for (int64_t j = 0; j < u.k; j++) {
			int32_t p = u.inv[t * u.k + j];
			if (p >= 0 && p < u.p)
				acc += u.weights[t * u.k + j] * load<T>(u.y, p * u.h + h);
		}
		if (u.shared)
			acc += load<T>(u.shared, i);
		static_cast<T *>(u.out)[i] = from_f32<T>(acc);
	}
}

template <template <typename> class K, typename A>
tk_status by_dtype(tk_dtype dt, dim3 grid, dim3 block, cudaStream_t st, const A &a, size_t smem = 0)
{
	launch_begin();
	if (dt == TK_BF16)
		K<__nv_bfloat16>::launch(grid, block, smem, st, a);
	else if (dt == TK_F16)
		K<__half>::launch(grid, block, smem, st, a);
	else
		K<float>::launch(grid, block, smem, st, a);
	return launch_status();
}

template <typename T> struct RouteK {
	static void launch(dim3 g, dim3 b, size_t smem, cudaStream_t st, const tk_moe_route &a)
	{
		route_kernel<T><<<g, b, smem, st>>>(a);
	}
};
template <typename T> struct RouteWarpK {
	static void launch(dim3 g, dim3 b, size_t smem, cudaStream_t st, const tk_moe_route &a)
	{
		route_warp_kernel<T><<<g, b, smem, st>>>(a);
	}
};
template <typename T> struct GemmK {
	static void launch(dim3 g, dim3 b, size_t smem, cudaStream_t st, const tk_moe_gemm &a)
	{
		gemm_kernel<T, false><<<g, b, smem, st>>>(a);
	}
};
template <typename T> struct GateUpK {
	static void launch(dim3 g, dim3 b, size_t smem, cudaStream_t st, const tk_moe_gemm &a)
	{
		gemm_kernel<T, true><<<g, b, smem, st>>>(a);
	}
};
template <typename T> struct UnpermuteK {
	static void launch(dim3 g, dim3 b, size_t smem, cudaStream_t st, const tk_moe_unpermute &a)
	{
		unpermute_kernel<T><<<g, b, smem, st>>>(a);
	}
};

tk_status gemm_launch(const tk_call *call, int gate_up, cudaStream_t st)
{
	tk_moe_gemm g;
	tk_status s = tk_moe_gemm_parse(call, gate_up, &g);

	if (s != TK_OK)
		return s;
	if (g.block_m % TILE || g.p == 0 || g.out_cols == 0)
		return g.block_m % TILE ? TK_ERR_UNSUPPORTED : TK_OK;
	if (tk_moe_gemm_mma_fits(&g))
		return tk_moe_gemm_mma(&g, st);
	dim3 grid((unsigned)((g.out_cols + TILE - 1) / TILE), (unsigned)((g.p + TILE - 1) / TILE));
	if ((g.p + TILE - 1) / TILE > 65535)
		return TK_ERR_UNSUPPORTED;
	return gate_up ? by_dtype<GateUpK>(g.dtype, grid, dim3(TILE, TILE), st, g)
	               : by_dtype<GemmK>(g.dtype, grid, dim3(TILE, TILE), st, g);
}

} // namespace

extern "C" tk_status tk_cuda_moe_route(const tk_call *call, void *stream)
{
	tk_moe_route r;
	tk_status s = tk_moe_route_parse(call, &r);

	if (s != TK_OK)
		return s;
	if (r.n_group > ROUTE_MAX_GROUPS)
		return TK_ERR_UNSUPPORTED;
	if (r.t == 0)
		return TK_OK;
	if (r.e <= ROUTE_WARP_MAX_EXPERTS) {
		const size_t smem = (size_t)ROUTE_WARPS * (size_t)r.e * (2 * sizeof(float) + 1);
		return by_dtype<RouteWarpK>(
		        r.dtype, dim3((unsigned)((r.t + ROUTE_WARPS - 1) / ROUTE_WARPS)),
		        dim3(32 * ROUTE_WARPS), static_cast<cudaStream_t>(stream), r, smem);
	}
	return by_dtype<RouteK>(r.dtype, dim3((unsigned)((r.t + 127) / 128)), dim3(128),
	                        static_cast<cudaStream_t>(stream), r);
}

extern "C" tk_status tk_cuda_moe_align(const tk_call *call, void *stream)
{
	tk_moe_align a;
	tk_status s = tk_moe_align_parse(call, &a);

	if (s != TK_OK)
		return s;
	if (a.e > ALIGN_MAX_EXPERTS)
		return TK_ERR_UNSUPPORTED;
	const int64_t fixed = 2 * (a.e + 1) * (int64_t)sizeof(int),
	              per_warp = a.e * (int64_t)sizeof(int);
	const int rank_warps =
	        (int)std::min<int64_t>(32, (ALIGN_SMEM - fixed) / std::max<int64_t>(per_warp, 1));
	const size_t smem = (size_t)(fixed + rank_warps * per_warp);
	static std::atomic<uint64_t> smem_set{ 0 };
	if (smem > 48 * 1024 && allow_dynamic_smem(reinterpret_cast<const void *>(align_kernel),
	                                           ALIGN_SMEM, smem_set) != cudaSuccess)
		return TK_ERR_LAUNCH;
	launch_begin();
	align_kernel<<<1, 1024, smem, static_cast<cudaStream_t>(stream)>>>(a, rank_warps);
	return launch_status();
}

extern "C" tk_status tk_cuda_moe_grouped_gemm(const tk_call *call, void *stream)
{
	return gemm_launch(call, 0, static_cast<cudaStream_t>(stream));
}

extern "C" tk_status tk_cuda_moe_gate_up(const tk_call *call, void *stream)
{
	return gemm_launch(call, 1, static_cast<cudaStream_t>(stream));
}

extern "C" tk_status tk_cuda_moe_unpermute(const tk_call *call, void *stream)
{
	tk_moe_unpermute u;
	tk_status s = tk_moe_unpermute_parse(call, &u);

	if (s != TK_OK)
		return s;
	if (u.t * u.h == 0)
		return TK_OK;
	return by_dtype<UnpermuteK>(u.dtype, grid_for(u.t * u.h, 256), dim3(256),
	                            static_cast<cudaStream_t>(stream), u);
}
