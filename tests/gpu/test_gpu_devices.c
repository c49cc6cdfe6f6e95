/*
 * test_gpu_devices.c - the device API through tileopsd on the CUDA backend
 * (the CPU backend's emulated devices are tests/integration/test_devices.c):
 * one GPU reported with its memory, and tileops_tensor_copy on the device,
 * ordered after the ops that write its source and before the ones that
 * read its destination.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "integration/daemon2.h"
#include "integration/helpers.h"

TestSuite(gpu_devices, .fini = daemon2_kill_running, .timeout = 300);

static tileops_client *start(daemon2 *d)
{
	daemon2_start(d, "");
	daemon2_use(d);
	tileops_client *c = th_connect("gpu-devices", 0);
	tileops_server_info info;
	cr_assert_eq(tileops_server_info_get(c, &info), TILEOPS_OK);
	cr_assert_str_eq(info.backend, "cuda", "these tests need the CUDA backend");
	return c;
}

Test(gpu_devices, one_gpu_is_reported_with_its_memory)
{
	daemon2 d;
	tileops_client *c = start(&d);
	tileops_device_info info;
	cr_assert_eq(tileops_device_count(c), 1);
	cr_assert_eq(tileops_device_info_get(c, 0, &info), TILEOPS_OK, "%s", tileops_last_error());
	cr_assert_gt(info.memory_bytes, 1ull << 30, "device memory %llu bytes",
	             (unsigned long long)info.memory_bytes);
	cr_assert_not_null(strstr(info.name, "sm_90"), "%s", info.name);
	tileops_close(c);
	daemon2_stop(&d);
}

/* 64 MiB: long enough on the device that a copy not ordered after the add
 * before it would read the old bytes. */
Test(gpu_devices, a_copy_sees_the_op_before_it_and_the_op_after_it_sees_the_copy)
{
	daemon2 d;
	tileops_client *c = start(&d);
	enum { N = 16 << 20 };
	const int64_t shape[1] = { N };
	float *v = malloc(sizeof(float) * N);
	cr_assert_not_null(v);
	for (int i = 0; i < N; i++)
		v[i] = (float)(i % 1000);
	tileops_tensor x = th_tensor_f32(c, 1, shape, v), y = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor z = th_tensor_f32(c, 1, shape, NULL);
	tileops_tensor in[2] = { x, x };
	tileops_op add = {
		.name = "add", .inputs = in, .n_inputs = 2, .outputs = &y, .n_outputs = 1
	};
	th_run(c, &add); /* y = 2x */
	cr_assert_eq(tileops_tensor_copy(c, z, y), TILEOPS_OK, "%s", tileops_last_error());
	tileops_tensor in2[2] = { z, x };
	tileops_op add2 = {
		.name = "add", .inputs = in2, .n_inputs = 2, .outputs = &y, .n_outputs = 1
	};
	th_run(c, &add2); /* y = z + x = 3x, after the copy read y */
	float *zr = th_read_f32(c, z, N), *yr = th_read_f32(c, y, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(zr[i], 2.0f * v[i], "z[%d] = %g, expected %g", i, zr[i], 2.0f * v[i]);
		cr_assert_eq(yr[i], 3.0f * v[i], "y[%d] = %g, expected %g", i, yr[i], 3.0f * v[i]);
	}
	free(zr);
	free(yr);
	free(v);
	tileops_close(c);
	daemon2_stop(&d);
}
