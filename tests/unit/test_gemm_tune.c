/*
 * test_gemm_tune.c - the tuning table (daemon/policy/tuning.c) and the
 * texts of the kernels' tuning interfaces it stores: shape classes and
 * choices of every tunable family, the file (round trips, format 1 of the
 * GEMM-only releases, the shipped H200 table, malformed lines, files of
 * another GPU, atomic saves), concurrent use, and what the executor asks
 * of it (apply, first-use claims and measuring). CPU only: the kernel
 * table of a CPU build has the tuning interfaces without candidates, and
 * first use is driven through a stand-in measuring function.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuning.h"

#define GPU "NVIDIA H200 sm=90"

static char dir[] = "/tmp/tileops-tuning-XXXXXX";
static char path[256];
static tuning *tab;

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/tune.txt", dir);
	tab = tuning_new(GPU);
	cr_assert_not_null(tab);
}

static void teardown(void)
{
	unlink(path);
	rmdir(dir);
	tuning_free(tab);
}

TestSuite(tuning, .init = setup, .fini = teardown);

static void write_file(const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static const tk_tuning *family(const char *name)
{
	const tk_tuning *t = tuning_family(name);
	cr_assert_not_null(t, "no tuning interface for family %s", name);
	return t;
}

/* The choice `text` parses to in `fam`. */
static tk_choice choice(const char *fam, const char *text)
{
	tk_choice c;
	cr_assert_eq(family(fam)->parse_choice(text, &c), 0, "%s choice '%s'", fam, text);
	return c;
}

/* ---- tensors and calls, for shape classes (no data: classes read shapes) ---- */

static tk_tensor shaped(tk_dtype dt, int ndim, const int64_t *shape)
{
	tk_tensor t;

	memset(&t, 0, sizeof(t));
	t.dtype = dt;
	t.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		t.shape[d] = shape[d];
	tk_set_contiguous(&t);
	return t;
}

static tk_call gemm_call(tk_dtype dt, int64_t batch, int64_t m, int64_t n, int64_t k, int tb)
{
	tk_call c;

	memset(&c, 0, sizeof(c));
	c.n_in = 2;
	c.n_out = 1;
	c.n_params = 2;
	c.params[0].kind = TK_PARAM_FLOAT;
	c.params[0].v.f = 1.0;
	c.params[1].kind = TK_PARAM_BOOL;
	c.params[1].v.b = tb;
	int64_t a[3] = { batch, m, k }, b[3] = { batch, tb ? n : k, tb ? k : n },
	        o[3] = { batch, m, n };
	int bmm = batch > 0, off = bmm ? 0 : 1, nd = bmm ? 3 : 2;
	c.in[0] = shaped(dt, nd, a + off);
	c.in[1] = shaped(dt, nd, b + off);
	c.out[0] = shaped(dt, nd, o + off);
	return c;
}

static void class_of(const char *op, const tk_call *c, char *buf, size_t len)
{
	const tk_kernel_entry *e = tk_kernel_find(op);
	cr_assert(e != NULL && e->tuning != NULL, "%s has no tuning interface", op);
	cr_assert_eq(e->tuning->shape_class(c, buf, len), 0, "%s: no shape class", op);
}

/* ---- texts of the tuning interfaces ------------------------------------------- */

Test(tuning, the_tunable_kernels_are_the_manifests_and_share_their_families)
{
	static const char *const ops[][2] = {
		{ "gemm", "gemm" },
		{ "bmm", "gemm" },
		{ "attention_prefill", "attention_prefill" },
		{ "attention_prefill_varlen", "attention_prefill" },
		{ "attention_decode", "attention_decode" },
		{ "attention_decode_paged", "attention_decode" },
		{ "gemm_fp8", "gemm_fp8" },
		{ "bmm_fp8", "gemm_fp8" },
	};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const tk_kernel_entry *e = tk_kernel_find(ops[i][0]);
		cr_assert(e != NULL && e->tuning != NULL, "%s is not tunable", ops[i][0]);
		cr_expect_str_eq(e->tuning->family, ops[i][1]);
		/* A CPU-only build names and checks choices but has none to offer. */
		cr_expect_null(e->tuning->candidates, "%s: candidates without CUDA", ops[i][0]);
	}
	cr_expect_null(tk_kernel_find("rms_norm")->tuning, "rms_norm has nothing to tune");
	cr_expect_null(tuning_family("rms_norm"));
}

Test(tuning, a_gemm_choice_string_parses_back_to_the_same_choice)
{
	static const char *const texts[] = {
		"sm90 m128 n256 k64 s4 c2 sk1",
		"smallm m16 n64 k256 s3 c0 sk8",
		"decode m8 n128 k64 s12 c4 sk4",
		"simple m64 n64 k32 s1 c0 sk0",
	};
	const tk_tuning *g = family("gemm");
	char s[TK_TUNING_TEXT_MAX];

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		tk_choice c = choice("gemm", texts[i]), back;
		cr_assert_eq(c.mode, TK_CHOICE_PREFER);
		cr_assert_eq(g->format_choice(&c, s, sizeof(s)), 0);
		cr_assert_str_eq(s, texts[i]);
		cr_assert_eq(g->parse_choice(s, &back), 0);
		cr_assert(tk_choice_same(&c, &back));
	}
	/* kind sm90 = 1, then tile m, n, k, stages, cluster, split */
	tk_choice c = choice("gemm", "sm90 m128 n256 k64 s4 c2 sk1");
	const int32_t want[7] = { 1, 128, 256, 64, 4, 2, 1 };
	cr_assert_eq(memcmp(c.v, want, sizeof(want)), 0);
}

Test(tuning, a_malformed_choice_string_is_refused_by_every_family)
{
	static const char *const bad[][2] = {
		{ "gemm", "" },
		{ "gemm", "sm91 m128 n256 k64 s4 c1 sk1" },
		{ "gemm", "sm90 m128 n256 k64 s4 c1" },
		{ "gemm", "sm90 m128 n256 k64 s4 c1 sk1 x" },
		{ "gemm", "sm90 n256 m128 k64 s4 c1 sk1" },
		{ "gemm", "sm90 m-1 n256 k64 s4 c1 sk1" },
		{ "gemm", "sm90 m128 n256 k64 s4 c1 skx" },
		{ "gemm", "sm90 m99999999999 n256 k64 s4 c1 sk1" },
		{ "attention_prefill", "lean" },
		{ "attention_prefill", "turns turns" },
		{ "attention_prefill", "2" },
		{ "attention_decode", "splits" },
		{ "attention_decode", "splits 0" },
		{ "attention_decode", "splits -4" },
		{ "attention_decode", "splits 4 8" },
		{ "attention_decode", "twowave" },
	};
	tk_choice c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(family(bad[i][0])->parse_choice(bad[i][1], &c), -1, "%s accepted '%s'",
		             bad[i][0], bad[i][1]);
}

Test(tuning, the_attention_choices_are_the_schedules_and_split_counts)
{
	static const char *const prefill[] = { "plain", "turns", "turns-wide", "lean-wide" };
	char s[TK_TUNING_TEXT_MAX];

	for (int i = 0; i < 4; i++) {
		tk_choice c = choice("attention_prefill", prefill[i]);
		cr_assert_eq(c.v[0], i, "%s", prefill[i]);
		cr_assert_eq(family("attention_prefill")->format_choice(&c, s, sizeof(s)), 0);
		cr_assert_str_eq(s, prefill[i]);
	}
	tk_choice c = choice("attention_decode", "  splits   16 ");
	cr_assert_eq(c.v[0], 16);
	cr_assert_eq(family("attention_decode")->format_choice(&c, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "splits 16");
}

Test(tuning, the_gemm_class_rounds_m_up_to_a_power_of_two_and_marks_batches)
{
	char s[TK_TUNING_TEXT_MAX];
	tk_call c = gemm_call(TK_BF16, 0, 100, 2112, 7168, 1);

	class_of("gemm", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 nt m128 n2112 k7168");
	c = gemm_call(TK_BF16, 0, 128, 2112, 7168, 1);
	class_of("gemm", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 nt m128 n2112 k7168");
	c = gemm_call(TK_F16, 32, 1, 2112, 7168, 0);
	class_of("bmm", &c, s, sizeof(s));
	cr_assert_str_eq(s, "f16 nn b m1 n2112 k7168");
	c = gemm_call(TK_F16, 32, 4097, 2112, 7168, 0);
	class_of("bmm", &c, s, sizeof(s));
	cr_assert_str_eq(s, "f16 nn b m8192 n2112 k7168");
	/* A bmm of one batch is the gemm's class: they share entries. */
	c = gemm_call(TK_BF16, 1, 100, 2112, 7168, 1);
	class_of("bmm", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 nt m128 n2112 k7168");
	/* A call the kernels cannot serve has no class. */
	c = gemm_call(TK_BF16, 0, 100, 2112, 7168, 1);
	c.out[0].dtype = TK_F16;
	cr_assert_eq(tk_kernel_find("gemm")->tuning->shape_class(&c, s, sizeof(s)), -1);
}

Test(tuning, the_fp8_classes_name_the_scale_layout_and_the_choices_the_kernels)
{
	static const char *const texts[] = { "stream splits 4", "wg", "tile",
		                             "decode splits 2 bn 128 stages 12" };
	char s[TK_TUNING_TEXT_MAX];
	tk_call c;

	memset(&c, 0, sizeof(c));
	c.n_in = 4;
	c.n_out = 1;
	c.n_params = 1;
	c.params[0].kind = TK_PARAM_INT;
	c.params[0].v.i = 2;
	c.in[0] = shaped(TK_FP8_E4M3, 2, (int64_t[]){ 9, 7168 });
	c.in[1] = shaped(TK_FP8_E4M3, 2, (int64_t[]){ 2112, 7168 });
	c.in[2] = shaped(TK_F32, 2, (int64_t[]){ 9, 56 });
	c.in[3] = shaped(TK_F32, 2, (int64_t[]){ 17, 56 });
	c.out[0] = shaped(TK_BF16, 2, (int64_t[]){ 9, 2112 });
	class_of("gemm_fp8", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 block m16 n2112 k7168 b1");
	c.in[3] = shaped(TK_F32, 2, (int64_t[]){ 16, 56 }); /* N = 2112 has 17 blocks */
	cr_assert_eq(tk_kernel_find("gemm_fp8")->tuning->shape_class(&c, s, sizeof(s)), -1);
	for (int i = 0; i < 4; i++) {
		tk_choice ch = choice("gemm_fp8", texts[i]);
		cr_assert_eq(ch.v[0], i + 1, "%s", texts[i]);
		cr_assert_eq(family("gemm_fp8")->format_choice(&ch, s, sizeof(s)), 0);
		cr_assert_str_eq(s, texts[i]);
	}
	tk_choice ch;
	cr_assert_neq(family("gemm_fp8")->parse_choice("stream splits 0", &ch), 0);
	cr_assert_neq(family("gemm_fp8")->parse_choice("splits 4", &ch), 0);
	/* the decode kernel's cluster split (1..8), weight tile (64, 128) and ring (2..16) */
	cr_assert_neq(family("gemm_fp8")->parse_choice("decode splits 9 bn 128 stages 4", &ch), 0);
	cr_assert_neq(family("gemm_fp8")->parse_choice("decode splits 2 bn 96 stages 4", &ch), 0);
	cr_assert_neq(family("gemm_fp8")->parse_choice("decode splits 2 bn 64 stages 1", &ch), 0);
	cr_assert_neq(family("gemm_fp8")->parse_choice("decode splits 2 bn 64", &ch), 0);
}

Test(tuning, the_attention_classes_round_lengths_and_batches_up)
{
	char s[TK_TUNING_TEXT_MAX];
	tk_call c;

	memset(&c, 0, sizeof(c));
	int64_t q[4] = { 3, 3000, 32, 128 }, kv[4] = { 3, 3000, 8, 128 };
	c.n_in = 3;
	c.n_out = 1;
	c.n_params = 2;
	c.in[0] = shaped(TK_BF16, 4, q);
	c.in[1] = shaped(TK_BF16, 4, kv);
	c.in[2] = shaped(TK_BF16, 4, kv);
	c.out[0] = shaped(TK_BF16, 4, q);
	c.params[0].kind = TK_PARAM_BOOL;
	c.params[0].v.b = 1;
	class_of("attention_prefill", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 d128 causal b4 h32 g4 q4096 kv4096");
	c.params[0].v.b = 0;
	class_of("attention_prefill", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 d128 full b4 h32 g4 q4096 kv4096");

	/* varlen: 8 sequences of 16384 tokens, max_seqlen_q 2048 */
	int64_t vq[3] = { 16384, 32, 128 }, vk[3] = { 16384, 8, 128 }, cu[1] = { 9 };
	memset(&c, 0, sizeof(c));
	c.n_in = 5;
	c.n_out = 1;
	c.n_params = 3;
	c.in[0] = shaped(TK_F16, 3, vq);
	c.in[1] = shaped(TK_F16, 3, vk);
	c.in[2] = shaped(TK_F16, 3, vk);
	c.in[3] = shaped(TK_I32, 1, cu);
	c.in[4] = shaped(TK_I32, 1, cu);
	c.out[0] = shaped(TK_F16, 3, vq);
	c.params[0].kind = TK_PARAM_BOOL;
	c.params[0].v.b = 1;
	c.params[2].kind = TK_PARAM_INT;
	c.params[2].v.i = 2048;
	class_of("attention_prefill_varlen", &c, s, sizeof(s));
	cr_assert_str_eq(s, "f16 d128 causal varlen b8 h32 g4 q2048 kv2048");

	/* decode: 3 sequences, 4 new tokens, 1000 cached; paged 16-token pages */
	int64_t dq[4] = { 3, 4, 32, 128 }, dk[4] = { 3, 1000, 8, 128 }, sl[1] = { 3 };
	memset(&c, 0, sizeof(c));
	c.n_in = 4;
	c.n_out = 1;
	c.n_params = 1;
	c.in[0] = shaped(TK_BF16, 4, dq);
	c.in[1] = shaped(TK_BF16, 4, dk);
	c.in[2] = shaped(TK_BF16, 4, dk);
	c.in[3] = shaped(TK_I32, 1, sl);
	c.out[0] = shaped(TK_BF16, 4, dq);
	class_of("attention_decode", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 d128 b4 t4 h32 g4 kv1024");
	int64_t pk[4] = { 100, 16, 8, 128 }, bt[2] = { 3, 300 };
	c.n_in = 5;
	c.in[1] = shaped(TK_BF16, 4, pk);
	c.in[2] = shaped(TK_BF16, 4, pk);
	c.in[3] = shaped(TK_I32, 2, bt);
	c.in[4] = shaped(TK_I32, 1, sl);
	class_of("attention_decode_paged", &c, s, sizeof(s));
	cr_assert_str_eq(s, "bf16 d128 paged b4 t4 h32 g4 kv8192");
	/* head dim 96: the CUDA kernel does not serve it, so no class */
	c.in[0].shape[3] = 96;
	cr_assert_eq(
	        tk_kernel_find("attention_decode_paged")->tuning->shape_class(&c, s, sizeof(s)),
	        -1);
}

/* ---- the file ------------------------------------------------------------------- */

Test(tuning, a_saved_table_of_every_family_loads_back_with_every_entry)
{
	char err[512], fam[TUNING_FAMILY_MAX], cls[TK_TUNING_TEXT_MAX];
	tk_choice a = choice("gemm", "sm90 m128 n256 k64 s4 c2 sk1");
	tk_choice b = choice("gemm", "smallm m16 n64 k256 s3 c0 sk8");
	tk_choice p = choice("attention_prefill", "turns-wide");
	tk_choice d = choice("attention_decode", "splits 16"), got;
	double us;

	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 0);
	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m4096 n28672 k4096", &a, 1234.5), TILEOPS_OK);
	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m16 n6144 k4096", &b, 9.25), TILEOPS_OK);
	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m16 n6144 k4096", &b, 8.5), TILEOPS_OK);
	cr_assert_eq(tuning_put(tab, "attention_prefill", "bf16 d128 causal b4 h32 g4 q4096 kv4096",
	                        &p, 800.0),
	             TILEOPS_OK);
	cr_assert_eq(
	        tuning_put(tab, "attention_decode", "bf16 d128 b1 t1 h32 g4 kv65536", &d, 68.1),
	        TILEOPS_OK);
	cr_assert_eq(tuning_count(tab), 4, "a second put of a class replaces the first");
	cr_assert_eq(tuning_save(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);

	tuning_clear(tab);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m16 n6144 k4096", &got, NULL), 0);
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(tuning_count(tab), 4);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m4096 n28672 k4096", &got, &us), 1);
	cr_assert(tk_choice_same(&got, &a));
	cr_assert_eq(got.mode, TK_CHOICE_PREFER);
	cr_assert_float_eq(us, 1234.5, 1e-9);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m16 n6144 k4096", &got, &us), 1);
	cr_assert(tk_choice_same(&got, &b));
	cr_assert_float_eq(us, 8.5, 1e-9);
	cr_assert_eq(tuning_get(tab, "attention_prefill", "bf16 d128 causal b4 h32 g4 q4096 kv4096",
	                        &got, NULL),
	             1);
	cr_assert(tk_choice_same(&got, &p));
	cr_assert_eq(
	        tuning_get(tab, "attention_decode", "bf16 d128 b1 t1 h32 g4 kv65536", &got, NULL),
	        1);
	cr_assert_eq(got.v[0], 16);
	/* The key is the family and the class: the same text in another family is another entry. */
	cr_assert_eq(tuning_get(tab, "attention_decode", "bf16 nt m16 n6144 k4096", &got, NULL), 0);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m32 n6144 k4096", &got, NULL), 0);
	/* Entries in (family, class) order. */
	cr_assert_eq(tuning_entry(tab, 0, fam, sizeof(fam), cls, sizeof(cls), &got, &us), 0);
	cr_assert_str_eq(fam, "attention_decode");
	cr_assert_eq(tuning_entry(tab, 4, fam, sizeof(fam), cls, sizeof(cls), &got, &us), -1);

	FILE *f = fopen(path, "r");
	char line[256];
	cr_assert_not_null(fgets(line, sizeof(line), f));
	cr_assert_str_eq(line, "tileops-tune 2 gpu=" GPU "\n");
	fclose(f);
}

Test(tuning, a_hand_written_file_with_comments_and_spacing_loads)
{
	tk_choice got;
	char err[512];

	write_file(
	        "# tuned by hand\n"
	        "tileops-tune 2 gpu=" GPU "\n"
	        "\n"
	        " gemm |  bf16  nt   m128 n2112 k7168 |sm90 m128 n128 k64 s5 c1 sk1|  40.5  # x\n"
	        "gemm | f16 nn b m64 n512 k128 | simple m64 n64 k32 s1 c0 sk0 | 3\n"
	        "attention_decode|bf16 d128 paged b64 t1 h32 g4 kv4096|splits 2|101\n");
	cr_assert_eq(tuning_check(path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 0, "check must not change the table");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 3);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m128 n2112 k7168", &got, NULL), 1,
	             "the class is kept in the form the kernels write");
	cr_assert_eq(got.v[2], 128);
	cr_assert_eq(got.v[4], 5);
	cr_assert_eq(tuning_get(tab, "gemm", "f16 nn b m64 n512 k128", &got, NULL), 1);
	cr_assert_eq(got.v[0], 0, "simple is kind 0");
	cr_assert_eq(tuning_get(tab, "attention_decode", "bf16 d128 paged b64 t1 h32 g4 kv4096",
	                        &got, NULL),
	             1);
	cr_assert_eq(got.v[0], 2);
}

Test(tuning, a_format_1_gemm_file_loads_as_the_gemm_family)
{
	tk_choice got;
	char err[512];

	write_file("tileops-gemm-tune 1 gpu=" GPU "\n"
	           "# shape class | config | measured us (docs/tuning.md)\n"
	           "bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 sk1 | 40.5\n"
	           "bf16 nn b m1 n512 k128 | sm90 m64 n256 k64 s4 c1 sk1 | 7.952\n");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 2);
	const tk_choice want = { TK_CHOICE_PREFER, { 1, 64, 256, 64, 4, 1, 1 } };
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nn b m1 n512 k128", &got, NULL), 1);
	cr_assert(tk_choice_same(&got, &want));
	/* Saving writes format 2, which loads to the same entries. */
	cr_assert_eq(tuning_save(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	tuning_clear(tab);
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 2);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m128 n2112 k7168", &got, NULL), 1);
	cr_assert_eq(got.v[4], 5);
}

/*
 * The table shipped for the H200 (deploy/gemm-tune-h200.txt, format 2) was
 * converted from the measured format-1 file (tests/unit/data): both load,
 * with the same classes mapped to the same configurations.
 */
Test(tuning, the_shipped_h200_table_maps_the_measured_classes_to_the_same_configs)
{
	tuning *old = tuning_new(GPU);
	char err[512], fam[TUNING_FAMILY_MAX], cls[TK_TUNING_TEXT_MAX];
	tk_choice a, b;
	double ua, ub;

	cr_assert_not_null(old);
	cr_assert_eq(
	        tuning_load(tab, TILEOPS_SOURCE_DIR "/deploy/gemm-tune-h200.txt", err, sizeof(err)),
	        TILEOPS_OK, "%s", err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(tuning_load(old, TILEOPS_SOURCE_DIR "/tests/unit/data/gemm-tune-h200-v1.txt",
	                         err, sizeof(err)),
	             TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(old), 139, "the measured file has 139 classes");
	cr_assert_eq(tuning_count(tab), tuning_count(old));
	for (int i = 0; i < tuning_count(old); i++) {
		cr_assert_eq(tuning_entry(old, i, fam, sizeof(fam), cls, sizeof(cls), &a, &ua), 0);
		cr_assert_str_eq(fam, "gemm");
		cr_assert_eq(tuning_get(tab, fam, cls, &b, &ub), 1, "%s is not shipped", cls);
		cr_assert(tk_choice_same(&a, &b), "%s: another configuration", cls);
		cr_assert_float_eq(ua, ub, 1e-9, "%s", cls);
	}
	tuning_free(old);
}

static void expect_bad(const char *text, const char *where, const char *what)
{
	char err[512], want[300];
	tk_choice c = choice("gemm", "sm90 m64 n64 k64 s2 c1 sk1");

	tuning_clear(tab);
	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m1 n1 k1", &c, 1.0), TILEOPS_OK);
	write_file(text);
	snprintf(want, sizeof(want), "%s:%s: ", path, where);
	cr_expect_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT,
	             "accepted:\n%s", text);
	cr_expect(strncmp(err, want, strlen(want)) == 0, "'%s' does not start with '%s'", err,
	          want);
	cr_expect(strstr(err, what) != NULL, "'%s' does not say '%s'", err, what);
	cr_expect_eq(tuning_count(tab), 1, "a failed load must leave the table as it was");
	cr_expect_eq(tuning_check(path, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);
}

Test(tuning, a_malformed_file_is_refused_naming_file_and_line)
{
	const char *h = "tileops-tune 2 gpu=" GPU "\n";
	char text[1024];

	expect_bad("gemm | bf16 nt m1 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n", "1", "header");
	expect_bad("tileops-tune 3 gpu=" GPU "\n", "1", "version 3");
	expect_bad("tileops-gemm-tune 2 gpu=" GPU "\n", "1", "version 2");
	expect_bad("tileops-tune 2\n", "1", "gpu=");
	snprintf(text, sizeof(text),
	         "%s# ok\ngemm | bf16 nt m3 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n", h);
	expect_bad(text, "3", "power of two");
	snprintf(text, sizeof(text),
	         "%sgemm | bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n"
	         "gemm | bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 | 1\n",
	         h);
	expect_bad(text, "3", "choice");
	snprintf(text, sizeof(text), "%sgemm | bf16 xx m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n",
	         h);
	expect_bad(text, "2", "'xx' is not nt|nn");
	snprintf(text, sizeof(text), "%sgemm | q8 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n",
	         h);
	expect_bad(text, "2", "dtype");
	snprintf(text, sizeof(text), "%sgemm | bf16 nt m4 n1 | sm90 m64 n64 k64 s2 c1 sk1 | 1\n",
	         h);
	expect_bad(text, "2", "DTYPE nt|nn [b] m^ n# k#");
	snprintf(text, sizeof(text),
	         "%sgemm | bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | -3\n", h);
	expect_bad(text, "2", "positive");
	snprintf(text, sizeof(text), "%sgemm | bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1\n", h);
	expect_bad(text, "2", "FAMILY | SHAPE CLASS | CHOICE | US");
	snprintf(text, sizeof(text),
	         "%sgemm | bf16 nt m4 n1 k1 | sm90 m64 n64 k64 s2 c1 sk1 | 1 | 2\n", h);
	expect_bad(text, "2", "FAMILY | SHAPE CLASS | CHOICE | US");
	snprintf(text, sizeof(text), "%srms_norm | bf16 nt m4 n1 k1 | x | 1\n", h);
	expect_bad(text, "2", "unknown family 'rms_norm' (this build tunes");
	snprintf(text, sizeof(text),
	         "%sattention_decode | bf16 d128 b1 t1 h32 g4 kv65536 | splits 0 | 1\n", h);
	expect_bad(text, "2", "splits N");
	snprintf(text, sizeof(text),
	         "%sattention_prefill | bf16 d128 causal b3 h32 g4 q4096 kv4096 | turns | 1\n", h);
	expect_bad(text, "2", "'b3' is not bN with N a power of two");
	/* format 1: its own line syntax */
	expect_bad("tileops-gemm-tune 1 gpu=" GPU "\ngemm | bf16 nt m4 n1 k1 | x | 1\n", "2",
	           "SHAPE CLASS | CONFIG | US");
}

Test(tuning, a_file_made_on_another_gpu_is_checked_but_its_entries_are_not_used)
{
	tk_choice got;
	char err[512];

	write_file("tileops-tune 2 gpu=NVIDIA A100-SXM4-80GB sm=80\n"
	           "gemm | bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 sk1 | 40\n");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 0);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m128 n2112 k7168", &got, NULL), 0);
	cr_assert(strstr(err, "A100") && strstr(err, "not used"), "%s", err);

	/* Saving now writes this GPU's header, not the file's. */
	cr_assert_eq(tuning_save(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_str_eq(err, "");

	/* A malformed line is found in another GPU's file too. */
	write_file("tileops-tune 2 gpu=NVIDIA A100-SXM4-80GB sm=80\n"
	           "gemm | bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 | 40\n");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);

	/* A table for no GPU in particular takes any file's entries, and its GPU. */
	tuning *any = tuning_new(NULL);
	char gpu[128];
	write_file("tileops-tune 2 gpu=NVIDIA A100-SXM4-80GB sm=80\n"
	           "gemm | bf16 nt m128 n2112 k7168 | sm90 m128 n128 k64 s5 c1 sk1 | 40\n");
	cr_assert_eq(tuning_load(any, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(any), 1);
	tuning_gpu(any, gpu, sizeof(gpu));
	cr_assert_str_eq(gpu, "NVIDIA A100-SXM4-80GB sm=80");
	tuning_free(any);
}

Test(tuning, a_missing_or_empty_file_is_an_empty_table_not_an_error)
{
	tk_choice c = choice("gemm", "sm90 m64 n64 k64 s2 c1 sk1");
	char err[512];

	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m1 n1 k1", &c, 1.0), TILEOPS_OK);
	cr_assert_eq(tuning_check(path, err, sizeof(err)), TILEOPS_OK);
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 0);
	cr_assert(strstr(err, "no such file"), "%s", err);
	write_file("");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	write_file("# only a comment\n");
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);
}

Test(tuning, saving_into_a_missing_folder_fails_with_the_path)
{
	char err[512], bad[300];

	snprintf(bad, sizeof(bad), "%s/no/such/dir/tune.txt", dir);
	cr_assert_eq(tuning_save(tab, bad, err, sizeof(err)), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(strstr(err, "no/such/dir") && strstr(err, "cannot create"), "%s", err);
}

Test(tuning, a_placeholder_entry_gives_the_built_in_choice_and_is_never_saved)
{
	tk_choice c = choice("gemm", "simple m64 n64 k32 s1 c0 sk0"), got;
	char err[512];

	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m8 n4096 k4096", &c, 0.0), TILEOPS_OK);
	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m16 n4096 k4096", &c, 5.0), TILEOPS_OK);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m8 n4096 k4096", &got, NULL), 1);
	cr_assert_eq(got.mode, TK_CHOICE_NONE, "a placeholder names no choice");
	cr_assert_eq(tuning_save(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_load(tab, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_count(tab), 1);
	cr_assert_eq(tuning_get(tab, "gemm", "bf16 nt m8 n4096 k4096", &got, NULL), 0);
}

/* ---- threads -------------------------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 200

static void *writer_reader(void *arg)
{
	int t = (int)(intptr_t)arg;
	char cls[64];

	for (int i = 0; i < PER_THREAD; i++) {
		tk_choice c = { TK_CHOICE_PREFER, { 2, 16, 64, 64 * (t + 1), 2, 0, i + 1 } }, got;
		snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, t + 1);
		if (tuning_put(tab, "gemm", cls, &c, (double)i + 1.0) != TILEOPS_OK)
			return (void *)1;
		if (!tuning_get(tab, "gemm", cls, &got, NULL) || got.v[6] != i + 1 ||
		    got.v[3] != 64 * (t + 1))
			return (void *)1;
		/* Read an entry another thread may be writing right now. */
		snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, (t + 1) % THREADS + 1);
		if (tuning_get(tab, "gemm", cls, &got, NULL) && got.v[6] != i + 1)
			return (void *)1;
	}
	return NULL;
}

Test(tuning, concurrent_puts_and_gets_lose_and_mix_nothing)
{
	pthread_t th[THREADS];
	tk_choice got;
	char cls[64];

	for (int t = 0; t < THREADS; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, writer_reader, (void *)(intptr_t)t), 0);
	for (int t = 0; t < THREADS; t++) {
		void *r;
		pthread_join(th[t], &r);
		cr_expect_null(r, "thread %d saw a wrong entry", t);
	}
	cr_assert_eq(tuning_count(tab), THREADS * PER_THREAD);
	for (int t = 0; t < THREADS; t++) {
		for (int i = 0; i < PER_THREAD; i++) {
			snprintf(cls, sizeof(cls), "bf16 nt m16 n%d k%d", i + 1, t + 1);
			cr_assert_eq(tuning_get(tab, "gemm", cls, &got, NULL), 1, "%s", cls);
			cr_assert_eq(got.v[6], i + 1);
			cr_assert_eq(got.v[3], 64 * (t + 1));
		}
	}
}

static volatile int saving;

/* Load the file over and over while it is being saved: never half a file. */
static void *reader(void *arg)
{
	tuning *r = tuning_new(GPU);
	char err[512];
	(void)arg;

	while (saving) {
		if (tuning_load(r, path, err, sizeof(err)) != TILEOPS_OK ||
		    (tuning_count(r) != 10 && tuning_count(r) != 300)) {
			tuning_free(r);
			return (void *)1;
		}
	}
	tuning_free(r);
	return NULL;
}

Test(tuning, saves_are_atomic_readers_see_the_old_or_the_new_file)
{
	tuning *small = tuning_new(GPU), *big = tuning_new(GPU);
	tk_choice c = choice("gemm", "sm90 m128 n256 k64 s4 c1 sk1");
	char err[512], cls[64];
	pthread_t th[2];

	for (int i = 0; i < 300; i++) {
		snprintf(cls, sizeof(cls), "bf16 nt m1 n%d k4096", i + 1);
		cr_assert_eq(tuning_put(big, "gemm", cls, &c, 1.0 + i), TILEOPS_OK);
		if (i < 10)
			cr_assert_eq(tuning_put(small, "gemm", cls, &c, 1.0 + i), TILEOPS_OK);
	}
	cr_assert_eq(tuning_save(small, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	saving = 1;
	for (int t = 0; t < 2; t++)
		cr_assert_eq(pthread_create(&th[t], NULL, reader, NULL), 0);
	for (int i = 0; i < 200; i++)
		cr_assert_eq(tuning_save(i % 2 ? small : big, path, err, sizeof(err)), TILEOPS_OK,
		             "%s", err);
	saving = 0;
	for (int t = 0; t < 2; t++) {
		void *r;
		pthread_join(th[t], &r);
		cr_expect_null(r, "a reader saw a file that was neither the old nor the new");
	}
	tuning_free(small);
	tuning_free(big);
}

/* ---- what the executor asks --------------------------------------------------------- */

Test(tuning, apply_fills_the_choice_of_a_class_in_the_table_and_clears_it_otherwise)
{
	const tk_kernel_entry *g = tk_kernel_find("gemm"), *n = tk_kernel_find("rms_norm");
	tk_choice c = choice("gemm", "decode m8 n128 k64 s12 c4 sk4");
	tk_call call = gemm_call(TK_BF16, 0, 7, 4096, 4096, 1);

	cr_assert_eq(tuning_put(tab, "gemm", "bf16 nt m8 n4096 k4096", &c, 11.0), TILEOPS_OK);
	call.choice.mode = TK_CHOICE_EXACT; /* whatever was there before */
	tuning_apply(tab, g, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_PREFER);
	cr_assert(tk_choice_same(&call.choice, &c));
	call = gemm_call(TK_BF16, 0, 9, 4096, 4096, 1); /* class m16: not in the table */
	call.choice.mode = TK_CHOICE_EXACT;
	tuning_apply(tab, g, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_NONE);
	call.choice.mode = TK_CHOICE_EXACT;
	tuning_apply(tab, n, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_NONE, "a kernel without tuning gets none");
	call.choice.mode = TK_CHOICE_EXACT;
	tuning_apply(NULL, g, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_NONE, "no table: the built-in rule");
}

/* A stand-in measuring function: picks "smallm m16 n64 k256 s3 c0 sk8" in 9.5 us. */
static int measured;

static tk_status fake_measure(const tk_call *call, void *stream, double budget_ms, tk_choice *best,
                              double *us, char *err, size_t errlen)
{
	(void)call;
	(void)stream;
	(void)budget_ms;
	(void)err;
	(void)errlen;
	measured++;
	*best = (tk_choice){ TK_CHOICE_PREFER, { 2, 16, 64, 256, 3, 0, 8 } };
	*us = 9.5;
	return TK_OK;
}

static tk_status failing_measure(const tk_call *call, void *stream, double budget_ms,
                                 tk_choice *best, double *us, char *err, size_t errlen)
{
	(void)call;
	(void)stream;
	(void)budget_ms;
	(void)best;
	(void)us;
	measured++;
	snprintf(err, errlen, "no candidate matched");
	return TK_ERR_UNSUPPORTED;
}

Test(tuning, first_use_claims_a_missing_class_once_measures_it_and_saves_the_table)
{
	tk_tuning tu = *tk_kernel_find("gemm")->tuning;
	tk_kernel_entry k = *tk_kernel_find("gemm");
	tk_call call = gemm_call(TK_BF16, 0, 100, 2112, 7168, 1);
	char cls[TK_TUNING_TEXT_MAX], err[512];
	tk_choice got;

	tu.measure = fake_measure;
	k.tuning = &tu;
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 0, "first use is off");
	tuning_first_use(tab, 1, path);
	cr_assert_eq(tuning_claim(tab, tk_kernel_find("rms_norm"), &call, cls, sizeof(cls)), 0);
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 1);
	cr_assert_str_eq(cls, "bf16 nt m128 n2112 k7168");
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 0, "claimed twice");
	/* Until it is measured the class has the built-in choice. */
	tuning_apply(tab, &k, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_NONE);
	cr_assert_eq(tuning_measure(tab, &k, &call, cls, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(measured, 1);
	tuning_apply(tab, &k, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_PREFER);
	cr_assert_eq(call.choice.v[6], 8);

	/* It was saved. */
	tuning *back = tuning_new(GPU);
	cr_assert_eq(tuning_load(back, path, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(tuning_get(back, "gemm", "bf16 nt m128 n2112 k7168", &got, NULL), 1);
	cr_assert_eq(got.v[0], 2);
	tuning_free(back);

	/* A class whose measuring fails keeps the built-in choice and is not tried again. */
	tu.measure = failing_measure;
	call = gemm_call(TK_BF16, 0, 3, 2112, 7168, 1);
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 1);
	cr_assert_neq(tuning_measure(tab, &k, &call, cls, err, sizeof(err)), TILEOPS_OK);
	cr_assert(strstr(err, "no candidate matched") && strstr(err, cls), "%s", err);
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 0);
	tuning_apply(tab, &k, &call);
	cr_assert_eq(call.choice.mode, TK_CHOICE_NONE);

	/* A family without a measuring function is never claimed. */
	tu.measure = NULL;
	call = gemm_call(TK_BF16, 0, 3000, 2112, 7168, 1);
	cr_assert_eq(tuning_claim(tab, &k, &call, cls, sizeof(cls)), 0);
}
