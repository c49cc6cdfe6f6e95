/*
 * manifest_load.c - a manifest parsed and checked against the kernel
 * table (manifest.h). Apart from manifest.c so that a program that only
 * parses (the build's kernel-table generator) needs no kernels.
 */
#include "manifest.h"

int manifest_load(const char *path, manifest **out, char *err, size_t errlen)
{
	const tk_kernel_entry *table;
	size_t n;

	if (manifest_parse(path, out, err, errlen) < 0)
		return -1;
	table = tk_kernels(&n);
	if (manifest_check_kernels(*out, table, n, 0, err, errlen) < 0) {
		manifest_free(*out);
		*out = NULL;
		return -1;
	}
	return 0;
}
