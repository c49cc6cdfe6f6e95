/*
 * gather.h - the row view embedding and gather_rows share on both
 * backends: a source of `rows` rows of `width` packed elements, `src_ld`
 * elements apart; `n` indices (of up to 4 dims, any strides); out rows of
 * `width` elements, `out_ld` apart, one per index in row-major order.
 */
#ifndef TILEOPS_GATHER_H
#define TILEOPS_GATHER_H

#include "tk_internal.h"

typedef struct tk_gather {
	size_t elem;
	int64_t rows, width, src_ld, out_ld, n;
	int idx64, idx_ndim;
	int64_t idx_shape[4], idx_stride[4];
} tk_gather;

/*
 * Check the call (source in[0], indices in[1], out[0]) and describe it.
 * TK_ERR_UNSUPPORTED for a layout this view cannot take: dims past the
 * first not packed, out's index dims not evenly spaced.
 */
#ifdef __cplusplus
extern "C" {
#endif

tk_status tk_gather_parse(const tk_call *call, tk_gather *g);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#define TK_GATHER_FN __host__ __device__ static inline
#else
#define TK_GATHER_FN static inline
#endif

/* Offset in elements of index e (row-major over the index dims). */
TK_GATHER_FN int64_t tk_gather_index_offset(const tk_gather *g, int64_t e)
{
	int64_t off = 0;

	for (int d = g->idx_ndim - 1; d >= 0; d--) {
		off += (e % g->idx_shape[d]) * g->idx_stride[d];
		e /= g->idx_shape[d];
	}
	return off;
}

#endif /* TILEOPS_GATHER_H */
