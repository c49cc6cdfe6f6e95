/*
 * test_check_ops.c - tileops-manifest check-ops on a small source tree
 * (tests/manifest/data/check_ops): each part an op lacks is one line naming
 * the op, the part and where it belongs, and the exit status is 1; kernels
 * written out or made by macros are found where they are; an op without a
 * cuda kernel is "cpu only", which passes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#ifndef MANIFEST_TOOL
#error "MANIFEST_TOOL names the tileops-manifest binary"
#endif

#define TREE TILEOPS_SOURCE_DIR "/tests/manifest/data/check_ops"

/* check-ops over TREE with the manifest folder `manifest`; stdout and stderr in out. */
static int check_ops(const char *manifest, char *out, size_t cap)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "'%s' -m '%s/%s' check-ops --root '%s' 2>&1", MANIFEST_TOOL,
	         TREE, manifest, TREE);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	cr_assert(WIFEXITED(st), "%s did not exit normally", cmd);
	return WEXITSTATUS(st);
}

static int lines_naming(const char *out, const char *op)
{
	char key[64];
	int n = 0;

	snprintf(key, sizeof(key), ": %s: ", op);
	for (const char *p = out; (p = strstr(p, key)) != NULL; p++)
		n++;
	return n;
}

Test(check_ops, each_missing_part_is_one_line_with_where_it_belongs)
{
	static const char *const expected[] = {
		"manifest/toy.yaml:77: broken: doc: no doc string",
		"manifest/toy.yaml:77: broken: docs: no entry in docs/ops.md",
		"manifest/toy.yaml:77: broken: workloads: no workload from a real model",
		"manifest/toy.yaml:77: broken: cpu kernel: tk_cpu_broken is defined in "
		"kernels/other/stray.c:2, not in kernels/toy/*.c",
		"manifest/toy.yaml:77: broken: cuda kernel: tk_cuda_broken is not defined in "
		"kernels/toy/*.cu",
		"manifest/toy.yaml:77: broken: cpu reference test: tests/kernels/test_toy.c does "
		"not name the op",
		"manifest/lonely.yaml:4: alone: cpu reference test: tests/kernels/test_lonely.c "
		"does not exist",
		"check-ops: 7 missing parts in 6 ops",
	};
	char out[16384];

	cr_assert_eq(check_ops("manifest", out, sizeof(out)), 1, "%s", out);
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		cr_assert_not_null(strstr(out, expected[i]), "no '%s' in:\n%s", expected[i], out);
	cr_assert_eq(lines_naming(out, "broken"), 6, "%s", out);
	cr_assert_eq(lines_naming(out, "alone"), 1, "%s", out);
}

Test(check_ops, kernels_written_out_or_made_by_macros_are_found)
{
	char out[16384];

	check_ops("manifest", out, sizeof(out));
	/* complete: both written out; generated: a header's macro (cpu) and a
	 * macro through another (cuda); a prototype or a string defines nothing. */
	cr_assert_eq(lines_naming(out, "complete"), 0, "%s", out);
	cr_assert_eq(lines_naming(out, "generated"), 0, "%s", out);
	cr_assert_eq(lines_naming(out, "planned"), 0, "a spec op needs no kernels:\n%s", out);
}

Test(check_ops, an_op_without_a_cuda_kernel_is_cpu_only_and_passes)
{
	char out[16384];

	cr_assert_eq(check_ops("manifest_ok", out, sizeof(out)), 0, "%s", out);
	cr_assert_not_null(strstr(out, "manifest_ok/toy.yaml:54: host_only: cpu only (the manifest "
	                               "lists no cuda kernel)"),
	                   "%s", out);
	cr_assert_not_null(strstr(out, "check-ops: ok, 4 ops have every part (1 cpu only)"), "%s",
	                   out);
}

Test(check_ops, a_manifest_that_does_not_parse_fails)
{
	char out[16384];

	cr_assert_eq(check_ops("no_such_folder", out, sizeof(out)), 1, "%s", out);
	cr_assert_null(strstr(out, "check-ops: ok"), "%s", out);
}
