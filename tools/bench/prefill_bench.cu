/*
 * prefill_bench.cu - tileops-bench-prefill: times the CUDA attention_prefill
 * (and attention_prefill_varlen) kernels on the manifest's workloads and on
 * the performance-target shapes, with CUDA events, as the median of many
 * runs after a warm-up. TFLOP/s counts 4 * B * Hq * S * Skv * D (S = Skv),
 * halved for causal attention, as the manifest's roofline does.
 *
 *   tileops-bench-prefill [--json FILE] [--md FILE] [--runs N] [--quick]
 *                         [--variants LIST]
 *
 * Each shape is timed once per choice in LIST, comma-separated: d (the
 * launcher's built-in choice for the shape), a schedule by name (plain,
 * turns, turns-wide, lean-wide: attention_schedule.h), or all (every
 * schedule the tuning interface offers for the shape); default "d,all".
 * The schedules run as exact choices through tk_call.choice, one right
 * after the other so all see the same clocks; every row names its choice.
 * This is where which schedule wins on which shape is measured.
 *
 * One JSON object per line per shape goes to --json (kernels/bench/
 * attention_torch.py reads it to time the same shapes with PyTorch); a
 * markdown table goes to --md and to stdout. A shape the kernel declines
 * is listed as unsupported. Inputs are random (never zeros).
 */
#include <algorithm>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "bench_cuda.h"
#include "tileops_kernels.h"

namespace
{

struct Shape {
	const char *label;
	int64_t B, S, Skv, Hq, Hkv, D, Dv;
	bool causal;
	tk_dtype dt;
	int varlen_seqs; /* > 0: attention_prefill_varlen over this many equal sequences */
};

/* The manifest's attention_prefill workloads, then the performance targets. */
const Shape shapes[] = {
	{ "llama3.1-8b prefill 4k (GQA 32/8)", 4, 4096, 4096, 32, 8, 128, 128, true, TK_BF16, 0 },
	{ "llama3.1-8b prefill 4k (GQA 32/8)", 4, 4096, 4096, 32, 8, 128, 128, true, TK_F16, 0 },
	{ "llama3.1-70b prefill 8k (GQA 64/8)", 1, 8192, 8192, 64, 8, 128, 128, true, TK_BF16, 0 },
	{ "llama3.1-405b prefill 4k (GQA 128/8)", 1, 4096, 4096, 128, 8, 128, 128, true, TK_BF16,
	  0 },
	{ "deepseek-v3 mla prefill (MHA, qk 192, v 128)", 1, 4096, 4096, 128, 128, 192, 128, true,
	  TK_BF16, 0 },
	{ "target d128 B4 H32 S4096 non-causal", 4, 4096, 4096, 32, 32, 128, 128, false, TK_BF16,
	  0 },
	{ "target d128 B4 H32 S4096 causal", 4, 4096, 4096, 32, 32, 128, 128, true, TK_BF16, 0 },
	{ "target d64 B16 H16 S1024 non-causal", 16, 1024, 1024, 16, 16, 64, 64, false, TK_BF16,
	  0 },
	{ "target d64 B16 H16 S1024 causal", 16, 1024, 1024, 16, 16, 64, 64, true, TK_BF16, 0 },
	{ "target d256 B4 H16 S4096 non-causal", 4, 4096, 4096, 16, 16, 256, 256, false, TK_BF16,
	  0 },
	{ "target d256 B4 H16 S4096 causal", 4, 4096, 4096, 16, 16, 256, 256, true, TK_BF16, 0 },
	{ "llama3.1-8b packed prefill 8 x 2k (varlen)", 8, 2048, 2048, 32, 8, 128, 128, true,
	  TK_BF16, 8 },
};

__global__ void fill_random(uint16_t *p, int64_t n, uint64_t seed, bool bf16)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ULL ^ seed;
		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ULL;
		x ^= x >> 29;
		float f = ((float)(x >> 40) / (float)(1 << 24)) * 4.0f - 2.0f;
		if (bf16) {
			__nv_bfloat16 b = __float2bfloat16(f);
			p[i] = *reinterpret_cast<uint16_t *>(&b);
		} else {
			__half h = __float2half(f);
			p[i] = *reinterpret_cast<uint16_t *>(&h);
		}
	}
}

/* A packed tensor of the shape, on the device when alloc. */
tk_tensor tensor(tk_dtype dt, std::initializer_list<int64_t> shape, bool alloc = true)
{
	tk_tensor t;
	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = (int)shape.size();
	int i = 0;
	for (int64_t s : shape)
		t.shape[i++] = s;
	tk_set_contiguous(&t);
	size_t bytes = (size_t)tk_numel(&t) * tk_dtype_size(dt);
	if (alloc)
		CK(cudaMalloc(&t.data, bytes ? bytes : 16));
	return t;
}

double flops_of(const Shape &s)
{
	double f = 2.0 * s.B * s.Hq * (double)s.S * s.Skv * (s.D + s.Dv);
	return s.causal ? f / 2 : f;
}

struct Result {
	const Shape *s;
	char variant[TK_TUNING_TEXT_MAX]; /* the choice's name, "d" for the built-in one */
	bool supported;
	double ms, tflops;
};

/* One item of --variants: d, all, or a schedule's name. */
struct Variant {
	bool builtin, all;
	tk_choice choice;
};

const tk_kernel_entry *entry_of(const Shape &s)
{
	return tk_kernel_find(s.varlen_seqs > 0 ? "attention_prefill_varlen" : "attention_prefill");
}

/* The call of shape s: its tensors on the device when alloc, else shapes only. */
void shape_call(const Shape &s, tk_call *out, bool alloc)
{
	bool varlen = s.varlen_seqs > 0;
	tk_call &c = *out;
	memset(&c, 0, sizeof(c));
	int64_t T = s.B * s.S, Tk = s.B * s.Skv;

	if (varlen) {
		c.in[0] = tensor(s.dt, { T, s.Hq, s.D }, alloc);
		c.in[1] = tensor(s.dt, { Tk, s.Hkv, s.D }, alloc);
		c.in[2] = tensor(s.dt, { Tk, s.Hkv, s.Dv }, alloc);
		c.in[3] = tensor(TK_I32, { s.B + 1 }, alloc);
		c.in[4] = tensor(TK_I32, { s.B + 1 }, alloc);
		std::vector<int> cq(s.B + 1), ck(s.B + 1);
		for (int64_t b = 0; b <= s.B; b++) {
			cq[b] = (int)(b * s.S);
			ck[b] = (int)(b * s.Skv);
		}
		if (alloc) {
			CK(cudaMemcpy(c.in[3].data, cq.data(), cq.size() * 4,
			              cudaMemcpyHostToDevice));
			CK(cudaMemcpy(c.in[4].data, ck.data(), ck.size() * 4,
			              cudaMemcpyHostToDevice));
		}
		c.out[0] = tensor(s.dt, { T, s.Hq, s.Dv }, alloc);
		c.out[1] = tensor(TK_F32, { s.Hq, T }, alloc);
		c.n_in = 5;
		c.n_params = 3;
		c.params[2].kind = TK_PARAM_INT;
		c.params[2].v.i = s.S;
	} else {
		c.in[0] = tensor(s.dt, { s.B, s.S, s.Hq, s.D }, alloc);
		c.in[1] = tensor(s.dt, { s.B, s.Skv, s.Hkv, s.D }, alloc);
		c.in[2] = tensor(s.dt, { s.B, s.Skv, s.Hkv, s.Dv }, alloc);
		c.out[0] = tensor(s.dt, { s.B, s.S, s.Hq, s.Dv }, alloc);
		c.out[1] = tensor(TK_F32, { s.B, s.Hq, s.S }, alloc);
		c.n_in = 3;
		c.n_params = 2;
	}
	c.n_out = 2;
	c.params[0].kind = TK_PARAM_BOOL;
	c.params[0].v.b = s.causal;
	c.params[1].kind = TK_PARAM_FLOAT;
	c.params[1].v.f = 0.0;
}

void probe_call(const Shape &s, tk_call *c)
{
	shape_call(s, c, false);
}

Result run_shape(const Shape &s, const tk_choice &choice, int runs)
{
	Result r = { &s, "d", false, 0.0, 0.0 };
	const tk_kernel_entry *e = entry_of(s);

	if (choice.mode != TK_CHOICE_NONE && e != NULL && e->tuning != NULL)
		e->tuning->format_choice(&choice, r.variant, sizeof(r.variant));
	tk_call c;
	shape_call(s, &c, true);
	c.choice = choice;
	for (int i = 0; i < 3; i++)
		fill_random<<<1024, 256>>>((uint16_t *)c.in[i].data, tk_numel(&c.in[i]), 77 + i,
		                           s.dt == TK_BF16);
	CK(cudaDeviceSynchronize());

	if (e != NULL && e->cuda != NULL && e->cuda(&c, NULL) == TK_OK) {
		CK(cudaDeviceSynchronize());
		r.supported = true;
		for (int i = 0; i < 3; i++)
			e->cuda(&c, NULL);
		cudaEvent_t a, b;
		CK(cudaEventCreate(&a));
		CK(cudaEventCreate(&b));
		std::vector<float> ms;
		for (int i = 0; i < runs; i++) {
			CK(cudaEventRecord(a));
			e->cuda(&c, NULL);
			CK(cudaEventRecord(b));
			CK(cudaEventSynchronize(b));
			float t = 0;
			CK(cudaEventElapsedTime(&t, a, b));
			ms.push_back(t);
		}
		CK(cudaGetLastError());
		std::sort(ms.begin(), ms.end());
		r.ms = ms[ms.size() / 2];
		r.tflops = flops_of(s) / (r.ms * 1e-3) / 1e12;
		cudaEventDestroy(a);
		cudaEventDestroy(b);
	}
	for (int i = 0; i < c.n_in; i++)
		cudaFree(c.in[i].data);
	for (int i = 0; i < c.n_out; i++)
		cudaFree(c.out[i].data);
	return r;
}

void write_json(FILE *f, const Result &r)
{
	const Shape &s = *r.s;
	fprintf(f,
	        "{\"bench\": \"prefill\", \"impl\": \"tileops\", \"label\": \"%s\", \"dtype\": "
	        "\"%s\", "
	        "\"B\": %lld, \"S\": %lld, \"Skv\": %lld, \"Hq\": %lld, \"Hkv\": %lld, \"D\": "
	        "%lld, "
	        "\"Dv\": %lld, \"causal\": %s, \"varlen_seqs\": %d, \"variant\": \"%s\", "
	        "\"supported\": %s, \"ms\": %.5f, \"tflops\": %.2f}\n",
	        s.label, tk_dtype_name(s.dt), (long long)s.B, (long long)s.S, (long long)s.Skv,
	        (long long)s.Hq, (long long)s.Hkv, (long long)s.D, (long long)s.Dv,
	        s.causal ? "true" : "false", s.varlen_seqs, r.variant,
	        r.supported ? "true" : "false", r.ms, r.tflops);
}

void write_md(FILE *f, const std::vector<Result> &rs)
{
	fprintf(f, "| shape | dtype | causal | choice | ms | TFLOP/s |\n"
	           "| --- | --- | --- | --- | ---: | ---: |\n");
	for (const Result &r : rs) {
		if (r.supported)
			fprintf(f, "| %s | %s | %s | %s | %.3f | %.1f |\n", r.s->label,
			        tk_dtype_name(r.s->dt), r.s->causal ? "yes" : "no", r.variant, r.ms,
			        r.tflops);
		else
			fprintf(f, "| %s | %s | %s | %s | unsupported | |\n", r.s->label,
			        tk_dtype_name(r.s->dt), r.s->causal ? "yes" : "no", r.variant);
	}
}

/*
 * "d,turns,all": d is the launcher's built-in choice, all every schedule
 * the tuning interface offers for a shape, a name that schedule (an exact
 * choice). An unknown name empties the list.
 */
std::vector<Variant> parse_variants(const char *list)
{
	const tk_kernel_entry *e = tk_kernel_find("attention_prefill");
	std::vector<Variant> v;
	char buf[256];

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		Variant x;
		memset(&x, 0, sizeof(x));
		if (!strcmp(tok, "d")) {
			x.builtin = true;
		} else if (!strcmp(tok, "all")) {
			x.all = true;
		} else if (e == NULL || e->tuning == NULL ||
		           e->tuning->parse_choice(tok, &x.choice) != 0) {
			return {};
		} else {
			x.choice.mode = TK_CHOICE_EXACT;
		}
		v.push_back(x);
	}
	return v;
}

} /* namespace */

int main(int argc, char **argv)
{
	const char *json = NULL, *md = NULL;
	int runs = 20;
	bool quick = false;
	std::vector<Variant> variants = parse_variants("d,all");

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json") && i + 1 < argc)
			json = argv[++i];
		else if (!strcmp(argv[i], "--md") && i + 1 < argc)
			md = argv[++i];
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			quick = true;
		else if (!strcmp(argv[i], "--variants") && i + 1 < argc)
			variants = parse_variants(argv[++i]);
		else {
			fprintf(stderr,
			        "usage: %s [--json FILE] [--md FILE] [--runs N] [--quick] "
			        "[--variants LIST]\n",
			        argv[0]);
			return 2;
		}
	}
	if (variants.empty()) {
		fprintf(stderr, "--variants wants a comma-separated list of d, all and schedules "
		                "(plain, turns, turns-wide, lean-wide)\n");
		return 2;
	}
	if (runs < 10)
		runs = 10;
	std::vector<Result> rs;
	for (const Shape &s : shapes) {
		if (quick && strncmp(s.label, "target", 6) != 0)
			continue;
		for (const Variant &v : variants) {
			const tk_kernel_entry *e = entry_of(s);
			tk_choice cand[16];
			if (!v.all) {
				rs.push_back(run_shape(s, v.choice, runs));
				continue;
			}
			/* The candidates depend on the shape only: a call without data will do. */
			tk_call probe;
			memset(&probe, 0, sizeof(probe));
			probe_call(s, &probe);
			int n = e && e->tuning && e->tuning->candidates
			                ? e->tuning->candidates(&probe, cand, 16)
			                : 0;
			for (int i = 0; i < n && i < 16; i++)
				rs.push_back(run_shape(s, cand[i], runs));
		}
	}
	if (json) {
		FILE *f = fopen(json, "w");
		if (f == NULL) {
			perror(json);
			return 1;
		}
		for (const Result &r : rs)
			write_json(f, r);
		fclose(f);
	}
	write_md(stdout, rs);
	if (md) {
		FILE *f = fopen(md, "w");
		if (f == NULL) {
			perror(md);
			return 1;
		}
		write_md(f, rs);
		fclose(f);
	}
	return 0;
}
