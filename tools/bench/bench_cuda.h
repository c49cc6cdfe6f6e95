/*
 * bench_cuda.h - what the CUDA benches share: CK, for runtime calls that
 * must succeed, and the ceiling they measure bandwidth against (a
 * device-to-device cudaMemcpy), so that every bench's % of copy means the
 * same thing.
 */
#ifndef TILEOPS_BENCH_CUDA_H
#define TILEOPS_BENCH_CUDA_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "bench_common.h" /* bench_median */

/* A CUDA runtime call that must succeed: on failure, where and why, then exit 1. */
#define CK(call)                                                                      \
	do {                                                                          \
		cudaError_t e_ = (call);                                              \
		if (e_ != cudaSuccess) {                                              \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
			        cudaGetErrorString(e_));                              \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

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

/*
 * Microseconds a copy of `bytes` device to device takes back to back: one
 * cudaMemcpyAsync on each of enough buffer pairs to move 256 MiB or more
 * (so the L2 does not serve them), captured in a CUDA graph; the median of
 * `runs` replays over the copies. The ceiling's rate at the size of a
 * workload, issued the way the ops are timed.
 */
double bench_copy_graph_us(cudaStream_t s, size_t bytes, int runs);

/*
 * Median time in microseconds of one replay of ge on s: `warmup` untimed
 * replays, then `runs` replays, each between its own CUDA events.
 */
double bench_graph_replay_us(cudaGraphExec_t ge, cudaStream_t s, int warmup, int runs);

/*
 * The same for n graphs replayed in turn (ge[0], ge[1], ..., ge[0], ...),
 * `runs` times each after `warmup` rounds: a drift of the card's clock or
 * power over the rounds reaches them all alike. med_us[i] is ge[i]'s median.
 */
void bench_graphs_alternate_us(const cudaGraphExec_t *ge, int n, cudaStream_t s, int warmup,
                               int runs, double *med_us);

#ifdef __cplusplus
}
#endif

#endif
