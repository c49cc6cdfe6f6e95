/*
 * attention_prefill.cu - attention_prefill and attention_prefill_varlen on
 * sm_90a, in the manner of FlashAttention-3.
 *
 * One CTA computes a 128-row query tile of one (sequence, head). Warpgroup 0
 * is the producer: it gives up registers and one thread issues bulk tensor
 * copies (TMA) of the Q tile and of K and V tiles into a ring of shared-memory
 * stages, each stage guarded by mbarriers (K and V land separately, so the
 * score product starts before V arrives). Warpgroups 1 and 2 are consumers,
 * 64 query rows each, with the registers the producer gave up: S = Q K^T by
 * wgmma from shared memory, the online softmax in registers (exp2 with the
 * scale folded into log2 e), then O += P V by wgmma with P straight from the
 * score registers (the register-A form) and V read MN-major through the
 * descriptor's transpose bit. Each consumer is software-pipelined: the
 * scores of key tile t are issued before the P V product of tile t - 1, so
 * its softmax runs while the tensor cores work; the two consumers also fill
 * each other's gaps. One path serves every case: head dims 64, 128 and 256
 * (Dv = D), bf16 and f16, GQA, causal or not, batched or varlen.
 *
 * Schedules (attention_schedule.h; the call's choice picks one, else the
 * built-in rule, prefill_schedule): refinements of that loop that each win
 * on some shapes: the two consumers taking turns at the tensor cores
 * through named barriers (each one's softmax then runs under the other's
 * products), a leaner loop (the accumulators rescaled under the score
 * product and only when a maximum grew, one release per warp instead of
 * per thread), wider key tiles for non-causal d128 (176 keys) and d256 (80
 * keys), and a causal order that is longest first across groups of heads.
 *
 * Non-causal launches are persistent (one CTA per SM walks the query tiles,
 * the producer loading the next tile's Q and K while the consumers store the
 * last one). Causal attention is aligned bottom-right (query i sees keys
 * j <= i + Skv - S): tiles past the diagonal are never loaded, only tiles
 * that cross it are masked, and one CTA per query tile, longest first, lets
 * the hardware balance the uneven lengths.
 *
 * Varlen: cu_seqlens are read on the device only, clamped to [0, T] and to
 * monotonic, so no client value can move a load or store out of bounds;
 * tiles past a sequence's end return at once. Rows past a sequence's end that
 * a tile loads belong to the next sequence (or are zero beyond T) and are
 * masked out of the scores.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <math.h>
#include <stdlib.h>

#include "attention_prefill.cuh"
#include "attention_schedule.h"
#include "cuda_common.cuh"
#include "tma_map.cuh"

namespace
{

constexpr int BM = 128;      /* query rows per CTA */
constexpr int THREADS = 384; /* producer + two consumer warpgroups */
constexpr int PRODUCER_REGS = 24;
constexpr int CONSUMER_REGS = 240;

constexpr uint32_t SMEM_LIMIT = 227 * 1024; /* a block's dynamic shared memory on sm_90 */

/* Keys per tile: the default, and the wider tiles of the wide schedules. */
constexpr int default_bn(int d)
{
	return tk_prefill_default_bn(d);
}

constexpr int wide_bn(int d)
{
	return tk_prefill_wide_bn(d);
}

/* The tiles of head dim D with BN keys: as many stages (up to 4) as fit. */
template <int D, int BN_> struct Tile {
	static constexpr int BN = BN_;
	static constexpr int KB = D / 64; /* [rows][64] blocks across D */
	static constexpr uint32_t Q_BYTES = BM * D * 2;
	static constexpr uint32_t KV_BYTES = BN * D * 2;
	static constexpr uint32_t FIT = (SMEM_LIMIT - 1024 - 256 - Q_BYTES) / (2 * KV_BYTES);
	static constexpr int STAGES = FIT > 4 ? 4 : (int)FIT;
	static_assert(STAGES >= 2, "two stages must fit");
	static constexpr uint32_t BAR_BYTES = 8 * (2 + 4 * STAGES);
	/* 1024 of slack to align the tiles to the swizzle atom. */
	static constexpr uint32_t SMEM = 1024 + Q_BYTES + 2 * STAGES * KV_BYTES + BAR_BYTES;
};

struct Args {
	CUtensorMap tq, tk, tv;
	void *out;
	float *lse;               /* NULL when the caller left lse out */
	const int *cu_q, *cu_k;   /* varlen: [B + 1] on the device; else NULL */
	int64_t o_sb, o_ss, o_sh; /* out strides (elements): sequence, token, head */
	int64_t l_sb, l_sh;       /* lse strides: sequence, head (tokens are packed) */
	int S, Skv;               /* batched: lengths; varlen: Tq, Tk */
	int group;                /* Hq / Hkv */
	int Hq, n_mt;             /* q heads; query tiles per sequence */
	int n_items;              /* work items: n_mt * Hq * B */
	float scale;
	float scale_log2; /* scale * log2(e) */
	int turns;        /* the consumers take turns at the tensor cores (see turn_begin) */
	int lean;         /* the leaner consumer loop (see consume) */
	int head_group;   /* causal: heads per longest-first group (work_of); 0: per head */
};

/* [start, start + len) of sequence b, clamped to [0, T] and to monotonic. */
__device__ __forceinline__ void seq_bounds(const int *cu, int b, int T, int *start, int *len)
{
	int s = min(max(__ldg(cu + b), 0), T);
	int e = min(max(__ldg(cu + b + 1), s), T);

	*start = s;
	*len = e - s;
}

/* Key tiles the query tile at m0 needs: none past the causal diagonal. */
template <bool CAUSAL>
__device__ __forceinline__ int tiles_needed(int m0, int q_len, int kv_len, int bn)
{
	int n_end = kv_len;

	if (CAUSAL) {
		int last_row = min(m0 + BM, q_len) - 1;
		n_end = min(kv_len, last_row + (kv_len - q_len) + 1);
	}
	return n_end <= 0 ? 0 : (n_end + bn - 1) / bn;
}

__device__ __forceinline__ float ex2(float x)
{
	float r;
	asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
	return r;
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi, bool bf16)
{
	if (bf16) {
		__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
		return *reinterpret_cast<uint32_t *>(&v);
	}
	__half2 v = __floats2half2_rn(lo, hi);
	return *reinterpret_cast<uint32_t *>(&v);
}

template <int N, bool BF16>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int acc)
{
	if constexpr (N == 64)
		tkp::wgmma_ss_n64<BF16>(d, da, db, acc);
	else if constexpr (N == 80)
		tkp::wgmma_ss_n80<BF16>(d, da, db, acc);
	else if constexpr (N == 128)
		tkp::wgmma_ss_n128<BF16>(d, da, db, acc);
	else
		tkp::wgmma_ss_n176<BF16>(d, da, db, acc);
}

template <int N, bool BF16>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db)
{
	if constexpr (N == 64)
		tkp::wgmma_rs_n64<BF16>(d, a, db);
	else if constexpr (N == 128)
		tkp::wgmma_rs_n128<BF16>(d, a, db);
	else
		tkp::wgmma_rs_n256<BF16>(d, a, db);
}

/* Where a CTA's work lies: its sequence, head and query tile. */
struct Work {
	int b;          /* sequence */
	int h, hk, bc;  /* q head, kv head, batch coordinate of the tensor maps */
	int qs, q_len;  /* first token and length of the query sequence */
	int ks, kv_len; /* same for the keys */
	int m0;         /* first query row of the tile, within the sequence */
	int n_tiles;    /* key tiles to visit */
};

/*
 * Work item `item`, query tiles fastest so the tiles of one head run close
 * together in time and share its K and V in L2; causal tiles longest first.
 * With a.head_group > 0, causal items go longest first across a group of
 * that many heads (heads fastest): the blocks the hardware starts last are
 * then short ones, while the group's K and V still fit in L2.
 */
template <int BN, bool CAUSAL>
__device__ __forceinline__ bool work_of(const Args &a, int item, Work *w)
{
	int per_b = a.n_mt * a.Hq;
	int b = item / per_b, r = item - b * per_b;
	int hq, mt;

	if (CAUSAL && a.head_group > 0) {
		int span = a.n_mt * a.head_group;
		int g = r / span, rr = r - g * span;
		int gh = min(a.head_group, a.Hq - g * a.head_group);
		mt = rr / gh;
		hq = g * a.head_group + (rr - mt * gh);
	} else {
		hq = r / a.n_mt;
		mt = r - hq * a.n_mt;
	}
	if (CAUSAL)
		mt = a.n_mt - 1 - mt;
	w->b = b;
	w->h = hq;
	w->hk = w->h / a.group;
	if (a.cu_q) {
		seq_bounds(a.cu_q, b, a.S, &w->qs, &w->q_len);
		seq_bounds(a.cu_k, b, a.Skv, &w->ks, &w->kv_len);
		w->bc = 0;
	} else {
		w->qs = 0;
		w->q_len = a.S;
		w->ks = 0;
		w->kv_len = a.Skv;
		w->bc = b;
	}
	w->m0 = mt * BM;
	if (w->m0 >= w->q_len)
		return false;
	w->n_tiles = tiles_needed<CAUSAL>(w->m0, w->q_len, w->kv_len, BN);
	return true;
}

/* The mbarriers of the stage ring, in shared memory after the tiles. */
struct Bars {
	uint64_t *q_full, *q_empty;
	uint64_t *k_full, *v_full;   /* [STAGES]: the copy landed */
	uint64_t *k_empty, *v_empty; /* [STAGES]: both consumers are done with it */
};

/*
 * One thread: Q once, then K and V of every key tile into the ring. A stage's
 * K and V are released separately (K as soon as the scores are in registers),
 * so the next K goes out while the previous P V product still reads V.
 */
template <int D, int BN, bool CAUSAL>
__device__ __forceinline__ void produce(const Args &a, uint8_t *sQ, uint8_t *sK, uint8_t *sV,
                                        const Bars &bar)
{
	using Tl = Tile<D, BN>;
	uint32_t it = 0, nq = 0; /* key tiles and Q tiles loaded so far */

	for (int item = blockIdx.x; item < a.n_items; item += gridDim.x) {
		Work w;
		if (!work_of<BN, CAUSAL>(a, item, &w) || w.n_tiles == 0)
			continue;
		if (nq > 0) /* the consumers are done with the previous Q */
			tkp::mbar_wait(bar.q_empty, (nq - 1) & 1);
		nq++;
		tkp::mbar_expect_tx(bar.q_full, Tl::Q_BYTES);
		for (int kb = 0; kb < Tl::KB; kb++)
			tkp::tma_load_4d(sQ + kb * BM * 128, &a.tq, bar.q_full, kb * 64, w.h,
			                 w.qs + w.m0, w.bc);
		for (int t = 0; t < w.n_tiles; t++, it++) {
			int s = it % Tl::STAGES;
			uint32_t parity = ((it / Tl::STAGES) & 1) ^ 1;
			int row = w.ks + t * Tl::BN;
			uint8_t *k = sK + s * Tl::KV_BYTES, *v = sV + s * Tl::KV_BYTES;

			if (it >= Tl::STAGES)
				tkp::mbar_wait(&bar.k_empty[s], parity);
			tkp::mbar_expect_tx(&bar.k_full[s], Tl::KV_BYTES);
			for (int kb = 0; kb < Tl::KB; kb++)
				tkp::tma_load_4d(k + kb * Tl::BN * 128, &a.tk, &bar.k_full[s],
				                 kb * 64, w.hk, row, w.bc);
			if (it >= Tl::STAGES)
				tkp::mbar_wait(&bar.v_empty[s], parity);
			tkp::mbar_expect_tx(&bar.v_full[s], Tl::KV_BYTES);
			for (int kb = 0; kb < Tl::KB; kb++)
				tkp::tma_load_4d(v + kb * Tl::BN * 128, &a.tv, &bar.v_full[s],
				                 kb * 64, w.hk, row, w.bc);
		}
	}
}

/* Scores past the sequence's keys or the causal diagonal become -inf. */
template <int BN, bool CAUSAL>
__device__ __forceinline__ void mask_tile(float (&sc)[BN / 2], int n0, int row0, int kv_len,
                                          int off, int lane)
{
#pragma unroll
	for (int j = 0; j < BN / 8; j++) {
#pragma unroll
		for (int e = 0; e < 2; e++) {
			int col = n0 + 8 * j + 2 * (lane & 3) + e;
#pragma unroll
			for (int hf = 0; hf < 2; hf++) {
				bool out = col >= kv_len || (CAUSAL && col > row0 + 8 * hf + off);
				if (out)
					sc[4 * j + 2 * hf + e] = -INFINITY;
			}
		}
	}
}

template <int D, bool BF16>
__device__ __forceinline__ void store_rows(const Args &a, const Work &w, float (&o)[D / 2],
                                           const float (&mx)[2], float (&l)[2], int row0, int lane)
{
	typedef typename std::conditional<BF16, __nv_bfloat16, __half>::type T;
	int b = w.b;

#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		l[hf] += __shfl_xor_sync(0xffffffffu, l[hf], 1);
		l[hf] += __shfl_xor_sync(0xffffffffu, l[hf], 2);
		int row = row0 + 8 * hf;
		if (row >= w.q_len)
			continue;
		float inv = l[hf] > 0.0f ? 1.0f / l[hf] : 0.0f;
		int64_t tok = w.qs + row;
		T *dst = (T *)a.out + b * a.o_sb + tok * a.o_ss + w.h * a.o_sh + 2 * (lane & 3);
#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			uint32_t v =
			        pack2(o[4 * j + 2 * hf] * inv, o[4 * j + 2 * hf + 1] * inv, BF16);
			*reinterpret_cast<uint32_t *>(dst + 8 * j) = v;
		}
		if (a.lse && (lane & 3) == 0) {
			float lse = l[hf] > 0.0f ? mx[hf] * a.scale + logf(l[hf]) : -INFINITY;
			a.lse[b * a.l_sb + w.h * a.l_sh + tok] = lse;
		}
	}
}

/*
 * S = Q K^T for this warpgroup's 64 rows against the key tile in `k_addr`.
 * The first k-step overwrites sc, so clearing it first (`clear`) only spends
 * instructions; it keeps the compiler from reading stale registers.
 */
template <int D, int BN, bool BF16>
__device__ __forceinline__ void issue_scores(float (&sc)[BN / 2], uint32_t q_addr, uint32_t k_addr,
                                             bool clear)
{
	if (clear) {
#pragma unroll
		for (int i = 0; i < BN / 2; i++)
			sc[i] = 0.0f;
	}
	tkp::wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < D / 16; kk++) {
		uint32_t in_blk = (kk & 3) * 32;
		uint64_t dq = tkp::sw128_desc(q_addr + (kk >> 2) * BM * 128 + in_blk, 16, 1024);
		uint64_t dk = tkp::sw128_desc(k_addr + (kk >> 2) * BN * 128 + in_blk, 16, 1024);
		mma_ss<BN, BF16>(sc, dq, dk, kk > 0);
	}
	tkp::wgmma_commit();
}

/* O += P V with P from registers and V (MN-major) in `v_addr`. */
template <int D, int BN, bool BF16>
__device__ __forceinline__ void issue_pv(float (&o)[D / 2], const uint32_t (&p)[BN / 16][4],
                                         uint32_t v_addr)
{
	tkp::wgmma_fence();
#pragma unroll
	for (int kk = 0; kk < BN / 16; kk++) {
		uint64_t dv = tkp::sw128_desc(v_addr + kk * 16 * 128, BN * 128, 1024);
		mma_rs<D, BF16>(o, p[kk], dv);
	}
	tkp::wgmma_commit();
}

/*
 * The online-softmax step for one tile of scores: the new row maxima, the
 * factor the old accumulators must be scaled by (corr), and the scores
 * replaced in place by exp2((s - max) * scale * log2 e), summed into l.
 */
template <int BN>
__device__ __forceinline__ void softmax_step(float (&sc)[BN / 2], float (&mx)[2], float (&l)[2],
                                             float (&corr)[2], float sl2)
{
#pragma unroll
	for (int hf = 0; hf < 2; hf++) {
		float m = mx[hf];
#pragma unroll
		for (int j = 0; j < BN / 8; j++)
			m = fmaxf(m, fmaxf(sc[4 * j + 2 * hf], sc[4 * j + 2 * hf + 1]));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
		m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
		/* A row with nothing visible yet keeps a finite reference. */
		float use = m == -INFINITY ? 0.0f : m;
		float neg = -use * sl2;
		float sum = 0.0f;
		corr[hf] = ex2((mx[hf] - use) * sl2);
		mx[hf] = m;
#pragma unroll
		for (int j = 0; j < BN / 8; j++) {
			sc[4 * j + 2 * hf] = ex2(fmaf(sc[4 * j + 2 * hf], sl2, neg));
			sc[4 * j + 2 * hf + 1] = ex2(fmaf(sc[4 * j + 2 * hf + 1], sl2, neg));
			sum += sc[4 * j + 2 * hf] + sc[4 * j + 2 * hf + 1];
		}
		l[hf] = l[hf] * corr[hf] + sum;
	}
}

/*
 * Probabilities to the A fragments of the P V product: the accumulator
 * layout of 16 score columns is the register-A layout of one k16 step.
 */
template <int BN, bool BF16>
__device__ __forceinline__ void pack_p(const float (&sc)[BN / 2], uint32_t (&p)[BN / 16][4])
{
#pragma unroll
	for (int kk = 0; kk < BN / 16; kk++) {
#pragma unroll
		for (int r = 0; r < 4; r++)
			p[kk][r] = pack2(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1], BF16);
	}
}

template <int D> __device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&corr)[2])
{
#pragma unroll
	for (int j = 0; j < D / 8; j++) {
		o[4 * j] *= corr[0];
		o[4 * j + 1] *= corr[0];
		o[4 * j + 2] *= corr[1];
		o[4 * j + 3] *= corr[1];
	}
}

/*
 * rescale, skipped when no row of the warp saw its maximum grow: corr is
 * then exactly 1 (ex2 of 0), which is most tiles once the maxima settle.
 */
template <int D>
__device__ __forceinline__ void rescale_if_moved(float (&o)[D / 2], const float (&corr)[2])
{
	if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f))
		rescale<D>(o, corr);
}

/*
 * The two consumers' turns at the tensor cores under a.turns: consumer
 * cw waits on barrier 1 + cw before issuing its products and then lets the
 * other one go, so the products of the two strictly alternate and each
 * consumer's softmax runs while the other's products keep the tensor cores
 * busy. Both consumers take the same number of turns (one per key tile of
 * the same work items), so the alternation never drifts.
 */
__device__ __forceinline__ void turn_begin(bool pp, int cw)
{
	if (pp)
		tkp::named_sync(1 + cw, 256);
}

__device__ __forceinline__ void turn_end(bool pp, int cw)
{
	if (pp)
		tkp::named_arrive(2 - cw, 256);
}

/*
 * One consumer warpgroup over all key tiles, software-pipelined: the scores
 * of tile t are issued before the P V product of tile t - 1, so the softmax
 * of tile t runs while the tensor cores work on P V. Under a.turns the
 * products are issued in turns (turn_begin). Under a.lean the accumulators
 * are rescaled by the previous tile's factor while the scores run, before
 * P V, rather than after P V has drained, and only when a row maximum grew;
 * the scores are not cleared before the product overwrites them; and one
 * lane per warp, not every thread, releases a stage (the barriers then
 * count 8 arrivals: the warp's wgmma wait covers all its lanes).
 */
template <int D, int BN, bool BF16, bool CAUSAL>
__device__ __forceinline__ void consume(const Args &a, const Work &w, int cw, const uint8_t *sQ,
                                        const uint8_t *sK, const uint8_t *sV, const Bars &bar,
                                        uint32_t &it, uint32_t &nq)
{
	using Tl = Tile<D, BN>;
	constexpr int ST = Tl::STAGES;
	int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
	int row0 = w.m0 + 64 * cw + 16 * warp + (lane >> 2); /* and row0 + 8 */
	int off = w.kv_len - w.q_len;
	int first_masked = CAUSAL ? w.m0 + 64 * cw + off : 1 << 30; /* key past row 0's last */
	float o[D / 2], mx[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f }, corr[2];
	float sc[BN / 2] = {};
	uint32_t p[BN / 16][4];
	const float sl2 = a.scale_log2;
	uint32_t q_addr = tkp::smem_addr(sQ) + cw * 64 * 128;
	uint32_t k_base = tkp::smem_addr(sK), v_base = tkp::smem_addr(sV);
	const bool pp = a.turns != 0, ln = a.lean != 0;
	const bool releases = !ln || lane == 0; /* this thread arrives on the empty barriers */

#pragma unroll
	for (int i = 0; i < D / 2; i++)
		o[i] = 0.0f;
	if (w.n_tiles > 0) {
		int s = it % ST;
		tkp::mbar_wait(bar.q_full, nq & 1);
		tkp::mbar_wait(&bar.k_full[s], (it / ST) & 1);
		turn_begin(pp, cw);
		issue_scores<D, BN, BF16>(sc, q_addr, k_base + s * Tl::KV_BYTES, !ln);
		turn_end(pp, cw);
		tkp::wgmma_wait<0>();
		tkp::acc_fence(sc);
		if (releases)
			tkp::mbar_arrive(&bar.k_empty[s]);
		if (BN > w.kv_len || BN - 1 > first_masked)
			mask_tile<BN, CAUSAL>(sc, 0, row0, w.kv_len, off, lane);
		softmax_step<BN>(sc, mx, l, corr, sl2);
		pack_p<BN, BF16>(sc, p);
	}
	for (int t = 1; t < w.n_tiles; t++) {
		uint32_t idx = it + t;
		int s = idx % ST, sp = (idx - 1) % ST;
		uint32_t ph = (idx / ST) & 1, php = ((idx - 1) / ST) & 1;
		int n0 = t * BN;

		tkp::mbar_wait(&bar.k_full[s], ph);
		turn_begin(pp, cw);
		issue_scores<D, BN, BF16>(sc, q_addr, k_base + s * Tl::KV_BYTES, !ln);
		if (ln)
			rescale_if_moved<D>(o, corr);
		tkp::mbar_wait(&bar.v_full[sp], php);
		issue_pv<D, BN, BF16>(o, p, v_base + sp * Tl::KV_BYTES);
		turn_end(pp, cw);
		tkp::wgmma_wait<1>(); /* the scores; P V may still run */
		tkp::acc_fence(sc);
		if (releases)
			tkp::mbar_arrive(&bar.k_empty[s]);
		if (n0 + BN > w.kv_len || n0 + BN - 1 > first_masked)
			mask_tile<BN, CAUSAL>(sc, n0, row0, w.kv_len, off, lane);
		softmax_step<BN>(sc, mx, l, corr, sl2);
		tkp::wgmma_wait<0>();
		tkp::acc_fence(o);
		if (releases)
			tkp::mbar_arrive(&bar.v_empty[sp]);
		if (!ln)
			rescale<D>(o, corr);
		pack_p<BN, BF16>(sc, p);
	}
	if (w.n_tiles > 0) {
		uint32_t idx = it + w.n_tiles - 1;
		int sp = idx % ST;
		if (ln)
			rescale_if_moved<D>(o, corr);
		tkp::mbar_wait(&bar.v_full[sp], (idx / ST) & 1);
		issue_pv<D, BN, BF16>(o, p, v_base + sp * Tl::KV_BYTES);
		tkp::wgmma_wait<0>();
		tkp::acc_fence(o);
		if (releases)
			tkp::mbar_arrive(&bar.v_empty[sp]);
		/* Q is free: the next item's loads overlap the stores below. */
		if (releases)
			tkp::mbar_arrive(bar.q_empty);
		it += w.n_tiles;
		nq++;
	}
	store_rows<D, BF16>(a, w, o, mx, l, row0, lane);
}

template <int D, int BN, bool BF16, bool CAUSAL>
__global__ void __launch_bounds__(THREADS, 1) prefill_kernel(const __grid_constant__ Args a)
{
	using Tl = Tile<D, BN>;
	extern __shared__ uint8_t smem_raw[];
	uint8_t *sQ = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
	uint8_t *sK = sQ + Tl::Q_BYTES;
	uint8_t *sV = sK + Tl::STAGES * Tl::KV_BYTES;
	uint64_t *bar_mem = (uint64_t *)(sV + Tl::STAGES * Tl::KV_BYTES);
	Bars bar = { bar_mem,
		     bar_mem + 1,
		     bar_mem + 2,
		     bar_mem + 2 + Tl::STAGES,
		     bar_mem + 2 + 2 * Tl::STAGES,
		     bar_mem + 2 + 3 * Tl::STAGES };

	if (threadIdx.x == 0) {
		uint32_t releases = a.lean ? 2 * 4 : 2 * 128; /* see consume */
		tkp::mbar_init(bar.q_full, 1);
		tkp::mbar_init(bar.q_empty, releases);
		for (int s = 0; s < Tl::STAGES; s++) {
			tkp::mbar_init(&bar.k_full[s], 1);
			tkp::mbar_init(&bar.v_full[s], 1);
			tkp::mbar_init(&bar.k_empty[s], releases);
			tkp::mbar_init(&bar.v_empty[s], releases);
		}
		tkp::fence_mbar_init();
	}
	__syncthreads();

	int wg = threadIdx.x / 128;
	if (wg == 0) {
		tkp::regs_release<PRODUCER_REGS>();
		if (threadIdx.x == 0)
			produce<D, BN, CAUSAL>(a, sQ, sK, sV, bar);
	} else {
		uint32_t it = 0, nq = 0;
		tkp::regs_claim<CONSUMER_REGS>();
		if (a.turns && wg == 1) /* the first consumer takes the first turn */
			tkp::named_arrive(1, 256);
		for (int item = blockIdx.x; item < a.n_items; item += gridDim.x) {
			Work w;
			if (work_of<BN, CAUSAL>(a, item, &w))
				consume<D, BN, BF16, CAUSAL>(a, w, wg - 1, sQ, sK, sV, bar, it, nq);
		}
	}
}

/* out = 0 and lse = -inf for every row: the answer when there are no keys. */
template <typename T> __global__ void fill_empty(T *out, int64_t n_out, float *lse, int64_t n_lse)
{
	int64_t stride = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_out; i += stride)
		out[i] = tkc::from_f32<T>(0.0f);
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_lse; i += stride)
		lse[i] = -INFINITY;
}

/* ---- host side ------------------------------------------------------------ */

/*
 * A 4-d map over [batch][len][heads][64-column blocks of D] with boxes of
 * `rows` tokens by 64 columns of one head, 128-byte swizzled. Strides are
 * in elements; a dim of size 1 gets a harmless stride.
 */
bool make_map(CUtensorMap *m, const void *ptr, bool bf16, int64_t d, int64_t heads, int64_t len,
              int64_t batch, int64_t s_head, int64_t s_len, int64_t s_batch, int rows)
{
	PFN_cuTensorMapEncodeTiled_v12000 enc = tk_sm90::encode_fn();
	cuuint64_t dims[4] = { (cuuint64_t)d, (cuuint64_t)heads, (cuuint64_t)len,
		               (cuuint64_t)batch };
	cuuint64_t strides[3];
	cuuint32_t box[4] = { 64, 1, (cuuint32_t)rows, 1 };
	cuuint32_t estr[4] = { 1, 1, 1, 1 };

	if (enc == NULL)
		return false;
	if (heads == 1)
		s_head = d;
	if (len == 1)
		s_len = heads * s_head;
	if (batch == 1)
		s_batch = len * s_len;
	strides[0] = (cuuint64_t)s_head * 2;
	strides[1] = (cuuint64_t)s_len * 2;
	strides[2] = (cuuint64_t)s_batch * 2;
	for (int i = 0; i < 3; i++) {
		if (strides[i] % 16 != 0 || strides[i] >= ((cuuint64_t)1 << 40))
			return false;
	}
	CUresult r =
	        enc(m, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
	            const_cast<void *>(ptr), dims, strides, box, estr,
	            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
	            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return r == CUDA_SUCCESS;
}

/*
 * The call's schedule: its choice when it names one, else the built-in
 * rule, which gives each shape the schedule that measured fastest on the
 * H200 (docs/kernel-notes.md, "Attention prefill"): turns for causal
 * attention and for non-causal d64, the plain loop for non-causal d128,
 * the lean loop with 80-key tiles for non-causal d256. -1: an exact choice
 * of no schedule.
 */
int prefill_schedule(const tk_choice &c, bool causal, int64_t d)
{
	if (c.mode == TK_CHOICE_PREFER || c.mode == TK_CHOICE_EXACT) {
		if (c.v[0] >= 0 && c.v[0] < TK_PREFILL_SCHEDULES)
			return c.v[0];
		if (c.mode == TK_CHOICE_EXACT)
			return -1;
	}
	return tk_prefill_builtin(causal, (int)d);
}

/* The shape of one call, batched or varlen, as the launcher needs it. */
struct Shape {
	bool varlen, causal, bf16;
	bool wide;                         /* the wide key tiles (tile_bn), set by prefill_run */
	int64_t B, S, Skv, Hq, Hkv, D, Dv; /* varlen: S = Tq, Skv = Tk */
	int64_t max_q;                     /* longest query sequence the grid covers */
};

template <int D, int BN, bool BF16, bool CAUSAL>
tk_status launch_kernel(const Args &args, const Shape &sh, cudaStream_t st)
{
	static std::atomic<uint64_t> raised{ 0 };
	auto kern = prefill_kernel<D, BN, BF16, CAUSAL>;

	if (tkc::allow_dynamic_smem(reinterpret_cast<const void *>(kern), Tile<D, BN>::SMEM,
	                            raised) != cudaSuccess) {
		(void)cudaGetLastError();
		return TK_ERR_LAUNCH;
	}
	/*
	 * Non-causal tiles all cost the same: a persistent grid, one CTA per SM,
	 * overlaps each tile's epilogue with the next tile's loads. Causal tiles
	 * differ in length: one CTA per tile, longest first, lets the hardware
	 * balance them.
	 */
	unsigned grid = CAUSAL ? (unsigned)args.n_items : tkc::grid_persistent(args.n_items, 1, 1);
	kern<<<grid, THREADS, Tile<D, BN>::SMEM, st>>>(args);
	return tkc::launch_status();
}

/* Keys per tile for this call: wide tiles only where a wide kernel exists. */
int tile_bn(const Shape &sh)
{
	int d = (int)sh.D;

	return sh.wide && !sh.causal ? wide_bn(d) : default_bn(d);
}

template <int D> tk_status launch_d(const Args &args, const Shape &sh, cudaStream_t st)
{
	constexpr int BN = default_bn(D), BW = wide_bn(D);

	if constexpr (BW != BN) {
		if (tile_bn(sh) == BW)
			return sh.bf16 ? launch_kernel<D, BW, true, false>(args, sh, st)
			               : launch_kernel<D, BW, false, false>(args, sh, st);
	}
	if (sh.bf16)
		return sh.causal ? launch_kernel<D, BN, true, true>(args, sh, st)
		                 : launch_kernel<D, BN, true, false>(args, sh, st);
	return sh.causal ? launch_kernel<D, BN, false, true>(args, sh, st)
	                 : launch_kernel<D, BN, false, false>(args, sh, st);
}

tk_status launch_empty(const tk_call *call, cudaStream_t st)
{
	const tk_tensor *out = &call->out[0];
	bool has_lse = call->n_out > 1 && call->out[1].data != NULL;
	int64_t n_out = tk_numel(out), n_lse = has_lse ? tk_numel(&call->out[1]) : 0;
	unsigned grid = tkc::grid_for(n_out > n_lse ? n_out : n_lse, 256);

	tkc::launch_begin();
	if (out->dtype == TK_BF16)
		fill_empty<<<grid, 256, 0, st>>>((__nv_bfloat16 *)out->data, n_out,
		                                 (float *)call->out[1 % TK_MAX_OUTPUTS].data,
		                                 n_lse);
	else
		fill_empty<<<grid, 256, 0, st>>>((__half *)out->data, n_out,
		                                 (float *)call->out[1 % TK_MAX_OUTPUTS].data,
		                                 n_lse);
	return tkc::launch_status();
}

/*
 * Checks what the kernel itself needs (the manifest has checked the op's
 * rules): 16-bit types, D == Dv in {64, 128, 256}, packed rows of out and
 * lse, 16-byte aligned bases and strides for the tensor maps.
 */
tk_status prefill_run(const tk_call *call, Shape sh, cudaStream_t st)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
	const tk_tensor *out = &call->out[0];
	const tk_tensor *lse = call->n_out > 1 && call->out[1].data ? &call->out[1] : NULL;
	int tok = sh.varlen ? 0 : 1; /* the token dim; heads follow it */
	int sched = prefill_schedule(call->choice, sh.causal, sh.D);
	Args args;

	if (sh.D != sh.Dv || (sh.D != 64 && sh.D != 128 && sh.D != 256) || sched < 0)
		return TK_ERR_UNSUPPORTED;
	if (sh.Hkv <= 0 || sh.Hq % sh.Hkv != 0)
		return TK_ERR_UNSUPPORTED;
	if (out->stride[out->ndim - 1] != 1 || (lse && lse->stride[lse->ndim - 1] != 1))
		return TK_ERR_UNSUPPORTED;
	if (sh.B == 0 || sh.S == 0 || sh.max_q == 0)
		return TK_OK;
	if (sh.Skv == 0) {
		/* The fill writes out and lse as flat arrays. */
		if (!tk_is_contiguous(out) || (lse && !tk_is_contiguous(lse)))
			return TK_ERR_UNSUPPORTED;
		return launch_empty(call, st);
	}
	const tk_prefill_sched plan = tk_prefill_schedule_of(sched);
	sh.wide = plan.wide != 0;
	for (const tk_tensor *t : { q, k, v }) {
		if (!tkc::aligned16(t->data))
			return TK_ERR_UNSUPPORTED;
	}
	int64_t bq = sh.varlen ? 1 : sh.B;
	int64_t sbq = sh.varlen ? 0 : q->stride[0], sbk = sh.varlen ? 0 : k->stride[0];
	int64_t sbv = sh.varlen ? 0 : v->stride[0];
	if (!make_map(&args.tq, q->data, sh.bf16, sh.D, sh.Hq, sh.S, bq, q->stride[tok + 1],
	              q->stride[tok], sbq, BM) ||
	    !make_map(&args.tk, k->data, sh.bf16, sh.D, sh.Hkv, sh.Skv, bq, k->stride[tok + 1],
	              k->stride[tok], sbk, tile_bn(sh)) ||
	    !make_map(&args.tv, v->data, sh.bf16, sh.Dv, sh.Hkv, sh.Skv, bq, v->stride[tok + 1],
	              v->stride[tok], sbv, tile_bn(sh)))
		return TK_ERR_UNSUPPORTED;

	args.out = out->data;
	args.o_sb = sh.varlen ? 0 : out->stride[0];
	args.o_ss = out->stride[tok];
	args.o_sh = out->stride[tok + 1];
	args.lse = lse ? (float *)lse->data : NULL;
	args.l_sb = lse && !sh.varlen ? lse->stride[0] : 0;
	args.l_sh = lse ? lse->stride[sh.varlen ? 0 : 1] : 0;
	args.cu_q = sh.varlen ? (const int *)call->in[3].data : NULL;
	args.cu_k = sh.varlen ? (const int *)call->in[4].data : NULL;
	args.S = (int)sh.S;
	args.Skv = (int)sh.Skv;
	args.group = (int)(sh.Hq / sh.Hkv);
	args.Hq = (int)sh.Hq;
	args.n_mt = (int)((sh.max_q + BM - 1) / BM);
	if ((int64_t)args.n_mt * sh.Hq * sh.B > INT32_MAX)
		return TK_ERR_UNSUPPORTED;
	args.n_items = (int)(args.n_mt * sh.Hq * sh.B);
	double scale = call->params[1].v.f;
	if (!(scale > 0.0))
		scale = 1.0 / sqrt((double)sh.D);
	args.scale = (float)scale;
	args.scale_log2 = (float)(scale * 1.4426950408889634);
	args.turns = plan.turns;
	args.lean = plan.lean;
	args.head_group = plan.wide ? TK_PREFILL_HEAD_GROUP : 0;

	tkc::launch_begin();
	switch (sh.D) {
	case 64:
		return launch_d<64>(args, sh, st);
	case 128:
		return launch_d<128>(args, sh, st);
	default:
		return launch_d<256>(args, sh, st);
	}
}

bool dtype_ok(const tk_call *call)
{
	tk_dtype dt = call->in[0].dtype;

	return (dt == TK_BF16 || dt == TK_F16) && call->in[1].dtype == dt &&
	       call->in[2].dtype == dt && call->out[0].dtype == dt &&
	       (call->n_out < 2 || call->out[1].data == NULL || call->out[1].dtype == TK_F32);
}

} /* namespace */

extern "C" tk_status tk_cuda_attention_prefill(const tk_call *call, void *stream)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
	Shape sh;

	if (call->n_in < 3 || call->n_out < 1 || !dtype_ok(call) || q->ndim != 4 || k->ndim != 4 ||
	    v->ndim != 4)
		return TK_ERR_UNSUPPORTED;
	sh.varlen = false;
	sh.causal = call->params[0].v.b != 0;
	sh.bf16 = q->dtype == TK_BF16;
	sh.B = q->shape[0];
	sh.S = q->shape[1];
	sh.Hq = q->shape[2];
	sh.D = q->shape[3];
	sh.Skv = k->shape[1];
	sh.Hkv = k->shape[2];
	sh.Dv = v->shape[3];
	sh.max_q = sh.S;
	return prefill_run(call, sh, (cudaStream_t)stream);
}

extern "C" tk_status tk_cuda_attention_prefill_varlen(const tk_call *call, void *stream)
{
	const tk_tensor *q = &call->in[0], *k = &call->in[1], *v = &call->in[2];
	Shape sh;

	if (call->n_in < 5 || call->n_out < 1 || !dtype_ok(call) || q->ndim != 3 || k->ndim != 3 ||
	    v->ndim != 3 || call->in[3].dtype != TK_I32 || call->in[4].dtype != TK_I32 ||
	    call->in[3].shape[0] != call->in[4].shape[0])
		return TK_ERR_UNSUPPORTED;
	sh.varlen = true;
	sh.causal = call->params[0].v.b != 0;
	sh.bf16 = q->dtype == TK_BF16;
	sh.B = call->in[3].shape[0] - 1;
	sh.S = q->shape[0];
	sh.Hq = q->shape[1];
	sh.D = q->shape[2];
	sh.Skv = k->shape[0];
	sh.Hkv = k->shape[1];
	sh.Dv = v->shape[2];
	sh.max_q = call->params[2].v.i;
	if (sh.max_q <= 0 || sh.max_q > sh.S)
		sh.max_q = sh.S;
	if (sh.B < 0)
		return TK_ERR_UNSUPPORTED;
	return prefill_run(call, sh, (cudaStream_t)stream);
}
