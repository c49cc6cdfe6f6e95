/* toy.c - written out; "tk_cpu_broken(" in a string or a comment defines nothing. */
tk_status tk_cpu_complete(const tk_call *call)
{
	return toy_unary(call, 1);
}

tk_status tk_cpu_host_only(const tk_call *call)
{
	return toy_unary(call, 2);
}

static const char *note = "tk_cpu_broken(x) {";
