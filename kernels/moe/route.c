/*
 * route.c - the CPU reference of moe_route: router top-k from gate logits
 * [T, E] (manifest/moe.yaml gives the definition). Scores are computed in
 * double and rounded to f32 once; the selection key is the logit without a
 * bias and the f32 score plus the bias with one, so that both backends rank
 * by values they hold alike.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_util.h"
#include "moe.h"

/* a ranks before b: the larger key, NaN last, ties to the lower index. */
static int before(float ka, int64_t a, float kb, int64_t b)
{
	if (isnan(ka) || isnan(kb))
		return isnan(kb) && (!isnan(ka) || a < b);
	return ka > kb || (ka == kb && a < b);
}

static void route_row(const tk_moe_route *r, int64_t t, double *score, float *key,
                      unsigned char *allowed, float *gkey)
{
	int64_t E = r->e, gsize = E / r->n_group;
	double m = -INFINITY, sum = 0.0;

	for (int64_t e = 0; e < E; e++) {
		double l = cpu_load(r->logits, r->dtype, t * E + e);
		score[e] = l;
		if (l > m)
			m = l;
	}
	for (int64_t e = 0; e < E; e++) {
		double l = score[e];
		if (r->sigmoid)
			score[e] = 1.0 / (1.0 + exp(-l));
		else
			sum += (score[e] = exp(l - m));
		key[e] = r->bias ? (float)score[e] + r->bias[e] : (float)l;
	}
	if (!r->sigmoid)
		for (int64_t e = 0; e < E; e++)
			score[e] /= sum;

	/* The groups kept: each group's key is the sum of its two best keys. */
	for (int64_t e = 0; e < E; e++)
		allowed[e] = 1;
	if (r->n_group > 1) {
		for (int64_t g = 0; g < r->n_group; g++) {
			int64_t b0 = -1, b1 = -1;
			for (int64_t e = g * gsize; e < (g + 1) * gsize; e++) {
				if (b0 < 0 || before(key[e], e, key[b0], b0)) {
					b1 = b0;
					b0 = e;
				} else if (b1 < 0 || before(key[e], e, key[b1], b1)) {
					b1 = e;
				}
			}
			gkey[g] = b1 < 0 ? key[b0] : key[b0] + key[b1];
		}
		unsigned char *kept = allowed + E;
		for (int64_t g = 0; g < r->n_group; g++)
			kept[g] = 0;
		for (int64_t n = 0; n < r->topk_group; n++) {
			int64_t best = -1;
			for (int64_t g = 0; g < r->n_group; g++)
				if (!kept[g] && (best < 0 || before(gkey[g], g, gkey[best], best)))
					best = g;
			kept[best] = 1;
		}
		for (int64_t e = 0; e < E; e++)
			allowed[e] = kept[e / gsize];
	}

	double total = 0.0;
	int32_t *ids = r->ids + t * r->k;
	float *w = r->weights + t * r->k;
	for (int64_t j = 0; j < r->k; j++) {
		int64_t best = -1;
		for (int64_t e = 0; e < E; e++)
			if (allowed[e] && (best < 0 || before(key[e], e, key[best], best)))
				best = e;
		allowed[best] = 0;
		ids[j] = (int32_t)best;
		total += (float)score[best];
	}
	for (int64_t j = 0; j < r->k; j++) {
		double v = (float)score[ids[j]];
		if (r->renormalize)
			v /= total;
		w[j] = (float)(v * r->scale);
	}
}

tk_status tk_cpu_moe_route(const tk_call *call)
{
	tk_moe_route r;
	tk_status st = tk_moe_route_parse(call, &r);

	if (st != TK_OK)
		return st;
	double *score = malloc((size_t)r.e * sizeof(double));
	float *key = malloc((size_t)(r.e + r.n_group) * sizeof(float));
	unsigned char *allowed = malloc((size_t)(r.e + r.n_group));
	if (!score || !key || !allowed) {
		free(score);
		free(key);
		free(allowed);
		return TK_ERR_NOMEM;
	}
	for (int64_t t = 0; t < r.t; t++)
		route_row(&r, t, score, key, allowed, key + r.e);
	free(score);
	free(key);
	free(allowed);
	return TK_OK;
}
