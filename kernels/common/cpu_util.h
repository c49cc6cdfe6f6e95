/*
 * cpu_util.h - element access and shared loops of the CPU references.
 *
 * The references favour plain, checkable code over speed: every element is
 * widened to float (double for reductions), computed, and rounded once.
 */
#ifndef TILEOPS_CPU_UTIL_H
#define TILEOPS_CPU_UTIL_H

#include "tk_internal.h"

static inline float cpu_load(const void *base, tk_dtype dt, int64_t i)
{
	return tk_load_float(base, dt, i);
}

static inline void cpu_store(void *base, tk_dtype dt, int64_t i, float v)
{
	tk_store_float(base, dt, i, v);
}

typedef float (*cpu_unary_fn)(float x, const tk_call *call);
typedef float (*cpu_binary_fn)(float a, float b);

/* out = fn(in[0]) elementwise; in[0] may broadcast to out. */
tk_status cpu_unary(const tk_call *call, cpu_unary_fn fn);
/* out = fn(in[0], in[1]) elementwise, numpy broadcasting to out's shape. */
tk_status cpu_binary(const tk_call *call, cpu_binary_fn fn);

/*
 * Define the CPU reference tk_cpu_<name> of a unary op: `expr` computes
 * the result from x (a double) and may read the call's params.
 */
#define CPU_UNARY(name, expr)                                 \
	static float name##_fn(float xf, const tk_call *call) \
	{                                                     \
		double x = xf;                                \
		(void)call;                                   \
		return (float)(expr);                         \
	}                                                     \
	tk_status tk_cpu_##name(const tk_call *call)          \
	{                                                     \
		return cpu_unary(call, name##_fn);            \
	}

#endif /* TILEOPS_CPU_UTIL_H */
