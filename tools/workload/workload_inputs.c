/*
 * workload_inputs.c - the rules of workload_inputs.h, one function an
 * input name, each writing through the tensor's strides so that padded
 * rows keep their padding.
 */
#include "workload_inputs.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Positions when no cos/sin cache bounds them: Llama 3.1's context length. */
#define MAX_POSITIONS 131072
/* Llama 3's vocabulary: the token ids of decode_advance's tokens and history. */
#define LLAMA3_VOCAB 128256
/* The largest finite fp8 e4m3 value: a scale of amax / 448 saturates nothing. */
#define FP8_MAX 448.0

/* One input to fill, and where its messages go. */
typedef struct job {
	const workload_call *c;
	int i;
	tk_tensor *t;
	const char *name;
	workload_fill fill;
	uint64_t *rng;
	char *how, *err;
	size_t howlen, errlen;
} job;

static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- random values and elements ------------------------------------------------ */

static uint64_t rand_u64(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dULL;
}

static int64_t rand_below(uint64_t *s, int64_t n)
{
	return n > 0 ? (int64_t)(rand_u64(s) % (uint64_t)n) : 0;
}

static double rand_uniform(uint64_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (double)(rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* The offset in elements of logical element e (row-major) of t. */
static int64_t offset_of(const tk_tensor *t, int64_t e)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		off += (e % t->shape[d]) * t->stride[d];
		e /= t->shape[d];
	}
	return off;
}

static void put_int(tk_tensor *t, int64_t e, int64_t v)
{
	if (t->dtype == TK_I32)
		((int32_t *)t->data)[offset_of(t, e)] = (int32_t)v;
	else
		((int64_t *)t->data)[offset_of(t, e)] = v;
}

static int64_t get_int(const tk_tensor *t, int64_t e)
{
	if (t->dtype == TK_I32)
		return ((const int32_t *)t->data)[offset_of(t, e)];
	return ((const int64_t *)t->data)[offset_of(t, e)];
}

static void put_float(tk_tensor *t, int64_t e, double v)
{
	int64_t o = offset_of(t, e);

	if (t->dtype == TK_F32)
		((float *)t->data)[o] = (float)v;
	else if (t->dtype == TK_F16)
		((uint16_t *)t->data)[o] = tk_f32_to_f16((float)v);
	else
		((uint16_t *)t->data)[o] = tk_f32_to_bf16((float)v);
}

static double get_float(const tk_tensor *t, int64_t e)
{
	int64_t o = offset_of(t, e);

	if (t->dtype == TK_F32)
		return ((const float *)t->data)[o];
	if (t->dtype == TK_F16)
		return tk_f16_to_f32(((const uint16_t *)t->data)[o]);
	return tk_bf16_to_f32(((const uint16_t *)t->data)[o]);
}

static int is_int(tk_dtype dt)
{
	return dt == TK_I32 || dt == TK_I64;
}

static int is_float(tk_dtype dt)
{
	return dt == TK_F32 || dt == TK_F16 || dt == TK_BF16;
}

/* ---- the call's other tensors and params ----------------------------------------- */

static int input_index(const workload_call *c, const char *name)
{
	for (int i = 0; i < c->op->n_in; i++)
		if ((c->given >> i & 1u) && !strcmp(c->op->tensors[i].name, name))
			return i;
	return -1;
}

/* The call's input called `name`, or NULL when the op has none or the call leaves it out. */
static const tk_tensor *input(const workload_call *c, const char *name)
{
	int i = input_index(c, name);

	return i < 0 ? NULL : &c->t[i];
}

/* As input, but a rule cannot do without it: NULL with a message. */
static const tk_tensor *need(job *j, const char *name)
{
	const tk_tensor *t = input(j->c, name);

	if (!t)
		say(j->err, j->errlen, "%s: input %s is made from %s, which the call does not give",
		    j->c->op->name, j->name, name);
	return t;
}

/* Dim d of t, or 0 when t has no such dim. */
static int64_t dim(const tk_tensor *t, int d)
{
	return d < t->ndim ? t->shape[d] : 0;
}

/* The value of param `name` as an integer; 0 when the op has no such param. */
static int64_t param_int(const workload_call *c, const char *name)
{
	for (int k = 0; k < c->op->n_params; k++) {
		const tk_param *v = &c->params[k];

		if (strcmp(c->op->params[k].name, name) != 0)
			continue;
		return v->kind == TK_PARAM_FLOAT  ? (int64_t)v->v.f
		       : v->kind == TK_PARAM_BOOL ? (int64_t)v->v.b
		                                  : v->v.i;
	}
	return 0;
}

static int64_t *alloc_values(job *j, int64_t n)
{
	int64_t *v = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));

	if (!v)
		say(j->err, j->errlen, "%s: input %s: out of memory", j->c->op->name, j->name);
	return v;
}

/*
 * Items 0 .. n-1 to draw without repeats (draw_distinct); NULL after a
 * message when out of memory.
 */
static int64_t *alloc_pool(job *j, int64_t n)
{
	int64_t *pool = alloc_values(j, n);

	for (int64_t k = 0; pool && k < n; k++)
		pool[k] = k;
	return pool;
}

/* The next item of pool[0 .. n) drawn at random, none twice: *used counts those drawn (< n). */
static int64_t draw_distinct(int64_t *pool, int64_t n, int64_t *used, uint64_t *rng)
{
	int64_t r = *used + rand_below(rng, n - *used), x = pool[r];

	pool[r] = pool[*used];
	pool[(*used)++] = x;
	return x;
}

/* ---- the rules ------------------------------------------------------------------- */

static int fill_positions(job *j)
{
	const tk_tensor *cache = input(j->c, "cos_sin_cache");
	int64_t limit = cache ? dim(cache, 0) : MAX_POSITIONS, n = tk_numel(j->t);

	for (int64_t e = 0; e < n; e++)
		put_int(j->t, e, rand_below(j->rng, limit));
	say(j->how, j->howlen, "random below %lld", (long long)limit);
	return 1;
}

/*
 * decode_advance's lengths (no cache among its inputs): the capacity is
 * block_tables.shape[1] * page_size. Roofline: every row active, half full.
 * Varied: every 8th row padding (0, or -2), every 8th one past the last
 * page (slot -1), every 8th on a page boundary, the others at random up to
 * the last slot of the table.
 */
static int fill_advance_lens(job *j, const tk_tensor *bt)
{
	int64_t ps = param_int(j->c, "page_size"), n = tk_numel(j->t);
	int64_t cap = dim(bt, 1) * (ps > 0 ? ps : 1);

	for (int64_t b = 0; b < n; b++) {
		int64_t v = cap / 2 > 0 ? cap / 2 : 1;
		if (j->fill == WORKLOAD_FILL_VARIED) {
			int64_t pages = dim(bt, 1) > 0 ? dim(bt, 1) : 1;
			v = b % 8 == 3   ? -2 * (b % 16 == 3)
			    : b % 8 == 5 ? cap + 1 + rand_below(j->rng, 2 * (ps > 0 ? ps : 1))
			    : b % 8 == 6 ? (1 + rand_below(j->rng, pages)) * ps
			                 : 1 + rand_below(j->rng, cap > 1 ? cap - 1 : 1);
		}
		put_int(j->t, b, v);
	}
	if (j->fill == WORKLOAD_FILL_ROOFLINE)
		say(j->how, j->howlen, "every row active at %lld of %lld", (long long)(cap / 2),
		    (long long)cap);
	else
		say(j->how, j->howlen,
		    "random in [1, %lld), every 8th padding, past the table or on a page boundary",
		    (long long)cap);
	return 1;
}

static int fill_seq_lens(job *j)
{
	const tk_tensor *bt = input(j->c, "block_tables");

	if (!input(j->c, "k_cache") && bt && param_int(j->c, "page_size") > 0)
		return fill_advance_lens(j, bt);
	const tk_tensor *k = need(j, "k_cache");
	const tk_tensor *q = input(j->c, "q");
	int64_t n = tk_numel(j->t);

	if (!k)
		return -1;
	int64_t cap = dim(k, 1) * (bt ? dim(bt, 1) : 1);
	if (j->fill == WORKLOAD_FILL_ROOFLINE) {
		for (int64_t b = 0; b < n; b++)
			put_int(j->t, b, cap);
		say(j->how, j->howlen, "every sequence full: %lld", (long long)cap);
		return 1;
	}
	/* The T new tokens are in the cache: a length below T leaves rows that see nothing. */
	int64_t t = q && q->ndim == 4 ? q->shape[1] : 1, lo = t < cap ? t : cap;
	for (int64_t b = 0; b < n; b++)
		put_int(j->t, b, b == 0 ? cap : lo + rand_below(j->rng, cap - lo + 1));
	say(j->how, j->howlen, "the first full (%lld), the others in [%lld, %lld]", (long long)cap,
	    (long long)lo, (long long)cap);
	return 1;
}

/*
 * decode_advance's block tables: a random permutation of as many pages as
 * entries; varied, every 16th entry -1 (no page), whose slots must be -1.
 */
static int fill_advance_pages(job *j)
{
	int64_t n = tk_numel(j->t), used = 0;
	int64_t *pool = alloc_pool(j, n);

	if (!pool)
		return -1;
	for (int64_t e = 0; e < n; e++) {
		int64_t page = draw_distinct(pool, n, &used, j->rng);
		put_int(j->t, e, j->fill == WORKLOAD_FILL_VARIED && e % 16 == 9 ? -1 : page);
	}
	free(pool);
	say(j->how, j->howlen, "a random permutation of %lld pages%s", (long long)n,
	    j->fill == WORKLOAD_FILL_VARIED ? ", every 16th entry -1" : "");
	return 1;
}

static int fill_block_tables(job *j)
{
	const tk_tensor *k = input(j->c, "k_cache");
	int64_t n = tk_numel(j->t), used = 0;

	/* decode_advance's tables name pages of no cache of its own: one for each entry. */
	if (!k && param_int(j->c, "page_size") > 0)
		return fill_advance_pages(j);
	if (!(k = need(j, "k_cache")))
		return -1;
	int64_t pages = dim(k, 0);
	if (n > 0 && pages <= 0) {
		say(j->err, j->errlen, "%s: block_tables has entries but k_cache has no pages",
		    j->c->op->name);
		return -1;
	}
	int64_t *pool = alloc_pool(j, pages);
	if (!pool)
		return -1;
	/* No page twice until all are used; then the pool again, from the order it is in. */
	for (int64_t e = 0; e < n; e++) {
		if (used == pages)
			used = 0;
		put_int(j->t, e, draw_distinct(pool, pages, &used, j->rng));
	}
	free(pool);
	say(j->how, j->howlen, "a random permutation of %lld pages", (long long)pages);
	return 1;
}

static int fill_slot_mapping(job *j)
{
	const tk_tensor *k = need(j, "k_cache");
	int64_t n = tk_numel(j->t), used = 0;

	if (!k)
		return -1;
	int64_t cap = dim(k, 0) * dim(k, 1);
	if (j->fill == WORKLOAD_FILL_ROOFLINE) {
		int64_t stride = n > 0 && cap >= n ? cap / n : 1;

		for (int64_t e = 0; e < n; e++)
			put_int(j->t, e, ((e + 1) * stride - 1) % (cap > 0 ? cap : 1));
		say(j->how, j->howlen, "slots %lld apart in a cache of %lld", (long long)stride,
		    (long long)cap);
		return 1;
	}
	int64_t *pool = alloc_pool(j, cap);
	if (!pool)
		return -1;
	for (int64_t e = 0; e < n; e++)
		put_int(j->t, e,
		        e % 16 == 7 || used == cap ? -1 : draw_distinct(pool, cap, &used, j->rng));
	free(pool);
	say(j->how, j->howlen, "distinct random slots of %lld, every 16th token padding (-1)",
	    (long long)cap);
	return 1;
}

/*
 * Split `total` tokens into n sequences of at most `most` each, summing to
 * total when they can (else every sequence full): an even split, then, when
 * varied, lengths moved between random pairs, so some are short or empty.
 */
static void split_lengths(int64_t *len, int64_t n, int64_t total, int64_t most, int varied,
                          uint64_t *rng)
{
	int64_t left = total;

	for (int64_t b = 0; b < n; b++) {
		len[b] = total / n < most ? total / n : most;
		left -= len[b];
	}
	for (int64_t b = 0; b < n && left > 0; b++) {
		int64_t add = most - len[b] < left ? most - len[b] : left;
		len[b] += add;
		left -= add;
	}
	for (int64_t i = 0; varied && i < 4 * n; i++) {
		int64_t a = rand_below(rng, n), b = rand_below(rng, n);
		int64_t room = most - len[b] < len[a] ? most - len[b] : len[a];
		int64_t move = rand_below(rng, room + 1);
		len[a] -= move;
		len[b] += move;
	}
}

/*
 * An earlier cu_seqlens input, filled, of n offsets over `tokens` tokens
 * and no sequence longer than `most`; or NULL.
 */
static const tk_tensor *same_split(const job *j, int64_t n, int64_t tokens, int64_t most)
{
	const workload_call *c = j->c;

	for (int i = 0; i < j->i; i++) {
		const char *name = c->op->tensors[i].name;
		const tk_tensor *packed, *t = &c->t[i];
		int fits = 1;

		if (!(c->given >> i & 1u) || strncmp(name, "cu_seqlens_", 11) != 0 || !t->data ||
		    !is_int(t->dtype) || tk_numel(t) != n)
			continue;
		packed = input(c, name + 11);
		for (int64_t e = 0; e + 1 < n; e++)
			fits &= get_int(t, e + 1) - get_int(t, e) <= most;
		if (packed && dim(packed, 0) == tokens && fits)
			return t;
	}
	return NULL;
}

static int fill_cu_seqlens(job *j)
{
	const char *packed_name = j->name + strlen("cu_seqlens_");
	const tk_tensor *packed = need(j, packed_name), *same;
	int64_t n = tk_numel(j->t), b = n - 1, offset = 0;
	char max_name[64];

	if (!packed)
		return -1;
	if (n < 1)
		return 1; /* no offsets to write */
	int64_t tokens = dim(packed, 0);
	snprintf(max_name, sizeof(max_name), "max_seqlen_%s", packed_name);
	int64_t most = param_int(j->c, max_name) > 0 ? param_int(j->c, max_name) : tokens;
	int64_t *len = alloc_values(j, b);
	if (!len)
		return -1;
	if ((same = same_split(j, n, tokens, most)))
		for (int64_t e = 0; e < b; e++)
			len[e] = get_int(same, e + 1) - get_int(same, e);
	else if (b > 0)
		split_lengths(len, b, tokens, most, j->fill == WORKLOAD_FILL_VARIED, j->rng);
	for (int64_t e = 0; e <= b; e++) {
		put_int(j->t, e, offset);
		if (e < b)
			offset += len[e];
	}
	free(len);
	if (j->fill == WORKLOAD_FILL_ROOFLINE)
		say(j->how, j->howlen, "%lld sequences of %lld %s tokens", (long long)b,
		    (long long)(b > 0 ? tokens / b : 0), packed_name);
	else if (same)
		say(j->how, j->howlen, "the sequences of %s",
		    j->c->op->tensors[same - j->c->t].name);
	else
		say(j->how, j->howlen, "%lld sequences of at most %lld of %lld %s tokens",
		    (long long)b, (long long)most, (long long)tokens, packed_name);
	return 1;
}

static int fill_input_scale(job *j)
{
	const tk_tensor *x = need(j, "x");
	double amax = 0.0;

	if (!x)
		return -1;
	if (!x->data || !is_float(x->dtype)) {
		say(j->err, j->errlen,
		    "%s: input_scale is made from x's values, which are not filled",
		    j->c->op->name);
		return -1;
	}
	for (int64_t e = 0; e < tk_numel(x); e++)
		amax = fmax(amax, fabs(get_float(x, e)));
	double scale = (amax > 0.0 ? amax / FP8_MAX : 1.0) * rand_uniform(j->rng, 0.5, 2.0);
	for (int64_t e = 0; e < tk_numel(j->t); e++)
		put_float(j->t, e, scale);
	say(j->how, j->howlen, "%.6g (amax(x) %.6g / 448, times a factor in [0.5, 2])", scale,
	    amax);
	return 1;
}

/*
 * Row indices into the op's first input (embedding's table, gather_rows's
 * x): random rows; varied, every 8th is out of range (-1, or one past the
 * end), whose output row must be zeros.
 */
static int fill_row_index(job *j)
{
	const tk_tensor *src = &j->c->t[0];
	int64_t rows = dim(src, 0), n = tk_numel(j->t);

	if (j->fill == WORKLOAD_FILL_ROOFLINE) {
		for (int64_t e = 0; e < n; e++)
			put_int(j->t, e, rows > 0 ? (e * 7919) % rows : -1);
		say(j->how, j->howlen, "rows spread over %lld", (long long)rows);
		return 1;
	}
	for (int64_t e = 0; e < n; e++) {
		int64_t v = rand_below(j->rng, rows);
		if (e % 8 == 3 || rows == 0)
			v = e % 16 == 3 ? -1 : rows;
		put_int(j->t, e, v);
	}
	say(j->how, j->howlen, "random rows of %lld, every 8th out of range (-1 or %lld)",
	    (long long)rows, (long long)rows);
	return 1;
}

/*
 * decode_advance's tokens and history: token ids below Llama 3's
 * vocabulary, so that the tokens written into the history stand out from
 * what it held.
 */
static int fill_tokens(job *j)
{
	int64_t n = tk_numel(j->t);

	for (int64_t e = 0; e < n; e++)
		put_int(j->t, e, rand_below(j->rng, LLAMA3_VOCAB));
	say(j->how, j->howlen, "random token ids below %d", LLAMA3_VOCAB);
	return 1;
}

/* sample's per-row settings: values that exercise each filter, some rows off. */
static int fill_sample_setting(job *j)
{
	int64_t n = tk_numel(j->t);
	const char *nm = j->name;

	for (int64_t e = 0; e < n; e++) {
		if (!strcmp(nm, "top_ks"))
			put_int(j->t, e, e % 4 == 0 ? 0 : 1 + rand_below(j->rng, 64));
		else if (!strcmp(nm, "seeds"))
			put_int(j->t, e, (int64_t)(rand_u64(j->rng) >> 1));
		else if (!strcmp(nm, "offsets"))
			put_int(j->t, e, rand_below(j->rng, (int64_t)1 << 20));
		else if (!strcmp(nm, "temperatures"))
			put_float(j->t, e, e % 5 == 0 ? 0.0 : rand_uniform(j->rng, 0.1, 2.0));
		else if (!strcmp(nm, "top_ps"))
			put_float(j->t, e, e % 4 == 0 ? 1.0 : rand_uniform(j->rng, 0.05, 1.0));
		else
			put_float(j->t, e, e % 4 == 0 ? 0.0 : rand_uniform(j->rng, 0.0, 0.3));
	}
	say(j->how, j->howlen, "per-row %s, some rows off", nm);
	return 1;
}

/*
 * The moe family's routing. topk_ids: distinct experts per token drawn at
 * random (varied: every 16th -1, an expert outside the layer). The grouped
 * GEMMs' sorted_ids, expert_ids and num_post_padded are one moe_align layout
 * (flat id f on a hashed expert, every 4th expert left empty) that each of
 * the three writes its part of, from the shapes alone, so they agree. inv:
 * places in y at random (varied: every 16th -1).
 */
static int64_t moe_expert_of(int64_t f, int64_t experts)
{
	int64_t e = (int64_t)(((uint64_t)f * 2654435761u) >> 8) % experts;

	return experts > 1 && e % 4 == 1 ? (e + 1) % experts : e;
}

static int fill_moe(job *j)
{
	int64_t n = tk_numel(j->t);

	if (!strcmp(j->name, "topk_ids") || !strcmp(j->name, "inv")) {
		int is_ids = !strcmp(j->name, "topk_ids");
		const tk_tensor *y = is_ids ? NULL : need(j, "y");
		int64_t k = is_ids ? dim(j->t, 1) : 0, experts = param_int(j->c, "num_experts");
		int64_t range = is_ids ? experts : (y ? dim(y, 0) : 0);
		int64_t *pool = is_ids ? alloc_pool(j, experts) : NULL, used = 0;
		if ((!is_ids && !y) || (is_ids && !pool))
			return -1;
		for (int64_t e = 0; e < n; e++) {
			int64_t v;
			if (is_ids) {
				if (e % k == 0)
					used = 0;
				v = used < experts ? draw_distinct(pool, experts, &used, j->rng)
				                   : -1;
			} else {
				v = range > 0 ? rand_below(j->rng, range) : -1;
			}
			if (j->fill != WORKLOAD_FILL_ROOFLINE && e % 16 == 7)
				v = -1;
			put_int(j->t, e, v);
		}
		free(pool);
		say(j->how, j->howlen, "%s", is_ids ? "distinct experts per token" : "places in y");
		return 1;
	}
	const tk_tensor *w = need(j, "w"), *sid = need(j, "sorted_ids");
	int64_t bm = param_int(j->c, "block_m");
	if (!w || !sid || bm < 1)
		return -1;
	int64_t experts = dim(w, 0), P = dim(sid, 0), tk = P - experts * (bm - 1);
	int64_t nb = (P + bm - 1) / bm;
	int64_t *start = alloc_values(j, experts + 1);
	if (!start || tk < 0) {
		free(start);
		say(j->err, j->errlen, "%s: sorted_ids is smaller than E * (block_m - 1)",
		    j->c->op->name);
		return -1;
	}
	for (int64_t f = 0; f < tk; f++)
		start[moe_expert_of(f, experts) + 1]++;
	for (int64_t e = 0; e < experts; e++)
		start[e + 1] = start[e] + (start[e + 1] + bm - 1) / bm * bm;
	if (!strcmp(j->name, "num_post_padded")) {
		put_int(j->t, 0, start[experts]);
	} else if (!strcmp(j->name, "expert_ids")) {
		for (int64_t b = 0; b < n; b++)
			put_int(j->t, b, experts);
		for (int64_t e = 0; e < experts; e++)
			for (int64_t b = start[e] / bm; b < start[e + 1] / bm && b < nb; b++)
				put_int(j->t, b, e);
	} else {
		for (int64_t p = 0; p < n; p++)
			put_int(j->t, p, tk);
		for (int64_t f = 0; f < tk; f++) {
			int64_t e = moe_expert_of(f, experts);
			put_int(j->t, start[e]++, f);
		}
	}
	free(start);
	say(j->how, j->howlen, "a moe_align layout of %lld flat ids over %lld experts",
	    (long long)tk, (long long)experts);
	return 1;
}

/* The rules by input name (a prefix for cu_seqlens_X) and the dtypes they write. */
static const struct {
	const char *name;
	int prefix;
	int floats; /* 0: i32 and i64; 1: f32, f16 and bf16 */
	int (*fill)(job *j);
} rules[] = {
	{ "positions", 0, 0, fill_positions },
	{ "seq_lens", 0, 0, fill_seq_lens },
	{ "block_tables", 0, 0, fill_block_tables },
	{ "slot_mapping", 0, 0, fill_slot_mapping },
	{ "cu_seqlens_", 1, 0, fill_cu_seqlens },
	{ "input_scale", 0, 1, fill_input_scale },
	{ "ids", 0, 0, fill_row_index },
	{ "index", 0, 0, fill_row_index },
	{ "top_ks", 0, 0, fill_sample_setting },
	{ "seeds", 0, 0, fill_sample_setting },
	{ "offsets", 0, 0, fill_sample_setting },
	{ "temperatures", 0, 1, fill_sample_setting },
	{ "top_ps", 0, 1, fill_sample_setting },
	{ "min_ps", 0, 1, fill_sample_setting },
	{ "topk_ids", 0, 0, fill_moe },
	{ "inv", 0, 0, fill_moe },
	{ "sorted_ids", 0, 0, fill_moe },
	{ "expert_ids", 0, 0, fill_moe },
	{ "num_post_padded", 0, 0, fill_moe },
	{ "tokens", 0, 0, fill_tokens },
	{ "history", 0, 0, fill_tokens },
};

int workload_fill_input(const workload_call *c, int i, workload_fill fill, uint64_t *rng, char *how,
                        size_t howlen, char *err, size_t errlen)
{
	job j = { c, i, NULL, NULL, fill, rng, how, err, howlen, errlen };

	if (how && howlen)
		how[0] = '\0';
	if (!c || !c->op || !c->t || !c->params || !rng || i < 0 || i >= c->op->n_in ||
	    !(c->given >> i & 1u)) {
		say(err, errlen, "workload_fill_input: input %d is not one of the call's", i);
		return -1;
	}
	j.t = &c->t[i];
	j.name = c->op->tensors[i].name;
	for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
		size_t n = strlen(rules[r].name);

		if ((rules[r].prefix ? strncmp(j.name, rules[r].name, n)
		                     : strcmp(j.name, rules[r].name)) ||
		    !(rules[r].floats ? is_float(j.t->dtype) : is_int(j.t->dtype)))
			continue;
		if (!j.t->data) {
			say(err, errlen, "%s: input %s has no buffer to fill", c->op->name, j.name);
			return -1;
		}
		return rules[r].fill(&j);
	}
	return 0;
}
