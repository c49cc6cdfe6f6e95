/*
 * sqe.h - the binary submission-ring descriptors (proto/tileops_ring.h:
 * TILEOPS_SQE_OP, TILEOPS_SQE_PLAN_RUN) decoded into the op and the plan
 * run of request.h, without allocating.
 */
#ifndef TILEOPSD_SQE_H
#define TILEOPSD_SQE_H

#include <stddef.h>

#include "request.h"
#include "tileops_ring.h"

/*
 * Check a descriptor and decode it. `e` must be the caller's own copy of
 * the entry (ring_take), so every field is read once, here. On a bad field
 * the status is TILEOPS_ERR_PROTOCOL and err names the field and value.
 */
tileops_status wire_decode_sqe_op(const tileops_sqe *e, op_desc *o, char *err, size_t errlen);
tileops_status wire_decode_sqe_plan_run(const tileops_sqe *e, plan_run_desc *o, char *err,
                                        size_t errlen);
/*
 * An event descriptor (TILEOPS_SQE_EVENT_WAIT or TILEOPS_SQE_EVENT_RECORD,
 * e->kind says which): *event gets the registered event's id (a wait, never
 * 0) or 0 (a record).
 */
tileops_status wire_decode_sqe_event(const tileops_sqe *e, uint64_t *event, char *err,
                                     size_t errlen);
/*
 * A TILEOPS_SQE_REQUEST entry: a packed tileops.Request, of which the ring
 * carries op_run, plan_run and sync (TILEOPS_ERR_UNSUPPORTED for others).
 * r is as wire_decode leaves it (decode.c).
 */
tileops_status wire_decode_sqe_request(const tileops_sqe *e, request *r, char *err, size_t errlen);

#endif /* TILEOPSD_SQE_H */
