/*
 * tool_docs.c - tileops-manifest's json and docs commands. The Markdown is
 * deterministic (no paths, no dates) so that a test can compare the
 * committed docs/ops.md with a fresh one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "oplayer.h"
#include "tool.h"

/* ---- json -------------------------------------------------------------------------- */

static void jstr(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void jvalue(FILE *f, const tk_param *v)
{
	if (v->kind == TK_PARAM_FLOAT && isinf(v->v.f))
		fputs(v->v.f > 0 ? "\"inf\"" : "\"-inf\"", f); /* JSON has no infinity */
	else if (v->kind == TK_PARAM_FLOAT)
		fprintf(f, "%.17g", v->v.f);
	else if (v->kind == TK_PARAM_BOOL)
		fputs(v->v.b ? "true" : "false", f);
	else
		fprintf(f, "%lld", (long long)v->v.i);
}

static void json_tensor(FILE *f, const manifest_tensor *t)
{
	fputs("{\"name\": ", f);
	jstr(f, t->name);
	fputs(", \"dtype\": ", f);
	jstr(f, t->dtype.text);
	fprintf(f, ", \"rank\": [%d, %d], \"shape\": ", t->rank_min, t->rank_max);
	jstr(f, t->shape ? expr_text(t->shape) : NULL);
	fprintf(f, ", \"optional\": %s, \"mutated\": %s, \"packed\": %s, \"doc\": ",
	        t->optional ? "true" : "false", t->mutated ? "true" : "false",
	        t->packed ? "true" : "false");
	jstr(f, t->doc);
	fputc('}', f);
}

static void json_param(FILE *f, const manifest_param *p)
{
	fputs("{\"name\": ", f);
	jstr(f, p->name);
	fprintf(f, ", \"type\": \"%s\", \"default\": ", tool_type_name(p->type));
	if (p->has_default)
		jvalue(f, &p->def);
	else
		fputs("null", f);
	fputs(", \"range\": ", f);
	jstr(f, p->range_text);
	fputs(", \"values\": [", f);
	for (int k = 0; k < p->n_values; k++)
		fprintf(f, "%s%.17g", k ? ", " : "", p->values[k]);
	fputs("], \"doc\": ", f);
	jstr(f, p->doc);
	fputc('}', f);
}

static void json_workload(FILE *f, const manifest_op *op, const manifest_workload *w)
{
	tk_dtype dt = tool_first_dtype(w->dtypes);
	op_cost cost = { 0, 0 };
	char err[512];

	fputs("{\"label\": ", f);
	jstr(f, w->label);
	fputs(", \"model\": ", f);
	jstr(f, w->model);
	fputs(", \"dtypes\": [", f);
	for (int k = 1, n = 0; k < TK_DTYPE_COUNT; k++)
		if (w->dtypes & (1u << k))
			fprintf(f, "%s\"%s\"", n++ ? ", " : "", manifest_dtype_name((tk_dtype)k));
	fputs("], \"shapes\": {", f);
	for (int s = 0; s < w->n_shapes; s++) {
		fprintf(f, "%s\"%s\": [", s ? ", " : "", op->tensors[w->tensor[s]].name);
		for (int d = 0; d < w->ndim[s]; d++)
			fprintf(f, "%s%lld", d ? ", " : "", (long long)w->shape[s][d]);
		fputc(']', f);
	}
	fputs("}, \"params\": {", f);
	for (int i = 0; i < w->n_params; i++) {
		fprintf(f, "%s\"%s\": ", i ? ", " : "", op->params[w->param[i]].name);
		jvalue(f, &w->value[i]);
	}
	oplayer_check_workload(op, w, dt, &cost, err, sizeof(err));
	fprintf(f, "}, \"flops\": %.17g, \"bytes\": %.17g}", cost.flops, cost.bytes);
}

static void json_op(FILE *f, const manifest_op *op)
{
	fputs("    {\"name\": ", f);
	jstr(f, op->name);
	fputs(", \"family\": ", f);
	jstr(f, op->family);
	fprintf(f, ", \"status\": \"%s\", \"torch\": ",
	        op->status == MANIFEST_IMPLEMENTED ? "implemented" : "spec");
	jstr(f, op->torch);
	fputs(", \"doc\": ", f);
	jstr(f, op->doc);
	fputs(",\n     \"inputs\": [", f);
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		if (i == op->n_in)
			fputs("], \"outputs\": [", f);
		else if (i)
			fputs(", ", f);
		json_tensor(f, &op->tensors[i]);
	}
	fputs("],\n     \"params\": [", f);
	for (int i = 0; i < op->n_params; i++) {
		fputs(i ? ", " : "", f);
		json_param(f, &op->params[i]);
	}
	fputs("],\n     \"rules\": [", f);
	for (int i = 0; i < op->n_rules; i++) {
		fputs(i ? ", {\"check\": " : "{\"check\": ", f);
		jstr(f, expr_text(op->rules[i].check));
		fputs(", \"message\": ", f);
		jstr(f, op->rules[i].message);
		fputc('}', f);
	}
	fputs("],\n     \"roofline\": {\"vars\": {", f);
	for (int i = 0; i < op->n_vars; i++) {
		fprintf(f, "%s\"%s\": ", i ? ", " : "", op->vars[i].name);
		jstr(f, expr_text(op->vars[i].value));
	}
	fputs("}, \"flops\": ", f);
	jstr(f, op->flops ? expr_text(op->flops) : NULL);
	fputs(", \"bytes\": ", f);
	jstr(f, op->bytes ? expr_text(op->bytes) : NULL);
	fputs("},\n     \"workloads\": [", f);
	for (int i = 0; i < op->n_workloads; i++) {
		fputs(i ? ",\n       " : "\n       ", f);
		json_workload(f, op, &op->workloads[i]);
	}
	fputs("],\n     \"kernels\": [", f);
	for (int i = 0; i < op->n_kernels; i++) {
		fprintf(f, "%s{\"name\": ", i ? ", " : "");
		jstr(f, op->kernels[i].name);
		fprintf(f, ", \"backend\": \"%s\", \"when\": ", op->kernels[i].backend);
		jstr(f, expr_text(op->kernels[i].when));
		fputc('}', f);
	}
	fputs("]}", f);
}

int tool_json(const manifest *m)
{
	fputs("{\"ops\": [\n", stdout);
	for (int i = 0; i < m->n_ops; i++) {
		json_op(stdout, &m->ops[i]);
		fputs(i + 1 < m->n_ops ? ",\n" : "\n", stdout);
	}
	fputs("]}\n", stdout);
	return 0;
}

/* ---- docs ------------------------------------------------------------------------------ */

/* Markdown table cells: a '|' inside code would end the cell. */
static void md(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '|')
			fputs("\\|", f);
		else
			fputc(*s, f);
	}
}

static void md_code(FILE *f, const char *s)
{
	fputc('`', f);
	md(f, s);
	fputc('`', f);
}

static void doc_tensors(FILE *f, const manifest_op *op)
{
	fputs("| tensor | dtype | rank | shape | notes |\n| --- | --- | --- | --- | --- |\n", f);
	for (int i = 0; i < op->n_in + op->n_out; i++) {
		const manifest_tensor *t = &op->tensors[i];
		char r[16];

		tool_rank(t, r, sizeof(r));
		fprintf(f, "| %s `%s` | ", i < op->n_in ? "in" : "out", t->name);
		md_code(f, t->dtype.text);
		fprintf(f, " | %s | ", r);
		if (t->shape)
			md_code(f, expr_text(t->shape));
		fprintf(f, " | %s%s%s", t->optional ? "optional. " : "",
		        t->mutated ? "mutated. " : "",
		        t->packed ? "packed only (no row strides). " : "");
		md(f, t->doc);
		fputs(" |\n", f);
	}
}

static void doc_params(FILE *f, const manifest_op *op)
{
	if (!op->n_params)
		return;
	fputs("\n| param | type | default | allowed | notes |\n| --- | --- | --- | --- | --- |\n",
	      f);
	for (int i = 0; i < op->n_params; i++) {
		const manifest_param *p = &op->params[i];
		char d[48], a[160];

		tool_param_default(p, d, sizeof(d));
		tool_param_allowed(p, a, sizeof(a));
		fprintf(f, "| `%s` | %s | %s | %s | ", p->name, tool_type_name(p->type), d, a);
		md(f, p->doc);
		fputs(" |\n", f);
	}
}

static void doc_rules(FILE *f, const manifest_op *op)
{
	if (op->n_rules)
		fputs("\nRules:\n", f);
	for (int i = 0; i < op->n_rules; i++) {
		fputs("- ", f);
		md_code(f, expr_text(op->rules[i].check));
		if (op->rules[i].message)
			fprintf(f, ": %s", op->rules[i].message);
		fputc('\n', f);
	}
	fputs("\nRoofline:", f);
	for (int i = 0; i < op->n_vars; i++) {
		fprintf(f, "%s`%s = ", i ? ", " : " ", op->vars[i].name);
		md(f, expr_text(op->vars[i].value));
		fputc('`', f);
	}
	fputs(op->n_vars ? "; flops " : " flops ", f);
	md_code(f, op->flops ? expr_text(op->flops) : "0");
	fputs(", bytes ", f);
	md_code(f, op->bytes ? expr_text(op->bytes) : "0");
	fputs(".\n", f);
}

static void doc_workloads(FILE *f, const manifest_op *op)
{
	if (!op->n_workloads)
		return;
	fputs("\n| workload | model | shapes | dtypes | GFLOP | MB moved |\n"
	      "| --- | --- | --- | --- | --- | --- |\n",
	      f);
	for (int i = 0; i < op->n_workloads; i++) {
		const manifest_workload *w = &op->workloads[i];
		op_cost cost = { 0, 0 };
		char dims[512], err[512], dts[128];

		tool_dims(w, op, dims, sizeof(dims));
		manifest_dtype_mask_str(w->dtypes, dts, sizeof(dts));
		fprintf(f, "| %s | %s | %s | ", w->label, w->model, dims);
		md(f, dts);
		if (oplayer_check_workload(op, w, tool_first_dtype(w->dtypes), &cost, err,
		                           sizeof(err)) == TILEOPS_OK)
			fprintf(f, " | %.4g | %.4g |\n", cost.flops / 1e9, cost.bytes / 1e6);
		else
			fputs(" | - | - |\n", f);
	}
}

static void doc_op(FILE *f, const manifest_op *op)
{
	char sig[512];

	tool_signature(op, sig, sizeof(sig));
	fprintf(f, "\n### %s\n\n`%s`\n\n", op->name, sig);
	fprintf(f, "Status: **%s**. Matches `%s`.",
	        op->status == MANIFEST_IMPLEMENTED ? "implemented" : "spec", op->torch);
	if (op->doc)
		fprintf(f, " %s", op->doc);
	fputs("\n\n", f);
	doc_tensors(f, op);
	doc_params(f, op);
	doc_rules(f, op);
	doc_workloads(f, op);
	if (op->n_kernels)
		fputs("\nKernels:", f);
	for (int i = 0; i < op->n_kernels; i++) {
		fprintf(f, "%s`%s` (%s, when ", i ? "; " : " ", op->kernels[i].name,
		        op->kernels[i].backend);
		md_code(f, expr_text(op->kernels[i].when));
		fputc(')', f);
	}
	fputs(op->n_kernels ? ".\n" : "", f);
}

int tool_docs(const manifest *m, const char *out)
{
	FILE *f = out ? fopen(out, "w") : stdout;
	const char *family = NULL;
	int implemented = 0;

	if (!f) {
		perror(out);
		return 1;
	}
	for (int i = 0; i < m->n_ops; i++)
		implemented += m->ops[i].status == MANIFEST_IMPLEMENTED;
	fprintf(f,
	        "# TileOPs ops\n\n"
	        "Generated from the files in manifest/ by `tileops-manifest docs docs/ops.md`; do "
	        "not edit.\n"
	        "The schema is in [manifest.md](manifest.md). %d ops, %d implemented; the others "
	        "are specified and refused with TILEOPS_ERR_UNSUPPORTED until their kernels "
	        "exist.\n"
	        "GFLOP and MB are the roofline formulas evaluated at each workload's first "
	        "dtype.\n\n"
	        "Row strides: every tensor may be a contiguous tensor or view, and every tensor "
	        "not marked \"packed only\" may also be row-strided: its last dimension "
	        "contiguous (stride 1) and each outer stride at least the extent of the dims "
	        "inside it, as a view of some columns of a wider buffer (q, k and v of a fused "
	        "qkv projection) or of every S-th row (the last token of each sequence) is "
	        "(tileops_tensor_view). Any other layout is refused with TILEOPS_ERR_SHAPE, "
	        "naming the op and the tensor.\n\n"
	        "| op | family | status | matches |\n| --- | --- | --- | --- |\n",
	        m->n_ops, implemented);
	for (int i = 0; i < m->n_ops; i++)
		fprintf(f, "| [%s](#%s) | %s | %s | `%s` |\n", m->ops[i].name, m->ops[i].name,
		        m->ops[i].family,
		        m->ops[i].status == MANIFEST_IMPLEMENTED ? "implemented" : "spec",
		        m->ops[i].torch);
	/* Ops are sorted by name; group them by family in file order of appearance. */
	for (int fi = 0; fi < m->n_files; fi++) {
		family = NULL;
		for (int i = 0; i < m->n_ops; i++) {
			const manifest_op *op = &m->ops[i];

			if (strcmp(op->file, m->files[fi]))
				continue;
			if (!family) {
				family = op->family;
				fprintf(f, "\n## %s\n", family);
			}
			doc_op(f, op);
		}
	}
	if (out && fclose(f) != 0) {
		perror(out);
		return 1;
	}
	return 0;
}
