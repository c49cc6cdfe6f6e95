/*
 * tileops-bench-dispatch-baseline - what dispatch costs without tileopsd:
 * CUDA driven in-process on the same machine, the figures the dispatch
 * bench through the daemon (bench_dispatch.c) is held to.
 *
 *   tileops-bench-dispatch-baseline [--n N] [--reps R] [--json FILE]
 *   tileops-bench-dispatch-baseline --procs P [--kernels K] [--label NAME]
 *   tileops-bench-dispatch-baseline --streams P [--pool N] [--trace] [--kernels K]
 *   common: [--ns NS] [--blocks B] [--json FILE]
 *
 * Single-thread mode (the default), one host thread and one stream, a tiny
 * kernel (add of two 256-float vectors), launched two ways: a kernel of
 * this file (`add256`, the plain cost of a launch) and the L1 launcher the
 * daemon calls for the op `add` (`add256-l1`, the same kernel as through
 * tileopsd, so the two benches differ only in dispatch):
 *  - async: N launches back to back (N = 20000); the host time of the
 *    launches alone per launch (mean), and the time to the end of a final
 *    synchronize per launch (mean): the per-op time of a launch loop;
 *  - sync: launch then cudaStreamSynchronize, R times (R = 2000), median;
 *  - graph12: a CUDA graph of 12 captured add256 launches, graph launch
 *    then synchronize, R times, median;
 *  - kernel: the device time of add256-l1 alone from CUDA events, median
 *    of R;
 *  - spin sync: one spin kernel (NS, B blocks: the op of the dispatch
 *    bench's serving-engine rows) then cudaStreamSynchronize, R times,
 *    median.
 * Each comes after a warm-up of the same loop; the result of the adds is
 * checked against the host.
 *
 * --procs P forks P processes, each with its own CUDA context (or sharing
 * the MPS server when one runs: --label names the row), each launching K
 * (2000) spin kernels of NS (5000) nanoseconds on B (4) blocks on its
 * stream, then synchronizing. Time runs from a common start (a pipe every
 * process waits on, closed once all are ready) to the end of the last
 * process's synchronize; the figure is P * K / that time. --streams P is
 * the same with P host threads of one process, each on its own stream of
 * one context: what a single owner of the GPU can reach. With --pool N the
 * N streams are made first, as tileopsd's stream pool is, and thread i
 * runs on the i-th. --trace adds, per thread, when its launches returned and
 * when its stream's kernels ran (each kernel stamps the device timer), and
 * which of the streams share a hardware work queue (a short kernel queued
 * behind another stream's long one waits for it).
 *
 * Every measurement is one JSON line (to --json FILE, else stdout); a
 * markdown table of all of them ends the output. Exit status 0 only when
 * every CUDA call succeeded and every result checked out.
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "bench_common.h"
#include "spin.cuh"
#include "tk_internal.h"

#define PROG "tileops-bench-dispatch-baseline"
#define TINY_N 256
#define GRAPH_NODES 12
#define MAX_PROCS BENCH_PROCS_MAX

namespace
{

struct options {
	long n = 20000, reps = 2000, kernels = 2000, ns = 5000, blocks = 4;
	int procs = 0, streams = 0, pool = 0, trace = 0;
	const char *label = "contexts";
	const char *json = NULL;
};

/* ---- the tiny kernel ---------------------------------------------------- */

__global__ void add256(const float *a, const float *b, float *out)
{
	int i = threadIdx.x;

	out[i] = a[i] + b[i];
}

__global__ void spin_kernel(const float *x, float *out, int64_t n, uint64_t ns)
{
	tkc::spin_block(x, out, n, ns);
}

/* The spin kernel that also writes when its first block started and ended
 * (the device's nanosecond timer) to stamp[0] and stamp[1]: --trace. */
__global__ void spin_stamp_kernel(const float *x, float *out, int64_t n, uint64_t ns,
                                  uint64_t *stamp)
{
	uint64_t t0 = tkc::global_ns();

	tkc::spin_block(x, out, n, ns);
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		stamp[0] = t0;
		stamp[1] = tkc::global_ns();
	}
}

struct tiny {
	cudaStream_t stream;
	float *a, *b, *out;
	tk_call call; /* for the L1 launcher */
	tk_cuda_fn l1_add;
};

void launch_raw(tiny *t)
{
	add256<<<1, TINY_N, 0, t->stream>>>(t->a, t->b, t->out);
}

void launch_l1(tiny *t)
{
	if (t->l1_add(&t->call, t->stream) != TK_OK) {
		fprintf(stderr, PROG ": the L1 add launcher failed\n");
		exit(1);
	}
}

typedef void (*launch_fn)(tiny *t);

tk_tensor vec_tensor(float *p, int64_t n)
{
	tk_tensor v;

	memset(&v, 0, sizeof(v));
	v.data = p;
	v.dtype = TK_F32;
	v.ndim = 1;
	v.shape[0] = n;
	tk_set_contiguous(&v);
	return v;
}

void tiny_init(tiny *t, float *host_a, float *host_b)
{
	const tk_kernel_entry *e = tk_kernel_find("add");
	size_t bytes = TINY_N * sizeof(float);

	if (e == NULL || e->cuda == NULL) {
		fprintf(stderr, PROG ": the kernel table has no CUDA add\n");
		exit(1);
	}
	t->l1_add = e->cuda;
	CK(cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking));
	CK(cudaMalloc(&t->a, bytes));
	CK(cudaMalloc(&t->b, bytes));
	CK(cudaMalloc(&t->out, bytes));
	for (int i = 0; i < TINY_N; i++) {
		host_a[i] = (float)(rand() % 2001 - 1000) / 256.0f;
		host_b[i] = (float)(rand() % 2001 - 1000) / 256.0f;
	}
	CK(cudaMemcpy(t->a, host_a, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(t->b, host_b, bytes, cudaMemcpyHostToDevice));
	memset(&t->call, 0, sizeof(t->call));
	t->call.n_in = 2;
	t->call.n_out = 1;
	t->call.in[0] = vec_tensor(t->a, TINY_N);
	t->call.in[1] = vec_tensor(t->b, TINY_N);
	t->call.out[0] = vec_tensor(t->out, TINY_N);
}

/* Poison out, run one launch, and compare out with a + b (exact in f32). */
void tiny_check(tiny *t, launch_fn launch, const float *ha, const float *hb, const char *what)
{
	float got[TINY_N];

	CK(cudaMemsetAsync(t->out, 0xff, sizeof(got), t->stream));
	launch(t);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(t->stream));
	CK(cudaMemcpy(got, t->out, sizeof(got), cudaMemcpyDeviceToHost));
	for (int i = 0; i < TINY_N; i++) {
		if (got[i] != ha[i] + hb[i]) {
			fprintf(stderr, PROG ": %s: out[%d] = %g, expected %g\n", what, i,
			        (double)got[i], (double)(ha[i] + hb[i]));
			exit(1);
		}
	}
}

void bench_async(tiny *t, launch_fn launch, const char *kernel, long n)
{
	for (long i = 0; i < 1000; i++)
		launch(t);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(t->stream));
	double t0 = bench_now_us();
	for (long i = 0; i < n; i++)
		launch(t);
	double t1 = bench_now_us();
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(t->stream));
	double t2 = bench_now_us();
	bench_report("async_host_us", kernel, "mean", (t1 - t0) / (double)n, "us", n);
	bench_report("async_per_op_us", kernel, "mean", (t2 - t0) / (double)n, "us", n);
}

void bench_sync(tiny *t, launch_fn launch, const char *kernel, long reps, double *v)
{
	for (long i = 0; i < 200; i++) {
		launch(t);
		CK(cudaStreamSynchronize(t->stream));
	}
	for (long i = 0; i < reps; i++) {
		double t0 = bench_now_us();
		launch(t);
		CK(cudaStreamSynchronize(t->stream));
		v[i] = bench_now_us() - t0;
	}
	CK(cudaGetLastError());
	bench_report("sync_us", kernel, "median", bench_median(v, reps), "us", reps);
}

void bench_graph(tiny *t, long reps, double *v)
{
	cudaGraph_t graph;
	cudaGraphExec_t exec;

	CK(cudaStreamBeginCapture(t->stream, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < GRAPH_NODES; i++)
		launch_raw(t);
	CK(cudaStreamEndCapture(t->stream, &graph));
	CK(cudaGraphInstantiate(&exec, graph, 0));
	for (long i = 0; i < 200; i++) {
		CK(cudaGraphLaunch(exec, t->stream));
		CK(cudaStreamSynchronize(t->stream));
	}
	for (long i = 0; i < reps; i++) {
		double t0 = bench_now_us();
		CK(cudaGraphLaunch(exec, t->stream));
		CK(cudaStreamSynchronize(t->stream));
		v[i] = bench_now_us() - t0;
	}
	bench_report("graph12_sync_us", "add256 x12", "median", bench_median(v, reps), "us", reps);
	CK(cudaGraphExecDestroy(exec));
	CK(cudaGraphDestroy(graph));
}

void bench_kernel_time(tiny *t, long reps, double *v)
{
	cudaEvent_t e0, e1;
	float ms;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (long i = 0; i < reps; i++) {
		CK(cudaEventRecord(e0, t->stream));
		launch_l1(t);
		CK(cudaEventRecord(e1, t->stream));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms, e0, e1));
		v[i] = (double)ms * 1e3;
	}
	bench_report("kernel_gpu_us", "add256-l1", "median", bench_median(v, reps), "us", reps);
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
}

void bench_spin_sync(const options *o, long reps, double *v);

int run_single(const options *o)
{
	float ha[TINY_N], hb[TINY_N];
	double *v = static_cast<double *>(malloc((size_t)o->reps * sizeof(double)));
	tiny t;

	if (v == NULL) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	CK(cudaSetDevice(0));
	tiny_init(&t, ha, hb);
	tiny_check(&t, launch_raw, ha, hb, "add256");
	tiny_check(&t, launch_l1, ha, hb, "add256-l1");
	bench_async(&t, launch_raw, "add256", o->n);
	bench_async(&t, launch_l1, "add256-l1", o->n);
	bench_sync(&t, launch_raw, "add256", o->reps, v);
	bench_sync(&t, launch_l1, "add256-l1", o->reps, v);
	bench_graph(&t, o->reps, v);
	bench_kernel_time(&t, o->reps, v);
	bench_spin_sync(o, o->reps, v);
	tiny_check(&t, launch_l1, ha, hb, "add256-l1 after the loops");
	CK(cudaFree(t.a));
	CK(cudaFree(t.b));
	CK(cudaFree(t.out));
	CK(cudaStreamDestroy(t.stream));
	free(v);
	return 0;
}

/* ---- many launchers ------------------------------------------------------ */

/* What one launcher (process or thread) reports back. */
struct launcher_result {
	int ok;
	double end_us;
	char error[160];
};

#define SPIN_N 4

struct spin_ctx {
	cudaStream_t stream;
	bool own_stream;
	float *x, *out;
	float hx[SPIN_N];
	/* --trace: each kernel's device start and end, each launch's return. */
	uint64_t *stamps;
	double *launched_us;
	double launches_done_us;
};

/* A stream and buffers, and a few kernels run so nothing is cold. */
bool spin_setup(spin_ctx *s, const options *o, char *err, size_t len)
{
	cudaError_t e;

	for (int i = 0; i < SPIN_N; i++)
		s->hx[i] = (float)(i + 1) * 0.5f;
	s->stamps = NULL;
	s->launched_us = NULL;
	if (o->trace &&
	    ((s->launched_us = static_cast<double *>(calloc((size_t)o->kernels, sizeof(double)))) ==
	             NULL ||
	     cudaMalloc(&s->stamps, (size_t)o->kernels * 2 * sizeof(uint64_t)) != cudaSuccess)) {
		snprintf(err, len, "set-up: no memory for the trace");
		return false;
	}
	if ((s->own_stream &&
	     (e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess) ||
	    (e = cudaMalloc(&s->x, sizeof(s->hx))) != cudaSuccess ||
	    (e = cudaMalloc(&s->out, sizeof(s->hx))) != cudaSuccess ||
	    (e = cudaMemcpy(s->x, s->hx, sizeof(s->hx), cudaMemcpyHostToDevice)) != cudaSuccess) {
		snprintf(err, len, "set-up: %s", cudaGetErrorString(e));
		return false;
	}
	for (int i = 0; i < 10; i++)
		spin_kernel<<<(unsigned)o->blocks, tkc::kSpinThreads, 0, s->stream>>>(
		        s->x, s->out, SPIN_N, (uint64_t)o->ns);
	/* Poisoned, so the check after the timed kernels sees their writes. */
	if ((e = cudaMemsetAsync(s->out, 0xff, sizeof(s->hx), s->stream)) != cudaSuccess ||
	    (e = cudaStreamSynchronize(s->stream)) != cudaSuccess) {
		snprintf(err, len, "warm-up: %s", cudaGetErrorString(e));
		return false;
	}
	return true;
}

/* Launch K spin kernels, synchronize, and check what they wrote. */
void spin_run(spin_ctx *s, const options *o, launcher_result *r)
{
	float got[SPIN_N];
	cudaError_t e;

	for (long k = 0; k < o->kernels; k++) {
		if (s->stamps) {
			spin_stamp_kernel<<<(unsigned)o->blocks, tkc::kSpinThreads, 0, s->stream>>>(
			        s->x, s->out, SPIN_N, (uint64_t)o->ns, s->stamps + 2 * k);
			s->launched_us[k] = bench_now_us();
		} else {
			spin_kernel<<<(unsigned)o->blocks, tkc::kSpinThreads, 0, s->stream>>>(
			        s->x, s->out, SPIN_N, (uint64_t)o->ns);
		}
	}
	s->launches_done_us = bench_now_us();
	e = cudaStreamSynchronize(s->stream);
	r->end_us = bench_now_us();
	if (e == cudaSuccess)
		e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaMemcpy(got, s->out, sizeof(got), cudaMemcpyDeviceToHost);
	if (e != cudaSuccess) {
		snprintf(r->error, sizeof(r->error), "spin kernels: %s", cudaGetErrorString(e));
		return;
	}
	for (int i = 0; i < SPIN_N && i < o->blocks; i++) {
		if (got[i] != s->hx[i] + 1.0f) {
			snprintf(r->error, sizeof(r->error), "spin wrote out[%d] = %g, expected %g",
			         i, (double)got[i], (double)(s->hx[i] + 1.0f));
			return;
		}
	}
	r->ok = 1;
}

/* The serving-engine rows' op in-process: one spin kernel (NS, B blocks)
 * then cudaStreamSynchronize, R times, median; the sync-each target's
 * reference. */
void bench_spin_sync(const options *o, long reps, double *v)
{
	spin_ctx s = {};
	char err[160];

	s.own_stream = true;
	if (!spin_setup(&s, o, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s\n", err);
		exit(1);
	}
	for (long i = 0; i < 200 + reps; i++) {
		double t0 = bench_now_us();
		spin_kernel<<<(unsigned)o->blocks, tkc::kSpinThreads, 0, s.stream>>>(
		        s.x, s.out, SPIN_N, (uint64_t)o->ns);
		CK(cudaStreamSynchronize(s.stream));
		if (i >= 200)
			v[i - 200] = bench_now_us() - t0;
	}
	CK(cudaGetLastError());
	float got[SPIN_N];
	CK(cudaMemcpy(got, s.out, sizeof(got), cudaMemcpyDeviceToHost));
	for (int i = 0; i < SPIN_N && i < o->blocks; i++)
		if (got[i] != s.hx[i] + 1.0f) {
			fprintf(stderr, PROG ": spin wrote out[%d] = %g, expected %g\n", i,
			        (double)got[i], (double)(s.hx[i] + 1.0f));
			exit(1);
		}
	bench_report("sync_us", "spin", "median", bench_median(v, reps), "us", reps);
	CK(cudaFree(s.x));
	CK(cudaFree(s.out));
	CK(cudaStreamDestroy(s.stream));
}

/* One child: its own CUDA context (created here, after the fork). */
int child_main(bench_proc *p, int idx, void *arg)
{
	const options *o = static_cast<const options *>(arg);
	launcher_result r;
	spin_ctx s;
	cudaError_t e;

	(void)idx;
	memset(&r, 0, sizeof(r));
	s.own_stream = true;
	if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess)
		snprintf(r.error, sizeof(r.error), "context: %s", cudaGetErrorString(e));
	else if (spin_setup(&s, o, r.error, sizeof(r.error)))
		r.error[0] = '\0';
	bool ready = r.error[0] == '\0';
	bench_proc_start(p);
	if (ready)
		spin_run(&s, o, &r);
	bench_proc_finish(p, &r);
	return r.ok ? 0 : 1;
}

int finish_many(const options *o, const char *what, int count, double t0,
                const launcher_result *res)
{
	double end = t0;
	int failed = 0;

	for (int i = 0; i < count; i++) {
		if (!res[i].ok) {
			fprintf(stderr, PROG ": %s %d: %s\n", what, i,
			        res[i].error[0] ? res[i].error : "no result");
			failed = 1;
		} else if (res[i].end_us > end) {
			end = res[i].end_us;
		}
	}
	if (failed)
		return 1;
	double total = (double)count * (double)o->kernels;
	bool threads = o->streams > 0;
	const char *label = threads ? "streams" : o->label;
	bench_report(threads ? "streams_kernels_per_s" : "procs_kernels_per_s", label, "total",
	             total / ((end - t0) / 1e6), "kernels/s", (long)total);
	bench_report(threads ? "streams_wall_ms" : "procs_wall_ms", label, "once", (end - t0) / 1e3,
	             "ms", (long)total);
	return 0;
}

int run_procs(const options *o)
{
	launcher_result res[MAX_PROCS];
	double t0 = 0.0;

	memset(res, 0, sizeof(res));
	/* A failed process still reports why: finish_many prints it. */
	bench_procs_run(PROG, o->procs, 1, sizeof(res[0]), child_main, (void *)o, res, &t0);
	return finish_many(o, "process", o->procs, t0, res);
}

struct thread_arg {
	const options *o;
	spin_ctx s;
	launcher_result r;
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
	int *ready, *go;
};

void *thread_main(void *p)
{
	thread_arg *a = static_cast<thread_arg *>(p);
	bool ok = spin_setup(&a->s, a->o, a->r.error, sizeof(a->r.error));

	pthread_mutex_lock(a->mu);
	(*a->ready)++;
	pthread_cond_broadcast(a->cv);
	while (!*a->go)
		pthread_cond_wait(a->cv, a->mu);
	pthread_mutex_unlock(a->mu);
	if (ok)
		spin_run(&a->s, a->o, &a->r);
	return NULL;
}

/* ---- --trace: where each stream's time went ------------------------------ */

/*
 * The offset between the device's nanosecond timer and bench_now_us: the
 * least (device start - host time before the launch) over a few launch and
 * synchronize round trips, so a device time minus it is at most the launch
 * latency (a few microseconds) early.
 */
double timer_offset_us(cudaStream_t st, uint64_t *stamp)
{
	double best = 0.0;

	for (int i = 0; i < 50; i++) {
		uint64_t got[2];
		double h0 = bench_now_us();
		spin_stamp_kernel<<<1, tkc::kSpinThreads, 0, st>>>(NULL, NULL, 0, 0, stamp);
		CK(cudaStreamSynchronize(st));
		CK(cudaMemcpy(got, stamp, sizeof(got), cudaMemcpyDeviceToHost));
		double d = (double)got[0] / 1e3 - h0;
		if (i == 0 || d < best)
			best = d;
	}
	return best;
}

/*
 * Which streams share a hardware queue: on stream a a long kernel then a
 * short one, then on stream b a short one. On a queue of its own b's kernel
 * starts while a's long one runs; behind a's second kernel in a shared
 * queue it waits for the long one to end. Prints each stream's partners.
 */
void trace_queues(const cudaStream_t *st, int n, uint64_t *stamp)
{
	printf("trace: queue sharing among %d streams (stream: the streams it waits behind)\n", n);
	for (int a = 0; a < n; a++) {
		char line[512];
		int len = snprintf(line, sizeof(line), "trace:   %2d:", a);
		int shared = 0;
		for (int b = 0; b < n; b++) {
			uint64_t got[6];
			if (b == a)
				continue;
			spin_stamp_kernel<<<1, tkc::kSpinThreads, 0, st[a]>>>(NULL, NULL, 0, 100000,
			                                                      stamp);
			spin_stamp_kernel<<<1, tkc::kSpinThreads, 0, st[a]>>>(NULL, NULL, 0, 0,
			                                                      stamp + 2);
			spin_stamp_kernel<<<1, tkc::kSpinThreads, 0, st[b]>>>(NULL, NULL, 0, 0,
			                                                      stamp + 4);
			CK(cudaDeviceSynchronize());
			CK(cudaMemcpy(got, stamp, sizeof(got), cudaMemcpyDeviceToHost));
			if (got[4] + 1000 >= got[1] && len < (int)sizeof(line) - 8) {
				len += snprintf(line + len, sizeof(line) - (size_t)len, " %d", b);
				shared++;
			}
		}
		printf("%s%s\n", line, shared ? "" : " none");
	}
}

/* Per thread: when its launches returned and its stream ran, from t0. */
void trace_streams(const options *o, const thread_arg *args, int n, double t0, double offset)
{
	size_t k = (size_t)o->kernels;
	uint64_t *st = static_cast<uint64_t *>(malloc(k * 2 * sizeof(uint64_t)));

	if (st == NULL) {
		fprintf(stderr, PROG ": out of memory for the trace\n");
		exit(1);
	}
	printf("trace: per thread, ms from the start: launches done, synchronize done, "
	       "its stream's first kernel start and last kernel end; us per kernel on the "
	       "device; kernels that started over 2 us after the one before ended, and those "
	       "whose launch returned after the one before ended (the device waited on the "
	       "host); kernels still queued when the launches were done\n");
	for (int i = 0; i < n; i++) {
		const spin_ctx *s = &args[i].s;
		CK(cudaMemcpy(st, s->stamps, k * 2 * sizeof(uint64_t), cudaMemcpyDeviceToHost));
		double first = (double)st[0] / 1e3 - offset,
		       last = (double)st[2 * k - 1] / 1e3 - offset;
		long gaps = 0, starved = 0, queued = 0;
		for (size_t j = 1; j < k; j++) {
			double prev_end = (double)st[2 * j - 1] / 1e3 - offset;
			if ((double)st[2 * j] / 1e3 - offset > prev_end + 2.0)
				gaps++;
			if (s->launched_us[j] > prev_end + 2.0)
				starved++;
		}
		for (size_t j = 0; j < k; j++)
			if ((double)st[2 * j] / 1e3 - offset > s->launches_done_us)
				queued++;
		printf("trace: thread %2d: launched %7.2f  synced %7.2f  device %7.2f .. %7.2f  "
		       "%5.2f us/kernel  gaps %5ld  host-starved %5ld  queued at end %5ld\n",
		       i, (s->launches_done_us - t0) / 1e3, (args[i].r.end_us - t0) / 1e3,
		       (first - t0) / 1e3, (last - t0) / 1e3, (last - first) / (double)(k - 1),
		       gaps, starved, queued);
	}
	free(st);
}

int run_streams(const options *o)
{
	static thread_arg args[MAX_PROCS];
	static cudaStream_t pool[64];
	pthread_t th[MAX_PROCS];
	launcher_result res[MAX_PROCS];
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	int ready = 0, go = 0;
	uint64_t *probe = NULL;

	CK(cudaSetDevice(0));
	CK(cudaFree(0));
	/* --pool N: the streams are made here first, as tileopsd's stream pool
	 * is, and thread i takes stream i. */
	for (int i = 0; i < o->pool; i++)
		CK(cudaStreamCreateWithFlags(&pool[i], cudaStreamNonBlocking));
	for (int i = 0; i < o->streams; i++) {
		memset(&args[i].r, 0, sizeof(args[i].r));
		args[i].o = o;
		args[i].s.own_stream = o->pool == 0;
		if (o->pool > 0)
			args[i].s.stream = pool[i];
		args[i].mu = &mu;
		args[i].cv = &cv;
		args[i].ready = &ready;
		args[i].go = &go;
		if (pthread_create(&th[i], NULL, thread_main, &args[i]) != 0) {
			fprintf(stderr, PROG ": pthread_create failed\n");
			exit(1);
		}
	}
	pthread_mutex_lock(&mu);
	while (ready < o->streams)
		pthread_cond_wait(&cv, &mu);
	double offset = 0.0;
	if (o->trace) {
		CK(cudaMalloc(&probe, 6 * sizeof(uint64_t)));
		offset = timer_offset_us(args[0].s.stream, probe);
	}
	double t0 = bench_now_us();
	go = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < o->streams; i++) {
		pthread_join(th[i], NULL);
		res[i] = args[i].r;
	}
	int rc = finish_many(o, "thread", o->streams, t0, res);
	if (o->trace && rc == 0) {
		cudaStream_t used[MAX_PROCS];
		trace_streams(o, args, o->streams, t0, offset);
		for (int i = 0; i < o->streams; i++)
			used[i] = args[i].s.stream;
		trace_queues(o->pool > 0 ? pool : used, o->pool > 0 ? o->pool : o->streams, probe);
	}
	return rc;
}

/* ---- command line -------------------------------------------------------- */

void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [--n N] [--reps R] [--json FILE]\n"
	           "       " PROG " --procs P [--kernels K] [--ns NS] [--blocks B] [--label NAME]\n"
	           "       " PROG
	           " --streams P [--pool N] [--trace] [--kernels K] [--ns NS] [--blocks B]\n"
	           "In-process CUDA dispatch figures (see the comment at the top of\n"
	           "tools/bench/dispatch_baseline.cu and docs/perf.md).\n");
}

bool parse_args(int argc, char **argv, options *o)
{
	static const struct option longs[] = {
		{ "n", required_argument, NULL, 'n' },
		{ "reps", required_argument, NULL, 'r' },
		{ "procs", required_argument, NULL, 'p' },
		{ "streams", required_argument, NULL, 's' },
		{ "kernels", required_argument, NULL, 'k' },
		{ "ns", required_argument, NULL, 't' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "label", required_argument, NULL, 'l' },
		{ "pool", required_argument, NULL, 'P' },
		{ "trace", no_argument, NULL, 'T' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, idx = 0;
	long v = 0;

	while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
		bool ok = true;
		switch (c) {
		case 'n':
			ok = !bench_parse_long(optarg, 1, 100000000, &o->n);
			break;
		case 'r':
			ok = !bench_parse_long(optarg, 1, 10000000, &o->reps);
			break;
		case 'k':
			ok = !bench_parse_long(optarg, 1, 100000000, &o->kernels);
			break;
		case 't':
			ok = !bench_parse_long(optarg, 0, 1000000000, &o->ns);
			break;
		case 'b':
			ok = !bench_parse_long(optarg, 1, 1024, &o->blocks);
			break;
		case 'p':
			ok = !bench_parse_long(optarg, 1, MAX_PROCS, &v);
			o->procs = (int)v;
			break;
		case 's':
			ok = !bench_parse_long(optarg, 1, MAX_PROCS, &v);
			o->streams = (int)v;
			break;
		case 'l':
			o->label = optarg;
			break;
		case 'P':
			ok = !bench_parse_long(optarg, 1, 64, &v);
			o->pool = (int)v;
			break;
		case 'T':
			o->trace = 1;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return false;
		}
		if (!ok) {
			fprintf(stderr, PROG ": bad value '%s' for --%s\n", optarg,
			        longs[idx].name);
			return false;
		}
	}
	if (optind < argc || (o->procs > 0 && o->streams > 0) ||
	    ((o->pool > 0 || o->trace) && o->streams == 0) ||
	    (o->pool > 0 && o->pool < o->streams)) {
		usage(stderr);
		return false;
	}
	return true;
}

} /* namespace */

int main(int argc, char **argv)
{
	options o;
	int rc;

	if (!parse_args(argc, argv, &o))
		return 2;
	if (bench_report_open(PROG, "dispatch-baseline", o.json) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	srand(12345);
	if (o.procs > 0)
		rc = run_procs(&o);
	else if (o.streams > 0)
		rc = run_streams(&o);
	else
		rc = run_single(&o);
	bench_report_table("measurement");
	bench_report_close();
	return rc;
}
