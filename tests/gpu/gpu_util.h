/*
 * gpu_util.h - what the GPU conformance tests share: they need a GPU, and
 * every case draws fresh random inputs from a seed it reports on failure.
 */
#ifndef TILEOPS_TEST_GPU_UTIL_H
#define TILEOPS_TEST_GPU_UTIL_H

#include <stdint.h>

#include "kernels/tk_test_util.h"

/* The seed of the case running now (printed by failing assertions). */
extern uint64_t gpu_case_seed;

/* Fail the test unless a CUDA device is usable. */
void gpu_require(void);
/* A new odd seed from the clock, stored in gpu_case_seed. */
uint64_t gpu_fresh_seed(void);

/*
 * A device copy of t's bytes (its whole span, padding included), or NULL
 * when t spans no bytes. Fails the test if the allocation or copy fails;
 * the caller frees it with cudaFree.
 */
void *gpu_to_device(const tk_tensor *t);
/* 1 when every byte of got outside t's logical elements equals before's. */
int gpu_padding_kept(const tk_tensor *t, const unsigned char *got, const unsigned char *before);

#endif
