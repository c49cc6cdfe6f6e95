/*
 * gemm_workload.h - what the GEMM tools (tileops-tune, tileops-bench-gemm)
 * read from a gemm or bmm workload of the manifest beyond its shapes.
 */
#ifndef TILEOPS_GEMM_WORKLOAD_H
#define TILEOPS_GEMM_WORKLOAD_H

#ifdef __cplusplus
extern "C" {
#endif

#include "manifest.h"

/*
 * trans_b of workload w of op: the workload's own value, else the op's
 * default, else 0 (also when op has no trans_b parameter).
 */
int gemm_workload_trans_b(const manifest_op *op, const manifest_workload *w);

#ifdef __cplusplus
}
#endif

#endif
