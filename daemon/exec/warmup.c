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

static int parse_op(reader *r, const yaml_node_t *n, const warm_plan *p, warm_op *op)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return fail(r, n, "an op must be a mapping with op, inputs, outputs, params");
	memset(op, 0, sizeof(*op));
	int have_op = 0;
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = node(r, kv->key), *v = node(r, kv->value);
		const char *key = scalar(k);
		int rc = 0;
		if (!key) {
			rc = fail(r, k, "keys must be plain names");
		} else if (strcmp(key, "op") == 0) {
			rc = copy_name(r, v, op->op, "op");
			have_op = 1;
		} else if (strcmp(key, "inputs") == 0) {
			rc = tensor_list(r, v, p, op->in, TK_MAX_INPUTS, &op->n_in, "inputs");
		} else if (strcmp(key, "outputs") == 0) {
			rc = tensor_list(r, v, p, op->out, TK_MAX_OUTPUTS, &op->n_out, "outputs");
		} else if (strcmp(key, "params") == 0) {
			if (!v || v->type != YAML_MAPPING_NODE)
				return fail(r, v, "params must be a mapping of name: value");
			for (yaml_node_pair_t *pp = v->data.mapping.pairs.start;
			     pp < v->data.mapping.pairs.top && rc == 0; pp++) {
				if (op->n_params == TK_MAX_PARAMS)
					return fail(r, v, "at most %d params", TK_MAX_PARAMS);
				rc = copy_name(r, node(r, pp->key), op->param_names[op->n_params],
				               "a param name");
				if (rc == 0)
					rc = parse_param(r, node(r, pp->value),
					                 &op->params[op->n_params]);
				op->n_params++;
			}
		} else {
			rc = fail(r, k, "unknown key '%s' in an op (op, inputs, outputs, params)",
			          key);
		}
		if (rc)
			return rc;
	}
	return have_op ? 0 : fail(r, n, "an op needs 'op'");
}

static int parse_tensor(reader *r, const yaml_node_t *n, warm_tensor *t)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return fail(r, n, "a tensor must be a mapping with name, dtype, shape");
	memset(t, 0, sizeof(*t));
	int have = 0;
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = node(r, kv->key), *v = node(r, kv->value);
		const char *key = scalar(k);
		if (key && strcmp(key, "name") == 0) {
			if (copy_name(r, v, t->name, "a tensor name"))
				return -1;
			have |= 1;
		} else if (key && strcmp(key, "dtype") == 0) {
			t->dtype = scalar(v) ? tk_dtype_parse(scalar(v)) : TK_DTYPE_INVALID;
			if (t->dtype == TK_DTYPE_INVALID)
				return fail(r, v, "unknown dtype '%s'",
				            scalar(v) ? scalar(v) : "?");
			have |= 2;
		} else if (key && strcmp(key, "shape") == 0) {
			if (!v || v->type != YAML_SEQUENCE_NODE)
				return fail(r, v, "shape must be a list of extents");
			for (yaml_node_item_t *it = v->data.sequence.items.start;
			     it < v->data.sequence.items.top; it++) {
				if (t->ndim == TK_MAX_DIMS)
					return fail(r, v, "at most %d dims", TK_MAX_DIMS);
				if (parse_int(r, node(r, *it), 0, &t->shape[t->ndim++],
				              "an extent"))
					return -1;
			}
			have |= 4;
		} else {
			return fail(r, k, "unknown key '%s' in a tensor (name, dtype, shape)",
			            key ? key : "?");
		}
	}
	return have == 7 ? 0 : fail(r, n, "a tensor needs name, dtype and shape");
}

static int parse_plan(reader *r, const yaml_node_t *n, warm_plan *p)
{
	if (!n || n->type != YAML_MAPPING_NODE)
		return fail(r, n, "a plan must be a mapping");
	memset(p, 0, sizeof(*p));
	p->line = (int)n->start_mark.line + 1;
	yaml_node_t *ops = NULL, *bucketed = NULL;
	/* Tensors first: ops and bucketed name them. */
	for (yaml_node_pair_t *kv = n->data.mapping.pairs.start; kv < n->data.mapping.pairs.top;
	     kv++) {
		yaml_node_t *k = node(r, kv->key), *v = node(r, kv->value);
		const char *key = scalar(k);
		int rc = 0;
		if (!key) {
			rc = fail(r, k, "keys must be plain names");
		} else if (strcmp(key, "name") == 0) {
			rc = copy_name(r, v, p->name, "name");
		} else if (strcmp(key, "tenant") == 0) {
			rc = copy_name(r, v, p->tenant, "tenant");
		} else if (strcmp(key, "buckets") == 0) {
			if (!v || v->type != YAML_SEQUENCE_NODE)
				return fail(r, v, "buckets must be a list of sizes");
			for (yaml_node_item_t *it = v->data.sequence.items.start;
			     it < v->data.sequence.items.top && rc == 0; it++) {
				if (p->n_buckets == WARM_MAX_BUCKETS)
					return fail(r, v, "at most %d buckets", WARM_MAX_BUCKETS);
				rc = parse_int(r, node(r, *it), 1, &p->buckets[p->n_buckets++],
				               "a bucket");
			}
		} else if (strcmp(key, "tensors") == 0) {
			if (!v || v->type != YAML_SEQUENCE_NODE)
				return fail(r, v, "tensors must be a list");
			for (yaml_node_item_t *it = v->data.sequence.items.start;
			     it < v->data.sequence.items.top && rc == 0; it++) {
				if (p->n_tensors == WARM_MAX_TENSORS)
					return fail(r, v, "at most %d tensors", WARM_MAX_TENSORS);
				rc = parse_tensor(r, node(r, *it), &p->tensors[p->n_tensors]);
				if (rc == 0 && find_tensor(p, p->tensors[p->n_tensors].name) >= 0)
					rc = fail(r, node(r, *it), "tensor '%s' is declared twice",
					          p->tensors[p->n_tensors].name);
				p->n_tensors++;
			}
		} else if (strcmp(key, "ops") == 0) {
			ops = v;
		} else if (strcmp(key, "bucketed") == 0) {
			bucketed = v;
		} else {
			rc = fail(r, k,
			          "unknown key '%s' in a plan (name, tenant, buckets, bucketed, "
			          "tensors, ops)",
			          key);
		}
		if (rc)
			return rc;
	}
	if (!p->name[0] || !p->tenant[0] || !ops)
		return fail(r, n, "a plan needs name, tenant, tensors and ops");
	if (bucketed &&
	    tensor_list(r, bucketed, p, p->bucketed, WARM_MAX_TENSORS, &p->n_bucketed, "bucketed"))
		return -1;
	if (ops->type != YAML_SEQUENCE_NODE)
		return fail(r, ops, "ops must be a list");
	size_t n_ops = (size_t)(ops->data.sequence.items.top - ops->data.sequence.items.start);
	p->ops = calloc(n_ops ? n_ops : 1, sizeof(*p->ops));
	if (!p->ops)
		return fail(r, ops, "out of memory");
	for (yaml_node_item_t *it = ops->data.sequence.items.start;
	     it < ops->data.sequence.items.top; it++)
		if (parse_op(r, node(r, *it), p, &p->ops[p->n_ops++]))
			return -1;
	return 0;
}

static int parse_root(reader *r, warm_spec *w)
{
	yaml_node_t *root = yaml_document_get_root_node(&r->doc);
	if (!root || root->type != YAML_MAPPING_NODE)
		return fail(r, root, "the file must be a mapping with a 'plans' list");
	yaml_node_t *plans = NULL;
	for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
	     kv < root->data.mapping.pairs.top; kv++) {
		const char *key = scalar(node(r, kv->key));
		if (!key || strcmp(key, "plans") != 0)
			return fail(r, node(r, kv->key), "unknown key '%s' (expected 'plans')",
			            key ? key : "?");
		plans = node(r, kv->value);
	}
	if (!plans || plans->type != YAML_SEQUENCE_NODE)
		return fail(r, root, "'plans' must be a list");
	size_t n = (size_t)(plans->data.sequence.items.top - plans->data.sequence.items.start);
	w->plans = calloc(n ? n : 1, sizeof(*w->plans));
	if (!w->plans)
		return fail(r, plans, "out of memory");
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
