/*
 * activation.c - CPU references of the activation ops (sigmoid, relu, silu,
 * mish, hardswish, gelu, softplus, leaky_relu, clamp); activation.cu has
 * their CUDA kernels. Each widens to double, computes, and rounds once.
 * Params are read by position, as the kernel table lists them.
 */
#include <math.h>

#include "cpu_util.h"

static double gelu_of(double x, int approximate)
{
	if (approximate) {
		double inner = 0.7978845608028654 * (x + 0.044715 * x * x * x);
		return 0.5 * x * (1.0 + tanh(inner));
	}
	return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
}

static double softplus_of(double x, double beta, double threshold)
{
	/* PyTorch's rule: above the threshold (in beta * x) the op is linear. */
	if (beta * x > threshold)
		return x;
	return log1p(exp(beta * x)) / beta;
}

static double relu6(double x)
{
	return x < 0.0 ? 0.0 : (x > 6.0 ? 6.0 : x);
}

/* NaN passes through max/min-style ops, as in PyTorch. */
static double clamp_of(double x, double lo, double hi)
{
	if (isnan(x))
		return x;
	return x < lo ? lo : (x > hi ? hi : x);
}

CPU_UNARY(sigmoid, 1.0 / (1.0 + exp(-x)))
CPU_UNARY(relu, isnan(x) ? x : (x > 0.0 ? x : 0.0))
CPU_UNARY(silu, x / (1.0 + exp(-x)))
CPU_UNARY(mish, x *tanh(softplus_of(x, 1.0, 20.0)))
CPU_UNARY(hardswish, x *relu6(x + 3.0) / 6.0)
CPU_UNARY(gelu, gelu_of(x, tk_param_num(call, 0, 0.0) != 0.0))
CPU_UNARY(softplus, softplus_of(x, tk_param_num(call, 0, 1.0), tk_param_num(call, 1, 20.0)))
CPU_UNARY(leaky_relu, x >= 0.0 ? x : x * tk_param_num(call, 0, 0.01))
CPU_UNARY(clamp, clamp_of(x, tk_param_num(call, 0, -INFINITY), tk_param_num(call, 1, INFINITY)))
