/*
 * test_tune_cli.c - tileops-tune's command line, without a GPU: --list
 * prints the family and shape class of every job a run would measure, so
 * the manifest's tunable families, --op, the --shape forms (a gemm, and a
 * bmm with a batch) and their refusals are checked through it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#ifndef TUNE_BIN
#error "TUNE_BIN names the tileops-tune binary"
#endif
#ifndef MANIFEST_DIR
#error "MANIFEST_DIR names the manifest folder"
#endif

/* Run tileops-tune with args, its stderr folded into out; returns its exit status. */
static int run(const char *args, char *out, size_t cap)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", TUNE_BIN, args);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p, "popen %s", cmd);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	cr_assert(WIFEXITED(st), "%s did not exit normally", cmd);
	return WEXITSTATUS(st);
}

Test(tune_cli, a_shape_with_a_batch_lists_the_batched_classes)
{
	char out[16384];

	cr_assert_eq(run("--list --shape 2048,2048,128,nt,bf16,b32", out, sizeof(out)), 0, "%s",
	             out);
	cr_assert_not_null(strstr(out, "bf16 nt b m2048 n2048 k128"), "%s", out);
	/* the second pass: every smaller power of two of M, down to 1 */
	cr_assert_not_null(strstr(out, "bf16 nt b m1024 n2048 k128"), "%s", out);
	cr_assert_not_null(strstr(out, "bf16 nt b m1 n2048 k128"), "%s", out);
}

Test(tune_cli, a_shape_without_a_batch_lists_gemm_classes)
{
	char out[16384];

	cr_assert_eq(run("--list --shape 128,2112,7168,nt,bf16 --shape 64,512,128,nn,f16", out,
	                 sizeof(out)),
	             0, "%s", out);
	cr_assert_not_null(strstr(out, "bf16 nt m128 n2112 k7168"), "%s", out);
	cr_assert_not_null(strstr(out, "bf16 nt m64 n2112 k7168"), "%s", out);
	cr_assert_not_null(strstr(out, "f16 nn m64 n512 k128"), "%s", out);
	cr_assert_null(strstr(out, " b m"), "%s", out);
}

Test(tune_cli, malformed_shapes_are_refused_by_name)
{
	static const char *const bad[] = {
		"2048,2048,128,nt,bf16,b0",
		"2048,2048,128,nt,bf16,x32",
		"2048,2048,128,nt,bf16,b32,1",
		"2048,2048,128,nt,bf16,b-2",
		"2048,2048,128,tt,bf16",
		"0,8,8,nt,bf16",
		"8,8,8,nt,bf16,",
		"8,8,8,nt,i8",
		"8,8,nt,bf16",
	};
	char args[256], out[16384], want[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(args, sizeof(args), "--list --shape '%s'", bad[i]);
		snprintf(want, sizeof(want), "--shape '%s' is not", bad[i]);
		cr_expect_neq(run(args, out, sizeof(out)), 0, "'%s' was taken: %s", bad[i], out);
		cr_expect_not_null(strstr(out, want), "'%s': %s", bad[i], out);
	}
}

Test(tune_cli, neither_manifest_nor_shape_is_refused_with_what_to_give)
{
	char out[16384];

	cr_expect_eq(run("--list", out, sizeof(out)), 2, "%s", out);
	cr_expect_not_null(strstr(out, "nothing to tune: give --manifest DIR, --shape, or both"),
	                   "%s", out);
}

Test(tune_cli, the_manifest_gives_jobs_of_every_tunable_family)
{
	static char out[1 << 16];

	cr_assert_eq(run("--list --manifest '" MANIFEST_DIR "'", out, sizeof(out)), 0, "%s", out);
	/* one line per job: family, class, label */
	cr_assert_not_null(strstr(out, "gemm              bf16 nt m4096 n28672 k4096"), "%s", out);
	cr_assert_not_null(strstr(out, "attention_prefill bf16 d128 causal b4 h32 g4 q4096 kv4096"),
	                   "%s", out);
	cr_assert_not_null(strstr(out, "attention_prefill bf16 d128 causal varlen b8 h32 g4 q2048"),
	                   "%s", out);
	cr_assert_not_null(strstr(out, "attention_decode  bf16 d128 b1 t1 h32 g4 kv65536"), "%s",
	                   out);
	cr_assert_not_null(strstr(out, "attention_decode  bf16 d128 paged b1 t1 h32 g4 kv65536"),
	                   "%s", out);
	/* the kernel serves no qk 192 / v 128 head dims: that workload is skipped, saying so */
	cr_assert_not_null(strstr(out, "mla prefill (MHA, qk 192, v 128): the CUDA kernel does not "
	                               "serve it; skipped"),
	                   "%s", out);
}

Test(tune_cli, op_keeps_one_ops_workloads)
{
	static char out[1 << 16];

	cr_assert_eq(run("--list --op attention_decode_paged --manifest '" MANIFEST_DIR "'", out,
	                 sizeof(out)),
	             0, "%s", out);
	cr_assert_not_null(strstr(out, "attention_decode  bf16 d128 paged b64 t1 h32 g4 kv4096"),
	                   "%s", out);
	cr_assert_null(strstr(out, "gemm "), "%s", out);
	cr_assert_null(strstr(out, "attention_prefill"), "%s", out);
	cr_expect_eq(run("--list --op rms_norm --manifest '" MANIFEST_DIR "'", out, sizeof(out)), 2,
	             "an op with nothing to tune: %s", out);
	cr_expect_eq(run("--list --pdl maybe --shape 8,8,8,nt,bf16", out, sizeof(out)), 2, "%s",
	             out);
}
