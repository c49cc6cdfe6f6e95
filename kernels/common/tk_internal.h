/*
 * tk_internal.h - pieces shared by the kernels in this folder; not part of
 * the L1 interface (tileops_kernels.h is).
 *
 * Every CPU reference and every CUDA launcher has the signature of
 * tk_cpu_fn / tk_cuda_fn.
 */
#ifndef TILEOPS_TK_INTERNAL_H
#define TILEOPS_TK_INTERNAL_H

#include "tileops_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The per-op entry points, generated from the manifest (tk_ops.h): the CPU
 * reference tk_cpu_<op> of every implemented op and, where the manifest
 * names a cuda kernel, the launcher tk_cuda_<op>.
 */
#include "tk_ops.h"

/*
 * An iteration plan: up to TK_ITER_MAX_OPS tensors walked over one shape,
 * each with its own element strides (0 on broadcast dims). Adjacent dims
 * that are packed alike in every operand are merged, so the common cases
 * become one dim (all packed) or two (rows with a row stride), which the
 * kernels turn into cheap index arithmetic.
 *
 * Operand 0 is the output; the others are inputs.
 */
#define TK_ITER_MAX_OPS 3

typedef struct tk_iter {
	int ndim; /* >= 1 after merging; shape[ndim-1] is the innermost */
	int n_ops;
	int64_t numel;
	int64_t shape[TK_MAX_DIMS];
	int64_t stride[TK_ITER_MAX_OPS][TK_MAX_DIMS];
} tk_iter;

/*
 * Plan an elementwise walk over out's shape. Each input is right-aligned to
 * out (numpy broadcasting): a missing or size-1 dim is read with stride 0.
 * Returns TK_ERR_UNSUPPORTED when an input cannot broadcast to out.
 */
tk_status tk_iter_broadcast(tk_iter *it, const tk_tensor *out, const tk_tensor *const *ins,
                            int n_in);

/*
 * Plan a walk over the rows of tensors that share one shape: every dim but
 * the last. The result has numel = number of rows (1 for ndim <= 1).
 * Returns TK_ERR_UNSUPPORTED when the shapes differ.
 */
tk_status tk_iter_rows(tk_iter *it, const tk_tensor *const *ts, int n);

/* Element offset of operand `op` at linear index `i` of the plan. */
int64_t tk_iter_offset(const tk_iter *it, int op, int64_t i);

/*
 * View t as a matrix of rows: every dim but the last flattens into `rows`,
 * which must then be evenly spaced `ld` elements apart. The last dim must
 * be packed. Returns TK_ERR_UNSUPPORTED otherwise (or for ndim < 1).
 */
tk_status tk_matrix_view(const tk_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld);

/* A param read as a number, whatever its kind (INT, FLOAT or BOOL). */
double tk_param_num(const tk_call *call, int idx, double dflt);

/* 1 when every tensor is f32, f16 or bf16 and all share one dtype. */
int tk_same_float_dtype(const tk_tensor *const *ts, int n);

/* Width of the last dim (1 for ndim 0) and whether it is packed. */
int64_t tk_last_dim(const tk_tensor *t);
int tk_last_dim_packed(const tk_tensor *t);

/*
 * Plan over the rows of tensors that agree in every dim but the last (the
 * last dims may differ, as for x [.., 2d] and out [.., d]). numel is the
 * row count. Returns TK_ERR_UNSUPPORTED when the outer dims differ.
 */
tk_status tk_iter_outer(tk_iter *it, const tk_tensor *const *ts, int n);

/*
 * Plan a reduction of x over dim `axis` into out (which keeps that dim as
 * size 1 when keepdim, else lacks it): operand 0 walks out, operand 1 the
 * first element of each reduced line of x. *len and *stride give the line.
 */
tk_status tk_iter_reduce(tk_iter *it, const tk_tensor *x, const tk_tensor *out, int axis,
                         int keepdim, int64_t *len, int64_t *stride);

/* Param `idx` read as a dim of a rank-`ndim` tensor (negative counts from the end). */
int tk_axis_param(const tk_call *call, int idx, int ndim, int *axis);

/*
 * 1 when rows of `width` elements of `elem` bytes can be read as 16-byte
 * vectors through the plan: whole vectors per row, aligned bases (NULL
 * pointers are skipped) and row strides that keep the alignment.
 */
int tk_row_vec_ok(const tk_iter *it, int64_t width, size_t elem, const void *const *ptrs, int n);

/* 1 when t is a packed 1-D tensor of n elements. */
int tk_is_vector_of(const tk_tensor *t, int64_t n);

/*
 * A pooling call, spatial dims right-aligned into 3 (a 1d pool has
 * in[0] = in[1] = 1, kernel 1, stride 1, no padding there). Strides are
 * those of x and out in elements: batch, channel, then the 3 spatial dims.
 */
typedef struct tk_pool {
	int is_max, ceil_mode, count_include_pad;
	int64_t n, c;
	int64_t in[3], out[3], k[3], s[3], p[3], dil[3];
	int64_t xs[5], os[5];
} tk_pool;

/*
 * Read a pooling call with `nsp` spatial dims (params in the table's
 * order: kernel, stride, padding per dim, then dilation per dim and
 * ceil_mode for max, ceil_mode and count_include_pad for avg) and check
 * that out has the shape PyTorch gives. TK_ERR_UNSUPPORTED otherwise.
 */
tk_status tk_pool_parse(const tk_call *call, int nsp, int is_max, tk_pool *pl);

/* ---- the texts of the tuning interfaces (common/tuning_text.c) ---- */

/*
 * Check a shape class against a family's syntax and write it in canonical
 * form (single spaces) into out. The syntax is space-separated items:
 * DTYPE (a dtype name), a|b (one of the words), [w] (the word w or
 * nothing), p# (p followed by a positive number), p^ (p followed by a
 * power of two). 0, or -1 with what is wrong in why.
 */
int tk_class_check(const char *syntax, const char *text, char *out, size_t len, char *why,
                   size_t whylen);

/* The next word of *s (words are separated by spaces or tabs) copied into w,
 * *s moved past it: 1, or 0 when none is left or it does not fit in len. */
int tk_next_word(const char **s, char *w, size_t len);

/* word is prefix followed by a decimal number in [0, max]: 0 and *out, else -1. */
int tk_word_number(const char *word, const char *prefix, int64_t max, int64_t *out);

/* The least power of two >= x (1 for x <= 1). */
int64_t tk_pow2_ceil(int64_t x);

/* *c = the choice of one field, v[0] = v0 (the other fields 0), in `mode`. */
void tk_choice_one(tk_choice *c, tk_choice_mode mode, int32_t v0);

/*
 * The two tk_tuning tables of a tunable family whose ops differ in one
 * flag (attention decode: contiguous or paged; prefill: batched or varlen;
 * gemm: gemm or bmm). The family writes its callbacks once, the flag their
 * second argument,
 *   int class_fn(const tk_call *call, int flag, char *buf, size_t len);
 *   int candidates_fn(const tk_call *call, int flag, tk_choice *out, int max);
 * and format_fn and parse_fn as tk_tuning has them; then
 *   TK_TUNING_PAIR(op0, op1, family, class_syntax, choice_syntax, class_fn,
 *                  format_fn, parse_fn, candidates_fn, measure0, measure1);
 * defines tk_tuning_<op0> (flag 0) and tk_tuning_<op1> (flag 1), their
 * classes checked against class_syntax by tk_class_check. Candidates and
 * the measuring functions (measure0, measure1: each op's own, NULL for
 * none) are where the CUDA kernels are (a file compiled with TK_WITH_CUDA
 * 1); in the CPU-only library they are NULL and their names are never
 * read, so a file may define them under #if TK_WITH_CUDA alone.
 */
#if defined(TK_WITH_CUDA) && TK_WITH_CUDA
#define TK_CUDA_ONLY(fn) (fn)
#define TK_TUNING_CANDIDATES_(op, flag, fn)                                      \
	static int op##_candidates(const tk_call *call, tk_choice *out, int max) \
	{                                                                        \
		return fn(call, flag, out, max);                                 \
	}
#else
#define TK_CUDA_ONLY(fn) NULL
#define TK_TUNING_CANDIDATES_(op, flag, fn)
#endif

#define TK_TUNING_CLASS_(op, flag, fn)                                    \
	static int op##_class(const tk_call *call, char *buf, size_t len) \
	{                                                                 \
		return fn(call, flag, buf, len);                          \
	}

#define TK_TUNING_TABLE_(op, fam, class_syntax_, choice_syntax_, parse_class_fn, format_fn, \
                         parse_fn, measure_fn)                                              \
	const tk_tuning tk_tuning_##op = {                                                  \
		.family = fam,                                                              \
		.class_syntax = class_syntax_,                                              \
		.choice_syntax = choice_syntax_,                                            \
		.shape_class = op##_class,                                                  \
		.parse_class = parse_class_fn,                                              \
		.format_choice = format_fn,                                                 \
		.parse_choice = parse_fn,                                                   \
		.candidates = TK_CUDA_ONLY(op##_candidates),                                \
		.measure = TK_CUDA_ONLY(measure_fn),                                        \
	}

#define TK_TUNING_PAIR(op0, op1, fam, class_syntax_, choice_syntax_, class_fn, format_fn,       \
                       parse_fn, candidates_fn, measure0, measure1)                             \
	static int op0##_parse_class(const char *text, char *buf, size_t len, char *why,        \
	                             size_t whylen)                                             \
	{                                                                                       \
		return tk_class_check(class_syntax_, text, buf, len, why, whylen);              \
	}                                                                                       \
	TK_TUNING_CLASS_(op0, 0, class_fn)                                                      \
	TK_TUNING_CLASS_(op1, 1, class_fn)                                                      \
	TK_TUNING_CANDIDATES_(op0, 0, candidates_fn)                                            \
	TK_TUNING_CANDIDATES_(op1, 1, candidates_fn)                                            \
	TK_TUNING_TABLE_(op0, fam, class_syntax_, choice_syntax_, op0##_parse_class, format_fn, \
	                 parse_fn, measure0);                                                   \
	TK_TUNING_TABLE_(op1, fam, class_syntax_, choice_syntax_, op0##_parse_class, format_fn, \
	                 parse_fn, measure1)

#ifdef __cplusplus
}
#endif

#endif /* TILEOPS_TK_INTERNAL_H */
