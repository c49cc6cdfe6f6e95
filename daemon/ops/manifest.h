/*
 * manifest.h - the op manifest: every op's signature, dtype and shape rules,
 * params, workloads, roofline and kernels, loaded from manifest/<family>.yaml.
 *
 * docs/manifest.md is the schema. Loading validates everything (YAML
 * syntax, keys, dtypes, expressions, cross references, and agreement with
 * the kernel table); a manifest that loads is safe to serve requests from.
 *
 * Ownership: manifest_load allocates the manifest and everything it points
 * to; manifest_free releases it all (NULL is a no-op). Pointers returned by
 * manifest_find and the fields of its structs live as long as the manifest.
 *
 * Thread safety: a loaded manifest is immutable. Any number of threads may
 * read it at once. To reload, load a new one, swap the pointer readers use,
 * and free the old one once no reader holds it.
 */
#ifndef TILEOPS_MANIFEST_H
#define TILEOPS_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "expr.h"
#include "tileops_kernels.h"

#define MANIFEST_MAX_TENSORS (TK_MAX_INPUTS + TK_MAX_OUTPUTS)
#define MANIFEST_MAX_VARS 16
#define MANIFEST_MAX_VALUES 16

typedef enum manifest_op_status {
	MANIFEST_SPEC = 0,       /* declared; no kernel yet */
	MANIFEST_IMPLEMENTED = 1 /* served by a registered kernel */
} manifest_op_status;

/* A dtype rule: a union of dtypes, and/or "same dtype as tensor i". */
typedef struct manifest_dtype_rule {
	uint32_t mask; /* bit (1 << tk_dtype) for each allowed dtype */
	int same_as;   /* tensor index, or -1 */
	char *text;    /* as written, e.g. "f16 | bf16 | f32" or "same_as(x)" */
} manifest_dtype_rule;

/* What a collective op does (the op key `collective`): its ranks' tensors
 * are the inputs, one per device, and the backend's collective operation
 * serves it, not a kernel (docs/manifest.md). */
typedef enum manifest_collective {
	MANIFEST_NOT_COLLECTIVE = 0,
	MANIFEST_ALL_REDUCE = 1,
	MANIFEST_ALL_GATHER = 2,
	MANIFEST_REDUCE_SCATTER = 3
} manifest_collective;

typedef struct manifest_tensor {
	char *name;
	char *doc;
	int line;
	manifest_dtype_rule dtype;
	int rank_min, rank_max; /* 0..TK_MAX_DIMS unless declared */
	expr *shape;            /* NULL, or a list-valued expression */
	int optional;           /* may be omitted (trailing) or left out (handle 0) */
	int mutated;            /* the kernel writes this input in place */
	int packed;             /* packed row-major only: its kernels take no row strides */
} manifest_tensor;

typedef struct manifest_param {
	char *name;
	char *doc;
	int line;
	tk_param_kind type;
	int has_default;
	tk_param def; /* the default, of kind `type` */
	/* Allowed range: lo/hi bounds, each present or not, open or closed. */
	int has_lo, has_hi, lo_open, hi_open;
	double lo, hi;
	char *range_text; /* e.g. "(0, 1]", NULL when unbounded */
	int n_values;     /* allowed values; 0 means any */
	double values[MANIFEST_MAX_VALUES];
} manifest_param;

typedef struct manifest_rule {
	expr *check;   /* bool-valued */
	char *message; /* may be NULL */
	int line;
} manifest_rule;

typedef struct manifest_var {
	char *name;
	expr *value; /* int, float or bool */
} manifest_var;

typedef struct manifest_workload {
	char *label;
	char *model;
	int line;
	uint32_t dtypes; /* bitmask by tk_dtype of the first input */
	int n_shapes;
	int tensor[MANIFEST_MAX_TENSORS]; /* tensor index of each given shape */
	int ndim[MANIFEST_MAX_TENSORS];
	int64_t shape[MANIFEST_MAX_TENSORS][TK_MAX_DIMS];
	int n_params;
	int param[TK_MAX_PARAMS];
	tk_param value[TK_MAX_PARAMS];
} manifest_workload;

typedef struct manifest_kernel {
	char *name;
	char *backend; /* "cpu" or "cuda" */
	expr *when;    /* bool-valued; "true" when not declared */
	int workspace; /* the kernel goes faster with TK_WORKSPACE_BYTES of scratch */
	int tuning;    /* cuda: the kernel has a tuning interface (tk_tuning_<op>) */
	int line;
} manifest_kernel;

typedef struct manifest_op {
	char *name;
	char *family;
	char *torch;
	char *doc;
	char *file;
	int line;
	manifest_op_status status;
	int n_in, n_in_required, n_out, n_out_required;
	manifest_tensor tensors[MANIFEST_MAX_TENSORS]; /* inputs, then outputs */
	int n_params;
	manifest_param params[TK_MAX_PARAMS];
	int n_rules;
	manifest_rule *rules;
	int n_vars;
	manifest_var vars[MANIFEST_MAX_VARS];
	expr *flops, *bytes; /* NULL when the op declares no roofline */
	int n_workloads;
	manifest_workload *workloads;
	int n_kernels;
	manifest_kernel *kernels;
	int diagnostic; /* from MANIFEST_DIAGNOSTIC_DIR: served only when asked */
	manifest_collective collective;
} manifest_op;

typedef struct manifest {
	int n_ops;
	manifest_op *ops; /* sorted by name */
	int n_files;
	char **files;
	/* Whether the op layer serves the diagnostic ops (set by the daemon from
	 * its config; 0 after loading). */
	int serve_diagnostic;
} manifest;

/*
 * The subfolder of a manifest directory with the diagnostic ops: ops that
 * stand for device work of a chosen length (spin) or fault on purpose, for
 * benches and tests. They are loaded with the rest, so the kernel table
 * and the manifest agree, but the op layer refuses them unless
 * serve_diagnostic is set (the daemon's diagnostic_ops = on): a client
 * could otherwise hold the device with them.
 */
#define MANIFEST_DIAGNOSTIC_DIR "diagnostic"

/*
 * Load `path`: a directory (every *.yaml in it, in name order, then those of
 * its MANIFEST_DIAGNOSTIC_DIR subfolder, if there is one) or one file.
 * Validates the schema, every expression, cross references and the
 * agreement of implemented ops with the kernel table (tk_kernels(): each has
 * a cpu kernel with the same inputs, outputs and param names).
 * On success returns 0 and sets *out; on failure returns -1, leaves *out
 * NULL and writes "FILE:LINE:COL: op 'x': key 'k': what is wrong" to err.
 */
int manifest_load(const char *path, manifest **out, char *err, size_t errlen);

/* As manifest_load, without checking against the kernel table. */
int manifest_parse(const char *path, manifest **out, char *err, size_t errlen);

/* As manifest_parse, of one file's text held in memory (len bytes, no NUL
 * needed); `name` stands for the file in messages. */
int manifest_parse_text(const char *name, const char *text, size_t len, manifest **out, char *err,
                        size_t errlen);

void manifest_free(manifest *m);

/* The op called `name`, or NULL. O(log n). */
const manifest_op *manifest_find(const manifest *m, const char *name);

/*
 * Check the manifest against a kernel table: every implemented op has an
 * entry with a cpu kernel (and a cuda one when `need_cuda`), the same input
 * and output counts and the same param names; every entry is an
 * implemented op. Returns 0, or -1 with every problem found in err.
 */
int manifest_check_kernels(const manifest *m, const tk_kernel_entry *table, size_t n, int need_cuda,
                           char *err, size_t errlen);

/* Semantic checks of one parsed op (used by the loader). */
int manifest_check_op(const manifest_op *op, char *err, size_t errlen);

/* Dtype names as in the wire enum: "f32", "bf16", ...; TK_DTYPE_INVALID if unknown. */
tk_dtype manifest_dtype_parse(const char *name);
const char *manifest_dtype_name(tk_dtype dt);

/* Write a dtype rule's allowed set as "f16 | bf16 | f32". */
void manifest_dtype_mask_str(uint32_t mask, char *buf, size_t len);

#endif /* TILEOPS_MANIFEST_H */
