/* bench_cuda.c - the device-to-device copy bandwidth (bench_cuda.h). */
#include "bench_cuda.h"

#define RUNS 10
#define WARMUP 2

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
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	CK(cudaFree(a));
	CK(cudaFree(b));
	return 2.0 * (double)bytes / bench_median(t, RUNS) / 1e12;
}

double bench_copy_graph_us(cudaStream_t s, size_t bytes, int runs)
{
	const size_t least = (size_t)256 << 20;
	int pairs = (int)((least + 2 * bytes - 1) / (2 * bytes));
	pairs = pairs < 4 ? 4 : pairs;
	void **buf = calloc((size_t)pairs * 2, sizeof(void *));
	cudaGraph_t g;
	cudaGraphExec_t ge;

	if (buf == NULL) {
		fprintf(stderr, "copy timing: out of host memory\n");
		exit(1);
	}
	for (int i = 0; i < 2 * pairs; i++) {
		CK(cudaMalloc(&buf[i], bytes));
		CK(cudaMemsetAsync(buf[i], 0x5a, bytes, s));
	}
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < pairs; i++)
		CK(cudaMemcpyAsync(buf[2 * i + 1], buf[2 * i], bytes, cudaMemcpyDeviceToDevice, s));
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	double us = bench_graph_replay_us(ge, s, 2, runs) / pairs;
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	for (int i = 0; i < 2 * pairs; i++)
		CK(cudaFree(buf[i]));
	free(buf);
	return us;
}

double bench_graph_replay_us(cudaGraphExec_t ge, cudaStream_t s, int warmup, int runs)
{
	double m;

	bench_graphs_alternate_us(&ge, 1, s, warmup, runs, &m);
	return m;
}

void bench_graphs_alternate_us(const cudaGraphExec_t *ge, int n, cudaStream_t s, int warmup,
                               int runs, double *med_us)
{
	size_t nev = 2 * (size_t)runs * (size_t)n;
	cudaEvent_t *ev = malloc(sizeof(cudaEvent_t) * nev);
	double *t = malloc(sizeof(double) * (size_t)runs);

	if (ev == NULL || t == NULL) {
		fprintf(stderr, "graph timing: out of host memory\n");
		exit(1);
	}
	for (int w = 0; w < warmup; w++)
		for (int g = 0; g < n; g++)
			CK(cudaGraphLaunch(ge[g], s));
	for (size_t i = 0; i < nev; i++)
		CK(cudaEventCreate(&ev[i]));
	/* replay r of graph g between events 2 (r n + g) and 2 (r n + g) + 1 */
	for (int r = 0; r < runs; r++) {
		for (int g = 0; g < n; g++) {
			size_t e = 2 * ((size_t)r * (size_t)n + (size_t)g);
			CK(cudaEventRecord(ev[e], s));
			CK(cudaGraphLaunch(ge[g], s));
			CK(cudaEventRecord(ev[e + 1], s));
		}
	}
	CK(cudaStreamSynchronize(s));
	for (int g = 0; g < n; g++) {
		for (int r = 0; r < runs; r++) {
			size_t e = 2 * ((size_t)r * (size_t)n + (size_t)g);
			float ms;
			CK(cudaEventElapsedTime(&ms, ev[e], ev[e + 1]));
			t[r] = ms * 1e3;
		}
		med_us[g] = bench_median(t, runs);
	}
	for (size_t i = 0; i < nev; i++)
		cudaEventDestroy(ev[i]);
	free(ev);
	free(t);
}
