/*
 * tileops-bench-l2: how much of a buffer a second read finds in the L2.
 *
 * Two-pass kernels (fp8 per tensor with a computed scale, the split
 * softmax of vocabulary rows) read their input twice and count on the L2
 * for the second read. This measures, per buffer size, the time of a read
 * of the whole buffer by a grid of resident blocks (each block a 16 KiB
 * chunk at a time, the grid striding over the buffer):
 *
 *   cold     after reading 512 MiB of other memory (from DRAM);
 *   again    right after the same read by the same grid (each block
 *            rereads the chunks it read);
 *   moved    right after a read in which every block took the chunks of
 *            the block half a grid away (the chunks mostly change SMs).
 *
 * Each figure is the median of --runs timings of the second kernel alone
 * (CUDA events around it), in us, with the read bandwidth beside it.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h" /* CK, bench_median, bench_parse_long */

namespace
{

constexpr int kThreads = 256, kVecs = 4; /* a chunk: 256 threads x 4 x 16 bytes */
constexpr int64_t kChunk = (int64_t)kThreads * kVecs * 16;

/* Read chunks shift + b, shift + b + grid, ... of p; fold them so the loads stay. */
__global__ void __launch_bounds__(kThreads)
        read_chunks(const int4 *p, int64_t chunks, int shift, int *sink)
{
	int acc = 0;
	const int64_t b = ((int64_t)blockIdx.x + shift) % gridDim.x;

	for (int64_t c = b; c < chunks; c += gridDim.x) {
		int4 v[kVecs];
#pragma unroll
		for (int k = 0; k < kVecs; k++)
			v[k] = p[c * kThreads * kVecs + k * kThreads + threadIdx.x];
#pragma unroll
		for (int k = 0; k < kVecs; k++)
			acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
	}
	if (acc == 0x5eed1e55)
		sink[blockIdx.x] = acc;
}

} /* namespace */

int main(int argc, char **argv)
{
	long runs = 15;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			if (bench_parse_long(argv[++i], 1, 1000, &runs) != 0) {
				fprintf(stderr,
				        "tileops-bench-l2: --runs must be 1 to 1000, not '%s'\n",
				        argv[i]);
				return 2;
			}
		} else {
			fprintf(stderr, "usage: tileops-bench-l2 [--runs N]\n");
			return 2;
		}
	}
	int sms = 0, l2 = 0, per_sm = 0;
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
	CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_chunks, kThreads, 0));
	const int grid = sms * per_sm;
	const size_t other = (size_t)512 << 20, most = (size_t)128 << 20;
	int4 *flush, *buf;
	int *sink;
	cudaEvent_t e0, e1;
	CK(cudaMalloc(&flush, other));
	CK(cudaMalloc(&buf, most));
	CK(cudaMalloc(&sink, sizeof(int) * (size_t)grid));
	CK(cudaMemset(flush, 1, other));
	CK(cudaMemset(buf, 2, most));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	double *t = (double *)malloc(sizeof(double) * (size_t)runs);
	if (t == NULL)
		return 1;

	printf("%d SMs, L2 %d MiB, a grid of %d blocks of %d threads; second read of the buffer, "
	       "us (TB/s), median of %ld\n\n",
	       sms, l2 >> 20, grid, kThreads, runs);
	printf("| MiB | cold | again | moved |\n| ---: | ---: | ---: | ---: |\n");
	static const int mib[] = { 8, 16, 24, 32, 40, 48, 64, 96, 128 };
	for (size_t m = 0; m < sizeof(mib) / sizeof(mib[0]); m++) {
		const int64_t bytes = (int64_t)mib[m] << 20, chunks = bytes / kChunk;
		printf("| %d |", mib[m]);
		for (int mode = 0; mode < 3; mode++) {
			for (int r = 0; r < runs; r++) {
				read_chunks<<<grid, kThreads>>>(flush, (int64_t)(other / kChunk), 0,
				                                sink);
				if (mode > 0)
					read_chunks<<<grid, kThreads>>>(
					        buf, chunks, mode == 2 ? grid / 2 : 0, sink);
				CK(cudaEventRecord(e0));
				read_chunks<<<grid, kThreads>>>(buf, chunks, 0, sink);
				CK(cudaEventRecord(e1));
				CK(cudaEventSynchronize(e1));
				float ms = 0.0f;
				CK(cudaEventElapsedTime(&ms, e0, e1));
				t[r] = 1000.0 * ms;
			}
			const double us = bench_median(t, runs);
			printf(" %.1f (%.2f) |", us, (double)bytes / us / 1e6);
		}
		printf("\n");
	}
	CK(cudaGetLastError());
	free(t);
	return 0;
}
