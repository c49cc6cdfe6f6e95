/*
 * test_conformance.c - the manifest and the L1 kernel table agree: every
 * implemented op has a cpu kernel taking the same inputs, outputs and params
 * in the same order, and a workload; every kernel is an implemented op.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "manifest.h"
#include "oplayer.h"

static manifest *m;

static void setup(void)
{
	char err[4096] = "";

	cr_assert_eq(manifest_parse(TILEOPS_SOURCE_DIR "/manifest", &m, err, sizeof(err)), 0, "%s",
	             err);
}

static void teardown(void)
{
	manifest_free(m);
}

TestSuite(conformance, .init = setup, .fini = teardown);

Test(conformance, every_kernel_in_the_table_is_an_implemented_op)
{
	size_t n;
	const tk_kernel_entry *t = tk_kernels(&n);

	cr_assert_gt(n, 0);
	for (size_t i = 0; i < n; i++) {
		const manifest_op *op = manifest_find(m, t[i].op);

		cr_assert_not_null(op, "kernel '%s' is not in the manifest", t[i].op);
		cr_assert_eq(op->status, MANIFEST_IMPLEMENTED, "'%s' has a kernel but is spec",
		             t[i].op);
	}
}

Test(conformance, every_implemented_op_matches_its_kernel_entry)
{
	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];
		const tk_kernel_entry *e = tk_kernel_find(op->name);
		int n = 0;

		if (op->status != MANIFEST_IMPLEMENTED) {
			cr_assert_null(e, "'%s' is spec but has a kernel", op->name);
			continue;
		}
		if (op->collective) {
			/* Served by the backends' collective operation. */
			cr_assert_null(e, "'%s' is a collective but has a kernel", op->name);
			cr_assert_gt(op->n_workloads, 0, "'%s' has no workload", op->name);
			continue;
		}
		cr_assert_not_null(e, "'%s' has no kernel entry", op->name);
		cr_assert_not_null(e->cpu, "'%s' has no cpu kernel", op->name);
		if (tk_have_cuda())
			cr_assert_not_null(e->cuda, "'%s' has no cuda kernel", op->name);
		cr_assert_eq(e->n_in, op->n_in, "'%s' inputs", op->name);
		cr_assert_eq(e->n_out, op->n_out, "'%s' outputs", op->name);
		for (; e->params[n]; n++) {
			cr_assert_lt(n, op->n_params, "'%s' kernel reads more params", op->name);
			cr_assert_str_eq(e->params[n], op->params[n].name, "'%s' param %d order",
			                 op->name, n);
		}
		cr_assert_eq(n, op->n_params, "'%s' param count", op->name);
		cr_assert_gt(op->n_workloads, 0, "'%s' has no workload", op->name);
	}
}

Test(conformance, every_workload_satisfies_its_ops_rules)
{
	char err[1024];

	for (int i = 0; i < m->n_ops; i++) {
		const manifest_op *op = &m->ops[i];

		for (int w = 0; w < op->n_workloads; w++) {
			for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
				op_cost cost;

				if (!(op->workloads[w].dtypes & (1u << dt)))
					continue;
				cr_assert_eq(oplayer_check_workload(op, &op->workloads[w],
				                                    (tk_dtype)dt, &cost, err,
				                                    sizeof(err)),
				             TILEOPS_OK, "%s / %s: %s", op->name,
				             op->workloads[w].label, err);
				cr_assert_gt(cost.bytes, 0, "%s / %s moves no bytes", op->name,
				             op->workloads[w].label);
			}
		}
	}
}

Test(conformance, dtype_names_match_the_kernel_library)
{
	for (int dt = 1; dt < TK_DTYPE_COUNT; dt++) {
		cr_assert_str_eq(manifest_dtype_name((tk_dtype)dt), tk_dtype_name((tk_dtype)dt));
		cr_assert_eq(manifest_dtype_parse(tk_dtype_name((tk_dtype)dt)), dt);
	}
}

Test(conformance, a_mismatched_kernel_table_is_reported)
{
	static const char *const wrong_params[] = { "approx", NULL };
	size_t n;
	const tk_kernel_entry *t = tk_kernels(&n);
	tk_kernel_entry table[96];
	char err[4096] = "";

	cr_assert_lt(n, 94);
	memcpy(table, t, n * sizeof(*t));
	for (size_t i = 0; i < n; i++)
		if (!strcmp(table[i].op, "gelu"))
			table[i].params = wrong_params;
	table[n] = (tk_kernel_entry){ "bogus", 1, 1, wrong_params + 1, t[0].cpu, NULL, 0, NULL };
	cr_assert_eq(manifest_check_kernels(m, table, n + 1, 0, err, sizeof(err)), -1);
	cr_assert(strstr(err, "op 'gelu': the kernel reads param 'approx', which the manifest "
	                      "does not declare"),
	          "%s", err);
	cr_assert(strstr(err, "kernel 'bogus' is registered but no op of that name"), "%s", err);
	/* Without rms_norm's entry, the implemented op is uncovered. */
	for (size_t i = 0; i < n; i++)
		if (!strcmp(table[i].op, "rms_norm"))
			table[i].op = "rms_norm_v2";
	cr_assert_eq(manifest_check_kernels(m, table, n, 0, err, sizeof(err)), -1);
	cr_assert(strstr(err, "op 'rms_norm' is implemented but has no registered cpu kernel"),
	          "%s", err);
}
