/*
 * silu.c - CPU reference of silu: out = x * sigmoid(x).
 */
#include <math.h>

#include "cpu_util.h"

static float silu_fn(float x, const tk_call *call)
{
	return (float)((double)x / (1.0 + exp(-(double)x)));
}

tk_status tk_cpu_silu(const tk_call *call)
{
	return cpu_unary(call, silu_fn);
}
