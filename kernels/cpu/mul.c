/*
 * mul.c - CPU reference of mul: out = a * b, numpy broadcasting.
 */
#include "cpu_util.h"

static float mul_fn(float a, float b)
{
	return a * b;
}

tk_status tk_cpu_mul(const tk_call *call)
{
	return cpu_binary(call, mul_fn);
}
