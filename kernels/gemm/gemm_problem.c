/*
 * gemm_problem.c - a gemm or bmm call as a tk_gemm_problem, its shape
 * class, and the configuration strings (tk_gemm.h). Plain C, in every
 * build: the CUDA launchers build their problems here, and the tuning
 * interface (gemm_tuning.c) names classes and configurations with it, also
 * where there is no GPU (a CPU-only tileopsd still checks tuning tables).
 */
#include <stdio.h>
#include <string.h>

#include "tk_gemm.h"
#include "tk_internal.h"

#define FIELD_MAX (1 << 20)

static const char *const kind_names[TK_GEMM_KIND_COUNT] = { "simple", "sm90", "smallm", "decode",
	                                                    "simt" };

/* ---- strings ---------------------------------------------------------------- */

void tk_gemm_config_str(const tk_gemm_config *c, char *buf, size_t len)
{
	const char *kind =
	        c->kind >= 0 && c->kind < TK_GEMM_KIND_COUNT ? kind_names[c->kind] : "invalid";

	snprintf(buf, len, "%s m%d n%d k%d s%d c%d sk%d", kind, c->tile_m, c->tile_n, c->tile_k,
	         c->stages, c->cluster, c->split_k);
}

int tk_gemm_config_parse(const char *s, tk_gemm_config *c)
{
	static const char *const prefixes[] = { "m", "n", "k", "s", "c", "sk" };
	int *fields[6];
	tk_gemm_config r;
	char tok[32];
	int kind = -1;

	memset(&r, 0, sizeof(r));
	fields[0] = &r.tile_m;
	fields[1] = &r.tile_n;
	fields[2] = &r.tile_k;
	fields[3] = &r.stages;
	fields[4] = &r.cluster;
	fields[5] = &r.split_k;
	if (s == NULL || !tk_next_word(&s, tok, sizeof(tok)))
		return -1;
	for (int k = 0; k < TK_GEMM_KIND_COUNT; k++)
		if (strcmp(tok, kind_names[k]) == 0)
			kind = k;
	if (kind < 0)
		return -1;
	r.kind = kind;
	for (int i = 0; i < 6; i++) {
		int64_t v;
		if (!tk_next_word(&s, tok, sizeof(tok)) ||
		    tk_word_number(tok, prefixes[i], FIELD_MAX, &v) != 0)
			return -1;
		*fields[i] = (int)v;
	}
	if (tk_next_word(&s, tok, sizeof(tok)))
		return -1;
	*c = r;
	return 0;
}

void tk_gemm_choice_of(const tk_gemm_config *cfg, int mode, tk_choice *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = mode;
	c->v[0] = cfg->kind;
	c->v[1] = cfg->tile_m;
	c->v[2] = cfg->tile_n;
	c->v[3] = cfg->tile_k;
	c->v[4] = cfg->stages;
	c->v[5] = cfg->cluster;
	c->v[6] = cfg->split_k;
}

void tk_gemm_config_of(const tk_choice *c, tk_gemm_config *cfg)
{
	cfg->kind = c->v[0];
	cfg->tile_m = c->v[1];
	cfg->tile_n = c->v[2];
	cfg->tile_k = c->v[3];
	cfg->stages = c->v[4];
	cfg->cluster = c->v[5];
	cfg->split_k = c->v[6];
}

void tk_gemm_shape_class(const tk_gemm_problem *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s %s%s m%lld n%lld k%lld", tk_dtype_name(p->dtype),
	         p->trans_b ? "nt" : "nn", p->batch > 1 ? " b" : "", (long long)tk_pow2_ceil(p->m),
	         (long long)p->n, (long long)p->k);
}

/* ---- calls as problems --------------------------------------------------------- */

/* Rows, columns, row stride and batch stride of a 3-D tensor's last two dims. */
static int batch_matrix(const tk_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld, int64_t *sb)
{
	if (t->ndim != 3 || (t->stride[2] != 1 && t->shape[2] > 1))
		return 0;
	*rows = t->shape[1];
	*cols = t->shape[2];
	*ld = t->shape[1] > 1 ? t->stride[1] : t->shape[2];
	*sb = t->shape[0] > 1 ? t->stride[0] : 0;
	return *ld >= *cols && *ld >= 0 && *sb >= 0;
}

static tk_status gemm_problem(const tk_call *call, tk_gemm_problem *p)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *bias = tk_has_input(call, 2) ? &call->in[2] : NULL;
	const tk_tensor *res = tk_has_input(call, 3) ? &call->in[3] : NULL;
	const tk_tensor *ts[5] = { c, a, b, NULL, NULL };
	int64_t bk, bn, cm, cn, rm, rn;
	int nts = 3;

	if (bias)
		ts[nts++] = bias;
	if (res)
		ts[nts++] = res;
	if (!tk_same_float_dtype(ts, nts))
		return TK_ERR_UNSUPPORTED;
	if (tk_matrix_view(a, &p->m, &p->k, &p->lda) != TK_OK || b->ndim != 2 ||
	    tk_matrix_view(b, &bk, &bn, &p->ldb) != TK_OK ||
	    tk_matrix_view(c, &cm, &cn, &p->ldc) != TK_OK)
		return TK_ERR_UNSUPPORTED;
	if (p->trans_b) {
		int64_t t = bk;
		bk = bn;
		bn = t;
	}
	p->n = bn;
	if (bk != p->k || cm != p->m || cn != p->n)
		return TK_ERR_UNSUPPORTED;
	if (bias && (tk_numel(bias) != p->n || !tk_last_dim_packed(bias)))
		return TK_ERR_UNSUPPORTED;
	if (res && (tk_matrix_view(res, &rm, &rn, &p->ldr) != TK_OK || rm != p->m || rn != p->n))
		return TK_ERR_UNSUPPORTED;
	p->batch = 1;
	p->bias = bias ? bias->data : NULL;
	p->residual = res ? res->data : NULL;
	return TK_OK;
}

static tk_status bmm_problem(const tk_call *call, tk_gemm_problem *p)
{
	const tk_tensor *a = &call->in[0], *b = &call->in[1], *c = &call->out[0];
	const tk_tensor *ts[3] = { c, a, b };
	int64_t bk, bn, cm, cn;

	if (!tk_same_float_dtype(ts, 3))
		return TK_ERR_UNSUPPORTED;
	if (!batch_matrix(a, &p->m, &p->k, &p->lda, &p->stride_a) ||
	    !batch_matrix(b, &bk, &bn, &p->ldb, &p->stride_b) ||
	    !batch_matrix(c, &cm, &cn, &p->ldc, &p->stride_c))
		return TK_ERR_UNSUPPORTED;
	if (p->trans_b) {
		int64_t t = bk;
		bk = bn;
		bn = t;
	}
	p->n = bn;
	p->batch = a->shape[0];
	if (b->shape[0] != p->batch || c->shape[0] != p->batch || bk != p->k || cm != p->m ||
	    cn != p->n)
		return TK_ERR_UNSUPPORTED;
	return TK_OK;
}

tk_status tk_gemm_problem_of(const tk_call *call, int batched, tk_gemm_problem *p)
{
	memset(p, 0, sizeof(*p));
	if (call->n_in < 2 || call->n_out < 1)
		return TK_ERR_UNSUPPORTED;
	p->dtype = call->in[0].dtype;
	p->alpha = (float)tk_param_num(call, 0, 1.0);
	p->trans_b = tk_param_num(call, 1, 0.0) != 0.0;
	tk_status st = batched ? bmm_problem(call, p) : gemm_problem(call, p);
	if (st != TK_OK)
		return st;
	p->a = call->in[0].data;
	p->b = call->in[1].data;
	p->c = call->out[0].data;
	p->workspace = call->workspace;
	p->workspace_bytes = call->workspace ? call->workspace_bytes : 0;
	return TK_OK;
}
