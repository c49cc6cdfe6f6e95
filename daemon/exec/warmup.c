/*
 * warmup.c - reading the warm-up file (see warmup.h for the format's
 * purpose, deploy/warmup.yaml for the format itself).
 */
#include "warmup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

typedef struct reader {
	yaml_document_t doc;
	const char *path;
	char *err;
	size_t errlen;
} reader;

static int fail(reader *r, const yaml_node_t *n, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int fail(reader *r, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(r->err, r->errlen, "%s:%lu: %s", r->path,
	         n ? (unsigned long)n->start_mark.line + 1 : 0ul, msg);
	return -1;
}

static yaml_node_t *node(reader *r, int id)
{
	return yaml_document_get_node(&r->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int copy_name(reader *r, const yaml_node_t *n, char *dst, const char *what)
{
	const char *s = scalar(n);
	if (!s || !*s || strlen(s) >= WARM_NAME_MAX)
		return fail(r, n, "%s must be a name of 1 to %d characters", what,
		            WARM_NAME_MAX - 1);
	snprintf(dst, WARM_NAME_MAX, "%s", s);
	return 0;
}

static int parse_int(reader *r, const yaml_node_t *n, int64_t lo, int64_t *out, const char *what)
{
	const char *s = scalar(n);
	char *end;
	errno = 0;
	long long v = s ? strtoll(s, &end, 10) : 0;
	if (!s || !*s || *end || errno || v < lo)
		return fail(r, n, "%s must be an integer >= %lld", what, (long long)lo);
	*out = v;
	return 0;
}

/* ---- walking the document ------------------------------------------------------ */

/* 0 when n is a node of `type`, else -1 after fail() with msg (what n must be). */
static int expect(reader *r, const yaml_node_t *n, yaml_node_type_t type, const char *msg)
{
	if (n && n->type == type)
		return 0;
	return fail(r, n, "%s", msg);
}

/* One key: value pair of a mapping (key NULL when it is not a scalar); 0 or -1 after fail(). */
typedef int (*pair_fn)(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg);

/* Each pair of mapping n through fn, in order, until one fails. */
static int each_pair(reader *r, const yaml_node_t *n, pair_fn fn, void *arg)
{
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = node(r, kv->key);

		if (fn(r, scalar(k), k, node(r, kv->value), arg))
			return -1;
	}
	return 0;
}

/* Room for sequence n's items, `size` bytes each, zeroed (at least one); NULL after fail(). */
static void *alloc_items(reader *r, const yaml_node_t *n, size_t size)
{
	size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
	void *items = calloc(count ? count : 1, size);

	if (!items)
		fail(r, n, "out of memory");
	return items;
}

/*
 * Sequence n (else fail with `list`, what it must be) of integers >= lo,
 * each `item`, appended to out[*count], at most max of them in all (else
 * "at most max <noun>").
 */
static int int_list(reader *r, const yaml_node_t *n, int64_t lo, int64_t *out, int *count, int max,
                    const char *list, const char *noun, const char *item)
{
	if (expect(r, n, YAML_SEQUENCE_NODE, list))
		return -1;
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		if (*count == max)
			return fail(r, n, "at most %d %s", max, noun);
		if (parse_int(r, node(r, *it), lo, &out[(*count)++], item))
			return -1;
	}
	return 0;
}

/* ---- plans ------------------------------------------------------------------------ */

static int find_tensor(const warm_plan *p, const char *name)
{
	for (int i = 0; i < p->n_tensors; i++)
		if (strcmp(p->tensors[i].name, name) == 0)
			return i;
	return -1;
}

/* A sequence of tensor names, resolved against the plan's tensors. */
static int tensor_list(reader *r, const yaml_node_t *n, const warm_plan *p, int *idx, int max,
                       int *count, const char *what)
{
	if (!n || n->type != YAML_SEQUENCE_NODE)
		return fail(r, n, "%s must be a list of tensor names", what);
	int k = 0;
	for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
	     it++) {
		yaml_node_t *e = node(r, *it);
		const char *s = scalar(e);
		int t = s ? find_tensor(p, s) : -1;
		if (t < 0)
			return fail(r, e, "%s: '%s' is not a tensor of plan '%s'", what,
			            s ? s : "?", p->name);
		if (k == max)
			return fail(r, e, "%s: at most %d", what, max);
		idx[k++] = t;
	}
	*count = k;
	return 0;
}

static int parse_param(reader *r, const yaml_node_t *v, tk_param *out)
{
	const char *s = scalar(v);
	if (!s)
		return fail(r, v, "a param value must be a number or true/false");
	char *end;
	if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
		out->kind = TK_PARAM_BOOL;
		out->v.b = s[0] == 't';
		return 0;
	}
	errno = 0;
	long long i = strtoll(s, &end, 10);
	if (*s && !*end && !errno) {
		out->kind = TK_PARAM_INT;
		out->v.i = i;
		return 0;
	}
	double f = strtod(s, &end);
	if (!*s || *end)
		return fail(r, v, "param value '%s' is not a number or true/false", s);
	out->kind = TK_PARAM_FLOAT;
	out->v.f = f;
	return 0;
}

typedef struct op_reading {
	const warm_plan *p;
	warm_op *op;
	const yaml_node_t *params; /* the params mapping, where "at most" points */
	int have_op;
} op_reading;

/* One name: value of an op's params. */
static int param_pair(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	op_reading *o = arg;
	warm_op *op = o->op;
	int rc;

	if (op->n_params == TK_MAX_PARAMS)
		return fail(r, o->params, "at most %d params", TK_MAX_PARAMS);
	rc = copy_name(r, k, op->param_names[op->n_params], "a param name");
	if (rc == 0)
		rc = parse_param(r, v, &op->params[op->n_params]);
	op->n_params++;
	return rc;
}

static int op_pair(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	op_reading *o = arg;
	warm_op *op = o->op;

	if (!key)
		return fail(r, k, "keys must be plain names");
	if (strcmp(key, "op") == 0) {
		o->have_op = 1;
		return copy_name(r, v, op->op, "op");
	}
	if (strcmp(key, "inputs") == 0)
		return tensor_list(r, v, o->p, op->in, TK_MAX_INPUTS, &op->n_in, "inputs");
	if (strcmp(key, "outputs") == 0)
		return tensor_list(r, v, o->p, op->out, TK_MAX_OUTPUTS, &op->n_out, "outputs");
	if (strcmp(key, "params") == 0) {
		if (expect(r, v, YAML_MAPPING_NODE, "params must be a mapping of name: value"))
			return -1;
		o->params = v;
		return each_pair(r, v, param_pair, o);
	}
	return fail(r, k, "unknown key '%s' in an op (op, inputs, outputs, params)", key);
}

static int parse_op(reader *r, const yaml_node_t *n, const warm_plan *p, warm_op *op)
{
	op_reading o = { p, op, NULL, 0 };

	if (expect(r, n, YAML_MAPPING_NODE,
	           "an op must be a mapping with op, inputs, outputs, params"))
		return -1;
	memset(op, 0, sizeof(*op));
	if (each_pair(r, n, op_pair, &o))
		return -1;
	return o.have_op ? 0 : fail(r, n, "an op needs 'op'");
}

typedef struct tensor_reading {
	warm_tensor *t;
	int have; /* bits: name, dtype, shape */
} tensor_reading;

static int tensor_pair(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	tensor_reading *tr = arg;
	warm_tensor *t = tr->t;

	if (key && strcmp(key, "name") == 0) {
		tr->have |= 1;
		return copy_name(r, v, t->name, "a tensor name");
	}
	if (key && strcmp(key, "dtype") == 0) {
		t->dtype = scalar(v) ? tk_dtype_parse(scalar(v)) : TK_DTYPE_INVALID;
		if (t->dtype == TK_DTYPE_INVALID)
			return fail(r, v, "unknown dtype '%s'", scalar(v) ? scalar(v) : "?");
		tr->have |= 2;
		return 0;
	}
	if (key && strcmp(key, "shape") == 0) {
		tr->have |= 4;
		return int_list(r, v, 0, t->shape, &t->ndim, TK_MAX_DIMS,
		                "shape must be a list of extents", "dims", "an extent");
	}
	return fail(r, k, "unknown key '%s' in a tensor (name, dtype, shape)", key ? key : "?");
}

static int parse_tensor(reader *r, const yaml_node_t *n, warm_tensor *t)
{
	tensor_reading tr = { t, 0 };

	if (expect(r, n, YAML_MAPPING_NODE, "a tensor must be a mapping with name, dtype, shape"))
		return -1;
	memset(t, 0, sizeof(*t));
	if (each_pair(r, n, tensor_pair, &tr))
		return -1;
	return tr.have == 7 ? 0 : fail(r, n, "a tensor needs name, dtype and shape");
}

typedef struct plan_reading {
	warm_plan *p;
	yaml_node_t *ops, *bucketed; /* read once the tensors they name are */
} plan_reading;

static int plan_tensors(reader *r, const yaml_node_t *v, warm_plan *p)
{
	if (expect(r, v, YAML_SEQUENCE_NODE, "tensors must be a list"))
		return -1;
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
	     it++) {
		if (p->n_tensors == WARM_MAX_TENSORS)
			return fail(r, v, "at most %d tensors", WARM_MAX_TENSORS);
		int rc = parse_tensor(r, node(r, *it), &p->tensors[p->n_tensors]);
		if (rc == 0 && find_tensor(p, p->tensors[p->n_tensors].name) >= 0)
			rc = fail(r, node(r, *it), "tensor '%s' is declared twice",
			          p->tensors[p->n_tensors].name);
		p->n_tensors++;
		if (rc)
			return rc;
	}
	return 0;
}

static int plan_pair(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	plan_reading *pr = arg;
	warm_plan *p = pr->p;

	if (!key)
		return fail(r, k, "keys must be plain names");
	if (strcmp(key, "name") == 0)
		return copy_name(r, v, p->name, "name");
	if (strcmp(key, "tenant") == 0)
		return copy_name(r, v, p->tenant, "tenant");
	if (strcmp(key, "buckets") == 0)
		return int_list(r, v, 1, p->buckets, &p->n_buckets, WARM_MAX_BUCKETS,
		                "buckets must be a list of sizes", "buckets", "a bucket");
	if (strcmp(key, "tensors") == 0)
		return plan_tensors(r, v, p);
	if (strcmp(key, "ops") == 0) {
		pr->ops = v;
		return 0;
	}
	if (strcmp(key, "bucketed") == 0) {
		pr->bucketed = v;
		return 0;
	}
	return fail(r, k,
	            "unknown key '%s' in a plan (name, tenant, buckets, bucketed, tensors, ops)",
	            key);
}

static int parse_plan(reader *r, const yaml_node_t *n, warm_plan *p)
{
	plan_reading pr = { p, NULL, NULL };

	if (expect(r, n, YAML_MAPPING_NODE, "a plan must be a mapping"))
		return -1;
	memset(p, 0, sizeof(*p));
	p->line = (int)n->start_mark.line + 1;
	/* Tensors first: ops and bucketed name them. */
	if (each_pair(r, n, plan_pair, &pr))
		return -1;
	if (!p->name[0] || !p->tenant[0] || !pr.ops)
		return fail(r, n, "a plan needs name, tenant, tensors and ops");
	if (pr.bucketed && tensor_list(r, pr.bucketed, p, p->bucketed, WARM_MAX_TENSORS,
	                               &p->n_bucketed, "bucketed"))
		return -1;
	if (expect(r, pr.ops, YAML_SEQUENCE_NODE, "ops must be a list") ||
	    !(p->ops = alloc_items(r, pr.ops, sizeof(*p->ops))))
		return -1;
	for (yaml_node_item_t *it = pr.ops->data.sequence.items.start;
	     it < pr.ops->data.sequence.items.top; it++)
		if (parse_op(r, node(r, *it), p, &p->ops[p->n_ops++]))
			return -1;
	return 0;
}

static int root_pair(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, void *arg)
{
	if (!key || strcmp(key, "plans") != 0)
		return fail(r, k, "unknown key '%s' (expected 'plans')", key ? key : "?");
	*(yaml_node_t **)arg = v;
	return 0;
}

static int parse_root(reader *r, warm_spec *w)
{
	yaml_node_t *root = yaml_document_get_root_node(&r->doc), *plans = NULL;

	if (expect(r, root, YAML_MAPPING_NODE, "the file must be a mapping with a 'plans' list") ||
	    each_pair(r, root, root_pair, &plans))
		return -1;
	if (!plans || plans->type != YAML_SEQUENCE_NODE)
		return fail(r, root, "'plans' must be a list");
	if (!(w->plans = alloc_items(r, plans, sizeof(*w->plans))))
		return -1;
	for (yaml_node_item_t *it = plans->data.sequence.items.start;
	     it < plans->data.sequence.items.top; it++) {
		warm_plan *p = &w->plans[w->n_plans++];
		if (parse_plan(r, node(r, *it), p))
			return -1;
		for (int i = 0; i + 1 < w->n_plans; i++)
			if (strcmp(w->plans[i].name, p->name) == 0)
				return fail(r, node(r, *it), "plan '%s' is declared twice",
				            p->name);
	}
	return 0;
}

int warmup_load(const char *path, warm_spec **out, char *err, size_t errlen)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	yaml_parser_t parser;
	reader r = { .path = path, .err = err, .errlen = errlen };
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	int ok = yaml_parser_load(&parser, &r.doc);
	if (!ok) {
		snprintf(err, errlen, "%s:%lu: %s", path,
		         (unsigned long)parser.problem_mark.line + 1,
		         parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		fclose(f);
		return -1;
	}
	warm_spec *w = calloc(1, sizeof(*w));
	int rc = w ? parse_root(&r, w) : fail(&r, NULL, "out of memory");
	yaml_document_delete(&r.doc);
	yaml_parser_delete(&parser);
	fclose(f);
	if (rc) {
		warmup_free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void warmup_free(warm_spec *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n_plans; i++)
		free(w->plans[i].ops);
	free(w->plans);
	free(w);
}
