/*
 * fuzz_control.c - the control plane's decoder and validation: any bytes
 * as a message on the control socket are unpacked as a tileops.Request,
 * decoded into the executor's request (every count and name bounded) and,
 * for ops and plans, checked by the op layer against the manifest.
 */
#include <stdint.h>

#include "decode.h"
#include "fuzz_ops.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_load_manifest();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Tileops__Request *m = tileops__request__unpack(NULL, size, data);
	if (!m)
		return 0;
	request r;
	char err[512];
	if (wire_decode(m, &r, err, sizeof(err)) == TILEOPS_OK)
		fuzz_check_request(&r);
	request_clear(&r);
	tileops__request__free_unpacked(m, NULL);
	return 0;
}
