/*
 * manifest_check.c - semantic checks of a loaded manifest: what the schema
 * cannot say (unique names, optional inputs last, defaults within their
 * ranges, workloads that name real tensors) and the agreement between the
 * manifest and the kernel table.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "manifest.h"

static int op_fail(const manifest_op *op, int line, char *err, size_t errlen, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

static int op_fail(const manifest_op *op, int line, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (!err || !errlen)
		return -1;
	w = snprintf(err, errlen, "%s:%d: op '%s': ", op->file ? op->file : "?", line, op->name);
	if (w >= 0 && (size_t)w < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + w, errlen - (size_t)w, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int check_names(const manifest_op *op, char *err, size_t errlen)
{
	const char *names[MANIFEST_MAX_TENSORS + TK_MAX_PARAMS + MANIFEST_MAX_VARS];
	int lines[MANIFEST_MAX_TENSORS + TK_MAX_PARAMS + MANIFEST_MAX_VARS];
	int n = 0;

	for (int i = 0; i < op->n_in + op->n_out; i++, n++) {
		names[n] = op->tensors[i].name;
		lines[n] = op->tensors[i].line;
	}
	for (int i = 0; i < op->n_params; i++, n++) {
		names[n] = op->params[i].name;
		lines[n] = op->params[i].line;
	}
	for (int i = 0; i < op->n_vars; i++, n++) {
		names[n] = op->vars[i].name;
		lines[n] = op->line;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(names[i], names[j]))
				return op_fail(op, lines[i], err, errlen,
				               "name '%s' is used twice (tensors, params and vars "
				               "share one namespace)",
				               names[i]);
	return 0;
}

static int check_tensors(const manifest_op *op, char *err, size_t errlen)
{
	int mutated = 0;

	for (int i = 0; i < op->n_in; i++)
		mutated |= op->tensors[i].mutated;
	if (op->n_in < 1 || (op->n_out < 1 && !mutated))
		return op_fail(op, op->line, err, errlen,
		               "needs at least one input, and an output "
		               "or a mutated input");
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *t = &op->tensors[i];
		int hops = 0, j = i;

		if (i >= op->n_in && !t->shape && op->status == MANIFEST_IMPLEMENTED)
			return op_fail(op, t->line, err, errlen,
			               "output '%s' of an implemented op "
			               "must declare its shape",
			               t->name);
		if (i >= op->n_in && t->mutated)
			return op_fail(op, t->line, err, errlen, "output '%s' cannot be mutated",
			               t->name);
		if (i >= op->n_in + op->n_out_required && !t->optional)
			return op_fail(op, t->line, err, errlen,
			               "output '%s' follows an optional "
			               "output: optional outputs must come last",
			               t->name);
		if (i < op->n_in && i >= op->n_in_required && !t->optional)
			return op_fail(op, t->line, err, errlen,
			               "input '%s' follows an optional "
			               "input: optional inputs must come last",
			               t->name);
		/* A same_as chain must end in a concrete dtype set. */
		while (op->tensors[j].dtype.same_as >= 0 && !op->tensors[j].dtype.mask) {
			j = op->tensors[j].dtype.same_as;
			if (++hops > MANIFEST_MAX_TENSORS)
				return op_fail(op, t->line, err, errlen,
				               "dtype of '%s': same_as() "
				               "rules form a cycle",
				               t->name);
		}
	}
	return 0;
}

static int in_range(const manifest_param *p, double v)
{
	if (p->has_lo && (p->lo_open ? !(v > p->lo) : !(v >= p->lo)))
		return 0;
	if (p->has_hi && (p->hi_open ? !(v < p->hi) : !(v <= p->hi)))
		return 0;
	return 1;
}

static double param_num(const tk_param *v)
{
	return v->kind == TK_PARAM_FLOAT  ? v->v.f
	       : v->kind == TK_PARAM_BOOL ? v->v.b
	                                  : (double)v->v.i;
}

static int check_params(const manifest_op *op, char *err, size_t errlen)
{
	for (int i = 0; i < op->n_params; i++) {
		const manifest_param *p = &op->params[i];

		if (p->type == TK_PARAM_BOOL && (p->range_text || p->n_values))
			return op_fail(op, p->line, err, errlen,
			               "bool param '%s' cannot have a "
			               "range or values",
			               p->name);
		for (int k = 0; k < p->n_values; k++)
			if (!in_range(p, p->values[k]))
				return op_fail(op, p->line, err, errlen,
				               "param '%s': value %g is "
				               "outside its range %s",
				               p->name, p->values[k], p->range_text);
		if (!p->has_default)
			continue;
		double d = param_num(&p->def);
		if (!in_range(p, d))
			return op_fail(op, p->line, err, errlen,
			               "param '%s': default %g is outside "
			               "its range %s",
			               p->name, d, p->range_text);
		int ok = p->n_values == 0;
		for (int k = 0; k < p->n_values; k++)
			ok |= p->values[k] == d;
		if (!ok)
			return op_fail(op, p->line, err, errlen,
			               "param '%s': default %g is not one "
			               "of its values",
			               p->name, d);
	}
	return 0;
}

static int check_workloads(const manifest_op *op, char *err, size_t errlen)
{
	const manifest_dtype_rule *r0 = &op->tensors[0].dtype;

	for (int i = 0; i < op->n_workloads; i++) {
		const manifest_workload *w = &op->workloads[i];

		for (int t = 0; t < op->n_in_required; t++) {
			int found = 0;

			for (int s = 0; s < w->n_shapes; s++)
				found |= w->tensor[s] == t;
			if (!found)
				return op_fail(op, w->line, err, errlen,
				               "workload '%s' gives no shape "
				               "for input '%s'",
				               w->label, op->tensors[t].name);
		}
		if (!w->dtypes)
			return op_fail(op, w->line, err, errlen, "workload '%s' lists no dtypes",
			               w->label);
		if (r0->mask && (w->dtypes & ~r0->mask)) {
			char allowed[128];

			manifest_dtype_mask_str(r0->mask, allowed, sizeof(allowed));
			return op_fail(op, w->line, err, errlen,
			               "workload '%s' uses a dtype that "
			               "'%s' does not allow (%s)",
			               w->label, op->tensors[0].name, allowed);
		}
	}
	return 0;
}

/*
 * A collective's inputs are its ranks' tensors, one per device, written in
 * place: each is mutated and packed, the first is required and the rest
 * optional (a request gives as many as it has ranks), and the backend's
 * collective operation serves it, so it declares no kernels and no
 * outputs.
 */
static int check_collective(const manifest_op *op, char *err, size_t errlen)
{
	if (op->n_kernels > 0)
		return op_fail(op, op->kernels[0].line, err, errlen,
		               "a collective is served by the backend's collective operation and "
		               "declares no kernels");
	if (op->n_out > 0)
		return op_fail(op, op->tensors[op->n_in].line, err, errlen,
		               "a collective works in place on its inputs and declares no outputs");
	if (op->n_in_required != 1)
		return op_fail(op, op->line, err, errlen,
		               "a collective's first input (rank 0) is required and the others "
		               "are optional");
	for (int i = 0; i < op->n_in; i++)
		if (!op->tensors[i].mutated || !op->tensors[i].packed)
			return op_fail(op, op->tensors[i].line, err, errlen,
			               "input '%s': a collective's inputs are mutated and packed",
			               op->tensors[i].name);
	return 0;
}

int manifest_check_op(const manifest_op *op, char *err, size_t errlen)
{
	if (check_names(op, err, errlen) < 0 || check_tensors(op, err, errlen) < 0 ||
	    check_params(op, err, errlen) < 0 || check_workloads(op, err, errlen) < 0)
		return -1;
	for (int i = 0; i < op->n_kernels; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(op->kernels[i].name, op->kernels[j].name))
				return op_fail(op, op->kernels[i].line, err, errlen,
				               "kernel '%s' is declared twice",
				               op->kernels[i].name);
	if (op->collective && check_collective(op, err, errlen) < 0)
		return -1;
	if (op->status != MANIFEST_IMPLEMENTED)
		return 0;
	if (op->n_workloads == 0)
		return op_fail(op, op->line, err, errlen,
		               "an implemented op needs at least one "
		               "workload");
	if (op->collective)
		return 0;
	for (int i = 0; i < op->n_kernels; i++)
		if (!strcmp(op->kernels[i].backend, "cpu"))
			return 0;
	return op_fail(op, op->line, err, errlen, "an implemented op must declare a cpu kernel");
}

/* ---- the kernel table ---------------------------------------------------------- */

typedef struct problems {
	char *err;
	size_t errlen, used;
	int count;
} problems;

static void problem(problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(problems *p, const char *fmt, ...)
{
	va_list ap;
	int w;

	p->count++;
	if (!p->err || p->used + 1 >= p->errlen)
		return;
	if (p->used)
		p->err[p->used++] = '\n';
	va_start(ap, fmt);
	w = vsnprintf(p->err + p->used, p->errlen - p->used, fmt, ap);
	va_end(ap);
	if (w > 0)
		p->used += (size_t)w < p->errlen - p->used ? (size_t)w : p->errlen - p->used - 1;
}

static void check_entry_params(problems *pr, const manifest_op *op, const tk_kernel_entry *e)
{
	int n = 0;

	for (; e->params && e->params[n]; n++) {
		int found = 0;

		for (int i = 0; i < op->n_params; i++)
			found |= !strcmp(op->params[i].name, e->params[n]);
		if (!found)
			problem(pr,
			        "%s:%d: op '%s': the kernel reads param '%s', which the manifest "
			        "does not declare",
			        op->file, op->line, op->name, e->params[n]);
	}
	if (n != op->n_params)
		problem(pr, "%s:%d: op '%s': the manifest declares %d params, the kernel reads %d",
		        op->file, op->line, op->name, op->n_params, n);
}

int manifest_check_kernels(const manifest *m, const tk_kernel_entry *table, size_t n, int need_cuda,
                           char *err, size_t errlen)
{
	problems pr = { err, errlen, 0, 0 };

	if (err && errlen)
		err[0] = 0;
	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];
		const tk_kernel_entry *e = NULL;

		for (size_t k = 0; k < n && !e; k++)
			if (!strcmp(table[k].op, op->name))
				e = &table[k];
		if (op->collective) {
			if (e)
				problem(&pr,
				        "%s:%d: op '%s' is a collective (served by the backend) "
				        "but "
				        "has a registered kernel",
				        op->file, op->line, op->name);
			continue;
		}
		if (op->status != MANIFEST_IMPLEMENTED) {
			if (e)
				problem(&pr,
				        "%s:%d: op '%s' has a registered kernel but its status is "
				        "'spec'",
				        op->file, op->line, op->name);
			continue;
		}
		if (!e || !e->cpu) {
			problem(&pr,
			        "%s:%d: op '%s' is implemented but has no registered cpu kernel",
			        op->file, op->line, op->name);
			continue;
		}
		if (need_cuda && !e->cuda)
			problem(&pr,
			        "%s:%d: op '%s' is implemented but has no registered cuda "
			        "kernel",
			        op->file, op->line, op->name);
		if (e->n_in != op->n_in || e->n_out != op->n_out)
			problem(&pr,
			        "%s:%d: op '%s': the manifest declares %d inputs and %d "
			        "outputs, the kernel takes %d and %d",
			        op->file, op->line, op->name, op->n_in, op->n_out, e->n_in,
			        e->n_out);
		check_entry_params(&pr, op, e);
	}
	for (size_t k = 0; k < n; k++)
		if (!manifest_find(m, table[k].op))
			problem(&pr,
			        "kernel '%s' is registered but no op of that name is in the "
			        "manifest",
			        table[k].op);
	return pr.count ? -1 : 0;
}
