/*
 * manifest_yaml.h - the loader's internals, shared by manifest.c (files,
 * YAML helpers) and manifest_op.c (one op's keys). Not a public API.
 */
#ifndef TILEOPS_MANIFEST_YAML_H
#define TILEOPS_MANIFEST_YAML_H

#include <yaml.h>

#include "manifest.h"

/* The state of loading one file. */
typedef struct ld {
	yaml_document_t doc;
	const char *file;
	char *err;
	size_t errlen;
	manifest *m;
	const manifest_op *op; /* the op being loaded, for messages; may be NULL */
} ld;

/* Write "FILE:LINE:COL: op 'x': key 'k': ..." (node's position) and return -1. */
int ld_fail(ld *L, const yaml_node_t *n, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
yaml_node_t *ld_node(ld *L, yaml_node_item_t id);
const char *ld_scalar(ld *L, const yaml_node_t *n, const char *key);
int ld_kind(ld *L, const yaml_node_t *n, yaml_node_type_t t, const char *key);
int ld_keys(ld *L, const yaml_node_t *map, const char *what, const char *const *allowed,
            const char *const *required);
yaml_node_t *ld_get(ld *L, const yaml_node_t *map, const char *key);
int ld_string(ld *L, const yaml_node_t *map, const char *key, char **out);
int ld_int(ld *L, const yaml_node_t *n, const char *key, int64_t *out);
int ld_double(ld *L, const yaml_node_t *n, const char *key, double *out);
int ld_bool(ld *L, const yaml_node_t *n, const char *key, int *out);
int ld_flag(ld *L, const yaml_node_t *map, const char *key, int *out);
int ld_expr(ld *L, const yaml_node_t *n, const char *key, const expr_scope *scope,
            const expr_type *types, int n_types, expr **out);

/* Load a file's root mapping (family, ops) and append its ops to L->m. */
int ld_file(ld *L, const yaml_node_t *root);
/* Free everything an op owns (not the op itself). */
void manifest_op_clear(manifest_op *op);

#endif /* TILEOPS_MANIFEST_YAML_H */
