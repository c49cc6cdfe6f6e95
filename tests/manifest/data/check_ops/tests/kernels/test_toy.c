/* test_toy.c - the CPU reference test of the toy family: three of its four ops. */
Test(toy, references)
{
	check("complete");
	check(tk_cpu_generated);
	check(cpu_host_only);
	check("broken_ops_are_not_named"); /* a longer identifier is not the op */
}
