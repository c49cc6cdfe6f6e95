/*
 * parity_selfcheck.c - the parity harness without a GPU (label smoke):
 * every workload of every family, scaled as the GPU binaries scale it,
 * goes through the op layer, the generators and the CPU reference, which
 * must accept the call (its shape checks agree with the shapes the op's
 * formulas gave) and write every element of every output finite, and
 * nothing outside them. A workload no rule can scale, an integer input no
 * generator writes or a generator that makes invalid inputs fails here,
 * on every machine, before a GPU run would.
 */
#include "parity/parity.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/tk_test_util.h"

#ifndef PARITY_FAMILIES
#define PARITY_FAMILIES ""
#endif

/*
 * An integer output may hold -1 (a skipped slot), whose bytes are the
 * poison's: its elements are poisoned with 0xfe bytes instead, which no
 * rule makes, so that an unwritten one is still told from a -1.
 */
static int int_output(const parity_run *r, int i)
{
	tk_dtype dt = r->t[i].dtype;

	return i >= r->c->op->n_in && (dt == TK_I32 || dt == TK_I64);
}

static void poison_elements(tk_tensor *t, unsigned char byte)
{
	size_t es = tk_dtype_size(t->dtype);

	for (int64_t e = 0; e < tk_numel(t); e++)
		memset((unsigned char *)t->data + tt_offset(t, e) * (int64_t)es, byte, es);
}

int parity_check_cpu(parity_case *c)
{
	uint64_t seed = parity_seed();
	char err[1024], name[256];
	parity_run r;
	tileops_status st;

	parity_name(c, name, sizeof(name));
	st = parity_prepare(&r, c, 0, seed, err, sizeof(err));
	cr_assert_eq(st, TILEOPS_OK, "%s: %s (seed 0x%llx)", name, err, (unsigned long long)seed);
	for (int k = 0; k < r.n_written; k++)
		if (int_output(&r, r.written[k]))
			poison_elements(&r.t[r.written[k]], 0xfe);
	cr_assert_eq(r.entry->cpu(&r.call), TK_OK,
	             "%s: the CPU reference refused the call the op layer built (%s)", name,
	             c->scaling);
	if (c->verify)
		c->verify(&r);
	for (int k = 0; k < r.n_written; k++) {
		const tk_tensor *t = &r.t[r.written[k]];
		const char *tn = c->op->tensors[r.written[k]].name;
		int64_t n = tk_numel(t), bad = 0, first = -1;
		size_t es = tk_dtype_size(t->dtype);
		int fl = t->dtype == TK_F32 || t->dtype == TK_F16 || t->dtype == TK_BF16 ||
		         t->dtype == TK_FP8_E4M3;
		unsigned char poison_byte = int_output(&r, r.written[k]) ? 0xfe : 0xff;

		for (int64_t e = 0; e < n; e++) {
			const unsigned char *p =
			        (const unsigned char *)t->data + tt_offset(t, e) * (int64_t)es;
			int poison = 1;
			for (size_t b = 0; b < es; b++)
				poison &= p[b] == poison_byte;
			if (fl ? isfinite(tt_get(t, e)) : !poison)
				continue;
			if (bad++ == 0)
				first = e;
		}
		cr_expect_eq(bad, 0,
		             "%s: %s has %lld of %lld elements %s, the first at element %lld "
		             "(%g); seed 0x%llx",
		             name, tn, (long long)bad, (long long)n,
		             fl ? "NaN or infinite (unwritten: still poison)" : "unwritten",
		             (long long)first, first >= 0 ? tt_get(t, first) : 0.0,
		             (unsigned long long)seed);
		cr_expect(parity_padding_kept(&r, k, t->data),
		          "%s: %s written outside its elements", name, tn);
	}
	parity_free(&r);
	return 1;
}

ParameterizedTestParameters(parity_selfcheck, every_workload_runs_on_the_cpu_reference)
{
	return parity_params(NULL);
}

ParameterizedTest(parity_param *p, parity_selfcheck, every_workload_runs_on_the_cpu_reference)
{
	parity_param_run(p, parity_check_cpu);
}

/*
 * Every family of the manifest has a parity binary (tests/parity/CMakeLists
 * lists them), so a new family's ops cannot ship without a GPU comparison.
 * The collectives have no kernels to compare: tests/gpu/test_gpu_collective.c
 * holds the CUDA backend's to the host's sums.
 */
Test(parity_selfcheck, every_family_of_the_manifest_has_a_parity_test)
{
	const manifest *m = parity_manifest();
	const char *have = "," PARITY_FAMILIES ",";

	for (int o = 0; o < m->n_ops; o++) {
		char want[96];

		if (m->ops[o].collective)
			continue;
		snprintf(want, sizeof(want), ",%s,", m->ops[o].family);
		cr_expect(strstr(have, want) != NULL,
		          "family %s (op %s) has no tests/parity/parity_%s.c in "
		          "tests/parity/CMakeLists.txt",
		          m->ops[o].family, m->ops[o].name, m->ops[o].family);
	}
}

/* The harness itself: scaling keeps what it promises, comparisons can fail. */
Test(parity_selfcheck, generic_scaling_keeps_last_dims_and_meets_the_budget)
{
	const manifest_op *op = manifest_find(parity_manifest(), "silu_and_mul");
	char err[512];
	parity_case c;
	int wi = -1;

	cr_assert_not_null(op);
	for (int w = 0; w < op->n_workloads; w++)
		if (op->workloads[w].shape[0][1] == 106496)
			wi = w;
	cr_assert_geq(wi, 0, "the 405b workload of silu_and_mul moved");
	cr_assert_eq(parity_from_workload(&c, op, wi, TK_BF16, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(parity_dim(&c, "x", -1), 106496, "the row length is kept");
	cr_expect_lt(parity_dim(&c, "x", 0), 4096, "the rows are fewer");
	cr_expect_leq(parity_max_elems(&c, err, sizeof(err)), PARITY_MAX_ELEMS);
	cr_expect(strstr(c.scaling, "-> [") != NULL, "the output says how: %s", c.scaling);
}

Test(parity_selfcheck, gemm_scaling_keeps_the_inner_dims_in_step)
{
	const manifest_op *op = manifest_find(parity_manifest(), "gemm");
	char err[512];
	parity_case c;

	cr_assert_not_null(op);
	for (int w = 0; w < op->n_workloads; w++) {
		cr_assert_eq(parity_from_workload(&c, op, w, TK_BF16, err, sizeof(err)), 0, "%s",
		             err);
		int tb = parity_param_num(&c, "trans_b") != 0.0;
		cr_expect_eq(parity_dim(&c, "a", 1), parity_dim(&c, "b", tb ? 1 : 0), "%s",
		             c.label);
		cr_expect_leq(parity_flops(&c, err, sizeof(err)), (double)(1 << 28), "%s", c.label);
		if (op->workloads[w].shape[0][0] <= 128)
			cr_expect_eq(parity_dim(&c, "a", 0), op->workloads[w].shape[0][0],
			             "%s: a small M is kept", c.label);
	}
}

Test(parity_selfcheck, a_changed_element_fails_the_comparison_and_names_where)
{
	parity_case c;
	parity_run r;
	char err[512], msg[768];
	int64_t shape[2] = { 3, 5 };

	parity_special(&c, "silu", TK_F32, "selfcheck");
	parity_shape(&c, "x", 2, shape);
	cr_assert_eq(parity_prepare(&r, &c, 0, 7, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_assert_eq(r.entry->cpu(&r.call), TK_OK);
	tk_tensor copy = r.t[r.written[0]];
	size_t bytes = tt_span_bytes(&copy);
	unsigned char *got = malloc(bytes);
	memcpy(got, copy.data, bytes);
	cr_expect(parity_compare(&r, 0, got, msg, sizeof(msg)), "%s", msg);
	copy.data = got;
	tt_set(&copy, 12, tt_get(&copy, 12) + 0.5);
	cr_expect_not(parity_compare(&r, 0, got, msg, sizeof(msg)));
	cr_expect(strstr(msg, "[2, 2]") != NULL, "the report names the element: %s", msg);
	tt_set(&copy, 12, NAN);
	cr_expect_not(parity_compare(&r, 0, got, msg, sizeof(msg)), "an unwritten element fails");
	free(got);
	parity_free(&r);
}

/* Element e of integer input `name` of r. */
static int64_t value_of(parity_run *r, const char *name, int64_t e)
{
	tk_tensor *t = parity_tensor(r, name);

	cr_assert_not_null(t, "%s is not given", name);
	return (int64_t)tt_get(t, e);
}

/*
 * The inputs with structure (tools/workload) are valid and varied: paged
 * decode's pages distinct until the pool is used up and its lengths within
 * the capacity, the first full and not all; kv_cache_append's slots
 * distinct, every 16th token padding and the tokens past the cache's slots
 * too; packed sequences covering every token, none past max_seqlen_q, of
 * unequal lengths, the keys split as the queries.
 */
Test(parity_selfcheck, inputs_with_structure_are_valid_and_varied)
{
	parity_case c;
	parity_run r;
	char err[512], seen[32] = { 0 };
	int64_t distinct = 0, varied = 0;

	parity_special(&c, "attention_decode_paged", TK_F16, "selfcheck");
	parity_shape(&c, "q", 3, (int64_t[]){ 4, 4, 64 });
	parity_shape(&c, "k_cache", 4, (int64_t[]){ 16, 16, 2, 64 });
	parity_shape(&c, "v_cache", 4, (int64_t[]){ 16, 16, 2, 64 });
	parity_shape(&c, "block_tables", 2, (int64_t[]){ 4, 6 });
	parity_shape(&c, "seq_lens", 1, (int64_t[]){ 4 });
	cr_assert_eq(parity_prepare(&r, &c, 0, 11, err, sizeof(err)), TILEOPS_OK, "%s", err);
	for (int64_t e = 0; e < 24; e++) {
		int64_t p = value_of(&r, "block_tables", e);
		cr_assert(p >= 0 && p < 16, "page %lld", (long long)p);
		cr_expect(e >= 16 || !seen[p], "page %lld twice in the first 16", (long long)p);
		seen[p] = 1;
	}
	cr_expect_eq(value_of(&r, "seq_lens", 0), 6 * 16, "the first sequence is full");
	for (int64_t b = 1; b < 4; b++) {
		int64_t len = value_of(&r, "seq_lens", b);
		cr_expect(len >= 1 && len <= 6 * 16, "length %lld", (long long)len);
		varied += len != 6 * 16;
	}
	cr_expect_gt(varied, 0, "some sequences are not full");
	parity_free(&r);

	parity_special(&c, "kv_cache_append", TK_F32, "selfcheck");
	parity_shape(&c, "k", 3, (int64_t[]){ 40, 2, 64 });
	parity_shape(&c, "v", 3, (int64_t[]){ 40, 2, 64 });
	parity_shape(&c, "slot_mapping", 1, (int64_t[]){ 40 });
	parity_shape(&c, "k_cache", 4, (int64_t[]){ 2, 16, 2, 64 });
	parity_shape(&c, "v_cache", 4, (int64_t[]){ 2, 16, 2, 64 });
	cr_assert_eq(parity_prepare(&r, &c, 0, 11, err, sizeof(err)), TILEOPS_OK, "%s", err);
	memset(seen, 0, sizeof(seen));
	for (int64_t t = 0; t < 40; t++) {
		int64_t s = value_of(&r, "slot_mapping", t);
		if (t % 16 == 7)
			cr_expect_eq(s, -1, "token %lld is padding", (long long)t);
		if (s < 0)
			continue;
		cr_assert_lt(s, 32);
		cr_expect(!seen[s], "slot %lld twice", (long long)s);
		seen[s] = 1;
		distinct++;
	}
	cr_expect_eq(distinct, 32, "every slot of the cache is written once");
	parity_free(&r);

	parity_special(&c, "attention_prefill_varlen", TK_F16, "selfcheck");
	parity_shape(&c, "q", 3, (int64_t[]){ 1000, 2, 64 });
	parity_shape(&c, "k", 3, (int64_t[]){ 1000, 2, 64 });
	parity_shape(&c, "v", 3, (int64_t[]){ 1000, 2, 64 });
	parity_shape(&c, "cu_seqlens_q", 1, (int64_t[]){ 9 });
	parity_shape(&c, "cu_seqlens_k", 1, (int64_t[]){ 9 });
	parity_param_int(&c, "max_seqlen_q", 300);
	cr_assert_eq(parity_prepare(&r, &c, 0, 11, err, sizeof(err)), TILEOPS_OK, "%s", err);
	cr_expect_eq(value_of(&r, "cu_seqlens_q", 0), 0);
	cr_expect_eq(value_of(&r, "cu_seqlens_q", 8), 1000, "every token is in a sequence");
	varied = 0;
	for (int64_t b = 0; b < 8; b++) {
		int64_t len = value_of(&r, "cu_seqlens_q", b + 1) - value_of(&r, "cu_seqlens_q", b);
		cr_expect(len >= 0 && len <= 300, "sequence %lld has %lld tokens", (long long)b,
		          (long long)len);
		varied += len != 125;
		cr_expect_eq(value_of(&r, "cu_seqlens_k", b + 1),
		             value_of(&r, "cu_seqlens_q", b + 1));
	}
	cr_expect_gt(varied, 0, "the sequences are of unequal lengths");
	parity_free(&r);
}
