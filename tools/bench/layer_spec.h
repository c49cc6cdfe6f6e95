/*
 * layer_spec.h - the decode layer both layer benches run: its tensors,
 * their shapes and initial contents, and its ops in order, so that the
 * bench through tileopsd (bench_layer.c) and the in-process CUDA baseline
 * (layer_baseline.cu) run exactly the same work.
 *
 * A Llama 3.1 8B-shaped layer in bf16 (docs/perf.md, "A decode layer: single ops and plans"):
 *   h = rms_norm(x, w_attn_norm)
 *   q = gemm(h, w_q), k = gemm(h, w_k), v = gemm(h, w_v)      (trans_b)
 *   rope_neox(q_heads, k_heads, positions)                    (in place)
 *   attn = gemm(v, w_attn)                 (the attention stand-in)
 *   o = gemm(attn, w_o); x1 = add(x, o)
 *   h2 = rms_norm(x1, w_mlp_norm); gu = gemm(h2, w_gate_up)
 *   a = silu_and_mul(gu); d = gemm(a, w_down); y = add(x1, d)
 * The API has no views: a gemm writes [B, heads * head_dim] and rope needs
 * [B, heads, head_dim], so rope turns tensors of its own of that shape
 * (q_heads, k_heads) and its result feeds nothing.
 */
#ifndef TILEOPS_LAYER_SPEC_H
#define TILEOPS_LAYER_SPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAYER_MAX_BATCHES 8

typedef struct layer_dims {
	int64_t batch, hidden, inter, heads, kv_heads, head_dim;
} layer_dims;

/* The sizes of a run: every batch in `batches` with the other dims. */
typedef struct layer_config {
	layer_dims dims; /* batch unused */
	int64_t batches[LAYER_MAX_BATCHES];
	int n_batches;
} layer_config;

/* Llama 3.1 8B: hidden 4096, intermediate 14336, 32 / 8 heads of 128; batches 1 and 32. */
void layer_config_default(layer_config *cfg);

/*
 * The layer options, for getopt_long tables: --batch LIST (comma-separated),
 * --hidden, --inter, --heads, --kv-heads, --head-dim. layer_parse_option
 * takes getopt_long's return value: 1 when it was one of these (0 written
 * to *bad, or 1 for a bad value), 0 when it was not.
 */
enum {
	LAYER_OPT_BATCH = 1000,
	LAYER_OPT_HIDDEN,
	LAYER_OPT_INTER,
	LAYER_OPT_HEADS,
	LAYER_OPT_KV_HEADS,
	LAYER_OPT_HEAD_DIM
};
#define LAYER_LONG_OPTIONS                                                   \
	{ "batch", required_argument, NULL, LAYER_OPT_BATCH },               \
	        { "hidden", required_argument, NULL, LAYER_OPT_HIDDEN },     \
	        { "inter", required_argument, NULL, LAYER_OPT_INTER },       \
	        { "heads", required_argument, NULL, LAYER_OPT_HEADS },       \
	        { "kv-heads", required_argument, NULL, LAYER_OPT_KV_HEADS }, \
	{                                                                    \
		"head-dim", required_argument, NULL, LAYER_OPT_HEAD_DIM      \
	}
#define LAYER_USAGE                                                          \
	"layer sizes: [--batch LIST] [--hidden H] [--inter I] [--heads N]\n" \
	"             [--kv-heads N] [--head-dim D] (default: 1,32 4096 14336 32 8 128)\n"
int layer_parse_option(int opt, const char *arg, layer_config *cfg, int *bad);

/* The layer's tensors. Weights first; Y is the output. */
enum layer_tensor {
	LT_W_ATTN_NORM,
	LT_W_Q,
	LT_W_K,
	LT_W_V,
	LT_W_ATTN,
	LT_W_O,
	LT_W_MLP_NORM,
	LT_W_GATE_UP,
	LT_W_DOWN,
	LT_X,
	LT_H,
	LT_Q,
	LT_K,
	LT_V,
	LT_Q_HEADS,
	LT_K_HEADS,
	LT_POS,
	LT_ATTN,
	LT_O,
	LT_X1,
	LT_H2,
	LT_GU,
	LT_A,
	LT_D,
	LT_Y,
	LT_COUNT
};

/* Element type of a tensor: LAYER_BF16 for all but the positions (LAYER_I32). */
enum { LAYER_BF16 = 0, LAYER_I32 = 1 };
int layer_tensor_dtype(int t);
const char *layer_tensor_name(int t);
/* Writes the shape (at most 3 dims); returns the rank. */
int layer_tensor_shape(const layer_dims *d, int t, int64_t *shape);
int64_t layer_tensor_numel(const layer_dims *d, int t);
/* Bytes of the tensor (2 per bf16, 4 per i32). */
size_t layer_tensor_bytes(const layer_dims *d, int t);

/*
 * Fill `buf` (layer_tensor_bytes) with the tensor's initial contents, the
 * same for a given (t, dims) in every program: random bf16 (never zeros;
 * weights scaled by 1/sqrt(fan-in) so activations stay near 1, norm
 * weights near 1) and positions 1000 + i.
 */
void layer_tensor_fill(const layer_dims *d, int t, void *buf);

/* A param of an op, by name: kind 'i' (int), 'f' (float) or 'b' (bool). */
typedef struct layer_param {
	const char *name;
	char kind;
	double value;
} layer_param;

#define LAYER_MAX_OP_TENSORS 3
#define LAYER_MAX_OP_PARAMS 2

typedef struct layer_op {
	const char *op;    /* the op's name in the manifest */
	const char *label; /* what it stands for in the layer */
	int in[LAYER_MAX_OP_TENSORS];
	int n_in;
	int out; /* -1: none (rope works in place) */
} layer_op;

#define LAYER_N_OPS 13
extern const layer_op layer_ops[LAYER_N_OPS];

/* The params of op i, every one given; returns how many. */
int layer_op_params(const layer_dims *d, int i, layer_param *out);

/* Convert f32 to bf16 (round to nearest even) and back. */
uint16_t layer_f32_to_bf16(float f);
float layer_bf16_to_f32(uint16_t h);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_LAYER_SPEC_H */
