/*
 * registry.c - the central dispatch table of the L1 kernels.
 *
 * The rows are generated from the manifest at build time
 * (tools/manifest/gen_kernel_table.c writes tk_kernel_table.inc): an op's
 * inputs, outputs and param order are declared once, in its YAML. This file
 * is compiled into both kernel libraries: with TK_WITH_CUDA into
 * tileops_kernels_cuda, whose rows name the CUDA launchers, and without it
 * into the CPU-only tileops_kernels, whose rows have none, so a program that
 * links only the CPU references carries no device code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk_internal.h"

#if TK_WITH_CUDA
#define TK_CUDA_FN(fn) (fn)
#else
#define TK_CUDA_FN(fn) NULL
#endif

#include "tk_kernel_table.inc"

#define KERNEL_COUNT (sizeof(kernel_table) / sizeof(kernel_table[0]))

const tk_kernel_entry *tk_kernels(size_t *count)
{
	if (count != NULL)
		*count = KERNEL_COUNT;
	return kernel_table;
}

static int entry_cmp(const void *key, const void *elem)
{
	return strcmp((const char *)key, ((const tk_kernel_entry *)elem)->op);
}

const tk_kernel_entry *tk_kernel_find(const char *op)
{
	if (op == NULL)
		return NULL;
	return bsearch(op, kernel_table, KERNEL_COUNT, sizeof(kernel_table[0]), entry_cmp);
}

int tk_have_cuda(void)
{
	return TK_WITH_CUDA;
}

#if !TK_WITH_CUDA
int tk_cuda_pdl(void)
{
	return 0;
}

int tk_cuda_set_pdl(int on)
{
	(void)on;
	return 0;
}

tk_status tk_cuda_device_id(int device, char *buf, size_t len)
{
	(void)device;
	snprintf(buf, len, "none");
	return TK_ERR_UNSUPPORTED;
}
#endif
