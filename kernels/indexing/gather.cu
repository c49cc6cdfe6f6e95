/*
 * gather.cu - embedding and gather_rows on the GPU: a grid-stride copy of
 * whole rows picked by index, 16 bytes at a time where the rows' bytes and
 * bases allow it, else one element at a time. An index outside the source
 * writes zeros and reads nothing, so a bad id can never fault the device.
 * The row view is gather.h's, checked by tk_gather_parse (the CPU
 * reference's own check), so both backends take the same layouts.
 */
#include "cuda_common.cuh"
#include "gather.h"

namespace
{

using namespace tkc;

struct GatherArgs {
	const char *src;
	char *out;
	const void *idx;
	tk_gather g;
	int64_t units;              /* units of U per row */
	int64_t src_ld_b, out_ld_b; /* row strides in bytes */
};

template <typename U>
__global__ void __launch_bounds__(256) gather_kernel(const __grid_constant__ GatherArgs a)
{
	pdl_enter(); /* launched with PDL: the kernel before completes first */
	const int64_t total = a.g.n * a.units;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t e = i / a.units, c = i - e * a.units;
		int64_t off = tk_gather_index_offset(&a.g, e);
		int64_t r = a.g.idx64 ? static_cast<const int64_t *>(a.idx)[off]
		                      : static_cast<const int32_t *>(a.idx)[off];
		U *dst = reinterpret_cast<U *>(a.out + e * a.out_ld_b) + c;
		if (r >= 0 && r < a.g.rows)
			*dst = reinterpret_cast<const U *>(a.src + r * a.src_ld_b)[c];
		else
			*dst = U{};
	}
}

template <typename U> static tk_status gather_launch(GatherArgs &a, cudaStream_t st)
{
	a.units = a.g.width * (int64_t)a.g.elem / (int64_t)sizeof(U);
	int64_t work = a.g.n * a.units;
	launch_begin();
	launch_pdl(gather_kernel<U>, grid_for(work, 256), 256, 0, st, a);
	return launch_status();
}

/* 1 when rows of `bytes` bytes at p, ld bytes apart, can be copied as U. */
static bool fits(const void *p, int64_t bytes, int64_t ld, size_t u)
{
	return reinterpret_cast<uintptr_t>(p) % u == 0 && bytes % (int64_t)u == 0 &&
	       ld % (int64_t)u == 0;
}

static tk_status gather_run(const tk_call *call, void *stream)
{
	GatherArgs a;
	tk_status s = tk_gather_parse(call, &a.g);

	if (s != TK_OK)
		return s;
	a.src = static_cast<const char *>(call->in[0].data);
	a.out = static_cast<char *>(call->out[0].data);
	a.idx = call->in[1].data;
	a.src_ld_b = a.g.src_ld * (int64_t)a.g.elem;
	a.out_ld_b = a.g.out_ld * (int64_t)a.g.elem;
	const int64_t bytes = a.g.width * (int64_t)a.g.elem;
	if (a.g.n == 0 || bytes == 0)
		return TK_OK;
	cudaStream_t st = static_cast<cudaStream_t>(stream);
	if (fits(a.src, bytes, a.src_ld_b, 16) && fits(a.out, bytes, a.out_ld_b, 16))
		return gather_launch<uint4>(a, st);
	if (fits(a.src, bytes, a.src_ld_b, 4) && fits(a.out, bytes, a.out_ld_b, 4))
		return gather_launch<uint32_t>(a, st);
	return gather_launch<uint16_t>(a, st);
}

} /* namespace */

extern "C" tk_status tk_cuda_embedding(const tk_call *call, void *stream)
{
	return call->in[0].ndim == 2 ? gather_run(call, stream) : TK_ERR_UNSUPPORTED;
}

extern "C" tk_status tk_cuda_gather_rows(const tk_call *call, void *stream)
{
	return call->in[1].ndim == 1 ? gather_run(call, stream) : TK_ERR_UNSUPPORTED;
}
