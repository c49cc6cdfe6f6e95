/*
 * tma_map.cuh - building the tensor maps (CUtensorMap) that the bulk tensor
 * copies of the Hopper kernels read, on the host. The encoder comes from
 * the driver the CUDA runtime loaded, looked up once: the daemon links the
 * static runtime only, never the driver library.
 */
#ifndef TILEOPS_TMA_MAP_CUH
#define TILEOPS_TMA_MAP_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "tileops_kernels.h"

namespace tk_sm90
{

/* cuTensorMapEncodeTiled, or nullptr when the driver does not offer it. */
inline PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void)
{
	static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
		void *f = nullptr;
		cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
		                                     cudaEnableDefault, &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess) {
			(void)cudaGetLastError();
			f = nullptr;
		}
		return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
	}();
	return fn;
}

/*
 * A 3-D map of f16 or bf16 (dt) over rows of `inner` contiguous elements
 * (pitch ld), `outer` rows per matrix, `batch` matrices `bstride` elements
 * apart; boxes of box_inner x box_outer, 128-byte swizzled unless said.
 * Reads past the edges return zeros.
 */
inline bool make_map(CUtensorMap *map, tk_dtype dt, const void *ptr, int64_t inner, int64_t outer,
                     int64_t batch, int64_t ld, int64_t bstride, int box_inner, int box_outer,
                     CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B)
{
	PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
	if (encode == nullptr)
		return false;
	cuuint64_t dims[3] = { (cuuint64_t)inner, (cuuint64_t)outer, (cuuint64_t)batch };
	cuuint64_t strides[2] = { (cuuint64_t)ld * 2, (cuuint64_t)(batch > 1 ? bstride : ld) * 2 };
	cuuint32_t box[3] = { (cuuint32_t)box_inner, (cuuint32_t)box_outer, 1 };
	cuuint32_t estr[3] = { 1, 1, 1 };
	CUtensorMapDataType ty =
	        dt == TK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
	return encode(map, ty, 3, const_cast<void *>(ptr), dims, strides, box, estr,
	              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
	              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} /* namespace tk_sm90 */

#endif /* TILEOPS_TMA_MAP_CUH */
