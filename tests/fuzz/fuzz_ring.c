/*
 * fuzz_ring.c - the data plane's entry decoder: any bytes as a submission
 * ring entry (the header's kind, flags and length taken from the input, the
 * rest as the payload, as a client may scribble them), decoded as the
 * executor does and, for ops, checked by the op layer.
 */
#include <stdint.h>

#include "fuzz_ops.h"
#include "sqe.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_load_manifest();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tileops_sqe e;
	memset(&e, 0, sizeof(e));
	memcpy(&e, data, size < sizeof(e) ? size : sizeof(e));
	if (e.length > sizeof(e.payload) || (e.flags & ~TILEOPS_SQE_F_KNOWN))
		return 0; /* the executor refuses it before decoding */
	char err[512];
	if (e.kind == TILEOPS_SQE_OP) {
		op_desc d;
		if (wire_decode_sqe_op(&e, &d, err, sizeof(err)) == TILEOPS_OK)
			fuzz_check_op(&d);
	} else if (e.kind == TILEOPS_SQE_PLAN_RUN) {
		plan_run_desc r;
		(void)wire_decode_sqe_plan_run(&e, &r, err, sizeof(err));
	} else if (e.kind == TILEOPS_SQE_EVENT_WAIT || e.kind == TILEOPS_SQE_EVENT_RECORD) {
		uint64_t id = 0;
		if (wire_decode_sqe_event(&e, &id, err, sizeof(err)) == TILEOPS_OK &&
		    (e.kind == TILEOPS_SQE_EVENT_WAIT) != (id != 0))
			__builtin_trap(); /* a wait names an event, a record none */
	} else if (e.kind == TILEOPS_SQE_REQUEST) {
		request r;
		if (wire_decode_sqe_request(&e, &r, err, sizeof(err)) == TILEOPS_OK)
			fuzz_check_request(&r);
		request_clear(&r);
	}
	return 0;
}
