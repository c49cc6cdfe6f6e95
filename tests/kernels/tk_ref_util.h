/*
 * tk_ref_util.h - what the CPU reference tests (tests/kernels/test_<family>.c)
 * share: the tolerance of a reference against double-precision formulas,
 * seeds, running a reference, and the buffer for the expected values.
 */
#ifndef TILEOPS_TK_REF_UTIL_H
#define TILEOPS_TK_REF_UTIL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/tk_test_util.h"

/*
 * Norm-wise tolerance of a reference against double arithmetic: f32 a few
 * ulp of 2^-24, f16 and bf16 about one ulp of the stored result.
 */
static inline double ref_tol(tk_dtype dt)
{
	return dt == TK_F32 ? 2e-6 : dt == TK_F16 ? 1e-3 : 8e-3;
}

/* A seed of its own for every case name (FNV-1a), odd as xorshift needs. */
static inline uint64_t ref_seed(const char *what)
{
	uint64_t s = 0x9e3779b97f4a7c15ULL;

	for (const char *p = what; *p; p++)
		s = (s ^ (uint64_t)(unsigned char)*p) * 0x100000001b3ULL;
	return s | 1;
}

static inline const tk_kernel_entry *ref_entry(const char *op)
{
	const tk_kernel_entry *e = tk_kernel_find(op);

	cr_assert_not_null(e, "no table entry for %s", op);
	return e;
}

/* Run op's CPU reference on c, which must accept it. */
static inline void ref_run(const char *op, tk_call *c)
{
	cr_assert_eq(ref_entry(op)->cpu(c), TK_OK, "%s refused its call", op);
}

/* Room for the expected value of each of t's logical elements (zeroed). */
static inline double *ref_want(const tk_tensor *t)
{
	int64_t n = tk_numel(t);

	return calloc((size_t)(n > 0 ? n : 1), sizeof(double));
}

static inline int ref_starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline int ref_in_list(const char *const *list, const char *op)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, op) == 0)
			return 1;
	return 0;
}

static inline void ref_free_call(tk_call *c)
{
	for (int i = 0; i < c->n_in; i++)
		tt_free(&c->in[i]);
	for (int i = 0; i < c->n_out; i++)
		tt_free(&c->out[i]);
}

#endif /* TILEOPS_TK_REF_UTIL_H */
