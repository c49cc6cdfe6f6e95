/*
 * gemm_kinds.h - the GEMM kernel families behind tk_gemm_launch
 * (kernels/tk_gemm.h). Each family lists the configurations of its search
 * space that can serve a problem and launches one of them.
 *
 * candidates: writes up to max configurations that can serve p into out
 * and returns how many there are in all (0: the family cannot serve p).
 * launch: TK_ERR_UNSUPPORTED when cfg cannot serve p; otherwise enqueues
 * on stream (a cudaStream_t) and returns the launch status.
 */
#ifndef TILEOPS_GEMM_KINDS_H
#define TILEOPS_GEMM_KINDS_H

#include "tk_gemm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tiled WMMA (f16, bf16) and SIMT (f32): every problem. gemm.cu */
int tk_gemm_simple_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);
tk_status tk_gemm_simple_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

/* TMA + wgmma, warp-specialized, persistent: f16, bf16. gemm_sm90.cu */
int tk_gemm_sm90_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);
tk_status tk_gemm_sm90_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

/* M <= 128, weight streaming with split-K: f16, bf16. gemm_smallm.cu */
int tk_gemm_smallm_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);
tk_status tk_gemm_smallm_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

/* M <= 128, TMA + wgmma weight streaming, split-K in a cluster: f16, bf16.
 * gemm_decode.cu */
int tk_gemm_decode_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);
tk_status tk_gemm_decode_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

/* f32, register-tiled on the CUDA cores, split-K through the workspace.
 * gemm_simt.cu */
int tk_gemm_simt_candidates(const tk_gemm_problem *p, tk_gemm_config *out, int max);
tk_status tk_gemm_simt_launch(const tk_gemm_problem *p, const tk_gemm_config *cfg, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_GEMM_KINDS_H */
