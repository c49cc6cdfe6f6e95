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
#endif

TK_TUNING_PAIR(gemm, bmm, "gemm", CLASS_SYNTAX, CHOICE_SYNTAX, shape_class, format_choice,
               parse_choice, candidates, gemm_measure, bmm_measure);
