/*
 * gemm_common.cuh - host code the GEMM families (gemm_sm90.cu,
 * gemm_smallm.cu, gemm_decode.cu, gemm_simt.cu) share: whether c, bias and
 * residual allow 16-byte access, the launch arguments the TMA families name
 * alike, the device's shared-memory limits,
 * ordering candidates by a model's cost, and a cache of a family's own
 * choice per problem shape.
 */
#ifndef TILEOPS_GEMM_COMMON_CUH
#define TILEOPS_GEMM_COMMON_CUH

#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>

#include "cuda_common.cuh"
#include "tk_gemm.h"

namespace tk_gemm_common
{

/* 1 when every c, residual and bias access of p can be 16 bytes wide. */
inline int vec_ok(const tk_gemm_problem *p)
{
	bool ok =
	        tkc::aligned16(p->c) && p->ldc % 8 == 0 && (p->batch == 1 || p->stride_c % 8 == 0);
	if (p->bias != nullptr)
		ok = ok && tkc::aligned16(p->bias);
	if (p->residual != nullptr)
		ok = ok && tkc::aligned16(p->residual) && p->ldr % 8 == 0 &&
		     (p->batch == 1 || p->stride_r % 8 == 0);
	return ok;
}

/*
 * The fields of a launch's arguments that the TMA families (sm90, decode)
 * name alike: the epilogue's c, bias and residual with their pitches and
 * batch strides, M and N, alpha, 16-byte access, and which of a and b
 * differ per batch.
 */
template <typename A> inline void common_args(A &a, const tk_gemm_problem *p)
{
	a.c = p->c;
	a.bias = p->bias;
	a.res = p->residual;
	a.ldc = p->ldc;
	a.ldr = p->ldr;
	a.stride_c = p->batch > 1 ? p->stride_c : 0;
	a.stride_r = p->batch > 1 ? p->stride_r : 0;
	a.m = (int)p->m;
	a.n = (int)p->n;
	a.a_batched = p->batch > 1 && p->stride_a != 0;
	a.b_batched = p->batch > 1 && p->stride_b != 0;
	a.vec = vec_ok(p);
	a.alpha = p->alpha;
}

/*
 * What the current device gives, read once per device: SMs, the dynamic
 * shared memory a block may ask for (the opt-in limit less 1 KB of room
 * for a kernel's static shared memory) and the shared memory of an SM.
 */
struct Limits {
	int sms, smem_block, smem_sm;
};

inline Limits limits(void)
{
	static int block[64], sm[64];
	Limits d;
	d.sms = tkc::sm_count();
	d.smem_block =
	        tkc::device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, block, 227 * 1024) - 1024;
	d.smem_sm = tkc::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sm, 228 * 1024);
	return d;
}

/*
 * Whether a GEMM of `grid` CTAs (launched with PDL) lets the next kernel
 * launch as soon as it starts (griddepcontrol.launch_dependents), rather
 * than when its last CTA exits: when the grid leaves at least half the SMs
 * idle, so that a next grid of the same size is placed whole on the SMs
 * this one does not use and starts the moment this one completes. A larger
 * next grid would be placed piecemeal, on SMs in the order this grid's
 * CTAs leave them, and measured up to a fifth slower (docs/kernel-notes.md,
 * "GEMM launched with PDL").
 */
inline int early_trigger(int64_t grid, int sms)
{
	return grid > 0 && grid * 2 <= sms;
}

/* Order list[0 .. n) by cost, cheapest first; ties (within 0.1%) keep their order. */
inline void sort_by_cost(tk_gemm_config *list, double *cost, int n)
{
	for (int i = 1; i < n; i++) {
		for (int j = i; j > 0 && cost[j] < cost[j - 1] * 0.999; j--) {
			tk_gemm_config tc = list[j];
			double t = cost[j];
			list[j] = list[j - 1];
			cost[j] = cost[j - 1];
			list[j - 1] = tc;
			cost[j - 1] = t;
		}
	}
}

/*
 * A small cache of a family's own choice per problem shape, for families
 * whose choice is a search over a cost model: gemm and bmm ask for the
 * built-in choice on every call of a shape the tuning table does not know,
 * and the search visits tens to hundreds of configurations. Keyed by
 * device, dtype, batch, M, N, K and the workspace (whether there is one and
 * its size); 64 slots, a newer shape replacing an older one in its slot.
 */
struct Cache {
	struct Slot {
		bool used;
		int dev, dtype;
		int64_t batch, m, n, k;
		size_t ws_bytes;
		bool ws;
		tk_gemm_config best;
		int count;
	} slot[64];
	std::mutex lock;
};

/*
 * The cached choice for p, or search(p, &best) (which returns how many
 * configurations there are in all and writes the best to best) on a miss.
 * Returns the count; best is written when it is > 0.
 */
template <typename Search>
int cached(Cache &cache, const tk_gemm_problem *p, tk_gemm_config *best, Search search)
{
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		dev = -1;
	}
	uint64_t h = (uint64_t)p->m * 0x9e3779b97f4a7c15ULL ^
	             (uint64_t)p->n * 0xc2b2ae3d27d4eb4fULL ^
	             (uint64_t)p->k * 0x165667b19e3779f9ULL ^ (uint64_t)p->batch ^
	             (uint64_t)p->workspace_bytes ^ (uint64_t)dev;
	Cache::Slot *s = &cache.slot[(h >> 29) & 63];
	{
		std::lock_guard<std::mutex> guard(cache.lock);
		if (s->used && s->dev == dev && s->dtype == (int)p->dtype && s->batch == p->batch &&
		    s->m == p->m && s->n == p->n && s->k == p->k &&
		    s->ws_bytes == p->workspace_bytes && s->ws == (p->workspace != nullptr)) {
			*best = s->best;
			return s->count;
		}
	}
	int count = search(p, best);
	std::lock_guard<std::mutex> guard(cache.lock);
	s->used = true;
	s->dev = dev;
	s->dtype = (int)p->dtype;
	s->batch = p->batch;
	s->m = p->m;
	s->n = p->n;
	s->k = p->k;
	s->ws_bytes = p->workspace_bytes;
	s->ws = p->workspace != nullptr;
	s->best = *best;
	s->count = count;
	return count;
}

} /* namespace tk_gemm_common */

#endif /* TILEOPS_GEMM_COMMON_CUH */
