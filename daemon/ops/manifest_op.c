/*
 * manifest_op.c - loads one op's entry (signature, params, rules, roofline,
 * workloads, kernels) from its YAML mapping. Names are read first so that
 * every expression can be resolved against the op's tensors, params and
 * roofline vars when it is parsed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "manifest_yaml.h"

typedef struct op_scope {
	const char *tensors[MANIFEST_MAX_TENSORS];
	const char *params[TK_MAX_PARAMS];
	expr_type param_types[TK_MAX_PARAMS];
	const char *vars[MANIFEST_MAX_VARS];
	expr_type var_types[MANIFEST_MAX_VARS];
	expr_scope scope;
} op_scope;

static const expr_type T_BOOL[] = { EXPR_T_BOOL };
static const expr_type T_LIST[] = { EXPR_T_LIST };
static const expr_type T_NUM[] = { EXPR_T_INT, EXPR_T_FLOAT };
static const expr_type T_SCALAR[] = { EXPR_T_INT, EXPR_T_FLOAT, EXPR_T_BOOL };

static int valid_name(const char *s)
{
	if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z'))
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

static int tensor_index(const manifest_op *op, const char *name)
{
	for (int i = 0; i < op->n_in + op->n_out; i++)
		if (!strcmp(op->tensors[i].name, name))
			return i;
	return -1;
}

static int param_index(const manifest_op *op, const char *name)
{
	for (int i = 0; i < op->n_params; i++)
		if (!strcmp(op->params[i].name, name))
			return i;
	return -1;
}

/* ---- tensors --------------------------------------------------------------- */

static const char *const tensor_keys[] = { "name",    "dtype", "rank",   "shape", "optional",
	                                   "mutated", "doc",   "packed", NULL };
static const char *const tensor_req[] = { "name", "dtype", NULL };

static int load_tensor_names(ld *L, manifest_op *op, const yaml_node_t *seq, int output)
{
	const char *key = output ? "outputs" : "inputs";

	if (ld_kind(L, seq, YAML_SEQUENCE_NODE, key) < 0)
		return -1;
	for (yaml_node_item_t *it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++) {
		yaml_node_t *n = ld_node(L, *it);
		int max = output ? TK_MAX_OUTPUTS : TK_MAX_INPUTS;
		int count = output ? op->n_out : op->n_in;
		manifest_tensor *t = &op->tensors[op->n_in + op->n_out];

		if (ld_keys(L, n, key, tensor_keys, tensor_req) < 0)
			return -1;
		if (count == max)
			return ld_fail(L, n, key, "more than %d %s", max, key);
		if (ld_string(L, n, "name", &t->name) < 0 || ld_string(L, n, "doc", &t->doc) < 0 ||
		    ld_flag(L, n, "optional", &t->optional) < 0 ||
		    ld_flag(L, n, "mutated", &t->mutated) < 0 ||
		    ld_flag(L, n, "packed", &t->packed) < 0)
			return -1;
		if (!valid_name(t->name))
			return ld_fail(L, ld_get(L, n, "name"), "name", "'%s' is not a valid name",
			               t->name);
		t->line = (int)n->start_mark.line + 1;
		if (output)
			op->n_out++;
		else
			op->n_in++;
	}
	return 0;
}

static int load_dtype_rule(ld *L, manifest_op *op, const yaml_node_t *n, manifest_dtype_rule *r)
{
	const char *s = ld_scalar(L, n, "dtype");
	char buf[256], *save = NULL, *tok;

	if (!s)
		return -1;
	if (strlen(s) >= sizeof(buf))
		return ld_fail(L, n, "dtype", "rule too long");
	r->same_as = -1;
	r->text = strdup(s);
	strcpy(buf, s);
	for (tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
		char *e;
		tk_dtype dt;

		while (*tok == ' ')
			tok++;
		e = tok + strlen(tok);
		while (e > tok && e[-1] == ' ')
			*--e = 0;
		if (!strncmp(tok, "same_as(", 8) && e > tok && e[-1] == ')') {
			e[-1] = 0;
			if (r->same_as >= 0)
				return ld_fail(L, n, "dtype", "only one same_as() per rule");
			if ((r->same_as = tensor_index(op, tok + 8)) < 0)
				return ld_fail(L, n, "dtype",
				               "same_as(%s) names no tensor of the op", tok + 8);
			continue;
		}
		if ((dt = manifest_dtype_parse(tok)) == TK_DTYPE_INVALID)
			return ld_fail(L, n, "dtype",
			               "unknown dtype '%s' (known: f32, f16, bf16, "
			               "i32, i64, u8, fp8_e4m3)",
			               tok);
		r->mask |= 1u << dt;
	}
	if (!r->mask && r->same_as < 0)
		return ld_fail(L, n, "dtype", "empty dtype rule");
	return 0;
}

static int load_rank(ld *L, const yaml_node_t *n, manifest_tensor *t)
{
	int64_t lo, hi;

	if (n->type == YAML_SEQUENCE_NODE) {
		if (n->data.sequence.items.top - n->data.sequence.items.start != 2)
			return ld_fail(L, n, "rank", "expected a rank or [min, max]");
		if (ld_int(L, ld_node(L, n->data.sequence.items.start[0]), "rank", &lo) < 0 ||
		    ld_int(L, ld_node(L, n->data.sequence.items.start[1]), "rank", &hi) < 0)
			return -1;
	} else if (ld_int(L, n, "rank", &lo) < 0) {
		return -1;
	} else {
		hi = lo;
	}
	if (lo < 0 || hi > TK_MAX_DIMS || lo > hi)
		return ld_fail(L, n, "rank", "rank must lie in [0, %d], min <= max", TK_MAX_DIMS);
	t->rank_min = (int)lo;
	t->rank_max = (int)hi;
	return 0;
}

static int load_tensor_rules(ld *L, manifest_op *op, const yaml_node_t *seq, int first,
                             const expr_scope *sc)
{
	int i = first;

	for (yaml_node_item_t *it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++, i++) {
		yaml_node_t *n = ld_node(L, *it), *v;
		manifest_tensor *t = &op->tensors[i];

		t->rank_min = 0;
		t->rank_max = TK_MAX_DIMS;
		if (load_dtype_rule(L, op, ld_get(L, n, "dtype"), &t->dtype) < 0)
			return -1;
		if ((v = ld_get(L, n, "rank")) && load_rank(L, v, t) < 0)
			return -1;
		if ((v = ld_get(L, n, "shape")) &&
		    ld_expr(L, v, "shape", sc, T_LIST, 1, &t->shape) < 0)
			return -1;
	}
	return 0;
}

/* ---- params ---------------------------------------------------------------- */

static const char *const param_keys[] = {
	"name", "type", "default", "range", "values", "doc", NULL
};
static const char *const param_req[] = { "name", "type", NULL };

static int load_value(ld *L, const yaml_node_t *n, const char *key, tk_param_kind k, tk_param *v)
{
	v->kind = k;
	if (k == TK_PARAM_INT)
		return ld_int(L, n, key, &v->v.i);
	if (k == TK_PARAM_BOOL)
		return ld_bool(L, n, key, &v->v.b);
	return ld_double(L, n, key, &v->v.f);
}

static int load_range(ld *L, const yaml_node_t *n, manifest_param *p)
{
	char lo[64], hi[64], open, close, text[160];

	if (n->type == YAML_SEQUENCE_NODE) {
		if (n->data.sequence.items.top - n->data.sequence.items.start != 2)
			return ld_fail(L, n, "range",
			               "expected [min, max] or an interval like (0, 1]");
		if (ld_double(L, ld_node(L, n->data.sequence.items.start[0]), "range", &p->lo) <
		            0 ||
		    ld_double(L, ld_node(L, n->data.sequence.items.start[1]), "range", &p->hi) < 0)
			return -1;
		open = '[';
		close = ']';
	} else {
		const char *s = ld_scalar(L, n, "range");
		char *end;

		if (!s)
			return -1;
		if (sscanf(s, " %c %63[^, ] , %63[^]) ] %c", &open, lo, hi, &close) != 4 ||
		    (open != '(' && open != '[') || (close != ')' && close != ']'))
			return ld_fail(L, n, "range",
			               "expected an interval like (0, 1] or [1, inf), "
			               "got '%s'",
			               s);
		p->lo = !strcmp(lo, "-inf") ? -HUGE_VAL : strtod(lo, &end);
		if (strcmp(lo, "-inf") && *end)
			return ld_fail(L, n, "range", "bad lower bound '%s'", lo);
		p->hi = !strcmp(hi, "inf") ? HUGE_VAL : strtod(hi, &end);
		if (strcmp(hi, "inf") && *end)
			return ld_fail(L, n, "range", "bad upper bound '%s'", hi);
	}
	p->has_lo = !isinf(p->lo);
	p->has_hi = !isinf(p->hi);
	p->lo_open = open == '(';
	p->hi_open = close == ')';
	if (p->has_lo && p->has_hi && p->lo > p->hi)
		return ld_fail(L, n, "range", "the lower bound exceeds the upper bound");
	snprintf(text, sizeof(text), "%c%g, %g%c", p->has_lo ? open : '(', p->lo, p->hi,
	         p->has_hi ? close : ')');
	p->range_text = strdup(text);
	return 0;
}

static int load_params(ld *L, manifest_op *op, const yaml_node_t *seq)
{
	if (ld_kind(L, seq, YAML_SEQUENCE_NODE, "params") < 0)
		return -1;
	for (yaml_node_item_t *it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++) {
		yaml_node_t *n = ld_node(L, *it), *v;
		manifest_param *p = &op->params[op->n_params];
		const char *type;

		if (ld_keys(L, n, "params", param_keys, param_req) < 0)
			return -1;
		if (op->n_params == TK_MAX_PARAMS)
			return ld_fail(L, n, "params", "more than %d params", TK_MAX_PARAMS);
		op->n_params++;
		p->line = (int)n->start_mark.line + 1;
		if (ld_string(L, n, "name", &p->name) < 0 || ld_string(L, n, "doc", &p->doc) < 0)
			return -1;
		if (!valid_name(p->name))
			return ld_fail(L, n, "name", "'%s' is not a valid name", p->name);
		v = ld_get(L, n, "type");
		if (!(type = ld_scalar(L, v, "type")))
			return -1;
		p->type = !strcmp(type, "int")     ? TK_PARAM_INT
		          : !strcmp(type, "float") ? TK_PARAM_FLOAT
		          : !strcmp(type, "bool")  ? TK_PARAM_BOOL
		                                   : TK_PARAM_NONE;
		if (p->type == TK_PARAM_NONE)
			return ld_fail(L, v, "type", "unknown param type '%s' (int, float or bool)",
			               type);
		if ((v = ld_get(L, n, "default"))) {
			if (load_value(L, v, "default", p->type, &p->def) < 0)
				return -1;
			p->has_default = 1;
		}
		if ((v = ld_get(L, n, "range")) && load_range(L, v, p) < 0)
			return -1;
		if ((v = ld_get(L, n, "values"))) {
			if (ld_kind(L, v, YAML_SEQUENCE_NODE, "values") < 0)
				return -1;
			for (yaml_node_item_t *vi = v->data.sequence.items.start;
			     vi < v->data.sequence.items.top; vi++) {
				if (p->n_values == MANIFEST_MAX_VALUES)
					return ld_fail(L, v, "values", "too many values");
				if (ld_double(L, ld_node(L, *vi), "values",
				              &p->values[p->n_values++]) < 0)
					return -1;
			}
		}
	}
	return 0;
}

/* ---- roofline, rules, workloads, kernels ------------------------------------- */

static int load_roofline(ld *L, manifest_op *op, const yaml_node_t *n, op_scope *s)
{
	static const char *const keys[] = { "vars", "flops", "bytes", NULL };
	static const char *const req[] = { "flops", "bytes", NULL };
	yaml_node_t *vars;

	if (ld_keys(L, n, "roofline", keys, req) < 0)
		return -1;
	if ((vars = ld_get(L, n, "vars"))) {
		if (ld_kind(L, vars, YAML_MAPPING_NODE, "vars") < 0)
			return -1;
		for (yaml_node_pair_t *p = vars->data.mapping.pairs.start;
		     p < vars->data.mapping.pairs.top; p++) {
			yaml_node_t *k = ld_node(L, p->key);
			const char *name = ld_scalar(L, k, "vars");
			manifest_var *v = &op->vars[op->n_vars];

			if (!name)
				return -1;
			if (op->n_vars == MANIFEST_MAX_VARS)
				return ld_fail(L, k, "vars", "more than %d vars",
				               MANIFEST_MAX_VARS);
			if (!valid_name(name))
				return ld_fail(L, k, "vars", "'%s' is not a valid name", name);
			if (!(v->name = strdup(name)))
				return ld_fail(L, k, "vars", "out of memory");
			if (ld_expr(L, ld_node(L, p->value), name, &s->scope, T_SCALAR, 3,
			            &v->value) < 0)
				return -1;
			s->vars[op->n_vars] = v->name;
			s->var_types[op->n_vars] = expr_result_type(v->value);
			s->scope.n_vars = ++op->n_vars;
		}
	}
	if (ld_expr(L, ld_get(L, n, "flops"), "flops", &s->scope, T_NUM, 2, &op->flops) < 0 ||
	    ld_expr(L, ld_get(L, n, "bytes"), "bytes", &s->scope, T_NUM, 2, &op->bytes) < 0)
		return -1;
	return 0;
}

static int load_rules(ld *L, manifest_op *op, const yaml_node_t *seq, const expr_scope *sc)
{
	static const char *const keys[] = { "check", "message", NULL };
	static const char *const req[] = { "check", NULL };
	int n = 0;

	if (ld_kind(L, seq, YAML_SEQUENCE_NODE, "rules") < 0)
		return -1;
	n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (!(op->rules = calloc((size_t)n + 1, sizeof(*op->rules))))
		return ld_fail(L, seq, "rules", "out of memory");
	for (int i = 0; i < n; i++) {
		yaml_node_t *it = ld_node(L, seq->data.sequence.items.start[i]);
		manifest_rule *r = &op->rules[op->n_rules++];

		r->line = (int)it->start_mark.line + 1;
		if (it->type == YAML_SCALAR_NODE) {
			if (ld_expr(L, it, "rules", sc, T_BOOL, 1, &r->check) < 0)
				return -1;
			continue;
		}
		if (ld_keys(L, it, "a rule", keys, req) < 0 ||
		    ld_expr(L, ld_get(L, it, "check"), "check", sc, T_BOOL, 1, &r->check) < 0 ||
		    ld_string(L, it, "message", &r->message) < 0)
			return -1;
	}
	return 0;
}

static int load_workload_shapes(ld *L, manifest_op *op, manifest_workload *w,
                                const yaml_node_t *map)
{
	if (ld_kind(L, map, YAML_MAPPING_NODE, "shapes") < 0)
		return -1;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = ld_node(L, p->key), *v = ld_node(L, p->value);
		const char *name = ld_scalar(L, k, "shapes");
		int ti = name ? tensor_index(op, name) : -1, nd = 0;

		if (!name)
			return -1;
		if (ti < 0 || ti >= op->n_in)
			return ld_fail(L, k, "shapes", "'%s' is not an input of the op", name);
		if (ld_kind(L, v, YAML_SEQUENCE_NODE, name) < 0)
			return -1;
		for (yaml_node_item_t *d = v->data.sequence.items.start;
		     d < v->data.sequence.items.top; d++, nd++) {
			if (nd == TK_MAX_DIMS)
				return ld_fail(L, v, name, "more than %d dims", TK_MAX_DIMS);
			if (ld_int(L, ld_node(L, *d), name, &w->shape[w->n_shapes][nd]) < 0)
				return -1;
		}
		w->tensor[w->n_shapes] = ti;
		w->ndim[w->n_shapes++] = nd;
	}
	return 0;
}

static int load_workload(ld *L, manifest_op *op, manifest_workload *w, const yaml_node_t *n)
{
	static const char *const keys[] = { "label", "model", "dtypes", "shapes", "params", NULL };
	static const char *const req[] = { "label", "model", "dtypes", "shapes", NULL };
	yaml_node_t *d, *ps;

	if (ld_keys(L, n, "a workload", keys, req) < 0 || ld_string(L, n, "label", &w->label) < 0 ||
	    ld_string(L, n, "model", &w->model) < 0)
		return -1;
	w->line = (int)n->start_mark.line + 1;
	d = ld_get(L, n, "dtypes");
	if (ld_kind(L, d, YAML_SEQUENCE_NODE, "dtypes") < 0)
		return -1;
	for (yaml_node_item_t *it = d->data.sequence.items.start; it < d->data.sequence.items.top;
	     it++) {
		yaml_node_t *dn = ld_node(L, *it);
		const char *s = ld_scalar(L, dn, "dtypes");
		tk_dtype dt = s ? manifest_dtype_parse(s) : TK_DTYPE_INVALID;

		if (!s)
			return -1;
		if (dt == TK_DTYPE_INVALID)
			return ld_fail(L, dn, "dtypes", "unknown dtype '%s'", s);
		w->dtypes |= 1u << dt;
	}
	if (load_workload_shapes(L, op, w, ld_get(L, n, "shapes")) < 0)
		return -1;
	if (!(ps = ld_get(L, n, "params")))
		return 0;
	if (ld_kind(L, ps, YAML_MAPPING_NODE, "params") < 0)
		return -1;
	for (yaml_node_pair_t *p = ps->data.mapping.pairs.start; p < ps->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = ld_node(L, p->key);
		const char *name = ld_scalar(L, k, "params");
		int pi = name ? param_index(op, name) : -1;

		if (pi < 0)
			return name ? ld_fail(L, k, "params", "'%s' is not a param of the op", name)
			            : -1;
		w->param[w->n_params] = pi;
		if (load_value(L, ld_node(L, p->value), name, op->params[pi].type,
		               &w->value[w->n_params++]) < 0)
			return -1;
	}
	return 0;
}

static int load_kernels(ld *L, manifest_op *op, const yaml_node_t *seq, const expr_scope *sc)
{
	static const char *const keys[] = {
		"name", "backend", "when", "workspace", "tuning", NULL
	};
	static const char *const req[] = { "name", "backend", NULL };
	int n;

	if (ld_kind(L, seq, YAML_SEQUENCE_NODE, "kernels") < 0)
		return -1;
	n = (int)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	if (!(op->kernels = calloc((size_t)n + 1, sizeof(*op->kernels))))
		return ld_fail(L, seq, "kernels", "out of memory");
	for (int i = 0; i < n; i++) {
		yaml_node_t *it = ld_node(L, seq->data.sequence.items.start[i]), *w;
		manifest_kernel *k = &op->kernels[op->n_kernels++];

		k->line = (int)it->start_mark.line + 1;
		if (ld_keys(L, it, "a kernel", keys, req) < 0 ||
		    ld_string(L, it, "name", &k->name) < 0 ||
		    ld_string(L, it, "backend", &k->backend) < 0)
			return -1;
		if (strcmp(k->backend, "cpu") && strcmp(k->backend, "cuda"))
			return ld_fail(L, ld_get(L, it, "backend"), "backend",
			               "unknown backend '%s' (cpu or cuda)", k->backend);
		/* The kernel table is generated from these names: the function
		 * behind cuda_rms_norm is tk_cuda_rms_norm. */
		if (strncmp(k->name, k->backend, strlen(k->backend)) ||
		    k->name[strlen(k->backend)] != '_' ||
		    strcmp(k->name + strlen(k->backend) + 1, op->name))
			return ld_fail(L, ld_get(L, it, "name"), "name",
			               "kernel '%s' must be named %s_%s (backend_op)", k->name,
			               k->backend, op->name);
		if (ld_flag(L, it, "workspace", &k->workspace) < 0 ||
		    ld_flag(L, it, "tuning", &k->tuning) < 0)
			return -1;
		/* The tuning interface picks among CUDA configurations. */
		if (k->tuning && strcmp(k->backend, "cuda"))
			return ld_fail(L, ld_get(L, it, "tuning"), "tuning",
			               "only a cuda kernel can be tunable");
		w = ld_get(L, it, "when");
		if (w ? ld_expr(L, w, "when", sc, T_BOOL, 1, &k->when) < 0
		      : expr_parse("true", sc, &k->when, NULL, NULL, 0) < 0)
			return -1;
	}
	return 0;
}

/* ---- one op --------------------------------------------------------------------- */

static const char *const op_keys[] = { "name",      "family",  "status",     "torch", "doc",
	                               "inputs",    "outputs", "params",     "rules", "roofline",
	                               "workloads", "kernels", "collective", NULL };
static const char *const op_req[] = { "name",    "status",   "torch", "inputs",
	                              "outputs", "roofline", NULL };

static int load_sections(ld *L, manifest_op *op, const yaml_node_t *n)
{
	op_scope s;
	yaml_node_t *v;

	memset(&s, 0, sizeof(s));
	if (load_tensor_names(L, op, ld_get(L, n, "inputs"), 0) < 0 ||
	    load_tensor_names(L, op, ld_get(L, n, "outputs"), 1) < 0)
		return -1;
	if ((v = ld_get(L, n, "params")) && load_params(L, op, v) < 0)
		return -1;
	while (op->n_in_required < op->n_in && !op->tensors[op->n_in_required].optional)
		op->n_in_required++;
	while (op->n_out_required < op->n_out &&
	       !op->tensors[op->n_in + op->n_out_required].optional)
		op->n_out_required++;
	for (int i = 0; i < op->n_in + op->n_out; i++)
		s.tensors[i] = op->tensors[i].name;
	for (int i = 0; i < op->n_params; i++) {
		s.params[i] = op->params[i].name;
		s.param_types[i] = op->params[i].type == TK_PARAM_INT     ? EXPR_T_INT
		                   : op->params[i].type == TK_PARAM_FLOAT ? EXPR_T_FLOAT
		                                                          : EXPR_T_BOOL;
	}
	s.scope = (expr_scope){ s.tensors,    op->n_in + op->n_out,
		                s.params,     s.param_types,
		                op->n_params, s.vars,
		                s.var_types,  0 };
	if (load_roofline(L, op, ld_get(L, n, "roofline"), &s) < 0 ||
	    load_tensor_rules(L, op, ld_get(L, n, "inputs"), 0, &s.scope) < 0 ||
	    load_tensor_rules(L, op, ld_get(L, n, "outputs"), op->n_in, &s.scope) < 0)
		return -1;
	if ((v = ld_get(L, n, "rules")) && load_rules(L, op, v, &s.scope) < 0)
		return -1;
	if ((v = ld_get(L, n, "kernels")) && load_kernels(L, op, v, &s.scope) < 0)
		return -1;
	if ((v = ld_get(L, n, "workloads"))) {
		int count;

		if (ld_kind(L, v, YAML_SEQUENCE_NODE, "workloads") < 0)
			return -1;
		count = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
		if (!(op->workloads = calloc((size_t)count + 1, sizeof(*op->workloads))))
			return ld_fail(L, v, "workloads", "out of memory");
		for (int i = 0; i < count; i++)
			if (load_workload(L, op, &op->workloads[op->n_workloads++],
			                  ld_node(L, v->data.sequence.items.start[i])) < 0)
				return -1;
	}
	return 0;
}

static int load_op(ld *L, manifest_op *op, const yaml_node_t *n, const char *family)
{
	yaml_node_t *v;
	const char *status;

	if (ld_kind(L, n, YAML_MAPPING_NODE, "ops") < 0)
		return -1;
	op->line = (int)n->start_mark.line + 1;
	if ((v = ld_get(L, n, "name")) && ld_string(L, n, "name", &op->name) < 0)
		return -1;
	L->op = op;
	if (ld_keys(L, n, "an op", op_keys, op_req) < 0)
		return -1;
	if (!valid_name(op->name))
		return ld_fail(L, v, "name", "'%s' is not a valid op name", op->name);
	if (ld_string(L, n, "family", &op->family) < 0 ||
	    ld_string(L, n, "torch", &op->torch) < 0 || ld_string(L, n, "doc", &op->doc) < 0)
		return -1;
	if (op->family && strcmp(op->family, family))
		return ld_fail(L, ld_get(L, n, "family"), "family",
		               "'%s' differs from the file's family '%s'", op->family, family);
	free(op->family);
	op->family = strdup(family);
	v = ld_get(L, n, "status");
	if (!(status = ld_scalar(L, v, "status")))
		return -1;
	if (!strcmp(status, "implemented"))
		op->status = MANIFEST_IMPLEMENTED;
	else if (!strcmp(status, "spec"))
		op->status = MANIFEST_SPEC;
	else
		return ld_fail(L, v, "status", "unknown status '%s' (implemented or spec)", status);
	if ((v = ld_get(L, n, "collective"))) {
		const char *kind = ld_scalar(L, v, "collective");

		if (!kind)
			return -1;
		if (!strcmp(kind, "all_reduce"))
			op->collective = MANIFEST_ALL_REDUCE;
		else if (!strcmp(kind, "all_gather"))
			op->collective = MANIFEST_ALL_GATHER;
		else if (!strcmp(kind, "reduce_scatter"))
			op->collective = MANIFEST_REDUCE_SCATTER;
		else
			return ld_fail(L, v, "collective",
			               "unknown collective '%s' (all_reduce, all_gather or "
			               "reduce_scatter)",
			               kind);
	}
	if (!(op->file = strdup(L->file)) || !op->family)
		return ld_fail(L, n, NULL, "out of memory");
	return load_sections(L, op, n);
}

int ld_file(ld *L, const yaml_node_t *root)
{
	static const char *const keys[] = { "family", "doc", "ops", NULL };
	static const char *const req[] = { "family", "ops", NULL };
	const yaml_node_t *ops;
	const char *family;

	if (ld_keys(L, root, "the file", keys, req) < 0 ||
	    !(family = ld_scalar(L, ld_get(L, root, "family"), "family")))
		return -1;
	ops = ld_get(L, root, "ops");
	if (ld_kind(L, ops, YAML_SEQUENCE_NODE, "ops") < 0)
		return -1;
	for (yaml_node_item_t *it = ops->data.sequence.items.start;
	     it < ops->data.sequence.items.top; it++) {
		manifest *m = L->m;
		manifest_op op;
		int rc;

		memset(&op, 0, sizeof(op));
		rc = load_op(L, &op, ld_node(L, *it), family);
		L->op = NULL;
		if (rc == 0) {
			manifest_op *nv = realloc(m->ops, (size_t)(m->n_ops + 1) * sizeof(*nv));
			if (!nv)
				rc = ld_fail(L, root, NULL, "out of memory");
			else
				m->ops = nv;
		}
		if (rc < 0) {
			manifest_op_clear(&op);
			return -1;
		}
		m->ops[m->n_ops++] = op;
	}
	return 0;
}

void manifest_op_clear(manifest_op *op)
{
	free(op->name);
	free(op->family);
	free(op->torch);
	free(op->doc);
	free(op->file);
	for (int i = 0; i < MANIFEST_MAX_TENSORS; i++) {
		free(op->tensors[i].name);
		free(op->tensors[i].doc);
		free(op->tensors[i].dtype.text);
		expr_free(op->tensors[i].shape);
	}
	for (int i = 0; i < TK_MAX_PARAMS; i++) {
		free(op->params[i].name);
		free(op->params[i].doc);
		free(op->params[i].range_text);
	}
	for (int i = 0; i < op->n_rules; i++) {
		expr_free(op->rules[i].check);
		free(op->rules[i].message);
	}
	free(op->rules);
	for (int i = 0; i < MANIFEST_MAX_VARS; i++) {
		free(op->vars[i].name);
		expr_free(op->vars[i].value);
	}
	expr_free(op->flops);
	expr_free(op->bytes);
	for (int i = 0; i < op->n_workloads; i++) {
		free(op->workloads[i].label);
		free(op->workloads[i].model);
	}
	free(op->workloads);
	for (int i = 0; i < op->n_kernels; i++) {
		free(op->kernels[i].name);
		free(op->kernels[i].backend);
		expr_free(op->kernels[i].when);
	}
	free(op->kernels);
	memset(op, 0, sizeof(*op));
}
