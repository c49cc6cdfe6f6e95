/*
 * bench_workloads.c - the workload table of tileops-bench, mirroring the
 * manifest's workloads (the yaml files of manifest/) with a few decode-size rows
 * added, and the roofline counts of each (the manifest's formulas: each
 * input read once, each output written once, in-place inputs both).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_WORKLOADS 512

static bw_workload table[MAX_WORKLOADS];
static int n_table;

tk_dtype bw_dtype(const bw_workload *w, const bw_tensor *t)
{
	return t->dt != TK_DTYPE_INVALID ? t->dt : w->dt;
}

static int64_t numel_of(const bw_tensor *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->shape[d];
	return n;
}

size_t bw_tensor_bytes(const bw_workload *w, const bw_tensor *t)
{
	return (size_t)numel_of(t) * tk_dtype_size(bw_dtype(w, t));
}

int bw_skipped(const char *op)
{
	return !strncmp(op, "gemm", 4) || strstr(op, "attention") != NULL;
}

static bw_tensor shape_of(int ndim, const int64_t *s)
{
	bw_tensor t;

	memset(&t, 0, sizeof(t));
	t.ndim = ndim;
	memcpy(t.shape, s, sizeof(int64_t) * (size_t)ndim);
	return t;
}

static bw_workload *add(const char *op, const char *label, tk_dtype dt)
{
	bw_workload *w;

	if (n_table == MAX_WORKLOADS) {
		fprintf(stderr, "tileops-bench: more than %d workloads\n", MAX_WORKLOADS);
		exit(2);
	}
	w = &table[n_table++];
	memset(w, 0, sizeof(*w));
	w->op = op;
	snprintf(w->label, sizeof(w->label), "%s", label);
	w->dt = dt;
	return w;
}

static void param(bw_workload *w, const char *name, tk_param_kind kind, double v)
{
	tk_param *p = &w->params[w->n_params];

	w->param_names[w->n_params++] = name;
	p->kind = kind;
	if (kind == TK_PARAM_INT)
		p->v.i = (int64_t)v;
	else if (kind == TK_PARAM_BOOL)
		p->v.b = v != 0.0;
	else
		p->v.f = v;
}

/* Bytes by the rule "inputs read, outputs written, in-place inputs both". */
static void count_bytes(bw_workload *w)
{
	double b = 0.0;

	for (int i = 0; i < w->n_in; i++) {
		double t =
		        (double)numel_of(&w->in[i]) * (double)tk_dtype_size(bw_dtype(w, &w->in[i]));
		b += w->in[i].mutated ? 2.0 * t : t;
	}
	for (int i = 0; i < w->n_out; i++)
		b += (double)numel_of(&w->out[i]) * (double)tk_dtype_size(bw_dtype(w, &w->out[i]));
	w->bytes = b;
}

/* ---- elementwise --------------------------------------------------------- */

static const struct {
	const char *op;
	double flops; /* per element, the manifest's */
} unary_ops[] = {
	{ "exp", 1 },        { "log", 1 },   { "sqrt", 1 },       { "rsqrt", 2 },
	{ "abs", 1 },        { "neg", 1 },   { "reciprocal", 1 }, { "sigmoid", 3 },
	{ "tanh", 3 },       { "erf", 4 },   { "relu", 1 },       { "gelu", 8 },
	{ "silu", 4 },       { "mish", 6 },  { "softplus", 4 },   { "hardswish", 4 },
	{ "leaky_relu", 2 }, { "clamp", 2 },
};

static void unary_params(bw_workload *w)
{
	if (!strcmp(w->op, "gelu"))
		param(w, "approximate", TK_PARAM_INT, 0);
	else if (!strcmp(w->op, "softplus")) {
		param(w, "beta", TK_PARAM_FLOAT, 1.0);
		param(w, "threshold", TK_PARAM_FLOAT, 20.0);
	} else if (!strcmp(w->op, "leaky_relu"))
		param(w, "negative_slope", TK_PARAM_FLOAT, 0.01);
	else if (!strcmp(w->op, "clamp")) {
		param(w, "min_value", TK_PARAM_FLOAT, -1.0);
		param(w, "max_value", TK_PARAM_FLOAT, 1.0);
	}
}

static void add_unary(void)
{
	static const struct {
		const char *label;
		int64_t rows, cols;
	} shapes[] = {
		{ "llama3.1-8b mlp decode", 128, 14336 },
		{ "llama3.1-8b mlp prefill", 4096, 14336 },
		{ "llama3.1-70b mlp prefill", 4096, 28672 },
		{ "deepseek-v3 expert prefill", 4096, 2048 },
	};
	static const tk_dtype dts[] = { TK_BF16, TK_F16, TK_F32 };

	for (size_t o = 0; o < sizeof(unary_ops) / sizeof(unary_ops[0]); o++) {
		for (size_t s = 0; s < 4; s++) {
			for (size_t d = 0; d < (s == 0 ? 3u : 1u); d++) {
				int64_t sh[2] = { shapes[s].rows, shapes[s].cols };
				bw_workload *w = add(unary_ops[o].op, shapes[s].label, dts[d]);
				w->n_in = w->n_out = 1;
				w->in[0] = w->out[0] = shape_of(2, sh);
				unary_params(w);
				w->flops = unary_ops[o].flops * (double)(sh[0] * sh[1]);
				count_bytes(w);
			}
		}
	}
}

static void add_binary(void)
{
	static const char *const ops[] = {
		"add", "sub", "mul", "div", "maximum", "minimum", "pow"
	};
	static const struct {
		const char *label;
		int64_t rows, cols, b_rows; /* b_rows 0: b is a broadcast row [cols] */
	} shapes[] = {
		{ "llama3.1-8b residual decode", 128, 4096, 128 },
		{ "llama3.1-8b one token", 1, 4096, 1 },
		{ "llama3.1-8b residual prefill", 4096, 4096, 4096 },
		{ "llama3.1-70b bias broadcast prefill", 4096, 8192, 0 },
		{ "deepseek-v3 residual prefill", 4096, 7168, 4096 },
	};
	static const tk_dtype dts[] = { TK_BF16, TK_F16, TK_F32 };

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			for (size_t d = 0; d < (s == 0 ? 3u : 1u); d++) {
				int64_t sh[2] = { shapes[s].rows, shapes[s].cols };
				bw_workload *w = add(ops[o], shapes[s].label, dts[d]);
				w->n_in = 2;
				w->n_out = 1;
				w->in[0] = w->out[0] = shape_of(2, sh);
				w->in[1] = shapes[s].b_rows ? shape_of(2, sh) : shape_of(1, sh + 1);
				w->flops = (double)(sh[0] * sh[1]);
				count_bytes(w);
			}
		}
	}
}

static void add_gated(void)
{
	static const struct {
		const char *label;
		int64_t rows, cols;
	} shapes[] = {
		{ "llama3.1-8b mlp decode", 128, 28672 },
		{ "llama3.1-8b one token", 1, 28672 },
		{ "llama3.1-8b mlp prefill", 4096, 28672 },
		{ "llama3.1-405b mlp prefill", 4096, 106496 },
		{ "deepseek-v3 expert prefill", 4096, 4096 },
	};
	static const tk_dtype dts[] = { TK_BF16, TK_F16, TK_F32 };

	for (int g = 0; g < 2; g++) {
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			for (size_t d = 0; d < (s == 0 ? 3u : 1u); d++) {
				int64_t sh[2] = { shapes[s].rows, shapes[s].cols };
				int64_t so[2] = { shapes[s].rows, shapes[s].cols / 2 };
				bw_workload *w = add(g ? "gelu_and_mul" : "silu_and_mul",
				                     shapes[s].label, dts[d]);
				w->n_in = w->n_out = 1;
				w->in[0] = shape_of(2, sh);
				w->out[0] = shape_of(2, so);
				if (g)
					param(w, "approximate", TK_PARAM_INT, 0);
				w->flops = (g ? 9.0 : 5.0) * (double)(so[0] * so[1]);
				count_bytes(w);
			}
		}
	}
}

/* ---- norms, softmax, reductions ----------------------------------------- */

static void add_norm(const char *op, const char *label, tk_dtype dt, int64_t rows, int64_t d)
{
	int fused = !strncmp(op, "fused", 5), layer = strstr(op, "layer") != NULL;
	int64_t sh[2] = { rows, d };
	bw_workload *w = add(op, label, dt);
	int k = 1;

	w->in[0] = w->out[0] = shape_of(2, sh);
	if (fused) {
		w->in[k] = shape_of(2, sh);
		w->in[k++].mutated = 1;
	}
	w->in[k++] = shape_of(1, &d);
	if (layer)
		w->in[k++] = shape_of(1, &d);
	w->n_in = k;
	w->n_out = 1;
	param(w, "eps", TK_PARAM_FLOAT, 1e-5);
	w->flops = (double)((layer ? 8 : 4) + fused) * (double)(rows * d);
	count_bytes(w);
}

static void add_norms(void)
{
	add_norm("rms_norm", "llama3.1-8b decode", TK_BF16, 1, 4096);
	add_norm("rms_norm", "llama3.1-8b decode", TK_F16, 1, 4096);
	add_norm("rms_norm", "llama3.1-8b decode", TK_F32, 1, 4096);
	add_norm("rms_norm", "llama3.1-8b decode batch 128", TK_BF16, 128, 4096);
	add_norm("rms_norm", "llama3.1-8b prefill", TK_BF16, 2048, 4096);
	add_norm("rms_norm", "llama3.1-70b prefill", TK_BF16, 32768, 8192);
	add_norm("rms_norm", "llama3.1-405b prefill", TK_BF16, 4096, 16384);
	add_norm("rms_norm", "deepseek-v3 hidden prefill", TK_BF16, 4096, 7168);
	add_norm("rms_norm", "deepseek-v3 kv latent (kv_a_layernorm)", TK_BF16, 4096, 512);
	add_norm("layer_norm", "llama3.1-8b-sized decode", TK_BF16, 1, 4096);
	add_norm("layer_norm", "llama3.1-8b-sized prefill", TK_BF16, 2048, 4096);
	add_norm("layer_norm", "llama3.1-8b-sized prefill", TK_F32, 2048, 4096);
	add_norm("layer_norm", "llama3.1-70b-sized prefill", TK_BF16, 32768, 8192);
	add_norm("fused_add_rms_norm", "llama3.1-8b decode", TK_BF16, 1, 4096);
	add_norm("fused_add_rms_norm", "llama3.1-8b decode batch 128", TK_BF16, 128, 4096);
	add_norm("fused_add_rms_norm", "llama3.1-70b prefill", TK_BF16, 4096, 8192);
	add_norm("fused_add_rms_norm", "deepseek-v3 prefill", TK_BF16, 4096, 7168);
	add_norm("fused_add_layer_norm", "llama3.1-8b-sized decode", TK_BF16, 1, 4096);
	add_norm("fused_add_layer_norm", "llama3.1-8b-sized prefill", TK_BF16, 2048, 4096);
}

static void add_rowwise(const char *op, const char *label, tk_dtype dt, int nd,
                        const int64_t *shape, double flops_per)
{
	bw_workload *w = add(op, label, dt);

	w->n_in = w->n_out = 1;
	w->in[0] = shape_of(nd, shape);
	w->out[0] = w->in[0];
	double n = (double)(shape[0] * shape[1] * (nd > 2 ? shape[2] : 1));
	if (strcmp(op, "softmax") != 0 && strcmp(op, "log_softmax") != 0) {
		/* a reduction over the last dim, keepdim false */
		w->out[0] = shape_of(nd - 1, shape);
		if (!strcmp(op, "argmax"))
			w->out[0].dt = TK_I64;
		param(w, "dim", TK_PARAM_INT, -1);
		param(w, "keepdim", TK_PARAM_BOOL, 0);
	} else if (!strcmp(op, "log_softmax")) {
		param(w, "dim", TK_PARAM_INT, -1);
	}
	w->flops = flops_per * n;
	count_bytes(w);
}

static void add_softmax_reduce(void)
{
	static const int64_t logits[2] = { 128, 129280 }, logits8[2] = { 128, 128256 };
	static const int64_t one[2] = { 1, 128256 }, scores[3] = { 32, 2048, 2048 };
	static const int64_t router[2] = { 4096, 256 }, wide[2] = { 32768, 8192 };
	static const char *const reds[] = { "log_softmax", "sum", "mean", "amax", "argmax" };

	add_rowwise("softmax", "llama3.1-8b logits decode", TK_BF16, 2, logits8, 5);
	add_rowwise("softmax", "llama3.1-8b logits decode", TK_F16, 2, logits8, 5);
	add_rowwise("softmax", "llama3.1-8b logits decode", TK_F32, 2, logits8, 5);
	add_rowwise("softmax", "llama3.1-8b logits one token", TK_BF16, 2, one, 5);
	add_rowwise("softmax", "llama3.1-8b attention scores prefill (32 heads)", TK_BF16, 3,
	            scores, 5);
	add_rowwise("softmax", "deepseek-v3 router (256 experts)", TK_F32, 2, router, 5);
	add_rowwise("softmax", "wide rows (bench)", TK_BF16, 2, wide, 5);
	for (size_t r = 0; r < sizeof(reds) / sizeof(reds[0]); r++) {
		double f = r == 0 ? 5 : 1;
		add_rowwise(reds[r], "llama3.1-8b logits decode", TK_BF16, 2, logits8, f);
		add_rowwise(reds[r], "llama3.1-8b logits decode", TK_F32, 2, logits8, f);
		add_rowwise(reds[r], "deepseek-v3 logits decode", TK_BF16, 2, logits, f);
		add_rowwise(reds[r], "wide rows (bench)", TK_BF16, 2, wide, f);
	}
}

/* ---- rope, pooling, fp8 ----------------------------------------------------- */

static void add_rope(void)
{
	static const struct {
		const char *label;
		int64_t t, hq, hk, d, cache, rd;
	} shapes[] = {
		{ "llama3.1-8b decode", 128, 32, 8, 128, 131072, 128 },
		{ "llama3.1-8b one token", 1, 32, 8, 128, 131072, 128 },
		{ "llama3.1-70b prefill", 4096, 64, 8, 128, 131072, 128 },
		{ "deepseek-v3 rope dims prefill", 4096, 128, 1, 64, 163840, 64 },
	};

	for (int style = 0; style < 2; style++) {
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			for (int cached = 0; cached < 2; cached++) {
				char label[96];
				snprintf(label, sizeof(label), "%s%s", shapes[s].label,
				         cached ? " (cos/sin cache)" : "");
				bw_workload *w =
				        add(style ? "rope_gptj" : "rope_neox", label, TK_BF16);
				int64_t q[3] = { shapes[s].t, shapes[s].hq, shapes[s].d };
				int64_t k[3] = { shapes[s].t, shapes[s].hk, shapes[s].d };
				int64_t c[2] = { shapes[s].cache, shapes[s].rd };
				w->in[0] = shape_of(3, q);
				w->in[1] = shape_of(3, k);
				w->in[0].mutated = w->in[1].mutated = 1;
				w->in[2] = shape_of(1, q);
				w->in[2].dt = TK_I64;
				w->n_in = 3;
				if (cached) {
					w->in[3] = shape_of(2, c);
					w->n_in = 4;
				}
				w->n_out = 0;
				param(w, "rotary_dim", TK_PARAM_INT, (double)shapes[s].rd);
				param(w, "theta", TK_PARAM_FLOAT, 500000.0);
				double heads = (double)(shapes[s].hq + shapes[s].hk);
				double t = (double)shapes[s].t, rd = (double)shapes[s].rd;
				w->flops = 3.0 * t * heads * rd;
				/* q and k rotary dims read and written, positions, the cache rows used */
				w->bytes = 2.0 * t * heads * rd * 2.0 + t * 8.0 +
				           (cached ? t * rd * 2.0 : 0);
			}
		}
	}
}

static void add_pools(void)
{
	static const int64_t s1[3] = { 8, 4096, 2048 }, s2[4] = { 32, 64, 224, 224 };
	static const int64_t s3[5] = { 4, 64, 16, 112, 112 };
	static const char *const labels[] = { "audio-like frames, kernel 2 stride 2",
		                              "vision stem, kernel 2 stride 2",
		                              "video clip, kernel 2 stride 2" };
	static const char *const ops[2][3] = { { "max_pool1d", "max_pool2d", "max_pool3d" },
		                               { "avg_pool1d", "avg_pool2d", "avg_pool3d" } };
	static const char *const names[3][3][4] = {
		{ { "kernel_w", "stride_w", "padding_w", "dilation_w" } },
		{ { "kernel_h", "stride_h", "padding_h", "dilation_h" },
		  { "kernel_w", "stride_w", "padding_w", "dilation_w" } },
		{ { "kernel_d", "stride_d", "padding_d", "dilation_d" },
		  { "kernel_h", "stride_h", "padding_h", "dilation_h" },
		  { "kernel_w", "stride_w", "padding_w", "dilation_w" } }
	};
	const int64_t *shapes[3] = { s1, s2, s3 };
	static const tk_dtype dts[2] = { TK_BF16, TK_F32 };

	for (int avg = 0; avg < 2; avg++) {
		for (int n = 1; n <= 3; n++) {
			for (int d = 0; d < 2; d++) {
				bw_workload *w = add(ops[avg][n - 1], labels[n - 1], dts[d]);
				int64_t o[5];
				memcpy(o, shapes[n - 1], sizeof(int64_t) * (size_t)(n + 2));
				for (int k = 0; k < n; k++)
					o[2 + k] /= 2;
				w->n_in = w->n_out = 1;
				w->in[0] = shape_of(n + 2, shapes[n - 1]);
				w->out[0] = shape_of(n + 2, o);
				for (int f = 0; f < (avg ? 3 : 4); f++)
					for (int k = 0; k < n; k++)
						param(w, names[n - 1][k][f], TK_PARAM_INT,
						      f == 0 || f == 1 ? 2 : (f == 2 ? 0 : 1));
				param(w, "ceil_mode", TK_PARAM_BOOL, 0);
				if (avg)
					param(w, "count_include_pad", TK_PARAM_BOOL, 1);
				double on = 1.0;
				for (int k = 0; k < n + 2; k++)
					on *= (double)o[k];
				w->flops = on * (double)(1 << n);
				count_bytes(w);
			}
		}
	}
}

static void add_quant(void)
{
	/* given: a per-tensor scale passed in (static, calibrated), else computed */
	static const struct {
		const char *op, *label;
		int64_t rows, cols;
		int given;
	} shapes[] = {
		{ "quant_fp8_per_tensor", "llama3.1-8b activations prefill", 4096, 4096, 0 },
		{ "quant_fp8_per_tensor", "llama3.1-405b activations prefill", 4096, 16384, 0 },
		{ "quant_fp8_per_tensor", "llama3.1-8b activations prefill, given scale", 4096,
		  4096, 1 },
		{ "quant_fp8_per_tensor", "llama3.1-70b one token, given scale", 1, 8192, 1 },
		{ "quant_fp8_per_token", "llama3.1-70b activations decode", 128, 8192, 0 },
		{ "quant_fp8_per_token", "llama3.1-70b one token", 1, 8192, 0 },
		{ "quant_fp8_per_token", "deepseek-v3 activations prefill", 4096, 7168, 0 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int64_t sh[2] = { shapes[s].rows, shapes[s].cols }, one = 1;
		int64_t sc[2] = { shapes[s].rows, 1 };
		int per_token = strstr(shapes[s].op, "token") != NULL;
		bw_workload *w = add(shapes[s].op, shapes[s].label, TK_BF16);
		w->n_in = shapes[s].given ? 2 : 1;
		w->n_out = 2;
		w->in[0] = shape_of(2, sh);
		if (shapes[s].given) {
			w->in[1] = shape_of(1, &one);
			w->in[1].dt = TK_F32;
		}
		w->out[0] = shape_of(2, sh);
		w->out[0].dt = TK_FP8_E4M3;
		w->out[1] = per_token ? shape_of(2, sc) : shape_of(1, &one);
		w->out[1].dt = TK_F32;
		w->flops = 3.0 * (double)(sh[0] * sh[1]);
		count_bytes(w);
	}
}

const bw_workload *bw_all(int *count)
{
	if (n_table == 0) {
		add_unary();
		add_binary();
		add_gated();
		add_norms();
		add_softmax_reduce();
		add_rope();
		add_pools();
		add_quant();
	}
	*count = n_table;
	return table;
}
