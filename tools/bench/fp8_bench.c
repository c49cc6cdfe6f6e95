/*
 * tileops-bench-fp8 - our gemm_fp8 against our bf16 gemm of the same shape,
 * in one run, on every gemm_fp8 workload of the manifest (without bias or
 * residual): the comparison of the decode target (fp8 reads half the
 * weight bytes, so it should take about half the time where the weight
 * read bounds both).
 *
 * Both are timed alike, as tileops-bench-gemm times its cases: the calls
 * are captured back to back in a CUDA graph through the kernel table's
 * launchers (a 32 MiB workspace each call, as the daemon gives), rotating
 * over enough copies of the inputs that the L2 does not serve the weights;
 * the two graphs are replayed alternately --reps times (at least 5), and
 * the median replay over its calls is the time per call. The weight-read
 * floor is the weight's bytes over the copy bandwidth of the same run.
 * Inputs: random e4m3 codes and bf16 values in [0.25, 2), positive scales.
 *
 *   tileops-bench-fp8 --manifest DIR [--json FILE] [--md FILE]
 *                     [--filter SUBSTRING] [--reps N]
 *
 * --json writes one JSON object a line (label, m, n, k, layout, fp8_us,
 * bf16_us, floor_us, tflops); tools/bench/fp8_torch.py writes rows with
 * the same labels, and scripts/bench-fp8.sh joins them into one table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "manifest.h"
#include "tileops_kernels.h"

#define MIB ((size_t)1 << 20)

static uint64_t rng = 0x2545f4914f6cdd1dULL;

static float rand_pos(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return 0.25f + 1.75f * (float)((rng * 0x2545f4914f6cdd1dULL) >> 40) / 16777216.0f;
}

/* Random host bytes fill at most this much; the rest of a buffer repeats
 * them (on the device), which changes no timing and keeps the set-up of a
 * 28672 x 4096 weight from taking seconds. */
#define FILL_PATTERN_BYTES (4u << 20)

/* A device buffer of n elements of dt, `copies` times over: a random host
 * pattern of at most FILL_PATTERN_BYTES, repeated to the set's size on the
 * device, then the set copied `copies` times. */
static void *device_fill(tk_dtype dt, size_t n, int copies)
{
	size_t es = tk_dtype_size(dt), bytes = n * es;
	size_t pn = bytes > FILL_PATTERN_BYTES ? FILL_PATTERN_BYTES / es : n;
	unsigned char *h = malloc(pn > 0 ? pn * es : 1);
	unsigned char *d = NULL;

	if (!h) {
		fprintf(stderr, "tileops-bench-fp8: out of host memory\n");
		exit(1);
	}
	for (size_t i = 0; i < pn; i++) {
		float v = rand_pos();
		if (dt == TK_FP8_E4M3)
			h[i] = tk_f32_to_fp8e4m3(rng & 1 ? v : -v);
		else if (dt == TK_BF16)
			((uint16_t *)h)[i] = tk_f32_to_bf16(v);
		else
			((float *)h)[i] = v * 0.01f;
	}
	CK(cudaMalloc((void **)&d, bytes * (size_t)copies + 16));
	CK(cudaMemcpy(d, h, pn * es, cudaMemcpyHostToDevice));
	for (size_t have = pn * es; have < bytes; have *= 2)
		CK(cudaMemcpy(d + have, d, have < bytes - have ? have : bytes - have,
		              cudaMemcpyDeviceToDevice));
	for (int c = 1; c < copies; c++)
		CK(cudaMemcpy(d + bytes * (size_t)c, d, bytes, cudaMemcpyDeviceToDevice));
	free(h);
	return d;
}

static tk_tensor tensor2(tk_dtype dt, int64_t r, int64_t c)
{
	tk_tensor t;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	/* c <= 0: a vector of r */
	t.ndim = c > 0 ? 2 : 1;
	t.shape[0] = r;
	t.shape[1] = c;
	tk_set_contiguous(&t);
	return t;
}

struct fcase {
	const char *label;
	int64_t m, n, k;
	int layout;
};

/* Median microseconds a call of fp8 and of bf16 over `calls` calls in one graph each. */
static void time_case(const struct fcase *fc, int reps, cudaStream_t s, void *ws, double *fp8_us,
                      double *bf16_us)
{
	const tk_kernel_entry *ef = tk_kernel_find("gemm_fp8"), *eb = tk_kernel_find("gemm");
	int64_t m = fc->m, n = fc->n, k = fc->k, kb = (k + 127) / 128, nb = (n + 127) / 128;
	size_t fp8_set = (size_t)(m * k + n * k) + (size_t)(m * n) * 2;
	size_t bf_set = (size_t)(m * k + n * k + m * n) * 2;
	int copies = (int)((256 * MIB + fp8_set - 1) / fp8_set);
	int cb = (int)((256 * MIB + bf_set - 1) / bf_set);
	int64_t sa_n = fc->layout == 0 ? 1 : fc->layout == 1 ? m : m * kb;
	int64_t sb_n = fc->layout == 0 ? 1 : fc->layout == 1 ? n : nb * kb;
	tk_call cf, cbf;
	cudaGraph_t g[2];
	cudaGraphExec_t ge[2];
	double med[2];

	copies = copies < 2 ? 2 : copies > 64 ? 64 : copies;
	cb = cb < 2 ? 2 : cb > 64 ? 64 : cb;
	uint8_t *a = device_fill(TK_FP8_E4M3, (size_t)(m * k), copies);
	uint8_t *b = device_fill(TK_FP8_E4M3, (size_t)(n * k), copies);
	float *sa = device_fill(TK_F32, (size_t)sa_n, copies);
	float *sb = device_fill(TK_F32, (size_t)sb_n, copies);
	uint16_t *c = device_fill(TK_BF16, (size_t)(m * n), copies);
	uint16_t *ab = device_fill(TK_BF16, (size_t)(m * k), cb);
	uint16_t *bb = device_fill(TK_BF16, (size_t)(n * k), cb);
	uint16_t *cc = device_fill(TK_BF16, (size_t)(m * n), cb);

	memset(&cf, 0, sizeof(cf));
	cf.n_in = 4;
	cf.n_out = 1;
	cf.in[0] = tensor2(TK_FP8_E4M3, m, k);
	cf.in[1] = tensor2(TK_FP8_E4M3, n, k);
	cf.in[2] = fc->layout == 0 ? tensor2(TK_F32, 1, 0)
	                           : tensor2(TK_F32, m, fc->layout == 1 ? 1 : kb);
	cf.in[3] = fc->layout == 0
	                   ? tensor2(TK_F32, 1, 0)
	                   : tensor2(TK_F32, fc->layout == 1 ? n : nb, fc->layout == 1 ? 1 : kb);
	cf.out[0] = tensor2(TK_BF16, m, n);
	cf.params[0].kind = TK_PARAM_INT;
	cf.params[0].v.i = fc->layout;
	cf.n_params = 1;
	cf.workspace = ws;
	cf.workspace_bytes = TK_WORKSPACE_BYTES;
	memset(&cbf, 0, sizeof(cbf));
	cbf.n_in = 2;
	cbf.n_out = 1;
	cbf.in[0] = tensor2(TK_BF16, m, k);
	cbf.in[1] = tensor2(TK_BF16, n, k);
	cbf.out[0] = tensor2(TK_BF16, m, n);
	cbf.params[0].kind = TK_PARAM_FLOAT;
	cbf.params[0].v.f = 1.0;
	cbf.params[1].kind = TK_PARAM_BOOL;
	cbf.params[1].v.b = 1;
	cbf.n_params = 2;
	cbf.workspace = ws;
	cbf.workspace_bytes = TK_WORKSPACE_BYTES;

	int calls = copies > cb ? copies : cb;
	calls = calls < 16 ? 16 : calls;
	for (int w = 0; w < 2; w++) {
		CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
		for (int i = 0; i < calls; i++) {
			tk_status st;
			if (w == 0) {
				int j = i % copies;
				cf.in[0].data = a + (size_t)(m * k) * (size_t)j;
				cf.in[1].data = b + (size_t)(n * k) * (size_t)j;
				cf.in[2].data = sa + (size_t)sa_n * (size_t)j;
				cf.in[3].data = sb + (size_t)sb_n * (size_t)j;
				cf.out[0].data = c + (size_t)(m * n) * (size_t)j;
				st = ef->cuda(&cf, s);
			} else {
				int j = i % cb;
				cbf.in[0].data = ab + (size_t)(m * k) * (size_t)j;
				cbf.in[1].data = bb + (size_t)(n * k) * (size_t)j;
				cbf.out[0].data = cc + (size_t)(m * n) * (size_t)j;
				st = eb->cuda(&cbf, s);
			}
			if (st != TK_OK) {
				fprintf(stderr, "tileops-bench-fp8: %s: %s refused (status %d)\n",
				        fc->label, w ? "gemm" : "gemm_fp8", (int)st);
				exit(1);
			}
		}
		CK(cudaStreamEndCapture(s, &g[w]));
		CK(cudaGraphInstantiate(&ge[w], g[w], 0));
	}
	bench_graphs_alternate_us(ge, 2, s, 2, reps, med);
	*fp8_us = med[0] / calls;
	*bf16_us = med[1] / calls;
	for (int w = 0; w < 2; w++) {
		CK(cudaGraphExecDestroy(ge[w]));
		CK(cudaGraphDestroy(g[w]));
	}
	CK(cudaFree(a));
	CK(cudaFree(b));
	CK(cudaFree(sa));
	CK(cudaFree(sb));
	CK(cudaFree(c));
	CK(cudaFree(ab));
	CK(cudaFree(bb));
	CK(cudaFree(cc));
}

/* The gemm_fp8 workloads without bias or residual, as cases. */
static int cases_of(const manifest_op *op, const char *filter, struct fcase *out, int max)
{
	int n = 0, layout_param = -1;

	for (int j = 0; j < op->n_params; j++)
		if (!strcmp(op->params[j].name, "scale_layout"))
			layout_param = j;
	for (int i = 0; i < op->n_workloads && n < max; i++) {
		const manifest_workload *w = &op->workloads[i];
		struct fcase fc = { w->label, -1, -1, -1, 0 };
		int extra = 0;
		if (filter && !strstr(w->label, filter))
			continue;
		for (int s = 0; s < w->n_shapes; s++) {
			if (w->tensor[s] == 0) {
				fc.m = w->shape[s][0];
				fc.k = w->shape[s][1];
			} else if (w->tensor[s] == 1) {
				fc.n = w->shape[s][0];
			} else if (w->tensor[s] > 3) {
				extra = 1;
			}
		}
		for (int s = 0; s < w->n_params; s++)
			if (w->param[s] == layout_param)
				fc.layout = (int)w->value[s].v.i;
		if (!extra && fc.m > 0 && fc.n > 0 && fc.k > 0)
			out[n++] = fc;
	}
	return n;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *json = NULL, *md = NULL, *filter = NULL;
	static const char *const layouts[] = { "per_tensor", "rowwise", "block" };
	struct fcase cs[512];
	char err[4096];
	manifest *m = NULL;
	int reps = 20;
	cudaStream_t s;
	void *ws;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--manifest") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--md") && i + 1 < argc)
			md = argv[++i];
		else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
			filter = argv[++i];
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: tileops-bench-fp8 --manifest DIR [--json FILE] "
			                "[--md FILE] [--filter SUBSTRING] [--reps N]\n");
			return 2;
		}
	}
	if (reps < 5)
		reps = 5;
	if (!dir || manifest_load(dir, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "tileops-bench-fp8: %s\n",
		        dir ? err : "--manifest DIR is required");
		return 2;
	}
	const manifest_op *op = manifest_find(m, "gemm_fp8");
	if (!op || !tk_kernel_find("gemm_fp8") || !tk_kernel_find("gemm")->cuda) {
		fprintf(stderr,
		        "tileops-bench-fp8: no gemm_fp8 in the manifest or no CUDA kernels\n");
		return 2;
	}
	int n = cases_of(op, filter, cs, (int)(sizeof(cs) / sizeof(cs[0])));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&ws, TK_WORKSPACE_BYTES));
	double tbps = bench_copy_tbps(s, (size_t)1 << 30);
	FILE *fj = json ? fopen(json, "w") : NULL, *fm = md ? fopen(md, "w") : stdout;
	if ((json && !fj) || !fm) {
		perror("tileops-bench-fp8");
		return 1;
	}
	fprintf(fm, "gemm_fp8 against our bf16 gemm of the same shape (copy %.2f TB/s)\n\n", tbps);
	fprintf(fm, "| workload | M | N | K | scales | fp8 us | bf16 us | bf16/fp8 | TFLOP/s |"
	            " weight floor us | %% of floor |\n");
	fprintf(fm,
	        "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
	for (int i = 0; i < n; i++) {
		double fu, bu, fl = (double)(cs[i].n * cs[i].k) / (tbps * 1e6);
		time_case(&cs[i], reps, s, ws, &fu, &bu);
		double tf = 2.0 * (double)cs[i].m * (double)cs[i].n * (double)cs[i].k / (fu * 1e6);
		fprintf(fm,
		        "| %s | %lld | %lld | %lld | %s | %.2f | %.2f | %.2fx | %.0f | %.2f | "
		        "%.0f%% |\n",
		        cs[i].label, (long long)cs[i].m, (long long)cs[i].n, (long long)cs[i].k,
		        layouts[cs[i].layout], fu, bu, bu / fu, tf, fl, 100.0 * fl / fu);
		fflush(fm);
		if (fj)
			fprintf(fj,
			        "{\"label\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
			        "\"layout\": "
			        "\"%s\", \"fp8_us\": %.6g, \"bf16_us\": %.6g, \"floor_us\": %.6g, "
			        "\"tflops\": %.6g}\n",
			        cs[i].label, (long long)cs[i].m, (long long)cs[i].n,
			        (long long)cs[i].k, layouts[cs[i].layout], fu, bu, fl, tf);
	}
	if (fj)
		fclose(fj);
	if (fm != stdout)
		fclose(fm);
	CK(cudaFree(ws));
	manifest_free(m);
	return 0;
}
