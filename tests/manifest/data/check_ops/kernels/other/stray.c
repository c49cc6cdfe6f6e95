/* stray.c - a reference outside its family's folder. */
tk_status tk_cpu_broken(const tk_call *call)
{
	return toy_unary(call, 5);
}
