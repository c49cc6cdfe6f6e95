/*
 * sqe.h - the binary submission-ring descriptors (proto/tileops_ring.h:
 * TILEOPS_SQE_OP, TILEOPS_SQE_PLAN_RUN) decoded into the OpRun and PlanRun
 * messages the executor runs, without allocating: every string and array
 * of the result lives in the decoded struct itself (on the caller's stack).
 */
#ifndef TILEOPS_SQE_H
#define TILEOPS_SQE_H

#include <stddef.h>

#include "tileops.pb-c.h"
#include "tileops_kernels.h"
#include "tileops_ring.h"
#include "tileops_codes.h"

/*
 * A decoded op descriptor: an OpRun whose strings and arrays all live in
 * this struct (on the worker's stack), so the executor runs it exactly as
 * an unpacked protobuf OpRun, with nothing to allocate or free.
 */
typedef struct sqe_op_run {
	Tileops__OpRun run;
	char op[TILEOPS_SQE_OP_NAME_BYTES];
	uint64_t inputs[TK_MAX_INPUTS];
	uint64_t outputs[TK_MAX_OUTPUTS];
	char names[TK_MAX_PARAMS][TILEOPS_SQE_PARAM_NAME_BYTES];
	Tileops__Param params[TK_MAX_PARAMS];
	Tileops__Param *param_ptrs[TK_MAX_PARAMS];
} sqe_op_run;

typedef struct sqe_plan_run {
	Tileops__PlanRun run;
	Tileops__PlanBinding bindings[TILEOPS_SQE_PLAN_MAX_BINDINGS];
	Tileops__PlanBinding *binding_ptrs[TILEOPS_SQE_PLAN_MAX_BINDINGS];
} sqe_plan_run;

/*
 * Check a descriptor and decode it. `e` must be the caller's own copy of
 * the entry (ring_take), so every field is read once, here. On a bad field
 * the status is TILEOPS_ERR_PROTOCOL and err names the field and value.
 */
tileops_status sqe_decode_op(const tileops_sqe *e, sqe_op_run *o, char *err, size_t errlen);
tileops_status sqe_decode_plan_run(const tileops_sqe *e, sqe_plan_run *o, char *err, size_t errlen);

#endif /* TILEOPS_SQE_H */
