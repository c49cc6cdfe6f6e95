/*
 * decode.h - control-plane messages (protobuf) into requests (request.h).
 * The front decodes each request when its turn comes; the executor never
 * sees a protobuf type.
 */
#ifndef TILEOPSD_DECODE_H
#define TILEOPSD_DECODE_H

#include <stddef.h>

#include "request.h"
#include "tileops.pb-c.h"

/*
 * Decode the executor's part of a control request into r (which it owns
 * from here: request_clear releases it, also after a failure). Hello,
 * Goodbye and AdminReset are the front's own and not decoded here. On a
 * bad field the status says what kind of error it is and err names the
 * field and its value.
 */
tileops_status wire_decode(const Tileops__Request *m, request *r, char *err, size_t errlen);
/* One op, and one plan run, as wire_decode decodes them inside requests. */
tileops_status wire_decode_op(const Tileops__OpRun *m, op_desc *o, char *err, size_t errlen);
tileops_status wire_decode_plan_run(const Tileops__PlanRun *m, plan_run_desc *r, char *err,
                                    size_t errlen);

#endif /* TILEOPSD_DECODE_H */
