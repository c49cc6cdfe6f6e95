/*
 * test_client_devices.c - libtileops and the devices a daemon serves,
 * against the scripted stand-in for tileopsd (fake_daemon.c): the list a
 * HelloReply carries (or an older daemon's lack of one), the device index
 * a tensor create sends, the client's own refusal of an index past the
 * count, and the TensorCopy request and its place in the session's order.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "fake_daemon.h"
#include "tileops.h"
#include "tileops.pb-c.h"

TestSuite(client_devices, .init = fake_start, .fini = fake_stop);

static int last_error_has(const char *needle)
{
	return strstr(tileops_last_error(), needle) != NULL;
}

Test(client_devices, a_daemon_that_reports_no_devices_serves_one_named_by_its_device_string)
{
	tileops_client *c = fake_connect(0, 0);
	tileops_device_info d;

	cr_assert_eq(tileops_device_count(c), 1);
	memset(&d, 0x5a, sizeof(d));
	cr_assert_eq(tileops_device_info_get(c, 0, &d), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_eq(d.index, 0);
	cr_assert_eq(d.ordinal, 0);
	cr_assert_eq(d.memory_bytes, 0);
	cr_assert_str_eq(d.name, "fake device");
	cr_assert_eq(tileops_device_info_get(c, 1, &d), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("serves 1 device (0..0)"), "%s", tileops_last_error());
	tileops_close(c);
}

Test(client_devices, the_reported_devices_are_kept_with_their_ordinals_names_and_memory)
{
	tileops_client *c;
	tileops_device_info d;

	fake.n_devices = 3;
	c = fake_connect(0, 0);
	cr_assert_eq(tileops_device_count(c), 3);
	for (int i = 0; i < 3; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fake device %d", i);
		cr_assert_eq(tileops_device_info_get(c, i, &d), TILEOPS_OK, "%s",
		             tileops_last_error());
		cr_assert_eq(d.index, (uint32_t)i);
		cr_assert_eq(d.ordinal, 10 + i);
		cr_assert_eq(d.memory_bytes, (uint64_t)i << 30);
		cr_assert_str_eq(d.name, name);
	}
	/* The names are the client's copies, not the decoded reply's. */
	memset(fake.device_names, 0, sizeof(fake.device_names));
	cr_assert_eq(tileops_device_info_get(c, 2, &d), TILEOPS_OK);
	cr_assert_str_eq(d.name, "fake device 2");
	tileops_close(c);
}

Test(client_devices, device_info_out_of_range_or_without_a_client_is_refused_naming_the_count)
{
	tileops_client *c;
	tileops_device_info d;

	fake.n_devices = 3;
	c = fake_connect(0, 0);
	memset(&d, 0x5a, sizeof(d));
	cr_assert_eq(tileops_device_info_get(c, 3, &d), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("device 3 is out of range: tileopsd serves 3 devices (0..2)"),
	          "%s", tileops_last_error());
	cr_assert_eq(tileops_device_info_get(c, -1, &d), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("serves 3 devices"), "%s", tileops_last_error());
	cr_assert_eq(d.index, 0x5a5a5a5au, "a refused call wrote its out-parameter");
	cr_assert_eq(tileops_device_info_get(c, 0, NULL), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_device_info_get(NULL, 0, &d), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(tileops_device_count(NULL), 0);
	tileops_close(c);
}

Test(client_devices, a_device_list_whose_indexes_are_not_their_positions_fails_connect)
{
	tileops_connect_options o;
	tileops_client *c = NULL;

	fake.n_devices = 2;
	fake.device_index_skew = 1;
	memset(&o, 0, sizeof(o));
	o.address = fake.address;
	cr_assert_eq(tileops_connect_opts(&o, &c), TILEOPS_ERR_PROTOCOL);
	cr_assert_null(c);
	cr_assert(last_error_has("device index 1 at position 0"), "%s", tileops_last_error());
}

Test(client_devices, tensor_create_on_sends_its_device_and_tensor_create_sends_device_0)
{
	tileops_client *c;
	int64_t shape[2] = { 2, 3 };
	tileops_tensor t = 0;

	fake.n_devices = 4;
	c = fake_connect(0, 0);
	cr_assert_eq(tileops_tensor_create_on(c, 2, TILEOPS_F32, 2, shape, &t), TILEOPS_OK);
	cr_assert_eq(t, 7);
	cr_assert_eq(tileops_tensor_create(c, TILEOPS_F32, 2, shape, &t), TILEOPS_OK);
	cr_assert_eq(tileops_tensor_create_on(c, 3, TILEOPS_BF16, 1, shape, &t), TILEOPS_OK);
	fake_wait_for(4);
	cr_assert_eq(fake.log[1].body, TILEOPS__REQUEST__BODY_TENSOR_CREATE);
	cr_assert_eq(fake.log[1].device, 2);
	cr_assert_eq(fake.log[2].device, 0);
	cr_assert_eq(fake.log[3].device, 3);
	tileops_close(c);
}

Test(client_devices, tensor_create_on_a_device_past_the_count_is_refused_without_sending)
{
	tileops_client *c;
	int64_t shape[1] = { 4 };
	tileops_tensor t = 0;

	fake.n_devices = 4;
	c = fake_connect(0, 0);
	cr_assert_eq(tileops_tensor_create_on(c, 4, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("tensor_create: device 4 is out of range: tileopsd serves 4 "
	                         "devices (0..3)"),
	          "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_create_on(c, -1, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(t, 0, "a refused create wrote a handle");
	cr_assert_eq(fake_count(), 1, "a refused create reached the daemon");
	/* Nothing used a seq: the next request is 1. */
	cr_assert_eq(tileops_tensor_create_on(c, 3, TILEOPS_F32, 1, shape, &t), TILEOPS_OK);
	fake_wait_for(2);
	cr_assert_eq(fake.log[1].seq, 1);
	tileops_close(c);
}

Test(client_devices, an_older_daemon_takes_only_device_0)
{
	tileops_client *c = fake_connect(0, 0);
	int64_t shape[1] = { 4 };
	tileops_tensor t = 0;

	cr_assert_eq(tileops_tensor_create_on(c, 1, TILEOPS_F32, 1, shape, &t),
	             TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("serves 1 device (0..0)"), "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_create_on(c, 0, TILEOPS_F32, 1, shape, &t), TILEOPS_OK);
	tileops_close(c);
}

Test(client_devices, tensor_copy_names_dst_and_src_and_refuses_handle_0_locally)
{
	tileops_client *c;

	fake.n_devices = 2;
	c = fake_connect(0, 0);
	cr_assert_eq(tileops_tensor_copy(c, 0, 9), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("tensor_copy: dst handle 0"), "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_copy(c, 7, 0), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert(last_error_has("tensor_copy: src handle 0"), "%s", tileops_last_error());
	cr_assert_eq(tileops_tensor_copy(NULL, 7, 9), TILEOPS_ERR_INVALID_ARGUMENT);
	cr_assert_eq(fake_count(), 1, "a refused copy reached the daemon");
	cr_assert_eq(tileops_tensor_copy(c, 7, 9), TILEOPS_OK, "%s", tileops_last_error());
	fake_wait_for(2);
	cr_assert_eq(fake.log[1].body, TILEOPS__REQUEST__BODY_TENSOR_COPY);
	cr_assert_eq(fake.log[1].handle, 7);
	cr_assert_eq(fake.log[1].src, 9);
	cr_assert_eq(fake.log[1].seq, 1);
	tileops_close(c);
}

Test(client_devices, a_copy_comes_after_the_ops_submitted_through_the_rings_before_it)
{
	tileops_client *c;
	tileops_tensor ts[2] = { 7, 7 };
	tileops_op op = { "add", ts, 2, ts, 1, NULL, 0 };
	tileops_completion *cp[3];
	int copy = -1;

	fake.serve_rings = 1;
	c = fake_connect(0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(tileops_op_submit(c, &op, &cp[i]), TILEOPS_OK, "%s",
		             tileops_last_error());
	cr_assert_eq(tileops_tensor_copy(c, 7, 8), TILEOPS_OK, "%s", tileops_last_error());
	for (int i = 0; i < fake_count(); i++)
		if (fake.log[i].body == TILEOPS__REQUEST__BODY_TENSOR_COPY)
			copy = i;
	cr_assert_geq(copy, 0, "no TensorCopy reached the daemon");
	cr_assert_eq(fake.log[copy].plane, FAKE_NNG);
	cr_assert_eq(fake.log[copy].ring_mark, 3, "the copy came after %llu ring entries",
	             (unsigned long long)fake.log[copy].ring_mark);
	cr_assert_eq(fake.log[copy].ring_consumed, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(tileops_completion_wait(cp[i], -1), TILEOPS_OK);
		tileops_completion_free(cp[i]);
	}
	tileops_close(c);
}
