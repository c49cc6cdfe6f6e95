/*
 * tool.c - tileops-manifest: validate, list, show and document the op
 * manifest.
 *
 *   tileops-manifest [-m PATH] validate [PATH]
 *   tileops-manifest [-m PATH] list
 *   tileops-manifest [-m PATH] show OP
 *   tileops-manifest [-m PATH] json
 *   tileops-manifest [-m PATH] docs [OUT]
 *   tileops-manifest [-m PATH] check-ops [--root DIR]
 *
 * PATH defaults to $TILEOPS_MANIFEST, then the installed manifest; for
 * check-ops, to DIR/manifest, DIR being the source tree (by default the
 * one this program was built from).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "oplayer.h"
#include "tool.h"

#ifndef TILEOPS_DEFAULT_MANIFEST
#define TILEOPS_DEFAULT_MANIFEST "/usr/local/share/tileops/manifest"
#endif
#ifndef TILEOPS_SOURCE_DIR
#define TILEOPS_SOURCE_DIR "."
#endif

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: tileops-manifest [-m PATH] COMMAND\n"
	        "  validate [PATH]  check the schema, expressions, workloads and kernel coverage\n"
	        "  list             one line per op\n"
	        "  show OP          everything the manifest says about OP\n"
	        "  json             the whole manifest as JSON\n"
	        "  docs [OUT]       write the op reference (docs/ops.md) to OUT or stdout\n"
	        "  check-ops [--root DIR]\n"
	        "                   every op has its kernels, workloads, roofline, doc, "
	        "docs/ops.md\n"
	        "                   entry and CPU reference test in the source tree DIR (default\n"
	        "                   %s; the manifest: DIR/manifest unless -m)\n"
	        "PATH: a manifest directory or file; default $TILEOPS_MANIFEST, then %s\n",
	        TILEOPS_SOURCE_DIR, TILEOPS_DEFAULT_MANIFEST);
}

void tool_param_default(const manifest_param *p, char *buf, size_t len)
{
	if (!p->has_default)
		snprintf(buf, len, "required");
	else if (p->type == TK_PARAM_FLOAT)
		snprintf(buf, len, "%g", p->def.v.f);
	else if (p->type == TK_PARAM_BOOL)
		snprintf(buf, len, "%s", p->def.v.b ? "true" : "false");
	else
		snprintf(buf, len, "%lld", (long long)p->def.v.i);
}

void tool_param_allowed(const manifest_param *p, char *buf, size_t len)
{
	size_t u = 0;

	buf[0] = 0;
	if (p->range_text)
		u += (size_t)snprintf(buf, len, "%s", p->range_text);
	if (p->n_values && u < len)
		u += (size_t)snprintf(buf + u, len - u, "%s{", u ? " " : "");
	for (int k = 0; k < p->n_values && u < len; k++)
		u += (size_t)snprintf(buf + u, len - u, "%s%g", k ? ", " : "", p->values[k]);
	if (p->n_values && u < len)
		snprintf(buf + u, len - u, "}");
}

const char *tool_type_name(tk_param_kind k)
{
	return k == TK_PARAM_INT ? "int" : k == TK_PARAM_FLOAT ? "float" : "bool";
}

void tool_signature(const manifest_op *op, char *buf, size_t len)
{
	size_t u = (size_t)snprintf(buf, len, "%s(", op->name);

	for (int i = 0; i < op->n_in && u < len; i++)
		u += (size_t)snprintf(buf + u, len - u, "%s%s%s", i ? ", " : "",
		                      op->tensors[i].name, op->tensors[i].optional ? "=None" : "");
	for (int i = 0; i < op->n_params && u < len; i++) {
		char d[48];

		tool_param_default(&op->params[i], d, sizeof(d));
		u += (size_t)snprintf(buf + u, len - u, "%s%s%s%s", i ? ", " : ", *, ",
		                      op->params[i].name, op->params[i].has_default ? "=" : "",
		                      op->params[i].has_default ? d : "");
	}
	for (int i = 0; i < op->n_out && u < len; i++)
		u += (size_t)snprintf(buf + u, len - u, "%s%s", i ? ", " : ") -> ",
		                      op->tensors[op->n_in + i].name);
	/* An op that writes its inputs in place returns nothing. */
	if (op->n_out == 0 && u < len)
		snprintf(buf + u, len - u, ")");
}

void tool_rank(const manifest_tensor *t, char *buf, size_t len)
{
	if (t->rank_min == t->rank_max)
		snprintf(buf, len, "%d", t->rank_min);
	else
		snprintf(buf, len, "%d..%d", t->rank_min, t->rank_max);
}

void tool_dims(const manifest_workload *w, const manifest_op *op, char *buf, size_t len)
{
	size_t u = 0;

	buf[0] = 0;
	for (int s = 0; s < w->n_shapes && u < len; s++) {
		u += (size_t)snprintf(buf + u, len - u, "%s%s [", s ? ", " : "",
		                      op->tensors[w->tensor[s]].name);
		for (int d = 0; d < w->ndim[s] && u < len; d++)
			u += (size_t)snprintf(buf + u, len - u, "%s%lld", d ? ", " : "",
			                      (long long)w->shape[s][d]);
		if (u < len)
			u += (size_t)snprintf(buf + u, len - u, "]");
	}
}

tk_dtype tool_first_dtype(uint32_t mask)
{
	for (int k = 1; k < TK_DTYPE_COUNT; k++)
		if (mask & (1u << k))
			return (tk_dtype)k;
	return TK_DTYPE_INVALID;
}

/* ---- validate --------------------------------------------------------------------- */

static int cmd_validate(const char *path)
{
	static char err[16384];
	const tk_kernel_entry *table;
	manifest *m;
	size_t n;
	int bad = 0, checked = 0, implemented = 0;

	if (manifest_parse(path, &m, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	table = tk_kernels(&n);
	if (manifest_check_kernels(m, table, n, tk_have_cuda(), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		bad++;
	}
	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];

		implemented += op->status == MANIFEST_IMPLEMENTED;
		for (int w = 0; w < op->n_workloads; w++) {
			for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
				op_cost cost;

				if (!(op->workloads[w].dtypes & (1u << dt)))
					continue;
				checked++;
				if (oplayer_check_workload(op, &op->workloads[w], (tk_dtype)dt,
				                           &cost, err, sizeof(err)) == TILEOPS_OK)
					continue;
				fprintf(stderr,
				        "%s:%d: workload '%s' (%s) breaks the op's rules: %s\n",
				        op->file, op->workloads[w].line, op->workloads[w].label,
				        manifest_dtype_name((tk_dtype)dt), err);
				bad++;
			}
		}
	}
	if (!bad)
		printf("manifest ok: %d ops (%d implemented), %zu kernels, %d workload runs "
		       "checked%s\n",
		       m->n_ops, implemented, n, checked, tk_have_cuda() ? ", cuda covered" : "");
	manifest_free(m);
	return bad ? 1 : 0;
}

/* ---- list, show ------------------------------------------------------------------------ */

static int cmd_list(const manifest *m)
{
	for (int i = 0; i < m->n_ops; i++)
		printf("%-24s %-14s %-12s %s\n", m->ops[i].name, m->ops[i].family,
		       m->ops[i].status == MANIFEST_IMPLEMENTED ? "implemented" : "spec",
		       m->ops[i].torch);
	return 0;
}

static int cmd_show(const manifest *m, const char *name)
{
	const manifest_op *op = manifest_find(m, name);
	char buf[512];

	if (!op) {
		fprintf(stderr, "tileops-manifest: unknown op '%s'\n", name);
		return 1;
	}
	tool_signature(op, buf, sizeof(buf));
	printf("%s\n  family %s, status %s, matches %s\n  declared at %s:%d\n", buf, op->family,
	       op->status == MANIFEST_IMPLEMENTED ? "implemented" : "spec", op->torch, op->file,
	       op->line);
	if (op->doc)
		printf("  %s\n", op->doc);
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *t = &op->tensors[i];
		char r[16];

		tool_rank(t, r, sizeof(r));
		printf("  %s %s: dtype %s, rank %s%s%s%s%s\n", i < op->n_in ? "input " : "output",
		       t->name, t->dtype.text, r, t->shape ? ", shape " : "",
		       t->shape ? expr_text(t->shape) : "", t->optional ? ", optional" : "",
		       t->mutated ? ", mutated" : "");
	}
	for (int i = 0; i < op->n_params; i++) {
		char d[48], a[160];

		tool_param_default(&op->params[i], d, sizeof(d));
		tool_param_allowed(&op->params[i], a, sizeof(a));
		printf("  param %s: %s, default %s%s%s\n", op->params[i].name,
		       tool_type_name(op->params[i].type), d, a[0] ? ", allowed " : "", a);
	}
	for (int i = 0; i < op->n_rules; i++)
		printf("  rule: %s%s%s\n", expr_text(op->rules[i].check),
		       op->rules[i].message ? "  -- " : "",
		       op->rules[i].message ? op->rules[i].message : "");
	for (int i = 0; i < op->n_vars; i++)
		printf("  var %s = %s\n", op->vars[i].name, expr_text(op->vars[i].value));
	if (op->flops)
		printf("  flops = %s\n  bytes = %s\n", expr_text(op->flops), expr_text(op->bytes));
	for (int i = 0; i < op->n_workloads; i++) {
		tool_dims(&op->workloads[i], op, buf, sizeof(buf));
		printf("  workload %s (%s): %s\n", op->workloads[i].label, op->workloads[i].model,
		       buf);
	}
	for (int i = 0; i < op->n_kernels; i++)
		printf("  kernel %s [%s] when %s\n", op->kernels[i].name, op->kernels[i].backend,
		       expr_text(op->kernels[i].when));
	return 0;
}

/* ---- check-ops --------------------------------------------------------------------------- */

static int cmd_check_ops(int argc, char **argv, const char *path)
{
	static char err[8192], own[4096];
	const char *root = TILEOPS_SOURCE_DIR;
	manifest *m;
	int rc;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc) {
			root = argv[++i];
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!path) {
		snprintf(own, sizeof(own), "%s/manifest", root);
		path = own;
	}
	if (manifest_parse(path, &m, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	rc = tool_check_ops(m, root);
	manifest_free(m);
	return rc;
}

int main(int argc, char **argv)
{
	static char err[8192];
	const char *path = getenv("TILEOPS_MANIFEST");
	manifest *m;
	int i = 1, rc, given = 0;

	if (!path || !*path)
		path = TILEOPS_DEFAULT_MANIFEST;
	if (i + 1 < argc && !strcmp(argv[i], "-m")) {
		path = argv[i + 1];
		given = 1;
		i += 2;
	}
	if (i >= argc || !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
		usage(i >= argc ? stderr : stdout);
		return i >= argc ? 2 : 0;
	}
	if (!strcmp(argv[i], "validate"))
		return cmd_validate(i + 1 < argc ? argv[i + 1] : path);
	if (!strcmp(argv[i], "check-ops"))
		return cmd_check_ops(argc - i - 1, argv + i + 1, given ? path : NULL);
	if (manifest_parse(path, &m, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (!strcmp(argv[i], "list")) {
		rc = cmd_list(m);
	} else if (!strcmp(argv[i], "show") && i + 1 < argc) {
		rc = cmd_show(m, argv[i + 1]);
	} else if (!strcmp(argv[i], "json")) {
		rc = tool_json(m);
	} else if (!strcmp(argv[i], "docs")) {
		rc = tool_docs(m, i + 1 < argc ? argv[i + 1] : NULL);
	} else {
		usage(stderr);
		rc = 2;
	}
	manifest_free(m);
	return rc;
}
