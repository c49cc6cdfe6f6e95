/*
 * layer_spec.c - the decode layer's tensors, contents and ops
 * (layer_spec.h says what the layer computes).
 */
#include "layer_spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"

void layer_config_default(layer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->dims = (layer_dims){ .batch = 1,
		                  .hidden = 4096,
		                  .inter = 14336,
		                  .heads = 32,
		                  .kv_heads = 8,
		                  .head_dim = 128 };
	cfg->batches[0] = 1;
	cfg->batches[1] = 32;
	cfg->n_batches = 2;
}

static int parse_batches(const char *arg, layer_config *cfg)
{
	char buf[128], *save = NULL;
	int n = 0;

	if (strlen(arg) >= sizeof(buf))
		return -1;
	strcpy(buf, arg);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v;
		if (n == LAYER_MAX_BATCHES || bench_parse_long(tok, 1, 4096, &v) < 0)
			return -1;
		cfg->batches[n++] = v;
	}
	if (n == 0)
		return -1;
	cfg->n_batches = n;
	return 0;
}

int layer_parse_option(int opt, const char *arg, layer_config *cfg, int *bad)
{
	int64_t *dim;
	long v;

	switch (opt) {
	case LAYER_OPT_BATCH:
		*bad = parse_batches(arg, cfg) < 0;
		return 1;
	case LAYER_OPT_HIDDEN:
		dim = &cfg->dims.hidden;
		break;
	case LAYER_OPT_INTER:
		dim = &cfg->dims.inter;
		break;
	case LAYER_OPT_HEADS:
		dim = &cfg->dims.heads;
		break;
	case LAYER_OPT_KV_HEADS:
		dim = &cfg->dims.kv_heads;
		break;
	case LAYER_OPT_HEAD_DIM:
		dim = &cfg->dims.head_dim;
		break;
	default:
		return 0;
	}
	*bad = bench_parse_long(arg, 1, 1 << 20, &v) < 0;
	if (opt == LAYER_OPT_HEAD_DIM && !*bad)
		*bad = v % 2 != 0 || v > 1024; /* rope's rotary_dim is the head dim */
	if (!*bad)
		*dim = v;
	return 1;
}

/* ---- tensors ------------------------------------------------------------------ */

static const char *const names[LT_COUNT] = {
	[LT_W_ATTN_NORM] = "w_attn_norm",
	[LT_W_Q] = "w_q",
	[LT_W_K] = "w_k",
	[LT_W_V] = "w_v",
	[LT_W_ATTN] = "w_attn",
	[LT_W_O] = "w_o",
	[LT_W_MLP_NORM] = "w_mlp_norm",
	[LT_W_GATE_UP] = "w_gate_up",
	[LT_W_DOWN] = "w_down",
	[LT_X] = "x",
	[LT_H] = "h",
	[LT_Q] = "q",
	[LT_K] = "k",
	[LT_V] = "v",
	[LT_Q_HEADS] = "q_heads",
	[LT_K_HEADS] = "k_heads",
	[LT_POS] = "positions",
	[LT_ATTN] = "attn",
	[LT_O] = "o",
	[LT_X1] = "x1",
	[LT_H2] = "h2",
	[LT_GU] = "gate_up",
	[LT_A] = "act",
	[LT_D] = "down",
	[LT_Y] = "y",
};

const char *layer_tensor_name(int t)
{
	return t >= 0 && t < LT_COUNT ? names[t] : "?";
}

int layer_tensor_dtype(int t)
{
	return t == LT_POS ? LAYER_I32 : LAYER_BF16;
}

static int mat(int64_t *s, int64_t rows, int64_t cols)
{
	s[0] = rows;
	s[1] = cols;
	return 2;
}

int layer_tensor_shape(const layer_dims *d, int t, int64_t *s)
{
	int64_t B = d->batch, H = d->hidden, qd = d->heads * d->head_dim;
	int64_t kvd = d->kv_heads * d->head_dim;

	switch (t) {
	case LT_W_ATTN_NORM:
	case LT_W_MLP_NORM:
		s[0] = H;
		return 1;
	case LT_POS:
		s[0] = B;
		return 1;
	case LT_W_Q:
		return mat(s, qd, H);
	case LT_W_K:
	case LT_W_V:
		return mat(s, kvd, H);
	case LT_W_ATTN:
		return mat(s, qd, kvd);
	case LT_W_O:
		return mat(s, H, qd);
	case LT_W_GATE_UP:
		return mat(s, 2 * d->inter, H);
	case LT_W_DOWN:
		return mat(s, H, d->inter);
	case LT_Q:
	case LT_ATTN:
		return mat(s, B, qd);
	case LT_K:
	case LT_V:
		return mat(s, B, kvd);
	case LT_Q_HEADS:
	case LT_K_HEADS:
		s[0] = B;
		s[1] = t == LT_Q_HEADS ? d->heads : d->kv_heads;
		s[2] = d->head_dim;
		return 3;
	case LT_GU:
		return mat(s, B, 2 * d->inter);
	case LT_A:
		return mat(s, B, d->inter);
	default: /* x, h, o, x1, h2, down, y */
		return mat(s, B, H);
	}
}

int64_t layer_tensor_numel(const layer_dims *d, int t)
{
	int64_t s[3], n = 1;
	int nd = layer_tensor_shape(d, t, s);

	for (int i = 0; i < nd; i++)
		n *= s[i];
	return n;
}

size_t layer_tensor_bytes(const layer_dims *d, int t)
{
	return (size_t)layer_tensor_numel(d, t) * (layer_tensor_dtype(t) == LAYER_I32 ? 4 : 2);
}

uint16_t layer_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN stays NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float layer_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* xorshift64*: fast, and the same sequence on every machine. */
static double next_unit(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (double)((*s * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}

void layer_tensor_fill(const layer_dims *d, int t, void *buf)
{
	int64_t s[3], n = layer_tensor_numel(d, t);
	uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(t + 1) + (uint64_t)d->batch;
	int nd = layer_tensor_shape(d, t, s);
	/* Weights [N, K] scale by 1/sqrt(K); norm weights sit near 1. */
	double scale = nd == 2 && t <= LT_W_DOWN ? 1.0 / sqrt((double)s[1]) : 1.0;
	double base = t == LT_W_ATTN_NORM || t == LT_W_MLP_NORM ? 0.5 : -1.0;
	double span = base > 0 ? 1.0 : 2.0;

	if (t == LT_POS) {
		int32_t *p = buf;
		for (int64_t i = 0; i < n; i++)
			p[i] = (int32_t)(1000 + i);
		return;
	}
	uint16_t *v = buf;
	for (int64_t i = 0; i < n; i++) {
		double x = base + span * next_unit(&seed);
		if (fabs(x) < 1.0 / 64) /* never zero */
			x = x < 0 ? -1.0 / 64 : 1.0 / 64;
		v[i] = layer_f32_to_bf16((float)(x * scale));
	}
}

/* ---- ops ------------------------------------------------------------------------ */

const layer_op layer_ops[LAYER_N_OPS] = {
	{ "rms_norm", "attn_norm", { LT_X, LT_W_ATTN_NORM }, 2, LT_H },
	{ "gemm", "q_proj", { LT_H, LT_W_Q }, 2, LT_Q },
	{ "gemm", "k_proj", { LT_H, LT_W_K }, 2, LT_K },
	{ "gemm", "v_proj", { LT_H, LT_W_V }, 2, LT_V },
	{ "rope_neox", "rope", { LT_Q_HEADS, LT_K_HEADS, LT_POS }, 3, -1 },
	{ "gemm", "attn_standin", { LT_V, LT_W_ATTN }, 2, LT_ATTN },
	{ "gemm", "o_proj", { LT_ATTN, LT_W_O }, 2, LT_O },
	{ "add", "residual_attn", { LT_X, LT_O }, 2, LT_X1 },
	{ "rms_norm", "mlp_norm", { LT_X1, LT_W_MLP_NORM }, 2, LT_H2 },
	{ "gemm", "gate_up_proj", { LT_H2, LT_W_GATE_UP }, 2, LT_GU },
	{ "silu_and_mul", "silu_and_mul", { LT_GU }, 1, LT_A },
	{ "gemm", "down_proj", { LT_A, LT_W_DOWN }, 2, LT_D },
	{ "add", "residual_mlp", { LT_X1, LT_D }, 2, LT_Y },
};

int layer_op_params(const layer_dims *d, int i, layer_param *out)
{
	const char *op = layer_ops[i].op;

	if (!strcmp(op, "rms_norm")) {
		out[0] = (layer_param){ "eps", 'f', 1e-5 };
		return 1;
	}
	if (!strcmp(op, "gemm")) {
		out[0] = (layer_param){ "alpha", 'f', 1.0 };
		out[1] = (layer_param){ "trans_b", 'b', 1.0 };
		return 2;
	}
	if (!strcmp(op, "rope_neox")) {
		out[0] = (layer_param){ "rotary_dim", 'i', (double)d->head_dim };
		out[1] = (layer_param){ "theta", 'f', 500000.0 };
		return 2;
	}
	return 0;
}
