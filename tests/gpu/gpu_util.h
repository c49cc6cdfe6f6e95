/*
 * gpu_util.h - what the GPU conformance tests share: they need a GPU, and
 * every case draws fresh random inputs from a seed it reports on failure.
 */
#ifndef TILEOPS_TEST_GPU_UTIL_H
#define TILEOPS_TEST_GPU_UTIL_H

#include <stdint.h>

/* The seed of the case running now (printed by failing assertions). */
extern uint64_t gpu_case_seed;

/* Fail the test unless a CUDA device is usable. */
void gpu_require(void);
/* A new odd seed from the clock, stored in gpu_case_seed. */
uint64_t gpu_fresh_seed(void);

#endif
