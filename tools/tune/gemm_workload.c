/* gemm_workload.c - see gemm_workload.h. */
#include "gemm_workload.h"

#include <string.h>

static int param_index(const manifest_op *op, const char *name)
{
	for (int i = 0; i < op->n_params; i++)
		if (strcmp(op->params[i].name, name) == 0)
			return i;
	return -1;
}

int gemm_workload_trans_b(const manifest_op *op, const manifest_workload *w)
{
	int pi = param_index(op, "trans_b");

	if (pi < 0)
		return 0;
	for (int i = 0; i < w->n_params; i++)
		if (w->param[i] == pi)
			return w->value[i].v.b;
	return op->params[pi].has_default ? op->params[pi].def.v.b : 0;
}
