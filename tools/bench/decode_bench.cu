/*
 * decode_bench.cu - tileops-bench-decode: the attention decode kernels
 * (contiguous and paged KV caches) and kv_cache_append timed directly
 * through their L1 launchers, against the device-to-device copy bandwidth
 * measured in the same run.
 *
 * Every sequence is full (seq_lens = capacity), so the KV bytes read are
 * 2 * B * L * Hkv * D * 2 (K and V, bf16); the figure of merit is those
 * bytes per second over the copy bandwidth (bytes read plus written per
 * second of a 1 GiB cudaMemcpyAsync). Page tables are a random
 * permutation of the pages. Caches hold random values, never zeros. When
 * one cache set fits in three times the L2, the timed runs rotate over
 * several sets so that each call reads from device memory.
 *
 * Timing: GRAPH_CALLS back-to-back calls are captured in one CUDA graph;
 * the graph is replayed, each replay timed with events; the time per call
 * is the median replay over GRAPH_CALLS.
 *
 * Sweep: the batch-1 long-context and the 70B batch-32 cases again with
 * every split count the kernel's tuning interface offers (exact choices
 * through tk_call.choice; attention_decode.cu), a row each, after the
 * built-in rule's row: where one count wins is measured here, and
 * tileops-tune puts the winner per shape class in the tuning table. The
 * main table runs the built-in rule.
 *
 *   tileops-bench-decode [--json FILE] [--md FILE] [--replays N] [--no-sweep]
 *
 * Prints markdown tables on stdout (and to --md); --json writes one JSON
 * object per line: the copy ceiling, then one per case and sweep row.
 */
#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench_cuda.h"
#include "tileops_kernels.h"

namespace
{

constexpr int GRAPH_CALLS = 20;

struct Case {
	const char *label;
	const char *op; /* attention_decode, attention_decode_paged or kv_cache_append */
	int B, T, Hq, Hkv, D, L, page; /* page 0: contiguous */
};

const Case cases[] = {
	{ "llama3.1-8b b64 kv4096 contiguous", "attention_decode", 64, 1, 32, 8, 128, 4096, 0 },
	{ "llama3.1-8b b64 kv4096 page 16", "attention_decode_paged", 64, 1, 32, 8, 128, 4096, 16 },
	{ "llama3.1-8b b64 kv4096 page 64", "attention_decode_paged", 64, 1, 32, 8, 128, 4096, 64 },
	{ "llama3.1-8b b1 kv65536 contiguous", "attention_decode", 1, 1, 32, 8, 128, 65536, 0 },
	{ "llama3.1-8b b1 kv65536 page 16", "attention_decode_paged", 1, 1, 32, 8, 128, 65536, 16 },
	{ "llama3.1-70b b32 kv8192 contiguous (GQA 8)", "attention_decode", 32, 1, 64, 8, 128, 8192,
	  0 },
	{ "llama3.1-70b b32 kv8192 page 16 (GQA 8)", "attention_decode_paged", 32, 1, 64, 8, 128,
	  8192, 16 },
	{ "llama3.1-8b b64 kv4096 T4 page 16 (speculative)", "attention_decode_paged", 64, 4, 32, 8,
	  128, 4096, 16 },
	{ "llama3.1-8b append b64 page 16", "kv_cache_append", 64, 1, 32, 8, 128, 4096, 16 },
};

/* The cases the sweep repeats with every offered split count. */
bool swept(const char *label)
{
	return strstr(label, "b1 kv65536") != nullptr || strstr(label, "70b b32") != nullptr;
}

/* Random bf16 in [-1, 1) from a hash of the index: never zeros, never the same twice. */
__global__ void fill_random(uint16_t *p, int64_t n, uint32_t seed)
{
	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		uint32_t h = (uint32_t)i * 2654435761u ^ seed;
		h ^= h >> 15;
		h *= 2246822519u;
		h ^= h >> 13;
		float f = (float)(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
		p[i] = (uint16_t)(__float_as_uint(f) >> 16);
	}
}

void fill(void *p, int64_t n, uint32_t seed)
{
	fill_random<<<1024, 256>>>(static_cast<uint16_t *>(p), n, seed);
	CK(cudaGetLastError());
}

double median(std::vector<float> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0.0 : v[v.size() / 2];
}

tk_tensor tensor(void *data, tk_dtype dt, int ndim, const int64_t *shape)
{
	tk_tensor t;
	memset(&t, 0, sizeof(t));
	t.data = data;
	t.dtype = dt;
	t.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		t.shape[d] = shape[d];
	tk_set_contiguous(&t);
	return t;
}

/* One set of device tensors for a case, and its call. */
struct Set {
	tk_call call;
	std::vector<void *> bufs;
};

void *dalloc(Set &s, size_t bytes)
{
	void *p;
	CK(cudaMalloc(&p, bytes ? bytes : 16));
	s.bufs.push_back(p);
	return p;
}

void make_set(const Case &c, Set &s, void *ws, uint32_t seed)
{
	const int64_t pages = c.page ? (int64_t)c.B * c.L / c.page : c.B;
	const int64_t ps = c.page ? c.page : c.L, maxp = c.page ? c.L / c.page : 1;
	const int64_t cache[4] = { pages, ps, c.Hkv, c.D };
	const int64_t cache_n = pages * ps * c.Hkv * c.D;
	const bool append = strcmp(c.op, "kv_cache_append") == 0;
	tk_call &k = s.call;

	memset(&k, 0, sizeof(k));
	void *kc = dalloc(s, (size_t)cache_n * 2), *vc = dalloc(s, (size_t)cache_n * 2);
	fill(kc, cache_n, seed * 3 + 1);
	fill(vc, cache_n, seed * 3 + 2);
	if (append) {
		/* One new token per sequence, at the last position of its last page. */
		const int64_t ks[3] = { c.B, c.Hkv, c.D }, ss[1] = { c.B };
		void *kn = dalloc(s, (size_t)c.B * c.Hkv * c.D * 2);
		void *vn = dalloc(s, (size_t)c.B * c.Hkv * c.D * 2);
		fill(kn, (int64_t)c.B * c.Hkv * c.D, seed + 5);
		fill(vn, (int64_t)c.B * c.Hkv * c.D, seed + 6);
		std::vector<int64_t> slots(c.B);
		for (int b = 0; b < c.B; b++)
			slots[b] = ((int64_t)b * maxp + maxp - 1) * ps + ps - 1;
		void *sl = dalloc(s, slots.size() * 8);
		CK(cudaMemcpy(sl, slots.data(), slots.size() * 8, cudaMemcpyHostToDevice));
		k.in[0] = tensor(kn, TK_BF16, 3, ks);
		k.in[1] = tensor(vn, TK_BF16, 3, ks);
		k.in[2] = tensor(sl, TK_I64, 1, ss);
		k.in[3] = tensor(kc, TK_BF16, 4, cache);
		k.in[4] = tensor(vc, TK_BF16, 4, cache);
		k.n_in = 5;
		return;
	}
	const int64_t q4[4] = { c.B, c.T, c.Hq, c.D }, q3[3] = { c.B, c.Hq, c.D };
	const int64_t qn = (int64_t)c.B * c.T * c.Hq * c.D;
	void *q = dalloc(s, (size_t)qn * 2), *o = dalloc(s, (size_t)qn * 2);
	fill(q, qn, seed + 9);
	std::vector<int32_t> lens(c.B, c.L);
	void *dl = dalloc(s, lens.size() * 4);
	CK(cudaMemcpy(dl, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
	const int64_t ls[1] = { c.B };
	int n = 0;
	k.in[n++] = c.T > 1 ? tensor(q, TK_BF16, 4, q4) : tensor(q, TK_BF16, 3, q3);
	k.in[n++] = tensor(kc, TK_BF16, 4, cache);
	k.in[n++] = tensor(vc, TK_BF16, 4, cache);
	if (c.page) {
		/* A random permutation of all pages. */
		std::vector<int32_t> perm(pages);
		for (int64_t i = 0; i < pages; i++)
			perm[i] = (int32_t)i;
		uint64_t r = 0x9e3779b97f4a7c15ULL ^ seed;
		for (int64_t i = pages - 1; i > 0; i--) {
			r ^= r >> 12;
			r ^= r << 25;
			r ^= r >> 27;
			int64_t j = (int64_t)((r * 0x2545f4914f6cdd1dULL) % (uint64_t)(i + 1));
			std::swap(perm[i], perm[j]);
		}
		const int64_t bs[2] = { c.B, maxp };
		void *bt = dalloc(s, perm.size() * 4);
		CK(cudaMemcpy(bt, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
		k.in[n++] = tensor(bt, TK_I32, 2, bs);
	}
	k.in[n++] = tensor(dl, TK_I32, 1, ls);
	k.n_in = n;
	k.out[0] = c.T > 1 ? tensor(o, TK_BF16, 4, q4) : tensor(o, TK_BF16, 3, q3);
	k.n_out = 1;
	k.params[0].kind = TK_PARAM_FLOAT;
	k.params[0].v.f = 0.0;
	k.n_params = 1;
	k.workspace = ws;
	k.workspace_bytes = TK_WORKSPACE_BYTES;
}

void free_set(Set &s)
{
	for (void *p : s.bufs)
		CK(cudaFree(p));
	s.bufs.clear();
}

struct Result {
	double us, bytes, tbps, pct;
};

/* The case under `choice` (mode TK_CHOICE_NONE: the built-in rule). */
Result run_case(const Case &c, const tk_choice &choice, void *ws, cudaStream_t st, int replays,
                double copy_tbps, size_t l2)
{
	const tk_kernel_entry *e = tk_kernel_find(c.op);
	const bool append = strcmp(c.op, "kv_cache_append") == 0;
	const double kv = append ? 2.0 * c.B * c.Hkv * c.D * 2 * 2 /* read and written */
	                         : 2.0 * c.B * c.L * c.Hkv * c.D * 2;
	/* The append's caches are large and it touches a few rows of them: one set. */
	const int nsets =
	        append || kv > 3.0 * (double)l2 ? 1 : std::min(8, (int)(3.0 * l2 / kv) + 1);
	std::vector<Set> sets(nsets);
	Result r = { 0, kv, 0, 0 };

	if (e == nullptr || e->cuda == nullptr) {
		fprintf(stderr, "%s: no CUDA kernel\n", c.op);
		exit(1);
	}
	for (int i = 0; i < nsets; i++) {
		make_set(c, sets[i], ws, 11u * (uint32_t)i + 1);
		sets[i].call.choice = choice;
	}
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < nsets; i++) {
		tk_status s = e->cuda(&sets[i].call, st);
		if (s != TK_OK) {
			fprintf(stderr, "%s: the launcher refused %s (status %d)\n", c.op, c.label,
			        s);
			exit(1);
		}
	}
	CK(cudaStreamSynchronize(st));

	cudaGraph_t g;
	cudaGraphExec_t ge;
	CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
	for (int i = 0; i < GRAPH_CALLS; i++)
		e->cuda(&sets[i % nsets].call, st);
	CK(cudaStreamEndCapture(st, &g));
	CK(cudaGraphInstantiate(&ge, g, 0));
	cudaEvent_t e0, e1;
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	std::vector<float> ms;
	for (int i = 0; i < replays + 2; i++) {
		CK(cudaEventRecord(e0, st));
		CK(cudaGraphLaunch(ge, st));
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		float t;
		CK(cudaEventElapsedTime(&t, e0, e1));
		if (i >= 2)
			ms.push_back(t);
	}
	CK(cudaGetLastError());
	r.us = median(ms) * 1e3 / GRAPH_CALLS;
	r.tbps = kv / (r.us * 1e-6) / 1e12;
	r.pct = 100.0 * r.tbps / copy_tbps;
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	for (auto &s : sets)
		free_set(s);
	return r;
}

/* One table row on stdout and --md, one JSON line on --json. */
void emit_row(const char *label, const char *op, const Result &r, FILE *mf, FILE *jf)
{
	char line[512];

	snprintf(line, sizeof(line), "| %s | %.2f | %.3f | %.1f%% |\n", label, r.us, r.tbps, r.pct);
	fputs(line, stdout);
	fflush(stdout);
	if (mf)
		fputs(line, mf);
	if (jf)
		fprintf(jf,
		        "{\"bench\": \"decode\", \"name\": \"%s\", \"kernel\": \"%s\", "
		        "\"us\": %.6g, \"bytes\": %.6g, \"tbps\": %.6g, \"pct_copy\": %.6g}\n",
		        label, op, r.us, r.bytes, r.tbps, r.pct);
}

/* The swept cases under every split count their tuning interface offers. */
void run_sweep(void *ws, cudaStream_t st, int replays, double copy, size_t l2, FILE *mf, FILE *jf)
{
	const char *head = "\nSweep: every split count the kernel offers (exact choices), after "
	                   "the built-in rule\n\n"
	                   "| case, choice | us | KV TB/s | % of copy |\n"
	                   "| --- | ---: | ---: | ---: |\n";

	fputs(head, stdout);
	if (mf)
		fputs(head, mf);
	for (const Case &c : cases) {
		if (!swept(c.label))
			continue;
		const tk_kernel_entry *e = tk_kernel_find(c.op);
		tk_choice none, cand[64];
		Set probe;
		memset(&none, 0, sizeof(none));
		make_set(c, probe, ws, 1);
		int n = e->tuning ? e->tuning->candidates(&probe.call, cand, 64) : 0;
		free_set(probe);
		n = n > 64 ? 64 : n;
		for (int i = -1; i < n; i++) {
			char label[256], text[TK_TUNING_TEXT_MAX] = "built-in";
			if (i >= 0)
				e->tuning->format_choice(&cand[i], text, sizeof(text));
			Result r = run_case(c, i < 0 ? none : cand[i], ws, st, replays, copy, l2);
			snprintf(label, sizeof(label), "%s, %s", c.label, text);
			emit_row(label, c.op, r, mf, jf);
		}
	}
}

} /* namespace */

int main(int argc, char **argv)
{
	const char *json = nullptr, *md = nullptr;
	int replays = 15, do_sweep = 1;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
			json = argv[++i];
		} else if (strcmp(argv[i], "--md") == 0 && i + 1 < argc) {
			md = argv[++i];
		} else if (strcmp(argv[i], "--replays") == 0 && i + 1 < argc) {
			replays = atoi(argv[++i]);
		} else if (strcmp(argv[i], "--no-sweep") == 0) {
			do_sweep = 0;
		} else {
			fprintf(stderr,
			        "usage: %s [--json FILE] [--md FILE] [--replays N] [--no-sweep]\n",
			        argv[0]);
			return 2;
		}
	}
	if (replays < 1)
		replays = 1;
	cudaDeviceProp prop;
	CK(cudaGetDeviceProperties(&prop, 0));
	cudaStream_t st;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	void *ws;
	CK(cudaMalloc(&ws, TK_WORKSPACE_BYTES));
	const double copy = bench_copy_tbps(st, (size_t)1 << 30);
	FILE *jf = json ? fopen(json, "a") : nullptr;
	FILE *mf = md ? fopen(md, "w") : nullptr;
	if ((json && !jf) || (md && !mf)) {
		fprintf(stderr, "cannot open the output files\n");
		return 1;
	}
	if (jf)
		fprintf(jf,
		        "{\"bench\": \"decode\", \"name\": \"copy_tbps\", \"kernel\": \"copy\", "
		        "\"value\": %.6g, \"gpu\": \"%s\"}\n",
		        copy, prop.name);
	char head[1024];
	snprintf(
	        head, sizeof(head),
	        "%s, copy %.3f TB/s (1 GiB D2D, read + written), %d calls per graph\n\n"
	        "| case (bf16, d128) | us | KV TB/s | %% of copy |\n| --- | ---: | ---: | ---: |\n",
	        prop.name, copy, GRAPH_CALLS);
	fputs(head, stdout);
	if (mf)
		fputs(head, mf);
	tk_choice builtin;
	memset(&builtin, 0, sizeof(builtin));
	for (const Case &c : cases) {
		Result r = run_case(c, builtin, ws, st, replays, copy, (size_t)prop.l2CacheSize);
		emit_row(c.label, c.op, r, mf, jf);
	}
	if (do_sweep)
		run_sweep(ws, st, replays, copy, (size_t)prop.l2CacheSize, mf, jf);
	if (jf)
		fclose(jf);
	if (mf)
		fclose(mf);
	CK(cudaFree(ws));
	CK(cudaStreamDestroy(st));
	return 0;
}
