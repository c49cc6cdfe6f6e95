/*
 * add.c - CPU reference of add: out = a + b, numpy broadcasting.
 */
#include "cpu_util.h"

static float add_fn(float a, float b)
{
	return a + b;
}

tk_status tk_cpu_add(const tk_call *call)
{
	return cpu_binary(call, add_fn);
}
