/*
 * test_op_rules.c - every kind of rule the op layer checks, violated through
 * a running tileopsd: each request is refused with the rule's status and a
 * message naming the op and the argument, and the daemon keeps serving.
 * (test_bad_input.c covers unknown ops and params, dtypes, weight shapes,
 * param ranges and kinds; the manifest tests cover every rule in-process.)
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

static tileops_client *client;

static void setup(void)
{
	client = th_connect("op-rules", 0);
}

static void teardown(void)
{
	tileops_close(client);
}

TestSuite(rules, .init = setup, .fini = teardown, .timeout = 60);

static tileops_status run(const char *name, const tileops_tensor *in, size_t n_in,
                          const tileops_tensor *out, size_t n_out)
{
	tileops_op op = { name, in, n_in, out, n_out, NULL, 0 };

	return tileops_op_run(client, &op);
}

/* Refused with `want`, the message naming every needle; then a good op runs. */
static void refused(tileops_status got, tileops_status want, const char *a, const char *b)
{
	const char *msg = tileops_last_error();

	cr_assert_eq(got, want, "status %d (%s), expected %d: %s", got, tileops_strerror(got), want,
	             msg);
	cr_assert(th_contains(msg, a) && th_contains(msg, b), "message lacks '%s' or '%s': %s", a,
	          b, msg);
	const int64_t s[] = { 4 };
	tileops_tensor x = th_tensor_f32(client, 1, s, NULL), y = th_tensor_f32(client, 1, s, NULL);
	cr_assert_eq(run("silu", &x, 1, &y, 1), TILEOPS_OK, "the daemon stopped serving: %s",
	             tileops_last_error());
}

Test(rules, a_rank_rule_names_the_argument)
{
	/* rms_norm's weight is rank 1. */
	const int64_t sx[] = { 2, 8 }, sw[] = { 1, 8 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sx, NULL),
		                 th_tensor_f32(client, 2, sw, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sx, NULL);

	refused(run("rms_norm", in, 2, &out, 1), TILEOPS_ERR_SHAPE, "rms_norm", "weight");
}

Test(rules, an_output_of_the_wrong_shape_is_refused)
{
	const int64_t s[] = { 4, 8 }, so[] = { 4, 7 };
	tileops_tensor x = th_tensor_f32(client, 2, s, NULL);
	tileops_tensor out = th_tensor_f32(client, 2, so, NULL);

	refused(run("silu", &x, 1, &out, 1), TILEOPS_ERR_SHAPE, "silu", "out");
}

Test(rules, an_output_of_the_wrong_dtype_is_refused)
{
	const int64_t s[] = { 16 };
	tileops_tensor x = th_tensor_f32(client, 1, s, NULL);
	tileops_tensor out = th_tensor(client, TILEOPS_F16, 1, s);

	refused(run("silu", &x, 1, &out, 1), TILEOPS_ERR_DTYPE, "silu", "out");
}

Test(rules, too_many_outputs_are_refused)
{
	const int64_t s[] = { 16 };
	tileops_tensor x = th_tensor_f32(client, 1, s, NULL);
	tileops_tensor outs[2] = { th_tensor_f32(client, 1, s, NULL),
		                   th_tensor_f32(client, 1, s, NULL) };

	refused(run("silu", &x, 1, outs, 2), TILEOPS_ERR_INVALID_ARGUMENT, "silu", "output");
}

Test(rules, a_gemm_output_that_does_not_match_m_by_n_is_refused)
{
	const int64_t sa[] = { 3, 5 }, sb[] = { 5, 4 }, sc[] = { 3, 5 };
	tileops_tensor in[2] = { th_tensor_f32(client, 2, sa, NULL),
		                 th_tensor_f32(client, 2, sb, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sc, NULL);

	refused(run("gemm", in, 2, &out, 1), TILEOPS_ERR_SHAPE, "gemm", "c");
}

Test(rules, an_optional_input_of_the_wrong_shape_is_refused)
{
	/* gemm's bias is [N]. */
	const int64_t sa[] = { 3, 5 }, sb[] = { 5, 4 }, sc[] = { 3, 4 }, sbias[] = { 5 };
	tileops_tensor in[3] = { th_tensor_f32(client, 2, sa, NULL),
		                 th_tensor_f32(client, 2, sb, NULL),
		                 th_tensor_f32(client, 1, sbias, NULL) };
	tileops_tensor out = th_tensor_f32(client, 2, sc, NULL);

	refused(run("gemm", in, 3, &out, 1), TILEOPS_ERR_SHAPE, "gemm", "bias");
}
