/*
 * test_loader.c - manifest_load / manifest_parse: a good manifest loads
 * into the documented structs; each kind of broken file is refused with a
 * message naming the file, line, column and key.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "manifest.h"

#define DATA TILEOPS_SOURCE_DIR "/tests/manifest/data/"

static void refused(const char *file, const char *where, const char *what)
{
	char err[1024] = "", path[512];
	manifest *m = (manifest *)1;

	snprintf(path, sizeof(path), "%s%s", DATA, file);
	cr_assert_eq(manifest_parse(path, &m, err, sizeof(err)), -1, "%s loaded", file);
	cr_assert_null(m);
	cr_assert(strstr(err, where), "message '%s' lacks '%s'", err, where);
	cr_assert(strstr(err, what), "message '%s' lacks '%s'", err, what);
}

Test(loader, unknown_key_is_refused_with_file_line_and_key)
{
	refused("unknown_key.yaml", "unknown_key.yaml:6:5: op 'toy': key 'colour'",
	        "unknown key in an op (allowed: name, family,");
}

Test(loader, bad_yaml_is_refused_with_its_position)
{
	refused("bad_yaml.yaml", "bad_yaml.yaml:5:4: bad YAML", "expected '-' indicator");
}

Test(loader, unknown_dtype_is_refused)
{
	refused("unknown_dtype.yaml", "unknown_dtype.yaml:8:16: op 'toy': key 'dtype'",
	        "unknown dtype 'f8'");
}

Test(loader, missing_required_key_is_refused)
{
	refused("missing_key.yaml", "missing_key.yaml:3:5: op 'toy': key 'torch'",
	        "missing required key");
}

Test(loader, bad_expression_names_its_column)
{
	/* The column points at the end of the text, inside the quoted scalar. */
	refused("bad_expr.yaml", "bad_expr.yaml:12:32: op 'toy': key 'shape'",
	        "bad expression 'x.shape[:-1] + ': unexpected end of expression");
}

Test(loader, expression_of_the_wrong_type_is_refused)
{
	refused("wrong_type.yaml", "wrong_type.yaml:12:16: op 'toy': key 'shape'",
	        "expression 'x.ndim + 1' is int, expected list");
}

Test(loader, same_as_must_name_a_tensor)
{
	refused("bad_same_as.yaml", "bad_same_as.yaml:11:16: op 'toy': key 'dtype'",
	        "same_as(y) names no tensor of the op");
}

Test(loader, an_op_declared_twice_is_refused)
{
	refused("dup_op.yaml", "dup_op.yaml:16: op 'toy' is declared twice", "dup_op.yaml:3");
}

Test(loader, an_optional_output_before_a_required_one_is_refused)
{
	refused("optional_output_first.yaml", "optional_output_first.yaml:14: op 'toy'",
	        "output 'out' follows an optional output: optional outputs must come last");
}

Test(loader, a_default_outside_its_values_is_refused)
{
	refused("bad_default.yaml", "bad_default.yaml:31: op 'scaled'",
	        "param 'steps': default 3 is not one of its values");
}

Test(loader, an_unknown_collective_is_refused)
{
	refused("collective_unknown.yaml",
	        "collective_unknown.yaml:5:17: op 'toy': key 'collective'",
	        "unknown collective 'broadcast' (all_reduce, all_gather or reduce_scatter)");
}

Test(loader, a_collective_with_kernels_is_refused)
{
	refused("collective_kernels.yaml", "collective_kernels.yaml:22: op 'toy'",
	        "a collective is served by the backend's collective operation and declares no "
	        "kernels");
}

Test(loader, a_collective_input_not_written_in_place_is_refused)
{
	refused("collective_not_mutated.yaml", "collective_not_mutated.yaml:12: op 'toy'",
	        "input 'x1': a collective's inputs are mutated and packed");
}

Test(loader, a_missing_path_is_refused)
{
	char err[256];
	manifest *m;

	cr_assert_eq(manifest_parse(DATA "no_such_file.yaml", &m, err, sizeof(err)), -1);
	cr_assert(strstr(err, "no_such_file.yaml: No such file"), "%s", err);
}

Test(loader, a_good_file_loads_into_the_documented_structs)
{
	char err[1024] = "";
	manifest *m = NULL;
	const manifest_op *op;
	const manifest_param *p;

	cr_assert_eq(manifest_parse(DATA "good.yaml", &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(m->n_ops, 2);
	cr_assert_null(manifest_find(m, "nope"));
	op = manifest_find(m, "scaled");
	cr_assert_not_null(op);
	cr_assert_str_eq(op->family, "test");
	cr_assert_eq(op->status, MANIFEST_SPEC);
	cr_assert_eq(op->n_in, 1);
	cr_assert_eq(op->n_out, 1);
	cr_assert_eq(op->tensors[0].dtype.mask, (1u << TK_F32) | (1u << TK_BF16));
	cr_assert_eq(op->tensors[0].rank_min, 1);
	cr_assert_eq(op->tensors[0].rank_max, 4);
	cr_assert_eq(op->tensors[1].dtype.same_as, 0);
	cr_assert_eq(op->n_params, 2);
	p = &op->params[0];
	cr_assert_str_eq(p->name, "factor");
	cr_assert_eq(p->type, TK_PARAM_FLOAT);
	cr_assert_not(p->has_default);
	cr_assert(p->lo_open && !p->hi_open);
	cr_assert_str_eq(p->range_text, "(0, 10]");
	cr_assert_eq(op->params[1].n_values, 3);
	cr_assert_eq(op->params[1].def.v.i, 1);
	cr_assert_eq(op->n_rules, 1);
	cr_assert_str_eq(op->rules[0].message, "the last dimension must divide into steps");
	cr_assert_eq(op->n_workloads, 1);
	cr_assert_eq(op->workloads[0].shape[0][1], 4096);
	manifest_free(m);
	manifest_free(NULL);
}

Test(loader, the_project_manifest_loads_with_every_family)
{
	static const char *const ops[] = { "add",
		                           "rms_norm",
		                           "softmax",
		                           "rope_neox",
		                           "max_pool2d",
		                           "gemm",
		                           "bmm",
		                           "quant_fp8_per_token",
		                           "attention_prefill",
		                           "attention_decode_paged",
		                           "silu_and_mul",
		                           "embedding",
		                           "sample",
		                           "moe_route",
		                           "gemm_fp8",
		                           "all_reduce",
		                           NULL };
	char err[4096] = "";
	manifest *m = NULL;

	cr_assert_eq(manifest_load(TILEOPS_SOURCE_DIR "/manifest", &m, err, sizeof(err)), 0, "%s",
	             err);
	for (int i = 0; ops[i]; i++)
		cr_assert_not_null(manifest_find(m, ops[i]), "%s is missing", ops[i]);
	cr_assert_eq(m->n_files, 14); /* one per family, diagnostic included */
	manifest_free(m);
}
