/*
 * warmup.h - plans the daemon captures at start, before it reports ready,
 * from the file named by the config key `warmup` (deploy/warmup.yaml is a
 * commented sample). Sessions of the plan's tenant open them by name
 * (PlanOpen) and run them with their own tensors bound in.
 */
#ifndef TILEOPSD_WARMUP_H
#define TILEOPSD_WARMUP_H

#include <stddef.h>
#include <stdint.h>

#include "tileops_kernels.h"

#define WARM_NAME_MAX 64
#define WARM_MAX_TENSORS 64
#define WARM_MAX_BUCKETS 32

typedef struct warm_tensor {
	char name[WARM_NAME_MAX];
	tk_dtype dtype;
	int ndim;
	int64_t shape[TK_MAX_DIMS];
} warm_tensor;

typedef struct warm_op {
	char op[WARM_NAME_MAX];
	int n_in, n_out;
	int in[TK_MAX_INPUTS]; /* indices into the plan's tensors */
	int out[TK_MAX_OUTPUTS];
	int n_params;
	char param_names[TK_MAX_PARAMS][WARM_NAME_MAX];
	tk_param params[TK_MAX_PARAMS];
} warm_op;

typedef struct warm_plan {
	char name[WARM_NAME_MAX];
	char tenant[WARM_NAME_MAX];
	int line;
	int n_buckets;
	int64_t buckets[WARM_MAX_BUCKETS];
	int n_bucketed;
	int bucketed[WARM_MAX_TENSORS];
	int n_tensors;
	warm_tensor tensors[WARM_MAX_TENSORS];
	int n_ops;
	warm_op *ops;
} warm_plan;

typedef struct warm_spec {
	int n_plans;
	warm_plan *plans;
} warm_spec;

/*
 * Read a warm-up file. Returns 0, or -1 with "FILE:LINE: message" naming
 * the key or value that is wrong. The op layer checks the ops themselves
 * when the plans are made.
 */
int warmup_load(const char *path, warm_spec **out, char *err, size_t errlen);
void warmup_free(warm_spec *w);

#endif
