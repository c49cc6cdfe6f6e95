/*
 * attention_decode.cu - attention of a few new tokens per sequence against
 * a contiguous or a paged KV cache, and the paged cache append (the
 * definitions are in cpu/attention_decode.c).
 *
 * Decode is a stream over the cache: every K and V byte is read once, and
 * the arithmetic (4 * D flops per q row per cached token) is small beside
 * it. One block of 4 warps serves one (sequence, KV head, 16-row tile of
 * q rows, KV split): the rows are the T tokens times the Hq / Hkv query
 * heads that share the KV head, so each K/V byte feeds all of them.
 * Each warp walks its own 16-token tiles of the block's token range
 * (tile w, w + 4, ...): cp.async copies K and V rows (16-byte pieces,
 * three stages deep per warp, zero-filled where a token is skipped) into a
 * swizzled shared buffer, ldmatrix feeds mma.sync m16n8k16 for q.k^T, an
 * f32 online softmax in base 2 turns the scores into p, and p (as the A
 * operand, straight from the score registers) times V accumulates the
 * output in f32. The 4 warps merge their (max, sum, output) through
 * shared memory at the end.
 *
 * Split-KV: when the sequences times KV heads cannot fill the chip (long
 * contexts at small batch), the token range is cut into splits, chosen
 * from shapes alone (the lengths are device data; the launch must be
 * graph-capturable). Each split writes its normalized partial output and
 * base-2 log-sum-exp to the workspace, and a second kernel merges them.
 * Without workspace there is no split. The splits fill one wave of
 * resident blocks: every block streams at once and ends at about the same
 * time, so there is no second wave to start and drain. Blocks of one token
 * range for all KV heads are adjacent, so the blocks running together read
 * whole cache rows (all heads of a token) as the unsplit batched case does.
 *
 * Every kernel here is launched with programmatic dependent launch (when
 * tk_cuda_pdl() is on) and waits for the kernel before it first thing.
 *
 * The choice (tk_call.choice, the attention_decode family of
 * decode_tuning.c): v[0] = N splits instead of the built-in rule, each a
 * whole number of 16-token tiles, no more than the workspace holds. A
 * preferred choice gets the nearest count those bounds allow; an exact one
 * that they do not allow as asked is refused. tileops-tune picks counts
 * per shape class, tileops-bench-decode times them side by side. (Two
 * waves of splits, a merge walking the splits one at a time and a block
 * order with one KV head's splits adjacent were measured slower everywhere:
 * docs/kernel-notes.md, "Attention decode"; they are in git history.)
 *
 * Robustness: lengths are clamped to [0, capacity]; a page index outside
 * [0, num_pages) is never dereferenced: its tokens are skipped (they take
 * no part in the softmax). Rows that see no token get zeros.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "attention_schedule.h"
#include "cuda_common.cuh"
#include "sm90.cuh"

namespace
{

using namespace tkc;

constexpr int kWarps = 4;
constexpr int kTile = 16;  /* tokens per warp tile */
constexpr int kStages = 3; /* cp.async stages per warp */
constexpr int kBlockTokens = kWarps * kTile;
constexpr int kMinSplitTokens = 64; /* splits of the built-in rule: one block's tokens */
constexpr int kSplitWaves = 1;      /* waves of resident blocks the built-in rule fills */
constexpr int kMergeWarps = 8;
constexpr int kMergeUnroll = 4; /* splits whose loads a merge warp has in flight */

struct DecArgs {
	const void *q;
	void *out;
	const void *k, *v;
	const int32_t *seq_lens;
	const int32_t *bt;
	int64_t qs[3], os[3]; /* batch, token, head strides of q and out (elements) */
	int64_t ks[3], vs[3]; /* page (batch when contiguous), slot, head strides */
	int64_t bt_s0, bt_s1, sl_s0;
	int64_t num_pages, cap, page_size, chunk;
	int paged;
	int B, T, Hq, Hkv, G, R, mtiles, nsplit;
	int merge_wr; /* merge warps per q row: 1, 2, 4 or 8 */
	float scale_log2;
	float *ws_o, *ws_lse;
};

using tk_sm90::cp_async16;
using tk_sm90::cp_async_commit;
using tk_sm90::cp_async_wait;
using tk_sm90::smem_addr;

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

/* c += a * b, m16n8k16, f32 accumulators. */
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1)
{
	if constexpr (std::is_same<T, __nv_bfloat16>::value) {
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	} else {
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
		             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		             : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	}
}

/* Two floats as one register of T pairs, the first in the low half. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	uint32_t r;
	if constexpr (std::is_same<T, __nv_bfloat16>::value) {
		__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
		r = *reinterpret_cast<uint32_t *>(&v);
	} else {
		__half2 v = __floats2half2_rn(lo, hi);
		r = *reinterpret_cast<uint32_t *>(&v);
	}
	return r;
}

/* 2^x; 2^-inf is 0. */
__device__ __forceinline__ float ex2(float x)
{
	float y;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
	return y;
}

/* One past the last cache entry q row r sees (token t sees [0, L - T + t]); 0 for pad rows. */
__device__ __forceinline__ int64_t row_end(const DecArgs &a, int64_t L, int r)
{
	if (r >= a.R)
		return 0;
	return L - a.T + r / a.G + 1;
}

__device__ __forceinline__ const char *q_row(const DecArgs &a, int b, int h, int r, int es)
{
	int t = r / a.G, g = r % a.G;
	int64_t off = b * a.qs[0] + t * a.qs[1] + (int64_t)(h * a.G + g) * a.qs[2];
	return static_cast<const char *>(a.q) + off * es;
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) decode_kernel(const __grid_constant__ DecArgs a)
{
	pdl_enter();               /* launched with PDL: the kernel before completes first */
	constexpr int CPR = D / 8; /* 16-byte pieces per row */
	constexpr int TILE_BYTES = kTile * D * 2;
	constexpr int NK = D / 16;
	constexpr int ND = D / 8;
	extern __shared__ __align__(128) unsigned char smem[];
	__shared__ uint32_t vmask[kWarps][kStages];
	__shared__ float sm_m[kWarps][16], sm_l[kWarps][16];

	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	int64_t w = blockIdx.x;
	const int mb = (int)(w % a.mtiles);
	w /= a.mtiles;
	/* The KV heads of one token range are adjacent blocks (file head). */
	const int h = (int)(w % a.Hkv);
	w /= a.Hkv;
	const int split = (int)(w % a.nsplit);
	w /= a.nsplit;
	const int b = (int)w;

	const int64_t len = a.seq_lens[b * a.sl_s0];
	const int64_t L = len < 0 ? 0 : (len > a.cap ? a.cap : len);
	const int64_t c0 = split * a.chunk;
	const int64_t c1 = c0 + a.chunk < L ? c0 + a.chunk : L;
	const int n_tiles = c1 > c0 ? (int)((c1 - c0 + kTile - 1) / kTile) : 0;
	const int my_n = n_tiles > warp ? (n_tiles - warp + kWarps - 1) / kWarps : 0;

	const int r0 = mb * 16 + (lane >> 2), r1 = r0 + 8;
	const int64_t end0 = row_end(a, L, r0), end1 = row_end(a, L, r1);

	/* q rows as mma A fragments, in registers for the whole walk. */
	uint32_t qa[NK][4];
	{
		const char *p0 = r0 < a.R ? q_row(a, b, h, r0, 2) : nullptr;
		const char *p1 = r1 < a.R ? q_row(a, b, h, r1, 2) : nullptr;
		const int cb = (lane & 3) * 2 * 2;
#pragma unroll
		for (int ks = 0; ks < NK; ks++) {
			int o = ks * 32 + cb;
			qa[ks][0] = p0 ? *reinterpret_cast<const uint32_t *>(p0 + o) : 0u;
			qa[ks][1] = p1 ? *reinterpret_cast<const uint32_t *>(p1 + o) : 0u;
			qa[ks][2] = p0 ? *reinterpret_cast<const uint32_t *>(p0 + o + 16) : 0u;
			qa[ks][3] = p1 ? *reinterpret_cast<const uint32_t *>(p1 + o + 16) : 0u;
		}
	}

	unsigned char *wbuf = smem + warp * kStages * 2 * TILE_BYTES;
	const T *kc = static_cast<const T *>(a.k);
	const T *vc = static_cast<const T *>(a.v);

	/* Start copying the warp's i-th tile into stage i % kStages. */
	auto issue = [&](int i) {
		const int st = i % kStages;
		const int64_t tok = c0 + (int64_t)(warp + i * kWarps) * kTile + (lane & 15);
		bool ok = tok < c1;
		int64_t page = b, slot = tok;
		if (a.paged) {
			/* tok < c1 <= capacity keeps pi inside the table row. */
			int64_t pi = tok / a.page_size;
			slot = tok - pi * a.page_size;
			page = 0;
			if (ok)
				page = a.bt[b * a.bt_s0 + pi * a.bt_s1];
			ok = ok && page >= 0 && page < a.num_pages;
		}
		const int64_t ko = ok ? page * a.ks[0] + slot * a.ks[1] + h * a.ks[2] : 0;
		const int64_t vo = ok ? page * a.vs[0] + slot * a.vs[1] + h * a.vs[2] : 0;
		const uint32_t m = __ballot_sync(0xffffffffu, ok) & 0xffffu;
		if (lane == 0)
			vmask[warp][st] = m;
		const uint32_t kd = smem_addr(wbuf + st * 2 * TILE_BYTES), vd = kd + TILE_BYTES;
#pragma unroll
		for (int it = 0; it < kTile * CPR / 32; it++) {
			const int c = it * 32 + lane, row = c / CPR, col = c % CPR;
			const int64_t rko = __shfl_sync(0xffffffffu, ko, row);
			const int64_t rvo = __shfl_sync(0xffffffffu, vo, row);
			const bool rok = (m >> row) & 1u;
			const uint32_t so = (uint32_t)(row * CPR + (col ^ (row & 7))) * 16u;
			cp_async16(kd + so, kc + rko + col * 8, rok);
			cp_async16(vd + so, vc + rvo + col * 8, rok);
		}
	};

	float o[ND][4];
#pragma unroll
	for (int n = 0; n < ND; n++)
		o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
	float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

#pragma unroll
	for (int i = 0; i < kStages - 1; i++) {
		if (i < my_n)
			issue(i);
		cp_async_commit();
	}
	for (int i = 0; i < my_n; i++) {
		if (i + kStages - 1 < my_n)
			issue(i + kStages - 1);
		cp_async_commit();
		cp_async_wait<kStages - 1>();
		__syncwarp();

		const int st = i % kStages;
		const uint32_t kb = smem_addr(wbuf + st * 2 * TILE_BYTES), vb = kb + TILE_BYTES;
		const uint32_t vm = vmask[warp][st];
		const int64_t tb = c0 + (int64_t)(warp + i * kWarps) * kTile;

		float s[2][4] = { { 0.0f, 0.0f, 0.0f, 0.0f }, { 0.0f, 0.0f, 0.0f, 0.0f } };
#pragma unroll
		for (int ks = 0; ks < NK; ks++) {
			const int mat = lane >> 3, row = (mat >> 1) * 8 + (lane & 7);
			const int col = ks * 2 + (mat & 1);
			uint32_t f[4];
			ldsm_x4(f, kb + (uint32_t)(row * CPR + (col ^ (row & 7))) * 16u);
			mma16816<T>(s[0], qa[ks], f[0], f[1]);
			mma16816<T>(s[1], qa[ks], f[2], f[3]);
		}

		/* Mask, then the online softmax of the tile, in base 2. */
		float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
		for (int nt = 0; nt < 2; nt++) {
#pragma unroll
			for (int j = 0; j < 2; j++) {
				const int idx = nt * 8 + (lane & 3) * 2 + j;
				const bool ok = (vm >> idx) & 1u;
				const int64_t tok = tb + idx;
				float x0 = s[nt][j] * a.scale_log2,
				      x1 = s[nt][2 + j] * a.scale_log2;
				s[nt][j] = ok && tok < end0 ? x0 : -INFINITY;
				s[nt][2 + j] = ok && tok < end1 ? x1 : -INFINITY;
				mx0 = fmaxf(mx0, s[nt][j]);
				mx1 = fmaxf(mx1, s[nt][2 + j]);
			}
		}
		mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
		mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
		mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
		mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
		const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
		const float u0 = n0 == -INFINITY ? 0.0f : n0, u1 = n1 == -INFINITY ? 0.0f : n1;
		const float al0 = ex2(m0 - u0), al1 = ex2(m1 - u1);
		m0 = n0;
		m1 = n1;
		float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
		for (int nt = 0; nt < 2; nt++) {
#pragma unroll
			for (int j = 0; j < 2; j++) {
				s[nt][j] = ex2(s[nt][j] - u0);
				s[nt][2 + j] = ex2(s[nt][2 + j] - u1);
				ps0 += s[nt][j];
				ps1 += s[nt][2 + j];
			}
		}
		l0 = l0 * al0 + ps0;
		l1 = l1 * al1 + ps1;
#pragma unroll
		for (int n = 0; n < ND; n++) {
			o[n][0] *= al0;
			o[n][1] *= al0;
			o[n][2] *= al1;
			o[n][3] *= al1;
		}
		uint32_t pa[4];
		pa[0] = pack2<T>(s[0][0], s[0][1]);
		pa[1] = pack2<T>(s[0][2], s[0][3]);
		pa[2] = pack2<T>(s[1][0], s[1][1]);
		pa[3] = pack2<T>(s[1][2], s[1][3]);
#pragma unroll
		for (int dp = 0; dp < D / 16; dp++) {
			const int mat = lane >> 3, row = (mat & 1) * 8 + (lane & 7);
			const int col = dp * 2 + (mat >> 1);
			uint32_t f[4];
			ldsm_x4_t(f, vb + (uint32_t)(row * CPR + (col ^ (row & 7))) * 16u);
			mma16816<T>(o[2 * dp], pa, f[0], f[1]);
			mma16816<T>(o[2 * dp + 1], pa, f[2], f[3]);
		}
		__syncwarp();
	}
	l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
	l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
	l1 += __shfl_xor_sync(0xffffffffu, l1, 2);

	/* Merge the warps: the pipeline buffer now holds each warp's 16 x D outputs. */
	cp_async_wait<0>();
	__syncthreads();
	float *so = reinterpret_cast<float *>(smem);
	{
		float *mine = so + warp * 16 * D;
		const int rr = lane >> 2, cc = (lane & 3) * 2;
#pragma unroll
		for (int n = 0; n < ND; n++) {
			*reinterpret_cast<float2 *>(mine + rr * D + n * 8 + cc) =
			        make_float2(o[n][0], o[n][1]);
			*reinterpret_cast<float2 *>(mine + (rr + 8) * D + n * 8 + cc) =
			        make_float2(o[n][2], o[n][3]);
		}
		if ((lane & 3) == 0) {
			sm_m[warp][rr] = m0;
			sm_m[warp][rr + 8] = m1;
			sm_l[warp][rr] = l0;
			sm_l[warp][rr + 8] = l1;
		}
	}
	__syncthreads();
	for (int idx = threadIdx.x; idx < 16 * D; idx += kWarps * 32) {
		const int r = idx / D, d = idx % D, row = mb * 16 + r;
		if (row >= a.R)
			break; /* rows grow with idx: the rest are padding too */
		float M = sm_m[0][r];
#pragma unroll
		for (int x = 1; x < kWarps; x++)
			M = fmaxf(M, sm_m[x][r]);
		float acc = 0.0f, sum = 0.0f;
#pragma unroll
		for (int x = 0; x < kWarps; x++) {
			const float c = sm_m[x][r] == -INFINITY ? 0.0f : ex2(sm_m[x][r] - M);
			acc += c * so[(x * 16 + r) * D + d];
			sum += c * sm_l[x][r];
		}
		const int t = row / a.G, hq = h * a.G + row % a.G;
		const float val = sum > 0.0f ? acc / sum : 0.0f;
		if (a.nsplit == 1) {
			T *out = static_cast<T *>(a.out);
			out[b * a.os[0] + t * a.os[1] + hq * a.os[2] + d] = from_f32<T>(val);
		} else {
			const int64_t rid = ((int64_t)b * a.T + t) * a.Hq + hq;
			a.ws_o[(rid * a.nsplit + split) * D + d] = val;
			if (d == 0)
				a.ws_lse[rid * a.nsplit + split] =
				        sum > 0.0f ? M + __log2f(sum) : -INFINITY;
		}
	}
}

/*
 * out = the splits' partial outputs weighted by 2^lse. A q row's splits
 * are dealt to merge_wr warps of a block (kMergeWarps / merge_wr rows per
 * block); each warp keeps a running maximum so that it reads every partial
 * and every lse once, with the loads of kMergeUnroll splits in flight
 * together (none waits on a branch), and the row's warps combine through
 * shared memory. Lane l owns columns [l * E, l * E + E).
 */
template <typename T, int D>
__global__ void __launch_bounds__(kMergeWarps * 32) decode_merge(const __grid_constant__ DecArgs a)
{
	pdl_enter(); /* launched with PDL: the kernel before completes first */
	constexpr int E = D / 32;
	__shared__ __align__(16) float s_acc[kMergeWarps][D];
	__shared__ float s_m[kMergeWarps], s_l[kMergeWarps];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int wr = a.merge_wr, sub = warp % wr;
	const int64_t rid = (int64_t)blockIdx.x * (kMergeWarps / wr) + warp / wr;
	const int64_t rows = (int64_t)a.B * a.T * a.Hq;
	const bool live = rid < rows;

	float M = -INFINITY, sum = 0.0f, acc[E];
#pragma unroll
	for (int e = 0; e < E; e++)
		acc[e] = 0.0f;
	if (live) {
		const float *lse = a.ws_lse + rid * a.nsplit;
		const float *po = a.ws_o + rid * a.nsplit * D + lane * E;
		for (int s0 = sub; s0 < a.nsplit; s0 += wr * kMergeUnroll) {
			float l[kMergeUnroll], v[kMergeUnroll][E];
#pragma unroll
			for (int u = 0; u < kMergeUnroll; u++) {
				const int s = s0 + u * wr;
				l[u] = -INFINITY;
#pragma unroll
				for (int e = 0; e < E; e++)
					v[u][e] = 0.0f;
				if (s < a.nsplit) {
					l[u] = lse[s];
					ld_floats<E>(v[u], po + (int64_t)s * D);
				}
			}
			float mx = M;
#pragma unroll
			for (int u = 0; u < kMergeUnroll; u++)
				mx = fmaxf(mx, l[u]);
			if (mx == -INFINITY)
				continue; /* every split so far saw no token */
			/* 2^-inf is 0: a first maximum scales the empty sums by 0. */
			const float sc = ex2(M - mx);
			sum *= sc;
#pragma unroll
			for (int e = 0; e < E; e++)
				acc[e] *= sc;
#pragma unroll
			for (int u = 0; u < kMergeUnroll; u++) {
				const float c = ex2(l[u] - mx);
				sum += c;
#pragma unroll
				for (int e = 0; e < E; e++)
					acc[e] += c * v[u][e];
			}
			M = mx;
		}
	}
#pragma unroll
	for (int e = 0; e < E; e++)
		s_acc[warp][lane * E + e] = acc[e];
	if (lane == 0) {
		s_m[warp] = M;
		s_l[warp] = sum;
	}
	__syncthreads();
	if (!live || sub != 0)
		return;
	float Mt = -INFINITY;
	for (int x = 0; x < wr; x++)
		Mt = fmaxf(Mt, s_m[warp + x]);
	float tot = 0.0f, r[E];
#pragma unroll
	for (int e = 0; e < E; e++)
		r[e] = 0.0f;
	for (int x = 0; x < wr; x++) {
		const float c = s_m[warp + x] == -INFINITY ? 0.0f : ex2(s_m[warp + x] - Mt);
		tot += c * s_l[warp + x];
#pragma unroll
		for (int e = 0; e < E; e++)
			r[e] += c * s_acc[warp + x][lane * E + e];
	}
	const int hq = (int)(rid % a.Hq), t = (int)((rid / a.Hq) % a.T);
	const int64_t b = rid / ((int64_t)a.Hq * a.T);
	T *out = static_cast<T *>(a.out) + b * a.os[0] + t * a.os[1] + hq * a.os[2] + lane * E;
#pragma unroll
	for (int e = 0; e < E; e++)
		out[e] = from_f32<T>(tot > 0.0f ? r[e] / tot : 0.0f);
}

/* ---- host side ------------------------------------------------------------ */

constexpr size_t smem_bytes(int D)
{
	return (size_t)kWarps * kStages * 2 * kTile * D * 2;
}

static bool is_half(tk_dtype dt)
{
	return dt == TK_F16 || dt == TK_BF16;
}

/*
 * Read and check a decode call into `a` (all but the split). Shapes as in
 * cpu/attention_decode.c; besides, this kernel needs D in {64, 128, 256},
 * 16-byte aligned caches with 16-byte aligned row strides, and 4-byte
 * aligned q and out heads.
 */
static tk_status decode_parse(const tk_call *call, int paged, DecArgs *a, int *D)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
	const tk_tensor *bt = paged ? &call->in[3] : nullptr;
	const tk_tensor *sl = &call->in[paged ? 4 : 3];
	const tk_tensor *out = &call->out[0];

	if (call->n_in < (paged ? 5 : 4) || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	if (!is_half(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype ||
	    out->dtype != q->dtype || sl->dtype != TK_I32 || (bt && bt->dtype != TK_I32))
		return TK_ERR_UNSUPPORTED;
	if ((q->ndim != 3 && q->ndim != 4) || out->ndim != q->ndim || k->ndim != 4 ||
	    v->ndim != 4 || sl->ndim != 1 || (bt && bt->ndim != 2))
		return TK_ERR_UNSUPPORTED;
	for (int d = 0; d < q->ndim; d++)
		if (out->shape[d] != q->shape[d])
			return TK_ERR_UNSUPPORTED;
	for (int d = 0; d < 4; d++)
		if (v->shape[d] != k->shape[d])
			return TK_ERR_UNSUPPORTED;
	const int q4 = q->ndim == 4;
	const int64_t B = q->shape[0], T = q4 ? q->shape[1] : 1;
	const int64_t Hq = q->shape[q->ndim - 2], Dq = q->shape[q->ndim - 1];
	const int64_t Hkv = k->shape[2];
	if (k->shape[3] != Dq || Hkv < 1 || Hq % Hkv != 0 || sl->shape[0] != B)
		return TK_ERR_UNSUPPORTED;
	if (q->stride[q->ndim - 1] != 1 || out->stride[out->ndim - 1] != 1 || k->stride[3] != 1 ||
	    v->stride[3] != 1 || (bt && bt->stride[1] != 1 && bt->shape[1] > 1))
		return TK_ERR_UNSUPPORTED;
	if (paged) {
		if (bt->shape[0] != B || k->shape[1] < 1)
			return TK_ERR_UNSUPPORTED;
	} else if (k->shape[0] != B) {
		return TK_ERR_UNSUPPORTED;
	}
	if (Dq != 64 && Dq != 128 && Dq != 256)
		return TK_ERR_UNSUPPORTED;
	if (B > INT32_MAX || Hq > INT32_MAX || (Hq > 0 && T > INT32_MAX / Hq))
		return TK_ERR_UNSUPPORTED;

	memset(a, 0, sizeof(*a));
	a->q = q->data;
	a->out = out->data;
	a->k = k->data;
	a->v = v->data;
	a->seq_lens = static_cast<const int32_t *>(sl->data);
	a->sl_s0 = sl->stride[0];
	a->qs[0] = q->stride[0];
	a->qs[1] = q4 ? q->stride[1] : 0;
	a->qs[2] = q->stride[q->ndim - 2];
	a->os[0] = out->stride[0];
	a->os[1] = q4 ? out->stride[1] : 0;
	a->os[2] = out->stride[out->ndim - 2];
	for (int d = 0; d < 3; d++) {
		a->ks[d] = k->stride[d];
		a->vs[d] = v->stride[d];
	}
	a->paged = paged;
	if (paged) {
		a->bt = static_cast<const int32_t *>(bt->data);
		a->bt_s0 = bt->stride[0];
		a->bt_s1 = bt->stride[1];
		a->num_pages = k->shape[0];
		a->page_size = k->shape[1];
		a->cap = bt->shape[1] * k->shape[1];
	} else {
		a->num_pages = B;
		a->page_size = k->shape[1];
		a->cap = k->shape[1];
	}
	a->B = (int)B;
	a->T = (int)T;
	a->Hq = (int)Hq;
	a->Hkv = (int)Hkv;
	a->G = (int)(Hq / Hkv);
	a->R = a->T * a->G;
	a->mtiles = (a->R + 15) / 16;
	*D = (int)Dq;

	/* Alignment the vector copies and the 32-bit q loads rely on. */
	bool ok = aligned16(k->data) && aligned16(v->data) && ((uintptr_t)q->data & 3) == 0;
	for (int d = 0; d < 3; d++)
		ok = ok && (k->stride[d] % 8 == 0 || k->shape[d] == 1) &&
		     (v->stride[d] % 8 == 0 || v->shape[d] == 1);
	for (int d = 0; d < 3; d++)
		ok = ok && a->qs[d] % 2 == 0;
	return ok ? TK_OK : TK_ERR_UNSUPPORTED;
}

/*
 * Splits of the token range, from shapes only, no more than the workspace
 * holds. requested > 0 asks for that many (the call's choice); 0 is the
 * built-in rule: none when the blocks without splitting already fill every
 * resident slot of the chip; otherwise as many as fit in kSplitWaves waves
 * of resident blocks (rounded down: a wave left part empty costs less than
 * a wave's worth of a second one), each at least kMinSplitTokens tokens.
 * Sets nsplit, chunk, the workspace pointers and the merge's warps per row.
 */
static void decode_plan_split(DecArgs *a, int D, const tk_call *call, int64_t requested)
{
	const int64_t base = (int64_t)a->B * a->Hkv * a->mtiles;
	const int per_sm = (int)(227 * 1024 / (smem_bytes(D) + 2048));
	const int64_t slots = (int64_t)sm_count() * (per_sm < 1 ? 1 : per_sm);
	const int64_t rows = (int64_t)a->B * a->T * a->Hq;
	int64_t n = 1, unit = kBlockTokens;

	a->nsplit = 1;
	a->chunk = a->cap > 0 ? a->cap : 1;
	if (call->workspace == nullptr || rows == 0 || a->cap <= 0)
		return;
	if (requested > 0) {
		n = requested;
		unit = kTile; /* keep the asked count where the warps' shares allow */
	} else if (base >= slots || a->cap <= 2 * kMinSplitTokens) {
		return;
	} else {
		n = kSplitWaves * slots / base;
		if (n > (a->cap + kMinSplitTokens - 1) / kMinSplitTokens)
			n = (a->cap + kMinSplitTokens - 1) / kMinSplitTokens;
	}
	const int64_t fit = (int64_t)(call->workspace_bytes / ((size_t)rows * (D + 1) * 4));
	if (n > fit)
		n = fit;
	if (n > (a->cap + kTile - 1) / kTile)
		n = (a->cap + kTile - 1) / kTile;
	if (n < 2)
		return;
	int64_t chunk = (a->cap + n - 1) / n;
	chunk = (chunk + unit - 1) / unit * unit;
	n = (a->cap + chunk - 1) / chunk;
	if (n < 2 || n > INT32_MAX)
		return;
	a->chunk = chunk;
	a->nsplit = (int)n;
	a->ws_o = static_cast<float *>(call->workspace);
	a->ws_lse = a->ws_o + rows * a->nsplit * D;
	/* Enough warps per row that each has about kMergeUnroll splits: one round of loads. */
	a->merge_wr = 1;
	while (a->merge_wr < kMergeWarps && a->merge_wr * kMergeUnroll < a->nsplit)
		a->merge_wr *= 2;
}

/* The split count the call's choice asks for: 0 for the built-in rule. */
static int64_t requested_splits(const tk_choice &c)
{
	if (c.mode != TK_CHOICE_PREFER && c.mode != TK_CHOICE_EXACT)
		return 0;
	return c.v[0] >= 1 ? c.v[0] : 0;
}

template <typename T, int D> static tk_status decode_launch(DecArgs &a, cudaStream_t st)
{
	const size_t smem = smem_bytes(D);
	const int64_t blocks = (int64_t)a.B * a.Hkv * a.mtiles * a.nsplit;
	const int64_t rows = (int64_t)a.B * a.T * a.Hq;

	if (blocks == 0)
		return TK_OK;
	if (blocks > INT32_MAX)
		return TK_ERR_UNSUPPORTED;
	static std::atomic<uint64_t> raised{ 0 };
	if (tkc::allow_dynamic_smem(reinterpret_cast<const void *>(decode_kernel<T, D>), (int)smem,
	                            raised) != cudaSuccess) {
		(void)cudaGetLastError();
		return TK_ERR_LAUNCH;
	}
	launch_begin();
	launch_pdl(decode_kernel<T, D>, (unsigned)blocks, kWarps * 32, smem, st, a);
	if (a.nsplit > 1) {
		const int64_t per = kMergeWarps / a.merge_wr;
		const unsigned grid = (unsigned)((rows + per - 1) / per);
		launch_pdl(decode_merge<T, D>, grid, kMergeWarps * 32, 0, st, a);
	}
	return launch_status();
}

template <typename T> static tk_status decode_dispatch(DecArgs &a, int D, cudaStream_t st)
{
	switch (D) {
	case 64:
		return decode_launch<T, 64>(a, st);
	case 128:
		return decode_launch<T, 128>(a, st);
	default:
		return decode_launch<T, 256>(a, st);
	}
}

static tk_status decode_run(const tk_call *call, int paged, void *stream)
{
	DecArgs a;
	int D = 0;
	tk_status s = decode_parse(call, paged, &a, &D);

	if (s != TK_OK)
		return s;
	if (a.B == 0 || a.T == 0 || a.Hq == 0)
		return TK_OK;
	a.scale_log2 = (float)(tk_param_num(call, 0, 0.0) > 0.0 ? tk_param_num(call, 0, 0.0)
	                                                        : 1.0 / sqrt((double)D)) *
	               1.4426950408889634f;
	const int64_t want = requested_splits(call->choice);
	decode_plan_split(&a, D, call, want);
	if (call->choice.mode == TK_CHOICE_EXACT && want > 0 && a.nsplit != want)
		return TK_ERR_UNSUPPORTED;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	if (call->in[0].dtype == TK_BF16)
		return decode_dispatch<__nv_bfloat16>(a, D, st);
	return decode_dispatch<__half>(a, D, st);
}

/*
 * The split counts worth timing for a call (decode_tuning.c): 1 (no
 * split), the built-in rule's count, and a spread of counts between, each
 * only where the bounds realize it as asked, each once.
 */
static int decode_candidates(const tk_call *call, int paged, tk_choice *out, int max)
{
	static const int64_t spread[] = {
		2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256
	};
	int64_t counts[2 + sizeof(spread) / sizeof(spread[0])];
	DecArgs a;
	int D = 0, n = 0, nc = 0;

	if (decode_parse(call, paged, &a, &D) != TK_OK)
		return 0;
	counts[nc++] = 1;
	decode_plan_split(&a, D, call, 0);
	counts[nc++] = a.nsplit;
	for (int64_t c : spread)
		counts[nc++] = c;
	for (int i = 0; i < nc; i++) {
		bool seen = false;
		for (int j = 0; j < i; j++)
			seen = seen || counts[j] == counts[i];
		DecArgs t = a;
		decode_plan_split(&t, D, call, counts[i]);
		if (seen || t.nsplit != counts[i])
			continue;
		if (n < max) {
			memset(&out[n], 0, sizeof(out[n]));
			out[n].mode = TK_CHOICE_EXACT;
			out[n].v[0] = (int32_t)counts[i];
		}
		n++;
	}
	return n;
}

/* ---- kv_cache_append ---------------------------------------------------------- */

struct AppArgs {
	const char *k, *v;
	char *kc, *vc;
	const void *slots;
	int slots64;
	int64_t T, H, units;    /* units of U per head row */
	int64_t ks[2], vs[2];   /* token and head strides of k and v, in bytes */
	int64_t kcs[3], vcs[3]; /* page, slot and head strides of the caches, in bytes */
	int64_t sl_s0, page_size, num_slots;
};

/* A grid-stride copy of every (token, head) row whose slot is in range, U at a time. */
template <typename U>
__global__ void __launch_bounds__(256) append_kernel(const __grid_constant__ AppArgs a)
{
	pdl_enter(); /* launched with PDL: the kernel before completes first */
	const int64_t total = a.T * a.H * a.units;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t c = i % a.units, r = i / a.units;
		int64_t hh = r % a.H, t = r / a.H;
		int64_t slot = a.slots64 ? static_cast<const int64_t *>(a.slots)[t * a.sl_s0]
		                         : static_cast<const int32_t *>(a.slots)[t * a.sl_s0];
		if (slot < 0 || slot >= a.num_slots)
			continue;
		int64_t page = slot / a.page_size, off = slot - page * a.page_size;
		int64_t cb = c * (int64_t)sizeof(U);
		*reinterpret_cast<U *>(a.kc + page * a.kcs[0] + off * a.kcs[1] + hh * a.kcs[2] +
		                       cb) =
		        *reinterpret_cast<const U *>(a.k + t * a.ks[0] + hh * a.ks[1] + cb);
		*reinterpret_cast<U *>(a.vc + page * a.vcs[0] + off * a.vcs[1] + hh * a.vcs[2] +
		                       cb) =
		        *reinterpret_cast<const U *>(a.v + t * a.vs[0] + hh * a.vs[1] + cb);
	}
}

template <typename U> static tk_status append_launch(AppArgs &a, size_t es, cudaStream_t st)
{
	a.units = a.units * (int64_t)es / (int64_t)sizeof(U);
	launch_begin();
	launch_pdl(append_kernel<U>, grid_persistent(a.T * a.H * a.units, 256, 8), 256, 0, st, a);
	return launch_status();
}

} /* namespace */

extern "C" tk_status tk_cuda_attention_decode(const tk_call *call, void *stream)
{
	return decode_run(call, 0, stream);
}

extern "C" tk_status tk_cuda_attention_decode_paged(const tk_call *call, void *stream)
{
	return decode_run(call, 1, stream);
}

extern "C" int tk_attention_decode_candidates(const tk_call *call, int paged, tk_choice *out,
                                              int max)
{
	return decode_candidates(call, paged, out, max);
}

extern "C" tk_status tk_cuda_kv_cache_append(const tk_call *call, void *stream)
{
	const tk_tensor *k = &call->in[0], *v = &call->in[1], *sm = &call->in[2];
	const tk_tensor *kc = &call->in[3], *vc = &call->in[4];
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	AppArgs a;

	if (call->n_in < 5 || k->ndim != 3 || v->ndim != 3 || kc->ndim != 4 || vc->ndim != 4 ||
	    sm->ndim != 1)
		return TK_ERR_UNSUPPORTED;
	const size_t es = tk_dtype_size(k->dtype);
	if (es == 0 || v->dtype != k->dtype || kc->dtype != k->dtype || vc->dtype != k->dtype ||
	    (sm->dtype != TK_I32 && sm->dtype != TK_I64))
		return TK_ERR_UNSUPPORTED;
	for (int d = 0; d < 3; d++)
		if (v->shape[d] != k->shape[d])
			return TK_ERR_UNSUPPORTED;
	for (int d = 0; d < 4; d++)
		if (vc->shape[d] != kc->shape[d])
			return TK_ERR_UNSUPPORTED;
	if (sm->shape[0] != k->shape[0] || kc->shape[2] != k->shape[1] ||
	    kc->shape[3] != k->shape[2] || k->stride[2] != 1 || v->stride[2] != 1 ||
	    kc->stride[3] != 1 || vc->stride[3] != 1)
		return TK_ERR_UNSUPPORTED;
	memset(&a, 0, sizeof(a));
	a.k = static_cast<const char *>(k->data);
	a.v = static_cast<const char *>(v->data);
	a.kc = static_cast<char *>(kc->data);
	a.vc = static_cast<char *>(vc->data);
	a.slots = sm->data;
	a.slots64 = sm->dtype == TK_I64;
	a.sl_s0 = sm->stride[0];
	a.T = k->shape[0];
	a.H = k->shape[1];
	a.units = k->shape[2];
	a.page_size = kc->shape[1];
	a.num_slots = kc->shape[0] * kc->shape[1];
	for (int d = 0; d < 2; d++) {
		a.ks[d] = k->stride[d] * (int64_t)es;
		a.vs[d] = v->stride[d] * (int64_t)es;
	}
	for (int d = 0; d < 3; d++) {
		a.kcs[d] = kc->stride[d] * (int64_t)es;
		a.vcs[d] = vc->stride[d] * (int64_t)es;
	}
	if (a.T == 0 || a.H == 0 || a.units == 0 || a.page_size == 0)
		return TK_OK;
	/* 16-byte pieces when every row start is 16-byte aligned. */
	bool vec = (a.units * (int64_t)es) % 16 == 0 && aligned16(a.k) && aligned16(a.v) &&
	           aligned16(a.kc) && aligned16(a.vc);
	for (int d = 0; d < 2; d++)
		vec = vec && a.ks[d] % 16 == 0 && a.vs[d] % 16 == 0;
	for (int d = 0; d < 3; d++)
		vec = vec && a.kcs[d] % 16 == 0 && a.vcs[d] % 16 == 0;
	if (vec)
		return append_launch<uint4>(a, es, st);
	if (es == 4)
		return append_launch<uint32_t>(a, es, st);
	if (es == 2)
		return append_launch<uint16_t>(a, es, st);
	return append_launch<uint8_t>(a, es, st);
}
