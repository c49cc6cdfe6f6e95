/*
 * client.c - the smallest program built against an installed libtileops:
 * connect to the daemon named by argv[1] (or the default address), make
 * two f32 tensors, run add into a third, read it back and check every
 * element. Exit 0 on the right result, 1 with a message otherwise.
 * scripts/test-install.sh builds it through find_package(tileops) and
 * through pkg-config (shared and static) and runs it against the
 * installed tileopsd.
 */
#include <stdint.h>
#include <stdio.h>

#include <tileops.h>

#define N 1000

static int fail(const char *what, tileops_status st)
{
	fprintf(stderr, "install client: %s: %s (%s)\n", what, tileops_strerror(st),
	        tileops_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	static float a[N], b[N], out[N];
	const int64_t shape[1] = { N };
	tileops_client *c = NULL;
	tileops_tensor ta, tb, tc;
	tileops_status st;

	if ((st = tileops_connect(argc > 1 ? argv[1] : NULL, &c)) != TILEOPS_OK)
		return fail("connect", st);
	for (int i = 0; i < N; i++) {
		a[i] = (float)i;
		b[i] = 0.5f * (float)(N - i);
	}
	if ((st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &ta)) != TILEOPS_OK ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &tb)) != TILEOPS_OK ||
	    (st = tileops_tensor_create(c, TILEOPS_F32, 1, shape, &tc)) != TILEOPS_OK)
		return fail("tensor_create", st);
	if ((st = tileops_tensor_write(c, ta, 0, a, sizeof(a))) != TILEOPS_OK ||
	    (st = tileops_tensor_write(c, tb, 0, b, sizeof(b))) != TILEOPS_OK)
		return fail("tensor_write", st);
	tileops_tensor in[2] = { ta, tb };
	tileops_op op = {
		.name = "add", .inputs = in, .n_inputs = 2, .outputs = &tc, .n_outputs = 1
	};
	if ((st = tileops_op_run(c, &op)) != TILEOPS_OK)
		return fail("add", st);
	if ((st = tileops_tensor_read(c, tc, 0, out, sizeof(out))) != TILEOPS_OK)
		return fail("tensor_read", st);
	for (int i = 0; i < N; i++) {
		if (out[i] != a[i] + b[i]) {
			fprintf(stderr, "install client: add[%d] = %g, expected %g\n", i,
			        (double)out[i], (double)(a[i] + b[i]));
			return 1;
		}
	}
	tileops_close(c);
	printf("install client: add of %d elements is right\n", N);
	return 0;
}
