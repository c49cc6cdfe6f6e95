/*
 * fuzz_manifest.c - the manifest loader: any bytes as one manifest file's
 * text. Refusals are fine (with a message); crashes, sanitizer reports and
 * leaks are not. Seeded with the project's own manifest files.
 */
#include <stdint.h>
#include <stdlib.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	manifest *m = NULL;
	char err[1024];
	if (size > 1 << 20)
		return 0;
	if (manifest_parse_text("fuzz.yaml", (const char *)data, size, &m, err, sizeof(err)) == 0)
		manifest_free(m);
	return 0;
}
