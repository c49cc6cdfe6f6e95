/*
 * binary.c - CPU references of the binary elementwise ops, numpy
 * broadcasting of either input to out's shape. Arithmetic in double,
 * rounded once.
 */
#include <math.h>

#include "cpu_util.h"

#define BINARY(name, expr)                           \
	static float name##_fn(float af, float bf)   \
	{                                            \
		double a = af, b = bf;               \
		return (float)(expr);                \
	}                                            \
	tk_status tk_cpu_##name(const tk_call *call) \
	{                                            \
		return cpu_binary(call, name##_fn);  \
	}

/* maximum and minimum propagate NaN from either side, as PyTorch's do. */
static double max_nan(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
}

static double min_nan(double a, double b)
{
	return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
}

BINARY(add, a + b)
BINARY(sub, a - b)
BINARY(mul, a *b)
BINARY(div, a / b)
BINARY(maximum, max_nan(a, b))
BINARY(minimum, min_nan(a, b))
BINARY(pow, pow(a, b))
