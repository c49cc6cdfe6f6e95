/*
 * test_gemm_tune.c - the GEMM tuning table (kernels/gemm_tune.c): config
 * and shape-class strings, the cache file (round trips, malformed lines,
 * files of another GPU) and concurrent use of the table.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tk_gemm.h"

#define GPU "NVIDIA H200 sm=90"

static char dir[] = "/tmp/tileops-gemm-tune-XXXXXX";
static char path[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/gemm-tune.txt", dir);
	tk_gemm_table_clear();
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	tk_gemm_table_clear();
}

TestSuite(gemm_tune, .init = setup, .fini = teardown);

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static tk_gemm_config cfg_of(int kind, int tm, int tn, int tk, int s, int c, int sk)
{
	tk_gemm_config x = { kind, tm, tn, tk, s, c, sk };
	return x;
}

Test(gemm_tune, a_config_string_parses_back_to_the_same_config)
{
	tk_gemm_config in = cfg_of(TK_GEMM_SM90, 128, 256, 64, 4, 2, 1), out;
	char s[96];

	tk_gemm_config_str(&in, s, sizeof(s));
	cr_assert_str_eq(s, "sm90 m128 n256 k64 s4 c2 sk1");
	cr_assert_eq(tk_gemm_config_parse(s, &out), 0);
	cr_assert_eq(memcmp(&in, &out, sizeof(in)), 0);
	in = cfg_of(TK_GEMM_SMALLM, 16, 64, 256, 3, 0, 8);
	tk_gemm_config_str(&in, s, sizeof(s));
	cr_assert_str_eq(s, "smallm m16 n64 k256 s3 c0 sk8");
	cr_assert_eq(tk_gemm_config_parse(s, &out), 0);
	cr_assert_eq(memcmp(&in, &out, sizeof(in)), 0);
	in = cfg_of(TK_GEMM_DECODE, 8, 128, 64, 12, 4, 4);
	tk_gemm_config_str(&in, s, sizeof(s));
	cr_assert_str_eq(s, "decode m8 n128 k64 s12 c4 sk4");
	cr_assert_eq(tk_gemm_config_parse(s, &out), 0);
	cr_assert_eq(memcmp(&in, &out, sizeof(in)), 0);
	cr_assert_eq(tk_gemm_config_parse("simple m64 n64 k32 s1 c0 sk0", &out), 0);
	cr_assert_eq(out.kind, TK_GEMM_SIMPLE);
}

Test(gemm_tune, a_malformed_config_string_is_refused)
{
	static const char *const bad[] = {
		"",
		"sm91 m128 n256 k64 s4 c1 sk1",
		"sm90 m128 n256 k64 s4 c1",
		"sm90 m128 n256 k64 s4 c1 sk1 x",
		"sm90 n256 m128 k64 s4 c1 sk1",
		"sm90 m-1 n256 k64 s4 c1 sk1",
		"sm90 m128 n256 k64 s4 c1 skx",
		"sm90 m99999999999 n256 k64 s4 c1 sk1",
	};
	tk_gemm_config out;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(tk_gemm_config_parse(bad[i], &out), -1, "accepted '%s'", bad[i]);
}

Test(gemm_tune, the_shape_class_rounds_m_up_to_a_power_of_two_and_marks_batches)
{
	tk_gemm_problem p;
	char s[96];

	memset(&p, 0, sizeof(p));
	p.dtype = TK_BF16;
	p.trans_b = 1;
	p.batch = 1;
	p.m = 100;
	p.n = 2112;
	p.k = 7168;
	tk_gemm_shape_class(&p, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 nt m128 n2112 k7168");
	p.m = 128;
	tk_gemm_shape_class(&p, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 nt m128 n2112 k7168");
	p.m = 1;
	p.trans_b = 0;
	p.dtype = TK_F16;
	p.batch = 32;
	tk_gemm_shape_class(&p, s, sizeof(s));
	cr_assert_str_eq(s, "f16 nn b m1 n2112 k7168");
	p.m = 4097;
	tk_gemm_shape_class(&p, s, sizeof(s));
	cr_assert_str_eq(s, "f16 nn b m8192 n2112 k7168");
}

Test(gemm_tune, a_saved_table_loads_back_with_every_entry)
{
	tk_gemm_config a = cfg_of(TK_GEMM_SM90, 128, 256, 64, 4, 2, 1);
	tk_gemm_config b = cfg_of(TK_GEMM_SMALLM, 16, 64, 256, 3, 0, 8), got;
	char err[512];

	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 0);
	tk_gemm_table_put("bf16 nt m4096 n28672 k4096", &a, 1234.5);
	tk_gemm_table_put("bf16 nt m16 n6144 k4096", &b, 9.25);
	tk_gemm_table_put("bf16 nt m16 n6144 k4096", &b, 8.5); /* replaces */
	cr_assert_eq(tk_gemm_table_count(), 2);
	cr_assert_eq(tk_gemm_table_save(path, err, sizeof(err)), TK_OK, "%s", err);

	tk_gemm_table_clear();
	cr_assert_eq(tk_gemm_table_get("bf16 nt m16 n6144 k4096", &got), 0);
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(tk_gemm_table_count(), 2);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m4096 n28672 k4096", &got), 1);
	cr_assert_eq(memcmp(&got, &a, sizeof(a)), 0);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m16 n6144 k4096", &got), 1);
	cr_assert_eq(memcmp(&got, &b, sizeof(b)), 0);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m32 n6144 k4096", &got), 0);

	FILE *f = fopen(path, "r");
	char line[256];
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "tileops-gemm-tune 1 gpu=" GPU "\n");
}

Test(gemm_tune, a_hand_written_file_with_comments_and_spacing_loads)
{
	tk_gemm_config got;
	char err[512];

	write_file("# tuned by hand\n"
	           "tileops-gemm-tune 1 gpu=" GPU "\n"
	           "\n"
	           "  bf16  nt   m128 n2112 k7168 |sm90 m128 n128 k64 s5 c1 sk1|  40.5  # decode\n"
	           "f16 nn b m64 n512 k128 | simple m64 n64 k32 s1 c0 sk0 | 3\n");
	cr_assert_eq(tk_gemm_table_check(path, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 0, "check must not change the table");
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 2);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m128 n2112 k7168", &got), 1);
	cr_assert_eq(got.tile_n, 128);
	cr_assert_eq(got.stages, 5);
	cr_assert_eq(tk_gemm_table_get("f16 nn b m64 n512 k128", &got), 1);
	cr_assert_eq(got.kind, TK_GEMM_SIMPLE);
}

static void expect_bad(const char *text, const char *where, const char *what)
{
	char err[512], want[300];
	tk_gemm_config c = cfg_of(TK_GEMM_SM90, 64, 64, 64, 2, 1, 1);

	tk_gemm_table_clear();
	tk_gemm_table_put("bf16 nt m1 n1 k1", &c, 1.0);
	write_file(text);
	snprintf(want, sizeof(want), "%s:%s: ", path, where);
	cr_expect_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_ERR_UNSUPPORTED,
	             "accepted:\n%s", text);
	cr_expect(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'", err,
	          want);
	cr_expect(strstr(err, what) != NULL, "'%s' does not say '%s'", err, what);
	cr_expect_eq(tk_gemm_table_count(), 1, "a failed load must leave the table as it was");
	cr_expect_eq(tk_gemm_table_check(path, err, sizeof(err)), TK_ERR_UNSUPPORTED);
}

Test(gemm_tune, a_malformed_file_is_refused_naming_file_and_line)
{
	const char *h = "tileops-gemm-tune 1 gpu=" GPU "\n";
	char text[1024];

	expect_bad("bf16 nt m1 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n", "1", "header");
	expect_bad("tileops-gemm-tune 2 gpu=" GPU "\n", "1", "version 2");
	expect_bad("tileops-gemm-tune 1\n", "1", "gpu=");
	snprintf(text, sizeof(text), "%s# ok\nbf16 nt m3 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n",
	         h);
	expect_bad(text, "3", "power of two");
	snprintf(text, sizeof(text),
	         "%sbf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n"
	         "bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 | 1\n",
	         h);
	expect_bad(text, "3", "config");
	snprintf(text, sizeof(text), "%sbf16 xx m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n", h);
	expect_bad(text, "2", "layout");
	snprintf(text, sizeof(text), "%sq8 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n", h);
	expect_bad(text, "2", "dtype");
	snprintf(text, sizeof(text), "%sbf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | -3\n", h);
	expect_bad(text, "2", "positive");
	snprintf(text, sizeof(text), "%sbf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1\n", h);
	expect_bad(text, "2", "SHAPE CLASS | CONFIG | US");
	snprintf(text, sizeof(text), "%sbf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1 | 2\n",
	         h);
	expect_bad(text, "2", "SHAPE CLASS | CONFIG | US");
}

Test(gemm_tune, a_file_made_on_another_gpu_is_checked_but_its_entries_are_not_used)
{
	tk_gemm_config got;
	char err[512];

	write_file("tileops-gemm-tune 1 gpu=NVIDIA A100-SXM4-80GB sm=80\n"
	           "bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 sk1 | 40\n");
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 0);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m128 n2112 k7168", &got), 0);
	cr_assert(strstr(err, "A100") && strstr(err, "not used"), "%s", err);

	/* Saving now writes this GPU's header, not the file's. */
	cr_assert_eq(tk_gemm_table_save(path, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_str_eq(err, "");

	/* Without a GPU to match, any file's entries are taken. */
	write_file("tileops-gemm-tune 1 gpu=NVIDIA A100-SXM4-80GB sm=80\n"
	           "bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 sk1 | 40\n");
	cr_assert_eq(tk_gemm_table_load_for(path, NULL, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 1);
}

Test(gemm_tune, a_missing_file_is_an_empty_table_not_an_error)
{
	tk_gemm_config c = cfg_of(TK_GEMM_SM90, 64, 64, 64, 2, 1, 1);
	char err[512];

	tk_gemm_table_put("bf16 nt m1 n1 k1", &c, 1.0);
	cr_assert_eq(tk_gemm_table_check(path, err, sizeof(err)), TK_OK);
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 0);
	write_file("");
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
}

Test(gemm_tune, saving_into_a_missing_folder_fails_with_the_path)
{
	char err[512], bad[300];

	snprintf(bad, sizeof(bad), "%s/no/such/dir/tune.txt", dir);
	cr_assert_eq(tk_gemm_table_save(bad, err, sizeof(err)), TK_ERR_UNSUPPORTED);
	cr_assert(strstr(err, "no/such/dir") && strstr(err, "cannot create"), "%s", err);
}

#define THREADS 8
#define PER_THREAD 200

static void *writer_reader(void *arg)
{
	int t = (int)(intptr_t)arg;
	char cls[64];

	for (int i = 0; i < PER_THREAD; i++) {
		tk_gemm_config c = cfg_of(TK_GEMM_SMALLM, 16, 64, 64 * (t + 1), 2, 0, i + 1), got;
		snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, t + 1);
		tk_gemm_table_put(cls, &c, (double)i + 1.0);
		if (!tk_gemm_table_get(cls, &got) || got.split_k != i + 1 ||
		    got.tile_k != 64 * (t + 1))
			return (void *)1;
		/* Read an entry another thread may be writing right now. */
		snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, (t + 1) % THREADS + 1);
		if (tk_gemm_table_get(cls, &got) && got.split_k != i + 1)
			return (void *)1;
	}
	return NULL;
}

Test(gemm_tune, concurrent_puts_and_gets_lose_and_mix_nothing)
{
	pthread_t th[THREADS];
	tk_gemm_config got;
	char cls[64];

	for (int t = 0; t < THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, writer_reader, (void *)(intptr_t)t), 0);
	for (int t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		cr_expect_null(r, "thread %d saw a wrong entry", t);
	}
	cr_assert_eq(tk_gemm_table_count(), THREADS * PER_THREAD);
	for (int t = 0; t < THREADS; t++) {
		for (int i = 0; i < PER_THREAD; i++) {
			snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, t + 1);
			cr_assert_eq(tk_gemm_table_get(cls, &got), 1, "%s", cls);
			cr_assert_eq(got.split_k, i + 1);
			cr_assert_eq(got.tile_k, 64 * (t + 1));
		}
	}
}

Test(gemm_tune, a_placeholder_entry_is_used_but_never_saved)
{
	tk_gemm_config c = cfg_of(TK_GEMM_SIMPLE, 64, 64, 32, 1, 0, 0), got;
	char err[512];

	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	tk_gemm_table_put("bf16 nt m8 n4096 k4096", &c, 0.0);
	tk_gemm_table_put("bf16 nt m16 n4096 k4096", &c, 5.0);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m8 n4096 k4096", &got), 1);
	cr_assert_eq(tk_gemm_table_save(path, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_load_for(path, GPU, err, sizeof(err)), TK_OK, "%s", err);
	cr_assert_eq(tk_gemm_table_count(), 1);
	cr_assert_eq(tk_gemm_table_get("bf16 nt m8 n4096 k4096", &got), 0);
}

Test(gemm_tune, first_use_tuning_is_off_until_configured)
{
	char p[256];

	cr_assert_eq(tk_gemm_tune_first_use(p, sizeof(p)), 0);
	tk_gemm_tune_configure(1, "/var/lib/tileops/gemm-tune.txt");
	cr_assert_eq(tk_gemm_tune_first_use(p, sizeof(p)), 1);
	cr_assert_str_eq(p, "/var/lib/tileops/gemm-tune.txt");
	tk_gemm_tune_configure(0, NULL);
	cr_assert_eq(tk_gemm_tune_first_use(p, sizeof(p)), 0);
	cr_assert_str_eq(p, "", "off: no cache path is handed out");
}
