/*
 * gemm_tuning.c - the tuning interface of gemm and bmm (tk_tuning in
 * tileops_kernels.h): family "gemm", shape classes as tk_gemm_shape_class
 * writes them, choices that are tk_gemm_configs, candidates from every
 * kernel family's search space, and the measuring function.
 *
 * Compiled into each kernel library (TK_WITH_CUDA says which): the
 * CPU-only one has no candidates and no measuring function, but names and
 * checks classes and choices all the same.
 */
#include <string.h>

#include "tk_gemm.h"
#include "tk_internal.h"

#define CLASS_SYNTAX "DTYPE nt|nn [b] m^ n# k#"
#define CHOICE_SYNTAX "KIND mM nN kK sS cC skS (KIND simple, sm90, smallm, decode or simt)"
#define MAX_CANDIDATES 256

static int shape_class(const tk_call *call, int batched, char *buf, size_t len)
{
	tk_gemm_problem p;

	if (tk_gemm_problem_of(call, batched, &p) != TK_OK)
		return -1;
	tk_gemm_shape_class(&p, buf, len);
	return 0;
}

static int gemm_class(const tk_call *call, char *buf, size_t len)
{
	return shape_class(call, 0, buf, len);
}

static int bmm_class(const tk_call *call, char *buf, size_t len)
{
	return shape_class(call, 1, buf, len);
}

static int parse_class(const char *text, char *buf, size_t len, char *why, size_t whylen)
{
	return tk_class_check(CLASS_SYNTAX, text, buf, len, why, whylen);
}

static int format_choice(const tk_choice *c, char *buf, size_t len)
{
	tk_gemm_config cfg;

	tk_gemm_config_of(c, &cfg);
	tk_gemm_config_str(&cfg, buf, len);
	return 0;
}

static int parse_choice(const char *text, tk_choice *c)
{
	tk_gemm_config cfg;

	if (tk_gemm_config_parse(text, &cfg) != 0)
		return -1;
	tk_gemm_choice_of(&cfg, TK_CHOICE_PREFER, c);
	return 0;
}

#if TK_WITH_CUDA
static int candidates(const tk_call *call, int batched, tk_choice *out, int max)
{
	tk_gemm_config cfg[MAX_CANDIDATES];
	tk_gemm_problem p;

	if (tk_gemm_problem_of(call, batched, &p) != TK_OK)
		return 0;
	int n = tk_gemm_candidates(&p, cfg, MAX_CANDIDATES);
	n = n > MAX_CANDIDATES ? MAX_CANDIDATES : n;
	for (int i = 0; i < n && i < max; i++)
		tk_gemm_choice_of(&cfg[i], TK_CHOICE_EXACT, &out[i]);
	return n;
}

static int gemm_candidates(const tk_call *call, tk_choice *out, int max)
{
	return candidates(call, 0, out, max);
}

static int bmm_candidates(const tk_call *call, tk_choice *out, int max)
{
	return candidates(call, 1, out, max);
}

static tk_status gemm_measure(const tk_call *call, void *stream, double budget_ms, tk_choice *best,
                              double *us, char *err, size_t errlen)
{
	return tk_gemm_measure(call, 0, stream, budget_ms, best, us, err, errlen);
}

static tk_status bmm_measure(const tk_call *call, void *stream, double budget_ms, tk_choice *best,
                             double *us, char *err, size_t errlen)
{
	return tk_gemm_measure(call, 1, stream, budget_ms, best, us, err, errlen);
}
#define CUDA_ONLY(fn) (fn)
#else
#define CUDA_ONLY(fn) NULL
#endif

const tk_tuning tk_tuning_gemm = {
	.family = "gemm",
	.class_syntax = CLASS_SYNTAX,
	.choice_syntax = CHOICE_SYNTAX,
	.shape_class = gemm_class,
	.parse_class = parse_class,
	.format_choice = format_choice,
	.parse_choice = parse_choice,
	.candidates = CUDA_ONLY(gemm_candidates),
	.measure = CUDA_ONLY(gemm_measure),
};

const tk_tuning tk_tuning_bmm = {
	.family = "gemm",
	.class_syntax = CLASS_SYNTAX,
	.choice_syntax = CHOICE_SYNTAX,
	.shape_class = bmm_class,
	.parse_class = parse_class,
	.format_choice = format_choice,
	.parse_choice = parse_choice,
	.candidates = CUDA_ONLY(bmm_candidates),
	.measure = CUDA_ONLY(bmm_measure),
};
