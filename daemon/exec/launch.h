/*
 * launch.h - one op, from its request to the device: its handles resolved
 * to views, checked by the op layer against the manifest, launched on the
 * session's stream, and counted in the stats. Executor thread only.
 */
#ifndef TILEOPSD_LAUNCH_H
#define TILEOPSD_LAUNCH_H

#include "oplayer.h"
#include "request.h"
#include "tensors.h"
#include "worker.h"

/* An op checked and ready to launch. */
typedef struct prepared_op {
	tk_call call;
	const tk_kernel_entry *kernel;
	op_cost cost;
	double est_us;      /* its device time, estimated from cost (share.h) */
	int slot;           /* stats slot, -1 for none */
	int writes_nothing; /* every output is empty: nothing to launch */
	int device;         /* the device its tensors are on (0 when it names none) */
	/* A collective (kernel NULL): its kind (manifest_collective), and the
	 * device of each rank, call.in[r]; `device` is rank 0's. */
	int collective;
	int rank_device[TK_MAX_INPUTS];
} prepared_op;

/*
 * Resolve d's handles through `views`, check the op against the manifest
 * and build its call. Returns TILEOPS_OK, or an error with err naming the
 * op, the argument and the rule. out->slot is set either way (-1 for an
 * op the manifest does not know, so made-up names cannot grow the stats).
 */
tileops_status launch_prepare(executor *ex, const tensor_resolver *views, const op_desc *d,
                              prepared_op *out, char *err, size_t errlen);

/*
 * First-use tuning (gemm_tune = first_use) of a prepared op of s, outside
 * any plan: when the op's class is missing from the tuning table and its
 * family can measure, s's stream is synchronized (the op's inputs are then
 * ready), the candidates are timed on scratch outputs (this waits for the
 * device: tens of milliseconds to a second, once per class;
 * docs/tuning.md) and the table's new choice is put in p's call. Returns 1
 * when it measured, else 0 (and p is as it was).
 */
int launch_first_use(executor *ex, session *s, prepared_op *p);

/*
 * Launch a prepared op on s's stream (when st is TILEOPS_OK) and count it,
 * or count its failure st. `timed`, when not NULL, gets the op's device
 * time through the timing callback (it is consumed only on success).
 */
tileops_status launch_prepared(executor *ex, session *s, const prepared_op *p, tileops_status st,
                               timed_cqe *timed, char *err, size_t errlen);

/*
 * Queue the prepared collective p (p->collective set, its tensors not
 * empty) on s's stream of each rank's device, after the work queued there
 * so far. Not counted in the stats: launch_prepared counts the ones it
 * launches, and a plan launches its own here at every run (a collective is
 * not captured into a graph).
 */
tileops_status launch_collective(executor *ex, session *s, const prepared_op *p, char *err,
                                 size_t errlen);

/* Before launching `us` of device time on s's stream (share_launch): its
 * priority for it, a demotion counted in the executor thread's stats. */
void launch_share(executor *ex, session *s, double us);

#endif
