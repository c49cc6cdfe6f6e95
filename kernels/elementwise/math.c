/*
 * math.c - CPU references of the unary math ops (exp, log, sqrt, rsqrt,
 * abs, neg, reciprocal, tanh, erf); math.cu has their CUDA kernels. Each
 * widens to double, computes, and rounds once; the input may broadcast to
 * out and rows may be padded (cpu_unary walks the iteration plan).
 */
#include <math.h>

#include "cpu_util.h"

CPU_UNARY(exp, exp(x))
CPU_UNARY(log, log(x))
CPU_UNARY(sqrt, sqrt(x))
CPU_UNARY(rsqrt, 1.0 / sqrt(x))
CPU_UNARY(abs, fabs(x))
CPU_UNARY(neg, -x)
CPU_UNARY(reciprocal, 1.0 / x)
CPU_UNARY(tanh, tanh(x))
CPU_UNARY(erf, erf(x))
