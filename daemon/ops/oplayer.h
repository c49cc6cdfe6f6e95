/*
 * oplayer.h - L2, the op layer: every op request is checked against the
 * op's declaration in the manifest before any kernel runs.
 *
 * The daemon decodes a request, resolves its tensor handles to tk_tensor
 * views (data pointers set, dtype/shape/strides filled) and calls
 * oplayer_prepare. On success the tk_call is ready for the kernel the op
 * layer picked; on failure the message names the op, the argument and the
 * rule that failed, e.g.
 *   "rms_norm: weight has shape [4095], expected [4096] (x.shape[-1])".
 *
 * Thread safety: an oplayer is immutable once loaded; oplayer_prepare may be
 * called from any thread. Reload builds a new one and swaps it.
 */
#ifndef TILEOPS_OPLAYER_H
#define TILEOPS_OPLAYER_H

#include <stddef.h>

#include "tileops_codes.h"
#include "tileops_kernels.h"

typedef struct manifest manifest; /* manifest.h */
typedef struct manifest_op manifest_op;
typedef struct manifest_workload manifest_workload;

/* A request as decoded from the wire, tensors resolved. */
typedef struct op_request {
	const char *op;
	int n_in;
	int n_out;
	const tk_tensor *in;  /* n_in views */
	const tk_tensor *out; /* n_out views */
	size_t n_params;
	const char *const *param_names; /* n_params names, as the client sent them */
	const tk_param *param_values;   /* n_params values (kind from the wire) */
	/* Bit i: input i was left out (handle 0); bit TK_MAX_INPUTS + j: output
	 * j was. Only optional tensors may be left out. */
	uint32_t left_out;
} op_request;

/* Roofline counts of one request, from the op's formulas. */
typedef struct op_cost {
	double flops;
	double bytes;
} op_cost;

/*
 * Validate `req` against the manifest and build the kernel call.
 * Returns TILEOPS_OK and fills *call, *kernel and *cost, or an error status
 * (UNKNOWN_OP, DTYPE, SHAPE, PARAM, UNSUPPORTED) with a message in err.
 * `have_cuda`: whether the caller will launch the CUDA variant (an op whose
 * manifest status is "spec", or with no kernel for the backend, is refused).
 * A collective (manifest_op.collective) is checked the same way but gets
 * no kernel (*kernel NULL): its call holds the ranks' tensors and its
 * params in manifest order, for the backend's collective operation.
 */
tileops_status oplayer_prepare(const manifest *m, const op_request *req, int have_cuda,
                               tk_call *call, const tk_kernel_entry **kernel, op_cost *cost,
                               char *err, size_t errlen);

/*
 * 1 when a call oplayer_prepare built for `op` writes no element: every
 * output, and every input the op mutates, has zero elements. Such a call
 * has nothing to do, and its caller launches nothing: a kernel then never
 * walks rows that hold nothing (x [2^45, 0] has 2^45 of them), so the work
 * of a request stays bounded by its bytes.
 */
int oplayer_writes_nothing(const manifest *m, const char *op, const tk_call *call);

/*
 * The tensors of the request a client would send for workload `w` of `op`
 * with `dt` the first input's dtype, without data: what a bench or a test
 * makes for a workload, and what oplayer_check_workload checks.
 *
 * tensors: op->n_in + op->n_out entries, the caller's, by manifest index
 * (inputs, then outputs). Each input the workload gives gets its shape,
 * packed strides and a dtype; an input it does not give is zeroed (dtype
 * TK_DTYPE_INVALID): the request leaves it out (handle 0). Each output
 * gets the shape the op's formulas give, packed strides and a dtype. data
 * is NULL throughout. A tensor's dtype is dtypes[i] when the caller gives
 * one (dtypes NULL, or an entry TK_DTYPE_INVALID, gives none), else its
 * rule's choice: the dtype of the tensor it follows, `dt` where the rule
 * allows it, else the first dtype the rule allows.
 * given (may be NULL): bit i set for each input the workload gives.
 * params (may be NULL; op->n_params entries by manifest index): every
 * param's value, typed as declared, the workload's or else the default.
 *
 * The inputs and params are checked first as oplayer_prepare checks a
 * request's (counts, params, dtypes, ranks), so that a refusal says what
 * a request would be told; outputs and the kernels' conditions are left
 * to oplayer_prepare. Returns TILEOPS_OK, or an error status with the
 * message in err: INVALID_ARGUMENT when op, w or tensors is NULL or dt is
 * no dtype (nothing is written then); INVALID_ARGUMENT, PARAM, DTYPE or
 * SHAPE for a workload a request could not be made of, with tensors and
 * *given written as on success except that outputs may have no shape
 * (rank 0), and params unwritten. Allocates nothing; may be called from
 * any thread.
 */
tileops_status oplayer_workload_tensors(const manifest_op *op, const manifest_workload *w,
                                        tk_dtype dt, const tk_dtype *dtypes, tk_tensor *tensors,
                                        uint32_t *given, tk_param *params, char *err,
                                        size_t errlen);

/*
 * Check one of an op's workloads as if it were a request: the tensors
 * oplayer_workload_tensors gives it (no dtype of the caller's), then every
 * rule, and the roofline counted into *cost. Works for ops of any status;
 * picks no kernel. Returns TILEOPS_OK or an error as oplayer_prepare does.
 */
tileops_status oplayer_check_workload(const manifest_op *op, const manifest_workload *w,
                                      tk_dtype dt, op_cost *cost, char *err, size_t errlen);

#endif /* TILEOPS_OPLAYER_H */
