/*
 * run_adds.c - tileops-test-adds ADDRESS COUNT [NAME]: connect to a
 * tileopsd, run COUNT adds of two f32 vectors, wait for them, and exit 0
 * (1 with the daemon's message on any failure). A client whose op count a
 * test knows, for the scripts that check what the daemon reports.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tileops.h"

static int fail(const char *what, tileops_status st)
{
	fprintf(stderr, "tileops-test-adds: %s: %s (%s)\n", what, tileops_strerror(st),
	        tileops_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3 || atoi(argv[2]) < 0) {
		fprintf(stderr, "usage: tileops-test-adds ADDRESS COUNT [NAME]\n");
		return 2;
	}
	tileops_connect_options o = { .address = argv[1],
		                      .name = argc > 3 ? argv[3] : "test-adds" };
	tileops_client *c = NULL;
	tileops_tensor x, y;
	const int64_t shape[] = { 1024 };
	float v[1024];
	tileops_status st = tileops_connect_opts(&o, &c);
	if (st != TILEOPS_OK)
		return fail("connect", st);
	for (int i = 0; i < 1024; i++)
		v[i] = (float)i * 0.5f;
	if ((st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &x)) != TILEOPS_OK ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &y)) != TILEOPS_OK ||
	    (st = tileops_tensor_write(c, x, 0, v, sizeof(v))) != TILEOPS_OK)
		return fail("tensors", st);
	tileops_tensor in[2] = { x, x };
	tileops_op op = { "add", in, 2, &y, 1, NULL, 0 };
	for (int i = 0, n = atoi(argv[2]); i < n; i++)
		if ((st = tileops_op_run(c, &op)) != TILEOPS_OK)
			return fail("add", st);
	if ((st = tileops_sync(c)) != TILEOPS_OK)
		return fail("sync", st);
	tileops_close(c);
	return 0;
}
