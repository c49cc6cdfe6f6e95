/*
 * test_protocol_roundtrip.c - connecting, what the daemon says about
 * itself, and tensor bytes going in and coming back unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "integration/helpers.h"

static const tileops_dtype all_dtypes[] = {
	TILEOPS_F32, TILEOPS_F16, TILEOPS_BF16,     TILEOPS_I32,
	TILEOPS_I64, TILEOPS_U8,  TILEOPS_FP8_E4M3,
};

static size_t numel(int ndim, const int64_t *shape)
{
	size_t n = 1;

	for (int i = 0; i < ndim; i++)
		n *= (size_t)shape[i];
	return n;
}

/* Create, fill with random bytes, read back, compare; then free. */
static void round_trip(tileops_client *c, tileops_dtype dt, int ndim, const int64_t *shape,
                       uint64_t seed)
{
	size_t bytes = numel(ndim, shape) * tileops_dtype_size(dt);
	unsigned char *src = malloc(bytes + 1), *dst = malloc(bytes + 1);
	th_rng rng = th_rng_seed(seed);
	tileops_tensor t = th_tensor(c, dt, ndim, shape);

	cr_assert(src && dst);
	th_fill_bytes(&rng, src, bytes);
	memset(dst, 0xa5, bytes);
	th_write(c, t, src, bytes);
	th_read(c, t, dst, bytes);
	cr_assert(memcmp(src, dst, bytes) == 0,
	          "%s tensor of %zu bytes (ndim %d) came back changed", tileops_dtype_name(dt),
	          bytes, ndim);
	cr_assert_eq(tileops_tensor_free(c, t), TILEOPS_OK, "free: %s", tileops_last_error());
	free(src);
	free(dst);
}

Test(protocol, connect_reports_the_cpu_backend_and_versions)
{
	tileops_client *c = th_connect("info", 0);
	tileops_server_info info;

	memset(&info, 0, sizeof(info));
	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(info.protocol_version, 1u);
	cr_assert_str_eq(info.daemon_version, TILEOPS_VERSION_STRING);
	cr_assert_str_eq(info.backend, th_expected_backend());
	cr_assert(info.device && *info.device, "the daemon names no device");
	cr_assert_eq((info.capabilities & TILEOPS_CAP_GPU) != 0, strcmp(info.backend, "cuda") == 0,
	             "GPU capability does not match the backend");
	cr_assert(info.session_id != 0, "session id 0");
	cr_assert(info.max_message_bytes >= 64 * 1024, "max_message_bytes %llu is implausible",
	          (unsigned long long)info.max_message_bytes);
	tileops_close(c);
}

Test(protocol, two_connections_get_different_sessions)
{
	tileops_client *a = th_connect("a", 0), *b = th_connect("b", 0);
	tileops_server_info ia, ib;

	cr_assert_eq(tileops_server_info_get(a, &ia), TILEOPS_OK);
	cr_assert_eq(tileops_server_info_get(b, &ib), TILEOPS_OK);
	cr_assert_neq(ia.session_id, ib.session_id);
	tileops_close(a);
	tileops_close(b);
}

Test(protocol, every_dtype_round_trips_unchanged_at_odd_sizes)
{
	tileops_client *c = th_connect("dtypes", 0);
	const int64_t s1[] = { 1 }, s7[] = { 7 }, s35[] = { 3, 5 }, s1023[] = { 1023 };
	const int64_t s4d[] = { 2, 3, 5, 7 };

	for (size_t i = 0; i < sizeof(all_dtypes) / sizeof(all_dtypes[0]); i++) {
		tileops_dtype dt = all_dtypes[i];

		cr_assert(tileops_dtype_size(dt) > 0, "dtype %d has no size", (int)dt);
		round_trip(c, dt, 1, s1, 1 + i);
		round_trip(c, dt, 1, s7, 2 + i);
		round_trip(c, dt, 2, s35, 3 + i);
		round_trip(c, dt, 1, s1023, 4 + i);
		round_trip(c, dt, 4, s4d, 5 + i);
	}
	tileops_close(c);
}

Test(protocol, scalar_tensor_holds_one_element)
{
	tileops_client *c = th_connect("scalar", 0);

	round_trip(c, TILEOPS_F32, 0, NULL, 11);
	round_trip(c, TILEOPS_I64, 0, NULL, 12);
	tileops_close(c);
}

Test(protocol, tensor_larger_than_the_arena_moves_in_pieces)
{
	/* 1 MiB arena, a 5 MiB tensor (plus an odd tail) both ways. */
	tileops_client *c = th_connect("big", 1 << 20);
	const int64_t shape[] = { 5 * (1 << 20) / 4 + 3 };

	round_trip(c, TILEOPS_F32, 1, shape, 21);
	tileops_close(c);
}

Test(protocol, writes_and_reads_at_byte_offsets_touch_only_that_range)
{
	tileops_client *c = th_connect("offsets", 4096);
	const int64_t shape[] = { 3001 }; /* 3001 bytes: pieces of a 4 KiB arena */
	unsigned char model[3001], patch[1777], got[3001];
	th_rng rng = th_rng_seed(31);
	tileops_tensor t = th_tensor(c, TILEOPS_U8, 1, shape);

	th_fill_bytes(&rng, model, sizeof(model));
	th_fill_bytes(&rng, patch, sizeof(patch));
	th_write(c, t, model, sizeof(model));
	cr_assert_eq(tileops_tensor_write(c, t, 1001, patch, sizeof(patch)), TILEOPS_OK, "%s",
	             tileops_last_error());
	memcpy(model + 1001, patch, sizeof(patch));

	th_read(c, t, got, sizeof(got));
	cr_assert(memcmp(got, model, sizeof(model)) == 0,
	          "write at offset 1001 changed the wrong bytes");

	memset(got, 0, sizeof(got));
	cr_assert_eq(tileops_tensor_read(c, t, 13, got, 2987), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert(memcmp(got, model + 13, 2987) == 0, "read at offset 13 returned the wrong bytes");

	cr_assert_eq(tileops_tensor_read(c, t, 3000, got, 1), TILEOPS_OK, "%s",
	             tileops_last_error());
	cr_assert_eq(got[0], model[3000]);
	tileops_close(c);
}

Test(protocol, freed_handle_is_unknown_and_free_of_zero_is_a_no_op)
{
	tileops_client *c = th_connect("free", 0);
	const int64_t shape[] = { 4 };
	float buf[4] = { 0 };
	tileops_tensor t = th_tensor(c, TILEOPS_F32, 1, shape);

	cr_assert_eq(tileops_tensor_free(c, 0), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_free(c, t), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_read(c, t, 0, buf, sizeof(buf)), TILEOPS_ERR_UNKNOWN_HANDLE);
	cr_assert_eq(tileops_tensor_free(c, t), TILEOPS_ERR_UNKNOWN_HANDLE,
	             "a second free of the same handle was accepted");
	tileops_close(c);
}

Test(protocol, handles_are_never_zero_or_reused_within_a_session)
{
	tileops_client *c = th_connect("handles", 0);
	const int64_t shape[] = { 2 };
	tileops_tensor seen[64];

	for (int i = 0; i < 64; i++) {
		seen[i] = th_tensor(c, TILEOPS_F32, 1, shape);
		for (int j = 0; j < i; j++)
			cr_assert_neq(seen[i], seen[j], "handle %llu given twice",
			              (unsigned long long)seen[i]);
		if (i % 2)
			cr_assert_eq(tileops_tensor_free(c, seen[i - 1]), TILEOPS_OK);
	}
	tileops_close(c);
}

Test(protocol, dtype_names_and_sizes)
{
	cr_assert_eq(tileops_dtype_size(TILEOPS_F32), 4);
	cr_assert_eq(tileops_dtype_size(TILEOPS_F16), 2);
	cr_assert_eq(tileops_dtype_size(TILEOPS_BF16), 2);
	cr_assert_eq(tileops_dtype_size(TILEOPS_I32), 4);
	cr_assert_eq(tileops_dtype_size(TILEOPS_I64), 8);
	cr_assert_eq(tileops_dtype_size(TILEOPS_U8), 1);
	cr_assert_eq(tileops_dtype_size(TILEOPS_FP8_E4M3), 1);
	cr_assert_eq(tileops_dtype_size((tileops_dtype)99), 0);
	cr_assert_str_eq(tileops_dtype_name(TILEOPS_BF16), "bf16");
	cr_assert_str_eq(tileops_dtype_name((tileops_dtype)99), "invalid");
}
