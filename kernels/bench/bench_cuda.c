/* bench_cuda.c - the device-to-device copy bandwidth (bench_cuda.h). */
#include "bench_cuda.h"

#define RUNS 10
#define WARMUP 2

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

	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	CK(cudaMemsetAsync(a, 0x5a, bytes, s));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = -WARMUP; i < RUNS; i++) {
		float ms;
		CK(cudaEventRecord(e0, s));
		CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
		CK(cudaEventRecord(e1, s));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		if (i >= 0)
			t[i] = ms * 1e-3;
	}
	qsort(t, RUNS, sizeof(double), cmp_double);
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	CK(cudaFree(a));
	CK(cudaFree(b));
	return 2.0 * (double)bytes / (0.5 * (t[RUNS / 2 - 1] + t[RUNS / 2])) / 1e12;
}
