/*
 * parity_scale.c - bringing a model's workload within what a CPU reference
 * runs in a fraction of a second, keeping the sizes the kernels are shaped
 * for (see parity_scale_generic in parity.h for the rule).
 */
#include "parity/parity.h"

#include <stdio.h>
#include <string.h>

static int shape_slot(const parity_case *c, const char *name)
{
	int i = parity_tensor_index(c, name);

	for (int s = 0; i >= 0 && s < c->w.n_shapes; s++)
		if (c->w.tensor[s] == i)
			return s;
	return -1;
}

int64_t parity_dim(const parity_case *c, const char *name, int d)
{
	int s = shape_slot(c, name);

	if (s < 0)
		return -1;
	if (d < 0)
		d += c->w.ndim[s];
	return d >= 0 && d < c->w.ndim[s] ? c->w.shape[s][d] : -1;
}

void parity_set_dim(parity_case *c, const char *name, int d, int64_t v)
{
	int s = shape_slot(c, name);

	if (s < 0)
		return;
	if (d < 0)
		d += c->w.ndim[s];
	if (d >= 0 && d < c->w.ndim[s])
		c->w.shape[s][d] = v;
}

double parity_param_num(const parity_case *c, const char *name)
{
	const manifest_param *mp = NULL;
	int k = -1;

	for (int j = 0; j < c->op->n_params && k < 0; j++)
		if (!strcmp(c->op->params[j].name, name))
			k = j;
	if (k < 0)
		return 0.0;
	mp = &c->op->params[k];
	for (int s = 0; s < c->w.n_params; s++) {
		if (c->w.param[s] != k)
			continue;
		const tk_param *v = &c->w.value[s];
		return v->kind == TK_PARAM_FLOAT  ? v->v.f
		       : v->kind == TK_PARAM_BOOL ? (double)v->v.b
		                                  : (double)v->v.i;
	}
	if (!mp->has_default)
		return 0.0;
	return mp->def.kind == TK_PARAM_FLOAT  ? mp->def.v.f
	       : mp->def.kind == TK_PARAM_BOOL ? (double)mp->def.v.b
	                                       : (double)mp->def.v.i;
}

/*
 * 1 within the budget, 0 over it, -1 when the op layer refuses the case.
 * *targeted: the flops are within budget and only inputs hold too many
 * elements; big[s] marks those (by shape slot).
 */
static int measure(const parity_case *c, int64_t max_elems, double max_flops, int *big,
                   int *targeted, char *err, size_t errlen)
{
	double flops = parity_flops(c, err, errlen);
	int64_t e[PARITY_MAX_T];
	int within = 1, only_inputs;

	if (flops < 0.0 || parity_elems(c, e, err, errlen) < 0)
		return -1;
	only_inputs = flops <= max_flops;
	for (int i = c->op->n_in; i < c->op->n_in + c->op->n_out; i++)
		if (e[i] > max_elems)
			only_inputs = within = 0;
	for (int s = 0; s < c->w.n_shapes; s++) {
		big[s] = e[c->w.tensor[s]] > max_elems;
		within &= !big[s];
	}
	*targeted = only_inputs;
	return within && flops <= max_flops;
}

/* Whether dim d of shape slot s may be halved: not the last of a rank >= 2 tensor. */
static int shrinkable(const manifest_workload *w, int s, int d)
{
	return w->ndim[s] == 1 || d < w->ndim[s] - 1;
}

int parity_scale_generic(parity_case *c, int64_t max_elems, double max_flops, char *err,
                         size_t errlen)
{
	int64_t frozen[64];
	int n_frozen = 0, big[PARITY_MAX_T], targeted = 0;
	char why[512];
	int st;

	if ((st = measure(c, max_elems, max_flops, big, &targeted, err, errlen)) < 0)
		return -1;
	while (!st) {
		int64_t key = -1, cur = 1;

		/* The largest size still to halve, named by its size in the manifest. */
		for (int s = 0; s < c->w.n_shapes; s++) {
			if (targeted && !big[s])
				continue;
			for (int d = 0; d < c->w.ndim[s]; d++) {
				int64_t k = c->w0.shape[s][d], v = c->w.shape[s][d], skip = 0;

				for (int f = 0; f < n_frozen; f++)
					skip |= frozen[f] == k;
				if (!skip && shrinkable(&c->w, s, d) && v > cur) {
					key = k;
					cur = v;
				}
			}
		}
		if (key < 0) {
			snprintf(err, errlen,
			         "%s: no size left to halve, and the case is still over 2^%d "
			         "elements a tensor or %.3g flops: give the op a scale rule in "
			         "tests/parity/parity_rules.c",
			         c->op->name, 63 - __builtin_clzll((unsigned long long)max_elems),
			         max_flops);
			return -1;
		}
		/* Halve it everywhere it stands; then only in tensors of rank 2 and more
		 * (a rank-1 tensor of that size may be another dim's length, as a
		 * weight is the row's). Keep the first the op layer accepts. */
		int done = 0;
		for (int attempt = 0; attempt < 2 && !done; attempt++) {
			manifest_workload keep = c->w;
			int changed = 0;

			for (int s = 0; s < c->w.n_shapes; s++) {
				for (int d = 0; d < c->w.ndim[s]; d++) {
					if (c->w0.shape[s][d] != key || !shrinkable(&c->w, s, d) ||
					    (attempt == 1 && c->w.ndim[s] == 1))
						continue;
					c->w.shape[s][d] = (c->w.shape[s][d] + 1) / 2;
					changed = 1;
				}
			}
			if (changed && (st = measure(c, max_elems, max_flops, big, &targeted, why,
			                             sizeof(why))) >= 0) {
				done = 1;
				break;
			}
			c->w = keep;
		}
		if (!done) {
			if (n_frozen == (int)(sizeof(frozen) / sizeof(frozen[0]))) {
				snprintf(err, errlen, "%s: too many sizes to try", c->op->name);
				return -1;
			}
			frozen[n_frozen++] = key;
			st = 0;
		}
	}
	return 0;
}
