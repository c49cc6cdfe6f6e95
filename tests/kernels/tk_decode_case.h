/*
 * tk_decode_case.h - a decode attention problem on the host, shared by the
 * CPU and GPU decode tests: q [B, T, Hq, D] ([B, Hq, D] when T is 1), the
 * key and value caches (contiguous [B, ps, Hkv, D], or paged [pages, ps,
 * Hkv, D] with a block table [B, maxp]), the lengths [B] and the output.
 */
#ifndef TILEOPS_TK_DECODE_CASE_H
#define TILEOPS_TK_DECODE_CASE_H

#include <string.h>

#include "kernels/tk_test_util.h"

typedef struct dcase {
	tk_call c;
	int paged;
	int64_t B, T, Hq, Hkv, D;
	int64_t pages, ps, maxp; /* pool pages (B when contiguous), page size, table width */
	int64_t cap;             /* the most tokens a sequence can hold */
} dcase;

/*
 * Make and fill a case: q and k uniform in [-qk, qk], v in [-1, 1]; the
 * block table and lengths are left for the test to write.
 */
static inline void dcase_make(dcase *x, tk_dtype dt, int paged, int64_t B, int64_t T, int64_t Hq,
                              int64_t Hkv, int64_t D, int64_t pages, int64_t ps, int64_t maxp,
                              double qk, uint64_t *rng)
{
	int64_t qs[4] = { B, T, Hq, D }, q3[3] = { B, Hq, D };
	int64_t cs[4] = { paged ? pages : B, ps, Hkv, D }, bs[2] = { B, maxp }, ls[1] = { B };
	int q4 = T != 1;

	memset(x, 0, sizeof(*x));
	x->paged = paged;
	x->B = B;
	x->T = T;
	x->Hq = Hq;
	x->Hkv = Hkv;
	x->D = D;
	x->pages = paged ? pages : B;
	x->ps = ps;
	x->maxp = maxp;
	x->cap = paged ? maxp * ps : ps;
	x->c.in[0] = q4 ? tt_tensor(dt, 4, qs, 0) : tt_tensor(dt, 3, q3, 0);
	x->c.in[1] = tt_tensor(dt, 4, cs, 0);
	x->c.in[2] = tt_tensor(dt, 4, cs, 0);
	tt_fill(&x->c.in[0], rng, -qk, qk);
	tt_fill(&x->c.in[1], rng, -qk, qk);
	tt_fill(&x->c.in[2], rng, -1.0, 1.0);
	if (paged)
		x->c.in[3] = tt_tensor(TK_I32, 2, bs, 0);
	x->c.in[paged ? 4 : 3] = tt_tensor(TK_I32, 1, ls, 0);
	x->c.n_in = paged ? 5 : 4;
	x->c.out[0] = q4 ? tt_tensor(dt, 4, qs, 0) : tt_tensor(dt, 3, q3, 0);
	x->c.n_out = 1;
	x->c.params[0] = tt_param_float(0.0);
	x->c.n_params = 1;
}

static inline int32_t *dcase_lens(dcase *x)
{
	return x->c.in[x->paged ? 4 : 3].data;
}

static inline int32_t *dcase_table(dcase *x)
{
	return x->c.in[3].data;
}

static inline void dcase_free(dcase *x)
{
	for (int i = 0; i < x->c.n_in; i++)
		tt_free(&x->c.in[i]);
	tt_free(&x->c.out[0]);
}

#endif
