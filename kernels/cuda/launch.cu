/*
 * launch.cu - the process-wide switch for programmatic dependent launch of
 * the memory-bound kernels (tileops_kernels.h, launch_pdl in
 * cuda_common.cuh).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_common.cuh"

namespace
{

/* -1: not read from the environment yet; 0 or 1 after. */
int pdl_state = -1;

int pdl_from_env(void)
{
	const char *v = getenv("TILEOPS_PDL");

	return v == NULL || strcmp(v, "0") != 0;
}

} /* namespace */

extern "C" int tk_cuda_pdl(void)
{
	int v = __atomic_load_n(&pdl_state, __ATOMIC_RELAXED);

	if (v < 0) {
		int e = pdl_from_env();
		/* the first reader stores the environment's value; a racing set wins */
		__atomic_compare_exchange_n(&pdl_state, &v, e, false, __ATOMIC_RELAXED,
		                            __ATOMIC_RELAXED);
		v = __atomic_load_n(&pdl_state, __ATOMIC_RELAXED);
	}
	return v;
}

extern "C" int tk_cuda_set_pdl(int on)
{
	int prev = tk_cuda_pdl();

	__atomic_store_n(&pdl_state, on ? 1 : 0, __ATOMIC_RELAXED);
	return prev;
}
