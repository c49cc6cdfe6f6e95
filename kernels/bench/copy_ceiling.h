/*
 * copy_ceiling.h - the ceiling the benches measure bandwidth against: a
 * device-to-device cudaMemcpy, shared by tileops-bench, tileops-bench-gemm
 * and tileops-bench-decode so that their % of copy mean the same thing.
 */
#ifndef TILEOPS_BENCH_COPY_CEILING_H
#define TILEOPS_BENCH_COPY_CEILING_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * TB/s of copying `bytes` device to device on stream s, bytes read plus
 * written: 2 warm-up copies, then the median of 10, each between CUDA
 * events. A CUDA error is printed and ends the program (a bench without
 * its ceiling has nothing to report).
 */
double bench_copy_tbps(cudaStream_t s, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
