/*
 * gelu.c - CPU reference of gelu. Param 0, "approximate": 0 for the exact
 * form x/2 * (1 + erf(x / sqrt 2)), 1 for the tanh approximation
 * x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
 */
#include <math.h>

#include "cpu_util.h"

static float gelu_fn(float x, const tk_call *call)
{
	double v = x;

	if (tk_param_num(call, 0, 0.0) != 0.0) {
		double inner = 0.7978845608028654 * (v + 0.044715 * v * v * v);
		return (float)(0.5 * v * (1.0 + tanh(inner)));
	}
	return (float)(0.5 * v * (1.0 + erf(v * 0.7071067811865476)));
}

tk_status tk_cpu_gelu(const tk_call *call)
{
	return cpu_unary(call, gelu_fn);
}
