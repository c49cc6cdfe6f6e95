/* alone.c */
tk_status tk_cpu_alone(const tk_call *call)
{
	return toy_unary(call, 6);
}
