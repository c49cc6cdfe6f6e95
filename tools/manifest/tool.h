/*
 * tool.h - pieces of tileops-manifest shared by its command files
 * (tool.c: validate, list, show; tool_docs.c: json, docs; tool_check.c:
 * check-ops).
 */
#ifndef TILEOPS_MANIFEST_TOOL_H
#define TILEOPS_MANIFEST_TOOL_H

#include <stddef.h>

#include "manifest.h"

/* "rms_norm(x, weight, *, eps=1e-06) -> out" */
void tool_signature(const manifest_op *op, char *buf, size_t len);
/* A param's default ("required" when it has none) and allowed values. */
void tool_param_default(const manifest_param *p, char *buf, size_t len);
void tool_param_allowed(const manifest_param *p, char *buf, size_t len);
const char *tool_type_name(tk_param_kind k);
/* "2" or "1..8" */
void tool_rank(const manifest_tensor *t, char *buf, size_t len);
/* "x [1, 4096], weight [4096]" */
void tool_dims(const manifest_workload *w, const manifest_op *op, char *buf, size_t len);
tk_dtype tool_first_dtype(uint32_t mask);

/* Print the manifest as JSON on stdout. Returns the exit status. */
int tool_json(const manifest *m);
/* Write the op reference as Markdown to `out` (stdout when NULL). */
int tool_docs(const manifest *m, const char *out);
/*
 * check-ops (tool_check.c): report every part an op of `m` lacks in the
 * source tree at `root` (kernels, docs/ops.md, tests/kernels), one line
 * each on stdout. Returns the exit status: 0 when nothing is missing.
 */
int tool_check_ops(const manifest *m, const char *root);

#endif /* TILEOPS_MANIFEST_TOOL_H */
