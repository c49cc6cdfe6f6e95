/*
 * llama.c - a Llama 3.x model run end to end through tileopsd: token ids
 * in, sampled tokens out, for a batch of sequences with a paged KV cache.
 *
 *   tileops-example-llama [ADDRESS] [--tiny | --8b] [--batch B] [--prompt P]
 *                         [--gen N] [--check-steps K] [--check-seqs S]
 *                         [--temperature T] [--top-k K] [--top-p P] [--min-p P]
 *                         [--seed S] [--dtype bf16|f16] [--bench]
 *
 * The model is Llama 3.1 8B's shape (the default on a GPU backend) or a tiny
 * one (the default on the CPU backend: 2 layers, hidden 256, 4 heads of 64,
 * 2 KV heads, intermediate 512, vocabulary 1024), with seeded random
 * weights. A layer is
 *
 *   h = rms_norm(x); [q k v] = h Wqkv; rope(q, k) (Llama 3's
 *   scaled frequencies, as a cos/sin cache); kv_cache_append(k, v);
 *   o = attention(q, cache); x = x + o Wo; x = x + silu_and_mul(rms_norm(x) Wgu) Wd
 *
 * between an embedding and a final norm, the LM head on each sequence's last
 * token (gather_rows) and sample. The prompt runs as one prefill plan
 * (attention_prefill_varlen over the packed prompts); each decode step as one
 * bucketed plan (buckets 1 .. 128; attention_decode_paged), whose sampled
 * tokens are the next step's embedding ids on the daemon. The decode plan
 * starts with decode_advance, which moves every sequence's length, position
 * and KV slot (from its block table) on by one and writes the fed token into
 * a history ring on the device, so a step is one request: the plan's
 * replay. The client writes the lengths and ids once before the first step
 * and reads the history once after the last.
 *
 * q, k and v are row-strided views of the one fused projection's output
 * (Wqkv stacks the three weights' rows: one weight read instead of three
 * launches) and the attention's output is reshaped for the o projection:
 * tensor views (tileops_tensor_view) of the same memory, so a whole step
 * is one plan.
 *
 * The logits of the prompt and of the first decode steps are compared with
 * a reference computed here in plain C (f32, every tensor the daemon stores
 * rounded to its dtype as it does), fed the daemon's own tokens, and those
 * tokens with the history the daemon kept. Exit status 0 only when every
 * comparison passes. Then tokens/s of the decode steps after the checked
 * ones, which read nothing back.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "example_dtype.h"
#include "tileops.h"

#define MAX_BUCKET 128
#define PAGE 16
#define POOL_BITS 22
#define POOL_LEN ((size_t)1 << POOL_BITS)
#define MAX_STEPS 4096
/* Columns of decode_advance's token history: one per position a run can feed. */
#define HISTORY (MAX_STEPS + 1)
#define MAX_PROG 4096
#define MAX_OWNED 8192

/* ---- configuration -------------------------------------------------------------- */

typedef struct config {
	const char *name;
	int64_t layers, hidden, heads, kv_heads, head_dim, inter, vocab;
	double theta, eps;
	/* Llama 3 rope scaling */
	double factor, low_freq, high_freq, orig_ctx;
} config;

static const config cfg_8b = { "Llama 3.1 8B", 32,       4096, 32,  8,   128, 14336,
	                       128256,         500000.0, 1e-5, 8.0, 1.0, 4.0, 8192.0 };
static const config cfg_tiny = { "tiny Llama 3", 2,        256,  4,   2,   64,  512,
	                         1024,           500000.0, 1e-5, 8.0, 1.0, 4.0, 8192.0 };

typedef struct args {
	const char *address;
	int size; /* 0: by backend, 1: tiny, 2: 8B */
	int64_t batch, prompt, gen, check_steps, check_seqs;
	int64_t context; /* > 0: a decode bench from a cache of this many tokens, no prompt */
	double temperature, top_p, min_p;
	int64_t top_k, seed;
	tileops_dtype dtype;
	int bench;
} args;

/* ---- dtype conversion (example_dtype.h) ------------------------------------------ */

static uint16_t enc(tileops_dtype dt, float v)
{
	return dt == TILEOPS_BF16 ? f32_to_bf16(v) : f32_to_f16(v);
}

static float dec(tileops_dtype dt, uint16_t v)
{
	return dt == TILEOPS_BF16 ? bf16_to_f32(v) : f16_to_f32(v);
}

/* v as the daemon stores it. */
static float rnd(tileops_dtype dt, float v)
{
	return dec(dt, enc(dt, v));
}

/* ---- weights: shifted windows of a few random pools -------------------------------- */

/*
 * Writing 16 GB of weights element by element would take longer than the
 * run, so every weight tensor is a window of one of four pools of random
 * values (one per scale), starting at a seeded place: element j of a tensor
 * is pool[(base + j) mod POOL_LEN]. The reference reads the same windows.
 */
enum { POOL_EMB, POOL_H, POOL_I, POOL_NORM, N_POOLS };

typedef struct pools {
	uint16_t *bits[N_POOLS]; /* as written to the daemon */
	float *val[N_POOLS];     /* the same values, for the reference */
} pools;

typedef struct weight {
	tileops_tensor t;
	int pool;
	size_t base, n;
} weight;

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static int pools_make(pools *p, const config *m, tileops_dtype dt, uint64_t seed)
{
	const double scale[N_POOLS] = { 1.0, 1.0 / sqrt((double)m->hidden),
		                        1.0 / sqrt((double)m->inter), 0.1 };
	uint64_t s = seed | 1;

	for (int k = 0; k < N_POOLS; k++) {
		p->bits[k] = malloc(POOL_LEN * sizeof(uint16_t));
		p->val[k] = malloc(POOL_LEN * sizeof(float));
		if (!p->bits[k] || !p->val[k])
			return -1;
		for (size_t i = 0; i < POOL_LEN; i++) {
			double v = scale[k] * rng_unit(&s) + (k == POOL_NORM ? 1.0 : 0.0);
			p->bits[k][i] = enc(dt, (float)v);
			p->val[k][i] = dec(dt, p->bits[k][i]);
		}
	}
	return 0;
}

static void pools_free(pools *p)
{
	for (int k = 0; k < N_POOLS; k++) {
		free(p->bits[k]);
		free(p->val[k]);
	}
}

static float wval(const pools *p, const weight *w, size_t j)
{
	return p->val[w->pool][(w->base + j) & (POOL_LEN - 1)];
}

/* Rows [r0, r0 + n) of a weight of k columns, as a weight of their own (for the reference). */
static weight rows_of(const weight *w, int64_t r0, int64_t n, int64_t k)
{
	weight sub = *w;

	sub.base = (w->base + (size_t)(r0 * k)) & (POOL_LEN - 1);
	sub.n = (size_t)(n * k);
	return sub;
}

/* ---- talking to the daemon ------------------------------------------------------ */

static int check(tileops_status st, const char *what)
{
	if (st == TILEOPS_OK)
		return 0;
	fprintf(stderr, "tileops-example-llama: %s failed: %s: %s\n", what, tileops_strerror(st),
	        tileops_last_error());
	return -1;
}

/* Every tensor and view the example makes, freed at the end (views first). */
typedef struct owned {
	tileops_tensor t[MAX_OWNED];
	int n;
} owned;

static tileops_tensor tensor(tileops_client *c, owned *o, tileops_dtype dt, int ndim,
                             const int64_t *shape)
{
	tileops_tensor t = 0;

	if (o->n >= MAX_OWNED ||
	    check(tileops_tensor_create(c, dt, ndim, shape, &t), "tensor_create"))
		return 0;
	o->t[o->n++] = t;
	return t;
}

#define T1(c, o, dt, a) tensor((c), (o), (dt), 1, (const int64_t[]){ (a) })
#define T2(c, o, dt, a, b) tensor((c), (o), (dt), 2, (const int64_t[]){ (a), (b) })
#define T3(c, o, dt, a, b, d) tensor((c), (o), (dt), 3, (const int64_t[]){ (a), (b), (d) })

static int weight_make(tileops_client *c, owned *o, const pools *p, tileops_dtype dt, int pool,
                       int64_t d0, int64_t d1, uint64_t *rng, weight *w)
{
	w->t = d1 ? T2(c, o, dt, d0, d1) : T1(c, o, dt, d0);
	w->pool = pool;
	w->base = (size_t)(rng_next(rng) & (POOL_LEN - 1));
	w->n = (size_t)(d0 * (d1 ? d1 : 1));
	if (!w->t)
		return -1;
	for (size_t done = 0; done < w->n;) {
		size_t at = (w->base + done) & (POOL_LEN - 1), len = POOL_LEN - at;
		if (len > w->n - done)
			len = w->n - done;
		if (check(tileops_tensor_write(c, w->t, done * 2, p->bits[pool] + at, len * 2),
		          "tensor_write"))
			return -1;
		done += len;
	}
	return 0;
}

/* ---- programs: a sequence of ops, sent as one plan -------------------------------- */

typedef struct step {
	char name[32];
	tileops_tensor in[8], out[4];
	size_t n_in, n_out;
	tileops_param params[8];
	char pname[8][16];
	size_t n_params;
} step;

typedef struct program {
	step s[MAX_PROG];
	int n;
	tileops_plan *plan;
	const tileops_tensor *bucketed;
	size_t n_bucketed;
} program;

static step *emit(program *p, const char *name)
{
	if (p->n >= MAX_PROG)
		return NULL;
	step *s = &p->s[p->n++];
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	return s;
}

static void op_in(step *s, tileops_tensor t)
{
	s->in[s->n_in++] = t;
}

static void op_out(step *s, tileops_tensor t)
{
	s->out[s->n_out++] = t;
}

static void op_pf(step *s, const char *name, double v)
{
	snprintf(s->pname[s->n_params], sizeof(s->pname[0]), "%s", name);
	s->params[s->n_params] = tileops_param_float(s->pname[s->n_params], v);
	s->n_params++;
}

static void op_pi(step *s, const char *name, int64_t v)
{
	snprintf(s->pname[s->n_params], sizeof(s->pname[0]), "%s", name);
	s->params[s->n_params] = tileops_param_int(s->pname[s->n_params], v);
	s->n_params++;
}

static void op_pb(step *s, const char *name, int v)
{
	snprintf(s->pname[s->n_params], sizeof(s->pname[0]), "%s", name);
	s->params[s->n_params] = tileops_param_bool(s->pname[s->n_params], v);
	s->n_params++;
}

/* src seen with another shape: a view of the same bytes, no copy. */
static tileops_tensor reshape(tileops_client *c, owned *o, tileops_tensor src, tileops_dtype dt,
                              int ndim, const int64_t *shape)
{
	tileops_tensor v = 0;
	if (o->n >= MAX_OWNED ||
	    check(tileops_tensor_view(c, src, 0, dt, ndim, shape, NULL, &v), "tensor_view"))
		return 0;
	o->t[o->n++] = v;
	return v;
}

/* [R, heads, D] at column `col` of src's [R, width] rows: a row-strided view, no copy. */
static tileops_tensor heads_of(tileops_client *c, owned *o, tileops_tensor src, tileops_dtype dt,
                               int64_t R, int64_t width, int64_t heads, int64_t D, int64_t col)
{
	const int64_t shape[3] = { R, heads, D }, strides[3] = { width, D, 1 };
	tileops_tensor v = 0;

	if (o->n >= MAX_OWNED ||
	    check(tileops_tensor_view(c, src, (size_t)col * 2, dt, 3, shape, strides, &v),
	          "tensor_view"))
		return 0;
	o->t[o->n++] = v;
	return v;
}

static int uses(const step *s, tileops_tensor t)
{
	for (size_t i = 0; i < s->n_in; i++)
		if (s->in[i] == t)
			return 1;
	for (size_t i = 0; i < s->n_out; i++)
		if (s->out[i] == t)
			return 1;
	return 0;
}

/* Send the program's ops as one plan, bucketed on the tensors it names. */
static int program_end(tileops_client *c, program *p, const char *name)
{
	static const int64_t buckets[] = { 1, 2, 4, 8, 16, 32, 64, 128 };
	tileops_tensor *bk = calloc(p->n_bucketed + 1, sizeof(tileops_tensor));
	size_t nb = 0;

	if (!bk)
		return -1;
	for (size_t b = 0; b < p->n_bucketed; b++)
		for (int k = 0; k < p->n; k++)
			if (uses(&p->s[k], p->bucketed[b])) {
				bk[nb++] = p->bucketed[b];
				break;
			}
	tileops_plan_options po = { buckets, p->n_bucketed ? 8 : 0, bk, nb, name };
	int rv = check(tileops_plan_begin(c, &po, &p->plan), "plan_begin");
	for (int k = 0; k < p->n && !rv; k++) {
		const step *s = &p->s[k];
		tileops_op op = {
			s->name, s->in, s->n_in, s->out, s->n_out, s->params, s->n_params
		};
		rv = check(tileops_plan_add(p->plan, &op), s->name);
	}
	if (!rv)
		rv = check(tileops_plan_end(p->plan), "plan_end");
	free(bk);
	if (rv) {
		tileops_plan_free(p->plan);
		p->plan = NULL;
		return -1;
	}
	return 0;
}

/* Run the program for `rows` rows of its bucketed tensors; *requests counts them. */
static int program_run(program *p, int64_t rows, int64_t *requests)
{
	if (check(tileops_plan_run(p->plan, p->n_bucketed ? rows : 0, NULL, 0), "plan_run"))
		return -1;
	(*requests)++;
	return 0;
}

static void program_free(program *p)
{
	tileops_plan_free(p->plan);
	p->plan = NULL;
}

/* ---- the model on the daemon ------------------------------------------------------ */

typedef struct layer {
	weight attn_norm, wqkv, wo, mlp_norm, wgu, wd; /* wqkv: the q, k and v rows, stacked */
	tileops_tensor k_cache, v_cache;
} layer;

typedef struct model {
	config m;
	tileops_dtype dt;
	weight emb, final_norm, lm_head;
	layer *l;
	tileops_tensor rope; /* [ctx, head_dim] f32: cos in the first half, sin in the second */
	float *rope_host;
	int64_t ctx, pages_per_seq, num_pages;
} model;

/* Llama 3's scaled rotary frequencies (rope_type "llama3"). */
static double rope_freq(const config *m, int64_t i)
{
	double f = pow(m->theta, -(double)(2 * i) / (double)m->head_dim);
	double wavelen = 2.0 * M_PI / f;
	double low = m->orig_ctx / m->low_freq, high = m->orig_ctx / m->high_freq;

	if (wavelen < high)
		return f;
	if (wavelen > low)
		return f / m->factor;
	double smooth = (m->orig_ctx / wavelen - m->low_freq) / (m->high_freq - m->low_freq);
	return (1.0 - smooth) * f / m->factor + smooth * f;
}

static int model_make(tileops_client *c, owned *o, const pools *p, model *md, uint64_t seed)
{
	const config *m = &md->m;
	tileops_dtype dt = md->dt;
	int64_t H = m->hidden, D = m->head_dim, Q = m->heads * D, KV = m->kv_heads * D;
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;

	md->l = calloc((size_t)m->layers, sizeof(layer));
	if (!md->l)
		return -1;
	if (weight_make(c, o, p, dt, POOL_EMB, m->vocab, H, &rng, &md->emb) ||
	    weight_make(c, o, p, dt, POOL_NORM, H, 0, &rng, &md->final_norm) ||
	    weight_make(c, o, p, dt, POOL_H, m->vocab, H, &rng, &md->lm_head))
		return -1;
	for (int64_t i = 0; i < m->layers; i++) {
		layer *l = &md->l[i];
		if (weight_make(c, o, p, dt, POOL_NORM, H, 0, &rng, &l->attn_norm) ||
		    weight_make(c, o, p, dt, POOL_H, Q + 2 * KV, H, &rng, &l->wqkv) ||
		    weight_make(c, o, p, dt, POOL_H, H, Q, &rng, &l->wo) ||
		    weight_make(c, o, p, dt, POOL_NORM, H, 0, &rng, &l->mlp_norm) ||
		    weight_make(c, o, p, dt, POOL_H, 2 * m->inter, H, &rng, &l->wgu) ||
		    weight_make(c, o, p, dt, POOL_I, H, m->inter, &rng, &l->wd))
			return -1;
		const int64_t cs[4] = { md->num_pages, PAGE, m->kv_heads, D };
		l->k_cache = tensor(c, o, dt, 4, cs);
		l->v_cache = tensor(c, o, dt, 4, cs);
		if (!l->k_cache || !l->v_cache)
			return -1;
	}
	md->rope_host = malloc(sizeof(float) * (size_t)(md->ctx * D));
	md->rope = T2(c, o, TILEOPS_F32, md->ctx, D);
	if (!md->rope_host || !md->rope)
		return -1;
	for (int64_t pos = 0; pos < md->ctx; pos++)
		for (int64_t i = 0; i < D / 2; i++) {
			double a = (double)pos * (double)(float)rope_freq(m, i);
			md->rope_host[pos * D + i] = (float)cos(a);
			md->rope_host[pos * D + D / 2 + i] = (float)sin(a);
		}
	return check(tileops_tensor_write(c, md->rope, 0, md->rope_host,
	                                  sizeof(float) * (size_t)(md->ctx * D)),
	             "tensor_write");
}

/* Activations of one program: R rows (tokens), and what its ops need. */
typedef struct acts {
	int64_t R;
	tileops_tensor ids, x, h, qkv, q3, k3, v3, o3, o2, gu, act;
	tileops_tensor pos, slots;
	/* decode: seq_lens, block_tables, history; prefill: cu_seqlens, last */
	tileops_tensor seq_lens, block_tables, history, cu_seqlens, last;
	tileops_tensor xl, hn, logits, tokens, seeds, offsets;
	int64_t S; /* rows of the head: sequences */
} acts;

static void gemm(program *p, tileops_tensor a, const weight *w, tileops_tensor res,
                 tileops_tensor out)
{
	step *s = emit(p, "gemm");
	op_in(s, a);
	op_in(s, w->t);
	if (res) {
		op_in(s, 0);
		op_in(s, res);
	}
	op_out(s, out);
	op_pb(s, "trans_b", 1);
}

static void norm(program *p, const model *md, tileops_tensor x, const weight *w, tileops_tensor out)
{
	step *s = emit(p, "rms_norm");
	op_in(s, x);
	op_in(s, w->t);
	op_out(s, out);
	op_pf(s, "eps", md->m.eps);
}

/*
 * The whole forward pass as one program: prefill (R packed prompt tokens,
 * S sequences) when `prefill`, else one decode token for each of R = S rows.
 */
static int build(tileops_client *c, owned *o, const model *md, const args *a, acts *x, program *p,
                 int prefill)
{
	const config *m = &md->m;
	tileops_dtype dt = md->dt;
	int64_t R = x->R, S = x->S, H = m->hidden, D = m->head_dim, Hq = m->heads,
	        Hkv = m->kv_heads;

	x->ids = T1(c, o, TILEOPS_I64, R);
	x->x = T2(c, o, dt, R, H);
	x->h = T2(c, o, dt, R, H);
	x->qkv = T2(c, o, dt, R, (Hq + 2 * Hkv) * D);
	x->o3 = T3(c, o, dt, R, Hq, D);
	x->gu = T2(c, o, dt, R, 2 * m->inter);
	x->act = T2(c, o, dt, R, m->inter);
	x->pos = T1(c, o, TILEOPS_I64, R);
	x->slots = T1(c, o, TILEOPS_I64, R);
	if (prefill) {
		x->cu_seqlens = T1(c, o, TILEOPS_I32, S + 1);
		x->last = T1(c, o, TILEOPS_I64, S);
		x->xl = T2(c, o, dt, S, H);
		x->offsets = T1(c, o, TILEOPS_I64, S);
	} else {
		x->seq_lens = T1(c, o, TILEOPS_I32, R);
		x->block_tables = T2(c, o, TILEOPS_I32, R, md->pages_per_seq);
		x->history = T2(c, o, TILEOPS_I64, R, HISTORY);
		x->offsets = x->pos;
		if (!x->seq_lens || !x->block_tables || !x->history)
			return -1;
	}
	x->hn = T2(c, o, dt, S, H);
	x->logits = T2(c, o, dt, S, m->vocab);
	x->tokens = prefill ? T1(c, o, TILEOPS_I64, S) : x->ids;
	x->seeds = T1(c, o, TILEOPS_I64, S);
	if (!x->ids || !x->x || !x->h || !x->qkv || !x->o3 || !x->gu || !x->act || !x->pos ||
	    !x->slots || !x->hn || !x->logits || !x->tokens || !x->seeds)
		return -1;

	step *s;
	if (!prefill) {
		/* ids are the last step's samples: their positions and slots, from the lengths. */
		s = emit(p, "decode_advance");
		op_in(s, x->ids);
		op_in(s, x->seq_lens);
		op_in(s, x->block_tables);
		op_in(s, x->history);
		op_out(s, x->pos);
		op_out(s, x->slots);
		op_pi(s, "page_size", PAGE);
	}
	s = emit(p, "embedding");
	op_in(s, md->emb.t);
	op_in(s, x->ids);
	op_out(s, x->x);
	for (int64_t li = 0; li < m->layers; li++) {
		const layer *l = &md->l[li];
		norm(p, md, x->x, &l->attn_norm, x->h);
		gemm(p, x->h, &l->wqkv, 0, x->qkv);
		if (li == 0) {
			/* q, k and v: row-strided views of the one projection's output */
			const int64_t W = (Hq + 2 * Hkv) * D;
			x->q3 = heads_of(c, o, x->qkv, dt, R, W, Hq, D, 0);
			x->k3 = heads_of(c, o, x->qkv, dt, R, W, Hkv, D, Hq * D);
			x->v3 = heads_of(c, o, x->qkv, dt, R, W, Hkv, D, (Hq + Hkv) * D);
		}
		if (!x->q3 || !x->k3 || !x->v3)
			return -1;
		s = emit(p, "rope_neox");
		op_in(s, x->q3);
		op_in(s, x->k3);
		op_in(s, x->pos);
		op_in(s, md->rope);
		op_pi(s, "rotary_dim", D);
		s = emit(p, "kv_cache_append");
		op_in(s, x->k3);
		op_in(s, x->v3);
		op_in(s, x->slots);
		op_in(s, l->k_cache);
		op_in(s, l->v_cache);
		if (prefill) {
			s = emit(p, "attention_prefill_varlen");
			op_in(s, x->q3);
			op_in(s, x->k3);
			op_in(s, x->v3);
			op_in(s, x->cu_seqlens);
			op_in(s, x->cu_seqlens);
			op_out(s, x->o3);
			op_pb(s, "causal", 1);
			op_pi(s, "max_seqlen_q", a->prompt);
		} else {
			s = emit(p, "attention_decode_paged");
			op_in(s, x->q3);
			op_in(s, l->k_cache);
			op_in(s, l->v_cache);
			op_in(s, x->block_tables);
			op_in(s, x->seq_lens);
			op_out(s, x->o3);
		}
		if (li == 0) {
			x->o2 = reshape(c, o, x->o3, dt, 2, (const int64_t[]){ R, Hq * D });
			if (!x->o2)
				return -1;
		}
		gemm(p, x->o2, &l->wo, x->x, x->x);
		norm(p, md, x->x, &l->mlp_norm, x->h);
		gemm(p, x->h, &l->wgu, 0, x->gu);
		s = emit(p, "silu_and_mul");
		op_in(s, x->gu);
		op_out(s, x->act);
		gemm(p, x->act, &l->wd, x->x, x->x);
	}
	tileops_tensor last = x->x;
	if (prefill) {
		s = emit(p, "gather_rows");
		op_in(s, x->x);
		op_in(s, x->last);
		op_out(s, x->xl);
		last = x->xl;
	}
	norm(p, md, last, &md->final_norm, x->hn);
	gemm(p, x->hn, &md->lm_head, 0, x->logits);
	s = emit(p, "sample");
	if (!s)
		return -1;
	op_in(s, x->logits);
	op_in(s, 0); /* temperatures */
	op_in(s, 0); /* top_ks */
	op_in(s, 0); /* top_ps */
	op_in(s, 0); /* min_ps */
	op_in(s, x->seeds);
	op_in(s, x->offsets);
	op_out(s, x->tokens);
	op_pf(s, "temperature", a->temperature);
	op_pi(s, "top_k", a->top_k);
	op_pf(s, "top_p", a->top_p);
	op_pf(s, "min_p", a->min_p);
	return 0;
}

/* ---- the reference -------------------------------------------------------------- */

typedef struct ref {
	const model *md;
	const pools *p;
	float *kc, *vc; /* [seq][layer][ctx][Hkv * D] */
	int64_t seqs;
} ref;

typedef struct mv_job {
	const pools *p;
	const weight *w;
	const float *x;
	float *y;
	int64_t n, k, lo, hi;
} mv_job;

static void *mv_part(void *arg)
{
	mv_job *j = arg;

	for (int64_t r = j->lo; r < j->hi; r++) {
		float acc = 0.0f;
		for (int64_t i = 0; i < j->k; i++)
			acc += j->x[i] * wval(j->p, j->w, (size_t)(r * j->k + i));
		j->y[r] = acc;
	}
	return NULL;
}

/* y[n] = W[n, k] x[k]: rows split over threads when there are many. */
static void matvec(const pools *p, const weight *w, const float *x, float *y, int64_t n, int64_t k)
{
	enum { THREADS = 16 };
	mv_job jobs[THREADS];
	pthread_t th[THREADS];
	int nt = n * k >= (1 << 22) ? THREADS : 1, started = 0;

	for (int t = 0; t < nt; t++) {
		jobs[t] = (mv_job){ p, w, x, y, n, k, n * t / nt, n * (t + 1) / nt };
		if (t > 0 && pthread_create(&th[t], NULL, mv_part, &jobs[t]) == 0)
			started |= 1 << t;
		else if (t > 0)
			mv_part(&jobs[t]);
	}
	mv_part(&jobs[0]);
	for (int t = 1; t < nt; t++)
		if (started & (1 << t))
			pthread_join(th[t], NULL);
}

static void ref_norm(const model *md, const pools *p, const float *x, const weight *w, float *out)
{
	int64_t H = md->m.hidden;
	double ss = 0.0;

	for (int64_t i = 0; i < H; i++)
		ss += (double)x[i] * x[i];
	float inv = (float)(1.0 / sqrt(ss / (double)H + md->m.eps));
	for (int64_t i = 0; i < H; i++)
		out[i] = rnd(md->dt, x[i] * inv * wval(p, w, (size_t)i));
}

static void ref_rope(const model *md, float *v, int64_t heads, int64_t pos)
{
	int64_t D = md->m.head_dim;
	const float *cs = md->rope_host + pos * D;

	for (int64_t h = 0; h < heads; h++)
		for (int64_t i = 0; i < D / 2; i++) {
			float a = v[h * D + i], b = v[h * D + D / 2 + i];
			v[h * D + i] = rnd(md->dt, a * cs[i] - b * cs[D / 2 + i]);
			v[h * D + D / 2 + i] = rnd(md->dt, b * cs[i] + a * cs[D / 2 + i]);
		}
}

/* One token of sequence `seq` at position `pos`: its logits (rounded as the daemon's). */
static int ref_token(ref *r, int64_t seq, int64_t token, int64_t pos, float *logits)
{
	const model *md = r->md;
	const config *m = &md->m;
	tileops_dtype dt = md->dt;
	int64_t H = m->hidden, D = m->head_dim, Q = m->heads * D, KV = m->kv_heads * D;
	int64_t I = m->inter, grp = m->heads / m->kv_heads;
	size_t big = (size_t)(2 * I > m->vocab ? 2 * I : m->vocab);
	float *x = malloc(sizeof(float) * (size_t)H), *h = malloc(sizeof(float) * (size_t)H);
	float *q = malloc(sizeof(float) * (size_t)Q), *att = malloc(sizeof(float) * (size_t)Q);
	float *t = malloc(sizeof(float) * big), *sc = malloc(sizeof(float) * (size_t)(pos + 1));

	if (!x || !h || !q || !att || !t || !sc) {
		free(x), free(h), free(q), free(att), free(t), free(sc);
		return -1;
	}
	for (int64_t i = 0; i < H; i++)
		x[i] = token >= 0 && token < m->vocab
		               ? wval(r->p, &md->emb, (size_t)(token * H + i))
		               : 0.0f;
	for (int64_t li = 0; li < m->layers; li++) {
		const layer *l = &md->l[li];
		float *kc = r->kc + ((seq * m->layers + li) * md->ctx) * KV;
		float *vc = r->vc + ((seq * m->layers + li) * md->ctx) * KV;
		ref_norm(md, r->p, x, &l->attn_norm, h);
		const weight wq = rows_of(&l->wqkv, 0, Q, H), wk = rows_of(&l->wqkv, Q, KV, H),
		             wv = rows_of(&l->wqkv, Q + KV, KV, H);
		matvec(r->p, &wq, h, q, Q, H);
		matvec(r->p, &wk, h, kc + pos * KV, KV, H);
		matvec(r->p, &wv, h, vc + pos * KV, KV, H);
		for (int64_t i = 0; i < Q; i++)
			q[i] = rnd(dt, q[i]);
		for (int64_t i = 0; i < KV; i++) {
			kc[pos * KV + i] = rnd(dt, kc[pos * KV + i]);
			vc[pos * KV + i] = rnd(dt, vc[pos * KV + i]);
		}
		ref_rope(md, q, m->heads, pos);
		ref_rope(md, kc + pos * KV, m->kv_heads, pos);
		float scale = 1.0f / sqrtf((float)D);
		for (int64_t hh = 0; hh < m->heads; hh++) {
			int64_t kv = hh / grp;
			float mx = -INFINITY, sum = 0.0f;
			for (int64_t j = 0; j <= pos; j++) {
				float d = 0.0f;
				for (int64_t e = 0; e < D; e++)
					d += q[hh * D + e] * kc[j * KV + kv * D + e];
				sc[j] = d * scale;
				mx = fmaxf(mx, sc[j]);
			}
			for (int64_t j = 0; j <= pos; j++) {
				sc[j] = expf(sc[j] - mx);
				sum += sc[j];
			}
			for (int64_t e = 0; e < D; e++) {
				float acc = 0.0f;
				for (int64_t j = 0; j <= pos; j++)
					acc += sc[j] * vc[j * KV + kv * D + e];
				att[hh * D + e] = rnd(dt, acc / sum);
			}
		}
		matvec(r->p, &l->wo, att, t, H, Q);
		for (int64_t i = 0; i < H; i++)
			x[i] = rnd(dt, x[i] + t[i]);
		ref_norm(md, r->p, x, &l->mlp_norm, h);
		matvec(r->p, &l->wgu, h, t, 2 * I, H);
		for (int64_t i = 0; i < 2 * I; i++)
			t[i] = rnd(dt, t[i]);
		for (int64_t i = 0; i < I; i++) {
			float g = t[i];
			t[i] = rnd(dt, g / (1.0f + expf(-g)) * t[I + i]);
		}
		matvec(r->p, &l->wd, t, h, H, I);
		for (int64_t i = 0; i < H; i++)
			x[i] = rnd(dt, x[i] + h[i]);
	}
	ref_norm(md, r->p, x, &md->final_norm, h);
	matvec(r->p, &md->lm_head, h, logits, m->vocab, H);
	for (int64_t i = 0; i < m->vocab; i++)
		logits[i] = rnd(dt, logits[i]);
	free(x), free(h), free(q), free(att), free(t), free(sc);
	return 0;
}

/* ||got - want|| / ||want|| of one row of logits as the daemon stored them. */
static double rel_err(tileops_dtype dt, const uint16_t *got, const float *want, int64_t n)
{
	double num = 0.0, den = 0.0;

	for (int64_t i = 0; i < n; i++) {
		double d = (double)dec(dt, got[i]) - want[i];
		num += d * d;
		den += (double)want[i] * want[i];
	}
	return sqrt(num / (den > 0.0 ? den : 1.0));
}

/*
 * The daemon's token must be one the filters allow on the daemon's logits:
 * the argmax for greedy, among the top_k largest, and within min-p's cut.
 */
static int token_allowed(const args *a, tileops_dtype dt, const uint16_t *lg, int64_t V,
                         int64_t tok)
{
	if (tok < 0 || tok >= V)
		return 0;
	float lt = dec(dt, lg[tok]), mx = -INFINITY;
	int64_t above = 0, first = -1;
	for (int64_t i = 0; i < V; i++) {
		float v = dec(dt, lg[i]);
		if (v > mx) {
			mx = v;
			first = i;
		}
		above += v > lt;
	}
	if (a->temperature == 0.0)
		return tok == first;
	if (a->top_k > 0 && above >= a->top_k)
		return 0;
	if (a->min_p > 0.0 && exp(((double)lt - mx) / a->temperature) < a->min_p * (1.0 - 1e-3))
		return 0;
	return 1;
}

/* ---- the run ---------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double tolerance(tileops_dtype dt, int64_t layers)
{
	/* bf16 keeps 8 bits: each stored tensor may round apart by an ulp */
	double base = dt == TILEOPS_BF16 ? 0.03 : 0.005;
	return base * (layers > 8 ? 2.0 : 1.0);
}

static int usage(void)
{
	fprintf(stderr,
	        "usage: tileops-example-llama [ADDRESS] [--tiny | --8b] [--batch B (1..128)] "
	        "[--prompt P] [--gen N] [--check-steps K] [--check-seqs S] "
	        "[--temperature T] [--top-k K] [--top-p P] [--min-p P] [--seed S] "
	        "[--dtype bf16|f16] [--bench] [--context C]\n");
	return 2;
}

static int parse_args(int argc, char **argv, args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (o[0] != '-') {
			a->address = o;
			continue;
		}
		if (!strcmp(o, "--tiny") || !strcmp(o, "--8b") || !strcmp(o, "--bench")) {
			if (!strcmp(o, "--bench"))
				a->bench = 1;
			else
				a->size = o[2] == 't' ? 1 : 2;
			continue;
		}
		if (!v)
			return -1;
		i++;
		if (!strcmp(o, "--dtype")) {
			if (!strcmp(v, "bf16"))
				a->dtype = TILEOPS_BF16;
			else if (!strcmp(v, "f16"))
				a->dtype = TILEOPS_F16;
			else
				return -1;
			continue;
		}
		if (!strcmp(o, "--temperature") || !strcmp(o, "--top-p") || !strcmp(o, "--min-p")) {
			double d = strtod(v, &end);
			if (*end)
				return -1;
			*(o[2] == 't' && o[3] == 'e' ? &a->temperature
			  : o[2] == 't'              ? &a->top_p
			                             : &a->min_p) = d;
			continue;
		}
		long long n = strtoll(v, &end, 10);
		if (*end || n < 0)
			return -1;
		if (!strcmp(o, "--batch") && n >= 1 && n <= MAX_BUCKET)
			a->batch = n;
		else if (!strcmp(o, "--prompt") && n >= 1)
			a->prompt = n;
		else if (!strcmp(o, "--gen") && n >= 1 && n <= MAX_STEPS)
			a->gen = n;
		else if (!strcmp(o, "--check-steps"))
			a->check_steps = n;
		else if (!strcmp(o, "--context"))
			a->context = n;
		else if (!strcmp(o, "--check-seqs"))
			a->check_seqs = n;
		else if (!strcmp(o, "--top-k"))
			a->top_k = n;
		else if (!strcmp(o, "--seed"))
			a->seed = n;
		else
			return -1;
	}
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* The median of v[0..n) (sorts v). */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int64_t weight_bytes(const model *md)
{
	int64_t n = (int64_t)(md->emb.n + md->final_norm.n + md->lm_head.n);

	for (int64_t i = 0; i < md->m.layers; i++) {
		const layer *l = &md->l[i];
		n += (int64_t)(l->attn_norm.n + l->wqkv.n + l->wo.n + l->mlp_norm.n + l->wgu.n +
		               l->wd.n);
	}
	return n * 2;
}

/* Host-side inputs and outputs of the run. */
typedef struct host {
	int64_t *ids, *pos, *slots, *last, *seeds, *offs, *tok, *hist, *out_tokens;
	int32_t *cu, *bt, *lens;
	uint16_t *lg;
	float *want;
} host;

static void host_free(host *h)
{
	free(h->ids), free(h->pos), free(h->slots), free(h->last);
	free(h->seeds), free(h->offs), free(h->tok), free(h->hist);
	free(h->out_tokens), free(h->cu), free(h->bt), free(h->lens), free(h->lg), free(h->want);
}

/* The slot of position pos of sequence b: its pages are a seeded permutation. */
static int64_t slot_of(const int32_t *bt, int64_t pages_per_seq, int64_t b, int64_t pos)
{
	return (int64_t)bt[b * pages_per_seq + pos / PAGE] * PAGE + pos % PAGE;
}

int main(int argc, char **argv)
{
	args a = { NULL, 0, 0, 0, 0, 2, -1, 0, 0.8, 0.95, 0.0, 50, 1234, TILEOPS_BF16, 0 };
	tileops_connect_options co;
	tileops_server_info info;
	tileops_client *c = NULL;
	static owned own;
	static program pre, dec1;
	pools pl;
	model md;
	acts ap, ad;
	ref r;
	host hb;
	int rv = 1;
	int64_t requests = 0;

	memset(&pl, 0, sizeof(pl));
	memset(&md, 0, sizeof(md));
	memset(&ap, 0, sizeof(ap));
	memset(&ad, 0, sizeof(ad));
	memset(&r, 0, sizeof(r));
	memset(&hb, 0, sizeof(hb));
	if (parse_args(argc, argv, &a) != 0)
		return usage();
	memset(&co, 0, sizeof(co));
	co.address = a.address;
	co.name = "tileops-example-llama";
	if (check(tileops_connect_opts(&co, &c), "connect"))
		return 1;
	tileops_server_info_get(c, &info);
	int gpu = (info.capabilities & TILEOPS_CAP_GPU) != 0;
	int tiny = a.size == 1 || (a.size == 0 && !gpu);
	md.m = tiny ? cfg_tiny : cfg_8b;
	md.dt = a.dtype;
	if (!a.batch)
		a.batch = 4;
	if (!a.prompt)
		a.prompt = tiny ? 12 : 32;
	if (!a.gen)
		a.gen = tiny ? 12 : 64;
	if (a.check_seqs < 0)
		a.check_seqs = tiny ? a.batch : 1;
	if (a.bench || a.context) /* timing only: no reference */
		a.check_seqs = a.check_steps = 0;
	if (a.context)
		a.prompt = 1;
	if (a.check_seqs > a.batch)
		a.check_seqs = a.batch;
	if (a.check_steps > a.gen)
		a.check_steps = a.gen;
	const config *m = &md.m;
	int64_t B = a.batch, P = a.prompt, N = a.gen, V = m->vocab, H = m->hidden;
	int64_t start = a.context ? a.context : P, rows = 1;
	while (rows < B)
		rows *= 2; /* the bucket B runs in: its rows need pages of their own */
	md.pages_per_seq = (start + N + PAGE - 1) / PAGE;
	md.ctx = md.pages_per_seq * PAGE;
	md.num_pages = rows * md.pages_per_seq;
	printf("tileopsd %s, backend %s, device %s\n", info.daemon_version, info.backend,
	       info.device);
	printf("%s: %lld layers, hidden %lld, %lld heads / %lld kv heads of %lld, intermediate "
	       "%lld, vocabulary %lld, %s\n",
	       m->name, (long long)m->layers, (long long)H, (long long)m->heads,
	       (long long)m->kv_heads, (long long)m->head_dim, (long long)m->inter, (long long)V,
	       tileops_dtype_name(md.dt));
	printf("batch %lld, prompt %lld, %lld new tokens; temperature %g, top_k %lld, top_p %g, "
	       "min_p %g, seed %lld; views: one plan per step\n",
	       (long long)B, (long long)P, (long long)N, a.temperature, (long long)a.top_k, a.top_p,
	       a.min_p, (long long)a.seed);

	double t0 = now_s();
	if (pools_make(&pl, m, md.dt, (uint64_t)a.seed) ||
	    model_make(c, &own, &pl, &md, (uint64_t)a.seed))
		goto out;
	/* Prefill: B packed prompts of P tokens; decode: buckets of rows up to 128. */
	ap.R = B * P;
	ap.S = B;
	ad.R = ad.S = MAX_BUCKET;
	if (build(c, &own, &md, &a, &ap, &pre, 1) || build(c, &own, &md, &a, &ad, &dec1, 0))
		goto out;
	const tileops_tensor dec_bucketed[] = {
		ad.ids,          ad.x,  ad.h,      ad.qkv,   ad.q3,     ad.k3,    ad.v3,
		ad.o3,           ad.o2, ad.gu,     ad.act,   ad.pos,    ad.slots, ad.seq_lens,
		ad.block_tables, ad.hn, ad.logits, ad.seeds, ad.history
	};
	dec1.bucketed = dec_bucketed;
	dec1.n_bucketed = sizeof(dec_bucketed) / sizeof(dec_bucketed[0]);
	if (program_end(c, &pre, "llama prefill") || program_end(c, &dec1, "llama decode"))
		goto out;
	printf("weights and plans ready in %.1f s: prefill 1 plan of %d ops, decode 1 plan of %d "
	       "ops\n",
	       now_s() - t0, pre.n, dec1.n);

	/* Host inputs: prompts, pages, seeds. */
	int64_t total_pages = MAX_BUCKET * md.pages_per_seq;
	hb.ids = calloc((size_t)ap.R, 8);
	hb.pos = calloc((size_t)ap.R, 8);
	hb.slots = calloc((size_t)ap.R, 8);
	hb.last = calloc((size_t)B, 8);
	hb.offs = calloc((size_t)B, 8);
	hb.seeds = calloc(MAX_BUCKET, 8);
	hb.tok = calloc(MAX_BUCKET, 8);
	hb.hist = calloc((size_t)(B * HISTORY), 8);
	hb.out_tokens = calloc((size_t)(B * (N + 1)), 8);
	hb.cu = calloc((size_t)B + 1, 4);
	hb.bt = calloc((size_t)total_pages, 4);
	hb.lens = calloc(MAX_BUCKET, 4);
	hb.lg = malloc((size_t)(B * V) * 2);
	hb.want = malloc(sizeof(float) * (size_t)V);
	r.md = &md;
	r.p = &pl;
	r.seqs = a.check_seqs;
	size_t kvn = (size_t)(r.seqs * m->layers * md.ctx * m->kv_heads * m->head_dim);
	r.kc = calloc(kvn ? kvn : 1, sizeof(float));
	r.vc = calloc(kvn ? kvn : 1, sizeof(float));
	if (!hb.ids || !hb.pos || !hb.slots || !hb.last || !hb.seeds || !hb.offs || !hb.cu ||
	    !hb.bt || !hb.lens || !hb.tok || !hb.hist || !hb.out_tokens || !hb.lg || !hb.want ||
	    !r.kc || !r.vc) {
		fprintf(stderr, "tileops-example-llama: out of memory\n");
		goto out;
	}
	int64_t *ids = hb.ids, *pos = hb.pos, *slots = hb.slots, *last = hb.last, *seeds = hb.seeds;
	int64_t *offs = hb.offs, *tok = hb.tok, *hist = hb.hist;
	int64_t *out_tokens = hb.out_tokens;
	int32_t *cu = hb.cu, *bt = hb.bt, *lens = hb.lens;
	uint16_t *lg = hb.lg;
	float *want = hb.want;
	uint64_t rng = (uint64_t)a.seed * 31 + 7;
	for (int64_t i = 0; i < md.num_pages; i++)
		bt[i] = (int32_t)i;
	for (int64_t i = md.num_pages - 1; i > 0; i--) { /* pages in any order */
		int64_t j = (int64_t)(rng_next(&rng) % (uint64_t)(i + 1));
		int32_t t = bt[i];
		bt[i] = bt[j];
		bt[j] = t;
	}
	/* Rows past the bucket are never run with a length; they name valid pages anyway. */
	for (int64_t i = md.num_pages; i < total_pages; i++)
		bt[i] = bt[i % md.num_pages];
	for (int64_t b = 0; b < B; b++) {
		for (int64_t t = 0; t < P; t++) {
			int64_t e = b * P + t;
			ids[e] = (int64_t)(rng_next(&rng) % (uint64_t)V);
			pos[e] = t;
			slots[e] = slot_of(bt, md.pages_per_seq, b, t);
		}
		cu[b + 1] = (int32_t)((b + 1) * P);
		last[b] = (b + 1) * P - 1;
		offs[b] = P - 1;
	}
	for (int64_t b = 0; b < MAX_BUCKET; b++)
		seeds[b] = a.seed + 1000003 * b;
	if (check(tileops_tensor_write(c, ap.ids, 0, ids, (size_t)ap.R * 8), "write ids") ||
	    check(tileops_tensor_write(c, ap.pos, 0, pos, (size_t)ap.R * 8), "write pos") ||
	    check(tileops_tensor_write(c, ap.slots, 0, slots, (size_t)ap.R * 8), "write slots") ||
	    check(tileops_tensor_write(c, ap.cu_seqlens, 0, cu, (size_t)(B + 1) * 4), "write cu") ||
	    check(tileops_tensor_write(c, ap.last, 0, last, (size_t)B * 8), "write last") ||
	    check(tileops_tensor_write(c, ap.offsets, 0, offs, (size_t)B * 8), "write offsets") ||
	    check(tileops_tensor_write(c, ap.seeds, 0, seeds, (size_t)B * 8), "write seeds") ||
	    check(tileops_tensor_write(c, ad.seeds, 0, seeds, MAX_BUCKET * 8), "write seeds") ||
	    check(tileops_tensor_write(c, ad.block_tables, 0, bt, (size_t)total_pages * 4),
	          "write block tables"))
		goto out;

	/* The prompt (a bench runs it 5 times: the first captures). */
	int failed = 0;
	double worst = 0.0, tp = 0.0, tps[5];
	int runs = a.bench ? 5 : 1;
	if (a.context) {
		for (int64_t b = 0; b < B; b++)
			tok[b] = (int64_t)(rng_next(&rng) % (uint64_t)V);
		goto decode;
	}
	for (int k = 0; k < runs; k++) {
		double t1 = now_s();
		if (program_run(&pre, ap.R, &requests) ||
		    check(tileops_tensor_read(c, ap.tokens, 0, tok, (size_t)B * 8), "read tokens"))
			goto out;
		tps[k] = now_s() - t1;
	}
	tp = runs > 1 ? median(tps + 1, runs - 1) : tps[0];
	if (a.bench)
		printf("BENCH {\"mode\": \"prefill\", \"batch\": %lld, \"tokens\": %lld, \"ms\": "
		       "%.3f, \"tokens_per_s\": %.1f, \"weight_bytes\": %lld}\n",
		       (long long)B, (long long)ap.R, 1e3 * tp, (double)ap.R / tp,
		       (long long)weight_bytes(&md));
	if (check(tileops_tensor_read(c, ap.logits, 0, lg, (size_t)(B * V) * 2), "read logits"))
		goto out;
	for (int64_t b = 0; b < r.seqs; b++) {
		for (int64_t t = 0; t < P; t++)
			if (ref_token(&r, b, ids[b * P + t], t, want))
				goto out;
		double e = rel_err(md.dt, lg + b * V, want, V);
		worst = fmax(worst, e);
		failed |= e > tolerance(md.dt, m->layers);
	}
	for (int64_t b = 0; b < B; b++) {
		failed |= !token_allowed(&a, md.dt, lg + b * V, V, tok[b]);
		out_tokens[b * (N + 1)] = tok[b];
	}
	printf("prefill: %lld tokens in %.3f s (%.0f tokens/s); logits of %lld sequence(s) "
	       "against the reference: worst relative error %.3g\n",
	       (long long)ap.R, tp, (double)ap.R / tp, (long long)r.seqs, worst);

	/*
	 * Decode: the sampled tokens are already the next step's ids on the
	 * daemon, and decode_advance moves the lengths on from the prompt's:
	 * written once here (0 for a bucket's padding rows).
	 */
decode:
	for (int64_t b = 0; b < MAX_BUCKET; b++)
		lens[b] = b < B ? (int32_t)start : 0;
	if (check(tileops_tensor_write(c, ad.ids, 0, tok, (size_t)B * 8), "write ids") ||
	    check(tileops_tensor_write(c, ad.seq_lens, 0, lens, MAX_BUCKET * 4), "write lens"))
		goto out;
	double td = 0.0, t_span = 0.0, t_rest = 0.0;
	/* known: out_tokens[b * (N + 1) + 0 .. known] were read from the daemon already. */
	int64_t timed = 0, req0 = 0, ran = 0, known = a.context ? -1 : 0;
	for (int64_t s = 0; s < N; s++) {
		int64_t p = start + s; /* the position of the token fed: the one sampled last */
		if (p >= md.ctx)
			break;
		int check_now = s < a.check_steps;
		int64_t rq = requests;
		if (!check_now && timed == 0)
			t_span = now_s();
		if (program_run(&dec1, B, &requests))
			goto out;
		ran = s + 1;
		if (!check_now) {
			req0 = requests - rq;
			/*
			 * Steps return once launched and queue behind each other: the
			 * span of the timed steps ends with a sync. The first timed step
			 * of a bucket captures: it is waited for alone, and the bench's
			 * step time is the span after it.
			 */
			if (timed++ == 0) {
				if (check(tileops_sync(c), "sync"))
					goto out;
				requests++;
				t_rest = now_s();
			}
			continue;
		}
		if (check(tileops_tensor_read(c, ad.tokens, 0, tok, (size_t)B * 8),
		          "read tokens") ||
		    check(tileops_tensor_read(c, ad.logits, 0, lg, (size_t)(B * V) * 2),
		          "read logits"))
			goto out;
		for (int64_t b = 0; b < B; b++) {
			failed |= !token_allowed(&a, md.dt, lg + b * V, V, tok[b]);
			out_tokens[b * (N + 1) + s + 1] = tok[b];
		}
		known = s + 1;
		double w2 = 0.0;
		for (int64_t b = 0; b < r.seqs; b++) {
			if (ref_token(&r, b, out_tokens[b * (N + 1) + s], p, want))
				goto out;
			double e = rel_err(md.dt, lg + b * V, want, V);
			w2 = fmax(w2, e);
			failed |= e > tolerance(md.dt, m->layers);
		}
		printf("decode step %lld: logits against the reference: worst relative error "
		       "%.3g\n",
		       (long long)s, w2);
	}
	if (timed > 0) {
		if (check(tileops_sync(c), "sync"))
			goto out;
		requests++;
		double t_end = now_s();
		td = t_end - t_span;
		t_rest = t_end - t_rest;
	}
	/*
	 * The tokens fed at steps 0 .. ran-1 are in the history at their
	 * positions, the last step's samples in the ids. Those read during
	 * the checked steps must be the same.
	 */
	if (ran > 0 &&
	    (check(tileops_tensor_read(c, ad.history, 0, hist, (size_t)(B * HISTORY) * 8),
	           "read history") ||
	     check(tileops_tensor_read(c, ad.tokens, 0, tok, (size_t)B * 8), "read tokens")))
		goto out;
	for (int64_t b = 0; b < B; b++)
		for (int64_t s = a.context ? 1 : 0; s <= ran && ran > 0; s++) {
			int64_t v = s < ran ? hist[b * HISTORY + (start + s) % HISTORY] : tok[b];
			int64_t *o = &out_tokens[b * (N + 1) + s];
			if (s <= known && *o != v) {
				fprintf(stderr,
				        "tileops-example-llama: sequence %lld, step %lld: the "
				        "history "
				        "holds token %lld, the step sampled %lld\n",
				        (long long)b, (long long)s, (long long)v, (long long)*o);
				failed = 1;
			}
			*o = v;
		}
	for (int64_t b = 0; b < B && b < 4; b++) {
		printf("sequence %lld:", (long long)b);
		for (int64_t s = 0; s <= N && s < 16; s++)
			printf(" %lld", (long long)out_tokens[b * (N + 1) + s]);
		printf("%s\n", N >= 16 ? " ..." : "");
	}
	if (timed > 0)
		printf("decode: %lld steps of batch %lld in %.3f s: %.1f ms a step, %.0f tokens/s "
		       "(%lld request%s a step; a sync after the first and the last)\n",
		       (long long)timed, (long long)B, td, 1e3 * td / (double)timed,
		       (double)(timed * B) / td, (long long)req0, req0 == 1 ? "" : "s");
	/* The steps after the first (which captures), as one span: they overlap. */
	if (a.context && timed > 1) {
		double per = t_rest / (double)(timed - 1);
		printf("BENCH {\"mode\": \"decode\", \"batch\": %lld, \"context\": %lld, "
		       "\"step_ms\": %.3f, \"tokens_per_s\": %.1f, \"requests_per_step\": %lld, "
		       "\"weight_bytes\": %lld}\n",
		       (long long)B, (long long)a.context, 1e3 * per, (double)B / per,
		       (long long)req0, (long long)weight_bytes(&md));
	}
	rv = failed ? 1 : 0;
	printf("tolerance %.2g, tokens within the filters: %s\n", tolerance(md.dt, m->layers),
	       rv == 0 ? "PASS" : "FAIL");
out:
	if (rv)
		printf("FAIL\n");
	program_free(&pre);
	program_free(&dec1);
	for (int i = own.n - 1; i >= 0; i--)
		tileops_tensor_free(c, own.t[i]);
	tileops_close(c);
	pools_free(&pl);
	host_free(&hb);
	free(md.l);
	free(md.rope_host);
	free(r.kc);
	free(r.vc);
	return rv;
}
