/*
 * sample.cu - the sample op on the GPU.
 *
 * The arithmetic is sample_math.h's, shared with the CPU reference, so
 * the same seed, offset and logits give the same token. Where the
 * reference sorts a row's survivors to cut top-k and top-p, the kernels
 * find the same cut-offs without sorting: a radix selection over the
 * 32-bit order keys of the logits (four passes of 8 bits, histograms of
 * counts or weights in shared memory) gives the key of the cut, and a scan
 * in index order among the tokens of that key gives the token (the order
 * breaks ties by index). All sums are 64-bit integers, so no reduction
 * order can change them. No workspace.
 *
 * Two kernels. A row of 8192 to 8 x 40960 tokens (the vocabularies of
 * LLMs) is cut into kCluster slices, one per CTA of a thread block
 * cluster; each CTA reads its slice once into shared memory (as canonical
 * f32) and every pass works from there, the CTAs combining their sums,
 * histograms and searches through distributed shared memory. A row of one
 * block streams from global memory in every pass instead (from the L2 for
 * all but the first), nine or more of them at one block's rate: 0.78 ms
 * for a 128k-token row on an H200, 0.13 ms with the cluster kernel. Other
 * rows (short, or too long for the slices) take the one-block kernel.
 *
 * The histograms: most of a row's tokens share the leading bits of their
 * keys, so nearly every token of the first passes falls into one bin, and
 * shared-memory atomics on one address serialize (1.4 ms for a 128k-token
 * row that way). So a warp first pools the weights of its lanes whose
 * digit is that of its first kept lane (one atomic for them), and the
 * warps add into kSub copies of the histogram, summed after the pass.
 *
 * Passes over a row: the maximum (always); for a temperature above 0, the
 * count of min-p survivors when top-k needs it, 4 + 1 for top-k, 1 + 4 + 1
 * for top-p, then 1 for the total weight and 1 for the draw.
 */
#include <atomic>
#include <cooperative_groups.h>

#include "cuda_common.cuh"
#include "sample_math.h"

namespace
{

using namespace tkc;
namespace cg = cooperative_groups;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kSub = 8;     /* histogram copies: warp w adds into copy w % kSub */
constexpr int kCluster = 8; /* CTAs a row in the cluster kernel: the portable cluster size */
constexpr int64_t kClusterMinV = 8192; /* shorter rows: one block (a slice would be tiny) */
/* A CTA's slice of the row as canonical f32 in shared memory: at most 160 KiB. */
constexpr int64_t kSliceMax = 160 * 1024 / 4;

struct SampleArgs {
	const void *logits;
	int64_t ld, V;
	const float *temp, *top_p, *min_p;
	const int32_t *top_k;
	const int64_t *seeds, *offsets;
	int64_t s_temp, s_topk, s_topp, s_minp, s_seeds, s_offsets;
	float temperature, top_p_v, min_p_v;
	int64_t top_k_v;
	uint64_t seed, offset;
	void *out;
	int64_t s_out;
	int out64;
};

struct Shared {
	unsigned long long hist[kSub][256];
	unsigned long long tot[256]; /* the cluster's histogram (cluster kernel) */
	unsigned long long warp[kWarps];
	unsigned long long bcast[2];
	unsigned long long part; /* this CTA's share of a cluster-wide reduction */
	int64_t pos;
};

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1) {
		unsigned long long w = __shfl_xor_sync(0xffffffffu, v, o);
		v = w > v ? w : v;
	}
	return v;
}

/* The block's sum (max when MAX) of v, returned to every thread. */
template <bool MAX> __device__ unsigned long long block_reduce(Shared &sh, unsigned long long v)
{
	const int w = threadIdx.x / 32, lane = threadIdx.x % 32;

	v = MAX ? warp_max_u64(v) : warp_sum_u64(v);
	__syncthreads(); /* sh.warp may still be read from the call before */
	if (lane == 0)
		sh.warp[w] = v;
	__syncthreads();
	if (w == 0) {
		v = lane < kWarps ? sh.warp[lane] : 0;
		v = MAX ? warp_max_u64(v) : warp_sum_u64(v);
		if (lane == 0)
			sh.bcast[0] = v;
	}
	__syncthreads();
	return sh.bcast[0];
}

/*
 * The lowest index i in [lo, hi) whose running sum f(lo) + ... + f(i)
 * reaches target; hi - 1 when the slice's sum does not. Each warp sums a
 * contiguous segment; the warp whose segment holds the crossing scans it
 * in order.
 */
template <typename F>
__device__ int64_t block_find_first(Shared &sh, int64_t lo, int64_t hi, uint64_t target, F f)
{
	const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int64_t seg = (hi - lo + kWarps - 1) / kWarps;
	const int64_t a = lo + (int64_t)w * seg, b = a + seg < hi ? a + seg : hi;
	unsigned long long s = 0;

	for (int64_t i = a + lane; i < b; i += 32)
		s += f(i);
	s = warp_sum_u64(s);
	__syncthreads();
	if (lane == 0)
		sh.warp[w] = s;
	__syncthreads();
	if (threadIdx.x == 0) {
		uint64_t base = 0;
		int ww = 0;
		for (; ww < kWarps - 1; ww++) {
			if (base + sh.warp[ww] >= target)
				break;
			base += sh.warp[ww];
		}
		sh.bcast[0] = base;
		sh.bcast[1] = (unsigned long long)ww;
		sh.pos = hi - 1;
	}
	__syncthreads();
	if ((unsigned long long)w == sh.bcast[1]) {
		uint64_t base = sh.bcast[0];
		for (int64_t t = a; t < b; t += 32) {
			int64_t i = t + lane;
			unsigned long long v = i < b ? f(i) : 0, x = v;
			for (int o = 1; o < 32; o <<= 1) {
				unsigned long long y = __shfl_up_sync(0xffffffffu, x, o);
				if (lane >= o)
					x += y;
			}
			unsigned hit = __ballot_sync(0xffffffffu, base + x >= target);
			if (hit) {
				if (lane == __ffs(hit) - 1)
					sh.pos = i;
				break;
			}
			base += __shfl_sync(0xffffffffu, x, 31);
		}
	}
	__syncthreads();
	return sh.pos;
}

/*
 * Who works on a row, and how they combine: one block over the whole row
 * read from global memory (BlockTeam), or kCluster blocks of a thread
 * block cluster, each over its slice held in shared memory (ClusterTeam),
 * whose reductions, histograms and searches go through distributed shared
 * memory. Every value a team returns is the same in all of its threads, so
 * the control flow above them is uniform across the cluster.
 */
template <typename T> struct BlockTeam {
	const T *p;
	int64_t V;

	__device__ int64_t lo() const
	{
		return 0;
	}
	__device__ int64_t hi() const
	{
		return V;
	}
	__device__ float z(int64_t i) const
	{
		return tks_canon(to_f32(p[i]));
	}
	template <bool MAX>
	__device__ unsigned long long reduce(Shared &sh, unsigned long long v) const
	{
		return block_reduce<MAX>(sh, v);
	}
	/* The histogram of the pass, sh.hist[0] once this block's copies are folded. */
	__device__ const unsigned long long *histogram(Shared &sh) const
	{
		return sh.hist[0];
	}
	template <typename F> __device__ int64_t find_first(Shared &sh, uint64_t target, F f) const
	{
		return block_find_first(sh, 0, V, target, f);
	}
};

struct ClusterTeam {
	const float *zs; /* the slice [lo_, hi_), canonical */
	int64_t lo_, hi_;

	__device__ int64_t lo() const
	{
		return lo_;
	}
	__device__ int64_t hi() const
	{
		return hi_;
	}
	__device__ float z(int64_t i) const
	{
		return zs[i - lo_];
	}
	template <bool MAX>
	__device__ unsigned long long reduce(Shared &sh, unsigned long long v) const
	{
		cg::cluster_group cl = cg::this_cluster();

		v = block_reduce<MAX>(sh, v);
		if (threadIdx.x == 0)
			sh.part = v;
		cl.sync();
		if (threadIdx.x == 0) {
			unsigned long long acc = 0;
			for (unsigned r = 0; r < kCluster; r++) {
				unsigned long long u = *cl.map_shared_rank(&sh.part, r);
				acc = MAX ? (u > acc ? u : acc) : acc + u;
			}
			sh.bcast[0] = acc;
		}
		cl.sync(); /* every peer's part read before any is written again */
		return sh.bcast[0];
	}
	__device__ const unsigned long long *histogram(Shared &sh) const
	{
		cg::cluster_group cl = cg::this_cluster();

		cl.sync();
		for (int d = threadIdx.x; d < 256; d += blockDim.x) {
			unsigned long long sum = 0;
			for (unsigned r = 0; r < kCluster; r++)
				sum += cl.map_shared_rank(sh.hist[0], r)[d];
			sh.tot[d] = sum;
		}
		cl.sync(); /* every peer's histogram read before the next pass clears it */
		return sh.tot;
	}
	/* The crossing's CTA (the last when none) searches its slice and tells every peer. */
	template <typename F> __device__ int64_t find_first(Shared &sh, uint64_t target, F f) const
	{
		cg::cluster_group cl = cg::this_cluster();
		unsigned long long s = 0;

		for (int64_t i = lo_ + threadIdx.x; i < hi_; i += blockDim.x)
			s += f(i);
		s = block_reduce<false>(sh, s);
		if (threadIdx.x == 0)
			sh.part = s;
		cl.sync();
		uint64_t base = 0;
		unsigned c = 0;
		for (; c < kCluster - 1; c++) {
			unsigned long long u = *cl.map_shared_rank(&sh.part, c);
			if (base + u >= target)
				break;
			base += u;
		}
		if (cl.block_rank() == c) {
			int64_t pos = block_find_first(sh, lo_, hi_, target - base, f);
			if (threadIdx.x == 0)
				for (unsigned r = 0; r < kCluster; r++)
					*cl.map_shared_rank(&sh.pos, r) = pos;
		}
		cl.sync();
		return sh.pos;
	}
};

/* A row's tokens: canonical logit, order key, weight, and the masks of the filters. */
template <typename Team> struct Row {
	Team team;
	float m, c;
	uint64_t min_q;
	/* top-k and top-p cuts: kept when key > k or (key == k and index <= i); off: cut_i < 0 */
	uint32_t k_key, p_key;
	int64_t k_i, p_i;

	__device__ float z(int64_t i) const
	{
		return team.z(i);
	}
	__device__ uint64_t q(float zi) const
	{
		return tks_weight(zi, m, c);
	}
	__device__ static bool within(uint32_t key, int64_t i, uint32_t ck, int64_t ci)
	{
		return ci < 0 || key > ck || (key == ck && i <= ci);
	}
	/* In min-p's mask (level 1), and top-k's (2), and top-p's (3). */
	__device__ bool kept(int64_t i, float zi, uint64_t qi, int level) const
	{
		if (qi < min_q)
			return false;
		uint32_t key = tks_ord(zi);
		if (level >= 2 && !within(key, i, k_key, k_i))
			return false;
		return level < 3 || within(key, i, p_key, p_i);
	}
	/* The team's sum over its tokens of f(i, z_i). */
	template <typename F> __device__ unsigned long long sum(Shared &sh, F f) const
	{
		unsigned long long s = 0;
		for (int64_t i = team.lo() + threadIdx.x; i < team.hi(); i += blockDim.x)
			s += f(i, z(i));
		return team.template reduce<false>(sh, s);
	}
};

/*
 * Radix selection: the key v with A(key > v) < target <= A(key >= v), A
 * the sum over the tokens kept at `level` of their weight (COUNT: 1 each,
 * else q). *above gets A(key > v). target must be in [1, A(all)].
 */
template <bool COUNT, typename Team>
__device__ uint32_t radix_select(Shared &sh, const Row<Team> &r, int level, uint64_t target,
                                 uint64_t *above)
{
	const int lane = threadIdx.x % 32;
	unsigned long long *mine = sh.hist[(threadIdx.x / 32) % kSub];
	const int64_t lo = r.team.lo(), hi = r.team.hi();
	uint32_t prefix = 0, pmask = 0;
	uint64_t acc_above = 0;

	for (int shift = 24; shift >= 0; shift -= 8) {
		for (int d = threadIdx.x; d < kSub * 256; d += blockDim.x)
			sh.hist[d / 256][d % 256] = 0;
		__syncthreads();
		/* A warp's lanes step together (i0 is the warp's first index), so they can pool. */
		for (int64_t i0 = lo + threadIdx.x - lane; i0 < hi; i0 += blockDim.x) {
			const int64_t i = i0 + lane;
			uint64_t w = 0;
			uint32_t digit = 0;
			if (i < hi) {
				float zi = r.z(i);
				uint32_t key = tks_ord(zi);
				uint64_t qi = (key & pmask) == prefix ? r.q(zi) : 0;
				if ((key & pmask) == prefix && r.kept(i, zi, qi, level)) {
					w = COUNT ? 1 : qi;
					digit = (key >> shift) & 255u;
				}
			}
			const unsigned kept = __ballot_sync(0xffffffffu, w != 0);
			if (!kept)
				continue; /* the same for the whole warp */
			const uint32_t d0 = __shfl_sync(0xffffffffu, digit, __ffs(kept) - 1);
			const unsigned long long pooled = warp_sum_u64(digit == d0 ? w : 0);
			if (lane == 0)
				atomicAdd(&mine[d0], pooled);
			if (w && digit != d0)
				atomicAdd(&mine[digit], (unsigned long long)w);
		}
		__syncthreads();
		for (int d = threadIdx.x; d < 256; d += blockDim.x) {
			unsigned long long sum = 0;
			for (int k = 0; k < kSub; k++)
				sum += sh.hist[k][d];
			sh.hist[0][d] = sum;
		}
		__syncthreads();
		const unsigned long long *hist = r.team.histogram(sh);
		if (threadIdx.x == 0) {
			uint64_t acc = acc_above;
			int d = 255;
			for (; d > 0; d--) {
				if (acc + hist[d] >= target)
					break;
				acc += hist[d];
			}
			sh.bcast[0] = acc;
			sh.bcast[1] = (unsigned long long)d;
		}
		__syncthreads();
		acc_above = sh.bcast[0];
		prefix |= (uint32_t)sh.bcast[1] << shift;
		pmask |= 255u << shift;
		__syncthreads();
	}
	*above = acc_above;
	return prefix;
}

/* The canonical float whose tks_ord is key (tks_ord is one to one). */
__device__ __forceinline__ float ord_value(uint32_t key)
{
	return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

template <typename Team>
__device__ int64_t sample_one(Shared &sh, const SampleArgs &a, int64_t b, const Team &team)
{
	Row<Team> r;
	r.team = team;

	/* The largest order key, the lowest index on ties: the greedy token. */
	unsigned long long best = 0;
	for (int64_t i = team.lo() + threadIdx.x; i < team.hi(); i += blockDim.x) {
		unsigned long long k =
		        ((unsigned long long)tks_ord(r.z(i)) << 32) | (0xffffffffu - (uint32_t)i);
		best = k > best ? k : best;
	}
	best = team.template reduce<true>(sh, best);
	if ((uint32_t)(best >> 32) == TKS_ORD_NEG_INF)
		return -1;
	const int64_t first = (int64_t)(0xffffffffu - (uint32_t)best);

	tks_row s;
	tks_row_settings(&s, a.temp ? a.temp[b * a.s_temp] : a.temperature,
	                 a.top_k ? (int64_t)a.top_k[b * a.s_topk] : a.top_k_v,
	                 a.top_p ? a.top_p[b * a.s_topp] : a.top_p_v,
	                 a.min_p ? a.min_p[b * a.s_minp] : a.min_p_v,
	                 a.seeds ? (uint64_t)a.seeds[b * a.s_seeds] : a.seed,
	                 a.offset + (a.offsets ? (uint64_t)a.offsets[b * a.s_offsets] : 0),
	                 a.seeds ? 0u : (uint32_t)b);
	if (s.greedy)
		return first;
	r.m = ord_value((uint32_t)(best >> 32)); /* the largest logit, from its key */
	r.c = s.c;
	r.min_q = s.min_q;
	r.k_i = r.p_i = -1;
	r.k_key = r.p_key = 0;

	if (s.top_k > 0 && s.top_k < a.V) {
		unsigned long long n1 = (unsigned long long)a.V;
		if (s.min_q != 0)
			n1 = r.sum(sh, [&](int64_t, float zi) {
				return (unsigned long long)(r.q(zi) >= s.min_q);
			});
		if ((uint64_t)s.top_k < n1) {
			uint64_t above = 0;
			uint32_t v = radix_select<true>(sh, r, 1, (uint64_t)s.top_k, &above);
			const Row<Team> rr = r;
			r.k_i = team.find_first(sh, (uint64_t)s.top_k - above, [&](int64_t i) {
				float zi = rr.z(i);
				return (unsigned long long)(tks_ord(zi) == v &&
				                            rr.kept(i, zi, rr.q(zi), 1));
			});
			r.k_key = v;
		}
	}
	if (s.p24 < ((uint64_t)1 << TKS_P_BITS)) {
		const Row<Team> r2 = r;
		unsigned long long total = r.sum(sh, [&](int64_t i, float zi) {
			uint64_t qi = r2.q(zi);
			return (unsigned long long)(r2.kept(i, zi, qi, 2) ? qi : 0);
		});
		uint64_t target = tks_mass_target(total, s.p24);
		if (target == 0)
			return first; /* top-p keeps the first token alone */
		uint64_t above = 0;
		uint32_t v = radix_select<false>(sh, r, 2, target, &above);
		const Row<Team> rr = r;
		r.p_i = team.find_first(sh, target - above, [&](int64_t i) {
			float zi = rr.z(i);
			uint64_t qi = rr.q(zi);
			return (unsigned long long)(tks_ord(zi) == v && rr.kept(i, zi, qi, 2) ? qi
			                                                                      : 0);
		});
		r.p_key = v;
	}

	const Row<Team> r3 = r;
	unsigned long long total = r.sum(sh, [&](int64_t i, float zi) {
		uint64_t qi = r3.q(zi);
		return (unsigned long long)(r3.kept(i, zi, qi, 3) ? qi : 0);
	});
	uint64_t u = tks_mulhi64(tks_philox(s.seed, s.offset, s.stream), total);
	return team.find_first(sh, u + 1, [&](int64_t i) {
		float zi = r3.z(i);
		uint64_t qi = r3.q(zi);
		return (unsigned long long)(r3.kept(i, zi, qi, 3) ? qi : 0);
	});
}

template <typename T> __device__ void write_token(const SampleArgs &a, int64_t b, int64_t tok)
{
	if (a.out64)
		static_cast<int64_t *>(a.out)[b * a.s_out] = tok;
	else
		static_cast<int32_t *>(a.out)[b * a.s_out] = (int32_t)tok;
}

/* One block a row (blockIdx.x), read from global memory in every pass. */
template <typename T> __global__ void __launch_bounds__(kThreads) sample_kernel(const SampleArgs a)
{
	__shared__ Shared sh;
	const int64_t b = blockIdx.x;
	BlockTeam<T> team;
	team.p = reinterpret_cast<const T *>(a.logits) + b * a.ld;
	team.V = a.V;

	pdl_enter(); /* launched with PDL: the kernel before completes first */
	int64_t tok = sample_one(sh, a, b, team);
	if (threadIdx.x == 0)
		write_token<T>(a, b, tok);
}

/* kCluster blocks a row (blockIdx.y), each over its slice, read once into shared memory. */
template <typename T>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
        sample_cluster_kernel(const SampleArgs a)
{
	__shared__ Shared sh;
	extern __shared__ float zs[];
	const int64_t b = blockIdx.y;
	const int64_t slice = (a.V + kCluster - 1) / kCluster;
	const int64_t lo = (int64_t)blockIdx.x * slice;
	const int64_t hi = lo + slice < a.V ? lo + slice : a.V;
	const T *p = reinterpret_cast<const T *>(a.logits) + b * a.ld;
	ClusterTeam team;
	team.zs = zs;
	team.lo_ = lo;
	team.hi_ = hi;

	pdl_enter();
	for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
		zs[i - lo] = tks_canon(to_f32(p[i]));
	__syncthreads();
	int64_t tok = sample_one(sh, a, b, team);
	if (threadIdx.x == 0 && blockIdx.x == 0)
		write_token<T>(a, b, tok);
}

/* A per-row input of dtype dt and shape [B], or NULL when not given; *bad on a mismatch. */
static const void *row_input(const tk_call *call, int i, tk_dtype dt, int64_t B, int64_t *stride,
                             bool *bad)
{
	*stride = 0;
	if (!tk_has_input(call, i))
		return NULL;
	const tk_tensor *t = &call->in[i];
	if (t->dtype != dt || t->ndim != 1 || t->shape[0] != B)
		*bad = true;
	*stride = t->ndim == 1 ? t->stride[0] : 0;
	return t->data;
}

static uint64_t param_bits(const tk_call *call, int i)
{
	if (i < call->n_params && call->params[i].kind == TK_PARAM_INT)
		return (uint64_t)call->params[i].v.i;
	return (uint64_t)(int64_t)tk_param_num(call, i, 0.0);
}

} /* namespace */

extern "C" tk_status tk_cuda_sample(const tk_call *call, void *stream)
{
	const tk_tensor *lg = &call->in[0], *out = &call->out[0];
	SampleArgs a;
	bool bad = false;

	if (call->n_in < 1 || call->n_out < 1 || !tk_same_float_dtype(&lg, 1) || lg->ndim != 2 ||
	    !tk_last_dim_packed(lg) || out->ndim != 1 ||
	    (out->dtype != TK_I32 && out->dtype != TK_I64))
		return TK_ERR_UNSUPPORTED;
	const int64_t B = lg->shape[0], V = lg->shape[1];
	if (out->shape[0] != B || V < 1 || V > ((int64_t)1 << 22) || B > 0x7fffffff)
		return TK_ERR_UNSUPPORTED;
	memset(&a, 0, sizeof(a));
	a.logits = lg->data;
	a.ld = lg->stride[0];
	a.V = V;
	a.temp = static_cast<const float *>(row_input(call, 1, TK_F32, B, &a.s_temp, &bad));
	a.top_k = static_cast<const int32_t *>(row_input(call, 2, TK_I32, B, &a.s_topk, &bad));
	a.top_p = static_cast<const float *>(row_input(call, 3, TK_F32, B, &a.s_topp, &bad));
	a.min_p = static_cast<const float *>(row_input(call, 4, TK_F32, B, &a.s_minp, &bad));
	a.seeds = static_cast<const int64_t *>(row_input(call, 5, TK_I64, B, &a.s_seeds, &bad));
	a.offsets = static_cast<const int64_t *>(row_input(call, 6, TK_I64, B, &a.s_offsets, &bad));
	if (bad)
		return TK_ERR_UNSUPPORTED;
	a.temperature = (float)tk_param_num(call, 0, 1.0);
	a.top_k_v = (int64_t)tk_param_num(call, 1, 0.0);
	a.top_p_v = (float)tk_param_num(call, 2, 1.0);
	a.min_p_v = (float)tk_param_num(call, 3, 0.0);
	a.seed = param_bits(call, 4);
	a.offset = param_bits(call, 5);
	a.out = out->data;
	a.s_out = out->stride[0];
	a.out64 = out->dtype == TK_I64;
	if (B == 0)
		return TK_OK;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	launch_begin();
	const int64_t slice = (V + kCluster - 1) / kCluster;
	if (V >= kClusterMinV && slice <= kSliceMax && B <= 65535) {
		static std::atomic<uint64_t> done[3];
		const dim3 grid(kCluster, (unsigned)B);
		const size_t smem = (size_t)slice * sizeof(float);
		void (*fn)(SampleArgs) = lg->dtype == TK_F32 ? sample_cluster_kernel<float>
		                         : lg->dtype == TK_F16
		                                 ? sample_cluster_kernel<__half>
		                                 : sample_cluster_kernel<__nv_bfloat16>;
		const int which = lg->dtype == TK_F32 ? 0 : lg->dtype == TK_F16 ? 1 : 2;
		if (allow_dynamic_smem((const void *)fn, (int)(kSliceMax * sizeof(float)),
		                       done[which]) != cudaSuccess)
			return TK_ERR_LAUNCH;
		launch_pdl(fn, grid, dim3(kThreads), smem, st, a);
		return launch_status();
	}
	switch (lg->dtype) {
	case TK_F32:
		launch_pdl(sample_kernel<float>, dim3((unsigned)B), dim3(kThreads), 0, st, a);
		break;
	case TK_F16:
		launch_pdl(sample_kernel<__half>, dim3((unsigned)B), dim3(kThreads), 0, st, a);
		break;
	default:
		launch_pdl(sample_kernel<__nv_bfloat16>, dim3((unsigned)B), dim3(kThreads), 0, st,
		           a);
		break;
	}
	return launch_status();
}
