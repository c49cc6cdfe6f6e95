/*
 * gemm_choice.cuh - a small cache of a GEMM family's own choice per problem
 * shape, for families whose choice is a search over a cost model: gemm and
 * bmm ask for the built-in choice on every call of a shape the tuning table
 * does not know, and the search visits tens to hundreds of configurations.
 * Keyed by device, dtype, batch, M, N, K and the workspace (whether there is
 * one and its size); 64 slots, a newer shape replacing an older one in its
 * slot. Host code.
 */
#ifndef TILEOPS_GEMM_CHOICE_CUH
#define TILEOPS_GEMM_CHOICE_CUH

#include <cuda_runtime.h>
#include <mutex>
#include <stdint.h>

#include "tk_gemm.h"

namespace tk_gemm_choice
{

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
template <typename Search> int cached(Cache &cache, const tk_gemm_problem *p,
                                      tk_gemm_config *best, Search search)
{
	int dev = 0;
	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		dev = -1;
	}
	uint64_t h = (uint64_t)p->m * 0x9e3779b97f4a7c15ULL ^ (uint64_t)p->n * 0xc2b2ae3d27d4eb4fULL ^
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

} /* namespace tk_gemm_choice */

#endif /* TILEOPS_GEMM_CHOICE_CUH */
