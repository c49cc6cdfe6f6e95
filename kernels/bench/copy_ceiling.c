/* copy_ceiling.c - the device-to-device copy bandwidth (copy_ceiling.h). */
#include "copy_ceiling.h"

#include <stdio.h>
#include <stdlib.h>

#define RUNS 10
#define WARMUP 2

static void check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "copy bandwidth: %s: %s\n", what, cudaGetErrorString(e));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_copy_tbps(cudaStream_t s, size_t bytes)
{
	void *a = NULL, *b = NULL;
	double t[RUNS];
	cudaEvent_t e0, e1;

	check(cudaMalloc(&a, bytes), "cudaMalloc");
	check(cudaMalloc(&b, bytes), "cudaMalloc");
	check(cudaMemsetAsync(a, 0x5a, bytes, s), "cudaMemsetAsync");
	check(cudaEventCreate(&e0), "cudaEventCreate");
	check(cudaEventCreate(&e1), "cudaEventCreate");
	for (int i = -WARMUP; i < RUNS; i++) {
		float ms;
		check(cudaEventRecord(e0, s), "cudaEventRecord");
		check(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
		check(cudaEventRecord(e1, s), "cudaEventRecord");
		check(cudaEventSynchronize(e1), "cudaEventSynchronize");
		check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
		if (i >= 0)
			t[i] = ms * 1e-3;
	}
	qsort(t, RUNS, sizeof(double), cmp_double);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	check(cudaFree(a), "cudaFree");
	check(cudaFree(b), "cudaFree");
	return 2.0 * (double)bytes / (0.5 * (t[RUNS / 2 - 1] + t[RUNS / 2])) / 1e12;
}
