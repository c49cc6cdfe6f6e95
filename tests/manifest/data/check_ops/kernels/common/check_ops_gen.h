/* check_ops_gen.h - a generator macro as kernels/common/cpu_util.h has them. */
#define TOY_CPU(name, expr)                          \
	tk_status tk_cpu_##name(const tk_call *call) \
	{                                            \
		return toy_unary(call, (expr));      \
	}
